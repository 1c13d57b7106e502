//! A table's lease around its commit: taken, kept alive while the attempts run (retried
//! on catalog conflicts, a panic caught), released.

use std::time::{Duration, Instant};

use super::{CommitError, Committer};
use crate::guard::guarded;
use crate::lock::registry::{Activity, Failure, MaintenanceEvent};
use crate::lock::{Lease, hold};
use crate::metrics;
use crate::retry::Retryable;
use crate::task::TableName;

impl Committer {
    /// Takes the table's lease; the error says why not and whether to retry. A lease held
    /// by another owner gives the tasks back: recorded as the lease failing, naming the
    /// holder, until a commit succeeds or the lease comes free (status shows it so).
    pub(super) async fn acquire(&self, table: &TableName) -> Result<Lease, (String, bool)> {
        let key = table.to_string();
        match self.locks.acquire(&key, &self.owner, self.lease_ttl).await {
            Ok(Some(lease)) => Ok(lease),
            Ok(None) => {
                let holder = self.locks.peek(&key, &self.owner).await.ok().flatten();
                let by = holder.map_or_else(|| "another committer".to_string(), |h| h.to_string());
                tracing::warn!(table = %table, holder = %by, "lease held by another owner: tasks given back");
                let error = format!("held by {by}: tasks given back");
                let failure = Failure { activity: Activity::Lease, at_ms: crate::lock::now_ms(), error };
                self.note(table, MaintenanceEvent::Failed(failure)).await;
                Err((format!("{table} is being committed by another committer ({by})"), true))
            }
            Err(e) => Err((e.to_string(), e.retryable())),
        }
    }

    pub(super) async fn release(&self, table: &TableName, lease: &Lease) {
        if let Err(e) = self.locks.release(lease).await {
            tracing::warn!(table = %table, error = %e, "releasing the lease failed; it expires by itself");
        }
    }

    /// [`Self::retrying`] with the lease kept alive meanwhile ([`hold`]: renewed every
    /// third of its time, so a commit may outlive one lease period; a lease taken by
    /// another committer abandons the work) and a panic caught ([`guarded`]) as
    /// [`CommitError::Internal`]: the caller always gets to release the lease.
    pub(super) async fn guarded_attempts<T>(
        &self,
        table: &TableName,
        lease: &mut Lease,
        deadline: Option<Instant>,
        attempt: impl AsyncFnMut(&mut Lease) -> Result<T, CommitError>,
    ) -> Result<T, CommitError> {
        let held = lease.clone();
        let work = guarded(self.retrying(table, lease, deadline, attempt));
        match hold(self.locks.as_ref(), held, self.lease_ttl, work).await {
            Ok((Ok(outcome), _)) => outcome,
            Ok((Err(detail), _)) => Err(CommitError::Internal { table: table.to_string(), detail }),
            Err(lost) => Err(lost.into()),
        }
    }

    /// Runs `attempt` again after catalog conflicts, a bounded number of times and only
    /// while the deadline allows, renewing the lease in between.
    async fn retrying<T>(
        &self,
        table: &TableName,
        lease: &mut Lease,
        deadline: Option<Instant>,
        mut attempt: impl AsyncFnMut(&mut Lease) -> Result<T, CommitError>,
    ) -> Result<T, CommitError> {
        let mut tries = 1;
        loop {
            let outcome = attempt(lease).await;
            if outcome.as_ref().is_err_and(CommitError::is_conflict) {
                metrics::record_table(&metrics::COMMIT_CONFLICTS, &table.to_string(), 1.0);
            }
            match outcome {
                Err(e) if e.is_conflict() && tries < self.retry.attempts => {
                    let wait = self.retry.wait(tries);
                    if deadline.is_some_and(|d| Instant::now() + wait + Duration::from_secs(1) > d) {
                        return Err(e);
                    }
                    tracing::warn!(table = %table, attempt = tries, error = %e, "commit conflict: reloading");
                    tokio::time::sleep(wait).await;
                    *lease = self.locks.renew(lease, self.lease_ttl).await?;
                    metrics::record_table(&metrics::COMMIT_RETRIES, &table.to_string(), 1.0);
                    tries += 1;
                }
                other => return other,
            }
        }
    }
}
