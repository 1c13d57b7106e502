//! What the benchmarks share: paths, seed segments from the Python generators, tiling
//! seeds to any size, the process's CPU time, the S3/SQS/DynamoDB/Glue emulator (moto,
//! with its request counts, and a benchmark's buckets, queue and lock table in it), and writing result sections into BENCHMARKS.md; with the
//! integration tests ([`shared`]), a hooked catalog and the local committer.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

#[path = "../../support/mod.rs"]
pub mod shared;

pub const MIB: u64 = 1 << 20;

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn python_command(script: &str, args: &[&str]) -> Command {
    let python = std::env::var("FLOE_PYTHON").unwrap_or_else(|_| root().join(".venv/bin/python").display().to_string());
    let mut command = Command::new(&python);
    command.arg(root().join("tests/py").join(script)).args(args);
    command
}

const NO_VENV: &str = "python with tests/py/requirements.txt (run scripts/test.sh once)";
/// The CommitTask of one real segment (examples/segments, `orders` partition 1), made by
/// the materializer core into `warehouse`: the template the commit benchmarks clone with
/// new tables, offsets and file names.
pub async fn segment_task(warehouse: &str) -> floe_core::task::CommitTask {
    use floe_core::materializer::{LocalObjects, Materializer, ObjectRef, Outcome};
    let materializer = Materializer {
        config: std::sync::Arc::new(floe_core::config::FloeConfig::default()),
        registry: None,
        objects: std::sync::Arc::new(LocalObjects::new(root().join("examples/segments"))),
        file_io: floe_core::storage::local_file_io(),
        warehouse: warehouse.to_string(),
        queue: std::sync::Arc::new(floe_core::queue::InProcessQueue::default()),
        tables: None,
        table_registry: None,
        limits: Default::default(),
    };
    match materializer.handle(&ObjectRef::new("", "orders-1/00000000000000000000.log")).await.unwrap() {
        Outcome::Queued(task) => *task,
        other => panic!("{other:?}"),
    }
}

/// [`segment_task`]'s `template` as the task `id` of offsets `first..first + 1000`, its
/// data files renamed `<name>-<id>.parquet` (never read: the commit benchmarks commit
/// the same file under new names).
pub fn task_at(template: &floe_core::task::CommitTask, first: i64, id: &str) -> floe_core::task::CommitTask {
    let mut task = template.clone();
    task.offsets = Some(floe_core::task::OffsetRange { first, last: first + 999 });
    task.task_id = id.to_string();
    for file in &mut task.data_files {
        file.first_offset = first;
        file.last_offset = first + 999;
        let path = file.path().replace(".parquet", &format!("-{id}.parquet"));
        file.data_file["file_path"] = path.into();
    }
    task
}

/// The commit task of one file `file` (written with `schema`, unpartitioned) of `topic`
/// partition 0 into `table`, as the materializer would queue it; `upsert_key`: the key
/// columns of an upsert topic.
pub fn file_task(
    (table, topic): (&floe_core::table::TableName, &str),
    schema: &iceberg::spec::Schema,
    file: &floe_core::datafile::WrittenFile,
    task_id: String,
    upsert_key: Option<Vec<String>>,
) -> floe_core::task::CommitTask {
    use floe_core::task::{CommitTask, OffsetRange, SourceObject, TASK_VERSION, TaskFile, TaskSchema};
    CommitTask {
        formats: Default::default(),
        version: TASK_VERSION,
        task_id,
        table: table.clone(),
        dead_letter_table: None,
        topic: topic.into(),
        partition: 0,
        offsets: Some(OffsetRange { first: file.first_offset, last: file.last_offset }),
        record_count: file.record_count(),
        skipped_records: 0,
        without_rows: Some(0),
        table_location: None,
        data_files: vec![TaskFile::from_written(file, &iceberg::spec::StructType::new(vec![])).unwrap()],
        dead_letter_files: vec![],
        open_transactions: vec![],
        transaction_markers: vec![],
        transaction_timeout_ms: None,
        max_timestamp: None,
        schema: TaskSchema {
            key_format: "raw".into(),
            value_format: "json".into(),
            iceberg: schema.clone(),
            partition_spec: None,
            format_version: None,
            upsert_key,
        },
        dead_letter_schema: None,
        source: SourceObject {
            uri: format!("file:///bench/{topic}-0/{:020}.log", file.first_offset),
            etag: None,
            size: 1,
            layout: floe_core::segment::SegmentLayout::BrokerLogDir,
            segment_id: None,
            topic_id: None,
            leader_epochs: Default::default(),
        },
        created_at_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64),
        dead_letters_of: None,
    }
}

/// Runs a generator in tests/py with the test virtualenv's Python.
pub fn python(script: &str, args: &[&str]) {
    let status = python_command(script, args).status().expect(NO_VENV);
    assert!(status.success(), "{script} failed");
}

/// Runs a script in tests/py and returns what it printed.
pub fn python_output(script: &str, args: &[&str]) -> String {
    let out = python_command(script, args).output().expect(NO_VENV);
    assert!(out.status.success(), "{script} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Writes `seed` repeated until `size` bytes, rewriting base offsets so they increase.
pub fn tile(seed: &[u8], size: u64, out: &Path) {
    tile_from(seed, size, out, 0);
}

/// [`tile`] with the first batch at `first_offset`; returns the number of records written.
pub fn tile_from(seed: &[u8], size: u64, out: &Path, first_offset: i64) -> u64 {
    let mut frames = Vec::new();
    let mut pos = 0;
    while pos + 12 <= seed.len() {
        let len = i32::from_be_bytes(seed[pos + 8..pos + 12].try_into().unwrap()) as usize;
        frames.push(&seed[pos..pos + 12 + len]);
        pos += 12 + len;
    }
    let mut file = std::io::BufWriter::new(std::fs::File::create(out).unwrap());
    let (mut written, mut next_offset, mut records) = (0u64, first_offset, 0u64);
    'outer: loop {
        for frame in &frames {
            let mut frame = frame.to_vec();
            let last_delta = i32::from_be_bytes(frame[23..27].try_into().unwrap()) as i64;
            frame[..8].copy_from_slice(&next_offset.to_be_bytes());
            next_offset += last_delta + 1;
            records += u32::from_be_bytes(frame[57..61].try_into().unwrap()) as u64;
            file.write_all(&frame).unwrap();
            written += frame.len() as u64;
            if written >= size {
                break 'outer;
            }
        }
    }
    file.flush().unwrap();
    records
}

/// The emulator (tests/py/moto_server.py) on a free port; it ends when this is dropped.
pub struct Moto {
    child: Child,
    pub port: u16,
    pub endpoint: String,
}

impl Moto {
    pub fn start() -> Moto {
        let python =
            std::env::var("FLOE_PYTHON").unwrap_or_else(|_| root().join(".venv/bin/python").display().to_string());
        let mut child = Command::new(&python)
            .arg(root().join("tests/py/moto_server.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect(NO_VENV);
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port: u16 = line.trim().parse().expect("moto_server.py prints its port");
        Moto { child, port, endpoint: format!("http://127.0.0.1:{port}") }
    }

    /// The requests served so far, per "service Operation" (see moto_server.py).
    pub fn requests(&self) -> BTreeMap<String, u64> {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream.write_all(b"GET /_floe/requests HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let body = response.split_once("\r\n\r\n").map(|(_, body)| body).unwrap_or_default();
        serde_json::from_str(body).unwrap_or_else(|e| panic!("request counts: {e}: {response}"))
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// A benchmark's AWS side on moto ([`emulated_aws`]).
pub struct Emulated {
    pub aws: aws_config::SdkConfig,
    /// Path-style, as the functions' clients on a local endpoint.
    pub s3: aws_sdk_s3::Client,
    pub sqs: aws_sdk_sqs::Client,
    /// The committer's FIFO task queue.
    pub queue: String,
}

/// The SDK's environment pointed at moto's `endpoint` (as a Lambda's is configured, by
/// variables), with `buckets`, the committer's FIFO task queue and the lock table
/// `lock_table`. Call it before the process's other threads read the environment.
pub async fn emulated_aws(endpoint: &str, buckets: &[&str], lock_table: &str) -> Emulated {
    for (k, v) in [
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
    ] {
        // SAFETY: set before any other thread of this process reads the environment.
        unsafe { std::env::set_var(k, v) };
    }
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&aws).force_path_style(true).build());
    for bucket in buckets {
        s3.create_bucket().bucket(*bucket).send().await.unwrap();
    }
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let queue = sqs
        .create_queue()
        .queue_name("bench-tasks.fifo")
        .attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true")
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    floe_aws::dynamodb::DynamoDbLocks::create_table(&aws_sdk_dynamodb::Client::new(&aws), lock_table).await.unwrap();
    Emulated { aws, s3, sqs, queue }
}

pub fn cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap().trim().to_string())
        })
        .unwrap_or_default()
}

/// Peak RSS of this process since it started (VmHWM), KiB. Not getrusage's `ru_maxrss`:
/// that counts the parent's memory as it was when this process was spawned.
pub fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// CPU seconds (user + system, all threads) of this process so far.
pub fn cpu_seconds() -> f64 {
    // SAFETY: rusage is plain integers, for which all zeros is a value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct it is given.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) }, 0);
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

/// Replaces the section between `<!-- NAME:start -->` and `<!-- NAME:end -->` in
/// BENCHMARKS.md (appending it, under `title`, when absent).
pub fn update_benchmarks(name: &str, title: &str, body: &str) {
    let path = root().join("BENCHMARKS.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|_| "# Benchmarks\n".into());
    let (start, end) = (format!("<!-- {name}:start -->"), format!("<!-- {name}:end -->"));
    let block = format!("{start}\n{body}{end}");
    let updated = match (text.find(&start), text.find(&end)) {
        (Some(s), Some(e)) => format!("{}{block}{}", &text[..s], &text[e + end.len()..]),
        _ => format!("{}\n\n## {title}\n\n{block}\n", text.trim_end()),
    };
    std::fs::write(&path, updated).unwrap();
}
