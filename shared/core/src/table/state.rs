//! Transactions a segment left open, kept by the table until their marker arrives.
//!
//! A segment can end inside a transaction: its records are written to files, but only
//! the COMMIT marker (in a later segment) makes them rows; an ABORT means never. The
//! committer keeps those files here, in a JSON file of the table's metadata directory
//! named by the snapshot summary's `floe.state` (so the pending list changes atomically
//! with the snapshot that records the segment's offsets as committed; the orphan sweep
//! keeps the file and the pending files of every retained snapshot's state), and
//! resolves them when a later task brings the marker. Nothing is guessed. A marker that
//! arrives before its transaction's earlier segments (tasks out of order) is kept here
//! too, until no part of its transaction can still come.
//!
//! Two facts of Kafka decide it. (1) A producer id has at most one transaction open per
//! partition, so a marker M (producer P, offset m) ends exactly P's records between P's
//! previous marker and m. (2) A transaction lasts at most `transaction_timeout` τ (the
//! brokers' `transaction.max.timeout.ms`, per topic in `floe.toml`, default 15 minutes):
//! the coordinator aborts it after that, so M, written at broker time T, ends no record
//! appended before T − τ.
//!
//! ```text
//!  offsets ─▶   a          o                   l                      m
//!  committed    [══════════════════════════════╪══════════════════════╪══]  one run
//!  broker time             t ◀── an anchor: a marker, or a LogAppendTime batch
//!  producer P     ░ M0 ░      ▓▓ part E ▓▓▓▓▓▓▓              ▓▓▓    M (P, time T)
//!
//!  match:  E (P, epoch ≤ M's) ─▶ M  when M is P's first marker above E and every offset
//!          in (l, m) is committed (a marker of P there would be in the state: see below)
//!          COMMIT ⇒ E's files appended; ABORT ⇒ never
//!  leave:  M leaves the state, once no part of P waits below it, when the committed run
//!          holding m shows that every offset that may hold its transaction is in:
//!            the run starts at offset 0 (nothing lies below), or
//!            it holds a marker M0 of P below m (fact 1: M's records lie above M0), or
//!            it holds an anchor (o, t) below m with t < T − τ − 5 min (fact 2: every
//!            record below o was appended by t, too early to be M's)
//! ```
//!
//! Which clock: only the broker's. A control batch's timestamp is the partition leader's
//! clock when it wrote the marker, and a `LogAppendTime` topic's batches carry the time
//! the broker appended them; the log is appended in offset order, so every record below
//! such an anchor was appended by its time. `CreateTime` is what the producer set (old
//! events replayed, a skewed clock): it says nothing about when the record was appended,
//! so it is never used. The 5 minutes of margin cover clock skew between brokers (a
//! leader change), the coordinator's timeout check and writing the markers; a marker
//! written later still (a partition offline when its transaction ended) needs a larger
//! `transaction_timeout`.
//!
//! Why a marker that left is never missed: it left only once every offset that may hold
//! its transaction was committed, and each part there was then matched; a part arriving
//! later lies below all of them and is not its. While a part of P waits below a marker,
//! the marker stays, so a part never skips a marker of its producer that it might belong to.
//!
//! What stays when every segment is in: no part, and, in a run of offsets not starting at
//! 0 (retention moved the log start, or Floe started late), the run's lowest anchor
//! (`anchors`: one per run not starting at 0) and each producer's first marker in the run
//! written within τ (+ margin) of that anchor — a segment below the run could still hold
//! its transaction.
//!
//! When τ is wrong (the brokers' `transaction.max.timeout.ms` above the topic's
//! `transaction_timeout`), a marker may leave while a part of its transaction is still to
//! come. So each marker that leaves a run not starting at 0 is remembered (`departed`:
//! per producer, its highest such marker and the offset of the one before it). A part
//! that comes below its producer's departed marker D, every offset between them
//! committed:
//!
//! ```text
//!  offsets ─▶  ··· b ········· [ part E ] ═══════ committed ═══════ D (P)
//!  b < E: no other marker of P that left lies between ─▶ D is E's marker: resolved by it
//!  b > E: E's marker may be another that left         ─▶ stranded: never guessed, kept
//!         pending; status shows the table degraded and the audit fails, naming the
//!         offsets and `transaction_timeout`
//! ```
//!
//! One leaves once every offset below it is committed (nothing can come below it then);
//! at most [`DEPARTED_LIMIT`] are kept per partition (the lowest go first).

use iceberg::io::FileIO;
use iceberg::spec::{PartitionSpec, Schema};
use serde::{Deserialize, Serialize};

use super::dead_letters::DueDeadLetters;
use super::offsets::CommittedOffsets;
use crate::segment::TxnMarker;
use crate::vocabulary::{PendingTransaction, TableName, TaskFile};

/// Summary key naming the state file.
pub const STATE_KEY: &str = "floe.state";

pub use crate::config::DEFAULT_TRANSACTION_TIMEOUT_MS;

/// Added to the transaction timeout before a broker time proves a marker's transaction
/// complete: clock skew between brokers, the coordinator's timeout check, marker writes.
pub const CLOCK_MARGIN_MS: i64 = 5 * 60 * 1000;

/// An open transaction's files, as a task brought them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingEntry {
    pub topic: String,
    pub partition: i32,
    pub task_id: String,
    /// First offset of the segment the part came in (older state files: unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_first: Option<i64>,
    pub transaction: PendingTransaction,
    /// The schema the files were written with.
    pub schema: Schema,
    /// The partition spec they are laid out by; `None`: unpartitioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_spec: Option<PartitionSpec>,
    /// The part's offsets the table did not hold when it came (a segment re-cut at other
    /// boundaries, its part straddling committed offsets): only its records there are
    /// added, its files rewritten filtered. `None`: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<Vec<(i64, i64)>>,
    /// When the committer committed the part pending (wall clock, ms; older state files:
    /// the first commit that wrote the state again), for [`TableState::hanging`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_since_ms: Option<i64>,
    /// The topic's transaction timeout when the part came (older state files: the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction_timeout_ms: Option<u64>,
    /// Where its dead letters go once it commits (none: it has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_table: Option<TableName>,
}

/// A transaction waiting for its marker longer than its topic's `transaction_timeout`,
/// by the wall clock since its first part was committed pending. Information, not a
/// failure: the segment with its marker may not be rolled yet (a quiet partition), or
/// may never come (lost); status shows it until the marker comes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HangingTransaction {
    pub topic: String,
    pub partition: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The offsets of its pending parts: the lowest first and the highest last.
    pub first_offset: i64,
    pub last_offset: i64,
    /// When its first part was committed pending (ms since the epoch).
    pub pending_since_ms: i64,
    pub transaction_timeout_ms: u64,
}

/// A marker whose transaction may still have parts to come.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkerEntry {
    pub topic: String,
    pub partition: i32,
    pub marker: TxnMarker,
    /// First offset of the segment the marker came in.
    pub segment_first: i64,
    /// The topic's transaction timeout when the marker came (older state files: the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction_timeout_ms: Option<u64>,
}

/// A marker that left the state from a run not starting at 0: its producer's highest, and
/// the offset of the producer's one before it (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Departed {
    pub topic: String,
    pub partition: i32,
    pub marker: TxnMarker,
    /// The producer's previous departed marker's offset, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below: Option<i64>,
}

/// How many departed markers a partition keeps: one per transactional producer, the
/// lowest dropped first past it.
pub const DEPARTED_LIMIT: usize = 4096;

/// A broker time known at an offset: every record below `offset` was appended by
/// `timestamp`. The lowest known of each run of committed offsets is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anchor {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
}

impl PendingEntry {
    /// Whether `m` may end this part: the same producer id, on the same topic-partition,
    /// an epoch no newer than the marker's (a bumped epoch's records follow the marker
    /// that fenced the old one), below it.
    fn may_end_at(&self, m: &MarkerEntry) -> bool {
        self.topic == m.topic
            && self.partition == m.partition
            && self.transaction.producer_id == m.marker.producer_id
            && self.transaction.producer_epoch <= m.marker.producer_epoch
            && self.transaction.last_offset < m.marker.offset
    }

    /// The broker time of its first record, when its topic has `LogAppendTime`.
    fn anchor(&self) -> Option<Anchor> {
        let t = &self.transaction;
        let timestamp = t.first_timestamp.filter(|_| t.log_append_time)?;
        Some(Anchor { topic: self.topic.clone(), partition: self.partition, offset: t.first_offset, timestamp })
    }
}

impl MarkerEntry {
    fn anchor(&self) -> Option<Anchor> {
        let timestamp = self.marker.timestamp?;
        Some(Anchor { topic: self.topic.clone(), partition: self.partition, offset: self.marker.offset, timestamp })
    }

    /// The oldest broker time a record of its transaction may have been appended at.
    fn earliest_record_time(&self) -> Option<i64> {
        let timeout = self.transaction_timeout_ms.unwrap_or(DEFAULT_TRANSACTION_TIMEOUT_MS);
        let timeout = i64::try_from(timeout).unwrap_or(i64::MAX);
        Some(self.marker.timestamp?.saturating_sub(timeout).saturating_sub(CLOCK_MARGIN_MS))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TableState {
    pub pending: Vec<PendingEntry>,
    pub markers: Vec<MarkerEntry>,
    /// The lowest broker time known in each run of committed offsets that does not start
    /// at 0 (older state files: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub anchors: Vec<Anchor>,
    /// Markers that left runs not starting at 0, per producer (older state files: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub departed: Vec<Departed>,
    /// Dead letters of committed transactions, waiting for their dead-letter table
    /// ([`super::dead_letters`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dead_letters: Vec<DueDeadLetters>,
    /// The last number given to an entry of `dead_letters` (none is given twice).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dead_letter_seq: u64,
    /// The file of the offsets whose rows compaction left out (other engines' deletes
    /// applied, rows past the retention): [`super::left_out`] (older state files: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_out: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// An open transaction's part whose marker may have left before it came: its producer's
/// marker at `marker_offset` was written later than the topic's transaction timeout
/// after its records, and another of its markers that left may lie between.
#[derive(Debug, Clone, PartialEq)]
pub struct Stranded<'a> {
    pub part: &'a PendingEntry,
    pub marker_offset: i64,
}

/// What resolving did: transactions to append now, and how many were aborted.
#[derive(Debug, Default)]
pub struct Resolved {
    pub committed: Vec<PendingEntry>,
    pub aborted: Vec<PendingEntry>,
}

/// The run of committed offsets holding `offset`, as `(first, last)`.
fn run_holding(committed: &CommittedOffsets, topic: &str, partition: i32, offset: i64) -> Option<(i64, i64)> {
    let ranges = committed.get(topic, partition)?.ranges();
    ranges.iter().find(|&&(a, b)| a <= offset && offset <= b).copied()
}

impl TableState {
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
            && self.markers.is_empty()
            && self.anchors.is_empty()
            && self.departed.is_empty()
            && self.dead_letters.is_empty()
            && self.dead_letter_seq == 0
            && self.left_out.is_none()
    }

    /// Every file the state keeps: its parts' files and dead letters, and the dead letters
    /// waiting for their table.
    pub fn files(&self) -> impl Iterator<Item = &TaskFile> {
        let parts =
            self.pending.iter().flat_map(|e| e.transaction.files.iter().chain(&e.transaction.dead_letter_files));
        parts.chain(self.dead_letters.iter().flat_map(|d| &d.files))
    }

    /// Marks the parts not yet marked as pending since `now_ms` (the commit writing them).
    pub fn mark_pending_since(&mut self, now_ms: i64) {
        for entry in self.pending.iter_mut().filter(|e| e.pending_since_ms.is_none()) {
            entry.pending_since_ms = Some(now_ms);
        }
    }

    /// The transactions (parts of one producer and epoch on one topic-partition) pending
    /// longer than their `transaction_timeout` at `now_ms`; parts without a time (older
    /// state files, until the next commit) are not judged.
    pub fn hanging(&self, now_ms: i64) -> Vec<HangingTransaction> {
        let mut hanging: Vec<HangingTransaction> = Vec::new();
        for entry in &self.pending {
            let Some(since) = entry.pending_since_ms else { continue };
            let timeout = entry.transaction_timeout_ms.unwrap_or(DEFAULT_TRANSACTION_TIMEOUT_MS);
            if now_ms.saturating_sub(since) <= i64::try_from(timeout).unwrap_or(i64::MAX) {
                continue;
            }
            let t = &entry.transaction;
            let same = |h: &&mut HangingTransaction| {
                (h.topic.as_str(), h.partition, h.producer_id, h.producer_epoch)
                    == (entry.topic.as_str(), entry.partition, t.producer_id, t.producer_epoch)
            };
            match hanging.iter_mut().find(same) {
                Some(h) => {
                    h.first_offset = h.first_offset.min(t.first_offset);
                    h.last_offset = h.last_offset.max(t.last_offset);
                    h.pending_since_ms = h.pending_since_ms.min(since);
                }
                None => hanging.push(HangingTransaction {
                    topic: entry.topic.clone(),
                    partition: entry.partition,
                    producer_id: t.producer_id,
                    producer_epoch: t.producer_epoch,
                    first_offset: t.first_offset,
                    last_offset: t.last_offset,
                    pending_since_ms: since,
                    transaction_timeout_ms: timeout,
                }),
            }
        }
        hanging
    }

    /// Reads the state a summary names (empty when it names none).
    pub async fn load(file_io: &FileIO, location: Option<&String>) -> iceberg::Result<TableState> {
        let Some(location) = location else { return Ok(TableState::default()) };
        let bytes = file_io.new_input(location)?.read().await?;
        serde_json::from_slice(&bytes)
            .map_err(|e| iceberg::Error::new(iceberg::ErrorKind::DataInvalid, format!("table state {location}: {e}")))
    }

    /// Writes the state into `metadata_dir`; returns its location.
    pub async fn save(&self, file_io: &FileIO, metadata_dir: &str) -> iceberg::Result<String> {
        let location = format!("{metadata_dir}/floe-state-{}.json", uuid::Uuid::new_v4());
        let json =
            serde_json::to_vec(self).map_err(|e| iceberg::Error::new(iceberg::ErrorKind::Unexpected, e.to_string()))?;
        file_io.new_output(&location)?.write(json.into()).await?;
        Ok(location)
    }

    /// Resolves what `committed` (every offset committed, the new tasks' included) allows,
    /// by the rules of the module doc: matched parts leave the state (to append, or
    /// aborted), then every marker whose transaction is complete.
    pub fn resolve(&mut self, committed: &CommittedOffsets) -> Resolved {
        self.markers.sort_by_key(|m| (m.topic.clone(), m.partition, m.marker.offset));
        self.keep_lowest_anchors(committed);
        let mut resolved = self.match_parts(committed);
        self.match_departed(committed, &mut resolved);
        self.drop_complete_markers(committed);
        resolved
    }

    /// The departed marker of `part`'s producer above it with every offset between
    /// committed: the marker that may end it, had it not left.
    fn departed_above(&self, part: &PendingEntry, committed: &CommittedOffsets) -> Option<&Departed> {
        let t = &part.transaction;
        let set = committed.get(&part.topic, part.partition)?;
        self.departed.iter().find(|d| {
            d.topic == part.topic
                && d.partition == part.partition
                && d.marker.producer_id == t.producer_id
                && t.producer_epoch <= d.marker.producer_epoch
                && t.last_offset < d.marker.offset
                && (t.last_offset + 1 > d.marker.offset - 1 || set.covers(t.last_offset + 1, d.marker.offset - 1))
        })
    }

    /// Parts that came after their marker left (a marker written past the transaction
    /// timeout): resolved by it when it is provably theirs (no other departed marker of
    /// the producer may lie between), else left pending, [`Self::stranded`].
    fn match_departed(&mut self, committed: &CommittedOffsets, resolved: &mut Resolved) {
        let mut kept = Vec::new();
        for part in std::mem::take(&mut self.pending) {
            let ended = self
                .departed_above(&part, committed)
                .filter(|d| d.below.is_none_or(|b| b < part.transaction.first_offset))
                .map(|d| d.marker);
            match ended {
                Some(marker) => {
                    tracing::warn!(topic = %part.topic, partition = part.partition,
                        producer_id = marker.producer_id, first_offset = part.transaction.first_offset,
                        last_offset = part.transaction.last_offset, marker_offset = marker.offset,
                        "a transaction's marker came more than transaction_timeout after its records: resolved by it; raise transaction_timeout");
                    if marker.commit { resolved.committed.push(part) } else { resolved.aborted.push(part) }
                }
                None => kept.push(part),
            }
        }
        self.pending = kept;
    }

    /// The parts whose marker may have left before they came and that cannot be resolved
    /// without a guess (see the module docs).
    pub fn stranded(&self, committed: &CommittedOffsets) -> Vec<Stranded<'_>> {
        self.pending
            .iter()
            .filter_map(|part| {
                let d = self.departed_above(part, committed)?;
                Some(Stranded { part, marker_offset: d.marker.offset })
            })
            .collect()
    }

    /// Why the table is degraded when parts are [`Self::stranded`]: each named, and the
    /// setting to raise.
    pub fn stranded_reason(&self, committed: &CommittedOffsets) -> Option<String> {
        let stranded = self.stranded(committed);
        let parts: Vec<String> = stranded
            .iter()
            .map(|s| {
                let t = &s.part.transaction;
                format!(
                    "producer {} at offsets {}-{} of {} partition {} (a marker of its producer at {} left first)",
                    t.producer_id, t.first_offset, t.last_offset, s.part.topic, s.part.partition, s.marker_offset
                )
            })
            .collect();
        (!parts.is_empty()).then(|| {
            format!(
                "transaction records wait for a marker that came and left before them: {}; their markers were \
                 written more than the topic's transaction_timeout after their records: raise transaction_timeout \
                 to the brokers' transaction.max.timeout.ms, and end each part as Kafka ended its transaction \
                 (`floe local resolve` or `floe aws resolve`, its partition and first offset, --commit or --abort)",
                parts.join("; ")
            )
        })
    }

    /// Takes out the [`Self::stranded`] part of log `topic`, `partition` starting at
    /// `first_offset`, for an operator's decision on it: `Ok(None)` when no part starts
    /// there (decided already, or never pending), an error when the part there is not
    /// stranded (it may still meet its marker).
    pub fn take_stranded(
        &mut self,
        committed: &CommittedOffsets,
        topic: &str,
        partition: i32,
        first_offset: i64,
    ) -> Result<Option<PendingEntry>, String> {
        let at = |p: &PendingEntry| {
            p.topic == topic && p.partition == partition && p.transaction.first_offset == first_offset
        };
        let Some(index) = self.pending.iter().position(at) else { return Ok(None) };
        if self.departed_above(&self.pending[index], committed).is_none() {
            let t = &self.pending[index].transaction;
            return Err(format!(
                "the transaction of producer {} at offsets {}-{} of {topic} partition {partition} is not stranded: \
                 it waits for its marker, which may still come",
                t.producer_id, t.first_offset, t.last_offset
            ));
        }
        Ok(Some(self.pending.remove(index)))
    }

    /// Remembers `m`, leaving a run not starting at 0.
    fn depart(&mut self, m: &MarkerEntry) {
        let same = |d: &Departed| {
            d.topic == m.topic && d.partition == m.partition && d.marker.producer_id == m.marker.producer_id
        };
        match self.departed.iter_mut().find(|d| same(d)) {
            Some(d) if d.marker.offset < m.marker.offset => {
                let below = d.below.map_or(d.marker.offset, |b| b.max(d.marker.offset));
                *d = Departed { topic: m.topic.clone(), partition: m.partition, marker: m.marker, below: Some(below) };
            }
            Some(d) => d.below = Some(d.below.map_or(m.marker.offset, |b| b.max(m.marker.offset))),
            None => {
                self.departed.push(Departed {
                    topic: m.topic.clone(),
                    partition: m.partition,
                    marker: m.marker,
                    below: None,
                });
                let in_partition = |d: &Departed| d.topic == m.topic && d.partition == m.partition;
                if self.departed.iter().filter(|d| in_partition(d)).count() > DEPARTED_LIMIT {
                    let lowest = self.departed.iter().enumerate().filter(|(_, d)| in_partition(d));
                    if let Some((at, _)) = lowest.min_by_key(|(_, d)| d.marker.offset) {
                        self.departed.remove(at);
                    }
                }
            }
        }
    }

    /// Adds the anchors the markers and parts give, and keeps the lowest of each run of
    /// committed offsets not starting at 0.
    fn keep_lowest_anchors(&mut self, committed: &CommittedOffsets) {
        let found = self.markers.iter().filter_map(MarkerEntry::anchor);
        let found = found.chain(self.pending.iter().filter_map(PendingEntry::anchor)).collect::<Vec<_>>();
        let mut anchors: Vec<Anchor> = std::mem::take(&mut self.anchors).into_iter().chain(found).collect();
        anchors.sort_by_key(|a| (a.topic.clone(), a.partition, a.offset));
        let mut kept: Vec<(Anchor, i64)> = Vec::new();
        for anchor in anchors {
            let Some((run_start, _)) = run_holding(committed, &anchor.topic, anchor.partition, anchor.offset) else {
                continue;
            };
            let lower_in_run = kept.last().is_some_and(|(k, start)| {
                k.topic == anchor.topic && k.partition == anchor.partition && *start == run_start
            });
            if run_start > 0 && !lower_in_run {
                kept.push((anchor, run_start));
            }
        }
        self.anchors = kept.into_iter().map(|(a, _)| a).collect();
    }

    /// Each marker, lowest first, ends the pending parts it may end once every offset
    /// between is committed.
    fn match_parts(&mut self, committed: &CommittedOffsets) -> Resolved {
        let mut resolved = Resolved::default();
        for m in &self.markers {
            let set = committed.get(&m.topic, m.partition);
            let between_committed = |last: i64| {
                let (from, to) = (last.saturating_add(1), m.marker.offset.saturating_sub(1));
                from > to || set.is_some_and(|s| s.covers(from, to))
            };
            let (ended, pending): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
                .into_iter()
                .partition(|e| e.may_end_at(m) && between_committed(e.transaction.last_offset));
            self.pending = pending;
            if m.marker.commit {
                resolved.committed.extend(ended);
            } else {
                resolved.aborted.extend(ended);
            }
        }
        resolved
    }

    /// Drops every marker no part of its transaction can still come for.
    fn drop_complete_markers(&mut self, committed: &CommittedOffsets) {
        // Decided on the markers as they are: a marker below another proves it complete.
        let complete: Vec<Option<i64>> = self.markers.iter().map(|m| self.is_complete(m, committed)).collect();
        let (mut kept, mut departed) = (Vec::new(), Vec::new());
        for (m, complete) in std::mem::take(&mut self.markers).into_iter().zip(complete) {
            match complete {
                Some(run_start) if run_start > 0 => departed.push(m),
                Some(_) => {}
                None => kept.push(m),
            }
        }
        self.markers = kept;
        departed.iter().for_each(|m| self.depart(m));
        // Once every offset below one is committed, no part can come below it.
        self.departed.retain(|d| {
            run_holding(committed, &d.topic, d.partition, d.marker.offset).is_none_or(|(start, _)| start > 0)
        });
    }

    /// Whether every offset that may hold a part of `m`'s transaction is committed (and
    /// matched), and no part of its producer waits below it: the start of the committed
    /// run holding it, when so.
    fn is_complete(&self, m: &MarkerEntry, committed: &CommittedOffsets) -> Option<i64> {
        if self.pending.iter().any(|e| e.may_end_at(m)) {
            return None;
        }
        let (run_start, _) = run_holding(committed, &m.topic, m.partition, m.marker.offset)?;
        let same_partition = |topic: &str, partition: i32| topic == m.topic && partition == m.partition;
        let in_run_below = |offset: i64| run_start <= offset && offset < m.marker.offset;
        let previous_marker = self.markers.iter().any(|o| {
            same_partition(&o.topic, o.partition)
                && o.marker.producer_id == m.marker.producer_id
                && in_run_below(o.marker.offset)
        });
        let old_anchor = m.earliest_record_time().is_some_and(|earliest| {
            self.anchors
                .iter()
                .any(|a| same_partition(&a.topic, a.partition) && in_run_below(a.offset) && a.timestamp < earliest)
        });
        (run_start == 0 || previous_marker || old_anchor).then_some(run_start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: i64 = 60 * 1000;

    fn pending(producer_id: i64, first: i64, last: i64) -> PendingEntry {
        PendingEntry {
            topic: "t".into(),
            partition: 0,
            task_id: format!("task-{first}"),
            segment_first: Some(first),
            transaction: PendingTransaction {
                producer_id,
                first_offset: first,
                last_offset: last,
                records: 1,
                ..PendingTransaction::default()
            },
            schema: Schema::builder().build().unwrap(),
            partition_spec: None,
            keep: None,
            pending_since_ms: None,
            transaction_timeout_ms: None,
            dead_letter_table: None,
        }
    }

    #[test]
    fn a_transaction_pending_past_its_timeout_by_the_wall_clock_is_hanging() {
        let mut state = TableState::default();
        state.pending.push(PendingEntry { pending_since_ms: Some(100 * MINUTE), ..pending(7, 3, 5) });
        // A second part of producer 7's transaction, later; producer 8's, within its timeout.
        state.pending.push(PendingEntry { pending_since_ms: Some(110 * MINUTE), ..pending(7, 10, 12) });
        state.pending.push(PendingEntry {
            pending_since_ms: Some(100 * MINUTE),
            transaction_timeout_ms: Some(60 * MINUTE as u64),
            ..pending(8, 6, 9)
        });
        // A part of an older state file, without a time: not judged until a commit marks it.
        state.pending.push(pending(9, 13, 14));
        assert_eq!(state.hanging(115 * MINUTE), [], "within the default 15 minutes");
        let hanging = state.hanging(130 * MINUTE);
        let expected = HangingTransaction {
            topic: "t".into(),
            partition: 0,
            producer_id: 7,
            producer_epoch: 0,
            first_offset: 3,
            last_offset: 12,
            pending_since_ms: 100 * MINUTE,
            transaction_timeout_ms: DEFAULT_TRANSACTION_TIMEOUT_MS,
        };
        assert_eq!(hanging, [expected]);
        state.mark_pending_since(130 * MINUTE);
        assert_eq!(state.pending[3].pending_since_ms, Some(130 * MINUTE));
        assert_eq!(state.pending[0].pending_since_ms, Some(100 * MINUTE), "kept");
        assert_eq!(state.hanging(200 * MINUTE).iter().map(|h| h.producer_id).collect::<Vec<_>>(), [7, 8, 9]);
    }

    fn marker(producer_id: i64, offset: i64, commit: bool) -> MarkerEntry {
        MarkerEntry {
            topic: "t".into(),
            partition: 0,
            marker: TxnMarker { producer_id, producer_epoch: 0, offset, commit, timestamp: None },
            segment_first: offset - 10,
            transaction_timeout_ms: None,
        }
    }

    fn ranges(v: &[PendingEntry]) -> Vec<(i64, i64)> {
        v.iter().map(|e| (e.transaction.first_offset, e.transaction.last_offset)).collect()
    }

    #[test]
    fn markers_resolve_their_own_transactions_only() {
        let mut offsets = CommittedOffsets::default();
        offsets.insert("t", 0, 0, 199);
        let mut state = TableState {
            pending: vec![pending(7, 90, 99), pending(7, 100, 104), pending(8, 95, 99), pending(9, 98, 99)],
            markers: vec![marker(7, 120, true), marker(8, 121, false), marker(9, 50, true)],
            anchors: vec![],
            departed: vec![],
            ..Default::default()
        };
        let resolved = state.resolve(&offsets);
        // Producer 7's transaction spans two segments: both parts end at its marker.
        let ids = |v: &[PendingEntry]| v.iter().map(|e| e.transaction.producer_id).collect::<Vec<_>>();
        assert_eq!(ids(&resolved.committed), vec![7, 7]);
        assert_eq!(ids(&resolved.aborted), vec![8]);
        // Producer 9's marker is before its records: not its marker; still open.
        assert_eq!(ids(&state.pending), vec![9]);
        // The committed run starts at 0: nothing can come below the markers.
        assert!(state.markers.is_empty());
    }

    #[test]
    fn a_marker_ends_no_part_of_a_newer_epoch() {
        let mut offsets = CommittedOffsets::default();
        offsets.insert("t", 0, 0, 99);
        let mut part = pending(7, 50, 59);
        part.transaction.producer_epoch = 3;
        let mut state = TableState {
            pending: vec![part],
            markers: vec![marker(7, 60, true)],
            anchors: vec![],
            departed: vec![],
            ..Default::default()
        };
        let resolved = state.resolve(&offsets);
        assert!(resolved.committed.is_empty() && resolved.aborted.is_empty());
        assert_eq!(state.pending.len(), 1);
    }

    #[test]
    fn an_early_marker_waits_for_its_transaction() {
        let mut offsets = CommittedOffsets::default();
        offsets.insert("t", 0, 250, 299); // the marker's segment, first to arrive
        let mut state = TableState {
            pending: vec![],
            markers: vec![marker(7, 260, true)],
            anchors: vec![],
            departed: vec![],
            ..Default::default()
        };
        assert!(state.resolve(&offsets).committed.is_empty());
        assert_eq!(state.markers.len(), 1, "kept: the segment before may hold its transaction");
        state.pending.push(pending(7, 240, 249));
        offsets.insert("t", 0, 200, 249);
        assert_eq!(state.resolve(&offsets).committed.len(), 1);
        assert_eq!(state.markers.len(), 1, "kept: the segments before 200 may hold more of it");
        offsets.insert("t", 0, 0, 199);
        assert!(state.resolve(&offsets).committed.is_empty());
        assert!(state.is_empty(), "{state:?}");
    }

    #[test]
    fn a_broker_time_older_than_the_timeout_completes_a_marker() {
        // A log starting at 1000: the marker's run holds another producer's marker written
        // 15 min + margin earlier.
        let mut offsets = CommittedOffsets::default();
        offsets.insert("t", 0, 1000, 1099);
        let at = |m: &mut MarkerEntry, minutes: i64| m.marker.timestamp = Some(minutes * MINUTE);
        let (mut old, mut late) = (marker(8, 1005, true), marker(7, 1090, true));
        at(&mut old, 100);
        at(&mut late, 121);
        let mut state = TableState {
            pending: vec![],
            markers: vec![old.clone(), late.clone()],
            anchors: vec![],
            departed: vec![],
            ..Default::default()
        };
        state.resolve(&offsets);
        assert_eq!(state.markers, vec![old.clone()], "21 min apart: the later one's transaction is in");
        assert_eq!(state.anchors.len(), 1);
        // 20 minutes is within 15 min + the margin: kept.
        at(&mut late, 120);
        state.markers.push(late.clone());
        state.resolve(&offsets);
        assert_eq!(state.markers, vec![old, late.clone()]);
        // A topic with a shorter timeout.
        state.markers.retain(|m| m.marker.producer_id == 7);
        state.markers[0].transaction_timeout_ms = Some(60 * 1000);
        state.resolve(&offsets);
        assert!(state.markers.is_empty(), "{:?}", state.markers);
        assert_eq!(
            state.anchors,
            vec![Anchor { topic: "t".into(), partition: 0, offset: 1005, timestamp: 100 * MINUTE }]
        );
    }

    /// A log starting at 1000; the segment 1010..=1099 comes first: producer 8's marker at
    /// 1012 (minute 0) and producer 7's `markers` at minute 40, past the 15-minute timeout
    /// (a broker whose `transaction.max.timeout.ms` is longer). Then 1000..=1009, holding
    /// producer 7's part 1005..=1009.
    fn late_marker(markers: &[(i64, bool)]) -> (CommittedOffsets, TableState) {
        let mut offsets = CommittedOffsets::default();
        offsets.insert("t", 0, 1010, 1099);
        let mut state = TableState::default();
        let mut anchor = marker(8, 1012, true);
        anchor.marker.timestamp = Some(0);
        state.markers.push(anchor);
        for &(offset, commit) in markers {
            let mut late = marker(7, offset, commit);
            late.marker.timestamp = Some(40 * MINUTE);
            state.markers.push(late);
        }
        state.resolve(&offsets);
        assert_eq!(state.markers.len(), 1, "producer 7's markers left: {:?}", state.markers);
        offsets.insert("t", 0, 1000, 1009);
        state.pending.push(pending(7, 1005, 1009));
        (offsets, state)
    }

    #[test]
    fn a_part_that_comes_after_its_marker_left_is_resolved_by_it() {
        let (offsets, mut state) = late_marker(&[(1090, true)]);
        assert_eq!(ranges(&state.resolve(&offsets).committed), vec![(1005, 1009)]);
        assert!(state.pending.is_empty() && state.stranded(&offsets).is_empty());
        let (offsets, mut state) = late_marker(&[(1090, false)]);
        assert_eq!(ranges(&state.resolve(&offsets).aborted), vec![(1005, 1009)]);
        // Its producer's newer epoch is not the marker's: it waits.
        let (offsets, mut state) = late_marker(&[(1090, true)]);
        state.pending[0].transaction.producer_epoch = 1;
        assert!(state.resolve(&offsets).committed.is_empty());
        assert!(state.stranded(&offsets).is_empty());
    }

    #[test]
    fn a_part_whose_marker_cannot_be_told_is_stranded_not_guessed() {
        // Two of producer 7's markers left: the part's is the first above it, whose
        // outcome the state no longer holds.
        let (offsets, mut state) = late_marker(&[(1050, false), (1090, true)]);
        assert_eq!(state.departed.len(), 1);
        assert_eq!((state.departed[0].marker.offset, state.departed[0].below), (1090, Some(1050)));
        let resolved = state.resolve(&offsets);
        assert!(resolved.committed.is_empty() && resolved.aborted.is_empty());
        let stranded = state.stranded(&offsets);
        assert_eq!(stranded.len(), 1);
        assert_eq!((stranded[0].part.transaction.first_offset, stranded[0].marker_offset), (1005, 1090));
        let reason = state.stranded_reason(&offsets).unwrap();
        assert!(
            reason.contains("producer 7 at offsets 1005-1009 of t partition 0")
                && reason.contains("transaction_timeout"),
            "{reason}"
        );
        // An operator's decision takes it out; a part elsewhere is none, and one that may
        // still meet its marker is refused.
        let mut decided = state.clone();
        assert_eq!(decided.take_stranded(&offsets, "t", 0, 1006), Ok(None));
        let taken = decided.take_stranded(&offsets, "t", 0, 1005).unwrap().unwrap();
        assert_eq!(taken.transaction.first_offset, 1005);
        assert!(decided.pending.is_empty() && decided.stranded(&offsets).is_empty());
        assert_eq!(decided.take_stranded(&offsets, "t", 0, 1005), Ok(None));
        let mut waiting = state.clone();
        waiting.pending = vec![pending(7, 1060, 1062)];
        waiting.departed.clear();
        let refused = waiting.take_stranded(&offsets, "t", 0, 1060).unwrap_err();
        assert!(refused.contains("not stranded"), "{refused}");
        // A part above the older departed marker is the newer one's.
        state.pending = vec![pending(7, 1060, 1062)];
        assert_eq!(ranges(&state.resolve(&offsets).committed), vec![(1060, 1062)]);
    }

    #[test]
    fn departed_markers_are_bounded_per_partition() {
        let mut state = TableState::default();
        for producer in 0..DEPARTED_LIMIT as i64 + 10 {
            state.depart(&marker(producer, 1000 + producer, true));
        }
        assert_eq!(state.departed.len(), DEPARTED_LIMIT);
        assert!(state.departed.iter().all(|d| d.marker.offset >= 1010), "the lowest went first");
    }

    #[test]
    fn a_marker_stays_while_a_part_of_its_producer_waits_below_it() {
        // The run holding producer 7's marker shows its transaction complete (a broker
        // time an hour older); a part of 7 still waits below the gap at 10..19. Should the
        // gap bring no marker of 7 (a marker written late, the timeout exceeded), the part
        // is this marker's: it must still be there.
        let mut offsets = CommittedOffsets::default();
        offsets.insert("t", 0, 1000, 1009);
        offsets.insert("t", 0, 1020, 1099);
        let mut old = marker(8, 1020, true);
        old.marker.timestamp = Some(0);
        let mut late = marker(7, 1090, true);
        late.marker.timestamp = Some(60 * MINUTE);
        let mut state = TableState {
            pending: vec![pending(7, 1005, 1009)],
            markers: vec![old, late.clone()],
            anchors: vec![],
            departed: vec![],
            ..Default::default()
        };
        state.resolve(&offsets);
        assert!(state.markers.contains(&late), "{:?}", state.markers);
        offsets.insert("t", 0, 1010, 1019);
        assert_eq!(ranges(&state.resolve(&offsets).committed), vec![(1005, 1009)]);
        assert!(!state.markers.contains(&late));
    }

    #[test]
    fn a_part_waits_while_a_marker_of_its_producer_may_lie_between() {
        // Segment 0: part of transaction A; segment 1 (missing): A's ABORT and part of B;
        // segment 2: B's COMMIT. B's marker must not take A's part.
        let (mut offsets, mut state) = (CommittedOffsets::default(), TableState::default());
        state.pending.push(pending(7, 5, 9));
        state.markers.push(marker(7, 29, true));
        offsets.insert("t", 0, 0, 9);
        offsets.insert("t", 0, 20, 29);
        assert!(state.resolve(&offsets).committed.is_empty(), "segment 1 may end A first");
        // Segment 1 arrives: A's abort at 12, B's part 13-19.
        state.markers.push(marker(7, 12, false));
        state.pending.push(pending(7, 13, 19));
        offsets.insert("t", 0, 10, 19);
        let resolved = state.resolve(&offsets);
        assert_eq!(ranges(&resolved.aborted), vec![(5, 9)]);
        assert_eq!(ranges(&resolved.committed), vec![(13, 19)]);
        assert!(state.is_empty());
    }

    /// A simulated partition log, one event per offset: `.` a plain record, `p` a record
    /// of producer p's transaction (`p1`: epoch 1), `P+` / `P-` p's COMMIT / ABORT (`P1+`:
    /// epoch 1), `~` no offset: the clock jumps by the timeout and the margin. Producer
    /// ids: a letter's place in the alphabet. Each offset is appended a minute after the
    /// one before.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Event {
        Plain,
        Record { producer: i64, epoch: i16 },
        Marker { producer: i64, epoch: i16, commit: bool },
    }

    struct Log {
        base: i64,
        /// Event and broker time of each offset from `base`.
        events: Vec<(Event, i64)>,
        /// Whether records carry the broker's time (`LogAppendTime`).
        log_append_time: bool,
    }

    const TIMEOUT: i64 = DEFAULT_TRANSACTION_TIMEOUT_MS as i64;

    fn log(text: &str, base: i64, log_append_time: bool) -> Log {
        let (mut events, mut now) = (Vec::new(), 1_000 * MINUTE);
        for token in text.split_whitespace() {
            if token == "~" {
                now += TIMEOUT + CLOCK_MARGIN_MS;
                continue;
            }
            let letter = token.chars().next().unwrap();
            let producer = letter.to_ascii_lowercase() as i64 - 'a' as i64 + 1;
            let epoch = token[1..].trim_end_matches(['+', '-']).parse().unwrap_or(0);
            let event = match (letter, token.chars().last().unwrap()) {
                ('.', _) => Event::Plain,
                (l, '+') if l.is_ascii_uppercase() => Event::Marker { producer, epoch, commit: true },
                (l, '-') if l.is_ascii_uppercase() => Event::Marker { producer, epoch, commit: false },
                _ => Event::Record { producer, epoch },
            };
            events.push((event, now));
            now += MINUTE;
        }
        Log { base, events, log_append_time }
    }

    impl Log {
        fn offset(&self, i: usize) -> i64 {
            self.base + i as i64
        }

        /// The verdict of the record at `i`: its producer's next marker.
        fn fate(&self, i: usize, producer: i64) -> bool {
            let next = self.events[i..].iter().find_map(|(e, _)| match *e {
                Event::Marker { producer: p, commit, .. } if p == producer => Some(commit),
                _ => None,
            });
            next.expect("every transaction of a test log ends")
        }

        /// Checks the log keeps Kafka's rule: a transaction ends within the timeout.
        fn check(&self) {
            let mut open: std::collections::HashMap<i64, i64> = Default::default();
            for &(event, t) in &self.events {
                match event {
                    Event::Record { producer, .. } => {
                        open.entry(producer).or_insert(t);
                    }
                    Event::Marker { producer, .. } => {
                        let began = open.remove(&producer).unwrap_or(t);
                        assert!(t - began <= TIMEOUT, "a test log's transaction outlasts the timeout");
                    }
                    Event::Plain => {}
                }
            }
        }

        /// The log cut into `n` segments: `[from, to)` event indexes.
        fn segments(&self, n: usize) -> Vec<(usize, usize)> {
            let len = self.events.len();
            (0..n).map(|k| (len * k / n, len * (k + 1) / n)).collect()
        }

        /// What the materializer reports for the segment `[from, to)`: the parts of
        /// transactions open at its end (with their verdict), and its markers.
        fn task(&self, (from, to): (usize, usize)) -> (Vec<(PendingEntry, bool)>, Vec<MarkerEntry>) {
            let mut open: Vec<(usize, usize, i64, i16)> = Vec::new(); // first, last, producer, epoch
            let mut markers = Vec::new();
            for i in from..to {
                let (event, t) = self.events[i];
                match event {
                    Event::Record { producer, epoch } => match open.iter_mut().find(|o| o.2 == producer) {
                        Some(o) => o.1 = i,
                        None => open.push((i, i, producer, epoch)),
                    },
                    Event::Marker { producer, epoch, commit } => {
                        open.retain(|o| o.2 != producer);
                        markers.push(MarkerEntry {
                            topic: "t".into(),
                            partition: 0,
                            marker: TxnMarker {
                                producer_id: producer,
                                producer_epoch: epoch,
                                offset: self.offset(i),
                                commit,
                                timestamp: Some(t),
                            },
                            segment_first: self.offset(from),
                            transaction_timeout_ms: None,
                        });
                    }
                    Event::Plain => {}
                }
            }
            let parts = open
                .into_iter()
                .map(|(first, last, producer, epoch)| {
                    let mut entry = pending(producer, self.offset(first), self.offset(last));
                    entry.segment_first = Some(self.offset(from));
                    entry.transaction.producer_epoch = epoch;
                    entry.transaction.first_timestamp = Some(self.events[first].1);
                    entry.transaction.log_append_time = self.log_append_time;
                    (entry, self.fate(first, producer))
                })
                .collect();
            (parts, markers)
        }
    }

    /// Parts as `(producer, first, last)`, sorted.
    fn parts<'a>(entries: impl IntoIterator<Item = &'a PendingEntry>) -> Vec<(i64, i64, i64)> {
        let mut v: Vec<_> = entries
            .into_iter()
            .map(|e| (e.transaction.producer_id, e.transaction.first_offset, e.transaction.last_offset))
            .collect();
        v.sort();
        v
    }

    /// Commits the segments of `log` in `order` as the committer would (one task each,
    /// resolving after each); checks every committed part is appended once and no aborted
    /// one, and what the state keeps; returns the state left.
    fn arrive(log: &Log, segments: &[(usize, usize)], order: &[usize]) -> TableState {
        let (mut offsets, mut state) = (CommittedOffsets::default(), TableState::default());
        let (mut appended, mut aborted, mut expected_appended, mut expected_aborted) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for &k in order {
            let (parts, markers) = log.task(segments[k]);
            for (entry, commit) in parts {
                if commit { &mut expected_appended } else { &mut expected_aborted }.push(entry.clone());
                state.pending.push(entry);
            }
            state.markers.extend(markers);
            let (from, to) = segments[k];
            if from < to {
                offsets.insert("t", 0, log.offset(from), log.offset(to - 1));
            }
            let resolved = state.resolve(&offsets);
            appended.extend(resolved.committed);
            aborted.extend(resolved.aborted);
        }
        let context = format!("segments {segments:?}, order {order:?}");
        assert_eq!(parts(&appended), parts(&expected_appended), "appended: {context}");
        assert_eq!(parts(&aborted), parts(&expected_aborted), "aborted: {context}");
        assert!(state.pending.is_empty(), "{context}: {:?}", state.pending);
        state
    }

    /// What may stay once every segment is in: nothing when the log starts at 0; else
    /// the run's lowest anchor, and markers each its producer's first, written within the
    /// timeout and the margin of the log's first broker time.
    fn check_bounded(log: &Log, state: &TableState, context: &str) {
        if log.base == 0 {
            assert!(state.is_empty(), "{context}: {state:?}");
            return;
        }
        assert!(state.anchors.len() <= 1, "{context}: {:?}", state.anchors);
        let first_time = log.events[0].1;
        for m in &state.markers {
            let first_of_producer = log
                .events
                .iter()
                .position(|(e, _)| matches!(*e, Event::Marker { producer, .. } if producer == m.marker.producer_id));
            assert_eq!(first_of_producer.map(|i| log.offset(i)), Some(m.marker.offset), "{context}: {m:?}");
            let written = m.marker.timestamp.unwrap();
            assert!(written - first_time <= TIMEOUT + CLOCK_MARGIN_MS, "{context}: {m:?} stays");
        }
    }

    fn permutations(n: usize) -> Vec<Vec<usize>> {
        if n == 0 {
            return vec![vec![]];
        }
        let mut out = Vec::new();
        for p in permutations(n - 1) {
            for at in 0..=p.len() {
                let mut q = p.clone();
                q.insert(at, n - 1);
                out.push(q);
            }
        }
        out
    }

    /// The logs of the exhaustive test; each is also played with every verdict flipped.
    const LOGS: &[&str] = &[
        // Issue 30 item 11: records in the first segments, none in the next, the marker last.
        "p p p . . . . . . . . . P+",
        // A transaction across every segment, other records between its batches.
        "p . p p . p . p p . p . P+",
        // Two producers interleaved; each with two transactions in a row.
        "p q p . q p P+ p q . p Q- . p q P- q . Q+",
        // A producer fenced: its epoch-0 transaction aborted by an epoch-1 marker, then
        // an epoch-1 transaction.
        "p . p . q . P1- p1 . p1 q Q+ . p1 . P1+",
        // Another producer's marker long before: the later markers' runs show their
        // transactions complete.
        "q Q+ ~ p . p . q p . Q- p . P+ . q . p Q+ . P-",
    ];

    fn flipped(text: &str) -> String {
        text.chars()
            .map(|c| match c {
                '+' => '-',
                '-' => '+',
                c => c,
            })
            .collect()
    }

    #[test]
    fn every_arrival_order_resolves_every_part_once_and_the_state_ends_bounded() {
        for text in LOGS {
            for text in [text.to_string(), flipped(text)] {
                for (base, log_append_time) in [(0, false), (1000, false), (1000, true)] {
                    let log = log(&text, base, log_append_time);
                    log.check();
                    for n in 3..=5 {
                        let segments = log.segments(n);
                        for order in permutations(n) {
                            let state = arrive(&log, &segments, &order);
                            let context = format!("{text:?} from {base}, {segments:?} in order {order:?}");
                            check_bounded(&log, &state, &context);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_last_log_s_later_markers_leave_the_state() {
        // The bound of the exhaustive test holds strictly: after the jump, markers go.
        let log = log(LOGS[4], 1000, false);
        let segments = log.segments(4);
        let state = arrive(&log, &segments, &[3, 1, 2, 0]);
        let left: Vec<i64> = state.markers.iter().map(|m| m.marker.producer_id).collect();
        assert_eq!(left, vec![17], "only the first marker, q's, before the jump: {:?}", state.markers);
    }

    /// Issue 30 item 11: a transaction with records in the first segment, none in the
    /// second, its COMMIT in the third; the first segment is committed last.
    #[test]
    fn item_11_a_part_committed_after_every_later_segment_still_resolves() {
        for base in [0, 1000] {
            let log = log("p p p . . . . P+ ", base, false);
            let segments = [(0, 3), (3, 6), (6, 8)];
            let state = arrive(&log, &segments, &[1, 2, 0]);
            check_bounded(&log, &state, "item 11");
        }
    }
}
