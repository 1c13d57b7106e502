//! The materializer function: its environment, the materializer built from it, and an
//! S3 (or EventBridge) event handled: each segment object → data files → a CommitTask.

use std::sync::Arc;

use serde_json::Value;

use floe_core::formats::http_registry_with_password;
use floe_core::maintenance::holding::HoldingQueue;
use floe_core::materializer::segment::MaterializeError;
use floe_core::materializer::{Materializer, MaterializerError, ObjectRef, Outcome};
use floe_core::metrics::{self, MODE, TABLE};
use floe_core::retry::Retryable;
use floe_core::segment::Limits;
use floe_core::storage::split_s3_uri;

use super::{InitError, load_config, open_catalog, registry_password, required, table_registry};
use crate::events::objects_in_event;
use crate::sqs::SqsTaskQueue;

/// The materializer's environment.
#[derive(Debug, Clone)]
pub struct MaterializerEnv {
    /// `FLOE_CONFIG`: `s3://bucket/key` or a path of `floe.toml`; unset = every topic raw.
    pub config: Option<String>,
    /// `FLOE_WAREHOUSE`: `s3://bucket/prefix` where tables live.
    pub warehouse: String,
    /// `FLOE_TASK_QUEUE_URL`: the FIFO queue of CommitTasks.
    pub task_queue_url: String,
    /// `FLOE_LOCK_TABLE`: the DynamoDB table (the committer's) where each task's files are
    /// held until it is committed, so the orphan sweep keeps them, and where a table's
    /// configuration issue is recorded.
    pub lock_table: String,
    /// `FLOE_S3_PATH_STYLE`: `true` for S3 emulators without virtual-host addressing.
    pub s3_path_style: bool,
}

impl MaterializerEnv {
    pub fn from_env() -> Result<Self, InitError> {
        let warehouse = required("FLOE_WAREHOUSE")?;
        if split_s3_uri(&format!("{}/", warehouse.trim_end_matches('/'))).is_none() {
            return Err(InitError::Env {
                name: "FLOE_WAREHOUSE",
                message: format!("{warehouse:?} is not s3://bucket/prefix"),
            });
        }
        Ok(MaterializerEnv {
            config: std::env::var("FLOE_CONFIG").ok().filter(|v| !v.is_empty()),
            warehouse,
            task_queue_url: required("FLOE_TASK_QUEUE_URL")?,
            lock_table: required("FLOE_LOCK_TABLE")?,
            s3_path_style: std::env::var("FLOE_S3_PATH_STYLE").is_ok_and(|v| v == "true" || v == "1"),
        })
    }
}

/// Builds the materializer from the environment and the AWS clients (once per container).
pub async fn materializer(aws: &aws_config::SdkConfig, env: &MaterializerEnv) -> Result<Materializer, InitError> {
    let s3_config = aws_sdk_s3::config::Builder::from(aws).force_path_style(env.s3_path_style).build();
    let s3 = aws_sdk_s3::Client::from_conf(s3_config);
    let config = load_config(&s3, env.config.as_deref()).await?;
    let password = registry_password(&aws_sdk_secretsmanager::Client::new(aws), &config).await?;
    let registry = http_registry_with_password(&config, password)
        .map_err(|e| InitError::Config { uri: env.config.clone().unwrap_or_default(), message: e.to_string() })?;
    let queue = SqsTaskQueue::new(aws_sdk_sqs::Client::new(aws), s3.clone(), &env.task_queue_url, &env.warehouse);
    let table_registry = table_registry(aws, &env.lock_table);
    let queue = HoldingQueue::new(Arc::new(queue), table_registry.clone());
    let opened = open_catalog(aws, &s3, &config, &env.lock_table).await?;
    let (tables, file_io) = (opened.tables(), opened.file_io);
    Ok(Materializer {
        config: Arc::new(config),
        registry,
        objects: Arc::new(crate::objects::S3Objects::new(s3.clone())),
        file_io,
        warehouse: env.warehouse.trim_end_matches('/').to_string(),
        queue: Arc::new(queue),
        tables: Some(Arc::new(tables)),
        table_registry: Some(table_registry),
        limits: Limits::default(),
    })
}

/// What the materializer answers for one invocation.
#[derive(Debug, serde::Serialize)]
pub struct MaterializerResponse {
    pub queued: Vec<String>,
    pub ignored: Vec<String>,
}

/// Handles one event: every object it names is tried. When any fails, the invocation
/// fails with every failure listed (Lambda retries it, then sends it with the reason to
/// the function's failure destination); the objects that succeeded are idempotent.
pub async fn handle_materializer_event(
    materializer: &Materializer,
    event: Value,
) -> Result<MaterializerResponse, MaterializerFailure> {
    let objects = objects_in_event(&event).map_err(|e| MaterializerFailure { failures: vec![e], retryable: false })?;
    let mut response = MaterializerResponse { queued: Vec::new(), ignored: objects.ignored };
    let mut failures = Vec::new();
    let mut retryable = false;
    for object in &objects.objects {
        match materializer.handle(object).await {
            Ok(Outcome::Queued(task)) => {
                record_materialized(&task);
                response.queued.push(task.task_id.clone());
            }
            Ok(Outcome::Ignored { uri, reason }) => response.ignored.push(format!("{uri}: {reason}")),
            Err(error) => {
                if matches!(error, MaterializerError::Materialize(MaterializeError::Suspended { .. })) {
                    metrics::record(&metrics::BAD_RECORDS, &[(MODE, "suspend")], 1.0);
                }
                retryable |= error.retryable();
                tracing::error!(object = %describe(object), retryable = error.retryable(), %error, "materializing failed");
                failures.push(format!("{}: {error}", describe(object)));
            }
        }
    }
    match failures.is_empty() {
        true => Ok(response),
        false => Err(MaterializerFailure { failures, retryable }),
    }
}

/// The materializer's metrics of one queued task.
fn record_materialized(task: &floe_core::task::CommitTask) {
    let table = task.table.to_string();
    let per_table = |metric: &metrics::Metric, value: u64| metrics::record_table(metric, &table, value as f64);
    per_table(&metrics::SEGMENTS, 1);
    let open: u64 = task.open_transactions.iter().map(|t| t.records).sum();
    per_table(&metrics::RECORDS, task.record_count + open);
    per_table(&metrics::BYTES, task.source.size);
    let pending: usize = task.open_transactions.iter().map(|t| t.files.len()).sum();
    per_table(&metrics::FILES_WRITTEN, (task.data_files.len() + task.dead_letter_files.len() + pending) as u64);
    let dead_letters: u64 = task.dead_letter_files.iter().map(|f| f.record_count).sum();
    for (mode, count) in [("skip", task.skipped_records), ("dlq", dead_letters)] {
        if count > 0 {
            metrics::record(&metrics::BAD_RECORDS, &[(TABLE, &table), (MODE, mode)], count as f64);
        }
    }
}

fn describe(object: &ObjectRef) -> String {
    format!("s3://{}/{}", object.bucket, object.key)
}

/// The objects of an invocation that failed, with their reasons.
#[derive(Debug, thiserror::Error)]
#[error("{} object(s) failed (retryable: {retryable}): {}", failures.len(), failures.join("; "))]
pub struct MaterializerFailure {
    pub failures: Vec<String>,
    pub retryable: bool,
}

impl MaterializerFailure {
    /// The `errorType` the failure destination records.
    pub fn error_type(&self) -> &'static str {
        if self.retryable { "Floe.Retryable" } else { "Floe.NotRetryable" }
    }
}

impl From<MaterializerError> for MaterializerFailure {
    fn from(error: MaterializerError) -> Self {
        MaterializerFailure { retryable: error.retryable(), failures: vec![error.to_string()] }
    }
}
