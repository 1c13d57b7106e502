//! The local catalog: a SQLite file in the layout shared by the Iceberg JDBC catalog,
//! PyIceberg's `SqlCatalog` and iceberg-rust's SQL catalog, so any of them opens what
//! Floe writes (`SqlCatalog("floe", uri="sqlite:///…/catalog.db")`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use iceberg::spec::TableMetadata;
use rusqlite::{Connection, OptionalExtension, params};

use super::{Catalog, CatalogError, TablePointer};
use crate::table::name::TableName;

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
            1 => Ok(()),
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
            1 => Ok(()),
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
