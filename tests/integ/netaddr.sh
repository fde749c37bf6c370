#!/bin/bash
# SPDX-License-Identifier: ISC
# netaddr.sh PROBE: broker/netaddr follows this host's addresses. In a
# network namespace of its own (unshare -n), it starts netaddr_probe, adds
# a public-looking IPv4 and IPv6 address to lo and waits (polling, with a
# deadline) until the probe reports each one in the set and classified
# loopback (this host's own address); then removes them and waits until
# they are gone and public again. Needs root; skips loudly (exit 77)
# otherwise. EGRESS_WRAP: see wrap.sh.
set -eu
. "$(dirname "$0")/wrap.sh"

probe=$1
if [ -z "${NETADDR_IN_NS:-}" ]; then
	if [ "$(id -u)" != 0 ] || ! unshare -n true 2>/dev/null; then
		echo "SKIP: netaddr.sh needs root and unshare -n" >&2
		exit 77
	fi
	NETADDR_IN_NS=1 exec unshare -n bash "$0" "$@"
fi

v4=93.184.216.55
v6=2606:4700:10::55
ip link set lo up
out=$(mktemp)
"${EGRESS_WRAP_CMD[@]}" "$probe" "$v4" "$v6" >"$out" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -f "$out"' EXIT

fail() {
	echo "FAIL: $*" >&2
	echo "--- probe output:" >&2
	cat "$out" >&2
	exit 1
}

# Poll the probe's last line for an extended regex, up to 10 seconds.
wait_for() {
	local i
	for i in $(seq 1 $((2000 * EGRESS_WAIT_SCALE))); do
		if tail -n 1 "$out" | grep -Eq -- "$1"; then
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || fail "probe exited"
		sleep 0.005
	done
	fail "timed out waiting for /$1/"
}

# The addresses of the probe's last line, one per line.
last_addrs() {
	tail -n 1 "$out" | cut -d' ' -f3 | sed 's/^addrs=//' | tr ',' '\n'
}

wait_for "^gen=1 .* $v4=public $v6=public\$"
last_addrs | grep -qx '127.0.0.1' || fail "127.0.0.1 not in the set"
last_addrs | grep -qx '::1' || fail "::1 not in the set"

ip addr add "$v4/32" dev lo
wait_for "addrs=.*$v4.* $v4=loopback $v6=public\$"
ip -6 addr add "$v6/128" dev lo nodad
wait_for "addrs=.*$v6.* $v4=loopback $v6=loopback\$"
ip addr del "$v4/32" dev lo
wait_for " $v4=public $v6=loopback\$"
if last_addrs | grep -qx "$v4"; then fail "$v4 still listed"; fi
ip -6 addr del "$v6/128" dev lo
wait_for " $v4=public $v6=public\$"
if last_addrs | grep -qx "$v6"; then fail "$v6 still listed"; fi

# Five states after the first: each change moved the generation once.
gens=$(cut -d' ' -f1 "$out" | tr '\n' ' ')
[ "$gens" = "gen=1 gen=2 gen=3 gen=4 gen=5 " ] || fail "generations: $gens"
echo "ok: netaddr followed $v4 and $v6 on lo"
