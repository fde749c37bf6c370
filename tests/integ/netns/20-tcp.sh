#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Scenario 14: tcp and tls streams through egress-connect, against real
# peers in the outside namespace (tests/integ/lab/stream_peer.py): a line
# echo; 64 MiB both ways through an echo with the SHA-256 of each
# direction checked; half-close both ways (the guest's end of stdin comes
# back as the echo's end; a peer that ends first still receives the rest
# of stdin); an unresponsive destination (connect timeout); refused
# without the socket_client permission, for metadata and mixed-zone
# answers as HTTP is; tls with SNI and verification (a certificate for
# another name refused, an IP literal verified as an IP); and the one
# budget shared with HTTP (max_connections_per_instance = 2: two open
# streams make an HTTP request budget-exhausted, and ending one frees its
# lease at once); a reload that revokes the permission closes an open
# stream (egress.close error revoked), and a stream still connecting (its
# TLS handshake held by the peer) when the reload comes is decided again
# once connected and closed before a byte is relayed, and so is an https
# request (its request head never goes out); a reload that finds the
# configuration broken closes every open stream (the guest hears
# unavailable, as a new stream would; logged policy-unavailable).
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
lab_up

[ -x "${EGRESS_CONNECT:-}" ] ||
    lab_fail "set EGRESS_CONNECT to the built egress-connect"
P=$LAB_SRC_DIR/stream_peer.py
ECHO_PORT=7000
BANNER_PORT=7001
HOLE_PORT=7002
TLS_PORT=7443
OTHER_PORT=7444
HOLD_PORT=7445
RESET_PORT=7446
HOLD2_PORT=7447
mkdir -p "$LAB_DIR/tcp"

# lab_peer NAME ARGS...: start stream_peer.py in the outside namespace and
# wait for its "ready".
lab_peer()
{
	local name=$1
	shift
	lab_spawn "$name" "$LAB_NS_O" "$LAB_PYTHON" "$P" "$@"
	lab_poll 10 grep -q ready "$LAB_DIR/log/$name.out" ||
	    lab_fail "stream peer $name did not start"
}

# sock_conf PERMS: install this scenario's configuration, the instance
# "sock" with PERMS (a budget of 2; "web" for HTTP alongside).
sock_conf()
{
	{
		MAX_CONN=2 lab_config_base
		lab_entry sock sockets "$HOSTS" mixed.weather.example "$1"
		lab_entry web weather "$HOSTS" mixed.weather.example
	} | lab_config_install
}

# lab_connect INSTANCE URL IN: run egress-connect in the broker namespace
# with stdin from the file IN (a lab_mark first); sets CONNECT_RC,
# CONNECT_OUT (its stdout file) and CONNECT_ERR (its stderr text).
lab_connect()
{
	lab_mark
	CONNECT_OUT=$LAB_DIR/tcp/connect.out
	CONNECT_RC=0
	lab_ns_b timeout -k 5 "$(egress_wait 120)" "${EGRESS_WRAP_CMD[@]}" \
	    "$EGRESS_CONNECT" --socket "$LAB_SOCK_DIR/$1.sock" "$2" \
	    <"$3" >"$CONNECT_OUT" 2>"$LAB_DIR/tcp/connect.err" ||
	    CONNECT_RC=$?
	CONNECT_ERR=$(cat "$LAB_DIR/tcp/connect.err")
}

# lab_expect_connect_error CODE: the last egress-connect failed with
# guest-visible CODE (egress-fetch's exit status and stderr line).
lab_expect_connect_error()
{
	local code=$1 want=${LAB_EXIT_CODE[$1]}
	[ "$CONNECT_RC" = "$want" ] ||
	    lab_fail "egress-connect: want exit $want ($code)," \
	    "got $CONNECT_RC: $CONNECT_ERR"
	grep -q "^egress-connect: $code: " <<<"$CONNECT_ERR" ||
	    lab_fail "stderr lacks 'egress-connect: $code: ': $CONNECT_ERR"
	lab_ok "egress-connect failed with $code (exit $want)"
}

lab_expect_connect_ok()
{
	[ "$CONNECT_RC" = 0 ] ||
	    lab_fail "egress-connect exited $CONNECT_RC: $CONNECT_ERR"
	lab_ok "egress-connect ended cleanly"
}

# The last egress.decision/egress.close field since the mark.
last_field() { lab_events "$1" | tail -n 1 | jq -r ".$2 | tostring"; }

lab_dns_set api.weather.example="$LAB_PUB4" \
    meta.weather.example="$LAB_META4" \
    mixed.weather.example="$LAB_PUB4,$LAB_PRIV4" \
    other.weather.example="$LAB_PUB4"
HOSTS="api.weather.example, meta.weather.example, mixed.weather.example"
HOSTS="$HOSTS, other.weather.example, $LAB_PUB4, $LAB_META4"
sock_conf "http_client, socket_client"
lab_egressd_start sock web

lab_peer echo echo "$LAB_PUB4" "$ECHO_PORT"
lab_peer banner banner "$LAB_PUB4" "$BANNER_PORT" "$LAB_DIR/tcp"
lab_peer hole blackhole "$LAB_PUB4" "$HOLE_PORT"
lab_peer tls echo "$LAB_PUB4" "$TLS_PORT" "$LAB_DIR/pki/good.crt" \
    "$LAB_DIR/pki/good.key" "$LAB_DIR/tcp/sni"
lab_peer other echo "$LAB_PUB4" "$OTHER_PORT" "$LAB_DIR/pki/other.crt" \
    "$LAB_DIR/pki/other.key"

# ---- a line echo; the guest's end comes back as the echo's end
printf 'hello\nsecond line\n' >"$LAB_DIR/tcp/lines"
lab_connect sock "tcp://api.weather.example:$ECHO_PORT" "$LAB_DIR/tcp/lines"
lab_expect_connect_ok
cmp -s "$LAB_DIR/tcp/lines" "$CONNECT_OUT" ||
    lab_fail "the echo differs: $(head -c 200 "$CONNECT_OUT")"
lab_ok "the lines came back"
lab_expect_decision sock allow - api.weather.example
lab_expect_eq "decision transport" tcp "$(last_field egress.decision transport)"
lab_expect_eq "decision port" "$ECHO_PORT" \
    "$(last_field egress.decision port)"
lab_expect_close error ""
lab_expect_eq "close transport" tcp "$(last_field egress.close transport)"
lab_expect_eq "close bytes_out" 18 "$(last_field egress.close bytes_out)"
lab_expect_eq "close bytes_in" 18 "$(last_field egress.close bytes_in)"
lab_expect_close connected "$LAB_PUB4"

# ---- 64 MiB both ways, checked by SHA-256
head -c $((64 * 1024 * 1024)) /dev/urandom >"$LAB_DIR/tcp/bulk"
lab_connect sock "tcp://api.weather.example:$ECHO_PORT" "$LAB_DIR/tcp/bulk"
lab_expect_connect_ok
lab_expect_eq "SHA-256 of 64 MiB echoed" \
    "$(sha256sum <"$LAB_DIR/tcp/bulk" | cut -d' ' -f1)" \
    "$(sha256sum <"$CONNECT_OUT" | cut -d' ' -f1)"
lab_expect_eq "close bytes_out (64 MiB)" $((64 * 1024 * 1024)) \
    "$(last_field egress.close bytes_out)"
rm -f "$LAB_DIR/tcp/bulk"

# ---- the destination ends first; the rest of stdin still reaches it
head -c $((4 * 1024 * 1024)) /dev/urandom >"$LAB_DIR/tcp/late"
lab_connect sock "tcp://api.weather.example:$BANNER_PORT" \
    "$LAB_DIR/tcp/late"
lab_expect_connect_ok
lab_expect_eq "banner" "220 banner from the upstream" "$(cat "$CONNECT_OUT")"
lab_poll 10 test -e "$LAB_DIR/tcp/banner.1.sha256" ||
    lab_fail "the banner peer never saw the end of the guest's bytes"
lab_expect_eq "SHA-256 of what the banner peer read after its end" \
    "$(sha256sum <"$LAB_DIR/tcp/late" | cut -d' ' -f1)" \
    "$(cat "$LAB_DIR/tcp/banner.1.sha256")"

# ---- a destination that resets after its bytes: an error, never a
# clean end, whichever read meets the reset (libevent's 4 KiB read, or
# the broker's own read past it, when the reset has arrived by then:
# 4096 bytes are exactly one of libevent's reads)
for size in 4096 300000; do
	lab_peer "reset$size" reset "$LAB_PUB4" "$RESET_PORT" "$size"
	lab_connect sock "tcp://api.weather.example:$RESET_PORT" /dev/null
	lab_expect_connect_error upstream-protocol-error
	lab_expect_close error upstream-protocol-error
	[ "$(wc -c <"$CONNECT_OUT")" -le "$size" ] ||
	    lab_fail "more bytes than the destination sent"
	lab_stop "reset$size"
done

# ---- an unresponsive destination: the connect deadline (5 s) passes
lab_connect sock "tcp://api.weather.example:$HOLE_PORT" /dev/null
lab_expect_connect_error timeout
lab_expect_decision sock allow - api.weather.example
lab_expect_close error timeout

# ---- refusals: no port, no permission, metadata, mixed zones
lab_connect sock "tcp://api.weather.example" /dev/null
lab_expect_connect_error invalid-request
lab_expect_decision sock deny invalid-destination
for t in tcp tls; do
	lab_connect web "$t://api.weather.example:$ECHO_PORT" /dev/null
	lab_expect_connect_error denied
	lab_expect_decision web deny no-permission api.weather.example
	lab_expect_eq "decision transport" "$t" \
	    "$(last_field egress.decision transport)"
done
for u in "tcp://meta.weather.example:80" "tcp://$LAB_META4:80" \
    "tls://meta.weather.example:443"; do
	lab_connect sock "$u" /dev/null
	lab_expect_connect_error denied
	lab_expect_decision sock deny metadata
done
lab_connect sock "tcp://mixed.weather.example:$ECHO_PORT" /dev/null
lab_expect_connect_error denied
lab_expect_decision sock deny mixed-zones mixed.weather.example

# ---- tls: SNI and verification by the broker, plaintext to the guest
lab_connect sock "tls://api.weather.example:$TLS_PORT" "$LAB_DIR/tcp/lines"
lab_expect_connect_ok
cmp -s "$LAB_DIR/tcp/lines" "$CONNECT_OUT" ||
    lab_fail "the tls echo differs: $(head -c 200 "$CONNECT_OUT")"
lab_ok "the lines came back over tls"
lab_expect_eq "SNI seen by the tls peer" api.weather.example \
    "$(tail -n 1 "$LAB_DIR/tcp/sni")"
lab_expect_eq "close transport" tls "$(last_field egress.close transport)"
lab_expect_close error ""
head -c $((4 * 1024 * 1024)) /dev/urandom >"$LAB_DIR/tcp/tlsbulk"
lab_connect sock "tls://$LAB_PUB4:$TLS_PORT" "$LAB_DIR/tcp/tlsbulk"
lab_expect_connect_ok
lab_expect_eq "SHA-256 of 4 MiB echoed over tls to an IP literal" \
    "$(sha256sum <"$LAB_DIR/tcp/tlsbulk" | cut -d' ' -f1)" \
    "$(sha256sum <"$CONNECT_OUT" | cut -d' ' -f1)"
lab_expect_eq "no SNI for an IP literal" - "$(tail -n 1 "$LAB_DIR/tcp/sni")"
lab_connect sock "tls://other.weather.example:$OTHER_PORT" \
    "$LAB_DIR/tcp/lines"
lab_expect_connect_error tls-failed
lab_expect_close error tls-failed
[ ! -s "$CONNECT_OUT" ] || lab_fail "bytes reached the guest anyway"
lab_ok "nothing relayed over the refused certificate"
lab_connect sock "tls://api.weather.example:$ECHO_PORT" "$LAB_DIR/tcp/lines"
lab_expect_connect_error tls-failed

# ---- one budget across transports (max_connections_per_instance = 2)
mkfifo "$LAB_DIR/tcp/in1" "$LAB_DIR/tcp/in2"
lab_mark
for n in 1 2; do
	lab_spawn "conn$n" "$LAB_NS_B" sh -c 'exec "$@" <"$0"' \
	    "$LAB_DIR/tcp/in$n" "${EGRESS_WRAP_CMD[@]}" "$EGRESS_CONNECT" \
	    --socket "$LAB_SOCK_DIR/sock.sock" \
	    "tcp://api.weather.example:$ECHO_PORT"
done
exec {in1}>"$LAB_DIR/tcp/in1" {in2}>"$LAB_DIR/tcp/in2"
printf 'one\n' >&"$in1"
printf 'two\n' >&"$in2"
lab_poll 10 grep -qx one "$LAB_DIR/log/conn1.out" ||
    lab_fail "stream 1 did not connect"
lab_poll 10 grep -qx two "$LAB_DIR/log/conn2.out" ||
    lab_fail "stream 2 did not connect"
lab_ok "two tcp streams open"
lab_fetch sock http://api.weather.example/small
lab_expect_fetch_error budget-exhausted
lab_expect_decision sock deny budget-exhausted api.weather.example
lab_expect_hits "$LAB_PUB4" 0
lab_connect sock "tcp://api.weather.example:$ECHO_PORT" /dev/null
lab_expect_connect_error budget-exhausted
# Ending one stream (its stdin) ends it and frees the lease at once.
lab_mark
exec {in1}>&-
lab_wait_events egress.close 1
lab_stop conn1
lab_fetch sock http://api.weather.example/small
lab_expect_fetch_ok
lab_expect_fetch_body_file "$LAB_DIR/www/small"
exec {in2}>&-
lab_poll 10 lab__gone "${LAB_PID[conn2]}" ||
    lab_fail "stream 2 did not end with its stdin"
lab_stop conn2
lab_expect_eq "stream 2's exit status" 0 "$LAB_STOP_RC"

# ---- a reload that revokes socket_client closes the open stream
mkfifo "$LAB_DIR/tcp/in3"
lab_spawn conn3 "$LAB_NS_B" sh -c 'exec "$@" <"$0"' "$LAB_DIR/tcp/in3" \
    "${EGRESS_WRAP_CMD[@]}" "$EGRESS_CONNECT" \
    --socket "$LAB_SOCK_DIR/sock.sock" "tcp://api.weather.example:$ECHO_PORT"
exec {in3}>"$LAB_DIR/tcp/in3"
printf 'three\n' >&"$in3"
lab_poll 10 grep -qx three "$LAB_DIR/log/conn3.out" ||
    lab_fail "stream 3 did not connect"
lab_mark
sock_conf http_client
kill -HUP "$(lab_egressd_pid)"
lab_poll 10 lab__gone "${LAB_PID[conn3]}" ||
    lab_fail "the revoked stream stayed open"
lab_stop conn3
lab_expect_eq "revoked stream's exit status (denied)" 10 "$LAB_STOP_RC"
grep -q "^egress-connect: denied: " "$LAB_DIR/log/conn3.err" ||
    lab_fail "no denied message: $(cat "$LAB_DIR/log/conn3.err")"
lab_expect_close error revoked
lab_expect_close reason no-permission
exec {in3}>&-

# ---- a reload while a tls stream is still connecting: decided again once
# connected, before any byte is relayed
sock_conf "http_client, socket_client"
n=$(lab_count_events egress.config)
kill -HUP "$(lab_egressd_pid)"
lab_wait_events egress.config $((n + 1))
mkdir -p "$LAB_DIR/hold"
lab_peer held hold "$LAB_PUB4" "$HOLD_PORT" "$LAB_DIR/pki/good.crt" \
    "$LAB_DIR/pki/good.key" "$LAB_DIR/hold"
printf 'four\n' >"$LAB_DIR/tcp/four"
lab_spawn conn4 "$LAB_NS_B" "${EGRESS_WRAP_CMD[@]}" "$EGRESS_CONNECT" \
    --socket "$LAB_SOCK_DIR/sock.sock" \
    "tls://api.weather.example:$HOLD_PORT" <"$LAB_DIR/tcp/four"
lab_poll 10 test -e "$LAB_DIR/hold/hold.1.accepted" ||
    lab_fail "stream 4 did not reach the held peer"
lab_mark
sock_conf http_client
kill -HUP "$(lab_egressd_pid)"
lab_wait_events egress.config 1
: >"$LAB_DIR/hold/hold.release"
lab_poll 10 lab__gone "${LAB_PID[conn4]}" ||
    lab_fail "the stream revoked while connecting stayed open"
lab_stop conn4
lab_expect_eq "stream revoked while connecting: exit status (denied)" 10 \
    "$LAB_STOP_RC"
grep -q "^egress-connect: denied: " "$LAB_DIR/log/conn4.err" ||
    lab_fail "no denied message: $(cat "$LAB_DIR/log/conn4.err")"
lab_expect_close error revoked
lab_expect_close reason no-permission
lab_poll 10 test -e "$LAB_DIR/hold/hold.1.bytes" ||
    lab_fail "the held peer's connection did not end"
lab_expect_eq "bytes the held peer received after its handshake" 0 \
    "$(cat "$LAB_DIR/hold/hold.1.bytes")"
lab_expect_eq "guest bytes delivered by stream 4" "" \
    "$(cat "$LAB_DIR/log/conn4.out")"

# ---- the same for an https request still connecting: decided again once
# its TLS handshake is done, and its request never goes out
sock_conf "http_client, socket_client"
n=$(lab_count_events egress.config)
kill -HUP "$(lab_egressd_pid)"
lab_wait_events egress.config $((n + 1))
mkdir -p "$LAB_DIR/hold2"
lab_peer held2 hold "$LAB_PUB4" "$HOLD2_PORT" "$LAB_DIR/pki/good.crt" \
    "$LAB_DIR/pki/good.key" "$LAB_DIR/hold2"
lab_spawn fetch6 "$LAB_NS_B" "${EGRESS_WRAP_CMD[@]}" "$EGRESS_FETCH" \
    --socket "$LAB_SOCK_DIR/sock.sock" \
    "https://api.weather.example:$HOLD2_PORT/secret"
lab_poll 10 test -e "$LAB_DIR/hold2/hold.1.accepted" ||
    lab_fail "the https request did not reach the held peer"
lab_mark
sock_conf socket_client
kill -HUP "$(lab_egressd_pid)"
lab_wait_events egress.config 1
: >"$LAB_DIR/hold2/hold.release"
lab_poll 10 lab__gone "${LAB_PID[fetch6]}" ||
    lab_fail "the https request revoked while connecting went on"
lab_stop fetch6
lab_expect_eq "https request revoked while connecting: exit status (denied)" \
    10 "$LAB_STOP_RC"
lab_expect_close error revoked
lab_expect_close reason no-permission
lab_poll 10 test -e "$LAB_DIR/hold2/hold.1.bytes" ||
    lab_fail "the held peer's https connection did not end"
lab_expect_eq "bytes the held peer received after the https handshake" 0 \
    "$(cat "$LAB_DIR/hold2/hold.1.bytes")"

# ---- a reload that finds the configuration broken closes open streams:
# the old snapshot is not served on
sock_conf "http_client, socket_client"
n=$(lab_count_events egress.config)
kill -HUP "$(lab_egressd_pid)"
lab_wait_events egress.config $((n + 1))
mkfifo "$LAB_DIR/tcp/in5"
lab_spawn conn5 "$LAB_NS_B" sh -c 'exec "$@" <"$0"' "$LAB_DIR/tcp/in5" \
    "${EGRESS_WRAP_CMD[@]}" "$EGRESS_CONNECT" \
    --socket "$LAB_SOCK_DIR/sock.sock" "tcp://api.weather.example:$ECHO_PORT"
exec {in5}>"$LAB_DIR/tcp/in5"
printf 'five\n' >&"$in5"
lab_poll 10 grep -qx five "$LAB_DIR/log/conn5.out" ||
    lab_fail "stream 5 did not connect"
lab_mark
printf '[broker\n' >>"$LAB_CONF"
kill -HUP "$(lab_egressd_pid)"
lab_poll 10 lab__gone "${LAB_PID[conn5]}" ||
    lab_fail "a stream stayed open under a broken configuration"
lab_stop conn5
lab_expect_eq "stream 5's exit status (unavailable, as a new stream)" 18 \
    "$LAB_STOP_RC"
lab_expect_close error revoked
lab_expect_close reason policy-unavailable
exec {in5}>&-

lab_finish
