#!/bin/bash
# SPDX-License-Identifier: ISC
#
# The metrics of a live egressd in the netns lab: [metrics] listen =
# 127.0.0.1:9464 serves /metrics over HTTP (GET and HEAD; 404 elsewhere,
# 405 for other methods) from a CLOEXEC listening socket; the exposition,
# through HTTP and through `egressctl metrics`, passes `promtool check
# metrics` without a lint problem and Python's prometheus_client parser,
# and holds egressd_build_info, the configuration state, decisions by
# instance, verdict and reason, and the process metrics; a broken file
# shows as egressd_config_valid 0 and one more reload failure (the idle
# re-check, no request needed), a fixed one as valid again with a newer
# success timestamp; a changed listen re-binds at reload; a listen that
# is not loopback is a configuration error with file:line. Needs root
# (skips with 77 otherwise), curl, promtool and python3-prometheus-client.
set -euo pipefail
. "$(dirname "$0")/lab/lab.sh"
lab_init
lab_need_bins
PY=/usr/bin/python3
command -v curl >/dev/null || lab_fail "missing curl"
command -v promtool >/dev/null ||
    lab_fail "missing promtool (scripts/bootstrap installs prometheus)"
"$PY" -c 'import prometheus_client' 2>/dev/null ||
    lab_fail "missing python3-prometheus-client (scripts/bootstrap)"
[ -n "${EGRESSCTL:-}" ] || lab_fail "set EGRESSCTL to the built egressctl"
lab_up

M=$LAB_DIR/metrics

config()
{
	local listen=$1
	lab_config_base
	lab_entry weather weather "api.weather.example, lan.weather.example"
	printf '\n[metrics]\nlisten = %s\n' "$listen"
}

# scrape PORT [curl options]: GET /metrics inside the broker namespace.
scrape()
{
	local port=$1
	shift
	lab_ns_b curl -sS --max-time "$(egress_wait 10)" "$@" \
	    "http://127.0.0.1:$port/metrics"
}

serves() { scrape "$1" -o /dev/null 2>/dev/null; }
refuses() { ! serves "$1"; }

# sample NAME FILE: the value of the sample line NAME (exact, with labels).
sample() { awk -v n="$1" '$1 == n { print $2 }' "$2"; }

mkdir -p "$M"
lab_dns_set api.weather.example="$LAB_PUB4" lan.weather.example="$LAB_PRIV4"
config 127.0.0.1:9464 | lab_config_install
lab_egressd_start weather
lab_poll 10 serves 9464 || lab_fail "nothing serves 127.0.0.1:9464"
lab_ok "[metrics] listen = 127.0.0.1:9464 serves /metrics"

lab_fetch weather http://api.weather.example/small
lab_expect_fetch_ok
lab_fetch weather http://lan.weather.example/small
lab_expect_fetch_error denied

# ---- HTTP ---------------------------------------------------------------
scrape 9464 -D "$M/head.txt" -o "$M/http.txt"
grep -qi '^Content-Type: text/plain; version=0.0.4; charset=utf-8' \
    "$M/head.txt" || lab_fail "content type: $(cat "$M/head.txt")"
lab_ok "GET /metrics: 200, text/plain; version=0.0.4"
code() { lab_ns_b curl -s -o /dev/null -w '%{http_code}' "$@"; }
lab_expect_eq "HEAD /metrics" 200 "$(code -I http://127.0.0.1:9464/metrics)"
lab_expect_eq "GET /" 404 "$(code http://127.0.0.1:9464/)"
lab_expect_eq "POST /metrics" 405 \
    "$(code -X POST -d x http://127.0.0.1:9464/metrics)"

# The listening socket is CLOEXEC: find it by inode, read its flags.
pid=$(lab_egressd_pid)
ino=$(lab_ns_b awk '$2 ~ /^0100007F:24F8$/ && $4 == "0A" { print $10 }' \
    /proc/net/tcp)
[ -n "$ino" ] || lab_fail "no listening socket on 127.0.0.1:9464"
fd=$(for f in /proc/"$pid"/fd/*; do
	if [ "$(readlink "$f")" = "socket:[$ino]" ]; then basename "$f"; fi
done | head -n 1)
[ -n "$fd" ] || lab_fail "egressd holds no fd of socket $ino (pid $pid)"
flags=$(awk '$1 == "flags:" { print $2 }' "/proc/$pid/fdinfo/$fd")
[ $((8#$flags & 8#2000000)) -ne 0 ] ||
    lab_fail "the metrics socket (fd $fd) lacks O_CLOEXEC: flags $flags"
lab_ok "the listening socket is CLOEXEC"

# ---- The exposition, through HTTP and egressctl ---------------------------
"$EGRESSCTL" metrics --socket "$LAB_DIR/run/control.sock" >"$M/ctl.txt" ||
    lab_fail "egressctl metrics failed"
for f in http ctl; do
	promtool check metrics <"$M/$f.txt" >"$M/$f.lint" 2>&1 ||
	    lab_fail "promtool check metrics ($f): $(cat "$M/$f.lint")"
	[ ! -s "$M/$f.lint" ] ||
	    lab_fail "promtool lint ($f): $(cat "$M/$f.lint")"
	! grep -q '^# EOF' "$M/$f.txt" || lab_fail "$f: OpenMetrics # EOF"
	! grep -q '^$' "$M/$f.txt" || lab_fail "$f: an empty line"
	"$PY" - "$M/$f.txt" <<'EOF' || lab_fail "prometheus_client ($f)"
import sys
from prometheus_client.parser import text_string_to_metric_families
fams = {f.name: f for f in text_string_to_metric_families(open(sys.argv[1]).read())}
def one(name, **labels):
    s = [x for f in fams.values() for x in f.samples if x.name == name and
         all(x.labels.get(k) == v for k, v in labels.items())]
    assert len(s) == 1, (name, labels, s)
    return s[0].value
assert fams["egressd_decisions"].type == "counter"
assert one("egressd_decisions_total", instance="weather", verdict="allow",
           reason="granted") == 1
assert one("egressd_decisions_total", instance="weather", verdict="deny",
           reason="private-address") == 1
assert not [x for x in fams["egressd_decisions"].samples
            if x.labels["reason"] == "allow"]
assert fams["egressd_build_info"].samples[0].labels["version"]
assert one("egressd_config_valid") == 1
assert one("egressd_config_reload_failures_total") == 0
assert one("egressd_config_last_reload_success_timestamp_seconds") > 1e9
assert one("process_open_fds") > 3
assert one("process_resident_memory_bytes") > 0
assert one("process_max_fds") >= one("process_open_fds")
assert one("process_start_time_seconds") > 1e9
assert fams["process_cpu_seconds"].type == "counter"
EOF
	lab_ok "$f: promtool (no lint problem) and prometheus_client agree"
done

# ---- Configuration state without requests -----------------------------------
t0=$(sample egressd_config_last_reload_success_timestamp_seconds \
    "$M/http.txt")
cp "$LAB_CONF" "$M/good.ini"
{ cat "$M/good.ini"; printf '\n[broker]\nno_such_key = 1\n'; } \
    >"$LAB_CONF.new"
mv "$LAB_CONF.new" "$LAB_CONF"
broken()
{
	scrape 9464 -o "$M/now.txt" 2>/dev/null &&
	    [ "$(sample egressd_config_valid "$M/now.txt")" = 0 ]
}
lab_poll 10 broken || lab_fail "egressd_config_valid stays 1 after a break"
lab_expect_eq "reload failures after the break" 1 \
    "$(sample egressd_config_reload_failures_total "$M/now.txt")"
later() { [ "$(date +%s)" -gt "$t0" ]; }
lab_poll 5 later || lab_fail "the clock does not move past $t0"
cp "$M/good.ini" "$LAB_CONF.new"
mv "$LAB_CONF.new" "$LAB_CONF"
fixed()
{
	scrape 9464 -o "$M/now.txt" 2>/dev/null &&
	    [ "$(sample egressd_config_valid "$M/now.txt")" = 1 ]
}
lab_poll 10 fixed || lab_fail "egressd_config_valid stays 0 after a fix"
t1=$(sample egressd_config_last_reload_success_timestamp_seconds \
    "$M/now.txt")
[ "$t1" -gt "$t0" ] || lab_fail "success timestamp $t1, was $t0"
lab_ok "break and fix: valid 0 then 1, one failure, a newer success"

# ---- A changed listen re-binds at reload ------------------------------------
config 127.0.0.1:9465 | lab_config_install
kill -HUP "$pid"
lab_poll 10 serves 9465 || lab_fail "127.0.0.1:9465 not served after reload"
lab_poll 10 refuses 9464 || lab_fail "127.0.0.1:9464 still served"
lab_ok "reload: listen moved from 9464 to 9465"
lab_egressd_stop

# ---- Only loopback or a Unix socket path ----------------------------------
for bad in 0.0.0.0:9464 192.0.2.1:9464 '[::]:9464' localhost:9464; do
	b=$LAB_DIR/etc/bad.ini
	config "$bad" >"$b"
	line=$(grep -n '^listen = ' "$b" | cut -d: -f1)
	rc=0
	"$EGRESSD" -c "$b" --check-config >"$M/bad.out" 2>&1 || rc=$?
	lab_expect_eq "--check-config with listen = $bad" 1 "$rc"
	grep -qF "$b:$line: [metrics] listen: '$bad'" "$M/bad.out" ||
	    lab_fail "listen = $bad: want file:line, got: $(cat "$M/bad.out")"
done
lab_ok "a listen that is not loopback is refused with file:line"
