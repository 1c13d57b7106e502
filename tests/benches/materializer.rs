//! Materializer benchmark: a 1 GiB broker segment in the S3 emulator (moto) → Parquet in
//! the warehouse bucket → a CommitTask, through the Lambda's own init and handler.
//!
//! `cargo bench -p floe-tests --bench materializer` — writes its rows into BENCHMARKS.md.
//! The run happens in a child process configured only by environment variables, as a
//! Lambda container is, so its peak RSS (VmHWM) is the function's, and its init time is
//! what a cold start adds before the first event.

#[path = "common/mod.rs"]
mod common;

use std::process::Command;
use std::time::Instant;

use common::{MIB, cpu, tile, update_benchmarks};

const BUCKET: &str = "bench-segments";
const WAREHOUSE: &str = "bench-warehouse";
const KEY: &str = "logs/bench.orders-0/00000000000000000000.log";
const LOCK_TABLE: &str = "bench-locks";

/// The child: init as the Lambda does, handle one S3 event, print a JSON line.
fn child() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let started = Instant::now();
        let env = floe_aws::lambda::MaterializerEnv::from_env().unwrap();
        let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let materializer = floe_aws::lambda::materializer(&aws, &env).await.unwrap();
        let init = started.elapsed();
        let event = serde_json::json!({"Records": [{"eventName": "ObjectCreated:Put",
            "s3": {"bucket": {"name": BUCKET}, "object": {"key": KEY}}}]});
        let started = Instant::now();
        let response = floe_aws::lambda::handle_materializer_event(&materializer, event).await.unwrap();
        let run = started.elapsed();
        assert_eq!(response.queued.len(), 1);
        println!(
            "{}",
            serde_json::json!({"init_ms": init.as_secs_f64() * 1e3, "run_s": run.as_secs_f64(), "rss_kib": common::peak_rss_kib()})
        );
    });
}

fn main() {
    if std::env::args().any(|a| a == "--child") {
        return child();
    }
    let moto = common::Moto::start();
    let endpoint = moto.endpoint.clone();

    let dir = tempfile::tempdir().unwrap();
    common::python("make_segments.py", &["--bench-seeds", dir.path().to_str().unwrap()]);
    let seed = std::fs::read(dir.path().join("seed_lz4.log")).unwrap();
    let segment = dir.path().join("segment.log");
    tile(&seed, 1024 * MIB, &segment);
    let bytes = std::fs::metadata(&segment).unwrap().len();

    let rt = tokio::runtime::Runtime::new().unwrap();
    let queue_url = rt.block_on(async {
        // SAFETY: set before any other thread of this process reads the environment.
        unsafe { std::env::set_var("FLOE_S3_PATH_STYLE", "true") };
        let aws = common::emulated_aws(&endpoint, &[BUCKET, WAREHOUSE], LOCK_TABLE).await;
        let body = aws_sdk_s3::primitives::ByteStream::from_path(&segment).await.unwrap();
        aws.s3.put_object().bucket(BUCKET).key(KEY).body(body).send().await.unwrap();
        aws.queue
    });
    // The emulator's share: the same ranged GETs, nothing decoded.
    let fetch_s = rt.block_on(async {
        use tokio::io::AsyncReadExt;
        let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&aws).force_path_style(true).build());
        let started = Instant::now();
        let source = floe_aws::segment_source::S3Source::open(s3, BUCKET, KEY).await.unwrap();
        let mut reader = floe_core::segment::SegmentSource::open_at(&source, 0).await.unwrap();
        let mut buf = vec![0u8; 1 << 20];
        while reader.read(&mut buf).await.unwrap() > 0 {}
        started.elapsed().as_secs_f64()
    });
    let output = Command::new(std::env::current_exe().unwrap())
        .arg("--child")
        .env("FLOE_WAREHOUSE", format!("s3://{WAREHOUSE}/warehouse"))
        .env("FLOE_TASK_QUEUE_URL", &queue_url)
        .env("FLOE_LOCK_TABLE", LOCK_TABLE)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let line = String::from_utf8(output.stdout).unwrap();
    let result: serde_json::Value = serde_json::from_str(line.lines().last().unwrap()).unwrap();
    drop(moto);

    let run_s = result["run_s"].as_f64().unwrap();
    let rss_mib = result["rss_kib"].as_f64().unwrap() / 1024.0;
    let init_ms = result["init_ms"].as_f64().unwrap();
    let body = format!(
        "CPU: {}. One 1 GiB broker segment (lz4 batches of ~64 KiB, JSON-ish values, tiled from\n\
         kafka-python seeds) in moto's S3 → Parquet (raw layout) in moto's S3 → one CommitTask in\n\
         moto's FIFO SQS, through the Lambda's init and handler in one child process. The emulator\n\
         runs on the same 2 cores and serves each ranged GET (4 MiB, four in flight while the\n\
         materializer decodes) by reading those bytes only, as S3 does (tests/py/moto_server.py;\n\
         moto itself reads the whole object for every range); the conversion itself is measured\n\
         on one core in the convert benchmark above.\n\n\
         | measure | value | target |\n|---|---|---|\n\
         | segment size | {:.0} MiB | 1 GiB |\n\
         | segment → Parquet → task | {:.1} s, {:.1} MiB/s of segment | — |\n\
         | the same ranged GETs alone, nothing decoded (moto serving them; a separate pass) | {:.1} s | — |\n\
         | peak RSS (VmHWM) | {:.0} MiB | ≤ 256 MiB |\n\
         | init (config, clients; cold start before the first event) | {:.1} ms | ≤ 100 ms |\n",
        cpu(),
        bytes as f64 / MIB as f64,
        run_s,
        bytes as f64 / MIB as f64 / run_s,
        fetch_s,
        rss_mib,
        init_ms,
    );
    print!("{body}");
    update_benchmarks("materializer", "Materializer: 1 GiB segment from the S3 emulator", &body);
}
