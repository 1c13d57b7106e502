//! A data file's columns bound to a table schema by Iceberg field id (`PARQUET:field_id`
//! in the Arrow field metadata the Parquet reader gives), at every nesting level.
//!
//! A table's files were written with any of its schemas, by Floe or by another engine:
//! columns added since, dropped, renamed, moved (`move_before`), or promoted. Iceberg
//! identifies a column by its field id, never by its position or name, so rewriting a
//! file into the current schema is, for each of the schema's fields:
//!
//! - the file's field of the same id, whatever its position or name: its values, cast
//!   when the schema promoted its type (`int → long`, `float → double`, decimal
//!   precision) or the file used another Arrow encoding of it (large strings, time zone
//!   names); structs bound field by field, list elements and map keys and values in turn;
//! - no field of that id in the file (added after it was written): nulls, which only an
//!   optional field may hold — a required one is an error naming it;
//! - the file's fields the schema no longer has (dropped) are not written.
//!
//! A file without field ids at some level (written by a tool that sets none) is bound
//! by name at that level.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, ListArray, MapArray, RecordBatch, StructArray, new_null_array};
use arrow_schema::{DataType, Field, FieldRef, Fields, SchemaRef};
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

/// Why a file's column cannot be bound to the schema.
#[derive(Debug, thiserror::Error)]
#[error("column {path}: {detail}")]
pub struct ProjectError {
    pub path: String,
    pub detail: String,
}

fn error(path: &str, detail: impl std::fmt::Display) -> ProjectError {
    ProjectError { path: path.to_string(), detail: detail.to_string() }
}

fn field_id(field: &Field) -> Option<&str> {
    field.metadata().get(PARQUET_FIELD_ID_META_KEY).map(String::as_str)
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_string() } else { format!("{path}.{name}") }
}

/// `batch` (a file's rows, in the file's own schema) as rows of `target` (an Arrow schema
/// from an Iceberg schema: every field carries its id).
pub fn project_batch(batch: &RecordBatch, target: &SchemaRef) -> Result<RecordBatch, ProjectError> {
    let columns = project_fields("", batch.schema().fields(), batch.columns(), target.fields(), batch.num_rows())?;
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    RecordBatch::try_new_with_options(target.clone(), columns, &options).map_err(|e| error("", e))
}

/// The columns of `targets` from the file's `fields` (with their `columns`, `rows` long).
fn project_fields(
    path: &str,
    fields: &Fields,
    columns: &[ArrayRef],
    targets: &Fields,
    rows: usize,
) -> Result<Vec<ArrayRef>, ProjectError> {
    // Bound by id when the file's fields carry ids, else by name.
    let by_id = fields.iter().any(|f| field_id(f).is_some());
    targets
        .iter()
        .map(|target| {
            let path = join(path, target.name());
            let found = fields.iter().position(|f| match by_id {
                true => field_id(f).is_some() && field_id(f) == field_id(target),
                false => f.name() == target.name(),
            });
            match found {
                Some(i) => project_array(&path, &columns[i], &fields[i], target),
                None if target.is_nullable() => Ok(new_null_array(target.data_type(), rows)),
                None => Err(error(&path, "required by the table schema, but the file has no such field")),
            }
        })
        .collect()
}

/// The file's `array` (of `field`) as a column of `target`.
fn project_array(path: &str, array: &ArrayRef, field: &FieldRef, target: &FieldRef) -> Result<ArrayRef, ProjectError> {
    match target.data_type() {
        DataType::Struct(targets) => {
            let array = array
                .as_struct_opt()
                .ok_or_else(|| error(path, format!("a struct in the table, {} in the file", array.data_type())))?;
            let DataType::Struct(fields) = field.data_type() else {
                unreachable!("a struct array's field is a struct")
            };
            let columns = project_fields(path, fields, array.columns(), targets, array.len())?;
            Ok(Arc::new(
                StructArray::try_new(targets.clone(), columns, array.nulls().cloned()).map_err(|e| error(path, e))?,
            ))
        }
        DataType::List(element) => {
            // A large list (other writers) as a list first: then one shape to bind.
            let array = match array.data_type() {
                DataType::LargeList(e) => {
                    arrow::compute::cast(array, &DataType::List(e.clone())).map_err(|e| error(path, e))?
                }
                _ => array.clone(),
            };
            let list = array
                .as_list_opt::<i32>()
                .ok_or_else(|| error(path, format!("a list in the table, {} in the file", array.data_type())))?;
            let DataType::List(file_element) = list.data_type() else { unreachable!("a list array's type is a list") };
            let values = project_array(&join(path, "element"), list.values(), file_element, element)?;
            let list = ListArray::try_new(element.clone(), list.offsets().clone(), values, list.nulls().cloned());
            Ok(Arc::new(list.map_err(|e| error(path, e))?))
        }
        DataType::Map(entries, sorted) => {
            let map = array
                .as_map_opt()
                .ok_or_else(|| error(path, format!("a map in the table, {} in the file", array.data_type())))?;
            let (DataType::Struct(targets), DataType::Map(file_entries, _)) = (entries.data_type(), map.data_type())
            else {
                return Err(error(path, "a map whose entries are not a struct"));
            };
            let DataType::Struct(fields) = file_entries.data_type() else { unreachable!("map entries are a struct") };
            let entry = map.entries();
            let key = project_array(&join(path, "key"), entry.column(0), &fields[0], &targets[0])?;
            let value = project_array(&join(path, "value"), entry.column(1), &fields[1], &targets[1])?;
            let entry = StructArray::try_new(targets.clone(), vec![key, value], entry.nulls().cloned())
                .map_err(|e| error(path, e))?;
            let map = MapArray::try_new(entries.clone(), map.offsets().clone(), entry, map.nulls().cloned(), *sorted);
            Ok(Arc::new(map.map_err(|e| error(path, e))?))
        }
        target_type if array.data_type() == target_type => Ok(array.clone()),
        target_type => arrow::compute::cast(array, target_type)
            .map_err(|e| error(path, format!("{} in the file, {target_type} in the table: {e}", array.data_type()))),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use arrow_array::{Float32Array, Int32Array, StringArray};
    use arrow_schema::Schema as ArrowSchema;
    use iceberg::spec::{NestedField, PrimitiveType, Schema, StructType, Type};

    use super::*;

    fn with_id(name: &str, t: DataType, nullable: bool, id: i32) -> Field {
        Field::new(name, t, nullable)
            .with_metadata(HashMap::from([(PARQUET_FIELD_ID_META_KEY.to_string(), id.to_string())]))
    }

    /// The table: `id` long (1), `s` struct { `a` string (3), `b` double (4), `n` int (6) } (2),
    /// `tag` string (5) — `s.n` and `tag` optional, added after the file was written.
    fn table() -> SchemaRef {
        let p = |t| Type::Primitive(t);
        let s = StructType::new(vec![
            Arc::new(NestedField::required(3, "a", p(PrimitiveType::String))),
            Arc::new(NestedField::optional(4, "b", p(PrimitiveType::Double))),
            Arc::new(NestedField::optional(6, "n", p(PrimitiveType::Int))),
        ]);
        let schema = Schema::builder()
            .with_fields(vec![
                Arc::new(NestedField::required(1, "id", p(PrimitiveType::Long))),
                Arc::new(NestedField::optional(2, "s", Type::Struct(s))),
                Arc::new(NestedField::optional(5, "tag", p(PrimitiveType::String))),
            ])
            .build()
            .unwrap();
        Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema).unwrap())
    }

    /// A file written before: `s` first { `b` float (4), `gone` int (9), `a` (3) }, then
    /// `id` as int, renamed `key` (1), and a dropped column `old` (7).
    fn file() -> RecordBatch {
        let inner = Fields::from(vec![
            with_id("b", DataType::Float32, true, 4),
            with_id("gone", DataType::Int32, true, 9),
            with_id("a", DataType::Utf8, false, 3),
        ]);
        let s = StructArray::new(
            inner.clone(),
            vec![
                Arc::new(Float32Array::from(vec![Some(1.5), None])),
                Arc::new(Int32Array::from(vec![7, 8])),
                Arc::new(StringArray::from(vec!["x", "y"])),
            ],
            None,
        );
        let schema = ArrowSchema::new(vec![
            with_id("s", DataType::Struct(inner), true, 2),
            with_id("key", DataType::Int32, false, 1),
            with_id("old", DataType::Utf8, true, 7),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![Arc::new(s), Arc::new(Int32Array::from(vec![10, 20])), Arc::new(StringArray::from(vec!["o", "p"]))],
        )
        .unwrap()
    }

    #[test]
    fn columns_are_bound_by_field_id_wherever_they_are_and_promoted() {
        let out = project_batch(&file(), &table()).unwrap();
        assert_eq!(out.schema(), table());
        let id = out.column(0).as_primitive::<arrow_array::types::Int64Type>();
        assert_eq!(id.values(), &[10, 20]);
        let s = out.column(1).as_struct();
        assert_eq!(s.column(0).as_string::<i32>().iter().collect::<Vec<_>>(), [Some("x"), Some("y")]);
        let b = s.column(1).as_primitive::<arrow_array::types::Float64Type>();
        assert_eq!(b.iter().collect::<Vec<_>>(), [Some(1.5), None]);
        assert_eq!(s.column(2).null_count(), 2, "s.n: added since, null");
        assert_eq!(out.column(2).null_count(), 2, "tag: added since, null");
    }

    #[test]
    fn a_required_field_the_file_lacks_is_an_error_naming_it() {
        let mut fields: Vec<FieldRef> = table().fields().iter().cloned().collect();
        fields.push(Arc::new(with_id("must", DataType::Utf8, false, 8)));
        let err = project_batch(&file(), &Arc::new(ArrowSchema::new(fields))).unwrap_err();
        assert_eq!(err.path, "must", "{err}");
    }

    #[test]
    fn a_file_without_field_ids_is_bound_by_name() {
        let plain =
            Fields::from(vec![Field::new("tag", DataType::Utf8, true), Field::new("id", DataType::Int64, false)]);
        let batch = RecordBatch::try_new(
            Arc::new(ArrowSchema::new(plain)),
            vec![Arc::new(StringArray::from(vec!["t"])), Arc::new(arrow_array::Int64Array::from(vec![3]))],
        )
        .unwrap();
        let out = project_batch(&batch, &table()).unwrap();
        assert_eq!(out.column(0).as_primitive::<arrow_array::types::Int64Type>().values(), &[3]);
        assert_eq!(out.column(2).as_string::<i32>().value(0), "t");
    }
}
