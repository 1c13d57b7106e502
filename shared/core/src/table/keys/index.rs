//! The key index as files: a root (JSON) that the snapshot summary names
//! (`floe.keys`), listing bucket files (Parquet), each holding one Kafka partition's
//! entries whose key hashes fall in its range, ordered by hash and key.
//!
//! ```text
//!  snapshot summary floe.keys ─▶ metadata/floe-keys-<uuid>.json
//!     {"version": 1, "key": ["_kafka.key"],
//!      "buckets": [{"partition": 0, "low": 0, "high": 4294967295,
//!                   "path": ".../metadata/floe-keys-<uuid>-0-00000000.parquet",
//!                   "keys": 1000, "tombstones": 3}, …]}
//!     bucket file: hash (uint32), key (binary), offset (int64), tombstone (boolean)
//! ```
//!
//! A commit reads only the buckets its rows fall in and writes those anew (new names:
//! a file a snapshot names is never written twice); the others are carried by path. A
//! bucket past [`MAX_BUCKET_KEYS`] is split in two halves of its hash range, so memory
//! holds one bucket at a time however large the table grows.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt32Type};
use arrow_array::{BinaryArray, BooleanArray, Int64Array, RecordBatch, UInt32Array};
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;
use futures::TryStreamExt;
use iceberg::arrow::ArrowFileReader;
use iceberg::io::FileIO;
use iceberg::{Error, ErrorKind, Result};
use parquet::arrow::{ArrowWriter, ParquetRecordBatchStreamBuilder};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use serde::{Deserialize, Serialize};

use super::resolve::Entry;

/// The snapshot summary key naming the index root.
pub const KEYS_KEY: &str = "floe.keys";
/// A bucket holding more entries is split.
pub const MAX_BUCKET_KEYS: usize = 1 << 20;
const ROOT_VERSION: u32 = 1;
/// Entries decoded at a time when a bucket is read.
const READ_BATCH: usize = 1 << 16;

fn invalid(path: &str, detail: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::DataInvalid, format!("key index {path}: {detail}"))
}

/// The index root: the key it indexes, and its buckets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexRoot {
    pub version: u32,
    /// The key's columns (dotted paths).
    pub key: Vec<String>,
    /// Ordered by partition and hash range; a partition's ranges cover the whole space.
    pub buckets: Vec<Bucket>,
    /// The topic's id (its incarnation) whose offsets each partition's entries are, where
    /// segments carry one: a topic deleted and created again restarts its offsets, which
    /// an index of offsets cannot tell from the old ones.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub topic_ids: BTreeMap<i32, String>,
}

/// One bucket file: a Kafka partition's keys whose hash lies in `low..=high`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    pub partition: i32,
    pub low: u32,
    pub high: u32,
    pub path: String,
    /// Entries, and of them tombstones.
    pub keys: u64,
    pub tombstones: u64,
}

impl IndexRoot {
    pub fn new(key: Vec<String>) -> IndexRoot {
        IndexRoot { version: ROOT_VERSION, key, buckets: Vec::new(), topic_ids: BTreeMap::new() }
    }

    pub async fn load(file_io: &FileIO, location: &str) -> Result<IndexRoot> {
        let bytes = file_io.new_input(location)?.read().await?;
        let root: IndexRoot = serde_json::from_slice(&bytes).map_err(|e| invalid(location, e))?;
        if root.version != ROOT_VERSION {
            return Err(invalid(location, format!("version {}, this build reads {ROOT_VERSION}", root.version)));
        }
        Ok(root)
    }

    /// Writes the root into `metadata_dir`; returns its location.
    pub async fn save(&self, file_io: &FileIO, metadata_dir: &str) -> Result<String> {
        let location = format!("{metadata_dir}/floe-keys-{}.json", uuid::Uuid::new_v4());
        let json = serde_json::to_vec(self).map_err(|e| invalid(&location, e))?;
        file_io.new_output(&location)?.write(json.into()).await?;
        Ok(location)
    }

    /// The bucket of `partition` that `hash` falls in (`None`: a partition not indexed yet).
    pub fn bucket(&self, partition: i32, hash: u32) -> Option<&Bucket> {
        self.buckets.iter().find(|b| b.partition == partition && (b.low..=b.high).contains(&hash))
    }

    /// Live keys (entries that are no tombstone).
    pub fn live_keys(&self) -> u64 {
        self.buckets.iter().map(|b| b.keys - b.tombstones).sum()
    }

    /// Replaces the buckets of `partition` within `low..=high` by `new`.
    pub fn replace(&mut self, partition: i32, low: u32, high: u32, new: Vec<Bucket>) {
        self.buckets.retain(|b| !(b.partition == partition && b.low >= low && b.high <= high));
        self.buckets.extend(new);
        self.buckets.sort_by_key(|b| (b.partition, b.low));
    }
}

fn bucket_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("hash", DataType::UInt32, false),
        Field::new("key", DataType::Binary, false),
        Field::new("offset", DataType::Int64, false),
        Field::new("tombstone", DataType::Boolean, false),
    ]))
}

/// The entries of the bucket file at `path`, in its order.
pub async fn read_bucket(file_io: &FileIO, path: &str) -> Result<Vec<Entry>> {
    let input = file_io.new_input(path)?;
    let reader = ArrowFileReader::new(input.metadata().await?, input.reader().await?);
    let stream = ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .and_then(|b| b.with_batch_size(READ_BATCH).build())
        .map_err(|e| invalid(path, e))?;
    let batches: Vec<RecordBatch> = stream.try_collect().await.map_err(|e| invalid(path, e))?;
    let mut entries = Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
    for batch in batches {
        let column = |name: &str| batch.column_by_name(name).ok_or_else(|| invalid(path, format!("no column {name}")));
        let (hash, key, offset, tombstone) = (column("hash")?, column("key")?, column("offset")?, column("tombstone")?);
        let (Some(hash), Some(key), Some(offset), Some(tombstone)) = (
            hash.as_primitive_opt::<UInt32Type>(),
            key.as_binary_opt::<i32>(),
            offset.as_primitive_opt::<Int64Type>(),
            tombstone.as_boolean_opt(),
        ) else {
            return Err(invalid(path, "columns of unexpected types"));
        };
        for row in 0..batch.num_rows() {
            entries.push(Entry {
                hash: hash.value(row),
                key: key.value(row).to_vec(),
                offset: offset.value(row),
                tombstone: tombstone.value(row),
            });
        }
    }
    Ok(entries)
}

/// Writes `entries` (of `partition`, hashes in `low..=high`) as one bucket file, or as
/// several when there are more than [`MAX_BUCKET_KEYS`]: the range halved until each
/// half holds few enough (or is one hash wide). None for no entries.
pub async fn write_buckets(
    file_io: &FileIO,
    metadata_dir: &str,
    partition: i32,
    (low, high): (u32, u32),
    entries: &[Entry],
) -> Result<Vec<Bucket>> {
    let mut ranges = vec![(low, high, entries)];
    let mut buckets = Vec::new();
    while let Some((low, high, entries)) = ranges.pop() {
        if entries.is_empty() {
            continue;
        }
        if entries.len() > MAX_BUCKET_KEYS && low < high {
            let mid = low + (high - low) / 2;
            let split = entries.partition_point(|e| e.hash <= mid);
            ranges.push((mid + 1, high, &entries[split..]));
            ranges.push((low, mid, &entries[..split]));
            continue;
        }
        let path = format!("{metadata_dir}/floe-keys-{}-{partition}-{low:08x}.parquet", uuid::Uuid::new_v4());
        write_bucket(file_io, &path, entries).await?;
        let tombstones = entries.iter().filter(|e| e.tombstone).count() as u64;
        buckets.push(Bucket { partition, low, high, path, keys: entries.len() as u64, tombstones });
    }
    Ok(buckets)
}

async fn write_bucket(file_io: &FileIO, path: &str, entries: &[Entry]) -> Result<()> {
    let schema = bucket_schema();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(UInt32Array::from_iter_values(entries.iter().map(|e| e.hash))),
            Arc::new(BinaryArray::from_iter_values(entries.iter().map(|e| &e.key))),
            Arc::new(Int64Array::from_iter_values(entries.iter().map(|e| e.offset))),
            Arc::new(BooleanArray::from_iter(entries.iter().map(|e| Some(e.tombstone)))),
        ],
    )
    .map_err(|e| invalid(path, e))?;
    let zstd = ZstdLevel::try_new(1).map_err(|e| invalid(path, e))?;
    // Keys are unique and hashes nearly so: a dictionary only costs (tried, then
    // dropped), and the keys' min/max are never used.
    let key = ColumnPath::from("key");
    let properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(zstd))
        .set_dictionary_enabled(false)
        .set_column_statistics_enabled(key, EnabledStatistics::None)
        .build();
    let mut bytes = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut bytes, schema, Some(properties)).map_err(|e| invalid(path, e))?;
    writer.write(&batch).map_err(|e| invalid(path, e))?;
    writer.close().map_err(|e| invalid(path, e))?;
    file_io.new_output(path)?.write(Bytes::from(bytes)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_bucket_survives_a_write_and_a_read_and_a_full_one_splits_by_hash() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().display().to_string();
        let file_io = crate::storage::local_file_io();
        let entries: Vec<Entry> = (0..10u32)
            .map(|i| Entry { hash: i * 400_000_000, key: vec![i as u8], offset: i.into(), tombstone: i % 3 == 0 })
            .collect();
        let buckets = write_buckets(&file_io, &dir, 2, (0, u32::MAX), &entries).await.unwrap();
        assert_eq!(buckets.len(), 1);
        assert_eq!((buckets[0].keys, buckets[0].tombstones), (10, 4));
        assert_eq!(read_bucket(&file_io, &buckets[0].path).await.unwrap(), entries);

        let many: Vec<Entry> = (0..MAX_BUCKET_KEYS as u32 + 2)
            .map(|i| Entry { hash: i.wrapping_mul(2_654_435_761), key: vec![], offset: 0, tombstone: false })
            .collect::<Vec<_>>();
        let mut many = many;
        many.sort_by_key(|e| e.hash);
        let buckets = write_buckets(&file_io, &dir, 0, (0, u32::MAX), &many).await.unwrap();
        assert_eq!(buckets.len(), 2, "split once: each half under the bound");
        let (low, high) = (&buckets[0], &buckets[1]);
        assert_eq!((low.low, low.high + 1, high.high), (0, high.low, u32::MAX));
        assert_eq!(low.keys + high.keys, many.len() as u64);
        let mut root = IndexRoot::new(vec!["_kafka.key".into()]);
        root.replace(0, 0, u32::MAX, buckets.clone());
        assert_eq!(root.bucket(0, u32::MAX).unwrap().path, high.path);
        assert_eq!(root.bucket(0, 5).unwrap().path, low.path);
        assert!(root.bucket(1, 5).is_none());
        let location = root.save(&file_io, &dir).await.unwrap();
        assert_eq!(IndexRoot::load(&file_io, &location).await.unwrap(), root);
    }
}
