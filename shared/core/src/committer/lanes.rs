//! How one batch's tables are committed at once: one lane per table, at most
//! [`Committer::concurrency`] commits in flight.
//!
//! ```text
//!  lane (one per table, in the order the batch names them)
//!    front:  its compactions ─▶ the dead letters it is the dead-letter table of
//!    main:   wait for the fronts holding its tasks' dead letters
//!            ─▶ its tasks (FIFO order) but those whose dead letters failed
//!  every step takes a permit (a semaphore of `concurrency`) only while it commits, never
//!  while it waits for another lane: waiting cannot starve the steps it waits for.
//! ```
//!
//! Each step is a whole table commit ([`Committer::compact_table`],
//! [`Committer::commit_table`]) under that table's lease, so one table's failure is
//! its own tasks' result only.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use futures::future::{FutureExt, join_all};
use tokio::sync::Semaphore;

use super::dead_letters::dead_letter_task;
use super::{BatchReport, CommittedSnapshot, Committer, TaskResult};
use crate::task::{CommitTask, CompactionTask, TableName};

/// Per-task results of one table commit, and its snapshot if it made one.
type Outcome = (Vec<(String, TaskResult)>, Option<CommittedSnapshot>);

/// One table's work in a batch.
struct Lane<'a> {
    table: TableName,
    /// Its compactions: committed before its new data.
    compactions: Vec<&'a CompactionTask>,
    /// Other tasks' dead letters, this being their dead-letter table.
    dead_letters: Vec<&'a CommitTask>,
    /// The tasks whose rows go to this table, in the batch's order.
    data: Vec<&'a CommitTask>,
}

impl Lane<'_> {
    /// Whether its topic lists Delta: the table has a Delta mirror to bring in step.
    fn delta(&self) -> bool {
        self.data.iter().any(|t| t.formats.delta()) || self.compactions.iter().any(|c| c.formats.delta())
    }
}

/// What a lane did before its new data; shared with the lanes that wait for it.
#[derive(Default)]
struct Front {
    compactions: Outcome,
    dead_letters: Outcome,
}

/// The batch's lanes, in the order their tables first appear.
fn lanes<'a>(
    compactions: &[&'a CompactionTask],
    dead_letters: &[&'a CommitTask],
    data: &[&'a CommitTask],
) -> Vec<Lane<'a>> {
    let mut lanes: Vec<Lane<'a>> = Vec::new();
    let mut lane = |table: &TableName| -> usize {
        match lanes.iter().position(|l| l.table == *table) {
            Some(i) => i,
            None => {
                let (compactions, dead_letters, data) = (Vec::new(), Vec::new(), Vec::new());
                lanes.push(Lane { table: table.clone(), compactions, dead_letters, data });
                lanes.len() - 1
            }
        }
    };
    let compactions: Vec<_> = compactions.iter().map(|&c| (lane(&c.table), c)).collect();
    let dead_letters: Vec<_> = dead_letters.iter().map(|&d| (lane(&d.table), d)).collect();
    let data: Vec<_> = data.iter().map(|&t| (lane(&t.table), t)).collect();
    for (i, c) in compactions {
        lanes[i].compactions.push(c);
    }
    for (i, d) in dead_letters {
        lanes[i].dead_letters.push(d);
    }
    for (i, t) in data {
        lanes[i].data.push(t);
    }
    lanes
}

impl Committer {
    /// Commits compactions and data tasks, different tables at once: per table its
    /// compactions, then the dead letters it takes, then its new data once its tasks'
    /// dead-letter tables are committed. Results: the compactions', then the data
    /// tasks' in their order.
    pub(super) async fn commit_lanes(
        &self,
        compactions: &[&CompactionTask],
        data: &[&CommitTask],
        deadline: Option<Instant>,
    ) -> BatchReport {
        let dead_letters: Vec<CommitTask> = data.iter().copied().filter_map(dead_letter_task).collect();
        let dead_letter_table: HashMap<&str, &TableName> =
            dead_letters.iter().map(|d| (d.task_id.as_str(), &d.table)).collect();
        let lanes = lanes(compactions, &dead_letters.iter().collect::<Vec<_>>(), data);
        let permits = Semaphore::new(self.concurrency.max(1));
        let fronts: HashMap<&TableName, _> =
            lanes.iter().map(|lane| (&lane.table, self.front(lane, &permits, deadline).shared())).collect();
        let mains = lanes.iter().map(|lane| async {
            let front = fronts[&lane.table].clone().await;
            let waits_for: HashSet<&TableName> =
                lane.data.iter().filter_map(|t| dead_letter_table.get(t.task_id.as_str()).copied()).collect();
            let mut failed: HashSet<String> = HashSet::new();
            for table in waits_for {
                let theirs = fronts[table].clone().await;
                failed.extend(theirs.dead_letters.0.iter().filter(|(_, r)| is_failed(r)).map(|(id, _)| id.clone()));
            }
            // A task whose dead letters failed waits whole: its main part too.
            let tasks: Vec<&CommitTask> = lane.data.iter().copied().filter(|t| !failed.contains(&t.task_id)).collect();
            let mut main = match tasks.is_empty() {
                true => Outcome::default(),
                false => {
                    let _permit = permits.acquire().await.ok();
                    self.commit_table(&lane.table, &tasks, deadline).await
                }
            };
            if self.mirrors(&lane.table, lane.delta()) {
                let _permit = permits.acquire().await.ok();
                self.mirror_delta(&lane.table, &mut main.0).await;
            }
            (front, main)
        });
        merge(data, join_all(mains).await)
    }

    /// A lane's compactions, then the dead letters it takes, each under a permit.
    async fn front(&self, lane: &Lane<'_>, permits: &Semaphore, deadline: Option<Instant>) -> Arc<Front> {
        let mut front = Front::default();
        if !lane.compactions.is_empty() {
            let _permit = permits.acquire().await.ok();
            front.compactions = self.compact_table(&lane.table, &lane.compactions, deadline).await;
        }
        if !lane.dead_letters.is_empty() {
            let _permit = permits.acquire().await.ok();
            front.dead_letters = self.commit_table(&lane.table, &lane.dead_letters, deadline).await;
        }
        Arc::new(front)
    }
}

fn is_failed(result: &TaskResult) -> bool {
    matches!(result, TaskResult::Failed { .. })
}

/// The batch's report from its lanes: compaction results, then each data task's in
/// `data`'s order, its dead letters' result unless its main table's says more (a
/// task committed to its dead-letter table and found already in its main table was
/// committed).
fn merge(data: &[&CommitTask], lanes: Vec<(Arc<Front>, Outcome)>) -> BatchReport {
    let mut report = BatchReport::default();
    let mut results: HashMap<String, TaskResult> = HashMap::new();
    for (front, _) in &lanes {
        report.results.extend(front.compactions.0.iter().cloned());
        report.snapshots.extend(front.compactions.1.iter().cloned());
    }
    for (front, _) in &lanes {
        results.extend(front.dead_letters.0.iter().cloned());
        report.snapshots.extend(front.dead_letters.1.iter().cloned());
    }
    for (_, (main, snapshot)) in lanes {
        for (id, result) in main {
            if !(results.get(&id) == Some(&TaskResult::Committed) && result == TaskResult::AlreadyCommitted) {
                results.insert(id, result);
            }
        }
        report.snapshots.extend(snapshot);
    }
    let data_results = data.iter().map(|t| {
        let result = results.get(&t.task_id).cloned().unwrap_or(TaskResult::AlreadyCommitted);
        (t.task_id.clone(), result)
    });
    report.results.extend(data_results);
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{CompactionKind, TASK_VERSION, TaskFile};

    fn name(table: &str) -> TableName {
        TableName { namespace: "kafka".into(), name: table.into() }
    }

    fn data(id: &str, table: &str) -> CommitTask {
        let file = TaskFile {
            first_offset: 0,
            last_offset: 9,
            record_count: 10,
            data_file: serde_json::json!({"file_path": format!("/w/{id}.parquet")}),
        };
        let mut task = crate::task::tests::task(&crate::partition::tests::schema(), None, file);
        (task.task_id, task.table) = (id.into(), name(table));
        task
    }

    fn compaction(id: &str, table: &str) -> CompactionTask {
        CompactionTask {
            formats: Default::default(),
            version: TASK_VERSION,
            kind: CompactionKind::Compaction,
            task_id: id.into(),
            table: name(table),
            removed: vec![],
            added: vec![],
            schema: crate::partition::tests::schema(),
            partition_spec: None,
            created_at_ms: 0,
            data_sequence_number: None,
            deletes_applied: Vec::new(),
            left_out: None,
        }
    }

    /// A lane's table, and the ids of its compactions, dead letters and data tasks.
    type Shape<'a> = (String, Vec<&'a str>, Vec<&'a str>, Vec<&'a str>);

    /// Each lane's [`Shape`].
    fn shape<'a>(lanes: &[Lane<'a>]) -> Vec<Shape<'a>> {
        lanes
            .iter()
            .map(|l| {
                (
                    l.table.name.clone(),
                    l.compactions.iter().map(|c| c.task_id.as_str()).collect(),
                    l.dead_letters.iter().map(|d| d.task_id.as_str()).collect(),
                    l.data.iter().map(|t| t.task_id.as_str()).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn no_tasks_no_lanes() {
        assert!(lanes(&[], &[], &[]).is_empty());
    }

    #[test]
    fn one_lane_per_table_its_tasks_in_the_batch_order() {
        let (a1, b1, a2, a3) = (data("a1", "a"), data("b1", "b"), data("a2", "a"), data("a3", "a"));
        let lanes = lanes(&[], &[], &[&a1, &b1, &a2, &a3]);
        assert_eq!(
            shape(&lanes),
            vec![("a".into(), vec![], vec![], vec!["a1", "a2", "a3"]), ("b".into(), vec![], vec![], vec!["b1"])]
        );
    }

    #[test]
    fn a_tables_compactions_share_its_lane_and_its_tables_come_first() {
        let (a1, b1) = (data("a1", "a"), data("b1", "b"));
        let (cb, ca) = (compaction("cb", "b"), compaction("ca", "a"));
        let lanes = lanes(&[&cb, &ca], &[], &[&a1, &b1]);
        assert_eq!(
            shape(&lanes),
            vec![("b".into(), vec!["cb"], vec![], vec!["b1"]), ("a".into(), vec!["ca"], vec![], vec!["a1"])]
        );
    }

    #[test]
    fn dead_letters_go_to_their_tables_lane() {
        let (a1, a2) = (data("a1", "a"), data("a2", "a"));
        // The parts of a1 and a2 for their dead-letter table, and a task of that table's own.
        let (d1, d2, own) = (data("a1", "a_dlq"), data("a2", "a_dlq"), data("x1", "a_dlq"));
        let lanes = lanes(&[], &[&d1, &d2], &[&a1, &own, &a2]);
        assert_eq!(
            shape(&lanes),
            vec![
                ("a_dlq".into(), vec![], vec!["a1", "a2"], vec!["x1"]),
                ("a".into(), vec![], vec![], vec!["a1", "a2"])
            ]
        );
    }

    #[test]
    fn the_report_has_compactions_first_then_data_in_the_batch_order() {
        let (a1, b1, a2) = (data("a1", "a"), data("b1", "b"), data("a2", "a"));
        let failed = TaskResult::Failed { error: "x".into(), retryable: true };
        let front = |compactions: Vec<(String, TaskResult)>| {
            Arc::new(Front { compactions: (compactions, None), dead_letters: Outcome::default() })
        };
        let lanes = vec![
            (front(vec![]), (vec![("a1".into(), TaskResult::Committed), ("a2".into(), failed.clone())], None)),
            (
                front(vec![("cb".into(), TaskResult::Committed)]),
                (vec![("b1".into(), TaskResult::AlreadyCommitted)], None),
            ),
        ];
        let report = merge(&[&a1, &b1, &a2], lanes);
        let expected: Vec<(String, TaskResult)> = vec![
            ("cb".into(), TaskResult::Committed),
            ("a1".into(), TaskResult::Committed),
            ("b1".into(), TaskResult::AlreadyCommitted),
            ("a2".into(), failed),
        ];
        assert_eq!(report.results, expected);
    }

    #[test]
    fn a_task_committed_to_its_dead_letter_table_and_found_in_its_main_table_was_committed() {
        let (a1, a2) = (data("a1", "a"), data("a2", "a"));
        let dlq = Arc::new(Front {
            compactions: Outcome::default(),
            dead_letters: (vec![("a1".into(), TaskResult::Committed), ("a2".into(), TaskResult::Committed)], None),
        });
        let failed = TaskResult::Failed { error: "x".into(), retryable: true };
        let main = vec![("a1".into(), TaskResult::AlreadyCommitted), ("a2".into(), failed.clone())];
        let report = merge(&[&a1, &a2], vec![(dlq, Outcome::default()), (Arc::new(Front::default()), (main, None))]);
        let expected: Vec<(String, TaskResult)> = vec![("a1".into(), TaskResult::Committed), ("a2".into(), failed)];
        assert_eq!(report.results, expected, "the main table's failure says more than its dead letters' commit");
    }
}
