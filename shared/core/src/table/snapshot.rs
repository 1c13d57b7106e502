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

use std::collections::{HashMap, HashSet};
use std::str::FromStr;

use iceberg::io::FileIO;
use iceberg::spec::{
    DataFile, MAIN_BRANCH, ManifestFile, ManifestList, ManifestListWriter, ManifestWriterBuilder, Operation, Schema,
    Snapshot, SnapshotSummaryCollector, Summary, TableMetadata,
};
use iceberg::{Error, ErrorKind, MetadataLocation, Result};

/// Manifests of the current snapshot merged into one once there are this many
/// (Iceberg's `commit.manifest.min-count-to-merge`), so the manifest list stays short.
pub const MIN_COUNT_TO_MERGE: usize = 100;
/// Manifests at least this large are left as they are (`commit.manifest.target-size-bytes`).
pub const MANIFEST_TARGET_BYTES: i64 = 8 << 20;
/// Snapshots kept in the metadata (`floe.history.max-snapshots`); older ones expire, so
/// the metadata file stays small however long the table lives. Their files are left to
/// orphan-file maintenance.
pub const MAX_SNAPSHOTS: usize = 100;

fn property<T: std::str::FromStr>(metadata: &TableMetadata, key: &str, default: T) -> T {
    metadata.properties().get(key).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Rewrites the small manifests into one (their live entries as EXISTING) once there are
/// enough of them; returns the new list.
async fn merge_manifests(
    file_io: &FileIO,
    metadata: &TableMetadata,
    manifests: Vec<ManifestFile>,
    snapshot_id: i64,
    path: String,
) -> Result<Vec<ManifestFile>> {
    let min_count = property(metadata, "commit.manifest.min-count-to-merge", MIN_COUNT_TO_MERGE);
    let target = property(metadata, "commit.manifest.target-size-bytes", MANIFEST_TARGET_BYTES);
    let (small, mut kept): (Vec<_>, Vec<_>) = manifests
        .into_iter()
        .partition(|m| m.manifest_length < target && m.content == iceberg::spec::ManifestContentType::Data);
    if small.len() < min_count.max(2) {
        kept.extend(small);
        return Ok(kept);
    }
    let schema = metadata.current_schema().clone();
    let spec = metadata.default_partition_spec().as_ref().clone();
    let mut writer =
        ManifestWriterBuilder::new(file_io.new_output(path)?, Some(snapshot_id), schema, spec).build_v2_data();
    for manifest in &small {
        for entry in manifest.load_manifest(file_io).await?.entries().iter().filter(|e| e.is_alive()) {
            let sequence = entry.sequence_number().unwrap_or(manifest.sequence_number);
            writer.add_existing_file(
                entry.data_file().clone(),
                entry.snapshot_id().unwrap_or(manifest.added_snapshot_id),
                sequence,
                entry.file_sequence_number.or(Some(sequence)),
            )?;
        }
    }
    kept.insert(0, writer.write_manifest_file().await?);
    Ok(kept)
}

/// What a snapshot removed.
#[derive(Default)]
struct Deleted {
    files: u64,
    records: u64,
    bytes: u64,
}

/// Rewrites the manifests holding files of `removed`: those entries become DELETED, the
/// others EXISTING; manifests without any are kept as they are. Fails with
/// `PreconditionFailed` when a path of `removed` is not a live file of the snapshot.
async fn remove_files(
    file_io: &FileIO,
    manifests: Vec<ManifestFile>,
    removed: &HashSet<String>,
    snapshot_id: i64,
    metadata_dir: &str,
    commit_uuid: uuid::Uuid,
    deleted: &mut Deleted,
) -> Result<Vec<ManifestFile>> {
    let mut found = HashSet::new();
    let mut out = Vec::with_capacity(manifests.len());
    for (i, manifest_file) in manifests.into_iter().enumerate() {
        if manifest_file.content != iceberg::spec::ManifestContentType::Data {
            out.push(manifest_file);
            continue;
        }
        let manifest = manifest_file.load_manifest(file_io).await?;
        let alive = |e: &&std::sync::Arc<iceberg::spec::ManifestEntry>| e.is_alive();
        if !manifest.entries().iter().filter(alive).any(|e| removed.contains(e.file_path())) {
            out.push(manifest_file);
            continue;
        }
        let output = file_io.new_output(format!("{metadata_dir}/{commit_uuid}-r{i}.avro"))?;
        let (schema, spec) = (manifest.metadata().schema().clone(), manifest.metadata().partition_spec().clone());
        let mut writer = ManifestWriterBuilder::new(output, Some(snapshot_id), schema, spec).build_v2_data();
        for entry in manifest.entries().iter().filter(alive) {
            let sequence = entry.sequence_number().unwrap_or(manifest_file.sequence_number);
            let file_sequence = entry.file_sequence_number.or(Some(sequence));
            if removed.contains(entry.file_path()) {
                found.insert(entry.file_path().to_string());
                deleted.files += 1;
                deleted.records += entry.record_count();
                deleted.bytes += entry.file_size_in_bytes();
                writer.add_delete_file(entry.data_file().clone(), sequence, file_sequence)?;
            } else {
                let added_by = entry.snapshot_id().unwrap_or(manifest_file.added_snapshot_id);
                writer.add_existing_file(entry.data_file().clone(), added_by, sequence, file_sequence)?;
            }
        }
        out.push(writer.write_manifest_file().await?);
    }
    let mut missing: Vec<&String> = removed.iter().filter(|p| !found.contains(*p)).collect();
    if !missing.is_empty() {
        missing.sort();
        return Err(Error::new(
            ErrorKind::PreconditionFailed,
            format!("{} input file(s) are no longer live: {:?}", missing.len(), missing),
        ));
    }
    Ok(out)
}

/// Summary totals Iceberg readers show (`total-records`, …), carried from the parent.
const TOTALS: [&str; 3] = ["total-data-files", "total-records", "total-files-size"];

/// What a new snapshot holds.
pub struct SnapshotChange {
    pub operation: Operation,
    pub added: Vec<DataFile>,
    /// Paths of live data files this snapshot removes (compaction); each must be live,
    /// else the write fails with `PreconditionFailed` naming those that are not.
    pub removed: HashSet<String>,
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

/// The live data files of the current snapshot.
pub async fn live_data_files(file_io: &FileIO, metadata: &TableMetadata) -> Result<Vec<DataFile>> {
    let mut files = Vec::new();
    for manifest in current_manifests(file_io, metadata).await? {
        for entry in manifest.load_manifest(file_io).await?.entries() {
            if entry.is_alive() {
                files.push(entry.data_file().clone());
            }
        }
    }
    Ok(files)
}

/// A live data file and when it was added: the timestamp of the snapshot that added it
/// (its entry's snapshot id, kept through manifest merges and rewrites).
#[derive(Debug, Clone)]
pub struct LiveFile {
    pub file: DataFile,
    pub added_at_ms: i64,
}

/// The live data files of the current snapshot, each with when it was added. A file
/// whose snapshot has expired gets the oldest kept snapshot's timestamp (it is older).
pub async fn live_data_files_added(file_io: &FileIO, metadata: &TableMetadata) -> Result<Vec<LiveFile>> {
    let oldest = metadata.snapshots().map(|s| s.timestamp_ms()).min().unwrap_or(0);
    let mut files = Vec::new();
    for manifest in current_manifests(file_io, metadata).await? {
        for entry in manifest.load_manifest(file_io).await?.entries().iter().filter(|e| e.is_alive()) {
            let snapshot_id = entry.snapshot_id().unwrap_or(manifest.added_snapshot_id);
            let added_at_ms = metadata.snapshot_by_id(snapshot_id).map_or(oldest, |s| s.timestamp_ms());
            files.push(LiveFile { file: entry.data_file().clone(), added_at_ms });
        }
    }
    Ok(files)
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
    let mut deleted = Deleted::default();
    if !change.removed.is_empty() {
        manifests =
            remove_files(file_io, manifests, &change.removed, snapshot_id, &metadata_dir, commit_uuid, &mut deleted)
                .await?;
    }
    let mut manifests =
        merge_manifests(file_io, current, manifests, snapshot_id, format!("{metadata_dir}/{commit_uuid}-merged.avro"))
            .await?;
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
    let minus = [deleted.files, deleted.records, deleted.bytes];
    for ((total, add), minus) in TOTALS.iter().zip(["added-data-files", "added-records", "added-files-size"]).zip(minus)
    {
        let before = previous.and_then(|p| p.get(*total)).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        let plus = added.get(add).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        properties.insert(total.to_string(), (before + plus).saturating_sub(minus).to_string());
    }
    if deleted.files > 0 {
        properties.insert("deleted-data-files".into(), deleted.files.to_string());
        properties.insert("deleted-records".into(), deleted.records.to_string());
        properties.insert("removed-files-size".into(), deleted.bytes.to_string());
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
    let keep = property(current, "floe.history.max-snapshots", MAX_SNAPSHOTS).max(1);
    let mut ids: Vec<(i64, i64)> = current.snapshots().map(|s| (s.timestamp_ms(), s.snapshot_id())).collect();
    ids.sort_unstable();
    let expired: Vec<i64> = ids.iter().rev().skip(keep - 1).map(|(_, id)| *id).collect();
    let metadata = staged
        .into_builder(None)
        .set_branch_snapshot(snapshot, MAIN_BRANCH)?
        .remove_snapshots(&expired)
        .build()?
        .metadata;
    let location = MetadataLocation::from_str(current_location)
        .map_err(|e| Error::new(ErrorKind::DataInvalid, format!("{current_location}: {e}")))?
        .with_next_version()
        .with_new_metadata(&metadata);
    metadata.write_to(file_io, &location).await?;
    Ok(NewMetadata { metadata, location: location.to_string() })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat, NestedField, PrimitiveType, Struct, Type};

    use super::*;

    fn file(i: usize) -> DataFile {
        DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(format!("memory:///t/data/{i}.parquet"))
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::empty())
            .record_count(10)
            .file_size_in_bytes(1000)
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn history_is_bounded_and_manifests_are_merged_without_losing_files() {
        let file_io = FileIO::new_with_memory();
        let schema = Schema::builder()
            .with_fields(vec![Arc::new(NestedField::required(1, "x", Type::Primitive(PrimitiveType::Long)))])
            .build()
            .unwrap();
        let (metadata, location) =
            crate::table::new_table_metadata("memory:///t", &schema, &iceberg::spec::PartitionSpec::unpartition_spec())
                .unwrap();
        let mut metadata = metadata
            .into_builder(None)
            .set_properties(HashMap::from([
                ("floe.history.max-snapshots".to_string(), "3".to_string()),
                ("commit.manifest.min-count-to-merge".to_string(), "4".to_string()),
            ]))
            .unwrap()
            .build()
            .unwrap()
            .metadata;
        metadata.write_to(&file_io, &location).await.unwrap();
        let mut location = location.to_string();
        for i in 0..10 {
            let change = SnapshotChange {
                operation: Operation::Append,
                added: vec![file(i)],
                removed: HashSet::new(),
                properties: HashMap::from([("floe.offsets.t.0".to_string(), format!("0-{i}"))]),
                new_schema: None,
            };
            let new = write_snapshot(&file_io, &metadata, &location, change).await.unwrap();
            (metadata, location) = (new.metadata, new.location);
        }
        assert_eq!(metadata.snapshots().len(), 3);
        let manifests = current_manifests(&file_io, &metadata).await.unwrap();
        assert!(manifests.len() <= 4, "{} manifests", manifests.len());
        let mut paths = Vec::new();
        for m in &manifests {
            for e in m.load_manifest(&file_io).await.unwrap().entries().iter().filter(|e| e.is_alive()) {
                paths.push(e.file_path().to_string());
            }
        }
        paths.sort();
        let mut expected: Vec<_> = (0..10).map(|i| format!("memory:///t/data/{i}.parquet")).collect();
        expected.sort();
        assert_eq!(paths, expected);
        let summary = &metadata.current_snapshot().unwrap().summary().additional_properties;
        assert_eq!(summary["total-data-files"], "10");
        assert_eq!(summary["total-records"], "100");
        // Read back from the file, as another reader would.
        let read = TableMetadata::read_from(&file_io, &location).await.unwrap();
        assert_eq!(read.snapshots().len(), 3);
    }
}
