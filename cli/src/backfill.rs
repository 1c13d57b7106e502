//! `floe aws backfill`: hands the segments already in tiered storage to the materializer,
//! as if each had just been uploaded.
//!
//! - [`list_segments`] lists a bucket (under a prefix, of one topic or all) and keeps the
//!   object that starts each segment, as the live event would name it: a tiered-storage
//!   segment's `.rsm-manifest`, a log-dir or `LocalTieredStorage` copy's `.log`; in offset
//!   order per topic-partition.
//! - [`already_held`] reads each target table's committed offsets once (through the
//!   catalog, Floe's snapshot summary, as the materializer reads them) and finds the
//!   segments whose every offset their table already holds: they are not handed, and
//!   cost no invocation. A segment's range comes from its manifest (tiered storage: one
//!   GET, only when its table holds its base offset) or, for a broker log dir's copy,
//!   runs to the next segment's base offset in the same folder; a segment whose range is
//!   unknown, or only partly held, is handed (the committer trims it).
//! - [`not_enabled`] finds the segments of topics the configuration does not enable: not
//!   handed, not costed, counted apart (the materializer would ignore them).
//! - [`backfill`] invokes the materializer once per other segment through an [`Invoker`] with
//!   the EventBridge "Object Created" event it gets live, at most `concurrency` at a time,
//!   and records each segment handed in a [`Progress`] file, so a rerun after an
//!   interruption hands only the rest. The file names its bucket: one of another bucket
//!   is refused. A line of progress every [`PROGRESS_EVERY`] segments, a summary at the end.
//! - Exactly once alongside live traffic is the committer's: it commits each Kafka offset
//!   once, however many tasks carry it. Skipping what a table holds is only an
//!   optimisation (offsets once committed stay committed); the materializer also ignores
//!   a segment its table holds by the time it is invoked.
//! - [`dry_run`] says what would be handed, per topic-partition, and what it would
//!   roughly cost; segments already in their table or of topics not enabled are counted
//!   apart, at no cost.
//!
//! [`LambdaInvoker`] invokes the deployed function (`RequestResponse`: the backfill
//! learns each segment's outcome, records only what succeeded, and its concurrency bounds
//! the load it adds beside live traffic).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use aws_sdk_lambda::error::ProvideErrorMetadata;
use futures::StreamExt;
use serde_json::{Value, json};

use floe_core::config::FloeConfig;
use floe_core::segment::tiered::Manifest;
use floe_core::segment::{ObjectKind, SegmentLayout, SegmentLocation};
use floe_core::table::offsets::{CommittedOffsets, RangeSet};
use floe_core::table::{TableLookup, TableName};

/// A progress line every this many segments handed or skipped.
pub const PROGRESS_EVERY: usize = 10;

/// One segment to hand over: the object its live event names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub key: String,
    pub topic: String,
    /// The topic's id, where the layout gives one: a re-created topic is another log.
    pub topic_id: Option<String>,
    pub partition: i32,
    pub base_offset: i64,
    /// The segment's record bytes (its `.log`'s size, when listed).
    pub bytes: u64,
    /// Its last offset, when the listing tells it: a broker log dir's segment ends before
    /// the next one in its folder. (A tiered segment's is in its manifest.)
    pub last_offset: Option<i64>,
}

/// Every segment under `prefix` of `bucket` (of `topic` only, when given), in offset
/// order per topic-partition.
pub async fn list_segments(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
    topic: Option<&str>,
) -> anyhow::Result<Vec<Segment>> {
    let mut objects = Vec::new();
    let mut pages = s3.list_objects_v2().bucket(bucket).prefix(prefix).into_paginator().send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| aws_sdk_s3::error::DisplayErrorContext(e).to_string());
        let page = page.map_err(anyhow::Error::msg).with_context(|| format!("listing s3://{bucket}/{prefix}"))?;
        for object in page.contents() {
            if let Some(key) = object.key() {
                objects.push((key.to_string(), object.size().unwrap_or(0).max(0) as u64));
            }
        }
    }
    Ok(segments_of(&objects, topic))
}

/// The segment-starting objects among `(key, size)`, of `topic` when given, sorted by
/// topic, partition and base offset.
pub fn segments_of(objects: &[(String, u64)], topic: Option<&str>) -> Vec<Segment> {
    let log_sizes: HashMap<&str, u64> =
        objects.iter().filter_map(|(key, size)| Some((key.strip_suffix(".log")?, *size))).collect();
    let found: Vec<(Segment, bool)> = objects
        .iter()
        .filter_map(|(key, size)| {
            let location = SegmentLocation::parse(key)?;
            let starts = match (&location.kind, location.layout) {
                (ObjectKind::Manifest, SegmentLayout::TieredStorage) => true,
                (ObjectKind::Log, layout) => layout != SegmentLayout::TieredStorage,
                _ => false,
            };
            if !starts || topic.is_some_and(|t| t != location.topic) {
                return None;
            }
            let stem = key.strip_suffix(".rsm-manifest").unwrap_or(key);
            let bytes = log_sizes.get(stem).copied().unwrap_or(*size);
            let log_dir = location.layout == SegmentLayout::BrokerLogDir;
            let segment = Segment {
                key: key.clone(),
                topic: location.topic,
                topic_id: location.topic_id,
                partition: location.partition,
                base_offset: location.base_offset,
                bytes,
                last_offset: None,
            };
            Some((segment, log_dir))
        })
        .collect();
    let mut segments = with_log_dir_ends(found);
    segments.sort_by(|a, b| {
        (&a.topic, a.partition, a.base_offset, &a.key).cmp(&(&b.topic, b.partition, b.base_offset, &b.key))
    });
    segments
}

/// The segments, each broker log dir's (flagged `true`) with its last offset: the next
/// base offset in its folder, less one (a log's segments are contiguous). A folder's last
/// segment, the one a broker may still write, keeps none.
fn with_log_dir_ends(found: Vec<(Segment, bool)>) -> Vec<Segment> {
    let folder = |key: &str| key.rsplit_once('/').map_or("", |(dir, _)| dir).to_string();
    let mut bases: HashMap<String, Vec<i64>> = HashMap::new();
    for (segment, _) in found.iter().filter(|(_, log_dir)| *log_dir) {
        bases.entry(folder(&segment.key)).or_default().push(segment.base_offset);
    }
    found
        .into_iter()
        .map(|(segment, log_dir)| {
            let next = match log_dir {
                true => bases[&folder(&segment.key)].iter().filter(|&&b| b > segment.base_offset).min().copied(),
                false => None,
            };
            Segment { last_offset: next.map(|n| n - 1), ..segment }
        })
        .collect()
}

/// The keys of the segments whose every offset their table already holds, which need no
/// invocation: each target table (the topic's in `config`) read once through `tables`,
/// each segment's range from [`Segment::last_offset`] or its manifest (read only when the
/// table holds its base offset). A segment whose range is unknown (no manifest range, a
/// folder's last log) or only partly held is not among them.
pub async fn already_held(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    segments: &[Segment],
    config: &FloeConfig,
    tables: &dyn TableLookup,
) -> anyhow::Result<HashSet<String>> {
    let held = committed_by_topic(segments, config, tables).await?;
    let candidates: Vec<(&Segment, &RangeSet)> = segments
        .iter()
        .filter_map(|s| {
            let set = held.get(&s.topic)?.of_incarnation(&s.topic, s.topic_id.as_deref(), s.partition)?;
            set.covers(s.base_offset, s.base_offset).then_some((s, set))
        })
        .collect();
    let ranges = futures::stream::iter(candidates)
        .map(|(segment, set)| async move {
            let last = match segment.last_offset {
                Some(last) => Some(last),
                None => manifest_range(s3, bucket, &segment.key).await.map(|(_, last)| last),
            };
            last.is_some_and(|last| set.covers(segment.base_offset, last)).then(|| segment.key.clone())
        })
        .buffer_unordered(MANIFEST_READS);
    Ok(ranges.filter_map(|key| async move { key }).collect().await)
}

/// Manifests read at once by [`already_held`].
const MANIFEST_READS: usize = 8;

/// The keys of the segments whose topic `config` does not enable (`[[topics]]` or
/// `defaults.enabled`): the materializer would ignore them.
pub fn not_enabled(segments: &[Segment], config: &FloeConfig) -> HashSet<String> {
    let topics: std::collections::BTreeSet<&str> = segments.iter().map(|s| s.topic.as_str()).collect();
    let disabled: HashSet<&str> = topics.into_iter().filter(|t| config.resolve(t).is_none()).collect();
    segments.iter().filter(|s| disabled.contains(s.topic.as_str())).map(|s| s.key.clone()).collect()
}

/// The segments not to hand, besides those a previous run handed (the state file).
#[derive(Debug, Default, Clone)]
pub struct Skip {
    /// Keys of the segments whose every offset their table holds ([`already_held`]).
    pub held: HashSet<String>,
    /// Keys of the segments of topics the configuration does not enable ([`not_enabled`]).
    pub not_enabled: HashSet<String>,
}

/// The committed offsets, per topic, of the tables the segments' topics go to (a topic
/// not enabled goes nowhere), each table read once.
async fn committed_by_topic(
    segments: &[Segment],
    config: &FloeConfig,
    tables: &dyn TableLookup,
) -> anyhow::Result<HashMap<String, CommittedOffsets>> {
    let topics: std::collections::BTreeSet<&str> = segments.iter().map(|s| s.topic.as_str()).collect();
    let mut held = HashMap::new();
    for topic in topics {
        let Some(resolved) = config.resolve(topic) else { continue };
        let name = TableName { namespace: resolved.namespace.clone(), name: resolved.table.clone() };
        let view = tables.view(&name).await.with_context(|| format!("reading the offsets {name} holds"))?;
        let Some(view) = view else { continue };
        held.insert(topic.to_string(), view.committed);
    }
    Ok(held)
}

/// The first and last offset a tiered segment's manifest names; `None` when it cannot be
/// read or names none (the segment is then handed, and the materializer says why).
async fn manifest_range(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Option<(i64, i64)> {
    if !key.ends_with(".rsm-manifest") {
        return None;
    }
    let object = s3.get_object().bucket(bucket).key(key).send().await.ok()?;
    let bytes = object.body.collect().await.ok()?.into_bytes();
    let manifest = Manifest::parse(key, &bytes).ok()?;
    manifest.remote_log_segment_metadata.map(|m| (m.start_offset, m.end_offset))
}

/// The EventBridge "Object Created" event S3 sends for `key` of `bucket`: what the
/// materializer gets live.
pub fn object_created_event(bucket: &str, key: &str) -> Value {
    json!({
        "version": "0",
        "detail-type": "Object Created",
        "source": "aws.s3",
        "detail": {
            "version": "0",
            "bucket": { "name": bucket },
            "object": { "key": url_encode(key) },
            "reason": "PutObject",
        },
    })
}

/// Encodes a key as S3 events do: every byte but unreserved characters and `/` as `%XX`.
fn url_encode(key: &str) -> String {
    key.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Where the materializer is invoked. (Its futures need not be `Send`: the backfill
/// polls them on one task, which lets a test run the materializer's handler in-process.)
#[async_trait::async_trait(?Send)]
pub trait Invoker {
    /// Runs the materializer on `event`, to its end; `Err` with the function's reason.
    async fn invoke(&self, event: Value) -> Result<(), String>;
}

/// The deployed materializer, invoked synchronously (`RequestResponse`).
pub struct LambdaInvoker {
    pub client: aws_sdk_lambda::Client,
    pub function: String,
}

#[async_trait::async_trait(?Send)]
impl Invoker for LambdaInvoker {
    async fn invoke(&self, event: Value) -> Result<(), String> {
        let response = self
            .client
            .invoke()
            .function_name(&self.function)
            .invocation_type(aws_sdk_lambda::types::InvocationType::RequestResponse)
            .payload(aws_sdk_lambda::primitives::Blob::new(event.to_string()))
            .send()
            .await
            .map_err(|e| match e.as_service_error() {
                Some(service) => format!("{}: {}", service.code().unwrap_or("error"), service.message().unwrap_or("")),
                None => aws_sdk_lambda::error::DisplayErrorContext(e).to_string(),
            })?;
        match response.function_error() {
            None => Ok(()),
            Some(kind) => {
                let payload = response.payload().map(|p| String::from_utf8_lossy(p.as_ref()).into_owned());
                Err(format!("{kind}: {}", payload.unwrap_or_default()))
            }
        }
    }
}

/// The keys of one bucket already handed, in a file: a first line naming the bucket
/// ([`BUCKET_LINE`]), then one key a line, appended as each succeeds.
pub struct Progress {
    path: PathBuf,
    bucket: String,
    done: HashSet<String>,
    /// Whether the file names its bucket yet (not when new, nor one written before files
    /// named it: the first record writes it).
    named: bool,
}

/// How a state file's first line starts: the bucket follows.
pub const BUCKET_LINE: &str = "#floe-backfill bucket=";

impl Progress {
    /// Reads the file at `path` (none yet: nothing handed) of `bucket`'s backfill; a file
    /// of another bucket is refused. One without a bucket (from before files named theirs)
    /// is adopted: `bucket` is written into it with the first record.
    pub fn open(path: &Path, bucket: &str) -> anyhow::Result<Progress> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e).with_context(|| format!("reading the backfill state {}", path.display())),
        };
        let mut lines = text.lines().filter(|l| !l.is_empty()).peekable();
        let recorded = lines.peek().and_then(|l| l.strip_prefix(BUCKET_LINE)).map(str::to_string);
        if let Some(recorded) = &recorded {
            anyhow::ensure!(
                recorded == bucket,
                "the backfill state {} is of bucket s3://{recorded}, not s3://{bucket}: give this bucket's \
                 --state (by default floe-backfill-{bucket}.state)",
                path.display()
            );
            lines.next();
        }
        let done = lines.map(str::to_string).collect();
        Ok(Progress { path: path.to_path_buf(), bucket: bucket.to_string(), done, named: recorded.is_some() })
    }

    pub fn is_done(&self, key: &str) -> bool {
        self.done.contains(key)
    }

    fn record(&mut self, key: &str) -> anyhow::Result<()> {
        let context = || format!("writing the backfill state {}", self.path.display());
        if !self.named {
            // Named first, the keys handed before kept: written aside, then moved over.
            let mut text = format!("{BUCKET_LINE}{}\n", self.bucket);
            self.done.iter().for_each(|k| text += &format!("{k}\n"));
            let aside = self.path.with_extension("naming");
            std::fs::write(&aside, text).and_then(|()| std::fs::rename(&aside, &self.path)).with_context(context)?;
            self.named = true;
        }
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&self.path).with_context(context)?;
        writeln!(file, "{key}").with_context(context)?;
        self.done.insert(key.to_string());
        Ok(())
    }
}

/// How a backfill runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Invocations at once.
    pub concurrency: usize,
    /// Stop after handing this many segments (the rest is left for a rerun).
    pub limit: Option<usize>,
}

/// What a backfill did.
#[derive(Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Report {
    /// Segments the materializer took.
    pub handed: usize,
    /// Segments whose every offset their table already held ([`already_held`]): not handed.
    pub already_held: usize,
    /// Segments a previous run handed (in the state file).
    pub skipped_as_handed: usize,
    /// Segments of topics the configuration does not enable ([`not_enabled`]): not handed.
    pub not_enabled: usize,
    /// Segments left for a rerun by `--limit`.
    pub left: usize,
    /// Segments whose invocation failed, with the reason (a rerun tries them again).
    pub failed: Vec<(String, String)>,
}

/// The segments left out of a backfill, per kind.
#[derive(Debug, Default)]
struct LeftOut {
    not_enabled: usize,
    handed_before: usize,
    in_table: usize,
}

/// The segments to hand: those of enabled topics neither handed before (in `progress`)
/// nor held by their table (`skip`); with the counts of each kind left out.
fn to_hand<'a>(segments: &'a [Segment], progress: &Progress, skip: &Skip) -> (Vec<&'a Segment>, LeftOut) {
    let (mut left_out, mut todo) = (LeftOut::default(), Vec::new());
    for segment in segments {
        if skip.not_enabled.contains(&segment.key) {
            left_out.not_enabled += 1;
        } else if progress.is_done(&segment.key) {
            left_out.handed_before += 1;
        } else if skip.held.contains(&segment.key) {
            left_out.in_table += 1;
        } else {
            todo.push(segment);
        }
    }
    (todo, left_out)
}

/// Hands every segment of `bucket` neither in `progress` nor in `skip` (held by its table,
/// of a topic not enabled) to `invoker`.
pub async fn backfill(
    bucket: &str,
    segments: &[Segment],
    skip: &Skip,
    invoker: &dyn Invoker,
    progress: &mut Progress,
    options: &Options,
    mut out: impl Write,
) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let (mut todo, left_out) = to_hand(segments, progress, skip);
    (report.skipped_as_handed, report.already_held, report.not_enabled) =
        (left_out.handed_before, left_out.in_table, left_out.not_enabled);
    if let Some(limit) = options.limit {
        report.left = todo.len().saturating_sub(limit);
        todo.truncate(limit);
    }
    let total = todo.len();
    let mut results = futures::stream::iter(todo)
        .map(|segment| async move { (segment, invoker.invoke(object_created_event(bucket, &segment.key)).await) })
        .buffer_unordered(options.concurrency.max(1));
    let mut seen = 0;
    while let Some((segment, result)) = results.next().await {
        match result {
            Ok(()) => {
                progress.record(&segment.key)?;
                report.handed += 1;
            }
            Err(reason) => {
                writeln!(out, "failed: s3://{bucket}/{}: {reason}", segment.key)?;
                report.failed.push((segment.key.clone(), reason));
            }
        }
        seen += 1;
        if seen % PROGRESS_EVERY == 0 || seen == total {
            writeln!(
                out,
                "{seen}/{total} segments: {} handed, {} failed ({} already in the table)",
                report.handed,
                report.failed.len(),
                report.already_held
            )?;
        }
    }
    writeln!(
        out,
        "backfill of s3://{bucket}: {} handed, {} already in the table, {} skipped (handed before), \
         {} left by --limit, {} failed, {} of topics not enabled",
        report.handed,
        report.already_held,
        report.skipped_as_handed,
        report.left,
        report.failed.len(),
        report.not_enabled
    )?;
    Ok(report)
}

/// What a dry run assumes of the materializer to estimate the cost.
#[derive(Debug, Clone)]
pub struct CostModel {
    /// The materializer's memory (the template's: 1024 MiB).
    pub memory_mib: u64,
    /// Segment bytes it converts per second.
    pub mib_per_second: f64,
    /// Seconds each invocation spends besides converting (reads, lookups, the queue).
    pub seconds_per_invocation: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel { memory_mib: 1024, mib_per_second: 30.0, seconds_per_invocation: 1.0 }
    }
}

/// Lambda's arm64 prices in us-east-1: per request, and per GB-second.
const PRICE_PER_REQUEST: f64 = 0.20 / 1_000_000.0;
const PRICE_PER_GB_SECOND: f64 = 0.000_013_333_4;

/// What a dry run prints: per topic-partition the segments and bytes that would be
/// handed (those neither in `progress` nor in `skip`), then the invocations and an
/// estimated cost. Returns the number of invocations.
pub fn dry_run(
    bucket: &str,
    segments: &[Segment],
    skip: &Skip,
    progress: &Progress,
    cost: &CostModel,
    mut out: impl Write,
) -> anyhow::Result<usize> {
    let mut partitions: BTreeMap<(&str, i32), (usize, u64)> = BTreeMap::new();
    let (todo, LeftOut { not_enabled, handed_before, in_table }) = to_hand(segments, progress, skip);
    for segment in &todo {
        let entry = partitions.entry((segment.topic.as_str(), segment.partition)).or_default();
        entry.0 += 1;
        entry.1 += segment.bytes;
    }
    for ((topic, partition), (count, bytes)) in &partitions {
        writeln!(out, "{topic}-{partition}: {count} segments, {bytes} bytes")?;
    }
    let bytes: u64 = todo.iter().map(|s| s.bytes).sum();
    let seconds = bytes as f64 / (cost.mib_per_second * 1048576.0) + todo.len() as f64 * cost.seconds_per_invocation;
    let gb_seconds = seconds * cost.memory_mib as f64 / 1024.0;
    let dollars = todo.len() as f64 * PRICE_PER_REQUEST + gb_seconds * PRICE_PER_GB_SECOND;
    writeln!(
        out,
        "dry run of s3://{bucket}: would hand {} segments ({bytes} bytes) in {} invocations, \
         {in_table} already in the table, {handed_before} already handed, {not_enabled} of topics not enabled; \
         estimated {gb_seconds:.0} GB-seconds, about ${dollars:.4} of Lambda (an estimate: {} MiB at {} MiB/s \
         plus {} s per invocation, arm64 us-east-1 prices; S3, Glue, SQS and DynamoDB requests not included)",
        todo.len(),
        todo.len(),
        cost.memory_mib,
        cost.mib_per_second,
        cost.seconds_per_invocation,
    )?;
    Ok(todo.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects(keys: &[(&str, u64)]) -> Vec<(String, u64)> {
        keys.iter().map(|(k, s)| (k.to_string(), *s)).collect()
    }

    const TOPIC_ID: &str = "AAAAAAAAAAAAAAAAAAAAAA";
    const SEGMENT_ID: &str = "BBBBBBBBBBBBBBBBBBBBBB";

    #[test]
    fn segments_are_the_objects_live_events_name_in_offset_order() {
        let tiered = |offset: &str, ext: &str| format!("ts/orders-{TOPIC_ID}/0/{offset}-{SEGMENT_ID}.{ext}");
        let listed = objects(&[
            ("logs/orders-1/00000000000000000100.log", 7),
            ("logs/orders-1/00000000000000000100.index", 1),
            ("logs/orders-1/00000000000000000000.log", 5),
            ("logs/clicks-0/00000000000000000000.log", 3),
            ("logs/clicks-0/leader-epoch-checkpoint", 1),
            (&tiered("00000000000000000040", "log"), 900),
            (&tiered("00000000000000000040", "indexes"), 9),
            (&tiered("00000000000000000040", "rsm-manifest"), 2),
        ]);
        let keys = |topic| segments_of(&listed, topic).into_iter().map(|s| (s.key, s.bytes)).collect::<Vec<_>>();
        assert_eq!(
            keys(None),
            [
                ("logs/clicks-0/00000000000000000000.log".to_string(), 3),
                (tiered("00000000000000000040", "rsm-manifest"), 900),
                ("logs/orders-1/00000000000000000000.log".to_string(), 5),
                ("logs/orders-1/00000000000000000100.log".to_string(), 7),
            ]
        );
        assert_eq!(keys(Some("clicks")).len(), 1);
        assert!(keys(Some("nothing")).is_empty());
    }

    #[test]
    fn the_event_is_one_the_materializer_reads_back_to_the_same_key() {
        let key = "p/a b+c%/orders-0/00000000000000000000.log";
        let objects = floe_aws::events::objects_in_event(&object_created_event("bkt", key)).unwrap();
        assert_eq!(objects.objects, [floe_core::materializer::ObjectRef::new("bkt", key)]);
    }

    struct Failing(&'static str);

    #[async_trait::async_trait(?Send)]
    impl Invoker for Failing {
        async fn invoke(&self, event: Value) -> Result<(), String> {
            match event.to_string().contains(self.0) {
                true => Err("boom".into()),
                false => Ok(()),
            }
        }
    }

    #[tokio::test]
    async fn a_failed_segment_is_reported_and_handed_again_by_the_next_run() {
        let listed = objects(&[("a/orders-0/00000000000000000000.log", 1), ("a/orders-0/00000000000000000009.log", 1)]);
        let segments = segments_of(&listed, None);
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let options = Options { concurrency: 2, limit: None };
        let mut progress = Progress::open(&state, "b").unwrap();
        let mut out = Vec::new();
        let none = Skip::default();
        let report =
            backfill("b", &segments, &none, &Failing("09.log"), &mut progress, &options, &mut out).await.unwrap();
        assert_eq!((report.handed, report.failed.len()), (1, 1));
        assert!(String::from_utf8(out).unwrap().contains(
            "1 handed, 0 already in the table, 0 skipped (handed before), 0 left by --limit, 1 failed, 0 of"
        ));
        let mut progress = Progress::open(&state, "b").unwrap();
        let report =
            backfill("b", &segments, &none, &Failing("nothing"), &mut progress, &options, Vec::new()).await.unwrap();
        assert_eq!((report.handed, report.skipped_as_handed, report.failed.len()), (1, 1, 0));
    }

    /// A stand-in for the Lambda Invoke API on 127.0.0.1: answers each request as the
    /// function would, with `X-Amz-Function-Error` when the payload names `fail`; returns
    /// its address and the (path, body) of each request.
    async fn invoke_api(fail: &'static str) -> (String, std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let requests = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let request = loop {
                    let n = socket.read(&mut chunk).await.unwrap();
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    let Some((head, body)) = text.split_once("\r\n\r\n") else { continue };
                    let length = head
                        .lines()
                        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(str::to_string));
                    if n == 0 || body.len() >= length.map_or(0, |l| l.trim().parse().unwrap()) {
                        let invocation_type =
                            head.lines().any(|l| l.eq_ignore_ascii_case("x-amz-invocation-type: RequestResponse"));
                        let path = head.split_whitespace().nth(1).unwrap();
                        break (format!("{path} sync: {invocation_type}"), body.to_string());
                    }
                };
                let error = match request.1.contains(fail) {
                    true => "X-Amz-Function-Error: Unhandled\r\n",
                    false => "",
                };
                let body = r#"{"errorMessage":"it broke"}"#;
                requests.lock().unwrap().push(request);
                let response = format!(
                    "HTTP/1.1 200 OK\r\n{error}content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                socket.write_all(response.as_bytes()).await.unwrap();
            }
        });
        (url, seen)
    }

    #[tokio::test]
    async fn the_lambda_invoker_sends_the_event_and_reports_the_function_error() {
        let (url, seen) = invoke_api("00000000000000000009").await;
        let config = aws_sdk_lambda::Config::builder()
            .behavior_version(aws_sdk_lambda::config::BehaviorVersion::latest())
            .region(aws_sdk_lambda::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_lambda::config::Credentials::new("a", "b", None, None, "test"))
            .endpoint_url(url)
            .build();
        let invoker = LambdaInvoker { client: aws_sdk_lambda::Client::from_conf(config), function: "floe-m".into() };
        let ok = object_created_event("b", "orders-0/00000000000000000000.log");
        assert_eq!(invoker.invoke(ok.clone()).await, Ok(()));
        let failed = invoker.invoke(object_created_event("b", "orders-0/00000000000000000009.log")).await;
        assert_eq!(failed, Err(r#"Unhandled: {"errorMessage":"it broke"}"#.to_string()));
        let seen = seen.lock().unwrap();
        assert_eq!(seen[0].0, "/2015-03-31/functions/floe-m/invocations sync: true");
        assert_eq!(serde_json::from_str::<Value>(&seen[0].1).unwrap(), ok);
    }

    #[test]
    fn a_dry_run_counts_per_partition_and_estimates() {
        let listed = objects(&[("o-0/00000000000000000000.log", 1 << 20), ("o-1/00000000000000000000.log", 2 << 20)]);
        let dir = tempfile::tempdir().unwrap();
        let progress = Progress::open(&dir.path().join("state"), "b").unwrap();
        let mut out = Vec::new();
        let segments = segments_of(&listed, None);
        let n = dry_run("b", &segments, &Skip::default(), &progress, &CostModel::default(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(n, 2);
        assert!(text.contains("o-0: 1 segments, 1048576 bytes\no-1: 1 segments, 2097152 bytes\n"), "{text}");
        assert!(text.contains("in 2 invocations") && text.contains("estimated 2 GB-seconds"), "{text}");
        // A segment its table holds costs nothing and is counted apart.
        let held = Skip { held: HashSet::from([segments[0].key.clone()]), ..Default::default() };
        let mut out = Vec::new();
        assert_eq!(dry_run("b", &segments, &held, &progress, &CostModel::default(), &mut out).unwrap(), 1);
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("o-0:") && text.contains("o-1: 1 segments"), "{text}");
        assert!(text.contains("in 1 invocations, 1 already in the table, 0 already handed"), "{text}");
    }

    #[tokio::test]
    async fn a_segment_its_table_holds_is_not_handed_and_is_counted_apart() {
        let listed = objects(&[("a/orders-0/00000000000000000000.log", 1), ("a/orders-0/00000000000000000009.log", 1)]);
        let segments = segments_of(&listed, None);
        let dir = tempfile::tempdir().unwrap();
        let mut progress = Progress::open(&dir.path().join("state"), "b").unwrap();
        let held = Skip { held: HashSet::from([segments[0].key.clone()]), ..Default::default() };
        let options = Options { concurrency: 2, limit: None };
        let mut out = Vec::new();
        let invoker = Failing("00000000000000000000.log");
        let report = backfill("b", &segments, &held, &invoker, &mut progress, &options, &mut out).await.unwrap();
        assert_eq!((report.handed, report.already_held, report.failed.len()), (1, 1, 0));
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains("1/1 segments: 1 handed, 0 failed (1 already in the table)"), "{out}");
        assert!(out.contains("1 handed, 1 already in the table, 0 skipped (handed before)"), "{out}");
    }

    #[tokio::test]
    async fn topics_the_config_does_not_enable_are_neither_handed_nor_costed() {
        let listed = objects(&[
            ("a/orders-0/00000000000000000000.log", 1 << 20),
            ("a/clicks-0/00000000000000000000.log", 4 << 20),
            ("a/clicks-1/00000000000000000000.log", 4 << 20),
        ]);
        let segments = segments_of(&listed, None);
        let config = FloeConfig::parse("[[topics]]\ntopic = \"orders\"\n").unwrap();
        let skip = Skip { not_enabled: not_enabled(&segments, &config), ..Default::default() };
        assert_eq!(skip.not_enabled.len(), 2);
        assert!(not_enabled(&segments, &FloeConfig::default()).is_empty(), "without a config every topic is");
        let dir = tempfile::tempdir().unwrap();
        let mut progress = Progress::open(&dir.path().join("state"), "b").unwrap();
        let mut out = Vec::new();
        assert_eq!(dry_run("b", &segments, &skip, &progress, &CostModel::default(), &mut out).unwrap(), 1);
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("clicks") && text.contains("would hand 1 segments (1048576 bytes)"), "{text}");
        assert!(text.contains("0 already handed, 2 of topics not enabled"), "{text}");
        let options = Options { concurrency: 2, limit: None };
        let invoker = Failing("clicks");
        let mut out = Vec::new();
        let report = backfill("b", &segments, &skip, &invoker, &mut progress, &options, &mut out).await.unwrap();
        assert_eq!((report.handed, report.not_enabled, report.failed.len()), (1, 2, 0));
        assert!(String::from_utf8(out).unwrap().contains("0 failed, 2 of topics not enabled"));
    }

    #[tokio::test]
    async fn a_state_file_names_its_bucket_and_another_bucket_s_is_refused() {
        let listed = objects(&[("a/orders-0/00000000000000000000.log", 1)]);
        let segments = segments_of(&listed, None);
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        // A file from before files named their bucket: adopted, its keys kept.
        std::fs::write(&state, "a/orders-0/00000000000000000009.log\n").unwrap();
        let mut progress = Progress::open(&state, "segments").unwrap();
        let options = Options { concurrency: 1, limit: None };
        let (skip, invoker) = (Skip::default(), Failing("none"));
        let report = backfill("segments", &segments, &skip, &invoker, &mut progress, &options, Vec::new()).await;
        assert_eq!(report.unwrap().handed, 1);
        assert_eq!(
            std::fs::read_to_string(&state).unwrap(),
            "#floe-backfill bucket=segments\na/orders-0/00000000000000000009.log\na/orders-0/00000000000000000000.log\n"
        );
        let again = Progress::open(&state, "segments").unwrap();
        assert!(
            again.is_done("a/orders-0/00000000000000000000.log")
                && again.is_done("a/orders-0/00000000000000000009.log")
        );
        let Err(e) = Progress::open(&state, "other") else { panic!("another bucket's state opened") };
        let e = e.to_string();
        assert!(e.contains("is of bucket s3://segments, not s3://other"), "{e}");
        assert!(e.contains(&state.display().to_string()), "{e}");
    }

    #[test]
    fn a_log_dir_segment_ends_before_the_next_in_its_folder() {
        let tiered = format!("ts/orders-{TOPIC_ID}/0/00000000000000000040-{SEGMENT_ID}.rsm-manifest");
        let listed = objects(&[
            ("a/orders-0/00000000000000000000.log", 1),
            ("a/orders-0/00000000000000000100.log", 1),
            ("b/orders-0/00000000000000000000.log", 1),
            ("b/orders-0/00000000000000000050.log", 1),
            (&tiered, 1),
        ]);
        let ends: Vec<(String, Option<i64>)> =
            segments_of(&listed, None).into_iter().map(|s| (s.key, s.last_offset)).collect();
        assert_eq!(
            ends,
            [
                ("a/orders-0/00000000000000000000.log".to_string(), Some(99)),
                ("b/orders-0/00000000000000000000.log".to_string(), Some(49)),
                (tiered.clone(), None),
                ("b/orders-0/00000000000000000050.log".to_string(), None),
                ("a/orders-0/00000000000000000100.log".to_string(), None),
            ],
            "each folder's last segment, and a tiered one (its manifest says), have no end here"
        );
    }
}
