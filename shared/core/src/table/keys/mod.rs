//! Upsert tables: one row per key, the key's latest record, kept by a key index and
//! position deletes.
//!
//! The committer is a table's only writer, so it owns the index: key → the offset of the
//! key's winning record (and whether that record is a tombstone), per Kafka partition,
//! as Kafka sends a key to one partition. An offset names a row for good: compaction and
//! retention move or drop rows, never change their offsets, so the index never changes
//! when files are rewritten. An append to an upsert table goes:
//!
//! ```text
//!  the files the append adds ─▶ read their key columns, `_kafka.partition`,
//!                               `_kafka.offset`, `_kafka.tombstone` (nothing else)
//!  per partition, per index bucket its keys fall in (index.rs):
//!     bucket ⋈ the rows (resolve.rs) ─▶ rows of the append that lose or are tombstones
//!                                      offsets of older rows superseded or tombstoned
//!                                      the bucket after ─▶ written anew
//!  offsets superseded ─▶ their rows (file, position) among the live data files, found
//!                        by the files' offset bounds and their `_kafka.offset` column
//!  ─▶ position delete files (deletes/write.rs) and the new index root, both named by
//!     the same snapshot as the data: they commit, or fail, with it.
//! ```
//!
//! Exactly once: the index is part of the snapshot (`floe.keys` names its root), so a
//! replayed task, a retried commit or a crash at any step sees the index of the snapshot
//! it builds on; the rows it adds were never indexed. The per-key rule (highest offset
//! wins, a tombstone's offset kept) makes the result the same whatever order segments
//! commit in.

pub mod cache;
pub mod encode;
pub mod index;
pub mod locate;
pub mod resolve;
pub mod view;

use std::collections::{BTreeMap, HashMap};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef};
use iceberg::io::FileIO;
use iceberg::spec::{DataFile, FormatVersion, Schema, TableMetadata};
use iceberg::{Error, ErrorKind, Result};

use self::index::{IndexRoot, read_view};
use self::locate::locate;
use self::resolve::{Change, Entry};
use super::deletes::read::{column_by_id, read_columns};
use super::deletes::write::{Doomed, write_position_deletes, write_vectors};
use super::deletes::{LiveDelete, live_files};

pub use self::index::KEYS_KEY;

/// The table property naming an upsert table's key columns (a JSON list of dotted paths).
pub const UPSERT_KEY_PROPERTY: &str = "floe.upsert-key";
/// The snapshot summary key of an upsert table's live keys.
pub const LIVE_KEYS: &str = "floe.upsert.live-keys";
/// The `_kafka` field marking a record that deletes its key (a tombstone: a null value).
pub const TOMBSTONE_COLUMN: &str = "_kafka.tombstone";
const PARTITION_COLUMN: &str = "_kafka.partition";
const OFFSET_COLUMN: &str = "_kafka.offset";

fn invalid(detail: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::DataInvalid, detail.to_string())
}

/// The key columns of an upsert table, from its properties (`None`: an append table).
pub fn table_key(metadata: &TableMetadata) -> Result<Option<Vec<String>>> {
    let Some(json) = metadata.properties().get(UPSERT_KEY_PROPERTY) else { return Ok(None) };
    let key: Vec<String> = serde_json::from_str(json)
        .map_err(|e| invalid(format!("table property {UPSERT_KEY_PROPERTY} = {json:?}: {e}")))?;
    Ok(Some(key))
}

/// What an upsert append adds beside its data files.
#[derive(Debug, Default)]
pub struct Upserted {
    /// Position delete files, or on a v3 table deletion vectors (with their partition
    /// spec's id): the rows superseded, and the tombstones.
    pub deletes: Vec<(i32, DataFile)>,
    /// Deletion vectors the new ones replace (their delete keys): to remove in the same
    /// snapshot.
    pub replaced: Vec<String>,
    /// The index root the snapshot names ([`KEYS_KEY`]).
    pub root: String,
    /// Keys new to the table, keys given a newer row, keys deleted; rows deleted.
    pub inserted: u64,
    pub updated: u64,
    pub deleted: u64,
    pub rows_deleted: u64,
    /// Live keys after.
    pub live_keys: u64,
}

/// An upsert table's key index as the audit compares it with the rows: per Kafka
/// partition, the offsets of each live key's winning record (`None`: no index, an
/// append table or an upsert table without a commit yet).
pub async fn live_offsets(
    file_io: &FileIO,
    metadata: &TableMetadata,
) -> Result<Option<BTreeMap<i32, super::offsets::RangeSet>>> {
    let Some(location) = super::floe_summary(metadata).remove(KEYS_KEY) else { return Ok(None) };
    let root = IndexRoot::load(file_io, &location).await?;
    let mut offsets: BTreeMap<i32, Vec<(i64, i64)>> = BTreeMap::new();
    for bucket in &root.buckets {
        let view = read_view(file_io, bucket).await?;
        let live = (0..view.len()).filter(|&i| !view.tombstone(i)).map(|i| (view.offset(i), view.offset(i)));
        offsets.entry(bucket.partition).or_default().extend(live);
    }
    Ok(Some(offsets.into_iter().map(|(p, o)| (p, super::offsets::RangeSet::from_ranges(o))).collect()))
}

/// Why an upsert table (`None` for an append table) cannot take segments of `topic_ids` (the topic's id and partition
/// of each of a commit's segments): a partition its index (or another segment of the
/// commit) holds offsets of another incarnation of the topic for, deleted and created
/// again since. Its offsets restarted; by offset,
/// the new records would lose to the old ones and be deleted. `None`: it can.
pub async fn recreated(
    file_io: &FileIO,
    metadata: &TableMetadata,
    topic_ids: &[(i32, String)],
) -> Result<Option<String>> {
    if table_key(metadata)?.is_none() {
        // An append table keeps each incarnation's rows, its offsets apart (`offsets.rs`).
        return Ok(None);
    }
    let mut known = match super::floe_summary(metadata).remove(KEYS_KEY) {
        Some(location) => IndexRoot::load(file_io, &location).await?.topic_ids,
        None => BTreeMap::new(),
    };
    Ok(topic_ids.iter().find_map(|(partition, id)| {
        let indexed = known.entry(*partition).or_insert_with(|| id.clone());
        let indexed = Some(&*indexed).filter(|indexed| *indexed != id)?;
        Some(format!(
            "partition {partition} comes from topic id {id}, the key index holds offsets of topic id {indexed}: the \
             topic was deleted and created again, and its new offsets cannot be ordered against the old ones; \
             rebuild the table (docs/operating.md, upsert tables)"
        ))
    }))
}

/// The field ids the upsert reads, found in `schema`.
struct Columns {
    partition: i32,
    offset: i32,
    tombstone: i32,
    key: Vec<i32>,
}

impl Columns {
    fn of(schema: &Schema, key: &[String]) -> Result<Columns> {
        let id = |name: &str| {
            schema.field_by_name(name).map(|f| f.id).ok_or_else(|| invalid(format!("the table has no column `{name}`")))
        };
        Ok(Columns {
            partition: id(PARTITION_COLUMN)?,
            offset: id(OFFSET_COLUMN)?,
            tombstone: id(TOMBSTONE_COLUMN)?,
            key: key.iter().map(|k| id(k)).collect::<Result<_>>()?,
        })
    }
}

/// Resolves the rows `added` (the data files of an append to the upsert table of
/// `metadata`, keyed on `key`, written with `schema`) against the index `previous` (the
/// root the table's last Floe snapshot names): writes the position delete files and the
/// index after, under the table's location. `topic_ids`: the topic's id per partition of
/// the segments committed (recorded for [`recreated`]).
pub async fn upsert(
    file_io: &FileIO,
    metadata: &TableMetadata,
    schema: &Schema,
    added: &[DataFile],
    key: &[String],
    (previous, topic_ids): (Option<&str>, &BTreeMap<i32, String>),
) -> Result<Upserted> {
    let columns = Columns::of(schema, key)?;
    let mut root = match previous {
        Some(location) => IndexRoot::load(file_io, location).await?,
        None => IndexRoot::new(key.to_vec()),
    };
    if root.key != key {
        return Err(invalid(format!("the key index is on {:?}, the table's key is {key:?}", root.key)));
    }
    for (partition, id) in topic_ids {
        root.topic_ids.entry(*partition).or_insert_with(|| id.clone());
    }
    let (rows, changes) = read_added(file_io, added, &columns, key).await?;
    let metadata_dir = format!("{}/metadata", metadata.location());
    let mut upserted = Upserted::default();
    let mut dead_rows: Vec<usize> = Vec::new();
    let mut dead_offsets: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for (partition, changes) in changes {
        let applied = root.apply(file_io, &metadata_dir, partition, changes).await?;
        upserted.inserted += applied.inserted;
        upserted.updated += applied.updated;
        upserted.deleted += applied.deleted;
        dead_rows.extend(applied.dead_rows);
        dead_offsets.entry(partition).or_default().extend(applied.dead_offsets);
    }
    // The rows of the append that lose, by file.
    let spec_id = metadata.default_partition_spec_id();
    let mut doomed: HashMap<usize, Vec<i64>> = HashMap::new();
    for row in dead_rows {
        let (file, position) = rows[row];
        doomed.entry(file).or_default().push(position);
    }
    let mut doomed: Vec<Doomed> = doomed
        .into_iter()
        .map(|(file, positions)| Doomed {
            path: added[file].file_path().to_string(),
            spec_id,
            partition: added[file].partition().clone(),
            positions,
        })
        .collect();
    let v3 = metadata.format_version() >= FormatVersion::V3;
    dead_offsets.retain(|_, o| !o.is_empty());
    // The table's live files, listed once (every manifest read) when anything needs them.
    let live = match metadata.current_snapshot().is_some() && (v3 || !dead_offsets.is_empty()) {
        true => live_files(file_io, metadata).await?,
        false => Default::default(),
    };
    doomed.extend(locate(file_io, &live.0, (columns.partition, columns.offset), dead_offsets).await?);
    upserted.rows_deleted = doomed.iter().map(|d| d.positions.len() as u64).sum();
    let data_dir = format!("{}/data", metadata.location());
    upserted.deletes = if v3 {
        // A data file has one deletion vector at most: its earlier one merged in, replaced.
        let (doomed, replaced) = with_earlier_vectors(file_io, &live.1, doomed).await?;
        upserted.replaced = replaced;
        write_vectors(file_io, &data_dir, doomed).await?
    } else {
        write_position_deletes(file_io, &data_dir, doomed).await?
    };
    upserted.live_keys = root.live_keys();
    upserted.root = root.save(file_io, &metadata_dir).await?;
    Ok(upserted)
}

/// The rows of the files `added`: where each is (file index, position), and its change
/// (key, offset, tombstone), per Kafka partition, named by its index in the first.
async fn read_added(
    file_io: &FileIO,
    added: &[DataFile],
    columns: &Columns,
    key: &[String],
) -> Result<(Vec<(usize, i64)>, BTreeMap<i32, Vec<Change>>)> {
    let mut rows: Vec<(usize, i64)> = Vec::new();
    let mut changes: BTreeMap<i32, Vec<Change>> = BTreeMap::new();
    let ids: Vec<i32> =
        [columns.partition, columns.offset, columns.tombstone].into_iter().chain(columns.key.clone()).collect();
    for (file, data) in added.iter().enumerate() {
        let path = data.file_path();
        let mut position = 0i64;
        for batch in read_columns(file_io, path, &ids).await? {
            let located = |e: String| invalid(format!("{path}: {e}"));
            let column = |id: i32| column_by_id(batch.schema().fields(), batch.columns(), id);
            let (Some(partitions), Some(offsets)) = (column(columns.partition), column(columns.offset)) else {
                return Err(located("no _kafka.partition or _kafka.offset column".into()));
            };
            let partitions = partitions
                .as_primitive_opt::<Int32Type>()
                .ok_or_else(|| located("_kafka.partition is no int".into()))?;
            let offsets =
                offsets.as_primitive_opt::<Int64Type>().ok_or_else(|| located("_kafka.offset is no long".into()))?;
            let tombstones = column(columns.tombstone);
            let tombstones = tombstones.as_ref().and_then(|t| t.as_boolean_opt());
            let key_columns: Vec<ArrayRef> = columns
                .key
                .iter()
                .zip(key)
                .map(|(&id, name)| column(id).ok_or_else(|| located(format!("no key column `{name}`"))))
                .collect::<Result<_>>()?;
            let keys = encode::keys(&key_columns, batch.num_rows()).map_err(located)?;
            for (row, key) in keys.into_iter().enumerate() {
                let offset = offsets.value(row);
                let partition = partitions.value(row);
                let key = key.ok_or_else(|| {
                    located(format!(
                        "the row of offset {offset} (partition {partition}) has no key: upsert rows need one"
                    ))
                })?;
                let tombstone = tombstones.is_some_and(|t| t.is_valid(row) && t.value(row));
                changes.entry(partition).or_default().push(Change {
                    entry: Entry { hash: encode::hash(&key), key, offset, tombstone },
                    row: rows.len(),
                });
                rows.push((file, position));
                position += 1;
            }
        }
    }
    Ok((rows, changes))
}

/// `doomed` with the positions of each file's live deletion vector (of `deletes`) added, and those
/// vectors (by [`super::deletes::delete_key`]), which the new ones replace.
async fn with_earlier_vectors(
    file_io: &FileIO,
    deletes: &[LiveDelete],
    mut doomed: Vec<Doomed>,
) -> Result<(Vec<Doomed>, Vec<String>)> {
    let mut replaced = Vec::new();
    for file in &mut doomed {
        let earlier =
            deletes.iter().filter(|d| d.is_vector() && d.file.referenced_data_file().as_ref() == Some(&file.path));
        for vector in earlier {
            let named = super::deletes::read::vector(file_io, &vector.file).await?;
            file.positions.extend(named.into_values().flatten());
            replaced.push(vector.path().to_string());
        }
    }
    Ok((doomed, replaced))
}
