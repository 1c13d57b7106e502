//! Row lineage, what format v3 adds to a snapshot: every row has an id, the
//! `first_row_id` of its data file plus its position in it, and the table's
//! `next-row-id` says where the next snapshot's ids start. Floe keeps it on v3 tables:
//!
//! ```text
//!  new data manifest (first_row_id null) ──┐
//!  kept manifests (their first_row_id) ────┼──▶ ManifestListWriter::v3(first = table next-row-id)
//!  rewritten manifests (null; each file's  │      assigns ids to manifests without one
//!    inherited id written out explicitly) ─┘      └──▶ snapshot row range (first, assigned)
//! ```
//!
//! - Manifests are written in the table's format version ([`manifest_writer`]): v3
//!   tables get v3 manifests, every other table v2 ones (as before).
//! - A manifest Floe rewrites (a merge, a removal) gets new ids from the list, so each
//!   file it carries over writes the id it inherited from its old manifest explicitly
//!   ([`Inherited`]): a row keeps its id until compaction rewrites its file.
//! - Compaction's outputs are new files and their rows new ids (Floe does not write the
//!   `_row_id` column).

use iceberg::spec::{
    DataFile, FormatVersion, ManifestContentType, ManifestEntry, ManifestFile, ManifestStatus, ManifestWriter,
    ManifestWriterBuilder, PartitionSpec, Schema, deserialize_data_file_from_json, serialize_data_file_to_json,
};
use iceberg::{Error, ErrorKind, Result};

/// A writer of `content` manifests in the table's format: v3 for v3 tables, else v2.
pub fn manifest_writer(
    builder: ManifestWriterBuilder,
    version: FormatVersion,
    content: ManifestContentType,
) -> ManifestWriter {
    match (version >= FormatVersion::V3, content) {
        (true, ManifestContentType::Data) => builder.build_v3_data(),
        (true, ManifestContentType::Deletes) => builder.build_v3_deletes(),
        (false, ManifestContentType::Data) => builder.build_v2_data(),
        (false, ManifestContentType::Deletes) => builder.build_v2_deletes(),
    }
}

/// The first row ids a manifest's data files inherit (the spec's "First Row ID
/// Inheritance"): a file without one takes the manifest's `first_row_id` plus the record
/// counts of the live files before it that had none. Feed it every entry in the
/// manifest's order.
pub struct Inherited {
    next: Option<i64>,
}

impl Inherited {
    pub fn of(manifest: &ManifestFile) -> Result<Self> {
        let next = match (manifest.content, manifest.first_row_id) {
            (ManifestContentType::Data, Some(first)) => Some(i64::try_from(first).map_err(|_| {
                Error::new(
                    ErrorKind::DataInvalid,
                    format!("{}: first_row_id {first} out of range", manifest.manifest_path),
                )
            })?),
            _ => None,
        };
        Ok(Self { next })
    }

    /// The entry's data file, its inherited first row id written out when it has none
    /// (unchanged when the manifest has no ids: a pre-v3 manifest, or deletes).
    pub fn explicit(&mut self, entry: &ManifestEntry, schema: &Schema, spec: &PartitionSpec) -> Result<DataFile> {
        let file = entry.data_file();
        let Some(next) = self.next else { return Ok(file.clone()) };
        if entry.status() == ManifestStatus::Deleted || file.first_row_id().is_some() {
            return Ok(file.clone());
        }
        self.next = Some(next + file.record_count() as i64);
        with_first_row_id(file, next, schema, spec)
    }
}

/// `file` with `first_row_id` set (iceberg-rust 0.10.1 has no setter: through its JSON).
fn with_first_row_id(file: &DataFile, first_row_id: i64, schema: &Schema, spec: &PartitionSpec) -> Result<DataFile> {
    let partition_type = spec.partition_type(schema)?;
    let json = serialize_data_file_to_json(file.clone(), &partition_type, FormatVersion::V3)?;
    let mut value: serde_json::Value = serde_json::from_str(&json)?;
    value["first_row_id"] = first_row_id.into();
    deserialize_data_file_from_json(&value.to_string(), spec.spec_id(), &partition_type, schema)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use iceberg::spec::{
        DataContentType, DataFileBuilder, DataFileFormat, ManifestEntry, NestedField, PrimitiveType, Struct, Type,
    };

    use super::*;

    fn schema() -> Schema {
        Schema::builder()
            .with_fields(vec![Arc::new(NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)))])
            .build()
            .unwrap()
    }

    fn entry(status: ManifestStatus, records: u64, first_row_id: Option<i64>) -> ManifestEntry {
        let file = DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(format!("memory:///t/data/{records}.parquet"))
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::empty())
            .record_count(records)
            .file_size_in_bytes(100)
            .first_row_id(first_row_id)
            .build()
            .unwrap();
        ManifestEntry::builder().status(status).snapshot_id(1).data_file(file).build()
    }

    fn manifest(first_row_id: Option<u64>) -> ManifestFile {
        ManifestFile {
            manifest_path: "memory:///t/metadata/m.avro".into(),
            manifest_length: 1,
            partition_spec_id: 0,
            content: ManifestContentType::Data,
            sequence_number: 1,
            min_sequence_number: 1,
            added_snapshot_id: 1,
            added_files_count: None,
            existing_files_count: None,
            deleted_files_count: None,
            added_rows_count: None,
            existing_rows_count: None,
            deleted_rows_count: None,
            partitions: None,
            key_metadata: None,
            first_row_id,
        }
    }

    #[test]
    fn files_without_an_id_inherit_the_manifests_plus_the_live_rows_before_them() {
        let (schema, spec) = (schema(), PartitionSpec::unpartition_spec());
        let mut inherited = Inherited::of(&manifest(Some(1000))).unwrap();
        let ids: Vec<Option<i64>> = [
            entry(ManifestStatus::Added, 10, None),
            entry(ManifestStatus::Deleted, 7, None),
            entry(ManifestStatus::Existing, 5, Some(42)),
            entry(ManifestStatus::Existing, 3, None),
        ]
        .iter()
        .map(|e| inherited.explicit(e, &schema, &spec).unwrap().first_row_id())
        .collect();
        assert_eq!(ids, vec![Some(1000), None, Some(42), Some(1010)]);
    }

    #[test]
    fn a_manifest_without_ids_leaves_its_files_as_they_are() {
        let (schema, spec) = (schema(), PartitionSpec::unpartition_spec());
        let mut inherited = Inherited::of(&manifest(None)).unwrap();
        let e = entry(ManifestStatus::Existing, 10, None);
        assert_eq!(&inherited.explicit(&e, &schema, &spec).unwrap(), e.data_file());
    }
}
