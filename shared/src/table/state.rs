//! Transactions a segment left open, kept by the table until their marker arrives.
//!
//! A segment can end inside a transaction: its records are written to files, but only
//! the COMMIT marker (in a later segment) makes them rows; an ABORT means never. The
//! committer keeps those files here, in a JSON file of the table's metadata directory
//! named by the snapshot summary's `floe.state` (so the pending list changes atomically
//! with the snapshot that records the segment's offsets as committed), and resolves them
//! when a later task brings the marker. Nothing is guessed. A marker that arrives before
//! the open transaction's segment (tasks out of order) is kept here too, until it is.

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
    /// before it. Matched entries leave the state.
    pub fn resolve(&mut self, committed: &CommittedOffsets) -> Resolved {
        let mut resolved = Resolved::default();
        self.markers.sort_by_key(|m| m.marker.offset);
        let mut unmatched = Vec::new();
        for m in std::mem::take(&mut self.markers) {
            let (ended, pending): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending).into_iter().partition(|e| {
                e.topic == m.topic
                    && e.partition == m.partition
                    && e.transaction.producer_id == m.marker.producer_id
                    && e.transaction.last_offset < m.marker.offset
            });
            self.pending = pending;
            match (ended.is_empty(), m.marker.commit) {
                (true, _) => unmatched.push(m),
                (false, true) => resolved.committed.extend(ended),
                (false, false) => resolved.aborted.extend(ended),
            }
        }
        // A marker still waits for its transaction while the segment before its own is
        // not committed (it would bring the transaction's records); once it is, the
        // transaction is not in this table's data (it began before the first segment).
        self.markers = unmatched
            .into_iter()
            .filter(|m| {
                let before = m.segment_first - 1;
                !committed.get(&m.topic, m.partition).is_some_and(|set| set.covers(before, before))
            })
            .collect();
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
}
