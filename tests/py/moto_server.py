#!/usr/bin/env python3
"""Starts a moto server (S3, SQS, DynamoDB, Glue, Secrets Manager, ...) on 127.0.0.1 and
prints its port on stdout.

    moto_server.py         a free port; serves until its standard input closes — so the
                           server ends with the test process that started it, however
                           that process ends
    moto_server.py PORT    that port; serves until interrupted (Ctrl-C) or terminated
                           (the local walkthrough, scripts/lambda-local.sh)

moto 5.2.5 differs from AWS where Floe's exactly-once tests look, so this server closes
those gaps before it starts:
  - Glue UpdateTable with a VersionId that is not the table's current version fails with
    ConcurrentModificationException (moto ignores VersionId);
  - a FIFO queue remembers deduplication ids for the five-minute window even after the
    message is deleted (moto forgets them on delete);
  - a FIFO message whose visibility timed out is delivered again before later messages
    of its group (moto may deliver the later ones first);
  - S3 Tables' UpdateTableMetadataLocation answers `namespace` as a list, as the API
    says (moto answers a string, which the AWS SDKs refuse to parse).
"""
import json
import logging
import signal
import sys
import threading
import time

from moto.glue import responses as glue_responses
from moto.glue.exceptions import GlueClientError
from moto.s3tables import responses as s3tables_responses
from moto.server import ThreadedMotoServer
from moto.sqs import models as sqs_models


class ConcurrentModificationException(GlueClientError):
    def __init__(self, message):
        super().__init__("ConcurrentModificationException", message)


def enforce_version_id(update_table):
    def patched(self):
        version = self.parameters.get("VersionId")
        if version is not None:
            table_input = self.parameters.get("TableInput") or {}
            table = self.glue_backend.get_table(self.parameters.get("DatabaseName"), table_input.get("Name"))
            if str(version) != str(table._current_version):
                raise ConcurrentModificationException(
                    f"VersionId {version} is not the current version {table._current_version} of {table_input.get('Name')}")
        return update_table(self)
    return patched


def remember_dedup_ids(add_message):
    def patched(queue, message):
        if queue.fifo_queue and message.deduplication_id:
            seen = queue.__dict__.setdefault("_floe_dedup_ids", {})
            now = time.time()
            for key in [k for k, at in seen.items() if now - at >= sqs_models.DEDUPLICATION_TIME_IN_SECONDS]:
                del seen[key]
            if message.deduplication_id in seen:
                return None
            seen[message.deduplication_id] = now
        return add_message(queue, message)
    return patched


def redeliver_in_order(receive_message):
    def patched(backend, queue_name, *args, **kwargs):
        queue = backend.get_queue(queue_name)
        # Timed-out messages stop counting as in flight before the scan, so the scan
        # (in queue order) meets them first.
        for message in [m for m in queue.pending_messages if m.visible]:
            queue.pending_messages.remove(message)
        return receive_message(backend, queue_name, *args, **kwargs)
    return patched


def namespace_as_list(update_table_metadata_location):
    def patched(self):
        status, headers, body = update_table_metadata_location(self)
        answer = json.loads(body)
        if isinstance(answer.get("namespace"), str):
            answer["namespace"] = [answer["namespace"]]
        return status, headers, json.dumps(answer)
    return patched


s3tables_responses.S3TablesResponse.update_table_metadata_location = namespace_as_list(
    s3tables_responses.S3TablesResponse.update_table_metadata_location)
glue_responses.GlueResponse.update_table = enforce_version_id(glue_responses.GlueResponse.update_table)
sqs_models.Queue.add_message = remember_dedup_ids(sqs_models.Queue.add_message)
sqs_models.SQSBackend.receive_message = redeliver_in_order(sqs_models.SQSBackend.receive_message)

logging.getLogger("werkzeug").setLevel(logging.ERROR)
port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
server.start()
print(server.get_host_and_port()[1], flush=True)
if port:
    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopped.set())
    while not stopped.wait(1):
        pass
else:
    sys.stdin.read()
server.stop()
