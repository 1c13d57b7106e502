//! `floe.toml`: the one typed configuration the CLI and the Lambdas share.
//!
//! Defaults plus per-topic entries; a topic is matched by exact name first, then by the
//! first entry whose `pattern` (a regular expression over the whole name) matches.
//! Topics matched by nothing are ignored unless `defaults.enabled = true`. Every value
//! is checked at start-up, and an invalid one is an error naming its field
//! (`topics[2].value_format: …`).
//!
//! ```toml
//! [defaults]
//! enabled = true              # materialize topics no entry names (default false)
//! namespace = "kafka"
//! key_format = "raw"          # auto | avro | protobuf | json-schema | json | raw
//! value_format = "raw"
//! bad_records = "suspend"     # suspend | skip | dlq
//! target_file_size = "128MiB"
//! compaction_target_size = "128MiB"  # compacted files' size
//! compaction_window = "15m"   # small files older than this are compacted anyway
//! orphan_grace = "3d"         # unreferenced files younger than this are never deleted
//! transaction_timeout = "15m" # the brokers' transaction.max.timeout.ms (see table/state.rs)
//! partition_by = []           # Iceberg transforms, see below
//!
//! [schema_registry]
//! url = "https://registry.example.com"
//! username = "floe"
//! password_env = "FLOE_SCHEMA_REGISTRY_PASSWORD"
//!
//! [[topics]]
//! topic = "orders"            # or: pattern = "orders\\..*"
//! namespace = "sales"
//! table = "orders"
//! value_format = "avro"       # schema by the id in each record (Schema Registry)
//! partition_by = ["day(timestamp)"]
//!
//! [[topics]]
//! pattern = "audit\\..*"
//! value_format = "json-schema"
//! value_schema = { file = "schemas/audit.json" }
//!
//! [catalog]                   # absent: Glue on Lambda and `floe aws`, SQLite for `floe local`
//! type = "rest"               # glue | sql | rest | s3tables
//! uri = "https://catalog.example.com/api/catalog"
//! warehouse = "analytics"
//! credential_env = "FLOE_CATALOG_CREDENTIAL"  # or token_env, or secret_arn
//! ```
//!
//! `[catalog]` ([`catalog`]) names the Iceberg catalog of the tables and how to reach it:
//! a REST catalog (`uri`, `warehouse`, OAuth2 client credentials `client_id:client_secret`
//! or a bearer token from the environment or Secrets Manager, `sigv4` signing for AWS
//! endpoints) or an S3 table bucket (`table_bucket_arn`, with Floe's own `compaction` and
//! `orphan_sweep` off by default).
//!
//! `partition_by` lists Iceberg partition transforms over columns of the table
//! (`identity(region)` or just `region`, `year|month|day|hour(col)`, `bucket(N, col)`,
//! `truncate(W, col)`; a dotted path goes into a struct: `day(_kafka.timestamp)`). Their
//! syntax is checked here; columns of `_kafka` (and every column of a raw topic) are
//! checked against the table layout here too, the others when the table's schema is
//! known ([`crate::partition::bind`]) — each error names `topics[i].partition_by[j]`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::vocabulary::{DEAD_LETTER_SUFFIX, TableName};

pub mod catalog;
pub use catalog::{CatalogConfig, RestAuth, RestCatalogConfig, S3TablesConfig, SigV4Config};

/// The default output size of a compaction (`compaction_target_size`).
pub const DEFAULT_COMPACTION_TARGET_SIZE: u64 = 128 << 20;
/// How long a small file waits for others before it is compacted anyway
/// (`compaction_window`): 15 minutes.
pub const DEFAULT_COMPACTION_WINDOW_MS: u64 = 15 * 60 * 1000;
/// How old an unreferenced file must be before the sweep deletes it (`orphan_grace`):
/// three days.
pub const DEFAULT_ORPHAN_GRACE_MS: u64 = 3 * 24 * 60 * 60 * 1000;
/// Kafka's default `transaction.max.timeout.ms` (`transaction_timeout`): a transaction
/// ends within 15 minutes.
pub const DEFAULT_TRANSACTION_TIMEOUT_MS: u64 = 15 * 60 * 1000;

/// A configuration error: the field it is about and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
}

impl ConfigError {
    fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError::Invalid { field: field.into(), message: message.into() }
    }
}

/// How a key or value is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// The type of the Schema Registry subject's schema (`<topic>-key` / `<topic>-value`,
    /// or the configured subject) decides; raw when there is no such subject.
    Auto,
    Avro,
    Protobuf,
    JsonSchema,
    /// JSON without a schema: the columns are inferred from the records.
    Json,
    /// Bytes as they are: a `binary` column.
    Raw,
}

impl Format {
    /// Formats whose payloads carry the Confluent wire-format header.
    pub fn uses_schema(self) -> bool {
        matches!(self, Format::Avro | Format::Protobuf | Format::JsonSchema)
    }
}

/// What to do with a record that cannot be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BadRecordMode {
    /// Stop the table with a status naming the record (the default).
    Suspend,
    /// Leave the record out, counted.
    Skip,
    /// Keep it, with its raw bytes and the error, in a dead-letter table beside the table.
    Dlq,
}

/// Where a schema comes from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum SchemaSource {
    /// The Schema Registry, by the id each record carries.
    Registry,
    /// The latest version of a Schema Registry subject.
    Subject(String),
    /// A local schema file (`.avsc`, `.proto` descriptor set, `.json`).
    File(PathBuf),
}

/// Target file sizes accepted: files above 4 GiB gain nothing for readers, and a batch
/// (a sixteenth of the target) must stay far below the 2 GiB of string data an Arrow
/// column can hold.
const MIN_TARGET_FILE_SIZE: u64 = 1 << 20;
const MAX_TARGET_FILE_SIZE: u64 = 4 << 30;
const MAX_COMPACTION_WINDOW_MS: u64 = 24 * 60 * 60 * 1000;
/// The shortest orphan grace period: a file is written some time before a snapshot or a
/// held task names it (a materializer's files before its task is queued, a committer's
/// trimmed files before its swap, a compactor's outputs before their task is held).
const MIN_ORPHAN_GRACE_MS: u64 = 60 * 60 * 1000;
/// Kafka's own floor for `transaction.timeout.ms` is 1 ms; below a second is a mistake.
const MIN_TRANSACTION_TIMEOUT_MS: u64 = 1000;

/// Whether a credential sent to `url` would cross the network in clear text: a plain
/// `http://` URL whose host is not this machine.
pub fn insecure(url: &str) -> bool {
    url.get(..7).is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://")) && leaves_the_machine(url)
}

/// Whether a plain `http://` URL leaves this machine: its host is not `localhost` or a
/// loopback address (`127.0.0.0/8`, `[::1]`).
fn leaves_the_machine(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    let loopback =
        host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    !loopback
}

/// Whether a URL names a user (and maybe a password) before its host.
fn url_has_credentials(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.split(['/', '?', '#']).next().is_some_and(|authority| authority.contains('@'))
}

/// A size in bytes, written as a number or as `"128MiB"`, `"64MB"`, `"1GiB"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ByteSize(pub u64);

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(n) => Ok(ByteSize(n)),
            Raw::Text(s) => parse_byte_size(&s).map(ByteSize).map_err(serde::de::Error::custom),
        }
    }
}

fn parse_byte_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits.parse().map_err(|_| format!("invalid size {s:?}"))?;
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "KB" => 1000,
        "KiB" => 1 << 10,
        "MB" => 1000 * 1000,
        "MiB" => 1 << 20,
        "GB" => 1000 * 1000 * 1000,
        "GiB" => 1 << 30,
        other => {
            return Err(format!("unknown unit {other:?} in {s:?} (B, KB, KiB, MB, MiB, GB, GiB)"));
        }
    };
    n.checked_mul(factor).ok_or_else(|| format!("size {s:?} too large"))
}

/// A duration, written as `"15m"`, `"900s"`, `"1h"`, `"3d"` or `"500ms"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DurationMs(pub u64);

impl<'de> Deserialize<'de> for DurationMs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_duration_ms(&s).map(DurationMs).map_err(serde::de::Error::custom)
    }
}

fn parse_duration_ms(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits.parse().map_err(|_| format!("invalid duration {s:?}"))?;
    let factor: u64 = match unit.trim() {
        "ms" => 1,
        "s" => 1000,
        "m" => 60 * 1000,
        "h" => 60 * 60 * 1000,
        "d" => 24 * 60 * 60 * 1000,
        other => return Err(format!("unknown unit {other:?} in {s:?} (ms, s, m, h, d)")),
    };
    n.checked_mul(factor).ok_or_else(|| format!("duration {s:?} too large"))
}

/// Settings a topic entry may set, each falling back to `[defaults]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub namespace: Option<String>,
    pub key_format: Option<Format>,
    pub value_format: Option<Format>,
    pub key_schema: Option<SchemaSource>,
    pub value_schema: Option<SchemaSource>,
    pub bad_records: Option<BadRecordMode>,
    pub target_file_size: Option<ByteSize>,
    /// Size compaction packs small files up to.
    pub compaction_target_size: Option<ByteSize>,
    /// How long a small file waits for others before it is compacted anyway.
    pub compaction_window: Option<DurationMs>,
    /// How old a file no snapshot references must be before the orphan sweep deletes it.
    pub orphan_grace: Option<DurationMs>,
    /// The longest a transaction of the topic lasts: the brokers' `transaction.max.timeout.ms`.
    pub transaction_timeout: Option<DurationMs>,
    pub partition_by: Option<Vec<String>>,
    /// Protobuf: full name of the key's message (default: the first message of the schema).
    pub key_message: Option<String>,
    /// Protobuf: full name of the value's message (default: the first message of the schema).
    pub value_message: Option<String>,
}

/// The Confluent Schema Registry to use. Credentials are never logged.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SchemaRegistryConfig {
    pub url: String,
    pub username: Option<String>,
    /// Name of the environment variable holding the password.
    pub password_env: Option<String>,
    /// ARN of a Secrets Manager secret `{"username": …, "password": …}` (Lambda).
    pub secret_arn: Option<String>,
    /// Request timeout in milliseconds (default 5000).
    pub timeout_ms: Option<u64>,
    /// Allow credentials over a plain `http://` URL to a host other than this machine
    /// (the password then crosses the network in clear text).
    #[serde(default)]
    pub allow_insecure_http: bool,
}

impl std::fmt::Debug for SchemaRegistryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaRegistryConfig")
            .field("url", &self.url)
            .field("username", &self.username.as_ref().map(|_| "<set>"))
            .field("password_env", &self.password_env)
            .field("secret_arn", &self.secret_arn)
            .field("allow_insecure_http", &self.allow_insecure_http)
            .finish()
    }
}

use crate::partition::grammar::parse_partition_field;
pub use crate::partition::grammar::{MAX_WIDTH, PartitionField, Transform};

/// Everything Floe needs to know about one topic.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TopicConfig {
    pub topic: String,
    pub namespace: String,
    pub table: String,
    pub key_format: Format,
    pub value_format: Format,
    pub key_schema: SchemaSource,
    pub value_schema: SchemaSource,
    pub bad_records: BadRecordMode,
    pub target_file_size: u64,
    /// Compaction's output size (bins emitted once they hold it).
    pub compaction_target_size: u64,
    /// Small files older than this are compacted even under the target.
    pub compaction_window_ms: u64,
    /// Unreferenced files younger than this are kept by the orphan sweep (a task may
    /// still be on its way to the committer, a commit may be writing them).
    pub orphan_grace_ms: u64,
    /// The longest a transaction lasts, from its first record to its marker (the brokers'
    /// `transaction.max.timeout.ms`): how far back a marker may end records.
    pub transaction_timeout_ms: u64,
    pub partition_by: Vec<PartitionField>,
    /// Where `partition_by` was set (`topics[2].partition_by`, `defaults.partition_by`), for errors.
    pub partition_by_field: String,
    pub key_message: Option<String>,
    pub value_message: Option<String>,
}

#[derive(Debug, Clone)]
enum Matcher {
    Exact(String),
    Pattern(regex::Regex),
}

#[derive(Debug, Clone)]
struct Entry {
    matcher: Matcher,
    table: Option<String>,
    settings: Settings,
    /// `topics[i]`.
    field: String,
    /// `settings.partition_by`, parsed.
    partition_by: Option<Vec<PartitionField>>,
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct FloeConfig {
    enabled_by_default: bool,
    defaults: Settings,
    /// `defaults.partition_by`, parsed.
    default_partition_by: Option<Vec<PartitionField>>,
    entries: Vec<Entry>,
    pub schema_registry: Option<SchemaRegistryConfig>,
    /// `[catalog]`; `None`: each side's default (Glue on AWS, SQLite for `floe local`).
    pub catalog: Option<CatalogConfig>,
}

/// Which maintenance Floe runs itself ([`FloeConfig::own_maintenance`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnMaintenance {
    pub compaction: bool,
    pub orphan_sweep: bool,
    /// Who does what Floe does not (`Some("S3 Tables")`).
    pub left_to: Option<&'static str>,
}

impl OwnMaintenance {
    /// What a run says when it leaves work to the catalog, `None` when it leaves none.
    pub fn left_out(&self) -> Option<String> {
        let left_to = self.left_to?;
        let off: Vec<&str> = [(self.compaction, "compaction"), (self.orphan_sweep, "orphan sweep")]
            .into_iter()
            .filter_map(|(on, what)| (!on).then_some(what))
            .collect();
        (!off.is_empty()).then(|| format!("{} left to {left_to}, which does it itself", off.join(" and ")))
    }
}

pub const DEFAULT_NAMESPACE: &str = "kafka";
pub const DEFAULT_TARGET_FILE_SIZE: u64 = 128 << 20;

impl Default for FloeConfig {
    /// Every topic enabled with raw key and value into namespace `kafka`: what `floe`
    /// does without `--config`.
    fn default() -> Self {
        FloeConfig {
            enabled_by_default: true,
            defaults: Settings::default(),
            default_partition_by: None,
            entries: Vec::new(),
            schema_registry: None,
            catalog: None,
        }
    }
}

impl FloeConfig {
    pub fn from_file(path: &Path) -> Result<FloeConfig, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
        let config = Self::parse(&text).map_err(|e| match e {
            ConfigError::Parse { message, .. } => ConfigError::Parse { path: path.display().to_string(), message },
            other => other,
        })?;
        config.check_schema_files()?;
        Ok(config)
    }

    /// Every local schema file named is a readable file: checked at start-up, naming the
    /// field, rather than at the first segment of the topic.
    pub fn check_schema_files(&self) -> Result<(), ConfigError> {
        for (field, path) in self.schema_files() {
            match std::fs::metadata(&path) {
                Ok(m) if m.is_file() => {}
                Ok(_) => return Err(ConfigError::invalid(field, format!("{}: not a file", path.display()))),
                Err(e) => return Err(ConfigError::invalid(field, format!("{}: {e}", path.display()))),
            }
        }
        Ok(())
    }

    pub fn parse(text: &str) -> Result<FloeConfig, ConfigError> {
        let parse_error = |message: String| ConfigError::Parse { path: "floe.toml".into(), message };
        let mut root: toml::Table = text.parse().map_err(|e: toml::de::Error| parse_error(e.to_string()))?;
        let mut defaults = take_table(&mut root, "defaults")?.unwrap_or_default();
        let enabled = match defaults.remove("enabled") {
            None => false,
            Some(toml::Value::Boolean(b)) => b,
            Some(other) => {
                return Err(ConfigError::invalid("defaults.enabled", format!("expected true or false, found {other}")));
            }
        };
        let defaults: Settings = typed("defaults", defaults)?;
        let default_partition_by = validate_settings("defaults", &defaults, &Settings::default())?;
        validate_schemas("defaults", &defaults, &Settings::default())?;
        let schema_registry: Option<SchemaRegistryConfig> =
            take_table(&mut root, "schema_registry")?.map(|t| typed("schema_registry", t)).transpose()?;
        if let Some(registry) = &schema_registry
            && !(registry.url.starts_with("http://") || registry.url.starts_with("https://"))
        {
            return Err(ConfigError::invalid("schema_registry.url", "must start with http:// or https://"));
        }
        if let Some(registry) = &schema_registry
            && url_has_credentials(&registry.url)
        {
            return Err(ConfigError::invalid(
                "schema_registry.url",
                "holds credentials (user:password@), which would show in logs and errors: use username and password_env",
            ));
        }
        if let Some(registry) = &schema_registry
            && insecure(&registry.url)
            && (registry.username.is_some() || registry.password_env.is_some() || registry.secret_arn.is_some())
            && !registry.allow_insecure_http
        {
            return Err(ConfigError::invalid(
                "schema_registry.url",
                "basic auth over http:// sends the password in clear text: use https://, \
                 or set schema_registry.allow_insecure_http = true",
            ));
        }
        let catalog = take_table(&mut root, "catalog")?.map(catalog::parse_catalog).transpose()?;
        let topics = match root.remove("topics") {
            None => Vec::new(),
            Some(toml::Value::Array(items)) => items,
            Some(_) => {
                return Err(ConfigError::invalid("topics", "expected an array of tables ([[topics]])"));
            }
        };
        if let Some(key) = root.keys().next() {
            return Err(ConfigError::invalid(
                key.clone(),
                "unknown section (defaults, schema_registry, catalog, topics)",
            ));
        }
        let mut entries = Vec::new();
        for (i, item) in topics.into_iter().enumerate() {
            let at = |field: &str| format!("topics[{i}].{field}");
            let toml::Value::Table(mut table) = item else {
                return Err(ConfigError::invalid(format!("topics[{i}]"), "expected a table"));
            };
            let mut text_field = |name: &str| match table.remove(name) {
                None => Ok(None),
                Some(toml::Value::String(s)) => Ok(Some(s)),
                Some(other) => Err(ConfigError::invalid(at(name), format!("expected a string, found {other}"))),
            };
            let (topic, pattern, table_name) = (text_field("topic")?, text_field("pattern")?, text_field("table")?);
            let settings: Settings = typed(&format!("topics[{i}]"), table)?;
            let matcher = match (topic, pattern) {
                (Some(name), None) => {
                    if let Some(why) = topic_name_error(&name) {
                        return Err(ConfigError::invalid(at("topic"), why));
                    }
                    Matcher::Exact(name)
                }
                (None, Some(p)) => Matcher::Pattern(
                    regex::Regex::new(&format!("^(?:{p})$"))
                        .map_err(|e| ConfigError::invalid(at("pattern"), e.to_string()))?,
                ),
                _ => {
                    return Err(ConfigError::invalid(
                        format!("topics[{i}]"),
                        "set exactly one of `topic` and `pattern`",
                    ));
                }
            };
            if let Some(table) = &table_name
                && !valid_identifier(table)
            {
                return Err(ConfigError::invalid(
                    at("table"),
                    format!("{table:?}: use [a-z0-9_], not starting with a digit"),
                ));
            }
            if let Some(table) = &table_name {
                let dlq = settings.bad_records.or(defaults.bad_records) == Some(BadRecordMode::Dlq);
                let max = if dlq { MAX_NAME_LEN - DEAD_LETTER_SUFFIX.len() } else { MAX_NAME_LEN };
                if table.len() > max {
                    return Err(ConfigError::invalid(
                        at("table"),
                        format!(
                            "{} characters, more than {max} (Glue's limit and a file name's is {MAX_NAME_LEN}{})",
                            table.len(),
                            if dlq { ", with `_dlq` added for the dead-letter table" } else { "" }
                        ),
                    ));
                }
            }
            let field = format!("topics[{i}]");
            let partition_by = validate_settings(&field, &settings, &defaults)?;
            validate_schemas(&field, &settings, &defaults)?;
            entries.push(Entry { matcher, table: table_name, settings, field, partition_by });
        }
        // The defaults' partitioning, as the entries without their own inherit it.
        for entry in entries.iter().filter(|e| e.partition_by.is_none()) {
            let key = entry.settings.key_format.or(defaults.key_format);
            let value = entry.settings.value_format.or(defaults.value_format);
            check_partition_layout(
                "defaults.partition_by",
                default_partition_by.as_deref().unwrap_or(&[]),
                key,
                value,
            )?;
        }
        let config = FloeConfig {
            enabled_by_default: enabled,
            defaults,
            default_partition_by,
            entries,
            schema_registry,
            catalog,
        };
        config.check_entry_claims()?;
        Ok(config)
    }

    /// No two entries write one table: two `topic`s whose names fold to the same table
    /// (`a.b`, `A_B`), two entries with the same `table` and namespace, or a table named
    /// like another entry's dead-letter table. (A `pattern` without a `table` names its
    /// tables by the topics it meets: [`FloeConfig::check_table_claims`] checks those.)
    fn check_entry_claims(&self) -> Result<(), ConfigError> {
        let mut claims = TableClaims::default();
        for (i, e) in self.entries.iter().enumerate() {
            let at = format!("{}.{}", e.field, if e.table.is_some() { "table" } else { "topic" });
            let (what, namespace, table, bad_records) = match &e.matcher {
                Matcher::Exact(topic) => {
                    let earlier =
                        self.entries[..i].iter().find(|o| matches!(&o.matcher, Matcher::Exact(t) if t == topic));
                    if let Some(first) = earlier {
                        return Err(ConfigError::invalid(
                            format!("{}.topic", e.field),
                            format!("topic {topic:?} has an entry already: {}", first.field),
                        ));
                    }
                    let Some(config) = self.resolve(topic) else { continue };
                    (format!("topic {topic:?}"), config.namespace, config.table, config.bad_records)
                }
                Matcher::Pattern(p) => {
                    let Some(table) = &e.table else { continue };
                    let text = p.as_str();
                    let pattern = text.strip_prefix("^(?:").and_then(|p| p.strip_suffix(")$")).unwrap_or(text);
                    let namespace = e.settings.namespace.as_ref().or(self.defaults.namespace.as_ref());
                    (
                        format!("pattern {pattern:?}"),
                        namespace.map_or(DEFAULT_NAMESPACE, String::as_str).to_string(),
                        table.clone(),
                        e.settings.bad_records.or(self.defaults.bad_records).unwrap_or(BadRecordMode::Suspend),
                    )
                }
            };
            let claimant = Claimant::Entry(format!("{what} ({})", e.field));
            claims
                .claim(claimant, &namespace, &table, bad_records)
                .map_err(|clash| ConfigError::invalid(at, clash.to_string()))?;
        }
        Ok(())
    }

    /// Checks the topics found at run time (folders of `floe local run`, keys the
    /// materializer meets) against each other: every pair that would write one table
    /// (names folding to the same table, an entry's `table` met by several topics, a
    /// topic named like another's dead-letter table) is a [`ClashError`] naming both
    /// topics and the table. Topics in no clash may run; those in one must not.
    pub fn check_table_claims<'a>(&self, topics: impl IntoIterator<Item = &'a str>) -> Vec<ClashError> {
        let mut topics: Vec<&str> = topics.into_iter().collect();
        topics.sort_unstable();
        topics.dedup();
        let mut claims = TableClaims::default();
        let mut clashes = Vec::new();
        for topic in topics {
            if let Some(config) = self.resolve(topic)
                && let Err(clash) = claims.claim_topic(&config)
            {
                clashes.push(clash);
            }
        }
        clashes
    }

    /// Which maintenance Floe runs itself: all of it, except on S3 Tables, which compacts
    /// and removes unreferenced files on its own (`[catalog] compaction` turns Floe's
    /// compaction back on; its sweep cannot run there).
    pub fn own_maintenance(&self) -> OwnMaintenance {
        match &self.catalog {
            Some(CatalogConfig::S3Tables(s3tables)) => {
                OwnMaintenance { compaction: s3tables.compaction, orphan_sweep: false, left_to: Some("S3 Tables") }
            }
            _ => OwnMaintenance { compaction: true, orphan_sweep: true, left_to: None },
        }
    }

    /// The tables of the `[[topics]]` entries that name one topic (those of patterns are
    /// known only when their topics are met): what a start-up access check looks at.
    pub fn configured_tables(&self) -> Vec<TableName> {
        let exact = self.entries.iter().filter_map(|e| match &e.matcher {
            Matcher::Exact(topic) => self.resolve(topic),
            Matcher::Pattern(_) => None,
        });
        let mut tables: Vec<_> = exact.map(|t| TableName { namespace: t.namespace, name: t.table }).collect();
        tables.sort();
        tables.dedup();
        tables
    }

    /// The configuration of `topic`, or `None` when it is not to be materialized.
    pub fn resolve(&self, topic: &str) -> Option<TopicConfig> {
        let exact = self.entries.iter().find(|e| matches!(&e.matcher, Matcher::Exact(n) if n == topic));
        let entry = exact
            .or_else(|| self.entries.iter().find(|e| matches!(&e.matcher, Matcher::Pattern(p) if p.is_match(topic))));
        if entry.is_none() && !self.enabled_by_default {
            return None;
        }
        let empty = Settings::default();
        let s = entry.map_or(&empty, |e| &e.settings);
        let d = &self.defaults;
        let pick = |a: &Option<Format>, b: &Option<Format>| a.or(*b).unwrap_or(Format::Raw);
        let key_format = pick(&s.key_format, &d.key_format);
        let value_format = pick(&s.value_format, &d.value_format);
        let schema = |a: &Option<SchemaSource>, b: &Option<SchemaSource>| {
            a.clone().or_else(|| b.clone()).unwrap_or(SchemaSource::Registry)
        };
        let own = entry.and_then(|e| e.partition_by.as_ref().map(|p| (p, format!("{}.partition_by", e.field))));
        let defaults = self.default_partition_by.as_ref().map(|p| (p, "defaults.partition_by".to_string()));
        let (partition_by, partition_by_field) = match own.or(defaults) {
            Some((fields, field)) => (fields.clone(), field),
            None => (Vec::new(), "defaults.partition_by".to_string()),
        };
        Some(TopicConfig {
            topic: topic.to_string(),
            namespace: s.namespace.clone().or_else(|| d.namespace.clone()).unwrap_or_else(|| DEFAULT_NAMESPACE.into()),
            table: entry.and_then(|e| e.table.clone()).unwrap_or_else(|| table_name_for(topic)),
            key_format,
            value_format,
            key_schema: schema(&s.key_schema, &d.key_schema),
            value_schema: schema(&s.value_schema, &d.value_schema),
            bad_records: s.bad_records.or(d.bad_records).unwrap_or(BadRecordMode::Suspend),
            target_file_size: s.target_file_size.or(d.target_file_size).map_or(DEFAULT_TARGET_FILE_SIZE, |b| b.0),
            compaction_target_size: s
                .compaction_target_size
                .or(d.compaction_target_size)
                .map_or(DEFAULT_COMPACTION_TARGET_SIZE, |b| b.0),
            compaction_window_ms: s
                .compaction_window
                .or(d.compaction_window)
                .map_or(DEFAULT_COMPACTION_WINDOW_MS, |w| w.0),
            orphan_grace_ms: s.orphan_grace.or(d.orphan_grace).map_or(DEFAULT_ORPHAN_GRACE_MS, |g| g.0),
            transaction_timeout_ms: s
                .transaction_timeout
                .or(d.transaction_timeout)
                .map_or(DEFAULT_TRANSACTION_TIMEOUT_MS, |t| t.0),
            partition_by,
            partition_by_field,
            key_message: s.key_message.clone().or_else(|| d.key_message.clone()),
            value_message: s.value_message.clone().or_else(|| d.value_message.clone()),
        })
    }

    /// Local schema files named anywhere in the configuration, by field.
    pub fn schema_files(&self) -> BTreeMap<String, PathBuf> {
        let mut files = BTreeMap::new();
        let mut add = |field: String, s: &Settings| {
            for (name, source) in [("key_schema", &s.key_schema), ("value_schema", &s.value_schema)] {
                if let Some(SchemaSource::File(p)) = source {
                    files.insert(format!("{field}.{name}"), p.clone());
                }
            }
        };
        add("defaults".into(), &self.defaults);
        for (i, e) in self.entries.iter().enumerate() {
            add(format!("topics[{i}]"), &e.settings);
        }
        files
    }
}

fn take_table(root: &mut toml::Table, name: &str) -> Result<Option<toml::Table>, ConfigError> {
    match root.remove(name) {
        None => Ok(None),
        Some(toml::Value::Table(t)) => Ok(Some(t)),
        Some(_) => Err(ConfigError::invalid(name, "expected a table")),
    }
}

/// Deserializes one section, naming it in the error.
fn typed<T: serde::de::DeserializeOwned>(at: &str, table: toml::Table) -> Result<T, ConfigError> {
    T::deserialize(toml::Value::Table(table)).map_err(|e| {
        // toml ends the message with "in `field`" (nested: `a.b`): that goes into the path.
        let message = e.to_string();
        match message.trim().rsplit_once("\nin `") {
            Some((what, field)) => ConfigError::invalid(format!("{at}.{}", field.trim_end_matches('`')), what.trim()),
            None => ConfigError::invalid(at, message.trim()),
        }
    })
}

/// Checks one section's settings; returns its `partition_by`, parsed (`defaults`: the
/// defaults the section falls back to).
fn validate_settings(at: &str, s: &Settings, defaults: &Settings) -> Result<Option<Vec<PartitionField>>, ConfigError> {
    if let Some(ns) = &s.namespace
        && !valid_identifier(ns)
    {
        return Err(ConfigError::invalid(
            format!("{at}.namespace"),
            format!("{ns:?}: use [a-z0-9_], not starting with a digit"),
        ));
    }
    if let Some(ns) = &s.namespace
        && ns.len() > MAX_NAME_LEN - ".db".len()
    {
        return Err(ConfigError::invalid(
            format!("{at}.namespace"),
            format!(
                "{} characters, more than {} (its folder `<namespace>.db` must fit the {MAX_NAME_LEN} bytes of a file name)",
                ns.len(),
                MAX_NAME_LEN - ".db".len()
            ),
        ));
    }
    if let Some(size) = s.target_file_size
        && !(MIN_TARGET_FILE_SIZE..=MAX_TARGET_FILE_SIZE).contains(&size.0)
    {
        return Err(ConfigError::invalid(
            format!("{at}.target_file_size"),
            format!("{} bytes: from 1MiB to 4GiB", size.0),
        ));
    }
    if let Some(size) = s.compaction_target_size
        && !(MIN_TARGET_FILE_SIZE..=MAX_TARGET_FILE_SIZE).contains(&size.0)
    {
        return Err(ConfigError::invalid(
            format!("{at}.compaction_target_size"),
            format!("{} bytes: from 1MiB to 4GiB", size.0),
        ));
    }
    if let Some(window) = s.compaction_window
        && window.0 > MAX_COMPACTION_WINDOW_MS
    {
        return Err(ConfigError::invalid(format!("{at}.compaction_window"), format!("{}ms: at most 24h", window.0)));
    }
    if let Some(grace) = s.orphan_grace
        && grace.0 < MIN_ORPHAN_GRACE_MS
    {
        return Err(ConfigError::invalid(format!("{at}.orphan_grace"), format!("{}ms: at least 1h", grace.0)));
    }
    if let Some(timeout) = s.transaction_timeout
        && timeout.0 < MIN_TRANSACTION_TIMEOUT_MS
    {
        return Err(ConfigError::invalid(format!("{at}.transaction_timeout"), format!("{}ms: at least 1s", timeout.0)));
    }
    let Some(fields) = &s.partition_by else { return Ok(None) };
    let mut parsed = Vec::with_capacity(fields.len());
    for (i, f) in fields.iter().enumerate() {
        parsed.push(parse_partition_field(f).map_err(|m| ConfigError::invalid(format!("{at}.partition_by[{i}]"), m))?);
    }
    let key = s.key_format.or(defaults.key_format);
    let value = s.value_format.or(defaults.value_format);
    check_partition_layout(&format!("{at}.partition_by"), &parsed, key, value)?;
    Ok(Some(parsed))
}

/// Binds what can be bound before any schema is known: `_kafka` columns (every table
/// has them; `_kafka.key` only when the value is a record), and every column of a topic
/// whose key and value are both raw.
fn check_partition_layout(
    at: &str,
    fields: &[PartitionField],
    key: Option<Format>,
    value: Option<Format>,
) -> Result<(), ConfigError> {
    use crate::schema::layout::{PayloadType, table_struct};
    if fields.is_empty() {
        return Ok(());
    }
    let raw = table_struct(&PayloadType::Raw, &PayloadType::Raw)
        .ok()
        .and_then(|s| crate::schema::plan(None, &s).ok())
        .map(|e| e.schema)
        .ok_or_else(|| ConfigError::invalid(at, "the raw table layout does not plan"))?;
    let invalid = |e: crate::partition::PartitionError| ConfigError::invalid(e.field, e.message);
    let is_raw = |f: Option<Format>| f.unwrap_or(Format::Raw) == Format::Raw;
    if is_raw(key) && is_raw(value) {
        return crate::partition::bind(&raw, fields, at).map(drop).map_err(invalid);
    }
    for (j, field) in fields.iter().enumerate() {
        if field.source.starts_with("_kafka.") && field.source != "_kafka.key" {
            crate::partition::bind(&raw, std::slice::from_ref(field), at)
                .map_err(|e| ConfigError::invalid(format!("{at}[{j}]"), e.message))?;
        }
    }
    Ok(())
}

/// A schema source only makes sense for a format that uses one (after defaults apply).
fn validate_schemas(at: &str, s: &Settings, defaults: &Settings) -> Result<(), ConfigError> {
    for (field, format, schema) in [
        ("key_schema", s.key_format.or(defaults.key_format), &s.key_schema),
        ("value_schema", s.value_format.or(defaults.value_format), &s.value_schema),
    ] {
        let format = format.unwrap_or(Format::Raw);
        if schema.is_some() && !format.uses_schema() && format != Format::Auto {
            return Err(ConfigError::invalid(
                format!("{at}.{field}"),
                format!("a schema is meaningless for format {format:?}"),
            ));
        }
    }
    Ok(())
}

/// Glue's limit on database and table names, and a file name's on most filesystems
/// (bytes; the names are ASCII).
pub const MAX_NAME_LEN: usize = 255;

pub use crate::segment::{MAX_TOPIC_LEN, topic_name_error};

/// Who claims a table: a topic met at run time, or a `[[topics]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimant {
    Topic(String),
    /// The entry as errors name it: `topic "orders" (topics[0])`, `pattern "audit\..*" (topics[1])`.
    Entry(String),
}

impl std::fmt::Display for Claimant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Claimant::Topic(topic) => write!(f, "topic {topic:?}"),
            Claimant::Entry(entry) => f.write_str(entry),
        }
    }
}

/// Two topics (or entries) that would write one table: refused, never merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct ClashError {
    /// The one that came second.
    pub claimant: Claimant,
    /// The one holding the table.
    pub holder: Claimant,
    /// `namespace.table`.
    pub table: String,
    /// Whether the table is the claimant's dead-letter table.
    pub claimant_dlq: bool,
    /// Whether the table is the holder's dead-letter table.
    pub holder_dlq: bool,
}

impl ClashError {
    fn describe(&self) -> String {
        let (c, h, t) = (&self.claimant, &self.holder, &self.table);
        let fix = "one table holds one topic: give one of them a `table` of its own in a [[topics]] entry";
        match (self.claimant_dlq, self.holder_dlq) {
            (false, false) => format!("{c} and {h} both map to table {t}; {fix}"),
            (false, true) => {
                format!("{c} maps to table {t}, the dead-letter table of {h} (bad_records = \"dlq\"); {fix}")
            }
            (true, false) => {
                format!("the dead-letter table of {c} (bad_records = \"dlq\") is {t}, the table of {h}; {fix}")
            }
            (true, true) => format!("{c} and {h} both have the dead-letter table {t}; {fix}"),
        }
    }

    /// The topics (met at run time) of the clash.
    pub fn topics(&self) -> Vec<&str> {
        [&self.claimant, &self.holder]
            .into_iter()
            .filter_map(|c| match c {
                Claimant::Topic(t) => Some(t.as_str()),
                Claimant::Entry(_) => None,
            })
            .collect()
    }
}

/// The tables claimed so far (`namespace.table`), each with its claimant: one table
/// holds one topic, and a topic's dead-letter table (`<table>_dlq`, in `dlq` mode) is
/// its own too.
#[derive(Debug, Default, Clone)]
pub struct TableClaims {
    tables: BTreeMap<String, (Claimant, bool)>,
}

impl TableClaims {
    /// Claims `namespace.table` (and `namespace.table_dlq` in `dlq` mode) for `claimant`;
    /// nothing is claimed when one of them is another's.
    pub fn claim(
        &mut self,
        claimant: Claimant,
        namespace: &str,
        table: &str,
        bad_records: BadRecordMode,
    ) -> Result<(), ClashError> {
        let mut names = vec![(format!("{namespace}.{table}"), false)];
        if bad_records == BadRecordMode::Dlq {
            names.push((format!("{namespace}.{table}{DEAD_LETTER_SUFFIX}"), true));
        }
        for (name, dlq) in &names {
            if let Some((holder, holder_dlq)) = self.tables.get(name)
                && *holder != claimant
            {
                return Err(ClashError {
                    claimant,
                    holder: holder.clone(),
                    table: name.clone(),
                    claimant_dlq: *dlq,
                    holder_dlq: *holder_dlq,
                });
            }
        }
        for (name, dlq) in names {
            self.tables.entry(name).or_insert_with(|| (claimant.clone(), dlq));
        }
        Ok(())
    }

    /// Claims the tables of a resolved topic.
    pub fn claim_topic(&mut self, topic: &TopicConfig) -> Result<(), ClashError> {
        self.claim(Claimant::Topic(topic.topic.clone()), &topic.namespace, &topic.table, topic.bad_records)
    }
}

fn valid_identifier(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The default table name of a topic: lower case, characters outside `[a-z0-9_]`
/// become `_`, and a leading digit gets a `t_` prefix.
pub fn table_name_for(topic: &str) -> String {
    let name: String = topic
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' { c } else { '_' }
        })
        .collect();
    if name.starts_with(|c: char| c.is_ascii_digit()) { format!("t_{name}") } else { name }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_s3_tables_floe_leaves_compaction_and_the_sweep_to_it_unless_turned_on() {
        let arn = "arn:aws:s3tables:us-east-1:123456789012:bucket/floe";
        let glue = FloeConfig::parse("").unwrap().own_maintenance();
        assert_eq!((glue.compaction, glue.orphan_sweep, glue.left_out()), (true, true, None));
        let s3tables = FloeConfig::parse(&format!("[catalog]\ntype = \"s3tables\"\ntable_bucket_arn = \"{arn}\"\n"));
        let own = s3tables.unwrap().own_maintenance();
        assert_eq!((own.compaction, own.orphan_sweep), (false, false));
        assert_eq!(own.left_out().unwrap(), "compaction and orphan sweep left to S3 Tables, which does it itself");
        let text = format!("[catalog]\ntype = \"s3tables\"\ntable_bucket_arn = \"{arn}\"\ncompaction = true\n");
        let own = FloeConfig::parse(&text).unwrap().own_maintenance();
        assert_eq!((own.compaction, own.orphan_sweep), (true, false));
        assert_eq!(own.left_out().unwrap(), "orphan sweep left to S3 Tables, which does it itself");
    }

    #[test]
    fn the_configured_tables_are_those_of_exact_topic_entries() {
        let text = "[[topics]]\ntopic = \"orders\"\nnamespace = \"sales\"\n[[topics]]\npattern = \"audit\\\\..*\"\n";
        let tables = FloeConfig::parse(text).unwrap().configured_tables();
        let orders = TableName { namespace: "sales".into(), name: "orders".into() };
        assert_eq!(tables, vec![orders]);
    }

    const EXAMPLE: &str = r#"
        [defaults]
        namespace = "raw_kafka"
        target_file_size = "64MiB"
        compaction_window = "5m"

        [schema_registry]
        url = "http://127.0.0.1:8081"
        username = "floe"
        password_env = "SR_PASSWORD"

        [[topics]]
        topic = "orders"
        namespace = "sales"
        value_format = "avro"
        partition_by = ["day(timestamp)", "bucket(16, key)"]
        compaction_target_size = "256MiB"
        orphan_grace = "7d"
        transaction_timeout = "1h"

        [[topics]]
        pattern = "audit\\..*"
        value_format = "json-schema"
        value_schema = { file = "schemas/audit.json" }
        bad_records = "dlq"
    "#;

    #[test]
    fn resolves_exact_then_pattern_then_defaults() {
        let c = FloeConfig::parse(EXAMPLE).unwrap();
        let orders = c.resolve("orders").unwrap();
        assert_eq!((orders.namespace.as_str(), orders.table.as_str()), ("sales", "orders"));
        assert_eq!(orders.value_format, Format::Avro);
        assert_eq!(orders.key_format, Format::Raw);
        assert_eq!(orders.target_file_size, 64 << 20);
        assert_eq!((orders.compaction_target_size, orders.compaction_window_ms), (256 << 20, 5 * 60 * 1000));
        assert_eq!(orders.orphan_grace_ms, 7 * 24 * 60 * 60 * 1000);
        assert_eq!(orders.transaction_timeout_ms, 60 * 60 * 1000);
        assert_eq!(orders.partition_by[1], PartitionField { source: "key".into(), transform: Transform::Bucket(16) });
        let audit = c.resolve("audit.logins-eu").unwrap();
        assert_eq!(audit.table, "audit_logins_eu");
        assert_eq!(audit.namespace, "raw_kafka");
        assert_eq!(audit.bad_records, BadRecordMode::Dlq);
        assert_eq!((audit.compaction_target_size, audit.compaction_window_ms), (128 << 20, 5 * 60 * 1000));
        assert_eq!(audit.value_schema, SchemaSource::File("schemas/audit.json".into()));
        assert_eq!(audit.orphan_grace_ms, 3 * 24 * 60 * 60 * 1000, "the default: 3 days");
        assert_eq!(audit.transaction_timeout_ms, 15 * 60 * 1000, "the default: Kafka's 15 minutes");
        assert_eq!(c.resolve("audit"), None, "pattern must match the whole name");
        assert_eq!(c.resolve("payments"), None, "unmatched topics are ignored unless enabled");
        assert!(format!("{:?}", c.schema_registry).contains("<set>"));
        assert!(!format!("{:?}", c.schema_registry).contains("\"floe\""));
    }

    #[test]
    fn default_config_takes_every_topic_raw() {
        let t = FloeConfig::default().resolve("Orders.V2-eu").unwrap();
        assert_eq!((t.namespace.as_str(), t.table.as_str()), ("kafka", "orders_v2_eu"));
        assert_eq!((t.key_format, t.value_format, t.bad_records), (Format::Raw, Format::Raw, BadRecordMode::Suspend));
        assert_eq!((t.compaction_target_size, t.compaction_window_ms), (128 << 20, 15 * 60 * 1000));
        assert_eq!(table_name_for("42-things"), "t_42_things");
    }

    #[test]
    fn partition_by_is_checked_against_what_is_known_at_start_up() {
        let error = |text: &str| FloeConfig::parse(text).unwrap_err().to_string();
        // `_kafka` columns are known whatever the format.
        let e = error(
            "[[topics]]\ntopic = \"a\"\nvalue_format = \"avro\"\npartition_by = [\"region\", \"day(_kafka.timestamp_type)\"]",
        );
        assert!(e.starts_with("topics[0].partition_by[1]: day does not apply to `_kafka.timestamp_type`"), "{e}");
        let e = error("[[topics]]\ntopic = \"a\"\nvalue_format = \"json\"\npartition_by = [\"hour(_kafka.time)\"]");
        assert!(e.starts_with("topics[0].partition_by[0]: no column `_kafka.time`"), "{e}");
        // A raw topic has nothing but `_kafka`, `key` and `value`.
        let e = error("[[topics]]\ntopic = \"a\"\npartition_by = [\"identity(region)\"]");
        assert!(e.starts_with("topics[0].partition_by[0]: no column `region`"), "{e}");
        // …and its binary key, which can be bucketed but not truncated (iceberg-rust 0.10.1).
        let e = error("[[topics]]\ntopic = \"a\"\npartition_by = [\"bucket(16, key)\", \"truncate(4, key)\"]");
        assert!(e.starts_with("topics[0].partition_by[1]: truncate[4] of `key` cannot be computed"), "{e}");
        // Inherited from the defaults: named there.
        let e = error(
            "[defaults]\npartition_by = [\"region\"]\nvalue_format = \"avro\"\n[[topics]]\ntopic = \"a\"\nvalue_format = \"raw\"",
        );
        assert!(e.starts_with("defaults.partition_by[0]: no column `region`"), "{e}");

        let c = FloeConfig::parse(
            "[defaults]\nenabled = true\npartition_by = [\"day(_kafka.timestamp)\"]\n\
             [[topics]]\ntopic = \"a\"\nvalue_format = \"avro\"\npartition_by = [\"bucket(16, id)\", \"region\"]",
        )
        .unwrap();
        let a = c.resolve("a").unwrap();
        assert_eq!(a.partition_by_field, "topics[0].partition_by");
        assert_eq!(a.partition_by[1], PartitionField { source: "region".into(), transform: Transform::Identity });
        let other = c.resolve("b").unwrap();
        assert_eq!(other.partition_by_field, "defaults.partition_by");
        assert_eq!(
            other.partition_by,
            vec![PartitionField { source: "_kafka.timestamp".into(), transform: Transform::Day }]
        );
    }

    #[test]
    fn errors_name_the_field() {
        for (text, field) in [
            ("[[topics]]\ntopic = \"a\"\nvalue_format = \"avroo\"", "value_format"),
            ("[[topics]]\ntopic = \"a\"\npattern = \"b\"", "topics[0]"),
            ("[[topics]]\npattern = \"(\"", "topics[0].pattern"),
            ("[[topics]]\ntopic = \"a\"\nnamespace = \"Bad-NS\"", "topics[0].namespace"),
            ("[defaults]\ntarget_file_size = \"12XB\"", "target_file_size"),
            ("[defaults]\ntarget_file_size = 10", "defaults.target_file_size"),
            ("[[topics]]\ntopic = \"a\"\ntarget_file_size = \"5GiB\"", "topics[0].target_file_size"),
            ("[[topics]]\ntopic = \"a\"\ncompaction_target_size = \"5GiB\"", "topics[0].compaction_target_size"),
            ("[defaults]\ncompaction_target_size = \"1KiB\"", "defaults.compaction_target_size"),
            ("[defaults]\ncompaction_window = \"15x\"", "compaction_window"),
            ("[defaults]\ncompaction_window = 900", "compaction_window"),
            ("[[topics]]\ntopic = \"a\"\ncompaction_window = \"25h\"", "topics[0].compaction_window"),
            ("[[topics]]\ntopic = \"a\"\norphan_grace = \"59m\"", "topics[0].orphan_grace"),
            ("[defaults]\norphan_grace = \"3w\"", "orphan_grace"),
            ("[[topics]]\ntopic = \"a\"\ntransaction_timeout = \"500ms\"", "topics[0].transaction_timeout"),
            ("[[topics]]\ntopic = \"a\"\npartition_by = [\"week(ts)\"]", "topics[0].partition_by[0]"),
            ("[[topics]]\ntopic = \"a\"\npartition_by = [\"bucket(0, ts)\"]", "topics[0].partition_by[0]"),
            ("[[topics]]\ntopic = \"a\"\ntable = \"9x\"", "topics[0].table"),
            ("[[topics]]\ntopic = \"a\"\nvalue_schema = { file = \"x\" }", "topics[0].value_schema"),
            ("[schema_registry]\nurl = \"ftp://x\"", "schema_registry.url"),
            ("[schema_registry]\nurl = \"https://u:secret@sr.example.com/x\"", "schema_registry.url"),
            ("[defaults]\nnamespce = \"x\"", "namespce"),
        ] {
            let err = FloeConfig::parse(text).unwrap_err().to_string();
            assert!(err.contains(field), "{text:?} → {err}");
            assert!(!err.contains("secret"), "{err}");
        }
        assert!(!url_has_credentials("https://sr.example.com:8081/path@x?q=a@b"));
        // A schema file that is not there: at start-up, naming the field.
        let dir = tempfile::tempdir().unwrap();
        let toml = dir.path().join("floe.toml");
        let text = "[[topics]]\ntopic = \"a\"\nvalue_format = \"avro\"\nvalue_schema = { file = \"/no/such.avsc\" }\n";
        std::fs::write(&toml, text).unwrap();
        let err = FloeConfig::from_file(&toml).unwrap_err().to_string();
        assert!(err.starts_with("topics[0].value_schema: /no/such.avsc: No such file"), "{err}");
        std::fs::write(&toml, text.replace("/no/such.avsc", &toml.display().to_string())).unwrap();
        FloeConfig::from_file(&toml).unwrap();
        assert!(url_has_credentials("http://user@sr"));
        // docs/configuration.md's example, word for word.
        let err = FloeConfig::parse("[[topics]]\ntopic = \"a\"\n[[topics]]\ntopic = \"b\"\nvalue_format = \"avroo\"");
        assert!(err.unwrap_err().to_string().contains("topics[1].value_format: unknown variant `avroo`"));
    }

    #[test]
    fn entries_sharing_a_table_are_refused_naming_both() {
        let error = |text: &str| FloeConfig::parse(text).unwrap_err().to_string();
        // Names folding to one table.
        let e = error("[[topics]]\ntopic = \"a.b\"\n[[topics]]\ntopic = \"A_B\"");
        assert!(
            e.starts_with(
                "topics[1].topic: topic \"A_B\" (topics[1]) and topic \"a.b\" (topics[0]) both map to table kafka.a_b"
            ),
            "{e}"
        );
        // The same `table`, explicitly (a pattern's too).
        let e = error("[[topics]]\ntopic = \"x\"\ntable = \"t\"\n[[topics]]\npattern = \"y.*\"\ntable = \"t\"");
        assert!(
            e.starts_with(
                "topics[1].table: pattern \"y.*\" (topics[1]) and topic \"x\" (topics[0]) both map to table kafka.t"
            ),
            "{e}"
        );
        // A topic named like another's dead-letter table, in either order.
        let e = error("[[topics]]\ntopic = \"orders\"\nbad_records = \"dlq\"\n[[topics]]\ntopic = \"orders_dlq\"");
        assert!(e.contains("topic \"orders_dlq\" (topics[1]) maps to table kafka.orders_dlq, the dead-letter table of topic \"orders\" (topics[0])"), "{e}");
        let e = error(
            "[defaults]\nbad_records = \"dlq\"\n[[topics]]\ntopic = \"orders_dlq\"\n[[topics]]\ntopic = \"orders\"",
        );
        assert!(e.starts_with("topics[1].topic: the dead-letter table of topic \"orders\" (topics[1]) (bad_records = \"dlq\") is kafka.orders_dlq, the table of topic \"orders_dlq\" (topics[0])"), "{e}");
        // One topic named twice.
        let e = error("[[topics]]\ntopic = \"a\"\n[[topics]]\ntopic = \"a\"\nnamespace = \"b\"");
        assert!(e.starts_with("topics[1].topic: topic \"a\" has an entry already: topics[0]"), "{e}");
        // Other namespaces, other modes, or patterns without a table: no clash.
        FloeConfig::parse("[[topics]]\ntopic = \"a.b\"\n[[topics]]\ntopic = \"a_b\"\nnamespace = \"other\"").unwrap();
        FloeConfig::parse("[[topics]]\ntopic = \"orders\"\n[[topics]]\ntopic = \"orders_dlq\"").unwrap();
        FloeConfig::parse("[[topics]]\ntopic = \"a.b\"\n[[topics]]\npattern = \"a.*\"").unwrap();
    }

    #[test]
    fn topics_found_at_run_time_that_share_a_table_are_named() {
        let c = FloeConfig::parse(
            "[defaults]\nenabled = true\n[[topics]]\ntopic = \"orders\"\nbad_records = \"dlq\"\n\
             [[topics]]\npattern = \"audit\\\\..*\"\ntable = \"audit\"",
        )
        .unwrap();
        let clashes =
            c.check_table_claims(["a.b", "a_b", "orders", "orders_dlq", "payments", "audit.eu", "audit.us", "a.b"]);
        let text: Vec<String> = clashes.iter().map(|c| c.to_string()).collect();
        assert_eq!(clashes.len(), 3, "{text:#?}");
        assert!(text[0].starts_with("topic \"a_b\" and topic \"a.b\" both map to table kafka.a_b;"), "{}", text[0]);
        assert_eq!(clashes[0].topics(), ["a_b", "a.b"]);
        assert!(
            text[1].starts_with("topic \"audit.us\" and topic \"audit.eu\" both map to table kafka.audit;"),
            "{}",
            text[1]
        );
        assert!(text[2].starts_with(
            "topic \"orders_dlq\" maps to table kafka.orders_dlq, the dead-letter table of topic \"orders\""
        ));
        assert!(c.check_table_claims(["a.b", "orders", "payments", "audit.eu"]).is_empty());
        // Not enabled: claims nothing.
        let c = FloeConfig::parse("[[topics]]\ntopic = \"a.b\"").unwrap();
        assert!(c.check_table_claims(["a.b", "a_b"]).is_empty());
    }

    #[test]
    fn names_beyond_glue_and_filesystem_limits_are_refused() {
        let error = |text: String| FloeConfig::parse(&text).unwrap_err().to_string();
        let long = "t".repeat(256);
        let e = error(format!("[[topics]]\ntopic = \"a\"\ntable = \"{long}\""));
        assert!(e.starts_with("topics[0].table: 256 characters, more than 255"), "{e}");
        // In dlq mode `_dlq` must fit too.
        let e = error(format!("[[topics]]\ntopic = \"a\"\nbad_records = \"dlq\"\ntable = \"{}\"", &long[..252]));
        assert!(e.starts_with("topics[0].table: 252 characters, more than 251"), "{e}");
        FloeConfig::parse(&format!("[[topics]]\ntopic = \"a\"\ntable = \"{}\"", &long[..255])).unwrap();
        let e = error(format!("[defaults]\nnamespace = \"{}\"", &long[..253]));
        assert!(e.starts_with("defaults.namespace: 253 characters, more than 252"), "{e}");
        let e = error(format!("[[topics]]\ntopic = \"{}\"", &long[..250]));
        assert!(e.starts_with("topics[0].topic: \"tttt"), "{e}");
        assert!(e.ends_with("is not a Kafka topic name: 250 characters, more than 249"), "{e}");
        for (topic, why) in
            [("..", "`.` and `..`"), (".", "`.` and `..`"), ("../x", "holds '/'"), ("", "empty"), ("été", "holds 'é'")]
        {
            let e = error(format!("[[topics]]\ntopic = \"{topic}\""));
            assert!(e.starts_with("topics[0].topic: ") && e.contains(why), "{topic}: {e}");
        }
        // bucket / truncate widths are 32-bit integers.
        for width in ["2147483648", "4294967296", "99999999999999999999"] {
            let e = error(format!("[[topics]]\ntopic = \"a\"\npartition_by = [\"bucket({width}, key)\"]"));
            assert!(e.starts_with("topics[0].partition_by[0]: "), "{e}");
        }
        let e = error("[[topics]]\ntopic = \"a\"\npartition_by = [\"bucket(2147483648, key)\"]".into());
        assert!(e.contains("at most 2147483647"), "{e}");
        FloeConfig::parse("[[topics]]\ntopic = \"a\"\npartition_by = [\"bucket(2147483647, key)\"]").unwrap();
    }

    #[test]
    fn registry_credentials_over_plain_http_need_allow_insecure_http() {
        let parse = |url: &str, extra: &str| {
            FloeConfig::parse(&format!("[schema_registry]\nurl = \"{url}\"\n{extra}"))
                .map(|c| c.schema_registry.unwrap())
        };
        for auth in ["username = \"floe\"", "password_env = \"P\"", "secret_arn = \"arn:x\""] {
            let e = parse("http://sr.example.com:8081", auth).unwrap_err().to_string();
            assert!(
                e.starts_with("schema_registry.url: basic auth over http:// sends the password in clear text"),
                "{e}"
            );
            assert!(e.contains("schema_registry.allow_insecure_http = true"), "{e}");
            let allowed = parse("http://sr.example.com:8081", &format!("{auth}\nallow_insecure_http = true")).unwrap();
            assert!(allowed.allow_insecure_http);
            parse("https://sr.example.com", auth).unwrap();
            // This machine: nothing crosses the network.
            for local in ["http://127.0.0.1:8081", "http://localhost/x", "http://[::1]:8081", "http://127.5.0.1"] {
                parse(local, auth).unwrap();
            }
        }
        parse("http://sr.example.com", "").unwrap();
        assert!(leaves_the_machine("http://localhost.example.com"));
        assert!(leaves_the_machine("http://10.0.0.1:8081"));
    }
}
