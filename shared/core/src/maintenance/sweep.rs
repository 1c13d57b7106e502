//! The orphan sweep: files under a table's `data/` and `metadata/` that no retained
//! snapshot references, older than the grace period and named by no queued task,
//! deleted; and the table's spilled task objects whose tasks are done.
//!
//! ```text
//!  held_tasks(table) ─▶ task ids and files still queued   (read first, see below)
//!  list <location>/data/ and <location>/metadata/          (nothing else: never catalog.db)
//!  referenced, from the current metadata file, every listed metadata file that may be
//!  newer (a higher version, or younger than the grace period) and every listed one of
//!  another table (another UUID: a table renamed away from this location, or registered
//!  at it):
//!     the file itself, its metadata log, its statistics files,
//!     every snapshot's manifest list ─▶ its manifests ─▶ their live entries' files
//!     every snapshot's table state (summary `floe.state`) ─▶ its pending transactions' files
//!                                                            and dead letters
//!     every snapshot's key index (summary `floe.keys`, upsert tables) ─▶ its bucket files
//!  each listed file: referenced, or metadata/version-hint.text ─▶ kept
//!                    named by a held task ─▶ kept (kept_held)
//!                    younger than the grace period, or of unknown age ─▶ kept (kept_young)
//!                    else ─▶ deleted, in batches
//!  <task store>tasks/<table>/<task id>.json: held ─▶ kept; young ─▶ kept; else deleted
//!  record(table, Swept { at_ms, removed })
//! ```
//!
//! Why nothing referenced is lost:
//! - A manifest, manifest list or table state that cannot be read fails the sweep before
//!   anything is deleted: its files are never taken for unreferenced. So does a listed
//!   metadata file that cannot be read, or holds complete JSON this reader does not know.
//! - A listed metadata file holding no JSON at all (empty, truncated: a run killed while
//!   writing it) is no root, with a warning: a commit's metadata file is complete before
//!   the catalog points to it, so this one was never committed and references nothing.
//!   It is judged as any unreferenced file. (The current one, the catalog's pointer, is
//!   read by the caller: cut short, the table cannot be loaded at all.)
//! - Floe's table state (`table/state.rs`) is no Iceberg file: the snapshot summary names
//!   it, and it names the files of transactions a segment left open (written, in no
//!   manifest until their COMMIT marker comes, for as long as that takes). Both are
//!   referenced for every retained snapshot whose summary names a state. So is an upsert
//!   table's key index (`table/keys/`): its root and bucket files; an unreadable root
//!   fails the sweep.
//! - The caller's metadata may be stale (it planned compactions first). A task's files are
//!   held until the committer is done with it, and the held tasks are read before the
//!   listing: a task released after that read was committed in a metadata file written
//!   after the caller's — a higher version, found in the listing and read as a root.
//! - A file written and not yet held (a materializer between its write and its hold, a
//!   commit in flight) is younger than the grace period.
//!
//! Only live entries (ADDED, EXISTING) count, as in Iceberg's own orphan-file removal: a
//! DELETED entry records that its snapshot removed the file; the parent that still had it
//! references it live while it is retained. Floe carries a compaction's rewritten
//! manifest (its inputs DELETED) into later snapshots, so counting DELETED entries would
//! keep every compacted input until the manifests are merged.
//!
//! Paths compare as keys (`file_key`): a table may name its files `file:///x`, `file:/x`
//! or `/x` where the listing says `/x`, and `s3a://` where it says `s3://`.

use std::collections::HashSet;

use iceberg::io::FileIO;
use iceberg::spec::{ManifestList, TableMetadata};

use super::{HeldTask, MaintenanceError, MaintenanceEvent, TableRegistry};
use crate::delta::mirror::absolute;
use crate::delta::{DeltaSnapshot, LogStore};
use crate::retry::Retryable;
use crate::storage::{StoredFile, WarehouseFiles};
use crate::table::keys::KEYS_KEY;
use crate::table::keys::index::IndexRoot;
use crate::table::state::{STATE_KEY, TableState};
use crate::table::{TableError, TableName};

/// Files deleted per call (S3's `DeleteObjects` takes 1,000 keys).
const DELETE_BATCH: usize = 1000;

/// What a sweep found and did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SweepReport {
    /// Deleted files.
    pub removed: Vec<String>,
    /// Unreferenced files kept because a queued task names them.
    pub kept_held: usize,
    /// Unreferenced files kept because they are younger than the grace period.
    pub kept_young: usize,
}

/// What the sweep of one table needs.
pub struct Sweep<'a> {
    pub file_io: &'a FileIO,
    pub files: &'a dyn WarehouseFiles,
    pub registry: &'a dyn TableRegistry,
    /// Where spilled tasks are stored (`<store>tasks/<table>/<task id>.json`), if anywhere.
    pub task_store: Option<&'a str>,
    pub grace_ms: i64,
    /// Where a table's Delta mirror's log is read: the files its current version names
    /// are kept, whatever Iceberg says (a mirror that lags, or is stopped, still reads them).
    pub delta_log: &'a dyn LogStore,
}

impl Sweep<'_> {
    /// Sweeps `table`, whose current metadata is `metadata`, read from `metadata_location`
    /// (the catalog's pointer), on the clock `now_ms`. Files deleted before a failure are
    /// recorded, and the failure returned.
    pub async fn table(
        &self,
        table: &TableName,
        metadata: &TableMetadata,
        metadata_location: &str,
        now_ms: i64,
    ) -> Result<SweepReport, MaintenanceError> {
        let started = std::time::Instant::now();
        let held = Held::new(self.registry.held_tasks(table).await?);
        let location = metadata.location().trim_end_matches('/');
        if location.is_empty() {
            return Err(storage_error(table, "the table's location is empty".into(), false));
        }
        let mut listed = self.list(table, &format!("{location}/data/")).await?;
        listed.extend(self.list(table, &format!("{location}/metadata/")).await?);
        let referenced = self.referenced(table, metadata, metadata_location, &listed, now_ms).await?;

        let mut report = SweepReport::default();
        let mut doomed = Vec::new();
        for file in listed {
            let key = file_key(&file.path);
            // The version hint (`catalog::hint`, as Hadoop tables have one): no metadata names it.
            if referenced.contains(&key) || key.ends_with("/version-hint.text") {
                continue;
            }
            self.judge(file, held.files.contains(&key), now_ms, &mut report, &mut doomed);
        }
        if let Some(store) = self.task_store {
            let dir = spilled_dir(store, table);
            for file in self.list(table, &dir).await? {
                let Some(task_id) = spilled_task_id(&dir, &file.path) else { continue };
                let is_held = held.ids.contains(task_id) || held.files.contains(&file_key(&file.path));
                self.judge(file, is_held, now_ms, &mut report, &mut doomed);
            }
        }

        let bytes: u64 = doomed.iter().map(|f| f.size).sum();
        let paths: Vec<String> = doomed.into_iter().map(|f| f.path).collect();
        let mut failure = None;
        for batch in paths.chunks(DELETE_BATCH) {
            if let Err(e) = self.files.delete(batch).await {
                failure = Some(storage_error(table, format!("deleting {} file(s): {e}", batch.len()), e.retryable()));
                break;
            }
            report.removed.extend_from_slice(batch);
        }
        let event = MaintenanceEvent::Swept { at_ms: now_ms, removed: report.removed.len() as u64 };
        let recorded = self.registry.record(table, &event).await;
        if let Some(e) = failure {
            tracing::warn!(table = %table, files = report.removed.len(), error = %e, "orphan sweep stopped");
            return Err(e);
        }
        recorded?;
        tracing::info!(table = %table, files = report.removed.len(), bytes, kept_held = report.kept_held,
            kept_young = report.kept_young, elapsed_ms = started.elapsed().as_millis() as u64, "orphan sweep");
        Ok(report)
    }

    /// Every file under the directory `prefix` (which ends with `/`); anything the
    /// listing returns outside it is left out.
    async fn list(&self, table: &TableName, prefix: &str) -> Result<Vec<StoredFile>, MaintenanceError> {
        let mut files = self
            .files
            .list(prefix)
            .await
            .map_err(|e| storage_error(table, format!("listing {prefix}: {e}"), e.retryable()))?;
        let prefix = file_key(prefix);
        files.retain(|f| file_key(&f.path).starts_with(&prefix));
        Ok(files)
    }

    fn young(&self, file: &StoredFile, now_ms: i64) -> bool {
        file.modified_ms <= 0 || now_ms.saturating_sub(file.modified_ms) < self.grace_ms
    }

    /// An unreferenced file: kept when held or young, else to delete.
    fn judge(&self, file: StoredFile, held: bool, now_ms: i64, report: &mut SweepReport, doomed: &mut Vec<StoredFile>) {
        if held {
            report.kept_held += 1;
        } else if self.young(&file, now_ms) {
            report.kept_young += 1;
        } else {
            doomed.push(file);
        }
    }

    /// The keys of every file the table's metadata files reference: the current one's,
    /// and those of listed metadata files that may be newer than it.
    async fn referenced(
        &self,
        table: &TableName,
        metadata: &TableMetadata,
        metadata_location: &str,
        listed: &[StoredFile],
        now_ms: i64,
    ) -> Result<HashSet<String>, MaintenanceError> {
        let mut refs = References::default();
        refs.add_root(self.file_io, table, metadata_location, metadata).await?;
        let root = metadata.location().trim_end_matches('/');
        if let Some(delta) = DeltaSnapshot::read(self.delta_log, root).await? {
            for (path, add) in &delta.files {
                refs.insert(&absolute(root, path));
                if let Some(vector) = add.deletion_vector.as_ref().and_then(|v| v.file(root)) {
                    refs.insert(&vector);
                }
            }
        }
        let current = metadata_version(metadata_location);
        for file in listed {
            let key = file_key(&file.path);
            if refs.files.contains(&key) || !key.ends_with(".metadata.json") {
                continue;
            }
            // A metadata file no known metadata names: committed since the caller loaded
            // the table, in flight, or a failed commit's. Only an old one provably older
            // than the current is none of the first two. Or another table's (its UUID
            // another): a table renamed away from this location, or registered at it —
            // every file it references is that table's, whatever its version or age.
            let newer = match (metadata_version(&key), current) {
                (Some(version), Some(current)) => version > current,
                _ => true,
            };
            let Some(other) = read_other_root(self.file_io, table, &file.path).await? else { continue };
            if newer || self.young(file, now_ms) || other.uuid() != metadata.uuid() {
                refs.add_root(self.file_io, table, &file.path, &other).await?;
            }
        }
        Ok(refs.files)
    }
}

/// A listed metadata file the catalog does not point to, read as a root; `None` (with a
/// warning) when it holds no JSON at all — empty, truncated, not JSON, or gzip cut short:
/// a write cut short by a killed process. That is never a commit (a metadata file is
/// complete before the pointer moves to it), so it references nothing; it is judged as
/// any unreferenced file (kept while young, deleted after the grace period). A file that
/// cannot be read, or whose complete JSON is not metadata this reader knows, still fails
/// the sweep: it may be another engine's commit.
async fn read_other_root(
    file_io: &FileIO,
    table: &TableName,
    path: &str,
) -> Result<Option<TableMetadata>, MaintenanceError> {
    let read = read_error(table, path);
    let bytes = file_io.new_input(path).map_err(&read)?.read().await.map_err(&read)?;
    let Some(json) = metadata_json(&bytes) else {
        tracing::warn!(table = %table, file = %path, bytes = bytes.len(),
            "a metadata file holding no metadata (a write cut short?): not read as a root, left to the grace period");
        return Ok(None);
    };
    serde_json::from_value(json).map(Some).map_err(|e| read(e.into()))
}

/// The JSON of a metadata file's bytes (gzipped when they start as gzip does, as
/// `TableMetadata::read_from` reads them); `None` when there is none.
fn metadata_json(bytes: &[u8]) -> Option<serde_json::Value> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(bytes), &mut text).ok()?;
        return serde_json::from_slice(&text).ok();
    }
    serde_json::from_slice(bytes).ok()
}

/// Files referenced so far, and the manifest lists and manifests already read.
#[derive(Default)]
struct References {
    files: HashSet<String>,
    read: HashSet<String>,
}

impl References {
    fn insert(&mut self, path: &str) {
        self.files.insert(file_key(path));
    }

    /// Whether `path` is to be read (the first time it is seen); it is referenced.
    fn first_read(&mut self, path: &str) -> bool {
        self.insert(path);
        self.read.insert(file_key(path))
    }

    /// The metadata file at `location` (holding `metadata`) and everything it references.
    async fn add_root(
        &mut self,
        file_io: &FileIO,
        table: &TableName,
        location: &str,
        metadata: &TableMetadata,
    ) -> Result<(), MaintenanceError> {
        self.insert(location);
        for log in metadata.metadata_log() {
            self.insert(&log.metadata_file);
        }
        for statistics in metadata.statistics_iter() {
            self.insert(&statistics.statistics_path);
        }
        for statistics in metadata.partition_statistics_iter() {
            self.insert(&statistics.statistics_path);
        }
        for snapshot in metadata.snapshots() {
            if let Some(state) = snapshot.summary().additional_properties.get(STATE_KEY) {
                self.add_state(file_io, table, state).await?;
            }
            if let Some(root) = snapshot.summary().additional_properties.get(KEYS_KEY) {
                self.add_key_index(file_io, table, root).await?;
            }
            let list_path = snapshot.manifest_list();
            if !self.first_read(list_path) {
                continue;
            }
            let read = read_error(table, list_path);
            let bytes = file_io.new_input(list_path).map_err(&read)?.read().await.map_err(&read)?;
            let list = ManifestList::parse_with_version(&bytes, metadata.format_version()).map_err(&read)?;
            for manifest_file in list.entries() {
                if !self.first_read(&manifest_file.manifest_path) {
                    continue;
                }
                let manifest = manifest_file
                    .load_manifest(file_io)
                    .await
                    .map_err(read_error(table, &manifest_file.manifest_path))?;
                for entry in manifest.entries().iter().filter(|e| e.is_alive()) {
                    self.insert(entry.file_path());
                }
            }
        }
        Ok(())
    }
}

impl References {
    /// Floe's table state at `location` and the files it keeps (those of the transactions
    /// pending in it, dead letters on their way, and the offsets compaction left out).
    async fn add_state(&mut self, file_io: &FileIO, table: &TableName, location: &str) -> Result<(), MaintenanceError> {
        if !self.first_read(location) {
            return Ok(());
        }
        let state =
            TableState::load(file_io, Some(&location.to_string())).await.map_err(read_error(table, location))?;
        for file in state.files() {
            self.insert(file.path());
        }
        if let Some(left_out) = &state.left_out {
            self.insert(left_out);
        }
        Ok(())
    }
}

impl References {
    /// An upsert table's key index: its root and the bucket files it lists.
    async fn add_key_index(
        &mut self,
        file_io: &FileIO,
        table: &TableName,
        location: &str,
    ) -> Result<(), MaintenanceError> {
        if !self.first_read(location) {
            return Ok(());
        }
        let root = IndexRoot::load(file_io, location).await.map_err(read_error(table, location))?;
        for path in root.buckets.iter().flat_map(|b| b.files()) {
            self.insert(path);
        }
        Ok(())
    }
}

/// The held tasks' ids and the keys of their files.
struct Held {
    ids: HashSet<String>,
    files: HashSet<String>,
}

impl Held {
    fn new(tasks: Vec<HeldTask>) -> Held {
        let files = tasks.iter().flat_map(|t| t.files.iter().map(|f| file_key(f))).collect();
        Held { ids: tasks.into_iter().map(|t| t.task_id).collect(), files }
    }
}

/// A file's location as a key equal however a table writes it: local paths with or
/// without `file:` (`file:///x`, `file:/x`, `/x`) and with repeated slashes collapsed;
/// `s3a://` and `s3n://` as `s3://`, the key kept exactly (`a//b` is another object than
/// `a/b`). Other schemes are kept as they are.
fn file_key(location: &str) -> String {
    for scheme in ["s3://", "s3a://", "s3n://"] {
        if let Some(rest) = location.strip_prefix(scheme) {
            return format!("s3://{rest}");
        }
    }
    let local = location.strip_prefix("file:").unwrap_or(location);
    if local.contains("://") {
        return location.to_string();
    }
    let mut key = String::with_capacity(local.len());
    for c in local.chars() {
        if !(c == '/' && key.ends_with('/')) {
            key.push(c);
        }
    }
    key
}

/// The version of a metadata file named as Iceberg names them
/// (`<version>-<uuid>[.gz].metadata.json`).
fn metadata_version(location: &str) -> Option<u64> {
    let name = location.rsplit('/').next()?.strip_suffix(".metadata.json")?;
    name.split_once('-')?.0.parse().ok()
}

/// The folder of `table`'s spilled tasks, as the queue writes them.
fn spilled_dir(store: &str, table: &TableName) -> String {
    let store = if store.ends_with('/') { store.to_string() } else { format!("{store}/") };
    format!("{store}tasks/{table}/")
}

/// The task id of a spilled task object directly in `dir` (`<task id>.json`).
fn spilled_task_id<'p>(dir: &str, path: &'p str) -> Option<&'p str> {
    let name = path.rsplit('/').next()?;
    let inside = file_key(path).strip_prefix(&file_key(dir)).is_some_and(|rest| !rest.contains('/'));
    name.strip_suffix(".json").filter(|id| inside && !id.is_empty())
}

fn storage_error(table: &TableName, detail: String, retryable: bool) -> MaintenanceError {
    MaintenanceError::Storage { table: table.to_string(), detail, retryable }
}

fn read_error<'a>(table: &'a TableName, path: &'a str) -> impl Fn(iceberg::Error) -> MaintenanceError + 'a {
    move |e| TableError::iceberg(table)(e.with_context("file", path)).into()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::{Duration, UNIX_EPOCH};

    use iceberg::spec::{DataFile, Operation, PartitionSpec};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    use super::*;
    use crate::catalog::sqlite::SqliteCatalog;
    use crate::datafile::{Pages, TableWriter, WriterOptions};
    use crate::lock::TableLocks;
    use crate::lock::sqlite::SqliteLocks;
    use crate::maintenance::rewrite::compact;
    use crate::partition::tests::{batch, schema};
    use crate::storage::{LocalFiles, local_file_io};
    use crate::table::compaction::CompactionPolicy;
    use crate::table::snapshot::{SnapshotChange, live_data_files, write_snapshot};
    use crate::table::state::PendingEntry;

    const GRACE: i64 = 60 * 60 * 1000;
    const DAY: i64 = 24 * 60 * 60 * 1000;

    fn wall() -> i64 {
        chrono::Utc::now().timestamp_millis()
    }

    fn keys<'a>(paths: impl IntoIterator<Item = &'a str>) -> HashSet<String> {
        paths.into_iter().map(file_key).collect()
    }

    fn exists(path: &str) -> bool {
        std::path::Path::new(&file_key(path)).exists()
    }

    /// Sets the file's modification time (`ms` since the epoch).
    fn set_mtime(path: &str, ms: i64) {
        let file = std::fs::File::options().write(true).open(file_key(path)).unwrap();
        file.set_modified(UNIX_EPOCH + Duration::from_millis(ms as u64)).unwrap();
    }

    /// A table `kafka.t` of a local warehouse (beside the catalog's `catalog.db` and its
    /// registry), committed to with [`write_snapshot`].
    struct Fixture {
        _dir: tempfile::TempDir,
        warehouse: PathBuf,
        locks: SqliteLocks,
        file_io: FileIO,
        name: TableName,
        metadata: TableMetadata,
        location: String,
        next_offset: i64,
        /// Summary properties of the snapshots committed from now on.
        summary: HashMap<String, String>,
    }

    impl Fixture {
        /// The table's location is written `file://…` when `uri`, else as a plain path.
        async fn new(uri: bool, properties: &[(&str, &str)]) -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            let warehouse = dir.path().canonicalize().unwrap();
            let catalog = SqliteCatalog::open(&warehouse.join("catalog.db"), "floe").unwrap();
            let locks = SqliteLocks::new(catalog.connection()).unwrap();
            let scheme = if uri { "file://" } else { "" };
            let table_location = format!("{scheme}{}/kafka.db/t", warehouse.display());
            let (metadata, location) = crate::table::new_table_metadata(
                &table_location,
                &schema(),
                &PartitionSpec::unpartition_spec(),
                iceberg::spec::FormatVersion::V2,
            )
            .unwrap();
            let properties = properties.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            let metadata = metadata.into_builder(None).set_properties(properties).unwrap().build().unwrap().metadata;
            let file_io = local_file_io();
            metadata.write_to(&file_io, &location).await.unwrap();
            Fixture {
                _dir: dir,
                warehouse,
                locks,
                file_io,
                name: TableName::parse("kafka.t").unwrap(),
                metadata,
                location: location.to_string(),
                next_offset: 0,
                summary: HashMap::new(),
            }
        }

        /// A data file of `rows` rows under the table's `data/`, not committed.
        async fn write(&mut self, rows: i64) -> DataFile {
            self.write_file(rows).await.data_file
        }

        async fn write_file(&mut self, rows: i64) -> crate::datafile::WrittenFile {
            let schema = schema();
            let options = WriterOptions {
                file_io: self.file_io.clone(),
                dir: format!("{}/data", self.metadata.location()),
                partition: 0,
                source_id: format!("s{}", self.next_offset),
                schema: Arc::new(schema.clone()),
                target_size: 1 << 30,
                pages: Pages::Zstd,
            };
            let mut writer = TableWriter::new(options, Arc::new(PartitionSpec::unpartition_spec())).unwrap();
            let (first, last) = (self.next_offset, self.next_offset + rows - 1);
            let values: Vec<(i64, Option<i64>, Option<&str>)> = (first..=last).map(|o| (o, None, None)).collect();
            writer.write(&batch(&schema, &values), first, last).await.unwrap();
            self.next_offset += rows;
            writer.close().await.unwrap().remove(0)
        }

        /// A data file of `rows` rows, appended in a snapshot of its own.
        async fn append(&mut self, rows: i64) -> DataFile {
            let file = self.write(rows).await;
            self.commit(vec![file.clone()], &[]).await;
            file
        }

        /// A snapshot adding `added` and removing `removed` (a `replace` when it does).
        async fn commit(&mut self, added: Vec<DataFile>, removed: &[&DataFile]) {
            let new = self.snapshot_on(&self.metadata, &self.location, added, removed).await;
            (self.metadata, self.location) = (new.metadata, new.location);
        }

        /// The snapshot written on `metadata` (at `location`), the catalog not moved.
        async fn snapshot_on(
            &self,
            metadata: &TableMetadata,
            location: &str,
            added: Vec<DataFile>,
            removed: &[&DataFile],
        ) -> crate::table::snapshot::NewMetadata {
            let change = SnapshotChange {
                operation: if removed.is_empty() { Operation::Append } else { Operation::Replace },
                added,
                added_deletes: Vec::new(),
                added_sequence: Default::default(),
                removed: removed.iter().map(|f| f.file_path().to_string()).collect(),
                properties: self.summary.clone(),
                new_schema: None,
            };
            write_snapshot(&self.file_io, metadata, location, change, wall()).await.unwrap()
        }

        fn sweep_of<'a>(&'a self, task_store: Option<&'a str>) -> Sweep<'a> {
            Sweep {
                file_io: &self.file_io,
                files: &LocalFiles,
                registry: &self.locks,
                task_store,
                grace_ms: GRACE,
                delta_log: &crate::delta::LocalLogStore,
            }
        }

        async fn sweep(&self, now_ms: i64) -> SweepReport {
            self.sweep_of(None).table(&self.name, &self.metadata, &self.location, now_ms).await.unwrap()
        }

        /// Every file of the warehouse, catalog.db included.
        async fn all_files(&self) -> HashSet<String> {
            let files = LocalFiles.list(&self.warehouse.display().to_string()).await.unwrap();
            files.into_iter().map(|f| f.path).collect()
        }

        /// The retained snapshots' manifest lists and manifests, and their live data files.
        async fn snapshot_files(&self) -> (HashSet<String>, HashSet<String>) {
            let (mut metadata_files, mut data) = (HashSet::new(), HashSet::new());
            for snapshot in self.metadata.snapshots() {
                metadata_files.insert(file_key(snapshot.manifest_list()));
                let bytes = self.file_io.new_input(snapshot.manifest_list()).unwrap().read().await.unwrap();
                let list = ManifestList::parse_with_version(&bytes, self.metadata.format_version()).unwrap();
                for manifest in list.entries() {
                    metadata_files.insert(file_key(&manifest.manifest_path));
                    let entries = manifest.load_manifest(&self.file_io).await.unwrap();
                    data.extend(entries.entries().iter().filter(|e| e.is_alive()).map(|e| file_key(e.file_path())));
                }
            }
            (metadata_files, data)
        }

        /// Rows of the current snapshot, read from its files.
        async fn rows(&self) -> i64 {
            let mut rows = 0;
            for file in live_data_files(&self.file_io, &self.metadata).await.unwrap() {
                let bytes = self.file_io.new_input(file.file_path()).unwrap().read().await.unwrap();
                rows += ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap().metadata().file_metadata().num_rows();
            }
            rows
        }

        /// Asserts that every file the retained snapshots reference is there.
        async fn assert_intact(&self) {
            let (metadata_files, data) = self.snapshot_files().await;
            let current = std::iter::once(self.location.as_str());
            let log = self.metadata.metadata_log().iter().map(|l| l.metadata_file.as_str());
            for path in metadata_files.iter().chain(&data).chain(&keys(current.chain(log))) {
                assert!(exists(path), "{path} is referenced and was deleted");
            }
        }
    }

    #[tokio::test]
    async fn an_expired_snapshot_s_own_files_go_and_shared_ones_stay() {
        let history = [("floe.history.max-snapshots", "2"), ("history.expire.min-snapshots-to-keep", "1")];
        // `file://` locations; the listing says plain paths.
        let mut t = Fixture::new(true, &history).await;
        let (f1, f2) = (t.write(3).await, t.write(3).await);
        t.commit(vec![f1.clone()], &[]).await;
        t.commit(vec![f2.clone()], &[]).await;
        let (first_two, _) = t.snapshot_files().await;
        // A compaction of both, then an append: the first two snapshots expire.
        let (f3, f4) = (t.write(6).await, t.write(3).await);
        t.commit(vec![f3.clone()], &[&f1, &f2]).await;
        t.commit(vec![f4.clone()], &[]).await;
        assert_eq!(t.metadata.snapshots().len(), 2);

        let report = t.sweep(wall() + GRACE).await;
        // Their manifest lists and manifests (rewritten by the compaction), and the files
        // only they had live; the compaction's rewritten manifest, still carried, names
        // f1 and f2 as DELETED only.
        let mut expected = first_two;
        expected.extend(keys([f1.file_path(), f2.file_path()]));
        assert_eq!(keys(report.removed.iter().map(String::as_str)), expected);
        assert_eq!((report.kept_held, report.kept_young), (0, 0));
        // f3 was added by an expired snapshot and is shared with the retained ones.
        assert!(exists(f3.file_path()) && exists(f4.file_path()));
        t.assert_intact().await;
        assert_eq!(t.rows().await, 9);
        // Nothing more to do.
        assert_eq!(t.sweep(wall() + 2 * GRACE).await, SweepReport::default());
    }

    #[tokio::test]
    async fn orphans_are_kept_until_the_grace_period_has_passed() {
        let mut t = Fixture::new(false, &[]).await;
        t.append(2).await;
        // Written by a materializer that crashed before its task was held or queued.
        let orphan = t.write(2).await;
        let written = wall() - 10 * DAY;
        set_mtime(orphan.file_path(), written);

        let report = t.sweep(written + GRACE - 1).await;
        assert_eq!((report.removed.len(), report.kept_young), (0, 1));
        assert!(exists(orphan.file_path()));
        assert_eq!(t.locks.status(&t.name).await.unwrap().last_sweep_ms, Some(written + GRACE - 1));

        let report = t.sweep(written + GRACE).await;
        assert_eq!(report.removed, [orphan.file_path()]);
        assert!(!exists(orphan.file_path()));
        assert_eq!(t.rows().await, 2);
        let status = t.locks.status(&t.name).await.unwrap();
        assert_eq!((status.orphans_removed, status.last_sweep_ms), (1, Some(written + GRACE)));
    }

    #[tokio::test]
    async fn a_compaction_never_queued_is_collected_after_the_grace_period() {
        let mut t = Fixture::new(false, &[]).await;
        for _ in 0..3 {
            t.append(2).await;
        }
        let policy = CompactionPolicy { target: 1 << 30, window_ms: 0 };
        let mut tasks = compact(&t.file_io, &t.name, &t.metadata, policy, wall()).await.unwrap();
        assert_eq!(tasks.len(), 1, "one bin");
        let task = tasks.remove(0);
        // The run crashed here: its task was never held nor queued.
        let outputs: Vec<&str> = task.added.iter().map(|f| f.path()).collect();
        assert_eq!((outputs.len(), task.removed.len()), (1, 3));
        let written = wall();

        let report = t.sweep(written + GRACE - 1000).await;
        assert_eq!((report.removed.len(), report.kept_young), (0, 1));
        let report = t.sweep(written + GRACE + 1000).await;
        assert_eq!(keys(report.removed.iter().map(String::as_str)), keys(outputs));
        assert!(task.removed.iter().all(|input| exists(input)), "the inputs are live");
        assert_eq!(t.rows().await, 6);
    }

    #[tokio::test]
    async fn a_suspended_table_s_queued_files_survive_until_committed() {
        let mut t = Fixture::new(false, &[]).await;
        t.append(2).await;
        // A segment's files, its task held then queued; the table is suspended, so the
        // task waits in the queue for days.
        let queued = vec![t.write(2).await, t.write(3).await];
        let files = queued.iter().map(|f| f.file_path().to_string()).collect();
        t.locks
            .hold_task(&t.name, &HeldTask { task_id: "segment-7".into(), files, held_at_ms: wall(), offsets: None })
            .await
            .unwrap();
        t.locks.set_suspended("kafka.t", Some("bad record")).await.unwrap();
        let weeks_later = wall() + 30 * DAY;
        let report = t.sweep(weeks_later).await;
        assert_eq!((report.removed.len(), report.kept_held), (0, 2));
        assert!(queued.iter().all(|f| exists(f.file_path())));

        // Resumed: the committer commits the task, then releases it.
        t.locks.set_suspended("kafka.t", None).await.unwrap();
        t.commit(queued.clone(), &[]).await;
        t.locks.release_tasks(&t.name, &["segment-7".into()]).await.unwrap();
        assert_eq!(t.sweep(weeks_later).await, SweepReport::default());
        assert_eq!(t.rows().await, 7);
    }

    #[tokio::test]
    async fn spilled_tasks_go_once_done_and_past_the_grace_period() {
        let t = Fixture::new(false, &[]).await;
        // Written as `<store>tasks/<table>/<task id>.json`; the store given without its `/`.
        let store = format!("{}/overflow", t.warehouse.display());
        let spilled = |table: &str, id: &str| format!("{store}/tasks/{table}/{id}.json");
        let old = wall() - 10 * DAY;
        for (table, id) in [("kafka.t", "held"), ("kafka.t", "done"), ("kafka.t", "young"), ("kafka.tt", "other")] {
            let path = spilled(table, id);
            std::fs::create_dir_all(std::path::Path::new(&path).parent().unwrap()).unwrap();
            std::fs::write(&path, b"{}").unwrap();
            set_mtime(&path, if id == "young" { wall() } else { old });
        }
        let held = HeldTask { task_id: "held".into(), files: Vec::new(), held_at_ms: old, offsets: None };
        t.locks.hold_task(&t.name, &held).await.unwrap();

        let sweep = t.sweep_of(Some(&store));
        let report = sweep.table(&t.name, &t.metadata, &t.location, wall() + 1000).await.unwrap();
        assert_eq!(report.removed, [spilled("kafka.t", "done")]);
        assert_eq!((report.kept_held, report.kept_young), (1, 1));
        for (table, id) in [("kafka.t", "held"), ("kafka.t", "young"), ("kafka.tt", "other")] {
            assert!(exists(&spilled(table, id)), "{table}/{id}");
        }
    }

    #[tokio::test]
    async fn referenced_files_and_files_beside_data_and_metadata_survive_any_age() {
        let mut t = Fixture::new(true, &[]).await;
        for _ in 0..2 {
            t.append(2).await;
        }
        let root = t.warehouse.display().to_string();
        for stray in [
            "kafka.db/t/notes.txt",
            "kafka.db/t/data-old/x.parquet",
            "kafka.db/t2/data/y.parquet",
            "kafka.db/t/metadata/version-hint.text",
            "tasks/kafka.t/z.json",
        ] {
            let path = format!("{root}/{stray}");
            std::fs::create_dir_all(std::path::Path::new(&path).parent().unwrap()).unwrap();
            std::fs::write(&path, b"x").unwrap();
        }
        let before = t.all_files().await;
        assert!(before.contains(&format!("{root}/catalog.db")));
        for path in &before {
            set_mtime(path, 1);
        }
        assert_eq!(t.sweep(i64::MAX).await, SweepReport::default());
        assert_eq!(t.all_files().await, before);
        assert_eq!(t.rows().await, 4);
    }

    #[tokio::test]
    async fn files_committed_after_the_caller_loaded_the_table_are_kept() {
        let mut t = Fixture::new(false, &[]).await;
        t.append(2).await;
        let (stale, stale_location) = (t.metadata.clone(), t.location.clone());
        // While the compactor planned from `stale`, a task written long ago was committed
        // and released.
        let late = t.append(3).await;
        // And a committer that lost the race to it left its own commit (the same version).
        let lost_file = t.write(1).await;
        let lost = t.snapshot_on(&stale, &stale_location, vec![lost_file.clone()], &[]).await;
        assert_eq!(metadata_version(&lost.location), metadata_version(&t.location));
        let lost_list = lost.metadata.current_snapshot().unwrap().manifest_list();
        let later = wall() + 10 * DAY;
        let report = t.sweep_of(None).table(&t.name, &stale, &stale_location, later).await.unwrap();
        assert!(report.removed.is_empty(), "{:?}", report.removed);
        assert!(exists(late.file_path()));

        // With the current metadata: the loser's files go, the table's stay.
        let report = t.sweep(later).await;
        let removed = keys(report.removed.iter().map(String::as_str));
        assert!(removed.is_superset(&keys([lost_file.file_path(), &lost.location, lost_list])), "{removed:?}");
        assert_eq!(removed.len(), 4, "and its manifest: {removed:?}");
        t.assert_intact().await;
        assert_eq!(t.rows().await, 5);
    }

    #[tokio::test]
    async fn an_unreadable_manifest_fails_the_sweep_and_deletes_nothing() {
        let mut t = Fixture::new(false, &[]).await;
        t.append(2).await;
        let orphan = t.write(2).await;
        let (manifests, _) = t.snapshot_files().await;
        let manifest = manifests.iter().find(|m| !m.contains("/snap-")).unwrap();
        std::fs::remove_file(manifest).unwrap();

        let error = t.sweep_of(None).table(&t.name, &t.metadata, &t.location, wall() + DAY).await.unwrap_err();
        assert!(error.to_string().contains(manifest.as_str()), "{error}");
        assert!(exists(orphan.file_path()));
        assert_eq!(t.locks.status(&t.name).await.unwrap().last_sweep_ms, None);
    }

    #[tokio::test]
    async fn a_metadata_file_cut_short_is_no_root_and_goes_after_the_grace_period() {
        let mut t = Fixture::new(false, &[]).await;
        t.append(2).await;
        // A run killed while writing the next version: empty, truncated, gzip cut short.
        let next = metadata_version(&t.location).unwrap() + 1;
        let dir = format!("{}/metadata", t.metadata.location());
        let written = std::fs::read(file_key(&t.location)).unwrap();
        let mut gzipped = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gzipped, &written).unwrap();
        let gzipped = gzipped.finish().unwrap();
        let cut: Vec<(String, &[u8])> = vec![
            (format!("{dir}/{next:05}-00000000-0000-0000-0000-000000000001.metadata.json"), b""),
            (
                format!("{dir}/{next:05}-00000000-0000-0000-0000-000000000002.metadata.json"),
                &written[..written.len() / 2],
            ),
            (format!("{dir}/{next:05}-00000000-0000-0000-0000-000000000003.gz.metadata.json"), &gzipped[..20]),
        ];
        for (path, bytes) in &cut {
            std::fs::write(path, bytes).unwrap();
        }
        let report = t.sweep(wall()).await;
        assert_eq!((report.removed.len(), report.kept_young), (0, 3), "{report:?}");
        // Past the grace period they go, and nothing the table references.
        let report = t.sweep(wall() + GRACE + 1000).await;
        let cut_paths = cut.iter().map(|(p, _)| p.as_str());
        assert_eq!(keys(report.removed.iter().map(String::as_str)), keys(cut_paths));
        t.assert_intact().await;
        assert_eq!(t.rows().await, 2);
    }

    #[tokio::test]
    async fn a_newer_metadata_file_of_complete_json_unknown_still_fails_the_sweep() {
        let mut t = Fixture::new(false, &[]).await;
        t.append(2).await;
        let orphan = t.write(2).await;
        // Complete JSON this reader does not know: maybe another engine's commit.
        let next = metadata_version(&t.location).unwrap() + 1;
        let dir = format!("{}/metadata", t.metadata.location());
        let other = format!("{dir}/{next:05}-00000000-0000-0000-0000-000000000009.metadata.json");
        std::fs::write(&other, br#"{"format-version": 9}"#).unwrap();
        let error = t.sweep_of(None).table(&t.name, &t.metadata, &t.location, wall() + DAY).await.unwrap_err();
        assert!(error.to_string().contains(&other), "{error}");
        assert!(exists(orphan.file_path()) && exists(&other));
    }

    /// A snapshot naming a table state (saved under the table's metadata directory, as
    /// the committer does) where a transaction a segment left open waits, its file
    /// written; returns the state's location and the file's.
    async fn append_with_open_transaction(t: &mut Fixture) -> (String, String) {
        let written = t.write_file(3).await;
        let file = crate::task::TaskFile::from_written(&written, &iceberg::spec::StructType::new(vec![])).unwrap();
        let transaction = crate::task::PendingTransaction {
            producer_id: 7,
            producer_epoch: 0,
            first_offset: written.first_offset,
            last_offset: written.last_offset,
            records: 3,
            files: vec![file],
            ..Default::default()
        };
        let state = TableState {
            pending: vec![PendingEntry {
                topic: "t".into(),
                partition: 0,
                task_id: "segment-3".into(),
                segment_first: Some(written.first_offset),
                transaction,
                schema: schema(),
                partition_spec: None,
                keep: None,
                pending_since_ms: None,
                transaction_timeout_ms: None,
                dead_letter_table: None,
            }],
            ..TableState::default()
        };
        let location = state.save(&t.file_io, &format!("{}/metadata", t.metadata.location())).await.unwrap();
        t.summary.insert(STATE_KEY.into(), location.clone());
        t.append(2).await;
        (location, written.path().to_string())
    }

    /// Issue 30 item 1: the state files retained snapshots name, and the files of the
    /// transactions pending in them, are referenced, however old.
    #[tokio::test]
    async fn the_table_state_and_its_pending_transactions_survive_any_age() {
        let mut t = Fixture::new(false, &[]).await;
        let (first_state, first_open) = append_with_open_transaction(&mut t).await;
        // A later snapshot names another state; the first stays retained.
        let (state, open) = append_with_open_transaction(&mut t).await;
        for path in t.all_files().await {
            set_mtime(&path, 1);
        }
        let report = t.sweep(wall() + 10 * DAY).await;
        assert_eq!(report, SweepReport::default());
        for path in [&first_state, &first_open, &state, &open] {
            assert!(exists(path), "{path} was deleted");
        }
        t.assert_intact().await;
    }

    #[tokio::test]
    async fn an_unreadable_table_state_fails_the_sweep_and_deletes_nothing() {
        let mut t = Fixture::new(false, &[]).await;
        let (state, open) = append_with_open_transaction(&mut t).await;
        let orphan = t.write(2).await;
        std::fs::write(file_key(&state), b"").unwrap();

        let error = t.sweep_of(None).table(&t.name, &t.metadata, &t.location, wall() + DAY).await.unwrap_err();
        assert!(error.to_string().contains(&state), "{error}");
        assert!(!error.retryable(), "{error}");
        assert!(exists(orphan.file_path()) && exists(&open));
        assert_eq!(t.locks.status(&t.name).await.unwrap().last_sweep_ms, None);
    }

    #[test]
    fn paths_compare_however_tables_write_them() {
        assert_eq!(file_key("file:///w/t/data/a.parquet"), "/w/t/data/a.parquet");
        assert_eq!(file_key("file:/w/t//data/a.parquet"), "/w/t/data/a.parquet");
        assert_eq!(file_key("/w//t/data/a.parquet"), "/w/t/data/a.parquet");
        assert_eq!(file_key("s3a://b/w/t/a.parquet"), "s3://b/w/t/a.parquet");
        assert_eq!(file_key("s3://b/w//a"), "s3://b/w//a", "an S3 key is kept exactly");
        assert_eq!(file_key("memory:///t/a"), "memory:///t/a");
        assert_eq!(metadata_version("s3://b/t/metadata/00012-0f0e.metadata.json"), Some(12));
        assert_eq!(metadata_version("/t/metadata/00003-0f0e.gz.metadata.json"), Some(3));
        assert_eq!(metadata_version("/t/metadata/v3.metadata.json"), None);
        let dir = spilled_dir("s3://b/overflow", &TableName::parse("kafka.t").unwrap());
        assert_eq!(dir, "s3://b/overflow/tasks/kafka.t/");
        assert_eq!(spilled_task_id(&dir, "s3://b/overflow/tasks/kafka.t/abc.json"), Some("abc"));
        assert_eq!(spilled_task_id(&dir, "s3://b/overflow/tasks/kafka.t/x/abc.json"), None);
        assert_eq!(spilled_task_id(&dir, "s3://b/overflow/tasks/kafka.t/abc.txt"), None);
    }
}
