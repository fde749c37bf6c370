#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
# The demo's loopback upstreams: over HTTP, /hello answers 200 and
# /redirect answers a 302 toward the cloud metadata address (which the
# broker must refuse when the guest follows it); over TCP, a line echo
# that ends its side when the client ends its own. Both bind 127.0.0.1 on
# free ports; the HTTP port is printed on the first line, the TCP port on
# the second.
import http.server
import socket
import sys
import threading


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


def echo(c):
    with c:
        while True:
            b = c.recv(65536)
            if not b:
                break
            c.sendall(b)
        c.shutdown(socket.SHUT_WR)


def serve_echo(ls):
    while True:
        c, _ = ls.accept()
        threading.Thread(target=echo, args=(c,), daemon=True).start()


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
ls = socket.create_server(("127.0.0.1", 0))
threading.Thread(target=serve_echo, args=(ls,), daemon=True).start()
print(srv.server_address[1], flush=True)
print(ls.getsockname()[1], flush=True)
sys.stdout.close()
srv.serve_forever()
