//! Upsert tables (`mode = "upsert"`): one row per key, its latest record's, judged by
//! PyIceberg (which applies position deletes) against a dict model of the topic
//! (tests/py/make_upsert.py): segments committed in shuffled orders, all at once and one
//! by one, a segment delivered again, then compacted.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use floe_core::catalog::sqlite::SqliteCatalog;
use floe_core::committer::TaskResult;
use floe_core::config::FloeConfig;
use floe_core::table::keys::KEYS_KEY;
use floe_core::table::keys::index::IndexRoot;

use crate::committer::{Read, copy, read_local};
use crate::support;

/// What the table must hold (make_upsert.py's accounts.json).
#[derive(serde::Deserialize)]
pub(crate) struct Model {
    pub(crate) live: BTreeMap<String, Vec<i64>>,
    pub(crate) values: BTreeMap<String, String>,
    pub(crate) keys: usize,
    pub(crate) tombstones: usize,
}

pub(crate) fn data() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        support::run_python("make_upsert.py", &[dir.path()]);
        support::run_python("make_debezium.py", &[dir.path()]);
        support::run_python("make_debezium.py", &[Path::new("--avro"), dir.path()]);
        dir
    })
    .path()
}

pub(crate) fn model(name: &str) -> Model {
    serde_json::from_slice(&std::fs::read(data().join(name)).unwrap()).unwrap()
}

/// `accounts`' segments: partitions 0 and 1, three each.
pub(crate) fn segments() -> Vec<String> {
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

        [[topics]]
        topic = "wallets"
        value_format = "json"
        mode = "upsert"

        [[topics]]
        topic = "ledger"
        value_format = "json"
        mode = "upsert"
        key_columns = ["id", "region"]

        [[topics]]
        topic = "dbserver1.inventory.customers"
        value_format = "json"
        mode = "upsert"
        envelope = "debezium"
        "#,
    )
    .unwrap()
}

async fn run(input: &Path, warehouse: &Path) {
    run_with(input, warehouse, config()).await
}

async fn run_with(input: &Path, warehouse: &Path, config: FloeConfig) {
    let mut out = Vec::new();
    let report = floe_cli::local::run(input, warehouse, config, &mut out).await;
    let report = report.unwrap_or_else(|e| panic!("{e:#}\n{}", String::from_utf8_lossy(&out)));
    assert!(report.failed.is_empty(), "{:?}", report.failed);
}

/// The table holds exactly the model's rows: each live key's last record, no other.
pub(crate) fn assert_model(read: &Read, model: &Model, what: &str) {
    assert_eq!(read.duplicates, 0, "{what}");
    assert_eq!(read.offsets, model.live, "{what}: the offsets of the rows read");
    assert_eq!(read.rows, model.keys, "{what}");
    for (at, value) in &model.values {
        assert_eq!(read.values.get(at).cloned().flatten().as_deref(), Some(value.as_str()), "{what}: {at}");
    }
    assert_eq!(read.nulls.get("id"), Some(&0), "{what}: no tombstone row is visible");
}

/// `floe audit` finds every key's latest record, and only those, exactly once.
async fn assert_audit(warehouse: &Path, table: &str, model: &Model) {
    let (report, code, text) = crate::audit::audit(warehouse, table).await;
    assert_eq!(code, 0, "{text}");
    for p in &report.partitions {
        let upsert = p.upsert.as_ref().expect("an upsert table is audited against its key index");
        assert_eq!(upsert.live_keys as usize, model.live[&p.partition.to_string()].len(), "{text}");
        use floe_core::table::audit::GapReason::{Deleted, WithoutRows};
        let superseded = p.gaps.iter().all(|g| [Deleted, WithoutRows].contains(&g.reason));
        assert!(superseded, "every offset without a row is superseded, or has no row (markers, aborted): {:?}", p.gaps);
    }
}

#[tokio::test]
async fn an_upsert_table_holds_each_key_s_latest_record_whatever_order_segments_commit_in() {
    let model = model("accounts.json");
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
        let status = floe_cli::local::status(warehouse.path()).await.unwrap();
        let rows: Vec<(&str, &floe_cli::health::HealthView)> =
            status.iter().map(|t| (t.table.as_str(), &t.health)).collect();
        let shown = floe_cli::health::render(&rows);
        assert!(shown.contains(&format!("upsert: {} live key(s), one row each", model.keys)), "{shown}");
        assert_audit(warehouse.path(), "kafka.accounts", &model).await;
    }
}

#[tokio::test]
async fn an_upsert_table_survives_a_redelivered_segment_and_compaction_between_its_commits() {
    let model = model("accounts.json");
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
    assert_audit(warehouse.path(), "kafka.accounts", &model).await;
}

#[tokio::test]
async fn debezium_change_events_keep_each_row_s_after_image_and_deletes_remove_it() {
    let model = model("customers.json");
    assert!(model.tombstones > 4, "the events delete rows");
    let segments: Vec<String> =
        [0, 30, 60].iter().map(|base| format!("dbserver1.inventory.customers-0/{base:020}.log")).collect();
    let table = "kafka.dbserver1_inventory_customers";
    for order in [[0, 1, 2], [2, 0, 1]] {
        let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for i in order {
            copy(data(), input.path(), &segments[i]);
            run(input.path(), warehouse.path()).await;
        }
        let read = read_local(warehouse.path(), table);
        assert_model(&read, &model, &format!("order {order:?}"));
        assert!(
            ["before", "source", "ts_ms"].iter().all(|c| !read.schema.contains(c)),
            "the row is `after`: {}",
            read.schema
        );
        assert_audit(warehouse.path(), table, &model).await;
    }
}

/// Debezium's Avro converter: change events in the Confluent wire format, schemas from a
/// registry (keys `{id}` records; the envelope's schema evolving mid-topic, its rows
/// gaining `phone`). The table holds each key's `after` image, deletes remove it, in
/// either commit order.
#[tokio::test]
async fn debezium_avro_change_events_keep_each_row_s_after_image_through_a_schema_change() {
    let dir = data().join("avro");
    let model: Model = serde_json::from_slice(&std::fs::read(dir.join("customers.json")).unwrap()).unwrap();
    assert!(model.tombstones > 4, "the events delete rows");
    let registry = support::start_registry(&dir.join("registry.json"), None, 0).await;
    let config = FloeConfig::parse(&format!(
        "[schema_registry]\nurl = \"{}\"\n[[topics]]\ntopic = \"avro.inventory.customers\"\nkey_format = \"avro\"\n\
         value_format = \"avro\"\nmode = \"upsert\"\nenvelope = \"debezium\"\n",
        registry.url
    ))
    .unwrap();
    let segments: Vec<String> =
        [0, 30, 60].iter().map(|base| format!("avro.inventory.customers-0/{base:020}.log")).collect();
    let table = "kafka.avro_inventory_customers";
    for order in [[0, 1, 2], [2, 0, 1]] {
        let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for i in order {
            copy(&dir, input.path(), &segments[i]);
            run_with(input.path(), warehouse.path(), config.clone()).await;
        }
        let read = read_local(warehouse.path(), table);
        assert_model(&read, &model, &format!("order {order:?}"));
        let schema = &read.schema;
        assert!(["before", "source", "ts_ms"].iter().all(|c| !schema.contains(c)), "the row is `after`: {schema}");
        assert!(schema.contains("phone"), "the evolved `after` adds its column: {schema}");
        assert_audit(warehouse.path(), table, &model).await;
    }
}

#[tokio::test]
async fn a_table_keyed_on_value_columns_keeps_each_key_s_latest_row() {
    let model = model("ledger.json");
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for base in [40, 0] {
        copy(data(), input.path(), &format!("ledger-0/{base:020}.log"));
        run(input.path(), warehouse.path()).await;
    }
    let read = read_local(warehouse.path(), "kafka.ledger");
    assert_model(&read, &model, "keyed on id and region");
    assert_audit(warehouse.path(), "kafka.ledger", &model).await;
    assert_eq!(read.history.iter().filter(|h| h["operation"] == "overwrite").count(), 2);
}

#[tokio::test]
async fn transactions_spanning_segments_upsert_only_their_committed_records_in_any_arrival_order() {
    let model = model("wallets.json");
    let segments: Vec<String> = [0, 20, 40, 60].iter().map(|base| format!("wallets-0/{base:020}.log")).collect();
    for order in [[0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2], [2, 0, 3, 1]] {
        let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for i in order {
            copy(data(), input.path(), &segments[i]);
            run(input.path(), warehouse.path()).await;
        }
        let read = read_local(warehouse.path(), "kafka.wallets");
        assert_model(&read, &model, &format!("order {order:?}"));
        assert_audit(warehouse.path(), "kafka.wallets", &model).await;
    }
}

/// An upsert commit lands between a compaction's plan and its commit, superseding rows
/// of its inputs: the compaction is committed all the same, those deletes carried onto
/// its outputs by the rows' offsets (table/deletes/carry.rs), and the table still holds
/// each key's latest record.
#[tokio::test]
async fn a_compaction_planned_before_an_upsert_commit_carries_its_deletes_onto_the_outputs() {
    let model = model("accounts.json");
    let clicks = crate::compaction::Clicks::new("value_format = \"json\"\nmode = \"upsert\"");
    let all = segments();
    for segment in &all {
        copy(data(), clicks.input.path(), segment);
    }
    let first: Vec<String> = [0, 1, 3, 4].iter().map(|&i| all[i].clone()).collect();
    clicks.commit(&first).await;
    let queue = std::sync::Arc::new(floe_core::queue::InProcessQueue::default());
    let past_the_window = floe_core::lock::now_ms() + 16 * 60_000;
    let planned = clicks.compactor(queue.clone()).run(past_the_window, None).await;
    assert_eq!(planned.tables[0].compactions, 2, "one per Kafka partition: {planned:?}");
    clicks.commit(&[all[2].clone(), all[5].clone()]).await;
    let report = clicks.committer.commit_all(&queue.drain(), None).await;
    let results: Vec<&TaskResult> = report.results.iter().map(|(_, r)| r).collect();
    assert_eq!(results, [&TaskResult::Committed, &TaskResult::Committed], "{report:?}");
    let read = read_local(clicks.warehouse.path(), "kafka.accounts");
    assert_model(&read, &model, "compacted after the last segments' commit");
    assert_eq!(read.operation.as_deref(), Some("replace"));
    assert!(read.summary.get("added-position-deletes").is_some_and(|n| n != "0"), "{:?}", read.summary);
    assert_audit(clicks.warehouse.path(), "kafka.accounts", &model).await;
}

/// `format_version = 3`: an upsert table's superseded rows and tombstones deleted by
/// deletion vectors, one per data file, merged with the file's earlier vector and
/// replacing it (three commits, no compaction between); PyIceberg, DuckDB and the spec
/// reader (foreign_delete.py) each read one row per live key; compaction applies the
/// vectors and drops them.
#[tokio::test]
async fn a_v3_upsert_table_deletes_with_one_deletion_vector_per_data_file() {
    let model = model("accounts.json");
    let clicks = crate::compaction::Clicks::new("value_format = \"json\"\nmode = \"upsert\"\nformat_version = 3");
    let all = segments();
    for segment in &all {
        copy(data(), clicks.input.path(), segment);
    }
    let file_io = floe_core::storage::local_file_io();
    let table = floe_core::table::TableName { namespace: "kafka".into(), name: "accounts".into() };
    let catalog = floe_core::catalog::sqlite::SqliteCatalog::open(&clicks.warehouse.path().join("catalog.db"), "floe");
    let catalog = catalog.unwrap();
    let mut replaced = 0;
    for pair in [[0, 3], [1, 4], [2, 5]] {
        clicks.commit(&pair.map(|i| all[i].clone())).await;
        let loaded = floe_core::table::load(&catalog, &file_io, &table).await.unwrap().unwrap();
        let (_, deletes) = floe_core::table::deletes::live_files(&file_io, &loaded.metadata).await.unwrap();
        assert!(deletes.iter().all(|d| d.is_vector()), "v3: deletion vectors only");
        let mut named: Vec<String> = deletes.iter().filter_map(|d| d.file.referenced_data_file()).collect();
        let count = named.len();
        named.sort();
        named.dedup();
        assert_eq!(named.len(), count, "one vector per data file: {named:?}");
        let summary = &loaded.metadata.current_snapshot().unwrap().summary().additional_properties;
        replaced += summary.get("removed-delete-files").map_or(0, |n| n.parse::<usize>().unwrap());
    }
    assert!(replaced > 0, "later commits replaced earlier vectors of the same data files");
    let read = read_local(clicks.warehouse.path(), "kafka.accounts");
    assert_eq!(read.format_version, 3);
    assert_model(&read, &model, "v3, read by PyIceberg");
    let w = clicks.warehouse.path().canonicalize().unwrap().display().to_string();
    let spec_reader = || {
        let out = std::process::Command::new(support::python())
            .arg(support::root().join("tests/py/foreign_delete.py"))
            .args([format!("{w}/catalog.db"), w.clone(), "kafka.accounts".into(), "read".into()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let spec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        serde_json::from_value::<BTreeMap<String, Vec<i64>>>(spec["offsets"].clone()).unwrap()
    };
    assert_eq!(spec_reader(), model.live, "the spec reader");
    let access = floe_cli::table::access(clicks.warehouse.path(), "kafka.accounts").await.unwrap();
    let duckdb = crate::querying::read("duckdb-scan", &access.location).unwrap();
    assert_eq!((duckdb.offsets, duckdb.duplicates), (model.live.clone(), 0), "DuckDB");
    assert_audit(clicks.warehouse.path(), "kafka.accounts", &model).await;
    // Compaction applies every vector and drops it.
    let queue = std::sync::Arc::new(floe_core::queue::InProcessQueue::default());
    clicks.compactor(queue.clone()).run(floe_core::lock::now_ms() + 16 * 60_000, None).await;
    let report = clicks.committer.commit_all(&queue.drain(), None).await;
    assert!(!report.results.is_empty() && report.results.iter().all(|(_, r)| *r == TaskResult::Committed));
    let loaded = floe_core::table::load(&catalog, &file_io, &table).await.unwrap().unwrap();
    let (_, deletes) = floe_core::table::deletes::live_files(&file_io, &loaded.metadata).await.unwrap();
    assert!(deletes.is_empty(), "{deletes:?}");
    assert_model(&read_local(clicks.warehouse.path(), "kafka.accounts"), &model, "v3, compacted");
    assert_eq!(spec_reader(), model.live, "the spec reader, compacted");
}

/// make_upsert.py `--random`'s topic: each segment's records.
#[derive(serde::Deserialize)]
struct Keyed {
    segments: Vec<KeyedSegment>,
}

#[derive(serde::Deserialize)]
struct KeyedSegment {
    path: String,
    partition: i32,
    records: Vec<KeyedRecord>,
}

/// (offset, key, the row as read_iceberg.py prints it; `None`: a tombstone)
type KeyedRecord = (i64, String, Option<String>);

/// What an upsert table of `segments` holds: per partition, each key's last record in
/// offset order, unless a tombstone — its offsets, and each row's value by `p/offset`.
fn upserted(segments: &[&KeyedSegment]) -> (BTreeMap<String, Vec<i64>>, BTreeMap<String, String>) {
    let mut by_partition: BTreeMap<i32, Vec<&KeyedRecord>> = BTreeMap::new();
    for segment in segments {
        by_partition.entry(segment.partition).or_default().extend(&segment.records);
    }
    let (mut offsets, mut values) = (BTreeMap::new(), BTreeMap::new());
    for (partition, mut records) in by_partition {
        records.sort_by_key(|r| r.0);
        let mut last: BTreeMap<&str, Option<(i64, &String)>> = BTreeMap::new();
        for (offset, key, value) in records {
            last.insert(key, value.as_ref().map(|v| (*offset, v)));
        }
        let mut live: Vec<i64> = last.values().flatten().map(|(o, _)| *o).collect();
        live.sort_unstable();
        if !live.is_empty() {
            offsets.insert(partition.to_string(), live);
        }
        values.extend(last.values().flatten().map(|(o, v)| (format!("{partition}/{o}"), (*v).clone())));
    }
    (offsets, values)
}

/// Random sequences over random keyed topics (make_upsert.py `--random`, seeded): batches
/// of segments committed in random order, segments delivered again, compactions planned
/// then committed after further commits (their deletes carried), on format 2 (even seeds)
/// and 3 (odd seeds, deletion vectors), unpartitioned and partitioned by a value updates
/// change (seeds 2 and 3 modulo 4); after every step PyIceberg reads exactly what a
/// dict model of the committed records says, and at the end `floe audit` agrees.
/// `FLOE_UPSERT_SEEDS` sets how many seeds (4).
#[tokio::test]
async fn random_upsert_sequences_read_as_the_model_says_after_every_step() {
    let seeds: u64 = std::env::var("FLOE_UPSERT_SEEDS").ok().and_then(|n| n.parse().ok()).unwrap_or(4);
    let mut deltas = false;
    for seed in 0..seeds {
        let dir = tempfile::tempdir().unwrap();
        support::run_python("make_upsert.py", &[Path::new("--random"), Path::new(&seed.to_string()), dir.path()]);
        let keyed: Keyed = serde_json::from_slice(&std::fs::read(dir.path().join("keyed.json")).unwrap()).unwrap();
        let version = if seed % 2 == 1 { "\nformat_version = 3" } else { "" };
        // Seeds 2 and 3 modulo 4 partition the table by the value, which updates change:
        // a key's row moves between partitions, its old row deleted in the old one.
        let partitioned = if seed % 4 >= 2 { "\npartition_by = [\"bucket(3, v)\"]" } else { "" };
        let settings = format!("value_format = \"json\"\nmode = \"upsert\"{version}{partitioned}");
        let clicks = crate::compaction::Clicks::new(&settings);
        for segment in &keyed.segments {
            copy(dir.path(), clicks.input.path(), &segment.path);
        }
        let mut rng = floe_core::testing::Rng(0x5eed ^ seed);
        let mut pending: Vec<usize> = (0..keyed.segments.len()).collect();
        let (mut committed, mut steps): (Vec<usize>, Vec<String>) = (Vec::new(), Vec::new());
        let mut planned: Option<Vec<floe_core::task::Task>> = None;
        while !pending.is_empty() || planned.is_some() {
            let step = match rng.below(5) {
                0 if planned.is_none() && !committed.is_empty() => {
                    let queue = std::sync::Arc::new(floe_core::queue::InProcessQueue::default());
                    clicks.compactor(queue.clone()).run(floe_core::lock::now_ms() + 16 * 60_000, None).await;
                    planned = Some(queue.drain());
                    "plan a compaction".to_string()
                }
                1 if planned.is_some() => {
                    let tasks = planned.take().unwrap();
                    let report = clicks.committer.commit_all(&tasks, None).await;
                    let results: Vec<&TaskResult> = report.results.iter().map(|(_, r)| r).collect();
                    assert!(results.iter().all(|r| **r == TaskResult::Committed), "seed {seed}: {steps:?} {report:?}");
                    format!("commit {} compaction(s)", tasks.len())
                }
                2 if !committed.is_empty() => {
                    let again = committed[rng.below(committed.len() as u64) as usize];
                    let report = clicks.commit_report(std::slice::from_ref(&keyed.segments[again].path)).await;
                    assert_eq!(report.results[0].1, TaskResult::AlreadyCommitted, "seed {seed}: {steps:?}");
                    format!("deliver {} again", keyed.segments[again].path)
                }
                _ if !pending.is_empty() => {
                    let n = (1 + rng.below(3) as usize).min(pending.len());
                    let batch: Vec<usize> =
                        (0..n).map(|_| pending.remove(rng.below(pending.len() as u64) as usize)).collect();
                    let paths: Vec<String> = batch.iter().map(|&i| keyed.segments[i].path.clone()).collect();
                    clicks.commit(&paths).await;
                    committed.extend(batch);
                    format!("commit {paths:?}")
                }
                _ => continue,
            };
            steps.push(step);
            if committed.is_empty() {
                continue;
            }
            let segments: Vec<&KeyedSegment> = committed.iter().map(|&i| &keyed.segments[i]).collect();
            let (offsets, values) = upserted(&segments);
            let read = read_local(clicks.warehouse.path(), "kafka.keyed");
            assert_eq!(read.duplicates, 0, "seed {seed}: {steps:?}");
            assert_eq!(read.offsets, offsets, "seed {seed}: {steps:?}");
            for (at, value) in &values {
                assert_eq!(read.values.get(at).cloned().flatten().as_ref(), Some(value), "seed {seed} {at}: {steps:?}");
            }
        }
        let files = read_local(clicks.warehouse.path(), "kafka.keyed").files;
        assert_eq!(files.iter().any(|f| f.contains("/v_bucket=")), !partitioned.is_empty(), "{files:?}");
        let (report, code, text) = crate::audit::audit(clicks.warehouse.path(), "kafka.keyed").await;
        assert_eq!(code, 0, "seed {seed}: {text}");
        assert!(report.partitions.iter().all(|p| p.upsert.is_some()));
        // The key index as its files hold it (no view kept from the commits), before
        // and after maintenance a month later: the sweep keeps every run of it.
        let root = key_index(clicks.warehouse.path(), "kafka.keyed").await;
        deltas |= root.buckets.iter().any(|b| !b.deltas.is_empty());
        floe_core::table::keys::cache::clear();
        let (_, code, text) = crate::audit::audit(clicks.warehouse.path(), "kafka.keyed").await;
        assert_eq!(code, 0, "seed {seed}, the index read from its files: {text}");
        let clock = floe_core::lock::Clock::Shifted { by_ms: 30 * 24 * 3_600_000 };
        floe_cli::compact::compact(clicks.warehouse.path(), clicks.config.clone(), clock, Vec::new()).await.unwrap();
        let gone: Vec<&str> = root.buckets.iter().flat_map(|b| b.files()).filter(|f| !Path::new(f).exists()).collect();
        assert!(gone.is_empty(), "seed {seed}: the sweep deleted runs of the key index: {gone:?}");
    }
    assert!(deltas, "no seed's key index took a delta: the test misses them");
}

/// The key index the table's last Floe snapshot names.
async fn key_index(warehouse: &Path, table: &str) -> IndexRoot {
    let catalog = SqliteCatalog::open(&warehouse.join("catalog.db"), "floe").unwrap();
    let file_io = floe_core::storage::local_file_io();
    let name = floe_core::table::TableName::parse(table).unwrap();
    let loaded = floe_core::table::load(&catalog, &file_io, &name).await.unwrap().unwrap();
    let location = floe_core::table::floe_summary(&loaded.metadata).remove(KEYS_KEY).expect("a key index");
    IndexRoot::load(&file_io, &location).await.unwrap()
}

/// Another engine deletes a live key's row (a position delete, as Spark or Athena writes
/// it) between two Floe commits: the row stays deleted until the key's next record,
/// which comes back as its one row; no other key is touched, and `floe audit` explains
/// the deleted latest record.
#[tokio::test]
async fn another_engine_s_delete_of_a_key_s_row_holds_until_the_key_s_next_record() {
    let model = model("accounts.json");
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let all = segments();
    for i in [0, 3] {
        copy(data(), input.path(), &all[i]);
    }
    run(input.path(), warehouse.path()).await;
    let first = read_local(warehouse.path(), "kafka.accounts");
    let deleted = first.offsets["0"][0];
    let w = warehouse.path().canonicalize().unwrap().display().to_string();
    let out = std::process::Command::new(support::python())
        .arg(support::root().join("tests/py/foreign_delete.py"))
        .args([format!("{w}/catalog.db"), w, "kafka.accounts".into(), "position".into(), format!("0/{deleted}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!read_local(warehouse.path(), "kafka.accounts").offsets["0"].contains(&deleted));
    for i in [1, 2, 4, 5] {
        copy(data(), input.path(), &all[i]);
    }
    run(input.path(), warehouse.path()).await;
    // The model less the deleted row, where it is still its key's latest record.
    let mut expected = model.live.clone();
    expected.get_mut("0").unwrap().retain(|&o| o != deleted);
    let read = read_local(warehouse.path(), "kafka.accounts");
    assert_eq!((read.offsets, read.duplicates), (expected, 0));
    let (report, code, text) = crate::audit::audit(warehouse.path(), "kafka.accounts").await;
    assert_eq!(code, 0, "{text}");
    assert!(report.partitions.iter().all(|p| p.upsert.as_ref().is_some_and(|u| u.missing_latest.is_empty())));
}
