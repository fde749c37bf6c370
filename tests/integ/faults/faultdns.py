#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""A faulty DNS server for the fault scenarios: listen on ADDR PORT over
UDP and TCP and answer by the queried name's first label (any zone):

  servfail   SERVFAIL
  hang       no answer at all (UDP and TCP)
  tc         UDP: an empty answer with TC set; TCP: the full answer
  tconly     UDP: TC set; TCP: the connection is closed without an answer
  cut        UDP: the answer cut off in the middle of its record, no TC
  gate*      held until a file named "release.LABEL" exists beside LOG,
             then answered as "anything else" (UDP and TCP)
  anything   A ADDR_A (argv[4]), TTL 0; AAAA is NODATA; the name
  else       "nx" is NXDOMAIN

Each query is appended to LOG (argv[3]) as "udp|tcp TYPE NAME". Prints
"ready" on stdout once both sockets are bound. Runs until killed.

The UDP socket gets a receive buffer of RCVBUF bytes (forced past
net.core.rmem_max when run as root), and only gate* queries get a thread
of their own: a burst of lookups (a broker retrying hundreds of held ones
at once) must reach the log, not overflow the socket, or a scenario that
expects an answer would see a lost packet instead."""

import ipaddress
import os
import socket
import struct
import sys
import threading
import time

LOCK = threading.Lock()
RCVBUF = 16 << 20
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)


def parse_question(buf):
    off, labels = 12, []
    while True:
        n = buf[off]
        if n == 0 or n & 0xC0:
            off += 1
            break
        labels.append(buf[off + 1:off + 1 + n].decode("ascii", "replace"))
        off += 1 + n
    qtype, _ = struct.unpack("!HH", buf[off:off + 4])
    return ".".join(labels).lower(), qtype, off + 4


def answer(buf, addr_a, tcp):
    """Return the reply bytes, or None for no reply, and the name."""
    qid, flags, qd = struct.unpack("!HHH", buf[:6])
    if qd != 1:
        return None, None, 0
    qname, qtype, end = parse_question(buf)
    first = qname.split(".", 1)[0]
    question = buf[12:end]
    rd = flags & 0x0100
    rcode, tc, answers, ancount = 0, 0, b"", 0
    if first == "hang" or (first == "tconly" and tcp):
        return None, qname, qtype
    if first == "servfail":
        rcode = 2
    elif first == "nx":
        rcode = 3
    elif first in ("tc", "tconly") and not tcp:
        tc = 0x0200
    elif qtype == 1:
        answers = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 0, 4) + \
            ipaddress.IPv4Address(addr_a).packed
        ancount = 1
    hdr = struct.pack("!HHHHHH", qid, 0x8400 | tc | rd | rcode, 1, ancount,
                      0, 0)
    out = hdr + question + answers
    if first == "cut" and qtype == 1:
        out = out[:len(out) - 3]	# inside the RDATA
    return out, qname, qtype


def logq(logf, proto, qname, qtype):
    with LOCK:
        with open(logf, "a") as f:
            f.write("%s %s %s\n" % (proto, {1: "A", 28: "AAAA"}.get(
                qtype, str(qtype)), qname))


def gate_wait(logf, qname):
    """Hold a gate* name's answer until its release file exists."""
    first = qname.split(".", 1)[0]
    if not first.startswith("gate"):
        return
    release = os.path.join(os.path.dirname(logf), "release." + first)
    while not os.path.exists(release):
        time.sleep(0.01)


def udp_answer(s, buf, peer, logf, addr_a):
    try:
        out, qname, qtype = answer(buf, addr_a, False)
    except (IndexError, struct.error):
        return
    if qname is not None:
        logq(logf, "udp", qname, qtype)
        gate_wait(logf, qname)
    if out is not None:
        s.sendto(out, peer)


def udp_loop(s, logf, addr_a):
    while True:
        buf, peer = s.recvfrom(4096)
        if buf[13:17].lower() == b"gate":
            threading.Thread(target=udp_answer,
                             args=(s, buf, peer, logf, addr_a),
                             daemon=True).start()
        else:
            udp_answer(s, buf, peer, logf, addr_a)


def recv_exact(c, n):
    buf = b""
    while len(buf) < n:
        chunk = c.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def tcp_conn(c, logf, addr_a):
    try:
        while True:
            ln = recv_exact(c, 2)
            if ln is None:
                return
            buf = recv_exact(c, struct.unpack("!H", ln)[0])
            if buf is None:
                return
            out, qname, qtype = answer(buf, addr_a, True)
            if qname is not None:
                logq(logf, "tcp", qname, qtype)
                gate_wait(logf, qname)
            if out is None:
                if qname is not None and qname.startswith("tconly."):
                    return		# close without an answer
                continue
            c.sendall(struct.pack("!H", len(out)) + out)
    except (OSError, IndexError, struct.error):
        pass
    finally:
        c.close()


def tcp_loop(ls, logf, addr_a):
    while True:
        c, _ = ls.accept()
        threading.Thread(target=tcp_conn, args=(c, logf, addr_a),
                         daemon=True).start()


def main():
    addr, port, logf, addr_a = sys.argv[1], int(sys.argv[2]), sys.argv[3], \
        sys.argv[4]
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
    except PermissionError:
        u.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
    u.bind((addr, port))
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind((addr, port))
    t.listen(16)
    threading.Thread(target=tcp_loop, args=(t, logf, addr_a),
                     daemon=True).start()
    print("ready", flush=True)
    udp_loop(u, logf, addr_a)


if __name__ == "__main__":
    sys.exit(main())
