//! The committer: batches of CommitTasks → at most one snapshot per table, exactly once.
//!
//! ```text
//!  suspend tasks (a bad record, mode `suspend`) ─▶ the table's status: suspended, why
//!  tasks (FIFO order) ─▶ group by table ─▶ the tables at once, at most `concurrency`
//!  commits in flight (`lanes.rs`); per table: its compactions (one `replace` snapshot),
//!  the dead letters it takes, then its new data (one `append` snapshot), each so:
//!     suspended? ─▶ every task kept (failed, stays in the queue)
//!     lease (owner, expiry, fencing) ─ held elsewhere ─▶ tasks kept, retried later
//!     loop (bounded attempts, within the deadline):
//!        load (create on the first task) ─▶ Floe's record: committed offsets + pending
//!                                           transactions, from the newest snapshot Floe
//!                                           wrote (other engines' snapshots carry none)
//!        plan (pure, [`plan`]) ─▶ per-task results, files to add / trim / lay out again,
//!                                 offsets, state, evolved schema
//!                                 incompatible schema: table suspended, tasks kept
//!        apply: rewrite what the plan says, under names new to this attempt
//!        one append snapshot: files + offsets (+ schema, + pending state)
//!        lease still ours? ─ no ─▶ abort
//!        catalog compare-and-swap ─ conflict ─▶ reload, plan again, retry
//!  a task's dead-letter table first, the same way, with its dead-letter files: its
//!  main table waits for that commit and takes the task only if it succeeded, so the
//!  main table covering a segment means the segment is done.
//!  then, best effort (never failing a commit that succeeded), in the registry:
//!     tasks committed, already committed or rejected ─▶ released (their files held no more)
//!     a compaction committed ─▶ recorded (files and bytes in → out)
//!     snapshots expired by a commit ─▶ counted
//!     a table's commit (or compaction commit) failed ─▶ recorded as failing, with the
//!     error, until its next one succeeds
//!     its lease held by another owner (tasks given back) ─▶ recorded as the lease
//!     failing, naming the holder, until a commit succeeds
//!     a task refused (another topic's: a topic clash) ─▶ recorded as a config failure
//!     a bad record suspended the table ─▶ the record (topic, partition, offset) kept
//! ```
//!
//! A new table is created with the first task's schema and partition spec; after that
//! the table's spec is the one every file is recorded under, with its partition value.
//!
//! Why duplicates cannot happen: the offsets a snapshot records are computed from the
//! snapshot it replaces, and the swap only succeeds if that snapshot is still current. A
//! task delivered twice, a crash between the swap and the queue delete, or two
//! committers racing all end with the second attempt finding its offsets covered.

mod dead_letters;
mod lanes;
pub mod plan;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iceberg::io::FileIO;
use iceberg::spec::{DataFile, Operation, PartitionSpec};

use crate::catalog::{Catalog, CatalogError};
use crate::datafile::WriterOptions;
use crate::guard::guarded;
use crate::lock::{Clock, Lease, LockError, TableLocks, hold};
use crate::maintenance::holding::held_files;
use crate::maintenance::{Activity, CompactionRecord, Failure, MaintenanceEvent, RecordAt, TableRegistry};
use crate::metrics;
use crate::partition::describe;
use crate::retry::RetryPolicy;
use crate::table::deletes::rewritable_files;
use crate::table::rewrite::rewrite_files;
use crate::table::snapshot::{METADATA_DELETE_AFTER_COMMIT, SnapshotChange, live_data_files, stage_snapshot};
use crate::table::state::{STATE_KEY, TableState};
use crate::table::{
    LoadedTable, TableError, committed_offsets, create, floe_summary, load, rowless_offsets, table_location,
};
use crate::task::{CommitTask, CompactionTask, SuspendTask, TableName, Task, TaskFile, TaskSchema, retype_partition};
use plan::{AppendPlan, CompactionVerdict, FileAction, PlannedFile, TableRecord, plan_append, plan_compactions};

/// What became of one task.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskResult {
    /// Its new offsets are in the table now.
    Committed,
    /// The table already held all its offsets: nothing to do.
    AlreadyCommitted,
    /// Not committed; the task must stay in the queue.
    Failed { error: String, retryable: bool },
    /// A compaction whose inputs are no longer all live: dropped, its outputs orphans.
    Rejected { reason: String },
}

#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    #[error(transparent)]
    Table(#[from] TableError),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error("{table}: incompatible schema, table suspended: {reason}")]
    Incompatible { table: String, reason: String },
    #[error("{table}: task {task_id}: {detail}")]
    Task { table: String, task_id: String, detail: String },
    /// A panic in a library the commit called (a bug, ours or theirs): the lease is
    /// released and the tasks stay queued, not retried here.
    #[error("{table}: internal error while committing (a bug; the tasks stay queued): {detail}")]
    Internal { table: String, detail: String },
}

impl CommitError {
    pub fn retryable(&self) -> bool {
        match self {
            CommitError::Table(e) => e.retryable(),
            CommitError::Lock(e) => e.retryable(),
            CommitError::Incompatible { .. } | CommitError::Task { .. } | CommitError::Internal { .. } => false,
        }
    }

    fn is_conflict(&self) -> bool {
        matches!(self, CommitError::Table(TableError::Catalog(CatalogError::Conflict { .. })))
    }
}

/// One committed snapshot, for the caller's report.
#[derive(Debug, Clone)]
pub struct CommittedSnapshot {
    pub table: TableName,
    pub snapshot_id: i64,
    pub tasks: usize,
    pub files: usize,
    pub records: u64,
}

/// The outcome of a batch.
#[derive(Debug, Default)]
pub struct BatchReport {
    /// Per task id, in the order the tasks came.
    pub results: Vec<(String, TaskResult)>,
    pub snapshots: Vec<CommittedSnapshot>,
}

pub struct Committer {
    pub catalog: Arc<dyn Catalog>,
    pub file_io: FileIO,
    pub locks: Arc<dyn TableLocks>,
    /// Where tasks' files are held until the committer is done with them, and what
    /// maintenance did is recorded (the lock store, on AWS and locally).
    pub registry: Arc<dyn TableRegistry>,
    /// Where new tables are created: `<warehouse>/<namespace>.db/<table>`.
    pub warehouse: String,
    /// Who holds the leases (the Lambda's request id, the process).
    pub owner: String,
    pub lease_ttl: Duration,
    /// Attempts per table on catalog conflicts, waiting between them.
    pub retry: RetryPolicy,
    /// How many tables of a batch are committed at once (at least 1; default
    /// [`DEFAULT_CONCURRENCY`]): a batch then takes about its slowest tables' time
    /// instead of the sum of all of them.
    pub concurrency: usize,
    /// The time commits are stamped with (never before the table's last commit:
    /// [`crate::table::snapshot::commit_timestamp_ms`]) and snapshots expire on.
    pub clock: Clock,
}

/// Tables of a batch committed at once unless configured otherwise: all of them, as a
/// batch of 10 tasks (SQS FIFO's most) spans at most 10 tables and each commit mostly
/// waits on S3, Glue and DynamoDB; a batch then takes about one commit's time.
pub const DEFAULT_CONCURRENCY: usize = 10;

impl Committer {
    /// Commits a batch of any tasks: per table, its compactions first (one `replace`
    /// snapshot), then its new data (one `append` snapshot), different tables at once (see
    /// [`Committer::concurrency`]). Results in the tasks' order.
    /// The tasks done with (committed, already committed, rejected) are released from
    /// the registry.
    pub async fn commit_all(&self, tasks: &[Task], deadline: Option<Instant>) -> BatchReport {
        // Suspensions first: the batch's other tasks for those tables are then kept.
        let mut suspended = Vec::new();
        for task in tasks {
            if let Task::Suspend(s) = task {
                suspended.push((s.task_id.clone(), self.suspend(s).await));
            }
        }
        let compactions: Vec<CompactionTask> = tasks
            .iter()
            .filter_map(|t| if let Task::Compaction(c) = t { Some(CompactionTask::clone(c)) } else { None })
            .collect();
        let data: Vec<CommitTask> = tasks
            .iter()
            .filter_map(|t| if let Task::Data(d) = t { Some(CommitTask::clone(d)) } else { None })
            .collect();
        let mut report = self.commit_lanes(&compactions, &data, deadline).await;
        let mut results: HashMap<String, TaskResult> = report.results.drain(..).collect();
        results.extend(suspended);
        report.results = tasks
            .iter()
            .map(|t| {
                (t.task_id().to_string(), results.get(t.task_id()).cloned().unwrap_or(TaskResult::AlreadyCommitted))
            })
            .collect();
        self.release_done(tasks, &report.results).await;
        report
    }

    /// Releases the tasks done with (`results` in the order of `tasks`) from every table
    /// holding their files; a task that failed stays held, its files kept from the sweep.
    /// Best effort: a release that fails leaves files held (kept) until the task's id is
    /// released again, never a commit undone.
    async fn release_done(&self, tasks: &[Task], results: &[(String, TaskResult)]) {
        let mut done: BTreeMap<TableName, Vec<String>> = BTreeMap::new();
        for (task, (_, result)) in tasks.iter().zip(results) {
            if matches!(result, TaskResult::Failed { .. }) {
                continue;
            }
            for table in held_files(task).into_keys() {
                done.entry(table).or_default().push(task.task_id().to_string());
            }
        }
        for (table, ids) in done {
            if let Err(e) = self.registry.release_tasks(&table, &ids).await {
                tracing::warn!(table = %table, tasks = ids.len(), error = %e,
                    "releasing done tasks failed; their files stay held");
            }
        }
    }

    /// Records what maintenance did; best effort: the record is for operators, the
    /// commit it describes is done.
    async fn note(&self, table: &TableName, event: MaintenanceEvent) {
        if let Err(e) = self.registry.record(table, &event).await {
            tracing::warn!(table = %table, ?event, error = %e, "recording a maintenance event failed");
        }
    }

    /// Records whether `activity` failed on the table (what status shows as failing) or
    /// succeeded (failing no more); best effort, as [`Self::note`]. A suspension is shown
    /// as such, not as a failure.
    async fn note_outcome<T>(&self, table: &TableName, activity: Activity, outcome: &Result<T, CommitError>) {
        let event = match outcome {
            Ok(_) => MaintenanceEvent::Succeeded(activity),
            Err(CommitError::Incompatible { .. }) => return,
            Err(e) => {
                MaintenanceEvent::Failed(Failure { activity, at_ms: crate::lock::now_ms(), error: e.to_string() })
            }
        };
        self.note(table, event).await;
    }

    /// Records a commit's refused tasks as the table's configuration issue (a plan that
    /// commits fails a task only when it refuses it: another topic's, a topic clash), or
    /// the configuration as fine when none was refused.
    async fn note_refusals(&self, table: &TableName, results: &[(String, TaskResult)]) {
        let refused = results.iter().find_map(|(_, r)| match r {
            TaskResult::Failed { error, .. } => Some(error.clone()),
            _ => None,
        });
        let event = match refused {
            Some(error) => {
                MaintenanceEvent::Failed(Failure { activity: Activity::Config, at_ms: crate::lock::now_ms(), error })
            }
            None => MaintenanceEvent::Succeeded(Activity::Config),
        };
        self.note(table, event).await;
    }

    /// Marks a table suspended, naming the bad record (see [`SuspendTask`]).
    async fn suspend(&self, task: &SuspendTask) -> TaskResult {
        let reason = task.reason();
        tracing::error!(table = %task.table, topic = %task.topic, partition = task.partition, offset = task.offset,
            %reason, "bad record in suspend mode: table suspended, its tasks kept");
        match self.locks.set_suspended(&task.table.to_string(), Some(&reason)).await {
            Ok(()) => {
                let record = RecordAt {
                    topic: task.topic.clone(),
                    partition: task.partition,
                    offset: task.offset,
                    file: task.file.clone(),
                };
                self.note(&task.table, MaintenanceEvent::SuspendedBy(Some(record))).await;
                TaskResult::Committed
            }
            Err(e) => TaskResult::Failed { error: format!("suspending {}: {e}", task.table), retryable: e.retryable() },
        }
    }

    /// Applies compactions, per table in one `replace` snapshot: each whose inputs are all
    /// live, without another engine's delete file applying to them (one added since the
    /// plan), and not taken by an earlier one of the batch; the others are rejected.
    /// Different tables are committed concurrently (see [`Committer::concurrency`]).
    pub async fn compact(&self, tasks: &[CompactionTask], deadline: Option<Instant>) -> BatchReport {
        self.commit_lanes(tasks, &[], deadline).await
    }

    /// One table's compactions in one `replace` snapshot, under the table's lease.
    async fn compact_table(
        &self,
        table: &TableName,
        tasks: &[&CompactionTask],
        deadline: Option<Instant>,
    ) -> (Vec<(String, TaskResult)>, Option<CommittedSnapshot>) {
        let fail_all = |error: String, retryable: bool| {
            let results =
                tasks.iter().map(|t| (t.task_id.clone(), TaskResult::Failed { error: error.clone(), retryable }));
            (results.collect(), None)
        };
        let mut lease = match self.acquire(table).await {
            Ok(lease) => lease,
            Err((error, retryable)) => return fail_all(error, retryable),
        };
        let outcome = self
            .guarded_attempts(table, &mut lease, deadline, async |lease| self.try_compact(table, tasks, lease).await)
            .await;
        self.release(table, &lease).await;
        self.note_outcome(table, Activity::Compaction, &outcome).await;
        match outcome {
            Ok(done) => done,
            Err(e) => {
                tracing::error!(table = %table, error = %e, "compaction commit failed");
                fail_all(e.to_string(), e.retryable())
            }
        }
    }

    async fn try_compact(
        &self,
        table: &TableName,
        tasks: &[&CompactionTask],
        lease: &mut Lease,
    ) -> Result<(Vec<(String, TaskResult)>, Option<CommittedSnapshot>), CommitError> {
        let iceberg = TableError::iceberg(table);
        let loaded = load(self.catalog.as_ref(), &self.file_io, table).await?.ok_or_else(|| CommitError::Task {
            table: table.to_string(),
            task_id: tasks[0].task_id.clone(),
            detail: "compaction of a table that does not exist".into(),
        })?;
        let metadata = &loaded.metadata;
        let sizes: HashMap<String, u64> = live_data_files(&self.file_io, metadata)
            .await
            .map_err(&iceberg)?
            .iter()
            .map(|f| (f.file_path().to_string(), f.file_size_in_bytes()))
            .collect();
        // An input another engine's delete file now applies to (deleted since the plan)
        // counts as gone: rewritten, its deleted rows would come back.
        let (rewritable, _) = rewritable_files(&self.file_io, metadata).await.map_err(&iceberg)?;
        let live: HashSet<String> = rewritable.iter().map(|f| f.file.file_path().to_string()).collect();
        let spec = metadata.default_partition_spec();
        let verdicts = plan_compactions(&live, spec, tasks);
        let mut results = Vec::new();
        let (mut removed, mut added) = (HashSet::new(), Vec::new());
        // Planned before a promotion committed since: partition values of the new type.
        let table_type = spec.partition_type(metadata.current_schema()).map_err(&iceberg)?;
        for (task, verdict) in tasks.iter().zip(verdicts) {
            if let CompactionVerdict::Rejected(reason) = verdict {
                tracing::warn!(table = %table, task_id = %task.task_id, %reason, "compaction rejected");
                results.push((task.task_id.clone(), TaskResult::Rejected { reason }));
                continue;
            }
            let written_type = spec.partition_type(&task.schema).map_err(&iceberg)?;
            for file in &task.added {
                let file = file.data_file(&task.schema, task.partition_spec.as_ref()).map_err(&iceberg)?;
                added.push(
                    retype_partition(file, &task.schema, spec.spec_id(), &written_type, &table_type)
                        .map_err(&iceberg)?,
                );
            }
            removed.extend(task.removed.iter().cloned());
            results.push((task.task_id.clone(), TaskResult::Committed));
        }
        if removed.is_empty() {
            return Ok((results, None));
        }
        // Offsets, pending transactions and the rest of Floe's record carry forward unchanged.
        let mut properties = floe_summary(metadata);
        let tasks_done = results.iter().filter(|(_, r)| *r == TaskResult::Committed).count();
        properties.insert("floe.compactions".into(), tasks_done.to_string());
        properties.insert("floe.committer".into(), self.owner.clone());
        properties.insert("floe.fencing".into(), lease.fencing.to_string());
        let (files, records) = (added.len(), added.iter().map(|f| f.record_count()).sum::<u64>());
        let bytes_out = added.iter().map(|f| f.file_size_in_bytes()).sum::<u64>();
        let bytes_in = removed.iter().filter_map(|p| sizes.get(p)).sum::<u64>();
        let files_in = removed.len() as u64;
        let change = SnapshotChange { operation: Operation::Replace, added, removed, properties, new_schema: None };
        let (snapshot_id, at_ms) = self.publish(&loaded, change, lease).await?;
        tracing::info!(table = %table, snapshot_id, compactions = tasks_done, files_in, bytes_in, files, bytes_out,
            "compaction committed");
        let record = CompactionRecord { at_ms, files_in, bytes_in, files_out: files as u64, bytes_out };
        self.note(table, MaintenanceEvent::Compacted(record)).await;
        let snapshot = CommittedSnapshot { table: table.clone(), snapshot_id, tasks: tasks_done, files, records };
        Ok((results, Some(snapshot)))
    }

    /// Commits a batch; one snapshot per table at most (plus one per dead-letter table),
    /// a task's dead-letter table before its main table. Different tables are committed
    /// concurrently (see [`Committer::concurrency`]).
    pub async fn commit(&self, tasks: &[CommitTask], deadline: Option<Instant>) -> BatchReport {
        self.commit_lanes(&[], tasks, deadline).await
    }

    async fn commit_table(
        &self,
        table: &TableName,
        tasks: &[&CommitTask],
        deadline: Option<Instant>,
    ) -> (Vec<(String, TaskResult)>, Option<CommittedSnapshot>) {
        let fail_all = |error: String, retryable: bool| {
            let results = tasks
                .iter()
                .map(|t| (t.task_id.clone(), TaskResult::Failed { error: error.clone(), retryable }))
                .collect();
            (results, None)
        };
        let key = table.to_string();
        match self.locks.suspended(&key).await {
            Ok(Some(reason)) => return fail_all(format!("{table} is suspended: {reason}"), false),
            Ok(None) => {}
            Err(e) => return fail_all(e.to_string(), e.retryable()),
        }
        let started = Instant::now();
        let mut lease = match self.acquire(table).await {
            Ok(lease) => lease,
            Err((error, retryable)) => return fail_all(error, retryable),
        };
        let outcome = self
            .guarded_attempts(table, &mut lease, deadline, async |lease| self.try_commit(table, tasks, lease).await)
            .await;
        self.release(table, &lease).await;
        metrics::record_table(&metrics::COMMIT_LATENCY, &key, started.elapsed().as_secs_f64() * 1000.0);
        if outcome.is_err() {
            metrics::record_table(&metrics::COMMIT_FAILURES, &key, tasks.len() as f64);
        }
        self.note_outcome(table, Activity::Commit, &outcome).await;
        if let Ok(appended) = &outcome {
            self.note_refusals(table, &appended.results).await;
        }
        match outcome {
            Ok(appended) => {
                if appended.dead_letters_queued {
                    self.publish_dead_letters(table, deadline).await;
                }
                for s in &appended.suspensions {
                    let (topic, bad) = (crate::table::offsets::topic_of(&s.topic), &s.record);
                    let suspend =
                        SuspendTask::new(table.clone(), topic, s.partition, bad.offset, &bad.file, &bad.error);
                    if let TaskResult::Failed { error, .. } = self.suspend(&suspend).await {
                        tracing::error!(table = %table, offset = bad.offset, %error,
                            "a committed transaction's bad record could not suspend the table");
                    }
                }
                (appended.results, appended.snapshot)
            }
            Err(CommitError::Incompatible { table: t, reason }) => {
                tracing::error!(table = %t, %reason, "incompatible schema: table suspended, its tasks kept");
                if let Err(e) = self.locks.set_suspended(&key, Some(&reason)).await {
                    return fail_all(format!("suspending {t}: {e}"), true);
                }
                fail_all(format!("{t} suspended: {reason}"), false)
            }
            Err(e) => {
                tracing::error!(table = %table, error = %e, retryable = e.retryable(), "commit failed");
                fail_all(e.to_string(), e.retryable())
            }
        }
    }

    /// Writes the snapshot and moves the table's pointer to it, if the lease is still
    /// ours (a lost one aborts) and nobody moved the pointer since `loaded`; returns the
    /// snapshot's id and the time it was committed at on [`Committer::clock`] (its stamp
    /// is later when the table's last commit is). The snapshots it expired are counted in
    /// the registry.
    async fn publish(
        &self,
        loaded: &LoadedTable,
        change: SnapshotChange,
        lease: &mut Lease,
    ) -> Result<(i64, i64), CommitError> {
        let now = self.clock.now_ms();
        let added = change.added.len();
        let new = stage_snapshot(&self.file_io, &loaded.metadata, &loaded.pointer.metadata_location, change, now)
            .await
            .map_err(TableError::iceberg(&loaded.name))?;
        // A catalog that writes its own metadata file from the swap (REST) would leave
        // Floe's unreferenced: none is written, so none is left behind whatever the
        // outcome, and nothing has to be deleted after a commit whose outcome is unknown.
        if !self.catalog.writes_metadata() {
            new.write(&self.file_io).await.map_err(TableError::iceberg(&loaded.name))?;
        }
        *lease = self.locks.renew(lease, self.lease_ttl).await?;
        let snapshot_id = new.metadata.current_snapshot_id().unwrap_or_default();
        if let Err(e) = self.catalog.swap(&loaded.name, &loaded.pointer, &new.metadata, &new.location).await {
            self.check_outcome(&loaded.name, snapshot_id, e).await?;
        }
        if new.metadata.properties().get(METADATA_DELETE_AFTER_COMMIT).is_some_and(|v| v == "true") {
            Self::delete_metadata_files(&self.file_io, &loaded.name, &new.expired_metadata_files).await;
        }
        // One snapshot added: the others missing were expired.
        let expired = (loaded.metadata.snapshots().count() + 1).saturating_sub(new.metadata.snapshots().count());
        metrics::record_table(&metrics::FILES_COMMITTED, &loaded.name.to_string(), added as f64);
        if expired > 0 {
            metrics::record_table(&metrics::SNAPSHOTS_EXPIRED, &loaded.name.to_string(), expired as f64);
            self.note(&loaded.name, MaintenanceEvent::SnapshotsExpired(expired as u64)).await;
        }
        Ok((new.metadata.current_snapshot_id().unwrap_or_default(), now))
    }

    /// The outcome of a swap that failed without a verdict (its answer lost, or a 5xx the
    /// catalog may have sent after applying it), found by loading the table again: it
    /// holds `snapshot_id` (the commit happened: `Ok`), or it does not (nothing was
    /// committed: a retryable error saying so). A refusal (a conflict, a non-retryable
    /// error) is a verdict and is returned as it is.
    async fn check_outcome(&self, table: &TableName, snapshot_id: i64, error: CatalogError) -> Result<(), CommitError> {
        if error.is_conflict() || !error.retryable() {
            return Err(CommitError::Table(error.into()));
        }
        let unknown = |detail: String| {
            let detail = format!("commit outcome unknown ({error}); {detail}");
            CommitError::Table(CatalogError::Other { table: table.to_string(), detail, retryable: true }.into())
        };
        match load(self.catalog.as_ref(), &self.file_io, table).await {
            Ok(Some(now)) if now.metadata.snapshot_by_id(snapshot_id).is_some() => {
                tracing::warn!(table = %table, snapshot_id, error = %error,
                    "commit outcome unknown; checked: the table holds the snapshot, so it was committed");
                Ok(())
            }
            Ok(_) => Err(unknown(format!(
                "checked: the table does not hold snapshot {snapshot_id}, so nothing was committed"
            ))),
            Err(check) => {
                Err(unknown(format!("checking it failed too ({check}): a retry finds out, skipping what is committed")))
            }
        }
    }

    /// Takes the table's lease; the error says why not and whether to retry. A lease held
    /// by another owner gives the tasks back: recorded as the lease failing, naming the
    /// holder, until a commit succeeds or the lease comes free (status shows it so).
    async fn acquire(&self, table: &TableName) -> Result<Lease, (String, bool)> {
        let key = table.to_string();
        match self.locks.acquire(&key, &self.owner, self.lease_ttl).await {
            Ok(Some(lease)) => Ok(lease),
            Ok(None) => {
                let holder = self.locks.peek(&key, &self.owner).await.ok().flatten();
                let by = holder.map_or_else(|| "another committer".to_string(), |h| h.to_string());
                tracing::warn!(table = %table, holder = %by, "lease held by another owner: tasks given back");
                let error = format!("held by {by}: tasks given back");
                let failure = Failure { activity: Activity::Lease, at_ms: crate::lock::now_ms(), error };
                self.note(table, MaintenanceEvent::Failed(failure)).await;
                Err((format!("{table} is being committed by another committer ({by})"), true))
            }
            Err(e) => Err((e.to_string(), e.retryable())),
        }
    }

    async fn release(&self, table: &TableName, lease: &Lease) {
        if let Err(e) = self.locks.release(lease).await {
            tracing::warn!(table = %table, error = %e, "releasing the lease failed; it expires by itself");
        }
    }

    /// Deletes metadata files that fell out of the metadata log; best effort: a file left
    /// behind is only storage, never a reason to fail the commit that succeeded.
    async fn delete_metadata_files(file_io: &FileIO, table: &TableName, files: &[String]) {
        for file in files {
            if let Err(e) = file_io.delete(file).await {
                tracing::warn!(table = %table, file = %file, error = %e, "deleting an old metadata file failed");
            }
        }
    }

    /// [`Self::retrying`] with the lease kept alive meanwhile ([`hold`]: renewed every
    /// third of its time, so a commit may outlive one lease period; a lease taken by
    /// another committer abandons the work) and a panic caught ([`guarded`]) as
    /// [`CommitError::Internal`]: the caller always gets to release the lease.
    async fn guarded_attempts<T>(
        &self,
        table: &TableName,
        lease: &mut Lease,
        deadline: Option<Instant>,
        attempt: impl AsyncFnMut(&mut Lease) -> Result<T, CommitError>,
    ) -> Result<T, CommitError> {
        let held = lease.clone();
        let work = guarded(self.retrying(table, lease, deadline, attempt));
        match hold(self.locks.as_ref(), held, self.lease_ttl, work).await {
            Ok((Ok(outcome), _)) => outcome,
            Ok((Err(detail), _)) => Err(CommitError::Internal { table: table.to_string(), detail }),
            Err(lost) => Err(lost.into()),
        }
    }

    /// Runs `attempt` again after catalog conflicts, a bounded number of times and only
    /// while the deadline allows, renewing the lease in between.
    async fn retrying<T>(
        &self,
        table: &TableName,
        lease: &mut Lease,
        deadline: Option<Instant>,
        mut attempt: impl AsyncFnMut(&mut Lease) -> Result<T, CommitError>,
    ) -> Result<T, CommitError> {
        let mut tries = 1;
        loop {
            let outcome = attempt(lease).await;
            if outcome.as_ref().is_err_and(CommitError::is_conflict) {
                metrics::record_table(&metrics::COMMIT_CONFLICTS, &table.to_string(), 1.0);
            }
            match outcome {
                Err(e) if e.is_conflict() && tries < self.retry.attempts => {
                    let wait = self.retry.wait(tries);
                    if deadline.is_some_and(|d| Instant::now() + wait + Duration::from_secs(1) > d) {
                        return Err(e);
                    }
                    tracing::warn!(table = %table, attempt = tries, error = %e, "commit conflict: reloading");
                    tokio::time::sleep(wait).await;
                    *lease = self.locks.renew(lease, self.lease_ttl).await?;
                    metrics::record_table(&metrics::COMMIT_RETRIES, &table.to_string(), 1.0);
                    tries += 1;
                }
                other => return other,
            }
        }
    }

    /// The table, created when missing: at `written_at` (where the tasks' files were
    /// written: the location the materializer's catalog assigned, which a catalog giving
    /// a new location for each create would not give again), else where the catalog
    /// assigns, else under the warehouse.
    async fn load_or_create(
        &self,
        table: &TableName,
        schema: &TaskSchema,
        written_at: Option<&str>,
    ) -> Result<LoadedTable, CommitError> {
        if let Some(loaded) = load(self.catalog.as_ref(), &self.file_io, table).await? {
            return Ok(loaded);
        }
        let location = match written_at {
            Some(location) => location.to_string(),
            None => {
                let assigned = self.catalog.create_location(table).await.map_err(TableError::from)?;
                assigned.unwrap_or_else(|| table_location(&self.warehouse, table))
            }
        };
        let spec = schema.partition_spec.clone().unwrap_or_else(PartitionSpec::unpartition_spec);
        if create(self.catalog.as_ref(), &self.file_io, table, &location, &schema.iceberg, &spec).await? {
            tracing::info!(table = %table, %location, partition_spec = %describe(&spec), "table created");
        }
        load(self.catalog.as_ref(), &self.file_io, table).await?.ok_or_else(|| CommitError::Task {
            table: table.to_string(),
            task_id: String::new(),
            detail: "the table vanished right after it was created".into(),
        })
    }

    /// What Floe's last snapshot of the table records.
    async fn record(&self, loaded: &LoadedTable) -> Result<TableRecord, CommitError> {
        let metadata = &loaded.metadata;
        let state = TableState::load(&self.file_io, floe_summary(metadata).get(STATE_KEY))
            .await
            .map_err(TableError::iceberg(&loaded.name))?;
        let published_dead_letters = self.published_dead_letters(loaded, &state).await?;
        Ok(TableRecord {
            published_dead_letters,
            table: loaded.name.clone(),
            schema: metadata.current_schema().as_ref().clone(),
            last_column_id: metadata.last_column_id(),
            spec: metadata.default_partition_spec().as_ref().clone(),
            rowless: rowless_offsets(&loaded.name, metadata)?,
            offsets: committed_offsets(&loaded.name, metadata)?,
            state,
        })
    }

    /// One attempt: load, plan, apply, swap.
    async fn try_commit(
        &self,
        table: &TableName,
        tasks: &[&CommitTask],
        lease: &mut Lease,
    ) -> Result<Appended, CommitError> {
        let written_at = tasks.iter().find_map(|t| t.table_location.as_deref());
        let loaded = self.load_or_create(table, &tasks[0].schema, written_at).await?;
        let record = self.record(&loaded).await?;
        let mut plan = plan_append(&record, tasks)?;
        if !plan.commits() {
            // Dead letters a commit queued and could not publish: published now.
            let dead_letters_queued = record.state.dead_letters_waiting(&record.published_dead_letters) > 0;
            return Ok(Appended { results: plan.results, dead_letters_queued, ..Appended::default() });
        }
        if let Some(state) = &mut plan.state {
            // For status: how long each part has waited for its marker (wall clock).
            state.mark_pending_since(crate::lock::now_ms());
        }
        let mut change = self.apply(&loaded, &plan, lease).await?;
        if let Some(newest) = newest_committed(tasks, &plan.results) {
            change.properties.insert(crate::table::MAX_TIMESTAMP_KEY.into(), newest.to_string());
        }
        let (files, records) = (change.added.len(), change.added.iter().map(|f| f.record_count()).sum::<u64>());
        let (snapshot_id, at_ms) = self.publish(&loaded, change, lease).await?;
        tracing::info!(table = %table, snapshot_id, tasks = plan.tasks, files, records, "committed");
        record_commit(table, tasks, &plan.results, records, at_ms);
        let snapshot = CommittedSnapshot { table: table.clone(), snapshot_id, tasks: plan.tasks, files, records };
        let state = plan.state.as_ref().unwrap_or(&record.state);
        Ok(Appended {
            results: plan.results,
            snapshot: Some(snapshot),
            dead_letters_queued: !state.dead_letters.is_empty(),
            suspensions: plan.suspensions,
        })
    }

    /// Does what `plan` says short of the snapshot: rewrites the files it rewrites (under
    /// names new to this attempt), writes the table state; returns the snapshot's change.
    async fn apply(
        &self,
        loaded: &LoadedTable,
        plan: &AppendPlan,
        lease: &Lease,
    ) -> Result<SnapshotChange, CommitError> {
        let (table, metadata) = (&loaded.name, &loaded.metadata);
        let iceberg = TableError::iceberg(table);
        let schema = plan.schema.as_ref().unwrap_or(metadata.current_schema().as_ref());
        let layout = TableLayout {
            file_io: &self.file_io,
            spec: metadata.default_partition_spec(),
            data_dir: format!("{}/data", metadata.location()),
        };
        let mut added: Vec<DataFile> = Vec::new();
        for planned in &plan.files {
            added.extend(layout.adopt(planned, schema).await.map_err(&iceberg)?);
            if let FileAction::Trim(keep) = &planned.action {
                tracing::info!(table = %table, task_id = %planned.written.task_id, file = planned.file.path(), ?keep,
                    "file trimmed to the offsets the table does not hold");
            }
        }
        for entry in &plan.aborted {
            tracing::info!(table = %table, producer_id = entry.transaction.producer_id,
                records = entry.transaction.records, "aborted transaction: its files are never added");
        }
        let mut properties: HashMap<String, String> = plan.offsets.to_summary().collect();
        properties.extend(plan.rowless.to_summary());
        let state_location = match &plan.state {
            None => floe_summary(metadata).get(STATE_KEY).cloned(),
            Some(state) if state.is_empty() => None,
            Some(state) => {
                Some(state.save(&self.file_io, &format!("{}/metadata", metadata.location())).await.map_err(&iceberg)?)
            }
        };
        properties.extend(state_location.map(|l| (STATE_KEY.to_string(), l)));
        properties.insert("floe.tasks".into(), plan.tasks.to_string());
        if plan.skipped_records > 0 {
            properties.insert("floe.skipped-records".into(), plan.skipped_records.to_string());
        }
        properties.insert("floe.committer".into(), self.owner.clone());
        properties.insert("floe.fencing".into(), lease.fencing.to_string());
        Ok(SnapshotChange {
            operation: Operation::Append,
            added,
            removed: Default::default(),
            properties,
            new_schema: plan.schema.clone(),
        })
    }
}

/// What an append did, and what follows it once the table's lease is released.
#[derive(Debug, Default)]
struct Appended {
    results: Vec<(String, TaskResult)>,
    snapshot: Option<CommittedSnapshot>,
    /// The table state queues dead letters for their table.
    dead_letters_queued: bool,
    /// Bad records of committed transactions that suspend the table (mode `suspend`).
    suspensions: Vec<plan::Suspension>,
}

/// The metrics of an append committed at `at_ms`: its rows, the freshness lag of the
/// newest record of the tasks it committed (tasks from before timestamps were carried
/// give none), and the processing delay of the oldest of those tasks (since the
/// materializer made it: a backfill of old records is not delayed).
fn record_commit(table: &TableName, tasks: &[&CommitTask], results: &[(String, TaskResult)], records: u64, at_ms: i64) {
    let key = table.to_string();
    let seconds = |since: i64| (at_ms - since).max(0) as f64 / 1000.0;
    metrics::record_table(&metrics::RECORDS_COMMITTED, &key, records as f64);
    if let Some(newest) = newest_committed(tasks, results) {
        metrics::record_table(&metrics::FRESHNESS_LAG, &key, seconds(newest));
    }
    if let Some(oldest) = committed(tasks, results).map(|t| t.created_at_ms).filter(|&at| at > 0).min() {
        metrics::record_table(&metrics::PROCESSING_DELAY, &key, seconds(oldest));
    }
}

/// The tasks `results` says were committed.
fn committed<'a>(
    tasks: &'a [&'a CommitTask],
    results: &'a [(String, TaskResult)],
) -> impl Iterator<Item = &'a CommitTask> + 'a {
    let is_committed = |t: &&&CommitTask| results.iter().any(|(id, r)| *id == t.task_id && *r == TaskResult::Committed);
    tasks.iter().filter(is_committed).copied()
}

/// The newest record timestamp of the tasks `results` says were committed (tasks from
/// before timestamps were carried give none).
fn newest_committed(tasks: &[&CommitTask], results: &[(String, TaskResult)]) -> Option<i64> {
    committed(tasks, results).filter_map(|t| t.max_timestamp).max()
}

/// Where and how a table records files: its partition spec and data directory.
struct TableLayout<'a> {
    file_io: &'a FileIO,
    spec: &'a PartitionSpec,
    data_dir: String,
}

impl TableLayout<'_> {
    /// A planned file as the table records it: itself ([`FileAction::Adopt`]); else
    /// rewritten — its rows (those kept) with the table's field ids, laid out by the
    /// table's spec, each new file with its partition value — of the table's partition
    /// type by `table_schema` (after a promotion: the wider type).
    async fn adopt(
        &self,
        planned: &PlannedFile,
        table_schema: &iceberg::spec::Schema,
    ) -> iceberg::Result<Vec<DataFile>> {
        let written = &planned.written;
        let (files, schema) = match &planned.action {
            FileAction::Adopt if !self.holds(planned.file.path()) => {
                (vec![self.relocate(planned).await?], &written.schema)
            }
            FileAction::Adopt => {
                (vec![planned.file.data_file(&written.schema, written.spec.as_ref())?], &written.schema)
            }
            FileAction::Relayout | FileAction::Renumber => {
                (self.rewrite(planned, None, "layout").await?, written.rewrite_schema())
            }
            FileAction::Trim(keep) => (self.rewrite(planned, Some(keep), "trim").await?, written.rewrite_schema()),
        };
        let (written_type, table_type) = (self.spec.partition_type(schema)?, self.spec.partition_type(table_schema)?);
        files
            .into_iter()
            .map(|f| retype_partition(f, schema, self.spec.spec_id(), &written_type, &table_type))
            .collect()
    }

    /// Whether `path` lies under the table's location.
    fn holds(&self, path: &str) -> bool {
        let plain = |p: &str| p.strip_prefix("file://").unwrap_or(p).trim_end_matches('/').to_string();
        let location = plain(self.data_dir.strip_suffix("/data").unwrap_or(&self.data_dir));
        plain(path).strip_prefix(&location).is_some_and(|rest| rest.starts_with('/'))
    }

    /// A file written outside the table's location (under the location a catalog
    /// assigned another create, before the table was made) copied as it is into the
    /// table's data directory: every file of a table lies under the location it is
    /// registered with, where readers' credentials and the table's maintenance reach.
    /// File names are unique in a table (partition, first offset, attempt, source).
    async fn relocate(&self, planned: &PlannedFile) -> iceberg::Result<DataFile> {
        let from = planned.file.path();
        let to = format!("{}/{}", self.data_dir, from.rsplit('/').next().unwrap_or(from));
        let bytes = self.file_io.new_input(from)?.read().await?;
        self.file_io.new_output(&to)?.write(bytes).await?;
        tracing::info!(task_id = %planned.written.task_id, from, to = %to, "file outside the table's location copied under it");
        let mut file = planned.file.clone();
        file.data_file["file_path"] = to.into();
        file.data_file(&planned.written.schema, planned.written.spec.as_ref())
    }

    /// The planned file's rows (those in `keep`) written again under a name new to this
    /// attempt, with the table's field ids, by the table's spec.
    async fn rewrite(
        &self,
        planned: &PlannedFile,
        keep: Option<&[(i64, i64)]>,
        tag: &str,
    ) -> iceberg::Result<Vec<DataFile>> {
        let written = &planned.written;
        let output = WriterOptions {
            file_io: self.file_io.clone(),
            dir: self.data_dir.clone(),
            partition: written.partition,
            source_id: format!("{}-{tag}", written.task_id),
            schema: Arc::new(written.rewrite_schema().clone()),
            target_size: u64::MAX,
        };
        let files = rewrite_files(output, self.spec, &[planned.file.path()], keep, Some(&written.schema)).await?;
        Ok(files.into_iter().map(|f| f.data_file).collect())
    }
}

/// The part of a task for its dead-letter table, when it has dead letters.
fn dead_letter_task(task: &CommitTask) -> Option<CommitTask> {
    let (table, schema) = (task.dead_letter_table.clone()?, task.dead_letter_schema.clone()?);
    if task.dead_letter_files.is_empty() {
        return None;
    }
    let mut dlq = task.clone();
    dlq.table = table;
    // Written under the dead-letter table's location, not the main table's.
    dlq.table_location = None;
    dlq.data_files = task.dead_letter_files.clone();
    dlq.dead_letter_files = Vec::new();
    dlq.open_transactions = Vec::new();
    dlq.transaction_markers = Vec::new();
    dlq.schema.iceberg = schema;
    dlq.schema.partition_spec = None;
    dlq.record_count = task.dead_letter_files.iter().map(|f: &TaskFile| f.record_count).sum();
    // The dead-letter table has rows for its dead letters only: every other offset of
    // the segment is without a row there.
    let span = task.offsets.and_then(|r| u64::try_from(r.last.checked_sub(r.first)?.checked_add(1)?).ok());
    dlq.without_rows = span.and_then(|span| span.checked_sub(dlq.record_count));
    Some(dlq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Recorder, scope};

    #[tokio::test]
    async fn a_backfill_of_old_records_is_late_but_not_delayed() {
        const DAY_MS: i64 = 24 * 60 * 60 * 1000;
        let at_ms = 100 * DAY_MS;
        let file = crate::task::TaskFile {
            first_offset: 0,
            last_offset: 0,
            record_count: 1,
            data_file: serde_json::json!({"file_path": "/w/a.parquet"}),
        };
        let mut old = crate::task::tests::task(&crate::partition::tests::schema(), None, file);
        // Records 30 days old, their segment materialized 2 s before the commit.
        (old.max_timestamp, old.created_at_ms) = (Some(at_ms - 30 * DAY_MS), at_ms - 2_000);
        let mut dropped = old.clone();
        (dropped.task_id, dropped.created_at_ms) = ("t2".into(), at_ms - DAY_MS);
        let results = [("t1".to_string(), TaskResult::Committed), ("t2".to_string(), TaskResult::AlreadyCommitted)];
        let table = old.table.clone();
        let recorder = Recorder::new();
        scope(recorder.clone(), async { record_commit(&table, &[&old, &dropped], &results, 1, at_ms) }).await;
        let of = |metric| recorder.value(metric, &[(metrics::TABLE, "kafka.orders")]);
        assert_eq!(of(&metrics::FRESHNESS_LAG), Some(30.0 * 86_400.0));
        assert_eq!(of(&metrics::PROCESSING_DELAY), Some(2.0), "the committed task's, from its materialization");
    }
}
