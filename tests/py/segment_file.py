"""Writes a Kafka segment from records with kafka-python's DefaultRecordBatchBuilder (the
independent encoder the tests use), one batch per chunk, offsets from 0."""
import base64
import json
import os
import random
import struct
import uuid

from kafka.record.default_records import DefaultRecordBatchBuilder


# The `_kafka` column of every value-as-payload table, as README's "Tables" documents it
# (pyarrow's spelling), for check_parquet.py --types.
KAFKA_COLUMN_TYPE = ("struct<partition: int32 not null, offset: int64 not null, timestamp: timestamp[us, tz=+00:00], "
                     "timestamp_type: string not null, headers: list<element: struct<key: string not null, "
                     "value: large_binary> not null>, key: large_binary>")


def write_expectations(out, prefix, rows, bad, types):
    """What the tests judge a topic's Parquet by: for each name → rows of `rows`,
    OUT/<prefix><name> (JSON lines); OUT/<prefix>bad.json (the bad records) and
    OUT/<prefix>types.json (each column's documented Arrow type)."""
    for name, lines in rows.items():
        with open(os.path.join(out, prefix + name), "w") as f:
            for r in lines:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    for name, value in (("bad.json", bad), ("types.json", types)):
        with open(os.path.join(out, prefix + name), "w") as f:
            json.dump(value, f)


def write_segment(path, records, chunks, codec=0, base=0):
    """records: list of (timestamp ms, key bytes|None, value bytes|None[, headers: list of
    (str, bytes)]); chunks: sizes
    of the batches (their sum may be short: the rest forms one last batch); codec:
    kafka-python's compression type (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd); base: the
    first record's offset."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    bounds, start = [], 0
    for n in chunks:
        bounds.append((start, min(start + n, len(records))))
        start += n
    if start < len(records):
        bounds.append((start, len(records)))
    parts = []
    for begin, end in bounds:
        b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                      producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
        for j, (ts, k, v, *headers) in enumerate(records[begin:end]):
            b.append(j, timestamp=ts, key=k, value=v, headers=headers[0] if headers else [])
        data = bytearray(b.build())
        struct.pack_into(">q", data, 0, base + begin)
        parts.append(bytes(data))
    with open(path, "wb") as f:
        f.write(b"".join(parts))


# The schema GUID the registry stand-in gives the main schema of a reference case.
MAIN_GUID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


class BenchValues:
    """Random values of the benchmark records, shared by the formats' seeds: unique ids,
    free text, random numbers, varying collections (seeded: the same every run)."""

    def __init__(self):
        self.rng = random.Random(7)
        self.words = ["".join(self.rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(self.rng.randrange(3, 10)))
                      for _ in range(5000)]

    def common(self, i):
        rng, words = self.rng, self.words
        return dict(id=i, qty=rng.randrange(-10**6, 10**6), score=rng.random(), ratio=rng.random(),
                    name=" ".join(rng.choice(words) for _ in range(rng.randrange(2, 6))),
                    blob=bytes(rng.randrange(256) for _ in range(rng.randrange(4, 24))),
                    tags=[rng.choice(words) for _ in range(rng.randrange(0, 5))],
                    counts={rng.choice(words): rng.randrange(10**9) for _ in range(rng.randrange(0, 4))},
                    note=" ".join(rng.choice(words) for _ in range(rng.randrange(0, 20))))


def write_bench_segment(path, codec, mib, value, t0):
    """A benchmark segment of ~`mib` MiB: records `value(i)` keyed `order-<i>`, in batches
    of ~64 KiB before compression (`codec` as in write_segment), offsets from 0."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as f:
        base, size, i = 0, 0, 0
        while size < mib << 20:
            b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                          producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
            n = 0
            while b.size() < 64 * 1024:
                b.append(n, timestamp=t0 + i, key=b"order-%d" % i, value=value(i), headers=[])
                n += 1
                i += 1
            data = bytearray(b.build())
            struct.pack_into(">q", data, 0, base)
            base += n
            size += len(data)
            f.write(data)


def header_framed(value, indexes_len, schema_header):
    """A value written with the Confluent wire format (`[0][id]`, then for Protobuf the
    message indexes, then the body) moved to header framing, as newer Confluent
    serializers write it: the `__value_schema_id` header holds `schema_header` (`[0][id]`
    or `[1][GUID]`) and then the message indexes; the value is the body alone."""
    header = schema_header + value[5:5 + indexes_len]
    return value[5 + indexes_len:], [("__value_schema_id", header)]


def write_reference_case(out, topic, main, referenced, schema_type, records, expected, indexes_len=0):
    """A registry schema referencing another subject's schema, for the reference tests:

      OUT/refs/<topic>-0/…log     `records`, values framed with the id of `main` in the
                                  payload, except record 1 (the id in a __value_schema_id
                                  header) and record 2 (the GUID in that header)
      OUT/refs/registry.json      ids, GUIDs, `<topic>-value` → main, the referenced
                                  subject's version 1
      OUT/refs/expected.jsonl     `expected`, the rows pyarrow must read back

    main: (id, schema text, reference name); referenced: (id, schema text, subject);
    indexes_len: bytes of Protobuf message indexes after each value's 5-byte header."""
    refs = os.path.join(out, "refs")
    (main_id, main_text, ref_name), (ref_id, ref_text, ref_subject) = main, referenced
    headers = {1: struct.pack(">bI", 0, main_id), 2: b"\x01" + MAIN_GUID.bytes}
    records = list(records)
    for i, schema_header in headers.items():
        ts, key, value = records[i]
        value, record_headers = header_framed(value, indexes_len, schema_header)
        records[i] = (ts, key, value, record_headers)
        expected[i]["_kafka"]["headers"] = [{"key": k, "value": base64.b64encode(v).decode()}
                                            for k, v in record_headers]
    write_segment(os.path.join(refs, "%s-0" % topic, "%020d.log" % 0), records, [2])
    registry = {
        "ids": {str(ref_id): {"schemaType": schema_type, "schema": ref_text},
                str(main_id): {"schemaType": schema_type, "schema": main_text,
                               "references": [{"name": ref_name, "subject": ref_subject, "version": 1}]}},
        "guids": {str(MAIN_GUID): main_id},
        "subjects": {"%s-value" % topic: main_id},
        "versions": {ref_subject: {"1": ref_id}},
    }
    with open(os.path.join(refs, "registry.json"), "w") as f:
        json.dump(registry, f)
    with open(os.path.join(refs, "expected.jsonl"), "w") as f:
        for r in expected:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
