//! Delta tables beside the Iceberg tables (`formats = ["iceberg", "delta"]`), judged by
//! delta-rs (the `deltalake` Python package) and DuckDB's delta extension against
//! PyIceberg's read of the Iceberg table: every committed record once, the same rows,
//! the offsets in `txn` actions, time travel by version, compaction as `OPTIMIZE`,
//! readers starting from Floe's checkpoint, and a mirror lost between the two commits
//! (its Delta commit file gone) made good when the tasks come again.

use std::collections::BTreeMap;
use std::path::Path;

use floe_core::config::FloeConfig;
use floe_core::delta::{DeltaSnapshot, LocalLogStore};

use crate::committer::{copy, read_local};
use crate::support;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// What tests/py/read_delta.py reads.
#[derive(serde::Deserialize, Debug)]
pub(crate) struct DeltaRead {
    pub(crate) rows: usize,
    pub(crate) offsets: BTreeMap<String, Vec<i64>>,
    pub(crate) duplicates: usize,
    pub(crate) values: std::collections::HashMap<String, Option<String>>,
    #[serde(default)]
    pub(crate) version: Option<i64>,
    #[serde(default)]
    txns: BTreeMap<String, Option<i64>>,
    #[serde(default)]
    protocol: Vec<i32>,
    #[serde(default)]
    operations: Vec<Option<String>>,
    #[serde(default)]
    columns: Vec<String>,
    #[serde(default)]
    partition_columns: Vec<String>,
    #[serde(default)]
    day_mismatches: Option<usize>,
    #[serde(default)]
    month_mismatches: Option<usize>,
    #[serde(default)]
    year_mismatches: Option<usize>,
    #[serde(default)]
    trunc_mismatches: Option<usize>,
    /// Rows per value of the last partition column.
    #[serde(default)]
    counts: BTreeMap<String, usize>,
    #[serde(default)]
    rows_json: BTreeMap<String, String>,
}

fn read_delta(args: &[&str]) -> DeltaRead {
    let out = std::process::Command::new(support::python())
        .arg(support::root().join("tests/py/read_delta.py"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "read_delta.py {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn config() -> FloeConfig {
    FloeConfig::parse("[defaults]\nenabled = true\nformats = [\"iceberg\", \"delta\"]\n").unwrap()
}

async fn run(input: &Path, warehouse: &Path) {
    let report = floe_cli::local::run_local(input, warehouse, config()).await.unwrap();
    assert!(report.failed.is_empty() && report.maintenance_failed.is_empty(), "{report:?}");
}

/// What the Iceberg table holds, as an independent reader reads it (PyIceberg, or
/// foreign_delete.py's reader, which applies equality deletes too).
#[derive(serde::Deserialize)]
struct Expected {
    rows: usize,
    offsets: BTreeMap<String, Vec<i64>>,
    values: std::collections::HashMap<String, Option<String>>,
}

/// Both readers of the Delta table see exactly the Iceberg table's rows as PyIceberg
/// reads them; delta-rs's read (with the partitions' txn versions) is returned.
fn same_rows(warehouse: &Path, table: &str, partitions: &[i32]) -> DeltaRead {
    let iceberg = read_local(warehouse, table);
    assert_eq!(iceberg.duplicates, 0);
    let expected = Expected { rows: iceberg.rows, offsets: iceberg.offsets.clone(), values: iceberg.values.clone() };
    same_as(&iceberg.location, &expected, table, partitions)
}

/// Both readers of the Delta table at `location` see exactly `expected`; delta-rs's read
/// (with the partitions' txn versions) is returned.
fn same_as(location: &str, expected: &Expected, table: &str, partitions: &[i32]) -> DeltaRead {
    let topic = table.rsplit('.').next().unwrap();
    let apps: Vec<String> = partitions.iter().map(|p| format!("{table}/{topic}/{p}")).collect();
    let mut args = vec!["deltalake", location];
    for app in &apps {
        args.extend(["--app", app.as_str()]);
    }
    let delta = read_delta(&args);
    let duck = read_delta(&["duckdb", location]);
    for (reader, read) in [("delta-rs", &delta), ("DuckDB", &duck)] {
        assert_eq!((read.rows, read.duplicates), (expected.rows, 0), "{table}: {reader}");
        assert_eq!(read.offsets, expected.offsets, "{table}: {reader}");
        assert_eq!(read.values, expected.values, "{table}: {reader}");
    }
    for (p, app) in partitions.iter().zip(&apps) {
        let last = expected.offsets[&p.to_string()].last().copied();
        assert_eq!(delta.txns[app], last, "{table}: the txn of partition {p}");
    }
    delta
}

/// `floe local audit`: exactly once, the Delta table's files the Iceberg table's.
async fn audited(warehouse: &Path) {
    let audit = floe_cli::audit::local(warehouse, "kafka.orders").await.unwrap();
    assert!(audit.exactly_once && audit.delta.as_ref().is_some_and(|d| d.same_rows()), "{audit:?}");
}

/// `kafka.orders` of the sample segments `segments` (examples/segments), run with both
/// formats: the input folder and the warehouse.
async fn orders(segments: &[&str]) -> (tempfile::TempDir, tempfile::TempDir) {
    let samples = support::root().join("examples/segments");
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for rel in segments {
        copy(&samples, input.path(), rel);
    }
    run(input.path(), warehouse.path()).await;
    (input, warehouse)
}

const FIRST_SEGMENTS: [&str; 2] = ["orders-0/00000000000000000000.log", "orders-1/00000000000000000000.log"];

#[tokio::test]
async fn a_delta_table_beside_the_iceberg_one_holds_the_same_rows_through_runs_compaction_and_a_lost_mirror() {
    let samples = support::root().join("examples/segments");
    let (input, warehouse) = orders(&FIRST_SEGMENTS).await;
    let first = same_rows(warehouse.path(), "kafka.orders", &[0, 1]);
    assert_eq!((first.rows, first.version, first.protocol.as_slice()), (180, Some(0), &[2, 5][..]));

    // A second run adds a segment: a new version; version 0 still reads the first rows.
    copy(&samples, input.path(), "orders-0/00000000000000000100.log");
    run(input.path(), warehouse.path()).await;
    let second = same_rows(warehouse.path(), "kafka.orders", &[0, 1]);
    assert_eq!((second.rows, second.version), (240, Some(1)));
    let location = read_local(warehouse.path(), "kafka.orders").location;
    let back = read_delta(&["deltalake", &location, "--version", "0"]);
    assert_eq!((back.rows, back.offsets), (180, first.offsets));

    // The mirror of a commit lost (its Delta commit file gone, as if the committer died
    // between the two commits): the same segments run again, their tasks are found
    // committed in Iceberg, and the mirror brings the Delta table in step.
    let log = Path::new(&location).join("_delta_log");
    std::fs::remove_file(log.join("00000000000000000001.json")).unwrap();
    assert_eq!(read_delta(&["deltalake", &location]).rows, 180);
    let delta_status = async || {
        let status = floe_cli::local::status_in(warehouse.path(), &config()).await.unwrap();
        status.into_iter().find(|t| t.table == "kafka.orders").unwrap().health.delta.unwrap()
    };
    let audit = floe_cli::audit::local(warehouse.path(), "kafka.orders").await.unwrap();
    let check = audit.delta.clone().unwrap();
    assert!(!audit.exactly_once && check.missing.len() == 1 && check.extra.is_empty(), "{audit:?}");
    assert_eq!(check.offsets, ["kafka.orders/orders/0: txn version 99, where 159 is committed last"]);
    let behind = delta_status().await;
    assert!(behind.starts_with("version 0, 2 files, behind: mirrors Iceberg sequence number 1 of 2"), "{behind}");
    run(input.path(), warehouse.path()).await;
    assert_eq!(delta_status().await, "version 1, 3 files, in step with the Iceberg table");
    audited(warehouse.path()).await;
    let caught_up = same_rows(warehouse.path(), "kafka.orders", &[0, 1]);
    assert_eq!((caught_up.rows, caught_up.version), (240, Some(1)));
    // And once in step, running again writes nothing.
    run(input.path(), warehouse.path()).await;
    assert_eq!(same_rows(warehouse.path(), "kafka.orders", &[0, 1]).version, Some(1));

    // Compaction days later: one Delta commit that changes no data (OPTIMIZE).
    let mut out = Vec::new();
    let clock = floe_core::lock::Clock::Shifted { by_ms: 4 * DAY_MS };
    floe_cli::compact::compact(warehouse.path(), config(), clock, &mut out).await.unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("kafka.orders: ") && out.contains("bin(s) compacted"), "{out}");
    assert_eq!(read_local(warehouse.path(), "kafka.orders").operation.as_deref(), Some("replace"));
    let compacted = same_rows(warehouse.path(), "kafka.orders", &[0, 1]);
    assert_eq!(compacted.version, Some(2));
    assert_eq!(
        compacted.operations.last().cloned().flatten().as_deref(),
        Some("OPTIMIZE"),
        "{:?}",
        compacted.operations
    );
    audited(warehouse.path()).await;
    let data_changes = |version: i64| -> Vec<bool> {
        let text = std::fs::read_to_string(log.join(format!("{version:020}.json"))).unwrap();
        let actions = floe_core::delta::actions::from_lines(&text).unwrap();
        actions
            .into_iter()
            .filter_map(|a| match a {
                floe_core::delta::actions::Action::Add(add) => Some(add.data_change),
                floe_core::delta::actions::Action::Remove(remove) => Some(remove.data_change),
                _ => None,
            })
            .collect()
    };
    assert!(data_changes(1).iter().all(|&c| c), "appended files change data");
    let compaction = data_changes(2);
    assert!(compaction.len() >= 2 && compaction.iter().all(|&c| !c), "a compaction's files change none");

    // Readers start from Floe's checkpoint: the commits it covers removed.
    let state = DeltaSnapshot::read(&LocalLogStore, &location).await.unwrap().unwrap();
    state.checkpoint(&LocalLogStore).await.unwrap();
    for v in 0..=state.version {
        std::fs::remove_file(log.join(format!("{v:020}.json"))).unwrap();
    }
    assert_eq!(same_rows(warehouse.path(), "kafka.orders", &[0, 1]).rows, 240);
}

/// delta-rs's read of the Delta table at `location` on moto's S3, with the txn version
/// of the table's Kafka partition 0.
pub(crate) fn read_on_moto(location: &str, app: &str) -> DeltaRead {
    let endpoint = support::moto().endpoint.clone();
    read_delta(&["deltalake", location, "--app", app, "--endpoint", &endpoint])
}

/// On AWS (moto: S3's conditional PUT, Glue, SQS, DynamoDB), through the Lambda
/// handlers: three segments committed a batch each, one of them delivered again, then
/// the compactor Lambda's scheduled run committed: delta-rs reads the same rows as
/// PyIceberg through Glue at each step, the offsets in the `txn`, the compaction as an
/// `OPTIMIZE` that changes no data.
#[tokio::test]
async fn on_glue_the_lambda_handlers_keep_a_delta_table_in_step_through_redelivery_and_compaction() {
    use aws_lambda_events::event::eventbridge::EventBridgeEvent;
    use floe_aws::lambda::{handle_committer_event, handle_compactor_event};

    let formats = "formats = [\"iceberg\", \"delta\"]\n";
    let (aws, read, offsets, _) = crate::maintenance::small_files_on_moto_with("delta", formats).await;
    let app = format!("{}/payments/0", aws.table());
    let same = |read: &crate::committer::Read, delta: &DeltaRead| {
        assert_eq!((delta.rows, delta.duplicates), (read.rows, 0));
        assert_eq!((&delta.offsets, &delta.values), (&read.offsets, &read.values));
        assert_eq!(delta.txns[&app], offsets.last().copied());
    };
    let first = read_on_moto(&read.location, &app);
    same(&read, &first);
    assert_eq!(first.version, Some(2), "a Delta version per commit");
    // Registered in Glue beside the Iceberg table, as Athena and Spark find Delta tables.
    let glue = aws_sdk_glue::Client::new(&support::aws_config().await);
    let name = format!("{}_delta", aws.table().name);
    let registered = glue.get_table().database_name(&aws.namespace).name(&name).send().await.unwrap().table.unwrap();
    let parameters = registered.parameters().unwrap();
    assert_eq!(
        (parameters["table_type"].as_str(), parameters["spark.sql.sources.provider"].as_str()),
        ("DELTA", "delta")
    );
    assert_eq!(registered.storage_descriptor().unwrap().location(), Some(read.location.as_str()));

    // The first segment delivered again: its offsets are committed, nothing is added.
    let (materializer, committer) = (aws.materializer().await, aws.committer());
    let (dir, _, _) = crate::committer::payments();
    aws.materialize(&materializer, dir.path(), crate::committer::SEGMENTS[0]).await;
    let (event, receipts) = aws.receive().await;
    assert!(handle_committer_event(&committer, event, None).await.batch_item_failures.is_empty());
    aws.delete(&receipts).await;
    let again = read_on_moto(&read.location, &app);
    same(&aws.read(), &again);
    assert_eq!(again.version, Some(2), "nothing new to mirror");

    // The compactor Lambda's scheduled run, then the committer: one OPTIMIZE version.
    let text = std::fs::read_to_string(support::root().join(crate::maintenance::SCHEDULED_EVENT)).unwrap();
    let scheduled: EventBridgeEvent<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let response = handle_compactor_event(&aws.compactor().await, scheduled, None).await;
    assert!(response.failed.is_empty() && response.compacted.len() == 1, "{response:?}");
    let (event, receipts) = aws.receive().await;
    assert!(handle_committer_event(&committer, event, None).await.batch_item_failures.is_empty());
    aws.delete(&receipts).await;
    let after = aws.read();
    assert_eq!(after.operation.as_deref(), Some("replace"));
    let compacted = read_on_moto(&read.location, &app);
    same(&after, &compacted);
    let audit = floe_cli::audit::aws(&aws.config, &aws.table().to_string(), true).await.unwrap();
    assert!(audit.exactly_once && audit.delta.as_ref().is_some_and(|d| d.same_rows() && d.version == 3), "{audit:?}");
    assert_eq!(compacted.version, Some(3));
    assert_eq!(compacted.operations.last().cloned().flatten().as_deref(), Some("OPTIMIZE"));
}

/// Mirrors racing for the same Delta table (committers whose leases overlapped, a
/// compactor run beside a commit): one writes each version, the others read it and find
/// nothing left to do; the table holds each row once.
#[tokio::test]
async fn racing_mirrors_write_each_version_once() {
    use floe_core::delta::Mirrored;
    use floe_core::delta::cache::MirrorCache;

    let (_input, warehouse) = orders(&FIRST_SEGMENTS).await;
    let location = read_local(warehouse.path(), "kafka.orders").location;
    std::fs::remove_dir_all(Path::new(&location).join("_delta_log")).unwrap();

    let catalog =
        floe_core::catalog::sqlite::SqliteCatalog::open(&warehouse.path().join("catalog.db"), "floe").unwrap();
    let file_io = floe_core::storage::local_file_io();
    let name = floe_core::task::TableName::parse("kafka.orders").unwrap();
    let loaded = floe_core::table::load(&catalog, &file_io, &name).await.unwrap().unwrap();
    // Each racer a process of its own, with what it keeps between mirrors.
    let caches: Vec<MirrorCache> = (0..8).map(|_| MirrorCache::default()).collect();
    let race = async |loaded: &floe_core::table::LoadedTable| -> Vec<Mirrored> {
        let racers = caches.iter().map(|cache| floe_core::delta::mirror(&LocalLogStore, &file_io, loaded, 1, cache));
        futures::future::join_all(racers).await.into_iter().map(Result::unwrap).collect()
    };
    let outcomes = race(&loaded).await;
    let written = outcomes.iter().filter(|o| matches!(o, Mirrored::Committed { .. })).count();
    assert_eq!(written, 1, "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, Mirrored::Committed { version: 0, .. } | Mirrored::UpToDate { version: 0 }))
    );
    assert_eq!(same_rows(warehouse.path(), "kafka.orders", &[0, 1]).version, Some(0));

    // Another committer commits a segment and mirrors it (version 1): the racers' kept
    // states are a version behind, and each finds the table in step rather than writing
    // it again.
    let input = tempfile::tempdir().unwrap();
    copy(&support::root().join("examples/segments"), input.path(), "orders-0/00000000000000000100.log");
    run(input.path(), warehouse.path()).await;
    let loaded = floe_core::table::load(&catalog, &file_io, &name).await.unwrap().unwrap();
    let outcomes = race(&loaded).await;
    assert!(outcomes.iter().all(|o| matches!(o, Mirrored::UpToDate { version: 1 })), "{outcomes:?}");
    assert_eq!(same_rows(warehouse.path(), "kafka.orders", &[0, 1]).rows, 240);
}

/// The orphan sweep keeps what the Delta table's current version names, even a file no
/// Iceberg snapshot names (a mirror stopped, or `delta` taken out of `formats`); once the
/// mirror has removed it from the Delta table too, the sweep deletes it.
#[tokio::test]
async fn the_sweep_keeps_the_files_the_delta_table_names() {
    use floe_core::delta::actions::{Action, Add};

    let (_input, warehouse) = orders(&FIRST_SEGMENTS[..1]).await;
    let location = read_local(warehouse.path(), "kafka.orders").location;
    let live = read_local(warehouse.path(), "kafka.orders").files[0].clone();
    let only_delta = Path::new(&location).join("data/only-delta.parquet");
    std::fs::copy(live.strip_prefix("file://").unwrap_or(&live), &only_delta).unwrap();
    let state = DeltaSnapshot::read(&LocalLogStore, &location).await.unwrap().unwrap();
    // With a deletion vector (its first row deleted), a file of its own.
    let file_io = floe_core::storage::local_file_io();
    let vector = floe_core::delta::vectors::write(&file_io, &location, only_delta.to_str().unwrap(), &[0]).await;
    let vector = vector.unwrap();
    let vector_file = std::path::PathBuf::from(vector.file(&location).unwrap());
    let add = Add {
        path: "data/only-delta.parquet".into(),
        partition_values: Default::default(),
        size: std::fs::metadata(&only_delta).unwrap().len() as i64,
        modification_time: 0,
        data_change: true,
        stats: None,
        deletion_vector: Some(vector),
    };
    assert_eq!(state.commit(&LocalLogStore, vec![Action::Add(add)]).await.unwrap(), Some(1));

    let maintain = async |config: FloeConfig| {
        let mut out = Vec::new();
        let clock = floe_core::lock::Clock::Shifted { by_ms: 4 * DAY_MS };
        floe_cli::compact::compact(warehouse.path(), config, clock, &mut out).await.unwrap();
        String::from_utf8(out).unwrap()
    };
    let iceberg_only = FloeConfig::parse("[defaults]\nenabled = true\n").unwrap();
    let out = maintain(iceberg_only).await;
    assert!(only_delta.exists() && vector_file.exists(), "named by the Delta table: kept\n{out}");
    let out = maintain(config()).await;
    assert!(!only_delta.exists(), "the mirror removed it from the Delta table, then the sweep deleted it\n{out}");
    assert!(!vector_file.exists(), "its deletion vector too\n{out}");
    let after = same_rows(warehouse.path(), "kafka.orders", &[0]);
    assert_eq!((after.rows, after.version), (100, Some(2)));
}

/// A JSON topic gains a column (a nested struct, `meta`, before `name`): the Delta
/// table's schema follows in the same commit as the files of the new schema (a
/// `metaData` action, the new field's id in its column mapping), and delta-rs reads the
/// old rows with `meta` null.
#[tokio::test]
async fn the_delta_schema_follows_the_iceberg_schema_s_evolution() {
    let (data, input, warehouse) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    support::run_python("make_nested_evolution.py", &[Path::new("json"), data.path()]);
    let config = || {
        let text = "[defaults]\nenabled = true\nvalue_format = \"json\"\nformats = [\"iceberg\", \"delta\"]\n";
        FloeConfig::parse(text).unwrap()
    };
    let run = async |segment: &str| {
        copy(data.path(), input.path(), segment);
        let report = floe_cli::local::run_local(input.path(), warehouse.path(), config()).await.unwrap();
        assert!(report.failed.is_empty(), "{report:?}");
    };
    run("shop-0/00000000000000000000.log").await;
    let location = read_local(warehouse.path(), "kafka.shop").location;
    let before = read_delta(&["deltalake", &location]);
    assert!(!before.columns.contains(&"meta".to_string()), "{:?}", before.columns);
    run("shop-0/00000000000000000010.log").await;
    let after = read_delta(&["deltalake", &location]);
    assert_eq!((after.rows, after.version), (20, Some(1)));
    assert_eq!(after.columns, ["_kafka", "id", "items", "name", "meta"].map(String::from), "the Iceberg order");
    assert_eq!(after.rows_json["0/5"], r#"{"id": 5, "items": [5, 6], "meta": null, "name": "a5"}"#);
    assert_eq!(after.rows_json["0/15"], r#"{"id": 15, "items": [5], "meta": {"tag": "t5"}, "name": "b5"}"#);
    assert_eq!(read_delta(&["duckdb", &location]).rows, 20);
    let audit = floe_cli::audit::local(warehouse.path(), "kafka.shop").await.unwrap();
    assert!(audit.exactly_once && audit.delta.is_some_and(|d| d.same_rows()), "the audit of both");
}

/// A table partitioned by `day(_kafka.timestamp)` and `identity(region)` (null every
/// third record): the Delta table is partitioned by a generated `timestamp_day` column
/// and by `region`, each file's values in its `add`; delta-rs and DuckDB read the same
/// rows as the Iceberg table, and group them by region as it does. Then by `year`,
/// `month` and `truncate`: generated columns whose values are their expressions'.
#[tokio::test]
async fn a_partitioned_table_s_delta_table_has_its_partition_columns() {
    let (data, input, warehouse) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    support::run_python("make_partitioned.py", &[data.path()]);
    for rel in
        ["events-0/00000000000000000000.log", "events-0/00000000000000000060.log", "events-1/00000000000000000000.log"]
    {
        copy(data.path(), input.path(), rel);
    }
    let text = "[defaults]\nenabled = true\nvalue_format = \"json\"\nformats = [\"iceberg\", \"delta\"]\n\
                partition_by = [\"day(_kafka.timestamp)\", \"identity(region)\"]\n";
    let report =
        floe_cli::local::run_local(input.path(), warehouse.path(), FloeConfig::parse(text).unwrap()).await.unwrap();
    assert!(report.failed.is_empty(), "{report:?}");
    let iceberg = read_local(warehouse.path(), "kafka.events");
    let delta = read_delta(&["deltalake", &iceberg.location]);
    let duck = read_delta(&["duckdb", &iceberg.location]);
    for read in [&delta, &duck] {
        assert_eq!((read.rows, read.duplicates, &read.offsets), (iceberg.rows, 0, &iceberg.offsets));
    }
    assert_eq!(delta.partition_columns, ["timestamp_day", "region"]);
    assert_eq!(delta.day_mismatches, Some(0), "each row's timestamp_day is its timestamp's day");
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.path().join("expected.json")).unwrap()).unwrap();
    let mut by_region: BTreeMap<String, usize> = BTreeMap::new();
    for row in expected["rows"].as_array().unwrap() {
        *by_region.entry(row[3].as_str().unwrap_or("None").to_string()).or_default() += 1;
    }
    assert_eq!(delta.counts, by_region);
    let audit = floe_cli::audit::local(warehouse.path(), "kafka.events").await.unwrap();
    assert!(audit.exactly_once && audit.delta.is_some_and(|d| d.same_rows()), "the audit of both");

    // Year, month and truncate: generated columns too, each row's value what its
    // expression gives; bucket is left out of the Delta partitioning.
    let specs = [
        (
            "[\"month(_kafka.timestamp)\", \"truncate(1, region)\", \"bucket(4, region)\"]",
            &["timestamp_month", "region_trunc"][..],
        ),
        ("[\"year(_kafka.timestamp)\"]", &["timestamp_year"][..]),
    ];
    for (partition_by, columns) in specs {
        let other = tempfile::tempdir().unwrap();
        let text = text.replace("[\"day(_kafka.timestamp)\", \"identity(region)\"]", partition_by);
        let config = FloeConfig::parse(&text).unwrap();
        let report = floe_cli::local::run_local(input.path(), other.path(), config).await.unwrap();
        assert!(report.failed.is_empty(), "{report:?}");
        let iceberg = read_local(other.path(), "kafka.events");
        let delta = read_delta(&["deltalake", &iceberg.location]);
        let duck = read_delta(&["duckdb", &iceberg.location]);
        for read in [&delta, &duck] {
            assert_eq!((read.rows, read.duplicates, &read.offsets), (iceberg.rows, 0, &iceberg.offsets));
        }
        assert_eq!(delta.partition_columns, columns);
        let mismatches = [delta.year_mismatches, delta.month_mismatches, delta.trunc_mismatches];
        assert!(mismatches.iter().all(|m| m.is_none_or(|n| n == 0)), "{partition_by}: {mismatches:?}");
        assert_eq!(mismatches.iter().flatten().count(), columns.len(), "{partition_by}: each column checked");
    }
}

/// Another engine writes the Iceberg table of a Delta topic: its append is mirrored; its
/// row-level deletes (a position delete file, an equality delete file) become deletion
/// vectors; its overwrite (every row in new files) is mirrored as a remove and an add of
/// each file. Delta-rs and DuckDB read what the Iceberg readers read at each step.
#[tokio::test]
async fn another_engine_s_append_delete_and_overwrite_reach_the_delta_table() {
    use crate::audit::on_table;

    let (_input, warehouse) = orders(&FIRST_SEGMENTS).await;
    let w = warehouse.path();
    let maintain = async |by_ms: i64| {
        let mut out = Vec::new();
        let clock = floe_core::lock::Clock::Shifted { by_ms };
        floe_cli::compact::compact(w, config(), clock, &mut out).await.unwrap();
        String::from_utf8(out).unwrap()
    };
    // The other engine's appended rows are no committed records (the Iceberg audit says
    // so); the Delta table must hold what the Iceberg table holds all the same.
    let delta_same_rows = async |w: &Path| {
        let audit = floe_cli::audit::local(w, "kafka.orders").await.unwrap();
        assert!(audit.delta.as_ref().is_some_and(|d| d.same_rows()), "{audit:?}");
    };
    let delta_line = async || {
        let status = floe_cli::local::status_in(w, &config()).await.unwrap();
        let orders = status.into_iter().find(|t| t.table == "kafka.orders").unwrap();
        (orders.health.state, orders.health.reason, orders.health.delta.unwrap())
    };

    // An append (three rows again, in Kafka partition 9): mirrored by the next run.
    on_table(w, "kafka.orders", "foreign_write.py", &["append", "3", "9"]);
    maintain(0).await;
    assert_eq!(same_rows(w, "kafka.orders", &[0, 1]).rows, 183);

    // A position delete: the next run gives the file a deletion vector; both readers
    // read the table without the row.
    on_table(w, "kafka.orders", "foreign_delete.py", &["position", "0/5"]);
    maintain(0).await;
    let (state, _, delta) = delta_line().await;
    assert_eq!((state, delta.contains("in step")), ("running", true), "{delta}");
    let deleted = same_rows(w, "kafka.orders", &[0, 1]);
    assert_eq!((deleted.rows, deleted.offsets["0"].contains(&5)), (182, false));
    assert_eq!(deleted.protocol, [3, 7], "deletion vectors are a table feature");
    delta_same_rows(w).await;

    // An overwrite: every row in new files, the old ones removed.
    on_table(w, "kafka.orders", "foreign_write.py", &["overwrite"]);
    maintain(4 * DAY_MS).await;
    let overwritten = same_rows(w, "kafka.orders", &[0, 1]);
    assert_eq!(overwritten.rows, 182);
    delta_same_rows(w).await;

    // An equality delete (rows by value): the rows it matches in each file it applies
    // to become their positions in the file's deletion vector. (PyIceberg applies no
    // equality deletes: foreign_delete.py's reader judges.)
    let location = read_local(w, "kafka.orders").location;
    let judge =
        || -> Expected { serde_json::from_str(&on_table(w, "kafka.orders", "foreign_delete.py", &["read"])).unwrap() };
    let doomed = overwritten.values["0/7"].clone().unwrap();
    let matching = overwritten.values.values().filter(|v| v.as_deref() == Some(doomed.as_str())).count();
    on_table(w, "kafka.orders", "foreign_delete.py", &["equality", "value", &doomed]);
    maintain(0).await;
    let (state, _, delta) = delta_line().await;
    assert_eq!((state, delta.contains("in step")), ("running", true), "{delta}");
    let equality = same_as(&location, &judge(), "kafka.orders", &[0, 1]);
    assert_eq!(equality.rows, 182 - matching);
    assert!(!equality.offsets["0"].contains(&7));
    delta_same_rows(w).await;
    // Compaction days later applies it into new files, which need no vector.
    let out = maintain(8 * DAY_MS).await;
    let (state, reason, delta) = delta_line().await;
    assert_eq!((state, delta.contains("in step")), ("running", true), "{out}\n{reason:?}");
    assert_eq!(same_as(&location, &judge(), "kafka.orders", &[0, 1]).rows, equality.rows);
    delta_same_rows(w).await;
}

/// A Delta-only topic (`formats = ["delta"]`): the Delta table is the only table users
/// see. Its Iceberg table, Floe's record of its commits, is in Floe's own catalog (the
/// SQLite file's `floe-own`), not the user's. delta-rs and DuckDB read what PyIceberg
/// reads of an Iceberg-only run of the same segments, through a second run, a replay
/// and compaction; status and the audit cover it; and a topic whose formats change
/// under the table is suspended, nothing lost, until they are set back.
#[tokio::test]
async fn a_delta_only_topic_has_the_delta_table_alone_with_the_rows_of_an_iceberg_run() {
    use floe_core::catalog::Catalog;
    let samples = support::root().join("examples/segments");
    let delta_only = FloeConfig::parse("[defaults]\nenabled = true\nformats = [\"delta\"]\n").unwrap();
    let (input, warehouse, iceberg) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let runs = async |config: &FloeConfig| {
        let report = floe_cli::local::run_local(input.path(), warehouse.path(), config.clone()).await.unwrap();
        let plain = floe_cli::local::run_local(input.path(), iceberg.path(), FloeConfig::default()).await.unwrap();
        assert!(plain.failed.is_empty(), "{plain:?}");
        report
    };
    let same_as_iceberg = || {
        let expected = read_local(iceberg.path(), "kafka.orders");
        let own = read_local_own(warehouse.path());
        assert_eq!((own.rows, &own.offsets), (expected.rows, &expected.offsets), "Floe's own Iceberg table");
        let delta = read_delta(&["deltalake", &own.location, "--app", "kafka.orders/orders/0"]);
        let duck = read_delta(&["duckdb", &own.location]);
        for (reader, read) in [("delta-rs", &delta), ("DuckDB", &duck)] {
            assert_eq!((read.rows, read.duplicates), (expected.rows, 0), "{reader}");
            assert_eq!((&read.offsets, &read.values), (&expected.offsets, &expected.values), "{reader}");
        }
        assert_eq!(delta.txns["kafka.orders/orders/0"], expected.offsets["0"].last().copied());
        delta
    };
    for rel in FIRST_SEGMENTS {
        copy(&samples, input.path(), rel);
    }
    let report = runs(&delta_only).await;
    assert!(report.failed.is_empty() && report.maintenance_failed.is_empty(), "{report:?}");
    assert_eq!(same_as_iceberg().version, Some(0));
    let user = floe_core::catalog::sqlite::SqliteCatalog::open(&warehouse.path().join("catalog.db"), "floe").unwrap();
    assert_eq!(user.list("kafka").await.unwrap(), vec![], "no Iceberg table in the user's catalog");

    // A new segment, then the same input again (every task a replay): one version more.
    copy(&samples, input.path(), "orders-0/00000000000000000100.log");
    runs(&delta_only).await;
    runs(&delta_only).await;
    let second = same_as_iceberg();
    assert_eq!(second.version, Some(1));
    // Time travel: version 0 reads the first run's rows.
    let back = read_delta(&["deltalake", &read_local_own(warehouse.path()).location, "--version", "0"]);
    assert_eq!((back.rows, back.duplicates), (180, 0));
    assert!(back.offsets["0"].len() < second.offsets["0"].len());
    let status = floe_cli::local::status_in(warehouse.path(), &delta_only).await.unwrap();
    let orders = status.iter().find(|t| t.table == "kafka.orders").expect("status lists the Delta-only table");
    assert_eq!(
        orders.health.delta.as_deref(),
        Some("version 1, 3 files, Delta alone, in step with Floe's Iceberg record")
    );
    audited(warehouse.path()).await;

    // Compaction days later: an OPTIMIZE version, the same rows.
    let clock = floe_core::lock::Clock::Shifted { by_ms: 4 * DAY_MS };
    floe_cli::compact::compact(warehouse.path(), delta_only.clone(), clock, &mut Vec::new()).await.unwrap();
    let compacted = same_as_iceberg();
    assert_eq!(compacted.operations.last().cloned().flatten().as_deref(), Some("OPTIMIZE"));
    audited(warehouse.path()).await;

    // A topic's formats changed under its table (here Iceberg and Delta, then Delta
    // alone, then back): the table keeps its formats and its commits go on, nothing held;
    // status warns until a commit of the formats set back.
    let (input, moved) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(&samples, input.path(), FIRST_SEGMENTS[0]);
    let run = async |config: &FloeConfig| floe_cli::local::run_local(input.path(), moved.path(), config.clone()).await;
    assert!(run(&config()).await.unwrap().failed.is_empty());
    copy(&samples, input.path(), "orders-0/00000000000000000100.log");
    let report = run(&delta_only).await.unwrap();
    assert!(report.failed.is_empty(), "{report:?}");
    let warnings = async |config: &FloeConfig| {
        let status = floe_cli::local::status_in(moved.path(), config).await.unwrap();
        let orders = status.into_iter().find(|t| t.table == "kafka.orders").unwrap();
        assert_eq!((orders.health.state, orders.suspended.as_deref()), ("running", None), "{orders:?}");
        orders.health.warnings
    };
    let warned = warnings(&delta_only).await;
    assert!(warned.iter().any(|w| w.starts_with("formats: the topic lists [delta], but the formats of an existing table do not change: it stays an Iceberg table")), "{warned:?}");
    let read = read_local(moved.path(), "kafka.orders");
    assert_eq!((read.rows, read.duplicates), (160, 0), "still the Iceberg table in the catalog");
    assert_eq!(same_rows(moved.path(), "kafka.orders", &[0]).rows, 160, "its Delta table in step");
    copy(&samples, input.path(), FIRST_SEGMENTS[1]);
    assert!(run(&config()).await.unwrap().failed.is_empty());
    assert_eq!(warnings(&config()).await, Vec::<String>::new(), "the formats set back");
    let read = read_local(moved.path(), "kafka.orders");
    assert_eq!((read.rows, read.duplicates), (240, 0));
    audited(moved.path()).await;

    // A Delta-only topic's table whose topic then lists Iceberg alone: still the Delta
    // table alone, still mirrored (its only table), and status says so.
    let (topic, offsets, _) = crate::committer::payments();
    let (input, alone) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let iceberg_only = FloeConfig::parse("[defaults]\nenabled = true\n").unwrap();
    for (segment, config) in
        [(crate::committer::SEGMENTS[0], &delta_only), (crate::committer::SEGMENTS[1], &iceberg_only)]
    {
        copy(topic.path(), input.path(), segment);
        let report = floe_cli::local::run_local(input.path(), alone.path(), config.clone()).await.unwrap();
        assert!(report.failed.is_empty(), "{report:?}");
    }
    let w = alone.path().canonicalize().unwrap().display().to_string();
    let own = crate::committer::pyiceberg(&["own", &format!("{w}/catalog.db"), &w, "kafka.payments"]);
    let delta = read_delta(&["deltalake", &own.location]);
    assert_eq!((delta.rows, &delta.offsets), (own.rows, &own.offsets), "mirrored though the topic lists no Delta");
    assert!(own.offsets["0"].len() < offsets.len() && own.offsets["0"].len() > 55, "two segments' records");
    let status = floe_cli::local::status_in(alone.path(), &iceberg_only).await.unwrap();
    let payments = status.iter().find(|t| t.table == "kafka.payments").unwrap();
    assert!(payments.health.warnings.iter().any(|w| w.contains("it stays a Delta table alone")), "{payments:?}");
}

/// PyIceberg's read of a local Delta-only topic's `kafka.orders` Iceberg record, in the
/// warehouse's own catalog.
fn read_local_own(warehouse: &Path) -> crate::committer::Read {
    let w = warehouse.canonicalize().unwrap().display().to_string();
    crate::committer::pyiceberg(&["own", &format!("{w}/catalog.db"), &w, "kafka.orders"])
}

/// PyIceberg's read of the Iceberg record of a Delta-only topic's table on moto: the
/// metadata file its lock table row points to.
pub(crate) async fn own_read(aws: &crate::committer::Aws) -> crate::committer::Read {
    let table = aws.table().to_string();
    let dynamodb = aws_sdk_dynamodb::Client::new(&aws.config);
    let key = aws_sdk_dynamodb::types::AttributeValue::S(table.clone());
    let row = dynamodb.get_item().table_name(&aws.locks).key("table", key).send().await.unwrap();
    let pointer = row.item.unwrap()[floe_aws::lock_table_catalog::POINTER].as_s().unwrap().clone();
    crate::committer::pyiceberg(&["static", &support::moto().endpoint, &pointer, &table])
}

/// A Delta-only topic on AWS (moto), through the Lambda handlers: its Iceberg record's
/// pointer is on the table's row of the lock table, no Iceberg table is in Glue, and the
/// Delta table is registered under the table's own name. delta-rs reads every committed
/// record once through a redelivered segment and the compactor's run; PyIceberg reads the
/// same rows from the record's metadata file; `floe aws status` and `audit` cover the
/// table given the lock table, and say they need it without.
#[tokio::test]
async fn on_aws_a_delta_only_topic_keeps_its_iceberg_record_on_the_lock_table() {
    use aws_lambda_events::event::eventbridge::EventBridgeEvent;
    use floe_aws::lambda::{handle_committer_event, handle_compactor_event};
    use floe_core::catalog::Catalog;

    let aws = crate::committer::setup_with("deltaonly", "compaction_window = \"0s\"\nformats = [\"delta\"]\n").await;
    let (dir, offsets, values) = crate::committer::payments();
    let (materializer, committer) = (aws.materializer().await, aws.configured_committer().await);
    let commit = async || {
        let (event, receipts) = aws.receive().await;
        assert!(handle_committer_event(&committer, event, None).await.batch_item_failures.is_empty());
        aws.delete(&receipts).await;
    };
    for key in crate::committer::SEGMENTS {
        aws.materialize(&materializer, dir.path(), key).await;
        commit().await;
    }
    let table = aws.table();
    let own = own_read(&aws).await;
    crate::committer::assert_payments(&own, &offsets, &values);

    let app = format!("{table}/payments/0");
    let same = |delta: &DeltaRead| {
        assert_eq!((delta.rows, delta.duplicates, &delta.offsets), (own.rows, 0, &own.offsets));
        assert_eq!(delta.values, own.values);
        assert_eq!(delta.txns[&app], offsets.last().copied());
    };
    let first = read_on_moto(&own.location, &app);
    same(&first);
    assert_eq!(first.version, Some(2), "a Delta version per commit");
    let glue = aws_sdk_glue::Client::new(&aws.config);
    let user = floe_aws::glue::GlueCatalog::new(glue.clone());
    assert_eq!(user.list(&aws.namespace).await.unwrap(), vec![], "no Iceberg table in Glue");
    let registered = glue.get_table().database_name(&aws.namespace).name("payments").send().await.unwrap();
    let registered = registered.table.unwrap();
    assert_eq!(registered.parameters().unwrap()["table_type"], "DELTA");
    assert_eq!(registered.storage_descriptor().unwrap().location(), Some(own.location.as_str()));

    // The first segment delivered again: nothing new; then the compactor's run: OPTIMIZE.
    aws.materialize(&materializer, dir.path(), crate::committer::SEGMENTS[0]).await;
    commit().await;
    assert_eq!(read_on_moto(&own.location, &app).version, Some(2));
    let text = std::fs::read_to_string(support::root().join(crate::maintenance::SCHEDULED_EVENT)).unwrap();
    let scheduled: EventBridgeEvent<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let response = handle_compactor_event(&aws.compactor().await, scheduled, None).await;
    assert!(response.failed.is_empty() && response.compacted.len() == 1, "{response:?}");
    commit().await;
    let compacted = read_on_moto(&own.location, &app);
    same(&compacted);
    assert_eq!(compacted.operations.last().cloned().flatten().as_deref(), Some("OPTIMIZE"));

    // The operator's commands, given the lock table; refused, saying so, without it.
    let config = Some(aws.config_file.to_str().unwrap());
    let (_, tables) = floe_cli::aws::stack_tables(&aws.config, &aws.s3, config, Some(&aws.locks)).await.unwrap();
    let status = floe_cli::aws::status_of(&aws.config, &aws.locks, &tables).await.unwrap();
    let row = status.iter().find(|t| t.table == table.to_string()).expect("status lists the Delta-only table");
    assert_eq!(
        row.health.delta.as_deref(),
        Some("version 3, 1 files, Delta alone, in step with Floe's Iceberg record"),
        "{row:?}"
    );
    let audit = floe_cli::audit::stack_table(&tables, &table.to_string()).await.unwrap();
    assert!(audit.exactly_once && audit.delta.as_ref().is_some_and(|d| d.same_rows() && d.version == 3), "{audit:?}");
    let refused = floe_cli::aws::stack_tables(&aws.config, &aws.s3, config, None).await.err().unwrap().to_string();
    assert!(refused.contains("--lock-table"), "{refused}");
}

/// make_topic.py's `payments` segments (a transaction spanning them) arriving in every
/// order, each run twice (every task replayed), with both formats and with Delta alone:
/// delta-rs reads each committed record once, the transaction resolved, its last
/// offset in the partition's `txn`.
#[tokio::test]
async fn segments_in_any_order_each_replayed_reach_the_delta_table_once() {
    use crate::committer::{SEGMENTS, payments, permutations, pyiceberg};
    let (topic, offsets, values) = payments();
    for (formats, catalog) in [("[\"iceberg\", \"delta\"]", "sql"), ("[\"delta\"]", "own")] {
        let config = FloeConfig::parse(&format!("[defaults]\nenabled = true\nformats = {formats}\n")).unwrap();
        for order in permutations(SEGMENTS.len()) {
            let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
            for &i in &order {
                copy(topic.path(), input.path(), SEGMENTS[i]);
                for _ in 0..2 {
                    let report = floe_cli::local::run_local(input.path(), warehouse.path(), config.clone()).await;
                    let report = report.unwrap();
                    assert!(report.failed.is_empty(), "{formats} {order:?}: {report:?}");
                }
            }
            let w = warehouse.path().canonicalize().unwrap().display().to_string();
            let iceberg = pyiceberg(&[catalog, &format!("{w}/catalog.db"), &w, "kafka.payments"]);
            let delta = read_delta(&["deltalake", &iceberg.location, "--app", "kafka.payments/payments/0"]);
            let at = format!("{formats} in the order {order:?}");
            assert_eq!((&delta.offsets["0"], delta.duplicates), (&offsets, 0), "{at}");
            for o in &offsets {
                assert_eq!(delta.values[&format!("0/{o}")].as_deref(), Some(values[&o.to_string()].as_str()), "{at}");
            }
            assert_eq!(delta.txns["kafka.payments/payments/0"], Some(99), "{at}");
        }
    }
}

/// An upsert topic's Delta table, beside the Iceberg table (format 2: position delete
/// files) and alone (format 3: Iceberg deletion vectors): the rows each upsert's deletes
/// remove are Delta deletion vectors, so delta-rs and DuckDB read each key's latest
/// record once, as make_upsert.py's model says, after the commits and after compaction.
#[tokio::test]
async fn an_upsert_topic_s_delta_table_holds_each_key_s_latest_record_once() {
    use crate::upsert::{data, model, segments};
    use floe_core::delta::actions::Action;
    let model = model("accounts.json");
    let all = segments();
    let both = "[\"iceberg\", \"delta\"]";
    // In time order (each record superseding rows of files the Delta table has), and shuffled.
    let (in_order, shuffled) = ([0, 3, 1, 4, 2, 5], [2, 3, 0, 5, 1, 4]);
    for (formats, version, catalog, order) in
        [(both, 2, "sql", in_order), (both, 2, "sql", shuffled), ("[\"delta\"]", 3, "own", in_order)]
    {
        let toml = format!(
            "[[topics]]\ntopic = \"accounts\"\nvalue_format = \"json\"\nmode = \"upsert\"\nformats = {formats}\n\
             format_version = {version}\n"
        );
        let config = FloeConfig::parse(&toml).unwrap();
        let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for i in order {
            copy(data(), input.path(), &all[i]);
            let report = floe_cli::local::run_local(input.path(), warehouse.path(), config.clone()).await.unwrap();
            assert!(report.failed.is_empty() && report.maintenance_failed.is_empty(), "{report:?}");
        }
        let w = warehouse.path().canonicalize().unwrap().display().to_string();
        let location =
            crate::committer::pyiceberg(&[catalog, &format!("{w}/catalog.db"), &w, "kafka.accounts"]).location;
        let as_modelled = |when: &str| {
            for reader in ["deltalake", "duckdb"] {
                let read = read_delta(&[reader, &location]);
                let what = format!("{formats} in the order {order:?}, {reader}, {when}");
                assert_eq!((read.duplicates, read.rows), (0, model.keys), "{what}");
                assert_eq!(read.offsets, model.live, "{what}");
                if reader == "deltalake" {
                    assert_eq!(read.rows_json.len(), model.values.len(), "{what}");
                    for (at, value) in &model.values {
                        assert_eq!(read.rows_json.get(at), Some(value), "{what}: {at}");
                    }
                }
            }
        };
        as_modelled("after the commits");
        // Later records superseded rows of files the Delta table had: such a file was
        // removed with its old vector and added again with a new one. That version reads
        // as the Iceberg snapshot it mirrors (time travel on both sides).
        let log = DeltaSnapshot::read(&LocalLogStore, &location).await.unwrap().unwrap();
        let readded = (0..=log.version).find_map(|v| {
            let text = std::fs::read_to_string(format!("{location}/_delta_log/{v:020}.json")).unwrap();
            let actions = floe_core::delta::actions::from_lines(&text).unwrap();
            let removed: Vec<&str> = actions
                .iter()
                .filter_map(|a| if let Action::Remove(r) = a { Some(r.path.as_str()) } else { None })
                .collect();
            let again = actions.iter().any(|a| matches!(a, Action::Add(add) if removed.contains(&add.path.as_str())));
            let mirrored = actions.iter().find_map(|a| match a {
                Action::CommitInfo(info) => info["floe.iceberg.snapshot-id"].as_i64(),
                _ => None,
            });
            again.then(|| (v, mirrored.unwrap()))
        });
        let (version, snapshot) = readded.unwrap_or_else(|| panic!("{formats} in the order {order:?}: no new vector"));
        let then = read_delta(&["deltalake", &location, "--version", &version.to_string()]);
        let db = format!("{w}/catalog.db");
        let iceberg =
            crate::committer::pyiceberg(&[catalog, &db, &w, "kafka.accounts", &format!("snapshot={snapshot}")]);
        assert_eq!(
            (then.rows, then.duplicates, &then.offsets),
            (iceberg.rows, 0, &iceberg.offsets),
            "version {version}"
        );
        let audit = floe_cli::audit::local(warehouse.path(), "kafka.accounts").await.unwrap();
        assert!(audit.exactly_once && audit.delta.as_ref().is_some_and(|d| d.same_rows()), "{audit:?}");
        let clock = floe_core::lock::Clock::Shifted { by_ms: 4 * DAY_MS };
        floe_cli::compact::compact(warehouse.path(), config, clock, &mut Vec::new()).await.unwrap();
        as_modelled("after compaction");
        let audit = floe_cli::audit::local(warehouse.path(), "kafka.accounts").await.unwrap();
        assert!(audit.exactly_once && audit.delta.as_ref().is_some_and(|d| d.same_rows()), "{audit:?}");
    }
}

/// The Iceberg table of a Delta topic dropped and made again under its name, at the same
/// location: the Delta table mirrors the old one (its id is that table's UUID), so the new
/// table's mirror stops, named in status, rather than replace the Delta table's files
/// with the new table's.
#[tokio::test]
async fn an_iceberg_table_made_again_does_not_take_over_its_delta_table() {
    let (input, warehouse) = orders(&FIRST_SEGMENTS).await;
    let w = warehouse.path();
    let location = read_local(w, "kafka.orders").location;
    let script = format!(
        "from pyiceberg.catalog.sql import SqlCatalog\n\
         SqlCatalog('floe', uri='sqlite:///{}/catalog.db').drop_table('kafka.orders')\n",
        w.canonicalize().unwrap().display()
    );
    let out = std::process::Command::new(support::python()).args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let samples = support::root().join("examples/segments");
    copy(&samples, input.path(), "orders-0/00000000000000000100.log");
    floe_cli::local::run_local(input.path(), w, config()).await.unwrap();
    let remade = read_local(w, "kafka.orders");
    assert_eq!((remade.location.as_str(), remade.rows), (location.as_str(), 240), "a new table, every segment again");
    let status = floe_cli::local::status_in(w, &config()).await.unwrap();
    let orders = status.iter().find(|t| t.table == "kafka.orders").unwrap();
    let reason = orders.health.reason.clone().unwrap_or_default();
    assert!(reason.contains("the Delta table mirrors the Iceberg table"), "{orders:?}");
    let delta = read_delta(&["deltalake", &location]);
    assert_eq!((delta.rows, delta.version), (180, Some(0)), "the Delta table as it was");
}

/// `floe local table` of a table with a Delta table beside it, and of a Delta-only
/// topic's: the Delta queries it prints (DuckDB's `delta_scan`, delta-rs) read the rows
/// PyIceberg reads of the Iceberg table (of Floe's record, for the Delta-only one), and
/// a Delta-only table is given no Iceberg query.
#[tokio::test]
async fn floe_local_table_gives_the_delta_queries_and_a_delta_only_table_no_iceberg_one() {
    use crate::querying::{Rows, read};
    let (_input, both) = orders(&FIRST_SEGMENTS).await;
    let (input, alone) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let samples = support::root().join("examples/segments");
    for rel in FIRST_SEGMENTS {
        copy(&samples, input.path(), rel);
    }
    let delta_only = FloeConfig::parse("[defaults]\nenabled = true\nformats = [\"delta\"]\n").unwrap();
    floe_cli::local::run_local(input.path(), alone.path(), delta_only).await.unwrap();
    for (warehouse, judge, only) in [
        (both.path(), read_local(both.path(), "kafka.orders"), false),
        (alone.path(), read_local_own(alone.path()), true),
    ] {
        let access = floe_cli::table::access(warehouse, "kafka.orders").await.unwrap();
        assert_eq!(access.delta_only, only);
        let delta = access.delta.clone().expect("the Delta queries");
        let expected = Rows { rows: judge.rows, offsets: judge.offsets, duplicates: 0, values: judge.values };
        assert_eq!(read("duckdb-line", &delta.duckdb), Ok(expected.clone()), "the DuckDB line");
        assert_eq!(read("pyiceberg-lines", &delta.python), Ok(expected), "the delta-rs lines");
        let mut printed = Vec::new();
        floe_cli::table::print(&access, &mut printed).unwrap();
        let printed = String::from_utf8(printed).unwrap();
        assert!(printed.contains("delta_scan") && printed.contains("from deltalake import"), "{printed}");
        assert_eq!(printed.contains("iceberg_scan") || printed.contains("PyIceberg"), !only, "{printed}");
    }
}
