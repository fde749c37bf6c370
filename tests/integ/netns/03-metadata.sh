#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Scenario 3: granted names that resolve to the
# metadata addresses 169.254.169.254 (A) and fd00:ec2::254 (AAAA), with a
# metadata server listening on both, are denied (reason metadata) and the
# metadata server is never hit; the same with the names carved out in
# egress_allow_private: still denied. The IP literals too.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
lab_up

lab_dns_set meta.weather.example="$LAB_META4" \
    meta6.weather.example="$LAB_META6"
NAMES="meta.weather.example, meta6.weather.example"
IPS="$LAB_META4, $LAB_META6"

run_all()
{
	local url host
	for url in http://meta.weather.example/ \
	    https://meta.weather.example/latest/meta-data/ \
	    http://meta6.weather.example/ https://meta6.weather.example/ \
	    "http://$LAB_META4/latest/meta-data/" "http://[$LAB_META6]/"; do
		lab_fetch weather "$url"
		lab_expect_fetch_error denied
		host=${url#*://}
		host=${host%%/*}
		# An IPv6 literal's spelling in the log is not pinned down.
		case $host in \[*) host= ;; esac
		lab_expect_decision weather deny metadata "$host"
		lab_expect_hits "$LAB_META4" 0
		lab_expect_hits "$LAB_META6" 0
	done
}

{
	lab_config_base
	lab_entry weather weather "$NAMES, $IPS"
} | lab_config_install
lab_egressd_start weather
run_all
lab_egressd_stop

# The carve-out relaxes the private class only; metadata stays refused.
{
	lab_config_base
	lab_entry weather weather "$NAMES, $IPS" "$NAMES, $IPS"
} | lab_config_install
lab_egressd_start weather
run_all

lab_finish
