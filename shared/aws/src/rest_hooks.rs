//! What a REST catalog (`floe_core::catalog::rest`, not AWS-specific) takes from AWS:
//! SigV4 signing of its requests ([`SigV4Signer`], `catalog.sigv4`: Glue's and S3
//! Tables' Iceberg REST endpoints), the Secrets Manager secret of `catalog.secret_arn`
//! ([`SecretsManager`]), and the S3 clients its vended credentials go to
//! ([`crate::vended::VendedRoutes`]); [`rest_hooks`] puts them together.

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use aws_credential_types::provider::SharedCredentialsProvider;

use floe_core::catalog::rest::{ReadSecret, RestHooks, SignRequest};
use floe_core::config::{RestAuth, RestCatalogConfig, SigV4Config};

use crate::vended::VendedRoutes;

/// The hooks of a REST catalog on AWS: SigV4 with `aws`'s credentials when `sigv4` is
/// set, its secret read from Secrets Manager, its vended credentials into `routes`.
/// `aws` none (`floe local` without AWS): no signer, no secrets.
pub fn rest_hooks(
    config: &RestCatalogConfig,
    aws: Option<&aws_config::SdkConfig>,
    routes: Arc<VendedRoutes>,
) -> Result<RestHooks, String> {
    let mut hooks = RestHooks { storage: Some(routes), ..RestHooks::default() };
    let Some(aws) = aws else { return Ok(hooks) };
    if let Some(sigv4) = &config.sigv4 {
        let credentials = aws.credentials_provider().ok_or("catalog.sigv4: no AWS credentials provider configured")?;
        hooks.signer = Some(Arc::new(SigV4Signer { config: sigv4.clone(), credentials }));
    }
    if let RestAuth::Secret(_) = config.auth {
        hooks.secrets = Some(Arc::new(SecretsManager(aws_sdk_secretsmanager::Client::new(aws))));
    }
    Ok(hooks)
}

/// Signs each request with AWS SigV4 (the SDK's signer, the configuration's credentials).
pub struct SigV4Signer {
    config: SigV4Config,
    credentials: SharedCredentialsProvider,
}

#[async_trait]
impl SignRequest for SigV4Signer {
    async fn sign(&self, method: &str, url: &str, body: &[u8]) -> Result<Vec<(String, String)>, String> {
        use aws_credential_types::provider::ProvideCredentials;
        use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
        let fail = |message: String| format!("SigV4: {message}");
        let identity = self.credentials.provide_credentials().await.map_err(|e| fail(e.to_string()))?.into();
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.config.region)
            .name(&self.config.service)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| fail(e.to_string()))?
            .into();
        let signable = SignableRequest::new(method, url, std::iter::empty::<(&str, &str)>(), SignableBody::Bytes(body))
            .map_err(|e| fail(e.to_string()))?;
        let (instructions, _) = sign(signable, &params).map_err(|e| fail(e.to_string()))?.into_parts();
        let (headers, _) = instructions.into_parts();
        Ok(headers.into_iter().map(|h| (h.name().to_string(), h.value().to_string())).collect())
    }
}

/// The secret string of a Secrets Manager secret.
pub struct SecretsManager(pub aws_sdk_secretsmanager::Client);

#[async_trait]
impl ReadSecret for SecretsManager {
    async fn read(&self, arn: &str) -> Result<String, String> {
        let secret = self
            .0
            .get_secret_value()
            .secret_id(arn)
            .send()
            .await
            .map_err(|e| aws_sdk_secretsmanager::error::DisplayErrorContext(&e).to_string())?;
        secret.secret_string().map(str::to_string).ok_or_else(|| "the secret has no string value".into())
    }
}
