//! Arrow column builders shaped by an Arrow type (as iceberg-rust derives it from the
//! table schema, field ids in the field metadata): append values column by column, then
//! finish into arrays whose fields carry those ids.

use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, FixedSizeBinaryBuilder, Float32Builder,
    Float64Builder, Int32Builder, Int64Builder, LargeBinaryBuilder, StringBuilder, Time64MicrosecondBuilder,
    TimestampMicrosecondBuilder, TimestampNanosecondBuilder,
};
use arrow_array::{Array, ArrayRef, ListArray, MapArray, StructArray};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, FieldRef, Fields, TimeUnit};

/// A column under construction.
pub enum Column {
    Boolean(BooleanBuilder),
    Int(Int32Builder),
    Long(Int64Builder),
    Float(Float32Builder),
    Double(Float64Builder),
    Decimal(Decimal128Builder),
    Date(Date32Builder),
    Time(Time64MicrosecondBuilder),
    TimestampMicros(TimestampMicrosecondBuilder),
    TimestampNanos(TimestampNanosecondBuilder),
    String(StringBuilder),
    Binary(LargeBinaryBuilder),
    /// With its width in bytes.
    Fixed(FixedSizeBinaryBuilder, i32),
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
            DataType::Boolean => Column::Boolean(BooleanBuilder::new()),
            DataType::Int32 => Column::Int(Int32Builder::new()),
            DataType::Int64 => Column::Long(Int64Builder::new()),
            DataType::Float32 => Column::Float(Float32Builder::new()),
            DataType::Float64 => Column::Double(Float64Builder::new()),
            DataType::Decimal128(p, s) => Column::Decimal(
                Decimal128Builder::new()
                    .with_precision_and_scale(*p, *s)
                    .map_err(|_| UnsupportedType(data_type.clone()))?,
            ),
            DataType::Date32 => Column::Date(Date32Builder::new()),
            DataType::Time64(TimeUnit::Microsecond) => Column::Time(Time64MicrosecondBuilder::new()),
            DataType::Timestamp(TimeUnit::Microsecond, tz) => {
                Column::TimestampMicros(TimestampMicrosecondBuilder::new().with_timezone_opt(tz.clone()))
            }
            DataType::Timestamp(TimeUnit::Nanosecond, tz) => {
                Column::TimestampNanos(TimestampNanosecondBuilder::new().with_timezone_opt(tz.clone()))
            }
            DataType::Utf8 => Column::String(StringBuilder::new()),
            DataType::LargeBinary => Column::Binary(LargeBinaryBuilder::new()),
            DataType::FixedSizeBinary(n) => Column::Fixed(FixedSizeBinaryBuilder::new(*n), *n),
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
            Column::Fixed(b, _) => b.append_null(),
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
            Column::Fixed(b, _) => b.len(),
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
            Column::Fixed(b, width) => {
                let zeros = vec![0u8; *width as usize];
                b.append_value(&zeros).expect("placeholder of the column's width");
            }
            Column::Struct(s) => {
                s.append_valid();
                s.children.iter_mut().for_each(Column::append_placeholder);
            }
            Column::List(l) => l.close(0),
            Column::Map(m) => m.close(0),
        }
    }

    /// Makes the column's parts agree again after an append stopped half-way.
    fn repair(&mut self) {
        match self {
            Column::Struct(s) => s.repair(),
            Column::List(l) => l.child.repair(),
            Column::Map(m) => {
                m.keys.repair();
                m.values.repair();
                while m.values.len() < m.keys.len() {
                    m.values.append_placeholder();
                }
            }
            _ => {}
        }
    }

    /// Finishes the column into an array; the builder is empty afterwards.
    /// The next batch's builder starts with this batch's size, sparing regrowth.
    pub fn finish(&mut self) -> ArrayRef {
        /// Finishes a primitive builder and leaves a fresh one of the same capacity and
        /// data type (precision, time zone) in its place.
        macro_rules! primitive {
            ($b:expr) => {{
                let array = $b.finish();
                *$b = arrow_array::builder::PrimitiveBuilder::with_capacity(array.len())
                    .with_data_type(array.data_type().clone());
                Arc::new(array)
            }};
        }
        match self {
            Column::Boolean(b) => {
                let array = b.finish();
                *b = BooleanBuilder::with_capacity(array.len());
                Arc::new(array)
            }
            Column::Int(b) => primitive!(b),
            Column::Long(b) => primitive!(b),
            Column::Float(b) => primitive!(b),
            Column::Double(b) => primitive!(b),
            Column::Decimal(b) => primitive!(b),
            Column::Date(b) => primitive!(b),
            Column::Time(b) => primitive!(b),
            Column::TimestampMicros(b) => primitive!(b),
            Column::TimestampNanos(b) => primitive!(b),
            Column::String(b) => {
                let array = b.finish();
                *b = StringBuilder::with_capacity(array.len(), array.value_data().len());
                Arc::new(array)
            }
            Column::Binary(b) => {
                let array = b.finish();
                *b = LargeBinaryBuilder::with_capacity(array.len(), array.value_data().len());
                Arc::new(array)
            }
            Column::Fixed(b, _) => Arc::new(b.finish()),
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

/// The offsets of a finished list or map; a fresh vector of the same capacity (the next
/// batch is usually as long) with its leading zero stays behind.
fn take_offsets(offsets: &mut Vec<i32>) -> OffsetBuffer<i32> {
    let mut next = Vec::with_capacity(offsets.len());
    next.push(0);
    OffsetBuffer::new(ScalarBuffer::from(std::mem::replace(offsets, next)))
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

    pub fn finish(&mut self) -> StructArray {
        let columns = self.children.iter_mut().map(Column::finish).collect();
        StructArray::new(self.fields.clone(), columns, self.nulls.finish())
    }
}

impl ListColumn {
    /// Closes the current list after its elements were appended to `child`.
    pub fn close(&mut self, elements: usize) {
        let last = *self.offsets.last().expect("offsets");
        self.offsets.push(last + elements as i32);
        self.nulls.append_non_null();
    }
}

impl MapColumn {
    /// Closes the current map after its entries were appended to `keys` and `values`.
    pub fn close(&mut self, entries: usize) {
        let last = *self.offsets.last().expect("offsets");
        self.offsets.push(last + entries as i32);
        self.nulls.append_non_null();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;
    use arrow_schema::Field;

    #[test]
    fn repair_completes_a_half_written_row_at_every_level() {
        let point = Fields::from(vec![Field::new("x", DataType::Int64, false), Field::new("y", DataType::Utf8, false)]);
        let entries = Field::new(
            "key_value",
            DataType::Struct(Fields::from(vec![
                Field::new("key", DataType::Utf8, false),
                Field::new("value", DataType::Int64, false),
            ])),
            false,
        );
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
        let array = root.finish();
        assert_eq!(array.len(), 2);
        assert_eq!(array.column(3).len(), 2);
    }
}
