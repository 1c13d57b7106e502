//! Cost per GB and end-to-end latency: broker segments uploaded to the AWS emulator (moto)
//! go through the three functions' handlers — the materializer on each object's
//! EventBridge event, the committer on the task queue's messages as Lambda's SQS poller
//! hands them over (a receive of up to 10, the partial batch response honoured, the
//! rest deleted), the compactor on a scheduled event — in this process, one invocation
//! at a time, each built as its `main` builds it.
//!
//! `cargo bench -p floe-tests --bench cost` — writes its section into BENCHMARKS.md.
//! Each invocation's wall time, CPU time (every thread) and the emulator's requests
//! (moto_server.py counts them per operation) are recorded; GB-seconds come from those
//! times and each function's memory in infra/template.yaml, request charges from the
//! counted requests, both at the us-east-1 list prices below.

#[path = "common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use common::{Emulated, MIB, Moto, cpu, emulated_aws, tile_from, update_benchmarks};
use floe_aws::lambda::{
    CommitterEnv, CommitterService, CompactorEnv, MaterializerEnv, committer, compactor, handle_committer_event,
    handle_compactor_event, handle_materializer_event, materializer,
};

const SEGMENTS: &str = "bench-tiered";
const WAREHOUSE: &str = "bench-warehouse";
const LOCKS: &str = "bench-leases";
const TOPIC: &str = "orders";
/// Two partitions, four segments each: the first two of each rolled one after another,
/// each committed alone (a quiet topic: the latency rows); the last two of each arriving
/// together and committed as one batch (a busy one). A raw table's files are compacted
/// per partition, so each partition has four to compact.
const PARTITIONS: usize = 2;
const QUIET: usize = 4;
const BUSY: usize = 4;

/// The functions' memory in infra/template.yaml (MB).
const MATERIALIZER_MB: f64 = 2048.0;
const COMMITTER_MB: f64 = 1024.0;
const COMPACTOR_MB: f64 = 1024.0;
/// Lambda gives a function one vCPU at 1,769 MB, in proportion below that.
const MB_PER_VCPU: f64 = 1769.0;

/// us-east-1 list prices, USD.
struct Price;
impl Price {
    /// Lambda, Arm: per GB-second (first 7.5 billion GB-s a month) and per request.
    const LAMBDA_ARM_GB_S: f64 = 0.000_013_333_4;
    const LAMBDA_REQUEST: f64 = 0.20 / 1e6;
    /// S3 Standard: PUT, COPY, POST, LIST per request; GET, HEAD (and the rest but DELETE).
    const S3_TIER1: f64 = 0.005 / 1e3;
    const S3_TIER2: f64 = 0.0004 / 1e3;
    /// SQS FIFO: per request (each 64 KB of payload is one).
    const SQS_FIFO: f64 = 0.50 / 1e6;
    /// DynamoDB on-demand: per write request unit (1 KB) and read request unit (4 KB).
    const DYNAMODB_WRU: f64 = 0.625 / 1e6;
    const DYNAMODB_RRU: f64 = 0.125 / 1e6;
    /// Glue Data Catalog: per request beyond the first million a month.
    const GLUE_REQUEST: f64 = 1.0 / 1e6;
    /// Amazon Data Firehose, Apache Iceberg tables as the destination: per GB (first 250 TB).
    const FIREHOSE_ICEBERG_GB: f64 = 0.075;
    /// MSK Connect: per MCU-hour (1 vCPU, 4 GiB).
    const MSK_CONNECT_MCU_HOUR: f64 = 0.11;
}

type Requests = BTreeMap<String, u64>;

/// One invocation (or the poller's calls around one): times and the emulator's requests.
#[derive(Default, Clone)]
struct Usage {
    wall_s: f64,
    cpu_s: f64,
    requests: Requests,
}

impl Usage {
    fn add(&mut self, other: &Usage) {
        self.wall_s += other.wall_s;
        self.cpu_s += other.cpu_s;
        for (op, n) in &other.requests {
            *self.requests.entry(op.clone()).or_default() += n;
        }
    }
}

/// User + system CPU seconds of this process, every thread.
fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes the struct it is given; RUSAGE_SELF is always valid.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Runs `work`, measuring it; nothing else runs in this process meanwhile.
async fn measure<T>(moto: &Moto, work: impl Future<Output = T>) -> (T, Usage) {
    let before = moto.requests();
    let (cpu, started) = (cpu_seconds(), Instant::now());
    let out = work.await;
    let (wall_s, cpu_s) = (started.elapsed().as_secs_f64(), cpu_seconds() - cpu);
    let mut requests = moto.requests();
    for (op, n) in before {
        *requests.get_mut(&op).unwrap() -= n;
    }
    requests.retain(|_, n| *n > 0);
    (out, Usage { wall_s, cpu_s, requests })
}

#[derive(Default)]
struct Run {
    materializer: Vec<Usage>,
    /// Committer invocations, with the tasks in each batch.
    committer: Vec<(usize, Usage)>,
    compactor: Vec<Usage>,
    /// Lambda's SQS poller: the receives and deletes it makes for the committer.
    poller: Usage,
    /// Upload done → snapshot committed, per quiet segment.
    latency_s: Vec<f64>,
    segment_bytes: u64,
    records: u64,
    compacted_in: u64,
}

struct Stack {
    moto: Moto,
    aws: aws_config::SdkConfig,
    s3: aws_sdk_s3::Client,
    sqs: aws_sdk_sqs::Client,
    queue: String,
    config: tempfile::NamedTempFile,
}

impl Stack {
    async fn start() -> Stack {
        let moto = Moto::start();
        let Emulated { aws, s3, sqs, queue } = emulated_aws(&moto.endpoint, &[SEGMENTS, WAREHOUSE], LOCKS).await;
        // Raw tables; small files are compacted as soon as the compactor runs.
        let config = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(
            config.path(),
            "[defaults]\nenabled = true\nnamespace = \"bench\"\ncompaction_window = \"1s\"\n",
        )
        .unwrap();
        Stack { moto, aws, s3, sqs, queue, config }
    }

    fn materializer_env(&self) -> MaterializerEnv {
        MaterializerEnv {
            config: Some(self.config.path().display().to_string()),
            warehouse: format!("s3://{WAREHOUSE}/warehouse"),
            task_queue_url: self.queue.clone(),
            lock_table: LOCKS.into(),
            s3_path_style: true,
        }
    }

    fn committer(&self) -> CommitterService {
        let env = CommitterEnv {
            config: None,
            warehouse: format!("s3://{WAREHOUSE}/warehouse"),
            lock_table: LOCKS.into(),
            task_queue_url: self.queue.clone(),
            retry_visibility: Duration::from_secs(30),
            lease: Duration::from_secs(120),
            concurrency: 8,
            s3_path_style: true,
            timeout: Duration::from_secs(300),
        };
        let glue = floe_aws::glue::GlueCatalog::new(aws_sdk_glue::Client::new(&self.aws));
        committer(&self.aws, &env, floe_aws::catalogs::OpenedCatalog::on_s3(std::sync::Arc::new(glue), self.s3.clone()))
    }

    fn compactor_env(&self) -> CompactorEnv {
        let MaterializerEnv { config, warehouse, task_queue_url, lock_table, s3_path_style } = self.materializer_env();
        CompactorEnv { config, warehouse, task_queue_url, lock_table, s3_path_style, timeout: Duration::from_secs(900) }
    }

    /// Uploads `segment` as the `nth` of its partition; returns its key.
    async fn upload(&self, nth: usize, segment: &Segment) -> String {
        let partition = nth % PARTITIONS;
        let key = format!("{TOPIC}-{partition}/{:020}.log", segment.first_offset);
        let body = aws_sdk_s3::primitives::ByteStream::from_path(&segment.path).await.unwrap();
        self.s3.put_object().bucket(SEGMENTS).key(&key).body(body).send().await.unwrap();
        key
    }

    /// What Lambda's SQS poller hands the committer: one receive of up to 10 messages.
    async fn receive(&self) -> SqsEvent {
        let got = self
            .sqs
            .receive_message()
            .queue_url(&self.queue)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
            .send()
            .await
            .unwrap();
        let records = got.messages.unwrap_or_default().into_iter().map(|m| {
            let mut message = SqsMessage::default();
            message.message_id = m.message_id;
            message.receipt_handle = m.receipt_handle;
            message.body = m.body;
            message.attributes =
                m.attributes.unwrap_or_default().into_iter().map(|(k, v)| (k.as_str().to_string(), v)).collect();
            message
        });
        let mut event = SqsEvent::default();
        event.records.extend(records);
        event
    }

    /// The poller's delete of the messages the committer did not report as failed.
    async fn delete(&self, event: &SqsEvent) {
        for message in &event.records {
            let receipt = message.receipt_handle.clone().unwrap();
            self.sqs.delete_message().queue_url(&self.queue).receipt_handle(receipt).send().await.unwrap();
        }
    }
}

fn object_created(key: &str, size: u64) -> serde_json::Value {
    serde_json::json!({"version": "0", "detail-type": "Object Created", "source": "aws.s3",
        "detail": {"bucket": {"name": SEGMENTS}, "object": {"key": key, "size": size}}})
}

/// One segment file: the seed tiled from `first_offset` on.
struct Segment {
    path: std::path::PathBuf,
    first_offset: i64,
    records: u64,
}

/// The segments of one partition, in offset order; every partition gets the same ones.
fn segments(seed: &[u8], bytes: u64, dir: &Path) -> Vec<Segment> {
    let count = (QUIET + BUSY) / PARTITIONS;
    let mut first_offset = 0;
    (0..count)
        .map(|i| {
            let path = dir.join(format!("segment-{i}.log"));
            let records = tile_from(seed, bytes, &path, first_offset);
            let segment = Segment { path, first_offset, records };
            first_offset += records as i64;
            segment
        })
        .collect()
}

impl Run {
    async fn materialize(&mut self, stack: &Stack, m: &floe_core::materializer::Materializer, key: &str) {
        let event = object_created(key, self.segment_bytes);
        let (response, usage) = measure(&stack.moto, handle_materializer_event(m, event)).await;
        assert_eq!(response.unwrap().queued.len(), 1, "{key}: one task");
        self.materializer.push(usage);
    }

    /// Receives one batch, commits it, deletes it; returns the tasks committed.
    async fn commit_batch(&mut self, stack: &Stack, service: &CommitterService) -> usize {
        let (event, receive) = measure(&stack.moto, stack.receive()).await;
        let tasks = event.records.len();
        assert!(tasks > 0, "a batch waits in the queue");
        let deadline = Some(Instant::now() + Duration::from_secs(295));
        let (response, usage) = measure(&stack.moto, handle_committer_event(service, event.clone(), deadline)).await;
        assert!(response.batch_item_failures.is_empty(), "every task committed: {:?}", response.batch_item_failures);
        let ((), delete) = measure(&stack.moto, stack.delete(&event)).await;
        self.poller.add(&receive);
        self.poller.add(&delete);
        self.committer.push((tasks, usage));
        tasks
    }
}

async fn run(segments: &[Segment]) -> (Run, String) {
    let stack = Stack::start().await;
    let segment_bytes = std::fs::metadata(&segments[0].path).unwrap().len();
    let mut run = Run { segment_bytes, ..Default::default() };
    let m = materializer(&stack.aws, &stack.materializer_env()).await.unwrap();
    let committer = stack.committer();
    // The nth upload: partition n % PARTITIONS, its (n / PARTITIONS)th segment.
    let segment = |nth: usize| &segments[nth / PARTITIONS];
    for nth in 0..QUIET {
        let key = stack.upload(nth, segment(nth)).await;
        let uploaded = Instant::now();
        run.materialize(&stack, &m, &key).await;
        assert_eq!(run.commit_batch(&stack, &committer).await, 1);
        run.latency_s.push(uploaded.elapsed().as_secs_f64());
    }
    let mut keys = Vec::new();
    for nth in QUIET..QUIET + BUSY {
        keys.push(stack.upload(nth, segment(nth)).await);
    }
    for key in &keys {
        run.materialize(&stack, &m, key).await;
    }
    assert_eq!(run.commit_batch(&stack, &committer).await, BUSY, "the busy partitions' tasks in one batch");
    tokio::time::sleep(Duration::from_millis(1100)).await; // past the compaction window
    let service = compactor(&stack.aws, &stack.compactor_env()).await.unwrap();
    let mut tick = EventBridgeEvent::<serde_json::Value>::default();
    tick.detail_type = "Scheduled Event".into();
    tick.source = "aws.events".into();
    let deadline = Some(Instant::now() + Duration::from_secs(780));
    let (response, usage) = measure(&stack.moto, handle_compactor_event(&service, tick, deadline)).await;
    assert!(response.failed.is_empty(), "{:?}", response.failed);
    run.compacted_in = response.compacted.iter().map(|t| t.bytes_in).sum();
    let compaction_tasks: usize = response.compacted.iter().map(|t| t.tasks).sum();
    assert!(compaction_tasks > 0, "the compactor found small files: {response:?}");
    run.compactor.push(usage);
    let mut committed = 0;
    while committed < compaction_tasks {
        committed += run.commit_batch(&stack, &committer).await;
    }
    run.records = (0..QUIET + BUSY).map(|nth| segment(nth).records).sum();
    let table = format!("bench.{TOPIC}");
    let read = common::python_output("read_iceberg.py", &["glue", &stack.moto.endpoint, "-", &table]);
    (run, read)
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A function's GB-seconds: from wall time, and from CPU time as its vCPU share runs it.
fn gb_seconds(usage: &[Usage], mb: f64) -> (f64, f64) {
    let wall: f64 = usage.iter().map(|u| u.wall_s).sum();
    let cpu: f64 = usage.iter().map(|u| u.cpu_s).sum();
    let gb = mb / 1024.0;
    (wall * gb, cpu / (mb / MB_PER_VCPU).min(1.0) * gb)
}

/// Request charges (USD) per service and in all, and the lines of the request table.
struct Bill {
    rows: Vec<(String, u64, f64)>,
    total: f64,
}

fn bill(requests: &Requests) -> Bill {
    let mut rows = Vec::new();
    for (op, &n) in requests {
        let (service, name) = op.split_once(' ').unwrap_or((op, ""));
        let price = match (service, name) {
            ("s3", "DeleteObject" | "DeleteObjects" | "AbortMultipartUpload") => 0.0,
            ("s3", "GetObject" | "HeadObject" | "HeadBucket") => Price::S3_TIER2,
            ("s3", _) => Price::S3_TIER1,
            ("sqs", _) => Price::SQS_FIFO,
            ("glue", _) => Price::GLUE_REQUEST,
            // Batches are billed by their items (the "… items" rows), not per request.
            ("dynamodb", "BatchWriteItem" | "BatchGetItem") => 0.0,
            ("dynamodb", "BatchWriteItem items" | "UpdateItem" | "PutItem" | "DeleteItem") => Price::DYNAMODB_WRU,
            ("dynamodb", _) => Price::DYNAMODB_RRU,
            _ => 0.0,
        };
        rows.push((op.clone(), n, n as f64 * price));
    }
    let total = rows.iter().map(|r| r.2).sum();
    Bill { rows, total }
}

fn report(run: &Run, read: &serde_json::Value) -> String {
    let segments = run.materializer.len() as f64;
    let gib = run.segment_bytes as f64 * segments / (1u64 << 30) as f64;
    let committer: Vec<Usage> = run.committer.iter().map(|(_, u)| u.clone()).collect();
    let functions = [
        ("materializer", MATERIALIZER_MB, run.materializer.clone()),
        ("committer", COMMITTER_MB, committer),
        ("compactor", COMPACTOR_MB, run.compactor.clone()),
    ];
    let mut requests = run.poller.clone();
    let (mut gbs_wall, mut gbs_cpu, mut invocations) = (0.0, 0.0, 0usize);
    let mut function_rows = String::new();
    for (name, mb, usage) in &functions {
        let (wall, cpu) = gb_seconds(usage, *mb);
        let (w, c): (f64, f64) = (usage.iter().map(|u| u.wall_s).sum(), usage.iter().map(|u| u.cpu_s).sum());
        function_rows += &format!(
            "| {name} | {mb:.0} MB | {} | {w:.1} s | {c:.1} s | {:.1} | {:.1} |\n",
            usage.len(),
            wall / gib,
            cpu / gib
        );
        gbs_wall += wall;
        gbs_cpu += cpu;
        invocations += usage.len();
        usage.iter().for_each(|u| requests.add(u));
    }
    let bill = bill(&requests.requests);
    let request_rows: String = bill
        .rows
        .iter()
        .map(|(op, n, usd)| format!("| {op} | {n} | {:.1} | {:.6} |\n", *n as f64 / gib, usd / gib))
        .collect();
    let lambda_requests = invocations as f64 * Price::LAMBDA_REQUEST;
    let usd = |gbs: f64| (gbs * Price::LAMBDA_ARM_GB_S + lambda_requests + bill.total) / gib;
    let (per_gib_cpu, per_gib_wall) = (usd(gbs_cpu), usd(gbs_wall));
    let msk = |mib_s: f64| Price::MSK_CONNECT_MCU_HOUR / (mib_s * 3600.0 / 1024.0);
    let latency: Vec<f64> = run.latency_s.clone();
    let (lo, hi) = latency.iter().fold((f64::MAX, 0f64), |(lo, hi), &l| (lo.min(l), hi.max(l)));
    let quiet_commits: Vec<f64> = run.committer.iter().filter(|(n, _)| *n == 1).map(|(_, u)| u.wall_s).collect();
    let busy = run.committer.iter().find(|(n, _)| *n == BUSY).map(|(_, u)| u.wall_s).unwrap_or_default();
    let materialize: Vec<f64> = run.materializer.iter().map(|u| u.wall_s).collect();
    let rows = read["rows"].as_u64().unwrap_or_default();
    format!(
        "Measured by `cargo bench -p floe-tests --bench cost` ({build}; CPU: {cpu}; a shared 2-core\n\
VM). {segs} broker segments of {mib:.0} MiB ({gib:.2} GiB; lz4 batches of JSON-ish values, tiled from\n\
kafka-python seeds, the log-dir copy layout, one topic `{TOPIC}`, raw tables)\n\
in moto's S3 → the three functions' handlers, driven in this process as AWS\n\
drives them (`cargo lambda watch` would add its HTTP hops, not change the work): the\n\
materializer on each object's EventBridge event, the committer on one SQS receive of up to\n\
10 messages (as Lambda's poller hands a FIFO queue over: no batching window), the\n\
compactor on one scheduled event. Traffic: {PARTITIONS} partitions, {per} segments each:\n\
{QUIET} segments roll one after another, each committed alone (the latency rows); then {BUSY}\n\
roll at once and are committed as one batch; then the compactor rewrites the {files}\n\
small files ({cin:.0} MiB in) and the committer commits its CompactionTasks. PyIceberg then reads {rows} rows through Glue\n\
({expected} written).\n\n\
**Latency**, a segment's upload done → its snapshot in the catalog, with a committer batch\n\
window of zero (the FIFO event source's): median **{med:.1} s** ({lo:.1}–{hi:.1} s) over\n\
{QUIET} segments; of which the materializer {mmat:.1} s (median; {mcpu:.1} CPU s of it its own, the\n\
rest waiting on the emulator, which serves each 4 MiB ranged GET, four in flight, by reading\n\
those bytes only, as S3 does) and the commit {mcom:.2} s. What AWS adds is not in\n\
these: S3 → EventBridge → Lambda delivery, and the SQS poller's pick-up. A batch of {BUSY}\n\
tasks committed in {busy:.2} s.\n\n\
**GB-seconds** per GiB of segments, each function's memory as in infra/template.yaml. *Wall*:\n\
the invocation's time here, moto's slowness included (a ceiling). *CPU*: the process's\n\
CPU seconds (every thread) stretched by the function's vCPU share (memory / 1,769 MB, at\n\
most one), as if AWS answered at once (a floor). Measured on x86-64, not Graviton.\n\n\
| function | memory | invocations | wall | CPU | GB-s per GiB (wall) | GB-s per GiB (CPU) |\n\
|---|---|---|---|---|---|---|\n{function_rows}\n\
**Requests** the functions made, counted by the emulator (moto_server.py), Lambda's SQS\n\
poller's receives and deletes included (SQS bills them to the queue's owner), and priced\n\
at us-east-1 list prices: S3 Standard $0.005 per 1,000 PUT/COPY/POST/LIST, $0.0004 per\n\
1,000 GET/HEAD, DELETE free; SQS FIFO $0.50 per million; DynamoDB on-demand $0.625 per\n\
million write and $0.125 per million read request units (one unit per item written, one\n\
per read, scan or query: every item of the lease table is under 1 KB); Glue Data Catalog\n\
$1.00 per million requests (past the free million a month).\n\n\
| request | count | per GiB | USD per GiB |\n|---|---|---|---|\n{request_rows}\n\
**Cost per GiB materialized**, Lambda Arm at $0.0000133334 per GB-s and $0.20 per million\n\
invocations ({invocations} here):\n\n\
| | USD per GiB |\n|---|---|\n\
| Floe, GB-s from CPU time (AWS answering at once) + requests | **{per_gib_cpu:.5}** |\n\
| Floe, GB-s from wall time on moto (the emulator's time billed too) + requests | {per_gib_wall:.5} |\n\
| of which requests (S3, SQS, DynamoDB, Glue) | {req:.5} |\n\
| Amazon Data Firehose, Apache Iceberg tables destination | {firehose:.3} |\n\
| MSK Connect (Iceberg sink), connector compute only, one MCU at 1 MiB/s | {msk1:.4} |\n\
| the same at 5 MiB/s per MCU | {msk5:.4} |\n\
| Confluent Tableflow | not cited (no public rate found) |\n\n\
Prices: us-east-1 list prices as the providers' pages state them — Lambda\n\
(aws.amazon.com/lambda/pricing: Arm $0.0000133334 per GB-s for the first 7.5 billion GB-s\n\
a month, $0.20 per million requests), S3 (aws.amazon.com/s3/pricing), SQS\n\
(aws.amazon.com/sqs/pricing: FIFO $0.50 per million), DynamoDB on-demand\n\
(aws.amazon.com/dynamodb/pricing/on-demand, since November 2024), Glue Data Catalog\n\
(aws.amazon.com/glue/pricing), Firehose (aws.amazon.com/firehose/pricing: Apache Iceberg\n\
tables destination, per GB ingested, first 250 TB a month), MSK Connect\n\
(aws.amazon.com/msk/pricing: per MCU-hour, 1 vCPU and 4 GiB each). Confluent's Tableflow\n\
billing page (docs.confluent.io, Tableflow billing) gives no rate that could be cited.\n\
Assumptions: free tiers ignored; storage not counted (the tables' and the segments' are\n\
the same whichever tool writes them); CloudWatch logs and metrics, and EventBridge's S3\n\
events (AWS service events on the default bus), not counted. MSK Connect's figure is\n\
the connector's compute alone, one MCU running full time at the stated throughput into\n\
Iceberg (not measured here), and a connector runs all month whatever the traffic.\n",
        cpu = cpu(),
        build = if cfg!(debug_assertions) {
            "a debug build, `cargo test --bench cost`: its CPU and wall times are several times a release build's"
        } else {
            "release"
        },
        segs = segments,
        mib = run.segment_bytes as f64 / MIB as f64,
        files = run.materializer.len(),
        per = (QUIET + BUSY) / PARTITIONS,
        cin = run.compacted_in as f64 / MIB as f64,
        expected = run.records,
        med = median(&latency),
        mmat = median(&materialize[..QUIET]),
        mcpu = median(&run.materializer[..QUIET].iter().map(|u| u.cpu_s).collect::<Vec<_>>()),
        mcom = median(&quiet_commits),
        req = bill.total / gib,
        firehose = Price::FIREHOSE_ICEBERG_GB,
        msk1 = msk(1.0),
        msk5 = msk(5.0),
    )
}

fn main() {
    // FLOE_BENCH_MIB: smaller segments for a quick run, which prints and leaves BENCHMARKS.md alone.
    let small: Option<u64> = std::env::var("FLOE_BENCH_MIB").ok().and_then(|v| v.parse().ok());
    let mib = small.unwrap_or(128);
    let dir = tempfile::tempdir().unwrap();
    common::python("make_segments.py", &["--bench-seeds", dir.path().to_str().unwrap()]);
    let seed = std::fs::read(dir.path().join("seed_lz4.log")).unwrap();
    let segments = segments(&seed, mib * MIB, dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (run, read) = rt.block_on(run(&segments));
    let read: serde_json::Value = serde_json::from_str(&read).unwrap();
    assert_eq!(read["rows"].as_u64(), Some(run.records), "every record in the table once");
    assert_eq!(read["duplicates"].as_u64(), Some(0));
    let body = report(&run, &read);
    print!("{body}");
    if small.is_none() {
        update_benchmarks("cost", "Cost per GB and end-to-end latency", &body);
    }
}
