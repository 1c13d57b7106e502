//! Errors of segment decoding: what went wrong, and where (file, byte position, base offset).

use std::fmt;

use crate::retryable::Retryable;

/// What went wrong while decoding a segment.
#[derive(Debug, thiserror::Error)]
pub enum SegmentErrorKind {
    /// Reading the source failed (network, disk). The only kind that may be retryable
    /// (as the `io::Error` answers, [`Retryable`]).
    #[error("read failed: {0}")]
    Io(#[from] std::io::Error),
    /// The file ends inside a batch.
    #[error("truncated: {needed} bytes expected, only {available} present")]
    Truncated { needed: u64, available: u64 },
    /// A batch length field outside what the format allows.
    #[error("invalid batch length {length} (minimum {minimum})")]
    InvalidLength { length: i32, minimum: u32 },
    /// A batch length field beyond the configured limit.
    #[error("batch length {length} exceeds the limit of {limit} bytes")]
    BatchTooLarge { length: u32, limit: u32 },
    /// A checksum mismatch.
    #[error("{algorithm} mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum { algorithm: &'static str, stored: u32, computed: u32 },
    #[error("unsupported magic byte {0}")]
    UnsupportedMagic(i8),
    #[error("unsupported compression codec id {0}")]
    UnsupportedCodec(u8),
    #[error("{codec} decompression failed: {detail}")]
    Decompress { codec: &'static str, detail: String },
    /// Decompressed output beyond the configured limit (decompression bomb).
    #[error("{codec} payload decompresses to more than the limit of {limit} bytes")]
    DecompressedTooLarge { codec: &'static str, limit: usize },
    /// A record inside a batch does not parse.
    #[error("record {index} (offset {offset:?}): {detail}")]
    Record { index: usize, offset: Option<i64>, detail: String },
    /// The batch header is inconsistent (negative counts, lengths, ...).
    #[error("malformed batch: {0}")]
    Malformed(String),
    /// An offset the table could not record: negative, at the top of the i64 range, or
    /// not after the offset before it.
    #[error(transparent)]
    Offset(#[from] OffsetError),
    /// A transaction index contradicts the segment.
    #[error("transaction index: {0}")]
    TxnIndex(String),
}

/// Why an offset is refused. Offsets are recorded in the table's summary as ranges and
/// `last + 1` is the next offset expected, so every offset must lie in
/// `0..=`[`MAX_OFFSET`], and each must be after the one before it in the segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OffsetError {
    #[error("offset {0} is negative")]
    Negative(i64),
    #[error("offset {0} is at the top of the i64 range (the offset after it overflows)")]
    TooLarge(i64),
    #[error("base offset {base} + last offset delta {delta} overflows i64")]
    DeltaOverflow { base: i64, delta: i32 },
    #[error("offset {offset} is not after offset {previous} before it (offsets go backwards or repeat)")]
    NotIncreasing { offset: i64, previous: i64 },
}

/// The largest offset a segment may hold: `last + 1` must still be an i64.
pub const MAX_OFFSET: i64 = i64::MAX - 1;

/// Checks that `offset` lies in `0..=MAX_OFFSET` and is after `previous`, if any.
pub fn check_offset(offset: i64, previous: Option<i64>) -> Result<(), OffsetError> {
    if offset < 0 {
        return Err(OffsetError::Negative(offset));
    }
    if offset > MAX_OFFSET {
        return Err(OffsetError::TooLarge(offset));
    }
    match previous {
        Some(previous) if offset <= previous => Err(OffsetError::NotIncreasing { offset, previous }),
        _ => Ok(()),
    }
}

/// A segment decoding error with its location.
#[derive(Debug, thiserror::Error)]
pub struct SegmentError {
    /// The file or object the bytes came from.
    pub file: String,
    /// Byte position of the batch (or of the read) in the file.
    pub position: u64,
    /// Base offset of the batch, once its header was read.
    pub base_offset: Option<i64>,
    #[source]
    pub kind: SegmentErrorKind,
}

impl SegmentError {
    pub fn new(file: impl Into<String>, position: u64, base_offset: Option<i64>, kind: SegmentErrorKind) -> Self {
        SegmentError { file: file.into(), position, base_offset, kind }
    }
}

impl Retryable for SegmentError {
    /// True when trying again may succeed (the bytes could not be read, and the source
    /// says a retry may help); false when the bytes themselves are bad and a retry would
    /// fail the same way.
    fn retryable(&self) -> bool {
        matches!(&self.kind, SegmentErrorKind::Io(e) if e.retryable())
    }
}

impl fmt::Display for SegmentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: byte {}", self.file, self.position)?;
        if let Some(base) = self.base_offset {
            write!(f, " (batch base offset {base})")?;
        }
        write!(f, ": {}", self.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StorageError;

    #[test]
    fn only_a_read_that_may_pass_is_retryable() {
        let at = |kind| SegmentError::new("s3://b/seg.log", 42, Some(7), kind);
        let io = |e: std::io::Error| at(SegmentErrorKind::Io(e));
        assert!(io(StorageError::Transient("GET: SlowDown".into()).into()).retryable());
        assert!(io(std::io::ErrorKind::ConnectionReset.into()).retryable());
        assert!(!io(StorageError::Refused("GET: AccessDenied".into()).into()).retryable());
        assert!(!io(StorageError::Corrupt("chunk 1: not a zstd frame".into()).into()).retryable());
        assert!(!io(std::io::ErrorKind::NotFound.into()).retryable());
        assert!(!at(SegmentErrorKind::Checksum { algorithm: "CRC-32C", stored: 1, computed: 2 }).retryable());
        assert!(!at(SegmentErrorKind::Truncated { needed: 61, available: 12 }).retryable());
    }
}
