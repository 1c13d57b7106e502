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
//! | `array` with `items: S` | `list<S>` | List |
//! | `type: [T, "null"]`, `oneOf`/`anyOf` of `null` and one schema | optional T | T, nullable |
//! | `oneOf`/`anyOf` of several schemas | string (the JSON text) | Utf8 |
//! | `$ref` to `#/definitions/…` or `#/$defs/…` | the referenced type | |
//!
//! At the top level every column is optional (a tombstone has no value); a required
//! field missing in a nested object makes the record a bad record.

use std::sync::Arc;

use iceberg::spec::{ListType, MapType, NestedField, PrimitiveType, StructType, Type};
use serde_json::Value;

use crate::columns::PayloadDecoder;
use crate::formats::json::JsonDecoder;
use crate::formats::part::{FormatError, MakeDecoder, Part, PartContext};
use crate::registry::SchemaType;
use crate::schema::layout::PayloadType;

/// Documents a schema's `$ref`s may name (registry references), by that name.
pub type Documents = [(String, Value)];

/// Maps a JSON Schema document to the Iceberg type of its payload (placeholder ids);
/// `$ref`s to other documents resolve in `documents`.
pub fn to_payload_type(schema: &Value, documents: &Documents) -> Result<PayloadType, String> {
    let mut stack = Vec::new();
    let (t, _) = to_type(schema, schema, documents, &mut stack)?;
    Ok(match t {
        Type::Struct(s) if is_object(schema, schema, documents) => PayloadType::Record(s),
        t => PayloadType::Other(t),
    })
}

fn is_object(s: &Value, root: &Value, documents: &Documents) -> bool {
    match resolve(s, root, documents) {
        Ok((s, _)) => {
            s.get("properties").is_some()
                || s.get("type") == Some(&Value::String("object".into()))
                    && s.get("additionalProperties").is_none_or(|a| !a.is_object())
        }
        Err(_) => false,
    }
}

/// What `s` stands for (itself, or what its `$ref` points at) and the document that
/// is in: `#/…` within `root`, `name` or `name#/…` within a referenced document.
fn resolve<'a>(s: &'a Value, root: &'a Value, documents: &'a Documents) -> Result<(&'a Value, &'a Value), String> {
    let Some(r) = s.get("$ref").and_then(Value::as_str) else { return Ok((s, root)) };
    let (document, fragment) = r.split_once('#').unwrap_or((r, ""));
    let root =
        match document {
            "" => root,
            name => documents.iter().find(|(n, _)| n == name).map(|(_, d)| d).ok_or_else(|| {
                format!("$ref {r:?}: no document {name:?} (local #/… or a registry reference's name)")
            })?,
        };
    let mut at = root;
    if let Some(path) = fragment.strip_prefix('/') {
        for part in path.split('/') {
            at = at.get(part).ok_or_else(|| format!("$ref {r:?} not found"))?;
        }
    } else if !fragment.is_empty() {
        return Err(format!("$ref {r:?}: only JSON pointers (#/…) are supported"));
    }
    Ok((at, root))
}

fn p(t: PrimitiveType) -> Type {
    Type::Primitive(t)
}

/// The Iceberg type of a schema and whether it admits null.
fn to_type(s: &Value, root: &Value, documents: &Documents, stack: &mut Vec<String>) -> Result<(Type, bool), String> {
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        if stack.iter().any(|x| x == r) {
            return Err(format!("recursive $ref {r:?} cannot be a table column"));
        }
        stack.push(r.to_string());
        let out = resolve(s, root, documents).and_then(|(s, root)| to_type(s, root, documents, stack));
        stack.pop();
        return out;
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(options)) = s.get(key) {
            let non_null: Vec<&Value> =
                options.iter().filter(|o| o.get("type") != Some(&Value::String("null".into()))).collect();
            let nullable = non_null.len() < options.len();
            return match non_null.as_slice() {
                [one] => Ok((to_type(one, root, documents, stack)?.0, nullable)),
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
            let (element, nullable) = to_type(items, root, documents, stack)?;
            Type::List(ListType::new(Arc::new(NestedField::list_element(0, element, !nullable))))
        }
        "object" => match (s.get("properties"), s.get("additionalProperties")) {
            (None, Some(v)) if v.is_object() => {
                let (value, nullable) = to_type(v, root, documents, stack)?;
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
                    let (t, nullable) = to_type(prop, root, documents, stack).map_err(|e| format!("{name}: {e}"))?;
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
    let parse = |text: &str| serde_json::from_str::<Value>(text).map_err(|e| format!("schema is not JSON: {e}"));
    let doc = parse(&resolved.schema.schema).map_err(|e| ctx.schema_error(e))?;
    let mut documents = Vec::with_capacity(resolved.references.len());
    for r in &resolved.references {
        let document = parse(&r.schema.schema).map_err(|e| ctx.schema_error(format!("reference {}: {e}", r.name)))?;
        documents.push((r.name.clone(), document));
    }
    let payload = to_payload_type(&doc, &documents).map_err(|e| ctx.schema_error(e))?;
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
        let PayloadType::Record(s) = to_payload_type(&schema, &[]).unwrap() else { panic!() };
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
    fn recursion_and_unknown_documents_are_errors() {
        let rec = serde_json::json!({"definitions": {"N": {"type": "object", "properties": {"next": {"$ref": "#/definitions/N"}}}},
            "$ref": "#/definitions/N"});
        assert!(to_payload_type(&rec, &[]).unwrap_err().contains("recursive"));
        let foreign = serde_json::json!({"type": "object", "properties": {"a": {"$ref": "other.json#/x"}}});
        assert!(to_payload_type(&foreign, &[]).unwrap_err().contains("no document \"other.json\""));
    }

    #[test]
    fn refs_to_referenced_documents_resolve_there_and_their_own_refs_too() {
        // money.json's own `#/…` refs resolve within money.json, not the main schema.
        let money = serde_json::json!({"type": "object", "properties": {
            "currency": {"$ref": "#/definitions/Code"}, "units": {"type": "integer"}},
            "required": ["units"], "definitions": {"Code": {"type": "string"}}});
        let main = serde_json::json!({"type": "object", "properties": {
            "amount": {"$ref": "money.json"},
            "fees": {"type": "array", "items": {"$ref": "money.json#/definitions/Code"}}},
            "definitions": {"Code": {"type": "integer"}}});
        let PayloadType::Record(s) = to_payload_type(&main, &[("money.json".into(), money)]).unwrap() else { panic!() };
        let Type::Struct(amount) = s.field_by_name("amount").unwrap().field_type.as_ref() else { panic!() };
        assert_eq!(*amount.field_by_name("currency").unwrap().field_type, p(PrimitiveType::String));
        assert!(amount.field_by_name("units").unwrap().required);
        let Type::List(fees) = s.field_by_name("fees").unwrap().field_type.as_ref() else { panic!() };
        assert_eq!(*fees.element_field.field_type, p(PrimitiveType::String));
    }
}
