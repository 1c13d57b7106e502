//! A segment in S3, streamed with ranged GETs, [`READ_AHEAD`](floe_core::segment::READ_AHEAD)
//! of them in flight while the decoder reads the one before: memory holds those ranges,
//! never the object, and every range is pinned to the object's ETag (`If-Match`), so a segment
//! overwritten mid-read fails instead of mixing two versions.
//!
//! Every failure of these reads is a transient `StorageError` (`transient`): the
//! materializer tries the segment again, and a segment overwritten mid-read is then read
//! whole in its new version.

use std::io;

use async_trait::async_trait;
use aws_sdk_s3::Client;
use bytes::Bytes;
use tokio::io::AsyncRead;
use tokio_util::io::StreamReader;

use floe_core::retry::StorageError;
use floe_core::segment::{SegmentSource, read_ahead};

/// Bytes per ranged GET: large enough to amortise a request's latency, small enough
/// that the ranges read ahead fit the memory budget (16 MiB in flight).
pub const DEFAULT_RANGE_BYTES: u64 = 4 * 1024 * 1024;

/// An S3 object read as a segment.
#[derive(Clone)]
pub struct S3Source {
    client: Client,
    bucket: String,
    key: String,
    name: String,
    size: u64,
    etag: Option<String>,
    range_bytes: u64,
}

impl S3Source {
    /// Looks the object up (HEAD) for its size and ETag.
    pub async fn open(client: Client, bucket: &str, key: &str) -> io::Result<S3Source> {
        let head = client.head_object().bucket(bucket).key(key).send().await.map_err(|e| {
            transient(format!("HEAD s3://{bucket}/{key}: {}", aws_sdk_s3::error::DisplayErrorContext(e)))
        })?;
        let size = head.content_length().and_then(|l| u64::try_from(l).ok()).unwrap_or(0);
        Ok(S3Source {
            client,
            bucket: bucket.to_string(),
            key: key.to_string(),
            name: format!("s3://{bucket}/{key}"),
            size,
            etag: head.e_tag().map(str::to_string),
            range_bytes: DEFAULT_RANGE_BYTES,
        })
    }

    /// Changes the bytes fetched per GET.
    pub fn with_range_bytes(mut self, range_bytes: u64) -> Self {
        self.range_bytes = range_bytes.max(1);
        self
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn etag(&self) -> Option<&str> {
        self.etag.as_deref()
    }

    /// Bytes `range` of the object (not empty, within the object), pinned to its ETag.
    pub async fn read_range(&self, range: std::ops::Range<u64>) -> io::Result<Bytes> {
        let (start, end) = (range.start, range.end.saturating_sub(1));
        let response = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&self.key)
            .range(format!("bytes={start}-{end}"))
            .set_if_match(self.etag.clone())
            .send()
            .await
            .map_err(|e| {
                transient(format!(
                    "GET {} bytes {start}-{end}: {}",
                    self.name,
                    aws_sdk_s3::error::DisplayErrorContext(e)
                ))
            })?;
        let body = response
            .body
            .collect()
            .await
            .map_err(|e| transient(format!("reading {} bytes {start}-{end}: {e}", self.name)))?
            .into_bytes();
        if body.len() as u64 != end - start + 1 {
            return Err(transient(format!("{} bytes {start}-{end}: got {} bytes", self.name, body.len())));
        }
        Ok(body)
    }
}

/// A failed read of a segment's object, as the materializer sees it: worth trying again.
pub(crate) fn transient(message: String) -> io::Error {
    StorageError::Transient(message).into()
}

#[async_trait]
impl SegmentSource for S3Source {
    fn name(&self) -> &str {
        &self.name
    }

    async fn open_at(&self, position: u64) -> io::Result<Box<dyn AsyncRead + Send + Unpin>> {
        let ranges = split(position..self.size, self.range_bytes);
        let this = self.clone();
        let bytes = read_ahead(ranges, move |range| {
            let this = this.clone();
            async move { this.read_range(range).await }
        });
        Ok(Box::new(StreamReader::new(Box::pin(bytes))))
    }

    fn size(&self) -> Option<u64> {
        Some(self.size)
    }
}

/// `range` cut into consecutive ranges of `step` bytes (the last one shorter).
fn split(range: std::ops::Range<u64>, step: u64) -> Vec<std::ops::Range<u64>> {
    let step = step.max(1);
    (range.start..range.end)
        .step_by(usize::try_from(step).unwrap_or(usize::MAX))
        .map(|start| start..(start + step).min(range.end))
        .collect()
}

#[async_trait]
impl floe_core::segment::RangeRead for S3Source {
    fn name(&self) -> &str {
        &self.name
    }

    async fn read_range(&self, range: std::ops::Range<u64>) -> io::Result<Bytes> {
        if range.is_empty() {
            return Ok(Bytes::new());
        }
        S3Source::read_range(self, range).await
    }
}
