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
/// Snapshots kept in the metadata at most (`floe.history.max-snapshots`); older ones
/// expire, so the metadata file stays small however long the table lives. Their files are
/// left to orphan-file maintenance.
pub const MAX_SNAPSHOTS: usize = 100;
/// Snapshots older than this expire (Iceberg's `history.expire.max-snapshot-age-ms`): 5 days.
pub const MAX_SNAPSHOT_AGE_MS: i64 = 5 * 24 * 60 * 60 * 1000;
/// The newest snapshots never expire, whatever their age (`history.expire.min-snapshots-to-keep`).
pub const MIN_SNAPSHOTS_TO_KEEP: usize = 5;
/// Metadata files kept in the metadata log (Iceberg's `write.metadata.previous-versions-max`;
/// the builder trims the log to it).
pub const METADATA_PREVIOUS_VERSIONS_MAX: &str = "write.metadata.previous-versions-max";
/// Whether the metadata files that fell out of the log are deleted after a commit.
pub const METADATA_DELETE_AFTER_COMMIT: &str = "write.metadata.delete-after-commit.enabled";

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

/// The snapshots to expire at `now_ms` (the wall clock; tests pass their own): of the
/// current snapshot's ancestry, those older than `history.expire.max-snapshot-age-ms` or
/// beyond the `floe.history.max-snapshots` newest — except the
/// `history.expire.min-snapshots-to-keep` newest (the current one among them) and Floe's
/// newest snapshot, whose summary carries the committed offsets
/// ([`crate::table::floe_snapshot`]), with those between it and the current one: without
/// them the ancestry would no longer reach it. (Every snapshot Floe writes is Floe's, so
/// when Floe commits that is the current one alone.) Snapshots outside the ancestry are
/// left alone.
pub fn expired_snapshots(metadata: &TableMetadata, now_ms: i64) -> Vec<i64> {
    let max_count = property(metadata, "floe.history.max-snapshots", MAX_SNAPSHOTS).max(1);
    let max_age = property(metadata, "history.expire.max-snapshot-age-ms", MAX_SNAPSHOT_AGE_MS);
    let min_keep = property(metadata, "history.expire.min-snapshots-to-keep", MIN_SNAPSHOTS_TO_KEEP).max(1);
    let floe = crate::table::floe_snapshot(metadata).map(|s| s.snapshot_id());
    let (mut expired, mut seen) = (Vec::new(), HashSet::new());
    let mut next = metadata.current_snapshot();
    while let Some(snapshot) = next {
        let (id, i) = (snapshot.snapshot_id(), seen.len());
        if !seen.insert(id) {
            break;
        }
        let recent = i < max_count && now_ms.saturating_sub(snapshot.timestamp_ms()) <= max_age;
        // Floe's snapshot and those newer (before its turn it is not seen yet).
        let reaches_floe = floe.is_some_and(|f| f == id || !seen.contains(&f));
        if !(i < min_keep || reaches_floe || recent) {
            expired.push(id);
        }
        next = snapshot.parent_snapshot_id().and_then(|p| metadata.snapshot_by_id(p));
    }
    expired
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
    /// Metadata files that fell out of the metadata log
    /// (`write.metadata.previous-versions-max`): to delete once the commit succeeded, when
    /// `write.metadata.delete-after-commit.enabled`.
    pub expired_metadata_files: Vec<String>,
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

/// Whether `manifest` lists data files (delete manifests list other engines' delete
/// files, never to be read as data: [`crate::table::deletes`]).
fn lists_data(manifest: &ManifestFile) -> bool {
    manifest.content == iceberg::spec::ManifestContentType::Data
}

/// The live data files of the current snapshot (data only: no delete file).
pub async fn live_data_files(file_io: &FileIO, metadata: &TableMetadata) -> Result<Vec<DataFile>> {
    let mut files = Vec::new();
    for manifest in current_manifests(file_io, metadata).await?.iter().filter(|m| lists_data(m)) {
        for entry in manifest.load_manifest(file_io).await?.entries() {
            if entry.is_alive() && entry.content_type() == iceberg::spec::DataContentType::Data {
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

/// The live data files of the current snapshot (data only), each with when it was added. A file
/// whose snapshot has expired gets the oldest kept snapshot's timestamp (it is older).
pub async fn live_data_files_added(file_io: &FileIO, metadata: &TableMetadata) -> Result<Vec<LiveFile>> {
    let oldest = metadata.snapshots().map(|s| s.timestamp_ms()).min().unwrap_or(0);
    let mut files = Vec::new();
    for manifest in current_manifests(file_io, metadata).await?.iter().filter(|m| lists_data(m)) {
        let entries = manifest.load_manifest(file_io).await?;
        let data = entries.entries().iter().filter(|e| e.content_type() == iceberg::spec::DataContentType::Data);
        for entry in data.filter(|e| e.is_alive()) {
            let snapshot_id = entry.snapshot_id().unwrap_or(manifest.added_snapshot_id);
            let added_at_ms = metadata.snapshot_by_id(snapshot_id).map_or(oldest, |s| s.timestamp_ms());
            files.push(LiveFile { file: entry.data_file().clone(), added_at_ms });
        }
    }
    Ok(files)
}

/// Writes the snapshot and the metadata file that makes it current, expiring snapshots
/// ([`expired_snapshots`]) as of `now_ms` (the wall clock); returns them. The catalog
/// pointer is not moved here.
pub async fn write_snapshot(
    file_io: &FileIO,
    current: &TableMetadata,
    current_location: &str,
    change: SnapshotChange,
    now_ms: i64,
) -> Result<NewMetadata> {
    let mut builder = current.clone().into_builder(Some(current_location.to_string()));
    if let Some(schema) = change.new_schema {
        builder = builder.add_current_schema(schema)?;
    }
    // The schema the manifest is written with: the evolved one when there is one.
    let built = builder.build()?;
    let expired_metadata_files = built.expired_metadata_logs.into_iter().map(|l| l.metadata_file).collect();
    let staged = built.metadata;
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
        .with_timestamp_ms(now_ms.max(current.last_updated_ms()))
        .with_manifest_list(list_location)
        .with_summary(Summary { operation: change.operation, additional_properties: properties })
        .with_schema_id(staged.current_schema_id())
        .build();
    // Expiry looks at the history with the new snapshot current; one builder then adds it
    // and removes the expired (the metadata's last-updated stays the snapshot's time).
    let with_new = staged.clone().into_builder(None).set_branch_snapshot(snapshot.clone(), MAIN_BRANCH)?.build()?;
    let expired = expired_snapshots(&with_new.metadata, now_ms);
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
    Ok(NewMetadata { metadata, location: location.to_string(), expired_metadata_files })
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
        let (file_io, mut metadata, mut location) = table(&[
            ("floe.history.max-snapshots", "3"),
            ("history.expire.min-snapshots-to-keep", "2"),
            ("commit.manifest.min-count-to-merge", "4"),
        ])
        .await;
        for i in 0..10 {
            let change = SnapshotChange {
                operation: Operation::Append,
                added: vec![file(i)],
                removed: HashSet::new(),
                properties: HashMap::from([("floe.offsets.t.0".to_string(), format!("0-{i}"))]),
                new_schema: None,
            };
            let new = write_snapshot(&file_io, &metadata, &location, change, chrono::Utc::now().timestamp_millis())
                .await
                .unwrap();
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

    const DAY: i64 = 24 * 60 * 60 * 1000;

    /// A table in memory with `properties`, its metadata and its location.
    async fn table(properties: &[(&str, &str)]) -> (FileIO, TableMetadata, String) {
        let file_io = FileIO::new_with_memory();
        let schema = Schema::builder()
            .with_fields(vec![Arc::new(NestedField::required(1, "x", Type::Primitive(PrimitiveType::Long)))])
            .build()
            .unwrap();
        let (metadata, location) =
            crate::table::new_table_metadata("memory:///t", &schema, &iceberg::spec::PartitionSpec::unpartition_spec())
                .unwrap();
        let properties = properties.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let metadata = metadata.into_builder(None).set_properties(properties).unwrap().build().unwrap().metadata;
        metadata.write_to(&file_io, &location).await.unwrap();
        (file_io, metadata, location.to_string())
    }

    /// Appends a snapshot at `now`: Floe's (with offsets) or another engine's (without).
    async fn append(table: &mut (FileIO, TableMetadata, String), floe: bool, now: i64) -> i64 {
        let properties =
            if floe { HashMap::from([("floe.offsets.t.0".to_string(), format!("0-{now}"))]) } else { HashMap::new() };
        let change = SnapshotChange {
            operation: Operation::Append,
            added: Vec::new(),
            removed: HashSet::new(),
            properties,
            new_schema: None,
        };
        let new = write_snapshot(&table.0, &table.1, &table.2, change, now).await.unwrap();
        (table.1, table.2) = (new.metadata, new.location);
        table.1.current_snapshot_id().unwrap()
    }

    /// A history built in memory: one snapshot per `(Floe's?, timestamp)`, each the parent
    /// of the next, the last current; returns the metadata and the ids, oldest first.
    fn history(properties: &[(&str, &str)], snapshots: &[(bool, i64)]) -> (TableMetadata, Vec<i64>) {
        let schema = Schema::builder()
            .with_fields(vec![Arc::new(NestedField::required(1, "x", Type::Primitive(PrimitiveType::Long)))])
            .build()
            .unwrap();
        let (metadata, _) =
            crate::table::new_table_metadata("memory:///t", &schema, &iceberg::spec::PartitionSpec::unpartition_spec())
                .unwrap();
        let properties = properties.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut builder = metadata.clone().into_builder(None).set_properties(properties).unwrap();
        let mut ids = Vec::new();
        for (i, (floe, timestamp)) in snapshots.iter().enumerate() {
            let id = i as i64 + 1;
            let mut summary = HashMap::new();
            if *floe {
                summary.insert("floe.offsets.t.0".to_string(), format!("0-{i}"));
            }
            let snapshot = Snapshot::builder()
                .with_snapshot_id(id)
                .with_parent_snapshot_id(ids.last().copied())
                .with_sequence_number(id)
                .with_timestamp_ms(*timestamp)
                .with_manifest_list(format!("memory:///t/metadata/snap-{id}.avro"))
                .with_summary(Summary { operation: Operation::Append, additional_properties: summary })
                .with_schema_id(metadata.current_schema_id())
                .build();
            builder = builder.set_branch_snapshot(snapshot, MAIN_BRANCH).unwrap();
            ids.push(id);
        }
        (builder.build().unwrap().metadata, ids)
    }

    #[test]
    fn snapshots_older_than_the_retention_expire_but_the_newest_stay() {
        let base = chrono::Utc::now().timestamp_millis();
        let days: Vec<(bool, i64)> = (0..10).map(|i| (true, base + i * DAY)).collect();
        let (metadata, ids) = history(&[("history.expire.min-snapshots-to-keep", "2")], &days);
        // At day 9: days 4..=9 are within 5 days (the default retention).
        let expired = expired_snapshots(&metadata, base + 9 * DAY);
        assert_eq!(expired, ids[..4].iter().rev().copied().collect::<Vec<_>>());
        // Much later, all are old: only the 2 newest stay.
        let expired = expired_snapshots(&metadata, base + 100 * DAY);
        assert_eq!(expired, ids[..8].iter().rev().copied().collect::<Vec<_>>());
    }

    #[test]
    fn the_count_is_bounded_and_the_minimum_wins_over_it() {
        let base = chrono::Utc::now().timestamp_millis();
        let snapshots: Vec<(bool, i64)> = (0..10).map(|i| (true, base + i)).collect();
        let count = [("floe.history.max-snapshots", "3"), ("history.expire.min-snapshots-to-keep", "1")];
        let (metadata, ids) = history(&count, &snapshots);
        assert_eq!(expired_snapshots(&metadata, base + 10), ids[..7].iter().rev().copied().collect::<Vec<_>>());
        let minimum = [("floe.history.max-snapshots", "3"), ("history.expire.min-snapshots-to-keep", "5")];
        let (metadata, ids) = history(&minimum, &snapshots);
        assert_eq!(expired_snapshots(&metadata, base + 10), ids[..5].iter().rev().copied().collect::<Vec<_>>());
    }

    #[test]
    fn the_current_snapshot_and_floe_s_are_always_kept() {
        let base = chrono::Utc::now().timestamp_millis();
        let none = [("history.expire.max-snapshot-age-ms", "0"), ("history.expire.min-snapshots-to-keep", "0")];
        // Another engine's, Floe's, another's (current); no retention, no minimum.
        let (metadata, ids) = history(&none, &[(false, base), (true, base + 1), (false, base + 2)]);
        assert_eq!(expired_snapshots(&metadata, base + 100 * DAY), vec![ids[0]]);
        // With one more of another engine: the one between stays, so Floe's stays reachable.
        let (metadata, ids) = history(&none, &[(false, base), (true, base + 1), (false, base + 2), (false, base + 3)]);
        assert_eq!(expired_snapshots(&metadata, base + 100 * DAY), vec![ids[0]]);
        // A snapshot outside the current ancestry is no candidate: a new current on Floe's.
        let rolled = metadata
            .into_builder(None)
            .set_branch_snapshot(
                Snapshot::builder()
                    .with_snapshot_id(99)
                    .with_parent_snapshot_id(Some(ids[1]))
                    .with_sequence_number(5)
                    .with_timestamp_ms(base + 4)
                    .with_manifest_list("memory:///t/metadata/snap-99.avro")
                    .with_summary(Summary { operation: Operation::Append, additional_properties: HashMap::new() })
                    .build(),
                MAIN_BRANCH,
            )
            .unwrap()
            .build()
            .unwrap()
            .metadata;
        assert_eq!(expired_snapshots(&rolled, base + 100 * DAY), vec![ids[0]]);
    }

    #[tokio::test]
    async fn floe_s_snapshot_survives_120_foreign_ones() {
        let mut t = table(&[]).await;
        let now = || chrono::Utc::now().timestamp_millis();
        let floe = append(&mut t, true, now()).await;
        for _ in 1..=120 {
            append(&mut t, false, now()).await;
        }
        // All stay: expiring one of the 120 would cut Floe's snapshot (its summary carries
        // the committed offsets) off the ancestry, even when all are old.
        assert_eq!(t.1.snapshots().len(), 121);
        assert_eq!(crate::table::floe_snapshot(&t.1).unwrap().snapshot_id(), floe);
        assert!(expired_snapshots(&t.1, now() + 100 * DAY).is_empty());
        // Floe's next snapshot is its newest: the count applies again.
        let newest = append(&mut t, true, now()).await;
        assert_eq!(t.1.snapshots().len(), MAX_SNAPSHOTS);
        assert_eq!(crate::table::floe_snapshot(&t.1).unwrap().snapshot_id(), newest);
    }

    #[tokio::test]
    async fn metadata_files_out_of_the_log_are_reported() {
        let mut t = table(&[(METADATA_PREVIOUS_VERSIONS_MAX, "2")]).await;
        let base = t.1.last_updated_ms();
        let mut locations = vec![t.2.clone()];
        let mut expired = Vec::new();
        for i in 0..4 {
            let change = SnapshotChange {
                operation: Operation::Append,
                added: Vec::new(),
                removed: HashSet::new(),
                properties: HashMap::new(),
                new_schema: None,
            };
            let new = write_snapshot(&t.0, &t.1, &t.2, change, base + i).await.unwrap();
            expired.extend(new.expired_metadata_files);
            (t.1, t.2) = (new.metadata, new.location);
            locations.push(t.2.clone());
        }
        assert_eq!(t.1.metadata_log().len(), 2);
        assert_eq!(expired, locations[..2]);
    }
}
