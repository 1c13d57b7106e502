//! Delta Lake tables from the same Parquet files as the Iceberg tables: Floe's own writer
//! of the Delta protocol (no `deltalake` or `delta_kernel` dependency: see
//! ARCHITECTURE.md, "Delta Lake").
//!
//! - [`actions`]: the actions of a commit, as JSON lines;
//! - [`schema`]: an Iceberg schema as a Delta schema (column mapping by field id) and the
//!   protocol it needs;
//! - [`store`]: the [`LogStore`] port — a log's files, with the put-if-absent commits
//!   rest on (local files here, S3's conditional PUT in `floe-aws`);
//! - [`log`]: a table's state replayed from its log and checkpoints; new commits and
//!   checkpoints;
//! - [`mirror`]: the Delta table brought in step with the Iceberg table's current
//!   snapshot, exactly once.

pub mod actions;
pub mod log;
pub mod mirror;
pub mod schema;
pub mod store;

use std::io;

pub use log::DeltaSnapshot;
pub use mirror::{Mirrored, mirror};
pub use store::{LocalLogStore, LogStore};

use crate::retry::Retryable;

/// Why a Delta table could not be read or brought in step.
#[derive(Debug, thiserror::Error)]
pub enum DeltaError {
    #[error("Delta log: {0}")]
    Io(#[from] io::Error),
    /// The log holds something it should not (a missing version, a line that is not an
    /// action): reading it again finds the same.
    #[error("Delta log {path}: {detail}")]
    Log { path: String, detail: String },
    /// The Iceberg table holds what the Delta table cannot express.
    #[error("Delta table cannot mirror the Iceberg table: {0}")]
    Unsupported(String),
    /// Another writer took the next version every time.
    #[error("Delta table {root}: another writer took the next version {attempts} times in a row")]
    Contended { root: String, attempts: usize },
    /// Reading the Iceberg table failed.
    #[error("reading the Iceberg table for its Delta mirror: {0}")]
    Iceberg(String),
    /// The Delta table is behind on purpose until the Iceberg table changes.
    #[error("{table}: the Delta table waits: {reason}")]
    Waiting { table: String, reason: String },
}

impl From<iceberg::Error> for DeltaError {
    fn from(e: iceberg::Error) -> Self {
        DeltaError::Iceberg(e.to_string())
    }
}

impl Retryable for DeltaError {
    fn retryable(&self) -> bool {
        match self {
            DeltaError::Io(e) => e.retryable(),
            DeltaError::Contended { .. } | DeltaError::Iceberg(_) => true,
            DeltaError::Log { .. } | DeltaError::Unsupported(_) | DeltaError::Waiting { .. } => false,
        }
    }
}
