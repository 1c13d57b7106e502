//! Leases and statuses in a SQLite table beside the local catalog (`floe local run`,
//! several processes on one machine).
//!
//! An owner made by [`process_owner`] names its host and process; a lease held by a
//! process of this host that no longer exists (killed during a commit, or its release
//! failed) is taken over at once rather than after its expiry. [`SqliteLocks::waiting`]
//! lets `acquire` wait a little, with backoff, for a live holder to finish.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::registry::{HeldTask, MaintenanceEvent, MaintenanceStatus, RegisteredTable, TableRegistry};
use super::{Clock, Holder, Lease, LockError, TableLocks};
use crate::vocabulary::TableName;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS floe_tables (
    table_name TEXT PRIMARY KEY,
    owner TEXT,
    expires_at_ms INTEGER NOT NULL DEFAULT 0,
    fencing INTEGER NOT NULL DEFAULT 0,
    suspended_reason TEXT,
    maintenance TEXT
);
CREATE TABLE IF NOT EXISTS floe_held_tasks (
    table_name TEXT NOT NULL,
    task_id TEXT NOT NULL,
    held_at_ms INTEGER NOT NULL,
    files TEXT NOT NULL,
    offsets TEXT,
    PRIMARY KEY (table_name, task_id)
)";

/// Columns added since the first release, for stores made before them.
const MIGRATIONS: [&str; 2] =
    ["ALTER TABLE floe_tables ADD COLUMN maintenance TEXT", "ALTER TABLE floe_held_tasks ADD COLUMN offsets TEXT"];

#[derive(Clone)]
pub struct SqliteLocks {
    connection: Arc<Mutex<Connection>>,
    clock: Clock,
    wait: Duration,
}

/// `<prefix>@<host>:<pid>`: an owner whose death [`SqliteLocks`] can see.
pub fn process_owner(prefix: &str) -> String {
    format!("{prefix}@{}:{}", hostname(), std::process::id())
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it
    // when the name fits (we cut at the first NUL or at the end either way).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Whether `owner` names a process of this host that no longer exists. Owners of other
/// hosts, or not made by [`process_owner`], are never taken for dead.
fn owner_is_dead(owner: &str) -> bool {
    let Some((_, at)) = owner.rsplit_once('@') else { return false };
    let Some((host, pid)) = at.rsplit_once(':') else { return false };
    let Ok(pid) = pid.parse::<libc::pid_t>() else { return false };
    if pid <= 0 || host != hostname() {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Whether the lease row keeps `owner` out now: unexpired, another's, and alive.
fn blocks(holder: Option<&str>, expires: i64, owner: &str, now: i64) -> bool {
    expires > now && holder.is_some_and(|h| h != owner && !owner_is_dead(h))
}

impl SqliteLocks {
    pub fn new(connection: Arc<Mutex<Connection>>) -> Result<Self, LockError> {
        {
            let c = connection.lock().unwrap_or_else(|p| p.into_inner());
            c.execute_batch(SCHEMA).map_err(store)?;
            for migration in MIGRATIONS {
                // "duplicate column": the store has it already.
                if let Err(e) = c.execute_batch(migration)
                    && !e.to_string().contains("duplicate column")
                {
                    return Err(store(e));
                }
            }
        }
        Ok(SqliteLocks { connection, clock: Clock::Wall, wait: Duration::ZERO })
    }

    /// The clock expiries are compared with (tests: [`Clock::tokio`]).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// `acquire` tries again, with backoff, for up to `wait` while a live other holds the
    /// lease (default: no wait).
    pub fn waiting(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Every suspended table and why, by name.
    pub async fn suspended_tables(&self) -> Result<Vec<(String, String)>, LockError> {
        self.run(|c| {
            let mut stmt = c.prepare(
                "SELECT table_name, suspended_reason FROM floe_tables
                 WHERE suspended_reason IS NOT NULL ORDER BY table_name",
            )?;
            let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
            rows.collect()
        })
        .await
    }

    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, LockError> {
        let connection = self.connection.clone();
        tokio::task::spawn_blocking(move || f(&mut connection.lock().unwrap_or_else(|p| p.into_inner())))
            .await
            .map_err(|e| LockError::Store { detail: e.to_string(), retryable: false })?
            .map_err(store)
    }

    /// One attempt at taking the lease.
    async fn try_acquire(&self, table: &str, owner: &str, ttl: Duration) -> Result<Option<Lease>, LockError> {
        let (table, owner, clock) = (table.to_string(), owner.to_string(), self.clock);
        self.run(move |c| {
            let tx = c.transaction()?;
            let now = clock.now_ms();
            tx.execute("INSERT OR IGNORE INTO floe_tables (table_name) VALUES (?1)", params![table])?;
            let (holder, expires, fencing): (Option<String>, i64, i64) = tx.query_row(
                "SELECT owner, expires_at_ms, fencing FROM floe_tables WHERE table_name = ?1",
                params![table],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?;
            if blocks(holder.as_deref(), expires, &owner, now) {
                return Ok(None);
            }
            if let Some(dead) = holder.as_deref().filter(|h| expires > now && *h != owner) {
                tracing::warn!(table, holder = dead, "the lease's holder is gone: taken over before its expiry");
            }
            let expires_at_ms = now + ttl.as_millis() as i64;
            let fencing = fencing + 1;
            tx.execute(
                "UPDATE floe_tables SET owner = ?1, expires_at_ms = ?2, fencing = ?3 WHERE table_name = ?4",
                params![owner, expires_at_ms, fencing, table],
            )?;
            tx.commit()?;
            Ok(Some(Lease { table, owner, fencing: fencing as u64, expires_at_ms }))
        })
        .await
    }
}

fn store(e: rusqlite::Error) -> LockError {
    let retryable = e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy);
    LockError::Store { detail: e.to_string(), retryable }
}

#[async_trait]
impl TableLocks for SqliteLocks {
    async fn acquire(&self, table: &str, owner: &str, ttl: Duration) -> Result<Option<Lease>, LockError> {
        let deadline = tokio::time::Instant::now() + self.wait;
        let mut backoff = Duration::from_millis(50);
        loop {
            if let Some(lease) = self.try_acquire(table, owner, ttl).await? {
                return Ok(Some(lease));
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            tokio::time::sleep(backoff.min(left)).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LockError> {
        let mut renewed = lease.clone();
        renewed.expires_at_ms = self.clock.now_ms() + ttl.as_millis() as i64;
        let l = renewed.clone();
        // Ours as long as nobody acquired it since (the fencing grows at every
        // acquisition), expired or not.
        let updated = self
            .run(move |c| {
                c.execute(
                    "UPDATE floe_tables SET expires_at_ms = ?1
                     WHERE table_name = ?2 AND owner = ?3 AND fencing = ?4",
                    params![l.expires_at_ms, l.table, l.owner, l.fencing as i64],
                )
            })
            .await?;
        match updated {
            1 => Ok(renewed),
            _ => Err(LockError::Lost { table: lease.table.clone(), fencing: lease.fencing }),
        }
    }

    async fn release(&self, lease: &Lease) -> Result<(), LockError> {
        let l = lease.clone();
        self.run(move |c| {
            c.execute(
                "UPDATE floe_tables SET expires_at_ms = 0 WHERE table_name = ?1 AND owner = ?2 AND fencing = ?3",
                params![l.table, l.owner, l.fencing as i64],
            )
        })
        .await?;
        Ok(())
    }

    async fn peek(&self, table: &str, owner: &str) -> Result<Option<Holder>, LockError> {
        let (table, owner, clock) = (table.to_string(), owner.to_string(), self.clock);
        self.run(move |c| {
            let row: Option<(Option<String>, i64)> = c
                .query_row("SELECT owner, expires_at_ms FROM floe_tables WHERE table_name = ?1", params![table], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()?;
            Ok(row.and_then(|(holder, expires_at_ms)| {
                blocks(holder.as_deref(), expires_at_ms, &owner, clock.now_ms())
                    .then(|| Holder { owner: holder.unwrap_or_default(), expires_at_ms })
            }))
        })
        .await
    }

    async fn suspended(&self, table: &str) -> Result<Option<String>, LockError> {
        let table = table.to_string();
        self.run(move |c| {
            c.query_row("SELECT suspended_reason FROM floe_tables WHERE table_name = ?1", params![table], |r| {
                r.get::<_, Option<String>>(0)
            })
            .optional()
            .map(Option::flatten)
        })
        .await
    }

    async fn set_suspended(&self, table: &str, reason: Option<&str>) -> Result<(), LockError> {
        let (table, reason) = (table.to_string(), reason.map(str::to_string));
        self.run(move |c| {
            c.execute("INSERT OR IGNORE INTO floe_tables (table_name) VALUES (?1)", params![table])?;
            c.execute("UPDATE floe_tables SET suspended_reason = ?1 WHERE table_name = ?2", params![reason, table])
        })
        .await?;
        Ok(())
    }
}

fn json_error(e: serde_json::Error) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(e))
}

#[async_trait]
impl TableRegistry for SqliteLocks {
    async fn tables(&self) -> Result<Vec<RegisteredTable>, LockError> {
        let rows = self
            .run(|c| {
                let mut stmt = c.prepare("SELECT table_name, suspended_reason FROM floe_tables ORDER BY table_name")?;
                let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?)))?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|(name, suspended)| Some(RegisteredTable { table: TableName::parse(&name)?, suspended }))
            .collect())
    }

    async fn hold_task(&self, table: &TableName, task: &HeldTask) -> Result<(), LockError> {
        let (table, task) = (table.to_string(), task.clone());
        self.run(move |c| {
            let tx = c.transaction()?;
            let before: Option<(String, Option<String>)> = tx
                .query_row(
                    "SELECT files, offsets FROM floe_held_tasks WHERE table_name = ?1 AND task_id = ?2",
                    params![table, task.task_id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let (mut files, offsets_before): (Vec<String>, Option<String>) = match before {
                Some((text, offsets)) => (serde_json::from_str(&text).map_err(json_error)?, offsets),
                None => (Vec::new(), None),
            };
            for file in task.files {
                if !files.contains(&file) {
                    files.push(file);
                }
            }
            let files = serde_json::to_string(&files).map_err(json_error)?;
            // The same task id names the same offsets; a hold without them keeps the earlier's.
            let offsets = match &task.offsets {
                Some(o) => Some(serde_json::to_string(o).map_err(json_error)?),
                None => offsets_before,
            };
            tx.execute(
                "INSERT OR REPLACE INTO floe_held_tasks (table_name, task_id, held_at_ms, files, offsets)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![table, task.task_id, task.held_at_ms, files, offsets],
            )?;
            tx.commit()
        })
        .await
    }

    async fn release_tasks(&self, table: &TableName, task_ids: &[String]) -> Result<(), LockError> {
        let (table, ids) = (table.to_string(), task_ids.to_vec());
        self.run(move |c| {
            let tx = c.transaction()?;
            for id in ids {
                tx.execute("DELETE FROM floe_held_tasks WHERE table_name = ?1 AND task_id = ?2", params![table, id])?;
            }
            tx.commit()
        })
        .await
    }

    async fn held_tasks(&self, table: &TableName) -> Result<Vec<HeldTask>, LockError> {
        let table = table.to_string();
        self.run(move |c| {
            let mut stmt = c.prepare(
                "SELECT task_id, held_at_ms, files, offsets FROM floe_held_tasks WHERE table_name = ?1
                 ORDER BY task_id",
            )?;
            fn json<T: serde::de::DeserializeOwned>(i: usize, text: &str) -> rusqlite::Result<T> {
                serde_json::from_str(text)
                    .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e)))
            }
            let rows = stmt.query_map(params![table], |r| {
                let (files, offsets): (String, Option<String>) = (r.get(2)?, r.get(3)?);
                Ok(HeldTask {
                    task_id: r.get(0)?,
                    held_at_ms: r.get(1)?,
                    files: json(2, &files)?,
                    offsets: offsets.map(|o| json(3, &o)).transpose()?,
                })
            })?;
            rows.collect()
        })
        .await
    }

    async fn oldest_holds(&self) -> Result<std::collections::BTreeMap<TableName, i64>, LockError> {
        let rows = self
            .run(|c| {
                let mut stmt =
                    c.prepare("SELECT table_name, MIN(held_at_ms) FROM floe_held_tasks GROUP BY table_name")?;
                let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
            .await?;
        Ok(rows.into_iter().filter_map(|(name, at)| Some((TableName::parse(&name)?, at))).collect())
    }

    async fn record(&self, table: &TableName, event: &MaintenanceEvent) -> Result<(), LockError> {
        let (table, event) = (table.to_string(), event.clone());
        self.run(move |c| {
            let tx = c.transaction()?;
            tx.execute("INSERT OR IGNORE INTO floe_tables (table_name) VALUES (?1)", params![table])?;
            let mut status = read_status(&tx, &table)?;
            status.apply(&event);
            let text = serde_json::to_string(&status).map_err(json_error)?;
            tx.execute("UPDATE floe_tables SET maintenance = ?1 WHERE table_name = ?2", params![text, table])?;
            tx.commit()
        })
        .await
    }

    async fn status(&self, table: &TableName) -> Result<MaintenanceStatus, LockError> {
        let table = table.to_string();
        self.run(move |c| read_status(c, &table)).await
    }
}

/// The table's maintenance record (empty when it has none).
fn read_status(c: &Connection, table: &str) -> rusqlite::Result<MaintenanceStatus> {
    let text: Option<String> = c
        .query_row("SELECT maintenance FROM floe_tables WHERE table_name = ?1", params![table], |r| r.get(0))
        .optional()?
        .flatten();
    match text {
        None => Ok(MaintenanceStatus::default()),
        Some(text) => serde_json::from_str(&text)
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::registry::HeldOffsets;

    fn locks() -> SqliteLocks {
        SqliteLocks::new(Arc::new(Mutex::new(Connection::open_in_memory().unwrap()))).unwrap()
    }

    /// Locks on tokio's clock: call under `start_paused = true`.
    fn paused_locks() -> SqliteLocks {
        locks().with_clock(Clock::tokio())
    }

    /// The owner a process of this host with `pid` would have.
    fn owner_of(pid: u32) -> String {
        format!("floe-local@{}:{pid}", hostname())
    }

    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        child.wait().unwrap();
        child.id()
    }

    #[tokio::test]
    async fn the_registry_lists_tables_holds_files_and_keeps_the_maintenance_record() {
        use crate::lock::registry::CompactionRecord;
        let locks = locks();
        let t = TableName::parse("kafka.t").unwrap();
        locks.acquire("kafka.t", "a", Duration::from_secs(1)).await.unwrap().unwrap();
        locks.set_suspended("kafka.u", Some("bad")).await.unwrap();
        let tables = locks.tables().await.unwrap();
        assert_eq!(
            tables,
            [
                RegisteredTable { table: t.clone(), suspended: None },
                RegisteredTable { table: TableName::parse("kafka.u").unwrap(), suspended: Some("bad".into()) },
            ]
        );

        let task = |id: &str, files: &[&str]| HeldTask {
            task_id: id.into(),
            files: files.iter().map(|f| f.to_string()).collect(),
            held_at_ms: 7,
            offsets: None,
        };
        locks.hold_task(&t, &task("1", &["/a"])).await.unwrap();
        locks.hold_task(&t, &task("2", &["/b", "/c"])).await.unwrap();
        // Held again (a retried run): its files added, the first run's kept.
        locks.hold_task(&t, &task("1", &["/a2", "/a"])).await.unwrap();
        assert_eq!(locks.held_tasks(&t).await.unwrap(), [task("1", &["/a", "/a2"]), task("2", &["/b", "/c"])]);
        let newer = HeldTask { held_at_ms: 9, ..task("3", &["/d"]) };
        let never_leased = TableName::parse("kafka.new").unwrap();
        locks.hold_task(&never_leased, &newer).await.unwrap();
        let oldest = std::collections::BTreeMap::from([(never_leased.clone(), 9), (t.clone(), 7)]);
        assert_eq!(locks.oldest_holds().await.unwrap(), oldest, "per table holding tasks, leased or not");
        locks.release_tasks(&never_leased, &["3".into()]).await.unwrap();
        locks.release_tasks(&t, &["2".into(), "unknown".into()]).await.unwrap();
        assert_eq!(locks.held_tasks(&t).await.unwrap(), [task("1", &["/a", "/a2"])]);
        // A CommitTask's offsets are kept with its hold, and by a later hold of it without them.
        let offsets = Some(HeldOffsets { topic: "t".into(), partition: 2, first: 10, last: 19 });
        locks.hold_task(&t, &HeldTask { offsets: offsets.clone(), ..task("4", &["/e"]) }).await.unwrap();
        locks.hold_task(&t, &task("4", &["/e2"])).await.unwrap();
        assert_eq!(locks.held_tasks(&t).await.unwrap()[1], HeldTask { offsets, ..task("4", &["/e", "/e2"]) });
        locks.release_tasks(&t, &["4".into()]).await.unwrap();

        assert_eq!(locks.status(&t).await.unwrap(), MaintenanceStatus::default());
        let compaction = CompactionRecord {
            at_ms: 5,
            files_in: 10,
            bytes_in: 100,
            files_out: 1,
            bytes_out: 90,
            ..Default::default()
        };
        for event in [
            MaintenanceEvent::SnapshotsExpired(3),
            MaintenanceEvent::SnapshotsExpired(2),
            MaintenanceEvent::Compacted(compaction),
            MaintenanceEvent::Swept { at_ms: 9, removed: 4 },
        ] {
            locks.record(&t, &event).await.unwrap();
        }
        let status = locks.status(&t).await.unwrap();
        assert_eq!(
            status,
            MaintenanceStatus {
                last_compaction: Some(compaction),
                snapshots_expired: 5,
                orphans_removed: 4,
                last_sweep_ms: Some(9),
                failing: Vec::new(),
                suspended_by: None,
            }
        );
    }

    #[test]
    fn a_store_made_before_the_registry_gains_its_columns() {
        let connection = Connection::open_in_memory().unwrap();
        connection
            .execute_batch(
                "CREATE TABLE floe_tables (table_name TEXT PRIMARY KEY, owner TEXT,
                 expires_at_ms INTEGER NOT NULL DEFAULT 0, fencing INTEGER NOT NULL DEFAULT 0, suspended_reason TEXT);
                 CREATE TABLE floe_held_tasks (table_name TEXT NOT NULL, task_id TEXT NOT NULL,
                 held_at_ms INTEGER NOT NULL, files TEXT NOT NULL, PRIMARY KEY (table_name, task_id));
                 INSERT INTO floe_held_tasks VALUES ('kafka.t', 'old', 1, '[\"/a\"]')",
            )
            .unwrap();
        let connection = Arc::new(Mutex::new(connection));
        SqliteLocks::new(connection.clone()).unwrap();
        let locks = SqliteLocks::new(connection.clone()).expect("opened twice");
        {
            let c = connection.lock().unwrap();
            c.execute("UPDATE floe_tables SET maintenance = NULL", []).expect("the column exists");
        }
        // A hold made before offsets were recorded: read without them.
        let held = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(locks.held_tasks(&TableName::parse("kafka.t").unwrap()))
            .unwrap();
        assert_eq!(held, [HeldTask { task_id: "old".into(), files: vec!["/a".into()], held_at_ms: 1, offsets: None }]);
    }

    #[tokio::test]
    async fn a_lease_held_by_a_dead_process_is_taken_over_at_once() {
        let locks = locks();
        let ttl = Duration::from_secs(300);
        let dead = owner_of(dead_pid());
        let a = locks.acquire("kafka.t", &dead, ttl).await.unwrap().unwrap();
        let me = process_owner("floe-local");
        assert_eq!(locks.peek("kafka.t", &me).await.unwrap(), None);
        let b = locks.acquire("kafka.t", &me, ttl).await.unwrap().expect("its holder is gone");
        assert_eq!(b.fencing, a.fencing + 1);
        assert!(matches!(locks.renew(&a, ttl).await, Err(LockError::Lost { .. })));
    }

    #[tokio::test]
    async fn a_lease_held_by_a_live_process_or_another_host_is_not() {
        let locks = locks();
        let ttl = Duration::from_secs(300);
        let me = process_owner("floe-local");
        let live = owner_of(std::os::unix::process::parent_id());
        locks.acquire("kafka.t", &live, ttl).await.unwrap().unwrap();
        let holder = locks.peek("kafka.t", &me).await.unwrap().expect("held");
        assert_eq!(holder.owner, live);
        assert!(locks.acquire("kafka.t", &me, ttl).await.unwrap().is_none());
        // A dead pid, but of another host: nothing to tell from here.
        let elsewhere = format!("floe-local@not-{}:{}", hostname(), dead_pid());
        locks.acquire("kafka.u", &elsewhere, ttl).await.unwrap().unwrap();
        assert!(locks.peek("kafka.u", &me).await.unwrap().is_some());
        assert!(locks.acquire("kafka.u", &me, ttl).await.unwrap().is_none());
        // Owners not naming a process (Lambda request ids) are never taken for dead.
        locks.acquire("kafka.v", "request-1", ttl).await.unwrap().unwrap();
        assert!(locks.acquire("kafka.v", &me, ttl).await.unwrap().is_none());
        // The holder itself, or anyone after a release, finds it free.
        assert_eq!(locks.peek("kafka.t", &live).await.unwrap(), None);
        assert_eq!(locks.peek("kafka.w", &me).await.unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn acquire_waits_a_bounded_time_for_a_live_holder() {
        let locks = paused_locks().waiting(Duration::from_secs(3));
        let ttl = Duration::from_secs(300);
        let a = locks.acquire("kafka.t", "a", ttl).await.unwrap().unwrap();
        let start = tokio::time::Instant::now();
        assert!(locks.acquire("kafka.t", "b", ttl).await.unwrap().is_none());
        let waited = start.elapsed();
        assert!(waited >= Duration::from_secs(3) && waited < Duration::from_secs(4), "{waited:?}");

        // Released within the wait: taken.
        let releaser = locks.clone();
        let release = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            releaser.release(&a).await.unwrap();
        });
        let start = tokio::time::Instant::now();
        let b = locks.acquire("kafka.t", "b", ttl).await.unwrap().expect("released meanwhile");
        assert!(start.elapsed() < Duration::from_secs(3));
        assert_eq!(b.owner, "b");
        release.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_lease_nobody_took_is_renewed_and_a_taken_one_is_lost() {
        let locks = paused_locks();
        let ttl = Duration::from_secs(10);
        let a = locks.acquire("kafka.t", "a", ttl).await.unwrap().unwrap();
        tokio::time::advance(2 * ttl).await;
        let a = locks.renew(&a, ttl).await.expect("expired, but nobody took it");
        assert!(locks.acquire("kafka.t", "b", ttl).await.unwrap().is_none(), "renewed: held again");
        tokio::time::advance(2 * ttl).await;
        let b = locks.acquire("kafka.t", "b", ttl).await.unwrap().expect("expired");
        assert!(matches!(locks.renew(&a, ttl).await, Err(LockError::Lost { fencing, .. }) if fencing == a.fencing));
        locks.renew(&b, ttl).await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn hold_keeps_the_lease_through_work_longer_than_it() {
        let locks = paused_locks();
        let ttl = Duration::from_secs(30);
        let lease = locks.acquire("kafka.t", "a", ttl).await.unwrap().unwrap();
        let other = locks.clone();
        let work = async {
            // 3 × ttl, looking in every half ttl whether another owner can take it.
            for _ in 0..6 {
                tokio::time::sleep(ttl / 2).await;
                assert!(other.acquire("kafka.t", "b", ttl).await.unwrap().is_none(), "taken during the work");
            }
            42
        };
        let start = tokio::time::Instant::now();
        let (out, kept) = super::super::hold(&locks, lease.clone(), ttl, work).await.unwrap();
        assert_eq!(out, 42);
        assert!(start.elapsed() >= 3 * ttl);
        assert_eq!(kept.fencing, lease.fencing);
        assert!(kept.expires_at_ms > locks.clock.now_ms(), "the returned lease is unexpired");
        locks.renew(&kept, ttl).await.expect("still ours");
    }

    #[tokio::test(start_paused = true)]
    async fn hold_drops_the_work_when_the_lease_is_lost() {
        let locks = paused_locks();
        let ttl = Duration::from_secs(30);
        let lease = locks.acquire("kafka.t", "a", ttl).await.unwrap().unwrap();
        let (thief, stolen) = (locks.clone(), lease.clone());
        let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let work = {
            let finished = finished.clone();
            async move {
                // Another takes the lease (a release stands for its expiry unseen)...
                tokio::time::sleep(ttl / 6).await;
                thief.release(&stolen).await.unwrap();
                thief.acquire("kafka.t", "b", ttl).await.unwrap().expect("released");
                // ... and the work would go on for long.
                tokio::time::sleep(3 * ttl).await;
                finished.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        };
        let start = tokio::time::Instant::now();
        let lost = super::super::hold(&locks, lease, ttl, work).await;
        assert!(matches!(lost, Err(LockError::Lost { .. })), "{lost:?}");
        assert!(start.elapsed() <= ttl / 3 + Duration::from_secs(1), "at the first renewal");
        assert!(!finished.load(std::sync::atomic::Ordering::SeqCst), "the work was dropped");
    }

    #[tokio::test]
    async fn one_holder_at_a_time_and_fencing_grows() {
        let locks = locks();
        let ttl = Duration::from_secs(30);
        let a = locks.acquire("kafka.t", "a", ttl).await.unwrap().unwrap();
        assert!(locks.acquire("kafka.t", "b", ttl).await.unwrap().is_none());
        let a = locks.renew(&a, ttl).await.unwrap();
        locks.release(&a).await.unwrap();
        let b = locks.acquire("kafka.t", "b", ttl).await.unwrap().unwrap();
        assert!(b.fencing > a.fencing);
        // a's lease is gone: renewing it fails, so a's commit aborts.
        assert!(matches!(locks.renew(&a, ttl).await, Err(LockError::Lost { .. })));
    }

    #[tokio::test]
    async fn an_expired_lease_can_be_taken_over() {
        let locks = locks();
        let a = locks.acquire("kafka.t", "a", Duration::from_millis(0)).await.unwrap().unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let b = locks.acquire("kafka.t", "b", Duration::from_secs(30)).await.unwrap().unwrap();
        assert_eq!(b.fencing, a.fencing + 1);
        assert!(locks.renew(&a, Duration::from_secs(30)).await.is_err());
    }

    #[tokio::test]
    async fn suspension_is_recorded_until_resumed() {
        let locks = locks();
        assert_eq!(locks.suspended("kafka.t").await.unwrap(), None);
        locks.set_suspended("kafka.t", Some("amount: long → int")).await.unwrap();
        assert_eq!(locks.suspended("kafka.t").await.unwrap().as_deref(), Some("amount: long → int"));
        assert_eq!(
            locks.suspended_tables().await.unwrap(),
            [("kafka.t".to_string(), "amount: long → int".to_string())]
        );
        locks.set_suspended("kafka.t", None).await.unwrap();
        assert_eq!(locks.suspended("kafka.t").await.unwrap(), None);
    }
}
