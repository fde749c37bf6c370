#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Scenario 13: a fixture plugin process built on the
# shim runs under a seccomp filter (libseccomp) that refuses every socket
# family but AF_UNIX. Its own socket(AF_INET) and socket(AF_INET6) fail
# with EPERM, while its request through the broker works; a destination
# the policy refuses is still refused, with the masked message, and the
# upstream sees nothing. The same plugin, still confined, opens a
# WebSocket through the broker to a python3-websockets echo
# (tests/integ/lab/ws_peer.py) and gets its message back.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
[ -x "${EGRESS_FIXTURE_PLUGIN:-}" ] ||
    lab_fail "set EGRESS_FIXTURE_PLUGIN to the built egress-fixture-plugin"
lab_up

lab_dns_set api.weather.example="$LAB_PUB4" meta.weather.example="$LAB_META4"
{
	lab_config_base
	lab_entry weather weather "api.weather.example, meta.weather.example"
	lab_entry feeds feeds "api.weather.example" "" \
	    "http_client, websocket_client"
} | lab_config_install
lab_egressd_start weather feeds
W=$LAB_DIR/www

# Never under EGRESS_WRAP: the plugin installs a seccomp filter, under
# which valgrind cannot run. The broker it talks to is wrapped.
plugin() {
	LAB_FETCH_RC=0
	lab_ns_b timeout -k 5 "$(egress_wait 30)" "$EGRESS_FIXTURE_PLUGIN" \
	    --socket "$LAB_SOCK_DIR/${2:-weather}.sock" "$1" \
	    >"$LAB_DIR/plugin.out" 2>"$LAB_DIR/plugin.err" || LAB_FETCH_RC=$?
}

lab_mark
plugin https://api.weather.example/small
lab_expect_eq "fixture plugin exit status" 0 "$LAB_FETCH_RC"
lab_expect_eq "its own AF_INET socket" "socket(AF_INET): EPERM" \
    "$(sed -n 1p "$LAB_DIR/plugin.out")"
lab_expect_eq "its own AF_INET6 socket" "socket(AF_INET6): EPERM" \
    "$(sed -n 2p "$LAB_DIR/plugin.out")"
lab_expect_eq "status through the broker" "status: 200" \
    "$(sed -n 3p "$LAB_DIR/plugin.out")"
lab_expect_eq "body through the broker" "$(cat "$W/small")" \
    "$(tail -n +5 "$LAB_DIR/plugin.out")"
lab_expect_decision weather allow - api.weather.example
lab_expect_hits "$LAB_PUB4" 1 /small

lab_mark
plugin http://meta.weather.example/latest/meta-data/
lab_expect_eq "fixture plugin exit status when denied" 10 "$LAB_FETCH_RC"
lab_expect_eq "masked denial" \
    "egress-fixture-plugin: denied: $LAB_DENIED_MSG" \
    "$(cat "$LAB_DIR/plugin.err")"
lab_expect_decision weather deny metadata meta.weather.example
lab_expect_no_metadata_hits

# ---- a WebSocket from inside the sandbox
WS_PYTHON=${WS_PYTHON:-/usr/bin/python3}
"$WS_PYTHON" -c 'import websockets' 2>/dev/null ||
    lab_fail "python3-websockets missing: apt-get install python3-websockets"
mkdir -p "$LAB_DIR/ws"
lab_spawn wspeer "$LAB_NS_O" "$WS_PYTHON" "$LAB_SRC_DIR/ws_peer.py" echo \
    "$LAB_PUB4" 7100 "$LAB_DIR/ws"
lab_poll 10 grep -q ready "$LAB_DIR/log/wspeer.out" ||
    lab_fail "ws peer did not start"
lab_mark
plugin ws://api.weather.example:7100/ feeds
lab_expect_eq "fixture plugin exit status (websocket)" 0 "$LAB_FETCH_RC"
lab_expect_eq "its own AF_INET socket, still" "socket(AF_INET): EPERM" \
    "$(sed -n 1p "$LAB_DIR/plugin.out")"
lab_expect_eq "the message came back" "message: hello from the sandbox" \
    "$(sed -n 3p "$LAB_DIR/plugin.out")"
lab_expect_eq "the close" "close: 1000" "$(sed -n 4p "$LAB_DIR/plugin.out")"
lab_expect_decision feeds allow - api.weather.example
lab_expect_close close_code 1000

lab_finish
