//! Amazon S3 Tables as the catalog: one S3 Tables namespace per Floe namespace, one table
//! of format `ICEBERG` per Floe table, in the table bucket `table_bucket_arn`.
//!
//! S3 Tables keeps each table's metadata pointer and a `versionToken` that changes with
//! every update, which is the catalog's compare-and-swap:
//!
//! ```text
//!  current: GetTableMetadataLocation           → (metadataLocation, versionToken)
//!  swap:    UpdateTableMetadataLocation(versionToken = expected.version)
//!           ConflictException (the token moved on) ⇒ CatalogError::Conflict
//! ```
//!
//! S3 Tables assigns each table its storage (`warehouseLocation`) when the table is made,
//! so a table is made in two steps: [`Catalog::create_location`] runs `CreateNamespace` and
//! `CreateTable` and returns that location (where the materializer writes the data files
//! and the committer the first metadata file), then [`Catalog::create`] registers the
//! first metadata file with `UpdateTableMetadataLocation`. A table made but not yet
//! registered has no metadata location and counts as missing.
//!
//! S3 Tables names hold only lowercase letters, digits and `_`; other names are refused
//! with an error that says so (Floe does not rename tables behind the user's back).

use async_trait::async_trait;
use aws_sdk_s3tables::Client;
use aws_sdk_s3tables::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3tables::types::OpenTableFormat;
use iceberg::spec::TableMetadata;

use crate::access::probe;
use crate::retry::sdk_error_retryable;
use floe_core::catalog::{Access, Catalog, CatalogError, TablePointer};
use floe_core::config::S3TablesConfig;
use floe_core::table::TableName;

type HttpResponse = aws_sdk_s3tables::config::http::HttpResponse;

/// The tables of one S3 table bucket.
pub struct S3TablesCatalog {
    client: Client,
    table_bucket_arn: String,
}

/// A table as S3 Tables reports it.
struct S3Table {
    version_token: String,
    metadata_location: Option<String>,
    warehouse_location: String,
}

impl S3TablesCatalog {
    pub fn new(client: Client, table_bucket_arn: impl Into<String>) -> Self {
        S3TablesCatalog { client, table_bucket_arn: table_bucket_arn.into() }
    }

    /// The catalog `[catalog] type = "s3tables"` names: a client in the table bucket's
    /// region (from its ARN), with `aws`'s credentials.
    pub fn from_config(aws: &aws_config::SdkConfig, config: &S3TablesConfig) -> Self {
        let region = aws_config::Region::new(config.region().to_string());
        let client = Client::from_conf(aws_sdk_s3tables::config::Builder::from(aws).region(region).build());
        Self::new(client, &config.table_bucket_arn)
    }

    /// The table bucket's ARN.
    pub fn table_bucket_arn(&self) -> &str {
        &self.table_bucket_arn
    }

    /// How an access error names a table (IAM's table ARNs end in an id, not the name).
    fn table_resource(&self, table: &TableName) -> String {
        format!("table {table} of {}", self.table_bucket_arn)
    }

    fn other<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
        table: &TableName,
        what: &str,
        e: SdkError<E, HttpResponse>,
    ) -> CatalogError {
        CatalogError::Other {
            table: table.to_string(),
            retryable: sdk_error_retryable(&e),
            detail: format!("{what}: {}", DisplayErrorContext(&e)),
        }
    }

    /// The table's pointer and storage; `None` when it (or its namespace) does not exist,
    /// as a table of a name S3 Tables refuses cannot (the audit asks for `<table>_dlq`,
    /// four characters longer than the table's name).
    async fn get(&self, table: &TableName) -> Result<Option<S3Table>, CatalogError> {
        if check_name(table).is_err() {
            return Ok(None);
        }
        let request = self
            .client
            .get_table_metadata_location()
            .table_bucket_arn(&self.table_bucket_arn)
            .namespace(&table.namespace)
            .name(&table.name);
        match request.send().await {
            Ok(out) => Ok(Some(S3Table {
                version_token: out.version_token().to_string(),
                metadata_location: out.metadata_location().map(str::to_string),
                warehouse_location: out.warehouse_location().to_string(),
            })),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found_exception()) => Ok(None),
            Err(e) => Err(Self::other(table, "GetTableMetadataLocation", e)),
        }
    }

    async fn create_namespace(&self, table: &TableName) -> Result<(), CatalogError> {
        let request =
            self.client.create_namespace().table_bucket_arn(&self.table_bucket_arn).namespace(&table.namespace);
        match request.send().await {
            Ok(_) => Ok(()),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_conflict_exception()) => Ok(()),
            Err(e) => Err(Self::other(table, "CreateNamespace", e)),
        }
    }

    /// Makes the table (and its namespace); a table someone else made first is fine.
    async fn create_table(&self, table: &TableName) -> Result<(), CatalogError> {
        check_name(table)?;
        self.create_namespace(table).await?;
        let request = self
            .client
            .create_table()
            .table_bucket_arn(&self.table_bucket_arn)
            .namespace(&table.namespace)
            .name(&table.name)
            .format(OpenTableFormat::Iceberg);
        match request.send().await {
            Ok(_) => Ok(()),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_conflict_exception()) => Ok(()),
            Err(e) => Err(Self::other(table, "CreateTable", e)),
        }
    }

    /// The table, made first (with its namespace) when it does not exist.
    async fn get_or_make(&self, table: &TableName) -> Result<S3Table, CatalogError> {
        if let Some(existing) = self.get(table).await? {
            return Ok(existing);
        }
        self.create_table(table).await?;
        self.get(table).await?.ok_or_else(|| CatalogError::Other {
            table: table.to_string(),
            detail: "the table vanished from S3 Tables right after it was created".into(),
            retryable: true,
        })
    }

    /// Moves the table's pointer, if its version token is still `version_token`.
    async fn update(&self, table: &TableName, version_token: &str, location: &str) -> Result<(), CatalogError> {
        let request = self
            .client
            .update_table_metadata_location()
            .table_bucket_arn(&self.table_bucket_arn)
            .namespace(&table.namespace)
            .name(&table.name)
            .version_token(version_token)
            .metadata_location(location);
        match request.send().await {
            Ok(_) => Ok(()),
            // S3 Tables answers a version token that is no longer the table's with 409
            // ConflictException: another writer moved the pointer first.
            Err(e) if e.as_service_error().is_some_and(|s| s.is_conflict_exception()) => {
                Err(CatalogError::Conflict { table: table.to_string(), detail: DisplayErrorContext(&e).to_string() })
            }
            Err(e) => Err(Self::other(table, "UpdateTableMetadataLocation", e)),
        }
    }
}

/// Refuses names S3 Tables would refuse: 1 to 255 lowercase letters, digits and `_`,
/// beginning and ending with a letter or digit; a namespace not beginning with `aws`
/// (reserved by S3 Tables).
pub fn check_name(table: &TableName) -> Result<(), CatalogError> {
    if table.namespace.starts_with("aws") {
        return Err(CatalogError::Other {
            table: table.to_string(),
            detail: format!(
                "the namespace `{}` is not an S3 Tables name: S3 Tables reserves namespaces beginning with `aws`; \
                 set `namespace` of the topic in floe.toml to another name",
                table.namespace
            ),
            retryable: false,
        });
    }
    for (what, name) in [("namespace", &table.namespace), ("table name", &table.name)] {
        let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        let valid = (1..=255).contains(&name.len())
            && name.chars().all(|c| allowed(c) || c == '_')
            && name.starts_with(allowed)
            && name.ends_with(allowed);
        if !valid {
            return Err(CatalogError::Other {
                table: table.to_string(),
                detail: format!(
                    "the {what} `{name}` is not an S3 Tables name: S3 Tables allows only lowercase letters, \
                     digits and `_`, beginning and ending with a letter or digit (at most 255); \
                     set `namespace`/`table` of the topic in floe.toml to such a name"
                ),
                retryable: false,
            });
        }
    }
    Ok(())
}

#[async_trait]
impl Catalog for S3TablesCatalog {
    async fn current(&self, table: &TableName) -> Result<Option<TablePointer>, CatalogError> {
        Ok(self.get(table).await?.and_then(|t| {
            let location = t.metadata_location?;
            Some(TablePointer { metadata_location: location, version: Some(t.version_token) })
        }))
    }

    async fn create_location(&self, table: &TableName) -> Result<Option<String>, CatalogError> {
        Ok(Some(self.get_or_make(table).await?.warehouse_location))
    }

    async fn create(&self, table: &TableName, _metadata: &TableMetadata, location: &str) -> Result<(), CatalogError> {
        let existing = self.get_or_make(table).await?;
        if existing.metadata_location.is_some() {
            return Err(CatalogError::Conflict { table: table.to_string(), detail: "the table already exists".into() });
        }
        self.update(table, &existing.version_token, location).await
    }

    async fn swap(
        &self,
        table: &TableName,
        expected: &TablePointer,
        _metadata: &TableMetadata,
        location: &str,
    ) -> Result<(), CatalogError> {
        let version_token = expected.version.as_deref().ok_or_else(|| CatalogError::Other {
            table: table.to_string(),
            detail: "an S3 Tables pointer without a version token".into(),
            retryable: false,
        })?;
        self.update(table, version_token, location).await
    }

    /// Every table of the namespace, those made but not registered yet included.
    async fn list(&self, namespace: &str) -> Result<Vec<TableName>, CatalogError> {
        let probe = TableName { namespace: namespace.to_string(), name: "*".into() };
        let mut pages = self
            .client
            .list_tables()
            .table_bucket_arn(&self.table_bucket_arn)
            .namespace(namespace)
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = match page {
                Ok(p) => p,
                Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found_exception()) => return Ok(out),
                Err(e) => return Err(Self::other(&probe, "ListTables", e)),
            };
            out.extend(
                page.tables().iter().map(|t| TableName { namespace: namespace.to_string(), name: t.name().into() }),
            );
        }
        out.sort();
        Ok(out)
    }

    /// Probes the actions Floe uses, on the table bucket and on each of `tables`, with calls
    /// that change nothing: reads, and (to commit) an update with a version token no table has.
    /// (`CreateNamespace` and `CreateTable` cannot be probed without making something.)
    async fn check_access(&self, tables: &[TableName], access: Access) -> Result<(), CatalogError> {
        let arn = &self.table_bucket_arn;
        let result = self.client.get_table_bucket().table_bucket_arn(arn).send().await;
        probe("s3tables:GetTableBucket", arn, result)?;
        let result = self.client.list_namespaces().table_bucket_arn(arn).send().await;
        probe("s3tables:ListNamespaces", arn, result)?;
        for table in tables {
            check_name(table)?;
            let resource = self.table_resource(table);
            let result = self.client.list_tables().table_bucket_arn(arn).namespace(&table.namespace).send().await;
            probe("s3tables:ListTables", arn, result)?;
            let result = self
                .client
                .get_table_metadata_location()
                .table_bucket_arn(arn)
                .namespace(&table.namespace)
                .name(&table.name)
                .send()
                .await;
            probe("s3tables:GetTableMetadataLocation", &resource, result)?;
            if access == Access::Read {
                continue;
            }
            // A version token the table never had: S3 Tables refuses the update (409, or
            // 404 for a table not made yet) once IAM allowed it, so nothing changes.
            let result = self
                .client
                .update_table_metadata_location()
                .table_bucket_arn(arn)
                .namespace(&table.namespace)
                .name(&table.name)
                .version_token("floe-access-probe")
                .metadata_location("s3://floe-access-probe/metadata/00000-probe.metadata.json")
                .send()
                .await;
            probe("s3tables:UpdateTableMetadataLocation", &resource, result)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_core::retry::Retryable;

    fn name(namespace: &str, name: &str) -> TableName {
        TableName { namespace: namespace.into(), name: name.into() }
    }

    #[test]
    fn names_s3_tables_refuses_are_refused_with_the_rule() {
        assert!(check_name(&name("kafka", "orders_v2")).is_ok());
        for bad in [name("kafka", "Orders"), name("kafka", "orders-v2"), name("kafka", "_orders"), name("", "t")] {
            let e = check_name(&bad).unwrap_err();
            assert!(!e.retryable(), "{e}");
            assert!(e.to_string().contains("only lowercase letters, digits and `_`"), "{e}");
        }
        assert!(check_name(&name("kafka", &"a".repeat(256))).is_err());
        let reserved = check_name(&name("aws_events", "orders")).unwrap_err().to_string();
        assert!(reserved.contains("reserves namespaces beginning with `aws`"), "{reserved}");
        assert!(check_name(&name("kafka", "aws_orders")).is_ok(), "only namespaces are reserved");
    }
}
