//! Segment → Parquet benchmark: the whole materializer core (decode, convert, encode,
//! write) on one core, next to the Parquet encoder alone writing the same Arrow batches,
//! and the compaction of its files (read, rewritten with zstd) after it. The Python
//! Lambda writes the same codec as the materializer's fresh files and is compacted the
//! same way, by pyarrow.
//! Targets (BENCHMARKS.md, Targets): the pipeline at ≥ 70% of the encoder's speed, and ≥ 10× a Python
//! Lambda doing the same job per CPU second (user + system time of every thread, each side).
//! Peak RSS per format, each side in a process of its own that reports its VmHWM: the
//! Python Lambda, and the pipeline run once in this binary started again ([`CHILD`]),
//! which holds none of the benchmark's buffers.
//!
//! `cargo bench -p floe-tests --bench convert` — writes its table into BENCHMARKS.md.

#[path = "common/mod.rs"]
mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::RecordBatch;
use common::{MIB, cpu, cpu_seconds, tile, update_benchmarks};
use floe_core::columns::RecordConverter;
use floe_core::config::FloeConfig;
use floe_core::datafile::{DataFileWriter, FRESH_CODEC, Pages, WriterOptions, is_fresh};
use floe_core::formats::Formats;
use floe_core::materializer::segment::{
    BATCH_ROWS, BATCHES_PER_FILE, MaterializeOptions, materialize_segment, table_pages,
};
use floe_core::segment::{FileSource, Limits, SegmentReader};
use floe_core::table::compaction::CompactionPolicy;
use floe_core::table::rewrite::rewrite_files;

const SEGMENT: u64 = 128 * MIB;

/// The segment size: [`SEGMENT`], or `FLOE_BENCH_MIB` MiB (small runs under a profiler).
fn segment_bytes() -> u64 {
    std::env::var("FLOE_BENCH_MIB").ok().and_then(|m| m.parse::<u64>().ok()).map_or(SEGMENT, |m| m * MIB)
}
const TARGET_FILE: u64 = 128 * MIB;
/// The Python baseline runs on the first `PYTHON_SEGMENT` bytes of the same segment (it is that much slower).
const PYTHON_SEGMENT: u64 = 16 * MIB;

/// A hand-written Python Lambda doing the same job: for Avro (with the schema file), for
/// Protobuf (with the descriptor set, message `shop.Order`), for JSON (with the JSON
/// Schema file), or for raw key/value.
#[derive(Clone, Copy)]
enum Python<'a> {
    Avro(&'a Path),
    Protobuf(&'a Path),
    Json(&'a Path),
    Raw,
}

/// What a run measured of itself: CPU seconds (user + system, every thread) and peak
/// RSS; the compaction of its file: CPU seconds, and the bytes before and after.
struct Run {
    cpu_seconds: f64,
    peak_rss_mib: f64,
    compact_cpu_seconds: f64,
    bytes: f64,
    compacted_bytes: f64,
}

/// The same job by a hand-written Python Lambda (tests/py/python_lambda.py: kafka-python,
/// fastavro, protobuf or json, pyarrow) on `segment`, as it measures itself: CPU seconds
/// from reading the file to the Parquet written (interpreter start-up and imports not
/// counted), and the process's peak RSS (imports included).
/// `codec`: its pages' (pyarrow's name).
fn python_lambda(segment: &Path, out: &Path, lambda: Python<'_>, codec: &str) -> Run {
    let mut args = vec!["--codec", codec, "--compact", segment.to_str().unwrap(), out.to_str().unwrap()];
    match lambda {
        Python::Avro(schema) => args.push(schema.to_str().unwrap()),
        Python::Protobuf(descriptors) => args.extend(["--protobuf", descriptors.to_str().unwrap(), "shop.Order"]),
        Python::Json(schema) => args.extend(["--json", schema.to_str().unwrap()]),
        Python::Raw => {}
    }
    let printed = common::python_output("python_lambda.py", &args);
    let report: serde_json::Value = serde_json::from_str(printed.trim()).expect("python_lambda.py prints JSON");
    let number = |name: &str| report[name].as_f64().unwrap_or_else(|| panic!("{name} in {report}"));
    Run {
        cpu_seconds: number("cpu_seconds"),
        peak_rss_mib: number("peak_rss_mib"),
        compact_cpu_seconds: number("compact_cpu_seconds"),
        bytes: number("bytes"),
        compacted_bytes: number("compacted_bytes"),
    }
}

/// The variable that makes this binary the pipeline's process: a [`ChildJob`] (JSON).
const CHILD: &str = "FLOE_BENCH_CHILD";

/// One pipeline run in a process of its own: the row's `floe.toml`, its segment, where
/// its files go.
#[derive(serde::Serialize, serde::Deserialize)]
struct ChildJob {
    row: String,
    config: String,
    segment: std::path::PathBuf,
    out: std::path::PathBuf,
}

/// The pipeline's process: runs the job once and prints its peak RSS, KiB.
fn child(job: &str) {
    let job: ChildJob = serde_json::from_str(job).expect("the child's job");
    let config = FloeConfig::parse(&job.config).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(pipeline(&job.segment, &config, &job.out));
    println!("{}", common::peak_rss_kib());
}

/// The whole pipeline's peak RSS on `job`'s segment, in a process of its own (this
/// binary again, [`child`]): the process's start-up, the runtime and the pipeline,
/// nothing of the benchmark's.
fn floe_peak_rss_mib(job: &ChildJob) -> f64 {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .env(CHILD, serde_json::to_string(job).unwrap())
        .output()
        .expect("starting the pipeline's process");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}: {}", job.row, String::from_utf8_lossy(&output.stderr));
    printed.trim().parse::<f64>().unwrap_or_else(|_| panic!("{}: {printed}", job.row)) / 1024.0
}

async fn formats(config: &FloeConfig) -> Formats {
    Formats::load(config, &config.resolve("bench").unwrap(), None).await.unwrap()
}

async fn reader(path: &Path) -> SegmentReader {
    SegmentReader::open(Arc::new(FileSource::new(path)), Limits::default()).await.unwrap()
}

/// What a pipeline run did: seconds, CPU seconds (every thread), rows, and its files
/// (their paths and the table schema, for the compaction after it).
struct Piped {
    seconds: f64,
    cpu: f64,
    records: u64,
    files: Vec<(String, u64)>,
    schema: Arc<iceberg::spec::Schema>,
}

/// The pages the materializer writes for the bench topic (fresh files).
fn pages(config: &FloeConfig) -> Pages {
    table_pages(&config.resolve("bench").unwrap(), config.own_maintenance().compaction)
}

/// The whole pipeline.
async fn pipeline(path: &Path, config: &FloeConfig, out: &Path) -> Piped {
    let f = formats(config).await;
    let options = MaterializeOptions {
        topic: config.resolve("bench").unwrap(),
        partition: 0,
        data_dir: out.join("data").display().to_string(),
        dead_letter_dir: out.join("dlq").display().to_string(),
        source_id: "bench".into(),
        partition_spec: Arc::new(iceberg::spec::PartitionSpec::unpartition_spec()),
        pages: pages(config),
    };
    let file_io = iceberg::io::FileIO::new_with_fs();
    let (start, cpu) = (Instant::now(), cpu_seconds());
    let done = materialize_segment(reader(path).await, f.schema, f.key, f.value, &options, &file_io).await.unwrap();
    let (seconds, cpu) = (start.elapsed().as_secs_f64(), cpu_seconds() - cpu);
    let files = done.files.iter().map(|f| (f.path().to_string(), f.data_file.file_size_in_bytes())).collect();
    Piped { seconds, cpu, records: done.records, files, schema: done.schema }
}

/// The compactor's work on a pipeline's files: those it takes (small or fresh) read and
/// written again into zstd files of the compaction target (`rewrite_files`, what a
/// compaction's rewrite runs). Returns CPU seconds, the bytes it took, and the bytes the
/// table's files take after it (those rewritten and those left as they were).
async fn compaction(piped: &Piped, config: &FloeConfig, out: &Path) -> (f64, u64, u64) {
    let policy = CompactionPolicy::from(&config.resolve("bench").unwrap());
    let (taken, left): (Vec<_>, Vec<_>) =
        piped.files.iter().partition(|(path, size)| *size < policy.small() || is_fresh(path));
    let output = WriterOptions {
        file_io: iceberg::io::FileIO::new_with_fs(),
        dir: out.join("compacted").display().to_string(),
        partition: 0,
        source_id: "compacted".into(),
        schema: piped.schema.clone(),
        target_size: policy.target,
        pages: Pages::Zstd,
    };
    let paths: Vec<&str> = taken.iter().map(|(p, _)| p.as_str()).collect();
    let spec = iceberg::spec::PartitionSpec::unpartition_spec();
    let cpu = cpu_seconds();
    let written =
        if paths.is_empty() { Vec::new() } else { rewrite_files(output, &spec, &paths, None, None).await.unwrap() };
    let (kept, took): (u64, u64) = (left.iter().map(|(_, size)| size).sum(), taken.iter().map(|(_, size)| size).sum());
    (cpu_seconds() - cpu, took, kept + written.iter().map(|f| f.data_file.file_size_in_bytes()).sum::<u64>())
}

/// Decodes and converts the segment into the Arrow batches the pipeline makes, each
/// handed to `sink` with its first and last offset; returns the table schema.
async fn convert(
    path: &Path,
    config: &FloeConfig,
    mut sink: impl FnMut(RecordBatch, i64, i64),
) -> Arc<iceberg::spec::Schema> {
    let f = formats(config).await;
    let mut converter = RecordConverter::new(f.schema.clone(), 0, f.key, f.value).unwrap();
    let mut r = reader(path).await;
    while let Some(batch) = r.next_batch().await.unwrap() {
        for record in &batch.records {
            converter.append(&record).unwrap();
            if converter.rows() >= BATCH_ROWS
                || converter.payload_bytes() >= (TARGET_FILE / BATCHES_PER_FILE) as usize
                || converter.offsets_full()
            {
                let (a, b) = converter.offsets().unwrap();
                sink(converter.finish(), a, b);
            }
        }
    }
    if let Some((a, b)) = converter.offsets() {
        sink(converter.finish(), a, b);
    }
    f.schema
}

/// The same Arrow batches the pipeline makes, built beforehand (not timed).
async fn batches(path: &Path, config: &FloeConfig) -> (Arc<iceberg::spec::Schema>, Vec<(RecordBatch, i64, i64)>) {
    let mut out = Vec::new();
    let schema = convert(path, config, |b, first, last| out.push((b, first, last))).await;
    (schema, out)
}

/// The Parquet encoder (and file write) alone on prepared batches, with the pipeline's pages.
async fn encoder(
    schema: Arc<iceberg::spec::Schema>,
    batches: &[(RecordBatch, i64, i64)],
    pages: Pages,
    out: &Path,
) -> f64 {
    let file_io = iceberg::io::FileIO::new_with_fs();
    let mut writer = DataFileWriter::new(file_io, out.join("enc").display().to_string(), 0, "enc", schema, TARGET_FILE)
        .with_pages(pages);
    let start = Instant::now();
    for (b, first, last) in batches {
        writer.write(b, *first, *last).await.unwrap();
    }
    writer.close().await.unwrap();
    start.elapsed().as_secs_f64()
}

fn main() {
    if let Ok(job) = std::env::var(CHILD) {
        return child(&job);
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    // In memory where the machine has it: the benchmark measures CPU, not the disk.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
    // Seeds as large as the segment, so every record is new, as in a real topic (a
    // small seed tiled to size would repeat every value and flatter the encoder's
    // dictionaries); plus a 4 MiB seed tiled, to show that effect. FLOE_BENCH_SEEDS=DIR
    // keeps them in DIR from one run to the next (they take minutes to write).
    let mib = (segment_bytes() / MIB).to_string();
    let seeds =
        std::env::var_os("FLOE_BENCH_SEEDS").map_or_else(|| dir.path().to_path_buf(), |d| Path::new(&d).join(&mib));
    let d = seeds.to_str().unwrap();
    let tiled = seeds.join("tiled");
    if !tiled.join("seed_avro_zstd.log").exists() {
        common::python("make_avro.py", &["--bench-seed", d, &mib]);
        common::python("make_segments.py", &["--bench-seeds", d, &mib, "zstd"]);
        common::python("make_avro.py", &["--bench-seed", tiled.to_str().unwrap(), "4"]);
    }
    let proto = seeds.join("orders_v2.proto");
    if !seeds.join("seed_protobuf_zstd.log").exists() {
        common::python("make_protobuf.py", &["--bench-seed", d, &mib]);
    }
    // The Python Lambda reads the Protobuf schema as a descriptor set (seeds kept from
    // before it was written beside them get it now).
    let descriptors = seeds.join("orders_v2.desc");
    if !descriptors.exists() {
        common::python("make_protobuf.py", &["--schema-files", d]);
    }
    let json_schema = seeds.join("orders.schema.json");
    if !seeds.join("seed_json_zstd.log").exists() {
        common::python("make_json.py", &["--bench-seed", d, &mib]);
    }
    let avsc = seeds.join("orders_v2.avsc");
    let avro_config = format!(
        "[[topics]]\ntopic = \"bench\"\nvalue_format = \"avro\"\nvalue_schema = {{ file = \"{}\" }}\ntarget_file_size = \"128MiB\"\n",
        avsc.display()
    );
    let protobuf_config = format!(
        "[[topics]]\ntopic = \"bench\"\nvalue_format = \"protobuf\"\nvalue_schema = {{ file = \"{}\" }}\nvalue_message = \"shop.Order\"\ntarget_file_size = \"128MiB\"\n",
        proto.display()
    );
    let json_config = format!(
        "[[topics]]\ntopic = \"bench\"\nvalue_format = \"json-schema\"\nvalue_schema = {{ file = \"{}\" }}\ntarget_file_size = \"128MiB\"\n",
        json_schema.display()
    );
    let raw_config = "[defaults]\nenabled = true\n".to_string();
    let avro = "Avro (25 columns, nested, logical types; varied values)";
    let (avro_lambda, raw_lambda) = (Python::Avro(&avsc), Python::Raw);
    let protobuf_lambda = Python::Protobuf(&descriptors);
    let json_lambda = Python::Json(&json_schema);
    let full = segment_bytes();
    let cases = [
        (format!("{avro}, zstd batches"), seeds.join("seed_avro_zstd.log"), &avro_config, avro_lambda, full),
        (format!("{avro}, lz4 batches"), seeds.join("seed_avro_lz4.log"), &avro_config, avro_lambda, full),
        (format!("{avro}, uncompressed batches"), seeds.join("seed_avro_none.log"), &avro_config, avro_lambda, full),
        (
            format!("{avro}, zstd batches, a 4 MiB seed tiled (each value repeats ~30×)"),
            tiled.join("seed_avro_zstd.log"),
            &avro_config,
            avro_lambda,
            full,
        ),
        (
            "Protobuf (37 fields: every scalar type, nested, repeated, maps, oneof, wrappers; varied values), zstd batches"
                .to_string(),
            seeds.join("seed_protobuf_zstd.log"),
            &protobuf_config,
            protobuf_lambda,
            full,
        ),
        (
            "JSON with a JSON Schema (15 fields: timestamps, dates, UUIDs, enum, nested, lists, maps; varied values), zstd batches"
                .to_string(),
            seeds.join("seed_json_zstd.log"),
            &json_config,
            json_lambda,
            full,
        ),
        ("raw key/value (JSON text), zstd batches".to_string(), seeds.join("seed_zstd.log"), &raw_config, raw_lambda, full),
        (
            format!("raw key/value (JSON text), zstd batches, a {} MiB segment (its rows fit in a fresh file)", full / 4 / MIB),
            seeds.join("seed_zstd.log"),
            &raw_config,
            raw_lambda,
            full / 4,
        ),
    ];
    let (mut rows, mut compacting_rows) = (Vec::new(), Vec::new());
    // FLOE_BENCH_ONLY=<part of a label>: only the matching inputs.
    let only = std::env::var("FLOE_BENCH_ONLY").unwrap_or_default();
    for (label, seed, toml, lambda, size) in cases.iter().filter(|(label, ..)| label.contains(&only)) {
        let config = FloeConfig::parse(toml).unwrap();
        let path = dir.path().join("bench.log");
        let seed = std::fs::read(seed).unwrap();
        tile(&seed, *size, &path);
        let bytes = std::fs::metadata(&path).unwrap().len() as f64 / MIB as f64;
        let (schema, prepared) = rt.block_on(batches(&path, &config));
        // For a profiler: FLOE_BENCH_PROFILE=convert runs only the decode + convert phase
        // (keeping the batches, as the table's column measures it), =decode the same
        // dropping each batch as it comes (as in the pipeline), =pipeline only the whole
        // pipeline, =encoder only the encoder on the prepared batches; on the first input
        // chosen, FLOE_BENCH_ROUNDS times (3). FLOE_PERF_CTL=FIFO: the control FIFO of a
        // `perf record -D -1 --control fifo:FIFO`, enabled for the timed rounds only.
        if let Ok(phase) = std::env::var("FLOE_BENCH_PROFILE") {
            let rounds = std::env::var("FLOE_BENCH_ROUNDS").ok().and_then(|n| n.parse().ok()).unwrap_or(3);
            if let Some(fifo) = std::env::var_os("FLOE_PERF_CTL") {
                std::fs::write(fifo, "enable\n").unwrap();
            }
            for _ in 0..rounds {
                let (start, cpu) = (Instant::now(), cpu_seconds());
                match phase.as_str() {
                    "decode" => drop(rt.block_on(convert(&path, &config, |b, _, _| drop(b)))),
                    "pipeline" => drop(rt.block_on(pipeline(&path, &config, &dir.path().join("profile")))),
                    "encoder" => {
                        rt.block_on(encoder(schema.clone(), &prepared, pages(&config), &dir.path().join("profile")));
                    }
                    _ => drop(rt.block_on(batches(&path, &config))),
                }
                let (seconds, cpu) = (start.elapsed().as_secs_f64(), cpu_seconds() - cpu);
                println!("{label}: {phase} {seconds:.3}s, {cpu:.3} CPU s, {:.1} MiB per CPU s", bytes / cpu);
            }
            return;
        }
        let (mut best_pipe, mut best_enc, mut best_dec, mut records) = (f64::MAX, f64::MAX, f64::MAX, 0);
        // The pipeline's MiB per CPU second, each round; and with the compaction of its
        // files; its files' bytes and the compaction's.
        let (mut per_cpu, mut with_compaction, mut fresh_bytes, mut compacted_bytes) = (Vec::new(), Vec::new(), 0, 0);
        // The share of the files compaction takes, and whether they were fresh.
        let (mut taken_share, mut fresh) = (0.0, false);
        // Each round's encoder time over its pipeline time: measured back to back, so a
        // slower or faster phase of the shared machine touches both.
        let mut paired = Vec::new();
        for round in 0..5 {
            let start = Instant::now();
            drop(rt.block_on(batches(&path, &config)));
            best_dec = best_dec.min(start.elapsed().as_secs_f64());
            let out = dir.path().join(format!("out{round}"));
            let piped = rt.block_on(pipeline(&path, &config, &out));
            let t = piped.seconds;
            best_pipe = best_pipe.min(t);
            per_cpu.push(bytes / piped.cpu);
            records = piped.records;
            let (compact_cpu, taken, compacted) = rt.block_on(compaction(&piped, &config, &out));
            with_compaction.push(bytes / (piped.cpu + compact_cpu));
            fresh_bytes = piped.files.iter().map(|(_, b)| b).sum();
            taken_share = taken as f64 / fresh_bytes.max(1) as f64;
            fresh = piped.files.iter().any(|(path, _)| is_fresh(path));
            compacted_bytes = compacted;
            let e = rt.block_on(encoder(schema.clone(), &prepared, pages(&config), &out));
            best_enc = best_enc.min(e);
            paired.push(e / t * 100.0);
            std::fs::remove_dir_all(&out).unwrap();
        }
        let ratio = best_enc / best_pipe * 100.0;
        paired.sort_by(f64::total_cmp);
        let (median, low, high) = (paired[paired.len() / 2], paired[0], paired[paired.len() - 1]);
        per_cpu.sort_by(f64::total_cmp);
        with_compaction.sort_by(f64::total_cmp);
        // The Python Lambda's MiB per CPU second, each of 3 runs.
        let small = dir.path().join("python.log");
        tile(&seed, PYTHON_SEGMENT.min(segment_bytes()), &small);
        let small_mib = std::fs::metadata(&small).unwrap().len() as f64 / MIB as f64;
        // The Python Lambda writes the pages the materializer wrote for this segment.
        let codec = if fresh { FRESH_CODEC.to_string() } else { "zstd".to_string() }.to_lowercase();
        let python_runs: Vec<Run> =
            (0..3).map(|_| python_lambda(&small, &dir.path().join("python.parquet"), *lambda, &codec)).collect();
        let mut python: Vec<f64> = python_runs.iter().map(|r| small_mib / r.cpu_seconds).collect();
        python.sort_by(f64::total_cmp);
        // Its compaction counted for the share of the bytes the compactor took of Floe's.
        let mut python_compacting: Vec<f64> =
            python_runs.iter().map(|r| small_mib / (r.cpu_seconds + taken_share * r.compact_cpu_seconds)).collect();
        python_compacting.sort_by(f64::total_cmp);
        // Bytes per MiB of segment: the fresh files, and once compacted.
        let python_sizes = (
            python_runs[0].bytes / MIB as f64 / small_mib,
            (python_runs[0].bytes + taken_share * (python_runs[0].compacted_bytes - python_runs[0].bytes))
                / MIB as f64
                / small_mib,
        );
        let python_rss = python_runs.iter().map(|r| r.peak_rss_mib).fold(0.0, f64::max);
        // The pipeline's peak RSS on the whole segment, and on the Python Lambda's.
        let job = |segment: &Path| ChildJob {
            row: label.clone(),
            config: toml.to_string(),
            segment: segment.to_path_buf(),
            out: dir.path().join("child"),
        };
        let (floe_rss, floe_rss_small) = (floe_peak_rss_mib(&job(&path)), floe_peak_rss_mib(&job(&small)));
        std::fs::remove_dir_all(dir.path().join("child")).unwrap();
        let mid = |v: &[f64]| v[v.len() / 2];
        let (floe_cpu, python_cpu) = (mid(&per_cpu), mid(&python));
        // The ratio of the medians, and its range: the slowest Floe round against the
        // fastest Python run, and the other way round.
        let spread = |floe: &[f64], python: &[f64]| {
            (mid(floe) / mid(python), floe[0] / python[python.len() - 1], floe[floe.len() - 1] / python[0])
        };
        let (versus, versus_low, versus_high) = spread(&per_cpu, &python);
        let (both, both_low, both_high) = spread(&with_compaction, &python_compacting);
        let floe_sizes = (fresh_bytes as f64 / MIB as f64 / bytes, compacted_bytes as f64 / MIB as f64 / bytes);
        println!(
            "{label}: pipeline {best_pipe:.2}s, encoder alone {best_enc:.2}s → {ratio:.0}% (rounds {median:.0}%, {low:.0}–{high:.0}%; decode + convert alone {best_dec:.2}s); per CPU second: pipeline {floe_cpu:.1} MiB, Python Lambda {python_cpu:.1} MiB → {versus:.1}× ({versus_low:.1}–{versus_high:.1}×); peak RSS: pipeline {floe_rss:.0} MiB ({floe_rss_small:.0} MiB on Python's segment), Python Lambda {python_rss:.0} MiB"
        );
        compacting_rows.push(format!(
            "| {label} | {:.1} | {:.1} | **{both:.1}×** ({both_low:.1}–{both_high:.1}×) | {:.2} → {:.2} | {:.2} → {:.2} |",
            mid(&with_compaction),
            mid(&python_compacting),
            floe_sizes.0,
            floe_sizes.1,
            python_sizes.0,
            python_sizes.1,
        ));
        rows.push(format!(
            "| {label} | {bytes:.0} | {records} | {:.1} | {:.1} | {:.1} | **{ratio:.0}%** | {median:.0}% ({low:.0}–{high:.0}%) | {floe_cpu:.1} | {python_cpu:.1} | **{versus:.1}×** ({versus_low:.1}–{versus_high:.1}×) | {floe_rss:.0} ({floe_rss_small:.0}) | {python_rss:.0} |",
            bytes / best_pipe,
            bytes / best_enc,
            bytes / best_dec,
        ));
    }
    let fresh_mib = match pages(&FloeConfig::parse(&raw_config).unwrap()) {
        Pages::Fresh { small } => Pages::fresh_limit(small) / MIB,
        Pages::Zstd => 0,
    };
    let section = format!(
        "Measured by `cargo bench -p floe-tests --bench convert` (release, files in\n\
         /dev/shm; CPU: {}; a shared 2-core VM, so wall-clock runs vary by ±20%). A {} MiB\n\
         segment through the whole materializer core on one thread — decode, convert to\n\
         Arrow, Parquet encode, write — next to the Parquet encoder alone writing\n\
         the same Arrow batches, built beforehand, with the same pages, and next to decode + convert alone\n\
         (segment → Arrow batches kept in memory, no Parquet). MiB/s are of segment bytes\n\
         per wall second, best of 5, and the ratio of the bests. As the machine's speed\n\
         drifts, the ratio is also given per round (the encoder right after the pipeline):\n\
         the median of the 5 rounds, and their range.\n\
         The segments are written by kafka-python, the Avro values by fastavro, and every\n\
         record is new: ids and UUIDs unique, numbers and text random, as in a real topic\n\
         (dates, times and addresses cycle through 200 values);\n\
         one row shows the same records from a 4 MiB seed tiled to size instead, where\n\
         every value repeats. The Avro rows hold the same records in three batch codecs\n\
         (so the MiB hold different record counts).\n\
         The Python Lambda is the same job hand-written in Python (`tests/py/python_lambda.py`:\n\
         kafka-python reads the batches, fastavro decodes Avro, Google's `protobuf` package\n\
         Protobuf (its values turned into Python ones field by field), the `json` module\n\
         JSON (date-times, dates and UUIDs parsed as the schema types them), pyarrow builds\n\
         8192-row tables with a declared schema and writes Parquet, paged as Floe's) on the first {} MiB\n\
         of the same segment, 3 runs, its CPU time taken by the script from reading the file\n\
         to the file written (interpreter start-up and imports not counted). The Protobuf\n\
         row's payloads are encoded by Google's `protobuf` package (every record new).\n\
         Per CPU second: MiB of segment per second of user + system time of every thread of\n\
         the process (getrusage; the machine's load hardly moves it), for the pipeline and\n\
         for the Python Lambda, median of the rounds; the ratio is of the medians, and its\n\
         range pairs the slowest round of one with the fastest of the other.\n\
         Peak RSS: of a process running the job once, each side on its own. The pipeline's\n\
         process is this benchmark's binary started again to run the pipeline alone, on the\n\
         whole segment and (in brackets) on the Python Lambda's {} MiB; the Python\n\
         Lambda's includes the interpreter and its imports, the largest of its runs. Each\n\
         process reports its own VmHWM. The Python Lambda reads its segment into memory\n\
         whole, as a Lambda handed the object would.\n\n\
         Pages: as the materializer writes them by default: a segment whose rows fit in one\n\
         fresh file (under {} MiB: compaction's small-file size less an eighth) is written\n\
         with {} pages, for compaction to rewrite with zstd; a larger one with zstd pages.\n\
         The Python Lambda writes the same pages as the materializer did on the row's segment.\n\n\
         | input | segment MiB | records | pipeline MiB/s | encoder alone MiB/s | decode + convert alone MiB/s | pipeline / encoder (target ≥ 70%) | per round: median (range) | pipeline MiB per CPU s | Python Lambda MiB per CPU s | pipeline / Python per CPU s (target ≥ 10×) | pipeline peak RSS MiB (on Python's segment) | Python Lambda peak RSS MiB |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|\n{}\n\n\
         Materializer + compaction: the job is segment → table, so each pipeline round's\n\
         files that the compactor takes (fresh, or under ¾ of the 128 MiB target) are then\n\
         rewritten as it rewrites a bin (`rewrite_files`: every row read and written again into\n\
         zstd files of the target), and each Python run's file is compacted by pyarrow (read,\n\
         written again with zstd, level 1 as pyarrow's default and Floe's), counted for the\n\
         same share of its bytes as the compactor took of Floe's. MiB of segment per CPU\n\
         second of both jobs, median of the rounds (5 of Floe, 3 of Python), and the ratio with\n\
         its range as above. Bytes: the files' MiB per MiB of segment, as written → after\n\
         compaction (what S3 holds once the window has passed), each side.\n\n\
         | input | Floe materializer + compaction MiB per CPU s | Python Lambda + compaction MiB per CPU s | Floe / Python, materializer + compaction | Floe MiB per MiB of segment, written → compacted | Python MiB per MiB of segment, written → compacted |\n\
         |---|---|---|---|---|---|\n{}\n",
        cpu(),
        segment_bytes() / MIB,
        PYTHON_SEGMENT.min(segment_bytes()) / MIB,
        PYTHON_SEGMENT.min(segment_bytes()) / MIB,
        fresh_mib,
        FRESH_CODEC,
        rows.join("\n"),
        compacting_rows.join("\n")
    );
    if only.is_empty() && segment_bytes() == SEGMENT {
        update_benchmarks("convert", "Segment → Parquet", &section);
    } else {
        println!("{section}(a partial run: BENCHMARKS.md left as it is)");
    }
}
