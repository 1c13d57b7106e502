//! Transactions, read_committed: which transactional batches to emit, drop, or report.
//!
//! A transaction's marker (COMMIT or ABORT control record) comes after its records, so a
//! single streaming pass cannot know a batch's fate when it meets it. Rather than buffer
//! records, the reader runs one lookahead [`TxnPlan::scan`] from the first transactional
//! batch to the end of the segment, reading headers (decoding only control batches),
//! and then streams as usual. Topics without transactions never pay for it.
//!
//! A transaction whose marker is not in this segment stays [`OpenTxn`]: reported, never
//! guessed. Markers for transactions begun in earlier segments are reported as
//! [`TxnMarker`]s so the committer can resolve them. The broker's `.txnindex` lists
//! aborted transactions whose markers are in the segment; when given, it is checked
//! against what the segment says.

use std::collections::{HashMap, VecDeque};

use tokio::io::AsyncRead;

use super::error::{SegmentError, SegmentErrorKind};
use super::frame::FrameReader;
use super::record::ControlType;
use super::v2::BatchHeader;

/// An entry of a `.txnindex` file: an aborted transaction whose ABORT marker is at
/// `last_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

/// Size of one `.txnindex` entry: version i16, producer id, first offset, last offset,
/// last stable offset (i64 each).
const TXN_INDEX_ENTRY: usize = 34;

/// Parses a `.txnindex` file.
pub fn parse_txn_index(bytes: &[u8]) -> Result<Vec<AbortedTxn>, SegmentErrorKind> {
    if !bytes.len().is_multiple_of(TXN_INDEX_ENTRY) {
        return Err(SegmentErrorKind::TxnIndex(format!(
            "{} bytes is not a whole number of {TXN_INDEX_ENTRY}-byte entries",
            bytes.len()
        )));
    }
    bytes
        .chunks_exact(TXN_INDEX_ENTRY)
        .enumerate()
        .map(|(i, e)| {
            let version = i16::from_be_bytes([e[0], e[1]]);
            if version != 0 {
                return Err(SegmentErrorKind::TxnIndex(format!("entry {i}: unknown version {version}")));
            }
            let long = |at: usize| i64::from_be_bytes(e[at..at + 8].try_into().expect("8 bytes"));
            Ok(AbortedTxn {
                producer_id: long(2),
                first_offset: long(10),
                last_offset: long(18),
                last_stable_offset: long(26),
            })
        })
        .collect()
}

/// A COMMIT or ABORT marker found in the segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub offset: i64,
    pub commit: bool,
    /// The control batch's timestamp: the partition leader's clock when it wrote the
    /// marker (brokers set it, whatever the topic's timestamp type). Older tasks: unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
}

/// A transaction with records in this segment and no marker in it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OpenTxn {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub first_offset: i64,
    pub last_offset: i64,
    /// Offset ranges `[base, last]` of its batches.
    pub batches: Vec<[i64; 2]>,
    pub records: u64,
    /// Its first record's timestamp and the greatest of its records' timestamps.
    pub first_timestamp: i64,
    pub max_timestamp: i64,
    /// Whether those are the broker's append times (`LogAppendTime`) rather than what
    /// the producer set (`CreateTime`).
    pub log_append_time: bool,
}

/// What became of a transaction, as far as this segment tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Commit,
    Abort,
    Open,
}

#[derive(Debug, Clone, Copy)]
struct Span {
    first_offset: i64,
    /// Offset and verdict of the marker ending the span; `None` when it is still open.
    end: Option<(i64, bool)>,
}

/// The fate of every transactional batch from the scan position to the end.
#[derive(Debug, Default)]
pub struct TxnPlan {
    spans: HashMap<i64, VecDeque<Span>>,
    index: Vec<AbortedTxn>,
}

impl TxnPlan {
    /// Reads the rest of the segment from `frames`, recording every transaction span.
    pub async fn scan<R: AsyncRead + Unpin>(
        mut frames: FrameReader<R>,
        index: Vec<AbortedTxn>,
        limits: &super::Limits,
    ) -> Result<TxnPlan, SegmentError> {
        let mut plan = TxnPlan { spans: HashMap::new(), index };
        while let Some(frame) = frames.next_frame().await? {
            if frame.magic() != 2 {
                continue;
            }
            let locate = |kind| SegmentError::new(frames.file(), frame.position, Some(frame.base_offset), kind);
            let header = BatchHeader::parse(&frame.bytes, false).map_err(locate)?;
            if !header.is_transactional() {
                continue;
            }
            let open = plan.spans.entry(header.producer_id).or_default();
            let is_open = open.back().is_some_and(|s| s.end.is_none());
            if !header.is_control() {
                if !is_open {
                    open.push_back(Span { first_offset: header.base_offset, end: None });
                }
                continue;
            }
            let batch = super::decode::decode_frame(&frame, limits).map_err(locate)?;
            let verdict = batch.control.iter().find_map(|c| match c {
                ControlType::Commit => Some(true),
                ControlType::Abort => Some(false),
                ControlType::Other(_) => None,
            });
            if let (Some(commit), true) = (verdict, is_open) {
                open.back_mut().expect("open span").end = Some((header.base_offset, commit));
            }
        }
        Ok(plan)
    }

    /// The fate of a transactional data batch of `producer_id` at `base_offset`.
    pub fn outcome(&mut self, producer_id: i64, base_offset: i64) -> Result<Outcome, SegmentErrorKind> {
        let spans = self.spans.get_mut(&producer_id);
        let Some(spans) = spans else {
            return Err(SegmentErrorKind::Malformed(format!(
                "transactional batch of producer {producer_id} missed by the lookahead scan"
            )));
        };
        while spans.front().is_some_and(|s| s.end.is_some_and(|(marker, _)| marker < base_offset)) {
            spans.pop_front();
        }
        let outcome = match spans.front() {
            Some(s) if s.first_offset <= base_offset => match s.end {
                Some((_, true)) => Outcome::Commit,
                Some((_, false)) => Outcome::Abort,
                None => Outcome::Open,
            },
            _ => {
                return Err(SegmentErrorKind::Malformed(format!(
                    "transactional batch of producer {producer_id} at offset {base_offset} outside every scanned transaction"
                )));
            }
        };
        let indexed_abort = self
            .index
            .iter()
            .any(|a| a.producer_id == producer_id && a.first_offset <= base_offset && base_offset <= a.last_offset);
        if indexed_abort && outcome != Outcome::Abort {
            return Err(SegmentErrorKind::TxnIndex(format!(
                "lists producer {producer_id} offset {base_offset} as aborted, the segment says {outcome:?}"
            )));
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txn_index_entries_parse() {
        let mut bytes = Vec::new();
        for (pid, first, last) in [(7i64, 10i64, 20i64), (8, 30, 31)] {
            bytes.extend_from_slice(&0i16.to_be_bytes());
            for v in [pid, first, last, 5] {
                bytes.extend_from_slice(&v.to_be_bytes());
            }
        }
        let parsed = parse_txn_index(&bytes).unwrap();
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[1], AbortedTxn { producer_id: 8, first_offset: 30, last_offset: 31, last_stable_offset: 5 });
        assert!(parse_txn_index(&bytes[..40]).is_err());
        bytes[0] = 1;
        assert!(parse_txn_index(&bytes).is_err());
    }

    #[test]
    fn outcomes_follow_spans() {
        let mut plan = TxnPlan::default();
        plan.spans.insert(
            1,
            VecDeque::from([
                Span { first_offset: 0, end: Some((5, false)) },
                Span { first_offset: 6, end: Some((9, true)) },
                Span { first_offset: 10, end: None },
            ]),
        );
        assert_eq!(plan.outcome(1, 0).unwrap(), Outcome::Abort);
        assert_eq!(plan.outcome(1, 3).unwrap(), Outcome::Abort);
        assert_eq!(plan.outcome(1, 7).unwrap(), Outcome::Commit);
        assert_eq!(plan.outcome(1, 12).unwrap(), Outcome::Open);
        assert!(plan.outcome(2, 12).is_err());
    }
}
