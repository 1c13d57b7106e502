#!/usr/bin/env python3
"""Another engine appends to a Floe table through Glue: PyIceberg commits a snapshot
without Floe's summary keys, moving the catalog pointer.

    foreign_glue_append.py ENDPOINT NAMESPACE.TABLE ROWS

Appends copies of the table's first ROWS rows with `_kafka.partition` set to 99, a
partition Floe never writes, so a reader tells them from Floe's rows. Prints the rows
appended.
"""
import sys

import pyarrow as pa

from read_iceberg import catalog


def main():
    endpoint, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    table = catalog("glue", endpoint, "-").load_table(name)
    rows = table.scan(limit=count).to_arrow()
    kafka = rows.column("_kafka").combine_chunks()
    arrays = [kafka.field(i) for i in range(kafka.type.num_fields)]
    index = kafka.type.get_field_index("partition")
    arrays[index] = pa.array([99] * len(rows), type=kafka.type.field(index).type)
    fields = [kafka.type.field(i) for i in range(kafka.type.num_fields)]
    column = pa.StructArray.from_arrays(arrays, fields=fields)
    at = rows.schema.get_field_index("_kafka")
    table.append(rows.set_column(at, rows.schema.field(at), column))
    print(len(rows))


if __name__ == "__main__":
    main()
