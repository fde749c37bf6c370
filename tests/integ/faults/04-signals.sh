#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Fault group 4: signals to the broker.
# SIGTERM with requests in flight (two instances, held at the upstream):
# the listening sockets go away at once, so a new egress-fetch gets
# unavailable (exit 18); an open connection gets GOAWAY and a REQUEST it
# sends after it is ignored (never reaches the upstream); the requests in
# flight, released, finish with the full response within
# [broker] drain_timeout_ms; egressd exits 0. A request still held when
# the drain timeout ends is cut (an error, never a response), its upstream
# connection closed, and egressd still exits 0.
# SIGKILL with a request in flight: the shim reports unavailable (exit 18)
# for it and for new connections; a restarted broker serves new ones.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
. "$(dirname "$0")/faults.sh"
lab_init
lab_need_bins
lab_up

lab_dns_set ok.weather.example="$LAB_PUB4"
{
	fault_config_base drain_timeout_ms=3000
	lab_entry weather weather "$LAB_PUB4, ok.weather.example"
	lab_entry radar radar ok.weather.example
} | lab_config_install
fault_badup_start
OKR=http://ok.weather.example:$FAULT_UP_PORT

# egressd_wait_exit SECONDS: wait for egressd to exit; set EXIT_RC.
egressd_wait_exit()
{
	local pid
	pid=$(lab_egressd_pid)
	lab_poll "$1" lab__gone "$pid" ||
	    lab_fail "egressd did not exit within $1 s of the signal"
	EXIT_RC=0
	wait "$pid" 2>/dev/null || EXIT_RC=$?
	unset "LAB_PID[egressd]"
}

ping_ok() { lab_badpeer ping weather; [ "$LAB_BADPEER_RC" = 0 ]; }

# --- SIGTERM, requests finish within the drain timeout.
lab_egressd_start weather radar
fault_spawn_fetch t1 weather "$FAULT_UP/hold/t1"
fault_spawn_fetch t2 radar "$OKR/hold/t2"
lab_spawn t3 "$LAB_NS_B" "$LAB_PYTHON" "$FAULT_SRC_DIR/guest.py" drain \
    "$LAB_SOCK_DIR/weather.sock" "$LAB_PUB4:$FAULT_UP_PORT" /hold/t3 /ok
fault_wait_ev '^req [0-9]+ /hold/t1$'
fault_wait_ev '^req [0-9]+ /hold/t2$'
fault_wait_ev '^req [0-9]+ /hold/t3$'
oks=$(fault_ev '^req [0-9]+ /ok$' | wc -l)
kill -TERM "$(lab_egressd_pid)"
lab_poll 5 lab__gone_sock "$LAB_SOCK_DIR/weather.sock" ||
    lab_fail "the listening socket stayed after SIGTERM"
lab_ok "the instance sockets were removed at once"
lab_fetch radar "$OKR/ok"
lab_expect_fetch_error unavailable
lab_poll 5 grep -q '^goaway 1$' "$LAB_DIR/log/t3.out" ||
    lab_fail "no GOAWAY 1 on the open connection"
lab_ok "the open connection got GOAWAY 1"
: >"$LAB_DIR/badup/t1.release"
: >"$LAB_DIR/badup/t2.release"
: >"$LAB_DIR/badup/t3.release"
fault_wait_fetch t1
fault_expect_ok_body
fault_wait_fetch t2
fault_expect_ok_body
lab_poll 10 grep -q '^closed$' "$LAB_DIR/log/t3.out" ||
    lab_fail "the drained connection was not closed"
lab_stop t3
lab_expect_eq "the raw client's frames" \
    "goaway 1;response 1 200;data 1 100;end 1;closed" \
    "$(tr '\n' ';' <"$LAB_DIR/log/t3.out" | sed 's/;$//')"
lab_expect_eq "REQUESTs after GOAWAY that reached the upstream" "$oks" \
    "$(fault_ev '^req [0-9]+ /ok$' | wc -l)"
egressd_wait_exit 10
lab_expect_eq "egressd exit status after draining" 0 "$EXIT_RC"
lab_expect_eq "stop events" "draining stopped" "$(jq -rR 'fromjson? |
    select(.event == "egress.stop") | .status' "$LAB_BROKER_LOG" |
    tail -n 2 | tr '\n' ' ' | sed 's/ $//')"

# --- SIGTERM, a request outlives the drain timeout.
FAULT_LOG_FROM=$(($(lab__lines "$LAB_BROKER_LOG") + 1))
lab_egressd_start weather radar
fault_spawn_fetch late weather "$FAULT_UP/hold/late"
fault_wait_ev '^req [0-9]+ /hold/late$'
kill -TERM "$(lab_egressd_pid)"
egressd_wait_exit 15
lab_expect_eq "egressd exit status after the drain timeout" 0 "$EXIT_RC"
fault_wait_fetch late
lab_expect_fetch_error unavailable
fault_expect_upstream_closed /hold/late
lab_expect_eq "requests of the drained run without egress.close" 0 \
    "$(fault_open_requests weather)"

# --- SIGKILL with a request in flight; then a restart.
lab_egressd_start weather radar
fault_spawn_fetch k weather "$FAULT_UP/hold/k"
fault_wait_ev '^req [0-9]+ /hold/k$'
lab_stop egressd KILL
fault_wait_fetch k
lab_expect_fetch_error unavailable
fault_expect_upstream_closed /hold/k
lab_fetch weather "$FAULT_UP/ok"
lab_expect_fetch_error unavailable
lab_ok "no broker: the shim reports unavailable"

FAULT_LOG_FROM=$(($(lab__lines "$LAB_BROKER_LOG") + 1))
lab_egressd_start weather radar
lab_poll 10 ping_ok || lab_fail "the restarted broker does not answer"
lab_fetch weather "$FAULT_UP/ok"
fault_expect_ok_body
fault_other_ok
fault_baseline
fault_expect_clean "after the restart" weather radar

lab_finish
