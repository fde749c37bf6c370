#!/usr/bin/python3
# SPDX-License-Identifier: ISC
"""WebSocket peers of the lab (python3-websockets), in the outside
namespace:

  ws_peer.py echo ADDR PORT DIR [CERT KEY [CLIENTCA]]
      An echo server (wss with CERT and KEY; with CLIENTCA, TLS 1.2 at
      most and a client certificate CLIENTCA signed required, so that a
      missing one fails the handshake itself). Each text or binary message
      comes back as it came, except these text commands: "frag" is
      answered by one message sent in three fragments ("ab", "cd", "ef");
      "close-me" makes the server close with 4001 "bye"; "drop" makes it
      end the TCP connection without a close frame; "big N" is answered
      by a text message of N bytes. Subprotocol "chat" is accepted when
      asked for. The path /redirect is answered 302 with a Location. For
      each connection, DIR/conn.N.json records the request's Host,
      Authorization, Origin and Sec-WebSocket-Protocol headers, the
      common name of the client's certificate (client_cn), and once
      it is over, the close code received from the client (null for
      none).
  ws_peer.py badaccept ADDR PORT
      Answers every handshake 101 with a wrong Sec-WebSocket-Accept.

Prints "ready" once listening.
"""
import asyncio
import http
import json
import os
import ssl
import sys

import websockets
import websockets.server

COUNT = [0]


def record(d, n, what):
    path = os.path.join(d, "conn.%d.json" % n)
    old = {}
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
    old.update(what)
    with open(path + ".tmp", "w") as f:
        json.dump(old, f)
    os.rename(path + ".tmp", path)


async def echo(ws, d):
    COUNT[0] += 1
    n = COUNT[0]
    h = ws.request_headers
    cert = ws.transport.get_extra_info("peercert") or {}
    cn = [v for rdn in cert.get("subject", ()) for (k, v) in rdn
          if k == "commonName"]
    record(d, n, {
        "client_cn": cn[0] if cn else None,
        "host": h.get("Host"),
        "authorization": h.get("Authorization"),
        "origin": h.get("Origin"),
        "protocol": h.get("Sec-WebSocket-Protocol"),
        "chosen": ws.subprotocol,
        "path": ws.path,
    })
    try:
        async for m in ws:
            if m == "frag":
                await ws.send(iter(["ab", "cd", "ef"]))
            elif m == "close-me":
                await ws.close(4001, "bye")
            elif m == "drop":
                ws.transport.abort()
                return
            elif isinstance(m, str) and m.startswith("big "):
                await ws.send("x" * int(m[4:]))
            else:
                await ws.send(m)
    except websockets.ConnectionClosed:
        pass
    finally:
        await ws.wait_closed()
        record(d, n, {"close_code": ws.close_code if ws.close_code != 1006
                      else None, "close_reason": ws.close_reason})


async def process_request(path, headers):
    if path == "/redirect":
        return (http.HTTPStatus.FOUND,
                [("Location", "ws://169.254.169.254/")], b"")
    return None


async def badaccept(reader, writer):
    head = b""
    while b"\r\n\r\n" not in head:
        b = await reader.read(4096)
        if not b:
            writer.close()
            return
        head += b
    writer.write(b"HTTP/1.1 101 Switching Protocols\r\n"
                 b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Accept: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
    await writer.drain()
    await asyncio.sleep(5)
    writer.close()


async def main():
    mode, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "badaccept":
        server = await asyncio.start_server(badaccept, addr, port)
    else:
        d = sys.argv[4]
        ctx = None
        if len(sys.argv) > 6:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(sys.argv[5], sys.argv[6])
        if len(sys.argv) > 7:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(sys.argv[7])
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        server = await websockets.server.serve(
            lambda ws, path: echo(ws, d), addr, port, ssl=ctx,
            subprotocols=["chat"], process_request=process_request,
            max_size=None, compression=None)
    print("ready", flush=True)
    await asyncio.Future()


asyncio.run(main())
