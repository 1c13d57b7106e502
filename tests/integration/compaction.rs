//! Compaction end to end on the SQLite catalog, judged by PyIceberg: the compactor's run
//! on a controlled clock (the target trigger at once, the window trigger after it), the
//! committer applying its tasks (released from the registry, recorded), a partitioned
//! table, and the races: new appends before the compaction commits, two compactions
//! planned from one snapshot.
//!
//! Segments come from tests/py/make_compaction.py: 270 records of random base64 values
//! each, a fresh Parquet file (Snappy) of about 270 KB, so four of them fill a bin of the
//! 1 MiB target; compaction's zstd output takes about a quarter off.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use floe_core::catalog::Catalog;
use floe_core::committer::{BatchReport, Committer, TaskResult};
use floe_core::config::FloeConfig;
use floe_core::lock::sqlite::SqliteLocks;
use floe_core::maintenance::TableRegistry;
use floe_core::maintenance::compactor::{Compactor, TableRun};
use floe_core::queue::InProcessQueue;
use floe_core::task::{TableName, Task};
use iceberg::spec::DataFile;

use crate::committer::{Read, materialize_with, read_local};
use crate::support;

/// The compaction target the tests configure (the smallest `compaction_target_size`).
pub(crate) const TARGET: u64 = 1 << 20;
/// Records per generated segment (make_compaction.py).
pub(crate) const RECORDS: i64 = 270;
pub(crate) const MINUTE: i64 = 60 * 1000;

/// A local warehouse with the topic `clicks` (table `kafka.clicks`), its segments, and
/// the committer and registry `floe local` uses.
pub(crate) struct Clicks {
    pub(crate) input: tempfile::TempDir,
    pub(crate) warehouse: tempfile::TempDir,
    pub(crate) config: FloeConfig,
    catalog: Arc<dyn Catalog>,
    locks: Arc<SqliteLocks>,
    pub(crate) committer: Committer,
}

fn table() -> TableName {
    TableName { namespace: "kafka".into(), name: "clicks".into() }
}

impl Clicks {
    /// `partition_by`: a `floe.toml` line of `[defaults]` (or several), or "".
    pub(crate) fn new(partition_by: &str) -> Clicks {
        let (input, warehouse) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let config = FloeConfig::parse(&format!(
            "[defaults]\nenabled = true\ncompaction_target_size = \"1MiB\"\n{partition_by}"
        ))
        .unwrap();
        let catalog =
            floe_core::catalog::sqlite::SqliteCatalog::open(&warehouse.path().join("catalog.db"), "floe").unwrap();
        let locks = Arc::new(SqliteLocks::new(catalog.connection()).unwrap());
        let catalog: Arc<dyn Catalog> = Arc::new(catalog);
        let path = warehouse.path().canonicalize().unwrap().display().to_string();
        let file_io = floe_core::storage::local_file_io();
        let committer = Committer::new(catalog.clone(), file_io, locks.clone(), locks.clone(), path, "compaction-test")
            .with_lease_ttl(std::time::Duration::from_secs(60));
        Clicks { input, warehouse, config, catalog, locks, committer }
    }

    /// A table of `segments` (per Kafka partition: how many) committed in one batch, and
    /// what PyIceberg reads from it then.
    pub(crate) async fn committed(partition_by: &str, segments: &[i64]) -> (Clicks, Read) {
        let clicks = Clicks::new(partition_by);
        let mut objects = Vec::new();
        for (partition, &n) in (0..).zip(segments) {
            objects.extend(clicks.segments(partition, n, 0));
        }
        clicks.commit(&objects).await;
        let read = clicks.read();
        (clicks, read)
    }

    /// Writes segments `first..first + n` of Kafka partition `partition`; their keys.
    pub(crate) fn segments(&self, partition: i32, n: i64, first: i64) -> Vec<String> {
        self.segments_of("clicks", "random", partition, n, first)
    }

    /// [`Self::segments`] of another topic (table `kafka.<topic>`), of `values`
    /// (make_compaction.py's VALUES: "random" or "json").
    pub(crate) fn segments_of(&self, topic: &str, values: &str, partition: i32, n: i64, first: i64) -> Vec<String> {
        let (p, n, first) = (partition.to_string(), n.to_string(), first.to_string());
        let out = std::process::Command::new(support::python())
            .arg(support::root().join("tests/py/make_compaction.py"))
            .args([self.input.path().to_str().unwrap(), topic, &p, &n, &first, values])
            .output()
            .unwrap();
        assert!(out.status.success(), "make_compaction.py: {}", String::from_utf8_lossy(&out.stderr));
        let first: i64 = first.parse().unwrap();
        (first..first + n.parse::<i64>().unwrap())
            .map(|s| format!("{topic}-{partition}/{:020}.log", s * RECORDS))
            .collect()
    }

    /// Materializes the segments (the table's schema looked up, as `floe local run` does)
    /// and commits them in one batch.
    pub(crate) async fn commit(&self, objects: &[String]) {
        let report = self.commit_report(objects).await;
        assert!(report.results.iter().all(|(_, r)| *r == TaskResult::Committed), "{report:?}");
    }

    /// [`Self::commit`], whatever each task's result: the committer's report.
    pub(crate) async fn commit_report(&self, objects: &[String]) -> BatchReport {
        let tables: Arc<dyn floe_core::table::TableLookup> = Arc::new(floe_core::table::CatalogTables {
            catalog: self.catalog.clone(),
            file_io: self.committer.file_io.clone(),
            delta_log: Arc::new(floe_core::delta::LocalLogStore),
        });
        let mut tasks = Vec::new();
        for object in objects {
            let (config, input) = (self.config.clone(), self.input.path());
            let task = materialize_with(config, input, &self.committer.warehouse, object, Some(tables.clone())).await;
            tasks.push(Task::Data(Box::new(task)));
        }
        self.committer.commit_all(&tasks, None).await
    }

    /// The compactor `floe local` runs, queueing into `queue`.
    pub(crate) fn compactor(&self, queue: Arc<InProcessQueue>) -> Compactor {
        Compactor {
            catalog: self.catalog.clone(),
            file_io: self.committer.file_io.clone(),
            registry: self.locks.clone(),
            files: Arc::new(floe_core::storage::LocalFiles),
            queue,
            config: Arc::new(self.config.clone()),
            task_store: None,
            sweep: false,
            delta_log: Arc::new(floe_core::delta::LocalLogStore),
        }
    }

    /// A compactor run at `now_ms` into a queue of its own: the table's line, and the tasks.
    async fn plan(&self, now_ms: i64) -> (TableRun, Vec<Task>) {
        let queue = Arc::new(InProcessQueue::default());
        let report = self.compactor(queue.clone()).run(now_ms, None).await;
        let mut runs: Vec<TableRun> = report.tables;
        assert_eq!(runs.len(), 1, "{runs:?}");
        let run = runs.remove(0);
        assert!(run.error.is_none() && run.skipped.is_none(), "{run:?}");
        (run, queue.drain())
    }

    /// A compactor run at `now_ms`, its tasks committed at once (as `floe local compact`).
    pub(crate) async fn compact(&self, now_ms: i64) -> (TableRun, BatchReport) {
        let (run, tasks) = self.plan(now_ms).await;
        assert_eq!(tasks.len(), run.compactions);
        (run, self.committer.commit_all(&tasks, None).await)
    }

    pub(crate) fn read(&self) -> Read {
        read_local(self.warehouse.path(), "kafka.clicks")
    }

    pub(crate) async fn metadata(&self) -> iceberg::spec::TableMetadata {
        let loaded = floe_core::table::load(self.catalog.as_ref(), &self.committer.file_io, &table()).await.unwrap();
        loaded.unwrap().metadata
    }

    /// When the current snapshot was committed.
    pub(crate) async fn committed_at(&self) -> i64 {
        self.metadata().await.current_snapshot().unwrap().timestamp_ms()
    }

    pub(crate) async fn live(&self) -> Vec<DataFile> {
        let metadata = self.metadata().await;
        let mut files = floe_core::table::snapshot::live_data_files(&self.committer.file_io, &metadata).await.unwrap();
        files.sort_by(|a, b| a.file_path().cmp(b.file_path()));
        files
    }

    /// The fresh files `floe local status` shows for the table.
    async fn fresh_files_shown(&self) -> u64 {
        let status = floe_cli::local::status(self.warehouse.path()).await.unwrap();
        status.into_iter().find(|t| t.table == "kafka.clicks").unwrap().health.fresh_files
    }

    /// The live files' sizes per Kafka partition (the prefix of their names), in offset order.
    async fn sizes(&self) -> BTreeMap<i32, Vec<u64>> {
        let mut sizes: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
        for file in self.live().await {
            sizes.entry(kafka_partition(file.file_path())).or_default().push(file.file_size_in_bytes());
        }
        sizes
    }
}

/// The codec of each file's column chunks (one each), as its name says (a fresh file's
/// ends `.snappy.parquet`) and as its Parquet footer says, checked to agree.
pub(crate) fn codecs(files: &[DataFile]) -> Vec<String> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let mut out = Vec::new();
    for file in files {
        let path = file.file_path().strip_prefix("file://").unwrap_or(file.file_path());
        let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
        let groups = reader.metadata().row_groups();
        let codecs: std::collections::BTreeSet<String> =
            groups.iter().flat_map(|g| g.columns().iter().map(|c| format!("{:?}", c.compression()))).collect();
        assert_eq!(codecs.len(), 1, "{path}: {codecs:?}");
        let codec = codecs.into_iter().next().unwrap();
        assert_eq!(codec == "SNAPPY", floe_core::datafile::is_fresh(path), "{path}: {codec}");
        out.push(codec);
    }
    out
}

/// The Kafka partition a data file's name starts with (`00001-…`).
fn kafka_partition(path: &str) -> i32 {
    path.rsplit('/').next().unwrap().split('-').next().unwrap().parse().unwrap()
}

pub(crate) fn results(report: &BatchReport) -> Vec<TaskResult> {
    report.results.iter().map(|(_, r)| r.clone()).collect()
}

/// The same multiset of rows: every offset once, each with its value.
pub(crate) fn assert_same_rows(before: &Read, after: &Read) {
    assert_eq!((after.rows, after.duplicates), (before.rows, 0));
    assert_eq!(after.offsets, before.offsets);
    assert_eq!(after.values, before.values);
}

#[tokio::test]
async fn a_full_bin_takes_its_partition_s_files_at_once_the_rest_go_once_the_window_has_passed() {
    let (clicks, before) = Clicks::committed("", &[6, 2]).await;
    assert_eq!(before.offsets["0"], (0..6 * RECORDS).collect::<Vec<_>>());
    assert_eq!(before.offsets["1"], (0..2 * RECORDS).collect::<Vec<_>>());
    let t0 = clicks.committed_at().await;
    let sizes = clicks.sizes().await;
    assert_eq!((sizes[&0].len(), sizes[&1].len()), (6, 2));
    assert_eq!(codecs(&clicks.live().await), vec!["SNAPPY"; 8], "the materializer's files are fresh");
    assert_eq!(clicks.fresh_files_shown().await, 8, "status shows them waiting");

    // A minute after the commit: the first four files of partition 0 reach the target, the
    // other two go along (one writer: a file of the target and one tail).
    let (run, report) = clicks.compact(t0 + MINUTE).await;
    let full_bin: u64 = sizes[&0][..4].iter().sum();
    assert!((TARGET..=TARGET + TARGET / 10).contains(&full_bin), "the generator's sizes: {sizes:?}");
    let bytes_in: u64 = sizes[&0].iter().sum();
    assert_eq!((run.compactions, run.files_in, run.bytes_in, run.files_out), (1, 6, bytes_in, 2));
    assert_eq!(results(&report), vec![TaskResult::Committed]);
    let after = clicks.sizes().await;
    assert_eq!(after[&1], sizes[&1], "under the target and young: untouched");
    let (compacted, tail) = (after[&0][0], after[&0][1]);
    assert!((TARGET * 9 / 10..=TARGET * 11 / 10).contains(&compacted), "within 10% of the target: {compacted}");
    let read = clicks.read();
    assert_same_rows(&before, &read);
    assert_eq!(read.operation.as_deref(), Some("replace"));

    // The committer released the task's files and recorded the compaction.
    let status = clicks.locks.status(&table()).await.unwrap();
    let record = status.last_compaction.expect("a compaction recorded");
    assert_eq!(
        (record.files_in, record.bytes_in, record.files_out, record.bytes_out),
        (6, bytes_in, 2, compacted + tail)
    );
    assert!(record.at_ms >= t0, "{record:?}");
    assert_eq!(clicks.locks.held_tasks(&table()).await.unwrap(), vec![], "released once committed");

    // Fourteen minutes after the commit partition 1's small files still wait; at fifteen,
    // the window has passed: they go. Partition 0 is left with one small file, its tail:
    // nothing to do there.
    assert_eq!(clicks.compact(t0 + 14 * MINUTE).await.0.compactions, 0);
    let (run, report) = clicks.compact(t0 + 15 * MINUTE).await;
    assert_eq!((run.compactions, run.files_in), (1, 2));
    assert_eq!(results(&report), vec![TaskResult::Committed]);
    let last = clicks.sizes().await;
    assert_eq!((last[&0].len(), last[&1].len()), (2, 1));
    assert_eq!(last[&0], vec![compacted, tail], "a compacted file is not compacted again");
    assert_same_rows(&before, &clicks.read());
    assert_eq!(codecs(&clicks.live().await), vec!["ZSTD(ZstdLevel(1))"; 3], "compaction's files are zstd");
    assert_eq!(clicks.fresh_files_shown().await, 0, "none left waiting");
    let status = clicks.locks.status(&table()).await.unwrap();
    assert_eq!(status.last_compaction.map(|c| (c.files_in, c.files_out)), Some((2, 1)));
}

#[tokio::test]
async fn compaction_of_compressible_rows_at_one_mib_settles_in_one_run() {
    // 30 segments of JSON values compressing about 12x: Parquet files of about 90 KB.
    let clicks = Clicks::new("");
    clicks.commit(&clicks.segments_of("clicks", "json", 0, 30, 0)).await;
    let before = clicks.read();
    let t0 = clicks.committed_at().await;
    let (run, report) = clicks.compact(t0 + 15 * MINUTE).await;
    assert_eq!((run.compactions, run.files_in), (1, 30));
    assert_eq!(results(&report), vec![TaskResult::Committed]);
    let sizes = clicks.sizes().await[&0].clone();
    let (full, _tail) = sizes.split_at(sizes.len() - 1);
    assert!(
        full.len() >= 2 && full.iter().all(|&s| (TARGET * 9 / 10..=TARGET * 11 / 10).contains(&s)),
        "every output but the tail within 10% of the target: {sizes:?}"
    );
    assert_same_rows(&before, &clicks.read());
    // Right after, and a day later: nothing to compact.
    for later in [16 * MINUTE, 24 * 60 * MINUTE] {
        let (again, _) = clicks.compact(t0 + later).await;
        assert_eq!((again.compactions, again.files_in), (0, 0), "{sizes:?}");
    }
    assert_eq!(clicks.sizes().await[&0], sizes);
    assert_same_rows(&before, &clicks.read());
}

#[tokio::test]
async fn a_partitioned_table_is_compacted_within_each_partition() {
    let (clicks, before) = Clicks::committed("partition_by = [\"day(_kafka.timestamp)\"]\n", &[3, 2]).await;
    let groups = |files: &[DataFile]| -> BTreeMap<String, usize> {
        let mut groups = BTreeMap::new();
        for f in files {
            *groups.entry(format!("{:?} {}", f.partition(), kafka_partition(f.file_path()))).or_default() += 1;
        }
        groups
    };
    // Each segment's records alternate between two days: two files a segment.
    let live = clicks.live().await;
    assert_eq!(groups(&live).values().copied().collect::<Vec<_>>(), vec![3, 2, 3, 2], "{:?}", groups(&live));

    let (run, report) = clicks.compact(clicks.committed_at().await + 15 * MINUTE).await;
    assert_eq!((run.compactions, run.files_in, run.files_out), (4, 10, 4));
    assert_eq!(results(&report), vec![TaskResult::Committed; 4]);
    let after = clicks.live().await;
    let one_each: BTreeMap<String, usize> = groups(&live).into_keys().map(|k| (k, 1)).collect();
    assert_eq!(groups(&after), one_each, "one file per day and Kafka partition, values kept");
    assert_same_rows(&before, &clicks.read());
    // A scan pruned by the partition reads one day's rows.
    let w = clicks.warehouse.path().canonicalize().unwrap().display().to_string();
    let first_day = crate::committer::pyiceberg(&[
        "sql",
        &format!("{w}/catalog.db"),
        &w,
        "kafka.clicks",
        "_kafka.timestamp < '2025-11-25T12:00:00+00:00'",
    ]);
    assert_eq!(first_day.rows, before.rows / 2);
}

#[tokio::test]
async fn a_compaction_committed_after_new_appends_keeps_them() {
    let clicks = Clicks::new("");
    clicks.commit(&clicks.segments(0, 4, 0)).await;
    let t0 = clicks.committed_at().await;
    let (run, tasks) = clicks.plan(t0 + MINUTE).await;
    assert_eq!(run.compactions, 1);
    // Two more segments are committed before the compaction reaches the committer.
    clicks.commit(&clicks.segments(0, 2, 4)).await;
    let report = clicks.committer.commit_all(&tasks, None).await;
    assert_eq!(results(&report), vec![TaskResult::Committed]);
    let read = clicks.read();
    assert_eq!(read.offsets["0"], (0..6 * RECORDS).collect::<Vec<_>>());
    assert_eq!((read.rows, read.duplicates), (6 * RECORDS as usize, 0));
    assert_eq!(read.summary["floe.offsets.clicks.0"], format!("0-{}", 6 * RECORDS - 1), "offsets carried forward");
    // The four inputs (fresh, Snappy) hold a little more than the target, which zstd
    // takes a quarter off: one file.
    assert_eq!(run.files_out, 1);
    assert_eq!(clicks.sizes().await[&0].len(), 3, "the compacted file and the two new ones");
}

#[tokio::test]
async fn two_compactions_planned_from_one_snapshot_commit_once() {
    let (clicks, before) = Clicks::committed("", &[2, 2]).await;
    let at = clicks.committed_at().await + 15 * MINUTE;
    let (run, first) = clicks.plan(at).await;
    assert_eq!(run.compactions, 2);
    // Run again before the committer applied them: the bins are queued already.
    let (again, none) = clicks.plan(at + MINUTE).await;
    assert_eq!((again.compactions, again.already_queued, none.len()), (0, 2, 0));
    // An hour on, still not applied: planned from the same snapshot again (the same task
    // ids), into new files.
    let (late, second) = clicks.plan(at + 61 * MINUTE).await;
    assert_eq!(late.compactions, 2);
    let ids = |tasks: &[Task]| tasks.iter().map(|t| t.task_id().to_string()).collect::<Vec<_>>();
    assert_eq!(ids(&first), ids(&second));
    let outputs = |tasks: &[Task]| -> Vec<String> {
        tasks
            .iter()
            .flat_map(|t| match t {
                Task::Compaction(c) => c.added.iter().map(|f| f.path().to_string()).collect::<Vec<_>>(),
                _ => panic!("not a compaction"),
            })
            .collect()
    };
    assert!(outputs(&first).iter().all(|p| !outputs(&second).contains(p)), "no path written twice");
    // The first copies may still come: their files stay held beside the new ones.
    let mut held: Vec<String> =
        clicks.locks.held_tasks(&table()).await.unwrap().into_iter().flat_map(|t| t.files).collect();
    let mut both = [outputs(&first), outputs(&second)].concat();
    held.sort();
    both.sort();
    assert_eq!(held, both);

    assert_eq!(results(&clicks.committer.commit_all(&first, None).await), vec![TaskResult::Committed; 2]);
    let report = clicks.committer.commit_all(&second, None).await;
    assert!(
        results(&report)
            .iter()
            .all(|r| matches!(r, TaskResult::Rejected { reason } if reason.contains("no longer live"))),
        "{report:?}"
    );
    assert_same_rows(&before, &clicks.read());
    let live: Vec<String> = clicks.live().await.iter().map(|f| f.file_path().to_string()).collect();
    let mut applied = outputs(&first);
    applied.sort();
    assert_eq!(live, applied);
    for orphan in outputs(&second) {
        assert!(Path::new(&orphan).is_file(), "left for the sweep: {orphan}");
    }
    assert_eq!(clicks.locks.held_tasks(&table()).await.unwrap(), vec![], "released: committed, then rejected");
}
