//! The compactor function: its environment, the compactor built from it, and a scheduled
//! run handled: tables compacted, orphans swept, what it did as the response.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use floe_core::metrics;
use floe_core::retry::Retryable;

use super::materializer::MaterializerEnv;
use super::{COMPACTOR_TIMEOUT_SECONDS, InitError, function_timeout, load_config, open_catalog, table_registry};
use crate::sqs::SqsTaskQueue;

/// The compactor's environment: the materializer's variables (`FLOE_WAREHOUSE`,
/// `FLOE_TASK_QUEUE_URL`, `FLOE_LOCK_TABLE`, `FLOE_CONFIG`, `FLOE_S3_PATH_STYLE`), read
/// and checked the same way, and `FLOE_FUNCTION_TIMEOUT_SECONDS`.
#[derive(Debug, Clone)]
pub struct CompactorEnv {
    /// `FLOE_CONFIG`: `s3://bucket/key` or a path of `floe.toml` (compaction policy per
    /// topic); unset = the defaults (128 MiB, 15 minutes).
    pub config: Option<String>,
    /// `FLOE_WAREHOUSE`: `s3://bucket/prefix`; tasks too large for a message are stored
    /// under its `tasks/`, as the materializer stores them.
    pub warehouse: String,
    /// `FLOE_TASK_QUEUE_URL`: the committer's FIFO queue, where CompactionTasks go.
    pub task_queue_url: String,
    /// `FLOE_LOCK_TABLE`: the DynamoDB table of leases, statuses and held tasks.
    pub lock_table: String,
    pub s3_path_style: bool,
    /// `FLOE_FUNCTION_TIMEOUT_SECONDS`: the function's timeout, the budget when the
    /// invocation's deadline is not a real one (default 900, the template's).
    pub timeout: Duration,
}

impl CompactorEnv {
    pub fn from_env() -> Result<Self, InitError> {
        let MaterializerEnv { config, warehouse, task_queue_url, lock_table, s3_path_style } =
            MaterializerEnv::from_env()?;
        let timeout = function_timeout(COMPACTOR_TIMEOUT_SECONDS)?;
        Ok(CompactorEnv { config, warehouse, task_queue_url, lock_table, s3_path_style, timeout })
    }
}

/// The compactor, built once per container.
pub struct CompactorService {
    pub compactor: floe_core::maintenance::compactor::Compactor,
    /// The catalog's access check, for the configured tables.
    pub access: crate::access::AccessCheck,
    /// The task queue, whose message count gates the stall metric.
    pub sqs: aws_sdk_sqs::Client,
    pub task_queue_url: String,
}

/// Builds the compactor from the environment and the AWS clients (once per container):
/// Glue tables, the warehouse on S3, the registry in the lock table, CompactionTasks to
/// the committer's queue.
pub async fn compactor(aws: &aws_config::SdkConfig, env: &CompactorEnv) -> Result<CompactorService, InitError> {
    let s3_config = aws_sdk_s3::config::Builder::from(aws).force_path_style(env.s3_path_style).build();
    let s3 = aws_sdk_s3::Client::from_conf(s3_config);
    let config = load_config(&s3, env.config.as_deref()).await?;
    let warehouse = format!("{}/", env.warehouse.trim_end_matches('/'));
    // The plain queue: the compactor holds each CompactionTask's files in the registry
    // itself before sending it, so the sweep keeps them while it waits.
    let queue = SqsTaskQueue::new(aws_sdk_sqs::Client::new(aws), s3.clone(), &env.task_queue_url, &warehouse);
    let opened = open_catalog(aws, &s3, &config, &env.lock_table).await?;
    let catalog = opened.catalog.clone();
    let compactor = floe_core::maintenance::compactor::Compactor {
        catalog: catalog.clone(),
        file_io: opened.file_io,
        registry: table_registry(aws, &env.lock_table),
        files: opened.files,
        queue: Arc::new(queue),
        config: Arc::new(config),
        task_store: Some(warehouse),
        sweep: true,
        delta_log: opened.delta_log,
    };
    Ok(CompactorService {
        compactor,
        access: crate::access::AccessCheck::new(catalog, floe_core::catalog::Access::Read),
        sqs: aws_sdk_sqs::Client::new(aws),
        task_queue_url: env.task_queue_url.clone(),
    })
}

/// What one compactor run did, as the invocation answers it (and logs it).
#[derive(Debug, Default, serde::Serialize)]
pub struct CompactorResponse {
    /// Tables with CompactionTasks queued.
    pub compacted: Vec<CompactedTable>,
    /// Tables left alone, and why (suspended, or the run's time was up).
    pub skipped: Vec<TableNote>,
    /// Tables whose compaction or sweep failed; the next run tries them again.
    pub failed: Vec<TableNote>,
    /// Tables looked at with nothing to do.
    pub unchanged: usize,
    /// Orphan files deleted, over every table.
    pub orphans_removed: usize,
}

#[derive(Debug, serde::Serialize)]
pub struct CompactedTable {
    pub table: String,
    /// CompactionTasks queued, the files and bytes they rewrite, and what they write.
    pub tasks: usize,
    pub files_in: u64,
    pub bytes_in: u64,
    pub files_out: u64,
    pub bytes_out: u64,
}

#[derive(Debug, serde::Serialize)]
pub struct TableNote {
    /// `namespace.name`; empty when the failure was not one table's (listing the tables).
    pub table: String,
    pub reason: String,
}

impl CompactorResponse {
    fn from_report(report: floe_core::maintenance::compactor::RunReport) -> Self {
        let mut response = CompactorResponse::default();
        for run in report.tables {
            let table = run.table.as_ref().map(ToString::to_string).unwrap_or_default();
            response.orphans_removed += run.sweep.removed.len();
            if let Some(error) = &run.error {
                tracing::error!(%table, retryable = error.retryable(), %error, "table maintenance failed");
                response.failed.push(TableNote { table: table.clone(), reason: error.to_string() });
            }
            if let Some(reason) = run.skipped {
                response.skipped.push(TableNote { table, reason });
            } else if run.compactions > 0 {
                response.compacted.push(CompactedTable {
                    table,
                    tasks: run.compactions,
                    files_in: run.files_in,
                    bytes_in: run.bytes_in,
                    files_out: run.files_out,
                    bytes_out: run.bytes_out,
                });
            } else if run.error.is_none() {
                response.unchanged += 1;
            }
        }
        response
    }
}

/// Handles one scheduled event: compacts and sweeps every registered table on the wall
/// clock, stopping to start tables at `deadline`.
///
/// A table's failure does not fail the invocation: it is logged and reported, and the
/// next tick of the schedule tries again — failing would only make EventBridge run the
/// whole schedule again at once, tables that succeeded included.
pub async fn handle_compactor_event(
    service: &CompactorService,
    event: aws_lambda_events::event::eventbridge::EventBridgeEvent<Value>,
    deadline: Option<Instant>,
) -> CompactorResponse {
    let scheduled = event.time.map(|t| t.to_rfc3339()).unwrap_or_default();
    let rule = event.resources.as_ref().and_then(|r| r.first()).cloned().unwrap_or_default();
    if event.detail_type != "Scheduled Event" {
        tracing::warn!(detail_type = %event.detail_type, source = %event.source, "not a scheduled event; running anyway");
    }
    if let Err(error) = service.access.check(service.compactor.config.configured_tables()).await {
        tracing::error!(%error, "the catalog refuses what the compactor needs: nothing done this run");
        let failed = TableNote { table: String::new(), reason: error.to_string() };
        return CompactorResponse { failed: vec![failed], ..Default::default() };
    }
    let report = service.compactor.run(floe_core::lock::now_ms(), deadline).await;
    record_maintenance(&report);
    let response = CompactorResponse::from_report(report);
    record_stall(service).await;
    tracing::info!(
        %scheduled, %rule, compacted = response.compacted.len(), skipped = response.skipped.len(),
        failed = response.failed.len(), unchanged = response.unchanged, orphans_removed = response.orphans_removed,
        "compactor run done"
    );
    response
}

/// The compaction bytes and orphans of a run, per table.
fn record_maintenance(report: &floe_core::maintenance::compactor::RunReport) {
    for run in &report.tables {
        let Some(table) = &run.table else { continue };
        let table = table.to_string();
        metrics::record_table(&metrics::COMPACTION_BYTES_IN, &table, run.bytes_in as f64);
        metrics::record_table(&metrics::COMPACTION_BYTES_OUT, &table, run.bytes_out as f64);
        metrics::record_table(&metrics::ORPHANS_REMOVED, &table, run.sweep.removed.len() as f64);
    }
}

/// The stall metrics ([`floe_core::maintenance::stall`]): the queue's message count (one
/// call), then the registry's held tasks. A failure to read either is logged; the run's
/// work stands.
async fn record_stall(service: &CompactorService) {
    let queued = match crate::sqs::queued_messages(&service.sqs, &service.task_queue_url).await {
        Ok(n) => Some(n),
        Err(error) => {
            tracing::warn!(%error, "reading the task queue's message count failed");
            None
        }
    };
    let now = floe_core::lock::now_ms();
    match floe_core::maintenance::stall::Waiting::read(service.compactor.registry.as_ref(), now).await {
        Ok(waiting) => waiting.record(queued),
        Err(error) => tracing::error!(%error, "reading the tasks waiting failed: no stall metric this run"),
    }
}

#[cfg(test)]
mod tests {
    use floe_core::maintenance::MaintenanceError;
    use floe_core::maintenance::compactor::{RunReport, TableRun};
    use floe_core::maintenance::sweep::SweepReport;
    use floe_core::table::TableName;

    use super::*;

    #[test]
    fn the_response_sorts_tables_into_compacted_skipped_failed_and_unchanged() {
        let name = |n: &str| Some(TableName { namespace: "kafka".into(), name: n.into() });
        let swept = |n: usize| SweepReport { removed: vec!["s3://b/orphan".into(); n], ..Default::default() };
        let report = RunReport {
            tables: vec![
                TableRun {
                    table: name("a"),
                    compactions: 2,
                    files_in: 30,
                    bytes_in: 900,
                    files_out: 2,
                    bytes_out: 880,
                    sweep: swept(3),
                    ..Default::default()
                },
                TableRun { table: name("b"), skipped: Some("suspended: bad record".into()), ..Default::default() },
                TableRun {
                    table: name("c"),
                    error: Some(MaintenanceError::Storage {
                        table: "kafka.c".into(),
                        detail: "SlowDown".into(),
                        retryable: true,
                    }),
                    ..Default::default()
                },
                TableRun { table: name("d"), sweep: swept(1), ..Default::default() },
            ],
        };
        let response = CompactorResponse::from_report(report);
        let json = serde_json::to_value(&response).unwrap();
        assert_eq!(
            json["compacted"],
            serde_json::json!([{"table": "kafka.a", "tasks": 2, "files_in": 30, "bytes_in": 900, "files_out": 2, "bytes_out": 880}])
        );
        assert_eq!(json["skipped"], serde_json::json!([{"table": "kafka.b", "reason": "suspended: bad record"}]));
        assert_eq!(json["failed"], serde_json::json!([{"table": "kafka.c", "reason": "kafka.c: SlowDown"}]));
        assert_eq!((response.unchanged, response.orphans_removed), (1, 4));
    }
}
