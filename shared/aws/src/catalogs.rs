//! The one place `[catalog]` becomes objects ([`open`]): the catalog, and the warehouse's
//! files as its tables are read and written (a `FileIO`) and listed and deleted (the
//! sweep's [`WarehouseFiles`]). The three Lambdas, `floe aws` and `floe local` all open
//! their catalog here, each as its [`Host`]: on AWS (Glue by default) or a local
//! warehouse (its SQLite catalog by default).
//!
//! ```text
//!  [catalog]        catalog                         FileIO, files
//!  glue (default)   GlueCatalog                      S3 (Aws) | local paths (Local)
//!  sql              Local: the warehouse's SQLite    local paths            (Aws: refused)
//!  rest             floe_core::catalog::rest         S3, each table's vended credentials first
//!                     hooks: SigV4, Secrets Manager     (VendedRoutes, made here and handed
//!                     (rest_hooks), VendedRoutes        to both), + local paths (Local)
//!  s3tables         S3TablesCatalog                  S3                     (Local: refused)
//! ```
//!
//! The catalog is split ([`SplitCatalog`]) with Floe's own: Delta-only topics' Iceberg
//! tables (`formats = ["delta"]`), Floe's record of them, go to the lock table's rows on
//! AWS ([`LockTableCatalog`]) or to the warehouse's SQLite file under another catalog
//! name ([`OWN_CATALOG`]) locally; every other table to `[catalog]`. (`floe aws` without
//! `--lock-table` opens `[catalog]` alone, refused when a topic is Delta-only.)
//!
//! A REST catalog's vended credentials go from the catalog to the storage of the same
//! [`OpenedCatalog`] through the [`VendedRoutes`] made for it, not through anything
//! process-global. `floe local` loads AWS credentials only for the catalogs that use
//! them (Glue, a REST catalog with `sigv4` or `secret_arn`; S3 itself on first use).

use std::sync::Arc;

use iceberg::io::FileIO;

use floe_core::catalog::Catalog;
use floe_core::catalog::rest::{RestCatalog, RestSetupError};
use floe_core::catalog::split::SplitCatalog;
use floe_core::catalog::sqlite::{OWN_CATALOG, SqliteCatalog};
use floe_core::config::{CatalogConfig, FloeConfig, RestAuth, RestCatalogConfig};
use floe_core::storage::{LocalFiles, WarehouseFiles, local_file_io};
use floe_core::table::CatalogTables;

use crate::delta_log::S3LogStore;
use crate::files::{AnyFiles, S3Files};
use crate::glue::GlueCatalog;
use crate::lock_table_catalog::LockTableCatalog;
use crate::s3::routed_file_io;
use crate::s3tables::S3TablesCatalog;
use crate::vended::{S3Clients, VendedRoutes};
use floe_core::delta::{DeltaCatalog, LocalLogStore, LogStore};

/// Where the catalog is opened.
pub enum Host<'a> {
    /// A Lambda or `floe aws`: the AWS configuration, the S3 client of the warehouse, and
    /// the stack's lock table (needed when floe.toml has a Delta-only topic).
    Aws { aws: &'a aws_config::SdkConfig, s3: aws_sdk_s3::Client, lock_table: Option<&'a str> },
    /// `floe local`: a warehouse folder, whose SQLite catalog is the default.
    Local { sqlite: SqliteCatalog },
}

/// A `[catalog]` opened: the catalog, and its tables' files.
pub struct OpenedCatalog {
    pub catalog: Arc<dyn Catalog>,
    /// The tables' files read and written.
    pub file_io: FileIO,
    /// The tables' files listed and deleted (the orphan sweep).
    pub files: Arc<dyn WarehouseFiles>,
    /// The Delta mirrors' logs, beside the tables' files.
    pub delta_log: Arc<dyn LogStore>,
    /// Where Delta tables are registered by name (Glue); `None`: opened by path only.
    pub delta_catalog: Option<Arc<dyn DeltaCatalog>>,
}

impl OpenedCatalog {
    /// `catalog`, its files in S3 through `s3`.
    pub fn on_s3(catalog: Arc<dyn Catalog>, s3: aws_sdk_s3::Client) -> OpenedCatalog {
        OpenedCatalog::routed(catalog, S3Clients::new(s3))
    }

    /// Glue through `glue`, its files in S3 through `s3`, its Delta tables registered in
    /// Glue too.
    pub fn on_glue(glue: aws_sdk_glue::Client, s3: aws_sdk_s3::Client) -> OpenedCatalog {
        let glue = Arc::new(GlueCatalog::new(glue));
        OpenedCatalog { delta_catalog: Some(glue.clone()), ..OpenedCatalog::on_s3(glue, s3) }
    }

    /// `catalog`, its files in S3 through the client `clients` picks for each.
    fn routed(catalog: Arc<dyn Catalog>, clients: Arc<S3Clients>) -> OpenedCatalog {
        OpenedCatalog {
            catalog,
            file_io: routed_file_io(clients.clone()),
            files: Arc::new(S3Files::routed(clients.clone())),
            delta_log: Arc::new(S3LogStore::new(clients)),
            delta_catalog: None,
        }
    }

    /// `catalog`, its files local.
    fn local(catalog: Arc<dyn Catalog>) -> OpenedCatalog {
        OpenedCatalog {
            catalog,
            file_io: local_file_io(),
            files: Arc::new(LocalFiles),
            delta_log: Arc::new(LocalLogStore),
            delta_catalog: None,
        }
    }

    /// The catalog and the `FileIO`: how the tables are read.
    pub fn tables(&self) -> CatalogTables {
        CatalogTables {
            catalog: self.catalog.clone(),
            file_io: self.file_io.clone(),
            delta_log: self.delta_log.clone(),
        }
    }
}

/// Why a `[catalog]` could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Rest(#[from] RestSetupError),
    /// The catalog is not one this host can use; the message says what to use instead.
    #[error("{0}")]
    Refused(&'static str),
}

/// Opens the catalog `config` names on `host` (none: Glue on AWS, the SQLite catalog of
/// a local warehouse), with its files; split with Floe's own where there is one (a
/// local warehouse, the lock table), which a Delta-only topic needs.
pub async fn open(config: &FloeConfig, host: Host<'_>) -> Result<OpenedCatalog, OpenError> {
    let own: Option<Arc<dyn Catalog>> = match &host {
        Host::Aws { aws, lock_table: Some(table), .. } => {
            Some(Arc::new(LockTableCatalog::new(aws_sdk_dynamodb::Client::new(aws), table)))
        }
        Host::Aws { lock_table: None, .. } if config.has_delta_only() => {
            return Err(OpenError::Refused(
                "floe.toml has a Delta-only topic (formats = [\"delta\"]), whose Iceberg record Floe keeps in the \
             stack's lock table: name it (--lock-table, the stack's LockTableName output)",
            ));
        }
        Host::Aws { lock_table: None, .. } => None,
        Host::Local { sqlite } => Some(Arc::new(sqlite.named(OWN_CATALOG))),
    };
    let opened = open_catalog(config.catalog.as_ref(), host).await?;
    Ok(match own {
        Some(own) => OpenedCatalog { catalog: Arc::new(SplitCatalog::new(opened.catalog.clone(), own)), ..opened },
        None => opened,
    })
}

async fn open_catalog(config: Option<&CatalogConfig>, host: Host<'_>) -> Result<OpenedCatalog, OpenError> {
    match (config, host) {
        (None | Some(CatalogConfig::Glue), Host::Aws { aws, s3, .. }) => {
            Ok(OpenedCatalog::on_glue(aws_sdk_glue::Client::new(aws), s3))
        }
        (Some(CatalogConfig::Glue), Host::Local { .. }) => {
            let glue = glue(&aws_defaults().await);
            Ok(OpenedCatalog { delta_catalog: Some(glue.clone()), ..OpenedCatalog::local(glue) })
        }
        (None | Some(CatalogConfig::Sql), Host::Local { sqlite }) => Ok(OpenedCatalog::local(Arc::new(sqlite))),
        (Some(CatalogConfig::Sql), Host::Aws { .. }) => Err(OpenError::Refused(
            "catalog.type: \"sql\" is the local SQLite catalog of `floe local`; on AWS use glue, rest or s3tables",
        )),
        (Some(CatalogConfig::S3Tables(s3tables)), Host::Aws { aws, s3, .. }) => {
            Ok(OpenedCatalog::on_s3(Arc::new(S3TablesCatalog::from_config(aws, s3tables)), s3))
        }
        (Some(CatalogConfig::S3Tables(_)), Host::Local { .. }) => Err(OpenError::Refused(
            "catalog.type: \"s3tables\" keeps each table's files in the S3 storage S3 Tables assigns, \
             and `floe local` writes local files: deploy the Lambdas with this floe.toml instead",
        )),
        (Some(CatalogConfig::Rest(rest)), Host::Aws { aws, s3, .. }) => {
            let routes = VendedRoutes::new(Some(aws.clone()));
            let catalog = rest_catalog(rest, Some(aws), routes.clone()).await?;
            Ok(OpenedCatalog::routed(catalog, S3Clients::vended(s3, routes)))
        }
        (Some(CatalogConfig::Rest(rest)), Host::Local { .. }) => {
            let uses_aws = rest.sigv4.is_some() || matches!(rest.auth, RestAuth::Secret(_));
            let aws = if uses_aws { Some(aws_defaults().await) } else { None };
            let routes = VendedRoutes::new(aws.clone());
            let catalog = rest_catalog(rest, aws.as_ref(), routes.clone()).await?;
            // Its tables may be in S3 (with the credentials it vends, else the default
            // AWS ones, loaded on first use) or local.
            let clients = S3Clients::lazy(routes);
            Ok(OpenedCatalog {
                catalog,
                file_io: routed_file_io(clients.clone()),
                files: Arc::new(AnyFiles::new(clients.clone())),
                delta_log: Arc::new(S3LogStore::new(clients)),
                delta_catalog: None,
            })
        }
    }
}

fn glue(aws: &aws_config::SdkConfig) -> Arc<GlueCatalog> {
    Arc::new(GlueCatalog::new(aws_sdk_glue::Client::new(aws)))
}

async fn aws_defaults() -> aws_config::SdkConfig {
    aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await
}

/// A REST catalog with AWS's hooks ([`crate::rest_hooks`]), its vended credentials into `routes`.
async fn rest_catalog(
    rest: &RestCatalogConfig,
    aws: Option<&aws_config::SdkConfig>,
    routes: Arc<VendedRoutes>,
) -> Result<Arc<dyn Catalog>, RestSetupError> {
    let hooks = crate::rest_hooks::rest_hooks(rest, aws, routes)
        .map_err(|detail| RestSetupError { uri: rest.uri.clone(), detail })?;
    Ok(RestCatalog::connect(rest, hooks).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn floe_local_refuses_s3_tables_and_aws_refuses_sql_saying_why() {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = SqliteCatalog::open(&dir.path().join("catalog.db"), "floe").unwrap();
        let s3tables = CatalogConfig::S3Tables(floe_core::config::S3TablesConfig {
            table_bucket_arn: "arn:aws:s3tables:us-east-1:123456789012:bucket/floe".into(),
            compaction: false,
        });
        let config = |catalog| {
            let mut config = FloeConfig::default();
            config.catalog = Some(catalog);
            config
        };
        let e = open(&config(s3tables), Host::Local { sqlite }).await.err().unwrap().to_string();
        assert!(e.contains("`floe local` writes local files"), "{e}");
        let aws = aws_config::SdkConfig::builder().behavior_version(aws_config::BehaviorVersion::latest()).build();
        let s3 = aws_sdk_s3::Client::new(&aws);
        let host = Host::Aws { aws: &aws, s3, lock_table: None };
        let e = open(&config(CatalogConfig::Sql), host).await.err().unwrap().to_string();
        assert!(e.contains("on AWS use glue, rest or s3tables"), "{e}");
    }
}
