//! Other engines' changes to a Floe table, then compaction and new segments, judged by
//! PyIceberg: merge-on-read deletes (position and equality delete files, written by
//! tests/py/foreign_delete.py) stay deleted; columns another engine moved, renamed, added
//! or dropped (tests/py/foreign_schema.py) keep every value in its column; and a table
//! whose JSON topic gained a column still compacts.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use floe_core::committer::TaskResult;
use floe_core::table::audit::GapReason;
use serde_json::Value;

use crate::compaction::{Clicks, MINUTE, RECORDS, TARGET, assert_same_rows, results};
use crate::support;

/// Runs `script` (tests/py) on the table `kafka.clicks` of `clicks` with `args`; its output.
fn on_table(clicks: &Clicks, script: &str, args: &[&str]) -> String {
    let w = clicks.warehouse.path().canonicalize().unwrap().display().to_string();
    let out = std::process::Command::new(support::python())
        .arg(support::root().join("tests/py").join(script))
        .args([format!("{w}/catalog.db"), w, "kafka.clicks".into()])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{script} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// What foreign_delete.py's reader (deletes applied by the spec's rules) reads.
#[derive(serde::Deserialize, Debug)]
struct Judged {
    rows: usize,
    offsets: BTreeMap<String, Vec<i64>>,
    duplicates: usize,
    values: HashMap<String, Option<String>>,
    data_files: Vec<String>,
    delete_files: usize,
    /// The live delete files' paths (a Puffin file once per vector).
    delete_paths: Vec<String>,
}

fn judge(clicks: &Clicks) -> Judged {
    serde_json::from_str(&on_table(clicks, "foreign_delete.py", &["read"])).unwrap()
}

/// Deletes rows the merge-on-read way; the data files position deletes name.
fn delete(clicks: &Clicks, args: &[&str]) -> Vec<String> {
    let out: Value = serde_json::from_str(&on_table(clicks, "foreign_delete.py", args)).unwrap();
    assert_eq!(out["operation"], "delete");
    out["data_files"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_string()).collect()
}

/// The offsets of partition 0 in `range`, less `deleted`.
fn offsets(range: std::ops::Range<i64>, deleted: &[i64]) -> BTreeMap<String, Vec<i64>> {
    BTreeMap::from([("0".to_string(), range.filter(|o| !deleted.contains(o)).collect())])
}

/// A compaction past the window of the last commit, its tasks all committed: the
/// table's run.
async fn compact_past_the_window(clicks: &Clicks) -> floe_core::maintenance::compactor::TableRun {
    let (run, report) = clicks.compact(clicks.committed_at().await + 16 * MINUTE).await;
    assert!(results(&report).iter().all(|r| *r == TaskResult::Committed), "{report:?}");
    run
}

/// `floe local compact` on the table's warehouse 16 minutes from now (past the window
/// of what was just committed): its output.
async fn compact_command(clicks: &Clicks) -> String {
    let mut out = Vec::new();
    let clock = floe_core::lock::Clock::Shifted { by_ms: 16 * MINUTE };
    floe_cli::compact::compact(clicks.warehouse.path(), clicks.config.clone(), clock, &mut out).await.unwrap();
    String::from_utf8(out).unwrap()
}

async fn live_paths(clicks: &Clicks) -> Vec<String> {
    clicks.live().await.iter().map(|f| f.file_path().to_string()).collect()
}

/// Asserts that every live file is a compaction's output (how many depends on the rows'
/// size against the target).
fn assert_compacted(live: &[String]) {
    assert!(!live.is_empty() && live.iter().all(|f| f.contains("-compaction-")), "{live:?}");
}

/// `floe audit` of the table: exactly once, its gaps those `deleted` (as ranges) and
/// labelled as rows another engine deleted.
async fn assert_audit_explains(clicks: &Clicks, deleted: &[(i64, i64)]) {
    let audit = floe_cli::audit::local(clicks.warehouse.path(), "kafka.clicks").await.unwrap();
    assert!(audit.exactly_once, "{audit:?}");
    let gaps: Vec<(i64, i64)> = audit.partitions[0].gaps.iter().map(|g| (g.first, g.last)).collect();
    assert_eq!(gaps, deleted, "{audit:?}");
    assert!(audit.partitions[0].gaps.iter().all(|g| g.reason == GapReason::Deleted), "{audit:?}");
}

/// Athena, Trino, Spark or Flink delete rows with delete files, not by rewriting data
/// files. Compaction applies them, as Iceberg's `rewrite_data_files` does: its outputs
/// hold the live rows only, and a delete file goes once every data file it applies to
/// is rewritten. PyIceberg reads the position deletes; the equality delete (which
/// PyIceberg 0.12 cannot read) is judged by foreign_delete.py's reader; `floe audit`
/// explains the deleted offsets once the delete files are gone.
#[tokio::test]
async fn compaction_applies_other_engines_deletes_and_drops_the_delete_files() {
    let (clicks, before) = Clicks::committed("", &[6]).await;
    let named = delete(&clicks, &["position", "0/5", "0/300", "0/301"]);
    assert_eq!(named.len(), 2, "one position delete file for each of two data files");
    let read = clicks.read();
    assert_eq!(read.offsets, offsets(0..6 * RECORDS, &[5, 300, 301]), "PyIceberg applies the position deletes");
    assert!(delete(&clicks, &["equality", "key", "k400", "k1000"]).is_empty());
    let mut deleted = vec![5, 300, 301, 400, 1000];

    // Past the window: the six files are compacted, the five rows left out, and the
    // three delete files dropped (each applied to every file it applies to).
    let out = compact_command(&clicks).await;
    let applied = "3 delete file(s) applied (5 row(s) left out), 3 dropped";
    assert!(out.contains("6 file(s) of") && out.contains(applied), "{out}");
    assert_compacted(&live_paths(&clicks).await);
    let judged = judge(&clicks);
    assert_eq!(judged.delete_files, 0);
    assert_eq!((judged.offsets, judged.duplicates), (offsets(0..6 * RECORDS, &deleted), 0));
    let after = clicks.read();
    assert_eq!((after.offsets.clone(), after.duplicates), (offsets(0..6 * RECORDS, &deleted), 0));
    assert!(after.values.iter().all(|(k, v)| before.values[k] == *v), "values unchanged");
    let gaps = [(5, 5), (300, 301), (400, 400), (1000, 1000)];
    assert_audit_explains(&clicks, &gaps).await;

    // Another equality delete, on rows of the outputs, and a position delete of a row of
    // the output of the target size; then Floe appends four segments, newer than the
    // deletes. The next compaction rewrites the new files (and the outputs' small tail,
    // if any) but not the outputs of the target size, which the deletes apply to: they
    // stay, and keep their rows deleted.
    assert!(delete(&clicks, &["equality", "key", "k20", "k21"]).is_empty());
    let large: Vec<String> = clicks
        .live()
        .await
        .iter()
        .filter(|f| f.file_size_in_bytes() >= TARGET / 4 * 3)
        .map(|f| f.file_path().to_string())
        .collect();
    assert!(!large.is_empty());
    let before_position = judge(&clicks).delete_paths;
    assert_eq!(delete(&clicks, &["position", "0/100"]), large[..1], "offset 100 is in the first output");
    let position: Vec<String> =
        judge(&clicks).delete_paths.into_iter().filter(|p| !before_position.contains(p)).collect();
    deleted.extend([20, 21, 100]);
    let more = clicks.segments(0, 4, 6);
    clicks.commit(&more).await;
    // The position delete is not read: it names a file left as it is (moved away while
    // the compactor plans and rewrites, a compaction reading it would fail).
    let position = std::path::PathBuf::from(position[0].trim_start_matches("file://"));
    let away = position.with_extension("away");
    std::fs::rename(&position, &away).unwrap();
    let run = compact_past_the_window(&clicks).await;
    std::fs::rename(&away, &position).unwrap();
    assert_eq!(run.compactions, 1);
    let judged = judge(&clicks);
    assert_eq!((judged.offsets.clone(), judged.duplicates), (offsets(0..10 * RECORDS, &deleted), 0));
    assert_eq!(judged.rows, 10 * RECORDS as usize - deleted.len());
    assert_eq!(judged.delete_files, 2, "they apply to the outputs left as they are");
    let live = live_paths(&clicks).await;
    assert!(large.iter().all(|f| live.contains(f)), "{live:?}");
    assert_eq!(judged.data_files, live, "sorted both");
    assert!(judged.values.iter().filter(|(k, _)| before.values.contains_key(*k)).all(|(k, v)| before.values[k] == *v));
    let gaps = [(5, 5), (20, 21), (100, 100), (300, 301), (400, 400), (1000, 1000)];
    assert_audit_explains(&clicks, &gaps).await;
}

/// What DuckDB reads from the table's folder (its version hint rewritten first: another
/// engine's commit does not write it).
async fn duckdb(clicks: &Clicks) -> crate::querying::Rows {
    let access = floe_cli::table::access(clicks.warehouse.path(), "kafka.clicks").await.unwrap();
    crate::querying::read("duckdb-scan", &access.location).unwrap()
}

/// Spark, Trino and Snowflake delete rows of a format v3 table with deletion vectors
/// (tests/py/foreign_vector.py writes them as Spark does). Compaction applies them as it
/// applies position deletes, and drops each once its data file is rewritten; the table
/// stays v3 with its row lineage. PyIceberg, DuckDB and foreign_delete.py's reader agree
/// at each step, and `floe audit` explains the deleted offsets.
#[tokio::test]
async fn compaction_applies_deletion_vectors_of_a_v3_table_and_drops_them() {
    let (clicks, before) = Clicks::committed("format_version = 3", &[6]).await;
    assert_eq!(clicks.metadata().await.format_version(), iceberg::spec::FormatVersion::V3);
    let out: Value =
        serde_json::from_str(&on_table(&clicks, "foreign_vector.py", &["delete", "0/5", "0/300", "0/301"])).unwrap();
    assert_eq!((&out["operation"], out["data_files"].as_array().unwrap().len()), (&"delete".into(), 2));
    let deleted = [5, 300, 301];
    let expected = offsets(0..6 * RECORDS, &deleted);
    assert_eq!(clicks.read().offsets, expected, "PyIceberg applies the deletion vectors");
    assert_eq!(duckdb(&clicks).await.offsets, expected, "DuckDB applies them");
    assert_eq!((judge(&clicks).offsets, judge(&clicks).delete_files), (expected.clone(), 2));
    // Another row of a file that has a vector: one vector of both replaces it in the same
    // snapshot, as Spark writes it (a data file has one vector at most).
    on_table(&clicks, "foreign_vector.py", &["delete", "0/6"]);
    let metadata = clicks.metadata().await;
    let summary = &metadata.current_snapshot().unwrap().summary().additional_properties;
    assert_eq!(summary.get("removed-dvs").map(String::as_str), Some("1"), "{summary:?}");
    let deleted = [5, 6, 300, 301];
    let expected = offsets(0..6 * RECORDS, &deleted);
    assert_eq!(clicks.read().offsets, expected, "PyIceberg applies the merged vector");
    assert_eq!(duckdb(&clicks).await.offsets, expected, "DuckDB applies it");
    assert_eq!((judge(&clicks).offsets, judge(&clicks).delete_files), (expected.clone(), 2));

    let out = compact_command(&clicks).await;
    assert!(
        out.contains("6 file(s) of") && out.contains("2 delete file(s) applied (4 row(s) left out), 2 dropped"),
        "{out}"
    );
    assert_compacted(&live_paths(&clicks).await);
    let judged = judge(&clicks);
    assert_eq!((judged.offsets, judged.duplicates, judged.delete_files), (expected.clone(), 0, 0));
    let after = clicks.read();
    assert_eq!((after.offsets.clone(), after.duplicates), (expected.clone(), 0));
    assert!(after.values.iter().all(|(k, v)| before.values[k] == *v), "values unchanged");
    let read = duckdb(&clicks).await;
    assert_eq!((read.offsets, read.duplicates), (expected, 0));
    let metadata = clicks.metadata().await;
    assert_eq!(metadata.format_version(), iceberg::spec::FormatVersion::V3);
    let (first, added) = metadata.current_snapshot().unwrap().row_range().unwrap();
    assert_eq!(first + added, metadata.next_row_id());
    assert_audit_explains(&clicks, &[(5, 6), (300, 301)]).await;

    // Two vectors in one Puffin file again: one on the output of the target size, one on
    // the small tail. Four new segments, then compaction: the tail is rewritten with them,
    // its vector applied and dropped; the other vector, on the file left as it is, stays.
    let live = clicks.live().await;
    let large: Vec<&str> =
        live.iter().filter(|f| f.file_size_in_bytes() >= TARGET / 4 * 3).map(|f| f.file_path()).collect();
    assert_eq!((live.len(), large.len()), (2, 1), "an output of the target size and a tail");
    let last = 6 * RECORDS - 1;
    let out: Value =
        serde_json::from_str(&on_table(&clicks, "foreign_vector.py", &["delete", "0/20", &format!("0/{last}")]))
            .unwrap();
    assert_eq!(out["data_files"].as_array().unwrap().len(), 2);
    clicks.commit(&clicks.segments(0, 4, 6)).await;
    let run = compact_past_the_window(&clicks).await;
    assert_eq!((run.compactions, run.delete_files.len(), run.rows_deleted), (1, 1, 1), "{run:?}");
    let deleted = [5, 6, 20, 300, 301, last];
    let judged = judge(&clicks);
    assert_eq!((judged.offsets.clone(), judged.duplicates), (offsets(0..10 * RECORDS, &deleted), 0));
    assert_eq!(judged.delete_files, 1, "the vector of the file left as it is stays");
    assert!(live_paths(&clicks).await.iter().any(|p| p == large[0]));
    assert_eq!(clicks.read().offsets, judged.offsets, "PyIceberg agrees");
    assert_eq!(duckdb(&clicks).await.offsets, judged.offsets, "DuckDB agrees");
}

/// Every row's top-level columns but `_kafka`, as PyIceberg reads them (by field id).
fn rows(clicks: &Clicks) -> HashMap<String, HashMap<String, Option<String>>> {
    serde_json::from_str(&on_table(clicks, "foreign_schema.py", &["rows"])).unwrap()
}

fn schema_change(clicks: &Clicks, changes: &[&str]) {
    on_table(clicks, "foreign_schema.py", changes);
}

/// Checks that rows `range` hold their key in `key_column` (the other key column null),
/// their value, and no note.
fn assert_keys_in(
    rows: &HashMap<String, HashMap<String, Option<String>>>,
    range: std::ops::Range<i64>,
    key_column: &str,
    values: &HashMap<String, Option<String>>,
) {
    for o in range {
        let row = &rows[&format!("0/{o}")];
        for (column, want) in [("key", None), ("kafka_key", None), ("note", None)] {
            let want = if column == key_column { Some(format!("k{o}")) } else { want };
            assert_eq!(row.get(column).cloned().flatten(), want, "offset {o}, column {column}: {row:?}");
        }
        if let Some(value) = values.get(&format!("0/{o}")) {
            assert_eq!(&row["value"], value, "offset {o}");
        }
    }
}

/// Another engine moves `value` before `key`; Floe's next segment lands in the columns
/// of their names (before the fix: a panic, `key` taken to be the second column). Then
/// it renames `key` and adds a column of its own first: Floe's next segment gets `key`
/// back as a new column. Then the renamed key is dropped, and compaction rewrites old and
/// new files into the current schema by field id: every value stays in its column, the
/// dropped column's bytes nowhere. Floe then keeps committing.
#[tokio::test]
async fn columns_other_engines_move_rename_and_drop_keep_their_values_through_compaction() {
    let (clicks, before) = Clicks::committed("", &[2]).await;
    schema_change(&clicks, &["move_before:value:key"]);
    clicks.commit(&clicks.segments(0, 1, 2)).await;
    schema_change(&clicks, &["rename:key:kafka_key", "add:note"]);
    schema_change(&clicks, &["move_first:note"]);
    clicks.commit(&clicks.segments(0, 1, 3)).await;
    let values = clicks.read().values;
    assert_eq!(values.len(), 4 * RECORDS as usize);
    let (old, added) = (0..3 * RECORDS, 3 * RECORDS..4 * RECORDS);
    let read = rows(&clicks);
    assert_keys_in(&read, old.clone(), "kafka_key", &values);
    assert_keys_in(&read, 0..2 * RECORDS, "kafka_key", &before.values);
    assert_keys_in(&read, added.clone(), "key", &values);

    schema_change(&clicks, &["drop:kafka_key"]);
    let dropped = rows(&clicks);
    assert_keys_in(&dropped, old.clone(), "", &before.values);
    assert_eq!(compact_past_the_window(&clicks).await.compactions, 1);
    assert_compacted(&live_paths(&clicks).await);
    assert_eq!(rows(&clicks), dropped, "every value in its column after the compaction");

    clicks.commit(&clicks.segments(0, 1, 4)).await;
    let read = rows(&clicks);
    assert_eq!(read.len(), 5 * RECORDS as usize);
    assert_keys_in(&read, 4 * RECORDS..5 * RECORDS, "key", &HashMap::new());
}

/// Another engine drops `value`, the column of the table's highest field id; Floe's next
/// segment brings it back as a new column, of a fresh id above the table's
/// last-column-id: the older rows' values stay dropped (before the fix the dropped id was
/// given again, and every older row read its value again), the new rows have theirs.
#[tokio::test]
async fn a_column_another_engine_dropped_comes_back_new_without_the_older_values() {
    let (clicks, _) = Clicks::committed("", &[2]).await;
    schema_change(&clicks, &["drop:value"]);
    clicks.commit(&clicks.segments(0, 1, 2)).await;
    let read = rows(&clicks);
    assert_eq!(read.len(), 3 * RECORDS as usize);
    for o in 0..2 * RECORDS {
        assert_eq!(read[&format!("0/{o}")]["value"], None, "offset {o}: its value was dropped");
    }
    for o in 2 * RECORDS..3 * RECORDS {
        assert!(read[&format!("0/{o}")]["value"].is_some(), "offset {o}: a new row keeps its value");
    }
}

/// Commits the two segments (offsets 0–9, then 10–19) a generator wrote for topic
/// `clicks` of plain JSON, the second with fields the first lacks; compacts them past the
/// window into one file of the evolved schema, the rows unchanged; the rows at offsets
/// 5 and 15.
async fn compacted_after_evolution(write: impl FnOnce(&Path)) -> [Value; 2] {
    let clicks = Clicks::new("value_format = \"json\"");
    write(clicks.input.path());
    for segment in ["clicks-0/00000000000000000000.log", "clicks-0/00000000000000000010.log"] {
        clicks.commit(&[segment.to_string()]).await;
    }
    let before = clicks.read();
    assert_eq!((before.rows, clicks.live().await.len()), (20, 2));
    assert_eq!(compact_past_the_window(&clicks).await.compactions, 1);
    assert_eq!(clicks.live().await.len(), 1);
    let after = clicks.read();
    assert_same_rows(&before, &after);
    ["0/5", "0/15"].map(|at| serde_json::from_str(after.values[at].as_deref().unwrap()).unwrap())
}

/// A JSON topic gains a column (a nested struct, `meta`, before `name`): the table
/// evolves, and its files of either schema compact into one of the new schema.
#[tokio::test]
async fn a_table_whose_topic_gained_a_column_compacts() {
    let [old, new] = compacted_after_evolution(|input| {
        support::run_python("make_nested_evolution.py", &[Path::new("json"), input]);
        std::fs::rename(input.join("shop-0"), input.join("clicks-0")).unwrap();
    })
    .await;
    assert_eq!(old, serde_json::json!({"id": 5, "items": [5, 6], "meta": null, "name": "a5"}));
    assert_eq!(new, serde_json::json!({"id": 15, "items": [5], "meta": {"tag": "t5"}, "name": "b5"}));
}

/// A JSON topic gains fields inside a record and inside a list's records: the older
/// file, without them, compacts with the new schema (the fields null in its rows).
#[tokio::test]
async fn a_table_whose_topic_gained_nested_fields_compacts() {
    let [old, new] =
        compacted_after_evolution(|input| support::run_python("make_nested_fields.py", &[input, Path::new("clicks")]))
            .await;
    assert_eq!(old, serde_json::json!({"id": 5, "info": {"a": "a5", "n": null}, "items": [{"x": 5, "y": null}]}));
    assert_eq!(new, serde_json::json!({"id": 15, "info": {"a": "b5", "n": 5}, "items": [{"x": 5, "y": "y5"}]}));
}

/// One table that cannot be compacted (a data file damaged on disk) fails on its own
/// line of the run; the next table is compacted all the same.
#[tokio::test]
async fn a_table_that_fails_to_compact_does_not_stop_the_others() {
    let (clicks, _) = Clicks::committed("", &[2]).await;
    let views = clicks.segments_of("views", "random", 0, 2, 0);
    clicks.commit(&views).await;
    let damaged = clicks.live().await[0].file_path().to_string();
    let size = std::fs::metadata(&damaged).unwrap().len() as usize;
    std::fs::write(&damaged, vec![b'x'; size]).unwrap();

    let queue = std::sync::Arc::new(floe_core::queue::InProcessQueue::default());
    let report = clicks.compactor(queue.clone()).run(clicks.committed_at().await + 16 * MINUTE, None).await;
    let lines: Vec<(String, usize, bool)> = report
        .tables
        .iter()
        .map(|t| (t.table.as_ref().unwrap().to_string(), t.compactions, t.error.is_some()))
        .collect();
    assert_eq!(lines, [("kafka.clicks".into(), 0, true), ("kafka.views".into(), 1, false)], "{report:?}");
    assert!(report.tables[0].error.as_ref().unwrap().to_string().contains(&damaged));
    assert_eq!(queue.drain().len(), 1);
}

/// A compaction planned before another engine deleted rows of one of its inputs by
/// position is committed with the delete carried onto its outputs: committed as it was,
/// it would remove the file the position deletes name, and the rows would come back. The
/// delete file named only inputs: it goes, and a new one on the outputs comes.
#[tokio::test]
async fn a_compaction_planned_before_another_engine_deleted_rows_of_its_inputs_carries_the_delete() {
    let (clicks, _) = Clicks::committed("", &[4]).await;
    let queue = std::sync::Arc::new(floe_core::queue::InProcessQueue::default());
    let report = clicks.compactor(queue.clone()).run(clicks.committed_at().await + 16 * MINUTE, None).await;
    assert_eq!(report.tables[0].compactions, 1, "{report:?}");
    delete(&clicks, &["position", "0/5"]);
    let want = offsets(0..4 * RECORDS, &[5]);
    assert_eq!(clicks.read().offsets, want);
    let foreign = judge(&clicks).delete_paths;

    let report = clicks.committer.commit_all(&queue.drain(), None).await;
    assert_eq!(results(&report), [TaskResult::Committed], "{report:?}");
    assert_compacted(&live_paths(&clicks).await);
    assert_eq!(clicks.read().offsets, want, "the deleted row stays deleted");
    let judged = judge(&clicks);
    assert_eq!((judged.offsets, judged.delete_files), (want.clone(), 1), "the delete, carried onto the outputs");
    assert!(judged.delete_paths.iter().all(|p| !foreign.contains(p)), "the other engine's delete file went");
    assert_audit_explains(&clicks, &[(5, 5)]).await;
}

/// A compaction planned before another engine's equality delete is taken: its outputs
/// keep the sequence number of the snapshot it was planned from, under which the delete,
/// newer, still applies to them (Iceberg's `use-starting-sequence-number`). The delete
/// file stays: it applies to the outputs.
#[tokio::test]
async fn an_equality_delete_committed_after_the_plan_still_applies_to_the_compaction_s_outputs() {
    let (clicks, _) = Clicks::committed("", &[4]).await;
    let queue = std::sync::Arc::new(floe_core::queue::InProcessQueue::default());
    let report = clicks.compactor(queue.clone()).run(clicks.committed_at().await + 16 * MINUTE, None).await;
    assert_eq!(report.tables[0].compactions, 1, "{report:?}");
    assert!(delete(&clicks, &["equality", "key", "k7", "k600"]).is_empty());
    let want = offsets(0..4 * RECORDS, &[7, 600]);
    assert_eq!(judge(&clicks).offsets, want);

    let report = clicks.committer.commit_all(&queue.drain(), None).await;
    assert_eq!(results(&report), [TaskResult::Committed], "{report:?}");
    assert_compacted(&live_paths(&clicks).await);
    let judged = judge(&clicks);
    assert_eq!((judged.offsets, judged.delete_files), (want, 1), "the delete applies to the outputs");
    assert_audit_explains(&clicks, &[(7, 7), (600, 600)]).await;
}
