//! JSON text decoded straight into Arrow builders: one pass of serde_json's deserializer
//! over the payload, each value appended as it is read — no `Value` tree, nothing
//! allocated per record (but a value kept as JSON text, and objects of more than 64
//! fields).
//!
//! The types follow the mapping tables of [`super`] and [`super::super::json_schema`].
//! Object members are matched to fields by name, in any order; a member the table lacks
//! is skipped, and so is a member repeated in one object (the first one counts). Fields
//! no member names are null, or an error when the field is required.

use std::cell::RefCell;
use std::fmt;

use arrow_schema::{DataType, Fields, TimeUnit};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::columns::Column;
use crate::formats::{date_text, uuid_text};

/// What a payload is decoded into.
pub enum Target<'a> {
    /// One column of this type.
    Column(&'a DataType, &'a mut Column),
    /// The fields of an object, each into its column.
    Fields(&'a Fields, &'a mut [Column]),
}

/// Why a payload could not be decoded, and at which byte of it.
#[derive(Debug)]
pub struct Failure {
    pub at: usize,
    pub detail: String,
    /// The text is not JSON (rather than JSON that does not fit the table).
    pub syntax: bool,
}

/// Decodes `body`, one JSON value, into `target`. On failure the columns may hold part
/// of the value (the converter repairs them and drops the row).
///
/// The payload's UTF-8 is checked once, as a whole (a fast scan of mostly ASCII text),
/// so that serde_json need not check each string again as it reads it; a payload that is
/// not UTF-8 as a whole is read byte by byte as before, so that the same values are
/// accepted or refused either way (bytes that are not UTF-8 in a member the table lacks
/// are skipped, as serde_json skips them).
pub fn decode(body: &[u8], target: Target<'_>) -> Result<(), Failure> {
    match std::str::from_utf8(body) {
        Ok(text) => decode_from(serde_json::Deserializer::from_str(text), body, target),
        Err(_) => decode_from(serde_json::Deserializer::from_slice(body), body, target),
    }
}

fn decode_from<'de, R: serde_json::de::Read<'de>>(
    mut de: serde_json::Deserializer<R>,
    body: &[u8],
    target: Target<'_>,
) -> Result<(), Failure> {
    let ctx = Ctx::default();
    let decoded = match target {
        Target::Column(dt, col) => Put { ctx: &ctx, dt, col, null: None }.deserialize(&mut de),
        Target::Fields(fields, columns) => Object { ctx: &ctx, fields, columns }.deserialize(&mut de),
    };
    decoded.and_then(|()| de.end()).map_err(|e| {
        let at = byte_of(body, e.line(), e.column());
        match ctx.detail.take() {
            Some(detail) => Failure { at, detail, syntax: false },
            None => Failure { at, detail: e.to_string(), syntax: true },
        }
    })
}

/// serde_json reports line and column; turn them into a byte position.
pub fn byte_of(body: &[u8], line: usize, column: usize) -> usize {
    let mut line_start = 0;
    for _ in 1..line {
        match body[line_start..].iter().position(|&b| b == b'\n') {
            Some(i) => line_start += i + 1,
            None => break,
        }
    }
    (line_start + column.saturating_sub(1)).min(body.len())
}

/// What went wrong, said in our words: serde's errors carry a message of their own, so
/// ours is kept here and the error only marks where.
#[derive(Default)]
struct Ctx {
    detail: RefCell<Option<String>>,
}

impl Ctx {
    fn fail<E: de::Error>(&self, detail: String) -> E {
        *self.detail.borrow_mut() = Some(detail);
        E::custom("does not fit the table")
    }

    /// Names the field a failure happened in (`place: city: …`).
    fn within(&self, field: &str) {
        if let Some(d) = self.detail.borrow_mut().as_mut() {
            *d = format!("{field}: {d}");
        }
    }
}

/// Puts one JSON value into `col`, of type `dt`; `null`: the error a null is, if it is one.
struct Put<'c, 'a> {
    ctx: &'c Ctx,
    dt: &'a DataType,
    col: &'c mut Column,
    null: Option<&'static str>,
}

impl Put<'_, '_> {
    fn mismatch<E: de::Error>(&self, kind: &str) -> E {
        self.ctx.fail(format!("{kind} where {} was expected", self.dt))
    }

    /// A value of another kind into a string column (conflicting kinds in plain JSON):
    /// its JSON text.
    fn text<E: de::Error>(self, text: impl fmt::Display, kind: &str) -> Result<(), E> {
        match self.col {
            Column::String(c) if *self.dt == DataType::Utf8 => {
                c.append_value(text.to_string());
                Ok(())
            }
            _ => Err(self.mismatch(kind)),
        }
    }

    fn integer<E: de::Error>(self, i: i64) -> Result<(), E> {
        match (self.dt, &mut *self.col) {
            (DataType::Int32, Column::Int(c)) => match i32::try_from(i) {
                Ok(i) => c.append_value(i),
                Err(_) => return Err(self.ctx.fail(format!("{i} is not a 32-bit integer"))),
            },
            (DataType::Int64, Column::Long(c)) => c.append_value(i),
            (DataType::Float64, Column::Double(c)) => c.append_value(i as f64),
            (DataType::Float32, Column::Float(c)) => c.append_value(i as f32),
            _ => return self.text(i, "a number"),
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Put<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Put<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a JSON value for a {} column", self.dt)
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        match self.null {
            None => {
                self.col.append_null();
                Ok(())
            }
            Some(detail) => Err(self.ctx.fail(detail.to_string())),
        }
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<(), E> {
        match (self.dt, &mut *self.col) {
            (DataType::Boolean, Column::Boolean(c)) => c.append_value(b),
            _ => return self.text(b, "a boolean"),
        }
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, i: i64) -> Result<(), E> {
        self.integer(i)
    }

    fn visit_u64<E: de::Error>(self, u: u64) -> Result<(), E> {
        if let Ok(i) = i64::try_from(u) {
            return self.integer(i);
        }
        match (self.dt, &mut *self.col) {
            (DataType::Int32, _) => return Err(self.ctx.fail(format!("{u} is not a 32-bit integer"))),
            (DataType::Int64, _) => return Err(self.ctx.fail(format!("{u} is not a 64-bit integer"))),
            (DataType::Float64, Column::Double(c)) => c.append_value(u as f64),
            (DataType::Float32, Column::Float(c)) => c.append_value(u as f32),
            _ => return self.text(u, "a number"),
        }
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<(), E> {
        // As JSON writes it (serde_json's `Number`: `1000.0` for `1e3`).
        let number = || serde_json::Number::from_f64(f).map_or_else(|| f.to_string(), |n| n.to_string());
        match (self.dt, &mut *self.col) {
            (DataType::Float64, Column::Double(c)) => c.append_value(f),
            (DataType::Float32, Column::Float(c)) => c.append_value(f as f32),
            (DataType::Int32, _) => return Err(self.ctx.fail(format!("{} is not a 32-bit integer", number()))),
            (DataType::Int64, _) => return Err(self.ctx.fail(format!("{} is not a 64-bit integer", number()))),
            _ => return self.text(number(), "a number"),
        }
        Ok(())
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<(), E> {
        let ctx = self.ctx;
        match (self.dt, &mut *self.col) {
            (DataType::Utf8, Column::String(c)) => c.append_value(s),
            (DataType::LargeBinary, Column::Binary(c)) => c.append_value(s.as_bytes()),
            (DataType::Date32, Column::Date(c)) => c.append_value(date_text::date(s).map_err(|e| ctx.fail::<E>(e))?),
            (DataType::Time64(TimeUnit::Microsecond), Column::Time(c)) => {
                c.append_value(date_text::time(s).map_err(|e| ctx.fail::<E>(e))?)
            }
            (DataType::Timestamp(TimeUnit::Microsecond, _), Column::TimestampMicros(c)) => {
                c.append_value(date_text::timestamp(s).map_err(|e| ctx.fail::<E>(e))?)
            }
            (DataType::FixedSizeBinary(16), Column::Fixed(c)) => {
                let u = uuid_text::parse(s).map_err(|e| ctx.fail::<E>(format!("uuid {s:?}: {e}")))?;
                c.append_value(&u.to_be_bytes()).map_err(|e| ctx.fail::<E>(e.to_string()))?
            }
            _ => return Err(self.mismatch("a string")),
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        match (self.dt, &mut *self.col) {
            (DataType::List(field), Column::List(list)) => {
                let null = (!field.is_nullable()).then_some("null element where a value is required");
                let mut n = 0;
                while seq
                    .next_element_seed(Put { ctx: self.ctx, dt: field.data_type(), col: &mut list.child, null })?
                    .is_some()
                {
                    n += 1;
                }
                list.close(n);
                Ok(())
            }
            (DataType::Utf8, _) => {
                let v = serde_json::Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                self.text(v, "an array")
            }
            _ => Err(self.mismatch("an array")),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        match (self.dt, &mut *self.col) {
            (DataType::Struct(fields), Column::Struct(s)) => {
                s.append_valid();
                Object { ctx: self.ctx, fields, columns: &mut s.children }.members(map)
            }
            (DataType::Map(entries, _), Column::Map(m)) => {
                let DataType::Struct(kv) = entries.data_type() else {
                    return Err(self.ctx.fail("malformed map column".into()));
                };
                let null = (!kv[1].is_nullable()).then_some("null element where a value is required");
                let mut n = 0;
                while map.next_key_seed(Key(&mut m.keys))?.is_some() {
                    map.next_value_seed(Put { ctx: self.ctx, dt: kv[1].data_type(), col: &mut m.values, null })?;
                    n += 1;
                }
                m.close(n);
                Ok(())
            }
            (DataType::Utf8, _) => {
                let v = serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
                self.text(v, "an object")
            }
            _ => Err(self.mismatch("an object")),
        }
    }
}

/// An object's members into the columns of `fields`.
struct Object<'c, 'a> {
    ctx: &'c Ctx,
    fields: &'a Fields,
    columns: &'c mut [Column],
}

impl Object<'_, '_> {
    fn members<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = Seen::new(self.fields.len());
        let mut next = 0;
        while let Some(found) = map.next_key_seed(FieldIndex { fields: self.fields, hint: next })? {
            match found {
                Some(i) if !seen.insert(i) => {
                    next = i + 1;
                    let f = &self.fields[i];
                    let null = (!f.is_nullable()).then_some("null where a value is required");
                    let into = Put { ctx: self.ctx, dt: f.data_type(), col: &mut self.columns[i], null };
                    map.next_value_seed(into).inspect_err(|_| self.ctx.within(f.name()))?;
                }
                _ => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        for (i, f) in self.fields.iter().enumerate() {
            if !seen.contains(i) {
                if !f.is_nullable() {
                    return Err(self.ctx.fail(format!("required field `{}` is missing", f.name())));
                }
                self.columns[i].append_null();
            }
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Object<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Object<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        self.members(map)
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Err(self.ctx.fail("null where an object was expected".into()))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Err(self.ctx.fail("a boolean where an object was expected".into()))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Err(self.ctx.fail("a number where an object was expected".into()))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Err(self.ctx.fail("a number where an object was expected".into()))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Err(self.ctx.fail("a number where an object was expected".into()))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(self.ctx.fail("a string where an object was expected".into()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(self.ctx.fail("an array where an object was expected".into()))
    }
}

/// Which fields of an object were seen: a bit each (a vector past 64 fields).
enum Seen {
    Few(u64),
    Many(Vec<bool>),
}

impl Seen {
    fn new(fields: usize) -> Seen {
        if fields <= 64 { Seen::Few(0) } else { Seen::Many(vec![false; fields]) }
    }

    fn contains(&self, i: usize) -> bool {
        match self {
            Seen::Few(bits) => bits & (1 << i) != 0,
            Seen::Many(v) => v[i],
        }
    }

    /// Marks `i` seen; whether it already was.
    fn insert(&mut self, i: usize) -> bool {
        let was = self.contains(i);
        match self {
            Seen::Few(bits) => *bits |= 1 << i,
            Seen::Many(v) => v[i] = true,
        }
        was
    }
}

/// A member name → its field's index (`None`: the table has no such field). Members
/// usually come in the fields' order, so the one after the last found is tried first.
struct FieldIndex<'a> {
    fields: &'a Fields,
    hint: usize,
}

impl<'de> DeserializeSeed<'de> for FieldIndex<'_> {
    type Value = Option<usize>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for FieldIndex<'_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Option<usize>, E> {
        if self.fields.get(self.hint).is_some_and(|f| f.name() == name) {
            return Ok(Some(self.hint));
        }
        // Length and first byte before the bytes: most names differ there, and comparing
        // them is cheaper than a call to compare the rest.
        let (len, first) = (name.len(), name.as_bytes().first());
        Ok(self.fields.iter().position(|f| {
            let n = f.name();
            n.len() == len && n.as_bytes().first() == first && n == name
        }))
    }
}

/// A map key, appended to the map's string keys.
struct Key<'c>(&'c mut Column);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<(), E> {
        let Column::String(keys) = self.0 else { return Err(E::custom("internal: map keys must be strings")) };
        keys.append_value(key);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int64Type};
    use arrow_array::{Array, StructArray};
    use arrow_schema::Field;

    use super::*;
    use crate::columns::StructColumn;

    fn table() -> Fields {
        let place =
            Fields::from(vec![Field::new("city", DataType::Utf8, false), Field::new("zip", DataType::Utf8, true)]);
        let entries = Field::new(
            "key_value",
            DataType::Struct(Fields::from(vec![
                Field::new("key", DataType::Utf8, false),
                Field::new("value", DataType::Int64, true),
            ])),
            false,
        );
        Fields::from(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("score", DataType::Float64, true),
            Field::new("text", DataType::Utf8, true),
            Field::new("tags", DataType::List(Arc::new(Field::new("element", DataType::Utf8, false))), true),
            Field::new("place", DataType::Struct(place), true),
            Field::new("counts", DataType::Map(Arc::new(entries), false), true),
        ])
    }

    /// Decodes each payload as a row; the rows that decoded, and each failure.
    fn rows(payloads: &[&str]) -> (StructArray, Vec<Result<(), Failure>>) {
        let fields = table();
        let mut root = StructColumn::new(&fields).unwrap();
        let mut results = Vec::new();
        for p in payloads {
            root.append_valid();
            let r = decode(p.as_bytes(), Target::Fields(&fields, &mut root.children));
            if r.is_err() {
                root.repair();
            }
            results.push(r);
        }
        (root.finish(), results)
    }

    #[test]
    fn members_in_any_order_unknown_skipped_the_first_of_a_repeat_kept() {
        let (rows, results) = rows(&[
            r#"{"place": {"zip": null, "city": "Lyon"}, "extra": [1, {"x": 2}], "id": 1, "score": 2, "id": 9}"#,
            r#"{"id": 2, "tags": ["a", "b"], "counts": {"x": 1, "y": null}, "text": "t"}"#,
        ]);
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        assert_eq!(rows.column(0).as_primitive::<Int64Type>().values().to_vec(), [1, 2]);
        assert_eq!(rows.column(1).as_primitive::<Float64Type>().value(0), 2.0);
        assert!(rows.column(1).is_null(1) && rows.column(2).is_null(0) && rows.column(4).is_null(1));
        let place = rows.column(4).as_struct();
        assert_eq!(place.column(0).as_string::<i32>().value(0), "Lyon");
        assert!(place.column(1).is_null(0));
        let tags = rows.column(3).as_list::<i32>();
        assert!(tags.is_null(0));
        assert_eq!(tags.value(1).as_string::<i32>().iter().flatten().collect::<Vec<_>>(), ["a", "b"]);
        let counts = rows.column(5).as_map();
        assert_eq!(counts.value(1).column(0).as_string::<i32>().iter().flatten().collect::<Vec<_>>(), ["x", "y"]);
        assert!(counts.value(1).column(1).is_null(1));
    }

    #[test]
    fn values_of_other_kinds_in_a_string_column_keep_their_json_text() {
        let (rows, results) = rows(&[
            r#"{"id": 1, "text": true}"#,
            r#"{"id": 2, "text": 1e3}"#,
            r#"{"id": 3, "text": [1, "a", null]}"#,
            r#"{"id": 4, "text": {"b": 1, "a": [true]}}"#,
            r#"{"id": 5, "text": 18446744073709551615}"#,
        ]);
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        let text: Vec<&str> = rows.column(2).as_string::<i32>().iter().flatten().collect();
        assert_eq!(text, ["true", "1000.0", r#"[1,"a",null]"#, r#"{"a":[true],"b":1}"#, "18446744073709551615"]);
    }

    #[test]
    fn bytes_that_are_not_utf8_fail_in_a_kept_string_and_are_skipped_in_an_unknown_member() {
        let fields = table();
        let mut root = StructColumn::new(&fields).unwrap();
        let mut decode_row = |payload: &[u8]| {
            root.append_valid();
            let r = decode(payload, Target::Fields(&fields, &mut root.children));
            if r.is_err() {
                root.repair();
            }
            r
        };
        let bad = decode_row(b"{\"id\": 1, \"text\": \"a\xff\"}").unwrap_err();
        assert!(bad.syntax && bad.detail.contains("invalid unicode"), "{bad:?}");
        decode_row(b"{\"id\": 2, \"other\": \"a\xff\", \"text\": \"kept\"}").unwrap();
        decode_row("{\"id\": 3, \"text\": \"é\"}".as_bytes()).unwrap();
        let rows = root.finish();
        let text = rows.column(2).as_string::<i32>();
        assert_eq!((text.value(1), text.value(2)), ("kept", "é"));
    }

    #[test]
    fn what_does_not_fit_is_named_with_its_path_and_byte() {
        let cases = [
            (r#"{"id": 1, "place": {"zip": "x"}}"#, "place: required field `city` is missing", false),
            (r#"{"id": 1, "place": {"city": null}}"#, "place: city: null where a value is required", false),
            (r#"{"score": 1}"#, "required field `id` is missing", false),
            (r#"{"id": 1.5}"#, "id: 1.5 is not a 64-bit integer", false),
            (r#"{"id": 1e3}"#, "id: 1000.0 is not a 64-bit integer", false),
            (r#"{"id": 9223372036854775808}"#, "id: 9223372036854775808 is not a 64-bit integer", false),
            (r#"{"id": "one"}"#, "id: a string where Int64 was expected", false),
            (r#"{"id": 1, "tags": ["a", null]}"#, "tags: null element where a value is required", false),
            (r#"{"id": 1, "counts": {"k": "v"}}"#, "counts: a string where Int64 was expected", false),
            (r#"[1]"#, "an array where an object was expected", false),
            (r#"{"id": 1"#, "EOF while parsing an object", true),
            (r#"{"id": 1} x"#, "trailing characters", true),
        ];
        let (decoded, results) = rows(&cases.iter().map(|c| c.0).collect::<Vec<_>>());
        for ((payload, detail, syntax), result) in cases.iter().zip(&results) {
            let f = result.as_ref().unwrap_err();
            assert!(f.detail.starts_with(detail) && f.syntax == *syntax, "{payload}: {f:?}");
            assert!(f.at <= payload.len(), "{payload}: {f:?}");
        }
        assert_eq!(decoded.len(), cases.len(), "every row completed for the converter to drop");
        // Nesting deeper than serde_json's limit: an error, not a stack overflow.
        let deep = format!(r#"{{"id": 1, "text": {}{}}}"#, "[".repeat(10_000), "]".repeat(10_000));
        let (_, deep) = rows(&[deep.as_str()]);
        let f = deep[0].as_ref().unwrap_err();
        assert!(f.syntax && f.detail.starts_with("recursion limit exceeded"), "{f:?}");
        // Where: the value's last byte, where the deserializer stood.
        let f = results[6].as_ref().unwrap_err();
        assert_eq!(f.at, r#"{"id": "one"#.len());
    }
}
