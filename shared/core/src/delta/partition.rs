//! The Iceberg partition spec as Delta partition columns, where Delta can say it:
//!
//! | Iceberg field | Delta partition column |
//! |---|---|
//! | `identity(col)`, `col` a top-level primitive column | `col` itself |
//! | `year(ts)` | a generated column named as the Iceberg field (`timestamp_year`), `integer`, `YEAR(ts)` |
//! | `month(ts)` | a generated column named as the Iceberg field (`timestamp_month`), `string`, `DATE_FORMAT(ts, 'yyyy-MM')` |
//! | `day(ts)` | a generated column named as the Iceberg field (`timestamp_day`), `date`, `CAST(ts AS DATE)` |
//! | `hour(ts)` | a generated column named as the Iceberg field (`timestamp_hour`), a timestamp, `DATE_TRUNC('HOUR', ts)` |
//! | `truncate(W, col)`, `col` a string, int or long column | a generated column named as the Iceberg field (`region_trunc`), `SUBSTRING(col, 1, W)` or `col - pmod(col, W)` |
//! | `identity` of a nested or binary column, `bucket`, `truncate` of other types | none: Delta has no expression its values are |
//!
//! A generated column is no column of the Parquet files: readers take its value from each
//! file's `partitionValues`, as they do every partition column's. Values are written as
//! Delta serializes partition values (dates `2025-11-24`, timestamps
//! `2025-11-24 20:00:00` in UTC, numbers in decimal, a null as JSON null).

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate};
use iceberg::spec::{
    Literal, PartitionSpec, PrimitiveLiteral, PrimitiveType, Schema, Struct, TableMetadata, Transform, Type,
};
use serde_json::{Value, json};

const ID: &str = "delta.columnMapping.id";
const PHYSICAL: &str = "delta.columnMapping.physicalName";
const GENERATED: &str = "delta.generationExpression";

/// How one Delta partition column gets its value from an Iceberg partition field.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    /// The source column's value, of this type.
    Identity(PrimitiveType),
    /// Years since 1970, as the year.
    Year,
    /// Months since 1970, as `yyyy-MM`.
    Month,
    /// Days since the epoch, as a date.
    Day,
    /// The truncated value itself.
    Truncate,
    /// Hours since the epoch, as the hour's first instant.
    Hour,
}

#[derive(Debug, Clone, PartialEq)]
struct Column {
    name: String,
    /// The Iceberg partition field it is made of.
    field_id: i32,
    kind: Kind,
}

/// A table's Delta partition columns, from its default Iceberg partition spec.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeltaPartitioning {
    columns: Vec<Column>,
    /// The generated columns, as fields of the Delta schema.
    pub generated: Vec<Value>,
    /// The Iceberg partition fields Delta cannot express (for the docs and logs).
    pub left_out: Vec<String>,
}

impl DeltaPartitioning {
    pub fn of(schema: &Schema, spec: &PartitionSpec) -> DeltaPartitioning {
        let mut out = DeltaPartitioning::default();
        for field in spec.fields() {
            let Some(source) = schema.field_by_id(field.source_id) else {
                out.left_out.push(field.name.clone());
                continue;
            };
            let top_level = schema.as_struct().fields().iter().any(|f| f.id == field.source_id);
            let path = schema.name_by_field_id(field.source_id).unwrap_or_default();
            let quoted: Vec<String> = path.split('.').map(|p| format!("`{p}`")).collect();
            let quoted = quoted.join(".");
            let (kind, generated) = match (&field.transform, &*source.field_type) {
                (Transform::Identity, Type::Primitive(p)) if top_level && identity_type(p) => {
                    (Kind::Identity(p.clone()), None)
                }
                (Transform::Year, Type::Primitive(_)) => (Kind::Year, Some(("integer", format!("YEAR({quoted})")))),
                (Transform::Month, Type::Primitive(_)) => {
                    (Kind::Month, Some(("string", format!("DATE_FORMAT({quoted}, 'yyyy-MM')"))))
                }
                (Transform::Day, Type::Primitive(_)) => (Kind::Day, Some(("date", format!("CAST({quoted} AS DATE)")))),
                (Transform::Truncate(w), Type::Primitive(PrimitiveType::String)) => {
                    (Kind::Truncate, Some(("string", format!("SUBSTRING({quoted}, 1, {w})"))))
                }
                (Transform::Truncate(w), Type::Primitive(p @ (PrimitiveType::Int | PrimitiveType::Long))) => {
                    let t = if *p == PrimitiveType::Int { "integer" } else { "long" };
                    (Kind::Truncate, Some((t, format!("{quoted} - pmod({quoted}, {w})"))))
                }
                (Transform::Hour, Type::Primitive(p)) => {
                    let t = if *p == PrimitiveType::Timestamp { "timestamp_ntz" } else { "timestamp" };
                    (Kind::Hour, Some((t, format!("DATE_TRUNC('HOUR', {quoted})"))))
                }
                _ => {
                    out.left_out.push(field.name.clone());
                    continue;
                }
            };
            let name = match kind {
                Kind::Identity(_) => source.name.clone(),
                _ => field.name.clone(),
            };
            if let Some((t, expression)) = generated {
                out.generated.push(json!({
                    "name": name,
                    "type": t,
                    "nullable": true,
                    "metadata": { ID: field.field_id, PHYSICAL: name, GENERATED: expression },
                }));
            }
            out.columns.push(Column { name, field_id: field.field_id, kind });
        }
        out
    }

    /// The partition columns' names (`metaData.partitionColumns`).
    pub fn names(&self) -> Vec<String> {
        self.columns.iter().map(|c| c.name.clone()).collect()
    }

    /// A data file's `partitionValues`: its partition struct (under the spec `spec_id` of
    /// `metadata`) read by field id; a field its spec lacks is null.
    pub fn values(
        &self,
        metadata: &TableMetadata,
        spec_id: i32,
        partition: &Struct,
    ) -> BTreeMap<String, Option<String>> {
        let by_id: BTreeMap<i32, Option<&Literal>> = metadata
            .partition_spec_by_id(spec_id)
            .map(|spec| spec.fields().iter().map(|f| f.field_id).zip(partition.iter()).collect())
            .unwrap_or_default();
        self.columns
            .iter()
            .map(|c| {
                let literal = by_id.get(&c.field_id).copied().flatten();
                (c.name.clone(), literal.and_then(|l| serialize(&c.kind, l)))
            })
            .collect()
    }

    /// Whether it writes a generated column (the `generatedColumns` writer feature).
    pub fn has_generated(&self) -> bool {
        !self.generated.is_empty()
    }
}

/// Types whose values Delta serializes as partition values Floe writes.
fn identity_type(p: &PrimitiveType) -> bool {
    matches!(
        p,
        PrimitiveType::Boolean
            | PrimitiveType::Int
            | PrimitiveType::Long
            | PrimitiveType::Float
            | PrimitiveType::Double
            | PrimitiveType::Decimal { .. }
            | PrimitiveType::Date
            | PrimitiveType::Timestamp
            | PrimitiveType::Timestamptz
            | PrimitiveType::String
    )
}

fn serialize(kind: &Kind, literal: &Literal) -> Option<String> {
    let Literal::Primitive(p) = literal else { return None };
    let micros = |us: i64| DateTime::from_timestamp_micros(us).map(|t| t.format("%Y-%m-%d %H:%M:%S%.6f").to_string());
    let day = |d: i64| NaiveDate::from_num_days_from_ce_opt(719_163 + i32::try_from(d).ok()?).map(|d| d.to_string());
    match (kind, p) {
        (Kind::Year, PrimitiveLiteral::Int(y)) => Some((1970 + i64::from(*y)).to_string()),
        (Kind::Month, PrimitiveLiteral::Int(m)) => {
            let m = i64::from(*m);
            Some(format!("{:04}-{:02}", 1970 + m.div_euclid(12), m.rem_euclid(12) + 1))
        }
        (Kind::Day, PrimitiveLiteral::Int(d)) => day(i64::from(*d)),
        (Kind::Truncate, PrimitiveLiteral::String(s)) => Some(s.clone()),
        (Kind::Truncate, PrimitiveLiteral::Int(i)) => Some(i.to_string()),
        (Kind::Truncate, PrimitiveLiteral::Long(i)) => Some(i.to_string()),
        (Kind::Hour, PrimitiveLiteral::Int(h)) => micros(i64::from(*h) * 3_600_000_000),
        (Kind::Identity(PrimitiveType::Date), PrimitiveLiteral::Int(d)) => day(i64::from(*d)),
        (Kind::Identity(PrimitiveType::Timestamp | PrimitiveType::Timestamptz), PrimitiveLiteral::Long(us)) => {
            micros(*us)
        }
        (Kind::Identity(PrimitiveType::Decimal { scale, .. }), PrimitiveLiteral::Int128(unscaled)) => {
            Some(rust_decimal_text(*unscaled, *scale))
        }
        (Kind::Identity(_), PrimitiveLiteral::Boolean(b)) => Some(b.to_string()),
        (Kind::Identity(_), PrimitiveLiteral::Int(i)) => Some(i.to_string()),
        (Kind::Identity(_), PrimitiveLiteral::Long(i)) => Some(i.to_string()),
        (Kind::Identity(_), PrimitiveLiteral::Float(f)) => Some(f.to_string()),
        (Kind::Identity(_), PrimitiveLiteral::Double(f)) => Some(f.to_string()),
        (Kind::Identity(_), PrimitiveLiteral::String(s)) => Some(s.clone()),
        _ => None,
    }
}

/// An unscaled decimal with `scale` digits after the point, as text (`-12.30`).
fn rust_decimal_text(unscaled: i128, scale: u32) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let scale = scale as usize;
    let sign = if unscaled < 0 { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (whole, fraction) = padded.split_at(padded.len() - scale);
    format!("{sign}{whole}.{fraction}")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use iceberg::spec::{NestedField, StructType, UnboundPartitionSpec};

    use super::*;

    fn nested(id: i32, name: &str, t: PrimitiveType) -> Arc<NestedField> {
        Arc::new(NestedField::optional(id, name, Type::Primitive(t)))
    }

    fn schema() -> Schema {
        let kafka = StructType::new(vec![nested(3, "timestamp", PrimitiveType::Timestamptz)]);
        Schema::builder()
            .with_fields(vec![
                nested(1, "region", PrimitiveType::String),
                Arc::new(NestedField::required(2, "_kafka", Type::Struct(kafka))),
                nested(4, "payload", PrimitiveType::Binary),
                nested(5, "created", PrimitiveType::Timestamptz),
            ])
            .build()
            .unwrap()
    }

    /// The test schema, and a spec of its `fields` (source id, name, transform).
    fn spec(fields: &[(i32, &str, Transform)]) -> (Schema, PartitionSpec) {
        let schema = schema();
        let mut spec = UnboundPartitionSpec::builder();
        for (source, name, transform) in fields {
            spec = spec.add_partition_field(*source, *name, *transform).unwrap();
        }
        let spec = spec.build().bind(Arc::new(schema.clone())).unwrap();
        (schema, spec)
    }

    #[test]
    fn identity_day_and_hour_become_columns_and_the_rest_is_left_out() {
        let (schema, spec) = spec(&[
            (3, "timestamp_day", Transform::Day),
            (1, "region", Transform::Identity),
            (5, "created_hour", Transform::Hour),
            (4, "payload", Transform::Identity),
            (1, "region_bucket", Transform::Bucket(16)),
        ]);
        let p = DeltaPartitioning::of(&schema, &spec);
        assert_eq!(p.names(), ["timestamp_day", "region", "created_hour"]);
        assert_eq!(p.left_out, ["payload", "region_bucket"]);
        assert_eq!(p.generated.len(), 2);
        assert_eq!(p.generated[0]["metadata"][GENERATED], "CAST(`_kafka`.`timestamp` AS DATE)");
        assert_eq!(p.generated[1]["metadata"][GENERATED], "DATE_TRUNC('HOUR', `created`)");
        assert_eq!(p.generated[1]["type"], "timestamp");

        let day = 20_416; // 2025-11-24
        let values = [Some(Literal::int(day)), None, Some(Literal::int(day * 24 + 20)), None, None];
        let values = Struct::from_iter(values);
        let by_column: Vec<(String, Option<String>)> = p
            .columns
            .iter()
            .map(|c| {
                let i = spec.fields().iter().position(|f| f.field_id == c.field_id).unwrap();
                (c.name.clone(), values.fields()[i].as_ref().and_then(|l| serialize(&c.kind, l)))
            })
            .collect();
        assert_eq!(
            by_column,
            [
                ("timestamp_day".to_string(), Some("2025-11-24".to_string())),
                ("region".into(), None),
                ("created_hour".into(), Some("2025-11-24 20:00:00.000000".into())),
            ]
        );
    }

    #[test]
    fn year_month_and_truncate_become_generated_columns_and_bucket_is_left_out() {
        let (schema, spec) = spec(&[
            (3, "timestamp_year", Transform::Year),
            (5, "created_month", Transform::Month),
            (1, "region_trunc", Transform::Truncate(2)),
            (1, "region_bucket", Transform::Bucket(16)),
        ]);
        let p = DeltaPartitioning::of(&schema, &spec);
        assert_eq!(p.names(), ["timestamp_year", "created_month", "region_trunc"]);
        assert_eq!(p.left_out, ["region_bucket"]);
        let expressions: Vec<(&str, &str)> = p
            .generated
            .iter()
            .map(|g| (g["type"].as_str().unwrap(), g["metadata"][GENERATED].as_str().unwrap()))
            .collect();
        assert_eq!(
            expressions,
            [
                ("integer", "YEAR(`_kafka`.`timestamp`)"),
                ("string", "DATE_FORMAT(`created`, 'yyyy-MM')"),
                ("string", "SUBSTRING(`region`, 1, 2)")
            ]
        );
        // Iceberg's values: years and months since 1970 (before it too), the truncated text.
        assert_eq!(serialize(&Kind::Year, &Literal::int(55)), Some("2025".into()));
        assert_eq!(serialize(&Kind::Month, &Literal::int(55 * 12 + 10)), Some("2025-11".into()));
        assert_eq!(serialize(&Kind::Month, &Literal::int(0)), Some("1970-01".into()));
        assert_eq!(serialize(&Kind::Month, &Literal::int(-1)), Some("1969-12".into()));
        assert_eq!(serialize(&Kind::Truncate, &Literal::string("eu")), Some("eu".into()));
        assert_eq!(serialize(&Kind::Truncate, &Literal::long(-20)), Some("-20".into()));
    }

    #[test]
    fn identity_values_are_serialized_as_delta_reads_them() {
        let text = |t: PrimitiveType, l: Literal| serialize(&Kind::Identity(t), &l);
        assert_eq!(text(PrimitiveType::String, Literal::string("eu")), Some("eu".into()));
        assert_eq!(text(PrimitiveType::Long, Literal::long(-5)), Some("-5".into()));
        assert_eq!(text(PrimitiveType::Boolean, Literal::bool(true)), Some("true".into()));
        assert_eq!(text(PrimitiveType::Date, Literal::date(0)), Some("1970-01-01".into()));
        let ts = Literal::timestamptz(1_500_000);
        assert_eq!(text(PrimitiveType::Timestamptz, ts), Some("1970-01-01 00:00:01.500000".into()));
        assert_eq!(rust_decimal_text(-1230, 2), "-12.30");
        assert_eq!(rust_decimal_text(5, 3), "0.005");
        assert_eq!(rust_decimal_text(42, 0), "42");
    }
}
