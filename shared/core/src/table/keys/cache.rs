//! Key index buckets and data files' offsets, decoded once per process and kept across
//! commits.
//!
//! The files of a bucket are written once and never again (new names for every write),
//! and so are data files, so what is decoded from them, cached under their names, can
//! never be stale:
//! whoever committed since wrote new files, which miss the cache. A committer that takes
//! one table's commits back to back (a warm Lambda, `floe local run`) then reads only the
//! buckets a commit of someone else changed, and an upsert commit costs what its batch
//! changes, not what the table holds. Bounded: past [`BUDGET`] (and [`ROWS_BUDGET`])
//! bytes the least recently used go, and are read from their files again when next
//! needed.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use super::locate::FileRows;
use super::view::View;

/// The bytes of index views kept at most (a bucket of 2^20 keys of 20 bytes is about
/// 40 MiB; 512 MiB hold some 13 million keys).
pub const BUDGET: usize = 512 << 20;
/// The bytes of data files' rows (`_kafka.partition`, `_kafka.offset`) kept at most;
/// a file of consecutive offsets weighs nothing.
pub const ROWS_BUDGET: usize = 64 << 20;

/// What a cache holds: something that says how many bytes it takes.
pub trait Weigh {
    fn weight(&self) -> usize;
}

impl Weigh for View {
    fn weight(&self) -> usize {
        View::weight(self)
    }
}

impl Weigh for FileRows {
    fn weight(&self) -> usize {
        FileRows::weight(self)
    }
}

/// Values by the names of the files they were decoded from, least recently used out.
struct Cache<V> {
    values: HashMap<String, (Arc<V>, u64)>,
    bytes: usize,
    tick: u64,
    budget: usize,
}

impl<V: Weigh> Cache<V> {
    fn new(budget: usize) -> Cache<V> {
        Cache { values: HashMap::new(), bytes: 0, tick: 0, budget }
    }

    fn get(&mut self, identity: &str) -> Option<Arc<V>> {
        self.tick += 1;
        let tick = self.tick;
        self.values.get_mut(identity).map(|(value, used)| {
            *used = tick;
            value.clone()
        })
    }

    fn put(&mut self, identity: String, value: Arc<V>) {
        let weight = value.weight();
        if weight > self.budget {
            return;
        }
        self.tick += 1;
        if let Some((old, _)) = self.values.insert(identity, (value, self.tick)) {
            self.bytes -= old.weight();
        }
        self.bytes += weight;
        while self.bytes > self.budget {
            let Some(oldest) = self.values.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| k.clone()) else {
                break;
            };
            self.forget(&oldest);
        }
    }

    fn forget(&mut self, identity: &str) {
        if let Some((gone, _)) = self.values.remove(identity) {
            self.bytes -= gone.weight();
        }
    }

    fn clear(&mut self) {
        self.values.clear();
        self.bytes = 0;
    }
}

static VIEWS: LazyLock<Mutex<Cache<View>>> = LazyLock::new(|| Mutex::new(Cache::new(BUDGET)));
static ROWS: LazyLock<Mutex<Cache<FileRows>>> = LazyLock::new(|| Mutex::new(Cache::new(ROWS_BUDGET)));

fn lock<V>(cache: &'static LazyLock<Mutex<Cache<V>>>) -> MutexGuard<'static, Cache<V>> {
    // A panic elsewhere while holding the lock leaves a consistent map: go on with it.
    cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The view of the bucket whose files `identity` names, if kept.
pub fn get(identity: &str) -> Option<Arc<View>> {
    lock(&VIEWS).get(identity)
}

/// Keeps `view` as the bucket `identity` names, the least recently used views let go
/// to stay within [`BUDGET`] (a view larger than it is not kept).
pub fn put(identity: String, view: Arc<View>) {
    lock(&VIEWS).put(identity, view)
}

/// Lets the view of `identity` go (a bucket a commit replaced).
pub fn forget(identity: &str) {
    lock(&VIEWS).forget(identity)
}

/// The rows of the data file at `path`, if kept.
pub fn rows(path: &str) -> Option<Arc<FileRows>> {
    lock(&ROWS).get(path)
}

/// Keeps the rows of the data file at `path`, within [`ROWS_BUDGET`].
pub fn keep_rows(path: String, rows: Arc<FileRows>) {
    lock(&ROWS).put(path, rows)
}

/// Lets everything kept go: the index and the data files are read again (tests of
/// those reads, a benchmark of a cold committer).
pub fn clear() {
    lock(&VIEWS).clear();
    lock(&ROWS).clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::keys::resolve::Entry;

    #[test]
    fn views_are_kept_by_their_files_names_within_the_budget() {
        let view = |n: usize| {
            let key = vec![7u8; n];
            Arc::new(View::from_entries(&[Entry { hash: 1, key, offset: 1, tombstone: false }]))
        };
        let weight = |n: usize| view(n).weight();
        let mut cache: Cache<View> = Cache::new(weight(100));
        cache.put("small".into(), view(10));
        cache.put("other".into(), view(10));
        assert_eq!(cache.get("small").unwrap().key_bytes(), 10);
        cache.put("huge".into(), view(101));
        assert!(cache.get("huge").is_none(), "larger than the budget: not kept");
        // Filling the budget lets the least recently used go ("other": "small" was read since).
        cache.put("big".into(), view(100 - 10 - 21));
        assert!(cache.get("big").is_some() && cache.get("small").is_some());
        assert!(cache.get("other").is_none(), "the least recently used went");
        assert_eq!(cache.bytes, weight(10) + weight(69));
        cache.forget("big");
        assert!(cache.get("big").is_none());
        assert_eq!(cache.bytes, weight(10));
    }
}
