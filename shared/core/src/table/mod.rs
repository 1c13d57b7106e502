//! Iceberg tables as Floe writes them: created on the first task (format v2, data and
//! metadata under the warehouse, partitioned by the task's spec), loaded through a
//! [`Catalog`], changed only by snapshots Floe writes itself ([`snapshot`]), each
//! carrying the committed Kafka offsets ([`offsets`]) and the transactions still waiting
//! for their marker ([`state`]); files rewritten by [`rewrite`] (trimming, compaction),
//! their columns bound to the schema by field id ([`project`]), and compactions planned
//! by [`compaction`], which leaves alone the data files other engines' delete files apply
//! to ([`deletes`]); the count of offsets committed without rows ([`rowless`]) lets
//! [`audit`] prove from the data that each committed record is in the table once.

pub mod audit;
pub mod compaction;
pub mod dead_letters;
pub mod deletes;
pub mod keys;
pub mod left_out;
pub mod lineage;
pub mod offsets;
pub mod project;
pub mod retention;
pub mod rewrite;
pub mod rowless;
pub mod snapshot;
pub mod state;

use std::collections::HashMap;
use std::str::FromStr;

use iceberg::io::FileIO;
use iceberg::spec::{
    FormatVersion, NestedField, PartitionSpec, Schema, SortOrder, TableMetadata, TableMetadataBuilder, Type,
    UnboundPartitionSpec,
};
use iceberg::{Error, ErrorKind, MetadataLocation};

use crate::catalog::{Catalog, CatalogError, TablePointer, split};
use crate::retry::Retryable;
use crate::vocabulary::Formats;
use iceberg::spec::SnapshotRef;
use offsets::CommittedOffsets;
use rowless::RowlessOffsets;
use std::sync::Arc;

/// A table's metadata and the catalog pointer it was loaded from.
#[derive(Debug, Clone)]
pub struct LoadedTable {
    pub name: TableName,
    pub pointer: TablePointer,
    pub metadata: TableMetadata,
}

/// Failures while loading or committing a table.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("{table}: {source}")]
    Iceberg { table: String, source: Box<Error> },
    /// Floe's record in the table's snapshot summary cannot be read.
    #[error("table {table}: {detail} (snapshot {snapshot_id})")]
    Summary { table: String, snapshot_id: i64, detail: String },
    /// The table holds another topic's offsets: one table holds one topic.
    #[error("{table} holds topic {holds:?}; topic {topic:?} is refused (one table holds one topic)")]
    TopicClash { table: String, holds: String, topic: String },
}

impl Retryable for TableError {
    fn retryable(&self) -> bool {
        match self {
            TableError::Catalog(e) => e.retryable(),
            TableError::Iceberg { source, .. } => source.retryable(),
            TableError::Summary { .. } | TableError::TopicClash { .. } => false,
        }
    }
}

impl TableError {
    pub fn iceberg(table: &TableName) -> impl Fn(Error) -> TableError + '_ {
        move |source| TableError::Iceberg { table: table.to_string(), source: Box::new(source) }
    }
}

/// Loads a table; `None` when the catalog does not have it.
pub async fn load(
    catalog: &dyn Catalog,
    file_io: &FileIO,
    name: &TableName,
) -> Result<Option<LoadedTable>, TableError> {
    let Some(pointer) = catalog.current(name).await? else { return Ok(None) };
    let metadata =
        TableMetadata::read_from(file_io, &pointer.metadata_location).await.map_err(TableError::iceberg(name))?;
    Ok(Some(LoadedTable { name: name.clone(), pointer, metadata }))
}

/// Summary keys that describe one snapshot's own tasks, not carried into the next.
pub const PER_SNAPSHOT_KEYS: [&str; 4] = ["floe.tasks", "floe.skipped-records", "floe.compactions", MAX_TIMESTAMP_KEY];

/// The newest timestamp (ms) of the records an append committed, when its tasks carried
/// one: with the snapshot's own time, the table's freshness lag.
pub const MAX_TIMESTAMP_KEY: &str = "floe.max-timestamp";

/// The snapshot holding Floe's record of the table: the newest in the current snapshot's
/// ancestry that Floe wrote (its summary has `floe.` keys). Other engines (Spark, Athena
/// `OPTIMIZE`, PyIceberg, Glue's compaction, deletes) write snapshots without them; the
/// committed offsets and pending transactions are still those of Floe's last snapshot,
/// carried into Floe's next one (the Iceberg Kafka Connect sink walks ancestry the same way).
pub fn floe_snapshot(metadata: &TableMetadata) -> Option<&SnapshotRef> {
    let mut next = metadata.current_snapshot();
    while let Some(snapshot) = next {
        if snapshot.summary().additional_properties.keys().any(|k| k.starts_with("floe.")) {
            return Some(snapshot);
        }
        next = snapshot.parent_snapshot_id().and_then(|id| metadata.snapshot_by_id(id));
    }
    None
}

/// Floe's keys of [`floe_snapshot`]'s summary, less those about that snapshot alone:
/// what the next snapshot Floe writes carries forward.
pub fn floe_summary(metadata: &TableMetadata) -> HashMap<String, String> {
    floe_snapshot(metadata)
        .map(|s| {
            s.summary()
                .additional_properties
                .iter()
                .filter(|(k, _)| k.starts_with("floe.") && !PER_SNAPSHOT_KEYS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// A table as Floe sees it before writing to it: the current schema (new files keep its
/// field ids), the default partition spec (new files are laid out by it), and the offsets
/// Floe committed (from [`floe_snapshot`]).
#[derive(Debug, Clone)]
pub struct TableView {
    /// The table's location: its files go under it.
    pub location: String,
    pub schema: Schema,
    /// The table's default partition spec.
    pub partition_spec: PartitionSpec,
    pub committed: CommittedOffsets,
}

impl TableView {
    pub fn of(loaded: &LoadedTable) -> Result<TableView, TableError> {
        Ok(TableView {
            location: loaded.metadata.location().trim_end_matches('/').to_string(),
            schema: loaded.metadata.current_schema().as_ref().clone(),
            partition_spec: loaded.metadata.default_partition_spec().as_ref().clone(),
            committed: committed_offsets(&loaded.name, &loaded.metadata)?,
        })
    }
}

/// The offsets Floe committed to the table (from [`floe_snapshot`]).
pub fn committed_offsets(name: &TableName, metadata: &TableMetadata) -> Result<CommittedOffsets, TableError> {
    let Some(snapshot) = floe_snapshot(metadata) else { return Ok(CommittedOffsets::default()) };
    CommittedOffsets::from_summary(&snapshot.summary().additional_properties).map_err(|e| TableError::Summary {
        table: name.to_string(),
        snapshot_id: snapshot.snapshot_id(),
        detail: e.to_string(),
    })
}

/// How many offsets Floe committed without rows, and which it did not count (from
/// [`floe_snapshot`]; see [`rowless`]).
pub fn rowless_offsets(name: &TableName, metadata: &TableMetadata) -> Result<RowlessOffsets, TableError> {
    let committed = committed_offsets(name, metadata)?;
    let Some(snapshot) = floe_snapshot(metadata) else { return Ok(RowlessOffsets::default()) };
    RowlessOffsets::from_summary(&snapshot.summary().additional_properties, &committed).map_err(|e| {
        TableError::Summary { table: name.to_string(), snapshot_id: snapshot.snapshot_id(), detail: e.to_string() }
    })
}

pub use crate::vocabulary::{TableName, table_location};

/// What the materializer asks of the tables: the current schema (so new files keep its
/// field ids), the current partition spec (so new files are laid out by it) and the
/// offsets already committed (so a segment the table holds is not
/// written again: its files are referenced by the table and must not be overwritten).
#[async_trait::async_trait]
pub trait TableLookup: Send + Sync {
    /// `None` when the table does not exist yet.
    async fn view(&self, table: &TableName) -> Result<Option<TableView>, TableError>;
    /// Where the table's files go when the catalog decides ([`Catalog::create_location`]:
    /// S3 Tables makes the table if needed); `None`: under Floe's warehouse.
    async fn create_location(&self, _table: &TableName) -> Result<Option<String>, TableError> {
        Ok(None)
    }
}

/// The catalog's tables as the materializer looks them up (current schema, committed offsets).
pub struct CatalogTables {
    pub catalog: Arc<dyn Catalog>,
    pub file_io: FileIO,
    /// Where the tables' Delta mirrors' logs are read (status).
    pub delta_log: Arc<dyn crate::delta::LogStore>,
}

impl CatalogTables {
    pub async fn load(&self, name: &TableName) -> Result<Option<LoadedTable>, TableError> {
        load(self.catalog.as_ref(), &self.file_io, name).await
    }
}

#[async_trait::async_trait]
impl TableLookup for CatalogTables {
    async fn view(&self, table: &TableName) -> Result<Option<TableView>, TableError> {
        let Some(loaded) = self.load(table).await? else { return Ok(None) };
        TableView::of(&loaded).map(Some)
    }

    async fn create_location(&self, table: &TableName) -> Result<Option<String>, TableError> {
        Ok(self.catalog.create_location(table).await?)
    }
}

/// Table properties Floe sets: Parquet files, commit retries well inside a Lambda's
/// lifetime (for other writers), and a name mapping for files written without field ids.
pub fn table_properties(schema: &Schema) -> HashMap<String, String> {
    HashMap::from([
        ("write.format.default".to_string(), "parquet".to_string()),
        ("write.parquet.compression-codec".to_string(), "zstd".to_string()),
        ("commit.retry.num-retries".to_string(), "4".to_string()),
        ("commit.retry.min-wait-ms".to_string(), "100".to_string()),
        ("commit.retry.max-wait-ms".to_string(), "10000".to_string()),
        ("commit.retry.total-timeout-ms".to_string(), "60000".to_string()),
        ("schema.name-mapping.default".to_string(), name_mapping(schema).to_string()),
        ("floe.managed".to_string(), "true".to_string()),
        // Metadata files that fall out of the metadata log (`write.metadata.previous-versions-max`,
        // 100) are deleted after each commit.
        (snapshot::METADATA_DELETE_AFTER_COMMIT.to_string(), "true".to_string()),
    ])
}

/// Iceberg's name mapping (`[{"field-id": 1, "names": ["a"], "fields": […]}]`).
pub fn name_mapping(schema: &Schema) -> serde_json::Value {
    fn fields(fields: &[std::sync::Arc<NestedField>]) -> Vec<serde_json::Value> {
        fields.iter().map(|f| field(f.id, &f.name, &f.field_type)).collect()
    }
    fn field(id: i32, name: &str, ty: &Type) -> serde_json::Value {
        let mut entry = serde_json::json!({"field-id": id, "names": [name]});
        let nested = match ty {
            Type::Struct(s) => fields(s.fields()),
            Type::List(l) => vec![field(l.element_field.id, "element", &l.element_field.field_type)],
            Type::Map(m) => vec![
                field(m.key_field.id, "key", &m.key_field.field_type),
                field(m.value_field.id, "value", &m.value_field.field_type),
            ],
            Type::Primitive(_) => Vec::new(),
        };
        if !nested.is_empty() {
            entry["fields"] = nested.into();
        }
        entry
    }
    serde_json::Value::Array(fields(schema.as_struct().fields()))
}

/// Metadata of a new table of `format` (2, or 3 with row lineage and deletion vectors) at
/// `location` with exactly `schema`'s field ids, partitioned by `spec` (bound to `schema`;
/// unpartitioned when it has no fields), and where to write it.
pub fn new_table_metadata(
    location: &str,
    schema: &Schema,
    spec: &PartitionSpec,
    format: FormatVersion,
) -> iceberg::Result<(TableMetadata, MetadataLocation)> {
    let metadata = TableMetadataBuilder::new(
        schema.clone(),
        UnboundPartitionSpec::builder().build(),
        SortOrder::unsorted_order(),
        location.to_string(),
        format,
        table_properties(schema),
    )?
    .build()?
    .metadata;
    // The builder renumbers field ids in its own order; the files carry ours, so when
    // they differ ours is added as the current schema (ids kept).
    let metadata = if metadata.current_schema().as_struct() == schema.as_struct() {
        metadata
    } else {
        metadata.into_builder(None).add_current_schema(schema.clone())?.build()?.metadata
    };
    // The spec binds to our ids, so it is added once our schema is current (the builder
    // would rebind a spec given up front to its renumbered schema); the placeholder
    // unpartitioned spec goes. Field ids keep theirs (from 1000).
    let metadata = if spec.is_unpartitioned() {
        metadata
    } else {
        let placeholder = metadata.default_partition_spec_id();
        metadata
            .into_builder(None)
            .add_default_partition_spec(spec.clone().into_unbound())?
            .remove_partition_specs(&[placeholder])?
            .build()?
            .metadata
    };
    let metadata_location = MetadataLocation::new_with_metadata(location, &metadata);
    Ok((metadata, metadata_location))
}

/// What a new table is made of: its schema, partition spec (bound to it), format
/// version, for an upsert table its key columns, and its topic's table formats (a
/// Delta-only topic's Iceberg table says so: [`crate::catalog::split`]).
pub struct NewTable<'a> {
    pub schema: &'a Schema,
    pub spec: &'a PartitionSpec,
    pub format: FormatVersion,
    pub upsert_key: Option<&'a [String]>,
    pub formats: Formats,
}

/// Creates the table in the catalog; `Ok(false)` when someone else created it first.
pub async fn create(
    catalog: &dyn Catalog,
    file_io: &FileIO,
    name: &TableName,
    location: &str,
    new: &NewTable<'_>,
) -> Result<bool, TableError> {
    let (metadata, metadata_location) =
        new_table_metadata(location, new.schema, new.spec, new.format).map_err(TableError::iceberg(name))?;
    let mut properties = HashMap::new();
    if let Some(key) = new.upsert_key {
        let key = serde_json::to_string(key)
            .map_err(|e| TableError::iceberg(name)(Error::new(ErrorKind::Unexpected, e.to_string())))?;
        properties.insert(keys::UPSERT_KEY_PROPERTY.to_string(), key);
    }
    if !new.formats.iceberg() {
        properties.insert(split::FORMATS_PROPERTY.to_string(), split::DELTA_ONLY.to_string());
    }
    let metadata = match properties.is_empty() {
        true => metadata,
        false => {
            metadata
                .into_builder(None)
                .set_properties(properties)
                .and_then(|b| b.build())
                .map_err(TableError::iceberg(name))?
                .metadata
        }
    };
    metadata.write_to(file_io, &metadata_location).await.map_err(TableError::iceberg(name))?;
    match catalog.create(name, &metadata, &metadata_location.to_string()).await {
        Ok(()) => Ok(true),
        Err(e) if e.is_conflict() => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Parses a metadata location Floe (or another writer using Iceberg's naming) wrote.
pub fn parse_metadata_location(location: &str) -> iceberg::Result<MetadataLocation> {
    MetadataLocation::from_str(location).map_err(|e| Error::new(ErrorKind::DataInvalid, format!("{location}: {e}")))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use iceberg::spec::{ListType, PrimitiveType};

    use super::*;

    #[test]
    fn new_tables_keep_the_field_ids_of_the_files() {
        // Depth-first ids (as the planner assigns them), which the builder would renumber.
        let schema = Schema::builder()
            .with_fields(vec![
                Arc::new(NestedField::optional(
                    1,
                    "a",
                    Type::List(ListType::new(Arc::new(NestedField::list_element(
                        2,
                        Type::Primitive(PrimitiveType::Long),
                        false,
                    )))),
                )),
                Arc::new(NestedField::optional(3, "b", Type::Primitive(PrimitiveType::String))),
            ])
            .build()
            .unwrap();
        let (metadata, location) =
            new_table_metadata("file:///tmp/t", &schema, &PartitionSpec::unpartition_spec(), FormatVersion::V2)
                .unwrap();
        assert_eq!(metadata.current_schema().as_struct(), schema.as_struct());
        assert!(location.to_string().starts_with("file:///tmp/t/metadata/00000-"));
        // Partitioned: the spec binds to the files' ids, field ids from 1000, one spec.
        let spec = crate::partition::bind(
            &schema,
            &[crate::config::PartitionField { source: "b".into(), transform: crate::config::Transform::Truncate(4) }],
            "p",
        )
        .unwrap();
        let (partitioned, _) = new_table_metadata("file:///tmp/t", &schema, &spec, FormatVersion::V2).unwrap();
        assert_eq!(partitioned.current_schema().as_struct(), schema.as_struct());
        let default = partitioned.default_partition_spec();
        assert!(crate::partition::same_layout(default, &spec), "{default:?}");
        assert_eq!((default.fields()[0].source_id, default.fields()[0].field_id), (3, 1000));
        assert_eq!(default.fields()[0].name, "b_trunc");
        assert_eq!(partitioned.partition_specs_iter().count(), 1);
        let mapping = name_mapping(&schema);
        assert_eq!(mapping[0]["fields"][0]["field-id"], 2);
        assert_eq!(mapping[1]["names"][0], "b");
    }
}
