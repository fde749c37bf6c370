#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Fault group 2: a faulty DNS server (faultdns.py as
# the broker's only resolver, short [resolver] timeout_ms). SERVFAIL, no
# answer at all (timeout), an answer truncated with TC set (the resolver
# must retry over TCP and then succeed; or fail cleanly when TCP is closed
# without an answer), an answer cut off inside its record (malformed), and
# the server killed while a query is pending and then restarted. Each
# failure is dns-failed for the guest (log reason unresolvable), never an
# upstream connection; no descriptor or lease is left behind; another
# instance resolving a good name at the same time succeeds; and once the
# server is back, requests succeed again.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
. "$(dirname "$0")/faults.sh"
lab_init
lab_need_bins
lab_up

{
	DNS_PORT=$FAULT_DNS_PORT fault_config_base timeout_ms=300
	lab_entry weather weather "*.weather.example, $LAB_PUB4"
	lab_entry radar radar "*.weather.example"
} | lab_config_install
grep -q "^servers = $LAB_DNS_ADDR:$FAULT_DNS_PORT\$" "$LAB_CONF" ||
    lab_fail "the configuration does not name the faulty DNS server"
fault_badup_start
fault_dns_start
lab_egressd_start weather radar
name_url() { printf 'http://%s.weather.example:%s/ok' "$1" "$FAULT_UP_PORT"; }

lab_fetch weather "$(name_url ok)"
fault_expect_ok_body
fault_other_ok
fault_baseline
fault_expect_clean "warm-up" weather radar

# dns_fault LABEL: weather asks for LABEL.weather.example and gets
# dns-failed, while radar's request for a good name, made once the server
# saw LABEL's query, succeeds; no upstream connection was made for it.
dns_fault()
{
	local label=$1 ups
	fault_log_mark
	ups=$(fault_ev '^req ' | wc -l)
	fault_spawn_fetch "d-$label" weather "$(name_url "$label")"
	lab_poll 10 fault__dns_seen udp "$label.weather.example" ||
	    lab_fail "$label: the DNS server saw no query"
	fault_other_ok
	fault_wait_fetch "d-$label"
	lab_expect_fetch_error dns-failed
	lab_expect_eq "$label: decision" "deny unresolvable" \
	    "$(tail -n "+$((FAULT_LOG_MARK + 1))" "$LAB_BROKER_LOG" |
	    jq -rR 'fromjson? | select(.event == "egress.decision" and
	    .instance == "weather") | "\(.verdict) \(.reason)"')"
	lab_expect_eq "$label: egress.close error" dns-failed \
	    "$(fault_close_of weather | jq -r '.error // "none"')"
	lab_expect_eq "$label: upstream requests (radar's only)" \
	    "$((ups + 1))" "$(fault_ev '^req ' | wc -l)"
	fault_expect_clean "$label" weather radar
}
fault__dns_seen() { [ "$(fault_dns_count "$1" "$2")" -ge 1 ]; }

dns_fault servfail
dns_fault hang
dns_fault tconly
[ "$(fault_dns_count tcp tconly.weather.example)" -ge 1 ] ||
    lab_fail "tconly: the resolver did not retry over TCP"
lab_ok "tconly: the resolver retried over TCP"
dns_fault cut

# TC over UDP, the full answer over TCP: the request succeeds.
lab_fetch weather "$(name_url tc)"
fault_expect_ok_body
[ "$(fault_dns_count tcp tc.weather.example)" -ge 1 ] ||
    lab_fail "tc: the answer did not come over TCP"
lab_ok "tc: the answer came over TCP"
fault_expect_clean "tc" weather radar

# The server killed while a query is pending, then restarted. A longer
# resolver timeout (2 s) keeps the query pending past the kill; the retry
# after it finds nobody listening.
{
	DNS_PORT=$FAULT_DNS_PORT fault_config_base timeout_ms=2000
	lab_entry weather weather "*.weather.example, $LAB_PUB4"
	lab_entry radar radar "*.weather.example"
} | lab_config_install
lab_fetch weather "$(name_url ok)"
fault_expect_ok_body
fault_baseline
fault__dns_more() { [ "$(fault_dns_count "$1" "$2")" -gt "$3" ]; }
n0=$(fault_dns_count udp hang.weather.example)
fault_log_mark
fault_spawn_fetch killed weather "$(name_url hang)"
lab_poll 10 fault__dns_more udp hang.weather.example "$n0" ||
    lab_fail "the pending query never reached the DNS server"
lab_stop fdns KILL
fault_wait_fetch killed
lab_expect_fetch_error dns-failed
lab_expect_eq "killed: egress.close error" dns-failed \
    "$(fault_close_of weather | jq -r '.error // "none"')"
lab_fetch weather "$(name_url ok)"
lab_expect_fetch_error dns-failed
lab_ok "while the DNS server is down, names fail cleanly"
lab_fetch weather "$FAULT_UP/ok"
fault_expect_ok_body
lab_ok "while the DNS server is down, an IP literal is still served"
fault_expect_clean "DNS server down" weather radar
fault_dns_start
lab_fetch weather "$(name_url ok)"
fault_expect_ok_body
fault_other_ok
fault_expect_clean "DNS server restarted" weather radar

# A guest that starts lookups and resets them at
# once (REQUEST + RESET) cannot keep more than REQUEST_DNS_PER_INSTANCE
# (128) lookups of its instance in flight: a cancelled lookup keeps its
# slot until c-ares is done with it, so the 129th request, right behind
# 128 abandoned ones for a name the server never answers, is refused
# budget-exhausted at once (not dns-failed after a lookup), while another
# instance still resolves.
from=$(($(lab__lines "$LAB_BROKER_LOG") + 1))
got=$(timeout "$(egress_wait 20)" ip netns exec "$LAB_NS_B" "$LAB_PYTHON" \
    "$FAULT_SRC_DIR/guest.py" resetflood "$LAB_SOCK_DIR/weather.sock" \
    "hang.weather.example:$FAULT_UP_PORT" /ok 128)
lab_expect_eq "the 129th outstanding lookup of one instance" \
    "error 2" "$got"
fault_other_ok
lab_expect_eq "weather decisions refused budget-exhausted" 1 \
    "$(tail -n "+$from" "$LAB_BROKER_LOG" | jq -rR 'fromjson? |
    select(.event == "egress.decision" and .instance == "weather" and
    .reason == "budget-exhausted") | .request_id' | wc -l)"

lab_finish
