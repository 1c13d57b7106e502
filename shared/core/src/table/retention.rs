//! Row retention (data TTL): a topic's `retention` removes the rows whose age column —
//! the Kafka record's timestamp (`_kafka.timestamp`), or the timestamp or date column
//! its `retention_column` names — is older than `now − retention`, as Confluent
//! Tableflow's data TTL does. Compaction is the only place rows are dropped (no delete
//! files are written), on the compactor's schedule, through the committer:
//!
//! ```text
//!  live data files ─▶ by the age column's metrics (lower, upper bound) against the cutoff:
//!    upper < cutoff            ─▶ expired whole: removed without rewriting it (only its
//!                                  `_kafka.offset` column read, for the audit)
//!    lower < cutoff ≤ upper    ─▶ partly: rewritten without its expired rows
//!    no bounds, some non-null  ─▶ partly (read to know)
//!    lower ≥ cutoff, or nulls only ─▶ kept as it is
//!  ─▶ per (partition value, Kafka partition), one CompactionTask: removed = those files,
//!     added = what is left of the partly expired ones; the offsets left out go to the
//!     table state, for `floe audit` to explain.
//! ```
//!
//! A row whose age column is null never expires. A table partitioned by a time transform
//! of the age column loses whole partitions: every file there is expired whole.

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, BooleanArray, Int64Array, RecordBatch};
use arrow_schema::DataType;
use std::collections::HashMap;

use iceberg::io::FileIO;
use iceberg::spec::{DataFile, Datum, PrimitiveLiteral, PrimitiveType, Schema, TableMetadata, Type};

use super::deletes::read::column_by_id;
use super::snapshot::live_data_files;
use crate::config::DEFAULT_RETENTION_COLUMN;

const MICROS_PER_MS: i64 = 1_000;
const NANOS_PER_MS: i64 = 1_000_000;
const MS_PER_DAY: i64 = 24 * 60 * 60 * 1_000;

/// A topic's retention bound to its table: the age column's field id and the cutoff in
/// that column's unit (rows below it are expired).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub field_id: i32,
    /// The cutoff in ms since the epoch, as configured.
    pub cutoff_ms: i64,
    /// The cutoff in the column's unit: µs or ns for timestamps, days for dates.
    cutoff: i64,
}

/// What retention does to a data file, by its metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No row past the cutoff.
    Kept,
    /// Every row past it: the file goes without being rewritten.
    Whole,
    /// Some rows past it (or unknown): the file is rewritten without them.
    Partly,
}

impl Retention {
    /// Binds `column` (a dotted path) of `schema` and the cutoff `now_ms − retention_ms`;
    /// an error says why the column cannot measure a row's age.
    pub fn bind(schema: &Schema, column: &str, now_ms: i64, retention_ms: u64) -> Result<Retention, String> {
        let field =
            schema.field_by_name(column).ok_or_else(|| format!("retention_column {column:?}: no such column"))?;
        let cutoff_ms = now_ms.saturating_sub(i64::try_from(retention_ms).unwrap_or(i64::MAX));
        let cutoff = match field.field_type.as_ref() {
            Type::Primitive(PrimitiveType::Timestamp | PrimitiveType::Timestamptz) => {
                cutoff_ms.saturating_mul(MICROS_PER_MS)
            }
            Type::Primitive(PrimitiveType::TimestampNs | PrimitiveType::TimestamptzNs) => {
                cutoff_ms.saturating_mul(NANOS_PER_MS)
            }
            Type::Primitive(PrimitiveType::Date) => cutoff_ms.div_euclid(MS_PER_DAY),
            other => return Err(format!("retention_column {column:?} is a {other}, not a timestamp or a date")),
        };
        Ok(Retention { field_id: field.id, cutoff_ms, cutoff })
    }

    /// What becomes of `file`, by its age column's bounds and null count.
    pub fn of(&self, file: &DataFile) -> Verdict {
        let lower = bound(file.lower_bounds(), self.field_id);
        let upper = bound(file.upper_bounds(), self.field_id);
        let nulls = file.null_value_counts().get(&self.field_id).copied();
        let all_null = nulls.is_some_and(|n| n == file.record_count());
        match (lower, upper) {
            _ if all_null => Verdict::Kept,
            (_, Some(upper)) if upper < self.cutoff && nulls == Some(0) => Verdict::Whole,
            (Some(lower), _) if lower >= self.cutoff => Verdict::Kept,
            _ => Verdict::Partly,
        }
    }

    /// Per row of `batch` (the table's columns, with field ids), whether it is past the
    /// cutoff (a null age: never).
    pub fn expired(&self, batch: &RecordBatch) -> Result<BooleanArray, String> {
        let fields = batch.schema().fields().clone();
        let column = column_by_id(&fields, batch.columns(), self.field_id)
            .ok_or_else(|| format!("no column of field id {}", self.field_id))?;
        let values = match column.data_type() {
            DataType::Date32 => {
                arrow::compute::cast(&column, &DataType::Int32).and_then(|c| arrow::compute::cast(&c, &DataType::Int64))
            }
            _ => arrow::compute::cast(&column, &DataType::Int64),
        }
        .map_err(|e| e.to_string())?;
        let values: &Int64Array = values.as_primitive::<Int64Type>();
        Ok(values.iter().map(|v| Some(v.is_some_and(|v| v < self.cutoff))).collect())
    }
}

/// What status shows of `metadata`'s current snapshot's live data files: the oldest
/// Kafka timestamp (ms) of its rows, by the `_kafka.timestamp` lower bounds (files
/// without one are not counted; `None` for a table without rows or bounds), and how
/// many are fresh, waiting for compaction to rewrite them with zstd
/// ([`crate::datafile::Pages::Fresh`]).
pub async fn live_file_facts(file_io: &FileIO, metadata: &TableMetadata) -> iceberg::Result<(Option<i64>, u64)> {
    let files = live_data_files(file_io, metadata).await?;
    let fresh = files.iter().filter(|f| crate::datafile::is_fresh(f.file_path())).count() as u64;
    let Some(field) = metadata.current_schema().field_by_name(DEFAULT_RETENTION_COLUMN) else {
        return Ok((None, fresh));
    };
    let oldest = files.iter().filter_map(|f| bound(f.lower_bounds(), field.id)).min();
    Ok((oldest.map(|micros| micros.div_euclid(MICROS_PER_MS)), fresh))
}

/// A bound of field `id` as a number in the column's unit.
fn bound(bounds: &HashMap<i32, Datum>, id: i32) -> Option<i64> {
    match bounds.get(&id)?.literal() {
        PrimitiveLiteral::Long(v) => Some(*v),
        PrimitiveLiteral::Int(v) => Some(i64::from(*v)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Date32Array, TimestampMicrosecondArray};
    use arrow_schema::{Field, Schema as ArrowSchema};
    use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat, NestedField, Struct};

    use super::*;

    const NOW: i64 = 1_800_000_000_000;
    const DAY: i64 = MS_PER_DAY;

    fn schema() -> Schema {
        Schema::builder()
            .with_fields([
                NestedField::required(1, "ts", Type::Primitive(PrimitiveType::Timestamptz)).into(),
                NestedField::optional(2, "day", Type::Primitive(PrimitiveType::Date)).into(),
                NestedField::optional(3, "name", Type::Primitive(PrimitiveType::String)).into(),
            ])
            .build()
            .unwrap()
    }

    /// A file whose `ts` spans `lower..=upper` (ms), `nulls` of its 10 rows null.
    fn file(lower: Option<i64>, upper: Option<i64>, nulls: Option<u64>) -> DataFile {
        let bound = |ms: Option<i64>| ms.map(|ms| HashMap::from([(1, Datum::timestamptz_micros(ms * 1000))]));
        let mut builder = DataFileBuilder::default();
        builder
            .content(DataContentType::Data)
            .file_path("memory:///t/data/a.parquet".into())
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::empty())
            .record_count(10)
            .file_size_in_bytes(100)
            .lower_bounds(bound(lower).unwrap_or_default())
            .upper_bounds(bound(upper).unwrap_or_default());
        if let Some(n) = nulls {
            builder.null_value_counts(HashMap::from([(1, n)]));
        }
        builder.build().unwrap()
    }

    #[test]
    fn files_go_whole_partly_or_stay_by_their_bounds() {
        let r = Retention::bind(&schema(), "ts", NOW, 30 * DAY as u64).unwrap();
        let cutoff = NOW - 30 * DAY;
        assert_eq!(r.of(&file(Some(cutoff - 9), Some(cutoff - 1), Some(0))), Verdict::Whole);
        assert_eq!(r.of(&file(Some(cutoff - 9), Some(cutoff - 1), None)), Verdict::Partly, "nulls unknown");
        assert_eq!(r.of(&file(Some(cutoff - 9), Some(cutoff - 1), Some(2))), Verdict::Partly, "nulls stay");
        assert_eq!(r.of(&file(Some(cutoff - 1), Some(cutoff), Some(0))), Verdict::Partly);
        assert_eq!(r.of(&file(Some(cutoff), Some(cutoff + 9), Some(0))), Verdict::Kept, "the cutoff itself stays");
        assert_eq!(r.of(&file(None, None, None)), Verdict::Partly, "no metrics: read to know");
        assert_eq!(r.of(&file(None, None, Some(10))), Verdict::Kept, "nulls only");
    }

    #[test]
    fn the_column_must_be_a_timestamp_or_a_date() {
        assert!(Retention::bind(&schema(), "day", NOW, DAY as u64).is_ok());
        let e = Retention::bind(&schema(), "name", NOW, DAY as u64).unwrap_err();
        assert!(e.contains("\"name\" is a string, not a timestamp or a date"), "{e}");
        assert!(Retention::bind(&schema(), "nope", NOW, DAY as u64).unwrap_err().contains("no such column"));
    }

    #[test]
    fn rows_past_the_cutoff_are_expired_and_null_ages_never() {
        let with_id = |name: &str, ty: DataType, id: i32| {
            Field::new(name, ty, true)
                .with_metadata(HashMap::from([(parquet::arrow::PARQUET_FIELD_ID_META_KEY.to_string(), id.to_string())]))
        };
        let cutoff = NOW - DAY;
        let ts = TimestampMicrosecondArray::from(vec![Some((cutoff - 1) * 1000), Some(cutoff * 1000), None])
            .with_timezone("+00:00");
        let days = Date32Array::from(vec![Some((cutoff / DAY - 1) as i32), Some((cutoff / DAY) as i32), None]);
        let schema =
            ArrowSchema::new(vec![with_id("ts", ts.data_type().clone(), 1), with_id("day", DataType::Date32, 2)]);
        let batch = RecordBatch::try_new(Arc::new(schema), vec![Arc::new(ts), Arc::new(days)]).unwrap();
        let by_ts = Retention::bind(&self::schema(), "ts", NOW, DAY as u64).unwrap();
        assert_eq!(by_ts.expired(&batch).unwrap(), BooleanArray::from(vec![true, false, false]));
        let by_day = Retention::bind(&self::schema(), "day", NOW, DAY as u64).unwrap();
        assert_eq!(by_day.expired(&batch).unwrap(), BooleanArray::from(vec![true, false, false]));
    }
}
