#!/bin/bash
# SPDX-License-Identifier: ISC
#
# The proxy front on a loopback TCP port per entry (proxy_listen), with
# real curl -x --proxy-user: allowed with the entry's token (the instance
# is the port's, whatever user name is sent), 407 with
# Proxy-Authenticate for no token, a wrong one (also the token less its
# last byte, or with one more) or another instance's (the
# same answer each time, logged, nothing reaching the upstream), 400 for
# an origin-form request, denials as on the socket; the ports follow
# reloads (a moved port, a removed one, a new token applies at the next
# request), and so does a rotated token file without a reload; a burst
# of authorized connections is served whole; idle connections without the
# token cannot use up the instance's sessions.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
. "$(dirname "$0")/../lab/curl.sh"
lab_init
lab_need_bins
lab_up

lab_dns_set api.weather.example="$LAB_PUB4"
E=$LAB_DIR/etc
mkdir -p "$E"
token() { (umask 077; printf '%s\n' "$2" >"$E/$1.token"); }
token weather weather-token-0123456789
token radar radar-token-0123456789
config()
{
	lab_config_base
	lab_entry weather weather api.weather.example
	printf 'proxy_listen = %s\nproxy_token_file = weather.token\n' \
	    "${1:-127.0.0.1:3128}"
	lab_entry radar radar ""
	[ "${2:-}" = no-radar-port ] ||
	    printf 'proxy_listen = [::1]:3129\nproxy_token_file = radar.token\n'
}
config | lab_config_install
lab_egressd_start weather radar
lab_wait_port 3128 3129

# pcurl PORT [curl options] URL: curl through the proxy port.
pcurl()
{
	local port=$1
	shift
	lab_mark
	LAB_CURL_OUT=$LAB_DIR/curl.out
	LAB_CURL_HDR=$LAB_DIR/curl.hdr
	LAB_CURL_RC=0
	LAB_CURL_STATUS=$(lab_ns_b timeout -k 5 "$(egress_wait 30)" \
	    curl -sS -x "$port" -o "$LAB_CURL_OUT" -D "$LAB_CURL_HDR" \
	    -w '%{http_code}' "$@" 2>"$LAB_DIR/curl.err") || LAB_CURL_RC=$?
}
W=http://127.0.0.1:3128
R=http://[::1]:3129

pcurl $W --proxy-user weather:weather-token-0123456789 \
    http://api.weather.example/small
lab_expect_curl 200
LAB_FETCH_OUT=$LAB_CURL_OUT lab_expect_fetch_body_file "$LAB_DIR/www/small"
lab_expect_decision weather allow - api.weather.example
lab_expect_hits "$LAB_PUB4" 1 /small
# The user name is not an instance name: the port decides.
pcurl $W --proxy-user radar:weather-token-0123456789 \
    http://api.weather.example/small
lab_expect_curl 200
lab_expect_decision weather allow - api.weather.example

# 407 for no token, a wrong one, another instance's token, the token
# less its last byte or with one more.
for cred in "" "weather:wrong-token-0123456789" \
    "weather:radar-token-0123456789" "weather:weather-token-012345678" \
    "weather:weather-token-0123456789x"; do
	pcurl $W ${cred:+--proxy-user "$cred"} http://api.weather.example/small
	lab_expect_curl 407
	lab_expect_curl_header Proxy-Authenticate 'Basic realm="egressd"'
	lab_expect_eq "decisions for a 407" 0 \
	    "$(lab_count_events egress.decision)"
	lab_wait_events egress.proxy 1
	lab_expect_eq "egress.proxy event" "weather 407 auth" \
	    "$(lab_events egress.proxy | jq -r '"\(.instance) \(.status) \(.error)"')"
	! grep -q 'token-0123456789' "$LAB_BROKER_LOG" ||
	    lab_fail "a token is in the log"
	lab_expect_hits "$LAB_PUB4" 0
done
cp "$LAB_CURL_OUT" "$LAB_DIR/407.weather"
pcurl $R http://api.weather.example/small
lab_expect_curl 407
cmp -s "$LAB_CURL_OUT" "$LAB_DIR/407.weather" ||
    lab_fail "the 407 differs between instances"
lab_ok "the 407 body names no instance"

# The other instance on its own port: its own policy.
pcurl $R --proxy-user x:radar-token-0123456789 \
    http://api.weather.example/small
lab_expect_curl_denied
lab_expect_decision radar deny not-granted api.weather.example

# Origin-form on a TCP port is 400; so is CONNECT's 405 after the token.
lab_mark
st=$(lab_ns_b curl -sS -o /dev/null -w '%{http_code}' \
    -H 'Proxy-Authorization: Basic eDp3ZWF0aGVyLXRva2VuLTAxMjM0NTY3ODk=' \
    http://127.0.0.1:3128/small)
lab_expect_eq "origin-form on the port" 400 "$st"
lab_expect_hits "$LAB_PUB4" 0

# Reloads: the port moves, the other closes, a new token applies.
token weather weather-token-new-0123456789
config 127.0.0.1:3130 no-radar-port | lab_config_install
lab_ns_b kill -HUP "$(lab_egressd_pid)"
lab_poll 10 bash -c "ip netns exec $LAB_NS_B ss -Htln | grep -q ':3130 '" ||
    lab_fail "port 3130 not listening after the reload"
lab_poll 10 bash -c "! ip netns exec $LAB_NS_B ss -Htln | grep -q ':3128 '" ||
    lab_fail "port 3128 still listening after the reload"
! lab_ns_b ss -Htln | grep -q ':3129 ' || lab_fail "port 3129 still open"
lab_ok "ports follow the reload"
pcurl http://127.0.0.1:3130 --proxy-user weather:weather-token-0123456789 \
    http://api.weather.example/small
lab_expect_curl 407
pcurl http://127.0.0.1:3130 \
    --proxy-user weather:weather-token-new-0123456789 \
    http://api.weather.example/small
lab_expect_curl 200
lab_expect_decision weather allow - api.weather.example

# A rotated token file applies at the next request, with no signal.
token weather weather-token-rot-0123456789
pcurl http://127.0.0.1:3130 \
    --proxy-user weather:weather-token-new-0123456789 \
    http://api.weather.example/small
lab_expect_curl 407
pcurl http://127.0.0.1:3130 \
    --proxy-user weather:weather-token-rot-0123456789 \
    http://api.weather.example/small
lab_expect_curl 200

# A burst of 12 connections opened at once, each then sending one request
# with the token: all are answered 200. The port stops accepting while 8
# of its connections are unauthenticated, so the others wait in the
# backlog instead of being closed. (12: more than those 8, fewer than the
# instance's 16 upstream connections, so no request meets its budget.)
lab_mark
lab_ns_b timeout -k 5 "$(egress_wait 60)" python3 - \
    >"$LAB_DIR/burst.out" <<'PY'
import base64, socket
auth = base64.b64encode(b'w:weather-token-rot-0123456789').decode()
conns = [socket.create_connection(('127.0.0.1', 3130)) for i in range(12)]
for s in conns:
    s.sendall(('GET http://api.weather.example/small HTTP/1.1\r\n'
               'Host: api.weather.example\r\n'
               'Proxy-Authorization: Basic %s\r\n'
               'Connection: close\r\n\r\n' % auth).encode())
ok = 0
for s in conns:
    s.settimeout(20)
    out = b''
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except OSError:
        pass
    ok += out.startswith(b'HTTP/1.1 200 ')
print(ok)
PY
lab_expect_eq "answered 200 of a burst of 12 authorized connections" 12 \
    "$(cat "$LAB_DIR/burst.out")"

# 100 idle connections to the port without the token hold none of the
# instance's sessions: the broker holds at most 8 of them (the rest wait
# in the listen backlog, unaccepted), and the instance's own socket
# still serves.
lab_mark
lab_ns_b timeout -k 5 "$(egress_wait 60)" python3 - \
    "$LAB_SOCK_DIR/weather.sock" >"$LAB_DIR/idle.out" <<'PY'
import socket, subprocess, sys, time
held = [socket.create_connection(('127.0.0.1', 3130)) for i in range(100)]
def accepted():
    # the port's established connections a process holds: the broker's
    out = subprocess.run(['ss', '-Htnp', 'state', 'established',
                          '( sport = :3130 )'], capture_output=True,
                         text=True).stdout
    return sum(1 for l in out.splitlines() if 'users:' in l)
end = time.monotonic() + 3
most = 0
while time.monotonic() < end:
    most = max(most, accepted())
    time.sleep(0.05)
out = b''
try:
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.connect(sys.argv[1])
    u.sendall(b'GET /small HTTP/1.1\r\nHost: api.weather.example\r\n'
              b'Connection: close\r\n\r\n')
    u.settimeout(10)
    while True:
        b = u.recv(65536)
        if not b:
            break
        out += b
except OSError as e:
    out += ('refused: %s' % e).encode()
print(out.split(b'\r\n')[0].decode(errors='replace'))
print(most)
PY
lab_expect_eq "the instance socket with 100 idle port connections" \
    "HTTP/1.1 200 OK" "$(sed -n 1p "$LAB_DIR/idle.out")"
n=$(sed -n 2p "$LAB_DIR/idle.out")
[ "$n" -ge 1 ] && [ "$n" -le 8 ] ||
    lab_fail "the broker held $n unauthenticated connections (want 1 to 8)"
lab_ok "the broker held at most 8 unauthenticated connections ($n)"

lab_finish
