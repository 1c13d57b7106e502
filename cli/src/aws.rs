//! `floe aws …`: operator commands against a deployed stack's lock table (DynamoDB),
//! where the committer keeps each table's status and maintenance keeps its record.
//! Credentials, region and endpoint come from the usual AWS environment (`AWS_PROFILE`,
//! `AWS_REGION`, `AWS_ENDPOINT_URL`, …).

use aws_config::SdkConfig;
use floe_aws::dynamodb::DynamoDbLocks;
use floe_core::lock::TableLocks;
use floe_core::maintenance::TableRegistry;

use crate::compact::MaintenanceView;

fn locks(config: &SdkConfig, lock_table: &str) -> DynamoDbLocks {
    DynamoDbLocks::new(aws_sdk_dynamodb::Client::new(config), lock_table)
}

/// One table of the stack as `floe aws status` shows it (a JSON line).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableStatus {
    pub table: String,
    /// Why the table is suspended, when it is.
    pub suspended: Option<String>,
    /// Its last compaction (time, files and bytes in and out), snapshots expired, orphans
    /// removed, last sweep: as `floe local status` shows them.
    #[serde(flatten)]
    pub maintenance: MaintenanceView,
}

/// Every table the stack commits to (dead-letter tables included), by name: whether it
/// is suspended and why, and what maintenance did to it.
pub async fn status(config: &SdkConfig, lock_table: &str) -> anyhow::Result<Vec<TableStatus>> {
    let locks = locks(config, lock_table);
    let mut out = Vec::new();
    for registered in locks.tables().await? {
        out.push(TableStatus {
            table: registered.table.to_string(),
            suspended: registered.suspended,
            maintenance: locks.status(&registered.table).await?.into(),
        });
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
        tracing::info!(table, reason = reason.as_deref(), "table resumed");
    }
    Ok(reason)
}
