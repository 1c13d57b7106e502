//! `metadata/version-hint.text`: a local table's current version, for engines that open
//! a table from its folder alone — DuckDB's `iceberg_scan('<table folder>')`, PyIceberg's
//! `StaticTable.from_metadata('<table folder>')`.
//!
//! ```text
//!  <table>/metadata/00003-<uuid>.metadata.json   the catalog's pointer
//!  <table>/metadata/version-hint.text            "00003-<uuid>"  (no newline)
//! ```
//!
//! The hint is the current metadata file's name less `.metadata.json`: DuckDB's iceberg
//! extension reads the hint and opens `metadata/v<hint>.metadata.json`, then
//! `metadata/<hint>.metadata.json`; PyIceberg opens `metadata/<hint>.metadata.json` for a
//! hint that is not a number. (Hadoop tables write a number and name their files
//! `v<N>.metadata.json`; Floe names its files as catalogs do, so a number would name no
//! file.) A trailing newline would be read as part of the name.
//!
//! The SQLite catalog writes it after each pointer move ([`super::sqlite`]), whole: a
//! temporary file renamed over the old one, so a reader finds the old hint or the new
//! one, never a part. The catalog stays the truth: a commit by another engine through the
//! SQLite catalog does not move the hint (`floe local table` does). The orphan sweep
//! keeps the file. Tables in Glue get none: engines find them through Glue.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The hint's file name, in the table's `metadata/` folder.
pub const FILE_NAME: &str = "version-hint.text";

const METADATA_SUFFIX: &str = ".metadata.json";

/// The hint file and the hint for the metadata file at `metadata_location`; `None` when
/// that is no local file (`s3://…`) or not named `….metadata.json`.
pub fn hint_for(metadata_location: &str) -> Option<(PathBuf, String)> {
    let path = local_path(metadata_location)?;
    let name = path.file_name()?.to_str()?;
    let hint = name.strip_suffix(METADATA_SUFFIX).filter(|h| !h.is_empty())?;
    Some((path.parent()?.join(FILE_NAME), hint.to_string()))
}

/// Writes the hint for the metadata file at `metadata_location` (a temporary file beside
/// it, synced, then renamed over it). Returns the hint, `None` when the location is no
/// local metadata file.
pub fn write(metadata_location: &str) -> std::io::Result<Option<String>> {
    let Some((path, hint)) = hint_for(metadata_location) else { return Ok(None) };
    let temporary = path.with_file_name(format!(".{FILE_NAME}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(hint.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, &path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(std::io::Error::new(e.kind(), format!("writing {}: {e}", path.display())));
    }
    Ok(Some(hint))
}

/// The hint of the table in `table_dir` as it stands; `None` when there is none.
pub fn read(table_dir: &Path) -> std::io::Result<Option<String>> {
    match std::fs::read_to_string(table_dir.join("metadata").join(FILE_NAME)) {
        Ok(hint) => Ok(Some(hint)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// A location as a local path: `file:///x`, `file:/x` or `/x`; `None` for another scheme.
fn local_path(location: &str) -> Option<PathBuf> {
    let path = location.strip_prefix("file://").or_else(|| location.strip_prefix("file:")).unwrap_or(location);
    (!path.contains("://")).then(|| PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hint_is_the_metadata_file_s_name_less_its_suffix() {
        let hint = |location: &str| hint_for(location).map(|(path, hint)| (path.display().to_string(), hint));
        let expected = Some(("/w/kafka.db/t/metadata/version-hint.text".to_string(), "00003-0f0e".to_string()));
        for location in [
            "/w/kafka.db/t/metadata/00003-0f0e.metadata.json",
            "file:///w/kafka.db/t/metadata/00003-0f0e.metadata.json",
            "file:/w/kafka.db/t/metadata/00003-0f0e.metadata.json",
        ] {
            assert_eq!(hint(location), expected, "{location}");
        }
        assert_eq!(hint("s3://b/kafka.db/t/metadata/00003-0f0e.metadata.json"), None);
        assert_eq!(hint("/w/t/metadata/snap-1.avro"), None);
        assert_eq!(hint("/w/t/metadata/.metadata.json"), None);
    }

    #[test]
    fn a_hint_replaces_the_last_whole_and_leaves_nothing_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let metadata = dir.path().join("t/metadata");
        std::fs::create_dir_all(&metadata).unwrap();
        let location = |v: &str| metadata.join(format!("{v}-0f0e.metadata.json")).display().to_string();
        assert_eq!(read(&dir.path().join("t")).unwrap(), None);
        assert_eq!(write(&location("00001")).unwrap().as_deref(), Some("00001-0f0e"));
        assert_eq!(write(&location("00002")).unwrap().as_deref(), Some("00002-0f0e"));
        assert_eq!(read(&dir.path().join("t")).unwrap().as_deref(), Some("00002-0f0e"), "no newline");
        let names: Vec<_> = std::fs::read_dir(&metadata).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, [FILE_NAME]);
        assert_eq!(write("s3://b/t/metadata/00001-0f0e.metadata.json").unwrap(), None);
        // A folder that is gone: the error names the hint.
        let gone = dir.path().join("gone/metadata/00001-0f0e.metadata.json").display().to_string();
        let e = write(&gone).unwrap_err().to_string();
        assert!(e.contains("gone/metadata/version-hint.text"), "{e}");
    }
}
