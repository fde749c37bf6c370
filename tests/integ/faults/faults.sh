# SPDX-License-Identifier: ISC
#
# Helpers shared by the fault scenarios (tests/integ/faults/NN-*.sh), a
# bash library sourced after tests/integ/lab/lab.sh. It starts the
# misbehaving upstream (badup.py, in the outside namespace on
# 93.184.216.34:8081) and the faulty DNS server (faultdns.py, in the
# broker namespace on 127.0.0.1:5355), polls their event logs, counts the
# broker's open descriptors (/proc/PID/fd) and its leases (control socket
# `show instance NAME`), and asserts that after a fault both are back to
# their baseline: no descriptor and no lease leaked. Every wait polls a
# condition under a bounded deadline (lab_poll); nothing rests on a sleep.

FAULT_SRC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FAULT_UP_PORT=8081
FAULT_DNS_PORT=5355
FAULT_OK_BODY=0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789
FAULT_UP=http://$LAB_PUB4:$FAULT_UP_PORT
# A name radar (which may not use IP literals) reaches the same upstream by.
FAULT_OK_URL=http://ok.weather.example:$FAULT_UP_PORT/ok
FAULT_FD0=

# fault_config_base KEY=VALUE...: lab_config_base with some keys of its
# [broker], [resolver] or [limits] sections replaced (each KEY must be
# there already: base.ini.in has one of each).
fault_config_base()
{
	local kv script=()
	for kv in "$@"; do
		script+=(-e "s|^${kv%%=*} = .*|${kv%%=*} = ${kv#*=}|")
	done
	lab_config_base | sed "${script[@]}" -e ''
}

# ---------------------------------------------------------------- badup

fault_badup_start()
{
	mkdir -p "$LAB_DIR/badup"
	: >"$LAB_DIR/badup/events"
	lab_spawn badup "$LAB_NS_O" "$LAB_PYTHON" "$FAULT_SRC_DIR/badup.py" \
	    "$LAB_PUB4" "$FAULT_UP_PORT" "$LAB_DIR/badup/events"
	lab_poll 10 test -s "$LAB_DIR/log/badup.out" ||
	    lab_fail "the misbehaving upstream did not start"
}

# fault_ev REGEX: the upstream's event lines matching REGEX (extended).
fault_ev() { grep -E "$1" "$LAB_DIR/badup/events" || true; }
fault__ev_has() { grep -Eq "$1" "$LAB_DIR/badup/events"; }

# fault_wait_ev REGEX [SECONDS]: wait (default 10 s) for an upstream event.
fault_wait_ev()
{
	lab_poll "${2:-10}" fault__ev_has "$1" ||
	    lab_fail "the upstream never logged /$1/: $(tail -n 5 \
	    "$LAB_DIR/badup/events" | tr '\n' ';')"
}

# fault_conn_of PATH: the upstream's connection number of the last request
# for PATH.
fault_conn_of()
{
	awk -v p="$1" '$1 == "req" && $3 == p { n = $2 } END { print n }' \
	    "$LAB_DIR/badup/events"
}

# fault_expect_upstream_closed PATH: the upstream connection that served
# the last PATH request saw the broker close it (or closed it itself).
fault_expect_upstream_closed()
{
	local n
	n=$(fault_conn_of "$1")
	[ -n "$n" ] || lab_fail "no upstream request for $1"
	fault_wait_ev "^(eof|closed) $n\$"
	lab_ok "upstream connection $n ($1) closed"
}

# ---------------------------------------------------------------- dns

fault_dns_start()
{
	mkdir -p "$LAB_DIR/fdns"
	touch "$LAB_DIR/fdns/query.log"
	: >"$LAB_DIR/log/fdns.out"
	lab_spawn fdns "$LAB_NS_B" "$LAB_PYTHON" "$FAULT_SRC_DIR/faultdns.py" \
	    "$LAB_DNS_ADDR" "$FAULT_DNS_PORT" "$LAB_DIR/fdns/query.log" \
	    "$LAB_PUB4"
	lab_poll 10 test -s "$LAB_DIR/log/fdns.out" ||
	    lab_fail "the faulty DNS server did not start"
}

# fault_dns_count PROTO NAME: queries for NAME (any type) over PROTO.
fault_dns_count()
{
	awk -v p="$1" -v n="$2" '$1 == p && $3 == n { c++ } END { print c + 0 }' \
	    "$LAB_DIR/fdns/query.log"
}

# fault_udp_drops: UDP datagrams the broker's namespace (the fault DNS
# server's and the resolver's sockets) dropped for a full receive buffer.
fault_udp_drops()
{
	ip netns exec "$LAB_NS_B" nstat -asz UdpRcvbufErrors |
	    awk '$1 == "UdpRcvbufErrors" { n = $2 } END { print n + 0 }'
}

# ---------------------------------------------------------------- broker

# fault_fds: the number of descriptors egressd holds open.
fault_fds()
{
	local pid
	pid=$(lab_egressd_pid)
	find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l
}

# fault_ctl LINE: one control-socket command; prints the JSON reply.
fault_ctl()
{
	timeout "$(egress_wait 15)" "$LAB_PYTHON" "$FAULT_SRC_DIR/guest.py" ctl \
	    "$LAB_DIR/run/control.sock" "$1"
}

# fault_unpaired INSTANCE [EVENT]: request ids of INSTANCE with only one
# of egress.decision and egress.close in the broker log from line
# FAULT_LOG_FROM on (default 1: the whole log); with EVENT, only those
# whose single event is EVENT. One per line.
FAULT_LOG_FROM=1
fault_unpaired()
{
	tail -n "+$FAULT_LOG_FROM" "$LAB_BROKER_LOG" | jq -rR --arg i "$1" '
	    fromjson? | select(.instance == $i) |
	    select(.event == "egress.decision" or .event == "egress.close") |
	    "\(.request_id) \(.event)"' | sort -u |
	    awk -v e="${2:-}" '{ n[$1]++; ev[$1] = $2 }
		END { for (k in n) if (n[k] == 1 && (e == "" || ev[k] == e))
			print k }'
}

# fault_open_requests INSTANCE: requests of INSTANCE decided but not
# closed (a request's lease is released before its close is logged).
fault_open_requests() { fault_unpaired "$1" egress.decision | wc -l; }

# fault_leases INSTANCE: the leases INSTANCE holds now, from the control
# socket's `show instance` when the broker serves it; else the requests
# still open by the log's decision/close pairing.
fault_leases()
{
	local n
	n=$(fault_ctl "show instance $1" 2>/dev/null |
	    jq -r '.leases // empty' 2>/dev/null) || n=
	if [ -n "$n" ]; then
		printf '%s\n' "$n"
	else
		fault_open_requests "$1"
	fi
}

# fault_baseline: remember the broker's descriptor count, once no
# upstream connection is established.
fault_baseline()
{
	lab_poll 5 fault__no_upconns ||
	    lab_fail "an upstream connection stays established"
	FAULT_FD0=$(fault_fds)
	lab_vlog "egressd holds $FAULT_FD0 descriptors"
}

fault__no_upconns() { [ "$(lab_upstream_conns "$FAULT_UP_PORT")" = 0 ]; }

fault__clean()
{
	local i
	[ "$(fault_fds)" = "$FAULT_FD0" ] || return 1
	[ "$(lab_upstream_conns "$FAULT_UP_PORT")" = 0 ] || return 1
	for i in "$@"; do
		[ "$(fault_leases "$i")" = 0 ] || return 1
	done
}

# fault_expect_clean WHAT INSTANCE...: wait (up to 5 s) until the broker
# holds its baseline descriptors, no connection to the misbehaving
# upstream is established, and each INSTANCE holds no lease.
fault_expect_clean()
{
	local what=$1 i
	shift
	lab_is_running egressd || lab_fail "$what: egressd died"
	if ! lab_poll 5 fault__clean "$@"; then
		ls -l "/proc/$(lab_egressd_pid)/fd" >&2 || true
		for i in "$@"; do
			lab_log "leases of $i: $(fault_leases "$i")"
		done
		lab_fail "$what: descriptors $(fault_fds) (baseline" \
		    "$FAULT_FD0) or a lease left held"
	fi
	lab_ok "$what: no descriptor or lease leaked"
}

# fault_log_mark: remember the broker log's length for fault_close_of.
FAULT_LOG_MARK=0
fault_log_mark() { FAULT_LOG_MARK=$(lab__lines "$LAB_BROKER_LOG"); }

fault__close_of()
{
	tail -n "+$((FAULT_LOG_MARK + 1))" "$LAB_BROKER_LOG" | jq -cR \
	    --arg i "$1" 'fromjson? | select(.event == "egress.close" and
	    .instance == $i)' | tail -n 1
}

fault__has_close_of() { [ -n "$(fault__close_of "$1")" ]; }

# fault_close_of INSTANCE: wait (10 s) for INSTANCE's last egress.close
# since fault_log_mark and print it.
fault_close_of()
{
	lab_poll 10 fault__has_close_of "$1" ||
	    lab_fail "no egress.close for $1 since the mark"
	fault__close_of "$1"
}

# fault_expect_ok_body: the last fetch returned the upstream's /ok body.
fault_expect_ok_body()
{
	lab_expect_fetch_ok
	[ "$(cat "$LAB_FETCH_OUT")" = "$FAULT_OK_BODY" ] ||
	    lab_fail "the /ok body differs: $(head -c 200 "$LAB_FETCH_OUT")"
	lab_ok "the /ok body arrived intact"
}

# fault_other_ok [INSTANCE]: a request of another instance (default radar)
# succeeds with the full body.
fault_other_ok()
{
	lab_fetch "${1:-radar}" "$FAULT_OK_URL"
	fault_expect_ok_body
}

# fault_spawn_fetch NAME INSTANCE [options] URL: egress-fetch in the
# broker namespace in the background, exec'ed directly (so NAME's pid is
# egress-fetch's own, or its wrapper's which runs it in the same process,
# and a KILL reaches it); body in log/NAME.out.
fault_spawn_fetch()
{
	local name=$1 inst=$2
	shift 2
	lab_spawn "$name" "$LAB_NS_B" "${EGRESS_WRAP_CMD[@]}" "$EGRESS_FETCH" \
	    --socket "$LAB_SOCK_DIR/$inst.sock" "$@"
}

# fault_wait_fetch NAME: wait (up to 30 s) for fault_spawn_fetch NAME and
# set LAB_FETCH_RC, LAB_FETCH_OUT, LAB_FETCH_ERR as lab_fetch does.
fault_wait_fetch()
{
	local pid=${LAB_PID[$1]}
	lab_poll 30 lab__gone "$pid" || lab_fail "egress-fetch $1 hangs"
	LAB_FETCH_RC=0
	wait "$pid" 2>/dev/null || LAB_FETCH_RC=$?
	unset "LAB_PID[$1]"
	LAB_FETCH_OUT=$LAB_DIR/log/$1.out
	cp "$LAB_DIR/log/$1.err" "$LAB_DIR/fetch.err"
	LAB_FETCH_ERR=$(cat "$LAB_DIR/fetch.err")
	LAB_FETCH_ARGS_URL=
}

# ---------------------------------------------------------------- load

# fault_loader NAME INSTANCE URL: in the background (process load-NAME),
# up to 2000 fetches of URL (whose body must be /ok's) until load/stop
# exists; one result line per fetch in load/NAME: "0 ok", "0 bad" (a wrong
# body) or "RC -" (egress-fetch's exit status). Each fetch is wrapped in
# EGRESS_WRAP (inherited from the environment).
fault_loader()
{
	mkdir -p "$LAB_DIR/load"
	: >"$LAB_DIR/load/$1"
	lab_spawn "load-$1" "$LAB_NS_B" bash -c '
		fetch=$1 sock=$2 url=$3 want=$4 out=$5 stop=$6 t=$7
		read -r -a wrap <<<"${EGRESS_WRAP:-}"
		i=0
		while [ ! -e "$stop" ] && [ "$i" -lt 2000 ]; do
			rc=0
			timeout -k 5 "$t" "${wrap[@]}" "$fetch" \
			    --socket "$sock" "$url" \
			    >"$out.body" 2>>"$out.err" || rc=$?
			if [ "$rc" = 0 ] && [ "$(cat "$out.body")" = "$want" ]
			then
				echo "0 ok"
			elif [ "$rc" = 0 ]; then
				echo "0 bad"
			else
				echo "$rc -"
			fi >>"$out"
			i=$((i + 1))
		done' loader "$EGRESS_FETCH" "$LAB_SOCK_DIR/$2.sock" "$3" \
	    "$FAULT_OK_BODY" "$LAB_DIR/load/$1" "$LAB_DIR/load/stop" \
	    "$(egress_wait 30)"
}
