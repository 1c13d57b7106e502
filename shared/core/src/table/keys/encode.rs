//! A row's key as bytes: the identity the key index stores and compares.
//!
//! The encoding is Floe's own and stable (Arrow's row format may change between Arrow
//! releases, and the index outlives a build): each key column's value, in the order the
//! key names them, as a tag byte and its bytes. A column's type is fixed for the table's
//! life but for promotions (int → long, float → double), so integers are encoded as 64
//! bits and floats as doubles: a key written before a promotion equals the same key
//! after it. Strings and binaries carry their length, so no two keys share bytes.
//!
//! | value | bytes |
//! |---|---|
//! | null | `0` |
//! | boolean | `1`, 0 or 1 |
//! | int, long, date, time, timestamp | `2`, the value as i64, big-endian |
//! | float, double | `3`, the double's bits (−0 as 0), big-endian |
//! | decimal | `4`, the unscaled i128, big-endian |
//! | string, binary, uuid, fixed | `5`, length (u32, big-endian), the bytes |
//! | struct | `6`, each field's encoding in order |

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type, Time64MicrosecondType,
    TimestampMicrosecondType, TimestampNanosecondType,
};
use arrow_array::{Array, ArrayRef};
use arrow_schema::{DataType, TimeUnit};

/// Appends the encoding of row `row` of `column` to `out`; an error names a type no key
/// may have (a list, a map).
pub fn encode(column: &dyn Array, row: usize, out: &mut Vec<u8>) -> Result<(), String> {
    if column.is_null(row) {
        out.push(0);
        return Ok(());
    }
    let long = |out: &mut Vec<u8>, v: i64| {
        out.push(2);
        out.extend_from_slice(&v.to_be_bytes());
    };
    let double = |out: &mut Vec<u8>, v: f64| {
        out.push(3);
        let v = if v == 0.0 { 0.0 } else { v };
        out.extend_from_slice(&v.to_bits().to_be_bytes());
    };
    let bytes = |out: &mut Vec<u8>, v: &[u8]| {
        out.push(5);
        out.extend_from_slice(&(v.len() as u32).to_be_bytes());
        out.extend_from_slice(v);
    };
    match column.data_type() {
        DataType::Boolean => out.extend_from_slice(&[1, column.as_boolean().value(row) as u8]),
        DataType::Int32 => long(out, column.as_primitive::<Int32Type>().value(row).into()),
        DataType::Int64 => long(out, column.as_primitive::<Int64Type>().value(row)),
        DataType::Date32 => long(out, column.as_primitive::<Date32Type>().value(row).into()),
        DataType::Time64(TimeUnit::Microsecond) => long(out, column.as_primitive::<Time64MicrosecondType>().value(row)),
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            long(out, column.as_primitive::<TimestampMicrosecondType>().value(row))
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            long(out, column.as_primitive::<TimestampNanosecondType>().value(row))
        }
        DataType::Float32 => double(out, column.as_primitive::<Float32Type>().value(row).into()),
        DataType::Float64 => double(out, column.as_primitive::<Float64Type>().value(row)),
        DataType::Decimal128(_, _) => {
            out.push(4);
            out.extend_from_slice(&column.as_primitive::<Decimal128Type>().value(row).to_be_bytes());
        }
        DataType::Utf8 => bytes(out, column.as_string::<i32>().value(row).as_bytes()),
        DataType::LargeUtf8 => bytes(out, column.as_string::<i64>().value(row).as_bytes()),
        DataType::Utf8View => bytes(out, column.as_string_view().value(row).as_bytes()),
        DataType::Binary => bytes(out, column.as_binary::<i32>().value(row)),
        DataType::LargeBinary => bytes(out, column.as_binary::<i64>().value(row)),
        DataType::BinaryView => bytes(out, column.as_binary_view().value(row)),
        DataType::FixedSizeBinary(_) => bytes(out, column.as_fixed_size_binary().value(row)),
        DataType::Struct(_) => {
            out.push(6);
            for child in column.as_struct().columns() {
                encode(child.as_ref(), row, out)?;
            }
        }
        other => return Err(format!("a key column of type {other} (a key is made of primitives and structs)")),
    }
    Ok(())
}

/// The keys of a batch's rows: `columns` (the key's columns, in its order) encoded row by
/// row; `None` for a row whose key columns are all null (a record without a key).
pub fn keys(columns: &[ArrayRef], rows: usize) -> Result<Vec<Option<Vec<u8>>>, String> {
    let mut keys = Vec::with_capacity(rows);
    for row in 0..rows {
        if columns.iter().all(|c| c.is_null(row)) {
            keys.push(None);
            continue;
        }
        let mut key = Vec::new();
        for column in columns {
            encode(column.as_ref(), row, &mut key)?;
        }
        keys.push(Some(key));
    }
    Ok(keys)
}

/// Where a key lies in the index's hash space (its buckets split that space).
pub fn hash(key: &[u8]) -> u32 {
    crc32fast::hash(key)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{BinaryArray, Float32Array, Float64Array, Int32Array, Int64Array, ListArray, StringArray};
    use arrow_array::{StructArray, types::Int32Type};
    use arrow_schema::{Field, Fields};

    use super::*;

    fn one(column: ArrayRef) -> Vec<Option<Vec<u8>>> {
        keys(std::slice::from_ref(&column), column.len()).unwrap()
    }

    #[test]
    fn a_key_keeps_its_bytes_through_a_promotion() {
        let int = one(Arc::new(Int32Array::from(vec![7, -1])));
        let long = one(Arc::new(Int64Array::from(vec![7, -1])));
        assert_eq!(int, long);
        let float = one(Arc::new(Float32Array::from(vec![1.5, -0.0])));
        let double = one(Arc::new(Float64Array::from(vec![1.5, 0.0])));
        assert_eq!(float, double, "-0 and 0 are one key");
    }

    #[test]
    fn lengths_keep_composite_keys_apart() {
        // ("ab", "c") and ("a", "bc") concatenate to the same text.
        let first = Arc::new(StringArray::from(vec!["ab", "a"])) as ArrayRef;
        let second = Arc::new(StringArray::from(vec!["c", "bc"])) as ArrayRef;
        let k = keys(&[first, second], 2).unwrap();
        assert_ne!(k[0], k[1]);
        // A string and the same bytes as binary are the same key (a column keeps its type).
        assert_eq!(one(Arc::new(StringArray::from(vec!["x"]))), one(Arc::new(BinaryArray::from(vec![b"x".as_ref()]))));
    }

    #[test]
    fn a_row_without_any_key_value_has_no_key_and_one_null_part_is_a_key() {
        let a = Arc::new(Int64Array::from(vec![None, Some(1), None])) as ArrayRef;
        let b = Arc::new(StringArray::from(vec![None, None, Some("x")])) as ArrayRef;
        let k = keys(&[a, b], 3).unwrap();
        assert_eq!(k[0], None);
        assert_eq!(k[1].as_deref(), Some(&[2, 0, 0, 0, 0, 0, 0, 0, 1, 0][..]));
        assert!(k[2].is_some());
    }

    #[test]
    fn struct_keys_encode_their_fields_and_lists_are_refused() {
        let fields = Fields::from(vec![Field::new("id", DataType::Int64, true), Field::new("r", DataType::Utf8, true)]);
        let s = StructArray::new(
            fields,
            vec![Arc::new(Int64Array::from(vec![1, 1])), Arc::new(StringArray::from(vec!["eu", "us"]))],
            None,
        );
        let k = one(Arc::new(s));
        assert_ne!(k[0], k[1]);
        assert_eq!(k[0].as_ref().unwrap()[0], 6);
        let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1)])]);
        let error = keys(&[Arc::new(list) as ArrayRef], 1).unwrap_err();
        assert!(error.contains("List"), "{error}");
    }
}
