//! Avro: schemas → Iceberg types, and binary payloads decoded straight into Arrow
//! columns (no intermediate values).
//!
//! | Avro | Iceberg | Arrow |
//! |---|---|---|
//! | boolean | boolean | Boolean |
//! | int | int | Int32 |
//! | long | long | Int64 |
//! | float | float | Float32 |
//! | double | double | Float64 |
//! | bytes | binary | LargeBinary |
//! | string | string | Utf8 |
//! | record | struct (fields optional: older writers may lack them) | Struct |
//! | enum | string (the symbol) | Utf8 |
//! | array | list | List |
//! | map | map<string, V> | Map |
//! | fixed(n) | fixed(n) | FixedSizeBinary(n) |
//! | union [null, T] | optional T | T, nullable |
//! | union of several types | struct of optional `member0`, `member1`, … (one set) | Struct |
//! | decimal(p, s) (bytes or fixed) | decimal(p, s) | Decimal128(p, s) |
//! | date | date | Date32 |
//! | time-millis, time-micros | time | Time64(µs) |
//! | timestamp-millis, timestamp-micros | timestamptz | Timestamp(µs, UTC) |
//! | timestamp-nanos | timestamptz_ns | Timestamp(ns, UTC) |
//! | local-timestamp-millis, local-timestamp-micros | timestamp | Timestamp(µs) |
//! | local-timestamp-nanos | timestamp_ns | Timestamp(ns) |
//! | uuid | uuid | FixedSizeBinary(16) |
//! | duration (fixed 12) | binary (its 12 bytes) | LargeBinary |
//!
//! A record written with another schema version than the table's is resolved by field
//! name: fields the table lacks are skipped, table columns the writer lacks are null, and
//! int → long / float / double, long → float / double, float → double are widened.

use std::collections::HashMap;
use std::sync::Arc;

use apache_avro::Schema as Avro;
use iceberg::spec::{ListType, MapType, NestedField, PrimitiveType, StructType, Type};

use crate::columns::{Column, DecodeError, PayloadDecoder, SchemaLoadError, Shape};
use crate::config::Envelope;
use crate::formats::by_id::SchemaSet;
use crate::formats::part::{FormatError, MakeDecoder, Part, PartContext};
use crate::registry::wire::{Payload, SchemaId, no_header_rest};
use crate::registry::{Resolved, SchemaRegistry, SchemaType};
use crate::schema::layout::PayloadType;

mod decode;
pub use decode::{AvroTarget, CompiledAvro};

/// An Avro schema Floe cannot map or decode against the table.
#[derive(Debug, Clone, thiserror::Error)]
#[error("avro schema: {0}")]
pub struct AvroSchemaError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, AvroSchemaError> {
    Err(AvroSchemaError(msg.into()))
}

/// Named types of a schema (records, enums, fixed) by full name, for `Ref`s.
#[derive(Default)]
struct Names<'a>(HashMap<String, &'a Avro>);

impl<'a> Names<'a> {
    /// The named types of `schema` and of the schemas it references.
    fn collect(schema: &'a Avro, references: &'a [Avro]) -> Names<'a> {
        let mut names = Names::default();
        references.iter().for_each(|r| names.walk(r));
        names.walk(schema);
        names
    }

    fn walk(&mut self, s: &'a Avro) {
        match s {
            Avro::Record(r) => {
                self.0.insert(r.name.fullname(None), s);
                r.fields.iter().for_each(|f| self.walk(&f.schema));
            }
            Avro::Enum(e) => {
                self.0.insert(e.name.fullname(None), s);
            }
            Avro::Fixed(f) => {
                self.0.insert(f.name.fullname(None), s);
            }
            Avro::Array(a) => self.walk(&a.items),
            Avro::Map(m) => self.walk(&m.types),
            Avro::Union(u) => u.variants().iter().for_each(|v| self.walk(v)),
            _ => {}
        }
    }

    fn resolve(&self, s: &'a Avro) -> Result<&'a Avro, AvroSchemaError> {
        match s {
            Avro::Ref { name } => {
                self.0.get(&name.fullname(None)).copied().ok_or_else(|| AvroSchemaError(format!("unknown type {name}")))
            }
            other => Ok(other),
        }
    }
}

/// Parses a registry schema with the schemas it references (named types it uses by full
/// name); returns it and them.
pub fn parse_registered(resolved: &Resolved) -> Result<(Avro, Vec<Avro>), AvroSchemaError> {
    for r in &resolved.references {
        if r.schema.schema_type != SchemaType::Avro {
            return err(format!("reference {} is a {:?} schema", r.name, r.schema.schema_type));
        }
    }
    let references = resolved.references.iter().map(|r| r.schema.schema.as_str());
    Avro::parse_str_with_list(&resolved.schema.schema, references).map_err(|e| AvroSchemaError(e.to_string()))
}

/// Maps an Avro schema (using named types of `references`) to the Iceberg type of its
/// payload (placeholder field ids).
pub fn to_payload_type(schema: &Avro, references: &[Avro]) -> Result<PayloadType, AvroSchemaError> {
    let names = Names::collect(schema, references);
    let mut stack = Vec::new();
    match to_type(schema, &names, &mut stack)? {
        (Type::Struct(s), _) if matches!(schema, Avro::Record(_)) => Ok(PayloadType::Record(s)),
        (t, _) => Ok(PayloadType::Other(t)),
    }
}

/// The Iceberg type of the rows of a Debezium envelope schema: its `after` record.
pub fn debezium_payload_type(envelope: &Avro, references: &[Avro]) -> Result<PayloadType, AvroSchemaError> {
    let names = Names::collect(envelope, references);
    let after = decode::debezium_after(envelope, &names)?;
    let record = Avro::Record(after.clone());
    match to_type(&record, &names, &mut Vec::new())? {
        (Type::Struct(s), _) => Ok(PayloadType::Record(s)),
        (t, _) => Err(AvroSchemaError(format!("a Debezium `after` of type {t}, not a record"))),
    }
}

fn prim(p: PrimitiveType) -> Type {
    Type::Primitive(p)
}

/// The Iceberg type and whether null is allowed.
fn to_type<'a>(s: &'a Avro, names: &Names<'a>, stack: &mut Vec<String>) -> Result<(Type, bool), AvroSchemaError> {
    let s = names.resolve(s)?;
    Ok((
        match s {
            Avro::Null => return err("a bare null type has no column"),
            Avro::Boolean => prim(PrimitiveType::Boolean),
            Avro::Int => prim(PrimitiveType::Int),
            Avro::Long => prim(PrimitiveType::Long),
            Avro::Float => prim(PrimitiveType::Float),
            Avro::Double => prim(PrimitiveType::Double),
            Avro::Bytes | Avro::Duration => prim(PrimitiveType::Binary),
            Avro::String | Avro::Enum(_) => prim(PrimitiveType::String),
            Avro::Fixed(f) => prim(PrimitiveType::Fixed(f.size as u64)),
            Avro::Decimal(d) => prim(PrimitiveType::Decimal { precision: d.precision as u32, scale: d.scale as u32 }),
            Avro::BigDecimal => return err("big-decimal has no fixed precision: not supported"),
            Avro::Uuid => prim(PrimitiveType::Uuid),
            Avro::Date => prim(PrimitiveType::Date),
            Avro::TimeMillis | Avro::TimeMicros => prim(PrimitiveType::Time),
            Avro::TimestampMillis | Avro::TimestampMicros => prim(PrimitiveType::Timestamptz),
            Avro::TimestampNanos => prim(PrimitiveType::TimestamptzNs),
            Avro::LocalTimestampMillis | Avro::LocalTimestampMicros => prim(PrimitiveType::Timestamp),
            Avro::LocalTimestampNanos => prim(PrimitiveType::TimestampNs),
            Avro::Array(a) => {
                let (element, nullable) = to_type(&a.items, names, stack)?;
                Type::List(ListType::new(Arc::new(NestedField::list_element(0, element, !nullable))))
            }
            Avro::Map(m) => {
                let (value, nullable) = to_type(&m.types, names, stack)?;
                Type::Map(MapType::new(
                    Arc::new(NestedField::map_key_element(0, prim(PrimitiveType::String))),
                    Arc::new(NestedField::map_value_element(0, value, !nullable)),
                ))
            }
            Avro::Record(r) => {
                let name = r.name.fullname(None);
                if stack.contains(&name) {
                    return err(format!("recursive type {name} cannot be a table column"));
                }
                stack.push(name);
                let mut fields = Vec::with_capacity(r.fields.len());
                for f in &r.fields {
                    let (t, _) = to_type(&f.schema, names, stack)?;
                    let mut field = NestedField::optional(0, &f.name, t);
                    field.doc = f.doc.clone();
                    fields.push(Arc::new(field));
                }
                stack.pop();
                Type::Struct(StructType::new(fields))
            }
            Avro::Union(u) => {
                let non_null: Vec<&Avro> = u.variants().iter().filter(|v| !matches!(v, Avro::Null)).collect();
                let nullable = non_null.len() < u.variants().len();
                return match non_null.as_slice() {
                    [] => err("a union of only null has no column"),
                    [one] => Ok((to_type(one, names, stack)?.0, nullable)),
                    many => {
                        let mut fields = Vec::with_capacity(many.len());
                        for (i, v) in many.iter().enumerate() {
                            fields.push(Arc::new(NestedField::optional(
                                0,
                                format!("member{i}"),
                                to_type(v, names, stack)?.0,
                            )));
                        }
                        Ok((Type::Struct(StructType::new(fields)), nullable))
                    }
                };
            }
            Avro::Ref { .. } => unreachable!("resolved above"),
        },
        false,
    ))
}

impl Shape {
    fn target(&self) -> AvroTarget<'_> {
        match self {
            Shape::Column(t) => AvroTarget::Column(t),
            Shape::Fields(f) => AvroTarget::Fields(f),
        }
    }
}

/// Avro payloads in the Confluent wire format.
pub struct AvroDecoder {
    part: &'static str,
    shape: Shape,
    /// Payloads are Debezium change events, the rows their `after` images.
    debezium: bool,
    schemas: SchemaSet<CompiledAvro>,
}

impl AvroDecoder {
    /// Every payload decoded with `writer` (a local schema file).
    pub fn fixed(
        part: &'static str,
        writer: &Avro,
        shape: Shape,
        debezium: bool,
    ) -> Result<AvroDecoder, AvroSchemaError> {
        let compiled = compile(writer, &[], &shape, debezium)?;
        Ok(AvroDecoder { part, shape, debezium, schemas: SchemaSet::fixed(compiled) })
    }

    /// Writer schemas by the id in each payload, loaded from `registry` on first sight.
    pub fn registry(
        part: &'static str,
        registry: Arc<dyn SchemaRegistry>,
        shape: Shape,
        debezium: bool,
    ) -> AvroDecoder {
        AvroDecoder { part, shape, debezium, schemas: SchemaSet::registry(registry) }
    }
}

/// `writer` compiled for the table's columns `shape`: as a Debezium envelope (`debezium`),
/// its `after` record into the table's record columns.
fn compile(writer: &Avro, references: &[Avro], shape: &Shape, debezium: bool) -> Result<CompiledAvro, AvroSchemaError> {
    match (debezium, shape) {
        (false, _) => CompiledAvro::new(writer, references, shape.target()),
        (true, Shape::Fields(fields)) => CompiledAvro::debezium(writer, references, fields),
        (true, Shape::Column(_)) => {
            err("a Debezium envelope's rows are records: the value must be laid out as columns")
        }
    }
}

#[async_trait::async_trait]
impl PayloadDecoder for AvroDecoder {
    fn append(&self, payload: Payload<'_>, column: &mut Column) -> Result<(), DecodeError> {
        self.schemas.decode(payload, self.part, |compiled, framed| {
            no_header_rest(&framed, self.part)?;
            compiled.append(framed.body, column, self.part, framed.offset)
        })
    }

    fn append_fields(&self, payload: Payload<'_>, fields: &mut [Column]) -> Result<(), DecodeError> {
        self.schemas.decode(payload, self.part, |compiled, framed| {
            no_header_rest(&framed, self.part)?;
            compiled.append_fields(framed.body, fields, self.part, framed.offset)
        })
    }

    async fn load_schema(&self, id: SchemaId) -> Result<(), SchemaLoadError> {
        self.schemas
            .load(id, SchemaType::Avro, |resolved| {
                let (writer, references) = parse_registered(resolved).map_err(|e| e.to_string())?;
                compile(&writer, &references, &self.shape, self.debezium).map_err(|e| e.to_string())
            })
            .await
    }
}

/// Sets up an Avro key or value: the table's type from the schema the context names,
/// and a decoder by payload schema id (registry) or with that one schema (local file).
pub async fn part(ctx: &PartContext<'_>) -> Result<Part, FormatError> {
    let (resolved, registry) = ctx.table_schema(SchemaType::Avro).await?;
    let (avro, references) = parse_registered(&resolved).map_err(|e| ctx.schema_error(e))?;
    // A Debezium topic's values are change events; its rows, their `after` images.
    let debezium = ctx.name == "value" && ctx.topic.envelope == Some(Envelope::Debezium);
    let payload = match debezium {
        true => debezium_payload_type(&avro, &references),
        false => to_payload_type(&avro, &references),
    }
    .map_err(|e| ctx.schema_error(e))?;
    let name = ctx.name;
    let make: MakeDecoder = match registry {
        Some(registry) => Box::new(move |shape| {
            Ok(Arc::new(AvroDecoder::registry(name, registry, shape, debezium)) as Arc<dyn PayloadDecoder>)
        }),
        None => Box::new(move |shape| {
            AvroDecoder::fixed(name, &avro, shape, debezium)
                .map(|d| Arc::new(d) as Arc<dyn PayloadDecoder>)
                .map_err(|e| e.to_string())
        }),
    };
    Ok(Part { payload, make })
}

#[cfg(test)]
mod tests {
    use arrow_schema::{DataType, TimeUnit};

    use super::*;

    /// Every row of the mapping table above: the Avro type, the Iceberg type it maps to,
    /// and the Arrow type its column is written with.
    #[test]
    fn every_row_of_the_mapping_table() {
        let field = |name: &str, t: &str| format!(r#"{{"name": "{name}", "type": {t}}}"#);
        let rows: Vec<(&str, &str, &str, DataType)> = vec![
            ("boolean", r#""boolean""#, "boolean", DataType::Boolean),
            ("int", r#""int""#, "int", DataType::Int32),
            ("long", r#""long""#, "long", DataType::Int64),
            ("float", r#""float""#, "float", DataType::Float32),
            ("double", r#""double""#, "double", DataType::Float64),
            ("bytes", r#""bytes""#, "binary", DataType::LargeBinary),
            ("string", r#""string""#, "string", DataType::Utf8),
            ("enum", r#"{"type": "enum", "name": "E", "symbols": ["A", "B"]}"#, "string", DataType::Utf8),
            ("fixed", r#"{"type": "fixed", "name": "F", "size": 4}"#, "fixed(4)", DataType::FixedSizeBinary(4)),
            ("nullable", r#"["null", "long"]"#, "long", DataType::Int64),
            (
                "dec_bytes",
                r#"{"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}"#,
                "decimal(9, 2)",
                DataType::Decimal128(9, 2),
            ),
            (
                "dec_fixed",
                r#"{"type": "fixed", "name": "D", "size": 8, "logicalType": "decimal", "precision": 18, "scale": 4}"#,
                "decimal(18, 4)",
                DataType::Decimal128(18, 4),
            ),
            ("date", r#"{"type": "int", "logicalType": "date"}"#, "date", DataType::Date32),
            (
                "t_ms",
                r#"{"type": "int", "logicalType": "time-millis"}"#,
                "time",
                DataType::Time64(TimeUnit::Microsecond),
            ),
            (
                "t_us",
                r#"{"type": "long", "logicalType": "time-micros"}"#,
                "time",
                DataType::Time64(TimeUnit::Microsecond),
            ),
            (
                "ts_ms",
                r#"{"type": "long", "logicalType": "timestamp-millis"}"#,
                "timestamptz",
                DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
            ),
            (
                "ts_us",
                r#"{"type": "long", "logicalType": "timestamp-micros"}"#,
                "timestamptz",
                DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
            ),
            (
                "ts_ns",
                r#"{"type": "long", "logicalType": "timestamp-nanos"}"#,
                "timestamptz_ns",
                DataType::Timestamp(TimeUnit::Nanosecond, Some("+00:00".into())),
            ),
            (
                "lts_ms",
                r#"{"type": "long", "logicalType": "local-timestamp-millis"}"#,
                "timestamp",
                DataType::Timestamp(TimeUnit::Microsecond, None),
            ),
            (
                "lts_us",
                r#"{"type": "long", "logicalType": "local-timestamp-micros"}"#,
                "timestamp",
                DataType::Timestamp(TimeUnit::Microsecond, None),
            ),
            (
                "lts_ns",
                r#"{"type": "long", "logicalType": "local-timestamp-nanos"}"#,
                "timestamp_ns",
                DataType::Timestamp(TimeUnit::Nanosecond, None),
            ),
            ("uid", r#"{"type": "string", "logicalType": "uuid"}"#, "uuid", DataType::FixedSizeBinary(16)),
            (
                "dur",
                r#"{"type": "fixed", "name": "Dur", "size": 12, "logicalType": "duration"}"#,
                "binary",
                DataType::LargeBinary,
            ),
        ];
        let record = format!(
            r#"{{"type": "record", "name": "r", "fields": [{}]}}"#,
            rows.iter().map(|(name, avro, ..)| field(name, avro)).collect::<Vec<_>>().join(", ")
        );
        let PayloadType::Record(s) = to_payload_type(&Avro::parse_str(&record).unwrap(), &[]).unwrap() else {
            panic!("a record")
        };
        let schema = crate::schema::plan(None, &s).unwrap().schema;
        let arrow = iceberg::arrow::schema_to_arrow_schema(&schema).unwrap();
        for (name, _, iceberg, arrow_type) in &rows {
            let f = schema.field_by_name(name).unwrap();
            assert_eq!(f.field_type.to_string(), *iceberg, "{name}");
            assert_eq!(arrow.field_with_name(name).unwrap().data_type(), arrow_type, "{name}");
        }
        // The structured rows.
        let nested = r#"{"type": "record", "name": "n", "fields": [
            {"name": "rec", "type": {"type": "record", "name": "In", "fields": [{"name": "a", "type": "int"}]}},
            {"name": "arr", "type": {"type": "array", "items": "string"}},
            {"name": "m", "type": {"type": "map", "values": "long"}},
            {"name": "u", "type": ["null", "int", "string"]}]}"#;
        let PayloadType::Record(s) = to_payload_type(&Avro::parse_str(nested).unwrap(), &[]).unwrap() else {
            panic!("a record")
        };
        let types: Vec<String> = s.fields().iter().map(|f| f.field_type.to_string()).collect();
        let shapes: Vec<bool> = s
            .fields()
            .iter()
            .map(|f| match (f.name.as_str(), f.field_type.as_ref()) {
                ("rec", Type::Struct(st)) => st.fields().len() == 1 && st.fields()[0].name == "a",
                ("arr", Type::List(l)) => *l.element_field.field_type == prim(PrimitiveType::String),
                ("m", Type::Map(m)) => *m.value_field.field_type == prim(PrimitiveType::Long),
                ("u", Type::Struct(st)) => {
                    st.fields().iter().map(|f| f.name.as_str()).collect::<Vec<_>>() == ["member0", "member1"]
                }
                _ => false,
            })
            .collect();
        assert_eq!(shapes, [true; 4], "{types:?}");
    }
}
