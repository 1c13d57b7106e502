#!/usr/bin/env python3
"""Builds Kafka log segments with an independent encoder (kafka-python's record batch
builders) and writes, next to each, what a correct decoder must report.

    make_segments.py OUT_DIR

Writes OUT_DIR/cases.json: a list of cases, each with
  log          path of the segment (broker log-dir layout <topic>-<partition>/<offset>.log)
  txn_index    path of a .txnindex, or null
  expected     path of a JSON-lines file: the committed records, in offset order, in the
               exact shape `floe inspect` prints
  summary      counts the decoder must report (records, aborted_records, open_records,
               control_records, first_offset, last_offset, open_transactions, markers)
  error        for cases that must fail: a substring of the error, else null
  limits       optional decoder limits for the case

Things a broker does after the producer (base offsets, log-append time, control
batches) are applied to the built bytes the way the broker does, CRCs recomputed.
"""
import base64
import json
import os
import random
import struct
import sys
import zlib

import cramjam  # also kafka-python's snappy/zstd backend
import zstandard
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.util import calc_crc32c

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
T0 = 1764000000000
rng = random.Random(20261130)


def b64(b):
    return None if b is None else base64.b64encode(b).decode()


def expect(offset, ts, ts_type, key, value, headers=()):
    return {
        "offset": offset,
        "timestamp": ts,
        "timestamp_type": ts_type,
        "key": b64(key),
        "value": b64(value),
        "headers": [{"key": k, "value": b64(v)} for k, v in headers],
    }


# ---- magic v2 ---------------------------------------------------------------

def v2_batch(base_offset, records, codec="none", txn=False, pid=-1, epoch=-1, log_append_ts=None,
             control=False):
    """records: list of (timestamp, key, value, headers). Returns (bytes, expected)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=CODECS[codec], is_transactional=txn,
                                  producer_id=pid, producer_epoch=epoch,
                                  base_sequence=0 if pid >= 0 else -1, batch_size=1 << 30)
    for i, (ts, key, value, headers) in enumerate(records):
        assert b.append(i, timestamp=ts, key=key, value=value, headers=list(headers)) is not None
    buf = bytearray(b.build())
    struct.pack_into(">q", buf, 0, base_offset)
    attrs = struct.unpack_from(">h", buf, 21)[0]
    if log_append_ts is not None:
        attrs |= 0x08
        struct.pack_into(">q", buf, 35, log_append_ts)  # maxTimestamp := broker time
    if control:
        attrs |= 0x20
    struct.pack_into(">h", buf, 21, attrs)
    struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    if control:
        return bytes(buf), []
    exp = []
    for i, (ts, key, value, headers) in enumerate(records):
        if log_append_ts is not None:
            exp.append(expect(base_offset + i, log_append_ts, "log_append", key, value, headers))
        else:
            exp.append(expect(base_offset + i, ts, "create", key, value, headers))
    return bytes(buf), exp


def marker(offset, pid, epoch, commit):
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 7)  # version, coordinator epoch
    data, _ = v2_batch(offset, [(T0, key, value, [])], txn=True, pid=pid, epoch=epoch, control=True)
    return data


def random_records(n, ts, null_every=5, headers=True):
    out = []
    for i in range(n):
        key = None if i % null_every == 1 else ("key-%d" % rng.randrange(1000)).encode()
        value = None if i % null_every == 3 else os.urandom(rng.randrange(0, 64)) + b"value" * rng.randrange(1, 20)
        hs = []
        if headers and i % 2 == 0:
            hs = [("trace-id", os.urandom(8)), ("nullable", None), ("ünï", b"\x00\xff")]
        out.append((ts + i * 3 - (i % 4), key, value, hs))
    return out


# ---- legacy v0/v1 -----------------------------------------------------------

def legacy_set(magic, base_offset, records, codec="none", log_append_ts=None):
    """records: list of (timestamp, key, value). One wrapper when compressed."""
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=CODECS[codec], batch_size=1 << 30)
    relative = magic >= 1 and codec != "none"
    for i, (ts, key, value) in enumerate(records):
        b.append(i if relative else base_offset + i, timestamp=ts, key=key, value=value)
    buf = bytearray(b.build())
    last = base_offset + len(records) - 1
    if codec != "none":
        struct.pack_into(">q", buf, 0, last)  # the wrapper carries the last inner offset
        if magic == 1 and log_append_ts is not None:
            buf[17] |= 0x08
            struct.pack_into(">q", buf, 18, log_append_ts)
            struct.pack_into(">I", buf, 12, zlib.crc32(bytes(buf[16:])) & 0xFFFFFFFF)
    exp = []
    for i, (ts, key, value) in enumerate(records):
        if magic == 0:
            exp.append(expect(base_offset + i, -1, "create", key, value))
        elif log_append_ts is not None:
            exp.append(expect(base_offset + i, log_append_ts, "log_append", key, value))
        else:
            exp.append(expect(base_offset + i, ts, "create", key, value))
    return bytes(buf), exp


def legacy_records(n, ts):
    return [(ts + i, None if i % 3 == 0 else b"k%d" % i, None if i % 4 == 2 else b"legacy-%d" % i * 3)
            for i in range(n)]


# ---- cases ------------------------------------------------------------------

class Out:
    def __init__(self, root):
        self.root = root
        self.cases = []

    def case(self, name, parts, expected, summary, topic="floe-test.events", partition=0,
             txn_index=None, error=None, limits=None, base=0):
        d = os.path.join(self.root, name, "%s-%d" % (topic, partition))
        os.makedirs(d, exist_ok=True)
        log = os.path.join(d, "%020d.log" % base)
        with open(log, "wb") as f:
            f.write(b"".join(parts))
        idx = None
        if txn_index is not None:
            idx = log[:-4] + ".txnindex"
            with open(idx, "wb") as f:
                for (pid, first, last) in txn_index:
                    f.write(struct.pack(">hqqqq", 0, pid, first, last, 0))
        exp = os.path.join(self.root, name + ".expected.jsonl")
        with open(exp, "w") as f:
            for r in expected:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        self.cases.append({"name": name, "log": log, "txn_index": idx, "expected": exp,
                           "summary": summary, "error": error, "limits": limits})

    def write(self):
        with open(os.path.join(self.root, "cases.json"), "w") as f:
            json.dump(self.cases, f, indent=1)


def plain_summary(expected, first, last, **extra):
    s = {"records": len(expected), "aborted_records": 0, "open_records": 0, "control_records": 0,
         "first_offset": first, "last_offset": last, "open_transactions": [], "markers": []}
    s.update(extra)
    return s


def build(root):
    out = Out(root)

    # Every codec, v2: several batches, headers, null keys and values.
    for codec in CODECS:
        parts, exp, off = [], [], 0
        for n in (1, 17, 40, 3):
            data, e = v2_batch(off, random_records(n, T0 + off), codec=codec)
            parts.append(data)
            exp += e
            off += n
        out.case("v2_" + codec, parts, exp, plain_summary(exp, 0, off - 1))

    # Raw (non-xerial) snappy blocks, as librdkafka writes them.
    data, e = v2_batch(0, random_records(25, T0), codec="none")
    out.case("v2_snappy_raw", [recompressed(data, "snappy_raw")], e, plain_summary(e, 0, 24))

    # zstd frames that do not state their size, as Java clients stream them.
    parts, exp, off = [], [], 0
    for n in (1, 30, 200):
        data, e = v2_batch(off, random_records(n, T0 + off), codec="none")
        parts.append(recompressed(data, "zstd_streamed"))
        exp += e
        off += n
    out.case("v2_zstd_streamed", parts, exp, plain_summary(exp, 0, off - 1))

    # Log-append time: every record carries the batch's max timestamp.
    parts, exp = [], []
    for i, codec in enumerate(["none", "lz4"]):
        data, e = v2_batch(i * 10, random_records(10, T0), codec=codec, log_append_ts=T0 + 99_000 + i)
        parts.append(data)
        exp += e
    out.case("v2_log_append", parts, exp, plain_summary(exp, 0, 19))

    # Non-zero base offset in the file name, broker-style.
    data, e = v2_batch(1_000_000, random_records(5, T0), codec="zstd")
    out.case("v2_base_offset", [data], e, plain_summary(e, 1_000_000, 1_000_004), base=1_000_000)

    # A segment crossing many read buffers: ~3 MB in 60 batches.
    parts, exp, off = [], [], 0
    for i in range(60):
        recs = [(T0 + off + j, b"k", os.urandom(1000), []) for j in range(50)]
        data, e = v2_batch(off, recs, codec=["none", "zstd"][i % 2])
        parts.append(data)
        exp += e
        off += 50
    out.case("v2_large", parts, exp, plain_summary(exp, 0, off - 1))

    # Transactions: interleaved producers, committed / aborted / open; a marker for a
    # transaction begun in an earlier segment.
    parts, exp = [], []
    P, Q, R, S = 1000, 2000, 3000, 4000

    def add(batch):
        data, e = batch
        parts.append(data)
        return e

    def recs(n, tag):
        return [(T0 + i, b"%s-%d" % (tag, i), b"payload-%s-%d" % (tag, i), [("txn", tag)]) for i in range(n)]

    exp += add(v2_batch(0, recs(3, b"plain0")))                               # 0-2 plain
    committed = add(v2_batch(3, recs(4, b"P1"), codec="gzip", txn=True, pid=P, epoch=1))   # 3-6 P txn1
    aborted = add(v2_batch(7, recs(2, b"Q1"), txn=True, pid=Q, epoch=0))           # 7-8 Q txn1
    committed += add(v2_batch(9, recs(3, b"P1b"), codec="snappy", txn=True, pid=P, epoch=1))  # 9-11 P txn1
    parts.append(marker(12, S, 5, True))                                      # 12 S commit (earlier segment)
    exp_plain = add(v2_batch(13, recs(2, b"plain1"), codec="lz4"))           # 13-14 plain
    parts.append(marker(15, Q, 0, False))                                     # 15 Q abort
    parts.append(marker(16, P, 1, True))                                      # 16 P commit
    aborted += add(v2_batch(17, recs(5, b"P2"), codec="zstd", txn=True, pid=P, epoch=1))  # 17-21 P txn2
    parts.append(marker(22, P, 1, False))                                     # 22 P abort
    exp_q2 = add(v2_batch(23, recs(2, b"Q2"), txn=True, pid=Q, epoch=0))     # 23-24 Q txn2 committed
    open_r = add(v2_batch(25, recs(3, b"R1"), txn=True, pid=R, epoch=2))     # 25-27 R open
    parts.append(marker(28, Q, 0, True))                                      # 28 Q commit
    exp_tail = add(v2_batch(29, recs(1, b"plain2")))                          # 29 plain
    open_r += add(v2_batch(30, recs(2, b"R1b"), codec="gzip", txn=True, pid=R, epoch=2))  # 30-31 R open
    exp = sorted(exp + committed + exp_plain + exp_q2 + exp_tail, key=lambda r: r["offset"])
    txn_summary = {
        "records": len(exp), "aborted_records": len(aborted), "open_records": len(open_r),
        "control_records": 5, "first_offset": 0, "last_offset": 31,
        # Records' timestamps as the producer set them (CreateTime); a marker's is its
        # control batch's, the broker's clock (T0 here).
        "open_transactions": [{"producer_id": R, "producer_epoch": 2, "first_offset": 25, "last_offset": 31,
                               "batches": [[25, 27], [30, 31]], "records": 5,
                               "first_timestamp": T0, "max_timestamp": T0 + 2, "log_append_time": False}],
        "markers": [{"producer_id": S, "producer_epoch": 5, "offset": 12, "commit": True, "timestamp": T0},
                    {"producer_id": Q, "producer_epoch": 0, "offset": 15, "commit": False, "timestamp": T0},
                    {"producer_id": P, "producer_epoch": 1, "offset": 16, "commit": True, "timestamp": T0},
                    {"producer_id": P, "producer_epoch": 1, "offset": 22, "commit": False, "timestamp": T0},
                    {"producer_id": Q, "producer_epoch": 0, "offset": 28, "commit": True, "timestamp": T0}],
    }
    out.case("txn", parts, exp, txn_summary)
    out.case("txn_with_index", parts, exp, txn_summary, txn_index=[(Q, 7, 15), (P, 17, 22)])
    out.case("txn_index_contradicts", parts, exp, txn_summary, txn_index=[(P, 3, 16)],
             error="transaction index")

    # Legacy message sets, magic 0 and 1, plain and compressed wrappers.
    for magic in (0, 1):
        for codec in ("none", "gzip", "snappy", "lz4"):
            parts, exp, off = [], [], 0
            for n in (1, 6, 3):
                data, e = legacy_set(magic, off, legacy_records(n, T0 + off), codec=codec)
                parts.append(data)
                exp += e
                off += n
            out.case("legacy_v%d_%s" % (magic, codec), parts, exp, plain_summary(exp, 0, off - 1))
    data, exp = legacy_set(1, 40, legacy_records(5, T0), codec="gzip", log_append_ts=T0 + 5555)
    out.case("legacy_v1_log_append", [data], exp, plain_summary(exp, 40, 44), base=40)

    # A topic upgraded from old brokers: v0, then v1, then v2 in one segment.
    parts, exp = [], []
    for data, e in (legacy_set(0, 0, legacy_records(3, T0)), legacy_set(1, 3, legacy_records(4, T0), codec="snappy"),
                    v2_batch(7, random_records(5, T0), codec="gzip")):
        parts.append(data)
        exp += e
    out.case("mixed_v0_v1_v2", parts, exp, plain_summary(exp, 0, 11))

    # Decompression bomb: 8 MiB of zeros in a small gzip batch, decoded with a 1 MiB limit.
    bomb, _ = v2_batch(0, [(T0, None, bytes(8 << 20), [])], codec="gzip")
    assert len(bomb) < 64 * 1024
    out.case("gzip_bomb", [bomb], [], plain_summary([], 0, 0), error="decompresses to more than",
             limits={"max_batch_bytes": 1 << 20, "max_decompressed_bytes": 1 << 20})

    # Preallocated segment file: zeros after the last batch.
    data, e = v2_batch(0, random_records(4, T0))
    out.case("zero_tail", [data, bytes(4096)], e, plain_summary(e, 0, 3))

    out.write()


def zstd_streamed(payload):
    """zstd as a Java client's ZstdOutputStream writes it: a streamed frame whose header
    does not state the content size."""
    c = zstandard.ZstdCompressor(level=3, write_content_size=False).compressobj()
    return c.compress(payload) + c.flush()


# Batch payloads compressed other than kafka-python does: name → (codec bits, compress).
RECOMPRESSED = {
    "snappy_raw": (2, lambda b: cramjam.snappy.compress_raw(b).read()),
    "zstd_streamed": (4, zstd_streamed),
}


def recompressed(batch, how):
    """An uncompressed v2 `batch` with its records compressed `how` (see RECOMPRESSED)."""
    bits, compress = RECOMPRESSED[how]
    buf = bytearray(batch[:61]) + compress(bytes(batch[61:]))
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">h", buf, 21, struct.unpack_from(">h", buf, 21)[0] | bits)
    struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    return bytes(buf)


def bench_seeds(root, mib=4, codecs=CODECS):
    """Seed segments of ~`mib` MiB per codec for the benchmarks (tiled to any size there):
    batches of ~64 KiB like a producer with batch.size=65536, JSON-ish values."""
    os.makedirs(root, exist_ok=True)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randrange(3, 11))) for _ in range(2000)]
    for codec in codecs:
        parts, off, size = [], 0, 0
        while size < mib << 20:
            recs = []
            for i in range(150):
                value = json.dumps({"order_id": off + i, "customer": "c-%06d" % rng.randrange(10**6),
                                    "amount": rng.randrange(10**5) / 100, "status": rng.choice(["NEW", "PAID", "SHIPPED"]),
                                    "note": " ".join(rng.choice(words) for _ in range(rng.randrange(15, 90)))}).encode()
                recs.append((T0 + off + i, b"order-%d" % (off + i), value, [("source", b"bench")]))
            if codec in RECOMPRESSED:
                data = recompressed(v2_batch(off, recs)[0], codec)
            else:
                data, _ = v2_batch(off, recs, codec=codec)
            parts.append(data)
            off += len(recs)
            size += len(data)
        with open(os.path.join(root, "seed_%s.log" % codec), "wb") as f:
            f.write(b"".join(parts))


if __name__ == "__main__":
    if sys.argv[1] == "--bench-seeds":
        # --bench-seeds DIR [MIB [CODEC...]]
        mib = int(sys.argv[3]) if len(sys.argv) > 3 else 4
        bench_seeds(sys.argv[2], mib, sys.argv[4:] or CODECS)
    else:
        build(sys.argv[1])
