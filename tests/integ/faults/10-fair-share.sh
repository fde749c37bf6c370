#!/bin/bash
# SPDX-License-Identifier: ISC
#
# No instance starves the others of a shared pool. Eight attacking
# instances of one plugin flood, in turn: never-answering lookups (each
# up to its per-instance maximum), sessions, PINGs without reading the
# PONGs (the memory budget: [broker] memory_max = 64M), slow upstreams
# that never answer, TLS handshakes that never finish; then, with the
# broker restarted under RLIMIT_NOFILE 512 (an upstream-connection share
# of 224) and logging into a FIFO whose reader is stopped, upstream
# connections held by upstreams that never answer, and a log flood of
# cheap denials. Meanwhile a victim instance of another plugin makes
# ordinary requests: every one must succeed, the attack must have been
# refused or held back somewhere (it really contended), no event is
# lost, and the broker's RSS stays within its warmed-up size plus the
# memory budget. The victim's latency (p50/p99 of whole egress-fetch
# runs) is printed for the record in docs/reliability.md, not asserted.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
. "$(dirname "$0")/faults.sh"
lab_init
lab_need_bins
lab_up

ATTACKERS="a1 a2 a3 a4 a5 a6 a7 a8"
{
	MAX_CONN=64 DNS_PORT=$FAULT_DNS_PORT \
	    fault_config_base timeout_ms=60000 connect_timeout_ms=30000 |
	    sed "/^\[broker\]/a memory_max = 64M"
	for a in $ATTACKERS; do
		lab_entry "$a" weather "*.weather.example, $LAB_PUB4"
	done
	lab_entry victim radar "*.weather.example"
} | lab_config_install
fault_badup_start
fault_dns_start
# shellcheck disable=SC2086
lab_egressd_start $ATTACKERS victim
ok_url() { printf 'http://ok.weather.example:%s/ok' "$FAULT_UP_PORT"; }
sock() { printf '%s/%s.sock' "$LAB_SOCK_DIR" "$1"; }

# victim_round LABEL N [URL]: N sequential victim fetches (of /ok, or
# URL); all must succeed.
# Prints "LABEL: N/N ok, p50 X ms, p99 Y ms".
victim_round()
{
	local label=$1 n=$2 url=${3:-$(ok_url)} i t0 t1 ms=() okc=0
	for ((i = 0; i < n; i++)); do
		t0=$(date +%s%N)
		lab_fetch victim "$url"
		t1=$(date +%s%N)
		if [ "$LAB_FETCH_RC" = 0 ]; then
			okc=$((okc + 1))
		else
			lab_log "$label: victim fetch $i failed: $LAB_FETCH_ERR" \
			    "(UDP datagrams dropped so far: $(fault_udp_drops))"
		fi
		ms+=($(((t1 - t0) / 1000000)))
	done
	mapfile -t ms < <(printf '%s\n' "${ms[@]}" | sort -n)
	lab_log "$label: victim $okc/$n ok, p50 ${ms[$((n / 2))]} ms," \
	    "p99 ${ms[$(((n * 99 + 99) / 100 - 1))]} ms," \
	    "broker RSS $(lab_egressd_rss_kb) KiB"
	lab_expect_eq "$label: victim requests that succeeded" "$n/$n" \
	    "$okc/$n"
}

victim_round unloaded 20
victim_round unloaded-https 20 https://api.weather.example/small
base_rss=$(lab_egressd_rss_kb)

# 1. Lookups that never answer: each attacker holds as many as it may.
for a in $ATTACKERS; do
	lab_spawn "dns-$a" "$LAB_NS_B" "$LAB_PYTHON" "$FAULT_SRC_DIR/guest.py" \
	    hold "$(sock "$a")" hang.weather.example /x 200
done
for a in $ATTACKERS; do
	lab_poll 20 test -s "$LAB_DIR/log/dns-$a.out" ||
	    lab_fail "attacker $a never finished sending its lookups"
done
refused=$(cat "$LAB_DIR"/log/dns-a*.out | awk '$1 == "refused" { s += $2 }
    END { print s + 0 }')
[ "$refused" -gt 0 ] || lab_fail "no attacker lookup was refused: no contention"
lab_ok "attackers had $refused lookups refused (budget-exhausted)"
# The burst of lookups must reach the fault DNS server whole: a datagram
# lost there would be a victim's lookup waiting for c-ares to resend it.
lab_expect_eq "UDP datagrams dropped for a full receive buffer" 0 \
    "$(fault_udp_drops)"
victim_round lookups 20
for a in $ATTACKERS; do lab_stop "dns-$a"; done

# 2. Sessions: every attacker opens more than it may keep.
for a in $ATTACKERS; do
	lab_spawn "ses-$a" "$LAB_NS_B" "$LAB_PYTHON" "$FAULT_SRC_DIR/guest.py" \
	    conns "$(sock "$a")" 150
done
for a in $ATTACKERS; do
	lab_poll 30 grep -q '^answered' "$LAB_DIR/log/ses-$a.out" ||
	    lab_fail "attacker $a: its connections were never answered"
done
victim_round sessions 20
for a in $ATTACKERS; do lab_stop "ses-$a"; done

# 3. PINGs without reading: output the guest never takes. Eight flooders
# per attacker; two under valgrind, where the broker answers PINGs tens of
# times slower and sixteen flooders take minutes to fill their output
# before the stall clock can even start (what is checked, that each one
# is dropped, is the same).
flooders="1 2 3 4 5 6 7 8"
[ "${#EGRESS_WRAP_CMD[@]}" -eq 0 ] || flooders="1 2"
flood_t0=$SECONDS
for a in a1 a2; do
	for k in $flooders; do
		lab_spawn "ping-$a-$k" "$LAB_NS_B" "$LAB_PYTHON" \
		    "$FAULT_SRC_DIR/guest.py" pingflood "$(sock "$a")" 400000
	done
done
peak=0
fault__pingers_closed()
{
	local f rss
	rss=$(lab_egressd_rss_kb)
	[ "$rss" -le "$peak" ] || peak=$rss
	for f in "$LAB_DIR"/log/ping-*.out; do
		grep -q '^closed' "$f" || return 1
	done
}
victim_round pings 20
lab_poll 60 fault__pingers_closed ||
    lab_fail "a guest that sends without reading was never dropped" \
    "($((SECONDS - flood_t0)) s; each flooder's output:" \
    "$(for f in "$LAB_DIR"/log/ping-*.out; do
	printf '%s=%s ' "$(basename "$f" .out)" "$(tr '\n' , <"$f")"
    done))"
lab_ok "every PING flooder was dropped"
lab_log "pings: the last flooder dropped $((SECONDS - flood_t0)) s after the flood began"
lab_log "pings: broker RSS peak $peak KiB (warmed up $base_rss KiB)"
# Under AddressSanitizer (its quarantine keeps freed memory) or valgrind
# the RSS is theirs as much as the broker's: bounded only without them.
# ldd's output is read whole first: under pipefail, a grep -q that exits
# at the first match can kill ldd with SIGPIPE and fail the test.
libs=$(ldd "$EGRESSD" 2>/dev/null) || libs=
if [[ $libs == *libasan* ]] ||
    [ "${#EGRESS_WRAP_CMD[@]}" -gt 0 ]; then
	lab_ok "RSS not bounded under a sanitizer or valgrind (peak $peak KiB)"
else
	[ "$peak" -le $((base_rss + 64 * 1024 + 16 * 1024)) ] ||
	    lab_fail "RSS peak $peak KiB over the warmed-up $base_rss KiB" \
	    "plus the budget"
	lab_ok "RSS stayed within the memory budget"
fi
for a in a1 a2; do
	for k in 1 2 3 4 5 6 7 8; do lab_stop "ping-$a-$k"; done
done

# 4. Slow upstreams: requests the upstream holds without answering (to
# the upstream's address, as the attackers' lookups of step 1 still hold
# their share of the resolver until c-ares gives up on them).
fault__held() { [ "$(fault_ev '^req [0-9]+ /hold/never-' | wc -l)" -ge "$1" ]; }
for a in $ATTACKERS; do
	for k in 1 2 3 4; do
		fault_spawn_fetch "slow-$a-$k" "$a" \
		    "http://$LAB_PUB4:$FAULT_UP_PORT/hold/never-$a-$k"
	done
done
lab_poll 20 fault__held 32 || lab_fail "the slow requests never reached the upstream"
victim_round slow-upstreams 20
for a in $ATTACKERS; do
	for k in 1 2 3 4; do lab_stop "slow-$a-$k"; done
done

# 5. TLS handshakes the server never answers (it waits for an HTTP head):
# each attacker starts as many as its connection budget allows, more in
# all than the handshake share holds; wait (bounded) until the broker
# refused one for the share (an allowed request closed budget-exhausted).
fault__tls_refused()
{
	[ "$(lab_events egress.close | jq -r 'select(.error ==
	    "budget-exhausted") | .request_id' | wc -l)" -ge 1 ]
}
lab_mark
for a in $ATTACKERS; do
	lab_spawn "tls-$a" "$LAB_NS_B" "$LAB_PYTHON" "$FAULT_SRC_DIR/guest.py" \
	    hold "$(sock "$a")" "$LAB_PUB4:$FAULT_UP_PORT" /x 64 https
done
for a in $ATTACKERS; do
	lab_poll 20 test -s "$LAB_DIR/log/tls-$a.out" ||
	    lab_fail "attacker $a never finished starting its handshakes"
done
lab_poll 60 fault__tls_refused ||
    lab_fail "no attacker handshake was refused: no contention"
refused=$(lab_events egress.close | jq -r 'select(.error ==
    "budget-exhausted") | .request_id' | wc -l)
lab_ok "attackers had $refused handshakes refused (budget-exhausted)"
victim_round tls-handshakes 20 https://api.weather.example/small
for a in $ATTACKERS; do lab_stop "tls-$a"; done

# The broker again, under RLIMIT_NOFILE 512 (upstream connections: (512 -
# 64) / 2 = 224 in all, 4 guaranteed per instance) and logging into a
# FIFO that a cat copies to the usual log file (stopped with SIGSTOP, it
# is a log sink that takes nothing).
lab_egressd_stop
fifo=$LAB_DIR/egressd.fifo
mkfifo "$fifo"
{
	MAX_CONN=64 DNS_PORT=$FAULT_DNS_PORT \
	    fault_config_base timeout_ms=60000 connect_timeout_ms=30000 \
	    "log=$fifo" |
	    sed "/^\[broker\]/a memory_max = 64M"
	for a in $ATTACKERS; do
		lab_entry "$a" weather "*.weather.example, $LAB_PUB4"
	done
	lab_entry victim radar "*.weather.example"
} | lab_config_install
# shellcheck disable=SC2016 # sh expands them
lab_spawn logpump - sh -c 'exec cat "$0" >>"$1"' "$fifo" "$LAB_BROKER_LOG"
# shellcheck disable=SC2034 # lab_egressd_start runs it
LAB_EGRESSD_WRAP=(prlimit --nofile=512:512 "${EGRESS_WRAP_CMD[@]}")
# shellcheck disable=SC2086
lab_egressd_start $ATTACKERS victim
victim_round restarted 20

# 6. Upstream connections: every attacker asks for its whole connection
# budget (64) from an upstream that never answers (512 in all, more than
# the descriptors allow); the share refuses them before the descriptors
# run out (no request fails connect-failed) and keeps the victim's 4.
fault__stalled() { [ "$(fault_ev '^req [0-9]+ /stall-head' | wc -l)" -ge "$1" ]; }
# log_from LINE EVENT: the EVENT objects of the broker's log from line
# LINE on (lab_fetch moves the mark of lab_events).
log_from()
{
	tail -n "+$1" "$LAB_BROKER_LOG" |
	    jq -cR --arg e "$2" 'fromjson? | select(.event == $e)'
}
log_next_line() { echo $(($(wc -l <"$LAB_BROKER_LOG") + 1)); }
fault__victim_closed()
{
	[ "$(log_from "$from" egress.close | jq -r 'select(.instance ==
	    "victim") | .request_id' | wc -l)" -ge "$1" ]
}
from=$(log_next_line)
for a in $ATTACKERS; do
	lab_spawn "up-$a" "$LAB_NS_B" "$LAB_PYTHON" "$FAULT_SRC_DIR/guest.py" \
	    hold "$(sock "$a")" "$LAB_PUB4:$FAULT_UP_PORT" /stall-head 64
done
for a in $ATTACKERS; do
	lab_poll 30 test -s "$LAB_DIR/log/up-$a.out" ||
	    lab_fail "attacker $a never finished asking for connections"
done
lab_poll 30 fault__stalled 200 ||
    lab_fail "the attackers' connections never reached the upstream"
victim_round upstream-connections 20
lab_poll 20 fault__victim_closed 20 ||
    lab_fail "the victim's requests never reached the log"
lab_expect_eq "requests that failed for want of a descriptor" 0 \
    "$(log_from "$from" egress.close | jq -r 'select(.error ==
    "connect-failed") | .request_id' | wc -l)"
refused=$(cat "$LAB_DIR"/log/up-a*.out | awk '$1 == "refused" { s += $2 }
    END { print s + 0 }')
[ "$refused" -gt 0 ] ||
    lab_fail "no attacker connection was refused: no contention"
lab_ok "attackers held $(fault_ev '^req [0-9]+ /stall-head' | wc -l)" \
    "connections, $refused refused (budget-exhausted)"
for a in $ATTACKERS; do lab_stop "up-$a"; done

# 7. A log flood: the log's reader is stopped (the FIFO fills), and every
# attacker sends 3000 requests that are denied at once (not granted).
# The flooders are backlogged and stop being read; the victim's requests
# and events go through. Once the reader runs again, every decision is in
# the log, and a backlog began before the victim's round.
fault__fifo_full()
{
	[ "$("$LAB_PYTHON" -c 'import fcntl, os, struct, sys, termios
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
n = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
print(struct.unpack("i", n)[0])' "$fifo")" -ge 60000 ]
}
from=$(log_next_line)
kill -STOP "${LAB_PID[logpump]}"
for a in $ATTACKERS; do
	lab_spawn "flood-$a" "$LAB_NS_B" "$LAB_PYTHON" \
	    "$FAULT_SRC_DIR/guest.py" hold "$(sock "$a")" denied.example /x 3000
done
# The broker stopped reading a flooder: more than 64 KiB of its requests
# wait unread on the broker's side of its connection.
fault__flooder_held()
{
	[ "$(lab_ns_b ss -xHn state established | awk -v d="$LAB_SOCK_DIR/" '
	    index($4, d) == 1 && $4 ~ /\/a[0-9]+\.sock$/ && $2 > 65536' |
	    wc -l)" -ge 1 ]
}
lab_poll 20 fault__fifo_full || lab_fail "the flood never filled the log FIFO"
lab_poll 20 fault__flooder_held ||
    lab_fail "no flooder was held back: its requests were all read"
lab_ok "the log FIFO is full and a flooder's requests wait unread"
t0=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
victim_round log-flood 20
kill -CONT "${LAB_PID[logpump]}"
fault__flood_logged()
{
	[ "$(log_from "$from" egress.decision | jq -r 'select(.host ==
	    "denied.example") | .request_id' | wc -l)" -ge $((8 * 3000)) ]
}
lab_poll 60 fault__flood_logged ||
    lab_fail "a flooder's decision never reached the log"
flood_ids=$(log_from "$from" egress.decision | jq -r 'select(.host ==
    "denied.example") | .request_id')
lab_expect_eq "flood decisions logged (lines, distinct requests)" \
    "$((8 * 3000)) $((8 * 3000))" \
    "$(wc -l <<<"$flood_ids") $(sort -u <<<"$flood_ids" | wc -l)"
lab_expect_eq "victim decisions logged" 20 \
    "$(log_from "$from" egress.decision | jq -r --arg t "$t0" 'select(
    .instance == "victim" and .ts >= $t) | .request_id' | wc -l)"
first_victim=$(log_from "$from" egress.decision | jq -r --arg t "$t0" 'select(
    .instance == "victim" and .ts >= $t) | .ts' | sort | head -n 1)
backlogs=$(log_from "$from" egress.log | jq -r --arg t "$first_victim" 'select(
    .status == "backlogged" and .ts <= $t) | .instance' | wc -l)
[ "$backlogs" -gt 0 ] ||
    lab_fail "no flooder was backlogged before the victim's round"
lab_ok "$backlogs flooders were backlogged before the victim's round"
for a in $ATTACKERS; do lab_stop "flood-$a"; done
lab_finish
