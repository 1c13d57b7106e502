//! The Kafka offsets a table holds, per partition: the table's own record of what is
//! committed, carried in every snapshot's summary.
//!
//! Stored compactly under `floe.offsets.<topic>.<partition>` as the ranges of offsets
//! covered, `first-last` joined by `,` (`0-99999,100500-100999`): in steady state one
//! range (a contiguous watermark), a few more only while segments arrive out of order.
//! An offset is covered when a task for a segment spanning it has been committed — its
//! records are in the table, or were control records, aborted, or (for transactions
//! still open) are kept pending in the table's state until their marker arrives.

use std::collections::BTreeMap;

/// Summary key prefix of the committed ranges.
pub const OFFSETS_PREFIX: &str = "floe.offsets.";

/// Disjoint, non-adjacent inclusive ranges, ordered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    ranges: Vec<(i64, i64)>,
}

impl RangeSet {
    pub fn ranges(&self) -> &[(i64, i64)] {
        &self.ranges
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Adds `[first, last]`, merging overlapping and adjacent ranges.
    pub fn insert(&mut self, first: i64, last: i64) {
        if first > last {
            return;
        }
        let (mut first, mut last) = (first, last);
        let mut kept = Vec::with_capacity(self.ranges.len() + 1);
        for &(a, b) in &self.ranges {
            if b.saturating_add(1) < first || last.saturating_add(1) < a {
                kept.push((a, b));
            } else {
                first = first.min(a);
                last = last.max(b);
            }
        }
        kept.push((first, last));
        kept.sort_unstable();
        self.ranges = kept;
    }

    /// True when every offset of `[first, last]` is covered.
    pub fn covers(&self, first: i64, last: i64) -> bool {
        self.ranges.iter().any(|&(a, b)| a <= first && last <= b)
    }

    /// The parts of `[first, last]` not covered.
    pub fn missing(&self, first: i64, last: i64) -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        let mut next = first;
        for &(a, b) in &self.ranges {
            if b < next {
                continue;
            }
            if a > last {
                break;
            }
            if a > next {
                out.push((next, a - 1));
            }
            next = b.saturating_add(1);
            if next > last {
                return out;
            }
        }
        if next <= last {
            out.push((next, last));
        }
        out
    }

    /// Whether any offset of `[first, last]` is covered.
    pub fn overlaps(&self, first: i64, last: i64) -> bool {
        self.ranges.iter().any(|&(a, b)| a <= last && first <= b)
    }

    pub fn encode(&self) -> String {
        self.ranges.iter().map(|(a, b)| format!("{a}-{b}")).collect::<Vec<_>>().join(",")
    }

    pub fn decode(text: &str) -> Result<RangeSet, String> {
        let mut set = RangeSet::default();
        for part in text.split(',').filter(|p| !p.is_empty()) {
            // Offsets are never negative, so the first '-' separates the two.
            let (a, b) = part.split_once('-').ok_or_else(|| format!("offset range {part:?} is not first-last"))?;
            let parse = |v: &str| v.parse::<i64>().map_err(|_| format!("offset range {part:?}: {v:?} is not a number"));
            set.insert(parse(a)?, parse(b)?);
        }
        Ok(set)
    }
}

/// Committed ranges of every (topic, partition) of a table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommittedOffsets {
    pub partitions: BTreeMap<(String, i32), RangeSet>,
}

impl CommittedOffsets {
    /// Reads them from a snapshot summary.
    pub fn from_summary<'a>(summary: impl IntoIterator<Item = (&'a String, &'a String)>) -> Result<Self, String> {
        let mut out = CommittedOffsets::default();
        for (key, value) in summary {
            let Some(rest) = key.strip_prefix(OFFSETS_PREFIX) else { continue };
            let (topic, partition) =
                rest.rsplit_once('.').ok_or_else(|| format!("summary key {key:?} has no partition"))?;
            let partition = partition.parse().map_err(|_| format!("summary key {key:?}: bad partition"))?;
            out.partitions.insert((topic.to_string(), partition), RangeSet::decode(value)?);
        }
        Ok(out)
    }

    /// The summary entries.
    pub fn to_summary(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.partitions
            .iter()
            .map(|((topic, partition), set)| (format!("{OFFSETS_PREFIX}{topic}.{partition}"), set.encode()))
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<&RangeSet> {
        self.partitions.get(&(topic.to_string(), partition))
    }

    pub fn insert(&mut self, topic: &str, partition: i32, first: i64, last: i64) {
        self.partitions.entry((topic.to_string(), partition)).or_default().insert(first, last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_stay_compact() {
        let mut set = RangeSet::default();
        set.insert(100, 199);
        set.insert(300, 399);
        assert_eq!(set.encode(), "100-199,300-399");
        set.insert(200, 299); // fills the gap: adjacent ranges merge
        assert_eq!(set.encode(), "100-399");
        set.insert(0, 99);
        set.insert(50, 120);
        assert_eq!(set.ranges(), &[(0, 399)]);
        assert!(set.covers(0, 399) && !set.covers(0, 400));
        assert_eq!(RangeSet::decode(&set.encode()).unwrap(), set);
    }

    #[test]
    fn missing_parts_of_a_range() {
        let set = RangeSet::decode("10-19,30-39").unwrap();
        assert_eq!(set.missing(0, 50), vec![(0, 9), (20, 29), (40, 50)]);
        assert_eq!(set.missing(12, 18), vec![]);
        assert_eq!(set.missing(15, 35), vec![(20, 29)]);
        assert_eq!(set.missing(40, 45), vec![(40, 45)]);
        assert!(set.overlaps(35, 45) && !set.overlaps(20, 29));
        assert!(RangeSet::decode("5").is_err());
        assert!(RangeSet::decode("a-b").is_err());
    }

    #[test]
    fn summary_round_trip_with_dotted_topics() {
        let mut offsets = CommittedOffsets::default();
        offsets.insert("orders.v1", 3, 0, 999);
        offsets.insert("orders.v1", 12, 5, 5);
        let summary: BTreeMap<String, String> = offsets.to_summary().collect();
        assert_eq!(summary["floe.offsets.orders.v1.3"], "0-999");
        let back = CommittedOffsets::from_summary(&summary).unwrap();
        assert_eq!(back, offsets);
    }
}
