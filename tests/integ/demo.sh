#!/bin/bash
# SPDX-License-Identifier: ISC
# demo.sh SRCDIR: scripts/demo, as README.md has a new user run it, twice
# with a build folder of its own (EGRESS_DEMO_BUILD). The first run says
# "building egressd (first run only)..." before anything else, as its
# first line; the second run builds nothing new and does not say it. Each
# run exits 0 and shows the verdicts, the broker's requests, its
# decisions in `egressctl metrics` (allowed localdev, denied weather, as
# the requests before them were decided), a tcp line echo through
# egress-connect (and its denial without socket_client), curl inside egress-sandbox --net
# (as root: the granted service's body and 200, the masked message and
# 403 for a host the instance was not granted; where no network
# namespace can be made, the line saying that part is skipped) and the JSON reply to `show instance localdev`
# sent by hand with socat.
set -eu

src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

check_run() {
	local out=$1 reply
	grep -q '^egressd demo: policy verdicts for the example configuration$' \
		"$out" || fail "no verdicts"
	grep -q '^egressd demo: the broker, on loopback$' "$out" ||
		fail "the broker part did not run"
	grep -Eq '^egressd_decisions_total\{instance="localdev",[^}]*"allow"[^}]*\} [1-9]' \
		"$out" || fail "metrics: no allowed decision for localdev"
	grep -E '^egressd_decisions_total\{instance="weather",[^}]*\} [1-9]' \
		"$out" | grep -qv allow || fail "metrics: no denied decision for weather"
	# curl inside egress-sandbox --net: the granted service answers, the
	# ungranted host is the proxy's 403; where no network namespace can
	# be made (not root, or unshare refused): said to be skipped.
	if [ "$(id -u)" = 0 ] && unshare --net true 2>/dev/null; then
		[ "$(awk '/^# the granted local service, through the proxy$/ {
		    getline; getline; getline; print; getline; print; exit }' \
		    "$out" | paste -sd ' ')" = \
		    "hello from a service on 127.0.0.1, through egressd (HTTP 200)" ] ||
			fail "curl in egress-sandbox --net: no 200 from the service"
		[ "$(awk '/^# a host this instance was not granted/ {
		    getline; getline; getline; print; getline; print; exit }' \
		    "$out" | paste -sd ' ')" = \
		    "egress policy: destination not permitted for this instance (HTTP 403)" ] ||
			fail "curl in egress-sandbox --net: no 403 for the ungranted host"
	else
		grep -q '^(skipped: .*network namespace' "$out" ||
			fail "no network namespace: the sandbox part does not say it is skipped"
	fi
	# egress-connect: the line comes back over the granted tcp stream;
	# the instance without socket_client is denied (exit 10).
	[ "$(awk '/^# a tcp stream to the granted local service/ {
	    getline; getline; print; getline; print; exit }' "$out" |
	    paste -sd ' ')" = "hello over tcp (exit 0)" ] ||
		fail "egress-connect: the tcp echo did not come back"
	[ "$(awk '/^# the same stream from an instance without socket_client/ {
	    getline; getline; print; getline; print; exit }' "$out" |
	    paste -sd ' ')" = "egress-connect: denied: egress policy: destination not permitted for this instance (exit 10)" ] ||
		fail "egress-connect: the stream without socket_client was not denied"
	grep -q '^{"instance":"weather","transport":"tcp",.*"verdict":"deny","reason":"no-permission"}$' \
		"$out" || fail "no tcp decision denied for no-permission"
	reply=$(awk '/^\$ printf .show instance localdev/ { getline; print; exit }' "$out")
	jq -e . <<<"$reply" >/dev/null ||
		fail "the control socket's reply is not JSON: $reply"
	jq -e 'tostring | test("localdev")' <<<"$reply" >/dev/null ||
		fail "the reply does not name localdev: $reply"
}

EGRESS_DEMO_BUILD=$work/build "$src/scripts/demo" > "$work/first" 2>&1 ||
	{ cat "$work/first"; fail "scripts/demo, first run"; }
[ "$(grep -v "^bootstrap:" "$work/first" | head -1)" = \
	"building egressd (first run only)..." ] ||
	{ head -5 "$work/first"; fail "the first run does not say it builds"; }
check_run "$work/first"

EGRESS_DEMO_BUILD=$work/build "$src/scripts/demo" > "$work/second" 2>&1 ||
	{ cat "$work/second"; fail "scripts/demo, second run"; }
! grep -q 'first run only' "$work/second" ||
	fail "the second run says it builds"
check_run "$work/second"
sed -n '/^# its metrics/,$p' "$work/second"
echo "ok: scripts/demo, first and second run"
