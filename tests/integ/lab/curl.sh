# SPDX-License-Identifier: ISC
# shellcheck shell=bash
#
# Helpers for the proxy-front scenarios (tests/integ/netns/*-proxy*.sh),
# sourced after lab.sh: real, unmodified curl in the broker namespace,
# pointed at an instance's socket, and raw requests written with python3
# where curl cannot be made to send them (CL+TE, pipelining).

LAB_CURL_RC=
LAB_CURL_STATUS=
LAB_CURL_OUT=
LAB_CURL_HDR=

# lab_curl INSTANCE [curl options] URL: curl --unix-socket on INSTANCE's
# socket (30 s hard limit, scaled), after a lab_mark. Sets LAB_CURL_RC,
# LAB_CURL_STATUS (the final status, 000 when none), LAB_CURL_OUT (body
# file) and LAB_CURL_HDR (response head file).
lab_curl()
{
	local inst=$1
	shift
	lab_mark
	LAB_CURL_OUT=$LAB_DIR/curl.out
	LAB_CURL_HDR=$LAB_DIR/curl.hdr
	LAB_CURL_RC=0
	LAB_CURL_STATUS=$(lab_ns_b timeout -k 5 "$(egress_wait 30)" \
	    curl -sS --unix-socket "$LAB_SOCK_DIR/$inst.sock" \
	    -o "$LAB_CURL_OUT" -D "$LAB_CURL_HDR" -w '%{http_code}' "$@" \
	    2>"$LAB_DIR/curl.err") || LAB_CURL_RC=$?
	lab_vlog "curl $inst $* -> $LAB_CURL_RC $LAB_CURL_STATUS"
}

# lab_expect_curl STATUS: the last curl got a response with STATUS.
lab_expect_curl()
{
	[ "$LAB_CURL_STATUS" = "$1" ] ||
	    lab_fail "curl: want status $1, got $LAB_CURL_STATUS" \
	    "(exit $LAB_CURL_RC): $(cat "$LAB_DIR/curl.err")"
	lab_ok "curl status = $1"
}

# lab_expect_curl_header NAME VALUE: the last response carried it.
lab_expect_curl_header()
{
	grep -qix "$1: $2" < <(tr -d '\r' <"$LAB_CURL_HDR") ||
	    lab_fail "no '$1: $2' in the response head: $(cat "$LAB_CURL_HDR")"
	lab_ok "response header $1: $2"
}

# lab_expect_curl_denied: a 403 with the masked message and
# X-Egress-Error: denied, naming no address.
lab_expect_curl_denied()
{
	lab_expect_eq "curl status" 403 "$LAB_CURL_STATUS"
	lab_expect_curl_header X-Egress-Error denied
	grep -qF "$LAB_DENIED_MSG" "$LAB_CURL_OUT" ||
	    lab_fail "403 without the policy message: $(cat "$LAB_CURL_OUT")"
	# The last response head (curl -L writes every one) and the body.
	local a last
	last=$(tr -d '\r' <"$LAB_CURL_HDR" | awk '/^HTTP\//{ h = "" }
	    { h = h $0 "\n" } END { printf "%s", h }')
	for a in $LAB_UPSTREAM4 $LAB_UPSTREAM6; do
		! grep -qF "$a" "$LAB_CURL_OUT" <(printf '%s' "$last") ||
		    lab_fail "the 403 names $a"
	done
}

# lab_raw INSTANCE FILE: write FILE's bytes to INSTANCE's socket, read the
# answer until the broker closes or 5 s of quiet, into $LAB_DIR/raw.out.
lab_raw()
{
	lab_mark
	lab_ns_b timeout -k 5 "$(egress_wait 30)" python3 - \
	    "$LAB_SOCK_DIR/$1.sock" "$2" >"$LAB_DIR/raw.out" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(open(sys.argv[2], 'rb').read())
s.settimeout(5)
out = b''
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
except socket.timeout:
    pass
sys.stdout.buffer.write(out)
PY
}

# lab_raw_statuses: the status codes of the responses in raw.out, in order.
lab_raw_statuses()
{
	tr -d '\r' <"$LAB_DIR/raw.out" | grep -aoE 'HTTP/1\.[01] [0-9]{3} ' |
	    awk '{ print $2 }' | paste -sd ' '
}

LAB_ECHO_PORT=8081

# lab_echo_start: the body echo (echo_httpd.py) on $LAB_PUB4:$LAB_ECHO_PORT
# in the outside namespace.
lab_echo_start()
{
	lab_spawn echo "$LAB_NS_O" "$LAB_PYTHON" "$LAB_SRC_DIR/echo_httpd.py" \
	    "$LAB_PUB4" "$LAB_ECHO_PORT"
	lab_poll 10 lab__echo_listening || lab_fail "the echo did not start"
}

lab__echo_listening()
{
	lab_ns_o ss -Htln | grep -qF "$LAB_PUB4:$LAB_ECHO_PORT "
}

# lab_wait_port PORT...: wait until each TCP PORT listens in the broker
# namespace (the proxy ports are bound after the instance sockets).
lab_wait_port()
{
	local p
	for p in "$@"; do
		lab_poll "$(egress_wait 10)" lab__port_listening "$p" ||
		    lab_fail "nothing listens on port $p"
	done
}

lab__port_listening() { lab_ns_b ss -Htln | grep -q ":$1 "; }
