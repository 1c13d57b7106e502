//! What the Lambda functions share, and each function's part, one file a function:
//! [`materializer`](mod@materializer), [`committer`](mod@committer) and
//! [`compactor`](mod@compactor), each re-exported here. This file holds the runtime bits
//! the three share: their errors at init, the catalog `floe.toml` names (opened by
//! [`crate::catalogs::open`]) and the check that it is the one the stack grants, the environment's parsing, the `floe.toml` they
//! load (from S3 or a path); Schema Registry credentials from Secrets Manager; JSON logs;
//! the metrics of an invocation (EMF lines, [`measured`], [`print_emf`]); and the
//! committer's and the compactor's working deadline ([`stop_before`]: the invocation's,
//! or the function's timeout when the runtime hands none that can be believed, as
//! `cargo lambda watch`).
//!
//! A function's `main.rs` only wires these together; everything here is testable
//! without the Lambda runtime.

pub mod committer;
pub mod compactor;
pub mod materializer;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use floe_core::config::{CatalogConfig, FloeConfig};
use floe_core::formats::password_from_env;
use floe_core::maintenance::TableRegistry;
use floe_core::metrics::{self, Recorder};
use floe_core::storage::split_s3_uri;

use crate::catalogs::{Host, OpenedCatalog};
use crate::s3::read_s3_uri;

pub use committer::{
    CommitterEnv, CommitterService, committer, committer_catalog, handle_committer_event, retry_visibility,
};
pub use compactor::{
    CompactedTable, CompactorEnv, CompactorResponse, CompactorService, TableNote, compactor, handle_compactor_event,
};
pub use materializer::{
    MaterializerEnv, MaterializerFailure, MaterializerResponse, handle_materializer_event, materializer,
};

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

/// The catalog `[catalog]` names (Glue without it) with its files (the warehouse's in
/// S3, through `s3`), split with the lock table `lock_table` when a topic is Delta-only,
/// checked at start-up: against the catalog the stack was deployed for too
/// (`FLOE_CATALOG_TYPE`, `FLOE_TABLE_BUCKET_ARN`, which infra/template.yaml sets from the
/// parameters that grant its permissions).
pub async fn open_catalog(
    aws: &aws_config::SdkConfig,
    s3: &aws_sdk_s3::Client,
    config: &FloeConfig,
    lock_table: &str,
) -> Result<OpenedCatalog, InitError> {
    let deployed_type = std::env::var("FLOE_CATALOG_TYPE").ok();
    let deployed_bucket = std::env::var("FLOE_TABLE_BUCKET_ARN").ok();
    deployed_catalog_matches(config.catalog.as_ref(), deployed_type.as_deref(), deployed_bucket.as_deref())
        .map_err(InitError::Catalog)?;
    let host = Host::Aws { aws, s3: s3.clone(), lock_table: Some(lock_table) };
    crate::catalogs::open(config, host).await.map_err(|e| InitError::Catalog(e.to_string()))
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
    let configured = config.unwrap_or(&CatalogConfig::Glue).kind();
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

/// The S3 client of a function (path-style addressing for local endpoints).
fn s3_client(aws: &aws_config::SdkConfig, path_style: bool) -> aws_sdk_s3::Client {
    aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(aws).force_path_style(path_style).build())
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
