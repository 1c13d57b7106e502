//! Plain JSON's types, inferred from a segment's records (a first pass over it), merged
//! field by field; see [`super`] for the mapping.

use std::collections::BTreeMap;
use std::sync::Arc;

use iceberg::spec::{ListType, NestedField, PrimitiveType, StructType, Type};
use serde::de::{self, DeserializeSeed};

use crate::config::Envelope;
use crate::schema::layout::PayloadType;
use crate::segment::{SegmentError, SegmentReader};

/// Infers the key and value types of a segment's records (committed and open
/// transactions alike); payloads that are not JSON are left to the decoding pass.
pub async fn infer(
    mut reader: SegmentReader,
    envelope: Option<Envelope>,
) -> Result<(Inferred, Inferred), SegmentError> {
    let (mut key, mut value) = (Inferred::default(), Inferred::default());
    while let Some(batch) = reader.next_batch().await? {
        for r in &batch.records {
            // A Debezium event's row is its `after` (an event that is none is a bad record).
            let row = match (envelope, r.value) {
                (Some(Envelope::Debezium), Some(v)) => crate::formats::debezium::unwrap(v).ok().flatten(),
                _ => r.value,
            };
            for (payload, inferred) in [(&r.key, &mut key), (&row, &mut value)] {
                if let Some(bytes) = payload.as_deref() {
                    inferred.observe(bytes);
                }
            }
        }
    }
    Ok((key, value))
}

/// The type inferred so far for one position in the records.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Inferred {
    /// Only nulls (or nothing) seen.
    #[default]
    Unknown,
    Boolean,
    Long,
    Double,
    String,
    /// Values of conflicting kinds: kept as JSON text.
    Text,
    List(Box<Inferred>),
    Object(BTreeMap<String, Inferred>),
}

impl Inferred {
    /// Widens the inferred type with one more payload, read in one pass without a `Value`
    /// tree; a payload that is not JSON is left out (the decoding pass makes it a bad
    /// record), checked first so that its valid beginning changes nothing.
    pub fn observe(&mut self, payload: &[u8]) {
        if serde_json::from_slice::<de::IgnoredAny>(payload).is_ok() {
            let mut d = serde_json::Deserializer::from_slice(payload);
            // Cannot fail: the same text deserialized above.
            let _ = Observe(self).deserialize(&mut d);
        }
    }

    /// Widens with a value of kind `seen` (its nested parts already merged into it).
    fn widen(&mut self, seen: Inferred) {
        *self = match (std::mem::take(self), seen) {
            (Inferred::Unknown, s) => s,
            (Inferred::Long, Inferred::Double) | (Inferred::Double, Inferred::Long) => Inferred::Double,
            (a, s) if std::mem::discriminant(&a) == std::mem::discriminant(&s) => s,
            _ => Inferred::Text,
        };
    }

    fn to_type(&self) -> Type {
        let p = |t| Type::Primitive(t);
        match self {
            Inferred::Unknown | Inferred::String | Inferred::Text => p(PrimitiveType::String),
            Inferred::Boolean => p(PrimitiveType::Boolean),
            Inferred::Long => p(PrimitiveType::Long),
            Inferred::Double => p(PrimitiveType::Double),
            Inferred::List(e) => Type::List(ListType::new(Arc::new(NestedField::list_element(0, e.to_type(), false)))),
            Inferred::Object(fields) => Type::Struct(StructType::new(
                fields.iter().map(|(k, v)| Arc::new(NestedField::optional(0, k, v.to_type()))).collect(),
            )),
        }
    }

    /// The payload type: an object at the top becomes the value-as-payload layout.
    pub fn payload_type(&self) -> PayloadType {
        match self.to_type() {
            Type::Struct(s) if !s.fields().is_empty() => PayloadType::Record(s),
            Type::Struct(_) => PayloadType::Other(Type::Primitive(PrimitiveType::String)),
            t => PayloadType::Other(t),
        }
    }
}

/// One JSON value observed into an [`Inferred`].
struct Observe<'a>(&'a mut Inferred);

impl<'de> de::DeserializeSeed<'de> for Observe<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> de::Visitor<'de> for Observe<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.0.widen(Inferred::Boolean);
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.0.widen(Inferred::Long);
        Ok(())
    }

    /// An integer past `i64`: a double.
    fn visit_u64<E: de::Error>(self, u: u64) -> Result<(), E> {
        self.0.widen(if i64::try_from(u).is_ok() { Inferred::Long } else { Inferred::Double });
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.0.widen(Inferred::Double);
        Ok(())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.0.widen(Inferred::String);
        Ok(())
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut element = match self.0 {
            Inferred::List(e) => std::mem::take(e.as_mut()),
            _ => Inferred::Unknown,
        };
        while seq.next_element_seed(Observe(&mut element))?.is_some() {}
        self.0.widen(Inferred::List(Box::new(element)));
        Ok(())
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut fields = match self.0 {
            Inferred::Object(f) => std::mem::take(f),
            _ => BTreeMap::new(),
        };
        while let Some(slot) = map.next_key_seed(Member(&mut fields))? {
            map.next_value_seed(Observe(slot))?;
        }
        self.0.widen(Inferred::Object(fields));
        Ok(())
    }
}

/// A member name → its inferred type in the object's fields (added when new: the only
/// allocation, once per field name).
struct Member<'a>(&'a mut BTreeMap<String, Inferred>);

impl<'de, 'a> de::DeserializeSeed<'de> for Member<'a> {
    type Value = &'a mut Inferred;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<&'a mut Inferred, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, 'a> de::Visitor<'de> for Member<'a> {
    type Value = &'a mut Inferred;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<&'a mut Inferred, E> {
        if !self.0.contains_key(name) {
            self.0.insert(name.to_string(), Inferred::Unknown);
        }
        self.0.get_mut(name).ok_or_else(|| E::custom("internal: member just inserted"))
    }
}
