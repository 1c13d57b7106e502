//! The value types of `floe.toml`'s settings: formats, bad-record modes, schema
//! sources, sizes (`"128MiB"`) and durations (`"15m"`).

use std::path::PathBuf;

use serde::Deserialize;

/// How a key or value is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// The type of the Schema Registry subject's schema (`<topic>-key` / `<topic>-value`,
    /// or the configured subject) decides; raw when there is no such subject.
    Auto,
    Avro,
    Protobuf,
    JsonSchema,
    /// JSON without a schema: the columns are inferred from the records.
    Json,
    /// Bytes as they are: a `binary` column.
    Raw,
}

impl Format {
    /// Formats whose payloads carry the Confluent wire-format header.
    pub fn uses_schema(self) -> bool {
        matches!(self, Format::Avro | Format::Protobuf | Format::JsonSchema)
    }
}

/// What to do with a record that cannot be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BadRecordMode {
    /// Stop the table with a status naming the record (the default).
    Suspend,
    /// Leave the record out, counted.
    Skip,
    /// Keep it, with its raw bytes and the error, in a dead-letter table beside the table.
    Dlq,
}

/// How a topic's records become rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Every record a row (the default).
    #[default]
    Append,
    /// One row per key, its latest record's; a tombstone deletes the key's row.
    Upsert,
}

/// What a topic's values are wrapped in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Envelope {
    /// Debezium change events (`before`, `after`, `op`): the row is `after`, `op = d` a delete.
    Debezium,
}

/// Where a schema comes from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum SchemaSource {
    /// The Schema Registry, by the id each record carries.
    Registry,
    /// The latest version of a Schema Registry subject.
    Subject(String),
    /// A local schema file (`.avsc`, `.proto` descriptor set, `.json`).
    File(PathBuf),
}

/// A size in bytes, written as a number or as `"128MiB"`, `"64MB"`, `"1GiB"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ByteSize(pub u64);

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(n) => Ok(ByteSize(n)),
            Raw::Text(s) => parse_byte_size(&s).map(ByteSize).map_err(serde::de::Error::custom),
        }
    }
}

fn parse_byte_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits.parse().map_err(|_| format!("invalid size {s:?}"))?;
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "KB" => 1000,
        "KiB" => 1 << 10,
        "MB" => 1000 * 1000,
        "MiB" => 1 << 20,
        "GB" => 1000 * 1000 * 1000,
        "GiB" => 1 << 30,
        other => {
            return Err(format!("unknown unit {other:?} in {s:?} (B, KB, KiB, MB, MiB, GB, GiB)"));
        }
    };
    n.checked_mul(factor).ok_or_else(|| format!("size {s:?} too large"))
}

/// A duration, written as `"15m"`, `"900s"`, `"1h"`, `"3d"` or `"500ms"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DurationMs(pub u64);

impl<'de> Deserialize<'de> for DurationMs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_duration_ms(&s).map(DurationMs).map_err(serde::de::Error::custom)
    }
}

fn parse_duration_ms(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits.parse().map_err(|_| format!("invalid duration {s:?}"))?;
    let factor: u64 = match unit.trim() {
        "ms" => 1,
        "s" => 1000,
        "m" => 60 * 1000,
        "h" => 60 * 60 * 1000,
        "d" => 24 * 60 * 60 * 1000,
        other => return Err(format!("unknown unit {other:?} in {s:?} (ms, s, m, h, d)")),
    };
    n.checked_mul(factor).ok_or_else(|| format!("duration {s:?} too large"))
}
