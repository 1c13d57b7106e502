//! Tables' health as `floe local status` and `floe aws status` show it: each table read
//! as a commit reads it ([`read_table`]: its metadata, offsets and state file, and who
//! holds its lease), one [`TableStatus`] per table for both commands, the state
//! ([`floe_core::maintenance::health`]) with times in RFC 3339, as JSON fields or as a
//! readable table with a line of detail under each table that is not running, and one
//! under any table for each warning (a clock ahead), each transaction hanging and dead
//! letters waiting for their table (information: the table still runs).

use floe_core::lock::{LockError, TableLocks};
use floe_core::maintenance::health::{Readiness, TableFacts, TableHealth, health};
use floe_core::maintenance::{MaintenanceStatus, RecordAt};
use floe_core::table::dead_letters::published_by;
use floe_core::table::retention::live_file_facts;
use floe_core::table::state::{HangingTransaction, STATE_KEY, TableState};
use floe_core::table::{CatalogTables, TableError, TableName, committed_offsets, floe_summary};

use crate::compact::{MaintenanceView, time};

/// A table as status reads it.
#[derive(Debug, Clone, Default)]
pub struct TableRead {
    /// Whether the catalog has it.
    pub found: bool,
    pub snapshots: usize,
    pub facts: TableFacts,
    /// What stops its next commit: what cannot be read, who holds its lease.
    pub readiness: Readiness,
    /// Its Delta mirror, when it has one (or why its log cannot be read).
    pub delta: Option<String>,
}

/// Reads `name` as a commit reads it — its current metadata, the offsets its snapshot
/// records, the state file the snapshot names — and who holds its lease. What cannot be
/// read is the table's own `unreadable`, not an error; the lock store's errors are.
pub async fn read_table(
    tables: &CatalogTables,
    locks: &dyn TableLocks,
    name: &TableName,
    now_ms: i64,
) -> Result<TableRead, LockError> {
    let mut read = TableRead::default();
    read.readiness.lease_holder = locks.peek(&name.to_string(), "").await?;
    let loaded = match tables.load(name).await {
        Ok(Some(loaded)) => loaded,
        Ok(None) => return Ok(read),
        Err(e) => {
            read.readiness.unreadable = Some(format!("its metadata cannot be read, so it cannot commit: {e}"));
            return Ok(read);
        }
    };
    read.found = true;
    read.snapshots = loaded.metadata.snapshots().count();
    read.delta = match floe_core::delta::status(tables.delta_log.as_ref(), &loaded).await {
        Ok(delta) => delta.map(|d| d.describe()),
        Err(e) => Some(format!("its log cannot be read: {e}")),
    };
    match TableFacts::of(name, &loaded.metadata, now_ms) {
        Ok(facts) => read.facts = facts,
        // The table is named by status's line already.
        Err(TableError::Summary { detail, .. }) => read.readiness.unreadable = Some(detail),
        Err(e) => read.readiness.unreadable = Some(e.to_string()),
    }
    if read.readiness.unreadable.is_none() {
        // Best effort: a manifest that cannot be read leaves it unknown.
        if let Ok((oldest, fresh)) = live_file_facts(&tables.file_io, &loaded.metadata).await {
            (read.facts.oldest_row_ms, read.facts.fresh_files) = (oldest, fresh);
        }
        let location = floe_summary(&loaded.metadata).get(STATE_KEY).cloned();
        match TableState::load(&tables.file_io, location.as_ref()).await {
            Ok(state) => {
                let committed = committed_offsets(name, &loaded.metadata).unwrap_or_default();
                read.readiness.stranded = state.stranded_reason(&committed);
                read.facts.hanging = state.hanging(now_ms);
                read.facts.dead_letters_waiting =
                    match published_by(tables.catalog.as_ref(), &tables.file_io, &loaded, &state).await {
                        Ok(published) => state.dead_letters_waiting(&published),
                        // Their tables unreadable: none known to be added.
                        Err(_) => state.dead_letters_waiting(&Default::default()),
                    };
            }
            Err(e) => {
                let location = location.unwrap_or_default();
                read.readiness.unreadable =
                    Some(format!("its table state {location} cannot be read, so it cannot commit: {e}"));
            }
        }
    }
    Ok(read)
}

/// One table as `floe local status` and `floe aws status` show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableStatus {
    pub table: String,
    pub snapshots: usize,
    /// Committed offset ranges per `topic-partition` (`0-99,120-200`).
    pub offsets: std::collections::BTreeMap<String, String>,
    /// Why the table is suspended, when it is.
    pub suspended: Option<String>,
    /// Why the table cannot be read as a commit reads it (metadata, offsets, state file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// Its state (running, degraded, suspended, config issue) and why, last commit, files
    /// and bytes.
    #[serde(flatten)]
    pub health: HealthView,
    /// Its last compaction (time, files and bytes in and out), snapshots expired, orphans
    /// removed, last sweep.
    #[serde(flatten)]
    pub maintenance: MaintenanceView,
}

impl TableStatus {
    /// The table's status from its suspension, maintenance record, what [`read_table`]
    /// read, and the command that resumes it (`resume`, shown when it is suspended).
    pub fn new(
        table: String,
        suspended: Option<String>,
        maintenance: MaintenanceStatus,
        read: TableRead,
        resume: &str,
    ) -> Self {
        let health = health(suspended.as_deref(), &maintenance, read.facts, &read.readiness, resume);
        TableStatus {
            table,
            snapshots: read.snapshots,
            offsets: health.facts.offsets.clone(),
            suspended,
            problem: read.readiness.unreadable,
            health: HealthView { delta: read.delta, ..HealthView::from(&health) },
            maintenance: maintenance.into(),
        }
    }
}

/// A table's state and facts, as status shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct HealthView {
    /// `running`, `degraded`, `suspended` or `config issue`.
    pub state: &'static str,
    /// Why it is not running: the suspension's reason, the last error.
    pub reason: Option<String>,
    /// The bad record that suspended it.
    pub record: Option<RecordAt>,
    /// The command that resumes it, when it is suspended.
    pub resume: Option<String>,
    /// When its current snapshot was committed.
    pub last_commit: Option<String>,
    /// Freshness lag: the last commit less its newest record's timestamp (`12.5s`).
    pub lag: Option<String>,
    pub files: Option<u64>,
    pub bytes: Option<u64>,
    /// How far (ms) the table's last commit is stamped ahead of this host's clock, when
    /// more than 5 minutes (a warning: commits go on).
    pub clock_ahead_ms: Option<i64>,
    /// What needs a look though the table goes on.
    pub warnings: Vec<String>,
    /// Transactions waiting for their marker longer than their `transaction_timeout`.
    pub hanging_transactions: Vec<HangingView>,
    /// Dead letters of committed transactions not yet in the dead-letter table (added
    /// after the table's next commit).
    pub dead_letters_waiting: u64,
    /// The oldest Kafka timestamp of its rows (by its files' bounds): what row retention
    /// has kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_row: Option<String>,
    /// Fresh (Snappy) files waiting for compaction to rewrite them with zstd.
    #[serde(skip_serializing_if = "is_zero")]
    pub fresh_files: u64,
    /// An upsert table's live keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_keys: Option<u64>,
    /// Its Delta mirror: version, files, whether it is in step with the Iceberg table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A transaction hanging, as status shows it: its fields, and since when in RFC 3339.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HangingView {
    #[serde(flatten)]
    pub transaction: HangingTransaction,
    /// When its first part was committed pending.
    pub pending_since: String,
}

impl From<&HangingTransaction> for HangingView {
    fn from(h: &HangingTransaction) -> Self {
        HangingView { transaction: h.clone(), pending_since: time(h.pending_since_ms) }
    }
}

impl From<&TableHealth> for HealthView {
    fn from(h: &TableHealth) -> Self {
        HealthView {
            state: h.state.name(),
            reason: h.reason.clone(),
            record: h.record.clone(),
            resume: h.resume.clone(),
            last_commit: h.facts.last_commit_ms.map(time),
            lag: h.facts.lag_ms.map(|ms| format!("{:.1}s", ms as f64 / 1000.0)),
            files: h.facts.files,
            bytes: h.facts.bytes,
            clock_ahead_ms: h.facts.clock_ahead_ms,
            warnings: h.warnings.clone(),
            hanging_transactions: h.facts.hanging.iter().map(HangingView::from).collect(),
            dead_letters_waiting: h.facts.dead_letters_waiting,
            oldest_row: h.facts.oldest_row_ms.map(time),
            fresh_files: h.facts.fresh_files,
            live_keys: h.facts.live_keys,
            delta: None,
        }
    }
}

/// The readable table: a row per table (table, state, last commit, lag, files, bytes)
/// and, under a table not running, its reason, the record that suspended it and the
/// command that resumes it; under any table, its warnings and hanging transactions.
pub fn render(rows: &[(&str, &HealthView)]) -> String {
    let header = ["TABLE", "STATE", "LAST COMMIT", "LAG", "FILES", "BYTES"];
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|(table, h)| {
            [
                table.to_string(),
                h.state.to_string(),
                opt(h.last_commit.clone()),
                opt(h.lag.clone()),
                opt(h.files.map(|f| f.to_string())),
                opt(h.bytes.map(|b| b.to_string())),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| cells.iter().map(|c| c[i].chars().count()).chain([header[i].len()]).max().unwrap_or(0))
        .collect();
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(&header.map(String::from));
    for ((_, h), row) in rows.iter().zip(&cells) {
        out += &line(row);
        if let Some(reason) = &h.reason {
            out += &format!("  {}: {reason}\n", h.state);
        }
        if let Some(r) = &h.record {
            out +=
                &format!("  record: topic {} partition {} offset {} in {}\n", r.topic, r.partition, r.offset, r.file);
        }
        if let Some(resume) = &h.resume {
            out += &format!("  resume: {resume}\n");
        }
        for warning in &h.warnings {
            out += &format!("  warning: {warning}\n");
        }
        if let Some(delta) = &h.delta {
            out += &format!("  delta: {delta}\n");
        }
        if let Some(keys) = h.live_keys {
            out += &format!("  upsert: {keys} live key(s), one row each\n");
        }
        if h.dead_letters_waiting > 0 {
            out += &format!(
                "  dead letters waiting: {} of committed transactions, added to the dead-letter table after the \
                 table's next commit\n",
                h.dead_letters_waiting
            );
        }
        for view in &h.hanging_transactions {
            let t = &view.transaction;
            out += &format!(
                "  hanging transaction: topic {} partition {} producer {} (epoch {}) offsets {}-{}, pending since {}, \
                 longer than its transaction_timeout ({}s): its marker has not come (its segment may not be rolled yet)\n",
                t.topic,
                t.partition,
                t.producer_id,
                t.producer_epoch,
                t.first_offset,
                t.last_offset,
                view.pending_since,
                t.transaction_timeout_ms / 1000
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lines_up_and_says_why_and_how_to_resume() {
        let running = HealthView {
            state: "running",
            files: Some(3),
            bytes: Some(12345),
            warnings: vec!["clock ahead: …".into()],
            ..Default::default()
        };
        let suspended = HealthView {
            state: "suspended",
            reason: Some("bad record".into()),
            record: Some(RecordAt { topic: "t".into(), partition: 1, offset: 7, file: "f".into() }),
            resume: Some("floe local resume kafka.t --warehouse wh".into()),
            ..Default::default()
        };
        let out = render(&[("kafka.orders", &running), ("kafka.t", &suspended)]);
        assert_eq!(
            out,
            "TABLE         STATE      LAST COMMIT  LAG  FILES  BYTES\n\
             kafka.orders  running    -            -    3      12345\n  \
             warning: clock ahead: …\n\
             kafka.t       suspended  -            -    -      -\n  \
             suspended: bad record\n  \
             record: topic t partition 1 offset 7 in f\n  \
             resume: floe local resume kafka.t --warehouse wh\n"
        );
    }

    /// `floe local status` and `floe aws status` print one kind of line: the same fields,
    /// the resume command each gives, snapshots and offsets from what was read.
    #[test]
    fn a_status_line_carries_the_read_the_suspension_and_the_resume_command() {
        let facts = TableFacts {
            offsets: [("orders-0".to_string(), "0-99".to_string())].into(),
            files: Some(2),
            ..Default::default()
        };
        let delta = Some("version 2, 3 files, in step with the Iceberg table".to_string());
        let read = TableRead { found: true, snapshots: 3, facts, readiness: Readiness::default(), delta };
        let resume = "floe aws resume kafka.orders --lock-table locks";
        let status =
            TableStatus::new("kafka.orders".into(), Some("bad record".into()), Default::default(), read, resume);
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["table"], "kafka.orders");
        assert_eq!(json["snapshots"], 3);
        assert_eq!(json["offsets"], serde_json::json!({"orders-0": "0-99"}));
        assert_eq!((&json["state"], &json["reason"]), (&"suspended".into(), &"bad record".into()));
        assert_eq!((&json["suspended"], &json["resume"]), (&"bad record".into(), &resume.into()));
        assert_eq!(json["delta"], "version 2, 3 files, in step with the Iceberg table");
        assert_eq!(json["files"], 2);
        assert!(json.get("problem").is_none(), "a readable table has no problem field: {json}");
        assert_eq!(json["failing"], serde_json::json!([]), "the maintenance fields, flattened: {json}");
    }

    #[test]
    fn a_hanging_transaction_is_shown_under_a_running_table() {
        let hanging = HangingTransaction {
            topic: "payments".into(),
            partition: 0,
            producer_id: 7,
            producer_epoch: 1,
            first_offset: 3,
            last_offset: 5,
            pending_since_ms: 1_764_000_000_000,
            transaction_timeout_ms: 900_000,
        };
        let facts = floe_core::maintenance::health::TableFacts { hanging: vec![hanging], ..Default::default() };
        let health = floe_core::maintenance::health::health(None, &Default::default(), facts, &Default::default(), "");
        let view = HealthView::from(&health);
        assert_eq!(view.state, "running", "information, not a failure");
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["hanging_transactions"][0]["producer_id"], 7);
        assert_eq!(json["hanging_transactions"][0]["pending_since"], "2025-11-24T16:00:00.000Z");
        assert_eq!(
            render(&[("kafka.payments", &view)]),
            "TABLE           STATE    LAST COMMIT  LAG  FILES  BYTES\n\
             kafka.payments  running  -            -    -      -\n  \
             hanging transaction: topic payments partition 0 producer 7 (epoch 1) offsets 3-5, pending since \
             2025-11-24T16:00:00.000Z, longer than its transaction_timeout (900s): its marker has not come (its \
             segment may not be rolled yet)\n"
        );
    }
}
