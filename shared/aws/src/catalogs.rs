//! The one place the AWS side (the Lambdas, `floe aws`, and `floe local` for catalogs
//! other than its SQLite one) turns `[catalog]` into a [`Catalog`]. A REST catalog is
//! opened with vended storage credentials on (`rest_catalog::RestCatalog::shared`).

use std::sync::Arc;

use floe_core::catalog::Catalog;
use floe_core::config::CatalogConfig;

/// Opens the configured catalog; `None` (no `[catalog]`) is Glue.
pub async fn open(
    config: Option<&CatalogConfig>,
    aws: &aws_config::SdkConfig,
) -> Result<Arc<dyn Catalog>, anyhow::Error> {
    match config.unwrap_or(&CatalogConfig::Glue) {
        CatalogConfig::Glue => Ok(Arc::new(crate::glue::GlueCatalog::new(aws_sdk_glue::Client::new(aws)))),
        CatalogConfig::Rest(rest) => Ok(crate::rest_catalog::RestCatalog::connect(rest, Some(aws)).await?.shared()),
        CatalogConfig::Sql => {
            anyhow::bail!(
                "catalog.type: \"sql\" is the local SQLite catalog of `floe local`; on AWS use glue, rest or s3tables"
            )
        }
        CatalogConfig::S3Tables(s3tables) => Ok(Arc::new(crate::s3tables::S3TablesCatalog::from_config(aws, s3tables))),
    }
}
