//! Reading a v2 batch's record bytes: varints, nullable spans, headers. A leaf of the
//! decoder: the record and batch modules both build on it.

use std::ops::Range;

/// A record header. Kafka header keys are strings; the value may be null.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
}

/// A read position in a batch's record bytes.
pub(crate) struct Cursor<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Cursor { data, pos: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    #[inline]
    pub(crate) fn byte(&mut self) -> Result<u8, String> {
        let b = *self.data.get(self.pos).ok_or("unexpected end of record data")?;
        self.pos += 1;
        Ok(b)
    }

    /// Zig-zag varlong (at most 10 bytes).
    #[inline(always)]
    pub(crate) fn varlong(&mut self) -> Result<i64, String> {
        let (v, n) = crate::varint::zigzag(&self.data[self.pos..]).map_err(|e| format!("record data: {e}"))?;
        self.pos += n;
        Ok(v)
    }

    /// Zig-zag varint (must fit in 32 bits).
    #[inline(always)]
    pub(crate) fn varint(&mut self) -> Result<i32, String> {
        let v = self.varlong()?;
        i32::try_from(v).map_err(|_| format!("varint {v} out of 32-bit range"))
    }

    /// A varint length followed by that many bytes, as their position; -1 is null.
    /// Inlined: returned through memory, the span was read back wider than it was
    /// written, and the CPU waited for the stores.
    #[inline(always)]
    pub(crate) fn nullable_span(&mut self) -> Result<Option<Range<usize>>, String> {
        let len = self.varint()?;
        if len == -1 {
            return Ok(None);
        }
        let len = usize::try_from(len).map_err(|_| format!("invalid length {len}"))?;
        if len > self.remaining() {
            return Err(format!("length {len} with {} bytes left", self.remaining()));
        }
        let span = self.pos..self.pos + len;
        self.pos += len;
        Ok(Some(span))
    }

    pub(crate) fn nullable_bytes(&mut self) -> Result<Option<&'a [u8]>, String> {
        Ok(self.nullable_span()?.map(|span| &self.data[span]))
    }

    /// One header: a key (never null) and a nullable value.
    pub(crate) fn header(&mut self) -> Result<Header<'a>, String> {
        let key = self.nullable_bytes()?.ok_or("null header key")?;
        Ok(Header { key, value: self.nullable_bytes()? })
    }

    pub(crate) fn skip_headers(&mut self, count: usize) -> Result<(), String> {
        (0..count).try_for_each(|_| self.header().map(drop))
    }
}
