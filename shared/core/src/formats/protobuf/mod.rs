//! Protobuf: schemas (`.proto` text from a Schema Registry or a local `.proto` file,
//! compiled with protox; or a binary `FileDescriptorSet`) → Iceberg types, and payloads
//! in the Confluent wire format decoded into Arrow columns.
//!
//! The mapping to Iceberg and Arrow types, and which fields are null when unset, are
//! documented in docs/types.md ("Type mapping", Protobuf); `maps_every_type` and the
//! integration tests hold the code to it.
//!
//! Wire format: `[0][schema id: u32 BE][message indexes][message]`. The indexes are
//! zig-zag varints, a count then that many indexes (count 0, the single byte 0, means
//! `[0]`); they walk from the schema's main file to the payload's message (`[1, 0]`: the
//! first message nested in the second top-level one; the entry types protoc makes for
//! maps do not count, as in Confluent's serializers). A payload written with another
//! message or schema version than the table's is resolved by field name: fields the
//! table lacks are skipped, table columns the message lacks are null, and int → long,
//! float → double are widened.
//!
//! A payload is decoded straight from its bytes into the columns (`protobuf_decode`: no
//! message tree; the lists its scan fills are reused from one payload to the next). A
//! proto2 field's declared default is not applied: unset, it is null like any field
//! with presence.

mod decode;
mod plan;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use crate::formats::by_id::SchemaSet;
use decode as protobuf_decode;
use decode::Scratch;
use plan::{EnumSymbols, FieldPlan, IntWire, MessagePlan, Node, Slot, mismatch};

use arrow_schema::{DataType, Fields, TimeUnit};
use iceberg::spec::{ListType, MapType, NestedField, PrimitiveType, StructType, Type};
use prost_reflect::{FieldDescriptor, FileDescriptor, Kind, MessageDescriptor};

use crate::columns::{Column, DecodeError, PayloadDecoder, SchemaLoadError, Shape};
use crate::config::SchemaSource;
use crate::formats::part::{FormatError, MakeDecoder, Part, PartContext};
use crate::registry::wire::{Framed, Payload, SchemaId, header_name};
use crate::registry::{Resolved, SchemaRegistry, SchemaType};
use crate::schema::layout::PayloadType;
use crate::varint::VarintError;

/// A Protobuf schema Floe cannot read, map or decode against the table.
#[derive(Debug, Clone, thiserror::Error)]
#[error("protobuf schema: {0}")]
pub struct ProtobufSchemaError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, ProtobufSchemaError> {
    Err(ProtobufSchemaError(msg.into()))
}

/// The name registry schema text is compiled under (imports of well-known types resolve).
const REGISTRY_FILE: &str = "floe_registry_schema.proto";

/// In-memory `.proto` files for protox, by import path.
struct TextFiles(Vec<(String, String)>);

impl protox::file::FileResolver for TextFiles {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        match self.0.iter().find(|(n, _)| n == name) {
            Some((_, text)) => protox::file::File::from_source(name, text),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

fn compile_with(
    resolver: impl protox::file::FileResolver + 'static,
    main: &str,
) -> Result<FileDescriptor, ProtobufSchemaError> {
    let mut chain = protox::file::ChainFileResolver::new();
    chain.add(resolver);
    chain.add(protox::file::GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(chain);
    compiler.open_file(main).map_err(|e| ProtobufSchemaError(e.to_string()))?;
    compiler.descriptor_pool().get_file_by_name(main).ok_or_else(|| ProtobufSchemaError(format!("no file {main}")))
}

/// Compiles `.proto` text (a registry schema). Imports of google/protobuf files resolve.
pub fn parse_proto(text: &str) -> Result<FileDescriptor, ProtobufSchemaError> {
    compile_with(TextFiles(vec![(REGISTRY_FILE.to_string(), text.to_string())]), REGISTRY_FILE)
}

/// Compiles a registry schema with the schemas it references: each is the file its
/// reference names (the path the schema imports).
pub fn parse_registered(resolved: &Resolved) -> Result<FileDescriptor, ProtobufSchemaError> {
    let mut files = vec![(REGISTRY_FILE.to_string(), resolved.schema.schema.clone())];
    for r in &resolved.references {
        if r.schema.schema_type != SchemaType::Protobuf {
            return err(format!("reference {} is a {:?} schema", r.name, r.schema.schema_type));
        }
        files.push((r.name.clone(), r.schema.schema.clone()));
    }
    compile_with(TextFiles(files), REGISTRY_FILE)
}

/// A local schema file: `.proto` text (imports resolved beside it), or else a binary
/// `FileDescriptorSet` (`protoc --descriptor_set_out`, whose last file is the main one).
pub fn load_file(path: &Path) -> Result<FileDescriptor, ProtobufSchemaError> {
    let fail = |m: String| ProtobufSchemaError(format!("{}: {m}", path.display()));
    if path.extension().is_some_and(|e| e == "proto") {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| fail("not a file name".into()))?;
        let mut chain = protox::file::ChainFileResolver::new();
        chain.add(protox::file::IncludeFileResolver::new(dir.to_path_buf()));
        return compile_with(chain, name).map_err(|e| fail(e.0));
    }
    use prost_reflect::prost::Message;
    let bytes = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    let set = prost_reflect::prost_types::FileDescriptorSet::decode(bytes.as_slice())
        .map_err(|e| fail(format!("not a .proto file nor a FileDescriptorSet: {e}")))?;
    let main = set.file.last().map(|f| f.name().to_string()).ok_or_else(|| fail("empty FileDescriptorSet".into()))?;
    compile_with(protox::file::DescriptorSetFileResolver::new(set), &main).map_err(|e| fail(e.0))
}

/// The table's message: `name` (a full name, found in the main file or its imports), or
/// the first message of the main file.
pub fn table_message(main: &FileDescriptor, name: Option<&str>) -> Result<MessageDescriptor, ProtobufSchemaError> {
    match name {
        Some(n) => main
            .parent_pool()
            .get_message_by_name(n.trim_start_matches('.'))
            .ok_or_else(|| ProtobufSchemaError(format!("no message {n} in the schema"))),
        None => main.messages().next().ok_or_else(|| ProtobufSchemaError("the schema defines no message".into())),
    }
}

const TIMESTAMP: &str = "google.protobuf.Timestamp";

/// The wrapped kind of a google.protobuf wrapper message.
fn wrapped(m: &MessageDescriptor) -> Option<Kind> {
    const WRAPPERS: [&str; 9] = [
        "google.protobuf.BoolValue",
        "google.protobuf.Int32Value",
        "google.protobuf.Int64Value",
        "google.protobuf.UInt32Value",
        "google.protobuf.UInt64Value",
        "google.protobuf.FloatValue",
        "google.protobuf.DoubleValue",
        "google.protobuf.StringValue",
        "google.protobuf.BytesValue",
    ];
    if WRAPPERS.contains(&m.full_name()) { m.get_field_by_name("value").map(|f| f.kind()) } else { None }
}

/// Maps a message to the Iceberg type of its payload (placeholder field ids).
pub fn to_payload_type(message: &MessageDescriptor) -> Result<PayloadType, ProtobufSchemaError> {
    Ok(PayloadType::Record(message_struct(message, &mut Vec::new())?))
}

fn prim(p: PrimitiveType) -> Type {
    Type::Primitive(p)
}

fn message_struct(m: &MessageDescriptor, stack: &mut Vec<String>) -> Result<StructType, ProtobufSchemaError> {
    let name = m.full_name().to_string();
    if stack.contains(&name) {
        return err(format!("recursive message {} → {name} cannot be a table column", stack.join(" → ")));
    }
    stack.push(name);
    let mut fields = Vec::new();
    for f in m.fields() {
        fields.push(Arc::new(NestedField::optional(0, f.name(), field_type(&f, stack)?)));
    }
    stack.pop();
    Ok(StructType::new(fields))
}

fn field_type(f: &FieldDescriptor, stack: &mut Vec<String>) -> Result<Type, ProtobufSchemaError> {
    if f.is_map() {
        let Kind::Message(entry) = f.kind() else { return err(format!("map field {} without entry", f.full_name())) };
        let key = kind_type(entry.map_entry_key_field().kind(), stack)?;
        let value = kind_type(entry.map_entry_value_field().kind(), stack)?;
        Ok(Type::Map(MapType::new(
            Arc::new(NestedField::map_key_element(0, key)),
            Arc::new(NestedField::map_value_element(0, value, true)),
        )))
    } else if f.is_list() {
        let element = kind_type(f.kind(), stack)?;
        Ok(Type::List(ListType::new(Arc::new(NestedField::list_element(0, element, true)))))
    } else {
        kind_type(f.kind(), stack)
    }
}

fn kind_type(kind: Kind, stack: &mut Vec<String>) -> Result<Type, ProtobufSchemaError> {
    Ok(match kind {
        Kind::Bool => prim(PrimitiveType::Boolean),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => prim(PrimitiveType::Int),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 | Kind::Uint32 | Kind::Fixed32 => prim(PrimitiveType::Long),
        Kind::Uint64 | Kind::Fixed64 => prim(PrimitiveType::Decimal { precision: 20, scale: 0 }),
        Kind::Float => prim(PrimitiveType::Float),
        Kind::Double => prim(PrimitiveType::Double),
        Kind::String | Kind::Enum(_) => prim(PrimitiveType::String),
        Kind::Bytes => prim(PrimitiveType::Binary),
        Kind::Message(m) if m.full_name() == TIMESTAMP => prim(PrimitiveType::Timestamptz),
        Kind::Message(m) => match wrapped(&m) {
            Some(inner) => kind_type(inner, stack)?,
            None => Type::Struct(message_struct(&m, stack)?),
        },
    })
}

pub(super) fn compile_message(
    m: &MessageDescriptor,
    target: &Fields,
    depth: usize,
) -> Result<MessagePlan, ProtobufSchemaError> {
    if depth > 64 {
        return err("message nested more than 64 levels");
    }
    let mut fields = Vec::new();
    let mut slots = Vec::new();
    // In number order, the order encoders write them in (and the decoder's in-order
    // path takes them in); which column each fills does not depend on it.
    let mut declared: Vec<FieldDescriptor> = m.fields().collect();
    declared.sort_by_key(FieldDescriptor::number);
    for f in declared {
        // A oneof of one member (a proto3 `optional` field's) unsets nothing.
        let oneof = f
            .containing_oneof()
            .filter(|o| o.fields().len() > 1)
            .and_then(|o| m.oneofs().position(|x| x.name() == o.name()));
        let Some((column, c)) = target.find(f.name()) else {
            if oneof.is_some() {
                slots.push((f.number(), Slot { field: None, oneof }));
            }
            continue;
        };
        let node = compile_field(&f, c.data_type(), depth)
            .map_err(|e| ProtobufSchemaError(format!("field {}: {}", f.full_name(), e.0)))?;
        let nullable = f.supports_presence() && !f.is_list() && !f.is_map();
        slots.push((f.number(), Slot { field: Some(fields.len()), oneof }));
        let wire = protobuf_decode::field_wire(&node, f.is_group());
        fields.push(FieldPlan { wire, oneof, field: f, node, column, nullable });
    }
    slots.sort_by_key(|(n, _)| *n);
    let missing = (0..target.len()).filter(|i| !fields.iter().any(|f| f.column == *i)).collect();
    Ok(MessagePlan { fields, missing, slots, oneofs: m.oneofs().len() })
}

fn compile_field(f: &FieldDescriptor, t: &DataType, depth: usize) -> Result<Node, ProtobufSchemaError> {
    if f.is_map() {
        let Kind::Message(entry) = f.kind() else { return err("map without entry type") };
        let DataType::Map(entries, _) = t else { return err(format!("map written into a {t} column")) };
        let DataType::Struct(kv) = entries.data_type() else { return err("malformed map column") };
        if kv.len() != 2 {
            return err("malformed map column");
        }
        let key = compile_kind(entry.map_entry_key_field().kind(), kv[0].data_type(), depth)?;
        let value = compile_kind(entry.map_entry_value_field().kind(), kv[1].data_type(), depth)?;
        Ok(Node::Map(Box::new(key), Box::new(value)))
    } else if f.is_list() {
        let DataType::List(element) = t else { return err(format!("repeated field written into a {t} column")) };
        Ok(Node::List(Box::new(compile_kind(f.kind(), element.data_type(), depth)?)))
    } else {
        compile_kind(f.kind(), t, depth)
    }
}

fn compile_kind(kind: Kind, t: &DataType, depth: usize) -> Result<Node, ProtobufSchemaError> {
    use DataType as D;
    let described = match &kind {
        Kind::Message(m) => m.full_name().to_string(),
        Kind::Enum(e) => format!("enum {}", e.full_name()),
        other => format!("{other:?}").to_lowercase(),
    };
    let (node, ok) = match kind {
        Kind::Bool => (Node::Bool, matches!(t, D::Boolean)),
        Kind::Int32 => (Node::Int(IntWire::Varint), matches!(t, D::Int32 | D::Int64)),
        Kind::Sint32 => (Node::Int(IntWire::ZigZag), matches!(t, D::Int32 | D::Int64)),
        Kind::Sfixed32 => (Node::Int(IntWire::Fixed), matches!(t, D::Int32 | D::Int64)),
        Kind::Int64 => (Node::Long(IntWire::Varint), matches!(t, D::Int64)),
        Kind::Sint64 => (Node::Long(IntWire::ZigZag), matches!(t, D::Int64)),
        Kind::Sfixed64 => (Node::Long(IntWire::Fixed), matches!(t, D::Int64)),
        Kind::Uint32 => (Node::UInt(IntWire::Varint), matches!(t, D::Int64)),
        Kind::Fixed32 => (Node::UInt(IntWire::Fixed), matches!(t, D::Int64)),
        Kind::Uint64 => (Node::ULong(IntWire::Varint), matches!(t, D::Decimal128(p, 0) if *p >= 20)),
        Kind::Fixed64 => (Node::ULong(IntWire::Fixed), matches!(t, D::Decimal128(p, 0) if *p >= 20)),
        Kind::Float => (Node::Float, matches!(t, D::Float32 | D::Float64)),
        Kind::Double => (Node::Double, matches!(t, D::Float64)),
        Kind::String => (Node::String, matches!(t, D::Utf8 | D::LargeBinary)),
        Kind::Bytes => (Node::Bytes, matches!(t, D::LargeBinary)),
        Kind::Enum(e) => (Node::Enum(EnumSymbols::new(e)), matches!(t, D::Utf8)),
        Kind::Message(m) if m.full_name() == TIMESTAMP => {
            (Node::Timestamp, matches!(t, D::Timestamp(TimeUnit::Microsecond | TimeUnit::Nanosecond, _)))
        }
        Kind::Message(m) => match wrapped(&m) {
            Some(inner) => return Ok(Node::Wrapper(Box::new(compile_kind(inner, t, depth)?))),
            None => match t {
                D::Struct(fields) => return Ok(Node::Message(compile_message(&m, fields, depth + 1)?)),
                _ => (Node::Bool, false),
            },
        },
    };
    if ok { Ok(node) } else { err(format!("{described} cannot be written into a {t} column")) }
}

/// Reads the message-index array at the start of a wire-format body: the path and the
/// bytes it took.
pub fn message_indexes(body: &[u8]) -> Result<(Vec<usize>, usize), (usize, String)> {
    let mut pos = 0;
    let mut next = |what: &str| -> Result<i64, (usize, String)> {
        match crate::varint::zigzag(&body[pos..]) {
            Ok((v, n)) => {
                pos += n;
                Ok(v)
            }
            Err(VarintError::End) => Err((pos, format!("message indexes: {what} cut short"))),
            Err(VarintError::TooLong) => Err((pos, format!("message indexes: {what} varint longer than 10 bytes"))),
        }
    };
    let count = next("count")?;
    if count == 0 {
        return Ok((vec![0], 1));
    }
    // Every index takes at least one byte.
    if count < 0 || count as u64 > body.len() as u64 {
        return Err((0, format!("message indexes: count {count}")));
    }
    let mut path = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let i = next("index")?;
        path.push(usize::try_from(i).map_err(|_| (0, format!("message indexes: negative index {i}")))?);
    }
    Ok((path, pos))
}

/// The message at `path` in `main` (first index: a top-level message; then nested ones,
/// counted as in the schema text).
fn message_at(main: &FileDescriptor, path: &[usize]) -> Option<MessageDescriptor> {
    let (first, rest) = path.split_first()?;
    let mut m = main.messages().nth(*first)?;
    for i in rest {
        // Map entries are not messages of the schema text: Confluent's serializers skip them.
        let child = m.child_messages().filter(|c| !c.is_map_entry()).nth(*i)?;
        m = child;
    }
    Some(m)
}

/// A schema's messages compiled against the table's columns.
pub struct CompiledProtobuf {
    main: FileDescriptor,
    /// Every message of the main file (some may not fit the table; only payloads of
    /// those are bad records); the first top-level one first.
    plans: Vec<Result<MessagePlan, String>>,
    /// Where each message's plan is in `plans`, by full name.
    by_name: HashMap<String, usize>,
}

impl CompiledProtobuf {
    /// Compiles the messages of `main` for `shape` (a struct column, or the top-level
    /// fields of the value-as-payload layout).
    pub fn new(main: FileDescriptor, shape: &Shape) -> Result<CompiledProtobuf, ProtobufSchemaError> {
        let fields = match shape {
            Shape::Fields(f) | Shape::Column(DataType::Struct(f)) => f,
            Shape::Column(other) => return err(format!("a message cannot be written into a {other} column")),
        };
        let (mut plans, mut by_name) = (Vec::new(), HashMap::new());
        let mut queue: Vec<MessageDescriptor> = main.messages().collect();
        queue.reverse();
        while let Some(m) = queue.pop() {
            queue.extend(m.child_messages().filter(|c| !c.is_map_entry()));
            let plan = compile_message(&m, fields, 0).map_err(|e| format!("message {}: {}", m.full_name(), e.0));
            by_name.insert(m.full_name().to_string(), plans.len());
            plans.push(plan);
        }
        Ok(CompiledProtobuf { main, plans, by_name })
    }

    /// The plan of `message`, if it is one of the main file's.
    fn plan(&self, message: &MessageDescriptor) -> Option<&Result<MessagePlan, String>> {
        self.by_name.get(message.full_name()).map(|&i| &self.plans[i])
    }

    /// Checks that `message` fits the table (a local file's table message must).
    fn check(&self, message: &MessageDescriptor) -> Result<(), ProtobufSchemaError> {
        match self.plan(message) {
            Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(ProtobufSchemaError(e.clone())),
            None => err(format!("message {} is not in the schema's main file", message.full_name())),
        }
    }

    /// The plan of a framed payload's message (named by the message indexes, in the
    /// payload or in the schema header) and where its bytes start in `framed.body`.
    fn resolve(&self, framed: &Framed<'_>, part: &'static str) -> Result<(&MessagePlan, usize), DecodeError> {
        let Framed { body, offset, .. } = *framed;
        let fail = |position: usize, detail: String| DecodeError {
            part,
            position: offset + position,
            detail,
            missing_schema: None,
            deletes_key: false,
        };
        let (path, used) = match framed.header_rest {
            // The common `[0]` (one zero byte): the first message, compiled first.
            None if body.first() == Some(&0) => match self.plans.first() {
                Some(Ok(plan)) => return Ok((plan, 1)),
                _ => (MAIN, 1),
            },
            None => message_indexes(body).map(|(p, used)| (Indexes::Owned(p), used)).map_err(|(p, d)| fail(p, d))?,
            Some(rest) => {
                let header = |detail: String| fail(0, format!("header {}: {detail}", header_name(part)));
                let (path, used) = message_indexes(rest).map_err(|(_, d)| header(d))?;
                if used < rest.len() {
                    return Err(header(format!("{} bytes after the message indexes", rest.len() - used)));
                }
                (Indexes::Owned(path), 0)
            }
        };
        let message = message_at(&self.main, path.as_slice())
            .ok_or_else(|| fail(0, format!("message indexes {:?}: no such message", path.as_slice())))?;
        match self.plan(&message) {
            Some(Ok(plan)) => Ok((plan, used)),
            Some(Err(e)) => Err(fail(0, e.clone())),
            None => Err(fail(0, format!("message {} cannot be decoded", message.full_name()))),
        }
    }
}

/// Message indexes: the common `[0]` (one zero byte) without an allocation per payload.
enum Indexes {
    Main,
    Owned(Vec<usize>),
}

const MAIN: Indexes = Indexes::Main;

impl Indexes {
    fn as_slice(&self) -> &[usize] {
        match self {
            Indexes::Main => &[0],
            Indexes::Owned(p) => p,
        }
    }
}

/// Protobuf payloads in the Confluent wire format.
pub struct ProtobufDecoder {
    part: &'static str,
    shape: Shape,
    schemas: SchemaSet<CompiledProtobuf>,
    /// The decoder's lists, reused from one payload to the next.
    scratch: Mutex<Scratch>,
}

impl ProtobufDecoder {
    /// Every payload decoded with the schema of `main` (a local schema file); `message`,
    /// the table's, must fit the table's columns.
    pub fn fixed(
        part: &'static str,
        main: FileDescriptor,
        message: &MessageDescriptor,
        shape: Shape,
    ) -> Result<ProtobufDecoder, ProtobufSchemaError> {
        let compiled = CompiledProtobuf::new(main, &shape)?;
        compiled.check(message)?;
        Ok(ProtobufDecoder { part, shape, schemas: SchemaSet::fixed(compiled), scratch: Mutex::default() })
    }

    /// Schemas by the id in each payload, loaded from `registry` on first sight.
    pub fn registry(part: &'static str, registry: Arc<dyn SchemaRegistry>, shape: Shape) -> ProtobufDecoder {
        ProtobufDecoder { part, shape, schemas: SchemaSet::registry(registry), scratch: Mutex::default() }
    }

    fn append_to(
        &self,
        payload: Payload<'_>,
        column: Option<&mut Column>,
        fields: Option<&mut [Column]>,
    ) -> Result<(), DecodeError> {
        self.schemas.decode(payload, self.part, |compiled, framed| {
            let (plan, used) = compiled.resolve(&framed, self.part)?;
            let error = |position: usize, detail: String| DecodeError {
                part: self.part,
                position: framed.offset + position,
                detail,
                missing_schema: None,
                deletes_key: false,
            };
            let columns = match (column, fields) {
                (Some(Column::Struct(s)), None) => {
                    s.append_valid();
                    s.children.as_mut_slice()
                }
                (None, Some(fields)) => fields,
                _ => return Err(error(0, mismatch("message"))),
            };
            let mut scratch = self.scratch.lock().unwrap_or_else(PoisonError::into_inner);
            protobuf_decode::decode(plan, &framed.body[used..], &mut scratch, columns)
                .map_err(|f| error(used + f.at, f.detail))
        })
    }
}

#[async_trait::async_trait]
impl PayloadDecoder for ProtobufDecoder {
    fn append(&self, payload: Payload<'_>, column: &mut Column) -> Result<(), DecodeError> {
        self.append_to(payload, Some(column), None)
    }

    fn append_fields(&self, payload: Payload<'_>, fields: &mut [Column]) -> Result<(), DecodeError> {
        self.append_to(payload, None, Some(fields))
    }

    async fn load_schema(&self, id: SchemaId) -> Result<(), SchemaLoadError> {
        self.schemas
            .load(id, SchemaType::Protobuf, |resolved| {
                parse_registered(resolved)
                    .and_then(|main| CompiledProtobuf::new(main, &self.shape))
                    .map_err(|e| e.to_string())
            })
            .await
    }
}

/// Sets up a Protobuf key or value: the table's type from the configured message (or
/// the first one) of the schema the context names, and a decoder by payload schema id
/// (registry) or with that one schema (local file).
pub async fn part(ctx: &PartContext<'_>) -> Result<Part, FormatError> {
    let (main, registry) = match ctx.source {
        SchemaSource::File(path) => (load_file(path).map_err(|e| ctx.error(e))?, None),
        _ => {
            let (resolved, registry) = ctx.table_schema(SchemaType::Protobuf).await?;
            if resolved.schema.schema_type != SchemaType::Protobuf {
                return Err(ctx.error(format!(
                    "the latest schema (id {}) is a {:?} schema where Protobuf was configured",
                    resolved.schema.id, resolved.schema.schema_type
                )));
            }
            (parse_registered(&resolved).map_err(|e| ctx.schema_error(e))?, registry)
        }
    };
    let message = table_message(&main, ctx.message).map_err(|e| ctx.schema_error(e))?;
    let payload = to_payload_type(&message).map_err(|e| ctx.schema_error(e))?;
    let name = ctx.name;
    let make: MakeDecoder = match registry {
        Some(registry) => Box::new(move |shape| {
            Ok(Arc::new(ProtobufDecoder::registry(name, registry, shape)) as Arc<dyn PayloadDecoder>)
        }),
        None => Box::new(move |shape| {
            // Payload message indexes are resolved in the file defining the table's message.
            ProtobufDecoder::fixed(name, message.parent_file(), &message, shape)
                .map(|d| Arc::new(d) as Arc<dyn PayloadDecoder>)
                .map_err(|e| e.to_string())
        }),
    };
    Ok(Part { payload, make })
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Decimal128Type, Int32Type, Int64Type, TimestampMicrosecondType};
    use arrow_array::{Array, ArrayRef};
    use prost_reflect::prost::Message;
    use prost_reflect::{DynamicMessage, Value};

    use super::*;

    const PROTO: &str = r#"
        syntax = "proto3";
        package t;
        import "google/protobuf/timestamp.proto";
        import "google/protobuf/wrappers.proto";
        message M {
          bool b = 1; int32 i = 2; sint32 si = 3; sfixed32 sf = 4; int64 l = 5; sint64 sl = 6;
          sfixed64 sfl = 7; uint32 u = 8; uint64 ul = 9; float f = 10; double d = 11; string s = 12;
          bytes by = 13; E e = 14; Inner inner = 15; repeated int32 r = 16; map<string, Inner> m = 17;
          oneof choice { string a = 18; int64 n = 19; }
          google.protobuf.Timestamp ts = 20; google.protobuf.Int32Value w = 21;
          optional int32 opt = 22; fixed32 f32 = 23; fixed64 f64 = 24;
          message Inner { string x = 1; }
        }
        enum E { ZERO = 0; ONE = 1; }
        message Rec { string id = 1; Rec next = 2; }
    "#;

    #[test]
    fn enum_symbols_by_number_keep_the_first_alias() {
        let file = parse_proto(
            r#"syntax = "proto3"; package t;
               enum E { option allow_alias = true; UNSET = 0; STARTED = 1; RUNNING = 1; DONE = 7; NEG = -3; }"#,
        )
        .unwrap();
        let e = EnumSymbols::new(file.enums().next().unwrap());
        let names: Vec<_> = [0, 1, 7, -3, 2, 8].map(|n| e.name(n)).into();
        assert_eq!(names, [Some("UNSET"), Some("STARTED"), Some("DONE"), Some("NEG"), None, None]);
        assert_eq!(&*e.default, "UNSET");
    }

    fn main_file() -> FileDescriptor {
        parse_proto(PROTO).unwrap()
    }

    fn fields(m: &MessageDescriptor) -> Fields {
        let PayloadType::Record(s) = to_payload_type(m).unwrap() else { panic!("record") };
        let schema = crate::schema::plan(None, &s).unwrap().schema;
        iceberg::arrow::schema_to_arrow_schema(&schema).unwrap().fields().clone()
    }

    fn framed(indexes: &[u8], body: &[u8]) -> Vec<u8> {
        let mut v = vec![0, 0, 0, 0, 7];
        v.extend_from_slice(indexes);
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn maps_every_type() {
        let m = table_message(&main_file(), None).unwrap();
        assert_eq!(m.full_name(), "t.M");
        let PayloadType::Record(s) = to_payload_type(&m).unwrap() else { panic!("record") };
        let t = |name: &str| s.field_by_name(name).unwrap().field_type.to_string();
        let expect = [
            ("b", "boolean"),
            ("i", "int"),
            ("si", "int"),
            ("sf", "int"),
            ("l", "long"),
            ("sl", "long"),
            ("sfl", "long"),
            ("u", "long"),
            ("ul", "decimal(20,0)"),
            ("f", "float"),
            ("d", "double"),
            ("s", "string"),
            ("by", "binary"),
            ("e", "string"),
            ("ts", "timestamptz"),
            ("w", "int"),
            ("a", "string"),
            ("n", "long"),
            ("opt", "int"),
            ("f32", "long"),
            ("f64", "decimal(20,0)"),
        ];
        for (name, ty) in expect {
            assert_eq!(t(name).replace(' ', ""), ty, "{name}");
        }
        assert!(matches!(s.field_by_name("inner").unwrap().field_type.as_ref(), Type::Struct(_)));
        assert!(matches!(s.field_by_name("r").unwrap().field_type.as_ref(), Type::List(_)));
        assert!(matches!(s.field_by_name("m").unwrap().field_type.as_ref(), Type::Map(_)));
        assert!(s.fields().iter().all(|f| !f.required));
    }

    #[test]
    fn recursive_messages_are_rejected_with_their_cycle() {
        let rec = table_message(&main_file(), Some("t.Rec")).unwrap();
        let e = to_payload_type(&rec).unwrap_err().to_string();
        assert!(e.contains("recursive message t.Rec → t.Rec"), "{e}");
        assert!(table_message(&main_file(), Some("t.Nope")).is_err());
        assert!(parse_proto("message { oops").is_err());
    }

    #[test]
    fn message_indexes_are_zigzag_varints() {
        assert_eq!(message_indexes(&[0, 9]).unwrap(), (vec![0], 1));
        assert_eq!(message_indexes(&[4, 2, 0, 9]).unwrap(), (vec![1, 0], 3));
        assert_eq!(message_indexes(&[2, 6]).unwrap(), (vec![3], 2));
        assert!(message_indexes(&[]).unwrap_err().1.contains("cut short"));
        assert!(message_indexes(&[1]).unwrap_err().1.contains("count -1"));
        assert!(message_indexes(&[6, 2]).is_err(), "three indexes in one byte");
        assert!(message_indexes(&[2, 1]).unwrap_err().1.contains("negative index"));
        assert!(message_indexes(&[0xff; 11]).unwrap_err().1.contains("longer than 10 bytes"));
    }

    /// The test file, its table message `t.M`, the table's value fields and a decoder
    /// into them.
    fn value_decoder() -> (FileDescriptor, MessageDescriptor, Fields, ProtobufDecoder) {
        let main = main_file();
        let m = table_message(&main, None).unwrap();
        let fields = fields(&m);
        let decoder = ProtobufDecoder::fixed("value", main.clone(), &m, Shape::Fields(fields.clone())).unwrap();
        (main, m, fields, decoder)
    }

    fn finish(cols: &mut [Column], fields: &Fields, name: &str) -> ArrayRef {
        cols[fields.find(name).unwrap().0].finish()
    }

    #[test]
    fn decodes_presence_defaults_and_leaves_builders_alone_on_unresolved_payloads() {
        let (main, m, fields, decoder) = value_decoder();
        let mut msg = DynamicMessage::new(m.clone());
        msg.set_field_by_name("ul", Value::U64(u64::MAX));
        msg.set_field_by_name("e", Value::EnumNumber(7));
        msg.set_field_by_name("n", Value::I64(5));
        let mut ts = DynamicMessage::new(main.parent_pool().get_message_by_name(TIMESTAMP).unwrap());
        ts.set_field_by_name("seconds", Value::I64(1_700_000_000));
        ts.set_field_by_name("nanos", Value::I32(123_456_789));
        msg.set_field_by_name("ts", Value::Message(ts));
        let good = framed(&[0], &msg.encode_to_vec());
        let mut cols: Vec<Column> = fields.iter().map(|f| Column::new(f.data_type()).unwrap()).collect();

        // An unknown message path, a bad magic byte: nothing appended. (A payload that
        // fails half-way may leave part of its row, which the converter drops.)
        for bad in [&framed(&[2, 8], &[])[..], &[1, 0, 0, 0, 7, 0][..]] {
            assert!(decoder.append_fields(bad.into(), &mut cols).is_err());
            assert!(cols.iter().all(Column::is_empty));
        }
        decoder.append_fields((&good).into(), &mut cols).unwrap();
        let empty = framed(&[0], &[]);
        decoder.append_fields((&empty).into(), &mut cols).unwrap();

        let i = finish(&mut cols, &fields, "i");
        assert_eq!(i.as_primitive::<Int32Type>().values().to_vec(), vec![0, 0], "proto3 scalars: defaults");
        assert_eq!(i.null_count(), 0);
        let opt = finish(&mut cols, &fields, "opt");
        assert_eq!(opt.null_count(), 2, "proto3 optional: null when unset");
        let ul = finish(&mut cols, &fields, "ul");
        assert_eq!(ul.as_primitive::<Decimal128Type>().value(0), u64::MAX as i128);
        let e = finish(&mut cols, &fields, "e");
        assert_eq!((e.as_string::<i32>().value(0), e.as_string::<i32>().value(1)), ("7", "ZERO"));
        let (a, n) = (finish(&mut cols, &fields, "a"), finish(&mut cols, &fields, "n"));
        assert!(a.is_null(0) && a.is_null(1) && n.is_null(1));
        assert_eq!(n.as_primitive::<Int64Type>().value(0), 5);
        let ts = finish(&mut cols, &fields, "ts");
        assert_eq!(ts.as_primitive::<TimestampMicrosecondType>().value(0), 1_700_000_000_123_456);
        assert!(ts.is_null(1));
        let (w, inner, r) =
            (finish(&mut cols, &fields, "w"), finish(&mut cols, &fields, "inner"), finish(&mut cols, &fields, "r"));
        assert!(w.is_null(0) && inner.is_null(0));
        assert_eq!((r.null_count(), r.as_list::<i32>().value(0).len()), (0, 0), "repeated: empty, not null");
    }

    #[test]
    fn damaged_payloads_are_errors_and_leave_the_columns_consistent() {
        let (main, m, fields, decoder) = value_decoder();
        let mut msg = DynamicMessage::new(m.clone());
        msg.set_field_by_name("s", Value::String("héllo".into()));
        msg.set_field_by_name("r", Value::List(vec![Value::I32(1), Value::I32(-2)]));
        msg.set_field_by_name("e", Value::EnumNumber(1));
        msg.set_field_by_name("n", Value::I64(5));
        let inner = main.parent_pool().get_message_by_name("t.M.Inner").unwrap();
        let mut x = DynamicMessage::new(inner);
        x.set_field_by_name("x", Value::String("in".into()));
        msg.set_field_by_name("inner", Value::Message(x));
        let payloads = vec![framed(&[0], &msg.encode_to_vec()), framed(&[0], &[])];
        let mut root = crate::columns::StructColumn::new(&fields).unwrap();
        let (ok, failed) =
            crate::columns::damage::decode_damaged(&mut root, &payloads, 0x5eed, 10_000, |p, columns| {
                decoder.append_fields(p.into(), columns)
            });
        assert!(ok > 0 && failed > 1000, "{ok} decoded, {failed} failed");
    }

    #[test]
    fn nested_message_paths_resolve_by_name_into_the_table() {
        let (main, _, fields, decoder) = value_decoder();
        // [0, 0]: M.Inner (the map's entry type, before it in the descriptor, does not
        // count), whose `x` the table lacks: every column is null.
        let inner = main.parent_pool().get_message_by_name("t.M.Inner").unwrap();
        let mut msg = DynamicMessage::new(inner);
        msg.set_field_by_name("x", Value::String("hi".into()));
        let payload = framed(&[4, 0, 0], &msg.encode_to_vec());
        let mut cols: Vec<Column> = fields.iter().map(|f| Column::new(f.data_type()).unwrap()).collect();
        decoder.append_fields((&payload).into(), &mut cols).unwrap();
        for (c, f) in cols.iter_mut().zip(fields.iter()) {
            assert!(c.finish().is_null(0), "{}", f.name());
        }
    }

    #[test]
    fn message_indexes_in_a_schema_header_select_the_message() {
        let (main, _, fields, decoder) = value_decoder();
        let inner = main.parent_pool().get_message_by_name("t.M.Inner").unwrap();
        let mut msg = DynamicMessage::new(inner);
        msg.set_field_by_name("x", Value::String("hi".into()));
        let body = msg.encode_to_vec();
        let mut cols: Vec<Column> = fields.iter().map(|f| Column::new(f.data_type()).unwrap()).collect();
        // `[0][id]` then the path [0, 0] (M.Inner) in the header; the value is the bare body.
        let header = [0, 0, 0, 0, 9, 4, 0, 0];
        decoder.append_fields(Payload { bytes: &body, schema_header: Some(&header) }, &mut cols).unwrap();
        assert_eq!(cols[0].len(), 1);
        // Bytes after the indexes, or none at all: the header is bad, nothing appended.
        for (header, detail) in [
            (&[0, 0, 0, 0, 9, 0, 7][..], "header __value_schema_id: 1 bytes after the message indexes"),
            (&[0, 0, 0, 0, 9][..], "header __value_schema_id: message indexes: count cut short"),
        ] {
            let e =
                decoder.append_fields(Payload { bytes: &body, schema_header: Some(header) }, &mut cols).unwrap_err();
            assert_eq!((e.position, e.detail.as_str()), (0, detail));
            assert_eq!(cols[0].len(), 1);
        }
    }

    #[test]
    fn a_key_message_fills_one_struct_column() {
        let main = main_file();
        let m = table_message(&main, None).unwrap();
        let shape = Shape::Column(DataType::Struct(fields(&m)));
        let Shape::Column(t) = &shape else { unreachable!() };
        let mut col = Column::new(t).unwrap();
        let decoder = ProtobufDecoder::fixed("key", main.clone(), &m, shape.clone()).unwrap();
        let mut msg = DynamicMessage::new(m.clone());
        msg.set_field_by_name("s", Value::String("k".into()));
        let payload = framed(&[0], &msg.encode_to_vec());
        decoder.append((&payload).into(), &mut col).unwrap();
        let array = col.finish();
        let s = array.as_struct();
        assert_eq!((s.len(), s.null_count()), (1, 0));
        assert_eq!(s.column_by_name("s").unwrap().as_string::<i32>().value(0), "k");
        let e = ProtobufDecoder::fixed("key", main, &m, Shape::Column(DataType::Utf8)).err().unwrap();
        assert!(e.to_string().contains("cannot be written into a Utf8 column"), "{e}");
    }

    #[test]
    fn a_message_that_does_not_fit_the_table_is_a_bad_record() {
        let main = main_file();
        let m = table_message(&main, None).unwrap();
        let other = parse_proto("syntax = \"proto3\"; message X { string i = 2; }").unwrap();
        let compiled = CompiledProtobuf::new(other, &Shape::Fields(fields(&m))).unwrap();
        let framed = Framed { schema: SchemaId::Id(1), body: &[0], offset: 5, header_rest: None };
        let e = compiled.resolve(&framed, "value").err().unwrap();
        assert!(e.detail.contains("cannot be written into a Int32 column"), "{}", e.detail);
    }
}
