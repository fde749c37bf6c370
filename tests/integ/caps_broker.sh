#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Socket ownership without capabilities (egressd.service runs the broker
# with an empty capability set, as its own user), in the netns lab. The broker runs under
# `setpriv --bounding-set=-all`. Without membership of the groups named
# by socket_group and control_gids it cannot hand its sockets to them: it
# says so (egress.listen events naming docs/deployment.md), the control
# socket stays 0600, and an instance whose socket cannot be given its
# group gets no usable socket (0600, root only) rather than a wider one,
# so the broker refuses to start. With those groups as supplementary
# groups (the unit's SupplementaryGroups=) and still no capability, both
# sockets get their group and mode 0660, and a peer of that group is
# served. Needs root (skips with 77).
set -euo pipefail
. "$(dirname "$0")/lab/lab.sh"
lab_init
lab_need_bins
command -v setpriv >/dev/null || lab_fail "missing setpriv (util-linux)"
lab_up

CTL=$LAB_DIR/run/control.sock
SOCKG=4343
CTLG=4242
REAL_EGRESSD=$EGRESSD

# wrapper GROUPS: make $EGRESSD run the broker with no capability at all
# and the given supplementary groups ("" for none). The EGRESS_WRAP
# command goes inside, between setpriv and the broker, so lab_egressd_start
# must not put it in front of the script.
LAB_EGRESSD_WRAP=()
wrapper()
{
	local w=$LAB_DIR/egressd-nocaps cmd
	cmd=$(printf '%q ' "${EGRESS_WRAP_CMD[@]}" "$REAL_EGRESSD")
	if [ -n "$1" ]; then
		printf '#!/bin/sh\nexec setpriv --bounding-set=-all --inh-caps=-all --groups=%s %s "$@"\n' \
		    "$1" "$cmd" >"$w"
	else
		printf '#!/bin/sh\nexec setpriv --bounding-set=-all --inh-caps=-all --clear-groups %s "$@"\n' \
		    "$cmd" >"$w"
	fi
	chmod 0755 "$w"
	EGRESSD=$w
}

lab_dns_set api.weather.example="$LAB_PUB4"
config()
{
	lab_config_base | sed "/^\[broker\]$/a control_gids = $CTLG"
	lab_entry weather weather "api.weather.example"
	[ -z "${1:-}" ] || printf 'socket_group = %s\n' "$1"
}

# ---- no capability, no membership: closed, and said so -------------------
config | lab_config_install
wrapper ""
lab_egressd_start weather
grep -q '^CapBnd:	0000000000000000$' "/proc/$(lab_egressd_pid)/status" ||
    lab_fail "the broker still has a capability bounding set"
lab_ok "the broker runs with an empty capability bounding set"
lab_expect_eq "control socket without the group: still root only" \
    "600 0" "$(stat -c '%a %g' "$CTL")"
lab_events egress.listen | jq -e 'select(.what | test("control socket group")) |
    (.what | test("deployment.md")) and .errno != null' >/dev/null ||
    lab_fail "no egress.listen event for the control socket group"
lab_ok "the failed group change is logged with the fix"
lab_fetch weather http://api.weather.example/small
lab_expect_fetch_ok
lab_egressd_stop

config "$SOCKG" | lab_config_install
lab_spawn egressd "$LAB_NS_B" "$EGRESSD" -c "$LAB_CONF" --foreground
lab_poll 15 lab__gone "$(lab_egressd_pid)" ||
    lab_fail "broker started with an ungiven socket_group"
lab_stop egressd
[ "$LAB_STOP_RC" != 0 ] || lab_fail "broker exited 0 without its socket"
lab_ok "socket_group it cannot give: the broker refuses to start (status $LAB_STOP_RC)"
grep -q 'cannot create every instance socket' "$LAB_DIR/log/egressd.err" ||
    lab_fail "no start error: $(cat "$LAB_DIR/log/egressd.err")"
LAB_MARK_LOG=0 lab_events egress.listen | jq -e --arg g "$SOCKG" \
    'select(.instance == "weather") | .what | test("SupplementaryGroups")' \
    >/dev/null || lab_fail "no egress.listen event for weather's socket"
lab_ok "the failed socket_group is logged with the fix"

# ---- no capability, members of the groups: given --------------------------
wrapper "$SOCKG,$CTLG"
lab_egressd_start weather
lab_expect_eq "control socket with the broker in control_gids[0]" \
    "660 $CTLG" "$(stat -c '%a %g' "$CTL")"
lab_expect_eq "instance socket with the broker in socket_group" \
    "660 $SOCKG" "$(stat -c '%a %g' "$LAB_SOCK_DIR/weather.sock")"
r=$(printf 'show status\n' | timeout "$(egress_wait 10)" setpriv --reuid=65534 \
    --regid=$CTLG --clear-groups socat -t 5 - "UNIX-CONNECT:$CTL")
jq -e '.instances == 1' <<<"$r" >/dev/null ||
    lab_fail "a control_gids peer was not served: $r"
lab_ok "a peer with primary gid $CTLG is served"
# The workers run as nobody, so egress-fetch is not wrapped here:
# valgrind, as nobody, cannot read a checkout that sits in a folder only
# root may enter (a CI clone in a mktemp -d). It runs wrapped in every
# other test; the broker, the part under test, is wrapped here too.
LAB_FETCH_RC=0
lab_ns_b timeout "$(egress_wait 30)" setpriv --reuid=65534 --regid=$SOCKG \
    --clear-groups "$EGRESS_FETCH" \
    --socket "$LAB_SOCK_DIR/weather.sock" http://api.weather.example/small \
    >"$LAB_DIR/fetch.out" 2>"$LAB_DIR/fetch.err" || LAB_FETCH_RC=$?
lab_expect_eq "a worker of socket_group $SOCKG fetches" 0 "$LAB_FETCH_RC"
LAB_FETCH_RC=0
lab_ns_b timeout "$(egress_wait 30)" setpriv --reuid=65534 --regid=65534 \
    --clear-groups "$EGRESS_FETCH" \
    --socket "$LAB_SOCK_DIR/weather.sock" http://api.weather.example/small \
    >"$LAB_DIR/fetch.out" 2>"$LAB_DIR/fetch.err" || LAB_FETCH_RC=$?
[ "$LAB_FETCH_RC" != 0 ] || lab_fail "a worker outside $SOCKG reached weather.sock"
lab_ok "a worker outside socket_group cannot connect"

lab_finish
