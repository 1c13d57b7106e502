//! Compaction planning and rewriting: a table's small live files, grouped by partition
//! value (and Kafka partition), packed in offset order into tumbling bins; a group's
//! emitted bins rewritten together into files of the target size in that partition; the
//! result (built in [`crate::maintenance::rewrite`]: this module knows tables, not
//! tasks) is a CompactionTask per group for the committer, which applies it only if
//! every input is still live.
//!
//! ```text
//!  live files (+ added-at) ─▶ small ones (< ¾ target) ─▶ groups: (partition value, Kafka partition)
//!    ─▶ by first offset, tumbling bins ≤ target + 10% of expected bytes (what the rows take
//!       once rewritten): a bin closes once it holds the target (full), or when the next
//!       file would overflow it, or at the group's end (short)
//!    ─▶ a group goes, all its bins, when one is full or has its oldest file past the
//!       window, and its rewrite gains (a full bin, or fewer files of the target than now)
//!    ─▶ per group, its bins as one ([`bins`]) ─▶ rewrite_files (the table's spec), one
//!       writer rolling at the target: outputs of the target (±10%) and one tail
//!       ─▶ one CompactionTask {removed, added}, its id a hash of (table, snapshot, inputs)
//! ```
//!
//! The planner is a pure function of the files, their added-at times (the timestamp of
//! the snapshot that added each, [`crate::table::snapshot::live_data_files_added`]), the [`CompactionPolicy`] and
//! `now_ms`. Files compacted before are gone from the live set, so the small files are
//! those written since the last compaction (plus the small tails of earlier outputs).
//!
//! Output size: a bin holds at most the target + 10% ([`CompactionPolicy::cap`]) of
//! expected bytes. Expected bytes: rows rewritten into large row groups take less than in
//! small files, so a small file counts for its rows at the bytes per row of the table's
//! large files (¼ target or more, [`expected_bytes`]); until the table has one, for its
//! size — an estimate that can be a quarter too high (the compaction benchmark). So the
//! sizes of the outputs do not rest on it: a group's emitted bins are rewritten by one
//! writer rolling at the target, which lands every output but the group's last within a
//! few percent of the target whatever the target (from 1 MiB) and the rows' compression
//! ([`crate::datafile`]); the last is the group's one tail.
//!
//! The plan settles: a group goes with all its small files, young ones too, so it is
//! left with one small file at most (its tail); outputs of the target are not small (¾
//! of it), so they are never candidates again. A group whose rewrite would not gain — no
//! bin reaching the target, and as many files of the target as it has now (two files of
//! 60% of it) — stays as it is. So a plan made right after a compaction finds nothing to
//! do, and the compactor commits (and competes with other writers for the table) only
//! when new small files came.
//!
//! Fresh files (the materializer's first file of a segment, written with a fast codec:
//! [`crate::datafile::Pages::Fresh`]) are small, and their rewrite always gains: it
//! compresses them with zstd. So a group holding one goes once its window is past, even
//! alone, and its outputs are zstd: compaction is where the rows get compressed well.
//!
//! A tail is a small file like the others, the first of the files written after it (by
//! offset): new small files are packed with it, and it is never rewritten alone (a group
//! goes with two files at least). A new tail, added at its compaction's time, waits a
//! window again unless new files fill a bin or are past the window.
//!
//! Other engines' row-level deletes ([`crate::table::deletes`]) are applied: a file's
//! position and equality deletes are read at the plan, and its rewrite leaves their rows
//! out. A file whose deletes remove many of its rows ([`worth_applying`]: 30% of them by
//! position, or 10 delete files) is a candidate whatever its size, and makes its group
//! go. A deletion vector counts as a position delete file naming one data file. The rewrite
//! reads each input's columns by field id into the current schema
//! ([`crate::table::project`]): files of older schemas, or of columns another engine
//! moved, renamed or dropped, compact into the table's columns.
//!
//! A bin never holds files of two partition values, so its outputs keep that value.
//! Grouping by Kafka partition too keeps each output's offsets from one Kafka partition
//! (output names carry the first offset, so they cannot collide) and its offset range
//! meaningful.

use std::collections::{BTreeMap, HashMap, HashSet};

use iceberg::io::FileIO;
use iceberg::spec::{DataFile, PrimitiveLiteral, Schema, Struct, TableMetadata};

use super::deletes::{OfFile, ScopedFile, TableDeletes, live_files};
use super::retention::{Retention, Verdict};
use super::snapshot::LiveFile;
use crate::config::{DEFAULT_COMPACTION_TARGET_SIZE, DEFAULT_COMPACTION_WINDOW_MS, TopicConfig};
use crate::datafile::is_fresh;
use crate::table::TableName;

/// Files at least this fraction of the target (¾, Iceberg's `min-file-size-bytes`
/// default) are left as they are.
const SMALL_NUMERATOR: u64 = 3;
const SMALL_DENOMINATOR: u64 = 4;

/// Files of at least this fraction of the target (¼) give the bytes per row that rows
/// take once compacted ([`expected_bytes`]).
const LARGE_DENOMINATOR: u64 = 4;

/// When bins are emitted: once they hold `target` bytes, or once their oldest file is
/// `window_ms` old.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionPolicy {
    pub target: u64,
    pub window_ms: u64,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        CompactionPolicy { target: DEFAULT_COMPACTION_TARGET_SIZE, window_ms: DEFAULT_COMPACTION_WINDOW_MS }
    }
}

impl From<&TopicConfig> for CompactionPolicy {
    fn from(topic: &TopicConfig) -> Self {
        CompactionPolicy { target: topic.compaction_target_size, window_ms: topic.compaction_window_ms }
    }
}

impl CompactionPolicy {
    /// The most bytes a bin holds: the target + 10%.
    pub fn cap(&self) -> u64 {
        self.target.saturating_add(self.target / 10)
    }

    /// Files below this size are compacted: ¾ of the target.
    pub fn small(&self) -> u64 {
        self.target / SMALL_DENOMINATOR * SMALL_NUMERATOR
    }
}

/// Why a bin is emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// Its files reach the target.
    Full,
    /// Under the target, its oldest file is past the window.
    Window,
    /// Under the target and young, rewritten along with its group's other bins (so the
    /// group is left with one small file, its tail).
    Along,
    /// It holds a file whose deleted rows make rewriting it worth it, whatever its size
    /// ([`worth_applying`]).
    Deletes,
    /// Its files hold rows past the topic's retention ([`crate::table::retention`]),
    /// whatever their sizes: rewritten without them, or removed.
    Retention,
}

/// Files to rewrite together: all of one partition value and one Kafka partition, in
/// the order of their first offset.
#[derive(Debug, Clone)]
pub struct Bin {
    pub partition: Struct,
    pub kafka_partition: i32,
    pub files: Vec<DataFile>,
    /// The bytes its rows are expected to take once rewritten ([`expected_bytes`]): what
    /// the target and the cap are held against.
    pub expected: u64,
    /// When its oldest file was added.
    pub oldest_ms: i64,
    pub trigger: Trigger,
}

impl Bin {
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.file_size_in_bytes()).sum()
    }
}

/// The value every row of `file` has in field `field_id` (from its bounds).
fn single_int(file: &DataFile, field_id: i32) -> Option<i32> {
    let (lower, upper) = (file.lower_bounds().get(&field_id)?, file.upper_bounds().get(&field_id)?);
    match (lower.literal(), upper.literal()) {
        (PrimitiveLiteral::Int(a), PrimitiveLiteral::Int(b)) if a == b => Some(*a),
        _ => None,
    }
}

/// The first Kafka offset of `file` (the lower bound of `_kafka.offset`).
fn first_offset(file: &DataFile, field_id: i32) -> Option<i64> {
    match file.lower_bounds().get(&field_id)?.literal() {
        PrimitiveLiteral::Long(o) => Some(*o),
        _ => None,
    }
}

/// Bytes per row of the table's large files (a quarter of the target or more: row
/// groups as large as a compaction writes; fresh files, of another codec, left out);
/// `None` until the table has one. Small files
/// take more per row (a dictionary and a footer per file, compression over short pages:
/// a third more in the compaction benchmark), so bins filled by their sizes would be
/// rewritten into files well under the target.
fn large_file_density(files: &[LiveFile], large: u64) -> Option<f64> {
    let (bytes, rows) = files
        .iter()
        .filter(|f| f.file.file_size_in_bytes() >= large && !is_fresh(f.file.file_path()))
        .fold((0u64, 0u64), |(b, r), f| (b.saturating_add(f.file.file_size_in_bytes()), r + f.file.record_count()));
    (rows > 0).then(|| bytes as f64 / rows as f64)
}

/// The bytes `file`'s rows are expected to take in a compaction's output: its rows at
/// `density` (the large files'), never more than the file; its size when there is no
/// density to go by.
pub fn expected_bytes(file: &DataFile, density: Option<f64>) -> u64 {
    let size = file.file_size_in_bytes();
    density.map_or(size, |d| ((file.record_count() as f64 * d) as u64).min(size))
}

/// A bin being filled.
struct Open {
    files: Vec<DataFile>,
    bytes: u64,
    oldest_ms: i64,
}

impl Open {
    fn new() -> Self {
        Open { files: Vec::new(), bytes: 0, oldest_ms: i64::MAX }
    }
}

/// `files`, in order, packed into tumbling bins of at most `cap` expected bytes: a bin
/// closes once it holds `target`, before a file that would overflow it, and at the end.
fn tumble(files: impl IntoIterator<Item = LiveFile>, density: Option<f64>, target: u64, cap: u64) -> Vec<Open> {
    let mut closed = Vec::new();
    let mut open = Open::new();
    for live in files {
        let size = expected_bytes(&live.file, density);
        if !open.files.is_empty() && open.bytes.saturating_add(size) > cap {
            closed.push(std::mem::replace(&mut open, Open::new()));
        }
        open.bytes = open.bytes.saturating_add(size);
        open.oldest_ms = open.oldest_ms.min(live.added_at_ms);
        open.files.push(live.file);
        if open.bytes >= target {
            closed.push(std::mem::replace(&mut open, Open::new()));
        }
    }
    if !open.files.is_empty() {
        closed.push(open);
    }
    closed
}

/// Bins to compact at `now_ms`: per (partition value, Kafka partition), the small files
/// (< ¾ target) in the order of their first offset, packed into tumbling bins of at most
/// the target + 10% of expected bytes ([`expected_bytes`]). A group goes once one of its
/// bins reaches the target or has its oldest file `window_ms` old, and when its rewrite
/// gains (`gains`); then with all its bins, rewritten together ([`per_group`]): one
/// writer rolling at the target, so the group is left with one file under the target
/// at most, and a plan right after finds nothing to do. Files whose Kafka partition or
/// first offset is unknown (no bounds) are left alone.
pub fn plan(files: Vec<LiveFile>, schema: &Schema, policy: CompactionPolicy, now_ms: i64) -> Vec<Bin> {
    plan_with_deletes(files, schema, policy, now_ms, |_| false)
}

/// [`plan`], where a file for which `worth` holds (its deleted rows: [`worth_applying`])
/// is a candidate whatever its size, and makes its group go.
pub fn plan_with_deletes(
    files: Vec<LiveFile>,
    schema: &Schema,
    policy: CompactionPolicy,
    now_ms: i64,
    worth: impl Fn(&DataFile) -> bool,
) -> Vec<Bin> {
    let (Some(partition_field), Some(offset_field)) =
        (schema.field_by_name("_kafka.partition").map(|f| f.id), schema.field_by_name("_kafka.offset").map(|f| f.id))
    else {
        return Vec::new();
    };
    let small = policy.small();
    let density = large_file_density(&files, policy.target / LARGE_DENOMINATOR);
    type Group = (Struct, Vec<(i64, LiveFile)>);
    let mut groups: BTreeMap<(String, i32), Group> = BTreeMap::new();
    let candidate = |f: &DataFile| f.file_size_in_bytes() < small || is_fresh(f.file_path()) || worth(f);
    for live in files.into_iter().filter(|f| candidate(&f.file)) {
        let (Some(kafka), Some(offset)) =
            (single_int(&live.file, partition_field), first_offset(&live.file, offset_field))
        else {
            continue;
        };
        // Ordered by the value's text: plans (and output names) do not depend on hashing.
        let key = (format!("{:?}", live.file.partition()), kafka);
        groups.entry(key).or_insert_with(|| (live.file.partition().clone(), Vec::new())).1.push((offset, live));
    }
    let window_ms = i64::try_from(policy.window_ms).unwrap_or(i64::MAX);
    let mut bins = Vec::new();
    for ((_, kafka_partition), (partition, mut files)) in groups {
        files.sort_by(|(a, fa), (b, fb)| a.cmp(b).then(fa.file.file_path().cmp(fb.file.file_path())));
        let files = files.into_iter().map(|(_, f)| f);
        let group: Vec<Bin> = tumble(files, density, policy.target, policy.cap())
            .into_iter()
            .map(|Open { files, bytes, oldest_ms }| {
                let trigger = if files.iter().any(&worth) {
                    Trigger::Deletes
                } else if bytes >= policy.target {
                    Trigger::Full
                } else if now_ms.saturating_sub(oldest_ms) >= window_ms {
                    Trigger::Window
                } else {
                    Trigger::Along
                };
                Bin { partition: partition.clone(), kafka_partition, files, expected: bytes, oldest_ms, trigger }
            })
            .collect();
        if group.iter().any(|b| b.trigger != Trigger::Along) && gains(&group, policy.target) {
            bins.extend(group);
        }
    }
    bins
}

/// Whether rewriting a group's bins gains anything: deletes to apply, a fresh file to
/// compress with zstd ([`crate::datafile::Pages::Fresh`]), a bin that reaches the
/// target, or rows that take fewer files of the target than they are in now.
fn gains(bins: &[Bin], target: u64) -> bool {
    let files: usize = bins.iter().map(|b| b.files.len()).sum();
    let expected: u64 = bins.iter().map(|b| b.expected).sum();
    bins.iter().any(|b| b.trigger == Trigger::Deletes)
        || bins.iter().flat_map(|b| &b.files).any(|f| is_fresh(f.file_path()))
        || files >= 2
            && (bins.iter().any(|b| b.trigger == Trigger::Full) || expected.div_ceil(target.max(1)) < files as u64)
}

/// A data file's deleted rows make rewriting it worth it, whatever its size, once its
/// position deletes remove this share of its rows (Iceberg's `delete-ratio-threshold`)…
pub const DELETE_RATIO: f64 = 0.3;
/// … or this many delete files apply to it (`delete-file-threshold`): each is read by
/// every reader of the file.
pub const DELETE_FILES: usize = 10;

/// Whether the deletes `of` a data file of `records` rows make rewriting it worth it.
pub fn worth_applying(records: u64, of: &OfFile) -> bool {
    of.files.len() >= DELETE_FILES || (records > 0 && of.position_rows as f64 >= DELETE_RATIO * records as f64)
}

/// The id of the task compacting `bin`, planned from snapshot `snapshot_id` of `table`:
/// a hash of the three, so planning the same snapshot again gives the same ids. The FIFO
/// queue deduplicates on it (a compactor run retried within SQS's five minutes queues
/// each bin once), and the registry holds the bin's outputs under it.
pub fn task_id(table: &TableName, snapshot_id: Option<i64>, bin: &Bin) -> String {
    let mut key = format!("{table}\0{}", snapshot_id.map_or_else(|| "none".to_string(), |id| id.to_string()));
    for file in &bin.files {
        key.push('\0');
        key.push_str(file.file_path());
    }
    format!("compaction-{:016x}", twox_hash::XxHash64::oneshot(0, key.as_bytes()))
}

/// What [`bins`] planned.
#[derive(Debug, Default)]
pub struct Planned {
    pub bins: Vec<Bin>,
    /// The sequence number of the snapshot planned from (the outputs keep it).
    pub sequence_number: Option<i64>,
    /// What other engines' delete files remove from each candidate file they apply to.
    pub deletes: HashMap<String, OfFile>,
    /// The table's delete files, read.
    pub table_deletes: TableDeletes,
    /// The retention the plan applied, and the files whose every row is past it
    /// (removed without a rewrite).
    pub retention: Option<Retention>,
    pub expired: HashSet<String>,
}

/// What to compact in the table's current snapshot at `now_ms`: first the files holding
/// rows past `retention` (bins of their own, `expiring_bins`), then the bins of
/// [`plan_with_deletes`] of the others, those of one group made one ([`per_group`]); with
/// the deletes that apply to each file (read: [`TableDeletes`]).
pub async fn bins(
    file_io: &FileIO,
    metadata: &TableMetadata,
    policy: CompactionPolicy,
    retention: Option<Retention>,
    now_ms: i64,
) -> iceberg::Result<Planned> {
    let schema = metadata.current_schema();
    let (data, deletes) = live_files(file_io, metadata).await?;
    let mut table_deletes = TableDeletes::scope(file_io, metadata, deletes).await?;
    let sequence_number = metadata.current_snapshot().map(|s| s.sequence_number());
    let mut planned = Planned { sequence_number, retention, ..Default::default() };
    let (mut files, mut expiring) = (Vec::with_capacity(data.len()), Vec::new());
    // The files deletes apply to, for their deletes to be read if they are rewritten.
    let mut deleted_from = HashMap::new();
    for scoped in data {
        let of = table_deletes.of(&scoped);
        if !of.files.is_empty() {
            planned.deletes.insert(scoped.path().to_string(), of);
            deleted_from.insert(scoped.path().to_string(), scoped.clone());
        }
        match retention.map_or(Verdict::Kept, |r| r.of(&scoped.live.file)) {
            Verdict::Kept => files.push(scoped.live),
            Verdict::Whole => {
                planned.expired.insert(scoped.path().to_string());
                expiring.push(scoped.live);
            }
            Verdict::Partly => expiring.push(scoped.live),
        }
    }
    let worth =
        |f: &DataFile| planned.deletes.get(f.file_path()).is_some_and(|of| worth_applying(f.record_count(), of));
    let compacted = per_group(plan_with_deletes(files, schema, policy, now_ms, worth));
    planned.bins = expiring_bins(expiring, schema);
    planned.bins.extend(compacted);
    // The deletes of the files to rewrite, read; those of the files left as they are, not.
    let rewritten: Vec<&ScopedFile> =
        planned.bins.iter().flat_map(|b| &b.files).filter_map(|f| deleted_from.get(f.file_path())).collect();
    table_deletes.read_for(file_io, metadata, &rewritten).await?;
    for scoped in rewritten {
        planned.deletes.insert(scoped.path().to_string(), table_deletes.of(scoped));
    }
    planned.table_deletes = table_deletes;
    Ok(planned)
}

/// The files holding rows past the retention, one bin per (partition value, Kafka
/// partition), whatever their sizes, in the order of their first offset; files of no
/// single Kafka partition (no bounds) are left as they are, with a warning.
fn expiring_bins(files: Vec<LiveFile>, schema: &Schema) -> Vec<Bin> {
    let (Some(partition_field), Some(offset_field)) =
        (schema.field_by_name("_kafka.partition").map(|f| f.id), schema.field_by_name("_kafka.offset").map(|f| f.id))
    else {
        return Vec::new();
    };
    let mut groups: BTreeMap<(String, i32), Bin> = BTreeMap::new();
    for live in files {
        let Some(kafka_partition) = single_int(&live.file, partition_field) else {
            tracing::warn!(
                file = live.file.file_path(),
                "rows past the retention in a file of no single Kafka partition: left"
            );
            continue;
        };
        let key = (format!("{:?}", live.file.partition()), kafka_partition);
        let bin = groups.entry(key).or_insert_with(|| Bin {
            partition: live.file.partition().clone(),
            kafka_partition,
            files: Vec::new(),
            expected: 0,
            oldest_ms: i64::MAX,
            trigger: Trigger::Retention,
        });
        bin.expected = bin.expected.saturating_add(live.file.file_size_in_bytes());
        bin.oldest_ms = bin.oldest_ms.min(live.added_at_ms);
        bin.files.push(live.file);
    }
    let mut bins: Vec<Bin> = groups.into_values().collect();
    for bin in &mut bins {
        bin.files.sort_by_key(|f| (first_offset(f, offset_field), f.file_path().to_string()));
    }
    bins
}

/// The emitted bins of each group as one bin, files in the order of the plan (by first
/// offset): rewritten by one writer, whose outputs are all of the target size but the
/// last, whatever the rows take once rewritten. `plan` emits a group's bins together.
pub fn per_group(bins: Vec<Bin>) -> Vec<Bin> {
    let mut merged: Vec<Bin> = Vec::new();
    for bin in bins {
        match merged.last_mut() {
            Some(last) if last.kafka_partition == bin.kafka_partition && last.partition == bin.partition => {
                last.files.extend(bin.files);
                last.expected += bin.expected;
                last.oldest_ms = last.oldest_ms.min(bin.oldest_ms);
                // Deletes or full if any is, else what made the group go.
                if bin.trigger == Trigger::Deletes
                    || bin.trigger == Trigger::Full && last.trigger != Trigger::Deletes
                    || last.trigger == Trigger::Along
                {
                    last.trigger = bin.trigger;
                }
            }
            _ => merged.push(bin),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat, Datum, Literal, PartitionSpec};

    use std::sync::Arc;

    use super::*;
    use crate::datafile::tests::{Payload, Rng, payload_rows};
    use crate::datafile::{Pages, TableWriter, WriterOptions};
    use crate::partition::tests::schema;
    use crate::table::rewrite::rewrite_files;

    const NOW: i64 = 1_800_000_000_000;
    const MINUTE: i64 = 60 * 1000;
    /// Target 100 bytes (small: < 75, cap: 110), window 15 minutes.
    const POLICY: CompactionPolicy = CompactionPolicy { target: 100, window_ms: 15 * 60 * 1000 };

    /// A file of `kafka` partition starting at `offset`, added `age` ms before [`NOW`],
    /// of a row per byte.
    fn file(name: &str, day: Option<i32>, kafka: i32, offset: i64, size: u64, age: i64) -> LiveFile {
        file_of_rows(name, day, kafka, offset, size, age, size)
    }

    /// The same, of `rows` rows.
    fn file_of_rows(name: &str, day: Option<i32>, kafka: i32, offset: i64, size: u64, age: i64, rows: u64) -> LiveFile {
        let lower = HashMap::from([(2, Datum::int(kafka)), (3, Datum::long(offset))]);
        let upper = HashMap::from([(2, Datum::int(kafka)), (3, Datum::long(offset + 9))]);
        let file = DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(format!("memory:///t/data/{name}.parquet"))
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::from_iter([day.map(Literal::date)]))
            .record_count(rows)
            .file_size_in_bytes(size)
            .lower_bounds(lower)
            .upper_bounds(upper)
            .build()
            .unwrap();
        LiveFile { file, added_at_ms: NOW - age }
    }

    /// Files of day 1, Kafka partition 0: (name, offset, size, age).
    fn files(spec: &[(&str, i64, u64, i64)]) -> Vec<LiveFile> {
        spec.iter().map(|&(n, o, size, age)| file(n, Some(1), 0, o, size, age)).collect()
    }

    fn names(bin: &Bin) -> Vec<String> {
        bin.files.iter().map(|f| f.file_path().rsplit('/').next().unwrap().replace(".parquet", "")).collect()
    }

    fn planned(files: Vec<LiveFile>, now: i64) -> Vec<(Vec<String>, Trigger)> {
        plan(files, &schema(), POLICY, now).iter().map(|b| (names(b), b.trigger)).collect()
    }

    fn v(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn files_reaching_the_target_are_emitted_even_when_young() {
        // 30 + 30 + 40 = 100, the target: a bin at once, "d" (young, alone) along.
        let young = files(&[("a", 0, 30, 0), ("b", 10, 30, 0), ("c", 20, 40, 0), ("d", 30, 20, 0)]);
        assert_eq!(planned(young, NOW), vec![(v(&["a", "b", "c"]), Trigger::Full), (v(&["d"]), Trigger::Along)]);
        // Under the target, young: nothing.
        assert!(planned(files(&[("a", 0, 30, 0), ("b", 10, 30, 0), ("c", 20, 39, 0)]), NOW).is_empty());
    }

    #[test]
    fn small_files_wait_for_the_window_then_go_under_the_target() {
        let young = || files(&[("a", 0, 20, 14 * MINUTE), ("b", 10, 20, MINUTE)]);
        assert!(planned(young(), NOW).is_empty(), "14 minutes old: waiting");
        // The same files one minute later: the oldest is 15 minutes old, the bin goes.
        assert_eq!(planned(young(), NOW + MINUTE), vec![(v(&["a", "b"]), Trigger::Window)]);
        // A single old small file is not rewritten: nothing gained.
        assert!(planned(files(&[("a", 0, 20, 60 * MINUTE)]), NOW).is_empty());
    }

    /// A fresh file (Snappy, named so) is rewritten once past its window, so that its
    /// rows end up zstd-compressed: alone, beside a file that would not gain otherwise,
    /// and when larger than compaction's small size.
    #[test]
    fn fresh_files_are_rewritten_past_their_window_even_alone() {
        let old = 20 * MINUTE;
        assert!(planned(files(&[("a.snappy", 0, 20, MINUTE)]), NOW).is_empty(), "young: waiting");
        assert_eq!(planned(files(&[("a.snappy", 0, 20, old)]), NOW), vec![(v(&["a.snappy"]), Trigger::Window)]);
        assert!(planned(files(&[("a", 0, 20, old)]), NOW).is_empty(), "not fresh: nothing gained");
        // Two files of 60: two files of the target either way, so only a fresh one makes them go.
        let two = |first: &str| files(&[(first, 0, 60, old), ("b", 10, 60, old)]);
        assert!(planned(two("a"), NOW).is_empty());
        assert_eq!(
            planned(two("a.snappy"), NOW),
            vec![(v(&["a.snappy"]), Trigger::Window), (v(&["b"]), Trigger::Window)]
        );
        assert_eq!(planned(files(&[("a.snappy", 0, 80, old)]), NOW), vec![(v(&["a.snappy"]), Trigger::Window)]);
    }

    #[test]
    fn files_near_the_target_are_left_alone() {
        let old = 60 * MINUTE;
        let live = files(&[("a", 0, 75, old), ("b", 10, 10, old), ("c", 20, 90, old), ("d", 30, 10, old)]);
        let bins = plan(live, &schema(), POLICY, NOW);
        assert_eq!(bins.iter().map(names).collect::<Vec<_>>(), vec![v(&["b", "d"])]);
        assert_eq!(bins[0].oldest_ms, NOW - old);
    }

    #[test]
    fn bins_follow_offsets_and_stay_within_the_cap() {
        // Given out of order; packed by first offset. 40 + 40 + 30 = 110 ≤ cap: full.
        // 70 then 70: the second would overflow (140 > 110), so the first closes alone;
        // 70 + 30 = 100: full. 10 + 10 young. All of the group goes, to one writer.
        let live = files(&[
            ("f", 50, 70, 0),
            ("c", 20, 30, 0),
            ("a", 0, 40, 0),
            ("e", 40, 70, 0),
            ("b", 10, 40, 0),
            ("g", 60, 30, 0),
            ("h", 70, 10, 0),
            ("i", 80, 10, 0),
        ]);
        let bins = plan(live, &schema(), POLICY, NOW);
        let shape: Vec<(Vec<String>, Trigger)> = bins.iter().map(|b| (names(b), b.trigger)).collect();
        assert_eq!(
            shape,
            vec![
                (v(&["a", "b", "c"]), Trigger::Full),
                (v(&["e"]), Trigger::Along),
                (v(&["f", "g"]), Trigger::Full),
                (v(&["h", "i"]), Trigger::Along)
            ]
        );
        assert!(bins.iter().all(|b| b.bytes() <= POLICY.cap()));
        // Everything old: the tail goes too; still no bin beyond the cap.
        let mut live = Vec::new();
        for i in 0..40 {
            live.push(file(&format!("x{i:02}"), Some(1), 0, i * 10, [13, 74, 5, 41, 60, 22, 33][i as usize % 7], 0));
        }
        let bins = plan(live, &schema(), POLICY, NOW + 16 * MINUTE);
        assert!(!bins.is_empty());
        assert!(
            bins.iter().all(|b| b.bytes() <= POLICY.cap()),
            "{:?}",
            bins.iter().map(Bin::bytes).collect::<Vec<_>>()
        );
        let firsts: Vec<i64> = bins.iter().flat_map(|b| b.files.iter().map(|f| first_offset(f, 3).unwrap())).collect();
        assert!(firsts.windows(2).all(|w| w[0] < w[1]), "{firsts:?}");
    }

    #[test]
    fn task_ids_follow_the_table_the_snapshot_and_the_files() {
        let old = 60 * MINUTE;
        let bins = plan(files(&[("a", 0, 20, old), ("b", 10, 20, old)]), &schema(), POLICY, NOW);
        let other = plan(files(&[("a", 0, 20, old), ("c", 10, 20, old)]), &schema(), POLICY, NOW);
        let t = |name: &str| TableName { namespace: "kafka".into(), name: name.into() };
        let id = task_id(&t("orders"), Some(7), &bins[0]);
        assert!(id.starts_with("compaction-") && id.len() == "compaction-".len() + 16, "{id}");
        // Planned again from the same snapshot (later, the same bin): the same id, which
        // the FIFO queue deduplicates on.
        let later = plan(files(&[("a", 0, 20, old), ("b", 10, 20, old)]), &schema(), POLICY, NOW + MINUTE);
        assert_eq!(task_id(&t("orders"), Some(7), &later[0]), id);
        for different in [
            task_id(&t("orders"), Some(8), &bins[0]),
            task_id(&t("orders"), None, &bins[0]),
            task_id(&t("payments"), Some(7), &bins[0]),
            task_id(&t("orders"), Some(7), &other[0]),
        ] {
            assert_ne!(different, id);
        }
    }

    #[test]
    fn bins_never_mix_partition_values_or_kafka_partitions() {
        // All old. Before the tumbling bins this test packed first-fit decreasing (b, a);
        // now bins follow offsets: a + b = 90, + c would be 120 > the cap: c alone, and
        // rewritten with them (one writer per group).
        let old = 60 * MINUTE;
        let files = vec![
            file("a", Some(1), 0, 0, 40, old),
            file("b", Some(1), 0, 10, 50, old),
            file("c", Some(1), 0, 20, 30, old),
            file("d", Some(2), 0, 0, 10, old),
            file("e", Some(2), 0, 10, 10, old),
            file("f", Some(1), 1, 0, 10, old),
            file("g", None, 0, 0, 10, old),
            file("h", None, 0, 10, 10, old),
            file("big", Some(1), 0, 30, 90, old),
            file("alone", Some(3), 0, 0, 10, old),
        ];
        let bins = plan(files, &schema(), POLICY, NOW);
        let got: Vec<(Option<Literal>, i32, Vec<String>)> =
            bins.iter().map(|b| (b.partition[0].clone(), b.kafka_partition, names(b))).collect();
        assert_eq!(
            got,
            vec![
                (None, 0, v(&["g", "h"])),
                (Some(Literal::date(1)), 0, v(&["a", "b"])),
                (Some(Literal::date(1)), 0, v(&["c"])),
                (Some(Literal::date(2)), 0, v(&["d", "e"])),
            ]
        );
        assert!(bins.iter().all(|b| b.bytes() <= POLICY.cap()));
    }

    /// (name, first offset, size, age) of day 1, Kafka partition 0, and the bins planned
    /// at `NOW + later` (names, trigger).
    struct Case {
        name: &'static str,
        files: &'static [(&'static str, i64, u64, i64)],
        later: i64,
        bins: &'static [(&'static [&'static str], Trigger)],
    }

    fn check(cases: &[Case]) {
        for case in cases {
            let want: Vec<(Vec<String>, Trigger)> = case.bins.iter().map(|(n, t)| (v(n), *t)).collect();
            assert_eq!(planned(files(case.files), NOW + case.later), want, "{}", case.name);
        }
    }

    const OLD: i64 = 60 * MINUTE;

    #[test]
    fn the_target_and_the_window_trigger_on_the_clock() {
        check(&[
            Case {
                name: "young, reaching the target: full at once",
                files: &[("a", 0, 60, 0), ("b", 10, 40, 0)],
                later: 0,
                bins: &[(&["a", "b"], Trigger::Full)],
            },
            Case {
                name: "young, under the target: waiting",
                files: &[("a", 0, 60, 10 * MINUTE), ("b", 10, 30, 0)],
                later: 5 * MINUTE - 1,
                bins: &[],
            },
            Case {
                name: "the oldest file 15 minutes old: the tail goes",
                files: &[("a", 0, 60, 10 * MINUTE), ("b", 10, 30, 0)],
                later: 5 * MINUTE,
                bins: &[(&["a", "b"], Trigger::Window)],
            },
            Case {
                name: "a full bin goes young, its group's young files along",
                files: &[("a", 0, 50, 0), ("b", 10, 50, 0), ("c", 20, 10, 0), ("d", 30, 10, 0)],
                later: 0,
                bins: &[(&["a", "b"], Trigger::Full), (&["c", "d"], Trigger::Along)],
            },
            Case {
                name: "the same a window later: the tail goes too",
                files: &[("a", 0, 50, 0), ("b", 10, 50, 0), ("c", 20, 10, 0), ("d", 30, 10, 0)],
                later: 15 * MINUTE,
                bins: &[(&["a", "b"], Trigger::Full), (&["c", "d"], Trigger::Window)],
            },
            Case {
                name: "an old tail with a new file goes: the old file is past the window",
                files: &[("tail", 0, 50, OLD), ("new", 10, 10, 0)],
                later: 0,
                bins: &[(&["tail", "new"], Trigger::Window)],
            },
            Case {
                name: "an old tail alone is never rewritten",
                files: &[("tail", 0, 50, OLD)],
                later: OLD,
                bins: &[],
            },
        ]);
    }

    #[test]
    fn a_group_goes_with_all_its_bins_when_it_gains() {
        check(&[
            Case {
                name: "pairs of 40 cannot reach the target (a third would pass the cap): all go, to one writer",
                files: &[
                    ("a", 0, 40, OLD),
                    ("b", 10, 40, OLD),
                    ("c", 20, 40, OLD),
                    ("d", 30, 40, OLD),
                    ("e", 40, 40, OLD),
                ],
                later: 0,
                bins: &[(&["a", "b"], Trigger::Window), (&["c", "d"], Trigger::Window), (&["e"], Trigger::Window)],
            },
            Case {
                name: "one bin past the window takes the young ones along",
                files: &[("a", 0, 40, 0), ("b", 10, 40, 0), ("c", 20, 40, OLD), ("d", 30, 40, OLD), ("e", 40, 40, OLD)],
                later: 0,
                bins: &[(&["a", "b"], Trigger::Along), (&["c", "d"], Trigger::Window), (&["e"], Trigger::Window)],
            },
            Case {
                name: "full bins around a short bin, and a tail",
                files: &[
                    ("a", 0, 30, OLD),
                    ("b", 10, 30, OLD),
                    ("c", 20, 40, OLD),
                    ("d", 30, 30, OLD),
                    ("e", 40, 30, OLD),
                    ("f", 50, 60, OLD),
                    ("g", 60, 20, OLD),
                    ("h", 70, 20, OLD),
                    ("i", 80, 10, 0),
                    ("j", 90, 10, 0),
                ],
                later: 0,
                bins: &[
                    (&["a", "b", "c"], Trigger::Full),
                    (&["d", "e"], Trigger::Window),
                    (&["f", "g", "h"], Trigger::Full),
                    (&["i", "j"], Trigger::Along),
                ],
            },
            Case {
                name: "d closed short before e, alone: rewritten with the others",
                files: &[("d", 30, 50, OLD), ("e", 40, 70, OLD), ("h", 70, 20, OLD), ("i", 80, 20, OLD)],
                later: 0,
                bins: &[(&["d"], Trigger::Window), (&["e", "h", "i"], Trigger::Full)],
            },
            Case {
                name: "three of 60 make two files: they go",
                files: &[("a", 0, 60, OLD), ("b", 10, 60, OLD), ("c", 20, 60, OLD)],
                later: 0,
                bins: &[(&["a"], Trigger::Window), (&["b"], Trigger::Window), (&["c"], Trigger::Window)],
            },
            Case {
                name: "two of 60 would make two files again: they stay",
                files: &[("a", 0, 60, OLD), ("b", 10, 60, OLD)],
                later: 0,
                bins: &[],
            },
        ]);
    }

    #[test]
    fn files_of_three_quarters_of_the_target_or_more_are_untouched() {
        const MIB: u64 = 1 << 20;
        let policy = CompactionPolicy { target: 128 * MIB, window_ms: POLICY.window_ms };
        let live = vec![
            file("a", Some(1), 0, 0, MIB, OLD),
            file("quarters", Some(1), 0, 10, 96 * MIB, OLD),
            file("b", Some(1), 0, 20, MIB, OLD),
            file("under", Some(1), 0, 30, 96 * MIB - 1, OLD),
            file("big", Some(1), 0, 40, 200 * MIB, OLD),
        ];
        let bins = plan(live, &schema(), policy, NOW);
        assert_eq!(bins.iter().map(names).collect::<Vec<_>>(), vec![v(&["a", "b", "under"])]);
    }

    #[test]
    fn a_thousand_files_of_one_mib_make_bins_of_the_target_and_one_tail() {
        const MIB: u64 = 1 << 20;
        let policy = CompactionPolicy::default();
        let live = |age| (0..1000).map(|i| file(&format!("f{i:04}"), None, 0, i * 10, MIB, age)).collect::<Vec<_>>();
        let shape = |bins: &[Bin]| bins.iter().map(|b| (b.files.len(), b.bytes() / MIB, b.trigger)).collect::<Vec<_>>();
        let full = vec![(128, 128, Trigger::Full); 7];
        // Young: the seven full bins go at once, the 104 left along with them.
        let mut along = full.clone();
        along.push((104, 104, Trigger::Along));
        assert_eq!(shape(&plan(live(0), &schema(), policy, NOW)), along);
        let bins = plan(live(OLD), &schema(), policy, NOW);
        let mut with_tail = full.clone();
        with_tail.push((104, 104, Trigger::Window));
        assert_eq!(shape(&bins), with_tail);
        let firsts: Vec<i64> = bins.iter().flat_map(|b| b.files.iter().map(|f| first_offset(f, 3).unwrap())).collect();
        assert_eq!(firsts, (0..1000).map(|i| i * 10).collect::<Vec<_>>(), "every file once, in offset order");
    }

    #[test]
    fn a_group_s_bins_are_rewritten_as_one_and_groups_stay_apart() {
        const MIB: u64 = 1 << 20;
        let policy = CompactionPolicy::default();
        let mut live: Vec<LiveFile> = (0..1000).map(|i| file(&format!("a{i:04}"), None, 0, i * 10, MIB, OLD)).collect();
        live.extend((0..300).map(|i| file(&format!("b{i:04}"), None, 1, i * 10, MIB, 0)));
        let planned = plan(live, &schema(), policy, NOW);
        assert_eq!(planned.len(), 8 + 3, "eight bins of partition 0, two full ones of partition 1 and its rest");
        let merged = per_group(planned.clone());
        let shape: Vec<(i32, usize, Trigger)> =
            merged.iter().map(|b| (b.kafka_partition, b.files.len(), b.trigger)).collect();
        assert_eq!(shape, [(0, 1000, Trigger::Full), (1, 300, Trigger::Full)]);
        let in_order = |bins: &[Bin]| {
            bins.iter().flat_map(|b| b.files.iter().map(|f| f.file_path().to_string())).collect::<Vec<_>>()
        };
        assert_eq!(in_order(&merged), in_order(&planned), "the same files, in the plan's order");
        assert_eq!(merged[0].expected, 1000 * MIB);
        assert_eq!(merged[0].oldest_ms, planned[0].oldest_ms);
    }

    /// Runs the planner every 5 minutes for `runs` runs, a file of the next size in
    /// `sizes` arriving every `every` ms while any is left; each group's files become, as
    /// the writer writes them, files of the target and a tail, added at the run. Checks,
    /// at every run, what any plan must hold — among it that a plan right after finds
    /// nothing — and returns the live files at the end.
    fn simulate(sizes: &[u64], every: i64, runs: i64) -> Vec<LiveFile> {
        let mut live: Vec<LiveFile> = Vec::new();
        let (mut arrived, mut outputs) = (0, std::collections::HashSet::new());
        for run in 0..runs {
            let now = NOW + run * 5 * MINUTE;
            while arrived < sizes.len() && arrived as i64 * every <= run * 5 * MINUTE {
                let age = run * 5 * MINUTE - arrived as i64 * every;
                live.push(file(&format!("in{arrived:03}"), Some(1), 0, arrived as i64 * 100, sizes[arrived], -age));
                live.last_mut().unwrap().added_at_ms = now - age;
                arrived += 1;
            }
            for (i, group) in per_group(plan(live.clone(), &schema(), POLICY, now)).iter().enumerate() {
                assert!(group.files.len() >= 2, "run {run}: {:?}", names(group));
                assert!(
                    group.files.iter().any(|f| !outputs.contains(f.file_path())),
                    "run {run}: earlier outputs rewritten without a new file: {:?}",
                    names(group)
                );
                let gone: Vec<&str> = group.files.iter().map(|f| f.file_path()).collect();
                live.retain(|l| !gone.contains(&l.file.file_path()));
                let first = group.files.iter().map(|f| first_offset(f, 3).unwrap()).min().unwrap();
                let (mut left, mut k) = (group.bytes(), 0);
                while left > 0 {
                    let size = left.min(POLICY.target);
                    let mut out = file(&format!("out{run}-{i}-{k}"), Some(1), 0, first + k, size, 0);
                    out.added_at_ms = now;
                    outputs.insert(out.file.file_path().to_string());
                    live.push(out);
                    (left, k) = (left - size, k + 1);
                }
            }
            let again = plan(live.clone(), &schema(), POLICY, now);
            assert!(
                again.is_empty(),
                "run {run}: planned again at once: {:?}",
                again.iter().map(names).collect::<Vec<_>>()
            );
        }
        assert_eq!(live.iter().map(|l| l.file.file_size_in_bytes()).sum::<u64>(), sizes.iter().sum::<u64>());
        live
    }

    /// `inputs` files of `payload` rows of about a quarter of `target` each (the writer's
    /// real files), added an hour ago.
    async fn quarter_files(dir: &std::path::Path, target: u64, payload: Payload, inputs: usize) -> Vec<LiveFile> {
        let schema = Arc::new(schema());
        let options = WriterOptions {
            file_io: FileIO::new_with_fs(),
            dir: dir.join("in").display().to_string(),
            partition: 0,
            source_id: "segment".into(),
            schema: schema.clone(),
            target_size: target / 4,
            pages: Pages::Zstd,
        };
        let mut writer = TableWriter::new(options, Arc::new(PartitionSpec::unpartition_spec())).unwrap();
        let (mut rng, mut offset, rows) = (Rng(11), 0, 1000);
        loop {
            let batch = payload_rows(&schema, offset, rows, payload, &mut rng);
            writer.write(&batch, offset, offset + rows as i64 - 1).await.unwrap();
            offset += rows as i64;
            if let TableWriter::Unpartitioned(w) = &writer
                && w.closed() >= inputs
            {
                break;
            }
        }
        let written = writer.close().await.unwrap();
        written.into_iter().take(inputs).map(|f| LiveFile { file: f.data_file, added_at_ms: NOW - OLD }).collect()
    }

    #[tokio::test]
    async fn a_compaction_at_a_small_target_settles_with_the_writer_s_real_sizes() {
        const MIB: u64 = 1 << 20;
        for target in [MIB, 2 * MIB] {
            for payload in [Payload::Random, Payload::Json] {
                let dir = tempfile::tempdir().unwrap();
                let policy = CompactionPolicy { target, window_ms: POLICY.window_ms };
                let mut live = quarter_files(dir.path(), target, payload, 9).await;
                let groups = per_group(plan(live.clone(), &schema(), policy, NOW));
                assert_eq!(groups.len(), 1, "{payload:?} at {target}");
                let output = WriterOptions {
                    file_io: FileIO::new_with_fs(),
                    dir: dir.path().join("out").display().to_string(),
                    partition: 0,
                    source_id: "compaction".into(),
                    schema: Arc::new(schema()),
                    target_size: target,
                    pages: Pages::Zstd,
                };
                let paths: Vec<&str> = groups[0].files.iter().map(|f| f.file_path()).collect();
                let written =
                    rewrite_files(output, &PartitionSpec::unpartition_spec(), &paths, None, None).await.unwrap();
                let sizes: Vec<u64> = written.iter().map(|f| f.data_file.file_size_in_bytes()).collect();
                let off = |s: u64| (s as f64 / target as f64 - 1.0).abs();
                assert!(
                    sizes.len() >= 2 && sizes[..sizes.len() - 1].iter().all(|&s| off(s) <= 0.1),
                    "{payload:?} at {target}: outputs {sizes:?}"
                );
                live.retain(|l| !paths.contains(&l.file.file_path()));
                live.extend(written.into_iter().map(|f| LiveFile { file: f.data_file, added_at_ms: NOW }));
                // Right after, and a day later: nothing to do.
                for later in [0, 24 * 60 * MINUTE] {
                    let again = plan(live.clone(), &schema(), policy, NOW + later);
                    assert!(again.is_empty(), "{payload:?} at {target}: outputs {sizes:?} planned again");
                }
            }
        }
    }

    #[test]
    fn a_tail_takes_new_files_and_is_never_rewritten_alone() {
        // A file of 7 every 10 minutes for 5 hours, then 2 hours of nothing.
        let live = simulate(&[7; 30], 10 * MINUTE, 7 * 12);
        let small: Vec<u64> =
            live.iter().map(|l| l.file.file_size_in_bytes()).filter(|&s| s < POLICY.small()).collect();
        assert_eq!(small.len(), 1, "one tail left: {small:?}");
        assert!(plan(live, &schema(), POLICY, NOW + 365 * 24 * 60 * MINUTE).is_empty(), "nothing left to do");
    }

    #[test]
    fn files_of_any_size_settle_within_the_rules() {
        // (a cycle of sizes, 60 files, one every so many minutes), then hours of nothing.
        let cases: [(&[u64], i64); 4] = [
            (&[13, 74, 5, 41, 60, 22, 33, 90, 2], 3),
            (&[13, 74, 5, 41, 60, 22, 33, 90, 2], 1),
            (&[40], 1),
            (&[55, 20], 2),
        ];
        for (cycle, every) in cases {
            let sizes: Vec<u64> = (0..60).map(|i| cycle[i % cycle.len()]).collect();
            let live = simulate(&sizes, every * MINUTE, 6 * 12);
            let later = NOW + 365 * 24 * 60 * MINUTE;
            assert!(plan(live, &schema(), POLICY, later).is_empty(), "{cycle:?}: nothing left to do");
        }
    }

    #[test]
    fn small_files_count_for_their_rows_at_the_large_files_bytes_per_row() {
        // Twelve small files of 20 bytes and 10 rows; a large file (≥ ¼ target) of one
        // byte per row.
        let smalls = || (0..12).map(|i| file_of_rows(&format!("s{i:02}"), Some(1), 0, i * 10, 20, OLD, 10));
        let shape =
            |bins: Vec<Bin>| bins.iter().map(|b| (b.files.len(), b.expected, b.bytes(), b.trigger)).collect::<Vec<_>>();
        // No large file: by their sizes.
        assert_eq!(
            shape(plan(smalls().collect(), &schema(), POLICY, NOW)),
            vec![(5, 100, 100, Trigger::Full), (5, 100, 100, Trigger::Full), (2, 40, 40, Trigger::Window)]
        );
        let mut live: Vec<LiveFile> = smalls().collect();
        live.push(file_of_rows("large", Some(1), 0, 200, 90, OLD, 90));
        assert_eq!(
            shape(plan(live, &schema(), POLICY, NOW)),
            vec![(10, 100, 200, Trigger::Full), (2, 20, 40, Trigger::Window)]
        );
        // Denser small files than the large ones count for their sizes.
        let dense = file_of_rows("dense", Some(1), 0, 0, 40, OLD, 1000);
        assert_eq!(expected_bytes(&dense.file, Some(1.0)), 40);
    }

    #[test]
    fn a_file_whose_deletes_make_it_worth_it_is_rewritten_whatever_its_size() {
        // Of the target and young: left as it is, unless its deleted rows make it worth it.
        let live = files(&[("big", 0, 100, 0), ("other", 10, 100, 0)]);
        assert!(plan_with_deletes(live.clone(), &schema(), POLICY, NOW, |_| false).is_empty());
        let bins = plan_with_deletes(live, &schema(), POLICY, NOW, |f| f.file_path().contains("big"));
        let planned: Vec<_> = bins.iter().map(|b| (names(b), b.trigger)).collect();
        assert_eq!(planned, [(v(&["big"]), Trigger::Deletes)]);
    }

    #[test]
    fn worth_applying_by_the_share_of_deleted_rows_or_the_count_of_delete_files() {
        let of = |position_rows, files| OfFile { position_rows, files: vec!["d".into(); files], ..Default::default() };
        assert!(!worth_applying(100, &of(29, 1)));
        assert!(worth_applying(100, &of(30, 1)));
        assert!(worth_applying(100, &of(0, DELETE_FILES)));
        assert!(!worth_applying(0, &of(0, DELETE_FILES - 1)));
    }
}
