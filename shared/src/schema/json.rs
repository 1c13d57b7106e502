//! JSON values into Arrow columns, shared by the `json` and `json-schema` formats; and
//! schema inference for plain JSON (no schema anywhere).
//!
//! Plain JSON (`json`): the table's types are inferred from the segment's records (a
//! first pass over the segment), merged field by field:
//!
//! | JSON | Iceberg | Arrow |
//! |---|---|---|
//! | `true` / `false` | boolean | Boolean |
//! | integer (fits i64) | long | Int64 |
//! | number with a fraction or exponent (or mixed with integers) | double | Float64 |
//! | string | string | Utf8 |
//! | array | list (element type merged over all elements) | List |
//! | object | struct (fields merged over all records, optional) | Struct |
//! | only ever null | string | Utf8 |
//! | values of conflicting kinds | string (the JSON text of non-strings) | Utf8 |
//!
//! A value that is not JSON is a bad record.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_schema::{DataType, Fields, TimeUnit};
use iceberg::spec::{ListType, NestedField, PrimitiveType, StructType, Type};
use serde_json::Value;

use crate::convert::{Column, DecodeError, PayloadDecoder, Shape};
use crate::schema::formats::{FormatError, MakeDecoder, Part, PartContext};
use crate::schema::layout::PayloadType;
use crate::schema::wire::{self, Payload, SchemaId};
use crate::segment::{SegmentError, SegmentReader};

type R<T> = Result<T, String>;

/// Appends `v` to `col`, or only checks that it fits when `col` is `None`.
pub fn put(v: &Value, dt: &DataType, col: Option<&mut Column>) -> R<()> {
    if v.is_null() {
        if let Some(c) = col {
            c.append_null();
        }
        return Ok(());
    }
    match (dt, v) {
        (DataType::Boolean, Value::Bool(b)) => {
            if let Some(Column::Boolean(c)) = col {
                c.append_value(*b);
            }
        }
        (DataType::Int32, Value::Number(n)) => {
            let i =
                n.as_i64().and_then(|i| i32::try_from(i).ok()).ok_or_else(|| format!("{n} is not a 32-bit integer"))?;
            if let Some(Column::Int(c)) = col {
                c.append_value(i);
            }
        }
        (DataType::Int64, Value::Number(n)) => {
            let i = n.as_i64().ok_or_else(|| format!("{n} is not a 64-bit integer"))?;
            if let Some(Column::Long(c)) = col {
                c.append_value(i);
            }
        }
        (DataType::Float64 | DataType::Float32, Value::Number(n)) => {
            let f = n.as_f64().ok_or_else(|| format!("{n} is not a number"))?;
            match col {
                Some(Column::Double(c)) => c.append_value(f),
                Some(Column::Float(c)) => c.append_value(f as f32),
                _ => {}
            }
        }
        (DataType::Utf8, Value::String(s)) => {
            if let Some(Column::String(c)) = col {
                c.append_value(s);
            }
        }
        // A column inferred as string from conflicting kinds keeps their JSON text.
        (DataType::Utf8, other) => {
            if let Some(Column::String(c)) = col {
                c.append_value(other.to_string());
            }
        }
        (DataType::Date32, Value::String(s)) => {
            let d = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").map_err(|e| format!("date {s:?}: {e}"))?;
            let days = d.signed_duration_since(chrono::NaiveDate::default()).num_days();
            if let Some(Column::Date(c)) = col {
                c.append_value(days as i32);
            }
        }
        (DataType::Time64(TimeUnit::Microsecond), Value::String(s)) => {
            let t = chrono::NaiveTime::parse_from_str(s.trim_end_matches('Z'), "%H:%M:%S%.f")
                .map_err(|e| format!("time {s:?}: {e}"))?;
            let micros = t.signed_duration_since(chrono::NaiveTime::MIN).num_microseconds().unwrap_or(0);
            if let Some(Column::Time(c)) = col {
                c.append_value(micros);
            }
        }
        (DataType::Timestamp(TimeUnit::Microsecond, _), Value::String(s)) => {
            let t = chrono::DateTime::parse_from_rfc3339(s).map_err(|e| format!("date-time {s:?}: {e}"))?;
            if let Some(Column::TimestampMicros(c)) = col {
                c.append_value(t.timestamp_micros());
            }
        }
        (DataType::FixedSizeBinary(16), Value::String(s)) => {
            let u = uuid::Uuid::parse_str(s).map_err(|e| format!("uuid {s:?}: {e}"))?;
            if let Some(Column::Fixed(c)) = col {
                c.append_value(u.as_bytes()).map_err(|e| e.to_string())?;
            }
        }
        (DataType::LargeBinary, Value::String(s)) => {
            if let Some(Column::Binary(c)) = col {
                c.append_value(s.as_bytes());
            }
        }
        (DataType::Struct(fields), Value::Object(map)) => match col {
            Some(Column::Struct(s)) => {
                s.append_valid();
                put_fields(map, fields, Some(&mut s.children))?;
            }
            _ => put_fields(map, fields, None)?,
        },
        (DataType::List(field), Value::Array(items)) => match col {
            Some(Column::List(list)) => {
                for item in items {
                    put_element(item, field.is_nullable(), field.data_type(), Some(&mut list.child))?;
                }
                list.close(items.len());
            }
            _ => {
                for item in items {
                    put_element(item, field.is_nullable(), field.data_type(), None)?;
                }
            }
        },
        (DataType::Map(entries, _), Value::Object(map)) => {
            let DataType::Struct(kv) = entries.data_type() else { return Err("malformed map column".into()) };
            let (value_type, nullable) = (kv[1].data_type(), kv[1].is_nullable());
            match col {
                Some(Column::Map(m)) => {
                    for (k, v) in map {
                        let Column::String(keys) = m.keys.as_mut() else {
                            return Err("map keys must be strings".into());
                        };
                        keys.append_value(k);
                        put_element(v, nullable, value_type, Some(&mut m.values))?;
                    }
                    m.close(map.len());
                }
                _ => {
                    for v in map.values() {
                        put_element(v, nullable, value_type, None)?;
                    }
                }
            }
        }
        (dt, v) => return Err(format!("{} where {dt} was expected", kind(v))),
    }
    Ok(())
}

fn put_element(v: &Value, nullable: bool, dt: &DataType, col: Option<&mut Column>) -> R<()> {
    if v.is_null() && !nullable {
        return Err("null element where a value is required".into());
    }
    put(v, dt, col)
}

/// An object's members into the struct's fields, by name; missing members are null.
pub fn put_fields(
    map: &serde_json::Map<String, Value>,
    fields: &Fields,
    mut children: Option<&mut Vec<Column>>,
) -> R<()> {
    for (i, field) in fields.iter().enumerate() {
        let v = map.get(field.name()).unwrap_or(&Value::Null);
        if v.is_null() && !field.is_nullable() {
            return Err(format!("required field `{}` is missing", field.name()));
        }
        put(v, field.data_type(), children.as_mut().map(|c| &mut c[i]))
            .map_err(|e| format!("{}: {e}", field.name()))?;
    }
    Ok(())
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Decodes JSON text into a shape; `header`: payloads carry the Confluent wire header.
pub struct JsonDecoder {
    part: &'static str,
    shape: Shape,
    header: bool,
}

impl JsonDecoder {
    pub fn new(part: &'static str, shape: Shape, header: bool) -> JsonDecoder {
        JsonDecoder { part, shape, header }
    }

    /// The payload's JSON; with `header`, after the schema id (the id itself is not
    /// used: JSON decodes by the table's types).
    fn parse(&self, payload: Payload<'_>) -> Result<Value, DecodeError> {
        let (offset, body) = if self.header {
            let framed = wire::frame(payload, self.part)?;
            wire::no_header_rest(&framed, self.part)?;
            (framed.offset, framed.body)
        } else {
            (0, payload.bytes)
        };
        serde_json::from_slice(body).map_err(|e| DecodeError {
            part: self.part,
            position: offset + byte_of(body, e.line(), e.column()),
            detail: format!("not JSON: {e}"),
            missing_schema: None,
        })
    }

    fn error(&self, detail: String) -> DecodeError {
        DecodeError { part: self.part, position: 0, detail, missing_schema: None }
    }

    fn walk(&self, v: &Value, target: Option<Target<'_>>) -> R<()> {
        match (&self.shape, target) {
            (Shape::Column(dt), None) => put(v, dt, None),
            (Shape::Column(dt), Some(Target::Column(c))) => put(v, dt, Some(c)),
            (Shape::Fields(fields), t) => {
                let Value::Object(map) = v else { return Err(format!("{} where an object was expected", kind(v))) };
                match t {
                    Some(Target::Fields(children)) => {
                        for (i, field) in fields.iter().enumerate() {
                            let member = map.get(field.name()).unwrap_or(&Value::Null);
                            put(member, field.data_type(), Some(&mut children[i]))
                                .map_err(|e| format!("{}: {e}", field.name()))?;
                        }
                        Ok(())
                    }
                    _ => put_fields(map, fields, None),
                }
            }
            (Shape::Column(_), Some(Target::Fields(_))) => Err("internal: fields target for a column shape".into()),
        }
    }
}

enum Target<'a> {
    Column(&'a mut Column),
    Fields(&'a mut [Column]),
}

/// serde_json reports line and column; turn them into a byte position.
fn byte_of(body: &[u8], line: usize, column: usize) -> usize {
    let mut line_start = 0;
    for _ in 1..line {
        match body[line_start..].iter().position(|&b| b == b'\n') {
            Some(i) => line_start += i + 1,
            None => break,
        }
    }
    (line_start + column.saturating_sub(1)).min(body.len())
}

#[async_trait::async_trait]
impl PayloadDecoder for JsonDecoder {
    fn append(&self, payload: Payload<'_>, column: &mut Column) -> Result<(), DecodeError> {
        let v = self.parse(payload)?;
        self.walk(&v, Some(Target::Column(column))).map_err(|detail| self.error(detail))
    }

    fn append_fields(&self, payload: Payload<'_>, fields: &mut [Column]) -> Result<(), DecodeError> {
        let v = self.parse(payload)?;
        self.walk(&v, Some(Target::Fields(fields))).map_err(|detail| self.error(detail))
    }

    async fn load_schema(&self, _id: SchemaId) -> Result<(), crate::convert::SchemaLoadError> {
        Ok(())
    }
}

/// Sets up a plain JSON key or value from the types inferred from the records.
pub fn part(ctx: &PartContext<'_>) -> Result<Part, FormatError> {
    let inferred = ctx.inferred.ok_or_else(|| ctx.error("plain JSON needs the records to infer its types from"))?;
    let name = ctx.name;
    let make: MakeDecoder =
        Box::new(move |shape| Ok(Arc::new(JsonDecoder::new(name, shape, false)) as Arc<dyn PayloadDecoder>));
    Ok(Part { payload: inferred.payload_type(), make })
}

/// Infers the key and value types of a segment's records (committed and open
/// transactions alike); payloads that are not JSON are left to the decoding pass.
pub async fn infer(mut reader: SegmentReader) -> Result<(Inferred, Inferred), SegmentError> {
    let (mut key, mut value) = (Inferred::default(), Inferred::default());
    while let Some(batch) = reader.next_batch().await? {
        for r in &batch.records {
            for (payload, inferred) in [(&r.key, &mut key), (&r.value, &mut value)] {
                if let Some(Ok(v)) = payload.as_deref().map(serde_json::from_slice::<Value>) {
                    inferred.observe(&v);
                }
            }
        }
    }
    Ok((key, value))
}

/// The type inferred so far for one position in the records.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Inferred {
    /// Only nulls (or nothing) seen.
    #[default]
    Unknown,
    Boolean,
    Long,
    Double,
    String,
    /// Values of conflicting kinds: kept as JSON text.
    Text,
    List(Box<Inferred>),
    Object(BTreeMap<String, Inferred>),
}

impl Inferred {
    /// Widens the inferred type with one more value.
    pub fn observe(&mut self, v: &Value) {
        let seen = match v {
            Value::Null => return,
            Value::Bool(_) => Inferred::Boolean,
            Value::Number(n) if n.is_i64() => Inferred::Long,
            Value::Number(_) => Inferred::Double,
            Value::String(_) => Inferred::String,
            Value::Array(items) => {
                let mut element = match self {
                    Inferred::List(e) => std::mem::take(e.as_mut()),
                    _ => Inferred::Unknown,
                };
                items.iter().for_each(|i| element.observe(i));
                Inferred::List(Box::new(element))
            }
            Value::Object(map) => {
                let mut fields = match self {
                    Inferred::Object(f) => std::mem::take(f),
                    _ => BTreeMap::new(),
                };
                for (k, v) in map {
                    fields.entry(k.clone()).or_default().observe(v);
                }
                Inferred::Object(fields)
            }
        };
        *self = match (std::mem::take(self), seen) {
            (Inferred::Unknown, s) => s,
            (Inferred::Long, Inferred::Double) | (Inferred::Double, Inferred::Long) => Inferred::Double,
            (a, s) if std::mem::discriminant(&a) == std::mem::discriminant(&s) => s,
            _ => Inferred::Text,
        };
    }

    fn to_type(&self) -> Type {
        let p = |t| Type::Primitive(t);
        match self {
            Inferred::Unknown | Inferred::String | Inferred::Text => p(PrimitiveType::String),
            Inferred::Boolean => p(PrimitiveType::Boolean),
            Inferred::Long => p(PrimitiveType::Long),
            Inferred::Double => p(PrimitiveType::Double),
            Inferred::List(e) => Type::List(ListType::new(Arc::new(NestedField::list_element(0, e.to_type(), false)))),
            Inferred::Object(fields) => Type::Struct(StructType::new(
                fields.iter().map(|(k, v)| Arc::new(NestedField::optional(0, k, v.to_type()))).collect(),
            )),
        }
    }

    /// The payload type: an object at the top becomes the value-as-payload layout.
    pub fn payload_type(&self) -> PayloadType {
        match self.to_type() {
            Type::Struct(s) if !s.fields().is_empty() => PayloadType::Record(s),
            Type::Struct(_) => PayloadType::Other(Type::Primitive(PrimitiveType::String)),
            t => PayloadType::Other(t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn infer(values: &[&str]) -> Inferred {
        let mut i = Inferred::default();
        for v in values {
            i.observe(&serde_json::from_str(v).unwrap());
        }
        i
    }

    #[test]
    fn inference_widens_and_merges() {
        let i = infer(&[r#"{"a": 1, "b": "x"}"#, r#"{"a": 2.5, "c": [1, 2], "d": null}"#, r#"{"b": 3, "c": []}"#]);
        let Inferred::Object(f) = &i else { panic!("{i:?}") };
        assert_eq!(f["a"], Inferred::Double);
        assert_eq!(f["b"], Inferred::Text);
        assert_eq!(f["c"], Inferred::List(Box::new(Inferred::Long)));
        assert_eq!(f["d"], Inferred::Unknown);
        assert!(matches!(i.payload_type(), PayloadType::Record(s) if s.fields().len() == 4));
        assert_eq!(infer(&["1", "2"]).payload_type(), PayloadType::Other(Type::Primitive(PrimitiveType::Long)));
    }

    /// Every row of the mapping table above: the Iceberg type a field gets, and its Arrow column.
    #[test]
    fn every_row_of_the_mapping_table() {
        let i = infer(&[
            r#"{"b": true, "l": 1, "d": 1.5, "e": 2, "s": "x", "a": [1, 2.5], "o": {"k": "v"}, "n": null, "c": 1}"#,
            r#"{"b": false, "l": -3, "d": 2, "e": 1e3, "s": "y", "a": [], "o": {"j": 1}, "n": null, "c": "one"}"#,
        ]);
        let PayloadType::Record(s) = i.payload_type() else { panic!("{i:?}") };
        let schema = crate::schema::plan(None, &s).unwrap().schema;
        let arrow = iceberg::arrow::schema_to_arrow_schema(&schema).unwrap();
        for (name, iceberg, arrow_type) in [
            ("b", "boolean", Some(DataType::Boolean)),
            ("l", "long", Some(DataType::Int64)),
            ("d", "double", Some(DataType::Float64)),
            ("e", "double", Some(DataType::Float64)),
            ("s", "string", Some(DataType::Utf8)),
            ("a", "list", None),
            ("o", "struct", None),
            ("n", "string", Some(DataType::Utf8)),
            ("c", "string", Some(DataType::Utf8)),
        ] {
            let t = schema.field_by_name(name).unwrap().field_type.to_string();
            assert!(t.starts_with(iceberg), "{name}: {t}");
            let got = arrow.field_with_name(name).unwrap().data_type();
            match arrow_type {
                Some(want) => assert_eq!(got, &want, "{name}"),
                None if name == "a" => {
                    assert!(matches!(got, DataType::List(f) if *f.data_type() == DataType::Float64), "{name}: {got}")
                }
                None => assert!(matches!(got, DataType::Struct(f) if f.len() == 2), "{name}: {got}"),
            }
        }
    }

    #[test]
    fn damaged_payloads_are_errors_and_leave_the_columns_consistent() {
        let values = [
            r#"{"id": 1, "name": "é", "tags": ["a", "b"], "at": {"city": "x", "n": 2.5}, "ok": true}"#,
            r#"{"id": -7, "tags": [], "at": null, "ok": false}"#,
        ];
        let inferred = infer(&values);
        let PayloadType::Record(s) = inferred.payload_type() else { panic!("record") };
        let schema = crate::schema::plan(None, &s).unwrap().schema;
        let fields = iceberg::arrow::schema_to_arrow_schema(&schema).unwrap().fields().clone();
        let decoder = JsonDecoder::new("value", Shape::Fields(fields.clone()), false);
        let payloads: Vec<Vec<u8>> = values.iter().map(|v| v.as_bytes().to_vec()).collect();
        let mut root = crate::convert::StructColumn::new(&fields).unwrap();
        let (ok, failed) =
            crate::convert::damage::decode_damaged(&mut root, &payloads, 0x15011, 10_000, |p, columns| {
                decoder.append_fields(p.into(), columns)
            });
        assert!(ok > 0 && failed > 1000, "{ok} decoded, {failed} failed");
    }

    #[test]
    fn byte_positions_from_lines() {
        assert_eq!(byte_of(b"{\n  \"a\": x}", 2, 8), 9);
        assert_eq!(byte_of(b"abc", 1, 2), 1);
    }
}
