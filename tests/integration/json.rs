//! JSON Schema and plain JSON topics: payloads from Python's json module in kafka-python
//! segments, Parquet judged by pyarrow, bad records kept with their reason.

use std::path::PathBuf;

use floe_core::config::FloeConfig;

use crate::convert::judge_typed;
use crate::support;

fn data(rel: &str) -> PathBuf {
    support::json_data().join(rel)
}

fn bad(topic: &str) -> Vec<(i64, String)> {
    let bad: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data(&format!("{topic}.bad.json"))).unwrap()).unwrap();
    bad.as_array()
        .unwrap()
        .iter()
        .map(|b| (b["offset"].as_i64().unwrap(), b["why"].as_str().unwrap().to_string()))
        .collect()
}

async fn check(config: &FloeConfig, topic: &str, rows: usize) {
    let out = tempfile::tempdir().unwrap();
    let segment = data(&format!("{topic}-0/00000000000000000000.log"));
    let done = support::materialize(config, topic, &segment, out.path()).await.unwrap();
    assert_eq!(done.records as usize, rows, "{topic}");
    let files: Vec<&str> = done.files.iter().map(|f| f.path()).collect();
    judge_typed(&data(&format!("{topic}.expected.jsonl")), &files, &data(&format!("{topic}.types.json")), &done.schema);
    let dead = support::dead_letter_rows(&done.dead_letter_files);
    let expected = bad(topic);
    assert_eq!(dead.len(), expected.len(), "{topic}: {dead:?}");
    for ((offset, error, raw, _key), (want_offset, why)) in dead.iter().zip(&expected) {
        assert_eq!(offset, want_offset);
        assert!(error.contains(why.as_str()), "{topic} offset {offset}: {error:?} lacks {why:?}");
        assert!(raw.is_some());
    }
    support::assert_dead_letters_as_written(&dead, &data(&format!("{topic}.bad.json")));
}

#[tokio::test]
async fn json_schema_from_the_registry_maps_every_row_and_checks_records() {
    let registry = support::start_registry(&data("events.registry.json"), None, 0).await;
    let config = FloeConfig::parse(&format!(
        "[schema_registry]\nurl = \"{}\"\n[[topics]]\ntopic = \"events\"\nvalue_format = \"json-schema\"\nbad_records = \"dlq\"\n",
        registry.url
    ))
    .unwrap();
    check(&config, "events", 20).await;
}

#[tokio::test]
async fn a_registry_json_schema_referring_to_another_subjects_schema_resolves_its_reference() {
    // The latest payments-value and money version 1, once each (JSON decodes by the
    // table's types: the ids and the GUID in the records are not looked up).
    assert_eq!(support::reference_case(support::json_data(), "payments", "json-schema").await, 2);
}

#[tokio::test]
async fn json_schema_from_a_local_file() {
    let config = FloeConfig::parse(&format!(
        "[[topics]]\ntopic = \"events\"\nvalue_format = \"json-schema\"\nvalue_schema = {{ file = \"{}\" }}\nbad_records = \"dlq\"\n",
        data("events.schema.json").display()
    ))
    .unwrap();
    check(&config, "events", 20).await;
}

#[tokio::test]
async fn plain_json_types_are_inferred_from_the_segment() {
    let config =
        FloeConfig::parse("[[topics]]\ntopic = \"clicks\"\nvalue_format = \"json\"\nbad_records = \"dlq\"\n").unwrap();
    check(&config, "clicks", 16).await;
}

#[tokio::test]
async fn auto_takes_the_format_of_the_registry_subject_or_raw() {
    let registry = support::start_registry(&data("events.registry.json"), None, 0).await;
    let config = FloeConfig::parse(&format!(
        "[schema_registry]\nurl = \"{}\"\n[defaults]\nenabled = true\nvalue_format = \"auto\"\nbad_records = \"dlq\"\n",
        registry.url
    ))
    .unwrap();
    check(&config, "events", 20).await;
    // No `clicks-value` subject: raw bytes, every record kept as it is.
    let out = tempfile::tempdir().unwrap();
    let done =
        support::materialize(&config, "clicks", &data("clicks-0/00000000000000000000.log"), out.path()).await.unwrap();
    assert_eq!((done.records, done.dead_letters), (17, 0));
    assert!(done.schema.as_struct().field_by_name("value").is_some());
}
