#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Minimal DNS client for the test lab (there is no dig in the image): send
one query for NAME and TYPE (A or AAAA) over UDP to SERVER PORT and print
the rcode name, then one answer address per line. Exit 0 when a reply
arrived (whatever its rcode), 1 on timeout or a malformed reply."""

import ipaddress
import os
import socket
import struct
import sys

TYPES = {"A": 1, "AAAA": 28}
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN",
          4: "NOTIMP", 5: "REFUSED"}


def encode_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        out += bytes([len(label)]) + label.encode("ascii")
    return out + b"\0"


def skip_name(buf, off):
    while True:
        n = buf[off]
        if n & 0xC0 == 0xC0:
            return off + 2
        if n == 0:
            return off + 1
        off += 1 + n


def main():
    if len(sys.argv) != 5 or sys.argv[2] not in TYPES:
        print("usage: dnsq.py NAME A|AAAA SERVER PORT", file=sys.stderr)
        return 2
    name, qtype, server, port = sys.argv[1], TYPES[sys.argv[2]], \
        sys.argv[3], int(sys.argv[4])
    qid = struct.unpack("!H", os.urandom(2))[0]
    msg = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + \
        encode_name(name) + struct.pack("!HH", qtype, 1)
    fam = socket.AF_INET6 if ":" in server else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(2.0)
    s.sendto(msg, (server, port))
    try:
        buf, _ = s.recvfrom(4096)
    except socket.timeout:
        print("timeout", file=sys.stderr)
        return 1
    rid, flags, qd, an, _, _ = struct.unpack("!HHHHHH", buf[:12])
    if rid != qid:
        return 1
    print(RCODES.get(flags & 0xF, str(flags & 0xF)))
    off = 12
    for _ in range(qd):
        off = skip_name(buf, off) + 4
    for _ in range(an):
        off = skip_name(buf, off)
        rtype, _, _, rdlen = struct.unpack("!HHIH", buf[off:off + 10])
        off += 10
        rdata = buf[off:off + rdlen]
        off += rdlen
        if rtype == 1 and rdlen == 4:
            print(ipaddress.IPv4Address(rdata))
        elif rtype == 28 and rdlen == 16:
            print(ipaddress.IPv6Address(rdata))
    return 0


if __name__ == "__main__":
    sys.exit(main())
