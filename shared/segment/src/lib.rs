//! Kafka log segment decoding (`floe-segment`): no Arrow, no Iceberg, no AWS SDK; the
//! core and the AWS adapters build on it, and the fuzz target `decode_segment` needs it alone.
//!
//! Owns everything between "bytes of a `.log` file" and "the committed records in it":
//!
//! ```text
//!  SegmentSource ──open_at(pos)──▶ AsyncRead ──▶ FrameReader ──frames──▶ decode_frame
//!  (file, memory, S3 ranged GETs)                 (offset+length            (CRC, codec,
//!                                                  framing, limits)          records)
//!                                                        │
//!                                                        ▼
//!                                 SegmentReader: read_committed filtering, summary
//!                                 (lookahead TxnScan from the first transactional batch,
//!                                  optional .txnindex)
//! ```
//!
//! - magic v2 record batches (CRC-32C) and legacy v0/v1 message sets (CRC-32), including
//!   compressed wrapper messages;
//! - codecs gzip, snappy (raw and xerial framing), lz4 (frame format, decoded in `lz4.rs`), zstd;
//! - control batches are recognised and never emitted as records; records of aborted
//!   transactions are dropped; transactions still open at the end of the segment are
//!   reported in the [`SegmentSummary`], their batches flagged [`BatchTxn::Open`];
//! - memory is bounded by the largest batch, never by the segment; every length field
//!   is checked against [`Limits`] and against the bytes actually present before it
//!   drives an allocation.
//!
//! Tiered-storage layouts that store the segment in chunks are read through [`tiered`].
//!
//! Every error names the file, the byte position of the batch and its base offset, and
//! answers [`Retryable`]: only a read that may pass on its own is worth trying again
//! (the one reading of an `io::Error`, and [`StorageError`], are in `retryable.rs`).

mod codec;
mod cursor;
mod decode;
mod error;
mod frame;
mod legacy;
mod location;
mod lz4;
mod reader;
mod record;
mod retryable;
mod source;
#[cfg(test)]
mod testing;
pub mod tiered;
mod txn;
mod v2;
pub mod varint;

pub use codec::Codec;
pub use decode::decode_frame;
pub use error::{MAX_OFFSET, OffsetError, SegmentError, SegmentErrorKind};
pub use frame::{Frame, FrameReader};
pub use location::{MAX_TOPIC_LEN, ObjectKind, SegmentLayout, SegmentLocation, topic_name_error};
pub use reader::SegmentReader;
#[cfg(any(test, feature = "fuzzing"))]
pub use record::encode_headers;
pub use record::{
    Batch, BatchKind, BatchTxn, ControlType, Header, Headers, Record, RecordIter, Records, TimestampType,
};
pub use retryable::{Retryable, StorageError};
pub use source::{FileSource, MemorySource, READ_AHEAD, RangeRead, SegmentSource, read_ahead};
pub use txn::{AbortedTxn, OpenTxn, TxnMarker, parse_txn_index};

pub use reader::SegmentSummary;

/// Bounds on what a segment may make the decoder allocate. A length field beyond these
/// ends decoding with an error instead of an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest record batch (or legacy message) accepted, in bytes as stored.
    pub max_batch_bytes: u32,
    /// Largest decompressed payload of one batch (decompression-bomb guard).
    pub max_decompressed_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_batch_bytes: 64 * 1024 * 1024, max_decompressed_bytes: 256 * 1024 * 1024 }
    }
}

/// Decodes a whole segment held in memory, returning its committed records' count and
/// summary; used by the fuzz target and its corpus replay. Never panics on any input.
pub fn decode_bytes(name: &str, bytes: bytes::Bytes, limits: Limits) -> Result<SegmentSummary, SegmentError> {
    futures::executor::block_on(async {
        let source = std::sync::Arc::new(MemorySource::new(name, bytes));
        let mut reader = SegmentReader::open(source, limits).await?;
        while reader.next_batch().await?.is_some() {}
        Ok(reader.into_summary())
    })
}
