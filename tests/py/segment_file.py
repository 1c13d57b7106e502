"""Writes a Kafka segment from records with kafka-python's DefaultRecordBatchBuilder (the
independent encoder the tests use), one batch per chunk, offsets from 0."""
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
