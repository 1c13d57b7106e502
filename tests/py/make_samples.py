#!/usr/bin/env python3
"""Writes the small sample segments the repository carries in examples/segments (what
the README's first command runs on), with kafka-python's record batch builder:

  orders-0/, orders-1/   broker log-dir copies of topic `orders`, two and one segments
  tiered/page.views-…/0/ topic `page.views` as Aiven's tiered-storage plugin uploads it
                         (zstd-compressed chunks, .indexes, .rsm-manifest last)

    make_samples.py OUT_DIR
"""
import json
import os
import random
import subprocess
import sys
import tempfile

from segment_file import write_segment

T0 = 1764489600000
rng = random.Random(7)


def orders(first, n):
    out = []
    for i in range(first, first + n):
        value = {"order_id": i, "customer": "c-%04d" % rng.randrange(10000),
                 "amount": round(rng.uniform(1, 500), 2), "status": rng.choice(["NEW", "PAID", "SHIPPED"])}
        out.append((T0 + i * 1000, b"order-%d" % i, json.dumps(value).encode()))
    return out


def main(out):
    write_segment(os.path.join(out, "orders-0", "%020d.log" % 0), orders(0, 100), [25, 25, 25])
    # The second segment's batches start where the first ends: rewrite base offsets.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "seg.log")
        write_segment(path, orders(100, 60), [30])
        data = bytearray(open(path, "rb").read())
        pos = 0
        while pos + 12 <= len(data):
            base = int.from_bytes(data[pos:pos + 8], "big")
            data[pos:pos + 8] = (base + 100).to_bytes(8, "big")
            pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
        os.makedirs(os.path.join(out, "orders-0"), exist_ok=True)
        open(os.path.join(out, "orders-0", "%020d.log" % 100), "wb").write(bytes(data))
    write_segment(os.path.join(out, "orders-1", "%020d.log" % 0), orders(1000, 80), [40])

    views = [(T0 + i, None, json.dumps({"page": "/p/%d" % rng.randrange(50), "ms": rng.randrange(5, 900)}).encode())
             for i in range(200)]
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "views.log")
        write_segment(log, views, [50, 50, 50], codec=4)
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run([sys.executable, os.path.join(here, "make_tiered.py"), log, out, "--topic", "page.views",
                        "--partition", "0", "--start", "0", "--end", "199", "--compress", "--chunk", "1024"],
                       check=True, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main(sys.argv[1])
