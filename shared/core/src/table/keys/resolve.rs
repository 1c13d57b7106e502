//! One bucket of the key index and a commit's rows of it, merged: which rows lose, and
//! the bucket after. Pure: no I/O.
//!
//! Per key the record with the highest offset wins, whatever order the rows come in
//! (a later segment committed before an earlier one, a transaction's rows added when its
//! marker comes): the index keeps each key's winning offset, a tombstone's too, so a row
//! arriving late with a lower offset loses to it. Every row that loses is deleted, and so
//! is a winning tombstone (it carries a key, no value).

use std::cmp::Ordering;

use super::view::View;

/// A key's entry in the index: the offset of its winning record, and whether that record
/// is a tombstone (the key has no row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub hash: u32,
    pub key: Vec<u8>,
    pub offset: i64,
    pub tombstone: bool,
}

impl Entry {
    pub fn order(&self) -> (u32, &[u8]) {
        (self.hash, &self.key)
    }
}

/// A row a commit adds, of one Kafka partition; `row` is the caller's name for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub entry: Entry,
    pub row: usize,
}

/// A bucket merged with its changes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Merged {
    /// The bucket after, ordered by hash and key.
    pub entries: View,
    /// The entries the changes gave a new offset (ordered): a delta of the bucket.
    pub changed: View,
    /// Changes whose rows are deleted: superseded, or tombstones.
    pub dead_rows: Vec<usize>,
    /// Offsets of rows already in the table that the changes supersede or tombstone.
    pub dead_offsets: Vec<i64>,
    /// Keys new to the index, keys given a newer row, keys deleted.
    pub inserted: u64,
    pub updated: u64,
    pub deleted: u64,
}

/// Merges `changes` into `existing`: the entries between changed keys are copied in bulk.
pub fn merge(existing: &View, mut changes: Vec<Change>) -> Merged {
    changes.sort_by(|a, b| a.entry.order().cmp(&b.entry.order()).then(a.entry.offset.cmp(&b.entry.offset)));
    // Room for every change: the views grow no further (a doubling would hold twice
    // the bucket's memory while it is kept).
    let change_bytes = changes.iter().map(|c| c.entry.key.len()).sum::<usize>();
    let mut merged = Merged {
        entries: View::with_capacity(existing.len() + changes.len(), existing.key_bytes() + change_bytes),
        changed: View::with_capacity(changes.len(), change_bytes),
        ..Merged::default()
    };
    let mut at = 0;
    let mut changes = changes.into_iter().peekable();
    while let Some(first) = changes.next() {
        let before = existing.seek(at, first.entry.order());
        merged.entries.extend_from(existing, at..before);
        at = before;
        let old = (at < existing.len() && existing.order(at) == first.entry.order()).then(|| {
            at += 1;
            at - 1
        });
        let mut group = vec![first];
        while let Some(next) = changes.next_if(|c| c.entry.order() == group[0].entry.order()) {
            group.push(next);
        }
        merged.resolve(existing, old, group);
    }
    merged.entries.extend_from(existing, at..existing.len());
    merged
}

impl Merged {
    /// One key: its entry in the index (`old`, of `existing`) against its changes,
    /// ordered by offset.
    fn resolve(&mut self, existing: &View, old: Option<usize>, mut group: Vec<Change>) {
        let last = group.pop().expect("a group has a change");
        self.dead_rows.extend(group.iter().map(|c| c.row));
        if let Some(old) = old.filter(|&o| last.entry.offset.cmp(&existing.offset(o)) != Ordering::Greater) {
            self.dead_rows.push(last.row);
            self.entries.extend_from(existing, old..old + 1);
            return;
        }
        let was_live = old.is_some_and(|o| !existing.tombstone(o));
        if let Some(o) = old.filter(|_| was_live) {
            self.dead_offsets.push(existing.offset(o));
        }
        match (last.entry.tombstone, was_live) {
            (true, true) => self.deleted += 1,
            (true, false) => {}
            (false, true) => self.updated += 1,
            (false, false) => self.inserted += 1,
        }
        if last.entry.tombstone {
            self.dead_rows.push(last.row);
        }
        self.entries.push(&last.entry);
        self.changed.push(&last.entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::keys::encode::hash;

    fn entry(key: &str, offset: i64, tombstone: bool) -> Entry {
        Entry { hash: hash(key.as_bytes()), key: key.as_bytes().to_vec(), offset, tombstone }
    }

    fn bucket(entries: Vec<Entry>) -> View {
        let mut entries = entries;
        entries.sort_by(|a, b| a.order().cmp(&b.order()));
        View::from_entries(&entries)
    }

    fn all(view: &View) -> Vec<Entry> {
        (0..view.len()).map(|i| view.entry(i)).collect()
    }

    fn change(key: &str, offset: i64, tombstone: bool) -> Change {
        Change { entry: entry(key, offset, tombstone), row: offset as usize }
    }

    fn sorted(mut v: Vec<usize>) -> Vec<usize> {
        v.sort();
        v
    }

    #[test]
    fn the_highest_offset_wins_within_a_commit_and_against_the_index() {
        let existing = bucket(vec![entry("a", 10, false), entry("b", 11, false), entry("c", 12, true)]);
        let changes = vec![
            change("a", 20, false),
            change("a", 25, false), // wins over 20 and 10
            change("b", 5, false),  // a late row: loses to 11
            change("c", 30, false), // a key tombstoned, written again
            change("d", 31, false),
            change("d", 32, true), // written and deleted in one commit
        ];
        let m = merge(&existing, changes);
        assert_eq!(sorted(m.dead_rows), [5, 20, 31, 32]);
        assert_eq!(m.dead_offsets, [10]);
        let by_key: Vec<(String, i64, bool)> = all(&m.entries)
            .iter()
            .map(|e| (String::from_utf8(e.key.clone()).unwrap(), e.offset, e.tombstone))
            .collect();
        let mut by_key = by_key;
        by_key.sort();
        let expected = [("a", 25, false), ("b", 11, false), ("c", 30, false), ("d", 32, true)];
        assert_eq!(by_key, expected.map(|(k, o, t)| (k.to_string(), o, t)));
        assert_eq!((m.inserted, m.updated, m.deleted), (1, 1, 0));
        // The delta: the keys given a new offset, and only those.
        let changed: Vec<(Vec<u8>, i64)> = all(&m.changed).into_iter().map(|e| (e.key, e.offset)).collect();
        let mut changed = changed;
        changed.sort();
        assert_eq!(changed, [(b"a".to_vec(), 25), (b"c".to_vec(), 30), (b"d".to_vec(), 32)]);
    }

    #[test]
    fn a_tombstone_deletes_the_live_row_and_outlives_a_late_update() {
        let m = merge(&bucket(vec![entry("k", 10, false)]), vec![change("k", 50, true)]);
        assert_eq!((m.dead_rows.as_slice(), m.dead_offsets.as_slice(), m.deleted), (&[50][..], &[10][..], 1));
        // An update older than the tombstone arrives afterwards: it stays deleted.
        let m = merge(&m.entries, vec![change("k", 40, false)]);
        assert_eq!((m.dead_rows, m.dead_offsets), (vec![40], vec![]));
        assert_eq!(all(&m.entries), [entry("k", 50, true)]);
        assert!(m.changed.is_empty());
    }

    #[test]
    fn a_replayed_row_loses_to_its_own_entry_and_untouched_entries_stay() {
        let existing = bucket((0..50).map(|i| entry(&format!("k{i}"), i, false)).collect());
        let m = merge(&existing, vec![change("k7", 7, false)]);
        assert_eq!((m.dead_rows, m.dead_offsets), (vec![7], vec![]));
        assert_eq!(m.entries, existing);
        assert!(m.changed.is_empty(), "a replay changes nothing");
    }
}
