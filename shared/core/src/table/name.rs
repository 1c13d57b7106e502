//! A table's name: its namespace (a Glue database, a SQLite catalog namespace) and name.

use serde::{Deserialize, Serialize};

/// What a table's name takes for its dead-letter table's.
pub const DEAD_LETTER_SUFFIX: &str = "_dlq";

/// An Iceberg table name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TableName {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for TableName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.namespace, self.name)
    }
}

impl TableName {
    /// `namespace.name` back into a name (split at the first dot: neither Glue database
    /// nor SQLite namespace names Floe makes hold one).
    pub fn parse(text: &str) -> Option<TableName> {
        let (namespace, name) = text.split_once('.')?;
        (!namespace.is_empty() && !name.is_empty())
            .then(|| TableName { namespace: namespace.to_string(), name: name.to_string() })
    }

    /// The dead-letter table beside this one: `<name>_dlq`, in the same namespace.
    pub fn dead_letters(&self) -> TableName {
        TableName { namespace: self.namespace.clone(), name: format!("{}{DEAD_LETTER_SUFFIX}", self.name) }
    }
}

/// Where a table's files go: `<warehouse>/<namespace>.db/<table>`.
pub fn table_location(warehouse: &str, table: &TableName) -> String {
    format!("{}/{}.db/{}", warehouse.trim_end_matches('/'), table.namespace, table.name)
}
