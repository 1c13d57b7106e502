//! `floe local compact`, and the compaction `floe local run` ends with: the compactor's
//! run on a local warehouse (SQLite catalog, the SQLite lock store as the table registry,
//! local files), its tasks handed to the committer at once through the in-process queue.
//!
//! ```text
//!  Compactor::run(now) ─▶ per registered table: bins rewritten, their outputs held,
//!                         CompactionTasks ─▶ InProcessQueue
//!  Committer::commit_all ─▶ one replace snapshot per table (a task whose inputs changed
//!                           meanwhile is rejected); tasks released, compaction recorded
//! ```

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use floe_core::committer::TaskResult;
use floe_core::config::FloeConfig;
use floe_core::lock::Clock;
use floe_core::maintenance::MaintenanceStatus;
use floe_core::maintenance::compactor::{Compactor, TableRun};

use crate::warehouse::{Warehouse, folder};

/// What compaction and maintenance did to one table.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableCompaction {
    pub table: String,
    /// Bins rewritten and queued, with the files and bytes they replace and add.
    pub bins: usize,
    pub files_in: u64,
    pub bytes_in: u64,
    pub files_out: u64,
    pub bytes_out: u64,
    /// Of the bins, those the committer committed, and those it rejected (an input was
    /// no longer live).
    pub committed: usize,
    pub rejected: usize,
    /// Bins whose task an earlier run queued less than an hour ago: left alone.
    pub already_queued: usize,
    /// Other engines' delete files the bins applied, the rows they left out, and how
    /// many of those files the committed compactions removed (applied everywhere).
    pub delete_files_applied: usize,
    pub rows_deleted: u64,
    pub delete_files_dropped: usize,
    /// Rows past the topic's retention the bins left out.
    pub rows_expired: u64,
    /// Held tasks released because the table already holds their offsets.
    pub released: usize,
    pub orphans_removed: usize,
    /// Why the table was not compacted (suspended, not created yet).
    pub skipped: Option<String>,
    /// What failed, as the run's `failed:` line says it.
    pub failed: Option<String>,
}

impl From<TableRun> for TableCompaction {
    fn from(run: TableRun) -> Self {
        let table = run.table.map(|t| t.to_string()).unwrap_or_default();
        let failed = run.error.map(|e| match table.as_str() {
            "" => format!("compaction: listing the tables: {e}"),
            table => format!("compaction of {table}: {e}"),
        });
        TableCompaction {
            bins: run.compactions,
            files_in: run.files_in,
            bytes_in: run.bytes_in,
            files_out: run.files_out,
            bytes_out: run.bytes_out,
            already_queued: run.already_queued,
            delete_files_applied: run.delete_files.len(),
            rows_deleted: run.rows_deleted,
            rows_expired: run.rows_expired,
            released: run.released,
            orphans_removed: run.sweep.removed.len(),
            skipped: run.skipped,
            failed,
            table,
            ..Default::default()
        }
    }
}

impl TableCompaction {
    /// The table's line in the command's output; none when it failed (its `failed:`
    /// line says so).
    pub fn line(&self) -> Option<String> {
        if self.failed.is_some() {
            return None;
        }
        let mut line = match (&self.skipped, self.bins) {
            (Some(why), _) => format!("{}: not compacted: {why}", self.table),
            (None, 0) => format!("{}: nothing to compact", self.table),
            (None, bins) => format!(
                "{}: {bins} bin(s) compacted, {} file(s) of {} bytes into {} of {} bytes: {} committed",
                self.table, self.files_in, self.bytes_in, self.files_out, self.bytes_out, self.committed
            ),
        };
        if self.rejected > 0 {
            line.push_str(&format!(", {} rejected (its files changed meanwhile)", self.rejected));
        }
        if self.delete_files_applied > 0 {
            line.push_str(&format!(
                "; {} delete file(s) applied ({} row(s) left out), {} dropped",
                self.delete_files_applied, self.rows_deleted, self.delete_files_dropped
            ));
        }
        if self.rows_expired > 0 {
            line.push_str(&format!("; {} row(s) past the retention removed", self.rows_expired));
        }
        if self.already_queued > 0 {
            line.push_str(&format!("; {} bin(s) queued by an earlier run left alone", self.already_queued));
        }
        if self.released > 0 {
            line.push_str(&format!("; {} held task(s) already in the table released", self.released));
        }
        if self.orphans_removed > 0 {
            line.push_str(&format!("; {} orphan file(s) removed", self.orphans_removed));
        }
        Some(line)
    }
}

/// Compacts (and maintains) every table of `warehouse` on its clock, then commits the
/// compactions.
pub(crate) async fn maintain(warehouse: &Warehouse, config: Arc<FloeConfig>) -> Vec<TableCompaction> {
    let compactor = Compactor {
        catalog: warehouse.catalog.clone(),
        file_io: warehouse.file_io.clone(),
        registry: warehouse.locks.clone(),
        files: warehouse.files.clone(),
        queue: warehouse.queue.clone(),
        config,
        task_store: None,
        sweep: true,
        delta_log: warehouse.delta_log.clone(),
    };
    let run = compactor.run(warehouse.clock.now_ms(), None).await;
    let tasks = warehouse.queue.drain();
    let done = warehouse.committer.commit_all(&tasks, None).await;
    let mut tables: Vec<TableCompaction> = run.tables.into_iter().map(TableCompaction::from).collect();
    for snapshot in &done.snapshots {
        let name = snapshot.table.to_string();
        if let Some(table) = tables.iter_mut().find(|t| t.table == name) {
            table.delete_files_dropped += snapshot.delete_files_dropped;
        }
    }
    for (task, (_, result)) in tasks.iter().zip(&done.results) {
        let name = task.table().to_string();
        let Some(table) = tables.iter_mut().find(|t| t.table == name) else { continue };
        match result {
            TaskResult::Committed => table.committed += 1,
            TaskResult::Rejected { .. } => table.rejected += 1,
            TaskResult::AlreadyCommitted => {}
            TaskResult::Failed { error, .. } => {
                table.failed.get_or_insert_with(|| format!("compaction of {name}: {error}"));
            }
        }
    }
    tables
}

/// `floe local compact`: compacts and maintains the tables of `warehouse` on `clock`,
/// printing a line per table; fails when any table failed.
pub async fn compact(
    warehouse: &Path,
    config: FloeConfig,
    clock: Clock,
    mut out: impl Write,
) -> anyhow::Result<Vec<TableCompaction>> {
    let dir = folder("--warehouse", warehouse, false)?;
    anyhow::ensure!(dir.join("catalog.db").is_file(), "no warehouse at {} (no catalog.db)", warehouse.display());
    let opened = Warehouse::open(dir, clock, &config).await?;
    let tables = maintain(&opened, Arc::new(config)).await;
    for line in tables.iter().filter_map(TableCompaction::line) {
        writeln!(out, "{line}")?;
    }
    if tables.is_empty() {
        writeln!(out, "no tables in {}", warehouse.display())?;
    }
    let failed: Vec<&String> = tables.iter().filter_map(|t| t.failed.as_ref()).collect();
    for failure in &failed {
        writeln!(out, "failed: {failure}")?;
    }
    anyhow::ensure!(failed.is_empty(), "{} failure(s), listed above", failed.len());
    Ok(tables)
}

/// What maintenance did to a table, as `floe local status` shows it (times in RFC 3339).
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MaintenanceView {
    pub last_compaction: Option<CompactionView>,
    pub snapshots_expired: u64,
    pub orphans_removed: u64,
    pub last_sweep: Option<String>,
    /// What fails on the table (commits, compaction, sweep): since when and why; empty
    /// when nothing does.
    pub failing: Vec<FailureView>,
}

/// An activity failing on a table: its last failure.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FailureView {
    /// `commit`, `compaction` or `sweep`.
    pub activity: &'static str,
    pub at: String,
    pub error: String,
}

/// The last compaction committed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CompactionView {
    pub at: String,
    pub files_in: u64,
    pub bytes_in: u64,
    pub files_out: u64,
    pub bytes_out: u64,
    /// Rows other engines' delete files removed that it left out, and the delete files
    /// it removed (applied to every data file they applied to).
    pub rows_deleted: u64,
    pub delete_files_dropped: u64,
    /// Rows past the topic's retention it removed.
    pub rows_expired: u64,
}

impl From<MaintenanceStatus> for MaintenanceView {
    fn from(status: MaintenanceStatus) -> Self {
        MaintenanceView {
            last_compaction: status.last_compaction.map(|c| CompactionView {
                at: time(c.at_ms),
                files_in: c.files_in,
                bytes_in: c.bytes_in,
                files_out: c.files_out,
                bytes_out: c.bytes_out,
                rows_deleted: c.rows_deleted,
                delete_files_dropped: c.delete_files_dropped,
                rows_expired: c.rows_expired,
            }),
            snapshots_expired: status.snapshots_expired,
            orphans_removed: status.orphans_removed,
            last_sweep: status.last_sweep_ms.map(time),
            failing: status
                .failing
                .into_iter()
                .map(|f| FailureView { activity: f.activity.name(), at: time(f.at_ms), error: f.error })
                .collect(),
        }
    }
}

/// `ms` since the epoch in RFC 3339, UTC, to the millisecond.
pub(crate) fn time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map_or_else(|| format!("{ms} ms"), |t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_say_what_was_compacted_or_why_not() {
        let t = |f: fn(&mut TableCompaction)| {
            let mut t = TableCompaction { table: "kafka.orders".into(), ..Default::default() };
            f(&mut t);
            t.line()
        };
        assert_eq!(t(|_| {}).as_deref(), Some("kafka.orders: nothing to compact"));
        assert_eq!(
            t(|t| t.skipped = Some("suspended: bad record".into())).as_deref(),
            Some("kafka.orders: not compacted: suspended: bad record")
        );
        let compacted = |t: &mut TableCompaction| {
            (t.bins, t.files_in, t.bytes_in, t.files_out, t.bytes_out, t.committed) = (2, 9, 900, 2, 800, 1);
            t.rejected = 1;
        };
        assert_eq!(
            t(compacted).as_deref(),
            Some(
                "kafka.orders: 2 bin(s) compacted, 9 file(s) of 900 bytes into 2 of 800 bytes: 1 committed, \
                 1 rejected (its files changed meanwhile)"
            )
        );
        assert_eq!(t(|t| t.failed = Some("compaction of kafka.orders: x".into())), None);
        let both = |t: &mut TableCompaction| {
            (t.bins, t.files_in, t.bytes_in, t.files_out, t.bytes_out, t.committed) = (1, 2, 20, 1, 19, 1);
            t.released = 1;
            (t.delete_files_applied, t.rows_deleted, t.delete_files_dropped) = (2, 5, 1);
            t.rows_expired = 7;
        };
        assert_eq!(
            t(both).as_deref(),
            Some(
                "kafka.orders: 1 bin(s) compacted, 2 file(s) of 20 bytes into 1 of 19 bytes: 1 committed; \
                 2 delete file(s) applied (5 row(s) left out), 1 dropped; 7 row(s) past the retention removed; \
                 1 held task(s) already in the table released"
            )
        );
    }

    #[tokio::test]
    async fn compact_commits_small_files_past_the_window_and_status_shows_it() {
        let dir = tempfile::tempdir().unwrap();
        let (input, warehouse) = (dir.path().join("in"), dir.path().join("wh"));
        let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/segments/orders-0");
        std::fs::create_dir_all(input.join("orders-0")).unwrap();
        for segment in ["00000000000000000000.log", "00000000000000000100.log"] {
            std::fs::copy(samples.join(segment), input.join("orders-0").join(segment)).unwrap();
        }
        let e = compact(&warehouse, FloeConfig::default(), Clock::Wall, Vec::new()).await.unwrap_err().to_string();
        assert!(e.starts_with("--warehouse "), "{e}");
        let mut out = Vec::new();
        crate::local::run(&input, &warehouse, FloeConfig::default(), &mut out).await.unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains("\nkafka.orders: nothing to compact\n"), "two small young files wait: {out}");

        let later = Clock::Shifted { by_ms: 15 * 60 * 1000 };
        let mut out = Vec::new();
        let tables = compact(&warehouse, FloeConfig::default(), later, &mut out).await.unwrap();
        let (bytes_in, bytes_out) = (tables[0].bytes_in, tables[0].bytes_out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!(
                "kafka.orders: 1 bin(s) compacted, 2 file(s) of {bytes_in} bytes into 1 of {bytes_out} bytes: 1 committed\n"
            )
        );
        let status = crate::local::status(&warehouse).await.unwrap();
        let json = serde_json::to_value(&status[0]).unwrap();
        assert_eq!(json["table"], "kafka.orders");
        let compaction = &json["last_compaction"];
        assert_eq!((&compaction["files_in"], &compaction["files_out"]), (&2.into(), &1.into()), "{json}");
        assert_eq!((&compaction["bytes_in"], &compaction["bytes_out"]), (&bytes_in.into(), &bytes_out.into()));
        assert!(compaction["at"].as_str().unwrap().ends_with('Z'), "{json}");
        assert_eq!((&json["snapshots_expired"], &json["orphans_removed"]), (&0.into(), &0.into()));
        assert!(json["last_sweep"].as_str().unwrap().ends_with('Z'), "swept after compacting: {json}");

        let mut out = Vec::new();
        compact(&warehouse, FloeConfig::default(), later, &mut out).await.unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "kafka.orders: nothing to compact\n");
    }

    #[test]
    fn status_times_are_rfc_3339() {
        let status = MaintenanceStatus { last_sweep_ms: Some(1_764_000_000_123), ..Default::default() };
        assert_eq!(MaintenanceView::from(status).last_sweep.as_deref(), Some("2025-11-24T16:00:00.123Z"));
    }
}
