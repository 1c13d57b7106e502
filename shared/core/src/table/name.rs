//! A table's name: its namespace (a Glue database, a SQLite catalog namespace) and name.

use serde::{Deserialize, Serialize};

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

/// Where a table's files go: `<warehouse>/<namespace>.db/<table>`.
pub fn table_location(warehouse: &str, table: &TableName) -> String {
    format!("{}/{}.db/{}", warehouse.trim_end_matches('/'), table.namespace, table.name)
}
