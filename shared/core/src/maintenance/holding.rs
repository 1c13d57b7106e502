//! Holding a task's files in the registry from just before it is queued until the
//! committer is done with it, so the orphan sweep never deletes the files of a task
//! still waiting in the queue (a suspended table keeps its tasks for days).
//!
//! ```text
//!  materializer ─▶ HoldingQueue ─ hold_task(table, {task id, files}) ─▶ registry
//!                               └ send ─▶ the inner queue (SQS, in process) ─▶ committer
//!  compactor ─ hold ─▶ registry, then send ─▶ queue ─▶ committer
//!  committer: committed, already committed, rejected ─ release_tasks(table, ids) ─▶ registry
//! ```
//!
//! A task is held under every table it names files of ([`held_files`]): a CommitTask
//! under its table (its data files, its open transactions' files) and under its
//! dead-letter table (its dead-letter files); a CompactionTask under its table (the
//! files it adds). The committer releases a task from the same tables.
//!
//! A hold the committer never releases: the materializer holds a task again and sends it
//! after the committer released it (the same event delivered twice, a backfill handing a
//! segment whose live task just committed), and SQS drops the send as a duplicate (the
//! same task id within five minutes). A CommitTask's hold records its offsets, and
//! maintenance ends it once the table holds them all ([`release_committed`]): any copy
//! of the task still to come is then dropped as already committed, so none of its files
//! can become part of the table. (A dead-letter table holds the same offsets for the
//! tasks it took dead letters from.) A CompactionTask's hold has no offsets and ends with
//! its task only.

use std::sync::Arc;

use async_trait::async_trait;

use super::{HeldOffsets, HeldTask, TableRegistry};
use crate::lock::LockError;
use crate::queue::{QueueError, TaskQueue};
use crate::retry::Retryable;
use crate::table::offsets::CommittedOffsets;
use crate::task::{TableName, Task, held_files};

/// The offsets a CommitTask brings to each table it is held under (its dead-letter table
/// records the same ones); `None` for other tasks and a segment without batches.
fn held_offsets(task: &Task) -> Option<HeldOffsets> {
    let Task::Data(t) = task else { return None };
    let range = t.offsets?;
    Some(HeldOffsets { topic: t.topic.clone(), partition: t.partition, first: range.first, last: range.last })
}

/// Holds `task`'s files (see [`held_files`]) at `now_ms`.
pub async fn hold(registry: &dyn TableRegistry, task: &Task, now_ms: i64) -> Result<(), LockError> {
    let offsets = held_offsets(task);
    for (table, files) in held_files(task) {
        let held =
            HeldTask { task_id: task.task_id().to_string(), files, held_at_ms: now_ms, offsets: offsets.clone() };
        registry.hold_task(&table, &held).await?;
        tracing::debug!(table = %table, task_id = %held.task_id, files = held.files.len(), "task files held");
    }
    Ok(())
}

/// Ends the holds of `table`'s CommitTasks whose offsets `committed` (the table's
/// committed offsets) holds all of: the committer drops any copy of such a task as
/// already committed. Returns the ids released.
pub async fn release_committed(
    registry: &dyn TableRegistry,
    table: &TableName,
    committed: &CommittedOffsets,
) -> Result<Vec<String>, LockError> {
    let covered = |o: &HeldOffsets| committed.get(&o.topic, o.partition).is_some_and(|s| s.covers(o.first, o.last));
    let ids: Vec<String> = registry
        .held_tasks(table)
        .await?
        .into_iter()
        .filter(|t| t.offsets.as_ref().is_some_and(covered))
        .map(|t| t.task_id)
        .collect();
    if !ids.is_empty() {
        registry.release_tasks(table, &ids).await?;
        tracing::info!(table = %table, tasks = ids.len(), task_ids = ?ids,
            "held tasks whose offsets the table holds released (a copy sent again after its commit)");
    }
    Ok(ids)
}

/// A queue that holds each task's files in the registry before sending it on: what the
/// materializer sends through. A task that cannot be held is not sent (the error says
/// why; the sender retries), so no queued task has unheld files.
pub struct HoldingQueue {
    pub inner: Arc<dyn TaskQueue>,
    pub registry: Arc<dyn TableRegistry>,
}

impl HoldingQueue {
    pub fn new(inner: Arc<dyn TaskQueue>, registry: Arc<dyn TableRegistry>) -> Self {
        HoldingQueue { inner, registry }
    }
}

#[async_trait]
impl TaskQueue for HoldingQueue {
    async fn send(&self, task: &Task) -> Result<(), QueueError> {
        // When it was held only tells an operator how long a task has waited: the wall clock.
        hold(self.registry.as_ref(), task, crate::lock::now_ms()).await.map_err(|e| QueueError {
            task_id: task.task_id().to_string(),
            table: task.table().to_string(),
            message: format!("holding its files in the registry: {e}"),
            retryable: e.retryable(),
        })?;
        self.inner.send(task).await
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::maintenance::{MaintenanceEvent, MaintenanceStatus, RegisteredTable};
    use crate::queue::InProcessQueue;
    use std::sync::Mutex;

    /// A registry in memory: the held tasks per table, and a switch to make holds fail.
    #[derive(Default)]
    pub(crate) struct MemoryRegistry {
        pub held: Mutex<BTreeMap<String, Vec<HeldTask>>>,
        pub failing: std::sync::atomic::AtomicBool,
    }

    #[async_trait]
    impl TableRegistry for MemoryRegistry {
        async fn tables(&self) -> Result<Vec<RegisteredTable>, LockError> {
            Ok(Vec::new())
        }
        async fn hold_task(&self, table: &TableName, task: &HeldTask) -> Result<(), LockError> {
            if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(LockError::Store { detail: "throttled".into(), retryable: true });
            }
            let mut held = self.held.lock().unwrap();
            let tasks = held.entry(table.to_string()).or_default();
            tasks.retain(|t| t.task_id != task.task_id);
            tasks.push(task.clone());
            Ok(())
        }
        async fn release_tasks(&self, table: &TableName, ids: &[String]) -> Result<(), LockError> {
            self.held.lock().unwrap().entry(table.to_string()).or_default().retain(|t| !ids.contains(&t.task_id));
            Ok(())
        }
        async fn held_tasks(&self, table: &TableName) -> Result<Vec<HeldTask>, LockError> {
            Ok(self.held.lock().unwrap().get(&table.to_string()).cloned().unwrap_or_default())
        }
        async fn oldest_holds(&self) -> Result<BTreeMap<TableName, i64>, LockError> {
            let held = self.held.lock().unwrap();
            Ok(held
                .iter()
                .filter_map(|(name, tasks)| Some((TableName::parse(name)?, tasks.iter().map(|t| t.held_at_ms).min()?)))
                .collect())
        }
        async fn record(&self, _: &TableName, _: &MaintenanceEvent) -> Result<(), LockError> {
            Ok(())
        }
        async fn status(&self, _: &TableName) -> Result<MaintenanceStatus, LockError> {
            Ok(MaintenanceStatus::default())
        }
    }

    fn table(name: &str) -> TableName {
        TableName { namespace: "kafka".into(), name: name.into() }
    }

    fn task_file(path: &str) -> crate::task::TaskFile {
        crate::task::TaskFile {
            first_offset: 0,
            last_offset: 0,
            record_count: 1,
            data_file: serde_json::json!({"file_path": path}),
        }
    }

    /// A CommitTask of `kafka.orders` with a data file, an open transaction's file and a
    /// dead-letter file.
    fn data_task() -> Task {
        let schema = crate::partition::tests::schema();
        let mut task = crate::task::tests::task(&schema, None, task_file("/w/orders/data/a.parquet"));
        task.dead_letter_table = Some(table("orders_dlq"));
        task.open_transactions = vec![crate::task::PendingTransaction {
            producer_id: 7,
            producer_epoch: 0,
            first_offset: 0,
            last_offset: 0,
            records: 1,
            files: vec![task_file("/w/orders/data/txn.parquet")],
            ..Default::default()
        }];
        task.dead_letter_files = vec![task_file("/w/orders_dlq/data/d.parquet")];
        Task::Data(Box::new(task))
    }

    #[tokio::test]
    async fn tasks_are_held_under_every_table_they_name_files_of_then_sent() {
        let registry = Arc::new(MemoryRegistry::default());
        let inner = Arc::new(InProcessQueue::default());
        let queue = HoldingQueue::new(inner.clone(), registry.clone());
        queue.send(&data_task()).await.unwrap();
        let held = registry.held.lock().unwrap().clone();
        let files = |t: &str| held[t].iter().map(|h| (h.task_id.clone(), h.files.clone())).collect::<Vec<_>>();
        let paths = |p: &[&str]| p.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        assert_eq!(
            files("kafka.orders"),
            vec![("t1".to_string(), paths(&["/w/orders/data/a.parquet", "/w/orders/data/txn.parquet"]))]
        );
        assert_eq!(files("kafka.orders_dlq"), vec![("t1".to_string(), paths(&["/w/orders_dlq/data/d.parquet"]))]);
        assert_eq!(inner.drain(), vec![data_task()]);
        // A suspension names no file: nothing held, still sent.
        let suspend = Task::Suspend(Box::new(crate::task::SuspendTask::new(table("x"), "x", 0, 1, "f", "bad")));
        assert!(held_files(&suspend).is_empty());
    }

    #[tokio::test]
    async fn holds_of_commit_tasks_whose_offsets_the_table_holds_are_released_others_kept() {
        let registry = MemoryRegistry::default();
        // The CommitTask holds its offsets (0..=9 of orders-0) under both its tables.
        hold(&registry, &data_task(), 1).await.unwrap();
        let held = registry.held_tasks(&table("orders")).await.unwrap();
        let offsets = HeldOffsets { topic: "orders".into(), partition: 0, first: 0, last: 9 };
        assert_eq!(held[0].offsets.as_ref(), Some(&offsets));
        let compaction =
            HeldTask { task_id: "compaction-1".into(), files: vec!["/c".into()], held_at_ms: 1, offsets: None };
        registry.hold_task(&table("orders"), &compaction).await.unwrap();

        let committed = |ranges: &[(&str, i32, i64, i64)]| {
            let mut c = CommittedOffsets::default();
            ranges.iter().for_each(|&(t, p, a, b)| c.insert(t, p, a, b));
            c
        };
        // Part of its offsets, or another partition's: kept.
        for partial in [committed(&[("orders", 0, 0, 8)]), committed(&[("orders", 1, 0, 99)])] {
            assert!(release_committed(&registry, &table("orders"), &partial).await.unwrap().is_empty());
        }
        // All of them: released; the compaction's hold (no offsets) kept.
        let all = committed(&[("orders", 0, 0, 99)]);
        assert_eq!(release_committed(&registry, &table("orders"), &all).await.unwrap(), ["t1"]);
        assert_eq!(registry.held_tasks(&table("orders")).await.unwrap(), [compaction]);
        // The dead-letter table's hold goes by that table's offsets.
        assert_eq!(release_committed(&registry, &table("orders_dlq"), &all).await.unwrap(), ["t1"]);
        assert!(registry.held_tasks(&table("orders_dlq")).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_task_whose_files_cannot_be_held_is_not_sent() {
        let registry = Arc::new(MemoryRegistry::default());
        registry.failing.store(true, std::sync::atomic::Ordering::SeqCst);
        let inner = Arc::new(InProcessQueue::default());
        let queue = HoldingQueue::new(inner.clone(), registry);
        let e = queue.send(&data_task()).await.unwrap_err();
        assert!(e.retryable(), "{e}");
        assert!(e.to_string().contains("holding its files in the registry: lock store: throttled"), "{e}");
        assert!(inner.is_empty());
    }
}
