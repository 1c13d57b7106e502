//! Where a Delta table is registered by name ([`DeltaCatalog`]), for engines that find
//! tables in a catalog rather than by path: Glue on AWS (`floe-aws`), as a Delta table
//! named `<table>_delta` beside the Iceberg table ([`delta_name`]). A local warehouse has
//! none: its Delta tables are opened by path.

use async_trait::async_trait;

use super::DeltaError;
use crate::vocabulary::TableName;

/// What a Delta table's name takes after its Iceberg table's.
pub const DELTA_SUFFIX: &str = "_delta";

/// The name `table`'s Delta table is registered under: `<name>_delta`, same namespace.
pub fn delta_name(table: &TableName) -> TableName {
    TableName { namespace: table.namespace.clone(), name: format!("{}{DELTA_SUFFIX}", table.name) }
}

/// Registers Delta tables by name.
#[async_trait]
pub trait DeltaCatalog: Send + Sync {
    /// Registers the Delta table at `location` as `name`, unless it is: `Ok(true)` when
    /// this call registered it. A table of that name elsewhere, or not a Delta table, is
    /// an error naming both.
    async fn register(&self, name: &TableName, location: &str) -> Result<bool, DeltaError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delta_table_is_named_after_its_iceberg_table() {
        let table = TableName { namespace: "kafka".into(), name: "orders".into() };
        assert_eq!(delta_name(&table).to_string(), "kafka.orders_delta");
    }
}
