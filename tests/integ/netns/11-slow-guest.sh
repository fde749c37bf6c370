#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Scenario 11: a guest that stops reading a 50 MiB
# body does not make the broker buffer it: flow control pushes back to the
# upstream (nginx's send queue fills and it never finishes the response),
# the broker's RSS stays within LAB_RSS_GROWTH_KB (default 24 MiB) of its
# warmed-up size, and other requests (the same instance on another
# connection, and another instance) keep flowing. Once the guest reads
# again, the body arrives intact.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
lab_up

BOUND_KB=${LAB_RSS_GROWTH_KB:-24576}
lab_dns_set api.weather.example="$LAB_PUB4"
{
	lab_config_base
	lab_entry weather weather api.weather.example
	lab_entry radar radar api.weather.example
} | lab_config_install
lab_egressd_start weather radar

# Warm up: one full large download and a small one, so that the baseline
# includes the broker's steady-state buffers.
lab_fetch weather -o /dev/null http://api.weather.example/large
lab_expect_fetch_ok
lab_fetch weather http://api.weather.example/small
lab_expect_fetch_ok
base=$(lab_egressd_rss_kb)
lab_log "broker RSS after warm-up: $base KiB"

stalled()
{
	# nginx's socket has bytes it cannot send: the broker stopped
	# reading; and nginx has not logged the /large response as done.
	local q
	q=$(lab_ns_o ss -Htn state established "( sport = :80 )" |
	    awk '{ if ($2 > m) m = $2 } END { print m + 0 }')
	[ "$q" -gt 0 ] && [ "$(lab_hits "$LAB_PUB4" /large)" = 0 ]
}

lab_mark
lab_hold_start slow weather http://api.weather.example/large
lab_wait_upstream_conns 80 1
lab_poll 30 stalled || {
	if [ "$(lab_hits "$LAB_PUB4" /large)" != 0 ]; then
		lab_fail "the upstream sent the whole 50 MiB to a stalled" \
		    "guest: the broker buffered it"
	fi
	lab_fail "the upstream never saw back-pressure"
}
lab_ok "back-pressure reached the upstream"

max=0
i=0
while [ "$i" -lt 20 ]; do
	rss=$(lab_egressd_rss_kb)
	[ "$rss" -le "$max" ] || max=$rss
	stalled || lab_fail "the stall ended while the guest read nothing"
	i=$((i + 1))
	sleep 0.1	# sampling interval, not a wait for a condition
done
lab_log "broker RSS while stalled: max $max KiB (base $base KiB)"
[ $((max - base)) -le "$BOUND_KB" ] ||
    lab_fail "broker RSS grew by $((max - base)) KiB > $BOUND_KB KiB"
lab_ok "broker RSS growth $((max - base)) KiB <= $BOUND_KB KiB"

# Other requests keep flowing while the guest is stalled.
lab_fetch weather http://api.weather.example/small
lab_expect_fetch_ok
lab_expect_fetch_body_file "$LAB_DIR/www/small"
lab_fetch radar https://api.weather.example/small
lab_expect_fetch_ok
lab_expect_fetch_body_file "$LAB_DIR/www/small"
lab_expect_decision radar allow - api.weather.example
stalled || lab_fail "the stall ended while the guest read nothing"
lab_ok "still stalled after the other requests"

lab_hold_drain slow
lab_expect_eq "stalled download exit status" 0 "$LAB_HOLD_RC"
cmp -s "$LAB_DIR/hold/slow.body" "$LAB_DIR/www/large" ||
    lab_fail "the stalled download's body differs"
lab_ok "the 50 MiB body arrived intact after the stall"

lab_finish
