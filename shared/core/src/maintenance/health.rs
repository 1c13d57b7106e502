//! A table's health, as `floe local status` and `floe aws status` show it: one state
//! derived from what the lock store keeps (suspension, failures) and what the table's
//! current snapshot says (last commit, offsets, files, bytes).
//!
//! ```text
//!  suspended (a bad record, an incompatible schema)  ─▶ suspended: why, the record, the resume command
//!  failing: config (a topic clash, a bad schema ref) ─▶ config issue: the error
//!  failing: commit, compaction or sweep              ─▶ degraded: the latest error (retried)
//!  otherwise                                         ─▶ running
//! ```
//!
//! Besides the state, information that changes nothing: transactions hanging, waiting
//! for their marker longer than `transaction_timeout` ([`crate::table::state::TableState::hanging`]: read from
//! the table state by the caller, which loads it).

use std::collections::BTreeMap;

use iceberg::spec::TableMetadata;
use serde::Serialize;

use super::{Activity, Failure, MaintenanceStatus, RecordAt};
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
    /// Transactions waiting for their marker longer than `transaction_timeout` (filled
    /// from the table state: [`crate::table::state::TableState::hanging`]).
    pub hanging: Vec<HangingTransaction>,
}

impl TableFacts {
    /// The facts of `metadata`'s current snapshot (none for a table without one).
    pub fn of(name: &TableName, metadata: &TableMetadata) -> Result<TableFacts, TableError> {
        let Some(snapshot) = metadata.current_snapshot() else { return Ok(TableFacts::default()) };
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
            hanging: Vec::new(),
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
    #[serde(flatten)]
    pub facts: TableFacts,
}

/// The table's health from its suspension (`suspended`: the reason), its maintenance
/// record and its snapshot's facts; `resume` is the command that resumes it, shown when
/// it is suspended. Precedence: suspended, config issue, degraded, running.
pub fn health(suspended: Option<&str>, status: &MaintenanceStatus, facts: TableFacts, resume: &str) -> TableHealth {
    let config = status.failing.iter().find(|f| f.activity == Activity::Config);
    let latest = status.failing.iter().filter(|f| f.activity != Activity::Config).max_by_key(|f| f.at_ms);
    let failure = |state, f: &Failure| (state, Some(format!("{}: {}", f.activity.name(), f.error)), Some(f.at_ms));
    let (state, reason, since_ms) = match (suspended, config, latest) {
        (Some(reason), _, _) => (TableState::Suspended, Some(reason.to_string()), None),
        (None, Some(f), _) => failure(TableState::ConfigIssue, f),
        (None, None, Some(f)) => failure(TableState::Degraded, f),
        (None, None, None) => (TableState::Running, None, None),
    };
    let is_suspended = state == TableState::Suspended;
    TableHealth {
        state,
        reason,
        record: status.suspended_by.clone().filter(|_| is_suspended),
        resume: is_suspended.then(|| resume.to_string()),
        since_ms,
        last_compaction_ms: status.last_compaction.map(|c| c.at_ms),
        facts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::maintenance::CompactionRecord;

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
            hanging: Vec::new(),
        }
    }

    #[test]
    fn a_table_with_nothing_failing_is_running_with_its_facts() {
        let status = MaintenanceStatus {
            last_compaction: Some(CompactionRecord { at_ms: 900, ..Default::default() }),
            ..Default::default()
        };
        let h = health(None, &status, facts(), RESUME);
        assert_eq!(h.state, TableState::Running);
        assert_eq!((h.reason, h.record, h.resume, h.since_ms), (None, None, None, None));
        assert_eq!(h.last_compaction_ms, Some(900));
        assert_eq!(h.facts, facts());
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
        let h = health(None, &status, facts(), RESUME);
        assert_eq!(h.state, TableState::Degraded);
        assert_eq!(h.reason.as_deref(), Some("sweep: unreadable manifest"));
        assert_eq!(h.since_ms, Some(7));
        assert_eq!(h.resume, None, "a degraded table resumes by itself");
    }

    #[test]
    fn a_config_issue_outranks_retried_failures() {
        let status = MaintenanceStatus {
            failing: vec![failing(Activity::Commit, 9, "throttled"), failing(Activity::Config, 5, "topic clash")],
            ..Default::default()
        };
        let h = health(None, &status, facts(), RESUME);
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
        let h = health(Some("bad record: topic orders partition 3 offset 42"), &status, facts(), RESUME);
        assert_eq!(h.state, TableState::Suspended);
        assert_eq!(h.reason.as_deref(), Some("bad record: topic orders partition 3 offset 42"));
        assert_eq!(h.record, Some(record()));
        assert_eq!(h.resume.as_deref(), Some(RESUME));
        // Resumed: the record of the last suspension is not shown.
        let h = health(None, &status, facts(), RESUME);
        assert_eq!((h.state, h.record, h.resume), (TableState::ConfigIssue, None, None));
    }
}
