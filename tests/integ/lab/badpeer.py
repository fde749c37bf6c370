#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""A misbehaving (or minimal well-behaved) client of an egressd instance
socket, for the protocol-violation scenario. Frame header (proto/proto.h,
docs/protocol.md): u32 payload length, u8 version (1), u8 type, u8 flags,
u8 reserved (0), u32 stream id, all big-endian; HELLO (type 1) carries a
u16 version; PING (10) and PONG (11) carry 8 opaque bytes.

Modes (argv[1]), socket path argv[2]:
  garbage      an HTTP request line and 4 KiB of random bytes, no HELLO
               (the proxy front answers the request, then drops the
               connection at bytes that cannot start a request head)
  oversized    HELLO, then a DATA frame header announcing 1 MiB, then bytes
  over-cap     HELLO, then a header whose length is the cap + 1 (98305)
  before-hello a well-formed PING as the first frame (no HELLO)
  double-hello HELLO twice
  ping         HELLO, then PING: expect the HELLO answer and a PONG
  ws-reset AUTHORITY
               HELLO offering version 2, a websocket REQUEST for
               ws://AUTHORITY/, and once its RESPONSE 101 came, RESET on
               that stream (cancelled); prints "reset", then keeps the
               connection open for 20 s, or until the broker closes it
For the violation modes, exit 0 when the broker closed the connection
within 5 s (after at most some frames, printed), 1 when it left it open.
For ping, exit 0 when the PONG arrived with the same opaque bytes; for
ws-reset, exit 0 when the RESPONSE 101 came before the RESET."""

import os
import socket
import struct
import sys
import time

VERSION = 1
HELLO, REQUEST, RESPONSE, DATA, RESET, ERROR, PING, PONG = \
    1, 2, 3, 4, 7, 8, 10, 11
CANCELLED = 10
TRANSPORT_WEBSOCKET = 2
PAYLOAD_MAX = 98304


def frame(ftype, payload=b"", stream=0, flags=0, length=None):
    n = len(payload) if length is None else length
    return struct.pack("!IBBBBI", n, VERSION, ftype, flags, 0, stream) + \
        payload


def hello():
    return frame(HELLO, struct.pack("!H", VERSION))


def pstr(b):
    return struct.pack("!H", len(b)) + b


def ws_reset(s, authority):
    send(s, frame(HELLO, struct.pack("!H", 2)))
    req = struct.pack("!BIIII", TRANSPORT_WEBSOCKET, 0, 0, 0, 0) + \
        pstr(b"GET") + pstr(b"ws") + pstr(authority.encode()) + \
        pstr(b"/") + struct.pack("!H", 0)
    send(s, frame(REQUEST, req, stream=1))
    for f in read_frames(s, time.monotonic() + 10):
        if f is None:
            print("closed before the RESPONSE")
            return 1
        ftype, stream, payload = f
        if ftype == ERROR:
            print("ERROR frame %r" % payload)
            return 1
        if ftype == RESPONSE and stream == 1:
            status = struct.unpack("!H", payload[:2])[0]
            if status != 101:
                print("RESPONSE %d" % status)
                return 1
            send(s, frame(RESET, struct.pack("!I", CANCELLED), stream=1))
            print("reset", flush=True)
            for g in read_frames(s, time.monotonic() + 20):
                if g is None:
                    break
            return 0
    print("no RESPONSE within 10 s")
    return 1


def read_frames(s, deadline):
    """Yield (type, stream, payload) until EOF (then None) or deadline."""
    buf = b""
    while True:
        while len(buf) >= 12:
            n, _, ftype, _, _, stream = struct.unpack("!IBBBBI", buf[:12])
            if len(buf) < 12 + n:
                break
            yield ftype, stream, buf[12:12 + n]
            buf = buf[12 + n:]
        left = deadline - time.monotonic()
        if left <= 0:
            return
        s.settimeout(left)
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            return
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
        if not chunk:
            yield None
            return
        buf += chunk


def send(s, data):
    try:
        s.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass		# already dropped: what we want


def expect_close(s):
    for f in read_frames(s, time.monotonic() + 5):
        if f is None:
            print("closed by the broker")
            return 0
        ftype, stream, payload = f
        if ftype == ERROR and len(payload) >= 4:
            code = struct.unpack("!I", payload[:4])[0]
            print("frame ERROR stream %d code %d %r" %
                  (stream, code, payload[6:]))
        else:
            print("frame type %d stream %d len %d" %
                  (ftype, stream, len(payload)))
    print("connection still open after the violation")
    return 1


def main():
    mode, path = sys.argv[1], sys.argv[2]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    if mode == "garbage":
        # An HTTP request where a frame header belongs: the proxy front
        # serves it, and the random bytes after it are no request head.
        send(s, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + os.urandom(4096))
    elif mode == "oversized":
        send(s, hello())
        send(s, frame(DATA, stream=1, length=1 << 20) + b"\0" * 65536)
    elif mode == "over-cap":
        send(s, hello())
        send(s, frame(DATA, stream=1, length=PAYLOAD_MAX + 1) +
             b"\0" * 4096)
    elif mode == "before-hello":
        send(s, frame(PING, b"12345678"))
    elif mode == "double-hello":
        send(s, hello() + hello())
    elif mode == "ws-reset":
        return ws_reset(s, sys.argv[3])
    elif mode == "ping":
        send(s, hello() + frame(PING, b"pinglab!"))
        got_hello = False
        for f in read_frames(s, time.monotonic() + 5):
            if f is None:
                print("closed before PONG")
                return 1
            ftype, _, payload = f
            if ftype == HELLO:
                got_hello = True
            elif ftype == PONG and got_hello and payload == b"pinglab!":
                print("pong")
                return 0
            elif ftype == ERROR:
                print("ERROR frame %r" % payload)
                return 1
        print("no PONG within 5 s")
        return 1
    else:
        print("unknown mode", file=sys.stderr)
        return 2
    return expect_close(s)


if __name__ == "__main__":
    sys.exit(main())
