//! Segment decode benchmark: throughput per codec on one core, and peak RSS for a small
//! vs a large segment (memory must not grow with the segment).
//!
//! `cargo bench -p floe-tests --bench segment_decode` — writes its table into
//! BENCHMARKS.md. Seeds (~4 MiB per codec) come from kafka-python via
//! tests/py/make_segments.py and are tiled to size with rewritten base offsets.

#[path = "common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use common::{MIB, cpu, tile, update_benchmarks};

use floe_core::segment::{FileSource, Limits, SegmentReader};

/// Batch codecs; `zstd_streamed`: zstd frames that do not state their size, as Java
/// clients stream them (kafka-python's state it).
const CODECS: [&str; 6] = ["none", "gzip", "snappy", "lz4", "zstd", "zstd_streamed"];

/// Decodes the whole segment, touching every record; returns (records, value bytes).
fn decode(path: &Path) -> (u64, u64) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut reader = SegmentReader::open(Arc::new(FileSource::new(path)), Limits::default()).await.unwrap();
        let (mut records, mut bytes) = (0u64, 0u64);
        while let Some(batch) = reader.next_batch().await.unwrap() {
            for r in &batch.records {
                records += 1;
                bytes += r.value.as_ref().map_or(0, |v| v.len() as u64);
            }
        }
        (records, bytes)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--rss-child") {
        decode(Path::new(&args[i + 1]));
        println!("{}", common::peak_rss_kib());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut seeds = vec!["--bench-seeds", dir.path().to_str().unwrap(), "4"];
    seeds.extend(CODECS);
    common::python("make_segments.py", &seeds);

    let mut rows = Vec::new();
    let size = 256 * MIB;
    for codec in CODECS {
        let seed = std::fs::read(dir.path().join(format!("seed_{codec}.log"))).unwrap();
        let path = dir.path().join(format!("{codec}.log"));
        tile(&seed, size, &path);
        let bytes = std::fs::metadata(&path).unwrap().len();
        decode(&path); // warm the page cache
        let mut best = f64::MAX;
        let (mut records, mut value_bytes) = (0, 0);
        for _ in 0..3 {
            let start = Instant::now();
            (records, value_bytes) = decode(&path);
            best = best.min(start.elapsed().as_secs_f64());
        }
        let mbps = bytes as f64 / MIB as f64 / best;
        println!("{codec}: {bytes} bytes, {records} records, {best:.3} s, {mbps:.0} MiB/s");
        rows.push(format!(
            "| {codec} | {} | {records} | {best:.3} | **{mbps:.0}** | {:.0} | {:.2} |",
            bytes / MIB,
            value_bytes as f64 / MIB as f64 / best,
            records as f64 / best / 1e6
        ));
        std::fs::remove_file(&path).unwrap();
    }

    let mut rss_rows = Vec::new();
    for codec in ["none", "zstd"] {
        let seed = std::fs::read(dir.path().join(format!("seed_{codec}.log"))).unwrap();
        for size in [64 * MIB, 1024 * MIB] {
            let path = dir.path().join(format!("rss_{codec}.log"));
            tile(&seed, size, &path);
            let out = Command::new(std::env::current_exe().unwrap()).arg("--rss-child").arg(&path).output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let kib: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
            println!("peak RSS {codec} {} MiB segment: {} MiB", size / MIB, kib / 1024);
            rss_rows.push(format!("| {codec} | {} | {:.1} |", size / MIB, kib as f64 / 1024.0));
            std::fs::remove_file(&path).unwrap();
        }
    }

    let cpu = cpu();
    let section = format!(
        "Measured by `cargo bench -p floe-tests --bench segment_decode` (release, one core: a\n\
         current-thread runtime reading a local file; CPU: {cpu}). Segments of ~64 KiB batches\n\
         of JSON-ish records built by kafka-python and tiled to size; every record is\n\
         decoded and its value touched. Best of 3 runs after a warm-up. `zstd_streamed`: batches\n\
         of the same kind with zstd frames that do not state their size, as Java clients stream\n\
         them (python-zstandard without the content size).\n\n\
         | codec | segment MiB | records | seconds | MiB/s of segment | MiB/s of values | M records/s |\n\
         |---|---|---|---|---|---|---|\n{}\n\n\
         Peak RSS of a whole process decoding one segment (VmHWM): memory is bounded by the\n\
         largest batch and the read buffer, not by the segment.\n\n\
         | codec | segment MiB | peak RSS MiB |\n|---|---|---|\n{}\n",
        rows.join("\n"),
        rss_rows.join("\n")
    );
    update_benchmarks("segment-decode", "Segment decode", &section);
}
