//! Targeted scenarios in the lifecycle framework: logs and steps written by hand, for
//! cases random sequences reach too seldom, judged by the same oracle after every step
//! and, at the end, by what the table state may still hold (table/state.rs's module docs:
//! "what stays when every segment is in").

use serde_json::{Value, json};

use super::model::{BadRecords, Log};
use super::ops::Step;
use super::{MINUTE_MS, Sequence, TABLE, on_own_thread};

fn floe(partition: i32, segment: (i64, i64)) -> Step {
    floe_in(partition, segment, BadRecords::Skip)
}

fn floe_in(partition: i32, segment: (i64, i64), mode: BadRecords) -> Step {
    let segments = vec![((0, partition), segment)];
    Step::Floe { segments, mode, kill_after_ms: None, evolves: false, ahead_days: 0 }
}

/// Runs `scenario` (it writes the logs and returns the steps) as a sequence, then checks
/// that the table state holds no pending part and, of Kafka partition `partition`, the
/// markers at `markers_left` alone (when given).
fn run_scenario(
    name: &str,
    scenario: fn(&mut [Log]) -> Vec<Step>,
    partition: i32,
    markers_left: Option<&'static [i64]>,
) {
    let thread_name = format!("lifecycle-{name}");
    let result = on_own_thread(thread_name, move || {
        Box::pin(async move {
            let mut sequence = Sequence::new(0);
            let steps = scenario(&mut sequence.logs);
            let played = sequence.play(steps).await;
            played.and_then(|()| state_holds(&mut sequence, partition, markers_left))
        })
    });
    if let Err(e) = result {
        panic!("lifecycle scenario {name}: {e}");
    }
}

fn state_holds(sequence: &mut Sequence, partition: i32, markers_left: Option<&[i64]>) -> Result<(), String> {
    let state = sequence.call("state", json!({"table": TABLE}))?;
    let list = |key: &str| state.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
    if !list("pending").is_empty() {
        return Err(format!("the table state still holds pending parts: {state:#}"));
    }
    let Some(markers_left) = markers_left else { return Ok(()) };
    let mut markers: Vec<i64> = list("markers")
        .iter()
        .filter(|m| m["partition"].as_i64() == Some(partition as i64))
        .filter_map(|m| m["marker"]["offset"].as_i64())
        .collect();
    markers.sort_unstable();
    if markers != markers_left {
        return Err(format!(
            "every segment is in: the table state should hold partition {partition}'s markers at {markers_left:?}, \
             it holds {markers:?}: {state:#}"
        ));
    }
    Ok(())
}

/// A log starting at 5000 (partition 1), `CreateTime`, the default 15-minute transaction
/// timeout:
///
/// ```text
///  segment A  5000-5002 plain · 5003-5005 P's transaction (minute 0)
///  segment B  5006 Q's transaction, 5007 its COMMIT (minute 2: an anchor)
///             5008 P's COMMIT M1 (minute 10, within the timeout) · 5009-5010 P's next
///             transaction · 5011 its COMMIT M2 (minute 11)
///             5012-5013 R's first transaction (minute 71) · 5014 its COMMIT (minute 73)
///             5015-5016 plain
/// ```
///
/// B is committed first, then A. M1 must wait for A: the anchor, 8 minutes older than M1,
/// is within the timeout of M1 (P's records may lie below it, and do). Once A is in, P's
/// records are rows; R's marker, written over τ + 5 min after the anchor, has left the
/// state; Q's (the run's lowest anchor) and M1 (P's first marker, within τ + 5 min of it)
/// stay.
fn late_marker(logs: &mut [Log]) -> Vec<Step> {
    let log = &mut logs[1];
    log.log_append = false;
    log.timeout_ms = 15 * MINUTE_MS;
    let (p, q, r) = (log.new_pid(), log.new_pid(), log.new_pid());
    log.records(3, None, false, None);
    log.records(3, Some(p), false, None);
    log.cut();
    log.advance(2 * MINUTE_MS);
    log.records(1, Some(q), false, None);
    log.end(q, true);
    log.advance(8 * MINUTE_MS);
    log.end(p, true);
    log.records(2, Some(p), false, None);
    log.advance(MINUTE_MS);
    log.end(p, true);
    log.advance(60 * MINUTE_MS);
    log.records(2, Some(r), false, None);
    log.advance(2 * MINUTE_MS);
    log.end(r, true);
    log.records(2, None, false, None);
    log.cut();
    assert_eq!(log.segments, vec![(5000, 5005), (5006, 5016)]);
    vec![floe(1, (5006, 5016)), floe(1, (5000, 5005))]
}

#[test]
fn a_marker_within_the_timeout_waits_for_its_records_and_one_past_it_leaves() {
    run_scenario("late marker", late_marker, 1, Some(&[5007, 5008]));
}

/// Partition 0 from 0, three segments, each run in its own mode:
///
/// ```text
///  segment A  0 plain · 1-3 P's transaction, 2 bad            (mode suspend)
///  segment B  4-5 Q's transaction, 4 bad                      (mode dlq)
///  segment C  6 P's COMMIT · 7 Q's ABORT · 8-9 plain          (mode skip)
/// ```
///
/// Neither A nor B suspends the table or writes a dead letter: their bad records wait
/// with their transactions. C's commit resolves both: P's committed, so the table is
/// suspended once the commit is in (the record written nowhere); Q's aborted, so its
/// dead letter never is. Resumed, the table goes on; the state keeps no pending part.
fn suspend_on_commit(logs: &mut [Log]) -> Vec<Step> {
    let log = &mut logs[0];
    let (p, q) = (log.new_pid(), log.new_pid());
    log.records(1, None, false, None);
    log.records(3, Some(p), false, Some(1));
    log.cut();
    log.records(2, Some(q), false, Some(0));
    log.cut();
    log.advance(MINUTE_MS);
    log.end(p, true);
    log.end(q, false);
    log.records(2, None, false, None);
    log.cut();
    assert_eq!(log.segments, vec![(0, 3), (4, 5), (6, 9)]);
    vec![
        floe_in(0, (0, 3), BadRecords::Suspend),
        floe_in(0, (4, 5), BadRecords::Dlq),
        floe_in(0, (6, 9), BadRecords::Skip),
    ]
}

#[test]
fn a_committed_transaction_s_bad_record_suspends_after_the_commit_an_aborted_one_s_is_no_dead_letter() {
    run_scenario("suspend on commit", suspend_on_commit, 0, None);
}
