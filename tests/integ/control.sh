#!/bin/bash
# SPDX-License-Identifier: ISC
#
# The control socket of a live egressd, in the netns
# lab: every command once through `socat - UNIX-CONNECT:...` (show status,
# show instances, show instance NAME, show grants NAME, show metrics,
# check INSTANCE DESTINATION through the live resolver, reload, attach
# INSTANCE with its SCM_RIGHTS descriptor used for a real request, help),
# the counters moving with real requests, a broken configuration shown by
# `show status` and `reload`, and the peer rules: mode 0600 by default
# (another uid cannot even connect), 0660 with the group control_gids[0]
# (a peer with that group only as a supplementary group reaches the
# socket and is refused by SO_PEERCRED with one error line; one with it as
# primary group is served), and 0666 when control_uids names a non-root
# uid (that uid is served, another is refused with one line); a served
# connection whose uid leaves control_uids has its next command refused.
# Needs root (skips with 77 otherwise), socat and setpriv.
set -euo pipefail
. "$(dirname "$0")/lab/lab.sh"
lab_init
lab_need_bins
for t in socat setpriv; do
	command -v "$t" >/dev/null || lab_fail "missing $t (apt-get install" \
	    "-y socat util-linux)"
done
lab_up

CTL=$LAB_DIR/run/control.sock
NOBODY=65534
OTHER=65533
CGROUP=4242

# ctl LINE [setpriv options]: send one command line, print the reply.
ctl()
{
	local line=$1
	shift
	if [ $# -gt 0 ]; then
		printf '%s\n' "$line" | timeout "$(egress_wait 10)" \
		    setpriv "$@" socat -t "$(egress_wait 5)" - \
		    "UNIX-CONNECT:$CTL"
	else
		printf '%s\n' "$line" | timeout "$(egress_wait 10)" \
		    socat -t "$(egress_wait 5)" - "UNIX-CONNECT:$CTL"
	fi
}

# refused [setpriv options]: connect as that peer and only read (a
# refused peer is answered before it sends anything); print what came.
refused()
{
	timeout "$(egress_wait 10)" setpriv "$@" socat -u "UNIX-CONNECT:$CTL" - ||
	    true
}

# expect_jq WHAT JSON [jq options] FILTER: FILTER (jq -e) holds on JSON.
expect_jq()
{
	local what=$1 json=$2
	shift 2
	jq -e "$@" >/dev/null <<<"$json" ||
	    lab_fail "$what: '${!#}' fails on: $json"
	lab_ok "$what"
}

config()
{
	lab_config_base
	lab_entry weather weather "api.weather.example, lan.weather.example"
	lab_entry radar radar "api.radar.example"
}

lab_dns_set api.weather.example="$LAB_PUB4" \
    lan.weather.example="$LAB_PRIV4" api.radar.example="$LAB_PUB4"
config | lab_config_install
lab_egressd_start weather radar

# ---- show status ----------------------------------------------------------
lab_expect_eq "control socket mode (default: root only)" 600 \
    "$(stat -c %a "$CTL")"
r=$(ctl "show status")
expect_jq "show status: version, path, generation 1, no error" "$r" \
    --arg p "$LAB_CONF" '.version != null and .config.path == $p and
    .config.generation == 1 and .config.error == null and
    .config.loaded_at != null and .instances == 2 and .uptime_s >= 0'
expect_jq "show status: host addresses from netlink" "$r" \
    '.local_addresses.generation >= 1 and
    (.local_addresses.addresses | index("127.0.0.1")) != null and
    (.local_addresses.addresses | index("198.18.0.1")) != null'
expect_jq "show status: no NAT64 warning" "$r" '.nat64.warning == null'

# ---- traffic, then show instances / instance / metrics ---------------------
lab_fetch weather http://api.weather.example/small
lab_expect_fetch_ok
lab_fetch weather http://api.radar.example/small
lab_expect_fetch_error denied
lab_fetch weather http://lan.weather.example/small
lab_expect_fetch_error denied
r=$(ctl "show instances")
expect_jq "show instances: both, with socket and budget" "$r" \
    --arg d "$LAB_SOCK_DIR" '[.instances[].name] | sort == ["radar", "weather"]'
# The pooled keep-alive connection keeps its lease.
expect_jq "show instances: weather counters" "$r" \
    --arg d "$LAB_SOCK_DIR" '.instances[] | select(.name == "weather") |
    .socket == ($d + "/weather.sock") and .budget == 16 and
    .leases == 1 and .allowed == 1 and .denied == 2 and
    .bytes_in == 100 and .bytes_out == 0'
r=$(ctl "show instance weather")
expect_jq "show instance weather: denials by reason" "$r" \
    '.name == "weather" and .plugin == "weather" and
    .denied_by_reason["not-granted"] == 1 and
    .denied_by_reason["private-address"] == 1 and
    (.permissions | index("http_client")) != null'
r=$(ctl "show instance nosuch")
expect_jq "show instance of an unknown name: not-found" "$r" \
    '.code == "not-found"'
r=$(ctl "show grants weather")
expect_jq "show grants weather" "$r" \
    '.instance == "weather" and
    (.effective | index("api.weather.example")) != null'
ctl "show metrics" >"$LAB_DIR/metrics.txt"
for want in \
    'egressd_decisions_total{instance="weather",verdict="allow",reason="granted"} 1' \
    'egressd_decisions_total{instance="weather",verdict="deny",reason="not-granted"} 1' \
    'egressd_decisions_total{instance="weather",verdict="deny",reason="private-address"} 1' \
    'egressd_leases_in_use{instance="weather"} 1' \
    'egressd_dns_lookups_total{status="ok"} 2' \
    'egressd_config_valid 1'; do
	grep -qxF "$want" "$LAB_DIR/metrics.txt" ||
	    lab_fail "show metrics lacks '$want'"
	lab_ok "show metrics has '$want'"
done
# The reply ends with one empty line; the exposition has no "# EOF".
[ "$(tail -c 2 "$LAB_DIR/metrics.txt" | od -An -c | tr -d ' ')" = '\n\n' ] &&
    ! grep -q '^# EOF' "$LAB_DIR/metrics.txt" ||
    lab_fail "show metrics: want the exposition, then one empty line"
grep -q '^egressd_connect_seconds_count 1$' "$LAB_DIR/metrics.txt" ||
    lab_fail "show metrics: want one connect"
grep -q '^egressd_bytes_total{instance="weather",direction="in"} 100$' \
    "$LAB_DIR/metrics.txt" || lab_fail "show metrics: bytes in"
lab_ok "show metrics: connect latency and bytes"

# ---- check, through the live resolver ------------------------------------
lab_mark
r=$(ctl "check weather https://api.weather.example/")
expect_jq "check: allow with the validated address" "$r" \
    --arg a "$LAB_PUB4" '.verdict == "allow" and .addresses == [$a]'
[ "$(lab_dns_count api.weather.example A)" -ge 1 ] ||
    lab_fail "check did not ask the lab's DNS server"
lab_ok "check resolved through the broker's resolver"
r=$(ctl "check weather http://lan.weather.example/")
expect_jq "check: private-address" "$r" \
    --arg a "$LAB_PRIV4" '.verdict == "deny" and
    .reason == "private-address" and .answers == [$a]'
r=$(ctl "check weather api.radar.example")
expect_jq "check: not-granted (HOST form)" "$r" \
    '.verdict == "deny" and .reason == "not-granted"'
r=$(ctl "check weather http://")
expect_jq "check: invalid-destination" "$r" \
    '.reason == "invalid-destination"'
lab_expect_hits "$LAB_PUB4" 0
lab_expect_hits "$LAB_PRIV4" 0
[ "$(lab_count_events egress.decision)" = 0 ] ||
    lab_fail "a dry run logged a decision"
lab_ok "check is a dry run: no upstream hit, no decision logged"

# ---- attach ---------------------------------------------------------------
lab_mark
lab_ns_b timeout "$(egress_wait 20)" python3 - "$CTL" "$EGRESS_FETCH" \
    http://api.weather.example/small >"$LAB_DIR/attach.out" \
    2>"$LAB_DIR/attach.err" <<'EOF' || lab_fail "attach: $(cat "$LAB_DIR/attach.err")"
import json, os, socket, stat, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"attach weather\n")
msg, fds, _, _ = socket.recv_fds(s, 4096, 4)
reply = json.loads(msg.decode().splitlines()[0])
assert reply == {"attached": "weather"}, reply
assert len(fds) == 1, fds
assert stat.S_ISSOCK(os.fstat(fds[0]).st_mode)
s.close()
os.dup2(fds[0], 3)
os.environ["EGRESS_FD"] = "3"
# EGRESS_WRAP (tests/integ/wrap.sh): the command egress-fetch runs under.
argv = os.environ.get("EGRESS_WRAP", "").split() + sys.argv[2:4]
os.execvp(argv[0], argv)
EOF
cmp -s "$LAB_DIR/www/small" "$LAB_DIR/attach.out" ||
    lab_fail "attach: the body differs"
lab_ok "attach: the descriptor carries requests"
lab_expect_decision weather allow - api.weather.example
lab_expect_hits "$LAB_PUB4" 1 /small
r=$(ctl "attach nosuch")
expect_jq "attach of an unknown instance: not-found" "$r" \
    '.code == "not-found"'

# ---- help, unknown ----------------------------------------------------------
r=$(ctl "help")
expect_jq "help lists the commands" "$r" '.commands | length == 10'
r=$(ctl "frobnicate")
expect_jq "unknown command" "$r" '.code == "unknown-command"'

# ---- how changes are found -------------------------------------------------
# The lab's files sit on a local file system, reached through no link.
expect_jq "show status: the files are watched" "$(ctl "show status")" \
    '.config.watch == "inotify"'

# ---- reload ---------------------------------------------------------------
config | sed 's/^egress_hosts = api.radar.example$/egress_hosts = api.radar.example, x.radar.example/' |
    lab_config_install
# Generations only grow (a file written within the clock's granularity
# is re-read until it is old enough, so no exact number is asserted).
gen() { ctl "show status" | jq -r .config.generation; }
g=$(gen)
r=$(ctl "reload")
expect_jq "reload: a newer generation" "$r" --argjson g "$g" \
    '.reloaded == true and .generation > $g'
# The generation and the failure count just before the break.
r=$(ctl "show status")
g=$(jq -r .config.generation <<<"$r")
f=$(jq -r .config.reload_failures <<<"$r")
printf '[broker\n' | lab_config_install
r=$(ctl "reload")
expect_jq "reload of a broken file: failed, with the file:line" "$r" \
    '.code == "failed" and (.detail | test("egressd.ini:1"))'
# Every refused re-read counts, and the broker's idle re-check may have
# read the broken file before the reload did: one failure or two.
r=$(ctl "show status")
expect_jq "show status: the configuration error" "$r" --argjson g "$g" \
    --argjson f "$f" '(.config.reload_failures - $f) as $d |
    .config.error != null and $d >= 1 and $d <= 2 and
    .config.generation == $g'
expect_jq "show status: changes found by stat while broken" "$r" \
    '.config.watch == "stat: the configuration is broken"'
r=$(ctl "show instances")
expect_jq "show instances while broken: unavailable" "$r" \
    '.code == "unavailable"'
config | lab_config_install
r=$(ctl "reload")
expect_jq "reload after the fix: a newer generation" "$r" --argjson g "$g" \
    '.reloaded == true and .generation > $g'

# ---- peers ---------------------------------------------------------------
# A refused peer is answered at once, before it sends a command (a
# client writing meanwhile may see EPIPE): refused() only reads.
# Default: 0600, another uid cannot connect at all.
if ctl "show status" --reuid=$NOBODY --regid=$NOBODY --clear-groups \
    >"$LAB_DIR/peer.out" 2>&1; then
	lab_fail "uid $NOBODY reached a 0600 control socket: $(cat "$LAB_DIR/peer.out")"
fi
lab_ok "0600: uid $NOBODY cannot connect"

# control_gids: 0660 with that group; SO_PEERCRED checks the primary gid.
{
	lab_config_base | sed "/^\[broker\]$/a control_gids = $CGROUP"
	lab_entry weather weather "api.weather.example, lan.weather.example"
	lab_entry radar radar "api.radar.example"
} | lab_config_install
r=$(ctl "reload")
expect_jq "reload with control_gids" "$r" '.reloaded == true'
lab_expect_eq "control socket mode with control_gids" "660 $CGROUP" \
    "$(stat -c '%a %g' "$CTL")"
r=$(refused --reuid=$NOBODY --regid=$NOBODY --groups=$CGROUP)
lab_expect_eq "supplementary group only: refused with one line" \
    '{"error":"permission denied","code":"denied"}' "$r"
r=$(ctl "show status" --reuid=$NOBODY --regid=$CGROUP --clear-groups)
expect_jq "primary gid in control_gids: served" "$r" \
    '.config.generation > 0'

# control_uids with a non-root uid: 0666, SO_PEERCRED alone decides.
{
	lab_config_base | sed "/^\[broker\]$/a control_uids = 0, $NOBODY"
	lab_entry weather weather "api.weather.example, lan.weather.example"
	lab_entry radar radar "api.radar.example"
} | lab_config_install
r=$(ctl "reload")
expect_jq "reload with control_uids" "$r" '.reloaded == true'
lab_expect_eq "control socket mode with a non-root control uid" 666 \
    "$(stat -c %a "$CTL")"
r=$(ctl "show status" --reuid=$NOBODY --regid=$NOBODY --clear-groups)
expect_jq "uid $NOBODY in control_uids: served" "$r" \
    '.config.generation > 0'
r=$(refused --reuid=$OTHER --regid=$OTHER --clear-groups)
lab_expect_eq "uid $OTHER: refused with one line" \
    '{"error":"permission denied","code":"denied"}' "$r"

# No command outlives the peer's permission: a connection of uid $NOBODY,
# served, stays open while $NOBODY leaves control_uids; its next command
# there is refused with one line and the connection ends.
lines() { [ "$(wc -l < "$LAB_DIR/held.out")" -ge "$1" ]; }
mkfifo "$LAB_DIR/held.fifo"
setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups \
    socat -t "$(egress_wait 5)" - "UNIX-CONNECT:$CTL" \
    < "$LAB_DIR/held.fifo" > "$LAB_DIR/held.out" &
held=$!
exec 8> "$LAB_DIR/held.fifo"
printf 'show status\n' >&8
lab_poll 10 lines 1 || lab_fail "no answer on the held connection"
{
	lab_config_base | sed "/^\[broker\]$/a control_uids = 0"
	lab_entry weather weather "api.weather.example, lan.weather.example"
	lab_entry radar radar "api.radar.example"
} | lab_config_install
r=$(ctl "reload")
expect_jq "reload without uid $NOBODY" "$r" '.reloaded == true'
printf 'show status\n' >&8
lab_poll 10 lines 2 || lab_fail "no second answer on the held connection"
exec 8>&-
rc=0
wait "$held" || rc=$?
lab_expect_eq "uid $NOBODY after it left control_uids: refused" \
    '{"error":"permission denied","code":"denied"}' \
    "$(sed -n 2p "$LAB_DIR/held.out")"
lab_expect_eq "and nothing more on that connection" 2 \
    "$(wc -l < "$LAB_DIR/held.out")"

lab_finish
