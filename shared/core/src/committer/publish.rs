//! The end of every attempt: the snapshot written and the table's pointer moved by the
//! catalog's compare-and-swap, if the lease is still ours.

use iceberg::io::FileIO;

use super::{CommitError, Committer};
use crate::catalog::CatalogError;
use crate::lock::Lease;
use crate::lock::registry::MaintenanceEvent;
use crate::metrics;
use crate::retry::Retryable;
use crate::table::snapshot::{METADATA_DELETE_AFTER_COMMIT, SnapshotChange, stage_snapshot};
use crate::table::{LoadedTable, TableError, load};
use crate::task::TableName;

impl Committer {
    /// Writes the snapshot and moves the table's pointer to it, if the lease is still
    /// ours (a lost one aborts) and nobody moved the pointer since `loaded`; returns the
    /// snapshot's id and the time it was committed at on [`Committer::clock`] (its stamp
    /// is later when the table's last commit is). The snapshots it expired are counted in
    /// the registry.
    pub(super) async fn publish(
        &self,
        loaded: &LoadedTable,
        change: SnapshotChange,
        lease: &mut Lease,
    ) -> Result<(i64, i64), CommitError> {
        let now = self.clock.now_ms();
        let added = change.added.len();
        let new = stage_snapshot(&self.file_io, &loaded.metadata, &loaded.pointer.metadata_location, change, now)
            .await
            .map_err(TableError::iceberg(&loaded.name))?;
        // A catalog that writes its own metadata file from the swap (REST) would leave
        // Floe's unreferenced: none is written, so none is left behind whatever the
        // outcome, and nothing has to be deleted after a commit whose outcome is unknown.
        if !self.catalog.writes_metadata() {
            new.write(&self.file_io).await.map_err(TableError::iceberg(&loaded.name))?;
        }
        *lease = self.locks.renew(lease, self.lease_ttl).await?;
        let snapshot_id = new.metadata.current_snapshot_id().unwrap_or_default();
        if let Err(e) = self.catalog.swap(&loaded.name, &loaded.pointer, &new.metadata, &new.location).await {
            self.check_outcome(&loaded.name, snapshot_id, e).await?;
        }
        if new.metadata.properties().get(METADATA_DELETE_AFTER_COMMIT).is_some_and(|v| v == "true") {
            Self::delete_metadata_files(&self.file_io, &loaded.name, &new.expired_metadata_files).await;
        }
        // One snapshot added: the others missing were expired.
        let expired = (loaded.metadata.snapshots().count() + 1).saturating_sub(new.metadata.snapshots().count());
        metrics::record_table(&metrics::FILES_COMMITTED, &loaded.name.to_string(), added as f64);
        if expired > 0 {
            metrics::record_table(&metrics::SNAPSHOTS_EXPIRED, &loaded.name.to_string(), expired as f64);
            self.note(&loaded.name, MaintenanceEvent::SnapshotsExpired(expired as u64)).await;
        }
        Ok((new.metadata.current_snapshot_id().unwrap_or_default(), now))
    }

    /// The outcome of a swap that failed without a verdict (its answer lost, or a 5xx the
    /// catalog may have sent after applying it), found by loading the table again: it
    /// holds `snapshot_id` (the commit happened: `Ok`), or it does not (nothing was
    /// committed: a retryable error saying so). A refusal (a conflict, a non-retryable
    /// error) is a verdict and is returned as it is.
    async fn check_outcome(&self, table: &TableName, snapshot_id: i64, error: CatalogError) -> Result<(), CommitError> {
        if error.is_conflict() || !error.retryable() {
            return Err(CommitError::Table(error.into()));
        }
        let unknown = |detail: String| {
            let detail = format!("commit outcome unknown ({error}); {detail}");
            CommitError::Table(CatalogError::Other { table: table.to_string(), detail, retryable: true }.into())
        };
        match load(self.catalog.as_ref(), &self.file_io, table).await {
            Ok(Some(now)) if now.metadata.snapshot_by_id(snapshot_id).is_some() => {
                tracing::warn!(table = %table, snapshot_id, error = %error,
                    "commit outcome unknown; checked: the table holds the snapshot, so it was committed");
                Ok(())
            }
            Ok(_) => Err(unknown(format!(
                "checked: the table does not hold snapshot {snapshot_id}, so nothing was committed"
            ))),
            Err(check) => {
                Err(unknown(format!("checking it failed too ({check}): a retry finds out, skipping what is committed")))
            }
        }
    }

    /// Deletes metadata files that fell out of the metadata log; best effort: a file left
    /// behind is only storage, never a reason to fail the commit that succeeded.
    async fn delete_metadata_files(file_io: &FileIO, table: &TableName, files: &[String]) {
        for file in files {
            if let Err(e) = file_io.delete(file).await {
                tracing::warn!(table = %table, file = %file, error = %e, "deleting an old metadata file failed");
            }
        }
    }
}
