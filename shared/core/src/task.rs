//! The CommitTask: what the materializer hands the committer for one segment.
//!
//! It travels as JSON through the FIFO queue (group = the table, deduplication id = the
//! segment's identity) and is versioned: `version` is [`TASK_VERSION`] (1), or
//! [`PARTITIONED_TASK_VERSION`] (2) when the files are partitioned — so that a committer
//! that predates partitioning refuses them rather than recording their files without
//! their partition values. A committer refuses versions it does not know rather than
//! guessing.
//!
//! ```json
//! {
//!   "version": 1,
//!   "task_id": "3f2a…",                       // the segment's identity (stable across retries)
//!   "table": {"namespace": "kafka", "name": "orders"},
//!   "dead_letter_table": {"namespace": "kafka", "name": "orders_dlq"},
//!   "topic": "orders", "partition": 3,
//!   "offsets": {"first": 1000, "last": 1999},  // every offset the segment covers
//!   "record_count": 998,                      // committed data records written
//!   "max_timestamp": 1764489599500,           // their newest timestamp (absent: unknown)
//!   "without_rows": 2,                        // offsets without rows: markers, aborted, holes, skipped
//!   "data_files": [{"first_offset": 1000, "last_offset": 1999, "record_count": 998,
//!                   "data_file": { …Iceberg DataFile JSON… }}],
//!   "dead_letter_files": [],
//!   "open_transactions": [{"producer_id": 7, "producer_epoch": 0, "first_offset": 1990,
//!                          "last_offset": 1995, "records": 2, "files": [ … ],
//!                          "first_timestamp": 1764489598000, "max_timestamp": 1764489598500}],
//!   "transaction_markers": [{"producer_id": 5, "producer_epoch": 0, "offset": 1001, "commit": true,
//!                            "timestamp": 1764489599000}],      // the broker's clock
//!   "transaction_timeout_ms": 900000,          // the topic's transaction_timeout
//!   "schema": {"key_format": "raw", "value_format": "avro", "iceberg": { …Iceberg schema JSON… },
//!              "partition_spec": {"spec-id": 0, "fields": [{"source-id": 4, "field-id": 1000,
//!                                 "name": "timestamp_day", "transform": "day"}]}},  // absent: unpartitioned
//!   "dead_letter_schema": null,
//!   "source": {"uri": "s3://tiered/orders-…/3/00000000000000001000-….rsm-manifest",
//!              "etag": "\"9b2c…\"", "size": 1048576, "layout": "tiered_storage",
//!              "segment_id": "…", "topic_id": "…", "leader_epochs": {"0": 0}},
//!   "created_at_ms": 1764489600000
//! }
//! ```
//!
//! `offsets` spans the whole segment, control records and aborted transactions included:
//! once committed, the table holds every committed record of that range. Records of
//! transactions still open at the end of the segment are in `open_transactions` (their
//! files are written but not part of `data_files`); the committer appends them when a
//! later task brings their COMMIT marker, and never when it brings ABORT.
//!
//! `schema.partition_spec` is the spec the files were laid out by (bound to
//! `schema.iceberg`), and each `data_file`'s `partition` holds its value: the committer
//! has no configuration, so the spec travels here (it creates the table with it). Tasks
//! without it (older ones, dead letters) are unpartitioned.

use std::collections::BTreeMap;

use iceberg::spec::{DataFile, FormatVersion, PartitionSpec, Schema, StructType};
use serde::{Deserialize, Serialize};

use crate::datafile::WrittenFile;
use crate::segment::{SegmentLayout, TxnMarker};
pub use crate::table::deletes::AppliedDelete;
pub use crate::vocabulary::{BadRecord, OffsetRange, PendingTransaction, TableName, TaskFile};
use crate::vocabulary::{Formats, ordered_partition_json};

/// The CommitTask JSON version of unpartitioned tasks (and of the stored-task pointer).
pub const TASK_VERSION: u32 = 1;
/// The version of tasks whose files are partitioned; this build reads both.
pub const PARTITIONED_TASK_VERSION: u32 = 2;

/// The version a task with files laid out by `spec` carries.
pub fn task_version(spec: Option<&PartitionSpec>) -> u32 {
    if spec.is_some_and(|s| !s.is_unpartitioned()) { PARTITIONED_TASK_VERSION } else { TASK_VERSION }
}

fn known_version(version: u32) -> Result<(), TaskError> {
    if (TASK_VERSION..=PARTITIONED_TASK_VERSION).contains(&version) { Ok(()) } else { Err(TaskError::Version(version)) }
}

/// `Some(spec)` when it partitions anything: what tasks carry.
pub fn partitioned(spec: &PartitionSpec) -> Option<PartitionSpec> {
    (!spec.is_unpartitioned()).then(|| spec.clone())
}

impl TaskFile {
    /// `partition_type`: the type of the file's partition value (empty: unpartitioned).
    pub fn from_written(file: &WrittenFile, partition_type: &StructType) -> Result<TaskFile, iceberg::Error> {
        Ok(TaskFile {
            first_offset: file.first_offset,
            last_offset: file.last_offset,
            record_count: file.record_count(),
            data_file: file.data_file_json(partition_type)?,
        })
    }
}

/// `file` (written with `schema`, its partition value of type `written`) with its
/// partition value of type `table`, the table's partition type now (spec `spec_id`). A
/// file written before a partition source column was promoted (int → long, float →
/// double) holds an int where the table's partition field is a long by the time it is
/// committed; recorded as it is, iceberg-rust would write the wrong type into the
/// manifest (and 0.10.1 panics summarizing it). Its bounds stay as written: readers
/// widen those themselves, as the Iceberg spec has them do.
pub fn retype_partition(
    file: DataFile,
    schema: &Schema,
    spec_id: i32,
    written: &StructType,
    table: &StructType,
) -> Result<DataFile, iceberg::Error> {
    if written == table {
        return Ok(file);
    }
    let json = iceberg::spec::serialize_data_file_to_json(file, written, iceberg::spec::FormatVersion::V2)?;
    let value: serde_json::Value = serde_json::from_str(&json)
        .map_err(|e| iceberg::Error::new(iceberg::ErrorKind::Unexpected, format!("data file JSON: {e}")))?;
    iceberg::spec::deserialize_data_file_from_json(&ordered_partition_json(&value, table), spec_id, table, schema)
}

/// The schema the files were written with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskSchema {
    pub key_format: String,
    pub value_format: String,
    pub iceberg: Schema,
    /// The partition spec the files are laid out by, bound to `iceberg`; `None`: unpartitioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_spec: Option<PartitionSpec>,
    /// The format version of the table, should the committer create it (`None`: 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format_version: Option<FormatVersion>,
    /// An upsert topic's key columns (dotted paths); `None`: an append topic. The table
    /// is created with them, and a table keyed otherwise refuses the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upsert_key: Option<Vec<String>>,
}

/// The object the task was made from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceObject {
    pub uri: String,
    pub etag: Option<String>,
    pub size: u64,
    pub layout: SegmentLayout,
    pub segment_id: Option<String>,
    /// The topic's id, where the layout gives one (tiered storage): a topic deleted and
    /// created again under the same name is another log (`crate::table::offsets`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_id: Option<String>,
    /// Leader epoch → its start offset, from the tiered-storage manifest.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub leader_epochs: BTreeMap<String, i64>,
}

/// One segment's contribution to a table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommitTask {
    pub version: u32,
    pub task_id: String,
    pub table: TableName,
    pub dead_letter_table: Option<TableName>,
    pub topic: String,
    pub partition: i32,
    /// `None` for a segment without batches.
    pub offsets: Option<OffsetRange>,
    pub record_count: u64,
    /// The newest timestamp (ms) of the segment's committed records: the commit's
    /// freshness lag is measured from it. `None`: no record had one, or an older task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_timestamp: Option<i64>,
    /// Records left out as bad (mode `skip`), counted into the snapshot's summary.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped_records: u64,
    /// How many of `offsets` have no row on purpose: control records, records of
    /// transactions aborted in the segment, a compacted topic's holes, bad records
    /// skipped (not dead letters, nor the records of `open_transactions`). Counted into
    /// the table's summary for `floe audit` ([`crate::table::rowless`]); older tasks:
    /// unknown, their offsets uncounted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_rows: Option<u64>,
    /// The table location its data files were written under (`<location>/data/…`): the
    /// table's own, or for a table not yet made the one its catalog assigned, where the
    /// committer creates it. `None`: an older task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_location: Option<String>,
    pub data_files: Vec<TaskFile>,
    pub dead_letter_files: Vec<TaskFile>,
    pub open_transactions: Vec<PendingTransaction>,
    pub transaction_markers: Vec<TxnMarker>,
    /// The topic's `transaction_timeout`: how long after its first record a transaction
    /// is ended at the latest (older tasks: the default, Kafka's 15 minutes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction_timeout_ms: Option<u64>,
    pub schema: TaskSchema,
    pub dead_letter_schema: Option<Schema>,
    pub source: SourceObject,
    pub created_at_ms: i64,
    /// The table formats its rows go to (the topic's `formats`): after committing the
    /// Iceberg table, the committer brings its Delta mirror in step when Delta is one.
    /// Older tasks: Iceberg alone.
    #[serde(default, skip_serializing_if = "Formats::is_default")]
    pub formats: Formats,
    /// Set only on the dead-letter part the committer derives from a task
    /// (`committer::dead_letters`): the task's own table, whose committed offsets decide
    /// which dead letters are still to add. Never sent.
    #[serde(skip)]
    pub dead_letters_of: Option<TableName>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why a task could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("not a CommitTask: {0}")]
    Json(#[from] serde_json::Error),
    #[error("CommitTask version {0} (this build reads versions {TASK_VERSION} to {PARTITIONED_TASK_VERSION})")]
    Version(u32),
}

impl CommitTask {
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }

    pub fn from_json(json: &[u8]) -> Result<CommitTask, TaskError> {
        #[derive(Deserialize)]
        struct Version {
            version: u32,
        }
        let Version { version } = serde_json::from_slice(json)?;
        known_version(version)?;
        Ok(serde_json::from_slice(json)?)
    }
}

/// A compaction: small files of a table rewritten into larger ones, rows unchanged but
/// those other engines' delete files delete.
///
/// ```json
/// {"version": 1, "kind": "compaction", "task_id": "…", "table": {…},
///  "removed": ["s3://…/data/a.parquet", …], "added": [ {TaskFile}, … ],
///  "schema": { …the Iceberg schema the added files were written with… },
///  "partition_spec": { …the table's spec, absent when unpartitioned… }, "created_at_ms": …,
///  "data_sequence_number": 41,
///  "deletes_applied": [{"path": "…/delete-1.parquet", "names": ["…/a.parquet"]}],
///  "left_out": {"path": "…/metadata/floe-left-out-….parquet", "deleted": 3, "expired": 0}}
/// ```
///
/// The committer applies it only if every removed file is still live (else it is
/// rejected and its outputs become orphans), in a `replace` snapshot that carries the
/// committed offsets forward unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionTask {
    pub version: u32,
    pub kind: CompactionKind,
    pub task_id: String,
    pub table: TableName,
    pub removed: Vec<String>,
    pub added: Vec<TaskFile>,
    pub schema: Schema,
    /// The spec the added files are laid out by (the table's), bound to `schema`; `None`: unpartitioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_spec: Option<PartitionSpec>,
    pub created_at_ms: i64,
    /// The data sequence number `added` keep: the snapshot planned from's, under which
    /// delete files committed since the plan still apply to them (Iceberg's
    /// `use-starting-sequence-number`); `None` (older tasks): the new snapshot's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_sequence_number: Option<i64>,
    /// Other engines' delete files the rewrite applied: the rows they delete are not in
    /// `added`. The committer takes the task only while no other delete file (committed
    /// since the plan) deletes by position from its inputs, and drops each of these once
    /// it applies to no live data file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deletes_applied: Vec<AppliedDelete>,
    /// The offsets of the rows the rewrite left out (deleted, or past the topic's
    /// retention), in a file the committer folds into the table's
    /// ([`crate::table::left_out`]); none when it left none out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_out: Option<LeftOutFile>,
    /// The table formats of its topic, as [`CommitTask::formats`]: a compaction of a
    /// table with a Delta mirror is mirrored too.
    #[serde(default, skip_serializing_if = "Formats::is_default")]
    pub formats: Formats,
}

/// A compaction's file of the offsets its rewrite left out, with how many.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOutFile {
    pub path: String,
    pub deleted: u64,
    pub expired: u64,
}

/// The `kind` of a compaction task's JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionKind {
    Compaction,
}

/// A table to stop: a record could not be decoded and the table's bad-record mode is
/// `suspend`. The committer, which owns the tables' status, marks the table suspended
/// with the reason; its tasks are then kept in the queue until an operator resumes it
/// (`floe local resume`), having fixed the schema or chosen another mode.
///
/// ```json
/// {"version": 1, "kind": "suspend", "task_id": "suspend-1f0c…", "table": {…},
///  "topic": "orders", "partition": 0, "offset": 6, "file": "…/00000000000000000000.log",
///  "error": "…what failed, at which byte…"}
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuspendTask {
    pub version: u32,
    pub kind: SuspendKind,
    pub task_id: String,
    pub table: TableName,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// The segment holding the record.
    pub file: String,
    pub error: String,
}

impl SuspendTask {
    pub fn new(table: TableName, topic: &str, partition: i32, offset: i64, file: &str, error: &str) -> SuspendTask {
        SuspendTask {
            version: TASK_VERSION,
            kind: SuspendKind::Suspend,
            // The same record gives the same id: a redelivered event queues no second one.
            // Hashed, as a topic name alone may pass SQS's 128 characters of dedup id.
            task_id: format!(
                "suspend-{:016x}",
                twox_hash::XxHash64::oneshot(0, format!("{topic}\0{partition}\0{offset}").as_bytes())
            ),
            table,
            topic: topic.to_string(),
            partition,
            offset,
            file: file.to_string(),
            error: error.to_string(),
        }
    }

    /// The table's status while suspended: the record and what was wrong with it.
    pub fn reason(&self) -> String {
        format!(
            "bad record: topic {} partition {} offset {} in {}: {}",
            self.topic, self.partition, self.offset, self.file, self.error
        )
    }
}

/// The `kind` of a suspend task's JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SuspendKind {
    Suspend,
}

/// An operator's decision on a stranded transaction part
/// ([`crate::table::state::TableState::stranded`]: its records came after their
/// producer's marker left the table state, and which marker was theirs cannot be told
/// without a guess). The operator, who looked the outcome up in Kafka, sends it
/// (`floe local resolve`, `floe aws resolve`); the committer, which owns the table state,
/// commits the part's records (`commit`) or counts them aborted, in one snapshot. A part
/// that is not stranded (it may still meet its marker) is refused; one no longer pending
/// (decided already) is left alone.
///
/// ```json
/// {"version": 1, "kind": "resolve", "task_id": "resolve-9b1e…", "table": {…},
///  "topic": "orders", "partition": 0, "first_offset": 1005, "commit": true}
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolveTask {
    pub version: u32,
    pub kind: ResolveKind,
    pub task_id: String,
    pub table: TableName,
    /// The part's log, as status names it: the topic (or `<topic>~<id>`, a later
    /// incarnation of it).
    pub topic: String,
    pub partition: i32,
    /// The part's first offset.
    pub first_offset: i64,
    /// Whether its transaction committed.
    pub commit: bool,
}

impl ResolveTask {
    pub fn new(table: TableName, topic: &str, partition: i32, first_offset: i64, commit: bool) -> ResolveTask {
        let key = format!("{table}\0{topic}\0{partition}\0{first_offset}\0{commit}");
        ResolveTask {
            version: TASK_VERSION,
            kind: ResolveKind::Resolve,
            // The same decision gives the same id: sent twice, it is queued once.
            task_id: format!("resolve-{:016x}", twox_hash::XxHash64::oneshot(0, key.as_bytes())),
            table,
            topic: topic.to_string(),
            partition,
            first_offset,
            commit,
        }
    }
}

/// The `kind` of a resolve task's JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolveKind {
    Resolve,
}

/// Whatever a queue message carries.
#[derive(Debug, Clone, PartialEq)]
pub enum Task {
    // Boxed: both are hundreds of bytes (schemas, files, stats), moved through queues.
    Data(Box<CommitTask>),
    Compaction(Box<CompactionTask>),
    Suspend(Box<SuspendTask>),
    Resolve(Box<ResolveTask>),
}

impl Task {
    /// Reads a task: a compaction, a suspension or a resolution when `kind` says so, else a
    /// CommitTask.
    pub fn from_json(json: &[u8]) -> Result<Task, TaskError> {
        #[derive(Deserialize)]
        struct Head {
            version: u32,
            #[serde(default)]
            kind: Option<String>,
        }
        let head: Head = serde_json::from_slice(json)?;
        known_version(head.version)?;
        match head.kind.as_deref() {
            Some("compaction") => Ok(Task::Compaction(serde_json::from_slice(json)?)),
            Some("suspend") => Ok(Task::Suspend(serde_json::from_slice(json)?)),
            Some("resolve") => Ok(Task::Resolve(serde_json::from_slice(json)?)),
            _ => Ok(Task::Data(serde_json::from_slice(json)?)),
        }
    }

    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        match self {
            Task::Data(t) => serde_json::to_string(t),
            Task::Compaction(t) => serde_json::to_string(t),
            Task::Suspend(t) => serde_json::to_string(t),
            Task::Resolve(t) => serde_json::to_string(t),
        }
    }

    pub fn task_id(&self) -> &str {
        match self {
            Task::Data(t) => &t.task_id,
            Task::Compaction(t) => &t.task_id,
            Task::Suspend(t) => &t.task_id,
            Task::Resolve(t) => &t.task_id,
        }
    }

    pub fn table(&self) -> &TableName {
        match self {
            Task::Data(t) => &t.table,
            Task::Compaction(t) => &t.table,
            Task::Suspend(t) => &t.table,
            Task::Resolve(t) => &t.table,
        }
    }
}

/// The files `task` names, per table they belong to; tables it names no file of are left
/// out (a suspension, a segment of control records only).
pub fn held_files(task: &Task) -> BTreeMap<TableName, Vec<String>> {
    let mut held: BTreeMap<TableName, Vec<String>> = BTreeMap::new();
    let mut add = |table: &TableName, paths: Vec<String>| {
        if !paths.is_empty() {
            held.entry(table.clone()).or_default().extend(paths);
        }
    };
    match task {
        Task::Data(t) => {
            // An open transaction's dead letters wait in the table's data directory.
            let open = t.open_transactions.iter().flat_map(|o| o.files.iter().chain(&o.dead_letter_files));
            let files = t.data_files.iter().chain(open);
            add(&t.table, files.map(|f| f.path().to_string()).collect());
            // The committer commits dead letters under this table (none without it).
            if let Some(dlq) = &t.dead_letter_table {
                add(dlq, t.dead_letter_files.iter().map(|f| f.path().to_string()).collect());
            }
        }
        Task::Compaction(t) => {
            let left_out = t.left_out.iter().map(|l| l.path.clone());
            add(&t.table, t.added.iter().map(|f| f.path().to_string()).chain(left_out).collect())
        }
        Task::Suspend(_) | Task::Resolve(_) => {}
    }
    held
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat, Literal, PrimitiveType, Struct, Type};

    use super::*;
    use crate::config::Transform;
    use crate::partition::tests::{field, schema};

    pub(crate) fn task(schema: &Schema, spec: Option<PartitionSpec>, file: TaskFile) -> CommitTask {
        CommitTask {
            formats: Default::default(),
            version: task_version(spec.as_ref()),
            task_id: "t1".into(),
            table: TableName { namespace: "kafka".into(), name: "orders".into() },
            dead_letter_table: None,
            topic: "orders".into(),
            partition: 0,
            offsets: Some(OffsetRange { first: 0, last: 9 }),
            record_count: 10,
            skipped_records: 0,
            without_rows: None,
            table_location: None,
            data_files: vec![file],
            dead_letter_files: vec![],
            open_transactions: vec![],
            transaction_markers: vec![],
            transaction_timeout_ms: None,
            max_timestamp: None,
            schema: TaskSchema {
                key_format: "raw".into(),
                value_format: "raw".into(),
                iceberg: schema.clone(),
                partition_spec: spec,
                format_version: None,
                upsert_key: None,
            },
            dead_letter_schema: None,
            source: SourceObject {
                uri: "s3://b/k".into(),
                etag: None,
                size: 1,
                layout: SegmentLayout::BrokerLogDir,
                segment_id: None,
                topic_id: None,
                leader_epochs: BTreeMap::new(),
            },
            created_at_ms: 0,
            dead_letters_of: None,
        }
    }

    fn written(partition: Struct) -> WrittenFile {
        let data_file = DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path("s3://w/t/data/timestamp_day=2024-10-04/00000-0-x.parquet".into())
            .file_format(DataFileFormat::Parquet)
            .partition(partition)
            .record_count(10)
            .file_size_in_bytes(100)
            .build()
            .unwrap();
        WrittenFile { data_file, first_offset: 0, last_offset: 9 }
    }

    #[test]
    fn partitioned_tasks_carry_the_spec_and_each_file_its_value_through_json() {
        let schema = schema();
        let spec = crate::partition::bind(
            &schema,
            &[field("_kafka.timestamp", Transform::Day), field("region", Transform::Identity)],
            "p",
        )
        .unwrap();
        let value = Struct::from_iter([Some(Literal::date(20_000)), None]);
        let file = TaskFile::from_written(&written(value.clone()), &spec.partition_type(&schema).unwrap()).unwrap();
        let json = Task::Data(Box::new(task(&schema, partitioned(&spec), file))).to_json().unwrap();
        let Task::Data(back) = Task::from_json(json.as_bytes()).unwrap() else { panic!("not a data task") };
        assert_eq!(back.version, PARTITIONED_TASK_VERSION);
        let back_spec = back.schema.partition_spec.clone().unwrap();
        assert_eq!(back_spec, spec);
        let data_file = back.data_files[0].data_file(&back.schema.iceberg, Some(&back_spec)).unwrap();
        assert_eq!(data_file.partition(), &value);
        assert_eq!(data_file.record_count(), 10);
    }

    /// A file partitioned by `qty int` (identity, truncate, bucket), `ratio float` and
    /// `price decimal(9, 2)`, committed after all three were promoted (long, double,
    /// decimal(12, 2)): its values take the new types (a bucket stays an int); a file of
    /// the table's types and an unpartitioned one are left as they are.
    #[test]
    fn partition_values_written_before_a_promotion_take_the_tables_types() {
        let columns = |int, float, decimal| {
            let p = |id, name: &str, t| Arc::new(iceberg::spec::NestedField::optional(id, name, Type::Primitive(t)));
            let fields = vec![p(1, "qty", int), p(2, "ratio", float), p(3, "price", decimal)];
            Schema::builder().with_fields(fields).build().unwrap()
        };
        let decimal = |precision| PrimitiveType::Decimal { precision, scale: 2 };
        let old = columns(PrimitiveType::Int, PrimitiveType::Float, decimal(9));
        let new = columns(PrimitiveType::Long, PrimitiveType::Double, decimal(12));
        let by = [
            field("qty", Transform::Identity),
            field("qty", Transform::Truncate(10)),
            field("qty", Transform::Bucket(4)),
            field("ratio", Transform::Identity),
            field("price", Transform::Identity),
        ];
        let spec = crate::partition::bind(&old, &by, "p").unwrap();
        let (written_type, table_type) = (spec.partition_type(&old).unwrap(), spec.partition_type(&new).unwrap());
        assert_ne!(written_type, table_type);
        let value = |qty: Literal, trunc: Literal, ratio: Literal| {
            Struct::from_iter([qty, trunc, Literal::int(3), ratio, Literal::decimal(12_345)].map(Some))
        };
        let file = written(value(Literal::int(17), Literal::int(10), Literal::float(0.5))).data_file;
        let retyped = retype_partition(file.clone(), &old, 0, &written_type, &table_type).unwrap();
        assert_eq!(retyped.partition(), &value(Literal::long(17), Literal::long(10), Literal::double(0.5)));
        assert_eq!((retyped.file_path(), retyped.record_count()), (file.file_path(), file.record_count()));
        let same = retype_partition(retyped.clone(), &new, 0, &table_type, &table_type).unwrap();
        assert_eq!(same, retyped);
        let empty = StructType::new(vec![]);
        let unpartitioned = written(Struct::empty()).data_file;
        assert_eq!(retype_partition(unpartitioned.clone(), &old, 0, &empty, &empty).unwrap(), unpartitioned);
    }

    #[test]
    fn tasks_without_a_spec_are_unpartitioned_version_1_and_unknown_versions_refused() {
        let schema = schema();
        let file = TaskFile::from_written(&written(Struct::empty()), &StructType::new(vec![])).unwrap();
        let unpartitioned = task(&schema, partitioned(&PartitionSpec::unpartition_spec()), file);
        let json = unpartitioned.to_json().unwrap();
        assert!(!json.contains("partition_spec"), "{json}");
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["version"], TASK_VERSION);
        // As an older materializer wrote it: no partition_spec key at all.
        let back = CommitTask::from_json(json.as_bytes()).unwrap();
        assert_eq!(back.schema.partition_spec, None);
        let data_file = back.data_files[0].data_file(&schema, None).unwrap();
        assert!(data_file.partition().fields().is_empty());
        let future = json.replacen("\"version\":1", "\"version\":3", 1);
        assert!(matches!(Task::from_json(future.as_bytes()), Err(TaskError::Version(3))));
    }

    #[test]
    fn tasks_without_transaction_times_read_as_unknown() {
        let schema = schema();
        let file = TaskFile::from_written(&written(Struct::empty()), &StructType::new(vec![])).unwrap();
        let mut old = task(&schema, None, file);
        old.open_transactions.push(PendingTransaction { producer_id: 7, records: 1, ..PendingTransaction::default() });
        old.transaction_markers.push(TxnMarker {
            producer_id: 7,
            producer_epoch: 0,
            offset: 9,
            commit: true,
            timestamp: None,
        });
        // As an older materializer wrote it: none of the time keys.
        let json = old.to_json().unwrap();
        for key in ["timestamp", "first_timestamp", "log_append_time", "transaction_timeout_ms"] {
            assert!(!json.contains(&format!("\"{key}\":")), "{key} in {json}");
        }
        assert_eq!(CommitTask::from_json(json.as_bytes()).unwrap(), old);
        let mut new = old.clone();
        new.transaction_markers[0].timestamp = Some(1_764_000_000_000);
        new.open_transactions[0].first_timestamp = Some(1_763_999_999_000);
        new.open_transactions[0].log_append_time = true;
        new.transaction_timeout_ms = Some(60_000);
        assert_eq!(CommitTask::from_json(new.to_json().unwrap().as_bytes()).unwrap(), new);
    }

    #[test]
    fn a_suspend_task_round_trips_and_names_the_record() {
        let table = TableName { namespace: "kafka".into(), name: "orders".into() };
        let task =
            Task::Suspend(Box::new(SuspendTask::new(table.clone(), "orders", 2, 6, "orders-2/0.log", "bad enum")));
        let json = task.to_json().unwrap();
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!((value["kind"].as_str(), value["version"].as_u64()), (Some("suspend"), Some(1)));
        let back = Task::from_json(json.as_bytes()).unwrap();
        assert_eq!(back, task);
        // One id per record, within SQS's 128 characters of deduplication id.
        let id = |topic: &str, offset| SuspendTask::new(table.clone(), topic, 2, offset, "f", "e").task_id;
        assert_eq!(back.task_id(), id("orders", 6));
        assert_ne!(id("orders", 6), id("orders", 7));
        assert!(id(&"t".repeat(249), 6).len() <= 128);
        let Task::Suspend(s) = back else { panic!() };
        assert_eq!(s.reason(), "bad record: topic orders partition 2 offset 6 in orders-2/0.log: bad enum");
    }

    #[test]
    fn a_resolve_task_round_trips_one_id_per_decision() {
        let table = TableName { namespace: "kafka".into(), name: "orders".into() };
        let task = Task::Resolve(Box::new(ResolveTask::new(table.clone(), "orders", 0, 1005, true)));
        let json = task.to_json().unwrap();
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!((value["kind"].as_str(), value["commit"].as_bool()), (Some("resolve"), Some(true)));
        assert_eq!(Task::from_json(json.as_bytes()).unwrap(), task);
        let id = |offset, commit| ResolveTask::new(table.clone(), "orders", 0, offset, commit).task_id;
        assert_eq!(task.task_id(), id(1005, true));
        assert!(id(1005, true) != id(1005, false) && id(1005, true) != id(1006, true));
    }
}
