#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Smoke test of the benchmark tool: egress-bench, for a tiny bounded count,
# in each mode against a loopback nginx (tests/bench/lab.sh): direct over
# HTTP, HTTPS with keep-alive and HTTPS with a new connection per request;
# shim through a real egressd over HTTP and HTTPS (and the broker's log
# shows one allowed decision per request); forward-proxy requests in
# absolute form (nginx itself answers them; through tinyproxy too, with
# CONNECT for HTTPS, when it is installed). Each run must report zero
# errors, every request answered and every body byte counted. Two negative
# runs show that failures are counted: a destination the instance was not
# granted (every request denied) and a port nothing listens on. Speed is
# not asserted. Loopback only; every process is stopped by pid. Then
# egress-stream-bench: a source, read whole directly, through egressd as a
# tcp stream, and through squid's CONNECT when squid is installed; and a
# stream to a destination not granted, counted as an error. And
# egress-ws-bench: its echo server, round trips directly and through
# egressd, and a WebSocket refused by the broker counted as an error.
#
# Usage: bench_smoke.sh EGRESS_BENCH EGRESSD EGRESS_STREAM_BENCH
#            EGRESS_WS_BENCH
set -euo pipefail

BENCH=${1:?usage: bench_smoke.sh EGRESS_BENCH EGRESSD}
EGRESSD=${2:?usage: bench_smoke.sh EGRESS_BENCH EGRESSD SB}
SB=${3:?usage: bench_smoke.sh EGRESS_BENCH EGRESSD SB WB}
WB=${4:?usage: bench_smoke.sh EGRESS_BENCH EGRESSD SB WB}
for p in nginx openssl python3 jq; do
	command -v "$p" >/dev/null 2>&1 ||
	    { echo "SKIP: $p not installed"; exit 77; }
done
source "$(dirname "$0")/lab.sh"
lab_init
N=0
ok() { N=$((N + 1)); echo "ok $N - $*"; }
fail()
{
	echo "not ok - $*"
	echo "# --- egressd stderr"; cat "$T/egressd/stderr.log" 2>/dev/null
	echo "# --- nginx errors"; tail -n 5 "$T/nginx/error.log" 2>/dev/null
	exit 1
}

lab_certs
lab_nginx 1 || fail "nginx did not start: $(cat "$T/nginx/error.log")"
SRC_PORT=$(lab_free_port)
LAB_PERMS="http_client, socket_client, websocket_client"
LAB_SQUID_PORTS=$SRC_PORT
LAB_PROXY_PORT=$(lab_free_port)
LAB_PROXY_TOKEN=smoke-proxy-token-0123456789
lab_egressd "$EGRESSD" || fail "egressd did not start"
U=http://127.0.0.1:$HTTP_PORT
S=https://127.0.0.1:$HTTPS_PORT
K=https://127.0.0.1:$CLOSE_PORT
COUNT=20

# expect_ok NAME SIZE ARGS...: COUNT requests, all answered whole.
expect_ok()
{
	local name=$1 size=$2 line rc=0
	shift 2
	line=$(timeout 60 "$BENCH" -n "$COUNT" "$@" 2>"$T/err") || rc=$?
	[ "$rc" = 0 ] || fail "$name: exit $rc: $(cat "$T/err") $line"
	jq -e --argjson n "$COUNT" --argjson sz "$size" \
	    '.errors == 0 and .requests == $n and .non2xx == 0 and
	     .bytes == $n * $sz and .rps > 0 and .p50_us > 0 and
	     .p99_us >= .p50_us' <<<"$line" >/dev/null ||
	    fail "$name: $line"
	ok "$name: $COUNT requests, $((COUNT * size)) body bytes, 0 errors"
}

# expect_errors NAME ARGS...: every request fails, and the tool says so.
expect_errors()
{
	local name=$1 line rc=0
	shift
	line=$(timeout 60 "$BENCH" -n "$COUNT" "$@" 2>"$T/err") || rc=$?
	[ "$rc" = 1 ] || fail "$name: exit $rc, want 1: $line"
	jq -e --argjson n "$COUNT" '.errors == $n and .requests == $n' \
	    <<<"$line" >/dev/null || fail "$name: $line"
	ok "$name: all $COUNT requests counted as errors"
}

CA=(--cacert "$T/ca.crt")
expect_ok "direct http /small, 1 stream" 100 -m direct -c 1 "$U/small"
expect_ok "direct http /large, 4 streams" 1048576 -m direct -c 4 "$U/large"
expect_ok "direct https /small" 100 -m direct -c 4 "${CA[@]}" "$S/small"
expect_ok "direct https, new connection per request" 100 -m direct -c 4 \
    -k "${CA[@]}" "$K/small"
expect_ok "direct with warm-up and a duration" 100 -m direct -c 2 -w 5 \
    -t 30 "$U/small"

before=$(grep -c '"egress.decision"' "$T/egressd/egressd.log" || true)
expect_ok "shim http /small, 8 streams" 100 -m shim -s "$EGRESS_SOCK" -c 8 \
    "$U/small"
expect_ok "shim http /large, 4 streams" 1048576 -m shim -s "$EGRESS_SOCK" \
    -c 4 "$U/large"
expect_ok "shim https /small" 100 -m shim -s "$EGRESS_SOCK" -c 4 "$S/small"
expect_ok "shim, 2 clients" 100 -m shim -s "$EGRESS_SOCK" -c 4 -C 2 \
    "$U/small"
for _ in $(seq 50); do
	got=$(jq -c 'select(.event == "egress.decision" and
	    .instance == "bench" and .verdict == "allow")' \
	    "$T/egressd/egressd.log" | wc -l)
	[ "$((got - before))" -ge $((4 * COUNT)) ] && break
	sleep 0.1
done
[ "$((got - before))" = $((4 * COUNT)) ] ||
    fail "broker logged $((got - before)) allowed decisions, want $((4 * COUNT))"
ok "the broker decided every shim request (allow, instance bench)"

expect_ok "proxy mode through egressd's proxy front, with the token" 100 \
    -m proxy -x "127.0.0.1:$LAB_PROXY_PORT" -a "x:$LAB_PROXY_TOKEN" -c 4 \
    "$U/small"
expect_ok "proxy front, CONNECT for https" 100 -m proxy \
    -x "127.0.0.1:$LAB_PROXY_PORT" -a "x:$LAB_PROXY_TOKEN" -c 2 "${CA[@]}" \
    "$S/small"
expect_ok "proxy mode (absolute form) to nginx" 100 -m proxy \
    -x "127.0.0.1:$HTTP_PORT" -c 2 "$U/small"
if command -v tinyproxy >/dev/null 2>&1; then
	lab_tinyproxy || fail "tinyproxy did not start"
	expect_ok "proxy mode through tinyproxy" 100 -m proxy \
	    -x "127.0.0.1:$TINY_PORT" -c 4 "$U/small"
	expect_ok "proxy mode through tinyproxy, CONNECT for https" 100 \
	    -m proxy -x "127.0.0.1:$TINY_PORT" -c 4 "${CA[@]}" "$S/small"
else
	echo "# tinyproxy not installed: CONNECT not exercised"
fi

expect_errors "proxy front with a wrong token (407)" -m proxy \
    -x "127.0.0.1:$LAB_PROXY_PORT" -a "x:not-the-token-0123456789" -c 2 \
    "$U/small"
expect_errors "shim to a destination not granted" -m shim \
    -s "$EGRESS_SOCK" -c 2 "http://127.0.0.2:$HTTP_PORT/small"
expect_errors "direct to a closed port" -m direct -c 2 \
    "http://127.0.0.1:$DNS_PORT/small"

# ---- egress-stream-bench
SRC_BYTES=3000000
"$SB" serve -l "$SRC_PORT" -b "$SRC_BYTES" >"$T/src.log" 2>&1 &
LAB_PIDS+=($!)
lab_wait_port "$SRC_PORT" || fail "the stream source did not start"
# expect_stream NAME ARGS...: 3 streams, each read whole.
expect_stream()
{
	local name=$1 line rc=0
	shift
	line=$(timeout 60 "$SB" -c 3 "$@" "$SRC_PORT" 2>"$T/err") || rc=$?
	[ "$rc" = 0 ] || fail "$name: exit $rc: $(cat "$T/err") $line"
	jq -e --argjson b "$SRC_BYTES" '.errors == 0 and .streams == 3 and
	    .bytes == 3 * $b and .bytes_per_s > 0 and .client_cpu_s >= 0' \
	    <<<"$line" >/dev/null || fail "$name: $line"
	ok "$name: 3 streams, $((3 * SRC_BYTES)) bytes, 0 errors"
}
expect_stream "stream direct" -m direct
expect_stream "stream through egressd (tcp)" -m shim -s "$EGRESS_SOCK"
got=$(jq -c 'select(.event == "egress.decision" and .transport == "tcp"
    and .verdict == "allow")' "$T/egressd/egressd.log" | wc -l)
[ "$got" = 3 ] || fail "broker logged $got allowed tcp decisions, want 3"
ok "the broker decided every tcp stream"
if command -v squid >/dev/null 2>&1; then
	lab_squid || fail "squid did not start"
	expect_stream "stream through squid's CONNECT" -m proxy -p "$SQUID_PORT"
else
	echo "# squid not installed: the CONNECT stream not exercised"
fi
rc=0
line=$(timeout 60 "$SB" -m shim -s "$EGRESS_SOCK" -c 2 "$DNS_PORT" \
    2>/dev/null) || rc=$?
[ "$rc" = 1 ] && jq -e '.errors == 2 and .bytes == 0' <<<"$line" >/dev/null ||
    fail "a tcp stream to a port nothing serves: exit $rc: $line"
ok "failed streams are counted as errors"

# ---- egress-ws-bench
WS_PORT=$(lab_free_port)
"$WB" serve -l "$WS_PORT" >"$T/echo.log" 2>&1 &
LAB_PIDS+=($!)
lab_wait_port "$WS_PORT" || fail "the WebSocket echo server did not start"
# expect_ws NAME ARGS...: 2 WebSockets for 1 s, echoes counted, no error.
expect_ws()
{
	local name=$1 line rc=0
	shift
	line=$(timeout 60 "$WB" -c 2 -t 1 "$@" "$WS_PORT" 2>"$T/err") || rc=$?
	[ "$rc" = 0 ] || fail "$name: exit $rc: $(cat "$T/err") $line"
	jq -e '.errors == 0 and .streams == 2 and .messages > 0 and
	    .msgs_per_s > 0 and .p50_us > 0 and .p99_us >= .p50_us' \
	    <<<"$line" >/dev/null || fail "$name: $line"
	ok "$name: $(jq -r .messages <<<"$line") echoes, 0 errors"
}
expect_ws "WebSocket echo direct" -m direct
expect_ws "WebSocket echo through egressd" -m shim -s "$EGRESS_SOCK"
got=$(jq -c 'select(.event == "egress.decision" and
    .transport == "websocket" and .verdict == "allow")' \
    "$T/egressd/egressd.log" | wc -l)
[ "$got" = 2 ] || fail "broker logged $got allowed websocket decisions, want 2"
ok "the broker decided every WebSocket"
rc=0
line=$(timeout 60 "$WB" -m shim -s "$EGRESS_SOCK" -c 2 -t 1 "$DNS_PORT" \
    2>/dev/null) || rc=$?
[ "$rc" = 1 ] && jq -e '.errors == 2 and .messages == 0' <<<"$line" \
    >/dev/null || fail "a WebSocket to a port nothing serves: exit $rc: $line"
ok "failed WebSockets are counted as errors"

rc=0; "$BENCH" -m direct -n 1 http://192.0.2.1/ 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "a non-loopback target was not refused (exit $rc)"
ok "non-loopback targets are refused"
echo "1..$N"
