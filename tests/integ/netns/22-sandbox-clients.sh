#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Real, unmodified clients inside egress-sandbox --net (an unprivileged
# uid, a network namespace with only lo, the proxy variables pointing at
# the broker's listeners on 127.0.0.1:3128) against the lab's nginx: curl
# (http, and https through CONNECT), wget, Python urllib and requests,
# git clone of a dumb-HTTP repository over HTTPS, and pip download from a
# simple index over HTTPS, each given the lab CA with its own flag or
# variable. Each allowed fetch succeeds and each request for a host the
# instance is not granted fails with the tool's normal proxy error, with
# nothing reaching nginx. Then the bypasses reported on other sandboxes,
# each reaching nothing: curl --noproxy '*' to the public address and to
# a name, wget --no-proxy, a DNS lookup (no query reaches the lab's
# server), a CONNECT whose SNI differs from its host (curl --connect-to,
# openssl s_client -proxy), a ClientHello with Encrypted Client Hello, a
# CONNECT sent inside an allowed tunnel (nginx answers it, nothing else is
# reached), numeric-alias and IPv6-literal hosts (2130706433,
# [::ffff:169.254.169.254], [fd00:ec2::254]) and a Host header that
# differs from the absolute-form URL.
# Needs root (skips with 77 otherwise).
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
[ -x "${EGRESS_SANDBOX:-}" ] || lab_fail "set EGRESS_SANDBOX to the built binary"
# The sandboxed uid cannot run a python installed under /root.
PY=/usr/bin/python3
for t in "$PY" wget git; do
	command -v "$t" >/dev/null ||
	    lab_fail "missing $t (apt-get install -y python3 wget git)"
done
for m in requests pip; do
	"$PY" -c "import $m" 2>/dev/null ||
	    lab_fail "missing python3's $m (apt-get install -y python3-$m)"
done
lab_up

WU=64810
CTL=$LAB_DIR/run/control.sock
W=$LAB_DIR/work
# What the sandboxed uid reads: the clients, a DNS client, the lab CA.
mkdir -m 0755 "$LAB_DIR/bin"
install -m 0644 "$(dirname "$0")/22-sandbox-clients.py" "$LAB_DIR/bin/c.py"
install -m 0644 "$LAB_SRC_DIR/dnsq.py" "$LAB_DIR/bin/dnsq.py"
install -m 0644 "$LAB_DIR/pki/ca.crt" "$LAB_DIR/bin/ca.crt"
CA=$LAB_DIR/bin/ca.crt
install -d -m 0700 -o "$WU" -g "$WU" "$W"

lab_dns_set api.weather.example="$LAB_PUB4" \
    other.weather.example="$LAB_PUB4" api.radar.example="$LAB_PUB4"
{
	lab_config_base
	lab_entry weather weather "api.weather.example, other.weather.example"
	lab_entry radar radar "api.radar.example"
} | lab_config_install
lab_egressd_start weather radar

# The upstream's content: a dumb-HTTP git repository and a package index.
www=$LAB_DIR/www
git init -q --bare "$www/git/tiny.git"
git init -q "$LAB_DIR/src"
printf 'egressd lab repository\n' >"$LAB_DIR/src/README"
git -C "$LAB_DIR/src" add README
git -C "$LAB_DIR/src" -c user.name=lab -c user.email=lab@lab.example \
    commit -q -m "a commit"
git -C "$LAB_DIR/src" push -q "$www/git/tiny.git" HEAD:refs/heads/main
git -C "$www/git/tiny.git" symbolic-ref HEAD refs/heads/main
git -C "$www/git/tiny.git" update-server-info
WHL=egresslab_tiny-0.1-py3-none-any.whl
mkdir -p "$www/packages" "$www/simple/egresslab-tiny"
"$PY" - "$www/packages/$WHL" <<'PY'
import base64, hashlib, sys, zipfile
files = {
    "egresslab_tiny/__init__.py": b"VALUE = 1\n",
    "egresslab_tiny-0.1.dist-info/METADATA":
        b"Metadata-Version: 2.1\nName: egresslab-tiny\nVersion: 0.1\n",
    "egresslab_tiny-0.1.dist-info/WHEEL":
        b"Wheel-Version: 1.0\nGenerator: lab\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
}
rec = ""
for n, d in files.items():
    h = base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=")
    rec += "%s,sha256=%s,%d\n" % (n, h.decode(), len(d))
rec += "egresslab_tiny-0.1.dist-info/RECORD,,\n"
files["egresslab_tiny-0.1.dist-info/RECORD"] = rec.encode()
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for n, d in files.items():
        z.writestr(n, d)
PY
SHA=$(sha256sum "$www/packages/$WHL" | cut -d' ' -f1)
printf '<!DOCTYPE html>\n<html><body>\n<a href="/packages/%s#sha256=%s">%s</a>\n</body></html>\n' \
    "$WHL" "$SHA" "$WHL" >"$www/simple/egresslab-tiny/index.html"

# The runner's own trust and index settings would override the flags
# given below (requests prefers REQUESTS_CA_BUNDLE to pip's --cert).
UNSET=()
for v in REQUESTS_CA_BUNDLE CURL_CA_BUNDLE SSL_CERT_FILE SSL_CERT_DIR \
    NIX_SSL_CERT_FILE GIT_SSL_CAINFO PIP_CERT PIP_FIND_LINKS PIP_INDEX_URL \
    PIP_EXTRA_INDEX_URL PIP_NO_INDEX PIP_CONFIG_FILE; do
	UNSET+=(-u "$v")
done
# sb OUT COMMAND...: run COMMAND under egress-sandbox --net for weather
# as WU, in W with HOME=W; stdout and stderr to OUT.out and OUT.err,
# status in SB_RC.
sb()
{
	local out=$LAB_DIR/$1
	shift
	SB_RC=0
	lab_ns_b timeout -k 5 "$(egress_wait 60)" "$EGRESS_SANDBOX" \
	    --instance weather --net --control "$CTL" --user "$WU:$WU" \
	    --registry "$LAB_DIR/run/sandbox-registry" -- env "${UNSET[@]}" \
	    -C "$W" HOME="$W" PIP_CONFIG_FILE=/dev/null \
	    "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
	    "$@" >"$out.out" 2>"$out.err" || SB_RC=$?
}
# sb_ok WHAT OUT COMMAND...: sb, after a lab_mark; it must exit 0.
sb_ok()
{
	local what=$1
	shift
	lab_mark
	sb "$@"
	[ "$SB_RC" = 0 ] || lab_fail "$what: status $SB_RC:" \
	    "$(tail -n 5 "$LAB_DIR/$1.err")"
	lab_ok "$what: succeeded"
}
# sb_fails WHAT STATUS PATTERN OUT COMMAND...: sb, after a lab_mark; it
# must exit STATUS with PATTERN (grep -E; "" for any) in its stdout or
# stderr.
sb_fails()
{
	local what=$1 want=$2 pat=$3
	shift 3
	lab_mark
	sb "$@"
	lab_vlog "$what: $SB_RC $(cat "$LAB_DIR/$1.out" "$LAB_DIR/$1.err")"
	[ "$SB_RC" = "$want" ] || lab_fail "$what: status $SB_RC, want" \
	    "$want: $(tail -n 5 "$LAB_DIR/$1.out" "$LAB_DIR/$1.err")"
	[ -z "$pat" ] || cat "$LAB_DIR/$1.out" "$LAB_DIR/$1.err" |
	    grep -Eq -- "$pat" ||
	    lab_fail "$what: no '$pat' in: $(tail -n 5 "$LAB_DIR/$1.out" \
	    "$LAB_DIR/$1.err")"
	lab_ok "$what: failed (status $want)${pat:+, saying \"$pat\"}"
}
SMALL=$(cat "$www/small")
A=api.weather.example
D=api.radar.example

# ---- curl ------------------------------------------------------------------
sb_ok "curl http://$A/small" curl curl -sS --max-time 20 "http://$A/small"
lab_expect_eq "curl http body" "$SMALL" "$(cat "$LAB_DIR/curl.out")"
lab_expect_decision weather allow - "$A"
lab_expect_hits "$LAB_PUB4" 1 /small

sb_ok "curl https://$A/small (CONNECT)" curl curl -sS --max-time 20 \
    --cacert "$CA" "https://$A/small"
lab_expect_eq "curl https body" "$SMALL" "$(cat "$LAB_DIR/curl.out")"
lab_expect_decision weather allow - "$A"
lab_expect_eq "transport" tls-tunnel "$(lab_decision | jq -r .transport)"
lab_expect_hits "$LAB_PUB4" 1 /small
lab_expect_eq "SNI seen upstream" "$A" "$(lab_sni_seen "$LAB_PUB4")"

sb_fails "curl -f http://$D/ (not granted)" 22 "error: 403" curl \
    curl -sSf --max-time 20 "http://$D/small"
lab_expect_decision weather deny not-granted "$D"
lab_expect_hits "$LAB_PUB4" 0
sb_fails "curl https://$D/ (not granted)" 56 "CONNECT tunnel failed, response 403" \
    curl curl -sS --max-time 20 --cacert "$CA" "https://$D/small"
lab_expect_decision weather deny not-granted "$D"
lab_expect_hits "$LAB_PUB4" 0

# ---- wget ------------------------------------------------------------------
sb_ok "wget http://$A/small" wget wget -q -O - "http://$A/small"
lab_expect_eq "wget http body" "$SMALL" "$(cat "$LAB_DIR/wget.out")"
lab_expect_hits "$LAB_PUB4" 1 /small
sb_ok "wget https://$A/small" wget wget -q -O - --ca-certificate="$CA" \
    "https://$A/small"
lab_expect_eq "wget https body" "$SMALL" "$(cat "$LAB_DIR/wget.out")"
lab_expect_hits "$LAB_PUB4" 1 /small
sb_fails "wget http://$D/ (not granted)" 8 "403 Forbidden" wget \
    wget -O - "http://$D/small"
lab_expect_hits "$LAB_PUB4" 0
sb_fails "wget https://$D/ (not granted)" 4 "Forbidden" wget \
    wget -O - --ca-certificate="$CA" "https://$D/small"
lab_expect_hits "$LAB_PUB4" 0

# ---- Python urllib and requests --------------------------------------------
for lib in urllib requests; do
	sb_ok "$lib http://$A/small" py "$PY" "$LAB_DIR/bin/c.py" "$lib" \
	    "http://$A/small"
	lab_expect_eq "$lib http" "status 200 ${SMALL:0:18}" \
	    "$(cat "$LAB_DIR/py.out")"
	lab_expect_hits "$LAB_PUB4" 1 /small
	sb_ok "$lib https://$A/small" py "$PY" "$LAB_DIR/bin/c.py" "$lib" \
	    "https://$A/small" "$CA"
	lab_expect_eq "$lib https" "status 200 ${SMALL:0:18}" \
	    "$(cat "$LAB_DIR/py.out")"
	lab_expect_hits "$LAB_PUB4" 1 /small
	sb_ok "$lib http://$D/" py "$PY" "$LAB_DIR/bin/c.py" "$lib" \
	    "http://$D/small"
	lab_expect_eq "$lib http://$D/ (not granted)" "status 403" \
	    "$(cut -d' ' -f1,2 "$LAB_DIR/py.out")"
	lab_expect_hits "$LAB_PUB4" 0
	sb_ok "$lib https://$D/" py "$PY" "$LAB_DIR/bin/c.py" "$lib" \
	    "https://$D/small" "$CA"
	grep -Eq '^error (URLError|OSError|ProxyError): .*403' \
	    "$LAB_DIR/py.out" || lab_fail "$lib https://$D/: $(cat \
	    "$LAB_DIR/py.out")"
	lab_ok "$lib https://$D/ (not granted): $(cut -c1-60 "$LAB_DIR/py.out")"
	lab_expect_hits "$LAB_PUB4" 0
done

# ---- git clone over HTTPS (dumb HTTP) --------------------------------------
sb_ok "git clone https://$A/git/tiny.git" git env \
    GIT_SSL_CAINFO="$CA" git clone -q "https://$A/git/tiny.git" tiny
lab_expect_eq "the clone's README" "egressd lab repository" \
    "$(cat "$W/tiny/README")"
lab_expect_eq "the clone's commit" "$(git -C "$LAB_DIR/src" rev-parse HEAD)" \
    "$(git -C "$W/tiny" -c safe.directory='*' rev-parse HEAD)"
[ "$(lab_hits "$LAB_PUB4")" -ge 3 ] || lab_fail "git: too few requests"
lab_ok "git fetched $(lab_hits "$LAB_PUB4") files through the tunnel"
sb_fails "git clone https://$D/ (not granted)" 128 \
    "CONNECT tunnel failed, response 403" git env GIT_SSL_CAINFO="$CA" \
    git clone -q "https://$D/git/tiny.git" denied
lab_expect_hits "$LAB_PUB4" 0

# ---- pip download from a simple index over HTTPS ---------------------------
PIP=("$PY" -m pip download --no-deps
    --no-cache-dir --disable-pip-version-check --cert "$CA" -d "$W/pkgs")
sb_ok "pip download from https://$A/simple/" pip "${PIP[@]}" \
    --index-url "https://$A/simple/" egresslab-tiny
cmp -s "$www/packages/$WHL" "$W/pkgs/$WHL" || lab_fail "pip: no $WHL"
lab_ok "pip downloaded $WHL, byte for byte"
lab_expect_hits "$LAB_PUB4" 1 "/packages/$WHL"
# (pip reports a connection error when it retries: one retry.)
sb_fails "pip download from https://$D/simple/ (not granted)" 1 \
    "ProxyError.*Tunnel connection failed: 403" pip "${PIP[@]}" --retries 1 \
    --index-url "https://$D/simple/" egresslab-tiny
lab_expect_decision weather deny not-granted "$D" 2
lab_expect_hits "$LAB_PUB4" 0

# ---- the bypasses ------------------------------------------------------------
sb_fails "curl --noproxy '*' http://$LAB_PUB4/small" 7 "" curl curl -sS \
    --max-time 20 --noproxy '*' "http://$LAB_PUB4/small"
lab_expect_hits "$LAB_PUB4" 0

sb_fails "wget --no-proxy http://$LAB_PUB4/small" 4 "Network is unreachable" \
    wget wget --no-proxy -T 20 -t 1 -O - "http://$LAB_PUB4/small"
lab_expect_hits "$LAB_PUB4" 0
sb_fails "curl --noproxy '*' https://$A/small" 6 \
    "Could not resolve host: $A" curl curl -sS --max-time 20 --noproxy '*' \
    --cacert "$CA" "https://$A/small"
lab_expect_hits "$LAB_PUB4" 0

lab_mark
sb dns "$PY" "$LAB_DIR/bin/c.py" resolve "$A"
grep -q '^error gaierror' "$LAB_DIR/dns.out" ||
    lab_fail "a name resolved inside: $(cat "$LAB_DIR/dns.out")"
lab_ok "getaddrinfo inside: $(cat "$LAB_DIR/dns.out")"
lab_expect_eq "DNS queries that reached the lab's server" 0 \
    "$(lab_dns_count "$A" A)"
sb_fails "getent hosts $A" 2 "" getent getent hosts "$A"
lab_expect_eq "DNS queries that reached the lab's server" 0 \
    "$(lab_dns_count "$A" A)"
# The broker's resolver address is the broker's loopback, not the
# sandbox's: a query sent there by hand gets no answer.
sb_fails "a query to $LAB_DNS_ADDR:$LAB_DNS_PORT by hand" 1 "" dnsq "$PY" \
    "$LAB_DIR/bin/dnsq.py" "$A" A "$LAB_DNS_ADDR" "$LAB_DNS_PORT"
lab_expect_eq "DNS queries that reached the lab's server" 0 \
    "$(lab_dns_count "$A" A)"

sb_fails "curl --connect-to (SNI $A, CONNECT other.weather.example)" 35 "" \
    curl curl -sS --max-time 20 --cacert "$CA" \
    --connect-to "$A:443:other.weather.example:443" "https://$A/small"
lab_expect_decision weather deny sni-mismatch other.weather.example
lab_expect_hits "$LAB_PUB4" 0

# The same with openssl s_client, its CONNECT through -proxy.
lab_mark
# shellcheck disable=SC2016 # expanded by the inner shell
sb sclient sh -c 'openssl s_client -proxy 127.0.0.1:3128 -connect "$1" \
    -servername "$2" -CAfile "$3" </dev/null' sh "other.weather.example:443" \
    "$A" "$CA"
[ "$SB_RC" != 0 ] || lab_fail "openssl s_client: the tunnel was relayed"
lab_ok "openssl s_client (SNI $A, CONNECT other.weather.example): failed" \
    "(status $SB_RC)"
lab_expect_decision weather deny sni-mismatch other.weather.example
lab_expect_hits "$LAB_PUB4" 0

lab_mark
sb ech "$PY" "$LAB_DIR/bin/c.py" ech "$A"
lab_expect_eq "ClientHello with ECH" \
    "HTTP/1.1 200 Connection established, then closed" \
    "$(cat "$LAB_DIR/ech.out")"
lab_expect_decision weather deny ech "$A"
lab_expect_hits "$LAB_PUB4" 0

lab_mark
sb relay "$PY" "$LAB_DIR/bin/c.py" relay "$A" "$CA" "$LAB_META4:80"
lab_expect_eq "CONNECT inside an allowed tunnel" \
    "HTTP/1.1 200 Connection established, inside: HTTP/1.1 400 Bad Request" \
    "$(cat "$LAB_DIR/relay.out")"
lab_expect_decision weather allow - "$A"
lab_expect_hits "$LAB_PUB4" 1
lab_expect_eq "what nginx saw" "CONNECT $LAB_META4:80 HTTP/1.1" \
    "$(tail -n 1 "$LAB_DIR/nginx/access.log" | cut -d'"' -f6)"

# curl writes 2130706433 as 127.0.0.1 before it asks the proxy (and is
# denied that); the hand-made request gives the broker the alias itself,
# a non-canonical number it refuses to parse as a host (400).
for u in "http://2130706433/small 127.0.0.1 400 invalid-request" \
    "http://[::ffff:169.254.169.254]/small ::ffff:169.254.169.254 403 not-granted" \
    "http://[$LAB_META6]/small $LAB_META6 403 not-granted"; do
	read -r url host status reason <<<"$u"
	sb_fails "curl $url" 22 "error: 403" curl curl -sSf --max-time 20 "$url"
	lab_expect_decision weather deny not-granted "$host"
	lab_expect_hits "$LAB_PUB4" 0
	lab_mark
	sb get "$PY" "$LAB_DIR/bin/c.py" get "$url"
	lab_expect_eq "GET $url as written" "HTTP/1.1 $status" \
	    "$(cut -d' ' -f1,2 "$LAB_DIR/get.out")"
	lab_expect_eq "its decision" "weather deny $reason" \
	    "$(lab_decision | jq -r '"\(.instance) \(.verdict) \(.reason)"')"
	lab_expect_hits "$LAB_PUB4" 0
done

sb_fails "curl -H 'Host: $D' http://$A/host" 22 "error: 400" curl \
    curl -sSf --max-time 20 -H "Host: $D" "http://$A/host"
lab_expect_decision weather deny invalid-request "$A"
lab_expect_hits "$LAB_PUB4" 0

lab_finish
