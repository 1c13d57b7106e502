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
//!
//! It also owns, at each commit:
//! - the manifest merge ([`MIN_COUNT_TO_MERGE`]): small manifests merged per partition
//!   spec and content, never across them (Java's `ManifestMergeManager`);
//! - snapshot expiry ([`expiry`]), as Iceberg's `ExpireSnapshots`: tags and branches keep
//!   their snapshots, each branch its own retention, a ref goes only past its
//!   `max-ref-age-ms`; on `main` also Floe's bound on the count and its newest snapshot;
//! - the metadata file ([`write_metadata`]): snapshots listed in commit order.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::str::FromStr;
use std::sync::Arc;

use iceberg::compression::CompressionCodec;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, FormatVersion, MAIN_BRANCH, ManifestContentType, ManifestFile, ManifestList,
    ManifestListWriter, ManifestWriter, ManifestWriterBuilder, Operation, Schema, Snapshot, SnapshotRef,
    SnapshotReference, SnapshotRetention, SnapshotSummaryCollector, Summary, TableMetadata,
};
use iceberg::{Error, ErrorKind, MetadataLocation, Result};

use super::deletes::delete_key;
use super::lineage::{Inherited, manifest_writer};

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

/// Merges small manifests once there are enough of them, so the manifest list stays
/// short: as Java's `ManifestMergeManager`, per content (data, deletes) and partition
/// spec, never across them — a manifest is written for one spec, and its entries'
/// partition values are of that spec. A group's live entries go into one new manifest
/// (as EXISTING, their snapshot and sequence numbers kept); a group of a spec the
/// current schema no longer binds (its source column dropped) is left as it is.
/// Returns the new list.
async fn merge_manifests(
    file_io: &FileIO,
    metadata: &TableMetadata,
    manifests: Vec<ManifestFile>,
    snapshot_id: i64,
    path_prefix: &str,
) -> Result<Vec<ManifestFile>> {
    let min_count = property(metadata, "commit.manifest.min-count-to-merge", MIN_COUNT_TO_MERGE).max(2);
    let target = property(metadata, "commit.manifest.target-size-bytes", MANIFEST_TARGET_BYTES);
    let mut groups: BTreeMap<(bool, i32), Vec<ManifestFile>> = BTreeMap::new();
    let mut kept = Vec::new();
    for manifest in manifests {
        if manifest.manifest_length < target {
            let deletes = manifest.content == ManifestContentType::Deletes;
            groups.entry((deletes, manifest.partition_spec_id)).or_default().push(manifest);
        } else {
            kept.push(manifest);
        }
    }
    let schema = metadata.current_schema();
    let mut out = Vec::new();
    for (i, ((deletes, spec_id), group)) in groups.into_iter().enumerate() {
        let spec = metadata.partition_spec_by_id(spec_id).filter(|spec| spec.partition_type(schema).is_ok());
        match spec {
            Some(spec) if group.len() >= min_count => {
                let output = file_io.new_output(format!("{path_prefix}-merged-{i}.avro"))?;
                let builder =
                    ManifestWriterBuilder::new(output, Some(snapshot_id), schema.clone(), spec.as_ref().clone());
                let content = if deletes { ManifestContentType::Deletes } else { ManifestContentType::Data };
                let writer = manifest_writer(builder, metadata.format_version(), content);
                out.push(merge_group(file_io, writer, &group).await?);
            }
            _ => kept.extend(group),
        }
    }
    out.extend(kept);
    Ok(out)
}

/// Writes the live entries of `manifests` into `writer`'s manifest, as EXISTING.
async fn merge_group(file_io: &FileIO, mut writer: ManifestWriter, manifests: &[ManifestFile]) -> Result<ManifestFile> {
    for manifest in manifests {
        let loaded = manifest.load_manifest(file_io).await?;
        let (schema, spec) = (loaded.metadata().schema(), loaded.metadata().partition_spec());
        let mut inherited = Inherited::of(manifest)?;
        for entry in loaded.entries() {
            let file = inherited.explicit(entry, schema, spec)?;
            if !entry.is_alive() {
                continue;
            }
            let sequence = entry.sequence_number().unwrap_or(manifest.sequence_number);
            writer.add_existing_file(
                file,
                entry.snapshot_id().unwrap_or(manifest.added_snapshot_id),
                sequence,
                entry.file_sequence_number.or(Some(sequence)),
            )?;
        }
    }
    writer.write_manifest_file().await
}

/// What expiry removes at a commit: snapshots, and refs whose own age limit passed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Expiry {
    /// Snapshot ids, oldest first.
    pub snapshots: Vec<i64>,
    /// Tags and branches (never `main`) whose snapshot is older than their
    /// `max-ref-age-ms` (else the table's `history.expire.max-ref-age-ms`), by name.
    pub refs: Vec<String>,
}

/// The table's refs, by name, `main` included when there is a current snapshot.
/// (iceberg-rust 0.10.1 has no accessor for them: they are read from the metadata's JSON.)
pub fn refs(metadata: &TableMetadata) -> Result<BTreeMap<String, SnapshotReference>> {
    let json = serde_json::to_value(metadata)?;
    let mut refs: BTreeMap<String, SnapshotReference> = match json.get("refs") {
        Some(refs) => serde_json::from_value(refs.clone())?,
        None => BTreeMap::new(),
    };
    if let (false, Some(current)) = (refs.contains_key(MAIN_BRANCH), metadata.current_snapshot_id()) {
        let main =
            SnapshotRetention::Branch { min_snapshots_to_keep: None, max_snapshot_age_ms: None, max_ref_age_ms: None };
        refs.insert(MAIN_BRANCH.to_string(), SnapshotReference::new(current, main));
    }
    Ok(refs)
}

/// The snapshot `id` and its ancestors, newest first (a cycle ends the walk).
fn ancestry(metadata: &TableMetadata, id: i64) -> Vec<&SnapshotRef> {
    let (mut out, mut seen) = (Vec::new(), HashSet::new());
    let mut next = metadata.snapshot_by_id(id);
    while let Some(snapshot) = next.filter(|s| seen.insert(s.snapshot_id())) {
        out.push(snapshot);
        next = snapshot.parent_snapshot_id().and_then(|p| metadata.snapshot_by_id(p));
    }
    out
}

/// How long snapshots are kept: the table's properties, which a branch's own settings override.
#[derive(Clone, Copy)]
struct Retention {
    min_keep: usize,
    max_age_ms: i64,
    /// Floe's bound on the count (`floe.history.max-snapshots`): `main` only.
    max_count: usize,
    max_ref_age_ms: i64,
}

impl Retention {
    fn of(metadata: &TableMetadata) -> Retention {
        Retention {
            min_keep: property(metadata, "history.expire.min-snapshots-to-keep", MIN_SNAPSHOTS_TO_KEEP).max(1),
            max_age_ms: property(metadata, "history.expire.max-snapshot-age-ms", MAX_SNAPSHOT_AGE_MS),
            max_count: property(metadata, "floe.history.max-snapshots", MAX_SNAPSHOTS).max(1),
            max_ref_age_ms: property(metadata, "history.expire.max-ref-age-ms", i64::MAX),
        }
    }

    /// The retention of the branch `name`: its own settings where it has them.
    fn of_branch(self, name: &str, reference: &SnapshotReference) -> Retention {
        let SnapshotRetention::Branch { min_snapshots_to_keep, max_snapshot_age_ms, .. } = reference.retention else {
            return self;
        };
        Retention {
            min_keep: min_snapshots_to_keep.map_or(self.min_keep, |n| usize::try_from(n).unwrap_or(0).max(1)),
            max_age_ms: max_snapshot_age_ms.unwrap_or(self.max_age_ms),
            max_count: if name == MAIN_BRANCH { self.max_count } else { usize::MAX },
            ..self
        }
    }

    /// Whether the ref's own `max-ref-age-ms` (else the table's) has passed at `now_ms`.
    fn ref_expired(self, reference: &SnapshotReference, snapshot_ms: i64, now_ms: i64) -> bool {
        let own = match reference.retention {
            SnapshotRetention::Branch { max_ref_age_ms, .. } | SnapshotRetention::Tag { max_ref_age_ms } => {
                max_ref_age_ms
            }
        };
        now_ms.saturating_sub(snapshot_ms) > own.unwrap_or(self.max_ref_age_ms)
    }
}

/// What expires at `now_ms` (the wall clock; tests pass their own), as Iceberg's
/// `ExpireSnapshots` decides it, with Floe's two additions on `main`:
/// - a ref (never `main`) whose snapshot is older than its `max-ref-age-ms` (else the
///   table's `history.expire.max-ref-age-ms`; none by default) is removed;
/// - every other ref's snapshot is kept, and of each branch the newest ancestors while
///   fewer than its `min-snapshots-to-keep` are kept or younger than its
///   `max-snapshot-age-ms` (else the table's `history.expire.*`); on `main` also at most
///   `floe.history.max-snapshots` of them past the minimum, and always down to Floe's
///   newest snapshot, whose summary carries the committed offsets
///   ([`crate::table::floe_snapshot`]): without those the ancestry would no longer reach it;
/// - a snapshot no ref reaches (a rolled-back or staged one) is kept while younger than
///   the table's `history.expire.max-snapshot-age-ms`;
/// - the others expire.
pub fn expiry(metadata: &TableMetadata, now_ms: i64) -> Result<Expiry> {
    let table = Retention::of(metadata);
    let floe = crate::table::floe_snapshot(metadata).map(|s| s.snapshot_id());
    let (mut expiry, mut kept, mut reached) = (Expiry::default(), HashSet::new(), HashSet::new());
    for (name, reference) in refs(metadata)? {
        let Some(snapshot) = metadata.snapshot_by_id(reference.snapshot_id) else { continue };
        if name != MAIN_BRANCH && table.ref_expired(&reference, snapshot.timestamp_ms(), now_ms) {
            expiry.refs.push(name);
            continue;
        }
        kept.insert(reference.snapshot_id);
        reached.insert(reference.snapshot_id);
        if !reference.is_branch() {
            continue;
        }
        let ancestry = ancestry(metadata, reference.snapshot_id);
        reached.extend(ancestry.iter().map(|s| s.snapshot_id()));
        let floe = floe.filter(|_| name == MAIN_BRANCH);
        kept.extend(branch_kept(&ancestry, table.of_branch(&name, &reference), floe, now_ms));
    }
    let mut expired: Vec<&SnapshotRef> = metadata
        .snapshots()
        .filter(|s| !kept.contains(&s.snapshot_id()))
        .filter(|s| reached.contains(&s.snapshot_id()) || now_ms.saturating_sub(s.timestamp_ms()) > table.max_age_ms)
        .collect();
    expired.sort_by_key(|s| (s.sequence_number(), s.timestamp_ms(), s.snapshot_id()));
    expiry.snapshots = expired.into_iter().map(|s| s.snapshot_id()).collect();
    Ok(expiry)
}

/// Of a branch's `ancestry` (newest first), the snapshots its `retention` keeps: the
/// newest while fewer than the minimum or young enough (and within the count), and all
/// down to `floe`, Floe's newest snapshot, when given.
fn branch_kept(ancestry: &[&SnapshotRef], retention: Retention, floe: Option<i64>, now_ms: i64) -> Vec<i64> {
    let mut floe_ahead = floe.is_some_and(|f| ancestry.iter().any(|s| s.snapshot_id() == f));
    let mut kept = Vec::new();
    for (i, snapshot) in ancestry.iter().enumerate() {
        let young = now_ms.saturating_sub(snapshot.timestamp_ms()) <= retention.max_age_ms;
        if !(i < retention.min_keep || (i < retention.max_count && young) || floe_ahead) {
            break;
        }
        kept.push(snapshot.snapshot_id());
        floe_ahead &= floe != Some(snapshot.snapshot_id());
    }
    kept
}

/// What a snapshot removed: data files, and delete files (by content).
#[derive(Default)]
struct Deleted {
    files: u64,
    records: u64,
    bytes: u64,
    delete_files: u64,
    position_deletes: u64,
    equality_deletes: u64,
}

impl Deleted {
    fn count(&mut self, file: &DataFile) {
        match file.content_type() {
            DataContentType::Data => {
                self.files += 1;
                self.records += file.record_count();
                self.bytes += file.file_size_in_bytes();
            }
            DataContentType::PositionDeletes => {
                self.delete_files += 1;
                self.position_deletes += file.record_count();
            }
            DataContentType::EqualityDeletes => {
                self.delete_files += 1;
                self.equality_deletes += file.record_count();
            }
        }
    }

    /// The summary entries of the delete files removed: `removed-*`, and the parent's
    /// `total-*` less them (when it has them).
    fn delete_summary(&self, previous: Option<&HashMap<String, String>>) -> Vec<(String, String)> {
        if self.delete_files == 0 {
            return Vec::new();
        }
        let mut entries = Vec::new();
        for (name, removed) in [
            ("delete-files", self.delete_files),
            ("position-deletes", self.position_deletes),
            ("equality-deletes", self.equality_deletes),
        ] {
            entries.push((format!("removed-{name}"), removed.to_string()));
            let total = previous.and_then(|p| p.get(&format!("total-{name}"))).and_then(|v| v.parse::<u64>().ok());
            if let Some(total) = total {
                entries.push((format!("total-{name}"), total.saturating_sub(removed).to_string()));
            }
        }
        entries
    }
}

/// Rewrites the manifests holding files of `removed`: those entries become DELETED, the
/// others EXISTING; manifests without any are kept as they are. Fails with
/// `PreconditionFailed` when a path of `removed` is not a live file of the snapshot.
async fn remove_files(
    file_io: &FileIO,
    version: FormatVersion,
    manifests: Vec<ManifestFile>,
    removed: &HashSet<String>,
    snapshot_id: i64,
    path_prefix: &str,
    deleted: &mut Deleted,
) -> Result<Vec<ManifestFile>> {
    let mut found = HashSet::new();
    let mut out = Vec::with_capacity(manifests.len());
    for (i, manifest_file) in manifests.into_iter().enumerate() {
        let manifest = manifest_file.load_manifest(file_io).await?;
        let alive = |e: &&std::sync::Arc<iceberg::spec::ManifestEntry>| e.is_alive();
        if !manifest.entries().iter().filter(alive).any(|e| removed.contains(&delete_key(e.data_file()))) {
            out.push(manifest_file);
            continue;
        }
        let output = file_io.new_output(format!("{path_prefix}-r{i}.avro"))?;
        let (schema, spec) = (manifest.metadata().schema().clone(), manifest.metadata().partition_spec().clone());
        let builder = ManifestWriterBuilder::new(output, Some(snapshot_id), schema.clone(), spec.clone());
        let mut writer = manifest_writer(builder, version, manifest_file.content);
        let mut inherited = Inherited::of(&manifest_file)?;
        for entry in manifest.entries() {
            let file = inherited.explicit(entry, &schema, &spec)?;
            if !entry.is_alive() {
                continue;
            }
            let sequence = entry.sequence_number().unwrap_or(manifest_file.sequence_number);
            let file_sequence = entry.file_sequence_number.or(Some(sequence));
            let key = delete_key(entry.data_file());
            if removed.contains(&key) {
                found.insert(key);
                deleted.count(entry.data_file());
                writer.add_delete_file(file, sequence, file_sequence)?;
            } else {
                let added_by = entry.snapshot_id().unwrap_or(manifest_file.added_snapshot_id);
                writer.add_existing_file(file, added_by, sequence, file_sequence)?;
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
#[derive(Default)]
pub struct SnapshotChange {
    pub operation: Operation,
    pub added: Vec<DataFile>,
    /// Added files (by path) that keep an older data sequence number than the
    /// snapshot's: a compaction's outputs keep that of the snapshot it was planned from.
    pub added_sequence: HashMap<String, i64>,
    /// Delete files added (an upsert's position deletes), each with the id of the
    /// partition spec of the data files it names; their data sequence number is the
    /// snapshot's, so they apply to the files added with them too.
    pub added_deletes: Vec<(i32, DataFile)>,
    /// Paths of live files this snapshot removes (compaction: data files, and delete
    /// files that apply to none left); each must be live, else the write fails with
    /// `PreconditionFailed` naming those that are not.
    pub removed: HashSet<String>,
    /// Summary entries of Floe (`floe.offsets.*`, task ids, …), merged with the totals.
    pub properties: HashMap<String, String>,
    /// A schema to make current in the same commit (schema evolution).
    pub new_schema: Option<Schema>,
}

/// The new metadata and its file's location (written by [`write_snapshot`]).
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

/// Where a manifest's entries come from: read from its file ([`ReadManifests`]), or a
/// cache of the manifests read before ([`crate::delta::cache::MirrorCache`]: a manifest
/// file never changes once written).
#[async_trait::async_trait]
pub trait ManifestSource: Send + Sync {
    async fn manifest(&self, file_io: &FileIO, file: &ManifestFile) -> Result<std::sync::Arc<iceberg::spec::Manifest>>;
}

/// Each manifest read from its file.
pub struct ReadManifests;

#[async_trait::async_trait]
impl ManifestSource for ReadManifests {
    async fn manifest(&self, file_io: &FileIO, file: &ManifestFile) -> Result<std::sync::Arc<iceberg::spec::Manifest>> {
        Ok(std::sync::Arc::new(file.load_manifest(file_io).await?))
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

/// Writes `metadata` at `location` as [`TableMetadata::write_to`] does (compressed as its
/// name says), with its `snapshots` in commit order (by sequence number, then time), as
/// Java and PyIceberg write them: iceberg-rust keeps them in a hash map, and writes them
/// in its order.
pub async fn write_metadata(file_io: &FileIO, metadata: &TableMetadata, location: &MetadataLocation) -> Result<()> {
    let mut json = serde_json::to_value(metadata)?;
    if let Some(serde_json::Value::Array(snapshots)) = json.get_mut("snapshots") {
        snapshots.sort_by_key(|s| {
            let number = |key: &str| s.get(key).and_then(serde_json::Value::as_i64).unwrap_or(0);
            (number("sequence-number"), number("timestamp-ms"))
        });
    }
    let bytes = serde_json::to_vec(&json)?;
    let bytes = match location.compression_codec() {
        CompressionCodec::None => bytes,
        CompressionCodec::Gzip(level) => {
            let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level.min(9).into()));
            encoder.write_all(&bytes)?;
            encoder.finish()?
        }
        other => {
            return Err(Error::new(ErrorKind::FeatureUnsupported, format!("metadata compressed with {other}")));
        }
    };
    file_io.new_output(location.to_string())?.write(bytes.into()).await
}

/// The latest time `metadata` records: its last update, its newest snapshot-log and
/// metadata-log entries (ms since the epoch).
pub fn latest_timestamp_ms(metadata: &TableMetadata) -> i64 {
    let snapshot_log = metadata.history().iter().map(|l| l.timestamp_ms);
    let metadata_log = metadata.metadata_log().iter().map(|l| l.timestamp_ms);
    snapshot_log.chain(metadata_log).fold(metadata.last_updated_ms(), i64::max)
}

/// The time a commit on `current` is stamped with: `now_ms`, or 1 ms after the table's
/// [`latest_timestamp_ms`] when that is not earlier, so that its times never go back
/// (a host whose clock was ahead committed before): Iceberg refuses metadata whose
/// update is more than a minute before its last log entry.
pub fn commit_timestamp_ms(current: &TableMetadata, now_ms: i64) -> i64 {
    now_ms.max(latest_timestamp_ms(current).saturating_add(1))
}

/// `new` with the id the metadata builder gives it once added to `current`: an equal
/// schema's, otherwise one above the highest. Worked out before the build, since the
/// manifests and the snapshot are written with it first.
fn schema_to_add(current: &TableMetadata, new: Schema) -> Result<Schema> {
    let identifiers = |s: &Schema| s.identifier_field_ids().collect::<std::collections::BTreeSet<_>>();
    let equal = current
        .schemas_iter()
        .find(|s| s.as_struct() == new.as_struct() && identifiers(s) == identifiers(&new))
        .map(|s| s.schema_id());
    let highest = current.schemas_iter().map(|s| s.schema_id()).max().unwrap_or(current.current_schema_id());
    new.into_builder().with_schema_id(equal.unwrap_or(highest + 1)).build()
}

/// Writes the snapshot and the metadata file that makes it current, expiring snapshots
/// and refs ([`expiry`]) as of `now_ms` (the committer's clock); returns them. The
/// snapshot is stamped [`commit_timestamp_ms`]. The catalog
/// pointer is not moved here.
pub async fn write_snapshot(
    file_io: &FileIO,
    current: &TableMetadata,
    current_location: &str,
    change: SnapshotChange,
    now_ms: i64,
) -> Result<NewMetadata> {
    let new = stage_snapshot(file_io, current, current_location, change, now_ms).await?;
    new.write(file_io).await?;
    Ok(new)
}

impl NewMetadata {
    /// Writes the metadata file at [`NewMetadata::location`].
    pub async fn write(&self, file_io: &FileIO) -> Result<()> {
        let location = MetadataLocation::from_str(&self.location)
            .map_err(|e| Error::new(ErrorKind::DataInvalid, format!("{}: {e}", self.location)))?;
        write_metadata(file_io, &self.metadata, &location).await
    }
}

/// [`write_snapshot`] but for the metadata file: the snapshot's manifests and manifest
/// list written, the new metadata and the location its file would have returned (for a
/// catalog that writes the file itself, or [`NewMetadata::write`]).
pub async fn stage_snapshot(
    file_io: &FileIO,
    current: &TableMetadata,
    current_location: &str,
    change: SnapshotChange,
    now_ms: i64,
) -> Result<NewMetadata> {
    let commit_ms = commit_timestamp_ms(current, now_ms);
    let new_schema = change.new_schema.map(|new| schema_to_add(current, new)).transpose()?;
    // The schema the manifest is written with: the evolved one when there is one.
    let schema = new_schema.clone().map_or_else(|| current.current_schema().clone(), Arc::new);
    let spec = current.default_partition_spec().clone();
    // The new metadata: `current` with the schema and the snapshot (which stamps it with
    // `commit_ms`: a build without one would stamp the wall clock, which may be behind).
    let with_snapshot = |snapshot: Snapshot| {
        let mut builder = current.clone().into_builder(Some(current_location.to_string()));
        if let Some(schema) = new_schema.clone() {
            builder = builder.add_current_schema(schema)?;
        }
        builder.set_branch_snapshot(snapshot, MAIN_BRANCH)
    };

    let snapshot_id = new_snapshot_id(current);
    let sequence_number = current.next_sequence_number();
    let parent = current.current_snapshot_id();
    let metadata_dir = format!("{}/metadata", current.location());
    let commit_uuid = uuid::Uuid::new_v4();
    let prefix = format!("{metadata_dir}/{commit_uuid}");

    let version = current.format_version();
    let mut manifests = current_manifests(file_io, current).await?;
    let mut deleted = Deleted::default();
    if !change.removed.is_empty() {
        manifests =
            remove_files(file_io, version, manifests, &change.removed, snapshot_id, &prefix, &mut deleted).await?;
    }
    let mut manifests = merge_manifests(file_io, current, manifests, snapshot_id, &prefix).await?;
    let mut collector = SnapshotSummaryCollector::default();
    if !change.added.is_empty() {
        let output = file_io.new_output(format!("{prefix}-m0.avro"))?;
        let builder = ManifestWriterBuilder::new(output, Some(snapshot_id), schema.clone(), spec.as_ref().clone());
        let mut writer = manifest_writer(builder, version, ManifestContentType::Data);
        for file in change.added {
            collector.add_file(&file, schema.clone(), spec.clone());
            let data_sequence = change.added_sequence.get(file.file_path()).copied().unwrap_or(sequence_number);
            writer.add_file(file, data_sequence)?;
        }
        manifests.push(writer.write_manifest_file().await?);
    }
    let mut by_spec: BTreeMap<i32, Vec<DataFile>> = BTreeMap::new();
    for (spec_id, file) in change.added_deletes {
        by_spec.entry(spec_id).or_default().push(file);
    }
    for (spec_id, files) in by_spec {
        let spec = current.partition_spec_by_id(spec_id).ok_or_else(|| {
            Error::new(
                ErrorKind::DataInvalid,
                format!("delete files of partition spec {spec_id}, which the table lacks"),
            )
        })?;
        let output = file_io.new_output(format!("{prefix}-d{spec_id}.avro"))?;
        let builder = ManifestWriterBuilder::new(output, Some(snapshot_id), schema.clone(), spec.as_ref().clone());
        let mut writer = manifest_writer(builder, version, ManifestContentType::Deletes);
        for file in files {
            collector.add_file(&file, schema.clone(), spec.clone());
            writer.add_file(file, sequence_number)?;
        }
        manifests.push(writer.write_manifest_file().await?);
    }
    let list_location = format!("{metadata_dir}/snap-{snapshot_id}-0-{commit_uuid}.avro");
    let list_output = file_io.new_output(&list_location)?.writer().await?;
    let first_row_id = (version >= FormatVersion::V3).then(|| current.next_row_id());
    let mut list = match first_row_id {
        Some(first) => ManifestListWriter::v3(list_output, snapshot_id, parent, sequence_number, Some(first)),
        None => ManifestListWriter::v2(list_output, snapshot_id, parent, sequence_number),
    };
    list.add_manifests(manifests.into_iter())?;
    // Row lineage (v3): the ids the list assigned to new manifests are the snapshot's.
    let row_range = first_row_id.zip(list.next_row_id()).map(|(first, next)| (first, next - first));
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
    properties.extend(deleted.delete_summary(previous));
    properties.extend(added);
    let builder = Snapshot::builder()
        .with_snapshot_id(snapshot_id)
        .with_parent_snapshot_id(parent)
        .with_sequence_number(sequence_number)
        .with_timestamp_ms(commit_ms)
        .with_manifest_list(list_location)
        .with_summary(Summary { operation: change.operation, additional_properties: properties })
        .with_schema_id(schema.schema_id());
    let snapshot = match row_range {
        Some((first, added)) => builder.with_row_range(first, added).build(),
        None => builder.build(),
    };
    // Expiry looks at the history with the new snapshot current; one builder then adds it
    // and removes the expired (the metadata's last-updated stays the snapshot's time).
    let expiry = expiry(&with_snapshot(snapshot.clone())?.build()?.metadata, now_ms)?;
    let mut builder = with_snapshot(snapshot)?;
    for name in &expiry.refs {
        tracing::info!(table = %current.location(), reference = %name, "ref past its max-ref-age-ms: removed");
        builder = builder.remove_ref(name);
    }
    let built = builder.remove_snapshots(&expiry.snapshots).build()?;
    let expired_metadata_files = built.expired_metadata_logs.into_iter().map(|l| l.metadata_file).collect();
    let metadata = built.metadata;
    if metadata.current_schema_id() != schema.schema_id() {
        return Err(Error::new(
            ErrorKind::Unexpected,
            format!(
                "schema {} made current, but the snapshot was written with {}",
                metadata.current_schema_id(),
                schema.schema_id()
            ),
        ));
    }
    let location = MetadataLocation::from_str(current_location)
        .map_err(|e| Error::new(ErrorKind::DataInvalid, format!("{current_location}: {e}")))?
        .with_next_version()
        .with_new_metadata(&metadata);
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
                added_deletes: Vec::new(),
                added_sequence: Default::default(),
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

    #[tokio::test]
    async fn a_clock_that_was_ahead_does_not_block_later_commits_and_times_never_go_back() {
        let mut t = table(&[]).await;
        let now = chrono::Utc::now().timestamp_millis();
        // A host 30 days ahead commits; then hosts on the right time, one with a schema change.
        append(&mut t, true, now + 30 * DAY).await;
        append(&mut t, true, now).await;
        let wider = Schema::builder()
            .with_fields(vec![
                Arc::new(NestedField::required(1, "x", Type::Primitive(PrimitiveType::Long))),
                Arc::new(NestedField::optional(2, "y", Type::Primitive(PrimitiveType::String))),
            ])
            .build()
            .unwrap();
        let change = SnapshotChange {
            operation: Operation::Append,
            added: vec![file(0)],
            added_deletes: Vec::new(),
            added_sequence: Default::default(),
            removed: HashSet::new(),
            properties: HashMap::new(),
            new_schema: Some(wider),
        };
        let new = write_snapshot(&t.0, &t.1, &t.2, change, now + 1).await.unwrap();
        (t.1, t.2) = (new.metadata, new.location);
        let stamps: Vec<i64> = t.1.history().iter().map(|l| l.timestamp_ms).collect();
        assert_eq!(stamps, [now + 30 * DAY, now + 30 * DAY + 1, now + 30 * DAY + 2]);
        assert_eq!(t.1.last_updated_ms(), now + 30 * DAY + 2);
        assert_eq!(latest_timestamp_ms(&t.1), now + 30 * DAY + 2);
        assert!(t.1.metadata_log().windows(2).all(|w| w[0].timestamp_ms <= w[1].timestamp_ms));
        // The evolved schema is current under the id the snapshot names.
        assert_eq!(t.1.current_snapshot().unwrap().schema_id(), Some(t.1.current_schema_id()));
        assert_eq!(t.1.current_schema().as_struct().fields().len(), 2);
        // Read back from the file, as another reader would (Iceberg checks the logs' order).
        let read = TableMetadata::read_from(&t.0, &t.2).await.unwrap();
        assert_eq!(read.snapshots().len(), 3);
        // Once the wall clock passes the stamps, commits take its time again.
        assert_eq!(commit_timestamp_ms(&t.1, now + 31 * DAY), now + 31 * DAY);
    }

    /// Each live data file's (first row id, record count), as a reader inherits them.
    async fn row_ids(file_io: &FileIO, metadata: &TableMetadata) -> BTreeMap<String, (i64, u64)> {
        let mut ids = BTreeMap::new();
        for manifest in current_manifests(file_io, metadata).await.unwrap() {
            let loaded = manifest.load_manifest(file_io).await.unwrap();
            let (schema, spec) = (loaded.metadata().schema(), loaded.metadata().partition_spec());
            let mut inherited = Inherited::of(&manifest).unwrap();
            for entry in loaded.entries() {
                let file = inherited.explicit(entry, schema, spec).unwrap();
                if entry.is_alive() && manifest.content == ManifestContentType::Data {
                    ids.insert(file.file_path().to_string(), (file.first_row_id().unwrap(), file.record_count()));
                }
            }
        }
        ids
    }

    #[tokio::test]
    async fn a_v3_table_keeps_each_row_s_id_through_merges_and_removals() {
        let mut t = table_of(FormatVersion::V3, &[("commit.manifest.min-count-to-merge", "4")]).await;
        let mut seen = BTreeMap::new();
        let commit = |added: Vec<DataFile>, removed: HashSet<String>| SnapshotChange {
            operation: if removed.is_empty() { Operation::Append } else { Operation::Replace },
            added,
            removed,
            ..Default::default()
        };
        let changes: Vec<SnapshotChange> = (0..10)
            .map(|i| commit(vec![file(i)], HashSet::new()))
            .chain([commit(vec![file(20)], HashSet::from([file(0), file(5)].map(|f| f.file_path().to_string())))])
            .collect();
        for change in changes {
            let next_row_id = t.1.next_row_id();
            let new = write_snapshot(&t.0, &t.1, &t.2, change, chrono::Utc::now().timestamp_millis()).await.unwrap();
            (t.1, t.2) = (new.metadata, new.location);
            let snapshot = t.1.current_snapshot().unwrap();
            let (first, added) = snapshot.row_range().expect("a v3 snapshot has a row range");
            assert_eq!((first, first + added), (next_row_id, t.1.next_row_id()));
            let ids = row_ids(&t.0, &t.1).await;
            let mut ranges: Vec<(i64, i64)> = ids.values().map(|&(id, n)| (id, id + n as i64)).collect();
            ranges.sort();
            assert!(ranges.windows(2).all(|w| w[0].1 <= w[1].0), "row ids overlap: {ranges:?}");
            assert!(ranges.last().unwrap().1 <= t.1.next_row_id() as i64);
            for (path, id) in ids {
                let before = seen.insert(path.clone(), id);
                assert!(before.is_none_or(|b| b == id), "{path}: row id {before:?} became {id:?}");
            }
        }
        assert!(current_manifests(&t.0, &t.1).await.unwrap().len() < 5, "manifests were merged");
        let read = TableMetadata::read_from(&t.0, &t.2).await.unwrap();
        assert_eq!((read.format_version(), read.next_row_id()), (FormatVersion::V3, t.1.next_row_id()));
        assert_eq!(row_ids(&t.0, &read).await.len(), 9);
    }

    /// The snapshots [`expiry`] expires at `now`, oldest first.
    fn expired(metadata: &TableMetadata, now: i64) -> Vec<i64> {
        expiry(metadata, now).unwrap().snapshots
    }

    /// A v2 table in memory with `properties`, its metadata and its location.
    async fn table(properties: &[(&str, &str)]) -> (FileIO, TableMetadata, String) {
        table_of(FormatVersion::V2, properties).await
    }

    async fn table_of(format: FormatVersion, properties: &[(&str, &str)]) -> (FileIO, TableMetadata, String) {
        let file_io = FileIO::new_with_memory();
        let schema = Schema::builder()
            .with_fields(vec![Arc::new(NestedField::required(1, "x", Type::Primitive(PrimitiveType::Long)))])
            .build()
            .unwrap();
        let unpartitioned = iceberg::spec::PartitionSpec::unpartition_spec();
        let (metadata, location) =
            crate::table::new_table_metadata("memory:///t", &schema, &unpartitioned, format).unwrap();
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
            added_deletes: Vec::new(),
            added_sequence: Default::default(),
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
        history_with_refs(properties, snapshots, &[])
    }

    /// [`history`] with refs: `(name, index of its snapshot, retention)`.
    fn history_with_refs(
        properties: &[(&str, &str)],
        snapshots: &[(bool, i64)],
        refs: &[(&str, usize, SnapshotRetention)],
    ) -> (TableMetadata, Vec<i64>) {
        let schema = Schema::builder()
            .with_fields(vec![Arc::new(NestedField::required(1, "x", Type::Primitive(PrimitiveType::Long)))])
            .build()
            .unwrap();
        let (metadata, _) = crate::table::new_table_metadata(
            "memory:///t",
            &schema,
            &iceberg::spec::PartitionSpec::unpartition_spec(),
            iceberg::spec::FormatVersion::V2,
        )
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
            // Set right after its snapshot: the builder's clock is the snapshot's.
            for (name, _, retention) in refs.iter().filter(|r| r.1 == i) {
                builder = builder.set_ref(name, SnapshotReference::new(id, retention.clone())).unwrap();
            }
        }
        (builder.build().unwrap().metadata, ids)
    }

    #[test]
    fn snapshots_older_than_the_retention_expire_but_the_newest_stay() {
        let base = chrono::Utc::now().timestamp_millis();
        let days: Vec<(bool, i64)> = (0..10).map(|i| (true, base + i * DAY)).collect();
        let (metadata, ids) = history(&[("history.expire.min-snapshots-to-keep", "2")], &days);
        // At day 9: days 4..=9 are within 5 days (the default retention).
        assert_eq!(expired(&metadata, base + 9 * DAY), ids[..4].to_vec());
        // Much later, all are old: only the 2 newest stay.
        assert_eq!(expired(&metadata, base + 100 * DAY), ids[..8].to_vec());
    }

    #[test]
    fn the_count_is_bounded_and_the_minimum_wins_over_it() {
        let base = chrono::Utc::now().timestamp_millis();
        let snapshots: Vec<(bool, i64)> = (0..10).map(|i| (true, base + i)).collect();
        let count = [("floe.history.max-snapshots", "3"), ("history.expire.min-snapshots-to-keep", "1")];
        let (metadata, ids) = history(&count, &snapshots);
        assert_eq!(expired(&metadata, base + 10), ids[..7].to_vec());
        let minimum = [("floe.history.max-snapshots", "3"), ("history.expire.min-snapshots-to-keep", "5")];
        let (metadata, ids) = history(&minimum, &snapshots);
        assert_eq!(expired(&metadata, base + 10), ids[..5].to_vec());
    }

    #[test]
    fn the_current_snapshot_and_floe_s_are_always_kept() {
        let base = chrono::Utc::now().timestamp_millis();
        let none = [("history.expire.max-snapshot-age-ms", "0"), ("history.expire.min-snapshots-to-keep", "0")];
        // Another engine's, Floe's, another's (current); no retention, no minimum.
        let (metadata, ids) = history(&none, &[(false, base), (true, base + 1), (false, base + 2)]);
        assert_eq!(expired(&metadata, base + 100 * DAY), vec![ids[0]]);
        // With one more of another engine: the one between stays, so Floe's stays reachable.
        let (metadata, ids) = history(&none, &[(false, base), (true, base + 1), (false, base + 2), (false, base + 3)]);
        assert_eq!(expired(&metadata, base + 100 * DAY), vec![ids[0]]);
        // Rolled back to Floe's, then a new current: the two no ref reaches any more expire
        // once past the retention, as in Iceberg (the younger stays until then).
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
        assert_eq!(expired(&rolled, base + 100 * DAY), vec![ids[0], ids[2], ids[3]]);
        assert_eq!(expired(&rolled, base + 3), vec![ids[0], ids[2]]);
    }

    /// `metadata` with the ref `name` on the snapshot `id`.
    fn with_ref(metadata: TableMetadata, name: &str, id: i64, retention: SnapshotRetention) -> TableMetadata {
        let reference = SnapshotReference::new(id, retention);
        metadata.into_builder(None).set_ref(name, reference).unwrap().build().unwrap().metadata
    }

    fn branch(min_snapshots_to_keep: Option<i32>, max_snapshot_age_ms: Option<i64>) -> SnapshotRetention {
        SnapshotRetention::Branch { min_snapshots_to_keep, max_snapshot_age_ms, max_ref_age_ms: None }
    }

    fn tag(max_ref_age_ms: Option<i64>) -> SnapshotRetention {
        SnapshotRetention::Tag { max_ref_age_ms }
    }

    #[test]
    fn tags_and_branches_keep_their_snapshots_and_branches_their_own_retention() {
        let base = chrono::Utc::now().timestamp_millis();
        let days: Vec<(bool, i64)> = (0..10).map(|i| (true, base + i * DAY)).collect();
        // A tag; a branch keeping 2 snapshots whatever their age; one keeping 3 days of them.
        let refs =
            [("audit", 1, tag(None)), ("two", 3, branch(Some(2), None)), ("recent", 7, branch(Some(1), Some(3 * DAY)))];
        let (metadata, ids) = history_with_refs(&[("history.expire.min-snapshots-to-keep", "1")], &days, &refs);
        let expiry = expiry(&metadata, base + 10 * DAY).unwrap();
        // main keeps day 9 and days 5..=9 are within the 5 days; "recent" keeps 7..=7
        // (days 4..=6 are older than 3 days at day 10), "two" keeps 3 and 2, the tag 1.
        assert_eq!(expiry.snapshots, vec![ids[0], ids[4]]);
        assert!(expiry.refs.is_empty());
        let expiry = super::expiry(&metadata, base + 100 * DAY).unwrap();
        assert_eq!(expiry.snapshots, vec![ids[0], ids[4], ids[5], ids[6], ids[8]]);
        assert!(expiry.refs.is_empty(), "refs are never dropped for their snapshots' age");
    }

    #[test]
    fn a_ref_past_its_max_ref_age_is_removed_but_never_main() {
        let base = chrono::Utc::now().timestamp_millis();
        let days: Vec<(bool, i64)> = (0..4).map(|i| (true, base + i * DAY)).collect();
        let table_limit =
            [("history.expire.min-snapshots-to-keep", "1"), ("history.expire.max-ref-age-ms", "864000000")];
        let refs = [("short", 0, tag(Some(DAY))), ("long", 1, tag(Some(1000 * DAY))), ("default", 2, tag(None))];
        let (metadata, ids) = history_with_refs(&table_limit, &days, &refs);
        // Day 6: "short" (day 0) is past its day; the table's 10 days hold "default".
        let expiry = expiry(&metadata, base + 6 * DAY).unwrap();
        assert_eq!(expiry.refs, ["short"]);
        // Its snapshot, no longer on a ref nor within main's 5 days, expires.
        assert_eq!(expiry.snapshots, vec![ids[0]]);
        // Day 30: "default" too; "long" and main stay (main's snapshot is 27 days old).
        let expiry = super::expiry(&metadata, base + 30 * DAY).unwrap();
        assert_eq!(expiry.refs, ["default", "short"]);
        assert_eq!(expiry.snapshots, vec![ids[0], ids[2]]);
    }

    #[tokio::test]
    async fn commits_past_the_retention_keep_refs_and_their_snapshots() {
        let mut t = table(&[("floe.history.max-snapshots", "2"), ("history.expire.min-snapshots-to-keep", "1")]).await;
        let base = t.1.last_updated_ms();
        let tagged = append(&mut t, true, base + 1).await;
        let branched = append(&mut t, true, base + 2).await;
        t.1 = with_ref(t.1.clone(), "v1", tagged, tag(None));
        t.1 = with_ref(t.1.clone(), "dev", branched, branch(None, None));
        for i in 0..5 {
            append(&mut t, true, base + 10 + i).await;
        }
        let read = TableMetadata::read_from(&t.0, &t.2).await.unwrap();
        let refs = refs(&read).unwrap();
        assert_eq!(refs.keys().collect::<Vec<_>>(), ["dev", "main", "v1"]);
        assert_eq!((refs["v1"].snapshot_id, refs["dev"].snapshot_id), (tagged, branched));
        assert!(read.snapshot_by_id(tagged).is_some() && read.snapshot_by_id(branched).is_some());
        assert_eq!(read.snapshots().len(), 4, "main's 2 newest, the tag's and the branch's");
    }

    #[tokio::test]
    async fn snapshots_are_written_in_commit_order() {
        let mut t = table(&[("floe.history.max-snapshots", "8"), ("history.expire.min-snapshots-to-keep", "1")]).await;
        let base = t.1.last_updated_ms();
        for i in 0..20 {
            append(&mut t, i % 3 != 0, base + i).await;
        }
        let bytes = t.0.new_input(&t.2).unwrap().read().await.unwrap();
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let numbers = |key: &str| -> Vec<i64> {
            json["snapshots"].as_array().unwrap().iter().map(|s| s[key].as_i64().unwrap()).collect()
        };
        let sequence = numbers("sequence-number");
        assert_eq!(sequence.len(), 8, "expired down to 8");
        assert!(sequence.windows(2).all(|w| w[0] < w[1]), "{sequence:?}");
        assert!(numbers("timestamp-ms").windows(2).all(|w| w[0] <= w[1]));
    }

    #[tokio::test]
    async fn manifests_of_different_specs_are_merged_apart() {
        let mut t = table(&[("commit.manifest.min-count-to-merge", "2")]).await;
        let commit = async |t: &mut (FileIO, TableMetadata, String), file: DataFile| {
            let change = SnapshotChange {
                operation: Operation::Append,
                added: vec![file],
                added_deletes: Vec::new(),
                added_sequence: Default::default(),
                removed: HashSet::new(),
                properties: HashMap::new(),
                new_schema: None,
            };
            let new = write_snapshot(&t.0, &t.1, &t.2, change, chrono::Utc::now().timestamp_millis()).await.unwrap();
            (t.1, t.2) = (new.metadata, new.location);
        };
        for i in 0..3 {
            commit(&mut t, file(i)).await;
        }
        // Another engine partitions the table by `x`: files from now on have a value.
        let spec = iceberg::spec::UnboundPartitionSpec::builder()
            .add_partition_field(1, "x", iceberg::spec::Transform::Identity)
            .unwrap()
            .build();
        t.1 = t.1.clone().into_builder(None).add_default_partition_spec(spec).unwrap().build().unwrap().metadata;
        let spec_id = t.1.default_partition_spec_id();
        for i in 3..8 {
            let partitioned = DataFileBuilder::default()
                .content(DataContentType::Data)
                .file_path(format!("memory:///t/data/{i}.parquet"))
                .file_format(DataFileFormat::Parquet)
                .partition(Struct::from_iter([Some(iceberg::spec::Literal::long(i as i64))]))
                .partition_spec_id(spec_id)
                .record_count(10)
                .file_size_in_bytes(1000)
                .build()
                .unwrap();
            commit(&mut t, partitioned).await;
        }
        let manifests = current_manifests(&t.0, &t.1).await.unwrap();
        let mut paths = Vec::new();
        for manifest in &manifests {
            let loaded = manifest.load_manifest(&t.0).await.unwrap();
            assert_eq!(loaded.metadata().partition_spec().spec_id(), manifest.partition_spec_id);
            for entry in loaded.entries().iter().filter(|e| e.is_alive()) {
                let unpartitioned = manifest.partition_spec_id != spec_id;
                assert_eq!(entry.data_file().partition().fields().is_empty(), unpartitioned, "{manifest:?}");
                paths.push(entry.file_path().to_string());
            }
        }
        assert!(manifests.len() <= 3, "merged, one per spec (and the newest): {}", manifests.len());
        paths.sort();
        let mut expected: Vec<_> = (0..8).map(|i| format!("memory:///t/data/{i}.parquet")).collect();
        expected.sort();
        assert_eq!(paths, expected);
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
        assert!(expired(&t.1, now() + 100 * DAY).is_empty());
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
                added_deletes: Vec::new(),
                added_sequence: Default::default(),
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
