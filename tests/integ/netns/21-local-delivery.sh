#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Scenario 15: every address the broker host delivers locally is in the
# loopback class, not only its interface addresses, and an unknown set
# refuses. In the broker's namespace: a prefix on lo (172.31.5.1/24 makes
# the local route 172.31.5.0/24), AnyIP routes (local 9.9.9.0/24 and
# 2a00:1450::/64 on lo) and a local route in another table (9.9.8.0/24,
# table 100), 4200 addresses on lo (more than any cap ever kept), with
# listeners on 9.9.9.9:80, 172.31.5.77:80 and 172.29.16.200:80. Names
# granted (and carved out only in egress_allow_private) that answer
# inside them are denied loopback-address and no listener sees a
# connection; a local route added while egressd runs counts as soon as
# netlink reported it; egress_allow_loopback re-opens them. Then egressd
# runs without AF_NETLINK (as under systemd RestrictAddressFamilies=
# without it): it says so at start, every decision is policy-unavailable
# (even a plain public name, which reaches nothing), and the control
# check and `egressctl check` agree.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
lab_up

[ -x "${EGRESS_WITHOUT:-}" ] || lab_fail "EGRESS_WITHOUT is not set"
[ -x "${EGRESSCTL:-}" ] || lab_fail "EGRESSCTL is not set"

# lo_hits NAME: requests the listener NAME has served.
lo_hits()
{
	local f=$LAB_DIR/$1/access.log
	if [ -f "$f" ]; then
		grep -c ' /small ' "$f" || true
	else
		echo 0
	fi
}

lo_listening()
{
	lab_ns_b ss -Htln | grep -qF "$1:80 "
}

# lo_listen NAME ADDR: a gate_httpd.py on ADDR:80 in the broker namespace.
lo_listen()
{
	mkdir -p "$LAB_DIR/$1"
	lab_spawn "$1" "$LAB_NS_B" "$LAB_PYTHON" "$LAB_SRC_DIR/gate_httpd.py" \
	    "$2" 80 "$LAB_DIR/$1"
	lab_poll 10 lo_listening "$2" || lab_fail "nothing listens on $2:80"
}

lab_ns_b ip addr add 172.31.5.1/24 dev lo
lab_ns_b ip route add local 9.9.9.0/24 dev lo
lab_ns_b ip -6 route add local 2a00:1450::/64 dev lo
lab_ns_b ip route add local 9.9.8.0/24 dev lo table 100
# More own addresses than the old cap of 4096: the last still counts.
python3 -c '
for i in range(4200):
    print("addr add 172.29.%d.%d/32 dev lo" % (i // 250, i % 250 + 1))' \
    >"$LAB_DIR/many.batch"
lab_ns_b ip -batch "$LAB_DIR/many.batch"
lo_listen anyip 9.9.9.9
lo_listen lopfx 172.31.5.77
lo_listen many 172.29.16.200

lab_dns_set anyip.weather.example=9.9.9.9 \
    lopfx.weather.example=172.31.5.77 \
    anyip6.weather.example=2a00:1450::77 \
    tbl.weather.example=9.9.8.1 \
    live.weather.example=9.9.7.7 \
    many.weather.example=172.29.16.200 \
    pub.weather.example="$LAB_PUB4"
NAMES="anyip.weather.example lopfx.weather.example anyip6.weather.example"
NAMES="$NAMES tbl.weather.example many.weather.example"
HOSTS="anyip.weather.example, lopfx.weather.example"
HOSTS="$HOSTS, anyip6.weather.example, tbl.weather.example"
HOSTS="$HOSTS, live.weather.example, pub.weather.example"
HOSTS="$HOSTS, many.weather.example"

# Granted, and only privately carved out: every locally delivered answer
# is refused.
{
	lab_config_base
	lab_entry weather weather "$HOSTS" "$HOSTS"
} | lab_config_install
lab_egressd_start weather
for name in $NAMES; do
	lab_fetch weather "http://$name/small"
	lab_expect_fetch_error denied
	lab_expect_decision weather deny loopback-address "$name"
done
lab_expect_eq "requests on 9.9.9.9:80 (AnyIP)" 0 "$(lo_hits anyip)"
lab_expect_eq "requests on 172.31.5.77:80 (prefix on lo)" 0 \
    "$(lo_hits lopfx)"
lab_expect_eq "requests on 172.29.16.200:80 (own address 4200)" 0 \
    "$(lo_hits many)"

# A local route added now counts once netlink has reported it.
n=$(lab_count_events egress.netaddr)
lab_ns_b ip route add local 9.9.7.0/24 dev lo table 200
lab_poll 10 lab__events_at_least egress.netaddr $((n + 1)) ||
    lab_fail "egressd did not report the new local route"
lab_fetch weather http://live.weather.example/small
lab_expect_fetch_error denied
lab_expect_decision weather deny loopback-address live.weather.example
lab_egressd_stop

# The loopback carve-out re-opens the class: the listener is reached. A
# private carve-out of localhost (kept from before loopback was its own
# class) opens nothing: egress.start warns, naming egress_allow_loopback.
{
	lab_config_base
	lab_entry weather weather "$HOSTS, localhost" "localhost" http_client \
	    "anyip.weather.example"
} | lab_config_install
lab_egressd_start weather
lab_expect_eq "egress.start warning for egress_allow_private = localhost" 1 \
    "$(jq -cR 'fromjson? | select(.event == "egress.start")' \
    "$LAB_BROKER_LOG" | tail -n 1 | jq '[.warnings[]? |
    select(test("egress_allow_private: localhost is loopback.*egress_allow_loopback"))] | length')"
lab_fetch weather http://anyip.weather.example/small
lab_expect_fetch_ok
lab_expect_decision weather allow - anyip.weather.example
lab_expect_eq "requests on 9.9.9.9:80 (carved out)" 1 "$(lo_hits anyip)"
lab_egressd_stop

# Without netlink the set is unknown: said at start, and every decision
# is policy-unavailable, even for a public name.
{
	lab_config_base
	lab_entry weather weather "$HOSTS" ""
} | lab_config_install
LAB_EGRESSD_WRAP=("$EGRESS_WITHOUT" netlink "${LAB_EGRESSD_WRAP[@]}")
lab_egressd_start weather
lab_expect_eq "start says the own addresses are unknown" error \
    "$(jq -cR 'fromjson? | select(.event == "egress.netaddr")' \
    "$LAB_BROKER_LOG" | tail -n 1 | jq -r .status)"
for name in pub.weather.example anyip.weather.example; do
	lab_fetch weather "http://$name/small"
	lab_expect_fetch_error unavailable
	lab_expect_decision weather deny policy-unavailable "$name"
done
lab_expect_hits "$LAB_PUB4" 0
lab_expect_eq "requests on 9.9.9.9:80 (no netlink)" 1 "$(lo_hits anyip)"
# The control check agrees.
r=$(printf 'check weather http://pub.weather.example/\n' |
    timeout "$(egress_wait 10)" socat -t "$(egress_wait 5)" - \
    "UNIX-CONNECT:$LAB_DIR/run/control.sock")
lab_expect_eq "control check without netlink" "deny policy-unavailable" \
    "$(jq -r '[.verdict, .reason] | join(" ")' <<<"$r")"
rc=0
out=$(lab_ns_b "$EGRESS_WITHOUT" netlink "$EGRESSCTL" -c "$LAB_CONF" check \
    --resolve "pub.weather.example=$LAB_PUB4" weather \
    http://pub.weather.example/ 2>"$LAB_DIR/check.err") || rc=$?
lab_expect_eq "egressctl check without netlink" \
    "1 deny policy-unavailable" "$rc $out"
grep -q "cannot read this host's addresses" "$LAB_DIR/check.err" ||
    lab_fail "egressctl check did not say why: $(cat "$LAB_DIR/check.err")"
lab_ok "egressctl check says why"

# egressctl reads the own addresses as check does: 172.31.5.1 (on lo,
# a private-range address) is loopback to plugin grant and diagnose.
rc=0
lab_ns_b "$EGRESSCTL" -c "$LAB_CONF" plugin grant weather --private \
    172.31.5.1 >/dev/null 2>"$LAB_DIR/grant.err" || rc=$?
lab_expect_eq "plugin grant --private of an own address" 2 "$rc"
grep -q "carve it out with --loopback" "$LAB_DIR/grant.err" ||
    lab_fail "plugin grant did not name --loopback: $(cat "$LAB_DIR/grant.err")"
lab_ok "plugin grant names --loopback for an own address"
printf '%s\n' '{"ts":"2026-08-21T10:00:00.000Z","event":"egress.decision","request_id":1,"instance":"weather","plugin":"weather","transport":"http","host":"172.31.5.1","port":80,"verdict":"deny","reason":"private-address","addresses":[]}' \
    >"$LAB_DIR/denials.log"
out=$(lab_ns_b "$EGRESSCTL" -c "$LAB_CONF" diagnose --no-nat64 \
    --log "$LAB_DIR/denials.log" 2>&1) || true
grep -q -- "--loopback 172.31.5.1" <<<"$out" ||
    lab_fail "diagnose did not advise --loopback for an own address: $out"
! grep -q -- "--private 172.31.5.1" <<<"$out" ||
    lab_fail "diagnose advised --private for an own address: $out"
lab_ok "diagnose advises --loopback for an own address"

lab_finish
