//! A batch's tables committed at once (`Committer::concurrency`): on a paused clock with
//! a slow catalog, a batch takes one table's time per `concurrency` tables, not the sum;
//! and the exactly-once rules hold meanwhile: a task's dead-letter table before its
//! main table, racing committers and duplicate tasks adding each record once.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use floe_core::catalog::Catalog;
use floe_core::committer::{Committer, TaskResult};
use floe_core::config::FloeConfig;
use floe_core::storage::local_file_io;
use floe_core::task::{CommitTask, TableName};

use crate::committer::{CatalogCall, Hooked, clicks_with_a_bad_record, local_committer, materialize, read_local};
use crate::support;

const SEGMENT: &str = "00000000000000000000.log";

/// Tasks of `topics` (each a copy of the example `orders` partition 0: offsets 0–99),
/// one table each, materialized into `warehouse`.
async fn tasks_of(input: &Path, warehouse: &Path, topics: &[String]) -> Vec<CommitTask> {
    let w = warehouse.canonicalize().unwrap().display().to_string();
    let mut tasks = Vec::new();
    for topic in topics {
        let to = input.join(format!("{topic}-0/{SEGMENT}"));
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(support::root().join(format!("examples/segments/orders-0/{SEGMENT}")), &to).unwrap();
        tasks.push(materialize(FloeConfig::default(), input, &w, &format!("{topic}-0/{SEGMENT}")).await);
    }
    tasks
}

fn topics(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// The local committer with every catalog call taking `latency`.
fn slow_committer(warehouse: &Path, latency: Duration, concurrency: usize) -> Committer {
    let local = local_committer(warehouse);
    let slow = Hooked::new(local.catalog.clone(), move |_, _, _| {
        Box::pin(async move {
            tokio::time::sleep(latency).await;
            Ok(())
        })
    });
    local.with_catalog(Arc::new(slow)).with_concurrency(concurrency)
}

/// Commits `tasks` in one batch; the time it took on the (paused) clock.
async fn timed_commit(committer: &Committer, tasks: &[CommitTask]) -> Duration {
    let start = tokio::time::Instant::now();
    let report = committer.commit(tasks, None).await;
    assert!(report.results.iter().all(|(_, r)| *r == TaskResult::Committed), "{:?}", report.results);
    start.elapsed()
}

#[tokio::test(start_paused = true)]
async fn a_batch_takes_one_tables_latency_per_concurrency_tables_not_their_sum() {
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let latency = Duration::from_millis(50);
    const TABLES: usize = 7;
    // One table alone: its latency (a few catalog calls).
    let one = tasks_of(input.path(), warehouse.path(), &topics("alone", 1)).await;
    let table = timed_commit(&slow_committer(warehouse.path(), latency, 1), &one).await;
    assert!(table >= 2 * latency, "{table:?}");

    // One at a time: the sum of the tables' latencies.
    let serial = tasks_of(input.path(), warehouse.path(), &topics("serial", TABLES)).await;
    let took = timed_commit(&slow_committer(warehouse.path(), latency, 1), &serial).await;
    assert_eq!(took, table * TABLES as u32, "one at a time");

    // Three at a time: ceil(7 / 3) = 3 tables' latencies, never fewer (the bound holds).
    let bounded = tasks_of(input.path(), warehouse.path(), &topics("bounded", TABLES)).await;
    let took = timed_commit(&slow_committer(warehouse.path(), latency, 3), &bounded).await;
    assert_eq!(took, table * 3, "three at a time");

    // All at once: one table's latency.
    let all = tasks_of(input.path(), warehouse.path(), &topics("all", TABLES)).await;
    let took = timed_commit(&slow_committer(warehouse.path(), latency, TABLES), &all).await;
    assert_eq!(took, table, "all at once");
}

/// A batch of a task with dead letters and tasks of other tables: the other tables
/// commit while the dead-letter table is slow, the main table only after it.
#[tokio::test(start_paused = true)]
async fn the_main_table_waits_for_its_dead_letters_while_other_tables_commit() {
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = clicks_with_a_bad_record(input.path());
    let w = warehouse.path().canonicalize().unwrap().display().to_string();
    let clicks = materialize(config, input.path(), &w, &format!("clicks-0/{SEGMENT}")).await;
    assert_eq!(clicks.dead_letter_files.len(), 1);
    let others = tasks_of(input.path(), warehouse.path(), &topics("other", 3)).await;

    let local = local_committer(warehouse.path());
    let inner = local.catalog.clone();
    // Whether the main table's swap came before its dead letters were in; how many other
    // tables were committed before the dead-letter table's slow swap ended.
    let (early, other_swaps, before_dlq) = (Arc::new(AtomicBool::new(false)), counter(), counter());
    let (early_seen, swaps, before) = (early.clone(), other_swaps.clone(), before_dlq.clone());
    let catalog = Hooked::new(local.catalog.clone(), move |call, table, _| {
        let (inner, early, others, before) = (inner.clone(), early_seen.clone(), swaps.clone(), before.clone());
        let name = table.name.clone();
        Box::pin(async move {
            match (call, name.as_str()) {
                // The dead-letter table's swap takes a minute.
                (CatalogCall::Swap, "clicks_dlq") => {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    before.store(others.load(Ordering::SeqCst), Ordering::SeqCst);
                }
                // The main table's swap: its dead letters must be in already.
                (CatalogCall::Swap, "clicks") => {
                    early.fetch_or(!dead_letters_in(inner.as_ref()).await, Ordering::SeqCst);
                }
                (CatalogCall::Swap, _) => {
                    others.fetch_add(1, Ordering::SeqCst);
                }
                _ => {}
            }
            Ok(())
        })
    });
    let committer = local.with_catalog(Arc::new(catalog)).with_concurrency(4);
    let mut batch = vec![clicks];
    batch.extend(others.iter().cloned());
    let start = tokio::time::Instant::now();
    let report = committer.commit(&batch, None).await;
    assert!(report.results.iter().all(|(_, r)| *r == TaskResult::Committed), "{:?}", report.results);
    assert!(!early.load(Ordering::SeqCst), "the main table was committed before its dead letters");
    // The other tables did not wait for the slow dead-letter table.
    assert_eq!(before_dlq.load(Ordering::SeqCst), 3, "other tables committed during the dead-letter commit");
    assert!(start.elapsed() < Duration::from_secs(61), "{:?}", start.elapsed());
    let other_first = read_local(warehouse.path(), "kafka.other0");
    assert_eq!((other_first.offsets["0"].clone(), other_first.duplicates), ((0..100).collect::<Vec<_>>(), 0));
    let clicks = read_local(warehouse.path(), "kafka.clicks");
    assert_eq!((clicks.offsets["0"].clone(), clicks.duplicates), (vec![0, 1, 2, 3, 5, 6, 7, 8, 9], 0));
    assert_eq!(read_local(warehouse.path(), "kafka.clicks_dlq").offsets["0"], vec![4]);
}

fn counter() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

/// Whether `clicks_dlq` holds the dead letters of `clicks` partition 0.
async fn dead_letters_in(catalog: &dyn Catalog) -> bool {
    let (dlq, file_io) = (TableName { namespace: "kafka".into(), name: "clicks_dlq".into() }, local_file_io());
    match floe_core::table::load(catalog, &file_io, &dlq).await.unwrap() {
        Some(loaded) => floe_core::table::committed_offsets(&dlq, &loaded.metadata).unwrap().get("clicks", 0).is_some(),
        None => false,
    }
}

/// Two committers that both believe they hold every lease (two lease stores) commit the
/// same batch of several tables at once, each task in it twice: every record once.
#[tokio::test]
async fn racing_concurrent_committers_with_duplicate_tasks_add_each_record_once() {
    use floe_core::catalog::sqlite::SqliteCatalog;
    use floe_core::lock::sqlite::SqliteLocks;
    let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let tasks = tasks_of(input.path(), warehouse.path(), &topics("race", 4)).await;
    let mut batch: Vec<CommitTask> = tasks.iter().chain(&tasks).cloned().collect();
    batch.rotate_left(1);

    let a = local_committer(warehouse.path()).with_owner("a").with_concurrency(4);
    let other = SqliteCatalog::open(&warehouse.path().join("other-leases.db"), "floe").unwrap();
    let other_locks = Arc::new(SqliteLocks::new(other.connection()).unwrap());
    let b = local_committer(warehouse.path())
        .with_catalog(a.catalog.clone())
        .with_locks(other_locks.clone())
        .with_registry(other_locks)
        .with_owner("b")
        .with_concurrency(4);
    let (ra, rb) = tokio::join!(a.commit(&batch, None), b.commit(&batch, None));
    for (_, result) in ra.results.iter().chain(&rb.results) {
        assert!(!matches!(result, TaskResult::Failed { .. }), "{:?} {:?}", ra.results, rb.results);
    }
    // Each task committed by exactly one of them.
    for task in &tasks {
        let committed = [&ra, &rb]
            .iter()
            .filter(|r| r.results.iter().any(|(id, r)| *id == task.task_id && *r == TaskResult::Committed))
            .count();
        assert_eq!(committed, 1, "{}: {:?} {:?}", task.task_id, ra.results, rb.results);
    }
    for topic in topics("race", 4) {
        let read = read_local(warehouse.path(), &format!("kafka.{topic}"));
        assert_eq!((read.offsets["0"].clone(), read.duplicates), ((0..100).collect::<Vec<_>>(), 0), "{topic}");
    }
}
