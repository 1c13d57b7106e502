//! Transactions a segment left open, kept by the table until their marker arrives.
//!
//! A segment can end inside a transaction: its records are written to files, but only
//! the COMMIT marker (in a later segment) makes them rows; an ABORT means never. The
//! committer keeps those files here, in a JSON file of the table's metadata directory
//! named by the snapshot summary's `floe.state` (so the pending list changes atomically
//! with the snapshot that records the segment's offsets as committed), and resolves them
//! when a later task brings the marker. Nothing is guessed. A marker that arrives before
//! the open transaction's segments (tasks out of order) is kept here too, until no part
//! of its transaction can still come.
//!
//! ```text
//!  part (producer P, offsets ..=L)  ──┐ matched with P's first marker M above L once every
//!  marker (producer P, offset M)    ──┘ offset between them is committed (no unknown marker
//!                                       of P can lie between): COMMIT ⇒ files added, ABORT ⇒ never
//!  a marker stays while a part may still come: a pending part of P waits below it, or the
//!  committed run of offsets holding M starts at its transaction's earliest known segment
//!  (the segment before may hold more of it) and not at offset 0
//! ```
//!
//! A known limit: a transaction with records in one segment, none in the next ones, and
//! its marker after them, whose first segment is committed after all the later ones.

use iceberg::io::FileIO;
use iceberg::spec::{PartitionSpec, Schema};
use serde::{Deserialize, Serialize};

use super::offsets::CommittedOffsets;
use crate::segment::TxnMarker;
use crate::task::PendingTransaction;

/// Summary key naming the state file.
pub const STATE_KEY: &str = "floe.state";

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
}

/// A marker no pending transaction has matched yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkerEntry {
    pub topic: String,
    pub partition: i32,
    pub marker: TxnMarker,
    /// First offset of the segment the marker came in.
    pub segment_first: i64,
    /// First offset of the earliest segment known to hold part of its transaction (the
    /// marker's own segment, or a matched part's); older state files: unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earliest: Option<i64>,
}

impl PendingEntry {
    fn segment_start(&self) -> i64 {
        self.segment_first.unwrap_or(self.transaction.first_offset)
    }

    fn same_producer(&self, m: &MarkerEntry) -> bool {
        self.topic == m.topic && self.partition == m.partition && self.transaction.producer_id == m.marker.producer_id
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TableState {
    pub pending: Vec<PendingEntry>,
    pub markers: Vec<MarkerEntry>,
}

/// What resolving did: transactions to append now, and how many were aborted.
#[derive(Debug, Default)]
pub struct Resolved {
    pub committed: Vec<PendingEntry>,
    pub aborted: Vec<PendingEntry>,
}

impl TableState {
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.markers.is_empty()
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

    /// Matches pending transactions with markers: a marker ends every pending part (a
    /// transaction may span several segments) of its producer, on its topic-partition,
    /// below it — once every offset between the part and the marker is committed, so that
    /// no marker of the producer can still come between them. Matched parts leave the
    /// state; a marker leaves it once no part of its transaction can still come.
    pub fn resolve(&mut self, committed: &CommittedOffsets) -> Resolved {
        let mut resolved = Resolved::default();
        self.markers.sort_by_key(|m| (m.topic.clone(), m.partition, m.marker.offset));
        for m in &mut self.markers {
            let set = committed.get(&m.topic, m.partition);
            let between_committed = |last: i64| {
                let (from, to) = (last.saturating_add(1), m.marker.offset.saturating_sub(1));
                from > to || set.is_some_and(|s| s.covers(from, to))
            };
            let (ended, pending): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending).into_iter().partition(|e| {
                e.same_producer(m)
                    && e.transaction.last_offset < m.marker.offset
                    && between_committed(e.transaction.last_offset)
            });
            self.pending = pending;
            let earliest = ended.iter().map(PendingEntry::segment_start).chain([m.earliest.unwrap_or(m.segment_first)]);
            m.earliest = earliest.min();
            if m.marker.commit {
                resolved.committed.extend(ended);
            } else {
                resolved.aborted.extend(ended);
            }
        }
        let pending = &self.pending;
        self.markers.retain(|m| {
            let waiting_below =
                pending.iter().any(|e| e.same_producer(m) && e.transaction.last_offset < m.marker.offset);
            let run_start = committed
                .get(&m.topic, m.partition)
                .and_then(|s| s.ranges().iter().find(|&&(a, b)| a <= m.marker.offset && m.marker.offset <= b))
                .map(|&(a, _)| a);
            let earliest = m.earliest.unwrap_or(m.segment_first);
            // The run of committed offsets holding the marker begins at its transaction's
            // earliest known segment: the segment before it may hold more of it.
            let may_extend_below = match run_start {
                Some(start) => start > 0 && earliest <= start,
                None => true,
            };
            waiting_below || may_extend_below
        });
        resolved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(producer_id: i64, first: i64, last: i64) -> PendingEntry {
        PendingEntry {
            topic: "t".into(),
            partition: 0,
            task_id: format!("task-{first}"),
            segment_first: Some(first),
            transaction: PendingTransaction {
                producer_id,
                producer_epoch: 0,
                first_offset: first,
                last_offset: last,
                records: 1,
                files: vec![],
            },
            schema: Schema::builder().build().unwrap(),
            partition_spec: None,
        }
    }

    fn marker(producer_id: i64, offset: i64, commit: bool) -> MarkerEntry {
        MarkerEntry {
            topic: "t".into(),
            partition: 0,
            marker: TxnMarker { producer_id, producer_epoch: 0, offset, commit },
            segment_first: offset - 10,
            earliest: None,
        }
    }

    #[test]
    fn markers_resolve_their_own_transactions_only() {
        let mut offsets = CommittedOffsets::default();
        offsets.insert("t", 0, 0, 199);
        let mut state = TableState {
            pending: vec![pending(7, 90, 99), pending(7, 100, 104), pending(8, 95, 99), pending(9, 98, 99)],
            markers: vec![marker(7, 120, true), marker(8, 121, false), marker(9, 50, true)],
        };
        let resolved = state.resolve(&offsets);
        // Producer 7's transaction spans two segments: both parts end at its marker.
        let ids = |v: &[PendingEntry]| v.iter().map(|e| e.transaction.producer_id).collect::<Vec<_>>();
        assert_eq!(ids(&resolved.committed), vec![7, 7]);
        assert_eq!(ids(&resolved.aborted), vec![8]);
        // Producer 9's marker is before its records: not its marker; still open.
        assert_eq!(ids(&state.pending), vec![9]);
        // The unmatched marker's previous segment is committed: nothing can match it.
        assert!(state.markers.is_empty());
    }

    #[test]
    fn an_early_marker_waits_for_its_transaction() {
        let mut offsets = CommittedOffsets::default();
        offsets.insert("t", 0, 250, 299); // the marker's segment, first to arrive
        let mut state = TableState { pending: vec![], markers: vec![marker(7, 260, true)] };
        assert!(state.resolve(&offsets).committed.is_empty());
        assert_eq!(state.markers.len(), 1, "kept: the segment before may hold its transaction");
        state.pending.push(pending(7, 240, 249));
        offsets.insert("t", 0, 200, 249);
        assert_eq!(state.resolve(&offsets).committed.len(), 1);
        assert!(state.is_empty());
    }

    /// One segment of a simulated partition: its offsets, the parts of producer 7's
    /// transaction it holds, and whether it holds the marker (at its last offset).
    struct Seg {
        first: i64,
        last: i64,
        parts: Vec<(i64, i64)>,
        marker: bool,
    }

    /// Commits the segments in `order` as the committer would (one task each, resolving
    /// after each); returns the parts appended and the state left.
    fn arrive(segs: &[Seg], order: &[usize], commit: bool) -> (Vec<(i64, i64)>, TableState) {
        let (mut offsets, mut state, mut appended) = (CommittedOffsets::default(), TableState::default(), Vec::new());
        for &i in order {
            let seg = &segs[i];
            for &(first, last) in &seg.parts {
                let mut entry = pending(7, first, last);
                entry.segment_first = Some(seg.first);
                state.pending.push(entry);
            }
            if seg.marker {
                let mut m = marker(7, seg.last, commit);
                m.segment_first = seg.first;
                state.markers.push(m);
            }
            offsets.insert("t", 0, seg.first, seg.last);
            let resolved = state.resolve(&offsets);
            assert!(resolved.committed.is_empty() || resolved.aborted.is_empty());
            let done = if commit { resolved.committed } else { resolved.aborted };
            appended.extend(done.iter().map(|e| (e.transaction.first_offset, e.transaction.last_offset)));
        }
        appended.sort();
        (appended, state)
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

    /// A transaction over `n` segments of ten offsets from `base`: a part in each but the
    /// last (some with other producers' records around them), the marker in the last.
    fn spanning(base: i64, n: usize) -> Vec<Seg> {
        (0..n as i64)
            .map(|i| {
                let first = base + 10 * i;
                let last_seg = i == n as i64 - 1;
                let parts = match (last_seg, i % 2) {
                    (true, _) => vec![],
                    (false, 0) => vec![(first + 3, first + 9)],
                    (false, _) => vec![(first, first + 6)],
                };
                Seg { first, last: first + 9, parts, marker: last_seg }
            })
            .collect()
    }

    #[test]
    fn every_arrival_order_resolves_every_part_once() {
        for n in [3, 4] {
            for base in [0, 1000] {
                let segs = spanning(base, n);
                let all: Vec<(i64, i64)> = segs.iter().flat_map(|s| s.parts.clone()).collect();
                for order in permutations(n) {
                    for commit in [true, false] {
                        let (appended, state) = arrive(&segs, &order, commit);
                        assert_eq!(appended, all, "n={n} base={base} order={order:?} commit={commit}");
                        assert!(state.pending.is_empty(), "order {order:?}: {:?}", state.pending);
                        if base == 0 {
                            assert!(state.markers.is_empty(), "order {order:?}: a marker left behind");
                        } else {
                            // The run may still extend below the first segment: only a
                            // marker whose transaction reaches it is kept.
                            assert!(state.markers.len() <= 1);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_part_waits_while_a_marker_of_its_producer_may_lie_between() {
        // Segment 0: part of transaction A; segment 1 (missing): A's ABORT and part of B;
        // segment 2: B's COMMIT. B's marker must not take A's part.
        let segs = [
            Seg { first: 0, last: 9, parts: vec![(5, 9)], marker: false },
            Seg { first: 10, last: 19, parts: vec![], marker: false },
            Seg { first: 20, last: 29, parts: vec![], marker: true },
        ];
        let (mut offsets, mut state) = (CommittedOffsets::default(), TableState::default());
        state.pending.push(pending(7, 5, 9));
        state.markers.push(marker(7, 29, true));
        offsets.insert("t", 0, 0, 9);
        offsets.insert("t", 0, 20, 29);
        assert!(state.resolve(&offsets).committed.is_empty(), "segment 1 may end A first");
        // Segment 1 arrives: A's abort at 12, B's part 13-19.
        let mut abort = marker(7, 12, false);
        abort.segment_first = segs[1].first;
        state.markers.push(abort);
        state.pending.push(pending(7, 13, 19));
        offsets.insert("t", 0, 10, 19);
        let resolved = state.resolve(&offsets);
        let ranges = |v: &[PendingEntry]| {
            v.iter().map(|e| (e.transaction.first_offset, e.transaction.last_offset)).collect::<Vec<_>>()
        };
        assert_eq!(ranges(&resolved.aborted), vec![(5, 9)]);
        assert_eq!(ranges(&resolved.committed), vec![(13, 19)]);
        assert!(state.is_empty());
    }
}
