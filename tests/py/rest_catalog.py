"""A small Iceberg REST catalog server for the tests, backed by PyIceberg's SqlCatalog.

No REST catalog server installs offline from PyPI or crates.io (Polaris, Nessie, Gravitino
and Lakekeeper are JVM or container services), so this one follows the REST spec's
endpoints and leaves the semantics to PyIceberg: requests and commits are parsed with
PyIceberg's own models (CommitTableRequest, its TableRequirements and TableUpdates), and
SqlCatalog.commit_table validates the requirements against the table as it is and
applies the updates, writing the new metadata file itself. A stale requirement
(assert-ref-snapshot-id, assert-table-uuid, …) is answered 409, as the spec says.
Format v3 tables too: PyIceberg 0.12 applies their updates but writes no v3 metadata
itself, so v3_metadata.py lets it.

Usage: rest_catalog.py WAREHOUSE_DIR [--credential ID:SECRET] [--vend S3_ENDPOINT BUCKET]
Prints its port on the first line of stdout (it listens on 127.0.0.1:0), then serves until
stdin closes. With --credential every endpoint but POST /v1/oauth/tokens needs a bearer
token that endpoint gave for that client credential (OAuth2 client_credentials).

With --vend the tables live in S3 (s3://BUCKET/rest/<ns>.db/<table>, the bucket existing,
S3 at S3_ENDPOINT: moto), the catalog's own metadata files written with the access key
"rest-catalog", and a loadTable or stage-create asked for `X-Iceberg-Access-Delegation:
vended-credentials` vends the table's credentials: `config` holds the endpoint, region and
path-style addressing, `storage-credentials` one entry for the table's location with a
fresh access key id each time ("vended-<n>"), a session token and its expiry (an hour).
Nothing else gives a client these keys, so a request signed with one was sent by a
client that used what the catalog vended.

Fault switches, each as some catalog behaves:
  --token-uses N        tokens come without `expires_in` and die after N requests (401)
  --apply-then-500 N    every Nth commit is applied, then answered 500
  --conflict-every N    every Nth commit is refused with 409 (not applied)
  --location-per-create each create or stage-create gets a location of its own
                        (<ns>.db/<table>-<random>), as BigLake's catalog does
  --no-stage-create     stage-create and register answer 501: tables are made by a plain
                        create (schema, spec, location), then committed to

Endpoints: GET /v1/config; POST /v1/oauth/tokens; GET|POST /v1/namespaces;
GET|POST /v1/namespaces/{ns}/tables (POST: createTable, plain or stage-create);
POST /v1/namespaces/{ns}/register; GET|POST|DELETE /v1/namespaces/{ns}/tables/{t}
(loadTable, commit, dropTable); POST /v1/tables/rename; and GET /test/tokens (how many tokens were given: for the tests).
"""

import itertools
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

import v3_metadata  # noqa: F401 (format v3 tables: PyIceberg applies their commits; this writes them)

warehouse = os.path.abspath(sys.argv[1])
credential = sys.argv[sys.argv.index("--credential") + 1] if "--credential" in sys.argv else None
vend = sys.argv[sys.argv.index("--vend") + 1:sys.argv.index("--vend") + 3] if "--vend" in sys.argv else None
S3_SETTINGS = {"s3.endpoint": vend[0], "s3.region": "us-east-1", "s3.path-style-access": "true"} if vend else {}
catalog = SqlCatalog(
    "rest",
    uri=f"sqlite:///{os.path.join(warehouse, 'rest_catalog.db')}",
    warehouse=f"s3://{vend[1]}/rest" if vend else warehouse,
    **S3_SETTINGS,
    **({"s3.access-key-id": "rest-catalog", "s3.secret-access-key": "rest-catalog"} if vend else {}),
)
def option(name):
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else None


token_uses = option("--token-uses")
apply_then_500 = option("--apply-then-500")
conflict_every = option("--conflict-every")
location_per_create = "--location-per-create" in sys.argv
no_stage_create = "--no-stage-create" in sys.argv
commits = itertools.count(1)
vended = itertools.count(1)
# One request at a time: SQLite connections stay on one thread, and each commit's
# check-then-apply is atomic (SqlCatalog's own UPDATE … WHERE metadata_location = old
# would also refuse a lost race).
lock = threading.Lock()
# Each token given, and how many requests it has left (None: no limit).
tokens = {}
tokens_given = itertools.count(1)
given = 0


class Answer(Exception):
    def __init__(self, status, kind, message):
        self.status, self.kind, self.message = status, kind, message


def error(status, kind, message):
    return Answer(status, kind, message)


def storage(location, delegation):
    """The `config` and `storage-credentials` of a table answer: credentials for the
    table's location when the server vends and the client asked."""
    if not vend or "vended-credentials" not in delegation:
        return {"config": {}}
    n = next(vended)
    keys = {"s3.access-key-id": f"vended-{n}", "s3.secret-access-key": f"secret-{n}",
            "s3.session-token": f"token-{n}",
            "s3.session-token-expires-at-ms": str(int(time.time() * 1000) + 3_600_000)}
    return {"config": dict(S3_SETTINGS), "storage-credentials": [{"prefix": location, "config": keys}]}


def table_result(table, delegation=""):
    return {
        "metadata-location": table.metadata_location,
        "metadata": json.loads(table.metadata.model_dump_json(by_alias=True, exclude_none=True)),
        **storage(table.metadata.location, delegation),
    }


def route(method, parts, query, body, delegation=""):
    """The answer (a JSON value) to one request, or an Answer raised."""
    if parts == ["v1", "config"]:
        return {"defaults": {}, "overrides": {}}
    if parts == ["v1", "tables", "rename"]:
        source, destination = body["source"], body["destination"]
        catalog.rename_table((*source["namespace"], source["name"]), (*destination["namespace"], destination["name"]))
        return None
    if parts == ["v1", "namespaces"]:
        if method == "GET":
            return {"namespaces": [list(ns) for ns in catalog.list_namespaces()]}
        namespace = tuple(body["namespace"])
        try:
            catalog.create_namespace(namespace, body.get("properties") or {})
        except NamespaceAlreadyExistsError:
            raise error(409, "AlreadyExistsException", f"namespace {'.'.join(namespace)} exists")
        return {"namespace": list(namespace), "properties": body.get("properties") or {}}
    if len(parts) == 3 and parts[:2] == ["v1", "namespaces"] and method == "GET":
        try:
            return {"namespace": [parts[2]], "properties": catalog.load_namespace_properties(parts[2])}
        except NoSuchNamespaceError:
            raise error(404, "NoSuchNamespaceException", f"no namespace {parts[2]}")
    if len(parts) == 4 and parts[:2] == ["v1", "namespaces"] and parts[3] == "register":
        if no_stage_create:
            raise error(501, "NotImplementedException", "this catalog does not register metadata files")
        try:
            table = catalog.register_table((parts[2], body["name"]), body["metadata-location"])
        except TableAlreadyExistsError:
            raise error(409, "AlreadyExistsException", f"table {parts[2]}.{body['name']} exists")
        except NoSuchNamespaceError:
            raise error(404, "NoSuchNamespaceException", f"no namespace {parts[2]}")
        return table_result(table)
    if len(parts) == 4 and parts[:2] == ["v1", "namespaces"] and parts[3] == "tables":
        if method == "GET":
            try:
                identifiers = catalog.list_tables(parts[2])
            except NoSuchNamespaceError:
                raise error(404, "NoSuchNamespaceException", f"no namespace {parts[2]}")
            return {"identifiers": [{"namespace": list(i[:-1]), "name": i[-1]} for i in identifiers]}
        location = body.get("location") or catalog._resolve_table_location(None, parts[2], body["name"])
        if location_per_create and not body.get("location"):
            location = f"{location}-{uuid.uuid4().hex[:8]}"
        if not body.get("stage-create"):
            spec = body.get("partition-spec")
            try:
                table = catalog.create_table(
                    (parts[2], body["name"]), Schema.model_validate(body["schema"]), location=location,
                    partition_spec=PartitionSpec.model_validate(spec) if spec else UNPARTITIONED_PARTITION_SPEC,
                    properties=body.get("properties") or {})
            except TableAlreadyExistsError:
                raise error(409, "AlreadyExistsException", f"table {parts[2]}.{body['name']} exists")
            return table_result(table, delegation)
        if no_stage_create:
            raise error(501, "NotImplementedException", "this catalog has no staged create")
        metadata = new_table_metadata(
            Schema(), UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location, body.get("properties") or {}
        )
        return {"metadata": json.loads(metadata.model_dump_json(by_alias=True, exclude_none=True)),
                **storage(location, delegation)}
    if len(parts) == 5 and parts[:2] == ["v1", "namespaces"] and parts[3] == "tables":
        identifier = (parts[2], parts[4])
        try:
            table = catalog.load_table(identifier)
        except (NoSuchTableError, NoSuchNamespaceError):
            raise error(404, "NoSuchTableException", f"no table {'.'.join(identifier)}")
        if method == "GET":
            return table_result(table, delegation)
        if method == "DELETE":
            catalog.drop_table(identifier)
            return None
        # The spec makes the identifier optional here (the path names the table);
        # PyIceberg's model wants it.
        body.setdefault("identifier", {"namespace": [identifier[0]], "name": identifier[1]})
        request = CommitTableRequest.model_validate(body)
        n = next(commits)
        if conflict_every and n % conflict_every == 0:
            raise error(409, "CommitFailedException", f"commit {n}: refused, as every {conflict_every}th is")
        try:
            response = catalog.commit_table(table, tuple(request.requirements), tuple(request.updates))
        except CommitFailedException as e:
            raise error(409, "CommitFailedException", str(e))
        if apply_then_500 and n % apply_then_500 == 0:
            raise error(500, "ServiceFailureException", f"commit {n}: applied, then this answer")
        return {
            "metadata-location": response.metadata_location,
            "metadata": json.loads(response.metadata.model_dump_json(by_alias=True, exclude_none=True)),
        }
    raise error(404, "NotFound", f"{method} /{'/'.join(parts)}: no such endpoint")


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def token(self, form):
        if credential is not None and f"{form.get('client_id', [''])[0]}:{form.get('client_secret', [''])[0]}" != credential:
            return self.answer(401, {"error": "invalid_client", "error_description": "unknown client credentials"})
        global given
        token = f"token-{uuid.uuid4()}"
        tokens[token] = token_uses
        given = next(tokens_given)
        answer = {"access_token": token, "token_type": "bearer",
                  "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}
        if token_uses is None:
            answer["expires_in"] = 3600
        return self.answer(200, answer)

    def handle_request(self, method):
        url = urlparse(self.path)
        parts = [unquote(p) for p in url.path.split("/") if p]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if parts == ["v1", "oauth", "tokens"] and method == "POST":
            return self.token(parse_qs(raw.decode()))
        if parts == ["test", "tokens"]:
            return self.answer(200, {"tokens": given})
        if credential is not None:
            bearer = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
            with lock:
                left = tokens.get(bearer, 0)
                if left is not None:
                    if left > 0:
                        tokens[bearer] = left - 1
                    else:
                        tokens.pop(bearer, None)
            if left == 0:
                return self.answer(401, {"error": {"message": "no valid bearer token", "type": "NotAuthorizedException", "code": 401}})
        try:
            body = json.loads(raw) if raw else {}
            with lock:
                delegation = self.headers.get("X-Iceberg-Access-Delegation") or ""
                value = route(method, parts, parse_qs(url.query), body, delegation)
            self.answer(200, value)
        except Answer as a:
            self.answer(a.status, {"error": {"message": a.message, "type": a.kind, "code": a.status}})
        except Exception as e:  # a request the models refuse: the client's mistake
            self.answer(400, {"error": {"message": f"{type(e).__name__}: {e}", "type": "BadRequestException", "code": 400}})

    def do_GET(self):
        self.handle_request("GET")

    def do_POST(self):
        self.handle_request("POST")

    def do_DELETE(self):
        self.handle_request("DELETE")


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
print(server.server_address[1], flush=True)
sys.stdin.read()
server.shutdown()
