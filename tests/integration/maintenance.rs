//! Maintenance on AWS, against moto: the warehouse's files listed and deleted in S3, the
//! table registry in the lock table (tables, held task files, the maintenance record),
//! and the compactor Lambda's handler on a real scheduled event, judged by PyIceberg.

use std::path::Path;

use futures::StreamExt;

use floe_aws::dynamodb::DynamoDbLocks;
use floe_aws::files::S3Files;
use floe_core::lock::TableLocks;
use floe_core::maintenance::{
    Activity, CompactionRecord, Failure, HeldOffsets, HeldTask, MaintenanceEvent, MaintenanceStatus, RecordAt,
    RegisteredTable, TableRegistry,
};
use floe_core::retry::{Retryable, StorageError};
use floe_core::storage::WarehouseFiles;
use floe_core::table::TableName;

use crate::support;

fn failure(activity: Activity, at_ms: i64, error: &str) -> Failure {
    Failure { activity, at_ms, error: error.into() }
}

fn record_at(offset: i64) -> RecordAt {
    RecordAt { topic: "orders".into(), partition: 2, offset, file: "s3://t/orders-2/0.log".into() }
}

fn table(name: &str) -> TableName {
    TableName { namespace: "kafka".into(), name: name.into() }
}

#[tokio::test]
async fn s3_files_are_listed_under_a_directory_and_deleted_by_the_thousand() {
    let s3 = support::s3_client().await;
    let (bucket, other) = ("files-warehouse", "files-other");
    for b in [bucket, other] {
        s3.create_bucket().bucket(b).send().await.unwrap();
    }
    // 1,001 files: two pages of ListObjectsV2, two DeleteObjects calls.
    let mut keys: Vec<String> = (0..1001).map(|i| format!("wh/kafka.db/t/data/{i:04}.parquet")).collect();
    keys.push("wh/kafka.db/t2/data/a.parquet".into());
    let puts = keys.iter().map(|key| s3.put_object().bucket(bucket).key(key).body(b"parquet".to_vec().into()).send());
    let puts: Vec<_> = futures::stream::iter(puts).buffer_unordered(32).collect().await;
    puts.into_iter().for_each(|put| drop(put.unwrap()));
    s3.put_object().bucket(other).key("x/y.json").body(b"{}".to_vec().into()).send().await.unwrap();
    let files = S3Files::new(s3.clone());

    let listed = files.list(&format!("s3://{bucket}/wh/kafka.db/t")).await.unwrap();
    assert_eq!(listed.len(), 1001, "every page, and not t2's file");
    assert!(listed.iter().all(|f| f.path.starts_with(&format!("s3://{bucket}/wh/kafka.db/t/data/")) && f.size == 7));
    let now = floe_core::lock::now_ms();
    assert!(listed.iter().all(|f| (now - f.modified_ms).abs() < 600_000), "LastModified in ms: {:?}", listed[0]);
    assert!(files.list(&format!("s3://{bucket}/wh/missing/")).await.unwrap().is_empty());

    // Two buckets in one call, and a key that is already gone.
    let mut doomed: Vec<String> = listed.iter().map(|f| f.path.clone()).collect();
    doomed.push(format!("s3://{other}/x/y.json"));
    doomed.push(format!("s3://{bucket}/wh/kafka.db/t/never-there.parquet"));
    files.delete(&doomed).await.unwrap();
    assert!(files.list(&format!("s3://{bucket}/wh/kafka.db/t/")).await.unwrap().is_empty());
    assert!(files.list(&format!("s3://{other}")).await.unwrap().is_empty());
    let left = files.list(&format!("s3://{bucket}/wh")).await.unwrap();
    assert_eq!(left.len(), 1, "t2 untouched: {left:?}");

    // A bucket that does not exist: an error that says so, not retryable.
    let err = files.delete(&["s3://files-nowhere/k".to_string()]).await.unwrap_err();
    let refused = err.get_ref().and_then(|e| e.downcast_ref::<StorageError>());
    assert!(matches!(refused, Some(StorageError::Refused(_))) && !err.retryable(), "{err}");
    assert!(err.to_string().contains("files-nowhere"), "{err}");
}

#[tokio::test]
async fn the_lock_table_registers_tables_holds_task_files_and_records_maintenance() {
    let config = support::aws_config().await;
    crate::committer::create_lease_table(&config, "registry-test").await;
    let locks = DynamoDbLocks::new(aws_sdk_dynamodb::Client::new(&config), "registry-test");
    let (orders, clicks) = (table("orders"), table("clicks"));

    // Tables: those the committer took a lease on, or suspended.
    let lease = locks.acquire(&orders.to_string(), "committer", std::time::Duration::from_secs(30)).await.unwrap();
    locks.release(&lease.unwrap()).await.unwrap();
    locks.set_suspended(&clicks.to_string(), Some("bad record")).await.unwrap();

    // Held tasks: one small (a CommitTask's, with its offsets), one whose paths need
    // several items; held items are no tables.
    let small = HeldTask {
        task_id: "seg-1".into(),
        files: vec!["s3://w/wh/kafka.db/orders/data/a.parquet".into()],
        held_at_ms: 10,
        offsets: Some(HeldOffsets { topic: "orders".into(), partition: 3, first: 100, last: 199 }),
    };
    let many: Vec<String> =
        (0..2000).map(|i| format!("s3://w/wh/kafka.db/orders/data/{i:04}-{}.parquet", "x".repeat(300))).collect();
    let large = HeldTask { task_id: "compaction-1".into(), files: many.clone(), held_at_ms: 20, offsets: None };
    locks.hold_task(&orders, &small).await.unwrap();
    locks.hold_task(&orders, &large).await.unwrap();
    locks
        .hold_task(&clicks, &HeldTask { task_id: "seg-9".into(), files: vec![], held_at_ms: 5, offsets: None })
        .await
        .unwrap();
    let registered = locks.tables().await.unwrap();
    assert_eq!(
        registered,
        [
            RegisteredTable { table: clicks.clone(), suspended: Some("bad record".into()) },
            RegisteredTable { table: orders.clone(), suspended: None },
        ]
    );
    assert_eq!(locks.held_tasks(&orders).await.unwrap(), [large.clone(), small.clone()], "by task id, files in order");

    // Held again (a retried run): its new file added after the others, each path once,
    // the time of the latest hold.
    let mut again = many[..3].to_vec();
    again.push("s3://w/wh/kafka.db/orders/data/retried.parquet".into());
    locks.hold_task(&orders, &HeldTask { files: again, held_at_ms: 30, ..large.clone() }).await.unwrap();
    let mut both = many.clone();
    both.push("s3://w/wh/kafka.db/orders/data/retried.parquet".into());
    let union = HeldTask { files: both, held_at_ms: 30, ..large.clone() };
    assert_eq!(locks.held_tasks(&orders).await.unwrap(), [union.clone(), small.clone()]);

    // Released: every item of the task; unknown ids and other tables' tasks untouched.
    locks.release_tasks(&orders, &["compaction-1".into(), "unknown".into(), "seg-9".into()]).await.unwrap();
    assert_eq!(locks.held_tasks(&orders).await.unwrap(), std::slice::from_ref(&small));
    assert_eq!(locks.held_tasks(&clicks).await.unwrap().len(), 1);
    // 30 tasks at once: more than one BatchWriteItem.
    let ids: Vec<String> = (0..30).map(|i| format!("t{i}")).collect();
    for id in &ids {
        locks
            .hold_task(
                &clicks,
                &HeldTask { task_id: id.clone(), files: vec![format!("s3://w/{id}")], held_at_ms: 1, offsets: None },
            )
            .await
            .unwrap();
    }
    assert_eq!(locks.held_tasks(&clicks).await.unwrap().len(), 31);
    locks.release_tasks(&clicks, &ids).await.unwrap();
    assert_eq!(locks.held_tasks(&clicks).await.unwrap().len(), 1);

    // The maintenance record: counters add up, the last compaction and sweep replace.
    assert_eq!(locks.status(&orders).await.unwrap(), MaintenanceStatus::default());
    let first = CompactionRecord {
        at_ms: 100,
        files_in: 40,
        bytes_in: 4000,
        files_out: 1,
        bytes_out: 3900,
        ..Default::default()
    };
    let second =
        CompactionRecord { at_ms: 200, files_in: 3, bytes_in: 300, files_out: 1, bytes_out: 290, ..Default::default() };
    for event in [
        MaintenanceEvent::Compacted(first),
        MaintenanceEvent::SnapshotsExpired(4),
        MaintenanceEvent::Swept { at_ms: 150, removed: 7 },
        MaintenanceEvent::Compacted(second),
        MaintenanceEvent::SnapshotsExpired(2),
        MaintenanceEvent::Swept { at_ms: 250, removed: 1 },
        // Failing: commits (the second failure replaces the first); the sweep no more.
        MaintenanceEvent::Failed(failure(Activity::Commit, 260, "zip_eq")),
        MaintenanceEvent::Failed(failure(Activity::Sweep, 270, "unreadable manifest")),
        MaintenanceEvent::Failed(failure(Activity::Commit, 280, "again")),
        MaintenanceEvent::Succeeded(Activity::Sweep),
        MaintenanceEvent::Succeeded(Activity::Compaction),
        // A topic clash; a bad record's suspension, then another's (the first resumed).
        MaintenanceEvent::Failed(failure(Activity::Config, 290, "clash")),
        MaintenanceEvent::SuspendedBy(Some(record_at(7))),
        MaintenanceEvent::SuspendedBy(None),
        MaintenanceEvent::SuspendedBy(Some(record_at(9))),
    ] {
        locks.record(&orders, &event).await.unwrap();
    }
    let expected = MaintenanceStatus {
        last_compaction: Some(second),
        snapshots_expired: 6,
        orphans_removed: 8,
        last_sweep_ms: Some(250),
        failing: vec![failure(Activity::Commit, 280, "again"), failure(Activity::Config, 290, "clash")],
        suspended_by: Some(record_at(9)),
    };
    assert_eq!(locks.status(&orders).await.unwrap(), expected);
    // Recording keeps the lease and the status as they were.
    assert_eq!(locks.suspended(&orders.to_string()).await.unwrap(), None);
    assert!(locks.acquire(&orders.to_string(), "other", std::time::Duration::from_secs(30)).await.unwrap().is_some());

    // Counters added from many places at once all count (no read-modify-write).
    let adds = (0..10).map(|_| locks.record(&clicks, &MaintenanceEvent::SnapshotsExpired(1)));
    for added in futures::future::join_all(adds).await {
        added.unwrap();
    }
    assert_eq!(locks.status(&clicks).await.unwrap().snapshots_expired, 10);

    // A third table whose commits fail and are retried.
    let views = table("views");
    locks.record(&views, &MaintenanceEvent::Failed(failure(Activity::Commit, 300, "throttled"))).await.unwrap();

    // The operator's view: every table, with its state and maintenance (no Glue table
    // for these: no snapshot facts).
    let status = floe_cli::aws::status(&config, "registry-test", true).await.unwrap();
    let states: Vec<(&str, &str, Option<&str>)> =
        status.iter().map(|t| (t.table.as_str(), t.health.state, t.health.reason.as_deref())).collect();
    assert_eq!(
        states,
        [
            ("kafka.clicks", "suspended", Some("bad record")),
            // A topic clash outranks the failing commits; the record of a past suspension is not shown.
            ("kafka.orders", "config issue", Some("config: clash")),
            ("kafka.views", "degraded", Some("commit: throttled")),
        ]
    );
    assert_eq!(status[0].health.resume.as_deref(), Some("floe aws resume kafka.clicks --lock-table registry-test"));
    assert_eq!((status[1].health.record.as_ref(), status[1].health.resume.as_ref()), (None, None));
    assert_eq!((status[2].health.files, status[2].problem.as_ref()), (None, None), "{status:#?}");
    let line = serde_json::to_value(&status[1]).unwrap();
    assert_eq!(line["table"], "kafka.orders");
    assert_eq!(line["last_compaction"]["files_in"], 3);
    assert_eq!(
        (&line["last_compaction"]["at"], &line["last_sweep"]),
        (&"1970-01-01T00:00:00.200Z".into(), &"1970-01-01T00:00:00.250Z".into())
    );
    assert_eq!((line["snapshots_expired"].as_u64(), line["orphans_removed"].as_u64()), (Some(6), Some(8)));
    assert_eq!(status[0].suspended.as_deref(), Some("bad record"));
}

/// The scheduled event EventBridge sends the compactor.
pub(crate) const SCHEDULED_EVENT: &str = "events/eventbridge-scheduled.json";

/// The `payments` table on moto, committed a segment a batch: a snapshot and a small file
/// each, and no compaction window, so a compactor run compacts them. Returns what
/// PyIceberg reads, and the topic's offsets and values.
pub(crate) async fn small_files_on_moto(
    name: &str,
) -> (crate::committer::Aws, crate::committer::Read, Vec<i64>, std::collections::HashMap<String, String>) {
    small_files_on_moto_with(name, "").await
}

/// [`small_files_on_moto`], `defaults_toml` added to the `[defaults]` section.
pub(crate) async fn small_files_on_moto_with(
    name: &str,
    defaults_toml: &str,
) -> (crate::committer::Aws, crate::committer::Read, Vec<i64>, std::collections::HashMap<String, String>) {
    use crate::committer::{SEGMENTS, assert_payments, payments};

    let (topic, offsets, values) = payments();
    let defaults = format!("compaction_window = \"0s\"\n{defaults_toml}");
    let (aws, read) = committed_on_moto(name, &defaults, topic.path(), &SEGMENTS).await;
    assert_payments(&read, &offsets, &values);
    (aws, read, offsets, values)
}

/// The `payments` table on moto of six segments of tests/py/make_compaction.py (Kafka
/// partition 0, about 270 KB of Parquet each) with a 1 MiB compaction target: a compactor
/// run rewrites them into two files, one of the target and a tail. Returns what PyIceberg
/// reads.
pub(crate) async fn full_bin_on_moto(name: &str) -> (crate::committer::Aws, crate::committer::Read) {
    let input = tempfile::tempdir().unwrap();
    let (out, topic, partition, n) = (input.path(), Path::new("payments"), Path::new("0"), Path::new("6"));
    support::run_python("make_compaction.py", &[out, topic, partition, n]);
    let records = crate::compaction::RECORDS;
    let keys: Vec<String> = (0..6).map(|s| format!("payments-0/{:020}.log", s * records)).collect();
    let (aws, read) = committed_on_moto(name, "compaction_target_size = \"1MiB\"\n", input.path(), &keys).await;
    assert_eq!((read.offsets["0"].len(), read.duplicates), (6 * records as usize, 0));
    (aws, read)
}

/// A table on moto (`[defaults]` with `defaults_toml`) of the segments `keys` in `dir`,
/// committed a segment a batch: a snapshot and a small file each. Returns what PyIceberg
/// reads.
pub(crate) async fn committed_on_moto(
    name: &str,
    defaults_toml: &str,
    dir: &Path,
    keys: &[impl AsRef<str>],
) -> (crate::committer::Aws, crate::committer::Read) {
    use floe_aws::lambda::handle_committer_event;

    let aws = crate::committer::setup_with(name, defaults_toml).await;
    let (materializer, committer) = (aws.materializer().await, aws.committer());
    for key in keys {
        aws.materialize(&materializer, dir, key.as_ref()).await;
        let (event, receipts) = aws.receive().await;
        assert!(handle_committer_event(&committer, event, None).await.batch_item_failures.is_empty());
        aws.delete(&receipts).await;
    }
    let read = aws.read();
    let files: u64 = read.summary["total-data-files"].parse().unwrap();
    assert!(files >= 2, "small files to compact: {:?}", read.summary);
    (aws, read)
}

/// Row retention on AWS: the compactor Lambda's scheduled run removes the rows past the
/// topic's retention, through the committer on Glue. make_topic.py's records were
/// written on 2025-11-24, long past 30 days: PyIceberg reads none after, and `floe aws
/// audit` explains each of their offsets as expired. The table is of format v3
/// (`format_version = 3`): its snapshots keep the row lineage on Glue too.
#[tokio::test]
async fn the_compactor_lambda_removes_rows_past_the_retention_on_glue() {
    use aws_lambda_events::event::eventbridge::EventBridgeEvent;
    use floe_aws::lambda::{handle_committer_event, handle_compactor_event};
    use floe_core::table::audit::GapReason;

    let (topic, offsets, _) = crate::committer::payments();
    let retention = "retention = \"30d\"\nformat_version = 3\n";
    let (aws, before) = committed_on_moto("retention", retention, topic.path(), &crate::committer::SEGMENTS).await;
    assert_eq!((&before.offsets["0"], before.format_version), (&offsets, 3));
    let text = std::fs::read_to_string(support::root().join(SCHEDULED_EVENT)).unwrap();
    let scheduled: EventBridgeEvent<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let response = handle_compactor_event(&aws.compactor().await, scheduled, None).await;
    assert!(response.failed.is_empty() && response.compacted.len() == 1, "{response:?}");
    let (event, receipts) = aws.receive().await;
    assert!(handle_committer_event(&aws.committer(), event, None).await.batch_item_failures.is_empty());
    aws.delete(&receipts).await;
    let after = aws.read();
    assert_eq!((after.rows, after.operation.as_deref(), after.format_version), (0, Some("replace"), 3));

    let audit = floe_cli::audit::aws(&aws.config, &aws.table().to_string(), true).await.unwrap();
    assert!(audit.exactly_once, "{audit:?}");
    let expired: Vec<(i64, i64)> =
        audit.partitions[0].gaps.iter().filter(|g| g.reason == GapReason::Expired).map(|g| (g.first, g.last)).collect();
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for &o in &offsets {
        match runs.last_mut() {
            Some(run) if run.1 + 1 == o => run.1 = o,
            _ => runs.push((o, o)),
        }
    }
    assert_eq!(expired, runs, "{audit:?}");
}

#[tokio::test]
async fn the_compactor_lambda_on_a_scheduled_event_compacts_through_the_committer_on_glue() {
    use aws_lambda_events::event::eventbridge::EventBridgeEvent;
    use floe_aws::lambda::handle_committer_event;
    use floe_aws::lambda::handle_compactor_event;
    use floe_core::task::Task;

    use crate::committer::assert_payments;

    let (aws, before, offsets, values) = small_files_on_moto("compactor").await;
    let committer = aws.committer();
    let files_before: u64 = before.summary["total-data-files"].parse().unwrap();
    let locks = aws.registry();
    assert_eq!(locks.held_tasks(&aws.table()).await.unwrap(), [], "committed tasks are released");

    // The scheduled event EventBridge sends, as the function receives it.
    let text = std::fs::read_to_string(support::root().join(SCHEDULED_EVENT)).unwrap();
    let scheduled: EventBridgeEvent<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let service = aws.compactor().await;
    let response = handle_compactor_event(&service, scheduled.clone(), None).await;
    assert!(response.failed.is_empty() && response.skipped.is_empty(), "{response:?}");
    assert_eq!(response.compacted.len(), 1, "{response:?}");
    let compacted = &response.compacted[0];
    assert_eq!((compacted.table.as_str(), compacted.tasks), (aws.table().to_string().as_str(), 1));
    assert_eq!((compacted.files_in, compacted.files_out), (files_before, 1));

    // The CompactionTask is on the committer's queue, its outputs held in the lock table.
    let (event, receipts) = aws.receive().await;
    assert_eq!(event.records.len(), 1);
    let body = event.records[0].body.as_deref().unwrap();
    let Task::Compaction(task) = floe_aws::sqs::task_from_message(&aws.s3, body).await.unwrap() else {
        panic!("not a compaction: {body}")
    };
    assert_eq!(task.removed.len() as u64, files_before);
    let held = locks.held_tasks(&aws.table()).await.unwrap();
    let outputs: Vec<String> = task.added.iter().map(|f| f.path().to_string()).collect();
    assert_eq!(held.iter().map(|t| (&t.task_id, &t.files)).collect::<Vec<_>>(), [(&task.task_id, &outputs)]);

    // The committer applies it: the same rows in fewer files, one `replace` snapshot.
    assert!(handle_committer_event(&committer, event, None).await.batch_item_failures.is_empty());
    aws.delete(&receipts).await;
    let after = aws.read();
    assert_payments(&after, &offsets, &values);
    assert_eq!((after.rows, &after.offsets, &after.values), (before.rows, &before.offsets, &before.values));
    assert_eq!(after.operation.as_deref(), Some("replace"));
    assert_eq!(after.summary["total-data-files"], "1");
    assert_eq!(after.summary["floe.offsets.payments.0"], before.summary["floe.offsets.payments.0"]);
    // Time travel to the snapshot before it still reads the small files' rows.
    let is_current = |s: &&std::collections::HashMap<String, String>| {
        before.summary.iter().all(|(k, v)| s.get(k) == Some(v)) && s.len() == before.summary.len() + 2
    };
    let last = before.history.iter().find(is_current).expect("the snapshot read before")["snapshot_id"].clone();
    let table = format!("{}.payments", aws.namespace);
    let old =
        crate::committer::pyiceberg(&["glue", &support::moto().endpoint, "-", &table, &format!("snapshot={last}")]);
    assert_eq!((old.rows, &old.values), (before.rows, &before.values));

    // Released and recorded; `floe aws status` shows it.
    assert_eq!(locks.held_tasks(&aws.table()).await.unwrap(), []);
    let record = locks.status(&aws.table()).await.unwrap().last_compaction.expect("recorded");
    assert_eq!((record.files_in, record.files_out), (files_before, 1));
    let status = floe_cli::aws::status(&aws.config, &aws.locks, true).await.unwrap();
    assert_eq!(status.len(), 1);
    let shown = status[0].maintenance.last_compaction.as_ref().map(|c| (c.files_in, c.bytes_in, c.bytes_out));
    assert_eq!(shown, Some((record.files_in, record.bytes_in, record.bytes_out)));
    // Its state and facts, read through Glue and S3: one data file now, the compaction's.
    let health = &status[0].health;
    assert_eq!((health.state, health.files, health.bytes), ("running", Some(1), Some(record.bytes_out)));
    assert!(health.last_commit.is_some() && status[0].offsets.contains_key("payments-0"), "{status:#?}");

    // The next tick: one file, nothing to compact.
    let response = handle_compactor_event(&service, scheduled, None).await;
    assert!(response.compacted.is_empty() && response.failed.is_empty(), "{response:?}");
    assert_eq!(response.unchanged, 1);
}

/// Issue 40 item 4 on moto: a segment's event delivered again after its task committed.
/// The materializer Lambda holds the task again in the lock table and sends it (SQS drops
/// it as a duplicate within five minutes); the compactor's next run finds all its offsets
/// in the table and releases it, so nothing waits and the stall metric is 0. A copy that
/// did reach the queue is dropped by the committer as already committed.
#[tokio::test]
async fn on_aws_a_task_held_again_after_its_commit_is_released_by_the_compactor() {
    use floe_aws::lambda::handle_committer_event;
    use floe_core::maintenance::stall::Waiting;

    use crate::committer::{SEGMENTS, payments};

    let aws = crate::committer::setup("heldagain").await;
    let (topic, _, _) = payments();
    let (materializer, committer, locks) = (aws.materializer().await, aws.committer(), aws.registry());
    let first = aws.materialize(&materializer, topic.path(), SEGMENTS[0]).await;
    let (event, receipts) = aws.receive().await;
    assert!(handle_committer_event(&committer, event, None).await.batch_item_failures.is_empty());
    aws.delete(&receipts).await;
    assert_eq!(locks.held_tasks(&aws.table()).await.unwrap(), []);

    let again = aws.materialize(&materializer, topic.path(), SEGMENTS[0]).await;
    assert_eq!(again.task_id, first.task_id);
    let held = locks.held_tasks(&aws.table()).await.unwrap();
    assert_eq!(held.len(), 1, "{held:?}");
    let range = first.offsets.unwrap();
    let offsets = HeldOffsets { topic: first.topic.clone(), partition: 0, first: range.first, last: range.last };
    assert_eq!(held[0].offsets.as_ref(), Some(&offsets));

    let now = floe_core::lock::now_ms();
    let run = aws.compactor().await.compactor.run(now, None).await;
    assert_eq!(run.tables.iter().map(|t| t.released).sum::<usize>(), 1, "{:?}", run.tables);
    assert_eq!(locks.held_tasks(&aws.table()).await.unwrap(), []);
    let waiting = Waiting::read(&locks, now + 60 * 60 * 1000).await.unwrap();
    assert_eq!(waiting.oldest_ms, [(aws.table(), 0)]);

    let (event, receipts) = aws.receive().await;
    if !event.records.is_empty() {
        assert!(handle_committer_event(&committer, event, None).await.batch_item_failures.is_empty());
        aws.delete(&receipts).await;
    }
    assert_eq!(aws.read().snapshots, 1, "nothing committed twice");
}
