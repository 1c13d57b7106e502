//! The Delta table kept in step with the Iceberg table Floe commits: the same Parquet
//! files, added and removed by Delta commits, each carrying the committed offsets as
//! `txn` actions.
//!
//! ```text
//!  Iceberg table (loaded: its current snapshot, sequence number s)
//!    │ live data files, committed offsets, schema
//!    ▼
//!  Delta log at N ── txn `floe/iceberg-sequence` ≥ s? ──▶ up to date (nothing written)
//!    │ diff: files Iceberg has and Delta lacks ─▶ add
//!    │       files Delta has and Iceberg dropped ─▶ remove
//!    │       rows deleted from a file since ─▶ remove, add again with its deletion vector
//!    │       per Kafka partition, the last committed offset ─▶ txn (appId `<table>/<topic>/<partition>`)
//!    │       a new schema ─▶ metaData (and a higher protocol when a feature needs it)
//!    ▼
//!  put-if-absent N+1.json ── taken ──▶ read the log again, diff again (bounded)
//! ```
//!
//! The Delta table is a function of the Iceberg snapshot it mirrors, so mirroring twice,
//! mirroring after a crash between the two commits, or two mirrors racing all end with
//! the same files once: the loser of a version re-reads and finds nothing left to do.
//! The Iceberg sequence number recorded in the same commit keeps an older view of the
//! Iceberg table from undoing a newer one.
//!
//! A compaction's files (added by a `replace` snapshot, or removed while only Floe's
//! appends and compactions committed) say `dataChange: false`, as `OPTIMIZE` writes
//! them, so streaming readers skip them; a commit of such files alone is an `OPTIMIZE`.
//!
//! Row-level deletes (an upsert's, another engine's) are mirrored as deletion vectors:
//! the positions the live delete files remove from a file (position deletes, deletion
//! vectors, the rows equality deletes match) become its Delta deletion vector
//! ([`super::vectors`]), the file removed with its old vector and added with the new one.

use std::collections::BTreeMap;

use iceberg::io::FileIO;
use iceberg::spec::{Operation, TableMetadata};
use serde_json::json;

use super::DeltaError;
use super::actions::{Action, Add, FileFormat, Metadata, Remove, Txn};
use super::cache::MirrorCache;
use super::log::DeltaSnapshot;
use super::partition::DeltaPartitioning;
use super::schema::{DeltaSchema, has_deletion_vectors, needs_upgrade};
use super::store::LogStore;
use super::vectors::{deleted_positions, write as write_vector};
use crate::table::deletes::{ScopedFile, live_files_from};
use crate::table::{LoadedTable, committed_offsets};

/// The `txn` app id whose version is the sequence number of the Iceberg snapshot mirrored.
pub const ICEBERG_SEQUENCE_APP: &str = "floe/iceberg-sequence";

/// Attempts at a version before giving up (another writer took each).
const ATTEMPTS: usize = 5;

/// What a mirror did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mirrored {
    /// The Delta table already mirrored this Iceberg snapshot (or a newer one).
    UpToDate { version: i64 },
    /// A new version, with its files added and removed, and the files given (new)
    /// deletion vectors.
    Committed { version: i64, added: usize, removed: usize, deleted_in: usize },
}

/// The Iceberg table's live data files, and the rows its deletes remove from each (by
/// its path).
struct LiveRows {
    data: Vec<ScopedFile>,
    deleted: BTreeMap<String, Vec<i64>>,
}

/// The app id of a Kafka partition's offsets in `table`'s Delta log.
pub fn offsets_app(table: &str, log: &str, partition: i32) -> String {
    format!("{table}/{log}/{partition}")
}

/// Brings the Delta table at `table`'s location in step with its current Iceberg snapshot;
/// `cache` keeps what the next mirror in this process need not read again.
pub async fn mirror(
    store: &dyn LogStore,
    file_io: &FileIO,
    table: &LoadedTable,
    now_ms: i64,
    cache: &MirrorCache,
) -> Result<Mirrored, DeltaError> {
    let metadata = &table.metadata;
    let sequence = metadata.last_sequence_number();
    let root = metadata.location().trim_end_matches('/').to_string();
    let wanted_txns = expected_txns(table, now_ms)?;
    let partitioning = DeltaPartitioning::of(metadata.current_schema(), metadata.default_partition_spec());
    // The Iceberg table's files and deletes, read once the Delta table is found behind.
    let mut iceberg: Option<LiveRows> = None;

    for _ in 0..ATTEMPTS {
        let state = cache.state(store, &root).await?;
        if let Some(m) =
            state.as_ref().and_then(|s| s.metadata.as_ref()).filter(|m| m.id != metadata.uuid().to_string())
        {
            return Err(DeltaError::Unsupported(format!(
                "the Delta table mirrors the Iceberg table {} and this one is {}: an Iceberg table made again \
                 (dropped, or its topic's formats changed) would undo the Delta table's rows",
                m.id,
                metadata.uuid()
            )));
        }
        let synced = state.as_ref().and_then(|s| s.txns.get(ICEBERG_SEQUENCE_APP)).map(|t| t.version);
        if synced.is_some_and(|synced| synced >= sequence)
            && let Some(state) = state
        {
            let version = state.version;
            cache.keep(state);
            return Ok(Mirrored::UpToDate { version });
        }
        let state = state.unwrap_or_else(|| DeltaSnapshot { root: root.clone(), version: -1, ..Default::default() });
        let LiveRows { data, deleted } = match &mut iceberg {
            Some(read) => &*read,
            None => {
                let (data, deletes) = live_files_from(file_io, metadata, cache).await?;
                let deleted = deleted_positions(file_io, metadata, &data, deletes, cache).await?;
                &*iceberg.insert(LiveRows { data, deleted })
            }
        };
        // A compaction's outputs and inputs change no data; a file an append added does.
        let removes_change_data = !only_floe_s(metadata, synced);
        let adds_change_data = |f: &ScopedFile| {
            metadata.snapshot_by_id(f.added_by).is_none_or(|s| s.summary().operation != Operation::Replace)
        };

        let previous = state.metadata.as_ref().map(|m| m.schema_string.as_str());
        let schema = DeltaSchema::of(metadata.current_schema(), &partitioning.generated, previous)?;
        if let Some(m) = state.metadata.as_ref().filter(|m| m.partition_columns != partitioning.names()) {
            return Err(DeltaError::Unsupported(format!(
                "the Delta table is partitioned by {:?} and the Iceberg table's spec gives {:?}: Delta cannot change \
                 a table's partition columns",
                m.partition_columns,
                partitioning.names()
            )));
        }
        let mut actions = Vec::new();
        let vectors = !deleted.is_empty() || has_deletion_vectors(state.protocol.as_ref());
        let protocol = schema.protocol(vectors);
        if needs_upgrade(state.protocol.as_ref(), &protocol) {
            actions.push(Action::Protocol(protocol));
        }
        let mut configuration = BTreeMap::from([
            ("delta.columnMapping.mode".to_string(), "id".to_string()),
            ("delta.columnMapping.maxColumnId".to_string(), schema.max_column_id.to_string()),
        ]);
        if vectors {
            configuration.insert("delta.enableDeletionVectors".into(), "true".into());
        }
        let new_metadata = match &state.metadata {
            None => Some(Metadata {
                id: metadata.uuid().to_string(),
                name: Some(table.name.name.clone()),
                description: None,
                format: FileFormat { provider: "parquet".into(), options: BTreeMap::new() },
                schema_string: schema.schema_string.clone(),
                partition_columns: partitioning.names(),
                configuration,
                created_time: Some(now_ms),
            }),
            Some(m) if m.schema_string != schema.schema_string || m.configuration != configuration => {
                Some(Metadata { schema_string: schema.schema_string.clone(), configuration, ..m.clone() })
            }
            Some(_) => None,
        };
        let metadata_changed = new_metadata.is_some();
        actions.extend(new_metadata.map(Action::MetaData));

        let live = by_delta_path(&root, data);
        let remove = |add: &Add, data_change: bool| {
            Action::Remove(Remove {
                path: add.path.clone(),
                deletion_timestamp: Some(now_ms),
                data_change,
                extended_file_metadata: Some(true),
                size: Some(add.size),
                deletion_vector: add.deletion_vector.clone(),
            })
        };
        let (mut added, mut removed, mut deleted_in) = (0, 0, 0);
        let mut adds = Vec::new();
        for (path, f) in &live {
            let positions = deleted.get(f.path()).map_or(&[][..], Vec::as_slice);
            let had = state.files.get(path);
            let cardinality = |add: &Add| add.deletion_vector.as_ref().map_or(0, |v| v.cardinality);
            // A file's deletes only grow until it is rewritten: the same count, the same rows.
            if had.is_some_and(|had| cardinality(had) == positions.len() as i64) {
                continue;
            }
            let vector = match positions.is_empty() {
                true => None,
                false => Some(write_vector(file_io, &root, f.path(), positions).await?),
            };
            let file = &f.live.file;
            let add = Add {
                path: path.clone(),
                partition_values: partitioning.values(metadata, f.spec_id, file.partition()),
                size: file.file_size_in_bytes() as i64,
                modification_time: f.live.added_at_ms,
                data_change: adds_change_data(f),
                stats: Some(json!({ "numRecords": file.record_count() }).to_string()),
                deletion_vector: vector,
            };
            match had {
                // Rows of a file Delta has deleted: the file again, with its new vector.
                Some(had) => {
                    deleted_in += 1;
                    actions.push(remove(had, true));
                    adds.push(Action::Add(Add { data_change: true, ..add }));
                }
                None => {
                    added += 1;
                    adds.push(Action::Add(add));
                }
            }
        }
        for (path, add) in &state.files {
            if !live.contains_key(path) {
                removed += 1;
                actions.push(remove(add, removes_change_data));
            }
        }
        // Removes first, then adds: a file removed with its old vector and added with a new one.
        actions.extend(adds);
        let txns: Vec<&Txn> = wanted_txns
            .iter()
            .filter(|t| state.txns.get(&t.app_id).is_none_or(|had| had.version != t.version))
            .collect();
        let offsets_moved = txns.iter().any(|t| t.app_id != ICEBERG_SEQUENCE_APP);
        if added + removed + deleted_in == 0 && !metadata_changed && !offsets_moved && state.version >= 0 {
            let version = state.version;
            cache.keep(state);
            return Ok(Mirrored::UpToDate { version });
        }
        actions.extend(txns.into_iter().cloned().map(Action::Txn));
        let changes_data = actions.iter().any(|a| match a {
            Action::Add(add) => add.data_change,
            Action::Remove(remove) => remove.data_change,
            _ => false,
        });
        // A commit of files that changes no data is a compaction's, as `OPTIMIZE` writes it.
        let operation = if changes_data || added + removed == 0 { "WRITE" } else { "OPTIMIZE" };
        let info = json!({
            "timestamp": now_ms,
            "operation": operation,
            "operationParameters": { "mode": "Append" },
            "engineInfo": concat!("floe/", env!("CARGO_PKG_VERSION")),
            "isBlindAppend": removed == 0,
            "floe.iceberg.snapshot-id": metadata.current_snapshot_id(),
            "floe.iceberg.sequence-number": sequence,
        });
        let serde_json::Value::Object(info) = info else { unreachable!("a JSON object literal") };
        actions.insert(0, Action::CommitInfo(info));
        if let Some(version) = state.commit(store, actions.clone()).await? {
            cache.keep(state.after(actions, version));
            tracing::info!(table = %table.name, version, added, removed, deleted_in, iceberg_sequence = sequence, "Delta table mirrored");
            return Ok(Mirrored::Committed { version, added, removed, deleted_in });
        }
        tracing::info!(table = %table.name, version = state.version + 1, "Delta version taken by another writer; reading again");
    }
    Err(DeltaError::Contended { root, attempts: ATTEMPTS })
}

/// The `txn` actions that record `table`'s current snapshot: per Kafka partition its last
/// committed offset, and the Iceberg sequence number mirrored.
pub(super) fn expected_txns(table: &LoadedTable, now_ms: i64) -> Result<Vec<Txn>, DeltaError> {
    let metadata = &table.metadata;
    let offsets = committed_offsets(&table.name, metadata).map_err(|e| DeltaError::Iceberg(e.to_string()))?;
    let name = table.name.to_string();
    let mut txns: Vec<Txn> = offsets
        .partitions
        .iter()
        .filter_map(|((log, partition), set)| {
            let last = set.ranges().last()?.1;
            Some(Txn { app_id: offsets_app(&name, log, *partition), version: last, last_updated: Some(now_ms) })
        })
        .collect();
    let sequence = metadata.last_sequence_number();
    txns.push(Txn { app_id: ICEBERG_SEQUENCE_APP.into(), version: sequence, last_updated: Some(now_ms) });
    Ok(txns)
}

/// The Iceberg table's live data files by the `add.path` they have in the Delta table.
pub(super) fn by_delta_path<'a>(root: &str, data: &'a [ScopedFile]) -> BTreeMap<String, &'a ScopedFile> {
    data.iter().map(|f| (relative(root, f.path()), f)).collect()
}

/// Whether every Iceberg snapshot since sequence number `synced` (all of them when
/// `None`) is one of Floe's appends or compactions (`replace`): the files they removed
/// were rewritten, not their rows deleted.
fn only_floe_s(metadata: &TableMetadata, synced: Option<i64>) -> bool {
    let mut snapshot = metadata.current_snapshot();
    while let Some(s) = snapshot.filter(|s| synced.is_none_or(|synced| s.sequence_number() > synced)) {
        if !matches!(s.summary().operation, Operation::Replace | Operation::Append) {
            return false;
        }
        snapshot = s.parent_snapshot_id().and_then(|id| metadata.snapshot_by_id(id));
    }
    true
}

/// `path` as an `add.path`: relative to `root` when under it, percent-encoded as a URI
/// path; an absolute URI otherwise.
pub fn relative(root: &str, path: &str) -> String {
    match path.strip_prefix(root).and_then(|rest| rest.strip_prefix('/')) {
        Some(rest) => encode(rest),
        None if path.starts_with('/') => format!("file://{}", encode(path)),
        None => path.to_string(),
    }
}

/// The location of the file an `add.path` names in the table at `root`: a relative path
/// percent-decoded under the root, a `file://` URI as a local path, any other URI as it is.
pub fn absolute(root: &str, path: &str) -> String {
    match path.split_once("://") {
        Some(("file", rest)) => decode(rest),
        Some(_) => path.to_string(),
        None => format!("{}/{}", root.trim_end_matches('/'), decode(path)),
    }
}

fn decode(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn encode(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/=".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_under_the_root_are_relative_and_encoded() {
        assert_eq!(relative("/w/t", "/w/t/data/d=2024%2F01/a b.parquet"), "data/d=2024%252F01/a%20b.parquet");
        assert_eq!(relative("s3://b/w/t", "s3://b/w/t/data/x.parquet"), "data/x.parquet");
        assert_eq!(relative("/w/t", "/w/other/x.parquet"), "file:///w/other/x.parquet");
        assert_eq!(relative("/w/t", "/w/tt/x.parquet"), "file:///w/tt/x.parquet");
        for (root, path) in [
            ("/w/t", "/w/t/data/d=2024%2F01/a b.parquet"),
            ("s3://b/w/t", "s3://b/w/t/data/x.parquet"),
            ("/w/t", "/w/other/é x.parquet"),
        ] {
            assert_eq!(absolute(root, &relative(root, path)), path);
        }
    }
}
