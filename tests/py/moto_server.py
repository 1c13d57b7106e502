#!/usr/bin/env python3
"""Starts a moto server (S3, SQS, DynamoDB, Glue, ...) on 127.0.0.1 at a free port, prints
the port on stdout, and serves until its standard input closes — so the server ends with
the test process that started it, however that process ends."""
import logging
import sys

from moto.server import ThreadedMotoServer

logging.getLogger("werkzeug").setLevel(logging.ERROR)
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
print(server.get_host_and_port()[1], flush=True)
sys.stdin.read()
server.stop()
