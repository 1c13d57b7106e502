//! Where and how a table records files: a planned file adopted as it is, copied under the
//! table's location, or rewritten (trimmed, laid out by the table's spec, renumbered).

use std::sync::Arc;

use iceberg::io::FileIO;
use iceberg::spec::{DataFile, PartitionSpec, TableMetadata};

use super::plan::{FileAction, PlannedFile};
use crate::datafile::{Pages, WriterOptions};
use crate::table::rewrite::rewrite_files;
use crate::task::retype_partition;

/// Where and how a table records files: its partition spec and data directory.
pub(super) struct TableLayout<'a> {
    file_io: &'a FileIO,
    spec: &'a PartitionSpec,
    data_dir: String,
}

impl<'a> TableLayout<'a> {
    /// The layout of the table `metadata` describes: its default spec, its data directory.
    pub(super) fn of(file_io: &'a FileIO, metadata: &'a TableMetadata) -> TableLayout<'a> {
        TableLayout {
            file_io,
            spec: metadata.default_partition_spec(),
            data_dir: format!("{}/data", metadata.location()),
        }
    }

    /// A planned file as the table records it: itself ([`FileAction::Adopt`]); else
    /// rewritten — its rows (those kept) with the table's field ids, laid out by the
    /// table's spec, each new file with its partition value — of the table's partition
    /// type by `table_schema` (after a promotion: the wider type).
    pub(super) async fn adopt(
        &self,
        planned: &PlannedFile,
        table_schema: &iceberg::spec::Schema,
    ) -> iceberg::Result<Vec<DataFile>> {
        let written = &planned.written;
        let (files, schema) = match &planned.action {
            FileAction::Adopt if !self.holds(planned.file.path()) => {
                (vec![self.relocate(planned).await?], &written.schema)
            }
            FileAction::Adopt => {
                (vec![planned.file.data_file(&written.schema, written.spec.as_ref())?], &written.schema)
            }
            FileAction::Relayout | FileAction::Renumber => {
                (self.rewrite(planned, None, "layout").await?, written.rewrite_schema())
            }
            FileAction::Trim(keep) => (self.rewrite(planned, Some(keep), "trim").await?, written.rewrite_schema()),
        };
        let (written_type, table_type) = (self.spec.partition_type(schema)?, self.spec.partition_type(table_schema)?);
        files
            .into_iter()
            .map(|f| retype_partition(f, schema, self.spec.spec_id(), &written_type, &table_type))
            .collect()
    }

    /// Whether `path` lies under the table's location.
    fn holds(&self, path: &str) -> bool {
        let plain = |p: &str| p.strip_prefix("file://").unwrap_or(p).trim_end_matches('/').to_string();
        let location = plain(self.data_dir.strip_suffix("/data").unwrap_or(&self.data_dir));
        plain(path).strip_prefix(&location).is_some_and(|rest| rest.starts_with('/'))
    }

    /// A file written outside the table's location (under the location a catalog
    /// assigned another create, before the table was made) copied as it is into the
    /// table's data directory: every file of a table lies under the location it is
    /// registered with, where readers' credentials and the table's maintenance reach.
    /// File names are unique in a table (partition, first offset, attempt, source).
    async fn relocate(&self, planned: &PlannedFile) -> iceberg::Result<DataFile> {
        let from = planned.file.path();
        let to = format!("{}/{}", self.data_dir, from.rsplit('/').next().unwrap_or(from));
        let bytes = self.file_io.new_input(from)?.read().await?;
        self.file_io.new_output(&to)?.write(bytes).await?;
        tracing::info!(task_id = %planned.written.task_id, from, to = %to, "file outside the table's location copied under it");
        let mut file = planned.file.clone();
        file.data_file["file_path"] = to.into();
        file.data_file(&planned.written.schema, planned.written.spec.as_ref())
    }

    /// The planned file's rows (those in `keep`) written again under a name new to this
    /// attempt, with the table's field ids, by the table's spec.
    async fn rewrite(
        &self,
        planned: &PlannedFile,
        keep: Option<&[(i64, i64)]>,
        tag: &str,
    ) -> iceberg::Result<Vec<DataFile>> {
        let written = &planned.written;
        let output = WriterOptions {
            file_io: self.file_io.clone(),
            dir: self.data_dir.clone(),
            partition: written.partition,
            source_id: format!("{}-{tag}", written.task_id),
            schema: Arc::new(written.rewrite_schema().clone()),
            target_size: u64::MAX,
            pages: Pages::Zstd,
        };
        let files = rewrite_files(output, self.spec, &[planned.file.path()], keep, Some(&written.schema)).await?;
        Ok(files.into_iter().map(|f| f.data_file).collect())
    }
}
