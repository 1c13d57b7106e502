//! A catalog split by table between the user's catalog and Floe's own: the Iceberg table
//! of a Delta-only topic (`formats = ["delta"]`) is Floe's record of its commits (offsets,
//! schema, files, pending transactions), which the Delta table mirrors, and is kept out
//! of the user's catalog, where engines would find a second table of the same rows.
//!
//! ```text
//!                      own (the lock table's rows on AWS; the warehouse's SQLite
//!                           file under the catalog name `floe-own` locally)
//!  current(t)   ─▶ own has t? ─ yes ─▶ its pointer
//!                               no ──▶ the user's catalog
//!  create(t, m) ─▶ m's `floe.formats` is "delta" (DELTA_ONLY)? ─ yes ─▶ own, unless the
//!                  user's catalog has t ─ no ─▶ the user's, unless own has t
//!                  (either "unless": a topic's formats changed under an existing table:
//!                  refused, not retryable, naming both)
//!  swap(t, m)   ─▶ by m's `floe.formats`, as create
//!  list(ns)     ─▶ both
//! ```
//!
//! The property is written when the table is created ([`crate::table::create`]) and kept
//! by every later metadata file, so a table's side never changes (a topic's formats
//! changed later leave it as it is, and status says so:
//! [`crate::maintenance::health::formats_warning`]). Every table costs one lookup in the
//! own catalog more per load: a GetItem on AWS, next to a commit's Glue and S3 calls. No Delta-only table is on a REST catalog's side, which writes
//! metadata files itself ([`Catalog::writes_metadata`]): configuration refuses Delta-only
//! topics there.

use std::sync::Arc;

use async_trait::async_trait;
use iceberg::spec::TableMetadata;

use super::{Access, Catalog, CatalogError, TablePointer};
use crate::vocabulary::{Formats, TableFormat, TableName};

/// The table property naming the formats of a table's topic when they are not Iceberg's
/// (`"delta"`: the Iceberg table is Floe's own, [`DELTA_ONLY`]).
pub const FORMATS_PROPERTY: &str = "floe.formats";

/// [`FORMATS_PROPERTY`]'s value on the Iceberg table of a Delta-only topic.
pub const DELTA_ONLY: &str = "delta";

/// The snapshot summary key of the formats the topic listed at the commit (`iceberg,delta`):
/// a table keeps the formats it was made with, and status warns when its topic's differ.
pub const TOPIC_FORMATS_KEY: &str = "floe.topic-formats";

/// `formats` as the summary records them: `iceberg`, `iceberg,delta`, `delta`.
pub fn formats_text(formats: Formats) -> String {
    let list: Vec<TableFormat> = formats.into();
    let names: Vec<&str> = list
        .iter()
        .map(|f| match f {
            TableFormat::Iceberg => "iceberg",
            TableFormat::Delta => "delta",
        })
        .collect();
    names.join(",")
}

/// Whether `metadata` is the Iceberg table of a Delta-only topic, kept in Floe's own catalog.
pub fn is_delta_only(metadata: &TableMetadata) -> bool {
    metadata.properties().get(FORMATS_PROPERTY).is_some_and(|v| v == DELTA_ONLY)
}

/// The user's catalog, with the Delta-only topics' Iceberg tables in Floe's own.
pub struct SplitCatalog {
    user: Arc<dyn Catalog>,
    own: Arc<dyn Catalog>,
}

impl SplitCatalog {
    pub fn new(user: Arc<dyn Catalog>, own: Arc<dyn Catalog>) -> SplitCatalog {
        SplitCatalog { user, own }
    }

    /// The catalog of `metadata`'s table, and the other one.
    fn sides(&self, metadata: &TableMetadata) -> (&dyn Catalog, &dyn Catalog) {
        match is_delta_only(metadata) {
            true => (self.own.as_ref(), self.user.as_ref()),
            false => (self.user.as_ref(), self.own.as_ref()),
        }
    }
}

/// The refusal of a table whose topic's formats changed: the table exists on the other side.
fn moved(table: &TableName, metadata: &TableMetadata) -> CatalogError {
    let detail = match is_delta_only(metadata) {
        true => {
            "its topic lists only \"delta\" now, but the table is an Iceberg table in the catalog: \
                 list [\"iceberg\", \"delta\"] again (the formats of an existing table cannot change)"
        }
        false => {
            "its topic lists \"iceberg\" now, but the table is a Delta-only topic's, its Iceberg record \
                  kept by Floe: list [\"delta\"] again (the formats of an existing table cannot change)"
        }
    };
    CatalogError::Other { table: table.to_string(), detail: detail.into(), retryable: false }
}

#[async_trait]
impl Catalog for SplitCatalog {
    async fn current(&self, table: &TableName) -> Result<Option<TablePointer>, CatalogError> {
        match self.own.current(table).await? {
            Some(pointer) => Ok(Some(pointer)),
            None => self.user.current(table).await,
        }
    }

    async fn create(&self, table: &TableName, metadata: &TableMetadata, location: &str) -> Result<(), CatalogError> {
        let (side, other) = self.sides(metadata);
        if other.current(table).await?.is_some() {
            return Err(moved(table, metadata));
        }
        side.create(table, metadata, location).await
    }

    async fn swap(
        &self,
        table: &TableName,
        expected: &TablePointer,
        metadata: &TableMetadata,
        location: &str,
    ) -> Result<(), CatalogError> {
        self.sides(metadata).0.swap(table, expected, metadata, location).await
    }

    async fn list(&self, namespace: &str) -> Result<Vec<TableName>, CatalogError> {
        let mut tables = self.user.list(namespace).await?;
        tables.extend(self.own.list(namespace).await?);
        tables.sort();
        tables.dedup();
        Ok(tables)
    }

    fn writes_metadata(&self) -> bool {
        self.user.writes_metadata()
    }

    async fn create_location(&self, table: &TableName) -> Result<Option<String>, CatalogError> {
        self.user.create_location(table).await
    }

    async fn check_access(&self, tables: &[TableName], access: Access) -> Result<(), CatalogError> {
        self.user.check_access(tables, access).await?;
        self.own.check_access(tables, access).await
    }
}

/// A table's first metadata, of a Delta-only topic's table when `delta_only` (for tests).
#[cfg(test)]
pub(crate) fn metadata(delta_only: bool) -> TableMetadata {
    use std::collections::HashMap;

    use iceberg::spec::{FormatVersion, NestedField, PrimitiveType, Schema, Type, UnboundPartitionSpec};

    let schema = Schema::builder()
        .with_fields(vec![NestedField::required(1, "a", Type::Primitive(PrimitiveType::Long)).into()])
        .build()
        .unwrap();
    let properties = match delta_only {
        true => HashMap::from([(FORMATS_PROPERTY.to_string(), DELTA_ONLY.to_string())]),
        false => HashMap::new(),
    };
    iceberg::spec::TableMetadataBuilder::new(
        schema,
        UnboundPartitionSpec::builder().build(),
        iceberg::spec::SortOrder::unsorted_order(),
        "/w/t".into(),
        FormatVersion::V2,
        properties,
    )
    .unwrap()
    .build()
    .unwrap()
    .metadata
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::sqlite::SqliteCatalog;

    /// The user's catalog and Floe's own, two catalog names in one SQLite file.
    fn catalogs() -> (tempfile::TempDir, SqliteCatalog, SqliteCatalog, SplitCatalog) {
        let dir = tempfile::tempdir().unwrap();
        let user = SqliteCatalog::open(&dir.path().join("catalog.db"), "floe").unwrap();
        let own = user.named(crate::catalog::sqlite::OWN_CATALOG);
        let split = SplitCatalog::new(Arc::new(user.clone()), Arc::new(own.clone()));
        (dir, user, own, split)
    }

    #[tokio::test]
    async fn a_delta_only_table_lives_in_the_own_catalog_and_the_others_in_the_users() {
        let (dir, user, own, split) = catalogs();
        let location = |name: &str, n: &str| format!("{}/{name}/metadata/{n}-x.metadata.json", dir.path().display());
        let (delta, iceberg) = (TableName::parse("kafka.clicks").unwrap(), TableName::parse("kafka.orders").unwrap());
        split.create(&delta, &metadata(true), &location("clicks", "00000")).await.unwrap();
        split.create(&iceberg, &metadata(false), &location("orders", "00000")).await.unwrap();
        assert!(own.current(&delta).await.unwrap().is_some() && user.current(&delta).await.unwrap().is_none());
        assert!(user.current(&iceberg).await.unwrap().is_some() && own.current(&iceberg).await.unwrap().is_none());
        assert_eq!(user.list("kafka").await.unwrap(), vec![iceberg.clone()]);
        assert_eq!(split.list("kafka").await.unwrap(), vec![delta.clone(), iceberg.clone()]);

        let first = split.current(&delta).await.unwrap().unwrap();
        split.swap(&delta, &first, &metadata(true), &location("clicks", "00001")).await.unwrap();
        let now = own.current(&delta).await.unwrap().unwrap();
        assert!(now.metadata_location.ends_with("00001-x.metadata.json"), "{now:?}");
        let lost = split.swap(&delta, &first, &metadata(true), &location("clicks", "00002")).await.unwrap_err();
        assert!(lost.is_conflict(), "{lost}");
    }

    #[tokio::test]
    async fn a_table_whose_formats_changed_is_refused_on_the_other_side() {
        let (dir, _user, _own, split) = catalogs();
        let location = |n: &str| format!("{}/t/metadata/{n}-x.metadata.json", dir.path().display());
        let table = TableName::parse("kafka.t").unwrap();
        split.create(&table, &metadata(false), &location("00000")).await.unwrap();
        let e = split.create(&table, &metadata(true), &location("00001")).await.unwrap_err();
        assert!(!e.is_conflict() && e.to_string().contains("lists only \"delta\" now"), "{e}");

        let other = TableName::parse("kafka.u").unwrap();
        split.create(&other, &metadata(true), &location("00002")).await.unwrap();
        let e = split.create(&other, &metadata(false), &location("00003")).await.unwrap_err();
        assert!(!crate::retry::Retryable::retryable(&e) && e.to_string().contains("lists \"iceberg\" now"), "{e}");
    }
}
