//! Position deletes committed after a compaction was planned, carried onto its outputs.
//!
//! A compaction rewrites its inputs as they were at its plan. A position delete committed
//! since (an upsert table's commit superseding rows, another engine's `DELETE`) names
//! rows of the inputs by position; the outputs hold those rows at other positions, so
//! rewritten without more, the rows would come back. Rejecting the compaction is safe,
//! but on a table that takes such deletes between every plan and its commit (an upsert
//! table under steady updates), no compaction would ever land. Instead the deletes are
//! carried: a row is named for good by its Kafka partition and offset, which the rewrite
//! keeps, so
//!
//! ```text
//!  delete since the plan ─▶ (input, position) ─▶ the input's row: (partition, offset)
//!  the outputs' _kafka.partition/offset ─▶ where those rows are now ─▶ new position
//!  delete files on the outputs, in the compaction's snapshot
//! ```
//!
//! The delete file carried is then applied as far as the outputs go: it is recorded as
//! applied, and dropped once no data file it names is live. On a v3 table the carried
//! deletes are deletion vectors (the outputs are new: none has one yet). Files without
//! Kafka offsets (another engine's appends) cannot be carried: such a compaction is
//! rejected, as before.

use std::collections::{BTreeSet, HashMap};

use iceberg::Result;
use iceberg::io::FileIO;
use iceberg::spec::DataFile;

use super::read::kafka_rows;
use super::write::{Doomed, write_position_deletes, write_vectors};
use super::{AppliedDelete, LiveDelete, ScopedFile, rows_named};

/// What carrying gives the compaction's snapshot.
#[derive(Debug, Default)]
pub struct Carried {
    /// Position delete files on the outputs (with their spec's id).
    pub deletes: Vec<(i32, DataFile)>,
    /// The delete files carried, as applied (with the data files they name).
    pub applied: Vec<AppliedDelete>,
    /// Rows deleted in the outputs.
    pub rows: u64,
}

/// Carries `deletes` (position deletes or deletion vectors committed since the plan)
/// from `inputs` onto `outputs` (of partition spec `spec_id`), by the rows' Kafka
/// partition and offset (`partition_id`, `offset_id`): writes the delete files into
/// `data_dir`, deletion vectors when `vectors` (a v3 table).
pub async fn carry(
    file_io: &FileIO,
    (inputs, outputs): (&[&ScopedFile], &[DataFile]),
    deletes: &[&LiveDelete],
    (partition_id, offset_id): (i32, i32),
    (spec_id, vectors): (i32, bool),
    data_dir: &str,
) -> Result<Carried> {
    let mut carried = Carried::default();
    let mut doomed_inputs: HashMap<&str, BTreeSet<i64>> = HashMap::new();
    for delete in deletes {
        let named = rows_named(file_io, delete).await?;
        for input in inputs {
            if let Some(positions) = named.get(input.path()) {
                doomed_inputs.entry(input.path()).or_default().extend(positions);
            }
        }
        let mut names: Vec<String> = named.into_keys().collect();
        names.sort();
        carried.applied.push(AppliedDelete { path: delete.path().to_string(), names });
    }
    // The rows those positions hold: (partition, offset).
    let mut rows: BTreeSet<(i32, i64)> = BTreeSet::new();
    for (path, positions) in &doomed_inputs {
        let kafka = kafka_rows(file_io, path, partition_id, offset_id).await?;
        for &position in positions {
            let row = usize::try_from(position).ok().and_then(|p| kafka.get(p).copied().flatten());
            let row = row.ok_or_else(|| {
                iceberg::Error::new(
                    iceberg::ErrorKind::DataInvalid,
                    format!("{path}: no Kafka offset at position {position}, which a delete names: cannot carry it"),
                )
            })?;
            rows.insert(row);
        }
    }
    let mut doomed = Vec::new();
    if !rows.is_empty() {
        for output in outputs {
            let kafka = kafka_rows(file_io, output.file_path(), partition_id, offset_id).await?;
            let positions: Vec<i64> = kafka
                .iter()
                .enumerate()
                .filter(|(_, row)| row.is_some_and(|r| rows.contains(&r)))
                .map(|(i, _)| i as i64)
                .collect();
            carried.rows += positions.len() as u64;
            doomed.push(Doomed {
                path: output.file_path().to_string(),
                spec_id,
                partition: output.partition().clone(),
                positions,
            });
        }
    }
    carried.deletes = match vectors {
        true => write_vectors(file_io, data_dir, doomed).await?,
        false => write_position_deletes(file_io, data_dir, doomed).await?,
    };
    Ok(carried)
}
