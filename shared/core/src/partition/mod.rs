//! Partitioning: `partition_by` bound to a table schema as an Iceberg `PartitionSpec`,
//! record batches split by partition value, and each value's folders
//! ([`partition_path`]: `<field>=<value>`, bounded however long the value).
//!
//! ```text
//!  "day(_kafka.timestamp)" ──bind(schema)──▶ PartitionSpec { timestamp_day: day(source id 3), field id 1000 }
//!  RecordBatch ──Partitioner::split──▶ [(Struct {timestamp_day: 20787}, rows of that day), …]
//! ```
//!
//! Binding resolves the source column by name (dotted paths go into structs, never into
//! lists or maps), checks that the transform applies to its type, and names the field as
//! Iceberg and Spark do (`timestamp_day`, `id_bucket`, `name_trunc`, `region`; the full
//! path joined by `_` when the short name is taken). Partition field ids start at 1000.
//!
//! Splitting computes the partition values with iceberg-rust's transform functions
//! (`PartitionValueCalculator`), groups rows by value in Arrow's row format and takes
//! each group's rows: linear in the rows, one `Struct` per group. (iceberg-rust's
//! `RecordBatchPartitionSplitter` builds a `Struct` per row and filters the whole batch
//! once per group, which is quadratic for many partitions per batch.)

pub mod grammar;

pub use grammar::{MAX_WIDTH, PartitionField, parse_partition_field};

use std::collections::HashMap;
use std::sync::Arc;

use arrow::compute::take_record_batch;
use arrow::row::{RowConverter, SortField};
use arrow_array::{Array, ArrayRef, RecordBatch, StructArray, UInt32Array};
use iceberg::arrow::{PartitionValueCalculator, arrow_struct_to_literal};
use iceberg::spec::{
    Literal, PartitionSpec, PartitionSpecBuilder, Schema, SchemaRef, Struct, StructType, Transform, Type,
    UnboundPartitionField,
};
use iceberg::{Error, ErrorKind};

use crate::retry::Retryable;

/// A `partition_by` entry that does not fit the table: the field (`topics[0].partition_by[1]`)
/// and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PartitionError {
    pub field: String,
    pub message: String,
}

impl Retryable for PartitionError {
    /// A configuration error: retrying never helps.
    fn retryable(&self) -> bool {
        false
    }
}

/// Iceberg's transform for a configured one.
pub fn iceberg_transform(transform: grammar::Transform) -> Transform {
    match transform {
        grammar::Transform::Identity => Transform::Identity,
        grammar::Transform::Year => Transform::Year,
        grammar::Transform::Month => Transform::Month,
        grammar::Transform::Day => Transform::Day,
        grammar::Transform::Hour => Transform::Hour,
        grammar::Transform::Bucket(n) => Transform::Bucket(n),
        grammar::Transform::Truncate(n) => Transform::Truncate(n),
    }
}

/// The suffix Iceberg's and Spark's spec builders give a transform's field name.
fn name_suffix(transform: Transform) -> &'static str {
    match transform {
        Transform::Year => "_year",
        Transform::Month => "_month",
        Transform::Day => "_day",
        Transform::Hour => "_hour",
        Transform::Bucket(_) => "_bucket",
        Transform::Truncate(_) => "_trunc",
        _ => "",
    }
}

/// `timestamp_day` for `day(_kafka.timestamp)`: the column's own name and the suffix.
fn short_name(field: &PartitionField) -> String {
    let leaf = field.source.rsplit('.').next().unwrap_or(&field.source);
    format!("{leaf}{}", name_suffix(iceberg_transform(field.transform)))
}

/// Resolves a dotted source path through structs to a primitive column: its id and type.
fn resolve_source(schema: &Schema, source: &str) -> Result<(i32, Type), String> {
    let mut fields = schema.as_struct().fields();
    let segments: Vec<&str> = source.split('.').collect();
    for (i, segment) in segments.iter().enumerate() {
        let path = segments[..=i].join(".");
        let Some(field) = fields.iter().find(|f| f.name == *segment) else {
            let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
            return Err(format!("no column `{path}` in the table (there: {})", names.join(", ")));
        };
        let last = i + 1 == segments.len();
        match (&*field.field_type, last) {
            (Type::Primitive(_), true) => return Ok((field.id, (*field.field_type).clone())),
            (Type::Struct(s), false) => fields = s.fields(),
            (Type::Struct(_), true) => {
                return Err(format!("`{path}` is a struct; partition by one of its fields (`{path}.<field>`)"));
            }
            (Type::List(_) | Type::Map(_), _) => {
                return Err(format!(
                    "`{path}` is a {}; a partition source must be a primitive column outside lists and maps",
                    if matches!(*field.field_type, Type::List(_)) { "list" } else { "map" }
                ));
            }
            (Type::Primitive(p), false) => {
                return Err(format!("`{path}` is a {p}, it has no field `{}`", segments[i + 1]));
            }
        }
    }
    Err(format!("invalid column name {source:?}"))
}

/// Binds `fields` to `schema`: the table's partition spec (spec id 0, field ids from
/// 1000). `at` names the configuration entry (`topics[0].partition_by`) in errors.
pub fn bind(schema: &Schema, fields: &[PartitionField], at: &str) -> Result<PartitionSpec, PartitionError> {
    let schema = Arc::new(schema.clone());
    let mut builder = PartitionSpecBuilder::new(schema.clone()).with_spec_id(0);
    let mut names: Vec<String> = Vec::new();
    for (j, field) in fields.iter().enumerate() {
        let error = |message: String| PartitionError { field: format!("{at}[{j}]"), message };
        let (source_id, source_type) = resolve_source(&schema, &field.source).map_err(error)?;
        let transform = iceberg_transform(field.transform);
        if matches!(transform, Transform::Bucket(0) | Transform::Truncate(0)) {
            return Err(error(format!("{transform}: the width must be at least 1")));
        }
        if let Transform::Bucket(n) | Transform::Truncate(n) = transform
            && n > grammar::MAX_WIDTH
        {
            return Err(error(format!(
                "{transform}: the width must be at most {} (Iceberg widths are 32-bit integers)",
                grammar::MAX_WIDTH
            )));
        }
        transform
            .result_type(&source_type)
            .map_err(|_| error(format!("{transform} does not apply to `{}`, a {source_type} column", field.source)))?;
        let short = short_name(field);
        let taken_by_column = |name: &str| {
            schema.field_by_name(name).is_some_and(|f| !(transform == Transform::Identity && f.id == source_id))
        };
        let shared = fields.iter().enumerate().any(|(k, other)| k != j && short_name(other) == short);
        let name = if (shared || taken_by_column(&short)) && field.source.contains('.') {
            format!("{}{}", field.source.replace('.', "_"), name_suffix(transform))
        } else {
            short
        };
        if names.contains(&name) || taken_by_column(&name) {
            return Err(error(format!("partition field name `{name}` is already taken")));
        }
        builder = builder
            .add_unbound_field(UnboundPartitionField { source_id, field_id: None, name: name.clone(), transform })
            .map_err(|e| error(e.message().to_string()))?;
        names.push(name);
    }
    let spec =
        builder.build().map_err(|e| PartitionError { field: at.to_string(), message: e.message().to_string() })?;
    for (j, field) in spec.fields().iter().enumerate() {
        computable(&schema, field).map_err(|message| PartitionError { field: format!("{at}[{j}]"), message })?;
    }
    Ok(spec)
}

/// Whether iceberg-rust's transform function takes the column's Arrow type (0.10.1 has
/// no `truncate` of `LargeBinary`, the type of raw keys and values, for one): tried on
/// an empty batch, so that it fails here rather than on the first segment.
fn computable(schema: &SchemaRef, field: &iceberg::spec::PartitionField) -> Result<(), String> {
    let single = PartitionSpecBuilder::new(schema.clone())
        .add_unbound_field(field.clone().into_unbound())
        .and_then(|b| b.build())
        .map_err(|e| e.message().to_string())?;
    let arrow = iceberg::arrow::schema_to_arrow_schema(schema).map_err(|e| e.message().to_string())?;
    PartitionValueCalculator::try_new(&single, schema)
        .and_then(|c| c.calculate(&RecordBatch::new_empty(Arc::new(arrow))))
        .map(drop)
        .map_err(|e| {
            let source = schema.name_by_field_id(field.source_id).unwrap_or(&field.name);
            format!("{} of `{source}` cannot be computed: {}", field.transform, e.message())
        })
}

/// The spec a table's new files are laid out by. A new table (`existing` is `None`): the
/// configured `partition_by` bound to `schema`, an error naming the field when it does not
/// fit. An existing table: its current spec wins (no spec evolution), with a warning
/// naming both when the configuration asks for another — unless it does not fit `schema`
/// (an incompatible source), then unpartitioned files.
pub fn spec_for_table(
    partition_by: &[PartitionField],
    partition_by_field: &str,
    table: &str,
    schema: &Schema,
    existing: Option<&PartitionSpec>,
) -> Result<PartitionSpec, PartitionError> {
    let configured = bind(schema, partition_by, partition_by_field);
    let Some(existing) = existing else { return configured };
    if let Err(e) = existing.partition_type(schema) {
        // The files' schema is not the table's (an incompatible source: the committer
        // suspends the table and keeps the task); once resolved, the committer lays the
        // files out by the table's spec.
        tracing::warn!(table, table_spec = %describe(existing), error = %e.message(),
            "the table's partition spec does not fit the files' schema: files written unpartitioned");
        return Ok(PartitionSpec::unpartition_spec());
    }
    match configured {
        Ok(c) if c.is_compatible_with(existing) => {}
        Ok(c) => tracing::warn!(table, field = %partition_by_field, configured = %describe(&c),
            table_spec = %describe(existing), "partition_by differs from the existing table's spec, which is kept (no spec evolution)"),
        Err(e) => tracing::warn!(table, error = %e, table_spec = %describe(existing),
            "partition_by does not fit the table; the existing table's spec is kept"),
    }
    Ok(existing.clone())
}

/// Whether files written with `a` can be recorded under `b` as they are: the same fields
/// (source ids, transforms, names and field ids) in the same order.
pub fn same_layout(a: &PartitionSpec, b: &PartitionSpec) -> bool {
    a.is_compatible_with(b) && a.fields().iter().zip(b.fields()).all(|(x, y)| x.field_id == y.field_id)
}

/// A short description of a spec for logs: `[timestamp_day: day(3), id_bucket: bucket[16](7)]`.
pub fn describe(spec: &PartitionSpec) -> String {
    let fields: Vec<String> =
        spec.fields().iter().map(|f| format!("{}: {}({})", f.name, f.transform, f.source_id)).collect();
    format!("[{}]", fields.join(", "))
}

/// Splits record batches of a partitioned table by partition value.
pub struct Partitioner {
    spec: Arc<PartitionSpec>,
    partition_type: StructType,
    calculator: PartitionValueCalculator,
    rows: RowConverter,
}

impl std::fmt::Debug for Partitioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partitioner").field("spec", &describe(&self.spec)).finish()
    }
}

fn arrow_error(e: arrow_schema::ArrowError) -> Error {
    Error::new(ErrorKind::Unexpected, format!("partitioning: {e}"))
}

impl Partitioner {
    /// `None` for an unpartitioned spec: its rows need no work at all.
    pub fn new(spec: Arc<PartitionSpec>, schema: SchemaRef) -> iceberg::Result<Option<Partitioner>> {
        if spec.is_unpartitioned() {
            return Ok(None);
        }
        let calculator = PartitionValueCalculator::try_new(&spec, &schema)?;
        let partition_type = calculator.partition_type().clone();
        let arrow_schema::DataType::Struct(fields) = calculator.partition_arrow_type() else {
            return Err(Error::new(ErrorKind::Unexpected, "partition type is not a struct"));
        };
        let sort_fields = fields.iter().map(|f| SortField::new(f.data_type().clone())).collect();
        let rows = RowConverter::new(sort_fields).map_err(arrow_error)?;
        Ok(Some(Partitioner { spec, partition_type, calculator, rows }))
    }

    pub fn spec(&self) -> &Arc<PartitionSpec> {
        &self.spec
    }

    pub fn partition_type(&self) -> &StructType {
        &self.partition_type
    }

    /// The batch's rows grouped by partition value, groups in the order of their first
    /// row, rows in their order. A null source lands in the null partition.
    pub fn split(&self, batch: &RecordBatch) -> iceberg::Result<Vec<(Struct, RecordBatch)>> {
        if batch.num_rows() == 0 {
            return Ok(Vec::new());
        }
        let values = self.calculator.calculate(batch)?;
        let columns = values
            .as_any()
            .downcast_ref::<StructArray>()
            .ok_or_else(|| Error::new(ErrorKind::Unexpected, "partition values are not a struct array"))?
            .columns()
            .to_vec();
        let rows = self.rows.convert_columns(&columns).map_err(arrow_error)?;
        let mut index: HashMap<arrow::row::Row<'_>, usize> = HashMap::new();
        let mut groups: Vec<(usize, Vec<u32>)> = Vec::new();
        for i in 0..batch.num_rows() {
            let group = *index.entry(rows.row(i)).or_insert_with(|| {
                groups.push((i, Vec::new()));
                groups.len() - 1
            });
            groups[group].1.push(i as u32);
        }
        let mut out = Vec::with_capacity(groups.len());
        for (first, indices) in groups {
            let value = self.value_at(&values, first)?;
            let rows = if indices.len() == batch.num_rows() {
                batch.clone()
            } else {
                take_record_batch(batch, &UInt32Array::from(indices)).map_err(arrow_error)?
            };
            out.push((value, rows));
        }
        Ok(out)
    }

    fn value_at(&self, values: &ArrayRef, row: usize) -> iceberg::Result<Struct> {
        match arrow_struct_to_literal(&values.slice(row, 1), &self.partition_type)?.pop().flatten() {
            Some(Literal::Struct(s)) => Ok(s),
            other => Err(Error::new(ErrorKind::Unexpected, format!("partition value {other:?} is not a struct"))),
        }
    }

    /// The directory of a partition value, Iceberg style (`timestamp_day=2026-11-30`),
    /// names and values percent-encoded so that no value can leave the data directory,
    /// and bounded (see [`partition_path`]).
    pub fn path(&self, value: &Struct) -> String {
        let fields: Vec<(&str, String)> = self
            .spec
            .fields()
            .iter()
            .zip(self.partition_type.fields())
            .zip(value.iter())
            .map(|((field, ty), literal)| {
                (field.name.as_str(), field.transform.to_human_string(&ty.field_type, literal))
            })
            .collect();
        partition_path(&fields)
    }
}

/// At most this many bytes in one folder name of a partition path (file systems allow 255).
pub const MAX_COMPONENT_BYTES: usize = 128;
/// At most this many bytes of a field's name in its folder name.
const MAX_NAME_BYTES: usize = 64;
/// At most this many bytes in a whole partition path, so that a file's key stays well
/// within S3's 1024 bytes with the table's location and the file name.
pub const MAX_PATH_BYTES: usize = 512;
/// `-` and 16 hex digits: what a shortened name ends with.
const HASH_SUFFIX_BYTES: usize = 17;

/// The folders of a partition value: `<field>=<value>` per field (`timestamp_day=2026-11-30/
/// region=eu`), percent-encoded (`escape`). A name or value too long for its folder
/// ([`MAX_COMPONENT_BYTES`]) is cut to a readable prefix (on a character boundary, never
/// inside an escape) followed by `-` and 16 hex digits of a hash of the whole of it, so two
/// values sharing a prefix get two folders. When the fields together would pass
/// [`MAX_PATH_BYTES`], the leading folders that fit are kept and one folder of a hash of
/// every field ends the path. The same for local warehouses and S3. Only the layout: the
/// value each file holds is its partition value in the manifests, read by every engine.
pub fn partition_path(fields: &[(&str, String)]) -> String {
    let components: Vec<String> = fields
        .iter()
        .map(|(name, value)| {
            let name = bounded(name, MAX_NAME_BYTES);
            let value = bounded(value, MAX_COMPONENT_BYTES - name.len() - 1);
            format!("{name}={value}")
        })
        .collect();
    let joined = components.join("/");
    if joined.len() <= MAX_PATH_BYTES {
        return joined;
    }
    let mut path = String::new();
    for component in components {
        if path.len() + component.len() + 1 + HASH_SUFFIX_BYTES > MAX_PATH_BYTES {
            break;
        }
        path.push_str(&component);
        path.push('/');
    }
    let everything: Vec<String> = fields.iter().map(|(n, v)| format!("{n}={v}")).collect();
    path.push_str(&hash_hex(&everything.join("\0")));
    path
}

/// `s` percent-encoded when that fits in `max` bytes; else the encoded prefix that fits
/// with `-<16 hex digits of a hash of s>`.
fn bounded(s: &str, max: usize) -> String {
    let escaped = escape(s);
    if escaped.len() <= max {
        return escaped;
    }
    let mut out = escape_prefix(s, max.saturating_sub(HASH_SUFFIX_BYTES));
    out.push('-');
    out.push_str(&hash_hex(s));
    out
}

/// 16 hex digits of a stable hash (XXH64, seed 0) of `s`.
fn hash_hex(s: &str) -> String {
    format!("{:016x}", twox_hash::XxHash64::oneshot(0, s.as_bytes()))
}

/// Percent-encodes everything but `[A-Za-z0-9._-]` (and a leading dot), as URL encoding does.
fn escape(s: &str) -> String {
    escape_prefix(s, usize::MAX)
}

/// The encoding of the longest prefix of `s`, whole characters, that fits in `max` bytes.
fn escape_prefix(s: &str, max: usize) -> String {
    let mut out = String::new();
    let mut utf8 = [0u8; 4];
    for (i, c) in s.char_indices() {
        let bytes = c.encode_utf8(&mut utf8).as_bytes();
        let plain = c.is_ascii_alphanumeric() || c == '_' || c == '-' || (c == '.' && i > 0);
        let width = if plain { 1 } else { 3 * bytes.len() };
        if out.len() + width > max {
            break;
        }
        if plain {
            out.push(c);
        } else {
            for b in bytes {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_array::{Int64Array, StringArray, TimestampMicrosecondArray};
    use iceberg::spec::{NestedField, PrimitiveType};

    use super::grammar::Transform as T;
    use super::*;

    pub(crate) fn field(source: &str, transform: T) -> PartitionField {
        PartitionField { source: source.into(), transform }
    }

    /// `_kafka {partition, offset, timestamp, headers: list<struct>}`, `id`, `region`,
    /// `tags: map`, `timestamp` (a value column with the short name of `_kafka.timestamp`).
    pub(crate) fn schema() -> Schema {
        let p = |id, name: &str, t| Arc::new(NestedField::optional(id, name, Type::Primitive(t)));
        let kafka = StructType::new(vec![
            p(2, "partition", PrimitiveType::Int),
            p(3, "offset", PrimitiveType::Long),
            p(4, "timestamp", PrimitiveType::Timestamptz),
            Arc::new(NestedField::optional(
                5,
                "headers",
                Type::List(iceberg::spec::ListType::new(Arc::new(NestedField::list_element(
                    6,
                    Type::Struct(StructType::new(vec![p(7, "key", PrimitiveType::String)])),
                    true,
                )))),
            )),
        ]);
        Schema::builder()
            .with_fields(vec![
                Arc::new(NestedField::required(1, "_kafka", Type::Struct(kafka))),
                p(8, "id", PrimitiveType::Long),
                p(9, "region", PrimitiveType::String),
                Arc::new(NestedField::optional(
                    10,
                    "tags",
                    Type::Map(iceberg::spec::MapType::new(
                        Arc::new(NestedField::map_key_element(11, Type::Primitive(PrimitiveType::String))),
                        Arc::new(NestedField::map_value_element(12, Type::Primitive(PrimitiveType::String), false)),
                    )),
                )),
                p(13, "timestamp", PrimitiveType::Timestamp),
            ])
            .build()
            .unwrap()
    }

    #[test]
    fn binds_names_and_ids_as_iceberg_does() {
        let spec = bind(
            &schema(),
            &[field("_kafka.timestamp", T::Day), field("id", T::Bucket(16)), field("region", T::Identity)],
            "topics[0].partition_by",
        )
        .unwrap();
        let got: Vec<(i32, i32, &str, Transform)> =
            spec.fields().iter().map(|f| (f.source_id, f.field_id, f.name.as_str(), f.transform)).collect();
        assert_eq!(
            got,
            vec![
                (4, 1000, "timestamp_day", Transform::Day),
                (8, 1001, "id_bucket", Transform::Bucket(16)),
                (9, 1002, "region", Transform::Identity)
            ]
        );
        // Two fields with the same short name: the nested one is named by its full path.
        for fields in [
            [field("timestamp", T::Day), field("_kafka.timestamp", T::Day)],
            [field("_kafka.timestamp", T::Day), field("timestamp", T::Day)],
        ] {
            let spec = bind(&schema(), &fields, "d").unwrap();
            let mut names: Vec<&str> = spec.fields().iter().map(|f| f.name.as_str()).collect();
            names.sort();
            assert_eq!(names, ["_kafka_timestamp_day", "timestamp_day"]);
        }
        // Identity keeps the column's name; `partition` is no top-level column.
        let spec = bind(&schema(), &[field("_kafka.partition", T::Identity)], "d").unwrap();
        assert_eq!(spec.fields()[0].name, "partition");
        let spec =
            bind(&schema(), &[field("_kafka.offset", T::Truncate(1000)), field("_kafka.offset", T::Bucket(4))], "d")
                .unwrap();
        let names: Vec<&str> = spec.fields().iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["offset_trunc", "offset_bucket"]);
    }

    #[test]
    fn errors_name_the_field_and_the_reason() {
        for (fields, field, reason) in [
            (vec![field("nope", T::Identity)], "p[0]", "no column `nope`"),
            (vec![field("id", T::Identity), field("_kafka.nope", T::Day)], "p[1]", "no column `_kafka.nope`"),
            (vec![field("_kafka.timestamp", T::Bucket(0))], "p[0]", "at least 1"),
            (vec![field("id", T::Bucket(1 << 31))], "p[0]", "at most 2147483647"),
            (vec![field("region", T::Truncate(u32::MAX))], "p[0]", "at most 2147483647"),
            (vec![field("region", T::Day)], "p[0]", "day does not apply to `region`, a string column"),
            (vec![field("_kafka", T::Identity)], "p[0]", "is a struct"),
            (vec![field("_kafka.headers.key", T::Identity)], "p[0]", "outside lists and maps"),
            (vec![field("tags", T::Identity)], "p[0]", "is a map"),
            (vec![field("id.x", T::Identity)], "p[0]", "has no field `x`"),
            (vec![field("id", T::Identity), field("id", T::Identity)], "p[1]", ""),
        ] {
            let err = bind(&schema(), &fields, "p").unwrap_err();
            assert_eq!(err.field, field, "{fields:?}: {err}");
            assert!(err.to_string().contains(reason), "{fields:?}: {err}");
            assert!(!err.retryable());
        }
    }

    #[test]
    fn a_new_table_takes_the_configuration_an_existing_one_keeps_its_spec() {
        let config = crate::config::FloeConfig::parse(
            "[[topics]]\ntopic = \"t\"\nvalue_format = \"avro\"\npartition_by = [\"bucket(8, id)\"]\n\
             [[topics]]\ntopic = \"bad\"\nvalue_format = \"avro\"\npartition_by = [\"_kafka.offset\", \"month(region)\"]",
        )
        .unwrap();
        let (topic, bad) = (config.resolve("t").unwrap(), config.resolve("bad").unwrap());
        let schema = schema();
        let configured = spec_for_table(&topic.partition_by, &topic.partition_by_field, "k.t", &schema, None).unwrap();
        assert_eq!(configured.fields()[0].name, "id_bucket");
        let err = spec_for_table(&bad.partition_by, &bad.partition_by_field, "k.bad", &schema, None).unwrap_err();
        assert_eq!(err.field, "topics[1].partition_by[1]");
        // An existing table's spec wins, whatever the configuration says.
        let existing = bind(&schema, &[field("region", T::Identity)], "x").unwrap();
        for t in [&topic, &bad] {
            assert_eq!(
                spec_for_table(&t.partition_by, &t.partition_by_field, "k.t", &schema, Some(&existing)).unwrap(),
                existing
            );
        }
        // …unless the files' schema has no such column: unpartitioned files.
        let other = Schema::builder()
            .with_fields(vec![Arc::new(NestedField::optional(1, "x", Type::Primitive(PrimitiveType::Long)))])
            .build()
            .unwrap();
        assert!(
            spec_for_table(&topic.partition_by, &topic.partition_by_field, "k.t", &other, Some(&existing))
                .unwrap()
                .is_unpartitioned()
        );
    }

    /// Rows of (offset, `_kafka.timestamp` µs, `region`).
    pub(crate) fn batch(schema: &Schema, rows: &[(i64, Option<i64>, Option<&str>)]) -> RecordBatch {
        let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(schema).unwrap());
        let arrow_schema::DataType::Struct(kafka_fields) = arrow.field(0).data_type().clone() else { panic!() };
        let n = rows.len();
        let headers = arrow_array::new_null_array(kafka_fields[3].data_type(), n);
        let kafka = StructArray::new(
            kafka_fields,
            vec![
                Arc::new(arrow_array::Int32Array::from(vec![0; n])),
                Arc::new(Int64Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
                Arc::new(
                    TimestampMicrosecondArray::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())
                        .with_timezone("+00:00"),
                ),
                headers,
            ],
            None,
        );
        let tags = arrow_array::new_null_array(arrow.field(3).data_type(), n);
        RecordBatch::try_new(
            arrow,
            vec![
                Arc::new(kafka),
                Arc::new(Int64Array::from(vec![None; n])),
                Arc::new(StringArray::from(rows.iter().map(|r| r.2).collect::<Vec<_>>())),
                tags,
                Arc::new(TimestampMicrosecondArray::from(vec![None; n])),
            ],
        )
        .unwrap()
    }

    pub(crate) fn offsets(batch: &RecordBatch) -> Vec<i64> {
        batch.column(0).as_struct().column(1).as_primitive::<Int64Type>().values().to_vec()
    }

    #[test]
    fn splits_rows_by_value_with_nulls_in_the_null_partition() {
        let schema = Arc::new(schema());
        let spec = bind(&schema, &[field("_kafka.timestamp", T::Day), field("region", T::Identity)], "p").unwrap();
        let partitioner = Partitioner::new(Arc::new(spec), schema.clone()).unwrap().unwrap();
        let day = 86_400_000_000i64;
        let rows = [
            (10, Some(20_000 * day), Some("eu")),
            (11, Some(20_001 * day + 5), Some("eu")),
            (12, Some(20_000 * day + 7), Some("eu")),
            (13, None, Some("us/../x")),
            (14, Some(20_000 * day), None),
            (15, None, Some("us/../x")),
        ];
        let groups = partitioner.split(&batch(&schema, &rows)).unwrap();
        let got: Vec<(String, Vec<i64>)> = groups.iter().map(|(v, b)| (partitioner.path(v), offsets(b))).collect();
        assert_eq!(
            got,
            vec![
                ("timestamp_day=2024-10-04/region=eu".to_string(), vec![10, 12]),
                ("timestamp_day=2024-10-05/region=eu".to_string(), vec![11]),
                ("timestamp_day=null/region=us%2F..%2Fx".to_string(), vec![13, 15]),
                ("timestamp_day=2024-10-04/region=null".to_string(), vec![14]),
            ]
        );
        assert_eq!(groups[0].0, Struct::from_iter([Some(Literal::date(20_000)), Some(Literal::string("eu"))]));
        assert_eq!(groups[2].0, Struct::from_iter([None, Some(Literal::string("us/../x"))]));
        // One value: the batch itself, no copy.
        let one = partitioner.split(&batch(&schema, &rows[..1])).unwrap();
        assert_eq!(one.len(), 1);
        assert!(Partitioner::new(Arc::new(PartitionSpec::unpartition_spec()), schema).unwrap().is_none());
    }

    /// The bytes a percent-encoded name stands for.
    fn unescape(s: &str) -> Vec<u8> {
        let mut out = Vec::new();
        let mut bytes = s.bytes();
        while let Some(b) = bytes.next() {
            match b {
                b'%' => {
                    let hex: String =
                        [bytes.next().unwrap(), bytes.next().unwrap()].iter().map(|&b| b as char).collect();
                    out.push(u8::from_str_radix(&hex, 16).unwrap());
                }
                b => out.push(b),
            }
        }
        out
    }

    /// `region=<value>` for one value: (the readable prefix, the hash), checked bounded.
    fn shortened(value: &str) -> (String, String) {
        let path = partition_path(&[("region", value.to_string())]);
        assert!(path.len() <= MAX_COMPONENT_BYTES, "{} bytes: {path}", path.len());
        assert!(!path.contains('/'), "{path}");
        let value_part = path.strip_prefix("region=").unwrap();
        let (prefix, hash) = value_part.rsplit_once('-').unwrap();
        assert!(hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()), "{path}");
        // The prefix is the start of the value, whole characters, no escape cut.
        let decoded = String::from_utf8(unescape(prefix)).expect("cut on a character");
        assert!(value.starts_with(&decoded) && decoded.len() > 10, "{path}");
        (prefix.to_string(), hash.to_string())
    }

    #[test]
    fn short_values_keep_icebergs_readable_layout() {
        assert_eq!(partition_path(&[("region", "eu".into()), ("id_bucket", "3".into())]), "region=eu/id_bucket=3");
        assert_eq!(partition_path(&[("region", ".a b/é".into())]), "region=%2Ea%20b%2F%C3%A9");
        let at_limit = "x".repeat(MAX_COMPONENT_BYTES - "region=".len());
        assert_eq!(partition_path(&[("region", at_limit.clone())]), format!("region={at_limit}"));
    }

    #[test]
    fn long_values_get_a_readable_prefix_and_a_hash_of_the_whole() {
        // ASCII: the prefix is the value's start, as long as it fits.
        let (prefix, _) = shortened(&"a".repeat(1000));
        assert_eq!(prefix, "a".repeat(MAX_COMPONENT_BYTES - "region=".len() - 17));
        // Multi-byte UTF-8 and characters to escape: cut between characters and escapes.
        for value in ["é".repeat(300), "日本語".repeat(100), "/..%".repeat(100), format!("x{}", "€".repeat(200))]
        {
            shortened(&value);
        }
        // Two values sharing a long prefix: the same readable prefix, two folders.
        let common = "z".repeat(500);
        let (a, b) = (format!("{common}-one"), format!("{common}-two"));
        let ((pa, ha), (pb, hb)) = (shortened(&a), shortened(&b));
        assert_eq!(pa, pb);
        assert_ne!(ha, hb);
        // Stable: the same value, the same folder.
        assert_eq!(partition_path(&[("region", a.clone())]), partition_path(&[("region", a)]));
        // A long field name is bounded too.
        let path = partition_path(&[("n".repeat(300).as_str(), "v".into())]);
        assert!(path.len() <= MAX_COMPONENT_BYTES && path.ends_with("=v"), "{path}");
    }

    #[test]
    fn many_long_fields_stay_within_the_path_limit() {
        let names: Vec<String> = (0..12).map(|i| format!("f{i}")).collect();
        let fields: Vec<(&str, String)> = names.iter().map(|n| (n.as_str(), "é".repeat(200))).collect();
        let path = partition_path(&fields);
        assert!(path.len() <= MAX_PATH_BYTES, "{} bytes", path.len());
        let components: Vec<&str> = path.split('/').collect();
        assert!(components.iter().all(|c| c.len() <= MAX_COMPONENT_BYTES), "{path}");
        assert!(components[0].starts_with("f0=%C3%A9"), "{path}");
        let last = components.last().unwrap();
        assert!(last.len() == 16 && last.bytes().all(|b| b.is_ascii_hexdigit()), "{path}");
        // Another value of the last field only: another path.
        let mut other = fields.clone();
        other[11].1.push('x');
        assert_ne!(partition_path(&other), path);
    }
}
