//! Other engines reading local tables the way docs/querying.md says: DuckDB's iceberg
//! extension on the table's folder alone (through `metadata/version-hint.text`) and the
//! lines `floe local table` prints (DuckDB, PyIceberg), judged against PyIceberg through
//! the SQLite catalog — after a first run, a run adding segments, and compaction with the
//! orphan sweep.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use floe_cli::table::TableAccess;
use floe_core::config::FloeConfig;

use crate::committer::{copy, local_run, read_local};
use crate::support;

const TIERED: &str = "tiered/page.views-MWJ6FHTfRYy67jzwZdeqSQ/0/00000000000000000000-tqimKeZwStOEOwRzT3L5oQ";
const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// What tests/py/read_folder.py reads.
#[derive(serde::Deserialize, Debug, Clone, PartialEq)]
pub(crate) struct Rows {
    pub(crate) rows: usize,
    pub(crate) offsets: BTreeMap<String, Vec<i64>>,
    pub(crate) duplicates: usize,
    pub(crate) values: HashMap<String, Option<String>>,
}

/// tests/py/read_folder.py `mode` `arg`: the rows, or the reader's error.
pub(crate) fn read(mode: &str, arg: &str) -> Result<Rows, String> {
    let out = std::process::Command::new(support::python())
        .arg(support::root().join("tests/py/read_folder.py"))
        .args([mode, arg])
        .output()
        .unwrap();
    match out.status.success() {
        true => Ok(serde_json::from_slice(&out.stdout).unwrap()),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

/// Reads `table` every way and checks each read equals PyIceberg's through the catalog;
/// returns what `floe local table` said.
async fn every_reader_agrees(warehouse: &Path, table: &str, expected_rows: usize) -> TableAccess {
    let access = floe_cli::table::access(warehouse, table).await.unwrap();
    assert_eq!(access.hint_rewritten, None, "Floe's commits keep the hint current");
    let judge = read_local(warehouse, table);
    assert_eq!((judge.rows, judge.duplicates), (expected_rows, 0));
    let expected = Rows { rows: judge.rows, offsets: judge.offsets, duplicates: 0, values: judge.values };
    let reads = [
        ("DuckDB on the table's folder", read("duckdb-scan", &access.location)),
        ("the DuckDB line", read("duckdb-line", &access.duckdb)),
        ("the PyIceberg lines", read("pyiceberg-lines", &access.pyiceberg)),
        ("PyIceberg's StaticTable on the folder", read("static", &access.location)),
    ];
    for (reader, rows) in reads {
        assert_eq!(rows.as_ref(), Ok(&expected), "{table}: {reader}");
    }
    access
}

fn hint_file(access: &TableAccess) -> std::path::PathBuf {
    Path::new(&access.location).join("metadata/version-hint.text")
}

#[tokio::test]
async fn duckdb_and_pyiceberg_read_a_table_from_its_folder_through_runs_and_compaction() {
    let samples = support::root().join("examples/segments");
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for rel in ["orders-0/00000000000000000000.log", "orders-1/00000000000000000000.log"] {
        copy(&samples, input.path(), rel);
    }
    for ext in ["log", "indexes", "rsm-manifest"] {
        copy(&samples, input.path(), &format!("{TIERED}.{ext}"));
    }
    assert!(local_run(input.path(), warehouse.path()).await.failed.is_empty());
    let first = every_reader_agrees(warehouse.path(), "kafka.orders", 180).await;
    assert_eq!(
        first.duckdb,
        format!("INSTALL iceberg; LOAD iceberg; SELECT * FROM iceberg_scan('{}');", first.location)
    );
    assert!(first.location.ends_with("/kafka.db/orders"), "{}", first.location);
    every_reader_agrees(warehouse.path(), "kafka.page_views", 200).await;

    // A second run adds a segment: the hint moves to the new version.
    copy(&samples, input.path(), "orders-0/00000000000000000100.log");
    assert!(local_run(input.path(), warehouse.path()).await.failed.is_empty());
    let second = every_reader_agrees(warehouse.path(), "kafka.orders", 240).await;
    assert_ne!(second.version_hint, first.version_hint);
    assert_eq!(std::fs::read_to_string(hint_file(&second)).unwrap(), second.version_hint.clone().unwrap());

    // Compaction days later (past the window and the orphan grace): a replace snapshot.
    let days_later = async || {
        let mut out = Vec::new();
        let clock = floe_core::lock::Clock::Shifted { by_ms: 4 * DAY_MS };
        floe_cli::compact::compact(warehouse.path(), FloeConfig::default(), clock, &mut out).await.unwrap();
        String::from_utf8(out).unwrap()
    };
    let out = days_later().await;
    assert!(out.lines().any(|l| l.starts_with("kafka.orders: ") && l.contains("bin(s) compacted")), "{out}");
    let compacted = every_reader_agrees(warehouse.path(), "kafka.orders", 240).await;
    assert_eq!(read_local(warehouse.path(), "kafka.orders").operation.as_deref(), Some("replace"));
    assert_ne!(compacted.version_hint, second.version_hint);
    // Maintenance again, with nothing to compact: the sweep, after the last commit,
    // removes an orphan and keeps the hint, unreferenced and past the grace as it is.
    let orphan = Path::new(&compacted.location).join("data/orphan.parquet");
    std::fs::write(&orphan, b"left by a crashed run").unwrap();
    let out = days_later().await;
    assert!(out.contains("kafka.orders: nothing to compact; 1 orphan file(s) removed"), "{out}");
    assert!(!orphan.exists());
    assert!(hint_file(&compacted).exists(), "the sweep deleted the hint: {out}");
    assert_eq!(every_reader_agrees(warehouse.path(), "kafka.orders", 240).await, compacted);

    // Without the hint DuckDB cannot find the table from its folder; `floe local table`
    // writes it again (as for a warehouse written before hints, or another engine's commit).
    std::fs::remove_file(hint_file(&compacted)).unwrap();
    let error = read("duckdb-scan", &compacted.location).unwrap_err();
    assert!(error.contains("version-hint"), "{error}");
    let access = floe_cli::table::access(warehouse.path(), "kafka.orders").await.unwrap();
    assert_eq!(access.hint_rewritten.as_deref(), Some("there was none"));
    assert_eq!(read("duckdb-scan", &access.location).unwrap().rows, 240);
}
