#!/usr/bin/env python3
"""A minimal NDJSON receiver for trying the http-sink and measuring it (docs/benchmarks.md).

POST: counts the lines of the body and answers 200. GET: the lines counted so far.
Usage: python3 tools/ndjson-receiver.py [PORT]   (default 18555, loopback only)
"""
import http.server
import sys

received = 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        global received
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        received += body.count(b"\n")
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self):
        text = f"{received}\n".encode()
        self.send_response(200)
        self.send_header("content-length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def log_message(self, *args):
        pass


port = int(sys.argv[1]) if len(sys.argv) > 1 else 18555
http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
