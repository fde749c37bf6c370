#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""A rebinding DNS server for the test lab: listen on ADDR PORT (UDP) and
answer the first A query for NAME with FIRST and every later A query for
it with THEN, TTL 0, as an attacker-controlled zone would. AAAA queries for
NAME get an empty NOERROR answer (NODATA); other names get NXDOMAIN. Each
query is appended to LOG as "TYPE NAME" (TYPE A, AAAA or the number), so a
test can count how many times the broker resolved. Prints "ready" on
stdout once bound. Runs until killed."""

import ipaddress
import socket
import struct
import sys


def parse_question(buf):
    off, labels = 12, []
    while True:
        n = buf[off]
        if n == 0 or n & 0xC0:
            off += 1
            break
        labels.append(buf[off + 1:off + 1 + n].decode("ascii", "replace"))
        off += 1 + n
    qtype, qclass = struct.unpack("!HH", buf[off:off + 4])
    return ".".join(labels).lower(), qtype, qclass, off + 4


def main():
    addr, port, log, name, first, then = sys.argv[1:7]
    name = name.rstrip(".").lower()
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET,
                      socket.SOCK_DGRAM)
    s.bind((addr, int(port)))
    print("ready", flush=True)
    answered = 0
    while True:
        buf, peer = s.recvfrom(4096)
        if len(buf) < 17:
            continue
        qid, flags, qd = struct.unpack("!HHH", buf[:6])
        if qd != 1:
            continue
        try:
            qname, qtype, qclass, end = parse_question(buf)
        except (IndexError, struct.error):
            continue
        tname = {1: "A", 28: "AAAA"}.get(qtype, str(qtype))
        with open(log, "a") as f:
            f.write("%s %s\n" % (tname, qname))
        question = buf[12:end]
        rd = flags & 0x0100
        answers = b""
        ancount = 0
        rcode = 0
        if qname != name:
            rcode = 3
        elif qtype == 1:
            ip = first if answered == 0 else then
            answered += 1
            answers = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 0, 4) + \
                ipaddress.IPv4Address(ip).packed
            ancount = 1
        hdr = struct.pack("!HHHHHH", qid, 0x8400 | rd | rcode, 1, ancount,
                          0, 0)
        s.sendto(hdr + question + answers, peer)


if __name__ == "__main__":
    sys.exit(main())
