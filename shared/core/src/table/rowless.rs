//! The committed offsets Floe deliberately wrote no row for, per partition: what lets
//! `floe audit` ([`super::audit`]) tell a gap in a table's offsets that is explained
//! from one that is a loss.
//!
//! A segment's offsets that get no row: control records (transaction markers), records
//! of aborted transactions, a compacted topic's holes (offsets its segments no longer
//! have) and bad records skipped (mode `skip`). Dead letters have their row in the
//! dead-letter table, and the records of a transaction still open have theirs once its
//! COMMIT marker arrives (none on ABORT: they are counted then). Listing every such
//! offset would grow with every transaction, so Floe keeps their *number*, carried in
//! every snapshot's summary like the offsets:
//!
//! - `floe.without-rows.<topic>.<partition>`: how many offsets of the counted committed
//!   ranges have no row on purpose;
//! - `floe.uncounted.<topic>.<partition>`: committed ranges not counted (`first-last,…`):
//!   those committed before Floe kept the count (a table's offsets when it first reads a
//!   snapshot without the key), and the part of a segment re-uploaded with other
//!   boundaries that straddles offsets committed already (its count covers the whole
//!   segment, not the new part).
//!
//! Every gap the audit finds in the counted ranges, less those it explains exactly (rows
//! another engine deleted, dead letters), must then number exactly the count: one more
//! is a loss, one fewer a row where Floe wrote none.

use std::collections::BTreeMap;

use super::offsets::{CommittedOffsets, RangeError, RangeSet, SummaryError};

/// Summary key prefix of the count.
pub const WITHOUT_ROWS_PREFIX: &str = "floe.without-rows.";
/// Summary key prefix of the ranges not counted.
pub const UNCOUNTED_PREFIX: &str = "floe.uncounted.";

/// One partition's count, and the committed ranges it does not cover.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rowless {
    pub count: u64,
    pub uncounted: RangeSet,
}

/// [`Rowless`] of every (topic, partition) of a table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowlessOffsets {
    pub partitions: BTreeMap<(String, i32), Rowless>,
}

/// `<topic>.<partition>` of a key, after its prefix.
fn topic_partition(rest: &str) -> Option<(String, i32)> {
    rest.rsplit_once('.').and_then(|(topic, p)| Some((topic.to_string(), p.parse::<i32>().ok()?)))
}

impl RowlessOffsets {
    /// Reads them from a snapshot summary whose committed offsets are `committed`. A
    /// partition committed without a count (written by a version that kept none) is
    /// uncounted over all of its committed ranges.
    pub fn from_summary<'a>(
        summary: impl IntoIterator<Item = (&'a String, &'a String)>,
        committed: &CommittedOffsets,
    ) -> Result<Self, SummaryError> {
        let mut counts: BTreeMap<(String, i32), Rowless> = BTreeMap::new();
        for (key, value) in summary {
            let error = |problem| SummaryError { key: key.clone(), value: value.clone(), problem };
            if let Some(rest) = key.strip_prefix(WITHOUT_ROWS_PREFIX) {
                let at = topic_partition(rest).ok_or_else(|| error(RangeError::NoPartition))?;
                let count = value
                    .parse::<u64>()
                    .map_err(|_| error(RangeError::NotANumber { range: value.clone(), text: value.clone() }))?;
                counts.entry(at).or_default().count = count;
            } else if let Some(rest) = key.strip_prefix(UNCOUNTED_PREFIX) {
                let at = topic_partition(rest).ok_or_else(|| error(RangeError::NoPartition))?;
                counts.entry(at).or_default().uncounted = RangeSet::decode(value).map_err(error)?;
            }
        }
        for (at, ranges) in &committed.partitions {
            counts.entry(at.clone()).or_insert_with(|| Rowless { count: 0, uncounted: ranges.clone() });
        }
        Ok(RowlessOffsets { partitions: counts })
    }

    /// The summary entries: the count of every partition, its uncounted ranges when any.
    pub fn to_summary(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.partitions.iter().flat_map(|((topic, partition), r)| {
            let count = (format!("{WITHOUT_ROWS_PREFIX}{topic}.{partition}"), r.count.to_string());
            let uncounted = (!r.uncounted.is_empty())
                .then(|| (format!("{UNCOUNTED_PREFIX}{topic}.{partition}"), r.uncounted.encode()));
            std::iter::once(count).chain(uncounted)
        })
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<&Rowless> {
        self.partitions.get(&(topic.to_string(), partition))
    }

    fn entry(&mut self, topic: &str, partition: i32) -> &mut Rowless {
        self.partitions.entry((topic.to_string(), partition)).or_default()
    }

    /// `count` more offsets without rows.
    pub fn add(&mut self, topic: &str, partition: i32, count: u64) {
        let entry = self.entry(topic, partition);
        entry.count = entry.count.saturating_add(count);
    }

    /// `[first, last]` committed without a count.
    pub fn uncount(&mut self, topic: &str, partition: i32, first: i64, last: i64) {
        self.entry(topic, partition).uncounted.insert(first, last);
    }

    /// Whether `[first, last]` is (partly) in the uncounted ranges.
    pub fn is_uncounted(&self, topic: &str, partition: i32, first: i64, last: i64) -> bool {
        self.get(topic, partition).is_some_and(|r| r.uncounted.overlaps(first, last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_committed_before_the_count_is_uncounted_over_its_ranges() {
        let mut committed = CommittedOffsets::default();
        committed.insert("orders.v1", 0, 0, 99);
        committed.insert("orders.v1", 1, 0, 49);
        let summary = BTreeMap::from([
            ("floe.without-rows.orders.v1.1".to_string(), "3".to_string()),
            ("floe.uncounted.orders.v1.1".to_string(), "0-9".to_string()),
        ]);
        let mut rowless = RowlessOffsets::from_summary(&summary, &committed).unwrap();
        assert_eq!(rowless.get("orders.v1", 0).unwrap().uncounted.ranges(), &[(0, 99)]);
        assert_eq!(rowless.get("orders.v1", 0).unwrap().count, 0);
        assert_eq!(rowless.get("orders.v1", 1).unwrap().count, 3);
        assert!(rowless.is_uncounted("orders.v1", 1, 5, 20) && !rowless.is_uncounted("orders.v1", 1, 10, 20));
        rowless.add("orders.v1", 1, 2);
        rowless.uncount("orders.v1", 2, 5, 6);
        let written: BTreeMap<String, String> = rowless.to_summary().collect();
        assert_eq!(written["floe.without-rows.orders.v1.1"], "5");
        assert_eq!(written["floe.uncounted.orders.v1.0"], "0-99");
        assert_eq!(written["floe.without-rows.orders.v1.2"], "0");
        assert_eq!(RowlessOffsets::from_summary(&written, &committed).unwrap(), rowless);
        let bad = BTreeMap::from([("floe.without-rows.orders.v1.1".to_string(), "x".to_string())]);
        assert!(RowlessOffsets::from_summary(&bad, &committed).is_err());
    }
}
