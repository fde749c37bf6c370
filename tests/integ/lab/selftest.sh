#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Self-test of the netns lab, needing none of egressd's binaries: bring the
# lab up; check that dnsmasq answers the configured records inside the
# broker namespace (and counts them), that nginx serves HTTP and HTTPS on
# every upstream address from the broker namespace, that TLS verifies with
# the test CA (and fails for the wrong name), that the broker namespace has
# no route to anything but the upstream addresses and none of them on its
# own interfaces; then bring it down and check that no namespace, process,
# mount or file is left behind. Exit 77 (skip) when not root.
set -euo pipefail
. "$(dirname "$0")/lab.sh"

lab_init
lab_up

B=$LAB_NS_B
O=$LAB_NS_O
DIR=$LAB_DIR

# --- topology
for a in $LAB_UPSTREAM4 $LAB_UPSTREAM6; do
	if lab_ns_b ip -o addr show | grep -qF " $a/"; then
		lab_fail "upstream address $a is on a broker interface"
	fi
done
lab_ok "no upstream address on the broker's interfaces"
for a in 8.8.8.8 10.0.0.8 192.168.1.1 169.254.169.253 93.184.216.35 \
    198.18.0.2; do
	if lab_ns_b ip route get "$a" >/dev/null 2>&1; then
		lab_fail "the broker namespace has a route to $a"
	fi
done
for a in 2001:4860:4860::8888 fd00:ec2::253 fd00:ffff::2 ::ffff:8.8.8.8; do
	if lab_ns_b ip -6 route get "$a" >/dev/null 2>&1; then
		lab_fail "the broker namespace has a route to $a"
	fi
done
lab_ok "no route from the broker namespace to anything else"
if lab_ns_b ip route show default | grep -q .; then
	lab_fail "a default route exists"
fi
if lab_ns_b ip -6 route show default | grep -q .; then
	lab_fail "a default IPv6 route exists"
fi
lab_ok "no default route"
for a in $LAB_UPSTREAM4 $LAB_UPSTREAM6; do
	lab_ns_b ip route get "$a" | grep -q 'dev veth-b' ||
	    lab_fail "no route to $a via veth-b"
done
lab_ok "host routes to every upstream address"
# A connect to an unrouted address fails at once (no packet leaves).
if lab_ns_b curl -s -m 3 -o /dev/null http://8.8.8.8/ 2>/dev/null; then
	lab_fail "connected to 8.8.8.8"
fi
lab_ok "connect to 8.8.8.8 fails"

# --- DNS
lab_dns_set api.weather.example="$LAB_PUB4" \
    mixed.weather.example="$LAB_PUB4,$LAB_PRIV4" \
    meta6.weather.example="$LAB_META6"
lab_mark
lab_expect_eq "A api.weather.example" "NOERROR $LAB_PUB4" \
    "$(lab_dns_query api.weather.example A | xargs)"
lab_expect_eq "AAAA api.weather.example (NODATA)" "NOERROR" \
    "$(lab_dns_query api.weather.example AAAA | xargs)"
lab_expect_eq "A mixed.weather.example" "NOERROR $LAB_PUB4 $LAB_PRIV4" \
    "$(lab_dns_query mixed.weather.example A | sort -r | xargs)"
lab_expect_eq "AAAA meta6.weather.example" "NOERROR $LAB_META6" \
    "$(lab_dns_query meta6.weather.example AAAA | xargs)"
lab_expect_eq "A nx.weather.example" "NXDOMAIN" \
    "$(lab_dns_query nx.weather.example A | xargs)"
lab_expect_eq "A www.google.com (no upstream)" "REFUSED" \
    "$(lab_dns_query www.google.com A | xargs)"
lab_expect_eq "A queries counted for api" 1 \
    "$(lab_dns_count api.weather.example A)"
lab_expect_eq "AAAA queries counted for api" 1 \
    "$(lab_dns_count api.weather.example AAAA)"
lab_expect_eq "A queries counted for mixed" 1 \
    "$(lab_dns_count mixed.weather.example A)"
# New records replace the old ones.
lab_dns_set api.weather.example="$LAB_PRIV4"
lab_expect_eq "A api.weather.example after restart" "NOERROR $LAB_PRIV4" \
    "$(lab_dns_query api.weather.example A | xargs)"
lab_expect_eq "A mixed.weather.example after restart" "NXDOMAIN" \
    "$(lab_dns_query mixed.weather.example A | xargs)"
lab_expect_eq "A queries counted for api across the restart" 2 \
    "$(lab_dns_count api.weather.example A)"

# --- rebinding DNS helper
lab_rebind_start rebind.weather.example "$LAB_PUB4" "$LAB_PRIV4"
q() {
	lab_ns_b "$LAB_PYTHON" "$LAB_SRC_DIR/dnsq.py" "$1" "$2" \
	    "$LAB_DNS_ADDR" "$LAB_REBIND_PORT" | xargs
}
lab_expect_eq "rebind: first answer" "NOERROR $LAB_PUB4" \
    "$(q rebind.weather.example A)"
lab_expect_eq "rebind: second answer" "NOERROR $LAB_PRIV4" \
    "$(q rebind.weather.example A)"
lab_expect_eq "rebind: AAAA" "NOERROR" "$(q rebind.weather.example AAAA)"
lab_expect_eq "rebind: A count" 2 \
    "$(lab_rebind_count A rebind.weather.example)"
lab_stop rebind-dns

# --- HTTP and HTTPS upstreams, reached from the broker namespace
C=(lab_ns_b curl -sS -m 10 --noproxy '*' --cacert "$LAB_CA")
lab_mark
for a in "$LAB_PUB4" "$LAB_PRIV4"; do
	"${C[@]}" -o "$DIR/out" "http://$a/small" ||
	    lab_fail "GET http://$a/small"
	cmp -s "$DIR/out" "$DIR/www/small" || lab_fail "body of $a/small"
	"${C[@]}" -o "$DIR/out" "https://$a/small" ||
	    lab_fail "GET https://$a/small (IP SAN)"
	cmp -s "$DIR/out" "$DIR/www/small" || lab_fail "body of https $a"
	lab_ok "http and https on $a"
	lab_expect_hits "$a" 2 /small
done
for a in "$LAB_META4" "[$LAB_META6]"; do
	body=$("${C[@]}" "http://$a/") || lab_fail "GET http://$a/"
	case $body in ami-id:*) ;; *) lab_fail "metadata body: $body" ;; esac
	"${C[@]}" -o /dev/null "https://$a/latest" ||
	    lab_fail "GET https://$a/"
	lab_ok "metadata server on $a"
done
lab_expect_hits "$LAB_META4" 2
lab_expect_hits "$LAB_META6" 2

# By name, pinned to an address (curl --resolve), with SNI and the CA.
lab_mark
R="api.weather.example:443:$LAB_PUB4"
out=$("${C[@]}" --resolve "$R" https://api.weather.example/host) ||
    lab_fail "https://api.weather.example/host"
lab_expect_eq "host and SNI seen by nginx" \
    "host=api.weather.example sni=api.weather.example" "$out"
lab_expect_eq "SNI in the access log" api.weather.example \
    "$(lab_sni_seen "$LAB_PUB4")"
# The wrong certificate for SNI wrongcert.weather.example fails...
R2="wrongcert.weather.example:443:$LAB_PUB4"
if "${C[@]}" -o /dev/null --resolve "$R2" \
    https://wrongcert.weather.example/small 2>"$DIR/curl.err"; then
	lab_fail "the other.example certificate verified"
fi
grep -qi 'certificate\|SSL' "$DIR/curl.err" ||
    lab_fail "not a certificate error: $(cat "$DIR/curl.err")"
lab_ok "wrong certificate name fails verification"
# ...and so does a client that does not trust the lab CA.
if lab_ns_b curl -sS -m 10 -o /dev/null --cacert /dev/null \
    --resolve "$R" https://api.weather.example/small 2>/dev/null; then
	lab_fail "verified without the lab CA"
fi
lab_ok "untrusted CA fails verification"
# Redirect and large content.
out=$("${C[@]}" -o /dev/null -w '%{http_code} %{redirect_url}' \
    "http://$LAB_PUB4/redirect")
lab_expect_eq "/redirect" "302 http://$LAB_META4/" "$out"
size=$("${C[@]}" -o /dev/null -w '%{size_download}' "http://$LAB_PUB4/large")
lab_expect_eq "/large size" $((50 * 1024 * 1024)) "$size"
lab_expect_hits "$LAB_META4" 0

# --- gate helper
lab_gate_start
lab_ns_b curl -sS -m 20 -o /dev/null -w '%{http_code} %{redirect_url}' \
    "http://$LAB_PUB4:$LAB_GATE_PORT/hold/k1?to=http://$LAB_PUB4/small" \
    >"$DIR/gate.out" &
gpid=$!
lab_gate_wait k1
[ ! -s "$DIR/gate.out" ] || lab_fail "the gate answered before release"
lab_gate_release k1
wait "$gpid" || lab_fail "curl through the gate failed"
lab_expect_eq "gate answer" "302 http://$LAB_PUB4/small" "$(cat "$DIR/gate.out")"

# --- holding a stalled reader
lab_mark
fifo=$DIR/hold/selftest.fifo
mkfifo "$fifo"
lab_spawn hold-curl "$B" sh -c 'exec "$@" >"$0"' "$fifo" \
    curl -sS --noproxy '*' "http://$LAB_PUB4/large"
exec {hfd}<"$fifo"
lab_wait_upstream_conns 80 1
lab_ok "a stalled download holds its upstream connection"
timeout 30 cat <&"$hfd" >"$DIR/held.body"
exec {hfd}<&-
wait "${LAB_PID[hold-curl]}" || lab_fail "held curl failed"
unset "LAB_PID[hold-curl]"
cmp -s "$DIR/held.body" "$DIR/www/large" || lab_fail "held body differs"
lab_ok "the held download completes once read"

# --- lab down leaves nothing behind
pids="${LAB_PID[*]}"
lab_down
for ns in "$B" "$O"; do
	! ip netns list | grep -qw "$ns" || lab_fail "namespace $ns left"
	[ ! -e "/run/netns/$ns" ] || lab_fail "/run/netns/$ns left"
	! grep -qF "$ns" /proc/self/mountinfo || lab_fail "mount of $ns left"
done
for p in $pids; do
	lab__gone "$p" || lab_fail "process $p left running"
done
[ ! -e "$DIR" ] || [ "${LAB_KEEP:-0}" = 1 ] || lab_fail "$DIR left"
lab_ok "lab down left no namespace, process, mount or folder"
