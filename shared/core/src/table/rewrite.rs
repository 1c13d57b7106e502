//! Rewriting data files: several into one (compaction), or one keeping only some Kafka
//! offsets (trimming).
//!
//! The same offsets can reach the committer twice with different segment boundaries
//! (a leader change re-uploads part of a log). Only the offsets the table does not hold
//! yet may be committed, so a file straddling the boundary is read back, filtered on
//! `_kafka.offset` and written again under a new name; the original stays unreferenced.
//! Compaction reads small files and writes their rows, unchanged, into files of the
//! target size. Rows are streamed batch by batch: memory holds one input file's bytes.
//!
//! Rewritten files are laid out by the table's partition spec, the partition values
//! computed from the rows again: a trimmed file keeps its partition value, compacted
//! files of one partition stay in it, and a file written under another spec (a task
//! from before the table existed with its spec) is split into the table's partitions.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{BooleanArray, RecordBatch};
use iceberg::spec::PartitionSpec;
use iceberg::{Error, ErrorKind, Result};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::datafile::{TableWriter, WriterOptions, WrittenFile, offset_column};

fn invalid(path: &str, detail: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::DataInvalid, format!("rewriting {path}: {detail}"))
}

/// Writes the rows of `paths` (all of them, or those whose offset lies in `keep`) as
/// `output` says: files of about its target size under its `dir` (the table's data
/// directory; partitions go below it), named with its `source_id` (a tag), laid out by
/// `spec` (bound to its schema) — one file at least per partition value the rows have,
/// none when no row is kept. Trimming is one path with `keep` and no size limit.
pub async fn rewrite_files(
    output: WriterOptions,
    spec: &PartitionSpec,
    paths: &[&str],
    keep: Option<&[(i64, i64)]>,
) -> Result<Vec<WrittenFile>> {
    let file_io = output.file_io.clone();
    let target = Arc::new(iceberg::arrow::schema_to_arrow_schema(&output.schema)?);
    let mut writer = TableWriter::new(output, Arc::new(spec.clone()))?;
    for path in paths {
        let bytes = file_io.new_input(path)?.read().await?;
        let reader =
            ParquetRecordBatchReaderBuilder::try_new(bytes).and_then(|b| b.build()).map_err(|e| invalid(path, e))?;
        for batch in reader {
            let batch = batch.map_err(|e| invalid(path, e))?;
            let offsets = offset_column(&batch).ok_or_else(|| invalid(path, "no _kafka.offset column"))?.clone();
            let (batch, offsets) = match keep {
                None => (batch, offsets),
                Some(keep) => {
                    let mask: BooleanArray = offsets
                        .iter()
                        .map(|o| Some(o.is_some_and(|o| keep.iter().any(|&(a, b)| a <= o && o <= b))))
                        .collect();
                    let kept = arrow::compute::filter_record_batch(&batch, &mask).map_err(|e| invalid(path, e))?;
                    let offsets = arrow::compute::filter(&offsets, &mask).map_err(|e| invalid(path, e))?;
                    (kept, offsets.as_primitive::<Int64Type>().clone())
                }
            };
            if batch.num_rows() == 0 {
                continue;
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
            writer.write(&batch, first, last).await?;
        }
    }
    writer.close().await
}
