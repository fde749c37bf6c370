#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Scenario 6: resolution happens exactly once per
# request: dnsmasq sees one A and one AAAA query per request; and against
# a rebinding DNS server whose answer changes from 93.184.216.34 to
# 10.0.0.7 after the first query, the broker connects to the address it
# validated (93.184.216.34) and never to 10.0.0.7; the next request sees
# the new answer and is denied. A name that does not resolve is dns-failed.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
lab_up

lab_dns_set api.weather.example="$LAB_PUB4"
HOSTS="api.weather.example, rebind.weather.example, nx.weather.example"
{
	lab_config_base
	lab_entry weather weather "$HOSTS"
} | lab_config_install
lab_egressd_start weather

for url in http://api.weather.example/small https://api.weather.example/small \
    http://api.weather.example/small; do
	lab_fetch weather "$url"
	lab_expect_fetch_ok
	lab_expect_eq "A queries for one request ($url)" 1 \
	    "$(lab_dns_count api.weather.example A)"
	lab_expect_eq "AAAA queries for one request ($url)" 1 \
	    "$(lab_dns_count api.weather.example AAAA)"
	lab_expect_hits "$LAB_PUB4" 1 /small
done

# NXDOMAIN: the policy reason is unresolvable, the guest sees dns-failed.
lab_fetch weather http://nx.weather.example/small
lab_expect_fetch_error dns-failed
lab_expect_decision weather deny unresolvable nx.weather.example
lab_egressd_stop

# Rebinding: the broker's resolver is the rebinding server.
lab_rebind_start rebind.weather.example "$LAB_PUB4" "$LAB_PRIV4"
{
	DNS_PORT=$LAB_REBIND_PORT lab_config_base
	lab_entry weather weather "$HOSTS"
} | lab_config_install
lab_egressd_start weather
lab_fetch weather http://rebind.weather.example/small
lab_expect_fetch_ok
lab_expect_fetch_body_file "$LAB_DIR/www/small"
lab_expect_decision weather allow - rebind.weather.example
lab_expect_decision_addresses "$LAB_PUB4"
lab_expect_close connected "$LAB_PUB4"
lab_expect_hits "$LAB_PUB4" 1 /small
lab_expect_hits "$LAB_PRIV4" 0
lab_expect_eq "A queries the rebinding server answered" 1 \
    "$(lab_rebind_count A rebind.weather.example)"
# The answer has changed: the next request resolves anew and is denied.
lab_fetch weather http://rebind.weather.example/small
lab_expect_fetch_error denied
lab_expect_decision weather deny private-address rebind.weather.example
lab_expect_hits "$LAB_PRIV4" 0
lab_expect_eq "A queries after two requests" 2 \
    "$(lab_rebind_count A rebind.weather.example)"

lab_finish
