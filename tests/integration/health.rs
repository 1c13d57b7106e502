//! A table's health as status shows it, end to end: a topic whose schema reference is bad
//! (an Avro schema file that does not parse, a Protobuf message its descriptor does not
//! have) fails its segments, and `floe local status` shows its table as `config issue`
//! naming the reference, readable and as JSON; the configuration fixed, the next run
//! commits every record once (PyIceberg) and the table is `running` again. The same on
//! moto, the materializer built as its Lambda builds it, and `floe aws status`.
//!
//! `running` means the next commit can succeed: a table whose state file is gone, or
//! whose current metadata file is corrupt or gone, is `degraded`, naming what cannot be
//! read; on moto, a table whose lease another owner holds (the committer gives its tasks
//! back) is `degraded`, naming the holder, until the lease is free or a commit succeeds.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use floe_aws::lambda::handle_committer_event;
use floe_core::catalog::Catalog;
use floe_core::config::FloeConfig;
use floe_core::lock::TableLocks;
use floe_core::maintenance::TableRegistry;
use floe_core::materializer::ObjectRef;
use floe_core::retry::Retryable;
use floe_core::task::TableName;
use serde_json::Value;

use crate::backfill::commit_until;
use crate::committer::{SEGMENTS, assert_payments, copy, local_run, payments, read_local, setup_with};
use crate::support;

const TIERED: &str = "tiered/page.views-MWJ6FHTfRYy67jzwZdeqSQ/0/00000000000000000000-tqimKeZwStOEOwRzT3L5oQ";

/// The sample shipments (Avro) and page views (Protobuf) topics, their schemas at
/// `avro_schema` and the example's, the page views' message `message`.
fn config(avro_schema: &Path, message: &str) -> FloeConfig {
    let proto = support::root().join("examples/schemas/page_view.proto");
    FloeConfig::parse(&format!(
        "[[topics]]\ntopic = \"shipments\"\nvalue_format = \"avro\"\nvalue_schema = {{ file = \"{}\" }}\n\
         [[topics]]\ntopic = \"page.views\"\nvalue_format = \"protobuf\"\nvalue_schema = {{ file = \"{}\" }}\n\
         value_message = \"{message}\"\n",
        avro_schema.display(),
        proto.display()
    ))
    .unwrap()
}

/// Each table's (state, reason) as `floe local status --json` prints it, and the
/// readable table.
async fn status(warehouse: &Path) -> (Vec<(String, String, Option<String>)>, String) {
    let shown = floe_cli::local::status(warehouse).await.unwrap();
    let json = shown
        .iter()
        .map(|t| {
            let line: Value = serde_json::from_str(&serde_json::to_string(t).unwrap()).unwrap();
            let reason = line["reason"].as_str().map(str::to_string);
            (line["table"].as_str().unwrap().to_string(), line["state"].as_str().unwrap().to_string(), reason)
        })
        .collect();
    let rows: Vec<_> = shown.iter().map(|t| (t.table.as_str(), &t.health)).collect();
    (json, floe_cli::health::render(&rows))
}

#[tokio::test]
async fn a_bad_schema_reference_shows_as_a_config_issue_until_the_configuration_is_fixed() {
    let samples = support::root().join("examples/segments");
    let (input, warehouse, schemas) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(&samples, input.path(), "shipments-0/00000000000000000000.log");
    for ext in ["log", "indexes", "rsm-manifest"] {
        copy(&samples, input.path(), &format!("{TIERED}.{ext}"));
    }
    let avsc = schemas.path().join("shipment.avsc");
    std::fs::write(&avsc, "{\"type\": \"record\", \"name\": ").unwrap();
    let run = |config: FloeConfig| {
        let (input, warehouse) = (input.path().to_path_buf(), warehouse.path().to_path_buf());
        async move { floe_cli::local::run_local(&input, &warehouse, config).await.unwrap() }
    };

    let report = run(config(&avsc, "web.Nope")).await;
    // Both segments fail (nothing is written): a later run tries them again.
    assert_eq!(report.failed.len(), 2, "{:?}", report.failed);
    let (tables, readable) = status(warehouse.path()).await;
    let [(views, views_state, views_reason), (shipments, shipments_state, shipments_reason)] = &tables[..] else {
        panic!("{tables:?}")
    };
    assert_eq!((views.as_str(), views_state.as_str()), ("kafka.page_views", "config issue"));
    assert_eq!((shipments.as_str(), shipments_state.as_str()), ("kafka.shipments", "config issue"));
    let views_reason = views_reason.as_deref().unwrap();
    let proto = support::root().join("examples/schemas/page_view.proto");
    let expected = format!(
        "config: page.views: value: protobuf schema: no message web.Nope in the schema (value_schema file {})",
        proto.display()
    );
    assert_eq!(views_reason, expected);
    let shipments_reason = shipments_reason.as_deref().unwrap();
    assert!(shipments_reason.starts_with("config: shipments: value: "), "{shipments_reason}");
    assert!(shipments_reason.ends_with(&format!(" (value_schema file {})", avsc.display())), "{shipments_reason}");
    assert!(readable.contains("\nkafka.page_views  config issue"), "{readable}");
    assert!(readable.contains(shipments_reason), "{readable}");

    // Fixed: the next run commits both topics' every record, and the tables run.
    std::fs::copy(support::root().join("examples/schemas/shipment.avsc"), &avsc).unwrap();
    let report = run(config(&avsc, "web.PageView")).await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let (tables, readable) = status(warehouse.path()).await;
    let states: Vec<(&str, &str, Option<&str>)> =
        tables.iter().map(|(t, s, r)| (t.as_str(), s.as_str(), r.as_deref())).collect();
    assert_eq!(states, [("kafka.page_views", "running", None), ("kafka.shipments", "running", None)], "{readable}");
    for (table, records) in [("kafka.page_views", 200), ("kafka.shipments", 120)] {
        let read = read_local(warehouse.path(), table);
        assert_eq!(read.offsets["0"], (0..records).collect::<Vec<i64>>(), "{table}");
        assert_eq!((read.rows, read.duplicates), (records as usize, 0), "{table}");
    }
}

#[tokio::test]
async fn on_aws_a_bad_schema_reference_shows_in_status_until_the_configuration_is_fixed() {
    let schemas = tempfile::tempdir().unwrap();
    let avsc = schemas.path().join("payment.avsc");
    std::fs::write(&avsc, "{\"type\": \"record\", \"name\": ").unwrap();
    let topic_toml = format!(
        "[[topics]]\ntopic = \"payments\"\nvalue_format = \"avro\"\nvalue_schema = {{ file = \"{}\" }}\n",
        avsc.display()
    );
    let aws = setup_with("cfgissue", &topic_toml).await;
    let (topic, offsets, values) = payments();
    let broken = aws.materializer().await;
    for key in SEGMENTS {
        let body = std::fs::read(topic.path().join(key)).unwrap();
        aws.s3.put_object().bucket(&aws.segments).key(key).body(body.into()).send().await.unwrap();
    }
    let error = broken.handle(&ObjectRef::new(&aws.segments, SEGMENTS[0])).await.unwrap_err();
    assert!(error.is_config_issue() && !error.retryable(), "{error}");
    assert!(aws.receive().await.0.records.is_empty(), "nothing queued");
    // `floe aws status`, as JSON and readable: a config issue naming the schema file.
    let listed = floe_cli::aws::status(&aws.config, &aws.locks, true).await.unwrap();
    let json = serde_json::to_value(&listed[0]).unwrap();
    let table = aws.table().to_string();
    assert_eq!((&json["table"], &json["state"]), (&Value::from(table.as_str()), &Value::from("config issue")));
    let reason = json["reason"].as_str().unwrap();
    assert!(reason.starts_with("config: payments: value: "), "{reason}");
    assert!(reason.ends_with(&format!(" (value_schema file {})", avsc.display())), "{reason}");
    let rows: Vec<_> = listed.iter().map(|t| (t.table.as_str(), &t.health)).collect();
    let readable = floe_cli::health::render(&rows);
    assert!(readable.contains(&format!("\n{table}  config issue")) && readable.contains(reason), "{readable}");

    // Fixed (the topic's default format again), the segments sent again commit, once.
    std::fs::write(&aws.config_file, "[defaults]\nenabled = true\nnamespace = \"cfgissue\"\n").unwrap();
    let fixed = aws.materializer().await;
    for key in SEGMENTS {
        fixed.handle(&ObjectRef::new(&aws.segments, key)).await.unwrap();
    }
    commit_until(&aws, &AtomicBool::new(true)).await;
    let listed = floe_cli::aws::status(&aws.config, &aws.locks, true).await.unwrap();
    assert_eq!((listed[0].health.state, listed[0].health.reason.as_deref()), ("running", None));
    assert_payments(&aws.read(), &offsets, &values);
}

/// The path of `kafka.<table>`'s current metadata file and the state file its current
/// snapshot names.
async fn current_files(warehouse: &Path, table: &str) -> (String, String) {
    let catalog = floe_core::catalog::sqlite::SqliteCatalog::open(&warehouse.join("catalog.db"), "floe").unwrap();
    let name = TableName { namespace: "kafka".into(), name: table.into() };
    let location = catalog.current(&name).await.unwrap().unwrap().metadata_location;
    let path = location.strip_prefix("file://").unwrap_or(&location).to_string();
    let metadata: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let current = &metadata["current-snapshot-id"];
    let snapshots = metadata["snapshots"].as_array().unwrap();
    let snapshot = snapshots.iter().find(|s| &s["snapshot-id"] == current).unwrap();
    let state = snapshot["summary"]["floe.state"].as_str().expect("a state file").to_string();
    (path, state.strip_prefix("file://").unwrap_or(&state).to_string())
}

/// Asserts the one table of `warehouse` is `degraded` for a reason starting `why`, in
/// the JSON and in the readable table alike; returns the reason.
async fn assert_degraded(warehouse: &Path, why: &str) -> String {
    let (tables, readable) = status(warehouse).await;
    let [(table, state, Some(reason))] = &tables[..] else { panic!("{tables:?}") };
    assert_eq!((table.as_str(), state.as_str()), ("kafka.payments", "degraded"), "{readable}");
    assert!(reason.starts_with(why), "{reason}");
    assert!(readable.contains("\nkafka.payments  degraded") && readable.contains(&format!("  degraded: {reason}\n")));
    reason.clone()
}

/// Issue 40 item 6: the payments topic's first segment leaves a transaction open, so its
/// snapshot names a state file. That file gone, then the metadata file corrupt, then gone:
/// each time the table is `degraded`, naming what the next commit cannot read (and the
/// next run does fail on it), not `running`.
#[tokio::test]
async fn a_table_whose_state_or_metadata_cannot_be_read_is_degraded_not_running() {
    let (topic, _, _) = payments();
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(topic.path(), input.path(), SEGMENTS[0]);
    assert!(local_run(input.path(), warehouse.path()).await.failed.is_empty());
    let (tables, _) = status(warehouse.path()).await;
    assert_eq!(tables, [("kafka.payments".to_string(), "running".to_string(), None)]);
    let (metadata, state) = current_files(warehouse.path(), "payments").await;

    std::fs::remove_file(&state).unwrap();
    let reason = assert_degraded(warehouse.path(), "its table state ").await;
    assert!(reason.contains(&state) && reason.contains("so it cannot commit: "), "{reason}");
    std::fs::write(&state, b"{").unwrap();
    assert_degraded(warehouse.path(), "its table state ").await;

    std::fs::write(&metadata, b"{\"format-version\": ").unwrap();
    assert_degraded(warehouse.path(), "its metadata cannot be read, so it cannot commit: ").await;
    std::fs::remove_file(&metadata).unwrap();
    assert_degraded(warehouse.path(), "its metadata cannot be read, so it cannot commit: ").await;
    copy(topic.path(), input.path(), SEGMENTS[1]);
    let report = floe_cli::local::run_local(input.path(), warehouse.path(), FloeConfig::default()).await.unwrap();
    assert!(!report.failed.is_empty(), "the next commit fails as status said");
}

/// Issue 40 item 6, on moto: another owner holds the table's lease (a committer killed
/// mid-commit, another stack): the committer gives the tasks back and `floe aws status`
/// says `degraded`, naming the holder, as JSON and readable. The lease free, the table
/// runs again; the tasks then commit, once, and the record of the lease ends.
#[tokio::test]
async fn on_aws_a_lease_held_by_another_owner_degrades_the_table_until_it_is_free() {
    let aws = setup_with("leaseheld", "").await;
    let (topic, offsets, values) = payments();
    let m = aws.materializer().await;
    for key in SEGMENTS {
        aws.materialize(&m, topic.path(), key).await;
    }
    let locks = floe_aws::dynamodb::DynamoDbLocks::new(aws_sdk_dynamodb::Client::new(&aws.config), &aws.locks);
    let table = aws.table().to_string();
    let elsewhere = locks.acquire(&table, "committer-elsewhere", Duration::from_secs(300)).await.unwrap().unwrap();
    let (event, _) = aws.receive().await;
    let given = event.records.len();
    let response = handle_committer_event(&aws.committer(), event, None).await;
    assert_eq!(response.batch_item_failures.len(), given, "every task given back");

    let aws_status = async || {
        let listed = floe_cli::aws::status(&aws.config, &aws.locks, true).await.unwrap();
        let json = serde_json::to_value(&listed[0]).unwrap();
        let rows: Vec<_> = listed.iter().map(|t| (t.table.as_str(), &t.health)).collect();
        (json, floe_cli::health::render(&rows))
    };
    let (json, readable) = aws_status().await;
    assert_eq!((&json["table"], &json["state"]), (&Value::from(table.as_str()), &Value::from("degraded")));
    let reason = json["reason"].as_str().unwrap();
    assert!(reason.starts_with("lease: held by committer-elsewhere until ") && reason.ends_with(": tasks given back"));
    assert!(readable.contains(&format!("\n{table}  degraded")) && readable.contains(reason), "{readable}");

    // Free: the next commit can take the lease.
    locks.release(&elsewhere).await.unwrap();
    let (json, readable) = aws_status().await;
    assert_eq!((&json["state"], &json["reason"]), (&Value::from("running"), &Value::Null), "{readable}");
    commit_until(&aws, &AtomicBool::new(true)).await;
    assert!(locks.status(&aws.table()).await.unwrap().failing.is_empty(), "a commit ends the lease's record");
    assert_payments(&aws.read(), &offsets, &values);
}
