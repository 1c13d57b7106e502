//! `floe local resolve` and `floe aws resolve`: an operator's decision on a stranded
//! transaction part (its records came after their producer's marker left the table
//! state, so which marker was theirs cannot be told without a guess; status shows the
//! table `degraded`, naming each part). The operator looks the transaction's outcome up
//! in Kafka and decides: committed, its records become rows; aborted, they never do.
//!
//! The decision is checked here against the table's state (the part must be stranded
//! now), then carried out by the committer, the table state's one writer, as a
//! [`ResolveTask`]: at once by the local committer, or queued for the committer function
//! on AWS (the stack's task queue, where the table's other tasks wait in order).

use floe_core::committer::{Committer, TaskResult};
use floe_core::table::state::{STATE_KEY, TableState};
use floe_core::table::{CatalogTables, TableName, committed_offsets, floe_summary};
use floe_core::task::{ResolveTask, Task};

/// What the operator decides: the part of `table` at `partition` from `first_offset`,
/// committed or aborted in Kafka.
#[derive(Debug, Clone)]
pub struct Decision {
    pub table: String,
    pub partition: i32,
    pub first_offset: i64,
    pub commit: bool,
}

impl Decision {
    /// The task carrying the decision, once the table's state shows the part stranded;
    /// else an error naming the stranded parts there are.
    pub async fn task(&self, tables: &CatalogTables) -> anyhow::Result<ResolveTask> {
        let name = TableName::parse(&self.table)
            .ok_or_else(|| anyhow::anyhow!("{}: not a table name (namespace.name)", self.table))?;
        let loaded = tables.load(&name).await?.ok_or_else(|| anyhow::anyhow!("{name}: no such table"))?;
        let state = TableState::load(&tables.file_io, floe_summary(&loaded.metadata).get(STATE_KEY)).await?;
        let committed = committed_offsets(&name, &loaded.metadata)?;
        let stranded = state.stranded(&committed);
        let part = stranded
            .iter()
            .map(|s| s.part)
            .find(|p| p.partition == self.partition && p.transaction.first_offset == self.first_offset);
        match part {
            Some(part) => Ok(ResolveTask::new(name, &part.topic, self.partition, self.first_offset, self.commit)),
            None => {
                let there: Vec<String> = stranded
                    .iter()
                    .map(|s| format!("partition {} offset {}", s.part.partition, s.part.transaction.first_offset))
                    .collect();
                let there = if there.is_empty() { "none".to_string() } else { there.join(", ") };
                anyhow::bail!(
                    "{name}: no stranded transaction part at partition {} offset {} (stranded parts: {there})",
                    self.partition,
                    self.first_offset
                )
            }
        }
    }

    /// What was done, for the operator.
    pub fn done(&self) -> String {
        let outcome =
            if self.commit { "committed: its records are rows now" } else { "aborted: its records never are" };
        format!(
            "{}: the transaction at partition {} offset {} {outcome}",
            self.table, self.partition, self.first_offset
        )
    }
}

/// Carries out `decision` with the local `committer`, now.
pub async fn local(committer: &Committer, tables: &CatalogTables, decision: &Decision) -> anyhow::Result<String> {
    let task = decision.task(tables).await?;
    let report = committer.commit_all(&[Task::Resolve(Box::new(task))], None).await;
    match report.results.into_iter().next().map(|(_, result)| result) {
        Some(TaskResult::Failed { error, .. }) => anyhow::bail!("{error}"),
        _ => Ok(decision.done()),
    }
}
