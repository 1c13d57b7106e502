"""The least CPU any materializer spends on a raw topic's zstd segment: decompressing its
batches and compressing its values again into zstd pages (of 1 MiB, as Parquet's), and
nothing else (python-zstandard, the same libzstd as Floe's). Its MiB of segment per CPU
second bounds what a raw pipeline can reach, whatever its decoder and encoder.

  zstd_floor.py SEGMENT [LEVEL...]

Prints one JSON line per level (1 and 3 by default): the segment's and values' MiB, the
CPU seconds of each part (the best of 3), and the floor's MiB per CPU second."""
import json
import sys
import time

import zstandard
from kafka.record.default_records import DefaultRecordBatch

PAGE = 1 << 20


def best_cpu(work, rounds=3):
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def main(segment, *levels):
    data = open(segment, "rb").read()
    batches, pos = [], 0
    while pos + 12 <= len(data):
        length = int.from_bytes(data[pos + 8:pos + 12], "big")
        batches.append(data[pos:pos + 12 + length])
        pos += 12 + length
    values = b"".join(r.value or b"" for b in batches for r in DefaultRecordBatch(b))
    # A v2 batch's records start after its 61-byte header.
    decompressor = zstandard.ZstdDecompressor()
    decompress = best_cpu(lambda: [decompressor.decompressobj().decompress(b[61:]) for b in batches])
    mib = len(data) / 2**20
    for level in [int(x) for x in levels] or [1, 3]:
        compressor = zstandard.ZstdCompressor(level=level)
        compress = best_cpu(lambda: [compressor.compress(values[i:i + PAGE]) for i in range(0, len(values), PAGE)])
        print(json.dumps({"level": level, "segment_mib": round(mib, 1), "values_mib": round(len(values) / 2**20, 1),
                          "decompress_cpu_s": round(decompress, 3), "compress_cpu_s": round(compress, 3),
                          "floor_mib_per_cpu_s": round(mib / (decompress + compress), 1)}))


if __name__ == "__main__":
    main(*sys.argv[1:])
