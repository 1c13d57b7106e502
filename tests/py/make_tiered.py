#!/usr/bin/env python3
"""Lays a broker segment out the way Aiven's tiered-storage plugin uploads it (written
independently from the plugin's documented formats):

    make_tiered.py LOG OUT_DIR --topic T --partition P --start S --end E
                   [--txnindex FILE] [--chunk BYTES] [--compress] [--prefix PREFIX]
                   [--topic-id ID] [--segment-id ID] [--encrypt]

writes, under OUT_DIR/PREFIX<topic>-<topicId>/<partition>/<start:020>-<segmentId>:
  .log           the segment cut into chunks, each one zstd frame when --compress
  .indexes       the indexes back to back (offset, time, producer snapshot and leader
                 epoch indexes are empty here; the transaction index when given)
  .rsm-manifest  JSON: chunk index (variable when compressed: base64 of a zstd frame of
                 the big-endian chunk-size codec), segment indexes, compression,
                 remoteLogSegmentMetadata; an "encryption" entry with --encrypt
Prints the three keys (relative to OUT_DIR) as JSON.
"""
import argparse
import base64
import json
import os
import struct

import zstandard


def chunk_sizes_codec(sizes):
    out = struct.pack(">i", len(sizes))
    if len(sizes) > 1:
        head = sizes[:-1]
        base = min(head)
        span = max(v - base for v in head)
        width = 1 if span <= 0xFF else 2 if span <= 0xFFFF else 3 if span <= 0xFFFFFF else 4
        out += struct.pack(">iB", base, width)
        for v in head:
            out += (v - base).to_bytes(width, "big")
    if sizes:
        out += struct.pack(">i", sizes[-1])
    return base64.b64encode(zstandard.ZstdCompressor(write_content_size=True).compress(out)).decode()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("log")
    p.add_argument("out")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, required=True)
    p.add_argument("--start", type=int, required=True)
    p.add_argument("--end", type=int, required=True)
    p.add_argument("--txnindex")
    p.add_argument("--chunk", type=int, default=4096)
    p.add_argument("--compress", action="store_true")
    p.add_argument("--encrypt", action="store_true")
    p.add_argument("--prefix", default="tiered/")
    p.add_argument("--topic-id", default="MWJ6FHTfRYy67jzwZdeqSQ")
    p.add_argument("--segment-id", default="tqimKeZwStOEOwRzT3L5oQ")
    a = p.parse_args()

    data = open(a.log, "rb").read()
    pieces = [data[i:i + a.chunk] for i in range(0, len(data), a.chunk)]
    if a.compress:
        cctx = zstandard.ZstdCompressor(write_content_size=True)
        stored = [cctx.compress(piece) for piece in pieces]
        chunk_index = {"type": "variable", "originalChunkSize": a.chunk, "originalFileSize": len(data),
                       "transformedChunks": chunk_sizes_codec([len(s) for s in stored])}
    else:
        stored = pieces
        chunk_index = {"type": "fixed", "originalChunkSize": a.chunk, "originalFileSize": len(data),
                       "transformedChunkSize": a.chunk,
                       "finalTransformedChunkSize": len(pieces[-1]) if pieces else 0}

    txn = open(a.txnindex, "rb").read() if a.txnindex else None
    indexes = {"offset": {"position": 0, "size": 0}, "timestamp": {"position": 0, "size": 0},
               "producerSnapshot": {"position": 0, "size": 0}, "leaderEpoch": {"position": 0, "size": 0},
               "transaction": None if txn is None else {"position": 0, "size": len(txn)}}

    manifest = {"version": "1", "chunkIndex": chunk_index, "segmentIndexes": indexes, "compression": a.compress}
    if a.encrypt:
        manifest["encryption"] = {"dataKey": "key1:" + base64.b64encode(b"\0" * 32).decode(),
                                  "aad": base64.b64encode(b"\1" * 32).decode()}
    manifest["remoteLogSegmentMetadata"] = {
        "remoteLogSegmentId": {"topicIdPartition": {"topicId": a.topic_id,
                                                    "topicPartition": {"topic": a.topic, "partition": a.partition}},
                               "id": a.segment_id},
        "startOffset": a.start, "endOffset": a.end, "maxTimestampMs": 0, "brokerId": 1,
        "eventTimestampMs": 0, "segmentLeaderEpochs": {"0": a.start}}

    stem = "%s%s-%s/%d/%020d-%s" % (a.prefix, a.topic, a.topic_id, a.partition, a.start, a.segment_id)
    os.makedirs(os.path.join(a.out, os.path.dirname(stem)), exist_ok=True)
    keys = {}
    for ext, body in [("log", b"".join(stored)), ("indexes", txn or b""),
                      ("rsm-manifest", json.dumps(manifest, separators=(",", ":")).encode())]:
        keys[ext] = stem + "." + ext
        with open(os.path.join(a.out, keys[ext]), "wb") as f:
            f.write(body)
    print(json.dumps(keys))


if __name__ == "__main__":
    main()
