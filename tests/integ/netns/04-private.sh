#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Scenario 4: a granted name resolving to 10.0.0.7 is
# denied (private-address); carved out in egress_allow_private it is
# allowed and reaches 10.0.0.7; a name answering 93.184.216.34 and
# 10.0.0.7 together is denied private-address without the carve-out and
# mixed-zones with it, and neither upstream is hit.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
lab_up

lab_dns_set lan.weather.example="$LAB_PRIV4" \
    mixed.weather.example="$LAB_PUB4,$LAB_PRIV4"
HOSTS="lan.weather.example, mixed.weather.example, $LAB_PRIV4"

{
	lab_config_base
	lab_entry weather weather "$HOSTS"
} | lab_config_install
lab_egressd_start weather
for url in http://lan.weather.example/small \
    https://lan.weather.example/small "http://$LAB_PRIV4/small"; do
	lab_fetch weather "$url"
	lab_expect_fetch_error denied
	lab_expect_decision weather deny private-address
	lab_expect_hits "$LAB_PRIV4" 0
done
lab_fetch weather http://mixed.weather.example/small
lab_expect_fetch_error denied
lab_expect_decision weather deny private-address mixed.weather.example
lab_expect_hits "$LAB_PRIV4" 0
lab_expect_hits "$LAB_PUB4" 0
lab_egressd_stop

{
	lab_config_base
	lab_entry weather weather "$HOSTS" "$HOSTS"
} | lab_config_install
lab_egressd_start weather
for scheme in http https; do
	lab_fetch weather "$scheme://lan.weather.example/small"
	lab_expect_fetch_ok
	lab_expect_fetch_body_file "$LAB_DIR/www/small"
	lab_expect_decision weather allow - lan.weather.example
	lab_expect_decision_addresses "$LAB_PRIV4"
	lab_expect_hits "$LAB_PRIV4" 1 /small
done
lab_fetch weather "http://$LAB_PRIV4/small"
lab_expect_fetch_ok
lab_expect_hits "$LAB_PRIV4" 1 /small
for scheme in http https; do
	lab_fetch weather "$scheme://mixed.weather.example/small"
	lab_expect_fetch_error denied
	lab_expect_decision weather deny mixed-zones mixed.weather.example
	lab_expect_hits "$LAB_PRIV4" 0
	lab_expect_hits "$LAB_PUB4" 0
done

lab_finish
