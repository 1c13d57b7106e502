//! CommitTasks through a FIFO SQS queue; tasks over SQS's 256 KiB limit go to S3 and the
//! message carries their location.

use async_trait::async_trait;
use aws_sdk_s3::error::DisplayErrorContext;
use serde::{Deserialize, Serialize};

use crate::retry::sdk_error_retryable;
use crate::s3::read_s3_uri;
use floe_core::queue::{QueueError, TaskQueue, message_group};
use floe_core::retry::Retryable;
use floe_core::storage::split_s3_uri;
use floe_core::task::{TASK_VERSION, Task, TaskError};

/// Largest message body sent inline (SQS accepts 256 KiB; a margin for attributes).
pub const MAX_INLINE_BYTES: usize = 250 * 1024;

/// The body of a message whose task is stored in S3.
#[derive(Debug, Serialize, Deserialize)]
struct StoredTask {
    version: u32,
    task_location: String,
}

/// Sends tasks to a FIFO queue.
#[derive(Clone)]
pub struct SqsTaskQueue {
    sqs: aws_sdk_sqs::Client,
    s3: aws_sdk_s3::Client,
    queue_url: String,
    /// `s3://bucket/prefix/` where oversized tasks are stored.
    overflow: String,
}

impl SqsTaskQueue {
    pub fn new(sqs: aws_sdk_sqs::Client, s3: aws_sdk_s3::Client, queue_url: &str, overflow: &str) -> Self {
        let overflow = if overflow.ends_with('/') { overflow.to_string() } else { format!("{overflow}/") };
        SqsTaskQueue { sqs, s3, queue_url: queue_url.to_string(), overflow }
    }
}

#[async_trait]
impl TaskQueue for SqsTaskQueue {
    async fn send(&self, task: &Task) -> Result<(), QueueError> {
        let (task_id, table) = (task.task_id(), task.table());
        let error = |message: String, retryable: bool| QueueError {
            task_id: task_id.to_string(),
            table: table.to_string(),
            message,
            retryable,
        };
        let mut body = task.to_json().map_err(|e| error(e.to_string(), false))?;
        if body.len() > MAX_INLINE_BYTES {
            let location = format!("{}tasks/{table}/{task_id}.json", self.overflow);
            let (bucket, key) =
                split_s3_uri(&location).ok_or_else(|| error(format!("overflow location {location}"), false))?;
            self.s3
                .put_object()
                .bucket(bucket)
                .key(key)
                .content_type("application/json")
                .body(body.into_bytes().into())
                .send()
                .await
                .map_err(|e| {
                    error(format!("storing {location}: {}", DisplayErrorContext(&e)), sdk_error_retryable(&e))
                })?;
            body = serde_json::to_string(&StoredTask { version: TASK_VERSION, task_location: location })
                .map_err(|e| error(e.to_string(), false))?;
        }
        self.sqs
            .send_message()
            .queue_url(&self.queue_url)
            .message_group_id(message_group(table))
            .message_deduplication_id(task_id)
            .message_body(body)
            .send()
            .await
            .map_err(|e| error(format!("SendMessage: {}", DisplayErrorContext(&e)), sdk_error_retryable(&e)))?;
        tracing::info!(%task_id, %table, "task queued");
        Ok(())
    }
}

/// Why a message could not be turned back into a task.
#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    #[error(transparent)]
    Task(#[from] TaskError),
    #[error("fetching the stored task {location}: {message}")]
    Fetch { location: String, message: String, retryable: bool },
}

impl Retryable for MessageError {
    /// A task that does not parse is not; a stored task that could not be fetched, as S3
    /// answered.
    fn retryable(&self) -> bool {
        matches!(self, MessageError::Fetch { retryable: true, .. })
    }
}

/// The task a message carries, fetching it from S3 when it was stored there.
pub async fn task_from_message(s3: &aws_sdk_s3::Client, body: &str) -> Result<Task, MessageError> {
    let Ok(stored) = serde_json::from_str::<StoredTask>(body) else {
        return Ok(Task::from_json(body.as_bytes())?);
    };
    let location = stored.task_location;
    let fetch =
        |message: String, retryable: bool| MessageError::Fetch { location: location.clone(), message, retryable };
    let bytes = read_s3_uri(s3, &location).await.map_err(|(message, retryable)| fetch(message, retryable))?;
    Ok(Task::from_json(&bytes)?)
}

/// The messages in a queue, visible and in flight (one `GetQueueAttributes` call: what
/// the compactor's stall metric gates on).
pub async fn queued_messages(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> Result<u64, String> {
    use aws_sdk_sqs::types::QueueAttributeName::{ApproximateNumberOfMessages, ApproximateNumberOfMessagesNotVisible};
    let got = sqs
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(ApproximateNumberOfMessages)
        .attribute_names(ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .map_err(|e| DisplayErrorContext(&e).to_string())?;
    let attributes = got.attributes.unwrap_or_default();
    let count = |name| attributes.get(&name).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    Ok(count(ApproximateNumberOfMessages) + count(ApproximateNumberOfMessagesNotVisible))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_task_that_could_not_be_fetched_is_retried_as_s3_answered_and_a_bad_task_never() {
        let fetch =
            |retryable| MessageError::Fetch { location: "s3://b/t.json".into(), message: "GET".into(), retryable };
        assert!(fetch(true).retryable());
        assert!(!fetch(false).retryable());
        assert!(!MessageError::Task(TaskError::Version(99)).retryable());
    }
}
