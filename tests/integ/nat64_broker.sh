#!/bin/bash
# SPDX-License-Identifier: ISC
#
# NAT64 discovery as a warning, in the netns lab: the
# lab's DNS server answers ipv4only.arpa AAAA inside 2001:db8:64::/96 as a
# DNS64 would (RFC 7050). With nat64_prefixes not declaring it, the live
# broker logs one egress.nat64 warning at start, `show status` carries the
# warning and the nat64_prefixes line to add, and `egressctl diagnose`
# prints that line (and exits 1). Once the prefix is declared and the
# broker reloads, the warning is gone from `show status` and diagnose. A
# broker whose resolver cannot answer for ipv4only.arpa (the lab's default)
# warns about nothing. No fixed sleeps. Needs root (skips with 77).
set -euo pipefail
. "$(dirname "$0")/lab/lab.sh"
lab_init
lab_need_bins
[ -x "${EGRESSCTL:-}" ] || lab_fail "set EGRESSCTL to the built binary"
command -v socat >/dev/null || lab_fail "missing socat (apt-get install -y socat)"
lab_up

CTL=$LAB_DIR/run/control.sock
PFX=2001:db8:64::/96
ctl()
{
	printf '%s\n' "$1" | timeout "$(egress_wait 10)" \
	    socat -t "$(egress_wait 5)" - "UNIX-CONNECT:$CTL"
}
config()
{
	lab_config_base
	[ -z "${1:-}" ] || printf '\n[security]\nnat64_prefixes = %s\n' "$1"
	lab_entry weather weather "api.weather.example"
}
# diagnose [OPTIONS]: egressctl diagnose in the broker namespace.
diagnose()
{
	lab_ns_b timeout "$(egress_wait 10)" "${EGRESS_WRAP_CMD[@]}" \
	    "$EGRESSCTL" -c "$LAB_CONF" diagnose "$@"
}
status_nat64()
{
	ctl "show status" | jq -c .nat64
}
# nat64_asked N: dnsmasq saw at least N ipv4only.arpa AAAA queries in all.
nat64_asked()
{
	[ "$(LAB_MARK_DNS=0 lab_dns_count ipv4only.arpa AAAA)" -ge "$1" ]
}
has_warning() { [ "$(status_nat64 | jq -r '.warning != null')" = true ]; }
no_warning() { [ "$(status_nat64 | jq -r '.warning == null')" = true ]; }

# ---- no DNS64 on the path: no warning ---------------------------------------
lab_dns_set api.weather.example="$LAB_PUB4"
config | lab_config_install
lab_egressd_start weather
lab_poll 10 nat64_asked 1 || lab_fail "the broker did not ask ipv4only.arpa"
lab_ok "the broker asked for ipv4only.arpa AAAA at start"
r=$(diagnose --nat64) || true
! grep -q nat64_prefixes <<<"$r" || lab_fail "diagnose without DNS64: $r"
lab_ok "no DNS64: diagnose prints no NAT64 line"
no_warning || lab_fail "no DNS64: show status warns: $(status_nat64)"
lab_ok "no DNS64: show status has no NAT64 warning"
lab_egressd_stop
[ "$(lab_count_events egress.nat64)" = 0 ] ||
    lab_fail "no DNS64: the broker logged a NAT64 warning"
lab_ok "no DNS64: no egress.nat64 event"

# ---- a DNS64 with an undeclared prefix: warning --------------------------
# As a DNS64 answers: the real A records, and AAAA synthesised from them.
lab_dns_set api.weather.example="$LAB_PUB4" \
    ipv4only.arpa=192.0.0.170,192.0.0.171,2001:db8:64::c000:aa,2001:db8:64::c000:ab
lab_egressd_start weather
lab_poll 10 has_warning || lab_fail "no NAT64 warning in show status"
s=$(status_nat64)
jq -e --arg p "$PFX" '(.warning | contains($p)) and
    .suggestion == ("nat64_prefixes = " + $p)' <<<"$s" >/dev/null ||
    lab_fail "show status NAT64: $s"
lab_ok "show status: warning and 'nat64_prefixes = $PFX'"
# Logged at start, possibly before lab_egressd_start's mark: whole log.
nat64_events() { LAB_MARK_LOG=0 lab_events egress.nat64; }
[ "$(nat64_events | wc -l)" = 1 ] ||
    lab_fail "want one egress.nat64 event: $(nat64_events)"
nat64_events | jq -e --arg p "$PFX" '.status == "warning" and
    .suggestion == ("nat64_prefixes = " + $p)' >/dev/null ||
    lab_fail "egress.nat64 event: $(nat64_events)"
lab_ok "one egress.nat64 warning event in the log"
rc=0
r=$(diagnose) || rc=$?
lab_expect_eq "diagnose exit status with a NAT64 finding" 1 "$rc"
grep -qxF "  nat64_prefixes = $PFX" <<<"$r" ||
    lab_fail "diagnose lacks the nat64_prefixes line: $r"
lab_ok "diagnose prints 'nat64_prefixes = $PFX'"
r=$(diagnose --no-nat64) ||
    true
! grep -q nat64_prefixes <<<"$r" || lab_fail "--no-nat64 still checks: $r"
lab_ok "diagnose --no-nat64 skips the lookup"

# ---- declared: the warning goes at the reload ----------------------------
config "$PFX" | lab_config_install
r=$(ctl reload)
jq -e '.reloaded == true' <<<"$r" >/dev/null || lab_fail "reload: $r"
lab_poll 10 no_warning || lab_fail "declared, still warned: $(status_nat64)"
lab_ok "declared and reloaded: show status has no NAT64 warning"
r=$(diagnose) || true
! grep -q 'nat64_prefixes =' <<<"$r" || lab_fail "diagnose still warns: $r"
lab_ok "declared: diagnose prints no NAT64 line"

lab_finish
