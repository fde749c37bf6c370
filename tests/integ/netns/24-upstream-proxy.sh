#!/bin/bash
# SPDX-License-Identifier: ISC
#
# [upstream_proxy]: every upstream connection goes through a parent proxy
# (squid, in the broker's namespace). The broker still decides, resolves
# once and validates; it asks the parent to CONNECT to the validated
# address literal, never the name (the parent never resolves it), and
# does TLS with SNI and verification on the name through the tunnel;
# plain HTTP goes through a CONNECT too. The decision event names the
# parent. A denied destination never reaches the parent; a CONNECT the
# parent refuses is connect-failed. A request in flight when the parent
# is removed does not leave its connection in the pool, and a request
# whose kept-alive tunnel fails after that is not retried through the
# removed parent. A parent that
# requires credentials (squid's basic_ncsa_auth) gets them from
# credentials_file: wrong ones are connect-failed, a rewritten file is
# used from the next connection (a pooled tunnel the old ones opened is
# not reused), and the password is never logged.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
command -v squid >/dev/null ||
    lab_fail "squid is missing (apt-get install -y squid)"
lab_up

SQUID_PORT=3130
SQ=$LAB_DIR/squid
mkdir -p "$SQ"
cat >"$SQ/squid.conf" <<SQUID
http_port 127.0.0.1:$SQUID_PORT
pid_filename $SQ/squid.pid
cache_log $SQ/cache.log
access_log stdio:$SQ/access.log squid
cache_store_log none
cache deny all
cache_mem 8 MB
coredump_dir $SQ
pinger_enable off
shutdown_lifetime 0 seconds
dns_nameservers 127.0.0.1
acl to_lab dst $LAB_PUB4/32
acl lab_ports port 80 443 $LAB_GATE_PORT
acl CONNECT method CONNECT
http_access deny !CONNECT
http_access deny !to_lab
http_access deny !lab_ports
http_access allow all
SQUID
chown -R proxy:proxy "$SQ" 2>/dev/null || true
lab_spawn squid "$LAB_NS_B" squid -N -f "$SQ/squid.conf"
squid_up() { lab_ns_b bash -c "exec 3<>/dev/tcp/127.0.0.1/$SQUID_PORT"; }
lab_poll 30 squid_up 2>/dev/null ||
    lab_fail "squid did not listen: $(tail -n 5 "$SQ/cache.log" 2>/dev/null)"

lab_dns_set api.weather.example="$LAB_PUB4" \
    meta.weather.example="$LAB_META4"
PARENT=http://127.0.0.1:$SQUID_PORT
{
	lab_config_base
	printf '\n[upstream_proxy]\nurl = %s\n' "$PARENT"
	lab_entry weather weather "api.weather.example, meta.weather.example"
} | lab_config_install
lab_egressd_start weather

parent_of_last() { lab_events egress.decision | tail -n 1 | jq -r '.upstream_proxy'; }

# parent_set URL: the configuration with URL as its parent ("": none),
# reloaded, and its egress.config event seen (lab_mark is set).
parent_set()
{
	lab_mark
	{
		lab_config_base
		[ -z "$1" ] || printf '\n[upstream_proxy]\nurl = %s\n' "$1"
		lab_entry weather weather "api.weather.example, meta.weather.example"
	} | lab_config_install
	kill -HUP "$(lab_egressd_pid)"
	lab_wait_events egress.config 1
}

# ---- https through the parent: SNI and verification on the name
lab_fetch weather https://api.weather.example/small
lab_expect_fetch_ok
lab_expect_fetch_body_file "$LAB_DIR/www/small"
lab_expect_decision weather allow - api.weather.example
lab_expect_eq "decision names the parent" "$PARENT" "$(parent_of_last)"
lab_expect_hits "$LAB_PUB4" 1 /small
lab_expect_eq "SNI seen upstream" api.weather.example \
    "$(lab_sni_seen "$LAB_PUB4")"

# ---- plain http through the parent's CONNECT too
lab_mark
lab_fetch weather http://api.weather.example/small
lab_expect_fetch_ok
lab_expect_fetch_body_file "$LAB_DIR/www/small"
lab_expect_decision weather allow - api.weather.example
lab_expect_hits "$LAB_PUB4" 1 /small

# ---- denied: metadata, nothing reaches the parent
lab_mark
lab_fetch weather http://meta.weather.example/latest/
lab_expect_fetch_error denied
lab_expect_decision weather deny metadata meta.weather.example
lab_expect_eq "no upstream_proxy on a deny" null "$(parent_of_last)"

# ---- the parent refuses this port: connect-failed
lab_mark
lab_fetch weather https://api.weather.example:8443/small
lab_expect_fetch_error connect-failed
lab_expect_decision weather allow - api.weather.example
lab_expect_close error connect-failed

# ---- a kept-alive connection through the parent fails under a request
# after the parent was removed: the request is not retried through it
lab_gate_start
lab_fetch weather "http://api.weather.example:$LAB_GATE_PORT/pooled"
lab_expect_fetch_ok
lab_spawn cut "$LAB_NS_B" "${EGRESS_WRAP_CMD[@]}" "$EGRESS_FETCH" \
    --socket "$LAB_SOCK_DIR/weather.sock" \
    "http://api.weather.example:$LAB_GATE_PORT/cut/c1"
lab_gate_wait c1
parent_set ""
lab_gate_release c1
lab_poll 10 lab__gone "${LAB_PID[cut]}" || lab_fail "the cut fetch hung"
lab_stop cut
[ "$LAB_STOP_RC" != 0 ] || lab_fail "the cut request was answered"
lab_expect_eq "requests for /cut/c1 the gate saw" 1 \
    "$(grep -c 'GET /cut/c1 ' "$LAB_DIR/gate/access.log")"
lab_ok "a request on a tunnel of the removed parent was not retried through it"
parent_set "$PARENT"
: >"$LAB_DIR/gate/access.log"

# ---- a request in flight when the parent is removed: its connection,
# made through the parent, is not pooled; the next request dials directly
lab_spawn held "$LAB_NS_B" "${EGRESS_WRAP_CMD[@]}" "$EGRESS_FETCH" \
    --socket "$LAB_SOCK_DIR/weather.sock" \
    "http://api.weather.example:$LAB_GATE_PORT/hold/a1?to=/x"
lab_gate_wait a1
parent_set ""
lab_gate_release a1
lab_poll 10 lab__gone "${LAB_PID[held]}" || lab_fail "the held fetch hung"
lab_stop held
lab_expect_eq "held fetch's exit status" 0 "$LAB_STOP_RC"
lab_fetch weather "http://api.weather.example:$LAB_GATE_PORT/direct"
lab_expect_fetch_ok
lab_expect_eq "no upstream_proxy once removed" null "$(parent_of_last)"
g=$LAB_DIR/gate/access.log
lab_expect_eq "gate requests" 2 "$(wc -l <"$g")"
[ "$(sed -n '1s/.* peer=//p' "$g")" != "$(sed -n '2s/.* peer=//p' "$g")" ] ||
    lab_fail "the connection made through the parent was reused: $(cat "$g")"
lab_ok "the next request did not reuse the connection made through the parent"

# Squid writes a tunnel's line when it closes: stop the broker first.
lab_egressd_stop
lab_poll 10 grep -q ":8443 " "$SQ/access.log" ||
    lab_fail "squid logged no refused CONNECT: $(cat "$SQ/access.log")"
lab_poll 10 grep -q "CONNECT $LAB_PUB4:80 " "$SQ/access.log" ||
    lab_fail "no CONNECT to the literal's port 80: $(cat "$SQ/access.log")"
lab_expect_eq "CONNECTs squid saw (443, 80, refused 8443, pooled 8080, held 8080)" 5 \
    "$(grep -c ' CONNECT ' "$SQ/access.log")"
lab_expect_eq "CONNECTs to the validated literal" 5 \
    "$(grep -c " CONNECT $LAB_PUB4:" "$SQ/access.log")"
lab_expect_eq "the name or metadata in squid's log" 0 \
    "$(grep -c -e weather.example -e "$LAB_META4" "$SQ/access.log" || true)"
lab_expect_eq "refused CONNECT" 1 \
    "$(grep " CONNECT $LAB_PUB4:8443 " "$SQ/access.log" | grep -c DENIED || true)"
lab_expect_no_metadata_hits
lab_expect_log_valid

# ---- a parent that requires credentials
lab_stop squid
AUTH_PORT=3131
SA=$LAB_DIR/squid-auth
PW=parent-pw-9f3c
mkdir -p "$SA"
printf 'egress:%s\n' "$(openssl passwd -apr1 "$PW")" >"$SA/passwd"
cat >"$SA/squid.conf" <<SQUID
http_port 127.0.0.1:$AUTH_PORT
pid_filename $SA/squid.pid
cache_log $SA/cache.log
access_log stdio:$SA/access.log squid
cache_store_log none
cache deny all
cache_mem 8 MB
coredump_dir $SA
pinger_enable off
shutdown_lifetime 0 seconds
dns_nameservers 127.0.0.1
auth_param basic program /usr/lib/squid/basic_ncsa_auth $SA/passwd
auth_param basic realm lab
acl authed proxy_auth REQUIRED
acl to_lab dst $LAB_PUB4/32
acl CONNECT method CONNECT
http_access deny !CONNECT
http_access deny !to_lab
http_access deny !authed
http_access allow all
SQUID
chown -R proxy:proxy "$SA" 2>/dev/null || true
lab_spawn squid-auth "$LAB_NS_B" squid -N -n egressauth -f "$SA/squid.conf"
auth_up() { lab_ns_b bash -c "exec 3<>/dev/tcp/127.0.0.1/$AUTH_PORT"; }
lab_poll 30 auth_up 2>/dev/null ||
    lab_fail "squid (auth) did not listen: $(tail -n 5 "$SA/cache.log" 2>/dev/null)"

CRED=$LAB_DIR/etc/parent.cred
write_cred() {
	(umask 077 && printf 'egress:%s\n' "$1" >"$CRED.new")
	mv -f "$CRED.new" "$CRED"
}
write_cred wrong-pw-1d2e
{
	lab_config_base
	printf '\n[upstream_proxy]\nurl = http://127.0.0.1:%s\n' "$AUTH_PORT"
	printf 'credentials_file = %s\n' "$CRED"
	lab_entry weather weather "api.weather.example"
} | lab_config_install
lab_egressd_start weather

# wrong credentials: the parent answers 407, the request is connect-failed
lab_fetch weather https://api.weather.example/small
lab_expect_fetch_error connect-failed
lab_expect_decision weather allow - api.weather.example
lab_expect_close error connect-failed

# the rewritten file is used from the next connection
lab_mark
write_cred "$PW"
lab_wait_events egress.config 1
lab_mark
lab_fetch weather https://api.weather.example/small
lab_expect_fetch_ok
lab_expect_fetch_body_file "$LAB_DIR/www/small"
lab_expect_eq "decision names the parent" "http://127.0.0.1:$AUTH_PORT" \
    "$(parent_of_last)"

# credentials rewritten again: the tunnel the old ones opened (pooled,
# idle) is not reused; the next request CONNECTs anew with the new ones
lab_mark
write_cred wrong-pw-7a5b
lab_wait_events egress.config 1
lab_mark
lab_fetch weather https://api.weather.example/small
lab_expect_fetch_error connect-failed
lab_expect_close error connect-failed
lab_egressd_stop
lab_poll 10 grep -q " egress HIER_DIRECT/$LAB_PUB4" "$SA/access.log" ||
    lab_fail "squid logged no tunnel for user egress: $(cat "$SA/access.log")"
lab_expect_eq "CONNECTs refused for credentials (407)" 2 \
    "$(grep " CONNECT $LAB_PUB4:443 " "$SA/access.log" | grep -c '/407 ' || true)"
lab_expect_eq "the password in the broker's log" 0 \
    "$(grep -c -e "$PW" -e wrong-pw-1d2e -e wrong-pw-7a5b -e "$(printf 'egress:%s' "$PW" | base64)" \
    "$LAB_BROKER_LOG" || true)"
lab_expect_log_valid
