#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Work per request, which load cannot move: a fixed count of keep-alive
# requests through egressd (one stream or connection, a loopback nginx),
# of /small (a few bytes) and of /large (1 MiB), must stay within the
# budgets of tests/bench/budgets.txt, for each way in: the shim (an
# instance socket) and the proxy front (the instance's proxy_listen port,
# absolute-form requests with its token); the /large keys start with
# large_ (after proxy_); and HTTPS /small requests through a CONNECT
# tunnel of the proxy front (tunnel_ keys: the broker only relays the
# TLS bytes, the client does the TLS):
#   syscalls_per_request          system calls of the broker (strace -c
#   proxy_syscalls_per_request    -f, attached for the measured requests
#                                 only);
#   instructions_per_request      the broker's instructions (valgrind's
#   proxy_instructions_per_request callgrind, its counters zeroed after
#                                 the warm-up and dumped after the
#                                 measured requests).
# The budgets may only go down: lower them when a change makes the broker
# do less. The broker runs with adaptive_poll_us = 0: the polls of that
# setting are bounded by time, not by requests. Prints the measured
# figures. Loopback only.
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
U=http://127.0.0.1:$HTTP_PORT

# For the proxy front only (its token file is one more file a request
# checks), the instance listens on a port of its own with a token.
PROXY_PORT=$(lab_free_port)
LAB_PROXY_TOKEN=budget-proxy-token-0123456789

# start WAY [WRAP...]: egressd configured for WAY, behind WRAP.
start()
{
	local way=$1

	shift
	LAB_PROXY_PORT=
	[ "$way" = shim ] || LAB_PROXY_PORT=$PROXY_PORT
	# shellcheck disable=SC2034 # read by lab_egressd (lab.sh)
	EGRESS_WRAP_CMD=("$@")
	# Without the adaptive poll (broker/spin.h): its epoll_waits and
	# instructions are bounded by time, not by requests, and the pace
	# strace and callgrind set would decide how many there are.
	LAB_ADAPTIVE_POLL_US=0 lab_egressd "$EGRESSD"
}

# run WAY N [PATH]: N keep-alive requests for PATH (default /small) on
# one stream (shim) or one client connection (proxy), all answered in
# full.
run()
{
	local line args=(-m shim -s "$EGRESS_SOCK") path=${3:-/small} size
	local url=$U$path

	[ "$1" = shim ] || args=(-m proxy -x "127.0.0.1:$LAB_PROXY_PORT"
	    -a "bench:$LAB_PROXY_TOKEN")
	if [ "$1" = tunnel ]; then
		args+=(--cacert "$T/ca.crt")
		url=https://127.0.0.1:$HTTPS_PORT$path
	fi
	size=$(stat -c %s "$T/www$path") || fail "no $T/www$path"
	line=$(timeout 300 "$BENCH" "${args[@]}" -c 1 -n "$2" "$url" \
	    2>"$T/err") || fail "egress-bench ($1): $(cat "$T/err")"
	jq -e --argjson n "$2" --argjson s "$size" '.errors == 0 and
	    .requests == $n and .non2xx == 0 and .bytes == $n * $s' \
	    <<<"$line" >/dev/null || fail "egress-bench ($1 $path): $line"
}

# warm WAY EPOCH: warm-up requests until two seconds have passed since
# EPOCH (the configuration was written then): a file changed within the
# last second is "racy" and re-read on every request until that second
# has passed, which is not the steady state measured here.
warm()
{
	run "$1" 200
	while [ $(($(date +%s) - $2)) -lt 2 ]; do
		run "$1" 50
	done
}

# The budget's key for WAY's figure NAME at PATH.
key()
{
	local k=$2

	[ "$3" = /small ] || k=${3#/}_$k
	case $1 in
	shim) echo "$k" ;;
	*) echo "$1_$k" ;;
	esac
}

# How many requests each measurement makes of PATH.
count()
{
	case $1 in
	/small) echo "$2" ;;
	*) echo 200 ;;
	esac
}

# strace_round WAY PATH COUNT: the broker's system calls in COUNT
# requests of PATH, strace attached for them only, into ROUND_CALLS.
strace_round()
{
	local spid calls

	strace -c -f -q -o "$T/strace.txt" -p "$EGRESSD_PID" &
	spid=$!
	for _ in $(seq 100); do
		grep -q 'TracerPid:.*[1-9]' "/proc/$EGRESSD_PID/status" && break
		sleep 0.05
	done
	grep -q 'TracerPid:.*[1-9]' "/proc/$EGRESSD_PID/status" ||
	    fail "strace did not attach"
	run "$1" "$3" "$2"
	kill -INT "$spid"
	wait "$spid" 2>/dev/null || true
	# Wait until the tracer let go, so the next round can attach.
	for _ in $(seq 100); do
		grep -q 'TracerPid:.*[1-9]' "/proc/$EGRESSD_PID/status" || break
		sleep 0.05
	done
	# The total line: % time, seconds, usecs/call, calls, [errors], "total".
	calls=$(awk '$NF == "total" { print $4 }' "$T/strace.txt")
	[ -z "${WORK_BUDGET_KEEP:-}" ] ||
	    cp "$T/strace.txt" "$WORK_BUDGET_KEEP.$1${2//\//.}.strace"
	[ -n "$calls" ] || fail "no strace summary: $(cat "$T/strace.txt")"
	ROUND_CALLS=$calls
}

# syscalls WAY PATH: the broker's system calls per request. A 1 MiB body
# is read in as many calls as the bytes arrive in, and load on the
# machine splits its arrival further (never joins it): the lowest of
# three rounds is the figure, as the work of the code itself.
syscalls()
{
	local t0 calls c per max count rounds=1 i

	count=$(count "$2" 2000)
	[ "$2" = /small ] || rounds=3
	t0=$(date +%s)
	start "$1" || fail "egressd did not start"
	warm "$1" "$t0"
	calls=
	for i in $(seq "$rounds"); do
		strace_round "$1" "$2" "$count"
		c=$ROUND_CALLS
		[ "$rounds" = 1 ] ||
		    echo "# $1 $2: round $i: $c system calls in $count requests"
		[ -n "$calls" ] && [ "$calls" -le "$c" ] || calls=$c
	done
	per=$(awk -v c="$calls" -v n="$count" 'BEGIN { printf "%.2f", c / n }')
	max=$(budget "$(key "$1" syscalls_per_request "$2")")
	[ -n "$max" ] || fail "no budget $(key "$1" syscalls_per_request "$2")"
	echo "# $1 $2: syscalls per request: $per (budget $max;" \
	    "$calls in $count requests)"
	awk -v p="$per" -v m="$max" 'BEGIN { exit !(p <= m) }' ||
	    fail "$1 $2: syscalls per request $per over the budget $max"
	ok "$1 $2: syscalls per request $per within $max"
	kill "$EGRESSD_PID"
	wait "$EGRESSD_PID" 2>/dev/null || true
}

# instructions WAY PATH: egressd under callgrind; after the warm-up its
# counters are zeroed, the measured requests run, and the counters are
# dumped: the dump holds those requests only (and whatever the loop did
# meanwhile).
instructions()
{
	local t0 out dump ir per max count

	count=$(count "$2" 1000)
	out=$T/callgrind.$1${2//\//.}.out
	t0=$(date +%s)
	start "$1" valgrind --tool=callgrind --callgrind-out-file="$out" \
	    --dump-instr=no || fail "egressd under callgrind did not start"
	warm "$1" "$t0"
	callgrind_control -z "$EGRESSD_PID" >/dev/null ||
	    fail "callgrind_control -z"
	run "$1" "$count" "$2"
	callgrind_control -d "$EGRESSD_PID" >/dev/null ||
	    fail "callgrind_control -d"
	kill "$EGRESSD_PID"
	wait "$EGRESSD_PID" 2>/dev/null || true
	dump=$(ls "$out".* 2>/dev/null | sort -V | head -n 1)
	[ -n "$dump" ] || fail "no callgrind dump"
	callgrind_annotate "$dump" >"$dump.txt" 2>/dev/null || true
	[ -z "${WORK_BUDGET_KEEP:-}" ] ||
	    cp "$dump.txt" "$WORK_BUDGET_KEEP.$1${2//\//.}.callgrind"
	ir=$(awk '/PROGRAM TOTALS/ && !done { gsub(",", "", $1); print $1; done = 1 }' \
	    "$dump.txt")
	[ -n "$ir" ] || fail "no callgrind total in $dump"
	per=$((ir / count))
	max=$(budget "$(key "$1" instructions_per_request "$2")")
	[ -n "$max" ] ||
	    fail "no budget $(key "$1" instructions_per_request "$2")"
	echo "# $1 $2: instructions per request: $per (budget $max;" \
	    "$ir in $count requests)"
	[ "$per" -le "$max" ] ||
	    fail "$1 $2: instructions per request $per over the budget $max"
	ok "$1 $2: instructions per request $per within $max"
}

for way in shim proxy; do
	for path in /small /large; do
		syscalls "$way" "$path"
		instructions "$way" "$path"
	done
done
syscalls tunnel /small
instructions tunnel /small
echo "1..$N"
