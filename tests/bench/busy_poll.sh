#!/bin/bash
# SPDX-License-Identifier: ISC
#
# [broker] busy_poll_us: with spinning on, requests are served as before
# (every one answered, none failed), the broker stops spinning once the
# work stops (its CPU time stays nearly flat while idle: a broker that
# kept spinning would use the whole interval), a reload that sets it to 0
# is taken, and SIGTERM still ends the broker at once with status 0.
# Loopback only (tests/bench/lab.sh); every process stopped by pid.
#
# Usage: busy_poll.sh EGRESS_BENCH EGRESSD
set -euo pipefail

BENCH=${1:?usage: busy_poll.sh EGRESS_BENCH EGRESSD}
EGRESSD=${2:?usage: busy_poll.sh EGRESS_BENCH EGRESSD}
for p in nginx openssl python3 jq; do
	command -v "$p" >/dev/null 2>&1 ||
	    { echo "SKIP: $p not installed"; exit 77; }
done
source "$(dirname "$0")/lab.sh"
lab_init
N=0
ok() { N=$((N + 1)); echo "ok $N - $*"; }
fail() { echo "not ok - $*"; exit 1; }

lab_certs
lab_nginx 1
LAB_BUSY_POLL_US=200 lab_egressd "$EGRESSD"
grep -q '^busy_poll_us = 200$' "$T/egressd/egressd.ini" ||
    fail "the generated configuration has no busy_poll_us"
U=http://127.0.0.1:$HTTP_PORT

line=$("$BENCH" -m shim -s "$EGRESS_SOCK" -c 4 -n 400 "$U/small")
[ "$(jq -r .errors <<<"$line")" = 0 ] || fail "errors while spinning: $line"
[ "$(jq -r .requests <<<"$line")" = 400 ] || fail "requests: $line"
ok "400 requests answered with busy_poll_us = 200"

# Idle: no work, so no spinning. Over 2 s a spinning broker would use
# about 200 ticks (at 100 Hz); allow a tenth of that.
HZ=$(getconf CLK_TCK)
t0=$(lab_cpu_ticks "$EGRESSD_PID")
sleep 2
t1=$(lab_cpu_ticks "$EGRESSD_PID")
[ $((t1 - t0)) -le $((HZ * 2 / 10)) ] ||
    fail "the idle broker used $((t1 - t0)) ticks in 2 s (spinning?)"
ok "idle broker does not spin ($((t1 - t0)) ticks in 2 s)"

# A reload turns it off; requests still work.
sed -i 's/^busy_poll_us = 200$/busy_poll_us = 0/' "$T/egressd/egressd.ini"
line=$("$BENCH" -m shim -s "$EGRESS_SOCK" -c 1 -n 50 "$U/small")
[ "$(jq -r .errors <<<"$line")" = 0 ] || fail "errors after reload: $line"
grep '"event":"egress.config"' "$T/egressd/egressd.log" |
    jq -e 'select(.status == "loaded" and .generation == 2)' >/dev/null ||
    fail "no reload (generation 2) logged"
ok "reload to busy_poll_us = 0 taken, requests answered"

# Spinning again, then SIGTERM mid-spin.
sed -i 's/^busy_poll_us = 0$/busy_poll_us = 1000/' "$T/egressd/egressd.ini"
"$BENCH" -m shim -s "$EGRESS_SOCK" -c 1 -n 20 "$U/small" >/dev/null
kill -TERM "$EGRESSD_PID"
rc=
for _ in $(seq "$(egress_wait 50)"); do
	if ! kill -0 "$EGRESSD_PID" 2>/dev/null; then
		set +e; wait "$EGRESSD_PID"; rc=$?; set -e
		break
	fi
	sleep 0.1
done
[ "$rc" = 0 ] || fail "egressd did not exit 0 on SIGTERM (rc '$rc')"
ok "SIGTERM while spinning: exit 0"
echo "1..$N"
