#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""An SMTP-like upstream for the STARTTLS scenario. argv: MODE ADDR PORT
CERT KEY RECORD. Prints "ready" once listening, then serves connections
one at a time. Every byte it receives after its STARTTLS go-ahead (raw,
before any TLS) is appended to RECORD.

Modes:
  ok      greeting 220, EHLO -> 250 STARTTLS, STARTTLS -> 220, then TLS
          with CERT/KEY and a line echo over it
  badhs   ... 220 go-ahead, then records what comes and answers
          plaintext instead of a ServerHello, and closes
  inject  the 220 go-ahead and "250 INJECTED" in one write, then TLS
  inject-late  the 220 go-ahead, then once the client's next bytes came
          (its ClientHello), "250 INJECTED", then TLS
  record  says nothing: records every byte it receives
  hold    as ok, but after the client's STARTTLS it creates RECORD.asked
          and holds its go-ahead until RECORD.go exists"""

import os
import socket
import ssl
import sys
import time

mode, addr, port, cert, key, record = sys.argv[1:7]


def rec(data):
    with open(record, "ab") as f:
        f.write(data)


def readline(c):
    buf = b""
    while not buf.endswith(b"\n"):
        b = c.recv(1)
        if not b:
            raise EOFError
        buf += b
    return buf


def serve(c):
    if mode == "record":
        while True:
            b = c.recv(65536)
            if not b:
                return
            rec(b)
    c.sendall(b"220 lab ESMTP\r\n")
    readline(c)  # EHLO
    c.sendall(b"250-lab\r\n250 STARTTLS\r\n")
    if not readline(c).upper().startswith(b"STARTTLS"):
        return
    if mode == "hold":
        open(record + ".asked", "wb").close()
        while not os.path.exists(record + ".go"):
            time.sleep(0.01)
    if mode == "inject":
        c.sendall(b"220 go ahead\r\n250 INJECTED\r\n")
    else:
        c.sendall(b"220 go ahead\r\n")
    if mode == "inject-late":
        first = c.recv(1, socket.MSG_PEEK)
        rec(first)
        c.sendall(b"250 INJECTED\r\n")
    if mode == "badhs":
        c.settimeout(5)
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                rec(b)
                c.sendall(b"500 not tls\r\n")
                break
        except socket.timeout:
            pass
        return
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    t = ctx.wrap_socket(c, server_side=True)
    f = t.makefile("rwb")
    for line in f:
        f.write(line)
        f.flush()
    t.unwrap()


s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, int(port)))
s.listen(8)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    try:
        serve(c)
    except (OSError, EOFError, ssl.SSLError):
        pass
    finally:
        c.close()
