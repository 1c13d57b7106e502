"""Lets PyIceberg 0.12 write format v3 table metadata. Importing this module is enough.

PyIceberg 0.12 parses v3 metadata and applies updates to it, row lineage included (an
added snapshot's `first-row-id` checked against the table's `next-row-id`, which grows by
its `added-rows`), but refuses to write it (apache/iceberg-python#1551): its v3 model's
`model_dump_json` raises. Here it serialises as the v2 model does (by alias, nulls left
out), so the tests' catalogs can commit to the v3 tables Floe creates.

A v3 table PyIceberg creates itself gets no `next-row-id`; the spec starts it at 0, and so
does the JSON written here.
"""
import pydantic
from pyiceberg.table.metadata import TableMetadataV3


def _dump_json(self, exclude_none=True, exclude=None, by_alias=True, **kwargs):
    if self.next_row_id is None:
        self = self.model_copy(update={"next_row_id": 0})
    return pydantic.BaseModel.model_dump_json(self, exclude_none=exclude_none, exclude=exclude, by_alias=by_alias,
                                              **kwargs)


TableMetadataV3.model_dump_json = _dump_json
