#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Scenario 8: a guest Host header naming another host
# is refused (invalid-request) and nothing reaches the upstream; a Host
# header equal to the authority passes; hop-by-hop headers from the guest
# (Connection and what it names, Keep-Alive, Proxy-*, TE, Upgrade) never
# reach the upstream, while end-to-end headers do.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
lab_up

lab_dns_set api.weather.example="$LAB_PUB4" other.weather.example="$LAB_PUB4"
{
	lab_config_base
	lab_entry weather weather "api.weather.example, other.weather.example"
} | lab_config_install
lab_egressd_start weather

for h in other.weather.example evil.example "$LAB_META4" \
    "api.weather.example:8080"; do
	lab_fetch weather -H "Host: $h" http://api.weather.example/host
	lab_expect_fetch_error invalid-request
	lab_expect_decision weather deny invalid-request
	lab_expect_hits "$LAB_PUB4" 0
done

lab_fetch weather -H "Host: api.weather.example" http://api.weather.example/host
lab_expect_fetch_ok
lab_expect_eq "Host seen upstream" "host=api.weather.example sni=" \
    "$(cat "$LAB_FETCH_OUT")"

lab_fetch weather -H "Connection: close, X-Foo" -H "X-Foo: named" \
    -H "Keep-Alive: timeout=5" -H "Proxy-Authorization: Basic eDp5" \
    -H "TE: trailers" -H "Upgrade: websocket" -H "X-Keep: yes" \
    http://api.weather.example/headers
lab_expect_fetch_ok
lab_expect_eq "headers seen upstream" \
    "host=api.weather.example te=[] upgrade=[] pa=[] ka=[] foo=[] keep=[yes]" \
    "$(cat "$LAB_FETCH_OUT")"

lab_finish
