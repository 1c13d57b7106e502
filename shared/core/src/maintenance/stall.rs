//! A stalled committer, seen from outside it: a committer that commits nothing emits no
//! metric either, so the compactor (on its schedule) measures how long the tasks still
//! waiting have waited.
//!
//! ```text
//!  registry.oldest_holds() ─▶ per table holding tasks (held from just before they are
//!                             queued until the committer is done with them), the oldest
//!  registry.tables() ─▶ suspended ones counted and left out (their tasks wait by design)
//!  age of each other table's oldest task (0: none held)
//!  the queue's message count (when known): 0 ─▶ nothing waits, whatever is held
//! ```
//!
//! Metrics: `StalledTaskAge` per table not suspended (and its maximum over tables, 0 when
//! nothing waits), `TasksWaiting`, `SuspendedTables`.

use super::TableRegistry;
use crate::lock::LockError;
use crate::metrics::{self, STALLED_TASK_AGE, SUSPENDED_TABLES, TABLE, TASKS_WAITING};
use crate::table::TableName;

/// What waits, at one moment.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Waiting {
    /// Tables suspended: their tasks are kept in the queue until they are resumed.
    pub suspended: usize,
    /// Per table not suspended, how long its oldest held task has waited (ms; 0: none).
    pub oldest_ms: Vec<(TableName, i64)>,
}

impl Waiting {
    /// Reads the registry at `now_ms`.
    pub async fn read(registry: &dyn TableRegistry, now_ms: i64) -> Result<Waiting, LockError> {
        let mut holds = registry.oldest_holds().await?;
        let mut waiting = Waiting::default();
        for registered in registry.tables().await? {
            let held = holds.remove(&registered.table);
            if registered.suspended.is_some() {
                waiting.suspended += 1;
            } else {
                waiting.oldest_ms.push((registered.table, held.map_or(0, |at| (now_ms - at).max(0))));
            }
        }
        // Tables the committer never reached: their tasks wait all the same.
        waiting.oldest_ms.extend(holds.into_iter().map(|(table, at)| (table, (now_ms - at).max(0))));
        Ok(waiting)
    }

    /// Records the metrics; `queued`: the queue's message count, when it could be read
    /// (none in the queue means nothing waits, whatever the registry still holds).
    pub fn record(&self, queued: Option<u64>) {
        let nothing_queued = queued == Some(0);
        metrics::record(&STALLED_TASK_AGE, &[], 0.0);
        for (table, age_ms) in &self.oldest_ms {
            let age = if nothing_queued { 0.0 } else { *age_ms as f64 / 1000.0 };
            metrics::record(&STALLED_TASK_AGE, &[(TABLE, &table.to_string())], age);
        }
        metrics::record(&SUSPENDED_TABLES, &[], self.suspended as f64);
        if let Some(queued) = queued {
            metrics::record(&TASKS_WAITING, &[], queued as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Recorder, scope};

    fn table(name: &str) -> TableName {
        TableName { namespace: "kafka".into(), name: name.into() }
    }

    #[tokio::test]
    async fn a_table_the_committer_never_reached_waits_too() {
        let registry = crate::maintenance::holding::tests::MemoryRegistry::default();
        let held =
            |id: &str, at| super::super::HeldTask { task_id: id.into(), files: vec![], held_at_ms: at, offsets: None };
        registry.hold_task(&table("new"), &held("t1", 1_000)).await.unwrap();
        registry.hold_task(&table("new"), &held("t2", 5_000)).await.unwrap();
        let waiting = Waiting::read(&registry, 61_000).await.unwrap();
        assert_eq!(waiting, Waiting { suspended: 0, oldest_ms: vec![(table("new"), 60_000)] });
    }

    #[tokio::test]
    async fn the_oldest_task_of_a_table_sets_the_stall_unless_the_queue_is_empty() {
        let waiting = Waiting { suspended: 1, oldest_ms: vec![(table("a"), 90_000), (table("b"), 0)] };
        let recorder = Recorder::new();
        scope(recorder.clone(), async { waiting.record(Some(3)) }).await;
        assert_eq!(recorder.value(&STALLED_TASK_AGE, &[]), Some(90.0), "the maximum over tables");
        assert_eq!(recorder.value(&STALLED_TASK_AGE, &[(TABLE, "kafka.a")]), Some(90.0));
        assert_eq!(recorder.value(&STALLED_TASK_AGE, &[(TABLE, "kafka.b")]), Some(0.0));
        assert_eq!(recorder.value(&SUSPENDED_TABLES, &[]), Some(1.0));
        assert_eq!(recorder.value(&TASKS_WAITING, &[]), Some(3.0));

        // Held, but the queue is empty (a release that failed): no stall.
        let recorder = Recorder::new();
        scope(recorder.clone(), async { waiting.record(Some(0)) }).await;
        assert_eq!(recorder.value(&STALLED_TASK_AGE, &[]), Some(0.0));
        // No tables at all: still a 0, so the alarm sees the compactor ran.
        let recorder = Recorder::new();
        scope(recorder.clone(), async { Waiting::default().record(None) }).await;
        assert_eq!(recorder.value(&STALLED_TASK_AGE, &[]), Some(0.0));
        assert_eq!(recorder.value(&TASKS_WAITING, &[]), None);
    }
}
