//! Where a Delta table is registered by name ([`DeltaCatalog`]), for engines that find
//! tables in a catalog rather than by path: Glue on AWS (`floe-aws`), as a Delta table
//! named `<table>_delta` beside the Iceberg table, or `<table>` itself for a Delta-only
//! topic, whose Iceberg table is Floe's own ([`delta_name`]). A local warehouse has none:
//! its Delta tables are opened by path.

use async_trait::async_trait;

use iceberg::spec::TableMetadata;

use super::DeltaError;
use crate::catalog::split::is_delta_only;
use crate::vocabulary::TableName;

/// What a Delta table's name takes after its Iceberg table's.
pub const DELTA_SUFFIX: &str = "_delta";

/// The name the Delta table of `table` (its Iceberg `metadata`) is registered under:
/// `<name>_delta` in the same namespace, or `<name>` when the topic is Delta-only.
pub fn delta_name(table: &TableName, metadata: &TableMetadata) -> TableName {
    match is_delta_only(metadata) {
        true => table.clone(),
        false => TableName { namespace: table.namespace.clone(), name: format!("{}{DELTA_SUFFIX}", table.name) },
    }
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
    fn a_delta_table_is_named_after_its_iceberg_table_or_takes_its_name_alone() {
        use crate::catalog::split::metadata;
        let table = TableName { namespace: "kafka".into(), name: "orders".into() };
        assert_eq!(delta_name(&table, &metadata(false)).to_string(), "kafka.orders_delta");
        assert_eq!(delta_name(&table, &metadata(true)).to_string(), "kafka.orders");
    }
}
