# SPDX-License-Identifier: ISC
"""Hand-made clients for 22-sandbox-clients.sh, run inside egress-sandbox
--net: they reach only the proxy on 127.0.0.1:3128, as curl does.

  urllib URL [CAFILE]      urllib.request with the environment's proxies
  requests URL [CAFILE]    requests with the environment's proxies
  resolve NAME             getaddrinfo (the sandbox has no DNS)
  ech HOST                 CONNECT HOST:443, then a ClientHello with ECH
  relay HOST CAFILE TARGET CONNECT HOST:443, TLS verified against CAFILE,
                           then "CONNECT TARGET" inside the tunnel
  get URL                  "GET URL" to the proxy as it is written (no
                           client rewrites the host first)

Each prints one line that the scenario compares: "status N" for an HTTP
answer, "error TYPE: ..." for an exception."""
import socket
import ssl
import sys

PROXY = ("127.0.0.1", 3128)


def do_urllib(url, ca=None):
    import urllib.error
    import urllib.request
    ctx = ssl.create_default_context(cafile=ca) if ca else None
    try:
        with urllib.request.urlopen(url, timeout=20, context=ctx) as r:
            print("status %d %s" % (r.status, r.read().decode()[:18]))
    except urllib.error.HTTPError as e:
        print("status %d" % e.code)
    except (urllib.error.URLError, OSError) as e:
        print("error %s: %s" % (type(e).__name__, e))


def do_requests(url, ca=None):
    import requests
    try:
        r = requests.get(url, timeout=20, verify=ca or True,
                         allow_redirects=False)
        print("status %d %s" % (r.status_code, r.text[:18]))
    except requests.exceptions.RequestException as e:
        print("error %s: %s" % (type(e).__name__, e))


def do_resolve(name):
    try:
        print("resolved %s" % socket.getaddrinfo(name, 80)[0][4][0])
    except OSError as e:
        print("error %s: %s" % (type(e).__name__, e))


def connect(host, port):
    s = socket.create_connection(PROXY, timeout=20)
    s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
              % (host.encode(), port, host.encode(), port))
    ans = b""
    while b"\r\n\r\n" not in ans:
        b = s.recv(4096)
        if not b:
            break
        ans += b
    return s, ans.split(b"\r\n")[0].decode()


def client_hello(sni):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    i, o = ssl.MemoryBIO(), ssl.MemoryBIO()
    t = ctx.wrap_bio(i, o, server_hostname=sni)
    try:
        t.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return o.read()


def add_ext(h, t, body):
    """Append extension t to the ClientHello record h."""
    b = bytearray(h)
    p = 9 + 2 + 32
    p += 1 + b[p]
    p += 2 + (b[p] << 8 | b[p + 1])
    p += 1 + b[p]
    el = b[p] << 8 | b[p + 1]
    ext = t.to_bytes(2, "big") + len(body).to_bytes(2, "big") + body
    b[p:p + 2] = (el + len(ext)).to_bytes(2, "big")
    b += ext
    b[3:5] = ((b[3] << 8 | b[4]) + len(ext)).to_bytes(2, "big")
    b[6:9] = (int.from_bytes(b[6:9], "big") + len(ext)).to_bytes(3, "big")
    return bytes(b)


def do_ech(host):
    s, status = connect(host, 443)
    s.sendall(add_ext(client_hello(host), 0xFE0D, b"\0\1\2\3"))
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        out += b"TIMEOUT"
    print("%s, then %s" % (status, "%d bytes" % len(out) if out else
                           "closed"))


def do_relay(host, ca, target):
    s, status = connect(host, 443)
    if not status.startswith("HTTP/1.1 200"):
        print(status)
        return
    t = ssl.create_default_context(cafile=ca).wrap_socket(
        s, server_hostname=host)
    t.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\nConnection: close"
              b"\r\n\r\n" % (target.encode(), target.encode()))
    out = b""
    while b"\r\n" not in out:
        b = t.recv(4096)
        if not b:
            break
        out += b
    print("%s, inside: %s" % (status, out.split(b"\r\n")[0].decode()))


def do_get(url):
    s = socket.create_connection(PROXY, timeout=20)
    host = url.split("/")[2]
    s.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
              % (url.encode(), host.encode()))
    out = b""
    while b"\r\n" not in out:
        b = s.recv(4096)
        if not b:
            break
        out += b
    print(out.split(b"\r\n")[0].decode() if out else "closed")


if __name__ == "__main__":
    {"urllib": do_urllib, "requests": do_requests, "resolve": do_resolve,
     "ech": do_ech, "relay": do_relay,
     "get": do_get}[sys.argv[1]](*sys.argv[2:])
