//! Errors of segment decoding: what went wrong, and where (file, byte position, base offset).

use std::fmt;

/// What went wrong while decoding a segment.
#[derive(Debug, thiserror::Error)]
pub enum SegmentErrorKind {
    /// Reading the source failed (network, disk). The only retryable kind.
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
    /// The batch header is inconsistent (negative counts, offsets out of range, ...).
    #[error("malformed batch: {0}")]
    Malformed(String),
    /// A transaction index contradicts the segment.
    #[error("transaction index: {0}")]
    TxnIndex(String),
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

    /// True when trying again may succeed (the bytes could not be read); false when the
    /// bytes themselves are bad and a retry would fail the same way.
    pub fn retryable(&self) -> bool {
        // InvalidData: the bytes arrived but are bad (a corrupt tiered-storage chunk).
        matches!(&self.kind, SegmentErrorKind::Io(e) if e.kind() != std::io::ErrorKind::InvalidData)
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
