//! Each apply path on real local implementations: the SQLite catalog and locks and the
//! filesystem `FileIO`, in a temporary directory (no AWS, no mock).

use std::sync::Arc;

use iceberg::spec::{Operation, PartitionSpec, StructType};

use super::{Committer, TaskResult};
use crate::catalog::sqlite::SqliteCatalog;
use crate::datafile::{Pages, TableWriter, WriterOptions};
use crate::lock::sqlite::SqliteLocks;
use crate::partition::tests::{batch, schema};
use crate::table::{LoadedTable, committed_offsets, load, table_location};
use crate::task::{
    CommitTask, CompactionKind, CompactionTask, OffsetRange, SuspendTask, TASK_VERSION, TableName, Task, TaskFile,
};

struct Fixture {
    _dir: tempfile::TempDir,
    committer: Committer,
    /// The table's location: where the materializer writes its files.
    location: String,
}

fn table() -> TableName {
    TableName { namespace: "kafka".into(), name: "orders".into() }
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let warehouse = dir.path().canonicalize().unwrap().display().to_string();
        let catalog = SqliteCatalog::open(&dir.path().join("catalog.db"), "floe").unwrap();
        let locks = Arc::new(SqliteLocks::new(catalog.connection()).unwrap());
        let file_io = crate::storage::local_file_io();
        let location = table_location(&warehouse, &table());
        let committer = Committer::new(Arc::new(catalog), file_io, locks.clone(), locks, warehouse, "unit-test");
        Fixture { _dir: dir, committer, location }
    }

    /// A Parquet file of the offsets `first..=last` (one row each) in the table's data directory.
    async fn file(&self, source: &str, first: i64, last: i64) -> TaskFile {
        let options = WriterOptions {
            file_io: self.committer.file_io.clone(),
            dir: format!("{}/data", self.location),
            partition: 0,
            source_id: source.into(),
            schema: Arc::new(schema()),
            target_size: 1 << 30,
            pages: Pages::Zstd,
        };
        let mut writer = TableWriter::new(options, Arc::new(PartitionSpec::unpartition_spec())).unwrap();
        let values: Vec<(i64, Option<i64>, Option<&str>)> = (first..=last).map(|o| (o, None, None)).collect();
        writer.write(&batch(&schema(), &values), first, last).await.unwrap();
        let written = writer.close().await.unwrap().remove(0);
        TaskFile::from_written(&written, &StructType::new(vec![])).unwrap()
    }

    /// The segment `first..=last` of partition 0 as the materializer hands it.
    async fn task(&self, id: &str, first: i64, last: i64) -> CommitTask {
        let file = self.file(id, first, last).await;
        let mut task = crate::task::tests::task(&schema(), None, file);
        task.task_id = id.into();
        task.table = table();
        task.offsets = Some(OffsetRange { first, last });
        task.record_count = (last - first + 1) as u64;
        task
    }

    async fn loaded(&self) -> LoadedTable {
        load(self.committer.catalog.as_ref(), &self.committer.file_io, &table()).await.unwrap().unwrap()
    }

    /// The offsets the table holds for partition 0 of `orders`.
    async fn offsets(&self) -> Vec<(i64, i64)> {
        let loaded = self.loaded().await;
        let offsets = committed_offsets(&table(), &loaded.metadata).unwrap();
        let log = offsets.log_of("orders", None);
        offsets.get(&log, 0).map(|r| r.ranges().to_vec()).unwrap_or_default()
    }

    /// The records of the table's current snapshot.
    async fn records(&self) -> u64 {
        let loaded = self.loaded().await;
        let files = crate::table::snapshot::live_data_files(&self.committer.file_io, &loaded.metadata).await.unwrap();
        files.iter().map(|f| f.record_count()).sum()
    }
}

fn results(report: &super::BatchReport) -> Vec<TaskResult> {
    report.results.iter().map(|(_, r)| r.clone()).collect()
}

#[tokio::test]
async fn an_append_creates_the_table_and_commits_a_task_once() {
    let t = Fixture::new();
    let task = t.task("s0", 0, 9).await;
    let report = t.committer.commit(std::slice::from_ref(&task), None).await;
    assert_eq!(results(&report), vec![TaskResult::Committed]);
    assert_eq!((report.snapshots.len(), report.snapshots[0].records), (1, 10));
    assert_eq!(t.offsets().await, vec![(0, 9)]);
    let snapshot = t.loaded().await.metadata.current_snapshot().unwrap().clone();
    assert_eq!(snapshot.summary().operation, Operation::Append);
    assert_eq!(snapshot.summary().additional_properties.get("floe.committer").map(String::as_str), Some("unit-test"));

    // Delivered again: nothing new, no snapshot.
    let again = t.committer.commit(&[task], None).await;
    assert_eq!(results(&again), vec![TaskResult::AlreadyCommitted]);
    assert!(again.snapshots.is_empty());
    assert_eq!(t.records().await, 10);
}

#[tokio::test]
async fn a_file_straddling_committed_offsets_is_trimmed_to_the_new_ones() {
    let t = Fixture::new();
    t.committer.commit(&[t.task("s0", 0, 9).await], None).await;
    // The segment re-cut at other boundaries: 5..=9 are committed already.
    let recut = t.task("s1", 5, 14).await;
    let report = t.committer.commit(&[recut], None).await;
    assert_eq!(results(&report), vec![TaskResult::Committed]);
    assert_eq!(report.snapshots[0].records, 5, "only the new offsets' rows");
    assert_eq!(t.offsets().await, vec![(0, 14)]);
    assert_eq!(t.records().await, 15);
}

#[tokio::test]
async fn a_compaction_replaces_live_files_and_one_whose_inputs_are_gone_is_rejected() {
    let t = Fixture::new();
    let (a, b) = (t.task("s0", 0, 4).await, t.task("s1", 5, 9).await);
    t.committer.commit(&[a.clone(), b.clone()], None).await;
    let inputs = vec![a.data_files[0].path().to_string(), b.data_files[0].path().to_string()];
    let compaction = |id: &str, removed: Vec<String>, added: TaskFile| CompactionTask {
        formats: Default::default(),
        version: TASK_VERSION,
        kind: CompactionKind::Compaction,
        task_id: id.into(),
        table: table(),
        removed,
        added: vec![added],
        schema: schema(),
        partition_spec: None,
        created_at_ms: 0,
        data_sequence_number: None,
        deletes_applied: Vec::new(),
        left_out: None,
    };
    let merged = t.file("c1", 0, 9).await;
    let first = compaction("c1", inputs.clone(), merged);
    // Planned on the same inputs: once the first replaced them, they are gone.
    let second = compaction("c2", inputs, t.file("c2", 0, 9).await);
    let report = t.committer.compact(&[first, second], None).await;
    let got = results(&report);
    assert_eq!(got[0], TaskResult::Committed);
    assert!(matches!(got[1], TaskResult::Rejected { .. }), "{got:?}");
    let summary = t.loaded().await.metadata.current_snapshot().unwrap().summary().clone();
    assert_eq!(summary.operation, Operation::Replace);
    assert_eq!(t.records().await, 10, "compaction keeps every row");
    assert_eq!(t.offsets().await, vec![(0, 9)], "the offsets carry forward");
}

#[tokio::test]
async fn a_suspension_keeps_the_tables_tasks_until_it_is_resumed() {
    let t = Fixture::new();
    let suspend = SuspendTask::new(table(), "orders", 0, 3, "s0.log", "bad record");
    let task = t.task("s0", 0, 9).await;
    let tasks = [Task::Suspend(Box::new(suspend)), Task::Data(Box::new(task.clone()))];
    let report = t.committer.commit_all(&tasks, None).await;
    let got = results(&report);
    assert_eq!(got[0], TaskResult::Committed, "the suspension is in");
    assert!(
        matches!(&got[1], TaskResult::Failed { retryable: false, error } if error.contains("suspended")),
        "{got:?}"
    );
    t.committer.locks.set_suspended(&table().to_string(), None).await.unwrap();
    let report = t.committer.commit(&[task], None).await;
    assert_eq!(results(&report), vec![TaskResult::Committed]);
}
