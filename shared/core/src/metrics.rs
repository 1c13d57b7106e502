//! Metrics: what a function counted during one invocation, rendered as CloudWatch
//! Embedded Metric Format (EMF) lines — no API call, CloudWatch Logs extracts them.
//!
//! ```text
//!  metrics::scope(recorder, work) ── inside, anywhere (handlers, committer, materializer):
//!     metrics::record(&METRIC, &[("Table", "kafka.orders")], value)
//!        ─▶ summed (counts, bytes, latency) or kept at its maximum (lags, ages), per
//!           dimension set; a value with a `Table` is also kept without it (over tables)
//!  recorder.emf_lines(function, now) ─▶ one JSON object per dimension set, `Function` added
//! ```
//!
//! [`ALL`] lists every metric Floe emits (name, unit, meaning); the template's alarms and
//! docs/operating.md name only these. Outside a [`scope`], [`record`] does nothing (the
//! local CLI records nothing unless it opens one).
//!
//! Each line is one JSON object: `_aws.Timestamp` (ms), `_aws.CloudWatchMetrics` with
//! namespace [`NAMESPACE`], one dimension set and at most [`MAX_METRICS_PER_LINE`]
//! metrics, and the dimension values (strings) and metric values (numbers) as top-level
//! members.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

/// The CloudWatch namespace of every metric.
pub const NAMESPACE: &str = "Floe";
/// EMF allows at most 100 metrics in a directive.
pub const MAX_METRICS_PER_LINE: usize = 100;
/// The dimension naming the function (`materializer`, `committer`, `compactor`).
pub const FUNCTION: &str = "Function";
/// The dimension naming the table (`namespace.name`).
pub const TABLE: &str = "Table";
/// The dimension naming a bad-record mode (`skip`, `dlq`, `suspend`).
pub const MODE: &str = "Mode";

/// CloudWatch units Floe uses (a subset of CloudWatch's list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Bytes,
    Milliseconds,
    Seconds,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Bytes => "Bytes",
            Unit::Milliseconds => "Milliseconds",
            Unit::Seconds => "Seconds",
        }
    }
}

/// How values recorded in one invocation combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    Sum,
    Max,
}

/// One metric: its CloudWatch name and unit, who emits it, and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    pub name: &'static str,
    pub unit: Unit,
    pub aggregate: Aggregate,
    /// The function emitting it.
    pub function: &'static str,
    /// Its dimensions besides `Function` (a `Table` one is also emitted without it).
    pub dimensions: &'static [&'static str],
    pub meaning: &'static str,
}

const fn metric(
    name: &'static str,
    unit: Unit,
    aggregate: Aggregate,
    function: &'static str,
    dimensions: &'static [&'static str],
    meaning: &'static str,
) -> Metric {
    Metric { name, unit, aggregate, function, dimensions, meaning }
}

use Aggregate::{Max, Sum};

pub const SEGMENTS: Metric =
    metric("Segments", Unit::Count, Sum, "materializer", &[TABLE], "segments materialized and queued as tasks");
pub const RECORDS: Metric = metric(
    "Records",
    Unit::Count,
    Sum,
    "materializer",
    &[TABLE],
    "records written to data files, those of transactions still open at the segment's end included (bad ones not)",
);
pub const BYTES: Metric = metric("Bytes", Unit::Bytes, Sum, "materializer", &[TABLE], "segment bytes read");
pub const FILES_WRITTEN: Metric = metric(
    "FilesWritten",
    Unit::Count,
    Sum,
    "materializer",
    &[TABLE],
    "data and dead-letter files written (open transactions' included)",
);
pub const BAD_RECORDS: Metric = metric(
    "BadRecords",
    Unit::Count,
    Sum,
    "materializer",
    &[TABLE, MODE],
    "records that could not be decoded, by bad-record mode: skip (left out), dlq (dead-letter table), suspend (table suspended)",
);
pub const RECORDS_COMMITTED: Metric =
    metric("RecordsCommitted", Unit::Count, Sum, "committer", &[TABLE], "rows added to tables by append snapshots");
pub const FILES_COMMITTED: Metric = metric(
    "FilesCommitted",
    Unit::Count,
    Sum,
    "committer",
    &[TABLE],
    "data files added by snapshots (compactions' too)",
);
pub const COMMIT_LATENCY: Metric = metric(
    "CommitLatency",
    Unit::Milliseconds,
    Sum,
    "committer",
    &[TABLE],
    "time to commit a table's tasks of one batch (lease to release, retries included)",
);
pub const COMMIT_RETRIES: Metric =
    metric("CommitRetries", Unit::Count, Sum, "committer", &[TABLE], "commit attempts made again after a conflict");
pub const COMMIT_CONFLICTS: Metric = metric(
    "CommitConflicts",
    Unit::Count,
    Sum,
    "committer",
    &[TABLE],
    "catalog compare-and-swap conflicts (another writer moved the table)",
);
pub const COMMIT_FAILURES: Metric =
    metric("CommitFailures", Unit::Count, Sum, "committer", &[TABLE], "tasks not committed, left in the queue");
pub const FRESHNESS_LAG: Metric = metric(
    "FreshnessLag",
    Unit::Seconds,
    Max,
    "committer",
    &[TABLE],
    "commit time minus the newest committed record's timestamp",
);
pub const PROCESSING_DELAY: Metric = metric(
    "ProcessingDelay",
    Unit::Seconds,
    Max,
    "committer",
    &[TABLE],
    "commit time minus when the materializer made the committed segment's task: Floe's own delay, whatever the records' age (a backfill of history included)",
);
pub const OLDEST_TASK_AGE: Metric = metric(
    "OldestTaskAge",
    Unit::Seconds,
    Max,
    "committer",
    &[],
    "age of the oldest task of the batch when the committer got it (since it was sent)",
);
pub const SNAPSHOTS_EXPIRED: Metric =
    metric("SnapshotsExpired", Unit::Count, Sum, "committer", &[TABLE], "snapshots expired by commits");
pub const COMPACTION_BYTES_IN: Metric = metric(
    "CompactionBytesIn",
    Unit::Bytes,
    Sum,
    "compactor",
    &[TABLE],
    "bytes of the small files compactions rewrite",
);
pub const COMPACTION_BYTES_OUT: Metric =
    metric("CompactionBytesOut", Unit::Bytes, Sum, "compactor", &[TABLE], "bytes of the files compactions write");
pub const ORPHANS_REMOVED: Metric =
    metric("OrphansRemoved", Unit::Count, Sum, "compactor", &[TABLE], "orphan files deleted by the sweep");
pub const TASKS_WAITING: Metric = metric(
    "TasksWaiting",
    Unit::Count,
    Max,
    "compactor",
    &[],
    "messages in the task queue (visible and in flight), at the compactor's run",
);
pub const STALLED_TASK_AGE: Metric = metric(
    "StalledTaskAge",
    Unit::Seconds,
    Max,
    "compactor",
    &[TABLE],
    "while tasks wait in the queue: how long the oldest task of a table not suspended has waited uncommitted; 0 when none waits",
);
pub const SUSPENDED_TABLES: Metric =
    metric("SuspendedTables", Unit::Count, Max, "compactor", &[], "tables suspended (their tasks kept in the queue)");

/// Every metric Floe emits.
pub const ALL: &[Metric] = &[
    SEGMENTS,
    RECORDS,
    BYTES,
    FILES_WRITTEN,
    BAD_RECORDS,
    RECORDS_COMMITTED,
    FILES_COMMITTED,
    COMMIT_LATENCY,
    COMMIT_RETRIES,
    COMMIT_CONFLICTS,
    COMMIT_FAILURES,
    FRESHNESS_LAG,
    PROCESSING_DELAY,
    OLDEST_TASK_AGE,
    SNAPSHOTS_EXPIRED,
    COMPACTION_BYTES_IN,
    COMPACTION_BYTES_OUT,
    ORPHANS_REMOVED,
    TASKS_WAITING,
    STALLED_TASK_AGE,
    SUSPENDED_TABLES,
];

/// Dimension name → value, sorted by name.
type Dimensions = BTreeMap<&'static str, String>;
/// Metric name → the metric and its combined value.
type Values = BTreeMap<&'static str, (Metric, f64)>;

/// What one invocation recorded: per dimension set, per metric, the combined value.
#[derive(Debug, Default)]
pub struct Recorder {
    values: Mutex<BTreeMap<Dimensions, Values>>,
}

impl Recorder {
    pub fn new() -> Arc<Recorder> {
        Arc::new(Recorder::default())
    }

    /// Records `value` of `metric` under `dimensions` (and, if they name a table, also
    /// without it).
    pub fn record(&self, metric: &Metric, dimensions: &[(&'static str, &str)], value: f64) {
        let set: Dimensions = dimensions.iter().map(|(k, v)| (*k, v.to_string())).collect();
        let mut values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        if set.contains_key(TABLE) {
            let mut over_tables = set.clone();
            over_tables.remove(TABLE);
            combine(values.entry(over_tables).or_default(), metric, value);
        }
        combine(values.entry(set).or_default(), metric, value);
    }

    /// The value recorded for `metric` under exactly `dimensions` (`Function` aside).
    pub fn value(&self, metric: &Metric, dimensions: &[(&'static str, &str)]) -> Option<f64> {
        let set: Dimensions = dimensions.iter().map(|(k, v)| (*k, v.to_string())).collect();
        let values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        values.get(&set).and_then(|m| m.get(metric.name)).map(|(_, v)| *v)
    }

    /// The EMF lines (without newlines) of everything recorded, `Function` = `function`,
    /// stamped `timestamp_ms`; emptied.
    pub fn take_emf_lines(&self, function: &str, timestamp_ms: i64) -> Vec<String> {
        let values = std::mem::take(&mut *self.values.lock().unwrap_or_else(|p| p.into_inner()));
        let mut lines = Vec::new();
        for (dimensions, metrics) in values {
            let metrics: Vec<(Metric, f64)> = metrics.into_values().collect();
            for chunk in metrics.chunks(MAX_METRICS_PER_LINE) {
                lines.push(emf_line(function, &dimensions, chunk, timestamp_ms).to_string());
            }
        }
        lines
    }
}

fn combine(metrics: &mut Values, metric: &Metric, value: f64) {
    match metrics.get_mut(metric.name) {
        None => {
            metrics.insert(metric.name, (*metric, value));
        }
        Some((_, total)) => {
            *total = match metric.aggregate {
                Aggregate::Sum => *total + value,
                Aggregate::Max => total.max(value),
            }
        }
    }
}

/// One EMF object: one directive, one dimension set (`Function` first).
fn emf_line(function: &str, dimensions: &Dimensions, metrics: &[(Metric, f64)], timestamp_ms: i64) -> Value {
    let mut names = vec![FUNCTION.to_string()];
    names.extend(dimensions.keys().map(|k| k.to_string()));
    let definitions: Vec<Value> =
        metrics.iter().map(|(m, _)| json!({"Name": m.name, "Unit": m.unit.as_str()})).collect();
    let mut line = Map::new();
    line.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": [names], "Metrics": definitions}],
        }),
    );
    line.insert(FUNCTION.into(), function.into());
    for (name, value) in dimensions {
        line.insert(name.to_string(), value.clone().into());
    }
    for (metric, value) in metrics {
        line.insert(metric.name.into(), json!(value));
    }
    Value::Object(line)
}

tokio::task_local! {
    static CURRENT: Arc<Recorder>;
}

/// Runs `work` with `recorder` receiving what [`record`] records inside it.
pub async fn scope<F: Future>(recorder: Arc<Recorder>, work: F) -> F::Output {
    CURRENT.scope(recorder, work).await
}

/// Records into the current [`scope`]'s recorder; nothing outside one.
pub fn record(metric: &Metric, dimensions: &[(&'static str, &str)], value: f64) {
    let _ = CURRENT.try_with(|recorder| recorder.record(metric, dimensions, value));
}

/// [`record`] with only a `Table` dimension.
pub fn record_table(metric: &Metric, table: &str, value: f64) {
    record(metric, &[(TABLE, table)], value);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(recorder: &Recorder) -> Vec<Value> {
        recorder
            .take_emf_lines("committer", 1_764_489_600_000)
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn values_sum_or_keep_their_maximum_per_table_and_over_tables() {
        let recorder = Recorder::new();
        scope(recorder.clone(), async {
            record_table(&RECORDS_COMMITTED, "kafka.a", 10.0);
            record_table(&RECORDS_COMMITTED, "kafka.a", 5.0);
            record_table(&RECORDS_COMMITTED, "kafka.b", 1.0);
            record_table(&FRESHNESS_LAG, "kafka.a", 3.0);
            record_table(&FRESHNESS_LAG, "kafka.b", 7.5);
            record_table(&FRESHNESS_LAG, "kafka.b", 2.0);
        })
        .await;
        assert_eq!(recorder.value(&RECORDS_COMMITTED, &[(TABLE, "kafka.a")]), Some(15.0));
        assert_eq!(recorder.value(&RECORDS_COMMITTED, &[]), Some(16.0), "summed over tables");
        assert_eq!(recorder.value(&FRESHNESS_LAG, &[(TABLE, "kafka.b")]), Some(7.5));
        assert_eq!(recorder.value(&FRESHNESS_LAG, &[]), Some(7.5), "the maximum over tables");
        let lines = lines(&recorder);
        assert_eq!(lines.len(), 3, "one line per dimension set: none, kafka.a, kafka.b");
        let over_tables = lines.iter().find(|l| l.get(TABLE).is_none()).unwrap();
        assert_eq!(over_tables["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([["Function"]]));
        assert_eq!((&over_tables["Function"], &over_tables["RecordsCommitted"]), (&json!("committer"), &json!(16.0)));
        assert!(recorder.take_emf_lines("committer", 0).is_empty(), "taken: emptied");
    }

    #[tokio::test]
    async fn nothing_is_recorded_outside_a_scope() {
        record_table(&RECORDS_COMMITTED, "kafka.a", 10.0);
        let recorder = Recorder::new();
        scope(recorder.clone(), async {}).await;
        assert!(recorder.take_emf_lines("committer", 0).is_empty());
    }

    #[test]
    fn a_line_holds_at_most_a_hundred_metrics() {
        let recorder = Recorder::default();
        let names: Vec<&'static str> = (0..150).map(|i| &*format!("M{i:03}").leak()).collect();
        for name in &names {
            recorder.record(&Metric { name, ..SEGMENTS }, &[], 1.0);
        }
        let lines = lines(&recorder);
        let counts: Vec<usize> =
            lines.iter().map(|l| l["_aws"]["CloudWatchMetrics"][0]["Metrics"].as_array().unwrap().len()).collect();
        assert_eq!(counts, [100, 50]);
        assert!(
            lines.iter().all(|l| l.as_object().unwrap().len() == 2 + 100 || l.as_object().unwrap().len() == 2 + 50)
        );
    }

    #[test]
    fn every_metric_is_named_once_with_a_dimension_set_emf_allows() {
        let mut names: Vec<&str> = ALL.iter().map(|m| m.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
        for m in ALL {
            assert!(m.name.len() <= 255 && !m.name.is_empty() && !m.name.starts_with('_'), "{}", m.name);
            assert!(["materializer", "committer", "compactor"].contains(&m.function), "{}", m.name);
            assert!(m.dimensions.len() < 30 && m.dimensions.iter().all(|d| [TABLE, MODE].contains(d)), "{}", m.name);
        }
    }
}
