//! The compactor's run: every registered table that is not suspended, planned at `now_ms`,
//! each bin rewritten and queued as a CompactionTask for the committer, then swept.
//! (Skeleton: the body is being written.)

use std::sync::Arc;
use std::time::Instant;

use iceberg::io::FileIO;

use super::sweep::SweepReport;
use super::{MaintenanceError, TableRegistry};
use crate::catalog::Catalog;
use crate::config::FloeConfig;
use crate::queue::TaskQueue;
use crate::storage::WarehouseFiles;
use crate::table::TableName;

/// What the compactor needs; the same on AWS (Glue, S3, DynamoDB, SQS) and locally.
pub struct Compactor {
    pub catalog: Arc<dyn Catalog>,
    pub file_io: FileIO,
    pub registry: Arc<dyn TableRegistry>,
    pub files: Arc<dyn WarehouseFiles>,
    /// The committer's queue: each CompactionTask's files are held in the registry first.
    pub queue: Arc<dyn TaskQueue>,
    /// Per-topic compaction policy and grace period; defaults for tables no topic names.
    pub config: Arc<FloeConfig>,
    /// Where tasks too large for a message are stored (`<store>tasks/<table>/<task id>.json`),
    /// swept like the tables' files; `None` when tasks never spill (local).
    pub task_store: Option<String>,
}

/// What one table's maintenance did.
#[derive(Debug, Default)]
pub struct TableRun {
    pub table: Option<TableName>,
    /// CompactionTasks queued, and the files and bytes they rewrite.
    pub compactions: usize,
    pub files_in: u64,
    pub bytes_in: u64,
    pub sweep: SweepReport,
    /// Why the table was skipped (suspended), when it was.
    pub skipped: Option<String>,
    pub error: Option<MaintenanceError>,
}

/// What a run did, per table.
#[derive(Debug, Default)]
pub struct RunReport {
    pub tables: Vec<TableRun>,
}

impl Compactor {
    /// Compacts and sweeps every registered table not suspended, on the clock `now_ms`;
    /// tables not started by `deadline` are left for the next run. One table's failure
    /// is reported and the others go on.
    pub async fn run(&self, now_ms: i64, deadline: Option<Instant>) -> RunReport {
        let _ = (now_ms, deadline);
        todo!("being written")
    }
}
