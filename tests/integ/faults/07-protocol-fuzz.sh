#!/bin/bash
# SPDX-License-Identifier: ISC
#
# A protocol-level fuzzer drives a running
# broker through its real instance sockets. Three raw clients (guest.py
# fuzz: random bytes, truncated, oversized, field-mutated and reordered
# frames, broker-only types, reused and idle stream ids, bad windows; a
# seeded generator, FAULT_FUZZ_SEED replays a run) hammer both instances,
# while valid requests from other clients of the same instances run in a
# loop and a request of the fuzzed instance is held open at the upstream.
# Every valid request must succeed with the full body, the held one too;
# the broker never exits, its log stays JSON lines, and at the end no
# descriptor or lease is left behind.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
. "$(dirname "$0")/faults.sh"
lab_init
lab_need_bins
lab_up

SEED=${FAULT_FUZZ_SEED:-$(( $(date +%s) % 100000 ))}
ITER=${FAULT_FUZZ_ITERATIONS:-120}
lab_log "fuzz seed $SEED (FAULT_FUZZ_SEED=$SEED replays), $ITER connections each"
lab_dns_set ok.weather.example="$LAB_PUB4"
{
	fault_config_base first_byte_timeout_ms=120000
	lab_entry weather weather "$LAB_PUB4, ok.weather.example"
	lab_entry radar radar ok.weather.example
} | lab_config_install
fault_badup_start
lab_egressd_start weather radar
lab_fetch weather "$FAULT_UP/ok"
fault_expect_ok_body
fault_other_ok
fault_baseline

fault_spawn_fetch held weather "$FAULT_UP/hold/held"
fault_wait_ev '^req [0-9]+ /hold/held$'
fault_loader w weather "$FAULT_UP/ok"
fault_loader r radar "$FAULT_OK_URL"
i=0
for inst in weather weather radar; do
	i=$((i + 1))
	lab_spawn "fuzz$i" "$LAB_NS_B" "$LAB_PYTHON" \
	    "$FAULT_SRC_DIR/guest.py" fuzz "$LAB_SOCK_DIR/$inst.sock" \
	    "$((SEED + i))" "$ITER"
done
for i in 1 2 3; do
	lab_poll 120 lab__gone "${LAB_PID[fuzz$i]}" ||
	    lab_fail "fuzzer $i did not finish"
	lab_stop "fuzz$i"
	lab_expect_eq "fuzzer $i exit status" 0 "$LAB_STOP_RC"
	lab_log "$(cat "$LAB_DIR/log/fuzz$i.out")"
	lab_is_running egressd || lab_fail "egressd died under fuzzer $i"
done
: >"$LAB_DIR/load/stop"
for l in w r; do
	lab_poll 40 lab__gone "${LAB_PID[load-$l]}" ||
	    lab_fail "loader $l did not stop"
	lab_stop "load-$l"
	n=$(lab__lines "$LAB_DIR/load/$l")
	[ "$n" -ge 1 ] || lab_fail "loader $l made no request"
	lab_expect_eq "loader $l: $n valid requests, failures" 0 \
	    "$(grep -cv '^0 ok$' "$LAB_DIR/load/$l" || true)"
done
: >"$LAB_DIR/badup/held.release"
fault_wait_fetch held
fault_expect_ok_body
lab_ok "the request held across the fuzzing completed"
fault_expect_clean "after fuzzing" weather radar

# Exactly one decision and one close per request: no close for a frame
# that never became a request. First a deterministic case (a REQUEST on a
# reused stream id, a violation), then the whole fuzzed run.
fault_log_mark
FAULT_LOG_FROM=$((FAULT_LOG_MARK + 1))
r=0
lab_ns_b timeout "$(egress_wait 20)" "$LAB_PYTHON" "$FAULT_SRC_DIR/guest.py" reuse \
    "$LAB_SOCK_DIR/weather.sock" "$LAB_PUB4:$FAULT_UP_PORT" /ok || r=$?
lab_expect_eq "reused stream id: the broker dropped the connection" 0 "$r"
lab_poll 5 fault__has_close_of weather || true
lab_expect_eq "reused stream id: decisions and closes of the run" "1 1" \
    "$(tail -n "+$FAULT_LOG_FROM" "$LAB_BROKER_LOG" | jq -rR 'fromjson? |
    select(.instance == "weather") | .event' | sort | uniq -c |
    awk '$2 == "egress.decision" { d = $1 } $2 == "egress.close" { c = $1 }
    END { print d + 0, c + 0 }')"
FAULT_LOG_FROM=1
for inst in weather radar; do
	lab_expect_eq "$inst: closes without a decision in the fuzzed run" 0 \
	    "$(fault_unpaired "$inst" egress.close | wc -l)"
done

lab_finish
