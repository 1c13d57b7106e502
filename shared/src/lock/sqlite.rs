//! Leases and statuses in a SQLite table beside the local catalog (`floe local run`,
//! several processes on one machine).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::{Lease, LockError, TableLocks, now_ms};

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS floe_tables (
    table_name TEXT PRIMARY KEY,
    owner TEXT,
    expires_at_ms INTEGER NOT NULL DEFAULT 0,
    fencing INTEGER NOT NULL DEFAULT 0,
    suspended_reason TEXT
)";

#[derive(Clone)]
pub struct SqliteLocks {
    connection: Arc<Mutex<Connection>>,
}

impl SqliteLocks {
    pub fn new(connection: Arc<Mutex<Connection>>) -> Result<Self, LockError> {
        connection.lock().unwrap_or_else(|p| p.into_inner()).execute_batch(SCHEMA).map_err(store)?;
        Ok(SqliteLocks { connection })
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
}

fn store(e: rusqlite::Error) -> LockError {
    let retryable = e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy);
    LockError::Store { detail: e.to_string(), retryable }
}

#[async_trait]
impl TableLocks for SqliteLocks {
    async fn acquire(&self, table: &str, owner: &str, ttl: Duration) -> Result<Option<Lease>, LockError> {
        let (table, owner) = (table.to_string(), owner.to_string());
        self.run(move |c| {
            let tx = c.transaction()?;
            let now = now_ms();
            tx.execute("INSERT OR IGNORE INTO floe_tables (table_name) VALUES (?1)", params![table])?;
            let (holder, expires, fencing): (Option<String>, i64, i64) = tx.query_row(
                "SELECT owner, expires_at_ms, fencing FROM floe_tables WHERE table_name = ?1",
                params![table],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?;
            if expires > now && holder.as_deref() != Some(owner.as_str()) {
                return Ok(None);
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

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LockError> {
        let mut renewed = lease.clone();
        renewed.expires_at_ms = now_ms() + ttl.as_millis() as i64;
        let l = renewed.clone();
        let updated = self
            .run(move |c| {
                c.execute(
                    "UPDATE floe_tables SET expires_at_ms = ?1
                     WHERE table_name = ?2 AND owner = ?3 AND fencing = ?4 AND expires_at_ms >= ?5",
                    params![l.expires_at_ms, l.table, l.owner, l.fencing as i64, now_ms()],
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

#[cfg(test)]
mod tests {
    use super::*;

    fn locks() -> SqliteLocks {
        SqliteLocks::new(Arc::new(Mutex::new(Connection::open_in_memory().unwrap()))).unwrap()
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
