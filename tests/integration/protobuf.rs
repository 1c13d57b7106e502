//! Protobuf topics: payloads encoded by Google's `protobuf` package (message classes built
//! at run time from descriptors) in kafka-python segments; schemas as `.proto` text from
//! a Schema Registry (an in-test HTTP server speaking its API), a local `.proto` file or a
//! binary FileDescriptorSet; Parquet judged by pyarrow; bad records to the dead-letter
//! table.

use std::path::Path;

use floe_core::config::FloeConfig;
use floe_core::formats::Formats;
use floe_core::materializer::segment::Materialized;

use crate::convert::judge_typed;
use crate::support;

fn data() -> &'static Path {
    support::protobuf_data()
}

fn registry_config(registry_url: &str, mode: &str) -> FloeConfig {
    FloeConfig::parse(&format!(
        "[schema_registry]\nurl = \"{registry_url}\"\n[[topics]]\ntopic = \"orders\"\nvalue_format = \"protobuf\"\nbad_records = \"{mode}\"\n"
    ))
    .unwrap()
}

fn file_config(file: &str) -> FloeConfig {
    FloeConfig::parse(&format!(
        "[[topics]]\ntopic = \"orders\"\nvalue_format = \"protobuf\"\nvalue_schema = {{ file = \"{}\" }}\nvalue_message = \"shop.Order\"\nbad_records = \"dlq\"\n",
        data().join(file).display()
    ))
    .unwrap()
}

async fn run(config: &FloeConfig, out: &Path) -> Result<Materialized, anyhow::Error> {
    support::materialize(config, "orders", &data().join("orders-0/00000000000000000000.log"), out).await
}

fn bad_offsets() -> Vec<i64> {
    let bad: serde_json::Value = serde_json::from_slice(&std::fs::read(data().join("bad.json")).unwrap()).unwrap();
    bad.as_array().unwrap().iter().map(|b| b["offset"].as_i64().unwrap()).collect()
}

#[tokio::test]
async fn registry_proto_schemas_decode_every_mapped_type_and_bad_records_go_to_the_dead_letter_table() {
    let registry = support::start_registry(&data().join("registry.json"), None, 0).await;
    let out = tempfile::tempdir().unwrap();
    let done = run(&registry_config(&registry.url, "dlq"), out.path()).await.unwrap();
    assert_eq!((done.records, done.dead_letters, done.skipped), (31, 3, 0));
    let files: Vec<&str> = done.files.iter().map(|f| f.path()).collect();
    judge_typed(&data().join("expected.jsonl"), &files, &data().join("types.json"), &done.schema);
    let dead = support::dead_letter_rows(&done.dead_letter_files);
    assert_eq!(dead.iter().map(|d| d.0).collect::<Vec<_>>(), bad_offsets());
    assert!(dead[0].1.contains("schema id 99") && dead[0].1.contains("not found"), "{}", dead[0].1);
    // Truncated: the field cut short, and its byte (past the 5-byte header and the index).
    assert!(dead[1].1.contains("value at byte ") && dead[1].1.contains("bytes needed"), "{}", dead[1].1);
    assert!(dead[2].1.contains("message indexes [7]: no such message"), "{}", dead[2].1);
    support::assert_dead_letters_as_written(&dead, &data().join("bad.json"));
    // The latest subject version (id 2, cached), then ids 1 and 99 once each.
    assert_eq!(registry.requests.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_registry_schema_importing_another_subjects_schema_resolves_its_reference() {
    // The latest payments-value and money version 1, once each: id 12 and the numbered
    // version are cached when the payloads' schema is loaded. The record naming its schema
    // by GUID in a header (message indexes after it) adds the GUID lookup.
    assert_eq!(support::reference_case(data(), "payments", "protobuf").await, 3);
}

#[tokio::test]
async fn a_local_proto_file_or_descriptor_set_decodes_every_record_with_that_schema() {
    for file in ["orders_v2.proto", "orders_v2.desc"] {
        let out = tempfile::tempdir().unwrap();
        let done = run(&file_config(file), out.path()).await.unwrap_or_else(|e| panic!("{file}: {e:#}"));
        // Schema ids are not checked: the id-99 record decodes too; v1 records get v2's
        // proto3 default for `note`.
        assert_eq!((done.records, done.dead_letters), (32, 2), "{file}");
        let files: Vec<&str> = done.files.iter().map(|f| f.path()).collect();
        judge_typed(&data().join("expected_local.jsonl"), &files, &data().join("types.json"), &done.schema);
        let dead = support::dead_letter_rows(&done.dead_letter_files);
        assert_eq!(dead.iter().map(|d| d.0).collect::<Vec<_>>(), bad_offsets()[1..], "{file}");
    }
}

#[tokio::test]
async fn a_schema_that_does_not_compile_or_recurses_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("broken.proto", "syntax = \"proto3\";\nmessage Order { int64 id = 1 }\n", "broken.proto"),
        ("rec.proto", "syntax = \"proto3\";\nmessage Order { int64 id = 1; Order parent = 2; }\n", "recursive message"),
        ("other.proto", "syntax = \"proto3\";\nmessage Other { int64 id = 1; }\n", "no message shop.Order"),
    ];
    for (name, text, expected) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let config = FloeConfig::parse(&format!(
            "[[topics]]\ntopic = \"orders\"\nvalue_format = \"protobuf\"\nvalue_schema = {{ file = \"{}\" }}\nvalue_message = \"{}\"\n",
            path.display(),
            if name == "other.proto" { "shop.Order" } else { "Order" }
        ))
        .unwrap();
        let topic = config.resolve("orders").unwrap();
        let err = Formats::load(&config, &topic, None).await.err().expect("an error").to_string();
        assert!(err.contains(expected), "{name}: {err}");
    }
}
