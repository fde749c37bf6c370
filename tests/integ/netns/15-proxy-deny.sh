#!/bin/bash
# SPDX-License-Identifier: ISC
#
# The proxy front keeps every guarantee of the shim path, with real curl
# on the instance socket: each deny reason (not-granted with no DNS
# query, no-permission, metadata by name and by literal, private-address,
# an answer mixing public and private, an instance removed while its
# client keeps the connection open) is a 403 with the masked message
# and X-Egress-Error: denied and nothing reaching the upstream; a granted
# name without an address is 502 (dns-failed); a
# redirect comes back untouched and curl -L's second request is denied;
# a Host that differs from the absolute-form URL is 400; the budget is
# 429 with Retry-After; a reload applies to the next request on the same
# socket; a broken configuration is 403 with policy-unavailable in the
# log; CL+TE, two Content-Lengths, obs-fold and bad chunking are 400 and
# never reach the upstream; pipelined requests are answered in order.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
. "$(dirname "$0")/../lab/curl.sh"
lab_init
lab_need_bins
lab_up

lab_dns_set api.weather.example="$LAB_PUB4" \
    gate.weather.example="$LAB_PUB4" \
    meta.weather.example="$LAB_META4" lan.weather.example="$LAB_PRIV4" \
    mixed.weather.example="$LAB_PUB4,$LAB_PRIV4"
lab_gate_start
HOSTS="api.weather.example, gate.weather.example, meta.weather.example,"
HOSTS="$HOSTS lan.weather.example, mixed.weather.example, $LAB_META4,"
HOSTS="$HOSTS $LAB_PRIV4, nx.weather.example"
config()
{
	MAX_CONN=1 lab_config_base
	lab_entry weather weather "$HOSTS"
	lab_entry radar radar "${1:-api.weather.example}"
	lab_entry noperm weather api.weather.example "" ""
}
config | lab_config_install
lab_egressd_start weather radar noperm

# not-granted: no DNS query; origin-form and absolute-form.
lab_curl radar http://other.weather.example/small
lab_expect_curl_denied
lab_expect_decision radar deny not-granted other.weather.example
lab_expect_eq "DNS queries for a request denied by its grant" 0 \
    "$(lab_dns_count other.weather.example A)"
lab_curl radar -x http://p.invalid:1 http://other.weather.example/small
lab_expect_curl_denied
lab_expect_decision radar deny not-granted other.weather.example

# no-permission.
lab_curl noperm http://api.weather.example/small
lab_expect_curl_denied
lab_expect_decision noperm deny no-permission api.weather.example
lab_expect_hits "$LAB_PUB4" 0

# metadata, private, mixed: by name and by literal, nothing connected.
for t in "meta.weather.example metadata" "$LAB_META4 metadata" \
    "lan.weather.example private-address" "$LAB_PRIV4 private-address" \
    "mixed.weather.example private-address"; do
	set -- $t
	lab_curl weather -x http://p.invalid:1 "http://$1/latest/meta-data/"
	lab_expect_curl_denied
	lab_expect_decision weather deny "$2" "$1"
	lab_expect_hits "$LAB_META4" 0
	lab_expect_hits "$LAB_PRIV4" 0
	lab_expect_hits "$LAB_PUB4" 0
done

# A granted name with no address: 502, dns-failed.
lab_curl weather http://nx.weather.example/small
lab_expect_curl 502
lab_expect_curl_header X-Egress-Error dns-failed
lab_expect_decision weather deny unresolvable nx.weather.example

# An instance removed while its client keeps a connection open: the next
# request on that connection is denied (unknown-instance).
cat >"$LAB_DIR/ka.py" <<'PY'
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
req = b'GET /small HTTP/1.1\r\nHost: api.weather.example\r\n\r\n'
def answer():
    data = b''
    while b'\r\n\r\n' not in data:
        data += s.recv(4096)
    head, _, body = data.partition(b'\r\n\r\n')
    n = int([l.split(b':')[1] for l in head.split(b'\r\n')
             if l.lower().startswith(b'content-length:')][0])
    while len(body) < n:
        body += s.recv(4096)
    return head.split(b' ')[1].decode()
s.sendall(req)
print(answer(), flush=True)
open(sys.argv[2], 'w').close()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.05)
s.sendall(req)
print(answer(), flush=True)
PY
lab_mark
lab_spawn ka "$LAB_NS_B" "$LAB_PYTHON" "$LAB_DIR/ka.py" \
    "$LAB_SOCK_DIR/radar.sock" "$LAB_DIR/ka.first" "$LAB_DIR/ka.again"
lab_poll 10 test -e "$LAB_DIR/ka.first" || lab_fail "no first answer"
{
	MAX_CONN=1 lab_config_base
	lab_entry weather weather "$HOSTS"
	lab_entry noperm weather api.weather.example "" ""
} | lab_config_install
lab_ns_b kill -HUP "$(lab_egressd_pid)"
lab_poll 10 bash -c "[ ! -e '$LAB_SOCK_DIR/radar.sock' ]" ||
    lab_fail "the removed instance's socket stayed"
: >"$LAB_DIR/ka.again"
lab_poll 10 bash -c "[ \$(wc -l <'$LAB_DIR/log/ka.out') = 2 ]" ||
    lab_fail "no second answer on the kept connection"
lab_expect_eq "answers on the kept connection" "200 403" \
    "$(paste -sd ' ' "$LAB_DIR/log/ka.out")"
lab_expect_decision radar allow - api.weather.example 1
lab_expect_decision radar deny unknown-instance api.weather.example 2
config | lab_config_install
lab_ns_b kill -HUP "$(lab_egressd_pid)"
lab_poll 10 test -S "$LAB_SOCK_DIR/radar.sock" ||
    lab_fail "radar's socket did not come back"

# A redirect to the metadata address: returned untouched, never followed;
# curl -L asks again, and that request is denied.
lab_curl weather http://api.weather.example/redirect
lab_expect_curl 302
lab_expect_curl_header Location "http://$LAB_META4/"
lab_expect_hits "$LAB_META4" 0
lab_curl weather -L http://api.weather.example/redirect
lab_expect_curl_denied
lab_expect_decision weather allow - api.weather.example 1
lab_expect_decision weather deny metadata "$LAB_META4" 2
lab_expect_hits "$LAB_META4" 0

# The budget: one upstream connection, held by the gate.
GATE=http://gate.weather.example:$LAB_GATE_PORT
lab_ns_b timeout -k 5 "$(egress_wait 30)" curl -sS -o /dev/null \
    --unix-socket "$LAB_SOCK_DIR/weather.sock" \
    "$GATE/hold/budget?to=http://api.weather.example/" &
held=$!
lab_gate_wait budget
lab_curl weather http://api.weather.example/small
lab_expect_curl 429
lab_expect_curl_header Retry-After 1
lab_expect_curl_header X-Egress-Error budget-exhausted
lab_expect_decision weather deny budget-exhausted api.weather.example
lab_expect_hits "$LAB_PUB4" 0 /small
lab_gate_release budget
wait "$held" || lab_fail "the held request failed"
lab_curl weather http://api.weather.example/small
lab_expect_curl 200

# A reload applies to the next request on the same socket.
lab_curl radar http://api.weather.example/small
lab_expect_curl 200
config gate.weather.example | lab_config_install
lab_curl radar http://api.weather.example/small
lab_expect_curl_denied
lab_expect_decision radar deny not-granted api.weather.example
lab_expect_hits "$LAB_PUB4" 0

# A broken configuration fails closed.
{ config; printf '[plugins.entries.broken\n'; } | lab_config_install
lab_curl weather http://api.weather.example/small
lab_expect_eq "status with a broken configuration" 403 "$LAB_CURL_STATUS"
lab_expect_curl_header X-Egress-Error unavailable
lab_expect_decision weather deny policy-unavailable api.weather.example
lab_expect_hits "$LAB_PUB4" 0
config | lab_config_install

# Framing attacks: 400, the upstream never sees the request.
raw()
{
	printf "$1" >"$LAB_DIR/raw.in"
	lab_raw weather "$LAB_DIR/raw.in"
	lab_expect_eq "statuses for $2" "$3" "$(lab_raw_statuses)"
}
H='Host: api.weather.example\r\n'
raw "POST /post HTTP/1.1\r\n${H}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /small HTTP/1.1\r\n${H}\r\n" CL+TE 400
raw "POST /post HTTP/1.1\r\n${H}Content-Length: 5\r\nContent-Length: 5\r\n\r\nhelloGET /small HTTP/1.1\r\n${H}\r\n" "two Content-Lengths" 400
raw "GET /small HTTP/1.1\r\n${H}X-Fold: a\r\n b\r\n\r\n" obs-fold 400
raw "GET /small HTTP/1.1\n${H}\n" "bare LF" 400
lab_expect_hits "$LAB_PUB4" 0
lab_expect_eq "decisions for refused heads" 0 \
    "$(lab_count_events egress.decision)"
raw "POST /post HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n" "bad chunking" 400
lab_expect_hits "$LAB_PUB4" 0 /post

# A Host that differs from the absolute-form URL (curl would rewrite
# the URL from a custom Host, so the request is written by hand).
raw "GET http://api.weather.example/small HTTP/1.1\r\nHost: $LAB_META4\r\nConnection: close\r\n\r\n" "a Host that differs" 400
lab_expect_decision weather deny invalid-request api.weather.example
lab_expect_hits "$LAB_PUB4" 0
lab_expect_hits "$LAB_META4" 0

# Pipelining: three requests in one write, answered in order.
raw "GET /small HTTP/1.1\r\n${H}\r\nGET /missing HTTP/1.1\r\n${H}\r\nGET /small HTTP/1.1\r\n${H}Connection: close\r\n\r\n" pipelining "200 404 200"
lab_expect_hits "$LAB_PUB4" 3

lab_finish
