//! Compaction planning and rewriting: a table's small live files, grouped by partition
//! value (and Kafka partition), packed into bins of about the target size, each bin
//! rewritten into files of that partition; the result is a [`CompactionTask`] for the
//! committer, which applies it only if every input is still live.
//!
//! ```text
//!  live files ─▶ small ones (< ¾ target) ─▶ groups: (partition value, Kafka partition)
//!             ─▶ first-fit decreasing into bins ≤ target ─▶ bins of ≥ 2 files
//!             ─▶ rewrite_files (the table's spec) ─▶ CompactionTask {removed, added}
//! ```
//!
//! A bin never holds files of two partition values, so its outputs keep that value.
//! Grouping by Kafka partition too keeps each output's offsets from one Kafka partition
//! (output names carry the first offset, so they cannot collide) and its offset range
//! meaningful.

use std::collections::BTreeMap;
use std::sync::Arc;

use iceberg::io::FileIO;
use iceberg::spec::{DataFile, PrimitiveLiteral, Schema, Struct, TableMetadata};

use super::rewrite::rewrite_files;
use super::snapshot::live_data_files;
use crate::datafile::WriterOptions;
use crate::table::TableName;
use crate::task::{CompactionKind, CompactionTask, TaskFile, partitioned, task_version};

/// Files at least this fraction of the target (¾, Iceberg's `min-file-size-bytes`
/// default) are left as they are.
const SMALL_NUMERATOR: u64 = 3;
const SMALL_DENOMINATOR: u64 = 4;

/// Files to rewrite together: all of one partition value and one Kafka partition.
#[derive(Debug, Clone)]
pub struct Bin {
    pub partition: Struct,
    pub kafka_partition: i32,
    pub files: Vec<DataFile>,
}

impl Bin {
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.file_size_in_bytes()).sum()
    }
}

/// The Kafka partition every row of `file` has (from its `_kafka.partition` bounds).
fn kafka_partition(file: &DataFile, field_id: i32) -> Option<i32> {
    let (lower, upper) = (file.lower_bounds().get(&field_id)?, file.upper_bounds().get(&field_id)?);
    match (lower.literal(), upper.literal()) {
        (PrimitiveLiteral::Int(a), PrimitiveLiteral::Int(b)) if a == b => Some(*a),
        _ => None,
    }
}

/// Bins of small files: per (partition value, Kafka partition), packed first-fit
/// decreasing into bins of at most `target` bytes; only bins of two files or more. Files
/// whose Kafka partition is unknown (no bounds) are left alone.
pub fn plan(files: Vec<DataFile>, schema: &Schema, target: u64) -> Vec<Bin> {
    let Some(partition_field) = schema.field_by_name("_kafka.partition").map(|f| f.id) else {
        return Vec::new();
    };
    let small = target / SMALL_DENOMINATOR * SMALL_NUMERATOR;
    let mut groups: BTreeMap<(String, i32), (Struct, Vec<DataFile>)> = BTreeMap::new();
    for file in files.into_iter().filter(|f| f.file_size_in_bytes() < small) {
        let Some(kafka) = kafka_partition(&file, partition_field) else { continue };
        // Ordered by the value's text: plans (and output names) do not depend on hashing.
        let key = (format!("{:?}", file.partition()), kafka);
        groups.entry(key).or_insert_with(|| (file.partition().clone(), Vec::new())).1.push(file);
    }
    let mut bins = Vec::new();
    for ((_, kafka_partition), (partition, mut files)) in groups {
        files
            .sort_by(|a, b| b.file_size_in_bytes().cmp(&a.file_size_in_bytes()).then(a.file_path().cmp(b.file_path())));
        let mut open: Vec<Bin> = Vec::new();
        for file in files {
            let size = file.file_size_in_bytes();
            match open.iter_mut().find(|b| b.bytes() + size <= target) {
                Some(bin) => bin.files.push(file),
                None => open.push(Bin { partition: partition.clone(), kafka_partition, files: vec![file] }),
            }
        }
        bins.extend(open.into_iter().filter(|b| b.files.len() >= 2));
    }
    bins
}

/// Plans the table's current snapshot and rewrites every bin under its data directory;
/// `None` when there is nothing to compact. Output names carry `task_id`.
pub async fn compact(
    file_io: &FileIO,
    table: &TableName,
    metadata: &TableMetadata,
    target: u64,
    task_id: &str,
) -> iceberg::Result<Option<CompactionTask>> {
    let schema = metadata.current_schema().as_ref().clone();
    let spec = metadata.default_partition_spec().as_ref().clone();
    let partition_type = spec.partition_type(&schema)?;
    let bins = plan(live_data_files(file_io, metadata).await?, &schema, target);
    if bins.is_empty() {
        return Ok(None);
    }
    let dir = format!("{}/data", metadata.location());
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    for (i, bin) in bins.iter().enumerate() {
        let paths: Vec<&str> = bin.files.iter().map(|f| f.file_path()).collect();
        let output = WriterOptions {
            file_io: file_io.clone(),
            dir: dir.clone(),
            partition: bin.kafka_partition,
            source_id: format!("{task_id}-{i}"),
            schema: Arc::new(schema.clone()),
            target_size: target,
        };
        let written = rewrite_files(output, &spec, &paths, None).await?;
        tracing::info!(table = %table, files = paths.len(), bytes = bin.bytes(), outputs = written.len(),
            partition = ?bin.partition, kafka_partition = bin.kafka_partition, "bin compacted");
        removed.extend(paths.iter().map(|p| p.to_string()));
        for file in &written {
            added.push(TaskFile::from_written(file, &partition_type)?);
        }
    }
    let partition_spec = partitioned(&spec);
    Ok(Some(CompactionTask {
        version: task_version(partition_spec.as_ref()),
        kind: CompactionKind::Compaction,
        task_id: task_id.to_string(),
        table: table.clone(),
        removed,
        added,
        schema,
        partition_spec,
        created_at_ms: chrono::Utc::now().timestamp_millis(),
    }))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat, Datum, Literal};

    use super::*;
    use crate::partition::tests::schema;

    fn file(name: &str, day: Option<i32>, kafka: i32, size: u64) -> DataFile {
        let bounds = HashMap::from([(2, Datum::int(kafka))]);
        DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(format!("memory:///t/data/{name}.parquet"))
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::from_iter([day.map(Literal::date)]))
            .record_count(1)
            .file_size_in_bytes(size)
            .lower_bounds(bounds.clone())
            .upper_bounds(bounds)
            .build()
            .unwrap()
    }

    #[test]
    fn bins_never_mix_partition_values_or_kafka_partitions() {
        let files = vec![
            file("a", Some(1), 0, 40),
            file("b", Some(1), 0, 50),
            file("c", Some(1), 0, 30),
            file("d", Some(2), 0, 10),
            file("e", Some(2), 0, 10),
            file("f", Some(1), 1, 10),
            file("g", None, 0, 10),
            file("h", None, 0, 10),
            file("big", Some(1), 0, 90),
            file("alone", Some(3), 0, 10),
        ];
        let bins = plan(files, &schema(), 100);
        let got: Vec<(Option<Literal>, i32, Vec<String>)> = bins
            .iter()
            .map(|b| {
                let names = b.files.iter().map(|f| f.file_path().rsplit('/').next().unwrap().replace(".parquet", ""));
                (b.partition[0].clone(), b.kafka_partition, names.collect())
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (None, 0, vec!["g".into(), "h".into()]),
                // Day 1, Kafka partition 0: 50 + 40 fit, 30 starts a bin of its own (dropped: one file).
                (Some(Literal::date(1)), 0, vec!["b".into(), "a".into()]),
                (Some(Literal::date(2)), 0, vec!["d".into(), "e".into()]),
            ]
        );
        assert!(bins.iter().all(|b| b.bytes() <= 100));
    }
}
