#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Scenario 10: with max_connections_per_instance = 2,
# two downloads held open by stalled guests take the instance's budget; a
# third concurrent request is refused budget-exhausted at once, without
# reaching the upstream; another instance is unaffected; once one held
# request closes, the next request succeeds; the remaining held download
# completes intact.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
lab_up

lab_dns_set api.weather.example="$LAB_PUB4"
{
	MAX_CONN=2 lab_config_base
	lab_entry weather weather api.weather.example
	lab_entry radar radar api.weather.example
} | lab_config_install
lab_egressd_start weather radar

lab_mark
lab_hold_start a weather http://api.weather.example/large
lab_hold_start b weather http://api.weather.example/large
lab_wait_events egress.decision 2
lab_wait_upstream_conns 80 2
lab_ok "two upstream connections held open"

for scheme in http https; do
	lab_fetch weather "$scheme://api.weather.example/small"
	lab_expect_fetch_error budget-exhausted
	lab_expect_decision weather deny budget-exhausted api.weather.example
	lab_expect_hits "$LAB_PUB4" 0
done
lab_expect_eq "upstream connections while exhausted" 2 \
    "$(lab_upstream_conns 80)"

lab_fetch radar http://api.weather.example/small
lab_expect_fetch_ok
lab_expect_decision radar allow - api.weather.example
lab_expect_hits "$LAB_PUB4" 1 /small

# One closes (its guest goes away): the lease comes back.
lab_mark
lab_hold_kill a
lab_wait_events egress.close 1
lab_ok "the killed request closed"
lab_fetch weather http://api.weather.example/small
lab_expect_fetch_ok
lab_expect_decision weather allow - api.weather.example
lab_expect_hits "$LAB_PUB4" 1 /small

# The other held download was never disturbed.
lab_hold_drain b
lab_expect_eq "held download exit status" 0 "$LAB_HOLD_RC"
cmp -s "$LAB_DIR/hold/b.body" "$LAB_DIR/www/large" ||
    lab_fail "the held download's body differs"
lab_ok "the held 50 MiB body arrived intact"

lab_finish
