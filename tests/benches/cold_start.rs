//! Cold start: each Lambda's init time as Lambda reports it ("Init Duration"), from the
//! process's start to its first request for an event, under a minimal Runtime API.
//!
//! `cargo bench -p floe-tests --bench cold_start` — builds the three functions' release
//! binaries (`cargo build --release --bin …`, as `sam build` selects them), then writes its
//! section into BENCHMARKS.md.
//!
//! Each run serves the Lambda Runtime API on a fresh 127.0.0.1 port, starts the release
//! binary with the environment Lambda and the SAM template give it (dummy AWS credentials,
//! an endpoint that refuses connections: init must not touch the network), and stops the
//! clock when `GET /2018-06-01/runtime/invocation/next` arrives — the end of Lambda's init
//! phase. The binaries are this machine's (x86_64) build of the release profile that the
//! arm64 zips are built with.

#[path = "common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{MIB, cpu, update_benchmarks};

/// Timed runs per function, after one untimed run that brings the binary into the page cache.
const RUNS: usize = 21;
const NEXT: &str = "GET /2018-06-01/runtime/invocation/next ";
const GIVE_UP: Duration = Duration::from_secs(20);

struct Function {
    name: &'static str,
    /// The template's MemorySize.
    memory_mb: &'static str,
    /// What the template sets besides the globals.
    env: &'static [(&'static str, &'static str)],
}

const QUEUE: &str = "https://sqs.us-east-1.amazonaws.com/123456789012/floe-tasks.fifo";

const FUNCTIONS: [Function; 3] = [
    Function { name: "materializer", memory_mb: "2048", env: &[("FLOE_TASK_QUEUE_URL", QUEUE)] },
    Function {
        name: "committer",
        memory_mb: "1024",
        env: &[
            ("FLOE_TASK_QUEUE_URL", QUEUE),
            ("FLOE_LEASE_SECONDS", "120"),
            ("FLOE_COMMIT_CONCURRENCY", "10"),
            ("FLOE_FUNCTION_TIMEOUT_SECONDS", "300"),
        ],
    },
    Function {
        name: "compactor",
        memory_mb: "1024",
        env: &[("FLOE_TASK_QUEUE_URL", QUEUE), ("FLOE_FUNCTION_TIMEOUT_SECONDS", "900")],
    },
];

/// What every function gets: Lambda's own variables and the template's globals.
fn lambda_env(function: &Function, runtime_api: &str) -> Vec<(String, String)> {
    let fixed = [
        ("AWS_LAMBDA_RUNTIME_API", runtime_api),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", function.memory_mb),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"),
        ("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/floe"),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "2026/01/01/[$LATEST]0123456789abcdef"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "ASIAEXAMPLEEXAMPLE00"),
        ("AWS_SECRET_ACCESS_KEY", "example-secret-access-key"),
        ("AWS_SESSION_TOKEN", "example-session-token"),
        // Any AWS call during init would fail here, and the run with it.
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
        ("RUST_LOG", "info"),
        ("FLOE_WAREHOUSE", "s3://floe-warehouse/warehouse"),
        ("FLOE_LOCK_TABLE", "floe-locks"),
    ];
    let mut env: Vec<(String, String)> = fixed.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    env.push(("AWS_LAMBDA_FUNCTION_NAME".into(), format!("floe-{}", function.name)));
    env.extend(function.env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    env
}

/// Starts `binary` as Lambda would and returns the time until it asks for its first event.
fn init_time(binary: &Path, function: &Function) -> Duration {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let runtime_api = listener.local_addr().unwrap().to_string();
    let started = Instant::now();
    let mut child = Command::new(binary)
        .env_clear()
        .envs(lambda_env(function, &runtime_api))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
    let request = loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).unwrap();
                let mut line = String::new();
                BufReader::new(stream).read_line(&mut line).unwrap();
                break line;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if let Some(status) = child.try_wait().unwrap() {
                    let mut stderr = String::new();
                    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
                    panic!("{} exited during init ({status}): {stderr}", function.name);
                }
                assert!(started.elapsed() < GIVE_UP, "{} did not ask for an event in {GIVE_UP:?}", function.name);
                std::thread::sleep(Duration::from_micros(50));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    let elapsed = started.elapsed();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(request.starts_with(NEXT), "{}'s first request is {request:?}", function.name);
    elapsed
}

/// Builds the functions' release binaries into this benchmark's target folder; their paths.
fn build_functions() -> Vec<PathBuf> {
    // target/<profile>/deps/cold_start-… → target: the functions are release binaries
    // whatever profile built this harness (`--profile dev` spares a release build of it).
    let exe = std::env::current_exe().unwrap();
    let target_dir = exe.ancestors().nth(3).unwrap().to_path_buf();
    let release = target_dir.join("release");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build.current_dir(common::root()).args(["build", "--release", "--target-dir"]).arg(&target_dir);
    for function in &FUNCTIONS {
        build.args(["--bin", function.name]);
    }
    let status = build.status().expect("cargo");
    assert!(status.success(), "cargo build --release of the functions failed");
    FUNCTIONS.iter().map(|f| release.join(f.name)).collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let binaries = build_functions();
    // Interleaved, so a slower moment of the shared machine is spread over all three.
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); FUNCTIONS.len()];
    for round in 0..=RUNS {
        for (i, function) in FUNCTIONS.iter().enumerate() {
            let time = init_time(&binaries[i], function);
            if round > 0 {
                times[i].push(time);
            }
        }
    }
    let mut body = format!(
        "Measured by `cargo bench -p floe-tests --bench cold_start` (CPU: {}; a shared 2-core VM).\n\
         Init Duration as Lambda counts it: from the process's start to its first\n\
         `GET /2018-06-01/runtime/invocation/next`, under a minimal Runtime API on 127.0.0.1,\n\
         with the template's environment and dummy credentials (no AWS call during init;\n\
         `FLOE_CONFIG` unset — an `s3://` one adds one GetObject). The binaries are the\n\
         x86_64 build of the same release profile as the arm64 zips (which cannot run here);\n\
         {RUNS} runs each, interleaved, after one untimed run.\n\n\
         | function | release binary (x86_64, stripped) | init min | median | max |\n|---|---|---|---|---|\n",
        cpu()
    );
    for (i, function) in FUNCTIONS.iter().enumerate() {
        let runs = &mut times[i];
        runs.sort();
        let size = std::fs::metadata(&binaries[i]).unwrap().len() as f64 / MIB as f64;
        body.push_str(&format!(
            "| {} | {size:.1} MiB | {:.1} ms | {:.1} ms | {:.1} ms |\n",
            function.name,
            ms(runs[0]),
            ms(runs[runs.len() / 2]),
            ms(runs[runs.len() - 1]),
        ));
    }
    print!("{body}");
    update_benchmarks("cold_start", "Lambda cold start (init)", &body);
}
