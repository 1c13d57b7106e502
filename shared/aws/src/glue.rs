//! AWS Glue as the catalog: one Glue database per namespace, one `EXTERNAL_TABLE` with
//! `table_type=ICEBERG` and `metadata_location` per table (what Athena, Spark, Trino and
//! PyIceberg's Glue catalog read). The swap is `UpdateTable` with the `VersionId` read
//! with the pointer, so Glue refuses it if anyone updated the table in between.
//! `check_access` probes the Glue actions Floe needs before work.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_glue::Client;
use aws_sdk_glue::error::DisplayErrorContext;
use aws_sdk_glue::types::{DatabaseInput, SerDeInfo, StorageDescriptor, TableInput};
use iceberg::spec::TableMetadata;

use crate::access::probe;
use crate::retry::sdk_error_retryable;
use floe_core::catalog::{Access, Catalog, CatalogError, TablePointer};
use floe_core::delta::{DeltaCatalog, DeltaError};
use floe_core::retry::Retryable;
use floe_core::table::TableName;

pub struct GlueCatalog {
    client: Client,
}

impl GlueCatalog {
    pub fn new(client: Client) -> Self {
        GlueCatalog { client }
    }

    fn other<E: aws_sdk_glue::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
        table: &TableName,
        what: &str,
        e: aws_sdk_glue::error::SdkError<E, aws_sdk_glue::config::http::HttpResponse>,
    ) -> CatalogError {
        CatalogError::Other {
            table: table.to_string(),
            retryable: sdk_error_retryable(&e),
            detail: format!("{what}: {}", DisplayErrorContext(&e)),
        }
    }

    fn table_input(
        table: &TableName,
        metadata: Option<&TableMetadata>,
        mut parameters: HashMap<String, String>,
        location: &str,
        previous: Option<&str>,
    ) -> Result<TableInput, CatalogError> {
        parameters.insert("table_type".into(), "ICEBERG".into());
        parameters.insert("metadata_location".into(), location.into());
        match previous {
            Some(p) => parameters.insert("previous_metadata_location".into(), p.into()),
            None => parameters.remove("previous_metadata_location"),
        };
        let storage = metadata.map(|m| StorageDescriptor::builder().location(m.location()).build());
        TableInput::builder()
            .name(&table.name)
            .table_type("EXTERNAL_TABLE")
            .set_parameters(Some(parameters))
            .set_storage_descriptor(storage)
            .build()
            .map_err(|e| CatalogError::Other { table: table.to_string(), detail: e.to_string(), retryable: false })
    }

    /// Creates `table`'s database (its namespace) unless it exists.
    async fn create_database(&self, table: &TableName) -> Result<(), CatalogError> {
        let database = DatabaseInput::builder().name(&table.namespace).build().map_err(|e| CatalogError::Other {
            table: table.to_string(),
            detail: e.to_string(),
            retryable: false,
        })?;
        match self.client.create_database().database_input(database).send().await {
            Ok(_) => Ok(()),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_already_exists_exception()) => Ok(()),
            Err(e) => Err(Self::other(table, "CreateDatabase", e)),
        }
    }

    async fn get(&self, table: &TableName) -> Result<Option<aws_sdk_glue::types::Table>, CatalogError> {
        match self.client.get_table().database_name(&table.namespace).name(&table.name).send().await {
            Ok(out) => Ok(out.table),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_entity_not_found_exception()) => Ok(None),
            Err(e) => Err(Self::other(table, "GetTable", e)),
        }
    }
}

#[async_trait]
impl Catalog for GlueCatalog {
    async fn current(&self, table: &TableName) -> Result<Option<TablePointer>, CatalogError> {
        let Some(glue) = self.get(table).await? else { return Ok(None) };
        let location =
            glue.parameters().and_then(|p| p.get("metadata_location")).cloned().ok_or_else(|| CatalogError::Other {
                table: table.to_string(),
                detail: "a Glue table without metadata_location is not an Iceberg table".into(),
                retryable: false,
            })?;
        Ok(Some(TablePointer { metadata_location: location, version: glue.version_id().map(str::to_string) }))
    }

    async fn create(&self, table: &TableName, metadata: &TableMetadata, location: &str) -> Result<(), CatalogError> {
        self.create_database(table).await?;
        let input = Self::table_input(table, Some(metadata), HashMap::new(), location, None)?;
        match self.client.create_table().database_name(&table.namespace).table_input(input).send().await {
            Ok(_) => Ok(()),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_already_exists_exception()) => {
                Err(CatalogError::Conflict { table: table.to_string(), detail: "the table already exists".into() })
            }
            Err(e) => Err(Self::other(table, "CreateTable", e)),
        }
    }

    async fn swap(
        &self,
        table: &TableName,
        expected: &TablePointer,
        metadata: &TableMetadata,
        location: &str,
    ) -> Result<(), CatalogError> {
        // Parameters others set on the table are kept: UpdateTable replaces the whole input.
        let existing = self.get(table).await?.and_then(|t| t.parameters).unwrap_or_default();
        // The VersionId alone would not tell a table dropped and created again (its
        // versions start over) from the one `expected` was read from: its pointer must be
        // the same file too.
        if existing.get("metadata_location") != Some(&expected.metadata_location) {
            let now = existing.get("metadata_location").map_or("no table", String::as_str);
            let detail = format!("the table points to {now}, not {} as read", expected.metadata_location);
            return Err(CatalogError::Conflict { table: table.to_string(), detail });
        }
        let input = Self::table_input(table, Some(metadata), existing, location, Some(&expected.metadata_location))?;
        let mut update =
            self.client.update_table().database_name(&table.namespace).table_input(input).skip_archive(true);
        if let Some(version) = &expected.version {
            update = update.version_id(version);
        }
        match update.send().await {
            Ok(_) => Ok(()),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_concurrent_modification_exception()) => {
                Err(CatalogError::Conflict { table: table.to_string(), detail: DisplayErrorContext(&e).to_string() })
            }
            Err(e) => Err(Self::other(table, "UpdateTable", e)),
        }
    }

    async fn list(&self, namespace: &str) -> Result<Vec<TableName>, CatalogError> {
        let probe = TableName { namespace: namespace.to_string(), name: "*".into() };
        let mut pages = self.client.get_tables().database_name(namespace).into_paginator().send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = match page {
                Ok(p) => p,
                Err(e) if e.as_service_error().is_some_and(|s| s.is_entity_not_found_exception()) => return Ok(out),
                Err(e) => return Err(Self::other(&probe, "GetTables", e)),
            };
            for t in page.table_list() {
                let iceberg =
                    t.parameters().and_then(|p| p.get("table_type")).is_some_and(|v| v.eq_ignore_ascii_case("iceberg"));
                if iceberg {
                    out.push(TableName { namespace: namespace.to_string(), name: t.name().to_string() });
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// Probes the actions Floe uses on each of `tables`' database and table with calls that
    /// change nothing: reads, and (to commit) an `UpdateTable` of a table that does not exist.
    /// (`CreateDatabase` and `CreateTable` cannot be probed without making something.)
    async fn check_access(&self, tables: &[TableName], access: Access) -> Result<(), CatalogError> {
        for table in tables {
            let database = format!("database {}", table.namespace);
            let resource = format!("table {table}");
            let result = self.client.get_database().name(&table.namespace).send().await;
            probe("glue:GetDatabase", &database, result)?;
            let result = self.client.get_tables().database_name(&table.namespace).send().await;
            probe("glue:GetTables", &database, result)?;
            let result = self.client.get_table().database_name(&table.namespace).name(&table.name).send().await;
            probe("glue:GetTable", &resource, result)?;
            if access == Access::Read {
                continue;
            }
            let probe_table = TableName { namespace: table.namespace.clone(), name: ACCESS_PROBE_TABLE.into() };
            let input = Self::table_input(&probe_table, None, HashMap::new(), "s3://floe-access-probe/m.json", None)?;
            let update = self.client.update_table().database_name(&table.namespace).table_input(input);
            probe("glue:UpdateTable", &resource, update.version_id("floe-access-probe").send().await)?;
        }
        Ok(())
    }
}

/// A table name no one gives a table: the `UpdateTable` probe's target, which Glue answers
/// with `EntityNotFoundException` once IAM allowed the call.
const ACCESS_PROBE_TABLE: &str = "floe_access_probe_7f3c9a1e5b";

/// Delta tables in Glue: `table_type` DELTA (as Athena reads them) and the
/// `spark.sql.sources.provider` and `path` Spark finds them by; their columns are in the
/// Delta log, which engines read.
#[async_trait]
impl DeltaCatalog for GlueCatalog {
    async fn register(&self, name: &TableName, location: &str) -> Result<bool, DeltaError> {
        let error =
            |detail: String, retryable: bool| DeltaError::Catalog { table: name.to_string(), detail, retryable };
        let sdk = |what: &str, e: &dyn std::fmt::Display, retryable: bool| error(format!("{what}: {e}"), retryable);
        match self.client.get_table().database_name(&name.namespace).name(&name.name).send().await {
            Ok(out) => {
                let table = out.table.ok_or_else(|| error("GetTable answered no table".into(), true))?;
                let kind = table.parameters().and_then(|p| p.get("table_type")).cloned().unwrap_or_default();
                let at = table.storage_descriptor().and_then(|s| s.location()).unwrap_or_default();
                if !kind.eq_ignore_ascii_case("delta") || at.trim_end_matches('/') != location.trim_end_matches('/') {
                    return Err(error(
                        format!(
                            "Glue has a table of that name, of type {kind:?} at {at:?}, not the Delta table at {location}"
                        ),
                        false,
                    ));
                }
                return Ok(false);
            }
            Err(e) if e.as_service_error().is_some_and(|s| s.is_entity_not_found_exception()) => {}
            Err(e) => return Err(sdk("GetTable", &DisplayErrorContext(&e), sdk_error_retryable(&e))),
        }
        // A Delta-only topic's table is the first of its namespace in Glue.
        self.create_database(name).await.map_err(|e| error(e.to_string(), e.retryable()))?;
        let parameters = HashMap::from([
            ("table_type".to_string(), "DELTA".to_string()),
            ("spark.sql.sources.provider".to_string(), "delta".to_string()),
            ("EXTERNAL".to_string(), "TRUE".to_string()),
        ]);
        let serde = SerDeInfo::builder().parameters("path", location).build();
        let storage = StorageDescriptor::builder().location(location).serde_info(serde).build();
        let input = TableInput::builder()
            .name(&name.name)
            .table_type("EXTERNAL_TABLE")
            .set_parameters(Some(parameters))
            .storage_descriptor(storage)
            .build()
            .map_err(|e| error(e.to_string(), false))?;
        match self.client.create_table().database_name(&name.namespace).table_input(input).send().await {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_already_exists_exception()) => Ok(false),
            Err(e) => Err(sdk("CreateTable", &DisplayErrorContext(&e), sdk_error_retryable(&e))),
        }
    }
}
