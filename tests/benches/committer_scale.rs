//! Committer at scale: how many tasks and tables per second one committer sustains with
//! batches of 10, for 10, 100 and 1,000 topics × 6 partitions each rolling a segment every
//! 5 minutes, at AWS's latencies; one table at a time vs a batch's tables at once, and two
//! committers (reserved concurrency 2).
//!
//! The real committer code path runs (plan, manifests, metadata files on the local file
//! system, SQLite compare-and-swap and leases); only the service round trips are replaced
//! by sleeps of AWS's latencies, on a paused tokio clock: an invocation's duration is the
//! paused clock's time (the round trips) plus the CPU time it took (counted as if it never
//! overlapped a round trip: an upper bound).
//!
//! `cargo bench -p floe-tests --bench committer_scale` — writes its section into BENCHMARKS.md.

#[path = "common/mod.rs"]
mod common;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use iceberg::io::{
    FileIOBuilder, FileMetadata, FileRead, FileWrite, InputFile, LocalFsStorage, OutputFile, Storage, StorageConfig,
    StorageFactory,
};
use iceberg::spec::TableMetadata;

use common::shared::catalog::{CatalogCall, HookFuture, Hooked};
use common::{cpu, update_benchmarks};
use floe_core::committer::{Committer, TaskResult};
use floe_core::lock::registry::{HeldTask, MaintenanceStatus, RegisteredTable};
use floe_core::lock::{Holder, Lease, LockError, TableLocks};
use floe_core::maintenance::{MaintenanceEvent, TableRegistry};
use floe_core::retry::RetryPolicy;
use floe_core::task::{CommitTask, TableName, Task};

/// S3 GET/PUT/HEAD/DELETE of a small object: "median latencies often in the range of tens
/// of milliseconds" for requests under 512 KB (S3 performance guidelines, "Retry requests
/// for latency-sensitive applications"); 50 ms assumed.
const S3: Duration = Duration::from_millis(50);
/// DynamoDB GetItem/PutItem/UpdateItem: "single-digit millisecond" (DynamoDB developer
/// guide); 5 ms assumed.
const DYNAMODB: Duration = Duration::from_millis(5);
/// Glue GetTable: AWS publishes no latency; 50 ms assumed.
const GLUE_GET: Duration = Duration::from_millis(50);
/// Glue UpdateTable / CreateTable: AWS publishes no latency; 100 ms assumed.
const GLUE_UPDATE: Duration = Duration::from_millis(100);

const PARTITIONS: usize = 6;
/// Each partition rolls a segment every 5 minutes.
const ROLL_SECONDS: f64 = 300.0;
const BATCH: usize = 10;
/// Fewer tables at once than a batch holds, to show what the last two add.
const EIGHT: usize = 8;
/// Simulated time per live run: one roll of every partition, or the time 1,200 tasks
/// take to arrive if that is shorter (enough to see a queue grow).
fn horizon(arrival_per_s: f64) -> f64 {
    (1200.0 / arrival_per_s).min(ROLL_SECONDS)
}
/// Full batches timed per saturated run.
const SATURATED_BATCHES: usize = 12;

// ---- the service round trips, as sleeps around the local implementations ----

/// Glue: the SQLite catalog behind Glue's latencies (a [`Hooked`] catalog's hook).
fn behind_glue(call: CatalogCall, _: &TableName, _: Option<&TableMetadata>) -> HookFuture {
    let latency = match call {
        CatalogCall::Current => Some(GLUE_GET),
        CatalogCall::Create | CatalogCall::Swap => Some(GLUE_UPDATE),
        CatalogCall::Swapped => None,
    };
    Box::pin(async move {
        if let Some(latency) = latency {
            tokio::time::sleep(latency).await;
        }
        Ok(())
    })
}

/// DynamoDB: the SQLite leases and registry behind DynamoDB's latency.
struct SlowLocks<T: ?Sized>(Arc<T>);

#[async_trait]
impl TableLocks for SlowLocks<dyn TableLocks> {
    async fn acquire(&self, table: &str, owner: &str, ttl: Duration) -> Result<Option<Lease>, LockError> {
        tokio::time::sleep(DYNAMODB).await;
        self.0.acquire(table, owner, ttl).await
    }
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LockError> {
        tokio::time::sleep(DYNAMODB).await;
        self.0.renew(lease, ttl).await
    }
    async fn release(&self, lease: &Lease) -> Result<(), LockError> {
        tokio::time::sleep(DYNAMODB).await;
        self.0.release(lease).await
    }
    async fn peek(&self, table: &str, owner: &str) -> Result<Option<Holder>, LockError> {
        tokio::time::sleep(DYNAMODB).await;
        self.0.peek(table, owner).await
    }
    async fn suspended(&self, table: &str) -> Result<Option<String>, LockError> {
        tokio::time::sleep(DYNAMODB).await;
        self.0.suspended(table).await
    }
    async fn set_suspended(&self, table: &str, reason: Option<&str>) -> Result<(), LockError> {
        tokio::time::sleep(DYNAMODB).await;
        self.0.set_suspended(table, reason).await
    }
}

#[async_trait]
impl TableRegistry for SlowLocks<dyn TableRegistry> {
    async fn tables(&self) -> Result<Vec<RegisteredTable>, LockError> {
        tokio::time::sleep(DYNAMODB).await;
        self.0.tables().await
    }
    async fn hold_task(&self, table: &TableName, task: &HeldTask) -> Result<(), LockError> {
        tokio::time::sleep(DYNAMODB).await;
        self.0.hold_task(table, task).await
    }
    async fn release_tasks(&self, table: &TableName, task_ids: &[String]) -> Result<(), LockError> {
        tokio::time::sleep(DYNAMODB).await;
        self.0.release_tasks(table, task_ids).await
    }
    async fn held_tasks(&self, table: &TableName) -> Result<Vec<HeldTask>, LockError> {
        tokio::time::sleep(DYNAMODB).await;
        self.0.held_tasks(table).await
    }
    async fn oldest_holds(&self) -> Result<std::collections::BTreeMap<TableName, i64>, LockError> {
        tokio::time::sleep(DYNAMODB).await;
        self.0.oldest_holds().await
    }
    async fn record(&self, table: &TableName, event: &MaintenanceEvent) -> Result<(), LockError> {
        tokio::time::sleep(DYNAMODB).await;
        self.0.record(table, event).await
    }
    async fn status(&self, table: &TableName) -> Result<MaintenanceStatus, LockError> {
        tokio::time::sleep(DYNAMODB).await;
        self.0.status(table).await
    }
}

/// S3: the local file system behind S3's latency, one round trip per request (a
/// reader or writer counts one: small objects, one GET or PUT each).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct SlowStorage {
    #[serde(skip)]
    local: LocalFsStorage,
}

#[async_trait]
#[typetag::serde]
impl Storage for SlowStorage {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        tokio::time::sleep(S3).await;
        self.local.exists(path).await
    }
    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        tokio::time::sleep(S3).await;
        self.local.metadata(path).await
    }
    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        tokio::time::sleep(S3).await;
        self.local.read(path).await
    }
    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        tokio::time::sleep(S3).await;
        self.local.reader(path).await
    }
    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        tokio::time::sleep(S3).await;
        self.local.write(path, bs).await
    }
    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        tokio::time::sleep(S3).await;
        self.local.writer(path).await
    }
    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        tokio::time::sleep(S3).await;
        self.local.delete(path).await
    }
    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        tokio::time::sleep(S3).await;
        self.local.delete_prefix(path).await
    }
    async fn delete_stream(&self, paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        tokio::time::sleep(S3).await;
        self.local.delete_stream(paths).await
    }
    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }
    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct SlowStorageFactory;

#[typetag::serde]
impl StorageFactory for SlowStorageFactory {
    fn build(&self, _config: &StorageConfig) -> iceberg::Result<Arc<dyn Storage>> {
        Ok(Arc::new(SlowStorage::default()))
    }
}

// ---- the warehouse and its tasks ----

/// A warehouse of `topics` tables (`kafka.t0`, …), each created by one commit.
struct Warehouse {
    dir: tempfile::TempDir,
    template: CommitTask,
    /// The next segment of each (topic, partition).
    next_segment: HashMap<(usize, usize), i64>,
}

impl Warehouse {
    async fn new(topics: usize) -> Warehouse {
        let dir = tempfile::tempdir().unwrap();
        let template = common::segment_task(&dir.path().display().to_string()).await;
        let mut warehouse = Warehouse { dir, template, next_segment: HashMap::new() };
        let fast = warehouse.committer(false, 1, "setup");
        for topic in 0..topics {
            let task = warehouse.task(topic, 0);
            let report = fast.commit(&[task], None).await;
            assert_eq!(report.results[0].1, TaskResult::Committed, "{:?}", report.results);
        }
        warehouse
    }

    /// A committer on this warehouse; `slow`: behind AWS's latencies.
    fn committer(&self, slow: bool, concurrency: usize, owner: &str) -> Committer {
        let base = common::shared::committer::local_committer(self.dir.path(), owner)
            .with_lease_ttl(Duration::from_secs(120))
            .with_retry(RetryPolicy { attempts: 8, ..Default::default() })
            .with_concurrency(concurrency);
        match slow {
            false => base,
            true => {
                let (catalog, locks, registry) = (base.catalog.clone(), base.locks.clone(), base.registry.clone());
                base.with_catalog(Arc::new(Hooked::new(catalog, behind_glue)))
                    .with_locks(Arc::new(SlowLocks(locks)))
                    .with_registry(Arc::new(SlowLocks(registry)))
                    .with_file_io(FileIOBuilder::new(Arc::new(SlowStorageFactory)).build())
            }
        }
    }

    /// The next segment's task of `topic`'s `partition`: 1,000 offsets, its own file name.
    fn task(&mut self, topic: usize, partition: usize) -> CommitTask {
        let segment = self.next_segment.entry((topic, partition)).or_insert(0);
        let (first, i) = (*segment * 1000, *segment);
        *segment += 1;
        let mut task = common::task_at(&self.template, first, &format!("t{topic}-{partition}-{i}"));
        task.table = TableName { namespace: "kafka".into(), name: format!("t{topic}") };
        task.topic = format!("t{topic}");
        task.partition = partition as i32;
        task
    }
}

// ---- invocations ----

/// CPU time of this thread (the runtime's only worker), from /proc: a CPU measure the
/// machine's other load does not inflate.
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("Linux /proc");
    Duration::from_nanos(stat.split_whitespace().next().and_then(|n| n.parse().ok()).expect("schedstat"))
}

/// One invocation's batch committed; its duration: round trips (paused clock) + the CPU
/// time it took.
async fn invoke(committer: &Committer, batch: Vec<CommitTask>) -> (Duration, usize) {
    let tasks: Vec<Task> = batch.into_iter().map(|t| Task::Data(Box::new(t))).collect();
    let (virtual_start, cpu_start) = (tokio::time::Instant::now(), thread_cpu());
    let report = committer.commit_all(&tasks, None).await;
    let took = virtual_start.elapsed() + (thread_cpu() - cpu_start);
    let refused = report.results.iter().filter(|(_, r)| matches!(r, TaskResult::Failed { .. })).count();
    for (id, result) in &report.results {
        assert!(
            matches!(result, TaskResult::Committed | TaskResult::Failed { retryable: true, .. }),
            "{id}: {result:?}"
        );
    }
    (took, refused)
}

/// A committer setup: `committers` invocations at once, `concurrency` tables each.
#[derive(Clone, Copy)]
struct Setup {
    committers: usize,
    concurrency: usize,
}

impl Setup {
    fn describe(&self) -> String {
        let tables = match self.concurrency {
            1 => "one table at a time".to_string(),
            n => format!("{n} tables at once"),
        };
        format!("{} committer{}, {tables}", self.committers, if self.committers > 1 { "s" } else { "" })
    }
}

/// Full batches from a backlog: invocation duration, tasks/s and tables/s per committer
/// (each batch of 10 oldest tasks; partitions' segments in random order).
struct Saturated {
    invocation: Duration,
    tasks_per_s: f64,
    tables_per_s: f64,
}

async fn saturated(warehouse: &mut Warehouse, topics: usize, setup: Setup, rng: &mut Rng) -> Saturated {
    let committer = warehouse.committer(true, setup.concurrency, "saturated");
    let (mut total, mut tasks, mut tables) = (Duration::ZERO, 0usize, 0usize);
    for _ in 0..SATURATED_BATCHES {
        let picks: Vec<(usize, usize)> = (0..BATCH).map(|_| (rng.below(topics), rng.below(PARTITIONS))).collect();
        tables += picks.iter().map(|(t, _)| *t).collect::<BTreeSet<_>>().len();
        let batch = picks.into_iter().map(|(t, p)| warehouse.task(t, p)).collect();
        let (took, _) = invoke(&committer, batch).await;
        total += took;
        tasks += BATCH;
    }
    let secs = total.as_secs_f64();
    Saturated {
        invocation: total / SATURATED_BATCHES as u32,
        tasks_per_s: setup.committers as f64 * tasks as f64 / secs,
        tables_per_s: setup.committers as f64 * tables as f64 / secs,
    }
}

/// A live run over [`horizon`]: segments arriving as the topics roll them, the
/// committers taking the oldest 10 of tables no other invocation holds (SQS FIFO: one
/// message group to one invocation at a time).
struct Live {
    /// Simulated time.
    seconds: f64,
    batches: usize,
    mean_batch: f64,
    /// The oldest task's age when an invocation took it, at the worst.
    max_wait: f64,
    /// Tasks arrived but not committed at the end.
    backlog: usize,
    /// Tasks refused (a lease held by another committer), given back to the queue.
    refused: usize,
}

async fn live(warehouse: &mut Warehouse, topics: usize, setup: Setup, rng: &mut Rng) -> Live {
    let until = horizon((topics * PARTITIONS) as f64 / ROLL_SECONDS);
    let committers: Vec<Committer> =
        (0..setup.committers).map(|i| warehouse.committer(true, setup.concurrency, &format!("live-{i}"))).collect();
    // Arrivals: each partition rolls at its own phase, every ROLL_SECONDS.
    let mut arrivals: Vec<(f64, usize, usize)> = Vec::new();
    for topic in 0..topics {
        for partition in 0..PARTITIONS {
            let mut at = rng.unit() * ROLL_SECONDS;
            while at < until {
                arrivals.push((at, topic, partition));
                at += ROLL_SECONDS;
            }
        }
    }
    arrivals.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut queue: VecDeque<(f64, usize, usize)> = arrivals.into();
    let mut waiting: Vec<(f64, usize, usize)> = Vec::new();
    let mut free_at = vec![0.0f64; setup.committers];
    let mut holding: Vec<(f64, BTreeSet<usize>)> = vec![(0.0, BTreeSet::new()); setup.committers];
    let mut result = Live { seconds: until, batches: 0, mean_batch: 0.0, max_wait: 0.0, backlog: 0, refused: 0 };
    let mut taken = 0usize;
    loop {
        let c = (0..free_at.len()).min_by(|a, b| free_at[*a].total_cmp(&free_at[*b])).unwrap();
        let now = free_at[c];
        if now >= until {
            break;
        }
        while queue.front().is_some_and(|a| a.0 <= now) {
            waiting.push(queue.pop_front().unwrap());
        }
        let held: BTreeSet<usize> = holding
            .iter()
            .enumerate()
            .filter(|(i, (until, _))| *i != c && *until > now)
            .flat_map(|(_, (_, tables))| tables.iter().copied())
            .collect();
        let picked: Vec<usize> = (0..waiting.len()).filter(|i| !held.contains(&waiting[*i].1)).take(BATCH).collect();
        if picked.is_empty() {
            // Nothing for this committer: wait for the next arrival or another's end.
            let next = queue.front().map_or(f64::INFINITY, |a| a.0);
            let other = holding.iter().map(|(until, _)| *until).filter(|u| *u > now).fold(f64::INFINITY, f64::min);
            free_at[c] = next.min(other).min(until);
            continue;
        }
        let mut batch: Vec<(f64, usize, usize)> = picked.iter().rev().map(|i| waiting.remove(*i)).collect();
        batch.reverse();
        result.max_wait = batch.iter().map(|(at, _, _)| now - at).fold(result.max_wait, f64::max);
        let tasks = batch.iter().map(|(_, t, p)| warehouse.task(*t, *p)).collect();
        let (took, refused) = invoke(&committers[c], tasks).await;
        result.refused += refused;
        taken += batch.len() - refused;
        result.batches += 1;
        free_at[c] = now + took.as_secs_f64();
        holding[c] = (free_at[c], batch.iter().map(|(_, t, _)| *t).collect());
    }
    result.mean_batch = taken as f64 / result.batches.max(1) as f64;
    // Every arrival is before the horizon, which every committer has reached.
    result.backlog = waiting.len() + queue.len();
    result
}

/// A small deterministic generator (the same run every time).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        self.next() as f64 / (1u64 << 31) as f64
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
    let started = Instant::now();
    let setups = [
        Setup { committers: 1, concurrency: 1 },
        Setup { committers: 1, concurrency: EIGHT },
        Setup { committers: 1, concurrency: BATCH },
        Setup { committers: 2, concurrency: EIGHT },
    ];
    let mut rows = String::new();
    let mut verdicts = Vec::new();
    for topics in [10usize, 100, 500, 1000] {
        let arrival = (topics * PARTITIONS) as f64 / ROLL_SECONDS;
        let mut warehouse = runtime.block_on(Warehouse::new(topics));
        for setup in setups {
            let mut rng = Rng(topics as u64 * 31 + setup.concurrency as u64);
            let full = runtime.block_on(saturated(&mut warehouse, topics, setup, &mut rng));
            let run = runtime.block_on(live(&mut warehouse, topics, setup, &mut rng));
            let grows = full.tasks_per_s < arrival;
            let queue = match grows {
                true => format!("**grows** ({} behind after {:.0} s)", run.backlog, run.seconds),
                false => "keeps up".to_string(),
            };
            let row = format!(
                "| {topics} × {PARTITIONS} | {arrival:.2} | {} | {:.2} s | {:.1} | {:.1} | {:.0} s: {} / {:.1} / {:.0} s | {} | {queue} |\n",
                setup.describe(),
                full.invocation.as_secs_f64(),
                full.tasks_per_s,
                full.tables_per_s,
                run.seconds,
                run.batches,
                run.mean_batch,
                run.max_wait,
                run.refused,
            );
            print!("{row}");
            rows.push_str(&row);
            verdicts.push((topics, setup, grows));
        }
        drop(warehouse);
    }
    let enough = |setup: fn(&Setup) -> bool| {
        verdicts.iter().filter(|(_, s, grows)| setup(s) && !grows).map(|(t, _, _)| *t).max().unwrap_or(0)
    };
    let (serial, concurrent, whole_batch, two) = (
        enough(|s| s.committers == 1 && s.concurrency == 1),
        enough(|s| s.committers == 1 && s.concurrency == EIGHT),
        enough(|s| s.committers == 1 && s.concurrency == BATCH),
        enough(|s| s.committers == 2),
    );
    let body = format!(
        "CPU: {}. Latencies simulated per round trip: S3 {} ms, DynamoDB {} ms, Glue GetTable {} ms,\n\
         Glue UpdateTable/CreateTable {} ms (sources and assumptions below). Whole run: {:.0} s.\n\n\
         | topics × partitions | arrival tasks/s | committers | invocation (batch of 10) | tasks/s sustained | tables/s | live: simulated time: batches / mean size / oldest wait | lease refusals | queue |\n\
         |---|---|---|---|---|---|---|---|---|\n{rows}\n\
         Largest size the queue keeps up with: one table at a time {serial} topics; {} tables at once\n\
         {concurrent} topics; a whole batch ({BATCH}) at once {whole_batch} topics; two committers {two} topics\n\
         (of those measured).\n",
        cpu(),
        S3.as_millis(),
        DYNAMODB.as_millis(),
        GLUE_GET.as_millis(),
        GLUE_UPDATE.as_millis(),
        started.elapsed().as_secs_f64(),
        EIGHT,
    );
    print!("{body}");
    update_benchmarks("committer-scale", "Committer at scale", &body);
}
