//! `floe aws …`: operator commands against a deployed stack's lock table (DynamoDB),
//! where the committer keeps each table's status. Credentials, region and endpoint come
//! from the usual AWS environment (`AWS_PROFILE`, `AWS_REGION`, `AWS_ENDPOINT_URL`, …).

use aws_config::SdkConfig;
use floe_aws::dynamodb::DynamoDbLocks;
use floe_core::lock::TableLocks;

fn locks(config: &SdkConfig, lock_table: &str) -> DynamoDbLocks {
    DynamoDbLocks::new(aws_sdk_dynamodb::Client::new(config), lock_table)
}

/// Every suspended table of the stack and why.
pub async fn status(config: &SdkConfig, lock_table: &str) -> anyhow::Result<Vec<(String, String)>> {
    Ok(locks(config, lock_table).suspended_tables().await?)
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
