"""The job a hand-written Python Lambda does, as the convert benchmark's baseline
(DESIGN §7: Floe ≥ 20× it): read a segment with kafka-python, decode each record's value
(raw bytes, or Confluent-framed Avro with fastavro), build Arrow tables with pyarrow
(partition, offset, timestamp and key beside the value) 8192 rows at a time, and write
them as one zstd Parquet file.

  python_lambda.py SEGMENT OUT.parquet [AVRO_SCHEMA.avsc]

Prints {"seconds": …, "records": …}: the time from reading the file to the Parquet
written, as the Lambda would spend it."""
import io
import json
import sys
import time

import fastavro
import fastavro.read
import pyarrow as pa
import pyarrow.parquet as pq
from kafka.record.default_records import DefaultRecordBatch

ROWS = 8192


PRIMITIVE = {"null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
             "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary(), "string": pa.string()}
LOGICAL = {"date": pa.date32(), "time-millis": pa.time32("ms"), "time-micros": pa.time64("us"),
           "timestamp-millis": pa.timestamp("ms", "UTC"), "timestamp-micros": pa.timestamp("us", "UTC"),
           "local-timestamp-millis": pa.timestamp("ms"), "local-timestamp-micros": pa.timestamp("us"),
           "uuid": pa.string()}


def arrow_type(t, named):
    """The Arrow type a Lambda author would declare for Avro type `t` (a union of several
    types as the text of its value)."""
    if isinstance(t, str):
        return PRIMITIVE[t] if t in PRIMITIVE else named[t]
    if isinstance(t, list):
        members = [m for m in t if m != "null"]
        return arrow_type(members[0], named) if len(members) == 1 else pa.string()
    if t.get("logicalType") == "decimal":
        return pa.decimal128(t["precision"], t.get("scale", 0))
    if t.get("logicalType") in LOGICAL:
        return LOGICAL[t["logicalType"]]
    kind = t["type"]
    if kind == "record":
        named[t["name"]] = pa.struct([(f["name"], arrow_type(f["type"], named)) for f in t["fields"]])
        return named[t["name"]]
    if kind == "enum":
        named[t["name"]] = pa.string()
        return pa.string()
    if kind == "fixed":
        named[t["name"]] = pa.binary(t["size"])
        return named[t["name"]]
    if kind == "array":
        return pa.list_(arrow_type(t["items"], named))
    if kind == "map":
        return pa.map_(pa.string(), arrow_type(t["values"], named))
    return arrow_type(kind, named)


def main(segment, out, schema_path=None):
    meta = [("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.int64()), ("key", pa.binary())]
    if schema_path:
        avsc = json.load(open(schema_path))
        schema = fastavro.parse_schema(avsc)
        value = arrow_type(avsc, {})
        arrow_schema = pa.schema(meta + [(f.name, f.type) for f in value])
        several = {f["name"] for f in avsc["fields"] if isinstance(f["type"], list)
                   and len([m for m in f["type"] if m != "null"]) > 1}
    else:
        schema, several = None, set()
        arrow_schema = pa.schema(meta + [("value", pa.binary())])
    # UUIDs as their text.
    fastavro.read.LOGICAL_READERS["string-uuid"] = lambda data, *_: data
    start = time.perf_counter()
    with open(segment, "rb") as f:
        data = f.read()
    writer, rows, records, pos = None, [], 0, 0

    def flush():
        nonlocal writer, rows
        table = pa.Table.from_pylist(rows, schema=arrow_schema)
        if writer is None:
            writer = pq.ParquetWriter(out, arrow_schema, compression="zstd")
        writer.write_table(table)
        rows = []

    while pos + 12 <= len(data):
        length = int.from_bytes(data[pos + 8:pos + 12], "big")
        batch = DefaultRecordBatch(data[pos:pos + 12 + length])
        pos += 12 + length
        for r in batch:
            row = {"partition": 0, "offset": r.offset, "timestamp": r.timestamp, "key": r.key}
            if schema is None:
                row["value"] = r.value
            else:
                value = fastavro.schemaless_reader(io.BytesIO(r.value[5:]), schema, None)
                for name in several:
                    if value[name] is not None:
                        value[name] = str(value[name])
                row.update(value)
            rows.append(row)
            records += 1
            if len(rows) >= ROWS:
                flush()
    if rows:
        flush()
    writer.close()
    print(json.dumps({"seconds": time.perf_counter() - start, "records": records}))


if __name__ == "__main__":
    main(*sys.argv[1:])
