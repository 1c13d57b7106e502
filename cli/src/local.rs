//! `floe local run`: the materializer and the committer in one process, on a folder of
//! segments (broker log dirs or tiered-storage keys), into a local warehouse with a
//! SQLite catalog named `floe` — the embedded default a new user tries first.
//!
//! ```text
//!  input/…/<topic>-<partition>/<offset>.log          ─┐
//!  input/…/<topic>-<id>/<partition>/<offset>-<id>.rsm-manifest ─┤─▶ Materializer (LocalObjects)
//!                                                      │        ─▶ InProcessQueue
//!                                                      └─▶ Committer (SqliteCatalog, SqliteLocks)
//!  warehouse/catalog.db, warehouse/<namespace>.db/<table>/{data,metadata}/…
//! ```
//!
//! Segments whose offsets the table already holds are skipped before any file is
//! written, so running again on the same input adds nothing, and on a folder with more
//! segments adds only those. A segment that cannot be read fails alone: the others, of
//! its table and of the rest, are still committed, and the run fails naming it.
//!
//! The lease of a table is looked at before its segments are materialized: a live run
//! committing it is reported at once; one that died (its owner names this host and a
//! process that is gone) is taken over.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use floe_core::catalog::Catalog;
use floe_core::catalog::sqlite::SqliteCatalog;
use floe_core::committer::{Committer, TaskResult};
use floe_core::config::FloeConfig;
use floe_core::lock::sqlite::SqliteLocks;
use floe_core::materializer::{LocalObjects, Materializer, ObjectRef, Outcome, TableLookup};
use floe_core::queue::InProcessQueue;
use floe_core::retry::RetryPolicy;
use floe_core::schema::formats::http_registry;
use floe_core::segment::{FileSource, Limits, ObjectKind, SegmentLayout, SegmentLocation, SegmentReader};
use floe_core::table::CatalogTables;
use floe_core::task::TableName;

/// What a run did, per table.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableReport {
    pub table: String,
    pub segments: usize,
    pub skipped_segments: usize,
    pub records: u64,
    /// Bad records left out (mode `skip`).
    pub skipped_records: u64,
    pub files: usize,
    pub snapshots: usize,
}

#[derive(Debug, Default, serde::Serialize)]
pub struct LocalReport {
    pub tables: Vec<TableReport>,
    pub ignored: Vec<String>,
    pub failed: Vec<String>,
}

/// The segment triggers under `input`, ordered by topic, partition and offset.
pub fn find_segments(input: &Path) -> std::io::Result<Vec<(String, SegmentLocation)>> {
    let mut out = Vec::new();
    let mut dirs = vec![input.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let Ok(rel) = path.strip_prefix(input) else { continue };
            let key = rel.to_string_lossy().replace('\\', "/");
            let Some(location) = SegmentLocation::parse(&key) else { continue };
            let trigger = matches!(
                (&location.kind, location.layout),
                (ObjectKind::Manifest, SegmentLayout::TieredStorage)
                    | (ObjectKind::Log, SegmentLayout::BrokerLogDir | SegmentLayout::LocalTieredStorage)
            );
            if trigger {
                out.push((key, location));
            }
        }
    }
    out.sort_by(|a, b| {
        (&a.1.topic, a.1.partition, a.1.base_offset, &a.0).cmp(&(&b.1.topic, b.1.partition, b.1.base_offset, &b.0))
    });
    Ok(out)
}

/// Runs materializer and committer over `input` into `warehouse`.
pub async fn run_local(input: &Path, warehouse: &Path, config: FloeConfig) -> anyhow::Result<LocalReport> {
    std::fs::create_dir_all(warehouse)?;
    let warehouse: PathBuf = std::fs::canonicalize(warehouse)?;
    let input = std::fs::canonicalize(input)?;
    let catalog = SqliteCatalog::open(&warehouse.join("catalog.db"), "floe")?;
    let locks = Arc::new(SqliteLocks::new(catalog.connection())?.waiting(LEASE_WAIT));
    let owner = floe_core::lock::sqlite::process_owner("floe-local");
    let file_io = floe_core::storage::local_file_io();
    let catalog: Arc<dyn Catalog> = Arc::new(catalog);
    let tables = Arc::new(CatalogTables { catalog: catalog.clone(), file_io: file_io.clone() });
    let queue = Arc::new(InProcessQueue::default());
    let config = Arc::new(config);
    let materializer = Materializer {
        registry: http_registry(&config)?,
        config: config.clone(),
        objects: Arc::new(LocalObjects::new(&input)),
        file_io: file_io.clone(),
        warehouse: warehouse.display().to_string(),
        queue: queue.clone(),
        tables: Some(tables.clone()),
        limits: Limits::default(),
    };
    let committer = Committer {
        catalog,
        file_io,
        locks: locks.clone(),
        warehouse: warehouse.display().to_string(),
        owner: owner.clone(),
        lease_ttl: std::time::Duration::from_secs(300),
        retry: RetryPolicy::default(),
    };

    let mut report = LocalReport::default();
    let mut by_table: std::collections::BTreeMap<String, TableReport> = Default::default();
    for (key, location) in find_segments(&input)? {
        let Some(topic) = config.resolve(&location.topic) else {
            report.ignored.push(format!("{key}: topic {:?} is not enabled", location.topic));
            continue;
        };
        let name = TableName { namespace: topic.namespace.clone(), name: topic.table.clone() };
        let entry = by_table
            .entry(name.to_string())
            .or_insert_with(|| TableReport { table: name.to_string(), ..Default::default() });
        // A suspended table takes nothing until it is resumed: its segments are not even
        // written (they would wait, uncommitted, for the resume anyway).
        if let Some(reason) = floe_core::lock::TableLocks::suspended(locks.as_ref(), &name.to_string()).await? {
            report.failed.push(format!("{key}: {name} is suspended: {reason}"));
            continue;
        }
        // Held by a live other run: said now, before any work on the segment.
        match floe_core::lock::TableLocks::peek(locks.as_ref(), &name.to_string(), &owner).await {
            Ok(None) => {}
            Ok(Some(holder)) => {
                report.failed.push(format!("{key}: {name} is being committed by another committer ({holder})"));
                continue;
            }
            Err(e) => {
                report.failed.push(format!("{key}: {e}"));
                continue;
            }
        }
        match already_committed(&tables, &name, &input, &key, &location).await {
            Ok(true) => {
                entry.skipped_segments += 1;
                continue;
            }
            Ok(false) => {}
            // The segment or the table's offsets cannot be read: this segment fails, not the run.
            Err(e) => {
                report.failed.push(format!("{key}: {e:#}"));
                continue;
            }
        }
        match materializer.handle(&ObjectRef::new("", &key)).await {
            Ok(Outcome::Queued(task)) => {
                entry.segments += 1;
                entry.skipped_records += task.skipped_records;
            }
            Ok(Outcome::Ignored { uri, reason }) => report.ignored.push(format!("{uri}: {reason}")),
            Err(e) => report.failed.push(format!("{key}: {e}")),
        }
        if queue.len() >= COMMIT_BATCH {
            commit(&committer, queue.drain(), &mut by_table, &mut report).await;
        }
    }
    commit(&committer, queue.drain(), &mut by_table, &mut report).await;
    report.tables = by_table.into_values().collect();
    Ok(report)
}

/// Resumes a suspended table of the warehouse (after an incompatible schema or a bad
/// record in `suspend` mode): its tasks are committed again from the next run. Returns
/// why it was suspended, or `None` when it was not.
pub async fn resume(warehouse: &Path, table: &str) -> anyhow::Result<Option<String>> {
    use floe_core::lock::TableLocks;
    let catalog = warehouse.join("catalog.db");
    anyhow::ensure!(catalog.is_file(), "no warehouse at {} (no catalog.db)", warehouse.display());
    let locks = SqliteLocks::new(SqliteCatalog::open(&catalog, "floe")?.connection())?;
    let reason = locks.suspended(table).await?;
    if reason.is_some() {
        locks.set_suspended(table, None).await?;
        tracing::info!(table, reason = reason.as_deref(), "table resumed");
    }
    Ok(reason)
}

/// One table of the warehouse as `floe local status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableStatus {
    pub table: String,
    pub snapshots: usize,
    /// Committed offset ranges per `topic-partition` (`0-99,120-200`).
    pub offsets: std::collections::BTreeMap<String, String>,
    /// Why the table is suspended, when it is.
    pub suspended: Option<String>,
    /// Why the table's metadata or committed offsets could not be read, when they could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Every table of the warehouse (and every suspended one): its snapshots, the Kafka
/// offsets it holds and whether it is suspended (and why).
pub async fn status(warehouse: &Path) -> anyhow::Result<Vec<TableStatus>> {
    use floe_core::lock::TableLocks;
    let path = warehouse.join("catalog.db");
    anyhow::ensure!(path.is_file(), "no warehouse at {} (no catalog.db)", warehouse.display());
    let catalog = SqliteCatalog::open(&path, "floe")?;
    let locks = SqliteLocks::new(catalog.connection())?;
    let namespaces = catalog.namespaces().await?;
    let catalog: Arc<dyn Catalog> = Arc::new(catalog);
    let tables = CatalogTables { catalog: catalog.clone(), file_io: floe_core::storage::local_file_io() };
    let mut out = Vec::new();
    for namespace in namespaces {
        for name in catalog.list(&namespace).await? {
            // What one table holds that cannot be read is shown on its line, not failing the others.
            let mut status = TableStatus {
                table: name.to_string(),
                snapshots: 0,
                offsets: Default::default(),
                suspended: locks.suspended(&name.to_string()).await?,
                problem: None,
            };
            match tables.load(&name).await {
                Ok(None) => continue,
                Ok(Some(loaded)) => {
                    status.snapshots = loaded.metadata.snapshots().count();
                    match floe_core::table::committed_offsets(&name, &loaded.metadata) {
                        Ok(committed) => {
                            status.offsets = committed
                                .partitions
                                .iter()
                                .map(|((t, p), r)| (format!("{t}-{p}"), r.encode()))
                                .collect()
                        }
                        // The table is named by the line already.
                        Err(floe_core::table::TableError::Summary { detail, .. }) => status.problem = Some(detail),
                        Err(e) => status.problem = Some(e.to_string()),
                    }
                }
                Err(e) => status.problem = Some(e.to_string()),
            }
            out.push(status);
        }
    }
    // A table stopped before its first commit has a status but no metadata yet.
    for (table, reason) in locks.suspended_tables().await? {
        if !out.iter().any(|t| t.table == table) {
            out.push(TableStatus {
                table,
                snapshots: 0,
                offsets: Default::default(),
                suspended: Some(reason),
                problem: None,
            });
        }
    }
    out.sort_by(|a, b| a.table.cmp(&b.table));
    Ok(out)
}

/// How long a commit waits for a live other run to release a table's lease.
const LEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Tasks committed together (one snapshot per table per batch).
const COMMIT_BATCH: usize = 100;

async fn commit(
    committer: &Committer,
    tasks: Vec<floe_core::task::Task>,
    by_table: &mut std::collections::BTreeMap<String, TableReport>,
    report: &mut LocalReport,
) {
    if tasks.is_empty() {
        return;
    }
    let done = committer.commit_all(&tasks, None).await;
    for (id, result) in &done.results {
        if let TaskResult::Failed { error, .. } = result {
            let source = tasks.iter().find_map(|t| match t {
                floe_core::task::Task::Data(t) if &t.task_id == id => Some(t.source.uri.as_str()),
                _ => None,
            });
            let source = source.unwrap_or_default();
            report.failed.push(format!("{source} (task {id}): {error}"));
        }
    }
    for snapshot in done.snapshots {
        let name = snapshot.table.to_string();
        let entry = by_table.entry(name.clone()).or_insert_with(|| TableReport { table: name, ..Default::default() });
        entry.records += snapshot.records;
        entry.files += snapshot.files;
        entry.snapshots += 1;
    }
}

/// Whether the table already holds every offset of the segment at `key`.
async fn already_committed(
    tables: &CatalogTables,
    name: &TableName,
    input: &Path,
    key: &str,
    location: &SegmentLocation,
) -> anyhow::Result<bool> {
    let Some(view) = tables.view(name).await? else { return Ok(false) };
    let Some(set) = view.committed.get(&location.topic, location.partition) else { return Ok(false) };
    let range = match location.kind {
        ObjectKind::Manifest => {
            let bytes = std::fs::read(input.join(key))?;
            let manifest = floe_core::segment::tiered::Manifest::parse(key, &bytes)?;
            manifest.remote_log_segment_metadata.map(|m| (m.start_offset, m.end_offset))
        }
        _ => {
            let mut reader = SegmentReader::open(Arc::new(FileSource::new(input.join(key))), Limits::default()).await?;
            while reader.next_batch().await?.is_some() {}
            let summary = reader.summary();
            summary.first_offset.zip(summary.last_offset)
        }
    };
    Ok(range.is_some_and(|(first, last)| set.covers(first, last)))
}

/// Runs [`run_local`] and prints what was done, per table; fails when any segment failed.
pub async fn run(
    input: &Path,
    warehouse: &Path,
    config: FloeConfig,
    mut out: impl Write,
) -> anyhow::Result<LocalReport> {
    let report = run_local(input, warehouse, config).await?;
    for t in &report.tables {
        writeln!(
            out,
            "{}: {} segment(s) materialized, {} already in the table; {} record(s) in {} file(s), {} snapshot(s){}",
            t.table,
            t.segments,
            t.skipped_segments,
            t.records,
            t.files,
            t.snapshots,
            match t.skipped_records {
                0 => String::new(),
                n => format!("; {n} bad record(s) skipped"),
            }
        )?;
    }
    for ignored in &report.ignored {
        writeln!(out, "ignored: {ignored}")?;
    }
    if report.tables.is_empty() {
        writeln!(out, "no segments found under {}", input.display())?;
    }
    let catalog = std::fs::canonicalize(warehouse)?.join("catalog.db");
    writeln!(out, "catalog: {} (SQLite, catalog name \"floe\")", catalog.display())?;
    if !report.failed.is_empty() {
        for failed in &report.failed {
            writeln!(out, "failed: {failed}")?;
        }
        anyhow::bail!("{} segment(s) failed; nothing of them was committed", report.failed.len());
    }
    Ok(report)
}
