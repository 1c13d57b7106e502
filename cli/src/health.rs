//! Tables' health as `floe local status` and `floe aws status` show it: the state
//! ([`floe_core::maintenance::health`]) with times in RFC 3339, as JSON fields or as a
//! readable table with a line of detail under each table that is not running, and one
//! under any table for each warning (a clock ahead).

use floe_core::maintenance::RecordAt;
use floe_core::maintenance::health::TableHealth;

use crate::compact::time;

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
        }
    }
}

/// The readable table: a row per table (table, state, last commit, lag, files, bytes)
/// and, under a table not running, its reason, the record that suspended it and the
/// command that resumes it; under any table, its warnings.
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
}
