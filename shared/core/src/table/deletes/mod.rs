//! Row-level deletes: other engines', the data files they apply to, and their rows read
//! for compaction to apply ([`read`]); and the position delete files an upsert table's
//! commits write ([`write`](mod@write)).
//!
//! Athena, Trino, Spark and Flink delete rows without rewriting data files: they add
//! delete files (merge-on-read) that readers apply to the data files at read time —
//! position deletes (`file_path`, `pos`), equality deletes (rows equal on some columns)
//! and, in format v3, deletion vectors (a bitmap in a Puffin file naming its data file in
//! `referenced_data_file`). Which data files a delete file applies to, by Iceberg's
//! scoping rules ([`applies`]):
//!
//! - a position delete file or deletion vector: data files of its partition spec and
//!   partition value whose data sequence number is at most its own; only the file it
//!   names when it names one (`referenced_data_file`, or `file_path` bounds on one path),
//!   and of those only the files its rows name;
//! - an equality delete file: data files of its spec and partition value whose data
//!   sequence number is strictly lower; of every spec and partition when its own spec is
//!   unpartitioned (a global delete).
//!
//! Compaction applies them ([`TableDeletes`]): a data file is rewritten without the rows
//! its position deletes, deletion vectors and equality deletes remove. The delete files
//! themselves are never read as data: every listing of live data files
//! ([`crate::table::snapshot::live_data_files`]) takes data entries only, and snapshots
//! Floe writes carry delete manifests forward, less the delete files a compaction
//! applied that apply to no live data file any more.

pub mod carry;
pub mod read;
pub mod write;

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::Result;
use iceberg::io::FileIO;
use iceberg::spec::{DataContentType, DataFile, DataFileFormat, ManifestContentType, PrimitiveLiteral, TableMetadata};

use self::read::{EqualityDeletes, FileDeletes};
use super::snapshot::{LiveFile, ManifestSource, ReadManifests, current_manifests};

/// Field id of the `file_path` column of position delete files (Iceberg's reserved id).
const DELETE_FILE_PATH_ID: i32 = 2_147_483_546;

/// A live data file with what delete scoping needs: its data sequence number and spec.
#[derive(Debug, Clone)]
pub struct ScopedFile {
    pub live: LiveFile,
    pub sequence_number: i64,
    pub spec_id: i32,
    /// The snapshot that added it (its manifest entry's).
    pub added_by: i64,
}

impl ScopedFile {
    pub fn path(&self) -> &str {
        self.live.file.file_path()
    }
}

/// What names one delete in a snapshot, a task and a removal: a delete file's path; a
/// deletion vector's Puffin file path and blob offset (`…/x.puffin#4`), as one Puffin
/// file holds the vectors of many data files, each its own manifest entry. A data file's
/// is its path.
pub fn delete_key(file: &DataFile) -> String {
    match (file.file_format(), file.content_offset()) {
        (DataFileFormat::Puffin, Some(offset)) => format!("{}#{offset}", file.file_path()),
        _ => file.file_path().to_string(),
    }
}

/// Whether a [`delete_key`] names a deletion vector (`<puffin path>#<offset>`).
fn is_vector_key(key: &str) -> bool {
    key.rsplit_once('#').is_some_and(|(_, offset)| !offset.is_empty() && offset.bytes().all(|b| b.is_ascii_digit()))
}

/// A live delete file (or deletion vector) of the current snapshot.
#[derive(Debug, Clone)]
pub struct LiveDelete {
    pub file: DataFile,
    pub sequence_number: i64,
    pub spec_id: i32,
    key: String,
}

impl LiveDelete {
    pub fn new(file: DataFile, sequence_number: i64, spec_id: i32) -> LiveDelete {
        LiveDelete { key: delete_key(&file), file, sequence_number, spec_id }
    }

    /// Its [`delete_key`]: the path of a delete file, the path and offset of a vector.
    pub fn path(&self) -> &str {
        &self.key
    }

    /// A deletion vector (a Puffin blob).
    pub fn is_vector(&self) -> bool {
        self.file.file_format() == DataFileFormat::Puffin
    }

    /// The one data file this delete applies to, when it names one: a deletion vector's
    /// or position delete file's `referenced_data_file`, or `file_path` bounds on one path.
    fn referenced(&self) -> Option<String> {
        if self.file.content_type() != DataContentType::PositionDeletes {
            return None;
        }
        if let Some(path) = self.file.referenced_data_file() {
            return Some(path);
        }
        let bound = |b: &HashMap<i32, iceberg::spec::Datum>| match b.get(&DELETE_FILE_PATH_ID)?.literal() {
            PrimitiveLiteral::String(s) => Some(s.clone()),
            _ => None,
        };
        match (bound(self.file.lower_bounds()), bound(self.file.upper_bounds())) {
            (Some(lower), Some(upper)) if lower == upper => Some(lower),
            _ => None,
        }
    }
}

fn partition_key(spec_id: i32, file: &DataFile) -> (i32, String) {
    (spec_id, format!("{:?}", file.partition()))
}

/// Whether `delete` may apply to `data` by the scoping rules (the module doc), without
/// reading it: a position delete file not naming one file may name no row of `data`.
/// `global`: the delete's spec is unpartitioned.
pub fn applies(delete: &LiveDelete, data: &ScopedFile, global: bool) -> bool {
    let same_partition = || partition_key(delete.spec_id, &delete.file) == partition_key(data.spec_id, &data.live.file);
    match delete.file.content_type() {
        DataContentType::EqualityDeletes => {
            data.sequence_number < delete.sequence_number && (global || same_partition())
        }
        _ => {
            data.sequence_number <= delete.sequence_number
                && delete.referenced().map_or_else(same_partition, |path| path == data.path())
        }
    }
}

/// The current snapshot's live data files (data entries only: never a delete file) with
/// their sequence numbers and specs, and its live delete files.
pub async fn live_files(file_io: &FileIO, metadata: &TableMetadata) -> Result<(Vec<ScopedFile>, Vec<LiveDelete>)> {
    live_files_from(file_io, metadata, &ReadManifests).await
}

/// [`live_files`], the manifests taken from `manifests`.
pub async fn live_files_from(
    file_io: &FileIO,
    metadata: &TableMetadata,
    manifests: &dyn ManifestSource,
) -> Result<(Vec<ScopedFile>, Vec<LiveDelete>)> {
    let oldest = metadata.snapshots().map(|s| s.timestamp_ms()).min().unwrap_or(0);
    let (mut data, mut deletes) = (Vec::new(), Vec::new());
    for manifest in current_manifests(file_io, metadata).await? {
        for entry in manifests.manifest(file_io, &manifest).await?.entries().iter().filter(|e| e.is_alive()) {
            let sequence_number = entry.sequence_number().unwrap_or(manifest.sequence_number);
            let spec_id = manifest.partition_spec_id;
            let file = entry.data_file().clone();
            if manifest.content == ManifestContentType::Deletes || file.content_type() != DataContentType::Data {
                deletes.push(LiveDelete::new(file, sequence_number, spec_id));
                continue;
            }
            let snapshot_id = entry.snapshot_id().unwrap_or(manifest.added_snapshot_id);
            let added_at_ms = metadata.snapshot_by_id(snapshot_id).map_or(oldest, |s| s.timestamp_ms());
            let live = LiveFile { file, added_at_ms };
            data.push(ScopedFile { live, sequence_number, spec_id, added_by: snapshot_id });
        }
    }
    Ok((data, deletes))
}

/// Whether the table's spec `spec_id` has no fields (its equality deletes are global).
pub fn unpartitioned(metadata: &TableMetadata, spec_id: i32) -> bool {
    metadata.partition_spec_by_id(spec_id).is_none_or(|s| s.fields().is_empty())
}

/// A delete file a compaction applied, as its task carries it: for a position delete
/// file, the data files its rows name (it may be dropped once none is live).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AppliedDelete {
    pub path: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
}

/// What applies to one data file: the rows to leave out, the delete files they come
/// from, and how many rows its position deletes remove (equality deletes: unknown until
/// read). `unread` counts the delete files that apply but whose rows were not read yet
/// ([`TableDeletes::read_for`]): a rewrite must find none.
#[derive(Debug, Clone, Default)]
pub struct OfFile {
    pub deletes: FileDeletes,
    pub files: Vec<String>,
    pub position_rows: u64,
    pub unread: usize,
}

/// The rows a position delete file or deletion vector deletes.
#[derive(Debug)]
enum Named {
    /// Read: the rows it deletes, per data file it names.
    Read(Arc<HashMap<String, Vec<i64>>>),
    /// Not read yet: it names this one data file (by its metadata), its `record_count`
    /// rows of it.
    One(String),
}

/// The live delete files of the current snapshot: what compaction applies. Planning
/// needs only what the manifests say of most of them ([`TableDeletes::scope`]); their
/// rows are read for the data files a compaction rewrites ([`TableDeletes::read_for`]),
/// so a table keeping delete files on files left as they are does not read them on every
/// compactor run.
#[derive(Debug, Default)]
pub struct TableDeletes {
    /// Position delete files and deletion vectors, each with the rows it names by file.
    positions: Vec<(LiveDelete, Named)>,
    /// Equality delete files: whether global, and their rows once read.
    equality: Vec<(LiveDelete, bool, Option<Arc<EqualityDeletes>>)>,
}

impl TableDeletes {
    /// `deletes` (of `metadata`'s current snapshot) as planning needs them: a position
    /// delete file that may name several data files is read, to know which and how many
    /// rows of each; one naming a single data file (a deletion vector, or a file-scoped
    /// position delete file) and equality delete files are not.
    pub async fn scope(file_io: &FileIO, metadata: &TableMetadata, deletes: Vec<LiveDelete>) -> Result<TableDeletes> {
        Self::scope_from(file_io, metadata, deletes, &ReadDeletes).await
    }

    /// [`TableDeletes::scope`], the rows of position deletes taken from `source`.
    pub async fn scope_from(
        file_io: &FileIO,
        metadata: &TableMetadata,
        deletes: Vec<LiveDelete>,
        source: &dyn DeleteSource,
    ) -> Result<TableDeletes> {
        let mut table = TableDeletes::default();
        for delete in deletes {
            if delete.file.content_type() == DataContentType::EqualityDeletes {
                let global = unpartitioned(metadata, delete.spec_id);
                table.equality.push((delete, global, None));
                continue;
            }
            let named = match delete.referenced() {
                Some(path) => Named::One(path),
                None => Named::Read(source.rows_named(file_io, &delete).await?),
            };
            table.positions.push((delete, named));
        }
        Ok(table)
    }

    /// Reads the rows of the delete files applying to `files` that are not read yet.
    pub async fn read_for(&mut self, file_io: &FileIO, metadata: &TableMetadata, files: &[&ScopedFile]) -> Result<()> {
        self.read_for_from(file_io, metadata, files, &ReadDeletes).await
    }

    /// [`TableDeletes::read_for`], the rows of position deletes taken from `source`.
    pub async fn read_for_from(
        &mut self,
        file_io: &FileIO,
        metadata: &TableMetadata,
        files: &[&ScopedFile],
        source: &dyn DeleteSource,
    ) -> Result<()> {
        for (delete, named) in &mut self.positions {
            if let Named::One(path) = named
                && files.iter().any(|f| f.path() == path && f.sequence_number <= delete.sequence_number)
            {
                *named = Named::Read(source.rows_named(file_io, delete).await?);
            }
        }
        let unread = |(delete, global, rows): &(LiveDelete, bool, Option<_>)| {
            rows.is_none() && files.iter().any(|f| applies(delete, f, *global))
        };
        if !self.equality.iter().any(unread) {
            return Ok(());
        }
        let fields = iceberg::arrow::schema_to_arrow_schema(metadata.current_schema())?.fields().clone();
        for entry in &mut self.equality {
            if unread(entry) {
                entry.2 = Some(Arc::new(EqualityDeletes::read(file_io, &entry.0.file, &fields).await?));
            }
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.positions.is_empty() && self.equality.is_empty()
    }

    /// What applies to `data`: the rows of the delete files read, and how many rows the
    /// unread ones name by their metadata.
    pub fn of(&self, data: &ScopedFile) -> OfFile {
        let mut of = OfFile::default();
        let mut unread_rows = 0;
        for (delete, named) in self.positions.iter().filter(|(d, _)| data.sequence_number <= d.sequence_number) {
            match named {
                Named::Read(rows) => match rows.get(data.path()) {
                    Some(positions) => of.deletes.positions.extend(positions),
                    None => continue,
                },
                Named::One(path) if path == data.path() => {
                    unread_rows += delete.file.record_count();
                    of.unread += 1;
                }
                Named::One(_) => continue,
            }
            of.files.push(delete.path().to_string());
        }
        of.deletes.positions.sort_unstable();
        of.deletes.positions.dedup();
        of.position_rows = of.deletes.positions.len() as u64 + unread_rows;
        for (delete, global, rows) in &self.equality {
            if applies(delete, data, *global) {
                match rows {
                    Some(rows) => of.deletes.equality.push(rows.clone()),
                    None => of.unread += 1,
                }
                of.files.push(delete.path().to_string());
            }
        }
        of
    }

    /// The delete files of `paths` as a task carries them (a position delete file with
    /// the data files it names).
    pub fn applied(&self, paths: impl IntoIterator<Item = String>) -> Vec<AppliedDelete> {
        let mut applied: Vec<AppliedDelete> = paths
            .into_iter()
            .map(|path| {
                let named = self.positions.iter().find(|(d, _)| d.path() == path);
                let mut names: Vec<String> = match named.map(|(_, n)| n) {
                    Some(Named::Read(rows)) => rows.keys().cloned().collect(),
                    Some(Named::One(one)) => vec![one.clone()],
                    None => Vec::new(),
                };
                names.sort();
                AppliedDelete { path, names }
            })
            .collect();
        applied.sort_by(|a, b| a.path.cmp(&b.path));
        applied.dedup();
        applied
    }
}

/// Why a compaction cannot be taken now, `None` when it can. It was planned at data
/// sequence number `planned_at` (the snapshot it read; `None`: a task that applied no
/// deletes and keeps none of their rules) and applied the delete files `applied` to its
/// `inputs`; `live` are the table's delete files now, `global(spec_id)` whether a spec
/// is unpartitioned. A delete file it applied must still be live (else another writer
/// changed what is deleted). One committed since the plan must not apply to an input,
/// but for an equality delete, which still applies to the outputs (they keep
/// `planned_at`); by position, its rows would come back. Deletes the plan saw and did
/// not apply name none of the inputs' rows.
pub fn unapplied(
    inputs: &[&ScopedFile],
    live: &[LiveDelete],
    applied: &[AppliedDelete],
    planned_at: Option<i64>,
    global: impl Fn(i32) -> bool,
) -> Option<String> {
    match since_plan(inputs, live, applied, planned_at, global) {
        Err(reason) => Some(reason),
        Ok(new) => new.first().map(|(delete, input)| {
            format!("the delete file {} committed since the plan may delete rows of its input {input}", delete.path())
        }),
    }
}

/// [`unapplied`], told apart: `Err` when the compaction cannot commit (a delete file it
/// applied is gone), else the position deletes and deletion vectors committed since the
/// plan that may delete rows of its inputs (each with one such input), which
/// [`carry::carry`] may carry onto its outputs.
pub fn since_plan<'a>(
    inputs: &[&ScopedFile],
    live: &'a [LiveDelete],
    applied: &[AppliedDelete],
    planned_at: Option<i64>,
    global: impl Fn(i32) -> bool,
) -> std::result::Result<Vec<(&'a LiveDelete, String)>, String> {
    // A deletion vector it applied that is gone was replaced: a data file has one vector,
    // merged into the next (an upsert's commit); the new one, committed since the plan,
    // is carried like any delete since then.
    let gone = |a: &&AppliedDelete| !is_vector_key(&a.path) && !live.iter().any(|d| d.path() == a.path);
    if let Some(gone) = applied.iter().find(gone) {
        return Err(format!("the delete file {} it applied is no longer live", gone.path));
    }
    let new = |d: &&LiveDelete| planned_at.is_none_or(|s| d.sequence_number > s);
    let mut found = Vec::new();
    for delete in live.iter().filter(new) {
        let carried = planned_at.is_some() && delete.file.content_type() == DataContentType::EqualityDeletes;
        if carried || applied.iter().any(|a| a.path == delete.path()) {
            continue;
        }
        if let Some(input) = inputs.iter().find(|f| applies(delete, f, global(delete.spec_id))) {
            found.push((delete, input.path().to_string()));
        }
    }
    Ok(found)
}

/// Where the rows a position delete file or deletion vector deletes come from: read
/// from it ([`ReadDeletes`]), or a cache of those read before (a delete file never
/// changes once written: [`crate::delta::cache::MirrorCache`]).
#[async_trait::async_trait]
pub trait DeleteSource: Send + Sync {
    /// The rows `delete` deletes, per data file it names.
    async fn rows_named(&self, file_io: &FileIO, delete: &LiveDelete) -> Result<Arc<HashMap<String, Vec<i64>>>>;
}

/// Each delete file read from its file.
pub struct ReadDeletes;

#[async_trait::async_trait]
impl DeleteSource for ReadDeletes {
    async fn rows_named(&self, file_io: &FileIO, delete: &LiveDelete) -> Result<Arc<HashMap<String, Vec<i64>>>> {
        Ok(Arc::new(rows_named(file_io, delete).await?))
    }
}

/// The rows a position delete file or deletion vector deletes, per data file it names.
pub async fn rows_named(file_io: &FileIO, delete: &LiveDelete) -> Result<HashMap<String, Vec<i64>>> {
    if delete.is_vector() {
        read::vector(file_io, &delete.file).await
    } else {
        read::positions(file_io, &delete.file).await
    }
}

/// The delete files of `applied` (live ones, of `live`) that apply to none of
/// `remaining` (the table's live data files once a compaction's inputs are gone; its
/// outputs keep a sequence number no delete it applied reaches): to remove with it.
pub fn droppable(
    applied: &[AppliedDelete],
    live: &[LiveDelete],
    remaining: &[&ScopedFile],
    global: impl Fn(i32) -> bool,
) -> Vec<String> {
    let mut drop = Vec::new();
    for a in applied {
        let Some(delete) = live.iter().find(|d| d.path() == a.path) else { continue };
        let still = match delete.file.content_type() {
            DataContentType::EqualityDeletes => remaining.iter().any(|f| applies(delete, f, global(delete.spec_id))),
            _ => remaining
                .iter()
                .any(|f| f.sequence_number <= delete.sequence_number && a.names.iter().any(|n| n == f.path())),
        };
        if !still {
            drop.push(a.path.clone());
        }
    }
    drop.sort();
    drop.dedup();
    drop
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{DataFileBuilder, DataFileFormat, Datum, Literal, Struct};

    use super::*;

    fn data(path: &str, day: i32, seq: i64, spec_id: i32) -> ScopedFile {
        let file = DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(format!("memory:///t/data/{path}.parquet"))
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::from_iter([Some(Literal::date(day))]))
            .record_count(10)
            .file_size_in_bytes(100)
            .build()
            .unwrap();
        ScopedFile { live: LiveFile { file, added_at_ms: 0 }, sequence_number: seq, spec_id, added_by: 0 }
    }

    fn delete(content: DataContentType, day: Option<i32>, seq: i64, names: Option<&str>, dv: bool) -> LiveDelete {
        let path = names.map(|n| format!("memory:///t/data/{n}.parquet"));
        let mut builder = DataFileBuilder::default();
        builder
            .content(content)
            .file_path(format!("memory:///t/data/delete-{seq}.parquet"))
            .file_format(if dv { DataFileFormat::Puffin } else { DataFileFormat::Parquet })
            .partition(day.map_or_else(Struct::empty, |d| Struct::from_iter([Some(Literal::date(d))])))
            .record_count(1)
            .file_size_in_bytes(10);
        match (&path, dv) {
            (Some(p), true) => {
                builder.referenced_data_file(Some(p.clone()));
            }
            (Some(p), false) => {
                builder
                    .lower_bounds(HashMap::from([(DELETE_FILE_PATH_ID, Datum::string(p))]))
                    .upper_bounds(HashMap::from([(DELETE_FILE_PATH_ID, Datum::string(p))]));
            }
            _ => {}
        }
        if content == DataContentType::EqualityDeletes {
            builder.equality_ids(Some(vec![3]));
        }
        LiveDelete::new(builder.build().unwrap(), seq, if day.is_some() { 1 } else { 0 })
    }

    /// Which of a, b (day 1, seq 1 and 3), c (day 2, seq 1) and d (day 1, seq 1, spec 2)
    /// the deletes may apply to.
    fn applies(deletes: &[LiveDelete]) -> Vec<&'static str> {
        let files = [
            ("a", data("a", 1, 1, 1)),
            ("b", data("b", 1, 3, 1)),
            ("c", data("c", 2, 1, 1)),
            ("d", data("d", 1, 1, 2)),
        ];
        let any = |f: &ScopedFile| deletes.iter().any(|d| super::applies(d, f, d.spec_id == 0));
        files.iter().filter(|(_, f)| any(f)).map(|(n, _)| *n).collect()
    }

    #[test]
    fn position_deletes_apply_to_older_or_equal_files_of_their_partition() {
        use DataContentType::PositionDeletes as P;
        assert_eq!(applies(&[]), Vec::<&str>::new());
        assert_eq!(applies(&[delete(P, Some(1), 2, None, false)]), ["a"]);
        assert_eq!(applies(&[delete(P, Some(1), 3, None, false)]), ["a", "b"], "equal sequence numbers too");
        assert_eq!(applies(&[delete(P, Some(2), 5, None, false)]), ["c"]);
        // Naming one file (by its path bounds, or a deletion vector's referenced file).
        assert_eq!(applies(&[delete(P, Some(1), 5, Some("b"), false)]), ["b"]);
        assert_eq!(applies(&[delete(P, Some(1), 5, Some("d"), true)]), ["d"]);
        assert_eq!(applies(&[delete(P, Some(1), 2, Some("b"), true)]), Vec::<&str>::new(), "b is newer");
    }

    #[test]
    fn equality_deletes_apply_to_strictly_older_files_of_their_partition_or_all() {
        use DataContentType::EqualityDeletes as E;
        assert_eq!(applies(&[delete(E, Some(1), 1, None, false)]), Vec::<&str>::new(), "same sequence number");
        assert_eq!(applies(&[delete(E, Some(1), 2, None, false)]), ["a"]);
        assert_eq!(applies(&[delete(E, Some(1), 4, None, false)]), ["a", "b"]);
        // Unpartitioned: global, every spec and partition.
        assert_eq!(applies(&[delete(E, None, 2, None, false)]), ["a", "c", "d"]);
    }

    fn applied(delete: &LiveDelete, names: &[&str]) -> AppliedDelete {
        let names = names.iter().map(|n| format!("memory:///t/data/{n}.parquet")).collect();
        AppliedDelete { path: delete.path().to_string(), names }
    }

    #[test]
    fn a_compaction_is_refused_a_position_delete_since_its_plan_but_not_an_equality_delete() {
        use DataContentType::{EqualityDeletes as E, PositionDeletes as P};
        let (a, b) = (data("a", 1, 1, 1), data("b", 1, 3, 1));
        let inputs = [&a, &b];
        let global = |id: i32| id == 0;
        let seen = delete(P, Some(1), 2, Some("a"), false);
        let done = [applied(&seen, &["a"])];
        // Planned at 3: the delete it applied is live, nothing since.
        assert_eq!(unapplied(&inputs, std::slice::from_ref(&seen), &done, Some(3), global), None);
        // A position delete of a partition-wide scope since the plan: refused.
        let since = delete(P, Some(1), 4, None, false);
        let refused = unapplied(&inputs, &[seen.clone(), since.clone()], &done, Some(3), global).unwrap();
        assert!(refused.contains("delete-4") && refused.contains("committed since the plan"), "{refused}");
        // One of another partition, or an equality delete (it applies to the outputs): taken.
        let elsewhere = delete(P, Some(2), 4, None, false);
        let equality = delete(E, Some(1), 4, None, false);
        assert_eq!(unapplied(&inputs, &[seen.clone(), elsewhere, equality.clone()], &done, Some(3), global), None);
        // A task of before (no sequence number kept): any delete that applies refuses it.
        assert!(unapplied(&inputs, std::slice::from_ref(&equality), &[], None, global).is_some());
        // The delete it applied is gone (another writer rewrote or removed it).
        let gone = unapplied(&inputs, &[], &done, Some(3), global).unwrap();
        assert!(gone.contains("no longer live"), "{gone}");
    }

    #[test]
    fn applied_delete_files_go_once_they_apply_to_no_data_file_left() {
        use DataContentType::{EqualityDeletes as E, PositionDeletes as P};
        let global = |id: i32| id == 0;
        let position = delete(P, Some(1), 5, None, false);
        let equality = delete(E, Some(1), 2, None, false);
        let live = [position.clone(), equality.clone()];
        let done = [applied(&position, &["a", "b"]), applied(&equality, &[])];
        let (a, b, c) = (data("a", 1, 1, 1), data("b", 1, 3, 1), data("c", 2, 1, 1));
        // Nothing left they apply to: both go.
        assert_eq!(droppable(&done, &live, &[&c], global), [equality.path(), position.path()]);
        // "a" left (seq 1): the position delete names it, the equality delete (seq 2) applies.
        assert_eq!(droppable(&done, &live, &[&a], global), Vec::<String>::new());
        // "b" left (seq 3): named by the position delete, newer than the equality delete.
        assert_eq!(droppable(&done, &live, &[&b], global), [equality.path()]);
        // A delete another writer removed already is not removed again.
        assert_eq!(droppable(&done, &live[..1], &[&c], global), [position.path()]);
    }

    /// A deletion vector of `names` at `offset` of the Puffin file `puffin`.
    fn vector(puffin: &str, offset: i64, names: &str) -> LiveDelete {
        let file = DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path(format!("memory:///t/data/{puffin}.puffin"))
            .file_format(DataFileFormat::Puffin)
            .partition(Struct::empty())
            .record_count(1)
            .file_size_in_bytes(100)
            .referenced_data_file(Some(format!("memory:///t/data/{names}.parquet")))
            .content_offset(Some(offset))
            .content_size_in_bytes(Some(20))
            .build()
            .unwrap();
        LiveDelete::new(file, 4, 0)
    }

    #[test]
    fn the_vectors_of_one_puffin_file_are_told_apart_and_each_goes_with_its_data_file() {
        let (of_a, of_b) = (vector("dv", 4, "a"), vector("dv", 24, "b"));
        assert_eq!((of_a.path(), of_b.path()), ("memory:///t/data/dv.puffin#4", "memory:///t/data/dv.puffin#24"));
        let live = [of_a.clone(), of_b.clone()];
        let done = [applied(&of_a, &["a"])];
        let (b, c) = (data("b", 1, 1, 0), data("c", 1, 1, 0));
        // "a" rewritten, "b" still live: only a's vector goes, the file's other blob stays.
        assert_eq!(droppable(&done, &live, &[&b, &c], |_| true), [of_a.path()]);
        // b's vector, not applied by the compaction of "b", refuses it; a's does not.
        assert!(unapplied(&[&b], &live, &done, Some(3), |_| true).unwrap().contains("dv.puffin#24"));
        assert_eq!(unapplied(&[&c], &live, &done, Some(3), |_| true), None);
    }

    #[test]
    fn a_vector_applied_then_replaced_since_the_plan_is_carried_a_delete_file_gone_is_not() {
        let a = data("a", 1, 1, 0);
        let (earlier, replacement) = (vector("dv1", 4, "a"), vector("dv2", 4, "a"));
        let done = [applied(&earlier, &["a"])];
        // The vector it applied was merged into a new one (seq 4, after the plan at 3):
        // that one is what is new since the plan, to carry onto the outputs.
        let new = since_plan(&[&a], std::slice::from_ref(&replacement), &done, Some(3), |_| true).unwrap();
        assert_eq!(
            new.iter().map(|(d, input)| (d.path(), input.as_str())).collect::<Vec<_>>(),
            [(replacement.path(), a.path())]
        );
        // A position delete file it applied, gone: refused, as before.
        let file = delete(DataContentType::PositionDeletes, Some(1), 2, Some("a"), false);
        let gone = since_plan(&[&a], &[], &[applied(&file, &["a"])], Some(3), |_| true).unwrap_err();
        assert!(gone.contains("no longer live"), "{gone}");
        assert!(is_vector_key(earlier.path()) && !is_vector_key(file.path()));
    }
}
