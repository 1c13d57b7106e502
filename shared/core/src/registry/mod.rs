//! Schemas by id, by GUID and by subject: a Confluent Schema Registry over its REST API, or local
//! schema files for users without one.
//!
//! The HTTP client caches schemas by id and by GUID (both immutable), bounds every request with a
//! timeout, retries 5xx answers, throttling and transport failures a few times with
//! backoff, and never logs credentials.
//!
//! A registered schema may reference others (a Protobuf `import`, an Avro named type or a
//! JSON Schema `$ref` of another subject): [`references`] fetches them, by subject and
//! version, depth first.

pub mod wire;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;

use crate::retry::{RetryPolicy, Retryable, with_retries};

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
    /// Schemas this one uses, by the name it uses them under.
    pub references: Vec<SchemaReference>,
}

/// A reference from one registered schema to another: `name` is how the referencing
/// schema names it (a Protobuf import path, an Avro full name, the document of a JSON
/// Schema `$ref`), `subject` and `version` where the registry keeps it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct SchemaReference {
    pub name: String,
    pub subject: String,
    pub version: i64,
}

/// A referenced schema, under the name the referencing schema uses.
#[derive(Debug, Clone)]
pub struct ReferencedSchema {
    pub name: String,
    pub schema: Arc<RegisteredSchema>,
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
    /// The `[schema_registry]` settings cannot make a client (checked at start-up).
    #[error("schema_registry.{field}: {message}")]
    Config { field: &'static str, message: String },
}

impl Retryable for RegistryError {
    /// True when the registry could not be reached or answered 5xx / 429: the same
    /// request may succeed later. An unknown id or a bad answer will not.
    fn retryable(&self) -> bool {
        matches!(self, RegistryError::Unavailable { .. })
    }
}

#[async_trait]
pub trait SchemaRegistry: Send + Sync {
    /// The schema registered under `id`.
    async fn schema_by_id(&self, id: u32) -> Result<Arc<RegisteredSchema>, RegistryError>;
    /// The schema whose GUID is `guid` (named by a `__value_schema_id` / `__key_schema_id`
    /// record header); a registry that has no GUIDs does not know it.
    async fn schema_by_guid(&self, guid: uuid::Uuid) -> Result<Arc<RegisteredSchema>, RegistryError> {
        Err(RegistryError::NotFound(format!("guid {guid}")))
    }
    /// The latest version of `subject`.
    async fn latest(&self, subject: &str) -> Result<Arc<RegisteredSchema>, RegistryError>;
    /// Version `version` of `subject`.
    async fn version(&self, subject: &str, version: i64) -> Result<Arc<RegisteredSchema>, RegistryError>;
}

/// A schema with every schema it references ([`references`]).
#[derive(Debug, Clone)]
pub struct Resolved {
    pub schema: Arc<RegisteredSchema>,
    pub references: Vec<ReferencedSchema>,
}

impl Resolved {
    /// A schema that references nothing.
    pub fn alone(schema: Arc<RegisteredSchema>) -> Resolved {
        Resolved { schema, references: Vec::new() }
    }
}

/// Fetches what `schema` references ([`references`]).
pub async fn resolve(registry: &dyn SchemaRegistry, schema: Arc<RegisteredSchema>) -> Result<Resolved, RegistryError> {
    let references = references(registry, &schema).await?;
    Ok(Resolved { schema, references })
}

/// `segment` as one URL path segment: every byte but RFC 3986's unreserved characters
/// percent-encoded (subject names may hold `/`, `:`, spaces…).
fn path_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// References deeper than this are refused (a cycle, or a registry gone wrong).
const MAX_REFERENCE_DEPTH: usize = 16;

/// Every schema `schema` references, directly or through others, each once, those a
/// schema depends on before it.
pub async fn references(
    registry: &dyn SchemaRegistry,
    schema: &RegisteredSchema,
) -> Result<Vec<ReferencedSchema>, RegistryError> {
    let mut found: Vec<ReferencedSchema> = Vec::new();
    // Depth-first, iteratively: (reference, depth, its own references already pushed).
    let mut stack: Vec<(SchemaReference, usize, Option<Arc<RegisteredSchema>>)> =
        schema.references.iter().rev().map(|r| (r.clone(), 1, None)).collect();
    while let Some((reference, depth, fetched)) = stack.pop() {
        if found.iter().any(|f| f.name == reference.name) {
            continue;
        }
        match fetched {
            // Its references are done: it can follow them.
            Some(schema) => found.push(ReferencedSchema { name: reference.name, schema }),
            None => {
                if depth > MAX_REFERENCE_DEPTH {
                    return Err(RegistryError::NotFound(format!(
                        "reference {} (more than {MAX_REFERENCE_DEPTH} levels of references)",
                        reference.name
                    )));
                }
                let schema = registry.version(&reference.subject, reference.version).await?;
                let children: Vec<_> = schema.references.iter().rev().map(|r| (r.clone(), depth + 1, None)).collect();
                stack.push((reference, depth, Some(schema)));
                stack.extend(children);
            }
        }
    }
    Ok(found)
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
    timeout: Duration,
    attempts: u32,
    backoff: Duration,
    /// Schemas by id (ids never change their schema). These caches only ever gain whole
    /// entries, so a lock poisoned by a panic elsewhere is still used.
    by_id: Mutex<HashMap<u32, Arc<RegisteredSchema>>>,
    /// GUIDs are content hashes: their schema never changes either.
    by_guid: Mutex<HashMap<uuid::Uuid, Arc<RegisteredSchema>>>,
    /// Numbered subject versions never change either (`latest` is never cached).
    by_version: Mutex<HashMap<(String, i64), Arc<RegisteredSchema>>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchemaAnswer {
    schema: String,
    schema_type: Option<SchemaType>,
    id: Option<u32>,
    /// Absent, `null` or a list.
    #[serde(default)]
    references: Option<Vec<SchemaReference>>,
}

impl SchemaAnswer {
    /// A missing `schemaType` means Avro, as in the registry's API.
    fn into_schema(self, id: u32) -> RegisteredSchema {
        RegisteredSchema {
            id,
            schema_type: self.schema_type.unwrap_or(SchemaType::Avro),
            schema: self.schema,
            references: self.references.unwrap_or_default(),
        }
    }
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
            timeout,
            attempts: 4,
            backoff: Duration::from_millis(100),
            by_id: Mutex::new(HashMap::new()),
            by_guid: Mutex::new(HashMap::new()),
            by_version: Mutex::new(HashMap::new()),
        })
    }

    /// Changes the retry budget: `attempts` tries, waiting `backoff`, 2×, 4×… between them.
    pub fn with_retries(mut self, attempts: u32, backoff: Duration) -> Self {
        self.attempts = attempts.max(1);
        self.backoff = backoff;
        self
    }

    /// What went wrong with a request, in words: the timeout, or the error and its causes
    /// (reqwest's own message alone is "error sending request").
    fn describe(&self, e: reqwest::Error) -> String {
        if e.is_timeout() {
            return format!("no answer within {} ms", self.timeout.as_millis());
        }
        let e = e.without_url();
        let mut message = e.to_string();
        let mut cause = std::error::Error::source(&e);
        while let Some(c) = cause {
            message = format!("{message}: {c}");
            cause = c.source();
        }
        message
    }

    /// Caches an answer under its id (ids never change their schema).
    fn remember(&self, id: u32, answer: SchemaAnswer) -> Arc<RegisteredSchema> {
        let schema = Arc::new(answer.into_schema(id));
        self.by_id.lock().unwrap_or_else(PoisonError::into_inner).insert(id, schema.clone());
        schema
    }

    /// `path`'s answer, the request tried again while the registry is unavailable.
    async fn get(&self, path: &str, what: &str) -> Result<SchemaAnswer, RegistryError> {
        let url = format!("{}{path}", self.base);
        let policy = RetryPolicy { attempts: self.attempts, base: self.backoff, max_wait: Duration::MAX };
        with_retries(policy, "schema registry request", || self.get_once(&url, what)).await
    }

    /// One request: unavailable (retryable) when it fails or is answered 5xx or 429.
    async fn get_once(&self, url: &str, what: &str) -> Result<SchemaAnswer, RegistryError> {
        let unavailable = |message: String| RegistryError::Unavailable { url: url.to_string(), message };
        let invalid = |message: String| RegistryError::Invalid { url: url.to_string(), message };
        let mut request = self.client.get(url).header("Accept", "application/vnd.schemaregistry.v1+json");
        if let Some(c) = &self.credentials {
            request = request.basic_auth(&c.username, Some(&c.password));
        }
        let response = request.send().await.map_err(|e| unavailable(self.describe(e)))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(RegistryError::NotFound(what.to_string()));
        }
        if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            return Err(unavailable(format!("HTTP {status}")));
        }
        if !status.is_success() {
            return Err(invalid(format!("HTTP {status}")));
        }
        response.json().await.map_err(|e| invalid(e.without_url().to_string()))
    }
}

#[async_trait]
impl SchemaRegistry for HttpSchemaRegistry {
    async fn schema_by_id(&self, id: u32) -> Result<Arc<RegisteredSchema>, RegistryError> {
        if let Some(s) = self.by_id.lock().unwrap_or_else(PoisonError::into_inner).get(&id) {
            return Ok(s.clone());
        }
        let answer = self.get(&format!("/schemas/ids/{id}"), &format!("id {id}")).await?;
        Ok(self.remember(id, answer))
    }

    /// `GET /schemas/guids/{guid}`; its answer may lack the numeric id (then 0).
    async fn schema_by_guid(&self, guid: uuid::Uuid) -> Result<Arc<RegisteredSchema>, RegistryError> {
        if let Some(s) = self.by_guid.lock().unwrap_or_else(PoisonError::into_inner).get(&guid) {
            return Ok(s.clone());
        }
        let answer = self.get(&format!("/schemas/guids/{guid}"), &format!("guid {guid}")).await?;
        let schema = match answer.id {
            Some(id) => self.remember(id, answer),
            None => Arc::new(answer.into_schema(0)),
        };
        self.by_guid.lock().unwrap_or_else(PoisonError::into_inner).insert(guid, schema.clone());
        Ok(schema)
    }

    async fn latest(&self, subject: &str) -> Result<Arc<RegisteredSchema>, RegistryError> {
        self.subject_version(subject, "latest").await
    }

    async fn version(&self, subject: &str, version: i64) -> Result<Arc<RegisteredSchema>, RegistryError> {
        let key = (subject.to_string(), version);
        if let Some(s) = self.by_version.lock().unwrap_or_else(PoisonError::into_inner).get(&key) {
            return Ok(s.clone());
        }
        let schema = self.subject_version(subject, &version.to_string()).await?;
        self.by_version.lock().unwrap_or_else(PoisonError::into_inner).insert(key, schema.clone());
        Ok(schema)
    }
}

impl HttpSchemaRegistry {
    /// `GET /subjects/{subject}/versions/{version}` (a number or `latest`).
    async fn subject_version(&self, subject: &str, version: &str) -> Result<Arc<RegisteredSchema>, RegistryError> {
        let path = format!("/subjects/{}/versions/{version}", path_segment(subject));
        let answer = self.get(&path, &format!("subject {subject} version {version}")).await?;
        let id = answer.id.ok_or_else(|| RegistryError::Invalid {
            url: format!("{}{path}", self.base),
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
        Ok(FileSchema {
            path,
            schema: Arc::new(RegisteredSchema { id: 0, schema_type, schema, references: Vec::new() }),
        })
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

    async fn schema_by_guid(&self, _guid: uuid::Uuid) -> Result<Arc<RegisteredSchema>, RegistryError> {
        Ok(self.schema.clone())
    }

    async fn latest(&self, _subject: &str) -> Result<Arc<RegisteredSchema>, RegistryError> {
        Ok(self.schema.clone())
    }

    /// A local file references nothing (Protobuf imports resolve beside the file).
    async fn version(&self, subject: &str, version: i64) -> Result<Arc<RegisteredSchema>, RegistryError> {
        Err(RegistryError::NotFound(format!(
            "subject {subject} version {version} (a local schema file has no subjects)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_show_in_debug_output() {
        let c = Credentials { username: "floe-user".into(), password: "s3cret-pw".into() };
        let registry = HttpSchemaRegistry::new("http://sr", Some(c.clone()), Duration::from_secs(1)).unwrap();
        for shown in [format!("{c:?}"), format!("{:?}", registry.credentials)] {
            assert!(!shown.contains("s3cret-pw") && !shown.contains("floe-user"), "{shown}");
        }
    }

    /// Subjects with one version each: (subject, id, references to other subjects).
    struct Subjects(Vec<(&'static str, u32, Vec<&'static str>)>);

    #[async_trait]
    impl SchemaRegistry for Subjects {
        async fn schema_by_id(&self, id: u32) -> Result<Arc<RegisteredSchema>, RegistryError> {
            let (subject, ..) = self.0.iter().find(|s| s.1 == id).ok_or(RegistryError::NotFound(id.to_string()))?;
            self.version(subject, 1).await
        }
        async fn latest(&self, subject: &str) -> Result<Arc<RegisteredSchema>, RegistryError> {
            self.version(subject, 1).await
        }
        async fn version(&self, subject: &str, _version: i64) -> Result<Arc<RegisteredSchema>, RegistryError> {
            let (_, id, refs) =
                self.0.iter().find(|s| s.0 == subject).ok_or(RegistryError::NotFound(subject.into()))?;
            Ok(Arc::new(RegisteredSchema {
                id: *id,
                schema_type: SchemaType::Protobuf,
                schema: String::new(),
                references: refs
                    .iter()
                    .map(|r| SchemaReference { name: format!("{r}.proto"), subject: r.to_string(), version: 1 })
                    .collect(),
            }))
        }
    }

    #[tokio::test]
    async fn references_come_once_each_and_before_what_uses_them() {
        // main → a, b; a → c; b → c, d.
        let registry = Subjects(vec![
            ("main", 1, vec!["a", "b"]),
            ("a", 2, vec!["c"]),
            ("b", 3, vec!["c", "d"]),
            ("c", 4, vec![]),
            ("d", 5, vec![]),
        ]);
        let main = registry.latest("main").await.unwrap();
        let found = references(&registry, &main).await.unwrap();
        let names: Vec<&str> = found.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["c.proto", "a.proto", "d.proto", "b.proto"]);
    }

    #[test]
    fn subjects_are_one_path_segment() {
        assert_eq!(path_segment("orders-value"), "orders-value");
        assert_eq!(path_segment("com.acme/Money v1:é"), "com.acme%2FMoney%20v1%3A%C3%A9");
    }

    #[tokio::test]
    async fn a_reference_cycle_is_an_error_not_a_hang() {
        let registry = Subjects(vec![("main", 1, vec!["a"]), ("a", 2, vec!["b"]), ("b", 3, vec!["a"])]);
        let main = registry.latest("main").await.unwrap();
        let err = references(&registry, &main).await.unwrap_err();
        assert!(err.to_string().contains("levels of references"), "{err}");
        assert!(!err.retryable());
    }
}
