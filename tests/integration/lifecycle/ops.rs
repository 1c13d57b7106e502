//! The operations of a sequence: which families are switched on, a seeded choice of
//! the next step from the state of the model, and each step's description.
//!
//! A family is a kind of operation, or a feature of Floe's runs, that can be switched
//! off (`FLOE_LIFECYCLE_SKIP=drop,spec`) or chosen alone (`FLOE_LIFECYCLE_OPS=floe,compact`):
//!
//! | family | what |
//! |---|---|
//! | `floe` | a `floe local run` on new segments (always on) |
//! | `txn`, `abort` | transactions open across segments, their markers minutes to hours after their records, producers fenced (epoch bumped); aborted ones |
//! | `dup`, `reorder` | segments delivered again (sometimes cut at other offsets); later segments first |
//! | `evolve`, `bad` | the topic gains a top-level and a nested field; bad records (skip, dlq, suspend then resume) |
//! | `bad_txn` | bad records inside transactions: counted only once the transaction commits (a dead letter if written in `dlq` mode, the table suspended after the commit if in `suspend` mode), never if it aborts |
//! | `long` | a `region` over 255 bytes once escaped, in one record of 37 (the table may be partitioned by it: `spec`) |
//! | `append`, `delete`, `pos_delete`, `eq_delete` | another engine's append; copy-on-write deletes; position deletes one file per partition (as Spark writes them) or one per data file (as Trino and Athena) and equality deletes on `id` one file per partition (as Flink; global when unpartitioned), read by the oracle's own reader by the spec's rules where PyIceberg cannot (tests/py/lifecycle_engine.py `spec_read`) |
//! | `add_column`, `move`, `rename`, `drop`, `spec` | another engine's schema and partition-spec changes (seeds 1 and 3 modulo 4 partition the table right after Floe's first run: by `_kafka.partition`, by `region`) |
//! | `tag`, `branch` | refs to the current snapshot |
//! | `compact` | compaction at a random target (1–16 MiB) once its window has passed |
//! | `expire` | the clock past `orphan_grace` (or the snapshots' age), then maintenance: expiry and sweep |
//! | `kill` | a run or a compaction killed (SIGKILL) at a random moment, then run again |
//! | `recreate` | (not an upsert topic's) the topic deleted and created again: a new topic id (segments laid out as `LocalTieredStorage` uploads them, the path carrying it: every seed but those ≡ 0 modulo 4), offsets from 0; the old incarnation's last segments may still come |
//! | `clock` | a run whose commits' clock is days ahead; the next ones on the right time again (snapshot times never go back, commits go on) |

use std::collections::BTreeSet;

use super::model::{BadRecords, Log, LogId, Table};

/// Every family; `pos_delete` and `eq_delete` need tests/py/foreign_delete.py (issue 30's
/// merge-on-read deletes).
pub const FAMILIES: [&str; 25] = [
    "floe",
    "txn",
    "abort",
    "dup",
    "reorder",
    "evolve",
    "bad",
    "bad_txn",
    "long",
    "append",
    "delete",
    "pos_delete",
    "eq_delete",
    "add_column",
    "move",
    "rename",
    "drop",
    "spec",
    "tag",
    "branch",
    "compact",
    "expire",
    "kill",
    "recreate",
    "clock",
];

/// The families left out of a format v3 table's sequence: another engine's writes, which
/// PyIceberg 0.12 would have to write v3 metadata for (it writes none). Its deletion
/// vectors stay (`pos_delete`: tests/py/foreign_vector.py writes them).
pub const NOT_ON_V3: [&str; 10] =
    ["append", "delete", "eq_delete", "add_column", "move", "rename", "drop", "spec", "tag", "branch"];

/// The families switched on: `FLOE_LIFECYCLE_OPS` (default: all), less `FLOE_LIFECYCLE_SKIP`.
pub fn families() -> BTreeSet<&'static str> {
    let list = |var: &str| std::env::var(var).ok().map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    let chosen: Option<Vec<String>> = list("FLOE_LIFECYCLE_OPS");
    let skipped: Vec<String> = list("FLOE_LIFECYCLE_SKIP").unwrap_or_default();
    for name in chosen.iter().flatten().chain(&skipped) {
        assert!(FAMILIES.contains(&name.as_str()), "unknown lifecycle family {name:?}; families: {FAMILIES:?}");
    }
    FAMILIES
        .into_iter()
        .filter(|f| match &chosen {
            Some(chosen) => *f == "floe" || chosen.iter().any(|n| n == f),
            None => true,
        })
        .filter(|f| !skipped.iter().any(|n| n == f))
        .collect()
}

/// A seeded random source (SplitMix64).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x05ee_d1ce_f10e)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.range(0, 100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len() as u64) as usize]
    }
}

/// One step of a sequence.
#[derive(Clone, Debug)]
pub enum Step {
    /// `floe local run` on these segments (partition, offsets), in this bad-records mode;
    /// first killed after `kill_after_ms` when set.
    /// `evolves`: the records produced from this step on carry the fields the topic gained.
    /// `ahead_days`: its commits' clock that many days ahead (0: the wall clock).
    Floe {
        segments: Vec<(LogId, (i64, i64))>,
        mode: BadRecords,
        kill_after_ms: Option<u64>,
        evolves: bool,
        ahead_days: u64,
    },
    /// The topic deleted and created again: incarnation `incarnation` from here on.
    Recreate {
        incarnation: u32,
    },
    Append {
        rows: usize,
    },
    /// `how`: `delete` (copy-on-write), `pos_delete` or `eq_delete`, of the rows `lo <= id < hi`
    /// whose id is `lo` plus a multiple of `every`.
    Delete {
        how: &'static str,
        lo: i64,
        hi: i64,
        every: i64,
    },
    AddColumn {
        name: String,
    },
    Move {
        column: String,
        before: Option<String>,
    },
    Rename {
        from: String,
        to: String,
    },
    Drop {
        column: String,
    },
    Spec {
        source: String,
        transform: String,
        name: String,
    },
    Tag {
        name: String,
    },
    Branch {
        name: String,
    },
    /// The clock moved past the window, then `floe local compact` at this target.
    Compact {
        target_mib: u64,
        window_min: u64,
        kill_after_ms: Option<u64>,
    },
    /// Snapshots older than `max_age_ms` expire (`keep` at least) from the next commit on;
    /// the clock moved by `advance_ms`, then maintenance (sweep).
    Expire {
        advance_ms: i64,
        max_age_ms: i64,
        keep: u64,
    },
}

/// What the generator knows of the table beyond the model: its columns as the reader
/// sees them, and the names given so far.
pub struct Scene<'a> {
    pub seed: u64,
    pub table: &'a Table,
    pub columns: &'a [String],
    pub families: &'a BTreeSet<&'static str>,
    pub counter: usize,
}

const MINUTE_MS: i64 = 60 * 1000;
const HOUR_MS: i64 = 60 * MINUTE_MS;
const DAY_MS: i64 = 24 * HOUR_MS;

/// The next step: Floe's first run until the table exists, then a weighted choice among
/// the families on (one whose preconditions do not hold is passed over).
pub fn next(rng: &mut Rng, logs: &mut Vec<Log>, evolved: &mut bool, scene: &Scene) -> Step {
    let on = |f: &str| scene.families.contains(f);
    if !scene.table.exists {
        return floe(rng, logs, evolved, scene);
    }
    if let Some(step) = seed_spec(scene) {
        return step;
    }
    const WEIGHTS: [(&str, u64); 15] = [
        ("floe", 30),
        ("append", 8),
        ("delete", 6),
        ("pos_delete", 4),
        ("eq_delete", 4),
        ("add_column", 2),
        ("move", 4),
        ("rename", 3),
        ("drop", 2),
        ("spec", 2),
        ("tag", 3),
        ("branch", 2),
        ("compact", 8),
        ("expire", 5),
        ("recreate", 2),
    ];
    let weighted: Vec<(&'static str, u64)> = WEIGHTS.into_iter().filter(|(f, _)| on(f)).collect();
    let total: u64 = weighted.iter().map(|(_, w)| w).sum();
    loop {
        let mut roll = rng.range(0, total);
        let mut family = "floe";
        for (f, w) in &weighted {
            if roll < *w {
                family = f;
                break;
            }
            roll -= w;
        }
        if let Some(step) = of_family(family, rng, logs, evolved, scene) {
            return step;
        }
    }
}

/// Seeds 1 and 3 modulo 4: the table partitioned (by `_kafka.partition`, by `region`)
/// right after Floe's first run, so that deletes meet partitioned tables by default.
fn seed_spec(scene: &Scene) -> Option<Step> {
    let source = match scene.seed % 4 {
        1 => "_kafka.partition",
        3 => "region",
        _ => return None,
    };
    let exists = source.starts_with("_kafka.") || scene.columns.iter().any(|c| c == source);
    (scene.families.contains("spec") && scene.table.specs.is_empty() && exists).then(|| Step::Spec {
        source: source.into(),
        transform: "identity".into(),
        name: format!("spec{}", scene.counter),
    })
}

/// The incarnation produced to now: the latest.
fn current(logs: &[Log]) -> u32 {
    logs.iter().map(|l| l.incarnation).max().unwrap_or(0)
}

fn of_family(
    family: &'static str,
    rng: &mut Rng,
    logs: &mut Vec<Log>,
    evolved: &mut bool,
    scene: &Scene,
) -> Option<Step> {
    let kill = |rng: &mut Rng| (scene.families.contains("kill") && rng.chance(25)).then(|| rng.range(0, 400));
    let n = scene.counter;
    // Columns another engine may rename or drop: neither `id` (deletes filter on it),
    // `_kafka` (Floe's own) nor a partition source.
    let partitioned = |c: &str| scene.table.specs.iter().any(|s| s.ends_with(&format!("({c})")));
    let payload: Vec<&String> =
        scene.columns.iter().filter(|c| !matches!(c.as_str(), "id" | "_kafka") && !partitioned(c)).collect();
    Some(match family {
        "floe" => floe(rng, logs, evolved, scene),
        "append" => Step::Append { rows: rng.range(1, 20) as usize },
        "delete" | "pos_delete" | "eq_delete" => {
            let ids = scene.table.ids();
            if ids.is_empty() {
                return None;
            }
            let lo = *rng.pick(&ids);
            // Merge-on-read ones also every 7th id of a wide range: over several files of
            // a partition at once (one delete file naming them all).
            let wide = family != "delete" && rng.chance(50);
            let (every, span) = if wide { (7, rng.range(100, 2000)) } else { (1, rng.range(1, 40)) };
            Step::Delete { how: family, lo, hi: lo + span as i64, every }
        }
        "add_column" => Step::AddColumn { name: format!("note{n}") },
        "move" => {
            let column = rng.pick(scene.columns).clone();
            let others: Vec<&String> = scene.columns.iter().filter(|c| **c != column).collect();
            let before = (!others.is_empty() && rng.chance(70)).then(|| (*rng.pick(&others)).clone());
            Step::Move { column, before }
        }
        "rename" if !payload.is_empty() => {
            Step::Rename { from: (*rng.pick(&payload)).clone(), to: format!("renamed{n}") }
        }
        "drop" if !payload.is_empty() => Step::Drop { column: (*rng.pick(&payload)).clone() },
        "spec" => {
            // Transforms PyIceberg writes without pyiceberg-core (not bucket or truncate).
            let fields = [("_kafka.partition", "identity"), ("region", "identity")];
            // Of a column the table has now (another engine may have renamed or dropped `region`).
            let exists = |s: &str| s.starts_with("_kafka.") || scene.columns.iter().any(|c| c == s);
            let unused: Vec<_> =
                fields.iter().filter(|(s, t)| exists(s) && !scene.table.specs.contains(&format!("{t}({s})"))).collect();
            if unused.is_empty() {
                return None;
            }
            let (source, transform) = **rng.pick(&unused);
            Step::Spec { source: source.into(), transform: transform.into(), name: format!("spec{n}") }
        }
        // Only where the layout gives topic ids (without, a re-created topic is the same log).
        // Not an upsert topic's: its table suspends (its offsets would restart).
        "recreate" if logs.iter().all(|l| l.topic_id.is_some() && !l.upsert) => {
            let incarnation = current(logs) + 1;
            let id = super::model::topic_id(scene.seed, incarnation);
            let next: Vec<Log> =
                logs.iter_mut().filter(|l| l.incarnation + 1 == incarnation).map(|l| l.successor(id.clone())).collect();
            logs.extend(next);
            Step::Recreate { incarnation }
        }
        "tag" => Step::Tag { name: format!("tag{n}") },
        "branch" => Step::Branch { name: format!("branch{n}") },
        "compact" => {
            Step::Compact { target_mib: rng.range(1, 17), window_min: rng.range(1, 30), kill_after_ms: kill(rng) }
        }
        "expire" => {
            let advance_ms = *rng.pick(&[2 * HOUR_MS, DAY_MS, 4 * DAY_MS, 6 * DAY_MS]);
            let max_age_ms = *rng.pick(&[1, 60 * 1000, HOUR_MS]);
            Step::Expire { advance_ms, max_age_ms, keep: rng.range(1, 4) }
        }
        _ => return None,
    })
}

/// A Floe run: new records produced on each partition of the topic's latest incarnation
/// (transactions opened, ended, aborted; bad records; the topic evolved), cut into
/// segments, and some segments of any incarnation delivered: new ones, in order or not,
/// and again; its commits' clock days ahead now and then.
fn floe(rng: &mut Rng, logs: &mut [Log], evolved: &mut bool, scene: &Scene) -> Step {
    let on = |f: &str| scene.families.contains(f);
    let evolves = on("evolve") && !*evolved && scene.table.exists && rng.chance(15);
    *evolved |= evolves;
    let latest = current(logs);
    for log in logs.iter_mut().filter(|l| l.incarnation == latest) {
        for _ in 0..rng.range(1, 4) {
            produce(rng, log, *evolved, &on);
            // A segment rolls now and then: it may span hours of appends.
            if rng.chance(50) {
                log.cut();
            }
        }
    }
    let mut modes = vec![BadRecords::Skip];
    if on("bad") {
        modes.extend([BadRecords::Dlq, BadRecords::Suspend]);
    }
    let mode = *rng.pick(&modes);
    let mut segments = Vec::new();
    for log in logs.iter() {
        let new: Vec<(i64, i64)> = log.segments.iter().copied().filter(|s| scene.table.is_new(log, *s)).collect();
        // Out of order: any of the new segments; in order: the first few.
        let chosen: Vec<&(i64, i64)> = if on("reorder") {
            new.iter().filter(|_| rng.chance(70)).collect()
        } else {
            new.iter().take(rng.range(0, new.len() as u64 + 1) as usize).collect()
        };
        segments.extend(chosen.into_iter().map(|s| (log.id(), *s)));
        if on("dup") && rng.chance(30) && log.segments.len() > 1 {
            let k = rng.range(0, log.segments.len() as u64 - 1) as usize;
            let (a, b) = (log.segments[k], log.segments[k + 1]);
            // Again as it was, or re-cut: from inside one to the end of the next.
            let recut = rng.chance(50);
            let again = if recut { (rng.range(a.0 as u64, a.1 as u64 + 1) as i64, b.1) } else { a };
            if !segments.iter().any(|(l, s)| *l == log.id() && s.0 == again.0) {
                segments.push((log.id(), again));
            }
        }
    }
    // Not killed when its commit resolves a transaction's bad record: whether the kill
    // came between the commit and the suspension (or the dead letter's publication),
    // the model cannot tell.
    let resolves_bad = scene.table.suspensions(logs, &segments, mode).1.any();
    let kill_after_ms = (on("kill") && rng.chance(25)).then(|| rng.range(0, 400)).filter(|_| !resolves_bad);
    let ahead = on("clock") && !segments.is_empty() && rng.chance(12);
    let ahead_days = if ahead { *rng.pick(&[2, 9, 30]) } else { 0 };
    Step::Floe { segments, mode, kill_after_ms, evolves, ahead_days }
}

/// Producers writing transactions to one partition, at most.
const PRODUCERS: usize = 3;

/// Appends records to `log`, over minutes to hours of broker time (a transaction open
/// meanwhile past its timeout aborted then): plain ones (a bad one sometimes),
/// transactions' (a producer's next one, its records, its end; a producer fenced by a new
/// instance of it: its transaction aborted, its epoch bumped; an idle one restarted: its
/// epoch bumped).
fn produce(rng: &mut Rng, log: &mut Log, evolved: bool, on: &dyn Fn(&str) -> bool) {
    let minutes = (log.timeout_ms / MINUTE_MS / 4).max(2) as u64;
    // `n` records of producer `pid`'s transaction, a bad one among them sometimes.
    let transactional = |rng: &mut Rng, log: &mut Log, pid: i64, n: u64| {
        let bad_at = (on("bad_txn") && rng.chance(20)).then(|| rng.range(0, n) as usize);
        log.records(n as usize, Some(pid), evolved, bad_at);
    };
    let later = |rng: &mut Rng, log: &mut Log| {
        log.advance(rng.range(0, minutes) as i64 * MINUTE_MS + rng.range(0, 60_000) as i64);
    };
    later(rng, log);
    let n = rng.range(3, 12) as usize;
    let bad_at = (on("bad") && rng.chance(15)).then(|| rng.range(0, n as u64) as usize);
    log.records(n, None, evolved, bad_at);
    if on("txn") {
        for pid in log.open_transactions() {
            later(rng, log);
            if !log.open_transactions().contains(&pid) {
                continue; // its timeout passed meanwhile
            }
            match rng.range(0, 7) {
                0 | 1 => {
                    let n = rng.range(1, 5);
                    transactional(rng, log, pid, n);
                }
                2 | 3 => log.end(pid, !(on("abort") && rng.chance(30))),
                4 if rng.chance(40) => log.fence(pid, log.clock),
                _ => {}
            }
        }
        if rng.chance(60) {
            later(rng, log);
            let idle = log.idle_producers();
            let fresh = idle.len() + log.open_transactions().len() < PRODUCERS && (idle.is_empty() || rng.chance(40));
            let pid = if fresh { Some(log.new_pid()) } else { (!idle.is_empty()).then(|| *rng.pick(&idle)) };
            if let Some(pid) = pid {
                if !fresh && rng.chance(25) {
                    log.restart(pid);
                }
                let n = rng.range(1, 6);
                transactional(rng, log, pid, n);
            }
        }
        log.records(rng.range(0, 4) as usize, None, evolved, None);
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let kill = |k: &Option<u64>| k.map(|ms| format!(" (killed after {ms} ms first)")).unwrap_or_default();
        match self {
            Step::Floe { segments, mode, kill_after_ms, evolves, ahead_days } => {
                let incarnation = |i: &u32| if *i == 0 { String::new() } else { format!("~{i}") };
                let segments: Vec<String> =
                    segments.iter().map(|((i, p), (a, b))| format!("{p}{}:{a}-{b}", incarnation(i))).collect();
                let evolves = if *evolves { " (the topic gains `extra` and `meta.b` from here)" } else { "" };
                let ahead = if *ahead_days > 0 {
                    format!(" (its commits' clock {ahead_days} days ahead)")
                } else {
                    String::new()
                };
                write!(
                    f,
                    "floe run [{}] bad_records={}{}{evolves}{ahead}",
                    segments.join(" "),
                    mode.name(),
                    kill(kill_after_ms)
                )
            }
            Step::Recreate { incarnation } => {
                write!(
                    f,
                    "the topic deleted and created again (incarnation {incarnation}: a new topic id, offsets from 0)"
                )
            }
            Step::Append { rows } => write!(f, "foreign append of {rows} rows"),
            Step::Delete { how, lo, hi, every: 1 } => write!(f, "foreign {how} of {lo} <= id < {hi}"),
            Step::Delete { how, lo, hi, every } => write!(f, "foreign {how} of {lo} <= id < {hi}, every {every}th"),
            Step::AddColumn { name } => write!(f, "foreign add column {name}"),
            Step::Move { column, before: Some(b) } => write!(f, "foreign move {column} before {b}"),
            Step::Move { column, before: None } => write!(f, "foreign move {column} first"),
            Step::Rename { from, to } => write!(f, "foreign rename {from} to {to}"),
            Step::Drop { column } => write!(f, "foreign drop {column}"),
            Step::Spec { source, transform, .. } => write!(f, "foreign partition spec + {transform}({source})"),
            Step::Tag { name } => write!(f, "tag {name}"),
            Step::Branch { name } => write!(f, "branch {name}"),
            Step::Compact { target_mib, window_min, kill_after_ms } => {
                write!(f, "compact at {target_mib} MiB, window {window_min} min, clock past it{}", kill(kill_after_ms))
            }
            Step::Expire { advance_ms, max_age_ms, keep } => write!(
                f,
                "snapshots expire after {max_age_ms} ms (keep {keep}); clock + {} h, then maintenance and sweep",
                advance_ms / HOUR_MS
            ),
        }
    }
}
