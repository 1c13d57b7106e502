"""Writes a Kafka segment from records with kafka-python's DefaultRecordBatchBuilder (the
independent encoder the tests use), one batch per chunk, offsets from 0."""
import json
import os
import struct

from kafka.record.default_records import DefaultRecordBatchBuilder


def write_segment(path, records, chunks, codec=0):
    """records: list of (timestamp ms, key bytes|None, value bytes|None); chunks: sizes
    of the batches (their sum may be short: the rest forms one last batch); codec:
    kafka-python's compression type (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)."""
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
        for j, (ts, k, v) in enumerate(records[begin:end]):
            b.append(j, timestamp=ts, key=k, value=v, headers=[])
        data = bytearray(b.build())
        struct.pack_into(">q", data, 0, begin)
        parts.append(bytes(data))
    with open(path, "wb") as f:
        f.write(b"".join(parts))


def write_reference_case(out, topic, main, referenced, schema_type, records, expected):
    """A registry schema referencing another subject's schema, for the reference tests:

      OUT/refs/<topic>-0/…log     `records` (values framed with the id of `main`)
      OUT/refs/registry.json      ids, `<topic>-value` → main, the referenced subject's version 1
      OUT/refs/expected.jsonl     `expected`, the rows pyarrow must read back

    main: (id, schema text, reference name); referenced: (id, schema text, subject)."""
    refs = os.path.join(out, "refs")
    write_segment(os.path.join(refs, "%s-0" % topic, "%020d.log" % 0), records, [2])
    (main_id, main_text, ref_name), (ref_id, ref_text, ref_subject) = main, referenced
    registry = {
        "ids": {str(ref_id): {"schemaType": schema_type, "schema": ref_text},
                str(main_id): {"schemaType": schema_type, "schema": main_text,
                               "references": [{"name": ref_name, "subject": ref_subject, "version": 1}]}},
        "subjects": {"%s-value" % topic: main_id},
        "versions": {ref_subject: {"1": ref_id}},
    }
    with open(os.path.join(refs, "registry.json"), "w") as f:
        json.dump(registry, f)
    with open(os.path.join(refs, "expected.jsonl"), "w") as f:
        for r in expected:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
