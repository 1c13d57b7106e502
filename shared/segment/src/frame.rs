//! Framing: splits a byte stream into batches by their `[offset: i64][length: i32]`
//! prefix, which magic v0, v1 and v2 share, checking each length before reading.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::Limits;
use super::error::{SegmentError, SegmentErrorKind};

/// Bytes of the shared prefix: base offset (8) and length (4).
pub const LOG_OVERHEAD: usize = 12;
/// Smallest body a length field may announce: a magic v0 message with null key and
/// value (crc 4, magic 1, attributes 1, key length 4, value length 4).
const MIN_BODY: u32 = 14;
/// Buffer size of reads from the source.
const READ_CHUNK: usize = 256 * 1024;

/// One batch as stored: its position and bytes (prefix included).
#[derive(Debug, Clone)]
pub struct Frame {
    pub position: u64,
    pub base_offset: i64,
    pub bytes: Bytes,
}

impl Frame {
    /// The magic byte, at the same place for every format version.
    pub fn magic(&self) -> i8 {
        self.bytes[LOG_OVERHEAD + 4] as i8
    }
}

/// Reads frames from an async byte stream with memory bounded by the largest frame.
pub struct FrameReader<R> {
    reader: R,
    file: String,
    position: u64,
    limits: Limits,
    /// Buffered bytes not yet handed out.
    buf: BytesMut,
    eof: bool,
    /// Zero bytes found after the last batch (a preallocated segment file's tail).
    trailing_zero_bytes: u64,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// `position` is where in the file `reader` starts.
    pub fn new(reader: R, file: impl Into<String>, position: u64, limits: Limits) -> Self {
        FrameReader {
            reader,
            file: file.into(),
            position,
            limits,
            buf: BytesMut::new(),
            eof: false,
            trailing_zero_bytes: 0,
        }
    }

    pub fn file(&self) -> &str {
        &self.file
    }

    /// Byte position of the next frame.
    pub fn position(&self) -> u64 {
        self.position
    }

    pub fn trailing_zero_bytes(&self) -> u64 {
        self.trailing_zero_bytes
    }

    fn error(&self, base_offset: Option<i64>, kind: SegmentErrorKind) -> SegmentError {
        SegmentError::new(self.file.clone(), self.position, base_offset, kind)
    }

    /// Buffers until at least `n` bytes are available or the stream ends; returns how
    /// many are available. Reads [`READ_CHUNK`] at a time (several small batches per
    /// read), so memory grows with the data actually read, never with a length field.
    async fn fill(&mut self, n: usize) -> Result<usize, SegmentError> {
        while self.buf.len() < n && !self.eof {
            self.buf.reserve(READ_CHUNK);
            let read = self.reader.read_buf(&mut self.buf).await.map_err(|e| self.error(None, e.into()))?;
            if read == 0 {
                self.eof = true;
            }
        }
        Ok(self.buf.len())
    }

    /// The next frame, or `None` at the end of the segment.
    pub async fn next_frame(&mut self) -> Result<Option<Frame>, SegmentError> {
        let available = self.fill(LOG_OVERHEAD).await?;
        if available == 0 {
            return Ok(None);
        }
        if available < LOG_OVERHEAD {
            return Err(self.error(
                None,
                SegmentErrorKind::Truncated { needed: LOG_OVERHEAD as u64, available: available as u64 },
            ));
        }
        let base_offset = i64::from_be_bytes(self.buf[..8].try_into().expect("8 bytes"));
        let length = i32::from_be_bytes(self.buf[8..12].try_into().expect("4 bytes"));
        if length == 0 && base_offset == 0 {
            return self.consume_zero_tail().await.map(|()| None);
        }
        let base = Some(base_offset);
        if length < MIN_BODY as i32 {
            return Err(self.error(base, SegmentErrorKind::InvalidLength { length, minimum: MIN_BODY }));
        }
        let length = length as u32;
        if length > self.limits.max_batch_bytes {
            return Err(
                self.error(base, SegmentErrorKind::BatchTooLarge { length, limit: self.limits.max_batch_bytes })
            );
        }
        let total = LOG_OVERHEAD + length as usize;
        let available = self.fill(total).await?;
        if available < total {
            return Err(
                self.error(base, SegmentErrorKind::Truncated { needed: total as u64, available: available as u64 })
            );
        }
        let frame = Frame { position: self.position, base_offset, bytes: self.buf.split_to(total).freeze() };
        self.position += total as u64;
        Ok(Some(frame))
    }

    /// A segment file preallocated by the broker ends in zeros: accept them, but only if
    /// everything that is left is zero.
    async fn consume_zero_tail(&mut self) -> Result<(), SegmentError> {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b != 0) {
                self.position += i as u64;
                return Err(self.error(
                    None,
                    SegmentErrorKind::Malformed(
                        "non-zero bytes after a zero batch length (garbage after the last batch)".into(),
                    ),
                ));
            }
            let n = self.buf.len();
            self.trailing_zero_bytes += n as u64;
            self.position += n as u64;
            self.buf.clear();
            if self.fill(READ_CHUNK).await? == 0 {
                return Ok(());
            }
        }
    }
}
