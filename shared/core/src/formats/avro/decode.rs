//! Avro's binary encoding decoded straight into Arrow builders.
//!
//! A writer schema is compiled once against the table's columns into a tree of
//! [`Step`]s: every type check (is this writer type allowed into that column, which
//! widening applies) happens there, fields the table lacks become skips and columns the
//! writer lacks become nulls. Decoding a payload then walks the plan with one match per
//! value and nothing allocated per value.
//!
//! The hot path returns `Result<_, Box<Fail>>`, one machine word; error messages are only
//! built (out of line) when something is wrong.

use std::fmt;
use std::sync::Arc;

use apache_avro::Schema as Avro;
use apache_avro::schema::RecordSchema;
use arrow_array::types::{Decimal128Type, DecimalType};
use arrow_schema::{DECIMAL128_MAX_PRECISION, DataType, Fields, TimeUnit};

use super::{AvroSchemaError, Names, err};
use crate::columns::{Column, DecodeError, FixedValues};
use crate::formats::utf8::utf8;
use crate::formats::uuid_text;
use crate::varint::VarintError;

/// Avro's duration: a fixed of 12 bytes (months, days, milliseconds).
const DURATION_BYTES: usize = 12;

/// One compiled decoding step: reads one value of the writer's type and, for a leaf,
/// names the one builder it fills (checked when compiled), so decoding a value takes a
/// single dispatch. (`repr(u8)`: a plain tag byte to dispatch on, rather than a tag
/// folded into a field's spare values.)
#[derive(Debug)]
#[repr(u8)]
enum Step {
    Null,
    Boolean,
    /// int → int column (and date → date column: `date`).
    Int,
    Date,
    /// long → long column.
    Long,
    /// int or long widened into a long, float or double column.
    Widen {
        int: bool,
    },
    /// time-millis (× 1000) or time-micros → time (µs) column.
    Time {
        millis: bool,
    },
    /// A timestamp long × `scale` → timestamp (µs) column.
    TimestampMicros {
        scale: i64,
    },
    /// A timestamp long × `scale` → timestamp (ns) column.
    TimestampNanos {
        scale: i64,
    },
    /// float → float column, or widened into a double column.
    Float {
        into_double: bool,
    },
    Double,
    /// bytes → binary column.
    Bytes,
    /// bytes → string column (checked to be UTF-8).
    BytesAsString,
    /// string → string column.
    String,
    /// string → binary column.
    StringAsBytes,
    /// fixed(n) → fixed(n) column.
    Fixed(usize),
    /// fixed(n) (or a duration, fixed(12)) → binary column.
    FixedAsBytes(usize),
    /// The symbol, into a string column.
    Enum(Arc<[String]>),
    /// Big-endian two's complement, in `bytes` or in a `fixed` of that size, of at most
    /// `precision` digits (the column's: a longer value would not fit it).
    Decimal {
        fixed: Option<usize>,
        precision: u8,
    },
    /// A string holding a UUID, into a 16-byte fixed column.
    Uuid,
    Array(Box<Step>),
    Map(Box<Step>),
    /// Record fields in writer order, each with its column among the target's
    /// children (`None`: not in the table, skipped); `missing`: the target's columns no
    /// writer field feeds (null in every row).
    Record {
        fields: Vec<(Step, Option<usize>)>,
        missing: Vec<usize>,
    },
    /// Union branches: `Null`, or the step and, for a multi-type union, the member index.
    Union(Vec<(Step, Option<usize>)>),
    /// The common `["null", T]` (or `[T, "null"]`) union: its branch index is one byte,
    /// read inline; `null_first` says which branch is null.
    Nullable {
        null_first: bool,
        value: Box<Step>,
    },
}

/// Compiles `writer` for columns of `target` type (`None`: skipped everywhere).
fn compile<'a>(
    w: &'a Avro,
    names: &Names<'a>,
    target: Option<&DataType>,
    depth: usize,
) -> Result<Step, AvroSchemaError> {
    if depth > 64 {
        return err("schema nested more than 64 levels (recursive?)");
    }
    let w = names.resolve(w)?;
    if let Some(t) = target {
        check_primitive(w, t)?;
    }
    let is = |t: DataType| target == Some(&t);
    // Timestamps into a nanosecond column scale up 1000 times more.
    let timestamp = |micros_per_unit: i64| match target {
        Some(DataType::Timestamp(TimeUnit::Nanosecond, _)) => Step::TimestampNanos { scale: micros_per_unit * 1000 },
        _ => Step::TimestampMicros { scale: micros_per_unit },
    };
    Ok(match w {
        Avro::Null => Step::Null,
        Avro::Boolean => Step::Boolean,
        Avro::Int if target.is_none() || is(DataType::Int32) => Step::Int,
        Avro::Int => Step::Widen { int: true },
        Avro::Long if target.is_none() || is(DataType::Int64) => Step::Long,
        Avro::Long => Step::Widen { int: false },
        Avro::Date => Step::Date,
        Avro::TimeMillis => Step::Time { millis: true },
        Avro::TimeMicros => Step::Time { millis: false },
        Avro::TimestampMillis | Avro::LocalTimestampMillis => timestamp(1000),
        Avro::TimestampMicros | Avro::LocalTimestampMicros => timestamp(1),
        Avro::TimestampNanos | Avro::LocalTimestampNanos => Step::TimestampNanos { scale: 1 },
        Avro::Float => Step::Float { into_double: is(DataType::Float64) },
        Avro::Double => Step::Double,
        Avro::Bytes if is(DataType::Utf8) => Step::BytesAsString,
        Avro::Bytes => Step::Bytes,
        Avro::Duration => Step::FixedAsBytes(DURATION_BYTES),
        Avro::String if is(DataType::LargeBinary) => Step::StringAsBytes,
        Avro::String => Step::String,
        Avro::Fixed(f) if is(DataType::LargeBinary) => Step::FixedAsBytes(f.size),
        Avro::Fixed(f) => Step::Fixed(f.size),
        Avro::Enum(e) => Step::Enum(e.symbols.clone().into()),
        Avro::Decimal(d) => Step::Decimal {
            fixed: match names.resolve(&d.inner)? {
                Avro::Fixed(f) => Some(f.size),
                _ => None,
            },
            precision: match target {
                Some(DataType::Decimal128(p, _)) => *p,
                _ => DECIMAL128_MAX_PRECISION,
            },
        },
        Avro::BigDecimal => return err("big-decimal not supported"),
        Avro::Uuid => Step::Uuid,
        Avro::Array(a) => {
            let element = match target {
                Some(DataType::List(f)) => Some(f.data_type().clone()),
                Some(other) => return err(format!("array written into a {other} column")),
                None => None,
            };
            Step::Array(Box::new(compile(&a.items, names, element.as_ref(), depth + 1)?))
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
            Step::Map(Box::new(compile(&m.types, names, value.as_ref(), depth + 1)?))
        }
        Avro::Record(r) => match target {
            Some(DataType::Struct(fields)) => compile_record(r, names, Some(fields), depth)?,
            Some(other) => return err(format!("record {} written into a {other} column", r.name)),
            None => compile_record(r, names, None, depth)?,
        },
        Avro::Union(u)
            if u.variants().len() == 2 && u.variants().iter().filter(|v| matches!(v, Avro::Null)).count() == 1 =>
        {
            let null_first = matches!(u.variants()[0], Avro::Null);
            let value = &u.variants()[usize::from(null_first)];
            Step::Nullable { null_first, value: Box::new(compile(value, names, target, depth + 1)?) }
        }
        Avro::Union(u) => {
            let non_null = u.variants().iter().filter(|v| !matches!(v, Avro::Null)).count();
            let mut member = 0;
            let mut branches = Vec::with_capacity(u.variants().len());
            for v in u.variants() {
                if matches!(v, Avro::Null) {
                    branches.push((Step::Null, None));
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
            Step::Union(branches)
        }
        Avro::Ref { .. } => unreachable!("resolved above"),
    })
}

fn compile_record<'a>(
    r: &'a RecordSchema,
    names: &Names<'a>,
    target: Option<&Fields>,
    depth: usize,
) -> Result<Step, AvroSchemaError> {
    let mut fields = Vec::with_capacity(r.fields.len());
    for f in &r.fields {
        let column = target.and_then(|t| t.find(&f.name));
        let step = compile(&f.schema, names, column.map(|(_, c)| c.data_type()), depth + 1)?;
        fields.push((step, column.map(|(i, _)| i)));
    }
    let missing = match target {
        Some(t) => (0..t.len()).filter(|i| !fields.iter().any(|(_, c)| *c == Some(*i))).collect(),
        None => Vec::new(),
    };
    Ok(Step::Record { fields, missing })
}

/// Whether a primitive writer type can be written into a column of type `t`
/// (same type, or one of Avro's promotions).
fn check_primitive(w: &Avro, t: &DataType) -> Result<(), AvroSchemaError> {
    use TimeUnit::{Microsecond, Nanosecond};
    let ok = match w {
        Avro::Boolean => matches!(t, DataType::Boolean),
        Avro::Int => matches!(t, DataType::Int32 | DataType::Int64 | DataType::Float32 | DataType::Float64),
        Avro::Long => matches!(t, DataType::Int64 | DataType::Float32 | DataType::Float64),
        Avro::Float => matches!(t, DataType::Float32 | DataType::Float64),
        Avro::Double => matches!(t, DataType::Float64),
        Avro::Bytes => matches!(t, DataType::LargeBinary | DataType::Utf8),
        Avro::Duration => matches!(t, DataType::LargeBinary),
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

/// Why a payload could not be decoded, and at which byte.
#[derive(Debug)]
struct Fail {
    at: usize,
    detail: String,
}

type R<T> = Result<T, Box<Fail>>;

#[cold]
#[inline(never)]
fn fail(at: usize, detail: fmt::Arguments<'_>) -> Box<Fail> {
    Box::new(Fail { at, detail: detail.to_string() })
}

/// A compiled plan and its column disagree: a bug, never bad input.
#[cold]
#[inline(never)]
fn mismatch(what: &str, col: &Column) -> Box<Fail> {
    fail(0, format_args!("internal: {what} value for a column of another type ({})", col_name(col)))
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
        Column::Fixed(_) => "fixed",
        Column::Struct(_) => "struct",
        Column::List(_) => "list",
        Column::Map(_) => "map",
    }
}

/// Reads Avro's binary encoding, keeping the position for errors.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A zig-zag varint of at most 10 bytes.
    #[inline(always)]
    fn long(&mut self) -> R<i64> {
        match crate::varint::zigzag(&self.buf[self.pos..]) {
            Ok((v, n)) => {
                self.pos += n;
                Ok(v)
            }
            // Cut short: the data ends at the end of the payload.
            Err(e @ VarintError::End) => Err(fail(self.buf.len(), format_args!("{e}"))),
            Err(e) => Err(fail(self.pos, format_args!("{e}"))),
        }
    }

    #[inline(always)]
    fn int(&mut self) -> R<i32> {
        let at = self.pos;
        let v = self.long()?;
        i32::try_from(v).map_err(|_| fail(at, format_args!("int {v} out of range")))
    }

    #[inline(always)]
    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        match self.buf.get(self.pos..self.pos.saturating_add(n)) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(fail(self.pos, format_args!("{n} bytes wanted, {} left", self.buf.len() - self.pos))),
        }
    }

    /// `N` bytes as an array.
    #[inline]
    fn array<const N: usize>(&mut self) -> R<[u8; N]> {
        match self.buf[self.pos..].first_chunk::<N>() {
            Some(a) => {
                self.pos += N;
                Ok(*a)
            }
            None => Err(fail(self.pos, format_args!("{N} bytes wanted, {} left", self.buf.len() - self.pos))),
        }
    }

    #[inline]
    fn f32(&mut self) -> R<f32> {
        self.array().map(f32::from_le_bytes)
    }

    #[inline]
    fn f64(&mut self) -> R<f64> {
        self.array().map(f64::from_le_bytes)
    }

    #[inline(always)]
    fn bytes(&mut self) -> R<&'a [u8]> {
        let at = self.pos;
        let n = self.long()?;
        match usize::try_from(n) {
            Ok(n) => self.take(n),
            Err(_) => Err(fail(at, format_args!("negative length {n}"))),
        }
    }

    #[inline(always)]
    fn str(&mut self) -> R<&'a str> {
        let at = self.pos;
        let b = self.bytes()?;
        utf8(b).ok_or_else(|| fail(at, format_args!("string is not UTF-8")))
    }

    /// Whether a `["null", T]` union holds a value: its branch index is zig-zag 0 or 1,
    /// one byte either way.
    #[inline(always)]
    fn present(&mut self, null_first: bool) -> R<bool> {
        match self.buf.get(self.pos) {
            Some(&b @ (0 | 2)) => {
                self.pos += 1;
                Ok((b == 2) == null_first)
            }
            _ => Err(self.bad_branch()),
        }
    }

    #[cold]
    #[inline(never)]
    fn bad_branch(&mut self) -> Box<Fail> {
        let at = self.pos;
        match self.long() {
            Ok(i) => fail(at, format_args!("union branch {i}")),
            Err(e) => e,
        }
    }

    /// Block counts of arrays and maps; a negative count is followed by a byte size.
    #[inline(always)]
    fn block(&mut self) -> R<usize> {
        let at = self.pos;
        let mut n = self.long()?;
        if n < 0 {
            self.long()?;
            n = n.checked_neg().ok_or_else(|| fail(at, format_args!("block count overflow")))?;
        }
        // Capped with the array's other blocks by `items`.
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// The payload must end where the datum does.
    fn finished(&self) -> R<()> {
        match self.buf.len() - self.pos {
            0 => Ok(()),
            left => Err(fail(self.pos, format_args!("{left} bytes left over after the datum"))),
        }
    }
}

/// Big-endian two's complement bytes → i128. Folded in registers: copying the bytes into
/// a 16-byte array and reading that back as one number made the CPU wait for the
/// narrower stores to land (a tenth of the nested steps' time).
#[inline]
fn decimal_value(b: &[u8], at: usize) -> R<i128> {
    if b.len() > 16 {
        return Err(fail(at, format_args!("decimal of {} bytes exceeds 128 bits", b.len())));
    }
    if b.is_empty() {
        return Ok(0);
    }
    let raw = b.iter().fold(0u128, |v, &x| v << 8 | u128::from(x));
    // Sign-extended from the top bit of the first byte.
    let unused = 128 - 8 * b.len() as u32;
    Ok(((raw << unused) as i128) >> unused)
}

/// The builder of the variant a step was compiled for.
macro_rules! into {
    ($col:expr, $variant:ident, $what:literal) => {
        match $col {
            Column::$variant(b) => b,
            other => return Err(mismatch($what, other)),
        }
    };
}

fn fixed_column(col: &mut Column) -> R<&mut FixedValues> {
    match col {
        Column::Fixed(b) => Ok(b),
        other => Err(mismatch("fixed", other)),
    }
}

/// Reads one value of `step` and appends it to `col`. Leaves are decoded inline here
/// (the record loop calls this for every field); nested types go to [`put_nested`].
#[inline(always)]
fn put(step: &Step, r: &mut Reader, col: &mut Column) -> R<()> {
    let at = r.pos;
    match step {
        Step::Int => into!(col, Int, "int").append_value(r.int()?),
        Step::Long => into!(col, Long, "long").append_value(r.long()?),
        Step::Date => into!(col, Date, "date").append_value(r.int()?),
        Step::Time { millis: true } => into!(col, Time, "time").append_value(i64::from(r.int()?) * 1000),
        Step::Time { millis: false } => into!(col, Time, "time").append_value(r.long()?),
        Step::TimestampMicros { scale } => {
            into!(col, TimestampMicros, "timestamp").append_value(r.long()?.saturating_mul(*scale))
        }
        Step::TimestampNanos { scale } => {
            into!(col, TimestampNanos, "timestamp").append_value(r.long()?.saturating_mul(*scale))
        }
        Step::Float { into_double: false } => into!(col, Float, "float").append_value(r.f32()?),
        Step::Float { into_double: true } => into!(col, Double, "double").append_value(r.f32()?.into()),
        Step::Double => into!(col, Double, "double").append_value(r.f64()?),
        Step::Bytes => into!(col, Binary, "bytes").append_value(r.bytes()?),
        Step::String => into!(col, String, "string").append_value(r.str()?),
        Step::StringAsBytes => into!(col, Binary, "bytes").append_value(r.str()?),
        Step::FixedAsBytes(n) => into!(col, Binary, "bytes").append_value(r.take(*n)?),
        Step::Boolean => {
            let [b] = r.array()?;
            if b > 1 {
                return Err(fail(at, format_args!("boolean byte {b}")));
            }
            into!(col, Boolean, "boolean").append_value(b == 1)
        }
        Step::Enum(symbols) => {
            let i = r.int()?;
            let symbol = usize::try_from(i)
                .ok()
                .and_then(|i| symbols.get(i))
                .ok_or_else(|| fail(at, format_args!("enum index {i}")))?;
            into!(col, String, "string").append_value(symbol)
        }
        Step::Nullable { null_first, value } => match (r.present(*null_first)?, value.as_ref()) {
            // The commonest optional field, a string, without the call.
            (true, Step::String) => into!(col, String, "string").append_value(r.str()?),
            (true, value) => put_value(value, r, col)?,
            (false, _) => col.append_null(),
        },
        _ => put_nested(step, r, col, at)?,
    }
    Ok(())
}

/// [`put`] out of line: the value of a nullable union.
#[inline(never)]
fn put_value(step: &Step, r: &mut Reader, col: &mut Column) -> R<()> {
    put(step, r, col)
}

/// The steps [`put`] does not decode inline: rarer leaves and nested types.
fn put_nested(step: &Step, r: &mut Reader, col: &mut Column, at: usize) -> R<()> {
    match step {
        Step::Null => col.append_null(),
        Step::Widen { int } => {
            let v = if *int { i64::from(r.int()?) } else { r.long()? };
            match col {
                Column::Long(b) => b.append_value(v),
                Column::Double(b) => b.append_value(v as f64),
                Column::Float(b) => b.append_value(v as f32),
                other => return Err(mismatch("integer", other)),
            }
        }
        Step::BytesAsString => {
            let s = utf8(r.bytes()?).ok_or_else(|| fail(at, format_args!("bytes are not UTF-8")))?;
            into!(col, String, "string").append_value(s)
        }
        Step::Fixed(n) => {
            let v = r.take(*n)?;
            fixed_column(col)?.append_value(v).map_err(|e| fail(at, format_args!("{e}")))?
        }
        Step::Decimal { fixed, precision } => {
            let b = match fixed {
                Some(n) => r.take(*n)?,
                None => r.bytes()?,
            };
            let v = decimal_value(b, at)?;
            if !Decimal128Type::is_valid_decimal_precision(v, *precision) {
                return Err(fail(at, format_args!("decimal {v} (unscaled) has more than {precision} digits")));
            }
            into!(col, Decimal, "decimal").append_value(v)
        }
        Step::Uuid => {
            let s = r.str()?;
            let u = uuid_text::parse(s).map_err(|e| fail(at, format_args!("uuid {s:?}: {e}")))?;
            fixed_column(col)?.append_value(&u.to_be_bytes()).map_err(|e| fail(at, format_args!("{e}")))?
        }
        Step::Array(item) => {
            let list = into!(col, List, "array");
            let n = items(r, |r| put(item, r, &mut list.child))?;
            list.close(n);
        }
        Step::Map(value) => {
            let map = into!(col, Map, "map");
            let n = items(r, |r| {
                into!(map.keys.as_mut(), String, "string").append_value(r.str()?);
                put(value, r, &mut map.values)
            })?;
            map.close(n);
        }
        Step::Record { fields, missing } => {
            let s = into!(col, Struct, "record");
            s.append_valid();
            put_fields(fields, missing, r, &mut s.children)?;
        }
        Step::Union(branches) => match union_branch(branches, r)? {
            (branch, None) => put(branch, r, col)?,
            (branch, Some(m)) => {
                let s = into!(col, Struct, "union");
                s.append_valid();
                for (j, child) in s.children.iter_mut().enumerate() {
                    if j == *m {
                        put(branch, r, child)?;
                    } else {
                        child.append_null();
                    }
                }
            }
        },
        _ => unreachable!("decoded inline by put"),
    }
    Ok(())
}

/// Reads one value of `step` for a column the table does not have.
fn skip(step: &Step, r: &mut Reader) -> R<()> {
    let at = r.pos;
    match step {
        Step::Null => {}
        Step::Boolean => match r.array()? {
            [0 | 1] => {}
            [b] => return Err(fail(at, format_args!("boolean byte {b}"))),
        },
        Step::Float { .. } => drop(r.array::<4>()?),
        Step::Double => drop(r.array::<8>()?),
        Step::Int | Step::Date | Step::Widen { int: true } | Step::Time { millis: true } => drop(r.int()?),
        Step::Long
        | Step::Widen { int: false }
        | Step::Time { millis: false }
        | Step::TimestampMicros { .. }
        | Step::TimestampNanos { .. } => drop(r.long()?),
        Step::Bytes | Step::BytesAsString | Step::Decimal { fixed: None, .. } => drop(r.bytes()?),
        Step::Fixed(n) | Step::FixedAsBytes(n) | Step::Decimal { fixed: Some(n), .. } => drop(r.take(*n)?),
        Step::String | Step::StringAsBytes | Step::Uuid => drop(r.str()?),
        Step::Enum(symbols) => {
            let i = r.int()?;
            if usize::try_from(i).map_or(true, |i| i >= symbols.len()) {
                return Err(fail(at, format_args!("enum index {i}")));
            }
        }
        Step::Array(item) => drop(items(r, |r| skip(item, r))?),
        Step::Map(value) => drop(items(r, |r| {
            r.str()?;
            skip(value, r)
        })?),
        Step::Record { fields, .. } => fields.iter().try_for_each(|(step, _)| skip(step, r))?,
        Step::Union(branches) => skip(&union_branch(branches, r)?.0, r)?,
        Step::Nullable { null_first, value } => {
            if r.present(*null_first)? {
                skip(value, r)?
            }
        }
    }
    Ok(())
}

/// Reads a union's branch index.
#[inline(always)]
fn union_branch<'s>(branches: &'s [(Step, Option<usize>)], r: &mut Reader) -> R<&'s (Step, Option<usize>)> {
    let at = r.pos;
    let i = r.long()?;
    usize::try_from(i).ok().and_then(|i| branches.get(i)).ok_or_else(|| fail(at, format_args!("union branch {i}")))
}

/// The items of an array or map (blocks until a zero count), each read by `each`;
/// returns how many there were.
#[inline]
fn items(r: &mut Reader, mut each: impl FnMut(&mut Reader) -> R<()>) -> R<usize> {
    let mut n = 0usize;
    loop {
        let at = r.pos;
        let count = r.block()?;
        if count == 0 {
            return Ok(n);
        }
        // Items of zero bytes (nulls, empty records) take no room in the payload: a count
        // alone could ask for billions. At most 64 items per payload byte (4,096 at least).
        n = n.saturating_add(count);
        if n > r.buf.len().max(64) * 64 {
            return Err(fail(at, format_args!("{n} items in a payload of {} bytes", r.buf.len())));
        }
        for _ in 0..count {
            each(r)?;
        }
    }
}

/// A record's fields into `columns` (writer fields the table lacks are skipped; table
/// columns the writer lacks get a null).
fn put_fields(fields: &[(Step, Option<usize>)], missing: &[usize], r: &mut Reader, columns: &mut [Column]) -> R<()> {
    for (step, target) in fields {
        match target {
            Some(i) => put(step, r, &mut columns[*i])?,
            None => skip(step, r)?,
        }
    }
    for &i in missing {
        columns[i].append_null();
    }
    Ok(())
}

/// What a compiled schema writes into.
#[derive(Clone, Copy)]
pub enum AvroTarget<'a> {
    Column(&'a DataType),
    Fields(&'a Fields),
}

/// A writer schema ready to decode payloads into the table's columns.
pub struct CompiledAvro {
    step: Step,
    /// A Debezium envelope's fields, when the payloads are change events.
    envelope: Option<Vec<EnvelopeField>>,
}

/// A field of a Debezium change event (`envelope = "debezium"`), in writer order: the
/// `after` image goes into the table's columns, `op` is read, the rest is skipped.
enum EnvelopeField {
    Skip(Step),
    /// `after`: a union of null (branch `null_branch`) and the row (branch 1 - it).
    After {
        null_branch: i64,
    },
    /// `op`: c, r, u (the row is `after`), d (the key deleted).
    Op,
}

/// A Debezium envelope's `after` record: the schema of the table's rows. The envelope is
/// a record with `after` (a union of null and a record) and `op` (a string).
pub(super) fn debezium_after<'a>(writer: &'a Avro, names: &Names<'a>) -> Result<&'a RecordSchema, AvroSchemaError> {
    let not = |what: &str| AvroSchemaError(format!("not a Debezium envelope: {what}"));
    let Avro::Record(envelope) = names.resolve(writer)? else {
        return Err(not("a record has the fields after and op"));
    };
    let field = |name: &str| envelope.fields.iter().find(|f| f.name == name);
    match field("op").map(|f| names.resolve(&f.schema)) {
        Some(Ok(Avro::String)) => {}
        _ => return Err(not("no `op` string")),
    }
    let after = field("after").ok_or_else(|| not("no `after` field"))?;
    let Avro::Union(union) = names.resolve(&after.schema)? else { return Err(not("`after` is no union with null")) };
    match union.variants() {
        [Avro::Null, row] | [row, Avro::Null] => match names.resolve(row)? {
            Avro::Record(r) => Ok(r),
            _ => Err(not("`after` is no record")),
        },
        _ => Err(not("`after` is no union of null and a record")),
    }
}

impl CompiledAvro {
    /// Compiles `writer` (using named types of `references`) for a column of type
    /// `target`, or — for the value-as-payload layout — for the top-level `fields`.
    pub fn new(writer: &Avro, references: &[Avro], target: AvroTarget<'_>) -> Result<CompiledAvro, AvroSchemaError> {
        let names = Names::collect(writer, references);
        let step = match target {
            AvroTarget::Column(t) => compile(writer, &names, Some(t), 0)?,
            AvroTarget::Fields(fields) => match names.resolve(writer)? {
                Avro::Record(r) => compile_record(r, &names, Some(fields), 0)?,
                _ => return err("the value layout needs a record schema"),
            },
        };
        Ok(CompiledAvro { step, envelope: None })
    }

    /// Compiles `writer`, a Debezium envelope, for its `after` image into the table's
    /// record columns `target`.
    pub fn debezium(writer: &Avro, references: &[Avro], target: &Fields) -> Result<CompiledAvro, AvroSchemaError> {
        let names = Names::collect(writer, references);
        let row = debezium_after(writer, &names)?;
        let step = compile_record(row, &names, Some(target), 0)?;
        let Avro::Record(envelope) = names.resolve(writer)? else { unreachable!("checked by debezium_after") };
        let mut fields = Vec::with_capacity(envelope.fields.len());
        for f in &envelope.fields {
            fields.push(match f.name.as_str() {
                "op" => EnvelopeField::Op,
                "after" => match names.resolve(&f.schema)? {
                    Avro::Union(u) => {
                        EnvelopeField::After { null_branch: i64::from(!matches!(u.variants()[0], Avro::Null)) }
                    }
                    _ => unreachable!("checked by debezium_after"),
                },
                _ => EnvelopeField::Skip(compile(&f.schema, &names, None, 0)?),
            });
        }
        Ok(CompiledAvro { step, envelope: Some(fields) })
    }

    /// Appends `payload` to `col` (an `Err` may leave the column half-written: the
    /// converter repairs it and drops the row). `offset`: where the payload starts in the
    /// Kafka value (for error positions).
    pub fn append(
        &self,
        payload: &[u8],
        col: &mut Column,
        part: &'static str,
        offset: usize,
    ) -> Result<(), DecodeError> {
        let mut r = Reader { buf: payload, pos: 0 };
        let result = put(&self.step, &mut r, col).and_then(|()| r.finished());
        result.map_err(|f| decode_error(*f, part, offset))
    }

    /// Appends a record payload's fields to `fields`.
    pub fn append_fields(
        &self,
        payload: &[u8],
        fields: &mut [Column],
        part: &'static str,
        offset: usize,
    ) -> Result<(), DecodeError> {
        let Step::Record { fields: plan, missing } = &self.step else { unreachable!("checked in new") };
        let mut r = Reader { buf: payload, pos: 0 };
        let Some(envelope) = &self.envelope else {
            let result = put_fields(plan, missing, &mut r, fields).and_then(|()| r.finished());
            return result.map_err(|f| decode_error(*f, part, offset));
        };
        match read_envelope(envelope, &mut r, |r| put_fields(plan, missing, r, fields)).and_then(|row| {
            r.finished()?;
            Ok(row)
        }) {
            Ok(true) => Ok(()),
            Ok(false) => Err(DecodeError {
                part,
                position: offset,
                detail: "a Debezium delete (op d): its key's tombstone".into(),
                missing_schema: None,
                deletes_key: true,
            }),
            Err(f) => Err(decode_error(*f, part, offset)),
        }
    }
}

/// Reads a change event: its `after` image by `put_row`, its `op`. `Ok(true)`: the row
/// (op c, r or u); `Ok(false)`: the key deleted (op d, no `after`).
fn read_envelope(fields: &[EnvelopeField], r: &mut Reader, mut put_row: impl FnMut(&mut Reader) -> R<()>) -> R<bool> {
    let (mut row, mut op) = (None, None);
    for field in fields {
        match field {
            EnvelopeField::Skip(step) => skip(step, r)?,
            EnvelopeField::After { null_branch } => {
                let at = r.pos;
                row = match r.long()? {
                    b if b == *null_branch => Some((at, false)),
                    b if b == 1 - null_branch => {
                        put_row(r)?;
                        Some((at, true))
                    }
                    b => return Err(fail(at, format_args!("union branch {b} of `after`"))),
                };
            }
            EnvelopeField::Op => {
                let at = r.pos;
                op = Some((at, r.str()?));
            }
        }
    }
    let (Some((after_at, row)), Some((at, op))) = (row, op) else { unreachable!("compiled with both fields") };
    match (op, row) {
        ("c" | "r" | "u", true) => Ok(true),
        ("d", false) => Ok(false),
        ("c" | "r" | "u", false) => Err(fail(after_at, format_args!("a Debezium event of op {op} without `after`"))),
        ("d", true) => Err(fail(after_at, format_args!("a Debezium delete (op d) with an `after` image"))),
        _ => Err(fail(at, format_args!("Debezium op {op:?}: not a row change (c, r, u or d)"))),
    }
}

fn decode_error(fail: Fail, part: &'static str, offset: usize) -> DecodeError {
    DecodeError { part, position: fail.at + offset, detail: fail.detail, missing_schema: None, deletes_key: false }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::StructColumn;
    use crate::columns::damage::decode_damaged;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int64Type, TimestampNanosecondType};
    use arrow_array::{Array, StructArray};
    use arrow_schema::Field;

    use crate::schema::layout::PayloadType;

    fn reader(bytes: &[u8]) -> Reader<'_> {
        Reader { buf: bytes, pos: 0 }
    }

    #[test]
    fn varints_in_the_fast_and_the_near_end_paths_agree() {
        for v in [0i64, -1, 1, 63, -64, 64, 150, -150, i32::MAX.into(), i32::MIN.into(), i64::MAX, i64::MIN] {
            let mut encoded = Vec::new();
            let mut raw = ((v << 1) ^ (v >> 63)) as u64;
            loop {
                let b = (raw & 0x7f) as u8;
                raw >>= 7;
                if raw == 0 {
                    encoded.push(b);
                    break;
                }
                encoded.push(b | 0x80);
            }
            let len = encoded.len();
            // Alone (near the end) and followed by padding (ten bytes at hand).
            let mut r = reader(&encoded);
            assert_eq!(r.long().unwrap(), v);
            assert_eq!(r.pos, len);
            encoded.extend_from_slice(&[0; 10]);
            let mut r = reader(&encoded);
            assert_eq!(r.long().unwrap(), v);
            assert_eq!(r.pos, len);
        }
    }

    #[test]
    fn bad_varints_and_lengths_name_their_byte() {
        let e = reader(&[0x80; 12]).long().unwrap_err();
        assert!(e.detail.contains("longer than 10"), "{e:?}");
        let e = reader(&[0x80, 0x80]).long().unwrap_err();
        assert_eq!((e.at, e.detail.as_str()), (2, "unexpected end of data"));
        let mut r = reader(&[0x02, 0x06, b'a']);
        r.long().unwrap();
        let e = r.bytes().unwrap_err();
        assert_eq!(e.at, 2, "{e:?}");
        let e = reader(&[0x03]).bytes().unwrap_err();
        assert!(e.detail.contains("negative length"), "{e:?}");
        let e = reader(&[0x04, 0xff, 0xfe]).str().unwrap_err();
        assert!(e.detail.contains("not UTF-8"), "{e:?}");
    }

    /// Encodes `value` with `writer` (apache-avro's encoder, independent of ours) and
    /// decodes it into a row of `table`.
    fn decode_row(writer: &str, value: apache_avro::types::Value, table: Fields) -> Result<StructArray, DecodeError> {
        let writer = Avro::parse_str(writer).unwrap();
        let payload = apache_avro::to_avro_datum(&writer, value).unwrap();
        let compiled = CompiledAvro::new(&writer, &[], AvroTarget::Fields(&table)).unwrap();
        let mut root = StructColumn::new(&table).unwrap();
        root.append_valid();
        compiled.append_fields(&payload, &mut root.children, "value", 5)?;
        Ok(root.finish())
    }

    /// A Debezium envelope (its row record defined in `before`, named in `after`): c, r
    /// and u decode `after` into the row's columns; d (no `after`) deletes the key; any
    /// other op, or an op and an image that do not go together, is a bad record.
    #[test]
    fn a_debezium_envelope_decodes_its_after_image_and_a_delete_deletes_its_key() {
        use apache_avro::types::Value as V;
        let writer = r#"{"type": "record", "name": "Envelope", "namespace": "db", "fields": [
            {"name": "before", "type": ["null", {"type": "record", "name": "Value", "fields": [
                {"name": "id", "type": "int"}, {"name": "email", "type": ["null", "string"]}]}]},
            {"name": "after", "type": ["null", "db.Value"]},
            {"name": "source", "type": {"type": "record", "name": "Source", "fields": [
                {"name": "lsn", "type": "long"}, {"name": "table", "type": "string"}]}},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": ["null", "long"]}]}"#;
        let avro = Avro::parse_str(writer).unwrap();
        let PayloadType::Record(row) = super::super::debezium_payload_type(&avro, &[]).unwrap() else {
            panic!("a record")
        };
        assert_eq!(row.fields().iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["id", "email"]);
        let table =
            Fields::from(vec![Field::new("id", DataType::Int32, true), Field::new("email", DataType::Utf8, true)]);
        let image = |id: i32| {
            V::Union(
                1,
                Box::new(V::Record(vec![
                    ("id".into(), V::Int(id)),
                    ("email".into(), V::Union(1, Box::new(V::String(format!("{id}@x"))))),
                ])),
            )
        };
        let event = |before: V, after: V, op: &str| {
            let source = V::Record(vec![("lsn".into(), V::Long(9)), ("table".into(), V::String("t".into()))]);
            let fields = vec![
                ("before".into(), before),
                ("after".into(), after),
                ("source".into(), source),
                ("op".into(), V::String(op.into())),
                ("ts_ms".into(), V::Union(1, Box::new(V::Long(3)))),
            ];
            apache_avro::to_avro_datum(&avro, V::Record(fields)).unwrap()
        };
        let null = || V::Union(0, Box::new(V::Null));
        let compiled = CompiledAvro::debezium(&avro, &[], &table).unwrap();
        let decode = |payload: &[u8]| {
            let mut root = StructColumn::new(&table).unwrap();
            root.append_valid();
            compiled.append_fields(payload, &mut root.children, "value", 5).map(|()| root.finish())
        };
        for (before, op) in [(null(), "c"), (null(), "r"), (image(6), "u")] {
            let row = decode(&event(before, image(7), op)).unwrap();
            assert_eq!(row.column(0).as_primitive::<arrow_array::types::Int32Type>().value(0), 7, "op {op}");
            assert_eq!(row.column(1).as_string::<i32>().value(0), "7@x", "op {op}");
        }
        let deleted = decode(&event(image(7), null(), "d")).unwrap_err();
        assert!(deleted.deletes_key && deleted.detail.contains("op d"), "{deleted:?}");
        for (after, op, why) in [
            (null(), "c", "op c without `after`"),
            (image(7), "d", "delete (op d) with an `after`"),
            (null(), "t", "op \"t\": not a row change"),
        ] {
            let e = decode(&event(null(), after, op)).unwrap_err();
            assert!(!e.deletes_key && e.detail.contains(why), "op {op}: {e:?}");
        }
        let plain =
            Avro::parse_str(r#"{"type": "record", "name": "r", "fields": [{"name": "after", "type": "string"}]}"#);
        let e = CompiledAvro::debezium(&plain.unwrap(), &[], &table).err().unwrap();
        assert!(e.0.contains("not a Debezium envelope"), "{e}");
    }

    #[test]
    fn writer_fields_are_widened_skipped_or_missing_by_name() {
        use apache_avro::types::Value as V;
        let writer = r#"{"type": "record", "name": "r", "fields": [
            {"name": "id", "type": "int"},
            {"name": "gone", "type": {"type": "record", "name": "g", "fields": [
                {"name": "xs", "type": {"type": "array", "items": "string"}},
                {"name": "m", "type": {"type": "map", "values": ["null", "double"]}},
                {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
                {"name": "f", "type": {"type": "fixed", "name": "F", "size": 3}}]}},
            {"name": "ratio", "type": "float"},
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "n", "type": "long"}]}"#;
        let value = V::Record(vec![
            ("id".into(), V::Int(-7)),
            (
                "gone".into(),
                V::Record(vec![
                    ("xs".into(), V::Array(vec![V::String("a".into()), V::String("bé".into())])),
                    ("m".into(), V::Map([("k".to_string(), V::Union(1, Box::new(V::Double(2.5))))].into())),
                    ("e".into(), V::Enum(1, "B".into())),
                    ("f".into(), V::Fixed(3, vec![1, 2, 3])),
                ]),
            ),
            ("ratio".into(), V::Float(0.5)),
            ("ts".into(), V::TimestampMillis(1_700_000_000_123)),
            ("n".into(), V::Long(3)),
        ]);
        let table = Fields::from(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("ratio", DataType::Float64, true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())), true),
            Field::new("n", DataType::Float64, true),
            Field::new("added", DataType::Utf8, true),
        ]);
        let row = decode_row(writer, value, table).unwrap();
        let col = |i: usize| row.column(i).clone();
        assert_eq!(col(0).as_primitive::<Int64Type>().value(0), -7);
        assert_eq!(col(1).as_primitive::<Float64Type>().value(0), 0.5);
        assert_eq!(col(2).as_primitive::<TimestampNanosecondType>().value(0), 1_700_000_000_123_000_000);
        assert_eq!(col(3).as_primitive::<Float64Type>().value(0), 3.0);
        assert!(col(4).is_null(0));
    }

    #[test]
    fn a_duration_is_its_twelve_bytes() {
        use apache_avro::types::Value as V;
        let writer = r#"{"type": "record", "name": "r", "fields": [
            {"name": "d", "type": {"type": "fixed", "name": "D", "size": 12, "logicalType": "duration"}}]}"#;
        let duration = apache_avro::Duration::new(
            apache_avro::Months::new(1),
            apache_avro::Days::new(2),
            apache_avro::Millis::new(3),
        );
        let table = Fields::from(vec![Field::new("d", DataType::LargeBinary, true)]);
        let row = decode_row(writer, V::Record(vec![("d".into(), V::Duration(duration))]), table).unwrap();
        let bytes = row.column(0).as_binary::<i64>().value(0).to_vec();
        assert_eq!(bytes, [1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]);
    }

    #[test]
    fn nanosecond_timestamps_map_to_nanosecond_columns() {
        use apache_avro::types::Value as V;
        let writer = Avro::parse_str(
            r#"{"type": "record", "name": "r", "fields": [
                {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-nanos"}},
                {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-nanos"}}]}"#,
        )
        .unwrap();
        let crate::schema::PayloadType::Record(value) = crate::formats::avro::to_payload_type(&writer, &[]).unwrap()
        else {
            panic!("a record")
        };
        let types: Vec<_> = value.fields().iter().map(|f| f.field_type.to_string()).collect();
        assert_eq!(types, ["timestamptz_ns", "timestamp_ns"]);
        let table = crate::schema::plan(None, &value).unwrap().schema;
        let arrow = iceberg::arrow::schema_to_arrow_schema(&table).unwrap();
        let payload = apache_avro::to_avro_datum(
            &writer,
            V::Record(vec![
                ("ts".into(), V::TimestampNanos(1_700_000_000_123_456_789)),
                ("lts".into(), V::LocalTimestampNanos(-5)),
            ]),
        )
        .unwrap();
        let compiled = CompiledAvro::new(&writer, &[], AvroTarget::Fields(arrow.fields())).unwrap();
        let mut root = StructColumn::new(arrow.fields()).unwrap();
        root.append_valid();
        compiled.append_fields(&payload, &mut root.children, "value", 0).unwrap();
        let row = root.finish();
        assert_eq!(row.column(0).as_primitive::<TimestampNanosecondType>().value(0), 1_700_000_000_123_456_789);
        assert_eq!(row.column(1).as_primitive::<TimestampNanosecondType>().value(0), -5);
    }

    #[test]
    fn bad_values_name_their_byte_in_the_kafka_value() {
        let writer = Avro::parse_str(
            r#"{"type": "record", "name": "r", "fields": [
                {"name": "ok", "type": "boolean"},
                {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}}]}"#,
        )
        .unwrap();
        let table =
            Fields::from(vec![Field::new("ok", DataType::Boolean, true), Field::new("e", DataType::Utf8, true)]);
        let compiled = CompiledAvro::new(&writer, &[], AvroTarget::Fields(&table)).unwrap();
        for (payload, at, detail) in [(&[2u8, 0][..], 5, "boolean byte 2"), (&[1, 4], 6, "enum index 2")] {
            let mut root = StructColumn::new(&table).unwrap();
            root.append_valid();
            let e = compiled.append_fields(payload, &mut root.children, "value", 5).unwrap_err();
            assert_eq!((e.position, e.detail.as_str()), (at, detail));
        }
    }

    #[test]
    fn arrays_of_empty_items_are_capped_by_the_payload_size() {
        let writer = r#"{"type": "record", "name": "r", "fields": [
            {"name": "a", "type": {"type": "array", "items": "null"}}]}"#;
        let element = Arc::new(Field::new("element", DataType::Utf8, true));
        let table = Fields::from(vec![Field::new("a", DataType::List(element), true)]);
        let compiled = CompiledAvro::new(&Avro::parse_str(writer).unwrap(), &[], AvroTarget::Fields(&table)).unwrap();
        // Blocks of 60,000 nulls (a three-byte count each): 1,000 of them would make 60
        // million items from 3,001 bytes; the fourth block passes the cap.
        let mut payload: Vec<u8> = std::iter::repeat_n([0xc0, 0xa9, 0x07], 1000).flatten().collect();
        payload.push(0);
        let mut root = StructColumn::new(&table).unwrap();
        root.append_valid();
        let e = compiled.append_fields(&payload, &mut root.children, "value", 0).unwrap_err();
        assert_eq!((e.position, e.detail.as_str()), (9, "240000 items in a payload of 3001 bytes"));
        root.repair();
        // A few blocks are fine, even where the bytes left are fewer than the items.
        let mut payload: Vec<u8> = std::iter::repeat_n([0xfc, 0x01], 3).flatten().collect();
        payload.push(0);
        root.append_valid();
        compiled.append_fields(&payload, &mut root.children, "value", 0).unwrap();
        let rows = root.finish();
        assert_eq!(rows.column(0).as_list::<i32>().value_length(1), 378);
    }

    #[test]
    fn decimal_bytes_of_every_length_read_as_their_twos_complement() {
        let reference = |b: &[u8]| {
            let fill = if b.first().is_some_and(|x| x & 0x80 != 0) { 0xff } else { 0 };
            let mut full = [fill; 16];
            full[16 - b.len()..].copy_from_slice(b);
            i128::from_be_bytes(full)
        };
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for len in 0..=16 {
            for _ in 0..200 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        state as u8
                    })
                    .collect();
                assert_eq!(decimal_value(&bytes, 0).unwrap(), reference(&bytes), "{bytes:02x?}");
            }
        }
        assert_eq!(decimal_value(&[0xff], 0).unwrap(), -1);
        assert_eq!(decimal_value(&[0x80; 16], 0).unwrap(), i128::from_be_bytes([0x80; 16]));
        assert_eq!(decimal_value(&[0x7f, 0xff], 0).unwrap(), 32767);
        assert!(decimal_value(&[0; 17], 0).unwrap_err().detail.contains("17 bytes exceeds 128 bits"));
    }

    #[test]
    fn decimals_longer_than_their_precision_are_bad_records() {
        let writer = r#"{"type": "record", "name": "r", "fields": [
            {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}},
            {"name": "f", "type": {"type": "fixed", "name": "F", "size": 4, "logicalType": "decimal", "precision": 4, "scale": 2}}]}"#;
        let table = Fields::from(vec![
            Field::new("d", DataType::Decimal128(4, 2), true),
            Field::new("f", DataType::Decimal128(4, 2), true),
        ]);
        let compiled = CompiledAvro::new(&Avro::parse_str(writer).unwrap(), &[], AvroTarget::Fields(&table)).unwrap();
        let mut root = StructColumn::new(&table).unwrap();
        // 99.99 and -99.99 fit; 123456 (1234.56) in `d`, then -10000 in `f`, do not.
        for (payload, at, err) in [
            (&[4u8, 0x27, 0x0f, 0xff, 0xff, 0xd8, 0xf1][..], 0, None),
            (&[6, 0x01, 0xe2, 0x40, 0, 0, 0, 0][..], 0, Some("decimal 123456 (unscaled) has more than 4 digits")),
            (&[2, 0, 0xff, 0xff, 0xd8, 0xf0][..], 2, Some("decimal -10000 (unscaled) has more than 4 digits")),
        ] {
            root.append_valid();
            match (compiled.append_fields(payload, &mut root.children, "value", 0), err) {
                (Ok(()), None) => {}
                (Err(e), Some(detail)) => {
                    assert_eq!((e.position, e.detail.as_str()), (at, detail));
                    root.repair();
                }
                (got, want) => panic!("{got:?}, wanted {want:?}"),
            }
        }
        let rows = root.finish();
        assert_eq!(rows.column(0).as_primitive::<Decimal128Type>().value(0), 9999);
        assert_eq!(rows.column(1).as_primitive::<Decimal128Type>().value(0), -9999);
    }

    /// Every Avro type the mapping table lists, nested.
    const EVERY_TYPE: &str = r#"{"type": "record", "name": "r", "fields": [
        {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"}, {"name": "l", "type": "long"},
        {"name": "f", "type": "float"}, {"name": "d", "type": "double"}, {"name": "by", "type": "bytes"},
        {"name": "s", "type": "string"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
        {"name": "a", "type": {"type": "array", "items": {"type": "record", "name": "P", "fields": [
            {"name": "x", "type": "long"}, {"name": "tags", "type": {"type": "map", "values": "string"}}]}}},
        {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 4}},
        {"name": "opt", "type": ["null", "string"]},
        {"name": "multi", "type": ["null", "int", "string", "P"]},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "decf", "type": {"type": "fixed", "name": "G", "size": 8, "logicalType": "decimal", "precision": 18, "scale": 4}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tms", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tus", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "du", "type": {"type": "fixed", "name": "D", "size": 12, "logicalType": "duration"}}]}"#;

    fn every_type_value(n: i64) -> apache_avro::types::Value {
        use apache_avro::types::Value as V;
        let point = |x: i64| {
            V::Record(vec![
                ("x".into(), V::Long(x)),
                ("tags".into(), V::Map([("k".to_string(), V::String(format!("v{x}")))].into())),
            ])
        };
        V::Record(vec![
            ("b".into(), V::Boolean(n % 2 == 0)),
            ("i".into(), V::Int(n as i32 * 7)),
            ("l".into(), V::Long(n << 40)),
            ("f".into(), V::Float(n as f32 / 3.0)),
            ("d".into(), V::Double(n as f64 / 7.0)),
            ("by".into(), V::Bytes(vec![n as u8; 5])),
            ("s".into(), V::String(format!("héllo {n}"))),
            ("e".into(), V::Enum((n % 3) as u32, ["A", "B", "C"][(n % 3) as usize].into())),
            ("a".into(), V::Array((0..n % 3).map(point).collect())),
            ("fx".into(), V::Fixed(4, vec![1, 2, 3, n as u8])),
            ("opt".into(), V::Union(1, Box::new(V::String("o".into())))),
            ("multi".into(), V::Union(3, Box::new(point(n)))),
            ("dec".into(), V::Decimal(apache_avro::Decimal::from(vec![0x01, 0x02]))),
            ("decf".into(), V::Decimal(apache_avro::Decimal::from(vec![0xff; 8]))),
            ("day".into(), V::Date(n as i32)),
            ("tms".into(), V::TimeMillis(1000)),
            ("tus".into(), V::TimeMicros(2000)),
            ("ts".into(), V::TimestampMillis(1_700_000_000_000 + n)),
            ("lts".into(), V::LocalTimestampMicros(n)),
            ("u".into(), V::Uuid(uuid::Uuid::from_u128(n as u128 * 0x1234_5678_9abc_def1))),
            (
                "du".into(),
                V::Duration(apache_avro::Duration::new(
                    apache_avro::Months::new(1),
                    apache_avro::Days::new(2),
                    apache_avro::Millis::new(3),
                )),
            ),
        ])
    }

    /// Damaged payloads (bytes flipped, cut, inserted) never panic, and a failed row is
    /// repaired so every column keeps the same length, as the converter relies on.
    #[test]
    fn damaged_payloads_are_errors_and_leave_the_columns_consistent() {
        let writer = Avro::parse_str(EVERY_TYPE).unwrap();
        let crate::schema::PayloadType::Record(value) = crate::formats::avro::to_payload_type(&writer, &[]).unwrap()
        else {
            panic!("a record")
        };
        let table = crate::schema::plan(None, &value).unwrap().schema;
        let arrow = iceberg::arrow::schema_to_arrow_schema(&table).unwrap();
        let payloads: Vec<Vec<u8>> =
            (0..8).map(|n| apache_avro::to_avro_datum(&writer, every_type_value(n)).unwrap()).collect();
        // Every column, then a table of three columns (the other fields are skipped).
        let subset: Fields =
            arrow.fields().iter().filter(|f| ["b", "s", "multi"].contains(&f.name().as_str())).cloned().collect();
        for (seed, fields) in [(0x9e37_79b9_7f4a_7c15u64, arrow.fields().clone()), (0x2545_f491_4f6c_dd1d, subset)] {
            let compiled = CompiledAvro::new(&writer, &[], AvroTarget::Fields(&fields)).unwrap();
            let mut root = StructColumn::new(&fields).unwrap();
            // The intact payloads decode.
            for p in &payloads {
                root.append_valid();
                compiled.append_fields(p, &mut root.children, "value", 0).unwrap();
            }
            let (ok, failed) = decode_damaged(&mut root, &payloads, seed, 20_000, |p, columns| {
                compiled.append_fields(p, columns, "value", 0)
            });
            assert!(ok > 0 && failed > 1000, "{ok} decoded, {failed} failed");
        }
    }

    #[test]
    fn a_row_failing_inside_an_array_leaves_the_next_rows_list_its_own() {
        let writer = r#"{"type": "record", "name": "r", "fields": [
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "n", "type": "long"}]}"#;
        let element = Arc::new(Field::new("element", DataType::Utf8, false));
        let table = Fields::from(vec![
            Field::new("tags", DataType::List(element), true),
            Field::new("n", DataType::Int64, true),
        ]);
        let compiled = CompiledAvro::new(&Avro::parse_str(writer).unwrap(), &[], AvroTarget::Fields(&table)).unwrap();
        let mut root = StructColumn::new(&table).unwrap();
        // Two items announced; "a" is read, the second is not UTF-8.
        root.append_valid();
        let bad = [4, 2, b'a', 2, 0xff];
        let e = compiled.append_fields(&bad, &mut root.children, "value", 0).unwrap_err();
        assert_eq!((e.position, e.detail.as_str()), (3, "string is not UTF-8"));
        root.repair();
        root.append_valid();
        compiled.append_fields(&[2, 2, b'x', 0, 14], &mut root.children, "value", 0).unwrap();
        let rows = root.finish();
        let tags = rows.column(0).as_list::<i32>();
        let good = tags.value(1);
        assert_eq!(good.as_string::<i32>().iter().collect::<Vec<_>>(), [Some("x")]);
        assert_eq!(rows.column(1).as_primitive::<Int64Type>().value(1), 7);
    }

    #[test]
    fn nullable_unions_either_way_round() {
        use apache_avro::types::Value as V;
        let writer = r#"{"type": "record", "name": "r", "fields": [
            {"name": "a", "type": ["null", "long"]},
            {"name": "b", "type": ["string", "null"]}]}"#;
        let table = Fields::from(vec![Field::new("a", DataType::Int64, true), Field::new("b", DataType::Utf8, true)]);
        let row = |a: Option<i64>, b: Option<&str>| {
            let a = a.map_or(V::Union(0, Box::new(V::Null)), |a| V::Union(1, Box::new(V::Long(a))));
            let b = b.map_or(V::Union(1, Box::new(V::Null)), |b| V::Union(0, Box::new(V::String(b.into()))));
            decode_row(writer, V::Record(vec![("a".into(), a), ("b".into(), b)]), table.clone()).unwrap()
        };
        let full = row(Some(-3), Some("x"));
        assert_eq!(full.column(0).as_primitive::<Int64Type>().value(0), -3);
        assert_eq!(full.column(1).as_string::<i32>().value(0), "x");
        let empty = row(None, None);
        assert!(empty.column(0).is_null(0) && empty.column(1).is_null(0));
        // A branch index past the union: an error at its byte.
        let compiled = CompiledAvro::new(&Avro::parse_str(writer).unwrap(), &[], AvroTarget::Fields(&table)).unwrap();
        for (payload, at, detail) in [(&[4u8][..], 5, "union branch 2"), (&[0, 1], 6, "union branch -1")] {
            let mut root = StructColumn::new(&table).unwrap();
            root.append_valid();
            let e = compiled.append_fields(payload, &mut root.children, "value", 5).unwrap_err();
            assert_eq!((e.position, e.detail.as_str()), (at, detail));
        }
    }

    /// Strings, bytes and map keys of every length (each length class of the ASCII check
    /// and of the inline copy), ASCII or not, in the middle of a payload and at its end.
    #[test]
    fn strings_and_bytes_of_every_length_read_back_whole() {
        use apache_avro::types::Value as V;
        let writer = r#"{"type": "record", "name": "r", "fields": [
            {"name": "s", "type": "string"}, {"name": "b", "type": "bytes"},
            {"name": "m", "type": {"type": "map", "values": "int"}}, {"name": "n", "type": ["null", "string"]},
            {"name": "tail", "type": "string"}]}"#;
        let parsed = Avro::parse_str(writer).unwrap();
        let crate::schema::PayloadType::Record(value) = crate::formats::avro::to_payload_type(&parsed, &[]).unwrap()
        else {
            panic!("a record")
        };
        let table = crate::schema::plan(None, &value).unwrap().schema;
        let fields = iceberg::arrow::schema_to_arrow_schema(&table).unwrap().fields().clone();
        for len in 0..=40 {
            let ascii: String = (0..len).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
            // Two-byte characters: in the middle, and as the last character.
            let wide: String = ascii.chars().take(len / 2).map(|c| if c == 'h' { 'é' } else { c }).collect();
            for text in [ascii.clone(), wide, format!("{}é", &ascii[..len.saturating_sub(2)])] {
                let record = V::Record(vec![
                    ("s".into(), V::String(text.clone())),
                    ("b".into(), V::Bytes(text.as_bytes().to_vec())),
                    ("m".into(), V::Map([(text.clone(), V::Int(len as i32))].into())),
                    ("n".into(), V::Union(1, Box::new(V::String(text.clone())))),
                    ("tail".into(), V::String(text.clone())),
                ]);
                let row = decode_row(writer, record, fields.clone()).unwrap();
                let string = |i: usize| row.column(i).as_string::<i32>().value(0).to_string();
                assert_eq!([string(0), string(3), string(4)], [&text[..]; 3], "{len}: {text:?}");
                assert_eq!(row.column(1).as_binary::<i64>().value(0), text.as_bytes());
                assert_eq!(row.column(2).as_map().keys().as_string::<i32>().value(0), text);
            }
        }
        // A string that is not UTF-8 is refused, at the payload's end or before other bytes.
        let bad = [&[0x02, 0xc3][..], &[0; 20]].concat();
        let string = Avro::parse_str(r#""string""#).unwrap();
        let compiled = CompiledAvro::new(&string, &[], AvroTarget::Column(&DataType::Utf8)).unwrap();
        let mut col = Column::new(&DataType::Utf8).unwrap();
        for payload in [&bad[..2], &bad] {
            let e = compiled.append(payload, &mut col, "value", 5).unwrap_err();
            assert!(e.detail.contains("not UTF-8"), "{e:?}");
        }
    }
}
