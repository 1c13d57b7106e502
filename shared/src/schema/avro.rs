//! Avro: schemas → Iceberg types, and binary payloads decoded straight into Arrow
//! columns (no intermediate values).
//!
//! | Avro | Iceberg | Arrow |
//! |---|---|---|
//! | boolean | boolean | Boolean |
//! | int | int | Int32 |
//! | long | long | Int64 |
//! | float | float | Float32 |
//! | double | double | Float64 |
//! | bytes | binary | LargeBinary |
//! | string | string | Utf8 |
//! | record | struct (fields optional: older writers may lack them) | Struct |
//! | enum | string (the symbol) | Utf8 |
//! | array | list | List |
//! | map | map<string, V> | Map |
//! | fixed(n) | fixed(n) | FixedSizeBinary(n) |
//! | union [null, T] | optional T | T, nullable |
//! | union of several types | struct of optional `member0`, `member1`, … (one set) | Struct |
//! | decimal(p, s) (bytes or fixed) | decimal(p, s) | Decimal128(p, s) |
//! | date | date | Date32 |
//! | time-millis, time-micros | time | Time64(µs) |
//! | timestamp-millis, timestamp-micros | timestamptz | Timestamp(µs, UTC) |
//! | timestamp-nanos | timestamptz_ns | Timestamp(ns, UTC) |
//! | local-timestamp-millis, local-timestamp-micros | timestamp | Timestamp(µs) |
//! | uuid | uuid | FixedSizeBinary(16) |
//!
//! A record written with another schema version than the table's is resolved by field
//! name: fields the table lacks are skipped, table columns the writer lacks are null, and
//! int → long / float / double, long → float / double, float → double are widened.

use std::collections::HashMap;
use std::sync::Arc;

use apache_avro::Schema as Avro;
use arrow_schema::{DataType, Fields};
use iceberg::spec::{ListType, MapType, NestedField, PrimitiveType, StructType, Type};

use crate::convert::{Column, DecodeError, PayloadDecoder, SchemaLoadError, Shape};
use crate::schema::by_id::SchemaSet;
use crate::schema::formats::{FormatError, MakeDecoder, Part, PartContext};
use crate::schema::layout::PayloadType;
use crate::schema::registry::{SchemaRegistry, SchemaType};
use crate::schema::wire;

/// An Avro schema Floe cannot map or decode against the table.
#[derive(Debug, Clone, thiserror::Error)]
#[error("avro schema: {0}")]
pub struct AvroSchemaError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, AvroSchemaError> {
    Err(AvroSchemaError(msg.into()))
}

/// Named types of a schema (records, enums, fixed) by full name, for `Ref`s.
#[derive(Default)]
struct Names<'a>(HashMap<String, &'a Avro>);

impl<'a> Names<'a> {
    fn collect(schema: &'a Avro) -> Names<'a> {
        let mut names = Names::default();
        names.walk(schema);
        names
    }

    fn walk(&mut self, s: &'a Avro) {
        match s {
            Avro::Record(r) => {
                self.0.insert(r.name.fullname(None), s);
                r.fields.iter().for_each(|f| self.walk(&f.schema));
            }
            Avro::Enum(e) => {
                self.0.insert(e.name.fullname(None), s);
            }
            Avro::Fixed(f) => {
                self.0.insert(f.name.fullname(None), s);
            }
            Avro::Array(a) => self.walk(&a.items),
            Avro::Map(m) => self.walk(&m.types),
            Avro::Union(u) => u.variants().iter().for_each(|v| self.walk(v)),
            _ => {}
        }
    }

    fn resolve(&self, s: &'a Avro) -> Result<&'a Avro, AvroSchemaError> {
        match s {
            Avro::Ref { name } => {
                self.0.get(&name.fullname(None)).copied().ok_or_else(|| AvroSchemaError(format!("unknown type {name}")))
            }
            other => Ok(other),
        }
    }
}

/// Maps an Avro schema to the Iceberg type of its payload (placeholder field ids).
pub fn to_payload_type(schema: &Avro) -> Result<PayloadType, AvroSchemaError> {
    let names = Names::collect(schema);
    let mut stack = Vec::new();
    match to_type(schema, &names, &mut stack)? {
        (Type::Struct(s), _) if matches!(schema, Avro::Record(_)) => Ok(PayloadType::Record(s)),
        (t, _) => Ok(PayloadType::Other(t)),
    }
}

fn prim(p: PrimitiveType) -> Type {
    Type::Primitive(p)
}

/// The Iceberg type and whether null is allowed.
fn to_type<'a>(s: &'a Avro, names: &Names<'a>, stack: &mut Vec<String>) -> Result<(Type, bool), AvroSchemaError> {
    let s = names.resolve(s)?;
    Ok((
        match s {
            Avro::Null => return err("a bare null type has no column"),
            Avro::Boolean => prim(PrimitiveType::Boolean),
            Avro::Int => prim(PrimitiveType::Int),
            Avro::Long => prim(PrimitiveType::Long),
            Avro::Float => prim(PrimitiveType::Float),
            Avro::Double => prim(PrimitiveType::Double),
            Avro::Bytes | Avro::Duration => prim(PrimitiveType::Binary),
            Avro::String | Avro::Enum(_) => prim(PrimitiveType::String),
            Avro::Fixed(f) => prim(PrimitiveType::Fixed(f.size as u64)),
            Avro::Decimal(d) => prim(PrimitiveType::Decimal { precision: d.precision as u32, scale: d.scale as u32 }),
            Avro::BigDecimal => return err("big-decimal has no fixed precision: not supported"),
            Avro::Uuid => prim(PrimitiveType::Uuid),
            Avro::Date => prim(PrimitiveType::Date),
            Avro::TimeMillis | Avro::TimeMicros => prim(PrimitiveType::Time),
            Avro::TimestampMillis | Avro::TimestampMicros => prim(PrimitiveType::Timestamptz),
            Avro::TimestampNanos => prim(PrimitiveType::TimestamptzNs),
            Avro::LocalTimestampMillis | Avro::LocalTimestampMicros => prim(PrimitiveType::Timestamp),
            Avro::LocalTimestampNanos => prim(PrimitiveType::TimestampNs),
            Avro::Array(a) => {
                let (element, nullable) = to_type(&a.items, names, stack)?;
                Type::List(ListType::new(Arc::new(NestedField::list_element(0, element, !nullable))))
            }
            Avro::Map(m) => {
                let (value, nullable) = to_type(&m.types, names, stack)?;
                Type::Map(MapType::new(
                    Arc::new(NestedField::map_key_element(0, prim(PrimitiveType::String))),
                    Arc::new(NestedField::map_value_element(0, value, !nullable)),
                ))
            }
            Avro::Record(r) => {
                let name = r.name.fullname(None);
                if stack.contains(&name) {
                    return err(format!("recursive type {name} cannot be a table column"));
                }
                stack.push(name);
                let mut fields = Vec::with_capacity(r.fields.len());
                for f in &r.fields {
                    let (t, _) = to_type(&f.schema, names, stack)?;
                    let mut field = NestedField::optional(0, &f.name, t);
                    field.doc = f.doc.clone();
                    fields.push(Arc::new(field));
                }
                stack.pop();
                Type::Struct(StructType::new(fields))
            }
            Avro::Union(u) => {
                let non_null: Vec<&Avro> = u.variants().iter().filter(|v| !matches!(v, Avro::Null)).collect();
                let nullable = non_null.len() < u.variants().len();
                return match non_null.as_slice() {
                    [] => err("a union of only null has no column"),
                    [one] => Ok((to_type(one, names, stack)?.0, nullable)),
                    many => {
                        let mut fields = Vec::with_capacity(many.len());
                        for (i, v) in many.iter().enumerate() {
                            fields.push(Arc::new(NestedField::optional(
                                0,
                                format!("member{i}"),
                                to_type(v, names, stack)?.0,
                            )));
                        }
                        Ok((Type::Struct(StructType::new(fields)), nullable))
                    }
                };
            }
            Avro::Ref { .. } => unreachable!("resolved above"),
        },
        false,
    ))
}

/// A writer schema compiled against the table's columns.
#[derive(Debug)]
enum Node {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Enum(Arc<[String]>),
    Fixed(usize),
    Decimal {
        fixed: Option<usize>,
    },
    Uuid,
    Date,
    TimeMillis,
    TimeMicros,
    TimestampMillis,
    TimestampMicros,
    TimestampNanos,
    Duration,
    Array(Box<Node>),
    Map(Box<Node>),
    /// Record fields in writer order, each with its column among the target's
    /// children (`None`: not in the table, skipped); `missing`: the target's columns no
    /// writer field feeds (null in every row).
    Record {
        fields: Vec<(Node, Option<usize>)>,
        missing: Vec<usize>,
    },
    /// Union branches: `Null`, or the node and, for a multi-type union, the member index.
    Union(Vec<(Node, Option<usize>)>),
}

/// Compiles `writer` for columns of `target` type (`None`: skipped everywhere).
fn compile<'a>(
    w: &'a Avro,
    names: &Names<'a>,
    target: Option<&DataType>,
    depth: usize,
) -> Result<Node, AvroSchemaError> {
    if depth > 64 {
        return err("schema nested more than 64 levels (recursive?)");
    }
    let w = names.resolve(w)?;
    if let Some(t) = target {
        check_primitive(w, t)?;
    }
    Ok(match w {
        Avro::Null => Node::Null,
        Avro::Boolean => Node::Boolean,
        Avro::Int => Node::Int,
        Avro::Long => Node::Long,
        Avro::Float => Node::Float,
        Avro::Double => Node::Double,
        Avro::Bytes => Node::Bytes,
        Avro::String => Node::String,
        Avro::Enum(e) => Node::Enum(e.symbols.clone().into()),
        Avro::Fixed(f) => Node::Fixed(f.size),
        Avro::Decimal(d) => Node::Decimal {
            fixed: match names.resolve(&d.inner)? {
                Avro::Fixed(f) => Some(f.size),
                _ => None,
            },
        },
        Avro::BigDecimal => return err("big-decimal not supported"),
        Avro::Uuid => Node::Uuid,
        Avro::Date => Node::Date,
        Avro::TimeMillis => Node::TimeMillis,
        Avro::TimeMicros => Node::TimeMicros,
        Avro::TimestampMillis | Avro::LocalTimestampMillis => Node::TimestampMillis,
        Avro::TimestampMicros | Avro::LocalTimestampMicros => Node::TimestampMicros,
        Avro::TimestampNanos | Avro::LocalTimestampNanos => Node::TimestampNanos,
        Avro::Duration => Node::Duration,
        Avro::Array(a) => {
            let element = match target {
                Some(DataType::List(f)) => Some(f.data_type().clone()),
                Some(other) => return err(format!("array written into a {other} column")),
                None => None,
            };
            Node::Array(Box::new(compile(&a.items, names, element.as_ref(), depth + 1)?))
        }
        Avro::Map(m) => {
            let value = match target {
                Some(DataType::Map(entries, _)) => match entries.data_type() {
                    DataType::Struct(kv) if kv.len() == 2 => Some(kv[1].data_type().clone()),
                    _ => return err("malformed map column"),
                },
                Some(other) => return err(format!("map written into a {other} column")),
                None => None,
            };
            Node::Map(Box::new(compile(&m.types, names, value.as_ref(), depth + 1)?))
        }
        Avro::Record(r) => match target {
            Some(DataType::Struct(fields)) => compile_record(r, names, Some(fields), depth)?,
            Some(other) => return err(format!("record {} written into a {other} column", r.name)),
            None => compile_record(r, names, None, depth)?,
        },
        Avro::Union(u) => {
            let non_null = u.variants().iter().filter(|v| !matches!(v, Avro::Null)).count();
            let mut member = 0;
            let mut branches = Vec::with_capacity(u.variants().len());
            for v in u.variants() {
                if matches!(v, Avro::Null) {
                    branches.push((Node::Null, None));
                    continue;
                }
                if non_null == 1 {
                    branches.push((compile(v, names, target, depth + 1)?, None));
                } else {
                    let member_type = match target {
                        Some(DataType::Struct(fields)) => match fields.find(&format!("member{member}")) {
                            Some((_, f)) => Some(f.data_type().clone()),
                            None => return err(format!("union member{member} has no column")),
                        },
                        Some(other) => return err(format!("union written into a {other} column")),
                        None => None,
                    };
                    branches.push((compile(v, names, member_type.as_ref(), depth + 1)?, Some(member)));
                    member += 1;
                }
            }
            Node::Union(branches)
        }
        Avro::Ref { .. } => unreachable!("resolved above"),
    })
}

fn compile_record<'a>(
    r: &'a apache_avro::schema::RecordSchema,
    names: &Names<'a>,
    target: Option<&Fields>,
    depth: usize,
) -> Result<Node, AvroSchemaError> {
    let mut fields = Vec::with_capacity(r.fields.len());
    for f in &r.fields {
        let column = target.and_then(|t| t.find(&f.name));
        let node = compile(&f.schema, names, column.map(|(_, c)| c.data_type()), depth + 1)?;
        fields.push((node, column.map(|(i, _)| i)));
    }
    let missing = match target {
        Some(t) => (0..t.len()).filter(|i| !fields.iter().any(|(_, c)| *c == Some(*i))).collect(),
        None => Vec::new(),
    };
    Ok(Node::Record { fields, missing })
}

/// Whether a primitive writer type can be written into a column of type `t`
/// (same type, or one of Avro's promotions).
fn check_primitive(w: &Avro, t: &DataType) -> Result<(), AvroSchemaError> {
    use arrow_schema::TimeUnit::{Microsecond, Nanosecond};
    let ok = match w {
        Avro::Boolean => matches!(t, DataType::Boolean),
        Avro::Int => matches!(t, DataType::Int32 | DataType::Int64 | DataType::Float32 | DataType::Float64),
        Avro::Long => matches!(t, DataType::Int64 | DataType::Float32 | DataType::Float64),
        Avro::Float => matches!(t, DataType::Float32 | DataType::Float64),
        Avro::Double => matches!(t, DataType::Float64),
        Avro::Bytes | Avro::Duration => matches!(t, DataType::LargeBinary | DataType::Utf8),
        Avro::String => matches!(t, DataType::Utf8 | DataType::LargeBinary),
        Avro::Enum(_) => matches!(t, DataType::Utf8),
        Avro::Fixed(f) => matches!(t, DataType::LargeBinary) || *t == DataType::FixedSizeBinary(f.size as i32),
        Avro::Decimal(d) => {
            matches!(t, DataType::Decimal128(p, s) if *s as usize == d.scale && *p as usize >= d.precision)
        }
        Avro::Uuid => *t == DataType::FixedSizeBinary(16),
        Avro::Date => matches!(t, DataType::Date32),
        Avro::TimeMillis | Avro::TimeMicros => matches!(t, DataType::Time64(Microsecond)),
        Avro::TimestampMillis | Avro::TimestampMicros | Avro::LocalTimestampMillis | Avro::LocalTimestampMicros => {
            matches!(t, DataType::Timestamp(Microsecond | Nanosecond, _))
        }
        Avro::TimestampNanos | Avro::LocalTimestampNanos => matches!(t, DataType::Timestamp(Nanosecond, _)),
        // Structured types are checked where they are compiled.
        _ => true,
    };
    if ok { Ok(()) } else { err(format!("{w:?} cannot be written into a {t} column")) }
}

/// Reads Avro's binary encoding with positions for errors.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

type R<T> = Result<T, (usize, String)>;

impl<'a> Reader<'a> {
    fn fail<T>(&self, msg: impl Into<String>) -> R<T> {
        Err((self.pos, msg.into()))
    }

    #[inline]
    fn long(&mut self) -> R<i64> {
        // Most varints (small numbers, lengths, union branches) are one byte.
        if let Some(&b) = self.buf.get(self.pos)
            && b < 0x80
        {
            self.pos += 1;
            return Ok(i64::from(b >> 1) ^ -i64::from(b & 1));
        }
        self.long_slow()
    }

    fn long_slow(&mut self) -> R<i64> {
        let mut raw: u64 = 0;
        for shift in (0..70).step_by(7) {
            let Some(&b) = self.buf.get(self.pos) else { return self.fail("unexpected end of data") };
            self.pos += 1;
            raw |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
            }
        }
        self.fail("varint longer than 10 bytes")
    }

    #[inline]
    fn int(&mut self) -> R<i32> {
        let v = self.long()?;
        i32::try_from(v).or_else(|_| self.fail(format!("int {v} out of range")))
    }

    #[inline]
    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        match self.buf.get(self.pos..self.pos.saturating_add(n)) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => self.fail(format!("{n} bytes wanted, {} left", self.buf.len() - self.pos)),
        }
    }

    #[inline]
    fn bytes(&mut self) -> R<&'a [u8]> {
        let n = self.long()?;
        match usize::try_from(n) {
            Ok(n) => self.take(n),
            Err(_) => self.fail(format!("negative length {n}")),
        }
    }

    /// The payload must end where the datum does.
    fn finished(&self) -> R<()> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err((self.pos, format!("{} bytes left over after the datum", self.buf.len() - self.pos)))
        }
    }

    #[inline]
    fn str(&mut self) -> R<&'a str> {
        let at = self.pos;
        let b = self.bytes()?;
        simdutf8::basic::from_utf8(b).map_err(|_| (at, "string is not UTF-8".to_string()))
    }

    /// Block counts of arrays and maps; a negative count is followed by a byte size.
    fn block(&mut self) -> R<usize> {
        let n = self.long()?;
        let n = if n < 0 {
            self.long()?;
            n.checked_neg().ok_or_else(|| (self.pos, "block count overflow".to_string()))?
        } else {
            n
        };
        // Every item takes at least one byte (zero-size items are capped by the data left).
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        if n > self.buf.len().saturating_sub(self.pos).max(1) * 64 {
            return self.fail(format!("block of {n} items in {} bytes", self.buf.len() - self.pos));
        }
        Ok(n)
    }
}

fn mismatch(what: &str, col: &Column) -> (usize, String) {
    (0, format!("internal: {what} value for a column of another type ({})", col_name(col)))
}

fn col_name(c: &Column) -> &'static str {
    match c {
        Column::Boolean(_) => "boolean",
        Column::Int(_) => "int",
        Column::Long(_) => "long",
        Column::Float(_) => "float",
        Column::Double(_) => "double",
        Column::Decimal(_) => "decimal",
        Column::Date(_) => "date",
        Column::Time(_) => "time",
        Column::TimestampMicros(_) | Column::TimestampNanos(_) => "timestamp",
        Column::String(_) => "string",
        Column::Binary(_) => "binary",
        Column::Fixed(..) => "fixed",
        Column::Struct(_) => "struct",
        Column::List(_) => "list",
        Column::Map(_) => "map",
    }
}

fn put_long(col: &mut Column, v: i64) -> R<()> {
    match col {
        Column::Long(b) => b.append_value(v),
        Column::Int(b) => b.append_value(i32::try_from(v).map_err(|_| (0, format!("{v} does not fit an int column")))?),
        Column::Float(b) => b.append_value(v as f32),
        Column::Double(b) => b.append_value(v as f64),
        other => return Err(mismatch("integer", other)),
    }
    Ok(())
}

fn put_double(col: &mut Column, v: f64) -> R<()> {
    match col {
        Column::Double(b) => b.append_value(v),
        Column::Float(b) => b.append_value(v as f32),
        other => return Err(mismatch("floating-point", other)),
    }
    Ok(())
}

fn put_bytes(col: &mut Column, v: &[u8]) -> R<()> {
    match col {
        Column::Binary(b) => b.append_value(v),
        Column::Fixed(b, _) => b.append_value(v).map_err(|e| (0, e.to_string()))?,
        Column::String(b) => {
            b.append_value(std::str::from_utf8(v).map_err(|_| (0, "bytes are not UTF-8".to_string()))?)
        }
        other => return Err(mismatch("bytes", other)),
    }
    Ok(())
}

fn put_str(col: &mut Column, v: &str) -> R<()> {
    match col {
        Column::String(b) => b.append_value(v),
        Column::Binary(b) => b.append_value(v.as_bytes()),
        other => return Err(mismatch("string", other)),
    }
    Ok(())
}

/// Big-endian two's complement bytes → i128.
fn decimal_value(b: &[u8]) -> R<i128> {
    if b.len() > 16 {
        return Err((0, format!("decimal of {} bytes exceeds 128 bits", b.len())));
    }
    let fill = if b.first().is_some_and(|x| x & 0x80 != 0) { 0xff } else { 0 };
    let mut full = [fill; 16];
    full[16 - b.len()..].copy_from_slice(b);
    Ok(i128::from_be_bytes(full))
}

/// Decodes one value of `node`; appends it to `col` (or only validates when `None`).
fn decode(node: &Node, r: &mut Reader, col: Option<&mut Column>) -> R<()> {
    match node {
        Node::Null => {
            if let Some(c) = col {
                c.append_null();
            }
        }
        Node::Boolean => {
            let b = r.take(1)?[0];
            if b > 1 {
                return Err((r.pos - 1, format!("boolean byte {b}")));
            }
            if let Some(c) = col {
                match c {
                    Column::Boolean(x) => x.append_value(b == 1),
                    other => return Err(mismatch("boolean", other)),
                }
            }
        }
        Node::Int => {
            let v = r.int()?;
            if let Some(c) = col {
                put_long(c, v.into())?;
            }
        }
        Node::Long => {
            let v = r.long()?;
            if let Some(c) = col {
                put_long(c, v)?;
            }
        }
        Node::Float => {
            let v = f32::from_le_bytes(r.take(4)?.try_into().expect("4 bytes"));
            if let Some(c) = col {
                put_double(c, v.into())?;
            }
        }
        Node::Double => {
            let v = f64::from_le_bytes(r.take(8)?.try_into().expect("8 bytes"));
            if let Some(c) = col {
                put_double(c, v)?;
            }
        }
        Node::Bytes | Node::Duration => {
            let v = r.bytes()?;
            if let Some(c) = col {
                put_bytes(c, v)?;
            }
        }
        Node::Fixed(n) => {
            let v = r.take(*n)?;
            if let Some(c) = col {
                put_bytes(c, v)?;
            }
        }
        Node::String => {
            let v = r.str()?;
            if let Some(c) = col {
                put_str(c, v)?;
            }
        }
        Node::Enum(symbols) => {
            let at = r.pos;
            let i = r.int()?;
            let symbol =
                usize::try_from(i).ok().and_then(|i| symbols.get(i)).ok_or_else(|| (at, format!("enum index {i}")))?;
            if let Some(c) = col {
                put_str(c, symbol)?;
            }
        }
        Node::Decimal { fixed } => {
            let at = r.pos;
            let b = match fixed {
                Some(n) => r.take(*n)?,
                None => r.bytes()?,
            };
            let v = decimal_value(b).map_err(|(_, m)| (at, m))?;
            if let Some(c) = col {
                match c {
                    Column::Decimal(x) => x.append_value(v),
                    other => return Err(mismatch("decimal", other)),
                }
            }
        }
        Node::Uuid => {
            let at = r.pos;
            let s = r.str()?;
            let u = uuid::Uuid::parse_str(s).map_err(|e| (at, format!("uuid {s:?}: {e}")))?;
            if let Some(c) = col {
                put_bytes(c, u.as_bytes())?;
            }
        }
        Node::Date => {
            let v = r.int()?;
            if let Some(c) = col {
                match c {
                    Column::Date(x) => x.append_value(v),
                    other => return Err(mismatch("date", other)),
                }
            }
        }
        Node::TimeMillis | Node::TimeMicros => {
            let v = if matches!(node, Node::TimeMillis) { i64::from(r.int()?) * 1000 } else { r.long()? };
            if let Some(c) = col {
                match c {
                    Column::Time(x) => x.append_value(v),
                    other => return Err(mismatch("time", other)),
                }
            }
        }
        Node::TimestampMillis | Node::TimestampMicros | Node::TimestampNanos => {
            let v = r.long()?;
            if let Some(c) = col {
                match (node, c) {
                    (Node::TimestampMillis, Column::TimestampMicros(x)) => x.append_value(v.saturating_mul(1000)),
                    (Node::TimestampMicros, Column::TimestampMicros(x)) => x.append_value(v),
                    (Node::TimestampNanos, Column::TimestampNanos(x)) => x.append_value(v),
                    (Node::TimestampMillis, Column::TimestampNanos(x)) => x.append_value(v.saturating_mul(1_000_000)),
                    (Node::TimestampMicros, Column::TimestampNanos(x)) => x.append_value(v.saturating_mul(1000)),
                    (_, other) => return Err(mismatch("timestamp", other)),
                }
            }
        }
        Node::Array(item) => match col {
            Some(Column::List(list)) => {
                let n = items(r, |r| decode(item, r, Some(&mut list.child)))?;
                list.close(n);
            }
            Some(other) => return Err(mismatch("array", other)),
            None => {
                items(r, |r| decode(item, r, None))?;
            }
        },
        Node::Map(value) => match col {
            Some(Column::Map(map)) => {
                let n = items(r, |r| {
                    put_str(&mut map.keys, r.str()?)?;
                    decode(value, r, Some(&mut map.values))
                })?;
                map.close(n);
            }
            Some(other) => return Err(mismatch("map", other)),
            None => {
                items(r, |r| {
                    r.str()?;
                    decode(value, r, None)
                })?;
            }
        },
        Node::Record { fields, missing } => match col {
            Some(Column::Struct(s)) => {
                s.append_valid();
                decode_fields(fields, missing, r, Some(s.children.as_mut_slice()))?;
            }
            Some(other) => return Err(mismatch("record", other)),
            None => decode_fields(fields, missing, r, None)?,
        },
        Node::Union(branches) => {
            let at = r.pos;
            let i = r.long()?;
            let (branch, member) = usize::try_from(i)
                .ok()
                .and_then(|i| branches.get(i))
                .ok_or_else(|| (at, format!("union branch {i}")))?;
            match (col, member) {
                (None, _) => decode(branch, r, None)?,
                (Some(c), None) => decode(branch, r, Some(c))?,
                (Some(Column::Struct(s)), Some(m)) => {
                    s.append_valid();
                    for (j, child) in s.children.iter_mut().enumerate() {
                        if j == *m {
                            decode(branch, r, Some(child))?;
                        } else {
                            child.append_null();
                        }
                    }
                }
                (Some(other), Some(_)) => return Err(mismatch("union", other)),
            }
        }
    }
    Ok(())
}

/// The items of an array or map (blocks until a zero count), each read by `each`;
/// returns how many there were.
fn items(r: &mut Reader, mut each: impl FnMut(&mut Reader) -> R<()>) -> R<usize> {
    let mut n = 0;
    loop {
        let count = r.block()?;
        if count == 0 {
            return Ok(n);
        }
        for _ in 0..count {
            each(r)?;
        }
        n += count;
    }
}

/// A record's fields into `children` (writer fields the table lacks are skipped; table
/// columns the writer lacks get a null).
fn decode_fields(
    fields: &[(Node, Option<usize>)],
    missing: &[usize],
    r: &mut Reader,
    mut children: Option<&mut [Column]>,
) -> R<()> {
    for (node, target) in fields {
        match (&mut children, target) {
            (Some(cols), Some(i)) => decode(node, r, Some(&mut cols[*i]))?,
            _ => decode(node, r, None)?,
        }
    }
    if let Some(cols) = children {
        for &i in missing {
            cols[i].append_null();
        }
    }
    Ok(())
}

/// A writer schema ready to decode payloads into the table's columns.
pub struct CompiledAvro {
    node: Node,
}

impl CompiledAvro {
    /// Compiles `writer` for a column of type `target`, or — for the value-as-payload
    /// layout — for the top-level `fields`.
    pub fn new(writer: &Avro, target: AvroTarget<'_>) -> Result<CompiledAvro, AvroSchemaError> {
        let names = Names::collect(writer);
        let node = match target {
            AvroTarget::Column(t) => compile(writer, &names, Some(t), 0)?,
            AvroTarget::Fields(fields) => match names.resolve(writer)? {
                Avro::Record(r) => compile_record(r, &names, Some(fields), 0)?,
                _ => return err("the value layout needs a record schema"),
            },
        };
        Ok(CompiledAvro { node })
    }

    /// Appends `payload` to `col` (an `Err` may leave the column half-written: the
    /// converter repairs it and drops the row).
    pub fn append(
        &self,
        payload: &[u8],
        col: &mut Column,
        part: &'static str,
        offset: usize,
    ) -> Result<(), DecodeError> {
        let mut r = Reader { buf: payload, pos: 0 };
        let result = decode(&self.node, &mut r, Some(col)).and_then(|()| r.finished());
        result.map_err(|(position, detail)| DecodeError {
            part,
            position: position + offset,
            detail,
            missing_schema: None,
        })
    }

    /// Appends a record payload's fields to `fields`.
    pub fn append_fields(
        &self,
        payload: &[u8],
        fields: &mut [Column],
        part: &'static str,
        offset: usize,
    ) -> Result<(), DecodeError> {
        let Node::Record { fields: plan, missing } = &self.node else { unreachable!("checked in new") };
        let mut r = Reader { buf: payload, pos: 0 };
        let result = decode_fields(plan, missing, &mut r, Some(fields)).and_then(|()| r.finished());
        result.map_err(|(position, detail)| DecodeError {
            part,
            position: position + offset,
            detail,
            missing_schema: None,
        })
    }
}

/// What a compiled schema writes into.
#[derive(Clone, Copy)]
pub enum AvroTarget<'a> {
    Column(&'a DataType),
    Fields(&'a Fields),
}

impl Shape {
    fn target(&self) -> AvroTarget<'_> {
        match self {
            Shape::Column(t) => AvroTarget::Column(t),
            Shape::Fields(f) => AvroTarget::Fields(f),
        }
    }
}

/// Avro payloads in the Confluent wire format.
pub struct AvroDecoder {
    part: &'static str,
    shape: Shape,
    schemas: SchemaSet<CompiledAvro>,
}

impl AvroDecoder {
    /// Every payload decoded with `writer` (a local schema file).
    pub fn fixed(part: &'static str, writer: &Avro, shape: Shape) -> Result<AvroDecoder, AvroSchemaError> {
        let compiled = CompiledAvro::new(writer, shape.target())?;
        Ok(AvroDecoder { part, shape, schemas: SchemaSet::fixed(compiled) })
    }

    /// Writer schemas by the id in each payload, loaded from `registry` on first sight.
    pub fn registry(part: &'static str, registry: Arc<dyn SchemaRegistry>, shape: Shape) -> AvroDecoder {
        AvroDecoder { part, shape, schemas: SchemaSet::registry(registry) }
    }
}

#[async_trait::async_trait]
impl PayloadDecoder for AvroDecoder {
    fn append(&self, payload: &[u8], column: &mut Column) -> Result<(), DecodeError> {
        let (compiled, body) = self.schemas.get(payload, self.part)?;
        compiled.append(body, column, self.part, wire::HEADER_LEN)
    }

    fn append_fields(&self, payload: &[u8], fields: &mut [Column]) -> Result<(), DecodeError> {
        let (compiled, body) = self.schemas.get(payload, self.part)?;
        compiled.append_fields(body, fields, self.part, wire::HEADER_LEN)
    }

    async fn load_schema(&self, id: u32) -> Result<(), SchemaLoadError> {
        self.schemas
            .load(id, SchemaType::Avro, |text| {
                let writer = Avro::parse_str(text).map_err(|e| e.to_string())?;
                CompiledAvro::new(&writer, self.shape.target()).map_err(|e| e.to_string())
            })
            .await
    }
}

/// Sets up an Avro key or value: the table's type from the schema the context names,
/// and a decoder by payload schema id (registry) or with that one schema (local file).
pub async fn part(ctx: &PartContext<'_>) -> Result<Part, FormatError> {
    let (registered, registry) = ctx.table_schema(SchemaType::Avro).await?;
    let avro = Avro::parse_str(&registered.schema).map_err(|e| ctx.error(e))?;
    let payload = to_payload_type(&avro).map_err(|e| ctx.error(e))?;
    let name = ctx.name;
    let make: MakeDecoder = match registry {
        Some(registry) => {
            Box::new(move |shape| Ok(Arc::new(AvroDecoder::registry(name, registry, shape)) as Arc<dyn PayloadDecoder>))
        }
        None => Box::new(move |shape| {
            AvroDecoder::fixed(name, &avro, shape)
                .map(|d| Arc::new(d) as Arc<dyn PayloadDecoder>)
                .map_err(|e| e.to_string())
        }),
    };
    Ok(Part { payload, make })
}
