//! The warehouse's bytes: where data files, manifests and metadata are read and written.
//!
//! Iceberg's [`FileIO`] is the interface every other part uses: here for local paths
//! (`/…` or `file://…`, what `floe local run` and the tests use); `floe-aws` gives one
//! that serves `s3://` locations through the SDK client the function already built.

use std::io;
use std::path::Path;

use async_trait::async_trait;
use iceberg::io::FileIO;

/// A `FileIO` for local paths only.
pub fn local_file_io() -> FileIO {
    FileIO::new_with_fs()
}

/// A file of the warehouse, as a listing finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    /// Its location, written as tables refer to their files (`s3://…`, or a local path).
    pub path: String,
    pub size: u64,
    /// When it was last written (milliseconds since the epoch).
    pub modified_ms: i64,
}

/// Listing and deleting the warehouse's files: what the orphan sweep needs and Iceberg's
/// `FileIO` does not give (it cannot list).
#[async_trait]
pub trait WarehouseFiles: Send + Sync {
    /// Every file under the directory `prefix` (a table's location, the tasks folder),
    /// recursively; none when it does not exist.
    async fn list(&self, prefix: &str) -> io::Result<Vec<StoredFile>>;
    /// Deletes the files (missing ones are not an error).
    async fn delete(&self, paths: &[String]) -> io::Result<()>;
}

/// The warehouse on the local filesystem: paths as the tables write them (`/…`).
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalFiles;

fn local(path: &str) -> &str {
    path.strip_prefix("file://").unwrap_or(path)
}

#[async_trait]
impl WarehouseFiles for LocalFiles {
    async fn list(&self, prefix: &str) -> io::Result<Vec<StoredFile>> {
        let root = local(prefix).trim_end_matches('/').to_string();
        tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            let mut dirs = vec![std::path::PathBuf::from(root)];
            while let Some(dir) = dirs.pop() {
                let entries = match std::fs::read_dir(&dir) {
                    Ok(entries) => entries,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
                };
                for entry in entries {
                    let entry = entry?;
                    let meta = entry.metadata()?;
                    if meta.is_dir() {
                        dirs.push(entry.path());
                    } else if meta.is_file() {
                        out.push(stored(&entry.path(), &meta));
                    }
                }
            }
            out.sort_by(|a: &StoredFile, b| a.path.cmp(&b.path));
            Ok(out)
        })
        .await
        .map_err(io::Error::other)?
    }

    async fn delete(&self, paths: &[String]) -> io::Result<()> {
        for path in paths {
            match tokio::fs::remove_file(local(path)).await {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io::Error::new(e.kind(), format!("{path}: {e}"))),
            }
        }
        Ok(())
    }
}

fn stored(path: &Path, meta: &std::fs::Metadata) -> StoredFile {
    let modified = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    StoredFile {
        path: path.display().to_string(),
        size: meta.len(),
        modified_ms: modified.map_or(0, |d| d.as_millis() as i64),
    }
}

/// Splits `s3://bucket/key` into (bucket, key).
pub fn split_s3_uri(uri: &str) -> Option<(&str, &str)> {
    let rest = uri.strip_prefix("s3://").or_else(|| uri.strip_prefix("s3a://"))?;
    let (bucket, key) = rest.split_once('/')?;
    (!bucket.is_empty()).then_some((bucket, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn local_files_are_listed_recursively_and_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string();
        std::fs::create_dir_all(dir.path().join("t/data/day=1")).unwrap();
        std::fs::write(dir.path().join("t/data/day=1/a.parquet"), b"abc").unwrap();
        std::fs::write(dir.path().join("t/b.json"), b"{}").unwrap();
        let files = LocalFiles.list(&format!("{root}/t/")).await.unwrap();
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, [format!("{root}/t/b.json"), format!("{root}/t/data/day=1/a.parquet")]);
        assert_eq!(files[1].size, 3);
        assert!(files[1].modified_ms > 0);
        assert!(LocalFiles.list(&format!("{root}/missing")).await.unwrap().is_empty());
        LocalFiles.delete(&[files[1].path.clone(), format!("{root}/gone")]).await.unwrap();
        assert_eq!(LocalFiles.list(&format!("file://{root}")).await.unwrap().len(), 1);
    }

    #[test]
    fn splits_s3_uris() {
        assert_eq!(split_s3_uri("s3://b/k/x.parquet"), Some(("b", "k/x.parquet")));
        assert_eq!(split_s3_uri("s3a://b/k"), Some(("b", "k")));
        assert_eq!(split_s3_uri("s3:///k"), None);
        assert_eq!(split_s3_uri("/tmp/x"), None);
    }
}
