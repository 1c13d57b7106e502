//! Arrow column builders shaped by an Arrow type (as iceberg-rust derives it from the
//! table schema, field ids in the field metadata): append values column by column, then
//! finish into arrays whose fields carry those ids.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Date32Builder, Decimal128Builder, FixedSizeBinaryBuilder, Float32Builder, Float64Builder,
    Int32Builder, Int64Builder, LargeBinaryBuilder, StringBuilder, Time64MicrosecondBuilder,
    TimestampMicrosecondBuilder, TimestampNanosecondBuilder,
};
use arrow_array::{ArrayRef, ListArray, MapArray, StructArray};
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
    Fixed(FixedSizeBinaryBuilder),
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
            DataType::FixedSizeBinary(n) => Column::Fixed(FixedSizeBinaryBuilder::new(*n)),
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

    /// Finishes the column into an array; the builder is empty afterwards.
    pub fn finish(&mut self) -> ArrayRef {
        match self {
            Column::Boolean(b) => Arc::new(b.finish()),
            Column::Int(b) => Arc::new(b.finish()),
            Column::Long(b) => Arc::new(b.finish()),
            Column::Float(b) => Arc::new(b.finish()),
            Column::Double(b) => Arc::new(b.finish()),
            Column::Decimal(b) => Arc::new(b.finish()),
            Column::Date(b) => Arc::new(b.finish()),
            Column::Time(b) => Arc::new(b.finish()),
            Column::TimestampMicros(b) => Arc::new(b.finish()),
            Column::TimestampNanos(b) => Arc::new(b.finish()),
            Column::String(b) => Arc::new(b.finish()),
            Column::Binary(b) => Arc::new(b.finish()),
            Column::Fixed(b) => Arc::new(b.finish()),
            Column::Struct(s) => Arc::new(s.finish()),
            Column::List(l) => {
                let offsets = OffsetBuffer::new(ScalarBuffer::from(std::mem::replace(&mut l.offsets, vec![0])));
                Arc::new(ListArray::new(l.field.clone(), offsets, l.child.finish(), l.nulls.finish()))
            }
            Column::Map(m) => {
                let offsets = OffsetBuffer::new(ScalarBuffer::from(std::mem::replace(&mut m.offsets, vec![0])));
                let DataType::Struct(kv) = m.entries.data_type() else { unreachable!("checked in new") };
                let entries = StructArray::new(kv.clone(), vec![m.keys.finish(), m.values.finish()], None);
                Arc::new(MapArray::new(m.entries.clone(), offsets, entries, m.nulls.finish(), false))
            }
        }
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
