//! The committer function: its environment, the committer built from it, and an SQS
//! batch of tasks handled: committed, the failed ones given back (a partial batch response).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use floe_core::metrics;
use floe_core::retry::Retryable;

use super::{
    COMMITTER_TIMEOUT_SECONDS, InitError, count, function_timeout, load_config, open_catalog, required, s3_client,
    seconds, table_registry,
};
use crate::catalogs::OpenedCatalog;

/// The committer's environment.
#[derive(Debug, Clone)]
pub struct CommitterEnv {
    /// `FLOE_CONFIG`: `s3://…` of `floe.toml`, for its `[catalog]` (Glue without it).
    pub config: Option<String>,
    /// `FLOE_WAREHOUSE`: `s3://bucket/prefix` where new tables are created.
    pub warehouse: String,
    /// `FLOE_LOCK_TABLE`: the DynamoDB table of leases and table statuses.
    pub lock_table: String,
    /// `FLOE_TASK_QUEUE_URL`: the queue the committer reads, where it shortens the wait
    /// of the tasks it gives back for a retryable reason.
    pub task_queue_url: String,
    /// `FLOE_RETRY_VISIBILITY_SECONDS`: how long a task given back for a retryable reason
    /// waits before its first retry (default 30), doubled at each receive up to 8 times
    /// that; other failures wait the queue's visibility timeout.
    pub retry_visibility: Duration,
    /// `FLOE_LEASE_SECONDS`: lease length, renewed during a commit (default 60).
    pub lease: Duration,
    /// `FLOE_COMMIT_CONCURRENCY`: how many tables of a batch are committed at once
    /// (default [`floe_core::committer::DEFAULT_CONCURRENCY`], at least 1).
    pub concurrency: usize,
    pub s3_path_style: bool,
    /// `FLOE_FUNCTION_TIMEOUT_SECONDS`: the function's timeout, the budget when the
    /// invocation's deadline is not a real one (default 300, the template's).
    pub timeout: Duration,
}

impl CommitterEnv {
    pub fn from_env() -> Result<Self, InitError> {
        Ok(CommitterEnv {
            config: std::env::var("FLOE_CONFIG").ok().filter(|v| !v.is_empty()),
            warehouse: required("FLOE_WAREHOUSE")?,
            lock_table: required("FLOE_LOCK_TABLE")?,
            task_queue_url: required("FLOE_TASK_QUEUE_URL")?,
            retry_visibility: seconds("FLOE_RETRY_VISIBILITY_SECONDS", 30)?,
            lease: seconds("FLOE_LEASE_SECONDS", 60)?,
            concurrency: count("FLOE_COMMIT_CONCURRENCY", floe_core::committer::DEFAULT_CONCURRENCY)?,
            s3_path_style: std::env::var("FLOE_S3_PATH_STYLE").is_ok_and(|v| v == "true" || v == "1"),
            timeout: function_timeout(COMMITTER_TIMEOUT_SECONDS)?,
        })
    }
}

/// The committer, the S3 client that fetches tasks stored in S3, and the queue whose
/// failed tasks' wait it shortens when they failed for a retryable reason.
pub struct CommitterService {
    pub committer: floe_core::committer::Committer,
    /// The catalog's access check, for the tables of each batch.
    pub access: crate::access::AccessCheck,
    pub s3: aws_sdk_s3::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub task_queue_url: String,
    pub retry_visibility: Duration,
}

/// The committer's catalog and its files: `[catalog]` of `FLOE_CONFIG` (Glue without it).
pub async fn committer_catalog(aws: &aws_config::SdkConfig, env: &CommitterEnv) -> Result<OpenedCatalog, InitError> {
    let s3 = s3_client(aws, env.s3_path_style);
    let config = load_config(&s3, env.config.as_deref()).await?;
    open_catalog(aws, &s3, &config, &env.lock_table).await
}

/// Builds the committer from the environment, the AWS clients and its catalog
/// ([`committer_catalog`]), once per container.
pub fn committer(aws: &aws_config::SdkConfig, env: &CommitterEnv, opened: OpenedCatalog) -> CommitterService {
    let s3 = s3_client(aws, env.s3_path_style);
    let OpenedCatalog { catalog, file_io, delta_log, delta_catalog, .. } = opened;
    let committer = floe_core::committer::Committer::new(
        catalog.clone(),
        file_io,
        Arc::new(crate::dynamodb::DynamoDbLocks::new(aws_sdk_dynamodb::Client::new(aws), &env.lock_table)),
        table_registry(aws, &env.lock_table),
        env.warehouse.trim_end_matches('/'),
        format!("committer-{}", uuid::Uuid::new_v4()),
    )
    .with_lease_ttl(env.lease)
    .with_retry(floe_core::retry::RetryPolicy { attempts: 8, ..Default::default() })
    .with_concurrency(env.concurrency)
    .with_clock(floe_core::lock::Clock::Wall)
    .with_delta_log(delta_log)
    .with_delta_catalog(delta_catalog);
    CommitterService {
        committer,
        access: crate::access::AccessCheck::new(catalog, floe_core::catalog::Access::Commit),
        s3,
        sqs: aws_sdk_sqs::Client::new(aws),
        task_queue_url: env.task_queue_url.clone(),
        retry_visibility: env.retry_visibility,
    }
}

/// How long a task given back for a retryable reason waits: `base` at its first receive,
/// doubled at each one after, up to 8 × `base`.
pub fn retry_visibility(base: Duration, receive_count: u32) -> Duration {
    base * 2u32.pow(receive_count.clamp(1, 4) - 1)
}

impl CommitterService {
    /// Makes the messages given back for a retryable reason (receipt handle, receive
    /// count) visible again after [`retry_visibility`], not after the queue's long
    /// visibility timeout: a conflict or a throttle is retried within a minute, and the
    /// table's later tasks (its FIFO group) wait no longer. Best effort: a message whose
    /// change fails waits the queue's timeout.
    async fn retry_soon(&self, messages: &[(String, u32)]) {
        use aws_sdk_sqs::types::ChangeMessageVisibilityBatchRequestEntry as Entry;
        for batch in messages.chunks(10) {
            let entries = batch.iter().enumerate().filter_map(|(i, (receipt, count))| {
                let seconds = retry_visibility(self.retry_visibility, *count).as_secs() as i32;
                Entry::builder().id(i.to_string()).receipt_handle(receipt).visibility_timeout(seconds).build().ok()
            });
            let sent = self
                .sqs
                .change_message_visibility_batch()
                .queue_url(&self.task_queue_url)
                .set_entries(Some(entries.collect()))
                .send()
                .await;
            match sent {
                Ok(out) if out.failed.is_empty() => {}
                Ok(out) => {
                    tracing::warn!(failed = ?out.failed, "some retried tasks keep the queue's visibility timeout")
                }
                Err(e) => tracing::warn!(error = %aws_sdk_sqs::error::DisplayErrorContext(&e),
                    "shortening retried tasks' visibility failed; they keep the queue's timeout"),
            }
        }
    }
}

/// Handles one batch of FIFO messages; the response names the messages to deliver again.
///
/// A message whose task cannot be read, or whose commit failed, is reported; so is every
/// later message of the same group (table) in the batch, so a table's tasks are never
/// committed out of the order they were queued in after a failure. Two kinds fail alone
/// or not at all. A message that can never be read (not a task: a poison message) fails
/// alone: it comes back until the queue's redrive policy moves it to the dead-letter
/// queue, while its table's later tasks commit (any arrival order commits the same rows),
/// instead of coming back as often as it does and following it there. A suspend task
/// applied is done, whatever came before it. Those reported for a
/// retryable reason (a conflict not won in time, a throttle) come back soon
/// ([`retry_visibility`]); the others (a suspended table's kept tasks) wait the queue's
/// visibility timeout, not to spin.
pub async fn handle_committer_event(
    service: &CommitterService,
    event: aws_lambda_events::event::sqs::SqsEvent,
    deadline: Option<Instant>,
) -> aws_lambda_events::event::sqs::SqsBatchResponse {
    use aws_lambda_events::event::sqs::SqsMessage;
    use floe_core::committer::TaskResult;
    let mut response = aws_lambda_events::event::sqs::SqsBatchResponse::default();
    let mut tasks = Vec::new();
    let mut message_of_task = Vec::new();
    // Group → whether its failure is retryable: its later messages come back with it.
    let mut failed_groups: HashMap<String, bool> = HashMap::new();
    let mut soon = Vec::new();
    let mut give_back = |message: &SqsMessage, retryable: bool| {
        response.add_failure(message.message_id.clone().unwrap_or_default());
        if let (true, Some(receipt)) = (retryable, &message.receipt_handle) {
            let count = message.attributes.get("ApproximateReceiveCount").and_then(|c| c.parse().ok());
            soon.push((receipt.clone(), count.unwrap_or(1)));
        }
    };
    record_oldest_task(&event.records, floe_core::lock::now_ms());
    for message in &event.records {
        let id = message.message_id.clone().unwrap_or_default();
        let group = message.attributes.get("MessageGroupId").cloned();
        if let Some(&retryable) = group.as_ref().and_then(|g| failed_groups.get(g)) {
            give_back(message, retryable);
            continue;
        }
        match crate::sqs::task_from_message(&service.s3, message.body.as_deref().unwrap_or_default()).await {
            Ok(task) => {
                message_of_task.push((task.task_id().to_string(), message, group));
                tasks.push(task);
            }
            Err(error) => {
                tracing::error!(message_id = %id, %error, retryable = error.retryable(), "unreadable task message");
                if error.retryable() {
                    failed_groups.extend(group.map(|g| (g, true)));
                }
                give_back(message, error.retryable());
            }
        }
    }
    if let Err(error) = service.access.check(tasks.iter().map(|t| t.table().clone())).await {
        tracing::error!(%error, "the catalog refuses what the committer needs: the batch stays in the queue");
        for (_, message, _) in &message_of_task {
            give_back(message, error.retryable());
        }
        service.retry_soon(&soon).await;
        return response;
    }
    let report = service.committer.commit_all(&tasks, deadline).await;
    for (((task_id, result), (_, message, group)), task) in report.results.iter().zip(&message_of_task).zip(&tasks) {
        let group_failed = group.as_ref().and_then(|g| failed_groups.get(g)).copied();
        let failed = match result {
            // A decision refused (the part not stranded, or its table gone) is done
            // with: kept, it would hold the table's later tasks behind it.
            TaskResult::Failed { error, retryable: false } if matches!(task, floe_core::task::Task::Resolve(_)) => {
                tracing::error!(%task_id, %error, "an operator's decision refused: dropped");
                None
            }
            TaskResult::Failed { error, retryable } => {
                tracing::error!(%task_id, message_id = ?message.message_id, %error, retryable,
                    "task not committed; it stays in the queue");
                Some(*retryable && group_failed.unwrap_or(true))
            }
            // A suspension applied is done, whatever its table's earlier tasks did: the
            // order of a status does not matter, and kept behind the tasks it stopped it
            // would come back after the resume and stop the table again.
            _ if matches!(task, floe_core::task::Task::Suspend(_)) => None,
            _ => group_failed,
        };
        if let Some(retryable) = failed {
            if let Some(g) = group {
                failed_groups.entry(g.clone()).or_insert(retryable);
            }
            give_back(message, retryable);
        }
    }
    service.retry_soon(&soon).await;
    response
}

/// `OldestTaskAge`: how long the batch's oldest message waited, from its `SentTimestamp`
/// (an attribute every SQS event carries: no call).
fn record_oldest_task(messages: &[aws_lambda_events::event::sqs::SqsMessage], now_ms: i64) {
    let sent = messages.iter().filter_map(|m| m.attributes.get("SentTimestamp")?.parse::<i64>().ok()).min();
    if let Some(sent) = sent {
        metrics::record(&metrics::OLDEST_TASK_AGE, &[], (now_ms - sent).max(0) as f64 / 1000.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retried_tasks_wait_longer_at_each_receive_up_to_eight_times_the_base() {
        let waits: Vec<u64> =
            [0, 1, 2, 3, 4, 5, 100].map(|n| retry_visibility(Duration::from_secs(30), n).as_secs()).to_vec();
        assert_eq!(waits, [30, 30, 60, 120, 240, 240, 240]);
    }
}
