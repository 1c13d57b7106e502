//! A table's Delta mirror brought in step after the batch's commits to it, when its
//! tasks' topic lists Delta (`formats`, carried by each task): [`crate::delta::mirror`]
//! from the table as it is now.
//!
//! ```text
//!  lane done (compactions, new data) ─ a task lists Delta? ─ no ─▶ nothing
//!    │ load the table ─▶ mirror (no lease: put-if-absent and the Iceberg sequence
//!    │                   number recorded in the Delta log keep racing mirrors right)
//!    │                   ─▶ registered by name (`<table>_delta`, Glue), once per committer
//!    ├─ ok ─▶ status: Delta failing no more
//!    ├─ retryable failure ─▶ the lane's committed data tasks fail, retryable: the
//!    │                       queue brings them back, their offsets are found in the
//!    │                       Iceberg table, and the mirror runs again (a crash between
//!    │                       the two commits converges the same way)
//!    └─ other failure (a type Delta lacks, equality deletes waiting for compaction, a
//!                      damaged log) ─▶ status: Delta failing, with the error; the
//!                      Iceberg table goes on, and each later commit tries again
//! ```

use super::{CommitError, Committer, TaskResult};
use crate::delta::{Mirrored, delta_name, mirror};
use crate::lock::registry::Activity;
use crate::retry::Retryable;
use crate::table::{LoadedTable, load};
use crate::task::TableName;

impl Committer {
    /// Notes `table` as a Delta-only topic's: its Delta table is its only one.
    pub(super) fn note_delta_only(&self, table: &TableName) {
        if let Ok(mut set) = self.delta_only.lock() {
            set.insert(table.clone());
        }
    }

    /// Whether `table`'s Delta table is to be brought in step after its lane: a task's
    /// topic lists Delta, or the table is a Delta-only topic's (whatever its topic lists
    /// now).
    pub(super) fn mirrors(&self, table: &TableName, topic_lists_delta: bool) -> bool {
        topic_lists_delta || self.delta_only.lock().map(|set| set.contains(table)).unwrap_or(false)
    }

    /// Mirrors `table` into its Delta table; on a retryable failure, the committed tasks
    /// among `results` are failed (retryable) so that they come back.
    pub(super) async fn mirror_delta(&self, table: &TableName, results: &mut [(String, TaskResult)]) {
        let outcome = self.try_mirror(table).await;
        self.note_outcome(table, Activity::Delta, &outcome).await;
        let error = match outcome {
            Ok(Some(Mirrored::Committed { version, added, removed, deleted_in })) => {
                tracing::info!(table = %table, version, added, removed, deleted_in, "Delta table in step");
                return;
            }
            Ok(_) => return,
            Err(e) => e,
        };
        tracing::error!(table = %table, error = %error, retryable = error.retryable(), "Delta mirror failed");
        if !error.retryable() {
            return;
        }
        for (_, result) in results.iter_mut() {
            if matches!(result, TaskResult::Committed | TaskResult::AlreadyCommitted) {
                let error = format!("committed to the Iceberg table; its Delta table is not in step yet: {error}");
                *result = TaskResult::Failed { error, retryable: true };
            }
        }
    }

    async fn try_mirror(&self, table: &TableName) -> Result<Option<Mirrored>, CommitError> {
        let Some(loaded) = load(self.catalog.as_ref(), &self.file_io, table).await? else { return Ok(None) };
        let now = self.clock.now_ms();
        let mirrored = mirror(self.delta_log.as_ref(), &self.file_io, &loaded, now, &self.mirror_cache).await?;
        self.register_delta(&loaded).await?;
        Ok(Some(mirrored))
    }

    /// Registers the table's Delta table by name ([`delta_name`]: `<table>_delta`, or
    /// `<table>` for a Delta-only topic) where Delta tables are, once per committer: after
    /// a crash between its first Delta commit and its registration, the next committer to
    /// mirror the table registers it.
    async fn register_delta(&self, loaded: &LoadedTable) -> Result<(), CommitError> {
        let (table, location) = (&loaded.name, loaded.metadata.location());
        let Some(catalog) = &self.delta_catalog else { return Ok(()) };
        let done = |set: &std::sync::Mutex<std::collections::HashSet<TableName>>| {
            set.lock().map(|s| s.contains(table)).unwrap_or(false)
        };
        if done(&self.delta_registered) {
            return Ok(());
        }
        let name = delta_name(table, &loaded.metadata);
        if catalog.register(&name, location).await? {
            tracing::info!(table = %table, delta_table = %name, location, "Delta table registered");
        }
        if let Ok(mut set) = self.delta_registered.lock() {
            set.insert(table.clone());
        }
        Ok(())
    }
}
