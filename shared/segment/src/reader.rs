//! The segment reader: frames → decoded batches, read_committed, and a summary.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::io::AsyncRead;

use super::Limits;
use super::codec::Codec;
use super::decode::decode_frame;
use super::error::{SegmentError, SegmentErrorKind, check_offset};
use super::frame::{Frame, FrameReader};
use super::record::{Batch, BatchKind, BatchTxn, ControlType, TimestampType};
use super::source::SegmentSource;
use super::txn::{AbortedTxn, OpenTxn, Outcome, TxnMarker, TxnPlan};

type BoxRead = Box<dyn AsyncRead + Send + Unpin>;

/// An error of `frame` in `file`.
fn locate(file: &str, frame: &Frame, kind: SegmentErrorKind) -> SegmentError {
    SegmentError::new(file, frame.position, Some(frame.base_offset), kind)
}

/// What a segment held, counted as it was read.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SegmentSummary {
    pub file: String,
    /// Bytes read, trailing zeros included.
    pub bytes: u64,
    /// Batches per kind (legacy entries count as one batch each).
    pub batches: BTreeMap<BatchKind, u64>,
    /// Batches per codec.
    pub codecs: BTreeMap<Codec, u64>,
    /// Batches per magic byte.
    pub magic: BTreeMap<i8, u64>,
    /// Committed data records (what `inspect` prints).
    pub records: u64,
    /// Committed data records whose value is null (tombstones).
    pub tombstones: u64,
    /// Records of transactions aborted in this segment (dropped).
    pub aborted_records: u64,
    /// Records of transactions still open at the end of the segment (not emitted as committed).
    pub open_records: u64,
    /// Control records (transaction markers and others).
    pub control_records: u64,
    /// First and last offset covered by the segment's batches, control batches included.
    pub first_offset: Option<i64>,
    pub last_offset: Option<i64>,
    /// Transaction markers found in the segment.
    pub markers: Vec<TxnMarker>,
    /// Transactions whose marker lies beyond this segment.
    pub open_transactions: Vec<OpenTxn>,
    /// Zero bytes after the last batch (preallocated segment files).
    pub trailing_zero_bytes: u64,
    /// The newest timestamp (ms) of the committed data records; `None` when none has one.
    #[serde(skip)]
    pub max_timestamp: Option<i64>,
}

/// Streams the committed batches of a segment.
pub struct SegmentReader {
    source: Arc<dyn SegmentSource>,
    frames: FrameReader<BoxRead>,
    limits: Limits,
    txn_index: Option<Vec<AbortedTxn>>,
    plan: Option<TxnPlan>,
    open: BTreeMap<(i64, i64), OpenTxn>,
    summary: SegmentSummary,
}

impl SegmentReader {
    /// Opens `source` from its first byte.
    pub async fn open(source: Arc<dyn SegmentSource>, limits: Limits) -> Result<Self, SegmentError> {
        let reader = source.open_at(0).await.map_err(|e| SegmentError::new(source.name(), 0, None, e.into()))?;
        let frames = FrameReader::new(reader, source.name(), 0, limits);
        Ok(SegmentReader {
            summary: SegmentSummary { file: source.name().to_string(), ..Default::default() },
            source,
            frames,
            limits,
            txn_index: None,
            plan: None,
            open: BTreeMap::new(),
        })
    }

    /// Uses the aborted transactions of the segment's `.txnindex` (checked against the
    /// markers in the segment).
    pub fn with_txn_index(mut self, aborted: Vec<AbortedTxn>) -> Self {
        self.txn_index = Some(aborted);
        self
    }

    pub fn summary(&self) -> &SegmentSummary {
        &self.summary
    }

    /// The segment's length in bytes, when its source knows it without reading it.
    pub fn size(&self) -> Option<u64> {
        self.source.size()
    }

    /// The summary, complete once [`Self::next_batch`] has returned `None`.
    pub fn into_summary(self) -> SegmentSummary {
        self.summary
    }

    /// The next batch of data records that are committed ([`BatchTxn::Committed`]) or
    /// whose transaction is still open ([`BatchTxn::Open`]); `None` at the end. Control
    /// batches and aborted batches are counted in the summary and skipped.
    pub async fn next_batch(&mut self) -> Result<Option<Batch>, SegmentError> {
        loop {
            let Some(frame) = self.frames.next_frame().await? else {
                self.finish();
                return Ok(None);
            };
            let mut batch = decode_frame(&frame, &self.limits).map_err(|k| locate(self.source.name(), &frame, k))?;
            // Every batch starts after the last offset of the batches before it.
            check_offset(batch.base_offset, self.summary.last_offset)
                .map_err(|e| locate(self.source.name(), &frame, e.into()))?;
            self.count(&batch);
            match batch.kind {
                BatchKind::Control => {
                    self.record_markers(&batch);
                    continue;
                }
                BatchKind::Transactional => {
                    if self.plan.is_none() {
                        self.plan = Some(self.scan_from(&frame).await?);
                    }
                    let plan = self.plan.as_mut().expect("plan");
                    let outcome = plan
                        .outcome(batch.producer_id, batch.base_offset)
                        .map_err(|k| locate(self.source.name(), &frame, k))?;
                    let n = batch.records.len() as u64;
                    match outcome {
                        Outcome::Abort => {
                            self.summary.aborted_records += n;
                            continue;
                        }
                        Outcome::Open => {
                            self.summary.open_records += n;
                            self.track_open(&batch);
                            batch.txn = BatchTxn::Open { producer_id: batch.producer_id };
                            return Ok(Some(batch));
                        }
                        Outcome::Commit => {}
                    }
                }
                BatchKind::Data | BatchKind::Legacy => {}
            }
            self.summary.records += batch.records.len() as u64;
            let newest = batch.records.iter().map(|r| r.timestamp).filter(|&t| t >= 0).max();
            self.summary.max_timestamp = self.summary.max_timestamp.max(newest);
            self.summary.tombstones += batch.records.iter().filter(|r| r.value.is_none()).count() as u64;
            return Ok(Some(batch));
        }
    }

    async fn scan_from(&self, frame: &Frame) -> Result<TxnPlan, SegmentError> {
        tracing::debug!(file = self.source.name(), position = frame.position, "transactional batch: lookahead scan");
        let reader = self
            .source
            .open_at(frame.position)
            .await
            .map_err(|e| SegmentError::new(self.source.name(), frame.position, None, e.into()))?;
        let frames = FrameReader::new(reader, self.source.name(), frame.position, self.limits);
        TxnPlan::scan(frames, self.txn_index.clone().unwrap_or_default(), &self.limits).await
    }

    fn count(&mut self, batch: &Batch) {
        let s = &mut self.summary;
        *s.batches.entry(batch.kind).or_default() += 1;
        *s.codecs.entry(batch.codec).or_default() += 1;
        *s.magic.entry(batch.magic).or_default() += 1;
        s.first_offset = Some(s.first_offset.map_or(batch.base_offset, |f| f.min(batch.base_offset)));
        s.last_offset = Some(s.last_offset.map_or(batch.last_offset, |l| l.max(batch.last_offset)));
    }

    fn record_markers(&mut self, batch: &Batch) {
        self.summary.control_records += batch.control.len() as u64;
        for (i, control) in batch.control.iter().enumerate() {
            let commit = match control {
                ControlType::Commit => true,
                ControlType::Abort => false,
                ControlType::Other(_) => continue,
            };
            self.summary.markers.push(TxnMarker {
                producer_id: batch.producer_id,
                producer_epoch: batch.producer_epoch,
                offset: batch.base_offset + i as i64,
                commit,
                timestamp: (batch.max_timestamp >= 0).then_some(batch.max_timestamp),
            });
        }
    }

    fn track_open(&mut self, batch: &Batch) {
        let pid = batch.producer_id;
        let key = self.open.keys().find(|(p, _)| *p == pid).copied().unwrap_or((pid, batch.base_offset));
        let first = batch.records.first();
        let txn = self.open.entry(key).or_insert_with(|| OpenTxn {
            producer_id: pid,
            producer_epoch: batch.producer_epoch,
            first_offset: batch.base_offset,
            last_offset: batch.last_offset,
            batches: Vec::new(),
            records: 0,
            first_timestamp: first.map_or(-1, |r| r.timestamp),
            max_timestamp: -1,
            log_append_time: first.is_some_and(|r| r.timestamp_type == TimestampType::LogAppend),
        });
        txn.last_offset = batch.last_offset;
        txn.max_timestamp = batch.records.iter().map(|r| r.timestamp).fold(txn.max_timestamp, i64::max);
        txn.batches.push([batch.base_offset, batch.last_offset]);
        txn.records += batch.records.len() as u64;
    }

    fn finish(&mut self) {
        self.summary.bytes = self.frames.position();
        self.summary.trailing_zero_bytes = self.frames.trailing_zero_bytes();
        self.summary.open_transactions = std::mem::take(&mut self.open).into_values().collect();
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::super::error::OffsetError;
    use super::super::testing::{legacy_message, legacy_wrapper, v2_batch};
    use super::super::{Limits, Retryable, decode_bytes};
    use super::*;

    fn decode(parts: &[Vec<u8>]) -> Result<SegmentSummary, SegmentError> {
        decode_bytes("seg.log", Bytes::from(parts.concat()), Limits::default())
    }

    /// The error of a segment that must be rejected, checked to name the file, the byte
    /// position and the base offset of the bad batch.
    fn rejected(parts: &[Vec<u8>], bad: usize, base_offset: i64) -> SegmentErrorKind {
        let e = decode(parts).expect_err("rejected");
        let position: usize = parts[..bad].iter().map(Vec::len).sum();
        assert_eq!((e.file.as_str(), e.position, e.base_offset), ("seg.log", position as u64, Some(base_offset)));
        assert!(e.to_string().starts_with(&format!("seg.log: byte {position} (batch base offset {base_offset}): ")));
        assert!(!e.retryable());
        e.kind
    }

    #[test]
    fn increasing_offsets_of_every_format_decode() {
        let parts = [
            legacy_message(0, 0, 0, b"a"),
            legacy_wrapper(0, 3, &[1, 2, 3]),
            legacy_wrapper(1, 6, &[0, 1, 2]),
            legacy_message(1, 8, 0, b"b"), // offset 7 compacted away
            v2_batch(9, &[0, 2], 3),
            v2_batch(13, &[], 0),
        ];
        let summary = decode(&parts).unwrap();
        assert_eq!((summary.records, summary.first_offset, summary.last_offset), (10, Some(0), Some(13)));
    }

    #[test]
    fn a_negative_legacy_offset_is_rejected() {
        let kind = rejected(&[legacy_message(0, -1, 0, b"a")], 0, -1);
        assert!(matches!(kind, SegmentErrorKind::Offset(OffsetError::Negative(-1))), "{kind}");
        let kind = rejected(&[legacy_message(1, 0, 0, b"a"), legacy_message(1, -1, 0, b"b")], 1, -1);
        assert!(matches!(kind, SegmentErrorKind::Offset(OffsetError::Negative(-1))), "{kind}");
    }

    #[test]
    fn negative_offsets_inside_legacy_wrappers_are_rejected() {
        // v1: relative inner offsets 0..=2 under a wrapper at 1 make -1, 0, 1.
        let kind = rejected(&[legacy_wrapper(1, 1, &[0, 1, 2])], 0, 1);
        assert!(
            kind.to_string()
                .contains("record 0 (offset Some(-1)): inner message (stored offset 0): offset -1 is negative"),
            "{kind}"
        );
        // v1: hostile relative offsets: one no rebase can place, one far below the last.
        let kind = rejected(&[legacy_wrapper(1, 5, &[i64::MIN + 1, i64::MIN + 2])], 0, 5);
        assert!(kind.to_string().contains("relative inner offset -9223372036854775806 does not fit"), "{kind}");
        let kind = rejected(&[legacy_wrapper(1, 5, &[i64::MIN, 0])], 0, 5);
        assert!(kind.to_string().contains("is negative"), "{kind}");
        // v1: going backwards puts the first inner message past the wrapper's offset.
        let kind = rejected(&[legacy_wrapper(1, 5, &[0, -5])], 0, 5);
        assert!(
            kind.to_string()
                .contains("offset Some(10)): inner message (stored offset 0): beyond the wrapper's offset 5"),
            "{kind}"
        );
        // v0: absolute inner offsets.
        let kind = rejected(&[legacy_wrapper(0, 2, &[-1, 0, 2])], 0, 2);
        assert!(kind.to_string().contains("offset -1 is negative"), "{kind}");
    }

    #[test]
    fn legacy_offsets_going_backwards_are_rejected() {
        // Between messages: a repeat, and a step back.
        for second in [5, 4] {
            let kind = rejected(&[legacy_message(0, 5, 0, b"a"), legacy_message(0, second, 0, b"b")], 1, second);
            assert!(
                matches!(kind, SegmentErrorKind::Offset(OffsetError::NotIncreasing { offset, previous: 5 }) if offset == second),
                "{kind}"
            );
        }
        // A wrapper overlapping the message before it: its first inner offset is 4.
        let kind = rejected(&[legacy_message(1, 4, 0, b"a"), legacy_wrapper(1, 6, &[0, 1, 2])], 1, 6);
        assert!(
            matches!(kind, SegmentErrorKind::Offset(OffsetError::NotIncreasing { offset: 4, previous: 4 })),
            "{kind}"
        );
        // Inside a v0 wrapper: backwards, and beyond the wrapper's own offset.
        let kind = rejected(&[legacy_wrapper(0, 9, &[8, 7, 9])], 0, 9);
        assert!(
            kind.to_string()
                .contains("record 1 (offset Some(7)): inner message (stored offset 7): offset 7 is not after offset 8"),
            "{kind}"
        );
        let kind = rejected(&[legacy_wrapper(0, 9, &[8, 10])], 0, 9);
        assert!(kind.to_string().contains("beyond the wrapper's offset 9"), "{kind}");
    }

    #[test]
    fn v2_offsets_going_backwards_are_rejected() {
        // Between batches: the second starts inside the first (10..=12).
        let kind = rejected(&[v2_batch(10, &[0, 1, 2], 2), v2_batch(11, &[0], 0)], 1, 11);
        assert!(
            matches!(kind, SegmentErrorKind::Offset(OffsetError::NotIncreasing { offset: 11, previous: 12 })),
            "{kind}"
        );
        // After a legacy message at a higher offset.
        let kind = rejected(&[legacy_message(1, 20, 0, b"a"), v2_batch(3, &[0], 0)], 1, 3);
        assert!(
            matches!(kind, SegmentErrorKind::Offset(OffsetError::NotIncreasing { offset: 3, previous: 20 })),
            "{kind}"
        );
        // Inside a batch: a record repeating or preceding the one before it.
        for deltas in [[0, 2, 1], [0, 1, 1]] {
            let kind = rejected(&[v2_batch(10, &deltas, 2)], 0, 10);
            assert!(kind.to_string().starts_with("record 2 (offset Some(11)): offset 11 is not after"), "{kind}");
        }
    }

    #[test]
    fn v2_offsets_at_the_ends_of_the_i64_range_are_rejected() {
        let kind = rejected(&[v2_batch(-1, &[0], 0)], 0, -1);
        assert!(matches!(kind, SegmentErrorKind::Offset(OffsetError::Negative(-1))), "{kind}");
        let base = i64::MAX - 3;
        let kind = rejected(&[v2_batch(base, &[0], i32::MAX)], 0, base);
        assert!(matches!(kind, SegmentErrorKind::Offset(OffsetError::DeltaOverflow { delta: i32::MAX, .. })), "{kind}");
        assert!(kind.to_string().contains("+ last offset delta 2147483647 overflows i64"), "{kind}");
        // A last offset of i64::MAX leaves no next offset.
        let kind = rejected(&[v2_batch(base, &[0, 3], 3)], 0, base);
        assert!(matches!(kind, SegmentErrorKind::Offset(OffsetError::TooLarge(i64::MAX))), "{kind}");
        let kind = rejected(&[legacy_message(1, i64::MAX, 0, b"a")], 0, i64::MAX);
        assert!(matches!(kind, SegmentErrorKind::Offset(OffsetError::TooLarge(i64::MAX))), "{kind}");
        // One below is the largest offset accepted.
        let summary = decode(&[v2_batch(base, &[0, 2], 2)]).unwrap();
        assert_eq!(summary.last_offset, Some(i64::MAX - 1));
    }
}
