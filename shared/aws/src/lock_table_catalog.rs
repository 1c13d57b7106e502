//! Floe's own catalog on AWS: the Iceberg pointers of Delta-only topics' tables, kept on
//! their rows of the lock table (`floe_core::catalog::split`), out of the user's Glue
//! catalog. The swap is a conditional update of the row, so it is the same
//! compare-and-swap as Glue's, and it leaves the row's other attributes (lease, status,
//! maintenance) alone.
//!
//! ```text
//!  table = "kafka.clicks"   iceberg_metadata_location            the pointer
//!                           iceberg_previous_metadata_location   the one before it
//!  create: SET … IF attribute_not_exists(iceberg_metadata_location)   — else Conflict
//!  swap:   SET … IF iceberg_metadata_location = expected              — else Conflict
//!  list:   Scan, rows with a pointer whose table starts with "<namespace>."
//! ```

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use iceberg::spec::TableMetadata;

use crate::dynamodb::{condition_failed, s};
use crate::retry::sdk_error_retryable;
use floe_core::catalog::{Catalog, CatalogError, TablePointer};
use floe_core::table::TableName;

/// The row attribute holding the table's metadata location.
pub const POINTER: &str = "iceberg_metadata_location";
const PREVIOUS: &str = "iceberg_previous_metadata_location";

/// Iceberg pointers on the rows of the lock table.
pub struct LockTableCatalog {
    client: Client,
    table: String,
}

impl LockTableCatalog {
    /// `table`: the lock table (hash key `table`, a string).
    pub fn new(client: Client, table: &str) -> LockTableCatalog {
        LockTableCatalog { client, table: table.to_string() }
    }

    /// Sets the pointer to `location` under `condition` (with `values`), else `Conflict`.
    async fn set(
        &self,
        table: &TableName,
        location: &str,
        previous: Option<&str>,
        condition: &str,
        what: &str,
    ) -> Result<(), CatalogError> {
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("table", s(&table.to_string()))
            .condition_expression(condition)
            .expression_attribute_names("#p", POINTER)
            .expression_attribute_values(":new", s(location));
        update = match previous {
            Some(previous) => update
                .update_expression("SET #p = :new, #q = :old")
                .expression_attribute_names("#q", PREVIOUS)
                .expression_attribute_values(":old", s(previous)),
            None => update.update_expression("SET #p = :new"),
        };
        match update.send().await {
            Ok(_) => Ok(()),
            Err(e) if condition_failed(&e) => {
                let detail = match previous {
                    Some(p) => format!("the pointer moved from {p} first"),
                    None => "the table already exists".into(),
                };
                Err(CatalogError::Conflict { table: table.to_string(), detail })
            }
            Err(e) => Err(other(table, what, e)),
        }
    }
}

fn other<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
    table: &TableName,
    what: &str,
    e: SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>,
) -> CatalogError {
    CatalogError::Other {
        table: table.to_string(),
        retryable: sdk_error_retryable(&e),
        detail: format!("{what} on the lock table: {}", DisplayErrorContext(&e)),
    }
}

#[async_trait]
impl Catalog for LockTableCatalog {
    async fn current(&self, table: &TableName) -> Result<Option<TablePointer>, CatalogError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("table", s(&table.to_string()))
            .projection_expression("#p")
            .expression_attribute_names("#p", POINTER)
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| other(table, "GetItem", e))?;
        let location = out.item.as_ref().and_then(|item| item.get(POINTER)).and_then(|v| v.as_s().ok());
        Ok(location.map(|l| TablePointer { metadata_location: l.clone(), version: None }))
    }

    async fn create(&self, table: &TableName, _metadata: &TableMetadata, location: &str) -> Result<(), CatalogError> {
        self.set(table, location, None, "attribute_not_exists(#p)", "UpdateItem (create)").await
    }

    async fn swap(
        &self,
        table: &TableName,
        expected: &TablePointer,
        _metadata: &TableMetadata,
        location: &str,
    ) -> Result<(), CatalogError> {
        let previous = Some(expected.metadata_location.as_str());
        self.set(table, location, previous, "#p = :old", "UpdateItem (swap)").await
    }

    async fn list(&self, namespace: &str) -> Result<Vec<TableName>, CatalogError> {
        let probe = TableName { namespace: namespace.to_string(), name: "*".into() };
        let mut pages = self
            .client
            .scan()
            .table_name(&self.table)
            .filter_expression("attribute_exists(#p) AND begins_with(#t, :ns)")
            .projection_expression("#t")
            .expression_attribute_names("#p", POINTER)
            .expression_attribute_names("#t", "table")
            .expression_attribute_values(":ns", s(&format!("{namespace}.")))
            .consistent_read(true)
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| other(&probe, "Scan", e))?;
            let names = page.items().iter().filter_map(|item| item.get("table")?.as_s().ok());
            out.extend(names.filter_map(|n| TableName::parse(n)).filter(|t| t.namespace == namespace));
        }
        out.sort();
        Ok(out)
    }
}
