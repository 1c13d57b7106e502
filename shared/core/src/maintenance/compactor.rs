//! The compactor's run: every registered table that is not suspended, planned at `now_ms`,
//! each group's bins (one partition value and Kafka partition) rewritten and queued as a
//! CompactionTask for the committer, then swept.
//!
//! ```text
//!  registry.tables() ─▶ for each table, while the deadline allows:
//!    suspended ─▶ skipped (its tasks wait in the queue; nothing of it is touched)
//!    load ─▶ its topic (from the committed offsets) ─▶ config: compaction policy, grace
//!    held CommitTasks whose offsets the table holds ─▶ released (holding::release_committed;
//!       also when the catalog does the compaction and the sweep)
//!    bins (table::compaction::bins: planned at now_ms, one per group) ─▶ for each bin:
//!       task queued less than an hour ago (held, same id) ─▶ left alone
//!       rewrite ─▶ hold its outputs (registry; a copy queued earlier and not done keeps
//!                  its files held too) ─▶ send (the committer's queue)
//!    sweep (when on): unreferenced files past the grace period, held ones kept
//!  one table's failure (an error, or a library's panic) is reported on its line; the
//!  others go on
//!  each table's compaction and sweep recorded as failing (with the error) or not
//! ```
//!
//! A task's id is a hash of the table, the snapshot planned from and the bin's files, so a
//! run retried from the same snapshot queues the same ids: SQS drops the copies within its
//! five-minute deduplication window, and later the committer rejects a copy whose inputs
//! another already replaced. The committer applies the tasks (one `replace` snapshot per
//! table and batch) only if every input is still live.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use iceberg::io::FileIO;

use super::holding::{hold, release_committed};
use super::rewrite::rewrite_bin;
use super::sweep::{Sweep, SweepReport};
use super::{Activity, DEFAULT_ORPHAN_GRACE_MS, Failure, HeldTask, MaintenanceError, MaintenanceEvent, TableRegistry};
use crate::catalog::Catalog;
use crate::config::{FloeConfig, TopicConfig};
use crate::delta::cache::MirrorCache;
use crate::delta::log::{LOG_RETENTION_MS, expire_log};
use crate::delta::{LogStore, mirror};
use crate::queue::TaskQueue;
use crate::retry::Retryable;
use crate::storage::WarehouseFiles;
use crate::table::compaction::{Bin, CompactionPolicy, Planned, bins, task_id};
use crate::table::retention::Retention;
use crate::table::{LoadedTable, TableError, TableName, committed_offsets, load};
use crate::task::Task;
use crate::vocabulary::Formats;

/// A bin whose task was queued less than this long ago is not rewritten again: the
/// committer applies a task within seconds unless it is failing, and a task lost between
/// its hold and its send (a crashed run) is queued again after this.
pub const REQUEUE_AFTER_MS: i64 = 60 * 60 * 1000;

/// What the compactor needs; the same on AWS (Glue, S3, DynamoDB, SQS) and locally.
pub struct Compactor {
    pub catalog: Arc<dyn Catalog>,
    pub file_io: FileIO,
    pub registry: Arc<dyn TableRegistry>,
    pub files: Arc<dyn WarehouseFiles>,
    /// The committer's queue: each CompactionTask's files are held in the registry first
    /// (by the compactor: give it the plain queue, not a [`super::holding::HoldingQueue`]).
    pub queue: Arc<dyn TaskQueue>,
    /// Per-topic compaction policy and grace period; defaults for tables no topic names.
    pub config: Arc<FloeConfig>,
    /// Where tasks too large for a message are stored (`<store>tasks/<table>/<task id>.json`),
    /// swept like the tables' files; `None` when tasks never spill (local).
    pub task_store: Option<String>,
    /// Whether each table is swept after its compaction (the orphan sweep); off, the run
    /// only compacts.
    pub sweep: bool,
    /// Where the Delta mirrors' logs are (tables whose topic lists Delta are brought in
    /// step each run: a mirror lost between a commit and its Delta commit is made good
    /// here when no task comes again).
    pub delta_log: Arc<dyn LogStore>,
}

/// What one table's maintenance did.
#[derive(Debug, Default)]
pub struct TableRun {
    /// `None`: the run could not list the tables (the error says why).
    pub table: Option<TableName>,
    /// CompactionTasks queued, and the files and bytes they rewrite.
    pub compactions: usize,
    pub files_in: u64,
    pub bytes_in: u64,
    /// The files (and bytes) the queued tasks add.
    pub files_out: u64,
    pub bytes_out: u64,
    /// Bins left alone because their task was queued a moment ago and is not done yet.
    pub already_queued: usize,
    /// Other engines' delete files the queued tasks apply, and the rows they leave out.
    pub delete_files: Vec<String>,
    pub rows_deleted: u64,
    /// Rows past the topic's retention the queued tasks leave out.
    pub rows_expired: u64,
    /// Held CommitTasks released because the table holds all their offsets (a copy sent
    /// again after the commit, which SQS dropped as a duplicate).
    pub released: usize,
    pub sweep: SweepReport,
    /// Why the table was skipped (suspended, not created yet, the deadline), when it was.
    pub skipped: Option<String>,
    pub error: Option<MaintenanceError>,
}

/// What a run did, per table.
#[derive(Debug, Default)]
pub struct RunReport {
    pub tables: Vec<TableRun>,
}

impl Compactor {
    /// Releases the held tasks each registered table not suspended already holds, then
    /// compacts and sweeps it (each when Floe does), on the clock `now_ms`;
    /// tables not started by `deadline` are left for the next run. One table's failure
    /// is reported and the others go on.
    pub async fn run(&self, now_ms: i64, deadline: Option<Instant>) -> RunReport {
        let mut report = RunReport::default();
        let own = self.config.own_maintenance();
        if let Some(left_out) = own.left_out() {
            tracing::info!(reason = %left_out, "maintenance left to the catalog");
        }
        let tables = match self.registry.tables().await {
            Ok(tables) => tables,
            Err(e) => {
                tracing::error!(error = %e, retryable = e.retryable(), "listing the tables to compact failed");
                report.tables.push(TableRun { error: Some(e.into()), ..Default::default() });
                return report;
            }
        };
        for registered in tables {
            let table = registered.table;
            let mut run = TableRun { table: Some(table.clone()), ..Default::default() };
            if past(deadline) {
                run.skipped = Some("left for the next run (the run's time is up)".into());
            } else if let Some(reason) = registered.suspended {
                tracing::info!(table = %table, %reason, "suspended: not compacted");
                run.skipped = Some(format!("suspended: {reason}"));
            } else if let Err(e) = self.guarded(&table, self.table(&table, now_ms, deadline, &mut run)).await {
                tracing::error!(table = %table, error = %e, retryable = e.retryable(), "maintenance failed");
                run.error = Some(e);
            }
            report.tables.push(run);
        }
        report
    }

    /// `work` on `table`, a panic in a library (on a file's values) turned into an error
    /// of this table: one table's failure never stops the run.
    async fn guarded(
        &self,
        table: &TableName,
        work: impl std::future::Future<Output = Result<(), MaintenanceError>>,
    ) -> Result<(), MaintenanceError> {
        let panicked = |panic| Err(MaintenanceError::Internal { table: table.to_string(), panic });
        crate::guard::guarded(work).await.unwrap_or_else(panicked)
    }

    /// Releases the held tasks the table already holds, compacts it, then sweeps it
    /// (each when on): the sweep runs even when the compaction failed, so a table that
    /// cannot be compacted is still cleaned.
    async fn table(
        &self,
        table: &TableName,
        now_ms: i64,
        deadline: Option<Instant>,
        run: &mut TableRun,
    ) -> Result<(), MaintenanceError> {
        let prepared = self.prepare(table).await;
        if prepared.is_err() {
            self.note_outcome(table, Activity::Compaction, now_ms, &prepared).await;
        }
        let Some((loaded, topic)) = prepared? else {
            run.skipped = Some("not in the catalog yet".into());
            return Ok(());
        };
        run.released = self.release_committed(&loaded).await;
        let own = self.config.own_maintenance();
        let compacted = match own.compaction {
            true => {
                let policy = topic.as_ref().map(CompactionPolicy::from).unwrap_or_default();
                let compacted = match retention(&loaded, topic.as_ref(), now_ms) {
                    Ok(retention) => {
                        let formats = topic.as_ref().map(|t| t.formats).unwrap_or_default();
                        self.compact_table(&loaded, (policy, formats), retention, now_ms, deadline, run).await
                    }
                    Err(e) => Err(e),
                };
                self.note_outcome(table, Activity::Compaction, now_ms, &compacted).await;
                compacted
            }
            false => Ok(()),
        };
        // A Delta-only topic's table is mirrored whatever its topic lists now.
        let delta_only = crate::catalog::split::is_delta_only(&loaded.metadata);
        if delta_only || topic.as_ref().is_some_and(|t| t.formats.delta()) {
            let mirrored = self.mirror_delta(&loaded, now_ms).await;
            self.note_outcome(table, Activity::Delta, now_ms, &mirrored).await;
            if let Err(e) = mirrored {
                tracing::error!(table = %table, error = %e, "Delta mirror failed");
            }
        }
        if !(self.sweep && own.orphan_sweep) {
            return compacted;
        }
        // The sweep (maintenance/sweep.rs): after compaction, whose outputs are held.
        let grace_ms = topic.map_or(DEFAULT_ORPHAN_GRACE_MS, |t| t.orphan_grace_ms);
        let swept = self.sweep_table(&loaded, grace_ms, now_ms).await;
        self.note_outcome(table, Activity::Sweep, now_ms, &swept).await;
        match swept {
            Ok(report) => run.sweep = report,
            Err(e) if compacted.is_ok() => return Err(e),
            Err(e) => tracing::error!(table = %table, error = %e, "sweep failed (after a failed compaction)"),
        }
        compacted
    }

    /// The table loaded, with the configuration of its topic; `None` when it is not in
    /// the catalog yet.
    async fn prepare(&self, table: &TableName) -> Result<Option<(LoadedTable, Option<TopicConfig>)>, MaintenanceError> {
        let Some(loaded) = load(self.catalog.as_ref(), &self.file_io, table).await? else { return Ok(None) };
        let topic = self.topic_config(&loaded)?;
        Ok(Some((loaded, topic)))
    }

    /// Records whether `activity` failed on the table (what status shows as failing) or
    /// succeeded; best effort: the record is for operators.
    async fn note_outcome<T>(
        &self,
        table: &TableName,
        activity: Activity,
        now_ms: i64,
        outcome: &Result<T, MaintenanceError>,
    ) {
        let event = match outcome {
            Ok(_) => MaintenanceEvent::Succeeded(activity),
            Err(e) => MaintenanceEvent::Failed(Failure { activity, at_ms: now_ms, error: e.to_string() }),
        };
        if let Err(e) = self.registry.record(table, &event).await {
            tracing::warn!(table = %table, ?event, error = %e, "recording a maintenance outcome failed");
        }
    }

    /// Releases the table's held CommitTasks whose offsets it holds (see
    /// [`release_committed`]); how many. Best effort: a failure is logged, and the tasks
    /// stay held (their files kept) until the next run.
    async fn release_committed(&self, loaded: &LoadedTable) -> usize {
        let released = match committed_offsets(&loaded.name, &loaded.metadata) {
            Ok(committed) => release_committed(self.registry.as_ref(), &loaded.name, &committed).await,
            Err(e) => {
                tracing::warn!(table = %loaded.name, error = %e, "reading the committed offsets failed: holds kept");
                return 0;
            }
        };
        released.map(|ids| ids.len()).unwrap_or_else(|e| {
            tracing::warn!(table = %loaded.name, error = %e, retryable = e.retryable(),
                "releasing held tasks already in the table failed: they stay held until the next run");
            0
        })
    }

    /// The configuration of the topic the table holds (named by its committed offsets),
    /// `None` for a table without offsets or whose topic is no longer configured.
    fn topic_config(&self, loaded: &LoadedTable) -> Result<Option<TopicConfig>, MaintenanceError> {
        let offsets = committed_offsets(&loaded.name, &loaded.metadata)?;
        Ok(offsets.topic().and_then(|topic| self.config.resolve(topic)))
    }

    /// Plans the table at `now_ms`, rewrites each bin, holds its outputs and queues its
    /// task; stops starting bins past `deadline` (the rest wait for the next run).
    async fn compact_table(
        &self,
        loaded: &LoadedTable,
        (policy, formats): (CompactionPolicy, Formats),
        retention: Option<Retention>,
        now_ms: i64,
        deadline: Option<Instant>,
        run: &mut TableRun,
    ) -> Result<(), MaintenanceError> {
        let (table, metadata) = (&loaded.name, &loaded.metadata);
        let iceberg = TableError::iceberg(table);
        let planned = bins(&self.file_io, metadata, policy, retention, now_ms).await.map_err(&iceberg)?;
        let bins = &planned.bins;
        if bins.is_empty() {
            return Ok(());
        }
        let held: HashMap<String, HeldTask> =
            self.registry.held_tasks(table).await?.into_iter().map(|t| (t.task_id.clone(), t)).collect();
        for bin in bins {
            if past(deadline) {
                tracing::info!(table = %table, left = bins.len() - run.compactions - run.already_queued,
                    "the run's time is up: the table's other bins wait for the next run");
                break;
            }
            let earlier = held.get(&task_id(table, metadata.current_snapshot_id(), bin));
            if earlier.is_some_and(|t| now_ms.saturating_sub(t.held_at_ms) < REQUEUE_AFTER_MS) {
                run.already_queued += 1;
                continue;
            }
            self.queue_bin(loaded, (policy, formats), &planned, bin, earlier, now_ms, run).await?;
        }
        tracing::info!(table = %table, compactions = run.compactions, files = run.files_in, bytes = run.bytes_in,
            already_queued = run.already_queued, "compaction queued");
        Ok(())
    }

    /// Rewrites one bin; its outputs held (added to those of an `earlier` copy of the
    /// task, queued over [`REQUEUE_AFTER_MS`] ago and not done: its message may still
    /// come), its task sent.
    #[allow(clippy::too_many_arguments)]
    async fn queue_bin(
        &self,
        loaded: &LoadedTable,
        (policy, formats): (CompactionPolicy, Formats),
        planned: &Planned,
        bin: &Bin,
        earlier: Option<&HeldTask>,
        now_ms: i64,
        run: &mut TableRun,
    ) -> Result<(), MaintenanceError> {
        let (table, metadata) = (&loaded.name, &loaded.metadata);
        let mut task = rewrite_bin(&self.file_io, table, metadata, policy, planned, bin, now_ms)
            .await
            .map_err(TableError::iceberg(table))?;
        task.formats = formats;
        let (files_out, bytes_out) = (task.added.len() as u64, task.added.iter().map(|f| f.size()).sum::<u64>());
        let delete_files: Vec<String> = task.deletes_applied.iter().map(|d| d.path.clone()).collect();
        let (rows_deleted, rows_expired) = task.left_out.as_ref().map_or((0, 0), |l| (l.deleted, l.expired));
        let task = Task::Compaction(Box::new(task));
        hold(self.registry.as_ref(), &task, now_ms).await?;
        if let Err(e) = self.queue.send(&task).await {
            // Not queued: its outputs are orphans, planned again next run. An earlier copy
            // keeps everything held until it is done (these outputs then go too).
            if earlier.is_none()
                && let Err(undo) = self.registry.release_tasks(table, &[task.task_id().to_string()]).await
            {
                tracing::warn!(table = %table, task_id = %task.task_id(), error = %undo,
                    "releasing a task that could not be queued failed; its outputs stay held");
            }
            return Err(e.into());
        }
        run.compactions += 1;
        run.files_in += bin.files.len() as u64;
        run.bytes_in += bin.bytes();
        run.files_out += files_out;
        run.bytes_out += bytes_out;
        run.delete_files.extend(delete_files);
        run.delete_files.sort();
        run.delete_files.dedup();
        run.rows_deleted += rows_deleted;
        run.rows_expired += rows_expired;
        Ok(())
    }

    /// Brings the table's Delta mirror in step (a mirror lost between a commit and its
    /// Delta commit, whose tasks never come back), then deletes its log files past their
    /// retention.
    async fn mirror_delta(&self, loaded: &LoadedTable, now_ms: i64) -> Result<(), MaintenanceError> {
        let (store, location) = (self.delta_log.as_ref(), loaded.metadata.location());
        // A run mirrors each table once: nothing is kept for a next one.
        mirror(store, &self.file_io, loaded, now_ms, &MirrorCache::default()).await?;
        expire_log(store, location, now_ms, LOG_RETENTION_MS).await?;
        Ok(())
    }

    /// Sweeps the table's orphan files (see [`Sweep`]).
    pub async fn sweep_table(
        &self,
        loaded: &LoadedTable,
        grace_ms: u64,
        now_ms: i64,
    ) -> Result<SweepReport, MaintenanceError> {
        let sweep = Sweep {
            file_io: &self.file_io,
            files: self.files.as_ref(),
            registry: self.registry.as_ref(),
            task_store: self.task_store.as_deref(),
            grace_ms: i64::try_from(grace_ms).unwrap_or(i64::MAX),
            delta_log: self.delta_log.as_ref(),
        };
        sweep.table(&loaded.name, &loaded.metadata, &loaded.pointer.metadata_location, now_ms).await
    }
}

/// The topic's retention bound to the table at `now_ms` (none configured: `None`); a
/// column that cannot measure a row's age fails the table's compaction, naming it.
fn retention(
    loaded: &LoadedTable,
    topic: Option<&TopicConfig>,
    now_ms: i64,
) -> Result<Option<Retention>, MaintenanceError> {
    let Some((topic, retention_ms)) = topic.and_then(|t| t.retention_ms.map(|ms| (t, ms))) else { return Ok(None) };
    Retention::bind(loaded.metadata.current_schema(), &topic.retention_column, now_ms, retention_ms)
        .map(Some)
        .map_err(|detail| MaintenanceError::Config { table: loaded.name.to_string(), detail })
}

fn past(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| Instant::now() >= d)
}
