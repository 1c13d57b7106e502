//! Shared test plumbing: paths, the Python interpreter, generated segments.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

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

/// Segments built by kafka-python, once per test run: the folder holding `cases.json`.
pub fn generated_segments() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        run_python("make_segments.py", &[dir.path()]);
        dir
    })
    .path()
}

/// A moto server started for this test run (S3, SQS, DynamoDB, Glue on one port). It
/// ends when the test process does: it serves until its stdin closes.
pub struct Moto {
    pub endpoint: String,
    _child: std::process::Child,
}

pub fn moto() -> &'static Moto {
    static MOTO: OnceLock<Moto> = OnceLock::new();
    MOTO.get_or_init(|| {
        use std::io::BufRead;
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
        Moto { endpoint: format!("http://127.0.0.1:{port}"), _child: child }
    })
}

/// AWS SDK configuration pointing at the test's moto server.
pub async fn aws_config() -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(&moto().endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_s3::config::Credentials::new("testing", "testing", None, None, "moto"))
        .load()
        .await
}

pub async fn s3_client() -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::config::Builder::from(&aws_config().await).force_path_style(true).build();
    aws_sdk_s3::Client::from_conf(config)
}
