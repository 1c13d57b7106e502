//! Delta Lake tables from the same Parquet files as the Iceberg tables: Floe's own writer
//! of the Delta protocol (no `deltalake` or `delta_kernel` dependency: see
//! ARCHITECTURE.md, "Delta Lake").
//!
//! - [`actions`]: the actions of a commit, as JSON lines;
//! - [`schema`]: an Iceberg schema as a Delta schema (column mapping by field id) and the
//!   protocol it needs; [`partition`]: the partition spec as Delta partition columns;
//! - [`store`]: the [`LogStore`] port — a log's files, with the put-if-absent commits
//!   rest on (local files here, S3's conditional PUT in `floe-aws`);
//! - [`log`]: a table's state replayed from its log and checkpoints; new commits and
//!   checkpoints;
//! - [`mirror`](mod@mirror): the Delta table brought in step with the Iceberg table's current
//!   snapshot, exactly once;
//! - [`check`]: the audit of a mirror against the Iceberg table;
//! - [`catalog`]: the [`DeltaCatalog`] port, where a Delta table is registered by name.

pub mod actions;
pub mod cache;
pub mod catalog;
pub mod check;
pub mod log;
pub mod mirror;
pub mod partition;
pub mod schema;
pub mod store;
pub mod vectors;

use std::io;

pub use catalog::{DeltaCatalog, delta_name};
pub use log::DeltaSnapshot;
pub use mirror::{ICEBERG_SEQUENCE_APP, Mirrored, mirror};
pub use store::{LocalLogStore, LogStore};

use crate::retry::Retryable;
use crate::table::LoadedTable;

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
    /// Registering the Delta table by name failed.
    #[error("registering Delta table {table}: {detail}")]
    Catalog { table: String, detail: String, retryable: bool },
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
            DeltaError::Catalog { retryable, .. } => *retryable,
            DeltaError::Log { .. } | DeltaError::Unsupported(_) => false,
        }
    }
}

/// A table's Delta mirror as status shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeltaStatus {
    /// The Delta table's newest version.
    pub version: i64,
    /// Its files.
    pub files: usize,
    /// The sequence number of the Iceberg snapshot it mirrors (`None`: none of Floe's).
    pub mirrored_sequence: Option<i64>,
    /// The Iceberg table's own.
    pub iceberg_sequence: i64,
    /// Whether the topic is Delta-only: the Iceberg table is Floe's record, no table of
    /// the user's.
    pub alone: bool,
}

impl DeltaStatus {
    /// Whether it mirrors the Iceberg table's current snapshot.
    pub fn in_step(&self) -> bool {
        self.mirrored_sequence.is_some_and(|m| m >= self.iceberg_sequence)
    }

    /// One line: `version 3, 12 files, in step with the Iceberg table` (a Delta-only
    /// topic's: `…, Delta alone, in step with Floe's Iceberg record`) or `…, behind: mirrors
    /// Iceberg sequence number 4 of 5 …`.
    pub fn describe(&self) -> String {
        let head = match self.alone {
            true => format!("version {}, {} files, Delta alone", self.version, self.files),
            false => format!("version {}, {} files", self.version, self.files),
        };
        let iceberg = if self.alone { "Floe's Iceberg record" } else { "the Iceberg table" };
        match (self.in_step(), self.mirrored_sequence) {
            (true, _) => format!("{head}, in step with {iceberg}"),
            (false, Some(m)) => format!(
                "{head}, behind: mirrors Iceberg sequence number {m} of {} (the next commit or compactor run brings it in step)",
                self.iceberg_sequence
            ),
            (false, None) => format!("{head}, behind: mirrors no Iceberg snapshot yet"),
        }
    }
}

/// The Delta mirror of `table` (at its location), `None` when it has none.
pub async fn status(store: &dyn LogStore, table: &LoadedTable) -> Result<Option<DeltaStatus>, DeltaError> {
    let Some(state) = DeltaSnapshot::read(store, table.metadata.location()).await? else { return Ok(None) };
    Ok(Some(DeltaStatus {
        version: state.version,
        files: state.files.len(),
        mirrored_sequence: state.txns.get(ICEBERG_SEQUENCE_APP).map(|t| t.version),
        iceberg_sequence: table.metadata.last_sequence_number(),
        alone: crate::catalog::split::is_delta_only(&table.metadata),
    }))
}
