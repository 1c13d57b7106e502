//! Appending new data: a table's tasks → one `append` snapshot of their files, offsets
//! and transaction state ([`super::plan::plan_append`] decides; this applies), under the
//! table's lease, after its tasks' dead-letter tables.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use iceberg::spec::{DataFile, Operation, Schema};

use super::layout::TableLayout;
use super::plan::{self, AppendPlan, FileAction, TableRecord, plan_append};
use super::{BatchReport, CommitError, CommittedSnapshot, Committer, TaskResult};
use crate::catalog::split::{self, is_delta_only};
use crate::lock::Lease;
use crate::lock::registry::Activity;
use crate::metrics;
use crate::retry::Retryable;
use crate::table::keys;
use crate::table::keys::LIVE_KEYS;
use crate::table::snapshot::SnapshotChange;
use crate::table::state::STATE_KEY;
use crate::table::{LoadedTable, TableError, floe_summary, load};
use crate::task::{CommitTask, ResolveTask, SuspendTask, TableName};

impl Committer {
    /// Commits a batch; one snapshot per table at most (plus one per dead-letter table),
    /// a task's dead-letter table before its main table. Different tables are committed
    /// concurrently (see [`Committer::concurrency`]).
    pub async fn commit(&self, tasks: &[CommitTask], deadline: Option<Instant>) -> BatchReport {
        self.commit_lanes(&[], &tasks.iter().collect::<Vec<_>>(), deadline).await
    }

    pub(super) async fn commit_table(
        &self,
        table: &TableName,
        tasks: &[&CommitTask],
        deadline: Option<Instant>,
    ) -> (Vec<(String, TaskResult)>, Option<CommittedSnapshot>) {
        let ids: Vec<&str> = tasks.iter().map(|t| t.task_id.as_str()).collect();
        self.append(table, &ids, deadline, async |lease| self.try_commit(table, tasks, lease).await).await
    }

    /// An operator's decision on a stranded transaction part: one snapshot of the table,
    /// under its lease ([`plan::plan_decision`]).
    pub(super) async fn decide(&self, task: &ResolveTask, deadline: Option<Instant>) -> TaskResult {
        let table = &task.table;
        let attempt = async |lease: &mut Lease| {
            let missing = || CommitError::Task {
                table: table.to_string(),
                task_id: task.task_id.clone(),
                detail: "no such table".into(),
            };
            let loaded = load(self.catalog.as_ref(), &self.file_io, table).await?.ok_or_else(missing)?;
            let record = self.record(&loaded).await?;
            let plan = plan::plan_decision(&record, task)?;
            self.append_planned(&loaded, &record, plan, &[], lease).await
        };
        let (mut results, _) = self.append(table, &[&task.task_id], deadline, attempt).await;
        results.pop().map_or(TaskResult::AlreadyCommitted, |(_, result)| result)
    }

    /// Runs `attempt` (one append of `table` for the tasks `ids`) under the table's
    /// lease, retried on conflicts, then what follows the commit: dead letters
    /// published, suspensions. A failure fails every task.
    async fn append(
        &self,
        table: &TableName,
        ids: &[&str],
        deadline: Option<Instant>,
        attempt: impl AsyncFnMut(&mut Lease) -> Result<Appended, CommitError>,
    ) -> (Vec<(String, TaskResult)>, Option<CommittedSnapshot>) {
        let fail_all = |error: String, retryable: bool| {
            let results =
                ids.iter().map(|id| (id.to_string(), TaskResult::Failed { error: error.clone(), retryable })).collect();
            (results, None)
        };
        let key = table.to_string();
        match self.locks.suspended(&key).await {
            Ok(Some(reason)) => return fail_all(format!("{table} is suspended: {reason}"), false),
            Ok(None) => {}
            Err(e) => return fail_all(e.to_string(), e.retryable()),
        }
        let started = Instant::now();
        let mut lease = match self.acquire(table).await {
            Ok(lease) => lease,
            Err((error, retryable)) => return fail_all(error, retryable),
        };
        let outcome = self.guarded_attempts(table, &mut lease, deadline, attempt).await;
        self.release(table, &lease).await;
        metrics::record_table(&metrics::COMMIT_LATENCY, &key, started.elapsed().as_secs_f64() * 1000.0);
        if outcome.is_err() {
            metrics::record_table(&metrics::COMMIT_FAILURES, &key, ids.len() as f64);
        }
        self.note_outcome(table, Activity::Commit, &outcome).await;
        if let Ok(appended) = &outcome {
            self.note_refusals(table, &appended.results).await;
        }
        match outcome {
            Ok(appended) => {
                if appended.dead_letters_queued {
                    self.publish_dead_letters(table, deadline).await;
                }
                for s in &appended.suspensions {
                    let (topic, bad) = (crate::table::offsets::topic_of(&s.topic), &s.record);
                    let suspend =
                        SuspendTask::new(table.clone(), topic, s.partition, bad.offset, &bad.file, &bad.error);
                    if let TaskResult::Failed { error, .. } = self.suspend(&suspend).await {
                        tracing::error!(table = %table, offset = bad.offset, %error,
                            "a committed transaction's bad record could not suspend the table");
                    }
                }
                (appended.results, appended.snapshot)
            }
            Err(CommitError::Incompatible { table: t, reason }) => {
                tracing::error!(table = %t, %reason, "incompatible schema: table suspended, its tasks kept");
                if let Err(e) = self.locks.set_suspended(&key, Some(&reason)).await {
                    return fail_all(format!("suspending {t}: {e}"), true);
                }
                fail_all(format!("{t} suspended: {reason}"), false)
            }
            Err(e) => {
                tracing::error!(table = %table, error = %e, retryable = e.retryable(), "commit failed");
                fail_all(e.to_string(), e.retryable())
            }
        }
    }

    /// One attempt: load, plan, apply, swap.
    async fn try_commit(
        &self,
        table: &TableName,
        tasks: &[&CommitTask],
        lease: &mut Lease,
    ) -> Result<Appended, CommitError> {
        let written_at = tasks.iter().find_map(|t| t.table_location.as_deref());
        let loaded = self.load_or_create(table, &tasks[0].schema, tasks[0].formats, written_at).await?;
        same_key(&loaded, tasks)?;
        if is_delta_only(&loaded.metadata) {
            self.note_delta_only(table);
        }
        let ids: Vec<(i32, String)> = topic_ids(tasks).collect();
        if let Some(reason) =
            keys::recreated(&self.file_io, &loaded.metadata, &ids).await.map_err(TableError::iceberg(table))?
        {
            return Err(CommitError::Incompatible { table: table.to_string(), reason });
        }
        let mut record = self.record(&loaded).await?;
        record.decided_by = self.decided_by(tasks).await?;
        let plan = plan_append(&record, tasks)?;
        self.append_planned(&loaded, &record, plan, tasks, lease).await
    }

    /// Applies and publishes `plan` (of `tasks`, none for an operator's decision), when it
    /// commits anything.
    async fn append_planned(
        &self,
        loaded: &LoadedTable,
        record: &TableRecord,
        mut plan: AppendPlan,
        tasks: &[&CommitTask],
        lease: &mut Lease,
    ) -> Result<Appended, CommitError> {
        let table = &loaded.name;
        if !plan.commits() {
            // Dead letters a commit queued and could not publish: published now.
            let dead_letters_queued = record.state.dead_letters_waiting(&record.published_dead_letters) > 0;
            return Ok(Appended { results: plan.results, dead_letters_queued, ..Appended::default() });
        }
        if let Some(state) = &mut plan.state {
            // For status: how long each part has waited for its marker (wall clock).
            state.mark_pending_since(crate::lock::now_ms());
        }
        let mut change = self.apply(loaded, &plan, &topic_ids(tasks).collect(), lease).await?;
        if let Some(newest) = newest_committed(tasks, &plan.results) {
            change.properties.insert(crate::table::MAX_TIMESTAMP_KEY.into(), newest.to_string());
        }
        // What the topic lists now: a table keeps the formats it was made with, and
        // status says so when the topic's differ (`health::formats_warning`).
        if let Some(task) = tasks.first() {
            change.properties.insert(split::TOPIC_FORMATS_KEY.into(), split::formats_text(task.formats));
        }
        let (files, records) = (change.added.len(), change.added.iter().map(|f| f.record_count()).sum::<u64>());
        let (snapshot_id, at_ms) = self.publish(loaded, change, lease).await?;
        tracing::info!(table = %table, snapshot_id, tasks = plan.tasks, files, records, "committed");
        record_commit(table, tasks, &plan.results, records, at_ms);
        let snapshot = CommittedSnapshot {
            table: table.clone(),
            snapshot_id,
            tasks: plan.tasks,
            files,
            records,
            delete_files_dropped: 0,
        };
        let state = plan.state.as_ref().unwrap_or(&record.state);
        Ok(Appended {
            results: plan.results,
            snapshot: Some(snapshot),
            dead_letters_queued: !state.dead_letters.is_empty(),
            suspensions: plan.suspensions,
        })
    }

    /// Does what `plan` says short of the snapshot: rewrites the files it rewrites (under
    /// names new to this attempt), writes the table state; returns the snapshot's change.
    async fn apply(
        &self,
        loaded: &LoadedTable,
        plan: &AppendPlan,
        topic_ids: &BTreeMap<i32, String>,
        lease: &Lease,
    ) -> Result<SnapshotChange, CommitError> {
        let (table, metadata) = (&loaded.name, &loaded.metadata);
        let iceberg = TableError::iceberg(table);
        let schema = plan.schema.as_ref().unwrap_or(metadata.current_schema().as_ref());
        let layout = TableLayout::of(&self.file_io, metadata);
        let mut added: Vec<DataFile> = Vec::new();
        for planned in &plan.files {
            added.extend(layout.adopt(planned, schema).await.map_err(&iceberg)?);
            if let FileAction::Trim(keep) = &planned.action {
                tracing::info!(table = %table, task_id = %planned.written.task_id, file = planned.file.path(), ?keep,
                    "file trimmed to the offsets the table does not hold");
            }
        }
        for entry in &plan.aborted {
            tracing::info!(table = %table, producer_id = entry.transaction.producer_id,
                records = entry.transaction.records, "aborted transaction: its files are never added");
        }
        let mut properties: HashMap<String, String> = plan.offsets.to_summary().collect();
        properties.extend(plan.rowless.to_summary());
        let state_location = match &plan.state {
            None => floe_summary(metadata).get(STATE_KEY).cloned(),
            Some(state) if state.is_empty() => None,
            Some(state) => {
                Some(state.save(&self.file_io, &format!("{}/metadata", metadata.location())).await.map_err(&iceberg)?)
            }
        };
        properties.extend(state_location.map(|l| (STATE_KEY.to_string(), l)));
        let (added_deletes, replaced) = match keys::table_key(metadata).map_err(&iceberg)? {
            Some(key) => self.upsert(loaded, schema, (&added, topic_ids), &key, &mut properties).await?,
            None => Default::default(),
        };
        properties.insert("floe.tasks".into(), plan.tasks.to_string());
        if plan.skipped_records > 0 {
            properties.insert("floe.skipped-records".into(), plan.skipped_records.to_string());
        }
        properties.insert("floe.committer".into(), self.owner.clone());
        properties.insert("floe.fencing".into(), lease.fencing.to_string());
        Ok(SnapshotChange {
            // Rows deleted with the rows added: an overwrite, as Iceberg names a
            // merge-on-read upsert.
            operation: if added_deletes.is_empty() { Operation::Append } else { Operation::Overwrite },
            added,
            added_deletes,
            added_sequence: Default::default(),
            removed: replaced.into_iter().collect(),
            properties,
            new_schema: plan.schema.clone(),
        })
    }

    /// An append to an upsert table keyed on `key`: its rows resolved against the key
    /// index (`table/keys`), the index after named in `properties`; returns the position
    /// delete files (deletion vectors, v3) to add with the data, and the vectors they
    /// replace.
    async fn upsert(
        &self,
        loaded: &LoadedTable,
        schema: &Schema,
        (added, topic_ids): (&[DataFile], &BTreeMap<i32, String>),
        key: &[String],
        properties: &mut HashMap<String, String>,
    ) -> Result<(Vec<(i32, DataFile)>, Vec<String>), CommitError> {
        let (table, metadata) = (&loaded.name, &loaded.metadata);
        let summary = floe_summary(metadata);
        let previous = summary.get(keys::KEYS_KEY).cloned();
        if added.is_empty() {
            // Nothing to resolve: the index and its count carry forward.
            for key in [keys::KEYS_KEY, LIVE_KEYS] {
                properties.extend(summary.get(key).map(|v| (key.to_string(), v.clone())));
            }
            return Ok(Default::default());
        }
        let upserted = keys::upsert(&self.file_io, metadata, schema, added, key, (previous.as_deref(), topic_ids))
            .await
            .map_err(TableError::iceberg(table))?;
        tracing::info!(table = %table, inserted = upserted.inserted, updated = upserted.updated,
            deleted = upserted.deleted, rows_deleted = upserted.rows_deleted, live_keys = upserted.live_keys,
            delete_files = upserted.deletes.len(), "upsert resolved");
        properties.insert(keys::KEYS_KEY.into(), upserted.root);
        properties.insert(LIVE_KEYS.into(), upserted.live_keys.to_string());
        Ok((upserted.deletes, upserted.replaced))
    }
}

/// The partition and topic id of each of `tasks`' segments (those whose layout carries one).
fn topic_ids<'a>(tasks: &'a [&CommitTask]) -> impl Iterator<Item = (i32, String)> + 'a {
    tasks.iter().filter_map(|t| Some((t.partition, t.source.topic_id.clone()?)))
}

/// Every task is keyed as the table is: an upsert table takes tasks of its key, an
/// append table append tasks. Else the topic's `mode` or key changed under a table
/// that exists, which no commit can reconcile: the table is suspended, saying so.
fn same_key(loaded: &LoadedTable, tasks: &[&CommitTask]) -> Result<(), CommitError> {
    let table_key = keys::table_key(&loaded.metadata).map_err(TableError::iceberg(&loaded.name))?;
    let Some(task) = tasks.iter().find(|t| t.schema.upsert_key != table_key) else { return Ok(()) };
    let reason = match (&table_key, &task.schema.upsert_key) {
        (None, _) => "the table is an append table; mode = \"upsert\" needs a new table".to_string(),
        (Some(key), None) => format!("the table is an upsert table keyed on {key:?}; its topic's tasks are append"),
        (Some(key), Some(other)) => format!("the table is keyed on {key:?}, task {} on {other:?}", task.task_id),
    };
    Err(CommitError::Incompatible { table: loaded.name.to_string(), reason })
}

/// What an append did, and what follows it once the table's lease is released.
#[derive(Debug, Default)]
struct Appended {
    results: Vec<(String, TaskResult)>,
    snapshot: Option<CommittedSnapshot>,
    /// The table state queues dead letters for their table.
    dead_letters_queued: bool,
    /// Bad records of committed transactions that suspend the table (mode `suspend`).
    suspensions: Vec<plan::Suspension>,
}

/// The metrics of an append committed at `at_ms`: its rows, the freshness lag of the
/// newest record of the tasks it committed (tasks from before timestamps were carried
/// give none), and the processing delay of the oldest of those tasks (since the
/// materializer made it: a backfill of old records is not delayed).
fn record_commit(table: &TableName, tasks: &[&CommitTask], results: &[(String, TaskResult)], records: u64, at_ms: i64) {
    let key = table.to_string();
    let seconds = |since: i64| (at_ms - since).max(0) as f64 / 1000.0;
    metrics::record_table(&metrics::RECORDS_COMMITTED, &key, records as f64);
    if let Some(newest) = newest_committed(tasks, results) {
        metrics::record_table(&metrics::FRESHNESS_LAG, &key, seconds(newest));
    }
    if let Some(oldest) = committed(tasks, results).map(|t| t.created_at_ms).filter(|&at| at > 0).min() {
        metrics::record_table(&metrics::PROCESSING_DELAY, &key, seconds(oldest));
    }
}

/// The tasks `results` says were committed.
fn committed<'a>(
    tasks: &'a [&'a CommitTask],
    results: &'a [(String, TaskResult)],
) -> impl Iterator<Item = &'a CommitTask> + 'a {
    let is_committed = |t: &&&CommitTask| results.iter().any(|(id, r)| *id == t.task_id && *r == TaskResult::Committed);
    tasks.iter().filter(is_committed).copied()
}

/// The newest record timestamp of the tasks `results` says were committed (tasks from
/// before timestamps were carried give none).
fn newest_committed(tasks: &[&CommitTask], results: &[(String, TaskResult)]) -> Option<i64> {
    committed(tasks, results).filter_map(|t| t.max_timestamp).max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Recorder, scope};

    #[tokio::test]
    async fn a_backfill_of_old_records_is_late_but_not_delayed() {
        const DAY_MS: i64 = 24 * 60 * 60 * 1000;
        let at_ms = 100 * DAY_MS;
        let file = crate::task::TaskFile {
            first_offset: 0,
            last_offset: 0,
            record_count: 1,
            data_file: serde_json::json!({"file_path": "/w/a.parquet"}),
        };
        let mut old = crate::task::tests::task(&crate::partition::tests::schema(), None, file);
        // Records 30 days old, their segment materialized 2 s before the commit.
        (old.max_timestamp, old.created_at_ms) = (Some(at_ms - 30 * DAY_MS), at_ms - 2_000);
        let mut dropped = old.clone();
        (dropped.task_id, dropped.created_at_ms) = ("t2".into(), at_ms - DAY_MS);
        let results = [("t1".to_string(), TaskResult::Committed), ("t2".to_string(), TaskResult::AlreadyCommitted)];
        let table = old.table.clone();
        let recorder = Recorder::new();
        scope(recorder.clone(), async { record_commit(&table, &[&old, &dropped], &results, 1, at_ms) }).await;
        let of = |metric| recorder.value(metric, &[(metrics::TABLE, "kafka.orders")]);
        assert_eq!(of(&metrics::FRESHNESS_LAG), Some(30.0 * 86_400.0));
        assert_eq!(of(&metrics::PROCESSING_DELAY), Some(2.0), "the committed task's, from its materialization");
    }
}
