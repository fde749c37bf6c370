#!/usr/bin/env bash
# SPDX-License-Identifier: ISC
# Integration test: `egressctl check` resolving with c-ares against a real
# DNS server (dnsmasq). The answers include metadata, private and public
# addresses, so the whole test runs in a network namespace of its own
# (unshare -n) that has only a loopback interface: no packet can leave.
# Needs root; exits 77 (skip) otherwise.
set -uo pipefail
. "$(dirname "$0")/wrap.sh"
ctl=${1:?usage: check_resolve.sh EGRESSCTL SRCDIR}
src=${2:?usage: check_resolve.sh EGRESSCTL SRCDIR}

if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: check_resolve.sh needs root for its network namespace" >&2
	exit 77
fi
if [ -z "${EGRESS_IN_NETNS:-}" ]; then
	export EGRESS_IN_NETNS=1
	exec unshare -n -- bash "$0" "$@"
fi
command -v dnsmasq >/dev/null || { echo "FAIL: dnsmasq missing (apt-get install dnsmasq-base)"; exit 1; }

ip link set lo up
tmp=$(mktemp -d)
dpid=
cleanup() {
	[ -n "$dpid" ] && kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

cp -r "$src/tests/data/check/." "$tmp/"
cat >> "$tmp/egressd.ini" <<'INI'

[resolver]
servers = 127.0.0.1:5353
timeout_ms = 1000
INI
sed 's/^servers = .*/servers = 127.0.0.1:5399/' "$tmp/egressd.ini" > "$tmp/dead.ini"

dnsmasq --no-daemon --port=5353 --listen-address=127.0.0.1 --bind-interfaces \
	--no-resolv --no-hosts --log-queries --log-facility="$tmp/dns.log" \
	--host-record=api.weather.example,93.184.216.34,2606:2800:220:1::1 \
	--host-record=m.tiles.weather.example,169.254.169.254 \
	--host-record=p.tiles.weather.example,10.0.0.7 \
	--host-record=six.tiles.weather.example,fd00:ec2::254 \
	--host-record=mix.tiles.weather.example,93.184.216.34,10.0.0.7 \
	--host-record=lo.tiles.weather.example,127.0.0.1 \
	--local=/weather.example/ >"$tmp/dnsmasq.out" 2>&1 &
dpid=$!
# Wait until dnsmasq answers (poll, no fixed sleep).
for _ in $(seq 1 $((100 * EGRESS_WAIT_SCALE))); do
	grep -q "started" "$tmp/dns.log" 2>/dev/null && break
	"${EGRESS_WRAP_CMD[@]}" "$ctl" -c "$tmp/egressd.ini" check weather \
	    https://api.weather.example/ >/dev/null 2>&1 && break
	sleep 0.05
done

fail=0 n=0
expect() {
	local want_rc=$1 want_out=$2 want_err=$3
	shift 3
	local out rc
	out=$("${EGRESS_WRAP_CMD[@]}" "$ctl" "$@" 2>"$tmp/err")
	rc=$?
	n=$((n + 1))
	if [ "$rc" != "$want_rc" ] || [ "$out" != "$want_out" ] ||
	    { [ -n "$want_err" ] && ! grep -qF -- "$want_err" "$tmp/err"; }; then
		echo "FAIL: egressctl $*"
		echo "  want exit $want_rc, '$want_out' ${want_err:+stderr ~ '$want_err'}"
		echo "  got  exit $rc, '$out', stderr: $(cat "$tmp/err")"
		fail=$((fail + 1))
	fi
}
c=(-c "$tmp/egressd.ini" check)
expect 0 "allow api.weather.example 93.184.216.34,2606:2800:220:1::1" "" "${c[@]}" weather https://api.weather.example/
expect 0 "allow api.weather.example 93.184.216.34,2606:2800:220:1::1" "" "${c[@]}" weather https://API.weather.example./
expect 1 "deny metadata" "" "${c[@]}" weather https://m.tiles.weather.example/
expect 1 "deny metadata" "" "${c[@]}" weather https://six.tiles.weather.example/
expect 1 "deny private-address" "" "${c[@]}" weather https://p.tiles.weather.example/
expect 1 "deny private-address" "" "${c[@]}" weather https://mix.tiles.weather.example/
expect 1 "deny loopback-address" "" "${c[@]}" weather https://lo.tiles.weather.example/
expect 0 "allow lo.tiles.weather.example 127.0.0.1" "" "${c[@]}" loop https://lo.tiles.weather.example/
expect 1 "deny private-address" "" "${c[@]}" loop https://p.tiles.weather.example/
expect 1 "deny unresolvable" "" "${c[@]}" weather https://nx.tiles.weather.example/
expect 1 "deny unresolvable" "" "${c[@]}" weather https://absent.tiles.weather.example/
expect 0 "allow api.weather.example 10.0.0.7" "" "${c[@]}" --resolve api.weather.example=10.0.0.7 lan https://api.weather.example/
expect 1 "deny unresolvable" "resolving api.weather.example" -c "$tmp/dead.ini" check weather https://api.weather.example/

# The resolver asked for both families of the name, and nothing with a
# search domain appended.
a=$(grep -c 'query\[A\] api.weather.example ' "$tmp/dns.log")
aaaa=$(grep -c 'query\[AAAA\] api.weather.example ' "$tmp/dns.log")
n=$((n + 1))
if [ "$a" -lt 1 ] || [ "$aaaa" -lt 1 ] || [ "$a" != "$aaaa" ]; then
	echo "FAIL: expected paired A and AAAA queries, got A=$a AAAA=$aaaa"
	fail=$((fail + 1))
fi
n=$((n + 1))
if grep -E 'query\[[A-Z]+\] [^ ]*\.weather\.example\.[a-z]' "$tmp/dns.log"; then
	echo "FAIL: a search domain was appended"
	fail=$((fail + 1))
fi
echo "check_resolve.sh: $((n - fail)) passed, $fail failed"
[ $fail -eq 0 ]
