//! A table's health, as `floe local status` and `floe aws status` show it: one state
//! derived from what the lock store keeps (suspension, failures, the lease), what the
//! table's current snapshot says (last commit, offsets, files, bytes) and whether the
//! table reads as a commit reads it ([`Readiness`]). `running` means the next commit can
//! succeed.
//!
//! ```text
//!  suspended (a bad record, an incompatible schema)  ─▶ suspended: why, the record, the resume command
//!  failing: config (a topic clash, a bad schema ref) ─▶ config issue: the error
//!  unreadable (metadata, offsets, state file)        ─▶ degraded: what cannot be read
//!  a transaction stranded (its marker left first)    ─▶ degraded: its offsets, the setting to raise
//!  failing: commit, compaction or sweep; lease       ─▶ degraded: the latest error (retried);
//!    (tasks given back, while the lease is held)                  the lease's holder
//!  otherwise                                         ─▶ running
//! ```
//!
//! Whatever the state, warnings: the table's last commit stamped more than
//! [`CLOCK_AHEAD_WARN_MS`] ahead of this host's clock (a host whose clock was ahead
//! committed; commits go on, each stamped after the last).
//!
//! Besides the state, information that changes nothing: transactions hanging, waiting
//! for their marker longer than `transaction_timeout` ([`crate::table::state::TableState::hanging`]: read from
//! the table state by the caller, which loads it).

use std::collections::BTreeMap;

use iceberg::spec::TableMetadata;
use serde::Serialize;

use super::{Activity, Failure, MaintenanceStatus, RecordAt};
use crate::lock::Holder;
use crate::table::snapshot::latest_timestamp_ms;
use crate::table::state::HangingTransaction;
use crate::table::{MAX_TIMESTAMP_KEY, TableError, TableName, committed_offsets};

/// What a table is doing, in order of precedence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TableState {
    /// Commits wait for an operator: the table's tasks are kept in the queue.
    #[serde(rename = "suspended")]
    Suspended,
    /// Its configuration sends it what it cannot take; retrying does not help.
    #[serde(rename = "config issue")]
    ConfigIssue,
    /// Something fails and is being retried.
    #[serde(rename = "degraded")]
    Degraded,
    #[serde(rename = "running")]
    Running,
}

impl TableState {
    pub fn name(self) -> &'static str {
        match self {
            TableState::Suspended => "suspended",
            TableState::ConfigIssue => "config issue",
            TableState::Degraded => "degraded",
            TableState::Running => "running",
        }
    }
}

/// What a table's current snapshot says about it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TableFacts {
    /// When its current snapshot was committed (ms since the epoch).
    pub last_commit_ms: Option<i64>,
    /// Freshness lag (ms): when Floe's newest append in the current snapshot's ancestry
    /// was committed, less the newest timestamp of the records it committed.
    pub lag_ms: Option<i64>,
    /// Committed offset ranges per `topic-partition` (`0-99,120-200`).
    pub offsets: BTreeMap<String, String>,
    /// Data files and their bytes (the snapshot summary's `total-data-files`,
    /// `total-files-size`).
    pub files: Option<u64>,
    pub bytes: Option<u64>,
    /// How far (ms) the table's latest time (last update, snapshot and metadata logs) is
    /// ahead of this host's clock, when more than [`CLOCK_AHEAD_WARN_MS`].
    pub clock_ahead_ms: Option<i64>,
    /// Transactions waiting for their marker longer than `transaction_timeout` (filled
    /// from the table state: [`crate::table::state::TableState::hanging`]).
    pub hanging: Vec<HangingTransaction>,
    /// Dead letters of committed transactions waiting to be added to their dead-letter
    /// table (filled from the table state: [`crate::table::dead_letters`]); added after
    /// the table's next commit.
    pub dead_letters_waiting: u64,
    /// The oldest Kafka timestamp of the table's rows (ms): the lowest `_kafka.timestamp`
    /// bound of its live data files, what row retention has kept (filled by
    /// [`crate::table::retention::live_file_facts`]).
    pub oldest_row_ms: Option<i64>,
    /// Its fresh (Snappy) files, each rewritten with zstd by the first compaction past its
    /// window (filled by [`crate::table::retention::live_file_facts`]).
    pub fresh_files: u64,
    /// An upsert table's live keys (its last Floe snapshot's `floe.upsert.live-keys`).
    pub live_keys: Option<u64>,
    /// The table's formats against those its topic listed at the last commit, when they
    /// differ ([`formats_warning`]).
    pub formats_warning: Option<String>,
}

/// A table's latest time ahead of this host's clock by more than this is warned about.
pub const CLOCK_AHEAD_WARN_MS: i64 = 5 * 60 * 1000;

impl TableFacts {
    /// The facts of `metadata`'s current snapshot (none for a table without one), its
    /// times compared with `now_ms` (this host's clock).
    pub fn of(name: &TableName, metadata: &TableMetadata, now_ms: i64) -> Result<TableFacts, TableError> {
        let ahead = latest_timestamp_ms(metadata) - now_ms;
        let clock_ahead_ms = (ahead > CLOCK_AHEAD_WARN_MS).then_some(ahead);
        let Some(snapshot) = metadata.current_snapshot() else {
            return Ok(TableFacts { clock_ahead_ms, ..Default::default() });
        };
        let summary = &snapshot.summary().additional_properties;
        let count = |key: &str| summary.get(key).and_then(|v| v.parse().ok());
        let offsets = committed_offsets(name, metadata)?
            .partitions
            .iter()
            .map(|((topic, partition), ranges)| (format!("{topic}-{partition}"), ranges.encode()))
            .collect();
        Ok(TableFacts {
            last_commit_ms: Some(snapshot.timestamp_ms()),
            lag_ms: freshness_lag_ms(metadata),
            offsets,
            files: count("total-data-files"),
            bytes: count("total-files-size"),
            clock_ahead_ms,
            hanging: Vec::new(),
            dead_letters_waiting: 0,
            oldest_row_ms: None,
            fresh_files: 0,
            live_keys: crate::table::floe_summary(metadata)
                .get(crate::table::keys::LIVE_KEYS)
                .and_then(|v| v.parse().ok()),
            formats_warning: formats_warning(metadata),
        })
    }
}

/// The freshness lag of the newest snapshot in the current one's ancestry that records
/// its records' newest timestamp ([`MAX_TIMESTAMP_KEY`]; a compaction or another engine's
/// snapshot records none).
pub fn freshness_lag_ms(metadata: &TableMetadata) -> Option<i64> {
    let mut snapshot = metadata.current_snapshot();
    while let Some(s) = snapshot {
        let newest = s.summary().additional_properties.get(MAX_TIMESTAMP_KEY).and_then(|v| v.parse::<i64>().ok());
        if let Some(newest) = newest {
            return Some((s.timestamp_ms() - newest).max(0));
        }
        snapshot = s.parent_snapshot_id().and_then(|id| metadata.snapshot_by_id(id));
    }
    None
}

/// What status finds, besides the table's record, that stops its next commit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Readiness {
    /// Why the table cannot be read as a commit reads it: its current metadata file, the
    /// offsets its snapshot records, the state file the snapshot names.
    pub unreadable: Option<String>,
    /// Who holds the table's lease now (`None`: free or expired). The committer's record
    /// of the lease held elsewhere counts only while someone holds it.
    pub lease_holder: Option<Holder>,
    /// Open transactions' parts whose marker left before they came
    /// ([`crate::table::state::TableState::stranded`]): their rows wait, never guessed.
    pub stranded: Option<String>,
}

/// A table's state and why, with its facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TableHealth {
    pub state: TableState,
    /// Why the table is not running: the suspension's reason, the last error.
    pub reason: Option<String>,
    /// The bad record that suspended it, when one did.
    pub record: Option<RecordAt>,
    /// The command that resumes it, when it is suspended.
    pub resume: Option<String>,
    /// When the reason's failure happened (ms since the epoch), for a failure.
    pub since_ms: Option<i64>,
    /// When its last compaction committed.
    pub last_compaction_ms: Option<i64>,
    /// What needs a look though the table goes on (a clock ahead).
    pub warnings: Vec<String>,
    #[serde(flatten)]
    pub facts: TableFacts,
}

/// The warnings `facts` call for, whatever the table's state.
fn warnings(facts: &TableFacts) -> Vec<String> {
    let clock = facts.clock_ahead_ms.map(|ms| {
        format!(
            "clock ahead: the table's last commit is stamped {} ahead of this host's clock (a host's clock was ahead); \
             commits go on, each stamped after the last; check the clocks (NTP) of the hosts that commit",
            span(ms)
        )
    });
    clock.into_iter().chain(facts.formats_warning.clone()).collect()
}

/// A table keeps the formats it was made with ([`crate::catalog::split`]): when the topic
/// listed others at the table's last commit, what stays as it was. Ends with a commit of
/// the formats set back.
pub fn formats_warning(metadata: &TableMetadata) -> Option<String> {
    use crate::catalog::split::{TOPIC_FORMATS_KEY, is_delta_only};
    let summary = crate::table::floe_summary(metadata);
    let listed = summary.get(TOPIC_FORMATS_KEY)?;
    let lists_iceberg = listed.split(',').any(|f| f == "iceberg");
    let keep = match (is_delta_only(metadata), lists_iceberg) {
        (true, true) => "a Delta table alone (its Iceberg metadata Floe's record, in no catalog of yours)",
        (false, false) => "an Iceberg table in the catalog, with its Delta table beside it",
        _ => return None,
    };
    Some(format!(
        "formats: the topic lists [{listed}], but the formats of an existing table do not change: it stays {keep}, \
         its commits going on as before; set its formats back (docs/delta.md)"
    ))
}

/// `ms` as minutes, hours or days, whichever reads best.
fn span(ms: i64) -> String {
    const HOUR: i64 = 60 * 60 * 1000;
    match ms {
        ms if ms >= 24 * HOUR => format!("{:.1} days", ms as f64 / (24 * HOUR) as f64),
        ms if ms >= HOUR => format!("{:.1} h", ms as f64 / HOUR as f64),
        ms => format!("{} min", ms / 60_000),
    }
}

/// The table's health from its suspension (`suspended`: the reason), its maintenance
/// record, its snapshot's facts and its [`Readiness`]; `resume` is the command that
/// resumes it, shown when it is suspended. Precedence: suspended, config issue, degraded
/// (unreadable, then the latest failure), running.
pub fn health(
    suspended: Option<&str>,
    status: &MaintenanceStatus,
    facts: TableFacts,
    readiness: &Readiness,
    resume: &str,
) -> TableHealth {
    let config = status.failing.iter().find(|f| f.activity == Activity::Config);
    let lease_held = readiness.lease_holder.is_some();
    let latest = status
        .failing
        .iter()
        .filter(|f| f.activity != Activity::Config && (f.activity != Activity::Lease || lease_held))
        .max_by_key(|f| f.at_ms);
    let why = |f: &Failure| match (&readiness.lease_holder, f.activity) {
        (Some(holder), Activity::Lease) => format!("lease: held by {holder}: tasks given back"),
        _ => format!("{}: {}", f.activity.name(), f.error),
    };
    let failure = |state, f: &Failure| (state, Some(why(f)), Some(f.at_ms));
    let (state, reason, since_ms) = match (suspended, config, &readiness.unreadable, latest) {
        (Some(reason), _, _, _) => (TableState::Suspended, Some(reason.to_string()), None),
        (None, Some(f), _, _) => failure(TableState::ConfigIssue, f),
        (None, None, Some(unreadable), _) => (TableState::Degraded, Some(unreadable.clone()), None),
        (None, None, None, _) if readiness.stranded.is_some() => {
            (TableState::Degraded, readiness.stranded.clone(), None)
        }
        (None, None, None, Some(f)) => failure(TableState::Degraded, f),
        (None, None, None, None) => (TableState::Running, None, None),
    };
    let is_suspended = state == TableState::Suspended;
    TableHealth {
        state,
        reason,
        record: status.suspended_by.clone().filter(|_| is_suspended),
        resume: is_suspended.then(|| resume.to_string()),
        since_ms,
        last_compaction_ms: status.last_compaction.map(|c| c.at_ms),
        warnings: warnings(&facts),
        facts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::maintenance::CompactionRecord;

    const DAY: i64 = 24 * 60 * 60 * 1000;
    const RESUME: &str = "floe local resume kafka.orders --warehouse wh";

    fn failing(activity: Activity, at_ms: i64, error: &str) -> Failure {
        Failure { activity, at_ms, error: error.into() }
    }

    fn record() -> RecordAt {
        RecordAt { topic: "orders".into(), partition: 3, offset: 42, file: "orders-3/0.log".into() }
    }

    fn facts() -> TableFacts {
        TableFacts {
            last_commit_ms: Some(1_000),
            lag_ms: None,
            offsets: BTreeMap::from([("orders-0".into(), "0-99".into())]),
            files: Some(2),
            bytes: Some(2048),
            clock_ahead_ms: None,
            hanging: Vec::new(),
            dead_letters_waiting: 0,
            oldest_row_ms: None,
            fresh_files: 0,
            live_keys: None,
            formats_warning: None,
        }
    }

    #[test]
    fn a_table_with_nothing_failing_is_running_with_its_facts() {
        let status = MaintenanceStatus {
            last_compaction: Some(CompactionRecord { at_ms: 900, ..Default::default() }),
            ..Default::default()
        };
        let h = health(None, &status, facts(), &Readiness::default(), RESUME);
        assert_eq!(h.state, TableState::Running);
        assert_eq!((h.reason, h.record, h.resume, h.since_ms), (None, None, None, None));
        assert_eq!(h.last_compaction_ms, Some(900));
        assert_eq!(h.facts, facts());
        assert!(h.warnings.is_empty());
    }

    #[test]
    fn a_table_stamped_ahead_of_this_clock_runs_with_a_warning() {
        let schema = iceberg::spec::Schema::builder().build().unwrap();
        let spec = iceberg::spec::PartitionSpec::unpartition_spec();
        let (metadata, _) =
            crate::table::new_table_metadata("memory:///t", &schema, &spec, iceberg::spec::FormatVersion::V2).unwrap();
        let name = TableName::parse("kafka.orders").unwrap();
        let latest = metadata.last_updated_ms();
        // 4 minutes ahead: skew, nothing to say; 30 days ahead: a warning, the table running.
        let facts = TableFacts::of(&name, &metadata, latest - 4 * 60 * 1000).unwrap();
        assert_eq!(facts.clock_ahead_ms, None);
        let facts = TableFacts::of(&name, &metadata, latest - 30 * DAY).unwrap();
        assert_eq!(facts.clock_ahead_ms, Some(30 * DAY));
        let h = health(None, &MaintenanceStatus::default(), facts, &Readiness::default(), RESUME);
        assert_eq!(h.state, TableState::Running);
        assert_eq!(h.warnings.len(), 1);
        assert!(
            h.warnings[0].starts_with("clock ahead: the table's last commit is stamped 30.0 days ahead"),
            "{}",
            h.warnings[0]
        );
        assert_eq!(serde_json::to_value(&h).unwrap()["clock_ahead_ms"], 30 * DAY);
    }

    #[test]
    fn a_failing_activity_degrades_the_table_with_its_latest_error() {
        let status = MaintenanceStatus {
            failing: vec![
                failing(Activity::Commit, 5, "throttled"),
                failing(Activity::Sweep, 7, "unreadable manifest"),
            ],
            ..Default::default()
        };
        let h = health(None, &status, facts(), &Readiness::default(), RESUME);
        assert_eq!(h.state, TableState::Degraded);
        assert_eq!(h.reason.as_deref(), Some("sweep: unreadable manifest"));
        assert_eq!(h.since_ms, Some(7));
        assert_eq!(h.resume, None, "a degraded table resumes by itself");
    }

    #[test]
    fn a_table_that_cannot_be_read_as_a_commit_reads_it_is_degraded() {
        let readiness = Readiness { unreadable: Some("its state file cannot be read".into()), ..Default::default() };
        let h = health(None, &MaintenanceStatus::default(), facts(), &readiness, RESUME);
        assert_eq!((h.state, h.reason.as_deref()), (TableState::Degraded, Some("its state file cannot be read")));
        // It outranks a retried failure: it is what the next commit fails on.
        let status =
            MaintenanceStatus { failing: vec![failing(Activity::Commit, 5, "throttled")], ..Default::default() };
        let h = health(None, &status, facts(), &readiness, RESUME);
        assert_eq!(h.reason.as_deref(), Some("its state file cannot be read"));
    }

    #[test]
    fn a_stranded_transaction_degrades_the_table_naming_it() {
        let readiness = Readiness { stranded: Some("producer 7 at offsets 1005-1009".into()), ..Default::default() };
        let h = health(None, &MaintenanceStatus::default(), facts(), &readiness, RESUME);
        assert_eq!((h.state, h.reason.as_deref()), (TableState::Degraded, Some("producer 7 at offsets 1005-1009")));
    }

    #[test]
    fn a_lease_held_elsewhere_degrades_the_table_while_it_is_held() {
        let status = MaintenanceStatus {
            failing: vec![failing(Activity::Lease, 5, "held by b until 10:00:00 UTC: tasks given back")],
            ..Default::default()
        };
        let holder = Holder { owner: "committer-b".into(), expires_at_ms: 60_000 };
        let held = Readiness { lease_holder: Some(holder), ..Default::default() };
        let h = health(None, &status, facts(), &held, RESUME);
        assert_eq!(h.state, TableState::Degraded);
        assert_eq!(h.reason.as_deref(), Some("lease: held by committer-b until 00:01:00 UTC: tasks given back"));
        assert_eq!(h.since_ms, Some(5));
        // Free or expired: the next commit can take it.
        let h = health(None, &status, facts(), &Readiness::default(), RESUME);
        assert_eq!((h.state, h.reason), (TableState::Running, None));
    }

    #[test]
    fn a_config_issue_outranks_retried_failures() {
        let status = MaintenanceStatus {
            failing: vec![failing(Activity::Commit, 9, "throttled"), failing(Activity::Config, 5, "topic clash")],
            ..Default::default()
        };
        let h = health(None, &status, facts(), &Readiness::default(), RESUME);
        assert_eq!(h.state, TableState::ConfigIssue);
        assert_eq!(h.reason.as_deref(), Some("config: topic clash"));
        assert_eq!(serde_json::to_value(h.state).unwrap(), "config issue");
    }

    #[test]
    fn a_suspension_outranks_everything_and_says_how_to_resume() {
        let status = MaintenanceStatus {
            failing: vec![failing(Activity::Config, 5, "topic clash"), failing(Activity::Commit, 9, "throttled")],
            suspended_by: Some(record()),
            ..Default::default()
        };
        let h = health(
            Some("bad record: topic orders partition 3 offset 42"),
            &status,
            facts(),
            &Readiness::default(),
            RESUME,
        );
        assert_eq!(h.state, TableState::Suspended);
        assert_eq!(h.reason.as_deref(), Some("bad record: topic orders partition 3 offset 42"));
        assert_eq!(h.record, Some(record()));
        assert_eq!(h.resume.as_deref(), Some(RESUME));
        // Resumed: the record of the last suspension is not shown.
        let h = health(None, &status, facts(), &Readiness::default(), RESUME);
        assert_eq!((h.state, h.record, h.resume), (TableState::ConfigIssue, None, None));
    }
}
