//! What every payload format gives the table: one part (key or value) set up from its
//! schema source — the payload type it adds to the table, and how to build its decoder
//! once the table's columns are known. The formats build on this; `formats` dispatches.

use std::sync::Arc;

use crate::columns::{PayloadDecoder, Shape};
use crate::config::{SchemaSource, TopicConfig};
use crate::formats::json::infer::Inferred;
use crate::registry::{FileSchema, RegistryError, Resolved, SchemaRegistry, SchemaType, resolve};
use crate::retry::Retryable;
use crate::schema::Incompatible;
use crate::schema::layout::PayloadType;

/// Why a topic's formats could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
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

impl Retryable for FormatError {
    fn retryable(&self) -> bool {
        matches!(self, FormatError::Registry { source, .. } if source.retryable())
    }
}

/// Builds a part's decoder once the table's columns are known.
pub type MakeDecoder = Box<dyn FnOnce(Shape) -> Result<Arc<dyn PayloadDecoder>, String> + Send>;

/// One part (key or value) of a topic, before the table schema exists.
pub struct Part {
    pub payload: PayloadType,
    pub make: MakeDecoder,
}

/// What a format needs to set up one part.
pub struct PartContext<'a> {
    pub topic: &'a TopicConfig,
    /// `key` or `value`.
    pub name: &'static str,
    pub source: &'a SchemaSource,
    /// Protobuf: the configured message name.
    pub message: Option<&'a str>,
    pub registry: Option<Arc<dyn SchemaRegistry>>,
    /// Plain JSON: the types inferred from the records (see [`crate::formats::json`]).
    pub inferred: Option<&'a Inferred>,
}

impl PartContext<'_> {
    pub fn error(&self, message: impl std::fmt::Display) -> FormatError {
        FormatError::Schema { topic: self.topic.topic.clone(), message: format!("{}: {message}", self.name) }
    }

    /// An error in the part's schema itself, naming where it comes from ([`Self::source_name`]).
    pub fn schema_error(&self, message: impl std::fmt::Display) -> FormatError {
        self.error(format!("{message} ({})", self.source_name()))
    }

    /// Where the part's schema comes from, as an error names it: `value_schema file
    /// schemas/order.proto`, `value_schema subject orders-value`.
    pub fn source_name(&self) -> String {
        let field = format!("{}_schema", self.name);
        match self.source {
            SchemaSource::File(path) => format!("{field} file {}", path.display()),
            SchemaSource::Subject(subject) => format!("{field} subject {subject}"),
            SchemaSource::Registry => format!("{field} subject {}-{}", self.topic.topic, self.name),
        }
    }

    /// The schema the table is built from: a local file, a named subject's latest version,
    /// or the latest version of `<topic>-key` / `<topic>-value`. Also returns the registry
    /// to resolve each payload's schema id with (none for a local file). The schemas it
    /// references come with it.
    pub async fn table_schema(
        &self,
        schema_type: SchemaType,
    ) -> Result<(Resolved, Option<Arc<dyn SchemaRegistry>>), FormatError> {
        let registry_error = |source: RegistryError| FormatError::Registry { topic: self.topic.topic.clone(), source };
        match self.source {
            SchemaSource::File(path) => {
                let file = FileSchema::load(path, schema_type).map_err(registry_error)?;
                Ok((Resolved::alone(file.latest("").await.map_err(registry_error)?), None))
            }
            SchemaSource::Subject(_) | SchemaSource::Registry => {
                let registry = self.registry.clone().ok_or_else(|| {
                    self.error(format!(
                        "format {schema_type:?} needs a [schema_registry] or a {}_schema file",
                        self.name
                    ))
                })?;
                let subject = match self.source {
                    SchemaSource::Subject(s) => s.clone(),
                    _ => format!("{}-{}", self.topic.topic, self.name),
                };
                let latest = registry.latest(&subject).await.map_err(registry_error)?;
                let resolved = resolve(registry.as_ref(), latest).await.map_err(registry_error)?;
                Ok((resolved, Some(registry)))
            }
        }
    }
}
