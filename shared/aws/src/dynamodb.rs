//! Leases, statuses and the table registry in one DynamoDB table (partition key `table`,
//! a string): leases by conditional updates (the condition is the lock), maintenance
//! counters by atomic `ADD`/`SET`, and the files of queued tasks as items of their own.
//!
//! ```text
//!  table = "kafka.orders"                    the table's row: lease (owner, expires_at_ms,
//!                                            fencing), suspended_reason, maintenance
//!                                            (last_compaction, snapshots_expired,
//!                                            orphans_removed, last_sweep_ms); a Delta-only
//!                                            topic's Iceberg pointer
//!                                            (iceberg_metadata_location, moved by
//!                                            crate::lock_table_catalog)
//!  table = "held#kafka.orders#0#<task id>"   a held task: held_table = "kafka.orders",
//!  table = "held#kafka.orders#1#<task id>"   task_id, held_at_ms, files (≤ 300 KB of
//!                                            paths an item; chunk 0 says how many),
//!                                            a CommitTask's offsets (topic, partition,
//!                                            first, last) in each
//!  index HELD_INDEX (held_table): sparse — only held tasks — so held_tasks(table) is a Query
//! ```
//!
//! Table names (Glue `database.table`) hold no `#`, so a held item's key names its table,
//! chunk and task unambiguously.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::{
    AttributeValue, DeleteRequest, KeysAndAttributes, PutRequest, ReturnValue, WriteRequest,
};

use crate::retry::sdk_error_retryable;
use floe_core::lock::{Holder, Lease, LockError, TableLocks, now_ms};
use floe_core::maintenance::{
    Activity, CompactionRecord, Failure, HeldOffsets, HeldTask, MaintenanceEvent, MaintenanceStatus, RecordAt,
    RegisteredTable, TableRegistry,
};
use floe_core::retry::RetryPolicy;
use floe_core::table::TableName;

/// The lock table's global secondary index on `held_table` (hash key, a string; every
/// attribute projected): only held-task items have that attribute, so it lists a
/// table's held tasks and nothing else. `infra/template.yaml` creates it.
pub const HELD_INDEX: &str = "held-tasks";

/// Bytes of file paths in one held-task item (DynamoDB's items stop at 400 KB).
pub const HELD_CHUNK_BYTES: usize = 300 * 1024;

/// Items in one BatchWriteItem (DynamoDB's limit).
const WRITE_BATCH: usize = 25;
/// Keys in one BatchGetItem (DynamoDB's limit).
const GET_BATCH: usize = 100;
/// How often items DynamoDB hands back unprocessed (throttling) are sent again.
const UNPROCESSED_RETRY: RetryPolicy =
    RetryPolicy { attempts: 8, base: Duration::from_millis(50), max_wait: Duration::from_secs(2) };

type Item = HashMap<String, AttributeValue>;

pub struct DynamoDbLocks {
    client: Client,
    table: String,
}

impl DynamoDbLocks {
    /// `table`: the DynamoDB table (key attribute `table`, type S).
    pub fn new(client: Client, table: &str) -> Self {
        DynamoDbLocks { client, table: table.to_string() }
    }

    /// Creates the lock table as `infra/template.yaml` declares it (hash key `table`, the
    /// [`HELD_INDEX`] index, on demand): for tests and stacks made without the template.
    pub async fn create_table(client: &Client, name: &str) -> Result<(), LockError> {
        use aws_sdk_dynamodb::types::{
            AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
            ProjectionType, ScalarAttributeType,
        };
        let invalid =
            |e: aws_sdk_dynamodb::error::BuildError| LockError::Store { detail: e.to_string(), retryable: false };
        let string = |name: &str| {
            AttributeDefinition::builder().attribute_name(name).attribute_type(ScalarAttributeType::S).build()
        };
        let hash = |name: &str| KeySchemaElement::builder().attribute_name(name).key_type(KeyType::Hash).build();
        let held = GlobalSecondaryIndex::builder()
            .index_name(HELD_INDEX)
            .key_schema(hash("held_table").map_err(invalid)?)
            .projection(Projection::builder().projection_type(ProjectionType::All).build())
            .build()
            .map_err(invalid)?;
        client
            .create_table()
            .table_name(name)
            .attribute_definitions(string("table").map_err(invalid)?)
            .attribute_definitions(string("held_table").map_err(invalid)?)
            .key_schema(hash("table").map_err(invalid)?)
            .global_secondary_indexes(held)
            .billing_mode(BillingMode::PayPerRequest)
            .send()
            .await
            .map_err(|e| store("CreateTable", e))?;
        Ok(())
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
}

pub(crate) fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_string())
}

fn n(v: impl std::fmt::Display) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// The number attribute `key` of `item`: `None` when absent, an error when not a number.
fn number<T: std::str::FromStr>(item: &Item, key: &str) -> Result<Option<T>, LockError> {
    let Some(value) = item.get(key) else { return Ok(None) };
    match value.as_n().ok().and_then(|v| v.parse().ok()) {
        Some(v) => Ok(Some(v)),
        None => {
            Err(LockError::Store { detail: format!("attribute {key} is not a number: {value:?}"), retryable: false })
        }
    }
}

fn text<'i>(item: &'i Item, key: &str) -> Option<&'i str> {
    item.get(key).and_then(|v| v.as_s().ok()).map(String::as_str)
}

fn store<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
    what: &str,
    e: SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>,
) -> LockError {
    LockError::Store { retryable: sdk_error_retryable(&e), detail: format!("{what}: {}", DisplayErrorContext(&e)) }
}

pub(crate) fn condition_failed<E: ProvideErrorMetadata>(
    e: &SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>,
) -> bool {
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

/// The key of chunk `chunk` of a held task of `table`.
fn held_key(table: &TableName, chunk: usize, task_id: &str) -> String {
    format!("held#{table}#{chunk}#{task_id}")
}

fn key_of(key: String) -> Item {
    HashMap::from([("table".to_string(), s(&key))])
}

/// `files` cut into runs of at most [`HELD_CHUNK_BYTES`] of paths; always one run at least.
fn chunk_files(files: &[String]) -> Vec<&[String]> {
    let mut runs = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, file) in files.iter().enumerate() {
        // A list element costs its bytes and a few more.
        let size = file.len() + 3;
        if i > start && bytes + size > HELD_CHUNK_BYTES {
            runs.push(&files[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    runs.push(&files[start..]);
    runs
}

/// Chunk `chunk` of `chunks` of a held task; chunk 0 says how many there are.
fn held_item(table: &TableName, task: &HeldTask, chunk: usize, chunks: usize, files: &[String]) -> Item {
    let mut item = HashMap::from([
        ("table".to_string(), s(&held_key(table, chunk, &task.task_id))),
        ("held_table".to_string(), s(&table.to_string())),
        ("task_id".to_string(), s(&task.task_id)),
        ("chunk".to_string(), n(chunk)),
        ("held_at_ms".to_string(), n(task.held_at_ms)),
        ("files".to_string(), AttributeValue::L(files.iter().map(|f| s(f)).collect())),
    ]);
    if chunk == 0 {
        item.insert("chunks".to_string(), n(chunks));
    }
    if let Some(o) = &task.offsets {
        item.insert("offsets".to_string(), offsets_value(o));
    }
    item
}

/// A held CommitTask's offsets, as the `offsets` attribute of its items.
fn offsets_value(o: &HeldOffsets) -> AttributeValue {
    AttributeValue::M(HashMap::from([
        ("topic".to_string(), s(&o.topic)),
        ("partition".to_string(), n(o.partition)),
        ("first".to_string(), n(o.first)),
        ("last".to_string(), n(o.last)),
    ]))
}

/// The `offsets` attribute of a held item, when it has one (holds made before it: none).
fn held_offsets(item: &Item) -> Result<Option<HeldOffsets>, LockError> {
    let Some(AttributeValue::M(m)) = item.get("offsets") else { return Ok(None) };
    let field = |key: &str| number::<i64>(m, key)?.ok_or_else(|| malformed_offsets(key));
    Ok(Some(HeldOffsets {
        topic: text(m, "topic").ok_or_else(|| malformed_offsets("topic"))?.to_string(),
        partition: i32::try_from(field("partition")?).map_err(|_| malformed_offsets("partition"))?,
        first: field("first")?,
        last: field("last")?,
    }))
}

fn malformed_offsets(key: &str) -> LockError {
    LockError::Store { detail: format!("a held task's offsets lack {key}"), retryable: false }
}

fn compaction_value(record: &CompactionRecord) -> AttributeValue {
    AttributeValue::M(HashMap::from([
        ("at_ms".to_string(), n(record.at_ms)),
        ("files_in".to_string(), n(record.files_in)),
        ("bytes_in".to_string(), n(record.bytes_in)),
        ("files_out".to_string(), n(record.files_out)),
        ("bytes_out".to_string(), n(record.bytes_out)),
        ("rows_deleted".to_string(), n(record.rows_deleted)),
        ("rows_expired".to_string(), n(record.rows_expired)),
        ("delete_files_dropped".to_string(), n(record.delete_files_dropped)),
    ]))
}

const ACTIVITIES: [Activity; 5] =
    [Activity::Commit, Activity::Compaction, Activity::Sweep, Activity::Config, Activity::Lease];

/// The attribute holding an activity's last failure (`failing_commit`, …).
fn failing_key(activity: Activity) -> String {
    format!("failing_{}", activity.name())
}

fn failure_value(failure: &Failure) -> AttributeValue {
    AttributeValue::M(HashMap::from([
        ("at_ms".to_string(), n(failure.at_ms)),
        ("error".to_string(), s(&failure.error)),
    ]))
}

fn failure(activity: Activity, value: &AttributeValue) -> Result<Failure, LockError> {
    let map = value.as_m().map_err(|_| LockError::Store {
        detail: format!("attribute {} is not a map: {value:?}", failing_key(activity)),
        retryable: false,
    })?;
    let error = text(map, "error").unwrap_or_default().to_string();
    Ok(Failure { activity, at_ms: number(map, "at_ms")?.unwrap_or_default(), error })
}

fn record_at_value(record: &RecordAt) -> AttributeValue {
    AttributeValue::M(HashMap::from([
        ("topic".to_string(), s(&record.topic)),
        ("partition".to_string(), n(record.partition)),
        ("offset".to_string(), n(record.offset)),
        ("file".to_string(), s(&record.file)),
    ]))
}

fn record_at(value: &AttributeValue) -> Result<RecordAt, LockError> {
    let map = value.as_m().map_err(|_| LockError::Store {
        detail: format!("attribute suspended_by is not a map: {value:?}"),
        retryable: false,
    })?;
    Ok(RecordAt {
        topic: text(map, "topic").unwrap_or_default().to_string(),
        partition: number(map, "partition")?.unwrap_or_default(),
        offset: number(map, "offset")?.unwrap_or_default(),
        file: text(map, "file").unwrap_or_default().to_string(),
    })
}

fn compaction_record(value: &AttributeValue) -> Result<CompactionRecord, LockError> {
    let map = value.as_m().map_err(|_| LockError::Store {
        detail: format!("attribute last_compaction is not a map: {value:?}"),
        retryable: false,
    })?;
    let count = |key| number::<u64>(map, key).map(Option::unwrap_or_default);
    Ok(CompactionRecord {
        at_ms: number(map, "at_ms")?.unwrap_or_default(),
        files_in: count("files_in")?,
        bytes_in: count("bytes_in")?,
        files_out: count("files_out")?,
        bytes_out: count("bytes_out")?,
        rows_deleted: count("rows_deleted")?,
        rows_expired: count("rows_expired")?,
        delete_files_dropped: count("delete_files_dropped")?,
    })
}

/// Sends `pending` until DynamoDB has taken all of it: what a batch call hands back
/// unprocessed (throttled) is sent again after a backoff, a bounded number of times.
/// `send` answers what it got and what is left.
async fn until_processed<P, R, F, Fut>(what: &str, mut pending: Vec<P>, mut send: F) -> Result<Vec<R>, LockError>
where
    F: FnMut(Vec<P>) -> Fut,
    Fut: Future<Output = Result<(Vec<R>, Vec<P>), LockError>>,
{
    let mut got = Vec::new();
    let mut attempt = 1;
    loop {
        let (mut items, left) = send(pending).await?;
        got.append(&mut items);
        if left.is_empty() {
            return Ok(got);
        }
        if attempt >= UNPROCESSED_RETRY.attempts {
            let detail = format!("{what}: {} item(s) still unprocessed after {attempt} tries", left.len());
            return Err(LockError::Store { detail, retryable: true });
        }
        tracing::warn!(what, unprocessed = left.len(), attempt, "DynamoDB left items unprocessed; sending them again");
        tokio::time::sleep(UNPROCESSED_RETRY.wait(attempt)).await;
        (pending, attempt) = (left, attempt + 1);
    }
}

impl DynamoDbLocks {
    /// Puts and deletes, [`WRITE_BATCH`] a call.
    async fn batch_write(&self, what: &str, requests: Vec<WriteRequest>) -> Result<(), LockError> {
        for batch in requests.chunks(WRITE_BATCH) {
            until_processed::<_, (), _, _>(what, batch.to_vec(), |items| async move {
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, items)
                    .send()
                    .await
                    .map_err(|e| store(what, e))?;
                Ok((Vec::new(), out.unprocessed_items.and_then(|mut u| u.remove(&self.table)).unwrap_or_default()))
            })
            .await?;
        }
        Ok(())
    }

    /// How many items each of the tasks is held in (read consistently from chunk 0);
    /// tasks not held are absent.
    async fn held_chunks(&self, table: &TableName, task_ids: &[String]) -> Result<HashMap<String, usize>, LockError> {
        let what = "reading held tasks";
        let ids: std::collections::BTreeSet<&String> = task_ids.iter().collect();
        let keys: Vec<Item> = ids.into_iter().map(|id| key_of(held_key(table, 0, id))).collect();
        let mut chunks = HashMap::new();
        for batch in keys.chunks(GET_BATCH) {
            let items = until_processed(what, batch.to_vec(), |keys| async move {
                let request = KeysAndAttributes::builder()
                    .set_keys(Some(keys))
                    .consistent_read(true)
                    .projection_expression("#i, #c")
                    .expression_attribute_names("#i", "task_id")
                    .expression_attribute_names("#c", "chunks")
                    .build()
                    .map_err(|e| LockError::Store { detail: format!("{what}: {e}"), retryable: false })?;
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, request)
                    .send()
                    .await
                    .map_err(|e| store(what, e))?;
                let items = out.responses.and_then(|mut r| r.remove(&self.table)).unwrap_or_default();
                let left = out.unprocessed_keys.and_then(|mut u| u.remove(&self.table)).map(|k| k.keys);
                Ok((items, left.unwrap_or_default()))
            })
            .await?;
            for item in items {
                if let Some(id) = text(&item, "task_id") {
                    chunks.insert(id.to_string(), number(&item, "chunks")?.unwrap_or(1));
                }
            }
        }
        Ok(chunks)
    }
}

fn request_error(e: aws_sdk_dynamodb::error::BuildError) -> LockError {
    LockError::Store { detail: format!("building a write request: {e}"), retryable: false }
}

fn put(item: Item) -> Result<WriteRequest, LockError> {
    let put = PutRequest::builder().set_item(Some(item)).build().map_err(request_error)?;
    Ok(WriteRequest::builder().put_request(put).build())
}

fn delete(key: Item) -> Result<WriteRequest, LockError> {
    let delete = DeleteRequest::builder().set_key(Some(key)).build().map_err(request_error)?;
    Ok(WriteRequest::builder().delete_request(delete).build())
}

#[async_trait]
impl TableRegistry for DynamoDbLocks {
    /// A scan of the table rows (held-task items filtered out): the compactor's question
    /// once a run, and the operator's.
    async fn tables(&self) -> Result<Vec<RegisteredTable>, LockError> {
        let mut pages = self
            .client
            .scan()
            .table_name(&self.table)
            .filter_expression("attribute_not_exists(#h)")
            .projection_expression("#t, #r")
            .expression_attribute_names("#h", "held_table")
            .expression_attribute_names("#t", "table")
            .expression_attribute_names("#r", "suspended_reason")
            .consistent_read(true)
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| store("listing the tables", e))?;
            for item in page.items() {
                let Some(name) = text(item, "table") else { continue };
                match TableName::parse(name) {
                    Some(table) => out
                        .push(RegisteredTable { table, suspended: text(item, "suspended_reason").map(str::to_string) }),
                    None => tracing::warn!(table = name, "a lock table row that names no namespace.table; skipped"),
                }
            }
        }
        out.sort_by_key(|t| t.table.to_string());
        Ok(out)
    }

    async fn hold_task(&self, table: &TableName, task: &HeldTask) -> Result<(), LockError> {
        let runs = chunk_files(&task.files);
        // Held before (a retried run): the new files go in chunks after the old ones, and
        // chunk 0 then counts them all.
        let before = self.held_chunks(table, std::slice::from_ref(&task.task_id)).await?;
        let before = before.get(&task.task_id).copied().unwrap_or(0);
        let total = before + runs.len();
        let puts = runs.iter().enumerate().map(|(i, files)| put(held_item(table, task, before + i, total, files)));
        self.batch_write("holding a task's files", puts.collect::<Result<_, _>>()?).await?;
        if before > 0 {
            self.client
                .update_item()
                .table_name(&self.table)
                .key("table", s(&held_key(table, 0, &task.task_id)))
                .update_expression("SET chunks = :c, held_at_ms = :h")
                .expression_attribute_values(":c", n(total))
                .expression_attribute_values(":h", n(task.held_at_ms))
                .send()
                .await
                .map_err(|e| store("counting a task's held files", e))?;
        }
        tracing::debug!(table = %table, task_id = %task.task_id, files = task.files.len(), items = runs.len(), "task files held");
        Ok(())
    }

    async fn release_tasks(&self, table: &TableName, task_ids: &[String]) -> Result<(), LockError> {
        let chunks = self.held_chunks(table, task_ids).await?;
        let deletes = chunks
            .iter()
            .flat_map(|(id, &count)| (0..count).map(move |i| delete(key_of(held_key(table, i, id)))))
            .collect::<Result<_, _>>()?;
        self.batch_write("releasing held tasks", deletes).await
    }

    /// A Query of [`HELD_INDEX`]: eventually consistent, so a task held a moment ago may
    /// be missing — its files are younger than the sweep's grace period anyway.
    /// One scan of the sparse held-tasks index (held items only).
    async fn oldest_holds(&self) -> Result<BTreeMap<TableName, i64>, LockError> {
        let mut pages = self
            .client
            .scan()
            .table_name(&self.table)
            .index_name(HELD_INDEX)
            .projection_expression("#h, #a")
            .expression_attribute_names("#h", "held_table")
            .expression_attribute_names("#a", "held_at_ms")
            .into_paginator()
            .send();
        let mut oldest: BTreeMap<TableName, i64> = BTreeMap::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| store("listing held tasks", e))?;
            for item in page.items() {
                let Some(table) = text(item, "held_table").and_then(TableName::parse) else { continue };
                let at = number(item, "held_at_ms")?.unwrap_or_default();
                oldest.entry(table).and_modify(|o| *o = (*o).min(at)).or_insert(at);
            }
        }
        Ok(oldest)
    }

    async fn held_tasks(&self, table: &TableName) -> Result<Vec<HeldTask>, LockError> {
        let mut pages = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(HELD_INDEX)
            .key_condition_expression("#h = :t")
            .expression_attribute_names("#h", "held_table")
            .expression_attribute_values(":t", s(&table.to_string()))
            .into_paginator()
            .send();
        // task id → (held at, files by chunk, offsets)
        let mut tasks: BTreeMap<String, (i64, BTreeMap<usize, Vec<String>>, Option<HeldOffsets>)> = BTreeMap::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| store("listing held tasks", e))?;
            for item in page.items() {
                let Some(task_id) = text(item, "task_id") else { continue };
                let files = match item.get("files").map(|f| f.as_l()) {
                    Some(Ok(list)) => list.iter().filter_map(|f| f.as_s().ok().cloned()).collect(),
                    _ => Vec::new(),
                };
                let held_at_ms = number(item, "held_at_ms")?.unwrap_or_default();
                let task = tasks.entry(task_id.to_string()).or_insert((held_at_ms, BTreeMap::new(), None));
                // The latest hold: chunks added by a later hold carry its time.
                task.0 = task.0.max(held_at_ms);
                task.1.insert(number(item, "chunk")?.unwrap_or_default(), files);
                // Every hold of a task id names the same offsets; older holds name none.
                if task.2.is_none() {
                    task.2 = held_offsets(item)?;
                }
            }
        }
        Ok(tasks
            .into_iter()
            .map(|(task_id, (held_at_ms, chunks, offsets))| {
                let mut seen = std::collections::HashSet::new();
                let files = chunks.into_values().flatten().filter(|f| seen.insert(f.clone())).collect();
                HeldTask { task_id, held_at_ms, files, offsets }
            })
            .collect())
    }

    /// One atomic UpdateItem on the table's row: counters grow by `ADD`, never by a
    /// read-modify-write that a concurrent committer or compactor could undo.
    async fn record(&self, table: &TableName, event: &MaintenanceEvent) -> Result<(), LockError> {
        let update = self.client.update_item().table_name(&self.table).key("table", s(&table.to_string()));
        let update = match event {
            MaintenanceEvent::Compacted(record) => update
                .update_expression("SET last_compaction = :c")
                .expression_attribute_values(":c", compaction_value(record)),
            MaintenanceEvent::SnapshotsExpired(count) => {
                update.update_expression("ADD snapshots_expired :n").expression_attribute_values(":n", n(count))
            }
            MaintenanceEvent::Swept { at_ms, removed } => update
                .update_expression("SET last_sweep_ms = :at ADD orphans_removed :n")
                .expression_attribute_values(":at", n(at_ms))
                .expression_attribute_values(":n", n(removed)),
            MaintenanceEvent::Failed(failure) => update
                .update_expression("SET #f = :f")
                .expression_attribute_names("#f", failing_key(failure.activity))
                .expression_attribute_values(":f", failure_value(failure)),
            MaintenanceEvent::Succeeded(activity) => {
                let ended = activity.ended_by_success();
                let names: Vec<String> = (0..ended.len()).map(|i| format!("#f{i}")).collect();
                let update = update.update_expression(format!("REMOVE {}", names.join(", ")));
                names.iter().zip(ended).fold(update, |u, (name, a)| u.expression_attribute_names(name, failing_key(*a)))
            }
            MaintenanceEvent::SuspendedBy(Some(record)) => update
                .update_expression("SET suspended_by = :r")
                .expression_attribute_values(":r", record_at_value(record)),
            MaintenanceEvent::SuspendedBy(None) => update.update_expression("REMOVE suspended_by"),
        };
        update.send().await.map_err(|e| store("recording maintenance", e))?;
        Ok(())
    }

    async fn status(&self, table: &TableName) -> Result<MaintenanceStatus, LockError> {
        let Some(item) = self.item(&table.to_string(), "reading the maintenance status").await? else {
            return Ok(MaintenanceStatus::default());
        };
        Ok(MaintenanceStatus {
            last_compaction: item.get("last_compaction").map(compaction_record).transpose()?,
            snapshots_expired: number(&item, "snapshots_expired")?.unwrap_or_default(),
            orphans_removed: number(&item, "orphans_removed")?.unwrap_or_default(),
            last_sweep_ms: number(&item, "last_sweep_ms")?,
            failing: ACTIVITIES
                .into_iter()
                .filter_map(|activity| item.get(&failing_key(activity)).map(|v| failure(activity, v)))
                .collect::<Result<_, _>>()?,
            suspended_by: item.get("suspended_by").map(record_at).transpose()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use floe_core::retry::Retryable;

    #[test]
    fn files_are_cut_into_items_under_the_size_limit() {
        assert_eq!(chunk_files(&[]), [&[] as &[String]]);
        let path = "s3://bucket/warehouse/kafka.db/orders/data/".to_string() + &"x".repeat(1000);
        let files = vec![path; 1000];
        let runs = chunk_files(&files);
        assert_eq!(runs.len(), 4, "1 MB of paths in items of ≤ 300 KB");
        assert!(runs.iter().all(|r| r.iter().map(|f| f.len() + 3).sum::<usize>() <= HELD_CHUNK_BYTES));
        assert_eq!(runs.concat(), files, "all of them, in order");
    }

    #[test]
    fn held_keys_name_table_chunk_and_task() {
        let table = TableName { namespace: "kafka".into(), name: "orders".into() };
        assert_eq!(held_key(&table, 2, "a#1"), "held#kafka.orders#2#a#1");
        assert_ne!(held_key(&table, 1, "a"), held_key(&table, 0, "1#a"));
    }

    #[tokio::test(start_paused = true)]
    async fn unprocessed_items_go_again_then_the_call_gives_up() {
        // Throttled twice, then taken.
        let calls = AtomicU32::new(0);
        let got = until_processed("test", vec![1, 2, 3], |items: Vec<i32>| {
            let call = calls.fetch_add(1, Ordering::SeqCst);
            async move {
                let (done, left) = if call < 2 { items.split_at(1) } else { items.split_at(items.len()) };
                Ok((done.to_vec(), left.to_vec()))
            }
        })
        .await
        .unwrap();
        assert_eq!(got, [1, 2, 3]);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        // Never taken: a retryable error after the bounded tries.
        let calls = AtomicU32::new(0);
        let err = until_processed::<i32, i32, _, _>("holding", vec![1], |items| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move { Ok((Vec::new(), items)) }
        })
        .await
        .unwrap_err();
        assert!(err.retryable(), "{err}");
        assert!(err.to_string().contains("holding: 1 item(s) still unprocessed"), "{err}");
        assert_eq!(calls.load(Ordering::SeqCst), UNPROCESSED_RETRY.attempts);
    }
}
