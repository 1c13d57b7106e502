//! The local walkthrough of docs/lambdas.md ("Running them locally"), run as a user runs
//! it: `scripts/lambda-local.sh` starts moto and `cargo lambda watch`, invokes the three
//! functions through the Lambda runtime API with the sample events of `events/`, drains
//! the task queue into the committer as SQS events, and reads the tables with PyIceberg
//! through the Glue API. Nothing here calls a handler in-process.
//!
//! `cargo lambda watch` builds the functions as `cargo build --workspace --bins` does
//! (its `cargo run --bin <function>` resolves features over the whole workspace), in the
//! tests' target folder: scripts/test.sh builds them before `cargo test`, so here the
//! build finds them up to date.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support;

#[test]
fn the_walkthrough_commits_every_sample_record_once_through_the_three_functions_under_cargo_lambda_watch() {
    let work = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let run = Script::run(work.path());
    eprintln!("scripts/lambda-local.sh: {:.0?}", started.elapsed());
    let log = |name: &str| std::fs::read_to_string(work.path().join(name)).unwrap_or_default();
    assert!(run.success, "scripts/lambda-local.sh failed:\n{}\n--- watch.log:\n{}", run.output, log("watch.log"));
    let json = |name: &str| -> Value {
        serde_json::from_str(&log(name)).unwrap_or_else(|e| panic!("{name}: {e}\n{}", run.output))
    };

    // Every record of the uploaded segments is in its table exactly once.
    let tables = json("tables.json");
    assert_eq!(offsets(&tables["kafka.orders"]), BTreeMap::from([("0", 0..160), ("1", 0..80)]), "{tables}");
    assert_eq!(offsets(&tables["kafka.page_views"]), BTreeMap::from([("0", 0..200)]), "{tables}");
    assert_eq!(
        (tables["kafka.orders"]["rows"].as_u64(), tables["kafka.page_views"]["rows"].as_u64()),
        (Some(240), Some(200))
    );
    // The backfill (step 6) handed the bucket's segments to the materializer through
    // the Invoke API of `cargo lambda watch`: the shipments segment no event announced is
    // a table now, once; the two segments the tables already held were not handed.
    assert_eq!(offsets(&tables["kafka.shipments"]), BTreeMap::from([("0", 0..120)]), "{tables}");
    assert_eq!(tables["kafka.shipments"]["rows"].as_u64(), Some(120));
    // `shipments` is Delta alone: the rows are delta-rs's read of the Delta table Glue
    // has under the table's name, whose last version is the compaction's.
    let shipments = &tables["kafka.shipments"]["delta"];
    assert_eq!(shipments["operations"].as_array().unwrap().last().unwrap(), "OPTIMIZE", "{tables}");
    let backfill = log("backfill.out");
    assert!(
        backfill.contains("backfill of s3://kafka-tiered: 6 handed, 2 already in the table"),
        "the five segments of examples/segments and the three Debezium ones:\n{backfill}"
    );
    // The Debezium topic's upsert table: each live row's latest `after` image, once;
    // deleted rows gone, through the three functions (and the compactor's rewrite).
    let model: Value = serde_json::from_str(&log("debezium/customers.json")).unwrap();
    let customers = &tables["kafka.dbserver1_inventory_customers"];
    let live: Vec<i64> = model["live"]["0"].as_array().unwrap().iter().map(|o| o.as_i64().unwrap()).collect();
    let read: Vec<i64> = customers["offsets"]["0"].as_array().unwrap().iter().map(|o| o.as_i64().unwrap()).collect();
    assert_eq!(read, live, "{customers}");
    assert_eq!(customers["values"], model["values"], "{customers}");
    let operations = customers["snapshots"].as_array().unwrap();
    assert!(operations.contains(&serde_json::json!("overwrite")), "{customers}");
    // Its Delta table: the upserts' deletes as deletion vectors, read by delta-rs.
    let delta = &customers["delta"];
    assert_eq!((&delta["offsets"], &delta["rows"]), (&customers["offsets"], &customers["rows"]), "{customers}");
    assert!(delta["vectors_added"].as_u64().is_some_and(|n| n > 0), "{customers}");

    // The materializer queued one task per segment, and ignored the test event.
    let queued = |event: &str| json(&format!("materializer-{event}.response.json"))["queued"].as_array().unwrap().len();
    let segments = ["eventbridge-object-created", "s3-object-created", "sqs-s3-notification"].map(queued);
    assert_eq!(segments, [1, 2, 1]);
    assert_eq!(json("materializer-s3-test-event.response.json")["ignored"], serde_json::json!(["s3:TestEvent"]));

    // The compactor compacted partition 0 of orders (its two segments' files) into one
    // file, and the Debezium table's three files (applying its deletes) into one; the
    // lone fresh files (Snappy: orders' partition 1, page_views, shipments) each into a
    // zstd file; the committer committed their tasks: each table's last snapshot replaces.
    let compactor = json("compactor.response.json");
    assert_eq!(compactor["failed"], serde_json::json!([]), "{compactor}");
    let compacted = |table: &str| {
        let run = compactor["compacted"].as_array().unwrap().iter().find(|c| c["table"] == table);
        run.map(|c| (c["files_in"].as_u64().unwrap(), c["files_out"].as_u64().unwrap()))
    };
    assert_eq!(compacted("kafka.orders"), Some((3, 2)), "{compactor}");
    assert_eq!(compacted("kafka.dbserver1_inventory_customers"), Some((3, 1)), "{compactor}");
    assert_eq!(compacted("kafka.page_views"), Some((1, 1)), "{compactor}");
    assert_eq!(compacted("kafka.shipments"), Some((1, 1)), "{compactor}");
    let orders = &tables["kafka.orders"];
    assert_eq!(orders["snapshots"].as_array().unwrap().last().unwrap(), "replace", "{orders}");
    assert_eq!(orders["data_files"], 2, "{orders}");
    // `orders` is a Delta topic too: delta-rs reads the same records from its Delta table,
    // whose last version is the compaction's (OPTIMIZE: no data changed).
    let delta = &orders["delta"];
    assert_eq!((&delta["offsets"], &delta["rows"]), (&orders["offsets"], &orders["rows"]), "{orders}");
    assert_eq!(delta["operations"].as_array().unwrap().last().unwrap(), "OPTIMIZE", "{orders}");
    assert!(tables["kafka.page_views"].get("delta").is_none(), "not a Delta topic: {tables}");
    assert_eq!(customers["snapshots"].as_array().unwrap().last().unwrap(), "replace", "{customers}");

    // Every batch the committer took was committed whole (no batchItemFailures), within
    // its timeout; the last ones were the five CompactionTasks, as real SQS events.
    let batches = committer_batches(&work.path().join("floe-drain"));
    assert!(batches.len() >= 2, "{batches:?}");
    for batch in &batches {
        assert_eq!(batch.response["batchItemFailures"], serde_json::json!([]), "{batch:?}");
        assert!(batch.seconds < 300.0, "{batch:?}");
    }
    let compaction = |record: &serde_json::Value| {
        assert_eq!(record["eventSource"], "aws:sqs");
        let body = record["body"].as_str().unwrap();
        matches!(floe_core::task::Task::from_json(body.as_bytes()), Ok(floe_core::task::Task::Compaction(_)))
    };
    let records = |batch: &Batch| batch.event["Records"].as_array().unwrap().clone();
    let last = records(batches.last().unwrap());
    assert!(last.iter().all(compaction), "{last:?}");
    let mut groups: Vec<String> = batches
        .iter()
        .flat_map(records)
        .filter(compaction)
        .map(|r| r["attributes"]["MessageGroupId"].as_str().unwrap().to_string())
        .collect();
    groups.sort_unstable();
    let expected =
        ["kafka.dbserver1_inventory_customers", "kafka.orders", "kafka.orders", "kafka.page_views", "kafka.shipments"];
    assert_eq!(groups, expected);

    // The functions ran under `cargo lambda watch`, each started by it through `cargo run`.
    let watch = log("watch.log");
    for function in ["materializer", "committer", "compactor"] {
        assert!(watch.contains(&format!("--bin\", \"{function}\"")), "{function} not started by watch:\n{watch}");
    }
    // watch hands no real deadline: each committer and compactor invocation warned once
    // (one warning per request id) and worked within FLOE_FUNCTION_TIMEOUT_SECONDS (the
    // defaults: 300 and 900).
    let warned = |budget: u64| {
        let requests: Vec<String> = watch
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["fields"]["deadline_ms"] == 600000 && l["fields"]["budget_seconds"] == budget)
            .map(|l| l["spans"][0]["requestId"].as_str().unwrap_or_default().to_string())
            .collect();
        let distinct: std::collections::BTreeSet<&String> = requests.iter().collect();
        assert_eq!(distinct.len(), requests.len(), "a warning twice in one invocation: {requests:?}");
        requests.len()
    };
    assert_eq!((warned(300), warned(900)), (batches.len(), 1), "{watch}");
}

/// A table's offsets by partition as read by PyIceberg, each once (the lists are sorted,
/// so a duplicate would break the range).
fn offsets(table: &Value) -> BTreeMap<&str, std::ops::Range<i64>> {
    let by_partition = table["offsets"].as_object().unwrap_or_else(|| panic!("no table: {table}"));
    by_partition
        .iter()
        .map(|(partition, offsets)| {
            let offsets: Vec<i64> = offsets.as_array().unwrap().iter().map(|o| o.as_i64().unwrap()).collect();
            let range = offsets[0]..offsets[offsets.len() - 1] + 1;
            assert_eq!(offsets, range.clone().collect::<Vec<_>>(), "partition {partition}: not each offset once");
            (partition.as_str(), range)
        })
        .collect()
}

/// One SQS event the drain sent the committer, and its answer.
#[derive(Debug)]
struct Batch {
    event: Value,
    response: Value,
    seconds: f64,
}

fn committer_batches(work: &Path) -> Vec<Batch> {
    let read = |path: PathBuf| -> Value { serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap() };
    (1..)
        .map(|n| work.join(format!("committer-{n}.event.json")))
        .take_while(|path| path.exists())
        .enumerate()
        .map(|(i, event)| {
            let answer = read(work.join(format!("committer-{}.response.json", i + 1)));
            Batch {
                event: read(event),
                response: answer["response"].clone(),
                seconds: answer["seconds"].as_f64().unwrap(),
            }
        })
        .collect()
}

/// `scripts/lambda-local.sh` run to its end, in a process group of its own that is
/// stopped if the test ends first.
struct Script {
    success: bool,
    output: String,
}

impl Script {
    fn run(work: &Path) -> Script {
        let output = work.join("script.log");
        let file = std::fs::File::create(&output).unwrap();
        let mut command = Command::new(support::root().join("scripts/lambda-local.sh"));
        command
            .env("FLOE_PYTHON", support::python())
            .env("MOTO_PORT", free_port())
            .env("LAMBDA_PORT", free_port())
            .env("LAMBDA_LOCAL_DIR", work)
            .env("CARGO_TARGET_DIR", target_dir())
            .stdout(file.try_clone().unwrap())
            .stderr(file);
        // What cargo sets for a test process, and build scripts' `rerun-if-env-changed`
        // name (ring's names CARGO_PKG_NAME): left, the script's cargo would rebuild ring
        // and everything above it.
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            let set_by_cargo = ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_CRATE_", "CARGO_BIN_", "CARGO_PRIMARY_"]
                .iter()
                .any(|prefix| name.starts_with(prefix))
                || ["CARGO_TARGET_TMPDIR", "CARGO_RUSTC_CURRENT_DIR", "OUT_DIR"].contains(&&*name);
            if set_by_cargo {
                command.env_remove(&*name);
            }
        }
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = Group(command.spawn().expect("running scripts/lambda-local.sh"));
        let status = child.0.wait().unwrap();
        Script { success: status.success(), output: std::fs::read_to_string(output).unwrap() }
    }
}

/// A process leading its own group; the group is terminated when this is dropped.
struct Group(std::process::Child);

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: kill(2) with the process group this test created, and a plain signal.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

fn free_port() -> String {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string()
}

/// The target folder this test binary was built in (`<target>/debug/deps/integration-…`):
/// the functions are built there too, with the tests' profile.
fn target_dir() -> PathBuf {
    std::env::current_exe().unwrap().ancestors().nth(3).unwrap().to_path_buf()
}
