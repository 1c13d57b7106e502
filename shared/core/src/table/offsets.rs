//! The Kafka offsets a table holds, per partition: the table's own record of what is
//! committed, carried in every snapshot's summary.
//!
//! Stored compactly under `floe.offsets.<topic>.<partition>` as the ranges of offsets
//! covered, `first-last` joined by `,` (`0-99999,100500-100999`): in steady state one
//! range (a contiguous watermark), a few more only while segments arrive out of order.
//! An offset is covered when a task for a segment spanning it has been committed — its
//! records are in the table, or were control records, aborted, or (for transactions
//! still open) are kept pending in the table's state until their marker arrives.
//!
//! A topic is its id, not its name: a topic deleted and created again under the same
//! name is a new log whose offsets restart at 0. Where the segment layout gives the
//! topic id (tiered storage), the table records the id of the incarnation it first
//! committed (`floe.topic-id.<topic>`), whose offsets keep the plain key; another
//! incarnation's offsets go under `<topic>~<topic id>` (`~` is never in a topic name):
//! [`CommittedOffsets::log_of`]. Every per-log record (offsets, counts without rows,
//! open transactions and markers) is keyed by that log key. A table committed before
//! topic ids were recorded adopts the first id a task brings.

use std::collections::BTreeMap;

/// Summary key prefix of the committed ranges.
pub const OFFSETS_PREFIX: &str = "floe.offsets.";
/// Summary key prefix of the topic id whose offsets the plain `<topic>` key holds.
pub const TOPIC_ID_PREFIX: &str = "floe.topic-id.";
/// Between a topic's name and a later incarnation's id, in a log key.
const INCARNATION_SEPARATOR: char = '~';

/// The topic name of a log key (`orders~<id>` → `orders`).
pub fn topic_of(log: &str) -> &str {
    log.split_once(INCARNATION_SEPARATOR).map_or(log, |(topic, _)| topic)
}

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

    /// The set of `ranges` (inclusive, in any order, overlapping or not).
    pub fn from_ranges(mut ranges: Vec<(i64, i64)>) -> RangeSet {
        ranges.retain(|(a, b)| a <= b);
        ranges.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::with_capacity(ranges.len());
        for (a, b) in ranges {
            match merged.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        RangeSet { ranges: merged }
    }

    /// How many offsets it holds.
    pub fn count(&self) -> u64 {
        self.ranges.iter().map(|&(a, b)| (b as i128 - a as i128 + 1) as u64).sum()
    }

    /// The offsets of `self` that `other` does not hold.
    pub fn difference(&self, other: &RangeSet) -> RangeSet {
        let mut out = Vec::new();
        let mut theirs = other.ranges.iter().peekable();
        for &(a, b) in &self.ranges {
            // `next`: the first offset of `a..=b` not decided yet.
            let (mut next, mut covered) = (a, false);
            while let Some(&&(c, d)) = theirs.peek() {
                if d < next {
                    theirs.next();
                    continue;
                }
                if c > b {
                    break;
                }
                if c > next {
                    out.push((next, c - 1));
                }
                if d >= b {
                    // It may cover the next range too: kept.
                    covered = true;
                    break;
                }
                next = d + 1;
                theirs.next();
            }
            if !covered {
                out.push((next, b));
            }
        }
        RangeSet { ranges: out }
    }

    /// The offsets either holds.
    pub fn union(&self, other: &RangeSet) -> RangeSet {
        RangeSet::from_ranges(self.ranges.iter().chain(&other.ranges).copied().collect())
    }

    /// The offsets both hold.
    pub fn intersection(&self, other: &RangeSet) -> RangeSet {
        self.difference(&self.difference(other))
    }

    pub fn encode(&self) -> String {
        self.ranges.iter().map(|(a, b)| format!("{a}-{b}")).collect::<Vec<_>>().join(",")
    }

    /// Parses what [`Self::encode`] writes, negative offsets included (versions that
    /// did not range-check legacy offsets committed ranges such as `-1-4`).
    pub fn decode(text: &str) -> Result<RangeSet, RangeError> {
        let mut set = RangeSet::default();
        for part in text.split(',').filter(|p| !p.is_empty()) {
            // The separator is the first '-' after the first character, which may be a minus sign.
            let split = part.char_indices().skip(1).find(|&(_, c)| c == '-').map(|(i, _)| i);
            let (a, b) =
                split.map(|i| (&part[..i], &part[i + 1..])).ok_or_else(|| RangeError::NotARange(part.to_string()))?;
            let parse = |v: &str| {
                v.parse::<i64>().map_err(|_| RangeError::NotANumber { range: part.to_string(), text: v.to_string() })
            };
            let (first, last) = (parse(a)?, parse(b)?);
            if first > last {
                return Err(RangeError::Empty(part.to_string()));
            }
            set.insert(first, last);
        }
        Ok(set)
    }
}

/// Why a stored range list does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("offset range {0:?} is not first-last")]
    NotARange(String),
    #[error("offset range {range:?}: {text:?} is not a number")]
    NotANumber { range: String, text: String },
    #[error("offset range {0:?} is empty (first after last)")]
    Empty(String),
    #[error("the key names no partition")]
    NoPartition,
}

/// A `floe.offsets.*` entry of a snapshot summary that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("snapshot summary {key:?} = {value:?}: {problem}")]
pub struct SummaryError {
    pub key: String,
    pub value: String,
    pub problem: RangeError,
}

/// Committed ranges of every (log, partition) of a table: the log is the topic's name,
/// or `<topic>~<topic id>` for an incarnation other than the first (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommittedOffsets {
    pub partitions: BTreeMap<(String, i32), RangeSet>,
    /// Per topic, the id of the incarnation whose offsets its plain key holds.
    pub topic_ids: BTreeMap<String, String>,
}

impl CommittedOffsets {
    /// Reads them from a snapshot summary.
    pub fn from_summary<'a>(summary: impl IntoIterator<Item = (&'a String, &'a String)>) -> Result<Self, SummaryError> {
        let mut out = CommittedOffsets::default();
        for (key, value) in summary {
            if let Some(topic) = key.strip_prefix(TOPIC_ID_PREFIX) {
                out.topic_ids.insert(topic.to_string(), value.clone());
                continue;
            }
            let Some(rest) = key.strip_prefix(OFFSETS_PREFIX) else { continue };
            let error = |problem| SummaryError { key: key.clone(), value: value.clone(), problem };
            let (topic, partition) = rest
                .rsplit_once('.')
                .and_then(|(topic, p)| Some((topic, p.parse::<i32>().ok()?)))
                .ok_or_else(|| error(RangeError::NoPartition))?;
            out.partitions.insert((topic.to_string(), partition), RangeSet::decode(value).map_err(error)?);
        }
        Ok(out)
    }

    /// The summary entries.
    pub fn to_summary(&self) -> impl Iterator<Item = (String, String)> + '_ {
        let ids = self.topic_ids.iter().map(|(topic, id)| (format!("{TOPIC_ID_PREFIX}{topic}"), id.clone()));
        self.partitions
            .iter()
            .map(|((topic, partition), set)| (format!("{OFFSETS_PREFIX}{topic}.{partition}"), set.encode()))
            .chain(ids)
    }

    /// The log key of `topic`'s incarnation `topic_id` (`None`: a layout without ids):
    /// the plain name for the incarnation the table recorded first (or when none is
    /// recorded yet), `<topic>~<id>` for any other.
    pub fn log_of(&self, topic: &str, topic_id: Option<&str>) -> String {
        match (topic_id, self.topic_ids.get(topic)) {
            (Some(id), Some(first)) if id != first => format!("{topic}{INCARNATION_SEPARATOR}{id}"),
            _ => topic.to_string(),
        }
    }

    /// [`Self::log_of`], recording `topic_id` as the topic's first incarnation when the
    /// table has none recorded: what a commit does.
    pub fn claim_log(&mut self, topic: &str, topic_id: Option<&str>) -> String {
        if let Some(id) = topic_id {
            self.topic_ids.entry(topic.to_string()).or_insert_with(|| id.to_string());
        }
        self.log_of(topic, topic_id)
    }

    /// The ranges of `partition` of `topic`'s incarnation `topic_id` ([`Self::log_of`]).
    pub fn of_incarnation(&self, topic: &str, topic_id: Option<&str>, partition: i32) -> Option<&RangeSet> {
        self.get(&self.log_of(topic, topic_id), partition)
    }

    /// The topic the table holds (the incarnations of one topic are one topic).
    pub fn topic(&self) -> Option<&str> {
        self.partitions.keys().next().map(|(log, _)| topic_of(log))
    }

    /// The ranges of `partition` in every log, with their log keys.
    pub fn logs_of(&self, partition: i32) -> impl Iterator<Item = (&str, &RangeSet)> + '_ {
        self.partitions.iter().filter(move |((_, p), _)| *p == partition).map(|((log, _), set)| (log.as_str(), set))
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
        assert_eq!(RangeSet::decode("5"), Err(RangeError::NotARange("5".into())));
        assert!(RangeSet::decode("a-b").is_err());
    }

    #[test]
    fn set_operations() {
        let set = RangeSet::from_ranges(vec![(30, 39), (10, 19), (15, 25), (26, 26), (50, 40)]);
        assert_eq!(set.ranges(), &[(10, 26), (30, 39)]);
        assert_eq!(set.count(), 27);
        let other = RangeSet::from_ranges(vec![(0, 11), (14, 14), (20, 31), (39, 45)]);
        assert_eq!(set.difference(&other).ranges(), &[(12, 13), (15, 19), (32, 38)]);
        assert_eq!(set.intersection(&other).ranges(), &[(10, 11), (14, 14), (20, 26), (30, 31), (39, 39)]);
        assert_eq!(set.difference(&RangeSet::default()), set);
        assert!(RangeSet::default().difference(&set).is_empty());
        assert!(set.difference(&set).is_empty());
        let far = RangeSet::from_ranges(vec![(100, 200)]);
        assert_eq!(set.difference(&far), set);
    }

    #[test]
    fn negative_ranges_written_by_older_versions_parse_as_written() {
        // Before legacy offsets were range-checked, a message at -1 was committed as `-1-4`.
        assert_eq!(RangeSet::decode("-1-4").unwrap().ranges(), &[(-1, 4)]);
        assert_eq!(RangeSet::decode("-9--3,10-12").unwrap().ranges(), &[(-9, -3), (10, 12)]);
        let set = RangeSet::decode("-1-4").unwrap();
        assert_eq!(RangeSet::decode(&set.encode()).unwrap(), set);
        assert_eq!(RangeSet::decode("-5"), Err(RangeError::NotARange("-5".into())));
        assert_eq!(RangeSet::decode("4-1"), Err(RangeError::Empty("4-1".into())));
        assert!(matches!(RangeSet::decode("1--"), Err(RangeError::NotANumber { .. })));
    }

    #[test]
    fn an_unreadable_summary_entry_names_its_key() {
        let summary = BTreeMap::from([
            ("floe.offsets.orders.v1.0".to_string(), "0-9".to_string()),
            ("floe.offsets.orders.v1.1".to_string(), "-1-4".to_string()),
        ]);
        let offsets = CommittedOffsets::from_summary(&summary).unwrap();
        assert_eq!(offsets.get("orders.v1", 1).unwrap().ranges(), &[(-1, 4)]);
        for (key, value, problem) in [
            ("floe.offsets.orders.v1.1", "1-x", "offset range \"1-x\": \"x\" is not a number"),
            ("floe.offsets.orders.v1.1", "9-3", "offset range \"9-3\" is empty (first after last)"),
            ("floe.offsets.orders", "0-9", "the key names no partition"),
        ] {
            let summary = BTreeMap::from([(key.to_string(), value.to_string())]);
            let e = CommittedOffsets::from_summary(&summary).unwrap_err().to_string();
            assert_eq!(e, format!("snapshot summary {key:?} = {value:?}: {problem}"));
        }
    }

    #[test]
    fn a_re_created_topic_is_another_log() {
        let mut offsets = CommittedOffsets::default();
        // Before any id is recorded, and for layouts without ids: the plain name.
        assert_eq!(offsets.log_of("orders.v1", Some("AAA")), "orders.v1");
        assert_eq!(offsets.claim_log("orders.v1", Some("AAA")), "orders.v1");
        offsets.insert("orders.v1", 0, 0, 99);
        assert_eq!(offsets.claim_log("orders.v1", Some("AAA")), "orders.v1");
        assert_eq!(offsets.log_of("orders.v1", None), "orders.v1");
        // The topic deleted and created again: its offsets restart at 0, in a log of their own.
        let again = offsets.claim_log("orders.v1", Some("BBB"));
        assert_eq!(again, "orders.v1~BBB");
        assert!(offsets.get(&again, 0).is_none());
        offsets.insert(&again, 0, 0, 9);
        assert_eq!(topic_of(&again), "orders.v1");
        assert_eq!(offsets.topic(), Some("orders.v1"));
        assert_eq!(offsets.logs_of(0).count(), 2);
        let summary: BTreeMap<String, String> = offsets.to_summary().collect();
        assert_eq!(summary["floe.topic-id.orders.v1"], "AAA");
        assert_eq!(summary["floe.offsets.orders.v1~BBB.0"], "0-9");
        let back = CommittedOffsets::from_summary(&summary).unwrap();
        assert_eq!(back, offsets);
        assert_eq!(back.log_of("orders.v1", Some("BBB")), "orders.v1~BBB");
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
