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
    says (moto answers a string, which the AWS SDKs refuse to parse);
  - a ranged GET (`Range: bytes=A-B`) reads only those bytes of the object, as S3 serves
    it (moto reads the whole object for every range and slices it, so reading an object
    in N ranges cost N times the object: the materializer's time was moto's).

It also counts the requests it serves, per service and operation ("s3 GetObject",
"dynamodb PutItem", ...; and "dynamodb BatchWriteItem items", the items of the batch
requests): `GET /_floe/requests` answers the counts so far as a JSON object (the cost
benchmark bills them). And it keeps who signed each S3 request: `GET
/_floe/signed?prefix=/BUCKET/KEY_PREFIX` answers [[access key id, operation, path], ...]
for the signed path-style requests under that prefix, in order (the key id from the
SigV4 Authorization header's Credential; a listing's path is `/bucket/<its prefix>`).
"""
import collections
import io
import json
import logging
import re
import signal
import sys
import threading
import time
from urllib.parse import parse_qs

from moto.glue import responses as glue_responses
from moto.glue.exceptions import GlueClientError
from moto.moto_server import threaded_moto_server
from moto.s3 import models as s3_models
from moto.s3 import responses as s3_responses
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


class Window:
    """An object's bytes as moto's range handling uses them (its length, a slice), read
    from the object's buffer only where sliced."""

    def __init__(self, key):
        self.key = key

    def __len__(self):
        return self.key.size

    def __bool__(self):
        return self.key.size > 0

    def __getitem__(self, part):
        start, stop, _ = part.indices(self.key.size)
        with self.key.lock:
            self.key._value_buffer.seek(start)
            return self.key._value_buffer.read(max(0, stop - start))


RANGED = threading.local()
WHOLE_VALUE = s3_models.FakeKey.value


def value_or_window(key):
    """The key's value; a Window on it while a single-range GET is served."""
    return Window(key) if getattr(RANGED, "on", False) else WHOLE_VALUE.fget(key)


def ranged_reads(get_object):
    def patched(self):
        bounds = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("range") or "")
        # Only `A-B` with A <= B, not a part number: moto then slices the body (a
        # reversed or open range it may answer whole, which needs the bytes).
        if bounds is None or int(bounds[1]) > int(bounds[2]) or "partNumber" in self.querystring:
            return get_object(self)
        RANGED.on = True
        try:
            return get_object(self)
        finally:
            RANGED.on = False
    return patched


def s3_operation(method, path, query, headers):
    """The S3 REST operation of a path-style request."""
    has_key = "/" in path.strip("/")
    if not has_key:
        if method == "GET":
            return "ListMultipartUploads" if "uploads" in query else "ListObjects"
        return {"PUT": "CreateBucket", "HEAD": "HeadBucket", "DELETE": "DeleteBucket",
                "POST": "DeleteObjects"}.get(method, method)
    if method == "PUT":
        if "partNumber" in query:
            return "UploadPartCopy" if "HTTP_X_AMZ_COPY_SOURCE" in headers else "UploadPart"
        return "CopyObject" if "HTTP_X_AMZ_COPY_SOURCE" in headers else "PutObject"
    if method == "POST":
        return "CreateMultipartUpload" if "uploads" in query else "CompleteMultipartUpload"
    if method == "DELETE":
        return "AbortMultipartUpload" if "uploadId" in query else "DeleteObject"
    if method == "GET" and "uploadId" in query:
        return "ListParts"
    return {"GET": "GetObject", "HEAD": "HeadObject"}.get(method, method)


def signed_path(name, environ):
    """The path of an S3 request; a listing's with its prefix (`/bucket/prefix`)."""
    path = environ.get("PATH_INFO", "/")
    if name == "s3 ListObjects":
        prefix = parse_qs(environ.get("QUERY_STRING", "")).get("prefix", [""])[0]
        return path.rstrip("/") + "/" + prefix
    return path


def access_key_id(environ):
    auth = environ.get("HTTP_AUTHORIZATION", "")
    return auth.split("Credential=", 1)[1].split("/", 1)[0] if "Credential=" in auth else "unsigned"


def operation(environ):
    """"service Operation" of a request, from its SigV4 credential scope and its target
    header (JSON protocols) or its method and path (S3)."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    scope = auth.split("Credential=", 1)[1].split(",", 1)[0].split("/") if "Credential=" in auth else []
    service = scope[3] if len(scope) > 3 else "unsigned"
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return f"{service} {target.rsplit('.', 1)[-1]}"
    if service == "s3":
        query = environ.get("QUERY_STRING", "")
        keys = {part.split("=", 1)[0] for part in query.split("&") if part}
        return f"s3 {s3_operation(environ['REQUEST_METHOD'], environ.get('PATH_INFO', '/'), keys, environ)}"
    return f"{service} {environ['REQUEST_METHOD']} {environ.get('PATH_INFO', '/')}"


def batch_items(environ):
    """The items of a DynamoDB batch request (each billed as one request unit); the body
    is read and put back for moto."""
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    environ["wsgi.input"] = io.BytesIO(body)
    requests = json.loads(body or b"{}").get("RequestItems", {}).values()
    return sum(len(r) if isinstance(r, list) else len(r.get("Keys", [])) for r in requests)


class CountingApp:
    """Counts each request by `operation` before moto serves it; serves the counts."""

    def __init__(self, app):
        self.app = app
        self.counts = collections.Counter()
        self.signed = []
        self.lock = threading.Lock()

    def answer(self, start_response, value):
        body = json.dumps(value).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    def __call__(self, environ, start_response):
        if environ.get("PATH_INFO") == "/_floe/requests":
            with self.lock:
                return self.answer(start_response, self.counts)
        if environ.get("PATH_INFO") == "/_floe/signed":
            prefix = parse_qs(environ.get("QUERY_STRING", "")).get("prefix", ["/"])[0]
            with self.lock:
                return self.answer(start_response, [s for s in self.signed if s[2].startswith(prefix)])
        name = operation(environ)
        items = batch_items(environ) if name in ("dynamodb BatchWriteItem", "dynamodb BatchGetItem") else 0
        with self.lock:
            self.counts[name] += 1
            if items:
                self.counts[name + " items"] += items
            if name.startswith("s3 "):
                self.signed.append((access_key_id(environ), name[3:], signed_path(name, environ)))
        return self.app(environ, start_response)


def counting(dispatcher):
    return lambda create_app: CountingApp(dispatcher(create_app))


threaded_moto_server.DomainDispatcherApplication = counting(threaded_moto_server.DomainDispatcherApplication)


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
s3_models.FakeKey.value = property(value_or_window, WHOLE_VALUE.fset)
s3_responses.S3Response.get_object = ranged_reads(s3_responses.S3Response.get_object)

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
