#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Scenario 12: a protocol violation drops that one
# connection only. Garbage, an oversized frame (two forms), a frame before
# HELLO and a second HELLO are each answered by the broker closing that
# connection; the broker keeps running, a download held open on another
# connection of the same instance survives and completes, and new clients
# (raw HELLO+PING, egress-fetch, another instance) work after each one.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
lab_up

lab_dns_set api.weather.example="$LAB_PUB4"
{
	lab_config_base
	lab_entry weather weather api.weather.example
	lab_entry radar radar api.weather.example
} | lab_config_install
lab_egressd_start weather radar

lab_badpeer ping weather
[ "$LAB_BADPEER_RC" = 0 ] || lab_fail "HELLO+PING failed: $LAB_BADPEER_OUT"
lab_ok "a raw client gets HELLO and PONG"

lab_mark
lab_hold_start held weather http://api.weather.example/large
lab_wait_upstream_conns 80 1

for mode in garbage oversized over-cap before-hello double-hello; do
	lab_badpeer "$mode" weather
	[ "$LAB_BADPEER_RC" = 0 ] ||
	    lab_fail "$mode: the broker kept the connection: $LAB_BADPEER_OUT"
	lab_ok "$mode: the broker dropped that connection"
	lab_is_running egressd || lab_fail "egressd died after $mode"
	lab_is_running hold-held ||
	    lab_fail "the held download died after $mode"
	lab_badpeer ping weather
	[ "$LAB_BADPEER_RC" = 0 ] ||
	    lab_fail "after $mode, HELLO+PING failed: $LAB_BADPEER_OUT"
	lab_fetch weather http://api.weather.example/small
	lab_expect_fetch_ok
	lab_expect_fetch_body_file "$LAB_DIR/www/small"
	lab_fetch radar http://api.weather.example/small
	lab_expect_fetch_ok
	lab_ok "after $mode, other clients still work"
done

lab_hold_drain held
lab_expect_eq "held download exit status" 0 "$LAB_HOLD_RC"
cmp -s "$LAB_DIR/hold/held.body" "$LAB_DIR/www/large" ||
    lab_fail "the held download's body differs"
lab_ok "the held download on the same instance survived every violation"

lab_finish
