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
    let path = std::env::var_os("FLOE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv/bin/python"));
    assert!(
        path.exists(),
        "no Python at {} — run the README test command (scripts/test.sh), which creates .venv",
        path.display()
    );
    path
}

/// Runs `tests/py/<script>` with `args`; panics with its stderr on failure.
pub fn run_python(script: &str, args: &[&Path]) {
    let output = Command::new(python())
        .arg(root().join("tests/py").join(script))
        .args(args)
        .output()
        .expect("starting python");
    assert!(
        output.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
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
