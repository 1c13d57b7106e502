//! A catalog that runs a hook before each call it passes on: a test fails, stalls or
//! races one of them; a benchmark adds a service's latency to each.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use floe_core::catalog::{Catalog, CatalogError, TablePointer};
use floe_core::task::TableName;
use iceberg::spec::TableMetadata;

/// Which catalog call a [`Hooked`] catalog's hook runs before (or, `Swapped`, after).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogCall {
    Current,
    Create,
    Swap,
    /// A swap that succeeded.
    Swapped,
}

/// What a hook returns: it runs before the call (an error fails the call).
pub type HookFuture = Pin<Box<dyn Future<Output = Result<(), CatalogError>> + Send>>;

type CatalogHook = Box<dyn Fn(CatalogCall, &TableName, Option<&TableMetadata>) -> HookFuture + Send + Sync>;

/// A catalog that runs a hook before each table's call it passes on to `inner`, with the
/// table and the metadata the call carries; a listing passes unhooked.
pub struct Hooked {
    inner: Arc<dyn Catalog>,
    hook: CatalogHook,
}

impl Hooked {
    pub fn new(
        inner: Arc<dyn Catalog>,
        hook: impl Fn(CatalogCall, &TableName, Option<&TableMetadata>) -> HookFuture + Send + Sync + 'static,
    ) -> Self {
        Hooked { inner, hook: Box::new(hook) }
    }
}

#[async_trait]
impl Catalog for Hooked {
    async fn current(&self, table: &TableName) -> Result<Option<TablePointer>, CatalogError> {
        (self.hook)(CatalogCall::Current, table, None).await?;
        self.inner.current(table).await
    }
    async fn create(&self, table: &TableName, metadata: &TableMetadata, location: &str) -> Result<(), CatalogError> {
        (self.hook)(CatalogCall::Create, table, Some(metadata)).await?;
        self.inner.create(table, metadata, location).await
    }
    async fn swap(
        &self,
        table: &TableName,
        expected: &TablePointer,
        metadata: &TableMetadata,
        location: &str,
    ) -> Result<(), CatalogError> {
        (self.hook)(CatalogCall::Swap, table, Some(metadata)).await?;
        self.inner.swap(table, expected, metadata, location).await?;
        (self.hook)(CatalogCall::Swapped, table, None).await
    }
    async fn list(&self, namespace: &str) -> Result<Vec<TableName>, CatalogError> {
        self.inner.list(namespace).await
    }
    async fn create_location(&self, table: &TableName) -> Result<Option<String>, CatalogError> {
        self.inner.create_location(table).await
    }
}
