//! The oracle's model: what the brokers wrote (each Kafka partition's log, cut into
//! segments) and what a reader of the table must see, now and at each ref.
//!
//! Rows are identified by (incarnation, Kafka partition, offset): Floe's by the record's
//! (a topic deleted and created again is a new incarnation, its offsets from 0 again:
//! [`Log::successor`]), another engine's by [`FOREIGN_PARTITION`] and a unique id the test
//! gives them. A reader tells incarnations apart by the record's key ([`incarnation_of`]). A row is its
//! columns by their current names (nulls left out) and its Kafka key as `__key`, so a
//! rename moves a value to the new name and a drop removes it, in every row the table
//! holds. A row still waiting for its transaction's marker is a new record when the
//! marker commits it: its fields go into the columns of their JSON names then (one
//! another engine renamed or dropped meanwhile comes back as a new column).
//!
//! A row's `_kafka` metadata is in it too, under names no column has: `__key`, `__ts`
//! (milliseconds), `__ts_type` (`create` / `log_append`) and `__headers` (`[key, value]`).
//!
//! Time is the brokers': each log has a clock, moved forward minutes to hours between
//! appends. A record's `CreateTime` is its producer's clock (a little behind); a
//! `LogAppendTime` topic's batches carry the broker's time instead. A transaction lasts at
//! most the topic's `transaction_timeout` τ: one still open τ after its first record is
//! aborted by the coordinator at that time, with the producer's epoch bumped (its later
//! records come in the new epoch), as a producer fenced by a new instance is (an idle
//! producer restarted gets a new epoch too, without a marker). So every
//! marker comes within τ of its records, minutes to hours after them.
//!
//! An upsert topic's table ([`Table::upsert`]) holds one row per key: the key's committed
//! record of the highest offset, none if that is a tombstone (a null value), whatever
//! order segments and transactions' markers are committed in. Another engine's delete of
//! a key's row holds until a record of the key with a higher offset is committed.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

/// A pending row's mark: a tombstone (no row once committed).
const TOMBSTONE: &str = "__tombstone";
/// The Kafka partition column of another engine's rows (Floe never writes it).
pub const FOREIGN_PARTITION: i32 = 99;
/// Another engine's rows have ids from here on (Floe's: incarnation * 1e8 + partition *
/// 1e6 + offset).
const FOREIGN_IDS: i64 = 900_000_000;
const INCARNATION_IDS: i64 = 100_000_000;
/// The brokers' clocks start here.
const T0: i64 = 1_764_000_000_000;
const MINUTE_MS: i64 = 60 * 1000;

/// A row: (incarnation, Kafka partition, offset).
pub type RowId = (u32, i32, i64);
/// A Kafka log: (incarnation, partition).
pub type LogId = (u32, i32);
pub type Row = BTreeMap<String, Value>;
pub type Rows = BTreeMap<RowId, Row>;

/// A transactional record's producer: its id, its transaction's number, its epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Txn {
    pub pid: i64,
    pub seq: u32,
    pub epoch: i16,
}

/// One entry of a partition's log, appended at broker time `time`.
#[derive(Clone, Debug)]
pub enum Entry {
    /// A record: in a transaction or not; `bad` values are not JSON; `evolved` ones carry
    /// the fields the topic gained; `long` ones a `region` of over 255 bytes once escaped
    /// (a partition folder's name); a `tombstone` (an upsert topic's) has a null value.
    /// A bad record inside a transaction counts only once its transaction commits: a dead
    /// letter then (if written in mode `dlq`), or the table suspended (mode `suspend`).
    Record { txn: Option<Txn>, bad: bool, evolved: bool, long: bool, tombstone: bool, time: i64 },
    /// A transaction's end, committing or aborting producer `pid`'s transaction `seq`,
    /// written with the producer's epoch (bumped when the coordinator aborts).
    Marker { pid: i64, seq: u32, epoch: i16, commit: bool, time: i64 },
}

/// A transactional producer of a log.
#[derive(Clone, Debug, Default)]
struct Producer {
    epoch: i16,
    /// Markers written for it so far (its next transaction's number).
    ended: u32,
    /// Its open transaction: its number and the broker time of its first record.
    open: Option<(u32, i64)>,
}

/// A partition's log as the brokers wrote it: its entries from offset `start` on, cut
/// into segments (offset ranges, inclusive).
#[derive(Debug)]
pub struct Log {
    /// The topic's incarnation: 0, then one more each time it is deleted and created again.
    pub incarnation: u32,
    /// Its topic id, when the segments are laid out as tiered storage uploads them (the
    /// path carries it); `None`: a broker's log dir.
    pub topic_id: Option<String>,
    pub partition: i32,
    pub start: i64,
    pub entries: Vec<Entry>,
    pub segments: Vec<(i64, i64)>,
    producers: BTreeMap<i64, Producer>,
    next_pid: i64,
    /// Whether some records have a long `region`.
    pub long_values: bool,
    /// The broker's clock.
    pub clock: i64,
    /// Whether the topic's batches carry the broker's time (`LogAppendTime`).
    pub log_append: bool,
    /// The topic's transaction timeout τ.
    pub timeout_ms: i64,
    /// An upsert topic's: a few keys written again and again ([`UPSERT_KEYS`] a
    /// partition), some records tombstones.
    pub upsert: bool,
}

/// The keys of a partition of an upsert topic.
const UPSERT_KEYS: i64 = 13;

impl Log {
    pub fn new(partition: i32, start: i64) -> Log {
        Log {
            incarnation: 0,
            topic_id: None,
            partition,
            start,
            entries: Vec::new(),
            segments: Vec::new(),
            producers: BTreeMap::new(),
            next_pid: 1000 * (partition as i64 + 1),
            long_values: false,
            clock: T0,
            log_append: false,
            timeout_ms: 15 * MINUTE_MS,
            upsert: false,
        }
    }

    pub fn id(&self) -> LogId {
        (self.incarnation, self.partition)
    }

    /// The same partition of the topic deleted and created again (its producers' open
    /// transactions aborted, its last records cut into a segment first): a new topic id,
    /// offsets from 0 again, the broker's clock and the topic's settings kept.
    pub fn successor(&mut self, topic_id: String) -> Log {
        for pid in self.open_transactions() {
            self.fence(pid, self.clock);
        }
        self.cut();
        let mut next = Log::new(self.partition, 0);
        next.incarnation = self.incarnation + 1;
        next.topic_id = Some(topic_id);
        next.next_pid = self.next_pid + 100;
        (next.long_values, next.clock, next.log_append, next.timeout_ms, next.upsert) =
            (self.long_values, self.clock, self.log_append, self.timeout_ms, self.upsert);
        next
    }

    pub fn next_offset(&self) -> i64 {
        self.start + self.entries.len() as i64
    }

    pub fn entry(&self, offset: i64) -> &Entry {
        &self.entries[(offset - self.start) as usize]
    }

    /// The producers with a transaction open.
    pub fn open_transactions(&self) -> Vec<i64> {
        self.producers.iter().filter(|(_, p)| p.open.is_some()).map(|(pid, _)| *pid).collect()
    }

    /// The producers with no transaction open.
    pub fn idle_producers(&self) -> Vec<i64> {
        self.producers.iter().filter(|(_, p)| p.open.is_none()).map(|(pid, _)| *pid).collect()
    }

    /// Appends `n` records: in producer `pid`'s transaction (opened if need be), or plain.
    pub fn records(&mut self, n: usize, pid: Option<i64>, evolved: bool, bad_at: Option<usize>) {
        let time = self.clock;
        let txn = pid.map(|pid| {
            let p = self.producers.entry(pid).or_default();
            let (seq, _) = *p.open.get_or_insert((p.ended, time));
            Txn { pid, seq, epoch: p.epoch }
        });
        for i in 0..n {
            let offset = self.next_offset();
            let long = self.long_values && (offset % 37 == 5);
            let bad = bad_at == Some(i);
            let tombstone = self.upsert && !bad && offset % 9 == 4;
            self.entries.push(Entry::Record { txn, bad, evolved, long, tombstone, time });
        }
    }

    /// A producer id no transaction used yet.
    pub fn new_pid(&mut self) -> i64 {
        self.next_pid += 1;
        self.next_pid
    }

    /// Ends producer `pid`'s open transaction now.
    pub fn end(&mut self, pid: i64, commit: bool) {
        self.marker(pid, commit, self.clock, false);
    }

    /// The coordinator aborts producer `pid`'s open transaction at `time` (a new instance
    /// of the producer fenced it, or its timeout passed), bumping its epoch.
    pub fn fence(&mut self, pid: i64, time: i64) {
        self.marker(pid, false, time, true);
    }

    /// A new instance of idle producer `pid` starts: its epoch is bumped (its next records
    /// come in the new epoch, after its last marker of the old one).
    pub fn restart(&mut self, pid: i64) {
        let p = self.producers.get_mut(&pid).expect("a producer");
        assert!(p.open.is_none(), "an idle producer");
        p.epoch += 1;
    }

    fn marker(&mut self, pid: i64, commit: bool, time: i64, bump: bool) {
        let p = self.producers.get_mut(&pid).expect("a producer");
        let (seq, _) = p.open.take().expect("an open transaction");
        p.epoch += i16::from(bump);
        p.ended += 1;
        self.entries.push(Entry::Marker { pid, seq, epoch: p.epoch, commit, time });
    }

    /// Moves the broker's clock `ms` forward; a transaction whose timeout passes meanwhile
    /// is aborted by the coordinator then.
    pub fn advance(&mut self, ms: i64) {
        let to = self.clock + ms;
        loop {
            let due = self.producers.iter().filter_map(|(pid, p)| p.open.map(|(_, started)| (started, *pid))).min();
            match due {
                Some((started, pid)) if started + self.timeout_ms < to => {
                    self.clock = self.clock.max(started + self.timeout_ms);
                    self.fence(pid, self.clock);
                }
                _ => break,
            }
        }
        self.clock = to;
    }

    /// Cuts what was appended since the last segment into one segment.
    pub fn cut(&mut self) {
        let first = self.segments.last().map_or(self.start, |s| s.1 + 1);
        let last = self.next_offset() - 1;
        if last >= first {
            self.segments.push((first, last));
        }
    }

    /// How the transaction of the record at `offset` ended, once its marker and every
    /// offset between them are committed (before that, a reader cannot tell whether
    /// another marker of the producer lies between: DESIGN §3, table/state.rs).
    fn outcome(&self, covered: &BTreeSet<i64>, txn: Txn, offset: i64) -> Option<bool> {
        let (marker, commit) = self.entries.iter().enumerate().find_map(|(i, e)| match e {
            Entry::Marker { pid, seq, commit, .. } if (*pid, *seq) == (txn.pid, txn.seq) => {
                Some((self.start + i as i64, *commit))
            }
            _ => None,
        })?;
        (offset..=marker).all(|o| covered.contains(&o)).then_some(commit)
    }

    /// The segment's batches as tests/py/lifecycle_engine.py writes them: one batch per
    /// run of records of the same producer and epoch appended at the same time (in a
    /// `LogAppendTime` topic, stamped with it); a batch per marker.
    pub fn batches(&self, (first, last): (i64, i64)) -> Vec<Value> {
        type Open = (Option<Txn>, i64, i64, Vec<Value>);
        let mut batches: Vec<Value> = Vec::new();
        let mut current: Option<Open> = None;
        let log_append = self.log_append;
        let flush = |current: &mut Option<Open>, batches: &mut Vec<Value>| {
            if let Some((txn, base, time, records)) = current.take() {
                batches.push(json!({"base": base, "pid": txn.map(|t| t.pid), "epoch": txn.map(|t| t.epoch),
                    "log_append": log_append.then_some(time), "records": records}));
            }
        };
        for offset in first..=last {
            match self.entry(offset) {
                Entry::Marker { pid, epoch, commit, time, .. } => {
                    flush(&mut current, &mut batches);
                    batches.push(json!({"marker": offset, "pid": pid, "epoch": epoch, "commit": commit, "ts": time}));
                }
                Entry::Record { txn, bad, evolved, long, tombstone, time } => {
                    if current
                        .as_ref()
                        .is_some_and(|c| c.0.map(|t| (t.pid, t.epoch)) != txn.map(|t| (t.pid, t.epoch)) || c.2 != *time)
                    {
                        flush(&mut current, &mut batches);
                    }
                    let value = match (bad, tombstone) {
                        (true, _) => json!("{not json"),
                        (_, true) => Value::Null,
                        _ => json!(self.value(offset, *evolved, *long)),
                    };
                    let record = json!([create_time(*time, offset), self.key(offset), value, headers(offset)]);
                    current.get_or_insert_with(|| (*txn, offset, *time, Vec::new())).3.push(record);
                }
            }
        }
        flush(&mut current, &mut batches);
        batches
    }

    /// The `_kafka` metadata a reader sees of the record at `offset`: `__ts`, `__ts_type`,
    /// `__headers` (and `__key`).
    fn metadata(&self, offset: i64) -> Row {
        let Entry::Record { time, .. } = self.entry(offset) else { unreachable!("rows are records") };
        let (ts, ts_type) =
            if self.log_append { (*time, "log_append") } else { (create_time(*time, offset), "create") };
        Row::from([
            ("__key".to_string(), json!(self.key(offset))),
            ("__ts".to_string(), json!(ts)),
            ("__ts_type".to_string(), json!(ts_type)),
            ("__headers".to_string(), headers(offset)),
        ])
    }

    /// A record's key: `k<partition>-<offset>` (an upsert topic's: `k<partition>-u<n>`, one
    /// of [`UPSERT_KEYS`]), then `~<incarnation>` past the first.
    fn key(&self, offset: i64) -> String {
        let incarnation = if self.incarnation == 0 { String::new() } else { format!("~{}", self.incarnation) };
        match self.upsert {
            true => format!("k{}-u{}{incarnation}", self.partition, offset % UPSERT_KEYS),
            false => format!("k{}-{offset}{incarnation}", self.partition),
        }
    }

    fn value(&self, offset: i64, evolved: bool, long: bool) -> String {
        self.fields(offset, evolved, long).to_string()
    }

    /// A record's value: `{"id", "name", "region", "meta": {"a"}}`, evolved with `extra`
    /// and `meta.b`; its `id` is unique over every incarnation.
    fn fields(&self, offset: i64, evolved: bool, long: bool) -> Value {
        let id = self.incarnation as i64 * INCARNATION_IDS + self.partition as i64 * 1_000_000 + offset;
        let region = if long {
            format!("région-{}-{offset}", "é".repeat(140))
        } else {
            ["eu", "us", "ap"][offset as usize % 3].into()
        };
        let mut fields = json!({"id": id, "name": format!("n{offset}"), "region": region, "meta": {"a": offset}});
        if evolved {
            fields["meta"]["b"] = json!(format!("b{offset}"));
            fields["extra"] = json!(format!("x{offset}"));
        }
        fields
    }
}

/// The incarnation of a Floe row, from its key (`k0-7~2`: the third).
pub fn incarnation_of(row: &Row) -> u32 {
    let key = row.get("__key").and_then(Value::as_str).unwrap_or_default();
    key.rsplit_once('~').and_then(|(_, n)| n.parse().ok()).unwrap_or(0)
}

/// A record's `CreateTime`: its producer's clock, a little behind the broker's.
fn create_time(broker_time: i64, offset: i64) -> i64 {
    broker_time - offset % 7 - 1
}

/// A record's headers, `[key, value]` (value null or a string): none, one, or two with a
/// null value.
fn headers(offset: i64) -> Value {
    match offset % 3 {
        0 => json!([]),
        1 => json!([["trace", format!("t{offset}")]]),
        _ => json!([["trace", format!("t{offset}")], ["ünï", null]]),
    }
}

/// What the table columns hold, whatever they are called now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Id,
    Name,
    Region,
    Meta,
    Extra,
    /// Added by the other engine.
    Note,
}

impl Kind {
    fn of_json(field: &str) -> Kind {
        match field {
            "id" => Kind::Id,
            "name" => Kind::Name,
            "region" => Kind::Region,
            "meta" => Kind::Meta,
            "extra" => Kind::Extra,
            _ => Kind::Note,
        }
    }
}

/// What a reader of the table (and of its dead-letter table) must see.
#[derive(Clone, Default)]
pub struct Table {
    /// Whether Floe created the table yet.
    pub exists: bool,
    /// The rows the current snapshot holds.
    pub rows: Rows,
    /// Rows written into files, waiting for their transaction's marker.
    pub pending: Rows,
    /// Bad records of transactions waiting for their marker, and the mode they were
    /// written in.
    pub pending_bad: BTreeMap<RowId, BadRecords>,
    /// Offsets committed per log: those of every segment committed.
    pub covered: BTreeMap<LogId, BTreeSet<i64>>,
    /// The topic id of each incarnation committed (tiered storage's layout).
    pub topic_ids: BTreeMap<u32, String>,
    /// Bad records committed to the dead-letter table.
    pub dead: BTreeSet<RowId>,
    /// The columns by their current names (`_kafka` aside).
    pub columns: Vec<(String, Kind)>,
    /// The current snapshot's id, and its rows under the schema of its commit.
    pub snapshot: Option<String>,
    pub snapshot_rows: Rows,
    /// Per ref (tag, branch): the rows of the snapshot it points to.
    pub refs: BTreeMap<String, Rows>,
    /// The partition fields another engine added (`day(_kafka.timestamp)`).
    pub specs: BTreeSet<String>,
    /// An upsert table's: one row per key, the key's committed record of the highest
    /// offset ([`Table::land`]).
    pub upsert: bool,
    /// An upsert table's winning offset per key (a tombstone's too), per log.
    winners: BTreeMap<(LogId, String), i64>,
    /// Kafka partitions another engine deleted Floe rows from (copy-on-write deletes leave
    /// no trace the audit can read: it cannot tell those gaps from losses).
    pub deleted_from: BTreeSet<i32>,
    next_foreign: i64,
}

/// What a commit resolved of transactions' bad records: whether one written in mode
/// `suspend` committed (the table is suspended once the commit is in), how many written
/// in mode `dlq` became dead letters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Resolved {
    pub suspends: bool,
    pub dead_letters: usize,
}

impl Resolved {
    pub fn any(self) -> bool {
        self.suspends || self.dead_letters > 0
    }
}

/// The topic id of incarnation `incarnation` of seed `seed`'s topic (22 characters, as
/// Kafka prints a `Uuid`).
pub fn topic_id(seed: u64, incarnation: u32) -> String {
    format!("lifecycle{seed:06}inc{incarnation:04}")
}

/// What to do with bad records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadRecords {
    Skip,
    Dlq,
    Suspend,
}

impl BadRecords {
    pub fn name(self) -> &'static str {
        match self {
            BadRecords::Skip => "skip",
            BadRecords::Dlq => "dlq",
            BadRecords::Suspend => "suspend",
        }
    }
}

impl Table {
    fn covered(&self, log: LogId) -> BTreeSet<i64> {
        self.covered.get(&log).cloned().unwrap_or_default()
    }

    /// Whether the segment holds an offset not committed yet.
    pub fn is_new(&self, log: &Log, segment: (i64, i64)) -> bool {
        let covered = self.covered(log.id());
        (segment.0..=segment.1).any(|o| !covered.contains(&o))
    }

    /// Whether committing the segment meets a bad record outside transactions (read even
    /// at offsets committed): in mode `suspend`, the table is suspended before any commit.
    pub fn meets_bad_record(&self, log: &Log, segment: (i64, i64)) -> bool {
        self.is_new(log, segment)
            && (segment.0..=segment.1).any(|o| matches!(log.entry(o), Entry::Record { bad: true, txn: None, .. }))
    }

    /// Segments of any logs committed, each log's as [`Self::commit`] says.
    pub fn commit_all(&mut self, logs: &[Log], segments: &[(LogId, (i64, i64))], mode: BadRecords) -> Resolved {
        let mut resolved = Resolved::default();
        for log in logs {
            let mine: Vec<(i64, i64)> = segments.iter().filter(|(l, _)| *l == log.id()).map(|(_, s)| *s).collect();
            let now = self.commit(log, &mine, mode);
            resolved.suspends |= now.suspends;
            resolved.dead_letters += now.dead_letters;
        }
        resolved
    }

    /// What a run of `segments` in `mode` meets: whether a bad record outside transactions
    /// suspends the table before any commit (mode `suspend`; the run after the resume, in
    /// `skip` mode, commits them), and what its commit resolves of transactions' bad records.
    pub fn suspensions(&self, logs: &[Log], segments: &[(LogId, (i64, i64))], mode: BadRecords) -> (bool, Resolved) {
        let meets = |(id, segment): &(LogId, (i64, i64))| {
            logs.iter().any(|log| log.id() == *id && self.meets_bad_record(log, *segment))
        };
        let before = mode == BadRecords::Suspend && segments.iter().any(meets);
        let committed_in = if before { BadRecords::Skip } else { mode };
        (before, self.clone().commit_all(logs, segments, committed_in))
    }

    /// The segments committed: their new records written (bad ones as `mode` says: a bad
    /// record outside transactions at once, one inside when its transaction commits),
    /// then every transaction whose marker is committed now resolved.
    pub fn commit(&mut self, log: &Log, segments: &[(i64, i64)], mode: BadRecords) -> Resolved {
        let (incarnation, partition) = log.id();
        if let Some(id) = &log.topic_id {
            self.topic_ids.insert(incarnation, id.clone());
        }
        for &(first, last) in segments {
            for offset in first..=last {
                if !self.covered.entry(log.id()).or_default().insert(offset) {
                    continue;
                }
                self.exists = true;
                let id = (incarnation, partition, offset);
                match log.entry(offset) {
                    Entry::Record { bad: true, txn: None, .. } => {
                        if mode == BadRecords::Dlq {
                            self.dead.insert(id);
                        }
                    }
                    Entry::Record { bad: true, .. } => drop(self.pending_bad.insert(id, mode)),
                    Entry::Record { tombstone: true, .. } => {
                        let mut row = log.metadata(offset);
                        row.insert(TOMBSTONE.into(), json!(true));
                        self.pending.insert(id, row);
                    }
                    Entry::Record { evolved, long, .. } => {
                        let Value::Object(fields) = log.fields(offset, *evolved, *long) else { unreachable!() };
                        let mut row: Row = fields.into_iter().collect();
                        self.add_columns_of(&row);
                        row.extend(log.metadata(offset));
                        self.pending.insert(id, row);
                    }
                    Entry::Marker { .. } => {}
                }
            }
        }
        let covered = self.covered(log.id());
        let outcome = |id: &RowId| match log.entry(id.2) {
            Entry::Record { txn: None, .. } => Some(true),
            Entry::Record { txn: Some(txn), .. } => log.outcome(&covered, *txn, id.2),
            Entry::Marker { .. } => unreachable!("rows are records"),
        };
        let mine = |id: &&RowId| (id.0, id.1) == log.id();
        let pending: Vec<(RowId, Option<bool>)> =
            self.pending.keys().filter(mine).map(|id| (*id, outcome(id))).collect();
        for (id, outcome) in pending {
            match outcome {
                Some(true) => {
                    let row = self.pending.remove(&id).unwrap();
                    self.land(id, row);
                }
                Some(false) => drop(self.pending.remove(&id)),
                None => {}
            }
        }
        let bad: Vec<(RowId, Option<bool>)> =
            self.pending_bad.keys().filter(mine).map(|id| (*id, outcome(id))).collect();
        let mut resolved = Resolved::default();
        for (id, outcome) in bad.into_iter().filter(|(_, o)| o.is_some()) {
            let mode = self.pending_bad.remove(&id).unwrap();
            match (outcome, mode) {
                (Some(true), BadRecords::Suspend) => resolved.suspends = true,
                (Some(true), BadRecords::Dlq) => {
                    self.dead.insert(id);
                    resolved.dead_letters += 1;
                }
                _ => {}
            }
        }
        resolved
    }

    /// A committed record's row into the table. In an upsert table the row is its key's
    /// only if no record of the key with a higher offset was committed before (in any
    /// order): the key's earlier row is deleted then (wherever it is: gone already if
    /// another engine deleted it), and a tombstone leaves none.
    fn land(&mut self, id: RowId, mut row: Row) {
        let tombstone = row.remove(TOMBSTONE).is_some();
        if !tombstone {
            self.add_columns_of(&row);
        }
        if !self.upsert {
            self.rows.insert(id, row);
            return;
        }
        let key = ((id.0, id.1), row["__key"].as_str().expect("a key").to_string());
        match self.winners.get(&key) {
            Some(&winner) if winner >= id.2 => return,
            Some(&winner) => drop(self.rows.remove(&(id.0, id.1, winner))),
            None => {}
        }
        self.winners.insert(key, id.2);
        if !tombstone {
            self.rows.insert(id, row);
        }
    }

    /// A new column for each field of a Floe row the table has no column of.
    fn add_columns_of(&mut self, row: &Row) {
        for field in row.keys().filter(|f| !is_metadata(f)) {
            if !self.columns.iter().any(|(name, _)| name == field) {
                self.columns.push((field.clone(), Kind::of_json(field)));
            }
        }
    }

    /// Another engine's `n` new rows, with a value in each of the table's `columns`;
    /// added to the model, and returned as the engine appends them.
    pub fn foreign_rows(&mut self, n: usize, now_ms: i64, columns: &[String]) -> Vec<Value> {
        let mut out = Vec::new();
        for _ in 0..n {
            self.next_foreign += 1;
            let uid = self.next_foreign;
            let mut row = Row::new();
            for (name, kind) in self.columns.iter().filter(|(name, _)| columns.contains(name)) {
                let value = match kind {
                    Kind::Id => json!(FOREIGN_IDS + uid),
                    Kind::Name => json!(format!("f{uid}")),
                    Kind::Region => json!("foreign"),
                    Kind::Meta => json!({"a": uid}),
                    Kind::Extra => json!(format!("fx{uid}")),
                    Kind::Note => json!(format!("note{uid}")),
                };
                row.insert(name.clone(), value);
            }
            let mut request = serde_json::Map::from_iter(row.clone());
            request.extend([("partition".into(), json!(FOREIGN_PARTITION)), ("offset".into(), json!(uid))]);
            request.insert("ts".into(), json!(now_ms));
            out.push(Value::Object(request));
            row.extend([
                ("__ts".to_string(), json!(now_ms)),
                ("__ts_type".to_string(), json!("create")),
                ("__headers".to_string(), json!([])),
            ]);
            self.rows.insert((0, FOREIGN_PARTITION, uid), row);
        }
        out
    }

    /// The rows `lo <= id < hi` whose id is `lo` plus a multiple of `every` deleted.
    pub fn delete(&mut self, lo: i64, hi: i64, every: i64) {
        let id_column = self.name_of(Kind::Id).unwrap_or("id").to_string();
        let chosen = |id: i64| lo <= id && id < hi && (id - lo) % every == 0;
        let doomed = |row: &Row| row.get(&id_column).and_then(Value::as_i64).is_some_and(chosen);
        let touched = self.rows.iter().filter(|(id, row)| id.1 != FOREIGN_PARTITION && doomed(row)).map(|(id, _)| id.1);
        self.deleted_from.extend(touched.collect::<Vec<_>>());
        self.rows.retain(|_, row| !doomed(row));
    }

    /// Each Kafka log's committed offsets as `floe.offsets.<topic>.<partition>` holds them
    /// (`<topic>~<topic id>` for an incarnation past the first): `first-last` ranges
    /// joined by `,`.
    pub fn offsets(&self, topic: &str) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for ((incarnation, partition), covered) in self.covered.iter().filter(|(_, c)| !c.is_empty()) {
            let mut ranges: Vec<(i64, i64)> = Vec::new();
            for &o in covered {
                match ranges.last_mut() {
                    Some(last) if last.1 + 1 == o => last.1 = o,
                    _ => ranges.push((o, o)),
                }
            }
            let text: Vec<String> = ranges.iter().map(|(a, b)| format!("{a}-{b}")).collect();
            let log = match (incarnation, self.topic_ids.get(incarnation)) {
                (1.., Some(id)) => format!("{topic}~{id}"),
                _ => topic.to_string(),
            };
            out.insert(format!("floe.offsets.{log}.{partition}"), text.join(","));
        }
        out
    }

    /// What `floe audit` must say of the table, when the model can tell: each Kafka
    /// partition no other engine deleted from holds every committed record exactly once;
    /// another engine's rows (never committed by Floe) make the table fail it.
    pub fn audit_expected(&self, partition: i32) -> Option<bool> {
        if partition == FOREIGN_PARTITION {
            return Some(false);
        }
        (!self.deleted_from.contains(&partition)).then_some(true)
    }

    /// The table's verdict, when the model can tell.
    pub fn audit_verdict(&self) -> Option<bool> {
        if self.rows.keys().any(|id| id.1 == FOREIGN_PARTITION) {
            Some(false)
        } else {
            self.deleted_from.is_empty().then_some(true)
        }
    }

    pub fn name_of(&self, kind: Kind) -> Option<&str> {
        self.columns.iter().find(|(_, k)| *k == kind).map(|(n, _)| n.as_str())
    }

    pub fn ids(&self) -> Vec<i64> {
        self.rows.values().filter_map(|r| r.get("id").and_then(Value::as_i64)).collect()
    }

    pub fn rename(&mut self, from: &str, to: &str) {
        for row in self.rows.values_mut() {
            if let Some(v) = row.remove(from) {
                row.insert(to.to_string(), v);
            }
        }
        self.columns.iter_mut().filter(|(n, _)| n == from).for_each(|(n, _)| *n = to.to_string());
    }

    pub fn drop_column(&mut self, column: &str) {
        for row in self.rows.values_mut() {
            row.remove(column);
        }
        self.columns.retain(|(n, _)| n != column);
    }

    pub fn add_column(&mut self, name: &str) {
        self.columns.push((name.to_string(), Kind::Note));
    }

    /// The current snapshot is `snapshot` now: a new one holds the rows as they are.
    pub fn observe_snapshot(&mut self, snapshot: Option<String>) {
        if snapshot != self.snapshot {
            self.snapshot = snapshot;
            self.snapshot_rows = self.rows.clone();
        }
    }
}

/// The differences between the rows expected and those read (a row read twice is one).
pub fn diff(expected: &Rows, read: &[(RowId, Row)]) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen: BTreeMap<RowId, usize> = BTreeMap::new();
    for (id, row) in read {
        *seen.entry(*id).or_default() += 1;
        match expected.get(id) {
            None => out.push(format!("unexpected {id:?}: {}", show(row))),
            Some(want) if want != row => out.push(format!("{id:?}: read {} expected {}", show(row), show(want))),
            Some(_) => {}
        }
    }
    out.extend(seen.iter().filter(|(_, n)| **n > 1).map(|(id, n)| format!("{id:?} read {n} times")));
    out.extend(
        expected.iter().filter(|(id, _)| !seen.contains_key(id)).map(|(id, r)| format!("missing {id:?}: {}", show(r))),
    );
    out
}

/// Whether a row's entry is `_kafka` metadata (`__key`, `__ts`, …), not a column.
fn is_metadata(name: &str) -> bool {
    name.starts_with("__")
}

fn show(row: &Row) -> String {
    serde_json::to_string(row).unwrap_or_default()
}
