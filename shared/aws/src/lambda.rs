//! What the Lambda functions share: their typed environment, read once at init; the
//! `floe.toml` they load (from S3 or a path); Schema Registry credentials from Secrets
//! Manager; JSON logs; and the materializer's event handler.
//!
//! A function's `main.rs` only wires these together; everything here is testable
//! without the Lambda runtime.

use std::sync::Arc;

use serde_json::Value;

use floe_core::config::FloeConfig;
use floe_core::maintenance::TableRegistry;
use floe_core::maintenance::holding::HoldingQueue;
use floe_core::materializer::{Materializer, MaterializerError, ObjectRef, Outcome};

use crate::events::objects_in_event;
use crate::s3::{read_s3_uri, warehouse_file_io};
use crate::sqs::SqsTaskQueue;
use floe_core::formats::{http_registry_with_password, password_from_env};
use floe_core::segment::Limits;
use floe_core::storage::split_s3_uri;

/// A missing or invalid setting, or a failure while loading what it points to.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("environment variable {name}: {message}")]
    Env { name: &'static str, message: String },
    #[error("loading the configuration from {uri}: {message}")]
    Config { uri: String, message: String },
    #[error("reading the Schema Registry secret {arn}: {message}")]
    Secret { arn: String, message: String },
    #[error(transparent)]
    Registry(#[from] floe_core::registry::RegistryError),
}

/// The table registry in the lock table `lock_table`: where tasks' files are held and
/// what maintenance did is recorded.
// INTEGRATOR: `Arc::new(DynamoDbLocks::new(aws_sdk_dynamodb::Client::new(aws), lock_table))`
// once DynamoDbLocks implements TableRegistry (branch h2); until then nothing is held.
fn table_registry(aws: &aws_config::SdkConfig, lock_table: &str) -> Arc<dyn TableRegistry> {
    let _ = (aws, lock_table);
    Arc::new(unwired::Unwired)
}

mod unwired {
    use floe_core::lock::LockError;
    use floe_core::maintenance::{HeldTask, MaintenanceEvent, MaintenanceStatus, RegisteredTable, TableRegistry};
    use floe_core::task::TableName;

    /// Holds and records nothing (INTEGRATOR: removed with the DynamoDB registry).
    pub struct Unwired;

    #[async_trait::async_trait]
    impl TableRegistry for Unwired {
        async fn tables(&self) -> Result<Vec<RegisteredTable>, LockError> {
            Ok(Vec::new())
        }
        async fn hold_task(&self, _: &TableName, _: &HeldTask) -> Result<(), LockError> {
            Ok(())
        }
        async fn release_tasks(&self, _: &TableName, _: &[String]) -> Result<(), LockError> {
            Ok(())
        }
        async fn held_tasks(&self, _: &TableName) -> Result<Vec<HeldTask>, LockError> {
            Ok(Vec::new())
        }
        async fn record(&self, _: &TableName, _: &MaintenanceEvent) -> Result<(), LockError> {
            Ok(())
        }
        async fn status(&self, _: &TableName) -> Result<MaintenanceStatus, LockError> {
            Ok(MaintenanceStatus::default())
        }
    }
}

fn required(name: &'static str) -> Result<String, InitError> {
    std::env::var(name).map_err(|_| InitError::Env { name, message: "not set".into() })
}

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
    /// held until it is committed, so the orphan sweep keeps them.
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

/// JSON logs (what CloudWatch and Logs Insights read), level from `RUST_LOG` (default info).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(false)
        .with_target(false)
        .without_time()
        .try_init();
}

/// Reads `floe.toml` from `s3://…` or a path; `None` gives the defaults.
pub async fn load_config(s3: &aws_sdk_s3::Client, uri: Option<&str>) -> Result<FloeConfig, InitError> {
    let Some(uri) = uri else { return Ok(FloeConfig::default()) };
    let error = |message: String| InitError::Config { uri: uri.to_string(), message };
    let text = match split_s3_uri(uri) {
        Some(_) => {
            let bytes = read_s3_uri(s3, uri).await.map_err(|(message, _)| error(message))?;
            String::from_utf8(bytes.to_vec()).map_err(|e| error(e.to_string()))?
        }
        None => std::fs::read_to_string(uri).map_err(|e| error(e.to_string()))?,
    };
    let config = FloeConfig::parse(&text).map_err(|e| error(e.to_string()))?;
    config.check_schema_files().map_err(|e| error(e.to_string()))?;
    Ok(config)
}

/// The Schema Registry password: from the configured Secrets Manager secret (a JSON
/// object with `password`, or the bare password), else from the configured variable.
pub async fn registry_password(
    secrets: &aws_sdk_secretsmanager::Client,
    config: &FloeConfig,
) -> Result<Option<String>, InitError> {
    let Some(sr) = &config.schema_registry else { return Ok(None) };
    let Some(arn) = &sr.secret_arn else {
        return Ok(password_from_env(config)?);
    };
    let error = |message: String| InitError::Secret { arn: arn.clone(), message };
    let secret = secrets
        .get_secret_value()
        .secret_id(arn)
        .send()
        .await
        .map_err(|e| error(aws_sdk_s3::error::DisplayErrorContext(&e).to_string()))?;
    let text = secret.secret_string().ok_or_else(|| error("the secret has no string value".into()))?;
    Ok(Some(password_from_secret(text)))
}

/// `{"password": "…"}` (the shape Secrets Manager's console writes) or the bare string.
fn password_from_secret(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => map.get("password").and_then(Value::as_str).unwrap_or_default().to_string(),
        _ => text.to_string(),
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
    let queue = HoldingQueue::new(Arc::new(queue), table_registry(aws, &env.lock_table));
    let file_io = warehouse_file_io(s3.clone());
    let glue = crate::glue::GlueCatalog::new(aws_sdk_glue::Client::new(aws));
    let tables = floe_core::table::CatalogTables { catalog: Arc::new(glue), file_io: file_io.clone() };
    Ok(Materializer {
        config: Arc::new(config),
        registry,
        objects: Arc::new(crate::objects::S3Objects::new(s3.clone())),
        file_io,
        warehouse: env.warehouse.trim_end_matches('/').to_string(),
        queue: Arc::new(queue),
        tables: Some(Arc::new(tables)),
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
            Ok(Outcome::Queued(task)) => response.queued.push(task.task_id.clone()),
            Ok(Outcome::Ignored { uri, reason }) => response.ignored.push(format!("{uri}: {reason}")),
            Err(error) => {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_hold_a_json_password_or_a_bare_one() {
        assert_eq!(password_from_secret(r#"{"username":"u","password":"p w"}"#), "p w");
        assert_eq!(password_from_secret("s3cret"), "s3cret");
    }

    #[tokio::test]
    async fn without_a_secret_the_password_comes_from_password_env_which_must_be_set() {
        let secrets = aws_sdk_secretsmanager::Client::from_conf(
            aws_sdk_secretsmanager::Config::builder().behavior_version(aws_config::BehaviorVersion::latest()).build(),
        );
        let config = |var: &str| {
            FloeConfig::parse(&format!(
                "[schema_registry]\nurl = \"https://sr\"\nusername = \"u\"\npassword_env = \"{var}\"\n"
            ))
            .unwrap()
        };
        // SAFETY: set before any other thread reads this variable name; unique to this test.
        unsafe { std::env::set_var("FLOE_TEST_LAMBDA_SR_PASSWORD", "pw") };
        let set = registry_password(&secrets, &config("FLOE_TEST_LAMBDA_SR_PASSWORD")).await.unwrap();
        assert_eq!(set.as_deref(), Some("pw"));
        let err = registry_password(&secrets, &config("FLOE_TEST_LAMBDA_SR_UNSET")).await.unwrap_err();
        assert!(err.to_string().contains("FLOE_TEST_LAMBDA_SR_UNSET is not set"), "{err}");
    }
}

/// The committer's environment.
#[derive(Debug, Clone)]
pub struct CommitterEnv {
    /// `FLOE_WAREHOUSE`: `s3://bucket/prefix` where new tables are created.
    pub warehouse: String,
    /// `FLOE_LOCK_TABLE`: the DynamoDB table of leases and table statuses.
    pub lock_table: String,
    /// `FLOE_LEASE_SECONDS`: lease length, renewed during a commit (default 60).
    pub lease: std::time::Duration,
    pub s3_path_style: bool,
}

impl CommitterEnv {
    pub fn from_env() -> Result<Self, InitError> {
        let lease = match std::env::var("FLOE_LEASE_SECONDS") {
            Ok(v) => v.parse::<u64>().map_err(|_| InitError::Env {
                name: "FLOE_LEASE_SECONDS",
                message: format!("{v:?} is not a number of seconds"),
            })?,
            Err(_) => 60,
        };
        Ok(CommitterEnv {
            warehouse: required("FLOE_WAREHOUSE")?,
            lock_table: required("FLOE_LOCK_TABLE")?,
            lease: std::time::Duration::from_secs(lease),
            s3_path_style: std::env::var("FLOE_S3_PATH_STYLE").is_ok_and(|v| v == "true" || v == "1"),
        })
    }
}

/// The committer and the S3 client that fetches tasks stored in S3.
pub struct CommitterService {
    pub committer: floe_core::committer::Committer,
    pub s3: aws_sdk_s3::Client,
}

/// Builds the committer from the environment and the AWS clients (once per container).
pub fn committer(aws: &aws_config::SdkConfig, env: &CommitterEnv) -> CommitterService {
    let s3_config = aws_sdk_s3::config::Builder::from(aws).force_path_style(env.s3_path_style).build();
    let s3 = aws_sdk_s3::Client::from_conf(s3_config);
    let committer = floe_core::committer::Committer {
        catalog: Arc::new(crate::glue::GlueCatalog::new(aws_sdk_glue::Client::new(aws))),
        file_io: warehouse_file_io(s3.clone()),
        locks: Arc::new(crate::dynamodb::DynamoDbLocks::new(aws_sdk_dynamodb::Client::new(aws), &env.lock_table)),
        registry: table_registry(aws, &env.lock_table),
        warehouse: env.warehouse.trim_end_matches('/').to_string(),
        owner: format!("committer-{}", uuid::Uuid::new_v4()),
        lease_ttl: env.lease,
        retry: floe_core::retry::RetryPolicy { attempts: 8, ..Default::default() },
    };
    CommitterService { committer, s3 }
}

/// Handles one batch of FIFO messages; the response names the messages to deliver again.
///
/// A message whose task cannot be read, or whose commit failed, is reported; so is every
/// later message of the same group (table) in the batch, so a table's tasks are never
/// committed out of the order they were queued in after a failure.
pub async fn handle_committer_event(
    service: &CommitterService,
    event: aws_lambda_events::event::sqs::SqsEvent,
    deadline: Option<std::time::Instant>,
) -> aws_lambda_events::event::sqs::SqsBatchResponse {
    use floe_core::committer::TaskResult;
    let mut response = aws_lambda_events::event::sqs::SqsBatchResponse::default();
    let mut tasks = Vec::new();
    let mut message_of_task = Vec::new();
    let mut failed_groups = std::collections::HashSet::new();
    let group_of = |m: &aws_lambda_events::event::sqs::SqsMessage| m.attributes.get("MessageGroupId").cloned();
    for message in &event.records {
        let id = message.message_id.clone().unwrap_or_default();
        let group = group_of(message);
        if group.as_ref().is_some_and(|g| failed_groups.contains(g)) {
            response.add_failure(id);
            continue;
        }
        match crate::sqs::task_from_message(&service.s3, message.body.as_deref().unwrap_or_default()).await {
            Ok(task) => {
                message_of_task.push((task.task_id().to_string(), id, group));
                tasks.push(task);
            }
            Err(error) => {
                tracing::error!(message_id = %id, %error, retryable = error.retryable(), "unreadable task message");
                failed_groups.extend(group);
                response.add_failure(id);
            }
        }
    }
    let report = service.committer.commit_all(&tasks, deadline).await;
    for ((task_id, result), (_, message_id, group)) in report.results.iter().zip(&message_of_task) {
        let failed =
            matches!(result, TaskResult::Failed { .. }) || group.as_ref().is_some_and(|g| failed_groups.contains(g));
        if let TaskResult::Failed { error, retryable } = result {
            tracing::error!(%task_id, %message_id, %error, retryable, "task not committed; it stays in the queue");
        }
        if failed {
            failed_groups.extend(group.clone());
            response.add_failure(message_id.clone());
        }
    }
    response
}
