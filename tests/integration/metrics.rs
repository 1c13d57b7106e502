//! The functions' metrics on moto: every EMF line they print follows the Embedded Metric
//! Format specification (checked by [`check_emf`], written from the spec's rules, not
//! from our renderer), names only metrics `floe_core::metrics::ALL` declares, and counts
//! a known run right; a stalled committer (tasks waiting, none committed) sets the stall
//! metric the template's alarm watches, and draining the queue clears it.

use std::collections::BTreeMap;

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use serde_json::Value;

use floe_aws::lambda::{handle_committer_event, handle_compactor_event, handle_materializer_event, measured};
use floe_core::metrics::{self, ALL, FUNCTION, NAMESPACE};
use floe_core::task::Task;

use crate::committer::{SEGMENTS, assert_payments, payments, setup_with};
use crate::support;

/// CloudWatch's units, as the EMF specification refers to them.
const CLOUDWATCH_UNITS: &[&str] = &[
    "Seconds",
    "Microseconds",
    "Milliseconds",
    "Bytes",
    "Kilobytes",
    "Megabytes",
    "Gigabytes",
    "Terabytes",
    "Bits",
    "Kilobits",
    "Megabits",
    "Gigabits",
    "Terabits",
    "Percent",
    "Count",
    "Bytes/Second",
    "Kilobytes/Second",
    "Megabytes/Second",
    "Gigabytes/Second",
    "Terabytes/Second",
    "Bits/Second",
    "Kilobits/Second",
    "Megabits/Second",
    "Gigabits/Second",
    "Terabits/Second",
    "Count/Second",
    "None",
];

/// One metric value a line carries: its dimensions (name → value) and its name.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    dimensions: BTreeMap<String, String>,
    name: String,
    unit: String,
    value: f64,
}

/// Checks one line against the EMF specification and returns its samples:
/// - one JSON object on one line, with an `_aws` object;
/// - `_aws.Timestamp`: a non-negative integer, milliseconds since the epoch (and recent);
/// - `_aws.CloudWatchMetrics`: an array of directives, each with a `Namespace` string
///   (1–255 characters), `Dimensions` (an array of dimension sets, each an array of at
///   most 30 strings, each naming a top-level member whose value is a string) and
///   `Metrics` (at most 100 definitions, each a `Name` string naming a top-level member
///   whose value is a number or an array of at most 100 numbers, and an optional `Unit`
///   from CloudWatch's list).
fn check_emf(line: &str) -> Vec<Sample> {
    assert!(!line.contains('\n'), "one line: {line}");
    let root: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    let root = root.as_object().unwrap_or_else(|| panic!("not an object: {line}"));
    let aws = root.get("_aws").and_then(Value::as_object).unwrap_or_else(|| panic!("no _aws object: {line}"));
    let timestamp = aws.get("Timestamp").and_then(Value::as_i64).unwrap_or_else(|| panic!("Timestamp: {line}"));
    let now = floe_core::lock::now_ms();
    assert!(timestamp > now - 3_600_000 && timestamp <= now, "Timestamp in ms, now: {line}");
    let directives =
        aws.get("CloudWatchMetrics").and_then(Value::as_array).unwrap_or_else(|| panic!("CloudWatchMetrics: {line}"));
    assert!(!directives.is_empty(), "{line}");
    let mut samples = Vec::new();
    for directive in directives {
        let namespace = directive["Namespace"].as_str().unwrap_or_else(|| panic!("Namespace: {line}"));
        assert!((1..=255).contains(&namespace.len()), "{line}");
        assert_eq!(namespace, NAMESPACE);
        let sets = directive["Dimensions"].as_array().unwrap_or_else(|| panic!("Dimensions: {line}"));
        let definitions = directive["Metrics"].as_array().unwrap_or_else(|| panic!("Metrics: {line}"));
        assert!(definitions.len() <= 100, "at most 100 metrics: {line}");
        for set in sets {
            let set = set.as_array().unwrap_or_else(|| panic!("a dimension set is an array: {line}"));
            assert!(set.len() <= 30, "at most 30 dimensions: {line}");
            let mut dimensions = BTreeMap::new();
            for key in set {
                let key = key.as_str().unwrap_or_else(|| panic!("a dimension key is a string: {line}"));
                let value = root.get(key).and_then(Value::as_str);
                let value = value.unwrap_or_else(|| panic!("dimension {key} is a top-level string: {line}"));
                dimensions.insert(key.to_string(), value.to_string());
            }
            for definition in definitions {
                let name = definition["Name"].as_str().unwrap_or_else(|| panic!("Name: {line}"));
                assert!(!name.is_empty() && name.len() <= 1024, "{line}");
                let unit = definition.get("Unit").map(|u| u.as_str().expect("Unit is a string"));
                assert!(unit.is_none_or(|u| CLOUDWATCH_UNITS.contains(&u)), "unit {unit:?} is CloudWatch's: {line}");
                let value = match root.get(name) {
                    Some(Value::Number(n)) => n.as_f64().unwrap(),
                    Some(Value::Array(values)) => {
                        assert!(values.len() <= 100 && values.iter().all(Value::is_number), "{line}");
                        values.iter().filter_map(Value::as_f64).sum()
                    }
                    other => panic!("metric {name} is a top-level number, not {other:?}: {line}"),
                };
                let unit = unit.unwrap_or("None").to_string();
                samples.push(Sample { dimensions: dimensions.clone(), name: name.to_string(), unit, value });
            }
        }
    }
    samples
}

/// Every line checked, and every sample one of Floe's metrics: its unit, the function
/// that emits it, dimensions among its own.
fn check_lines(function: &str, lines: &[String]) -> Vec<Sample> {
    let samples: Vec<Sample> = lines.iter().flat_map(|l| check_emf(l)).collect();
    for sample in &samples {
        let metric = ALL.iter().find(|m| m.name == sample.name).unwrap_or_else(|| panic!("undeclared: {sample:?}"));
        assert_eq!((metric.unit.as_str(), metric.function), (sample.unit.as_str(), function), "{sample:?}");
        assert_eq!(sample.dimensions.get(FUNCTION).map(String::as_str), Some(function));
        assert!(sample.dimensions.keys().all(|k| k == FUNCTION || metric.dimensions.contains(&k.as_str())));
    }
    samples
}

/// The value of `name` under exactly `dimensions` (`Function` included).
fn value(samples: &[Sample], name: &str, dimensions: &[(&str, &str)]) -> Option<f64> {
    let want: BTreeMap<String, String> = dimensions.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    samples.iter().find(|s| s.name == name && s.dimensions == want).map(|s| s.value)
}

fn scheduled_event() -> EventBridgeEvent<Value> {
    let text = std::fs::read_to_string(support::root().join("events/eventbridge-scheduled.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn object_created(bucket: &str, key: &str) -> Value {
    serde_json::json!({"version": "0", "detail-type": "Object Created", "source": "aws.s3",
        "detail": {"bucket": {"name": bucket}, "object": {"key": key}}})
}

#[tokio::test]
async fn each_functions_emf_lines_follow_the_spec_and_count_a_known_run() {
    let aws = setup_with("metrics", "").await;
    let (topic, offsets, values) = payments();
    let table = aws.table().to_string();
    let materializer = aws.materializer().await;
    let mut materialized = Vec::new();
    let mut segment_bytes = 0;
    for key in SEGMENTS {
        let body = std::fs::read(topic.path().join(key)).unwrap();
        segment_bytes += body.len();
        aws.s3.put_object().bucket(&aws.segments).key(key).body(body.into()).send().await.unwrap();
        let event = object_created(&aws.segments, key);
        let (response, lines) = measured("materializer", handle_materializer_event(&materializer, event)).await;
        assert_eq!(response.unwrap().queued.len(), 1);
        materialized.extend(check_lines("materializer", &lines));
    }

    let committer = aws.committer();
    let (mut committed, mut newest, mut commit_window) = (Vec::new(), None, (i64::MAX, 0));
    let mut written = 0;
    loop {
        let (event, receipts) = aws.receive().await;
        if event.records.is_empty() {
            break;
        }
        for message in &event.records {
            if let Task::Data(task) =
                floe_aws::sqs::task_from_message(&aws.s3, message.body.as_deref().unwrap()).await.unwrap()
            {
                newest = newest.max(task.max_timestamp);
                written += task.record_count + task.open_transactions.iter().map(|t| t.records).sum::<u64>();
            }
        }
        let before = floe_core::lock::now_ms();
        let (response, lines) = measured("committer", handle_committer_event(&committer, event, None)).await;
        commit_window = (commit_window.0.min(before), floe_core::lock::now_ms());
        assert!(response.batch_item_failures.is_empty());
        aws.delete(&receipts).await;
        committed.extend(check_lines("committer", &lines));
    }
    let read = aws.read();
    assert_payments(&read, &offsets, &values);

    // The materializer: three segments of the table, their rows and bytes.
    let sum = |samples: &[Sample], name: &str, dims: &[(&str, &str)]| {
        let want: BTreeMap<String, String> = dims.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        samples.iter().filter(|s| s.name == name && s.dimensions == want).map(|s| s.value).sum::<f64>()
    };
    let per_table = [(FUNCTION, "materializer"), (metrics::TABLE, table.as_str())];
    assert_eq!(sum(&materialized, "Segments", &per_table), 3.0);
    assert_eq!(sum(&materialized, "Segments", &[(FUNCTION, "materializer")]), 3.0, "also over tables");
    assert_eq!(sum(&materialized, "Records", &per_table), written as f64, "the tasks' records, open ones included");
    assert!(written >= read.rows as u64);
    assert_eq!(sum(&materialized, "Bytes", &per_table), segment_bytes as f64);
    assert!(sum(&materialized, "FilesWritten", &per_table) >= 3.0);

    // The committer: the rows PyIceberg reads, committed; the lag from the newest record.
    let per_table = [(FUNCTION, "committer"), (metrics::TABLE, table.as_str())];
    assert_eq!(sum(&committed, "RecordsCommitted", &per_table), read.rows as f64, "rows committed = rows read");
    assert!(value(&committed, "CommitLatency", &per_table).is_some_and(|ms| ms > 0.0));
    assert_eq!(sum(&committed, "CommitConflicts", &per_table), 0.0);
    let newest = newest.expect("tasks carry their newest record's timestamp");
    let lag = committed
        .iter()
        .filter(|s| s.name == "FreshnessLag" && s.dimensions.len() == 2)
        .map(|s| s.value)
        .fold(f64::MIN, f64::max);
    let (earliest, latest) = ((commit_window.0 - newest) as f64 / 1000.0, (commit_window.1 - newest) as f64 / 1000.0);
    assert!(lag >= earliest && lag <= latest, "lag {lag} s within [{earliest}, {latest}]");
    // The processing delay: since the materializer made the tasks, whatever the records' age.
    let delay = value(&committed, "ProcessingDelay", &per_table).expect("a processing delay");
    assert!((0.0..600.0).contains(&delay), "{delay}");
    assert!(value(&committed, "OldestTaskAge", &[(FUNCTION, "committer")]).is_some_and(|age| age >= 0.0));

    // The compactor: all committed, nothing waits, nothing suspended.
    let service = aws.compactor().await;
    let (_, lines) = measured("compactor", handle_compactor_event(&service, scheduled_event(), None)).await;
    let compactor = check_lines("compactor", &lines);
    let function = [(FUNCTION, "compactor")];
    for (name, expected) in [("StalledTaskAge", 0.0), ("TasksWaiting", 0.0), ("SuspendedTables", 0.0)] {
        assert_eq!(value(&compactor, name, &function), Some(expected), "{name}: {compactor:#?}");
    }
}

#[tokio::test]
async fn a_stalled_committer_sets_the_stall_metric_and_draining_the_queue_clears_it() {
    let aws = setup_with("stall", "").await;
    let (topic, _, _) = payments();
    let table = aws.table().to_string();
    let stall = |samples: &[Sample]| {
        let over_tables = value(samples, "StalledTaskAge", &[(FUNCTION, "compactor")]);
        let of_table = value(samples, "StalledTaskAge", &[(FUNCTION, "compactor"), (metrics::TABLE, &table)]);
        (over_tables, of_table, value(samples, "TasksWaiting", &[(FUNCTION, "compactor")]))
    };
    let service = aws.compactor().await;

    // A task queued, the committer not running: it waits, uncommitted.
    let materializer = aws.materializer().await;
    aws.materialize(&materializer, topic.path(), SEGMENTS[0]).await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let (_, lines) = measured("compactor", handle_compactor_event(&service, scheduled_event(), None)).await;
    let (over_tables, of_table, waiting) = stall(&check_lines("compactor", &lines));
    assert!(over_tables.is_some_and(|age| age >= 1.5), "stalled: {lines:#?}");
    assert_eq!(of_table, over_tables, "the table never committed is named");
    assert_eq!(waiting, Some(1.0));

    // The committer drains the queue: the stall clears.
    let (event, receipts) = aws.receive().await;
    assert!(handle_committer_event(&aws.committer(), event, None).await.batch_item_failures.is_empty());
    aws.delete(&receipts).await;
    let (_, lines) = measured("compactor", handle_compactor_event(&service, scheduled_event(), None)).await;
    assert_eq!(stall(&check_lines("compactor", &lines)), (Some(0.0), Some(0.0), Some(0.0)), "{lines:#?}");
}
