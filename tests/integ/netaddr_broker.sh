#!/bin/bash
# SPDX-License-Identifier: ISC
#
# The host's own addresses through the real broker,
# in the netns lab: a granted name resolving to a public-looking address
# is allowed by the live broker's `check`; once that address is added to
# lo in the broker's namespace it is denied loopback-address (by `check`
# and by a real request, which connects nowhere) as soon as netlink has
# reported it, `show status` lists it, and once it is removed the name is
# allowed again. IPv4 and IPv6. Every wait polls (lab_poll); no fixed
# sleep. The addresses are not routed anywhere: an allowed check is a dry
# run and no request is sent to them. Needs root (skips with 77).
set -euo pipefail
. "$(dirname "$0")/lab/lab.sh"
lab_init
lab_need_bins
command -v socat >/dev/null || lab_fail "missing socat (apt-get install -y socat)"
lab_up

CTL=$LAB_DIR/run/control.sock
V4=93.184.216.60
V6=2606:4700:10::60
lab_dns_set self4.weather.example="$V4" self6.weather.example="$V6"
{
	lab_config_base
	lab_entry weather weather "self4.weather.example, self6.weather.example"
} | lab_config_install
lab_egressd_start weather

ctl()
{
	printf '%s\n' "$1" | timeout "$(egress_wait 10)" \
	    socat -t "$(egress_wait 5)" - "UNIX-CONNECT:$CTL"
}

# verdict_is NAME VERDICT [REASON]: the live check of http://NAME/ says so.
verdict_is()
{
	local r
	r=$(ctl "check weather http://$1/") || return 1
	CHECK_LAST=$r
	[ "$(jq -r '[.verdict, (.reason // "-")] | join(" ")' <<<"$r")" = \
	    "$2 ${3:--}" ]
}

# in_status ADDR: show status lists ADDR among the host addresses.
in_status()
{
	ctl "show status" | jq -e --arg a "$1" \
	    '.local_addresses.addresses | index($a) != null' >/dev/null
}

for fam in 4 6; do
	if [ "$fam" = 4 ]; then
		a=$V4 name=self4.weather.example add=("$V4/32")
	else
		a=$V6 name=self6.weather.example add=("$V6/128" nodad)
	fi
	verdict_is "$name" allow ||
	    lab_fail "$name before the address exists: $CHECK_LAST"
	jq -e --arg a "$a" '.addresses == [$a]' <<<"$CHECK_LAST" >/dev/null ||
	    lab_fail "check addresses: $CHECK_LAST"
	lab_ok "IPv$fam: $name ($a) allowed while no interface has it"
	! in_status "$a" || lab_fail "$a in show status before it exists"
	g0=$(ctl "show status" | jq -r .local_addresses.generation)

	lab_ns_b ip -"$fam" addr add "${add[0]}" dev lo "${add[@]:1}"
	lab_poll 10 verdict_is "$name" deny loopback-address ||
	    lab_fail "$a on lo: not denied loopback-address: $CHECK_LAST"
	lab_ok "IPv$fam: $a added to lo: check denies loopback-address"
	in_status "$a" || lab_fail "show status does not list $a"
	lab_ok "IPv$fam: show status lists $a"
	# From netlink (generation moves), not a getifaddrs() fallback.
	g1=$(ctl "show status" | jq -r .local_addresses.generation)
	[ "$g0" -ge 1 ] && [ "$g1" -gt "$g0" ] ||
	    lab_fail "netlink generation did not move: $g0 -> $g1"
	lab_ok "IPv$fam: netlink generation $g0 -> $g1"
	lab_fetch weather "http://$name/small"
	lab_expect_fetch_error denied
	lab_expect_decision weather deny loopback-address "$name"

	lab_ns_b ip -"$fam" addr del "${add[0]}" dev lo
	lab_poll 10 verdict_is "$name" allow ||
	    lab_fail "$a removed: not allowed again: $CHECK_LAST"
	lab_ok "IPv$fam: $a removed from lo: allowed again"
	! in_status "$a" || lab_fail "show status still lists $a"
	lab_ok "IPv$fam: show status no longer lists $a"
done

lab_finish
