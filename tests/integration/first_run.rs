//! The README's first run, as a user types it: the `floe local run` command of "On a
//! fresh machine" run by the built `floe` binary, then the PyIceberg snippet of that
//! section. The command, the summary it must print, the snippet and the snippet's output
//! are all read from README.md, so the README and the behaviour cannot drift apart.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support;

/// How the README's first command starts; the rest of its line is `floe`'s arguments.
const CARGO_RUN: &str = "cargo run -q -p floe-cli -- ";

/// The README's "On a fresh machine" section, up to the next `## ` heading.
fn section() -> String {
    let readme = std::fs::read_to_string(support::root().join("README.md")).unwrap();
    let start = readme.find("## On a fresh machine").expect("README has a section \"## On a fresh machine\"");
    let rest = &readme[start..];
    let end = rest[2..].find("\n## ").map_or(rest.len(), |e| e + 2);
    rest[..end].to_string()
}

/// The fenced code blocks of `text`, in order: (language, body with a final newline).
fn blocks(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some(language) = line.strip_prefix("```") {
            let body: Vec<&str> = lines.by_ref().take_while(|l| !l.starts_with("```")).collect();
            out.push((language.to_string(), body.join("\n") + "\n"));
        }
    }
    out
}

/// What the first run section shows: the command line, the summary it prints, the
/// PyIceberg snippet and what the snippet prints.
struct FirstRun {
    command: String,
    summary: String,
    snippet: String,
    snippet_output: String,
}

impl FirstRun {
    fn from_readme() -> FirstRun {
        let blocks = blocks(&section());
        let at = |language: &str, from: usize| {
            (from..blocks.len())
                .find(|&i| blocks[i].0 == language)
                .unwrap_or_else(|| panic!("README's first run: no ```{language} block after block {from}"))
        };
        let sh = at("sh", 0);
        let command = blocks[sh].1.lines().find(|l| l.contains(" local run ")).expect("a `local run` command");
        let summary = at("text", sh + 1);
        let python = at("python", summary + 1);
        let output = at("text", python + 1);
        FirstRun {
            command: command.trim().to_string(),
            summary: blocks[summary].1.clone(),
            snippet: blocks[python].1.clone(),
            snippet_output: blocks[output].1.clone(),
        }
    }

    /// `floe`'s arguments in the command (it has no quoting: split at spaces).
    fn floe_args(&self) -> Vec<&str> {
        let args = self
            .command
            .strip_prefix(CARGO_RUN)
            .unwrap_or_else(|| panic!("README's first command should start with `{CARGO_RUN}`: {}", self.command));
        assert!(!args.contains(['"', '\'', '\\']), "no quoting in the first command: {args}");
        args.split_whitespace().collect()
    }
}

/// Builds the `floe` binary into the tests' own target folder and returns it: with the
/// flags of scripts/test.sh's `cargo run … inspect` check, which then builds nothing again.
/// A no-op when it is current; the first time, floe-cli and the crates it uses without the
/// tests' dev-dependency features.
pub(crate) fn floe_binary() -> PathBuf {
    // <target>/<profile>/deps/integration-…
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.ancestors().nth(2).unwrap();
    let target = exe.ancestors().nth(3).unwrap();
    let profile = match profile_dir.file_name().unwrap().to_str().unwrap() {
        "debug" => "dev",
        other => other,
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let mut build = Command::new(cargo);
    // Without the variables cargo sets for this test's process: build scripts (ring's)
    // read CARGO_MANIFEST_DIR, and a new value would rebuild everything after them.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_")
            || ["CARGO_MANIFEST_DIR", "CARGO_MANIFEST_PATH", "CARGO_CRATE_NAME", "CARGO_PRIMARY_PACKAGE"]
                .contains(&name.as_ref())
        {
            build.env_remove(name.as_ref());
        }
    }
    let out = build
        .args(["build", "--quiet", "--locked", "-p", "floe-cli", "--bin", "floe", "--features", "floe-core/fuzzing"])
        .args(["--profile", profile])
        .current_dir(support::root())
        .env("CARGO_TARGET_DIR", target)
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo build of floe failed: {}", String::from_utf8_lossy(&out.stderr));
    profile_dir.join("floe")
}

/// A folder laid out as the repository's root for the command's relative paths
/// (`examples` links to the repository's), so the warehouse it writes is the test's.
fn user_folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(support::root().join("examples"), dir.path().join("examples")).unwrap();
    dir
}

fn run_in(dir: &Path, program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> String {
    let out = Command::new(program).args(args).current_dir(dir).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_readme_first_run_prints_and_reads_back_what_the_readme_shows() {
    let readme = FirstRun::from_readme();
    let config = std::fs::read_to_string(support::root().join("examples/floe.toml")).unwrap();
    assert!(config.contains(&readme.command), "examples/floe.toml names the README's command: {}", readme.command);

    let dir = user_folder();
    let printed = run_in(dir.path(), floe_binary(), &readme.floe_args());
    // The README shows the warehouse's absolute path as `/…/warehouse`.
    let here = dir.path().canonicalize().unwrap().display().to_string();
    assert_eq!(printed.replace(&here, "/…"), readme.summary, "what `{}` prints", readme.command);

    let snippet = dir.path().join("first_run.py");
    std::fs::write(&snippet, &readme.snippet).unwrap();
    let read_back = run_in(dir.path(), support::python(), &[snippet.to_str().unwrap()]);
    assert_eq!(read_back, readme.snippet_output, "what README's PyIceberg snippet prints");
}

#[test]
fn the_readme_first_run_is_found_in_the_readme() {
    let readme = FirstRun::from_readme();
    assert_eq!(readme.floe_args()[..2], ["local", "run"]);
    assert!(readme.floe_args().contains(&"--config"), "the first run is typed: {}", readme.command);
    assert!(readme.summary.contains("kafka.shipments: "), "{}", readme.summary);
    assert!(readme.snippet.contains("SqlCatalog"), "{}", readme.snippet);
    assert!(readme.snippet_output.contains("kafka.orders 240 "), "{}", readme.snippet_output);
}
