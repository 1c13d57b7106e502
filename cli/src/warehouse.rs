//! A local warehouse: a folder holding the SQLite catalog `floe` (`catalog.db`, also the
//! lock store and the table registry) and the tables' files, opened with the committer
//! and the in-process queue that `floe local run` and `floe local compact` share. The
//! tables are registered in that SQLite catalog, or in the catalog `[catalog]` names
//! (opened with its files by `floe_aws::catalogs::open`, as the Lambdas and `floe aws`
//! open theirs). With a REST catalog the tables' files may be in S3: read and written
//! with the credentials the catalog vends for each table, else the default AWS ones
//! (loaded on first use).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use floe_aws::catalogs::{Host, OpenedCatalog};
use floe_core::catalog::Catalog;
use floe_core::catalog::sqlite::SqliteCatalog;
use floe_core::committer::Committer;
use floe_core::config::FloeConfig;
use floe_core::delta::LogStore;
use floe_core::lock::Clock;
use floe_core::lock::sqlite::SqliteLocks;
use floe_core::queue::InProcessQueue;
use floe_core::retry::RetryPolicy;
use floe_core::storage::WarehouseFiles;

/// How long a commit waits for a live other run to release a table's lease.
const LEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Creates (if need be) and resolves a folder given on the command line, naming it and
/// the option in errors (`--warehouse wh: a file, not a folder`).
pub fn folder(option: &str, path: &Path, create: bool) -> anyhow::Result<PathBuf> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => anyhow::bail!("{option} {}: not a folder", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
            std::fs::create_dir_all(path).map_err(|e| anyhow::anyhow!("{option} {}: {e}", path.display()))?;
        }
        Err(e) => anyhow::bail!("{option} {}: {e}", path.display()),
    }
    std::fs::canonicalize(path).map_err(|e| anyhow::anyhow!("{option} {}: {e}", path.display()))
}

/// A local warehouse opened: its SQLite catalog and lock store (also the table
/// registry), the committer on them, the in-process queue tasks go through, and the
/// clock maintenance runs on.
pub(crate) struct Warehouse {
    pub dir: PathBuf,
    pub clock: Clock,
    pub catalog: Arc<dyn Catalog>,
    pub locks: Arc<SqliteLocks>,
    pub file_io: iceberg::io::FileIO,
    /// The tables' files listed and deleted (the orphan sweep).
    pub files: Arc<dyn WarehouseFiles>,
    /// The Delta mirrors' logs.
    pub delta_log: Arc<dyn LogStore>,
    pub owner: String,
    pub queue: Arc<InProcessQueue>,
    pub committer: Committer,
}

impl Warehouse {
    /// Opens (creating the SQLite catalog if need be) the warehouse in the folder `dir`,
    /// on `clock`, its tables in the catalog `config`'s `[catalog]` names (the SQLite one
    /// by default), those of Delta-only topics in its own ([`floe_aws::catalogs::open`]).
    pub async fn open(dir: PathBuf, clock: Clock, config: &FloeConfig) -> anyhow::Result<Warehouse> {
        let sqlite = SqliteCatalog::open(&dir.join("catalog.db"), "floe")?;
        let locks = Arc::new(SqliteLocks::new(sqlite.connection())?.waiting(LEASE_WAIT));
        let owner = floe_core::lock::sqlite::process_owner("floe-local");
        let OpenedCatalog { catalog, file_io, files, delta_log, delta_catalog } =
            floe_aws::catalogs::open(config, Host::Local { sqlite }).await?;
        let committer = Committer::new(
            catalog.clone(),
            file_io.clone(),
            locks.clone(),
            locks.clone(),
            dir.display().to_string(),
            &owner,
        )
        .with_lease_ttl(std::time::Duration::from_secs(300))
        .with_retry(RetryPolicy::default())
        .with_concurrency(floe_core::committer::DEFAULT_CONCURRENCY)
        // Commits on the wall clock: `clock` is maintenance's, which a test moves to
        // age files, not to stand for a host whose clock is wrong.
        .with_clock(Clock::Wall)
        .with_delta_log(delta_log.clone())
        .with_delta_catalog(delta_catalog);
        Ok(Warehouse {
            dir,
            clock,
            catalog,
            locks,
            file_io,
            files,
            delta_log,
            owner,
            queue: Arc::new(InProcessQueue::default()),
            committer,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_name_the_option_and_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let e = folder("--warehouse", &file, true).unwrap_err().to_string();
        assert_eq!(e, format!("--warehouse {}: not a folder", file.display()));
        let missing = dir.path().join("missing");
        let e = folder("--input", &missing, false).unwrap_err().to_string();
        assert!(e.starts_with(&format!("--input {}: No such file", missing.display())), "{e}");
        assert_eq!(folder("--warehouse", &missing, true).unwrap(), std::fs::canonicalize(&missing).unwrap());
    }
}
