//! Compaction: a table's compaction tasks → one `replace` snapshot, each task whose inputs
//! are all still live taken, the others rejected; position deletes committed since a
//! task's plan on its inputs carried onto its outputs (`table/deletes/carry.rs`; a task
//! whose cannot be is rejected); the delete files the taken ones applied that apply to
//! no data file left removed in the same snapshot, and the offsets of the rows they left
//! out added to the table state (for the audit).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use iceberg::spec::Operation;

use super::plan::{CompactionVerdict, plan_compactions};
use super::{BatchReport, CommitError, CommittedSnapshot, Committer, TaskResult};
use crate::lock::Lease;
use crate::lock::registry::{Activity, CompactionRecord, MaintenanceEvent};
use crate::retry::Retryable;
use crate::table::deletes::carry::{Carried, carry};
use crate::table::deletes::{LiveDelete, ScopedFile, droppable, live_files, since_plan, unpartitioned};
use crate::table::left_out::LeftOut;
use crate::table::snapshot::SnapshotChange;
use crate::table::state::{STATE_KEY, TableState};
use crate::table::{TableError, floe_summary, load};
use crate::task::{CompactionTask, LeftOutFile, TableName, retype_partition};

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
        let (data, deletes) = live_files(&self.file_io, metadata).await.map_err(&iceberg)?;
        let by_path: HashMap<&str, &ScopedFile> = data.iter().map(|f| (f.path(), f)).collect();
        let live: HashSet<String> = by_path.keys().map(|p| p.to_string()).collect();
        let global = |spec_id| unpartitioned(metadata, spec_id);
        // A delete committed since the plan, deleting by position from an input:
        // rewritten without it, its rows would come back. It is carried onto the outputs,
        // or the compaction is refused.
        let mut refused: HashMap<String, String> = HashMap::new();
        let mut carried: HashMap<String, Carried> = HashMap::new();
        for task in tasks {
            let inputs: Vec<&ScopedFile> =
                task.removed.iter().filter_map(|p| by_path.get(p.as_str()).copied()).collect();
            let outcome = match since_plan(&inputs, &deletes, &task.deletes_applied, task.data_sequence_number, global)
            {
                Err(reason) => Err(reason),
                Ok(new) if new.is_empty() => continue,
                Ok(new) => self.carry(metadata, task, &inputs, &new).await,
            };
            match outcome {
                Ok(c) => {
                    carried.insert(task.task_id.clone(), c);
                }
                Err(reason) => {
                    refused.insert(task.task_id.clone(), reason);
                }
            }
        }
        let spec = metadata.default_partition_spec();
        let verdicts = plan_compactions(&live, spec, tasks, |task| refused.get(&task.task_id).cloned());
        let mut results = Vec::new();
        let (mut removed, mut added, mut added_sequence) = (HashSet::new(), Vec::new(), HashMap::new());
        let (mut applied, mut left_out, mut added_deletes) = (Vec::new(), Vec::new(), Vec::new());
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
                if let Some(sequence) = task.data_sequence_number {
                    added_sequence.insert(file.file_path().to_string(), sequence);
                }
                added.push(
                    retype_partition(file, &task.schema, spec.spec_id(), &written_type, &table_type)
                        .map_err(&iceberg)?,
                );
            }
            removed.extend(task.removed.iter().cloned());
            applied.extend(task.deletes_applied.iter().cloned());
            if let Some(c) = carried.remove(&task.task_id) {
                tracing::info!(table = %table, task_id = %task.task_id, rows = c.rows, delete_files = c.applied.len(),
                    "deletes committed since the plan carried onto the outputs");
                applied.extend(c.applied);
                added_deletes.extend(c.deletes);
            }
            left_out.extend(task.left_out.iter());
            results.push((task.task_id.clone(), TaskResult::Committed));
        }
        if removed.is_empty() {
            return Ok((results, None));
        }
        let data_files_in = removed.len() as u64;
        let bytes_in =
            removed.iter().filter_map(|p| by_path.get(p.as_str())).map(|f| f.live.file.file_size_in_bytes()).sum();
        // The delete files applied that now apply to no data file left go too.
        let remaining: Vec<&ScopedFile> = data.iter().filter(|f| !removed.contains(f.path())).collect();
        let dropped = droppable(&applied, &deletes, &remaining, global);
        removed.extend(dropped.iter().cloned());
        let state_location = self.note_left_out(metadata, &left_out).await.map_err(&iceberg)?;
        // Offsets, pending transactions and the rest of Floe's record carry forward unchanged.
        let mut properties = floe_summary(metadata);
        properties.extend(state_location.map(|l| (STATE_KEY.to_string(), l)));
        let tasks_done = results.iter().filter(|(_, r)| *r == TaskResult::Committed).count();
        properties.insert("floe.compactions".into(), tasks_done.to_string());
        properties.insert("floe.committer".into(), self.owner.clone());
        properties.insert("floe.fencing".into(), lease.fencing.to_string());
        let (files, records) = (added.len(), added.iter().map(|f| f.record_count()).sum::<u64>());
        let bytes_out = added.iter().map(|f| f.file_size_in_bytes()).sum::<u64>();
        let files_in = data_files_in;
        let change = SnapshotChange {
            operation: Operation::Replace,
            added,
            added_deletes,
            added_sequence,
            removed,
            properties,
            new_schema: None,
        };
        let (snapshot_id, at_ms) = self.publish(&loaded, change, lease).await?;
        let rows_deleted: u64 = left_out.iter().map(|l| l.deleted).sum();
        let rows_expired: u64 = left_out.iter().map(|l| l.expired).sum();
        tracing::info!(table = %table, snapshot_id, compactions = tasks_done, files_in, bytes_in, files, bytes_out,
            rows_deleted, rows_expired, delete_files_dropped = dropped.len(), "compaction committed");
        let record = CompactionRecord {
            at_ms,
            files_in,
            bytes_in,
            files_out: files as u64,
            bytes_out,
            rows_deleted,
            rows_expired,
            delete_files_dropped: dropped.len() as u64,
        };
        self.note(table, MaintenanceEvent::Compacted(record)).await;
        let snapshot = CommittedSnapshot {
            table: table.clone(),
            snapshot_id,
            tasks: tasks_done,
            files,
            records,
            delete_files_dropped: dropped.len(),
        };
        Ok((results, Some(snapshot)))
    }

    /// Carries `new` (position deletes committed since `task`'s plan on its `inputs`)
    /// onto its outputs ([`crate::table::deletes::carry`]; deletion vectors on a v3
    /// table); `Err` says why it cannot be: a task without its plan's sequence number,
    /// rows without Kafka offsets.
    async fn carry(
        &self,
        metadata: &iceberg::spec::TableMetadata,
        task: &CompactionTask,
        inputs: &[&ScopedFile],
        new: &[(&LiveDelete, String)],
    ) -> Result<Carried, String> {
        let refuse = || {
            let (delete, input) = &new[0];
            format!("the delete file {} committed since the plan may delete rows of its input {input}", delete.path())
        };
        let schema = metadata.current_schema();
        let id = |name: &str| schema.field_by_name(name).map(|f| f.id);
        let (Some(partition), Some(offset)) = (id("_kafka.partition"), id("_kafka.offset")) else {
            return Err(refuse());
        };
        if task.data_sequence_number.is_none() {
            return Err(refuse());
        }
        let vectors = metadata.format_version() >= iceberg::spec::FormatVersion::V3;
        let spec = metadata.default_partition_spec();
        let outputs = task
            .added
            .iter()
            .map(|f| f.data_file(&task.schema, task.partition_spec.as_ref()))
            .collect::<iceberg::Result<Vec<_>>>()
            .map_err(|e| format!("{}: {e}", refuse()))?;
        let deletes: Vec<&LiveDelete> = new.iter().map(|(d, _)| *d).collect();
        let data_dir = format!("{}/data", metadata.location());
        carry(&self.file_io, (inputs, &outputs), &deletes, (partition, offset), (spec.spec_id(), vectors), &data_dir)
            .await
            .map_err(|e| format!("{}, and carrying it onto the outputs failed: {e}", refuse()))
    }

    /// Folds the files of the offsets the compactions left out (other engines' deletes
    /// applied, rows past the retention) into the table's ([`crate::table::left_out`]),
    /// which the table state names: the new state's location, `None` when they left none
    /// out (the state stays as it is).
    async fn note_left_out(
        &self,
        metadata: &iceberg::spec::TableMetadata,
        files: &[&LeftOutFile],
    ) -> iceberg::Result<Option<String>> {
        if files.is_empty() {
            return Ok(None);
        }
        let mut state = TableState::load(&self.file_io, floe_summary(metadata).get(STATE_KEY)).await?;
        let mut left_out = match &state.left_out {
            Some(path) => LeftOut::read(&self.file_io, path).await?,
            None => LeftOut::default(),
        };
        for file in files {
            left_out.add(&LeftOut::read(&self.file_io, &file.path).await?);
        }
        let dir = format!("{}/metadata", metadata.location());
        state.left_out = Some(left_out.write(&self.file_io, &dir).await?);
        state.save(&self.file_io, &dir).await.map(Some)
    }
}
