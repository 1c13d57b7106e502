//! A table's history through other engines' refs and partition specs, and a metadata
//! file cut short: expiry keeps every tag and branch (and the sweep their files), commits
//! go on after another engine changes the partition spec, and a run killed mid-write
//! stops nothing — judged by PyIceberg, on a local warehouse; and what `floe local status`
//! shows of a table whose maintenance or configuration fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use floe_core::catalog::sqlite::SqliteCatalog;
use floe_core::committer::TaskResult;
use floe_core::config::FloeConfig;
use floe_core::storage::local_file_io;
use floe_core::table::{LoadedTable, TableName};

use crate::committer::{copy, copy_of, local_committer, local_run, materialize, read_local};
use crate::support;

const ORDERS_0: &str = "orders-0/00000000000000000000.log";
const ORDERS_0_NEXT: &str = "orders-0/00000000000000000100.log";
const ORDERS_1: &str = "orders-1/00000000000000000000.log";
const DAY_MS: i64 = 24 * 60 * 60 * 1000;

fn orders() -> TableName {
    TableName::parse("kafka.orders").unwrap()
}

async fn load(warehouse: &Path) -> LoadedTable {
    let catalog = SqliteCatalog::open(&warehouse.join("catalog.db"), "floe").unwrap();
    floe_core::table::load(&catalog, &local_file_io(), &orders()).await.unwrap().unwrap()
}

/// PyIceberg, as another engine, on kafka.orders (tests/py/foreign_refs.py); its output.
fn foreign(warehouse: &Path, args: &[&str]) -> String {
    let w = warehouse.canonicalize().unwrap().display().to_string();
    let out = std::process::Command::new(support::python())
        .arg(support::root().join("tests/py/foreign_refs.py"))
        .args([&format!("{w}/catalog.db"), &w, "kafka.orders"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "foreign {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A ref as PyIceberg reads it.
#[derive(serde::Deserialize, Debug, PartialEq)]
struct RefRead {
    r#type: String,
    snapshot_id: i64,
    rows: usize,
    offsets: BTreeMap<String, Vec<i64>>,
    parent_rows: Option<usize>,
}

fn refs(warehouse: &Path) -> BTreeMap<String, RefRead> {
    serde_json::from_str(&foreign(warehouse, &["refs"])).unwrap()
}

/// `floe local compact` (compaction, then the sweep) on the clock `now_ms`.
async fn maintain(warehouse: &Path, now_ms: i64) {
    let mut out = Vec::new();
    let clock = floe_core::lock::Clock::Shifted { by_ms: now_ms - floe_core::lock::now_ms() };
    let done = floe_cli::compact::compact(warehouse, FloeConfig::default(), clock, &mut out).await;
    assert!(done.is_ok(), "{done:?}: {}", String::from_utf8_lossy(&out));
}

#[tokio::test]
async fn expiry_and_the_sweep_keep_other_engines_tags_and_branches() {
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(&support::root().join("examples/segments"), input.path(), ORDERS_1);
    local_run(input.path(), warehouse.path()).await;
    foreign(
        warehouse.path(),
        &["properties", "floe.history.max-snapshots=2", "history.expire.min-snapshots-to-keep=1"],
    );
    let committer = local_committer(warehouse.path());
    let template = materialize(FloeConfig::default(), input.path(), &committer.warehouse, ORDERS_1).await;
    let append = async |i: i64| {
        assert_eq!(committer.commit(&[copy_of(&template, i)], None).await.results[0].1, TaskResult::Committed);
    };
    // A tag at 160 rows; a branch at 320 keeping its parent (240) too.
    append(1).await;
    foreign(warehouse.path(), &["tag", "audit"]);
    for i in 2..=3 {
        append(i).await;
    }
    foreign(warehouse.path(), &["branch", "dev", "2"]);
    // Floe commits well past the retention: main keeps its 2 newest.
    for i in 4..=9 {
        append(i).await;
    }
    // main's parent: the last append but one (later, the last append: compaction's parent).
    let expected = |refs: &BTreeMap<String, RefRead>, main_parent: usize| {
        let rows: Vec<(&str, &str, usize, Option<usize>)> =
            refs.iter().map(|(n, r)| (n.as_str(), r.r#type.as_str(), r.rows, r.parent_rows)).collect();
        assert_eq!(
            rows,
            [
                ("audit", "tag", 160, None),
                ("dev", "branch", 320, Some(240)),
                ("main", "branch", 800, Some(main_parent))
            ]
        );
    };
    let before = refs(warehouse.path());
    expected(&before, 720);
    assert_eq!(before["audit"].offsets["1"].len(), 160);
    let metadata = load(warehouse.path()).await.metadata;
    assert_eq!(metadata.snapshots().len(), 5, "main's 2, the tag's, the branch's 2");

    // Compaction rewrites main's files; the sweeps past the grace period keep the files
    // the tag and the branch read.
    let now = floe_core::lock::now_ms();
    maintain(warehouse.path(), now + 4 * DAY_MS).await;
    maintain(warehouse.path(), now + 8 * DAY_MS).await;
    let after = refs(warehouse.path());
    expected(&after, 800);
    assert_eq!(
        load(warehouse.path()).await.metadata.current_snapshot().unwrap().summary().operation.as_str(),
        "replace"
    );
    assert_eq!(
        (after["audit"].snapshot_id, after["dev"].snapshot_id),
        (before["audit"].snapshot_id, before["dev"].snapshot_id)
    );
    assert_eq!(after["audit"].offsets, before["audit"].offsets);
    assert_eq!(read_local(warehouse.path(), "kafka.orders").rows, 800);
}

#[tokio::test]
async fn commits_go_on_after_another_engine_changes_the_partition_spec() {
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(&support::root().join("examples/segments"), input.path(), ORDERS_1);
    local_run(input.path(), warehouse.path()).await;
    // Manifests merged from 3 (Iceberg's default is 100: the same path, sooner).
    foreign(warehouse.path(), &["properties", "commit.manifest.min-count-to-merge=3"]);
    // (Named: iceberg-rust 0.10.1 cannot read manifests of a partition field named
    // `_kafka.partition`, the name Spark and PyIceberg give by default — not an Avro name.)
    foreign(warehouse.path(), &["spec", "_kafka.partition", "kafka_partition"]);
    let committer = local_committer(warehouse.path());
    let template = materialize(FloeConfig::default(), input.path(), &committer.warehouse, ORDERS_1).await;
    for i in 1..=12 {
        let results = committer.commit(&[copy_of(&template, i)], None).await.results;
        assert_eq!(results[0].1, TaskResult::Committed, "commit {i}");
    }
    let read = read_local(warehouse.path(), "kafka.orders");
    assert_eq!((read.rows, read.offsets["1"].len()), (13 * 80, 13 * 80));
    let status = floe_cli::local::status(warehouse.path()).await.unwrap();
    assert!(status[0].maintenance.failing.is_empty(), "{status:?}");
}

/// The table's metadata folder.
fn metadata_dir(warehouse: &Path) -> PathBuf {
    warehouse.canonicalize().unwrap().join("kafka.db/orders/metadata")
}

#[tokio::test]
async fn a_metadata_file_cut_short_by_a_killed_run_stops_nothing() {
    let samples = support::root().join("examples/segments");
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(&samples, input.path(), ORDERS_0);
    local_run(input.path(), warehouse.path()).await;
    // A run killed while writing the next metadata file left it empty.
    let location = load(warehouse.path()).await.pointer.metadata_location;
    let version: u32 = location.rsplit('/').next().unwrap().split('-').next().unwrap().parse().unwrap();
    let cut = metadata_dir(warehouse.path())
        .join(format!("{:05}-6c1d2e4a-0000-4000-8000-000000000000.metadata.json", version + 1));
    std::fs::write(&cut, b"").unwrap();

    copy(&samples, input.path(), ORDERS_0_NEXT);
    let mut out = Vec::new();
    let run = floe_cli::local::run(input.path(), warehouse.path(), FloeConfig::default(), &mut out).await;
    let out = String::from_utf8(out).unwrap();
    assert!(run.is_ok(), "{run:?}: {out}");
    assert!(out.contains("kafka.orders: 1 segment(s) materialized"), "{out}");
    assert_eq!(read_local(warehouse.path(), "kafka.orders").offsets["0"], (0..160).collect::<Vec<_>>());
    assert!(floe_cli::local::status(warehouse.path()).await.unwrap()[0].maintenance.failing.is_empty());
    // Past the grace period it is deleted, as any orphan.
    assert!(cut.exists());
    maintain(warehouse.path(), floe_core::lock::now_ms() + 4 * DAY_MS).await;
    assert!(!cut.exists());
    assert_eq!(read_local(warehouse.path(), "kafka.orders").rows, 160);
}

#[tokio::test]
async fn a_run_that_committed_says_so_when_its_maintenance_fails_and_status_shows_why() {
    let samples = support::root().join("examples/segments");
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(&samples, input.path(), ORDERS_1);
    local_run(input.path(), warehouse.path()).await;
    let first_list = load(warehouse.path()).await.metadata.current_snapshot().unwrap().manifest_list().to_string();
    let committer = local_committer(warehouse.path());
    let template = materialize(FloeConfig::default(), input.path(), &committer.warehouse, ORDERS_1).await;
    assert_eq!(committer.commit(&[copy_of(&template, 1)], None).await.results[0].1, TaskResult::Committed);
    // A retained snapshot's manifest list is lost: the sweep cannot tell what it references.
    let first_list = first_list.strip_prefix("file://").unwrap_or(&first_list).to_string();
    std::fs::remove_file(&first_list).unwrap();

    copy(&samples, input.path(), ORDERS_0);
    let mut out = Vec::new();
    let error =
        floe_cli::local::run(input.path(), warehouse.path(), FloeConfig::default(), &mut out).await.unwrap_err();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("kafka.orders: 1 segment(s) materialized, 1 already in the table; 100 record(s)"), "{out}");
    assert!(out.contains("maintenance failed: compaction of kafka.orders: ") && out.contains(&first_list), "{out}");
    assert_eq!(
        error.to_string(),
        "maintenance failed for 1 table(s), listed above; what the run committed (listed above) stands"
    );
    assert_eq!(read_local(warehouse.path(), "kafka.orders").rows, 260);
    let status = floe_cli::local::status(warehouse.path()).await.unwrap();
    let failing: Vec<(&str, bool)> =
        status[0].maintenance.failing.iter().map(|f| (f.activity, f.error.contains(&first_list))).collect();
    assert_eq!(failing, [("sweep", true)], "{status:?}");
    // Degraded, with the sweep's error; still its offsets, files and last commit.
    let health = &status[0].health;
    assert_eq!(health.state, "degraded");
    assert!(health.reason.as_ref().is_some_and(|r| r.starts_with("sweep: ") && r.contains(&first_list)), "{health:?}");
    assert!(health.files.is_some() && health.last_commit.is_some() && !status[0].offsets.is_empty(), "{health:?}");

    // The current snapshot's manifest list lost too: commits fail, and status says so.
    let current = load(warehouse.path()).await.metadata.current_snapshot().unwrap().manifest_list().to_string();
    std::fs::remove_file(current.strip_prefix("file://").unwrap_or(&current)).unwrap();
    let result = committer.commit(&[copy_of(&template, 2)], None).await.results.remove(0).1;
    assert!(matches!(result, TaskResult::Failed { .. }), "{result:?}");
    let status = floe_cli::local::status(warehouse.path()).await.unwrap();
    let activities: Vec<&str> = status[0].maintenance.failing.iter().map(|f| f.activity).collect();
    assert_eq!(activities, ["commit", "sweep"], "{status:?}");
    // The latest failure is the one shown.
    let reason = status[0].health.reason.as_deref().unwrap_or_default();
    assert!(status[0].health.state == "degraded" && reason.starts_with("commit: "), "{status:?}");
}

#[tokio::test]
async fn a_task_of_another_topic_is_a_config_issue_until_a_commit_refuses_none() {
    let samples = support::root().join("examples/segments");
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(&samples, input.path(), ORDERS_1);
    local_run(input.path(), warehouse.path()).await;
    let committer = local_committer(warehouse.path());
    let template = materialize(FloeConfig::default(), input.path(), &committer.warehouse, ORDERS_1).await;
    // Another topic's task for kafka.orders (two topics mapped to one table): refused.
    let mut clash = copy_of(&template, 1);
    clash.topic = "orders_v2".into();
    let result = committer.commit(&[clash], None).await.results.remove(0).1;
    assert!(matches!(result, TaskResult::Failed { retryable: false, .. }), "{result:?}");
    let status = floe_cli::local::status(warehouse.path()).await.unwrap();
    let health = &status[0].health;
    assert_eq!((health.state, health.resume.as_ref()), ("config issue", None));
    let reason = health.reason.as_deref().unwrap_or_default();
    assert!(reason.starts_with("config: ") && reason.contains(r#"topic "orders_v2" is refused"#), "{reason}");
    // A commit that refuses nothing: running again.
    assert_eq!(committer.commit(&[copy_of(&template, 2)], None).await.results[0].1, TaskResult::Committed);
    let status = floe_cli::local::status(warehouse.path()).await.unwrap();
    assert_eq!((status[0].health.state, status[0].health.reason.as_ref()), ("running", None), "{status:?}");
}
