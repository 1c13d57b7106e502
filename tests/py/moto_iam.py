#!/usr/bin/env python3
"""Starts a moto server that enforces IAM, with an S3 table bucket and IAM users allowed
the given actions, and prints on stdout one JSON line: {"port", "table_bucket_arn",
"keys": {user: [access key id, secret]}}. Serves until its standard input closes.

    moto_iam.py '{"bucket": "b", "users": {"committer": ["s3tables:GetTableBucket", ...]}}'

Each user's policy allows its actions on every resource: moto evaluates the actions of
an S3 Tables request against the resource `*` (not the bucket's or table's ARN), so
resource scoping cannot be tested here (tests/integration/infra.rs checks it on the
template). moto checks requests' SigV4 signatures against a canonical path of its own,
which differs from the SDKs' for S3 Tables' ARN-bearing paths; the signature check is
skipped, the credentials' user and its policy still decide.
"""
import json
import logging
import sys

import boto3
from moto import settings
from moto.iam import access_control
from moto.server import ThreadedMotoServer

access_control.IAMRequest.check_signature = lambda self: None
logging.getLogger("werkzeug").setLevel(logging.ERROR)

wanted = json.loads(sys.argv[1])
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
port = server.get_host_and_port()[1]
endpoint = f"http://127.0.0.1:{port}"
admin = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
             aws_secret_access_key="testing")
arn = boto3.client("s3tables", **admin).create_table_bucket(name=wanted["bucket"])["arn"]
iam = boto3.client("iam", **admin)
keys = {}
for user, actions in wanted["users"].items():
    iam.create_user(UserName=user)
    statement = {"Effect": "Allow", "Action": actions, "Resource": "*"}
    policy = json.dumps({"Version": "2012-10-17", "Statement": [statement]})
    iam.put_user_policy(UserName=user, PolicyName="floe", PolicyDocument=policy)
    key = iam.create_access_key(UserName=user)["AccessKey"]
    keys[user] = [key["AccessKeyId"], key["SecretAccessKey"]]
# From here on every request is authenticated and authorized.
settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
print(json.dumps({"port": port, "table_bucket_arn": arn, "keys": keys}), flush=True)
sys.stdin.read()
server.stop()
