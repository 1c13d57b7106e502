//! The words every layer of Floe shares, on the ground floor: a table's name, a range of
//! offsets, a task's data file, a transaction left open. This module imports nothing of
//! Floe (the layering test below checks it, and the modules near the bottom): config,
//! catalogs, tables, tasks and the committer all build on it, none under it.

use iceberg::spec::{DataFile, PartitionSpec, Schema, StructType};
use serde::{Deserialize, Serialize};

/// What a table's name takes for its dead-letter table's.
pub const DEAD_LETTER_SUFFIX: &str = "_dlq";

/// An Iceberg table name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TableName {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for TableName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.namespace, self.name)
    }
}

impl TableName {
    /// `namespace.name` back into a name (split at the first dot: neither Glue database
    /// nor SQLite namespace names Floe makes hold one).
    pub fn parse(text: &str) -> Option<TableName> {
        let (namespace, name) = text.split_once('.')?;
        (!namespace.is_empty() && !name.is_empty())
            .then(|| TableName { namespace: namespace.to_string(), name: name.to_string() })
    }

    /// The dead-letter table beside this one: `<name>_dlq`, in the same namespace.
    pub fn dead_letters(&self) -> TableName {
        TableName { namespace: self.namespace.clone(), name: format!("{}{DEAD_LETTER_SUFFIX}", self.name) }
    }
}

/// Where a table's files go: `<warehouse>/<namespace>.db/<table>`.
pub fn table_location(warehouse: &str, table: &TableName) -> String {
    format!("{}/{}.db/{}", warehouse.trim_end_matches('/'), table.namespace, table.name)
}

/// An inclusive range of Kafka offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetRange {
    pub first: i64,
    pub last: i64,
}

/// A table format a topic's rows are committed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TableFormat {
    Iceberg,
    /// Delta Lake: the same Parquet files, committed to a Delta log beside the Iceberg
    /// metadata (`<location>/_delta_log/`).
    Delta,
}

/// The table formats of a topic (`formats` in `floe.toml`, carried by its tasks): Iceberg
/// alone unless said otherwise. As JSON, the list of them (`["iceberg", "delta"]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<TableFormat>", into = "Vec<TableFormat>")]
pub struct Formats {
    iceberg: bool,
    delta: bool,
}

impl Default for Formats {
    fn default() -> Self {
        Formats { iceberg: true, delta: false }
    }
}

impl Formats {
    /// Both: the Iceberg table and its Delta mirror.
    pub const BOTH: Formats = Formats { iceberg: true, delta: true };

    pub fn iceberg(self) -> bool {
        self.iceberg
    }

    pub fn delta(self) -> bool {
        self.delta
    }

    pub fn is_default(&self) -> bool {
        *self == Formats::default()
    }
}

impl TryFrom<Vec<TableFormat>> for Formats {
    type Error = String;

    fn try_from(list: Vec<TableFormat>) -> Result<Self, String> {
        let mut out = Formats { iceberg: false, delta: false };
        for format in &list {
            let seen = match format {
                TableFormat::Iceberg => std::mem::replace(&mut out.iceberg, true),
                TableFormat::Delta => std::mem::replace(&mut out.delta, true),
            };
            if seen {
                return Err(format!("{format:?} is listed twice").to_lowercase());
            }
        }
        if list.is_empty() {
            return Err("no format: list \"iceberg\", \"delta\" or both".into());
        }
        Ok(out)
    }
}

impl From<Formats> for Vec<TableFormat> {
    fn from(f: Formats) -> Self {
        let iceberg = f.iceberg.then_some(TableFormat::Iceberg);
        iceberg.into_iter().chain(f.delta.then_some(TableFormat::Delta)).collect()
    }
}

/// One data file of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskFile {
    pub first_offset: i64,
    pub last_offset: i64,
    pub record_count: u64,
    /// Iceberg's JSON form of the `DataFile` (format v2), its `partition` value of the
    /// task's partition type.
    pub data_file: serde_json::Value,
}

impl TaskFile {
    /// The `DataFile` back, read against the schema and partition spec (`None`:
    /// unpartitioned) it was written with.
    pub fn data_file(&self, schema: &Schema, spec: Option<&PartitionSpec>) -> Result<DataFile, iceberg::Error> {
        let (spec_id, partition_type) = match spec {
            Some(spec) => (spec.spec_id(), spec.partition_type(schema)?),
            None => (0, StructType::new(vec![])),
        };
        let json = ordered_partition_json(&self.data_file, &partition_type);
        iceberg::spec::deserialize_data_file_from_json(&json, spec_id, &partition_type, schema)
    }

    pub fn path(&self) -> &str {
        self.data_file.get("file_path").and_then(|p| p.as_str()).unwrap_or_default()
    }

    /// Its size in bytes, as written.
    pub fn size(&self) -> u64 {
        self.data_file.get("file_size_in_bytes").and_then(|s| s.as_u64()).unwrap_or_default()
    }
}

/// The DataFile JSON as text with its `partition` object's keys in the partition type's
/// order (missing ones null). iceberg-rust 0.10.1 reads a partition object's values in
/// the order of its keys, not by name, and `serde_json::Value` keeps keys sorted: two
/// partition fields would otherwise come back swapped.
pub(crate) fn ordered_partition_json(data_file: &serde_json::Value, partition_type: &StructType) -> String {
    let mut rest = data_file.clone();
    let partition = rest.as_object_mut().and_then(|o| o.remove("partition"));
    let (Some(serde_json::Value::Object(values)), Some(object)) = (partition, rest.as_object()) else {
        return data_file.to_string();
    };
    let null = serde_json::Value::Null;
    let fields: Vec<String> = partition_type
        .fields()
        .iter()
        .map(|f| format!("{}:{}", serde_json::Value::from(f.name.as_str()), values.get(&f.name).unwrap_or(&null)))
        .collect();
    let mut text = serde_json::Value::Object(object.clone()).to_string();
    text.pop(); // the closing brace
    if !object.is_empty() {
        text.push(',');
    }
    format!("{text}\"partition\":{{{}}}}}", fields.join(","))
}

/// A transaction still open at the end of the segment, with the files of its records.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PendingTransaction {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub first_offset: i64,
    pub last_offset: i64,
    pub records: u64,
    pub files: Vec<TaskFile>,
    /// Its first record's timestamp and the greatest of its records' (older tasks: unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_timestamp: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_timestamp: Option<i64>,
    /// Whether those are the broker's append times (`LogAppendTime`), not the producer's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub log_append_time: bool,
    /// Its bad records as dead letters (mode `dlq`), in the table's data directory: added
    /// to the dead-letter table once a COMMIT resolves the transaction, never on ABORT.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dead_letter_files: Vec<TaskFile>,
    /// Mode `suspend`: its first bad record, which suspends the table once a COMMIT
    /// resolves the transaction (its bad records are written nowhere: offsets without a
    /// row, counted with its segment's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspends_at: Option<BadRecord>,
}

impl PendingTransaction {
    /// Its dead letters' count.
    pub fn dead_letters(&self) -> u64 {
        self.dead_letter_files.iter().map(|f| f.record_count).sum()
    }
}

/// A record that could not be decoded: where it is, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BadRecord {
    pub offset: i64,
    /// The segment holding it.
    pub file: String,
    pub error: String,
}
