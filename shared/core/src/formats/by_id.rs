//! Compiled writer schemas by schema id, shared by the formats whose payloads carry one
//! (Avro, Protobuf): one fixed schema (a local file), or one per id from a registry,
//! compiled on first sight. An id that failed for good (unknown, wrong type, does not
//! fit the table) is remembered with its error and not asked for again; a registry that
//! cannot be reached is a retryable error, never a bad record.

use std::sync::{Arc, PoisonError, RwLock};

use rustc_hash::FxHashMap;

use crate::columns::{DecodeError, SchemaLoadError};
use crate::registry::wire::{self, Framed, Payload, SchemaId};
use crate::registry::{RegistryError, Resolved, SchemaRegistry, SchemaType, resolve};
use crate::retry::Retryable;

pub enum SchemaSet<T> {
    /// Every payload uses this schema; the id in the header is not checked.
    Fixed(T),
    /// Looked up once per record: a cheap hash of the small id. A lock poisoned by a
    /// panic elsewhere is still used: the map only ever gains whole entries.
    Registry(Arc<dyn SchemaRegistry>, RwLock<FxHashMap<SchemaId, Result<T, String>>>),
}

impl<T> SchemaSet<T> {
    pub fn fixed(compiled: T) -> Self {
        SchemaSet::Fixed(compiled)
    }

    pub fn registry(registry: Arc<dyn SchemaRegistry>) -> Self {
        SchemaSet::Registry(registry, RwLock::new(FxHashMap::default()))
    }

    /// Decodes `payload` with `decode` and the compiled schema it names ([`wire::frame`]);
    /// a schema not loaded yet is a [`DecodeError`] with `missing_schema` set.
    #[inline]
    pub fn decode<R>(
        &self,
        payload: Payload<'_>,
        part: &'static str,
        decode: impl FnOnce(&T, Framed<'_>) -> Result<R, DecodeError>,
    ) -> Result<R, DecodeError> {
        let framed = wire::frame(payload, part)?;
        // The id is in the payload's bytes 1..5, or in the header.
        let position = if framed.header_rest.is_some() { 0 } else { 1 };
        let error =
            |detail: String, missing_schema| DecodeError { part, position, detail, missing_schema, deletes_key: false };
        match self {
            SchemaSet::Fixed(c) => decode(c, framed),
            SchemaSet::Registry(_, compiled) => {
                match compiled.read().unwrap_or_else(PoisonError::into_inner).get(&framed.schema) {
                    Some(Ok(c)) => decode(c, framed),
                    Some(Err(reason)) => Err(error(format!("schema {}: {reason}", framed.schema), None)),
                    None => Err(error(format!("schema {} not loaded", framed.schema), Some(framed.schema))),
                }
            }
        }
    }

    /// Fetches schema `id` (which must be of `schema_type`) and compiles it.
    pub async fn load(
        &self,
        id: SchemaId,
        schema_type: SchemaType,
        compile: impl FnOnce(&Resolved) -> Result<T, String>,
    ) -> Result<(), SchemaLoadError> {
        let SchemaSet::Registry(registry, compiled) = self else { return Ok(()) };
        let fetched = match id {
            SchemaId::Id(n) => registry.schema_by_id(n).await,
            SchemaId::Guid(guid) => registry.schema_by_guid(guid).await,
        };
        let result = match fetched {
            Err(e) if e.retryable() => return Err(SchemaLoadError { id, retryable: true, message: e.to_string() }),
            // The id is named where the reason is shown: "schema id 7: not found".
            Err(RegistryError::NotFound(_)) => Err("not found".to_string()),
            Err(e) => Err(e.to_string()),
            Ok(r) if r.schema_type != schema_type => {
                Err(format!("a {:?} schema where {schema_type:?} was configured", r.schema_type))
            }
            Ok(r) => match resolve(registry.as_ref(), r).await {
                Err(e) if e.retryable() => {
                    return Err(SchemaLoadError { id, retryable: true, message: e.to_string() });
                }
                Err(e) => Err(format!("its references: {e}")),
                Ok(resolved) => compile(&resolved),
            },
        };
        let outcome = result.as_ref().map(|_| ()).map_err(|message| SchemaLoadError {
            id,
            retryable: false,
            message: message.clone(),
        });
        compiled.write().unwrap_or_else(PoisonError::into_inner).insert(id, result);
        outcome
    }
}
