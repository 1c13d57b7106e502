//! Where a Delta log lives: the `_delta_log/` folder of a table's location, read and
//! written through [`LogStore`]. Its one promise beyond plain files is
//! [`LogStore::put_if_absent`]: two writers racing for commit `N` cannot both win. On
//! local files that is a hard link, which fails when the name exists (the file is
//! complete before it gets its name); on S3 a conditional PUT (`If-None-Match: *`, in
//! `floe-aws`), so no DynamoDB log store is needed.

use std::io;
use std::path::PathBuf;

use async_trait::async_trait;
use bytes::Bytes;

/// The files of Delta logs, by location (`s3://…` or a local path).
#[async_trait]
pub trait LogStore: Send + Sync {
    /// The file's bytes; `None` when there is no such file.
    async fn read(&self, path: &str) -> io::Result<Option<Bytes>>;
    /// Whether the file exists (without reading it).
    async fn exists(&self, path: &str) -> io::Result<bool>;
    /// Writes the file only if no file has its name: `Ok(false)` when one has (another
    /// writer won), and then nothing was written.
    async fn put_if_absent(&self, path: &str, bytes: Bytes) -> io::Result<bool>;
    /// Writes the file, replacing any (`_last_checkpoint`, a checkpoint: the same bytes
    /// whoever writes them).
    async fn put(&self, path: &str, bytes: Bytes) -> io::Result<()>;
    /// The files directly in the folder `dir` whose names sort after `after` (all of
    /// them without it), by name; none when it does not exist. A log is listed from its
    /// newest checkpoint on, as S3 lists from a key (`StartAfter`).
    async fn list(&self, dir: &str, after: Option<&str>) -> io::Result<Vec<LogFile>>;
    /// Deletes the files (missing ones are not an error).
    async fn delete(&self, paths: &[String]) -> io::Result<()>;
}

/// A file of a log folder, as a listing finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    /// Its name in the folder (not its path).
    pub name: String,
    /// When it was last written (milliseconds since the epoch; 0 when unknown).
    pub modified_ms: i64,
}

/// Delta logs on the local filesystem.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalLogStore;

/// A local path (`/…` or `file://…`); anything else (`s3://…`) is not this store's.
fn local(path: &str) -> io::Result<PathBuf> {
    let path = path.strip_prefix("file://").unwrap_or(path);
    match path.split_once("://") {
        Some((scheme, _)) => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{path}: a {scheme}:// location, which the local Delta log store cannot reach"),
        )),
        None => Ok(PathBuf::from(path)),
    }
}

fn named(path: &std::path::Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// `bytes` written to a new temporary file (`.tmp…`) in `path`'s folder, made if need be:
/// a file is whole before it gets its name.
fn staged(path: &std::path::Path, bytes: &[u8]) -> io::Result<tempfile::NamedTempFile> {
    let dir = path.parent().ok_or_else(|| io::Error::other(format!("{}: no folder", path.display())))?;
    std::fs::create_dir_all(dir).map_err(|e| named(dir, e))?;
    let mut staged = tempfile::NamedTempFile::new_in(dir).map_err(|e| named(dir, e))?;
    io::Write::write_all(&mut staged, bytes).map_err(|e| named(staged.path(), e))?;
    Ok(staged)
}

#[async_trait]
impl LogStore for LocalLogStore {
    async fn read(&self, path: &str) -> io::Result<Option<Bytes>> {
        let path = local(path)?;
        match tokio::fs::read(&path).await {
            Ok(bytes) => Ok(Some(Bytes::from(bytes))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(named(&path, e)),
        }
    }

    async fn exists(&self, path: &str) -> io::Result<bool> {
        let path = local(path)?;
        match tokio::fs::metadata(&path).await {
            Ok(meta) => Ok(meta.is_file()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(named(&path, e)),
        }
    }

    async fn put_if_absent(&self, path: &str, bytes: Bytes) -> io::Result<bool> {
        let path = local(path)?;
        tokio::task::spawn_blocking(move || {
            let staged = staged(&path, &bytes)?;
            staged.as_file().sync_all().map_err(|e| named(staged.path(), e))?;
            // The link is the commit: it fails when the name exists, and the file it names
            // is already whole.
            match std::fs::hard_link(staged.path(), &path) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
                Err(e) => Err(named(&path, e)),
            }
        })
        .await
        .map_err(io::Error::other)?
    }

    async fn put(&self, path: &str, bytes: Bytes) -> io::Result<()> {
        let path = local(path)?;
        tokio::task::spawn_blocking(move || {
            staged(&path, &bytes)?.persist(&path).map_err(|e| named(&path, e.error))?;
            Ok(())
        })
        .await
        .map_err(io::Error::other)?
    }

    async fn list(&self, dir: &str, after: Option<&str>) -> io::Result<Vec<LogFile>> {
        let dir = local(dir)?;
        let mut entries = match tokio::fs::read_dir(&dir).await {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(named(&dir, e)),
        };
        let mut out = Vec::new();
        while let Some(entry) = entries.next_entry().await.map_err(|e| named(&dir, e))? {
            let name = entry.file_name().to_string_lossy().into_owned();
            // A writer's staged file (`.tmp…`) is no part of the log, and may be gone by now.
            if name.starts_with('.') || after.is_some_and(|after| name.as_str() <= after) {
                continue;
            }
            let meta = match entry.metadata().await {
                Ok(meta) => meta,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(named(&entry.path(), e)),
            };
            if meta.is_file() {
                let modified_ms = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_millis() as i64);
                out.push(LogFile { name, modified_ms });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn delete(&self, paths: &[String]) -> io::Result<()> {
        for path in paths {
            let path = local(path)?;
            match tokio::fs::remove_file(&path).await {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(named(&path, e)),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_the_first_put_if_absent_wins_and_leaves_no_staged_file() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("t/_delta_log");
        let path = log.join("00000000000000000000.json").to_string_lossy().into_owned();
        let store = LocalLogStore;
        assert!(store.put_if_absent(&path, Bytes::from_static(b"first")).await.unwrap());
        assert!(!store.put_if_absent(&path, Bytes::from_static(b"second")).await.unwrap());
        assert_eq!(store.read(&path).await.unwrap().unwrap(), Bytes::from_static(b"first"));
        let names = |files: Vec<LogFile>| files.into_iter().map(|f| f.name).collect::<Vec<_>>();
        assert_eq!(names(store.list(&log.to_string_lossy(), None).await.unwrap()), vec!["00000000000000000000.json"]);
        let next = log.join("00000000000000000001.json").to_string_lossy().into_owned();
        assert!(store.put_if_absent(&next, Bytes::from_static(b"next")).await.unwrap());
        let after = store.list(&log.to_string_lossy(), Some("00000000000000000000.json")).await.unwrap();
        assert_eq!(names(after), vec!["00000000000000000001.json"]);
        assert_eq!(store.read(&format!("{path}.missing")).await.unwrap(), None);
        assert!(store.exists(&path).await.unwrap() && !store.exists(&format!("{path}.missing")).await.unwrap());
        assert!(store.list("/nonexistent/_delta_log", None).await.unwrap().is_empty());
        assert!(store.read("s3://bucket/key").await.unwrap_err().to_string().contains("cannot reach"));
    }

    #[tokio::test]
    async fn racing_writers_of_one_version_have_one_winner() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("_delta_log/00000000000000000001.json").to_string_lossy().into_owned();
        let racers = (0..8).map(|i| {
            let path = path.clone();
            tokio::spawn(async move { LocalLogStore.put_if_absent(&path, Bytes::from(format!("{i}"))).await.unwrap() })
        });
        let won = futures::future::join_all(racers).await.into_iter().filter(|r| *r.as_ref().unwrap()).count();
        assert_eq!(won, 1);
    }
}
