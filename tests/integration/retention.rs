//! Row retention (data TTL) on a moved clock, judged by PyIceberg and `floe audit`: rows
//! whose Kafka timestamp is older than the topic's `retention` are removed by compaction,
//! rows inside it never. tests/py/make_compaction.py's records alternate between two
//! days: even offsets at T0 (+ the offset in ms), odd ones a day later.

use std::collections::BTreeMap;

use floe_core::committer::TaskResult;
use floe_core::table::audit::GapReason;

use crate::compaction::{Clicks, RECORDS, results};

/// make_segments.py's T0: the even offsets' day.
const T0: i64 = 1_764_000_000_000;
const DAY: i64 = 24 * 60 * 60 * 1000;
/// Half a day past 30 days after T0: the even offsets are past a 30-day retention, the
/// odd ones (a day later) inside it.
const EVEN_EXPIRED: i64 = T0 + 30 * DAY + DAY / 2;

fn offsets(range: std::ops::Range<i64>, keep: impl Fn(i64) -> bool) -> BTreeMap<String, Vec<i64>> {
    BTreeMap::from([("0".to_string(), range.filter(|o| keep(*o)).collect())])
}

/// A compactor run at `now_ms`, its tasks committed: the table's run.
async fn compact_at(clicks: &Clicks, now_ms: i64) -> floe_core::maintenance::compactor::TableRun {
    let (run, report) = clicks.compact(now_ms).await;
    assert!(results(&report).iter().all(|r| *r == TaskResult::Committed), "{report:?}");
    run
}

/// The oldest row `floe local status` shows.
async fn oldest_row(clicks: &Clicks) -> Option<String> {
    let status = floe_cli::local::status(clicks.warehouse.path()).await.unwrap();
    status.into_iter().find(|t| t.table == "kafka.clicks").unwrap().health.oldest_row
}

/// `floe audit`: exactly once, the even offsets of `range` its only gaps, each `expired`.
async fn assert_expired_gaps(clicks: &Clicks, range: std::ops::Range<i64>) {
    let audit = floe_cli::audit::local(clicks.warehouse.path(), "kafka.clicks").await.unwrap();
    assert!(audit.exactly_once, "{audit:?}");
    let gaps: Vec<(i64, i64, GapReason)> =
        audit.partitions[0].gaps.iter().map(|g| (g.first, g.last, g.reason)).collect();
    let even: Vec<(i64, i64, GapReason)> = range.filter(|o| o % 2 == 0).map(|o| (o, o, GapReason::Expired)).collect();
    assert_eq!(gaps, even);
}

/// Every file holds rows of both days: on the day the retention passes the even offsets,
/// one compactor run rewrites each file without them, and nothing else goes; before it,
/// nothing goes at all; a second run finds nothing to do.
#[tokio::test]
async fn rows_past_the_retention_are_compacted_out_and_none_inside_it() {
    let (clicks, before) = Clicks::committed("retention = \"30d\"\n", &[4]).await;
    let all = 0..4 * RECORDS;

    // 30 days after T0, to the millisecond before the first row's age passes it.
    let run = compact_at(&clicks, T0 + 30 * DAY).await;
    assert_eq!(run.rows_expired, 0);
    assert_eq!(clicks.read().offsets, offsets(all.clone(), |_| true), "nothing inside the retention goes");
    assert_eq!(oldest_row(&clicks).await.as_deref(), Some("2025-11-24T16:00:00.000Z"), "T0: offset 0's");

    let run = compact_at(&clicks, EVEN_EXPIRED).await;
    assert_eq!((run.compactions, run.rows_expired), (1, 2 * RECORDS as u64));
    let read = clicks.read();
    assert_eq!((read.offsets.clone(), read.duplicates), (offsets(all.clone(), |o| o % 2 == 1), 0));
    assert!(read.values.iter().all(|(k, v)| before.values[k] == *v), "values unchanged");
    assert_expired_gaps(&clicks, all.clone()).await;
    assert_eq!(oldest_row(&clicks).await.as_deref(), Some("2025-11-25T16:00:00.001Z"), "a day on: offset 1's");
    let status = floe_cli::local::status(clicks.warehouse.path()).await.unwrap();
    let last = status.into_iter().find(|t| t.table == "kafka.clicks").unwrap().maintenance.last_compaction;
    assert_eq!(last.map(|c| c.rows_expired), Some(2 * RECORDS as u64), "status: the rows the last compaction removed");

    let run = compact_at(&clicks, EVEN_EXPIRED + 15 * 60 * 1000).await;
    assert_eq!((run.compactions, run.rows_expired), (0, 0), "{run:?}");
}

/// Partitioned by day of the Kafka timestamp: the even offsets' day is a partition of
/// its own, whose files go whole, unread but for their offsets; the other day's files
/// stay as they are. `floe local compact` says how many rows went.
#[tokio::test]
async fn a_day_past_the_retention_goes_whole_and_the_others_stay() {
    let by_day = "retention = \"30d\"\npartition_by = [\"day(_kafka.timestamp)\"]\n";
    let (clicks, _) = Clicks::committed(by_day, &[2]).await;
    let all = 0..2 * RECORDS;
    let live = clicks.live().await;
    assert_eq!(live.len(), 4, "a file per day and segment");

    let run = compact_at(&clicks, EVEN_EXPIRED).await;
    assert_eq!((run.compactions, run.files_in, run.files_out, run.rows_expired), (1, 2, 0, RECORDS as u64));
    let after: Vec<String> = clicks.live().await.iter().map(|f| f.file_path().to_string()).collect();
    let kept: Vec<String> = live.iter().map(|f| f.file_path().to_string()).filter(|p| after.contains(p)).collect();
    assert_eq!((after.len(), kept.len()), (2, 2), "the later day's files untouched: {after:?}");
    assert_eq!(clicks.read().offsets, offsets(all.clone(), |o| o % 2 == 1));
    assert_expired_gaps(&clicks, all).await;
}

/// A `retention_column` that is no timestamp fails the table's compaction, naming the
/// column, and removes nothing.
#[tokio::test]
async fn a_retention_column_that_is_no_timestamp_fails_the_compaction_naming_it() {
    let (clicks, before) = Clicks::committed("retention = \"30d\"\nretention_column = \"key\"\n", &[2]).await;
    let queue = std::sync::Arc::new(floe_core::queue::InProcessQueue::default());
    let report = clicks.compactor(queue.clone()).run(EVEN_EXPIRED, None).await;
    let error = report.tables[0].error.as_ref().map(|e| e.to_string()).unwrap_or_default();
    assert!(error.contains("retention_column \"key\" is a binary, not a timestamp or a date"), "{error}");
    assert!(queue.drain().is_empty());
    assert_eq!(clicks.read().offsets, before.offsets);
}
