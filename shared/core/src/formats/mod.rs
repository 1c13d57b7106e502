//! Payload formats: a topic's key and value decoders and the table schema they imply.
//!
//! - [`part`]: what every format gives the table (one part, key or value);
//! - [`avro`], [`protobuf`], [`json_schema`], [`json`] (plain JSON, types inferred): each
//!   format's mapping to Iceberg and its decoder into Arrow columns;
//! - [`by_id`]: decoders by schema id (a registry topic's many versions);
//! - [`utf8`], [`uuid_text`], [`date_text`]: shared checks and conversions.
//!
//! This module sets up a topic's [`Formats`] from its configuration.

pub mod avro;
pub mod by_id;
pub mod date_text;
pub mod debezium;
pub mod json;
pub mod json_schema;
pub mod part;
pub mod protobuf;
pub mod utf8;
pub mod uuid_text;

use std::sync::Arc;
use std::time::Duration;

use arrow_schema::DataType;
use iceberg::spec::Schema;

use crate::columns::Shape;
use crate::columns::{PayloadDecoder, RawDecoder};
use crate::config::{FloeConfig, Format, Mode, SchemaSource, TopicConfig};
use crate::formats::json::infer::Inferred;
pub use crate::formats::part::{FormatError, MakeDecoder, Part, PartContext};
use crate::registry::{Credentials, HttpSchemaRegistry, RegistryError, SchemaRegistry, SchemaType};
use crate::schema::layout::{
    KAFKA_COLUMN, KEY_COLUMN, PayloadType, VALUE_COLUMN, table_struct, value_is_payload, with_tombstone,
};
use crate::schema::plan;

/// The decoders of a topic and the schema of a new table for it.
pub struct Formats {
    pub schema: Arc<Schema>,
    pub key: Arc<dyn PayloadDecoder>,
    pub value: Arc<dyn PayloadDecoder>,
}

/// The Schema Registry of the configuration (password from the named environment variable).
/// A `password_env` naming no variable is an error here, at start-up, rather than an
/// empty password and a 401 at the first record.
pub fn http_registry(config: &FloeConfig) -> Result<Option<Arc<dyn SchemaRegistry>>, RegistryError> {
    http_registry_with_password(config, password_from_env(config)?)
}

/// The password the configuration's `password_env` names (`None` without one); the
/// variable unset is an error naming it.
pub fn password_from_env(config: &FloeConfig) -> Result<Option<String>, RegistryError> {
    match config.schema_registry.as_ref().and_then(|sr| sr.password_env.as_ref()) {
        Some(var) => std::env::var(var).map(Some).map_err(|_| RegistryError::Config {
            field: "password_env",
            message: format!("the environment variable {var} is not set"),
        }),
        None => Ok(None),
    }
}

/// The Schema Registry of the configuration, with a password found elsewhere (Secrets Manager).
pub fn http_registry_with_password(
    config: &FloeConfig,
    password: Option<String>,
) -> Result<Option<Arc<dyn SchemaRegistry>>, RegistryError> {
    let Some(sr) = &config.schema_registry else { return Ok(None) };
    let credentials =
        sr.username.clone().map(|username| Credentials { username, password: password.unwrap_or_default() });
    let timeout = Duration::from_millis(sr.timeout_ms.unwrap_or(5000));
    Ok(Some(Arc::new(HttpSchemaRegistry::new(&sr.url, credentials, timeout)?)))
}

impl Formats {
    /// Sets up `topic`'s decoders, fetching schemas from `registry` (the configured
    /// Schema Registry) or from local files.
    pub async fn load(
        config: &FloeConfig,
        topic: &TopicConfig,
        registry: Option<Arc<dyn SchemaRegistry>>,
    ) -> Result<Formats, FormatError> {
        Self::load_inferred(config, topic, registry, None).await
    }

    /// [`Self::load`] with the key and value types inferred from the records, for plain
    /// JSON parts ([`crate::formats::json::infer()`]).
    pub async fn load_inferred(
        config: &FloeConfig,
        topic: &TopicConfig,
        registry: Option<Arc<dyn SchemaRegistry>>,
        inferred: Option<&(Inferred, Inferred)>,
    ) -> Result<Formats, FormatError> {
        Self::load_for_table(config, topic, registry, inferred, None).await
    }

    /// [`Self::load_inferred`] for a table that exists: the files keep the field ids of
    /// its `current` schema, plus whatever compatible changes the source brings. When the
    /// source is incompatible with it, or the table's columns cannot take Floe's rows
    /// (another engine changed a column Floe writes), the files get a fresh schema and
    /// the committer, which owns the table, reconciles them with it or suspends it.
    pub async fn load_for_table(
        config: &FloeConfig,
        topic: &TopicConfig,
        registry: Option<Arc<dyn SchemaRegistry>>,
        inferred: Option<&(Inferred, Inferred)>,
        current: Option<&Schema>,
    ) -> Result<Formats, FormatError> {
        let _ = config;
        let key_context = PartContext {
            topic,
            name: "key",
            source: &topic.key_schema,
            message: topic.key_message.as_deref(),
            registry: registry.clone(),
            inferred: inferred.map(|i| &i.0),
        };
        let key = Self::part(key_context, topic.key_format).await?;
        let value_context = PartContext {
            topic,
            name: "value",
            source: &topic.value_schema,
            message: topic.value_message.as_deref(),
            registry,
            inferred: inferred.map(|i| &i.1),
        };
        let value = Self::part(value_context, topic.value_format).await?;
        let source = table_struct(&key.payload, &value.payload)
            .map_err(|e| FormatError::Schema { topic: topic.topic.clone(), message: e.to_string() })?;
        let source = match topic.mode {
            Mode::Upsert => with_tombstone(source),
            Mode::Append => source,
        };
        let schema = match current.map(|c| plan(Some(c), &source)) {
            Some(Ok(evolution)) => match crate::columns::bind::writable(&evolution.schema) {
                Ok(()) => evolution.schema,
                Err(e) => {
                    // Another engine changed a column Floe writes (a type promoted):
                    // the committer reconciles the files with the table, or suspends it.
                    tracing::warn!(topic = %topic.topic, error = %e, "the table's columns cannot take the rows");
                    plan(None, &source)?.schema
                }
            },
            Some(Err(incompatible)) => {
                tracing::warn!(topic = %topic.topic, %incompatible, "source schema incompatible with the table");
                plan(None, &source)?.schema
            }
            None => plan(None, &source)?.schema,
        };
        if let Some(key) = upsert_key(topic, &schema) {
            check_key(topic, &schema, &key)?;
        }
        let schema = Arc::new(schema);
        let arrow = iceberg::arrow::schema_to_arrow_schema(&schema)
            .map_err(|e| FormatError::Schema { topic: topic.topic.clone(), message: e.to_string() })?;
        let fields = arrow.fields();
        let payload_layout = value_is_payload(&value.payload);
        let column = |name: &str| fields.find(name).map(|(_, f)| f.data_type().clone()).expect("layout column");
        let key_shape = if payload_layout {
            match column(KAFKA_COLUMN) {
                DataType::Struct(k) => Shape::Column(k.find(KEY_COLUMN).expect("layout").1.data_type().clone()),
                _ => unreachable!("_kafka is a struct"),
            }
        } else {
            Shape::Column(column(KEY_COLUMN))
        };
        let value_shape = if payload_layout {
            Shape::Fields(crate::columns::payload_fields(fields))
        } else {
            Shape::Column(column(VALUE_COLUMN))
        };
        let decoder_error = |name: &str, message: String| FormatError::Schema {
            topic: topic.topic.clone(),
            message: format!("{name}: {message}"),
        };
        Ok(Formats {
            key: (key.make)(key_shape).map_err(|m| decoder_error("key", m))?,
            value: (value.make)(value_shape).map_err(|m| decoder_error("value", m))?,
            schema,
        })
    }

    async fn part(ctx: PartContext<'_>, format: Format) -> Result<Part, FormatError> {
        match format {
            Format::Raw => Ok(Part {
                payload: PayloadType::Raw,
                make: Box::new(|_| Ok(Arc::new(RawDecoder) as Arc<dyn PayloadDecoder>)),
            }),
            Format::Auto => {
                let format = Self::detect(&ctx).await?;
                Box::pin(Self::part(ctx, format)).await
            }
            Format::Avro => crate::formats::avro::part(&ctx).await,
            Format::Protobuf => crate::formats::protobuf::part(&ctx).await,
            Format::JsonSchema => crate::formats::json_schema::part(&ctx).await,
            Format::Json => crate::formats::json::part(&ctx),
        }
    }

    /// `auto`: the type of the schema the part's subject (or file) names; raw when the
    /// registry has no such subject or none is configured.
    async fn detect(ctx: &PartContext<'_>) -> Result<Format, FormatError> {
        let subject = match ctx.source {
            SchemaSource::File(_) => {
                return Err(ctx.error("format auto cannot tell a schema file's type: name the format"));
            }
            SchemaSource::Subject(s) => s.clone(),
            SchemaSource::Registry => format!("{}-{}", ctx.topic.topic, ctx.name),
        };
        let Some(registry) = &ctx.registry else { return Ok(Format::Raw) };
        match registry.latest(&subject).await {
            Ok(schema) => Ok(match schema.schema_type {
                SchemaType::Avro => Format::Avro,
                SchemaType::Protobuf => Format::Protobuf,
                SchemaType::Json => Format::JsonSchema,
            }),
            Err(RegistryError::NotFound(_)) => Ok(Format::Raw),
            Err(source) => Err(FormatError::Registry { topic: ctx.topic.topic.clone(), source }),
        }
    }
}

/// The key columns of an upsert topic's table of `schema` (dotted paths): its
/// `key_columns`, else the message key's column (`_kafka.key` beside a record value,
/// `key` otherwise). `None` for an append topic.
pub fn upsert_key(topic: &TopicConfig, schema: &Schema) -> Option<Vec<String>> {
    if topic.mode != Mode::Upsert {
        return None;
    }
    if !topic.key_columns.is_empty() {
        return Some(topic.key_columns.clone());
    }
    let in_kafka = format!("{KAFKA_COLUMN}.{KEY_COLUMN}");
    Some(vec![if schema.field_by_name(&in_kafka).is_some() { in_kafka } else { KEY_COLUMN.to_string() }])
}

/// Each key column is one the table has, of a type a key can be (no list, no map).
fn check_key(topic: &TopicConfig, schema: &Schema, key: &[String]) -> Result<(), FormatError> {
    let error = |message: String| FormatError::Schema { topic: topic.topic.clone(), message };
    for column in key {
        let field = schema.field_by_name(column).ok_or_else(|| error(format!("key_columns: no column `{column}`")))?;
        if matches!(*field.field_type, iceberg::spec::Type::List(_) | iceberg::spec::Type::Map(_)) {
            return Err(error(format!("key_columns: `{column}` is a {}, which no key can be", field.field_type)));
        }
    }
    Ok(())
}
