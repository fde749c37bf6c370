#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""A raw client of an egressd instance socket for the fault scenarios and
the protocol-level fuzzer, speaking docs/protocol.md directly (frame
header: u32 length, u8 version 1, u8 type, u8 flags, u8 reserved, u32
stream, big-endian). Modes (argv[1]):

  upload SOCK AUTHORITY PATH TOTAL SENT
      HELLO, a POST REQUEST announcing Content-Length TOTAL, SENT body
      bytes in DATA frames (no END_STREAM); print "sent", then wait until
      killed (or print "closed" and exit 0 if the broker closes).
  conns SOCK N
      Open N connections (non-blocking connect; HELLO on each), wait until
      no new HELLO answer came for 1 s (at most 20 s) and print
      "answered K". Then close the K answered connections and wait (at
      most 20 s) until every remaining one got its HELLO answer or was
      closed by the broker: print "resumed M" (answers after the close)
      and "dropped D" (closed without an answer). Exit 0.
  fuzz SOCK SEED ITERATIONS
      ITERATIONS connections, each sending a random mix of garbage,
      truncated, oversized, reordered and field-mutated frames (seeded,
      so a failing run can be replayed with the same SEED), then reading
      until the broker closes or 0.3 s pass without input. Prints a
      summary line. Exit 0 unless a connect fails (broker gone).
  drain SOCK AUTHORITY PATH1 PATH2
      HELLO, a GET REQUEST for PATH1 on stream 1; on GOAWAY, a GET for
      PATH2 on stream 3 (which the draining broker must ignore). Prints
      one line per frame received ("goaway LAST", "response STREAM
      STATUS", "data STREAM BYTES", "end STREAM", "error STREAM CODE")
      until the broker closes (at most 30 s), then "closed".
  reuse SOCK AUTHORITY PATH
      HELLO, a GET REQUEST for PATH on stream 1; once its response has
      ended, a second REQUEST on stream 1 (a violation: "stream reused").
      Prints "done" and exits 0 when the broker closed the connection.
  linger SOCK AUTHORITY PATH CONNS STREAMS PAD
      CONNS connections; on each, STREAMS POST requests one after the
      other, each with PAD bytes of extra headers, Content-Length 1 and
      one body byte but no END_STREAM: the exchange completes, the guest
      never ends its side of the stream. Waits for each response to end
      before the next request. Prints "done K" (responses ended), then
      waits until killed.
  resetflood SOCK AUTHORITY PATH N
      HELLO, then N times a GET REQUEST for PATH on a new stream at once
      followed by a RESET of it (a lookup started and abandoned), then one
      more GET on a new stream: print "error CODE" for the ERROR it gets
      ("response STATUS" if it got an answer, "none" if nothing came in
      10 s) and exit 0.
  hold SOCK AUTHORITY PATH N [SCHEME]
      HELLO, then N GET REQUESTs for PATH (scheme http, or SCHEME) at
      once, each on a new stream;
      read until 1 s passes without input and print "refused K" (the
      streams answered with ERROR budget-exhausted) and "other M" (any
      other answer); then keep the connection open until killed.
  pingflood SOCK N
      HELLO, then N PINGs, never reading a byte; print "sent" once
      written (or "blocked" when the broker stopped reading first) and
      "closed" when the broker drops the connection, then exit 0; wait
      until killed otherwise.
  ctl SOCK LINE
      Send LINE to the control socket and print the reply line."""

import errno
import os
import random
import select
import socket
import struct
import sys
import time

VERSION = 1
(HELLO, REQUEST, RESPONSE, DATA, TRAILERS, WINDOW_UPDATE, RESET, ERROR,
 GOAWAY, PING, PONG) = range(1, 12)
END_STREAM = 1
PAYLOAD_MAX = 98304


def frame(ftype, payload=b"", stream=0, flags=0, length=None, version=1,
          reserved=0):
    n = len(payload) if length is None else length
    return struct.pack("!IBBBBI", n, version, ftype, flags, reserved,
                       stream) + payload


def hello(v=VERSION):
    return frame(HELLO, struct.pack("!H", v))


def pstr(b):
    return struct.pack("!H", len(b)) + b


def headers(hs):
    out = struct.pack("!H", len(hs))
    for k, v in hs:
        out += pstr(k) + pstr(v)
    return out


def request(stream, method, authority, path, hs, end=True,
            scheme=b"http", transport=1, timeouts=(0, 0, 0, 0)):
    p = struct.pack("!BIIII", transport, *timeouts) + pstr(method) + \
        pstr(scheme) + pstr(authority) + pstr(path) + headers(hs)
    return frame(REQUEST, p, stream, END_STREAM if end else 0)


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


def read_some(s, timeout):
    r, _, _ = select.select([s], [], [], timeout)
    if not r:
        return None
    try:
        return s.recv(65536)
    except OSError:
        return b""


def send_quiet(s, data):
    """Send; a broker that has already closed is not an error here."""
    try:
        s.sendall(data)
    except OSError:
        pass


def mode_upload(sock, authority, path, total, sent):
    s = connect(sock)
    s.sendall(hello())
    hs = [(b"Host", authority.encode()), (b"Content-Length",
          str(total).encode()), (b"Content-Type", b"application/x-test")]
    s.sendall(request(1, b"POST", authority.encode(), path.encode(), hs,
                      end=False))
    left = sent
    while left > 0:
        n = min(left, 65536)
        s.sendall(frame(DATA, b"u" * n, 1))
        left -= n
    print("sent", flush=True)
    while True:
        b = read_some(s, 60)
        if b == b"":
            print("closed", flush=True)
            return 0


def mode_conns(sock, n):
    socks, pending = [], {}
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(sock)
        except BlockingIOError:
            pass
        except OSError as e:
            if e.errno != errno.EAGAIN:
                raise
            s.close()
            continue
        socks.append(s)
    answered = set()
    dropped = set()
    for s in socks:
        pending[s] = b""
        try:
            s.send(hello())
        except BlockingIOError:
            pass
        except OSError:
            # Closed by the peer before HELLO (accepted and closed at
            # once, as valgrind does with a descriptor it reserves).
            dropped.add(s)

    def pump(deadline, quiet):
        last = time.monotonic()
        while time.monotonic() < deadline:
            live = [s for s in socks if s not in answered and
                    s not in dropped]
            if not live:
                return
            if quiet and time.monotonic() - last > quiet:
                return
            r, _, _ = select.select(live, [], [], 0.05)
            for s in r:
                try:
                    b = s.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    b = b""
                if not b:
                    dropped.add(s)
                    continue
                pending[s] += b
                if len(pending[s]) >= 14:
                    answered.add(s)
                    last = time.monotonic()
    pump(time.monotonic() + 20, 1.0)
    k = len(answered)
    print("answered %d" % k, flush=True)
    for s in list(answered):
        s.close()
        socks.remove(s)
    answered.clear()
    pump(time.monotonic() + 20, None)
    print("resumed %d" % len(answered), flush=True)
    print("dropped %d" % len(dropped), flush=True)
    return 0


def rand_bytes(rng, n):
    return bytes(rng.getrandbits(8) for _ in range(n))


def fuzz_frames(rng):
    """A list of byte strings to send on one connection."""
    out = []
    valid_start = rng.random() < 0.8
    if valid_start:
        out.append(hello())
    for _ in range(rng.randint(1, 6)):
        k = rng.randint(0, 13)
        sid = rng.choice([0, 1, 2, 3, 0x7fffffff, 0x80000001])
        if k == 0:
            out.append(rand_bytes(rng, rng.randint(1, 300)))
        elif k == 1:	# truncated frame
            f = request(sid or 1, b"GET", b"ok.weather.example:8081",
                        b"/ok", [(b"Host", b"ok.weather.example:8081")])
            out.append(f[:rng.randint(1, len(f) - 1)])
        elif k == 2:	# oversized length
            out.append(frame(DATA, b"", sid, length=rng.choice(
                [PAYLOAD_MAX + 1, 1 << 20, 0xffffffff, 65537])))
        elif k == 3:	# bad version / reserved / type / flags
            out.append(frame(rng.randint(0, 255), b"\0" * 4, sid,
                             flags=rng.randint(0, 255),
                             version=rng.choice([0, 1, 2, 255]),
                             reserved=rng.choice([0, 0, 1])))
        elif k == 4:	# data before request / on an idle stream
            out.append(frame(DATA, b"x" * rng.randint(0, 64), sid,
                             rng.choice([0, 1])))
        elif k == 5:	# window update 0 or huge
            out.append(frame(WINDOW_UPDATE, struct.pack(
                "!I", rng.choice([0, 1, 0x7fffffff, 0xffffffff])), sid))
        elif k == 6:	# a second HELLO or a HELLO of another version
            out.append(hello(rng.choice([0, 1, 2, 65535])))
        elif k == 7:	# a REQUEST with mutated bytes
            f = bytearray(request(rng.randint(1, 9), b"GET",
                                  b"ok.weather.example:8081", b"/ok",
                                  [(b"Host", b"ok.weather.example:8081")]))
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(12, len(f))
                f[i] = rng.getrandbits(8)
            out.append(bytes(f))
        elif k == 8:	# a frame of a broker-only type
            out.append(frame(rng.choice([RESPONSE, ERROR, GOAWAY]),
                             b"\0" * 6, sid))
        elif k == 9:	# reset, ping, pong with wrong lengths
            out.append(frame(rng.choice([RESET, PING, PONG]),
                             rand_bytes(rng, rng.randint(0, 12)), sid))
        elif k == 10:	# trailers without head / without END_STREAM
            out.append(frame(TRAILERS, headers([]), sid,
                             rng.choice([0, 1])))
        elif k == 11:	# reused stream id
            f = request(1, b"GET", b"ok.weather.example:8081", b"/ok",
                        [(b"Host", b"ok.weather.example:8081")])
            out += [f, f]
        elif k == 12:	# header list lying about its count
            p = struct.pack("!BIIII", 1, 0, 0, 0, 0) + pstr(b"GET") + \
                pstr(b"http") + pstr(b"a") + pstr(b"/") + \
                struct.pack("!H", rng.choice([257, 2, 65535])) + \
                pstr(b"Host") + pstr(b"a")
            out.append(frame(REQUEST, p, 1, END_STREAM))
        else:		# a valid PING
            out.append(frame(PING, rand_bytes(rng, 8)))
    if rng.random() < 0.3:
        rng.shuffle(out)
    return out


def mode_fuzz(sock, seed, iterations):
    rng = random.Random(seed)
    stats = {"closed": 0, "open": 0, "bytes": 0}
    for _ in range(iterations):
        try:
            s = connect(sock)
        except OSError as e:
            print("connect failed: %s" % e, flush=True)
            return 1
        for f in fuzz_frames(rng):
            try:
                s.sendall(f)
            except OSError:
                break
            stats["bytes"] += len(f)
        closed = False
        while True:
            b = read_some(s, 0.3)
            if b is None:
                break
            if b == b"":
                closed = True
                break
        stats["closed" if closed else "open"] += 1
        s.close()
    print("fuzz seed %d: %d connections, %d closed by the broker, %d left "
          "open, %d bytes sent" % (seed, iterations, stats["closed"],
                                   stats["open"], stats["bytes"]),
          flush=True)
    return 0


def mode_drain(sock, authority, path1, path2):
    s = connect(sock)
    a = authority.encode()
    s.sendall(hello() + request(1, b"GET", a, path1.encode(),
                                [(b"Host", a)]))
    buf = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        while len(buf) >= 12:
            n, _, ftype, flags, _, sid = struct.unpack("!IBBBBI", buf[:12])
            if len(buf) < 12 + n:
                break
            p, buf = buf[12:12 + n], buf[12 + n:]
            if ftype == GOAWAY:
                print("goaway %d" % struct.unpack("!I", p)[0], flush=True)
                send_quiet(s, request(3, b"GET", a, path2.encode(),
                                      [(b"Host", a)]))
            elif ftype == RESPONSE:
                print("response %d %d" % (sid, struct.unpack("!H", p[:2])[0]),
                      flush=True)
            elif ftype == DATA:
                if n:
                    print("data %d %d" % (sid, n), flush=True)
                if n and not flags & END_STREAM:
                    send_quiet(s, frame(WINDOW_UPDATE, struct.pack("!I", n),
                                        sid) +
                               frame(WINDOW_UPDATE, struct.pack("!I", n)))
            elif ftype == ERROR:
                print("error %d %d" % (sid, struct.unpack("!I", p[:4])[0]),
                      flush=True)
            if ftype in (RESPONSE, DATA, TRAILERS) and flags & END_STREAM:
                print("end %d" % sid, flush=True)
        b = read_some(s, max(0.0, deadline - time.monotonic()))
        if not b:
            break
        buf += b
    print("closed", flush=True)
    return 0


def mode_reuse(sock, authority, path):
    s = connect(sock)
    a = authority.encode()
    req = request(1, b"GET", a, path.encode(), [(b"Host", a)])
    s.sendall(hello() + req)
    buf = b""
    deadline = time.monotonic() + 10
    ended = False
    while time.monotonic() < deadline:
        while len(buf) >= 12:
            n, _, ftype, flags, _, sid = struct.unpack("!IBBBBI", buf[:12])
            if len(buf) < 12 + n:
                break
            buf = buf[12 + n:]
            if sid == 1 and ftype in (RESPONSE, DATA, TRAILERS, ERROR) and \
                    (flags & END_STREAM or ftype == ERROR) and not ended:
                ended = True
                send_quiet(s, req)
        b = read_some(s, max(0.0, deadline - time.monotonic()))
        if not b:
            if b == b"" and ended:
                print("done", flush=True)
                return 0
            break
        buf += b
    print("the broker did not close after the reused stream", flush=True)
    return 1


def mode_linger(sock, authority, path, conns, streams, pad):
    a = authority.encode()
    hs = [(b"Host", a), (b"Content-Length", b"1")]
    chunk = 4000
    i = 0
    while pad > 0:
        n = min(pad, chunk)
        hs.append((b"X-Pad-%d" % i, b"p" * n))
        pad -= n
        i += 1
    socks = []
    done = 0
    for _ in range(conns):
        s = connect(sock)
        s.sendall(hello())
        socks.append(s)
        buf = b""
        for k in range(streams):
            sid = 2 * k + 1
            s.sendall(request(sid, b"POST", a, path.encode(), hs, end=False)
                      + frame(DATA, b"x", sid))
            ended = False
            deadline = time.monotonic() + 10
            while not ended and time.monotonic() < deadline:
                while len(buf) >= 12 and not ended:
                    n, _, ftype, flags, _, fsid = struct.unpack(
                        "!IBBBBI", buf[:12])
                    if len(buf) < 12 + n:
                        break
                    buf = buf[12 + n:]
                    if fsid == sid and (ftype == ERROR or (
                            ftype in (RESPONSE, DATA, TRAILERS) and
                            flags & END_STREAM)):
                        ended = True
                        done += ftype != ERROR
                if ended:
                    break
                b = read_some(s, max(0.0, deadline - time.monotonic()))
                if not b:
                    print("done %d" % done, flush=True)
                    print("stalled", flush=True)
                    return 1
                buf += b
    print("done %d" % done, flush=True)
    while True:
        time.sleep(60)


def mode_resetflood(sock, authority, path, n, cancelled=10):
    s = connect(sock)
    a = authority.encode()
    hs = [(b"Host", a)]
    out = hello()
    for k in range(n):
        sid = 2 * k + 1
        out += request(sid, b"GET", a, path.encode(), hs) + \
            frame(RESET, struct.pack("!I", cancelled), sid)
    last = 2 * n + 1
    out += request(last, b"GET", a, path.encode(), hs)
    s.sendall(out)
    buf = b""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        while len(buf) >= 12:
            ln, _, ftype, flags, _, sid = struct.unpack("!IBBBBI", buf[:12])
            if len(buf) < 12 + ln:
                break
            body = buf[12:12 + ln]
            buf = buf[12 + ln:]
            if sid == last and ftype == ERROR:
                print("error %d" % struct.unpack("!I", body[:4])[0],
                      flush=True)
                return 0
            if sid == last and ftype == RESPONSE:
                print("response", flush=True)
                return 0
        b = read_some(s, max(0.0, deadline - time.monotonic()))
        if not b:
            break
        buf += b
    print("none", flush=True)
    return 0


BUDGET_EXHAUSTED = 2


def mode_hold(sock, authority, path, n, scheme="http"):
    s = connect(sock)
    a = authority.encode()
    hs = [(b"Host", a)]
    out = hello()
    for k in range(n):
        out += request(2 * k + 1, b"GET", a, path.encode(), hs,
                       scheme=scheme.encode())
    s.sendall(out)
    buf, refused, other = b"", 0, 0
    while True:
        b = read_some(s, 1.0)
        if not b:
            break
        buf += b
        while len(buf) >= 12:
            ln, _, ftype, _, _, sid = struct.unpack("!IBBBBI", buf[:12])
            if len(buf) < 12 + ln:
                break
            body, buf = buf[12:12 + ln], buf[12 + ln:]
            if sid == 0:
                continue
            if ftype == ERROR and \
                    struct.unpack("!I", body[:4])[0] == BUDGET_EXHAUSTED:
                refused += 1
            else:
                other += 1
    print("refused %d" % refused, flush=True)
    print("other %d" % other, flush=True)
    while True:
        if read_some(s, 60) == b"":
            return 0


def mode_pingflood(sock, n):
    s = connect(sock)
    s.sendall(hello())
    s.setblocking(False)
    data = frame(PING, b"p" * 8) * n
    off, stalled = 0, 0.0
    while off < len(data):
        _, w, _ = select.select([], [s], [], 1.0)
        if not w:
            stalled += 1.0
            if stalled >= 5.0:
                print("blocked", flush=True)
                break
            continue
        try:
            off += s.send(data[off:off + 65536])
        except BlockingIOError:
            continue
        except OSError:
            print("closed", flush=True)
            return 0
    else:
        print("sent", flush=True)
    ping = frame(PING, b"p" * 8)
    while True:
        # Never read the broker's PONGs; only notice the broker leaving
        # (a send to a closed connection fails).
        time.sleep(0.2)
        try:
            s.send(ping)
        except BlockingIOError:
            pass
        except OSError:
            print("closed", flush=True)
            return 0


def mode_ctl(sock, line):
    s = connect(sock)
    s.sendall(line.encode() + b"\n")
    buf = b""
    s.settimeout(10)
    while b"\n" not in buf:
        b = s.recv(65536)
        if not b:
            break
        buf += b
    sys.stdout.write(buf.split(b"\n", 1)[0].decode() + "\n")
    return 0


def main():
    m = sys.argv[1]
    if m == "upload":
        return mode_upload(sys.argv[2], sys.argv[3], sys.argv[4],
                           int(sys.argv[5]), int(sys.argv[6]))
    if m == "conns":
        return mode_conns(sys.argv[2], int(sys.argv[3]))
    if m == "fuzz":
        return mode_fuzz(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    if m == "drain":
        return mode_drain(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    if m == "reuse":
        return mode_reuse(sys.argv[2], sys.argv[3], sys.argv[4])
    if m == "linger":
        return mode_linger(sys.argv[2], sys.argv[3], sys.argv[4],
                           int(sys.argv[5]), int(sys.argv[6]),
                           int(sys.argv[7]))
    if m == "resetflood":
        return mode_resetflood(sys.argv[2], sys.argv[3], sys.argv[4],
                               int(sys.argv[5]))
    if m == "hold":
        return mode_hold(sys.argv[2], sys.argv[3], sys.argv[4],
                         int(sys.argv[5]), *sys.argv[6:7])
    if m == "pingflood":
        return mode_pingflood(sys.argv[2], int(sys.argv[3]))
    if m == "ctl":
        return mode_ctl(sys.argv[2], sys.argv[3])
    print("unknown mode", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
