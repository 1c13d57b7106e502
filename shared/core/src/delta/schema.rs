//! An Iceberg schema as a Delta schema: the same columns, each field carrying its Iceberg
//! field id as `delta.columnMapping.id` (column mapping in `id` mode), and its name in the
//! Parquet files as `delta.columnMapping.physicalName`.
//!
//! Readers today (delta-rs, DuckDB's delta extension through delta-kernel-rs) find a
//! column in the files by its physical name, not its id. Floe writes columns under their
//! Iceberg names and never renames one, so the two agree; a column renamed in the
//! Iceberg table by another engine would not, and is refused
//! ([`DeltaError::Unsupported`]) rather than mirrored into a table whose readers would
//! see its old files' values as null.
//!
//! Types: boolean, int, long, float, double, decimal, date, string and binary map as
//! named; `timestamptz` is Delta's `timestamp`, `timestamp` is `timestamp_ntz` (the
//! `timestampNtz` table feature); structs, lists and maps nest. Iceberg's `time`, `uuid`,
//! `fixed` and nanosecond timestamps have no Delta type the files' values read as: a
//! table holding one is refused.

use std::collections::HashMap;

use iceberg::spec::{NestedFieldRef, PrimitiveType, Schema, Type};
use serde_json::{Value, json};

use super::DeltaError;
use super::actions::Protocol;

const ID: &str = "delta.columnMapping.id";
const PHYSICAL: &str = "delta.columnMapping.physicalName";

/// A table's Delta schema and what it asks of readers.
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaSchema {
    /// The schema as `metaData.schemaString` holds it.
    pub schema_string: String,
    /// Whether a column is an Iceberg `timestamp` (without zone): `timestamp_ntz`.
    pub uses_timestamp_ntz: bool,
    /// The highest field id, for `delta.columnMapping.maxColumnId`.
    pub max_column_id: i32,
    /// Whether it has generated columns (partition columns of day and hour fields).
    pub generated: bool,
}

impl DeltaSchema {
    /// `schema` in Delta's terms, with the `generated` partition columns after its own
    /// ([`super::partition`]); `previous` is the table's Delta schema string so far (a
    /// column whose physical name it recorded differently is a rename: refused).
    pub fn of(schema: &Schema, generated: &[Value], previous: Option<&str>) -> Result<DeltaSchema, DeltaError> {
        let physical = previous.map(physical_names).transpose()?.unwrap_or_default();
        let mut out = Converter { physical, uses_timestamp_ntz: false, max_column_id: 0 };
        let mut fields = out.fields(schema.as_struct().fields(), "")?;
        fields.extend(generated.iter().cloned());
        let generated_ids = generated.iter().filter_map(|g| g["metadata"][ID].as_i64());
        let max_column_id = generated_ids
            .fold(out.max_column_id.max(schema.highest_field_id()), |m, id| m.max(i32::try_from(id).unwrap_or(m)));
        let uses_timestamp_ntz = out.uses_timestamp_ntz || generated.iter().any(|g| g["type"] == "timestamp_ntz");
        let schema_string = json!({ "type": "struct", "fields": fields }).to_string();
        Ok(DeltaSchema { schema_string, uses_timestamp_ntz, max_column_id, generated: !generated.is_empty() })
    }

    /// The lowest protocol for it: column mapping needs reader 2 and writer 5 (which
    /// covers generated columns, writer 4); a `timestamp_ntz` column the table features
    /// (reader 3, writer 7), naming them.
    /// The lowest protocol for the table's features: column mapping (reader 2, writer 5),
    /// and with a `timestamp_ntz` column or `deletion_vectors`, reader 3 and writer 7 with
    /// the features named.
    pub fn protocol(&self, deletion_vectors: bool) -> Protocol {
        if !self.uses_timestamp_ntz && !deletion_vectors {
            return Protocol {
                min_reader_version: 2,
                min_writer_version: 5,
                reader_features: None,
                writer_features: None,
            };
        }
        let mut features = vec!["columnMapping".to_string()];
        if deletion_vectors {
            features.push("deletionVectors".into());
        }
        if self.uses_timestamp_ntz {
            features.push("timestampNtz".into());
        }
        let mut writer = features.clone();
        if self.generated {
            writer.push("generatedColumns".into());
        }
        Protocol {
            min_reader_version: 3,
            min_writer_version: 7,
            reader_features: Some(features),
            writer_features: Some(writer),
        }
    }
}

/// Whether `current` (none: a new table) lacks what `wanted` needs: a lower version, or
/// a feature it does not list.
pub fn needs_upgrade(current: Option<&Protocol>, wanted: &Protocol) -> bool {
    let Some(current) = current else { return true };
    let lacks = |have: &Option<Vec<String>>, want: &Option<Vec<String>>| {
        want.iter().flatten().any(|f| !have.iter().flatten().any(|h| h == f))
    };
    current.min_reader_version < wanted.min_reader_version
        || current.min_writer_version < wanted.min_writer_version
        || lacks(&current.reader_features, &wanted.reader_features)
        || lacks(&current.writer_features, &wanted.writer_features)
}

/// Whether `protocol` lists deletion vectors (once on, a table keeps them).
pub fn has_deletion_vectors(protocol: Option<&Protocol>) -> bool {
    protocol.and_then(|p| p.reader_features.as_ref()).is_some_and(|f| f.iter().any(|f| f == "deletionVectors"))
}

struct Converter {
    /// Field id → the physical name the Delta table already has for it.
    physical: HashMap<i64, String>,
    uses_timestamp_ntz: bool,
    max_column_id: i32,
}

impl Converter {
    fn fields(&mut self, fields: &[NestedFieldRef], path: &str) -> Result<Vec<Value>, DeltaError> {
        fields.iter().map(|f| self.field(f, path)).collect()
    }

    fn field(&mut self, field: &NestedFieldRef, path: &str) -> Result<Value, DeltaError> {
        let path = if path.is_empty() { field.name.clone() } else { format!("{path}.{}", field.name) };
        if let Some(recorded) = self.physical.get(&i64::from(field.id))
            && *recorded != field.name
        {
            return Err(DeltaError::Unsupported(format!(
                "column `{path}` (field id {}) was `{recorded}` in the Delta table: a renamed column cannot be \
                 mirrored (Delta readers find columns by their physical name)",
                field.id
            )));
        }
        self.max_column_id = self.max_column_id.max(field.id);
        Ok(json!({
            "name": field.name,
            "type": self.data_type(&field.field_type, &path)?,
            "nullable": !field.required,
            "metadata": { ID: field.id, PHYSICAL: field.name },
        }))
    }

    fn data_type(&mut self, t: &Type, path: &str) -> Result<Value, DeltaError> {
        Ok(match t {
            Type::Primitive(p) => Value::String(self.primitive(p, path)?),
            Type::Struct(s) => json!({ "type": "struct", "fields": self.fields(s.fields(), path)? }),
            Type::List(l) => {
                self.max_column_id = self.max_column_id.max(l.element_field.id);
                json!({
                    "type": "array",
                    "elementType": self.data_type(&l.element_field.field_type, path)?,
                    "containsNull": !l.element_field.required,
                })
            }
            Type::Map(m) => {
                self.max_column_id = self.max_column_id.max(m.key_field.id).max(m.value_field.id);
                json!({
                    "type": "map",
                    "keyType": self.data_type(&m.key_field.field_type, path)?,
                    "valueType": self.data_type(&m.value_field.field_type, path)?,
                    "valueContainsNull": !m.value_field.required,
                })
            }
        })
    }

    fn primitive(&mut self, p: &PrimitiveType, path: &str) -> Result<String, DeltaError> {
        Ok(match p {
            PrimitiveType::Boolean => "boolean".into(),
            PrimitiveType::Int => "integer".into(),
            PrimitiveType::Long => "long".into(),
            PrimitiveType::Float => "float".into(),
            PrimitiveType::Double => "double".into(),
            PrimitiveType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
            PrimitiveType::Date => "date".into(),
            PrimitiveType::String => "string".into(),
            PrimitiveType::Binary => "binary".into(),
            PrimitiveType::Timestamptz => "timestamp".into(),
            PrimitiveType::Timestamp => {
                self.uses_timestamp_ntz = true;
                "timestamp_ntz".into()
            }
            other => {
                return Err(DeltaError::Unsupported(format!(
                    "column `{path}` is an Iceberg {other}, which has no Delta type its values read as"
                )));
            }
        })
    }
}

/// Field id → physical name, for every field of a Delta schema string.
fn physical_names(schema_string: &str) -> Result<HashMap<i64, String>, DeltaError> {
    let value: Value = serde_json::from_str(schema_string)
        .map_err(|e| DeltaError::Log { path: "metaData.schemaString".into(), detail: e.to_string() })?;
    let mut out = HashMap::new();
    let mut stack = vec![&value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(o) => {
                if let (Some(id), Some(name)) = (
                    o.get("metadata").and_then(|m| m.get(ID)).and_then(Value::as_i64),
                    o.get("metadata").and_then(|m| m.get(PHYSICAL)).and_then(Value::as_str),
                ) {
                    out.insert(id, name.to_string());
                }
                stack.extend(o.values());
            }
            Value::Array(a) => stack.extend(a),
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use iceberg::spec::{ListType, NestedField, StructType};

    use super::*;

    fn schema(name: &str, ts: PrimitiveType) -> Schema {
        let kafka = StructType::new(vec![
            Arc::new(NestedField::required(3, "offset", Type::Primitive(PrimitiveType::Long))),
            Arc::new(NestedField::optional(4, "timestamp", Type::Primitive(ts))),
        ]);
        let tags = ListType::new(Arc::new(NestedField::list_element(6, Type::Primitive(PrimitiveType::String), false)));
        Schema::builder()
            .with_fields(vec![
                Arc::new(NestedField::optional(1, name, Type::Primitive(PrimitiveType::Long))),
                Arc::new(NestedField::required(2, "_kafka", Type::Struct(kafka))),
                Arc::new(NestedField::optional(5, "tags", Type::List(tags))),
            ])
            .build()
            .unwrap()
    }

    #[test]
    fn fields_carry_their_ids_and_names_and_the_protocol_is_the_lowest() {
        let s = DeltaSchema::of(&schema("id", PrimitiveType::Timestamptz), &[], None).unwrap();
        let v: Value = serde_json::from_str(&s.schema_string).unwrap();
        let kafka = &v["fields"][1];
        assert_eq!(kafka["nullable"], false);
        assert_eq!(kafka["type"]["fields"][1]["type"], "timestamp");
        assert_eq!(kafka["type"]["fields"][0]["metadata"][ID], 3);
        assert_eq!(kafka["type"]["fields"][0]["metadata"][PHYSICAL], "offset");
        assert_eq!(v["fields"][2]["type"]["elementType"], "string");
        assert_eq!(v["fields"][2]["type"]["containsNull"], true);
        assert_eq!(s.max_column_id, 6);
        assert_eq!((s.protocol(false).min_reader_version, s.protocol(false).min_writer_version), (2, 5));

        let ntz = DeltaSchema::of(&schema("id", PrimitiveType::Timestamp), &[], None).unwrap();
        assert!(ntz.schema_string.contains("timestamp_ntz"));
        let p = ntz.protocol(false);
        assert_eq!((p.min_reader_version, p.min_writer_version), (3, 7));
        assert!(p.reader_features.unwrap().contains(&"timestampNtz".to_string()));
    }

    #[test]
    fn deletion_vectors_raise_the_protocol_to_table_features_and_an_older_one_is_upgraded() {
        let plain = DeltaSchema::of(&schema("id", PrimitiveType::Timestamptz), &[], None).unwrap();
        let dv = plain.protocol(true);
        assert_eq!((dv.min_reader_version, dv.min_writer_version), (3, 7));
        let names = |f: &Option<Vec<String>>| f.clone().unwrap_or_default();
        assert_eq!(names(&dv.reader_features), ["columnMapping", "deletionVectors"]);
        assert_eq!(names(&dv.writer_features), ["columnMapping", "deletionVectors"]);
        assert!(has_deletion_vectors(Some(&dv)) && !has_deletion_vectors(Some(&plain.protocol(false))));
        assert!(needs_upgrade(None, &plain.protocol(false)));
        assert!(needs_upgrade(Some(&plain.protocol(false)), &dv), "2/5 to 3/7");
        let ntz = DeltaSchema::of(&schema("id", PrimitiveType::Timestamp), &[], None).unwrap();
        assert!(needs_upgrade(Some(&ntz.protocol(false)), &ntz.protocol(true)), "a feature more at 3/7");
        assert!(!needs_upgrade(Some(&ntz.protocol(true)), &ntz.protocol(false)), "never down");
        assert!(!needs_upgrade(Some(&dv), &dv));
    }

    #[test]
    fn a_rename_and_a_type_without_a_delta_twin_are_refused() {
        let before = DeltaSchema::of(&schema("id", PrimitiveType::Timestamptz), &[], None).unwrap();
        assert!(DeltaSchema::of(&schema("id", PrimitiveType::Timestamptz), &[], Some(&before.schema_string)).is_ok());
        let renamed = DeltaSchema::of(&schema("key", PrimitiveType::Timestamptz), &[], Some(&before.schema_string));
        assert!(matches!(renamed, Err(DeltaError::Unsupported(m)) if m.contains("`key` (field id 1) was `id`")));
        let nanos = DeltaSchema::of(&schema("id", PrimitiveType::TimestamptzNs), &[], None);
        assert!(matches!(nanos, Err(DeltaError::Unsupported(m)) if m.contains("_kafka.timestamp")));
    }
}
