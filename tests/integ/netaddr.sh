#!/bin/bash
# SPDX-License-Identifier: ISC
# netaddr.sh PROBE: broker/netaddr follows this host's addresses. In a
# network namespace of its own (unshare -n), it starts netaddr_probe, adds
# a public-looking IPv4 and IPv6 address to lo and waits (polling, with a
# deadline) until the probe reports each one in the set and classified
# loopback (this host's own address); then removes them and waits until
# they are gone and public again. Then the same for local routes, which
# deliver to this host without any interface address: an AnyIP route on
# lo (IPv4 and IPv6, local table) and one in another table. Needs root;
# skips loudly (exit 77) otherwise. EGRESS_WRAP: see wrap.sh.
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
any4=9.9.9.9
any6=2a00:1450::77
tbl4=9.9.8.1
"${EGRESS_WRAP_CMD[@]}" "$probe" "$v4" "$v6" "$any4" "$any6" "$tbl4" \
    >"$out" 2>&1 &
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

wait_for "^gen=1 .* $v4=public $v6=public "
last_addrs | grep -qx '127.0.0.1' || fail "127.0.0.1 not in the set"
last_addrs | grep -qx '::1' || fail "::1 not in the set"

ip addr add "$v4/32" dev lo
wait_for "addrs=.*$v4.* $v4=loopback $v6=public "
ip -6 addr add "$v6/128" dev lo nodad
wait_for "addrs=.*$v6.* $v4=loopback $v6=loopback "
ip addr del "$v4/32" dev lo
wait_for " $v4=public $v6=loopback "
if last_addrs | grep -qx "$v4"; then fail "$v4 still listed"; fi
ip -6 addr del "$v6/128" dev lo
wait_for " $v4=public $v6=public "
if last_addrs | grep -qx "$v6"; then fail "$v6 still listed"; fi

# Local routes: no interface address, yet delivered here.
wait_for " $any4=public $any6=public $tbl4=public\$"
ip route add local 9.9.9.0/24 dev lo
wait_for " $any4=loopback $any6=public $tbl4=public\$"
ip -6 route add local 2a00:1450::/64 dev lo
wait_for " $any4=loopback $any6=loopback $tbl4=public\$"
ip route add local 9.9.8.0/24 dev lo table 100
wait_for " $any4=loopback $any6=loopback $tbl4=loopback\$"
ip route del local 9.9.9.0/24 dev lo
ip -6 route del local 2a00:1450::/64 dev lo
ip route del local 9.9.8.0/24 dev lo table 100
wait_for " $any4=public $any6=public $tbl4=public\$"

# The generation moves only when the set does: no two states in a row
# are the same, and it only grows.
awk '{ g = substr($1, 5) + 0; $1 = ""
	if (NR > 1 && (g <= pg || $0 == prev)) { print "line " NR; exit 1 }
	pg = g; prev = $0 }' "$out" || fail "a generation moved without a change"

# A re-read that fails leaves the set unknown, never the old one: with
# every netlink request refused after the first read, the next change
# makes the probe report "unknown".
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null || true
NETADDR_PROBE_NOSEND=1 "${EGRESS_WRAP_CMD[@]}" "$probe" "$v4" >"$out" 2>&1 &
pid=$!
wait_for "^gen=1 .* nets=[0-9]+ $v4=public\$"
if tail -n 1 "$out" | grep -q " unknown"; then fail "unknown at start"; fi
ip addr add "$v4/32" dev lo
wait_for " unknown nets=0 $v4=public\$"
ip addr del "$v4/32" dev lo

echo "ok: netaddr followed $v4 and $v6 on lo, and local routes; a failed re-read is unknown"
