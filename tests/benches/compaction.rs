//! Compaction benchmark: 1,000 files of about 1 MiB in a local table (SQLite catalog,
//! files in /dev/shm) compacted into 128 MiB files by the core's `compact`, beside the
//! floor — the Parquet reader alone (every input to record batches) plus the Parquet
//! writer alone (the same batches into the same bins' files) on the same data. Also:
//! the compaction's peak RSS, its output sizes against the target, and PyIceberg's full
//! and filtered scans of the table before and after.
//!
//! The compaction and the floor each run in a child process (this binary again, with
//! `--compact` or `--floor`), so that each one's peak RSS (VmHWM) and CPU time are its
//! own. Then another engine deletes a tenth of the rows of a new append's small files
//! (position deletes, written by PyIceberg), and the compaction that applies them is
//! measured beside the same floor.
//!
//! `cargo bench -p floe-tests --bench compaction` — writes its section into BENCHMARKS.md.
//! `FLOE_BENCH_FILES=N` makes a smaller table (a partial run: BENCHMARKS.md is left
//! alone); `FLOE_BENCH_ROUNDS` sets the rounds (3).

#[path = "common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::builder::{Float64Builder, Int64Builder, LargeBinaryBuilder, StringBuilder};
use arrow_array::{ArrayRef, Int32Array, RecordBatch, StructArray, TimestampMicrosecondArray};
use common::{MIB, cpu, cpu_seconds, update_benchmarks};
use floe_core::catalog::sqlite::SqliteCatalog;
use floe_core::committer::{Committer, TaskResult};
use floe_core::datafile::{DataFileWriter, WrittenFile};
use floe_core::maintenance::rewrite::compact;
use floe_core::schema::{PayloadType, table_struct};
use floe_core::table::TableName;
use floe_core::table::compaction::{CompactionPolicy, per_group, plan};
use floe_core::table::snapshot::live_data_files_added;
use floe_core::task::Task;
use floe_core::testing::Rng;
use iceberg::spec::{NestedField, PrimitiveType, Schema, StructType, Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

const FILES: usize = 1000;
const FILE_BYTES: u64 = MIB;
const TOPIC: &str = "orders";
/// Rows per batch, as the materializer writes them.
const BATCH_ROWS: usize = 8192;
/// Rounds of compaction and floor, each pair run back to back.
const ROUNDS: usize = 3;
/// PyIceberg scans per table state.
const SCANS: usize = 7;

fn table() -> TableName {
    TableName { namespace: "kafka".into(), name: TOPIC.into() }
}

fn files() -> usize {
    std::env::var("FLOE_BENCH_FILES").ok().and_then(|n| n.parse().ok()).unwrap_or(FILES)
}

/// The table's schema: Floe's layout for a JSON record value of eight fields.
fn schema() -> Schema {
    let p = |name: &str, t| Arc::new(NestedField::optional(0, name, Type::Primitive(t)));
    let value = StructType::new(vec![
        p("order_id", PrimitiveType::Long),
        p("customer", PrimitiveType::String),
        p("region", PrimitiveType::String),
        p("amount", PrimitiveType::Double),
        p("currency", PrimitiveType::String),
        p("status", PrimitiveType::String),
        p("created_at", PrimitiveType::Timestamptz),
        p("note", PrimitiveType::String),
    ]);
    let source = table_struct(&PayloadType::Raw, &PayloadType::Record(value)).unwrap();
    floe_core::schema::plan(None, &source).unwrap().schema
}

const REGIONS: [&str; 8] =
    ["eu-west", "eu-central", "us-east", "us-west", "ap-south", "ap-east", "sa-east", "af-south"];
const STATUSES: [&str; 5] = ["created", "paid", "shipped", "delivered", "cancelled"];
const CURRENCIES: [&str; 4] = ["EUR", "USD", "GBP", "JPY"];
const WORDS: [&str; 16] = [
    "fragile", "gift", "express", "leave", "at", "door", "call", "before", "ring", "twice", "back", "office",
    "invoice", "attached", "no", "plastic",
];
/// Milliseconds of 2026-01-01.
const EPOCH_MS: i64 = 1_767_225_600_000;

/// Rows of offsets `first..first + n` as the table's Arrow batch: new values in every
/// row (ids and amounts, customers of 100,000, a note of words and a reference number).
fn rows(arrow: &arrow::datatypes::SchemaRef, rng: &mut Rng, first: i64, n: usize) -> RecordBatch {
    let offsets: Vec<i64> = (first..first + n as i64).collect();
    let created: Vec<i64> = offsets.iter().map(|o| (EPOCH_MS + o * 20 + rng.below(20) as i64) * 1000).collect();
    let mut key = LargeBinaryBuilder::new();
    let (mut order_id, mut amount) = (Int64Builder::new(), Float64Builder::new());
    let (mut customer, mut region, mut currency, mut status, mut note) =
        (StringBuilder::new(), StringBuilder::new(), StringBuilder::new(), StringBuilder::new(), StringBuilder::new());
    for o in &offsets {
        let id = 10_000_000 + o;
        key.append_value(id.to_string());
        order_id.append_value(id);
        customer.append_value(format!("cust-{:06}", rng.below(100_000)));
        region.append_value(REGIONS[rng.below(8) as usize]);
        amount.append_value(rng.below(10_000_000) as f64 / 100.0);
        currency.append_value(CURRENCIES[rng.below(4) as usize]);
        status.append_value(STATUSES[rng.below(5) as usize]);
        let words: Vec<&str> = (0..3 + rng.below(6)).map(|_| WORDS[rng.below(16) as usize]).collect();
        note.append_value(format!("{} ref {:x}", words.join(" "), rng.next_u64()));
    }
    let arrow::datatypes::DataType::Struct(kafka) = arrow.field(0).data_type().clone() else { unreachable!() };
    let kafka_columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(vec![0; n])),
        Arc::new(arrow_array::Int64Array::from(offsets.clone())),
        Arc::new(TimestampMicrosecondArray::from(created.iter().map(|c| c + 3_000).collect::<Vec<_>>())),
        Arc::new(arrow_array::StringArray::from(vec!["create"; n])),
        arrow_array::new_null_array(kafka[4].data_type(), n),
        Arc::new(key.finish()),
    ];
    let value_columns: Vec<ArrayRef> = vec![
        Arc::new(order_id.finish()),
        Arc::new(customer.finish()),
        Arc::new(region.finish()),
        Arc::new(amount.finish()),
        Arc::new(currency.finish()),
        Arc::new(status.finish()),
        Arc::new(TimestampMicrosecondArray::from(created)),
        Arc::new(note.finish()),
    ];
    let cast = |c: &ArrayRef, f: &arrow::datatypes::FieldRef| arrow::compute::cast(c, f.data_type()).unwrap();
    let kafka_columns = kafka_columns.iter().zip(kafka.iter()).map(|(c, f)| cast(c, f)).collect();
    let mut columns: Vec<ArrayRef> = vec![Arc::new(StructArray::new(kafka, kafka_columns, None))];
    columns.extend(value_columns.iter().zip(arrow.fields().iter().skip(1)).map(|(c, f)| cast(c, f)));
    RecordBatch::try_new(arrow.clone(), columns).unwrap()
}

/// One small file as the materializer writes it (one segment's rows), `rows` rows
/// from offset `first`, in batches of [`BATCH_ROWS`].
async fn small_file(dir: &str, schema: &Arc<Schema>, rng: &mut Rng, first: i64, rows_n: usize) -> WrittenFile {
    let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(schema).unwrap());
    let file_io = floe_core::storage::local_file_io();
    let mut writer = DataFileWriter::new(file_io, dir, 0, format!("seg{first}"), schema.clone(), 1 << 30);
    let mut offset = first;
    while offset < first + rows_n as i64 {
        let n = BATCH_ROWS.min((first + rows_n as i64 - offset) as usize);
        writer.write(&rows(&arrow, rng, offset, n), offset, offset + n as i64 - 1).await.unwrap();
        offset += n as i64;
    }
    writer.close().await.unwrap().remove(0)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

fn committer(warehouse: &Path) -> Committer {
    common::shared::committer::local_committer(warehouse, "bench").with_lease_ttl(Duration::from_secs(600))
}

/// Rows per file for about [`FILE_BYTES`], measured on a first file.
async fn rows_per_file(warehouse: &Path) -> usize {
    let dir = warehouse.join("probe").display().to_string();
    let probe = small_file(&dir, &Arc::new(schema()), &mut Rng(1), 0, 10_000).await;
    std::fs::remove_dir_all(&dir).unwrap();
    (10_000 * FILE_BYTES / probe.data_file.file_size_in_bytes()) as usize
}

/// Appends `files()` small files of `rows` rows to the table (created by the first
/// commit), the `round`-th such append, committed 100 at a time.
async fn append_files(warehouse: &Path, round: usize, rows: usize) {
    let schema = Arc::new(schema());
    let dir = format!("{}/data", floe_core::table::table_location(&warehouse.display().to_string(), &table()));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 + round as u64);
    let committer = committer(warehouse);
    let mut tasks = Vec::new();
    for i in round * files()..(round + 1) * files() {
        let file = small_file(&dir, &schema, &mut rng, (i * rows) as i64, rows).await;
        tasks.push(common::file_task((&table(), TOPIC), &schema, &file, format!("bench-{i}"), None));
        if tasks.len() == 100 || i + 1 == (round + 1) * files() {
            let report = committer.commit(&tasks, None).await;
            assert!(report.results.iter().all(|(_, r)| *r == TaskResult::Committed), "{:?}", report.results);
            tasks.clear();
        }
    }
}

/// The policy and clock of every run: the default (128 MiB, 15 minutes), an hour on.
fn policy() -> (CompactionPolicy, i64) {
    (CompactionPolicy::default(), now_ms() + 3_600_000)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

async fn load(warehouse: &Path) -> floe_core::table::LoadedTable {
    let catalog = SqliteCatalog::open(&warehouse.join("catalog.db"), "floe").unwrap();
    floe_core::table::load(&catalog, &floe_core::storage::local_file_io(), &table()).await.unwrap().unwrap()
}

/// The child: one `compact` of the table (one group: one task), its task written to `out`; prints its
/// seconds, CPU seconds and peak RSS as JSON.
fn compact_child(warehouse: &Path, out: &Path) {
    let rt = runtime();
    let loaded = rt.block_on(load(warehouse));
    let (policy, now) = policy();
    let file_io = floe_core::storage::local_file_io();
    let (cpu, start) = (cpu_seconds(), Instant::now());
    let tasks = rt.block_on(compact(&file_io, &table(), &loaded.metadata, policy, now)).unwrap();
    let (seconds, cpu) = (start.elapsed().as_secs_f64(), cpu_seconds() - cpu);
    let [task]: [_; 1] = tasks.try_into().expect("one Kafka partition, unpartitioned: one group, one task");
    std::fs::write(out, Task::Compaction(Box::new(task)).to_json().unwrap()).unwrap();
    println!("{}", serde_json::json!({"seconds": seconds, "cpu": cpu, "rss_kib": common::peak_rss_kib()}));
}

/// The bins `compact` rewrites: their input paths.
async fn bins(warehouse: &Path) -> Vec<Vec<String>> {
    let loaded = load(warehouse).await;
    let file_io = floe_core::storage::local_file_io();
    let live = live_data_files_added(&file_io, &loaded.metadata).await.unwrap();
    let (policy, now) = policy();
    per_group(plan(live, loaded.metadata.current_schema(), policy, now))
        .iter()
        .map(|b| b.files.iter().map(|f| f.file_path().trim_start_matches("file://").to_string()).collect())
        .collect()
}

/// Input files whose batches the floor's writer takes at a time (their rows in memory).
const FLOOR_SLICE: usize = 64;

fn read(path: &str) -> parquet::arrow::arrow_reader::ParquetRecordBatchReader {
    ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap())
        .unwrap()
        .with_batch_size(BATCH_ROWS)
        .build()
        .unwrap()
}

/// The child: the floor on the same bins — the Parquet reader alone (every input to
/// record batches, dropped) and, per group, the writer alone (the group's batches, read
/// beforehand a slice of [`FLOOR_SLICE`] files at a time, into files rolled at the
/// target by one writer per group); prints the CPU seconds of each as JSON.
fn floor_child(warehouse: &Path, out: &Path) {
    let rt = runtime();
    let bins = rt.block_on(bins(warehouse));
    let schema = rt.block_on(load(warehouse)).metadata.current_schema().clone();
    let (policy, _) = policy();
    let (mut read_cpu, mut write_cpu) = (0.0, 0.0);
    for (i, bin) in bins.iter().enumerate() {
        let start = cpu_seconds();
        for path in bin {
            for batch in read(path) {
                drop(batch.unwrap());
            }
        }
        read_cpu += cpu_seconds() - start;
        let file_io = floe_core::storage::local_file_io();
        let dir = out.display().to_string();
        let mut writer = DataFileWriter::new(file_io, dir, 0, format!("floor{i}"), schema.clone(), policy.target);
        for slice in bin.chunks(FLOOR_SLICE) {
            let batches: Vec<RecordBatch> = slice.iter().flat_map(|p| read(p).map(|b| b.unwrap())).collect();
            let start = cpu_seconds();
            rt.block_on(async {
                for b in &batches {
                    writer.write(b, 0, 0).await.unwrap();
                }
            });
            write_cpu += cpu_seconds() - start;
        }
        let start = cpu_seconds();
        rt.block_on(writer.close()).unwrap();
        write_cpu += cpu_seconds() - start;
    }
    std::fs::remove_dir_all(out).unwrap();
    println!("{}", serde_json::json!({"read": read_cpu, "write": write_cpu}));
}

fn child(args: &[&str]) -> serde_json::Value {
    let out = Command::new(std::env::current_exe().unwrap()).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(out.stdout.trim_ascii()).unwrap()
}

fn scans(warehouse: &Path, filter: &str) -> serde_json::Value {
    let (db, dir) = (warehouse.join("catalog.db"), warehouse.display().to_string());
    let printed = common::python_output(
        "scan_iceberg.py",
        &[db.to_str().unwrap(), &dir, "kafka.orders", &SCANS.to_string(), filter],
    );
    serde_json::from_str(printed.trim()).unwrap()
}

/// The sizes of a compaction's outputs, MiB.
fn output_sizes(task: &floe_core::task::CompactionTask) -> Vec<f64> {
    task.added.iter().map(|f| f.data_file["file_size_in_bytes"].as_f64().unwrap() / MIB as f64).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn spread(v: &[f64]) -> (f64, f64, f64) {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(0.0, f64::max);
    (min, median(v.to_vec()), max)
}

/// "median (min–max)" of seconds, as ms.
fn ms(seconds: &serde_json::Value) -> String {
    let v: Vec<f64> = seconds.as_array().unwrap().iter().map(|s| s.as_f64().unwrap() * 1e3).collect();
    let (min, med, max) = spread(&v);
    format!("{med:.0} ms ({min:.0}–{max:.0})")
}

/// `rounds` rounds of a compaction (a child: its task written to `task_json`, not
/// committed) followed by its floor (a child) on the table at `warehouse`: each one's
/// JSON, the floor's CPU over the compaction's per round, and the last round's task.
fn measure(
    rounds: usize,
    warehouse: &Path,
    task_json: &Path,
) -> (Vec<serde_json::Value>, Vec<serde_json::Value>, Vec<f64>, floe_core::task::CompactionTask) {
    let w = warehouse.display().to_string();
    let (mut compaction, mut floor, mut per_round) = (Vec::new(), Vec::new(), Vec::new());
    let mut task: Option<Task> = None;
    for round in 0..rounds {
        // The outputs of an earlier round are orphans: gone before the next.
        if let Some(Task::Compaction(t)) = task.take() {
            t.added.iter().for_each(|f| std::fs::remove_file(f.path().trim_start_matches("file://")).unwrap());
        }
        let c = child(&["--compact", &w, task_json.to_str().unwrap()]);
        task = Some(Task::from_json(&std::fs::read(task_json).unwrap()).unwrap());
        let f = child(&["--floor", &w, warehouse.join("floor").to_str().unwrap()]);
        let (c_cpu, f_cpu) = (c["cpu"].as_f64().unwrap(), f["read"].as_f64().unwrap() + f["write"].as_f64().unwrap());
        eprintln!("round {round}: compaction {c} floor {f}");
        per_round.push(f_cpu / c_cpu);
        compaction.push(c);
        floor.push(f);
    }
    let Some(Task::Compaction(task)) = task else { panic!("no round") };
    (compaction, floor, per_round, *task)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("--compact") => return compact_child(Path::new(&args[2]), Path::new(&args[3])),
        Some("--floor") => return floor_child(Path::new(&args[2]), Path::new(&args[3])),
        _ => {}
    }
    let rounds = std::env::var("FLOE_BENCH_ROUNDS").ok().and_then(|n| n.parse().ok()).unwrap_or(ROUNDS);
    // In memory where the machine has it: the benchmark measures CPU, not the disk.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
    let warehouse: PathBuf = dir.path().to_path_buf();
    let started = Instant::now();
    let rows_per_file = runtime().block_on(rows_per_file(&warehouse));
    runtime().block_on(append_files(&warehouse, 0, rows_per_file));
    eprintln!("table of {} files made in {:.1} s", files(), started.elapsed().as_secs_f64());
    let rows = (rows_per_file * files()) as i64;
    // A 1% range of order ids in the middle of the table.
    let filter = format!("order_id >= {} and order_id < {}", 10_000_000 + rows / 2, 10_000_000 + rows / 2 + rows / 100);
    let before = scans(&warehouse, &filter);

    let bins = runtime().block_on(bins(&warehouse));
    let bytes_in: u64 = bins.iter().flatten().map(|p| std::fs::metadata(p).unwrap().len()).sum();
    let files_in: usize = bins.iter().map(Vec::len).sum();
    let mib_in = bytes_in as f64 / MIB as f64;
    let (w, task_json) = (warehouse.display().to_string(), warehouse.join("task.json"));
    let (compaction, floor, per_round, task) = measure(rounds, &warehouse, &task_json);
    let sizes = output_sizes(&task);
    let rss = compaction.iter().map(|c| c["rss_kib"].as_f64().unwrap() / 1024.0).collect::<Vec<_>>();
    let c_cpu: Vec<f64> = compaction.iter().map(|c| c["cpu"].as_f64().unwrap()).collect();
    let c_wall: Vec<f64> = compaction.iter().map(|c| c["seconds"].as_f64().unwrap()).collect();
    let f_read: Vec<f64> = floor.iter().map(|f| f["read"].as_f64().unwrap()).collect();
    let f_write: Vec<f64> = floor.iter().map(|f| f["write"].as_f64().unwrap()).collect();
    let f_cpu: Vec<f64> = f_read.iter().zip(&f_write).map(|(r, w)| r + w).collect();
    let report = runtime().block_on(committer(&warehouse).compact(std::slice::from_ref(&task), None));
    assert_eq!(report.results[0].1, TaskResult::Committed);
    let after = scans(&warehouse, &filter);
    assert_eq!(before["full"]["rows"], after["full"]["rows"]);
    assert_eq!(before["filtered"]["rows"], after["filtered"]["rows"]);
    // As many files again, and a second compaction: the table now has large files.
    runtime().block_on(append_files(&warehouse, 1, rows_per_file));
    let second_run = child(&["--compact", &w, task_json.to_str().unwrap()]);
    let Task::Compaction(second) = Task::from_json(&std::fs::read(&task_json).unwrap()).unwrap() else {
        unreachable!()
    };
    let (second_in, second_sizes) = (second.removed.len(), output_sizes(&second));
    let second_mib: f64 = second
        .removed
        .iter()
        .map(|p| std::fs::metadata(p.trim_start_matches("file://")).unwrap().len() as f64 / MIB as f64)
        .sum();

    // Another engine deletes a tenth of the rows of each of the new small files (a
    // position delete file each); a compaction applies them, beside the floor.
    let db = warehouse.join("catalog.db");
    let small = (4 * MIB).to_string();
    let args = [db.to_str().unwrap(), &w, "kafka.orders", "position-every", "10", &small];
    common::python_output("foreign_delete.py", &args);
    let (deleting, deleting_floor, deleting_rounds, deleting_task) = measure(rounds, &warehouse, &task_json);
    let deleted_rows = deleting_task.left_out.as_ref().map_or(0, |l| l.deleted);
    let deleting_mib: f64 = deleting_task
        .removed
        .iter()
        .map(|p| std::fs::metadata(p.trim_start_matches("file://")).unwrap().len() as f64 / MIB as f64)
        .sum();

    let mibs = |cpu: &[f64]| {
        let (min, med, max) = spread(&cpu.iter().map(|s| mib_in / s).collect::<Vec<_>>());
        format!("{med:.1} ({min:.1}–{max:.1})")
    };
    let (r_min, r_med, r_max) = spread(&per_round);
    let (rss_min, rss_med, rss_max) = spread(&rss);
    let target = CompactionPolicy::default().target as f64 / MIB as f64;
    let list = |sizes: &[f64]| sizes.iter().map(|s| format!("{s:.1}")).collect::<Vec<_>>().join(", ");
    let mut body = format!(
        "Measured by `cargo bench -p floe-tests --bench compaction` (release; CPU: {cpu}; files in\n\
         /dev/shm; a shared 2-core VM). A local table (SQLite catalog) of {files} files of about 1 MiB\n\
         ({rows_per_file} rows each, {total_rows} rows, {mib_in:.0} MiB): Floe's layout for a JSON record of\n\
         eight fields (ids, a customer of 100,000, region, amount, currency, status, a timestamp, a\n\
         note of words and a random reference), new values in every row, written by the core's writer\n\
         as the materializer does (zstd, 8,192-row batches), committed 100 tasks a commit. The\n\
         compaction is `compact` (plan, then `rewrite_applying` per group of bins) on a current-thread runtime in a\n\
         child process, default policy (128 MiB target, cap +10%), the clock an hour on so every file\n\
         is past the window. The floor, in another child, on the same bins: the Parquet reader alone\n\
         (parquet's reader, every input file to record batches, dropped) plus the writer alone (the\n\
         core's Parquet writer, the same batches, read beforehand, into files rolled at the same target).\n\
         MiB/s are of input bytes per CPU second (user + system, every thread: per core). {rounds} rounds,\n\
         each compaction followed by its floor; median (min–max).\n\n\
         | measure | value | target |\n|---|---|---|\n",
        cpu = cpu(),
        files = files_in,
        total_rows = rows,
    );
    body.push_str(&format!("| compaction, MiB/s per core | {} | — |\n", mibs(&c_cpu)));
    body.push_str(&format!(
        "| compaction, wall seconds | {:.1} ({:.1}–{:.1}) | — |\n",
        spread(&c_wall).1,
        spread(&c_wall).0,
        spread(&c_wall).2
    ));
    body.push_str(&format!("| floor (reader + writer alone), MiB/s per core | {} | — |\n", mibs(&f_cpu)));
    body.push_str(&format!("| reader alone, MiB/s per core | {} | — |\n", mibs(&f_read)));
    body.push_str(&format!("| writer alone, MiB/s per core | {} | — |\n", mibs(&f_write)));
    body.push_str(&format!(
        "| compaction / floor, per round | **{:.0}%** ({:.0}–{:.0}%) | ≥ 70% |\n",
        r_med * 100.0,
        r_min * 100.0,
        r_max * 100.0
    ));
    body.push_str(&format!(
        "| peak RSS of the compaction (VmHWM of its process) | **{rss_med:.0} MiB** ({rss_min:.0}–{rss_max:.0}) | < 256 MiB |\n"
    ));
    body.push_str(&format!(
        "| output files (MiB), target {target:.0} MiB, the table's first compaction (no large file yet) | {} files: {} | within 10% of the target but one tail |\n",
        sizes.len(),
        list(&sizes)
    ));
    body.push_str(&format!(
        "| the same, a second compaction after {} more small files ({second_in} files in, the first's tail among them) | {} files: {} | within 10% of the target but one tail |\n",
        files(),
        second_sizes.len(),
        list(&second_sizes)
    ));
    body.push_str(&format!(
        "| the second compaction: MiB/s per core, peak RSS (one run) | {:.1}, **{:.0} MiB** | < 256 MiB |\n",
        second_mib / second_run["cpu"].as_f64().unwrap(),
        second_run["rss_kib"].as_f64().unwrap() / 1024.0
    ));
    body.push_str(&format!(
        "\nWhat compaction buys the reader: PyIceberg ({SCANS} scans each; the table loaded anew\n\
         each time, the rows streamed as Arrow batches and counted; `tests/py/scan_iceberg.py`),\n\
         before and after the compaction is committed. The filtered scan keeps a 1% range of\n\
         `order_id` (`{filter}`), which the files' bounds prune.\n\n\
         | scan | rows | files before | before | files after | after |\n|---|---|---|---|---|---|\n"
    ));
    for label in ["full", "filtered"] {
        let (b, a) = (&before[label], &after[label]);
        body.push_str(&format!(
            "| {label} | {} | {} | {} | {} | {} |\n",
            b["rows"],
            b["files"],
            ms(&b["seconds"]),
            a["files"],
            ms(&a["seconds"])
        ));
    }
    let (d_min, d_med, d_max) = spread(&deleting_rounds);
    let d_rss = spread(&deleting.iter().map(|c| c["rss_kib"].as_f64().unwrap() / 1024.0).collect::<Vec<_>>());
    let d_cpu: Vec<f64> = deleting.iter().map(|c| c["cpu"].as_f64().unwrap()).collect();
    let d_floor: Vec<f64> =
        deleting_floor.iter().map(|f| f["read"].as_f64().unwrap() + f["write"].as_f64().unwrap()).collect();
    let per_core = |cpu: &[f64]| {
        let (min, med, max) = spread(&cpu.iter().map(|s| deleting_mib / s).collect::<Vec<_>>());
        format!("{med:.1} ({min:.1}–{max:.1})")
    };
    body.push_str(&format!(
        "\nApplying other engines' deletes: after the second compaction (not committed), PyIceberg adds\n\
         a position delete file for each of the {} new small files, deleting every tenth row\n\
         (`tests/py/foreign_delete.py position-every 10`); the compaction reads them and leaves\n\
         those rows out, beside the same floor (reader + writer alone, no deletes) on the same bins.\n\
         {rounds} rounds, median (min–max).\n\n\
         | measure | value | target |\n|---|---|---|\n\
         | rows left out, delete files applied | {deleted_rows}, {} | a tenth of the rows |\n\
         | compaction applying deletes, MiB/s per core | {} | — |\n\
         | floor, MiB/s per core | {} | — |\n\
         | compaction applying deletes / floor, per round | **{:.0}%** ({:.0}–{:.0}%) | ≥ 60% |\n\
         | peak RSS of the compaction applying deletes | **{:.0} MiB** ({:.0}–{:.0}) | < 256 MiB |\n",
        files(),
        deleting_task.deletes_applied.len(),
        per_core(&d_cpu),
        per_core(&d_floor),
        d_med * 100.0,
        d_min * 100.0,
        d_max * 100.0,
        d_rss.1,
        d_rss.0,
        d_rss.2,
    ));
    print!("{body}");
    if files() == FILES {
        update_benchmarks("compaction", "Compaction", &body);
    }
}
