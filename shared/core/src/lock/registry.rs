//! The table registry: which tables Floe commits to, the files their queued tasks hold,
//! and what maintenance did to each — a port of the lock store (SQLite locally,
//! DynamoDB on AWS), one row per table, which maintenance (`crate::maintenance`), the
//! committer and the materializer (a table's configuration issue) use. It lives with the locks because the lock stores implement it.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::LockError;
use crate::vocabulary::TableName;

/// A table the registry knows: one the committer has taken a lease on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredTable {
    pub table: TableName,
    /// Why it is suspended, when it is.
    pub suspended: Option<String>,
}

/// A task queued and not yet done, with the files it names (data files, a spilled task
/// object): the sweep keeps them, whatever their age.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldTask {
    pub task_id: String,
    pub files: Vec<String>,
    pub held_at_ms: i64,
    /// The Kafka offsets a CommitTask brings to the table: once the table's committed
    /// offsets hold all of them, the committer drops any copy of the task as already
    /// committed, so maintenance ends the hold
    /// ([`crate::maintenance::holding::release_committed`]). `None`: a CompactionTask,
    /// a segment without batches, or a hold made before this was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offsets: Option<HeldOffsets>,
}

/// The offsets of a held CommitTask: `first..=last` of one topic-partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldOffsets {
    pub topic: String,
    pub partition: i32,
    pub first: i64,
    pub last: i64,
}

/// One compaction the committer applied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionRecord {
    pub at_ms: i64,
    pub files_in: u64,
    pub bytes_in: u64,
    pub files_out: u64,
    pub bytes_out: u64,
    /// Rows other engines' delete files removed, left out of the outputs.
    #[serde(default)]
    pub rows_deleted: u64,
    /// Rows past the topic's retention, left out of the outputs or removed with their file.
    #[serde(default)]
    pub rows_expired: u64,
    /// Delete files removed from the table, applied to every data file they applied to.
    #[serde(default)]
    pub delete_files_dropped: u64,
}

/// What maintenance did to a table, as `floe local status` and `floe aws status` show it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaintenanceStatus {
    pub last_compaction: Option<CompactionRecord>,
    /// Snapshots expired, in total.
    pub snapshots_expired: u64,
    /// Orphan files deleted, in total.
    pub orphans_removed: u64,
    /// When the sweep last ran on the table.
    pub last_sweep_ms: Option<i64>,
    /// What fails on the table, one per activity (by activity): its last failure, until
    /// that activity next succeeds.
    #[serde(default)]
    pub failing: Vec<Failure>,
    /// The bad record that suspended the table (mode `suspend`), until it is resumed.
    #[serde(default)]
    pub suspended_by: Option<RecordAt>,
}

/// Where a record is: its topic, partition and offset, and the segment holding it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordAt {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub file: String,
}

/// What Floe does to a table, as far as a failure stops it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activity {
    /// The committer's commits of new data.
    Commit,
    /// Compaction: planning, rewriting, and the committer's `replace` commits.
    Compaction,
    /// The orphan sweep.
    Sweep,
    /// The table's configuration: a topic it does not hold sent to it (a topic clash), a
    /// schema reference that cannot be resolved.
    Config,
    /// The table's lease: held by another owner when the committer came, the tasks given
    /// back (to be retried). Ended by the next commit, or by the lease coming free.
    Lease,
    /// The Delta mirror: the Delta table brought in step after the table's commits.
    /// Ended by the next mirror that succeeds.
    Delta,
}

impl Activity {
    pub fn name(self) -> &'static str {
        match self {
            Activity::Commit => "commit",
            Activity::Compaction => "compaction",
            Activity::Sweep => "sweep",
            Activity::Config => "config",
            Activity::Lease => "lease",
            Activity::Delta => "delta",
        }
    }

    /// The failures a success of this activity ends: its own, and for a commit (made
    /// under the table's lease) the lease's.
    pub fn ended_by_success(self) -> &'static [Activity] {
        match self {
            Activity::Commit => &[Activity::Commit, Activity::Lease],
            Activity::Compaction => &[Activity::Compaction],
            Activity::Sweep => &[Activity::Sweep],
            Activity::Config => &[Activity::Config],
            Activity::Lease => &[Activity::Lease],
            Activity::Delta => &[Activity::Delta],
        }
    }
}

/// The last failure of an activity on a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub activity: Activity,
    pub at_ms: i64,
    pub error: String,
}

/// Something maintenance did, to add to the table's [`MaintenanceStatus`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MaintenanceEvent {
    /// A compaction committed (replaces the last one).
    Compacted(CompactionRecord),
    /// Snapshots expired by a commit (added to the total).
    SnapshotsExpired(u64),
    /// A sweep ran at `at_ms` and deleted `removed` files (added to the total).
    Swept { at_ms: i64, removed: u64 },
    /// An activity failed (replaces its last failure).
    Failed(Failure),
    /// An activity succeeded: it is failing no more (nor are those it ends,
    /// [`Activity::ended_by_success`]).
    Succeeded(Activity),
    /// A bad record suspended the table (`Some`), or the table was resumed (`None`).
    SuspendedBy(Option<RecordAt>),
}

/// The tables Floe commits to, the files their queued tasks hold, and what maintenance
/// did: kept in the lock store (SQLite locally, DynamoDB on AWS), one row per table.
#[async_trait]
pub trait TableRegistry: Send + Sync {
    /// Every table with a row (the committer took its lease at least once, or it was
    /// suspended), by name.
    async fn tables(&self) -> Result<Vec<RegisteredTable>, LockError>;
    /// Holds `task`'s files until [`Self::release_tasks`]. Holding the same task id again
    /// adds its files to those held (each path once) and moves `held_at_ms` on: a retried
    /// run wrote new files, but the copy the queue kept (SQS drops a duplicate send) may
    /// name the first run's, so neither may go before the task is done.
    async fn hold_task(&self, table: &TableName, task: &HeldTask) -> Result<(), LockError>;
    /// The tasks are done: their files are held no more. Unknown ids are ignored.
    async fn release_tasks(&self, table: &TableName, task_ids: &[String]) -> Result<(), LockError>;
    /// The tasks of `table` still held.
    async fn held_tasks(&self, table: &TableName) -> Result<Vec<HeldTask>, LockError>;
    /// Every table holding tasks (registered or not yet: a table the committer never
    /// reached), with the earliest `held_at_ms` of its tasks.
    async fn oldest_holds(&self) -> Result<std::collections::BTreeMap<TableName, i64>, LockError>;
    async fn record(&self, table: &TableName, event: &MaintenanceEvent) -> Result<(), LockError>;
    async fn status(&self, table: &TableName) -> Result<MaintenanceStatus, LockError>;
}

impl MaintenanceStatus {
    /// The status after `event`.
    pub fn apply(&mut self, event: &MaintenanceEvent) {
        match event {
            MaintenanceEvent::Compacted(record) => self.last_compaction = Some(*record),
            MaintenanceEvent::SnapshotsExpired(n) => self.snapshots_expired += n,
            MaintenanceEvent::Swept { at_ms, removed } => {
                self.last_sweep_ms = Some(*at_ms);
                self.orphans_removed += removed;
            }
            MaintenanceEvent::Failed(failure) => {
                self.failing.retain(|f| f.activity != failure.activity);
                self.failing.push(failure.clone());
                self.failing.sort_by_key(|f| f.activity);
            }
            MaintenanceEvent::Succeeded(activity) => {
                self.failing.retain(|f| !activity.ended_by_success().contains(&f.activity))
            }
            MaintenanceEvent::SuspendedBy(record) => self.suspended_by = record.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_shows_until_its_activity_succeeds() {
        let failed =
            |activity, error: &str| MaintenanceEvent::Failed(Failure { activity, at_ms: 1, error: error.into() });
        let mut status = MaintenanceStatus::default();
        status.apply(&failed(Activity::Sweep, "unreadable manifest"));
        status.apply(&failed(Activity::Commit, "zip_eq"));
        status.apply(&failed(Activity::Commit, "again"));
        let shown: Vec<(Activity, &str)> = status.failing.iter().map(|f| (f.activity, f.error.as_str())).collect();
        assert_eq!(shown, [(Activity::Commit, "again"), (Activity::Sweep, "unreadable manifest")]);
        status.apply(&MaintenanceEvent::Succeeded(Activity::Compaction));
        assert_eq!(status.failing.len(), 2);
        status.apply(&MaintenanceEvent::Succeeded(Activity::Commit));
        assert_eq!(status.failing[0].activity, Activity::Sweep);
        // The lease held elsewhere (tasks given back) shows until a commit succeeds.
        status.apply(&failed(Activity::Lease, "held by committer-b"));
        status.apply(&MaintenanceEvent::Succeeded(Activity::Compaction));
        assert_eq!(status.failing.len(), 2);
        status.apply(&MaintenanceEvent::Succeeded(Activity::Commit));
        assert_eq!(status.failing.len(), 1);
        assert_eq!(status.failing[0].activity, Activity::Sweep);
        // A record written before `failing` existed reads as failing nothing.
        let old: MaintenanceStatus = serde_json::from_str(
            r#"{"last_compaction":null,"snapshots_expired":3,"orphans_removed":0,"last_sweep_ms":null}"#,
        )
        .unwrap();
        assert!(old.failing.is_empty());
    }
}
