//! Publishing the dead letters of committed transactions: after a commit of a table whose
//! state queues some, each is copied under its dead-letter table's location and appended
//! there in one snapshot that records the highest number added
//! ([`crate::table::dead_letters`] draws the protocol).

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use iceberg::spec::Operation;

use super::layout::TableLayout;
use super::plan::{FileAction, PlannedFile, Written, among};
use super::{CommitError, Committer};
use crate::lock::Lease;
use crate::lock::registry::Activity;
use crate::schema::layout::dead_letter_struct;
use crate::table::dead_letters::{DueDeadLetters, published, published_by, published_entry};
use crate::table::snapshot::SnapshotChange;
use crate::table::state::{STATE_KEY, TableState};
use crate::table::{LoadedTable, TableError, floe_summary, load};
use crate::task::{CommitTask, TableName, TaskFile, TaskSchema};
use crate::vocabulary::Formats;

impl Committer {
    /// Per dead-letter table of `state`'s queue, the highest number it holds from `main`.
    pub(super) async fn published_dead_letters(
        &self,
        main: &LoadedTable,
        state: &TableState,
    ) -> Result<HashMap<TableName, u64>, CommitError> {
        Ok(published_by(self.catalog.as_ref(), &self.file_io, main, state).await?)
    }

    /// Adds the dead letters `main`'s state queues to their tables. Best effort: one not
    /// added stays queued (status shows it) and is added after the table's next commit.
    pub(super) async fn publish_dead_letters(&self, main: &TableName, deadline: Option<Instant>) {
        let due = match self.queued_dead_letters(main).await {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!(table = %main, error = %e, "reading the dead letters to publish failed; they stay queued");
                return;
            }
        };
        let Some((uuid, due)) = due else { return };
        let mut by_table: BTreeMap<TableName, Vec<DueDeadLetters>> = BTreeMap::new();
        for d in due {
            by_table.entry(d.table.clone()).or_default().push(d);
        }
        for (table, entries) in by_table {
            let mut lease = match self.acquire(&table).await {
                Ok(lease) => lease,
                Err((error, _)) => {
                    tracing::warn!(table = %table, from = %main, %error, "dead letters stay queued");
                    continue;
                }
            };
            let outcome = self
                .guarded_attempts(&table, &mut lease, deadline, async |lease| {
                    self.try_publish(&table, main, &uuid, &entries, lease).await
                })
                .await;
            self.release(&table, &lease).await;
            self.note_outcome(&table, Activity::Commit, &outcome).await;
            if let Err(e) = outcome {
                tracing::error!(table = %table, from = %main, error = %e, "publishing dead letters failed; they stay queued");
            }
        }
    }

    /// `main`'s UUID and the dead letters its state queues; `None` when it queues none.
    async fn queued_dead_letters(
        &self,
        main: &TableName,
    ) -> Result<Option<(String, Vec<DueDeadLetters>)>, CommitError> {
        let Some(loaded) = load(self.catalog.as_ref(), &self.file_io, main).await? else { return Ok(None) };
        let state = TableState::load(&self.file_io, floe_summary(&loaded.metadata).get(STATE_KEY))
            .await
            .map_err(TableError::iceberg(main))?;
        Ok((!state.dead_letters.is_empty()).then(|| (loaded.metadata.uuid().to_string(), state.dead_letters)))
    }

    /// One attempt: the entries the dead-letter table does not hold yet, copied and
    /// appended with the new highest number.
    async fn try_publish(
        &self,
        table: &TableName,
        main: &TableName,
        main_uuid: &str,
        entries: &[DueDeadLetters],
        lease: &mut Lease,
    ) -> Result<(), CommitError> {
        let iceberg = TableError::iceberg(table);
        let written_schema = crate::schema::plan(None, &dead_letter_struct())
            .map_err(|e| CommitError::Internal { table: table.to_string(), detail: e.to_string() })?
            .schema;
        let schema = TaskSchema {
            key_format: String::new(),
            value_format: String::new(),
            iceberg: written_schema.clone(),
            partition_spec: None,
            format_version: None,
            upsert_key: None,
        };
        let loaded = self.load_or_create(table, &schema, Formats::default(), None).await?;
        let metadata = &loaded.metadata;
        let mut properties = floe_summary(metadata);
        let holds = published(&properties, main, main_uuid);
        let new: Vec<&DueDeadLetters> = entries.iter().filter(|d| d.seq > holds).collect();
        let Some(last) = new.iter().map(|d| d.seq).max() else { return Ok(()) };
        let layout = TableLayout::of(&self.file_io, metadata);
        let mut added = Vec::new();
        for d in &new {
            let written = Written::new(&written_schema, None, d.partition, &d.task_id, metadata.current_schema())
                .map_err(|reason| CommitError::Incompatible { table: table.to_string(), reason })?;
            for file in &d.files {
                // Copied (its rows of the kept offsets): the dead-letter table keeps files
                // under its own location, and the original goes with the table state.
                let keep = among(&d.keep, file.first_offset, file.last_offset);
                if keep.is_empty() {
                    continue;
                }
                let planned =
                    PlannedFile { file: file.clone(), written: written.clone(), action: FileAction::Trim(keep) };
                added.extend(layout.adopt(&planned, metadata.current_schema()).await.map_err(&iceberg)?);
            }
        }
        let (entry, value) = published_entry(main, main_uuid, last);
        properties.insert(entry, value);
        properties.insert("floe.committer".into(), self.owner.clone());
        properties.insert("floe.fencing".into(), lease.fencing.to_string());
        let records: u64 = added.iter().map(|f| f.record_count()).sum();
        let change = SnapshotChange {
            operation: Operation::Append,
            added,
            added_deletes: Vec::new(),
            added_sequence: Default::default(),
            removed: Default::default(),
            properties,
            new_schema: None,
        };
        let (snapshot_id, _) = self.publish(&loaded, change, lease).await?;
        tracing::info!(table = %table, from = %main, snapshot_id, records, up_to = last,
            "dead letters of committed transactions published");
        Ok(())
    }
}

/// The part of a task for its dead-letter table, when it has dead letters.
pub(super) fn dead_letter_task(task: &CommitTask) -> Option<CommitTask> {
    let (table, schema) = (task.dead_letter_table.clone()?, task.dead_letter_schema.clone()?);
    if task.dead_letter_files.is_empty() {
        return None;
    }
    let mut dlq = task.clone();
    dlq.table = table;
    dlq.dead_letters_of = Some(task.table.clone());
    // Written under the dead-letter table's location, not the main table's.
    dlq.table_location = None;
    dlq.data_files = task.dead_letter_files.clone();
    dlq.dead_letter_files = Vec::new();
    dlq.open_transactions = Vec::new();
    dlq.transaction_markers = Vec::new();
    dlq.schema.iceberg = schema;
    dlq.schema.partition_spec = None;
    // Dead letters are an append table's rows, whatever the topic's mode.
    dlq.schema.upsert_key = None;
    dlq.record_count = task.dead_letter_files.iter().map(|f: &TaskFile| f.record_count).sum();
    // The dead-letter table has rows for its dead letters only: every other offset of
    // the segment is without a row there.
    let span = task.offsets.and_then(|r| u64::try_from(r.last.checked_sub(r.first)?.checked_add(1)?).ok());
    dlq.without_rows = span.and_then(|span| span.checked_sub(dlq.record_count));
    Some(dlq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::tests::task;

    /// An upsert topic's dead letters go to an append table: the part for the
    /// dead-letter table is keyed on nothing (keyed, its commit would look for
    /// `_kafka.tombstone` there and fail).
    #[test]
    fn an_upsert_topic_s_dead_letters_are_an_append_table_s() {
        let schema = crate::partition::tests::schema();
        let file = TaskFile { first_offset: 0, last_offset: 9, record_count: 1, data_file: serde_json::json!({}) };
        let mut main = task(&schema, None, file);
        main.schema.upsert_key = Some(vec!["_kafka.key".into()]);
        main.dead_letter_table = Some(TableName { namespace: "kafka".into(), name: "orders_dlq".into() });
        main.dead_letter_schema = Some(schema.clone());
        main.dead_letter_files = main.data_files.clone();
        let dlq = dead_letter_task(&main).expect("a part for the dead-letter table");
        assert_eq!((dlq.table.name.as_str(), dlq.schema.upsert_key), ("orders_dlq", None));
    }
}
