#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
# The demo's loopback upstream: /hello answers 200, /redirect answers a
# 302 toward the cloud metadata address (which the broker must refuse when
# the guest follows it). Binds 127.0.0.1 on a free port, prints the port.
import http.server
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"hello from a service on 127.0.0.1, through egressd\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(srv.server_address[1], flush=True)
sys.stdout.close()
srv.serve_forever()
