//! Exactly once at the edges: a topic deleted and created again under its name; bad
//! records inside transactions, which count only once their transaction commits.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use floe_core::catalog::CatalogError;
use floe_core::committer::TaskResult;
use floe_core::config::FloeConfig;
use serde_json::{Value, json};

use crate::committer::{CatalogCall, Hooked, SEGMENTS, local_committer, local_run, materialize, payments, read_local};
use crate::support;

/// Lays `segment` (a broker log of topic `payments`, partition 0, `start..=end`) out under
/// `input` as the tiered-storage plugin uploads it for the topic id `topic_id`.
fn tiered(topic: &Path, segment: &str, input: &Path, topic_id: &str, (start, end): (i64, i64)) {
    let out = std::process::Command::new(support::python())
        .arg(support::root().join("tests/py/make_tiered.py"))
        .arg(topic.join(segment))
        .arg(input)
        .args(["--topic", "payments", "--partition", "0", "--start", &start.to_string(), "--end", &end.to_string()])
        .args(["--topic-id", topic_id])
        .output()
        .unwrap();
    assert!(out.status.success(), "make_tiered.py: {}", String::from_utf8_lossy(&out.stderr));
    let _: Value = serde_json::from_slice(&out.stdout).unwrap();
}

/// Each incarnation's segments (0..=54, 55..=65, 66..=99).
const RANGES: [(i64, i64); 3] = [(0, 54), (55, 65), (66, 99)];

#[tokio::test]
async fn a_re_created_topic_lands_beside_the_old_one_and_the_audit_holds() {
    let (topic, offsets, _) = payments();
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (old, new) = ("AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB");
    // The first incarnation's first segment: its transactions still open at the end.
    tiered(topic.path(), SEGMENTS[0], input.path(), old, RANGES[0]);
    let report = local_run(input.path(), warehouse.path()).await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let first = read_local(warehouse.path(), "kafka.payments");
    // Deleted and created again: the new topic's offsets restart at 0, all of its segments come.
    for (segment, range) in SEGMENTS.iter().zip(RANGES) {
        tiered(topic.path(), segment, input.path(), new, range);
    }
    let report = local_run(input.path(), warehouse.path()).await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let read = read_local(warehouse.path(), "kafka.payments");
    assert_eq!(read.summary["floe.topic-id.payments"], old);
    assert_eq!(read.summary["floe.offsets.payments.0"], "0-54");
    assert_eq!(read.summary[&format!("floe.offsets.payments~{new}.0")], "0-99");
    // Every committed record of the new topic, beside the old one's rows.
    let mut expected: Vec<i64> = first.offsets["0"].iter().chain(&offsets).copied().collect();
    expected.sort_unstable();
    assert_eq!(read.offsets["0"], expected);
    // The audit: each incarnation's offsets once, the old one's open transactions pending.
    let report = floe_cli::audit::local(warehouse.path(), "kafka.payments").await.unwrap();
    assert!(report.exactly_once, "{report:?}");
    assert_eq!(report.partitions[0].shared, vec![(0, 54)]);
    // A rerun adds nothing, for either incarnation.
    let again = local_run(input.path(), warehouse.path()).await;
    assert_eq!(read_local(warehouse.path(), "kafka.payments").rows, read.rows, "{:?}", again.failed);
}

#[tokio::test]
async fn incarnations_arriving_interleaved_out_of_order_and_twice_each_land_once() {
    let (topic, offsets, _) = payments();
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (old, new) = ("AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB");
    // What the old topic's one segment holds, committed alone.
    let (alone, alone_warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    tiered(topic.path(), SEGMENTS[0], alone.path(), old, RANGES[0]);
    local_run(alone.path(), alone_warehouse.path()).await;
    let old_offsets = read_local(alone_warehouse.path(), "kafka.payments").offsets["0"].clone();
    // The new topic's first segment before the old topic's (the old one uploaded late),
    // the new one's out of order, each delivered twice; each by its own run.
    let arrivals = [(new, 0), (old, 0), (new, 2), (old, 0), (new, 1), (new, 2), (new, 0)];
    for (id, k) in arrivals {
        let input = input.path().join(format!("{id}-{k}"));
        tiered(topic.path(), SEGMENTS[k], &input, id, RANGES[k]);
        let report = local_run(&input, warehouse.path()).await;
        assert!(report.failed.is_empty(), "{:?}", report.failed);
    }
    let read = read_local(warehouse.path(), "kafka.payments");
    // The first id committed is the table's first incarnation, whichever topic it is.
    assert_eq!(read.summary["floe.topic-id.payments"], new);
    assert_eq!(read.summary["floe.offsets.payments.0"], "0-99");
    assert_eq!(read.summary[&format!("floe.offsets.payments~{old}.0")], "0-54");
    // Every committed record of the new topic once, beside the old segment's rows once.
    let mut expected: Vec<i64> = old_offsets.iter().chain(&offsets).copied().collect();
    expected.sort_unstable();
    assert_eq!(read.offsets["0"], expected);
    let report = floe_cli::audit::local(warehouse.path(), "kafka.payments").await.unwrap();
    assert!(report.exactly_once, "{report:?}");
}

/// Segments of topic `events` (JSON values) written by tests/py/lifecycle_engine.py: the
/// first ends with two transactions open, each with a bad record (producer 1: 3..=6, bad
/// at 5; producer 2: 7..=9, bad at 8); the second holds producer 1's ABORT (10),
/// producer 2's COMMIT (11) and two more records.
fn transactions_with_bad_records(input: &Path) {
    let engine_dir = tempfile::tempdir().unwrap();
    let db = engine_dir.path().join("catalog.db");
    let mut engine = support::JsonLines::start("lifecycle_engine.py", &[&db, engine_dir.path()]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let record = |offset: i64| {
        let value =
            if offset == 5 || offset == 8 { "{not json".to_string() } else { json!({ "id": offset }).to_string() };
        json!([now, format!("k{offset}"), value, []])
    };
    let batch = |base: i64, last: i64, pid: Option<i64>| {
        json!({"base": base, "pid": pid, "epoch": pid.map(|_| 0), "log_append": null,
            "records": (base..=last).map(record).collect::<Vec<_>>()})
    };
    let marker = |offset: i64, pid: i64, commit: bool| json!({"marker": offset, "pid": pid, "epoch": 0, "commit": commit, "ts": now + 1000});
    let segments = [
        (0, vec![batch(0, 2, None), batch(3, 6, Some(1)), batch(7, 9, Some(2))]),
        (10, vec![marker(10, 1, false), marker(11, 2, true), batch(12, 13, None)]),
    ];
    for (first, batches) in segments {
        let path = input.join(format!("{first}/events-0/{first:020}.log"));
        engine.call(&json!({"op": "segment", "path": path, "batches": batches})).unwrap();
    }
}

/// `floe local run` of one segment of [`transactions_with_bad_records`] (by its first
/// offset), bad records as `mode` says.
async fn run_segment(input: &Path, first: i64, warehouse: &Path, mode: &str) -> floe_cli::local::LocalReport {
    let mut out = Vec::new();
    floe_cli::local::run(&input.join(first.to_string()), warehouse, config(mode), &mut out).await.unwrap()
}

/// A JSON topic's configuration with bad records as `mode` says.
fn config(mode: &str) -> FloeConfig {
    let text = format!("[defaults]\nenabled = true\nvalue_format = \"json\"\nbad_records = \"{mode}\"\n");
    FloeConfig::parse(&text).unwrap()
}

/// The rows the committed records give: the records outside transactions and producer
/// 2's, less its bad record (8).
const COMMITTED_ROWS: [i64; 7] = [0, 1, 2, 7, 9, 12, 13];

/// Mode `dlq`: the aborted transaction's bad record (5) never reaches the dead-letter
/// table; the committed one's (8) does, once, when its COMMIT comes (before: both at once,
/// with their segment).
#[tokio::test]
async fn a_bad_record_of_an_aborted_transaction_is_no_dead_letter() {
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    transactions_with_bad_records(input.path());
    let report = run_segment(input.path(), 0, warehouse.path(), "dlq").await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(read_local(warehouse.path(), "kafka.events").offsets["0"], [0, 1, 2]);
    let report = run_segment(input.path(), 10, warehouse.path(), "dlq").await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(read_local(warehouse.path(), "kafka.events").offsets["0"], COMMITTED_ROWS);
    let dead_letters = read_local(warehouse.path(), "kafka.events_dlq");
    assert_eq!(dead_letters.offsets["0"], [8]);
    let status = floe_cli::local::status(warehouse.path()).await.unwrap();
    let events = status.iter().find(|t| t.table == "kafka.events").unwrap();
    assert_eq!((events.health.state, events.health.dead_letters_waiting), ("running", 0));
    let audit = floe_cli::audit::local(warehouse.path(), "kafka.events").await.unwrap();
    assert!(audit.exactly_once, "{audit:?}");
    // Both segments again: nothing added to either table.
    for first in [0, 10] {
        let again = run_segment(input.path(), first, warehouse.path(), "dlq").await;
        assert!(again.failed.is_empty(), "{:?}", again.failed);
    }
    assert_eq!(read_local(warehouse.path(), "kafka.events").offsets["0"], COMMITTED_ROWS);
    assert_eq!(read_local(warehouse.path(), "kafka.events_dlq").rows, dead_letters.rows);
}

/// Mode `suspend`: a bad record inside an open transaction suspends nothing; its
/// transaction aborted, never; committed, the table is suspended naming it once the
/// transaction's rows are in (the record written nowhere: no dead-letter table), and a
/// resume goes on without suspending again (before: the first segment suspended the
/// table, and every resume again).
#[tokio::test]
async fn a_bad_record_suspends_only_once_its_transaction_commits() {
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    transactions_with_bad_records(input.path());
    let suspended = async |warehouse: &Path| {
        let status = floe_cli::local::status(warehouse).await.unwrap();
        status.into_iter().find(|t| t.table == "kafka.events").and_then(|t| Some((t.suspended?, t.health.record?)))
    };
    let report = run_segment(input.path(), 0, warehouse.path(), "suspend").await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(suspended(warehouse.path()).await, None);
    let report = run_segment(input.path(), 10, warehouse.path(), "suspend").await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let (reason, record) = suspended(warehouse.path()).await.expect("suspended by the committed bad record");
    assert_eq!((record.topic.as_str(), record.partition, record.offset), ("events", 0, 8), "{reason}");
    assert_eq!(read_local(warehouse.path(), "kafka.events").offsets["0"], COMMITTED_ROWS);
    let tables: Vec<String> =
        floe_cli::local::status(warehouse.path()).await.unwrap().into_iter().map(|t| t.table).collect();
    assert_eq!(tables, ["kafka.events"], "no dead-letter table in suspend mode");
    floe_cli::local::resume(warehouse.path(), "kafka.events").await.unwrap();
    for first in [0, 10] {
        let again = run_segment(input.path(), first, warehouse.path(), "suspend").await;
        assert!(again.failed.is_empty(), "{:?}", again.failed);
    }
    assert_eq!(suspended(warehouse.path()).await, None, "a resume goes on");
    let audit = floe_cli::audit::local(warehouse.path(), "kafka.events").await.unwrap();
    assert!(audit.exactly_once, "{audit:?}");
}

/// The dead letters of a committed transaction wait in the table state while their table
/// cannot be committed (shown in status), are added after the table's next commit, and
/// once only: a swap of the dead-letter table reported failed after it was applied is
/// found applied on the retry.
#[tokio::test]
async fn a_transaction_s_dead_letters_wait_through_an_outage_and_land_once() {
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    transactions_with_bad_records(input.path());
    let w = warehouse.path().canonicalize().unwrap().display().to_string();
    let segment = |first: i64| format!("{first}/events-0/{first:020}.log");
    let open = materialize(config("dlq"), input.path(), &w, &segment(0)).await;
    let marker = materialize(config("dlq"), input.path(), &w, &segment(10)).await;
    // Swaps of the dead-letter table: the first two fail (an outage); the third is applied
    // and then reported as a conflict.
    let local = local_committer(warehouse.path());
    let swaps = Arc::new(AtomicUsize::new(0));
    let counted = swaps.clone();
    let catalog = Hooked::new(local.catalog.clone(), move |call, table, _| {
        let n = match (call, table.name.ends_with("_dlq")) {
            (CatalogCall::Swap, true) => counted.fetch_add(1, Ordering::SeqCst) + 1,
            (CatalogCall::Swapped, true) => counted.load(Ordering::SeqCst),
            _ => 0,
        };
        let failure = match (call, n) {
            (CatalogCall::Swap, 1 | 2) => {
                Some(CatalogError::Other { table: table.to_string(), detail: "outage".into(), retryable: true })
            }
            (CatalogCall::Swapped, 3) => {
                Some(CatalogError::Conflict { table: table.to_string(), detail: "lost reply".into() })
            }
            _ => None,
        };
        Box::pin(async move { failure.map_or(Ok(()), Err) })
    });
    let committer = local.with_catalog(Arc::new(catalog));
    let waiting = async || {
        let status = floe_cli::local::status(warehouse.path()).await.unwrap();
        status.into_iter().find(|t| t.table == "kafka.events").unwrap().health.dead_letters_waiting
    };
    for (task, waits) in [(&open, 0), (&marker, 1)] {
        let report = committer.commit(std::slice::from_ref(task), None).await;
        assert_eq!(report.results[0].1, TaskResult::Committed);
        assert_eq!(waiting().await, waits, "the dead letter waits while its table cannot be committed");
    }
    assert_eq!(read_local(warehouse.path(), "kafka.events").offsets["0"], COMMITTED_ROWS);
    // The marker's segment again (a redelivery): nothing new for the table, the dead
    // letter added (the second swap fails, the third is applied, its reply lost, the
    // retry finds it in).
    for _ in 0..2 {
        let report = committer.commit(std::slice::from_ref(&marker), None).await;
        assert_eq!(report.results[0].1, TaskResult::AlreadyCommitted);
    }
    assert!(swaps.load(Ordering::SeqCst) >= 3, "the dead-letter table's swaps: {swaps:?}");
    assert_eq!(waiting().await, 0);
    let dead_letters = read_local(warehouse.path(), "kafka.events_dlq");
    assert_eq!((dead_letters.offsets["0"].clone(), dead_letters.duplicates), (vec![8], 0));
    let audit = floe_cli::audit::local(warehouse.path(), "kafka.events").await.unwrap();
    assert!(audit.exactly_once, "{audit:?}");
}

/// Writes one segment of topic `events` partition 0 under `input/<first>/`: the records
/// `first..=last`, plain JSON but for those at `bad` (not JSON).
fn plain_segment(engine: &mut support::JsonLines, input: &Path, (first, last): (i64, i64), bad: &[i64]) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let record = |offset: i64| {
        let value = if bad.contains(&offset) { "{not json".to_string() } else { json!({ "id": offset }).to_string() };
        json!([now, format!("k{offset}"), value, []])
    };
    let batch = json!({"base": first, "pid": null, "epoch": null, "log_append": null,
        "records": (first..=last).map(record).collect::<Vec<_>>()});
    let path = input.join(format!("{first}/events-0/{first:020}.log"));
    engine.call(&json!({"op": "segment", "path": path, "batches": [batch]})).unwrap();
}

/// A segment committed in mode `skip` (its bad record 5 skipped), then delivered again
/// re-cut (3..=14, bad records 5 and 12) once the topic is in mode `dlq`: only 12 becomes
/// a dead letter. 5 was decided when its offset was committed; a dead letter of it now
/// would count it twice (before: both were added, and the audit found a surplus).
#[tokio::test]
async fn a_re_cut_segment_adds_dead_letters_only_for_offsets_its_table_had_not_decided() {
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let engine_dir = tempfile::tempdir().unwrap();
    let db = engine_dir.path().join("catalog.db");
    let mut engine = support::JsonLines::start("lifecycle_engine.py", &[&db, engine_dir.path()]);
    plain_segment(&mut engine, input.path(), (0, 9), &[5]);
    plain_segment(&mut engine, input.path(), (3, 14), &[5, 12]);
    let report = run_segment(input.path(), 0, warehouse.path(), "skip").await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let report = run_segment(input.path(), 3, warehouse.path(), "dlq").await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let rows: Vec<i64> = (0..=14).filter(|o| *o != 5 && *o != 12).collect();
    assert_eq!(read_local(warehouse.path(), "kafka.events").offsets["0"], rows);
    assert_eq!(read_local(warehouse.path(), "kafka.events_dlq").offsets["0"], [12]);
    let audit = floe_cli::audit::local(warehouse.path(), "kafka.events").await.unwrap();
    assert!(audit.exactly_once, "{audit:?}");
}

/// A log of topic `events` starting at 1000, as tests/py/lifecycle_engine.py writes it,
/// in two segments. `1000/`: records 1000..=1004, then producer 7's transaction
/// 1005..=1009. `1010/`: producer 8's transaction (1010, 1011) and its COMMIT (1012) at
/// minute 0; producer 7's ABORT (1050) and, after another transaction of its
/// (1060..=1069), its COMMIT (1090), both at minute 40: past the topic's 15-minute
/// `transaction_timeout`, as brokers with a longer `transaction.max.timeout.ms` write them.
/// The rest are records outside transactions.
fn markers_past_the_time_bound(input: &Path) {
    let engine_dir = tempfile::tempdir().unwrap();
    let db = engine_dir.path().join("catalog.db");
    let mut engine = support::JsonLines::start("lifecycle_engine.py", &[&db, engine_dir.path()]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let minute = |m: i64| now - 60 * 60_000 + m * 60_000;
    let batch = |(base, last): (i64, i64), pid: Option<i64>| {
        let records: Vec<Value> =
            (base..=last).map(|o| json!([minute(0), format!("k{o}"), json!({ "id": o }).to_string(), []])).collect();
        json!({"base": base, "pid": pid, "epoch": pid.map(|_| 0), "log_append": null, "records": records})
    };
    let marker = |offset: i64, pid: i64, commit: bool, at: i64| json!({"marker": offset, "pid": pid, "epoch": 0, "commit": commit, "ts": minute(at)});
    let segments = [
        (1000, vec![batch((1000, 1004), None), batch((1005, 1009), Some(7))]),
        (
            1010,
            vec![
                batch((1010, 1011), Some(8)),
                marker(1012, 8, true, 0),
                batch((1013, 1049), None),
                marker(1050, 7, false, 40),
                batch((1051, 1059), None),
                batch((1060, 1069), Some(7)),
                batch((1070, 1089), None),
                marker(1090, 7, true, 40),
                batch((1091, 1099), None),
            ],
        ),
    ];
    for (first, batches) in segments {
        let path = input.join(format!("{first}/events-0/{first:020}.log"));
        engine.call(&json!({"op": "segment", "path": path, "batches": batches})).unwrap();
    }
}

/// Issue 40: producer 7's part 1005..=1009 comes after both of its producer's later markers
/// left the table state, so which was its marker cannot be told: the table is `degraded`,
/// naming the part and the command that ends it, and the audit fails. The operator looks
/// the transaction up in Kafka and runs `floe local resolve`: aborted (as it was), its
/// records never become rows; committed, they do. Either way the table is `running`
/// again and the audit passes; a decision on a part that is not stranded is refused,
/// naming those that are.
#[tokio::test]
async fn a_stranded_transaction_part_ends_by_the_operator_s_decision() {
    let input = tempfile::tempdir().unwrap();
    markers_past_the_time_bound(input.path());
    let floe = crate::first_run::floe_binary();
    for commit in [false, true] {
        let warehouse = tempfile::tempdir().unwrap();
        for first in [1010, 1000] {
            let report = run_segment(input.path(), first, warehouse.path(), "skip").await;
            assert!(report.failed.is_empty(), "{:?}", report.failed);
        }
        let health = async || {
            let status = floe_cli::local::status(warehouse.path()).await.unwrap();
            status.into_iter().find(|t| t.table == "kafka.events").unwrap().health
        };
        let degraded = health().await;
        let reason = degraded.reason.clone().unwrap_or_default();
        assert_eq!(degraded.state, "degraded", "{degraded:?}");
        assert!(
            reason.contains("producer 7 at offsets 1005-1009 of events partition 0")
                && reason.contains("floe local resolve"),
            "{reason}"
        );
        let audit = floe_cli::audit::local(warehouse.path(), "kafka.events").await.unwrap();
        assert!(!audit.exactly_once, "the part's records are neither rows nor explained: {audit:?}");

        let resolve = |offset: i64| {
            let decision = if commit { "--commit" } else { "--abort" };
            std::process::Command::new(&floe)
                .args(["local", "resolve", "kafka.events", "--partition", "0", "--offset", &offset.to_string()])
                .arg(decision)
                .arg("--warehouse")
                .arg(warehouse.path())
                .current_dir(input.path())
                .output()
                .unwrap()
        };
        let refused = resolve(1000);
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success() && said.contains("stranded parts: partition 0 offset 1005"), "{said}");
        let done = resolve(1005);
        assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));

        let mut rows: Vec<i64> = (1000..=1099).filter(|o| ![1012, 1050, 1090].contains(o)).collect();
        if !commit {
            rows.retain(|o| !(1005..=1009).contains(o));
        }
        let read = read_local(warehouse.path(), "kafka.events");
        assert_eq!((read.offsets["0"].clone(), read.duplicates), (rows, 0), "commit: {commit}");
        let running = health().await;
        assert_eq!((running.state, running.reason.as_deref()), ("running", None), "{running:?}");
        let audit = floe_cli::audit::local(warehouse.path(), "kafka.events").await.unwrap();
        assert!(audit.exactly_once, "{audit:?}");
        // Decided: the same decision again is refused, nothing stranded there.
        let again = resolve(1005);
        let said = String::from_utf8_lossy(&again.stderr);
        assert!(!again.status.success() && said.contains("stranded parts: none"), "{said}");
    }
}

/// An upsert table's topic deleted and created again: its new offsets restart at 0 and
/// cannot be ordered against the old ones in the key index, so the table is suspended,
/// saying why, with nothing of the old rows lost and nothing of the new ones deleted.
#[tokio::test]
async fn an_upsert_table_whose_topic_is_created_again_is_suspended_not_overwritten() {
    let (topic, _, _) = payments();
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (old, new) = ("AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB");
    let config = FloeConfig::parse("[defaults]\nenabled = true\nvalue_format = \"json\"\nmode = \"upsert\"\n").unwrap();
    let run = async |input: &Path| floe_cli::local::run_local(input, warehouse.path(), config.clone()).await.unwrap();
    tiered(topic.path(), SEGMENTS[0], input.path(), old, RANGES[0]);
    let report = run(input.path()).await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let first = read_local(warehouse.path(), "kafka.payments");
    let next = tempfile::tempdir().unwrap();
    tiered(topic.path(), SEGMENTS[0], next.path(), new, RANGES[0]);
    let report = run(next.path()).await;
    assert_eq!(report.failed.len(), 1, "{:?}", report.failed);
    let status = floe_cli::local::status(warehouse.path()).await.unwrap();
    let suspended = status.iter().find(|t| t.table == "kafka.payments").and_then(|t| t.suspended.clone());
    let reason = suspended.expect("suspended");
    assert!(reason.contains("deleted and created again") && reason.contains(new), "{reason}");
    let read = read_local(warehouse.path(), "kafka.payments");
    assert_eq!((read.offsets.clone(), read.snapshots), (first.offsets, first.snapshots), "nothing committed");
}
