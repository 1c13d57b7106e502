//! Where segment bytes come from: anything that can be read as a stream from a given
//! byte position (a local file, bytes in memory, an S3 object read with ranged GETs).

use std::future::Future;
use std::io;
use std::ops::Range;
use std::path::PathBuf;

use async_trait::async_trait;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncSeekExt};
use tokio_util::task::AbortOnDropHandle;

/// A segment's bytes, readable as a stream from any position. Reopening lets the
/// reader look ahead (transaction markers) without holding the segment in memory.
#[async_trait]
pub trait SegmentSource: Send + Sync {
    /// The name errors and logs use (a path or an `s3://` URI).
    fn name(&self) -> &str;
    /// A stream of the bytes from `position` to the end.
    async fn open_at(&self, position: u64) -> io::Result<Box<dyn AsyncRead + Send + Unpin>>;
    /// The segment's length in bytes, when known without reading it.
    fn size(&self) -> Option<u64> {
        None
    }
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
        use std::io::Seek;
        let mut file = std::fs::File::open(&self.path)?;
        file.seek(io::SeekFrom::Start(position))?;
        Ok(Box::new(InlineFile(file)))
    }

    fn size(&self) -> Option<u64> {
        std::fs::metadata(&self.path).ok().map(|m| m.len())
    }
}

/// A local file read in the task's own thread. Segments are read in large chunks
/// (the frame reader asks for 256 KiB at a time) from local disks or the page cache,
/// where a read is a memory copy: cheaper than `tokio::fs`'s hop to the blocking pool
/// per read (two thread switches, and a copy through its buffer), which cost about 7%
/// of decoding a segment. A file on a slow network mount would hold the thread for
/// the length of each read.
struct InlineFile(std::fs::File);

impl AsyncRead for InlineFile {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let read = loop {
            match read_uninit(&self.0, buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                read => break read,
            }
        };
        std::task::Poll::Ready(read)
    }
}

/// Reads from `file` into `buf`'s unfilled part without zeroing it first: the frame
/// reader hands over fresh (uninitialised) room each time, and zeroing 256 KiB before
/// every read cost 1.5% of decoding a segment.
#[cfg(unix)]
fn read_uninit(file: &std::fs::File, buf: &mut tokio::io::ReadBuf<'_>) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: `read(2)` writes at most `unfilled.len()` bytes into the unfilled part and
    // never reads it; the `n` bytes it reports are then initialised.
    unsafe {
        let unfilled = buf.unfilled_mut();
        let n = libc::read(file.as_raw_fd(), unfilled.as_mut_ptr().cast(), unfilled.len());
        let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
        buf.assume_init(n);
        buf.advance(n);
    }
    Ok(())
}

#[cfg(not(unix))]
fn read_uninit(mut file: &std::fs::File, buf: &mut tokio::io::ReadBuf<'_>) -> io::Result<()> {
    use std::io::Read;
    let n = file.read(buf.initialize_unfilled())?;
    buf.advance(n);
    Ok(())
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

    fn size(&self) -> Option<u64> {
        Some(self.bytes.len() as u64)
    }
}

/// Ranged reads a remote segment keeps in flight ahead of its decoder: the next ranges
/// download while the current one is decoded, so a segment takes about the longer of
/// its download and its decoding rather than their sum. Memory holds this many ranges
/// (and the one being decoded).
pub const READ_AHEAD: usize = 4;

/// The results of `fetch` over `ranges`, in their order, up to [`READ_AHEAD`] of them
/// running at once, each as a task of its own: a download goes on while the reader of
/// the stream decodes (a future that is not polled would not download). Dropping the
/// stream (an error, the reader done early) aborts the reads still running.
pub fn read_ahead<T, F, Fut>(ranges: Vec<Range<u64>>, mut fetch: F) -> impl Stream<Item = io::Result<T>> + Send
where
    T: Send + 'static,
    F: FnMut(Range<u64>) -> Fut + Send,
    Fut: Future<Output = io::Result<T>> + Send + 'static,
{
    futures::stream::iter(ranges)
        .map(move |range| {
            let task = AbortOnDropHandle::new(tokio::spawn(fetch(range)));
            async move { task.await.map_err(io::Error::other)? }
        })
        .buffered(READ_AHEAD)
}

/// Random access to an object's bytes, for layouts that locate data through an index
/// (the tiered-storage chunk index, the `.indexes` blob).
#[async_trait]
pub trait RangeRead: Send + Sync {
    fn name(&self) -> &str;
    /// Bytes `range` (within the object).
    async fn read_range(&self, range: std::ops::Range<u64>) -> io::Result<Bytes>;
}

#[async_trait]
impl RangeRead for FileSource {
    fn name(&self) -> &str {
        &self.name
    }

    async fn read_range(&self, range: std::ops::Range<u64>) -> io::Result<Bytes> {
        use tokio::io::AsyncReadExt;
        let mut file = tokio::fs::File::open(&self.path).await?;
        file.seek(io::SeekFrom::Start(range.start)).await?;
        let mut buf = vec![0; usize::try_from(range.end.saturating_sub(range.start)).map_err(io::Error::other)?];
        file.read_exact(&mut buf).await?;
        Ok(buf.into())
    }
}

#[async_trait]
impl RangeRead for MemorySource {
    fn name(&self) -> &str {
        &self.name
    }

    async fn read_range(&self, range: std::ops::Range<u64>) -> io::Result<Bytes> {
        let (start, end) =
            (usize::try_from(range.start).unwrap_or(usize::MAX), usize::try_from(range.end).unwrap_or(usize::MAX));
        if start > end || end > self.bytes.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{}: bytes {start}..{end} beyond its {} bytes", self.name, self.bytes.len()),
            ));
        }
        Ok(self.bytes.slice(start..end))
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    /// A file read in many reads into fresh (uninitialised) room, from its start and
    /// from a position, comes back byte for byte.
    #[tokio::test]
    async fn a_file_is_read_whole_from_any_position() {
        let bytes: Vec<u8> = (0..700_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &bytes).unwrap();
        let source = FileSource::new(file.path());
        for position in [0, 1_000, 699_999, 700_000, 800_000] {
            let mut read = Vec::new();
            let mut reader = source.open_at(position).await.unwrap();
            let mut chunk = bytes::BytesMut::new();
            loop {
                chunk.reserve(64 << 10);
                if reader.read_buf(&mut chunk).await.unwrap() == 0 {
                    break;
                }
                read.extend_from_slice(&chunk.split());
            }
            assert_eq!(read, bytes[(position as usize).min(bytes.len())..], "from {position}");
        }
    }

    /// Reads ahead run as tasks of their own, at most [`READ_AHEAD`] at once, go on
    /// while the reader is busy elsewhere (not polling), and come out in the order of
    /// their ranges whatever order they finish in.
    #[tokio::test(start_paused = true)]
    async fn reads_ahead_a_bounded_number_at_once_in_order() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let counter = || Arc::new(AtomicUsize::new(0));
        let (running, most, done) = (counter(), counter(), counter());
        let ranges: Vec<Range<u64>> = (0..10).map(|i| i * 10..i * 10 + 10).collect();
        let (r, m, d) = (running.clone(), most.clone(), done.clone());
        let reads = read_ahead(ranges.clone(), move |range| {
            let (running, most, done) = (r.clone(), m.clone(), d.clone());
            async move {
                most.fetch_max(running.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                // The first range finishes first; of the others, later ones first.
                let i = range.start / 10;
                tokio::time::sleep(std::time::Duration::from_millis(if i == 0 { 10 } else { 100 - 10 * i })).await;
                running.fetch_sub(1, Ordering::SeqCst);
                done.fetch_add(1, Ordering::SeqCst);
                Ok(range)
            }
        });
        futures::pin_mut!(reads);
        assert_eq!(reads.next().await.unwrap().unwrap(), ranges[0]);
        assert_eq!(done.load(Ordering::SeqCst), 1);
        // The reader busy (not polling): the reads ahead of it finish meanwhile.
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        assert_eq!(done.load(Ordering::SeqCst), READ_AHEAD);
        let rest: Vec<Range<u64>> = reads.map(Result::unwrap).collect().await;
        assert_eq!(rest, ranges[1..]);
        assert_eq!(most.load(Ordering::SeqCst), READ_AHEAD);
    }

    /// A read the system refuses (here: a directory) is an error, not an empty segment.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_refused_read_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut reader = FileSource::new(dir.path()).open_at(0).await.unwrap();
        let err = reader.read_buf(&mut bytes::BytesMut::with_capacity(1024)).await.unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EISDIR), "{err}");
    }
}
