//! Schemas by id and by subject: a Confluent Schema Registry over its REST API, or local
//! schema files for users without one.
//!
//! The HTTP client caches schemas by id (ids are immutable), bounds every request with a
//! timeout, retries 5xx answers, throttling and transport failures a few times with
//! backoff, and never logs credentials.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

/// The kind of a registered schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SchemaType {
    Avro,
    Protobuf,
    Json,
}

/// A schema as the registry returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredSchema {
    pub id: u32,
    pub schema_type: SchemaType,
    pub schema: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("schema {0} not found")]
    NotFound(String),
    #[error("schema registry {url}: {message}")]
    Unavailable { url: String, message: String },
    #[error("schema registry {url}: unexpected answer: {message}")]
    Invalid { url: String, message: String },
    #[error("{path}: {message}")]
    File { path: String, message: String },
}

impl RegistryError {
    /// True when the registry could not be reached or answered 5xx / 429: the same
    /// request may succeed later. An unknown id or a bad answer will not.
    pub fn retryable(&self) -> bool {
        matches!(self, RegistryError::Unavailable { .. })
    }
}

#[async_trait]
pub trait SchemaRegistry: Send + Sync {
    /// The schema registered under `id`.
    async fn schema_by_id(&self, id: u32) -> Result<Arc<RegisteredSchema>, RegistryError>;
    /// The latest version of `subject`.
    async fn latest(&self, subject: &str) -> Result<Arc<RegisteredSchema>, RegistryError>;
}

/// Basic-auth credentials; `Debug` never shows them.
#[derive(Clone)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credentials(<redacted>)")
    }
}

/// A Confluent Schema Registry over HTTP.
pub struct HttpSchemaRegistry {
    client: reqwest::Client,
    base: String,
    credentials: Option<Credentials>,
    attempts: u32,
    backoff: Duration,
    by_id: Mutex<HashMap<u32, Arc<RegisteredSchema>>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchemaAnswer {
    schema: String,
    schema_type: Option<SchemaType>,
    id: Option<u32>,
}

impl HttpSchemaRegistry {
    pub fn new(url: &str, credentials: Option<Credentials>, timeout: Duration) -> Result<Self, RegistryError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| RegistryError::Invalid { url: url.to_string(), message: e.to_string() })?;
        Ok(HttpSchemaRegistry {
            client,
            base: url.trim_end_matches('/').to_string(),
            credentials,
            attempts: 4,
            backoff: Duration::from_millis(100),
            by_id: Mutex::new(HashMap::new()),
        })
    }

    /// Changes the retry budget: `attempts` tries, waiting `backoff`, 2×, 4×… between them.
    pub fn with_retries(mut self, attempts: u32, backoff: Duration) -> Self {
        self.attempts = attempts.max(1);
        self.backoff = backoff;
        self
    }

    /// Caches an answer under its id (ids never change their schema).
    fn remember(&self, id: u32, answer: SchemaAnswer) -> Arc<RegisteredSchema> {
        let schema_type = answer.schema_type.unwrap_or(SchemaType::Avro);
        let schema = Arc::new(RegisteredSchema { id, schema_type, schema: answer.schema });
        self.by_id.lock().expect("cache lock").insert(id, schema.clone());
        schema
    }

    async fn get(&self, path: &str, what: &str) -> Result<SchemaAnswer, RegistryError> {
        let url = format!("{}{path}", self.base);
        let unavailable = |message: String| RegistryError::Unavailable { url: url.clone(), message };
        let mut last = None;
        for attempt in 0..self.attempts {
            if attempt > 0 {
                tokio::time::sleep(self.backoff * 2u32.pow(attempt - 1)).await;
            }
            let mut request = self.client.get(&url).header("Accept", "application/vnd.schemaregistry.v1+json");
            if let Some(c) = &self.credentials {
                request = request.basic_auth(&c.username, Some(&c.password));
            }
            match request.send().await {
                Err(e) => last = Some(unavailable(e.without_url().to_string())),
                Ok(response) => {
                    let status = response.status();
                    if status == reqwest::StatusCode::NOT_FOUND {
                        return Err(RegistryError::NotFound(what.to_string()));
                    }
                    if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
                        last = Some(unavailable(format!("HTTP {status}")));
                        continue;
                    }
                    if !status.is_success() {
                        return Err(RegistryError::Invalid { url, message: format!("HTTP {status}") });
                    }
                    return response
                        .json()
                        .await
                        .map_err(|e| RegistryError::Invalid { url, message: e.without_url().to_string() });
                }
            }
            tracing::warn!(url = %url, attempt, "schema registry request failed, retrying");
        }
        Err(last.unwrap_or_else(|| unavailable("no attempt made".into())))
    }
}

#[async_trait]
impl SchemaRegistry for HttpSchemaRegistry {
    async fn schema_by_id(&self, id: u32) -> Result<Arc<RegisteredSchema>, RegistryError> {
        if let Some(s) = self.by_id.lock().expect("cache lock").get(&id) {
            return Ok(s.clone());
        }
        let answer = self.get(&format!("/schemas/ids/{id}"), &format!("id {id}")).await?;
        Ok(self.remember(id, answer))
    }

    async fn latest(&self, subject: &str) -> Result<Arc<RegisteredSchema>, RegistryError> {
        let answer = self.get(&format!("/subjects/{subject}/versions/latest"), &format!("subject {subject}")).await?;
        let id = answer.id.ok_or_else(|| RegistryError::Invalid {
            url: format!("{}/subjects/{subject}/versions/latest", self.base),
            message: "no id in the answer".into(),
        })?;
        Ok(self.remember(id, answer))
    }
}

/// One local schema file standing in for a registry: every id and subject resolve to it.
pub struct FileSchema {
    path: PathBuf,
    schema: Arc<RegisteredSchema>,
}

impl FileSchema {
    pub fn load(path: impl Into<PathBuf>, schema_type: SchemaType) -> Result<FileSchema, RegistryError> {
        let path = path.into();
        let schema = std::fs::read_to_string(&path)
            .map_err(|e| RegistryError::File { path: path.display().to_string(), message: e.to_string() })?;
        Ok(FileSchema { path, schema: Arc::new(RegisteredSchema { id: 0, schema_type, schema }) })
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

#[async_trait]
impl SchemaRegistry for FileSchema {
    async fn schema_by_id(&self, _id: u32) -> Result<Arc<RegisteredSchema>, RegistryError> {
        Ok(self.schema.clone())
    }

    async fn latest(&self, _subject: &str) -> Result<Arc<RegisteredSchema>, RegistryError> {
        Ok(self.schema.clone())
    }
}
