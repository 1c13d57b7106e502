//! The committer `floe local` runs: the SQLite catalog and leases of a local warehouse.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use floe_core::catalog::sqlite::SqliteCatalog;
use floe_core::committer::Committer;
use floe_core::lock::sqlite::SqliteLocks;

/// A committer on the local warehouse `warehouse` (its `catalog.db`) as `owner`, with a
/// lease of a minute, the default retries and concurrency.
pub fn local_committer(warehouse: &Path, owner: &str) -> Committer {
    let catalog = SqliteCatalog::open(&warehouse.join("catalog.db"), "floe").unwrap();
    let locks = Arc::new(SqliteLocks::new(catalog.connection()).unwrap());
    let warehouse = warehouse.canonicalize().unwrap().display().to_string();
    Committer::new(Arc::new(catalog), floe_core::storage::local_file_io(), locks.clone(), locks, warehouse, owner)
        .with_lease_ttl(Duration::from_secs(60))
}
