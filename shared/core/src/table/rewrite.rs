//! Rewriting data files: several into one (compaction), or one keeping only some Kafka
//! offsets (trimming).
//!
//! The same offsets can reach the committer twice with different segment boundaries
//! (a leader change re-uploads part of a log). Only the offsets the table does not hold
//! yet may be committed, so a file straddling the boundary is read back, filtered on
//! `_kafka.offset` and written again under a new name; the original stays unreferenced.
//! Compaction reads small files and writes their rows, unchanged, into files of the
//! target size. Inputs are read one row group at a time (ranged reads): memory holds a
//! row group of one input and the output's open row group, whatever the inputs add up to.
//!
//! Columns are bound by field id ([`super::project`]): a file written with an older
//! schema, or by another engine that moved, renamed or dropped columns since, is read
//! into the output's schema column by column of the same id — added columns null,
//! dropped ones left out, promoted ones cast. A task's file whose ids differ from the
//! table's (materialized before the table existed) is read by its own ids and written
//! with the table's, field for field.
//!
//! Rewritten files are laid out by the table's partition spec, the partition values
//! computed from the rows again: a trimmed file keeps its partition value, compacted
//! files of one partition stay in it, and a file written under another spec (a task
//! from before the table existed with its spec) is split into the table's partitions.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{BooleanArray, Int64Array, RecordBatch};
use arrow_schema::SchemaRef;
use futures::TryStreamExt;
use iceberg::arrow::ArrowFileReader;
use iceberg::io::FileIO;
use iceberg::spec::{PartitionSpec, Schema};
use iceberg::{Error, ErrorKind, Result};
use parquet::arrow::ParquetRecordBatchStreamBuilder;

use super::deletes::read::FileDeletes;
use super::project::project_batch;
use super::retention::Retention;
use crate::datafile::{TableWriter, WriterOptions, WrittenFile, offset_column};

/// Rows per batch read: as many as the materializer writes per batch, so that the
/// per-batch work (casts, the writer's statistics) is spread over as many rows.
const BATCH_ROWS: usize = 8192;

fn invalid(path: &str, detail: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::DataInvalid, format!("rewriting {path}: {detail}"))
}

/// Writes the rows of `paths` (all of them, or those whose offset lies in `keep`) as
/// `output` says: files of about its target size under its `dir` (the table's data
/// directory; partitions go below it), named with its `source_id` (a tag), laid out by
/// `spec` (bound to its schema) — one file at least per partition value the rows have,
/// none when no row is kept. Trimming is one path with `keep` and no size limit.
///
/// The files' columns are bound by field id to `files_ids` — the output's schema with
/// the ids the files carry, field for field — or, without it, to the output's schema.
pub async fn rewrite_files(
    output: WriterOptions,
    spec: &PartitionSpec,
    paths: &[&str],
    keep: Option<&[(i64, i64)]>,
    files_ids: Option<&Schema>,
) -> Result<Vec<WrittenFile>> {
    let mut writer = Rewriter::new(output, spec, files_ids)?;
    let mut left_out = Rewritten::default();
    for path in paths {
        writer.file(path, keep, None, None, &mut left_out).await?;
    }
    writer.writer.close().await
}

/// A table's data file to rewrite, with what to leave out of it.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub path: &'a str,
    /// Other engines' deletes that apply to it.
    pub deletes: Option<&'a FileDeletes>,
    /// Every row past the retention: none is written, only its offsets read.
    pub expired: bool,
}

/// What [`rewrite_applying`] wrote, and the Kafka offsets of the rows it left out (in
/// the order read: [`crate::table::left_out::range_set`] makes them a set).
#[derive(Debug, Default)]
pub struct Rewritten {
    pub files: Vec<WrittenFile>,
    /// Rows other engines' delete files remove.
    pub deleted: Vec<i64>,
    /// Rows past the retention.
    pub expired: Vec<i64>,
}

/// Writes the rows of the table's data files `inputs` as [`rewrite_files`] does, less
/// those each one's deletes remove and those past `retention` (compaction applying other
/// engines' deletes, and row retention).
pub async fn rewrite_applying(
    output: WriterOptions,
    spec: &PartitionSpec,
    inputs: &[Input<'_>],
    retention: Option<&Retention>,
) -> Result<Rewritten> {
    let mut rewritten = Rewritten::default();
    let file_io = output.file_io.clone();
    let (whole, partly): (Vec<&Input>, Vec<&Input>) = inputs.iter().partition(|i| i.expired);
    for input in whole {
        offsets_of(&file_io, input.path, &mut rewritten.expired).await?;
    }
    let mut writer = Rewriter::new(output, spec, None)?;
    for input in partly {
        writer.file(input.path, None, input.deletes, retention, &mut rewritten).await?;
    }
    rewritten.files = writer.writer.close().await?;
    Ok(rewritten)
}

/// A writer of the table's rows, binding what it reads to the table's columns.
struct Rewriter {
    file_io: FileIO,
    target: SchemaRef,
    read: SchemaRef,
    writer: TableWriter,
}

impl Rewriter {
    fn new(output: WriterOptions, spec: &PartitionSpec, files_ids: Option<&Schema>) -> Result<Rewriter> {
        let file_io = output.file_io.clone();
        let target = Arc::new(iceberg::arrow::schema_to_arrow_schema(&output.schema)?);
        let read = match files_ids {
            Some(schema) => Arc::new(iceberg::arrow::schema_to_arrow_schema(schema)?),
            None => target.clone(),
        };
        Ok(Rewriter { file_io, target, read, writer: TableWriter::new(output, Arc::new(spec.clone()))? })
    }

    /// Writes the rows of `path`: those whose offset lies in `keep` (all without it),
    /// less those `deletes` remove and those past `retention` (noted in `left_out`).
    /// `keep` filters rows before deletes would, so the two are never given together
    /// (positions count the file's rows).
    async fn file(
        &mut self,
        path: &str,
        keep: Option<&[(i64, i64)]>,
        deletes: Option<&FileDeletes>,
        retention: Option<&Retention>,
        left_out: &mut Rewritten,
    ) -> Result<()> {
        let mut batches = row_groups(&self.file_io, path).await?;
        // The position in the file of the batch's first row (position deletes count rows).
        let mut first_row = 0i64;
        while let Some(batch) = batches.try_next().await.map_err(|e| invalid(path, e))? {
            let rows = batch.num_rows() as i64;
            let batch = project_batch(&batch, &self.read).map_err(|e| invalid(path, e))?;
            let at = first_row;
            first_row += rows;
            let Some((mut batch, first, last)) = table_rows(path, batch, keep, &self.target)? else {
                continue;
            };
            let mut filtered = false;
            let deleted = deletes.map(|d| d.keep(&batch, at)).transpose().map_err(|e| invalid(path, e))?.flatten();
            if let Some(mask) = deleted {
                batch = left_out_by(&batch, &mask, &mut left_out.deleted).map_err(|e| invalid(path, e))?;
                filtered = true;
            }
            if let Some(retention) = retention {
                let expired = retention.expired(&batch).map_err(|e| invalid(path, e))?;
                let mask = arrow::compute::not(&expired).map_err(|e| invalid(path, e))?;
                batch = left_out_by(&batch, &mask, &mut left_out.expired).map_err(|e| invalid(path, e))?;
                filtered = true;
            }
            if batch.num_rows() == 0 {
                continue;
            }
            let (first, last) = match filtered {
                false => (first, last),
                true => {
                    let offsets = offset_column(&batch).ok_or_else(|| invalid(path, "no _kafka.offset column"))?;
                    (arrow::compute::min(offsets).unwrap_or_default(), arrow::compute::max(offsets).unwrap_or_default())
                }
            };
            self.writer.write(&batch, first, last).await?;
        }
        Ok(())
    }
}

/// The rows of `batch` that `keep` keeps; the offsets of the others added to `left_out`.
fn left_out_by(
    batch: &RecordBatch,
    keep: &BooleanArray,
    left_out: &mut Vec<i64>,
) -> std::result::Result<RecordBatch, String> {
    let offsets = offset_column(batch).ok_or("no _kafka.offset column")?;
    for (offset, kept) in offsets.iter().zip(keep.iter()) {
        if let (Some(offset), Some(false)) = (offset, kept) {
            left_out.push(offset);
        }
    }
    arrow::compute::filter_record_batch(batch, keep).map_err(|e| e.to_string())
}

/// Adds the Kafka offsets of the rows of the Parquet file at `path` to `offsets`: its
/// `_kafka.offset` column alone read.
async fn offsets_of(file_io: &FileIO, path: &str, offsets: &mut Vec<i64>) -> Result<()> {
    let input = file_io.new_input(path)?;
    let reader = ArrowFileReader::new(input.metadata().await?, input.reader().await?);
    let builder = ParquetRecordBatchStreamBuilder::new(reader).await.map_err(|e| invalid(path, e))?;
    let parquet = builder.parquet_schema();
    let leaf = (0..parquet.num_columns())
        .find(|&i| parquet.column(i).path().string() == "_kafka.offset")
        .ok_or_else(|| invalid(path, "no _kafka.offset column"))?;
    let mask = parquet::arrow::ProjectionMask::leaves(parquet, [leaf]);
    let mut batches =
        builder.with_projection(mask).with_batch_size(BATCH_ROWS).build().map_err(|e| invalid(path, e))?;
    while let Some(batch) = batches.try_next().await.map_err(|e| invalid(path, e))? {
        let column = offset_column(&batch).ok_or_else(|| invalid(path, "no _kafka.offset column"))?;
        offsets.extend(column.iter().flatten());
    }
    Ok(())
}

/// The record batches of the Parquet file at `path`, read one row group at a time
/// (its column chunks in one ranged read), so that memory holds one row group of the
/// file, never the whole file.
async fn row_groups(
    file_io: &FileIO,
    path: &str,
) -> Result<impl futures::Stream<Item = parquet::errors::Result<RecordBatch>> + Unpin + use<>> {
    let input = file_io.new_input(path)?;
    let reader = ArrowFileReader::new(input.metadata().await?, input.reader().await?);
    ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .and_then(|b| b.with_batch_size(BATCH_ROWS).build())
        .map_err(|e| invalid(path, e))
}

/// `batch` (bound to the files' ids) as the table's rows: those whose offset lies in
/// `keep` (all without it), with `target`'s field ids (the same fields, one for one),
/// with their first and last offsets; `None` when no row is kept.
fn table_rows(
    path: &str,
    batch: RecordBatch,
    keep: Option<&[(i64, i64)]>,
    target: &SchemaRef,
) -> Result<Option<(RecordBatch, i64, i64)>> {
    let offsets = offset_column(&batch).ok_or_else(|| invalid(path, "no _kafka.offset column"))?.clone();
    let (batch, offsets) = match keep {
        None => (batch, offsets),
        Some(keep) => {
            let mask: BooleanArray =
                offsets.iter().map(|o| Some(o.is_some_and(|o| keep.iter().any(|&(a, b)| a <= o && o <= b)))).collect();
            let kept = arrow::compute::filter_record_batch(&batch, &mask).map_err(|e| invalid(path, e))?;
            let offsets: Int64Array = arrow::compute::filter(&offsets, &mask)
                .map_err(|e| invalid(path, e))?
                .as_primitive::<Int64Type>()
                .clone();
            (kept, offsets)
        }
    };
    if batch.num_rows() == 0 {
        return Ok(None);
    }
    if batch.schema() == *target {
        let (first, last) = (arrow::compute::min(&offsets), arrow::compute::max(&offsets));
        return Ok(Some((batch, first.unwrap_or_default(), last.unwrap_or_default())));
    }
    let columns = batch
        .columns()
        .iter()
        .zip(target.fields())
        .map(|(c, f)| arrow::compute::cast(c, f.data_type()))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| invalid(path, e))?;
    let batch = RecordBatch::try_new(target.clone(), columns).map_err(|e| invalid(path, e))?;
    let first = arrow::compute::min(&offsets).unwrap_or_default();
    let last = arrow::compute::max(&offsets).unwrap_or_default();
    Ok(Some((batch, first, last)))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use parquet::arrow::ArrowWriter;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::file::properties::WriterProperties;

    use super::*;
    use crate::partition::tests::{batch, schema};

    /// A Parquet file of the rows with `offsets` (region: the offset as text), a row
    /// group every three rows.
    fn input(path: &Path, offsets: std::ops::Range<i64>) -> String {
        let regions: Vec<String> = offsets.clone().map(|o| o.to_string()).collect();
        let rows: Vec<_> = offsets.zip(&regions).map(|(o, r)| (o, None, Some(r.as_str()))).collect();
        let batch = batch(&schema(), &rows);
        let props = WriterProperties::builder().set_max_row_group_row_count(Some(3)).build();
        let mut writer =
            ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), Some(props)).unwrap();
        writer.write(&batch).unwrap();
        assert!(writer.close().unwrap().num_row_groups() > 1);
        path.display().to_string()
    }

    /// (offset, region) of every row of the files.
    fn rows(files: &[WrittenFile]) -> Vec<(i64, String)> {
        let mut rows = Vec::new();
        for file in files {
            let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(file.path()).unwrap())
                .unwrap()
                .build()
                .unwrap();
            for batch in reader {
                let batch = batch.unwrap();
                let offsets = offset_column(&batch).unwrap().clone();
                let regions = batch.column_by_name("region").unwrap().as_string::<i32>().clone();
                rows.extend(offsets.values().iter().zip(regions.iter()).map(|(o, r)| (*o, r.unwrap().to_string())));
            }
        }
        rows
    }

    #[tokio::test]
    async fn inputs_are_read_row_group_by_row_group_keeping_rows_and_order() {
        let dir = tempfile::tempdir().unwrap();
        let paths = [input(&dir.path().join("a.parquet"), 0..10), input(&dir.path().join("b.parquet"), 10..17)];
        let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
        let output = || WriterOptions {
            file_io: FileIO::new_with_fs(),
            dir: dir.path().join("out").display().to_string(),
            partition: 0,
            source_id: "t".into(),
            schema: Arc::new(schema()),
            target_size: 1 << 30,
            pages: crate::datafile::Pages::Zstd,
        };
        let spec = PartitionSpec::unpartition_spec();
        let all = rewrite_files(output(), &spec, &paths, None, None).await.unwrap();
        assert_eq!((all.len(), all[0].first_offset, all[0].last_offset, all[0].record_count()), (1, 0, 16, 17));
        assert_eq!(rows(&all), (0..17).map(|o| (o, o.to_string())).collect::<Vec<_>>());
        let kept = rewrite_files(output(), &spec, &paths, Some(&[(2, 4), (9, 11)]), None).await.unwrap();
        assert_eq!(rows(&kept), [2, 3, 4, 9, 10, 11].map(|o| (o, o.to_string())));
        assert!(rewrite_files(output(), &spec, &paths, Some(&[(100, 200)]), None).await.unwrap().is_empty());
        // Not Parquet: an error naming the file.
        std::fs::write(dir.path().join("bad.parquet"), b"not parquet").unwrap();
        let bad = dir.path().join("bad.parquet").display().to_string();
        let err = rewrite_files(output(), &spec, &[&bad], None, None).await.unwrap_err();
        assert!(err.to_string().contains("bad.parquet"), "{err}");
    }
}
