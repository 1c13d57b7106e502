//! Protobuf messages decoded straight from their bytes into the columns, without a
//! message tree, in one of two ways:
//!
//! - **in order** (the usual payload): fields in number order, as encoders write them,
//!   each once (a repeated field's or a map's occurrences in one run), at most one member
//!   per oneof. Each value is written as it is read. At the first thing this path does
//!   not take (a field out of order or repeated, a second oneof member, an error), it
//!   gives the payload back: the columns drop what it wrote, and the two passes below
//!   read it again;
//! - **in two passes**: one pass over a message notes where each field the table has
//!   occurs (in scratch lists reused from one payload to the next); the fields are then
//!   written in the plan's order (by field number).
//!
//! A map's entries are always noted and sorted by key before they are written; a message
//! value among them that occurs once is then tried in order on its own (under the same
//! 1-in-32 rule), and given back on its own.
//!
//! ```text
//!   payload ──▶ in order ──────────────────────────────▶ row
//!                  │ given back (columns truncated)
//!                  └──▶ scan: notes ──▶ sort ──▶ write ──▶ row (or the error)
//! ```
//!
//! Errors always come from the two passes, so a payload's error is the same either way.
//! A decoder whose payloads are mostly given back (an encoder writing fields in another
//! order) tries the in-order path on 1 payload in 32 only ([`Scratch::in_order_pays`]).
//!
//! The wire format's rules, as prost-reflect's `DynamicMessage` applies them (a test
//! decodes random payloads both ways and compares the columns):
//!
//! - a scalar set more than once keeps its last value; a message set more than once is
//!   the merge of its occurrences (as if they were one concatenated message);
//! - setting a oneof member unsets the others, a member the table lacks included;
//! - a repeated scalar may come packed (one length-delimited run) or one per tag, mixed;
//! - a map's entries are written sorted by key (the same payload always gives the same
//!   file), the last entry of a key winning; a missing key or value is its default;
//! - unknown fields and fields the table lacks are skipped by their wire type (groups
//!   included), nesting bounded at [`MAX_DEPTH`] levels as prost bounds it;
//! - a field with the wrong wire type, a varint or a length cut short, a string that is
//!   not UTF-8, an end-group tag that closes nothing: a bad record naming its byte.
//!
//! A payload that fails half-way leaves its row half-written; the converter repairs the
//! columns and drops the row, as for Avro.

use std::cmp::Ordering;

use super::plan::{FieldPlan, IntWire, MessagePlan, Node, Slot, put_double, put_long, timestamp_value};
use crate::columns::Column;
use crate::formats::utf8::{utf8, utf8_at};
use crate::varint::{self, VarintError};

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const START_GROUP: u8 = 3;
const END_GROUP: u8 = 4;
const FIXED32: u8 = 5;

/// Nesting allowed for messages and groups (prost's recursion limit).
pub const MAX_DEPTH: usize = 100;

/// Why a message could not be decoded, and at which byte of it.
#[derive(Debug)]
pub struct Fail {
    pub at: usize,
    pub detail: String,
}

type R<T> = Result<T, Box<Fail>>;

fn fail(at: usize, detail: impl Into<String>) -> Box<Fail> {
    Box::new(Fail { at, detail: detail.into() })
}

/// `e` inside field `name`: the path is part of the message.
fn within(mut e: Box<Fail>, name: &str) -> Box<Fail> {
    e.detail = format!("{name}: {}", e.detail);
    e
}

/// One occurrence of a field: which (an index into the plan's fields, or past them for
/// a oneof member the table lacks), in which order, and its value's bytes (for a
/// length-delimited value or a group, what is inside).
#[derive(Debug, Clone, Copy)]
struct Occ {
    slot: u32,
    seq: u32,
    start: u32,
    end: u32,
    wire: u8,
}

/// The slot of an occurrence that is not written (unset by a later oneof member).
const UNSET: u32 = u32::MAX;

/// A map key, read before the entries are sorted.
#[derive(Debug, Clone, Copy)]
enum Key {
    Bool(bool),
    Int(i64),
    UInt(u64),
    /// A string's bytes, by position in the message.
    Str(u32, u32),
}

/// One map entry: its key, its order and the run of [`Scratch::occ`] holding its values.
#[derive(Debug, Clone, Copy)]
struct Entry {
    key: Key,
    seq: u32,
    values: (u32, u32),
}

/// Lists reused from one payload to the next, used as stacks by nested messages.
#[derive(Debug, Default)]
pub struct Scratch {
    occ: Vec<Occ>,
    /// Per oneof of each message being read: the member set last, and since which occurrence.
    oneofs: Vec<(u32, u32)>,
    entries: Vec<Entry>,
    /// Payloads decoded (counted afresh every [`RECOUNT`]), and how many of them the
    /// in-order path gave back.
    payloads: u32,
    given_back: u32,
    /// A message value given back on its own is being read again by the two passes: the
    /// message values inside it are not tried in order again.
    reading_again: bool,
}

/// Payloads after which the in-order path's record starts afresh.
const RECOUNT: u32 = 1 << 16;

impl Scratch {
    fn reset(&mut self) {
        // A huge payload's lists are not kept for the small ones after it.
        const KEEP: usize = 1 << 16;
        if self.occ.capacity() > KEEP || self.entries.capacity() > KEEP {
            (self.occ, self.oneofs, self.entries) = Default::default();
        }
        self.occ.clear();
        self.oneofs.clear();
        self.entries.clear();
        self.reading_again = false;
    }

    /// Counts a payload; whether to try the in-order path on it: while it gives back at
    /// most 1 payload in 32. (Giving back costs what it read before the two passes; a
    /// decoder that gives back every payload still tries 1 in 32, which notices when
    /// its producers change.)
    fn in_order_pays(&mut self) -> bool {
        if self.payloads == RECOUNT {
            (self.payloads, self.given_back) = (0, 0);
        }
        self.payloads += 1;
        self.in_order_worth()
    }

    /// Whether the in-order path gives back at most 1 message in 32 of this decoder's
    /// payloads (a message value given back on its own counts too).
    fn in_order_worth(&self) -> bool {
        self.given_back.saturating_mul(32) <= self.payloads
    }

    /// Lists for a decoder that never tries the in-order path (for tests).
    #[cfg(test)]
    fn two_passes_only() -> Scratch {
        Scratch { given_back: RECOUNT, ..Scratch::default() }
    }
}

/// Where a message's bytes are: one span, or the run `occ[lo..hi]` of a field's
/// occurrences (merged).
#[derive(Debug, Clone, Copy)]
enum Spans {
    One(usize, usize),
    Run(usize, usize),
}

impl Spans {
    const EMPTY: Spans = Spans::Run(0, 0);
}

/// Appends message `body`, compiled as `plan`, to `columns` (the plan's target fields).
pub fn decode(plan: &MessagePlan, body: &[u8], scratch: &mut Scratch, columns: &mut [Column]) -> Result<(), Box<Fail>> {
    scratch.reset();
    if u32::try_from(body.len()).is_err() {
        return Err(fail(0, "message longer than 4 GiB"));
    }
    if scratch.in_order_pays() {
        // The plan's columns are children of one struct: they have as many rows.
        let touched = || plan.fields.iter().map(|f| f.column).chain(plan.missing.iter().copied());
        let rows = touched().next().map_or(0, |c| columns[c].len());
        if let Ok(true) = put_in_order(plan, body, (0, body.len()), scratch, 0, columns) {
            return Ok(());
        }
        scratch.given_back = scratch.given_back.saturating_add(1);
        for c in touched() {
            debug_assert!(columns[c].len() >= rows, "columns of one struct");
            columns[c].truncate(rows);
        }
        scratch.reset();
    }
    put_message(plan, body, Spans::One(0, body.len()), scratch, 0, columns)
}

/// A cursor over `buf[..end]`.
struct Cur<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
}

impl Cur<'_> {
    #[inline(always)]
    fn varint(&mut self) -> R<u64> {
        match varint::unsigned(&self.buf[self.pos..self.end]) {
            Ok((v, n)) => {
                self.pos += n;
                Ok(v)
            }
            Err(e) => Err(self.varint_error(e)),
        }
    }

    #[cold]
    #[inline(never)]
    fn varint_error(&self, e: VarintError) -> Box<Fail> {
        match e {
            VarintError::End => fail(self.pos, "varint cut short"),
            VarintError::TooLong => fail(self.pos, "varint longer than 10 bytes"),
        }
    }

    #[inline(always)]
    fn take(&mut self, n: u64) -> R<(usize, usize)> {
        let left = self.end - self.pos;
        if n > left as u64 {
            return Err(self.short(n));
        }
        let start = self.pos;
        self.pos += n as usize;
        Ok((start, self.pos))
    }

    #[cold]
    #[inline(never)]
    fn short(&self, n: u64) -> Box<Fail> {
        fail(self.pos, format!("{n} bytes needed, {} left", self.end - self.pos))
    }

    #[inline(always)]
    fn array<const N: usize>(&mut self) -> R<[u8; N]> {
        let (a, b) = self.take(N as u64)?;
        Ok(self.buf[a..b].try_into().expect("N bytes"))
    }

    /// A tag: field number and wire type.
    #[inline(always)]
    fn key(&mut self) -> R<(u32, u8)> {
        let at = self.pos;
        let key = self.varint()?;
        let (number, wire) = (key >> 3, (key & 7) as u8);
        if number == 0 || number > u64::from(u32::MAX >> 3) || wire > FIXED32 {
            return Err(bad_key(at, number, wire));
        }
        Ok((number as u32, wire))
    }

    /// A length-delimited value's bytes.
    #[inline(always)]
    fn delimited(&mut self) -> R<(usize, usize)> {
        let n = self.varint()?;
        self.take(n)
    }

    /// The value after a tag: its bytes (a length-delimited value's or a group's inside).
    #[inline(always)]
    fn value(&mut self, number: u32, wire: u8, depth: usize) -> R<(usize, usize)> {
        match wire {
            VARINT => {
                let start = self.pos;
                self.varint()?;
                Ok((start, self.pos))
            }
            FIXED64 => self.take(8),
            LEN => self.delimited(),
            FIXED32 => self.take(4),
            START_GROUP => self.group(number, depth),
            _ => Err(fail(self.pos, format!("end-group tag of field {number} without its start"))),
        }
    }

    #[inline(never)]
    fn group(&mut self, number: u32, depth: usize) -> R<(usize, usize)> {
        let start = self.pos;
        if depth >= MAX_DEPTH {
            return Err(fail(start, format!("nested more than {MAX_DEPTH} levels")));
        }
        while self.pos < self.end {
            let at = self.pos;
            let (n, wire) = self.key()?;
            if wire == END_GROUP {
                if n != number {
                    return Err(fail(at, format!("end-group tag of field {n} inside group {number}")));
                }
                return Ok((start, at));
            }
            self.value(n, wire, depth + 1)?;
        }
        Err(fail(start, format!("group {number} without its end-group tag")))
    }
}

#[cold]
#[inline(never)]
fn bad_key(at: usize, number: u64, wire: u8) -> Box<Fail> {
    if number == 0 || number > u64::from(u32::MAX >> 3) {
        fail(at, format!("field number {number}"))
    } else {
        fail(at, format!("wire type {wire}"))
    }
}

/// The wire type of one value of `node` (not packed).
fn wire_of(node: &Node) -> u8 {
    match node {
        Node::Bool | Node::Enum(_) => VARINT,
        Node::Int(w) | Node::Long(w) | Node::UInt(w) | Node::ULong(w) if *w != IntWire::Fixed => VARINT,
        Node::Int(_) | Node::UInt(_) | Node::Float => FIXED32,
        Node::Long(_) | Node::ULong(_) | Node::Double => FIXED64,
        _ => LEN,
    }
}

/// The wire type of one value of a field of `node` (of one element of a repeated
/// field, unpacked).
pub(super) fn field_wire(node: &Node, group: bool) -> u8 {
    match node {
        _ if group => START_GROUP,
        Node::List(item) => wire_of(item),
        node => wire_of(node),
    }
}

/// Whether a repeated field of values of wire type `wire` may come packed.
fn packable(wire: u8) -> bool {
    matches!(wire, VARINT | FIXED64 | FIXED32)
}

fn is_message(node: &Node) -> bool {
    matches!(node, Node::Message(_) | Node::Timestamp | Node::Wrapper(_))
}

/// Checks an occurrence's wire type against its field; returns its value's bytes.
fn field_value(f: &FieldPlan, c: &mut Cur, number: u32, wire: u8, depth: usize) -> R<(usize, usize)> {
    let expected = match &f.node {
        // A repeated scalar: one value, or packed.
        Node::List(_) if wire == LEN && packable(f.wire) => LEN,
        _ => f.wire,
    };
    if wire != expected {
        return Err(fail(c.pos, format!("wire type {wire}, expected {expected}")));
    }
    c.value(number, wire, depth)
}

/// The slot of field `number`, if the message has one for it. `hint`: the slot after
/// the last one found (encoders write fields in number order, so usually this one's).
#[inline(always)]
fn slot_of(plan: &MessagePlan, number: u32, hint: &mut usize) -> Option<Slot> {
    let i = match plan.slots.get(*hint) {
        Some((n, _)) if *n == number => *hint,
        _ => plan.slots.binary_search_by_key(&number, |(n, _)| *n).ok()?,
    };
    *hint = i + 1;
    Some(plan.slots[i].1)
}

/// The field being read by the in-order path, when it takes more than one occurrence.
enum Open {
    Nothing,
    /// A repeated field, with the elements written so far.
    List(usize),
    /// A map, its entries noted from `occ[lo]` on.
    Map(usize),
}

/// Appends message `buf[start..end]` in order, in one pass (see the module doc).
/// `Ok(false)` or `Err`: given back, with part of the row written.
fn put_in_order(
    plan: &MessagePlan,
    buf: &[u8],
    (start, end): (usize, usize),
    s: &mut Scratch,
    depth: usize,
    columns: &mut [Column],
) -> R<bool> {
    if depth >= MAX_DEPTH {
        return Ok(false);
    }
    let mut c = Cur { buf, pos: start, end };
    // The plan's fields before `next` are written, but for the last one while `open`.
    let (mut next, mut open, mut hint, mut oneofs) = (0, Open::Nothing, 0, 0u64);
    while c.pos < c.end {
        let (number, wire) = c.key()?;
        let Some(slot) = slot_of(plan, number, &mut hint) else {
            c.value(number, wire, depth)?;
            continue;
        };
        if let Some(o) = slot.oneof {
            let bit = 1u64.checked_shl(o as u32).unwrap_or(0);
            if bit == 0 || oneofs & bit != 0 {
                return Ok(false);
            }
            oneofs |= bit;
        }
        let Some(k) = slot.field else {
            // A oneof member the table lacks: the others stay unset (null).
            c.value(number, wire, depth)?;
            continue;
        };
        let f = &plan.fields[k];
        if k >= next {
            if !matches!(open, Open::Nothing) {
                close(&plan.fields, next, std::mem::replace(&mut open, Open::Nothing), buf, s, depth, columns)?;
            }
            for absent in &plan.fields[next..k] {
                put_absent(absent, buf, s, depth, &mut columns[absent.column])?;
            }
            next = k + 1;
            open = match f.node {
                Node::List(_) => Open::List(0),
                Node::Map(..) => Open::Map(s.occ.len()),
                _ => Open::Nothing,
            };
        } else if k + 1 != next || matches!(open, Open::Nothing) {
            return Ok(false);
        }
        let col = &mut columns[f.column];
        let taken = match (&f.node, &mut open, col) {
            // A packed run.
            (Node::List(item), Open::List(n), Column::List(list)) if wire == LEN && packable(f.wire) => {
                let (a, b) = c.value(number, wire, depth)?;
                let mut run = Cur { buf, pos: a, end: b };
                while run.pos < run.end {
                    put_scalar(item, &mut run, &mut list.child)?;
                    *n += 1;
                }
                true
            }
            (Node::List(item), Open::List(n), Column::List(list)) => {
                *n += 1;
                put_value_in_order(item, f.wire, &mut c, (number, wire), s, depth, &mut list.child)?
            }
            (Node::Map(..), Open::Map(_), _) if wire == LEN => {
                let (a, b) = c.value(number, wire, depth)?;
                s.occ.push(Occ { slot: k as u32, seq: 0, start: a as u32, end: b as u32, wire });
                true
            }
            (Node::List(_) | Node::Map(..), ..) => false,
            (node, _, col) => put_value_in_order(node, f.wire, &mut c, (number, wire), s, depth, col)?,
        };
        if !taken {
            return Ok(false);
        }
    }
    close(&plan.fields, next, open, buf, s, depth, columns)?;
    for absent in &plan.fields[next..] {
        put_absent(absent, buf, s, depth, &mut columns[absent.column])?;
    }
    for &m in &plan.missing {
        columns[m].append_null();
    }
    Ok(true)
}

/// Ends the repeated field or map the in-order path was reading (`fields[next - 1]`).
fn close(
    fields: &[FieldPlan],
    next: usize,
    open: Open,
    buf: &[u8],
    s: &mut Scratch,
    depth: usize,
    columns: &mut [Column],
) -> R<()> {
    let Some(f) = next.checked_sub(1).map(|k| &fields[k]) else { return Ok(()) };
    match (open, &mut columns[f.column]) {
        (Open::Nothing, _) => {}
        (Open::List(n), Column::List(list)) => list.close(n),
        (Open::Map(lo), col) => {
            let Node::Map(key, value) = &f.node else { return Err(fail(0, "internal: a map without its plan")) };
            put_map(key, value, buf, (lo, s.occ.len()), s, depth, col)?;
            s.occ.truncate(lo);
        }
        (Open::List(_), _) => return Err(fail(0, super::plan::mismatch("repeated"))),
    }
    Ok(())
}

/// One value of `node` after its tag (`number`, `wire`), by the in-order path.
/// `Ok(false)`: not taken (another wire type than the `expected` one, or a nested
/// message given back).
#[inline(always)]
fn put_value_in_order(
    node: &Node,
    expected: u8,
    c: &mut Cur,
    (number, wire): (u32, u8),
    s: &mut Scratch,
    depth: usize,
    col: &mut Column,
) -> R<bool> {
    if wire != expected {
        return Ok(false);
    }
    match (node, col) {
        (Node::Message(plan), Column::Struct(st)) => {
            let span = c.value(number, wire, depth)?;
            st.append_valid();
            put_in_order(plan, c.buf, span, s, depth + 1, &mut st.children)
        }
        (Node::Message(_), _) => Ok(false),
        // Strings and bytes without `put_one`'s spans; a string that is not UTF-8 is
        // given back, for the two passes to name its byte.
        (Node::String, Column::String(x)) => {
            let (a, b) = c.delimited()?;
            let Some(v) = utf8(&c.buf[a..b]) else { return Ok(false) };
            x.append_value(v);
            Ok(true)
        }
        (Node::Bytes, Column::Binary(x)) => {
            let (a, b) = c.delimited()?;
            x.append_value(&c.buf[a..b]);
            Ok(true)
        }
        // A wrapper holds its value as field 1 (nothing: the default).
        (Node::Wrapper(inner), col) => {
            let (a, b) = c.delimited()?;
            let mut w = Cur { buf: c.buf, pos: a, end: b };
            if w.pos == w.end {
                put_default(inner, c.buf, s, depth, col)?;
                return Ok(true);
            }
            let (n, inner_wire) = w.key()?;
            let taken = match inner_wire {
                _ if n != 1 || inner_wire != wire_of(inner) => false,
                LEN => put_value_in_order(inner, LEN, &mut w, (n, inner_wire), s, depth, col)?,
                // A number or a bool, without a second dispatch.
                _ => {
                    put_scalar(inner, &mut w, col)?;
                    true
                }
            };
            Ok(taken && w.pos == w.end)
        }
        // A timestamp: seconds (1) and nanos (2), each a varint, either left out when 0.
        (Node::Timestamp, col) => {
            let (a, b) = c.delimited()?;
            let mut t = Cur { buf: c.buf, pos: a, end: b };
            let (mut parts, mut next) = ([0u64; 2], 1);
            while t.pos < t.end {
                let (n, w) = t.key()?;
                if w != VARINT || !(next..=2).contains(&n) {
                    return Ok(false);
                }
                parts[n as usize - 1] = t.varint()?;
                next = n + 1;
            }
            Ok(put_timestamp(col, parts[0] as i64, parts[1] as i32).is_ok())
        }
        (node, col) if wire == LEN || wire == START_GROUP => {
            let (a, b) = c.value(number, wire, depth)?;
            put_one(node, c.buf, Spans::One(a, b), s, depth, col)?;
            Ok(true)
        }
        (node, col) => {
            put_scalar(node, c, col)?;
            Ok(true)
        }
    }
}

/// What the scan of one message has seen so far.
struct Seen {
    /// Occurrences noted.
    seq: u32,
    /// The slot of the last one.
    last: u32,
    /// Slots never went down: the notes are sorted already.
    in_order: bool,
    /// A oneof member occurred.
    oneof: bool,
}

/// Notes the occurrences in `buf[start..end]` of `plan`'s fields, after `s.occ`'s
/// current length; oneof states at `s.oneofs[oneofs..]`.
fn scan(
    plan: &MessagePlan,
    buf: &[u8],
    (start, end): (usize, usize),
    s: &mut Scratch,
    oneofs: usize,
    seen: &mut Seen,
    depth: usize,
) -> R<()> {
    let mut c = Cur { buf, pos: start, end };
    let mut hint = 0;
    while c.pos < c.end {
        let (number, wire) = c.key()?;
        let Some(slot) = slot_of(plan, number, &mut hint) else {
            c.value(number, wire, depth)?;
            continue;
        };
        let (start, end, id) = match slot.field {
            Some(k) => {
                let f = &plan.fields[k];
                let (a, b) = field_value(f, &mut c, number, wire, depth).map_err(|e| within(e, f.field.name()))?;
                (a, b, k as u32)
            }
            None => {
                c.value(number, wire, depth)?;
                (0, 0, (plan.fields.len() + slot.oneof.expect("only oneof members")) as u32)
            }
        };
        if let Some(o) = slot.oneof {
            seen.oneof = true;
            let state = &mut s.oneofs[oneofs + o];
            if state.0 != id {
                *state = (id, seen.seq);
            }
        }
        seen.in_order &= id >= seen.last;
        seen.last = id;
        s.occ.push(Occ { slot: id, seq: seen.seq, start: start as u32, end: end as u32, wire });
        seen.seq += 1;
    }
    Ok(())
}

/// Appends one message (from one span, or merged from several) to `columns`.
fn put_message(
    plan: &MessagePlan,
    buf: &[u8],
    spans: Spans,
    s: &mut Scratch,
    depth: usize,
    columns: &mut [Column],
) -> R<()> {
    if depth >= MAX_DEPTH {
        let at = match spans {
            Spans::One(a, _) => a,
            Spans::Run(lo, _) => s.occ.get(lo).map_or(0, |o| o.start as usize),
        };
        return Err(fail(at, format!("nested more than {MAX_DEPTH} levels")));
    }
    let (base, oneofs) = (s.occ.len(), s.oneofs.len());
    s.oneofs.resize(oneofs + plan.oneofs, (UNSET, 0));
    let mut seen = Seen { seq: 0, last: 0, in_order: true, oneof: false };
    match spans {
        Spans::One(a, b) => scan(plan, buf, (a, b), s, oneofs, &mut seen, depth)?,
        Spans::Run(lo, hi) => {
            for i in lo..hi {
                let o = s.occ[i];
                scan(plan, buf, (o.start as usize, o.end as usize), s, oneofs, &mut seen, depth)?;
            }
        }
    }
    // Oneof members unset by a later member, and members the table lacks, are not written.
    let written = plan.fields.len() as u32;
    if seen.oneof {
        for o in &mut s.occ[base..] {
            let oneof =
                if o.slot >= written { Some((o.slot - written) as usize) } else { plan.fields[o.slot as usize].oneof };
            if let Some(k) = oneof {
                let (set, since) = s.oneofs[oneofs + k];
                if o.slot >= written || o.slot != set || o.seq < since {
                    o.slot = UNSET;
                }
            }
        }
    }
    s.oneofs.truncate(oneofs);
    // Fields in number order and no oneof: already in the order the loop below wants.
    if seen.oneof || !seen.in_order {
        s.occ[base..].sort_unstable_by_key(|o| (o.slot, o.seq));
    }
    let end = s.occ.len();
    let mut i = base;
    for (k, f) in plan.fields.iter().enumerate() {
        let lo = i;
        while i < end && s.occ[i].slot == k as u32 {
            i += 1;
        }
        put_field(f, buf, (lo, i), s, depth, &mut columns[f.column]).map_err(|e| within(e, f.field.name()))?;
    }
    s.occ.truncate(base);
    for &m in &plan.missing {
        columns[m].append_null();
    }
    Ok(())
}

/// Appends field `f` from its occurrences `occ[lo..hi]`.
fn put_field(
    f: &FieldPlan,
    buf: &[u8],
    (lo, hi): (usize, usize),
    s: &mut Scratch,
    depth: usize,
    col: &mut Column,
) -> R<()> {
    if lo == hi {
        return put_absent(f, buf, s, depth, col);
    }
    match &f.node {
        Node::List(item) => {
            let Column::List(list) = col else { return Err(mismatch(lo, s, "repeated")) };
            let mut n = 0;
            for i in lo..hi {
                let o = s.occ[i];
                let (start, end) = (o.start as usize, o.end as usize);
                if o.wire == LEN && packable(f.wire) {
                    let mut c = Cur { buf, pos: start, end };
                    while c.pos < c.end {
                        put_scalar(item, &mut c, &mut list.child)?;
                        n += 1;
                    }
                } else {
                    put_one(item, buf, Spans::One(start, end), s, depth, &mut list.child)?;
                    n += 1;
                }
            }
            list.close(n);
            Ok(())
        }
        Node::Map(key, value) => put_map(key, value, buf, (lo, hi), s, depth, col),
        node if is_message(node) => put_one(node, buf, Spans::Run(lo, hi), s, depth, col),
        node => {
            let o = s.occ[hi - 1];
            put_one(node, buf, Spans::One(o.start as usize, o.end as usize), s, depth, col)
        }
    }
}

/// Appends what field `f` holds where a message leaves it out: an empty list or map,
/// null, or its default (for both paths).
#[inline(always)]
fn put_absent(f: &FieldPlan, buf: &[u8], s: &mut Scratch, depth: usize, col: &mut Column) -> R<()> {
    match (&f.node, col) {
        (Node::List(_), Column::List(list)) => list.close(0),
        (Node::Map(..), Column::Map(map)) => map.close(0),
        (Node::List(_), _) => return Err(fail(0, super::plan::mismatch("repeated"))),
        (Node::Map(..), _) => return Err(fail(0, super::plan::mismatch("map"))),
        (_, col) if f.nullable => col.append_null(),
        (node, col) => return put_default(node, buf, s, depth, col),
    }
    Ok(())
}

fn mismatch(lo: usize, s: &Scratch, what: &str) -> Box<Fail> {
    fail(s.occ.get(lo).map_or(0, |o| o.start as usize), super::plan::mismatch(what))
}

/// A scalar value as read from the wire.
enum Scalar {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f32),
    Double(f64),
}

/// Reads one value of scalar `node`, as prost does (an int32 varint keeps its low 32 bits).
#[inline(always)]
fn scalar(node: &Node, c: &mut Cur) -> R<Scalar> {
    Ok(match node {
        Node::Bool => Scalar::Bool(c.varint()? != 0),
        Node::Int(IntWire::Varint) | Node::Enum(_) => Scalar::Int(i64::from(c.varint()? as i32)),
        Node::Int(IntWire::ZigZag) => {
            let n = c.varint()? as u32;
            Scalar::Int(i64::from((n >> 1) as i32 ^ -((n & 1) as i32)))
        }
        Node::Int(IntWire::Fixed) => Scalar::Int(i32::from_le_bytes(c.array()?).into()),
        Node::Long(IntWire::Varint) => Scalar::Int(c.varint()? as i64),
        Node::Long(IntWire::ZigZag) => {
            let n = c.varint()?;
            Scalar::Int((n >> 1) as i64 ^ -((n & 1) as i64))
        }
        Node::Long(IntWire::Fixed) => Scalar::Int(i64::from_le_bytes(c.array()?)),
        Node::UInt(IntWire::Fixed) => Scalar::UInt(u32::from_le_bytes(c.array()?).into()),
        Node::UInt(_) => Scalar::UInt(u64::from(c.varint()? as u32)),
        Node::ULong(IntWire::Fixed) => Scalar::UInt(u64::from_le_bytes(c.array()?)),
        Node::ULong(_) => Scalar::UInt(c.varint()?),
        Node::Float => Scalar::Float(f32::from_le_bytes(c.array()?)),
        Node::Double => Scalar::Double(f64::from_le_bytes(c.array()?)),
        _ => return Err(fail(c.pos, format!("internal: {node:?} read as a scalar"))),
    })
}

/// Appends one scalar value read at `c`.
#[inline(always)]
fn put_scalar(node: &Node, c: &mut Cur, col: &mut Column) -> R<()> {
    let at = c.pos;
    let put = match (node, scalar(node, c)?, col) {
        (_, Scalar::Bool(b), Column::Boolean(x)) => {
            x.append_value(b);
            Ok(())
        }
        (Node::Enum(e), Scalar::Int(n), Column::String(x)) => {
            match e.name(n as i32) {
                Some(symbol) => x.append_value(symbol),
                None => x.append_value(n.to_string()),
            }
            Ok(())
        }
        (Node::ULong(_), Scalar::UInt(u), Column::Decimal(x)) => {
            x.append_value(i128::from(u));
            Ok(())
        }
        (Node::Int(_) | Node::Long(_), Scalar::Int(i), col) => put_long(col, i),
        (Node::UInt(_), Scalar::UInt(u), col) => put_long(col, u as i64),
        (_, Scalar::Float(f), col) => put_double(col, f.into()),
        (_, Scalar::Double(f), col) => put_double(col, f),
        _ => Err(super::plan::mismatch("scalar")),
    };
    put.map_err(|e| fail(at, e))
}

/// Appends one value of `node`: a scalar from `Spans::One`, a message from any spans.
fn put_one(node: &Node, buf: &[u8], spans: Spans, s: &mut Scratch, depth: usize, col: &mut Column) -> R<()> {
    let at = match spans {
        Spans::One(a, _) => a,
        Spans::Run(lo, _) => s.occ.get(lo).map_or(0, |o| o.start as usize),
    };
    match (node, spans) {
        (Node::Message(plan), _) => {
            let Column::Struct(st) = col else { return Err(fail(at, super::plan::mismatch("message"))) };
            st.append_valid();
            put_message(plan, buf, spans, s, depth + 1, &mut st.children)
        }
        (Node::Timestamp, _) => {
            let [seconds, nanos] = last_fields(buf, spans, s, [(1, VARINT), (2, VARINT)], depth)?;
            let read = |span: Option<(usize, usize)>| -> R<u64> {
                span.map_or(Ok(0), |(a, b)| Cur { buf, pos: a, end: b }.varint())
            };
            put_timestamp(col, read(seconds)? as i64, read(nanos)? as i32).map_err(|e| fail(at, e))
        }
        (Node::Wrapper(inner), _) => match last_fields(buf, spans, s, [(1, wire_of(inner))], depth)? {
            [Some((a, b))] => put_one(inner, buf, Spans::One(a, b), s, depth, col),
            [None] => put_default(inner, buf, s, depth, col),
        },
        (Node::String, Spans::One(a, b)) => {
            let v = utf8_at(&buf[a..b]).map_err(|at| fail(a + at, "string is not UTF-8"))?;
            match col {
                Column::String(x) => x.append_value(v),
                Column::Binary(x) => x.append_value(v.as_bytes()),
                _ => return Err(fail(at, super::plan::mismatch("string"))),
            }
            Ok(())
        }
        (Node::Bytes, Spans::One(a, b)) => match col {
            Column::Binary(x) => {
                x.append_value(&buf[a..b]);
                Ok(())
            }
            _ => Err(fail(at, super::plan::mismatch("bytes"))),
        },
        (_, Spans::One(a, b)) => put_scalar(node, &mut Cur { buf, pos: a, end: b }, col),
        _ => Err(fail(at, format!("internal: {node:?} from several occurrences"))),
    }
}

/// Appends message `node` (compiled as `plan`) from its one occurrence `buf[start..end]`
/// (a map's value): by the in-order path while the decoder's payloads take it, else by
/// the two passes. A message the in-order path gives back is read again by the two
/// passes alone (which report its error, if any): the column and the scratch lists drop
/// what it wrote.
fn put_single_message(
    node: &Node,
    plan: &MessagePlan,
    buf: &[u8],
    span: (usize, usize),
    s: &mut Scratch,
    depth: usize,
    col: &mut Column,
) -> R<()> {
    let span_of = Spans::One(span.0, span.1);
    if !s.reading_again
        && s.in_order_worth()
        && let Column::Struct(st) = col
    {
        let (rows, lists) = (st.len(), (s.occ.len(), s.oneofs.len(), s.entries.len()));
        st.append_valid();
        if let Ok(true) = put_in_order(plan, buf, span, s, depth + 1, &mut st.children) {
            return Ok(());
        }
        s.given_back = s.given_back.saturating_add(1);
        col.truncate(rows);
        s.occ.truncate(lists.0);
        s.oneofs.truncate(lists.1);
        s.entries.truncate(lists.2);
        // Values nested in it are not tried again: a chain of nested give-backs costs one
        // more read per level, not twice the work per level.
        s.reading_again = true;
        let read = put_one(node, buf, span_of, s, depth, col);
        s.reading_again = false;
        return read;
    }
    put_one(node, buf, span_of, s, depth, col)
}

/// Appends a google.protobuf.Timestamp to a timestamp column (µs or ns).
fn put_timestamp(col: &mut Column, seconds: i64, nanos: i32) -> Result<(), String> {
    match col {
        Column::TimestampMicros(x) => timestamp_value(seconds, nanos, false).map(|v| x.append_value(v)),
        Column::TimestampNanos(x) => timestamp_value(seconds, nanos, true).map(|v| x.append_value(v)),
        _ => Err(super::plan::mismatch("timestamp")),
    }
}

/// Appends `node`'s default: the value of a proto3 scalar left unset, or of a map
/// entry without its value.
fn put_default(node: &Node, buf: &[u8], s: &mut Scratch, depth: usize, col: &mut Column) -> R<()> {
    let put = match (node, &mut *col) {
        (Node::Bool, Column::Boolean(x)) => {
            x.append_value(false);
            Ok(())
        }
        (Node::ULong(_), Column::Decimal(x)) => {
            x.append_value(0);
            Ok(())
        }
        (Node::Int(_) | Node::Long(_) | Node::UInt(_), col) => put_long(col, 0),
        (Node::Float | Node::Double, col) => put_double(col, 0.0),
        (Node::String, Column::String(x)) => {
            x.append_value("");
            Ok(())
        }
        (Node::String | Node::Bytes, Column::Binary(x)) => {
            x.append_value(b"");
            Ok(())
        }
        (Node::Enum(e), Column::String(x)) => {
            x.append_value(&e.default);
            Ok(())
        }
        (node, _) if is_message(node) => return put_one(node, buf, Spans::EMPTY, s, depth, col),
        _ => Err(super::plan::mismatch("default")),
    };
    put.map_err(|e| fail(0, e))
}

/// The last occurrence of each of `fields` (number, wire type) in a message's spans;
/// the other fields are skipped.
fn last_fields<const N: usize>(
    buf: &[u8],
    spans: Spans,
    s: &Scratch,
    fields: [(u32, u8); N],
    depth: usize,
) -> R<[Option<(usize, usize)>; N]> {
    let mut found = [None; N];
    let mut read = |(start, end): (usize, usize)| -> R<()> {
        let mut c = Cur { buf, pos: start, end };
        while c.pos < c.end {
            let (number, wire) = c.key()?;
            match fields.iter().position(|(n, _)| *n == number) {
                Some(j) if wire != fields[j].1 => {
                    return Err(fail(c.pos, format!("field {number}: wire type {wire}, expected {}", fields[j].1)));
                }
                Some(j) => found[j] = Some(c.value(number, wire, depth)?),
                None => drop(c.value(number, wire, depth)?),
            }
        }
        Ok(())
    };
    match spans {
        Spans::One(a, b) => read((a, b))?,
        Spans::Run(lo, hi) => {
            for o in &s.occ[lo..hi] {
                read((o.start as usize, o.end as usize))?;
            }
        }
    }
    Ok(found)
}

/// Appends a map from its entries `occ[lo..hi]`: sorted by key, the last of a key kept.
fn put_map(
    key: &Node,
    value: &Node,
    buf: &[u8],
    (lo, hi): (usize, usize),
    s: &mut Scratch,
    depth: usize,
    col: &mut Column,
) -> R<()> {
    let Column::Map(map) = col else { return Err(mismatch(lo, s, "map")) };
    let (occ_base, entries) = (s.occ.len(), s.entries.len());
    for i in lo..hi {
        let o = s.occ[i];
        let mut c = Cur { buf, pos: o.start as usize, end: o.end as usize };
        let (mut k, values) = (None, s.occ.len());
        while c.pos < c.end {
            let (number, wire) = c.key()?;
            let expected = match number {
                1 => wire_of(key),
                2 => wire_of(value),
                _ => {
                    c.value(number, wire, depth)?;
                    continue;
                }
            };
            if wire != expected {
                return Err(fail(c.pos, format!("map entry field {number}: wire type {wire}, expected {expected}")));
            }
            let (a, b) = c.value(number, wire, depth)?;
            if number == 1 {
                k = Some((a, b));
            } else {
                s.occ.push(Occ { slot: 0, seq: 0, start: a as u32, end: b as u32, wire });
            }
        }
        let k = match (k, key) {
            (None, Node::String) => Key::Str(0, 0),
            (Some((a, b)), Node::String) => {
                utf8_at(&buf[a..b]).map_err(|at| fail(a + at, "map key is not UTF-8"))?;
                Key::Str(a as u32, b as u32)
            }
            (None, Node::Bool) => Key::Bool(false),
            (None, Node::ULong(_) | Node::UInt(_)) => Key::UInt(0),
            (None, _) => Key::Int(0),
            (Some((a, b)), _) => match scalar(key, &mut Cur { buf, pos: a, end: b })? {
                Scalar::Bool(v) => Key::Bool(v),
                Scalar::Int(v) => Key::Int(v),
                Scalar::UInt(v) => Key::UInt(v),
                Scalar::Float(_) | Scalar::Double(_) => return Err(fail(a, "internal: a floating-point map key")),
            },
        };
        s.entries.push(Entry { key: k, seq: i as u32, values: (values as u32, s.occ.len() as u32) });
    }
    let compare = |a: &Key, b: &Key| match (a, b) {
        (Key::Bool(x), Key::Bool(y)) => x.cmp(y),
        (Key::Int(x), Key::Int(y)) => x.cmp(y),
        (Key::UInt(x), Key::UInt(y)) => x.cmp(y),
        (Key::Str(a, b), Key::Str(c, d)) => buf[*a as usize..*b as usize].cmp(&buf[*c as usize..*d as usize]),
        _ => Ordering::Equal,
    };
    s.entries[entries..].sort_unstable_by(|a, b| compare(&a.key, &b.key).then(a.seq.cmp(&b.seq)));
    let end = s.entries.len();
    let mut n = 0;
    for j in entries..end {
        let e = s.entries[j];
        if j + 1 < end && compare(&e.key, &s.entries[j + 1].key) == Ordering::Equal {
            continue;
        }
        let at = s.occ[lo].start as usize;
        let put_key = match (e.key, &mut *map.keys) {
            (Key::Bool(v), Column::Boolean(x)) => {
                x.append_value(v);
                Ok(())
            }
            (Key::UInt(v), Column::Decimal(x)) => {
                x.append_value(i128::from(v));
                Ok(())
            }
            (Key::UInt(v), col) => put_long(col, v as i64),
            (Key::Int(v), col) => put_long(col, v),
            (Key::Str(a, b), Column::String(x)) => {
                x.append_value(utf8(&buf[a as usize..b as usize]).expect("checked above"));
                Ok(())
            }
            // A string into a binary column, as for other string fields.
            (Key::Str(a, b), Column::Binary(x)) => {
                x.append_value(&buf[a as usize..b as usize]);
                Ok(())
            }
            _ => Err(super::plan::mismatch("map key")),
        };
        put_key.map_err(|e| fail(at, e))?;
        let (a, b) = (e.values.0 as usize, e.values.1 as usize);
        if a == b {
            put_default(value, buf, s, depth, &mut map.values)?;
        } else if let (Node::Message(plan), true) = (value, b - a == 1) {
            let o = s.occ[a];
            put_single_message(value, plan, buf, (o.start as usize, o.end as usize), s, depth, &mut map.values)?;
        } else if is_message(value) {
            put_one(value, buf, Spans::Run(a, b), s, depth, &mut map.values)?;
        } else {
            let last = s.occ[b - 1];
            put_one(value, buf, Spans::One(last.start as usize, last.end as usize), s, depth, &mut map.values)?;
        }
        n += 1;
    }
    map.close(n);
    s.entries.truncate(entries);
    s.occ.truncate(occ_base);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use arrow_array::{Array, ArrayRef};
    use arrow_schema::Fields;
    use prost_reflect::prost::Message;
    use prost_reflect::{DynamicMessage, FileDescriptor, Kind, MapKey, MessageDescriptor, Value};

    use super::*;
    use crate::formats::protobuf::{compile_message, parse_proto, to_payload_type};
    use crate::schema::PayloadType;

    /// The reference: prost-reflect decodes the payload into a `DynamicMessage`, which is
    /// walked into the columns (how Floe decoded Protobuf before the streaming decoder).
    mod reference {
        use prost_reflect::{DynamicMessage, Value};

        use super::super::super::plan::{MessagePlan, Node, R, mismatch, put_double, put_long, timestamp_value};
        use crate::columns::Column;

        pub fn message(plan: &MessagePlan, m: &DynamicMessage, children: &mut [Column]) -> R<()> {
            write_message(plan, m, Some(children))
        }

        /// Microseconds or nanoseconds since the epoch of a google.protobuf.Timestamp.
        fn timestamp(m: &DynamicMessage, nanos_unit: bool) -> R<i64> {
            match (m.get_field_by_name("seconds").as_deref(), m.get_field_by_name("nanos").as_deref()) {
                (Some(Value::I64(s)), Some(Value::I32(n))) => timestamp_value(*s, *n, nanos_unit),
                _ => Err(mismatch("timestamp")),
            }
        }

        /// Writes one value of `node` to `col` (or only checks it when `None`).
        fn write(node: &Node, v: &Value, col: Option<&mut Column>) -> R<()> {
            match (node, v) {
                (Node::Bool, Value::Bool(b)) => match col {
                    Some(Column::Boolean(x)) => x.append_value(*b),
                    Some(_) => return Err(mismatch("bool")),
                    None => {}
                },
                (Node::Int(_), Value::I32(i)) => {
                    if let Some(c) = col {
                        put_long(c, (*i).into())?;
                    }
                }
                (Node::Long(_), Value::I64(i)) => {
                    if let Some(c) = col {
                        put_long(c, *i)?;
                    }
                }
                (Node::UInt(_), Value::U32(u)) => {
                    if let Some(c) = col {
                        put_long(c, (*u).into())?;
                    }
                }
                (Node::ULong(_), Value::U64(u)) => match col {
                    Some(Column::Decimal(x)) => x.append_value((*u).into()),
                    Some(_) => return Err(mismatch("uint64")),
                    None => {}
                },
                (Node::Float, Value::F32(f)) => {
                    if let Some(c) = col {
                        put_double(c, (*f).into())?;
                    }
                }
                (Node::Double, Value::F64(f)) => {
                    if let Some(c) = col {
                        put_double(c, *f)?;
                    }
                }
                (Node::String, Value::String(s)) => match col {
                    Some(Column::String(x)) => x.append_value(s),
                    Some(Column::Binary(x)) => x.append_value(s.as_bytes()),
                    Some(_) => return Err(mismatch("string")),
                    None => {}
                },
                (Node::Bytes, Value::Bytes(b)) => match col {
                    Some(Column::Binary(x)) => x.append_value(b),
                    Some(_) => return Err(mismatch("bytes")),
                    None => {}
                },
                (Node::Enum(e), Value::EnumNumber(n)) => match col {
                    Some(Column::String(x)) => match e.descriptor.get_value(*n) {
                        Some(symbol) => x.append_value(symbol.name()),
                        None => x.append_value(n.to_string()),
                    },
                    Some(_) => return Err(mismatch("enum")),
                    None => {}
                },
                (Node::Timestamp, Value::Message(m)) => match col {
                    Some(Column::TimestampMicros(x)) => x.append_value(timestamp(m, false)?),
                    Some(Column::TimestampNanos(x)) => x.append_value(timestamp(m, true)?),
                    Some(_) => return Err(mismatch("timestamp")),
                    None => {
                        timestamp(m, false)?;
                    }
                },
                (Node::Wrapper(inner), Value::Message(m)) => {
                    let value = m.get_field_by_name("value").ok_or_else(|| mismatch("wrapper"))?;
                    write(inner, &value, col)?;
                }
                (Node::Message(plan), Value::Message(m)) => match col {
                    Some(Column::Struct(s)) => {
                        s.append_valid();
                        write_message(plan, m, Some(s.children.as_mut_slice()))?;
                    }
                    Some(_) => return Err(mismatch("message")),
                    None => write_message(plan, m, None)?,
                },
                (Node::List(element), Value::List(items)) => match col {
                    Some(Column::List(list)) => {
                        for item in items {
                            write(element, item, Some(&mut list.child))?;
                        }
                        list.close(items.len());
                    }
                    Some(_) => return Err(mismatch("repeated")),
                    None => {
                        for item in items {
                            write(element, item, None)?;
                        }
                    }
                },
                (Node::Map(key, value), Value::Map(entries)) => {
                    // Sorted by key: the same payload always gives the same file.
                    let mut sorted: Vec<_> = entries.iter().collect();
                    sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
                    match col {
                        Some(Column::Map(map)) => {
                            for (k, v) in &sorted {
                                write(key, &Value::from((*k).clone()), Some(&mut map.keys))?;
                                write(value, v, Some(&mut map.values))?;
                            }
                            map.close(sorted.len());
                        }
                        Some(_) => return Err(mismatch("map")),
                        None => {
                            for (k, v) in &sorted {
                                write(key, &Value::from((*k).clone()), None)?;
                                write(value, v, None)?;
                            }
                        }
                    }
                }
                (node, v) => return Err(format!("internal: {v:?} decoded for a {node:?} field")),
            }
            Ok(())
        }

        /// A message's fields into `children` (null for unset fields with presence and for table
        /// columns the message lacks).
        fn write_message(plan: &MessagePlan, m: &DynamicMessage, mut children: Option<&mut [Column]>) -> R<()> {
            for f in &plan.fields {
                let col = children.as_deref_mut().map(|c| &mut c[f.column]);
                if f.nullable && !m.has_field(&f.field) {
                    if let Some(c) = col {
                        c.append_null();
                    }
                    continue;
                }
                write(&f.node, &m.get_field(&f.field), col).map_err(|e| format!("{}: {e}", f.field.name()))?;
            }
            if let Some(cols) = children {
                for &i in &plan.missing {
                    cols[i].append_null();
                }
            }
            Ok(())
        }
    }

    const PROTO3: &str = r#"
        syntax = "proto3";
        package d;
        import "google/protobuf/timestamp.proto";
        import "google/protobuf/wrappers.proto";
        enum E { E0 = 0; E1 = 1; E2 = 2; }
        message Leaf { string x = 1; int64 y = 2; repeated sint32 z = 3; }
        message Top {
          bool b = 1; int32 i = 2; sint32 si = 3; sfixed32 sf = 4; int64 l = 5; sint64 sl = 6;
          sfixed64 sfl = 7; uint32 u = 8; uint64 ul = 9; fixed32 f32 = 10; fixed64 f64 = 11;
          float f = 12; double d = 13; string s = 14; bytes by = 15; E e = 16; Leaf leaf = 17;
          repeated int32 ri = 18; repeated double rd = 19; repeated string rs = 20;
          repeated Leaf rl = 21; repeated E re = 22; repeated uint64 ru = 23 [packed = false];
          repeated bool rb = 24;
          map<string, Leaf> ml = 25; map<int32, string> mi = 26; map<uint64, E> mu = 27;
          map<bool, google.protobuf.Timestamp> mb = 28; map<sint64, double> ms = 29;
          oneof choice { string oa = 30; int64 ob = 31; Leaf oc = 32; int32 lacking = 33; }
          google.protobuf.Timestamp ts = 34; google.protobuf.Int32Value w32 = 35;
          google.protobuf.StringValue ws = 36; google.protobuf.UInt64Value wu = 37;
          optional int32 opt = 38; optional string opts = 39; int32 skipped = 40;
        }
        // The table: Top without `lacking` and `skipped`.
        message Table {
          bool b = 1; int32 i = 2; sint32 si = 3; sfixed32 sf = 4; int64 l = 5; sint64 sl = 6;
          sfixed64 sfl = 7; uint32 u = 8; uint64 ul = 9; fixed32 f32 = 10; fixed64 f64 = 11;
          float f = 12; double d = 13; string s = 14; bytes by = 15; E e = 16; Leaf leaf = 17;
          repeated int32 ri = 18; repeated double rd = 19; repeated string rs = 20;
          repeated Leaf rl = 21; repeated E re = 22; repeated uint64 ru = 23;
          repeated bool rb = 24;
          map<string, Leaf> ml = 25; map<int32, string> mi = 26; map<uint64, E> mu = 27;
          map<bool, google.protobuf.Timestamp> mb = 28; map<sint64, double> ms = 29;
          oneof choice { string oa = 30; int64 ob = 31; Leaf oc = 32; }
          google.protobuf.Timestamp ts = 34; google.protobuf.Int32Value w32 = 35;
          google.protobuf.StringValue ws = 36; google.protobuf.UInt64Value wu = 37;
          optional int32 opt = 38; optional string opts = 39;
        }
    "#;

    const PROTO2: &str = r#"
        syntax = "proto2";
        package p;
        message P {
          optional int32 a = 1; repeated int32 r = 2; repeated int32 rp = 3 [packed = true];
          optional group G = 4 { optional string gx = 5; repeated int64 gy = 6; }
          repeated group RG = 7 { optional int32 v = 8; }
          required string req = 9; optional Sub sub = 10;
          oneof o { int32 oa = 11; string ob = 12; }
        }
        message Sub { optional bytes b = 1; repeated sfixed64 sf = 2; optional Sub2 deeper = 3; }
        message Sub2 { optional float f = 1; }
    "#;

    fn fields(m: &MessageDescriptor) -> Fields {
        let PayloadType::Record(s) = to_payload_type(m).unwrap() else { panic!("record") };
        let schema = crate::schema::plan(None, &s).unwrap().schema;
        iceberg::arrow::schema_to_arrow_schema(&schema).unwrap().fields().clone()
    }

    fn columns(fields: &Fields) -> Vec<Column> {
        fields.iter().map(|f| Column::new(f.data_type()).unwrap()).collect()
    }

    /// xorshift64*: the same payloads every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn chance(&mut self, percent: u64) -> bool {
            self.below(100) < percent
        }
        /// Small and extreme values alike.
        fn int(&mut self) -> u64 {
            match self.below(4) {
                0 => self.below(3),
                1 => self.next(),
                2 => self.next() >> self.below(64),
                _ => self.below(300).wrapping_neg(),
            }
        }
        fn text(&mut self) -> String {
            let n = self.below(6) as usize;
            (0..n).map(|_| ['a', 'b', 'é', '𝄞', 'z'][self.below(5) as usize]).collect()
        }
        fn float(&mut self) -> f64 {
            let v = f64::from_bits(self.next());
            if v.is_finite() { v } else { self.below(100) as f64 - 50.5 }
        }
    }

    fn value(kind: &Kind, rng: &mut Rng, depth: usize) -> Value {
        let i = rng.int();
        match kind {
            Kind::Bool => Value::Bool(i % 2 == 1),
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(i as i32),
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(i as i64),
            Kind::Uint32 | Kind::Fixed32 => Value::U32(i as u32),
            Kind::Uint64 | Kind::Fixed64 => Value::U64(i),
            Kind::Float => Value::F32(rng.float() as f32),
            Kind::Double => Value::F64(rng.float()),
            Kind::String => Value::String(rng.text()),
            Kind::Bytes => Value::Bytes(rng.text().into_bytes().into()),
            // Unknown numbers too (proto3 enums are open).
            Kind::Enum(_) => Value::EnumNumber(rng.below(4) as i32),
            Kind::Message(m) if m.full_name() == "google.protobuf.Timestamp" => {
                let mut ts = DynamicMessage::new(m.clone());
                ts.set_field_by_name("seconds", Value::I64(rng.below(1 << 36) as i64 - (1 << 35)));
                ts.set_field_by_name("nanos", Value::I32(rng.below(1_000_000_000) as i32));
                Value::Message(ts)
            }
            Kind::Message(m) => Value::Message(message(m, rng, depth + 1)),
        }
    }

    fn map_key(kind: &Kind, rng: &mut Rng) -> MapKey {
        // Few distinct keys, so that entries of one key repeat across merged messages.
        let i = rng.below(4);
        match kind {
            Kind::Bool => MapKey::Bool(i % 2 == 1),
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => MapKey::I32(i as i32 - 2),
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => MapKey::I64(i as i64 - 2),
            Kind::Uint32 | Kind::Fixed32 => MapKey::U32(i as u32),
            Kind::Uint64 | Kind::Fixed64 => MapKey::U64(i),
            Kind::String => MapKey::String(["", "a", "b", "é"][i as usize].into()),
            other => panic!("{other:?} is not a map key"),
        }
    }

    fn message(m: &MessageDescriptor, rng: &mut Rng, depth: usize) -> DynamicMessage {
        let mut msg = DynamicMessage::new(m.clone());
        for f in m.fields() {
            let set = f.cardinality() == prost_reflect::Cardinality::Required || (depth < 3 && rng.chance(60));
            if !set {
                continue;
            }
            let v = if f.is_map() {
                let Kind::Message(entry) = f.kind() else { unreachable!() };
                let (k, v) = (entry.map_entry_key_field().kind(), entry.map_entry_value_field().kind());
                let n = rng.below(4);
                Value::Map((0..n).map(|_| (map_key(&k, rng), value(&v, rng, depth))).collect::<HashMap<_, _>>())
            } else if f.is_list() {
                Value::List((0..rng.below(4)).map(|_| value(&f.kind(), rng, depth)).collect())
            } else {
                value(&f.kind(), rng, depth)
            };
            msg.set_field(&f, v);
        }
        msg
    }

    /// Random payloads of `payload` decoded against `table`'s columns both ways: the
    /// same columns. Two thirds of the payloads are two or three messages back to back,
    /// which the wire format reads as one merged message (the last scalar wins, messages
    /// merge, a later oneof member unsets an earlier one, lists and maps append). Floe
    /// decodes each payload twice: trying the in-order path first (which gives most
    /// merged payloads back, half-written), and by the two passes alone.
    fn same_as_the_reference(proto: &str, payload: &str, table: &str, seed: u64) {
        let file: FileDescriptor = parse_proto(proto).unwrap();
        let payload = file.parent_pool().get_message_by_name(payload).unwrap();
        let table = fields(&file.parent_pool().get_message_by_name(table).unwrap());
        let plan = compile_message(&payload, &table, 0).unwrap();
        let (mut expected, mut got, mut two) = (columns(&table), columns(&table), columns(&table));
        let (mut two_passes, mut given_back) = (Scratch::two_passes_only(), 0);
        let mut rng = Rng(seed);
        for _ in 0..2000 {
            let mut bytes = message(&payload, &mut rng, 0).encode_to_vec();
            for _ in 0..rng.below(3) {
                bytes.extend(message(&payload, &mut rng, 0).encode_to_vec());
            }
            let reference = DynamicMessage::decode(payload.clone(), bytes.as_slice()).unwrap();
            reference::message(&plan, &reference, &mut expected).unwrap();
            let mut fresh = Scratch::default();
            decode(&plan, &bytes, &mut fresh, &mut got).unwrap_or_else(|f| panic!("{f:?} in {bytes:?}"));
            // A message value given back on its own counts too: payloads, not give-backs.
            given_back += u32::from(fresh.given_back > 0);
            decode(&plan, &bytes, &mut two_passes, &mut two).unwrap_or_else(|f| panic!("{f:?} in {bytes:?}"));
        }
        assert!((500..1500).contains(&given_back), "{given_back} of 2000 payloads given back");
        assert_eq!(two_passes.given_back, RECOUNT, "the two passes alone");
        for (((e, g), t), f) in expected.iter_mut().zip(&mut got).zip(&mut two).zip(table.iter()) {
            let (e, g, t): (ArrayRef, ArrayRef, ArrayRef) = (e.finish(), g.finish(), t.finish());
            assert_eq!(e.len(), 2000, "{}", f.name());
            assert_eq!(&e, &g, "column {}", f.name());
            assert_eq!(&e, &t, "column {} (two passes)", f.name());
        }
    }

    #[test]
    fn payloads_out_of_order_are_given_back_and_decode_as_the_reference_does() {
        let (top, (plan, table)) = (top_message(), self::top());
        // (payload, given back by the in-order path: the payload, or a map's message value
        // on its own)
        let cases: [(&[u8], bool); 18] = [
            // oa (30) then ob (31): the second member of a oneof.
            (&[0xf2, 0x01, 1, b'a', 0xf8, 0x01, 5], true),
            // lacking (33, not in the table) then ob, and oa then lacking.
            (&[0x88, 0x02, 1, 0xf8, 0x01, 5], true),
            (&[0xf2, 0x01, 1, b'a', 0x88, 0x02, 1], true),
            // i (2) twice: the last wins.
            (&[0x10, 1, 0x10, 2], true),
            // leaf (17) twice: merged.
            (&[0x8a, 0x01, 2, 0x10, 1, 0x8a, 0x01, 3, 0x0a, 1, b'x'], true),
            // ri (18), rs (20), ri again: one list from two runs.
            (&[0x90, 0x01, 1, 0xa2, 0x01, 1, b'q', 0x90, 0x01, 2], true),
            // mi (26), mu (27), mi again: one map.
            (
                &[
                    0xd2, 0x01, 5, 0x08, 1, 0x12, 1, b'a', 0xda, 0x01, 4, 0x08, 3, 0x10, 1, 0xd2, 0x01, 5, 0x08, 2,
                    0x12, 1, b'b',
                ],
                true,
            ),
            // s (14) before i (2); and inside leaf, y (2) before x (1).
            (&[0x72, 1, b's', 0x10, 7], true),
            (&[0x8a, 0x01, 5, 0x10, 1, 0x0a, 1, b'x'], true),
            // ts (34): nanos before seconds; w32 (35): its value, then an unknown field.
            (&[0x92, 0x02, 4, 0x10, 5, 0x08, 7], true),
            (&[0x9a, 0x02, 4, 0x08, 3, 0x10, 1], true),
            // ts with its nanos alone, w32 empty (its default, 0).
            (&[0x92, 0x02, 2, 0x10, 5], false),
            (&[0x9a, 0x02, 0], false),
            // In order: i, s, ri packed then one more, mi's entries (written sorted), ob,
            // skipped (40, not in the table) and an unknown field (99).
            (
                &[
                    0x10, 7, 0x72, 1, b's', 0x92, 0x01, 2, 1, 2, 0x90, 0x01, 3, 0xd2, 0x01, 5, 0x08, 2, 0x12, 1, b'b',
                    0xd2, 0x01, 5, 0x08, 1, 0x12, 1, b'a', 0xf8, 0x01, 5, 0xc0, 0x02, 1, 0x98, 0x06, 1,
                ],
                false,
            ),
            (&[], false),
            // A map's message value (ml, 25: key "a", a Leaf) is given back on its own:
            // y (2) before x (1), then mi (26) read in order; z (3, a list) written, then
            // x. And a value in order.
            (
                &[
                    0xca, 0x01, 10, 0x0a, 1, b'a', 0x12, 5, 0x10, 1, 0x0a, 1, b'x', 0xd2, 0x01, 5, 0x08, 1, 0x12, 1,
                    b'a',
                ],
                true,
            ),
            (&[0xca, 0x01, 11, 0x0a, 1, b'a', 0x12, 6, 0x1a, 1, 2, 0x0a, 1, b'x'], true),
            (&[0xca, 0x01, 10, 0x0a, 1, b'a', 0x12, 5, 0x0a, 1, b'x', 0x10, 1], false),
        ];
        for (body, given_back) in cases {
            let (mut expected, mut got, mut scratch) = (columns(&table), columns(&table), Scratch::default());
            let reference = DynamicMessage::decode(top.clone(), body).unwrap();
            reference::message(&plan, &reference, &mut expected).unwrap();
            decode(&plan, body, &mut scratch, &mut got).unwrap();
            assert_eq!(scratch.given_back == 1, given_back, "{body:?}");
            for ((e, g), f) in expected.iter_mut().zip(&mut got).zip(table.iter()) {
                let (e, g): (ArrayRef, ArrayRef) = (e.finish(), g.finish());
                assert_eq!(&e, &g, "column {} of {body:?}", f.name());
            }
        }
    }

    #[test]
    fn damaged_payloads_through_the_in_order_path_are_errors_and_leave_the_columns_consistent() {
        let (top, (plan, table)) = (top_message(), self::top());
        let mut rng = Rng(0xdead);
        let payloads: Vec<Vec<u8>> = (0..50).map(|_| message(&top, &mut rng, 0).encode_to_vec()).collect();
        let mut root = crate::columns::StructColumn::new(&table).unwrap();
        // A fresh scratch for each payload: the in-order path is tried on every one.
        let (ok, failed) = crate::columns::damage::decode_damaged(&mut root, &payloads, 0x5eed, 10_000, |p, cols| {
            decode(&plan, p, &mut Scratch::default(), cols).map_err(|f| crate::columns::DecodeError {
                part: "value",
                position: f.at,
                detail: f.detail,
                missing_schema: None,
                deletes_key: false,
            })
        });
        assert!(ok > 1000 && failed > 1000, "{ok} decoded, {failed} failed");
    }

    #[test]
    fn slots_are_found_from_any_hint_as_a_search_finds_them() {
        let (plan, _) = top();
        let numbers: Vec<u32> = plan.slots.iter().map(|(n, _)| *n).collect();
        for hint in 0..=numbers.len() + 1 {
            for number in 0..=numbers.last().unwrap() + 2 {
                let mut h = hint;
                let found = slot_of(&plan, number, &mut h).map(|s| (s.field, s.oneof));
                let expected = numbers.binary_search(&number).ok();
                let slot = expected.map(|i| (plan.slots[i].1.field, plan.slots[i].1.oneof));
                assert_eq!(found, slot, "field {number} from hint {hint}");
                assert_eq!(h, expected.map_or(hint, |i| i + 1), "hint after field {number} from hint {hint}");
            }
        }
    }

    #[test]
    fn a_decoder_whose_payloads_are_given_back_tries_the_in_order_path_on_one_in_32() {
        let mut s = Scratch::default();
        let mut tried = 0;
        for _ in 0..3200 {
            if s.in_order_pays() {
                tried += 1;
                s.given_back += 1;
            }
        }
        assert!((100..=101).contains(&tried), "{tried}");
        // Counted afresh: a decoder whose producers changed tries every payload again.
        while s.payloads < RECOUNT {
            s.in_order_pays();
        }
        assert!(s.in_order_pays() && s.in_order_pays());
    }

    #[test]
    fn proto3_payloads_decode_as_the_reference_decodes_them() {
        same_as_the_reference(PROTO3, "d.Top", "d.Table", 0x5eed);
    }

    #[test]
    fn proto2_payloads_with_groups_decode_as_the_reference_decodes_them() {
        same_as_the_reference(PROTO2, "p.P", "p.P", 0xfeed);
    }

    fn top_message() -> MessageDescriptor {
        parse_proto(PROTO3).unwrap().parent_pool().get_message_by_name("d.Top").unwrap()
    }

    fn top() -> (MessagePlan, Fields) {
        let file = parse_proto(PROTO3).unwrap();
        let table = fields(&file.parent_pool().get_message_by_name("d.Table").unwrap());
        let plan = compile_message(&file.parent_pool().get_message_by_name("d.Top").unwrap(), &table, 0).unwrap();
        (plan, table)
    }

    fn column(fields: &Fields, columns: &mut [Column], name: &str) -> ArrayRef {
        columns[fields.find(name).unwrap().0].finish()
    }

    #[test]
    fn packed_and_unpacked_runs_of_one_repeated_field_mix() {
        let (plan, table) = top();
        let mut cols = columns(&table);
        // ri (18): packed [1, 2], then 3 alone, then packed [4].
        let body = [0x92, 0x01, 2, 1, 2, 0x90, 0x01, 3, 0x92, 0x01, 1, 4];
        decode(&plan, &body, &mut Scratch::default(), &mut cols).unwrap();
        let ri = column(&table, &mut cols, "ri");
        let list = ri.as_any().downcast_ref::<arrow_array::ListArray>().unwrap().value(0);
        let values = list.as_any().downcast_ref::<arrow_array::Int32Array>().unwrap();
        assert_eq!(values.values().to_vec(), vec![1, 2, 3, 4]);
    }

    #[test]
    fn string_map_keys_go_into_a_binary_key_column_too() {
        use arrow_array::cast::AsArray;
        use arrow_schema::{DataType, Field};
        use std::sync::Arc;
        let file = parse_proto("syntax = \"proto3\"; message K { map<string, int32> m = 1; }").unwrap();
        let key = Arc::new(Field::new("key", DataType::LargeBinary, false));
        let value = Arc::new(Field::new("value", DataType::Int32, false));
        let entries = Arc::new(Field::new("key_value", DataType::Struct(vec![key, value].into()), false));
        let table: Fields = vec![Field::new("m", DataType::Map(entries, false), true)].into();
        let plan = compile_message(&file.parent_pool().get_message_by_name("K").unwrap(), &table, 0).unwrap();
        let mut cols = columns(&table);
        // m: the entries {"b": 2} and {"a": 1}, written sorted by key.
        let body = [0x0a, 5, 0x0a, 1, b'b', 0x10, 2, 0x0a, 5, 0x0a, 1, b'a', 0x10, 1];
        decode(&plan, &body, &mut Scratch::default(), &mut cols).unwrap();
        let m = column(&table, &mut cols, "m");
        let keys = m.as_map().keys().as_binary::<i64>().iter().map(Option::unwrap).collect::<Vec<_>>();
        assert_eq!(keys, [&b"a"[..], &b"b"[..]]);
    }

    #[test]
    fn message_values_inside_a_value_read_again_are_not_tried_in_order_again() {
        let proto = r#"
            syntax = "proto3"; package n;
            message In { string x = 1; int64 y = 2; }
            message Mid { map<string, In> inner = 1; int64 k = 2; }
            message Out { map<string, Mid> outer = 1; }
        "#;
        let file = parse_proto(proto).unwrap();
        let out = file.parent_pool().get_message_by_name("n.Out").unwrap();
        let table = fields(&out);
        let plan = compile_message(&out, &table, 0).unwrap();
        // outer {"a": Mid}: Mid's inner {"b": In with y before x} (given back on its own),
        // then k, then inner again {"c": In in order} (Mid given back: inner in two runs).
        let mid = [
            &[0x0a, 10, 0x0a, 1, b'b', 0x12, 5, 0x10, 1, 0x0a, 1, b'x'][..],
            &[0x10, 5],
            &[0x0a, 8, 0x0a, 1, b'c', 0x12, 3, 0x0a, 1, b'z'],
        ]
        .concat();
        let entry = [&[0x0a, 1, b'a', 0x12, mid.len() as u8][..], &mid].concat();
        let body = [&[0x0a, entry.len() as u8][..], &entry].concat();
        let (mut expected, mut got) = (columns(&table), columns(&table));
        let reference = DynamicMessage::decode(out.clone(), body.as_slice()).unwrap();
        reference::message(&plan, &reference, &mut expected).unwrap();
        // A decoder with a long clean record, which may try the in-order path often.
        let mut s = Scratch { payloads: 1000, ..Scratch::default() };
        decode(&plan, &body, &mut s, &mut got).unwrap();
        // In ("b") once and Mid once: Mid's two passes do not try In ("b") again.
        assert_eq!(s.given_back, 2);
        for ((e, g), f) in expected.iter_mut().zip(&mut got).zip(table.iter()) {
            let (e, g): (ArrayRef, ArrayRef) = (e.finish(), g.finish());
            assert_eq!(&e, &g, "column {}", f.name());
        }
    }

    #[test]
    fn bad_wire_data_is_an_error_naming_the_field_and_byte() {
        let (plan, table) = top();
        let cases: [(&[u8], usize, &str); 7] = [
            // i (2) as a length-delimited value.
            (&[0x12, 1, 0], 1, "i: wire type 2, expected 0"),
            // s (14): 0xff is not UTF-8, at byte 3.
            (&[0x72, 2, b'a', 0xff], 3, "s: string is not UTF-8"),
            // l (5): a varint cut short.
            (&[0x28, 0x80], 1, "l: varint cut short"),
            // leaf (17) claims 5 bytes, 1 is there.
            (&[0x8a, 0x01, 5, 0], 3, "leaf: 5 bytes needed, 1 left"),
            // leaf.x: 0xc3 opens a two-byte character the payload cuts.
            (&[0x8a, 0x01, 3, 0x0a, 1, 0xc3], 5, "leaf: x: string is not UTF-8"),
            // Field number 0, and an unknown field's end-group tag that closes nothing.
            (&[0x00], 0, "field number 0"),
            (&[0x9c, 0x06], 2, "end-group tag of field 99 without its start"),
        ];
        for (body, at, detail) in cases {
            let mut cols = columns(&table);
            let f = decode(&plan, body, &mut Scratch::default(), &mut cols).unwrap_err();
            assert_eq!((f.at, f.detail.as_str()), (at, detail), "{body:?}");
        }
        // Unknown groups nested past the bound: an error, not a stack overflow.
        let mut deep = [0x9b, 0x06].repeat(MAX_DEPTH + 1); // group 99, start
        deep.extend([0x9c, 0x06].repeat(MAX_DEPTH + 1));
        let f = decode(&plan, &deep, &mut Scratch::default(), &mut columns(&table)).unwrap_err();
        assert!(f.detail.contains("nested more than 100 levels"), "{}", f.detail);
    }

    #[test]
    fn a_failed_payload_keeps_nothing_in_the_scratch_lists_for_the_next() {
        let (plan, table) = top();
        let mut scratch = Scratch::default();
        let mut root = crate::columns::StructColumn::new(&table).unwrap();
        root.append_valid();
        assert!(decode(&plan, &[0x90, 0x01, 7, 0x12, 1, 0], &mut scratch, &mut root.children).is_err());
        root.repair();
        let good = [0x90, 0x01, 9];
        root.append_valid();
        decode(&plan, &good, &mut scratch, &mut root.children).unwrap();
        let s = root.finish();
        let ri = s.column_by_name("ri").unwrap().as_any().downcast_ref::<arrow_array::ListArray>().unwrap().value(1);
        assert_eq!(ri.as_any().downcast_ref::<arrow_array::Int32Array>().unwrap().values().to_vec(), vec![9]);
    }
}
