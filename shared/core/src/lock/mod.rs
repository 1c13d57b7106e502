//! One committer per table at a time: a lease per table, and the table's status.
//!
//! ```text
//!  acquire(table, owner, ttl): free, expired, or already ours ─▶ Lease { owner, expires, fencing+1 }
//!                              held by another, unexpired     ─▶ None
//!  renew(lease): still ours (same owner and fencing), expired or not ─▶ new expiry;
//!                taken by another since (fencing moved) ─▶ Lost — the commit aborts
//!  release(lease): expiry set to now, fencing kept (it only grows)
//!  peek(table, owner): who would make acquire fail (a live other holder), without taking it
//!  hold(locks, lease, ttl, work): renews every ttl/3 while `work` runs; Lost cancels it
//! ```
//!
//! The lease keeps two committers from doing the same work; it is not what makes commits
//! safe: the catalog's compare-and-swap and the offsets recorded in the table do that, so
//! a committer that lost its lease mid-commit can only fail its swap, never duplicate.
//! The same store keeps each table's status: a table suspended (incompatible schema)
//! stays suspended, its tasks kept in the queue, until an operator resumes it.

pub mod registry;
pub mod sqlite;

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;

use crate::retry::Retryable;

/// A held lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub table: String,
    pub owner: String,
    /// Grows by one at every acquisition: a later holder always has a larger one.
    pub fencing: u64,
    pub expires_at_ms: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("lease on {table} lost (fencing {fencing}): another committer holds it")]
    Lost { table: String, fencing: u64 },
    #[error("lock store: {detail}")]
    Store { detail: String, retryable: bool },
}

impl Retryable for LockError {
    /// A lost lease is (another committer holds the table now; its tasks come back);
    /// the store's failures as its client judged them.
    fn retryable(&self) -> bool {
        match self {
            LockError::Lost { .. } => true,
            LockError::Store { retryable, .. } => *retryable,
        }
    }
}

/// Who holds a table's lease, as [`TableLocks::peek`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub owner: String,
    pub expires_at_ms: i64,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let until = chrono::DateTime::from_timestamp_millis(self.expires_at_ms).unwrap_or_default();
        write!(f, "{} until {}", self.owner, until.format("%H:%M:%S UTC"))
    }
}

/// Leases and statuses of tables.
#[async_trait]
pub trait TableLocks: Send + Sync {
    async fn acquire(&self, table: &str, owner: &str, ttl: Duration) -> Result<Option<Lease>, LockError>;
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LockError>;
    async fn release(&self, lease: &Lease) -> Result<(), LockError>;
    /// The other, live holder that would make `acquire(table, owner, _)` fail right now;
    /// `None` when the lease is free, expired, already `owner`'s or its holder is gone.
    /// Takes nothing: a cheap check before spending work on a table.
    async fn peek(&self, table: &str, owner: &str) -> Result<Option<Holder>, LockError>;
    /// The reason the table is suspended, if it is.
    async fn suspended(&self, table: &str) -> Result<Option<String>, LockError>;
    /// Suspends (`Some(reason)`) or resumes (`None`) the table.
    async fn set_suspended(&self, table: &str, reason: Option<&str>) -> Result<(), LockError>;
}

pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A clock: the time the lock stores compare expiries with, and the time a local run's
/// maintenance (compaction, sweep) runs on. The wall clock; (tests) tokio's clock, which
/// `tokio::time::pause` stops and `advance` moves; or the wall clock moved by a fixed
/// amount, so that a test lives a table's weeks in seconds.
#[derive(Debug, Clone, Copy, Default)]
pub enum Clock {
    #[default]
    Wall,
    Tokio {
        origin_ms: i64,
        origin: tokio::time::Instant,
    },
    /// The wall clock plus `by_ms`.
    Shifted {
        by_ms: i64,
    },
}

impl Clock {
    /// Tokio's clock, starting at the wall time now.
    pub fn tokio() -> Self {
        Clock::Tokio { origin_ms: now_ms(), origin: tokio::time::Instant::now() }
    }

    pub fn now_ms(&self) -> i64 {
        match self {
            Clock::Wall => now_ms(),
            Clock::Tokio { origin_ms, origin } => origin_ms + origin.elapsed().as_millis() as i64,
            Clock::Shifted { by_ms } => now_ms() + by_ms,
        }
    }
}

/// Runs `work` while keeping `lease`: renews it every `ttl / 3` until `work` ends, then
/// returns its output with the latest lease. A renewal that finds the lease taken
/// (`Lost`) drops `work` — whatever it did is not to be published — and returns the
/// error; a failed renewal (store unreachable) is logged and tried again at the next
/// tick, since an expired lease nobody took can still be renewed.
///
/// The caller still renews the returned lease right before its compare-and-swap: the
/// last renewal here may be up to `ttl / 3` old.
pub async fn hold<T>(
    locks: &dyn TableLocks,
    mut lease: Lease,
    ttl: Duration,
    work: impl Future<Output = T>,
) -> Result<(T, Lease), LockError> {
    let period = (ttl / 3).max(Duration::from_millis(1));
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // On the heap: a commit's future is large, and worker threads have small stacks.
    let mut work = Box::pin(work);
    loop {
        tokio::select! {
            biased;
            out = &mut work => return Ok((out, lease)),
            _ = ticks.tick() => match locks.renew(&lease, ttl).await {
                Ok(renewed) => lease = renewed,
                Err(e @ LockError::Lost { .. }) => {
                    tracing::warn!(table = %lease.table, fencing = lease.fencing, "lease lost during the work: abandoned");
                    return Err(e);
                }
                Err(e) => tracing::warn!(table = %lease.table, error = %e, "renewing the lease failed; trying again"),
            },
        }
    }
}
