#!/usr/bin/env python3
"""Another engine writes a Floe table: PyIceberg, through its own SqlCatalog (or Glue
catalog), commits a snapshot without Floe's summary keys.

    foreign_write.py CATALOG_DB WAREHOUSE_DIR NAMESPACE.TABLE overwrite|append|delete [ROWS [PARTITION]]
    foreign_write.py glue ENDPOINT NAMESPACE.TABLE ...      the same through Glue and S3 at ENDPOINT (moto)

overwrite: every row written again into new files (as Spark's or Athena's OPTIMIZE
would); append: the first ROWS rows (5 unless given) appended once more, their
`_kafka.partition` set to PARTITION when given (a partition Floe never writes, so a reader
tells them from Floe's rows); delete: every row deleted (a GDPR-style delete). Prints the
new snapshot's operation.
"""
import sys

import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue

from read_iceberg import open_catalog


def in_partition(rows, partition):
    """`rows` with `_kafka.partition` set to `partition`."""
    kafka = rows.column("_kafka").combine_chunks()
    arrays = [kafka.field(i) for i in range(kafka.type.num_fields)]
    index = kafka.type.get_field_index("partition")
    arrays[index] = pa.array([partition] * len(rows), type=kafka.type.field(index).type)
    fields = [kafka.type.field(i) for i in range(kafka.type.num_fields)]
    column = pa.StructArray.from_arrays(arrays, fields=fields)
    at = rows.schema.get_field_index("_kafka")
    return rows.set_column(at, rows.schema.field(at), column)


def main():
    db, warehouse, name, action = sys.argv[1:5]
    table = open_catalog(db, warehouse).load_table(name)
    rows = table.scan().to_arrow()
    if action == "overwrite":
        table.overwrite(rows)
    elif action == "append":
        rows = rows.slice(0, int(sys.argv[5]) if len(sys.argv) > 5 else 5)
        table.append(in_partition(rows, int(sys.argv[6])) if len(sys.argv) > 6 else rows)
    elif action == "delete":
        table.delete(AlwaysTrue())
    else:
        sys.exit("unknown action " + action)
    table = table.refresh()
    print(table.current_snapshot().summary.operation.value)


if __name__ == "__main__":
    main()
