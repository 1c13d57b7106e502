//! The task queue between the materializer (and compactor) and the committer.
//!
//! On AWS it is a FIFO SQS queue (`floe_aws::sqs::SqsTaskQueue`): message group = the table, so
//! one table's tasks are delivered in order and never to two committers at once;
//! deduplication id = the segment's identity, so a segment materialized twice within
//! SQS's five-minute window is queued once (later duplicates are dropped by the
//! committer, which checks offsets against the table). Locally, `floe local run` hands
//! tasks over in process ([`InProcessQueue`]).

use std::sync::Mutex;

use async_trait::async_trait;

use crate::retry::Retryable;
use crate::task::{TableName, Task};

/// A task could not be queued.
#[derive(Debug, thiserror::Error)]
#[error("queueing task {task_id} of {table}: {message}")]
pub struct QueueError {
    pub task_id: String,
    pub table: String,
    pub message: String,
    pub retryable: bool,
}

impl Retryable for QueueError {
    fn retryable(&self) -> bool {
        self.retryable
    }
}

/// Where tasks go.
#[async_trait]
pub trait TaskQueue: Send + Sync {
    async fn send(&self, task: &Task) -> Result<(), QueueError>;
}

/// Tasks handed over inside one process (`floe local run`).
#[derive(Default)]
pub struct InProcessQueue {
    tasks: Mutex<Vec<Task>>,
}

impl InProcessQueue {
    pub fn len(&self) -> usize {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes every queued task, in the order they were sent.
    pub fn drain(&self) -> Vec<Task> {
        std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[async_trait]
impl TaskQueue for InProcessQueue {
    async fn send(&self, task: &Task) -> Result<(), QueueError> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner()).push(task.clone());
        Ok(())
    }
}

/// The FIFO message group of a table: its name when SQS accepts it, else a hash of it.
pub fn message_group(table: &TableName) -> String {
    let name = table.to_string();
    let allowed = |c: char| c.is_ascii_alphanumeric() || c.is_ascii_punctuation();
    if name.len() <= 128 && name.chars().all(allowed) {
        name
    } else {
        format!("table-{:016x}", twox_hash::XxHash64::oneshot(0, name.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_groups_are_table_names_within_sqs_limits() {
        let t = |ns: &str, name: &str| TableName { namespace: ns.into(), name: name.into() };
        assert_eq!(message_group(&t("kafka", "orders")), "kafka.orders");
        let long = message_group(&t("kafka", &"x".repeat(200)));
        assert!(long.starts_with("table-") && long.len() <= 128);
        assert_eq!(long, message_group(&t("kafka", &"x".repeat(200))));
        assert!(message_group(&t("kafka", "ördners")).starts_with("table-"));
    }
}
