//! The table layout every Floe table shares: a `_kafka` metadata struct, then the key
//! and the value.
//!
//! | value is… | columns |
//! |---|---|
//! | a record (Avro record, Protobuf message, JSON object) | `_kafka` (with `key` inside), then the record's fields at top level |
//! | anything else (raw bytes, a string, …) | `_kafka`, `key`, `value` |
//!
//! `_kafka` holds `partition` (int), `offset` (long), `timestamp` (timestamptz, null for
//! magic v0 messages), `timestamp_type` (`create` / `log_append`) and `headers`
//! (list of `{key: string, value: binary}`).

use std::sync::Arc;

use iceberg::spec::{ListType, NestedField, PrimitiveType, StructType, Type};

pub const KAFKA_COLUMN: &str = "_kafka";
pub const KEY_COLUMN: &str = "key";
/// The offset field of the `_kafka` struct.
pub const OFFSET_FIELD: &str = "offset";
pub const VALUE_COLUMN: &str = "value";
pub const ERROR_COLUMN: &str = "error";
pub use crate::vocabulary::DEAD_LETTER_SUFFIX;

/// The Iceberg type a key or value decodes to.
#[derive(Debug, Clone, PartialEq)]
pub enum PayloadType {
    /// Bytes as they are.
    Raw,
    /// A record: as the value, its fields become top-level columns.
    Record(StructType),
    /// Any other type (a string, a number, a list…).
    Other(Type),
}

impl PayloadType {
    fn column_type(&self) -> Type {
        match self {
            PayloadType::Raw => Type::Primitive(PrimitiveType::Binary),
            PayloadType::Record(s) => Type::Struct(s.clone()),
            PayloadType::Other(t) => t.clone(),
        }
    }
}

/// A value record field that would shadow the metadata column.
#[derive(Debug, thiserror::Error)]
#[error("the value has a field named `{0}`, which Floe reserves for Kafka metadata")]
pub struct ReservedName(pub String);

fn f(name: &str, t: PrimitiveType, required: bool) -> Arc<NestedField> {
    Arc::new(NestedField::new(0, name, Type::Primitive(t), required))
}

/// The `_kafka` struct's fields; `key` is included when the value is a record.
fn kafka_struct(key: Option<&PayloadType>) -> Type {
    let header = StructType::new(vec![f("key", PrimitiveType::String, true), f("value", PrimitiveType::Binary, false)]);
    let mut fields = vec![
        f("partition", PrimitiveType::Int, true),
        f("offset", PrimitiveType::Long, true),
        f("timestamp", PrimitiveType::Timestamptz, false),
        f("timestamp_type", PrimitiveType::String, true),
        Arc::new(NestedField::new(
            0,
            "headers",
            Type::List(ListType::new(Arc::new(NestedField::list_element(0, Type::Struct(header), true)))),
            false,
        )),
    ];
    if let Some(key) = key {
        fields.push(Arc::new(NestedField::optional(0, KEY_COLUMN, key.column_type())));
    }
    Type::Struct(StructType::new(fields))
}

/// Whether the value's fields are top-level columns (and the key sits in `_kafka`).
pub fn value_is_payload(value: &PayloadType) -> bool {
    matches!(value, PayloadType::Record(_))
}

/// The `_kafka` field of upsert tables marking a record that deletes its key (a
/// tombstone: no value). Such rows are deleted as they are committed: readers never see
/// one true.
pub const TOMBSTONE_FIELD: &str = "tombstone";

/// `table` (a [`table_struct`]) with `_kafka.tombstone`, the layout of upsert tables.
pub fn with_tombstone(table: StructType) -> StructType {
    let fields = table
        .fields()
        .iter()
        .map(|field| match (&*field.name, &*field.field_type) {
            (KAFKA_COLUMN, Type::Struct(kafka)) => {
                let mut children = kafka.fields().to_vec();
                children.push(f(TOMBSTONE_FIELD, PrimitiveType::Boolean, true));
                Arc::new(NestedField::required(0, KAFKA_COLUMN, Type::Struct(StructType::new(children))))
            }
            _ => field.clone(),
        })
        .collect();
    StructType::new(fields)
}

/// The source schema (placeholder ids) of a topic's table.
pub fn table_struct(key: &PayloadType, value: &PayloadType) -> Result<StructType, ReservedName> {
    let mut fields = Vec::new();
    match value {
        PayloadType::Record(record) => {
            fields.push(Arc::new(NestedField::required(0, KAFKA_COLUMN, kafka_struct(Some(key)))));
            for field in record.fields() {
                if field.name == KAFKA_COLUMN {
                    return Err(ReservedName(field.name.clone()));
                }
                // Top-level value columns are optional: a tombstone has no value.
                let mut field = field.as_ref().clone();
                field.required = false;
                fields.push(Arc::new(field));
            }
        }
        _ => {
            fields.push(Arc::new(NestedField::required(0, KAFKA_COLUMN, kafka_struct(None))));
            fields.push(Arc::new(NestedField::optional(0, KEY_COLUMN, key.column_type())));
            fields.push(Arc::new(NestedField::optional(0, VALUE_COLUMN, value.column_type())));
        }
    }
    Ok(StructType::new(fields))
}

/// The dead-letter table beside a table: the record as it was (metadata, raw key and
/// value) and why it could not be decoded.
pub fn dead_letter_struct() -> StructType {
    let mut fields = table_struct(&PayloadType::Raw, &PayloadType::Raw).expect("no reserved names").fields().to_vec();
    fields.push(Arc::new(NestedField::required(0, ERROR_COLUMN, Type::Primitive(PrimitiveType::String))));
    StructType::new(fields)
}
