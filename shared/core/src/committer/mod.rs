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
//!
//! One file per action, each under the table's lease (`lease.rs`) and ending in a
//! snapshot and the pointer swap (`publish.rs`): `append.rs` (new data, planned by
//! [`plan`]), `compaction.rs` (a `replace` snapshot), `dead_letters.rs` (a task's
//! dead-letter part; committed transactions' dead letters published); `layout.rs` lays
//! a planned file out as the table records it; `lanes.rs` runs a batch's tables at once;
//! `status.rs` tells the registry and the locks what happened.

mod append;
mod compaction;
mod dead_letters;
mod lanes;
mod layout;
mod lease;
mod mirror;
pub mod plan;
mod publish;
mod status;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iceberg::io::FileIO;
use iceberg::spec::{FormatVersion, PartitionSpec};

use crate::catalog::{Catalog, CatalogError};
use crate::delta::cache::MirrorCache;
use crate::delta::{DeltaCatalog, DeltaError, LocalLogStore, LogStore};
use crate::lock::registry::TableRegistry;
use crate::lock::{Clock, LockError, TableLocks};
use crate::partition::describe;
use crate::retry::{RetryPolicy, Retryable};
use crate::table::offsets::CommittedOffsets;
use crate::table::state::{STATE_KEY, TableState};
use crate::table::{
    LoadedTable, NewTable, TableError, committed_offsets, create, floe_summary, load, rowless_offsets, table_location,
};
use crate::task::{CommitTask, CompactionTask, TableName, Task, TaskSchema};
use crate::vocabulary::Formats;
use plan::TableRecord;

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
    /// The Delta mirror of a table whose Iceberg commit is done.
    #[error(transparent)]
    Delta(#[from] DeltaError),
    #[error("{table}: incompatible schema, table suspended: {reason}")]
    Incompatible { table: String, reason: String },
    #[error("{table}: task {task_id}: {detail}")]
    Task { table: String, task_id: String, detail: String },
    /// A panic in a library the commit called (a bug, ours or theirs): the lease is
    /// released and the tasks stay queued, not retried here.
    #[error("{table}: internal error while committing (a bug; the tasks stay queued): {detail}")]
    Internal { table: String, detail: String },
}

impl Retryable for CommitError {
    fn retryable(&self) -> bool {
        match self {
            CommitError::Table(e) => e.retryable(),
            CommitError::Lock(e) => e.retryable(),
            CommitError::Delta(e) => e.retryable(),
            CommitError::Incompatible { .. } | CommitError::Task { .. } | CommitError::Internal { .. } => false,
        }
    }
}

impl CommitError {
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
    /// Other engines' delete files it removed (a compaction applied them everywhere).
    pub delete_files_dropped: usize,
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
    /// Where the Delta mirrors' logs are read and written (the local filesystem unless
    /// [`Committer::with_delta_log`] says otherwise).
    pub delta_log: Arc<dyn LogStore>,
    /// Where a Delta table is registered by name (Glue); `None`: by path only.
    pub delta_catalog: Option<Arc<dyn DeltaCatalog>>,
    /// The Delta tables this committer (this Lambda container, this process) found
    /// registered, or registered: checked once each.
    delta_registered: std::sync::Mutex<std::collections::HashSet<TableName>>,
    /// What a mirror keeps for this committer's next ones: the manifests read, each Delta
    /// table's state.
    mirror_cache: MirrorCache,
    /// The Delta-only topics' tables this committer committed to: mirrored whatever
    /// their tasks' topic lists now (a table keeps the formats it was made with).
    delta_only: std::sync::Mutex<std::collections::HashSet<TableName>>,
}

/// Tables of a batch committed at once unless configured otherwise: all of them, as a
/// batch of 10 tasks (SQS FIFO's most) spans at most 10 tables and each commit mostly
/// waits on S3, Glue and DynamoDB; a batch then takes about one commit's time.
pub const DEFAULT_CONCURRENCY: usize = 10;

/// A table's lease unless configured otherwise (`FLOE_LEASE_SECONDS`'s default).
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(60);

impl Committer {
    /// A committer on `catalog` and the warehouse's files (`file_io`), new tables under
    /// `warehouse`, leases from `locks` held as `owner`, tasks held and maintenance
    /// recorded in `registry`; a lease of [`DEFAULT_LEASE_TTL`], the default retries,
    /// [`DEFAULT_CONCURRENCY`] and the wall clock unless the `with_*` methods say otherwise.
    pub fn new(
        catalog: Arc<dyn Catalog>,
        file_io: FileIO,
        locks: Arc<dyn TableLocks>,
        registry: Arc<dyn TableRegistry>,
        warehouse: impl Into<String>,
        owner: impl Into<String>,
    ) -> Committer {
        Committer {
            catalog,
            file_io,
            locks,
            registry,
            warehouse: warehouse.into(),
            owner: owner.into(),
            lease_ttl: DEFAULT_LEASE_TTL,
            retry: RetryPolicy::default(),
            concurrency: DEFAULT_CONCURRENCY,
            clock: Clock::default(),
            delta_log: Arc::new(LocalLogStore),
            delta_catalog: None,
            delta_registered: Default::default(),
            mirror_cache: MirrorCache::default(),
            delta_only: Default::default(),
        }
    }

    /// This committer on another catalog.
    pub fn with_catalog(self, catalog: Arc<dyn Catalog>) -> Committer {
        Committer { catalog, ..self }
    }

    /// This committer on other storage for the warehouse's files.
    pub fn with_file_io(self, file_io: FileIO) -> Committer {
        Committer { file_io, ..self }
    }

    /// This committer taking its leases from `locks`.
    pub fn with_locks(self, locks: Arc<dyn TableLocks>) -> Committer {
        Committer { locks, ..self }
    }

    /// This committer holding tasks and recording maintenance in `registry`.
    pub fn with_registry(self, registry: Arc<dyn TableRegistry>) -> Committer {
        Committer { registry, ..self }
    }

    /// This committer holding its leases as `owner`.
    pub fn with_owner(self, owner: impl Into<String>) -> Committer {
        Committer { owner: owner.into(), ..self }
    }

    /// This committer with leases of `lease_ttl` ([`Committer::lease_ttl`]).
    pub fn with_lease_ttl(self, lease_ttl: Duration) -> Committer {
        Committer { lease_ttl, ..self }
    }

    /// This committer retrying catalog conflicts by `retry` ([`Committer::retry`]).
    pub fn with_retry(self, retry: RetryPolicy) -> Committer {
        Committer { retry, ..self }
    }

    /// This committer committing `concurrency` tables at once ([`Committer::concurrency`]).
    pub fn with_concurrency(self, concurrency: usize) -> Committer {
        Committer { concurrency, ..self }
    }

    /// This committer stamping commits by `clock` ([`Committer::clock`]).
    pub fn with_clock(self, clock: Clock) -> Committer {
        Committer { clock, ..self }
    }

    /// This committer writing Delta logs through `delta_log` ([`Committer::delta_log`]).
    pub fn with_delta_log(self, delta_log: Arc<dyn LogStore>) -> Committer {
        Committer { delta_log, ..self }
    }

    /// This committer registering the Delta tables it creates in `delta_catalog`.
    pub fn with_delta_catalog(self, delta_catalog: Option<Arc<dyn DeltaCatalog>>) -> Committer {
        Committer { delta_catalog, ..self }
    }

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
        // Operators' decisions on stranded transaction parts: rare, one at a time.
        for task in tasks {
            if let Task::Resolve(r) = task {
                suspended.push((r.task_id.clone(), self.decide(r, deadline).await));
            }
        }
        let compactions: Vec<&CompactionTask> =
            tasks.iter().filter_map(|t| if let Task::Compaction(c) = t { Some(&**c) } else { None }).collect();
        let data: Vec<&CommitTask> =
            tasks.iter().filter_map(|t| if let Task::Data(d) = t { Some(&**d) } else { None }).collect();
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

    /// The table, created when missing: at `written_at` (where the tasks' files were
    /// written: the location the materializer's catalog assigned, which a catalog giving
    /// a new location for each create would not give again), else where the catalog
    /// assigns, else under the warehouse.
    async fn load_or_create(
        &self,
        table: &TableName,
        schema: &TaskSchema,
        formats: Formats,
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
        let format = schema.format_version.unwrap_or(FormatVersion::V2);
        let new = NewTable {
            schema: &schema.iceberg,
            spec: &spec,
            format,
            upsert_key: schema.upsert_key.as_deref(),
            formats,
        };
        if create(self.catalog.as_ref(), &self.file_io, table, &location, &new).await? {
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
            decided_by: HashMap::new(),
        })
    }

    /// For dead-letter parts: the offsets each of their own tables holds (none, for a
    /// table not made yet).
    async fn decided_by(&self, tasks: &[&CommitTask]) -> Result<HashMap<TableName, CommittedOffsets>, CommitError> {
        let mut decided = HashMap::new();
        for main in tasks.iter().filter_map(|t| t.dead_letters_of.as_ref()) {
            if decided.contains_key(main) {
                continue;
            }
            let offsets = match load(self.catalog.as_ref(), &self.file_io, main).await? {
                Some(loaded) => committed_offsets(main, &loaded.metadata)?,
                None => CommittedOffsets::default(),
            };
            decided.insert(main.clone(), offsets);
        }
        Ok(decided)
    }
}
