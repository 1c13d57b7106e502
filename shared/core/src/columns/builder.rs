//! Arrow column builders shaped by an Arrow type (as iceberg-rust derives it from the
//! table schema, field ids in the field metadata): append values column by column, then
//! finish into arrays whose fields carry those ids.
//!
//! Fixed-width and variable-width leaves use our own builders ([`Values`], [`FixedValues`],
//! [`VarValues`]):
//! plain vectors whose appends inline into the decoders' loops (arrow's builders are
//! calls), which keep their capacity from one batch to the next, and which finish into
//! arrays without a copy.

use std::sync::Arc;

use arrow_array::types::{
    ByteArrayType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type, LargeBinaryType,
    Time64MicrosecondType, TimestampMicrosecondType, TimestampNanosecondType, Utf8Type,
    validate_decimal_precision_and_scale,
};
use arrow_array::{
    ArrayRef, ArrowPrimitiveType, BooleanArray, FixedSizeBinaryArray, GenericByteArray, ListArray, MapArray,
    PrimitiveArray, StructArray,
};
use arrow_buffer::{ArrowNativeType, BooleanBufferBuilder, Buffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, FieldRef, Fields, TimeUnit};

/// A column under construction.
pub enum Column {
    Boolean(Bools),
    Int(Values<Int32Type>),
    Long(Values<Int64Type>),
    Float(Values<Float32Type>),
    Double(Values<Float64Type>),
    Decimal(Values<Decimal128Type>),
    Date(Values<Date32Type>),
    Time(Values<Time64MicrosecondType>),
    TimestampMicros(Values<TimestampMicrosecondType>),
    TimestampNanos(Values<TimestampNanosecondType>),
    String(VarValues<Utf8Type>),
    Binary(VarValues<LargeBinaryType>),
    Fixed(FixedValues),
    Struct(StructColumn),
    List(ListColumn),
    Map(MapColumn),
}

pub struct StructColumn {
    pub fields: Fields,
    pub children: Vec<Column>,
    nulls: NullBufferBuilder,
}

pub struct ListColumn {
    field: FieldRef,
    offsets: Vec<i32>,
    pub child: Box<Column>,
    nulls: NullBufferBuilder,
}

pub struct MapColumn {
    entries: FieldRef,
    offsets: Vec<i32>,
    pub keys: Box<Column>,
    pub values: Box<Column>,
    nulls: NullBufferBuilder,
}

/// A type the builders do not handle (never produced from an Iceberg schema).
#[derive(Debug, thiserror::Error)]
#[error("unsupported Arrow type {0}")]
pub struct UnsupportedType(pub DataType);

impl Column {
    pub fn new(data_type: &DataType) -> Result<Column, UnsupportedType> {
        Ok(match data_type {
            DataType::Boolean => Column::Boolean(Bools::new(0)),
            DataType::Int32 => Column::Int(Values::new(data_type)),
            DataType::Int64 => Column::Long(Values::new(data_type)),
            DataType::Float32 => Column::Float(Values::new(data_type)),
            DataType::Float64 => Column::Double(Values::new(data_type)),
            DataType::Decimal128(p, s) => {
                validate_decimal_precision_and_scale::<Decimal128Type>(*p, *s)
                    .map_err(|_| UnsupportedType(data_type.clone()))?;
                Column::Decimal(Values::new(data_type))
            }
            DataType::Date32 => Column::Date(Values::new(data_type)),
            DataType::Time64(TimeUnit::Microsecond) => Column::Time(Values::new(data_type)),
            DataType::Timestamp(TimeUnit::Microsecond, _) => Column::TimestampMicros(Values::new(data_type)),
            DataType::Timestamp(TimeUnit::Nanosecond, _) => Column::TimestampNanos(Values::new(data_type)),
            DataType::Utf8 => Column::String(VarValues::new()),
            DataType::LargeBinary => Column::Binary(VarValues::new()),
            DataType::FixedSizeBinary(n) if *n > 0 => Column::Fixed(FixedValues::new(*n as usize)),
            DataType::Struct(fields) => Column::Struct(StructColumn::new(fields)?),
            DataType::List(field) => Column::List(ListColumn {
                field: field.clone(),
                offsets: vec![0],
                child: Box::new(Column::new(field.data_type())?),
                nulls: NullBufferBuilder::new(0),
            }),
            DataType::Map(entries, _) => {
                let DataType::Struct(kv) = entries.data_type() else {
                    return Err(UnsupportedType(data_type.clone()));
                };
                if kv.len() != 2 {
                    return Err(UnsupportedType(data_type.clone()));
                }
                Column::Map(MapColumn {
                    entries: entries.clone(),
                    offsets: vec![0],
                    keys: Box::new(Column::new(kv[0].data_type())?),
                    values: Box::new(Column::new(kv[1].data_type())?),
                    nulls: NullBufferBuilder::new(0),
                })
            }
            other => return Err(UnsupportedType(other.clone())),
        })
    }

    /// Appends a null (to every child of a struct, so lengths stay aligned).
    pub fn append_null(&mut self) {
        match self {
            Column::Boolean(b) => b.append_null(),
            Column::Int(b) => b.append_null(),
            Column::Long(b) => b.append_null(),
            Column::Float(b) => b.append_null(),
            Column::Double(b) => b.append_null(),
            Column::Decimal(b) => b.append_null(),
            Column::Date(b) => b.append_null(),
            Column::Time(b) => b.append_null(),
            Column::TimestampMicros(b) => b.append_null(),
            Column::TimestampNanos(b) => b.append_null(),
            Column::String(b) => b.append_null(),
            Column::Binary(b) => b.append_null(),
            Column::Fixed(b) => b.append_null(),
            Column::Struct(s) => s.append_null(),
            Column::List(l) => {
                l.offsets.push(*l.offsets.last().expect("offsets"));
                l.nulls.append_null();
            }
            Column::Map(m) => {
                m.offsets.push(*m.offsets.last().expect("offsets"));
                m.nulls.append_null();
            }
        }
    }

    /// Rows appended so far.
    pub fn len(&self) -> usize {
        match self {
            Column::Boolean(b) => b.len(),
            Column::Int(b) => b.len(),
            Column::Long(b) => b.len(),
            Column::Float(b) => b.len(),
            Column::Double(b) => b.len(),
            Column::Decimal(b) => b.len(),
            Column::Date(b) => b.len(),
            Column::Time(b) => b.len(),
            Column::TimestampMicros(b) => b.len(),
            Column::TimestampNanos(b) => b.len(),
            Column::String(b) => b.len(),
            Column::Binary(b) => b.len(),
            Column::Fixed(b) => b.len(),
            Column::Struct(s) => s.len(),
            Column::List(l) => l.offsets.len() - 1,
            Column::Map(m) => m.offsets.len() - 1,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends a non-null placeholder (zero, empty): completes a row that an interrupted
    /// append left short and that will be dropped (see [`StructColumn::repair`]).
    fn append_placeholder(&mut self) {
        match self {
            Column::Boolean(b) => b.append_value(false),
            Column::Int(b) => b.append_value(0),
            Column::Long(b) => b.append_value(0),
            Column::Float(b) => b.append_value(0.0),
            Column::Double(b) => b.append_value(0.0),
            Column::Decimal(b) => b.append_value(0),
            Column::Date(b) => b.append_value(0),
            Column::Time(b) => b.append_value(0),
            Column::TimestampMicros(b) => b.append_value(0),
            Column::TimestampNanos(b) => b.append_value(0),
            Column::String(b) => b.append_value(""),
            Column::Binary(b) => b.append_value(b""),
            Column::Fixed(b) => b.append_zeros(),
            Column::Struct(s) => {
                s.append_valid();
                s.children.iter_mut().for_each(Column::append_placeholder);
            }
            Column::List(l) => l.close(0),
            Column::Map(m) => m.close(0),
        }
    }

    /// The largest offset among the column's variable-size parts (string and binary
    /// bytes, list elements, map entries), nested columns included.
    pub fn largest_offset(&self) -> usize {
        match self {
            Column::String(v) => v.data.len(),
            Column::Binary(v) => v.data.len(),
            Column::Struct(s) => s.largest_offset(),
            Column::List(l) => l.end().max(l.child.largest_offset()),
            Column::Map(m) => m.end().max(m.keys.largest_offset()).max(m.values.largest_offset()),
            _ => 0,
        }
    }

    /// Makes the column's parts agree again after an append stopped half-way.
    fn repair(&mut self) {
        match self {
            Column::Struct(s) => s.repair(),
            // Elements written for a list or map that was never closed are closed into
            // one last entry, which belongs to the interrupted row (and goes with it):
            // left dangling, they would open the next row's list.
            Column::List(l) => {
                l.child.repair();
                let dangling = l.child.len() - l.end();
                if dangling > 0 {
                    l.close(dangling);
                }
            }
            Column::Map(m) => {
                m.keys.repair();
                m.values.repair();
                while m.values.len() < m.keys.len() {
                    m.values.append_placeholder();
                }
                let dangling = m.keys.len() - m.end();
                if dangling > 0 {
                    m.close(dangling);
                }
            }
            _ => {}
        }
    }

    /// Drops every row from `rows` on (nested parts included, and elements written for a
    /// list or map not yet closed): undoes the rows appended since the column had `rows`.
    pub fn truncate(&mut self, rows: usize) {
        match self {
            Column::Boolean(b) => b.truncate(rows),
            Column::Int(b) => b.truncate(rows),
            Column::Long(b) => b.truncate(rows),
            Column::Float(b) => b.truncate(rows),
            Column::Double(b) => b.truncate(rows),
            Column::Decimal(b) => b.truncate(rows),
            Column::Date(b) => b.truncate(rows),
            Column::Time(b) => b.truncate(rows),
            Column::TimestampMicros(b) => b.truncate(rows),
            Column::TimestampNanos(b) => b.truncate(rows),
            Column::String(b) => b.truncate(rows),
            Column::Binary(b) => b.truncate(rows),
            Column::Fixed(b) => b.truncate(rows),
            Column::Struct(s) => s.truncate(rows),
            Column::List(l) => {
                l.offsets.truncate(rows + 1);
                l.nulls.truncate(rows);
                l.child.truncate(l.end());
            }
            Column::Map(m) => {
                m.offsets.truncate(rows + 1);
                m.nulls.truncate(rows);
                m.keys.truncate(m.end());
                m.values.truncate(m.end());
            }
        }
    }

    /// Finishes the column into an array; the builder is empty afterwards.
    /// The next batch's builder starts with room for this batch's size and an eighth
    /// more (`next_capacity`), sparing regrowth.
    pub fn finish(&mut self) -> ArrayRef {
        match self {
            Column::Boolean(b) => b.finish(),
            Column::Int(b) => b.finish(),
            Column::Long(b) => b.finish(),
            Column::Float(b) => b.finish(),
            Column::Double(b) => b.finish(),
            Column::Decimal(b) => b.finish(),
            Column::Date(b) => b.finish(),
            Column::Time(b) => b.finish(),
            Column::TimestampMicros(b) => b.finish(),
            Column::TimestampNanos(b) => b.finish(),
            Column::String(b) => b.finish(),
            Column::Binary(b) => b.finish(),
            Column::Fixed(b) => b.finish(),
            Column::Struct(s) => Arc::new(s.finish()),
            Column::List(l) => {
                let offsets = take_offsets(&mut l.offsets);
                Arc::new(ListArray::new(l.field.clone(), offsets, l.child.finish(), l.nulls.finish()))
            }
            Column::Map(m) => {
                let offsets = take_offsets(&mut m.offsets);
                let DataType::Struct(kv) = m.entries.data_type() else { unreachable!("checked in new") };
                let entries = StructArray::new(kv.clone(), vec![m.keys.finish(), m.values.finish()], None);
                Arc::new(MapArray::new(m.entries.clone(), offsets, entries, m.nulls.finish(), false))
            }
        }
    }
}

/// The capacity a builder's vector starts the next batch with, after this batch filled
/// `len`: an eighth more, so that a slightly longer next batch (more list items, longer
/// strings) does not grow it, which would copy the whole vector once more per batch.
fn next_capacity(len: usize) -> usize {
    len + len / 8
}

/// The offsets of a finished list or map; a fresh vector with room for a batch as long
/// ([`next_capacity`]) and its leading zero stays behind.
fn take_offsets(offsets: &mut Vec<i32>) -> OffsetBuffer<i32> {
    let mut next = Vec::with_capacity(next_capacity(offsets.len()));
    next.push(0);
    OffsetBuffer::new(ScalarBuffer::from(std::mem::replace(offsets, next)))
}

/// A fixed-width column: its values, and a validity bitmap made once a null comes.
pub struct Values<T: ArrowPrimitiveType> {
    values: Vec<T::Native>,
    nulls: NullBufferBuilder,
    /// The exact type (decimal precision, time zone).
    data_type: DataType,
}

impl<T: ArrowPrimitiveType> Values<T> {
    fn new(data_type: &DataType) -> Self {
        Values { values: Vec::new(), nulls: NullBufferBuilder::new(0), data_type: data_type.clone() }
    }

    #[inline(always)]
    pub fn append_value(&mut self, v: T::Native) {
        self.values.push(v);
        self.nulls.append_non_null();
    }

    #[inline]
    pub fn append_null(&mut self) {
        self.values.push(T::Native::default());
        self.nulls.append_null();
    }

    #[inline]
    pub fn append_option(&mut self, v: Option<T::Native>) {
        match v {
            Some(v) => self.append_value(v),
            None => self.append_null(),
        }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    fn truncate(&mut self, rows: usize) {
        self.values.truncate(rows);
        self.nulls.truncate(rows);
    }

    /// The values so far as an array; a vector with room for as many
    /// ([`next_capacity`]) stays behind.
    fn finish(&mut self) -> ArrayRef {
        let next = Vec::with_capacity(next_capacity(self.values.len()));
        let values = std::mem::replace(&mut self.values, next);
        let nulls = self.nulls.finish();
        Arc::new(PrimitiveArray::<T>::new(ScalarBuffer::from(values), nulls).with_data_type(self.data_type.clone()))
    }
}

/// A boolean column: its bits, and a validity bitmap made once a null comes.
pub struct Bools {
    values: BooleanBufferBuilder,
    nulls: NullBufferBuilder,
}

impl Bools {
    fn new(capacity: usize) -> Self {
        Bools { values: BooleanBufferBuilder::new(capacity), nulls: NullBufferBuilder::new(0) }
    }

    #[inline]
    pub fn append_value(&mut self, v: bool) {
        self.values.append(v);
        self.nulls.append_non_null();
    }

    #[inline]
    pub fn append_null(&mut self) {
        self.values.append(false);
        self.nulls.append_null();
    }

    fn len(&self) -> usize {
        self.values.len()
    }

    fn truncate(&mut self, rows: usize) {
        self.values.truncate(rows);
        self.nulls.truncate(rows);
    }

    /// The values so far as an array; a builder with room for as many
    /// ([`next_capacity`]) stays behind.
    fn finish(&mut self) -> ArrayRef {
        let next = BooleanBufferBuilder::new(next_capacity(self.values.len()));
        let values = std::mem::replace(&mut self.values, next).finish();
        Arc::new(BooleanArray::new(values, self.nulls.finish()))
    }
}

/// A fixed-width binary column (`FixedSizeBinary`: UUIDs, Avro `fixed`): the values end
/// to end, and a validity bitmap made once a null comes (a null takes `width` zero bytes).
pub struct FixedValues {
    width: usize,
    data: Vec<u8>,
    nulls: NullBufferBuilder,
}

/// A value of another width than its fixed-width column's.
#[derive(Debug, thiserror::Error)]
#[error("{len} bytes for a {width}-byte fixed column")]
pub struct WrongWidth {
    pub len: usize,
    pub width: usize,
}

impl FixedValues {
    fn new(width: usize) -> Self {
        FixedValues { width, data: Vec::new(), nulls: NullBufferBuilder::new(0) }
    }

    #[inline(always)]
    pub fn append_value(&mut self, v: &[u8]) -> Result<(), WrongWidth> {
        if v.len() != self.width {
            return Err(WrongWidth { len: v.len(), width: self.width });
        }
        extend(&mut self.data, v);
        self.nulls.append_non_null();
        Ok(())
    }

    #[inline]
    pub fn append_null(&mut self) {
        self.data.resize(self.data.len() + self.width, 0);
        self.nulls.append_null();
    }

    /// A non-null value of zeros (a placeholder, see [`Column::append_placeholder`]).
    fn append_zeros(&mut self) {
        self.data.resize(self.data.len() + self.width, 0);
        self.nulls.append_non_null();
    }

    pub fn len(&self) -> usize {
        self.nulls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn truncate(&mut self, rows: usize) {
        self.data.truncate(rows.saturating_mul(self.width));
        self.nulls.truncate(rows);
    }

    /// The values so far as an array; a vector with room for as many
    /// ([`next_capacity`]) stays behind.
    fn finish(&mut self) -> ArrayRef {
        let next = Vec::with_capacity(next_capacity(self.data.len()));
        let data = std::mem::replace(&mut self.data, next);
        let nulls = self.nulls.finish();
        // `width` > 0 (checked in `Column::new`), `width` bytes per row, one validity bit per row.
        Arc::new(FixedSizeBinaryArray::new(self.width as i32, Buffer::from_vec(data), nulls))
    }
}

/// Appends `bytes` to `data`. Most values are short, and `extend_from_slice` calls
/// libc's `memcpy` for each (a call, then a dispatch on the length: 6% of decoding an
/// Avro segment); values of up to 16 bytes are copied here inline instead, as two
/// overlapping words (or halves, or single bytes).
#[inline(always)]
fn extend(data: &mut Vec<u8>, bytes: &[u8]) {
    let n = bytes.len();
    if n > 16 {
        data.extend_from_slice(bytes);
        return;
    }
    data.reserve(n);
    let len = data.len();
    // SAFETY: `reserve` made room for `n` more bytes after `len`; every read below lies
    // within `bytes` (each pair of words covers `[0, n)` from both ends) and every write
    // within `[len, len + n)`, which the same pairs then initialise completely.
    unsafe {
        let (src, dst) = (bytes.as_ptr(), data.as_mut_ptr().add(len));
        match n {
            0 => {}
            1..=3 => {
                for i in [0, n / 2, n - 1] {
                    *dst.add(i) = *src.add(i);
                }
            }
            4..=7 => {
                let (a, b) = (src.cast::<u32>().read_unaligned(), src.add(n - 4).cast::<u32>().read_unaligned());
                dst.cast::<u32>().write_unaligned(a);
                dst.add(n - 4).cast::<u32>().write_unaligned(b);
            }
            _ => {
                let (a, b) = (src.cast::<u64>().read_unaligned(), src.add(n - 8).cast::<u64>().read_unaligned());
                dst.cast::<u64>().write_unaligned(a);
                dst.add(n - 8).cast::<u64>().write_unaligned(b);
            }
        }
        data.set_len(len + n);
    }
}

/// A variable-width column (`Utf8` strings, `LargeBinary` bytes): the values' bytes end
/// to end, their end offsets, and a validity bitmap made once a null comes.
pub struct VarValues<T: ByteArrayType> {
    offsets: Vec<T::Offset>,
    data: Vec<u8>,
    nulls: NullBufferBuilder,
}

impl<T: ByteArrayType> VarValues<T> {
    fn new() -> Self {
        VarValues { offsets: vec![T::Offset::usize_as(0)], data: Vec::new(), nulls: NullBufferBuilder::new(0) }
    }

    /// Ends the current value at the data's end.
    #[inline(always)]
    fn close(&mut self) {
        // The converter ends a batch once a column passes `FULL_OFFSETS` (1 GiB), so only
        // rows adding another GiB before the next check reach this `expect`; the
        // materializer turns its panic into an error naming the segment.
        let end = T::Offset::from_usize(self.data.len()).expect(OFFSET_OVERFLOW);
        self.offsets.push(end);
    }

    #[inline(always)]
    pub fn append_value(&mut self, v: impl AsRef<T::Native>) {
        let bytes: &[u8] = v.as_ref().as_ref();
        extend(&mut self.data, bytes);
        self.close();
        self.nulls.append_non_null();
    }

    #[inline]
    pub fn append_null(&mut self) {
        self.close();
        self.nulls.append_null();
    }

    #[inline]
    pub fn append_option(&mut self, v: Option<impl AsRef<T::Native>>) {
        match v {
            Some(v) => self.append_value(v),
            None => self.append_null(),
        }
    }

    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn truncate(&mut self, rows: usize) {
        self.offsets.truncate(rows + 1);
        self.data.truncate(self.offsets.last().map_or(0, |end| end.as_usize()));
        self.nulls.truncate(rows);
    }

    /// The values so far as an array; vectors with room for as much ([`next_capacity`])
    /// stay behind.
    fn finish(&mut self) -> ArrayRef {
        let mut offsets = Vec::with_capacity(next_capacity(self.offsets.len()));
        offsets.push(T::Offset::usize_as(0));
        let offsets = std::mem::replace(&mut self.offsets, offsets);
        let next = Vec::with_capacity(next_capacity(self.data.len()));
        let data = std::mem::replace(&mut self.data, next);
        let nulls = self.nulls.finish();
        // SAFETY: the offsets start at 0, never decrease (each is the data's length when
        // pushed) and the last is the data's length; one was pushed per row, as was one
        // validity bit. `append_value` takes `T::Native` (`str` for `Utf8`), so for
        // strings every value's bytes are UTF-8.
        let array = unsafe {
            GenericByteArray::<T>::new_unchecked(
                OffsetBuffer::new_unchecked(ScalarBuffer::from(offsets)),
                Buffer::from_vec(data),
                nulls,
            )
        };
        Arc::new(array)
    }
}

impl StructColumn {
    pub fn new(fields: &Fields) -> Result<StructColumn, UnsupportedType> {
        Ok(StructColumn {
            fields: fields.clone(),
            children: fields.iter().map(|f| Column::new(f.data_type())).collect::<Result<_, _>>()?,
            nulls: NullBufferBuilder::new(0),
        })
    }

    /// Marks the current row present; the caller appends one value to every child.
    #[inline]
    pub fn append_valid(&mut self) {
        self.nulls.append_non_null();
    }

    pub fn append_null(&mut self) {
        for c in &mut self.children {
            c.append_null();
        }
        self.nulls.append_null();
    }

    pub fn len(&self) -> usize {
        self.nulls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The largest offset among the children's variable-size parts ([`Column::largest_offset`]).
    pub fn largest_offset(&self) -> usize {
        self.children.iter().map(Column::largest_offset).max().unwrap_or(0)
    }

    /// After an append stopped half-way: brings every child to the struct's row count with
    /// placeholders (and nested parts into agreement), so the half-written row can be
    /// finished and then dropped.
    pub fn repair(&mut self) {
        let rows = self.len();
        for child in &mut self.children {
            child.repair();
            while child.len() < rows {
                child.append_placeholder();
            }
        }
    }

    /// Drops every row from `rows` on ([`Column::truncate`]).
    pub fn truncate(&mut self, rows: usize) {
        self.nulls.truncate(rows);
        for child in &mut self.children {
            child.truncate(rows);
        }
    }

    pub fn finish(&mut self) -> StructArray {
        let columns = self.children.iter_mut().map(Column::finish).collect();
        StructArray::new(self.fields.clone(), columns, self.nulls.finish())
    }
}

/// A column whose strings, binary values, list elements or map entries pass this many
/// (1 GiB) ends the batch: `Utf8`, `List` and `Map` arrays have 32-bit offsets, and the
/// rows appended before the next check must not take them past 2 GiB.
pub const FULL_OFFSETS: usize = 1 << 30;

const OFFSET_OVERFLOW: &str = "more than 2 GiB of one column's strings, list elements or map entries in one \
    batch: a few records that large do not fit Arrow's 32-bit offsets";

/// The offset `n` items after `last` (checked: wrapping would corrupt the batch).
#[inline]
fn next_offset(last: i32, n: usize) -> i32 {
    (last as usize).checked_add(n).and_then(|end| i32::try_from(end).ok()).expect(OFFSET_OVERFLOW)
}

impl ListColumn {
    /// Closes the current list after its elements were appended to `child`.
    #[inline]
    pub fn close(&mut self, elements: usize) {
        let last = *self.offsets.last().expect("offsets");
        self.offsets.push(next_offset(last, elements));
        self.nulls.append_non_null();
    }

    /// Where the last closed list ends in `child`.
    fn end(&self) -> usize {
        *self.offsets.last().expect("offsets") as usize
    }
}

impl MapColumn {
    /// Closes the current map after its entries were appended to `keys` and `values`.
    #[inline]
    pub fn close(&mut self, entries: usize) {
        let last = *self.offsets.last().expect("offsets");
        self.offsets.push(next_offset(last, entries));
        self.nulls.append_non_null();
    }

    /// Where the last closed map ends in `keys` and `values`.
    fn end(&self) -> usize {
        *self.offsets.last().expect("offsets") as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_past_2_gib_are_refused_not_wrapped() {
        assert_eq!(next_offset(5, 3), 8);
        assert_eq!(next_offset(i32::MAX - 1, 1), i32::MAX);
        let wrapped = std::panic::catch_unwind(|| next_offset(i32::MAX, 1)).unwrap_err();
        assert_eq!(wrapped.downcast_ref::<String>().map(String::as_str), Some(OFFSET_OVERFLOW));
    }

    #[test]
    fn the_largest_offset_looks_into_nested_strings_lists_and_maps() {
        let key = Arc::new(Field::new("k", DataType::Utf8, false));
        let value = Arc::new(Field::new("v", DataType::Int32, true));
        let entries = Arc::new(Field::new("entries", DataType::Struct(vec![key, value].into()), false));
        let fields: Fields = vec![
            Field::new("s", DataType::Utf8, true),
            Field::new("l", DataType::List(Arc::new(Field::new("item", DataType::Int32, false))), true),
            Field::new("m", DataType::Map(entries, false), true),
        ]
        .into();
        let mut root = StructColumn::new(&fields).unwrap();
        root.append_valid();
        let [Column::String(s), Column::List(l), Column::Map(m)] = &mut root.children[..] else { panic!("layout") };
        s.append_value("abc");
        for _ in 0..5 {
            let Column::Int(i) = l.child.as_mut() else { panic!("int") };
            i.append_value(1);
        }
        l.close(5);
        let (Column::String(k), Column::Int(v)) = (m.keys.as_mut(), m.values.as_mut()) else { panic!("map") };
        k.append_value("a key of 17 bytes");
        v.append_value(1);
        m.close(1);
        assert_eq!(root.largest_offset(), 17, "the map's key bytes");
    }
    use arrow_array::Array;
    use arrow_schema::Field;

    #[test]
    fn fixed_values_keep_their_width_nulls_and_capacity() {
        let Column::Fixed(mut c) = Column::new(&DataType::FixedSizeBinary(4)).unwrap() else { panic!() };
        c.append_value(b"abcd").unwrap();
        c.append_null();
        let wrong = c.append_value(b"abc").unwrap_err();
        assert_eq!((wrong.len, wrong.width), (3, 4));
        c.append_value(&[1, 2, 3, 4]).unwrap();
        let array = c.finish();
        let array = array.as_any().downcast_ref::<FixedSizeBinaryArray>().unwrap();
        assert_eq!(array.len(), 3);
        assert_eq!((array.value(0), array.is_null(1), array.value(2)), (&b"abcd"[..], true, &[1u8, 2, 3, 4][..]));
        assert!(c.is_empty() && c.data.capacity() >= 12, "empty, with room for the next batch");
        assert!(Column::new(&DataType::FixedSizeBinary(0)).is_err(), "no zero-width column");
    }

    /// A map's entries: string keys and `value`.
    fn string_keys(value: Field) -> Field {
        let key = Field::new("key", DataType::Utf8, false);
        Field::new("key_value", DataType::Struct(Fields::from(vec![key, value])), false)
    }

    #[test]
    fn truncate_undoes_whole_and_half_written_rows_at_every_level() {
        let point = Fields::from(vec![Field::new("x", DataType::Boolean, true), Field::new("y", DataType::Utf8, true)]);
        let entries = string_keys(Field::new("value", DataType::LargeBinary, true));
        let fields = Fields::from(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("ok", DataType::Boolean, true),
            Field::new("points", DataType::List(Arc::new(Field::new("element", DataType::Struct(point), false))), true),
            Field::new("tags", DataType::Map(Arc::new(entries), false), true),
            Field::new("uid", DataType::FixedSizeBinary(2), true),
        ]);
        // Row `i`, complete; or (`half`) stopped inside its list and its map.
        let row = |root: &mut StructColumn, i: i64, half: bool| {
            root.append_valid();
            let [Column::Long(id), Column::Boolean(ok), Column::List(list), Column::Map(m), Column::Fixed(uid)] =
                root.children.as_mut_slice()
            else {
                panic!("columns")
            };
            id.append_option((i % 3 != 0).then_some(i));
            ok.append_value(i % 2 == 0);
            let Column::Struct(p) = list.child.as_mut() else { panic!() };
            for j in 0..i % 3 {
                p.append_valid();
                p.children[0].append_null();
                let Column::String(y) = &mut p.children[1] else { panic!() };
                y.append_value(format!("p{i}.{j}"));
            }
            let (Column::String(k), Column::Binary(v)) = (m.keys.as_mut(), m.values.as_mut()) else { panic!() };
            k.append_value(format!("k{i}"));
            v.append_option((i % 2 == 1).then_some(b"v"));
            if half {
                return;
            }
            list.close((i % 3) as usize);
            m.close(1);
            uid.append_value(&[i as u8, 1]).unwrap();
        };
        let (mut plain, mut undone) = (StructColumn::new(&fields).unwrap(), StructColumn::new(&fields).unwrap());
        for i in 0..6 {
            row(&mut plain, i, false);
        }
        for i in 0..6 {
            // Rows written whole then undone, and rows stopped half-way, leave nothing.
            row(&mut undone, 10 + i, false);
            undone.truncate(i as usize);
            row(&mut undone, 20 + i, true);
            undone.truncate(i as usize);
            row(&mut undone, i, false);
        }
        assert_eq!(plain.finish(), undone.finish());
    }

    #[test]
    fn repair_completes_a_half_written_row_at_every_level() {
        let point = Fields::from(vec![Field::new("x", DataType::Int64, false), Field::new("y", DataType::Utf8, false)]);
        let entries = string_keys(Field::new("value", DataType::Int64, false));
        let fields = Fields::from(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("points", DataType::List(Arc::new(Field::new("element", DataType::Struct(point), false))), true),
            Field::new("tags", DataType::Map(Arc::new(entries), false), true),
            Field::new("uid", DataType::FixedSizeBinary(16), true),
        ]);
        let mut root = StructColumn::new(&fields).unwrap();
        // A complete row.
        root.append_valid();
        root.children.iter_mut().for_each(Column::append_null);
        // A row interrupted inside a list element's struct and with a key but no value.
        root.append_valid();
        let Column::Long(id) = &mut root.children[0] else { panic!() };
        id.append_value(7);
        let Column::List(list) = &mut root.children[1] else { panic!() };
        let Column::Struct(p) = list.child.as_mut() else { panic!() };
        p.append_valid();
        let Column::Long(x) = &mut p.children[0] else { panic!() };
        x.append_value(1);
        let Column::Map(m) = &mut root.children[2] else { panic!() };
        let Column::String(k) = m.keys.as_mut() else { panic!() };
        k.append_value("k");
        root.repair();
        assert!(root.children.iter().all(|c| c.len() == 2));
        // A good row after it: its list and map hold its own elements only, the
        // interrupted row's leftovers stay with that row (which the converter drops).
        root.append_valid();
        let Column::Long(id) = &mut root.children[0] else { panic!() };
        id.append_value(9);
        let Column::List(list) = &mut root.children[1] else { panic!() };
        let Column::Struct(p) = list.child.as_mut() else { panic!() };
        p.append_valid();
        let Column::Long(x) = &mut p.children[0] else { panic!() };
        x.append_value(5);
        let Column::String(y) = &mut p.children[1] else { panic!() };
        y.append_value("five");
        list.close(1);
        let Column::Map(m) = &mut root.children[2] else { panic!() };
        let Column::String(k) = m.keys.as_mut() else { panic!() };
        k.append_value("good");
        let Column::Long(v) = m.values.as_mut() else { panic!() };
        v.append_value(1);
        m.close(1);
        root.children[3].append_null();
        let array = root.finish();
        assert_eq!(array.len(), 3);
        assert_eq!(array.column(3).len(), 3);
        let points = array.column(1).as_any().downcast_ref::<ListArray>().unwrap();
        let x = |row: usize| {
            let p = points.value(row);
            let p = p.as_any().downcast_ref::<StructArray>().unwrap();
            let x = p.column(0).as_any().downcast_ref::<PrimitiveArray<Int64Type>>().unwrap();
            x.values().to_vec()
        };
        assert_eq!((x(0), x(1), x(2)), (vec![], vec![1], vec![5]));
        let tags = array.column(2).as_any().downcast_ref::<MapArray>().unwrap();
        let keys = |row: usize| {
            let k = tags.value(row).column(0).clone();
            let k = k.as_any().downcast_ref::<arrow_array::StringArray>().unwrap();
            k.iter().map(|s| s.unwrap().to_string()).collect::<Vec<_>>()
        };
        assert_eq!((keys(0), keys(1), keys(2)), (vec![], vec!["k".to_string()], vec!["good".to_string()]));
    }

    /// Values of every length up to past the inline copy's reach land intact, end to end.
    #[test]
    fn short_and_long_values_are_appended_whole() {
        let source: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37).wrapping_add(1)).collect();
        let mut data = vec![0xee];
        let mut expected = data.clone();
        for n in 0..=source.len() {
            for start in [0, 3] {
                let v = &source[start..(start + n).min(source.len())];
                extend(&mut data, v);
                expected.extend_from_slice(v);
            }
        }
        assert_eq!(data, expected);
    }
}
