#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""A raw guest for the STARTTLS scenario: on the instance socket argv[1],
HELLO (version 2), a tcp stream to argv[2] (HOST:PORT), and once it is
connected a STARTTLS frame followed at once, in the same write, by a DATA
frame of plaintext ("PLAINTEXT-AFTER-STARTTLS"): a protocol violation.
Exit 0 when the broker closed the connection within 10 s without ever
answering the STARTTLS, 1 otherwise."""

import socket
import struct
import sys
import time

REQUEST, RESPONSE, DATA, STARTTLS = 2, 3, 4, 13


def frame(ftype, payload, stream=0, version=1, flags=0):
    return struct.pack("!IBBBBI", len(payload), version, ftype, flags, 0,
                       stream) + payload


def frames(s, deadline):
    buf = b""
    while True:
        while len(buf) >= 12:
            n, _, t, _, _, sid = struct.unpack("!IBBBBI", buf[:12])
            if len(buf) < 12 + n:
                break
            yield t, sid, buf[12:12 + n]
            buf = buf[12 + n:]
        left = deadline - time.monotonic()
        if left <= 0:
            yield None, None, b"timeout"
            return
        s.settimeout(left)
        try:
            b = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            b = b""
        if not b:
            yield None, None, b"eof"
            return
        buf += b


s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(frame(1, struct.pack("!H", 2)))
auth = sys.argv[2].encode()
req = struct.pack("!BIIII", 3, 0, 0, 0, 0) + struct.pack("!H", 0) * 2 + \
    struct.pack("!H", len(auth)) + auth + struct.pack("!H", 0) * 2
deadline = time.monotonic() + 10
connected = False
for t, sid, p in frames(s, deadline):
    if t is None:
        print("closed:", p.decode(), flush=True)
        sys.exit(0 if connected and p == b"eof" else 1)
    print("frame", t, sid, len(p), flush=True)
    if t == 1:
        s.sendall(frame(REQUEST, req, stream=1))
    if t == STARTTLS:
        sys.exit(1)  # answered: the violation went unnoticed
    if t == RESPONSE and not connected:
        connected = True
        s.sendall(frame(STARTTLS, struct.pack("!H", 0), stream=1,
                        version=2) +
                  frame(DATA, b"PLAINTEXT-AFTER-STARTTLS\r\n", stream=1))
sys.exit(1)
