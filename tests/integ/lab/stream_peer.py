#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Byte-stream upstreams for the tcp and tls scenarios of the netns lab.

    stream_peer.py echo ADDR PORT [CERT KEY [SNILOG [CLIENTCA [ALPNLOG]]]]
        Echo every byte back (TLS with CERT and KEY when given; the SNI
        name of each handshake, or "-" for none, is appended to SNILOG;
        with CLIENTCA, a client certificate signed by it is required, and
        TLS 1.2 at most, so that a handshake without one fails; with
        ALPNLOG, the protocols "lab/1" and "h2" are accepted and the one
        each handshake selected, or "-", is appended to ALPNLOG).
        At the client's end of stream (TCP FIN, or TLS close_notify) it
        ends its own side (close_notify for TLS, then FIN) once everything
        was echoed: the client sees its half-close come back as an end.
    stream_peer.py banner ADDR PORT OUTDIR
        Send a banner line and end its own side at once (shutdown
        SHUT_WR), then read everything the client still sends until its
        end, and write the SHA-256 of it (hex) to OUTDIR/banner.N.sha256.
    stream_peer.py reset ADDR PORT SIZE
        Send SIZE bytes on each connection, then reset it (SO_LINGER 0:
        an RST, not an end of file), without reading.
    stream_peer.py hold ADDR PORT CERT KEY OUTDIR
        Accept a connection, create OUTDIR/hold.N.accepted, and start the
        TLS handshake only once OUTDIR/hold.release exists; then count
        the plaintext bytes received until the client's end and write the
        count to OUTDIR/hold.N.bytes (0 when the client ended the
        connection during or right after the handshake).
    stream_peer.py blackhole ADDR PORT
        Listen with a backlog of 0 and fill it with one connection of its
        own that is never accepted, so that later SYNs are dropped: a
        connect to it times out.

Every mode prints "ready" on stdout once it listens. Stdlib only.
"""
import hashlib
import os
import socket
import ssl
import struct
import sys
import threading
import time


def listener(addr, port, backlog=64):
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(backlog)
    return s


def echo_conn(c, tls):
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            c.sendall(b)
        if tls is not None:
            c = c.unwrap()  # close_notify back
        c.shutdown(socket.SHUT_WR)
    except (OSError, ssl.SSLError):
        pass
    finally:
        c.close()


def serve_echo(s, cert, key, snilog, clientca=None, alpnlog=None):
    ctx = None
    if cert is not None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        if clientca is not None:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(clientca)
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        if alpnlog is not None:
            ctx.set_alpn_protocols(["lab/1", "h2"])
        if snilog is not None:
            def sni(sock, name, c):
                with open(snilog, "a") as f:
                    f.write((name or "-") + "\n")
            ctx.sni_callback = sni
    while True:
        c, _ = s.accept()
        if ctx is not None:
            try:
                c = ctx.wrap_socket(c, server_side=True)
            except (OSError, ssl.SSLError):
                c.close()
                continue
            if alpnlog is not None:
                with open(alpnlog, "a") as f:
                    f.write((c.selected_alpn_protocol() or "-") + "\n")
        threading.Thread(target=echo_conn, args=(c, ctx), daemon=True).start()


def banner_conn(c, outdir, n):
    h = hashlib.sha256()
    try:
        c.sendall(b"220 banner from the upstream\n")
        c.shutdown(socket.SHUT_WR)
        while True:
            b = c.recv(65536)
            if not b:
                break
            h.update(b)
    except OSError:
        return
    finally:
        c.close()
    tmp = os.path.join(outdir, "banner.%d.tmp" % n)
    with open(tmp, "w") as f:
        f.write(h.hexdigest() + "\n")
    os.rename(tmp, os.path.join(outdir, "banner.%d.sha256" % n))


def serve_banner(s, outdir):
    n = 0
    while True:
        c, _ = s.accept()
        n += 1
        threading.Thread(target=banner_conn, args=(c, outdir, n),
                         daemon=True).start()


def reset_conn(c, size):
    try:
        c.sendall(b"r" * size)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                     struct.pack("ii", 1, 0))
    except OSError:
        pass
    c.close()


def serve_reset(s, size):
    while True:
        c, _ = s.accept()
        threading.Thread(target=reset_conn, args=(c, size),
                         daemon=True).start()


def hold_conn(c, ctx, outdir, n):
    got = 0
    try:
        open(os.path.join(outdir, "hold.%d.accepted" % n), "w").close()
        while not os.path.exists(os.path.join(outdir, "hold.release")):
            time.sleep(0.05)
        c = ctx.wrap_socket(c, server_side=True)
        while True:
            b = c.recv(65536)
            if not b:
                break
            got += len(b)
    except (OSError, ssl.SSLError):
        pass
    finally:
        c.close()
    tmp = os.path.join(outdir, "hold.%d.tmp" % n)
    with open(tmp, "w") as f:
        f.write("%d\n" % got)
    os.rename(tmp, os.path.join(outdir, "hold.%d.bytes" % n))


def serve_hold(s, cert, key, outdir):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    n = 0
    while True:
        c, _ = s.accept()
        n += 1
        threading.Thread(target=hold_conn, args=(c, ctx, outdir, n),
                         daemon=True).start()


def main():
    mode, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "blackhole":
        s = listener(addr, port, 0)
        filler = socket.create_connection((addr, port))
        print("ready", flush=True)
        threading.Event().wait()
        filler.close()
        return
    s = listener(addr, port)
    print("ready", flush=True)
    if mode == "echo":
        cert = sys.argv[4] if len(sys.argv) > 5 else None
        key = sys.argv[5] if len(sys.argv) > 5 else None
        snilog = sys.argv[6] if len(sys.argv) > 6 else None
        clientca = sys.argv[7] if len(sys.argv) > 7 else None
        alpnlog = sys.argv[8] if len(sys.argv) > 8 else None
        serve_echo(s, cert, key, snilog, clientca, alpnlog)
    elif mode == "banner":
        serve_banner(s, sys.argv[4])
    elif mode == "reset":
        serve_reset(s, int(sys.argv[4]))
    elif mode == "hold":
        serve_hold(s, sys.argv[4], sys.argv[5], sys.argv[6])
    else:
        sys.exit("stream_peer.py: unknown mode " + mode)


if __name__ == "__main__":
    main()
