//! A day of traffic, end to end, on the local AWS stack (moto: S3, SQS FIFO, DynamoDB,
//! Glue), compressed in time. The three functions run through their Lambda handlers on
//! the events AWS hands them; PyIceberg, through the Glue API, and `floe aws audit` judge
//! every table at the end.
//!
//! ```text
//!  make_day.py (kafka-python, fastavro, protobuf)            registry stand-in
//!   orders    Avro, p0 tiered / p1 log-dir, v1 → v2 mid-stream  (ids 1, 2, 3)
//!   shipments Protobuf, p0-p2                                       │
//!   ledger    JSON, tiered, a transaction over 4 segments, one aborted
//!   payments  raw, aborted transactions; a new leader re-uploads 25..65
//!   clicks    JSON, dlq: a bad record        alerts  JSON, suspend: a bad record
//!       │ morning uploads                          │ afternoon uploads
//!       ▼                                          ▼
//!  S3 ──EventBridge "Object Created", shuffled, a third twice──▶ materializer handler
//!       (a failed invocation is tried twice more, then kept as its failure destination)
//!       │ CommitTasks, SuspendTasks
//!       ▼
//!  SQS FIFO ──batches of ≤ 10──▶ committer handler ──▶ Glue + S3 (Iceberg)
//!       ▲  batchItemFailures stay, come back after the visibility timeout (1 s)
//!       │
//!  between the two: another engine (PyIceberg through Glue) appends 2 rows to payments
//!  and deletes 2 by position; alerts, suspended by its bad record, gets
//!  bad_records = "skip", `floe aws resume`, its failed event sent again
//!       │
//!  EventBridge "Scheduled Event" ──▶ compactor handler ──CompactionTasks──▶ committer
//! ```
//!
//! Checked at the end, per table: each offset a read_committed consumer sees is read by
//! PyIceberg exactly once with its value (payments: less the two deleted, plus the two
//! appended again), no aborted record nor control record; the evolved Avro field in the
//! schema and in the v2 rows; the bad `clicks` record in `clicks_dlq`, the bad `alerts`
//! record skipped after the resume; fewer data files after the compactor, at most one per
//! Kafka partition; and `floe aws audit` exactly once (payments: exactly the other
//! engine's two appended rows named as duplicates, its deletes labelled, nothing
//! unexplained).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;
use std::time::Duration;

use floe_aws::lambda::{CommitterService, handle_committer_event, handle_compactor_event, handle_materializer_event};
use floe_core::lock::TableLocks;
use floe_core::materializer::Materializer;
use floe_core::table::audit::{AuditReport, GapReason};
use floe_core::task::{SuspendTask, Task};
use futures::StreamExt;
use serde_json::Value;

use crate::committer::{Aws, Read, SEGMENTS, payments, pyiceberg, setup_with};
use crate::support;

/// What make_day.py wrote: the uploads of each phase and what each table must hold.
#[derive(serde::Deserialize)]
struct Plan {
    phases: Vec<Vec<String>>,
    tables: BTreeMap<String, BTreeMap<String, Vec<i64>>>,
    values: BTreeMap<String, BTreeMap<String, Value>>,
    bad: BTreeMap<String, String>,
}

/// The floe.toml of the day (after `[defaults]`), `alerts` in `alerts_mode`.
fn topics(registry: &str, alerts_mode: &str) -> String {
    format!(
        "compaction_window = \"0s\"\ncompaction_target_size = \"1MiB\"\n\
         [schema_registry]\nurl = \"{registry}\"\n\
         [[topics]]\ntopic = \"orders\"\nvalue_format = \"avro\"\n\
         [[topics]]\ntopic = \"shipments\"\nvalue_format = \"protobuf\"\n\
         [[topics]]\ntopic = \"ledger\"\nvalue_format = \"json\"\n\
         [[topics]]\ntopic = \"clicks\"\nvalue_format = \"json\"\nbad_records = \"dlq\"\n\
         [[topics]]\ntopic = \"alerts\"\nvalue_format = \"json\"\nbad_records = \"{alerts_mode}\"\n"
    )
}

/// The rows another engine deletes from payments, by position.
const DELETED: [i64; 2] = [5, 40];
/// The rows another engine appends to payments again.
const APPENDED: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_of_traffic_through_the_three_functions_commits_every_record_once() {
    let data = tempfile::tempdir().unwrap();
    support::run_python("make_day.py", &[data.path()]);
    let plan: Plan = serde_json::from_slice(&std::fs::read(data.path().join("day.json")).unwrap()).unwrap();
    let registry = support::start_registry(&data.path().join("registry.json"), None, 0).await;
    let aws = setup_with("day", &topics(&registry.url, "suspend")).await;
    let committer = aws.committer();
    let mut drained = Drained::default();

    // Morning: every upload's event, shuffled, some twice. The alerts segment with the
    // bad record fails its three attempts; the suspend task it queued stops the table.
    let materializer = aws.materializer().await;
    let failed = deliver(&aws, &materializer, data.path(), &plan.phases[0], 1).await;
    assert!(!failed.is_empty(), "the alerts segment with the bad record fails");
    for (event, error) in &failed {
        assert_eq!(event["detail"]["object"]["key"], "alerts-0/00000000000000000000.log", "{error}");
        assert!(error.contains("partition 0 offset 4"), "{error}");
    }
    drained.drain(&aws, &committer).await;
    let table = |name: &str| format!("{}.{name}", aws.namespace);
    let suspended = aws.registry().suspended(&table("alerts")).await.unwrap();
    assert!(suspended.is_some_and(|reason| reason.contains("offset 4")), "alerts is suspended");
    assert!(drained.kept > 0, "the suspended table's later task stays in the queue");

    // Another engine, through Glue: two rows of payments appended again, two deleted.
    foreign(&table("payments"), "foreign_write.py", &["append", &APPENDED.to_string()]);
    let rows: Vec<String> = DELETED.iter().map(|o| format!("0/{o}")).collect();
    let args: Vec<&str> = ["position"].into_iter().chain(rows.iter().map(String::as_str)).collect();
    foreign(&table("payments"), "foreign_delete.py", &args);
    let files_at_delete = data_files(&read(&aws, "payments"));

    // The operator skips alerts' bad records, resumes the table and sends the failed
    // event again; the new configuration is deployed (a new materializer).
    std::fs::write(
        &aws.config_file,
        format!("[defaults]\nenabled = true\nnamespace = \"day\"\n{}", topics(&registry.url, "skip")),
    )
    .unwrap();
    let resumed = floe_cli::aws::resume(&aws.config, &aws.locks, &table("alerts")).await.unwrap();
    assert!(resumed.is_some_and(|reason| reason.contains("offset 4")));
    let materializer = aws.materializer().await;
    for (event, _) in &failed {
        handle_materializer_event(&materializer, event.clone()).await.unwrap();
    }

    // Afternoon: the rest, the leader change's re-upload among it.
    let failed = deliver(&aws, &materializer, data.path(), &plan.phases[1], 2).await;
    assert!(failed.is_empty(), "{failed:?}");
    drained.drain(&aws, &committer).await;
    assert_eq!(queued(&aws).await, 0, "every task committed, none kept");
    let before: BTreeMap<String, u64> = plan.tables.keys().map(|t| (t.clone(), data_files(&read(&aws, t)))).collect();

    // The schedule: the compactor queues CompactionTasks; the committer commits them.
    let compactor = aws.compactor().await;
    let schedule = std::fs::read(support::root().join("events/eventbridge-scheduled.json")).unwrap();
    let response = handle_compactor_event(&compactor, serde_json::from_slice(&schedule).unwrap(), None).await;
    assert!(response.failed.is_empty(), "{response:?}");
    assert!(!response.compacted.is_empty(), "{response:?}");
    drained.drain(&aws, &committer).await;
    assert_eq!(queued(&aws).await, 0, "every compaction committed");
    assert!(drained.batches.iter().all(|&n| n <= 10) && drained.batches.iter().any(|&n| n > 1), "{drained:?}");

    for (name, expected) in &plan.tables {
        let read = read(&aws, name);
        let mut values = plan.values[name].clone();
        let mut expected = expected.clone();
        if name == "payments" {
            expected.get_mut("0").unwrap().retain(|o| !DELETED.contains(o));
            values.retain(|k, _| !DELETED.iter().any(|o| *k == format!("0/{o}")));
        }
        assert_once_with_values(name, &read, &expected, &values, if name == "payments" { APPENDED } else { 0 });
        // The compactor leaves the files another engine's delete files may apply to (older
        // than the deletes) as they are; the others end one per partition.
        let (files, partitions) = (data_files(&read), expected.len() as u64);
        let kept = if name == "payments" { files_at_delete } else { 0 };
        assert!(
            files < before[name] && files <= partitions + kept,
            "{name}: {} data files, then {files}: {:?}",
            before[name],
            read.summary
        );
        assert_audit(&aws, &table(name), &read).await;
    }
    let orders = read(&aws, "orders");
    assert!(orders.schema.contains("note"), "the evolved Avro field: {}", orders.schema);
    let dead = read(&aws, "clicks_dlq");
    assert_eq!(dead.offsets, BTreeMap::from([("1".to_string(), vec![7])]), "{dead:?}");
    assert_eq!(dead.values[&plan.bad["clicks"]].as_deref(), Some("{not json"));
    // The bad alerts record, skipped once resumed, is a gap Floe counted.
    let alerts = floe_cli::audit::aws(&aws.config, &table("alerts"), true).await.unwrap();
    let gaps: Vec<_> = alerts.partitions[0].gaps.iter().map(|g| (g.first, g.last, g.reason)).collect();
    assert_eq!(gaps, [(4, 4, GapReason::WithoutRows)]);
    let payments = floe_cli::audit::aws(&aws.config, &table("payments"), true).await.unwrap();
    let deleted: Vec<i64> = payments.partitions[0]
        .gaps
        .iter()
        .filter(|g| g.reason == GapReason::Deleted)
        .flat_map(|g| g.first..=g.last)
        .collect();
    assert_eq!(deleted, DELETED, "{payments:?}");
}

/// A bad record's suspend task queued after a good segment of its table (the segment's
/// event came first): the batch keeps the good task and is done with the suspension, so
/// that after the resume the good task commits and nothing stops the table again.
#[tokio::test]
async fn a_suspend_task_behind_its_tables_data_is_done_once_applied_and_the_resume_holds() {
    let aws = setup_with("behind", "").await;
    let (topic, _, _) = payments();
    let m = aws.materializer().await;
    aws.materialize(&m, topic.path(), SEGMENTS[0]).await;
    let stop = SuspendTask::new(aws.table(), "payments", 0, 7, "payments-0/0.log", "not JSON");
    m.queue.send(&Task::Suspend(Box::new(stop))).await.unwrap();
    let (event, receipts) = aws.receive().await;
    let ids: Vec<String> = event.records.iter().map(|r| r.message_id.clone().unwrap()).collect();
    assert_eq!(ids.len(), 2);
    let response = handle_committer_event(&aws.committer(), event, None).await;
    let failed: Vec<&str> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
    assert_eq!(failed, [ids[0].as_str()], "the good task kept, the suspension done");
    aws.delete(&receipts[1..]).await;
    let table = aws.table().to_string();
    assert!(floe_cli::aws::resume(&aws.config, &aws.locks, &table).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (kept, receipts) = aws.receive().await;
    assert_eq!(kept.records.len(), 1, "only the good task comes back");
    assert!(handle_committer_event(&aws.committer(), kept, None).await.batch_item_failures.is_empty());
    aws.delete(&receipts).await;
    assert_eq!(aws.registry().suspended(&table).await.unwrap(), None);
    // Offsets 50..54 are a transaction the segment leaves open.
    assert_eq!(aws.read().offsets["0"], (0..50).collect::<Vec<i64>>());
}

/// The task queue's messages, visible or not.
async fn queued(aws: &Aws) -> u64 {
    floe_aws::sqs::queued_messages(&aws.sqs, &aws.tasks).await.unwrap()
}

/// PyIceberg's read of `day.<name>` through Glue.
fn read(aws: &Aws, name: &str) -> Read {
    pyiceberg(&["glue", &support::moto().endpoint, "-", &format!("{}.{name}", aws.namespace)])
}

/// The live data files of a read's current snapshot.
fn data_files(read: &Read) -> u64 {
    let files = read.summary.get("total-data-files").and_then(|n| n.parse().ok());
    files.unwrap_or_else(|| panic!("no total-data-files: {:?}", read.summary))
}

/// Runs tests/py/`script` on `table` through Glue on moto, as another engine.
pub(crate) fn foreign(table: &str, script: &str, args: &[&str]) {
    let out = std::process::Command::new(support::python())
        .arg(support::root().join("tests/py").join(script))
        .args(["glue", &support::moto().endpoint, table])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{script} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Every expected offset read once (`doubled` offsets twice: another engine's append),
/// nothing else, each with its value.
fn assert_once_with_values(
    name: &str,
    read: &Read,
    expected: &BTreeMap<String, Vec<i64>>,
    values: &BTreeMap<String, Value>,
    doubled: usize,
) {
    let distinct: BTreeMap<String, Vec<i64>> = read
        .offsets
        .iter()
        .map(|(p, offsets)| (p.clone(), offsets.iter().copied().collect::<BTreeSet<i64>>().into_iter().collect()))
        .collect();
    assert_eq!(&distinct, expected, "{name}: the offsets read");
    assert_eq!(read.duplicates, doubled, "{name}: rows read twice");
    for (at, value) in values {
        let got = read.values.get(at).cloned().flatten().unwrap_or_else(|| panic!("{name}: no value at {at}"));
        let got = match value {
            Value::String(_) => Value::String(got),
            _ => serde_json::from_str(&got).unwrap_or_else(|e| panic!("{name} {at}: {got}: {e}")),
        };
        assert_eq!(&got, value, "{name}: the value at {at}");
    }
}

/// `floe aws audit` of `table`: exactly once, or, where another engine appended rows
/// again, those rows named as duplicates and nothing else; every gap explained.
async fn assert_audit(aws: &Aws, table: &str, read: &Read) {
    let report: AuditReport = floe_cli::audit::aws(&aws.config, table, true).await.unwrap();
    let mut readable = Vec::new();
    let verdict = floe_cli::audit::verdict(Ok(report.clone()), false, &mut readable);
    let text = String::from_utf8_lossy(&readable);
    for p in &report.partitions {
        assert!(p.gaps.iter().all(|g| g.reason != GapReason::Unexplained), "{table}: {text}");
        assert!(p.uncommitted_rows.is_empty() && p.unexplained == 0 && p.surplus == 0, "{table}: {text}");
    }
    let doubled: Vec<i64> =
        read.offsets.values().flat_map(|offsets| offsets.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0])).collect();
    let named: Vec<i64> =
        report.partitions.iter().flat_map(|p| p.duplicates.iter().flat_map(|&(a, b)| a..=b)).collect();
    assert_eq!(named, doubled, "{table}: the audit names the rows PyIceberg reads twice: {text}");
    match doubled.is_empty() {
        true => assert!(verdict.is_ok(), "{table}: {text}"),
        false => {
            let e = verdict.unwrap_err();
            assert_eq!(floe_cli::audit::exit_code(&e), Some(1), "{e}");
        }
    }
}

/// Uploads `keys` from `dir/bucket` and hands each upload's EventBridge event to the
/// materializer, shuffled (`seed`), every third twice, four at a time; an invocation that
/// fails is tried twice more, as Lambda does. The events that failed every attempt, with
/// the last error (what the failure destination receives).
async fn deliver(
    aws: &Aws,
    materializer: &Materializer,
    dir: &Path,
    keys: &[String],
    seed: u64,
) -> Vec<(Value, String)> {
    let template: Value =
        serde_json::from_slice(&std::fs::read(support::root().join("events/eventbridge-object-created.json")).unwrap())
            .unwrap();
    let mut events = Vec::new();
    for key in keys {
        let body = std::fs::read(dir.join("bucket").join(key)).unwrap();
        let size = body.len();
        aws.s3.put_object().bucket(&aws.segments).key(key).body(body.into()).send().await.unwrap();
        let mut event = template.clone();
        event["resources"] = serde_json::json!([format!("arn:aws:s3:::{}", aws.segments)]);
        event["detail"]["bucket"]["name"] = aws.segments.clone().into();
        event["detail"]["object"]["key"] = key.clone().into();
        event["detail"]["object"]["size"] = size.into();
        events.push(event);
    }
    let twice: Vec<Value> = events.iter().step_by(3).cloned().collect();
    events.extend(twice);
    shuffle(&mut events, seed);
    let invoke = |event: Value| async move {
        let mut error = String::new();
        for _ in 0..3 {
            match handle_materializer_event(materializer, event.clone()).await {
                Ok(_) => return None,
                Err(e) => error = e.to_string(),
            }
        }
        Some((event, error))
    };
    futures::stream::iter(events).map(invoke).buffer_unordered(4).filter_map(|r| async { r }).collect().await
}

/// A Fisher-Yates shuffle driven by a fixed linear congruential generator.
fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    for i in (1..items.len()).rev() {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        items.swap(i, ((state >> 33) % (i as u64 + 1)) as usize);
    }
}

/// The committer's event source mapping: batches of up to 10 from the FIFO queue, the
/// messages it does not report as failed deleted, the others left to come back.
#[derive(Debug, Default)]
struct Drained {
    /// The size of every batch handed over.
    batches: Vec<usize>,
    /// Messages given back, over every batch.
    kept: usize,
}

impl Drained {
    /// Hands batches to the committer until the queue is empty, or holds only messages
    /// it keeps giving back (a suspended table's).
    async fn drain(&mut self, aws: &Aws, service: &CommitterService) {
        let (mut empty, mut stuck) = (0, 0);
        for _ in 0..300 {
            let (event, receipts) = aws.receive().await;
            if event.records.is_empty() {
                empty += 1;
                if empty == 3 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(700)).await;
                continue;
            }
            empty = 0;
            self.batches.push(event.records.len());
            let ids: Vec<String> = event.records.iter().map(|r| r.message_id.clone().unwrap()).collect();
            let response = handle_committer_event(service, event, None).await;
            let failed: HashSet<&str> =
                response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
            self.kept += failed.len();
            let done: Vec<String> =
                ids.iter().zip(receipts).filter(|(id, _)| !failed.contains(id.as_str())).map(|(_, r)| r).collect();
            aws.delete(&done).await;
            stuck = if done.is_empty() { stuck + 1 } else { 0 };
            if stuck == 3 {
                return;
            }
        }
        panic!("the task queue never drained: {self:?}");
    }
}
