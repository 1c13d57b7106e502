//! Which topic (or `[[topics]]` entry) holds which table: one table holds one topic,
//! and a topic's dead-letter table is its own too ([`TableClaims`]); two that would
//! write one table are a [`ClashError`] naming both.

use std::collections::BTreeMap;

use super::topic::TopicConfig;
use super::values::BadRecordMode;
use crate::vocabulary::DEAD_LETTER_SUFFIX;

/// Who claims a table: a topic met at run time, or a `[[topics]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimant {
    Topic(String),
    /// The entry as errors name it: `topic "orders" (topics[0])`, `pattern "audit\..*" (topics[1])`.
    Entry(String),
}

impl std::fmt::Display for Claimant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Claimant::Topic(topic) => write!(f, "topic {topic:?}"),
            Claimant::Entry(entry) => f.write_str(entry),
        }
    }
}

/// Two topics (or entries) that would write one table: refused, never merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct ClashError {
    /// The one that came second.
    pub claimant: Claimant,
    /// The one holding the table.
    pub holder: Claimant,
    /// `namespace.table`.
    pub table: String,
    /// Whether the table is the claimant's dead-letter table.
    pub claimant_dlq: bool,
    /// Whether the table is the holder's dead-letter table.
    pub holder_dlq: bool,
}

impl ClashError {
    fn describe(&self) -> String {
        let (c, h, t) = (&self.claimant, &self.holder, &self.table);
        let fix = "one table holds one topic: give one of them a `table` of its own in a [[topics]] entry";
        match (self.claimant_dlq, self.holder_dlq) {
            (false, false) => format!("{c} and {h} both map to table {t}; {fix}"),
            (false, true) => {
                format!("{c} maps to table {t}, the dead-letter table of {h} (bad_records = \"dlq\"); {fix}")
            }
            (true, false) => {
                format!("the dead-letter table of {c} (bad_records = \"dlq\") is {t}, the table of {h}; {fix}")
            }
            (true, true) => format!("{c} and {h} both have the dead-letter table {t}; {fix}"),
        }
    }

    /// The topics (met at run time) of the clash.
    pub fn topics(&self) -> Vec<&str> {
        [&self.claimant, &self.holder]
            .into_iter()
            .filter_map(|c| match c {
                Claimant::Topic(t) => Some(t.as_str()),
                Claimant::Entry(_) => None,
            })
            .collect()
    }
}

/// The tables claimed so far (`namespace.table`), each with its claimant: one table
/// holds one topic, and a topic's dead-letter table (`<table>_dlq`, in `dlq` mode) is
/// its own too.
#[derive(Debug, Default, Clone)]
pub struct TableClaims {
    tables: BTreeMap<String, (Claimant, bool)>,
}

impl TableClaims {
    /// Claims `namespace.table` (and `namespace.table_dlq` in `dlq` mode) for `claimant`;
    /// nothing is claimed when one of them is another's.
    pub fn claim(
        &mut self,
        claimant: Claimant,
        namespace: &str,
        table: &str,
        bad_records: BadRecordMode,
    ) -> Result<(), ClashError> {
        let mut names = vec![(format!("{namespace}.{table}"), false)];
        if bad_records == BadRecordMode::Dlq {
            names.push((format!("{namespace}.{table}{DEAD_LETTER_SUFFIX}"), true));
        }
        for (name, dlq) in &names {
            if let Some((holder, holder_dlq)) = self.tables.get(name)
                && *holder != claimant
            {
                return Err(ClashError {
                    claimant,
                    holder: holder.clone(),
                    table: name.clone(),
                    claimant_dlq: *dlq,
                    holder_dlq: *holder_dlq,
                });
            }
        }
        for (name, dlq) in names {
            self.tables.entry(name).or_insert_with(|| (claimant.clone(), dlq));
        }
        Ok(())
    }

    /// Claims the tables of a resolved topic.
    pub fn claim_topic(&mut self, topic: &TopicConfig) -> Result<(), ClashError> {
        self.claim(Claimant::Topic(topic.topic.clone()), &topic.namespace, &topic.table, topic.bad_records)
    }
}
