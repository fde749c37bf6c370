#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Fault group 6: the configuration replaced by an
# invalid file and then fixed, during load. Four loaders (two per
# instance) run egress-fetch in a bounded loop against the upstream. The
# file is broken (an unterminated section header) once requests flow, and
# fixed once a loader has seen the break. Every single request must end in
# exactly one of two ways: the full, correct response, or unavailable
# (exit 18) while the file is broken; never another error, a partial body
# or a hang. After the fix every request succeeds again. The invalid file
# is logged once, egressd never exits, every decision has its close, and
# no descriptor or lease is left behind.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
. "$(dirname "$0")/faults.sh"
lab_init
lab_need_bins
lab_up

lab_dns_set ok.weather.example="$LAB_PUB4"
config()
{
	lab_config_base
	lab_entry weather weather "$LAB_PUB4, ok.weather.example"
	lab_entry radar radar ok.weather.example
}
config | lab_config_install
fault_badup_start
lab_egressd_start weather radar
lab_fetch weather "$FAULT_UP/ok"
fault_expect_ok_body
fault_other_ok
fault_baseline
FAULT_LOG_FROM=$(($(lab__lines "$LAB_BROKER_LOG") + 1))

fault_loader w1 weather "$FAULT_UP/ok"
fault_loader w2 weather "$FAULT_UP/ok"
fault_loader r1 radar "$FAULT_OK_URL"
fault_loader r2 radar "$FAULT_OK_URL"
LOADERS="w1 w2 r1 r2"

results() { cat "$LAB_DIR"/load/w1 "$LAB_DIR"/load/w2 "$LAB_DIR"/load/r1 \
    "$LAB_DIR"/load/r2; }
results_at_least() { [ "$(results | wc -l)" -ge "$1" ]; }
unavailable_seen() { results | grep -q '^18 '; }
each_more()
{
	local l
	for l in $LOADERS; do
		[ "$(lab__lines "$LAB_DIR/load/$l")" -ge \
		    $(( ${AT[$l]} + $1 )) ] || return 1
	done
}

lab_poll 30 results_at_least 20 || lab_fail "the load did not start"
lab_ok "load is running"
{ config; printf '[plugins.entries.broken\n'; } | lab_config_install
lab_poll 30 unavailable_seen ||
    lab_fail "no request saw the broken configuration"
lab_ok "requests see the broken file as unavailable"
declare -A AT=()
for l in $LOADERS; do AT[$l]=$(lab__lines "$LAB_DIR/load/$l"); done
lab_poll 30 each_more 3 || lab_fail "the load stalled on the broken file"
lab_is_running egressd || lab_fail "egressd exited on the broken file"
config | lab_config_install
for l in $LOADERS; do AT[$l]=$(lab__lines "$LAB_DIR/load/$l"); done
lab_poll 60 each_more 6 || lab_fail "the load stalled after the fix"
: >"$LAB_DIR/load/stop"
for l in $LOADERS; do
	lab_poll 40 lab__gone "${LAB_PID[load-$l]}" ||
	    lab_fail "loader $l did not stop"
	lab_stop "load-$l"
done

total=$(results | wc -l)
lab_log "results: $(results | sort | uniq -c | tr '\n' ';')"
lab_expect_eq "requests neither a full response nor unavailable" 0 \
    "$(results | grep -cv '^0 ok$\|^18 -$' || true)"
[ "$(results | grep -c '^0 ok$')" -ge 1 ] || lab_fail "no request succeeded"
lab_ok "$total requests: each a full response or unavailable"
# After the fix (skipping the one request that may have been decided just
# before it), every request succeeded.
for l in $LOADERS; do
	lab_expect_eq "$l: failures after the fix" 0 \
	    "$(tail -n "+$(( ${AT[$l]} + 2 ))" "$LAB_DIR/load/$l" |
	    grep -cv '^0 ok$' || true)"
done
lab_expect_eq "egress.config invalid events" 1 \
    "$(tail -n "+$FAULT_LOG_FROM" "$LAB_BROKER_LOG" | jq -rR 'fromjson? |
    select(.event == "egress.config" and .status == "invalid") |
    .status' | wc -l)"
lab_expect_eq "decisions of the run" "$total" \
    "$(tail -n "+$FAULT_LOG_FROM" "$LAB_BROKER_LOG" | jq -rR 'fromjson? |
    select(.event == "egress.decision") | .request_id' | wc -l)"
fault_expect_clean "after the load" weather radar

# A new CA bundle written over the same [tls] ca_file
# path is loaded at the next reload, and the TLS connection pooled under
# the old trust is not reused. The replacement CA does not sign the lab's
# server certificate, so HTTPS must fail; restoring it must pass again.
ca=$LAB_DIR/pki/ca.crt
lab_fetch weather "https://$LAB_PUB4/small"
lab_expect_fetch_ok
cp "$ca" "$LAB_DIR/pki/ca.crt.orig"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    -nodes -keyout "$LAB_DIR/pki/rogue.key" -out "$LAB_DIR/pki/rogue.crt" \
    -days 2 -sha256 -subj "/CN=egressd lab rogue CA $$" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
ino=$(stat -c %i "$ca")
cat "$LAB_DIR/pki/rogue.crt" >"$ca"	# in place: same path, same inode
lab_expect_eq "CA rewritten in place" "$ino" "$(stat -c %i "$ca")"
config | lab_config_install		# the next request reloads
lab_fetch weather "https://$LAB_PUB4/small"
lab_expect_fetch_error tls-failed
lab_expect_close error tls-failed
cat "$LAB_DIR/pki/ca.crt.orig" >"$ca"
config | lab_config_install
lab_fetch weather "https://$LAB_PUB4/small"
lab_expect_fetch_ok
lab_expect_fetch_body_file "$LAB_DIR/www/small"

lab_finish
