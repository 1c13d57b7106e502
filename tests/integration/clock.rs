//! A committer whose clock is 30 days ahead commits to a table: the commits after it,
//! `floe local run` on the right time, go on (stamped after it, so the table's times never go back), PyIceberg
//! reads every record once, and `floe local status` shows the table running with a
//! warning, readable and as JSON.

use std::path::Path;
use std::sync::Arc;

use floe_core::catalog::sqlite::SqliteCatalog;
use floe_core::config::FloeConfig;
use floe_core::lock::Clock;
use floe_core::table::{CatalogTables, TableName};
use serde_json::Value;

use floe_core::committer::TaskResult;

use crate::committer::{SEGMENTS, assert_payments, copy, local_committer, materialize, payments, read_local};

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// The table's snapshot-log and metadata-log times, oldest first.
async fn logged_times(warehouse: &Path, table: &str) -> (Vec<i64>, Vec<i64>) {
    let catalog = SqliteCatalog::open(&warehouse.join("catalog.db"), "floe").unwrap();
    let tables = CatalogTables {
        catalog: Arc::new(catalog),
        file_io: floe_core::storage::local_file_io(),
        delta_log: Arc::new(floe_core::delta::LocalLogStore),
    };
    let loaded = tables.load(&TableName::parse(table).unwrap()).await.unwrap().unwrap();
    let snapshots = loaded.metadata.history().iter().map(|l| l.timestamp_ms).collect();
    let metadata = loaded.metadata.metadata_log().iter().map(|l| l.timestamp_ms).collect();
    (snapshots, metadata)
}

#[tokio::test]
async fn a_commit_from_a_clock_30_days_ahead_neither_blocks_the_table_nor_turns_its_times_back() {
    let (topic, offsets, values) = payments();
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(topic.path(), input.path(), SEGMENTS[0]);
    let ahead = local_committer(warehouse.path()).with_clock(Clock::Shifted { by_ms: 30 * DAY_MS });
    let task = materialize(FloeConfig::default(), input.path(), &ahead.warehouse, SEGMENTS[0]).await;
    let report = ahead.commit(&[task], None).await;
    assert_eq!(report.results[0].1, TaskResult::Committed);
    // Back on the right time: the next segments commit, one run each.
    for segment in &SEGMENTS[1..] {
        copy(topic.path(), input.path(), segment);
        let report = floe_cli::local::run_local(input.path(), warehouse.path(), FloeConfig::default()).await.unwrap();
        assert!(report.failed.is_empty(), "a commit after the clock ahead: {:?}", report.failed);
        assert!(report.maintenance_failed.is_empty(), "{:?}", report.maintenance_failed);
    }
    assert_payments(&read_local(warehouse.path(), "kafka.payments"), &offsets, &values);

    let (snapshots, metadata) = logged_times(warehouse.path(), "kafka.payments").await;
    assert_eq!(snapshots.len(), 3, "{snapshots:?}");
    assert!(snapshots.windows(2).all(|w| w[0] < w[1]), "snapshot times go on: {snapshots:?}");
    assert!(metadata.windows(2).all(|w| w[0] <= w[1]), "metadata-log times go on: {metadata:?}");
    assert!(snapshots[0] > floe_core::lock::now_ms() + 29 * DAY_MS, "the first was stamped ahead: {snapshots:?}");

    // Status: running, with the clock ahead as a warning, readable and as JSON.
    let shown = floe_cli::local::status(warehouse.path()).await.unwrap();
    let [table] = &shown[..] else { panic!("{shown:?}") };
    let json: Value = serde_json::to_value(table).unwrap();
    assert_eq!(json["state"], "running", "{json}");
    let ahead_ms = json["clock_ahead_ms"].as_i64().unwrap();
    assert!((29 * DAY_MS..=30 * DAY_MS).contains(&ahead_ms), "{json}");
    let warning = json["warnings"][0].as_str().unwrap();
    assert!(warning.starts_with("clock ahead: the table's last commit is stamped 30.0 days ahead"), "{warning}");
    let readable = floe_cli::health::render(&[(table.table.as_str(), &table.health)]);
    assert!(readable.contains("kafka.payments  running"), "{readable}");
    assert!(readable.contains(&format!("\n  warning: {warning}\n")), "{readable}");
}
