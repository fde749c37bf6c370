#!/bin/bash
# SPDX-License-Identifier: ISC
#
# WebSockets through egress-connect, against python3-websockets peers in
# the outside namespace (tests/integ/lab/ws_peer.py): text and binary
# echo, a fragmented message, ping and pong, the guest's headers and
# subprotocol passed on with the authorized Host, every close path
# (guest-initiated, upstream-initiated, abnormal 1006, a guest that
# vanishes or resets its stream: 1001 upstream), an over-size message
# (1009), wss with SNI and
# verification (another name's certificate refused), a wrong
# Sec-WebSocket-Accept and a 302 (refused, never followed), a guest Host
# override and a handshake header of the guest's own (invalid-request),
# refused without websocket_client and for metadata and mixed-zone
# answers as HTTP is, the one budget shared with a tcp stream, an open
# websocket closed by a reload that revokes websocket_client (1008
# upstream, denied to the guest) or finds the files broken (1008
# upstream, unavailable to the guest), and the broker's drain closing an open
# websocket both ways (1001) long before the drain timeout.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
lab_up

[ -x "${EGRESS_CONNECT:-}" ] ||
    lab_fail "set EGRESS_CONNECT to the built egress-connect"
WS_PYTHON=${WS_PYTHON:-/usr/bin/python3}
"$WS_PYTHON" -c 'import websockets' 2>/dev/null ||
    lab_fail "python3-websockets missing: apt-get install python3-websockets"
P=$LAB_SRC_DIR/ws_peer.py
WS_PORT=7100
WSS_PORT=7443
OTHER_PORT=7444
BAD_PORT=7101
ECHO_PORT=7000
D=$LAB_DIR/ws
mkdir -p "$D/plain" "$D/tls" "$D/other"

# ws_peer NAME ARGS...: start ws_peer.py in the outside namespace.
ws_peer()
{
	local name=$1
	shift
	lab_spawn "$name" "$LAB_NS_O" "$WS_PYTHON" "$P" "$@"
	lab_poll 10 grep -q ready "$LAB_DIR/log/$name.out" ||
	    lab_fail "ws peer $name did not start: $(cat "$LAB_DIR/log/$name.err")"
}

# ws_connect INSTANCE URL IN [ARGS...]: egress-connect with the lines of
# IN on its stdin, which stays open until WANT (default 0) lines came
# back or egress-connect ended (a WebSocket has no half-close: the end of
# stdin sends the close); with ENDS=1 egress-connect must end by itself
# (the upstream or the broker closes) while stdin is still open. Sets
# CONNECT_RC, CONNECT_OUT and CONNECT_ERR.
conv_ready()
{
	if [ "${ENDS:-0}" = 1 ]; then
		lab__gone "${LAB_PID[conv]}"
	else
		[ "$(wc -l <"$LAB_DIR/log/conv.out")" -ge "${WANT:-0}" ] ||
		    lab__gone "${LAB_PID[conv]}"
	fi
}
ws_connect()
{
	local inst=$1 url=$2 in=$3 fd
	shift 3
	lab_mark
	rm -f "$D/fifo"
	mkfifo "$D/fifo"
	lab_spawn conv "$LAB_NS_B" sh -c 'exec "$@" <"$0"' "$D/fifo" \
	    "${EGRESS_WRAP_CMD[@]}" "$EGRESS_CONNECT" \
	    --socket "$LAB_SOCK_DIR/$inst.sock" "$@" "$url"
	exec {fd}>"$D/fifo"
	cat "$in" >&"$fd" 2>/dev/null || true # it may have ended
	if ! lab_poll 20 conv_ready && [ "${ENDS:-0}" = 1 ]; then
		lab_fail "egress-connect did not end by itself (stdin open)"
	fi
	exec {fd}>&-
	lab_poll 30 lab__gone "${LAB_PID[conv]}" ||
	    lab_fail "egress-connect did not end: $(cat "$LAB_DIR/log/conv.err")"
	lab_stop conv
	CONNECT_RC=$LAB_STOP_RC
	CONNECT_OUT=$LAB_DIR/log/conv.out
	CONNECT_ERR=$(cat "$LAB_DIR/log/conv.err")
}

expect_rc()
{
	local code=$1 want=${LAB_EXIT_CODE[$1]:-$1}
	[ "$CONNECT_RC" = "$want" ] ||
	    lab_fail "egress-connect: want exit $want ($code)," \
	    "got $CONNECT_RC: $CONNECT_ERR"
	lab_ok "egress-connect exited $want ($code)"
}

expect_err_line()
{
	grep -q -- "$1" <<<"$CONNECT_ERR" ||
	    lab_fail "stderr lacks '$1': $CONNECT_ERR"
	lab_ok "stderr has '$1'"
}

last_field() { lab_events "$1" | tail -n 1 | jq -r ".$2 | tostring"; }

# peer_field DIR N FIELD: a field the peer recorded for connection N.
peer_field()
{
	jq -r ".$3 | tostring" "$1/conn.$2.json"
}

lab_dns_set api.weather.example="$LAB_PUB4" \
    meta.weather.example="$LAB_META4" \
    mixed.weather.example="$LAB_PUB4,$LAB_PRIV4" \
    other.weather.example="$LAB_PUB4"
HOSTS="api.weather.example, meta.weather.example, mixed.weather.example"
HOSTS="$HOSTS, other.weather.example, $LAB_PUB4, $LAB_META4"
{
	MAX_CONN=2 lab_config_base |
	    sed '/^\[limits\]/a websocket_max_message_bytes = 65536'
	lab_entry ws feeds "$HOSTS" mixed.weather.example \
	    "http_client, socket_client, websocket_client"
	lab_entry nows feeds "$HOSTS" mixed.weather.example \
	    "http_client, socket_client"
} | lab_config_install
lab_egressd_start ws nows

ws_peer wsplain echo "$LAB_PUB4" "$WS_PORT" "$D/plain"
ws_peer wstls echo "$LAB_PUB4" "$WSS_PORT" "$D/tls" \
    "$LAB_DIR/pki/good.crt" "$LAB_DIR/pki/good.key"
ws_peer wsother echo "$LAB_PUB4" "$OTHER_PORT" "$D/other" \
    "$LAB_DIR/pki/other.crt" "$LAB_DIR/pki/other.key"
ws_peer wsbad badaccept "$LAB_PUB4" "$BAD_PORT"
lab_spawn tcpecho "$LAB_NS_O" "$LAB_PYTHON" "$LAB_SRC_DIR/stream_peer.py" \
    echo "$LAB_PUB4" "$ECHO_PORT"
lab_poll 10 grep -q ready "$LAB_DIR/log/tcpecho.out" ||
    lab_fail "tcp echo peer did not start"
URL="ws://api.weather.example:$WS_PORT"

# ---- text messages, headers, subprotocol; the guest's close (1000)
printf 'hello\nw\303\266rld\n' >"$D/lines"
WANT=2 ws_connect ws "$URL/chat?x=1" "$D/lines" -H "Authorization: Bearer t0k" \
    -H "Origin: https://app.example" --subprotocol chat
expect_rc 0
cmp -s "$D/lines" "$CONNECT_OUT" ||
    lab_fail "the echo differs: $(head -c 200 "$CONNECT_OUT")"
lab_ok "the text messages came back"
lab_expect_decision ws allow - api.weather.example
lab_expect_eq "decision transport" websocket \
    "$(last_field egress.decision transport)"
lab_expect_close error ""
lab_expect_eq "close transport" websocket \
    "$(last_field egress.close transport)"
lab_expect_eq "close status" 101 "$(last_field egress.close status)"
lab_expect_eq "close messages_out" 2 "$(last_field egress.close messages_out)"
lab_expect_eq "close messages_in" 2 "$(last_field egress.close messages_in)"
lab_expect_eq "close code" 1000 "$(last_field egress.close close_code)"
lab_poll 10 jq -e '.close_code == 1000' "$D/plain/conn.1.json" ||
    lab_fail "the peer did not get close 1000: $(cat "$D/plain/conn.1.json")"
lab_expect_eq "Host the peer saw" "api.weather.example:$WS_PORT" \
    "$(peer_field "$D/plain" 1 host)"
lab_expect_eq "Authorization passed" "Bearer t0k" \
    "$(peer_field "$D/plain" 1 authorization)"
lab_expect_eq "Origin passed" "https://app.example" \
    "$(peer_field "$D/plain" 1 origin)"
lab_expect_eq "subprotocol chosen" chat "$(peer_field "$D/plain" 1 chosen)"
lab_expect_eq "path" "/chat?x=1" "$(peer_field "$D/plain" 1 path)"

# ---- binary messages
printf 'bin\001ary\nsecond\n' >"$D/bin"
WANT=2 ws_connect ws "$URL/" "$D/bin" --binary
expect_rc 0
cmp -s "$D/bin" "$CONNECT_OUT" || lab_fail "the binary echo differs"
lab_ok "the binary messages came back"

# ---- a fragmented message arrives whole; ping and pong
printf 'frag\n' >"$D/frag"
WANT=1 ws_connect ws "$URL/" "$D/frag" --ping
expect_rc 0
lab_expect_eq "fragmented message" abcdef "$(cat "$CONNECT_OUT")"
expect_err_line "pong: egress-connect"

# ---- the upstream closes (4001 "bye"): passed to the guest
printf 'close-me\n' >"$D/closeme"
ENDS=1 ws_connect ws "$URL/" "$D/closeme"
expect_rc upstream-protocol-error
expect_err_line "closed: 4001: bye"
lab_expect_close error ""
lab_expect_eq "close code" 4001 "$(last_field egress.close close_code)"

# ---- the upstream ends without a close frame: 1006
printf 'drop\n' >"$D/drop"
ENDS=1 ws_connect ws "$URL/" "$D/drop"
expect_rc upstream-protocol-error
expect_err_line "closed: 1006"
lab_expect_eq "close code" 1006 "$(last_field egress.close close_code)"

# ---- a message over websocket_max_message_bytes (65536): 1009
printf 'big 100000\n' >"$D/big"
ENDS=1 ws_connect ws "$URL/" "$D/big"
expect_rc upstream-protocol-error
expect_err_line "closed: 1009"
lab_expect_eq "close code" 1009 "$(last_field egress.close close_code)"

# ---- a guest's message over the bound: 1009 both ways
n_before=$(ls "$D/plain" | wc -l)
head -c 70000 /dev/zero | tr '\0' g >"$D/guestbig"
printf '\n' >>"$D/guestbig"
ENDS=1 ws_connect ws "$URL/" "$D/guestbig"
expect_rc upstream-protocol-error
expect_err_line "closed: 1009"
lab_expect_eq "close code" 1009 "$(last_field egress.close close_code)"
lab_expect_eq "close messages_out" 0 "$(last_field egress.close messages_out)"
lab_poll 10 jq -e '.close_code == 1009' "$D/plain/conn.$((n_before + 1)).json" ||
    lab_fail "the peer did not get close 1009"
lab_ok "the upstream got close 1009"

# ---- a guest that vanishes: close 1001 upstream
n_before=$(ls "$D/plain" | wc -l)
mkfifo "$D/in1"
lab_spawn gone "$LAB_NS_B" sh -c 'exec "$@" <"$0"' "$D/in1" \
    "${EGRESS_WRAP_CMD[@]}" "$EGRESS_CONNECT" \
    --socket "$LAB_SOCK_DIR/ws.sock" "$URL/"
exec {in1}>"$D/in1"
printf 'here\n' >&"$in1"
lab_poll 10 grep -qx here "$LAB_DIR/log/gone.out" ||
    lab_fail "the websocket did not open"
lab_mark
lab_stop gone KILL
exec {in1}>&-
gone_n=$((n_before + 1))
lab_poll 10 jq -e '.close_code == 1001' "$D/plain/conn.$gone_n.json" ||
    lab_fail "the peer did not get close 1001: $(cat "$D/plain/conn.$gone_n.json")"
lab_ok "a vanished guest's websocket was closed with 1001"
lab_expect_close error cancelled

# ---- a guest that resets its stream: close 1001 upstream first
n_before=$(ls "$D/plain" | wc -l)
lab_mark
lab_spawn wsreset "$LAB_NS_B" "$LAB_PYTHON" "$LAB_SRC_DIR/badpeer.py" \
    ws-reset "$LAB_SOCK_DIR/ws.sock" "api.weather.example:$WS_PORT"
lab_poll 10 grep -qx reset "$LAB_DIR/log/wsreset.out" ||
    lab_fail "no reset after a 101: $(cat "$LAB_DIR/log/wsreset.out")"
reset_n=$((n_before + 1))
lab_poll 10 jq -e '.close_code == 1001' "$D/plain/conn.$reset_n.json" ||
    lab_fail "the peer did not get close 1001 at the reset:" \
    "$(cat "$D/plain/conn.$reset_n.json")"
lab_ok "a reset websocket's upstream got close 1001"
lab_expect_close error cancelled
lab_expect_eq "close code" 1001 "$(last_field egress.close close_code)"
lab_is_running wsreset || lab_fail "the guest's connection ended at its reset"
lab_stop wsreset

# ---- wss: SNI and verification; another name's certificate refused
WANT=2 ws_connect ws "wss://api.weather.example:$WSS_PORT/" "$D/lines"
expect_rc 0
cmp -s "$D/lines" "$CONNECT_OUT" || lab_fail "the wss echo differs"
lab_ok "the messages came back over wss"
ws_connect ws "wss://other.weather.example:$OTHER_PORT/" "$D/lines"
expect_rc tls-failed
lab_expect_close error tls-failed

# ---- a wrong Sec-WebSocket-Accept, and a 302: refused, not followed
ws_connect ws "ws://api.weather.example:$BAD_PORT/" "$D/lines"
expect_rc upstream-protocol-error
lab_expect_close error upstream-protocol-error
ws_connect ws "$URL/redirect" "$D/lines"
expect_rc upstream-protocol-error
expect_err_line "refused: HTTP 302"
expect_err_line "Location: ws://169.254.169.254/"
lab_expect_hits "$LAB_META4" 0
lab_expect_eq "close status" 302 "$(last_field egress.close status)"

# ---- the guest may not choose Host or the handshake's own headers
ws_connect ws "$URL/" "$D/lines" -H "Host: other.weather.example"
expect_rc invalid-request
lab_expect_decision ws deny invalid-request
ws_connect ws "$URL/" "$D/lines" -H "Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAA=="
expect_rc invalid-request
ws_connect ws "$URL/" "$D/lines" -H "Upgrade: h2c"
expect_rc invalid-request

# ---- refusals as for HTTP: no permission, metadata, mixed zones
ws_connect nows "$URL/" "$D/lines"
expect_rc denied
lab_expect_decision nows deny no-permission api.weather.example
for u in "ws://meta.weather.example/" "ws://$LAB_META4/"; do
	ws_connect ws "$u" "$D/lines"
	expect_rc denied
	lab_expect_decision ws deny metadata
done
ws_connect ws "ws://mixed.weather.example:$WS_PORT/" "$D/lines"
expect_rc denied
lab_expect_decision ws deny mixed-zones mixed.weather.example

# ---- one budget: a websocket and a tcp stream open, http refused
mkfifo "$D/in2" "$D/in3"
lab_spawn wsopen "$LAB_NS_B" sh -c 'exec "$@" <"$0"' "$D/in2" \
    "${EGRESS_WRAP_CMD[@]}" "$EGRESS_CONNECT" \
    --socket "$LAB_SOCK_DIR/ws.sock" "$URL/"
lab_spawn tcpopen "$LAB_NS_B" sh -c 'exec "$@" <"$0"' "$D/in3" \
    "${EGRESS_WRAP_CMD[@]}" "$EGRESS_CONNECT" \
    --socket "$LAB_SOCK_DIR/ws.sock" "tcp://api.weather.example:$ECHO_PORT"
exec {in2}>"$D/in2" {in3}>"$D/in3"
printf 'one\n' >&"$in2"
printf 'two\n' >&"$in3"
lab_poll 10 grep -qx one "$LAB_DIR/log/wsopen.out" ||
    lab_fail "the websocket did not open"
lab_poll 10 grep -qx two "$LAB_DIR/log/tcpopen.out" ||
    lab_fail "the tcp stream did not open"
lab_ok "one websocket and one tcp stream open"
lab_fetch ws http://api.weather.example/small
lab_expect_fetch_error budget-exhausted
lab_expect_decision ws deny budget-exhausted api.weather.example
# Closing the websocket frees its lease at once.
lab_mark
exec {in2}>&-
lab_poll 10 lab__gone "${LAB_PID[wsopen]}" ||
    lab_fail "the websocket did not end with its stdin"
lab_stop wsopen
lab_expect_eq "websocket's exit status" 0 "$LAB_STOP_RC"
lab_fetch ws http://api.weather.example/small
lab_expect_fetch_ok
exec {in3}>&-
lab_poll 10 lab__gone "${LAB_PID[tcpopen]}" ||
    lab_fail "the tcp stream did not end with its stdin"
lab_stop tcpopen

# ---- a reload that revokes websocket_client closes the open websocket
mkfifo "$D/in4"
lab_spawn wsrev "$LAB_NS_B" sh -c 'exec "$@" <"$0"' "$D/in4" \
    "${EGRESS_WRAP_CMD[@]}" "$EGRESS_CONNECT" \
    --socket "$LAB_SOCK_DIR/ws.sock" "$URL/"
exec {in4}>"$D/in4"
printf 'four\n' >&"$in4"
lab_poll 10 grep -qx four "$LAB_DIR/log/wsrev.out" ||
    lab_fail "the websocket did not open"
rev_n=$(ls "$D/plain" | wc -l)
lab_mark
{
	MAX_CONN=2 lab_config_base
	lab_entry ws feeds "$HOSTS" mixed.weather.example \
	    "http_client, socket_client"
	lab_entry nows feeds "$HOSTS" mixed.weather.example \
	    "http_client, socket_client"
} | lab_config_install
kill -HUP "$(lab_egressd_pid)"
lab_poll 10 lab__gone "${LAB_PID[wsrev]}" ||
    lab_fail "the revoked websocket stayed open"
lab_stop wsrev
lab_expect_eq "revoked websocket's exit status (denied)" 10 "$LAB_STOP_RC"
lab_expect_close error revoked
lab_expect_close reason no-permission
lab_expect_eq "close code" 1008 "$(last_field egress.close close_code)"
lab_poll 10 jq -e '.close_code == 1008' "$D/plain/conn.$rev_n.json" ||
    lab_fail "the peer did not get close 1008 at the revocation:" \
    "$(cat "$D/plain/conn.$rev_n.json")"
lab_ok "the revoked websocket's upstream got close 1008"
exec {in4}>&-

# ---- a reload that finds the files broken closes the open websocket too:
# its guest hears unavailable, as a new stream would
{
	MAX_CONN=2 lab_config_base
	lab_entry ws feeds "$HOSTS" mixed.weather.example \
	    "http_client, socket_client, websocket_client"
} | lab_config_install
lab_mark
kill -HUP "$(lab_egressd_pid)"
lab_wait_events egress.config 1
mkfifo "$D/in6"
lab_spawn wsbroken "$LAB_NS_B" sh -c 'exec "$@" <"$0"' "$D/in6" \
    "${EGRESS_WRAP_CMD[@]}" "$EGRESS_CONNECT" \
    --socket "$LAB_SOCK_DIR/ws.sock" "$URL/"
exec {in6}>"$D/in6"
printf 'six\n' >&"$in6"
lab_poll 10 grep -qx six "$LAB_DIR/log/wsbroken.out" ||
    lab_fail "the websocket did not open"
broken_n=$(ls "$D/plain" | wc -l)
lab_mark
printf '[broker\n' >>"$LAB_CONF"
kill -HUP "$(lab_egressd_pid)"
lab_poll 10 lab__gone "${LAB_PID[wsbroken]}" ||
    lab_fail "a websocket stayed open under a broken configuration"
lab_stop wsbroken
lab_expect_eq "websocket's exit status (unavailable)" 18 "$LAB_STOP_RC"
lab_expect_close error revoked
lab_expect_close reason policy-unavailable
lab_poll 10 jq -e '.close_code == 1008' "$D/plain/conn.$broken_n.json" ||
    lab_fail "the peer did not get close 1008 at the broken reload:" \
    "$(cat "$D/plain/conn.$broken_n.json")"
lab_ok "a broken reload: the websocket's guest heard unavailable, its upstream 1008"
exec {in6}>&-

# ---- the drain closes an open websocket both ways (1001) at once: the
# broker exits long before its drain timeout (60 s here)
{
	MAX_CONN=2 lab_config_base |
	    sed 's/^drain_timeout_ms = .*/drain_timeout_ms = 60000/'
	lab_entry ws feeds "$HOSTS" mixed.weather.example \
	    "http_client, socket_client, websocket_client"
} | lab_config_install
lab_mark
kill -HUP "$(lab_egressd_pid)"
lab_wait_events egress.config 1
lab_expect_eq "reload" loaded "$(last_field egress.config status)"
mkfifo "$D/in5"
lab_spawn wsdrain "$LAB_NS_B" sh -c 'exec "$@" <"$0"' "$D/in5" \
    "${EGRESS_WRAP_CMD[@]}" "$EGRESS_CONNECT" \
    --socket "$LAB_SOCK_DIR/ws.sock" "$URL/"
exec {in5}>"$D/in5"
printf 'five\n' >&"$in5"
lab_poll 10 grep -qx five "$LAB_DIR/log/wsdrain.out" ||
    lab_fail "the websocket did not open: $(cat "$LAB_DIR/log/wsdrain.err")" \
    "$(lab_events egress.config)"
drain_n=$(ls "$D/plain" | wc -l)
lab_expect_no_metadata_hits
lab_mark
kill -TERM "$(lab_egressd_pid)"
lab_poll 10 jq -e '.close_code == 1001' "$D/plain/conn.$drain_n.json" ||
    lab_fail "the peer did not get close 1001 at the drain:" \
    "$(cat "$D/plain/conn.$drain_n.json")"
lab_ok "the drain sent close 1001 upstream"
lab_poll 10 lab__gone "${LAB_PID[wsdrain]}" ||
    lab_fail "the guest was not told of the drain's close (stdin open)"
lab_stop wsdrain
# A close 1000 or 1001 ends egress-connect with status 0; its stdin is
# still open, so only the close could end it.
lab_expect_eq "guest's exit status at the drain's close" 0 "$LAB_STOP_RC"
exec {in5}>&-
lab_poll 10 lab__gone "$(lab_egressd_pid)" ||
    lab_fail "egressd still drains with the websocket closed"
lab_expect_close reason draining
lab_expect_eq "close code" 1001 "$(last_field egress.close close_code)"
lab_expect_log_valid
lab_stop egressd TERM
lab_expect_eq "egressd exit status after SIGTERM" 0 "$LAB_STOP_RC"
