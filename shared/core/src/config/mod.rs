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
//! retention = "30d"            # rows older than this are removed (data TTL; none by default)
//! retention_column = "_kafka.timestamp" # what a row's age is measured on
//! format_version = 2          # of the tables Floe creates: 2, or 3 (deletion vectors, row lineage)
//! mode = "append"             # or "upsert": one row per key, its latest record's
//! # key_columns = ["id"]      # upsert: the value's columns keying it (default: the message key)
//! # envelope = "debezium"     # upsert of JSON or Avro change events: the row is `after`, op d deletes
//! partition_by = []           # Iceberg transforms, see below
//! formats = ["iceberg"]      # or ["iceberg", "delta"], or ["delta"]: Delta tables of the same files
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
//!
//! By section, one file each: this one parses the whole file ([`FloeConfig::parse`])
//! and resolves a topic's settings ([`FloeConfig::resolve`]); `topic.rs` holds a topic's
//! settings and their checks, `values.rs` the value types (formats, sizes, durations),
//! `registry.rs` `[schema_registry]`, [`catalog`] `[catalog]`, `claims.rs` which topic
//! holds which table, `url.rs` what a URL gives away (clear text, credentials).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use iceberg::spec::FormatVersion;

use crate::vocabulary::{DEAD_LETTER_SUFFIX, TableName};

pub mod catalog;
mod claims;
mod registry;
mod topic;
mod url;
mod values;

pub use catalog::{CatalogConfig, RestAuth, RestCatalogConfig, S3TablesConfig, SigV4Config};
pub use claims::{Claimant, ClashError, TableClaims};
pub use registry::SchemaRegistryConfig;
pub use topic::{
    DEFAULT_RETENTION_COLUMN, MAX_NAME_LEN, MAX_TOPIC_LEN, MAX_WIDTH, PartitionField, Settings, TopicConfig, Transform,
    table_name_for, topic_name_error,
};
use topic::{check_partition_layout, valid_identifier, validate_schemas, validate_settings};
pub use url::insecure;
use url::url_has_credentials;
pub use values::{BadRecordMode, ByteSize, DurationMs, Envelope, Format, Mode, SchemaSource};

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

/// A topic whose only table is a Delta table.
fn delta_only(formats: crate::vocabulary::Formats) -> bool {
    formats.delta() && !formats.iceberg()
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
        // S3 Tables owns its tables' storage and removes what their Iceberg metadata does
        // not name: a Delta log there would be deleted under its readers. A Delta-only
        // topic's Iceberg table is Floe's own, so its files are where Floe puts them, not
        // where a REST catalog assigns.
        let mut sections =
            std::iter::once(("defaults", &defaults)).chain(entries.iter().map(|e| (e.field.as_str(), &e.settings)));
        let refused = match catalog {
            Some(CatalogConfig::S3Tables(_)) => sections.find(|(_, s)| s.formats.is_some_and(|f| f.delta())).map(|s| {
                (
                    s,
                    "S3 Tables removes the files its Iceberg metadata does not name, a Delta log among them: \
                     a Delta table needs a glue, rest or sql catalog",
                )
            }),
            Some(CatalogConfig::Rest(_)) => sections.find(|(_, s)| s.formats.is_some_and(delta_only)).map(|s| {
                (
                    s,
                    "[\"delta\"] alone keeps the table's Iceberg record in Floe's own catalog, its files in \
                     Floe's warehouse, and a REST catalog assigns a table's storage itself: list \
                     [\"iceberg\", \"delta\"], or use a glue or sql catalog",
                )
            }),
            _ => None,
        };
        if let Some(((field, _), why)) = refused {
            return Err(ConfigError::invalid(format!("{field}.formats"), why));
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

    /// Whether any topic is Delta-only (`formats = ["delta"]`): then the catalog is split,
    /// their Iceberg tables in Floe's own ([`crate::catalog::split`]).
    pub fn has_delta_only(&self) -> bool {
        std::iter::once(&self.defaults)
            .chain(self.entries.iter().map(|e| &e.settings))
            .any(|s| s.formats.or(self.defaults.formats).is_some_and(delta_only))
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
            retention_ms: s.retention.or(d.retention).map(|r| r.0),
            retention_column: s
                .retention_column
                .clone()
                .or_else(|| d.retention_column.clone())
                .unwrap_or_else(|| DEFAULT_RETENTION_COLUMN.into()),
            format_version: match s.format_version.or(d.format_version) {
                Some(3) => FormatVersion::V3,
                _ => FormatVersion::V2,
            },
            mode: s.mode.or(d.mode).unwrap_or_default(),
            key_columns: s.key_columns.clone().or_else(|| d.key_columns.clone()).unwrap_or_default(),
            envelope: s.envelope.or(d.envelope),
            partition_by,
            partition_by_field,
            key_message: s.key_message.clone().or_else(|| d.key_message.clone()),
            value_message: s.value_message.clone().or_else(|| d.value_message.clone()),
            formats: s.formats.or(d.formats).unwrap_or_default(),
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

#[cfg(test)]
mod tests;
