//! Avro topics: fastavro-encoded payloads in kafka-python segments, schemas from a
//! Schema Registry (an in-test HTTP server speaking its API) or a local file, Parquet
//! judged by pyarrow; bad records in each mode.

use std::path::Path;

use floe_core::config::FloeConfig;
use floe_core::materializer::segment::{MaterializeError, Materialized};
use floe_core::retry::Retryable;

use crate::convert::judge_typed;
use crate::support;

fn segment() -> std::path::PathBuf {
    support::avro_data().join("orders-0/00000000000000000000.log")
}

fn config(registry_url: &str, mode: &str, extra: &str) -> FloeConfig {
    FloeConfig::parse(&format!(
        "[schema_registry]\nurl = \"{registry_url}\"\n{extra}\n[[topics]]\ntopic = \"orders\"\nvalue_format = \"avro\"\nbad_records = \"{mode}\"\n"
    ))
    .unwrap()
}

async fn run(config: &FloeConfig, out: &Path) -> Result<Materialized, anyhow::Error> {
    support::materialize(config, "orders", &segment(), out).await
}

fn bad_offsets() -> Vec<i64> {
    let bad: serde_json::Value =
        serde_json::from_slice(&std::fs::read(support::avro_data().join("bad.json")).unwrap()).unwrap();
    bad.as_array().unwrap().iter().map(|b| b["offset"].as_i64().unwrap()).collect()
}

#[tokio::test]
async fn registry_schemas_decode_every_mapped_type_and_bad_records_go_to_the_dead_letter_table() {
    let registry = support::start_registry(&support::avro_data().join("registry.json"), None, 0).await;
    let out = tempfile::tempdir().unwrap();
    let done = run(&config(&registry.url, "dlq", ""), out.path()).await.unwrap();
    assert_eq!((done.records, done.dead_letters, done.skipped), (31, 4, 0));
    let files: Vec<&str> = done.files.iter().map(|f| f.path()).collect();
    let data = support::avro_data();
    judge_typed(&data.join("expected.jsonl"), &files, &data.join("types.json"), &done.schema);
    let dead = support::dead_letter_rows(&done.dead_letter_files);
    assert_eq!(dead.iter().map(|d| d.0).collect::<Vec<_>>(), bad_offsets());
    // An unknown id is located where it is: the payload's byte 1, or byte 0 for a header.
    assert_eq!(dead[0].1, "value at byte 1: schema id 99: not found");
    assert!(dead[1].1.contains("value at byte"), "{}", dead[1].1);
    assert!(dead[2].1.contains("magic byte 1"), "{}", dead[2].1);
    assert_eq!(dead[3].1, "value at byte 0: schema id 98: not found");
    // Each kept as it came: its key and raw value, byte for byte.
    support::assert_dead_letters_as_written(&dead, &support::avro_data().join("bad.json"));
    // The latest subject version (id 2, cached), then ids 1, 99 and 98 once each — an
    // unknown id is remembered, not asked for again per record.
    assert_eq!(registry.requests.load(std::sync::atomic::Ordering::SeqCst), 4);
}

#[tokio::test]
async fn skip_counts_and_suspend_names_the_record() {
    let registry = support::start_registry(&support::avro_data().join("registry.json"), None, 0).await;
    let out = tempfile::tempdir().unwrap();
    let skipped = run(&config(&registry.url, "skip", ""), out.path()).await.unwrap();
    assert_eq!((skipped.records, skipped.skipped, skipped.dead_letter_files.len()), (31, 4, 0));
    let err = run(&config(&registry.url, "suspend", ""), tempfile::tempdir().unwrap().path()).await.unwrap_err();
    let err = err.downcast::<MaterializeError>().unwrap();
    assert!(!err.retryable());
    let msg = err.to_string();
    assert!(msg.contains("partition 0 offset 6") && msg.contains("00000000000000000000.log"), "{msg}");
}

#[tokio::test]
async fn registry_retries_5xx_and_sends_basic_auth() {
    let registry = support::start_registry(&support::avro_data().join("registry.json"), Some("floe:s3cret"), 2).await;
    // SAFETY: set before any other thread reads this variable name; unique to this test.
    unsafe { std::env::set_var("FLOE_TEST_SR_PASSWORD", "s3cret") };
    let auth = "username = \"floe\"\npassword_env = \"FLOE_TEST_SR_PASSWORD\"";
    let done = run(&config(&registry.url, "skip", auth), tempfile::tempdir().unwrap().path()).await.unwrap();
    assert_eq!(done.records, 31);
    // A wrong password: a 401 (not retried), and the error does not show the password.
    // SAFETY: as above.
    unsafe { std::env::set_var("FLOE_TEST_SR_WRONG_PASSWORD", "wr0ng-passw0rd") };
    let wrong = "username = \"floe\"\npassword_env = \"FLOE_TEST_SR_WRONG_PASSWORD\"";
    let err = run(&config(&registry.url, "skip", wrong), tempfile::tempdir().unwrap().path()).await.unwrap_err();
    let msg = format!("{err:#} {err:?}");
    assert!(msg.contains("401"), "{msg}");
    assert!(!msg.contains("wr0ng-passw0rd") && !msg.contains("s3cret"), "{msg}");
    // A variable that is not set: an error naming it before any request.
    let before = registry.requests.load(std::sync::atomic::Ordering::SeqCst);
    let unset = "username = \"floe\"\npassword_env = \"FLOE_TEST_SR_NO_SUCH_VAR\"";
    let err = run(&config(&registry.url, "skip", unset), tempfile::tempdir().unwrap().path()).await.unwrap_err();
    assert!(
        err.to_string().contains("password_env: the environment variable FLOE_TEST_SR_NO_SUCH_VAR is not set"),
        "{err}"
    );
    assert_eq!(registry.requests.load(std::sync::atomic::Ordering::SeqCst), before);
}

#[tokio::test]
async fn a_registry_that_keeps_failing_gets_four_attempts_then_a_retryable_error() {
    let registry = support::start_registry(&support::avro_data().join("registry.json"), None, usize::MAX).await;
    let err = run(&config(&registry.url, "dlq", ""), tempfile::tempdir().unwrap().path()).await.unwrap_err();
    let err = err.downcast::<floe_core::materializer::MaterializerError>().unwrap();
    assert!(err.retryable() && err.to_string().contains("503"), "{err}");
    assert_eq!(registry.requests.load(std::sync::atomic::Ordering::SeqCst), 4);
}

#[tokio::test]
async fn a_registry_that_never_answers_times_out_on_each_attempt() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // Accepts connections and reads, never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let connections = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = connections.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            held.push(socket);
        }
    });
    let err = run(&config(&url, "dlq", "timeout_ms = 200"), tempfile::tempdir().unwrap().path()).await.unwrap_err();
    let err = err.downcast::<floe_core::materializer::MaterializerError>().unwrap();
    assert!(err.retryable() && err.to_string().contains("no answer within 200 ms"), "{err}");
    assert_eq!(connections.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn a_configured_subject_is_the_one_asked_for() {
    let registry = support::start_registry(&support::avro_data().join("registry.json"), None, 0).await;
    let named = |subject: &str| {
        FloeConfig::parse(&format!(
            "[schema_registry]\nurl = \"{}\"\n[[topics]]\ntopic = \"orders\"\nvalue_format = \"avro\"\nvalue_schema = {{ subject = \"{subject}\" }}\nbad_records = \"skip\"\n",
            registry.url
        ))
        .unwrap()
    };
    let done = run(&named("orders-value"), tempfile::tempdir().unwrap().path()).await.unwrap();
    assert_eq!((done.records, done.skipped), (31, 4));
    let err = run(&named("payments-value"), tempfile::tempdir().unwrap().path()).await.unwrap_err();
    assert!(err.to_string().contains("payments-value") && err.to_string().contains("not found"), "{err}");
}

#[tokio::test]
async fn an_unreachable_registry_is_a_retryable_error_not_bad_records() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = config(&format!("http://127.0.0.1:{port}"), "dlq", "timeout_ms = 500");
    let err = run(&config, tempfile::tempdir().unwrap().path()).await.unwrap_err();
    let err = err.downcast::<floe_core::materializer::MaterializerError>().unwrap();
    assert!(err.retryable() && err.to_string().contains("Connection refused"), "{err}");
}

#[tokio::test]
async fn a_local_schema_file_decodes_the_records_written_with_it() {
    let schema = support::avro_data().join("orders_v2.avsc");
    let config = FloeConfig::parse(&format!(
        "[[topics]]\ntopic = \"orders\"\nvalue_format = \"avro\"\nvalue_schema = {{ file = \"{}\" }}\nbad_records = \"dlq\"\n",
        schema.display()
    ))
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let done = run(&config, out.path()).await.unwrap();
    // v1 records (offsets 0..=12 but for the bad one) lack v2's `note`: with one fixed
    // schema they are bad records, kept in the dead-letter table. (The v2 record whose
    // header names an unknown id decodes: a schema file ignores ids.)
    let dead = support::dead_letter_rows(&done.dead_letter_files);
    assert_eq!(done.records + done.dead_letters, 35);
    assert_eq!(dead.len(), 15, "{dead:?}");
    assert!(done.records >= 18);
}

#[tokio::test]
async fn a_registry_schema_using_another_subjects_named_type_resolves_its_reference() {
    // The latest customers-value and address version 1, once each (then cached); the
    // record naming its schema by GUID in a header adds the GUID lookup. The header with
    // the numeric id finds it cached.
    assert_eq!(support::reference_case(support::avro_data(), "customers", "avro").await, 3);
}
