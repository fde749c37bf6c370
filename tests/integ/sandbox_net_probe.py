# SPDX-License-Identifier: ISC
"""sandbox_net_probe: runs inside egress-sandbox --net (sandbox_net.sh).

probe ADDR...: check what the sandbox promised and print one "ok ..." or
  "FAIL ..." line per check (exit 1 on any FAIL): no socket was
  inherited (the launcher's control connection, the listeners);
  /proc/net/dev, /proc/1/net/dev and /sys/class/net list lo
  only; a name does not resolve; a TCP connect and a UDP DNS query to
  each ADDR fail with ENETUNREACH at once; /etc/resolv.conf names only
  192.0.2.1; the proxy variables name http://127.0.0.1:3128
  and no_proxy/NO_PROXY are unset or empty; socket(AF_UNIX), raw,
  packet and netlink sockets, unshare(CLONE_NEWUSER/NEWNET/NEWNS),
  clone(CLONE_NEWUSER), setns and a datagram socketpair fail with EPERM,
  clone3 with ENOSYS; an AF_INET socket and a stream socketpair(AF_UNIX)
  work.
sysnet: only the interface checks of probe.
hello HOST: the wire protocol's HELLO over TCP to HOST:3128; print
  "hello N" with the version of the broker's HELLO.
fetch HOST AUTHORITY PATH: HELLO, then one http GET of AUTHORITY PATH
  on stream 1; print "status N" then the body.
wait FILE: print "ready" and wait until FILE exists.
"""
import ctypes
import errno
import os
import socket
import struct
import sys
import time

FAILS = 0
PROXY = "http://127.0.0.1:3128"


def check(ok, what):
    global FAILS
    print(("ok " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILS += 1


def errno_of(fn):
    try:
        fn()
    except OSError as e:
        return e.errno
    return 0


def netdev(path):
    with open(path) as f:
        return sorted(l.split(":")[0].strip() for l in f.readlines()[2:])


def sysnet():
    ifs = netdev("/proc/net/dev")
    check(ifs == ["lo"], "interfaces: %s" % " ".join(ifs))
    # PID 1's view: the sandbox's own init, not the host's.
    ifs = netdev("/proc/1/net/dev")
    check(ifs == ["lo"], "interfaces seen through /proc/1/net: %s" %
          " ".join(ifs))
    ifs = sorted(os.listdir("/sys/class/net"))
    check(ifs == ["lo"], "interfaces in /sys/class/net: %s" % " ".join(ifs))
    return FAILS != 0


def probe(addrs):
    inherited = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue  # the listing's own descriptor, closed by now
        if target.startswith("socket:"):
            inherited.append(fd)
    check(inherited == [], "no inherited socket (control connection, "
          "listeners)%s" % "".join(" " + f for f in inherited))
    sysnet()
    with open("/etc/resolv.conf") as f:
        ns = [l.split()[1] for l in f if l.startswith("nameserver")]
    check(ns == ["192.0.2.1"], "resolv.conf nameservers: %s" % " ".join(ns))
    try:
        socket.getaddrinfo("api.weather.example", 80)
        check(False, "getaddrinfo(api.weather.example) answered")
    except socket.gaierror:
        check(True, "getaddrinfo(api.weather.example) fails")
    for a in addrs:
        host, _, port = a.rpartition(":")
        t = time.monotonic()
        e = errno_of(lambda: socket.create_connection((host, int(port)),
                                                     timeout=5))
        check(e == errno.ENETUNREACH and time.monotonic() - t < 2,
              "connect %s: %s" % (a, errno.errorcode.get(e, e)))
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        e = errno_of(lambda: u.sendto(b"\0" * 12, (host, int(port))))
        check(e == errno.ENETUNREACH,
              "udp to %s: %s" % (a, errno.errorcode.get(e, e)))
        u.close()
    for v in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY",
              "ALL_PROXY"):
        check(os.environ.get(v) == PROXY, "%s=%s" % (v, os.environ.get(v)))
    for v in ("no_proxy", "NO_PROXY"):
        check(os.environ.get(v, "") == "", "%s is empty" % v)
    check("EGRESS_FD" not in os.environ, "no EGRESS_FD")
    socks = [
        ("socket(AF_UNIX)", socket.AF_UNIX, socket.SOCK_STREAM, 0),
        ("socket(AF_INET, SOCK_RAW)", socket.AF_INET, socket.SOCK_RAW, 1),
        ("socket(AF_PACKET)", socket.AF_PACKET, socket.SOCK_RAW, 0),
        ("socket(AF_NETLINK)", socket.AF_NETLINK, socket.SOCK_RAW, 0),
    ]
    for name, fam, typ, proto in socks:
        e = errno_of(lambda: socket.socket(fam, typ, proto))
        check(e == errno.EPERM, "%s: %s" % (name, errno.errorcode.get(e, e)))
    libc = ctypes.CDLL(None, use_errno=True)
    for name, flag in (("CLONE_NEWUSER", 0x10000000),
                       ("CLONE_NEWNET", 0x40000000),
                       ("CLONE_NEWNS", 0x00020000)):
        r = libc.unshare(flag)
        e = ctypes.get_errno() if r != 0 else 0
        check(e == errno.EPERM,
              "unshare(%s): %s" % (name, errno.errorcode.get(e, e)))
    nr_clone = {"x86_64": 56, "aarch64": 220}.get(os.uname().machine)
    if nr_clone is not None:
        libc.syscall.restype = ctypes.c_long
        r = libc.syscall(ctypes.c_long(nr_clone),
                         ctypes.c_ulong(0x10000000 | 17), None, None, None,
                         None)
        if r == 0:
            os._exit(0)  # a child: the clone was allowed
        e = ctypes.get_errno() if r < 0 else 0
        check(e == errno.EPERM,
              "clone(CLONE_NEWUSER): %s" % errno.errorcode.get(e, e))
        r = libc.syscall(ctypes.c_long(435), None, ctypes.c_size_t(0))
        e = ctypes.get_errno() if r < 0 else 0
        check(e == errno.ENOSYS, "clone3: %s" % errno.errorcode.get(e, e))
    fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    r = libc.setns(fd, 0)
    e = ctypes.get_errno() if r != 0 else 0
    check(e == errno.EPERM, "setns: %s" % errno.errorcode.get(e, e))
    os.close(fd)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.close()
    check(True, "socket(AF_INET, SOCK_STREAM) works")
    a, b = socket.socketpair()
    a.close()
    b.close()
    check(True, "socketpair(AF_UNIX) works")
    # A datagram pair could sendto() any datagram socket by path (/dev/log).
    e = errno_of(lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM))
    check(e == errno.EPERM, "socketpair(AF_UNIX, SOCK_DGRAM): %s" %
          errno.errorcode.get(e, e))
    return 1 if FAILS else 0


def frame(typ, stream, payload, flags=0):
    return struct.pack(">IBBBBI", len(payload), 1, typ, flags, 0,
                       stream) + payload


def read_frame(s):
    def exact(n):
        b = b""
        while len(b) < n:
            c = s.recv(n - len(b))
            if not c:
                raise EOFError("connection closed")
            b += c
        return b
    ln, _, typ, flags, _, stream = struct.unpack(">IBBBBI", exact(12))
    return typ, flags, stream, exact(ln)


def hello(host):
    s = socket.create_connection((host, 3128), timeout=10)
    s.sendall(frame(1, 0, struct.pack(">H", 1)))
    typ, _, _, payload = read_frame(s)
    assert typ == 1, "not a HELLO: type %d" % typ
    return s, struct.unpack(">H", payload)[0]


def pstr(b):
    return struct.pack(">H", len(b)) + b


def fetch(host, authority, path):
    s, _ = hello(host)
    req = struct.pack(">BIIII", 1, 0, 0, 0, 0) + pstr(b"GET") + \
        pstr(b"http") + pstr(authority.encode()) + pstr(path.encode()) + \
        struct.pack(">H", 0)
    s.sendall(frame(2, 1, req, flags=1))
    body = b""
    while True:
        typ, flags, stream, payload = read_frame(s)
        if typ == 3:
            print("status %d" % struct.unpack(">H", payload[:2])[0])
        elif typ == 4:
            body += payload
        elif typ == 8:
            print("error %s" % payload[6:].decode(errors="replace"))
            break
        if stream == 1 and flags & 1:
            break
    sys.stdout.flush()
    sys.stdout.buffer.write(body)
    return 0


def main():
    cmd = sys.argv[1]
    if cmd == "probe":
        return probe(sys.argv[2:])
    if cmd == "sysnet":
        return sysnet()
    if cmd == "hello":
        print("hello %d" % hello(sys.argv[2])[1])
        return 0
    if cmd == "fetch":
        return fetch(*sys.argv[2:5])
    if cmd == "wait":
        print("ready", flush=True)
        while not os.path.exists(sys.argv[2]):
            time.sleep(0.05)
        return 0
    return 2


sys.exit(main())
