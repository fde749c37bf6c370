#!/usr/bin/env bash
# SPDX-License-Identifier: ISC
# config_live.sh EGRESSD EGRESSCTL SRCDIR: the running broker and its
# configuration file, with Unix sockets in a scratch folder only (no
# network). egress.start lists the refused instance and why. A file that
# breaks while the broker is idle (no request at all) is noticed by the
# idle re-check: `egressctl status` shows the error and since when, and one
# egress.config `invalid` event is logged, not one per tick; `egressctl -c
# FILE status` still reaches the broker through the broken file's
# control_socket, with a note. `egressctl reload` fails with exit 3 and
# every FILE:LINE error while the file is broken; once fixed, the idle
# re-check logs one `loaded` event, and `egressctl reload` reports the new
# generation and the refused instance. Started as `egressd -c egressd.ini`
# (relative, no --foreground) from its folder, the daemon still re-reads
# the file after it moved to /. EGRESS_WRAP: see wrap.sh; it wraps
# egressctl only, since egressd detaches here: daemon()'s parent leaves
# with _exit() and valgrind would count what it still holds as leaks.
set -uo pipefail
. "$(dirname "$0")/wrap.sh"
egressd=${1:?usage: config_live.sh EGRESSD EGRESSCTL SRCDIR}
ctl=${2:?usage: config_live.sh EGRESSD EGRESSCTL SRCDIR}
src=${3:?usage: config_live.sh EGRESSD EGRESSCTL SRCDIR}
work=$(mktemp -d /tmp/config-live.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
	[ -n "$pid" ] && for _ in $(seq 1 $((500 * EGRESS_WAIT_SCALE))); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.01
	done
	rm -rf "$work"
}
trap cleanup EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
die() { bad "$*"; echo "config_live: $pass passed, $fail failed"; exit 1; }
ctl() { "${EGRESS_WRAP_CMD[@]}" "$ctl" "$@"; }
events() { grep -c "\"event\":\"$1\".*\"status\":\"$2\"" "$work/log"; }
# wait_for SECONDS COMMAND...: poll COMMAND until it succeeds, bounded.
wait_for() {
	local n=$(($1 * 100 * EGRESS_WAIT_SCALE))
	shift
	while [ "$n" -gt 0 ]; do
		"$@" && return 0
		sleep 0.01
		n=$((n - 1))
	done
	return 1
}
status_json() { ctl -c "$C" status --json 2>"$work/st.err" >"$work/st.json"; }
status_has() { status_json && jq -e "$1" "$work/st.json" >/dev/null; }

mkdir -p "$work/cfg/packages"
cp -r "$src/examples/packages/." "$work/cfg/packages/"
cat >"$work/cfg/egressd.ini" <<INI
[plugins.security]
signature_mode = permissive
[broker]
instance_socket_dir = $work/inst
control_socket = $work/control.sock
log = $work/log
[plugins.entries.weather]
plugin = weather
manifest = packages/weather/manifest.ini
permissions = http_client
egress_hosts = api.weather.example
[plugins.entries.ghost]
plugin = ghost
manifest = packages/ghost/manifest.ini
permissions = http_client
INI
C=$work/cfg/egressd.ini
cp "$C" "$work/good.ini"

# Relative -c, detached: the daemon moves to / and must still find it.
(cd "$work/cfg" && "$egressd" -c egressd.ini 2>"$work/egressd.err" </dev/null)
rc=$?
[ "$rc" = 0 ] || die "egressd -c egressd.ini exited $rc: $(cat "$work/egressd.err")"
wait_for 10 status_has '.pid > 0' || die "the broker does not answer: $(cat "$work/st.err")"
pid=$(jq -r .pid "$work/st.json")
jq -e --arg c "$C" '.config.path == $c and .config.error == null and
    .config.generation == 1' "$work/st.json" >/dev/null && ok ||
	bad "status at start: $(cat "$work/st.json")"

# ---- egress.start names the refused instance -------------------------------
grep '"event":"egress.start"' "$work/log" | jq -e --arg c "$C:12" '
    .refused | length == 1 and .[0].instance == "ghost" and
    .[0].entry == $c and (.[0].error | test("no such manifest"))' >/dev/null &&
	ok || bad "egress.start does not list ghost and why: $(grep egress.start "$work/log")"

# ---- the file breaks while idle ---------------------------------------------
printf '[limits]\nconect_timeout_ms = 5\n' >>"$C"
wait_for 10 status_has '.config.error != null' ||
	die "the idle broker did not notice the broken file: $(cat "$work/st.json")"
jq -e '.config.error_since != null and (.config.errors | length) >= 1 and
    (.config.errors[0] | test("egressd.ini:[0-9]+:.*conect_timeout_ms"))' \
	"$work/st.json" >/dev/null && ok || bad "status while broken: $(cat "$work/st.json")"
grep -q 'note: .*egressd.ini is invalid' "$work/st.err" &&
	grep -qF "control_socket $work/control.sock is used" "$work/st.err" && ok ||
	bad "egressctl status did not say it read control_socket from the broken file: $(cat "$work/st.err")"
ctl -c "$C" status >"$work/st.txt" 2>/dev/null
grep -q '^config error: .*conect_timeout_ms.*(since [0-9T:-]*Z; serving nothing' "$work/st.txt" &&
	ok || bad "egressctl status table while broken: $(cat "$work/st.txt")"
u0=$(jq .uptime_s "$work/st.json")
# Several idle ticks later, still exactly one invalid event.
wait_for 10 status_has ".uptime_s >= $u0 + 3" || bad "uptime did not advance"
[ "$(events egress.config invalid)" = 1 ] && ok ||
	bad "$(events egress.config invalid) egress.config invalid events for one break (want 1)"
out=$(ctl -c "$C" reload 2>"$work/r.err")
rc=$?
[ "$rc" = 3 ] && grep -q 'is invalid; the broker serves nothing' "$work/r.err" &&
	grep -q 'egressd.ini:[0-9]*:.*conect_timeout_ms' "$work/r.err" && ok ||
	bad "egressctl reload of a broken file: exit $rc (want 3): $out $(cat "$work/r.err")"

# ---- fixed while idle --------------------------------------------------------
loaded0=$(events egress.config loaded)
cp "$work/good.ini" "$C.new" && mv "$C.new" "$C"
wait_for 10 status_has '.config.error == null' ||
	die "the idle broker did not notice the fix: $(cat "$work/st.json")"
jq -e '.config.error_since == null and .config.errors == [] and
    .config.generation >= 2' "$work/st.json" >/dev/null && ok ||
	bad "status after the fix: $(cat "$work/st.json")"
[ "$(events egress.config loaded)" = $((loaded0 + 1)) ] && ok ||
	bad "$(( $(events egress.config loaded) - loaded0 )) loaded events for one fix (want 1)"
grep '"event":"egress.config".*"status":"loaded"' "$work/log" | tail -1 |
	jq -e '.refused[0].instance == "ghost"' >/dev/null && ok ||
	bad "egress.config loaded does not list the refused instance"
g=$(jq .config.generation "$work/st.json")
out=$(ctl -c "$C" reload 2>"$work/r2.err")
rc=$?
[ "$rc" = 0 ] && grep -q "^reloaded: generation $((g + 1)), 2 instances$" <<<"$out" &&
	grep -q '^refused: ghost (.*egressd.ini:12): .*no such manifest' <<<"$out" && ok ||
	bad "egressctl reload: exit $rc: $out $(cat "$work/r2.err")"
ctl -c "$C" reload --json >"$work/r.json" 2>/dev/null
jq -e --argjson g "$((g + 2))" '.reloaded == true and .generation == $g' \
	"$work/r.json" >/dev/null && ok || bad "reload --json: $(cat "$work/r.json")"

echo "config_live: $pass passed, $fail failed"
[ "$fail" = 0 ]
