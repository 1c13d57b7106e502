//! The actions of a Delta commit, as the protocol spells them in `_delta_log/N.json`
//! (one JSON object per line, each holding one action) and in checkpoints (one column per
//! action). Only what Floe writes and needs to read back is modelled; a line holding any
//! other action (`cdc`, `domainMetadata`, …) is kept out of the state, not an error.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use super::vectors::DeletionVector;

/// The lowest reader and writer versions for the features the table uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Protocol {
    pub min_reader_version: i32,
    pub min_writer_version: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reader_features: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer_features: Option<Vec<String>>,
}

/// `metaData.format`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileFormat {
    pub provider: String,
    #[serde(default)]
    pub options: BTreeMap<String, String>,
}

/// The table's id, schema (as a JSON string), partition columns and configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub format: FileFormat,
    pub schema_string: String,
    pub partition_columns: Vec<String>,
    #[serde(default)]
    pub configuration: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_time: Option<i64>,
}

/// A data file made part of the table. `path` is relative to the table's root (and
/// percent-encoded, as a URI path) or an absolute URI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Add {
    pub path: String,
    #[serde(default)]
    pub partition_values: BTreeMap<String, Option<String>>,
    pub size: i64,
    pub modification_time: i64,
    pub data_change: bool,
    /// `{"numRecords": n, …}`, as a JSON string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<String>,
    /// The rows of the file deleted since it was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_vector: Option<DeletionVector>,
}

/// A data file no longer part of the table (its tombstone, kept for `VACUUM`'s retention).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Remove {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<i64>,
    pub data_change: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_file_metadata: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
    /// The vector of the `add` it removes: a file is the same file with the same vector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_vector: Option<DeletionVector>,
}

/// An application's transaction version: `version` committed by `app_id`, atomically with
/// the rest of the commit (Delta's own exactly-once mechanism).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Txn {
    pub app_id: String,
    pub version: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<i64>,
}

/// One action: one line of a commit file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    Protocol(Protocol),
    MetaData(Metadata),
    Add(Add),
    Remove(Remove),
    Txn(Txn),
    /// Free-form provenance (Floe's: the operation, the Iceberg snapshot mirrored, the
    /// offsets committed).
    CommitInfo(serde_json::Map<String, serde_json::Value>),
}

/// A commit file's text: the actions, a line each.
pub fn to_lines(actions: &[Action]) -> Result<String, serde_json::Error> {
    let mut out = String::new();
    for action in actions {
        out.push_str(&serde_json::to_string(action)?);
        out.push('\n');
    }
    Ok(out)
}

/// The actions of a commit file's text; `Err` names the line (1-based) that is not an
/// action. A line of an action Floe does not model is skipped.
pub fn from_lines(text: &str) -> Result<Vec<Action>, (usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let value: serde_json::Value = serde_json::from_str(line).map_err(|e| (i + 1, e.to_string()))?;
        let Some((key, _)) = value.as_object().and_then(|o| o.iter().next()) else {
            return Err((i + 1, "not a JSON object naming one action".into()));
        };
        if !KNOWN.contains(&key.as_str()) {
            continue;
        }
        out.push(serde_json::from_value(value).map_err(|e| (i + 1, e.to_string()))?);
    }
    Ok(out)
}

const KNOWN: [&str; 6] = ["protocol", "metaData", "add", "remove", "txn", "commitInfo"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_round_trip_as_the_protocol_spells_them() {
        let add = Action::Add(Add {
            path: "data/a%20b.parquet".into(),
            partition_values: BTreeMap::new(),
            size: 10,
            modification_time: 5,
            data_change: true,
            stats: Some(r#"{"numRecords":3}"#.into()),
            deletion_vector: None,
        });
        let txn = Action::Txn(Txn { app_id: "a".into(), version: 7, last_updated: Some(1) });
        let text = to_lines(&[add.clone(), txn.clone()]).unwrap();
        assert!(text.starts_with(r#"{"add":{"path":"data/a%20b.parquet","partitionValues":{},"size":10,"modificationTime":5,"dataChange":true"#), "{text}");
        assert!(text.contains(r#"{"txn":{"appId":"a","version":7,"lastUpdated":1}}"#), "{text}");
        assert_eq!(from_lines(&text).unwrap(), vec![add, txn]);
    }

    #[test]
    fn unknown_actions_are_skipped_and_a_bad_line_is_named() {
        let text = "{\"cdc\":{\"path\":\"x\"}}\n{\"txn\":{\"appId\":\"a\",\"version\":1}}\n";
        assert_eq!(from_lines(text).unwrap().len(), 1);
        assert_eq!(from_lines("{\"txn\":{\"appId\":\"a\",\"version\":1}}\nnot json\n").unwrap_err().0, 2);
        assert_eq!(from_lines("{\"add\":{\"path\":1}}").unwrap_err().0, 1);
    }
}
