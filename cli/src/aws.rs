//! `floe aws …`: operator commands against a deployed stack's lock table (DynamoDB),
//! where the committer keeps each table's status and maintenance keeps its record, and
//! (status) its tables' current snapshots, through the catalog floe.toml's `[catalog]`
//! names (Glue, a REST catalog, an S3 table bucket; Glue without `--config`) and S3.
//! Credentials, region and endpoint come from the usual AWS environment (`AWS_PROFILE`,
//! `AWS_REGION`, `AWS_ENDPOINT_URL`, …).

use aws_config::SdkConfig;
use floe_aws::catalogs::Host;
use floe_aws::dynamodb::DynamoDbLocks;
use floe_core::config::FloeConfig;
use floe_core::lock::TableLocks;
use floe_core::maintenance::{MaintenanceEvent, TableRegistry};
use floe_core::queue::TaskQueue;
use floe_core::table::{CatalogTables, TableName};

use crate::health::{TableStatus, read_table};

fn locks(config: &SdkConfig, lock_table: &str) -> DynamoDbLocks {
    DynamoDbLocks::new(aws_sdk_dynamodb::Client::new(config), lock_table)
}

/// The S3 client of `floe aws`: path-style addressing when `path_style` (the functions'
/// `FLOE_S3_PATH_STYLE`, for S3 emulators).
pub fn s3_client(config: &SdkConfig, path_style: bool) -> aws_sdk_s3::Client {
    aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(config).force_path_style(path_style).build())
}

/// The stack's tables, through Glue (the catalog without `[catalog]`) and, for their
/// files, `s3`.
pub async fn glue_tables(config: &SdkConfig, s3: aws_sdk_s3::Client) -> anyhow::Result<CatalogTables> {
    let host = Host::Aws { aws: config, s3, lock_table: None };
    Ok(floe_aws::catalogs::open(&FloeConfig::default(), host).await?.tables())
}

/// The stack's floe.toml (`config_uri`: `s3://…` or a path, the stack's `ConfigUri`;
/// without it, the defaults) and its tables, through the catalog its `[catalog]` names
/// (Glue without it), opened as the functions open it (with the stack's `lock_table`,
/// where Delta-only topics' Iceberg tables are), and, for their files, `s3`.
pub async fn stack_tables(
    config: &SdkConfig,
    s3: &aws_sdk_s3::Client,
    config_uri: Option<&str>,
    lock_table: Option<&str>,
) -> anyhow::Result<(FloeConfig, CatalogTables)> {
    let floe_config = floe_aws::lambda::read_config(s3, config_uri).await?;
    let host = Host::Aws { aws: config, s3: s3.clone(), lock_table };
    let opened = floe_aws::catalogs::open(&floe_config, host).await?;
    Ok((floe_config, opened.tables()))
}

/// [`status_of`] the stack's tables in Glue.
pub async fn status(config: &SdkConfig, lock_table: &str, path_style: bool) -> anyhow::Result<Vec<TableStatus>> {
    status_of(config, lock_table, &glue_tables(config, s3_client(config, path_style)).await?).await
}

/// Every table the stack commits to (dead-letter tables included), by name: its state
/// and why, its current snapshot's facts (read through `tables` as a commit reads it:
/// the catalog's pointer, the metadata file and the state file it names), who holds its
/// lease, and what maintenance did to it.
pub async fn status_of(
    config: &SdkConfig,
    lock_table: &str,
    tables: &CatalogTables,
) -> anyhow::Result<Vec<TableStatus>> {
    let locks = locks(config, lock_table);
    let now_ms = floe_core::lock::now_ms();
    let mut out = Vec::new();
    for registered in locks.tables().await? {
        let name = registered.table;
        let read = read_table(tables, &locks, &name, now_ms).await?;
        let maintenance = locks.status(&name).await?;
        let resume = format!("floe aws resume {name} --lock-table {lock_table}");
        out.push(TableStatus::new(name.to_string(), registered.suspended, maintenance, read, &resume));
    }
    Ok(out)
}

/// Resumes a suspended table: the committer commits its kept tasks again. Returns why it
/// was suspended, or `None` when it was not.
pub async fn resume(config: &SdkConfig, lock_table: &str, table: &str) -> anyhow::Result<Option<String>> {
    let locks = locks(config, lock_table);
    let reason = locks.suspended(table).await?;
    if reason.is_some() {
        locks.set_suspended(table, None).await?;
        if let Some(name) = TableName::parse(table) {
            locks.record(&name, &MaintenanceEvent::SuspendedBy(None)).await?;
        }
        tracing::info!(table, reason = reason.as_deref(), "table resumed");
    }
    Ok(reason)
}

/// Queues an operator's `decision` on a stranded transaction part of a table of `tables`
/// for the stack's committer (`queue_url`: its task queue, the stack's `TaskQueueUrl`),
/// once the table's state shows the part stranded.
pub async fn resolve(
    config: &SdkConfig,
    s3: &aws_sdk_s3::Client,
    tables: &CatalogTables,
    queue_url: &str,
    decision: &crate::resolve::Decision,
) -> anyhow::Result<String> {
    let task = decision.task(tables).await?;
    // A decision is a few hundred bytes: never stored in S3, so no overflow location.
    let queue = floe_aws::sqs::SqsTaskQueue::new(aws_sdk_sqs::Client::new(config), s3.clone(), queue_url, "");
    queue.send(&floe_core::task::Task::Resolve(Box::new(task))).await?;
    Ok(format!("{} (queued for the committer)", decision.done()))
}
