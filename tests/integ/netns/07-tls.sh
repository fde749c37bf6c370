#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Scenario 7: SNI and certificate verification on the
# pinned address. A server whose certificate names another host gives
# tls-failed (and no request is served); the right certificate on the
# pinned IP passes, and the upstream saw the host name in SNI; an IP
# literal is verified against the IP, with no SNI.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
lab_up

lab_dns_set api.weather.example="$LAB_PUB4" \
    wrongcert.weather.example="$LAB_PUB4"
{
	lab_config_base
	lab_entry weather weather \
	    "api.weather.example, wrongcert.weather.example, $LAB_PUB4"
} | lab_config_install
lab_egressd_start weather

lab_fetch weather https://wrongcert.weather.example/small
lab_expect_fetch_error tls-failed
lab_expect_decision weather allow - wrongcert.weather.example
lab_expect_close error tls-failed
lab_expect_hits "$LAB_PUB4" 0

lab_fetch weather https://api.weather.example/small
lab_expect_fetch_ok
lab_expect_fetch_body_file "$LAB_DIR/www/small"
lab_expect_hits "$LAB_PUB4" 1 /small
lab_expect_eq "SNI seen upstream" api.weather.example \
    "$(lab_sni_seen "$LAB_PUB4")"

lab_fetch weather "https://$LAB_PUB4/small"
lab_expect_fetch_ok
lab_expect_hits "$LAB_PUB4" 1 /small
sni=$(lab_sni_seen "$LAB_PUB4")
[ "$sni" = - ] || [ -z "$sni" ] || lab_fail "SNI sent for an IP literal: $sni"
lab_ok "no SNI for an IP literal"

# TLS to a plain-HTTP port fails the handshake.
lab_fetch weather https://api.weather.example:80/small
lab_expect_fetch_error tls-failed

lab_finish
