//! A local warehouse: a folder holding the SQLite catalog `floe` (`catalog.db`, also the
//! lock store and the table registry) and the tables' files, opened with the committer
//! and the in-process queue that `floe local run` and `floe local compact` share. The
//! tables are registered in that SQLite catalog, or in the catalog `[catalog]` names
//! ([`local_catalog`], the CLI's one place that turns it into a catalog). With a REST
//! catalog the tables' files may be in S3: read and written with the credentials the
//! catalog vends for each table, else the default AWS ones (loaded on first use).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use floe_core::catalog::Catalog;
use floe_core::catalog::sqlite::SqliteCatalog;
use floe_core::committer::Committer;
use floe_core::config::CatalogConfig;
use floe_core::lock::Clock;
use floe_core::lock::sqlite::SqliteLocks;
use floe_core::queue::InProcessQueue;
use floe_core::retry::RetryPolicy;
use floe_core::storage::{LocalFiles, WarehouseFiles};

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
    pub owner: String,
    pub queue: Arc<InProcessQueue>,
    pub committer: Committer,
}

impl Warehouse {
    /// Opens (creating the SQLite catalog if need be) the warehouse in the folder `dir`,
    /// on `clock`, its tables in the catalog `catalog` names (the SQLite one by default).
    pub async fn open(dir: PathBuf, clock: Clock, catalog: Option<&CatalogConfig>) -> anyhow::Result<Warehouse> {
        let sqlite = SqliteCatalog::open(&dir.join("catalog.db"), "floe")?;
        let locks = Arc::new(SqliteLocks::new(sqlite.connection())?.waiting(LEASE_WAIT));
        let owner = floe_core::lock::sqlite::process_owner("floe-local");
        let (file_io, files) = table_files(catalog);
        let catalog = local_catalog(sqlite, catalog).await?;
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
        .with_clock(Clock::Wall);
        Ok(Warehouse {
            dir,
            clock,
            catalog,
            locks,
            file_io,
            files,
            owner,
            queue: Arc::new(InProcessQueue::default()),
            committer,
        })
    }
}

/// Where the tables' files are read, written, listed and deleted: local paths; with a
/// REST catalog also S3 (its tables may be there, with credentials it vends).
pub(crate) fn table_files(catalog: Option<&CatalogConfig>) -> (iceberg::io::FileIO, Arc<dyn WarehouseFiles>) {
    match catalog {
        Some(CatalogConfig::Rest(_)) => {
            let clients = floe_aws::vended::S3Clients::lazy();
            (floe_aws::s3::routed_file_io(clients.clone()), Arc::new(floe_aws::files::AnyFiles::new(clients)))
        }
        _ => (floe_core::storage::local_file_io(), Arc::new(LocalFiles)),
    }
}

/// The catalog of `floe local`: the warehouse's SQLite catalog without `[catalog]` (or
/// with `type = "sql"`), else the configured one (not S3 Tables, whose files are in S3:
/// refused, saying so). AWS credentials are loaded only for
/// the catalogs that use them (Glue, S3 Tables, a REST catalog with `sigv4` or `secret_arn`).
pub async fn local_catalog(sqlite: SqliteCatalog, config: Option<&CatalogConfig>) -> anyhow::Result<Arc<dyn Catalog>> {
    match config {
        None | Some(CatalogConfig::Sql) => Ok(Arc::new(sqlite)),
        Some(CatalogConfig::Rest(rest))
            if rest.sigv4.is_none() && !matches!(rest.auth, floe_core::config::RestAuth::Secret(_)) =>
        {
            Ok(floe_aws::rest_catalog::RestCatalog::connect(rest, None).await?.shared())
        }
        Some(CatalogConfig::S3Tables(_)) => anyhow::bail!(
            "catalog.type: \"s3tables\" keeps each table's files in the S3 storage S3 Tables assigns, \
             and `floe local` writes local files: deploy the Lambdas with this floe.toml instead"
        ),
        Some(other) => {
            let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
            floe_aws::catalogs::open(Some(other), &aws).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn floe_local_refuses_s3_tables_saying_why() {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = SqliteCatalog::open(&dir.path().join("catalog.db"), "floe").unwrap();
        let s3tables = CatalogConfig::S3Tables(floe_core::config::S3TablesConfig {
            table_bucket_arn: "arn:aws:s3tables:us-east-1:123456789012:bucket/floe".into(),
            compaction: false,
        });
        let e = local_catalog(sqlite, Some(&s3tables)).await.err().unwrap().to_string();
        assert!(e.contains("`floe local` writes local files"), "{e}");
    }

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
