# SPDX-License-Identifier: ISC
# Sourced by scripts/bench and tests/bench/bench_smoke.sh: starts the
# benchmark's loopback peers from configurations generated in a temp
# folder (never the system ones) and stops each of them by pid. Peers:
# Debian's nginx as the upstream (/small 100 B, /large 1 MiB, over HTTP,
# HTTPS with keep-alive, and HTTPS that closes after every response),
# egressd with one instance "bench" granted 127.0.0.1 (carved out in
# egress_allow_loopback, since 127.0.0.1 is a loopback address), and squid
# and tinyproxy as forward proxies that allow only 127.0.0.1 on the
# upstream's ports. Every address is on 127.0.0.1.
#
# After lab_init: $T is the folder; lab_* functions set NGINX_PID,
# EGRESSD_PID, SQUID_PID, TINYPROXY_PID and the ports below.
# LAB_PROXY_WRAP (an array, empty by default) is put in front of squid and
# tinyproxy, as EGRESS_WRAP_CMD is in front of egressd (scripts/bench runs
# them under callgrind to count instructions).
LAB_PROXY_WRAP=()

LAB_PIDS=()
# EGRESS_WRAP (the meson test setup "valgrind") puts a wrapper in front of
# egressd and scales the waits: see tests/integ/wrap.sh.
. "$(dirname "${BASH_SOURCE[0]}")/../integ/wrap.sh"

lab_cleanup()
{
	local p
	for p in "${LAB_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${LAB_PIDS[@]}"; do
		for _ in $(seq "$(egress_wait 50)"); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	LAB_PIDS=()
	if [ "${KEEP:-0}" = 1 ]; then
		echo "# kept $T" >&2
	else
		rm -rf "$T"
	fi
}

lab_init()
{
	T=$(mktemp -d "${TMPDIR:-/tmp}/egress-bench.XXXXXX")
	chmod 755 "$T"
	trap lab_cleanup EXIT
	trap 'exit 130' INT TERM
	# Free loopback ports, from the kernel.
	read -r HTTP_PORT HTTPS_PORT CLOSE_PORT SQUID_PORT TINY_PORT DNS_PORT \
	    < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(6)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
}

# lab_free_port: print a loopback port that is free now, from the kernel.
lab_free_port()
{
	python3 -c '
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# lab_wait_port PORT: wait until something accepts on 127.0.0.1:PORT.
lab_wait_port()
{
	for _ in $(seq "$(egress_wait 100)"); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "lab: nothing listens on 127.0.0.1:$1" >&2
	return 1
}

lab_certs()
{
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	    -days 2 -subj /CN=egress-bench-ca -keyout "$T/ca.key" \
	    -out "$T/ca.crt" 2>/dev/null
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	    -subj /CN=127.0.0.1 -keyout "$T/srv.key" -out "$T/srv.csr" \
	    2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$T/srv.ext"
	openssl x509 -req -in "$T/srv.csr" -CA "$T/ca.crt" -CAkey "$T/ca.key" \
	    -CAcreateserial -days 2 -extfile "$T/srv.ext" -out "$T/srv.crt" \
	    2>/dev/null
	chmod 644 "$T/srv.key"
}

# lab_nginx [WORKERS]
lab_nginx()
{
	mkdir -p "$T/www" "$T/nginx"
	head -c 100 /dev/zero | tr '\0' 's' >"$T/www/small"
	head -c 1048576 /dev/urandom >"$T/www/large"
	chmod -R a+rX "$T/www"
	cat >"$T/nginx/nginx.conf" <<EOF
worker_processes ${1:-1};
daemon off;
pid $T/nginx/nginx.pid;
error_log $T/nginx/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	default_type application/octet-stream;
	sendfile on;
	tcp_nopush on;
	keepalive_requests 10000000;
	keepalive_timeout 120s;
	ssl_certificate $T/srv.crt;
	ssl_certificate_key $T/srv.key;
	ssl_protocols TLSv1.2 TLSv1.3;
	ssl_session_cache off;
	ssl_session_tickets off;
	server {
		listen 127.0.0.1:$HTTP_PORT;
		listen 127.0.0.1:$HTTPS_PORT ssl;
		root $T/www;
	}
	server {
		listen 127.0.0.1:$CLOSE_PORT ssl;
		keepalive_timeout 0;
		root $T/www;
	}
}
EOF
	nginx -e "$T/nginx/error.log" -p "$T/nginx" -c "$T/nginx/nginx.conf" \
	    >"$T/nginx/out.log" 2>&1 &
	NGINX_PID=$!
	LAB_PIDS+=("$NGINX_PID")
	lab_wait_port "$HTTP_PORT" && lab_wait_port "$CLOSE_PORT"
}

# lab_egressd_files: the manifest of package "bench" (granted 127.0.0.1)
# and a configuration with instance "bench" of it (permissions
# $LAB_PERMS, default http_client; with LAB_PROXY_PORT set, its proxy
# front listens on 127.0.0.1:LAB_PROXY_PORT with the token
# LAB_PROXY_TOKEN); lab_egressd_idle adds more instances after it.
lab_egressd_files()
{
	mkdir -p "$T/egressd/packages/bench" "$T/egressd/run"
	cat >"$T/egressd/packages/bench/manifest.ini" <<EOF
[plugin]
name = bench
version = 1.0.0
permissions = ${LAB_PERMS:-http_client}

[egress]
hosts = 127.0.0.1
operator_defined = false
EOF
	# The resolver port is free: an IP literal is never looked up.
	cat >"$T/egressd/egressd.ini" <<EOF
[broker]
instance_socket_dir = $T/egressd/run/instances
control_socket = $T/egressd/run/control.sock
log = $T/egressd/egressd.log
${LAB_BUSY_POLL_US:+busy_poll_us = $LAB_BUSY_POLL_US}
${LAB_ADAPTIVE_POLL_US:+adaptive_poll_us = $LAB_ADAPTIVE_POLL_US}

[tls]
ca_file = $T/ca.crt

[resolver]
servers = 127.0.0.1:$DNS_PORT
timeout_ms = 2000

[plugins.security]
signature_mode = disabled

[plugins.limits]
max_connections_per_instance = 512

[plugins.entries.bench]
plugin = bench
manifest = packages/bench/manifest.ini
permissions = ${LAB_PERMS:-http_client}
egress_hosts = 127.0.0.1
egress_allow_loopback = 127.0.0.1
EOF
	if [ -n "${LAB_PROXY_PORT:-}" ]; then
		(umask 077 && printf '%s\n' "$LAB_PROXY_TOKEN" \
		    >"$T/egressd/proxy.token")
		printf 'proxy_listen = 127.0.0.1:%s\nproxy_token_file = %s\n' \
		    "$LAB_PROXY_PORT" "$T/egressd/proxy.token" \
		    >>"$T/egressd/egressd.ini"
	fi
}

# lab_egressd EGRESSD
lab_egressd()
{
	lab_egressd_files
	"${EGRESS_WRAP_CMD[@]}" "$1" -c "$T/egressd/egressd.ini" --foreground \
	    2>"$T/egressd/stderr.log" &
	EGRESSD_PID=$!
	LAB_PIDS+=("$EGRESSD_PID")
	EGRESS_SOCK=$T/egressd/run/instances/bench.sock
	for _ in $(seq "$(egress_wait 100)"); do
		if [ -S "$EGRESS_SOCK" ]; then
			# The proxy port is bound after the instance socket.
			[ -z "${LAB_PROXY_PORT:-}" ] ||
			    lab_wait_port "$LAB_PROXY_PORT" || break
			return 0
		fi
		sleep 0.1
	done
	echo "lab: egressd did not create $EGRESS_SOCK${LAB_PROXY_PORT:+ or listen on $LAB_PROXY_PORT}" >&2
	cat "$T/egressd/stderr.log" >&2
	return 1
}

lab_squid()
{
	mkdir -p "$T/squid"
	cat >"$T/squid/squid.conf" <<EOF
http_port 127.0.0.1:$SQUID_PORT
pid_filename $T/squid/squid.pid
cache_log $T/squid/cache.log
access_log none
cache_store_log none
cache deny all
cache_mem 8 MB
coredump_dir $T/squid
pinger_enable off
shutdown_lifetime 0 seconds
dns_nameservers 127.0.0.1
acl upstream dst 127.0.0.1/32
acl upstream_ports port $HTTP_PORT $HTTPS_PORT $CLOSE_PORT ${LAB_SQUID_PORTS:-}
acl CONNECT method CONNECT
acl clients src 127.0.0.1/32
http_access deny !clients
http_access deny !upstream
http_access deny !upstream_ports
http_access allow all
EOF
	chown -R proxy:proxy "$T/squid" 2>/dev/null || true
	"${LAB_PROXY_WRAP[@]}" squid -N -f "$T/squid/squid.conf" \
	    >"$T/squid/out.log" 2>&1 &
	SQUID_PID=$!
	LAB_PIDS+=("$SQUID_PID")
	lab_wait_port "$SQUID_PORT"
}

lab_tinyproxy()
{
	mkdir -p "$T/tinyproxy"
	printf '^127\\.0\\.0\\.1$\n' >"$T/tinyproxy/filter"
	cat >"$T/tinyproxy/tinyproxy.conf" <<EOF
Port $TINY_PORT
Listen 127.0.0.1
Timeout 600
MaxClients 1024
Allow 127.0.0.1
LogLevel Critical
LogFile "$T/tinyproxy/tinyproxy.log"
PidFile "$T/tinyproxy/tinyproxy.pid"
DisableViaHeader Yes
Filter "$T/tinyproxy/filter"
FilterType ere
FilterDefaultDeny Yes
ConnectPort $HTTPS_PORT
ConnectPort $CLOSE_PORT
EOF
	"${LAB_PROXY_WRAP[@]}" tinyproxy -d -c "$T/tinyproxy/tinyproxy.conf" \
	    >"$T/tinyproxy/out.log" 2>&1 &
	TINYPROXY_PID=$!
	LAB_PIDS+=("$TINYPROXY_PID")
	lab_wait_port "$TINY_PORT"
}

# lab_cpu_ticks PID: utime + stime of PID (all its threads), in clock ticks.
lab_cpu_ticks()
{
	awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

# lab_hwm_kib PID: peak resident set size (VmHWM) of PID in KiB.
lab_hwm_kib()
{
	awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"
}

# lab_egressd_idle EGRESSD NINSTANCES NOFILE: as lab_egressd (instance
# "bench", granted 127.0.0.1), plus NINSTANCES instances idle001.. of
# another plugin, "idle", with the same grant, for scripts/bench-idle (so
# the idle instances borrow from the shared pools as another plugin,
# beside "bench", not out of its plugin's part); the broker runs under
# prlimit --nofile=NOFILE (its own RLIMIT_NOFILE, soft and hard). Sets
# EGRESSD_PID, EGRESS_SOCK (bench's socket) and IDLE_SOCKS (an array of
# the idle instances' sockets). NOFILE above the hard limit this shell
# may raise to is cut down to that limit (LAB_NOFILE is what was used).
lab_egressd_idle()
{
	local i name hard
	hard=$(ulimit -Hn)
	LAB_NOFILE=$3
	if [ "$hard" != unlimited ] && [ "$hard" -lt "$3" ]; then
		prlimit --pid $$ --nofile="$3:$3" 2>/dev/null ||
		    LAB_NOFILE=$hard
	fi
	lab_egressd_files
	mkdir -p "$T/egressd/packages/idle"
	sed 's/^name = bench$/name = idle/' \
	    "$T/egressd/packages/bench/manifest.ini" \
	    >"$T/egressd/packages/idle/manifest.ini"
	IDLE_SOCKS=()
	for name in $(seq -f 'idle%03g' "$2"); do
		cat >>"$T/egressd/egressd.ini" <<EOF2

[plugins.entries.$name]
plugin = idle
manifest = packages/idle/manifest.ini
permissions = ${LAB_PERMS:-http_client}
egress_hosts = 127.0.0.1
egress_allow_loopback = 127.0.0.1
EOF2
		IDLE_SOCKS+=("$T/egressd/run/instances/$name.sock")
	done
	prlimit --nofile="$LAB_NOFILE:$LAB_NOFILE" -- \
	    "$1" -c "$T/egressd/egressd.ini" --foreground 2>"$T/egressd/stderr.log" &
	EGRESSD_PID=$!
	LAB_PIDS+=("$EGRESSD_PID")
	EGRESS_SOCK=$T/egressd/run/instances/bench.sock
	for i in $(seq 100); do
		if [ -S "$EGRESS_SOCK" ] && { [ "$2" = 0 ] ||
		    [ -S "${IDLE_SOCKS[$(($2 - 1))]}" ]; }; then
			return 0
		fi
		sleep 0.1
	done
	echo "lab: egressd did not create its sockets" >&2
	cat "$T/egressd/stderr.log" >&2
	return 1
}
