//! Faults, each ending with nothing lost and nothing twice, on moto with the Lambda
//! handlers fed the events AWS sends them, judged by PyIceberg reading through Glue.
//!
//! - A function killed at each step boundary: this binary runs itself again as the
//!   function's process ([`function_process`], its [`Job`] in `FLOE_FAULT_JOB`), with the
//!   port at the boundary wrapped to send the process SIGKILL there ([`Boundary`]); the
//!   test then redelivers the event as Lambda or SQS would. Nothing in the functions'
//!   code knows about it: the wrapped ports are the test's. Between two of a compaction's
//!   output files, the process's S3 calls go through a [`FaultProxy`] of its own whose
//!   hook kills it as the second file's upload starts.
//! - Throttles and 5xx from S3, SQS, DynamoDB and Glue: the functions' clients point at
//!   a fault-injecting proxy in front of moto ([`crate::fault_proxy`]).
//! - A committer stalled past its lease: its process stopped (SIGSTOP) right before its
//!   pointer swap, continued once another committer has committed.
//! - Poison tasks: the task queue's redrive policy moves them to the dead-letter queue.
//! - Another writer moving the pointer between the committer's load and its swap: a
//!   PyIceberg append through Glue, run from a catalog hook at the swap.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_sqs::types::QueueAttributeName;
use floe_aws::lambda::{handle_committer_event, handle_compactor_event, handle_materializer_event, measured};
use floe_core::catalog::Catalog;
use floe_core::maintenance::TableRegistry;
use floe_core::queue::{QueueError, TaskQueue};
use floe_core::task::Task;
use serde_json::{Value, json};

use crate::committer::{Aws, CatalogCall, Hooked, SEGMENTS, assert_payments, payments, setup_with};
use crate::fault_proxy::{Fault, FaultProxy};
use crate::support;

/// The variable holding a function process's [`Job`] (JSON).
const JOB: &str = "FLOE_FAULT_JOB";
/// How a function process's answer line starts on its stdout.
const ANSWER: &str = "floe-fault-answer ";
/// The longest a function process may take.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(120);
const DAY_MS: i64 = 24 * 60 * 60 * 1000;
/// The lease of a committer process that is killed or stalled.
const LEASE: Duration = Duration::from_secs(2);

/// Where a function's process is killed (SIGKILL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum Boundary {
    /// The materializer: its Parquet files uploaded, its task not sent.
    AfterParquetUpload,
    /// The materializer: its task sent, the invocation not answered.
    AfterTaskSend,
    /// The committer: the table's pointer swapped, the batch not answered.
    AfterCatalogSwap,
    /// The committer: the batch answered in full, but the process dies before the
    /// runtime hands the answer back, so the event source deletes nothing.
    BeforeSqsDelete,
    /// The compactor: a bin rewritten and its outputs held, its task not queued.
    MidCompaction,
    /// The compactor: the first of a bin's output files uploaded, the second not.
    BetweenCompactionOutputs,
    /// The committer stops (SIGSTOP) right before its pointer swap, until continued.
    StallBeforeSwap,
    /// The committer: a Delta topic's Delta commit written, the batch not answered.
    AfterDeltaCommit,
}

#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
enum Function {
    Materializer,
    Committer,
    Compactor,
}

/// What a function process does: one event, for the test `name`'s resources.
#[derive(serde::Serialize, serde::Deserialize)]
struct Job {
    name: String,
    config_file: PathBuf,
    tasks: String,
    function: Function,
    at: Option<Boundary>,
    event: Value,
    /// The committer's lease, when not the default.
    lease_ms: Option<u64>,
}

impl Job {
    fn new(aws: &Aws, function: Function, at: Option<Boundary>, event: Value) -> Job {
        let (name, config_file, tasks) = (aws.namespace.clone(), aws.config_file.clone(), aws.tasks.clone());
        Job { name, config_file, tasks, function, at, event, lease_ms: None }
    }

    /// Starts the function's process: this test binary, running [`function_process`].
    fn spawn(&self) -> std::process::Child {
        use std::process::Stdio;
        std::process::Command::new(std::env::current_exe().unwrap())
            .args(["faults::function_process", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
            .env(JOB, serde_json::to_string(self).unwrap())
            .env(support::MOTO_ENDPOINT, &support::moto().endpoint)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting the function's process")
    }

    async fn run(&self) -> Ran {
        finish(self.spawn()).await
    }
}

/// How a function process ended: its answer, or killed; its JSON logs.
struct Ran {
    answer: Option<Value>,
    killed: bool,
    log: String,
}

/// Waits (bounded) for a function process to end.
async fn finish(child: std::process::Child) -> Ran {
    use std::os::unix::process::ExitStatusExt;
    let pid = child.id() as i32;
    let waiting = tokio::task::spawn_blocking(move || child.wait_with_output());
    let Ok(output) = tokio::time::timeout(PROCESS_TIMEOUT, waiting).await else {
        // SAFETY: signalling our own child by its id.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        panic!("the function's process ran over {PROCESS_TIMEOUT:?}");
    };
    let output = output.unwrap().unwrap();
    let log = String::from_utf8_lossy(&output.stdout).to_string();
    let answer = log.lines().find_map(|l| l.strip_prefix(ANSWER)).map(|a| serde_json::from_str(a).unwrap());
    let killed = output.status.signal() == Some(libc::SIGKILL);
    assert!(
        killed || output.status.success(),
        "the function's process failed ({}): {}\n{log}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Ran { answer, killed, log }
}

/// The process ends here, as a Lambda whose sandbox is killed.
fn die() -> ! {
    // SAFETY: signalling this process.
    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    unreachable!("SIGKILL delivered")
}

/// A function's process: runs the [`Job`] in `FLOE_FAULT_JOB` and prints its answer;
/// nothing without it.
#[tokio::test]
#[ignore = "a function's process, started by this module's tests with its job"]
async fn function_process() {
    let Ok(job) = std::env::var(JOB) else { return };
    let job: Job = serde_json::from_str(&job).expect("the job");
    floe_aws::lambda::init_tracing();
    let aws = Aws::attach(&job.name, &job.config_file, &job.tasks).await;
    let answer = match job.function {
        Function::Materializer => {
            let mut m = aws.materializer().await;
            m.queue = Arc::new(KillingQueue { inner: m.queue.clone(), at: job.at });
            match handle_materializer_event(&m, job.event).await {
                Ok(done) => json!({"queued": done.queued, "ignored": done.ignored}),
                Err(failure) => json!({"error": failure.to_string(), "retryable": failure.retryable}),
            }
        }
        Function::Committer => {
            // As the committer's main builds it: floe.toml's catalog, split with the lock table.
            let mut service = aws.configured_committer().await;
            if let Some(ms) = job.lease_ms {
                service.committer.lease_ttl = Duration::from_millis(ms);
            }
            service.committer.catalog = Arc::new(killing_catalog(service.committer.catalog.clone(), job.at));
            if job.at == Some(Boundary::AfterDeltaCommit) {
                service.committer.delta_log = Arc::new(DyingAfterCommit(service.committer.delta_log.clone()));
            }
            let event: SqsEvent = serde_json::from_value(job.event).unwrap();
            serde_json::to_value(handle_committer_event(&service, event, None).await).unwrap()
        }
        Function::Compactor => {
            let aws = match job.at {
                Some(Boundary::BetweenCompactionOutputs) => aws.through(&dying_at_second_output().await.endpoint).await,
                _ => aws,
            };
            let mut service = aws.compactor().await;
            service.compactor.queue = Arc::new(KillingQueue { inner: service.compactor.queue.clone(), at: job.at });
            let event = serde_json::from_value(job.event).unwrap();
            serde_json::to_value(handle_compactor_event(&service, event, None).await).unwrap()
        }
    };
    if job.at == Some(Boundary::BeforeSqsDelete) {
        die();
    }
    println!("{ANSWER}{answer}");
}

/// A task queue that kills the process around its send, at the job's boundary.
struct KillingQueue {
    inner: Arc<dyn TaskQueue>,
    at: Option<Boundary>,
}

#[async_trait]
impl TaskQueue for KillingQueue {
    async fn send(&self, task: &Task) -> Result<(), QueueError> {
        if matches!(self.at, Some(Boundary::AfterParquetUpload | Boundary::MidCompaction)) {
            die();
        }
        self.inner.send(task).await?;
        if self.at == Some(Boundary::AfterTaskSend) {
            die();
        }
        Ok(())
    }
}

/// A Delta log store that kills the process once a commit is written.
struct DyingAfterCommit(Arc<dyn floe_core::delta::LogStore>);

#[async_trait]
impl floe_core::delta::LogStore for DyingAfterCommit {
    async fn read(&self, path: &str) -> std::io::Result<Option<bytes::Bytes>> {
        self.0.read(path).await
    }
    async fn exists(&self, path: &str) -> std::io::Result<bool> {
        self.0.exists(path).await
    }
    async fn put_if_absent(&self, path: &str, bytes: bytes::Bytes) -> std::io::Result<bool> {
        if self.0.put_if_absent(path, bytes).await? {
            die();
        }
        Ok(false)
    }
    async fn put(&self, path: &str, bytes: bytes::Bytes) -> std::io::Result<()> {
        self.0.put(path, bytes).await
    }
    async fn list(&self, dir: &str, after: Option<&str>) -> std::io::Result<Vec<floe_core::delta::store::LogFile>> {
        self.0.list(dir, after).await
    }
    async fn delete(&self, paths: &[String]) -> std::io::Result<()> {
        self.0.delete(paths).await
    }
}

/// A proxy in front of moto that kills this process as the upload of a second data file
/// starts (each file one `PutObject`: they are under one multipart part; a retried upload
/// of the first is not a second).
async fn dying_at_second_output() -> FaultProxy {
    let proxy = FaultProxy::start(&support::moto().endpoint).await;
    let uploaded = Mutex::new(BTreeSet::new());
    proxy.before("S3.PUT", move |request| {
        let path = request.split_whitespace().nth(1).unwrap_or_default();
        let (key, query) = path.split_once('?').unwrap_or((path, ""));
        if key.contains("/data/") && !query.contains("partNumber=") {
            let mut keys = uploaded.lock().unwrap();
            keys.insert(key.to_string());
            if keys.len() == 2 {
                die();
            }
        }
    });
    proxy
}

/// `inner` with the process killed after its pointer swap, or stopped once before it,
/// at the job's boundary.
fn killing_catalog(inner: Arc<dyn Catalog>, at: Option<Boundary>) -> Hooked {
    let stalled = AtomicBool::new(false);
    Hooked::new(inner, move |call, _, _| {
        match (at, call) {
            (Some(Boundary::AfterCatalogSwap), CatalogCall::Swapped) => die(),
            (Some(Boundary::StallBeforeSwap), CatalogCall::Swap) if !stalled.swap(true, Ordering::SeqCst) => {
                // SAFETY: stopping this process; the test continues it with SIGCONT.
                unsafe { libc::raise(libc::SIGSTOP) };
            }
            _ => {}
        }
        Box::pin(async { Ok(()) })
    })
}

/// The EventBridge "Object Created" event of `bucket`/`key`, as events/ holds it.
fn object_created(bucket: &str, key: &str) -> Value {
    let text = std::fs::read_to_string(support::root().join("events/eventbridge-object-created.json")).unwrap();
    let mut event: Value = serde_json::from_str(&text).unwrap();
    event["detail"]["bucket"]["name"] = bucket.into();
    event["detail"]["object"]["key"] = key.into();
    event
}

/// The scheduled event EventBridge sends the compactor.
fn scheduled() -> Value {
    serde_json::from_str(&std::fs::read_to_string(support::root().join("events/eventbridge-scheduled.json")).unwrap())
        .unwrap()
}

async fn upload(aws: &Aws, dir: &std::path::Path, key: &str) {
    let body = std::fs::read(dir.join(key)).unwrap();
    aws.s3.put_object().bucket(&aws.segments).key(key).body(body.into()).send().await.unwrap();
}

/// Every key in the warehouse bucket.
async fn warehouse_objects(aws: &Aws) -> BTreeSet<String> {
    let pages = aws.s3.list_objects_v2().bucket(&aws.warehouse).into_paginator().send().collect::<Vec<_>>().await;
    pages.into_iter().flat_map(|p| p.unwrap().contents.unwrap_or_default()).filter_map(|o| o.key).collect()
}

/// Messages in `queue`, visible or in flight.
async fn messages_in(aws: &Aws, queue: &str) -> usize {
    let attributes = aws
        .sqs
        .get_queue_attributes()
        .queue_url(queue)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap_or_default();
    attributes.values().map(|n| n.parse::<usize>().unwrap()).sum()
}

/// The next delivery of exactly `n` messages (waiting out visibility timeouts), as the
/// event source hands it over.
async fn receive_n(aws: &Aws, n: usize) -> (SqsEvent, Vec<String>) {
    let start = Instant::now();
    loop {
        let (event, receipts) = aws.receive().await;
        if event.records.len() == n {
            return (event, receipts);
        }
        assert!(event.records.is_empty(), "{} messages, not {n}", event.records.len());
        assert!(start.elapsed() < Duration::from_secs(30), "no delivery of {n} messages in 30 s");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn failures(answer: &Value) -> usize {
    answer["batchItemFailures"].as_array().map_or(0, Vec::len)
}

/// Whether the warehouse object of `uri` (`s3://bucket/key`) exists.
fn in_warehouse(objects: &BTreeSet<String>, uri: &str) -> bool {
    objects.iter().any(|key| uri.ends_with(&format!("/{key}")))
}

#[tokio::test]
async fn a_function_killed_at_each_step_boundary_leaves_every_record_once() {
    use Boundary::*;
    use Function::*;
    let aws = setup_with("killed", "").await;
    let (topic, offsets, values) = payments();
    for key in SEGMENTS {
        upload(&aws, topic.path(), key).await;
    }
    let materialize = |key: &str, at| Job::new(&aws, Materializer, at, object_created(&aws.segments, key));

    // Killed after its Parquet upload: files written, no task. Lambda runs the event again.
    let before = warehouse_objects(&aws).await;
    assert!(materialize(SEGMENTS[0], Some(AfterParquetUpload)).run().await.killed);
    let orphans: Vec<String> = warehouse_objects(&aws).await.difference(&before).cloned().collect();
    assert!(!orphans.is_empty(), "killed after the upload");
    assert_eq!(messages_in(&aws, &aws.tasks).await, 0, "and before the send");
    let again = materialize(SEGMENTS[0], None).run().await.answer.unwrap();
    assert_eq!(again["queued"].as_array().unwrap().len(), 1, "{again}");
    // Killed after its task send: the retry sends it again, and SQS drops the copy.
    assert!(materialize(SEGMENTS[1], Some(AfterTaskSend)).run().await.killed);
    assert_eq!(messages_in(&aws, &aws.tasks).await, 2);
    let again = materialize(SEGMENTS[1], None).run().await.answer.unwrap();
    assert_eq!(again["queued"].as_array().unwrap().len(), 1, "{again}");
    assert!(materialize(SEGMENTS[2], None).run().await.answer.is_some());
    assert_eq!(messages_in(&aws, &aws.tasks).await, 3, "one task per segment");

    // The committer killed after its pointer swap: the rows are in, the messages stay.
    let (batch, _) = aws.receive().await;
    assert_eq!(batch.records.len(), 3);
    // Its lease is short here: the dead process never releases it.
    let commit = |batch: SqsEvent, at| Job {
        lease_ms: Some(LEASE.as_millis() as u64),
        ..Job::new(&aws, Committer, at, serde_json::to_value(batch).unwrap())
    };
    assert!(commit(batch, Some(AfterCatalogSwap)).run().await.killed);
    let read = aws.read();
    assert_payments(&read, &offsets, &values);
    assert_eq!(read.snapshots, 1);
    // Redelivered once the lease ran out; killed again before the event source's delete,
    // after answering.
    tokio::time::sleep(LEASE + Duration::from_millis(500)).await;
    let (batch, _) = receive_n(&aws, 3).await;
    assert!(commit(batch, Some(BeforeSqsDelete)).run().await.killed);
    // Redelivered once more: nothing to commit; now the event source deletes them.
    let (batch, receipts) = receive_n(&aws, 3).await;
    let answer = commit(batch, None).run().await.answer.unwrap();
    assert_eq!(failures(&answer), 0, "{answer}");
    aws.delete(&receipts).await;
    assert_eq!(messages_in(&aws, &aws.tasks).await, 0);
    let read = aws.read();
    assert_payments(&read, &offsets, &values);
    assert_eq!(read.snapshots, 1, "nothing committed twice: {:#?}", read.history);
    let audit = floe_cli::audit::aws(&aws.config, &aws.table().to_string(), true).await.unwrap();
    assert!(audit.exactly_once, "{audit:?}");

    // The killed run's files are orphans, swept once past the grace period.
    let later = floe_core::lock::now_ms() + 4 * DAY_MS;
    let swept = aws.compactor().await.compactor.run(later, None).await;
    assert!(swept.tables.iter().all(|t| t.error.is_none()), "{:?}", swept.tables);
    let left = warehouse_objects(&aws).await;
    assert!(orphans.iter().all(|o| !left.contains(o)), "swept: {orphans:?}");
    assert_payments(&aws.read(), &offsets, &values);
}

/// A Delta topic's committer killed between the two formats' commits (its Iceberg swap
/// done, its Delta commit not written), then right after its Delta commit: redelivered
/// each time, the tasks find their offsets in the Iceberg table, the Delta table comes in
/// step, and both hold each committed record once (delta-rs against PyIceberg, and the
/// audit of both).
#[tokio::test]
async fn a_delta_topic_s_committer_killed_between_the_two_formats_commits_converges() {
    killed_between_the_two_formats_commits("deltakilled", false).await;
}

/// The same of a Delta-only topic, whose Iceberg record is on the lock table's row:
/// PyIceberg reads that record from its metadata file.
#[tokio::test]
async fn a_delta_only_topic_s_committer_killed_between_its_record_and_its_delta_commit_converges() {
    killed_between_the_two_formats_commits("deltaonlykilled", true).await;
}

async fn killed_between_the_two_formats_commits(name: &str, delta_only: bool) {
    use Boundary::*;
    use Function::*;
    let formats = if delta_only { "formats = [\"delta\"]\n" } else { "formats = [\"iceberg\", \"delta\"]\n" };
    let aws = setup_with(name, formats).await;
    let read = async || match delta_only {
        true => crate::delta::own_read(&aws).await,
        false => aws.read(),
    };
    let (topic, offsets, values) = payments();
    for key in SEGMENTS {
        upload(&aws, topic.path(), key).await;
        let answer = Job::new(&aws, Materializer, None, object_created(&aws.segments, key)).run().await.answer;
        assert_eq!(answer.unwrap()["queued"].as_array().unwrap().len(), 1);
    }
    let commit = |batch: SqsEvent, at| Job {
        lease_ms: Some(LEASE.as_millis() as u64),
        ..Job::new(&aws, Committer, at, serde_json::to_value(batch).unwrap())
    };
    let delta_log = async || warehouse_objects(&aws).await.into_iter().filter(|k| k.contains("/_delta_log/")).count();
    let (batch, _) = receive_n(&aws, 3).await;
    assert!(commit(batch, Some(AfterCatalogSwap)).run().await.killed);
    assert_payments(&read().await, &offsets, &values);
    assert_eq!(delta_log().await, 0, "killed before its Delta commit");
    tokio::time::sleep(LEASE + Duration::from_millis(500)).await;
    let (batch, _) = receive_n(&aws, 3).await;
    assert!(commit(batch, Some(AfterDeltaCommit)).run().await.killed);
    assert_eq!(delta_log().await, 1, "its Delta commit written");
    let (batch, receipts) = receive_n(&aws, 3).await;
    let answer = commit(batch, None).run().await.answer.unwrap();
    assert_eq!(failures(&answer), 0, "{answer}");
    aws.delete(&receipts).await;
    let read = read().await;
    assert_payments(&read, &offsets, &values);
    assert_eq!(read.snapshots, 1, "nothing committed twice: {:#?}", read.history);
    assert_eq!(delta_log().await, 1, "nothing mirrored twice");
    // Killed before it could register the Delta table in Glue: the redelivery's committer did.
    let glue = aws_sdk_glue::Client::new(&support::aws_config().await);
    let delta_name = if delta_only { "payments" } else { "payments_delta" };
    let registered = glue.get_table().database_name(name).name(delta_name).send().await;
    assert!(registered.is_ok_and(|r| r.table.is_some()), "registered after the crash");
    let app = format!("{}/payments/0", aws.table());
    let delta = crate::delta::read_on_moto(&read.location, &app);
    assert_eq!((delta.rows, delta.duplicates, delta.version), (read.rows, 0, Some(0)));
    assert_eq!((&delta.offsets, &delta.values), (&read.offsets, &read.values));
    let config = Some(aws.config_file.to_str().unwrap());
    let (_, tables) = floe_cli::aws::stack_tables(&aws.config, &aws.s3, config, Some(&aws.locks)).await.unwrap();
    let audit = floe_cli::audit::stack_table(&tables, &aws.table().to_string()).await.unwrap();
    assert!(audit.exactly_once && audit.delta.as_ref().is_some_and(|d| d.same_rows()), "{audit:?}");
}

/// An upsert table's committer killed after its pointer swap, then before the event
/// source's delete: redelivered, its tasks find their offsets covered; the key index and
/// the position deletes went with the data or not at all, and the table holds each key's
/// latest record once (PyIceberg through Glue, against make_upsert.py's model).
#[tokio::test]
async fn an_upsert_committer_killed_after_its_swap_leaves_each_key_s_latest_record_once() {
    use Boundary::*;
    use Function::*;
    let aws = setup_with("upsertkilled", "value_format = \"json\"\nmode = \"upsert\"\n").await;
    let (data, model) = (crate::upsert::data(), crate::upsert::model("accounts.json"));
    let segments = crate::upsert::segments();
    for key in &segments {
        upload(&aws, data, key).await;
        let answer = Job::new(&aws, Materializer, None, object_created(&aws.segments, key)).run().await.answer;
        assert_eq!(answer.unwrap()["queued"].as_array().unwrap().len(), 1);
    }
    let commit = |batch: SqsEvent, at| Job {
        lease_ms: Some(LEASE.as_millis() as u64),
        ..Job::new(&aws, Committer, at, serde_json::to_value(batch).unwrap())
    };
    let read = || crate::committer::pyiceberg(&["glue", &support::moto().endpoint, "-", "upsertkilled.accounts"]);
    let (batch, _) = receive_n(&aws, segments.len()).await;
    assert!(commit(batch, Some(AfterCatalogSwap)).run().await.killed);
    crate::upsert::assert_model(&read(), &model, "killed after the swap");
    tokio::time::sleep(LEASE + Duration::from_millis(500)).await;
    let (batch, _) = receive_n(&aws, segments.len()).await;
    assert!(commit(batch, Some(BeforeSqsDelete)).run().await.killed);
    let (batch, receipts) = receive_n(&aws, segments.len()).await;
    let answer = commit(batch, None).run().await.answer.unwrap();
    assert_eq!(failures(&answer), 0, "{answer}");
    aws.delete(&receipts).await;
    let last = read();
    crate::upsert::assert_model(&last, &model, "redelivered twice");
    assert_eq!(last.snapshots, 1, "nothing committed twice: {:#?}", last.history);
    let table = floe_core::table::TableName { namespace: "upsertkilled".into(), name: "accounts".into() };
    let audit = floe_cli::audit::aws(&aws.config, &table.to_string(), true).await.unwrap();
    assert!(audit.exactly_once && audit.partitions.iter().all(|p| p.upsert.is_some()), "{audit:?}");
}

#[tokio::test]
async fn a_compactor_killed_mid_rewrite_loses_nothing_and_its_outputs_are_swept_later() {
    let (aws, before, offsets, values) = crate::maintenance::small_files_on_moto("killcompact").await;
    let locks = aws.registry();
    let ran = Job::new(&aws, Function::Compactor, Some(Boundary::MidCompaction), scheduled()).run().await;
    assert!(ran.killed);
    // Its rewrite's outputs written and held; its task never sent.
    let held = locks.held_tasks(&aws.table()).await.unwrap();
    assert_eq!(held.len(), 1, "{held:?}");
    let outputs = held[0].files.clone();
    let objects = warehouse_objects(&aws).await;
    assert!(!outputs.is_empty() && outputs.iter().all(|f| in_warehouse(&objects, f)), "{outputs:?}");
    assert_eq!(messages_in(&aws, &aws.tasks).await, 0);

    // The next scheduled run, within the hour: the bin is left alone (its task may come).
    let service = aws.compactor().await;
    let event = serde_json::from_value(scheduled()).unwrap();
    let response = handle_compactor_event(&service, event, None).await;
    assert!(response.compacted.is_empty() && response.failed.is_empty(), "{response:?}");
    // An hour on, it is rewritten and queued again; the committer applies it.
    let now = floe_core::lock::now_ms();
    let run = service.compactor.run(now + 61 * 60 * 1000, None).await;
    assert_eq!(run.tables.iter().map(|t| t.compactions).sum::<usize>(), 1, "{:?}", run.tables);
    let (batch, receipts) = receive_n(&aws, 1).await;
    assert!(handle_committer_event(&aws.committer(), batch, None).await.batch_item_failures.is_empty());
    aws.delete(&receipts).await;
    let after = aws.read();
    assert_payments(&after, &offsets, &values);
    assert_eq!((after.rows, &after.values), (before.rows, &before.values));
    assert_eq!((after.operation.as_deref(), after.summary["total-data-files"].as_str()), (Some("replace"), "1"));
    assert_eq!(locks.held_tasks(&aws.table()).await.unwrap(), []);

    // Past the grace period the killed run's outputs, referenced by no snapshot, are gone.
    let run = service.compactor.run(now + 4 * DAY_MS, None).await;
    assert!(run.tables.iter().all(|t| t.error.is_none()), "{:?}", run.tables);
    let objects = warehouse_objects(&aws).await;
    assert!(outputs.iter().all(|f| !in_warehouse(&objects, f)), "swept: {outputs:?}");
    assert_payments(&aws.read(), &offsets, &values);
}

/// A compaction applying another engine's position deletes (written through Glue),
/// killed mid-rewrite, then its committer killed after the pointer swap: the rerun and
/// the redelivery leave every row once but the deleted ones, which never come back; the
/// delete files go with the files they named, and the audit explains the deleted
/// offsets.
#[tokio::test]
async fn a_compaction_applying_deletes_killed_twice_loses_nothing_and_resurrects_nothing() {
    deletes_applied_by_a_compaction_killed_twice("killdeletes", "", "foreign_delete.py", "position").await;
}

/// The same with deletion vectors on a format v3 table (one Puffin file, a vector for
/// each of two data files, written through Glue as Spark writes them).
#[tokio::test]
async fn a_compaction_applying_deletion_vectors_killed_twice_loses_nothing_and_resurrects_nothing() {
    deletes_applied_by_a_compaction_killed_twice("killvectors", "format_version = 3\n", "foreign_vector.py", "delete")
        .await;
}

/// Another engine deletes a row of each of two files of a table made with `defaults`
/// (`script ACTION`, tests/py); then a compaction applying the deletes is killed twice.
async fn deletes_applied_by_a_compaction_killed_twice(name: &str, defaults: &str, script: &str, action: &str) {
    use Boundary::AfterCatalogSwap;

    let (aws, _, offsets, values) = crate::maintenance::small_files_on_moto_with(name, defaults).await;
    let deleted = [offsets[1], offsets[offsets.len() - 2]];
    let rows: Vec<String> = deleted.iter().map(|o| format!("0/{o}")).collect();
    let args: Vec<&str> = [action].into_iter().chain(rows.iter().map(String::as_str)).collect();
    crate::day::foreign(&aws.table().to_string(), script, &args);
    let kept: Vec<i64> = offsets.iter().copied().filter(|o| !deleted.contains(o)).collect();
    let assert_kept = |read: &crate::committer::Read| {
        assert_eq!((&read.offsets["0"], read.duplicates), (&kept, 0));
        for o in &kept {
            assert_eq!(read.values[&format!("0/{o}")].as_deref(), Some(values[&o.to_string()].as_str()));
        }
    };
    assert_kept(&aws.read());

    let ran = Job::new(&aws, Function::Compactor, Some(Boundary::MidCompaction), scheduled()).run().await;
    assert!(ran.killed);
    assert_kept(&aws.read());
    // An hour on, the bin is planned and rewritten again; its committer dies after the
    // swap, and the redelivered task finds its inputs gone.
    let service = aws.compactor().await;
    let run = service.compactor.run(floe_core::lock::now_ms() + 61 * 60 * 1000, None).await;
    let applied: Vec<(usize, usize, u64)> =
        run.tables.iter().map(|t| (t.compactions, t.delete_files.len(), t.rows_deleted)).collect();
    assert_eq!(applied, [(1, 2, 2)], "{:?}", run.tables);
    let commit = |batch: SqsEvent, at| Job {
        lease_ms: Some(LEASE.as_millis() as u64),
        ..Job::new(&aws, Function::Committer, at, serde_json::to_value(batch).unwrap())
    };
    let (batch, _) = receive_n(&aws, 1).await;
    assert!(commit(batch, Some(AfterCatalogSwap)).run().await.killed);
    let after = aws.read();
    assert_kept(&after);
    assert_eq!(
        (after.operation.as_deref(), after.summary.get("removed-delete-files")),
        (Some("replace"), Some(&"2".into()))
    );
    tokio::time::sleep(LEASE + Duration::from_millis(500)).await;
    let (batch, receipts) = receive_n(&aws, 1).await;
    let answer = commit(batch, None).run().await.answer.unwrap();
    assert_eq!(failures(&answer), 0, "{answer}");
    aws.delete(&receipts).await;
    let read = aws.read();
    assert_kept(&read);
    assert_eq!(read.snapshots, after.snapshots, "the redelivered compaction committed nothing");
    let audit = floe_cli::audit::aws(&aws.config, &aws.table().to_string(), true).await.unwrap();
    assert!(audit.exactly_once, "{audit:?}");
    let gaps = audit.partitions[0].gaps.iter().filter(|g| g.reason == floe_core::table::audit::GapReason::Deleted);
    assert_eq!(gaps.map(|g| (g.first, g.last)).collect::<Vec<_>>(), deleted.map(|o| (o, o)), "{audit:?}");
}

#[tokio::test]
async fn a_compactor_killed_between_two_output_files_loses_nothing_and_the_orphan_is_swept_later() {
    let (aws, before) = crate::maintenance::full_bin_on_moto("killoutputs").await;
    let committed = warehouse_objects(&aws).await;
    let ran = Job::new(&aws, Function::Compactor, Some(Boundary::BetweenCompactionOutputs), scheduled()).run().await;
    assert!(ran.killed, "{}", ran.log);
    // One output file uploaded; nothing held, nothing queued.
    let orphans: Vec<String> = warehouse_objects(&aws).await.difference(&committed).cloned().collect();
    assert!(orphans.len() == 1 && orphans[0].contains("/data/") && orphans[0].ends_with(".parquet"), "{orphans:?}");
    let locks = aws.registry();
    assert_eq!(locks.held_tasks(&aws.table()).await.unwrap(), []);
    assert_eq!(messages_in(&aws, &aws.tasks).await, 0);

    // The next scheduled run rewrites the bin again, into files of its own, and the
    // committer applies them: every record once, in two files, the orphan in none.
    let service = aws.compactor().await;
    let response = handle_compactor_event(&service, serde_json::from_value(scheduled()).unwrap(), None).await;
    assert_eq!(response.compacted.iter().map(|c| (c.files_in, c.files_out)).collect::<Vec<_>>(), [(6, 2)]);
    let (batch, receipts) = receive_n(&aws, 1).await;
    assert!(handle_committer_event(&aws.committer(), batch, None).await.batch_item_failures.is_empty());
    aws.delete(&receipts).await;
    let after = aws.read();
    assert_eq!(
        (after.rows, &after.offsets, &after.values, after.duplicates),
        (before.rows, &before.offsets, &before.values, 0)
    );
    assert_eq!((after.operation.as_deref(), after.summary["total-data-files"].as_str()), (Some("replace"), "2"));
    let (catalog, file_io) = (service.compactor.catalog.as_ref(), &service.compactor.file_io);
    let loaded = floe_core::table::load(catalog, file_io, &aws.table()).await.unwrap().unwrap();
    let live = floe_core::table::snapshot::live_data_files(file_io, &loaded.metadata).await.unwrap();
    assert!(live.iter().all(|f| !orphans.iter().any(|o| f.file_path().ends_with(o))), "{orphans:?}");

    // Past the grace period the orphan is gone, and the table reads the same.
    let run = service.compactor.run(floe_core::lock::now_ms() + 4 * DAY_MS, None).await;
    assert!(run.tables.iter().all(|t| t.error.is_none()), "{:?}", run.tables);
    let objects = warehouse_objects(&aws).await;
    assert!(orphans.iter().all(|o| !objects.contains(o)), "swept: {orphans:?}");
    let swept = aws.read();
    assert_eq!((swept.rows, &swept.offsets, &swept.values), (before.rows, &before.offsets, &before.values));
}

#[tokio::test]
async fn throttles_and_5xx_from_every_service_are_retried_and_commit_once() {
    let aws = setup_with("faulted", "").await;
    let proxy = FaultProxy::start(&support::moto().endpoint).await;
    let faulty = aws.through(&proxy.endpoint).await;
    let (topic, offsets, values) = payments();
    for key in SEGMENTS {
        upload(&aws, topic.path(), key).await;
    }
    let m = faulty.materializer().await;
    let materialize = async |key: &str| handle_materializer_event(&m, object_created(&aws.segments, key)).await;

    // The table lookup failing past the SDK's retries: a clear, retryable failure; the
    // Lambda's retry of the event succeeds.
    proxy.fail_next(3, "AWSGlue.GetTable", Fault::ServerError);
    let failed = materialize(SEGMENTS[0]).await.unwrap_err();
    assert!(failed.retryable, "{failed}");
    assert!(failed.to_string().contains("injected by the fault proxy"), "{failed}");
    assert_eq!(proxy.injected("AWSGlue.GetTable"), 3);
    // Each service failing fewer times than the SDK's attempts: absorbed.
    proxy.fail_next(2, "AWSGlue.GetTable", Fault::ServerError);
    proxy.fail_every(3, "S3.PUT", Fault::Throttle);
    proxy.fail_every(4, "S3.GET", Fault::ServerError);
    proxy.fail_next(2, "DynamoDB_20120810.BatchWriteItem", Fault::Throttle);
    proxy.fail_next(2, "AmazonSQS.SendMessage", Fault::ServerError);
    for key in SEGMENTS {
        let done = materialize(key).await.unwrap();
        assert_eq!(done.queued.len(), 1);
    }
    for call in ["S3.PUT", "S3.GET", "DynamoDB_20120810.BatchWriteItem", "AmazonSQS.SendMessage"] {
        assert!(proxy.injected(call) >= 1, "{call}: {} seen, none failed", proxy.seen(call));
    }
    assert_eq!(proxy.injected("AWSGlue.GetTable"), 5);

    // The committer: its pointer swap failing past the SDK's retries gives the batch back
    // to the queue, the table shown failing with the error; the next delivery commits.
    proxy.clear();
    let committer = faulty.committer();
    // Its access check (Glue calls of its own, once per table) before the faults, so that
    // they hit the commit.
    committer.access.check([aws.table()]).await.unwrap();
    proxy.fail_next(3, "AWSGlue.UpdateTable", Fault::ServerError);
    proxy.fail_next(2, "DynamoDB_20120810.UpdateItem", Fault::Throttle);
    let (batch, _) = receive_n(&aws, 3).await;
    assert_eq!(handle_committer_event(&committer, batch, None).await.batch_item_failures.len(), 3);
    let status = floe_cli::aws::status(&aws.config, &aws.locks, true).await.unwrap();
    let shown = serde_json::to_string(&status).unwrap();
    assert!(shown.contains("injected by the fault proxy"), "{shown}");
    // This time the swap takes effect but its answer is lost, and the SDK's first retry
    // fails too; its second is refused (the pointer moved): the committer reloads and
    // finds its offsets committed.
    proxy.fail_next(1, "AWSGlue.UpdateTable", Fault::AnswerLost);
    proxy.fail_next(1, "AWSGlue.UpdateTable", Fault::ServerError);
    proxy.fail_every(3, "S3.PUT", Fault::Throttle);
    proxy.fail_next(2, "AWSGlue.GetTable", Fault::Throttle);
    let (batch, receipts) = receive_n(&aws, 3).await;
    let (response, metrics) = measured("committer", handle_committer_event(&committer, batch, None)).await;
    assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);
    aws.delete(&receipts).await;
    assert_eq!(proxy.injected("AWSGlue.UpdateTable"), 5);
    let recorded = |name: &str| metrics.iter().any(|l| l.contains(&format!("\"{name}\"")));
    assert!(recorded("CommitConflicts") && !recorded("RecordsCommitted"), "found committed: {metrics:#?}");
    let read = aws.read();
    assert_payments(&read, &offsets, &values);
    assert_eq!(read.snapshots, 1, "{:#?}", read.history);
    let status = floe_cli::aws::status(&aws.config, &aws.locks, true).await.unwrap();
    assert_eq!(status[0].health.state, "running", "{status:#?}");
}

/// Whether process `pid` is stopped (state `T` in /proc).
fn stopped(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()) == Some("T")
}

#[tokio::test]
async fn a_committer_stalled_past_its_lease_wakes_fenced_and_commits_nothing_twice() {
    let aws = setup_with("stalled", "").await;
    let (topic, offsets, values) = payments();
    let m = aws.materializer().await;
    for key in SEGMENTS {
        aws.materialize(&m, topic.path(), key).await;
    }
    let (batch, _) = receive_n(&aws, 3).await;
    let mut job =
        Job::new(&aws, Function::Committer, Some(Boundary::StallBeforeSwap), serde_json::to_value(batch).unwrap());
    job.lease_ms = Some(LEASE.as_millis() as u64);
    let stalled = job.spawn();
    let start = Instant::now();
    while !stopped(stalled.id()) {
        assert!(start.elapsed() < Duration::from_secs(60), "the committer never reached its swap");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Its lease runs out and its messages come back: another committer commits them.
    tokio::time::sleep(LEASE + Duration::from_millis(500)).await;
    let (batch, receipts) = receive_n(&aws, 3).await;
    assert!(handle_committer_event(&aws.committer(), batch, None).await.batch_item_failures.is_empty());
    aws.delete(&receipts).await;
    let read = aws.read();
    assert_payments(&read, &offsets, &values);
    // The stalled one wakes at its swap: refused, it commits nothing.
    // SAFETY: continuing our own stopped child.
    unsafe { libc::kill(stalled.id() as i32, libc::SIGCONT) };
    let ran = finish(stalled).await;
    let answer = ran.answer.expect("the stalled committer answers");
    let after = aws.read();
    assert_payments(&after, &offsets, &values);
    assert_eq!(after.snapshots, 1, "{answer}\n{:#?}", after.history);
    assert_eq!(after.history, read.history);
}

#[tokio::test]
async fn poison_tasks_end_in_the_dead_letter_queue_with_their_reason_and_the_rest_go_on() {
    let aws = setup_with("poison", "").await;
    // The redrive policy the SAM template gives the task queue (3 receives here, not 100).
    let dlq = support::fifo_queue(&aws.sqs, "poison-dead-tasks.fifo", None).await;
    let arn = aws.sqs.get_queue_attributes().queue_url(&dlq).attribute_names(QueueAttributeName::QueueArn);
    let arn = arn.send().await.unwrap().attributes.unwrap()[&QueueAttributeName::QueueArn].clone();
    let policy = json!({"deadLetterTargetArn": arn, "maxReceiveCount": 3}).to_string();
    let redrive = aws.sqs.set_queue_attributes().queue_url(&aws.tasks);
    redrive.attributes(QueueAttributeName::RedrivePolicy, policy).send().await.unwrap();

    let (topic, offsets, values) = payments();
    let m = aws.materializer().await;
    // `ledger` committed once, then its metadata deleted; a second segment's task for it.
    aws.materialize(&m, topic.path(), "ledger-0/00000000000000000000.log").await;
    let (batch, receipts) = receive_n(&aws, 1).await;
    assert!(handle_committer_event(&aws.committer(), batch, None).await.batch_item_failures.is_empty());
    aws.delete(&receipts).await;
    let ghost = aws.materialize(&m, topic.path(), "ledger-0/00000000000000000020.log").await;
    let metadata: Vec<String> =
        warehouse_objects(&aws).await.into_iter().filter(|k| k.contains("/ledger/metadata/")).collect();
    assert!(!metadata.is_empty());
    for key in &metadata {
        aws.s3.delete_object().bucket(&aws.warehouse).key(key).send().await.unwrap();
    }
    // An unparseable message in `payments`' group, ahead of its three tasks.
    let group = floe_core::queue::message_group(&aws.table());
    let send = aws.sqs.send_message().queue_url(&aws.tasks).message_group_id(group);
    send.message_deduplication_id("poison").message_body("{not a task").send().await.unwrap();
    for key in SEGMENTS {
        aws.materialize(&m, topic.path(), key).await;
    }

    // The committer's process on every delivery, until the task queue is empty.
    let (start, mut log) = (Instant::now(), String::new());
    while messages_in(&aws, &aws.tasks).await > 0 {
        assert!(start.elapsed() < Duration::from_secs(90), "the task queue never emptied");
        let (batch, receipts) = aws.receive().await;
        if batch.records.is_empty() {
            tokio::time::sleep(Duration::from_millis(300)).await;
            continue;
        }
        let ids: Vec<String> = batch.records.iter().map(|r| r.message_id.clone().unwrap()).collect();
        let ran = Job::new(&aws, Function::Committer, None, serde_json::to_value(batch).unwrap()).run().await;
        let answer = ran.answer.unwrap();
        let failed: Vec<&str> = answer["batchItemFailures"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["itemIdentifier"].as_str().unwrap())
            .collect();
        let done: Vec<String> =
            ids.iter().zip(receipts).filter(|(id, _)| !failed.contains(&id.as_str())).map(|(_, r)| r).collect();
        aws.delete(&done).await;
        log.push_str(&ran.log);
    }
    // The dead-letter queue holds the two, the reasons in the committer's log.
    let got = aws.sqs.receive_message().queue_url(&dlq).max_number_of_messages(10).send().await.unwrap();
    let bodies: Vec<String> = got.messages.unwrap_or_default().into_iter().filter_map(|m| m.body).collect();
    assert_eq!(bodies.len(), 2, "{bodies:?}");
    assert!(bodies.iter().any(|b| b == "{not a task"), "{bodies:?}");
    assert!(bodies.iter().any(|b| b.contains(&ghost.task_id)), "{bodies:?}");
    let logged = |needle: &str| log.lines().any(|l| l.contains(needle) && l.contains("\"level\":\"ERROR\""));
    assert!(logged("unreadable task message"), "{log}");
    assert!(logged(&ghost.task_id), "{log}");
    // `payments` went on once its poison was gone: every record, once.
    let read = aws.read();
    assert_payments(&read, &offsets, &values);
    assert_eq!(read.snapshots, 1);
}

/// PyIceberg, through Glue, appends `rows` of the table's rows as partition 99.
fn foreign_append(table: &str, rows: usize) {
    crate::day::foreign(table, "foreign_write.py", &["append", &rows.to_string(), "99"]);
}

#[tokio::test]
async fn another_writer_moving_the_pointer_between_load_and_swap_is_reloaded_and_replanned() {
    let aws = setup_with("moved", "").await;
    let (topic, offsets, values) = payments();
    let m = aws.materializer().await;
    aws.materialize(&m, topic.path(), SEGMENTS[0]).await;
    let (batch, receipts) = receive_n(&aws, 1).await;
    assert!(handle_committer_event(&aws.committer(), batch, None).await.batch_item_failures.is_empty());
    aws.delete(&receipts).await;
    for key in &SEGMENTS[1..] {
        aws.materialize(&m, topic.path(), key).await;
    }
    // Right before the committer's swap, another engine appends through Glue.
    let mut service = aws.committer();
    let (table, fired) = (format!("{}.payments", aws.namespace), Arc::new(AtomicBool::new(false)));
    let moved = fired.clone();
    service.committer.catalog = Arc::new(Hooked::new(service.committer.catalog.clone(), move |call, _, _| {
        let (fired, table) = (moved.clone(), table.clone());
        Box::pin(async move {
            if call == CatalogCall::Swap && !fired.swap(true, Ordering::SeqCst) {
                tokio::task::spawn_blocking(move || foreign_append(&table, 3)).await.unwrap();
            }
            Ok(())
        })
    }));
    let (batch, receipts) = receive_n(&aws, 2).await;
    let response = handle_committer_event(&service, batch, None).await;
    assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);
    aws.delete(&receipts).await;
    assert!(fired.load(Ordering::SeqCst));
    // Floe's records once, the other writer's rows kept, its snapshot between Floe's two.
    let read = aws.read();
    assert_payments(&read, &offsets, &values);
    assert_eq!(read.offsets["99"].len(), 3, "{:?}", read.offsets);
    let floe_snapshot = |s: &std::collections::HashMap<String, String>| s.contains_key("floe.offsets.payments.0");
    let kinds: Vec<bool> = read.history.iter().map(floe_snapshot).collect();
    assert_eq!(kinds, [true, false, true], "{:#?}", read.history);
}
