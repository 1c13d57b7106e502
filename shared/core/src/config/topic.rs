//! A topic's settings (`[defaults]` and each `[[topics]]` entry, [`Settings`]), what
//! they resolve to ([`TopicConfig`]), and their checks: names, sizes, durations,
//! `partition_by` against the table layout, schema sources against formats.

use iceberg::spec::FormatVersion;
use serde::Deserialize;

use super::ConfigError;
use super::values::{BadRecordMode, ByteSize, DurationMs, Envelope, Format, Mode, SchemaSource};
use crate::partition::grammar::parse_partition_field;
pub use crate::partition::grammar::{MAX_WIDTH, PartitionField, Transform};
pub use crate::segment::{MAX_TOPIC_LEN, topic_name_error};
use crate::vocabulary::Formats;

/// Target file sizes accepted: files above 4 GiB gain nothing for readers, and a batch
/// (a sixteenth of the target) must stay far below the 2 GiB of string data an Arrow
/// column can hold.
const MIN_TARGET_FILE_SIZE: u64 = 1 << 20;
const MAX_TARGET_FILE_SIZE: u64 = 4 << 30;
const MAX_COMPACTION_WINDOW_MS: u64 = 24 * 60 * 60 * 1000;
/// The shortest orphan grace period: a file is written some time before a snapshot or a
/// held task names it (a materializer's files before its task is queued, a committer's
/// trimmed files before its swap, a compactor's outputs before their task is held).
const MIN_ORPHAN_GRACE_MS: u64 = 60 * 60 * 1000;
/// Kafka's own floor for `transaction.timeout.ms` is 1 ms; below a second is a mistake.
const MIN_TRANSACTION_TIMEOUT_MS: u64 = 1000;
/// The shortest row retention: rows younger than an hour are still arriving.
const MIN_RETENTION_MS: u64 = 60 * 60 * 1000;
/// The column a row's age is measured on unless `retention_column` names another.
pub const DEFAULT_RETENTION_COLUMN: &str = "_kafka.timestamp";

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub namespace: Option<String>,
    pub key_format: Option<Format>,
    pub value_format: Option<Format>,
    pub key_schema: Option<SchemaSource>,
    pub value_schema: Option<SchemaSource>,
    pub bad_records: Option<BadRecordMode>,
    pub target_file_size: Option<ByteSize>,
    /// Size compaction packs small files up to.
    pub compaction_target_size: Option<ByteSize>,
    /// How long a small file waits for others before it is compacted anyway.
    pub compaction_window: Option<DurationMs>,
    /// How old a file no snapshot references must be before the orphan sweep deletes it.
    pub orphan_grace: Option<DurationMs>,
    /// The longest a transaction of the topic lasts: the brokers' `transaction.max.timeout.ms`.
    pub transaction_timeout: Option<DurationMs>,
    /// Rows older than this are removed from the table (data TTL).
    pub retention: Option<DurationMs>,
    /// The timestamp or date column a row's age is measured on (default: the Kafka
    /// record's timestamp, `_kafka.timestamp`).
    pub retention_column: Option<String>,
    /// The Iceberg format version of the tables Floe creates: 2 (the default; every
    /// engine reads it) or 3 (row lineage, deletion vectors). A table that exists keeps its own.
    pub format_version: Option<u8>,
    /// `append` (every record a row, the default) or `upsert` (one row per key).
    pub mode: Option<Mode>,
    /// Upsert: the value's columns the key is made of (default: the message key).
    pub key_columns: Option<Vec<String>>,
    /// `debezium`: values are change events, the row their `after` (upsert, JSON or Avro
    /// values).
    pub envelope: Option<Envelope>,
    pub partition_by: Option<Vec<String>>,
    /// Protobuf: full name of the key's message (default: the first message of the schema).
    pub key_message: Option<String>,
    /// Protobuf: full name of the value's message (default: the first message of the schema).
    pub value_message: Option<String>,
    /// The table formats: `["iceberg"]` (the default), `["iceberg", "delta"]` or `["delta"]`.
    pub formats: Option<Formats>,
}

/// Everything Floe needs to know about one topic.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TopicConfig {
    pub topic: String,
    pub namespace: String,
    pub table: String,
    pub key_format: Format,
    pub value_format: Format,
    pub key_schema: SchemaSource,
    pub value_schema: SchemaSource,
    pub bad_records: BadRecordMode,
    pub target_file_size: u64,
    /// Compaction's output size (bins emitted once they hold it).
    pub compaction_target_size: u64,
    /// Small files older than this are compacted even under the target.
    pub compaction_window_ms: u64,
    /// Unreferenced files younger than this are kept by the orphan sweep (a task may
    /// still be on its way to the committer, a commit may be writing them).
    pub orphan_grace_ms: u64,
    /// The longest a transaction lasts, from its first record to its marker (the brokers'
    /// `transaction.max.timeout.ms`): how far back a marker may end records.
    pub transaction_timeout_ms: u64,
    /// Rows whose `retention_column` is older than this are removed by compaction;
    /// `None`: kept for good.
    pub retention_ms: Option<u64>,
    /// The column a row's age is measured on (a dotted path): `_kafka.timestamp` unless set.
    pub retention_column: String,
    /// The format version a table Floe creates gets (`format_version`, 2 unless set).
    pub format_version: FormatVersion,
    pub mode: Mode,
    /// Upsert: the value's columns the key is made of (dotted paths); empty: the message key.
    pub key_columns: Vec<String>,
    /// What the values are wrapped in (`None`: nothing, the value is the row).
    pub envelope: Option<Envelope>,
    pub partition_by: Vec<PartitionField>,
    /// Where `partition_by` was set (`topics[2].partition_by`, `defaults.partition_by`), for errors.
    pub partition_by_field: String,
    pub key_message: Option<String>,
    pub value_message: Option<String>,
    /// Iceberg, and a Delta mirror of it when `delta` is listed.
    pub formats: Formats,
}

/// Checks one section's settings; returns its `partition_by`, parsed (`defaults`: the
/// defaults the section falls back to).
pub(super) fn validate_settings(
    at: &str,
    s: &Settings,
    defaults: &Settings,
) -> Result<Option<Vec<PartitionField>>, ConfigError> {
    if let Some(ns) = &s.namespace
        && !valid_identifier(ns)
    {
        return Err(ConfigError::invalid(
            format!("{at}.namespace"),
            format!("{ns:?}: use [a-z0-9_], not starting with a digit"),
        ));
    }
    if let Some(ns) = &s.namespace
        && ns.len() > MAX_NAME_LEN - ".db".len()
    {
        return Err(ConfigError::invalid(
            format!("{at}.namespace"),
            format!(
                "{} characters, more than {} (its folder `<namespace>.db` must fit the {MAX_NAME_LEN} bytes of a file name)",
                ns.len(),
                MAX_NAME_LEN - ".db".len()
            ),
        ));
    }
    if let Some(size) = s.target_file_size
        && !(MIN_TARGET_FILE_SIZE..=MAX_TARGET_FILE_SIZE).contains(&size.0)
    {
        return Err(ConfigError::invalid(
            format!("{at}.target_file_size"),
            format!("{} bytes: from 1MiB to 4GiB", size.0),
        ));
    }
    if let Some(size) = s.compaction_target_size
        && !(MIN_TARGET_FILE_SIZE..=MAX_TARGET_FILE_SIZE).contains(&size.0)
    {
        return Err(ConfigError::invalid(
            format!("{at}.compaction_target_size"),
            format!("{} bytes: from 1MiB to 4GiB", size.0),
        ));
    }
    if let Some(window) = s.compaction_window
        && window.0 > MAX_COMPACTION_WINDOW_MS
    {
        return Err(ConfigError::invalid(format!("{at}.compaction_window"), format!("{}ms: at most 24h", window.0)));
    }
    if let Some(grace) = s.orphan_grace
        && grace.0 < MIN_ORPHAN_GRACE_MS
    {
        return Err(ConfigError::invalid(format!("{at}.orphan_grace"), format!("{}ms: at least 1h", grace.0)));
    }
    if let Some(timeout) = s.transaction_timeout
        && timeout.0 < MIN_TRANSACTION_TIMEOUT_MS
    {
        return Err(ConfigError::invalid(format!("{at}.transaction_timeout"), format!("{}ms: at least 1s", timeout.0)));
    }
    if let Some(retention) = s.retention
        && retention.0 < MIN_RETENTION_MS
    {
        return Err(ConfigError::invalid(format!("{at}.retention"), format!("{}ms: at least 1h", retention.0)));
    }
    if let Some(column) = &s.retention_column
        && (column.is_empty() || column.split('.').any(str::is_empty))
    {
        return Err(ConfigError::invalid(
            format!("{at}.retention_column"),
            format!("{column:?}: a column's name, a dotted path for a nested one"),
        ));
    }
    if let Some(version) = s.format_version
        && !(2..=3).contains(&version)
    {
        return Err(ConfigError::invalid(format!("{at}.format_version"), format!("{version}: 2 or 3")));
    }
    validate_mode(at, s, defaults)?;
    let Some(fields) = &s.partition_by else { return Ok(None) };
    let mut parsed = Vec::with_capacity(fields.len());
    for (i, f) in fields.iter().enumerate() {
        parsed.push(parse_partition_field(f).map_err(|m| ConfigError::invalid(format!("{at}.partition_by[{i}]"), m))?);
    }
    let key = s.key_format.or(defaults.key_format);
    let value = s.value_format.or(defaults.value_format);
    check_partition_layout(&format!("{at}.partition_by"), &parsed, key, value)?;
    Ok(Some(parsed))
}

/// `key_columns` belongs to upsert tables, and names columns; a Debezium envelope is an
/// upsert of JSON or Avro values.
fn validate_mode(at: &str, s: &Settings, defaults: &Settings) -> Result<(), ConfigError> {
    let mode = s.mode.or(defaults.mode).unwrap_or_default();
    if let Some(columns) = &s.key_columns {
        if mode != Mode::Upsert {
            return Err(ConfigError::invalid(format!("{at}.key_columns"), "a key is for mode = \"upsert\" tables"));
        }
        if columns.is_empty() || columns.iter().any(|c| c.is_empty() || c.split('.').any(str::is_empty)) {
            return Err(ConfigError::invalid(
                format!("{at}.key_columns"),
                format!("{columns:?}: one or more columns of the value, a dotted path for a nested one"),
            ));
        }
    }
    if s.envelope.or(defaults.envelope) == Some(Envelope::Debezium) {
        if mode != Mode::Upsert {
            return Err(ConfigError::invalid(
                format!("{at}.envelope"),
                "debezium change events (updates, deletes) need mode = \"upsert\"",
            ));
        }
        if !matches!(s.value_format.or(defaults.value_format), Some(Format::Json | Format::Avro)) {
            return Err(ConfigError::invalid(
                format!("{at}.envelope"),
                "debezium envelopes are read from JSON or Avro values: value_format = \"json\" or \"avro\"",
            ));
        }
    }
    Ok(())
}

/// Binds what can be bound before any schema is known: `_kafka` columns (every table
/// has them; `_kafka.key` only when the value is a record), and every column of a topic
/// whose key and value are both raw.
pub(super) fn check_partition_layout(
    at: &str,
    fields: &[PartitionField],
    key: Option<Format>,
    value: Option<Format>,
) -> Result<(), ConfigError> {
    use crate::schema::layout::{PayloadType, table_struct};
    if fields.is_empty() {
        return Ok(());
    }
    let raw = table_struct(&PayloadType::Raw, &PayloadType::Raw)
        .ok()
        .and_then(|s| crate::schema::plan(None, &s).ok())
        .map(|e| e.schema)
        .ok_or_else(|| ConfigError::invalid(at, "the raw table layout does not plan"))?;
    let invalid = |e: crate::partition::PartitionError| ConfigError::invalid(e.field, e.message);
    let is_raw = |f: Option<Format>| f.unwrap_or(Format::Raw) == Format::Raw;
    if is_raw(key) && is_raw(value) {
        return crate::partition::bind(&raw, fields, at).map(drop).map_err(invalid);
    }
    for (j, field) in fields.iter().enumerate() {
        if field.source.starts_with("_kafka.") && field.source != "_kafka.key" {
            crate::partition::bind(&raw, std::slice::from_ref(field), at)
                .map_err(|e| ConfigError::invalid(format!("{at}[{j}]"), e.message))?;
        }
    }
    Ok(())
}

/// A schema source only makes sense for a format that uses one (after defaults apply).
pub(super) fn validate_schemas(at: &str, s: &Settings, defaults: &Settings) -> Result<(), ConfigError> {
    for (field, format, schema) in [
        ("key_schema", s.key_format.or(defaults.key_format), &s.key_schema),
        ("value_schema", s.value_format.or(defaults.value_format), &s.value_schema),
    ] {
        let format = format.unwrap_or(Format::Raw);
        if schema.is_some() && !format.uses_schema() && format != Format::Auto {
            return Err(ConfigError::invalid(
                format!("{at}.{field}"),
                format!("a schema is meaningless for format {format:?}"),
            ));
        }
    }
    Ok(())
}

/// Glue's limit on database and table names, and a file name's on most filesystems
/// (bytes; the names are ASCII).
pub const MAX_NAME_LEN: usize = 255;

pub(super) fn valid_identifier(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The default table name of a topic: lower case, characters outside `[a-z0-9_]`
/// become `_`, and a leading digit gets a `t_` prefix.
pub fn table_name_for(topic: &str) -> String {
    let name: String = topic
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' { c } else { '_' }
        })
        .collect();
    if name.starts_with(|c: char| c.is_ascii_digit()) { format!("t_{name}") } else { name }
}
