//! `floe audit`: proves from a table's *data* that it holds every committed Kafka record
//! exactly once, per partition — or names the offsets that break it.
//!
//! It reads the `_kafka` column of the current snapshot's live rows (delete files applied
//! as Iceberg readers apply them), and compares the offsets found with the ranges Floe
//! committed (`floe.offsets.*`, [`super::offsets`]):
//!
//! - an offset held by two rows or more is a **duplicate**;
//! - a row at an offset Floe never committed is an **uncommitted row**;
//! - a committed offset that no row holds is a **gap**, labelled by what explains it:
//!   - `deleted`: a row another engine's delete file removed (the offset is in the data
//!     files, read without their deletes; or, once a compaction applied the delete, in
//!     the offsets of the rows it left out, [`super::left_out`]);
//!   - `expired`: a row compaction removed past the topic's `retention`
//!     ([`super::retention`]; the offsets kept as [`super::left_out`] says);
//!   - `dead-letter`: its row is in the dead-letter table `<table>_dlq`;
//!   - `without-rows`: Floe wrote no row for it on purpose — a control record, a record
//!     of an aborted transaction, a compacted topic's hole, a bad record skipped, or a
//!     record of a transaction still waiting for its marker. Floe counts these per
//!     partition ([`super::rowless`]); the gaps left after the two labels above must
//!     number exactly that count (plus the rows of the pending transactions in the table
//!     state), else every one of them is `unexplained`;
//!   - `uncounted`: in committed ranges Floe did not count (committed by a version that
//!     kept no count, or a segment re-uploaded with other boundaries): not verifiable,
//!     reported, not a failure;
//!   - `unexplained`: what nothing above explains (a real loss, or rows removed by a
//!     rewrite that left no delete file).
//!
//! The table holds exactly once when there is no duplicate, no uncommitted row, no row
//! without an offset, and no unexplained gap.
//!
//! An upsert table (`mode = "upsert"`, [`super::keys`]) holds one row per key: the rows
//! its commits superseded (a later record of the key, a tombstone) are deleted, gaps
//! labelled `deleted` like any delete file's. Its rows are also compared with its key
//! index: each row must be the winning record of its key (**stale rows** otherwise: a
//! superseded record or a tombstone visible), and each live key's winning record must
//! be a row (**missing latest rows** otherwise), unless deleted by another engine or
//! expired.
//!
//! A topic deleted and created again under its name ([`super::offsets`]) restarts at
//! offset 0, and its rows name no incarnation: an offset both incarnations committed is
//! expected once per incarnation that committed it. There, the audit checks that a row
//! holds it (or a gap is explained) but cannot tell a second copy from the other
//! incarnation's row, nor whose row a counted offset without rows lacks: such offsets
//! are reported (`shared`), and the count of offsets without rows may exceed the gaps
//! by at most their number. Memory: the offsets are kept as ranges
//! (one per run of consecutive offsets found), merged as the rows stream in, never one
//! entry per row.

use std::collections::{BTreeMap, HashSet};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use futures::{StreamExt, TryStreamExt};
use iceberg::io::FileIO;
use iceberg::{NamespaceIdent, TableIdent};

use super::deletes::LiveDelete;
use super::left_out::LeftOut;
use super::offsets::{CommittedOffsets, RangeSet};
use super::rowless::RowlessOffsets;
use super::state::{STATE_KEY, TableState};
use super::{LoadedTable, TableError, TableName, committed_offsets, floe_summary, load, rowless_offsets};
use crate::catalog::Catalog;
use crate::retry::Retryable;
use crate::schema::layout::{KAFKA_COLUMN, OFFSET_FIELD};

/// The `_kafka` field holding the partition.
const PARTITION_FIELD: &str = "partition";
/// Rows per batch read.
const BATCH_ROWS: usize = 8192;

/// Why a table cannot be audited.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    Table(#[from] TableError),
    #[error("no table {0}")]
    NotFound(String),
    #[error("reading {table}: {source}")]
    Read { table: String, source: Box<iceberg::Error> },
    #[error("{table}: {detail}")]
    Column { table: String, detail: String },
}

impl Retryable for AuditError {
    fn retryable(&self) -> bool {
        match self {
            AuditError::Table(e) => e.retryable(),
            AuditError::Read { source, .. } => source.retryable(),
            AuditError::NotFound(_) | AuditError::Column { .. } => false,
        }
    }
}

/// What explains a gap (or that nothing does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GapReason {
    Deleted,
    Expired,
    DeadLetter,
    WithoutRows,
    Uncounted,
    Unexplained,
}

impl std::fmt::Display for GapReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GapReason::Deleted => {
                "deleted by a delete file (another engine's, or an upsert's: a later record of the key)"
            }
            GapReason::Expired => "past the topic's retention: removed by compaction",
            GapReason::DeadLetter => "dead letters, in the dead-letter table",
            GapReason::WithoutRows => {
                "no row on purpose, as Floe counted (control records, aborted transactions, \
                 compacted holes, skipped bad records, pending transactions)"
            }
            GapReason::Uncounted => "not verifiable: committed where Floe kept no count of offsets without rows",
            GapReason::Unexplained => "UNEXPLAINED",
        })
    }
}

/// Committed offsets no row holds, `first..=last`, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Gap {
    pub first: i64,
    pub last: i64,
    pub reason: GapReason,
}

/// One Kafka partition of the table, audited.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PartitionAudit {
    pub topic: String,
    pub partition: i32,
    /// The committed ranges (`0-99,120-200`).
    pub committed: String,
    /// Live rows of the partition.
    pub rows: u64,
    /// Offsets held by more than one row.
    pub duplicates: Vec<(i64, i64)>,
    /// Rows at offsets Floe never committed.
    pub uncommitted_rows: Vec<(i64, i64)>,
    /// Offsets that more than one incarnation of a re-created topic committed: each is
    /// checked to be held, not how many times (see the module docs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shared: Vec<(i64, i64)>,
    pub gaps: Vec<Gap>,
    /// Offsets without rows that Floe counted, with the pending transactions' rows.
    pub counted_without_rows: u64,
    /// Gaps beyond that count: offsets lost (which of the `unexplained` gaps, the data
    /// cannot tell).
    pub unexplained: u64,
    /// That count beyond the gaps: rows at offsets Floe wrote none for.
    pub surplus: u64,
    /// An upsert table's rows against its key index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upsert: Option<UpsertAudit>,
    pub exactly_once: bool,
}

/// An upsert table's rows of one partition against its key index.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UpsertAudit {
    /// Keys with a row, by the index.
    pub live_keys: u64,
    /// Rows that are not their key's winning record.
    pub stale_rows: Vec<(i64, i64)>,
    /// Winning records of live keys that no row holds (nor a delete or retention explains).
    pub missing_latest: Vec<(i64, i64)>,
}

impl UpsertAudit {
    fn of(latest: &RangeSet, present: &RangeSet, why: &Explanations) -> UpsertAudit {
        let missing = latest.difference(present).difference(&why.deleted).difference(&why.expired);
        UpsertAudit {
            live_keys: latest.count(),
            stale_rows: present.difference(latest).ranges().to_vec(),
            missing_latest: missing.ranges().to_vec(),
        }
    }

    fn holds(&self) -> bool {
        self.stale_rows.is_empty() && self.missing_latest.is_empty()
    }
}

/// A table audited.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AuditReport {
    pub table: String,
    pub snapshot_id: Option<i64>,
    pub partitions: Vec<PartitionAudit>,
    /// Rows without a partition or offset.
    pub rows_without_offset: u64,
    /// True when every partition holds every committed record once and nothing else
    /// (and so does the Delta mirror, when the table has one).
    pub exactly_once: bool,
    /// The table's Delta mirror, checked against the snapshot audited (filled by
    /// `floe_core::delta::check`, which reads Delta logs; `None`: no mirror).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta: Option<DeltaCheck>,
}

/// What the audit found of a table's Delta mirror: it holds the same rows as the Iceberg
/// table when it holds the same data files and the Iceberg table has no delete file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeltaCheck {
    pub version: i64,
    pub files: usize,
    /// Live Iceberg data files the Delta table lacks (its `add.path`s): it is behind.
    pub missing: Vec<String>,
    /// Delta files the Iceberg table has not live: rows twice, or never committed.
    pub extra: Vec<String>,
    /// Partitions whose `txn` version is not their last committed offset.
    pub offsets: Vec<String>,
    /// Files whose Delta deletion vector deletes another number of rows than the
    /// Iceberg table's deletes of them.
    pub vectors: Vec<String>,
}

impl DeltaCheck {
    /// Whether the Delta table holds exactly the Iceberg table's rows.
    pub fn same_rows(&self) -> bool {
        self.missing.is_empty() && self.extra.is_empty() && self.offsets.is_empty() && self.vectors.is_empty()
    }
}

impl AuditReport {
    /// The report with the Delta mirror's check: exactly once only if it holds the same rows.
    pub fn with_delta(self, delta: Option<DeltaCheck>) -> AuditReport {
        let exactly_once = self.exactly_once && delta.as_ref().is_none_or(DeltaCheck::same_rows);
        AuditReport { exactly_once, delta, ..self }
    }
}

/// The offsets found in rows of one partition, as runs merged as they come.
#[derive(Debug, Default)]
struct Tally {
    runs: Vec<(i64, i64)>,
    /// Runs at the last merge: the next comes once as many again have been added.
    merged_len: usize,
    duplicates: Vec<(i64, i64)>,
    rows: u64,
}

impl Tally {
    /// Adds the offsets of one batch, sorted.
    fn add_sorted(&mut self, offsets: &[i64]) {
        self.rows += offsets.len() as u64;
        let mut run: Option<(i64, i64)> = None;
        for &offset in offsets {
            run = match run {
                Some((a, b)) if offset == b => {
                    self.duplicates.push((offset, offset));
                    Some((a, b))
                }
                Some((a, b)) if offset == b + 1 => Some((a, offset)),
                Some(done) => {
                    self.runs.push(done);
                    Some((offset, offset))
                }
                None => Some((offset, offset)),
            };
        }
        self.runs.extend(run);
        if self.runs.len() > 2 * self.merged_len + 1024 {
            self.merge();
        }
    }

    /// Merges the runs: overlapping ones are duplicates, adjacent ones one run.
    fn merge(&mut self) {
        self.runs.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::with_capacity(self.runs.len());
        for &(a, b) in &self.runs {
            match merged.last_mut() {
                Some(last) if a <= last.1 => {
                    self.duplicates.push((a, b.min(last.1)));
                    last.1 = last.1.max(b);
                }
                Some(last) if a == last.1 + 1 => last.1 = b,
                _ => merged.push((a, b)),
            }
        }
        self.merged_len = merged.len();
        self.runs = merged;
    }

    fn present(&mut self) -> RangeSet {
        self.merge();
        RangeSet::from_ranges(std::mem::take(&mut self.runs))
    }
}

/// Every partition's tally of a table's rows, and how many rows had no offset.
#[derive(Debug, Default)]
struct Tallies {
    partitions: BTreeMap<i32, Tally>,
    without_offset: u64,
}

impl Tallies {
    fn add(&mut self, batch: &RecordBatch) -> Result<(), String> {
        let kafka = batch
            .column_by_name(KAFKA_COLUMN)
            .and_then(|k| k.as_struct_opt())
            .ok_or_else(|| format!("no {KAFKA_COLUMN} struct column"))?;
        let partitions = kafka
            .column_by_name(PARTITION_FIELD)
            .and_then(|c| c.as_primitive_opt::<Int32Type>())
            .ok_or_else(|| format!("no int {KAFKA_COLUMN}.{PARTITION_FIELD}"))?;
        let offsets = kafka
            .column_by_name(OFFSET_FIELD)
            .and_then(|c| c.as_primitive_opt::<Int64Type>())
            .ok_or_else(|| format!("no long {KAFKA_COLUMN}.{OFFSET_FIELD}"))?;
        let mut rows: Vec<(i32, i64)> = Vec::with_capacity(batch.num_rows());
        for i in 0..batch.num_rows() {
            if kafka.is_null(i) || partitions.is_null(i) || offsets.is_null(i) {
                self.without_offset += 1;
            } else {
                rows.push((partitions.value(i), offsets.value(i)));
            }
        }
        rows.sort_unstable();
        for chunk in rows.chunk_by(|a, b| a.0 == b.0) {
            let offsets: Vec<i64> = chunk.iter().map(|r| r.1).collect();
            self.partitions.entry(chunk[0].0).or_default().add_sorted(&offsets);
        }
        Ok(())
    }
}

/// What one read of a table found, per partition: offsets present, and duplicates.
#[derive(Debug, Default)]
struct Found {
    present: BTreeMap<i32, RangeSet>,
    duplicates: BTreeMap<i32, RangeSet>,
    rows: BTreeMap<i32, u64>,
    without_offset: u64,
}

/// Reads the `_kafka` column of the table's current rows: with `deletes` (its live delete
/// files, [`live_deletes`]) applied, or (`None`) the data files as they are.
///
/// iceberg-rust 0.10.1 reads no deletion vector (it would open the Puffin file as
/// Parquet): vectors are left out of its scan, and the rows they delete taken out of
/// what it read afterwards, found by position in their data files.
async fn read(loaded: &LoadedTable, file_io: &FileIO, deletes: Option<&[LiveDelete]>) -> Result<Found, AuditError> {
    let error = |source: iceberg::Error| AuditError::Read { table: loaded.name.to_string(), source: Box::new(source) };
    let apply_deletes = deletes.is_some();
    let deletes = deletes.unwrap_or_default();
    let vectors: HashSet<String> =
        deletes.iter().filter(|d| d.is_vector()).map(|d| d.file.file_path().to_string()).collect();
    let mut found = scan(loaded, file_io, apply_deletes, vectors).await?;
    if apply_deletes {
        let schema = loaded.metadata.current_schema();
        let id = |name: &str| schema.field_by_name(name).map(|f| f.id);
        let ids = id(&format!("{KAFKA_COLUMN}.{PARTITION_FIELD}")).zip(id(&format!("{KAFKA_COLUMN}.{OFFSET_FIELD}")));
        let mut deleted: BTreeMap<i32, Vec<(i64, i64)>> = BTreeMap::new();
        for vector in deletes.iter().filter(|d| d.is_vector()) {
            let Some((partition_id, offset_id)) = ids else { break };
            for (path, positions) in super::deletes::read::vector(file_io, &vector.file).await.map_err(error)? {
                let rows = super::deletes::read::kafka_rows(file_io, &path, partition_id, offset_id).await;
                let rows = rows.map_err(error)?;
                for row in positions.iter().filter_map(|&p| usize::try_from(p).ok().and_then(|p| rows.get(p)?.as_ref()))
                {
                    deleted.entry(row.0).or_default().push((row.1, row.1));
                }
            }
        }
        for (partition, ranges) in deleted {
            let gone = RangeSet::from_ranges(ranges);
            if let Some(present) = found.present.get_mut(&partition) {
                let held = present.intersection(&gone).count();
                *present = present.difference(&gone);
                found.rows.entry(partition).and_modify(|r| *r = r.saturating_sub(held));
            }
        }
    }
    Ok(found)
}

/// The live delete files of `loaded`'s current snapshot (none without one).
async fn live_deletes(loaded: &LoadedTable, file_io: &FileIO) -> Result<Vec<LiveDelete>, AuditError> {
    if loaded.metadata.current_snapshot().is_none() {
        return Ok(Vec::new());
    }
    let (_, deletes) = super::deletes::live_files(file_io, &loaded.metadata)
        .await
        .map_err(|e| AuditError::Read { table: loaded.name.to_string(), source: Box::new(e) })?;
    Ok(deletes)
}

/// [`read`] through iceberg-rust's scan, the Puffin files of `vectors` left out.
async fn scan(
    loaded: &LoadedTable,
    file_io: &FileIO,
    apply_deletes: bool,
    vectors: HashSet<String>,
) -> Result<Found, AuditError> {
    let name = loaded.name.to_string();
    let error = |source: iceberg::Error| AuditError::Read { table: name.clone(), source: Box::new(source) };
    if loaded.metadata.current_snapshot().is_none() {
        return Ok(Found::default());
    }
    let ident = TableIdent::new(NamespaceIdent::new(loaded.name.namespace.clone()), loaded.name.name.clone());
    let table = iceberg::table::Table::builder()
        .metadata(loaded.metadata.clone())
        .metadata_location(loaded.pointer.metadata_location.clone())
        .identifier(ident)
        .file_io(file_io.clone())
        .readonly(true)
        .runtime(iceberg::Runtime::current())
        .build()
        .map_err(error)?;
    let scan = table.scan().select([KAFKA_COLUMN]).build().map_err(error)?;
    let mut tasks = scan.plan_files().await.map_err(error)?;
    tasks = tasks
        .map_ok(move |mut task| {
            match apply_deletes {
                true => task.deletes.retain(|d| !vectors.contains(&d.file_path)),
                false => task.deletes.clear(),
            }
            task
        })
        .boxed();
    let reader = iceberg::arrow::ArrowReaderBuilder::new(file_io.clone(), iceberg::Runtime::current())
        .with_batch_size(BATCH_ROWS)
        .build();
    let mut batches = reader.read(tasks).map_err(error)?.stream();
    let mut tallies = Tallies::default();
    while let Some(batch) = batches.try_next().await.map_err(error)? {
        tallies.add(&batch).map_err(|detail| AuditError::Column { table: name.clone(), detail })?;
    }
    let mut found = Found { without_offset: tallies.without_offset, ..Found::default() };
    for (partition, mut tally) in tallies.partitions {
        found.present.insert(partition, tally.present());
        found.duplicates.insert(partition, RangeSet::from_ranges(std::mem::take(&mut tally.duplicates)));
        found.rows.insert(partition, tally.rows);
    }
    Ok(found)
}

/// What explains the gaps of one partition, besides its rows.
#[derive(Debug, Default)]
struct Explanations {
    /// Offsets in the data files that delete files removed.
    deleted: RangeSet,
    /// Offsets whose rows compaction removed past the topic's retention.
    expired: RangeSet,
    /// Offsets in the dead-letter table.
    dead_letters: RangeSet,
    /// Committed ranges Floe did not count.
    uncounted: RangeSet,
    /// Floe's count of offsets without rows, with the pending transactions' rows.
    counted: u64,
    /// Offsets more than one incarnation of the topic committed.
    shared: RangeSet,
    /// How many rows those are expected to hold beyond one each.
    repeated: u64,
}

/// Labels the gaps of a partition: `committed` less `present`, by `why`.
fn audit_partition(
    topic: &str,
    partition: i32,
    committed: &RangeSet,
    present: &RangeSet,
    rows: u64,
    duplicates: &RangeSet,
    why: &Explanations,
) -> PartitionAudit {
    let gaps = committed.difference(present);
    let deleted = gaps.intersection(&why.deleted);
    let rest = gaps.difference(&deleted);
    let expired = rest.intersection(&why.expired);
    let rest = rest.difference(&expired);
    let dead_letters = rest.intersection(&why.dead_letters);
    let rest = rest.difference(&dead_letters);
    let uncounted = rest.intersection(&why.uncounted);
    let rest = rest.difference(&uncounted);
    let (found, counted) = (rest.count(), why.counted);
    // Where incarnations overlap, a row stands for one of them: another's offset without
    // a row there is no gap.
    let (unexplained, surplus) = (found.saturating_sub(counted), counted.saturating_sub(found + why.repeated));
    let rest_reason = if unexplained == 0 && surplus == 0 { GapReason::WithoutRows } else { GapReason::Unexplained };
    let mut labelled: Vec<Gap> = [
        (deleted, GapReason::Deleted),
        (expired, GapReason::Expired),
        (dead_letters, GapReason::DeadLetter),
        (uncounted, GapReason::Uncounted),
        (rest, rest_reason),
    ]
    .iter()
    .flat_map(|(set, reason)| set.ranges().iter().map(|&(first, last)| Gap { first, last, reason: *reason }))
    .collect();
    labelled.sort_by_key(|g| g.first);
    let uncommitted = present.difference(committed);
    let duplicates = duplicates.difference(&why.shared);
    PartitionAudit {
        topic: topic.to_string(),
        partition,
        committed: committed.encode(),
        rows,
        duplicates: duplicates.ranges().to_vec(),
        uncommitted_rows: uncommitted.ranges().to_vec(),
        shared: why.shared.ranges().to_vec(),
        gaps: labelled,
        counted_without_rows: counted,
        unexplained,
        surplus,
        upsert: None,
        exactly_once: duplicates.is_empty() && uncommitted.is_empty() && unexplained == 0 && surplus == 0,
    }
}

/// Audits the table `name` of `catalog`: its current snapshot's rows against the offsets
/// Floe committed.
pub async fn audit(catalog: &dyn Catalog, file_io: &FileIO, name: &TableName) -> Result<AuditReport, AuditError> {
    let loaded = load(catalog, file_io, name).await?.ok_or_else(|| AuditError::NotFound(name.to_string()))?;
    let committed = committed_offsets(name, &loaded.metadata)?;
    let rowless = rowless_offsets(name, &loaded.metadata)?;
    let state = TableState::load(file_io, floe_summary(&loaded.metadata).get(STATE_KEY))
        .await
        .map_err(|e| AuditError::Read { table: name.to_string(), source: Box::new(e) })?;
    // The offsets whose rows compaction left out (deleted, or past the retention).
    let left_out = match &state.left_out {
        Some(path) => LeftOut::read(file_io, path)
            .await
            .map_err(|e| AuditError::Read { table: name.to_string(), source: Box::new(e) })?,
        None => LeftOut::default(),
    };
    let deletes = live_deletes(&loaded, file_io).await?;
    let live = read(&loaded, file_io, Some(&deletes)).await?;
    let latest = super::keys::live_offsets(file_io, &loaded.metadata)
        .await
        .map_err(|e| AuditError::Read { table: name.to_string(), source: Box::new(e) })?;
    // The data files as they are, when delete files may have removed rows from them.
    let raw = if deletes.is_empty() { None } else { Some(read(&loaded, file_io, None).await?) };
    let dead_letter_name = name.dead_letters();
    let dead_letters = match load(catalog, file_io, &dead_letter_name).await? {
        Some(dlq) => read(&dlq, file_io, Some(&live_deletes(&dlq, file_io).await?)).await?,
        None => Found::default(),
    };
    // One table holds one topic: the rows name no topic, the committed ranges do.
    let topic = committed.topic().unwrap_or_default().to_string();
    let mut partitions: Vec<i32> = committed.partitions.keys().map(|(_, p)| *p).collect();
    partitions.extend(live.present.keys());
    partitions.sort_unstable();
    partitions.dedup();
    let empty = RangeSet::default();
    let mut report = AuditReport {
        table: name.to_string(),
        snapshot_id: loaded.metadata.current_snapshot().map(|s| s.snapshot_id()),
        partitions: Vec::new(),
        rows_without_offset: live.without_offset,
        exactly_once: live.without_offset == 0,
        delta: None,
    };
    for partition in partitions {
        let present = live.present.get(&partition).unwrap_or(&empty);
        let logs = Logs::of(&committed, &rowless, &state, partition);
        let why = Explanations {
            deleted: raw
                .as_ref()
                .map(|r| r.present.get(&partition).unwrap_or(&empty).difference(present))
                .unwrap_or_default()
                .union(&left_out.of(partition).0),
            expired: left_out.of(partition).1,
            dead_letters: dead_letters.present.get(&partition).cloned().unwrap_or_default(),
            counted: logs.counted,
            uncounted: logs.uncounted,
            shared: logs.shared,
            repeated: logs.repeated,
        };
        let mut audited = audit_partition(
            &topic,
            partition,
            &logs.committed,
            present,
            live.rows.get(&partition).copied().unwrap_or_default(),
            live.duplicates.get(&partition).unwrap_or(&empty),
            &why,
        );
        if let Some(latest) = &latest {
            let upsert = UpsertAudit::of(latest.get(&partition).unwrap_or(&empty), present, &why);
            audited.exactly_once &= upsert.holds();
            audited.upsert = Some(upsert);
        }
        report.exactly_once &= audited.exactly_once;
        report.partitions.push(audited);
    }
    Ok(report)
}

/// A partition's committed offsets over every incarnation of the topic (one, unless the
/// topic was re-created).
#[derive(Debug, Default)]
struct Logs {
    committed: RangeSet,
    uncounted: RangeSet,
    counted: u64,
    shared: RangeSet,
    repeated: u64,
}

impl Logs {
    fn of(committed: &CommittedOffsets, rowless: &RowlessOffsets, state: &TableState, partition: i32) -> Logs {
        let mut logs = Logs::default();
        for (log, set) in committed.logs_of(partition) {
            logs.shared = logs.shared.union(&logs.committed.intersection(set));
            logs.repeated += logs.committed.intersection(set).count();
            logs.committed = logs.committed.union(set);
            let counts = rowless.get(log, partition).cloned().unwrap_or_default();
            let pending = pending_rows(state, committed, log, partition, &counts.uncounted);
            logs.counted += counts.count.saturating_add(pending);
            logs.uncounted = logs.uncounted.union(&counts.uncounted);
        }
        logs
    }
}

/// Rows of the transactions still waiting for their marker, in counted ranges: committed
/// offsets without rows until the marker comes (their dead letters too, mode `dlq`: no
/// row in either table until a COMMIT). A part stranded (its marker left before
/// it came, [`TableState::stranded`]) waits for nothing: its rows are missing.
fn pending_rows(
    state: &TableState,
    committed: &CommittedOffsets,
    topic: &str,
    partition: i32,
    uncounted: &RangeSet,
) -> u64 {
    let stranded = state.stranded(committed);
    state
        .pending
        .iter()
        .filter(|p| p.topic == topic && p.partition == partition && p.keep.is_none())
        .filter(|p| !stranded.iter().any(|s| std::ptr::eq(s.part, *p)))
        .filter(|p| !uncounted.overlaps(p.transaction.first_offset, p.transaction.last_offset))
        .flat_map(|p| p.transaction.files.iter().chain(&p.transaction.dead_letter_files).map(|f| f.record_count))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ranges: &[(i64, i64)]) -> RangeSet {
        RangeSet::from_ranges(ranges.to_vec())
    }

    #[test]
    fn an_upsert_row_not_its_key_s_latest_is_stale_and_a_latest_without_a_row_missing_unless_deleted() {
        let latest = set(&[(3, 3), (7, 7), (9, 9), (12, 12)]);
        let present = set(&[(2, 3), (7, 7)]);
        let why = Explanations { deleted: set(&[(12, 12)]), ..Explanations::default() };
        let audit = UpsertAudit::of(&latest, &present, &why);
        assert_eq!((audit.live_keys, audit.stale_rows.as_slice()), (4, &[(2, 2)][..]));
        assert_eq!(audit.missing_latest, [(9, 9)], "12 was deleted by another engine");
        assert!(!audit.holds());
        assert!(UpsertAudit::of(&latest, &set(&[(3, 3), (7, 7), (9, 9)]), &why).holds());
    }

    #[test]
    fn runs_merge_as_they_come_and_overlaps_are_duplicates() {
        let mut tally = Tally::default();
        tally.add_sorted(&[0, 1, 2, 2, 5, 6]);
        tally.add_sorted(&[3, 4, 6, 7]);
        tally.add_sorted(&[10, 11]);
        assert_eq!(tally.rows, 12);
        assert_eq!(tally.present().ranges(), &[(0, 7), (10, 11)]);
        assert_eq!(RangeSet::from_ranges(tally.duplicates).ranges(), &[(2, 2), (6, 6)]);
        // Many batches: merged on the way, the same result.
        let mut tally = Tally::default();
        for i in (0..10_000).rev() {
            tally.add_sorted(&[2 * i, 2 * i + 1]);
        }
        assert!(tally.runs.len() < 5_000, "merged on the way: {}", tally.runs.len());
        assert_eq!(tally.present().ranges(), &[(0, 19_999)]);
        assert!(tally.duplicates.is_empty());
    }

    #[test]
    fn gaps_are_labelled_by_what_explains_them() {
        // Committed 0..=99; rows at all but 10, 20..=21 (deleted), 30 (dead letter),
        // 40 and 41 (Floe counted 2), 90..=99 (uncounted).
        let committed = set(&[(0, 99)]);
        let present = set(&[(0, 9), (11, 19), (22, 29), (31, 39), (42, 89)]);
        let why = Explanations {
            deleted: set(&[(20, 21)]),
            dead_letters: set(&[(30, 30)]),
            uncounted: set(&[(90, 99)]),
            counted: 3,
            ..Explanations::default()
        };
        let audit = audit_partition("t", 0, &committed, &present, 90, &RangeSet::default(), &why);
        let reasons: Vec<(i64, i64, GapReason)> = audit.gaps.iter().map(|g| (g.first, g.last, g.reason)).collect();
        assert_eq!(
            reasons,
            [
                (10, 10, GapReason::WithoutRows),
                (20, 21, GapReason::Deleted),
                (30, 30, GapReason::DeadLetter),
                (40, 41, GapReason::WithoutRows),
                (90, 99, GapReason::Uncounted),
            ]
        );
        assert!(audit.exactly_once, "{audit:?}");
        // One offset more than Floe counted: a loss, among the gaps it cannot tell apart.
        let fewer = Explanations { counted: 2, ..why };
        let audit = audit_partition("t", 0, &committed, &present, 90, &RangeSet::default(), &fewer);
        assert_eq!((audit.unexplained, audit.surplus, audit.exactly_once), (1, 0, false));
        assert!(
            audit.gaps.iter().filter(|g| g.first == 10 || g.first == 40).all(|g| g.reason == GapReason::Unexplained)
        );
        // One fewer: a row where Floe wrote none.
        let more = Explanations { counted: 4, ..fewer };
        let audit = audit_partition("t", 0, &committed, &present, 90, &RangeSet::default(), &more);
        assert_eq!((audit.unexplained, audit.surplus, audit.exactly_once), (0, 1, false));
    }

    #[test]
    fn a_re_created_topic_s_offsets_are_expected_once_per_incarnation() {
        // The first incarnation committed 0..=9 (offset 9 a marker), the second 0..=4
        // (offset 2 a marker): 0..=4 twice, once each.
        let committed = CommittedOffsets::from_summary(&std::collections::BTreeMap::from([
            ("floe.topic-id.t".to_string(), "A".to_string()),
            ("floe.offsets.t.0".to_string(), "0-9".to_string()),
            ("floe.offsets.t~B.0".to_string(), "0-4".to_string()),
            ("floe.without-rows.t.0".to_string(), "1".to_string()),
            ("floe.without-rows.t~B.0".to_string(), "1".to_string()),
        ]))
        .unwrap();
        let summary = std::collections::BTreeMap::from([
            ("floe.without-rows.t.0".to_string(), "1".to_string()),
            ("floe.without-rows.t~B.0".to_string(), "1".to_string()),
        ]);
        let rowless = RowlessOffsets::from_summary(&summary, &committed).unwrap();
        let logs = Logs::of(&committed, &rowless, &TableState::default(), 0);
        assert_eq!(
            (logs.committed.encode(), logs.shared.encode(), logs.repeated, logs.counted),
            ("0-9".into(), "0-4".into(), 5, 2)
        );
        let why =
            Explanations { counted: logs.counted, shared: logs.shared, repeated: logs.repeated, ..Default::default() };
        // Rows 0..=8, 0, 1, 3, 4 again: 2 and 9 explained by the counts, the copies expected.
        let audit = audit_partition("t", 0, &logs.committed, &set(&[(0, 8)]), 13, &set(&[(0, 1), (3, 4)]), &why);
        assert!(audit.exactly_once, "{audit:?}");
        assert_eq!(audit.shared, vec![(0, 4)]);
        // A copy above the shared offsets is a duplicate still; gaps beyond the count a loss.
        let audit = audit_partition("t", 0, &logs.committed, &set(&[(0, 8)]), 14, &set(&[(0, 1), (6, 6)]), &why);
        assert_eq!((audit.duplicates.clone(), audit.exactly_once), (vec![(6, 6)], false));
        let audit = audit_partition("t", 0, &logs.committed, &set(&[(0, 6)]), 11, &set(&[(0, 1)]), &why);
        assert_eq!((audit.unexplained, audit.exactly_once), (1, false));
    }

    #[test]
    fn a_stranded_transaction_s_rows_are_missing_not_pending() {
        use crate::segment::TxnMarker;
        use crate::table::state::{Departed, PendingEntry};
        // Producer 7's part 1005..=1009 came after its producer's marker at 1090 left,
        // another of its markers (1050) having left before: stranded.
        let mut committed = CommittedOffsets::default();
        committed.insert("t", 0, 1000, 1099);
        let part = PendingEntry {
            topic: "t".into(),
            partition: 0,
            task_id: "s".into(),
            segment_first: Some(1000),
            transaction: crate::vocabulary::PendingTransaction {
                producer_id: 7,
                first_offset: 1005,
                last_offset: 1009,
                records: 5,
                files: vec![crate::vocabulary::TaskFile {
                    first_offset: 1005,
                    last_offset: 1009,
                    record_count: 5,
                    data_file: serde_json::json!({}),
                }],
                ..Default::default()
            },
            schema: iceberg::spec::Schema::builder().build().unwrap(),
            partition_spec: None,
            keep: None,
            pending_since_ms: None,
            transaction_timeout_ms: None,
            dead_letter_table: None,
        };
        let marker = TxnMarker { producer_id: 7, producer_epoch: 0, offset: 1090, commit: true, timestamp: None };
        let departed = Departed { topic: "t".into(), partition: 0, marker, below: Some(1050) };
        let mut state = TableState { pending: vec![part], ..Default::default() };
        let counts = std::collections::BTreeMap::from([("floe.without-rows.t.0".to_string(), "0".to_string())]);
        let rowless = RowlessOffsets::from_summary(&counts, &committed).unwrap();
        let counted = |state: &TableState| Logs::of(&committed, &rowless, state, 0).counted;
        assert_eq!(counted(&state), 5, "pending: its rows are explained while its marker may come");
        state.departed.push(departed);
        assert_eq!(counted(&state), 0, "stranded: its rows are missing");
    }

    #[test]
    fn duplicates_and_rows_outside_the_committed_ranges_fail() {
        let (committed, none) = (set(&[(0, 9)]), Explanations::default());
        let audit = audit_partition("t", 3, &committed, &set(&[(0, 9)]), 11, &set(&[(4, 4)]), &none);
        assert_eq!((audit.duplicates.clone(), audit.exactly_once), (vec![(4, 4)], false));
        let audit = audit_partition("t", 3, &committed, &set(&[(0, 12)]), 13, &RangeSet::default(), &none);
        assert_eq!((audit.uncommitted_rows.clone(), audit.exactly_once), (vec![(10, 12)], false));
        let audit = audit_partition("t", 3, &committed, &set(&[(0, 9)]), 10, &RangeSet::default(), &none);
        assert!(audit.exactly_once && audit.gaps.is_empty());
    }
}
