//! An Iceberg REST catalog (Polaris, Snowflake Open Catalog, Unity, Nessie, Lakekeeper,
//! Gravitino, Glue's and S3 Tables' Iceberg endpoints) as Floe's [`Catalog`].
//!
//! ```text
//!  current  GET  {prefix}/namespaces/{ns}/tables/{t}            → metadata-location
//!  create   POST {prefix}/namespaces/{ns}/register             (Floe's metadata file; 409 ⇒ Conflict)
//!           (501: POST {prefix}/namespaces/{ns}/tables, a plain create of the same schema, spec, location)
//!  swap     POST {prefix}/namespaces/{ns}/tables/{t}            requirements: assert-table-uuid,
//!           assert-ref-snapshot-id (main, the expected snapshot) [+ schema / spec ids when they change];
//!           updates: what Floe's new metadata changed (add-schema, add-snapshot, set-snapshot-ref, …)
//!           409 ⇒ Conflict: reload and replan, as a Glue VersionId conflict
//!  location GET  {prefix}/namespaces/{ns}/tables/{t}            (an existing table's location), else
//!           POST {prefix}/namespaces/{ns}/tables  stage-create   (the location the catalog assigns;
//!           501: none, Floe's warehouse)
//!  tokens   POST oauth2_server_uri (client credentials)  again at 80% of expires_in, and once on a 401
//!  loads and staged creates: X-Iceberg-Access-Delegation: vended-credentials ─▶ RestHooks::storage
//! ```
//!
//! The catalog is the REST protocol's alone; what is its host's comes in [`RestHooks`]:
//! a request signer (SigV4 on AWS: `catalog.sigv4`), a secret reader
//! (`catalog.secret_arn`), and where vended storage credentials go ([`vended`]). floe-aws
//! gives them (`floe_aws::catalogs`); `floe local` without AWS gives only the last.
//!
//! The catalog's requirement check is the compare-and-swap: it applies the updates only
//! if `main` still points at the snapshot Floe planned on. The catalog writes its own
//! metadata file for the result, so Floe writes none for a swap
//! ([`Catalog::writes_metadata`]): one would never be referenced, and deleting it after
//! the commit would need the commit's outcome, which a lost answer leaves unknown. Floe
//! writes the manifests and manifest list the added snapshot names, under the table's
//! location; a table is created by registering a metadata file Floe wrote there.
//!
//! Storage: a table's files are under the location the catalog gives it (an existing
//! table's own, a new one's from a staged create, [`Catalog::create_location`]). Loads
//! and staged creates ask for vended credentials (`X-Iceberg-Access-Delegation:
//! vended-credentials`) when the host takes them ([`RestHooks::storage`]); those the
//! catalog gives (`config` or `storage-credentials`) are registered for the table's
//! location ([`vended::StorageCredentials`]), so every read and write of its files signs
//! with them, and the table is loaded again when they are due.
//!
//! Why not `iceberg-catalog-rest` (iceberg-rust 0.10.1): its commits are built only by
//! its `Transaction` actions (`TableCommit` cannot be built outside the crate), which
//! write their own snapshots, not Floe's (with Floe's offsets and files); it cannot sign
//! requests with SigV4, nor register a metadata file Floe wrote. This adapter reuses
//! iceberg's own REST models ([`TableUpdate`], [`TableRequirement`]) and adds only HTTP,
//! authentication (OAuth2 client credentials, bearer token, SigV4) and the error mapping.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use iceberg::spec::{SnapshotReference, TableMetadata};
use iceberg::{TableRequirement, TableUpdate};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::catalog::{Catalog, CatalogError, TablePointer};
use crate::config::{RestAuth, RestCatalogConfig};
use crate::vocabulary::TableName;

pub mod vended;

use vended::{ReloadTable, StorageCredentials, VendedS3};

const MAIN: &str = "main";
/// The header asking a catalog for storage credentials with a table (REST spec).
const ACCESS_DELEGATION: &str = "X-Iceberg-Access-Delegation";

/// Why the catalog could not be set up (its configuration, its credentials, its `/v1/config`).
#[derive(Debug, thiserror::Error)]
#[error("REST catalog {uri}: {detail}")]
pub struct RestSetupError {
    pub uri: String,
    pub detail: String,
}

/// Signs a request with the host's credentials (SigV4 on AWS): the headers to add.
#[async_trait]
pub trait SignRequest: Send + Sync {
    async fn sign(&self, method: &str, url: &str, body: &[u8]) -> Result<Vec<(String, String)>, String>;
}

/// Reads the secret string of `catalog.secret_arn` (Secrets Manager on AWS).
#[async_trait]
pub trait ReadSecret: Send + Sync {
    async fn read(&self, arn: &str) -> Result<String, String>;
}

/// What a REST catalog takes from its host, for what is not the REST protocol's own.
#[derive(Clone, Default)]
pub struct RestHooks {
    /// Signs each request: needed for `catalog.sigv4`.
    pub signer: Option<Arc<dyn SignRequest>>,
    /// Reads `catalog.secret_arn`.
    pub secrets: Option<Arc<dyn ReadSecret>>,
    /// Where vended storage credentials go; none: the catalog is not asked for them.
    pub storage: Option<Arc<dyn StorageCredentials>>,
}

/// The token source of a REST catalog.
enum Auth {
    None,
    Bearer(String),
    ClientCredentials { id: String, secret: String, scope: String, server: String },
    Signed(Arc<dyn SignRequest>),
}

struct Token {
    value: String,
    refresh_at: Instant,
}

pub struct RestCatalog {
    http: reqwest::Client,
    /// `{uri}/v1{/prefix}`.
    base: String,
    auth: Auth,
    token: Mutex<Option<Token>>,
    /// Where vended storage credentials go (none: not asked for).
    storage: Option<Arc<dyn StorageCredentials>>,
    /// Itself, for the storage to reload a table whose credentials are due.
    me: Weak<RestCatalog>,
    /// Vended storage endpoints may be plain `http://` to another host (`catalog.allow_insecure_http`).
    allow_insecure_http: bool,
}

/// One failed request: its status (none when it never got an answer) and the catalog's message.
struct Failure {
    status: Option<StatusCode>,
    message: String,
}

impl RestCatalog {
    /// Connects: reads the credential, gets a token if needed, and the catalog's
    /// `GET /v1/config` (its `prefix`). `hooks` sign (needed for `sigv4`), read secrets
    /// (for `secret_arn`), and take vended storage credentials (asked for only then).
    pub async fn connect(config: &RestCatalogConfig, hooks: RestHooks) -> Result<Arc<RestCatalog>, RestSetupError> {
        let setup = |detail: String| RestSetupError { uri: config.uri.clone(), detail };
        let http =
            reqwest::Client::builder().timeout(Duration::from_secs(30)).build().map_err(|e| setup(e.to_string()))?;
        let auth = Self::auth(config, &hooks).await.map_err(setup)?;
        let mut catalog = RestCatalog {
            http,
            base: format!("{}/v1", config.uri),
            auth,
            token: Mutex::new(None),
            storage: hooks.storage,
            me: Weak::new(),
            allow_insecure_http: config.allow_insecure_http,
        };
        let query = config.warehouse.as_ref().map(|w| format!("?warehouse={}", encode(w))).unwrap_or_default();
        let overrides = catalog
            .request(Method::GET, &format!("/config{query}"), None)
            .await
            .map_err(|f| setup(format!("GET /v1/config: {}", f.message)))?
            .and_then(|v| v.get("overrides").cloned())
            .unwrap_or_default();
        if let Some(prefix) = overrides.get("prefix").and_then(Value::as_str).filter(|p| !p.is_empty()) {
            catalog.base = format!("{}/{}", catalog.base, prefix.trim_matches('/'));
        }
        Ok(Arc::new_cyclic(|me| RestCatalog { me: me.clone(), ..catalog }))
    }

    async fn auth(config: &RestCatalogConfig, hooks: &RestHooks) -> Result<Auth, String> {
        let env = |name: &str, field: &str| {
            std::env::var(name).map_err(|_| format!("catalog.{field}: the environment variable {name} is not set"))
        };
        let need_aws = |field: &str| format!("catalog.{field} needs AWS credentials");
        let credential = match &config.auth {
            RestAuth::None => None,
            RestAuth::TokenEnv(name) => return Ok(Auth::Bearer(env(name, "token_env")?)),
            RestAuth::CredentialEnv(name) => Some(env(name, "credential_env")?),
            RestAuth::Secret(arn) => {
                let secrets = hooks.secrets.as_ref().ok_or_else(|| need_aws("secret_arn"))?;
                let error = |message: String| format!("catalog.secret_arn {arn}: {message}");
                match SecretValue::parse(&secrets.read(arn).await.map_err(error)?).map_err(error)? {
                    SecretValue::Token(token) => return Ok(Auth::Bearer(token)),
                    SecretValue::Credential(credential) => Some(credential),
                }
            }
        };
        if let Some(credential) = credential {
            let (id, secret) =
                credential.split_once(':').ok_or("the client credential is not \"client_id:client_secret\"")?;
            return Ok(Auth::ClientCredentials {
                id: id.to_string(),
                secret: secret.to_string(),
                scope: config.scope.clone().unwrap_or_else(|| "catalog".into()),
                server: config.oauth2_server_uri.clone().unwrap_or_else(|| format!("{}/v1/oauth/tokens", config.uri)),
            });
        }
        match &config.sigv4 {
            Some(_) => Ok(Auth::Signed(hooks.signer.clone().ok_or_else(|| need_aws("sigv4"))?)),
            None => Ok(Auth::None),
        }
    }

    /// The bearer token to send, fetched (client credentials) when missing or old.
    async fn bearer(&self) -> Result<Option<String>, Failure> {
        match &self.auth {
            Auth::None | Auth::Signed(_) => Ok(None),
            Auth::Bearer(token) => Ok(Some(token.clone())),
            Auth::ClientCredentials { id, secret, scope, server } => {
                let mut token = self.token.lock().await;
                if let Some(t) = token.as_ref().filter(|t| Instant::now() < t.refresh_at) {
                    return Ok(Some(t.value.clone()));
                }
                let form = [
                    ("grant_type", "client_credentials"),
                    ("client_id", id),
                    ("client_secret", secret),
                    ("scope", scope),
                ];
                let response = self.http.post(server).form(&form).send().await.map_err(transport)?;
                let status = response.status();
                let body: Value = response.json().await.unwrap_or_default();
                if !status.is_success() {
                    let message = format!(
                        "the token endpoint {server} refused the client credentials ({status}): {}",
                        error_message(&body)
                    );
                    return Err(Failure { status: Some(status), message });
                }
                let value = body["access_token"].as_str().ok_or_else(|| Failure {
                    status: None,
                    message: format!("the token endpoint {server} answered without access_token"),
                })?;
                // Refreshed at 80% of its life (an hour when the server does not say).
                let life = body["expires_in"].as_u64().unwrap_or(3600);
                let refresh_at = Instant::now() + Duration::from_secs(life * 4 / 5);
                *token = Some(Token { value: value.to_string(), refresh_at });
                Ok(Some(value.to_string()))
            }
        }
    }

    /// Sends one request to `{base}{path}`; `Ok(None)` on 404 and on an empty answer.
    async fn request(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Option<Value>, Failure> {
        self.send(method, path, body, false).await
    }

    /// [`Self::request`] for a table's storage too: asking for vended credentials when on.
    async fn table_request(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Option<Value>, Failure> {
        self.send(method, path, body, self.vending()).await
    }

    fn vending(&self) -> bool {
        self.storage.is_some()
    }

    /// Sends one request; with OAuth2 client credentials, a 401 (a token the server ended
    /// early, or whose life it did not say) fetches a new token once and sends again.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        vended: bool,
    ) -> Result<Option<Value>, Failure> {
        match self.send_once(method.clone(), path, body, vended).await {
            Err(f) if f.status == Some(StatusCode::UNAUTHORIZED) && self.forget_token().await => {
                tracing::info!(path, "the catalog refused the token (401): sending again with a new one");
                self.send_once(method, path, body, vended).await
            }
            other => other,
        }
    }

    /// Drops the token in hand so that the next request fetches one; `false` when there
    /// is none to fetch (no client credentials).
    async fn forget_token(&self) -> bool {
        let refetchable = matches!(self.auth, Auth::ClientCredentials { .. });
        if refetchable {
            *self.token.lock().await = None;
        }
        refetchable
    }

    async fn send_once(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        vended: bool,
    ) -> Result<Option<Value>, Failure> {
        let url = format!("{}{path}", self.base);
        let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let mut request = self.http.request(method.clone(), &url);
        if vended {
            request = request.header(ACCESS_DELEGATION, "vended-credentials");
        }
        if body.is_some() {
            request = request.header("content-type", "application/json").body(bytes.clone());
        }
        if let Some(token) = self.bearer().await? {
            request = request.bearer_auth(token);
        }
        if let Auth::Signed(signer) = &self.auth {
            let headers = signer
                .sign(method.as_str(), &url, &bytes)
                .await
                .map_err(|message| Failure { status: None, message })?;
            for (name, value) in headers {
                request = request.header(name, value);
            }
        }
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let text = response.text().await.map_err(transport)?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        match status {
            s if s.is_success() => Ok((!value.is_null()).then_some(value)),
            StatusCode::NOT_FOUND => Ok(None),
            s => {
                let detail = if value.is_null() { text.chars().take(300).collect() } else { error_message(&value) };
                Err(Failure { status: Some(s), message: format!("{method} {url}: {s}: {detail}") })
            }
        }
    }

    fn table_path(table: &TableName) -> String {
        format!("/namespaces/{}/tables/{}", encode(&table.namespace), encode(&table.name))
    }

    /// Creates the namespace; one that exists already is fine.
    async fn ensure_namespace(&self, table: &TableName) -> Result<(), CatalogError> {
        let body = json!({"namespace": [table.namespace], "properties": {}});
        match self.request(Method::POST, "/namespaces", Some(&body)).await {
            Ok(_) => Ok(()),
            Err(f) if f.status == Some(StatusCode::CONFLICT) => Ok(()),
            Err(f) => Err(failure(table, f)),
        }
    }

    /// `loadTable`: the metadata location and the metadata as the catalog holds them
    /// (the storage credentials it vended registered).
    async fn load(&self, table: &TableName) -> Result<Option<(String, TableMetadata)>, CatalogError> {
        let Some(answer) =
            self.table_request(Method::GET, &Self::table_path(table), None).await.map_err(|f| failure(table, f))?
        else {
            return Ok(None);
        };
        let location = answer["metadata-location"].as_str().map(str::to_string);
        let metadata: Result<TableMetadata, _> =
            serde_json::from_value(answer["metadata"].clone()).map_err(|e| invalid(table, e));
        match (location, metadata) {
            (Some(location), Ok(metadata)) => {
                self.register_storage(table, metadata.location(), &answer)?;
                Ok(Some((location, metadata)))
            }
            (None, _) => Err(invalid(table, "loadTable answered without metadata-location")),
            (_, Err(e)) => Err(e),
        }
    }

    /// The storage credentials a table answer vended, for the files under `location`
    /// (none: the process's own credentials again). Credentials for a plain `http://`
    /// endpoint on another host are refused (their session token would cross the network
    /// in clear text) unless `catalog.allow_insecure_http` is set.
    fn register_storage(&self, table: &TableName, location: &str, answer: &Value) -> Result<(), CatalogError> {
        let Some(storage) = &self.storage else {
            return Ok(());
        };
        let vended = VendedS3::from_load_result(location, answer);
        if let Some(endpoint) = refused_endpoint(&vended, self.allow_insecure_http) {
            return Err(invalid(
                table,
                format!(
                    "the catalog vended storage credentials for {endpoint}: over http:// their session token would cross the network in clear text (use an https:// endpoint in the catalog, or set catalog.allow_insecure_http = true)"
                ),
            ));
        }
        tracing::debug!(table = %table, credentials = vended.len(), "storage credentials vended");
        let me: Weak<dyn ReloadTable> = self.me.clone();
        let now = chrono::Utc::now().timestamp_millis();
        storage.register(table, location, vended, me, now);
        Ok(())
    }
}

impl RestCatalog {
    /// Commits `new` over `base` (the table as Floe planned on it): the catalog refuses
    /// it with 409, a [`CatalogError::Conflict`], when `main` moved since `base`.
    pub async fn commit(
        &self,
        table: &TableName,
        base: &TableMetadata,
        new: &TableMetadata,
    ) -> Result<(), CatalogError> {
        let mut body = commit_request(base, new);
        body["identifier"] = json!({"namespace": [table.namespace], "name": table.name});
        match self.request(Method::POST, &Self::table_path(table), Some(&body)).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(invalid(table, "the commit answered 404: the table is gone from the catalog")),
            Err(f) => Err(failure(table, f)),
        }
    }
}

/// What a Secrets Manager secret of `catalog.secret_arn` holds.
pub enum SecretValue {
    Credential(String),
    Token(String),
}

impl SecretValue {
    /// `{"credential": "id:secret"}` or `{"token": "…"}`.
    pub fn parse(text: &str) -> Result<SecretValue, String> {
        let value: Value = serde_json::from_str(text).map_err(|_| "the secret is not a JSON object".to_string())?;
        match (value["credential"].as_str(), value["token"].as_str()) {
            (Some(c), _) => Ok(SecretValue::Credential(c.to_string())),
            (None, Some(t)) => Ok(SecretValue::Token(t.to_string())),
            _ => Err("the secret holds neither \"credential\" nor \"token\"".into()),
        }
    }
}

fn encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// The vended storage endpoint refused: a plain `http://` one on another host, unless allowed.
fn refused_endpoint(vended: &[VendedS3], allow_insecure_http: bool) -> Option<&str> {
    let mut endpoints = vended.iter().filter_map(|v| v.endpoint.as_deref());
    endpoints.find(|e| crate::config::insecure(e)).filter(|_| !allow_insecure_http)
}

/// A request the catalog does not implement (501, or 405 for the method).
fn unsupported(f: &Failure) -> bool {
    matches!(f.status, Some(StatusCode::NOT_IMPLEMENTED | StatusCode::METHOD_NOT_ALLOWED))
}

fn transport(e: reqwest::Error) -> Failure {
    Failure { status: None, message: e.to_string() }
}

/// The REST spec's `{"error": {"message", "type", "code"}}`, or the body as it is.
fn error_message(body: &Value) -> String {
    let error = &body["error"];
    match (error["type"].as_str(), error["message"].as_str()) {
        (Some(kind), Some(message)) => format!("{kind}: {message}"),
        (None, Some(message)) => message.to_string(),
        _ => body.to_string().chars().take(300).collect(),
    }
}

fn invalid(table: &TableName, detail: impl std::fmt::Display) -> CatalogError {
    CatalogError::Other { table: table.to_string(), detail: detail.to_string(), retryable: false }
}

/// A failed request as a [`CatalogError`]: 409 a conflict; 5xx, 429 and no answer
/// retryable; 401/403 not, naming what to check.
fn failure(table: &TableName, f: Failure) -> CatalogError {
    let detail = f.message;
    match f.status {
        Some(StatusCode::CONFLICT) => CatalogError::Conflict { table: table.to_string(), detail },
        Some(StatusCode::UNAUTHORIZED) => invalid(
            table,
            format!(
                "{detail} (the catalog did not accept Floe's credential: check catalog.credential_env, token_env or secret_arn)"
            ),
        ),
        Some(StatusCode::FORBIDDEN) => invalid(
            table,
            format!(
                "{detail} (Floe's principal lacks a permission on this table or namespace: it needs to create, load and update tables)"
            ),
        ),
        Some(s) if s.is_server_error() || s == StatusCode::TOO_MANY_REQUESTS => {
            CatalogError::Other { table: table.to_string(), detail, retryable: true }
        }
        Some(_) => invalid(table, detail),
        None => CatalogError::Other { table: table.to_string(), detail, retryable: true },
    }
}

/// The requirements and updates that turn `base` into `new`: Floe's commit as the REST
/// commit protocol states it.
pub fn commit_request(base: &TableMetadata, new: &TableMetadata) -> Value {
    let mut requirements = vec![
        TableRequirement::UuidMatch { uuid: base.uuid() },
        TableRequirement::RefSnapshotIdMatch {
            r#ref: MAIN.to_string(),
            snapshot_id: base.snapshot_for_ref(MAIN).map(|s| s.snapshot_id()),
        },
    ];
    let mut updates = Vec::new();
    for schema in new.schemas_iter().filter(|s| base.schema_by_id(s.schema_id()).is_none()) {
        updates.push(TableUpdate::AddSchema { schema: schema.as_ref().clone() });
    }
    if new.current_schema_id() != base.current_schema_id() {
        requirements.push(TableRequirement::CurrentSchemaIdMatch { current_schema_id: base.current_schema_id() });
        updates.push(TableUpdate::SetCurrentSchema { schema_id: new.current_schema_id() });
    }
    for spec in new.partition_specs_iter().filter(|s| base.partition_spec_by_id(s.spec_id()).is_none()) {
        updates.push(TableUpdate::AddSpec { spec: spec.as_ref().clone().into_unbound() });
    }
    if new.default_partition_spec_id() != base.default_partition_spec_id() {
        requirements.push(TableRequirement::DefaultSpecIdMatch { default_spec_id: base.default_partition_spec_id() });
        updates.push(TableUpdate::SetDefaultSpec { spec_id: new.default_partition_spec_id() });
    }
    let mut added: Vec<_> = new.snapshots().filter(|s| base.snapshot_by_id(s.snapshot_id()).is_none()).collect();
    added.sort_by_key(|s| s.sequence_number());
    for snapshot in added {
        updates.push(TableUpdate::AddSnapshot { snapshot: snapshot.as_ref().clone() });
    }
    let (base_refs, new_refs) = (refs(base), refs(new));
    for (name, reference) in &new_refs {
        if base_refs.get(name) != Some(reference) {
            updates.push(TableUpdate::SetSnapshotRef { ref_name: name.clone(), reference: reference.clone() });
        }
    }
    let removed: Vec<i64> =
        base.snapshots().map(|s| s.snapshot_id()).filter(|id| new.snapshot_by_id(*id).is_none()).collect();
    if !removed.is_empty() {
        updates.push(TableUpdate::RemoveSnapshots { snapshot_ids: removed });
    }
    for name in base_refs.keys().filter(|name| !new_refs.contains_key(*name)) {
        updates.push(TableUpdate::RemoveSnapshotRef { ref_name: name.clone() });
    }
    let changed: HashMap<String, String> = new
        .properties()
        .iter()
        .filter(|(k, v)| base.properties().get(*k) != Some(v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !changed.is_empty() {
        updates.push(TableUpdate::SetProperties { updates: changed });
    }
    let gone: Vec<String> = base.properties().keys().filter(|k| !new.properties().contains_key(*k)).cloned().collect();
    if !gone.is_empty() {
        updates.push(TableUpdate::RemoveProperties { removals: gone });
    }
    json!({"requirements": requirements, "updates": updates})
}

/// The table's branches and tags (iceberg-rust keeps them private; its JSON has them).
fn refs(metadata: &TableMetadata) -> HashMap<String, SnapshotReference> {
    serde_json::to_value(metadata).ok().and_then(|v| serde_json::from_value(v["refs"].clone()).ok()).unwrap_or_default()
}

#[async_trait]
impl ReloadTable for RestCatalog {
    async fn reload(&self, table: &TableName) -> Result<(), String> {
        self.load(table).await.map(drop).map_err(|e| e.to_string())
    }
}

#[async_trait]
impl Catalog for RestCatalog {
    async fn current(&self, table: &TableName) -> Result<Option<TablePointer>, CatalogError> {
        Ok(self.load(table).await?.map(|(metadata_location, _)| TablePointer { metadata_location, version: None }))
    }

    /// Registers the metadata file Floe wrote; a catalog without `register` (501) makes
    /// the table itself from the same schema, spec, location and properties (plain
    /// create: its own UUID and field ids, which the commit then follows).
    async fn create(&self, table: &TableName, metadata: &TableMetadata, location: &str) -> Result<(), CatalogError> {
        self.ensure_namespace(table).await?;
        let body = json!({"name": table.name, "metadata-location": location});
        let path = format!("/namespaces/{}/register", encode(&table.namespace));
        match self.request(Method::POST, &path, Some(&body)).await {
            Ok(_) => Ok(()),
            Err(f) if unsupported(&f) => {
                tracing::info!(table = %table, "the catalog registers no metadata files: creating the table instead");
                // The format version goes as the reserved property `format-version` (the
                // REST spec's create has no field of its own for it).
                let mut properties = metadata.properties().clone();
                if metadata.format_version() != iceberg::spec::FormatVersion::V2 {
                    properties.insert("format-version".into(), (metadata.format_version() as u8).to_string());
                }
                let body = json!({
                    "name": table.name,
                    "location": metadata.location(),
                    "schema": metadata.current_schema(),
                    "partition-spec": metadata.default_partition_spec(),
                    "properties": properties,
                });
                let path = format!("/namespaces/{}/tables", encode(&table.namespace));
                self.request(Method::POST, &path, Some(&body)).await.map(drop).map_err(|f| failure(table, f))
            }
            Err(f) => Err(failure(table, f)),
        }
    }

    async fn swap(
        &self,
        table: &TableName,
        expected: &TablePointer,
        metadata: &TableMetadata,
        _location: &str,
    ) -> Result<(), CatalogError> {
        let Some((current, base)) = self.load(table).await? else {
            return Err(invalid(table, "the table is gone from the catalog"));
        };
        if current != expected.metadata_location {
            let detail = format!("the table moved to {current} since {} was read", expected.metadata_location);
            return Err(CatalogError::Conflict { table: table.to_string(), detail });
        }
        self.commit(table, &base, metadata).await
    }

    /// The catalog applies the commit's updates and writes the metadata file itself.
    fn writes_metadata(&self) -> bool {
        true
    }

    async fn list(&self, namespace: &str) -> Result<Vec<TableName>, CatalogError> {
        let probe = TableName { namespace: namespace.to_string(), name: "*".into() };
        let mut out = Vec::new();
        let mut page: Option<String> = None;
        loop {
            let query = page.as_ref().map(|t| format!("?pageToken={}", encode(t))).unwrap_or_default();
            let path = format!("/namespaces/{}/tables{query}", encode(namespace));
            let Some(answer) = self.request(Method::GET, &path, None).await.map_err(|f| failure(&probe, f))? else {
                break;
            };
            for id in answer["identifiers"].as_array().into_iter().flatten() {
                if let Some(name) = id["name"].as_str() {
                    out.push(TableName { namespace: namespace.to_string(), name: name.to_string() });
                }
            }
            page = answer["next-page-token"].as_str().filter(|t| !t.is_empty()).map(str::to_string);
            if page.is_none() {
                break;
            }
        }
        out.sort();
        Ok(out)
    }

    /// An existing table's own location (where the catalog and its maintenance look,
    /// whoever made the table); for a new one, the location the catalog assigns.
    async fn create_location(&self, table: &TableName) -> Result<Option<String>, CatalogError> {
        if let Some((_, metadata)) = self.load(table).await? {
            return Ok(Some(metadata.location().trim_end_matches('/').to_string()));
        }
        self.ensure_namespace(table).await?;
        // A staged create commits nothing: the catalog only answers the metadata it would
        // create, with the location it assigns (and the credentials for it).
        let body = json!({
            "name": table.name,
            "schema": {"type": "struct", "schema-id": 0, "fields": []},
            "stage-create": true,
        });
        let path = format!("/namespaces/{}/tables", encode(&table.namespace));
        let answer = match self.table_request(Method::POST, &path, Some(&body)).await {
            Ok(answer) => answer,
            // No staged create: the files go under Floe's warehouse, where the table is then created.
            Err(f) if unsupported(&f) => return Ok(None),
            Err(f) => return Err(failure(table, f)),
        };
        let Some(answer) = answer else { return Ok(None) };
        let Some(location) = answer["metadata"]["location"].as_str() else { return Ok(None) };
        self.register_storage(table, location, &answer)?;
        Ok(Some(location.trim_end_matches('/').to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::Retryable;

    #[test]
    fn secrets_hold_a_credential_or_a_token() {
        assert!(matches!(SecretValue::parse(r#"{"credential": "a:b"}"#), Ok(SecretValue::Credential(c)) if c == "a:b"));
        assert!(matches!(SecretValue::parse(r#"{"token": "t"}"#), Ok(SecretValue::Token(t)) if t == "t"));
        assert!(SecretValue::parse(r#"{"password": "p"}"#).is_err());
        assert!(SecretValue::parse("a:b").is_err());
    }

    #[test]
    fn statuses_map_to_conflict_retryable_or_named_permission() {
        let t = TableName { namespace: "n".into(), name: "t".into() };
        let at = |status: u16| failure(&t, Failure { status: StatusCode::from_u16(status).ok(), message: "m".into() });
        assert!(at(409).is_conflict());
        assert!(at(503).retryable() && at(429).retryable() && !at(503).is_conflict());
        assert!(!at(401).retryable() && at(401).to_string().contains("credential"));
        assert!(!at(403).retryable() && at(403).to_string().contains("permission"));
        assert!(!at(400).retryable());
    }

    #[test]
    fn a_commit_requires_the_base_and_states_what_changed() {
        use iceberg::spec::{NestedField, PartitionSpec, PrimitiveType, Schema, Type};
        use std::sync::Arc;
        let field = |id, name: &str| Arc::new(NestedField::optional(id, name, Type::Primitive(PrimitiveType::Long)));
        let schema = Schema::builder().with_fields(vec![field(1, "a")]).build().unwrap();
        let (base, _) = crate::table::new_table_metadata(
            "file:///t",
            &schema,
            &PartitionSpec::unpartition_spec(),
            iceberg::spec::FormatVersion::V2,
        )
        .unwrap();
        let wider =
            Schema::builder().with_schema_id(1).with_fields(vec![field(1, "a"), field(2, "b")]).build().unwrap();
        let new = base
            .clone()
            .into_builder(None)
            .add_current_schema(wider)
            .unwrap()
            .set_properties(HashMap::from([("k".to_string(), "v".to_string())]))
            .unwrap()
            .remove_properties(&["floe.managed".to_string()])
            .unwrap()
            .build()
            .unwrap()
            .metadata;
        let request = commit_request(&base, &new);
        let kinds = |key: &str, field: &str| -> Vec<String> {
            request[key].as_array().unwrap().iter().map(|r| r[field].as_str().unwrap().to_string()).collect()
        };
        let required = kinds("requirements", "type");
        assert_eq!(required, ["assert-table-uuid", "assert-ref-snapshot-id", "assert-current-schema-id"]);
        assert_eq!(request["requirements"][0]["uuid"], base.uuid().to_string());
        assert_eq!(
            (&request["requirements"][1]["ref"], &request["requirements"][1]["snapshot-id"]),
            (&json!("main"), &Value::Null)
        );
        let actions = kinds("updates", "action");
        assert_eq!(actions, ["add-schema", "set-current-schema", "set-properties", "remove-properties"]);
        assert_eq!(request["updates"][2]["updates"], json!({"k": "v"}));
        assert_eq!(request["updates"][3]["removals"], json!(["floe.managed"]));
        // Nothing changed: the requirements alone.
        assert_eq!(commit_request(&new, &new)["updates"], json!([]));
    }

    #[test]
    fn vended_credentials_for_a_plain_http_endpoint_elsewhere_are_refused_unless_allowed() {
        let vended = |endpoint: &str| {
            let config = json!({"s3.endpoint": endpoint, "s3.access-key-id": "k", "s3.secret-access-key": "s"});
            VendedS3::from_load_result("s3://b/t", &json!({"config": config}))
        };
        assert_eq!(refused_endpoint(&vended("http://s3.example.com"), false), Some("http://s3.example.com"));
        assert_eq!(refused_endpoint(&vended("http://s3.example.com"), true), None);
        assert_eq!(refused_endpoint(&vended("https://s3.example.com"), false), None);
        assert_eq!(refused_endpoint(&vended("http://127.0.0.1:5000"), false), None);
    }

    #[test]
    fn names_are_percent_encoded() {
        assert_eq!(encode("a_b-1"), "a_b-1");
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
    }
}
