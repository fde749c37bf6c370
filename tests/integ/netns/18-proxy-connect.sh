#!/bin/bash
# SPDX-License-Identifier: ISC
#
# CONNECT through the proxy front, with real curl and the lab's nginx:
# an HTTPS request tunnelled (transport tls-tunnel, the decision naming
# the validated address, TLS verified end to end by curl) through a proxy
# port; CONNECT on the instance socket (written by hand); a denied host answered 403 with nothing
# connected; an SNI that differs from the CONNECT host (curl
# --connect-to) refused and logged with both names; a ClientHello without
# SNI to a name, and one with Encrypted Client Hello, refused; a raw tcp
# tunnel refused without socket_client and relayed with it; a reload that
# revokes socket_client ends that open tunnel (egress.close error revoked),
# and an entry's stream_max_lifetime_ms ends a tunnel in time.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
. "$(dirname "$0")/../lab/curl.sh"
lab_init
lab_need_bins
lab_up

lab_dns_set api.weather.example="$LAB_PUB4" \
    other.weather.example="$LAB_PUB4"
HOSTS="api.weather.example, other.weather.example"
E=$LAB_DIR/etc
mkdir -p "$E"
(umask 077; printf 'weather-token-0123456789\n' >"$E/weather.token";
    printf 'radar-token-0123456789\n' >"$E/radar.token")
{
	lab_config_base
	lab_entry weather weather "$HOSTS"
	printf 'proxy_listen = 127.0.0.1:3128\nproxy_token_file = weather.token\n'
	lab_entry radar radar api.weather.example
	printf 'proxy_listen = 127.0.0.1:3129\nproxy_token_file = radar.token\n'
	lab_entry sock relay "$HOSTS" "" "http_client, socket_client"
	lab_entry brief relay "$HOSTS" "" "http_client, socket_client"
	# Long enough for one exchange, also under valgrind.
	printf 'stream_max_lifetime_ms = %s000\n' "$(egress_wait 2)"
} | lab_config_install
lab_egressd_start weather radar sock brief
lab_wait_port 3128 3129
CA=$LAB_DIR/pki/ca.crt
U=https://api.weather.example/small
# curl tunnels https:// through a proxy port (with --unix-socket it would
# not use the proxy for TLS at all).
W=(-x http://127.0.0.1:3128 --proxy-user w:weather-token-0123456789)
R=(-x http://127.0.0.1:3129 --proxy-user r:radar-token-0123456789)
pcurl()
{
	lab_mark
	LAB_CURL_OUT=$LAB_DIR/curl.out
	LAB_CURL_HDR=$LAB_DIR/curl.hdr
	LAB_CURL_RC=0
	LAB_CURL_STATUS=$(lab_ns_b timeout -k 5 "$(egress_wait 30)" \
	    curl -sS -o "$LAB_CURL_OUT" -D "$LAB_CURL_HDR" -w '%{http_code}' \
	    "$@" 2>"$LAB_DIR/curl.err") || LAB_CURL_RC=$?
}

# Allowed: curl's own TLS through the tunnel, verified against the lab CA.
pcurl "${W[@]}" --cacert "$CA" "$U"
lab_expect_curl 200
LAB_FETCH_OUT=$LAB_CURL_OUT lab_expect_fetch_body_file "$LAB_DIR/www/small"
lab_wait_events egress.close 1
lab_expect_eq "tunnel decision" "weather allow tls-tunnel api.weather.example 443 $LAB_PUB4" \
    "$(lab_decision | jq -r '"\(.instance) \(.verdict) \(.transport) \(.host) \(.port) \(.addresses | join(","))"')"
lab_expect_eq "tunnel close" "$LAB_PUB4 null" \
    "$(lab_events egress.close | jq -r '"\(.connected) \(.error)"')"
lab_expect_hits "$LAB_PUB4" 1 /small
lab_expect_eq "SNI seen upstream" api.weather.example \
    "$(lab_sni_seen "$LAB_PUB4")"

# A host the instance is not granted: 403, nothing connected.
pcurl "${R[@]}" --cacert "$CA" https://other.weather.example/small
lab_expect_eq "CONNECT to a denied host" 403 \
    "$(grep -o '^HTTP/1.1 [0-9]*' "$LAB_CURL_HDR" | head -1 | cut -d' ' -f2)"
lab_expect_decision radar deny not-granted other.weather.example
lab_expect_hits "$LAB_PUB4" 0

# The SNI names another host than the CONNECT (domain fronting through
# the tunnel's name): refused, both names logged.
pcurl "${W[@]}" --cacert "$CA" \
    --connect-to api.weather.example:443:other.weather.example:443 "$U"
[ "$LAB_CURL_RC" != 0 ] || lab_fail "the mismatched tunnel was relayed"
lab_expect_decision weather deny sni-mismatch other.weather.example
lab_expect_eq "mismatch detail" \
    "SNI 'api.weather.example' differs from the CONNECT host 'other.weather.example'" \
    "$(lab_decision | jq -r .detail)"
lab_expect_hits "$LAB_PUB4" 0

# Hand-made first bytes: no SNI, ECH, and raw tcp.
cat >"$LAB_DIR/hello.py" <<'PY'
import socket, ssl, sys
sock, host, mode = sys.argv[1], sys.argv[2], sys.argv[3]
def hello(sni):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    i, o = ssl.MemoryBIO(), ssl.MemoryBIO()
    s = ctx.wrap_bio(i, o, server_hostname=sni)
    try:
        s.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return o.read()
def add_ext(h, t, body):
    b = bytearray(h)
    p = 9 + 2 + 32
    p += 1 + b[p]
    p += 2 + (b[p] << 8 | b[p + 1])
    p += 1 + b[p]
    el = b[p] << 8 | b[p + 1]
    ext = t.to_bytes(2, 'big') + len(body).to_bytes(2, 'big') + body
    b[p:p + 2] = (el + len(ext)).to_bytes(2, 'big')
    b += ext
    b[3:5] = ((b[3] << 8 | b[4]) + len(ext)).to_bytes(2, 'big')
    b[6:9] = (int.from_bytes(b[6:9], 'big') + len(ext)).to_bytes(3, 'big')
    return bytes(b)
first = {'nosni': lambda: hello(None),
         'ech': lambda: add_ext(hello(host), 0xfe0d, b'\0\1\2\3'),
         'raw': lambda: b'GET /small HTTP/1.1\r\nHost: %s\r\n'
                        b'Connection: close\r\n\r\n' % host.encode()}[mode]()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sock)
s.sendall(b'CONNECT %s:%d HTTP/1.1\r\nHost: %s\r\n\r\n'
          % (host.encode(), 80 if mode == 'raw' else 443, host.encode()))
s.settimeout(10)
ans = b''
while b'\r\n\r\n' not in ans:
    b = s.recv(4096)
    if not b:
        break
    ans += b
print(ans.split(b'\r\n')[0].decode())
s.sendall(first)
out = b''
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
except socket.timeout:
    out += b'TIMEOUT'
print(out.split(b'\r\n')[0].decode() if out else 'CLOSED')
PY
hello()
{
	lab_ns_b timeout -k 5 "$(egress_wait 30)" "$LAB_PYTHON" \
	    "$LAB_DIR/hello.py" "$LAB_SOCK_DIR/$1.sock" "$2" "$3"
}
lab_mark
lab_expect_eq "ClientHello without SNI" \
    "HTTP/1.1 200 Connection established CLOSED" \
    "$(hello weather api.weather.example nosni | paste -sd ' ')"
lab_expect_decision weather deny no-sni api.weather.example
lab_mark
lab_expect_eq "ClientHello with ECH" \
    "HTTP/1.1 200 Connection established CLOSED" \
    "$(hello weather api.weather.example ech | paste -sd ' ')"
lab_expect_decision weather deny ech api.weather.example
lab_mark
lab_expect_eq "raw tcp without socket_client" \
    "HTTP/1.1 200 Connection established CLOSED" \
    "$(hello weather api.weather.example raw | paste -sd ' ')"
lab_expect_decision weather deny no-permission api.weather.example
lab_expect_eq "decision transport" tcp "$(lab_decision | jq -r .transport)"
lab_expect_hits "$LAB_PUB4" 0
lab_mark
lab_expect_eq "raw tcp with socket_client" \
    "HTTP/1.1 200 Connection established HTTP/1.1 200 OK" \
    "$(hello sock api.weather.example raw | paste -sd ' ')"
lab_expect_decision sock allow - api.weather.example
lab_expect_eq "decision transport" tcp "$(lab_decision | jq -r .transport)"
lab_expect_hits "$LAB_PUB4" 1 /small

# ---- a reload that revokes socket_client ends an open raw tcp tunnel
cat >"$LAB_DIR/hold.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(30)
s.sendall(b'CONNECT api.weather.example:80 HTTP/1.1\r\n'
          b'Host: api.weather.example:80\r\n\r\n')
ans = b''
while b'\r\n\r\n' not in ans:
    ans += s.recv(1)
s.sendall(b'GET /small HTTP/1.1\r\nHost: api.weather.example\r\n\r\n')
got = s.recv(65536)
print("READY" if got.startswith(b'HTTP/1.1 200') else "NO", flush=True)
try:
    while s.recv(65536):
        pass
    print("CLOSED", flush=True)
except socket.timeout:
    print("TIMEOUT", flush=True)
PY
# The entry's stream_max_lifetime_ms ends a busy tunnel too.
lab_mark
lab_spawn brief "$LAB_NS_B" "$LAB_PYTHON" "$LAB_DIR/hold.py" \
    "$LAB_SOCK_DIR/brief.sock"
lab_poll 15 lab__gone "${LAB_PID[brief]}" ||
    lab_fail "the tunnel outlived its instance's stream_max_lifetime_ms"
lab_stop brief
lab_expect_eq "the client saw its tunnel end" "READY CLOSED" \
    "$(paste -sd ' ' "$LAB_DIR/log/brief.out")"
lab_expect_close error timeout

lab_spawn hold "$LAB_NS_B" "$LAB_PYTHON" "$LAB_DIR/hold.py" \
    "$LAB_SOCK_DIR/sock.sock"
lab_poll 10 grep -q READY "$LAB_DIR/log/hold.out" ||
    lab_fail "the tunnel did not relay: $(cat "$LAB_DIR/log/hold."*)"
lab_mark
{
	lab_config_base
	lab_entry weather weather "$HOSTS"
	printf 'proxy_listen = 127.0.0.1:3128\nproxy_token_file = weather.token\n'
	lab_entry radar radar api.weather.example
	printf 'proxy_listen = 127.0.0.1:3129\nproxy_token_file = radar.token\n'
	lab_entry sock relay "$HOSTS" "" http_client
} | lab_config_install
kill -HUP "$(lab_egressd_pid)"
lab_poll 10 lab__gone "${LAB_PID[hold]}" ||
    lab_fail "the revoked tunnel stayed open"
lab_stop hold
lab_expect_eq "the client saw its tunnel closed" "READY CLOSED" \
    "$(paste -sd ' ' "$LAB_DIR/log/hold.out")"
lab_expect_close error revoked
lab_expect_close reason no-permission

lab_finish
