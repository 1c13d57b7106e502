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
//! A value that is not JSON is a bad record. Payloads are decoded straight into the
//! columns (`json_decode`).

pub(crate) mod decode;
pub mod infer;

use std::sync::Arc;

use crate::columns::{Column, DecodeError, PayloadDecoder, Shape};
use crate::formats::json::decode::{Target, decode};
pub use crate::formats::json::infer::{Inferred, infer};
use crate::formats::part::{FormatError, MakeDecoder, Part, PartContext};
use crate::registry::wire::{self, Payload, SchemaId};

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

    /// The payload's JSON text and where it starts: with `header`, after the schema id
    /// (the id itself is not used: JSON decodes by the table's types).
    fn body<'p>(&self, payload: Payload<'p>) -> Result<(usize, &'p [u8]), DecodeError> {
        if self.header {
            let framed = wire::frame(payload, self.part)?;
            wire::no_header_rest(&framed, self.part)?;
            Ok((framed.offset, framed.body))
        } else {
            Ok((0, payload.bytes))
        }
    }

    fn decode(&self, payload: Payload<'_>, target: Target<'_>) -> Result<(), DecodeError> {
        let (offset, body) = self.body(payload)?;
        decode(body, target).map_err(|f| DecodeError {
            part: self.part,
            position: offset + f.at,
            detail: if f.syntax { format!("not JSON: {}", f.detail) } else { f.detail },
            missing_schema: None,
            deletes_key: false,
        })
    }

    fn internal(&self, detail: &str) -> DecodeError {
        DecodeError {
            part: self.part,
            position: 0,
            detail: format!("internal: {detail}"),
            missing_schema: None,
            deletes_key: false,
        }
    }
}

#[async_trait::async_trait]
impl PayloadDecoder for JsonDecoder {
    fn append(&self, payload: Payload<'_>, column: &mut Column) -> Result<(), DecodeError> {
        match (&self.shape, column) {
            (Shape::Column(dt), column) => self.decode(payload, Target::Column(dt, column)),
            // A record into one struct column (a record key in `_kafka.key`).
            (Shape::Fields(fields), Column::Struct(s)) => {
                s.append_valid();
                self.decode(payload, Target::Fields(fields, &mut s.children))
            }
            (Shape::Fields(_), _) => Err(self.internal("a record shape for a column that is not a struct")),
        }
    }

    fn append_fields(&self, payload: Payload<'_>, fields: &mut [Column]) -> Result<(), DecodeError> {
        match &self.shape {
            Shape::Fields(shape) => self.decode(payload, Target::Fields(shape, fields)),
            Shape::Column(_) => Err(self.internal("fields target for a column shape")),
        }
    }

    async fn load_schema(&self, _id: SchemaId) -> Result<(), crate::columns::SchemaLoadError> {
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

#[cfg(test)]
mod tests {
    use arrow_array::Array;
    use arrow_schema::DataType;

    use crate::schema::layout::PayloadType;
    use iceberg::spec::{PrimitiveType, Type};

    use super::*;
    use crate::formats::json::decode::byte_of;

    fn infer(values: &[&str]) -> Inferred {
        let mut i = Inferred::default();
        for v in values {
            i.observe(v.as_bytes());
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
        // A payload that is not JSON adds nothing, not even the fields before its fault;
        // an integer past i64 is a double.
        let i = infer(&[r#"{"a": 1}"#, r#"{"z": true, "a": "#, r#"{"a": 18446744073709551615}"#]);
        let Inferred::Object(f) = &i else { panic!("{i:?}") };
        assert_eq!(f.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(f["a"], Inferred::Double);
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
        let mut root = crate::columns::StructColumn::new(&fields).unwrap();
        let (ok, failed) =
            crate::columns::damage::decode_damaged(&mut root, &payloads, 0x15011, 10_000, |p, columns| {
                decoder.append_fields(p.into(), columns)
            });
        assert!(ok > 0 && failed > 1000, "{ok} decoded, {failed} failed");
    }

    /// Number texts: edge cases, then `count` seeded random ones (random doubles printed
    /// with 1 to 25 significant digits, random digit strings with random exponents, in
    /// plain and exponent notation).
    fn number_texts(count: usize) -> Vec<String> {
        let mut texts: Vec<String> = [
            "0.37611412414027723",
            "0",
            "-0",
            "0.0",
            "-0.0",
            "1",
            "-1",
            "1e308",
            "-1e308",
            "1.7976931348623157e308",
            "2.2250738585072011e-308",
            "2.2250738585072014e-308",
            "4.9e-324",
            "5e-324",
            "2.4703282292062328e-324",
            "1e-400",
            "-1e-400",
            "0.1",
            "0.3",
            "9007199254740993",
            "9007199254740993.0",
            "18446744073709551616",
            "-9223372036854775809",
            "123456789012345678901234567890",
            "1.00000000000000011102230246251565404236316680908203125",
            "1.00000000000000011102230246251565404236316680908203124",
            "7.3177701707893310e+15",
            "9.5e-5",
            "1e22",
            "1e23",
            "8.589973e9",
            "123456789012345.6",
            "0.000000000000000000000000000001",
            "2.71828182845904523536028747135266249775724709369995957496696763",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        while texts.len() < count {
            let text = match next() % 3 {
                0 => {
                    let f = f64::from_bits(next());
                    if !f.is_finite() {
                        continue;
                    }
                    format!("{:.*e}", (next() % 25) as usize, f)
                }
                form => {
                    let digits: String = (0..1 + next() % 25).map(|_| char::from(b'0' + (next() % 10) as u8)).collect();
                    let digits = digits.trim_start_matches('0');
                    let digits = if digits.is_empty() { "0" } else { digits };
                    let sign = if next() % 2 == 0 { "-" } else { "" };
                    let point = (next() % (digits.len() as u64 + 1)) as usize;
                    let (int, frac) = digits.split_at(point);
                    let int = if int.is_empty() { "0" } else { int };
                    let frac = if frac.is_empty() { String::new() } else { format!(".{frac}") };
                    match form {
                        1 => format!("{sign}{int}{frac}e{}", (next() % 640) as i64 - 330),
                        _ => format!("{sign}{int}{frac}"),
                    }
                }
            };
            // Beyond the doubles: an error for every JSON reader (checked apart).
            if text.parse::<f64>().is_ok_and(f64::is_finite) {
                texts.push(text);
            }
        }
        texts
    }

    /// Decodes `{"x": text}` for every text through `decoder` (behind a Confluent wire
    /// header when `header`), and each text alone as a double column.
    fn decoded_numbers(decoder: &JsonDecoder, header: bool, texts: &[String]) -> Vec<f64> {
        let Shape::Fields(fields) = &decoder.shape else { panic!("a record shape") };
        let mut root = crate::columns::StructColumn::new(fields).unwrap();
        for text in texts {
            let mut payload = if header { vec![0, 0, 0, 0, 7] } else { Vec::new() };
            payload.extend_from_slice(format!(r#"{{"x": {text}}}"#).as_bytes());
            root.append_valid();
            decoder.append_fields((&payload).into(), &mut root.children).unwrap_or_else(|e| panic!("{text}: {e}"));
        }
        let rows = root.finish();
        rows.column(0).as_any().downcast_ref::<arrow_array::Float64Array>().unwrap().values().to_vec()
    }

    #[test]
    fn numbers_decode_to_the_nearest_double_in_plain_json_and_json_schema() {
        let texts = number_texts(100_000);
        let expected: Vec<f64> = texts.iter().map(|t| t.parse::<f64>().unwrap()).collect();
        let arrow = |ty: &PayloadType| {
            let PayloadType::Record(s) = ty else { panic!("record") };
            let schema = crate::schema::plan(None, s).unwrap().schema;
            iceberg::arrow::schema_to_arrow_schema(&schema).unwrap().fields().clone()
        };
        let plain = arrow(&infer(&[r#"{"x": 0.5}"#]).payload_type());
        let schema = serde_json::json!({"type": "object", "properties": {"x": {"type": "number"}}});
        let json_schema = arrow(&crate::formats::json_schema::to_payload_type(&schema, &[]).unwrap());
        for (path, fields, header) in [("plain JSON", plain, false), ("JSON Schema", json_schema, true)] {
            assert_eq!(fields[0].data_type(), &DataType::Float64);
            let decoder = JsonDecoder::new("value", Shape::Fields(fields), header);
            let got = decoded_numbers(&decoder, header, &texts);
            for ((text, want), got) in texts.iter().zip(&expected).zip(&got) {
                assert_eq!(got.to_bits(), want.to_bits(), "{path}: {text} decoded as {got:e}, nearest is {want:e}");
            }
        }
        // Beyond the largest double: a bad record, not infinity.
        let mut column = Column::new(&DataType::Float64).unwrap();
        let e = JsonDecoder::new("value", Shape::Column(DataType::Float64), false)
            .append(b"1.8e308".as_slice().into(), &mut column)
            .unwrap_err();
        assert!(e.to_string().contains("number out of range"), "{e}");
        // A payload that is one number, into a double column.
        let decoder = JsonDecoder::new("value", Shape::Column(DataType::Float64), false);
        let mut column = Column::new(&DataType::Float64).unwrap();
        for text in &texts[..2_000] {
            decoder.append(text.as_bytes().into(), &mut column).unwrap();
        }
        let column = column.finish();
        let column = column.as_any().downcast_ref::<arrow_array::Float64Array>().unwrap();
        assert_eq!(column.len(), 2_000);
        for (i, want) in expected[..2_000].iter().enumerate() {
            assert_eq!(column.value(i).to_bits(), want.to_bits(), "{}", texts[i]);
        }
    }

    #[test]
    fn byte_positions_from_lines() {
        assert_eq!(byte_of(b"{\n  \"a\": x}", 2, 8), 9);
        assert_eq!(byte_of(b"abc", 1, 2), 1);
    }
}
