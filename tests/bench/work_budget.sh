#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Work per request, which load cannot move: a fixed count of keep-alive
# /small requests through egressd (one stream, the shim, a loopback
# nginx) must stay within the budgets of tests/bench/budgets.txt:
#   syscalls_per_request      system calls of the broker (strace -c -f,
#                             attached for the measured requests only);
#   instructions_per_request  the broker's instructions (valgrind's
#                             callgrind, its counters zeroed after the
#                             warm-up and dumped after the measured
#                             requests).
# The budgets may only go down: lower them when a change makes the broker
# do less. Prints the measured figures. Loopback only.
#
# Usage: work_budget.sh EGRESS_BENCH EGRESSD BUDGETS
set -euo pipefail

BENCH=${1:?usage: work_budget.sh EGRESS_BENCH EGRESSD BUDGETS}
EGRESSD=${2:?usage}
BUDGETS=${3:?usage}
for p in nginx openssl python3 jq strace valgrind callgrind_annotate \
    callgrind_control; do
	command -v "$p" >/dev/null 2>&1 || { echo "FAIL: $p not installed"; exit 1; }
done
# meson test sets MALLOC_PERTURB_, which makes glibc fill every block it
# hands out or takes back: the harness's work, not the broker's.
unset MALLOC_PERTURB_
source "$(dirname "$0")/lab.sh"
lab_init
N=0
ok() { N=$((N + 1)); echo "ok $N - $*"; }
fail() { echo "not ok - $*"; exit 1; }
budget()
{
	awk -v k="$1" '$1 == k { print $2 }' "$BUDGETS"
}

lab_certs
lab_nginx 1 || fail "nginx did not start: $(cat "$T/nginx/error.log")"
U=http://127.0.0.1:$HTTP_PORT/small

# run N: N keep-alive requests on one stream, all answered.
run()
{
	local line
	line=$(timeout 300 "$BENCH" -m shim -s "$EGRESS_SOCK" -c 1 -n "$1" \
	    "$U" 2>"$T/err") || fail "egress-bench: $(cat "$T/err")"
	jq -e --argjson n "$1" '.errors == 0 and .requests == $n' \
	    <<<"$line" >/dev/null || fail "egress-bench: $line"
}

# warm EPOCH: warm-up requests until two seconds have passed since EPOCH
# (the configuration was written then): a file changed within the last
# second is "racy" and re-read on every request until that second has
# passed, which is not the steady state measured here.
warm()
{
	run 200
	while [ $(($(date +%s) - $1)) -lt 2 ]; do
		run 50
	done
}

# 1. System calls.
t0=$(date +%s)
lab_egressd "$EGRESSD" || fail "egressd did not start"
warm "$t0"
strace -c -f -q -o "$T/strace.txt" -p "$EGRESSD_PID" &
spid=$!
for _ in $(seq 100); do
	grep -q TracerPid:.*[1-9] "/proc/$EGRESSD_PID/status" && break
	sleep 0.05
done
grep -q 'TracerPid:.*[1-9]' "/proc/$EGRESSD_PID/status" ||
    fail "strace did not attach"
COUNT=2000
run "$COUNT"
kill -INT "$spid"
wait "$spid" 2>/dev/null || true
# The total line: % time, seconds, usecs/call, calls, [errors], "total".
calls=$(awk '$NF == "total" { print $4 }' "$T/strace.txt")
[ -z "${WORK_BUDGET_KEEP:-}" ] || cp "$T/strace.txt" "$WORK_BUDGET_KEEP.strace"
[ -n "$calls" ] || fail "no strace summary: $(cat "$T/strace.txt")"
per=$(awk -v c="$calls" -v n="$COUNT" 'BEGIN { printf "%.2f", c / n }')
max=$(budget syscalls_per_request)
echo "# syscalls per request: $per (budget $max; $calls in $COUNT requests)"
awk -v p="$per" -v m="$max" 'BEGIN { exit !(p <= m) }' ||
    fail "syscalls per request $per over the budget $max"
ok "syscalls per request $per within $max"
kill "$EGRESSD_PID"
wait "$EGRESSD_PID" 2>/dev/null || true

# 2. Instructions: egressd under callgrind; after the warm-up its counters
# are zeroed, COUNT requests run, and the counters are dumped: the dump
# holds the measured requests only (and whatever the loop did meanwhile).
COUNT=1000
out=$T/callgrind.out
EGRESS_WRAP_CMD=(valgrind --tool=callgrind --callgrind-out-file="$out"
    --dump-instr=no)
t0=$(date +%s)
lab_egressd "$EGRESSD" || fail "egressd under callgrind did not start"
warm "$t0"
callgrind_control -z "$EGRESSD_PID" >/dev/null || fail "callgrind_control -z"
run "$COUNT"
callgrind_control -d "$EGRESSD_PID" >/dev/null || fail "callgrind_control -d"
kill "$EGRESSD_PID"
wait "$EGRESSD_PID" 2>/dev/null || true
dump=$(ls "$out".* 2>/dev/null | sort -t. -k3 -n | head -n 1)
[ -n "$dump" ] || fail "no callgrind dump"
callgrind_annotate "$dump" >"$dump.txt" 2>/dev/null || true
[ -z "${WORK_BUDGET_KEEP:-}" ] || cp "$dump.txt" "$WORK_BUDGET_KEEP.callgrind"
ir=$(awk '/PROGRAM TOTALS/ && !done { gsub(",", "", $1); print $1; done = 1 }' \
    "$dump.txt")
[ -n "$ir" ] || fail "no callgrind total in $dump"
per=$((ir / COUNT))
max=$(budget instructions_per_request)
echo "# instructions per request: $per (budget $max; $ir in $COUNT requests)"
[ "$per" -le "$max" ] || fail "instructions per request $per over the budget $max"
ok "instructions per request $per within $max"
echo "1..$N"
