//! Upsert tables (`mode = "upsert"`): one row per key, its latest record's, judged by
//! PyIceberg (which applies position deletes) against a dict model of the topic
//! (tests/py/make_upsert.py): segments committed in shuffled orders, all at once and one
//! by one, a segment delivered again, then compacted.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use floe_core::config::FloeConfig;

use crate::committer::{Read, copy, read_local};
use crate::support;

/// What the table must hold (make_upsert.py's accounts.json).
#[derive(serde::Deserialize)]
struct Model {
    live: BTreeMap<String, Vec<i64>>,
    values: BTreeMap<String, String>,
    keys: usize,
    tombstones: usize,
}

fn data() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        support::run_python("make_upsert.py", &[dir.path()]);
        dir
    })
    .path()
}

fn model() -> Model {
    serde_json::from_slice(&std::fs::read(data().join("accounts.json")).unwrap()).unwrap()
}

fn segments() -> Vec<String> {
    let mut all = Vec::new();
    for partition in 0..2 {
        for base in [0, 40, 80] {
            all.push(format!("accounts-{partition}/{base:020}.log"));
        }
    }
    all
}

fn config() -> FloeConfig {
    FloeConfig::parse(
        r#"
        [[topics]]
        topic = "accounts"
        value_format = "json"
        mode = "upsert"
        "#,
    )
    .unwrap()
}

async fn run(input: &Path, warehouse: &Path) {
    let mut out = Vec::new();
    let report = floe_cli::local::run(input, warehouse, config(), &mut out).await.unwrap();
    assert!(report.failed.is_empty(), "{:?}", report.failed);
}

/// The table holds exactly the model's rows: each live key's last record, no other.
fn assert_model(read: &Read, model: &Model, what: &str) {
    assert_eq!(read.duplicates, 0, "{what}");
    assert_eq!(read.offsets, model.live, "{what}: the offsets of the rows read");
    assert_eq!(read.rows, model.keys, "{what}");
    for (at, value) in &model.values {
        assert_eq!(read.values.get(at).cloned().flatten().as_deref(), Some(value.as_str()), "{what}: {at}");
    }
    assert_eq!(read.nulls.get("id"), Some(&0), "{what}: no tombstone row is visible");
}

/// `floe audit` finds every key's latest record, and only those, exactly once.
async fn assert_audit(warehouse: &Path, model: &Model) {
    let (report, code, text) = crate::audit::audit(warehouse, "kafka.accounts").await;
    assert_eq!(code, 0, "{text}");
    for p in &report.partitions {
        let upsert = p.upsert.as_ref().expect("an upsert table is audited against its key index");
        assert_eq!(upsert.live_keys as usize, model.live[&p.partition.to_string()].len(), "{text}");
        let superseded = p.gaps.iter().all(|g| g.reason == floe_core::table::audit::GapReason::Deleted);
        assert!(superseded, "every offset without a row is a superseded record: {:?}", p.gaps);
    }
}

#[tokio::test]
async fn an_upsert_table_holds_each_key_s_latest_record_whatever_order_segments_commit_in() {
    let model = model();
    assert!(model.tombstones > 5 && model.keys > 10, "the data has updates and tombstones");
    let all = segments();
    // Each segment by its own run, in three orders (forward, backward, interleaved).
    for order in [vec![0, 1, 2, 3, 4, 5], vec![5, 4, 3, 2, 1, 0], vec![2, 3, 0, 5, 1, 4]] {
        let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for &i in &order {
            copy(data(), input.path(), &all[i]);
            run(input.path(), warehouse.path()).await;
        }
        let read = read_local(warehouse.path(), "kafka.accounts");
        assert_model(&read, &model, &format!("order {order:?}"));
        assert_eq!(read.summary["floe.upsert.live-keys"], model.keys.to_string());
        assert_audit(warehouse.path(), &model).await;
    }
}

#[tokio::test]
async fn an_upsert_table_survives_a_redelivered_segment_and_compaction_between_its_commits() {
    let model = model();
    let all = segments();
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // The first two segments of each partition in one run: one commit resolves rows
    // across files, then the run's compaction applies its deletes.
    for i in [0, 1, 3, 4] {
        copy(data(), input.path(), &all[i]);
    }
    run(input.path(), warehouse.path()).await;
    let first = read_local(warehouse.path(), "kafka.accounts");
    let operations: Vec<&str> = first.history.iter().map(|h| h["operation"].as_str()).collect();
    assert_eq!(operations, ["overwrite", "replace"], "rows added and deleted in one snapshot, then compacted");
    let (added, removed) = (&first.history[0]["added-position-deletes"], &first.history[1]["removed-position-deletes"]);
    assert_eq!(added, removed, "compaction applied every delete and dropped them");
    assert_eq!(first.summary["total-records"], first.rows.to_string(), "no deleted row is left in a file");
    // A segment delivered again (another broker's upload of the same offsets): nothing changes.
    copy(data(), input.path(), &all[1]);
    let replica = input.path().join("replica/accounts-0");
    std::fs::create_dir_all(&replica).unwrap();
    std::fs::copy(data().join(&all[1]), replica.join(format!("{:020}.log", 40))).unwrap();
    run(input.path(), warehouse.path()).await;
    assert_eq!(read_local(warehouse.path(), "kafka.accounts").offsets, first.offsets, "a segment again");
    // The last segments update and delete keys whose rows now live in compacted files.
    for i in [2, 5] {
        copy(data(), input.path(), &all[i]);
    }
    run(input.path(), warehouse.path()).await;
    let last = read_local(warehouse.path(), "kafka.accounts");
    assert_model(&last, &model, "after compaction and more segments");
    assert_audit(warehouse.path(), &model).await;
}
