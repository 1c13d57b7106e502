//! Exactly once at the edges: a topic deleted and created again under its name.

use std::path::Path;

use serde_json::Value;

use crate::committer::{SEGMENTS, local_run, payments, read_local};
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
