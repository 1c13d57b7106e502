//! What the Lambda functions share: their typed environment, read once at init; the
//! `floe.toml` they load (from S3 or a path); Schema Registry credentials from Secrets
//! Manager; JSON logs; the three functions' event handlers and their metrics (EMF lines,
//! [`measured`], [`print_emf`]); and the committer's and the
//! compactor's working deadline ([`stop_before`]: the invocation's, or the function's
//! timeout when the runtime hands none that can be believed, as `cargo lambda watch`).
//!
//! A function's `main.rs` only wires these together; everything here is testable
//! without the Lambda runtime.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use floe_core::catalog::Catalog;
use floe_core::config::{CatalogConfig, FloeConfig};
use floe_core::maintenance::TableRegistry;
use floe_core::maintenance::holding::HoldingQueue;
use floe_core::materializer::segment::MaterializeError;
use floe_core::materializer::{Materializer, MaterializerError, ObjectRef, Outcome};
use floe_core::metrics::{self, MODE, Recorder, TABLE};

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
    #[error("opening the catalog: {0}")]
    Catalog(String),
}

/// The catalog `[catalog]` names (Glue without it), checked at start-up: against the
/// catalog the stack was deployed for too (`FLOE_CATALOG_TYPE`, `FLOE_TABLE_BUCKET_ARN`,
/// which infra/template.yaml sets from the parameters that grant its permissions).
pub async fn open_catalog(aws: &aws_config::SdkConfig, config: &FloeConfig) -> Result<Arc<dyn Catalog>, InitError> {
    let deployed_type = std::env::var("FLOE_CATALOG_TYPE").ok();
    let deployed_bucket = std::env::var("FLOE_TABLE_BUCKET_ARN").ok();
    deployed_catalog_matches(config.catalog.as_ref(), deployed_type.as_deref(), deployed_bucket.as_deref())
        .map_err(InitError::Catalog)?;
    crate::catalogs::open(config.catalog.as_ref(), aws).await.map_err(|e| InitError::Catalog(format!("{e:#}")))
}

/// Whether floe.toml's `[catalog]` is the catalog the stack grants (`deployed_type`, its
/// `CatalogType`; `deployed_bucket`, its `TableBucketArn`): a function whose role is
/// granted another catalog would fail on every call, so it says which setting to change.
/// Unset (not deployed by the template) checks nothing.
pub fn deployed_catalog_matches(
    config: Option<&CatalogConfig>,
    deployed_type: Option<&str>,
    deployed_bucket: Option<&str>,
) -> Result<(), String> {
    let Some(deployed) = deployed_type.filter(|t| !t.is_empty()) else { return Ok(()) };
    let configured = match config.unwrap_or(&CatalogConfig::Glue) {
        CatalogConfig::Glue => "glue",
        CatalogConfig::Sql => "sql",
        CatalogConfig::Rest(_) => "rest",
        CatalogConfig::S3Tables(_) => "s3tables",
    };
    if configured != deployed {
        return Err(format!(
            "floe.toml's catalog.type is \"{configured}\" but the stack was deployed with CatalogType={deployed}, \
             whose permissions its functions have: deploy with CatalogType={configured}, or change floe.toml"
        ));
    }
    let configured_bucket = match config {
        Some(CatalogConfig::S3Tables(s3tables)) => s3tables.table_bucket_arn.as_str(),
        _ => return Ok(()),
    };
    match deployed_bucket.filter(|b| !b.is_empty()) {
        Some(bucket) if bucket == configured_bucket => Ok(()),
        deployed => Err(format!(
            "floe.toml's catalog.table_bucket_arn is {configured_bucket} but the stack's TableBucketArn is {}: \
             the functions may use only that bucket; deploy with TableBucketArn={configured_bucket}, or change floe.toml",
            deployed.unwrap_or("empty")
        )),
    }
}

/// The table registry in the lock table `lock_table`: where tasks' files are held and
/// what maintenance did is recorded.
fn table_registry(aws: &aws_config::SdkConfig, lock_table: &str) -> Arc<dyn TableRegistry> {
    Arc::new(crate::dynamodb::DynamoDbLocks::new(aws_sdk_dynamodb::Client::new(aws), lock_table))
}

fn required(name: &'static str) -> Result<String, InitError> {
    std::env::var(name).map_err(|_| InitError::Env { name, message: "not set".into() })
}

/// A number of seconds from the variable `name`, `default` when it is unset.
fn seconds(name: &'static str, default: u64) -> Result<Duration, InitError> {
    match std::env::var(name) {
        Ok(v) => v
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| InitError::Env { name, message: format!("{v:?} is not a number of seconds") }),
        Err(_) => Ok(Duration::from_secs(default)),
    }
}

/// A positive whole number from the variable `name`, `default` when it is unset.
fn count(name: &'static str, default: usize) -> Result<usize, InitError> {
    match std::env::var(name) {
        Ok(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| InitError::Env { name, message: format!("{v:?} is not a positive whole number") }),
        Err(_) => Ok(default),
    }
}

/// `FLOE_FUNCTION_TIMEOUT_SECONDS`: the function's timeout, the budget of an invocation
/// whose deadline is not a real one (see [`stop_before`]); `default`: the SAM template's.
fn function_timeout(default: u64) -> Result<Duration, InitError> {
    seconds("FLOE_FUNCTION_TIMEOUT_SECONDS", default)
}

/// The committer's and the compactor's timeouts in the SAM template.
pub const COMMITTER_TIMEOUT_SECONDS: u64 = 300;
pub const COMPACTOR_TIMEOUT_SECONDS: u64 = 900;

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

/// Runs one invocation's `work` with a metrics recorder; returns its output and the EMF
/// lines of what it recorded, dimension `Function` = `function`.
pub async fn measured<T>(function: &str, work: impl Future<Output = T>) -> (T, Vec<String>) {
    let recorder = Recorder::new();
    // Boxed: the handlers' futures nested once more pass the compiler's layout depth.
    let output = metrics::scope(recorder.clone(), Box::pin(work)).await;
    (output, recorder.take_emf_lines(function, floe_core::lock::now_ms()))
}

/// Writes EMF lines to stdout, where Lambda sends them to CloudWatch Logs. Each line is
/// written whole under stdout's lock, as the JSON logs are, so the two never interleave
/// within a line.
pub fn print_emf(lines: &[String]) {
    use std::io::Write;
    for line in lines {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(format!("{line}\n").as_bytes()).and_then(|()| stdout.flush());
    }
}

/// Reads `floe.toml` from `s3://…` or a path, checking that its schema files are there;
/// `None` gives the defaults.
pub async fn load_config(s3: &aws_sdk_s3::Client, uri: Option<&str>) -> Result<FloeConfig, InitError> {
    let config = read_config(s3, uri).await?;
    let error = |message: String| InitError::Config { uri: uri.unwrap_or_default().to_string(), message };
    config.check_schema_files().map_err(|e| error(e.to_string()))?;
    Ok(config)
}

/// [`load_config`] without looking for its schema files: for tools that only need the
/// topics' tables (`floe aws backfill`), away from where the functions find them.
pub async fn read_config(s3: &aws_sdk_s3::Client, uri: Option<&str>) -> Result<FloeConfig, InitError> {
    let Some(uri) = uri else { return Ok(FloeConfig::default()) };
    let error = |message: String| InitError::Config { uri: uri.to_string(), message };
    let text = match split_s3_uri(uri) {
        Some(_) => {
            let bytes = read_s3_uri(s3, uri).await.map_err(|(message, _)| error(message))?;
            String::from_utf8(bytes.to_vec()).map_err(|e| error(e.to_string()))?
        }
        None => std::fs::read_to_string(uri).map_err(|e| error(e.to_string()))?,
    };
    FloeConfig::parse(&text).map_err(|e| error(e.to_string()))
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
    let table_registry = table_registry(aws, &env.lock_table);
    let queue = HoldingQueue::new(Arc::new(queue), table_registry.clone());
    let file_io = warehouse_file_io(s3.clone());
    let catalog = open_catalog(aws, &config).await?;
    let tables = floe_core::table::CatalogTables { catalog, file_io: file_io.clone() };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_floe_toml_naming_another_catalog_than_the_stack_grants_is_refused() {
        let bucket = "arn:aws:s3tables:us-east-1:123456789012:bucket/analytics";
        let s3tables = |arn: &str| {
            CatalogConfig::S3Tables(floe_core::config::S3TablesConfig {
                table_bucket_arn: arn.into(),
                compaction: false,
            })
        };
        let tables = s3tables(bucket);
        // Not deployed by the template (tests, `cargo lambda watch`): nothing to compare.
        assert!(deployed_catalog_matches(Some(&tables), None, None).is_ok());
        // Without [catalog], Glue: the template's default.
        assert!(deployed_catalog_matches(None, Some("glue"), Some("")).is_ok());
        assert!(deployed_catalog_matches(Some(&tables), Some("s3tables"), Some(bucket)).is_ok());
        let refused = deployed_catalog_matches(None, Some("s3tables"), Some(bucket)).unwrap_err();
        assert!(refused.contains("catalog.type is \"glue\"") && refused.contains("CatalogType=s3tables"), "{refused}");
        let refused = deployed_catalog_matches(Some(&tables), Some("glue"), Some("")).unwrap_err();
        assert!(refused.contains("deploy with CatalogType=s3tables"), "{refused}");
        let other = s3tables("arn:aws:s3tables:us-east-1:123456789012:bucket/other");
        let refused = deployed_catalog_matches(Some(&other), Some("s3tables"), Some(bucket)).unwrap_err();
        assert!(refused.contains("deploy with TableBucketArn=arn:aws:s3tables:us-east-1:123456789012:bucket/other"));
        let refused = deployed_catalog_matches(Some(&tables), Some("s3tables"), Some("")).unwrap_err();
        assert!(refused.contains("TableBucketArn is empty"), "{refused}");
    }

    #[test]
    fn a_count_is_a_positive_whole_number_or_its_default() {
        assert_eq!(count("FLOE_TEST_LAMBDA_COUNT_UNSET", 8).unwrap(), 8);
        for (name, value, expected) in [
            ("FLOE_TEST_LAMBDA_COUNT_3", "3", Some(3)),
            ("FLOE_TEST_LAMBDA_COUNT_0", "0", None),
            ("FLOE_TEST_LAMBDA_COUNT_X", "four", None),
        ] {
            // SAFETY: set before any other thread reads this variable name; unique to this test.
            unsafe { std::env::set_var(name, value) };
            match (count(name, 8), expected) {
                (Ok(n), Some(expected)) => assert_eq!(n, expected),
                (Err(e), None) => assert!(e.to_string().contains(name), "{e}"),
                (other, _) => panic!("{name}={value}: {other:?}"),
            }
        }
    }

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

/// The S3 client of a function (path-style addressing for local endpoints).
fn s3_client(aws: &aws_config::SdkConfig, path_style: bool) -> aws_sdk_s3::Client {
    aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(aws).force_path_style(path_style).build())
}

/// The committer's catalog: `[catalog]` of `FLOE_CONFIG` (Glue without it).
pub async fn committer_catalog(aws: &aws_config::SdkConfig, env: &CommitterEnv) -> Result<Arc<dyn Catalog>, InitError> {
    let config = load_config(&s3_client(aws, env.s3_path_style), env.config.as_deref()).await?;
    open_catalog(aws, &config).await
}

/// Builds the committer from the environment, the AWS clients and its catalog
/// ([`committer_catalog`]), once per container.
pub fn committer(aws: &aws_config::SdkConfig, env: &CommitterEnv, catalog: Arc<dyn Catalog>) -> CommitterService {
    let s3 = s3_client(aws, env.s3_path_style);
    let committer = floe_core::committer::Committer {
        catalog: catalog.clone(),
        file_io: warehouse_file_io(s3.clone()),
        locks: Arc::new(crate::dynamodb::DynamoDbLocks::new(aws_sdk_dynamodb::Client::new(aws), &env.lock_table)),
        registry: table_registry(aws, &env.lock_table),
        warehouse: env.warehouse.trim_end_matches('/').to_string(),
        owner: format!("committer-{}", uuid::Uuid::new_v4()),
        lease_ttl: env.lease,
        retry: floe_core::retry::RetryPolicy { attempts: 8, ..Default::default() },
        concurrency: env.concurrency,
        clock: floe_core::lock::Clock::Wall,
    };
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

/// The compactor's environment: the materializer's variables (`FLOE_WAREHOUSE`,
/// `FLOE_TASK_QUEUE_URL`, `FLOE_LOCK_TABLE`, `FLOE_CONFIG`, `FLOE_S3_PATH_STYLE`), read
/// and checked the same way, and `FLOE_FUNCTION_TIMEOUT_SECONDS`.
#[derive(Debug, Clone)]
pub struct CompactorEnv {
    /// `FLOE_CONFIG`: `s3://bucket/key` or a path of `floe.toml` (compaction policy per
    /// topic); unset = the defaults (128 MiB, 15 minutes).
    pub config: Option<String>,
    /// `FLOE_WAREHOUSE`: `s3://bucket/prefix`; tasks too large for a message are stored
    /// under its `tasks/`, as the materializer stores them.
    pub warehouse: String,
    /// `FLOE_TASK_QUEUE_URL`: the committer's FIFO queue, where CompactionTasks go.
    pub task_queue_url: String,
    /// `FLOE_LOCK_TABLE`: the DynamoDB table of leases, statuses and held tasks.
    pub lock_table: String,
    pub s3_path_style: bool,
    /// `FLOE_FUNCTION_TIMEOUT_SECONDS`: the function's timeout, the budget when the
    /// invocation's deadline is not a real one (default 900, the template's).
    pub timeout: Duration,
}

impl CompactorEnv {
    pub fn from_env() -> Result<Self, InitError> {
        let MaterializerEnv { config, warehouse, task_queue_url, lock_table, s3_path_style } =
            MaterializerEnv::from_env()?;
        let timeout = function_timeout(COMPACTOR_TIMEOUT_SECONDS)?;
        Ok(CompactorEnv { config, warehouse, task_queue_url, lock_table, s3_path_style, timeout })
    }
}

/// The compactor, built once per container.
pub struct CompactorService {
    pub compactor: floe_core::maintenance::compactor::Compactor,
    /// The catalog's access check, for the configured tables.
    pub access: crate::access::AccessCheck,
    /// The task queue, whose message count gates the stall metric.
    pub sqs: aws_sdk_sqs::Client,
    pub task_queue_url: String,
}

/// Builds the compactor from the environment and the AWS clients (once per container):
/// Glue tables, the warehouse on S3, the registry in the lock table, CompactionTasks to
/// the committer's queue.
pub async fn compactor(aws: &aws_config::SdkConfig, env: &CompactorEnv) -> Result<CompactorService, InitError> {
    let s3_config = aws_sdk_s3::config::Builder::from(aws).force_path_style(env.s3_path_style).build();
    let s3 = aws_sdk_s3::Client::from_conf(s3_config);
    let config = load_config(&s3, env.config.as_deref()).await?;
    let warehouse = format!("{}/", env.warehouse.trim_end_matches('/'));
    // The plain queue: the compactor holds each CompactionTask's files in the registry
    // itself before sending it, so the sweep keeps them while it waits.
    let queue = SqsTaskQueue::new(aws_sdk_sqs::Client::new(aws), s3.clone(), &env.task_queue_url, &warehouse);
    let catalog = open_catalog(aws, &config).await?;
    let compactor = floe_core::maintenance::compactor::Compactor {
        catalog: catalog.clone(),
        file_io: warehouse_file_io(s3.clone()),
        registry: table_registry(aws, &env.lock_table),
        files: Arc::new(crate::files::S3Files::new(s3)),
        queue: Arc::new(queue),
        config: Arc::new(config),
        task_store: Some(warehouse),
        sweep: true,
    };
    Ok(CompactorService {
        compactor,
        access: crate::access::AccessCheck::new(catalog, floe_core::catalog::Access::Read),
        sqs: aws_sdk_sqs::Client::new(aws),
        task_queue_url: env.task_queue_url.clone(),
    })
}

/// What one compactor run did, as the invocation answers it (and logs it).
#[derive(Debug, Default, serde::Serialize)]
pub struct CompactorResponse {
    /// Tables with CompactionTasks queued.
    pub compacted: Vec<CompactedTable>,
    /// Tables left alone, and why (suspended, or the run's time was up).
    pub skipped: Vec<TableNote>,
    /// Tables whose compaction or sweep failed; the next run tries them again.
    pub failed: Vec<TableNote>,
    /// Tables looked at with nothing to do.
    pub unchanged: usize,
    /// Orphan files deleted, over every table.
    pub orphans_removed: usize,
}

#[derive(Debug, serde::Serialize)]
pub struct CompactedTable {
    pub table: String,
    /// CompactionTasks queued, the files and bytes they rewrite, and what they write.
    pub tasks: usize,
    pub files_in: u64,
    pub bytes_in: u64,
    pub files_out: u64,
    pub bytes_out: u64,
}

#[derive(Debug, serde::Serialize)]
pub struct TableNote {
    /// `namespace.name`; empty when the failure was not one table's (listing the tables).
    pub table: String,
    pub reason: String,
}

impl CompactorResponse {
    fn from_report(report: floe_core::maintenance::compactor::RunReport) -> Self {
        let mut response = CompactorResponse::default();
        for run in report.tables {
            let table = run.table.as_ref().map(ToString::to_string).unwrap_or_default();
            response.orphans_removed += run.sweep.removed.len();
            if let Some(error) = &run.error {
                tracing::error!(%table, retryable = error.retryable(), %error, "table maintenance failed");
                response.failed.push(TableNote { table: table.clone(), reason: error.to_string() });
            }
            if let Some(reason) = run.skipped {
                response.skipped.push(TableNote { table, reason });
            } else if run.compactions > 0 {
                response.compacted.push(CompactedTable {
                    table,
                    tasks: run.compactions,
                    files_in: run.files_in,
                    bytes_in: run.bytes_in,
                    files_out: run.files_out,
                    bytes_out: run.bytes_out,
                });
            } else if run.error.is_none() {
                response.unchanged += 1;
            }
        }
        response
    }
}

/// Handles one scheduled event: compacts and sweeps every registered table on the wall
/// clock, stopping to start tables at `deadline`.
///
/// A table's failure does not fail the invocation: it is logged and reported, and the
/// next tick of the schedule tries again — failing would only make EventBridge run the
/// whole schedule again at once, tables that succeeded included.
pub async fn handle_compactor_event(
    service: &CompactorService,
    event: aws_lambda_events::event::eventbridge::EventBridgeEvent<Value>,
    deadline: Option<Instant>,
) -> CompactorResponse {
    let scheduled = event.time.map(|t| t.to_rfc3339()).unwrap_or_default();
    let rule = event.resources.as_ref().and_then(|r| r.first()).cloned().unwrap_or_default();
    if event.detail_type != "Scheduled Event" {
        tracing::warn!(detail_type = %event.detail_type, source = %event.source, "not a scheduled event; running anyway");
    }
    if let Err(error) = service.access.check(service.compactor.config.configured_tables()).await {
        tracing::error!(%error, "the catalog refuses what the compactor needs: nothing done this run");
        let failed = TableNote { table: String::new(), reason: error.to_string() };
        return CompactorResponse { failed: vec![failed], ..Default::default() };
    }
    let report = service.compactor.run(floe_core::lock::now_ms(), deadline).await;
    record_maintenance(&report);
    let response = CompactorResponse::from_report(report);
    record_stall(service).await;
    tracing::info!(
        %scheduled, %rule, compacted = response.compacted.len(), skipped = response.skipped.len(),
        failed = response.failed.len(), unchanged = response.unchanged, orphans_removed = response.orphans_removed,
        "compactor run done"
    );
    response
}

/// The compaction bytes and orphans of a run, per table.
fn record_maintenance(report: &floe_core::maintenance::compactor::RunReport) {
    for run in &report.tables {
        let Some(table) = &run.table else { continue };
        let table = table.to_string();
        metrics::record_table(&metrics::COMPACTION_BYTES_IN, &table, run.bytes_in as f64);
        metrics::record_table(&metrics::COMPACTION_BYTES_OUT, &table, run.bytes_out as f64);
        metrics::record_table(&metrics::ORPHANS_REMOVED, &table, run.sweep.removed.len() as f64);
    }
}

/// The stall metrics ([`floe_core::maintenance::stall`]): the queue's message count (one
/// call), then the registry's held tasks. A failure to read either is logged; the run's
/// work stands.
async fn record_stall(service: &CompactorService) {
    let queued = match crate::sqs::queued_messages(&service.sqs, &service.task_queue_url).await {
        Ok(n) => Some(n),
        Err(error) => {
            tracing::warn!(%error, "reading the task queue's message count failed");
            None
        }
    };
    let now = floe_core::lock::now_ms();
    match floe_core::maintenance::stall::Waiting::read(service.compactor.registry.as_ref(), now).await {
        Ok(waiting) => waiting.record(queued),
        Err(error) => tracing::error!(%error, "reading the tasks waiting failed: no stall metric this run"),
    }
}

/// Lambda's longest timeout: an invocation deadline further away than this (and a minute
/// of clock skew) was not set by Lambda.
const LONGEST_TIMEOUT: Duration = Duration::from_secs(15 * 60 + 60);

/// The instant to stop starting new work: `margin` before the invocation's deadline.
///
/// A deadline already past when the invocation starts, or further away than Lambda's
/// longest timeout, is no deadline: `cargo lambda watch` sends a fixed
/// `Lambda-Runtime-Deadline-Ms` of 600000 (ten minutes after 1970). The work then gets
/// `timeout` (the function's timeout, `FLOE_FUNCTION_TIMEOUT_SECONDS`) from now, less
/// `margin`, and a warning names the cause.
pub fn stop_before(invocation_deadline: SystemTime, margin: Duration, timeout: Duration) -> Instant {
    let remaining = match invocation_deadline.duration_since(SystemTime::now()) {
        Ok(left) if left <= LONGEST_TIMEOUT => left,
        _ => {
            // A u64, so that the JSON log has a number (a u128 is logged as a string).
            let deadline_ms = invocation_deadline
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            tracing::warn!(
                deadline_ms,
                budget_seconds = timeout.as_secs(),
                "the invocation's deadline is already past or beyond Lambda's 15 minutes, so it is not a real one \
                 (cargo lambda watch sends Lambda-Runtime-Deadline-Ms 600000); working within the function's \
                 timeout from FLOE_FUNCTION_TIMEOUT_SECONDS instead"
            );
            timeout
        }
    };
    Instant::now() + remaining.saturating_sub(margin)
}

#[cfg(test)]
mod compactor_tests {
    use floe_core::maintenance::MaintenanceError;
    use floe_core::maintenance::compactor::{RunReport, TableRun};
    use floe_core::maintenance::sweep::SweepReport;
    use floe_core::table::TableName;

    use super::*;

    #[test]
    fn the_response_sorts_tables_into_compacted_skipped_failed_and_unchanged() {
        let name = |n: &str| Some(TableName { namespace: "kafka".into(), name: n.into() });
        let swept = |n: usize| SweepReport { removed: vec!["s3://b/orphan".into(); n], ..Default::default() };
        let report = RunReport {
            tables: vec![
                TableRun {
                    table: name("a"),
                    compactions: 2,
                    files_in: 30,
                    bytes_in: 900,
                    files_out: 2,
                    bytes_out: 880,
                    sweep: swept(3),
                    ..Default::default()
                },
                TableRun { table: name("b"), skipped: Some("suspended: bad record".into()), ..Default::default() },
                TableRun {
                    table: name("c"),
                    error: Some(MaintenanceError::Storage {
                        table: "kafka.c".into(),
                        detail: "SlowDown".into(),
                        retryable: true,
                    }),
                    ..Default::default()
                },
                TableRun { table: name("d"), sweep: swept(1), ..Default::default() },
            ],
        };
        let response = CompactorResponse::from_report(report);
        let json = serde_json::to_value(&response).unwrap();
        assert_eq!(
            json["compacted"],
            serde_json::json!([{"table": "kafka.a", "tasks": 2, "files_in": 30, "bytes_in": 900, "files_out": 2, "bytes_out": 880}])
        );
        assert_eq!(json["skipped"], serde_json::json!([{"table": "kafka.b", "reason": "suspended: bad record"}]));
        assert_eq!(json["failed"], serde_json::json!([{"table": "kafka.c", "reason": "kafka.c: SlowDown"}]));
        assert_eq!((response.unchanged, response.orphans_removed), (1, 4));
    }

    #[test]
    fn retried_tasks_wait_longer_at_each_receive_up_to_eight_times_the_base() {
        let waits: Vec<u64> =
            [0, 1, 2, 3, 4, 5, 100].map(|n| retry_visibility(Duration::from_secs(30), n).as_secs()).to_vec();
        assert_eq!(waits, [30, 30, 60, 120, 240, 240, 240]);
    }

    #[test]
    fn work_stops_a_margin_before_the_invocation_deadline() {
        let timeout = Duration::from_secs(300);
        let stop = stop_before(SystemTime::now() + Duration::from_secs(900), Duration::from_secs(120), timeout);
        let left = stop.saturating_duration_since(Instant::now());
        assert!(left <= Duration::from_secs(780) && left > Duration::from_secs(770), "{left:?}");
        // Reached during the invocation: stop at once.
        let stop = stop_before(SystemTime::now() + Duration::from_secs(60), Duration::from_secs(120), timeout);
        assert!(stop <= Instant::now(), "already past: stop at once");
    }

    #[test]
    fn a_deadline_past_at_the_start_or_beyond_lambdas_longest_is_replaced_by_the_functions_timeout() {
        let timeout = Duration::from_secs(300);
        // What `cargo lambda watch` sends, a deadline a second past, one a day away.
        for deadline in [
            UNIX_EPOCH + Duration::from_millis(600_000),
            SystemTime::now() - Duration::from_secs(1),
            SystemTime::now() + Duration::from_secs(86_400),
        ] {
            let stop = stop_before(deadline, Duration::from_secs(120), timeout);
            let left = stop.saturating_duration_since(Instant::now());
            assert!(left <= Duration::from_secs(180) && left > Duration::from_secs(170), "{deadline:?}: {left:?}");
        }
    }
}
