//! The local catalog: a SQLite file in the layout shared by the Iceberg JDBC catalog,
//! PyIceberg's `SqlCatalog` and iceberg-rust's SQL catalog, so any of them opens what
//! Floe writes (`SqlCatalog("floe", uri="sqlite:///…/catalog.db")`).
//!
//! After each pointer move it writes the table's `metadata/version-hint.text`
//! ([`super::hint`]), so engines without a catalog open the table from its folder.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use iceberg::spec::TableMetadata;
use rusqlite::{Connection, OptionalExtension, params};

use super::{Catalog, CatalogError, TablePointer, hint};
use crate::vocabulary::TableName;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL,
    table_namespace VARCHAR(255) NOT NULL,
    table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000),
    previous_metadata_location VARCHAR(1000),
    iceberg_type VARCHAR(5),
    PRIMARY KEY (catalog_name, table_namespace, table_name)
);
CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
    catalog_name VARCHAR(255) NOT NULL,
    namespace VARCHAR(255) NOT NULL,
    property_key VARCHAR(255) NOT NULL,
    property_value VARCHAR(1000) NOT NULL,
    PRIMARY KEY (catalog_name, namespace, property_key)
);";

/// The catalog name of Floe's own tables in a warehouse's SQLite file: the Delta-only
/// topics' Iceberg tables ([`super::split`]), which `SqlCatalog("floe")` does not list.
pub const OWN_CATALOG: &str = "floe-own";

/// A SQLite catalog file.
#[derive(Clone)]
pub struct SqliteCatalog {
    name: String,
    path: PathBuf,
    connection: Arc<Mutex<Connection>>,
}

impl SqliteCatalog {
    /// Opens (creating when missing) the catalog `name` in the file at `path`.
    pub fn open(path: &Path, name: &str) -> Result<SqliteCatalog, CatalogError> {
        let error = |e: rusqlite::Error| CatalogError::Other {
            table: path.display().to_string(),
            detail: e.to_string(),
            retryable: false,
        };
        let connection = Connection::open(path).map_err(error)?;
        connection.busy_timeout(std::time::Duration::from_secs(10)).map_err(error)?;
        connection.execute_batch(SCHEMA).map_err(error)?;
        Ok(SqliteCatalog {
            name: name.to_string(),
            path: path.to_path_buf(),
            connection: Arc::new(Mutex::new(connection)),
        })
    }

    /// The catalog `name` in the same file, on the same connection (Floe's own catalog
    /// beside the user's: [`super::split`]).
    pub fn named(&self, name: &str) -> SqliteCatalog {
        SqliteCatalog { name: name.to_string(), ..self.clone() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The namespaces that hold tables, in order.
    pub async fn namespaces(&self) -> Result<Vec<String>, CatalogError> {
        let probe = TableName { namespace: "*".into(), name: "*".into() };
        self.run(&probe, |c, catalog| {
            let mut stmt = c.prepare(
                "SELECT DISTINCT table_namespace FROM iceberg_tables WHERE catalog_name = ?1 ORDER BY table_namespace",
            )?;
            let names = stmt.query_map(params![catalog], |row| row.get::<_, String>(0))?;
            names.collect()
        })
        .await
    }

    /// The shared connection, also used by the local lease lock.
    pub fn connection(&self) -> Arc<Mutex<Connection>> {
        self.connection.clone()
    }

    /// Writes the table's version hint for its current pointer, and returns the hint
    /// (`None` when the table does not exist or its metadata is no local file). The
    /// database's write lock is held from reading the pointer to renaming the hint, so no
    /// pointer move, of this process or another, comes between: the last hint written
    /// names the current metadata file.
    pub async fn write_version_hint(&self, table: &TableName) -> Result<Option<String>, CatalogError> {
        let t = table.clone();
        let written = self
            .run(table, move |c, catalog| {
                let tx = rusqlite::Transaction::new_unchecked(c, rusqlite::TransactionBehavior::Immediate)?;
                let location = tx
                    .query_row(
                        "SELECT metadata_location FROM iceberg_tables
                         WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3",
                        params![catalog, t.namespace, t.name],
                        |row| row.get::<_, Option<String>>(0),
                    )
                    .optional()?
                    .flatten();
                // Nothing changed in the database: the transaction is rolled back when dropped.
                Ok(location.map(|location| hint::write(&location)))
            })
            .await?;
        written.transpose().map(Option::flatten).map_err(|e| CatalogError::Other {
            table: table.to_string(),
            detail: e.to_string(),
            retryable: false,
        })
    }

    /// The hint after a commit: its failure is logged, the commit stands.
    async fn hint_after_commit(&self, table: &TableName) {
        if let Err(e) = self.write_version_hint(table).await {
            tracing::warn!(table = %table, error = %e, "the version hint was not written; the commit stands");
        }
    }

    async fn run<T: Send + 'static>(
        &self,
        table: &TableName,
        f: impl FnOnce(&Connection, &str) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, CatalogError> {
        let (connection, name) = (self.connection.clone(), self.name.clone());
        let joined = tokio::task::spawn_blocking(move || {
            let connection = connection.lock().unwrap_or_else(|p| p.into_inner());
            f(&connection, &name)
        })
        .await;
        let busy = |e: &rusqlite::Error| e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy);
        match joined {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                Err(CatalogError::Other { table: table.to_string(), retryable: busy(&e), detail: e.to_string() })
            }
            Err(e) => Err(CatalogError::Other { table: table.to_string(), detail: e.to_string(), retryable: false }),
        }
    }
}

#[async_trait]
impl Catalog for SqliteCatalog {
    async fn current(&self, table: &TableName) -> Result<Option<TablePointer>, CatalogError> {
        let t = table.clone();
        let location = self
            .run(table, move |c, catalog| {
                c.query_row(
                    "SELECT metadata_location FROM iceberg_tables
                     WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3",
                    params![catalog, t.namespace, t.name],
                    |row| row.get::<_, Option<String>>(0),
                )
                .optional()
            })
            .await?;
        Ok(location.flatten().map(|metadata_location| TablePointer { metadata_location, version: None }))
    }

    async fn create(&self, table: &TableName, _metadata: &TableMetadata, location: &str) -> Result<(), CatalogError> {
        let (t, location) = (table.clone(), location.to_string());
        let inserted = self
            .run(table, move |c, catalog| {
                c.execute(
                    "INSERT OR IGNORE INTO iceberg_namespace_properties VALUES (?1, ?2, 'exists', 'true')",
                    params![catalog, t.namespace],
                )?;
                c.execute(
                    "INSERT OR IGNORE INTO iceberg_tables VALUES (?1, ?2, ?3, ?4, NULL, 'TABLE')",
                    params![catalog, t.namespace, t.name, location],
                )
            })
            .await?;
        match inserted {
            1 => {
                self.hint_after_commit(table).await;
                Ok(())
            }
            _ => Err(CatalogError::Conflict { table: table.to_string(), detail: "the table already exists".into() }),
        }
    }

    async fn swap(
        &self,
        table: &TableName,
        expected: &TablePointer,
        _metadata: &TableMetadata,
        location: &str,
    ) -> Result<(), CatalogError> {
        let (t, old, new) = (table.clone(), expected.metadata_location.clone(), location.to_string());
        let updated = self
            .run(table, move |c, catalog| {
                c.execute(
                    "UPDATE iceberg_tables SET metadata_location = ?1, previous_metadata_location = ?2
                     WHERE catalog_name = ?3 AND table_namespace = ?4 AND table_name = ?5 AND metadata_location = ?2",
                    params![new, old, catalog, t.namespace, t.name],
                )
            })
            .await?;
        match updated {
            1 => {
                self.hint_after_commit(table).await;
                Ok(())
            }
            _ => Err(CatalogError::Conflict {
                table: table.to_string(),
                detail: format!("the table no longer points at {}", expected.metadata_location),
            }),
        }
    }

    async fn list(&self, namespace: &str) -> Result<Vec<TableName>, CatalogError> {
        let ns = namespace.to_string();
        let probe = TableName { namespace: ns.clone(), name: "*".into() };
        self.run(&probe, move |c, catalog| {
            let mut stmt = c.prepare(
                "SELECT table_name FROM iceberg_tables WHERE catalog_name = ?1 AND table_namespace = ?2 ORDER BY table_name",
            )?;
            let names = stmt.query_map(params![catalog, ns], |row| row.get::<_, String>(0))?;
            names.map(|n| n.map(|name| TableName { namespace: ns.clone(), name })).collect()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{NestedField, PartitionSpec, PrimitiveType, Schema, Type};

    use super::*;

    fn metadata(location: &str) -> TableMetadata {
        let field = NestedField::required(1, "x", Type::Primitive(PrimitiveType::Long));
        let schema = Schema::builder().with_fields(vec![field.into()]).build().unwrap();
        crate::table::new_table_metadata(
            location,
            &schema,
            &PartitionSpec::unpartition_spec(),
            iceberg::spec::FormatVersion::V2,
        )
        .unwrap()
        .0
    }

    #[tokio::test]
    async fn every_pointer_move_writes_the_version_hint_and_a_lost_swap_leaves_it() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = SqliteCatalog::open(&dir.path().join("catalog.db"), "floe").unwrap();
        let table = TableName::parse("kafka.t").unwrap();
        let folder = dir.path().join("kafka.db/t");
        std::fs::create_dir_all(folder.join("metadata")).unwrap();
        let location = |v: &str| format!("{}/metadata/{v}-0f0e.metadata.json", folder.display());
        let metadata = metadata(&folder.display().to_string());
        let hint = || hint::read(&folder).unwrap();

        catalog.create(&table, &metadata, &location("00000")).await.unwrap();
        assert_eq!(hint().as_deref(), Some("00000-0f0e"));
        let first = catalog.current(&table).await.unwrap().unwrap();
        catalog.swap(&table, &first, &metadata, &location("00001")).await.unwrap();
        assert_eq!(hint().as_deref(), Some("00001-0f0e"));
        // A committer that lost the race: the hint still names the winner's file.
        let lost = catalog.swap(&table, &first, &metadata, &location("00002")).await.unwrap_err();
        assert!(lost.is_conflict(), "{lost}");
        assert_eq!(hint().as_deref(), Some("00001-0f0e"));

        // Another engine moved the pointer (PyIceberg's SqlCatalog writes no hint): the
        // hint is rewritten from the catalog.
        let c = catalog.connection();
        c.lock()
            .unwrap()
            .execute("UPDATE iceberg_tables SET metadata_location = ?1", params![location("00007")])
            .unwrap();
        assert_eq!(catalog.write_version_hint(&table).await.unwrap().as_deref(), Some("00007-0f0e"));
        assert_eq!(hint().as_deref(), Some("00007-0f0e"));
        let unknown = TableName::parse("kafka.none").unwrap();
        assert_eq!(catalog.write_version_hint(&unknown).await.unwrap(), None);
    }
}
