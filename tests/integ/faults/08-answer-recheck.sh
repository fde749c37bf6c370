#!/bin/bash
# SPDX-License-Identifier: ISC
#
# The answers of a lookup are checked against the configuration in force
# when they arrive, not the one the request started with. The DNS server
# holds the answer for gate*.weather.example until the test releases it;
# meanwhile the configuration is broken, the instance removed, or its
# grant revoked. Each request is then denied with the reason of the
# configuration current at the answer (policy-unavailable, unknown-
# instance, not-granted) and nothing reaches the upstream; with the
# configuration unchanged the same gated request is allowed and served.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
. "$(dirname "$0")/faults.sh"
lab_init
lab_need_bins
lab_up

good_conf()
{
	{
		DNS_PORT=$FAULT_DNS_PORT fault_config_base timeout_ms=10000
		lab_entry weather weather "*.weather.example"
		lab_entry radar radar "*.weather.example"
	} | lab_config_install
}
good_conf
fault_badup_start
fault_dns_start
lab_egressd_start weather radar
name_url() { printf 'http://%s.weather.example:%s/ok' "$1" "$FAULT_UP_PORT"; }
fault__dns_seen() { [ "$(fault_dns_count udp "$1")" -ge 1 ]; }

# gated LABEL EDIT REASON CODE: weather asks for LABEL.weather.example;
# once the DNS server holds the query, EDIT changes the configuration;
# then the answer is released. The decision is REASON ("-": allowed), the
# guest's error CODE, and only an allowed request reaches the upstream.
gated()
{
	local label=$1 edit=$2 reason=$3 code=$4 ups
	fault_log_mark
	lab_mark
	ups=$(fault_ev '^req ' | wc -l)
	fault_spawn_fetch "g-$label" weather "$(name_url "$label")"
	lab_poll 10 fault__dns_seen "$label.weather.example" ||
	    lab_fail "$label: the DNS server saw no query"
	"$edit"
	: >"$LAB_DIR/fdns/release.$label"
	fault_wait_fetch "g-$label"
	if [ "$reason" = - ]; then
		[ "$LAB_FETCH_RC" = 0 ] ||
		    lab_fail "$label: want success, got $LAB_FETCH_RC: $LAB_FETCH_ERR"
		fault_expect_ok_body
		lab_expect_decision weather allow - "$label.weather.example"
		lab_expect_eq "$label: upstream requests" "$((ups + 1))" \
		    "$(fault_ev '^req ' | wc -l)"
		return
	fi
	lab_expect_fetch_error "$code"
	lab_expect_decision weather deny "$reason" "$label.weather.example"
	lab_expect_eq "$label: upstream requests" "$ups" \
	    "$(fault_ev '^req ' | wc -l)"
	lab_ok "$label: denied as $reason at the answer, nothing connected"
}

unchanged() { :; }
break_conf() { printf '[broker\n' | lab_config_install; }
remove_instance()
{
	{
		DNS_PORT=$FAULT_DNS_PORT fault_config_base timeout_ms=10000
		lab_entry radar radar "*.weather.example"
	} | lab_config_install
}
revoke_grant()
{
	{
		DNS_PORT=$FAULT_DNS_PORT fault_config_base timeout_ms=10000
		lab_entry weather weather "api.weather.example"
		lab_entry radar radar "*.weather.example"
	} | lab_config_install
}

gated gate0 unchanged - ok
gated gate1 break_conf policy-unavailable unavailable
good_conf
gated gate2 revoke_grant not-granted denied
good_conf
gated gate3 remove_instance unknown-instance denied
good_conf
# After all that the broker serves normally again (radar's request makes
# it read the restored file, which brings weather's socket back).
lab_fetch radar "$(name_url radar)"
fault_expect_ok_body
lab_poll 10 lab__sockets_exist weather || lab_fail "weather's socket is gone"
lab_fetch weather "$(name_url again)"
fault_expect_ok_body
lab_ok "served again once the configuration was restored"
