//! The Kafka offsets whose rows compaction left out — deleted by another engine's delete
//! file it applied ([`crate::table::deletes`]), or past the topic's retention
//! ([`crate::table::retention`]) — for `floe audit` to explain those gaps once the rows
//! and the delete files are gone.
//!
//! They are kept in a Parquet file (rows: Kafka partition, reason, first and last offset
//! of a run), not in the table state's JSON: scattered deletes leave one run per row, and
//! the state is read by every commit. A compaction's task names a file of its own rewrite;
//! the committer folds it into the table's, whose location the table state keeps
//! (`left_out`): written only by compactions that left rows out, carried by every other
//! commit unread, kept by the orphan sweep while a retained snapshot's state names it.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int8Type, Int32Type, Int64Type};
use arrow_array::{Int8Array, Int32Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;
use iceberg::io::FileIO;
use iceberg::{Error, ErrorKind, Result};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use super::offsets::RangeSet;

const DELETED: i8 = 0;
const EXPIRED: i8 = 1;

/// Offsets left out, per Kafka partition and reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeftOut {
    pub deleted: BTreeMap<i32, RangeSet>,
    pub expired: BTreeMap<i32, RangeSet>,
}

/// The set of `offsets` (in any order, repeated or not), built in one sort.
pub fn range_set(mut offsets: Vec<i64>) -> RangeSet {
    offsets.sort_unstable();
    offsets.dedup();
    let mut ranges: Vec<(i64, i64)> = Vec::new();
    for o in offsets {
        match ranges.last_mut() {
            Some(last) if last.1 + 1 == o => last.1 = o,
            _ => ranges.push((o, o)),
        }
    }
    RangeSet::from_ranges(ranges)
}

fn invalid(path: &str, detail: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::DataInvalid, format!("offsets left out {path}: {detail}"))
}

impl LeftOut {
    pub fn is_empty(&self) -> bool {
        self.deleted.values().all(RangeSet::is_empty) && self.expired.values().all(RangeSet::is_empty)
    }

    /// How many offsets were deleted, and how many expired.
    pub fn counts(&self) -> (u64, u64) {
        let count = |sets: &BTreeMap<i32, RangeSet>| sets.values().map(RangeSet::count).sum();
        (count(&self.deleted), count(&self.expired))
    }

    /// Adds `other`'s offsets.
    pub fn add(&mut self, other: &LeftOut) {
        for (mine, theirs) in [(&mut self.deleted, &other.deleted), (&mut self.expired, &other.expired)] {
            for (partition, set) in theirs {
                let merged = mine.get(partition).map_or_else(|| set.clone(), |m| m.union(set));
                mine.insert(*partition, merged);
            }
        }
    }

    /// The deleted and the expired offsets of `partition`.
    pub fn of(&self, partition: i32) -> (RangeSet, RangeSet) {
        let get = |sets: &BTreeMap<i32, RangeSet>| sets.get(&partition).cloned().unwrap_or_default();
        (get(&self.deleted), get(&self.expired))
    }

    /// Reads the file at `path`.
    pub async fn read(file_io: &FileIO, path: &str) -> Result<LeftOut> {
        let bytes = file_io.new_input(path)?.read().await?;
        let reader =
            ParquetRecordBatchReaderBuilder::try_new(bytes).and_then(|b| b.build()).map_err(|e| invalid(path, e))?;
        let mut runs: BTreeMap<(i8, i32), Vec<(i64, i64)>> = BTreeMap::new();
        for batch in reader {
            let batch = batch.map_err(|e| invalid(path, e))?;
            let column = |i: usize| batch.column(i).clone();
            let (partitions, reasons) = (column(0), column(1));
            let (partitions, reasons) = (partitions.as_primitive::<Int32Type>(), reasons.as_primitive::<Int8Type>());
            let (firsts, lasts) = (column(2), column(3));
            let (firsts, lasts) = (firsts.as_primitive::<Int64Type>(), lasts.as_primitive::<Int64Type>());
            for i in 0..batch.num_rows() {
                let run = (firsts.value(i), lasts.value(i));
                runs.entry((reasons.value(i), partitions.value(i))).or_default().push(run);
            }
        }
        let mut left_out = LeftOut::default();
        for ((reason, partition), ranges) in runs {
            let sets = match reason {
                DELETED => &mut left_out.deleted,
                EXPIRED => &mut left_out.expired,
                other => return Err(invalid(path, format!("unknown reason {other}"))),
            };
            sets.insert(partition, RangeSet::from_ranges(ranges));
        }
        Ok(left_out)
    }

    /// Writes it as `<dir>/floe-left-out-<uuid>.parquet`; returns the location.
    pub async fn write(&self, file_io: &FileIO, dir: &str) -> Result<String> {
        let location = format!("{dir}/floe-left-out-{}.parquet", uuid::Uuid::new_v4());
        let (mut partitions, mut reasons, mut firsts, mut lasts) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (reason, sets) in [(DELETED, &self.deleted), (EXPIRED, &self.expired)] {
            for (partition, set) in sets {
                for &(first, last) in set.ranges() {
                    partitions.push(*partition);
                    reasons.push(reason);
                    firsts.push(first);
                    lasts.push(last);
                }
            }
        }
        let schema = Arc::new(Schema::new(vec![
            Field::new("partition", DataType::Int32, false),
            Field::new("reason", DataType::Int8, false),
            Field::new("first", DataType::Int64, false),
            Field::new("last", DataType::Int64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int32Array::from(partitions)),
                Arc::new(Int8Array::from(reasons)),
                Arc::new(Int64Array::from(firsts)),
                Arc::new(Int64Array::from(lasts)),
            ],
        )
        .map_err(|e| invalid(&location, e))?;
        let zstd = ZstdLevel::try_new(3).map_err(|e| invalid(&location, e))?;
        let properties = WriterProperties::builder().set_compression(Compression::ZSTD(zstd)).build();
        let mut bytes = Vec::new();
        let mut writer =
            ArrowWriter::try_new(&mut bytes, schema, Some(properties)).map_err(|e| invalid(&location, e))?;
        writer.write(&batch).map_err(|e| invalid(&location, e))?;
        writer.close().map_err(|e| invalid(&location, e))?;
        file_io.new_output(&location)?.write(Bytes::from(bytes)).await?;
        Ok(location)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn offsets_left_out_survive_a_write_and_a_read_and_add_up() {
        let dir = tempfile::tempdir().unwrap();
        let file_io = crate::storage::local_file_io();
        let mut left_out = LeftOut::default();
        left_out.deleted.insert(0, range_set(vec![9, 5, 300, 301, 5]));
        left_out.expired.insert(1, range_set((0..1000).collect()));
        assert_eq!(left_out.deleted[&0].ranges(), [(5, 5), (9, 9), (300, 301)]);
        let path = left_out.write(&file_io, &dir.path().display().to_string()).await.unwrap();
        let read = LeftOut::read(&file_io, &path).await.unwrap();
        assert_eq!(read, left_out);
        assert_eq!(read.counts(), (4, 1000));
        let mut more = LeftOut::default();
        more.deleted.insert(0, range_set(vec![6, 7, 8]));
        more.deleted.insert(2, range_set(vec![1]));
        let mut all = read.clone();
        all.add(&more);
        assert_eq!(all.of(0).0.ranges(), [(5, 9), (300, 301)]);
        assert_eq!((all.of(2).0.count(), all.of(1).1.count()), (1, 1000));
        assert!(LeftOut::default().is_empty() && !all.is_empty());
    }
}
