//! A topic's key and value formats: their decoders and the table schema they imply.

use std::sync::Arc;
use std::time::Duration;

use arrow_schema::{DataType, Fields};
use iceberg::spec::Schema;

use crate::config::{FloeConfig, Format, SchemaSource, TopicConfig};
use crate::convert::{PayloadDecoder, RawDecoder};
use crate::schema::avro::{AvroDecoder, AvroShape};
use crate::schema::layout::{KAFKA_COLUMN, KEY_COLUMN, PayloadType, VALUE_COLUMN, table_struct, value_is_payload};
use crate::schema::registry::{
    Credentials, FileSchema, HttpSchemaRegistry, RegisteredSchema, RegistryError, SchemaRegistry, SchemaType,
};
use crate::schema::{Incompatible, plan};

/// Why a topic's formats could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("{topic}: {part} format {format:?} is not supported yet")]
    Unsupported { topic: String, part: &'static str, format: Format },
    #[error("{topic}: {message}")]
    Schema { topic: String, message: String },
    #[error("{topic}: {source}")]
    Registry {
        topic: String,
        #[source]
        source: RegistryError,
    },
    #[error(transparent)]
    Incompatible(#[from] Incompatible),
}

impl FormatError {
    pub fn retryable(&self) -> bool {
        matches!(self, FormatError::Registry { source, .. } if source.retryable())
    }
}

/// The decoders of a topic and the schema of a new table for it.
pub struct Formats {
    pub schema: Arc<Schema>,
    pub key: Arc<dyn PayloadDecoder>,
    pub value: Arc<dyn PayloadDecoder>,
}

/// One part (key or value) before the table schema exists.
struct Part {
    name: &'static str,
    payload: PayloadType,
    kind: PartKind,
}

enum PartKind {
    Raw,
    AvroFixed(apache_avro::Schema),
    AvroRegistry(Arc<dyn SchemaRegistry>),
}

/// The Schema Registry of the configuration (password from the named environment variable).
pub fn http_registry(config: &FloeConfig) -> Result<Option<Arc<dyn SchemaRegistry>>, RegistryError> {
    let Some(sr) = &config.schema_registry else { return Ok(None) };
    let password = sr.password_env.as_ref().and_then(|v| std::env::var(v).ok());
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
        let _ = config;
        let key = Self::part(topic, "key", topic.key_format, &topic.key_schema, registry.clone()).await?;
        let value = Self::part(topic, "value", topic.value_format, &topic.value_schema, registry).await?;
        let source = table_struct(&key.payload, &value.payload)
            .map_err(|e| FormatError::Schema { topic: topic.topic.clone(), message: e.to_string() })?;
        let schema = Arc::new(plan(None, &source)?.schema);
        let arrow = iceberg::arrow::schema_to_arrow_schema(&schema)
            .map_err(|e| FormatError::Schema { topic: topic.topic.clone(), message: e.to_string() })?;
        let fields = arrow.fields();
        let payload_layout = value_is_payload(&value.payload);
        let column = |name: &str| fields.find(name).map(|(_, f)| f.data_type().clone()).expect("layout column");
        let key_shape = if payload_layout {
            match column(KAFKA_COLUMN) {
                DataType::Struct(k) => AvroShape::Column(k.find(KEY_COLUMN).expect("layout").1.data_type().clone()),
                _ => unreachable!("_kafka is a struct"),
            }
        } else {
            AvroShape::Column(column(KEY_COLUMN))
        };
        let value_shape = if payload_layout {
            AvroShape::Fields(Fields::from(fields[1..].to_vec()))
        } else {
            AvroShape::Column(column(VALUE_COLUMN))
        };
        Ok(Formats {
            key: Self::decoder(topic, key, key_shape)?,
            value: Self::decoder(topic, value, value_shape)?,
            schema,
        })
    }

    async fn part(
        topic: &TopicConfig,
        name: &'static str,
        format: Format,
        source: &SchemaSource,
        registry: Option<Arc<dyn SchemaRegistry>>,
    ) -> Result<Part, FormatError> {
        let schema_error = |message: String| FormatError::Schema { topic: topic.topic.clone(), message };
        let registry_error = |source: RegistryError| FormatError::Registry { topic: topic.topic.clone(), source };
        match format {
            Format::Raw | Format::Auto => Ok(Part { name, payload: PayloadType::Raw, kind: PartKind::Raw }),
            Format::Avro => {
                let (registered, kind_registry): (Arc<RegisteredSchema>, Option<Arc<dyn SchemaRegistry>>) = match source
                {
                    SchemaSource::File(path) => (
                        FileSchema::load(path, SchemaType::Avro)
                            .map_err(registry_error)?
                            .latest("")
                            .await
                            .map_err(registry_error)?,
                        None,
                    ),
                    SchemaSource::Subject(_) | SchemaSource::Registry => {
                        let registry = registry.ok_or_else(|| {
                            schema_error(format!(
                                "{name} format avro needs a [schema_registry] or a {name}_schema file"
                            ))
                        })?;
                        let subject = match source {
                            SchemaSource::Subject(s) => s.clone(),
                            _ => format!("{}-{name}", topic.topic),
                        };
                        (registry.latest(&subject).await.map_err(registry_error)?, Some(registry))
                    }
                };
                let avro = apache_avro::Schema::parse_str(&registered.schema)
                    .map_err(|e| schema_error(format!("{name} schema: {e}")))?;
                let payload =
                    crate::schema::avro::to_payload_type(&avro).map_err(|e| schema_error(format!("{name}: {e}")))?;
                let kind = match kind_registry {
                    Some(r) => PartKind::AvroRegistry(r),
                    None => PartKind::AvroFixed(avro),
                };
                Ok(Part { name, payload, kind })
            }
            other => Err(FormatError::Unsupported { topic: topic.topic.clone(), part: name, format: other }),
        }
    }

    fn decoder(topic: &TopicConfig, part: Part, shape: AvroShape) -> Result<Arc<dyn PayloadDecoder>, FormatError> {
        Ok(match part.kind {
            PartKind::Raw => Arc::new(RawDecoder),
            PartKind::AvroFixed(schema) => Arc::new(
                AvroDecoder::fixed(part.name, &schema, shape)
                    .map_err(|e| FormatError::Schema { topic: topic.topic.clone(), message: e.to_string() })?,
            ),
            PartKind::AvroRegistry(registry) => Arc::new(AvroDecoder::registry(part.name, registry, shape)),
        })
    }
}
