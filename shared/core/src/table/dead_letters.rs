//! Dead letters of transactions: a bad record inside a transaction is a dead letter only
//! if the transaction commits. Until its marker comes, the materializer writes it into
//! the table's own data directory, as part of the open transaction's part (kept in the
//! table state like the part's other files); an ABORT drops it with them. A COMMIT
//! cannot add it to the dead-letter table in the same snapshot (another table), so the
//! commit that resolves the transaction queues it in the table state, numbered, and the
//! committer then adds it to the dead-letter table (copied under that table's location),
//! recording there the highest number it added:
//!
//! ```text
//!  main table T                                   dead-letter table T_dlq
//!  ─────────────                                  ───────────────────────
//!  snapshot: part resolved COMMIT
//!    state.dead_letters += { seq: n, files }  ─▶  load; published(T) = m
//!                                                 n > m: copy the files, append,
//!                                                   summary floe.dead-letters-from.T = uuid(T):n
//!  next snapshot: entries with seq ≤ published(T) leave the state
//! ```
//!
//! Exactly once: an entry is queued atomically with the snapshot that commits its
//! transaction; it is added to the dead-letter table by a snapshot that also records its
//! number (a retry finds it published and adds nothing); it leaves the queue only once the
//! dead-letter table shows it published. Numbers are never given twice: the state keeps
//! the last one given, and a watermark names the table's UUID, so a table dropped and
//! created again under the same name starts from nothing. An entry waits (shown in
//! status) until a commit of the table publishes it: the one that queued it, or, when
//! that failed, the table's next.

use std::collections::HashMap;

use iceberg::io::FileIO;
use serde::{Deserialize, Serialize};

use super::state::{PendingEntry, TableState};
use super::{LoadedTable, TableError, floe_summary, load};
use crate::catalog::Catalog;
use crate::vocabulary::{TableName, TaskFile};

/// Summary key prefix, in a dead-letter table, of the highest entry number added from a
/// table: `floe.dead-letters-from.<namespace>.<table>` = `<table uuid>:<number>`.
pub const PUBLISHED_PREFIX: &str = "floe.dead-letters-from.";

/// A committed transaction's dead letters, waiting to be added to their dead-letter table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DueDeadLetters {
    /// Its number: the table's entries are numbered in the order they were queued.
    pub seq: u64,
    /// The dead-letter table.
    pub table: TableName,
    /// The log key and partition of the transaction.
    pub topic: String,
    pub partition: i32,
    pub producer_id: i64,
    /// The task that brought the part.
    pub task_id: String,
    pub files: Vec<TaskFile>,
    /// The offsets whose dead letters are added (a part re-cut with other boundaries keeps
    /// only its new offsets).
    pub keep: Vec<(i64, i64)>,
}

impl DueDeadLetters {
    pub fn records(&self) -> u64 {
        self.files.iter().map(|f| f.record_count).sum()
    }
}

/// The summary entry recording that a dead-letter table holds `main`'s entries up to `seq`.
pub fn published_entry(main: &TableName, main_uuid: &str, seq: u64) -> (String, String) {
    (format!("{PUBLISHED_PREFIX}{main}"), format!("{main_uuid}:{seq}"))
}

/// The highest entry number of `main` (the table whose UUID is `main_uuid`) that a
/// dead-letter table's summary records as added; 0 when none (or another table of that
/// name's).
pub fn published(summary: &HashMap<String, String>, main: &TableName, main_uuid: &str) -> u64 {
    let recorded = summary.get(&format!("{PUBLISHED_PREFIX}{main}"));
    let of_this_table = recorded.and_then(|v| v.rsplit_once(':')).filter(|(uuid, _)| *uuid == main_uuid);
    of_this_table.and_then(|(_, seq)| seq.parse().ok()).unwrap_or(0)
}

/// Per dead-letter table of `state`'s queue (the state of `main`), the highest number it
/// holds from `main`.
pub async fn published_by(
    catalog: &dyn Catalog,
    file_io: &FileIO,
    main: &LoadedTable,
    state: &TableState,
) -> Result<HashMap<TableName, u64>, TableError> {
    let mut found = HashMap::new();
    for d in &state.dead_letters {
        if found.contains_key(&d.table) {
            continue;
        }
        let holds = match load(catalog, file_io, &d.table).await? {
            Some(t) => published(&floe_summary(&t.metadata), &main.name, &main.metadata.uuid().to_string()),
            None => 0,
        };
        found.insert(d.table.clone(), holds);
    }
    Ok(found)
}

impl TableState {
    /// How many of the queued dead letters their tables do not hold yet (`published`:
    /// as [`published_by`] gives).
    pub fn dead_letters_waiting(&self, published: &HashMap<TableName, u64>) -> u64 {
        let waiting = self.dead_letters.iter().filter(|d| d.seq > published.get(&d.table).copied().unwrap_or(0));
        waiting.map(DueDeadLetters::records).sum()
    }

    /// Queues the dead letters of `part`, resolved by a COMMIT, for its dead-letter table.
    pub fn queue_dead_letters(&mut self, part: &PendingEntry, table: TableName) {
        let t = &part.transaction;
        if t.dead_letter_files.is_empty() {
            return;
        }
        self.dead_letter_seq += 1;
        self.dead_letters.push(DueDeadLetters {
            seq: self.dead_letter_seq,
            table,
            topic: part.topic.clone(),
            partition: part.partition,
            producer_id: t.producer_id,
            task_id: part.task_id.clone(),
            files: t.dead_letter_files.clone(),
            keep: part.keep.clone().unwrap_or_else(|| vec![(t.first_offset, t.last_offset)]),
        });
    }

    /// Drops the entries their dead-letter table holds (`published`: its highest number
    /// per dead-letter table).
    pub fn drop_published(&mut self, published: &HashMap<TableName, u64>) {
        self.dead_letters.retain(|d| d.seq > published.get(&d.table).copied().unwrap_or(0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocabulary::PendingTransaction;

    fn name(n: &str) -> TableName {
        TableName { namespace: "kafka".into(), name: n.into() }
    }

    fn part(producer_id: i64, dead_letters: usize) -> PendingEntry {
        let file = TaskFile { first_offset: 5, last_offset: 5, record_count: 1, data_file: serde_json::json!({}) };
        PendingEntry {
            topic: "t".into(),
            partition: 0,
            task_id: format!("task-{producer_id}"),
            segment_first: Some(0),
            transaction: PendingTransaction {
                producer_id,
                first_offset: 3,
                last_offset: 9,
                dead_letter_files: vec![file; dead_letters],
                ..Default::default()
            },
            schema: iceberg::spec::Schema::builder().build().unwrap(),
            partition_spec: None,
            keep: None,
            pending_since_ms: None,
            transaction_timeout_ms: None,
            dead_letter_table: None,
        }
    }

    #[test]
    fn entries_are_numbered_never_twice_and_leave_once_published() {
        let mut state = TableState::default();
        state.queue_dead_letters(&part(1, 0), name("t_dlq"));
        assert!(state.dead_letters.is_empty(), "a part without dead letters queues nothing");
        state.queue_dead_letters(&part(1, 1), name("t_dlq"));
        state.queue_dead_letters(&part(2, 2), name("t_dlq"));
        assert_eq!(
            state.dead_letters.iter().map(|d| (d.seq, d.records(), d.keep.clone())).collect::<Vec<_>>(),
            [(1, 1, vec![(3, 9)]), (2, 2, vec![(3, 9)])]
        );
        state.drop_published(&HashMap::from([(name("t_dlq"), 1)]));
        assert_eq!(state.dead_letters.iter().map(|d| d.seq).collect::<Vec<_>>(), [2]);
        state.drop_published(&HashMap::from([(name("t_dlq"), 2)]));
        assert!(state.dead_letters.is_empty());
        assert!(!state.is_empty(), "the last number given stays, so none is given twice");
        state.queue_dead_letters(&part(3, 1), name("t_dlq"));
        assert_eq!(state.dead_letters[0].seq, 3);
    }

    #[test]
    fn a_watermark_counts_for_the_table_of_its_uuid_only() {
        let main = name("t");
        let summary: HashMap<String, String> = [published_entry(&main, "uuid-1", 7)].into_iter().collect();
        assert_eq!(summary.keys().next().unwrap(), "floe.dead-letters-from.kafka.t");
        assert_eq!(published(&summary, &main, "uuid-1"), 7);
        assert_eq!(published(&summary, &main, "uuid-2"), 0, "a table created again under the name");
        assert_eq!(published(&summary, &name("u"), "uuid-1"), 0);
        assert_eq!(published(&HashMap::new(), &main, "uuid-1"), 0);
    }
}
