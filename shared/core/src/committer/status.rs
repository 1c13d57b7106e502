//! What the registry and the locks are told about a batch: tasks released once done
//! with, maintenance events and failures (best effort), tables suspended by a bad record.

use std::collections::BTreeMap;

use super::{CommitError, Committer, TaskResult};
use crate::lock::registry::{Activity, Failure, MaintenanceEvent, RecordAt};
use crate::retry::Retryable;
use crate::task::{SuspendTask, TableName, Task, held_files};

impl Committer {
    /// Releases the tasks done with (`results` in the order of `tasks`) from every table
    /// holding their files; a task that failed stays held, its files kept from the sweep.
    /// Best effort: a release that fails leaves files held (kept) until the task's id is
    /// released again, never a commit undone.
    pub(super) async fn release_done(&self, tasks: &[Task], results: &[(String, TaskResult)]) {
        let mut done: BTreeMap<TableName, Vec<String>> = BTreeMap::new();
        for (task, (_, result)) in tasks.iter().zip(results) {
            if matches!(result, TaskResult::Failed { .. }) {
                continue;
            }
            for table in held_files(task).into_keys() {
                done.entry(table).or_default().push(task.task_id().to_string());
            }
        }
        for (table, ids) in done {
            if let Err(e) = self.registry.release_tasks(&table, &ids).await {
                tracing::warn!(table = %table, tasks = ids.len(), error = %e,
                    "releasing done tasks failed; their files stay held");
            }
        }
    }

    /// Records what maintenance did; best effort: the record is for operators, the
    /// commit it describes is done.
    pub(super) async fn note(&self, table: &TableName, event: MaintenanceEvent) {
        if let Err(e) = self.registry.record(table, &event).await {
            tracing::warn!(table = %table, ?event, error = %e, "recording a maintenance event failed");
        }
    }

    /// Records whether `activity` failed on the table (what status shows as failing) or
    /// succeeded (failing no more); best effort, as [`Self::note`]. A suspension is shown
    /// as such, not as a failure.
    pub(super) async fn note_outcome<T>(
        &self,
        table: &TableName,
        activity: Activity,
        outcome: &Result<T, CommitError>,
    ) {
        let event = match outcome {
            Ok(_) => MaintenanceEvent::Succeeded(activity),
            Err(CommitError::Incompatible { .. }) => return,
            Err(e) => {
                MaintenanceEvent::Failed(Failure { activity, at_ms: crate::lock::now_ms(), error: e.to_string() })
            }
        };
        self.note(table, event).await;
    }

    /// Records a commit's refused tasks as the table's configuration issue (a plan that
    /// commits fails a task only when it refuses it: another topic's, a topic clash), or
    /// the configuration as fine when none was refused.
    pub(super) async fn note_refusals(&self, table: &TableName, results: &[(String, TaskResult)]) {
        let refused = results.iter().find_map(|(_, r)| match r {
            TaskResult::Failed { error, .. } => Some(error.clone()),
            _ => None,
        });
        let event = match refused {
            Some(error) => {
                MaintenanceEvent::Failed(Failure { activity: Activity::Config, at_ms: crate::lock::now_ms(), error })
            }
            None => MaintenanceEvent::Succeeded(Activity::Config),
        };
        self.note(table, event).await;
    }

    /// Marks a table suspended, naming the bad record (see [`SuspendTask`]).
    pub(super) async fn suspend(&self, task: &SuspendTask) -> TaskResult {
        let reason = task.reason();
        tracing::error!(table = %task.table, topic = %task.topic, partition = task.partition, offset = task.offset,
            %reason, "bad record in suspend mode: table suspended, its tasks kept");
        match self.locks.set_suspended(&task.table.to_string(), Some(&reason)).await {
            Ok(()) => {
                let record = RecordAt {
                    topic: task.topic.clone(),
                    partition: task.partition,
                    offset: task.offset,
                    file: task.file.clone(),
                };
                self.note(&task.table, MaintenanceEvent::SuspendedBy(Some(record))).await;
                TaskResult::Committed
            }
            Err(e) => TaskResult::Failed { error: format!("suspending {}: {e}", task.table), retryable: e.retryable() },
        }
    }
}
