#!/usr/bin/env python3
"""Another engine deletes rows of a format v3 Floe table with deletion vectors, as Spark,
Trino and Snowflake do in v3: one Puffin file for the snapshot, a `deletion-vector-v1`
blob per data file holding any of the rows (its positions as a 64-bit roaring bitmap),
and a delete manifest entry per blob naming its data file (`referenced_data_file`) and
the blob's bytes (`content_offset`, `content_size_in_bytes`). A data file that has a
vector already gets one vector of both (the old positions merged in), the old one
removed in the same snapshot, as Spark does: a data file has one vector at most.

    foreign_vector.py CATALOG_DB WAREHOUSE_DIR NAMESPACE.TABLE delete PARTITION/OFFSET...
    foreign_vector.py glue ENDPOINT NAMESPACE.TABLE delete ...     (Glue and S3 at ENDPOINT: moto)
    foreign_vector.py URI CREDENTIAL NAMESPACE.TABLE delete ...    (a REST catalog)

Prints {"snapshot_id", "operation", "data_files": the data files the vectors name}.

Written from the specs (Puffin, and the table spec's deletion vectors and row lineage)
with pyroaring and fastavro, not with PyIceberg's writers: PyIceberg 0.12 writes no v3
manifest list or deletion vector. The snapshot (its first row id the table's next-row-id,
no rows added) is committed through the catalog as any engine commits: an add-snapshot
and a `main` update, required to find `main` where it was read (PyIceberg applies them,
its v3 metadata writer let through by v3_metadata.py). The table must be unpartitioned.
"""
import io
import json
import struct
import sys
import time
import uuid
import zlib

import fastavro
from pyroaring import BitMap

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate

import v3_metadata  # noqa: F401 (lets PyIceberg write v3 metadata)
from foreign_delete import holding, kafka_keys, vector_positions
from read_iceberg import open_catalog

VECTOR_MAGIC = bytes([0xD1, 0xD3, 0x39, 0x64])
PUFFIN_MAGIC = b"PFA1"
ROW_POS_ID = 2147483645


def vector_blob(positions):
    """A `deletion-vector-v1` blob: length (BE) | magic | portable 64-bit roaring | CRC-32 (BE)."""
    buckets = {}
    for p in positions:
        buckets.setdefault(p >> 32, []).append(p & 0xFFFFFFFF)
    bitmap = struct.pack("<Q", len(buckets))
    for key in sorted(buckets):
        bitmap += struct.pack("<I", key) + BitMap(buckets[key]).serialize()
    body = VECTOR_MAGIC + bitmap
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def puffin(vectors):
    """A Puffin file of `vectors` [(data file path, positions)]: its bytes, and each
    blob's (offset, length)."""
    out, blobs, places = bytearray(PUFFIN_MAGIC), [], []
    for path, positions in vectors:
        blob = vector_blob(positions)
        places.append((len(out), len(blob)))
        blobs.append({"type": "deletion-vector-v1", "fields": [ROW_POS_ID], "snapshot-id": -1,
                      "sequence-number": -1, "offset": len(out), "length": len(blob),
                      "properties": {"referenced-data-file": path, "cardinality": str(len(positions))}})
        out += blob
    footer = json.dumps({"blobs": blobs, "properties": {"created-by": "floe tests (Spark-style writer)"}}).encode()
    out += PUFFIN_MAGIC + footer + struct.pack("<i", len(footer)) + bytes(4) + PUFFIN_MAGIC
    return bytes(out), places


def read_avro(table, path):
    with table.io.new_input(path).open() as f:
        reader = fastavro.reader(io.BytesIO(f.read()))
        return reader.writer_schema, dict(reader.metadata), list(reader)


def write_avro(table, path, schema, metadata, records):
    buffer = io.BytesIO()
    metadata = {k: v for k, v in metadata.items() if not k.startswith("avro.")}
    fastavro.writer(buffer, schema, records, metadata=metadata, codec="deflate")
    with table.io.new_output(path).create() as f:
        f.write(buffer.getvalue())
    return len(buffer.getvalue())


def commit(table, snapshot):
    """Commits `snapshot` as the table's new `main`, if `main` is still its parent."""
    try:
        table.catalog.commit_table(
            table,
            (AssertRefSnapshotId(ref="main", snapshot_id=snapshot.parent_snapshot_id),),
            (AddSnapshotUpdate(snapshot=snapshot),
             SetSnapshotRefUpdate(ref_name="main", type="branch", snapshot_id=snapshot.snapshot_id)),
        )
    except CommitFailedException as e:
        sys.exit("the table changed while the deletion vectors were written: %s" % e)


def rewrite_manifest(table, manifest, read, removed, snapshot_id, sequence_number):
    """`manifest` (as the manifest list names it; `read`: its schema, metadata and entries)
    written anew by snapshot `snapshot_id`: the entries `removed` deleted (status 2), the
    others existing (status 0) with their sequence numbers written out (inherited from the
    old manifest's, which the new one does not carry); returns its manifest list entry."""
    schema, meta, entries = read
    gone = {(r["data_file"]["file_path"], r["data_file"]["content_offset"]) for r in removed}
    out = []
    for e in entries:
        if e["status"] == 2:
            continue
        e = dict(e)
        for field, inherited in (("sequence_number", manifest["sequence_number"]),
                                 ("file_sequence_number", manifest["sequence_number"]),
                                 ("snapshot_id", manifest["added_snapshot_id"])):
            if e[field] is None:
                e[field] = inherited
        if (e["data_file"]["file_path"], e["data_file"]["content_offset"]) in gone:
            e["status"], e["snapshot_id"] = 2, snapshot_id
        else:
            e["status"] = 0
        out.append(e)
    path = "%s/metadata/%s-dv-m1.avro" % (table.location(), uuid.uuid4())
    length = write_avro(table, path, schema, meta, out)
    kept = [e for e in out if e["status"] == 0]
    dropped = [e for e in out if e["status"] == 2]
    return {**manifest, "manifest_path": path, "manifest_length": length, "sequence_number": sequence_number,
            "min_sequence_number": min((e["sequence_number"] for e in kept), default=sequence_number),
            "added_snapshot_id": snapshot_id, "added_files_count": 0, "existing_files_count": len(kept),
            "deleted_files_count": len(dropped), "added_rows_count": 0,
            "existing_rows_count": sum(e["data_file"]["record_count"] for e in kept),
            "deleted_rows_count": sum(e["data_file"]["record_count"] for e in dropped)}


def delete(table, rows):
    metadata = table.metadata
    if metadata.format_version < 3:
        sys.exit("deletion vectors are for format v3 tables; this one is v%d" % metadata.format_version)
    if metadata.spec().fields:
        sys.exit("this writer handles unpartitioned tables only")
    current = table.current_snapshot()
    snapshot_id = uuid.uuid4().int & ((1 << 63) - 1)
    sequence_number = metadata.last_sequence_number + 1
    location = table.location()
    list_schema, list_meta, manifests = read_avro(table, current.manifest_list)
    targets = {entry.data_file.file_path: found for entry, found in holding(table, set(rows), kafka_keys)}
    if not targets:
        sys.exit("no row to delete")
    # The vectors the new ones replace: their positions merged in, their entries removed.
    earlier = {}
    for i, manifest in enumerate(manifests):
        if manifest["content"] != 1:
            continue
        schema, meta, entries = read_avro(table, manifest["manifest_path"])
        named = [e for e in entries if e["status"] != 2 and e["data_file"]["file_format"].upper() == "PUFFIN"
                 and e["data_file"]["referenced_data_file"] in targets]
        if not named:
            continue
        for e in named:
            d = e["data_file"]
            earlier[d["referenced_data_file"]] = vector_positions(
                table, d["file_path"], d["content_offset"], d["content_size_in_bytes"], d["record_count"])
        manifests[i] = rewrite_manifest(table, manifest, (schema, meta, entries), named, snapshot_id, sequence_number)
    vectors = [(path, sorted({i for i, _ in found} | set(earlier.get(path, []))))
               for path, found in sorted(targets.items())]

    puffin_path = "%s/data/foreign-dv-%s.puffin" % (location, uuid.uuid4())
    payload, places = puffin(vectors)
    with table.io.new_output(puffin_path).create() as f:
        f.write(payload)

    # The delete manifest, in the table's v3 manifest schema (taken from a data manifest).
    data_manifest = next(m for m in manifests if m["content"] == 0)
    entry_schema, entry_meta, _ = read_avro(table, data_manifest["manifest_path"])
    entries = [{
        "status": 1, "snapshot_id": snapshot_id, "sequence_number": None, "file_sequence_number": None,
        "data_file": {
            "content": 1, "file_path": puffin_path, "file_format": "PUFFIN", "partition": {},
            "record_count": len(positions), "file_size_in_bytes": len(payload),
            "column_sizes": None, "value_counts": None, "null_value_counts": None, "nan_value_counts": None,
            "lower_bounds": None, "upper_bounds": None, "key_metadata": None, "split_offsets": None,
            "equality_ids": None, "sort_order_id": None, "first_row_id": None,
            "referenced_data_file": path, "content_offset": offset, "content_size_in_bytes": length,
        },
    } for (path, positions), (offset, length) in zip(vectors, places)]
    manifest_path = "%s/metadata/%s-dv-m0.avro" % (location, uuid.uuid4())
    manifest_length = write_avro(table, manifest_path, entry_schema, {**entry_meta, "content": "deletes"}, entries)

    cardinality = sum(len(p) for _, p in vectors)
    manifests.append({
        "manifest_path": manifest_path, "manifest_length": manifest_length, "partition_spec_id": metadata.default_spec_id,
        "content": 1, "sequence_number": sequence_number, "min_sequence_number": sequence_number,
        "added_snapshot_id": snapshot_id, "added_files_count": len(vectors), "existing_files_count": 0,
        "deleted_files_count": 0, "added_rows_count": cardinality, "existing_rows_count": 0, "deleted_rows_count": 0,
        "partitions": [], "key_metadata": None, "first_row_id": None,
    })
    list_path = "%s/metadata/snap-%d-0-%s.avro" % (location, snapshot_id, uuid.uuid4())
    first_row_id = metadata.next_row_id
    write_avro(table, list_path, list_schema, {
        **list_meta, "snapshot-id": str(snapshot_id), "parent-snapshot-id": str(current.snapshot_id),
        "sequence-number": str(sequence_number), "first-row-id": str(first_row_id), "format-version": "3",
    }, manifests)

    timestamp_ms = max(int(time.time() * 1000), metadata.last_updated_ms + 1)
    summary = Summary(operation=Operation.DELETE, **{
        "added-delete-files": str(len(vectors)), "added-dvs": str(len(vectors)),
        "added-position-deletes": str(cardinality), "removed-dvs": str(len(earlier))})
    commit(table, Snapshot(**{
        "snapshot-id": snapshot_id, "parent-snapshot-id": current.snapshot_id, "sequence-number": sequence_number,
        "timestamp-ms": timestamp_ms, "manifest-list": list_path, "schema-id": metadata.current_schema_id,
        "summary": summary, "first-row-id": first_row_id, "added-rows": 0,
    }))
    return [path for path, _ in vectors]


def main():
    first, second, name, action = sys.argv[1:5]
    table = open_catalog(first, second).load_table(name)
    if action != "delete":
        sys.exit("unknown action " + action)
    named = delete(table, sys.argv[5:])
    snapshot = table.refresh().current_snapshot()
    print(json.dumps({"snapshot_id": snapshot.snapshot_id, "operation": snapshot.summary.operation.value,
                      "data_files": named}))


if __name__ == "__main__":
    main()
