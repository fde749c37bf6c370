#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Body echo for the lab: answers every request with the length and the
SHA-256 of the request body it read in full (Content-Length or chunked),
and the request's Host, so a test can check that a body crossed the broker
byte for byte. Usage: echo_httpd.py ADDR PORT."""
import hashlib
import http.server
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, *args):
        pass

    def read_body(self):
        if self.headers.get('Transfer-Encoding', '').lower() == 'chunked':
            body = b''
            while True:
                size = int(self.rfile.readline().split(b';')[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b'\r\n', b''):
                        pass
                    return body, 'chunked'
                body += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get('Content-Length', '0'))
        return self.rfile.read(n), 'length'

    def answer(self):
        body, how = self.read_body()
        text = '%s %d %s host=%s\n' % (how, len(body),
                                       hashlib.sha256(body).hexdigest(),
                                       self.headers.get('Host'))
        out = text.encode()
        self.send_response(200)
        self.send_header('Content-Type', 'text/plain')
        self.send_header('Content-Length', str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = answer


http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])),
                                Handler).serve_forever()
