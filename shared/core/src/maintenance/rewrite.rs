//! A planned bin rewritten: its files read and written again into files of the target
//! size (`table/rewrite.rs`), less the rows other engines' delete files remove from them
//! and those past the topic's retention, as the CompactionTask that replaces them — where the
//! planner (`table/compaction.rs`, which knows tables, not tasks) meets the task contract.

use std::sync::Arc;

use iceberg::io::FileIO;
use iceberg::spec::TableMetadata;

use crate::datafile::{Pages, WriterOptions};
use crate::table::TableName;
use crate::table::compaction::{Bin, CompactionPolicy, Planned, bins, task_id};
use crate::table::left_out::{LeftOut, range_set};
use crate::table::rewrite::{Input, rewrite_applying};
use crate::task::{CompactionKind, CompactionTask, LeftOutFile, TaskFile, partitioned, task_version};

/// Rewrites `bin` (of `planned`, from the table's current snapshot) into files of its
/// partition under the table's data directory, the writer rolling at the target, named
/// with the task's id, leaving out the rows other engines' delete files remove from its
/// files: the CompactionTask replacing the bin's files with them.
pub async fn rewrite_bin(
    file_io: &FileIO,
    table: &TableName,
    metadata: &TableMetadata,
    policy: CompactionPolicy,
    planned: &Planned,
    bin: &Bin,
    now_ms: i64,
) -> iceberg::Result<CompactionTask> {
    let schema = metadata.current_schema().as_ref().clone();
    let spec = metadata.default_partition_spec().as_ref().clone();
    let partition_type = spec.partition_type(&schema)?;
    let task_id = task_id(table, metadata.current_snapshot_id(), bin);
    if let Some(f) = bin.files.iter().find(|f| planned.deletes.get(f.file_path()).is_some_and(|of| of.unread > 0)) {
        // The planner reads the deletes of every file it bins: rewriting without them
        // would bring their rows back.
        let detail = format!("the deletes applying to {} were not read before its rewrite", f.file_path());
        return Err(iceberg::Error::new(iceberg::ErrorKind::Unexpected, detail));
    }
    let inputs: Vec<Input> = bin
        .files
        .iter()
        .map(|f| Input {
            path: f.file_path(),
            deletes: planned.deletes.get(f.file_path()).map(|of| &of.deletes),
            expired: planned.expired.contains(f.file_path()),
        })
        .collect();
    let output = WriterOptions {
        file_io: file_io.clone(),
        dir: format!("{}/data", metadata.location()),
        partition: bin.kafka_partition,
        source_id: task_id.clone(),
        schema: Arc::new(schema.clone()),
        target_size: policy.target,
        pages: Pages::Zstd,
    };
    let rewritten = rewrite_applying(output, &spec, &inputs, planned.retention.as_ref()).await?;
    let added = rewritten
        .files
        .iter()
        .map(|f| TaskFile::from_written(f, &partition_type))
        .collect::<iceberg::Result<Vec<_>>>()?;
    let applied = bin.files.iter().filter_map(|f| planned.deletes.get(f.file_path())).flat_map(|of| of.files.clone());
    let deletes_applied = planned.table_deletes.applied(applied);
    let mut left_out = LeftOut::default();
    for (sets, offsets) in [(&mut left_out.deleted, rewritten.deleted), (&mut left_out.expired, rewritten.expired)] {
        if !offsets.is_empty() {
            sets.insert(bin.kafka_partition, range_set(offsets));
        }
    }
    let (deleted, expired) = left_out.counts();
    let left_out = match left_out.is_empty() {
        true => None,
        false => {
            let path = left_out.write(file_io, &format!("{}/metadata", metadata.location())).await?;
            Some(LeftOutFile { path, deleted, expired })
        }
    };
    tracing::info!(table = %table, task_id = %task_id, files = inputs.len(), bytes = bin.bytes(),
        outputs = added.len(), partition = ?bin.partition, kafka_partition = bin.kafka_partition,
        trigger = ?bin.trigger, delete_files = deletes_applied.len(), rows_deleted = deleted, rows_expired = expired,
        "bin compacted");
    let partition_spec = partitioned(&spec);
    Ok(CompactionTask {
        version: task_version(partition_spec.as_ref()),
        kind: CompactionKind::Compaction,
        task_id,
        table: table.clone(),
        removed: inputs.iter().map(|i| i.path.to_string()).collect(),
        added,
        schema,
        partition_spec,
        created_at_ms: now_ms,
        data_sequence_number: planned.sequence_number,
        deletes_applied,
        left_out,
        formats: Default::default(),
    })
}

/// Plans the table's current snapshot at `now_ms` (no retention) and rewrites every bin: one
/// CompactionTask per group's bins ([`bins`], [`rewrite_bin`]), none when there is
/// nothing to compact.
pub async fn compact(
    file_io: &FileIO,
    table: &TableName,
    metadata: &TableMetadata,
    policy: CompactionPolicy,
    now_ms: i64,
) -> iceberg::Result<Vec<CompactionTask>> {
    let planned = bins(file_io, metadata, policy, None, now_ms).await?;
    let mut tasks = Vec::new();
    for bin in &planned.bins {
        tasks.push(rewrite_bin(file_io, table, metadata, policy, &planned, bin, now_ms).await?);
    }
    Ok(tasks)
}
