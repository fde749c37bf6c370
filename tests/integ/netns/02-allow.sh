#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Scenario 2: a request allowed through a seeded entry
# reaches the upstream over HTTP and over HTTPS, byte for byte (100 bytes
# and 50 MiB), with the decision naming the instance and the validated
# address, and the close event naming the address used. A non-2xx response
# is still a response (exit 0). Another instance without the grant is
# denied the same destination.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
lab_up

lab_dns_set api.weather.example="$LAB_PUB4"
{
	lab_config_base
	lab_entry weather weather "api.weather.example, $LAB_PUB4"
	lab_entry radar radar ""
} | lab_config_install
lab_egressd_start weather radar
W=$LAB_DIR/www

for scheme in http https; do
	lab_fetch weather "$scheme://api.weather.example/small"
	lab_expect_fetch_ok
	lab_expect_fetch_body_file "$W/small"
	lab_expect_decision weather allow - api.weather.example
	lab_expect_decision_addresses "$LAB_PUB4"
	lab_expect_eq "decision plugin and transport" "weather http" \
	    "$(lab_decision | jq -r '"\(.plugin) \(.transport)"')"
	lab_expect_hits "$LAB_PUB4" 1 /small
	lab_expect_close connected "$LAB_PUB4"
	lab_expect_close status 200
done
lab_expect_eq "SNI seen upstream" api.weather.example \
    "$(lab_sni_seen "$LAB_PUB4")"

# Status line and headers with -i.
lab_fetch weather -i http://api.weather.example/small
lab_expect_fetch_ok 200

# A 404 is a response, not an error.
lab_fetch weather -i https://api.weather.example/missing
lab_expect_fetch_ok 404
lab_expect_hits "$LAB_PUB4" 1 /missing

# 50 MiB through the broker, over HTTPS, intact.
lab_fetch weather -o "$LAB_DIR/large.out" https://api.weather.example/large
lab_expect_fetch_ok
LAB_FETCH_OUT=$LAB_DIR/large.out lab_expect_fetch_body_file "$W/large"
lab_expect_hits "$LAB_PUB4" 1 /large

# An IP-literal grant: no DNS query, the literal is its own answer.
lab_fetch weather "http://$LAB_PUB4/small"
lab_expect_fetch_ok
lab_expect_decision weather allow - "$LAB_PUB4"
lab_expect_eq "DNS queries for an IP literal" 0 \
    "$(tail -n "+$((LAB_MARK_DNS + 1))" "$LAB_DIR/dns/query.log" |
    grep -c 'query\[' || true)"
lab_expect_hits "$LAB_PUB4" 1 /small

# The same destination from an instance without the grant.
lab_fetch radar http://api.weather.example/small
lab_expect_fetch_error denied
lab_expect_decision radar deny not-granted api.weather.example
lab_expect_hits "$LAB_PUB4" 0

lab_finish
