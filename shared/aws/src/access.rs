//! Start-up permission checks: the answer to a probe call (one that changes nothing) tells
//! whether IAM allowed the action. A refusal becomes [`CatalogError::AccessDenied`] naming
//! the action and the resource to grant; any other answer of the service (a missing table,
//! a refused version) means the call was allowed.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use crate::retry::sdk_error_retryable;
use floe_core::catalog::{Access, Catalog, CatalogError};
use floe_core::table::TableName;

/// [`Catalog::check_access`] as a Lambda runs it: at the first invocation (init makes no
/// calls) and then for each table the function meets for the first time; a refusal fails
/// that invocation, naming the action, and is checked again at the next.
pub struct AccessCheck {
    catalog: Arc<dyn Catalog>,
    /// What the function does to the tables (which permissions are probed).
    access: Access,
    /// The tables checked so far; `None` before the first check passed.
    passed: Mutex<Option<HashSet<TableName>>>,
}

impl AccessCheck {
    pub fn new(catalog: Arc<dyn Catalog>, access: Access) -> Self {
        AccessCheck { catalog, access, passed: Mutex::new(None) }
    }

    /// Checks the catalog (once) and those of `tables` not checked yet.
    pub async fn check(&self, tables: impl IntoIterator<Item = TableName>) -> Result<(), CatalogError> {
        let new: Vec<TableName> = {
            let passed = self.passed.lock().unwrap_or_else(|e| e.into_inner());
            let mut new: Vec<_> =
                tables.into_iter().filter(|t| passed.as_ref().is_none_or(|p| !p.contains(t))).collect();
            new.sort();
            new.dedup();
            if passed.is_some() && new.is_empty() {
                return Ok(());
            }
            new
        };
        self.catalog.check_access(&new, self.access).await?;
        self.passed.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_default().extend(new);
        Ok(())
    }
}

/// Whether an error code or HTTP status is IAM's refusal (`AccessDeniedException`, S3
/// Tables' `ForbiddenException`, 403).
pub fn access_denied(code: Option<&str>, status: Option<u16>) -> bool {
    matches!(code, Some("AccessDeniedException" | "AccessDenied" | "ForbiddenException")) || status == Some(403)
}

/// `Ok` when the probe of `action` (e.g. `s3tables:UpdateTableMetadataLocation`) on
/// `resource` was allowed; an error when IAM refused it or the service could not be reached.
pub fn probe<T, E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
    action: &str,
    resource: &str,
    result: Result<T, SdkError<E, HttpResponse>>,
) -> Result<(), CatalogError> {
    let Err(e) = result else { return Ok(()) };
    if access_denied(e.code(), e.raw_response().map(|r| r.status().as_u16())) {
        return Err(CatalogError::AccessDenied {
            action: action.to_string(),
            resource: resource.to_string(),
            detail: DisplayErrorContext(&e).to_string(),
        });
    }
    match e.as_service_error() {
        Some(_) => Ok(()),
        None => Err(CatalogError::Other {
            table: resource.to_string(),
            detail: format!("{action}: {}", DisplayErrorContext(&e)),
            retryable: sdk_error_retryable(&e),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use async_trait::async_trait;
    use floe_core::catalog::TablePointer;
    use iceberg::spec::TableMetadata;

    use super::*;
    use floe_core::retry::Retryable;

    /// A catalog that records its access checks and refuses them while `deny` is set.
    #[derive(Default)]
    struct Checks {
        seen: Mutex<Vec<Vec<TableName>>>,
        deny: AtomicBool,
    }

    #[async_trait]
    impl Catalog for Checks {
        async fn current(&self, _: &TableName) -> Result<Option<TablePointer>, CatalogError> {
            Ok(None)
        }
        async fn create(&self, _: &TableName, _: &TableMetadata, _: &str) -> Result<(), CatalogError> {
            Ok(())
        }
        async fn swap(&self, _: &TableName, _: &TablePointer, _: &TableMetadata, _: &str) -> Result<(), CatalogError> {
            Ok(())
        }
        async fn list(&self, _: &str) -> Result<Vec<TableName>, CatalogError> {
            Ok(Vec::new())
        }
        async fn check_access(&self, tables: &[TableName], _: Access) -> Result<(), CatalogError> {
            self.seen.lock().unwrap().push(tables.to_vec());
            if self.deny.load(Ordering::SeqCst) {
                let denied =
                    || CatalogError::AccessDenied { action: "a".into(), resource: "r".into(), detail: String::new() };
                return Err(denied());
            }
            Ok(())
        }
    }

    fn t(name: &str) -> TableName {
        TableName { namespace: "kafka".into(), name: name.into() }
    }

    #[tokio::test]
    async fn each_table_is_checked_once_and_a_refusal_again_at_the_next_invocation() {
        let catalog = Arc::new(Checks { deny: AtomicBool::new(true), ..Default::default() });
        let check = AccessCheck::new(catalog.clone(), Access::Commit);
        let refused = check.check([t("a")]).await.unwrap_err();
        assert!(!refused.retryable() && refused.to_string().contains("access denied: a on r"), "{refused}");
        catalog.deny.store(false, Ordering::SeqCst);
        check.check([t("a")]).await.unwrap();
        check.check([t("a"), t("a")]).await.unwrap();
        check.check([t("b"), t("a")]).await.unwrap();
        check.check(Vec::new()).await.unwrap();
        let seen = catalog.seen.lock().unwrap().clone();
        assert_eq!(seen, vec![vec![t("a")], vec![t("a")], vec![t("b")]]);
    }

    #[test]
    fn access_denied_is_told_from_other_errors() {
        assert!(access_denied(Some("AccessDeniedException"), Some(403)));
        assert!(access_denied(Some("ForbiddenException"), None));
        assert!(access_denied(None, Some(403)));
        assert!(!access_denied(Some("NotFoundException"), Some(404)));
        assert!(!access_denied(Some("ConflictException"), Some(409)));
        assert!(!access_denied(Some("EntityNotFoundException"), Some(400)));
    }
}
