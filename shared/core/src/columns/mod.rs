//! Records → Arrow record batches in the table's layout ([`crate::schema::layout`]),
//! its columns found by name wherever the table has them ([`bind`]), column by column: the Kafka metadata from the record, the key and the value through a
//! [`PayloadDecoder`] per format. Nothing is allocated per record beyond what the Arrow
//! buffers need.
//!
//! Payloads are decoded in one pass straight into the builders. A payload that fails
//! half-way leaves its row half-written: the converter completes it with placeholders
//! (so every column keeps the same length) and drops it when the batch is finished; the
//! caller decides what becomes of the record (suspend, skip, DLQ).

pub mod bind;
pub mod builder;
#[cfg(test)]
pub mod damage;

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use iceberg::spec::Schema;

use crate::registry::wire::header_name;
pub use crate::registry::wire::{DecodeError, Payload, SchemaId, SchemaLoadError};
use crate::segment::{Header, Record, TimestampType};
pub use bind::payload_fields;
use bind::{Bound, KafkaFields};
pub use builder::{Column, FULL_OFFSETS, FixedValues, StructColumn};

/// Decodes one format's payloads into Arrow columns.
///
/// An append may fail half-way through a payload; the converter then repairs the columns
/// and drops the row, so decoders need not check a payload before writing it.
#[async_trait::async_trait]
pub trait PayloadDecoder: Send + Sync {
    /// Appends the decoded payload to `column`.
    fn append(&self, payload: Payload<'_>, column: &mut Column) -> Result<(), DecodeError>;
    /// Appends a record payload's fields to `fields` (the value-as-payload layout).
    fn append_fields(&self, payload: Payload<'_>, fields: &mut [Column]) -> Result<(), DecodeError> {
        let _ = (payload, fields);
        Err(DecodeError {
            part: "value",
            position: 0,
            detail: "internal: this format has no record layout".into(),
            missing_schema: None,
            deletes_key: false,
        })
    }
    /// Loads the schema `id` that a payload named ([`DecodeError::missing_schema`]).
    async fn load_schema(&self, id: SchemaId) -> Result<(), SchemaLoadError> {
        Err(SchemaLoadError { id, message: "this format has no schemas".into(), retryable: false })
    }
}

/// What a payload decoder writes into: one column (a key, or a value that is not a
/// record), or the top-level value fields of the value-as-payload layout.
#[derive(Clone, Debug)]
pub enum Shape {
    Column(arrow_schema::DataType),
    Fields(arrow_schema::Fields),
}

/// Bytes as they are: a `binary` column.
pub struct RawDecoder;

#[async_trait::async_trait]
impl PayloadDecoder for RawDecoder {
    fn append(&self, payload: Payload<'_>, column: &mut Column) -> Result<(), DecodeError> {
        match column {
            Column::Binary(b) => {
                b.append_value(payload.bytes);
                Ok(())
            }
            _ => Err(DecodeError {
                part: "value",
                position: 0,
                detail: "internal: raw bytes into a non-binary column".into(),
                missing_schema: None,
                deletes_key: false,
            }),
        }
    }
}

/// Builds record batches of one table from records of one Kafka partition.
pub struct RecordConverter {
    schema: Arc<Schema>,
    arrow_schema: SchemaRef,
    /// The table's columns in the converter's order ([`bind`]): `_kafka` first.
    bound: Bound,
    root: StructColumn,
    partition: i32,
    key: Arc<dyn PayloadDecoder>,
    value: Arc<dyn PayloadDecoder>,
    first_offset: Option<i64>,
    last_offset: Option<i64>,
    /// Payload bytes appended since the last [`Self::finish`].
    payload_bytes: usize,
    /// Rows left half-written by a failed append, dropped by [`Self::finish`].
    dropped: Vec<usize>,
}

impl RecordConverter {
    /// `schema` must have the table layout's columns (see [`crate::schema::layout`]), in
    /// any order: an error names the first it lacks.
    pub fn new(
        schema: Arc<Schema>,
        partition: i32,
        key: Arc<dyn PayloadDecoder>,
        value: Arc<dyn PayloadDecoder>,
    ) -> Result<RecordConverter, iceberg::Error> {
        let arrow_schema = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema)?);
        let bound = Bound::new(&arrow_schema)?;
        let root = StructColumn::new(&bound.fields)
            .map_err(|e| iceberg::Error::new(iceberg::ErrorKind::FeatureUnsupported, e.to_string()))?;
        bound.check(&root)?;
        Ok(RecordConverter {
            schema,
            arrow_schema,
            bound,
            root,
            partition,
            key,
            value,
            first_offset: None,
            last_offset: None,
            payload_bytes: 0,
            dropped: Vec::new(),
        })
    }

    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    pub fn arrow_schema(&self) -> &SchemaRef {
        &self.arrow_schema
    }

    pub fn rows(&self) -> usize {
        self.root.len()
    }

    /// Key and value bytes of the rows buffered since the last [`Self::finish`].
    pub fn payload_bytes(&self) -> usize {
        self.payload_bytes
    }

    /// Whether a column's variable-size parts (strings, list elements, map entries) have
    /// passed [`FULL_OFFSETS`], so the batch must end before Arrow's 32-bit offsets
    /// overflow. Payload bytes do not bound them: an enum symbol, a default or a
    /// Protobuf enum number written as text can be longer than the bytes it came from.
    /// Looked at every 64 rows (a walk over the columns).
    pub fn offsets_full(&self) -> bool {
        self.root.len().is_multiple_of(64) && self.root.largest_offset() >= FULL_OFFSETS
    }

    /// Offsets of the rows buffered since the last [`Self::finish`].
    pub fn offsets(&self) -> Option<(i64, i64)> {
        self.first_offset.zip(self.last_offset)
    }

    /// Appends one record as a row; on `Err` the row is dropped (nothing of it remains in
    /// the batch [`Self::finish`] returns). Inlined into the caller's loop over a batch's
    /// records, which keeps the record's parts in registers: passed through memory, they
    /// were read back wider than they were written, and the CPU waited for the stores.
    #[inline(always)]
    pub fn append(&mut self, record: &Record) -> Result<(), DecodeError> {
        let row = self.root.len();
        self.root.append_valid();
        match self.append_row(record) {
            Ok(()) => {
                self.note_row(record);
                Ok(())
            }
            Err(e) => {
                self.root.repair();
                self.dropped.push(row);
                Err(e)
            }
        }
    }

    #[inline(always)]
    fn append_row(&mut self, record: &Record) -> Result<(), DecodeError> {
        let (key, value) = payloads(record);
        let Column::Struct(kafka) = &mut self.root.children[0] else { unreachable!("_kafka is a struct") };
        let k = self.bound.kafka;
        append_metadata(kafka, &k, self.partition, record);
        let key_column = match k.key {
            Some(at) if self.bound.payload => &mut kafka.children[at],
            _ => &mut self.root.children[1],
        };
        append_payload(&*self.key, key, key_column).map_err(|e| DecodeError { part: "key", ..e })?;
        if self.bound.payload {
            let fields = &mut self.root.children[1..];
            return match value {
                Some(v) => self.value.append_fields(v, fields),
                None => {
                    fields.iter_mut().for_each(Column::append_null);
                    Ok(())
                }
            };
        }
        append_payload(&*self.value, value, &mut self.root.children[2])?;
        self.append_others();
        Ok(())
    }

    /// Nulls in the columns no part writes (another engine's, in a key-value table).
    fn append_others(&mut self) {
        self.root.children[self.bound.others..].iter_mut().for_each(Column::append_null);
    }

    /// Loads schema `id` into the key or value decoder (`part` of a [`DecodeError`]).
    pub async fn load_schema(&self, part: &str, id: SchemaId) -> Result<(), SchemaLoadError> {
        if part == "key" { self.key.load_schema(id).await } else { self.value.load_schema(id).await }
    }

    /// Appends a record that could not be decoded, raw, with its error (dead-letter
    /// tables, whose schema is [`crate::schema::layout::dead_letter_struct`]).
    pub fn append_dead_letter(&mut self, record: &Record, error: &str) {
        assert!(self.bound.error, "append_dead_letter on a table without an error column");
        self.root.append_valid();
        let Column::Struct(kafka) = &mut self.root.children[0] else { unreachable!("layout") };
        append_metadata(kafka, &self.bound.kafka, self.partition, record);
        for (i, payload) in [(1, record.key), (2, record.value)] {
            append_payload(&RawDecoder, payload.map(Payload::from), &mut self.root.children[i])
                .expect("raw into binary");
        }
        let Column::String(e) = &mut self.root.children[3] else { unreachable!("layout") };
        e.append_value(error);
        self.append_others();
        self.note_row(record);
    }

    fn note_row(&mut self, record: &Record) {
        self.first_offset.get_or_insert(record.offset);
        self.last_offset = Some(record.offset);
        self.payload_bytes +=
            record.key.map_or(0, <[u8]>::len) + record.value.map_or(0, <[u8]>::len) + record.headers.payload_bytes();
    }

    /// The rows appended so far as one batch; the converter is empty afterwards.
    pub fn finish(&mut self) -> RecordBatch {
        self.payload_bytes = 0;
        self.first_offset = None;
        self.last_offset = None;
        let rows = self.root.len();
        let array = self.root.finish();
        // Debug builds (every test) check each batch in full.
        #[cfg(debug_assertions)]
        assert_valid(&array, "internal: the converter's batch");
        let batch = self.in_table_order(RecordBatch::from(array));
        if self.dropped.is_empty() {
            return batch;
        }
        let mut keep = vec![true; rows];
        for row in self.dropped.drain(..) {
            keep[row] = false;
        }
        arrow::compute::filter_record_batch(&batch, &arrow_array::BooleanArray::from(keep))
            .expect("mask of the batch's length")
    }
}

impl RecordConverter {
    /// `batch` (the converter's columns) with the table's columns in the table's order.
    fn in_table_order(&self, batch: RecordBatch) -> RecordBatch {
        let columns = match self.bound.in_table_order() {
            true => batch.columns().to_vec(),
            false => self.bound.table_order.iter().map(|&i| batch.column(i).clone()).collect(),
        };
        RecordBatch::try_new(self.arrow_schema.clone(), columns).expect("the table's fields")
    }
}

/// A record's key and value, each with the header naming its schema if the record has
/// one (the last of that name, as Kafka's `lastHeader`); one pass over the headers.
#[inline(always)]
fn payloads<'r>(record: &Record<'r>) -> (Option<Payload<'r>>, Option<Payload<'r>>) {
    let (key_name, value_name) = (header_name("key").as_bytes(), header_name("value").as_bytes());
    let (mut key_header, mut value_header) = (None, None);
    for h in record.headers.iter() {
        if h.key == key_name {
            key_header = Some(h);
        } else if h.key == value_name {
            value_header = Some(h);
        }
    }
    fn with<'r>(bytes: Option<&'r [u8]>, header: Option<Header<'r>>) -> Option<Payload<'r>> {
        bytes.map(|bytes| Payload { bytes, schema_header: header.and_then(|h| h.value) })
    }
    (with(record.key, key_header), with(record.value, value_header))
}

/// Panics unless `array` is valid in full (offsets, UTF-8, child lengths): the builders
/// make string and binary arrays without Arrow's checks. For debug builds and tests.
pub fn assert_valid(array: &dyn arrow_array::Array, what: &str) {
    if let Err(e) = array.to_data().validate_full() {
        panic!("{what} is not a valid Arrow array: {e}");
    }
}

fn append_payload(
    decoder: &dyn PayloadDecoder,
    payload: Option<Payload<'_>>,
    column: &mut Column,
) -> Result<(), DecodeError> {
    match payload {
        Some(p) => decoder.append(p, column),
        None => {
            column.append_null();
            Ok(())
        }
    }
}

#[inline(always)]
fn append_metadata(kafka: &mut StructColumn, k: &KafkaFields, partition: i32, record: &Record) {
    kafka.append_valid();
    let c = &mut kafka.children;
    // The types are those Bound::check found when the converter was made.
    let Column::Int(p) = &mut c[k.partition] else { unreachable!("layout") };
    p.append_value(partition);
    let Column::Long(o) = &mut c[k.offset] else { unreachable!("layout") };
    o.append_value(record.offset);
    let Column::TimestampMicros(ts) = &mut c[k.timestamp] else { unreachable!("layout") };
    if record.timestamp >= 0 {
        ts.append_value(record.timestamp.saturating_mul(1000));
    } else {
        ts.append_null();
    }
    let Column::String(tt) = &mut c[k.timestamp_type] else { unreachable!("layout") };
    tt.append_value(match record.timestamp_type {
        TimestampType::Create => "create",
        TimestampType::LogAppend => "log_append",
    });
    if let Some(at) = k.tombstone {
        let Column::Boolean(t) = &mut c[at] else { unreachable!("layout") };
        t.append_value(record.value.is_none());
    }
    let Column::List(headers) = &mut c[k.headers] else { unreachable!("layout") };
    let Column::Struct(header) = headers.child.as_mut() else { unreachable!("layout") };
    for h in record.headers.iter() {
        header.append_valid();
        let Column::String(key) = &mut header.children[k.header_key] else { unreachable!("layout") };
        key.append_value(String::from_utf8_lossy(h.key));
        let Column::Binary(v) = &mut header.children[k.header_value] else { unreachable!("layout") };
        v.append_option(h.value);
    }
    headers.close(record.headers.len());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::{Headers, encode_headers};

    #[test]
    fn each_part_gets_the_last_schema_header_of_its_own_name() {
        let mut headers: Vec<(&[u8], Option<&[u8]>)> = vec![
            (b"__value_schema_id", Some(b"first")),
            (b"__key_schema_id", Some(b"key")),
            (b"trace", Some(b"x")),
            (b"__value_schema_id", Some(b"last")),
        ];
        let raw = encode_headers(&headers);
        let mut record = Record {
            offset: 7,
            timestamp: 0,
            timestamp_type: TimestampType::Create,
            key: Some(b"k"),
            value: Some(b"v"),
            headers: Headers::parse(&raw, headers.len()).unwrap(),
        };
        let (key, value) = payloads(&record);
        let value = value.unwrap();
        assert_eq!((value.bytes, value.schema_header), (&b"v"[..], Some(&b"last"[..])));
        let key = key.unwrap();
        assert_eq!((key.bytes, key.schema_header), (&b"k"[..], Some(&b"key"[..])));
        // A last header without a value names no schema: the payload's own framing counts.
        headers.push((b"__value_schema_id", None));
        let raw = encode_headers(&headers);
        record.headers = Headers::parse(&raw, headers.len()).unwrap();
        assert_eq!(payloads(&record).1.unwrap().schema_header, None);
        // A null value has no payload at all.
        record.value = None;
        assert!(payloads(&record).1.is_none());
    }

    /// A raw topic's converter (key and value as bytes).
    fn raw_converter() -> RecordConverter {
        use crate::schema::layout::{PayloadType, table_struct};
        let source = table_struct(&PayloadType::Raw, &PayloadType::Raw).unwrap();
        let schema = Arc::new(crate::schema::plan(None, &source).unwrap().schema);
        RecordConverter::new(schema, 0, Arc::new(RawDecoder), Arc::new(RawDecoder)).unwrap()
    }

    /// A raw topic's schema with its columns as another engine left them: `value` moved
    /// first, a column of its own before `_kafka`, `key` last — or without `value`.
    fn moved_schema(drop_value: bool) -> Arc<Schema> {
        use crate::schema::layout::{PayloadType, table_struct};
        use iceberg::spec::{NestedField, PrimitiveType, Type};
        let source = table_struct(&PayloadType::Raw, &PayloadType::Raw).unwrap();
        let schema = crate::schema::plan(None, &source).unwrap().schema;
        let by_name = |n: &str| schema.as_struct().field_by_name(n).unwrap().clone();
        let note = Arc::new(NestedField::optional(100, "note", Type::Primitive(PrimitiveType::String)));
        let mut fields = vec![by_name("value"), note, by_name("_kafka"), by_name("key")];
        if drop_value {
            fields.remove(0);
        }
        Arc::new(Schema::builder().with_fields(fields).build().unwrap())
    }

    #[test]
    fn columns_are_found_by_name_wherever_the_table_has_them() {
        let schema = moved_schema(false);
        let mut converter = RecordConverter::new(schema, 3, Arc::new(RawDecoder), Arc::new(RawDecoder)).unwrap();
        let record = Record { key: Some(b"k"), ..raw_record(7, b"v", Headers::default()) };
        converter.append(&record).unwrap();
        let batch = converter.finish();
        let names: Vec<&str> = batch.schema_ref().fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["value", "note", "_kafka", "key"], "the table's order");
        use arrow_array::cast::AsArray;
        assert_eq!(batch.column(0).as_binary::<i64>().value(0), b"v");
        assert_eq!(batch.column(3).as_binary::<i64>().value(0), b"k");
        assert_eq!(batch.column(1).null_count(), 1, "another engine's column: null");
        let kafka = batch.column(2).as_struct();
        let offset = kafka.column_by_name("offset").unwrap().as_primitive::<arrow_array::types::Int64Type>();
        assert_eq!(offset.value(0), 7);
    }

    #[test]
    fn a_table_without_a_column_floe_writes_is_an_error_naming_it() {
        let err = RecordConverter::new(moved_schema(true), 0, Arc::new(RawDecoder), Arc::new(RawDecoder))
            .err()
            .expect("no value column");
        assert!(err.to_string().contains("value"), "{err}");
        assert!(bind::writable(&moved_schema(false)).is_ok());
        // `_kafka.partition` promoted to long by another engine: not the int Floe writes.
        use iceberg::spec::{NestedField, PrimitiveType, StructType, Type};
        let schema = moved_schema(false);
        let fields = schema.as_struct().fields().iter().map(|f| match &*f.field_type {
            Type::Struct(kafka) if f.name == "_kafka" => {
                let promoted = kafka.fields().iter().map(|k| match k.name.as_str() {
                    "partition" => {
                        Arc::new(NestedField::required(k.id, "partition", Type::Primitive(PrimitiveType::Long)))
                    }
                    _ => k.clone(),
                });
                Arc::new(NestedField::required(f.id, "_kafka", Type::Struct(StructType::new(promoted.collect()))))
            }
            _ => f.clone(),
        });
        let promoted = Schema::builder().with_fields(fields.collect::<Vec<_>>()).build().unwrap();
        let err = bind::writable(&promoted).unwrap_err();
        assert!(err.to_string().contains("_kafka.partition"), "{err}");
    }

    fn raw_record<'a>(offset: i64, value: &'a [u8], headers: Headers<'a>) -> Record<'a> {
        Record { offset, timestamp: 0, timestamp_type: TimestampType::Create, key: None, value: Some(value), headers }
    }

    #[test]
    fn a_batch_is_full_once_a_column_holds_a_gib_and_headers_count_as_payload() {
        let mut converter = raw_converter();
        // 63 values of 16 MiB sharing one buffer: the value column holds 1,008 MiB.
        let value = vec![7u8; 16 << 20];
        for offset in 0..63 {
            converter.append(&raw_record(offset, &value, Headers::default())).unwrap();
        }
        assert!(!converter.offsets_full(), "under 1 GiB, and not a 64th row");
        converter.append(&raw_record(63, &value, Headers::default())).unwrap();
        assert_eq!(converter.rows(), 64);
        assert!(converter.offsets_full(), "1 GiB at the 64th row");
        let batch = converter.finish();
        assert_eq!(batch.num_rows(), 64);
        assert!(!converter.offsets_full(), "a new batch starts empty");
        drop((batch, value));

        // Header keys and values count towards the batch's payload bytes.
        let raw = encode_headers(&[(b"trace", Some(b"0123456789"))]);
        converter.append(&raw_record(64, b"v", Headers::parse(&raw, 1).unwrap())).unwrap();
        assert_eq!(converter.payload_bytes(), 1 + 5 + 10);
    }
}
