#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""The lab's holding HTTP server: listen on ADDR PORT (IPv4 or IPv6) and, for GET
/hold/KEY?to=URL, create DIR/KEY.arrived, wait until DIR/KEY.release
exists (at most 60 s), then answer 302 with Location: URL. Any other path
answers 200 "gate". A test uses it to keep one egress-fetch -L (and so its
connection to the broker) open while it edits the broker's configuration,
then lets the redirect through so the next hop is decided on the edited
configuration. GET /cut/KEY waits in the same way, then resets its
connection without an answer (a kept-alive connection that fails under a
request). Every request is appended to DIR/access.log, with the
client's port (peer=PORT): one connection, one port."""

import http.server
import os
import socket
import struct
import sys
import time
import urllib.parse


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        with open(os.path.join(self.server.dir, "access.log"), "a") as f:
            f.write("%s %s peer=%d\n" % (self.headers.get("Host", "-"),
                                         self.requestline,
                                         self.client_address[1]))

    def hold(self, key):
        d = self.server.dir
        open(os.path.join(d, key + ".arrived"), "w").close()
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(d, key + ".release")):
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        parts = url.path.split("/")
        if len(parts) == 3 and parts[1] == "cut" and parts[2].isalnum():
            self.log_message("%s", "cut")
            self.hold(parts[2])
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        if len(parts) == 3 and parts[1] == "hold" and parts[2].isalnum():
            key = parts[2]
            to = urllib.parse.parse_qs(url.query).get("to", ["/"])[0]
            self.hold(key)
            self.send_response(302)
            self.send_header("Location", to)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"gate\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server6(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6


def main():
    addr, port, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    cls = Server6 if ":" in addr else http.server.ThreadingHTTPServer
    srv = cls((addr, port), Handler)
    srv.dir = d
    srv.daemon_threads = True
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
