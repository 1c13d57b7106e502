//! JSON Schema (`json-schema`): payloads are JSON text after the Confluent wire header;
//! the table's types come from the schema (the registry's latest version of the subject,
//! or a local file), and every record is checked against them as it is decoded.
//!
//! | JSON Schema | Iceberg | Arrow |
//! |---|---|---|
//! | `boolean` | boolean | Boolean |
//! | `integer` | long | Int64 |
//! | `number` | double | Float64 |
//! | `string` | string | Utf8 |
//! | `string`, `format: date-time` | timestamptz | Timestamp(µs, UTC) |
//! | `string`, `format: date` | date | Date32 |
//! | `string`, `format: time` | time | Time64(µs) |
//! | `string`, `format: uuid` | uuid | FixedSizeBinary(16) |
//! | `string` with `enum` | string | Utf8 |
//! | `object` with `properties` | struct; names in `required` are required, the rest optional | Struct |
//! | `object` with only `additionalProperties: S` | map<string, S> | Map |
//! | `array` with `items: S` | list<S> | List |
//! | `type: [T, "null"]`, `oneOf`/`anyOf` of `null` and one schema | optional T | T, nullable |
//! | `oneOf`/`anyOf` of several schemas | string (the JSON text) | Utf8 |
//! | `$ref` to `#/definitions/…` or `#/$defs/…` | the referenced type | |
//!
//! At the top level every column is optional (a tombstone has no value); a required
//! field missing in a nested object makes the record a bad record.

use std::sync::Arc;

use iceberg::spec::{ListType, MapType, NestedField, PrimitiveType, StructType, Type};
use serde_json::Value;

use crate::convert::PayloadDecoder;
use crate::schema::formats::{FormatError, MakeDecoder, Part, PartContext};
use crate::schema::json::JsonDecoder;
use crate::schema::layout::PayloadType;
use crate::schema::registry::SchemaType;

/// Maps a JSON Schema document to the Iceberg type of its payload (placeholder ids).
pub fn to_payload_type(schema: &Value) -> Result<PayloadType, String> {
    let mut stack = Vec::new();
    let (t, _) = to_type(schema, schema, &mut stack)?;
    Ok(match t {
        Type::Struct(s) if is_object(schema, schema) => PayloadType::Record(s),
        t => PayloadType::Other(t),
    })
}

fn is_object(s: &Value, root: &Value) -> bool {
    match resolve(s, root) {
        Ok(s) => {
            s.get("properties").is_some()
                || s.get("type") == Some(&Value::String("object".into()))
                    && s.get("additionalProperties").is_none_or(|a| !a.is_object())
        }
        Err(_) => false,
    }
}

fn resolve<'a>(s: &'a Value, root: &'a Value) -> Result<&'a Value, String> {
    match s.get("$ref").and_then(Value::as_str) {
        None => Ok(s),
        Some(r) => {
            let path =
                r.strip_prefix("#/").ok_or_else(|| format!("$ref {r:?}: only local references (#/…) are supported"))?;
            let mut at = root;
            for part in path.split('/') {
                at = at.get(part).ok_or_else(|| format!("$ref {r:?} not found"))?;
            }
            Ok(at)
        }
    }
}

fn p(t: PrimitiveType) -> Type {
    Type::Primitive(t)
}

/// The Iceberg type of a schema and whether it admits null.
fn to_type(s: &Value, root: &Value, stack: &mut Vec<String>) -> Result<(Type, bool), String> {
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        if stack.iter().any(|x| x == r) {
            return Err(format!("recursive $ref {r:?} cannot be a table column"));
        }
        stack.push(r.to_string());
        let out = to_type(resolve(s, root)?, root, stack);
        stack.pop();
        return out;
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(options)) = s.get(key) {
            let non_null: Vec<&Value> =
                options.iter().filter(|o| o.get("type") != Some(&Value::String("null".into()))).collect();
            let nullable = non_null.len() < options.len();
            return match non_null.as_slice() {
                [one] => Ok((to_type(one, root, stack)?.0, nullable)),
                _ => Ok((p(PrimitiveType::String), nullable)),
            };
        }
    }
    let (kind, nullable) = match s.get("type") {
        Some(Value::String(t)) => (t.as_str(), false),
        Some(Value::Array(ts)) => {
            let names: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
            let non_null: Vec<&str> = names.iter().copied().filter(|t| *t != "null").collect();
            match non_null.as_slice() {
                [one] => (*one, names.len() > non_null.len()),
                _ => return Ok((p(PrimitiveType::String), true)),
            }
        }
        None if s.get("properties").is_some() => ("object", false),
        None if s.get("enum").is_some() => ("string", false),
        _ => return Err(format!("schema without a usable type: {s}")),
    };
    let t = match kind {
        "boolean" => p(PrimitiveType::Boolean),
        "integer" => p(PrimitiveType::Long),
        "number" => p(PrimitiveType::Double),
        "null" => return Err("a bare null type has no column".into()),
        "string" => match s.get("format").and_then(Value::as_str) {
            Some("date-time") => p(PrimitiveType::Timestamptz),
            Some("date") => p(PrimitiveType::Date),
            Some("time") => p(PrimitiveType::Time),
            Some("uuid") => p(PrimitiveType::Uuid),
            _ => p(PrimitiveType::String),
        },
        "array" => {
            let items = s.get("items").ok_or("array without items")?;
            let (element, nullable) = to_type(items, root, stack)?;
            Type::List(ListType::new(Arc::new(NestedField::list_element(0, element, !nullable))))
        }
        "object" => match (s.get("properties"), s.get("additionalProperties")) {
            (None, Some(v)) if v.is_object() => {
                let (value, nullable) = to_type(v, root, stack)?;
                Type::Map(MapType::new(
                    Arc::new(NestedField::map_key_element(0, p(PrimitiveType::String))),
                    Arc::new(NestedField::map_value_element(0, value, !nullable)),
                ))
            }
            (props, _) => {
                let required: Vec<&str> = s
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut fields = Vec::new();
                for (name, prop) in props.and_then(Value::as_object).into_iter().flatten() {
                    let (t, nullable) = to_type(prop, root, stack).map_err(|e| format!("{name}: {e}"))?;
                    let req = required.contains(&name.as_str()) && !nullable;
                    fields.push(Arc::new(NestedField::new(0, name, t, req)));
                }
                if fields.is_empty() {
                    return Err("object without properties".into());
                }
                Type::Struct(StructType::new(fields))
            }
        },
        other => return Err(format!("unknown type {other:?}")),
    };
    Ok((t, nullable))
}

/// Sets up a JSON Schema key or value.
pub async fn part(ctx: &PartContext<'_>) -> Result<Part, FormatError> {
    let (resolved, _) = ctx.table_schema(SchemaType::Json).await?;
    let registered = resolved.without_references().map_err(|e| ctx.error(e))?;
    let doc: Value =
        serde_json::from_str(&registered.schema).map_err(|e| ctx.error(format!("schema is not JSON: {e}")))?;
    let payload = to_payload_type(&doc).map_err(|e| ctx.error(e))?;
    let name = ctx.name;
    let make: MakeDecoder =
        Box::new(move |shape| Ok(Arc::new(JsonDecoder::new(name, shape, true)) as Arc<dyn PayloadDecoder>));
    Ok(Part { payload, make })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_the_documented_rows() {
        let schema: Value = serde_json::json!({
            "type": "object",
            "definitions": {"Addr": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
            "properties": {
                "id": {"type": "integer"}, "ok": {"type": "boolean"}, "x": {"type": "number"},
                "at": {"type": "string", "format": "date-time"}, "day": {"type": "string", "format": "date"},
                "t": {"type": "string", "format": "time"}, "u": {"type": "string", "format": "uuid"},
                "s": {"enum": ["A", "B"]}, "tags": {"type": "array", "items": {"type": "string"}},
                "m": {"type": "object", "additionalProperties": {"type": "integer"}},
                "n": {"type": ["string", "null"]}, "o": {"oneOf": [{"type": "null"}, {"type": "integer"}]},
                "any": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                "addr": {"$ref": "#/definitions/Addr"}
            },
            "required": ["id"]
        });
        let PayloadType::Record(s) = to_payload_type(&schema).unwrap() else { panic!() };
        let ty = |n: &str| s.field_by_name(n).unwrap().field_type.to_string();
        for (name, t) in [
            ("id", "long"),
            ("ok", "boolean"),
            ("x", "double"),
            ("at", "timestamptz"),
            ("day", "date"),
            ("t", "time"),
            ("u", "uuid"),
            ("s", "string"),
            ("n", "string"),
            ("o", "long"),
            ("any", "string"),
        ] {
            assert_eq!(ty(name), t, "{name}");
        }
        assert!(matches!(*s.field_by_name("tags").unwrap().field_type, Type::List(_)));
        assert!(matches!(*s.field_by_name("m").unwrap().field_type, Type::Map(_)));
        let Type::Struct(addr) = s.field_by_name("addr").unwrap().field_type.as_ref().clone() else { panic!() };
        assert!(addr.field_by_name("city").unwrap().required);
        assert!(s.field_by_name("id").unwrap().required);
        assert!(!s.field_by_name("x").unwrap().required);
    }

    #[test]
    fn recursion_and_foreign_refs_are_errors() {
        let rec = serde_json::json!({"definitions": {"N": {"type": "object", "properties": {"next": {"$ref": "#/definitions/N"}}}},
            "$ref": "#/definitions/N"});
        assert!(to_payload_type(&rec).unwrap_err().contains("recursive"));
        let foreign = serde_json::json!({"type": "object", "properties": {"a": {"$ref": "other.json#/x"}}});
        assert!(to_payload_type(&foreign).unwrap_err().contains("local references"));
    }
}
