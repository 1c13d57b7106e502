//! Key index buckets decoded once per process and kept across commits.
//!
//! The files of a bucket are written once and never again (new names for every write),
//! so a bucket's decoded view, cached under the names of its files, can never be stale:
//! whoever committed since wrote new files, which miss the cache. A committer that takes
//! one table's commits back to back (a warm Lambda, `floe local run`) then reads only the
//! buckets a commit of someone else changed, and an upsert commit costs what its batch
//! changes, not what the table holds. Bounded: past [`BUDGET`] bytes the least recently
//! used views go, and a bucket is read from its files again when next needed.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use super::view::View;

/// The bytes of views kept at most (a bucket of 2^20 keys of 20 bytes is about 40 MiB).
pub const BUDGET: usize = 512 << 20;

struct Cache {
    views: HashMap<String, (Arc<View>, u64)>,
    bytes: usize,
    tick: u64,
    budget: usize,
}

impl Cache {
    fn new(budget: usize) -> Cache {
        Cache { views: HashMap::new(), bytes: 0, tick: 0, budget }
    }

    fn get(&mut self, identity: &str) -> Option<Arc<View>> {
        self.tick += 1;
        let tick = self.tick;
        self.views.get_mut(identity).map(|(view, used)| {
            *used = tick;
            view.clone()
        })
    }

    fn put(&mut self, identity: String, view: Arc<View>) {
        let weight = view.weight();
        if weight > self.budget {
            return;
        }
        self.tick += 1;
        if let Some((old, _)) = self.views.insert(identity, (view, self.tick)) {
            self.bytes -= old.weight();
        }
        self.bytes += weight;
        while self.bytes > self.budget {
            let Some(oldest) = self.views.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| k.clone()) else {
                break;
            };
            self.forget(&oldest);
        }
    }

    fn forget(&mut self, identity: &str) {
        if let Some((gone, _)) = self.views.remove(identity) {
            self.bytes -= gone.weight();
        }
    }
}

static VIEWS: LazyLock<Mutex<Cache>> = LazyLock::new(|| Mutex::new(Cache::new(BUDGET)));

fn cache() -> std::sync::MutexGuard<'static, Cache> {
    // A panic elsewhere while holding the lock leaves a consistent map: go on with it.
    VIEWS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The view of the bucket whose files `identity` names, if kept.
pub fn get(identity: &str) -> Option<Arc<View>> {
    cache().get(identity)
}

/// Keeps `view` as the bucket `identity` names, the least recently used views let go
/// to stay within [`BUDGET`] (a view larger than it is not kept).
pub fn put(identity: String, view: Arc<View>) {
    cache().put(identity, view)
}

/// Lets the view of `identity` go (a bucket a commit replaced).
pub fn forget(identity: &str) {
    cache().forget(identity)
}

/// Lets every view go: the index is read from its files again (tests of those reads).
pub fn clear() {
    let mut cache = cache();
    cache.views.clear();
    cache.bytes = 0;
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
        let mut cache = Cache::new(weight(100));
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
