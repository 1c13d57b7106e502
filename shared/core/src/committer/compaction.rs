//! Compaction: a table's compaction tasks → one `replace` snapshot, each task whose inputs
//! are all still live (and no delete file applies to them) taken, the others rejected.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use iceberg::spec::Operation;

use super::plan::{CompactionVerdict, plan_compactions};
use super::{BatchReport, CommitError, CommittedSnapshot, Committer, TaskResult};
use crate::lock::Lease;
use crate::lock::registry::{Activity, CompactionRecord, MaintenanceEvent};
use crate::retry::Retryable;
use crate::table::deletes::rewritable_files;
use crate::table::snapshot::{SnapshotChange, live_data_files};
use crate::table::{TableError, floe_summary, load};
use crate::task::{CompactionTask, TableName, retype_partition};

impl Committer {
    /// Applies compactions, per table in one `replace` snapshot: each whose inputs are all
    /// live, without another engine's delete file applying to them (one added since the
    /// plan), and not taken by an earlier one of the batch; the others are rejected.
    /// Different tables are committed concurrently (see [`Committer::concurrency`]).
    pub async fn compact(&self, tasks: &[CompactionTask], deadline: Option<Instant>) -> BatchReport {
        self.commit_lanes(&tasks.iter().collect::<Vec<_>>(), &[], deadline).await
    }

    /// One table's compactions in one `replace` snapshot, under the table's lease.
    pub(super) async fn compact_table(
        &self,
        table: &TableName,
        tasks: &[&CompactionTask],
        deadline: Option<Instant>,
    ) -> (Vec<(String, TaskResult)>, Option<CommittedSnapshot>) {
        let fail_all = |error: String, retryable: bool| {
            let results =
                tasks.iter().map(|t| (t.task_id.clone(), TaskResult::Failed { error: error.clone(), retryable }));
            (results.collect(), None)
        };
        let mut lease = match self.acquire(table).await {
            Ok(lease) => lease,
            Err((error, retryable)) => return fail_all(error, retryable),
        };
        let outcome = self
            .guarded_attempts(table, &mut lease, deadline, async |lease| self.try_compact(table, tasks, lease).await)
            .await;
        self.release(table, &lease).await;
        self.note_outcome(table, Activity::Compaction, &outcome).await;
        match outcome {
            Ok(done) => done,
            Err(e) => {
                tracing::error!(table = %table, error = %e, "compaction commit failed");
                fail_all(e.to_string(), e.retryable())
            }
        }
    }

    async fn try_compact(
        &self,
        table: &TableName,
        tasks: &[&CompactionTask],
        lease: &mut Lease,
    ) -> Result<(Vec<(String, TaskResult)>, Option<CommittedSnapshot>), CommitError> {
        let iceberg = TableError::iceberg(table);
        let loaded = load(self.catalog.as_ref(), &self.file_io, table).await?.ok_or_else(|| CommitError::Task {
            table: table.to_string(),
            task_id: tasks[0].task_id.clone(),
            detail: "compaction of a table that does not exist".into(),
        })?;
        let metadata = &loaded.metadata;
        let sizes: HashMap<String, u64> = live_data_files(&self.file_io, metadata)
            .await
            .map_err(&iceberg)?
            .iter()
            .map(|f| (f.file_path().to_string(), f.file_size_in_bytes()))
            .collect();
        // An input another engine's delete file now applies to (deleted since the plan)
        // counts as gone: rewritten, its deleted rows would come back.
        let (rewritable, _) = rewritable_files(&self.file_io, metadata).await.map_err(&iceberg)?;
        let live: HashSet<String> = rewritable.iter().map(|f| f.file.file_path().to_string()).collect();
        let spec = metadata.default_partition_spec();
        let verdicts = plan_compactions(&live, spec, tasks);
        let mut results = Vec::new();
        let (mut removed, mut added) = (HashSet::new(), Vec::new());
        // Planned before a promotion committed since: partition values of the new type.
        let table_type = spec.partition_type(metadata.current_schema()).map_err(&iceberg)?;
        for (task, verdict) in tasks.iter().zip(verdicts) {
            if let CompactionVerdict::Rejected(reason) = verdict {
                tracing::warn!(table = %table, task_id = %task.task_id, %reason, "compaction rejected");
                results.push((task.task_id.clone(), TaskResult::Rejected { reason }));
                continue;
            }
            let written_type = spec.partition_type(&task.schema).map_err(&iceberg)?;
            for file in &task.added {
                let file = file.data_file(&task.schema, task.partition_spec.as_ref()).map_err(&iceberg)?;
                added.push(
                    retype_partition(file, &task.schema, spec.spec_id(), &written_type, &table_type)
                        .map_err(&iceberg)?,
                );
            }
            removed.extend(task.removed.iter().cloned());
            results.push((task.task_id.clone(), TaskResult::Committed));
        }
        if removed.is_empty() {
            return Ok((results, None));
        }
        // Offsets, pending transactions and the rest of Floe's record carry forward unchanged.
        let mut properties = floe_summary(metadata);
        let tasks_done = results.iter().filter(|(_, r)| *r == TaskResult::Committed).count();
        properties.insert("floe.compactions".into(), tasks_done.to_string());
        properties.insert("floe.committer".into(), self.owner.clone());
        properties.insert("floe.fencing".into(), lease.fencing.to_string());
        let (files, records) = (added.len(), added.iter().map(|f| f.record_count()).sum::<u64>());
        let bytes_out = added.iter().map(|f| f.file_size_in_bytes()).sum::<u64>();
        let bytes_in = removed.iter().filter_map(|p| sizes.get(p)).sum::<u64>();
        let files_in = removed.len() as u64;
        let change = SnapshotChange { operation: Operation::Replace, added, removed, properties, new_schema: None };
        let (snapshot_id, at_ms) = self.publish(&loaded, change, lease).await?;
        tracing::info!(table = %table, snapshot_id, compactions = tasks_done, files_in, bytes_in, files, bytes_out,
            "compaction committed");
        let record = CompactionRecord { at_ms, files_in, bytes_in, files_out: files as u64, bytes_out };
        self.note(table, MaintenanceEvent::Compacted(record)).await;
        let snapshot = CommittedSnapshot { table: table.clone(), snapshot_id, tasks: tasks_done, files, records };
        Ok((results, Some(snapshot)))
    }
}
