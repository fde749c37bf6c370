# SPDX-License-Identifier: ISC
#
# The egressd network test laboratory, a bash library sourced by every
# scenario script (tests/integ/netns/*.sh) and by selftest.sh. It builds two
# network namespaces of its own, the broker's ("b") and an "outside" one
# ("o") joined by a veth pair; the outside namespace holds the upstream
# addresses (metadata 169.254.169.254 and fd00:ec2::254, private 10.0.0.7,
# "internet" 93.184.216.34) and the broker namespace has host routes for
# exactly those and nothing else, so no packet can leave the machine. It
# runs a real DNS server (dnsmasq, in the broker namespace on loopback), real
# HTTP/HTTPS upstreams (nginx, in the outside namespace) with a test CA made
# by openssl, and helpers to start egressd, run egress-fetch, and assert on
# egress-fetch's result, the upstream hit counts, the DNS query counts and
# the broker's JSON-lines log. Everything lives in one temporary folder and
# every process is started, tracked and stopped by pid; lab_down (run from
# an EXIT trap) leaves no namespace, process, mount or file behind.
#
# Usage, from a script running under `set -euo pipefail`:
#     . "$(dirname "$0")/../lab/lab.sh"
#     lab_init            # root check (exit 77 = skip), temp folder, traps
#     lab_up              # namespaces, PKI, dnsmasq, nginx
#     ...                 # see README.md for the helpers
# Environment: EGRESSD, EGRESS_FETCH (binaries, for the scenarios),
# EGRESS_WRAP (a command such as valgrind put in front of them, see
# ../wrap.sh), LAB_KEEP=1 (keep the temp folder and print its path),
# LAB_VERBOSE=1.

LAB_SRC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LAB_TOP_DIR=$(cd "$LAB_SRC_DIR/../../.." && pwd)
LAB_DATA_DIR="$LAB_TOP_DIR/tests/data/integ"
LAB_PYTHON=${LAB_PYTHON:-python3}
# EGRESS_WRAP_CMD (put in front of egressd and egress-fetch) and
# EGRESS_WAIT_SCALE (multiplies every bounded wait): see ../wrap.sh.
. "$LAB_SRC_DIR/../wrap.sh"
# What lab_egressd_start puts in front of $EGRESSD: a script whose $EGRESSD
# is a wrapper of its own that already runs the wrapper command inside
# (caps_broker.sh) empties it.
LAB_EGRESSD_WRAP=("${EGRESS_WRAP_CMD[@]}")

# The upstream ("outside") addresses. None of them is ever configured on
# an interface of the broker namespace.
LAB_META4=169.254.169.254
LAB_META6=fd00:ec2::254
LAB_PRIV4=10.0.0.7
LAB_PUB4=93.184.216.34
LAB_UPSTREAM4="$LAB_META4 $LAB_PRIV4 $LAB_PUB4"
LAB_UPSTREAM6="$LAB_META6"
# Link addresses of the veth pair (/32 and /128, no connected subnet).
LAB_LINK4_B=198.18.0.1
LAB_LINK4_O=198.18.0.2
LAB_LINK6_B=fd00:ffff::1
LAB_LINK6_O=fd00:ffff::2

LAB_DNS_ADDR=127.0.0.1
LAB_DNS_PORT=5353
LAB_REBIND_PORT=5354
LAB_GATE_PORT=8080

# The guest-visible error codes and egress-fetch's exit status for each.
declare -A LAB_EXIT_CODE=(
	[denied]=10 [budget-exhausted]=11 [dns-failed]=12
	[connect-failed]=13 [tls-failed]=14 [timeout]=15
	[upstream-protocol-error]=16 [invalid-request]=17
	[unavailable]=18 [cancelled]=19
)
LAB_DENIED_MSG="egress policy: destination not permitted for this instance"

declare -A LAB_PID=()		# name -> pid of every process we started
LAB_DIR=
LAB_NS_B=
LAB_NS_O=
LAB_UP=0
LAB_TESTS=0
LAB_NAME=$(basename "${0%.sh}")

# ---------------------------------------------------------------- output

lab_log() { printf '# %s\n' "$*" >&2; }
lab_vlog() { [ "${LAB_VERBOSE:-0}" = 1 ] && lab_log "$@"; return 0; }

# Print "ok N - MESSAGE".
lab_ok()
{
	LAB_TESTS=$((LAB_TESTS + 1))
	printf 'ok %d - %s\n' "$LAB_TESTS" "$*"
}

# Print the failure with the lab's recent logs, and exit 1.
lab_fail()
{
	printf 'not ok %d - %s\n' "$((LAB_TESTS + 1))" "$*"
	printf 'FAIL: %s: %s\n' "$LAB_NAME" "$*" >&2
	lab_dump_context >&2 || true
	exit 1
}

lab_dump_context()
{
	[ -n "$LAB_DIR" ] && [ -d "$LAB_DIR" ] || return 0
	local f
	for f in "$LAB_DIR"/fetch.err "$LAB_DIR"/log/egressd.err \
	    "$LAB_DIR"/egressd.log "$LAB_DIR"/nginx/access.log \
	    "$LAB_DIR"/nginx/error.log "$LAB_DIR"/dns/query.log; do
		[ -s "$f" ] || continue
		printf -- '--- last lines of %s\n' "${f#"$LAB_DIR"/}"
		tail -n 15 "$f"
	done
}

# Skip loudly with meson's skip status 77. Never a silent pass.
lab_skip()
{
	printf '\n*** SKIP: %s: %s ***\n\n' "$LAB_NAME" "$*" >&2
	printf '1..0 # SKIP %s\n' "$*"
	exit 77
}

# Assert that two strings are equal.
lab_expect_eq()
{
	local what=$1 want=$2 got=$3
	[ "$got" = "$want" ] || lab_fail "$what: want '$want', got '$got'"
	lab_ok "$what = $want"
}

# ------------------------------------------------------------- lifecycle

# Check root (else skip with 77), the tools, make the temp folder, install
# the cleanup traps. Call once, first.
lab_init()
{
	[ "$(id -u)" = 0 ] || lab_skip "the netns lab needs root" \
	    "(network namespaces, veth); run the integration suite as root"
	local t missing=
	for t in ip nginx dnsmasq openssl jq curl ss timeout \
	    "$LAB_PYTHON"; do
		command -v "$t" >/dev/null 2>&1 || missing="$missing $t"
	done
	if [ -n "$missing" ]; then
		printf 'FAIL: %s: missing tools:%s (apt-get install -y' \
		    "$LAB_NAME" "$missing" >&2
		printf ' iproute2 nginx dnsmasq-base openssl jq curl' >&2
		printf ' coreutils python3)\n' >&2
		exit 1
	fi
	LAB_DIR=$(mktemp -d "${TMPDIR:-/tmp}/egl.XXXXXX")
	chmod 0711 "$LAB_DIR"
	mkdir -p "$LAB_DIR"/{log,run,run/instances,etc,pki,www,nginx,dns,hold}
	LAB_NS_B="egl-$$-b"
	LAB_NS_O="egl-$$-o"
	LAB_CONF=$LAB_DIR/etc/egressd.ini
	LAB_SOCK_DIR=$LAB_DIR/run/instances
	LAB_BROKER_LOG=$LAB_DIR/egressd.log
	[ "${#LAB_SOCK_DIR}" -lt 90 ] ||
	    lab_fail "TMPDIR is too long for Unix socket paths: $LAB_SOCK_DIR"
	set -o errtrace
	trap 'lab__on_err "$?" "${BASH_SOURCE[0]}" "$LINENO" "$BASH_COMMAND"' ERR
	trap 'lab__on_exit' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
	lab_vlog "lab folder $LAB_DIR, namespaces $LAB_NS_B $LAB_NS_O"
}

# An unchecked command failed (set -e is about to exit): say which.
lab__on_err()
{
	printf 'FAIL: %s: status %s at %s:%s: %s\n' "$LAB_NAME" "$1" \
	    "${2##*/}" "$3" "$4" >&2
}

lab__on_exit()
{
	local rc=$?
	set +e
	lab_down
	if [ "$rc" = 0 ]; then
		printf '1..%d\n' "$LAB_TESTS"
		printf 'PASS: %s (%d checks)\n' "$LAB_NAME" "$LAB_TESTS" >&2
	fi
	exit "$rc"
}

# Bring the whole lab up: network, PKI, web content, DNS, nginx.
lab_up()
{
	lab_net_up
	lab_pki_make
	lab_www_make
	lab_dns_set			# no records until a test sets some
	lab_nginx_start
	LAB_UP=1
}

# Stop every process we started (by pid), delete both namespaces and the
# temp folder. Idempotent; safe after a partial lab_up.
lab_down()
{
	local name ns pid
	for name in "${!LAB_PID[@]}"; do
		lab_stop "$name"
	done
	# A safety net: anything still inside our own namespaces was started
	# by us (only we know their names); stop those by pid too.
	for ns in "$LAB_NS_B" "$LAB_NS_O"; do
		[ -n "$ns" ] && [ -e "/run/netns/$ns" ] || continue
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$pid" 2>/dev/null || true
		done
		ip netns del "$ns" 2>/dev/null || true
	done
	if [ -n "$LAB_DIR" ] && [ -d "$LAB_DIR" ]; then
		if [ "${LAB_KEEP:-0}" = 1 ]; then
			lab_log "kept lab folder $LAB_DIR"
		else
			rm -rf -- "$LAB_DIR"
		fi
	fi
	LAB_UP=0
}

# ------------------------------------------------------------- processes

# lab_poll SECONDS CMD...: run CMD every 50 ms until it succeeds; return
# 1 when SECONDS (times EGRESS_WAIT_SCALE) pass first. Used for every
# wait, never a fixed sleep.
lab_poll()
{
	local secs=$1 now deadline
	shift
	now=${EPOCHREALTIME//[.,]/}
	deadline=$((now + secs * EGRESS_WAIT_SCALE * 1000000))
	while :; do
		"$@" && return 0
		now=${EPOCHREALTIME//[.,]/}
		[ "$now" -lt "$deadline" ] || return 1
		sleep 0.05
	done
}

# lab_spawn NAME NS|- CMD...: start CMD in the background, inside network
# namespace NS (or the current one for "-"), stdout and stderr to
# log/NAME.out and log/NAME.err. Record its pid under NAME.
lab_spawn()
{
	local name=$1 ns=$2
	shift 2
	[ -z "${LAB_PID[$name]:-}" ] || lab_fail "process $name already runs"
	if [ "$ns" = - ]; then
		"$@" >"$LAB_DIR/log/$name.out" 2>"$LAB_DIR/log/$name.err" &
	else
		ip netns exec "$ns" "$@" >"$LAB_DIR/log/$name.out" \
		    2>"$LAB_DIR/log/$name.err" &
	fi
	LAB_PID[$name]=$!
	lab_vlog "started $name pid ${LAB_PID[$name]}: $*"
}

# lab__gone PID: the process has exited (a zombie not yet reaped counts
# as gone: kill -0 would still succeed on it).
lab__gone()
{
	local st
	st=$(sed -e 's/^.*) //' -e 's/ .*//' "/proc/$1/stat" 2>/dev/null) ||
	    return 0
	[ -z "$st" ] || [ "$st" = Z ] || [ "$st" = X ]
}

# Return 0 when the process recorded under NAME is still alive.
lab_is_running()
{
	local pid=${LAB_PID[$1]:-}
	[ -n "$pid" ] && ! lab__gone "$pid"
}

# lab_stop NAME [SIGNAL]: signal (default TERM) the process started under
# NAME, wait up to 5 s for it, then KILL it. Sets LAB_STOP_RC to its exit
# status. No-op when NAME was never started or is gone.
lab_stop()
{
	local name=$1 sig=${2:-TERM} pid=${LAB_PID[$1]:-}
	LAB_STOP_RC=
	[ -n "$pid" ] || return 0
	kill "-$sig" "$pid" 2>/dev/null || true
	if ! lab_poll 5 lab__gone "$pid"; then
		lab_log "$name (pid $pid) ignored SIG$sig; killing it"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	LAB_STOP_RC=0
	wait "$pid" 2>/dev/null || LAB_STOP_RC=$?
	unset "LAB_PID[$name]"
}

# Run a command inside the broker namespace / the outside namespace.
lab_ns_b() { ip netns exec "$LAB_NS_B" "$@"; }
lab_ns_o() { ip netns exec "$LAB_NS_O" "$@"; }

# ---------------------------------------------------------------- network

lab__addr_ready()
{
	# Every address present and none tentative (DAD is off anyway).
	local ns=$1 dev=$2 a
	shift 2
	local out
	out=$(ip -n "$ns" addr show dev "$dev") || return 1
	case $out in *tentative*) return 1 ;; esac
	case $out in *LOWER_UP*) ;; *) return 1 ;; esac
	for a in "$@"; do
		grep -qF " $a/" <<<"$out" || return 1
	done
}

# Create the two namespaces, the veth pair, the addresses and the routes.
lab_net_up()
{
	local b=$LAB_NS_B o=$LAB_NS_O a
	ip netns add "$b"
	ip netns add "$o"
	ip -n "$b" link set lo up
	ip -n "$o" link set lo up
	ip link add veth-b netns "$b" type veth peer name veth-o netns "$o"
	# No automatic link-local addresses: only what we configure exists.
	ip -n "$b" link set veth-b addrgenmode none
	ip -n "$o" link set veth-o addrgenmode none
	ip -n "$b" addr add "$LAB_LINK4_B/32" dev veth-b
	ip -n "$b" addr add "$LAB_LINK6_B/128" dev veth-b nodad
	ip -n "$o" addr add "$LAB_LINK4_O/32" dev veth-o
	ip -n "$o" addr add "$LAB_LINK6_O/128" dev veth-o nodad
	for a in $LAB_UPSTREAM4; do
		ip -n "$o" addr add "$a/32" dev veth-o
	done
	for a in $LAB_UPSTREAM6; do
		ip -n "$o" addr add "$a/128" dev veth-o nodad
	done
	ip -n "$b" link set veth-b up
	ip -n "$o" link set veth-o up
	# Host routes for exactly the upstream addresses; no default route.
	for a in $LAB_UPSTREAM4; do
		ip -n "$b" route add "$a/32" dev veth-b src "$LAB_LINK4_B"
	done
	for a in $LAB_UPSTREAM6; do
		ip -n "$b" -6 route add "$a/128" dev veth-b src "$LAB_LINK6_B"
	done
	ip -n "$o" route add "$LAB_LINK4_B/32" dev veth-o
	ip -n "$o" -6 route add "$LAB_LINK6_B/128" dev veth-o
	lab_poll 10 lab__addr_ready "$b" veth-b "$LAB_LINK4_B" \
	    "$LAB_LINK6_B" || lab_fail "veth-b did not come up"
	# shellcheck disable=SC2086
	lab_poll 10 lab__addr_ready "$o" veth-o "$LAB_LINK4_O" \
	    "$LAB_LINK6_O" $LAB_UPSTREAM4 $LAB_UPSTREAM6 ||
	    lab_fail "veth-o did not come up"
	lab_vlog "network up"
}

# ---------------------------------------------------------------- PKI

# lab__cert NAME CN SAN: a server key and certificate signed by the lab CA.
lab__cert()
{
	local d=$LAB_DIR/pki name=$1 cn=$2 san=$3
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
	    -nodes -keyout "$d/$name.key" -out "$d/$name.csr" \
	    -subj "/CN=$cn" 2>/dev/null
	cat >"$d/$name.ext" <<-EOF
	basicConstraints = critical, CA:FALSE
	keyUsage = critical, digitalSignature
	extendedKeyUsage = serverAuth
	subjectAltName = ${san}
	EOF
	openssl x509 -req -in "$d/$name.csr" -CA "$d/ca.crt" \
	    -CAkey "$d/ca.key" -CAcreateserial -days 2 -sha256 \
	    -extfile "$d/$name.ext" -out "$d/$name.crt" 2>/dev/null
}

# Make the test CA (pki/ca.crt) and two server certificates: "good" names
# the weather hosts and the public and private upstream IPs; "other"
# names only other.example (served for SNI wrongcert.weather.example).
lab_pki_make()
{
	local d=$LAB_DIR/pki
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
	    -nodes -keyout "$d/ca.key" -out "$d/ca.crt" -days 2 -sha256 \
	    -subj "/CN=egressd lab CA $$" \
	    -addext "basicConstraints=critical,CA:TRUE" \
	    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
	lab__cert good api.weather.example "DNS:api.weather.example, DNS:*.weather.example, IP:$LAB_PUB4, IP:$LAB_PRIV4, IP:$LAB_META4, IP:$LAB_META6"
	lab__cert other other.example "DNS:other.example"
	LAB_CA=$d/ca.crt
}

# ---------------------------------------------------------------- content

lab_www_make()
{
	local w=$LAB_DIR/www
	# 100 bytes, recognisable.
	printf 'egressd-lab-small-%082d' 0 | head -c 100 >"$w/small"
	head -c $((50 * 1024 * 1024)) /dev/zero >"$w/large"
	printf 'ami-id: i-lab-metadata-secret\n' >"$w/meta"
}

# ---------------------------------------------------------------- nginx

lab__nginx_conf()
{
	local n=$LAB_DIR/nginx p=$LAB_DIR/pki w=$LAB_DIR/www
	cat <<-EOF
	user root;
	worker_processes 1;
	daemon off;
	pid $n/nginx.pid;
	error_log $n/error.log info;
	events { worker_connections 512; }
	http {
	    log_format lab '\$server_addr \$server_port \$scheme "\$host" '
	        '"\$ssl_server_name" "\$request" \$status \$body_bytes_sent '
	        '"\$request_completion"';
	    access_log $n/access.log lab;
	    client_body_temp_path $n/body;
	    proxy_temp_path $n/proxy;
	    fastcgi_temp_path $n/fastcgi;
	    uwsgi_temp_path $n/uwsgi;
	    scgi_temp_path $n/scgi;
	    default_type application/octet-stream;
	    sendfile on;
	    keepalive_timeout 30s;
	    # The slow-guest tests hold responses open for a while.
	    send_timeout 300s;
	    ssl_protocols TLSv1.2 TLSv1.3;

	    # The allowed upstreams: public and private addresses.
	    server {
	        listen $LAB_PUB4:80 default_server;
	        listen $LAB_PRIV4:80 default_server;
	        listen $LAB_PUB4:443 ssl default_server;
	        listen $LAB_PRIV4:443 ssl default_server;
	        server_name _;
	        ssl_certificate $p/good.crt;
	        ssl_certificate_key $p/good.key;
	        root $w;
	        location = /small { }
	        location = /large { }
	        location = /redirect { return 302 http://$LAB_META4/; }
	        location = /host { default_type text/plain;
	            return 200 "host=\$host sni=\$ssl_server_name\n"; }
	        location = /missing { return 404; }
	        # Static trees a scenario may fill: a dumb-HTTP git
	        # repository and a simple package index with its files.
	        location /git/ { }
	        location /simple/ { index index.html; }
	        location /packages/ { }
	        location = /headers { default_type text/plain;
	            return 200 "host=\$host te=[\$http_te] upgrade=[\$http_upgrade] pa=[\$http_proxy_authorization] ka=[\$http_keep_alive] foo=[\$http_x_foo] keep=[\$http_x_keep]\n"; }
	        location / { default_type text/plain;
	            return 200 "upstream \$server_addr\n"; }
	    }
	    # Same addresses, SNI wrongcert.weather.example: a certificate for
	    # another host.
	    server {
	        listen $LAB_PUB4:443 ssl;
	        listen $LAB_PRIV4:443 ssl;
	        server_name wrongcert.weather.example;
	        ssl_certificate $p/other.crt;
	        ssl_certificate_key $p/other.key;
	        root $w;
	        location / { try_files /small =404; }
	    }
	    # The metadata server. Its hit count must stay 0.
	    server {
	        listen $LAB_META4:80 default_server;
	        listen [$LAB_META6]:80 default_server;
	        listen $LAB_META4:443 ssl default_server;
	        listen [$LAB_META6]:443 ssl default_server;
	        server_name _;
	        ssl_certificate $p/good.crt;
	        ssl_certificate_key $p/good.key;
	        root $w;
	        location / { default_type text/plain; try_files /meta =404; }
	    }
	}
	EOF
}

lab__nginx_listening()
{
	local out a
	out=$(lab_ns_o ss -Htln) || return 1
	for a in "$LAB_PUB4:80" "$LAB_PRIV4:443" "$LAB_META4:80" \
	    "[$LAB_META6]:443"; do
		grep -qF "$a " <<<"$out" || return 1
	done
}

# Start nginx in the outside namespace with the generated configuration.
lab_nginx_start()
{
	local n=$LAB_DIR/nginx
	mkdir -p "$n/body" "$n/proxy" "$n/fastcgi" "$n/uwsgi" "$n/scgi"
	: >"$n/access.log"
	lab__nginx_conf >"$n/nginx.conf"
	lab_spawn nginx "$LAB_NS_O" nginx -e "$n/error.log" -p "$n" \
	    -c "$n/nginx.conf"
	lab_poll 10 lab__nginx_listening || {
		cat "$LAB_DIR/log/nginx.err" >&2
		lab_fail "nginx did not start listening"
	}
}

# lab_hits ADDR [PATH]: requests the upstream on ADDR served since the
# last lab_mark (all of them when PATH is empty, else those for PATH).
lab_hits()
{
	local addr=$1 path=${2:-}
	tail -n "+$((LAB_MARK_ACCESS + 1))" "$LAB_DIR/nginx/access.log" |
	    awk -v a="$addr" -v p="$path" '
		$1 == a && (p == "" || index($0, " " p " HTTP/") ||
		    index($0, " " p "?")) { n++ }
		END { print n + 0 }'
}

# lab_hits_total ADDR: every request ADDR served since lab_up.
lab_hits_total()
{
	awk -v a="$1" '$1 == a { n++ } END { print n + 0 }' \
	    "$LAB_DIR/nginx/access.log"
}

lab__hits_are() { [ "$(lab_hits "$1" "$3")" = "$2" ]; }

# lab_expect_hits ADDR N [PATH]: assert ADDR served exactly N requests
# since lab_mark. nginx logs a request when it finishes, so a positive
# count is polled for (up to 5 s); 0 is checked at once.
lab_expect_hits()
{
	local addr=$1 want=$2 path=${3:-}
	if [ "$want" != 0 ]; then
		lab_poll 5 lab__hits_are "$addr" "$want" "$path" || true
	fi
	lab_expect_eq "hits on $addr${path:+ $path}" "$want" \
	    "$(lab_hits "$addr" "$path")"
}

# Assert that no metadata address was ever hit since lab_up.
lab_expect_no_metadata_hits()
{
	lab_expect_eq "metadata hits (total) on $LAB_META4" 0 \
	    "$(lab_hits_total "$LAB_META4")"
	lab_expect_eq "metadata hits (total) on $LAB_META6" 0 \
	    "$(lab_hits_total "$LAB_META6")"
}

# lab_sni_seen ADDR: the SNI names of requests served on ADDR since
# lab_mark, one per line ("" when none was sent).
lab_sni_seen()
{
	tail -n "+$((LAB_MARK_ACCESS + 1))" "$LAB_DIR/nginx/access.log" |
	    awk -v a="$1" -F'"' '{ split($1, f, " ") }
		f[1] == a { print $4 }'
}

# ---------------------------------------------------------------- DNS

# lab_dns_set [NAME=ADDR[,ADDR...]]...: write the records (A for IPv4,
# AAAA for IPv6) and (re)start dnsmasq with exactly them. Every other name
# under .example is NXDOMAIN; anything else is REFUSED (no upstream).
lab_dns_set()
{
	local d=$LAB_DIR/dns rec name addrs a
	: >"$d/hosts.new"
	for rec in "$@"; do
		name=${rec%%=*}
		addrs=${rec#*=}
		IFS=, read -r -a a <<<"$addrs"
		for addrs in "${a[@]}"; do
			printf '%s %s\n' "$addrs" "$name" >>"$d/hosts.new"
		done
	done
	mv "$d/hosts.new" "$d/hosts"
	lab_dns_restart
}

lab__dns_ready()
{
	lab_ns_b "$LAB_PYTHON" "$LAB_SRC_DIR/dnsq.py" lab-probe.example A \
	    "$LAB_DNS_ADDR" "$LAB_DNS_PORT" >/dev/null 2>&1
}

# Restart dnsmasq (in the broker namespace, 127.0.0.1:5353) on the current
# hosts file, and wait until it answers.
lab_dns_restart()
{
	local d=$LAB_DIR/dns
	lab_stop dnsmasq
	touch "$d/query.log"
	lab_spawn dnsmasq "$LAB_NS_B" dnsmasq --conf-file=/dev/null \
	    --no-daemon --user=root --group=root \
	    --listen-address="$LAB_DNS_ADDR" --bind-interfaces \
	    --port="$LAB_DNS_PORT" --no-resolv --no-hosts --no-poll \
	    --addn-hosts="$d/hosts" --local=/example/ --cache-size=0 \
	    --local-ttl=0 --log-queries --log-facility="$d/query.log" \
	    --pid-file="$d/dnsmasq.pid"
	lab_poll 10 lab__dns_ready || {
		cat "$LAB_DIR/log/dnsmasq.err" >&2
		lab_fail "dnsmasq did not start answering"
	}
}

# lab_dns_count NAME TYPE: queries of TYPE (A, AAAA) for NAME that dnsmasq
# answered since the last lab_mark (probes excluded).
lab_dns_count()
{
	local name=${1%.} type=$2
	tail -n "+$((LAB_MARK_DNS + 1))" "$LAB_DIR/dns/query.log" |
	    awk -v q="query[$type]" -v n="$name" '
		{ for (i = 1; i < NF; i++)
			if ($i == q && ($(i + 1) == n || $(i + 1) == n "."))
				c++ }
		END { print c + 0 }'
}

# lab_dns_query NAME TYPE: ask dnsmasq from inside the broker namespace;
# print the rcode, then the addresses.
lab_dns_query()
{
	lab_ns_b "$LAB_PYTHON" "$LAB_SRC_DIR/dnsq.py" "$1" "$2" \
	    "$LAB_DNS_ADDR" "$LAB_DNS_PORT"
}

# lab_rebind_start NAME FIRST THEN: a DNS server on 127.0.0.1:5354 in the
# broker namespace that answers the first A query for NAME with FIRST and
# every later one with THEN (TTL 0; AAAA is NODATA). Its log of queries is
# dns/rebind.log ("A NAME" per line).
lab_rebind_start()
{
	: >"$LAB_DIR/dns/rebind.log"
	lab_spawn rebind-dns "$LAB_NS_B" "$LAB_PYTHON" \
	    "$LAB_SRC_DIR/rebind_dns.py" "$LAB_DNS_ADDR" "$LAB_REBIND_PORT" \
	    "$LAB_DIR/dns/rebind.log" "$1" "$2" "$3"
	lab_poll 10 test -s "$LAB_DIR/log/rebind-dns.out" ||
	    lab_fail "the rebinding DNS server did not start"
}

# lab_rebind_count TYPE NAME: queries the rebinding server answered.
lab_rebind_count()
{
	grep -cxF "$1 ${2%.}" "$LAB_DIR/dns/rebind.log" || true
}

# ---------------------------------------------------------------- gate

# lab_gate_start: an HTTP server on 93.184.216.34:8080 (outside namespace)
# that holds each request for /hold/KEY?to=URL until lab_gate_release KEY,
# then answers 302 Location: URL. Lets a test edit the configuration while
# one egress-fetch -L keeps its connection to the broker open.
lab_gate_start()
{
	mkdir -p "$LAB_DIR/gate"
	lab_spawn gate "$LAB_NS_O" "$LAB_PYTHON" "$LAB_SRC_DIR/gate_httpd.py" \
	    "$LAB_PUB4" "$LAB_GATE_PORT" "$LAB_DIR/gate"
	lab_poll 10 lab__gate_listening || lab_fail "the gate did not start"
}

lab__gate_listening()
{
	lab_ns_o ss -Htln | grep -qF "$LAB_PUB4:$LAB_GATE_PORT "
}

# lab_gate_wait KEY: wait until a request for /hold/KEY has arrived.
lab_gate_wait()
{
	lab_poll 10 test -e "$LAB_DIR/gate/$1.arrived" ||
	    lab_fail "no request reached the gate for $1"
}

# lab_gate_release KEY: let the held request for KEY answer.
lab_gate_release() { : >"$LAB_DIR/gate/$1.release"; }

# ---------------------------------------------------------------- config

LAB_CONF=
LAB_SOCK_DIR=
LAB_BROKER_LOG=

# lab_config_base: print the [broker], [resolver], [tls], [limits] and
# [plugins.*] sections for this lab (tests/data/integ/base.ini.in with the
# lab's paths substituted). Options: MAX_CONN (default 16), DNS_PORT.
lab_config_base()
{
	sed -e "s|@LAB_DIR@|$LAB_DIR|g" \
	    -e "s|@DNS@|$LAB_DNS_ADDR:${DNS_PORT:-$LAB_DNS_PORT}|g" \
	    -e "s|@MAX_CONN@|${MAX_CONN:-16}|g" \
	    "$LAB_DATA_DIR/base.ini.in"
}

# lab_entry INSTANCE PLUGIN HOSTS [ALLOW_PRIVATE] [PERMISSIONS]
# [ALLOW_LOOPBACK]: print one [plugins.entries.INSTANCE] section. HOSTS,
# ALLOW_PRIVATE and ALLOW_LOOPBACK are comma-separated lists (may be
# empty; egress_allow_loopback is written only when given); PERMISSIONS
# defaults to http_client. The manifest is packages/PLUGIN/manifest.ini.
lab_entry()
{
	local inst=$1 plugin=$2 hosts=$3 priv=${4:-} perms=${5-http_client}
	local loop=${6:-}
	printf '\n[plugins.entries.%s]\n' "$inst"
	printf 'plugin = %s\n' "$plugin"
	printf 'manifest = packages/%s/manifest.ini\n' "$plugin"
	printf 'permissions = %s\n' "$perms"
	printf 'egress_hosts = %s\n' "$hosts"
	printf 'egress_allow_private = %s\n' "$priv"
	if [ -n "$loop" ]; then
		printf 'egress_allow_loopback = %s\n' "$loop"
	fi
}

# lab_config_install: read a whole configuration on stdin and install it
# atomically (write, then rename) as etc/egressd.ini, with the fixture
# manifests in etc/packages/. Runs fine as the last part of a pipeline (a
# subshell): the paths it uses (LAB_CONF, LAB_SOCK_DIR, LAB_BROKER_LOG) are
# fixed by lab_init.
lab_config_install()
{
	local e=$LAB_DIR/etc
	if [ ! -d "$e/packages" ]; then
		cp -R "$LAB_DATA_DIR/packages" "$e/packages"
	fi
	cat >"$e/egressd.ini.new"
	mv -f "$e/egressd.ini.new" "$LAB_CONF"
}

# ---------------------------------------------------------------- egressd

# lab_need_bins: fail unless $EGRESSD and $EGRESS_FETCH are executables.
lab_need_bins()
{
	local v
	for v in EGRESSD EGRESS_FETCH; do
		[ -n "${!v:-}" ] || lab_fail "set $v to the built binary" \
		    "(the meson test() sets it)"
		[ -x "${!v}" ] || lab_fail "$v=${!v} is not an executable"
	done
}

lab__sockets_exist()
{
	local i
	lab_is_running egressd || return 0	# reported by the caller
	for i in "$@"; do
		[ -S "$LAB_SOCK_DIR/$i.sock" ] || return 1
	done
}

# lab_egressd_start INSTANCE...: start $EGRESSD -c $LAB_CONF --foreground
# in the broker namespace and wait until each INSTANCE's socket exists.
lab_egressd_start()
{
	lab_need_bins
	[ -f "$LAB_CONF" ] || lab_fail "lab_config_install first"
	local starts
	starts=$(lab__all_events egress.start | wc -l)
	lab_spawn egressd "$LAB_NS_B" "${LAB_EGRESSD_WRAP[@]}" "$EGRESSD" \
	    -c "$LAB_CONF" --foreground
	lab_poll 15 lab__sockets_exist "$@" || true
	lab_is_running egressd || {
		lab_stop egressd
		lab_fail "egressd exited at start (status $LAB_STOP_RC)"
	}
	lab__sockets_exist "$@" ||
	    lab_fail "egressd did not create the sockets for: $*"
	# The sockets exist before egress.start is written; a test that
	# reads egress.start must not race it.
	lab_poll 15 lab__start_logged "$starts" ||
	    lab_fail "egressd wrote no egress.start event"
	lab_mark
}

# lab__all_events EVENT: every EVENT object in the broker's log.
lab__all_events()
{
	[ -f "$LAB_BROKER_LOG" ] || return 0
	jq -cR --arg e "$1" 'fromjson? | select(.event == $e)' "$LAB_BROKER_LOG"
}

lab__start_logged() { [ "$(lab__all_events egress.start | wc -l)" -gt "$1" ]; }

# Stop egressd with SIGTERM; assert it exited 0.
lab_egressd_stop()
{
	lab_is_running egressd || lab_fail "egressd died during the test"
	lab_stop egressd TERM
	lab_expect_eq "egressd exit status after SIGTERM" 0 "$LAB_STOP_RC"
}

lab_egressd_pid() { printf '%s\n' "${LAB_PID[egressd]:-}"; }

# lab_egressd_rss_kb: the broker's resident set size (VmRSS, KiB).
lab_egressd_rss_kb()
{
	awk '/^VmRSS:/ { print $2 }' "/proc/${LAB_PID[egressd]}/status"
}

# ---------------------------------------------------------------- marks

LAB_MARK_ACCESS=0
LAB_MARK_DNS=0
LAB_MARK_LOG=0

lab__lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }

# lab_mark: start a new measuring window for lab_hits, lab_dns_count and
# the decision-log helpers.
lab_mark()
{
	LAB_MARK_ACCESS=$(lab__lines "$LAB_DIR/nginx/access.log")
	LAB_MARK_DNS=$(lab__lines "$LAB_DIR/dns/query.log")
	LAB_MARK_LOG=$(lab__lines "${LAB_BROKER_LOG:-/dev/null}")
}

# ---------------------------------------------------------------- log

# lab_events EVENT: the broker's EVENT objects since lab_mark, one compact
# JSON object per line (an incomplete last line is ignored).
lab_events()
{
	[ -f "$LAB_BROKER_LOG" ] || return 0
	tail -n "+$((LAB_MARK_LOG + 1))" "$LAB_BROKER_LOG" |
	    jq -cR --arg e "$1" 'fromjson? | select(.event == $e)'
}

lab_count_events() { lab_events "$1" | wc -l; }

lab__events_at_least() { [ "$(lab_count_events "$1")" -ge "$2" ]; }

# lab_wait_events EVENT N: wait (up to 10 s) for N EVENT events since
# lab_mark.
lab_wait_events()
{
	lab_poll 10 lab__events_at_least "$1" "$2" ||
	    lab_fail "want $2 $1 events since the mark," \
	    "have $(lab_count_events "$1")"
}

# lab_decision [N]: the Nth egress.decision since lab_mark (1-based;
# default: the last one), as compact JSON.
lab_decision()
{
	if [ -n "${1:-}" ]; then
		lab_events egress.decision | sed -n "${1}p"
	else
		lab_events egress.decision | tail -n 1
	fi
}

# lab_expect_decision INSTANCE VERDICT REASON [HOST] [N]: wait for the
# decision (the Nth since lab_mark, default: exactly one new one) and
# assert its instance, verdict, reason ("-" for none: an allow) and host.
lab_expect_decision()
{
	local inst=$1 verdict=$2 reason=$3 host=${4:-} n=${5:-} d got
	lab_wait_events egress.decision "${n:-1}"
	if [ -z "$n" ]; then
		got=$(lab_count_events egress.decision)
		[ "$got" = 1 ] ||
		    lab_fail "want 1 egress.decision since the mark, got $got"
	fi
	d=$(lab_decision "$n")
	lab_vlog "decision: $d"
	got=$(jq -r '[.instance, .verdict,
	    (if .verdict == "allow" then (.reason // "-") else .reason end),
	    .host] | map(tostring) | join(" ")' <<<"$d")
	lab_expect_eq "decision (instance verdict reason host)" \
	    "$inst $verdict $reason ${host:-$(jq -r '.host' <<<"$d")}" "$got"
	jq -e 'has("ts") and has("request_id") and has("plugin") and
	    has("transport") and has("port") and has("addresses")' \
	    <<<"$d" >/dev/null || lab_fail "decision event lacks a field: $d"
}

# lab_expect_decision_addresses ADDR,...: the last decision's addresses.
lab_expect_decision_addresses()
{
	lab_expect_eq "decision addresses" "$1" \
	    "$(lab_decision | jq -r '.addresses | join(",")')"
}

# lab_expect_log_valid: every line of the broker log is a JSON object with
# an "event"; no warning or free text anywhere.
lab_expect_log_valid()
{
	local bad
	bad=$(jq -cR 'fromjson? // "BAD" |
	    if type == "object" and has("event") then empty else . end' \
	    "$LAB_BROKER_LOG" | head -n 3)
	[ -z "$bad" ] || lab_fail "broker log has a non-event line: $bad"
	lab_ok "broker log is JSON lines"
}

# ---------------------------------------------------------------- fetch

LAB_FETCH_RC=
LAB_FETCH_OUT=
LAB_FETCH_ERR=

# lab_fetch INSTANCE [egress-fetch options] URL: run egress-fetch in the
# broker namespace against INSTANCE's socket (30 s hard limit, scaled),
# after a lab_mark, so the hit, DNS and log helpers then see this fetch
# only. Sets LAB_FETCH_RC, LAB_FETCH_OUT (body file) and LAB_FETCH_ERR
# (stderr text).
lab_fetch()
{
	local inst=$1
	shift
	lab_mark
	LAB_FETCH_ARGS_URL=${!#}
	LAB_FETCH_OUT=$LAB_DIR/fetch.out
	LAB_FETCH_RC=0
	lab_ns_b timeout -k 5 "$(egress_wait 30)" "${EGRESS_WRAP_CMD[@]}" \
	    "$EGRESS_FETCH" --socket "$LAB_SOCK_DIR/$inst.sock" "$@" \
	    >"$LAB_FETCH_OUT" 2>"$LAB_DIR/fetch.err" || LAB_FETCH_RC=$?
	LAB_FETCH_ERR=$(cat "$LAB_DIR/fetch.err")
	lab_vlog "fetch $inst $* -> $LAB_FETCH_RC $LAB_FETCH_ERR"
}

# lab_expect_fetch_ok [STATUS]: the last fetch exited 0 (a response
# arrived); with -i output, also check the status code.
lab_expect_fetch_ok()
{
	[ "$LAB_FETCH_RC" = 0 ] ||
	    lab_fail "egress-fetch exited $LAB_FETCH_RC: $LAB_FETCH_ERR"
	lab_ok "egress-fetch got a response"
	if [ -n "${1:-}" ]; then
		lab_expect_eq "response status" "$1" "$(lab_fetch_status)"
	fi
}

# lab_fetch_status: the status code of the last (-i) response.
lab_fetch_status()
{
	head -n 1 "$LAB_FETCH_OUT" | tr -d '\r' | awk '{ print $2 }'
}

# lab_expect_fetch_body_file FILE: the last body equals FILE byte for byte.
lab_expect_fetch_body_file()
{
	cmp -s "$1" "$LAB_FETCH_OUT" ||
	    lab_fail "body differs from ${1#"$LAB_DIR"/}"
	lab_ok "body equals ${1#"$LAB_DIR"/}"
}

# lab_expect_fetch_error CODE: the last fetch failed with guest-visible
# CODE: its documented exit status and "egress-fetch: CODE: " on stderr.
# For "denied", the masked policy message. Never a resolved address.
lab_expect_fetch_error()
{
	local code=$1 want=${LAB_EXIT_CODE[$1]} a
	[ "$LAB_FETCH_RC" = "$want" ] ||
	    lab_fail "egress-fetch: want exit $want ($code)," \
	    "got $LAB_FETCH_RC: $LAB_FETCH_ERR"
	grep -q "^egress-fetch: $code: " <<<"$LAB_FETCH_ERR" ||
	    lab_fail "stderr lacks 'egress-fetch: $code: ': $LAB_FETCH_ERR"
	if [ "$code" = denied ]; then
		grep -qF "$LAB_DENIED_MSG" <<<"$LAB_FETCH_ERR" ||
		    lab_fail "denied without the policy message: $LAB_FETCH_ERR"
	fi
	# egress-fetch may name the socket it was given (its own argument,
	# when that socket does not exist); nothing the broker said may
	# name a path or an address.
	local said
	said=$(sed -E "s|$LAB_SOCK_DIR/[A-Za-z0-9_.-]+\.sock: the socket does not exist||" <<<"$LAB_FETCH_ERR")
	for a in $LAB_UPSTREAM4 $LAB_UPSTREAM6 "$LAB_DIR"; do
		case ${LAB_FETCH_ARGS_URL:-} in *"$a"*) continue ;; esac
		! grep -qF "$a" <<<"$said" ||
		    lab_fail "the guest-visible error names $a: $LAB_FETCH_ERR"
	done
	lab_ok "egress-fetch failed with $code (exit $want)"
}

# ---------------------------------------------------------------- holds

declare -A LAB_HOLD_FD=()

# lab_hold_start NAME INSTANCE [options] URL: start egress-fetch in the
# background with its stdout on a pipe nobody reads (a stalled guest): it
# blocks once the pipe holds 64 KiB, and the broker's flow control must
# then stop reading the upstream. The process is recorded as hold-NAME.
lab_hold_start()
{
	local name=$1 inst=$2 fifo=$LAB_DIR/hold/$1.fifo fd
	shift 2
	mkfifo "$fifo"
	# The writer's open blocks until we open the read end below.
	lab_spawn "hold-$name" "$LAB_NS_B" sh -c 'exec "$@" >"$0"' "$fifo" \
	    "${EGRESS_WRAP_CMD[@]}" "$EGRESS_FETCH" \
	    --socket "$LAB_SOCK_DIR/$inst.sock" "$@"
	exec {fd}<"$fifo"
	LAB_HOLD_FD[$name]=$fd
}

# lab_hold_kill NAME: kill the held egress-fetch (its connection to the
# broker closes) and close our end of its pipe.
lab_hold_kill()
{
	lab_stop "hold-$1" KILL
	lab__hold_close "$1"
}

# lab_hold_drain NAME: read the held body to its end into hold/NAME.body
# and wait for egress-fetch; sets LAB_HOLD_RC.
lab_hold_drain()
{
	local fd=${LAB_HOLD_FD[$1]} pid=${LAB_PID[hold-$1]}
	timeout "$(egress_wait 60)" cat <&"$fd" >"$LAB_DIR/hold/$1.body" ||
	    true
	LAB_HOLD_RC=0
	wait "$pid" 2>/dev/null || LAB_HOLD_RC=$?
	unset "LAB_PID[hold-$1]"
	lab__hold_close "$1"
}

lab__hold_close()
{
	local fd=${LAB_HOLD_FD[$1]:-}
	[ -n "$fd" ] || return 0
	exec {fd}<&-
	unset "LAB_HOLD_FD[$1]"
}

# lab_upstream_conns PORT: established upstream connections nginx (or the
# gate) holds on local port PORT, seen from the outside namespace.
lab_upstream_conns()
{
	lab_ns_o ss -Htn state established "( sport = :$1 )" | wc -l
}

lab__conns_at_least() { [ "$(lab_upstream_conns "$1")" -ge "$2" ]; }

# lab_wait_upstream_conns PORT N: wait until N connections are established.
lab_wait_upstream_conns()
{
	lab_poll 15 lab__conns_at_least "$1" "$2" ||
	    lab_fail "want $2 upstream connections on :$1," \
	    "have $(lab_upstream_conns "$1")"
}

# ---------------------------------------------------------------- background

# lab_fetch_bg NAME INSTANCE [options] URL: start egress-fetch in the
# background (60 s hard limit, scaled) as process fetch-NAME. No
# lab_mark.
lab_fetch_bg()
{
	local name=$1 inst=$2
	shift 2
	lab_spawn "fetch-$name" "$LAB_NS_B" timeout -k 5 "$(egress_wait 60)" \
	    "${EGRESS_WRAP_CMD[@]}" "$EGRESS_FETCH" \
	    --socket "$LAB_SOCK_DIR/$inst.sock" "$@"
}

# lab_fetch_bg_wait NAME: wait for fetch-NAME; set LAB_FETCH_RC,
# LAB_FETCH_OUT and LAB_FETCH_ERR as lab_fetch does.
lab_fetch_bg_wait()
{
	local pid=${LAB_PID[fetch-$1]}
	LAB_FETCH_RC=0
	wait "$pid" 2>/dev/null || LAB_FETCH_RC=$?
	unset "LAB_PID[fetch-$1]"
	LAB_FETCH_OUT=$LAB_DIR/log/fetch-$1.out
	cp "$LAB_DIR/log/fetch-$1.err" "$LAB_DIR/fetch.err"
	LAB_FETCH_ERR=$(cat "$LAB_DIR/fetch.err")
	LAB_FETCH_ARGS_URL=
}

# lab_badpeer MODE INSTANCE: run badpeer.py MODE against INSTANCE's socket
# (see badpeer.py); set LAB_BADPEER_RC and LAB_BADPEER_OUT.
lab_badpeer()
{
	LAB_BADPEER_RC=0
	LAB_BADPEER_OUT=$(timeout "$(egress_wait 30)" "$LAB_PYTHON" \
	    "$LAB_SRC_DIR/badpeer.py" "$1" "$LAB_SOCK_DIR/$2.sock" 2>&1) ||
	    LAB_BADPEER_RC=$?
}

# lab_expect_close FIELD VALUE: the last egress.close since lab_mark has
# FIELD (connected, status, error) containing VALUE ("" for none).
lab_expect_close()
{
	local field=$1 want=$2 got
	lab_wait_events egress.close 1
	got=$(lab_events egress.close | tail -n 1 |
	    jq -r --arg f "$field" '.[$f] // "" | tostring')
	case $got in
	*"$want"*) lab_ok "close $field '$got' has '$want'" ;;
	*) lab_fail "close $field: want '$want' in '$got'" ;;
	esac
	[ -n "$want" ] || [ -z "$got" ] ||
	    lab_fail "close $field: want none, got '$got'"
}

# lab_finish: the checks every scenario ends with (no metadata hit ever,
# the broker log is JSON lines, egressd exits 0 on SIGTERM).
lab_finish()
{
	lab_expect_no_metadata_hits
	lab_expect_log_valid
	lab_egressd_stop
}

# lab__gone_sock PATH: the socket file no longer exists.
lab__gone_sock() { [ ! -e "$1" ]; }
