//! The audit of a table's Delta mirror ([`check`]): whether it holds exactly the Iceberg
//! table's current rows. The Iceberg audit reads every row of the Iceberg table; the
//! Delta table holds the same Parquet files, so the same file set (and no Iceberg delete
//! file it lacks) means the same rows, each committed record once:
//!
//! - a live Iceberg data file the Delta table lacks: its rows are missing there (behind);
//! - a Delta file the Iceberg table no longer has live: rows twice (a compaction's inputs
//!   beside its output) or rows Floe did not commit;
//! - a partition's `txn` version other than its last committed offset;
//! - a file whose rows the Iceberg table's deletes remove, and whose Delta deletion
//!   vector removes another number of them.

use iceberg::io::FileIO;

use super::DeltaError;
use super::log::DeltaSnapshot;
use super::mirror::{by_delta_path, expected_txns};
use super::store::LogStore;
use super::vectors::deleted_positions;
use crate::table::LoadedTable;
use crate::table::audit::DeltaCheck;
use crate::table::deletes::{ReadDeletes, live_files};

/// The Delta mirror of `table` (its current snapshot) checked; `None` when it has none.
pub async fn check(
    store: &dyn LogStore,
    file_io: &FileIO,
    table: &LoadedTable,
) -> Result<Option<DeltaCheck>, DeltaError> {
    let root = table.metadata.location().trim_end_matches('/').to_string();
    let Some(state) = DeltaSnapshot::read(store, &root).await? else { return Ok(None) };
    let (data, deletes) = live_files(file_io, &table.metadata).await?;
    let deleted = deleted_positions(file_io, &table.metadata, &data, deletes, &ReadDeletes).await?;
    let live = by_delta_path(&root, &data);
    let missing = live.keys().filter(|p| !state.files.contains_key(*p)).cloned().collect();
    let extra = state.files.keys().filter(|p| !live.contains_key(*p)).cloned().collect();
    let vectors = live
        .iter()
        .filter_map(|(path, f)| {
            let add = state.files.get(path)?;
            let delta = add.deletion_vector.as_ref().map_or(0, |v| v.cardinality);
            let iceberg = deleted.get(f.path()).map_or(0, |p| p.len() as i64);
            (delta != iceberg).then(|| format!("{path}: {delta} row(s) deleted in Delta, {iceberg} in Iceberg"))
        })
        .collect();
    let offsets = expected_txns(table, 0)?
        .into_iter()
        .filter(|t| !t.app_id.starts_with("floe/"))
        .filter_map(|t| {
            let found = state.txns.get(&t.app_id).map(|had| had.version);
            (found != Some(t.version)).then(|| match found {
                Some(v) => format!("{}: txn version {v}, where {} is committed last", t.app_id, t.version),
                None => format!("{}: no txn, where {} is committed last", t.app_id, t.version),
            })
        })
        .collect();
    Ok(Some(DeltaCheck { version: state.version, files: state.files.len(), missing, extra, offsets, vectors }))
}
