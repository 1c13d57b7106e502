//! What a mirror keeps from one commit to the next in a long-lived process (a warm
//! Lambda, `floe local run`), so that mirroring a commit reads what the commit added, not
//! every file of the table:
//!
//! - the Iceberg manifests read, by path: a manifest file is never rewritten, so one read
//!   once is that manifest for good (a commit adds one; the manifest list is read anew);
//! - the rows each position delete file or deletion vector deletes, by its
//!   [`delete_key`], for the same reason (an upsert table adds some at each commit);
//! - each Delta table's state at its newest version read or written: brought up to date
//!   by listing the log after that version and applying the commits found
//!   ([`DeltaSnapshot::refresh`]).
//!
//! Each is bounded: past [`MAX_MANIFEST_ENTRIES`] entries, [`MAX_DELETED_ROWS`] rows or
//! [`MAX_TABLES`] tables, it starts over empty. Reading through a cache gives what reading without one gives.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use iceberg::io::FileIO;
use iceberg::spec::{Manifest, ManifestFile};

use super::DeltaError;
use super::log::DeltaSnapshot;
use super::store::LogStore;
use crate::table::deletes::{DeleteSource, LiveDelete, ReadDeletes, delete_key};
use crate::table::snapshot::ManifestSource;

/// Manifest entries kept, all manifests together.
pub const MAX_MANIFEST_ENTRIES: usize = 500_000;
/// Delta tables whose state is kept.
pub const MAX_TABLES: usize = 256;
/// Deleted rows kept, all delete files together.
pub const MAX_DELETED_ROWS: usize = 10_000_000;

/// Manifests and Delta states kept between mirrors.
#[derive(Default)]
pub struct MirrorCache {
    manifests: Mutex<Manifests>,
    deletes: Mutex<Deletes>,
    states: Mutex<HashMap<String, DeltaSnapshot>>,
}

/// The rows of each delete file read, by its key.
type Named = Arc<HashMap<String, Vec<i64>>>;

#[derive(Default)]
struct Deletes {
    by_key: HashMap<String, Named>,
    rows: usize,
}

#[derive(Default)]
struct Manifests {
    by_path: HashMap<String, Arc<Manifest>>,
    entries: usize,
}

#[async_trait::async_trait]
impl ManifestSource for MirrorCache {
    /// The manifest `file` names, read unless kept.
    async fn manifest(&self, file_io: &FileIO, file: &ManifestFile) -> iceberg::Result<Arc<Manifest>> {
        if let Some(kept) =
            self.manifests.lock().unwrap_or_else(PoisonError::into_inner).by_path.get(&file.manifest_path)
        {
            return Ok(kept.clone());
        }
        let read = Arc::new(file.load_manifest(file_io).await?);
        let mut kept = self.manifests.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.entries + read.entries().len() > MAX_MANIFEST_ENTRIES {
            *kept = Manifests::default();
        }
        kept.entries += read.entries().len();
        kept.by_path.insert(file.manifest_path.clone(), read.clone());
        Ok(read)
    }
}

#[async_trait::async_trait]
impl DeleteSource for MirrorCache {
    /// The rows `delete` deletes, read unless kept.
    async fn rows_named(&self, file_io: &FileIO, delete: &LiveDelete) -> iceberg::Result<Named> {
        let key = delete_key(&delete.file);
        if let Some(kept) = self.deletes.lock().unwrap_or_else(PoisonError::into_inner).by_key.get(&key) {
            return Ok(kept.clone());
        }
        let read = ReadDeletes.rows_named(file_io, delete).await?;
        let rows: usize = read.values().map(Vec::len).sum();
        let mut kept = self.deletes.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.rows + rows > MAX_DELETED_ROWS {
            *kept = Deletes::default();
        }
        kept.rows += rows;
        kept.by_key.insert(key, read.clone());
        Ok(read)
    }
}

impl MirrorCache {
    /// The newest state of the Delta table at `root` (`None`: no log): the one kept (taken
    /// out, not copied: the caller [`MirrorCache::keep`]s what it ends with), refreshed,
    /// else read.
    pub async fn state(&self, store: &dyn LogStore, root: &str) -> Result<Option<DeltaSnapshot>, DeltaError> {
        let kept = self.states.lock().unwrap_or_else(PoisonError::into_inner).remove(root);
        match kept {
            Some(kept) => Ok(Some(kept.refresh(store).await?)),
            None => DeltaSnapshot::read(store, root).await,
        }
    }

    /// Keeps `state` as its table's newest known.
    pub fn keep(&self, state: DeltaSnapshot) {
        let mut states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        if states.len() >= MAX_TABLES && !states.contains_key(&state.root) {
            states.clear();
        }
        let newer = states.get(&state.root).is_none_or(|had| had.version <= state.version);
        if newer {
            states.insert(state.root.clone(), state);
        }
    }
}
