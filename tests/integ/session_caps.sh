#!/bin/bash
# SPDX-License-Identifier: ISC
#
# The per-instance session cap (SESSIONS_PER_INSTANCE, 256): a 257th
# connection to one instance is refused, the refusal is logged as one
# egress.session event (rate-limited, with a count), and the 256 held
# sessions stay served. Loopback only (tests/bench/lab.sh: a real egressd
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

# 256 sessions (the cap) plus 4: the first 256 are answered, the rest
# refused. -T bounds the wait for HELLO answers; refused ones never come.
set +e
out=$("$IDLE" -n 260 -t 1 -T 10 "$EGRESS_SOCK" 2>"$T/idle.err")
rc=$?
set -e
echo "$out" | sed 's/^/# /'
sed 's/^/# idle: /' "$T/idle.err" | head -n 5
est=$(echo "$out" | head -n 1 | jq -r '.established // empty')
[ -n "$est" ] || fail "egress-idle printed no established count (rc $rc)"
[ "$est" -eq 256 ] || fail "established $est sessions, want 256"
ok "256 sessions established on one instance, the rest refused"

for _ in $(seq 50); do
	grep -q '"event":"egress.session"' "$LOG" && break
	sleep 0.1
done
ev=$(grep '"event":"egress.session"' "$LOG" | head -n 1)
[ -n "$ev" ] || fail "no egress.session event for the refusals"
[ "$(jq -r .status <<<"$ev")" = refused ] || fail "status: $ev"
[ "$(jq -r .cap <<<"$ev")" = sessions_per_instance ] || fail "cap: $ev"
[ "$(jq -r .instance <<<"$ev")" = bench ] || fail "instance: $ev"
total=$(grep '"event":"egress.session"' "$LOG" | jq -s 'map(.refused) | add')
[ "$total" -le 4 ] && [ "$total" -ge 1 ] || fail "refused count $total"
ok "refusals logged as egress.session (cap sessions_per_instance, $total)"
kill -0 "$EGRESSD_PID" || fail "egressd died"
ok "egressd still running"
echo "1..$N"
