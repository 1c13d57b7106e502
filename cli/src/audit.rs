//! `floe local audit` and `floe aws audit`: a table's data checked against the offsets
//! Floe committed ([`floe_core::table::audit`]), printed per partition — readable by
//! default, JSON with `--json`. The exit code says the verdict: 0 when the table holds
//! every committed record exactly once, 1 on a duplicate, an unexplained gap or a row
//! Floe never committed, 2 when the table could not be audited.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use aws_config::SdkConfig;
use floe_core::catalog::Catalog;
use floe_core::catalog::split::SplitCatalog;
use floe_core::catalog::sqlite::{OWN_CATALOG, SqliteCatalog};
use floe_core::table::CatalogTables;
use floe_core::table::audit::{AuditReport, Gap, GapReason, PartitionAudit, audit};
use floe_core::task::TableName;

/// Gaps of one reason shown per partition in the readable report (`--json` has them all).
const SHOWN_GAPS: usize = 10;

fn table_name(table: &str) -> anyhow::Result<TableName> {
    TableName::parse(table).ok_or_else(|| anyhow::anyhow!("{table:?} is not a table name (namespace.name)"))
}

/// Audits the table of a local warehouse.
pub async fn local(warehouse: &Path, table: &str) -> anyhow::Result<AuditReport> {
    let name = table_name(table)?;
    let path = warehouse.join("catalog.db");
    anyhow::ensure!(path.is_file(), "no warehouse at {} (no catalog.db)", warehouse.display());
    // Delta-only topics' tables are in the file's own catalog: looked up there too.
    let sqlite = SqliteCatalog::open(&path, "floe")?;
    let catalog: Arc<dyn Catalog> =
        Arc::new(SplitCatalog::new(Arc::new(sqlite.clone()), Arc::new(sqlite.named(OWN_CATALOG))));
    let tables = CatalogTables {
        catalog,
        file_io: floe_core::storage::local_file_io(),
        delta_log: Arc::new(floe_core::delta::LocalLogStore),
    };
    audited(&tables, &name).await
}

/// Audits a table of a deployed stack in Glue, its files in S3 (path-style addressing
/// with `path_style`: `FLOE_S3_PATH_STYLE=true`, as the functions read it).
pub async fn aws(config: &SdkConfig, table: &str, path_style: bool) -> anyhow::Result<AuditReport> {
    let tables = crate::aws::glue_tables(config, crate::aws::s3_client(config, path_style)).await?;
    stack_table(&tables, table).await
}

/// Audits a table of a deployed stack, through its catalog ([`crate::aws::stack_tables`]).
pub async fn stack_table(tables: &CatalogTables, table: &str) -> anyhow::Result<AuditReport> {
    audited(tables, &table_name(table)?).await
}

/// Audits of a table that keeps committing before its Delta mirror is checked against
/// the same snapshot.
const AUDIT_ATTEMPTS: usize = 5;

/// The table audited, and its Delta mirror (when it has one) checked against the
/// snapshot audited: audited again while the table moves on before the check (the last
/// attempt checks the mirror against the newer snapshot).
async fn audited(tables: &CatalogTables, name: &TableName) -> anyhow::Result<AuditReport> {
    for attempt in 1.. {
        let report = audit(tables.catalog.as_ref(), &tables.file_io, name).await?;
        let Some(loaded) = tables.load(name).await? else { return Ok(report) };
        if loaded.metadata.current_snapshot().map(|s| s.snapshot_id()) != report.snapshot_id && attempt < AUDIT_ATTEMPTS
        {
            continue;
        }
        let delta = floe_core::delta::check::check(tables.delta_log.as_ref(), &tables.file_io, &loaded).await?;
        return Ok(report.with_delta(delta));
    }
    unreachable!("the attempts end at the last")
}

/// Prints the report: JSON (one object) or readable.
pub fn print(report: &AuditReport, json: bool, mut out: impl Write) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string(report)?)?;
        return Ok(());
    }
    let snapshot = report.snapshot_id.map_or("none".to_string(), |s| s.to_string());
    writeln!(out, "table {} (snapshot {snapshot})", report.table)?;
    for partition in &report.partitions {
        print_partition(partition, &mut out)?;
    }
    if report.rows_without_offset > 0 {
        writeln!(out, "  {} row(s) without a Kafka partition or offset", report.rows_without_offset)?;
    }
    if let Some(delta) = &report.delta {
        let state = if delta.same_rows() { "the same rows" } else { "NOT the same rows" };
        writeln!(out, "  delta: version {}, {} files: {state}", delta.version, delta.files)?;
    }
    let verdict = match report.exactly_once {
        true => "exactly once: every committed record is in the table once".to_string(),
        false => format!("NOT exactly once: {}", violations(report).join("; ")),
    };
    writeln!(out, "{verdict}")?;
    Ok(())
}

fn ranges(ranges: &[(i64, i64)]) -> String {
    let text: Vec<String> =
        ranges.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
    text.join(",")
}

fn print_partition(p: &PartitionAudit, out: &mut impl Write) -> anyhow::Result<()> {
    let state = if p.exactly_once { "ok" } else { "FAILED" };
    writeln!(out, "  {}-{}: {state}, committed {}, {} rows", p.topic, p.partition, p.committed, p.rows)?;
    if !p.duplicates.is_empty() {
        writeln!(out, "    duplicates at offsets {}", ranges(&p.duplicates))?;
    }
    if !p.uncommitted_rows.is_empty() {
        writeln!(out, "    rows at offsets never committed: {}", ranges(&p.uncommitted_rows))?;
    }
    if !p.shared.is_empty() {
        writeln!(
            out,
            "    offsets {} are committed by more than one incarnation of the re-created topic: checked held, not counted",
            ranges(&p.shared)
        )?;
    }
    let mut reasons: Vec<GapReason> = p.gaps.iter().map(|g| g.reason).collect();
    reasons.sort_unstable();
    reasons.dedup();
    for reason in reasons {
        let gaps: Vec<&Gap> = p.gaps.iter().filter(|g| g.reason == reason).collect();
        let offsets: i64 = gaps.iter().map(|g| g.last - g.first + 1).sum();
        let shown: Vec<(i64, i64)> = gaps.iter().take(SHOWN_GAPS).map(|g| (g.first, g.last)).collect();
        let more = gaps.len().saturating_sub(SHOWN_GAPS);
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        writeln!(out, "    gaps, {reason}: {offsets} offset(s) at {}{more}", ranges(&shown))?;
    }
    if p.unexplained > 0 {
        writeln!(
            out,
            "    {} offset(s) among the unexplained gaps are missing (Floe counted {} without rows)",
            p.unexplained, p.counted_without_rows
        )?;
    }
    if p.surplus > 0 {
        writeln!(
            out,
            "    Floe counted {} offset(s) without rows more than the gaps hold: rows where Floe wrote none",
            p.surplus
        )?;
    }
    if let Some(upsert) = &p.upsert {
        writeln!(out, "    upsert: {} live key(s), each one row", upsert.live_keys)?;
        if !upsert.stale_rows.is_empty() {
            writeln!(out, "    rows that are not their key's latest record: {}", ranges(&upsert.stale_rows))?;
        }
        if !upsert.missing_latest.is_empty() {
            writeln!(out, "    latest records of live keys no row holds: {}", ranges(&upsert.missing_latest))?;
        }
    }
    Ok(())
}

/// What breaks exactly-once, partition by partition, for the verdict and the error line.
pub fn violations(report: &AuditReport) -> Vec<String> {
    let mut out = Vec::new();
    for p in report.partitions.iter().filter(|p| !p.exactly_once) {
        let at = format!("topic {} partition {}", p.topic, p.partition);
        if !p.duplicates.is_empty() {
            out.push(format!("{at}: duplicate offset(s) {}", ranges(&p.duplicates)));
        }
        if !p.uncommitted_rows.is_empty() {
            out.push(format!("{at}: rows at uncommitted offset(s) {}", ranges(&p.uncommitted_rows)));
        }
        if p.unexplained > 0 || p.surplus > 0 {
            let gaps: Vec<(i64, i64)> =
                p.gaps.iter().filter(|g| g.reason == GapReason::Unexplained).map(|g| (g.first, g.last)).collect();
            out.push(format!("{at}: unexplained gap(s) at offset(s) {}", ranges(&gaps)));
        }
        if let Some(upsert) = p.upsert.as_ref().filter(|u| !u.stale_rows.is_empty()) {
            out.push(format!("{at}: rows not their key's latest at offset(s) {}", ranges(&upsert.stale_rows)));
        }
        if let Some(upsert) = p.upsert.as_ref().filter(|u| !u.missing_latest.is_empty()) {
            out.push(format!("{at}: keys' latest records missing at offset(s) {}", ranges(&upsert.missing_latest)));
        }
    }
    if report.rows_without_offset > 0 {
        out.push(format!("{} row(s) without a Kafka partition or offset", report.rows_without_offset));
    }
    if let Some(delta) = report.delta.as_ref().filter(|d| !d.same_rows()) {
        let listed = |what: &str, paths: &[String]| {
            let shown: Vec<&str> = paths.iter().take(SHOWN_GAPS).map(String::as_str).collect();
            format!("the Delta table {what} {} file(s): {}", paths.len(), shown.join(", "))
        };
        if !delta.missing.is_empty() {
            out.push(listed("lacks (behind the Iceberg table)", &delta.missing));
        }
        if !delta.extra.is_empty() {
            out.push(listed("holds files the Iceberg table has not live,", &delta.extra));
        }
        out.extend(delta.offsets.iter().map(|o| format!("the Delta table's {o}")));
        out.extend(delta.vectors.iter().take(SHOWN_GAPS).map(|v| format!("the Delta table's deletion vector of {v}")));
    }
    out
}

/// Why `floe audit` did not exit 0.
#[derive(Debug)]
pub enum AuditFailure {
    /// The table is not exactly once: what breaks it (exit code 1).
    NotExactlyOnce(String),
    /// The table could not be audited (exit code 2).
    CouldNotAudit(String),
}

impl std::fmt::Display for AuditFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuditFailure::NotExactlyOnce(what) => write!(f, "not exactly once: {what}"),
            AuditFailure::CouldNotAudit(why) => write!(f, "could not audit: {why}"),
        }
    }
}

impl std::error::Error for AuditFailure {}

/// Prints the report of an audit and turns it into the command's result: `Ok` when the
/// table is exactly once, else the [`AuditFailure`].
pub fn verdict(audited: anyhow::Result<AuditReport>, json: bool, out: impl Write) -> anyhow::Result<()> {
    let could_not = |e: anyhow::Error| AuditFailure::CouldNotAudit(crate::error_line(&e));
    let report = audited.map_err(could_not)?;
    print(&report, json, out).map_err(could_not)?;
    match report.exactly_once {
        true => Ok(()),
        false => Err(AuditFailure::NotExactlyOnce(violations(&report).join("; ")).into()),
    }
}

/// The exit code of a command's error: 1 for a table not exactly once, 2 for one that
/// could not be audited, `None` for the other commands' errors.
pub fn exit_code(e: &anyhow::Error) -> Option<u8> {
    match e.downcast_ref::<AuditFailure>()? {
        AuditFailure::NotExactlyOnce(_) => Some(1),
        AuditFailure::CouldNotAudit(_) => Some(2),
    }
}
