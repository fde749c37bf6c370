#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Scenario 5: an allowed host answers 302 Location:
# http://169.254.169.254/. The broker returns the 302 untouched (it never
# follows a redirect); egress-fetch -L sends the second request itself,
# which passes the whole policy again and is denied (metadata when the
# literal is granted, not-granted when it is not); the metadata server is
# never hit.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
lab_up

lab_dns_set api.weather.example="$LAB_PUB4"
{
	lab_config_base
	lab_entry weather weather "api.weather.example, $LAB_META4"
	lab_entry radar radar api.weather.example
} | lab_config_install
lab_egressd_start weather radar

for scheme in http https; do
	lab_fetch weather -i "$scheme://api.weather.example/redirect"
	lab_expect_fetch_ok 302
	grep -qix "location: http://$LAB_META4/" < <(tr -d '\r' \
	    <"$LAB_FETCH_OUT") || lab_fail "no Location header in the 302"
	lab_ok "the 302 and its Location came back untouched"
	lab_expect_decision weather allow - api.weather.example
	lab_expect_hits "$LAB_PUB4" 1 /redirect
	lab_expect_hits "$LAB_META4" 0
done

# The guest chases it: a new request, denied by its address class.
lab_fetch weather -L --max-redirs 5 http://api.weather.example/redirect
lab_expect_fetch_error denied
lab_expect_decision weather allow - api.weather.example 1
lab_expect_decision weather deny metadata "$LAB_META4" 2
lab_expect_eq "decisions for a chased redirect" 2 \
    "$(lab_count_events egress.decision)"
lab_expect_hits "$LAB_PUB4" 1 /redirect
lab_expect_hits "$LAB_META4" 0

# An instance that is not granted the literal: denied by its grant.
lab_fetch radar -L http://api.weather.example/redirect
lab_expect_fetch_error denied
lab_expect_decision radar allow - api.weather.example 1
lab_expect_decision radar deny not-granted "$LAB_META4" 2
lab_expect_hits "$LAB_META4" 0

lab_finish
