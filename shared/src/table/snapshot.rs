//! Our own snapshot producer: iceberg-rust 0.10.1 has `fast_append` only inside its
//! `Transaction` (whose duplicate check reads every manifest, and whose commit needs its
//! own catalog), and no replace action at all. Floe writes snapshots itself:
//!
//! ```text
//!  current snapshot's manifest list ──(kept as they are)──┐
//!  new data files ──▶ one new manifest (status ADDED) ────┼──▶ new manifest list
//!  [replace: inputs ──▶ rewritten manifests, DELETED] ────┘          │
//!                                                                    ▼
//!  Snapshot { id, parent, sequence number, summary: operation, added-/total-*,
//!             floe.offsets.* } ──▶ metadata.into_builder(current) + schema + snapshot
//!                                  ──▶ <location>/metadata/<version+1>-<uuid>.metadata.json
//! ```
//!
//! The cost of an append is one manifest list read and one small manifest written,
//! whatever the table's history; the caller swaps the catalog pointer afterwards.

use std::collections::HashMap;
use std::str::FromStr;

use iceberg::io::FileIO;
use iceberg::spec::{
    DataFile, MAIN_BRANCH, ManifestFile, ManifestList, ManifestListWriter, ManifestWriterBuilder, Operation, Schema,
    Snapshot, SnapshotSummaryCollector, Summary, TableMetadata,
};
use iceberg::{Error, ErrorKind, MetadataLocation, Result};

/// Summary totals Iceberg readers show (`total-records`, …), carried from the parent.
const TOTALS: [&str; 3] = ["total-data-files", "total-records", "total-files-size"];

/// What a new snapshot holds.
pub struct SnapshotChange {
    pub operation: Operation,
    pub added: Vec<DataFile>,
    /// Summary entries of Floe (`floe.offsets.*`, task ids, …), merged with the totals.
    pub properties: HashMap<String, String>,
    /// A schema to make current in the same commit (schema evolution).
    pub new_schema: Option<Schema>,
}

/// The written metadata file and what it holds.
pub struct NewMetadata {
    pub metadata: TableMetadata,
    pub location: String,
}

/// A snapshot id not used by the table yet.
pub fn new_snapshot_id(metadata: &TableMetadata) -> i64 {
    loop {
        let (hi, lo) = uuid::Uuid::new_v4().as_u64_pair();
        let id = ((hi ^ lo) as i64).wrapping_abs();
        if id > 0 && metadata.snapshot_by_id(id).is_none() {
            return id;
        }
    }
}

/// The manifests of the current snapshot.
pub async fn current_manifests(file_io: &FileIO, metadata: &TableMetadata) -> Result<Vec<ManifestFile>> {
    let Some(snapshot) = metadata.current_snapshot() else { return Ok(Vec::new()) };
    let bytes = file_io.new_input(snapshot.manifest_list())?.read().await?;
    Ok(ManifestList::parse_with_version(&bytes, metadata.format_version())?.entries().to_vec())
}

/// Writes the snapshot and the metadata file that makes it current; returns them. The
/// catalog pointer is not moved here.
pub async fn write_snapshot(
    file_io: &FileIO,
    current: &TableMetadata,
    current_location: &str,
    change: SnapshotChange,
) -> Result<NewMetadata> {
    let mut builder = current.clone().into_builder(Some(current_location.to_string()));
    if let Some(schema) = change.new_schema {
        builder = builder.add_current_schema(schema)?;
    }
    // The schema the manifest is written with: the evolved one when there is one.
    let staged = builder.build()?.metadata;
    let schema = staged.current_schema().clone();
    let spec = staged.default_partition_spec().clone();

    let snapshot_id = new_snapshot_id(current);
    let sequence_number = current.next_sequence_number();
    let parent = current.current_snapshot_id();
    let metadata_dir = format!("{}/metadata", current.location());
    let commit_uuid = uuid::Uuid::new_v4();

    let mut manifests = current_manifests(file_io, current).await?;
    let mut collector = SnapshotSummaryCollector::default();
    if !change.added.is_empty() {
        let output = file_io.new_output(format!("{metadata_dir}/{commit_uuid}-m0.avro"))?;
        let mut writer = ManifestWriterBuilder::new(output, Some(snapshot_id), schema.clone(), spec.as_ref().clone())
            .build_v2_data();
        for file in change.added {
            collector.add_file(&file, schema.clone(), spec.clone());
            writer.add_file(file, sequence_number)?;
        }
        manifests.push(writer.write_manifest_file().await?);
    }
    let list_location = format!("{metadata_dir}/snap-{snapshot_id}-0-{commit_uuid}.avro");
    let mut list = ManifestListWriter::v2(
        file_io.new_output(&list_location)?.writer().await?,
        snapshot_id,
        parent,
        sequence_number,
    );
    list.add_manifests(manifests.into_iter())?;
    list.close().await?;

    let added = collector.build();
    let mut properties = change.properties;
    let previous = current.current_snapshot().map(|s| &s.summary().additional_properties);
    for (total, add) in TOTALS.iter().zip(["added-data-files", "added-records", "added-files-size"]) {
        let before = previous.and_then(|p| p.get(*total)).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        let plus = added.get(add).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        properties.insert(total.to_string(), (before + plus).to_string());
    }
    properties.extend(added);
    let snapshot = Snapshot::builder()
        .with_snapshot_id(snapshot_id)
        .with_parent_snapshot_id(parent)
        .with_sequence_number(sequence_number)
        .with_timestamp_ms(chrono::Utc::now().timestamp_millis().max(current.last_updated_ms()))
        .with_manifest_list(list_location)
        .with_summary(Summary { operation: change.operation, additional_properties: properties })
        .with_schema_id(staged.current_schema_id())
        .build();
    let metadata = staged.into_builder(None).set_branch_snapshot(snapshot, MAIN_BRANCH)?.build()?.metadata;
    let location = MetadataLocation::from_str(current_location)
        .map_err(|e| Error::new(ErrorKind::DataInvalid, format!("{current_location}: {e}")))?
        .with_next_version()
        .with_new_metadata(&metadata);
    metadata.write_to(file_io, &location).await?;
    Ok(NewMetadata { metadata, location: location.to_string() })
}
