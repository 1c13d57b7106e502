//! A Protobuf message compiled against the table's columns — the plan the wire decoder
//! ([`super::decode`]) follows — and the value conversions the decoder and the
//! schema side ([`super`]) share. A leaf of both.

use prost_reflect::{EnumDescriptor, FieldDescriptor};

use crate::columns::Column;

/// How an integer field is encoded on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IntWire {
    /// A varint (int32, int64, uint32, uint64, enum, bool).
    Varint,
    /// A zig-zag varint (sint32, sint64).
    ZigZag,
    /// Four or eight little-endian bytes (fixed32, sfixed32, fixed64, sfixed64).
    Fixed,
}

/// A message field compiled against the table's columns.
#[derive(Debug)]
pub(crate) enum Node {
    Bool,
    /// int32, sint32, sfixed32.
    Int(IntWire),
    /// int64, sint64, sfixed64.
    Long(IntWire),
    /// uint32, fixed32.
    UInt(IntWire),
    /// uint64, fixed64.
    ULong(IntWire),
    Float,
    Double,
    String,
    Bytes,
    Enum(EnumSymbols),
    Timestamp,
    /// A wrapper message: its `value` field.
    Wrapper(Box<Node>),
    Message(MessagePlan),
    List(Box<Node>),
    Map(Box<Node>, Box<Node>),
}

/// An enum's symbols by number, looked up without going through the descriptor pool
/// (whose lookup clones a reference-counted handle per value).
#[derive(Debug)]
pub(crate) struct EnumSymbols {
    /// For the tests' reference decoder, which asks prost-reflect.
    #[cfg(test)]
    pub(crate) descriptor: EnumDescriptor,
    /// (number, symbol) sorted by number; of aliases (`allow_alias`), the first declared.
    by_number: Vec<(i32, Box<str>)>,
    /// The symbol of an unset proto3 enum field: the first declared.
    pub(crate) default: Box<str>,
}

impl EnumSymbols {
    pub(crate) fn new(descriptor: EnumDescriptor) -> EnumSymbols {
        // In declaration order (the descriptor's own iteration is by number).
        let declared = &descriptor.enum_descriptor_proto().value;
        let mut by_number: Vec<(i32, Box<str>)> = declared.iter().map(|v| (v.number(), v.name().into())).collect();
        // A stable sort keeps aliases in declaration order; the first of each is kept.
        by_number.sort_by_key(|(n, _)| *n);
        by_number.dedup_by_key(|(n, _)| *n);
        let default = declared.first().map_or("0", |v| v.name()).into();
        EnumSymbols {
            #[cfg(test)]
            descriptor,
            by_number,
            default,
        }
    }

    /// The symbol of `number`, if the enum names it.
    pub(crate) fn name(&self, number: i32) -> Option<&str> {
        self.by_number.binary_search_by_key(&number, |(n, _)| *n).ok().map(|i| &*self.by_number[i].1)
    }
}

#[derive(Debug)]
pub(crate) struct FieldPlan {
    pub(crate) field: FieldDescriptor,
    pub(crate) node: Node,
    /// Index among the target's columns.
    pub(crate) column: usize,
    /// Null when the payload does not set it (the field tracks presence).
    pub(crate) nullable: bool,
    /// The wire type of one value (of one element of a repeated field, unpacked; a
    /// proto2 group's: delimited by start and end tags instead of a length).
    pub(crate) wire: u8,
    /// Index of its oneof among the message's oneofs.
    pub(crate) oneof: Option<usize>,
}

/// What a field number of the message is to the decoder.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    /// Index in [`MessagePlan::fields`]; `None` for a oneof member the table lacks
    /// (which still unsets the other members).
    pub(crate) field: Option<usize>,
    /// Index of its oneof among the message's oneofs.
    pub(crate) oneof: Option<usize>,
}

/// A message's fields that the table has, and the table's columns the message lacks.
#[derive(Debug)]
pub(crate) struct MessagePlan {
    /// In field number order.
    pub(crate) fields: Vec<FieldPlan>,
    pub(crate) missing: Vec<usize>,
    /// By field number, sorted: the fields the table has and every oneof member.
    pub(crate) slots: Vec<(u32, Slot)>,
    /// How many oneofs the message has (a proto3 `optional` field's own one included,
    /// though no slot names it).
    pub(crate) oneofs: usize,
}

pub(crate) type R<T> = Result<T, String>;

pub(crate) fn mismatch(what: &str) -> String {
    format!("internal: {what} value for a column of another type")
}

#[inline(always)]
pub(crate) fn put_long(col: &mut Column, v: i64) -> R<()> {
    match col {
        Column::Long(b) => b.append_value(v),
        Column::Int(b) => b.append_value(i32::try_from(v).map_err(|_| format!("{v} does not fit an int column"))?),
        _ => return Err(mismatch("integer")),
    }
    Ok(())
}

#[inline(always)]
pub(crate) fn put_double(col: &mut Column, v: f64) -> R<()> {
    match col {
        Column::Double(b) => b.append_value(v),
        Column::Float(b) => b.append_value(v as f32),
        _ => return Err(mismatch("floating-point")),
    }
    Ok(())
}

/// Microseconds or nanoseconds since the epoch of a google.protobuf.Timestamp.
pub(crate) fn timestamp_value(seconds: i64, nanos: i32, nanos_unit: bool) -> R<i64> {
    if !(0..1_000_000_000).contains(&nanos) {
        return Err(format!("timestamp nanos {nanos} out of range"));
    }
    let v = if nanos_unit {
        seconds.checked_mul(1_000_000_000).and_then(|s| s.checked_add(nanos.into()))
    } else {
        seconds.checked_mul(1_000_000).and_then(|s| s.checked_add((nanos / 1000).into()))
    };
    v.ok_or_else(|| format!("timestamp of {seconds} s out of range"))
}
