//! Where a table's current metadata file is registered, and the compare-and-swap that
//! moves it.
//!
//! ```text
//!  current(table) ─▶ TablePointer { metadata_location, version }
//!  …write the new metadata file…
//!  swap(table, expected pointer, new location)
//!     Glue:   UpdateTable(VersionId = expected.version)   — ConcurrentModificationException ⇒ Conflict
//!     SQLite: UPDATE iceberg_tables SET metadata_location = new
//!             WHERE … AND metadata_location = expected     — 0 rows ⇒ Conflict
//!     REST:   POST …/tables/{t} with assert-ref-snapshot-id — 409 ⇒ Conflict
//!             ([`rest`]; the catalog writes the metadata file itself,
//!             so Floe writes none: [`Catalog::writes_metadata`])
//!     S3 Tables: UpdateTableMetadataLocation(versionToken = expected.version)
//!                                                          — ConflictException ⇒ Conflict
//! ```
//!
//! A catalog that assigns each table its storage (S3 Tables, a REST catalog) says where
//! with [`Catalog::create_location`] (an existing table's own location on a REST
//! catalog); the others leave it to Floe's warehouse layout.
//!
//! A `Conflict` means another writer moved the table first: reload, re-check, retry.
//! Both catalogs use the layouts other engines read: Glue tables of `table_type=ICEBERG`,
//! and the `iceberg_tables` SQLite layout of the JDBC catalog and PyIceberg's `SqlCatalog`.
//! The SQLite catalog also keeps each table's `metadata/version-hint.text` (`hint`), for
//! engines that open a local table from its folder.

pub mod hint;
pub mod rest;
pub mod split;
pub mod sqlite;

use async_trait::async_trait;
use iceberg::spec::TableMetadata;

use crate::retry::Retryable;
use crate::vocabulary::TableName;

/// A table's registered metadata file, and the catalog's version of that registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TablePointer {
    pub metadata_location: String,
    /// Glue's `VersionId`, S3 Tables' `versionToken`; `None` where the location itself is compared.
    pub version: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// Another writer changed the table (or created it) first.
    #[error("{table}: commit conflict: {detail}")]
    Conflict { table: String, detail: String },
    /// IAM refused an action Floe needs: the action and resource to grant.
    #[error("access denied: {action} on {resource} is not allowed ({detail})")]
    AccessDenied { action: String, resource: String, detail: String },
    #[error("{table}: {detail}")]
    Other { table: String, detail: String, retryable: bool },
}

impl Retryable for CatalogError {
    /// A conflict is (reload and try again); a refused action is not; other failures as
    /// the catalog's client judged them.
    fn retryable(&self) -> bool {
        match self {
            CatalogError::Conflict { .. } => true,
            CatalogError::AccessDenied { .. } => false,
            CatalogError::Other { retryable, .. } => *retryable,
        }
    }
}

impl CatalogError {
    pub fn is_conflict(&self) -> bool {
        matches!(self, CatalogError::Conflict { .. })
    }
}

/// An Iceberg catalog, reduced to what commits need.
#[async_trait]
pub trait Catalog: Send + Sync {
    /// The table's pointer, `None` when the table does not exist.
    async fn current(&self, table: &TableName) -> Result<Option<TablePointer>, CatalogError>;
    /// Registers a new table (and its namespace when missing); `Conflict` when it exists.
    async fn create(&self, table: &TableName, metadata: &TableMetadata, location: &str) -> Result<(), CatalogError>;
    /// Moves the pointer from `expected` to `location`, or fails with `Conflict`.
    async fn swap(
        &self,
        table: &TableName,
        expected: &TablePointer,
        metadata: &TableMetadata,
        location: &str,
    ) -> Result<(), CatalogError>;
    /// Every table of a namespace.
    async fn list(&self, namespace: &str) -> Result<Vec<TableName>, CatalogError>;
    /// Whether the catalog writes the new metadata file itself on a swap (a REST catalog
    /// applies the commit's updates to its own metadata and writes the file): then Floe
    /// writes none for a swap, as it would never be referenced, and `swap`'s `location`
    /// names no file. A create still registers a file Floe wrote.
    fn writes_metadata(&self) -> bool {
        false
    }
    /// Where a new table's files go when the catalog assigns it (REST catalogs, S3
    /// Tables); `None`: under Floe's warehouse (`<warehouse>/<namespace>.db/<table>`).
    async fn create_location(&self, _table: &TableName) -> Result<Option<String>, CatalogError> {
        Ok(None)
    }
    /// Whether Floe may do what it needs on the catalog and on `tables` (`access`: commit,
    /// or only read), checked before work so that a missing permission is named at
    /// start-up ([`CatalogError::AccessDenied`]) rather than at the first commit. Changes
    /// nothing.
    async fn check_access(&self, _tables: &[TableName], _access: Access) -> Result<(), CatalogError> {
        Ok(())
    }
}

/// What a function does to the catalog's tables, and so which permissions
/// [`Catalog::check_access`] probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads and commits (the committer, `floe local`).
    Commit,
    /// Reads only (the compactor: the committer commits its CompactionTasks), as the
    /// deployment grants it.
    Read,
}
