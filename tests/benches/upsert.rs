//! Upsert benchmark: a keyed table (SQLite catalog, files in /dev/shm) loaded with N
//! distinct keys, then taking batches of 1,000,000 records — 89% updates of live keys,
//! 10% new keys, 1% tombstones — each batch as the committer takes it (ten tasks of
//! 100,000 records), through the core's `Committer::commit`: the key index resolved,
//! position deletes written, one snapshot. Measured: commit time and CPU per batch, keys
//! per second to the index, the committer process's peak RSS, and read amplification
//! (delete files per data file) before and after a compaction. Run at 1M and 10M keys,
//! each in a child process (its own peak RSS).
//!
//! `cargo bench -p floe-tests --bench upsert` — writes its section into BENCHMARKS.md.
//! `FLOE_BENCH_KEYS=N` runs one table of N keys (a partial run: BENCHMARKS.md is left
//! alone); `FLOE_BENCH_ROUNDS` sets the update batches (3).

#[path = "common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::builder::{BooleanBuilder, Int64Builder, LargeBinaryBuilder, StringBuilder};
use arrow_array::{ArrayRef, Int32Array, RecordBatch, StructArray, TimestampMicrosecondArray};
use common::{cpu, cpu_seconds, update_benchmarks};
use floe_core::committer::{Committer, TaskResult};
use floe_core::datafile::{DataFileWriter, WrittenFile};
use floe_core::schema::layout::with_tombstone;
use floe_core::schema::{PayloadType, table_struct};
use floe_core::table::TableName;
use floe_core::testing::Rng;
use iceberg::spec::{NestedField, PrimitiveType, Schema, StructType, Type};

const TOPIC: &str = "accounts";
/// Records per update batch, and per task (one segment's file).
const BATCH: u64 = 1_000_000;
const TASK_ROWS: u64 = 100_000;
const ROUNDS: usize = 10;
/// Rows per Arrow batch, as the materializer writes them.
const BATCH_ROWS: u64 = 8192;

fn table() -> TableName {
    TableName { namespace: "kafka".into(), name: TOPIC.into() }
}

/// Floe's upsert layout for a JSON record value `{id, balance, note}`, keyed on the message key.
fn schema() -> Schema {
    let p = |name: &str, t| Arc::new(NestedField::optional(0, name, Type::Primitive(t)));
    let value = StructType::new(vec![
        p("id", PrimitiveType::Long),
        p("balance", PrimitiveType::Long),
        p("note", PrimitiveType::String),
    ]);
    let source = with_tombstone(table_struct(&PayloadType::Raw, &PayloadType::Record(value)).unwrap());
    floe_core::schema::plan(None, &source).unwrap().schema
}

/// What a record of the benchmark does to its key.
#[derive(Clone, Copy)]
enum Change {
    Write(u64),
    Tombstone(u64),
}

/// The rows of `changes` at offsets from `first`, as the table's Arrow batch.
fn rows(arrow: &arrow::datatypes::SchemaRef, changes: &[Change], first: i64, rng: &mut Rng) -> RecordBatch {
    let n = changes.len();
    let offsets: Vec<i64> = (first..first + n as i64).collect();
    let (mut key, mut tombstone) = (LargeBinaryBuilder::new(), BooleanBuilder::new());
    let (mut id, mut balance, mut note) = (Int64Builder::new(), Int64Builder::new(), StringBuilder::new());
    for change in changes {
        let (k, dead) = match *change {
            Change::Write(k) => (k, false),
            Change::Tombstone(k) => (k, true),
        };
        key.append_value(format!("account-{k:010}"));
        tombstone.append_value(dead);
        if dead {
            id.append_null();
            balance.append_null();
            note.append_null();
        } else {
            id.append_value(k as i64);
            balance.append_value(rng.below(1_000_000) as i64);
            note.append_value(format!("ref {:x}", rng.next_u64()));
        }
    }
    let arrow::datatypes::DataType::Struct(kafka) = arrow.field(0).data_type().clone() else { unreachable!() };
    let kafka_columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(vec![0; n])),
        Arc::new(arrow_array::Int64Array::from(offsets.clone())),
        Arc::new(TimestampMicrosecondArray::from(
            offsets.iter().map(|o| 1_767_225_600_000_000 + o).collect::<Vec<_>>(),
        )),
        Arc::new(arrow_array::StringArray::from(vec!["create"; n])),
        arrow_array::new_null_array(kafka[4].data_type(), n),
        Arc::new(key.finish()),
        Arc::new(tombstone.finish()),
    ];
    let cast = |c: &ArrayRef, f: &arrow::datatypes::FieldRef| arrow::compute::cast(c, f.data_type()).unwrap();
    let kafka_columns = kafka_columns.iter().zip(kafka.iter()).map(|(c, f)| cast(c, f)).collect();
    let value_columns: Vec<ArrayRef> = vec![Arc::new(id.finish()), Arc::new(balance.finish()), Arc::new(note.finish())];
    let mut columns: Vec<ArrayRef> = vec![Arc::new(StructArray::new(kafka, kafka_columns, None))];
    columns.extend(value_columns.iter().zip(arrow.fields().iter().skip(1)).map(|(c, f)| cast(c, f)));
    RecordBatch::try_new(arrow.clone(), columns).unwrap()
}

/// One segment's file of `changes` from offset `first`.
async fn file(dir: &str, schema: &Arc<Schema>, changes: &[Change], first: i64, rng: &mut Rng) -> WrittenFile {
    let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(schema).unwrap());
    let file_io = floe_core::storage::local_file_io();
    let mut writer = DataFileWriter::new(file_io, dir, 0, format!("seg{first}"), schema.clone(), 1 << 30);
    for (i, chunk) in changes.chunks(BATCH_ROWS as usize).enumerate() {
        let at = first + (i as u64 * BATCH_ROWS) as i64;
        writer.write(&rows(&arrow, chunk, at, rng), at, at + chunk.len() as i64 - 1).await.unwrap();
    }
    writer.close().await.unwrap().remove(0)
}

/// The table being driven: the next offset and key, and the committer.
struct Driver {
    committer: Committer,
    schema: Arc<Schema>,
    dir: String,
    next_offset: i64,
    next_key: u64,
    rng: Rng,
}

impl Driver {
    /// Commits `changes` as the committer takes a batch: tasks of [`TASK_ROWS`] records,
    /// written first; returns the commit's seconds and CPU seconds.
    async fn commit(&mut self, changes: Vec<Change>) -> (f64, f64) {
        let mut tasks = Vec::new();
        for chunk in changes.chunks(TASK_ROWS as usize) {
            let written = file(&self.dir, &self.schema, chunk, self.next_offset, &mut self.rng).await;
            self.next_offset += chunk.len() as i64;
            let id = format!("bench-{}", written.first_offset);
            tasks.push(common::file_task(
                (&table(), TOPIC),
                &self.schema,
                &written,
                id,
                Some(vec!["_kafka.key".into()]),
            ));
        }
        let (cpu, start) = (cpu_seconds(), Instant::now());
        let report = self.committer.commit(&tasks, None).await;
        let seconds = start.elapsed().as_secs_f64();
        assert!(report.results.iter().all(|(_, r)| *r == TaskResult::Committed), "{:?}", report.results);
        (seconds, cpu_seconds() - cpu)
    }

    /// A batch of new keys.
    fn inserts(&mut self, n: u64) -> Vec<Change> {
        let changes = (self.next_key..self.next_key + n).map(Change::Write).collect();
        self.next_key += n;
        changes
    }

    /// A batch of updates: 89% live keys at random, 10% new keys, 1% tombstones.
    fn updates(&mut self) -> Vec<Change> {
        (0..BATCH)
            .map(|_| match self.rng.below(100) {
                0 => Change::Tombstone(self.rng.below(self.next_key)),
                1..=10 => {
                    self.next_key += 1;
                    Change::Write(self.next_key - 1)
                }
                _ => Change::Write(self.rng.below(self.next_key)),
            })
            .collect()
    }
}

async fn amplification(warehouse: &Path) -> (usize, usize) {
    let catalog = floe_core::catalog::sqlite::SqliteCatalog::open(&warehouse.join("catalog.db"), "floe").unwrap();
    let file_io = floe_core::storage::local_file_io();
    let loaded = floe_core::table::load(&catalog, &file_io, &table()).await.unwrap().unwrap();
    let (data, deletes) = floe_core::table::deletes::live_files(&file_io, &loaded.metadata).await.unwrap();
    (data.len(), deletes.len())
}

/// The child: a table of `keys` keys loaded, then [`ROUNDS`] update batches; prints JSON.
fn child(keys: u64) {
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
    let warehouse = dir.path();
    let rounds = std::env::var("FLOE_BENCH_ROUNDS").ok().and_then(|n| n.parse().ok()).unwrap_or(ROUNDS);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let committer =
            common::shared::committer::local_committer(warehouse, "bench").with_lease_ttl(Duration::from_secs(3600));
        let location = floe_core::table::table_location(&warehouse.display().to_string(), &table());
        let mut driver = Driver {
            committer,
            schema: Arc::new(schema()),
            dir: format!("{location}/data"),
            next_offset: 0,
            next_key: 0,
            rng: Rng(0x5eed),
        };
        let started = Instant::now();
        while driver.next_key < keys {
            let n = BATCH.min(keys - driver.next_key);
            let changes = driver.inserts(n);
            driver.commit(changes).await;
        }
        let load_seconds = started.elapsed().as_secs_f64();
        let mut batches = Vec::new();
        for _ in 0..rounds {
            let changes = driver.updates();
            let (seconds, cpu) = driver.commit(changes).await;
            eprintln!("{keys} keys: batch committed in {seconds:.2} s ({cpu:.2} CPU s)");
            batches.push(serde_json::json!({"seconds": seconds, "cpu": cpu}));
        }
        // A committer started cold (a Lambda's first invocation): the index read from its files.
        floe_core::table::keys::cache::clear();
        let changes = driver.updates();
        let (cold, _) = driver.commit(changes).await;
        eprintln!("{keys} keys: batch committed cold in {cold:.2} s");
        // The committer's peak: loading the table and every batch (the compaction after
        // is the compactor's work, another process).
        let rss_kib = common::peak_rss_kib();
        let before = amplification(warehouse).await;
        let compaction = floe_core::maintenance::rewrite::compact;
        let catalog = floe_core::catalog::sqlite::SqliteCatalog::open(&warehouse.join("catalog.db"), "floe").unwrap();
        let file_io = floe_core::storage::local_file_io();
        let loaded = floe_core::table::load(&catalog, &file_io, &table()).await.unwrap().unwrap();
        let policy = floe_core::table::compaction::CompactionPolicy::default();
        let now = loaded.metadata.current_snapshot().unwrap().timestamp_ms() + 3_600_000;
        let tasks = compaction(&file_io, &table(), &loaded.metadata, policy, now).await.unwrap();
        let tasks: Vec<_> = tasks.into_iter().map(|t| floe_core::task::Task::Compaction(Box::new(t))).collect();
        let report = driver.committer.commit_all(&tasks, None).await;
        assert!(report.results.iter().all(|(_, r)| *r == TaskResult::Committed), "{:?}", report.results);
        let after = amplification(warehouse).await;
        println!(
            "{}",
            serde_json::json!({
                "keys": keys, "load_seconds": load_seconds, "batches": batches, "cold": cold,
                "rss_kib": rss_kib,
                "before": {"data": before.0, "deletes": before.1}, "after": {"data": after.0, "deletes": after.1},
            })
        );
    });
}

fn run_child(keys: u64) -> serde_json::Value {
    let out = Command::new(std::env::current_exe().unwrap()).args(["--child", &keys.to_string()]).output().unwrap();
    assert!(out.status.success(), "{keys} keys: {}", String::from_utf8_lossy(&out.stderr));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(out.stdout.trim_ascii()).unwrap()
}

fn spread(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    (s[0], s[s.len() / 2], s[s.len() - 1])
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        return child(args[2].parse().unwrap());
    }
    let partial = std::env::var("FLOE_BENCH_KEYS").ok().and_then(|n| n.parse::<u64>().ok());
    let sizes = partial.map_or(vec![1_000_000, 10_000_000], |n| vec![n]);
    let results: Vec<serde_json::Value> = sizes.iter().map(|&keys| run_child(keys)).collect();
    let mut body = String::new();
    body.push_str(&format!(
        "A keyed table (one Kafka partition, SQLite catalog, files in /dev/shm) of N keys, then batches of \
         {BATCH} records (89% updates of live keys, 10% new keys, 1% tombstones), each as the committer takes \
         it: ten tasks of {TASK_ROWS} records, their files written beforehand, committed by `Committer::commit` \
         (key index resolved, position deletes written, one snapshot). Release build, {}, one thread.\n\n",
        cpu()
    ));
    body.push_str(&format!(
        "{ROUNDS} batches a table, the committer warm (the key index kept in memory from its earlier commits, as a \
         warm Lambda or `floe local run` keeps it); the mean counts the buckets consolidated (their deltas merged) \
         along the way. Then one batch on a cold committer: the index read from its files.\n\n"
    ));
    body.push_str("| keys in the table | commit per batch, median (min–max) | mean | CPU per batch | keys/s to the index | cold committer | committer peak RSS | delete files / data files, before → after compaction |\n|---|---|---|---|---|---|---|---|\n");
    let (mut medians, mut means) = (Vec::new(), Vec::new());
    for r in &results {
        let seconds: Vec<f64> =
            r["batches"].as_array().unwrap().iter().map(|b| b["seconds"].as_f64().unwrap()).collect();
        let cpu: Vec<f64> = r["batches"].as_array().unwrap().iter().map(|b| b["cpu"].as_f64().unwrap()).collect();
        let (min, med, max) = spread(&seconds);
        let mean = seconds.iter().sum::<f64>() / seconds.len() as f64;
        medians.push(med);
        means.push(mean);
        let (before, after) = (&r["before"], &r["after"]);
        body.push_str(&format!(
            "| {} | {med:.2} s ({min:.2}–{max:.2}) | {mean:.2} s | {:.2} s | {:.0} | {:.2} s | {:.0} MiB | {} / {} → {} / {} |\n",
            r["keys"],
            spread(&cpu).1,
            BATCH as f64 / mean,
            r["cold"].as_f64().unwrap(),
            r["rss_kib"].as_f64().unwrap() / 1024.0,
            before["deletes"],
            before["data"],
            after["deletes"],
            after["data"],
        ));
    }
    if medians.len() == 2 {
        body.push_str(&format!(
            "\nCommit time at 10M keys over 1M: {:.2}× by the median, {:.2}× by the mean (target ≤ 1.5×). Targets: \
             ≥ 50,000 updated keys/s by one committer, ≤ 1 GiB RSS.\n\nReproduce: `cargo bench -p floe-tests --bench upsert`.\n",
            medians[1] / medians[0],
            means[1] / means[0]
        ));
    }
    println!("{body}");
    if partial.is_none() {
        update_benchmarks("upsert", "Upsert tables: the committer's key index", &body);
    }
}
