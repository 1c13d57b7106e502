//! Where segment bytes come from: anything that can be read as a stream from a given
//! byte position (a local file, bytes in memory, an S3 object read with ranged GETs).

use std::io;
use std::path::PathBuf;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncSeekExt};

/// A segment's bytes, readable as a stream from any position. Reopening lets the
/// reader look ahead (transaction markers) without holding the segment in memory.
#[async_trait]
pub trait SegmentSource: Send + Sync {
    /// The name errors and logs use (a path or an `s3://` URI).
    fn name(&self) -> &str;
    /// A stream of the bytes from `position` to the end.
    async fn open_at(&self, position: u64) -> io::Result<Box<dyn AsyncRead + Send + Unpin>>;
}

/// A segment in a local file.
pub struct FileSource {
    path: PathBuf,
    name: String,
}

impl FileSource {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        FileSource { name: path.display().to_string(), path }
    }
}

#[async_trait]
impl SegmentSource for FileSource {
    fn name(&self) -> &str {
        &self.name
    }

    async fn open_at(&self, position: u64) -> io::Result<Box<dyn AsyncRead + Send + Unpin>> {
        let mut file = tokio::fs::File::open(&self.path).await?;
        file.seek(io::SeekFrom::Start(position)).await?;
        Ok(Box::new(file))
    }
}

/// A segment held in memory (tests, fuzzing, small objects).
pub struct MemorySource {
    name: String,
    bytes: Bytes,
}

impl MemorySource {
    pub fn new(name: impl Into<String>, bytes: impl Into<Bytes>) -> Self {
        MemorySource { name: name.into(), bytes: bytes.into() }
    }
}

#[async_trait]
impl SegmentSource for MemorySource {
    fn name(&self) -> &str {
        &self.name
    }

    async fn open_at(&self, position: u64) -> io::Result<Box<dyn AsyncRead + Send + Unpin>> {
        let start = usize::try_from(position).unwrap_or(usize::MAX).min(self.bytes.len());
        Ok(Box::new(io::Cursor::new(self.bytes.slice(start..))))
    }
}
