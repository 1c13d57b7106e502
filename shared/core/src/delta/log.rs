//! A Delta table's state read from its log, and new commits and checkpoints written to it.
//!
//! ```text
//!  _delta_log/
//!    _last_checkpoint                       {"version": 20, "size": n}   (a hint)
//!    00000000000000000020.checkpoint.parquet the state at 20: protocol, metaData, txn, add, remove
//!    00000000000000000021.json              one action a line
//!    00000000000000000022.json
//!
//!  read:   the newest checkpoint listed (or none) ─▶ its actions ─▶ each later commit in
//!          order, no version missing ─▶ the state at the last one
//!  commit: put-if-absent of N+1.json, N the version read ─ taken ─▶ the caller reads
//!          again and decides again (another writer committed N+1 first)
//!  every 10th version: its checkpoint, then _last_checkpoint
//! ```

use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::DeltaError;
use super::actions::{Action, Add, DeletionVector, Metadata, Protocol, Remove, Txn, from_lines, to_lines};
use super::store::{LogFile, LogStore};

/// A checkpoint is written at every version that is a multiple of this.
pub const CHECKPOINT_INTERVAL: i64 = 10;

/// How long commits and checkpoints are kept for time travel (Delta's default
/// `delta.logRetentionDuration`, 30 days): older ones go once a newer checkpoint, itself
/// older than this, makes them unneeded.
pub const LOG_RETENTION_MS: i64 = 30 * 24 * 60 * 60 * 1000;

/// How long a removed file's tombstone is kept in checkpoints (Delta's default
/// `delta.deletedFileRetentionDuration`, 7 days), counted back from the newest time the
/// log records.
pub const TOMBSTONE_RETENTION_MS: i64 = 7 * 24 * 60 * 60 * 1000;

const LAST_CHECKPOINT: &str = "_last_checkpoint";

/// The log folder of the table at `root`.
pub fn log_dir(root: &str) -> String {
    format!("{}/_delta_log", root.trim_end_matches('/'))
}

fn commit_name(version: i64) -> String {
    format!("{version:020}.json")
}

fn checkpoint_name(version: i64) -> String {
    format!("{version:020}.checkpoint.parquet")
}

/// A Delta table's state at one version.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeltaSnapshot {
    /// The table's root (its location, without a trailing `/`).
    pub root: String,
    pub version: i64,
    pub protocol: Option<Protocol>,
    pub metadata: Option<Metadata>,
    /// The files in the table, by their `add.path`.
    pub files: BTreeMap<String, Add>,
    /// Files removed (their tombstones), by path.
    pub tombstones: BTreeMap<String, Remove>,
    /// Each application's last transaction version.
    pub txns: BTreeMap<String, Txn>,
    /// The newest time the files' actions record (an add's modification, a removal).
    pub newest_ms: i64,
}

impl DeltaSnapshot {
    /// The newest state of the table at `root`; `None` when it has no log.
    pub async fn read(store: &dyn LogStore, root: &str) -> Result<Option<DeltaSnapshot>, DeltaError> {
        Self::read_at(store, root, None).await
    }

    /// The state at `version` (`None`: the newest). Commits older than the newest
    /// checkpoint at or before it are not read.
    pub async fn read_at(
        store: &dyn LogStore,
        root: &str,
        version: Option<i64>,
    ) -> Result<Option<DeltaSnapshot>, DeltaError> {
        let root = root.trim_end_matches('/').to_string();
        let dir = log_dir(&root);
        // The newest state is listed from the checkpoint `_last_checkpoint` names (a hint:
        // a newer checkpoint listed is taken); an older state, or a log without the hint
        // or whose hinted checkpoint is gone, from its start.
        let hint = match version {
            None => last_checkpoint(store, &dir).await?,
            Some(_) => None,
        };
        // Neither a checkpoint named nor a first commit: no log, known without a listing
        // (which some stores, S3 Tables' among them, refuse). The log's start is deleted
        // only once `_last_checkpoint` names a later checkpoint ([`expire_log`]).
        if hint.is_none() && version.is_none() && !store.exists(&format!("{dir}/{}", commit_name(0))).await? {
            return Ok(None);
        }
        let mut listed = Listed::of(store.list(&dir, hint.map(|v| format!("{v:020}")).as_deref()).await?);
        if hint.is_some_and(|v| !listed.checkpoints.contains(&v)) {
            listed = Listed::of(store.list(&dir, None).await?);
        }
        let Listed { mut commits, checkpoints } = listed;
        let oldest = commits.iter().chain(&checkpoints).min().copied();
        let wanted = |v: &i64| version.is_none_or(|want| *v <= want);
        commits.retain(wanted);
        commits.sort_unstable();
        let checkpoint = checkpoints.into_iter().filter(wanted).max();
        let Some(last) = commits.last().copied().max(checkpoint) else {
            return match (version, oldest) {
                (Some(want), Some(oldest)) => Err(DeltaError::Log {
                    path: dir,
                    detail: format!(
                        "version {want} is no longer in the log (past its retention): the oldest is {oldest}"
                    ),
                }),
                _ => Ok(None),
            };
        };
        if let Some(want) = version
            && want != last
        {
            return Err(DeltaError::Log { path: dir, detail: format!("no version {want}: the newest is {last}") });
        }
        let mut state = DeltaSnapshot { root, version: -1, ..Default::default() };
        if let Some(cp) = checkpoint {
            let path = format!("{dir}/{}", checkpoint_name(cp));
            let bytes = store.read(&path).await?.ok_or_else(|| gone(&path))?;
            state.apply(read_checkpoint(&path, bytes)?);
            state.version = cp;
        }
        state.apply_commits(store, &dir, commits).await?;
        Ok(Some(state))
    }

    /// This state brought to the table's newest version: the commits after it listed and
    /// applied (a long-lived process's mirror, [`super::cache`]). Commits past its version
    /// that start later than the next one (the next deleted by log retention) read the
    /// log anew.
    pub async fn refresh(mut self, store: &dyn LogStore) -> Result<DeltaSnapshot, DeltaError> {
        let dir = log_dir(&self.root);
        let Listed { mut commits, .. } = Listed::of(store.list(&dir, Some(&format!("{:020}", self.version))).await?);
        commits.retain(|v| *v > self.version);
        commits.sort_unstable();
        if commits.first().is_some_and(|&v| v != self.version + 1) {
            return Self::read(store, &self.root).await?.ok_or_else(|| gone(&dir));
        }
        self.apply_commits(store, &dir, commits).await?;
        Ok(self)
    }

    /// The state after `actions`, committed as `version`.
    pub fn after(mut self, actions: Vec<Action>, version: i64) -> DeltaSnapshot {
        self.apply(actions);
        self.version = version;
        self
    }

    /// Applies the commits `commits` (ascending) of the log in `dir` that follow this
    /// state's version, each the next one.
    async fn apply_commits(&mut self, store: &dyn LogStore, dir: &str, commits: Vec<i64>) -> Result<(), DeltaError> {
        let from = self.version;
        for v in commits.into_iter().filter(|v| *v > from) {
            let path = format!("{dir}/{}", commit_name(v));
            if v != self.version + 1 {
                let detail = format!("version {} is missing before {v}", self.version + 1);
                return Err(DeltaError::Log { path, detail });
            }
            let bytes = store.read(&path).await?.ok_or_else(|| gone(&path))?;
            let text = std::str::from_utf8(&bytes)
                .map_err(|e| DeltaError::Log { path: path.clone(), detail: format!("not UTF-8: {e}") })?;
            let actions = from_lines(text).map_err(|(line, detail)| DeltaError::Log {
                path: path.clone(),
                detail: format!("line {line}: {detail}"),
            })?;
            self.apply(actions);
            self.version = v;
        }
        Ok(())
    }

    /// The table's state with `actions` applied, as readers replay them.
    fn apply(&mut self, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Protocol(p) => self.protocol = Some(p),
                Action::MetaData(m) => self.metadata = Some(m),
                Action::Add(add) => {
                    self.newest_ms = self.newest_ms.max(add.modification_time);
                    self.tombstones.remove(&add.path);
                    self.files.insert(add.path.clone(), add);
                }
                Action::Remove(remove) => {
                    self.newest_ms = self.newest_ms.max(remove.deletion_timestamp.unwrap_or(0));
                    // A file is its path and its deletion vector: removing it with another
                    // vector (a new vector added in the same commit) leaves the new one.
                    let vector = |v: Option<&DeletionVector>| v.map(DeletionVector::id);
                    if self.files.get(&remove.path).is_some_and(|add| {
                        vector(add.deletion_vector.as_ref()) == vector(remove.deletion_vector.as_ref())
                    }) {
                        self.files.remove(&remove.path);
                    }
                    self.tombstones.insert(remove.path.clone(), remove);
                }
                Action::Txn(txn) => {
                    self.txns.insert(txn.app_id.clone(), txn);
                }
                Action::CommitInfo(_) => {}
            }
        }
    }

    /// Commits `actions` as the next version: `Ok(Some(version))`, or `Ok(None)` when
    /// another writer took that version first (read again and decide again). At every
    /// [`CHECKPOINT_INTERVAL`]th version a checkpoint follows; failing to write it fails
    /// nothing (the next one is written ten versions later).
    pub async fn commit(&self, store: &dyn LogStore, actions: Vec<Action>) -> Result<Option<i64>, DeltaError> {
        let version = self.version + 1;
        let dir = log_dir(&self.root);
        let path = format!("{dir}/{}", commit_name(version));
        let text = to_lines(&actions).map_err(|e| DeltaError::Log { path: path.clone(), detail: e.to_string() })?;
        if !store.put_if_absent(&path, Bytes::from(text)).await? {
            return Ok(None);
        }
        if version > 0 && version % CHECKPOINT_INTERVAL == 0 {
            let next = self.clone().after(actions, version);
            if let Err(e) = next.checkpoint(store).await {
                tracing::warn!(table = %self.root, version, error = %e, "Delta checkpoint not written; the next one will be");
            }
        }
        Ok(Some(version))
    }

    /// Writes this state's checkpoint and points `_last_checkpoint` at it.
    pub async fn checkpoint(&self, store: &dyn LogStore) -> Result<(), DeltaError> {
        let dir = log_dir(&self.root);
        let path = format!("{dir}/{}", checkpoint_name(self.version));
        let actions = self.actions();
        let bytes = write_checkpoint(&path, &actions)?;
        store.put(&path, bytes).await?;
        let last = serde_json::json!({ "version": self.version, "size": actions.len() }).to_string();
        store.put(&format!("{dir}/{LAST_CHECKPOINT}"), Bytes::from(last)).await?;
        Ok(())
    }

    /// The state as actions: what a checkpoint holds.
    fn actions(&self) -> Vec<Action> {
        let head = self.protocol.iter().cloned().map(Action::Protocol);
        let meta = self.metadata.iter().cloned().map(Action::MetaData);
        let txns = self.txns.values().cloned().map(Action::Txn);
        let adds = self.files.values().cloned().map(Action::Add);
        let kept_since = self.newest_ms.saturating_sub(TOMBSTONE_RETENTION_MS);
        let removes = self
            .tombstones
            .values()
            .filter(|r| r.deletion_timestamp.is_none_or(|at| at >= kept_since))
            .cloned()
            .map(Action::Remove);
        head.chain(meta).chain(txns).chain(adds).chain(removes).collect()
    }
}

/// Deletes the commits and checkpoints of the table at `root` that time travel no longer
/// needs: those before the newest checkpoint whose commit is older than `retention_ms`
/// at `now_ms` (that checkpoint then starts the log). Returns how many went.
pub async fn expire_log(store: &dyn LogStore, root: &str, now_ms: i64, retention_ms: i64) -> Result<usize, DeltaError> {
    let dir = log_dir(root.trim_end_matches('/'));
    let files = store.list(&dir, None).await?;
    let cutoff = now_ms.saturating_sub(retention_ms);
    let version_of = |f: &LogFile| {
        let v = f.name.strip_suffix(".json").or_else(|| f.name.strip_suffix(".checkpoint.parquet"))?;
        v.parse::<i64>().ok()
    };
    let old_commits: std::collections::HashSet<i64> =
        files.iter().filter(|f| f.name.ends_with(".json") && f.modified_ms <= cutoff).filter_map(version_of).collect();
    // Only up to the checkpoint `_last_checkpoint` names: a reader finds the log by it
    // once its first commit is gone.
    let named = last_checkpoint(store, &dir).await?.unwrap_or(-1);
    let Some(start) = files
        .iter()
        .filter(|f| f.name.ends_with(".checkpoint.parquet"))
        .filter_map(version_of)
        .filter(|v| old_commits.contains(v) && *v <= named)
        .max()
    else {
        return Ok(0);
    };
    let doomed: Vec<String> = files
        .iter()
        .filter(|f| version_of(f).is_some_and(|v| v < start))
        .map(|f| format!("{dir}/{}", f.name))
        .collect();
    store.delete(&doomed).await?;
    if !doomed.is_empty() {
        tracing::info!(
            log = dir,
            files = doomed.len(),
            from_version = start,
            "Delta log files past their retention deleted"
        );
    }
    Ok(doomed.len())
}

/// A log folder's commits and checkpoints, by version.
struct Listed {
    commits: Vec<i64>,
    checkpoints: Vec<i64>,
}

impl Listed {
    fn of(files: Vec<LogFile>) -> Listed {
        let (mut commits, mut checkpoints) = (Vec::new(), Vec::new());
        for f in files {
            if let Some(v) = f.name.strip_suffix(".json").and_then(|v| v.parse::<i64>().ok()) {
                commits.push(v);
            } else if let Some(v) = f.name.strip_suffix(".checkpoint.parquet").and_then(|v| v.parse::<i64>().ok()) {
                checkpoints.push(v);
            }
        }
        Listed { commits, checkpoints }
    }
}

/// The version `_last_checkpoint` names; `None` without it, or when it holds no version
/// (it is a hint: the listing is read from the start then).
async fn last_checkpoint(store: &dyn LogStore, dir: &str) -> Result<Option<i64>, DeltaError> {
    let Some(bytes) = store.read(&format!("{dir}/{LAST_CHECKPOINT}")).await? else { return Ok(None) };
    let version = serde_json::from_slice::<serde_json::Value>(&bytes).ok().and_then(|v| v["version"].as_i64());
    if version.is_none() {
        tracing::warn!(log = dir, "_last_checkpoint names no version: the log is listed from its start");
    }
    Ok(version)
}

fn gone(path: &str) -> DeltaError {
    DeltaError::Log { path: path.to_string(), detail: "listed, then gone".into() }
}

/// A checkpoint's columns, one per action (the protocol's names; those Floe writes).
fn checkpoint_schema() -> SchemaRef {
    let s = |name: &str| Field::new(name, DataType::Utf8, true);
    let long = |name: &str| Field::new(name, DataType::Int64, true);
    let map = |name: &str| {
        let entry = Fields::from(vec![Field::new("key", DataType::Utf8, false), s("value")]);
        Field::new(name, DataType::Map(Arc::new(Field::new("key_value", DataType::Struct(entry), false)), false), true)
    };
    let list =
        |name: &str| Field::new(name, DataType::List(Arc::new(Field::new("element", DataType::Utf8, true))), true);
    let strukt = |name: &str, fields: Vec<Field>| Field::new(name, DataType::Struct(fields.into()), true);
    let int = |name: &str| Field::new(name, DataType::Int32, true);
    let vector = || {
        let fields =
            vec![s("storageType"), s("pathOrInlineDv"), int("offset"), int("sizeInBytes"), long("cardinality")];
        strukt("deletionVector", fields)
    };
    Arc::new(Schema::new(vec![
        strukt("txn", vec![s("appId"), long("version"), long("lastUpdated")]),
        strukt(
            "add",
            vec![
                s("path"),
                map("partitionValues"),
                long("size"),
                long("modificationTime"),
                Field::new("dataChange", DataType::Boolean, true),
                s("stats"),
                vector(),
            ],
        ),
        strukt(
            "remove",
            vec![
                s("path"),
                long("deletionTimestamp"),
                Field::new("dataChange", DataType::Boolean, true),
                Field::new("extendedFileMetadata", DataType::Boolean, true),
                long("size"),
                vector(),
            ],
        ),
        strukt(
            "metaData",
            vec![
                s("id"),
                s("name"),
                s("description"),
                strukt("format", vec![s("provider"), map("options")]),
                s("schemaString"),
                list("partitionColumns"),
                map("configuration"),
                long("createdTime"),
            ],
        ),
        strukt(
            "protocol",
            vec![
                Field::new("minReaderVersion", DataType::Int32, true),
                Field::new("minWriterVersion", DataType::Int32, true),
                list("readerFeatures"),
                list("writerFeatures"),
            ],
        ),
    ]))
}

/// The actions as a checkpoint's Parquet: each a row, its action's column set.
fn write_checkpoint(path: &str, actions: &[Action]) -> Result<Bytes, DeltaError> {
    let fail = |detail: String| DeltaError::Log { path: path.to_string(), detail };
    let schema = checkpoint_schema();
    let text = to_lines(actions).map_err(|e| fail(e.to_string()))?;
    let mut decoder = arrow_json::ReaderBuilder::new(schema.clone())
        .with_batch_size(actions.len().max(1))
        .build_decoder()
        .map_err(|e| fail(e.to_string()))?;
    decoder.decode(text.as_bytes()).map_err(|e| fail(e.to_string()))?;
    let batch =
        decoder.flush().map_err(|e| fail(e.to_string()))?.unwrap_or_else(|| RecordBatch::new_empty(schema.clone()));
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, schema, None).map_err(|e| fail(e.to_string()))?;
    writer.write(&batch).map_err(|e| fail(e.to_string()))?;
    writer.close().map_err(|e| fail(e.to_string()))?;
    Ok(Bytes::from(out))
}

/// A checkpoint's actions (its rows back as JSON lines, nulls left out).
fn read_checkpoint(path: &str, bytes: Bytes) -> Result<Vec<Action>, DeltaError> {
    let fail = |detail: String| DeltaError::Log { path: path.to_string(), detail };
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| fail(e.to_string()))?
        .build()
        .map_err(|e| fail(e.to_string()))?;
    let mut text = Vec::new();
    {
        let mut writer = arrow_json::LineDelimitedWriter::new(Cursor::new(&mut text));
        for batch in reader {
            writer.write(&batch.map_err(|e| fail(e.to_string()))?).map_err(|e| fail(e.to_string()))?;
        }
        writer.finish().map_err(|e| fail(e.to_string()))?;
    }
    let text = String::from_utf8(text).map_err(|e| fail(e.to_string()))?;
    from_lines(&text).map_err(|(line, detail)| fail(format!("row {line}: {detail}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delta::actions::FileFormat;
    use crate::delta::store::LocalLogStore;

    fn add(path: &str) -> Action {
        Action::Add(Add {
            path: path.into(),
            partition_values: BTreeMap::new(),
            size: 1,
            modification_time: 2,
            data_change: true,
            stats: Some(r#"{"numRecords":1}"#.into()),
            deletion_vector: None,
        })
    }

    fn first() -> Vec<Action> {
        let metadata = Metadata {
            id: "id".into(),
            name: None,
            description: None,
            format: FileFormat { provider: "parquet".into(), options: BTreeMap::new() },
            schema_string: "{}".into(),
            partition_columns: vec![],
            configuration: BTreeMap::from([("delta.columnMapping.mode".into(), "id".into())]),
            created_time: Some(1),
        };
        let protocol =
            Protocol { min_reader_version: 2, min_writer_version: 5, reader_features: None, writer_features: None };
        vec![Action::Protocol(protocol), Action::MetaData(metadata)]
    }

    #[tokio::test]
    async fn commits_replay_through_checkpoints_to_the_same_state() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_string_lossy().into_owned();
        let store = LocalLogStore;
        assert_eq!(DeltaSnapshot::read(&store, &root).await.unwrap(), None);
        let mut state = DeltaSnapshot { root: root.clone(), version: -1, ..Default::default() };
        for v in 0..23 {
            let mut actions = if v == 0 { first() } else { vec![] };
            actions.push(add(&format!("data/{v}.parquet")));
            if v % 3 == 0 && v > 0 {
                let path = format!("data/{}.parquet", v - 1);
                actions.push(Action::Remove(Remove {
                    path,
                    deletion_timestamp: Some(v),
                    data_change: false,
                    extended_file_metadata: None,
                    size: None,
                    deletion_vector: None,
                }));
            }
            actions.push(Action::Txn(Txn { app_id: "app".into(), version: v, last_updated: None }));
            assert_eq!(state.commit(&store, actions.clone()).await.unwrap(), Some(v));
            // The version is taken now: a second writer of it loses.
            assert_eq!(state.commit(&store, actions).await.unwrap(), None);
            state = DeltaSnapshot::read(&store, &root).await.unwrap().unwrap();
        }
        let names: Vec<String> = store.list(&log_dir(&root), None).await.unwrap().into_iter().map(|f| f.name).collect();
        assert!(names.contains(&checkpoint_name(20)) && names.contains(&checkpoint_name(10)), "{names:?}");
        assert_eq!(state.version, 22);
        assert_eq!(state.files.len(), 23 - 7);
        assert_eq!(state.tombstones.len(), 7);
        assert_eq!(state.txns["app"].version, 22);
        assert_eq!(state.metadata.as_ref().unwrap().configuration["delta.columnMapping.mode"], "id");

        // The same state replayed from the commits alone (checkpoints removed).
        let cps: Vec<String> =
            names.iter().filter(|n| n.contains("checkpoint")).map(|n| format!("{}/{n}", log_dir(&root))).collect();
        let from_checkpoint = state.clone();
        store.delete(&cps).await.unwrap();
        assert_eq!(DeltaSnapshot::read(&store, &root).await.unwrap().unwrap(), from_checkpoint);
        // Time travel: the state at version 4 knows nothing later.
        let at4 = DeltaSnapshot::read_at(&store, &root, Some(4)).await.unwrap().unwrap();
        assert_eq!((at4.files.len(), at4.txns["app"].version), (4, 4));
    }

    #[tokio::test]
    async fn a_file_with_a_new_deletion_vector_is_the_same_file_through_checkpoints_in_either_action_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_string_lossy().into_owned();
        let store = LocalLogStore;
        let vector = |n: i64| DeletionVector {
            storage_type: "u".into(),
            path_or_inline_dv: format!("data{:0>20}", n),
            offset: Some(1),
            size_in_bytes: 20,
            cardinality: n,
        };
        let with = |path: &str, v: Option<DeletionVector>| match add(path) {
            Action::Add(a) => Action::Add(Add { deletion_vector: v, ..a }),
            _ => unreachable!(),
        };
        let remove = |path: &str, v: Option<DeletionVector>| {
            Action::Remove(Remove {
                path: path.into(),
                deletion_timestamp: Some(1),
                data_change: true,
                extended_file_metadata: None,
                size: None,
                deletion_vector: v,
            })
        };
        let mut state = DeltaSnapshot { root: root.clone(), version: -1, ..Default::default() };
        let mut commits = vec![[first(), vec![add("a"), add("b")]].concat()];
        // `a` gets a vector, removed first then added; `b` added first then removed.
        commits.push(vec![remove("a", None), with("a", Some(vector(1)))]);
        commits.push(vec![with("b", Some(vector(2))), remove("b", None)]);
        commits.push(vec![remove("a", Some(vector(1))), with("a", Some(vector(3)))]);
        for v in 4..=10 {
            commits.push(vec![Action::Txn(Txn { app_id: "app".into(), version: v, last_updated: None })]);
        }
        for actions in commits {
            let v = state.version + 1;
            assert_eq!(state.commit(&store, actions).await.unwrap(), Some(v));
            state = DeltaSnapshot::read(&store, &root).await.unwrap().unwrap();
        }
        let cardinality = |s: &DeltaSnapshot, p: &str| s.files[p].deletion_vector.as_ref().map(|v| v.cardinality);
        assert_eq!((cardinality(&state, "a"), cardinality(&state, "b")), (Some(3), Some(2)));
        let names: Vec<String> = store.list(&log_dir(&root), None).await.unwrap().into_iter().map(|f| f.name).collect();
        assert!(names.contains(&checkpoint_name(10)), "{names:?}");
        store.delete(&[format!("{}/{}", log_dir(&root), checkpoint_name(10))]).await.unwrap();
        store.delete(&[format!("{}/_last_checkpoint", log_dir(&root))]).await.unwrap();
        let commits_only = DeltaSnapshot::read(&store, &root).await.unwrap().unwrap();
        assert_eq!(state, commits_only, "the checkpoint keeps each file's vector");
    }

    #[tokio::test]
    async fn a_state_kept_is_refreshed_with_the_commits_after_it_and_read_anew_past_a_gap() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_string_lossy().into_owned();
        let store = LocalLogStore;
        let empty = DeltaSnapshot { root: root.clone(), version: -1, ..Default::default() };
        empty.commit(&store, [first(), vec![add("data/0.parquet")]].concat()).await.unwrap();
        let kept = DeltaSnapshot::read(&store, &root).await.unwrap().unwrap();
        assert_eq!(kept.clone().refresh(&store).await.unwrap(), kept, "nothing newer");
        // Another writer commits versions 1 and 2.
        let mut other = kept.clone();
        for v in 1..=2 {
            other.commit(&store, vec![add(&format!("data/{v}.parquet"))]).await.unwrap();
            other = DeltaSnapshot::read(&store, &root).await.unwrap().unwrap();
        }
        let refreshed = kept.clone().refresh(&store).await.unwrap();
        assert_eq!((refreshed.version, refreshed.files.len()), (2, 3));
        assert_eq!(refreshed, other);
        // Version 1 gone (as log retention deletes it): the log is read anew.
        store.delete(&[format!("{}/{}", log_dir(&root), commit_name(1))]).await.unwrap();
        let read = kept.refresh(&store).await;
        assert!(
            read.is_err_and(|e| e.to_string().contains("missing before 2")),
            "replayed from its start, found the gap"
        );
    }

    #[tokio::test]
    async fn commits_past_the_retention_go_up_to_the_checkpoint_that_starts_the_log_after_them() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_string_lossy().into_owned();
        let store = LocalLogStore;
        let mut state = DeltaSnapshot { root: root.clone(), version: -1, ..Default::default() };
        for v in 0..23 {
            let mut actions = if v == 0 { first() } else { vec![] };
            actions.push(add(&format!("data/{v}.parquet")));
            state.commit(&store, actions).await.unwrap();
            state = DeltaSnapshot::read(&store, &root).await.unwrap().unwrap();
        }
        // Versions 0 to 15 were written long ago; 16 on, today.
        let (day, now) = (24 * 60 * 60 * 1000_i64, 100 * 24 * 60 * 60 * 1000_i64);
        for v in 0..=15 {
            let path = dir.path().join(format!("_delta_log/{}", commit_name(v)));
            let old = std::time::UNIX_EPOCH + std::time::Duration::from_millis((now - 40 * day) as u64);
            std::fs::File::options().write(true).open(path).unwrap().set_modified(old).unwrap();
        }
        assert_eq!(expire_log(&store, &root, now, LOG_RETENTION_MS).await.unwrap(), 10, "versions 0 to 9");
        let names: Vec<String> = store.list(&log_dir(&root), None).await.unwrap().into_iter().map(|f| f.name).collect();
        assert_eq!(names.first().map(String::as_str), Some("00000000000000000010.checkpoint.parquet"), "{names:?}");
        assert_eq!(DeltaSnapshot::read(&store, &root).await.unwrap().unwrap(), state);
        assert!(DeltaSnapshot::read_at(&store, &root, Some(5)).await.is_err(), "past the retention");
        assert_eq!(DeltaSnapshot::read_at(&store, &root, Some(12)).await.unwrap().unwrap().files.len(), 13);
        // Nothing else is old enough: a second run deletes nothing.
        assert_eq!(expire_log(&store, &root, now, LOG_RETENTION_MS).await.unwrap(), 0);
    }

    #[test]
    fn a_checkpoint_keeps_the_tombstones_of_the_retention_only() {
        let mut state = DeltaSnapshot::default();
        let remove = |path: &str, at| {
            Action::Remove(Remove {
                path: path.into(),
                deletion_timestamp: Some(at),
                data_change: true,
                extended_file_metadata: None,
                size: None,
                deletion_vector: None,
            })
        };
        state.apply(vec![
            remove("old", 0),
            remove("recent", TOMBSTONE_RETENTION_MS + 5),
            remove("new", TOMBSTONE_RETENTION_MS * 2),
        ]);
        let kept: Vec<String> = state
            .actions()
            .into_iter()
            .filter_map(|a| if let Action::Remove(r) = a { Some(r.path) } else { None })
            .collect();
        assert_eq!(kept, ["new", "recent"]);
    }

    #[tokio::test]
    async fn a_missing_version_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_string_lossy().into_owned();
        let store = LocalLogStore;
        let log = log_dir(&root);
        store.put(&format!("{log}/{}", commit_name(0)), Bytes::from(to_lines(&first()).unwrap())).await.unwrap();
        store.put(&format!("{log}/{}", commit_name(2)), Bytes::from(to_lines(&[add("a")]).unwrap())).await.unwrap();
        let e = DeltaSnapshot::read(&store, &root).await.unwrap_err().to_string();
        assert!(e.contains("00000000000000000002.json") && e.contains("version 1 is missing"), "{e}");
    }
}
