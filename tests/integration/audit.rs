//! `floe audit` (`floe_cli::audit`, as `main` runs it: the report, then the verdict and
//! its exit code) on tables `floe local run` and the committer Lambda wrote: exactly once
//! where it holds, with every gap labelled; exit 1 naming the partition and offset of a
//! duplicate row another engine appended, or the offsets a rewrite lost. PyIceberg
//! judges the same tables.

use std::path::Path;

use floe_core::table::audit::{AuditReport, GapReason, PartitionAudit};

use crate::committer::{copy, local_run, payments, read_local};
use crate::support;

/// The audit of `table`, its verdict's exit code (0 exactly once) and message.
pub(crate) async fn audit(warehouse: &Path, table: &str) -> (AuditReport, u8, String) {
    let report = floe_cli::audit::local(warehouse, table).await.unwrap();
    let mut readable = Vec::new();
    let verdict = floe_cli::audit::verdict(Ok(report.clone()), false, &mut readable);
    let text = String::from_utf8(readable).unwrap();
    match verdict {
        Ok(()) => (report, 0, text),
        Err(e) => (report, floe_cli::audit::exit_code(&e).expect("an audit's exit code"), e.to_string()),
    }
}

fn partition(report: &AuditReport, partition: i32) -> &PartitionAudit {
    report.partitions.iter().find(|p| p.partition == partition).expect("the partition audited")
}

/// The gaps of a partition as (first, last, reason).
fn gaps(p: &PartitionAudit) -> Vec<(i64, i64, GapReason)> {
    p.gaps.iter().map(|g| (g.first, g.last, g.reason)).collect()
}

/// Runs `script` (tests/py) on `table` of the warehouse with `args`; its output.
pub(crate) fn on_table(warehouse: &Path, table: &str, script: &str, args: &[&str]) -> String {
    let w = warehouse.canonicalize().unwrap().display().to_string();
    let out = std::process::Command::new(support::python())
        .arg(support::root().join("tests/py").join(script))
        .args([format!("{w}/catalog.db"), w, table.to_string()])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{script} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn the_example_segments_are_exactly_once_until_a_duplicate_row_is_appended() {
    let warehouse = tempfile::tempdir().unwrap();
    local_run(&support::root().join("examples/segments"), warehouse.path()).await;
    for table in ["kafka.orders", "kafka.page_views"] {
        let (report, code, text) = audit(warehouse.path(), table).await;
        assert_eq!(code, 0, "{text}");
        assert!(report.partitions.iter().all(|p| p.gaps.is_empty() && p.duplicates.is_empty()), "{report:?}");
        assert!(text.ends_with("exactly once: every committed record is in the table once\n"), "{text}");
    }
    let (before, _, _) = audit(warehouse.path(), "kafka.orders").await;
    assert_eq!(before.partitions.iter().map(|p| p.rows).sum::<u64>(), 240);

    // Another engine appends one row again (PyIceberg): one duplicate, named.
    on_table(warehouse.path(), "kafka.orders", "foreign_write.py", &["append", "1"]);
    let judged = read_local(warehouse.path(), "kafka.orders");
    assert_eq!(judged.duplicates, 1, "PyIceberg reads one duplicate");
    let (report, code, message) = audit(warehouse.path(), "kafka.orders").await;
    assert_eq!(code, 1, "{message}");
    let doubled: Vec<&PartitionAudit> = report.partitions.iter().filter(|p| !p.duplicates.is_empty()).collect();
    assert_eq!(doubled.len(), 1, "{report:?}");
    let [(offset, last)] = doubled[0].duplicates[..] else { panic!("one duplicate: {:?}", doubled[0]) };
    assert_eq!(offset, last);
    // The row PyIceberg sees twice is the one named.
    let seen = &judged.offsets[&doubled[0].partition.to_string()];
    assert_eq!(seen.iter().filter(|o| **o == offset).count(), 2);
    let named = format!("topic orders partition {}: duplicate offset(s) {offset}", doubled[0].partition);
    assert!(message.contains(&named), "{message}");
}

#[tokio::test]
async fn transactions_aborted_and_markers_are_explained_gaps() {
    let (topic, offsets, _) = payments();
    let warehouse = tempfile::tempdir().unwrap();
    let input = tempfile::tempdir().unwrap();
    for rel in crate::committer::SEGMENTS {
        copy(topic.path(), input.path(), rel);
    }
    copy(topic.path(), input.path(), "ledger-0/00000000000000000000.log");
    for base in ["00000000000000000020", "00000000000000000040", "00000000000000000060"] {
        copy(topic.path(), input.path(), &format!("ledger-0/{base}.log"));
    }
    local_run(input.path(), warehouse.path()).await;
    let (report, code, text) = audit(warehouse.path(), "kafka.payments").await;
    assert_eq!(code, 0, "{text}");
    // payments: COMMIT at 58, producer 8's 59..61 and its ABORT at 62, producer 9's
    // 63..65 and its ABORT at 66: no rows, all counted.
    let p = partition(&report, 0);
    assert_eq!(gaps(p), [(58, 66, GapReason::WithoutRows)], "{text}");
    assert_eq!(p.counted_without_rows, 9);
    assert_eq!(p.rows as usize, offsets.len(), "the rows a read_committed consumer sees");
    assert!(text.contains("gaps, no row on purpose"), "{text}");
    // ledger: producer 8's 15..19 and 30..34 aborted at 45, producer 7's COMMIT at 65.
    let (report, code, text) = audit(warehouse.path(), "kafka.ledger").await;
    assert_eq!(code, 0, "{text}");
    let reasons = gaps(partition(&report, 0));
    assert_eq!(
        reasons,
        [
            (15, 19, GapReason::WithoutRows),
            (30, 34, GapReason::WithoutRows),
            (45, 45, GapReason::WithoutRows),
            (65, 65, GapReason::WithoutRows),
        ]
    );

    // A broker's segment with codecs, a committed and an aborted transaction.
    let warehouse = tempfile::tempdir().unwrap();
    let input = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(input.path().join("txns-0")).unwrap();
    std::fs::copy(
        support::data("kafka/kafka-python-3.0.12__all-codecs-txn-abort-commit__00000000000000000000.log"),
        input.path().join("txns-0/00000000000000000000.log"),
    )
    .unwrap();
    local_run(input.path(), warehouse.path()).await;
    let (report, code, text) = audit(warehouse.path(), "kafka.txns").await;
    assert_eq!(code, 0, "{text}");
    let p = partition(&report, 0);
    assert_eq!((p.committed.as_str(), p.rows), ("0-61", 55));
    assert_eq!(gaps(p).iter().map(|g| g.1 - g.0 + 1).sum::<i64>(), 62 - 55);
    assert!(gaps(p).iter().all(|g| g.2 == GapReason::WithoutRows), "{text}");
}

#[tokio::test]
async fn dead_letters_and_skipped_bad_records_are_explained_gaps() {
    for (mode, reason) in [("dlq", GapReason::DeadLetter), ("skip", GapReason::WithoutRows)] {
        let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        // Ten records of clicks-0, offset 4 not JSON.
        crate::committer::clicks_with_a_bad_record(input.path());
        let config = floe_core::config::FloeConfig::parse(&format!(
            "[defaults]\nenabled = true\nvalue_format = \"json\"\nbad_records = \"{mode}\"\n"
        ))
        .unwrap();
        floe_cli::local::run(input.path(), warehouse.path(), config, Vec::new()).await.unwrap();
        let (report, code, text) = audit(warehouse.path(), "kafka.clicks").await;
        assert_eq!(code, 0, "{mode}: {text}");
        assert_eq!(gaps(partition(&report, 0)), [(4, 4, reason)], "{mode}: {text}");
    }
    // The dead-letter table itself: its one row, the segment's other offsets counted.
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = crate::committer::clicks_with_a_bad_record(input.path());
    floe_cli::local::run(input.path(), warehouse.path(), config, Vec::new()).await.unwrap();
    let (report, code, text) = audit(warehouse.path(), "kafka.clicks_dlq").await;
    assert_eq!(code, 0, "{text}");
    let p = partition(&report, 0);
    assert_eq!((p.rows, p.counted_without_rows), (1, 9));
    assert_eq!(gaps(p), [(0, 3, GapReason::WithoutRows), (5, 9, GapReason::WithoutRows)]);
}

#[tokio::test]
async fn a_segment_re_cut_by_another_broker_is_uncounted_not_failed() {
    let (topic, _, _) = payments();
    let warehouse = tempfile::tempdir().unwrap();
    // A (0..54), then the replica's 25..65 (its new part 55..65 is not counted: its count
    // is of the whole segment), then C (66..99).
    let rels =
        [crate::committer::SEGMENTS[0], "replica/payments-0/00000000000000000025.log", crate::committer::SEGMENTS[2]];
    for rel in rels {
        let input = tempfile::tempdir().unwrap();
        copy(topic.path(), input.path(), rel);
        local_run(input.path(), warehouse.path()).await;
    }
    let (report, code, text) = audit(warehouse.path(), "kafka.payments").await;
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        gaps(partition(&report, 0)),
        [(58, 65, GapReason::Uncounted), (66, 66, GapReason::WithoutRows)],
        "{text}"
    );
    assert!(text.contains("not verifiable"), "{text}");
}

#[tokio::test]
async fn another_engine_s_deletes_are_labelled_and_a_rewrite_that_lost_rows_fails() {
    let warehouse = tempfile::tempdir().unwrap();
    local_run(&support::root().join("examples/segments"), warehouse.path()).await;
    // Merge-on-read: position delete files name the rows.
    on_table(warehouse.path(), "kafka.orders", "foreign_delete.py", &["position", "0/5", "1/70"]);
    let (report, code, text) = audit(warehouse.path(), "kafka.orders").await;
    assert_eq!(code, 0, "a delete is the other engine's, not a loss: {text}");
    assert_eq!(gaps(partition(&report, 0)), [(5, 5, GapReason::Deleted)]);
    assert_eq!(gaps(partition(&report, 1)), [(70, 70, GapReason::Deleted)]);
    assert_eq!(partition(&report, 0).rows, 159, "the deleted row is not read");
    assert!(text.contains("deleted by a delete file (another engine's"), "{text}");
    // An equality delete (on `key`, a column the audit does not read itself): applied too.
    on_table(warehouse.path(), "kafka.orders", "foreign_delete.py", &["equality", "key", "order-7"]);
    let (report, code, text) = audit(warehouse.path(), "kafka.orders").await;
    assert_eq!(code, 0, "{text}");
    let deleted: Vec<(i32, i64, i64)> =
        report.partitions.iter().flat_map(|p| p.gaps.iter().map(move |g| (p.partition, g.first, g.last))).collect();
    assert_eq!(deleted.len(), 3, "{text}");
    assert!(report.partitions.iter().all(|p| p.gaps.iter().all(|g| g.reason == GapReason::Deleted)), "{text}");
    assert_eq!(report.partitions.iter().map(|p| p.rows).sum::<u64>(), 237);

    // Copy-on-write: PyIceberg's delete rewrites the files without the rows, leaving no
    // delete file: nothing tells that from a loss.
    on_table(warehouse.path(), "kafka.page_views", "foreign_write.py", &["delete"]);
    let (report, code, message) = audit(warehouse.path(), "kafka.page_views").await;
    assert_eq!(code, 1, "{message}");
    assert_eq!(gaps(partition(&report, 0)), [(0, 199, GapReason::Unexplained)]);
    assert_eq!(partition(&report, 0).unexplained, 200);
    assert!(message.contains("topic page.views partition 0: unexplained gap(s) at offset(s) 0-199"), "{message}");
}

#[tokio::test]
async fn a_table_that_cannot_be_audited_is_exit_code_2() {
    let warehouse = tempfile::tempdir().unwrap();
    local_run(&support::root().join("examples/segments"), warehouse.path()).await;
    let missing = floe_cli::audit::local(warehouse.path(), "kafka.nothing").await;
    let e = floe_cli::audit::verdict(missing, false, Vec::new()).unwrap_err();
    assert_eq!(floe_cli::audit::exit_code(&e), Some(2));
    assert_eq!(e.to_string(), "could not audit: no table kafka.nothing");
}

#[tokio::test]
async fn floe_aws_audit_reads_a_committed_table_through_glue_and_s3() {
    use floe_aws::lambda::handle_committer_event;
    let aws = crate::committer::setup_with("audit", "").await;
    let (topic, offsets, _) = payments();
    let m = aws.materializer().await;
    for key in crate::committer::SEGMENTS {
        aws.materialize(&m, topic.path(), key).await;
    }
    let (event, receipts) = aws.receive().await;
    let response = handle_committer_event(&aws.committer(), event, None).await;
    assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);
    aws.delete(&receipts).await;
    let table = aws.table().to_string();
    let report = floe_cli::audit::aws(&aws.config, &table, true).await.unwrap();
    let mut readable = Vec::new();
    floe_cli::audit::verdict(Ok(report.clone()), false, &mut readable).unwrap();
    let p = partition(&report, 0);
    assert_eq!((p.committed.as_str(), p.rows as usize), ("0-99", offsets.len()));
    assert_eq!(gaps(p), [(58, 66, GapReason::WithoutRows)], "{}", String::from_utf8_lossy(&readable));
    let missing = floe_cli::audit::aws(&aws.config, &format!("{}.nothing", aws.namespace), true).await;
    assert!(missing.unwrap_err().to_string().contains("no table"));
}
