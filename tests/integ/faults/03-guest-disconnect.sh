#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Fault group 3: the guest disconnects mid-request
# (a raw client has sent part of an announced POST body, which the upstream
# has received, and is killed) and mid-response (egress-fetch has received
# part of a 64 MiB body the upstream keeps open, and is killed). Each time
# the broker closes the upstream connection at once (the upstream sees EOF,
# polled with a 2 s bound, no fixed sleep), releases the lease, logs
# egress.close with error "cancelled", holds no more descriptors than
# before, and a request of another instance at the same time succeeds.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
. "$(dirname "$0")/faults.sh"
# Under AddressSanitizer, freed memory waits in a quarantine (256 MiB)
# instead of being reused, which would hide the RSS bound checked below:
# no quarantine for this broker (a no-op for a normal build).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0"
# Under valgrind, freed blocks likewise wait in memcheck's freelist (20 MB)
# before they are reused: none for this broker.
if [ "${EGRESS_WRAP_CMD[0]:-}" != "" ] &&
    [ "${EGRESS_WRAP_CMD[0]##*/}" = valgrind ]; then
	LAB_EGRESSD_WRAP+=(--freelist-vol=0 --freelist-big-blocks=0)
fi
lab_init
lab_need_bins
lab_up

lab_dns_set ok.weather.example="$LAB_PUB4"
{
	lab_config_base
	lab_entry weather weather "$LAB_PUB4, ok.weather.example"
	lab_entry radar radar ok.weather.example
} | lab_config_install
fault_badup_start
lab_egressd_start weather radar

lab_fetch weather "$FAULT_UP/ok"
fault_expect_ok_body
fault_other_ok
fault_baseline
fault_expect_clean "warm-up" weather radar

# upstream_closed_soon PATH: the upstream connection of PATH's last
# request saw EOF within 2 s.
upstream_closed_soon()
{
	local n
	n=$(fault_conn_of "$1")
	lab_poll 2 fault__ev_has "^eof $n\$" ||
	    lab_fail "$1: the upstream connection $n was not closed within 2 s"
	lab_ok "$1: the upstream saw the close at once"
}

# Mid-request: 200000 of 1000000 announced body bytes, all received by the
# upstream (within the 256 KiB stream window), then the guest dies.
body_at_least()
{
	local n
	n=$(fault_conn_of /sink)
	[ -n "$n" ] && awk -v n="$n" -v w="$2" '$1 == "body" && $2 == n &&
	    $3 >= w { f = 1 } END { exit !f }' "$LAB_DIR/badup/events"
}
fault_log_mark
lab_spawn up-guest "$LAB_NS_B" "$LAB_PYTHON" "$FAULT_SRC_DIR/guest.py" \
    upload "$LAB_SOCK_DIR/weather.sock" "$LAB_PUB4:$FAULT_UP_PORT" /sink \
    1000000 200000
lab_poll 10 body_at_least /sink 200000 ||
    lab_fail "the upstream did not receive the first 200000 body bytes"
lab_ok "the upstream received part of the request body"
fault_other_ok
lab_stop up-guest KILL
upstream_closed_soon /sink
lab_expect_eq "mid-request: egress.close error" cancelled \
    "$(fault_close_of weather | jq -r '.error // "none"')"
fault_expect_clean "mid-request" weather radar

# Mid-response: part of the body has reached egress-fetch, the upstream
# still owes 63.5 MiB and waits; the guest dies.
fault_log_mark
fault_spawn_fetch down-guest weather -o "$LAB_DIR/drip.out" "$FAULT_UP/drip"
fault_wait_ev "^sent [0-9]+ $((512 << 10))\$"
lab_poll 10 test -s "$LAB_DIR/drip.out" ||
    lab_fail "no body byte reached the guest"
lab_ok "part of the response body reached the guest"
fault_other_ok
lab_stop down-guest KILL
upstream_closed_soon /drip
lab_expect_eq "mid-response: egress.close error" cancelled \
    "$(fault_close_of weather | jq -r '.error // "none"')"
fault_expect_clean "mid-response" weather radar

# The instance itself is unaffected afterwards.
lab_fetch weather "$FAULT_UP/ok"
fault_expect_ok_body
fault_expect_clean "after both" weather radar

# A guest that never ends its side of finished
# streams. 4 connections x 240 streams, one after the other, each with
# 60000 bytes of headers and a complete 1-byte body but no END_STREAM:
# every exchange completes, every stream stays half-open. Once the
# exchange is over the broker keeps no head or snapshot for it: egressd
# grows by far less than the 4 x 240 x 60000 = 55 MiB of heads.
rss0=$(lab_egressd_rss_kb)
lab_spawn linger "$LAB_NS_B" "$LAB_PYTHON" "$FAULT_SRC_DIR/guest.py" \
    linger "$LAB_SOCK_DIR/weather.sock" "$LAB_PUB4:$FAULT_UP_PORT" /ok \
    4 240 60000
lab_poll 120 grep -q '^done' "$LAB_DIR/log/linger.out" ||
    lab_fail "the lingering guest did not finish its requests"
lab_expect_eq "lingering guest: responses" "done 960" \
    "$(head -n 1 "$LAB_DIR/log/linger.out")"
rss1=$(lab_egressd_rss_kb)
lab_log "egressd RSS ${rss0} KiB -> ${rss1} KiB with 960 finished streams"
[ $((rss1 - rss0)) -lt $((16 * 1024)) ] ||
    lab_fail "finished streams hold their heads: +$((rss1 - rss0)) KiB"
lab_ok "finished half-open streams hold no head (+$((rss1 - rss0)) KiB)"
lab_stop linger KILL
lab_fetch weather "$FAULT_UP/ok"
fault_expect_ok_body

lab_finish
