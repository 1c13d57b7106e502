//! Debezium change events (`envelope = "debezium"`): a record's value is the envelope
//! `{"before": …, "after": …, "op": …, "source": …, "ts_ms": …}`, as Debezium's JSON
//! converter writes it (with `schemas.enable = true`, wrapped in
//! `{"schema": …, "payload": {…}}`). The table's row is `after`:
//!
//! | op | meaning | the record becomes |
//! |---|---|---|
//! | `c` create, `r` snapshot read, `u` update | the row's new image | a record whose value is `after` |
//! | `d` delete | the row is gone | a tombstone of the key |
//!
//! The key is the record's message key (Debezium's: the row's primary key). A
//! tombstone that follows a delete (for log compaction) is a tombstone as any other.
//! Nothing is copied: `after` is a slice of the record's value.

use serde::Deserialize;
use serde_json::value::RawValue;

/// The fields of an envelope Floe reads.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    after: Option<&'a RawValue>,
    #[serde(default)]
    op: Option<&'a str>,
    /// `schemas.enable = true`: the envelope is under `payload`.
    #[serde(borrow, default)]
    payload: Option<&'a RawValue>,
}

/// The value a change event stands for: `Some(after)` (its bytes, within `value`) for a
/// create, snapshot read or update, `None` for a delete; an error names what is wrong.
pub fn unwrap(value: &[u8]) -> Result<Option<&[u8]>, String> {
    let text = std::str::from_utf8(value).map_err(|e| format!("a Debezium envelope is JSON text: {e}"))?;
    let mut envelope: Envelope = serde_json::from_str(text).map_err(|e| format!("a Debezium envelope: {e}"))?;
    if envelope.op.is_none()
        && let Some(payload) = envelope.payload
    {
        envelope = serde_json::from_str(payload.get()).map_err(|e| format!("a Debezium envelope's payload: {e}"))?;
    }
    let after = envelope.after.filter(|a| a.get() != "null");
    match (envelope.op, after) {
        (Some("c" | "r" | "u"), Some(after)) => Ok(Some(after.get().as_bytes())),
        (Some("c" | "r" | "u"), None) => Err("a Debezium create, read or update without `after`".into()),
        (Some("d"), _) => Ok(None),
        (Some(op), _) => Err(format!("Debezium op {op:?}: Floe applies c, r, u and d")),
        (None, _) => Err("no `op`: not a Debezium envelope".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_reads_and_updates_are_their_after_image_and_a_delete_a_tombstone() {
        let update = br#"{"before": {"id": 1, "v": "a"}, "after": {"id": 1, "v": "b"}, "source": {"lsn": 7}, "op": "u", "ts_ms": 1}"#;
        assert_eq!(unwrap(update).unwrap(), Some(&br#"{"id": 1, "v": "b"}"#[..]));
        for op in ["c", "r"] {
            let event = format!(r#"{{"before": null, "after": {{"id": 2}}, "op": "{op}"}}"#);
            assert_eq!(unwrap(event.as_bytes()).unwrap(), Some(&br#"{"id": 2}"#[..]));
        }
        let delete = br#"{"before": {"id": 1, "v": "b"}, "after": null, "op": "d"}"#;
        assert_eq!(unwrap(delete).unwrap(), None);
        let wrapped = br#"{"schema": {"type": "struct"}, "payload": {"before": null, "after": {"id": 3}, "op": "c"}}"#;
        assert_eq!(unwrap(wrapped).unwrap(), Some(&br#"{"id": 3}"#[..]));
    }

    #[test]
    fn what_is_not_an_applicable_envelope_is_named() {
        for (value, error) in [
            (&br#"{"id": 1}"#[..], "no `op`"),
            (br#"{"after": null, "op": "u"}"#, "without `after`"),
            (br#"{"op": "t"}"#, "op \"t\""),
            (br#"{"op": "c", "after": "#, "a Debezium envelope"),
            (b"\xff", "JSON text"),
        ] {
            let e = unwrap(value).unwrap_err();
            assert!(e.contains(error), "{e}");
        }
    }
}
