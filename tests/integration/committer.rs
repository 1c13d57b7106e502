//! The committer, judged by PyIceberg: `floe local run` into a SQLite catalog, and the
//! committer Lambda's handler on moto (Glue with VersionId enforced, DynamoDB leases,
//! FIFO SQS), through duplicates, redelivery, racing committers, Glue conflicts, tasks
//! out of order, transactions spanning segments and an incompatible schema.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use floe_aws::dynamodb::DynamoDbLocks;
use floe_aws::glue::GlueCatalog;
use floe_aws::lambda::{
    CommitterEnv, CommitterService, CompactorEnv, CompactorService, MaterializerEnv, committer, compactor,
    handle_committer_event, materializer,
};
use floe_core::catalog::{Catalog, CatalogError};
use floe_core::committer::{Committer, TaskResult};
use floe_core::config::FloeConfig;
use floe_core::lock::TableLocks;
use floe_core::materializer::{Materializer, ObjectRef, Outcome};
use floe_core::task::{CommitTask, TableName, Task};
use serde_json::Value;

pub(crate) use crate::shared::catalog::{CatalogCall, Hooked};
use crate::support;

/// What PyIceberg reads from a table (tests/py/read_iceberg.py).
#[derive(serde::Deserialize, Debug, PartialEq)]
pub(crate) struct Read {
    pub(crate) rows: usize,
    pub(crate) offsets: BTreeMap<String, Vec<i64>>,
    pub(crate) duplicates: usize,
    pub(crate) snapshots: usize,
    pub(crate) summary: HashMap<String, String>,
    pub(crate) history: Vec<HashMap<String, String>>,
    /// The current snapshot's operation.
    pub(crate) operation: Option<String>,
    /// The table's schema as PyIceberg prints it (field ids included).
    pub(crate) schema: String,
    /// Null count per top-level column.
    pub(crate) nulls: HashMap<String, usize>,
    pub(crate) values: HashMap<String, Option<String>>,
    /// The table's location, and the data files the scan reads.
    pub(crate) location: String,
    pub(crate) files: Vec<String>,
    /// The table's format version (2, or 3).
    pub(crate) format_version: u8,
}

pub(crate) fn pyiceberg(args: &[&str]) -> Read {
    let out = std::process::Command::new(support::python())
        .arg(support::root().join("tests/py/read_iceberg.py"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "PyIceberg failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

pub(crate) fn read_local(warehouse: &Path, table: &str) -> Read {
    let w = warehouse.canonicalize().unwrap().display().to_string();
    pyiceberg(&["sql", &format!("{w}/catalog.db"), &w, table])
}

pub(crate) fn copy(from: &Path, to: &Path, rel: &str) {
    let target = to.join(rel);
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::copy(from.join(rel), target).unwrap();
}

pub(crate) async fn local_run(input: &Path, warehouse: &Path) -> floe_cli::local::LocalReport {
    let mut out = Vec::new();
    floe_cli::local::run(input, warehouse, FloeConfig::default(), &mut out).await.unwrap()
}

#[tokio::test]
async fn local_run_reads_back_in_pyiceberg_and_adds_only_new_segments() {
    let samples = support::root().join("examples/segments");
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let tiered = "tiered/page.views-MWJ6FHTfRYy67jzwZdeqSQ/0/00000000000000000000-tqimKeZwStOEOwRzT3L5oQ";
    for rel in ["orders-0/00000000000000000000.log", "orders-1/00000000000000000000.log"] {
        copy(&samples, input.path(), rel);
    }
    for ext in ["log", "indexes", "rsm-manifest"] {
        copy(&samples, input.path(), &format!("{tiered}.{ext}"));
    }
    let first = local_run(input.path(), warehouse.path()).await;
    assert!(first.failed.is_empty(), "{:?}", first.failed);
    let orders = read_local(warehouse.path(), "kafka.orders");
    assert_eq!(orders.offsets["0"], (0..100).collect::<Vec<_>>());
    assert_eq!(orders.offsets["1"], (0..80).collect::<Vec<_>>());
    assert_eq!((orders.duplicates, orders.snapshots), (0, 1));
    // The values are the producer's: order_id is the offset (+1000 on partition 1).
    for (key, value) in &orders.values {
        let (partition, offset) = key.split_once('/').unwrap();
        let json: Value = serde_json::from_str(value.as_deref().unwrap()).unwrap();
        let expected = offset.parse::<i64>().unwrap() + if partition == "1" { 1000 } else { 0 };
        assert_eq!(json["order_id"], expected, "{key}");
    }
    assert_eq!(orders.summary["floe.offsets.orders.0"], "0-99");
    let views = read_local(warehouse.path(), "kafka.page_views");
    assert_eq!(views.offsets["0"], (0..200).collect::<Vec<_>>());

    // Again on the same input: nothing new.
    let again = local_run(input.path(), warehouse.path()).await;
    assert!(again.tables.iter().all(|t| t.segments == 0 && t.snapshots == 0), "{:?}", again.tables);
    assert_eq!(read_local(warehouse.path(), "kafka.orders").snapshots, 1);

    // One more segment: only it is added.
    copy(&samples, input.path(), "orders-0/00000000000000000100.log");
    let more = local_run(input.path(), warehouse.path()).await;
    let orders_report = more.tables.iter().find(|t| t.table == "kafka.orders").unwrap();
    assert_eq!((orders_report.segments, orders_report.skipped_segments, orders_report.records), (1, 2, 60));
    let orders = read_local(warehouse.path(), "kafka.orders");
    assert_eq!(orders.offsets["0"], (0..160).collect::<Vec<_>>());
    assert_eq!((orders.rows, orders.duplicates, orders.snapshots), (240, 0, 2));
}

/// PyIceberg, as another engine, writes the table (tests/py/foreign_write.py).
fn foreign_write(warehouse: &Path, table: &str, action: &str) {
    let w = warehouse.canonicalize().unwrap().display().to_string();
    let out = std::process::Command::new(support::python())
        .arg(support::root().join("tests/py/foreign_write.py"))
        .args([&format!("{w}/catalog.db"), &w, table, action])
        .output()
        .unwrap();
    assert!(out.status.success(), "foreign {action} failed: {}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test]
async fn other_engines_writing_the_table_change_nothing_floe_has_committed() {
    let samples = support::root().join("examples/segments");
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for rel in ["orders-0/00000000000000000000.log", "orders-1/00000000000000000000.log"] {
        copy(&samples, input.path(), rel);
    }
    assert!(local_run(input.path(), warehouse.path()).await.failed.is_empty());
    // An OPTIMIZE-like overwrite: the same rows in new files, a snapshot without floe keys.
    foreign_write(warehouse.path(), "kafka.orders", "overwrite");
    let again = local_run(input.path(), warehouse.path()).await;
    assert!(again.tables.iter().all(|t| t.segments == 0 && t.snapshots == 0), "{:?}", again.tables);
    let orders = read_local(warehouse.path(), "kafka.orders");
    assert_eq!((orders.rows, orders.duplicates), (180, 0), "every row once after a foreign overwrite");

    // A foreign append (five rows again), then a new segment: only its 60 rows are added,
    // and Floe's snapshot carries every offset committed before the foreign ones.
    foreign_write(warehouse.path(), "kafka.orders", "append");
    copy(&samples, input.path(), "orders-0/00000000000000000100.log");
    let more = local_run(input.path(), warehouse.path()).await;
    assert!(more.failed.is_empty(), "{:?}", more.failed);
    let orders = read_local(warehouse.path(), "kafka.orders");
    assert_eq!((orders.rows, orders.duplicates), (245, 5), "the foreign rows and 60 new ones");
    assert_eq!(orders.summary["floe.offsets.orders.0"], "0-159");
    assert_eq!(orders.summary["floe.offsets.orders.1"], "0-79");

    // A foreign delete of every row: Floe commits none of them again.
    foreign_write(warehouse.path(), "kafka.orders", "delete");
    let after = local_run(input.path(), warehouse.path()).await;
    assert!(after.tables.iter().all(|t| t.segments == 0 && t.snapshots == 0), "{:?}", after.tables);
    assert_eq!(read_local(warehouse.path(), "kafka.orders").rows, 0);
    let status = floe_cli::local::status(warehouse.path()).await.unwrap();
    let orders = status.iter().find(|t| t.table == "kafka.orders").unwrap();
    assert_eq!(orders.offsets["orders-0"], "0-159", "status reads Floe's record through foreign snapshots");
}

/// Files under the table's data folder.
fn data_files(warehouse: &Path, table: &str) -> usize {
    let dir = warehouse.join(format!("kafka.db/{table}/data"));
    walk(&dir)
}

fn walk(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries.map(|e| e.unwrap().path()).map(|p| if p.is_dir() { walk(&p) } else { 1 }).sum()
}

#[tokio::test]
async fn a_bad_segment_of_an_existing_table_fails_alone() {
    let samples = support::root().join("examples/segments");
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(&samples, input.path(), "orders-0/00000000000000000000.log");
    assert!(local_run(input.path(), warehouse.path()).await.failed.is_empty());

    // The table exists now. A truncated segment of it, a good one of it (another
    // partition) and a good one of another table.
    let bad = "orders-0/00000000000000000100.log";
    let bytes = std::fs::read(samples.join(bad)).unwrap();
    std::fs::write(input.path().join(bad), &bytes[..bytes.len() / 2]).unwrap();
    copy(&samples, input.path(), "orders-1/00000000000000000000.log");
    let tiered = "tiered/page.views-MWJ6FHTfRYy67jzwZdeqSQ/0/00000000000000000000-tqimKeZwStOEOwRzT3L5oQ";
    for ext in ["log", "indexes", "rsm-manifest"] {
        copy(&samples, input.path(), &format!("{tiered}.{ext}"));
    }
    let mut out = Vec::new();
    let run = floe_cli::local::run(input.path(), warehouse.path(), FloeConfig::default(), &mut out).await;
    let out = String::from_utf8(out).unwrap();
    assert!(run.is_err(), "the run fails: {out}");
    assert!(out.contains(&format!("failed: {bad}: ")), "the bad segment is named: {out}");
    assert_eq!(out.matches("failed: ").count(), 1, "{out}");

    let orders = read_local(warehouse.path(), "kafka.orders");
    assert_eq!(orders.offsets["0"], (0..100).collect::<Vec<_>>());
    assert_eq!(orders.offsets["1"], (0..80).collect::<Vec<_>>(), "the table's good segment committed");
    assert_eq!(orders.duplicates, 0);
    let views = read_local(warehouse.path(), "kafka.page_views");
    assert_eq!(views.offsets["0"], (0..200).collect::<Vec<_>>(), "the other table's committed");
}

#[tokio::test]
async fn local_run_takes_over_a_dead_runs_lease_and_reports_a_live_one_at_once() {
    use floe_core::lock::sqlite::{SqliteLocks, process_owner};
    let samples = support::root().join("examples/segments");
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(&samples, input.path(), "orders-0/00000000000000000000.log");
    let catalog =
        floe_core::catalog::sqlite::SqliteCatalog::open(&warehouse.path().join("catalog.db"), "floe").unwrap();
    let locks = SqliteLocks::new(catalog.connection()).unwrap();
    let ttl = std::time::Duration::from_secs(300);

    // A run killed during its commit: its lease has minutes left, its process is gone.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    child.wait().unwrap();
    let me = process_owner("floe-local");
    let dead = format!("{}:{}", me.rsplit_once(':').unwrap().0, child.id());
    locks.acquire("kafka.orders", &dead, ttl).await.unwrap().unwrap();
    let start = std::time::Instant::now();
    let first = local_run(input.path(), warehouse.path()).await;
    assert!(first.failed.is_empty(), "{:?}", first.failed);
    assert!(start.elapsed() < std::time::Duration::from_secs(60));
    assert_eq!(read_local(warehouse.path(), "kafka.orders").offsets["0"], (0..100).collect::<Vec<_>>());

    // A live other committer holds it: said at once, nothing materialized.
    locks.acquire("kafka.orders", "another-committer", ttl).await.unwrap().unwrap();
    copy(&samples, input.path(), "orders-0/00000000000000000100.log");
    let files = data_files(warehouse.path(), "orders");
    let start = std::time::Instant::now();
    let mut out = Vec::new();
    let run = floe_cli::local::run(input.path(), warehouse.path(), FloeConfig::default(), &mut out).await;
    let out = String::from_utf8(out).unwrap();
    assert!(run.is_err(), "{out}");
    assert!(out.contains("being committed by another committer (another-committer until"), "{out}");
    assert!(start.elapsed() < std::time::Duration::from_secs(2), "no wait: {:?}", start.elapsed());
    assert_eq!(data_files(warehouse.path(), "orders"), files, "nothing written");
}

/// make_topic.py: three segments of `payments` with transactions spanning them (and four
/// of `ledger`); the offsets a read_committed consumer sees, and their values.
pub(crate) fn payments() -> (tempfile::TempDir, Vec<i64>, HashMap<String, String>) {
    let dir = tempfile::tempdir().unwrap();
    support::run_python("make_topic.py", &[dir.path()]);
    let (offsets, values) = expected(&dir.path().join("expected.json"));
    (dir, offsets, values)
}

fn expected(path: &Path) -> (Vec<i64>, HashMap<String, String>) {
    let expected: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let offsets = expected["offsets"].as_array().unwrap().iter().map(|o| o.as_i64().unwrap()).collect();
    (offsets, serde_json::from_value(expected["values"].clone()).unwrap())
}

pub(crate) const SEGMENTS: [&str; 3] = [
    "payments-0/00000000000000000000.log",
    "payments-0/00000000000000000055.log",
    "payments-0/00000000000000000066.log",
];

pub(crate) fn assert_payments(read: &Read, offsets: &[i64], values: &HashMap<String, String>) {
    assert_eq!(read.offsets["0"], offsets, "exactly the committed records");
    assert_eq!(read.duplicates, 0);
    for o in offsets {
        assert_eq!(read.values[&format!("0/{o}")].as_deref(), Some(values[&o.to_string()].as_str()));
    }
}

/// Every order of `n` items.
pub(crate) fn permutations(n: usize) -> Vec<Vec<usize>> {
    (0..n).fold(vec![vec![]], |orders, item| {
        orders
            .into_iter()
            .flat_map(|order: Vec<usize>| {
                (0..=order.len()).map(move |at| {
                    let mut next = order.clone();
                    next.insert(at, item);
                    next
                })
            })
            .collect()
    })
}

/// Each segment of `segments` committed by its own `floe local run`, in `order`; the
/// table then holds exactly the committed records and nothing stays pending.
async fn commit_in_order(topic: &Path, segments: &[&str], order: &[usize], table: &str, last_offset: i64) -> Read {
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for &i in order {
        copy(topic, input.path(), segments[i]);
        let report = local_run(input.path(), warehouse.path()).await;
        assert!(report.failed.is_empty(), "{:?}", report.failed);
    }
    let read = read_local(warehouse.path(), &format!("kafka.{table}"));
    assert_eq!(read.summary[&format!("floe.offsets.{table}.0")], format!("0-{last_offset}"), "order {order:?}");
    assert!(!read.summary.contains_key("floe.state"), "order {order:?}: left pending: {:?}", read.summary);
    read
}

#[tokio::test]
async fn transactions_spanning_segments_resolve_in_any_arrival_order() {
    let (topic, offsets, values) = payments();
    for order in permutations(3) {
        let read = commit_in_order(topic.path(), &SEGMENTS, &order, "payments", 99).await;
        assert_payments(&read, &offsets, &values);
    }
    // A COMMIT and an ABORT each after parts in three segments, in all 24 orders.
    let ledger = ledger_segments(&[0, 20, 40, 60]);
    let ledger: Vec<&str> = ledger.iter().map(String::as_str).collect();
    let (offsets, values) = expected(&topic.path().join("ledger_expected.json"));
    for order in permutations(4) {
        let read = commit_in_order(topic.path(), &ledger, &order, "ledger", 79).await;
        assert_payments(&read, &offsets, &values);
    }
}

/// make_topic.py's `ledger` segments starting at `bases`.
fn ledger_segments(bases: &[i64]) -> Vec<String> {
    bases.iter().map(|o| format!("ledger-0/{o:020}.log")).collect()
}

#[tokio::test]
async fn a_re_cut_segment_whose_open_transactions_start_in_committed_offsets_adds_their_new_records() {
    let (topic, _, _) = payments();
    let (offsets, values) = expected(&topic.path().join("ledger_expected.json"));
    // Segment 0..19 (producers 7 and 8 open at 10 and 15), its re-cut copy 10..39 (their
    // parts 10..24 and 15..34), then 20..39 again, the ABORT's and the COMMIT's segments.
    let mut segments = ledger_segments(&[0]);
    segments.push("replica/ledger-0/00000000000000000010.log".into());
    segments.extend(ledger_segments(&[20, 40, 60]));
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    // 0..19 first: the copy's parts are trimmed to 20..24 and 20..34; the copy first: the
    // parts of 0..19 add nothing.
    for order in [[0, 1, 2, 3, 4], [1, 0, 2, 3, 4]] {
        let read = commit_in_order(topic.path(), &segments, &order, "ledger", 79).await;
        assert_payments(&read, &offsets, &values);
    }
}

#[tokio::test]
async fn offsets_uploaded_again_with_other_boundaries_are_committed_once() {
    let (topic, offsets, values) = payments();
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(topic.path(), input.path(), SEGMENTS[0]); // 0..54
    local_run(input.path(), warehouse.path()).await;
    // Another broker's upload of 25..65: only 55..65 are new; its file is trimmed.
    let replica = "replica/payments-0/00000000000000000025.log";
    copy(topic.path(), input.path(), replica);
    let report = local_run(input.path(), warehouse.path()).await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    copy(topic.path(), input.path(), SEGMENTS[2]);
    local_run(input.path(), warehouse.path()).await;
    let read = read_local(warehouse.path(), "kafka.payments");
    assert_payments(&read, &offsets, &values);
    assert_eq!(read.summary["floe.offsets.payments.0"], "0-99");
}

#[tokio::test]
async fn compaction_replaces_files_without_changing_rows_and_stale_ones_are_rejected() {
    use floe_core::task::{CompactionKind, CompactionTask, TASK_VERSION, Task, TaskFile};
    let samples = support::root().join("examples/segments");
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for rel in ["orders-0/00000000000000000000.log", "orders-1/00000000000000000000.log"] {
        copy(&samples, input.path(), rel);
    }
    local_run(input.path(), warehouse.path()).await;
    let before = read_local(warehouse.path(), "kafka.orders");

    let catalog =
        floe_core::catalog::sqlite::SqliteCatalog::open(&warehouse.path().join("catalog.db"), "floe").unwrap();
    let file_io = floe_core::storage::local_file_io();
    let table = TableName { namespace: "kafka".into(), name: "orders".into() };
    let loaded = floe_core::table::load(&catalog, &file_io, &table).await.unwrap().unwrap();
    let inputs = floe_core::table::snapshot::live_data_files(&file_io, &loaded.metadata).await.unwrap();
    let paths: Vec<&str> = inputs.iter().map(|f| f.file_path()).collect();
    assert_eq!(paths.len(), 2);
    let schema = loaded.metadata.current_schema().as_ref().clone();
    let dir = format!("{}/data", loaded.metadata.location());
    let spec = loaded.metadata.default_partition_spec().as_ref().clone();
    let output = floe_core::datafile::WriterOptions {
        file_io: file_io.clone(),
        dir,
        partition: 0,
        source_id: "compacted".into(),
        schema: Arc::new(schema.clone()),
        target_size: 128 << 20,
        pages: floe_core::datafile::Pages::Zstd,
    };
    let outputs = floe_core::table::rewrite::rewrite_files(output, &spec, &paths, None, None).await.unwrap();
    let compaction = CompactionTask {
        formats: Default::default(),
        version: TASK_VERSION,
        kind: CompactionKind::Compaction,
        task_id: "compaction-1".into(),
        table: table.clone(),
        removed: paths.iter().map(|p| p.to_string()).collect(),
        added: outputs
            .iter()
            .map(|f| TaskFile::from_written(f, &iceberg::spec::StructType::new(vec![])).unwrap())
            .collect(),
        schema,
        partition_spec: None,
        created_at_ms: 0,
        data_sequence_number: None,
        deletes_applied: Vec::new(),
        left_out: None,
    };
    // Through the task's JSON, as the queue carries it.
    let task = Task::from_json(Task::Compaction(Box::new(compaction.clone())).to_json().unwrap().as_bytes()).unwrap();
    let locks = Arc::new(floe_core::lock::sqlite::SqliteLocks::new(catalog.connection()).unwrap());
    let path = warehouse.path().canonicalize().unwrap().display().to_string();
    let committer = Committer::new(Arc::new(catalog), file_io, locks.clone(), locks, path, "compaction-test")
        .with_lease_ttl(std::time::Duration::from_secs(60));
    let report = committer.commit_all(std::slice::from_ref(&task), None).await;
    assert_eq!(report.results[0].1, TaskResult::Committed);
    let after = read_local(warehouse.path(), "kafka.orders");
    assert_eq!((after.rows, after.duplicates), (before.rows, 0));
    assert_eq!(after.offsets, before.offsets);
    assert_eq!(after.values, before.values);
    assert_eq!(after.operation.as_deref(), Some("replace"));
    assert_eq!(after.summary["total-data-files"], "1");
    assert_eq!(after.summary["floe.offsets.orders.0"], before.summary["floe.offsets.orders.0"]);

    // The same compaction again: its inputs are gone, it is rejected, nothing changes.
    let report = committer.commit_all(&[task], None).await;
    assert!(matches!(&report.results[0].1, TaskResult::Rejected { reason } if reason.contains("no longer live")));
    assert_eq!(read_local(warehouse.path(), "kafka.orders").snapshots, after.snapshots);

    // Appends go on after it.
    copy(&samples, input.path(), "orders-0/00000000000000000100.log");
    local_run(input.path(), warehouse.path()).await;
    let last = read_local(warehouse.path(), "kafka.orders");
    assert_eq!((last.rows, last.duplicates), (240, 0));
}

/// The shared buckets and task queue, a lease table, and a namespace of the test's own
/// (moto's Glue is shared by the tests).
#[derive(Clone)]
pub(crate) struct Aws {
    pub(crate) base: support::AwsBase,
    pub(crate) locks: String,
    pub(crate) namespace: String,
    /// `floe.toml`'s path, and the temporary file (deleted once no copy of this lives)
    /// when this process wrote it.
    pub(crate) config_file: std::path::PathBuf,
    _config_written: Option<Arc<tempfile::TempPath>>,
}

impl std::ops::Deref for Aws {
    type Target = support::AwsBase;
    fn deref(&self) -> &support::AwsBase {
        &self.base
    }
}

pub(crate) async fn setup(name: &str) -> Aws {
    setup_with(name, "").await
}

/// [`setup`] with more of `floe.toml` after its `[defaults]` (`[[topics]]` entries).
pub(crate) async fn setup_with(name: &str, topics_toml: &str) -> Aws {
    let base = support::aws_base(name).await;
    let locks = format!("{name}-leases");
    create_lease_table(&base.config, &locks).await;
    let floe_toml = tempfile::NamedTempFile::new().unwrap();
    let text = format!("[defaults]\nenabled = true\nnamespace = \"{name}\"\n{topics_toml}");
    std::fs::write(floe_toml.path(), text).unwrap();
    let config_file = floe_toml.path().to_path_buf();
    let written = Some(Arc::new(floe_toml.into_temp_path()));
    Aws { base, locks, namespace: name.to_string(), config_file, _config_written: written }
}

impl Aws {
    /// What [`setup_with`] made for the test `name`, as another process (a function's
    /// child process) sees it: the same buckets, lease table, namespace and `floe.toml`,
    /// and the task queue at `tasks`.
    pub(crate) async fn attach(name: &str, config_file: &Path, tasks: &str) -> Aws {
        let config = support::aws_config().await;
        let base = support::AwsBase {
            sqs: aws_sdk_sqs::Client::new(&config),
            s3: support::s3_client().await,
            config,
            segments: format!("{name}-segments"),
            warehouse: format!("{name}-warehouse"),
            tasks: tasks.to_string(),
        };
        let locks = format!("{name}-leases");
        Aws { base, locks, namespace: name.to_string(), config_file: config_file.to_path_buf(), _config_written: None }
    }

    /// This with every AWS call going to `endpoint` (a proxy in front of moto).
    pub(crate) async fn through(&self, endpoint: &str) -> Aws {
        let mut aws = self.clone();
        aws.base.config = support::aws_config_at(endpoint).await;
        aws
    }
}

/// A DynamoDB table of leases as the SAM template creates it (key `table`, a string; the
/// sparse index of held tasks on `held_table`).
pub(crate) async fn create_lease_table(config: &aws_config::SdkConfig, name: &str) {
    floe_aws::dynamodb::DynamoDbLocks::create_table(&aws_sdk_dynamodb::Client::new(config), name).await.unwrap();
}

impl Aws {
    pub(crate) async fn materializer(&self) -> Materializer {
        let env = MaterializerEnv {
            config: Some(self.config_file.display().to_string()),
            warehouse: format!("s3://{}/wh", self.warehouse),
            task_queue_url: self.tasks.clone(),
            lock_table: self.locks.clone(),
            s3_path_style: true,
        };
        materializer(&self.config, &env).await.unwrap()
    }

    /// The compactor Lambda's service, built as its `main` builds it.
    pub(crate) async fn compactor(&self) -> CompactorService {
        let env = CompactorEnv {
            config: Some(self.config_file.display().to_string()),
            warehouse: format!("s3://{}/wh", self.warehouse),
            task_queue_url: self.tasks.clone(),
            lock_table: self.locks.clone(),
            s3_path_style: true,
            timeout: std::time::Duration::from_secs(900),
        };
        compactor(&self.config, &env).await.unwrap()
    }

    /// The lock table: leases, statuses and the table registry.
    pub(crate) fn registry(&self) -> DynamoDbLocks {
        DynamoDbLocks::new(aws_sdk_dynamodb::Client::new(&self.config), &self.locks)
    }

    pub(crate) fn committer(&self) -> CommitterService {
        let env = self.committer_env(None);
        let glue = aws_sdk_glue::Client::new(&self.config);
        committer(&self.config, &env, floe_aws::catalogs::OpenedCatalog::on_glue(glue, self.s3.clone()))
    }

    /// The committer as its `main` builds it: its catalog from `[catalog]` of the test's
    /// `floe.toml` (`FLOE_CONFIG`).
    pub(crate) async fn configured_committer(&self) -> CommitterService {
        let env = self.committer_env(Some(self.config_file.display().to_string()));
        let catalog = floe_aws::lambda::committer_catalog(&self.config, &env).await.unwrap();
        committer(&self.config, &env, catalog)
    }

    fn committer_env(&self, config: Option<String>) -> CommitterEnv {
        CommitterEnv {
            config,
            warehouse: format!("s3://{}/wh", self.warehouse),
            lock_table: self.locks.clone(),
            task_queue_url: self.tasks.clone(),
            retry_visibility: std::time::Duration::from_secs(1),
            lease: std::time::Duration::from_secs(30),
            concurrency: floe_core::committer::DEFAULT_CONCURRENCY,
            s3_path_style: true,
            timeout: std::time::Duration::from_secs(300),
        }
    }

    /// Uploads a segment and materializes it; returns its task.
    pub(crate) async fn materialize(&self, m: &Materializer, dir: &Path, key: &str) -> CommitTask {
        let body = std::fs::read(dir.join(key)).unwrap();
        self.s3.put_object().bucket(&self.segments).key(key).body(body.into()).send().await.unwrap();
        match m.handle(&ObjectRef::new(&self.segments, key)).await.unwrap() {
            Outcome::Queued(task) => *task,
            other => panic!("{other:?}"),
        }
    }

    /// The three `payments` segments materialized, their tasks in order.
    async fn materialize_payments(&self, dir: &Path) -> Vec<CommitTask> {
        self.materialize_payments_with(&self.materializer().await, dir).await
    }

    /// The three `payments` segments materialized by `m`, their tasks in order.
    pub(crate) async fn materialize_payments_with(&self, m: &Materializer, dir: &Path) -> Vec<CommitTask> {
        let mut tasks = Vec::new();
        for key in SEGMENTS {
            tasks.push(self.materialize(m, dir, key).await);
        }
        tasks
    }

    /// Receives the queued messages as the Lambda event source hands them over.
    pub(crate) async fn receive(&self) -> (SqsEvent, Vec<String>) {
        let got = self
            .sqs
            .receive_message()
            .queue_url(&self.tasks)
            .max_number_of_messages(10)
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
            .send()
            .await
            .unwrap();
        let mut event = SqsEvent::default();
        let mut receipts = Vec::new();
        for m in got.messages.unwrap_or_default() {
            let mut message = SqsMessage::default();
            message.message_id = m.message_id.clone();
            message.body = m.body.clone();
            message.receipt_handle = m.receipt_handle.clone();
            message.attributes =
                m.attributes.unwrap_or_default().into_iter().map(|(k, v)| (k.as_str().to_string(), v)).collect();
            receipts.push(m.receipt_handle.unwrap());
            event.records.push(message);
        }
        (event, receipts)
    }

    pub(crate) async fn delete(&self, receipts: &[String]) {
        for r in receipts {
            self.sqs.delete_message().queue_url(&self.tasks).receipt_handle(r).send().await.unwrap();
        }
    }

    /// PyIceberg's read of `<namespace>.payments` through its Glue catalog.
    pub(crate) fn read(&self) -> Read {
        pyiceberg(&["glue", &support::moto().endpoint, "-", &format!("{}.payments", self.namespace)])
    }

    pub(crate) fn table(&self) -> TableName {
        TableName { namespace: self.namespace.clone(), name: "payments".into() }
    }
}

#[tokio::test]
async fn committer_lambda_on_glue_commits_exactly_once_through_redelivery_and_duplicates() {
    let aws = setup("commit").await;
    let (topic, offsets, values) = payments();
    let m = aws.materializer().await;
    for key in SEGMENTS {
        aws.materialize(&m, topic.path(), key).await;
    }
    let service = aws.committer();
    let (event, receipts) = aws.receive().await;
    assert_eq!(event.records.len(), 3);
    let response = handle_committer_event(&service, event.clone(), None).await;
    assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);
    let read = aws.read();
    assert_payments(&read, &offsets, &values);
    assert_eq!(read.snapshots, 1, "one snapshot per batch: {:#?}", read.history);

    // A crash after the Iceberg commit and before the SQS delete: the messages come back
    // after their visibility timeout and commit nothing new.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let (redelivered, receipts_again) = aws.receive().await;
    assert_eq!(redelivered.records.len(), 3, "redelivered");
    let response = handle_committer_event(&service, redelivered, None).await;
    assert!(response.batch_item_failures.is_empty());
    aws.delete(&receipts_again).await;
    drop(receipts);
    // The same task twice in one batch, as a duplicate delivery would.
    let mut doubled = event.clone();
    doubled.records.extend(event.records.clone());
    assert!(handle_committer_event(&service, doubled, None).await.batch_item_failures.is_empty());
    // The same offsets uploaded again under another segment's key (a second upload):
    // another task, the same rows — committed once.
    let copy_key = "again/payments-0/00000000000000000000.log";
    copy_as(topic.path(), SEGMENTS[0], copy_key);
    let second = aws.materialize(&m, topic.path(), copy_key).await;
    assert_ne!(second.task_id, event_task_ids(&event)[0]);
    let (again, receipts) = aws.receive().await;
    assert!(handle_committer_event(&service, again, None).await.batch_item_failures.is_empty());
    aws.delete(&receipts).await;
    // A tiered-storage upload of offsets the table holds: nothing is written again.
    let out = std::process::Command::new(support::python())
        .arg(support::root().join("tests/py/make_tiered.py"))
        .arg(topic.path().join(SEGMENTS[0]))
        .arg(topic.path())
        .args(["--topic", "payments", "--partition", "0", "--start", "0", "--end", "54"])
        .output()
        .unwrap();
    let keys: Value = serde_json::from_slice(&out.stdout).unwrap();
    for ext in ["log", "indexes", "rsm-manifest"] {
        let key = keys[ext].as_str().unwrap();
        let body = std::fs::read(topic.path().join(key)).unwrap();
        aws.s3.put_object().bucket(&aws.segments).key(key).body(body.into()).send().await.unwrap();
    }
    let manifest = ObjectRef::new(&aws.segments, keys["rsm-manifest"].as_str().unwrap());
    match m.handle(&manifest).await.unwrap() {
        Outcome::Ignored { reason, .. } => assert!(reason.contains("already in"), "{reason}"),
        other => panic!("{other:?}"),
    }
    let read = aws.read();
    assert_payments(&read, &offsets, &values);
    assert_eq!(read.snapshots, 1, "nothing new committed");
    // `floe aws audit` proves it from the data: every gap a marker or an aborted record.
    let audit = floe_cli::audit::aws(&aws.config, &aws.table().to_string(), true).await.unwrap();
    assert!(audit.exactly_once, "{audit:?}");
    let gaps: Vec<_> = audit.partitions[0].gaps.iter().map(|g| (g.first, g.last, g.reason)).collect();
    assert_eq!(gaps, [(58, 66, floe_core::table::audit::GapReason::WithoutRows)]);
}

#[tokio::test]
async fn a_suspend_task_through_sqs_stops_the_table_in_dynamodb() {
    let aws = setup("stop").await;
    let (topic, _, _) = payments();
    let m = aws.materializer().await;
    // A bad record in `suspend` mode, queued as the materializer queues it; then a good
    // segment of the same table.
    let stop = floe_core::task::SuspendTask::new(aws.table(), "payments", 0, 7, "payments-0/0.log", "not JSON");
    m.queue.send(&Task::Suspend(Box::new(stop))).await.unwrap();
    aws.materialize(&m, topic.path(), SEGMENTS[0]).await;
    let (event, receipts) = aws.receive().await;
    assert_eq!(event.records.len(), 2);
    let ids: Vec<String> = event.records.iter().map(|r| r.message_id.clone().unwrap()).collect();
    let response = handle_committer_event(&aws.committer(), event, None).await;
    // The stop is done (its message can go); the good task is kept for after the resume.
    let failed: Vec<&str> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
    assert_eq!(failed, [ids[1].as_str()]);
    aws.delete(&receipts[..1]).await;
    let locks = DynamoDbLocks::new(aws_sdk_dynamodb::Client::new(&aws.config), &aws.locks);
    let reason = locks.suspended(&aws.table().to_string()).await.unwrap().expect("suspended");
    assert_eq!(reason, "bad record: topic payments partition 0 offset 7 in payments-0/0.log: not JSON");
    // The operator's view and resume (`floe aws status`, `floe aws resume`).
    let suspended = |listed: Vec<floe_cli::health::TableStatus>| -> Vec<(String, Option<String>)> {
        listed.into_iter().map(|t| (t.table, t.suspended)).collect()
    };
    let listed = floe_cli::aws::status(&aws.config, &aws.locks, true).await.unwrap();
    let table = aws.table().to_string();
    let resume = format!("floe aws resume {table} --lock-table {}", aws.locks);
    // Shown as suspended, with the record and the command that resumes it: as JSON …
    let json = serde_json::to_value(&listed[0]).unwrap();
    assert_eq!((&json["state"], &json["resume"]), (&Value::from("suspended"), &Value::from(resume.clone())));
    assert_eq!(
        (&json["record"]["topic"], &json["record"]["partition"], &json["record"]["offset"]),
        (&Value::from("payments"), &Value::from(0), &Value::from(7))
    );
    // … and in the readable table.
    let rows: Vec<_> = listed.iter().map(|t| (t.table.as_str(), &t.health)).collect();
    let shown = floe_cli::health::render(&rows);
    assert!(shown.contains(&format!("\n{table}  suspended")), "{shown}");
    assert!(shown.contains("record: topic payments partition 0 offset 7 in payments-0/0.log"), "{shown}");
    assert!(shown.contains(&format!("resume: {resume}\n")), "{shown}");
    assert_eq!(suspended(listed), [(table.clone(), Some(reason.clone()))]);
    assert_eq!(floe_cli::aws::resume(&aws.config, &aws.locks, &table).await.unwrap(), Some(reason));
    assert_eq!(locks.suspended(&table).await.unwrap(), None);
    let listed = floe_cli::aws::status(&aws.config, &aws.locks, true).await.unwrap();
    assert_eq!(suspended(listed), [(table.clone(), None)], "still listed, no longer suspended");

    // Resumed, the kept task commits: running, with its offsets, files and bytes.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let (kept, receipts) = aws.receive().await;
    assert_eq!(kept.records.len(), 1);
    assert!(handle_committer_event(&aws.committer(), kept, None).await.batch_item_failures.is_empty());
    aws.delete(&receipts).await;
    let listed = floe_cli::aws::status(&aws.config, &aws.locks, true).await.unwrap();
    let health = &listed[0].health;
    assert_eq!((health.state, health.record.as_ref(), health.resume.as_ref()), ("running", None, None));
    assert_eq!(listed[0].offsets.keys().collect::<Vec<_>>(), ["payments-0"]);
    assert!(health.files >= Some(1) && health.bytes > Some(0) && health.last_commit.is_some(), "{health:?}");
    // The freshness lag: the commit's time less its newest record's timestamp.
    assert!(health.lag.as_ref().is_some_and(|lag| lag.ends_with('s')), "{health:?}");
}

#[tokio::test]
async fn a_task_given_back_for_a_retryable_reason_comes_back_soon_a_suspended_tables_does_not() {
    use aws_sdk_sqs::types::QueueAttributeName;
    let aws = setup("comeback").await;
    // The queue's own visibility timeout is long, as deployed; the committer's retry
    // visibility is 1 s here.
    let long = aws.sqs.set_queue_attributes().queue_url(&aws.tasks);
    long.attributes(QueueAttributeName::VisibilityTimeout, "60").send().await.unwrap();
    let (topic, _, _) = payments();
    let m = aws.materializer().await;
    aws.materialize(&m, topic.path(), SEGMENTS[0]).await;
    let service = aws.committer();
    // Another committer holds the table: retryable, given back, visible again within seconds.
    let locks = aws.registry();
    let table = aws.table().to_string();
    let other = locks.acquire(&table, "other", std::time::Duration::from_secs(60)).await.unwrap().unwrap();
    let (event, _) = aws.receive().await;
    assert_eq!(event.records.len(), 1);
    assert_eq!(handle_committer_event(&service, event, None).await.batch_item_failures.len(), 1);
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let (again, _) = aws.receive().await;
    assert_eq!(again.records.len(), 1, "back after the short wait, not the queue's 60 s");
    assert_eq!(again.records[0].attributes["ApproximateReceiveCount"], "2");
    // The table suspended: its kept task waits the queue's timeout, not to spin.
    locks.release(&other).await.unwrap();
    locks.set_suspended(&table, Some("bad record")).await.unwrap();
    assert_eq!(handle_committer_event(&service, again, None).await.batch_item_failures.len(), 1);
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    assert_eq!(aws.receive().await.0.records.len(), 0, "a suspended table's task stays invisible");
}

fn copy_as(dir: &Path, from: &str, to: &str) {
    std::fs::create_dir_all(dir.join(to).parent().unwrap()).unwrap();
    std::fs::copy(dir.join(from), dir.join(to)).unwrap();
}

fn event_task_ids(event: &SqsEvent) -> Vec<String> {
    event
        .records
        .iter()
        .map(|m| {
            let body: Value = serde_json::from_str(m.body.as_deref().unwrap()).unwrap();
            body["task_id"].as_str().unwrap().to_string()
        })
        .collect()
}

pub(crate) fn committer_with(aws: &Aws, catalog: Arc<dyn Catalog>, locks: &str, owner: &str) -> Committer {
    let service = aws.committer();
    let locks = Arc::new(DynamoDbLocks::new(aws_sdk_dynamodb::Client::new(&aws.config), locks));
    service.committer.with_catalog(catalog).with_locks(locks).with_owner(owner)
}

#[tokio::test]
async fn glue_conflicts_and_racing_committers_never_duplicate() {
    let aws = setup("race").await;
    let (topic, offsets, values) = payments();
    let tasks = aws.materialize_payments(topic.path()).await;
    let glue = || Arc::new(GlueCatalog::new(aws_sdk_glue::Client::new(&aws.config))) as Arc<dyn Catalog>;
    conflicts_and_racing_committers_never_duplicate(&aws, &tasks, &aws.table(), glue).await;
    let read = aws.read();
    assert_payments(&read, &offsets, &values);
    // The table is also readable at every step: three data snapshots.
    assert_eq!(read.snapshots, 3);
}

/// The three `payments` tasks committed through `catalog` one by one, each in a race:
/// the catalog refuses a swap from a stale pointer; a conflict mid-commit (another writer
/// moves the table before the committer's swap) is reloaded and retried; two committers
/// racing on the last task (each believes it holds the lease: two lease tables) commit it
/// once. Then every task again, as a rerun: all already committed.
pub(crate) async fn conflicts_and_racing_committers_never_duplicate(
    aws: &Aws,
    tasks: &[CommitTask],
    table: &TableName,
    catalog: impl Fn() -> Arc<dyn Catalog>,
) {
    // The catalog itself enforces the compare-and-swap: a swap with a stale pointer is refused.
    let first = committer_with(aws, catalog(), &aws.locks, "first");
    let report = first.commit(&tasks[..1], None).await;
    assert_eq!(report.results[0].1, TaskResult::Committed);
    let stale = catalog().current(table).await.unwrap().unwrap();
    let metadata = floe_core::table::load(catalog().as_ref(), &first.file_io, table).await.unwrap().unwrap().metadata;
    catalog().swap(table, &stale, &metadata, &stale.metadata_location).await.unwrap();
    let refused = catalog().swap(table, &stale, &metadata, &stale.metadata_location).await.unwrap_err();
    assert!(refused.is_conflict(), "{refused}");

    // A conflict mid-commit: before the committer's first swap, someone else updates the
    // table, so the catalog refuses the committer's stale pointer; reload, re-check, retry.
    let inner = catalog();
    let (other, fired) = (inner.clone(), Arc::new(AtomicBool::new(false)));
    let interfering = Hooked::new(inner, move |call, table, metadata| {
        let (other, fired, table, metadata) = (other.clone(), fired.clone(), table.clone(), metadata.cloned());
        Box::pin(async move {
            if call == CatalogCall::Swap && !fired.swap(true, Ordering::SeqCst) {
                let now = other.current(&table).await?.unwrap();
                other.swap(&table, &now, &metadata.unwrap(), &now.metadata_location).await?;
            }
            Ok(())
        })
    });
    let second = committer_with(aws, Arc::new(interfering), &aws.locks, "second");
    let report = second.commit(&tasks[1..2], None).await;
    assert_eq!(report.results[0].1, TaskResult::Committed);

    // Two committers racing after a lease expiry, on the same last task: one commits it,
    // the other finds it committed.
    let other_locks = format!("{}-other", aws.locks);
    create_lease_table(&aws.config, &other_locks).await;
    let a = committer_with(aws, catalog(), &aws.locks, "a");
    let b = committer_with(aws, catalog(), &other_locks, "b");
    let (ra, rb) = tokio::join!(a.commit(&tasks[2..], None), b.commit(&tasks[2..], None));
    let mut outcomes = vec![ra.results[0].1.clone(), rb.results[0].1.clone()];
    outcomes.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(outcomes, vec![TaskResult::AlreadyCommitted, TaskResult::Committed], "{outcomes:?}");

    // The same tasks again (a rerun, a redelivery): nothing is added.
    let rerun = committer_with(aws, catalog(), &aws.locks, "rerun").commit(tasks, None).await;
    assert!(rerun.results.iter().all(|(_, r)| *r == TaskResult::AlreadyCommitted), "{:?}", rerun.results);
}

#[tokio::test]
async fn incompatible_schema_suspends_the_table_until_resumed_without_loss() {
    let aws = setup("suspend").await;
    let (topic, offsets, values) = payments();
    let tasks = aws.materialize_payments(topic.path()).await;
    let service = aws.committer();
    assert_eq!(service.committer.commit(&tasks[..1], None).await.results[0].1, TaskResult::Committed);

    // The second segment arrives written with a breaking change: `value` became a string.
    let mut breaking = tasks[1].clone();
    let json = serde_json::to_string(&breaking.schema.iceberg).unwrap().replace("\"binary\"", "\"string\"");
    breaking.schema.iceberg = serde_json::from_str(&json).unwrap();
    breaking.task_id.push_str("-breaking"); // materialized from another configuration
    let report = service.committer.commit(&[breaking.clone(), tasks[2].clone()], None).await;
    assert!(
        report.results.iter().all(|(_, r)| matches!(r, TaskResult::Failed { retryable: false, .. })),
        "{:?}",
        report.results
    );
    let locks = DynamoDbLocks::new(aws_sdk_dynamodb::Client::new(&aws.config), &aws.locks);
    let reason = locks.suspended(&aws.table().to_string()).await.unwrap().expect("suspended");
    assert!(reason.contains("value"), "{reason}");
    // While suspended, even good tasks wait (kept, not dropped).
    let waiting = service.committer.commit(&tasks[2..], None).await;
    assert!(matches!(&waiting.results[0].1, TaskResult::Failed { error, .. } if error.contains("suspended")));

    // The operator fixes the source (the segment re-materialized as it should be) and
    // resumes the table: everything kept commits, the bad copy is then a duplicate.
    locks.set_suspended(&aws.table().to_string(), None).await.unwrap();
    let report = service.committer.commit(&[tasks[1].clone(), tasks[2].clone(), breaking], None).await;
    let results: Vec<_> = report.results.iter().map(|(_, r)| r.clone()).collect();
    assert_eq!(results, vec![TaskResult::Committed, TaskResult::Committed, TaskResult::AlreadyCommitted]);
    assert_payments(&aws.read(), &offsets, &values);
}

/// A committer on the local warehouse (SQLite catalog and leases), as `floe local` runs it.
pub(crate) fn local_committer(warehouse: &Path) -> Committer {
    crate::shared::committer::local_committer(warehouse, "test")
}

/// The materializer's task for the segment at `object` under `input`.
pub(crate) async fn materialize(config: FloeConfig, input: &Path, warehouse: &str, object: &str) -> CommitTask {
    materialize_with(config, input, warehouse, object, None).await
}

/// [`materialize`], the table's schema looked up in `tables` (as `floe local run` does).
pub(crate) async fn materialize_with(
    config: FloeConfig,
    input: &Path,
    warehouse: &str,
    object: &str,
    tables: Option<Arc<dyn floe_core::table::TableLookup>>,
) -> CommitTask {
    let materializer = Materializer {
        config: Arc::new(config),
        registry: None,
        objects: Arc::new(floe_core::materializer::LocalObjects::new(input)),
        file_io: floe_core::storage::local_file_io(),
        warehouse: warehouse.to_string(),
        queue: Arc::new(floe_core::queue::InProcessQueue::default()),
        tables,
        table_registry: None,
        limits: Default::default(),
    };
    let Outcome::Queued(task) = materializer.handle(&ObjectRef::new("", object)).await.unwrap() else {
        panic!("not queued")
    };
    (*task).clone()
}

/// `template` (a task of one 80-record file) again as task `copy-<i>`: offsets
/// `i * 1000..=i * 1000 + 79`, its file copied under a new name (the rows are the file's).
pub(crate) fn copy_of(template: &CommitTask, i: i64) -> CommitTask {
    use floe_core::task::OffsetRange;
    let mut task = template.clone();
    task.task_id = format!("copy-{i}");
    task.offsets = Some(OffsetRange { first: i * 1000, last: i * 1000 + 79 });
    let source = template.data_files[0].path();
    let path = source.replace(".parquet", &format!("-copy{i}.parquet"));
    std::fs::copy(source, &path).unwrap();
    task.data_files[0].data_file["file_path"] = path.into();
    (task.data_files[0].first_offset, task.data_files[0].last_offset) = (i * 1000, i * 1000 + 79);
    task
}

#[tokio::test]
async fn long_histories_expire_snapshots_merge_manifests_and_stay_readable() {
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(&support::root().join("examples/segments"), input.path(), "orders-1/00000000000000000000.log");
    local_run(input.path(), warehouse.path()).await;
    let committer = local_committer(warehouse.path());
    // A template task: the segment's, committed again and again under new offsets, each
    // time with a copy of its file (80 records) under a new name.
    let object = "orders-1/00000000000000000000.log";
    let template = materialize(FloeConfig::default(), input.path(), &committer.warehouse, object).await;
    for i in 1..=130i64 {
        assert_eq!(committer.commit(&[copy_of(&template, i)], None).await.results[0].1, TaskResult::Committed);
    }
    let read = read_local(warehouse.path(), "kafka.orders");
    assert_eq!(read.snapshots, 100, "older snapshots expired");
    let orders = TableName { namespace: "kafka".into(), name: "orders".into() };
    let status = committer.registry.status(&orders).await.unwrap();
    assert_eq!(status.snapshots_expired, 31, "131 snapshots written, 100 kept: the expiry counted");
    assert_eq!(read.rows, 131 * 80, "{:?}", read.summary);
    // Each copy repeats the segment's offsets 0..79 (its rows are the file's), so per
    // offset: 131 rows — what matters is that no file was lost or doubled by merging.
    assert_eq!(read.duplicates, 130 * 80);
    assert_eq!(read.summary["total-data-files"], "131");
    assert_eq!(read.summary["floe.offsets.orders.1"].split(',').count(), 131);
    // Metadata files beyond the log (`write.metadata.previous-versions-max`, 100) were
    // deleted after their commits: the current one and the 100 of its log remain.
    let metadata_files = metadata_json_files(warehouse.path());
    assert_eq!(metadata_files, 101, "131 commits wrote more; the oldest were deleted");
    // Time travel to the oldest retained snapshot still reads it.
    let oldest = read.history.iter().min_by_key(|s| s["total-data-files"].parse::<u64>().unwrap()).unwrap();
    let w = warehouse.path().canonicalize().unwrap().display().to_string();
    let snapshot = format!("snapshot={}", oldest["snapshot_id"]);
    let past = pyiceberg(&["sql", &format!("{w}/catalog.db"), &w, "kafka.orders", &snapshot]);
    assert_eq!(past.rows.to_string(), oldest["total-records"], "{:?}", past.summary);
    assert_eq!(past.summary["total-data-files"], oldest["total-data-files"]);
}

/// The `*.metadata.json` files under `dir`.
fn metadata_json_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| match p.is_dir() {
            true => metadata_json_files(&p),
            false => usize::from(p.to_string_lossy().ends_with(".metadata.json")),
        })
        .sum()
}

/// Runs a Python `script` that writes segments with tests/py/segment_file.py
/// (kafka-python's batches): `sys.argv[1]` is tests/py, `sys.argv[2]` the folder `out`.
fn write_segments(script: &str, out: &Path) {
    let status = std::process::Command::new(support::python())
        .args(["-c", script])
        .arg(support::root().join("tests/py"))
        .arg(out)
        .status()
        .unwrap();
    assert!(status.success(), "segment script failed");
}

#[tokio::test]
async fn a_new_field_evolves_the_table_keeping_field_ids() {
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Two segments of a JSON topic (Python's json module, kafka-python's batches); the
    // producer adds a field between them.
    let script = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
from segment_file import write_segment
out = sys.argv[2]
old = [(1764489600000 + i, None, json.dumps({"id": i, "amount": i * 10}).encode()) for i in range(20)]
new = [(1764489700000 + i, None, json.dumps({"id": 100 + i, "amount": i, "note": "n%d" % i}).encode()) for i in range(15)]
write_segment(out + "/events-0/00000000000000000000.log", old, [10])
write_segment(out + "/events-1/00000000000000000000.log", new, [15])
"#;
    write_segments(script, input.path());
    let config = FloeConfig::parse("[defaults]\nenabled = true\nvalue_format = \"json\"\n").unwrap();
    let run = |input: &Path| {
        let (input, warehouse, config) = (input.to_path_buf(), warehouse.path().to_path_buf(), config.clone());
        async move { floe_cli::local::run(&input, &warehouse, config, Vec::new()).await.unwrap() }
    };
    // The first segment alone: the table has id and amount.
    let first = tempfile::tempdir().unwrap();
    copy(input.path(), first.path(), "events-0/00000000000000000000.log");
    run(first.path()).await;
    let before = read_local(warehouse.path(), "kafka.events");
    assert!(!before.schema.contains("note"), "{}", before.schema);
    // Then the second: `note` becomes a new optional column; old rows read it as null.
    copy(input.path(), first.path(), "events-1/00000000000000000000.log");
    let report = run(first.path()).await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let after = read_local(warehouse.path(), "kafka.events");
    assert_eq!(after.rows, 35);
    assert!(after.schema.contains("note: optional string"), "{}", after.schema);
    // Every column the table had keeps its id.
    for line in before.schema.lines().filter(|l| l.contains(": ")) {
        assert!(after.schema.contains(line.trim()), "{line:?} changed:\n{}", after.schema);
    }
    assert_eq!(after.nulls.get("note").copied(), Some(20), "the first segment's rows have no note");
}

/// Segments materialized before their table exists each number their schema's fields
/// themselves; the second to commit is reconciled with the table by name (its files
/// rewritten with the table's ids), in either order: never a suspension, and a reader by
/// id reads every column right. Version 2 adds a nested `meta` before `name`.
#[tokio::test]
async fn tasks_numbered_before_their_table_existed_commit_in_either_order() {
    let config = FloeConfig::parse("[defaults]\nenabled = true\nvalue_format = \"json\"\n").unwrap();
    numbered_before_their_table("json", |_, _| config.clone()).await;
}

/// The same with Avro payloads, each segment's written and read with its own schema file.
#[tokio::test]
async fn avro_tasks_numbered_before_their_table_existed_commit_in_either_order() {
    numbered_before_their_table("avro", |input, version| {
        topic_config(&format!("value_format = \"avro\"\nvalue_schema = {{ file = \"{input}/v{version}.avsc\" }}"))
    })
    .await;
}

/// The same with Protobuf payloads (`shop.Row`: `name` = 4, v2 adds `meta` = 3, a column
/// before `name` as columns follow field numbers), each segment's written and read with
/// its own `.proto` file.
#[tokio::test]
async fn protobuf_tasks_numbered_before_their_table_existed_commit_in_either_order() {
    numbered_before_their_table("protobuf", |input, version| {
        topic_config(&format!(
            "value_format = \"protobuf\"\nvalue_schema = {{ file = \"{input}/v{version}.proto\" }}\nvalue_message = \"shop.Row\""
        ))
    })
    .await;
}

/// Topic `shop` configured with `lines`.
fn topic_config(lines: &str) -> FloeConfig {
    FloeConfig::parse(&format!("[[topics]]\ntopic = \"shop\"\n{lines}\n")).unwrap()
}

/// Writes tests/py/make_nested_evolution.py's two segments of `shop` in `format`, each
/// materialized with `config(input dir, schema version)` (1 for offsets 0–9, 2 for 10–19)
/// and checked by [`commit_in_either_order`] against the rows the script documents.
async fn numbered_before_their_table(format: &str, config: impl Fn(&str, u32) -> FloeConfig) {
    let input = tempfile::tempdir().unwrap();
    support::run_python("make_nested_evolution.py", &[Path::new(format), input.path()]);
    let dir = input.path().display().to_string();
    let segments =
        [(config(&dir, 1), "shop-0/00000000000000000000.log"), (config(&dir, 2), "shop-0/00000000000000000010.log")];
    let expected: Vec<Value> = (0..20)
        .map(|o: i64| match o {
            0..10 => serde_json::json!({"id": o, "items": [o, o + 1], "meta": null, "name": format!("a{o}")}),
            _ => {
                let i = o - 10;
                serde_json::json!({"id": o, "items": [i], "meta": {"tag": format!("t{i}")}, "name": format!("b{i}")})
            }
        })
        .collect();
    commit_in_either_order(input.path(), &segments, "kafka.shop", &expected).await;
}

/// Materializes each `(config, object)` of `segments` (under `input`) into a fresh
/// warehouse, where none numbers its schema from a table, and commits them one by one in
/// both orders: each commit must be `Committed`, and PyIceberg must read `expected[o]` at
/// offset `o` of partition 0 (the row as JSON, less `_kafka`), once.
async fn commit_in_either_order(input: &Path, segments: &[(FloeConfig, &str); 2], table: &str, expected: &[Value]) {
    for order in [[0, 1], [1, 0]] {
        let warehouse = tempfile::tempdir().unwrap();
        let w = warehouse.path().canonicalize().unwrap().display().to_string();
        let mut tasks = Vec::new();
        for (config, object) in segments {
            tasks.push(materialize(config.clone(), input, &w, object).await);
        }
        assert_ne!(tasks[0].schema.iceberg, tasks[1].schema.iceberg, "numbered on their own");
        let committer = local_committer(warehouse.path());
        for i in order {
            let report = committer.commit(std::slice::from_ref(&tasks[i]), None).await;
            assert_eq!(report.results[0].1, TaskResult::Committed, "order {order:?}: {report:?}");
        }
        let read = read_local(warehouse.path(), table);
        assert_eq!((read.rows, read.duplicates), (expected.len(), 0), "order {order:?}");
        for (o, want) in expected.iter().enumerate() {
            let row: Value = serde_json::from_str(read.values[&format!("0/{o}")].as_deref().unwrap()).unwrap();
            assert_eq!(&row, want, "order {order:?}, offset {o}");
        }
    }
}

/// A file written with `int` before the table was promoted to `long` (a materializer that
/// ran before the promotion was committed) commits after it: Iceberg reads the old type
/// as the new one, and the file's bounds must serve a filtered scan.
#[tokio::test]
async fn a_file_written_before_a_promotion_commits_after_it() {
    promotion_then_an_older_file("").await;
}

/// The same with the table partitioned by the promoted column itself: the old file's
/// partition values are ints, the table's partition field is a long by then.
#[tokio::test]
async fn a_file_partitioned_by_a_column_promoted_since_commits() {
    promotion_then_an_older_file("partition_by = [\"identity(qty)\"]\n").await;
}

/// Segments of Avro orders (fastavro payloads framed with schema ids 1, `qty int`, and 2,
/// `qty long`; both schemas as `v1.avsc`/`v2.avsc`): `orders-0` offsets 0–9 and 10–19 with
/// `qty` 0–9 as ints, `orders-1` offsets 0–4 with `qty` 2⁴⁰ + 0–4 as longs.
const PROMOTION_SEGMENTS: &str = r#"
import io, json, struct, sys
sys.path.insert(0, sys.argv[1])
import fastavro
from segment_file import write_segment
out = sys.argv[2]
def schema(t):
    return {"type": "record", "name": "o", "fields": [{"name": "id", "type": "long"}, {"name": "qty", "type": t}]}
def frame(sid, s, rec):
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(s), rec)
    return b"\0" + struct.pack(">i", sid) + buf.getvalue()
for v, t in ((1, "int"), (2, "long")):
    json.dump(schema(t), open("%s/v%d.avsc" % (out, v), "w"))
for base in (0, 10):
    old = [(1764489600000 + base + i, None, frame(1, schema("int"), {"id": base + i, "qty": i})) for i in range(10)]
    write_segment(out + "/orders-0/%020d.log" % base, old, [10], base=base)
new = [(1764489700000 + i, None, frame(2, schema("long"), {"id": 100 + i, "qty": 2**40 + i})) for i in range(5)]
write_segment(out + "/orders-1/00000000000000000000.log", new, [5])
"#;

/// Materializes `object` of [`PROMOTION_SEGMENTS`] with schema `v{version}.avsc`
/// (`partition_by`: a config line or nothing).
async fn promotion_task(
    input: &Path,
    committer: &Committer,
    version: u32,
    object: &str,
    partition_by: &str,
) -> CommitTask {
    let config = format!(
        "[[topics]]\ntopic = \"orders\"\nvalue_format = \"avro\"\nvalue_schema = {{ file = \"{}/v{version}.avsc\" }}\n{partition_by}",
        input.display()
    );
    materialize(FloeConfig::parse(&config).unwrap(), input, &committer.warehouse, object).await
}

/// A compaction planned before a promotion commits after it, on a table partitioned by
/// the promoted column: the compacted files' partition values (ints when planned) are
/// recorded as the table's longs, and every row reads back once.
#[tokio::test]
async fn a_compaction_planned_before_a_promotion_commits_after_it() {
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_segments(PROMOTION_SEGMENTS, input.path());
    let committer = local_committer(warehouse.path());
    let partition_by = "partition_by = [\"identity(qty)\"]\n";
    // Two int segments of one Kafka partition: two small files per qty value.
    for object in ["orders-0/00000000000000000000.log", "orders-0/00000000000000000010.log"] {
        let task = promotion_task(input.path(), &committer, 1, object, partition_by).await;
        assert_eq!(committer.commit(&[task], None).await.results[0].1, TaskResult::Committed);
    }
    let table = TableName { namespace: "kafka".into(), name: "orders".into() };
    let loaded = floe_core::table::load(committer.catalog.as_ref(), &committer.file_io, &table).await.unwrap().unwrap();
    let compactions = floe_core::maintenance::rewrite::compact(
        &committer.file_io,
        &table,
        &loaded.metadata,
        floe_core::table::compaction::CompactionPolicy { target: 128 << 20, window_ms: 0 },
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64,
    )
    .await
    .unwrap();
    // Two files per qty value: a bin each, one file out of each.
    assert_eq!(compactions.len(), 10);
    assert!(compactions.iter().all(|c| (c.removed.len(), c.added.len()) == (2, 1)), "{compactions:?}");
    // The promotion lands in between.
    let new = promotion_task(input.path(), &committer, 2, "orders-1/00000000000000000000.log", partition_by).await;
    assert_eq!(committer.commit(&[new], None).await.results[0].1, TaskResult::Committed);
    let tasks: Vec<Task> = compactions.into_iter().map(|c| Task::Compaction(Box::new(c))).collect();
    let report = committer.commit_all(&tasks, None).await;
    assert!(report.results.iter().all(|(_, r)| *r == TaskResult::Committed), "{report:?}");
    let read = read_local(warehouse.path(), "kafka.orders");
    assert_eq!(read.rows, 25);
    let w = warehouse.path().canonicalize().unwrap().display().to_string();
    let db = format!("{w}/catalog.db");
    assert_eq!(pyiceberg(&["sql", &db, &w, "kafka.orders", "qty < 5"]).rows, 10);
    assert_eq!(pyiceberg(&["sql", &db, &w, "kafka.orders", "qty > 1000"]).rows, 5);
}

/// Materializes a segment with `qty int` and one with `qty long` (`partition_by`: a config
/// line), commits the second first, then the first; PyIceberg reads all rows, and filtered
/// scans return exactly theirs.
async fn promotion_then_an_older_file(partition_by: &str) {
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_segments(PROMOTION_SEGMENTS, input.path());
    let committer = local_committer(warehouse.path());
    let task =
        |version: u32, object: &'static str| promotion_task(input.path(), &committer, version, object, partition_by);
    // Materialized in offset order, committed the other way round.
    let old = task(1, "orders-0/00000000000000000000.log").await;
    let new = task(2, "orders-1/00000000000000000000.log").await;
    assert_eq!(committer.commit(&[new], None).await.results[0].1, TaskResult::Committed);
    let report = committer.commit(&[old], None).await;
    assert_eq!(report.results[0].1, TaskResult::Committed, "{report:?}");
    let read = read_local(warehouse.path(), "kafka.orders");
    assert_eq!(read.rows, 15);
    assert!(
        read.schema.contains("qty: required long") || read.schema.contains("qty: optional long"),
        "{}",
        read.schema
    );
    // Filters prune by each file's bounds: the int file's as well as the long file's.
    let w = warehouse.path().canonicalize().unwrap().display().to_string();
    let db = format!("{w}/catalog.db");
    assert_eq!(pyiceberg(&["sql", &db, &w, "kafka.orders", "qty < 5"]).rows, 5);
    assert_eq!(pyiceberg(&["sql", &db, &w, "kafka.orders", "qty > 1000"]).rows, 5);
}

#[tokio::test]
async fn dynamodb_leases_exclude_fence_and_expire() {
    let config = support::aws_config().await;
    create_lease_table(&config, "lease-test").await;
    let locks = DynamoDbLocks::new(aws_sdk_dynamodb::Client::new(&config), "lease-test");
    let ttl = std::time::Duration::from_secs(30);
    let a = locks.acquire("kafka.t", "a", ttl).await.unwrap().expect("free");
    assert!(locks.acquire("kafka.t", "b", ttl).await.unwrap().is_none(), "held by a");
    let a = locks.renew(&a, ttl).await.unwrap();
    locks.release(&a).await.unwrap();
    let b = locks.acquire("kafka.t", "b", ttl).await.unwrap().expect("released");
    assert!(b.fencing > a.fencing);
    assert!(matches!(locks.renew(&a, ttl).await, Err(floe_core::lock::LockError::Lost { .. })));

    // An expired lease is taken over; its holder's next renewal fails: its commit aborts.
    let c = locks.acquire("kafka.u", "c", std::time::Duration::from_millis(1)).await.unwrap().unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let d = locks.acquire("kafka.u", "d", ttl).await.unwrap().expect("expired");
    assert_eq!(d.fencing, c.fencing + 1);
    assert!(locks.renew(&c, ttl).await.is_err());

    // An expired lease nobody took is still its holder's: renewing it succeeds, and holds
    // it again; peek names the holder to others only.
    let e = locks.acquire("kafka.v", "e", std::time::Duration::from_millis(1)).await.unwrap().unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert_eq!(locks.peek("kafka.v", "f").await.unwrap(), None, "expired");
    let e = locks.renew(&e, ttl).await.expect("expired, but nobody took it");
    assert!(locks.acquire("kafka.v", "f", ttl).await.unwrap().is_none(), "renewed: held again");
    assert_eq!(locks.peek("kafka.v", "f").await.unwrap().map(|h| h.owner).as_deref(), Some("e"));
    assert_eq!(locks.peek("kafka.v", "e").await.unwrap(), None, "its own");
    locks.release(&e).await.unwrap();

    locks.set_suspended("kafka.u", Some("value: binary → string")).await.unwrap();
    assert_eq!(locks.suspended("kafka.u").await.unwrap().as_deref(), Some("value: binary → string"));
    locks.set_suspended("kafka.u", None).await.unwrap();
    assert_eq!(locks.suspended("kafka.u").await.unwrap(), None);
}

#[tokio::test]
async fn a_bad_record_in_suspend_mode_stops_the_table_until_it_is_resumed() {
    use floe_core::lock::TableLocks;
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Two segments of clicks-0; offset 4, in the first, is not JSON.
    let script = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
from segment_file import write_segment
records = [(1764489600000 + i, None, json.dumps({"id": i}).encode()) for i in range(20)]
records[4] = (1764489600004, None, b"{not json")
write_segment(sys.argv[2] + "/clicks-0/00000000000000000000.log", records[:10], [10])
write_segment(sys.argv[2] + "/clicks-0/00000000000000000010.log", records[10:], [10], base=10)
"#;
    write_segments(script, input.path());
    let mode = |m: &str| {
        FloeConfig::parse(&format!("[defaults]\nenabled = true\nvalue_format = \"json\"\nbad_records = \"{m}\"\n"))
            .unwrap()
    };
    let run = |config: FloeConfig| {
        let (input, warehouse) = (input.path().to_path_buf(), warehouse.path().to_path_buf());
        async move { floe_cli::local::run_local(&input, &warehouse, config).await.unwrap() }
    };
    let report = run(mode("suspend")).await;
    // The first segment fails naming the record; the second, good, is not committed:
    // the table is stopped, with a status naming the record.
    assert_eq!(report.failed.len(), 2, "{:?}", report.failed);
    assert!(report.failed[0].contains("partition 0 offset 4"), "{}", report.failed[0]);
    assert!(report.failed[1].contains("kafka.clicks is suspended: bad record: topic clicks partition 0 offset 4"));
    assert_eq!(report.tables[0].snapshots, 0);
    let catalog =
        floe_core::catalog::sqlite::SqliteCatalog::open(&warehouse.path().join("catalog.db"), "floe").unwrap();
    let locks = floe_core::lock::sqlite::SqliteLocks::new(catalog.connection()).unwrap();
    let status = locks.suspended("kafka.clicks").await.unwrap().unwrap();
    assert!(status.contains("00000000000000000000.log") && status.contains("offset 4"), "{status}");
    // `floe local status` shows it, before the table's first commit.
    let shown = floe_cli::local::status(warehouse.path()).await.unwrap();
    assert_eq!((shown.len(), shown[0].table.as_str(), shown[0].snapshots), (1, "kafka.clicks", 0));
    assert_eq!(shown[0].suspended.as_deref(), Some(status.as_str()));
    let resume = format!("floe local resume kafka.clicks --warehouse {}", warehouse.path().display());
    let health = &shown[0].health;
    assert_eq!((health.state, health.resume.as_deref()), ("suspended", Some(resume.as_str())));
    let record = health.record.as_ref().expect("the bad record");
    assert_eq!((record.topic.as_str(), record.partition, record.offset), ("clicks", 0, 4));
    let json = serde_json::to_value(&shown[0]).unwrap();
    assert_eq!((&json["state"], &json["record"]["offset"]), (&Value::from("suspended"), &Value::from(4)));
    let table = floe_cli::health::render(&[("kafka.clicks", health)]);
    assert!(table.contains("\nkafka.clicks  suspended") && table.contains(&format!("resume: {resume}")), "{table}");
    // Another mode alone does not restart it: the table stays stopped until resumed, and
    // its segments are not written meanwhile.
    let stopped = run(mode("skip")).await;
    assert_eq!((stopped.tables[0].snapshots, stopped.tables[0].segments), (0, 0));
    assert!(stopped.failed.iter().all(|f| f.contains("kafka.clicks is suspended: bad record")), "{:?}", stopped.failed);
    let resumed = floe_cli::local::resume(warehouse.path(), "kafka.clicks").await.unwrap();
    assert_eq!(resumed.as_deref(), Some(status.as_str()));
    assert_eq!(floe_cli::local::resume(warehouse.path(), "kafka.clicks").await.unwrap(), None);
    let report = run(mode("skip")).await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(report.tables[0].skipped_records, 1);
    let clicks = read_local(warehouse.path(), "kafka.clicks");
    assert_eq!(clicks.offsets["0"], (0..20).filter(|&o| o != 4).collect::<Vec<i64>>());
    // Running again, with its offsets, files and bytes; the bad record is shown no more.
    let shown = floe_cli::local::status(warehouse.path()).await.unwrap();
    let health = &shown[0].health;
    assert_eq!((health.state, health.record.as_ref(), health.resume.as_ref()), ("running", None, None));
    assert_eq!(shown[0].offsets["clicks-0"], "0-19");
    assert!(health.files >= Some(1) && health.bytes > Some(0) && health.last_commit.is_some(), "{health:?}");
    // The freshness lag: the commit's time less its newest record's timestamp.
    assert!(health.lag.as_ref().is_some_and(|lag| lag.ends_with('s')), "{health:?}");
    assert_eq!(clicks.summary.get("floe.skipped-records").map(String::as_str), Some("1"), "{:?}", clicks.summary);
    let shown = floe_cli::local::status(warehouse.path()).await.unwrap();
    let clicks = shown.iter().find(|t| t.table == "kafka.clicks").unwrap();
    assert_eq!((clicks.suspended.as_deref(), clicks.offsets["clicks-0"].as_str()), (None, "0-19"));
}

/// Rewrites the committed offsets of `table`'s current snapshot summary, `from` → `to`,
/// in place: what an older version (or a hand edit) may have left in a warehouse.
async fn rewrite_local_summary(warehouse: &Path, table: &str, from: &str, to: &str) {
    let catalog = floe_core::catalog::sqlite::SqliteCatalog::open(&warehouse.join("catalog.db"), "floe").unwrap();
    let (namespace, name) = table.split_once('.').unwrap();
    let name = TableName { namespace: namespace.into(), name: name.into() };
    let location = catalog.current(&name).await.unwrap().unwrap().metadata_location;
    let path = location.strip_prefix("file://").unwrap_or(&location);
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{from} not in {text}");
    std::fs::write(path, text.replace(from, to)).unwrap();
}

#[tokio::test]
async fn unreadable_committed_offsets_fail_only_their_own_table() {
    let samples = support::root().join("examples/segments");
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let tiered = "tiered/page.views-MWJ6FHTfRYy67jzwZdeqSQ/0/00000000000000000000-tqimKeZwStOEOwRzT3L5oQ";
    copy(&samples, input.path(), "orders-0/00000000000000000000.log");
    for ext in ["log", "indexes", "rsm-manifest"] {
        copy(&samples, input.path(), &format!("{tiered}.{ext}"));
    }
    assert!(local_run(input.path(), warehouse.path()).await.failed.is_empty());
    // Before legacy offsets were range-checked, offset -1 could be committed: `-1-99`
    // still reads. A value no version writes fails its own table only, naming the key.
    rewrite_local_summary(
        warehouse.path(),
        "kafka.orders",
        r#""floe.offsets.orders.0":"0-99""#,
        r#""floe.offsets.orders.0":"-1-99""#,
    )
    .await;
    let key = r#""floe.offsets.page.views.0""#;
    rewrite_local_summary(warehouse.path(), "kafka.page_views", &format!("{key}:\"0-199\""), &format!("{key}:\"0-x\""))
        .await;
    let shown = floe_cli::local::status(warehouse.path()).await.unwrap();
    let [orders, views] = &shown[..] else { panic!("{shown:?}") };
    assert_eq!(
        (orders.table.as_str(), orders.offsets["orders-0"].as_str(), &orders.problem),
        ("kafka.orders", "-1-99", &None)
    );
    assert_eq!((views.table.as_str(), views.snapshots), ("kafka.page_views", 1));
    let problem = views.problem.as_deref().unwrap();
    assert_eq!(problem, format!("snapshot summary {key} = \"0-x\": offset range \"0-x\": \"x\" is not a number"));
    // A run goes on: the orders segment already held is skipped and the new one
    // committed; the page views segment fails, naming its table and the key.
    copy(&samples, input.path(), "orders-0/00000000000000000100.log");
    let report = floe_cli::local::run_local(input.path(), warehouse.path(), FloeConfig::default()).await.unwrap();
    let orders = report.tables.iter().find(|t| t.table == "kafka.orders").unwrap();
    assert_eq!((orders.segments, orders.skipped_segments, orders.snapshots), (1, 1, 1));
    let ([failed], [compaction]) = (&report.failed[..], &report.maintenance_failed[..]) else { panic!("{report:?}") };
    assert!(failed.starts_with(tiered) && failed.contains(&format!("table kafka.page_views: {problem}")), "{failed}");
    // Nor is the table compacted: which topic's policy applies is unknown.
    assert!(compaction.starts_with("compaction of kafka.page_views: ") && compaction.contains(problem), "{compaction}");
    let shown = floe_cli::local::status(warehouse.path()).await.unwrap();
    assert_eq!(shown[0].offsets["orders-0"], "-1-159");
}

/// A JSON topic `clicks` in `dlq` mode, one segment of ten records whose fifth is not
/// JSON; its configuration.
pub(crate) fn clicks_with_a_bad_record(input: &Path) -> FloeConfig {
    let script = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
from segment_file import write_segment
records = [(1764489600000 + i, None, json.dumps({"id": i}).encode()) for i in range(10)]
records[4] = (1764489600004, None, b"{not json")
write_segment(sys.argv[2] + "/clicks-0/00000000000000000000.log", records, [10])
"#;
    write_segments(script, input);
    FloeConfig::parse("[defaults]\nenabled = true\nvalue_format = \"json\"\nbad_records = \"dlq\"\n").unwrap()
}

#[tokio::test]
async fn dead_letters_are_committed_to_the_dead_letter_table() {
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = clicks_with_a_bad_record(input.path());
    let mut out = Vec::new();
    let report = floe_cli::local::run(input.path(), warehouse.path(), config.clone(), &mut out).await.unwrap();
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    // Maintenance goes through the dead-letter table too (the registry lists it).
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("\nkafka.clicks_dlq: nothing to compact\n"), "{out}");
    let clicks = read_local(warehouse.path(), "kafka.clicks");
    assert_eq!(clicks.offsets["0"], vec![0, 1, 2, 3, 5, 6, 7, 8, 9]);
    let dead = read_local(warehouse.path(), "kafka.clicks_dlq");
    assert_eq!(dead.offsets["0"], vec![4]);
    assert_eq!(dead.values["0/4"].as_deref(), Some("{not json"));
    // Again: nothing twice, in either table.
    floe_cli::local::run(input.path(), warehouse.path(), config, Vec::new()).await.unwrap();
    assert_eq!(read_local(warehouse.path(), "kafka.clicks_dlq").rows, 1);
    assert_eq!(read_local(warehouse.path(), "kafka.clicks").rows, 9);
}

#[tokio::test]
async fn a_segment_is_done_only_when_its_dead_letters_are_committed_too() {
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = clicks_with_a_bad_record(input.path());
    let w = warehouse.path().canonicalize().unwrap().display().to_string();
    let task = materialize(config, input.path(), &w, "clicks-0/00000000000000000000.log").await;
    assert_eq!(task.dead_letter_files.len(), 1);
    // Commits to dead-letter tables fail while `outage` holds (a Glue outage, a process
    // dying between the two commits).
    let local = local_committer(warehouse.path());
    let outage = Arc::new(AtomicBool::new(true));
    let armed = outage.clone();
    let catalog = Hooked::new(local.catalog.clone(), move |call, table, _| {
        let down = matches!(call, CatalogCall::Create | CatalogCall::Swap)
            && table.name.ends_with("_dlq")
            && armed.load(Ordering::SeqCst);
        let table = table.to_string();
        Box::pin(async move {
            match down {
                true => Err(CatalogError::Other { table, detail: "outage".into(), retryable: true }),
                false => Ok(()),
            }
        })
    });
    let committer = local.with_catalog(Arc::new(catalog));
    let main = TableName { namespace: "kafka".into(), name: "clicks".into() };

    // The dead-letter commit fails: the main table does not take the segment either, so
    // the segment is still to be done (a rerun or a redelivery materializes it again).
    let report = committer.commit(std::slice::from_ref(&task), None).await;
    assert!(matches!(report.results[0].1, TaskResult::Failed { retryable: true, .. }), "{:?}", report.results);
    let held = match floe_core::table::load(committer.catalog.as_ref(), &committer.file_io, &main).await.unwrap() {
        Some(loaded) => floe_core::table::committed_offsets(&main, &loaded.metadata).unwrap(),
        None => Default::default(),
    };
    assert!(held.get("clicks", 0).is_none(), "the main table took a segment whose dead letters are lost: {held:?}");

    // Once the outage ends: both tables, each record once, however often it comes again.
    outage.store(false, Ordering::SeqCst);
    for expected in [TaskResult::Committed, TaskResult::AlreadyCommitted] {
        let report = committer.commit(std::slice::from_ref(&task), None).await;
        assert_eq!(report.results[0].1, expected);
    }
    let clicks = read_local(warehouse.path(), "kafka.clicks");
    assert_eq!((clicks.offsets["0"].len(), clicks.duplicates), (9, 0));
    let dead = read_local(warehouse.path(), "kafka.clicks_dlq");
    assert_eq!((dead.offsets["0"].clone(), dead.duplicates), (vec![4], 0));
}

/// A commit that outlives its lease keeps it (renewed while it works, on a controlled
/// clock) and commits; nobody else can take the table meanwhile.
#[tokio::test(start_paused = true)]
async fn a_commit_longer_than_its_lease_keeps_the_lease_and_commits() {
    use floe_core::lock::Clock;
    use floe_core::lock::sqlite::SqliteLocks;
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(&support::root().join("examples/segments"), input.path(), "orders-0/00000000000000000000.log");
    let w = warehouse.path().canonicalize().unwrap().display().to_string();
    let task = materialize(FloeConfig::default(), input.path(), &w, "orders-0/00000000000000000000.log").await;
    let local = local_committer(warehouse.path());
    let catalog =
        floe_core::catalog::sqlite::SqliteCatalog::open(&warehouse.path().join("catalog.db"), "floe").unwrap();
    let locks = SqliteLocks::new(catalog.connection()).unwrap().with_clock(Clock::tokio());
    let ttl = std::time::Duration::from_secs(30);
    // The catalog takes `3 × ttl` to load the table once (a slow Glue, a long rewrite
    // before it), asking meanwhile whether another committer could take the lease.
    let (armed, taken) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicBool::new(false)));
    let (probe, seen) = (locks.clone(), taken.clone());
    let slow = Hooked::new(local.catalog.clone(), move |call, table, _| {
        let slow = call == CatalogCall::Current && armed.swap(false, Ordering::SeqCst);
        let (probe, seen, table) = (probe.clone(), seen.clone(), table.to_string());
        Box::pin(async move {
            for _ in 0..if slow { 6 } else { 0 } {
                tokio::time::sleep(ttl / 2).await;
                if probe.acquire(&table, "intruder", ttl).await.unwrap().is_some() {
                    seen.store(true, Ordering::SeqCst);
                }
            }
            Ok(())
        })
    });
    let committer = local.with_catalog(Arc::new(slow)).with_locks(Arc::new(locks)).with_lease_ttl(ttl);
    let start = tokio::time::Instant::now();
    let report = committer.commit(std::slice::from_ref(&task), None).await;
    assert!(start.elapsed() >= 3 * ttl, "the commit took {:?}", start.elapsed());
    assert!(!taken.load(Ordering::SeqCst), "another committer took the lease during the commit");
    assert_eq!(report.results[0].1, TaskResult::Committed, "{:?}", report.results);
    assert_eq!(read_local(warehouse.path(), "kafka.orders").offsets["0"], (0..100).collect::<Vec<_>>());
}
