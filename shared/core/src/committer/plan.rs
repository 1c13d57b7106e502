//! The committer's decisions as pure functions: what the table holds and a batch of tasks
//! in, a plan out — no I/O. [`super::Committer`] applies a plan (rewrites the files it
//! names, writes the state and the snapshot, swaps the catalog pointer) and plans again
//! on a conflict. The unit tests below are the exactly-once rules written as a
//! specification.
//!
//! ```text
//!  per task, in queue order:
//!    another topic's table            ─▶ failed (one table holds one topic)
//!    every offset already committed   ─▶ already committed: dropped (its files orphans)
//!    schema incompatible              ─▶ the whole batch fails: the table is suspended
//!    some offsets new                 ─▶ its files within them: added as written
//!                                        (rewritten when laid out by another spec)
//!                                        straddling committed offsets: trimmed to the new
//!                                        open transactions ─▶ pending in the table state
//!                                        (a part straddling committed offsets: its new
//!                                        offsets only, its files trimmed once committed)
//!                                        markers ─▶ the table state
//!                                        the new offsets ─▶ committed
//!  then the state resolves: COMMIT ⇒ the transaction's files added (new records now:
//!                                      the schema evolves by their columns' names)
//!                            ABORT ⇒ never
//! ```

use std::collections::{HashMap, HashSet};

use std::sync::Arc;

use iceberg::spec::{ListType, MapType, NestedField, NestedFieldRef, PartitionSpec, Schema, StructType, Type};

use super::{CommitError, TaskResult};
use crate::partition::same_layout;
use crate::schema::plan_above;
use crate::table::offsets::CommittedOffsets;
use crate::table::rowless::RowlessOffsets;
use crate::table::state::{MarkerEntry, PendingEntry, TableState};
use crate::task::{BadRecord, CommitTask, CompactionTask, OffsetRange, ResolveTask, TableName, TaskFile};

/// What Floe's last snapshot of a table says, and the table's current schema and spec.
#[derive(Debug, Clone)]
pub struct TableRecord {
    pub table: TableName,
    pub schema: Schema,
    /// The highest field id the table ever gave (new columns are numbered above it).
    pub last_column_id: i32,
    pub spec: PartitionSpec,
    pub offsets: CommittedOffsets,
    /// How many committed offsets have no row on purpose, and which are not counted.
    pub rowless: RowlessOffsets,
    pub state: TableState,
    /// Per dead-letter table of the state's queued dead letters, the highest number it
    /// holds ([`crate::table::dead_letters`]).
    pub published_dead_letters: HashMap<TableName, u64>,
    /// For a dead-letter table: the offsets its tasks' own tables hold
    /// ([`CommitTask::dead_letters_of`]). A record at one of them was decided there
    /// already (skipped, suspended or a dead letter), perhaps in another mode: its dead
    /// letter is not added again.
    pub decided_by: HashMap<TableName, CommittedOffsets>,
}

/// How a file was written: its schema, partition spec (`None`: unpartitioned), Kafka
/// partition and task (both name rewritten files).
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub schema: Schema,
    pub spec: Option<PartitionSpec>,
    pub partition: i32,
    pub task_id: String,
    /// `schema` with the table's field ids, when its own differ (a task materialized
    /// before the table existed numbers its fields itself): the file is rewritten with them.
    pub table_ids: Option<Schema>,
}

impl Written {
    pub(super) fn new(
        schema: &Schema,
        spec: Option<&PartitionSpec>,
        partition: i32,
        task_id: &str,
        table: &Schema,
    ) -> Result<Written, String> {
        Ok(Written {
            schema: schema.clone(),
            spec: spec.cloned(),
            partition,
            task_id: task_id.to_string(),
            table_ids: with_table_ids(schema, table)?,
        })
    }

    /// Whether the files are laid out by `spec` (recorded as they are).
    pub fn fits(&self, spec: &PartitionSpec) -> bool {
        same_layout(self.spec.as_ref().unwrap_or(&PartitionSpec::unpartition_spec()), spec)
    }

    /// The schema rewritten files are written with: the file's columns, the table's ids.
    pub fn rewrite_schema(&self) -> &Schema {
        self.table_ids.as_ref().unwrap_or(&self.schema)
    }

    /// What becomes of a file of these that keeps all its rows.
    fn action(&self, spec: &PartitionSpec) -> FileAction {
        match (self.table_ids.is_some(), self.fits(spec)) {
            (true, _) => FileAction::Renumber,
            (false, true) => FileAction::Adopt,
            (false, false) => FileAction::Relayout,
        }
    }
}

/// What becomes of one file the plan adds.
#[derive(Debug, Clone, PartialEq)]
pub enum FileAction {
    /// Recorded as written.
    Adopt,
    /// Rewritten by the table's partition spec (written under another one).
    Relayout,
    /// Rewritten with the table's field ids (its own name other columns), and by its spec.
    Renumber,
    /// Rewritten keeping only these offsets: the rest are committed already.
    Trim(Vec<(i64, i64)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct PlannedFile {
    pub file: TaskFile,
    pub written: Written,
    pub action: FileAction,
}

/// An append: the snapshot to write, and what became of each task.
#[derive(Debug, Clone)]
pub struct AppendPlan {
    pub results: Vec<(String, TaskResult)>,
    pub files: Vec<PlannedFile>,
    /// Every offset committed once the snapshot is in.
    pub offsets: CommittedOffsets,
    /// The count of offsets without rows once the snapshot is in.
    pub rowless: RowlessOffsets,
    /// The table state, when it changed (to be written and named by the snapshot).
    pub state: Option<TableState>,
    /// The evolved schema, when the tasks bring new fields.
    pub schema: Option<Schema>,
    /// Tasks whose offsets the snapshot commits.
    pub tasks: usize,
    pub skipped_records: u64,
    /// Transactions resolved by ABORT (for the log).
    pub aborted: Vec<PendingEntry>,
    /// Bad records of transactions resolved by COMMIT in mode `suspend`: the table is
    /// suspended once the snapshot is in.
    pub suspensions: Vec<Suspension>,
}

/// A bad record that suspends the table: its log key, partition, and where and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Suspension {
    pub topic: String,
    pub partition: i32,
    pub record: BadRecord,
}

impl AppendPlan {
    /// Whether there is a snapshot to write: only when a task brings new offsets (the
    /// state resolves the same way again next time otherwise).
    pub fn commits(&self) -> bool {
        self.tasks > 0
    }
}

/// Plans one append of `tasks` (one table's, in queue order) onto `record`: each task
/// refused (another topic's), dropped (its offsets all committed) or taken (its new
/// offsets' files, open transactions and markers), then the table state's transactions
/// resolved by what is committed now.
pub fn plan_append(record: &TableRecord, tasks: &[&CommitTask]) -> Result<AppendPlan, CommitError> {
    let mut draft = Draft::new(record);
    // One table holds one topic (any number of its incarnations): the one it holds, or the batch's first.
    let holder = draft.offsets.topic().map(str::to_string).or_else(|| tasks.first().map(|t| t.topic.clone()));
    for task in tasks {
        match holder.as_ref().filter(|h| **h != task.topic) {
            Some(holds) => draft.refuse(task, holds),
            None => draft.take(task)?,
        }
    }
    let aborted = draft.resolve_transactions()?;
    Ok(draft.finish(aborted))
}

/// Plans an operator's decision on a stranded transaction part ([`ResolveTask`]): its
/// records added (COMMIT) or counted without rows (ABORT), as a marker would have; the
/// rest of the table state resolved as any append resolves it. Refused, for good, when
/// the part may still meet its marker; nothing to commit when it is decided already.
pub fn plan_decision(record: &TableRecord, task: &ResolveTask) -> Result<AppendPlan, CommitError> {
    let mut draft = Draft::new(record);
    let part = draft.state.take_stranded(&draft.offsets, &task.topic, task.partition, task.first_offset);
    let mut aborted = match part {
        Err(refused) => {
            let refused = TaskResult::Failed { error: refused, retryable: false };
            draft.results.push((task.task_id.clone(), refused));
            return Ok(draft.finish(Vec::new()));
        }
        Ok(None) => {
            tracing::info!(table = %draft.table, task_id = %task.task_id, partition = task.partition,
                first_offset = task.first_offset, "no stranded part there: decided already");
            draft.results.push((task.task_id.clone(), TaskResult::AlreadyCommitted));
            return Ok(draft.finish(Vec::new()));
        }
        Ok(Some(entry)) if task.commit => {
            draft.commit_pending(&entry)?;
            Vec::new()
        }
        Ok(Some(entry)) => {
            draft.count_aborted(&entry);
            vec![entry]
        }
    };
    tracing::warn!(table = %draft.table, task_id = %task.task_id, partition = task.partition,
        first_offset = task.first_offset, commit = task.commit, "a stranded transaction decided by an operator");
    draft.tasks += 1;
    draft.results.push((task.task_id.clone(), TaskResult::Committed));
    aborted.extend(draft.resolve_transactions()?);
    Ok(draft.finish(aborted))
}

/// An append being planned: the table's record as the tasks taken so far leave it, and
/// what the plan has decided.
struct Draft<'a> {
    record: &'a TableRecord,
    table: String,
    offsets: CommittedOffsets,
    rowless: RowlessOffsets,
    state: TableState,
    schema: Schema,
    schema_changed: bool,
    results: Vec<(String, TaskResult)>,
    files: Vec<PlannedFile>,
    tasks: usize,
    skipped_records: u64,
    suspensions: Vec<Suspension>,
}

impl<'a> Draft<'a> {
    fn new(record: &'a TableRecord) -> Draft<'a> {
        Draft {
            record,
            table: record.table.to_string(),
            offsets: record.offsets.clone(),
            rowless: record.rowless.clone(),
            state: record.state.clone(),
            schema: record.schema.clone(),
            schema_changed: false,
            results: Vec::new(),
            files: Vec::new(),
            tasks: 0,
            skipped_records: 0,
            suspensions: Vec::new(),
        }
    }

    /// A task of another topic than the one the table holds (`holds`): failed, for good.
    fn refuse(&mut self, task: &CommitTask, holds: &str) {
        let table = &self.table;
        let error = crate::table::TableError::TopicClash {
            table: table.clone(),
            holds: holds.to_string(),
            topic: task.topic.clone(),
        };
        tracing::error!(table = %table, task_id = %task.task_id, topic = %task.topic, holds = %holds, "task refused: another topic's table");
        self.results.push((task.task_id.clone(), TaskResult::Failed { error: error.to_string(), retryable: false }));
    }

    /// A task of the table's topic: dropped when the table holds all its offsets; else
    /// its files of the offsets the table does not hold added, its open transactions and
    /// markers into the table state, those offsets committed.
    fn take(&mut self, task: &CommitTask) -> Result<(), CommitError> {
        let Some(range) = task.offsets else {
            self.results.push((task.task_id.clone(), TaskResult::AlreadyCommitted));
            return Ok(());
        };
        // The topic's incarnation: a topic re-created under its name restarts at offset 0.
        let log = self.offsets.log_of(&task.topic, task.source.topic_id.as_deref());
        let missing = self
            .offsets
            .get(&log, task.partition)
            .map_or_else(|| vec![(range.first, range.last)], |set| set.missing(range.first, range.last));
        let missing = self.undecided(task, missing);
        if missing.is_empty() {
            tracing::info!(table = %self.table, task_id = %task.task_id, partition = task.partition,
                first_offset = range.first, last_offset = range.last, "already committed: dropped");
            self.results.push((task.task_id.clone(), TaskResult::AlreadyCommitted));
            return Ok(());
        }
        let what = format!("task {}", task.task_id);
        self.evolve(&task.schema.iceberg, &what)?;
        check_file_offsets(&self.table, task, range)?;
        let schema = &task.schema;
        let written =
            self.written(&schema.iceberg, schema.partition_spec.as_ref(), task.partition, &task.task_id, &what)?;
        self.add_files(&task.data_files, &missing, &written);
        self.wait_open_transactions(task, &log, range, &missing);
        self.keep_markers(task, &log, range, &missing);
        count_without_rows(&mut self.rowless, &log, task, &missing);
        self.offsets.claim_log(&task.topic, task.source.topic_id.as_deref());
        for (first, last) in missing {
            self.offsets.insert(&log, task.partition, first, last);
        }
        self.tasks += 1;
        self.skipped_records += task.skipped_records;
        self.results.push((task.task_id.clone(), TaskResult::Committed));
        Ok(())
    }

    /// Of a dead-letter part's `missing` offsets, those its own table does not hold.
    fn undecided(&self, task: &CommitTask, missing: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
        let Some(main) = task.dead_letters_of.as_ref().and_then(|t| self.record.decided_by.get(t)) else {
            return missing;
        };
        let Some(held) = main.get(&main.log_of(&task.topic, task.source.topic_id.as_deref()), task.partition) else {
            return missing;
        };
        missing.into_iter().flat_map(|(first, last)| held.missing(first, last)).collect()
    }

    /// The table's schema evolved by `written`'s columns (`what` wrote them, for the error).
    fn evolve(&mut self, written: &Schema, what: &str) -> Result<(), CommitError> {
        self.schema_changed |= evolve(&mut self.schema, self.record, written).map_err(|reason| {
            CommitError::Incompatible { table: self.table.clone(), reason: format!("{what}: {reason}") }
        })?;
        Ok(())
    }

    /// How `what`'s files were written, against the table's schema as planned so far.
    fn written(
        &self,
        schema: &Schema,
        spec: Option<&PartitionSpec>,
        partition: i32,
        task_id: &str,
        what: &str,
    ) -> Result<Written, CommitError> {
        Written::new(schema, spec, partition, task_id, &self.schema).map_err(|reason| CommitError::Incompatible {
            table: self.table.clone(),
            reason: format!("{what}: {reason}"),
        })
    }

    /// `files` (written as `written` says) added, each with its rows of the offsets `keep`.
    fn add_files(&mut self, files: &[TaskFile], keep: &[(i64, i64)], written: &Written) {
        let layout_action = written.action(&self.record.spec);
        for file in files {
            if let Some(action) = file_action(file, keep, &layout_action) {
                self.files.push(PlannedFile { file: file.clone(), written: written.clone(), action });
            }
        }
    }

    /// The task's transactions still open at the end of its segment, waiting in the
    /// table state (a part re-uploaded with other boundaries: only its new offsets).
    fn wait_open_transactions(&mut self, task: &CommitTask, log: &str, range: OffsetRange, missing: &[(i64, i64)]) {
        for txn in &task.open_transactions {
            // Re-uploaded with other boundaries: the part keeps only its new offsets.
            let new = among(missing, txn.first_offset, txn.last_offset);
            if new.is_empty() {
                continue;
            }
            let whole = new == [(txn.first_offset, txn.last_offset)];
            self.state.pending.push(PendingEntry {
                topic: log.to_string(),
                partition: task.partition,
                task_id: task.task_id.clone(),
                segment_first: Some(range.first),
                transaction: txn.clone(),
                schema: task.schema.iceberg.clone(),
                partition_spec: task.schema.partition_spec.clone(),
                keep: (!whole).then_some(new),
                // Marked by the commit that writes the state (plans read no clock).
                pending_since_ms: None,
                transaction_timeout_ms: task.transaction_timeout_ms,
                dead_letter_table: task.dead_letter_table.clone().filter(|_| !txn.dead_letter_files.is_empty()),
            });
        }
    }

    /// The task's transaction markers at offsets the table does not hold, into the state.
    fn keep_markers(&mut self, task: &CommitTask, log: &str, range: OffsetRange, missing: &[(i64, i64)]) {
        for marker in &task.transaction_markers {
            if !among(missing, marker.offset, marker.offset).is_empty() {
                self.state.markers.push(MarkerEntry {
                    topic: log.to_string(),
                    partition: task.partition,
                    marker: *marker,
                    segment_first: range.first,
                    transaction_timeout_ms: task.transaction_timeout_ms,
                });
            }
        }
    }

    /// The state's transactions resolved by the offsets committed now: a COMMIT's files
    /// added (its dead letters queued, its bad record suspending the table in mode
    /// `suspend`), an ABORT's records counted without rows. Returns the aborted ones.
    fn resolve_transactions(&mut self) -> Result<Vec<PendingEntry>, CommitError> {
        let resolved = self.state.resolve(&self.offsets);
        self.state.drop_published(&self.record.published_dead_letters);
        for entry in &resolved.committed {
            self.commit_pending(entry)?;
        }
        for entry in &resolved.aborted {
            self.count_aborted(entry);
        }
        Ok(resolved.aborted)
    }

    /// A transaction resolved by COMMIT: its records become rows.
    fn commit_pending(&mut self, entry: &PendingEntry) -> Result<(), CommitError> {
        // Its bad records are dead letters now, on their way to their table (mode `dlq`);
        // in mode `suspend`, the first stops the table once this commit is in.
        let dead_letter_table = entry.dead_letter_table.clone().unwrap_or_else(|| self.record.table.dead_letters());
        self.state.queue_dead_letters(entry, dead_letter_table);
        if let Some(bad) = &entry.transaction.suspends_at {
            self.suspensions.push(Suspension {
                topic: entry.topic.clone(),
                partition: entry.partition,
                record: bad.clone(),
            });
        }
        // Its records become rows now: new records, their fields into the table's
        // columns by name (one another engine dropped or renamed since comes back new).
        let what = format!("pending transaction of task {}", entry.task_id);
        self.evolve(&entry.schema, &what)?;
        let written =
            self.written(&entry.schema, entry.partition_spec.as_ref(), entry.partition, &entry.task_id, &what)?;
        let txn = &entry.transaction;
        let keep = entry.keep.clone().unwrap_or_else(|| vec![(txn.first_offset, txn.last_offset)]);
        self.add_files(&txn.files, &keep, &written);
        Ok(())
    }

    /// A transaction resolved by ABORT: its records will never be rows, counted now
    /// unless its offsets are uncounted.
    fn count_aborted(&mut self, entry: &PendingEntry) {
        let txn = &entry.transaction;
        if entry.keep.is_none()
            && !self.rowless.is_uncounted(&entry.topic, entry.partition, txn.first_offset, txn.last_offset)
        {
            self.rowless.add(
                &entry.topic,
                entry.partition,
                txn.files.iter().map(|f| f.record_count).sum::<u64>() + txn.dead_letters(),
            );
        }
    }

    /// The plan: the state and schema only when they changed.
    fn finish(self, aborted: Vec<PendingEntry>) -> AppendPlan {
        let state_changed = self.state != self.record.state;
        AppendPlan {
            results: self.results,
            files: self.files,
            offsets: self.offsets,
            rowless: self.rowless,
            state: state_changed.then_some(self.state),
            schema: self.schema_changed.then_some(self.schema),
            tasks: self.tasks,
            skipped_records: self.skipped_records,
            aborted,
            suspensions: self.suspensions,
        }
    }
}

/// Checks that each of the task's files (and its open transactions') lies within the
/// task's offsets `range`.
fn check_file_offsets(table: &str, task: &CommitTask, range: OffsetRange) -> Result<(), CommitError> {
    let open = task.open_transactions.iter().flat_map(|t| t.files.iter().chain(&t.dead_letter_files));
    for file in task.data_files.iter().chain(open) {
        if file.first_offset < range.first || file.last_offset > range.last || file.first_offset > file.last_offset {
            return Err(CommitError::Task {
                table: table.to_string(),
                task_id: task.task_id.clone(),
                detail: format!(
                    "{} holds offsets {}..={}, outside the task's {}..={}",
                    file.path(),
                    file.first_offset,
                    file.last_offset,
                    range.first,
                    range.last
                ),
            });
        }
    }
    Ok(())
}

/// Counts the offsets `task` commits without rows in its `log` (`missing`: those it commits): its
/// count when it commits all of its offsets, else (part of them, or an older task
/// without a count) those it commits are uncounted.
fn count_without_rows(rowless: &mut RowlessOffsets, log: &str, task: &CommitTask, missing: &[(i64, i64)]) {
    let whole = task.offsets.is_some_and(|r| missing == [(r.first, r.last)]);
    match task.without_rows.filter(|_| whole) {
        Some(count) => rowless.add(log, task.partition, count),
        None => missing.iter().for_each(|&(first, last)| rowless.uncount(log, task.partition, first, last)),
    }
}

/// The offsets of `first..=last` among `ranges` (sorted, disjoint).
pub(super) fn among(ranges: &[(i64, i64)], first: i64, last: i64) -> Vec<(i64, i64)> {
    ranges.iter().map(|&(a, b)| (a.max(first), b.min(last))).filter(|(a, b)| a <= b).collect()
}

/// What becomes of `file` when only the offsets in `new` may be added: `whole` when all
/// of its are, trimmed to them when some are, nothing when none is.
fn file_action(file: &TaskFile, new: &[(i64, i64)], whole: &FileAction) -> Option<FileAction> {
    let keep = among(new, file.first_offset, file.last_offset);
    if keep.is_empty() {
        None
    } else if keep == [(file.first_offset, file.last_offset)] {
        Some(whole.clone())
    } else {
        Some(FileAction::Trim(keep))
    }
}

/// Evolves `schema` so it holds the columns of files `written` with (new ones numbered
/// above the table's last-column-id); whether it changed.
fn evolve(schema: &mut Schema, record: &TableRecord, written: &Schema) -> Result<bool, String> {
    if written.as_struct() == schema.as_struct() {
        return Ok(false);
    }
    let evolved = plan_above(Some(schema), record.last_column_id, written.as_struct()).map_err(|e| e.to_string())?;
    if evolved.changes.is_empty() {
        return Ok(false);
    }
    tracing::info!(table = %record.table, changes = ?evolved.changes, "schema evolves");
    *schema = evolved.schema;
    Ok(true)
}

/// What becomes of a compaction.
#[derive(Debug, Clone, PartialEq)]
pub enum CompactionVerdict {
    Accepted,
    Rejected(String),
}

/// Decides each compaction of a batch: accepted when all its inputs are in `live` (the
/// live data files) and not taken by an earlier one of the batch, `deletes` finds no
/// reason against it (another engine's delete file since its plan: see
/// [`crate::table::deletes::unapplied`]), and its files are laid out by the table's spec.
pub fn plan_compactions(
    live: &HashSet<String>,
    spec: &PartitionSpec,
    tasks: &[&CompactionTask],
    deletes: impl Fn(&CompactionTask) -> Option<String>,
) -> Vec<CompactionVerdict> {
    let mut taken: HashSet<&String> = HashSet::new();
    tasks
        .iter()
        .map(|task| {
            let gone: Vec<&String> = task.removed.iter().filter(|p| !live.contains(*p) || taken.contains(p)).collect();
            if !gone.is_empty() {
                return CompactionVerdict::Rejected(format!("{} input file(s) no longer live: {gone:?}", gone.len()));
            }
            if let Some(reason) = deletes(task) {
                return CompactionVerdict::Rejected(reason);
            }
            let task_spec = task.partition_spec.clone().unwrap_or_else(PartitionSpec::unpartition_spec);
            if !same_layout(&task_spec, spec) {
                return CompactionVerdict::Rejected(format!(
                    "its files are laid out by {}, the table by {}",
                    crate::partition::describe(&task_spec),
                    crate::partition::describe(spec)
                ));
            }
            taken.extend(task.removed.iter());
            CompactionVerdict::Accepted
        })
        .collect()
}

/// `written` with the field ids of `table`'s columns of the same names (by path: struct
/// fields by name, list elements, map keys and values), its own types kept; `None` when
/// the ids already agree. Every column of `written` must be in `table` (evolution has
/// added the new ones).
fn with_table_ids(written: &Schema, table: &Schema) -> Result<Option<Schema>, String> {
    let fields = struct_with_ids("", written.as_struct(), table.as_struct())?;
    if fields.iter().zip(written.as_struct().fields()).all(|(a, b)| a == b) {
        return Ok(None);
    }
    Schema::builder()
        .with_schema_id(written.schema_id())
        .with_fields(fields)
        .build()
        .map(Some)
        .map_err(|e| format!("renumbering the files' schema: {e}"))
}

fn struct_with_ids(path: &str, written: &StructType, table: &StructType) -> Result<Vec<NestedFieldRef>, String> {
    written
        .fields()
        .iter()
        .map(|field| {
            let name = if path.is_empty() { field.name.clone() } else { format!("{path}.{}", field.name) };
            let theirs = table
                .field_by_name(&field.name)
                .ok_or_else(|| format!("column {name:?} of the files is not in the table"))?;
            Ok(Arc::new(field_with_ids(&name, field, theirs)?))
        })
        .collect()
}

fn field_with_ids(name: &str, field: &NestedField, table: &NestedField) -> Result<NestedField, String> {
    let field_type = match (field.field_type.as_ref(), table.field_type.as_ref()) {
        (Type::Struct(w), Type::Struct(t)) => Type::Struct(StructType::new(struct_with_ids(name, w, t)?)),
        (Type::List(w), Type::List(t)) => {
            let element = field_with_ids(&format!("{name}.element"), &w.element_field, &t.element_field)?;
            Type::List(ListType::new(Arc::new(element)))
        }
        (Type::Map(w), Type::Map(t)) => {
            let key = field_with_ids(&format!("{name}.key"), &w.key_field, &t.key_field)?;
            let value = field_with_ids(&format!("{name}.value"), &w.value_field, &t.value_field)?;
            Type::Map(MapType::new(Arc::new(key), Arc::new(value)))
        }
        (Type::Primitive(_), Type::Primitive(_)) => field.field_type.as_ref().clone(),
        (ours, theirs) => return Err(format!("column {name:?} is {ours} in the files but {theirs} in the table")),
    };
    let mut out = field.clone();
    out.id = table.id;
    out.field_type = Box::new(field_type);
    Ok(out)
}

#[cfg(test)]
mod tests {
    //! The exactly-once rules, one table of cases per rule: a table record and tasks in,
    //! what the plan says out.

    use std::collections::BTreeMap;
    use std::sync::Arc;

    use iceberg::spec::PrimitiveType;

    use super::*;
    use crate::segment::{SegmentLayout, TxnMarker};
    use crate::task::{OffsetRange, PendingTransaction, SourceObject, TaskSchema};

    fn schema(extra: bool) -> Schema {
        let mut fields = vec![
            Arc::new(NestedField::optional(1, "offset", Type::Primitive(PrimitiveType::Long))),
            Arc::new(NestedField::optional(2, "value", Type::Primitive(PrimitiveType::Binary))),
        ];
        if extra {
            fields.push(Arc::new(NestedField::optional(3, "note", Type::Primitive(PrimitiveType::String))));
        }
        Schema::builder().with_fields(fields).build().unwrap()
    }

    fn file(first: i64, last: i64) -> TaskFile {
        TaskFile {
            first_offset: first,
            last_offset: last,
            record_count: (last - first + 1) as u64,
            data_file: serde_json::json!({"file_path": format!("file:///w/data/{first}-{last}.parquet")}),
        }
    }

    /// A segment of topic `orders`, partition 0, holding `first..=last` in one file.
    fn task(id: &str, first: i64, last: i64) -> CommitTask {
        CommitTask {
            formats: Default::default(),
            version: 1,
            task_id: id.into(),
            table: TableName { namespace: "kafka".into(), name: "orders".into() },
            dead_letter_table: None,
            topic: "orders".into(),
            partition: 0,
            offsets: Some(OffsetRange { first, last }),
            record_count: (last - first + 1) as u64,
            skipped_records: 0,
            without_rows: None,
            table_location: None,
            data_files: vec![file(first, last)],
            dead_letter_files: vec![],
            open_transactions: vec![],
            transaction_markers: vec![],
            transaction_timeout_ms: None,
            max_timestamp: None,
            schema: TaskSchema {
                key_format: "raw".into(),
                value_format: "raw".into(),
                iceberg: schema(false),
                partition_spec: None,
                format_version: None,
                upsert_key: None,
            },
            dead_letter_schema: None,
            source: SourceObject {
                uri: format!("s3://b/orders-0/{first}.log"),
                etag: None,
                size: 1,
                layout: SegmentLayout::BrokerLogDir,
                segment_id: None,
                topic_id: None,
                leader_epochs: BTreeMap::new(),
            },
            created_at_ms: 0,
            dead_letters_of: None,
        }
    }

    /// A segment whose records `part` belong to producer 7's open transaction.
    fn with_open(mut t: CommitTask, part: (i64, i64)) -> CommitTask {
        t.data_files.clear();
        t.open_transactions.push(PendingTransaction {
            producer_id: 7,
            producer_epoch: 0,
            first_offset: part.0,
            last_offset: part.1,
            records: (part.1 - part.0 + 1) as u64,
            files: vec![file(part.0, part.1)],
            ..Default::default()
        });
        t
    }

    fn with_marker(mut t: CommitTask, offset: i64, commit: bool) -> CommitTask {
        t.data_files.clear();
        t.transaction_markers.push(TxnMarker { producer_id: 7, producer_epoch: 0, offset, commit, timestamp: None });
        t
    }

    fn record(committed: &[(i64, i64)]) -> TableRecord {
        let mut offsets = CommittedOffsets::default();
        for &(a, b) in committed {
            offsets.insert("orders", 0, a, b);
        }
        TableRecord {
            table: TableName { namespace: "kafka".into(), name: "orders".into() },
            schema: schema(false),
            last_column_id: schema(false).highest_field_id(),
            spec: PartitionSpec::unpartition_spec(),
            offsets,
            decided_by: HashMap::new(),
            rowless: RowlessOffsets::default(),
            state: TableState::default(),
            published_dead_letters: HashMap::new(),
        }
    }

    fn results(plan: &AppendPlan) -> Vec<(&str, &TaskResult)> {
        plan.results.iter().map(|(id, r)| (id.as_str(), r)).collect()
    }

    fn actions(plan: &AppendPlan) -> Vec<(String, FileAction)> {
        plan.files.iter().map(|f| (f.file.path().rsplit('/').next().unwrap().to_string(), f.action.clone())).collect()
    }

    fn encoded(plan: &AppendPlan) -> String {
        plan.offsets.get("orders", 0).map(|s| s.encode()).unwrap_or_default()
    }

    /// Plans `tasks` onto a table holding `committed`, then commits what the plan says
    /// (its offsets and state) and returns both, for rules that take several batches.
    fn run(mut table: TableRecord, batches: &[Vec<CommitTask>]) -> (TableRecord, Vec<AppendPlan>) {
        let mut plans = Vec::new();
        for batch in batches {
            let refs: Vec<&CommitTask> = batch.iter().collect();
            let plan = plan_append(&table, &refs).unwrap();
            if plan.commits() {
                table.offsets = plan.offsets.clone();
                if let Some(state) = &plan.state {
                    table.state = state.clone();
                }
            }
            plans.push(plan);
        }
        (table, plans)
    }

    #[test]
    fn coverage_decides_what_is_committed() {
        use FileAction::*;
        use TaskResult::*;
        // (committed before, task offsets, result, files added, offsets after)
        type Case<'a> = (&'a [(i64, i64)], (i64, i64), TaskResult, Vec<(&'a str, FileAction)>, &'a str);
        let cases: &[Case] = &[
            (&[], (0, 9), Committed, vec![("0-9.parquet", Adopt)], "0-9"),
            // Delivered twice / committed before a crash: dropped, its files orphans.
            (&[(0, 9)], (0, 9), AlreadyCommitted, vec![], "0-9"),
            (&[(0, 99)], (10, 19), AlreadyCommitted, vec![], "0-99"),
            // Out of order: committed, the gap visible in the offsets.
            (&[(20, 29)], (0, 9), Committed, vec![("0-9.parquet", Adopt)], "0-9,20-29"),
            // Re-uploaded with other boundaries: only the new offsets.
            (&[(0, 14)], (10, 19), Committed, vec![("10-19.parquet", Trim(vec![(15, 19)]))], "0-19"),
            (&[(12, 14)], (10, 19), Committed, vec![("10-19.parquet", Trim(vec![(10, 11), (15, 19)]))], "10-19"),
        ];
        for (committed, (first, last), result, files, after) in cases {
            let t = task("t", *first, *last);
            let plan = plan_append(&record(committed), &[&t]).unwrap();
            assert_eq!(results(&plan), vec![("t", result)], "{committed:?} + {first}-{last}");
            let expected: Vec<(String, FileAction)> = files.iter().map(|(p, a)| (p.to_string(), a.clone())).collect();
            assert_eq!(actions(&plan), expected, "{committed:?} + {first}-{last}");
            assert_eq!(encoded(&plan), *after);
            assert_eq!(plan.commits(), *result == Committed);
        }
    }

    #[test]
    fn a_dead_letter_part_adds_only_offsets_its_own_table_has_not_decided() {
        use FileAction::*;
        use TaskResult::*;
        let main = TableName { namespace: "kafka".into(), name: "orders".into() };
        // The dead-letter table holds 0-4; the main table 0-14 (5-14 in mode `skip`).
        let mut dlq = record(&[(0, 4)]);
        dlq.decided_by.insert(main.clone(), record(&[(0, 14)]).offsets);
        let part = |first, last| CommitTask { dead_letters_of: Some(main.clone()), ..task("t", first, last) };
        // (task offsets, result, files added, the dead-letter table's offsets after)
        type Case<'a> = ((i64, i64), TaskResult, Vec<(&'a str, FileAction)>, &'a str);
        let cases: &[Case] = &[
            ((10, 19), Committed, vec![("10-19.parquet", Trim(vec![(15, 19)]))], "0-4,15-19"),
            ((5, 14), AlreadyCommitted, vec![], "0-4"),
            ((20, 29), Committed, vec![("20-29.parquet", Adopt)], "0-4,20-29"),
        ];
        for ((first, last), result, files, after) in cases {
            let plan = plan_append(&dlq, &[&part(*first, *last)]).unwrap();
            assert_eq!(results(&plan), vec![("t", result)], "{first}-{last}");
            let expected: Vec<(String, FileAction)> = files.iter().map(|(p, a)| (p.to_string(), a.clone())).collect();
            assert_eq!(actions(&plan), expected, "{first}-{last}");
            assert_eq!(encoded(&plan), *after, "{first}-{last}");
        }
        // A task of the main table itself is not held back by what the main table holds.
        let plan = plan_append(&dlq, &[&task("t", 10, 19)]).unwrap();
        assert_eq!(actions(&plan), vec![("10-19.parquet".to_string(), Adopt)]);
    }

    #[test]
    fn a_batch_with_duplicates_commits_each_offset_once() {
        let (a, a_again, b) = (task("a", 0, 9), task("a", 0, 9), task("b", 5, 14));
        let plan = plan_append(&record(&[]), &[&a, &a_again, &b]).unwrap();
        assert_eq!(
            results(&plan),
            vec![("a", &TaskResult::Committed), ("a", &TaskResult::AlreadyCommitted), ("b", &TaskResult::Committed)]
        );
        assert_eq!(
            actions(&plan),
            vec![("0-9.parquet".into(), FileAction::Adopt), ("5-14.parquet".into(), FileAction::Trim(vec![(10, 14)]))]
        );
        assert_eq!((encoded(&plan), plan.tasks), ("0-14".into(), 2));
    }

    #[test]
    fn another_topics_tasks_are_refused() {
        let mut other = task("x", 0, 9);
        other.topic = "orders_dlq".into();
        // The table holds `orders`: `orders_dlq` is refused, `orders` goes on.
        let plan = plan_append(&record(&[(0, 9)]), &[&other, &task("o", 10, 19)]).unwrap();
        assert!(
            matches!(&plan.results[0].1, TaskResult::Failed { retryable: false, error } if error.contains("orders_dlq"))
        );
        assert_eq!(plan.results[1].1, TaskResult::Committed);
        assert_eq!(plan.offsets.partitions.len(), 1);
        // A new table: the batch's first topic takes it.
        let plan = plan_append(&record(&[]), &[&task("o", 0, 9), &other]).unwrap();
        assert_eq!(plan.results[0].1, TaskResult::Committed);
        assert!(matches!(&plan.results[1].1, TaskResult::Failed { retryable: false, .. }));
    }

    #[test]
    fn a_re_created_topic_lands_in_a_log_of_its_own() {
        let of = |id: &str, topic_id: &str, first, last| {
            let mut t = task(id, first, last);
            t.source.topic_id = Some(topic_id.into());
            t
        };
        // The first incarnation: its id recorded, its offsets under the plain key.
        let (table, _) = run(record(&[]), &[vec![of("a0", "AAA", 0, 9), of("a1", "AAA", 10, 19)]]);
        assert_eq!(table.offsets.topic_ids.get("orders").map(String::as_str), Some("AAA"));
        // Deleted and created again: offsets restart at 0 and are new, not "already committed".
        let (table, plans) = run(table, &[vec![of("b0", "BBB", 0, 9), of("a1", "AAA", 10, 19)]]);
        assert_eq!(results(&plans[0]), vec![("b0", &TaskResult::Committed), ("a1", &TaskResult::AlreadyCommitted)]);
        assert_eq!(actions(&plans[0]), vec![("0-9.parquet".into(), FileAction::Adopt)]);
        assert_eq!(table.offsets.get("orders~BBB", 0).unwrap().encode(), "0-9");
        assert_eq!(table.offsets.get("orders", 0).unwrap().encode(), "0-19");
        // Each incarnation drops its own duplicates; a layout without ids is the first's.
        let plan = plan_append(&table, &[&of("b0", "BBB", 0, 9), &task("p", 20, 29)]).unwrap();
        assert_eq!(results(&plan), vec![("b0", &TaskResult::AlreadyCommitted), ("p", &TaskResult::Committed)]);
        // Its transactions are its own: producer 7's part in the new log, its marker in the old, no match.
        let part = with_open(of("b1", "BBB", 10, 19), (15, 19));
        let marker = with_marker(of("a2", "AAA", 20, 29), 25, true);
        let (table, plans) = run(table, &[vec![part, marker]]);
        assert!(plans[0].files.is_empty(), "{:?}", actions(&plans[0]));
        assert_eq!(table.state.pending.iter().map(|p| p.topic.as_str()).collect::<Vec<_>>(), ["orders~BBB"]);
    }

    #[test]
    fn schemas_evolve_or_stop_the_batch() {
        let mut wider = task("w", 0, 9);
        wider.schema.iceberg = schema(true);
        let plan = plan_append(&record(&[]), &[&wider]).unwrap();
        assert_eq!(plan.schema.as_ref().map(|s| s.highest_field_id()), Some(3), "the new optional field is added");
        // A type changed to one the table's cannot take: incompatible, nothing planned.
        let mut narrowed = task("n", 0, 9);
        narrowed.schema.iceberg = Schema::builder()
            .with_fields(vec![
                Arc::new(NestedField::optional(1, "offset", Type::Primitive(PrimitiveType::Long))),
                Arc::new(NestedField::optional(2, "value", Type::Primitive(PrimitiveType::Long))),
            ])
            .build()
            .unwrap();
        let error = plan_append(&record(&[]), &[&narrowed]).unwrap_err();
        assert!(matches!(error, CommitError::Incompatible { .. }), "{error}");
        // Already committed: its schema does not matter.
        assert_eq!(plan_append(&record(&[(0, 9)]), &[&narrowed]).unwrap().results[0].1, TaskResult::AlreadyCommitted);
    }

    /// A transaction pending when another engine renamed (`note` → `renamed`) or dropped
    /// a column its files hold: committed by its marker, its records are new records — the
    /// column comes back new under its name, an id above the last-column-id, its files
    /// renumbered to it (before: "column \"note\" of the files is not in the table", the
    /// table suspended).
    #[test]
    fn a_pending_transaction_s_column_renamed_or_dropped_meanwhile_comes_back_new() {
        let mut open = with_open(task("s0", 0, 9), (5, 9));
        open.schema.iceberg = schema(true);
        let mut before = record(&[]);
        (before.schema, before.last_column_id) = (schema(true), 3);
        let pending = plan_append(&before, &[&open]).unwrap().state.expect("the transaction pending");
        let mut renamed = schema(true).as_struct().fields().to_vec();
        renamed[2] = Arc::new(NestedField::optional(3, "renamed", Type::Primitive(PrimitiveType::String)));
        for changed in [Schema::builder().with_fields(renamed).build().unwrap(), schema(false)] {
            let mut after = record(&[(0, 9)]);
            (after.schema, after.last_column_id, after.state) = (changed.clone(), 3, pending.clone());
            let mut marker = with_marker(task("s1", 10, 19), 19, true);
            marker.schema.iceberg = changed;
            let plan = plan_append(&after, &[&marker]).unwrap();
            let evolved = plan.schema.as_ref().expect("the column back");
            assert_eq!(evolved.as_struct().field_by_name("note").map(|f| f.id), Some(4));
            assert_eq!(actions(&plan), [("5-9.parquet".to_string(), FileAction::Renumber)]);
        }
    }

    /// Producer 7's part 1005-1009 of a log starting at 1000, everything to 1099
    /// committed, and two of its markers (1050, 1090) gone from the state: stranded.
    fn stranded() -> TableRecord {
        let open = with_open(task("s0", 1000, 1009), (1005, 1009));
        let empty = record(&[]);
        let mut record = record(&[(1000, 1099)]);
        record.state = plan_append(&empty, &[&open]).unwrap().state.unwrap();
        let marker = TxnMarker { producer_id: 7, producer_epoch: 0, offset: 1090, commit: true, timestamp: None };
        let departed =
            crate::table::state::Departed { topic: "orders".into(), partition: 0, marker, below: Some(1050) };
        record.state.departed.push(departed);
        assert_eq!(record.state.stranded(&record.offsets).len(), 1);
        record
    }

    #[test]
    fn an_operator_s_decision_ends_a_stranded_part_as_its_marker_would_have() {
        let orders = TableName { namespace: "kafka".into(), name: "orders".into() };
        let decide = |commit| ResolveTask::new(orders.clone(), "orders", 0, 1005, commit);
        let (commit, abort) = (decide(true), decide(false));
        // Committed: its file added, the part gone from the state.
        let plan = plan_decision(&stranded(), &commit).unwrap();
        assert_eq!(results(&plan), vec![(commit.task_id.as_str(), &TaskResult::Committed)]);
        assert_eq!(actions(&plan), vec![("1005-1009.parquet".to_string(), FileAction::Adopt)]);
        assert!(plan.commits() && plan.state.as_ref().unwrap().pending.is_empty());
        // Aborted: no file, its records counted without rows.
        let aborted = plan_decision(&stranded(), &abort).unwrap();
        assert!(aborted.commits() && aborted.files.is_empty());
        assert_eq!(aborted.aborted.len(), 1);
        let mut rowless = stranded().rowless;
        rowless.add("orders", 0, 5);
        assert_eq!(aborted.rowless.to_summary().collect::<Vec<_>>(), rowless.to_summary().collect::<Vec<_>>());
        assert_ne!(aborted.rowless.to_summary().count(), 0);
        // Decided already: nothing to commit, and no error.
        let mut after = stranded();
        after.state = plan.state.unwrap();
        let again = plan_decision(&after, &commit).unwrap();
        assert_eq!(results(&again), vec![(commit.task_id.as_str(), &TaskResult::AlreadyCommitted)]);
        assert!(!again.commits());
        // A part that may still meet its marker: refused, for good.
        let mut waiting = stranded();
        waiting.state.departed.clear();
        let refused = plan_decision(&waiting, &commit).unwrap();
        assert!(!refused.commits());
        assert!(
            matches!(&refused.results[0].1, TaskResult::Failed { retryable: false, error } if error.contains("not stranded"))
        );
    }

    #[test]
    fn offsets_without_rows_are_counted_whole_tasks_only_and_aborted_records_at_the_abort() {
        let count = |plan: &AppendPlan| plan.rowless.get("orders", 0).cloned().unwrap_or_default();
        let counted = |t: CommitTask, n| CommitTask { without_rows: Some(n), ..t };
        // A whole new segment: its count; its open transaction's rows (5..=9) not yet.
        let plan = plan_append(&record(&[]), &[&counted(with_open(task("s0", 0, 9), (5, 9)), 2)]).unwrap();
        assert_eq!((count(&plan).count, count(&plan).uncounted.encode()), (2, String::new()));
        // ABORT: the transaction's 5 rows will never be: counted then (the marker's own
        // offset is in its segment's count).
        let mut after = record(&[(0, 9)]);
        (after.rowless, after.state) = (plan.rowless.clone(), plan.state.clone().unwrap());
        let plan = plan_append(&after, &[&counted(with_marker(task("s1", 10, 19), 19, false), 1)]).unwrap();
        assert_eq!(count(&plan).count, 2 + 1 + 5);
        // Re-uploaded with other boundaries (5..=14, 10..=14 new), or an older task: uncounted.
        let plan = plan_append(&record(&[(0, 9)]), &[&counted(task("s2", 5, 14), 1)]).unwrap();
        assert_eq!((count(&plan).count, count(&plan).uncounted.encode()), (0, "10-14".to_string()));
        let plan = plan_append(&record(&[]), &[&task("s3", 0, 9)]).unwrap();
        assert_eq!(count(&plan).uncounted.encode(), "0-9");
    }

    /// Producer 7's transaction (5..=9) with a bad record at 7: written as a dead letter
    /// (mode `dlq`), or remembered to suspend the table (mode `suspend`: written nowhere,
    /// an offset without a row counted with its segment's); its marker at 19.
    fn with_bad_record(suspend: bool) -> (CommitTask, CommitTask) {
        let mut open = with_open(task("s0", 0, 9), (5, 9));
        let txn = &mut open.open_transactions[0];
        txn.files = vec![file(5, 9)];
        txn.files[0].record_count = 4;
        if suspend {
            txn.suspends_at = Some(BadRecord { offset: 7, file: "s0.log".into(), error: "not Avro".into() });
        } else {
            txn.dead_letter_files = vec![file(7, 7)];
            open.dead_letter_table = Some(TableName { namespace: "kafka".into(), name: "orders_dlq".into() });
        }
        let without_rows = if suspend { 6 } else { 5 };
        (CommitTask { without_rows: Some(without_rows), ..open }, task("s1", 10, 19))
    }

    /// A bad record of a transaction counts only once it commits: its dead letter queued
    /// for the dead-letter table then (mode `dlq`) or the table suspended once the commit
    /// is in (mode `suspend`); on ABORT, nothing but offsets without rows; a queued dead
    /// letter leaves the queue once its table holds it.
    #[test]
    fn a_transaction_s_bad_records_count_only_once_it_commits() {
        let count = |plan: &AppendPlan| plan.rowless.get("orders", 0).cloned().unwrap_or_default().count;
        for (commit, suspend) in [(true, false), (true, true), (false, false), (false, true)] {
            let (open, rest) = with_bad_record(suspend);
            let first = plan_append(&record(&[]), &[&open]).unwrap();
            let pending = first.state.clone().unwrap();
            assert!(pending.dead_letters.is_empty() && first.suspensions.is_empty(), "nothing before the marker");
            let mut after = record(&[(0, 9)]);
            (after.rowless, after.state) = (first.rowless.clone(), pending);
            let marker = CommitTask { without_rows: Some(1), ..with_marker(rest.clone(), 19, commit) };
            let plan = plan_append(&after, &[&marker]).unwrap();
            let state = plan.state.clone().unwrap();
            let suspended: Vec<i64> = plan.suspensions.iter().map(|s| s.record.offset).collect();
            if !commit {
                assert!(state.dead_letters.is_empty() && suspended.is_empty(), "suspend {suspend}");
                assert_eq!(count(&plan), 5 + 1 + 4 + 1, "ABORT: its rows and its bad record never are");
                continue;
            }
            if suspend {
                assert_eq!((suspended, state.dead_letters.len()), (vec![7], 0));
                assert_eq!(count(&plan), 6 + 1, "the bad record: without a row, counted with its segment");
                continue;
            }
            assert_eq!(count(&plan), 5 + 1, "the dead letter is explained by its row in orders_dlq");
            let queued: Vec<_> =
                state.dead_letters.iter().map(|d| (d.seq, d.table.name.as_str(), d.keep.clone())).collect();
            assert_eq!((queued, suspended), (vec![(1, "orders_dlq", vec![(5, 9)])], vec![]));
            // Published: out of the queue at the table's next commit.
            let mut next = record(&[(0, 19)]);
            next.state = state;
            next.published_dead_letters.insert(TableName { namespace: "kafka".into(), name: "orders_dlq".into() }, 1);
            let plan = plan_append(&next, &[&task("s2", 20, 29)]).unwrap();
            assert!(plan.state.unwrap().dead_letters.is_empty());
        }
    }

    #[test]
    fn a_file_outside_its_task_is_refused() {
        let mut t = task("t", 0, 9);
        t.data_files = vec![file(5, 12)];
        assert!(matches!(plan_append(&record(&[]), &[&t]), Err(CommitError::Task { .. })));
    }

    /// Producer 7's transaction: a part in each of the first segments, the marker in the last.
    fn spanning(commit: bool) -> Vec<CommitTask> {
        vec![
            with_open(task("s0", 0, 9), (5, 9)),
            with_open(task("s1", 10, 19), (10, 15)),
            with_marker(task("s2", 20, 29), 29, commit),
        ]
    }

    #[test]
    fn transactions_across_segments_resolve_in_every_order() {
        for commit in [true, false] {
            for order in [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]] {
                let segments = spanning(commit);
                let batches: Vec<Vec<CommitTask>> = order.iter().map(|&i| vec![segments[i].clone()]).collect();
                let (table, plans) = run(record(&[]), &batches);
                let mut added: Vec<String> = plans.iter().flat_map(actions).map(|(p, _)| p).collect();
                added.sort();
                let expected: Vec<String> =
                    if commit { vec!["10-15.parquet".into(), "5-9.parquet".into()] } else { vec![] };
                assert_eq!(added, expected, "order {order:?}, commit {commit}");
                assert!(table.state.is_empty(), "order {order:?}: {:?}", table.state);
                assert_eq!(table.offsets.get("orders", 0).unwrap().encode(), "0-29");
            }
        }
    }

    #[test]
    fn a_re_cut_segment_s_open_part_adds_only_its_new_offsets() {
        use FileAction::*;
        // Producer 7's transaction: 9-12 in segment 0-12, 20-22 in segment 13-25, its
        // marker at 37; segment 11-25 is 13-25 re-cut, its part 11-22 straddling 0-12.
        let s0 = with_open(task("s0", 0, 12), (9, 12));
        let s1 = with_open(task("s1", 13, 25), (20, 22));
        let recut = with_open(task("recut", 11, 25), (11, 22));
        let marker = |commit| with_marker(task("m", 26, 39), 37, commit);
        type Case<'a> = (Vec<Vec<&'a CommitTask>>, Vec<(&'a str, FileAction)>);
        for commit in [true, false] {
            let m = marker(commit);
            // (batches, files added when the marker commits)
            let cases: Vec<Case> = vec![
                // Across batches, the part straddling committed offsets trimmed to the new.
                (vec![vec![&s0], vec![&recut], vec![&m]], vec![("9-12", Adopt), ("11-22", Trim(vec![(13, 22)]))]),
                // All in one batch.
                (vec![vec![&s0, &recut, &m]], vec![("9-12", Adopt), ("11-22", Trim(vec![(13, 22)]))]),
                // The re-cut copy first: the earlier segment's part is the one trimmed.
                (vec![vec![&recut], vec![&s0], vec![&m]], vec![("11-22", Adopt), ("9-12", Trim(vec![(9, 10)]))]),
                // Both copies of 13-25: whichever comes first, the other adds nothing.
                (vec![vec![&s0], vec![&recut, &s1, &m]], vec![("9-12", Adopt), ("11-22", Trim(vec![(13, 22)]))]),
                (vec![vec![&s0], vec![&s1, &recut, &m]], vec![("9-12", Adopt), ("20-22", Adopt)]),
            ];
            for (batches, expected) in cases {
                let batches: Vec<Vec<CommitTask>> =
                    batches.iter().map(|b| b.iter().map(|t| (*t).clone()).collect()).collect();
                let (table, plans) = run(record(&[]), &batches);
                let added: Vec<(String, FileAction)> = plans.iter().flat_map(actions).collect();
                let expected: Vec<(String, FileAction)> = if commit {
                    expected.into_iter().map(|(p, a)| (format!("{p}.parquet"), a)).collect()
                } else {
                    vec![]
                };
                let ids: Vec<Vec<&str>> =
                    batches.iter().map(|b| b.iter().map(|t| t.task_id.as_str()).collect()).collect();
                assert_eq!(added, expected, "{ids:?}, commit {commit}");
                assert!(table.state.is_empty(), "{ids:?}: {:?}", table.state);
                assert_eq!(table.offsets.get("orders", 0).unwrap().encode(), "0-39");
            }
        }
    }

    #[test]
    fn a_marker_before_its_transaction_waits_in_the_state() {
        let segments = spanning(true);
        let (table, plans) = run(record(&[]), &[vec![segments[2].clone()]]);
        assert!(plans[0].files.is_empty());
        assert_eq!(table.state.markers.len(), 1, "kept until the segments before it arrive");
        // Both parts in one later batch: both added.
        let (table, plans) = run(table, &[vec![segments[0].clone(), segments[1].clone()]]);
        assert_eq!(plans[0].files.len(), 2);
        assert!(table.state.is_empty());
    }

    #[test]
    fn the_topic_s_transaction_timeout_decides_when_a_marker_leaves() {
        // A log starting at 1000: producer 8's marker first, producer 7's two minutes
        // later. With a timeout of a minute (and the margin), 7's transaction cannot
        // reach below 8's marker; with Kafka's default it may.
        let segment = |timeout_ms: Option<u64>| {
            let mut t = task("s", 1000, 1009);
            t.data_files.clear();
            let at = |producer_id, offset, minutes: i64| TxnMarker {
                producer_id,
                producer_epoch: 0,
                offset,
                commit: true,
                timestamp: Some(minutes * 60_000),
            };
            t.transaction_markers = vec![at(8, 1000, 0), at(7, 1009, 7)];
            t.transaction_timeout_ms = timeout_ms;
            t
        };
        let left = |timeout_ms| {
            let (table, _) = run(record(&[]), &[vec![segment(timeout_ms)]]);
            table.state.markers.iter().map(|m| (m.marker.producer_id, m.transaction_timeout_ms)).collect::<Vec<_>>()
        };
        assert_eq!(left(Some(60_000)), vec![(8, Some(60_000))]);
        assert_eq!(left(None), vec![(8, None), (7, None)]);
    }

    #[test]
    fn stale_compactions_are_rejected() {
        let compaction = |id: &str, removed: &[&str]| CompactionTask {
            formats: Default::default(),
            version: 1,
            kind: crate::task::CompactionKind::Compaction,
            task_id: id.into(),
            table: TableName { namespace: "kafka".into(), name: "orders".into() },
            removed: removed.iter().map(|s| s.to_string()).collect(),
            added: vec![],
            schema: schema(false),
            partition_spec: None,
            created_at_ms: 0,
            data_sequence_number: None,
            deletes_applied: Vec::new(),
            left_out: None,
        };
        let live: HashSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let spec = PartitionSpec::unpartition_spec();
        let (ok, gone, taken) = (compaction("1", &["a", "b"]), compaction("2", &["c", "d"]), compaction("3", &["b"]));
        let verdicts = plan_compactions(&live, &spec, &[&ok, &gone, &taken], |_| None);
        assert_eq!(verdicts[0], CompactionVerdict::Accepted);
        assert!(matches!(&verdicts[1], CompactionVerdict::Rejected(r) if r.contains("\"d\"")));
        assert!(matches!(&verdicts[2], CompactionVerdict::Rejected(r) if r.contains("\"b\"")), "taken by the first");
        let deleted = plan_compactions(&live, &spec, &[&ok], |t| (t.task_id == "1").then(|| "a delete since".into()));
        assert_eq!(deleted, [CompactionVerdict::Rejected("a delete since".into())]);
    }

    /// `offset`, `items: list<long>`, [`meta: struct<tag>`,] `name`, numbered in order as a
    /// task materialized before its table exists numbers them.
    fn nested(with_meta: bool) -> Schema {
        let long = || Type::Primitive(PrimitiveType::Long);
        let mut id = 0;
        let mut next = || {
            id += 1;
            id
        };
        let mut fields = vec![Arc::new(NestedField::optional(next(), "offset", long()))];
        let (items, element) = (next(), next());
        fields.push(Arc::new(NestedField::optional(
            items,
            "items",
            Type::List(ListType::new(Arc::new(NestedField::list_element(element, long(), false)))),
        )));
        if with_meta {
            let (meta, tag) = (next(), next());
            let inner = vec![Arc::new(NestedField::optional(tag, "tag", Type::Primitive(PrimitiveType::String)))];
            fields.push(Arc::new(NestedField::optional(meta, "meta", Type::Struct(StructType::new(inner)))));
        }
        fields.push(Arc::new(NestedField::optional(next(), "name", Type::Primitive(PrimitiveType::String))));
        Schema::builder().with_fields(fields).build().unwrap()
    }

    #[test]
    fn files_numbered_before_the_table_existed_take_its_ids_in_either_order() {
        for (table_has_meta, task_has_meta) in [(false, true), (true, false)] {
            let mut table = record(&[(0, 9)]);
            table.schema = nested(table_has_meta);
            let mut t = task("t", 10, 19);
            t.schema.iceberg = nested(task_has_meta);
            let plan = plan_append(&table, &[&t]).unwrap();
            assert_eq!(plan.results[0].1, TaskResult::Committed, "a compatible change never suspends");
            let table_schema = plan.schema.clone().unwrap_or(table.schema.clone());
            let planned = &plan.files[0];
            assert_eq!(planned.action, FileAction::Renumber);
            let ids = planned.written.table_ids.as_ref().expect("rewritten with the table's ids");
            // Each column of the files is, by id, the table's column of the same name.
            for (id, name) in ids.field_id_to_name_map() {
                assert_eq!(table_schema.name_by_field_id(*id), Some(name.as_str()), "id {id}");
            }
            assert_eq!(ids.as_struct().fields().len(), t.schema.iceberg.as_struct().fields().len());
        }
        // The same numbering: adopted as written.
        let mut table = record(&[]);
        table.schema = nested(true);
        let mut t = task("t", 0, 9);
        t.schema.iceberg = nested(true);
        assert_eq!(plan_append(&table, &[&t]).unwrap().files[0].action, FileAction::Adopt);
    }
}
