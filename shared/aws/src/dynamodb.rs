//! Leases and statuses in a DynamoDB table (partition key `table`, a string), by
//! conditional updates: the condition is the lock.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};

use crate::retry::sdk_error_retryable;
use floe_core::lock::{Holder, Lease, LockError, TableLocks, now_ms};

pub struct DynamoDbLocks {
    client: Client,
    table: String,
}

impl DynamoDbLocks {
    /// `table`: the DynamoDB table (key attribute `table`, type S).
    pub fn new(client: Client, table: &str) -> Self {
        DynamoDbLocks { client, table: table.to_string() }
    }

    /// The table's item (lease and status), read consistently; `what` names the read in errors.
    async fn item(
        &self,
        table: &str,
        what: &str,
    ) -> Result<Option<std::collections::HashMap<String, AttributeValue>>, LockError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("table", s(table))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| store(what, e))?;
        Ok(out.item)
    }

    /// Sets the lease's expiry while it is still ours: our owner and our fencing (it
    /// grows at every acquisition), expired or not.
    async fn set_expiry_if_ours(
        &self,
        lease: &Lease,
        expires_at_ms: i64,
    ) -> Result<
        aws_sdk_dynamodb::operation::update_item::UpdateItemOutput,
        SdkError<aws_sdk_dynamodb::operation::update_item::UpdateItemError>,
    > {
        self.client
            .update_item()
            .table_name(&self.table)
            .key("table", s(&lease.table))
            .update_expression("SET expires_at_ms = :e")
            .condition_expression("#o = :o AND fencing = :f")
            .expression_attribute_names("#o", "owner")
            .expression_attribute_values(":o", s(&lease.owner))
            .expression_attribute_values(":f", n(lease.fencing as i64))
            .expression_attribute_values(":e", n(expires_at_ms))
            .send()
            .await
    }

    /// Every suspended table and why, by name (a scan: an operator's question, not the
    /// committer's).
    pub async fn suspended_tables(&self) -> Result<Vec<(String, String)>, LockError> {
        let mut pages = self
            .client
            .scan()
            .table_name(&self.table)
            .filter_expression("attribute_exists(suspended_reason)")
            .consistent_read(true)
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| store("listing the table statuses", e))?;
            for item in page.items() {
                let text = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).cloned();
                if let (Some(table), Some(reason)) = (text("table"), text("suspended_reason")) {
                    out.push((table, reason));
                }
            }
        }
        out.sort();
        Ok(out)
    }
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_string())
}

fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn store<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
    what: &str,
    e: SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>,
) -> LockError {
    LockError::Store { retryable: sdk_error_retryable(&e), detail: format!("{what}: {}", DisplayErrorContext(&e)) }
}

fn condition_failed<E: ProvideErrorMetadata>(e: &SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>) -> bool {
    e.as_service_error().and_then(|s| s.code()) == Some("ConditionalCheckFailedException")
}

#[async_trait]
impl TableLocks for DynamoDbLocks {
    async fn acquire(&self, table: &str, owner: &str, ttl: Duration) -> Result<Option<Lease>, LockError> {
        let now = now_ms();
        let expires_at_ms = now + ttl.as_millis() as i64;
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("table", s(table))
            .update_expression("SET #o = :o, expires_at_ms = :e ADD fencing :one")
            .condition_expression("attribute_not_exists(expires_at_ms) OR expires_at_ms < :now OR #o = :o")
            .expression_attribute_names("#o", "owner")
            .expression_attribute_values(":o", s(owner))
            .expression_attribute_values(":e", n(expires_at_ms))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":now", n(now))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match result {
            Ok(out) => {
                let fencing = out
                    .attributes()
                    .and_then(|a| a.get("fencing"))
                    .and_then(|v| v.as_n().ok())
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| LockError::Store { detail: "lease without fencing".into(), retryable: false })?;
                Ok(Some(Lease { table: table.to_string(), owner: owner.to_string(), fencing, expires_at_ms }))
            }
            Err(e) if condition_failed(&e) => Ok(None),
            Err(e) => Err(store("acquiring the lease", e)),
        }
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LockError> {
        let now = now_ms();
        let renewed = Lease { expires_at_ms: now + ttl.as_millis() as i64, ..lease.clone() };
        let result = self.set_expiry_if_ours(lease, renewed.expires_at_ms).await;
        match result {
            Ok(_) => Ok(renewed),
            Err(e) if condition_failed(&e) => {
                Err(LockError::Lost { table: lease.table.clone(), fencing: lease.fencing })
            }
            Err(e) => Err(store("renewing the lease", e)),
        }
    }

    async fn release(&self, lease: &Lease) -> Result<(), LockError> {
        let result = self.set_expiry_if_ours(lease, 0).await;
        match result {
            Ok(_) => Ok(()),
            Err(e) if condition_failed(&e) => Ok(()), // someone took it over: nothing to release
            Err(e) => Err(store("releasing the lease", e)),
        }
    }

    async fn peek(&self, table: &str, owner: &str) -> Result<Option<Holder>, LockError> {
        let Some(item) = self.item(table, "reading the lease").await? else { return Ok(None) };
        let holder = item.get("owner").and_then(|v| v.as_s().ok()).cloned();
        let expires_at_ms =
            item.get("expires_at_ms").and_then(|v| v.as_n().ok()).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
        Ok(holder.filter(|h| h != owner && expires_at_ms >= now_ms()).map(|owner| Holder { owner, expires_at_ms }))
    }

    async fn suspended(&self, table: &str) -> Result<Option<String>, LockError> {
        let item = self.item(table, "reading the table status").await?;
        Ok(item.as_ref().and_then(|i| i.get("suspended_reason")).and_then(|v| v.as_s().ok()).cloned())
    }

    async fn set_suspended(&self, table: &str, reason: Option<&str>) -> Result<(), LockError> {
        let update = self.client.update_item().table_name(&self.table).key("table", s(table));
        let update = match reason {
            Some(r) => update.update_expression("SET suspended_reason = :r").expression_attribute_values(":r", s(r)),
            None => update.update_expression("REMOVE suspended_reason"),
        };
        update.send().await.map_err(|e| store("writing the table status", e))?;
        Ok(())
    }
}
