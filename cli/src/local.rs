//! `floe local run`: materializer and committer in one process on a folder of segments,
//! into a local warehouse with a SQLite catalog (`<warehouse>/catalog.db`, catalog `floe`).

use std::io::Write;
use std::path::Path;

use floe_core::config::FloeConfig;
use floe_core::local::LocalReport;

/// Runs and prints what was done, per table; fails when any segment failed.
pub async fn run(
    input: &Path,
    warehouse: &Path,
    config: FloeConfig,
    mut out: impl Write,
) -> anyhow::Result<LocalReport> {
    let report = floe_core::local::run(input, warehouse, config).await?;
    for t in &report.tables {
        writeln!(
            out,
            "{}: {} segment(s) materialized, {} already in the table; {} record(s) in {} file(s), {} snapshot(s)",
            t.table, t.segments, t.skipped_segments, t.records, t.files, t.snapshots
        )?;
    }
    for ignored in &report.ignored {
        writeln!(out, "ignored: {ignored}")?;
    }
    if report.tables.is_empty() {
        writeln!(out, "no segments found under {}", input.display())?;
    }
    let catalog = std::fs::canonicalize(warehouse)?.join("catalog.db");
    writeln!(out, "catalog: {} (SQLite, catalog name \"floe\")", catalog.display())?;
    if !report.failed.is_empty() {
        for failed in &report.failed {
            writeln!(out, "failed: {failed}")?;
        }
        anyhow::bail!("{} segment(s) failed; nothing of them was committed", report.failed.len());
    }
    Ok(report)
}
