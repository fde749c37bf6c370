#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""A misbehaving HTTP/1.1 upstream for the fault scenarios: listen on ADDR
PORT (TCP) and behave according to the request path, one thread per
connection. Every event is appended to LOG as "EVENT CONN [DETAIL]" (CONN
is a connection counter), so a test can poll for it instead of sleeping:

  accept N            a connection was accepted
  req N PATH          the request head arrived (PATH without the query)
  body N BYTES        request body bytes received so far (/sink)
  sent N BYTES        response bytes written so far (partial modes)
  eof N               the peer closed (EOF or reset) while we waited
  closed N            we closed the connection ourselves

Paths:
  /ok          200, 100-byte body (OK_BODY), Connection: close
  /hold/KEY    wait until DIR/KEY.release exists (DIR = LOG's folder),
               then answer as /ok; gives up (closes) on EOF
  /reset       head with Content-Length 100000, 10000 body bytes, then RST
  /reset-head  RST before any response byte
  /close       close (FIN) before any response byte
  /stall-head  never answer; wait for the peer to close
  /stall-body  head with Content-Length 1000, 100 body bytes, then stall
  /drip        head with Content-Length 64 MiB, 512 KiB of body, stall
  /invalid     an invalid status line
  /bad-length  a 200 head whose Content-Length is not a number
  /oversized   a status line, then header lines without end (up to 1 MiB)
  /trailers    200, a chunked body "ok" with trailers: X-Sum (end to
               end) and fields that must not reach the guest (Connection
               naming X-Named, X-Named, Transfer-Encoding, Content-Length,
               Set-Cookie, Host)
  /sink        read the request body (logging progress) until EOF; when
               it is complete, answer as /ok
Prints "ready" on stdout once listening. Runs until killed."""

import os
import socket
import struct
import sys
import threading
import time

OK_BODY = b"0123456789" * 10
LOCK = threading.Lock()
COUNT = [0]


def log(path, *fields):
    with LOCK:
        with open(path, "a") as f:
            f.write(" ".join(str(x) for x in fields) + "\n")


def read_head(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            return None, b""
        buf += chunk
        if len(buf) > 1 << 20:
            return None, b""
    head, rest = buf.split(b"\r\n\r\n", 1)
    return head.decode("latin-1"), rest


def wait_eof(s, logf, n):
    """Block until the peer closes; discard what it sends."""
    try:
        while s.recv(65536):
            pass
    except OSError:
        pass
    log(logf, "eof", n)


def rst(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def ok(s, logf, n):
    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
              b"Content-Type: text/plain\r\nConnection: close\r\n\r\n"
              % len(OK_BODY) + OK_BODY)
    s.shutdown(socket.SHUT_WR)
    wait_eof(s, logf, n)


def serve(s, logf, n):
    head, rest = read_head(s)
    if head is None:
        log(logf, "eof", n)
        return
    line = head.split("\r\n", 1)[0].split(" ")
    path = line[1].split("?", 1)[0] if len(line) > 1 else "/"
    log(logf, "req", n, path)
    clen = 0
    for h in head.split("\r\n")[1:]:
        k, _, v = h.partition(":")
        if k.strip().lower() == "content-length":
            clen = int(v.strip())
    if path == "/ok":
        ok(s, logf, n)
    elif path.startswith("/hold/"):
        rel = os.path.join(os.path.dirname(logf), path[6:] + ".release")
        s.settimeout(0.02)
        while not os.path.exists(rel):
            try:
                if not s.recv(65536):
                    log(logf, "eof", n)
                    return
            except socket.timeout:
                pass
        s.settimeout(None)
        ok(s, logf, n)
    elif path == "/reset":
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" +
                  b"r" * 10000)
        log(logf, "sent", n, 10000)
        rst(s)
        log(logf, "closed", n)
        return
    elif path == "/reset-head":
        rst(s)
        log(logf, "closed", n)
        return
    elif path == "/close":
        s.close()
        log(logf, "closed", n)
        return
    elif path == "/stall-head":
        wait_eof(s, logf, n)
    elif path == "/stall-body":
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" +
                  b"s" * 100)
        log(logf, "sent", n, 100)
        wait_eof(s, logf, n)
    elif path == "/drip":
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
                  % (64 << 20))
        s.sendall(b"d" * (512 << 10))
        log(logf, "sent", n, 512 << 10)
        wait_eof(s, logf, n)
    elif path == "/trailers":
        s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                  b"Trailer: X-Sum\r\nConnection: close\r\n\r\n"
                  b"2\r\nok\r\n0\r\nX-Sum: 1\r\nConnection: X-Named\r\n"
                  b"X-Named: n\r\nTransfer-Encoding: chunked\r\n"
                  b"Content-Length: 9\r\nSet-Cookie: a=b\r\n"
                  b"Host: evil.example\r\n\r\n")
        s.shutdown(socket.SHUT_WR)
        wait_eof(s, logf, n)
    elif path == "/invalid":
        s.sendall(b"HTTP/1.1 2x0 Fine\r\nContent-Length: 2\r\n\r\nhi")
        wait_eof(s, logf, n)
    elif path == "/bad-length":
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\nhi")
        wait_eof(s, logf, n)
    elif path == "/oversized":
        try:
            s.sendall(b"HTTP/1.1 200 OK\r\n")
            line = b"X-Pad: " + b"p" * 1000 + b"\r\n"
            sent = 0
            while sent < 1 << 20:
                s.sendall(line)
                sent += len(line)
            log(logf, "sent", n, sent)
        except OSError:
            log(logf, "eof", n)
            return
        wait_eof(s, logf, n)
    elif path == "/sink":
        got = len(rest)
        log(logf, "body", n, got)
        try:
            while got < clen:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += len(chunk)
                log(logf, "body", n, got)
        except OSError:
            pass
        if got < clen:
            log(logf, "eof", n)
            return
        ok(s, logf, n)
    else:
        s.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n"
                  b"Connection: close\r\n\r\n")
        wait_eof(s, logf, n)
    try:
        s.close()
    except OSError:
        pass


def conn(s, logf, n):
    try:
        serve(s, logf, n)
    except OSError:
        log(logf, "eof", n)
    finally:
        try:
            s.close()
        except OSError:
            pass


def main():
    addr, port, logf = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ls = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(128)
    print("ready", flush=True)
    while True:
        s, _ = ls.accept()
        COUNT[0] += 1
        n = COUNT[0]
        log(logf, "accept", n)
        threading.Thread(target=conn, args=(s, logf, n), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
