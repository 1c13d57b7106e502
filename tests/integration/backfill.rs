//! `floe aws backfill` on moto, judged by PyIceberg: the tiered-storage segments already
//! in a bucket handed to the materializer while live events for some of the same
//! segments are materialized and a committer commits: the segment the table held is not
//! handed (no invocation; the dry run counts it apart the same way), every record is
//! committed once; an interrupted backfill of log-dir copies resumed from its state file,
//! each segment handed once, and afterwards every log-dir segment but the folder's last
//! found already in the table; a dry run that hands nothing; a re-created topic's
//! segments (another topic id, the same offsets) handed beside the old topic's.
//!
//! The materializer runs in-process behind the backfill's `Invoker` (its Lambda handler,
//! [`handle_materializer_event`], on the same EventBridge event the deployed function
//! gets); the Lambda Invoke call itself is not exercised here.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use floe_aws::lambda::{handle_committer_event, handle_materializer_event};
use floe_cli::backfill::{self, CostModel, Invoker, Options, Progress, Skip};
use floe_core::config::FloeConfig;
use floe_core::materializer::{Materializer, ObjectRef};
use serde_json::Value;

use crate::committer::{Aws, SEGMENTS, assert_payments, payments, setup_with};
use crate::support;

/// The materializer's Lambda handler in this process; what it answered, per invocation.
struct InProcess {
    materializer: Materializer,
    ignored: Mutex<Vec<String>>,
    invocations: Mutex<Vec<String>>,
}

impl InProcess {
    fn new(materializer: Materializer) -> InProcess {
        InProcess { materializer, ignored: Mutex::default(), invocations: Mutex::default() }
    }
}

#[async_trait::async_trait(?Send)]
impl Invoker for InProcess {
    async fn invoke(&self, event: Value) -> Result<(), String> {
        self.invocations.lock().unwrap().push(event["detail"]["object"]["key"].as_str().unwrap().to_string());
        let response = handle_materializer_event(&self.materializer, event).await.map_err(|e| e.to_string())?;
        self.ignored.lock().unwrap().extend(response.ignored);
        Ok(())
    }
}

/// The `payments` segments' offsets, first and last.
const RANGES: [(i64, i64); 3] = [(0, 54), (55, 65), (66, 99)];

/// The three `payments` segments laid out as the tiered-storage plugin uploads them
/// (make_tiered.py) and uploaded; their manifests' keys, which the live events name.
async fn upload_tiered_payments(aws: &Aws, dir: &std::path::Path) -> Vec<String> {
    upload_tiered_incarnation(aws, dir, "MWJ6FHTfRYy67jzwZdeqSQ").await
}

/// [`upload_tiered_payments`] for the topic of id `topic_id` (a topic deleted and created
/// again under its name gets a new one).
async fn upload_tiered_incarnation(aws: &Aws, dir: &std::path::Path, topic_id: &str) -> Vec<String> {
    let mut manifests = Vec::new();
    for (key, (start, end)) in SEGMENTS.iter().zip(RANGES) {
        let out = std::process::Command::new(support::python())
            .arg(support::root().join("tests/py/make_tiered.py"))
            .arg(dir.join(key))
            .arg(dir.join("tiered"))
            .args(["--topic", "payments", "--partition", "0", "--start", &start.to_string(), "--end", &end.to_string()])
            .args(["--topic-id", topic_id])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let keys: Value = serde_json::from_slice(&out.stdout).unwrap();
        for ext in ["log", "indexes", "rsm-manifest"] {
            let key = keys[ext].as_str().unwrap();
            let body = std::fs::read(dir.join("tiered").join(key)).unwrap();
            aws.s3.put_object().bucket(&aws.segments).key(key).body(body.into()).send().await.unwrap();
        }
        manifests.push(keys["rsm-manifest"].as_str().unwrap().to_string());
    }
    manifests
}

async fn upload_payments(aws: &Aws, dir: &std::path::Path) {
    for key in SEGMENTS {
        let body = std::fs::read(dir.join(key)).unwrap();
        aws.s3.put_object().bucket(&aws.segments).key(key).body(body.into()).send().await.unwrap();
    }
}

/// The segments of `segments` whose every offset the table already holds, as the backfill
/// finds them before handing any (the functions' configuration, Glue and S3).
async fn already_held(aws: &Aws, segments: &[backfill::Segment]) -> HashSet<String> {
    let config = FloeConfig::from_file(&aws.config_file).unwrap();
    let tables = floe_cli::aws::glue_tables(&aws.config, aws.s3.clone()).await.unwrap();
    backfill::already_held(&aws.s3, &aws.segments, segments, &config, &tables).await.unwrap()
}

/// Commits what the queue holds, as the committer Lambda does, until `done` is set and
/// the queue has stayed empty past a redelivery (visibility timeout 1 s).
pub(crate) async fn commit_until(aws: &Aws, done: &AtomicBool) {
    let service = aws.committer();
    let mut empty_after_done = 0;
    for _ in 0..600 {
        let finished = done.load(Ordering::SeqCst);
        let (event, receipts) = aws.receive().await;
        if event.records.is_empty() {
            empty_after_done = if finished { empty_after_done + 1 } else { 0 };
            if empty_after_done == 2 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(if finished { 1200 } else { 200 })).await;
            continue;
        }
        let ids: Vec<String> = event.records.iter().map(|r| r.message_id.clone().unwrap()).collect();
        let response = handle_committer_event(&service, event, None).await;
        let failed: HashSet<&str> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
        let done_receipts: Vec<String> =
            ids.iter().zip(receipts).filter(|(id, _)| !failed.contains(id.as_str())).map(|(_, r)| r).collect();
        aws.delete(&done_receipts).await;
    }
    panic!("the queue never emptied");
}

#[tokio::test]
async fn a_backfill_alongside_live_events_commits_every_record_once() {
    let aws = setup_with("backfill", "").await;
    let (topic, offsets, values) = payments();
    let manifests = upload_tiered_payments(&aws, topic.path()).await;
    // History the table already holds: the first segment, committed live before.
    let live = aws.materializer().await;
    live.handle(&ObjectRef::new(&aws.segments, &manifests[0])).await.unwrap();
    commit_until(&aws, &AtomicBool::new(true)).await;

    let segments = backfill::list_segments(&aws.s3, &aws.segments, "", Some("payments")).await.unwrap();
    let keys: Vec<String> = segments.iter().map(|s| s.key.clone()).collect();
    assert_eq!(keys, manifests, "the manifests, in offset order");
    // The table holds the first segment: it is not handed, and the dry run says so.
    let held = already_held(&aws, &segments).await;
    assert_eq!(held, HashSet::from([manifests[0].clone()]));
    let held = Skip { held, ..Default::default() };
    let state = tempfile::tempdir().unwrap();
    let mut progress = Progress::open(&state.path().join("state"), &aws.segments).unwrap();
    let mut out = Vec::new();
    let would = backfill::dry_run(&aws.segments, &segments, &held, &progress, &CostModel::default(), &mut out);
    let out = String::from_utf8(out).unwrap();
    assert_eq!(would.unwrap(), 2, "{out}");
    assert!(
        out.contains("payments-0: 2 segments") && out.contains("in 2 invocations, 1 already in the table"),
        "{out}"
    );
    let invoker = InProcess::new(aws.materializer().await);
    let options = Options { concurrency: 2, limit: None };
    let done = AtomicBool::new(false);
    // The backfill, live events for the two segments it has yet to hand, and the
    // committer, all at once.
    let work = async {
        let mut out = Vec::new();
        let backfill = backfill::backfill(&aws.segments, &segments, &held, &invoker, &mut progress, &options, &mut out);
        let live_events = async {
            for key in &manifests[1..] {
                live.handle(&ObjectRef::new(&aws.segments, key)).await.unwrap();
            }
        };
        let (report, ()) = tokio::join!(backfill, live_events);
        done.store(true, Ordering::SeqCst);
        (report.unwrap(), String::from_utf8(out).unwrap())
    };
    let ((report, out), ()) = tokio::join!(work, commit_until(&aws, &done));
    assert_eq!((report.handed, report.already_held, report.failed.len()), (2, 1, 0), "{out}");
    assert!(out.contains("2/2 segments: 2 handed, 0 failed (1 already in the table)"), "{out}");
    let mut invoked = invoker.invocations.lock().unwrap().clone();
    invoked.sort();
    assert_eq!(invoked, manifests[1..], "only the segments the table did not hold are invoked");
    let read = aws.read();
    assert_payments(&read, &offsets, &values);
}

#[tokio::test]
async fn an_interrupted_backfill_resumes_and_a_dry_run_hands_nothing() {
    let aws = setup_with("bfresume", "").await;
    let (topic, offsets, values) = payments();
    upload_payments(&aws, topic.path()).await;
    let segments = backfill::list_segments(&aws.s3, &aws.segments, "payments-0/", None).await.unwrap();
    assert_eq!(segments.len(), 3);
    assert!(backfill::list_segments(&aws.s3, &aws.segments, "", Some("ledger")).await.unwrap().is_empty());
    let state = tempfile::tempdir().unwrap();
    let state = state.path().join("state");

    let mut out = Vec::new();
    let none = Skip::default();
    assert_eq!(already_held(&aws, &segments).await, none.held, "no table yet");
    let would = backfill::dry_run(
        &aws.segments,
        &segments,
        &none,
        &Progress::open(&state, &aws.segments).unwrap(),
        &CostModel::default(),
        &mut out,
    );
    let out = String::from_utf8(out).unwrap();
    assert_eq!(would.unwrap(), 3);
    assert!(out.contains("payments-0: 3 segments") && out.contains("in 3 invocations"), "{out}");
    assert!(aws.receive().await.0.records.is_empty(), "a dry run hands nothing");

    // Interrupted after one segment; the rerun hands the other two.
    let invoker = InProcess::new(aws.materializer().await);
    let mut progress = Progress::open(&state, &aws.segments).unwrap();
    let first = Options { concurrency: 2, limit: Some(1) };
    let report = backfill::backfill(&aws.segments, &segments, &none, &invoker, &mut progress, &first, Vec::new()).await;
    assert_eq!((report.as_ref().unwrap().handed, report.unwrap().left), (1, 2));
    let mut progress = Progress::open(&state, &aws.segments).unwrap();
    let rest = Options { concurrency: 2, limit: None };
    let report = backfill::backfill(&aws.segments, &segments, &none, &invoker, &mut progress, &rest, Vec::new());
    let report = report.await.unwrap();
    assert_eq!((report.handed, report.skipped_as_handed, report.left), (2, 1, 0));
    let mut invoked = invoker.invocations.lock().unwrap().clone();
    invoked.sort();
    assert_eq!(invoked, SEGMENTS, "each segment handed once over both runs");
    let mut out = Vec::new();
    assert_eq!(
        backfill::dry_run(&aws.segments, &segments, &none, &progress, &CostModel::default(), &mut out).unwrap(),
        0
    );

    commit_until(&aws, &AtomicBool::new(true)).await;
    assert_payments(&aws.read(), &offsets, &values);
    // Committed: a log-dir segment ends before the next in its folder, so the first two
    // are found in the table; the folder's last, whose end the listing does not tell, is
    // handed again (and ignored by the committer).
    assert_eq!(already_held(&aws, &segments).await, HashSet::from([SEGMENTS[0], SEGMENTS[1]].map(str::to_string)));
}

/// A topic deleted and created again: the backfill finds only the old topic's segment
/// the table holds already, hands the new topic's (same offsets, another topic id), and
/// each incarnation's records land once (before: the new topic's first segment was
/// skipped as "already in the table").
#[tokio::test]
async fn a_backfill_of_a_re_created_topic_hands_the_new_topic_s_segments() {
    let aws = setup_with("backfill_recreated", "").await;
    let (topic, offsets, _) = payments();
    let (old, new) = ("AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB");
    let old_manifests = upload_tiered_incarnation(&aws, topic.path(), old).await;
    let live = aws.materializer().await;
    live.handle(&ObjectRef::new(&aws.segments, &old_manifests[0])).await.unwrap();
    commit_until(&aws, &AtomicBool::new(true)).await;
    let old_offsets = aws.read().offsets["0"].clone();
    let new_manifests = upload_tiered_incarnation(&aws, topic.path(), new).await;

    let segments = backfill::list_segments(&aws.s3, &aws.segments, "", Some("payments")).await.unwrap();
    let mine: Vec<backfill::Segment> = segments.into_iter().filter(|s| new_manifests.contains(&s.key)).collect();
    assert_eq!(mine.len(), 3);
    assert!(already_held(&aws, &mine).await.is_empty(), "the new topic's segments are not the old one's");
    let invoker = InProcess::new(aws.materializer().await);
    let state = tempfile::tempdir().unwrap();
    let mut progress = Progress::open(&state.path().join("state"), &aws.segments).unwrap();
    let options = Options { concurrency: 2, limit: None };
    let mut out = Vec::new();
    let report =
        backfill::backfill(&aws.segments, &mine, &Skip::default(), &invoker, &mut progress, &options, &mut out)
            .await
            .unwrap();
    assert_eq!((report.handed, report.failed.len()), (3, 0), "{}", String::from_utf8_lossy(&out));
    commit_until(&aws, &AtomicBool::new(true)).await;
    let read = aws.read();
    assert_eq!(read.summary["floe.offsets.payments.0"], "0-54");
    assert_eq!(read.summary[&format!("floe.offsets.payments~{new}.0")], "0-99");
    // Each incarnation's records once (the same offsets twice: one row of each topic).
    let mut expected: Vec<i64> = old_offsets.iter().chain(&offsets).copied().collect();
    expected.sort_unstable();
    assert_eq!(read.offsets["0"], expected);
    // Every segment of both topics again: all found in the table.
    let all = backfill::list_segments(&aws.s3, &aws.segments, "", Some("payments")).await.unwrap();
    let held = already_held(&aws, &all).await;
    let expected: HashSet<String> = new_manifests.iter().chain(&old_manifests[..1]).cloned().collect();
    assert_eq!(held, expected);
}
