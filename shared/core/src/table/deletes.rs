//! Other engines' row-level deletes, and the data files they may apply to.
//!
//! Athena, Trino, Spark and Flink delete rows without rewriting data files: they add
//! delete files (merge-on-read) that readers apply to the data files at read time —
//! position deletes (`file_path`, `pos`), equality deletes (rows equal on some columns)
//! and, in format v3, deletion vectors (a bitmap in a Puffin file naming its data file in
//! `referenced_data_file`). A data file rewritten without them would bring its deleted
//! rows back (position deletes name the old path; equality deletes apply only to data
//! files older than themselves). So compaction leaves alone every data file a live
//! delete file may apply to ([`DeleteIndex::may_apply`]), by Iceberg's scoping rules:
//!
//! - a position delete file or deletion vector: data files of its partition spec and
//!   partition value whose data sequence number is at most its own; only the file it
//!   names when it names one (`referenced_data_file`, or `file_path` bounds on one path);
//! - an equality delete file: data files of its spec and partition value whose data
//!   sequence number is strictly lower; of every spec and partition when its own spec is
//!   unpartitioned (a global delete).
//!
//! The delete files themselves are never read as data: every listing of live data files
//! ([`crate::table::snapshot::live_data_files`]) takes data entries only, and snapshots
//! Floe writes carry delete manifests forward as they are.

use std::collections::HashMap;

use iceberg::Result;
use iceberg::io::FileIO;
use iceberg::spec::{DataContentType, DataFile, ManifestContentType, PrimitiveLiteral, TableMetadata};

use super::snapshot::{LiveFile, current_manifests};

/// Field id of the `file_path` column of position delete files (Iceberg's reserved id).
const DELETE_FILE_PATH_ID: i32 = 2_147_483_546;

/// A live data file with what delete scoping needs: its data sequence number and spec.
#[derive(Debug, Clone)]
pub struct ScopedFile {
    pub live: LiveFile,
    pub sequence_number: i64,
    pub spec_id: i32,
}

/// A live delete file of the current snapshot.
#[derive(Debug, Clone)]
pub struct LiveDelete {
    pub file: DataFile,
    pub sequence_number: i64,
    pub spec_id: i32,
}

impl LiveDelete {
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

/// The current snapshot's live data files (data entries only: never a delete file) with
/// their sequence numbers and specs, and its live delete files.
pub async fn live_files(file_io: &FileIO, metadata: &TableMetadata) -> Result<(Vec<ScopedFile>, Vec<LiveDelete>)> {
    let oldest = metadata.snapshots().map(|s| s.timestamp_ms()).min().unwrap_or(0);
    let (mut data, mut deletes) = (Vec::new(), Vec::new());
    for manifest in current_manifests(file_io, metadata).await? {
        for entry in manifest.load_manifest(file_io).await?.entries().iter().filter(|e| e.is_alive()) {
            let sequence_number = entry.sequence_number().unwrap_or(manifest.sequence_number);
            let spec_id = manifest.partition_spec_id;
            let file = entry.data_file().clone();
            if manifest.content == ManifestContentType::Deletes || file.content_type() != DataContentType::Data {
                deletes.push(LiveDelete { file, sequence_number, spec_id });
                continue;
            }
            let snapshot_id = entry.snapshot_id().unwrap_or(manifest.added_snapshot_id);
            let added_at_ms = metadata.snapshot_by_id(snapshot_id).map_or(oldest, |s| s.timestamp_ms());
            data.push(ScopedFile { live: LiveFile { file, added_at_ms }, sequence_number, spec_id });
        }
    }
    Ok((data, deletes))
}

/// The live delete files, indexed for [`Self::may_apply`].
#[derive(Debug, Default)]
pub struct DeleteIndex {
    /// Data file path → the highest sequence number of a delete naming it.
    by_path: HashMap<String, i64>,
    /// (spec id, partition value) → the highest sequence numbers of its position deletes
    /// and its equality deletes.
    by_partition: HashMap<(i32, String), (Option<i64>, Option<i64>)>,
    /// The highest sequence number of a global equality delete (unpartitioned spec).
    global_equality: Option<i64>,
}

fn partition_key(spec_id: i32, file: &DataFile) -> (i32, String) {
    (spec_id, format!("{:?}", file.partition()))
}

impl DeleteIndex {
    /// `deletes` indexed; `unpartitioned(spec_id)` says whether a spec has no fields.
    pub fn new(deletes: &[LiveDelete], unpartitioned: impl Fn(i32) -> bool) -> DeleteIndex {
        let mut index = DeleteIndex::default();
        let max = |slot: &mut Option<i64>, seq: i64| *slot = Some(slot.map_or(seq, |s| s.max(seq)));
        for delete in deletes {
            let seq = delete.sequence_number;
            if let Some(path) = delete.referenced() {
                let slot = index.by_path.entry(path).or_insert(seq);
                *slot = (*slot).max(seq);
                continue;
            }
            match delete.file.content_type() {
                DataContentType::EqualityDeletes if unpartitioned(delete.spec_id) => {
                    max(&mut index.global_equality, seq)
                }
                DataContentType::EqualityDeletes => {
                    max(&mut index.by_partition.entry(partition_key(delete.spec_id, &delete.file)).or_default().1, seq)
                }
                _ => {
                    max(&mut index.by_partition.entry(partition_key(delete.spec_id, &delete.file)).or_default().0, seq)
                }
            }
        }
        index
    }

    pub fn is_empty(&self) -> bool {
        self.by_path.is_empty() && self.by_partition.is_empty() && self.global_equality.is_none()
    }

    /// Whether a live delete file may apply to `data`: such a file must not be rewritten.
    pub fn may_apply(&self, data: &ScopedFile) -> bool {
        let seq = data.sequence_number;
        let position = |delete: Option<i64>| delete.is_some_and(|d| seq <= d);
        let equality = |delete: Option<i64>| delete.is_some_and(|d| seq < d);
        if position(self.by_path.get(data.live.file.file_path()).copied()) || equality(self.global_equality) {
            return true;
        }
        self.by_partition
            .get(&partition_key(data.spec_id, &data.live.file))
            .is_some_and(|&(pos, eq)| position(pos) || equality(eq))
    }
}

/// The current snapshot's live data files that no live delete file may apply to: those
/// compaction may rewrite. Returns them and how many were left alone.
pub async fn rewritable_files(file_io: &FileIO, metadata: &TableMetadata) -> Result<(Vec<LiveFile>, usize)> {
    let (data, deletes) = live_files(file_io, metadata).await?;
    let unpartitioned = |id: i32| metadata.partition_spec_by_id(id).is_none_or(|s| s.fields().is_empty());
    let index = DeleteIndex::new(&deletes, unpartitioned);
    let total = data.len();
    let files: Vec<LiveFile> = data.into_iter().filter(|f| !index.may_apply(f)).map(|f| f.live).collect();
    let left = total - files.len();
    Ok((files, left))
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
        ScopedFile { live: LiveFile { file, added_at_ms: 0 }, sequence_number: seq, spec_id }
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
        LiveDelete { file: builder.build().unwrap(), sequence_number: seq, spec_id: if day.is_some() { 1 } else { 0 } }
    }

    /// Which of a, b (day 1, seq 1 and 3), c (day 2, seq 1) and d (day 1, seq 1, spec 2)
    /// the deletes may apply to.
    fn applies(deletes: &[LiveDelete]) -> Vec<&'static str> {
        let index = DeleteIndex::new(deletes, |id| id == 0);
        let files = [
            ("a", data("a", 1, 1, 1)),
            ("b", data("b", 1, 3, 1)),
            ("c", data("c", 2, 1, 1)),
            ("d", data("d", 1, 1, 2)),
        ];
        files.iter().filter(|(_, f)| index.may_apply(f)).map(|(n, _)| *n).collect()
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
}
