//! A bucket of the key index in memory: its entries ordered by hash and key, one a key,
//! held as columns (hashes, keys end to end, offsets, tombstone flags), so that a bucket
//! of a million keys is five allocations, not a million, and runs of entries a commit
//! does not touch are copied in bulk.
//!
//! A bucket is stored as runs (index.rs): a base and the deltas later commits wrote.
//! [`View::union`] folds them into one view: per key, the entry of the highest offset.

use std::ops::Range;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt32Type};
use arrow_array::{Array, ArrayRef, BinaryArray, BooleanArray, Int64Array, RecordBatch, UInt32Array};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::SchemaRef;

use super::resolve::Entry;

/// Entries ordered by hash and key, one a key.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct View {
    hashes: Vec<u32>,
    /// Where each key ends in `keys` (key `i` starts where key `i - 1` ends).
    ends: Vec<usize>,
    keys: Vec<u8>,
    offsets: Vec<i64>,
    tombstones: Vec<bool>,
}

impl View {
    pub fn with_capacity(entries: usize, key_bytes: usize) -> View {
        View {
            hashes: Vec::with_capacity(entries),
            ends: Vec::with_capacity(entries),
            keys: Vec::with_capacity(key_bytes),
            offsets: Vec::with_capacity(entries),
            tombstones: Vec::with_capacity(entries),
        }
    }

    pub fn from_entries(entries: &[Entry]) -> View {
        let mut view = View::default();
        for e in entries {
            view.push(e);
        }
        view
    }

    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    pub fn key_bytes(&self) -> usize {
        self.keys.len()
    }

    fn start(&self, i: usize) -> usize {
        if i == 0 { 0 } else { self.ends[i - 1] }
    }

    pub fn hash(&self, i: usize) -> u32 {
        self.hashes[i]
    }

    pub fn key(&self, i: usize) -> &[u8] {
        &self.keys[self.start(i)..self.ends[i]]
    }

    pub fn offset(&self, i: usize) -> i64 {
        self.offsets[i]
    }

    pub fn tombstone(&self, i: usize) -> bool {
        self.tombstones[i]
    }

    pub fn order(&self, i: usize) -> (u32, &[u8]) {
        (self.hashes[i], self.key(i))
    }

    pub fn entry(&self, i: usize) -> Entry {
        Entry { hash: self.hash(i), key: self.key(i).to_vec(), offset: self.offset(i), tombstone: self.tombstone(i) }
    }

    pub fn tombstone_count(&self) -> u64 {
        self.tombstones.iter().filter(|t| **t).count() as u64
    }

    /// The bytes it holds.
    pub fn weight(&self) -> usize {
        self.hashes.len() * (4 + 8 + 8 + 1) + self.keys.len()
    }

    /// Appends `entry` (ordered after every entry already in).
    pub fn push(&mut self, entry: &Entry) {
        self.push_parts(entry.hash, &entry.key, entry.offset, entry.tombstone);
    }

    fn push_parts(&mut self, hash: u32, key: &[u8], offset: i64, tombstone: bool) {
        self.hashes.push(hash);
        self.keys.extend_from_slice(key);
        self.ends.push(self.keys.len());
        self.offsets.push(offset);
        self.tombstones.push(tombstone);
    }

    /// Appends `other`'s entries `range`, in bulk.
    pub fn extend_from(&mut self, other: &View, range: Range<usize>) {
        if range.is_empty() {
            return;
        }
        let (from, to) = (other.start(range.start), other.ends[range.end - 1]);
        let shift = self.keys.len();
        self.keys.extend_from_slice(&other.keys[from..to]);
        self.ends.extend(other.ends[range.clone()].iter().map(|end| end - from + shift));
        self.hashes.extend_from_slice(&other.hashes[range.clone()]);
        self.offsets.extend_from_slice(&other.offsets[range.clone()]);
        self.tombstones.extend_from_slice(&other.tombstones[range]);
    }

    /// Entries `range`, as a view of their own.
    pub fn slice(&self, range: Range<usize>) -> View {
        let bytes = if range.is_empty() { 0 } else { self.ends[range.end - 1] - self.start(range.start) };
        let mut part = View::with_capacity(range.len(), bytes);
        part.extend_from(self, range);
        part
    }

    /// The first entry at or after `from` not ordered before `order`.
    pub fn seek(&self, from: usize, order: (u32, &[u8])) -> usize {
        let (mut low, mut high) = (from, self.len());
        while low < high {
            let mid = low + (high - low) / 2;
            if self.order(mid) < order {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        low
    }

    /// The first entry whose hash is over `hash`.
    pub fn after_hash(&self, hash: u32) -> usize {
        self.hashes.partition_point(|h| *h <= hash)
    }

    /// Per key, the entry of the highest offset among `runs` (each ordered).
    pub fn union(runs: Vec<View>) -> View {
        runs.into_iter().reduce(|a, b| union2(&a, &b)).unwrap_or_default()
    }

    /// Appends a bucket file's batch (columns `hash`, `key`, `offset`, `tombstone`).
    pub fn append_batch(&mut self, batch: &RecordBatch) -> Result<(), String> {
        let column = |name: &str| batch.column_by_name(name).ok_or_else(|| format!("no column {name}"));
        let (hash, key, offset, tombstone) = (column("hash")?, column("key")?, column("offset")?, column("tombstone")?);
        let (Some(hash), Some(key), Some(offset), Some(tombstone)) = (
            hash.as_primitive_opt::<UInt32Type>(),
            key.as_binary_opt::<i32>(),
            offset.as_primitive_opt::<Int64Type>(),
            tombstone.as_boolean_opt(),
        ) else {
            return Err("columns of unexpected types".into());
        };
        if [hash.null_count(), key.null_count(), offset.null_count(), tombstone.null_count()].iter().any(|n| *n > 0) {
            return Err("null entries".into());
        }
        let key_offsets = key.value_offsets();
        let (first, last) = (key_offsets[0] as usize, key_offsets[key.len()] as usize);
        let shift = self.keys.len();
        self.keys.extend_from_slice(&key.value_data()[first..last]);
        self.ends.extend(key_offsets[1..].iter().map(|end| *end as usize - first + shift));
        self.hashes.extend_from_slice(hash.values());
        self.offsets.extend_from_slice(offset.values());
        self.tombstones.extend(tombstone.values().iter());
        Ok(())
    }

    /// Entries `range` as a bucket file's batch.
    pub fn batch(&self, schema: SchemaRef, range: Range<usize>) -> Result<RecordBatch, arrow_schema::ArrowError> {
        let from = if range.is_empty() { 0 } else { self.start(range.start) };
        let mut key_offsets = Vec::with_capacity(range.len() + 1);
        key_offsets.push(0i32);
        for end in &self.ends[range.clone()] {
            let end = i32::try_from(end - from)
                .map_err(|_| arrow_schema::ArrowError::ComputeError("key index bucket over 2 GiB of keys".into()))?;
            key_offsets.push(end);
        }
        let to = from + *key_offsets.last().unwrap_or(&0) as usize;
        let keys = BinaryArray::new(
            OffsetBuffer::new(ScalarBuffer::from(key_offsets)),
            Buffer::from_slice_ref(&self.keys[from..to]),
            None,
        );
        let columns: Vec<ArrayRef> = vec![
            std::sync::Arc::new(UInt32Array::from(self.hashes[range.clone()].to_vec())),
            std::sync::Arc::new(keys),
            std::sync::Arc::new(Int64Array::from(self.offsets[range.clone()].to_vec())),
            std::sync::Arc::new(BooleanArray::from(self.tombstones[range].to_vec())),
        ];
        RecordBatch::try_new(schema, columns)
    }
}

/// `a` and `b` merged: per key the entry of the higher offset.
fn union2(a: &View, b: &View) -> View {
    let mut out = View::with_capacity(a.len() + b.len(), a.key_bytes() + b.key_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a.order(i).cmp(&b.order(j)) {
            std::cmp::Ordering::Less => {
                let to = a.seek(i, b.order(j));
                out.extend_from(a, i..to);
                i = to;
            }
            std::cmp::Ordering::Greater => {
                let to = b.seek(j, a.order(i));
                out.extend_from(b, j..to);
                j = to;
            }
            std::cmp::Ordering::Equal => {
                let (from, at) = if b.offset(j) > a.offset(i) { (b, j) } else { (a, i) };
                out.extend_from(from, at..at + 1);
                (i, j) = (i + 1, j + 1);
            }
        }
    }
    out.extend_from(a, i..a.len());
    out.extend_from(b, j..b.len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::keys::encode::hash;

    fn view(entries: &[(&str, i64, bool)]) -> View {
        let mut entries: Vec<Entry> = entries
            .iter()
            .map(|(k, o, t)| Entry { hash: hash(k.as_bytes()), key: k.as_bytes().to_vec(), offset: *o, tombstone: *t })
            .collect();
        entries.sort_by(|a, b| (a.hash, &a.key).cmp(&(b.hash, &b.key)));
        View::from_entries(&entries)
    }

    fn entries(view: &View) -> Vec<(String, i64, bool)> {
        let mut out: Vec<_> = (0..view.len())
            .map(|i| (String::from_utf8(view.key(i).to_vec()).unwrap(), view.offset(i), view.tombstone(i)))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn the_union_of_runs_keeps_each_key_s_highest_offset_in_any_order() {
        let base = view(&[("a", 1, false), ("b", 2, false), ("c", 3, false), ("d", 4, false)]);
        let first = view(&[("b", 10, false), ("e", 11, false)]);
        let second = view(&[("b", 7, false), ("c", 12, true), ("f", 13, false)]);
        let expected: Vec<(String, i64, bool)> =
            [("a", 1, false), ("b", 10, false), ("c", 12, true), ("d", 4, false), ("e", 11, false), ("f", 13, false)]
                .map(|(k, o, t)| (k.to_string(), o, t))
                .to_vec();
        let forward = View::union(vec![base.clone(), first.clone(), second.clone()]);
        assert_eq!(entries(&forward), expected);
        assert_eq!(View::union(vec![second, first, base]), forward, "the same view, entries in order");
        assert!((1..forward.len()).all(|i| forward.order(i - 1) < forward.order(i)));
    }

    #[test]
    fn a_view_goes_through_a_batch_and_back_and_slices_keep_their_keys() {
        let all = view(&[("alpha", 1, false), ("", 2, true), ("gamma-ray", 3, false), ("δ", 4, false)]);
        let schema = super::super::index::bucket_schema();
        let mut back = View::default();
        back.append_batch(&all.batch(schema.clone(), 0..all.len()).unwrap()).unwrap();
        assert_eq!(back, all);
        let mut parts = View::default();
        parts.append_batch(&all.batch(schema.clone(), 0..2).unwrap()).unwrap();
        parts.append_batch(&all.batch(schema.clone(), 2..4).unwrap()).unwrap();
        assert_eq!(parts, all);
        let mut copied = View::default();
        copied.extend_from(&all, 1..3);
        assert_eq!(entries(&copied), entries(&View::from_entries(&[all.entry(1), all.entry(2)])));
        assert_eq!(all.batch(schema, 2..2).unwrap().num_rows(), 0);
    }
}
