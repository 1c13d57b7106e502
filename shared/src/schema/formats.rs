//! A topic's key and value formats: their decoders and the table schema they imply.

use std::sync::Arc;

use iceberg::spec::Schema;

use crate::config::{FloeConfig, Format, TopicConfig};
use crate::convert::{PayloadDecoder, RawDecoder};
use crate::schema::layout::{PayloadType, ReservedName, table_struct};
use crate::schema::{Incompatible, plan};

/// Why a topic's formats could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("{topic}: {part} format {format:?} is not supported yet")]
    Unsupported { topic: String, part: &'static str, format: Format },
    #[error("{topic}: {0}", topic = .1)]
    Reserved(ReservedName, String),
    #[error(transparent)]
    Incompatible(#[from] Incompatible),
}

/// The decoders of a topic and the schema of a new table for it.
pub struct Formats {
    pub schema: Arc<Schema>,
    pub key: Arc<dyn PayloadDecoder>,
    pub value: Arc<dyn PayloadDecoder>,
}

impl Formats {
    pub async fn load(_config: &FloeConfig, topic: &TopicConfig) -> Result<Formats, FormatError> {
        let (key_type, key) = Self::part(topic, "key", topic.key_format)?;
        let (value_type, value) = Self::part(topic, "value", topic.value_format)?;
        let source = table_struct(&key_type, &value_type).map_err(|e| FormatError::Reserved(e, topic.topic.clone()))?;
        let schema = Arc::new(plan(None, &source)?.schema);
        Ok(Formats { schema, key, value })
    }

    fn part(
        topic: &TopicConfig,
        part: &'static str,
        format: Format,
    ) -> Result<(PayloadType, Arc<dyn PayloadDecoder>), FormatError> {
        match format {
            Format::Raw | Format::Auto => Ok((PayloadType::Raw, Arc::new(RawDecoder))),
            other => Err(FormatError::Unsupported { topic: topic.topic.clone(), part, format: other }),
        }
    }
}
