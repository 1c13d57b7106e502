//! Where superseded rows are: the (data file, position) of each offset an upsert
//! supersedes, among the table's live data files.
//!
//! A file is a candidate when its `_kafka.partition` and `_kafka.offset` bounds may hold
//! one of the offsets; its two columns are read once per process and kept (cache.rs: a
//! data file never changes). Most files Floe writes hold one Kafka partition's offsets
//! one after the other, row by row: such a file is kept as its first offset and length
//! (a row's position is its offset less the first), others as their rows.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use iceberg::Result;
use iceberg::io::FileIO;
use iceberg::spec::{Datum, PrimitiveLiteral};

use super::cache;
use crate::table::deletes::ScopedFile;
use crate::table::deletes::read::kafka_rows;
use crate::table::deletes::write::Doomed;

/// A data file's `(_kafka.partition, _kafka.offset)` by row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileRows {
    /// Row `i` is offset `first + i` of `partition`.
    Consecutive { partition: i32, first: i64, len: usize },
    /// Any other file, row by row (`None` where either is null).
    Listed(Vec<Option<(i32, i64)>>),
}

impl FileRows {
    pub fn of(rows: Vec<Option<(i32, i64)>>) -> FileRows {
        let consecutive = match rows.first() {
            Some(Some((partition, first))) => rows
                .iter()
                .enumerate()
                .all(|(i, r)| *r == Some((*partition, first + i as i64)))
                .then_some((*partition, *first)),
            _ => None,
        };
        match consecutive {
            Some((partition, first)) => FileRows::Consecutive { partition, first, len: rows.len() },
            None => FileRows::Listed(rows),
        }
    }

    pub fn weight(&self) -> usize {
        match self {
            FileRows::Consecutive { .. } => 0,
            FileRows::Listed(rows) => rows.len() * size_of::<Option<(i32, i64)>>(),
        }
    }

    /// The positions of the rows whose offsets `wanted` holds (per partition, sorted).
    pub fn positions(&self, wanted: &BTreeMap<i32, Vec<i64>>) -> Vec<i64> {
        match self {
            FileRows::Consecutive { partition, first, len } => {
                let Some(offsets) = wanted.get(partition) else { return Vec::new() };
                let last = first + *len as i64 - 1;
                let (from, to) = (offsets.partition_point(|o| o < first), offsets.partition_point(|o| *o <= last));
                offsets[from..to].iter().map(|o| o - first).collect()
            }
            FileRows::Listed(rows) => {
                let wanted = |row: &Option<(i32, i64)>| {
                    row.is_some_and(|(p, o)| wanted.get(&p).is_some_and(|w| w.binary_search(&o).is_ok()))
                };
                rows.iter().enumerate().filter(|(_, r)| wanted(r)).map(|(i, _)| i as i64).collect()
            }
        }
    }
}

/// The rows of data file `path`: kept, or its two columns read (and kept).
async fn file_rows(file_io: &FileIO, path: &str, partition_id: i32, offset_id: i32) -> Result<Arc<FileRows>> {
    if let Some(rows) = cache::rows(path) {
        return Ok(rows);
    }
    let rows = Arc::new(FileRows::of(kafka_rows(file_io, path, partition_id, offset_id).await?));
    cache::keep_rows(path.to_string(), rows.clone());
    Ok(rows)
}

/// The rows of `offsets` (per Kafka partition) among the table's live data files
/// `files`; `(partition_id, offset_id)`: the field ids of `_kafka.partition` and
/// `_kafka.offset`. An offset found nowhere is a row already gone (retention, another
/// engine's delete applied by compaction): nothing to delete.
pub async fn locate(
    file_io: &FileIO,
    files: &[ScopedFile],
    (partition_id, offset_id): (i32, i32),
    mut offsets: BTreeMap<i32, Vec<i64>>,
) -> Result<Vec<Doomed>> {
    if offsets.is_empty() {
        return Ok(Vec::new());
    }
    for o in offsets.values_mut() {
        o.sort_unstable();
    }
    let mut doomed = Vec::new();
    for scoped in files {
        let file = &scoped.live.file;
        let int_bound = |bounds: &HashMap<i32, Datum>, id: i32| match bounds.get(&id).map(|d| d.literal()) {
            Some(PrimitiveLiteral::Int(v)) => Some(i64::from(*v)),
            Some(PrimitiveLiteral::Long(v)) => Some(*v),
            _ => None,
        };
        let may_hold = |partition: i32, wanted: &[i64]| {
            let p = (int_bound(file.lower_bounds(), partition_id), int_bound(file.upper_bounds(), partition_id));
            let o = (int_bound(file.lower_bounds(), offset_id), int_bound(file.upper_bounds(), offset_id));
            let partition_in = p.0.is_none_or(|l| l <= partition.into()) && p.1.is_none_or(|u| partition as i64 <= u);
            let (low, high) = (o.0.unwrap_or(i64::MIN), o.1.unwrap_or(i64::MAX));
            let first = wanted.partition_point(|&x| x < low);
            partition_in && wanted.get(first).is_some_and(|&x| x <= high)
        };
        if !offsets.iter().any(|(&p, wanted)| may_hold(p, wanted)) {
            continue;
        }
        let path = file.file_path();
        let positions = file_rows(file_io, path, partition_id, offset_id).await?.positions(&offsets);
        if !positions.is_empty() {
            doomed.push(Doomed {
                path: path.to_string(),
                spec_id: scoped.spec_id,
                partition: file.partition().clone(),
                positions,
            });
        }
    }
    Ok(doomed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted(pairs: &[(i32, &[i64])]) -> BTreeMap<i32, Vec<i64>> {
        pairs.iter().map(|(p, o)| (*p, o.to_vec())).collect()
    }

    #[test]
    fn a_file_of_consecutive_offsets_is_its_first_and_length_and_others_are_listed() {
        let consecutive = FileRows::of((0..5).map(|i| Some((3, 100 + i))).collect());
        assert_eq!(consecutive, FileRows::Consecutive { partition: 3, first: 100, len: 5 });
        assert_eq!(consecutive.weight(), 0);
        let w = wanted(&[(3, &[50, 100, 102, 104, 105]), (4, &[101])]);
        assert_eq!(consecutive.positions(&w), [0, 2, 4]);
        assert!(consecutive.positions(&wanted(&[(4, &[100])])).is_empty(), "another partition's offsets");

        // A gap (a transaction's marker), another partition, a null, an order reversed:
        // row by row.
        for rows in [
            vec![Some((3, 100)), Some((3, 102))],
            vec![Some((3, 100)), Some((4, 101))],
            vec![Some((3, 100)), None],
            vec![Some((3, 101)), Some((3, 100))],
        ] {
            let file = FileRows::of(rows.clone());
            assert_eq!(file, FileRows::Listed(rows), "not consecutive");
            assert!(file.weight() > 0);
        }
        let listed = FileRows::of(vec![Some((3, 101)), Some((3, 100)), None, Some((4, 100))]);
        assert_eq!(listed.positions(&wanted(&[(3, &[100]), (4, &[100])])), [1, 3]);
        assert_eq!(FileRows::of(Vec::new()), FileRows::Listed(Vec::new()));
    }
}
