#!/usr/bin/env python3
"""Writes the sample topics the repository carries in examples/ (what the README's first
command runs on), with kafka-python's record batch builder and the formats' own encoders
(fastavro, Google's protobuf package):

  segments/orders-0/, orders-1/   topic `orders`: JSON objects (order id, customer,
                                  amount, status), broker log-dir copies, two and one
                                  segments
  segments/shipments-0/           topic `shipments`: Avro in the Confluent wire format,
                                  shipped over five days (six dates), a broker
                                  log-dir copy
  segments/tiered/page.views-…/0/ topic `page.views`: Protobuf in the Confluent wire
                                  format, as Aiven's tiered-storage plugin uploads it
                                  (zstd-compressed chunks, .indexes, .rsm-manifest last)
  schemas/shipment.avsc           the shipments' Avro schema
  schemas/page_view.proto         the page views' Protobuf schema

examples/floe.toml (written by hand) names these formats and schema files.

    make_samples.py [EXAMPLES_DIR]    (default: the repository's examples/)
"""
import datetime
import json
import os
import random
import subprocess
import sys
import tempfile

import fastavro
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

import make_avro
import make_protobuf
from segment_file import write_segment

T0 = 1764489600000  # 2025-11-30T08:00:00Z
rng = random.Random(7)
UTC = datetime.timezone.utc
FD = descriptor_pb2.FieldDescriptorProto
CITIES = [("Lisbon", "PT"), ("Lyon", "FR"), ("Hamburg", "DE"), ("Milan", "IT"), ("Utrecht", "NL"),
          ("Valencia", "ES"), ("Krakow", "PL"), ("Gothenburg", "SE")]


def orders(first, n):
    out = []
    for i in range(first, first + n):
        value = {"order_id": i, "customer": "c-%04d" % rng.randrange(10000),
                 "amount": round(rng.uniform(1, 500), 2), "status": rng.choice(["NEW", "PAID", "SHIPPED"])}
        out.append((T0 + i * 1000, b"order-%d" % i, json.dumps(value).encode()))
    return out


def write_orders(segments):
    write_segment(os.path.join(segments, "orders-0", "%020d.log" % 0), orders(0, 100), [25, 25, 25])
    write_segment(os.path.join(segments, "orders-0", "%020d.log" % 100), orders(100, 60), [30], base=100)
    write_segment(os.path.join(segments, "orders-1", "%020d.log" % 0), orders(1000, 80), [40])


# ---- shipments: Avro ----

SHIPMENT = {
    "type": "record", "name": "Shipment", "namespace": "shop",
    "fields": [
        {"name": "shipment_id", "type": "string"},
        {"name": "order_id", "type": "long"},
        {"name": "carrier", "type": {"type": "enum", "name": "Carrier", "symbols": ["DHL", "UPS", "DPD", "GLS"]}},
        {"name": "weight_grams", "type": "int"},
        {"name": "destination", "type": {"type": "record", "name": "Address", "fields": [
            {"name": "city", "type": "string"},
            {"name": "country", "type": "string"},
            {"name": "postal_code", "type": ["null", "string"], "default": None}]}},
        {"name": "shipped_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "delivered_at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}],
         "default": None},
    ],
}
SHIPMENTS = 120
SHIPMENT_SCHEMA_ID = 1  # the id in each value's header (a local schema file does not check it)


def shipment(i):
    shipped = datetime.datetime.fromtimestamp(T0 / 1000, UTC) + datetime.timedelta(
        hours=i, minutes=rng.randrange(60))  # 120 hours from 08:00: six calendar days
    city, country = rng.choice(CITIES)
    delivered = shipped + datetime.timedelta(hours=rng.randrange(18, 72)) if i < 90 else None
    return {"shipment_id": "SHP-%06d" % (5000 + i), "order_id": rng.choice([rng.randrange(160), 1000 + rng.randrange(80)]),
            "carrier": rng.choice(["DHL", "UPS", "DPD", "GLS"]), "weight_grams": rng.randrange(150, 12000),
            "destination": {"city": city, "country": country,
                            "postal_code": None if i % 9 == 4 else "%05d" % rng.randrange(100000)},
            "shipped_at": shipped, "delivered_at": delivered}


def write_shipments(segments, schemas):
    with open(os.path.join(schemas, "shipment.avsc"), "w") as f:
        json.dump(SHIPMENT, f, indent=2)
        f.write("\n")
    parsed = fastavro.parse_schema(SHIPMENT)
    records = []
    for i in range(SHIPMENTS):
        s = shipment(i)
        ts = int(s["shipped_at"].timestamp() * 1000)
        records.append((ts, s["shipment_id"].encode(), make_avro.frame(SHIPMENT_SCHEMA_ID, parsed, s)))
    write_segment(os.path.join(segments, "shipments-0", "%020d.log" % 0), records, [40, 40])


# ---- page views: Protobuf ----

DEVICES = ["DESKTOP", "MOBILE", "TABLET"]
# (name, number, type, kind) as in make_protobuf.py
PAGE_VIEW = [("user_id", 1, "string", ""), ("session_id", 2, "string", ""), ("url", 3, "string", ""),
             ("referrer", 4, "string", "optional"), ("device", 5, "Device", ""), ("duration_ms", 6, "int32", ""),
             ("viewed_at", 7, "google.protobuf.Timestamp", "")]
PAGE_VIEW_SCHEMA_ID = 1
PAGES = ["/", "/search", "/cart", "/checkout", "/account"] + ["/p/%d" % i for i in range(20)]


def page_view_proto_text():
    fields = ["  %s%s %s = %d;" % ("optional " if kind == "optional" else "", t, name, number)
              for name, number, t, kind in PAGE_VIEW]
    return "\n".join(['syntax = "proto3";', "package web;", 'import "google/protobuf/timestamp.proto";', "",
                      "message PageView {",
                      "  enum Device { %s }" % " ".join("%s = %d;" % (d, i) for i, d in enumerate(DEVICES))]
                     + fields + ["}", ""])


def page_view_class():
    make_protobuf.LOCAL_TYPES["Device"] = (FD.TYPE_ENUM, ".web.PageView.Device")
    f = descriptor_pb2.FileDescriptorProto(name="page_view.proto", package="web", syntax="proto3")
    f.dependency.append("google/protobuf/timestamp.proto")
    view = make_protobuf.message_proto("PageView", PAGE_VIEW, "web")
    view.enum_type.add(name="Device").value.extend(
        [descriptor_pb2.EnumValueDescriptorProto(name=d, number=i) for i, d in enumerate(DEVICES)])
    f.message_type.append(view)
    pool = descriptor_pool.DescriptorPool()
    for p in make_protobuf.well_known():
        pool.Add(p)
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("web.PageView"))


def page_views(n):
    cls, out = page_view_class(), []
    for i in range(n):
        ts = T0 + i * 9000 + rng.randrange(9000)  # half an hour
        user = "c-%04d" % rng.randrange(10000)
        m = cls(user_id=user, session_id="s-%05d" % (i // 5), url=rng.choice(PAGES),
                device=rng.randrange(len(DEVICES)), duration_ms=rng.randrange(5, 900))
        if i % 5:
            m.referrer = "https://example.com" + rng.choice(PAGES)
        m.viewed_at.seconds, m.viewed_at.nanos = ts // 1000, ts % 1000 * 1000000
        out.append((ts, user.encode(), make_protobuf.frame(PAGE_VIEW_SCHEMA_ID, [0], m.SerializeToString())))
    return out


def write_page_views(segments, schemas):
    with open(os.path.join(schemas, "page_view.proto"), "w") as f:
        f.write(page_view_proto_text())
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "views.log")
        write_segment(log, page_views(200), [50, 50, 50], codec=4)
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run([sys.executable, os.path.join(here, "make_tiered.py"), log, segments, "--topic", "page.views",
                        "--partition", "0", "--start", "0", "--end", "199", "--compress", "--chunk", "1024"],
                       check=True, stdout=subprocess.DEVNULL)


def main(examples):
    segments, schemas = os.path.join(examples, "segments"), os.path.join(examples, "schemas")
    os.makedirs(schemas, exist_ok=True)
    write_orders(segments)
    write_page_views(segments, schemas)
    write_shipments(segments, schemas)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../examples"))
