#!/bin/bash
# SPDX-License-Identifier: ISC
#
# The per-instance session cap (SESSIONS_PER_INSTANCE, 128): a 129th
# connection to one instance is refused, the refusals are logged as
# egress.session events (the first at once, the rest of the burst
# together a second later: every one counted), and the broker stays up. Loopback only (tests/bench/lab.sh: a real egressd
# on Unix sockets; no upstream is contacted); every process stopped by pid.
#
# Usage: session_caps.sh EGRESS_IDLE EGRESSD
set -euo pipefail

IDLE=${1:?usage: session_caps.sh EGRESS_IDLE EGRESSD}
EGRESSD=${2:?usage: session_caps.sh EGRESS_IDLE EGRESSD}
for p in python3 jq openssl; do
	command -v "$p" >/dev/null 2>&1 ||
	    { echo "SKIP: $p not installed"; exit 77; }
done
source "$(dirname "$0")/../bench/lab.sh"
lab_init
N=0
ok() { N=$((N + 1)); echo "ok $N - $*"; }
fail() { echo "not ok - $*"; exit 1; }

lab_certs		# the configuration names a CA file
lab_egressd "$EGRESSD"
LOG=$T/egressd/egressd.log

# 128 sessions (the cap) plus 4: the first 128 are answered, the rest
# refused. -T bounds the wait for HELLO answers; refused ones never come.
set +e
out=$("$IDLE" -n 132 -t 1 -T 10 "$EGRESS_SOCK" 2>"$T/idle.err")
rc=$?
set -e
echo "$out" | sed 's/^/# /'
sed 's/^/# idle: /' "$T/idle.err" | head -n 5
est=$(echo "$out" | head -n 1 | jq -r '.established // empty')
[ -n "$est" ] || fail "egress-idle printed no established count (rc $rc)"
[ "$est" -eq 128 ] || fail "established $est sessions, want 128"
ok "128 sessions established on one instance, the rest refused"

# Every refusal is counted: the batched rest arrives a second later.
total=0
for _ in $(seq "$(egress_wait 50)"); do
	total=$(grep '"event":"egress.session"' "$LOG" |
	    jq -s 'map(.refused) | add // 0')
	[ "$total" -ge 4 ] && break
	sleep 0.1
done
[ "$total" = 4 ] || fail "refusals counted in the log: $total, want 4"
ev=$(grep '"event":"egress.session"' "$LOG" | head -n 1)
[ "$(jq -r .status <<<"$ev")" = refused ] || fail "status: $ev"
[ "$(jq -r .cap <<<"$ev")" = sessions_per_instance ] || fail "cap: $ev"
[ "$(jq -r .instance <<<"$ev")" = bench ] || fail "instance: $ev"
[ "$(jq -r .refused <<<"$ev")" = 1 ] || fail "first event: $ev"
ok "refusals logged as egress.session, all 4 counted (first at once)"
kill -0 "$EGRESSD_PID" || fail "egressd died"
ok "egressd still running"
echo "1..$N"
