//! Reading the objects tiered storage (or a broker log dir copy) left: S3 on AWS, a local
//! folder for `floe local run`.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::segment::{FileSource, RangeRead, SegmentSource};

/// An object to look at: a bucket and key (the bucket is empty for a local folder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    pub bucket: String,
    pub key: String,
}

impl ObjectRef {
    pub fn new(bucket: impl Into<String>, key: impl Into<String>) -> Self {
        ObjectRef { bucket: bucket.into(), key: key.into() }
    }

    /// The same object's sibling with another file extension (`x.log` → `x.indexes`).
    pub fn sibling(&self, extension: &str) -> Option<ObjectRef> {
        let (stem, _) = self.key.rsplit_once('.')?;
        Some(ObjectRef { bucket: self.bucket.clone(), key: format!("{stem}.{extension}") })
    }
}

/// A segment object: streamed by the segment reader, read by ranges through a chunk index.
pub trait SegmentObject: SegmentSource + RangeRead {}
impl<T: SegmentSource + RangeRead> SegmentObject for T {}

/// An opened object and what identifies its version.
pub struct Opened {
    pub object: Arc<dyn SegmentObject>,
    pub uri: String,
    pub size: u64,
    pub etag: Option<String>,
}

/// Where segment objects are read from.
#[async_trait]
pub trait ObjectStore: Send + Sync {
    async fn open(&self, object: &ObjectRef) -> io::Result<Opened>;
    /// The whole object, `None` when it does not exist.
    async fn get(&self, object: &ObjectRef) -> io::Result<Option<Bytes>>;
}

/// Objects under a local folder (keys are paths relative to it).
pub struct LocalObjects {
    root: PathBuf,
}

impl LocalObjects {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalObjects { root: root.into() }
    }
}

#[async_trait]
impl ObjectStore for LocalObjects {
    async fn open(&self, object: &ObjectRef) -> io::Result<Opened> {
        let path = self.root.join(&object.key);
        let meta = tokio::fs::metadata(&path)
            .await
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        let modified = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        Ok(Opened {
            uri: path.display().to_string(),
            size: meta.len(),
            etag: Some(format!("{}-{}", meta.len(), modified.map_or(0, |d| d.as_nanos()))),
            object: Arc::new(FileSource::new(path)),
        })
    }

    async fn get(&self, object: &ObjectRef) -> io::Result<Option<Bytes>> {
        match tokio::fs::read(self.root.join(&object.key)).await {
            Ok(bytes) => Ok(Some(bytes.into())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}
