//! `floe local run`: the materializer and the committer in one process, on a folder of
//! segments (broker log dirs or tiered-storage keys), into a local warehouse with a
//! SQLite catalog named `floe` — the embedded default a new user tries first — then
//! compaction and maintenance ([`crate::compact`]).
//!
//! ```text
//!  input/…/<topic>-<partition>/<offset>.log          ─┐
//!  input/…/<topic>-<id>/<partition>/<offset>-<id>.rsm-manifest ─┤─▶ Materializer (LocalObjects)
//!                                                      │        ─▶ HoldingQueue ─▶ InProcessQueue
//!                                                      └─▶ Committer (SqliteCatalog, SqliteLocks)
//!  then: Compactor ─▶ InProcessQueue ─▶ Committer
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
use std::path::Path;
use std::sync::Arc;

use floe_core::catalog::Access;
use floe_core::catalog::sqlite::SqliteCatalog;
use floe_core::committer::{Committer, TaskResult};
use floe_core::config::{CatalogConfig, FloeConfig};
use floe_core::formats::http_registry;
use floe_core::lock::sqlite::SqliteLocks;
use floe_core::lock::{Clock, TableLocks};
use floe_core::maintenance::holding::HoldingQueue;
use floe_core::maintenance::{MaintenanceEvent, TableRegistry};
use floe_core::materializer::{LocalObjects, Materializer, ObjectRef, Outcome, TableLookup};
use floe_core::segment::{FileSource, Limits, ObjectKind, SegmentLayout, SegmentLocation, SegmentReader};
use floe_core::table::CatalogTables;
use floe_core::task::TableName;

use crate::compact::TableCompaction;
use crate::health::{TableStatus, read_table};
use crate::warehouse::{Warehouse, folder};

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
    /// What compaction and maintenance did after the commits, per registered table.
    pub compactions: Vec<TableCompaction>,
    pub ignored: Vec<String>,
    /// Segments and tasks not committed, and why.
    pub failed: Vec<String>,
    /// Tables whose compaction or sweep failed after the commits, and why: what the run
    /// committed stands.
    pub maintenance_failed: Vec<String>,
}

impl LocalReport {
    /// What failed, for the run's error: what was not committed, and apart from it the
    /// maintenance that failed (the commits stand); `None` when nothing failed.
    pub fn failure(&self) -> Option<String> {
        let commits = match self.failed.len() {
            0 => None,
            n => Some(format!("{n} failure(s), listed above; a rerun retries them, skipping what is committed")),
        };
        let maintenance = match self.maintenance_failed.len() {
            0 => None,
            n => Some(format!(
                "maintenance failed for {n} table(s), listed above; what the run committed (listed above) stands"
            )),
        };
        match (commits, maintenance) {
            (Some(c), Some(m)) => Some(format!("{c}; {m}")),
            (c, m) => c.or(m),
        }
    }
}

/// What [`find_segments`] found under the input.
#[derive(Debug, Default)]
pub struct Found {
    /// The segment triggers (key relative to the input, location), ordered by topic,
    /// partition and offset.
    pub segments: Vec<(String, SegmentLocation)>,
    /// What looked like segments (or a folder of them) but is left out, and why.
    pub ignored: Vec<String>,
}

/// The segment triggers under `input`. Links are followed, but never into a folder
/// walked already (a link to a parent would loop forever); what looks like a segment
/// but cannot be one (a topic folder that is no Kafka topic name, a path that is not
/// UTF-8, something other than a regular file) is listed as ignored with the reason.
pub fn find_segments(input: &Path) -> std::io::Result<Found> {
    let mut found = Found::default();
    let mut ignored = std::collections::BTreeSet::new();
    let mut walked = std::collections::HashSet::new();
    let mut dirs = vec![input.to_path_buf()];
    let relative = |path: &Path| path.strip_prefix(input).unwrap_or(path).to_string_lossy().replace('\\', "/");
    while let Some(dir) = dirs.pop() {
        let real = std::fs::canonicalize(&dir).map_err(|e| annotate(e, &dir))?;
        if !walked.insert(real.clone()) {
            ignored.insert(format!(
                "{}: the same folder as one walked already ({}), not walked again",
                relative(&dir),
                real.display()
            ));
            continue;
        }
        for entry in std::fs::read_dir(&dir).map_err(|e| annotate(e, &dir))? {
            let path = entry.map_err(|e| annotate(e, &dir))?.path();
            // Follows links: a dangling one is a file that cannot be opened.
            let meta = std::fs::metadata(&path);
            if meta.as_ref().is_ok_and(|m| m.is_dir()) {
                dirs.push(path);
                continue;
            }
            let key = relative(&path);
            let looks_like_segment = key.ends_with(".log") || key.ends_with(".rsm-manifest");
            let folder = key.rsplit_once('/').map_or("", |(folder, _)| folder);
            if path.strip_prefix(input).ok().and_then(|p| p.to_str()).is_none() {
                if looks_like_segment {
                    ignored.insert(format!("{folder}/: the path is not UTF-8"));
                }
                continue;
            }
            let Some(location) = SegmentLocation::parse(&key) else {
                if let Some(why) = SegmentLocation::invalid_topic(&key)
                    && looks_like_segment
                {
                    ignored.insert(format!("{folder}/: not a topic's folder: {why}"));
                }
                continue;
            };
            let trigger = matches!(
                (&location.kind, location.layout),
                (ObjectKind::Manifest, SegmentLayout::TieredStorage)
                    | (ObjectKind::Log, SegmentLayout::BrokerLogDir | SegmentLayout::LocalTieredStorage)
            );
            if !trigger {
                continue;
            }
            match meta {
                Ok(m) if m.is_file() => found.segments.push((key, location)),
                Ok(_) => {
                    ignored.insert(format!("{key}: not a regular file"));
                }
                Err(e) => {
                    ignored.insert(format!("{key}: {e}"));
                }
            }
        }
    }
    found.segments.sort_by(|a, b| {
        (&a.1.topic, a.1.partition, a.1.base_offset, &a.0).cmp(&(&b.1.topic, b.1.partition, b.1.base_offset, &b.0))
    });
    found.ignored = ignored.into_iter().collect();
    Ok(found)
}

/// An I/O error with the path it is about (std's name none).
fn annotate(e: std::io::Error, path: &Path) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Runs materializer and committer over `input` into `warehouse`, then compaction and
/// maintenance on the wall clock.
pub async fn run_local(input: &Path, warehouse: &Path, config: FloeConfig) -> anyhow::Result<LocalReport> {
    run_local_on(input, warehouse, config, Clock::Wall).await
}

/// [`run_local`], its maintenance on `clock`: compaction's window and the sweep's grace
/// read it. Snapshots are stamped (and expired) on the wall clock still, never before
/// the table's last commit.
pub async fn run_local_on(
    input: &Path,
    warehouse: &Path,
    config: FloeConfig,
    clock: Clock,
) -> anyhow::Result<LocalReport> {
    run_local_at(input, warehouse, config, clock, Clock::Wall).await
}

/// [`run_local_on`], its commits stamped on `commits` (a host whose clock is wrong), never
/// before the table's last commit.
pub async fn run_local_at(
    input: &Path,
    warehouse: &Path,
    config: FloeConfig,
    clock: Clock,
    commits: Clock,
) -> anyhow::Result<LocalReport> {
    let mut warehouse = Warehouse::open(folder("--warehouse", warehouse, true)?, clock, &config).await?;
    warehouse.committer.clock = commits;
    let input = folder("--input", input, false)?;
    let Warehouse { locks, owner, queue, committer, .. } = &warehouse;
    warehouse.catalog.check_access(&config.configured_tables(), Access::Commit).await?;
    let tables = Arc::new(CatalogTables {
        catalog: warehouse.catalog.clone(),
        file_io: warehouse.file_io.clone(),
        delta_log: warehouse.delta_log.clone(),
    });
    let config = Arc::new(config);
    let materializer = Materializer {
        registry: http_registry(&config)?,
        config: config.clone(),
        objects: Arc::new(LocalObjects::new(&input)),
        file_io: warehouse.file_io.clone(),
        warehouse: warehouse.dir.display().to_string(),
        // Each task's files held until the committer is done with it, as on AWS.
        queue: Arc::new(HoldingQueue::new(queue.clone(), locks.clone())),
        tables: Some(tables.clone()),
        // A segment failing on its topic's configuration shows in status, as on AWS.
        table_registry: Some(committer.registry.clone()),
        limits: Limits::default(),
    };

    let found = find_segments(&input)?;
    let mut report = LocalReport { ignored: found.ignored, ..Default::default() };
    // Topics that would share a table with another: refused, both of them.
    let clashes = config.check_table_claims(found.segments.iter().map(|(_, l)| l.topic.as_str()));
    let refused: std::collections::BTreeSet<String> =
        clashes.iter().flat_map(|c| c.topics()).map(str::to_string).collect();
    for clash in &clashes {
        let left_out = found.segments.iter().filter(|(_, l)| clash.topics().contains(&l.topic.as_str())).count();
        report.failed.push(format!("{clash} ({left_out} segment(s) of theirs left out)"));
    }
    let mut by_table: std::collections::BTreeMap<String, TableReport> = Default::default();
    for (key, location) in found.segments {
        if refused.contains(&location.topic) {
            continue;
        }
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
        if let Some(reason) = TableLocks::suspended(locks.as_ref(), &name.to_string()).await? {
            report.failed.push(format!("{key}: {name} is suspended: {reason}"));
            continue;
        }
        // Held by a live other run: said now, before any work on the segment.
        match TableLocks::peek(locks.as_ref(), &name.to_string(), owner).await {
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
            commit(committer, queue.drain(), &mut by_table, &mut report).await;
        }
    }
    commit(committer, queue.drain(), &mut by_table, &mut report).await;
    report.tables = by_table.into_values().collect();
    let maintained = crate::compact::maintain(&warehouse, config).await;
    report.maintenance_failed.extend(maintained.iter().filter_map(|t| t.failed.clone()));
    report.compactions = maintained;
    Ok(report)
}

/// Resumes a suspended table of the warehouse (after an incompatible schema or a bad
/// record in `suspend` mode): its tasks are committed again from the next run. Returns
/// why it was suspended, or `None` when it was not.
pub async fn resume(warehouse: &Path, table: &str) -> anyhow::Result<Option<String>> {
    let catalog = warehouse.join("catalog.db");
    anyhow::ensure!(catalog.is_file(), "no warehouse at {} (no catalog.db)", warehouse.display());
    let locks = SqliteLocks::new(SqliteCatalog::open(&catalog, "floe")?.connection())?;
    let reason = locks.suspended(table).await?;
    if reason.is_some() {
        locks.set_suspended(table, None).await?;
        if let Some(name) = TableName::parse(table) {
            locks.record(&name, &MaintenanceEvent::SuspendedBy(None)).await?;
        }
        tracing::info!(table, reason = reason.as_deref(), "table resumed");
    }
    Ok(reason)
}

/// Carries out an operator's `decision` on a stranded transaction part of a table of
/// `warehouse` (in the catalog `config` names): one commit, now.
pub async fn resolve(
    warehouse: &Path,
    config: &FloeConfig,
    decision: &crate::resolve::Decision,
) -> anyhow::Result<String> {
    let dir = folder("--warehouse", warehouse, false)?;
    let warehouse = Warehouse::open(dir, Clock::Wall, config).await?;
    let tables = CatalogTables {
        catalog: warehouse.catalog.clone(),
        file_io: warehouse.file_io.clone(),
        delta_log: warehouse.delta_log.clone(),
    };
    crate::resolve::local(&warehouse.committer, &tables, decision).await
}

/// Every table of the warehouse (and every suspended one): its state, snapshots, the Kafka
/// offsets it holds, whether it is suspended (and why), and what maintenance did.
pub async fn status(warehouse: &Path) -> anyhow::Result<Vec<TableStatus>> {
    status_in(warehouse, &FloeConfig::default()).await
}

/// [`status`] of the tables in the catalog `config` names (the warehouse's SQLite one by
/// default): those of the catalog's namespaces that hold a table Floe registered or
/// that `config` names, with the warehouse's leases and maintenance records.
pub async fn status_in(warehouse: &Path, config: &FloeConfig) -> anyhow::Result<Vec<TableStatus>> {
    let path = warehouse.join("catalog.db");
    anyhow::ensure!(path.is_file(), "no warehouse at {} (no catalog.db)", warehouse.display());
    let sqlite = SqliteCatalog::open(&path, "floe")?;
    let locks = SqliteLocks::new(sqlite.connection())?;
    let registered = TableRegistry::tables(&locks).await?;
    let mut namespaces = std::collections::BTreeSet::new();
    if matches!(config.catalog, None | Some(floe_core::config::CatalogConfig::Sql)) {
        namespaces.extend(sqlite.namespaces().await?);
    }
    namespaces.extend(registered.iter().map(|r| r.table.namespace.clone()));
    namespaces.extend(config.configured_tables().into_iter().map(|t| t.namespace));
    let opened = floe_aws::catalogs::open(config, floe_aws::catalogs::Host::Local { sqlite }).await?;
    let (tables, catalog) = (opened.tables(), opened.catalog);
    let now_ms = floe_core::lock::now_ms();
    let mut out = Vec::new();
    for namespace in namespaces {
        for name in catalog.list(&namespace).await? {
            // What one table holds that cannot be read is shown on its line, not failing the others.
            let read = read_table(&tables, &locks, &name, now_ms).await?;
            if !read.found && read.readiness.unreadable.is_none() {
                continue;
            }
            let (suspended, maintenance) = (locks.suspended(&name.to_string()).await?, locks.status(&name).await?);
            out.push(TableStatus::new(
                name.to_string(),
                suspended,
                maintenance,
                read,
                &resume_command(warehouse, &name),
            ));
        }
    }
    // A table stopped before its first commit (suspended, or its topic's configuration
    // failing) has a status but no metadata yet.
    for registered in registered {
        let table = registered.table.to_string();
        if out.iter().any(|t| t.table == table) {
            continue;
        }
        let maintenance = locks.status(&registered.table).await?;
        if registered.suspended.is_some() || !maintenance.failing.is_empty() {
            let read = read_table(&tables, &locks, &registered.table, now_ms).await?;
            let resume = resume_command(warehouse, &registered.table);
            out.push(TableStatus::new(table, registered.suspended, maintenance, read, &resume));
        }
    }
    out.sort_by(|a, b| a.table.cmp(&b.table));
    Ok(out)
}

/// The command that resumes `table` of `warehouse`, as status shows it.
fn resume_command(warehouse: &Path, table: &TableName) -> String {
    format!("floe local resume {table} --warehouse {}", warehouse.display())
}

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
    let committed = view.committed.of_incarnation(&location.topic, location.topic_id.as_deref(), location.partition);
    let Some(set) = committed else { return Ok(false) };
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
    let catalog = config.catalog.clone();
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
    for line in report.compactions.iter().filter_map(TableCompaction::line) {
        writeln!(out, "{line}")?;
    }
    for ignored in &report.ignored {
        writeln!(out, "ignored: {ignored}")?;
    }
    if report.tables.is_empty() {
        writeln!(out, "no segments found under {}", input.display())?;
    }
    writeln!(out, "catalog: {}", catalog_line(warehouse, catalog.as_ref())?)?;
    for failed in &report.failed {
        writeln!(out, "failed: {failed}")?;
    }
    for failed in &report.maintenance_failed {
        writeln!(out, "maintenance failed: {failed}")?;
    }
    if let Some(failure) = report.failure() {
        anyhow::bail!(failure);
    }
    Ok(report)
}

/// Where a run's tables are registered, as its `catalog:` line says.
fn catalog_line(warehouse: &Path, catalog: Option<&CatalogConfig>) -> anyhow::Result<String> {
    Ok(match catalog {
        None | Some(CatalogConfig::Sql) => {
            let file = folder("--warehouse", warehouse, false)?.join("catalog.db");
            format!("{} (SQLite, catalog name \"floe\")", file.display())
        }
        Some(CatalogConfig::Rest(rest)) => match &rest.warehouse {
            Some(name) => format!("{} (REST, warehouse \"{name}\")", rest.uri),
            None => format!("{} (REST)", rest.uri),
        },
        Some(CatalogConfig::Glue) => "AWS Glue".to_string(),
        Some(CatalogConfig::S3Tables(tables)) => format!("{} (S3 Tables)", tables.table_bucket_arn),
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn example_segment() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/segments/orders-1/00000000000000000000.log")
    }

    /// `input/<folder>/00000000000000000000.log`, a copy of an example segment.
    fn segment_in(input: &Path, folder: impl AsRef<std::ffi::OsStr>) {
        let dir = input.join(folder.as_ref());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(example_segment(), dir.join("00000000000000000000.log")).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn the_walk_lists_what_it_leaves_out_and_ends_on_link_loops() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in");
        segment_in(&input, "orders-0");
        segment_in(&input, "bad topic-0");
        segment_in(&input, "commandes.été-0");
        segment_in(&input, "..-0");
        segment_in(&input, std::ffi::OsStr::from_bytes(b"t\xff-0"));
        // A link to the input itself, and one to a sibling: each folder is walked once.
        std::os::unix::fs::symlink(&input, input.join("loop")).unwrap();
        std::os::unix::fs::symlink(input.join("orders-0"), input.join("orders-0").join("again")).unwrap();
        // A dangling link and a FIFO named like segments: never opened.
        std::os::unix::fs::symlink("/no/such", input.join("orders-0/00000000000000000200.log")).unwrap();
        let fifo = input.join("orders-0/00000000000000000300.log");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());

        let found = find_segments(&std::fs::canonicalize(&input).unwrap()).unwrap();
        let keys: Vec<&str> = found.segments.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["orders-0/00000000000000000000.log"], "{:#?}", found.ignored);
        for expected in [
            "bad topic-0/: not a topic's folder: \"bad topic\" is not a Kafka topic name: it holds ' '",
            "commandes.été-0/: not a topic's folder: \"commandes.été\" is not a Kafka topic name: it holds 'é'",
            "..-0/: not a topic's folder: \"..\" is not a Kafka topic name: `.` and `..` are not topic names",
            "t\u{FFFD}-0/: the path is not UTF-8",
            "orders-0/00000000000000000200.log: No such file",
            "orders-0/00000000000000000300.log: not a regular file",
        ] {
            assert!(found.ignored.iter().any(|i| i.starts_with(expected)), "{expected}: {:#?}", found.ignored);
        }
        let walked_again = found.ignored.iter().filter(|i| i.contains("the same folder as one walked already")).count();
        assert_eq!(walked_again, 2, "{:#?}", found.ignored);
    }

    #[tokio::test]
    async fn topics_sharing_a_table_are_refused_the_others_run() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in");
        for topic in ["a.b", "a_b", "c"] {
            segment_in(&input, format!("{topic}-0"));
        }
        let mut out = Vec::new();
        let err = run(&input, &dir.path().join("wh"), FloeConfig::default(), &mut out).await.unwrap_err();
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains("kafka.c: 1 segment(s) materialized"), "{out}");
        assert!(!out.contains("kafka.a_b:"), "{out}");
        assert!(
            out.contains(
                "failed: topic \"a_b\" and topic \"a.b\" both map to table kafka.a_b; one table holds one topic"
            ),
            "{out}"
        );
        assert!(out.contains("(2 segment(s) of theirs left out)"), "{out}");
        assert_eq!(err.to_string(), "1 failure(s), listed above; a rerun retries them, skipping what is committed");
    }

    #[test]
    fn the_run_s_error_tells_commits_not_made_from_maintenance_failed() {
        let report = |failed: usize, maintenance: usize| LocalReport {
            failed: vec!["x".into(); failed],
            maintenance_failed: vec!["y".into(); maintenance],
            ..Default::default()
        };
        assert_eq!(report(0, 0).failure(), None);
        assert_eq!(
            report(2, 0).failure().unwrap(),
            "2 failure(s), listed above; a rerun retries them, skipping what is committed"
        );
        let maintenance =
            "maintenance failed for 1 table(s), listed above; what the run committed (listed above) stands";
        assert_eq!(report(0, 1).failure().unwrap(), maintenance);
        assert_eq!(
            report(1, 1).failure().unwrap(),
            format!("1 failure(s), listed above; a rerun retries them, skipping what is committed; {maintenance}")
        );
    }
}
