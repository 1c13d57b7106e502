//! The model-based lifecycle test (issue 30): random sequences of operations against one
//! local warehouse — Floe's runs (`floe local run`'s core, [`floe_cli::local::run_local_on`]),
//! another engine (PyIceberg through its SqlCatalog on the same catalog.db), compaction
//! and maintenance on a clock moved forward, runs killed and run again — and after every
//! step the oracle: what PyIceberg reads from the table (every column, and every `_kafka`
//! field), its refs and its dead-letter table must equal the model ([`model`]), so must
//! the offsets Floe committed (`floe.offsets.*`, per incarnation of the topic) and the
//! verdict of `floe local audit` (where the model can tell it), every Floe snapshot must
//! be stamped after every earlier one, every file a retained snapshot references must
//! exist, and `floe local status` must show no problem. Where another engine's equality
//! deletes are live, the reader is the test's own (tests/py/lifecycle_engine.py
//! `spec_read`: position and equality deletes applied by sequence number and partition,
//! as the Iceberg spec says), as PyIceberg 0.12 reads none.
//!
//! Each seed's topic has a `transaction_timeout` of its own (15 min, 1 h or 4 h: seed
//! modulo 3, set per topic in floe.toml), and even seeds' topic has `LogAppendTime`.
//! Seeds 1 and 3 modulo 4 partition the table right after Floe's first run. Segments are
//! laid out as Kafka's `LocalTieredStorage` uploads them, the path carrying the topic id
//! (so that a re-created topic is a new log), except for seeds ≡ 0 modulo 4: a broker's
//! log dir, without ids (no re-creation there).
//!
//! Seeds ≡ 2 modulo 4 are an upsert topic's (`mode = "upsert"`, on the message key): a few
//! keys a partition written again and again, some records tombstones, judged against the
//! model's one row per key (model.rs); its topic is never re-created, which suspends an
//! upsert table (its offsets restart). Seeds ≡ 2 modulo 8 make it a format v3 table
//! (deletion vectors, applied by the oracle's spec reader), with Floe's own families and
//! another engine's deletion vectors only ([`ops::NOT_ON_V3`] left out): PyIceberg 0.12
//! writes no v3 metadata.
//!
//! Bad records: one outside transactions counts when its segment is committed; one
//! inside counts only if its transaction commits, as it was written (mode `dlq`: a dead
//! letter; `suspend`: the table suspended once the commit is in). Each run expects as
//! many suspensions as the model says (before any commit, after the commit), resumes
//! the table after each and runs again in `skip` mode.
//! Cases random sequences reach too seldom are written by hand in [`scenarios`], run by
//! the same machinery and judged by the same oracle.
//!
//! ```text
//!  seed ─▶ Rng ─▶ ops::next(model) ─▶ Step ─▶ run (Floe in process, or a child killed
//!                                             first; PyIceberg: lifecycle_engine.py)
//!                                          ─▶ model updated ─▶ check (read, offsets, audit,
//!                                                              refs, files, status)
//! ```
//!
//! Run by default: `FLOE_LIFECYCLE_SEEDS` sequences (default 8) of `FLOE_LIFECYCLE_STEPS`
//! steps (default 25). `FLOE_LIFECYCLE_SEED=n` runs seed n alone; `FLOE_LIFECYCLE_LOGS=1`
//! prints a failing seed's Kafka logs; `FLOE_LIFECYCLE_GRACE=30d` sets `orphan_grace`
//! (default 1h), keeping the sweep away. Families of operations are switched with
//! `FLOE_LIFECYCLE_OPS` / `FLOE_LIFECYCLE_SKIP` ([`ops`]). A failing seed prints its steps
//! and the differences; pin it with [`run_seed`] in a `#[test]`. Seeds run on a thread
//! of [`STACK`] bytes of stack with a runtime of their own: a Floe run's futures nest
//! deep, and a test thread's 2 MiB overflow (SIGABRT, no report).
//!
//! Snapshots are stamped on the wall clock (iceberg-rust checks new metadata against it),
//! except a `clock` run's, whose commits are days ahead ([`floe_cli::local::run_local_at`]);
//! only maintenance runs on the moved clock, so expiry is driven by the table properties
//! the `expire` step sets. The other engine stamps its commits after the table's latest
//! time, as Java's writers must (PyIceberg would write a snapshot log out of order after a
//! clock ahead, which iceberg-rust refuses to read).

mod model;
mod ops;
mod scenarios;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use floe_core::config::FloeConfig;
use floe_core::lock::Clock;
use serde_json::{Value, json};

use crate::support::JsonLines;
use model::{BadRecords, Log, LogId, RowId, Rows, Table};
use ops::{Rng, Scene, Step};

const TOPIC: &str = "events";
const TABLE: &str = "kafka.events";
const DEAD_LETTERS: &str = "kafka.events_dlq";
const MINUTE_MS: i64 = 60 * 1000;
const DAY_MS: i64 = 24 * 60 * MINUTE_MS;
/// The environment variable a killed child step reads its step from.
const CHILD: &str = "FLOE_LIFECYCLE_CHILD";

/// One sequence: its warehouse, the other engine, the Kafka logs, the model, the clock.
struct Sequence {
    dir: tempfile::TempDir,
    warehouse: PathBuf,
    engine: JsonLines,
    seed: u64,
    rng: Rng,
    /// Every incarnation's logs.
    logs: Vec<Log>,
    evolved: bool,
    table: Table,
    families: BTreeSet<&'static str>,
    /// The maintenance clock: the wall clock plus this, so that every file and snapshot
    /// looks this much older to compaction's window and the sweep's grace.
    by_ms: i64,
    steps: Vec<String>,
}

impl Sequence {
    fn new(seed: u64) -> Sequence {
        let dir = tempfile::tempdir().unwrap();
        let warehouse = dir.path().join("warehouse");
        std::fs::create_dir_all(&warehouse).unwrap();
        let warehouse = warehouse.canonicalize().unwrap();
        let engine = JsonLines::start("lifecycle_engine.py", &[&warehouse.join("catalog.db"), &warehouse]);
        // Partition 1's log starts past 0, as after retention.
        let mut families = ops::families();
        if v3(seed) {
            // PyIceberg 0.12 writes no format v3 metadata: no other engine on these.
            families.retain(|f| !ops::NOT_ON_V3.contains(f));
        }
        let mut logs = vec![Log::new(0, 0), Log::new(1, 5000)];
        let timeout_ms = [15, 60, 240][seed as usize % 3] * MINUTE_MS;
        for log in &mut logs {
            log.long_values = families.contains("long");
            log.log_append = seed.is_multiple_of(2);
            log.timeout_ms = timeout_ms;
            // Laid out as tiered storage uploads them (the path carries the topic id).
            log.topic_id = (families.contains("recreate") && !seed.is_multiple_of(4)).then(|| model::topic_id(seed, 0));
            log.upsert = upsert(seed);
        }
        let mut table = Table::default();
        table.upsert = upsert(seed);
        Sequence {
            dir,
            warehouse,
            engine,
            seed,
            rng: Rng::new(seed),
            logs,
            evolved: false,
            table,
            families,
            by_ms: 0,
            steps: Vec::new(),
        }
    }

    fn clock(&self) -> Clock {
        Clock::Shifted { by_ms: self.by_ms }
    }

    fn call(&mut self, op: &str, mut request: Value) -> Result<Value, String> {
        request["op"] = json!(op);
        self.engine.call(&request).map_err(|e| format!("PyIceberg {op}: {e}"))
    }

    /// Runs `steps` steps, checking the oracle after each; the first difference ends it.
    async fn run(&mut self, steps: usize) -> Result<(), String> {
        for i in 0..steps {
            // Time passes between steps.
            self.by_ms += self.rng.range(1, 10) as i64 * MINUTE_MS;
            let columns = self.columns()?;
            let scene =
                Scene { seed: self.seed, table: &self.table, columns: &columns, families: &self.families, counter: i };
            let step = ops::next(&mut self.rng, &mut self.logs, &mut self.evolved, &scene);
            self.steps.push(step.to_string());
            self.apply(&step, i).await.map_err(|e| format!("the step failed: {e}"))?;
            self.check().await?;
        }
        Ok(())
    }

    /// Runs hand-made `steps` (a scenario's), checking the oracle after each.
    async fn play(&mut self, steps: Vec<Step>) -> Result<(), String> {
        for (i, step) in steps.into_iter().enumerate() {
            self.by_ms += MINUTE_MS;
            self.steps.push(step.to_string());
            self.apply(&step, i).await.map_err(|e| format!("step {i} ({step}) failed: {e}"))?;
            self.check().await.map_err(|e| format!("after step {i} ({step}): {e}"))?;
        }
        Ok(())
    }

    /// The table's top-level columns as the reader sees them (none before it exists).
    fn columns(&mut self) -> Result<Vec<String>, String> {
        if !self.table.exists {
            return Ok(Vec::new());
        }
        let columns = self.call("columns", json!({"table": TABLE}))?;
        Ok(serde_json::from_value(columns).unwrap())
    }

    async fn apply(&mut self, step: &Step, i: usize) -> Result<(), String> {
        let table = json!(TABLE);
        match step {
            Step::Floe { segments, mode, kill_after_ms, ahead_days, .. } => {
                self.floe_run(segments, *mode, *kill_after_ms, *ahead_days as i64 * DAY_MS, i).await?
            }
            // The logs are the new incarnation's already; Floe sees it in its next segments.
            Step::Recreate { .. } => {}
            Step::Append { rows } => {
                let columns = self.columns()?;
                let rows = self.table.foreign_rows(*rows, floe_core::lock::now_ms(), &columns);
                self.call("append", json!({"table": table, "rows": rows}))?;
            }
            Step::Delete { how, lo, hi, every } => {
                let answer = self.call(how, json!({"table": table, "lo": lo, "hi": hi, "every": every}));
                if self.refused(answer)? {
                    return Ok(());
                }
                self.table.delete(*lo, *hi, *every);
            }
            Step::AddColumn { name } => {
                self.call("add_column", json!({"table": table, "name": name}))?;
                self.table.add_column(name);
            }
            Step::Move { column, before } => {
                self.call("move", json!({"table": table, "column": column, "before": before}))?;
            }
            Step::Rename { from, to } => {
                self.call("rename", json!({"table": table, "from": from, "to": to}))?;
                self.table.rename(from, to);
            }
            Step::Drop { column } => {
                self.call("drop", json!({"table": table, "column": column}))?;
                self.table.drop_column(column);
            }
            Step::Spec { source, transform, name } => {
                self.call("spec", json!({"table": table, "source": source, "transform": transform, "name": name}))?;
                self.table.specs.insert(format!("{transform}({source})"));
            }
            Step::Tag { name } | Step::Branch { name } => {
                let op = if matches!(step, Step::Tag { .. }) { "tag" } else { "branch" };
                if self.table.snapshot.is_some() {
                    self.call(op, json!({"table": table, "name": name}))?;
                    self.table.refs.insert(name.clone(), self.table.snapshot_rows.clone());
                }
            }
            Step::Compact { target_mib, window_min, kill_after_ms } => {
                self.by_ms += (*window_min as i64 + 1) * MINUTE_MS;
                let config = self.config(i, BadRecords::Skip, *target_mib, *window_min);
                self.maintain(&config, *kill_after_ms).await?;
            }
            Step::Expire { advance_ms, max_age_ms, keep } => {
                let properties = json!({"history.expire.max-snapshot-age-ms": max_age_ms.to_string(),
                    "history.expire.min-snapshots-to-keep": keep.to_string()});
                // A v3 table keeps the default policy (PyIceberg writes no v3 metadata).
                if !v3(self.seed) {
                    self.call("properties", json!({"table": table, "set": properties}))?;
                }
                self.by_ms += advance_ms;
                let config = self.config(i, BadRecords::Skip, 16, 15);
                self.maintain(&config, None).await?;
            }
        }
        Ok(())
    }

    /// Whether PyIceberg refused a write for a limit of its own — a partition folder name
    /// over 255 bytes (`long` values), files that equality deletes apply to: nothing was
    /// committed, the step is noted so.
    fn refused(&mut self, answer: Result<Value, String>) -> Result<bool, String> {
        let why = match answer {
            Err(e) if e.contains("[Errno 36]") => "a partition folder name too long".to_string(),
            Ok(Value::Object(o)) if o.contains_key("refused") => o["refused"].as_str().unwrap_or_default().to_string(),
            answer => return answer.map(|_| false),
        };
        if let Some(last) = self.steps.last_mut() {
            last.push_str(&format!(" [PyIceberg refused: {why}]"));
        }
        Ok(true)
    }

    /// A `floe local run` on the step's segments, its commits' clock `ahead_ms` ahead; a
    /// table suspended by a bad record (before any commit, or after the commit of a
    /// transaction holding one) is resumed and run again in `skip` mode.
    async fn floe_run(
        &mut self,
        segments: &[(LogId, (i64, i64))],
        mode: BadRecords,
        kill_after_ms: Option<u64>,
        ahead_ms: i64,
        i: usize,
    ) -> Result<(), String> {
        let input = self.dir.path().join(format!("input-{i}"));
        for (id, segment) in segments {
            let log = self.logs.iter().find(|l| l.id() == *id).expect("a log");
            let path = input.join(segment_path(log, *segment));
            let batches = log.batches(*segment);
            self.call("segment", json!({"path": path, "batches": batches}))?;
        }
        std::fs::create_dir_all(&input).unwrap();
        let (before, resolved) = self.table.suspensions(&self.logs, segments, mode);
        let expected = usize::from(before) + usize::from(resolved.suspends);
        let config = self.config(i, mode, 16, 15);
        if let Some(ms) = kill_after_ms {
            self.killed(json!({"run": input, "config": config, "by_ms": self.by_ms, "ahead_ms": ahead_ms}), ms);
        }
        let mut report = self.floe(&input, &config, ahead_ms).await?;
        let mut suspensions = 0;
        loop {
            let status = floe_cli::local::status(&self.warehouse).await.map_err(|e| format!("status: {e:#}"))?;
            if status.iter().find(|t| t.table == TABLE).and_then(|t| t.suspended.as_ref()).is_none() {
                break;
            }
            suspensions += 1;
            if suspensions > expected {
                break;
            }
            floe_cli::local::resume(&self.warehouse, TABLE).await.map_err(|e| format!("resume: {e:#}"))?;
            let config = self.config(i, BadRecords::Skip, 16, 15);
            report = self.floe(&input, &config, ahead_ms).await?;
        }
        if suspensions != expected {
            return Err(format!(
                "the table was suspended {suspensions} time(s), expected {expected} ({:?})",
                report.failed
            ));
        }
        if !report.failed.is_empty() {
            return Err(format!("the run failed: {:?}", report.failed));
        }
        self.table.commit_all(&self.logs, segments, if before { BadRecords::Skip } else { mode });
        Ok(())
    }

    async fn floe(&self, input: &Path, config: &Path, ahead_ms: i64) -> Result<floe_cli::local::LocalReport, String> {
        let config = FloeConfig::from_file(config).map_err(|e| e.to_string())?;
        let commits = Clock::Shifted { by_ms: ahead_ms };
        floe_cli::local::run_local_at(input, &self.warehouse, config, self.clock(), commits)
            .await
            .map_err(|e| format!("floe local run: {e:#}"))
    }

    /// `floe local compact` (compaction, expiry, sweep) on the test's clock.
    async fn maintain(&mut self, config: &Path, kill_after_ms: Option<u64>) -> Result<(), String> {
        if !self.table.exists {
            return Ok(());
        }
        if let Some(ms) = kill_after_ms {
            self.killed(json!({"compact": true, "config": config, "by_ms": self.by_ms}), ms);
        }
        let config = FloeConfig::from_file(config).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        let done = floe_cli::compact::compact(&self.warehouse, config, self.clock(), &mut out).await;
        done.map(drop).map_err(|e| format!("floe local compact: {e:#}\n{}", String::from_utf8_lossy(&out)))
    }

    /// The floe.toml of step `i`.
    fn config(&self, i: usize, mode: BadRecords, target_mib: u64, window_min: u64) -> PathBuf {
        let path = self.dir.path().join(format!("floe-{i}.toml"));
        let mut text = format!(
            "[defaults]\nenabled = true\nvalue_format = \"json\"\nbad_records = \"{}\"\n\
             compaction_target_size = \"{target_mib}MiB\"\ncompaction_window = \"{window_min}m\"\n\
             orphan_grace = \"{}\"\n",
            mode.name(),
            std::env::var("FLOE_LIFECYCLE_GRACE").unwrap_or_else(|_| "1h".into()),
        );
        // The topic's transaction timeout (the default's, 15 min, left unset) and mode.
        text.push_str(&format!("\n[[topics]]\ntopic = \"{TOPIC}\"\n"));
        let timeout_min = self.logs[0].timeout_ms / MINUTE_MS;
        if timeout_min != 15 {
            text.push_str(&format!("transaction_timeout = \"{timeout_min}m\"\n"));
        }
        if self.table.upsert {
            text.push_str("mode = \"upsert\"\n");
        }
        if v3(self.seed) {
            text.push_str("format_version = 3\n");
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Runs `step` in a child process (this test binary, [`child`]) and kills it with
    /// SIGKILL after `after_ms`, unless it ended first; notes which in the step list.
    fn killed(&mut self, step: Value, after_ms: u64) {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["lifecycle::child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
            .env(CHILD, json!({"warehouse": self.warehouse, "step": step}).to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(after_ms));
        let ended = child.try_wait().unwrap().is_some();
        let _ = child.kill();
        child.wait().unwrap();
        if ended && let Some(last) = self.steps.last_mut() {
            last.push_str(" [the child ended before the kill]");
        }
    }

    /// The oracle: the table, each ref and the dead-letter table as the model says; every
    /// file of every retained snapshot there; no problem in `floe local status`.
    async fn check(&mut self) -> Result<(), String> {
        if !self.table.exists {
            return Ok(());
        }
        let read = self.call("read", json!({"table": TABLE, "ref": null}))?;
        if read.is_null() {
            return Err("the table does not exist".into());
        }
        compare("the table", &self.table.rows, &read)?;
        let offsets: BTreeMap<String, String> = serde_json::from_value(read["offsets"].clone()).unwrap_or_default();
        if offsets != self.table.offsets(TOPIC) {
            return Err(format!("committed offsets: read {offsets:?}, expected {:?}", self.table.offsets(TOPIC)));
        }
        let dead = self.call("read", json!({"table": DEAD_LETTERS, "ref": null}))?;
        let dead: BTreeSet<RowId> = rows(&dead).into_iter().map(|(id, _)| id).collect();
        if dead != self.table.dead {
            return Err(format!("dead letters: read {dead:?}, expected {:?}", self.table.dead));
        }
        self.audit().await?;
        self.times()?;
        self.table.observe_snapshot(read["snapshot"].as_str().map(str::to_string));
        let refs: BTreeSet<String> =
            self.call("refs", json!({"table": TABLE}))?.as_object().unwrap().keys().cloned().collect();
        let expected: BTreeSet<String> = self.table.refs.keys().cloned().chain(["main".to_string()]).collect();
        if refs != expected {
            return Err(format!("refs: read {refs:?}, expected {expected:?}"));
        }
        for (name, rows) in &self.table.refs.clone() {
            let read = self.call("read", json!({"table": TABLE, "ref": name}))?;
            compare(&format!("ref {name}"), rows, &read)?;
        }
        for table in [TABLE, DEAD_LETTERS] {
            if table == DEAD_LETTERS && self.table.dead.is_empty() {
                continue;
            }
            let missing = self.call("files", json!({"table": table}))?;
            if missing.as_array().is_some_and(|m| !m.is_empty()) {
                return Err(format!("{table}: files of retained snapshots are missing: {missing:#}"));
            }
        }
        for t in floe_cli::local::status(&self.warehouse).await.map_err(|e| format!("status: {e:#}"))? {
            if t.problem.is_some() || t.suspended.is_some() {
                return Err(format!("floe local status: {}: {:?} {:?}", t.table, t.problem, t.suspended));
            }
        }
        Ok(())
    }
}

impl Sequence {
    /// Snapshot times never go back at Floe's commits, whatever a clock said before
    /// (another engine's commits are stamped on its own clock).
    fn times(&mut self) -> Result<(), String> {
        let times: Vec<(i64, bool)> = serde_json::from_value(self.call("times", json!({"table": TABLE}))?).unwrap();
        let mut latest = i64::MIN;
        for &(ms, floe) in &times {
            if floe && ms <= latest {
                return Err(format!("a Floe snapshot stamped {ms}, not after an earlier one's {latest}: {times:?}"));
            }
            latest = latest.max(ms);
        }
        Ok(())
    }

    /// `floe local audit`'s verdict, per Kafka partition and for the table, against the
    /// model's where it can tell ([`Table::audit_expected`]).
    async fn audit(&self) -> Result<(), String> {
        let report = floe_cli::audit::local(&self.warehouse, TABLE).await.map_err(|e| format!("audit: {e:#}"))?;
        let show = || serde_json::to_string(&report).unwrap_or_default();
        for p in &report.partitions {
            if self.table.audit_expected(p.partition).is_some_and(|want| want != p.exactly_once) {
                return Err(format!(
                    "audit: partition {} exactly once: {}, expected the opposite\n{}",
                    p.partition,
                    p.exactly_once,
                    show()
                ));
            }
        }
        if self.table.audit_verdict().is_some_and(|want| want != report.exactly_once) {
            return Err(format!("audit: exactly once: {}, expected the opposite\n{}", report.exactly_once, show()));
        }
        Ok(())
    }
}

/// Whether seed `seed`'s topic is an upsert topic.
fn upsert(seed: u64) -> bool {
    seed % 4 == 2
}

/// Whether seed `seed`'s table is of format v3 (an upsert topic's: deletion vectors).
fn v3(seed: u64) -> bool {
    seed % 8 == 2
}

/// The rows of a read answer: (incarnation, partition, offset) and the row.
fn rows(read: &Value) -> Vec<(RowId, model::Row)> {
    let Some(rows) = read.get("rows").and_then(Value::as_array) else { return Vec::new() };
    rows.iter()
        .map(|r| {
            let row: model::Row = serde_json::from_value(r[2].clone()).unwrap();
            let id = (model::incarnation_of(&row), r[0].as_i64().unwrap_or(-1) as i32, r[1].as_i64().unwrap_or(-1));
            (id, row)
        })
        .collect()
}

/// Where a segment of `log` lies in a run's input: a broker's log dir, or as Kafka's
/// `LocalTieredStorage` uploads it when the log has a topic id (its segment id: 22 digits
/// of the incarnation, partition and offsets).
fn segment_path(log: &Log, (first, last): (i64, i64)) -> String {
    match &log.topic_id {
        None => format!("{TOPIC}-{}/{first:020}.log", log.partition),
        Some(id) => format!(
            "{TOPIC}-{}-{id}/{first:020}-{:02}{:02}{first:09}{last:09}.log",
            log.partition, log.incarnation, log.partition
        ),
    }
}

fn compare(what: &str, expected: &Rows, read: &Value) -> Result<(), String> {
    if read.get("missing_ref").is_some() {
        return Err(format!("{what}: the ref is gone"));
    }
    let differences = model::diff(expected, &rows(read));
    if differences.is_empty() {
        return Ok(());
    }
    let shown: Vec<&String> = differences.iter().take(12).collect();
    Err(format!(
        "{what} (snapshot {}): {} difference(s) between the reader and the model, the first:\n  {}",
        read["snapshot"],
        differences.len(),
        shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  ")
    ))
}

/// The stack of the thread the seeds run on.
const STACK: usize = 256 << 20;

/// Runs seed `seed` for `steps` steps; on a difference, fails with the seed, the steps
/// so far and the differences.
pub fn run_seed(seed: u64, steps: usize) {
    if let Err(report) = try_seed(seed, steps) {
        panic!("{report}");
    }
}

/// Runs seed `seed` on a thread of its own ([`STACK`]).
fn try_seed(seed: u64, steps: usize) -> Result<(), String> {
    on_own_thread(format!("lifecycle-{seed}"), move || Box::pin(seed_on_runtime(seed, steps)))
}

type Job = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>>>>;

/// Runs the future `job` makes on a thread of [`STACK`] bytes, with a runtime of its own.
fn on_own_thread(name: String, job: impl FnOnce() -> Job + Send + 'static) -> Result<(), String> {
    let thread = std::thread::Builder::new().name(name).stack_size(STACK).spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        runtime.block_on(job())
    });
    match thread.expect("a lifecycle thread").join() {
        Ok(result) => result,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

async fn seed_on_runtime(seed: u64, steps: usize) -> Result<(), String> {
    let mut sequence = Sequence::new(seed);
    let result = sequence.run(steps).await;
    if result.is_err() && std::env::var_os("FLOE_LIFECYCLE_LOGS").is_some() {
        for log in &sequence.logs {
            eprintln!("partition {}: segments {:?}", log.partition, log.segments);
            for (i, e) in log.entries.iter().enumerate() {
                eprintln!("  {}: {e:?}", log.start + i as i64);
            }
        }
    }
    result.map_err(|e| {
        let steps: Vec<String> = sequence.steps.iter().enumerate().map(|(i, s)| format!("  {i:>3}. {s}")).collect();
        format!(
            "lifecycle seed {seed} failed at step {} (reproduce: FLOE_LIFECYCLE_SEED={seed} FLOE_LIFECYCLE_STEPS={steps_n} \
             cargo test -p floe-tests --test integration lifecycle -- --nocapture)\nsteps:\n{}\n{e}",
            sequence.steps.len().saturating_sub(1),
            steps.join("\n"),
            steps_n = sequence.steps.len(),
        )
    })
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{name}={v}: not a number")))
}

#[test]
fn random_lifecycles_read_as_the_model_says() {
    let steps = env_number("FLOE_LIFECYCLE_STEPS", 25) as usize;
    let seeds: Vec<u64> = match std::env::var("FLOE_LIFECYCLE_SEED") {
        Ok(seed) => vec![seed.parse().expect("FLOE_LIFECYCLE_SEED: a number")],
        Err(_) => (1..=env_number("FLOE_LIFECYCLE_SEEDS", 8)).collect(),
    };
    if let [seed] = seeds[..] {
        return run_seed(seed, steps);
    }
    let mut failed = Vec::new();
    for &seed in &seeds {
        if let Err(report) = try_seed(seed, steps) {
            eprintln!("{report}\n");
            failed.push(seed);
        }
    }
    assert!(failed.is_empty(), "{} of {} seed(s) failed: {failed:?} (each printed above)", failed.len(), seeds.len());
}

/// A killed step's child process: runs the step the parent put in [`CHILD`] (a Floe run
/// or a compaction) until the parent kills it.
#[tokio::test]
#[ignore = "the lifecycle test's child process, run (and killed) by it"]
async fn child() {
    let Ok(spec) = std::env::var(CHILD) else { return };
    let spec: Value = serde_json::from_str(&spec).unwrap();
    let warehouse = PathBuf::from(spec["warehouse"].as_str().unwrap());
    let step = &spec["step"];
    let config = FloeConfig::from_file(Path::new(step["config"].as_str().unwrap())).unwrap();
    let clock = Clock::Shifted { by_ms: step["by_ms"].as_i64().unwrap() };
    if let Some(input) = step["run"].as_str() {
        let commits = Clock::Shifted { by_ms: step["ahead_ms"].as_i64().unwrap() };
        let _ = floe_cli::local::run_local_at(Path::new(input), &warehouse, config, clock, commits).await;
    } else {
        let _ = floe_cli::compact::compact(&warehouse, config, clock, Vec::new()).await;
    }
}
