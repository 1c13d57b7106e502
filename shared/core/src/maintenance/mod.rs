//! Keeping tables healthy for years: which tables there are, the compactor's runs, the
//! orphan sweep, and the record of what maintenance did, per table.
//!
//! ```text
//!  registry (the lock store: a row per table the committer ever took a lease on)
//!    ─▶ tables(): every table Floe commits to, dead-letter tables included, suspended marked
//!  hold_task(table, task + files) ── before a task is queued (materializer, compactor)
//!  release_tasks(table, ids) ── once the committer is done with them (committed, already
//!                              committed, rejected), or once maintenance finds a held
//!                              CommitTask's offsets all in the table (holding::release_committed)
//!  held_tasks(table) ─▶ the files of tasks still queued: never deleted by the sweep, however old
//!  record(table, event) ─▶ status(table): last compaction, snapshots expired, orphans removed,
//!                          what is failing (commits, compaction, sweep) and why
//!  stall::Waiting ─▶ how long the oldest held task of each table has waited (the
//!                    compactor's stall metric: a stalled committer emits nothing itself)
//! ```
//!
//! A task's files are held from just before it is queued until the committer is done with
//! it, so the orphan sweep can tell "written and waiting in the queue" (a suspended table
//! keeps its tasks for days) from "written and never to be committed" (a crashed run, a
//! rejected compaction); files younger than the grace period are never deleted either,
//! which covers the time between a file's write and its task's hold.

pub mod compactor;
pub mod health;
pub mod holding;
pub mod rewrite;
pub mod stall;
pub mod sweep;

use crate::delta::DeltaError;
use crate::lock::LockError;
use crate::queue::QueueError;
use crate::retry::Retryable;
use crate::table::TableError;

pub use crate::config::DEFAULT_ORPHAN_GRACE_MS;
pub use crate::lock::registry::{
    Activity, CompactionRecord, Failure, HeldOffsets, HeldTask, MaintenanceEvent, MaintenanceStatus, RecordAt,
    RegisteredTable, TableRegistry,
};

/// Why maintenance of a table failed; the other tables go on.
#[derive(Debug, thiserror::Error)]
pub enum MaintenanceError {
    #[error(transparent)]
    Table(#[from] TableError),
    #[error(transparent)]
    Registry(#[from] LockError),
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// Listing or deleting the warehouse's files.
    #[error("{table}: {detail}")]
    Storage { table: String, detail: String, retryable: bool },
    /// A library panicked on this table's files (caught: the other tables go on).
    #[error("{table}: internal error: {panic}")]
    Internal { table: String, panic: String },
    /// The topic's configuration does not fit the table (a `retention_column` that is no
    /// timestamp or date column of it): fixed in `floe.toml`, not by retrying.
    #[error("{table}: {detail}")]
    Config { table: String, detail: String },
    /// The table's Delta mirror could not be brought in step.
    #[error(transparent)]
    Delta(#[from] DeltaError),
}

impl Retryable for MaintenanceError {
    fn retryable(&self) -> bool {
        match self {
            MaintenanceError::Table(e) => e.retryable(),
            MaintenanceError::Registry(e) => e.retryable(),
            MaintenanceError::Queue(e) => e.retryable(),
            MaintenanceError::Storage { retryable, .. } => *retryable,
            MaintenanceError::Delta(e) => e.retryable(),
            MaintenanceError::Internal { .. } | MaintenanceError::Config { .. } => false,
        }
    }
}
