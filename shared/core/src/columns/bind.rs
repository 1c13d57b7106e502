//! Where the converter writes each part of a record: the table layout's columns found by
//! name ([`crate::schema::layout`]), wherever the table has them.
//!
//! Floe creates `_kafka` first, then the key and the value (or the value's fields), but
//! other engines may move columns (`move_before`), add their own, or drop and rename
//! Floe's (the evolution planner then adds them back under their names, last). So the
//! converter builds its columns in its own order — `_kafka`, then `key`, `value`,
//! `error` or the value's fields, then any other column (null in Floe's rows) — and
//! hands the batch over in the table's order. A table without a column Floe needs, or
//! with one of another type, is an error naming it, never a panic.

use arrow_schema::{Fields, SchemaRef};

use super::builder::{Column, StructColumn};
use crate::schema::layout::{ERROR_COLUMN, KAFKA_COLUMN, KEY_COLUMN, TOMBSTONE_FIELD, VALUE_COLUMN};

/// Positions of `_kafka`'s fields, and of a header's key and value.
#[derive(Debug, Clone, Copy)]
pub(super) struct KafkaFields {
    pub partition: usize,
    pub offset: usize,
    pub timestamp: usize,
    pub timestamp_type: usize,
    pub headers: usize,
    pub header_key: usize,
    pub header_value: usize,
    /// The key, in the value-as-payload layout.
    pub key: Option<usize>,
    /// `tombstone` (upsert tables): whether the record deletes its key.
    pub tombstone: Option<usize>,
}

/// The converter's columns: `_kafka` at 0, then the parts, then the others.
#[derive(Debug, Clone)]
pub(super) struct Bound {
    /// The table's fields in the converter's order.
    pub fields: Fields,
    /// For each table column, its position among `fields`.
    pub table_order: Vec<usize>,
    pub kafka: KafkaFields,
    /// The value-as-payload layout: the value's fields are `fields[1..]`.
    pub payload: bool,
    /// The `error` column of a dead-letter table (at 3).
    pub error: bool,
    /// Where the columns no part writes start (null in every row): after `key`, `value`
    /// and `error`.
    pub others: usize,
}

/// Why a table's schema cannot take Floe's rows.
fn missing(what: &str) -> iceberg::Error {
    iceberg::Error::new(
        iceberg::ErrorKind::DataInvalid,
        format!("the table has no usable column {what}, which Floe writes (dropped or changed by another engine?)"),
    )
}

/// Whether the converter can write rows of `schema`: `Err` naming the first column Floe
/// writes that the table lacks or has with another type.
pub fn writable(schema: &iceberg::spec::Schema) -> Result<(), iceberg::Error> {
    let arrow = std::sync::Arc::new(iceberg::arrow::schema_to_arrow_schema(schema)?);
    let bound = Bound::new(&arrow)?;
    let root = StructColumn::new(&bound.fields)
        .map_err(|e| iceberg::Error::new(iceberg::ErrorKind::FeatureUnsupported, e.to_string()))?;
    bound.check(&root)
}

/// The fields of the value-as-payload layout's value: every column but `_kafka`, in the
/// table's order (what the value decoder writes, and where the converter keeps them).
pub fn payload_fields(table: &Fields) -> Fields {
    table.iter().filter(|f| f.name() != KAFKA_COLUMN).cloned().collect()
}

impl Bound {
    /// `table`'s columns bound to the parts of a record.
    pub fn new(table: &SchemaRef) -> Result<Bound, iceberg::Error> {
        let fields = table.fields();
        let position = |name: &str| fields.iter().position(|f| f.name() == name);
        let kafka_at = position(KAFKA_COLUMN).ok_or_else(|| missing(KAFKA_COLUMN))?;
        let kafka_fields = match fields[kafka_at].data_type() {
            arrow_schema::DataType::Struct(f) => f.clone(),
            _ => return Err(missing(KAFKA_COLUMN)),
        };
        let payload = kafka_fields.find(KEY_COLUMN).is_some();
        let mut order = vec![kafka_at];
        let mut error = false;
        if payload {
            order.extend((0..fields.len()).filter(|&i| i != kafka_at));
        } else {
            for name in [KEY_COLUMN, VALUE_COLUMN] {
                order.push(position(name).ok_or_else(|| missing(name))?);
            }
            if let Some(at) = position(ERROR_COLUMN) {
                order.push(at);
                error = true;
            }
            let parts = order.clone();
            order.extend((0..fields.len()).filter(|i| !parts.contains(i)));
        }
        let others = if payload { fields.len() } else { 3 + usize::from(error) };
        let mut table_order = vec![0; fields.len()];
        for (converter, &table) in order.iter().enumerate() {
            table_order[table] = converter;
        }
        let fields: Fields = order.iter().map(|&i| fields[i].clone()).collect();
        let kafka = kafka_positions(&kafka_fields)?;
        Ok(Bound { fields, table_order, kafka, payload, error, others })
    }

    /// Whether the converter's order is the table's.
    pub fn in_table_order(&self) -> bool {
        self.table_order.iter().enumerate().all(|(i, &c)| i == c)
    }

    /// Checks that the builders of `root` (made from [`Self::fields`]) are of the types
    /// the converter writes, so that writing never meets another.
    pub fn check(&self, root: &StructColumn) -> Result<(), iceberg::Error> {
        let Column::Struct(kafka) = &root.children[0] else { return Err(missing(KAFKA_COLUMN)) };
        let k = &self.kafka;
        let c = &kafka.children;
        let name = |f: &str| format!("{KAFKA_COLUMN}.{f}");
        let checks = [
            (matches!(c[k.partition], Column::Int(_)), name("partition")),
            (matches!(c[k.offset], Column::Long(_)), name("offset")),
            (matches!(c[k.timestamp], Column::TimestampMicros(_)), name("timestamp")),
            (matches!(c[k.timestamp_type], Column::String(_)), name("timestamp_type")),
            (header_columns(&c[k.headers], k), name("headers")),
            (k.tombstone.is_none_or(|t| matches!(c[t], Column::Boolean(_))), name(TOMBSTONE_FIELD)),
        ];
        if let Some((_, what)) = checks.into_iter().find(|(ok, _)| !ok) {
            return Err(missing(&what));
        }
        if self.error && !root.children[1..3].iter().all(|c| matches!(c, Column::Binary(_))) {
            return Err(missing("key/value (binary, in a dead-letter table)"));
        }
        if self.error && !matches!(root.children[3], Column::String(_)) {
            return Err(missing(ERROR_COLUMN));
        }
        Ok(())
    }
}

fn header_columns(headers: &Column, k: &KafkaFields) -> bool {
    let Column::List(list) = headers else { return false };
    let Column::Struct(header) = list.child.as_ref() else { return false };
    matches!(header.children.get(k.header_key), Some(Column::String(_)))
        && matches!(header.children.get(k.header_value), Some(Column::Binary(_)))
}

fn kafka_positions(kafka: &Fields) -> Result<KafkaFields, iceberg::Error> {
    let at = |name: &str| {
        kafka.iter().position(|f| f.name() == name).ok_or_else(|| missing(&format!("{KAFKA_COLUMN}.{name}")))
    };
    let headers = at("headers")?;
    let header = match kafka[headers].data_type() {
        arrow_schema::DataType::List(element) => match element.data_type() {
            arrow_schema::DataType::Struct(f) => f.clone(),
            _ => return Err(missing("_kafka.headers")),
        },
        _ => return Err(missing("_kafka.headers")),
    };
    let in_header = |name: &str| header.iter().position(|f| f.name() == name).ok_or_else(|| missing("_kafka.headers"));
    Ok(KafkaFields {
        partition: at("partition")?,
        offset: at("offset")?,
        timestamp: at("timestamp")?,
        timestamp_type: at("timestamp_type")?,
        headers,
        header_key: in_header("key")?,
        header_value: in_header("value")?,
        key: kafka.iter().position(|f| f.name() == KEY_COLUMN),
        tombstone: kafka.iter().position(|f| f.name() == TOMBSTONE_FIELD),
    })
}
