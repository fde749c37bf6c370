#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Fault group 1: a misbehaving upstream. It resets the
# connection mid-body, resets or closes it before responding, stalls before
# the first byte and between bytes (short [limits] first_byte_timeout_ms
# and between_bytes_timeout_ms), and sends an invalid, a malformed or an
# oversized response head. For each: the guest gets the documented error
# code (egress-fetch exit status and code name), never a complete
# response; the upstream connection is closed; the egress.close event names
# the error; no descriptor and no lease is left behind; and a request of
# another instance, made while the faulty one is in flight, succeeds.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
. "$(dirname "$0")/faults.sh"
lab_init
lab_need_bins
lab_up

lab_dns_set ok.weather.example="$LAB_PUB4"
{
	fault_config_base first_byte_timeout_ms=400 \
	    between_bytes_timeout_ms=400
	lab_entry weather weather "$LAB_PUB4, ok.weather.example"
	lab_entry radar radar ok.weather.example
} | lab_config_install
fault_badup_start
lab_egressd_start weather radar

# Warm up (resolver sockets, TLS trust, log), then the baseline.
lab_fetch weather "$FAULT_UP/ok"
fault_expect_ok_body
fault_other_ok
fault_expect_upstream_closed /ok
fault_baseline
fault_expect_clean "warm-up" weather radar

# fault PATH CODE: the guest asks weather for PATH and must get CODE,
# while radar's request, started after the upstream saw PATH's request,
# succeeds.
fault()
{
	local path=$1 code=$2
	fault_log_mark
	fault_spawn_fetch "f${path//\//-}" weather "$FAULT_UP$path"
	fault_wait_ev "^req [0-9]+ $path\$"
	fault_other_ok
	fault_wait_fetch "f${path//\//-}"
	lab_expect_fetch_error "$code"
	fault_expect_upstream_closed "$path"
	got=$(fault_close_of weather | jq -r '.error // "none"')
	lab_expect_eq "$path: egress.close error" "$code" "$got"
	# The configured 400 ms limits applied, not the 10 s / 120 s ones.
	got=$(fault_close_of weather | jq -r '.duration_ms')
	[ "$got" -lt 5000 ] || lab_fail "$path: took $got ms"
	fault_expect_clean "$path" weather radar
}

fault /reset upstream-protocol-error
# The 10000 bytes before the reset may have reached the guest, but never
# the 100000 announced: not a complete response.
[ "$(wc -c <"$LAB_FETCH_OUT")" -lt 100000 ] ||
    lab_fail "/reset: the guest got a complete body"
lab_ok "/reset: no complete body"
fault /reset-head upstream-protocol-error
fault /close upstream-protocol-error
fault /stall-head timeout
fault /stall-body timeout
fault /invalid upstream-protocol-error
fault /bad-length upstream-protocol-error
fault /oversized upstream-protocol-error

# Still serving both instances, from the same connections budget.
lab_fetch weather "$FAULT_UP/ok"
fault_expect_ok_body
fault_other_ok
fault_expect_clean "after every fault" weather radar

lab_finish
