//! The orphan sweep on a local warehouse (SQLite catalog and registry), judged by
//! PyIceberg: what only expired snapshots read is deleted, what retained snapshots read
//! (time travel included) and what queued tasks name is kept.

use std::collections::HashSet;
use std::path::Path;

use floe_core::catalog::sqlite::SqliteCatalog;
use floe_core::committer::TaskResult;
use floe_core::config::FloeConfig;
use floe_core::lock::TableLocks;
use floe_core::lock::sqlite::SqliteLocks;
use floe_core::maintenance::rewrite::compact;
use floe_core::maintenance::sweep::{Sweep, SweepReport};
use floe_core::maintenance::{HeldTask, TableRegistry};
use floe_core::queue::{InProcessQueue, TaskQueue};
use floe_core::storage::{LocalFiles, local_file_io};
use floe_core::table::compaction::CompactionPolicy;
use floe_core::table::{LoadedTable, TableName};
use floe_core::task::Task;

use crate::committer::{Read, copy, copy_of, local_committer, local_run, materialize, pyiceberg, read_local};
use crate::support;

const GRACE_MS: i64 = 60 * 60 * 1000;
const DAY_MS: i64 = 24 * 60 * 60 * 1000;
const ORDERS_0: &str = "orders-0/00000000000000000000.log";
const ORDERS_1: &str = "orders-1/00000000000000000000.log";

fn orders() -> TableName {
    TableName::parse("kafka.orders").unwrap()
}

fn wall() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// The warehouse's catalog and registry (the lock store beside it).
fn open(warehouse: &Path) -> (SqliteCatalog, SqliteLocks) {
    let catalog = SqliteCatalog::open(&warehouse.join("catalog.db"), "floe").unwrap();
    let locks = SqliteLocks::new(catalog.connection()).unwrap();
    (catalog, locks)
}

async fn load(warehouse: &Path) -> LoadedTable {
    let (catalog, _) = open(warehouse);
    floe_core::table::load(&catalog, &local_file_io(), &orders()).await.unwrap().unwrap()
}

/// Sweeps kafka.orders as it is now in the catalog, on the clock `now_ms`.
async fn sweep(warehouse: &Path, now_ms: i64) -> SweepReport {
    let (_, locks) = open(warehouse);
    let loaded = load(warehouse).await;
    let file_io = local_file_io();
    let sweep = Sweep {
        file_io: &file_io,
        files: &LocalFiles,
        registry: &locks,
        task_store: None,
        grace_ms: GRACE_MS,
        delta_log: &floe_core::delta::LocalLogStore,
    };
    sweep.table(&orders(), &loaded.metadata, &loaded.pointer.metadata_location, now_ms).await.unwrap()
}

/// PyIceberg's read of kafka.orders at `snapshot_id` (time travel).
fn read_at(warehouse: &Path, snapshot_id: i64) -> Read {
    let w = warehouse.canonicalize().unwrap().display().to_string();
    pyiceberg(&["sql", &format!("{w}/catalog.db"), &w, "kafka.orders", &format!("snapshot={snapshot_id}")])
}

/// Sets table properties in a commit of its own (no snapshot).
async fn set_properties(warehouse: &Path, properties: &[(&str, &str)]) {
    let loaded = load(warehouse).await;
    let location = loaded.pointer.metadata_location.clone();
    let properties = properties.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let metadata = loaded
        .metadata
        .into_builder(Some(location.clone()))
        .set_properties(properties)
        .unwrap()
        .build()
        .unwrap()
        .metadata;
    let next =
        floe_core::table::parse_metadata_location(&location).unwrap().with_next_version().with_new_metadata(&metadata);
    metadata.write_to(&local_file_io(), &next).await.unwrap();
    let (catalog, _) = open(warehouse);
    use floe_core::catalog::Catalog;
    catalog.swap(&orders(), &loaded.pointer, &metadata, &next.to_string()).await.unwrap();
}

fn exists(path: &str) -> bool {
    Path::new(path.strip_prefix("file://").unwrap_or(path)).exists()
}

#[tokio::test]
async fn the_sweep_deletes_what_only_expired_snapshots_read_and_time_travel_still_reads() {
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(&support::root().join("examples/segments"), input.path(), ORDERS_1);
    local_run(input.path(), warehouse.path()).await;
    set_properties(
        warehouse.path(),
        &[("floe.history.max-snapshots", "3"), ("history.expire.min-snapshots-to-keep", "1")],
    )
    .await;
    let committer = local_committer(warehouse.path());
    let template = materialize(FloeConfig::default(), input.path(), &committer.warehouse, ORDERS_1).await;
    let current_list =
        async || load(warehouse.path()).await.metadata.current_snapshot().unwrap().manifest_list().to_string();
    // The segment, two copies, and a compaction of the three: these snapshots expire.
    let mut expiring = vec![current_list().await];
    for i in 1..=2 {
        assert_eq!(committer.commit(&[copy_of(&template, i)], None).await.results[0].1, TaskResult::Committed);
        expiring.push(current_list().await);
    }
    let policy = CompactionPolicy { target: 1 << 30, window_ms: 0 };
    let loaded = load(warehouse.path()).await;
    let mut compactions = compact(&committer.file_io, &orders(), &loaded.metadata, policy, wall()).await.unwrap();
    assert_eq!(compactions.len(), 1, "one bin");
    let compaction = compactions.remove(0);
    assert_eq!(compaction.removed.len(), 3);
    let task = Task::Compaction(Box::new(compaction.clone()));
    assert_eq!(committer.commit_all(&[task], None).await.results[0].1, TaskResult::Committed);
    expiring.push(current_list().await);
    // Three more copies: only they are retained.
    for i in 3..=5 {
        assert_eq!(committer.commit(&[copy_of(&template, i)], None).await.results[0].1, TaskResult::Committed);
    }
    let metadata = load(warehouse.path()).await.metadata;
    assert_eq!(metadata.snapshots().len(), 3);
    let oldest = metadata.snapshots().min_by_key(|s| s.sequence_number()).unwrap().snapshot_id();
    let (before, past_before) = (read_local(warehouse.path(), "kafka.orders"), read_at(warehouse.path(), oldest));
    assert_eq!((before.rows, past_before.rows), (6 * 80, 4 * 80));

    let report = sweep(warehouse.path(), wall() + GRACE_MS + DAY_MS).await;
    let removed: HashSet<&str> = report.removed.iter().map(String::as_str).collect();
    for path in compaction.removed.iter().chain(&expiring) {
        assert!(removed.contains(path.as_str()) && !exists(path), "{path} is left: {removed:?}");
    }
    // The compaction's output, added by an expired snapshot, is read by the retained ones.
    assert!(compaction.added.iter().all(|f| exists(f.path())));
    assert_eq!(read_local(warehouse.path(), "kafka.orders"), before);
    assert_eq!(read_at(warehouse.path(), oldest), past_before);
    let (_, locks) = open(warehouse.path());
    assert_eq!(locks.status(&orders()).await.unwrap().orphans_removed, report.removed.len() as u64);
}

#[tokio::test]
async fn a_suspended_table_s_queued_segment_survives_the_sweep_and_commits_later() {
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let samples = support::root().join("examples/segments");
    copy(&samples, input.path(), ORDERS_1);
    local_run(input.path(), warehouse.path()).await;
    // A new segment is materialized and its task queued, its files held first; the table
    // is suspended, so the task waits in the queue for weeks.
    copy(&samples, input.path(), ORDERS_0);
    let committer = local_committer(warehouse.path());
    let task = materialize(FloeConfig::default(), input.path(), &committer.warehouse, ORDERS_0).await;
    let files: Vec<String> = task.data_files.iter().map(|f| f.path().to_string()).collect();
    assert!(!files.is_empty());
    let (_, locks) = open(warehouse.path());
    let held = HeldTask { task_id: task.task_id.clone(), files: files.clone(), held_at_ms: wall(), offsets: None };
    locks.hold_task(&orders(), &held).await.unwrap();
    let queue = InProcessQueue::default();
    queue.send(&Task::Data(Box::new(task.clone()))).await.unwrap();
    locks.set_suspended("kafka.orders", Some("a bad record")).await.unwrap();

    let weeks_later = wall() + 30 * DAY_MS;
    let report = sweep(warehouse.path(), weeks_later).await;
    assert_eq!(report.kept_held, files.len(), "{report:?}");
    assert!(files.iter().all(|f| exists(f)), "{report:?}");

    // Resumed: the committer commits the task, then releases it; its files are referenced.
    locks.set_suspended("kafka.orders", None).await.unwrap();
    let results = committer.commit_all(&queue.drain(), None).await.results;
    assert_eq!(results, [(task.task_id.clone(), TaskResult::Committed)]);
    locks.release_tasks(&orders(), std::slice::from_ref(&task.task_id)).await.unwrap();
    let report = sweep(warehouse.path(), weeks_later).await;
    assert!(report.removed.iter().all(|r| !files.contains(r)), "{report:?}");
    assert!(files.iter().all(|f| exists(f)));
    let read = read_local(warehouse.path(), "kafka.orders");
    assert_eq!((read.rows, read.duplicates), (180, 0));
    assert_eq!(read.offsets["0"], (0..100).collect::<Vec<_>>());
}

/// `floe local compact` (expiry and the orphan sweep) on a clock past `orphan_grace`.
async fn maintain_days_later(warehouse: &Path, days: i64) {
    let mut out = Vec::new();
    let clock = floe_core::lock::Clock::Shifted { by_ms: days * DAY_MS };
    let now = clock.now_ms();
    floe_cli::compact::compact(warehouse, FloeConfig::default(), clock, &mut out).await.unwrap();
    let (_, locks) = open(warehouse);
    let swept = locks.status(&TableName::parse("kafka.payments").unwrap()).await.unwrap().last_sweep_ms;
    assert!(swept.is_some_and(|at| at >= now), "{}", String::from_utf8_lossy(&out));
}

/// The table state the current snapshot names, and the files pending in it.
fn pending_files(warehouse: &Path) -> (String, Vec<String>) {
    let read = read_local(warehouse, "kafka.payments");
    let state = read.summary.get("floe.state").cloned().expect("a table state");
    let text = std::fs::read(state.strip_prefix("file://").unwrap_or(&state)).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&text).unwrap();
    let files = json["pending"].as_array().unwrap().iter().flat_map(|e| e["transaction"]["files"].as_array().unwrap());
    (state.clone(), files.map(|f| f["data_file"]["file_path"].as_str().unwrap().to_string()).collect())
}

/// Issue 30 item 1: what the table state names outlives the orphan sweep. The payments
/// topic (make_topic.py): segment A ends inside producer 7's transaction, whose COMMIT is
/// in segment B. In the order A, maintenance 4 days later (past the 3 days of
/// `orphan_grace`), B, C: the open transaction's state and file survive. In the order B,
/// C, maintenance, A: B's COMMIT marker stays in the state (A may hold more of its
/// transaction) and survives, so A's part commits. Every committed record lands once.
#[tokio::test]
async fn the_table_state_outlives_maintenance_and_every_committed_record_lands() {
    use crate::committer::{SEGMENTS, assert_payments, payments};
    let (topic, offsets, values) = payments();
    for (first, rest) in [(vec![0], vec![1, 2]), (vec![1, 2], vec![0])] {
        let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let run = async |segments: &[usize]| {
            for &i in segments {
                copy(topic.path(), input.path(), SEGMENTS[i]);
            }
            let report = local_run(input.path(), warehouse.path()).await;
            assert!(report.failed.is_empty(), "{:?}", report.failed);
        };
        run(&first).await;
        let (state, files) = pending_files(warehouse.path());
        assert_eq!(files.len(), usize::from(first == [0]), "A's open transaction is pending");
        maintain_days_later(warehouse.path(), 4).await;
        for path in files.iter().chain([&state]) {
            assert!(exists(path), "{path} was swept");
        }
        let shown = floe_cli::local::status(warehouse.path()).await.unwrap();
        assert_eq!(shown[0].problem, None);
        run(&rest).await;
        assert_payments(&read_local(warehouse.path(), "kafka.payments"), &offsets, &values);
    }
}

/// A table whose state file is gone cannot commit: `floe local status` says so, naming it.
#[tokio::test]
async fn status_shows_a_table_whose_state_cannot_be_read() {
    use crate::committer::{SEGMENTS, payments};
    let (topic, _, _) = payments();
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(topic.path(), input.path(), SEGMENTS[0]);
    local_run(input.path(), warehouse.path()).await;
    let (state, _) = pending_files(warehouse.path());
    std::fs::remove_file(state.strip_prefix("file://").unwrap_or(&state)).unwrap();
    let shown = floe_cli::local::status(warehouse.path()).await.unwrap();
    let problem = shown[0].problem.as_deref().expect("a problem");
    assert!(problem.contains(&state) && problem.contains("cannot commit"), "{problem}");
    // And the next run fails naming it.
    copy(topic.path(), input.path(), SEGMENTS[1]);
    let report = floe_cli::local::run_local(input.path(), warehouse.path(), FloeConfig::default()).await.unwrap();
    assert!(report.failed.iter().any(|f| f.contains(&state)), "{:?}", report.failed);
}

/// A queue that drops a task id it took before, as SQS FIFO drops one sent again within
/// its five-minute deduplication window.
#[derive(Default)]
struct DedupQueue {
    seen: std::sync::Mutex<HashSet<String>>,
    inner: InProcessQueue,
}

#[async_trait::async_trait]
impl TaskQueue for DedupQueue {
    async fn send(&self, task: &Task) -> Result<(), floe_core::queue::QueueError> {
        let first = self.seen.lock().unwrap().insert(task.task_id().to_string());
        if first { self.inner.send(task).await } else { Ok(()) }
    }
}

/// Issue 40 item 4: the same segment event delivered twice, the second after the commit.
/// The materializer holds the task again (with the files of its new run) and sends it; the
/// queue drops it as a duplicate, so no commit releases it. The next maintenance finds all
/// its offsets in the table and releases it: the stall age is 0 again, and the second
/// run's files, which no copy of the task can add any more, are swept past the grace
/// period.
#[tokio::test]
async fn a_task_sent_again_after_its_commit_is_released_by_maintenance_and_its_files_swept() {
    use floe_core::maintenance::holding::HoldingQueue;
    use floe_core::maintenance::stall::Waiting;
    const HOUR_MS: i64 = 60 * 60 * 1000;

    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(&support::root().join("examples/segments"), input.path(), ORDERS_0);
    let committer = local_committer(warehouse.path());
    let locks = std::sync::Arc::new(open(warehouse.path()).1);
    let sqs = std::sync::Arc::new(DedupQueue::default());
    let queue = HoldingQueue::new(sqs.clone(), locks.clone());
    let paths = |task: &floe_core::task::CommitTask| -> Vec<String> {
        task.data_files.iter().map(|f| f.path().to_string()).collect()
    };

    // The event: materialized, held, queued, committed and released.
    let first = materialize(FloeConfig::default(), input.path(), &committer.warehouse, ORDERS_0).await;
    queue.send(&Task::Data(Box::new(first.clone()))).await.unwrap();
    let results = committer.commit_all(&sqs.inner.drain(), None).await.results;
    assert_eq!(results, [(first.task_id.clone(), TaskResult::Committed)]);
    assert_eq!(locks.held_tasks(&orders()).await.unwrap(), []);

    // The same event again: the same task id, files of its own, held; the send dropped.
    let again = materialize(FloeConfig::default(), input.path(), &committer.warehouse, ORDERS_0).await;
    let files = paths(&again);
    assert_eq!(again.task_id, first.task_id);
    assert!(!files.is_empty() && files.iter().all(|f| exists(f) && !paths(&first).contains(f)), "{files:?}");
    queue.send(&Task::Data(Box::new(again.clone()))).await.unwrap();
    assert!(sqs.inner.is_empty(), "dropped as a duplicate");
    let held = locks.held_tasks(&orders()).await.unwrap();
    assert_eq!(held.iter().map(|t| &t.files).collect::<Vec<_>>(), [&files]);
    let now = wall();
    let waiting = Waiting::read(locks.as_ref(), now + HOUR_MS).await.unwrap();
    assert!(waiting.oldest_ms.iter().any(|(t, age)| *t == orders() && *age >= HOUR_MS), "{waiting:?}");

    // `floe local compact` past the grace period: released, nothing waits, the files swept.
    let mut out = Vec::new();
    let clock = floe_core::lock::Clock::Shifted { by_ms: 4 * DAY_MS };
    floe_cli::compact::compact(warehouse.path(), FloeConfig::default(), clock, &mut out).await.unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("; 1 held task(s) already in the table released"), "{out}");
    assert_eq!(locks.held_tasks(&orders()).await.unwrap(), []);
    let waiting = Waiting::read(locks.as_ref(), now + 4 * DAY_MS).await.unwrap();
    assert_eq!(waiting.oldest_ms, [(orders(), 0)]);
    assert!(files.iter().all(|f| !exists(f)), "swept: {out}");

    // Why that is safe: a copy of the task still to come is dropped as already committed.
    let results = committer.commit_all(&[Task::Data(Box::new(again.clone()))], None).await.results;
    assert_eq!(results, [(again.task_id.clone(), TaskResult::AlreadyCommitted)]);
    let read = read_local(warehouse.path(), "kafka.orders");
    assert_eq!((read.rows, read.duplicates), (100, 0));
    assert_eq!(read.offsets["0"], (0..100).collect::<Vec<_>>());
}

/// Moves the pending parts of kafka.payments' table state `ms` into the past, as if
/// they had been committed pending that long ago.
fn backdate_pending(warehouse: &Path, ms: i64) {
    let (state, _) = pending_files(warehouse);
    let path = state.strip_prefix("file://").unwrap_or(&state).to_string();
    let mut json: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    for entry in json["pending"].as_array_mut().unwrap() {
        let since = entry["pending_since_ms"].as_i64().expect("marked when committed pending");
        entry["pending_since_ms"] = (since - ms).into();
    }
    std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
}

/// Issue 40 item 7: a transaction waiting for its marker longer than its topic's
/// `transaction_timeout` (15 minutes) is shown by `floe local status`, readable and as
/// JSON, with its producer and offsets, the table still `running`; once its marker comes,
/// no more.
#[tokio::test]
async fn status_shows_a_transaction_hanging_past_its_timeout_until_its_marker_comes() {
    use crate::committer::{SEGMENTS, assert_payments, payments};
    let (topic, offsets, values) = payments();
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let run = async |segments: &[&str]| {
        segments.iter().for_each(|s| copy(topic.path(), input.path(), s));
        assert!(local_run(input.path(), warehouse.path()).await.failed.is_empty());
    };
    // Segment A ends inside producer 7's transaction: pending, within its timeout.
    run(&SEGMENTS[..1]).await;
    let shown = floe_cli::local::status(warehouse.path()).await.unwrap();
    assert_eq!(shown[0].health.hanging_transactions, []);

    // 16 minutes on, its marker still to come.
    backdate_pending(warehouse.path(), 16 * 60 * 1000);
    let shown = floe_cli::local::status(warehouse.path()).await.unwrap();
    let health = &shown[0].health;
    assert_eq!(health.state, "running", "information, not a failure");
    let hanging: Vec<_> = health.hanging_transactions.iter().map(|h| &h.transaction).collect();
    assert_eq!(hanging.len(), 1, "{health:?}");
    let (first, last) = (hanging[0].first_offset, hanging[0].last_offset);
    assert_eq!((hanging[0].topic.as_str(), hanging[0].partition, hanging[0].producer_id), ("payments", 0, 7));
    assert!(first <= last && hanging[0].transaction_timeout_ms == 15 * 60 * 1000, "{hanging:?}");
    let json = serde_json::to_value(&shown[0]).unwrap();
    assert_eq!(json["hanging_transactions"][0]["producer_id"], 7, "{json}");
    let readable = floe_cli::health::render(&[(shown[0].table.as_str(), health)]);
    let line =
        format!("  hanging transaction: topic payments partition 0 producer 7 (epoch 0) offsets {first}-{last}, ");
    assert!(readable.contains(&line), "{readable}");

    // Its marker comes (segments B and C): committed, hanging no more.
    run(&SEGMENTS[1..]).await;
    let shown = floe_cli::local::status(warehouse.path()).await.unwrap();
    assert_eq!(shown[0].health.hanging_transactions, [], "{:?}", shown[0].health);
    assert_payments(&read_local(warehouse.path(), "kafka.payments"), &offsets, &values);
}

/// A table renamed in the catalog (`kafka.orders` → `kafka.orders_2025`, by PyIceberg),
/// then a new `kafka.orders` created by Floe where a name-based catalog puts it: at the
/// renamed table's location. Sweeping the new table keeps every file of the renamed one
/// (before: once the new table's metadata versions caught up with the old one's, the
/// sweep deleted the renamed table's metadata and data files, and it no longer loaded).
#[tokio::test]
async fn the_sweep_keeps_every_file_of_another_table_at_the_same_location() {
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    copy(&support::root().join("examples/segments"), input.path(), ORDERS_1);
    local_run(input.path(), warehouse.path()).await;
    let w = warehouse.path().canonicalize().unwrap().display().to_string();
    let rename = format!(
        "from pyiceberg.catalog.sql import SqlCatalog\n\
         c = SqlCatalog('floe', uri='sqlite:///{w}/catalog.db', warehouse='file://{w}')\n\
         c.rename_table('kafka.orders', 'kafka.orders_2025')\n"
    );
    let out = std::process::Command::new(support::python()).args(["-c", &rename]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let renamed = read_local(warehouse.path(), "kafka.orders_2025");
    assert_eq!(renamed.rows, 80);
    // The new table at the same location, a few commits ahead of the renamed one.
    local_run(input.path(), warehouse.path()).await;
    let committer = local_committer(warehouse.path());
    let template = materialize(FloeConfig::default(), input.path(), &committer.warehouse, ORDERS_1).await;
    for i in 1..=3 {
        assert_eq!(committer.commit(&[copy_of(&template, i)], None).await.results[0].1, TaskResult::Committed);
    }
    let renamed_location = |name: &str| {
        let (catalog, _) = open(warehouse.path());
        let table = TableName::parse(name).unwrap();
        async move { floe_core::table::load(&catalog, &local_file_io(), &table).await.unwrap().unwrap() }
    };
    let (old, new) = (renamed_location("kafka.orders_2025").await, renamed_location("kafka.orders").await);
    assert_eq!(old.metadata.location(), new.metadata.location(), "the two tables share a location");

    let report = sweep(warehouse.path(), wall() + GRACE_MS + DAY_MS).await;
    assert_eq!(read_local(warehouse.path(), "kafka.orders_2025"), renamed, "removed: {:?}", report.removed);
    assert_eq!(read_local(warehouse.path(), "kafka.orders").rows, 4 * 80);
}
