//! Shared test plumbing: paths, the Python interpreter, generated segments.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

pub fn data(rel: &str) -> PathBuf {
    root().join("tests/data").join(rel)
}

/// The Python with the test requirements (tests/py/requirements.txt): `FLOE_PYTHON`, or
/// the `.venv` the README test command creates. Missing Python fails the test.
pub fn python() -> PathBuf {
    let path = std::env::var_os("FLOE_PYTHON").map(PathBuf::from).unwrap_or_else(|| root().join(".venv/bin/python"));
    assert!(
        path.exists(),
        "no Python at {} — run the README test command (scripts/test.sh), which creates .venv",
        path.display()
    );
    path
}

/// Runs `tests/py/<script>` with `args`; panics with its stderr on failure.
pub fn run_python(script: &str, args: &[&Path]) {
    let output =
        Command::new(python()).arg(root().join("tests/py").join(script)).args(args).output().expect("starting python");
    assert!(output.status.success(), "{script} failed: {}", String::from_utf8_lossy(&output.stderr));
}

/// A long-lived `tests/py/<script>` answering JSON lines: one request a line on its
/// stdin, one answer a line on its stdout, `{"ok": …}` or `{"error": "…"}`. Python and
/// its imports start once, not per request. It ends when this is dropped.
pub struct JsonLines {
    child: std::process::Child,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl JsonLines {
    pub fn start(script: &str, args: &[&Path]) -> JsonLines {
        use std::process::Stdio;
        let mut child = Command::new(python())
            .arg(root().join("tests/py").join(script))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {script}: {e}"));
        let stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        JsonLines { child, stdout }
    }

    /// The answer to `request`: its `ok` value, or its `error` text.
    pub fn call(&mut self, request: &Value) -> Result<Value, String> {
        use std::io::{BufRead, Write};
        let stdin = self.child.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{request}").and_then(|()| stdin.flush()).map_err(|e| format!("writing to python: {e}"))?;
        let mut line = String::new();
        self.stdout.read_line(&mut line).map_err(|e| format!("reading from python: {e}"))?;
        let mut answer: Value =
            serde_json::from_str(&line).map_err(|e| format!("python answered {line:?} to {request}: {e}"))?;
        match answer.get_mut("ok") {
            Some(ok) => Ok(ok.take()),
            None => Err(answer["error"].as_str().unwrap_or("no answer").to_string()),
        }
    }
}

impl Drop for JsonLines {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The folder a generator in tests/py fills, run once per test run into a temporary
/// folder that lives as long as the test process.
fn generated_once(cell: &'static OnceLock<tempfile::TempDir>, script: &str) -> &'static Path {
    cell.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        run_python(script, &[dir.path()]);
        dir
    })
    .path()
}

/// Segments built by kafka-python, once per test run: the folder holding `cases.json`.
pub fn generated_segments() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    generated_once(&DIR, "make_segments.py")
}

/// A moto server started for this test run (S3, SQS, DynamoDB, Glue on one port). It
/// ends when the test process does: it serves until its stdin closes. A child process of
/// a test (a function run to be killed, faults.rs) is handed its parent's server in
/// [`MOTO_ENDPOINT`] and starts none.
pub struct Moto {
    pub endpoint: String,
    _child: Option<std::process::Child>,
}

/// The variable naming the moto server a test's child process uses.
pub const MOTO_ENDPOINT: &str = "FLOE_TEST_MOTO_ENDPOINT";

pub fn moto() -> &'static Moto {
    static MOTO: OnceLock<Moto> = OnceLock::new();
    MOTO.get_or_init(|| {
        use std::io::BufRead;
        if let Ok(endpoint) = std::env::var(MOTO_ENDPOINT) {
            return Moto { endpoint, _child: None };
        }
        use std::process::Stdio;
        let mut child = Command::new(python())
            .arg(root().join("tests/py/moto_server.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting moto server");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("reading moto port");
        let port: u16 = line.trim().parse().unwrap_or_else(|_| panic!("moto printed {line:?}"));
        Moto { endpoint: format!("http://127.0.0.1:{port}"), _child: Some(child) }
    })
}

/// AWS SDK configuration pointing at the test's moto server.
pub async fn aws_config() -> aws_config::SdkConfig {
    aws_config_at(&moto().endpoint).await
}

/// AWS SDK configuration pointing at `endpoint` (moto, or a proxy in front of it), with
/// the SDK's default retries, as the functions have.
pub async fn aws_config_at(endpoint: &str) -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_s3::config::Credentials::new("testing", "testing", None, None, "moto"))
        .load()
        .await
}

pub async fn s3_client() -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::config::Builder::from(&aws_config().await).force_path_style(true).build();
    aws_sdk_s3::Client::from_conf(config)
}

/// A Confluent Schema Registry stand-in speaking the same REST API (`GET /schemas/ids/N`,
/// `GET /schemas/guids/G` (answered without the numeric id),
/// `GET /subjects/S/versions/latest` and `/versions/V`, schema references included) on a
/// free 127.0.0.1 port, with optional basic auth
/// and a number of 503 answers before it starts answering.
pub struct RegistryServer {
    pub url: String,
    pub requests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

pub async fn start_registry(registry_json: &Path, basic_auth: Option<&str>, fail_first: usize) -> RegistryServer {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let data: serde_json::Value = serde_json::from_slice(&std::fs::read(registry_json).unwrap()).unwrap();
    let data = Arc::new(data);
    let expected_auth = basic_auth.map(|up| {
        use base64::Engine;
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(up))
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(AtomicUsize::new(0));
    let counter = requests.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let (data, counter, expected_auth) = (data.clone(), counter.clone(), expected_auth.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let request = String::from_utf8_lossy(&buf).to_string();
                let path = request.split_whitespace().nth(1).unwrap_or("").to_string();
                let n = counter.fetch_add(1, Ordering::SeqCst);
                let auth_ok = expected_auth
                    .as_ref()
                    .is_none_or(|a| request.lines().any(|l| l.eq_ignore_ascii_case(&format!("authorization: {a}"))));
                let (status, body) = if n < fail_first {
                    ("503 Service Unavailable", r#"{"error_code":50301,"message":"busy"}"#.to_string())
                } else if !auth_ok {
                    ("401 Unauthorized", r#"{"error_code":401,"message":"Unauthorized"}"#.to_string())
                } else if let Some(id) = path.strip_prefix("/schemas/ids/") {
                    match data["ids"].get(id) {
                        Some(s) => ("200 OK", s.to_string()),
                        None => ("404 Not Found", r#"{"error_code":40403,"message":"Schema not found"}"#.to_string()),
                    }
                } else if let Some(guid) = path.strip_prefix("/schemas/guids/") {
                    let id = data["guids"].get(guid).and_then(|id| id.as_u64());
                    match id.map(|id| &data["ids"][id.to_string()]) {
                        Some(s) => ("200 OK", s.to_string()),
                        None => ("404 Not Found", r#"{"error_code":40403,"message":"Schema not found"}"#.to_string()),
                    }
                } else if let Some((subject, version)) =
                    path.strip_prefix("/subjects/").and_then(|p| p.split_once("/versions/"))
                {
                    let id = match version {
                        "latest" => data["subjects"].get(subject),
                        n => data["versions"].get(subject).and_then(|v| v.get(n)),
                    };
                    match id.and_then(|id| id.as_u64()) {
                        Some(id) => {
                            let s = &data["ids"][id.to_string()];
                            let body = serde_json::json!({"subject": subject, "version": 1, "id": id,
                                "schemaType": s["schemaType"], "schema": s["schema"],
                                "references": s.get("references").cloned().unwrap_or_else(|| serde_json::json!([]))});
                            ("200 OK", body.to_string())
                        }
                        None => ("404 Not Found", r#"{"error_code":40401,"message":"Subject not found"}"#.to_string()),
                    }
                } else {
                    ("404 Not Found", "{}".to_string())
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/vnd.schemaregistry.v1+json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    RegistryServer { url, requests }
}

/// Avro test data built by fastavro (tests/py/make_avro.py), once per test run.
pub fn avro_data() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    generated_once(&DIR, "make_avro.py")
}

/// Protobuf test data built by the `protobuf` package (tests/py/make_protobuf.py), once
/// per test run.
pub fn protobuf_data() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    generated_once(&DIR, "make_protobuf.py")
}

/// Materializes `segment` of `topic` (partition 0) as `floe convert` does.
pub async fn materialize(
    config: &floe_core::config::FloeConfig,
    topic: &str,
    segment: &Path,
    out: &Path,
) -> anyhow::Result<floe_core::materializer::segment::Materialized> {
    floe_cli::convert::materialize(segment, topic, 0, out, config).await
}

/// The reference case a generator wrote under `data/refs` (`write_reference_case` in
/// tests/py/segment_file.py; its records name their schema by id in the payload, by id
/// in a `__value_schema_id` header and by GUID in that header): materializes the
/// `value_format` topic's segment against a registry stand-in, has pyarrow judge the
/// rows, and returns how many registry requests it took.
pub async fn reference_case(data: &Path, topic: &str, value_format: &str) -> usize {
    let refs = data.join("refs");
    let registry = start_registry(&refs.join("registry.json"), None, 0).await;
    let config = floe_core::config::FloeConfig::parse(&format!(
        "[schema_registry]\nurl = \"{}\"\n[[topics]]\ntopic = \"{topic}\"\nvalue_format = \"{value_format}\"\n",
        registry.url
    ))
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let segment = refs.join(format!("{topic}-0/00000000000000000000.log"));
    let done = materialize(&config, topic, &segment, out.path()).await.unwrap();
    assert_eq!((done.records, done.dead_letters, done.skipped), (4, 0, 0));
    let files: Vec<&str> = done.files.iter().map(|f| f.path()).collect();
    crate::convert::judge(&refs.join("expected.jsonl"), &files, true);
    registry.requests.load(std::sync::atomic::Ordering::SeqCst)
}

/// (offset, error, raw value) of every row of dead-letter files, read with the parquet crate.
pub type DeadLetterRow = (i64, String, Option<Vec<u8>>, Option<Vec<u8>>);

/// The dead-letter rows of `files`: (offset, error, raw value, raw key).
pub fn dead_letter_rows(files: &[floe_core::datafile::WrittenFile]) -> Vec<DeadLetterRow> {
    use arrow::array::{Array, AsArray};
    let mut rows = Vec::new();
    for f in files {
        let file = std::fs::File::open(f.path()).unwrap();
        let reader =
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            let kafka = batch.column_by_name("_kafka").unwrap().as_struct();
            let offsets = kafka.column_by_name("offset").unwrap().as_primitive::<arrow::datatypes::Int64Type>();
            let errors = batch.column_by_name("error").unwrap().as_string::<i32>();
            let values = batch.column_by_name("value").unwrap().as_binary::<i64>();
            let keys = batch.column_by_name("key").unwrap().as_binary::<i64>();
            let bytes = |a: &arrow::array::LargeBinaryArray, i: usize| (!a.is_null(i)).then(|| a.value(i).to_vec());
            for i in 0..batch.num_rows() {
                rows.push((offsets.value(i), errors.value(i).to_string(), bytes(values, i), bytes(keys, i)));
            }
        }
    }
    rows
}

/// Checks each dead-letter row against the generator's `bad.json` entries: the same
/// offsets, in order, each with its key and raw value byte for byte.
pub fn assert_dead_letters_as_written(dead: &[DeadLetterRow], bad_json: &Path) {
    use base64::Engine;
    let bad: serde_json::Value = serde_json::from_slice(&std::fs::read(bad_json).unwrap()).unwrap();
    let bad = bad.as_array().unwrap();
    assert_eq!(dead.len(), bad.len(), "{dead:?}");
    let raw = |v: &serde_json::Value| base64::engine::general_purpose::STANDARD.decode(v.as_str().unwrap()).unwrap();
    for (d, b) in dead.iter().zip(bad) {
        assert_eq!(d.0, b["offset"].as_i64().unwrap());
        assert_eq!((d.2.clone(), d.3.clone()), (Some(raw(&b["value"])), Some(raw(&b["key"]))), "offset {}", d.0);
    }
}

/// JSON test data built with Python's json module (tests/py/make_json.py), once per run.
pub fn json_data() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    generated_once(&DIR, "make_json.py")
}

/// A segment built by make_segments.py, with what a correct decoder must report.
#[derive(serde::Deserialize)]
pub struct Case {
    pub name: String,
    pub log: PathBuf,
    pub txn_index: Option<PathBuf>,
    pub expected: PathBuf,
    pub summary: Value,
    pub error: Option<String>,
    #[serde(default)]
    pub limits: Option<LimitsJson>,
}

#[derive(serde::Deserialize)]
pub struct LimitsJson {
    pub max_batch_bytes: u32,
    pub max_decompressed_bytes: usize,
}

pub fn cases() -> Vec<Case> {
    let dir = generated_segments();
    serde_json::from_slice(&std::fs::read(dir.join("cases.json")).unwrap()).unwrap()
}

/// What the materializer and committer tests both need on moto, named after the test: a
/// segments bucket, a warehouse bucket and a FIFO task queue (visibility timeout 1 s, so
/// a redelivery comes quickly).
#[derive(Clone)]
pub struct AwsBase {
    pub config: aws_config::SdkConfig,
    pub s3: aws_sdk_s3::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub segments: String,
    pub warehouse: String,
    pub tasks: String,
}

pub async fn aws_base(name: &str) -> AwsBase {
    let config = aws_config().await;
    let (s3, sqs) = (s3_client().await, aws_sdk_sqs::Client::new(&config));
    let (segments, warehouse) = (format!("{name}-segments"), format!("{name}-warehouse"));
    for bucket in [&segments, &warehouse] {
        s3.create_bucket().bucket(bucket).send().await.unwrap();
    }
    let tasks = fifo_queue(&sqs, &format!("{name}-tasks.fifo"), Some(1)).await;
    AwsBase { config, s3, sqs, segments, warehouse, tasks }
}

/// A FIFO queue `name` (ending `.fifo`) on moto, with `visibility` seconds or the default;
/// its URL.
pub async fn fifo_queue(sqs: &aws_sdk_sqs::Client, name: &str, visibility: Option<u32>) -> String {
    use aws_sdk_sqs::types::QueueAttributeName;
    let create = sqs.create_queue().queue_name(name).attributes(QueueAttributeName::FifoQueue, "true");
    let create = match visibility {
        Some(seconds) => create.attributes(QueueAttributeName::VisibilityTimeout, seconds.to_string()),
        None => create,
    };
    create.send().await.unwrap().queue_url.unwrap()
}
