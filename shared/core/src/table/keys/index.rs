//! The key index as files: a root (JSON) that the snapshot summary names
//! (`floe.keys`), listing buckets, each holding one Kafka partition's entries whose key
//! hashes fall in its range, as runs (Parquet files) ordered by hash and key: a base and
//! the deltas commits wrote since.
//!
//! ```text
//!  snapshot summary floe.keys ─▶ metadata/floe-keys-<uuid>.json
//!     {"version": 2, "key": ["_kafka.key"],
//!      "buckets": [{"partition": 0, "low": 0, "high": 4294967295,
//!                   "path": ".../metadata/floe-keys-<uuid>-0-00000000.parquet",
//!                   "keys": 1000, "tombstones": 3,
//!                   "deltas": [{"path": ".../floe-keys-<uuid>-0-00000000.parquet", "keys": 40}]}, …]}
//!     run file: hash (uint32), key (binary), offset (int64), tombstone (boolean)
//! ```
//!
//! A bucket's entries are the union of its runs, per key the one of the highest offset
//! (view.rs). A commit touches only the buckets its rows fall in; the others are carried
//! by path. A touched bucket gets a delta holding only the keys the commit gave a new
//! offset, so a commit writes what it changed, not what the table holds. A bucket is
//! consolidated (its runs merged into a new base, split in two halves of its hash range
//! past [`MAX_BUCKET_KEYS`]) when its deltas reach [`MAX_DELTAS`] or hold more entries
//! than the bucket, and a few a commit besides (those with the most deltas), so that
//! consolidations spread over commits. Every file is written once under a new name (a
//! file a snapshot names is never written again), which lets the views decoded from them
//! be kept across commits (cache.rs).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
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

use super::cache;
use super::resolve::{Change, merge};
use super::view::View;

/// The snapshot summary key naming the index root.
pub const KEYS_KEY: &str = "floe.keys";
/// A bucket holding more entries is split.
pub const MAX_BUCKET_KEYS: usize = 1 << 20;
/// A bucket is consolidated when it has this many deltas.
pub const MAX_DELTAS: usize = 8;
/// Version 2 added deltas; version 1 roots (no deltas) read as they are.
const ROOT_VERSION: u32 = 2;
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

/// One bucket: a Kafka partition's keys whose hash lies in `low..=high`, in a base
/// file and deltas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    pub partition: i32,
    pub low: u32,
    pub high: u32,
    /// The base run.
    pub path: String,
    /// Entries (of all runs, one a key), and of them tombstones.
    pub keys: u64,
    pub tombstones: u64,
    /// Runs written since the base, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deltas: Vec<Delta>,
}

/// A delta run: the keys a commit gave a new offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delta {
    pub path: String,
    pub keys: u64,
}

impl Bucket {
    /// Its files: the base, then the deltas.
    pub fn files(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.path.as_str()).chain(self.deltas.iter().map(|d| d.path.as_str()))
    }

    /// The names of its files, which say what it holds (the files never change).
    pub fn identity(&self) -> String {
        self.files().collect::<Vec<_>>().join("\n")
    }

    /// Entries in its deltas.
    pub fn delta_keys(&self) -> u64 {
        self.deltas.iter().map(|d| d.keys).sum()
    }

    /// Whether a commit changing `changed` of its keys (`keys` after) should merge its
    /// runs into one rather than add a delta.
    pub fn full(&self, changed: usize, keys: usize) -> bool {
        self.deltas.len() >= MAX_DELTAS || self.delta_keys() as usize + changed > keys
    }
}

impl IndexRoot {
    pub fn new(key: Vec<String>) -> IndexRoot {
        IndexRoot { version: ROOT_VERSION, key, buckets: Vec::new(), topic_ids: BTreeMap::new() }
    }

    pub async fn load(file_io: &FileIO, location: &str) -> Result<IndexRoot> {
        let bytes = file_io.new_input(location)?.read().await?;
        let root: IndexRoot = serde_json::from_slice(&bytes).map_err(|e| invalid(location, e))?;
        if !(1..=ROOT_VERSION).contains(&root.version) {
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

/// What a commit's changes of one Kafka partition did to the index.
#[derive(Debug, Default)]
pub struct Applied {
    /// Keys new to the index, keys given a newer row, keys deleted.
    pub inserted: u64,
    pub updated: u64,
    pub deleted: u64,
    /// Changes whose rows are deleted: superseded, or tombstones (their `row`s).
    pub dead_rows: Vec<usize>,
    /// Offsets of rows already in the table that the changes supersede or tombstone.
    pub dead_offsets: Vec<i64>,
}

impl IndexRoot {
    /// Merges `changes` (rows of Kafka partition `partition`) into the buckets they fall
    /// in (the whole hash space for a partition new to the index): each gets a delta, or
    /// is consolidated (written anew, split if full); written under `metadata_dir`.
    pub async fn apply(
        &mut self,
        file_io: &FileIO,
        metadata_dir: &str,
        partition: i32,
        changes: Vec<Change>,
    ) -> Result<Applied> {
        let mut by_bucket: BTreeMap<(u32, u32), (Option<Bucket>, Vec<Change>)> = BTreeMap::new();
        for change in changes {
            let (range, bucket) = match self.bucket(partition, change.entry.hash) {
                Some(b) => ((b.low, b.high), Some(b.clone())),
                None => ((0, u32::MAX), None),
            };
            by_bucket.entry(range).or_insert_with(|| (bucket, Vec::new())).1.push(change);
        }
        let consolidated = due(by_bucket.values().filter_map(|(b, _)| b.as_ref()));
        let mut applied = Applied::default();
        for ((low, high), (bucket, changes)) in by_bucket {
            let existing = match &bucket {
                Some(bucket) => read_view(file_io, bucket).await?,
                None => Default::default(),
            };
            let merged = merge(&existing, changes);
            drop(existing);
            applied.inserted += merged.inserted;
            applied.updated += merged.updated;
            applied.deleted += merged.deleted;
            applied.dead_rows.extend(merged.dead_rows);
            applied.dead_offsets.extend(merged.dead_offsets);
            let buckets = match &bucket {
                // Every change lost (a replay): the bucket stays as it is.
                Some(_) if merged.changed.is_empty() => continue,
                Some(b) if !consolidated.contains(&b.path) && !b.full(merged.changed.len(), merged.entries.len()) => {
                    vec![write_delta(file_io, metadata_dir, b, &merged.changed, merged.entries).await?]
                }
                _ => write_buckets(file_io, metadata_dir, partition, (low, high), merged.entries).await?,
            };
            if let Some(b) = &bucket {
                cache::forget(&b.identity());
            }
            self.replace(partition, low, high, buckets);
        }
        Ok(applied)
    }
}

/// The buckets (of those a commit touches) consolidated before their deltas reach
/// [`MAX_DELTAS`]: one in [`MAX_DELTAS`], of those with half as many or more, the most
/// first, so that a table whose commits touch every bucket consolidates a few each
/// commit instead of all of them every [`MAX_DELTAS`] commits.
fn due<'a>(touched: impl Iterator<Item = &'a Bucket>) -> HashSet<String> {
    let mut touched: Vec<&Bucket> = touched.collect();
    let quota = touched.len().div_ceil(MAX_DELTAS);
    touched.retain(|b| b.deltas.len() >= MAX_DELTAS / 2);
    touched.sort_by_key(|b| (std::cmp::Reverse(b.deltas.len()), b.low));
    touched.into_iter().take(quota).map(|b| b.path.clone()).collect()
}

/// The entries of the run file at `path`.
async fn read_run(file_io: &FileIO, path: &str) -> Result<View> {
    let input = file_io.new_input(path)?;
    let reader = ArrowFileReader::new(input.metadata().await?, input.reader().await?);
    let stream = ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .and_then(|b| b.with_batch_size(READ_BATCH).build())
        .map_err(|e| invalid(path, e))?;
    let batches: Vec<RecordBatch> = stream.try_collect().await.map_err(|e| invalid(path, e))?;
    let rows = batches.iter().map(RecordBatch::num_rows).sum();
    let key_bytes =
        batches.iter().filter_map(|b| b.column_by_name("key")?.as_binary_opt::<i32>()).map(|k| k.value_data().len());
    let mut view = View::with_capacity(rows, key_bytes.sum());
    for batch in &batches {
        view.append_batch(batch).map_err(|e| invalid(path, e))?;
    }
    Ok(view)
}

/// The entries of `bucket`: kept from an earlier commit (cache.rs), or read from its runs.
pub async fn read_view(file_io: &FileIO, bucket: &Bucket) -> Result<Arc<View>> {
    let identity = bucket.identity();
    if let Some(view) = cache::get(&identity) {
        return Ok(view);
    }
    let mut runs = Vec::with_capacity(1 + bucket.deltas.len());
    for path in bucket.files() {
        runs.push(read_run(file_io, path).await?);
    }
    // The deltas first (small), then the base.
    runs.rotate_left(1);
    let view = Arc::new(View::union(runs));
    cache::put(identity, view.clone());
    Ok(view)
}

/// Writes `view` (the entries of `partition` whose hashes lie in `low..=high`) as one
/// bucket of one run, or as several when there are more than [`MAX_BUCKET_KEYS`]: the
/// range halved until each half holds few enough (or is one hash wide). None for no
/// entries. Each bucket's view is kept (cache.rs).
pub async fn write_buckets(
    file_io: &FileIO,
    metadata_dir: &str,
    partition: i32,
    (low, high): (u32, u32),
    view: View,
) -> Result<Vec<Bucket>> {
    let mut ranges = vec![(low, high, 0..view.len())];
    let mut parts = Vec::new();
    while let Some((low, high, rows)) = ranges.pop() {
        if rows.is_empty() {
            continue;
        }
        if rows.len() > MAX_BUCKET_KEYS && low < high {
            let mid = low + (high - low) / 2;
            let split = view.after_hash(mid).clamp(rows.start, rows.end);
            ranges.push((mid + 1, high, split..rows.end));
            ranges.push((low, mid, rows.start..split));
            continue;
        }
        parts.push((low, high, rows));
    }
    let whole = parts.len() == 1;
    let view = Arc::new(view);
    let mut buckets = Vec::new();
    for (low, high, rows) in parts {
        let path = run_path(metadata_dir, partition, low);
        write_run(file_io, &path, &view, rows.clone()).await?;
        let part = if whole { view.clone() } else { Arc::new(view.slice(rows)) };
        let (keys, tombstones) = (part.len() as u64, part.tombstone_count());
        let bucket = Bucket { partition, low, high, path, keys, tombstones, deltas: Vec::new() };
        cache::put(bucket.identity(), part);
        buckets.push(bucket);
    }
    Ok(buckets)
}

/// `bucket` with a delta of `changed` added; `view`: its entries after (kept, cache.rs).
pub async fn write_delta(
    file_io: &FileIO,
    metadata_dir: &str,
    bucket: &Bucket,
    changed: &View,
    view: View,
) -> Result<Bucket> {
    let path = run_path(metadata_dir, bucket.partition, bucket.low);
    write_run(file_io, &path, changed, 0..changed.len()).await?;
    let mut after = bucket.clone();
    after.deltas.push(Delta { path, keys: changed.len() as u64 });
    (after.keys, after.tombstones) = (view.len() as u64, view.tombstone_count());
    cache::put(after.identity(), Arc::new(view));
    Ok(after)
}

fn run_path(metadata_dir: &str, partition: i32, low: u32) -> String {
    format!("{metadata_dir}/floe-keys-{}-{partition}-{low:08x}.parquet", uuid::Uuid::new_v4())
}

pub(super) fn bucket_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("hash", DataType::UInt32, false),
        Field::new("key", DataType::Binary, false),
        Field::new("offset", DataType::Int64, false),
        Field::new("tombstone", DataType::Boolean, false),
    ]))
}

async fn write_run(file_io: &FileIO, path: &str, view: &View, rows: std::ops::Range<usize>) -> Result<()> {
    let schema = bucket_schema();
    let batch = view.batch(schema.clone(), rows).map_err(|e| invalid(path, e))?;
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
    use crate::table::keys::resolve::Entry;

    fn sorted(mut entries: Vec<Entry>) -> View {
        entries.sort_by(|a, b| a.order().cmp(&b.order()));
        View::from_entries(&entries)
    }

    /// A bucket read back from its files (not the views kept).
    async fn cold(file_io: &FileIO, bucket: &Bucket) -> View {
        cache::forget(&bucket.identity());
        let view = read_view(file_io, bucket).await.unwrap();
        View::clone(&view)
    }

    #[tokio::test]
    async fn a_bucket_survives_a_write_and_a_read_and_a_full_one_splits_by_hash() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().display().to_string();
        let file_io = crate::storage::local_file_io();
        let entries = sorted(
            (0..10u32)
                .map(|i| Entry { hash: i * 400_000_000, key: vec![i as u8], offset: i.into(), tombstone: i % 3 == 0 })
                .collect(),
        );
        let buckets = write_buckets(&file_io, &dir, 2, (0, u32::MAX), entries.clone()).await.unwrap();
        assert_eq!(buckets.len(), 1);
        assert_eq!((buckets[0].keys, buckets[0].tombstones), (10, 4));
        assert_eq!(*read_view(&file_io, &buckets[0]).await.unwrap(), entries, "kept");
        assert_eq!(cold(&file_io, &buckets[0]).await, entries, "read");

        let many = sorted(
            (0..MAX_BUCKET_KEYS as u32 + 2)
                .map(|i| Entry { hash: i.wrapping_mul(2_654_435_761), key: vec![], offset: 0, tombstone: false })
                .collect(),
        );
        let buckets = write_buckets(&file_io, &dir, 0, (0, u32::MAX), many.clone()).await.unwrap();
        assert_eq!(buckets.len(), 2, "split once: each half under the bound");
        let (low, high) = (&buckets[0], &buckets[1]);
        assert_eq!((low.low, low.high + 1, high.high), (0, high.low, u32::MAX));
        assert_eq!(low.keys + high.keys, many.len() as u64);
        let mut halves = View::clone(&*read_view(&file_io, low).await.unwrap());
        halves.extend_from(&cold(&file_io, high).await, 0..high.keys as usize);
        assert_eq!(halves, many);
        let mut root = IndexRoot::new(vec!["_kafka.key".into()]);
        root.replace(0, 0, u32::MAX, buckets.clone());
        assert_eq!(root.bucket(0, u32::MAX).unwrap().path, high.path);
        assert_eq!(root.bucket(0, 5).unwrap().path, low.path);
        assert!(root.bucket(1, 5).is_none());
        let location = root.save(&file_io, &dir).await.unwrap();
        assert_eq!(IndexRoot::load(&file_io, &location).await.unwrap(), root);
    }

    /// Of the buckets a commit touches, one in [`MAX_DELTAS`] is consolidated early: of
    /// those with half as many deltas or more, the ones with the most.
    #[test]
    fn consolidations_spread_over_commits_the_most_deltas_first() {
        let bucket = |low: u32, deltas: usize| Bucket {
            partition: 0,
            low,
            high: low,
            path: format!("b{low}"),
            keys: 100,
            tombstones: 0,
            deltas: (0..deltas).map(|i| Delta { path: format!("b{low}-{i}"), keys: 1 }).collect(),
        };
        let touched: Vec<Bucket> = (0..16).map(|i| bucket(i, [5, 7, 3, 6][i as usize % 4])).collect();
        let mut chosen: Vec<String> = due(touched.iter()).into_iter().collect();
        chosen.sort();
        assert_eq!(chosen, ["b1", "b5"], "two of sixteen: those of seven deltas, lowest first");
        assert!(due(touched.iter().filter(|b| b.deltas.len() < MAX_DELTAS / 2)).is_empty());
        assert_eq!(due([bucket(0, 4)].iter()).len(), 1, "one of one, with half the deltas");
    }

    /// A bucket with deltas reads back (from its files) as the view its last commit
    /// kept: per key the highest offset of its runs; its root names every file.
    #[tokio::test]
    async fn a_bucket_with_deltas_reads_back_as_the_union_of_its_runs() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().display().to_string();
        let file_io = crate::storage::local_file_io();
        let entry = |k: u8, offset: i64, tombstone| Entry { hash: u32::from(k) << 24, key: vec![k], offset, tombstone };
        let base = sorted((0..6).map(|k| entry(k, k.into(), false)).collect());
        let bucket = write_buckets(&file_io, &dir, 0, (0, u32::MAX), base).await.unwrap().remove(0);
        let delta = sorted(vec![entry(1, 10, false), entry(4, 11, true), entry(9, 12, false)]);
        let after = sorted(vec![
            entry(0, 0, false),
            entry(1, 10, false),
            entry(2, 2, false),
            entry(3, 3, false),
            entry(4, 11, true),
            entry(5, 5, false),
            entry(9, 12, false),
        ]);
        let bucket = write_delta(&file_io, &dir, &bucket, &delta, after.clone()).await.unwrap();
        assert_eq!((bucket.keys, bucket.tombstones, bucket.delta_keys()), (7, 1, 3));
        assert_eq!(bucket.files().count(), 2);
        assert_eq!(cold(&file_io, &bucket).await, after);
        assert!(!bucket.full(4, 7) && bucket.full(5, 7), "deltas as large as the bucket: consolidate");

        let mut root = IndexRoot::new(vec!["_kafka.key".into()]);
        root.replace(0, 0, u32::MAX, vec![bucket.clone()]);
        let location = root.save(&file_io, &dir).await.unwrap();
        assert_eq!(IndexRoot::load(&file_io, &location).await.unwrap().buckets, [bucket]);
        // A root of version 1 (no deltas) reads as it is.
        let v1 = r#"{"version": 1, "key": ["k"], "buckets": [{"partition": 0, "low": 0, "high": 9,
                     "path": "p", "keys": 1, "tombstones": 0}]}"#;
        file_io.new_output(format!("{dir}/v1.json")).unwrap().write(v1.into()).await.unwrap();
        let v1 = IndexRoot::load(&file_io, &format!("{dir}/v1.json")).await.unwrap();
        assert!(v1.buckets[0].deltas.is_empty());
    }
}
