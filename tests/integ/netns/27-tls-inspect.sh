#!/bin/bash
# SPDX-License-Identifier: ISC
#
# TLS inspection (tls_inspect = true) with real curl and the lab's nginx,
# through a proxy port: an entry that inspects is refused while its CA is
# missing, while the CA key is group-readable, and (the broker) while
# another user owns the key (the message names the
# file); `egressctl ca init` writes the CA; curl, trusting only the
# inspection CA, gets two answers over one CONNECT (one tls-inspect
# decision for the tunnel, then one decision per request); a Host that
# differs from the SNI inside the tunnel is refused (400, invalid-request,
# nothing reaches nginx); an upstream whose certificate names another
# host is still refused (502 tls-failed: inspection never weakens the
# broker's own verification); a CONNECT inside the tunnel is refused;
# an entry without tls_inspect still gets a byte tunnel (curl verifies
# nginx's own certificate end to end); a redirect inside the tunnel comes
# back untouched and is not followed; an IP-literal CONNECT without SNI
# gets a leaf for its address. A client of an inspected tunnel that
# reads nothing of a 50 MiB body makes the broker push back on the
# upstream (its RSS bounded), and then gets the body intact. Inspected
# handshakes in progress take the instance's handshake share (70 stalled:
# 64 held, 6 refused budget-exhausted; every unit back at the head
# timeout, and once closed). Then
# real clients inside
# egress-sandbox --net --inspect (an unprivileged uid): the CA bundle
# (system roots and the inspection CA, covering the system's bundle in
# the sandbox only, never a file on the host, even when the launcher is
# killed) is in SSL_CERT_FILE and the other
# clients' variables; curl (two requests, two decisions), Python
# requests and git clone over HTTPS succeed with no CA option of their
# own; --inspect for an
# instance that does not inspect is refused. A reload that turns
# tls_inspect on ends the entry's open byte tunnel (egress.close revoked,
# reason inspection-required); its next tunnel is inspected. Last, an
# inspected tunnel keeps to its CONNECT: a rotated token makes the next
# request inside 407 and closes it, and its stream_max_lifetime_ms ends
# it.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
. "$(dirname "$0")/../lab/curl.sh"
lab_init
lab_need_bins
[ -x "${EGRESSCTL:-}" ] || lab_fail "EGRESSCTL is not set"
[ -x "${EGRESS_SANDBOX:-}" ] || lab_fail "set EGRESS_SANDBOX to the built binary"
PY=/usr/bin/python3
command -v git >/dev/null || lab_fail "missing git (apt-get install -y git)"
"$PY" -c "import requests" 2>/dev/null ||
    lab_fail "missing python3's requests (apt-get install -y python3-requests)"
lab_up

lab_dns_set api.weather.example="$LAB_PUB4" \
    other.weather.example="$LAB_PUB4" \
    wrongcert.weather.example="$LAB_PUB4"
HOSTS="api.weather.example, other.weather.example, wrongcert.weather.example, $LAB_PUB4"
E=$LAB_DIR/etc
mkdir -p "$E"
(umask 077; printf 'weather-token-0123456789\n' >"$E/weather.token";
    printf 'plain-token-0123456789\n' >"$E/plain.token")
{
	lab_config_base
	lab_entry weather weather "$HOSTS"
	printf 'proxy_listen = 127.0.0.1:3128\nproxy_token_file = weather.token\n'
	printf 'tls_inspect = true\n'
	lab_entry plain weather "$HOSTS"
	printf 'proxy_listen = 127.0.0.1:3129\nproxy_token_file = plain.token\n'
} | lab_config_install
ctl() { lab_ns_b "$EGRESSCTL" -c "$LAB_CONF" "$@"; }

# No CA yet: the whole configuration is refused, naming the file.
rc=0
ctl check weather https://api.weather.example/ >"$LAB_DIR/ctl.out" \
    2>"$LAB_DIR/ctl.err" || rc=$?
lab_expect_eq "no inspection CA: refused" 3 "$rc"
grep -q "tls_inspect: .*$E/inspect-ca.pem does not exist" \
    "$LAB_DIR/ctl.err" 2>/dev/null ||
    grep -q "inspect_ca_cert: $E/inspect-ca.pem does not exist" \
    "$LAB_DIR/ctl.err" ||
    lab_fail "no message naming the CA file: $(cat "$LAB_DIR/ctl.err")"
lab_ok "the missing CA is named"

# ca init writes it (owned by root, the lab broker's user, even where an
# egressd user exists); a second init refuses without --force.
ctl ca init --owner root >"$LAB_DIR/ca.out" || lab_fail "ca init failed"
lab_expect_eq "key mode" 600 "$(stat -c %a "$E/inspect-ca.key")"
rc=0
ctl ca init >/dev/null 2>&1 || rc=$?
lab_expect_eq "ca init over an existing CA" 1 "$rc"
fp=$(ctl ca show | sed -n 's/^fingerprint //p')
lab_expect_eq "ca show fingerprint" \
    "sha256:$(openssl x509 -in "$E/inspect-ca.pem" -noout -fingerprint \
    -sha256 | sed 's/.*=//; s/://g' | tr A-F a-f)" "$fp"
openssl x509 -in "$E/inspect-ca.pem" -noout -text >"$LAB_DIR/ca.txt"
grep -q "CA:TRUE, pathlen:0" "$LAB_DIR/ca.txt" ||
    lab_fail "the CA is not CA:TRUE, pathlen:0"
lab_ok "the CA is a CA"

# A key its group may read: refused at load, naming the key file.
chmod 640 "$E/inspect-ca.key"
rc=0
ctl check weather https://api.weather.example/ >/dev/null \
    2>"$LAB_DIR/ctl.err" || rc=$?
lab_expect_eq "group-readable key: refused" 3 "$rc"
grep -q "inspect_ca_key: $E/inspect-ca.key is group- or world-accessible" \
    "$LAB_DIR/ctl.err" ||
    lab_fail "no message naming the key file: $(cat "$LAB_DIR/ctl.err")"
lab_ok "the group-readable key is named"
chmod 600 "$E/inspect-ca.key"

# A key another user owns (who may read it, and mint certificates the
# clients trust): the broker refuses to start, naming the file, even as
# root; egressctl, which may run as another user, checks the mode only.
chown 65534 "$E/inspect-ca.key"
rc=0
lab_ns_b timeout "$(egress_wait 30)" "$EGRESSD" -c "$LAB_CONF" -f \
    >/dev/null 2>"$LAB_DIR/egressd.err" || rc=$?
lab_expect_eq "a key another user owns: the broker refuses" 1 "$rc"
grep -q "inspect_ca_key: $E/inspect-ca.key is owned by another user than the broker's" \
    "$LAB_DIR/egressd.err" ||
    lab_fail "no message naming the key's owner: $(cat "$LAB_DIR/egressd.err")"
lab_ok "a key another user owns is refused at start"
chown 0 "$E/inspect-ca.key"

lab_egressd_start weather plain
lab_wait_port 3128 3129
ICA=$E/inspect-ca.pem
CA=$LAB_DIR/pki/ca.crt
W=(-x http://127.0.0.1:3128 --proxy-user w:weather-token-0123456789)
P=(-x http://127.0.0.1:3129 --proxy-user p:plain-token-0123456789)
pcurl()
{
	lab_mark
	LAB_CURL_OUT=$LAB_DIR/curl.out
	LAB_CURL_HDR=$LAB_DIR/curl.hdr
	LAB_CURL_RC=0
	LAB_CURL_STATUS=$(lab_ns_b timeout -k 5 "$(egress_wait 30)" \
	    curl -sS -o "$LAB_CURL_OUT" -D "$LAB_CURL_HDR" -w '%{http_code}' \
	    "$@" 2>"$LAB_DIR/curl.err") || LAB_CURL_RC=$?
}
tuple='"\(.instance) \(.verdict) \(.transport) \(.host) \(.port)"'

# Two requests over one inspected tunnel: curl trusts only the
# inspection CA, so the answer's certificate is the broker's leaf.
pcurl "${W[@]}" --cacert "$ICA" https://api.weather.example/small \
    -o "$LAB_DIR/curl2.out" https://api.weather.example/host
lab_expect_curl 200200
lab_expect_eq "the second answer" \
    "host=api.weather.example sni=api.weather.example" \
    "$(cat "$LAB_DIR/curl2.out")"
lab_expect_eq "one CONNECT" 1 \
    "$(grep -c '^HTTP/1.1 200 Connection established' "$LAB_CURL_HDR")"
lab_expect_eq "two answers" 2 "$(grep -c '^HTTP/1.1 200 OK' "$LAB_CURL_HDR")"
lab_wait_events egress.decision 3
lab_expect_eq "decisions" \
"weather allow tls-inspect api.weather.example 443
weather allow http api.weather.example 443
weather allow http api.weather.example 443" \
    "$(lab_events egress.decision | jq -r "$tuple")"
lab_expect_hits "$LAB_PUB4" 1 /small
lab_expect_hits "$LAB_PUB4" 1 /host
lab_expect_eq "the broker's SNI upstream" api.weather.example \
    "$(lab_sni_seen "$LAB_PUB4" | sort -u)"
lab_ns_b timeout 20 openssl s_client -proxy 127.0.0.1:3128 \
    -proxy_user w -proxy_pass pass:weather-token-0123456789 \
    -connect api.weather.example:443 -servername api.weather.example \
    -alpn h2,http/1.1 </dev/null >"$LAB_DIR/s_client.out" 2>&1 || true
grep -q "ALPN protocol: http/1.1" "$LAB_DIR/s_client.out" ||
    lab_fail "ALPN is not http/1.1: $(cat "$LAB_DIR/s_client.out")"
lab_ok "ALPN offers http/1.1 only"
lab_ns_b openssl x509 -noout -text -in <(sed -n \
    '/BEGIN CERT/,/END CERT/p' "$LAB_DIR/s_client.out") >"$LAB_DIR/leaf.txt"
grep -q "DNS:api.weather.example" "$LAB_DIR/leaf.txt" ||
    lab_fail "the leaf does not name api.weather.example"
grep -q "Issuer: CN = egressd inspection CA" "$LAB_DIR/leaf.txt" ||
    lab_fail "the leaf is not the inspection CA's"
lab_ok "the leaf names the host and is the inspection CA's"

# An IP-literal host (curl sends no SNI for it): a leaf for the address.
pcurl "${W[@]}" --cacert "$ICA" "https://$LAB_PUB4/small"
lab_expect_curl 200
lab_wait_events egress.decision 2
lab_expect_eq "IP-literal decisions" "weather allow tls-inspect $LAB_PUB4 443
weather allow http $LAB_PUB4 443" "$(lab_events egress.decision | jq -r "$tuple")"
lab_expect_hits "$LAB_PUB4" 1 /small

# A Host that differs from the SNI, inside the tunnel: refused.
pcurl "${W[@]}" --cacert "$ICA" -H 'Host: other.weather.example' \
    https://api.weather.example/host
lab_expect_curl 400
lab_wait_events egress.decision 2
lab_expect_eq "Host mismatch decision" \
    "weather deny http api.weather.example 443 invalid-request Host header differs from the authority" \
    "$(lab_decision | jq -r "$tuple"' + " \(.reason) \(.detail)"')"
lab_expect_hits "$LAB_PUB4" 0

# A redirect to the metadata address inside the tunnel: returned
# untouched, never followed by the broker.
pcurl "${W[@]}" --cacert "$ICA" https://api.weather.example/redirect
lab_expect_curl 302
lab_expect_curl_header Location "http://$LAB_META4/"
lab_expect_hits "$LAB_META4" 0

# An upstream certificate for another name: still refused.
pcurl "${W[@]}" --cacert "$ICA" https://wrongcert.weather.example/small
lab_expect_curl 502
lab_expect_curl_header X-Egress-Error tls-failed
lab_expect_hits "$LAB_PUB4" 0

# A CONNECT inside the inspected tunnel is not relayed.
pcurl "${W[@]}" --cacert "$ICA" -X CONNECT \
    --request-target other.weather.example:443 https://api.weather.example/
lab_expect_curl 405
lab_expect_hits "$LAB_PUB4" 0

# Without tls_inspect: a byte tunnel, nginx's own certificate.
pcurl "${P[@]}" --cacert "$CA" https://api.weather.example/small
lab_expect_curl 200
lab_wait_events egress.close 1
lab_expect_eq "plain tunnel" "plain allow tls-tunnel api.weather.example 443" \
    "$(lab_decision | jq -r "$tuple")"
pcurl "${P[@]}" --cacert "$ICA" https://api.weather.example/small
[ "$LAB_CURL_RC" != 0 ] ||
    lab_fail "the uninspected tunnel answered with the inspection CA"
lab_ok "the uninspected tunnel is not terminated"

# ---- a slow reader inside an inspected tunnel ------------------------------
# The client of an inspected tunnel asks for the 50 MiB body and reads
# nothing: back-pressure reaches the upstream (nginx's send queue fills,
# it never finishes the response) and the broker's RSS stays within
# LAB_RSS_GROWTH_KB (default 24 MiB) of its warmed-up size; once the
# client reads, the body arrives intact.
cat >"$LAB_DIR/tunnel.py" <<'PY'
import base64, hashlib, os, socket, ssl, sys, time
mode, port, auth, cafile, path, out = sys.argv[1:7]
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
s.connect(('127.0.0.1', int(port)))
s.settimeout(60)
s.sendall(b'CONNECT api.weather.example:443 HTTP/1.1\r\n'
          b'Host: api.weather.example:443\r\n'
          b'Proxy-Authorization: Basic ' +
          base64.b64encode(auth.encode()) + b'\r\n\r\n')
ans = b''
while b'\r\n\r\n' not in ans:
    ans += s.recv(1)
if not ans.startswith(b'HTTP/1.1 200'):
    print('NO', ans, flush=True)
    sys.exit(1)
t = ssl.create_default_context(cafile=cafile).wrap_socket(
    s, server_hostname='api.weather.example')
def get():
    t.sendall(b'GET ' + path.encode() + b' HTTP/1.1\r\n'
              b'Host: api.weather.example\r\n\r\n')
    print('SENT', flush=True)
def answer():
    data = b''
    while b'\r\n\r\n' not in data:
        data += t.recv(65536)
    head, _, body = data.partition(b'\r\n\r\n')
    n = [int(l.split(b':')[1]) for l in head.split(b'\r\n')
         if l.lower().startswith(b'content-length:')][0]
    h = hashlib.sha256(body)
    got = len(body)
    while got < n:
        b = t.recv(1 << 20)
        if not b:
            break
        h.update(b)
        got += len(b)
    return head, got, h.hexdigest()
get()
if mode == 'slow':
    while not os.path.exists(out + '.release'):
        time.sleep(0.05)
    head, got, digest = answer()
    open(out, 'w').write('%d %s\n' % (got, digest))
    sys.exit(0)
head, got, digest = answer()
print('READY' if head.startswith(b'HTTP/1.1 200') else 'NO', flush=True)
def status():
    # The next answer's status code, or CLOSED when the connection ends.
    data = b''
    try:
        while b'\r\n\r\n' not in data:
            b = t.recv(65536)
            if not b:
                return 'CLOSED'
            data += b
    except (OSError, ssl.SSLError):
        return 'CLOSED'
    head, _, body = data.partition(b'\r\n\r\n')
    n = [int(l.split(b':')[1]) for l in head.split(b'\r\n')
         if l.lower().startswith(b'content-length:')][0]
    while len(body) < n:
        body += t.recv(65536)
    return head.split(b' ')[1].decode()
if mode == 'again':
    # One request more once released; then whatever comes.
    while not os.path.exists(out + '.release'):
        time.sleep(0.05)
    get()
    print(status(), flush=True)
    print(status(), flush=True)
    sys.exit(0)
if mode == 'life':
    # Requests one after another until the connection ends.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            get()
        except (OSError, ssl.SSLError):
            print('CLOSED', flush=True)
            sys.exit(0)
        st = status()
        if st != '200':
            print(st, flush=True)
            sys.exit(0)
        time.sleep(0.2)
    print('OPEN', flush=True)
    sys.exit(0)
try:
    while t.recv(65536):
        pass
    print('CLOSED', flush=True)
except socket.timeout:
    print('TIMEOUT', flush=True)
except (OSError, ssl.SSLError):
    print('CLOSED', flush=True)
PY
BOUND_KB=${LAB_RSS_GROWTH_KB:-24576}
pcurl "${W[@]}" --cacert "$ICA" https://api.weather.example/large
lab_expect_curl 200
rm -f "$LAB_CURL_OUT"
base=$(lab_egressd_rss_kb)
lab_log "broker RSS after an inspected warm-up: $base KiB"
lab_mark
lab_spawn slow "$LAB_NS_B" "$LAB_PYTHON" "$LAB_DIR/tunnel.py" slow 3128 \
    w:weather-token-0123456789 "$ICA" /large "$LAB_DIR/slow.result"
inspected_stalled()
{
	local q
	q=$(lab_ns_o ss -Htn state established "( sport = :443 )" |
	    awk '{ if ($2 > m) m = $2 } END { print m + 0 }')
	[ "$q" -gt 0 ] && [ "$(lab_hits "$LAB_PUB4" /large)" = 0 ]
}
lab_poll 30 inspected_stalled ||
    lab_fail "a slow reader in an inspected tunnel: the upstream never saw back-pressure"
lab_ok "a slow reader in an inspected tunnel: back-pressure reached the upstream"
max=0
i=0
while [ "$i" -lt 20 ]; do
	rss=$(lab_egressd_rss_kb)
	[ "$rss" -le "$max" ] || max=$rss
	inspected_stalled ||
	    lab_fail "the stall ended while the inspected client read nothing"
	i=$((i + 1))
	sleep 0.1	# sampling interval, not a wait for a condition
done
lab_log "broker RSS while the inspected client stalls: max $max KiB"
[ $((max - base)) -le "$BOUND_KB" ] ||
    lab_fail "RSS grew by $((max - base)) KiB (bound $BOUND_KB KiB)"
lab_ok "inspected slow reader: RSS growth $((max - base)) KiB within $BOUND_KB KiB"
: >"$LAB_DIR/slow.result.release"
lab_poll 60 test -s "$LAB_DIR/slow.result" ||
    lab_fail "the inspected slow client never got the whole body"
lab_stop slow
lab_expect_eq "body the inspected slow client read" \
    "$(stat -c %s "$LAB_DIR/www/large") $(sha256sum <"$LAB_DIR/www/large" | cut -d' ' -f1)" \
    "$(cat "$LAB_DIR/slow.result")"
lab_expect_hits "$LAB_PUB4" 1 /large

# ---- inspected handshakes take the instance's handshake share ------------
# Each inspected tunnel's server-side handshake takes a unit of the
# instance's share of TLS handshakes in progress (64 at most) until it is
# done. 70 tunnels whose client sends its ClientHello and stops: 64 get
# the broker's answer and hold their unit, 6 are closed and logged
# budget-exhausted. A handshake that is not done by the head timeout
# (10 s) is closed then (logged 408), and its unit is back at once, not
# at the idle timeout: right after the 64 timeouts are logged, 64 new
# stalled handshakes all get their answer. Once their clients close,
# every unit has come back again.
cat >"$LAB_DIR/stall.py" <<'PY'
import base64, os, socket, ssl, sys, time
port, auth, n, release = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
held = refused = 0
keep = []
for i in range(n):
    s = socket.create_connection(('127.0.0.1', int(port)))
    s.settimeout(30)
    s.sendall(b'CONNECT api.weather.example:443 HTTP/1.1\r\n'
              b'Host: api.weather.example:443\r\n'
              b'Proxy-Authorization: Basic ' +
              base64.b64encode(auth.encode()) + b'\r\n\r\n')
    ans = b''
    while b'\r\n\r\n' not in ans:
        b = s.recv(1)
        if not b:
            break
        ans += b
    if not ans.startswith(b'HTTP/1.1 200'):
        print('NO', i, ans, flush=True)
        sys.exit(1)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    o = ctx.wrap_bio(inc, out, server_hostname='api.weather.example')
    try:
        o.do_handshake()
    except ssl.SSLWantReadError:
        pass
    s.sendall(out.read())
    # A handshake the broker holds gets its first flight; a refused one
    # is closed.
    try:
        got = s.recv(65536)
    except OSError:
        got = b''
    if got:
        held += 1
    else:
        refused += 1
    keep.append((s, o))
print('held %d refused %d' % (held, refused), flush=True)
while release != '-' and not os.path.exists(release):
    time.sleep(0.05)
PY
rm -f "$LAB_DIR/stall.release"
lab_mark
lab_spawn stall "$LAB_NS_B" "$LAB_PYTHON" "$LAB_DIR/stall.py" 3128 \
    w:weather-token-0123456789 70 "$LAB_DIR/stall.release"
lab_poll 60 grep -q '^held' "$LAB_DIR/log/stall.out" ||
    lab_fail "the stalled handshakes did not finish starting: $(cat "$LAB_DIR/log/stall."*)"
lab_expect_eq "70 stalled inspected handshakes" "held 64 refused 6" \
    "$(cat "$LAB_DIR/log/stall.out")"
lab_wait_events egress.proxy 6
lab_expect_eq "refusals logged" "6 weather 503 budget-exhausted" \
    "$(lab_events egress.proxy | jq -r '[.instance, .status, .error] | @tsv' |
    sort | uniq -c | awk '{ print $1, $2, $3, $4 }')"
stall_again()
{
	lab_ns_b "$LAB_PYTHON" "$LAB_DIR/stall.py" 3128 \
	    w:weather-token-0123456789 64 - >"$LAB_DIR/stall2.out" 2>&1 &&
	    grep -q '^held 64 refused 0$' "$LAB_DIR/stall2.out"
}
stall_timeouts() { [ "$(lab_events egress.proxy | jq -r 'select(.status ==
    408) | .error' | grep -c '^timeout$')" -ge 64 ]; }
lab_poll 40 stall_timeouts ||
    lab_fail "the stalled handshakes were not ended by the head timeout"
stall_again ||
    lab_fail "units still held after the head timeout: $(cat "$LAB_DIR/stall2.out")"
lab_ok "a handshake ended by the head timeout gives its unit back at once"
touch "$LAB_DIR/stall.release"
lab_stop stall
lab_poll 30 stall_again ||
    lab_fail "the units did not come back: $(cat "$LAB_DIR/stall2.out")"
lab_ok "inspected handshakes hold the instance's share while in progress, and give it back"

# ---- egress-sandbox --net --inspect ----------------------------------------
WU=64811
CTL=$LAB_DIR/run/control.sock
W=$LAB_DIR/work
install -d -m 0700 -o "$WU" -g "$WU" "$W"
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
UNSET=()
for v in REQUESTS_CA_BUNDLE CURL_CA_BUNDLE SSL_CERT_FILE SSL_CERT_DIR \
    GIT_SSL_CAINFO PIP_CERT NODE_EXTRA_CA_CERTS; do
	UNSET+=(-u "$v")
done
# sb INSTANCE OUT COMMAND...: run COMMAND under egress-sandbox --net
# --inspect as WU, in W; stdout and stderr to OUT.out and OUT.err, status
# in SB_RC.
sb()
{
	local inst=$1 out=$LAB_DIR/$2
	shift 2
	lab_mark
	SB_RC=0
	env "${UNSET[@]}" ip netns exec "$LAB_NS_B" timeout -k 5 \
	    "$(egress_wait 60)" "$EGRESS_SANDBOX" --instance "$inst" --net \
	    --inspect --control "$CTL" --user "$WU:$WU" \
	    --registry "$LAB_DIR/run/sandbox-registry" -- env -C "$W" \
	    HOME="$W" \
	    "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
	    "$@" >"$out.out" 2>"$out.err" || SB_RC=$?
}
sb_ok()
{
	local what=$1
	shift
	sb "$@"
	[ "$SB_RC" = 0 ] || lab_fail "$what: status $SB_RC:" \
	    "$(tail -n 5 "$LAB_DIR/$2.err")"
	lab_ok "$what: succeeded"
}
A=api.weather.example

ROOTS=/etc/ssl/certs/ca-certificates.crt
roots_sum=$(sha256sum <"$ROOTS")
# What /tmp held before (another run's leftovers are not this one's).
tmp_before=$(find /tmp -maxdepth 1 -name 'egress-sandbox-*' | sort)
sb_ok "the bundle's variables" weather env sh -c \
    'for v in SSL_CERT_FILE CURL_CA_BUNDLE REQUESTS_CA_BUNDLE GIT_SSL_CAINFO PIP_CERT NODE_EXTRA_CA_CERTS; do printenv "$v"; done | sort -u; find /tmp -maxdepth 1 -name "egress-sandbox-*" | sort | tr "\\n" " "; echo; cat "$SSL_CERT_FILE"'
lab_expect_eq "every variable names the system bundle, covered" "$ROOTS" \
    "$(head -n 1 "$LAB_DIR/env.out")"
lab_expect_eq "no bundle file in the host's /tmp while the command runs" \
    "$(printf '%s\n' "$tmp_before" | tr '\n' ' ' | sed 's/^ $//')" \
    "$(sed -n 2p "$LAB_DIR/env.out")"
grep -qF "$(sed -n 2p "$ICA")" "$LAB_DIR/env.out" ||
    lab_fail "the bundle lacks the inspection CA"
[ "$(grep -c 'BEGIN CERTIFICATE' "$LAB_DIR/env.out")" -gt 1 ] ||
    lab_fail "the bundle lacks the system roots"
lab_expect_eq "the host's own root bundle, unchanged" "$roots_sum" \
    "$(sha256sum <"$ROOTS")"
lab_ok "one bundle with the system roots and the inspection CA, in the sandbox only"

sb_ok "curl, two requests" weather curl curl -sS --max-time 20 \
    -w '%{http_code}\n' -o /dev/null "https://$A/small" -o /dev/null \
    "https://$A/host"
lab_expect_eq "curl statuses" "200
200" "$(cat "$LAB_DIR/curl.out")"
lab_wait_events egress.decision 3
lab_expect_eq "curl decisions" "weather allow tls-inspect $A 443
weather allow http $A 443
weather allow http $A 443" "$(lab_events egress.decision | jq -r "$tuple")"
lab_expect_hits "$LAB_PUB4" 1 /small

sb_ok "python requests" weather py "$PY" -c \
    "import requests; r = requests.get('https://$A/host', timeout=20); print(r.status_code, r.text)"
lab_expect_eq "requests answer" "200 host=$A sni=$A" "$(cat "$LAB_DIR/py.out")"
lab_wait_events egress.decision 2
lab_expect_eq "requests decisions" "weather allow tls-inspect $A 443
weather allow http $A 443" "$(lab_events egress.decision | jq -r "$tuple")"

sb_ok "git clone" weather git git clone -q "https://$A/git/tiny.git" tiny
lab_expect_eq "the clone" "egressd lab repository" "$(cat "$W/tiny/README")"
[ "$(lab_events egress.decision | jq -r .transport | grep -c '^http$')" -ge 2 ] ||
    lab_fail "git's requests were not decided one by one"
lab_ok "git's requests decided one by one"

sb plain refused true
lab_expect_eq "--inspect without tls_inspect" 3 "$SB_RC"
grep -q "does not inspect" "$LAB_DIR/refused.err" ||
    lab_fail "no reason given: $(cat "$LAB_DIR/refused.err")"
lab_ok "--inspect without tls_inspect is refused"

# A launcher killed while its command runs leaves nothing behind either.
rm -f "$LAB_DIR/killed.ready"
env "${UNSET[@]}" ip netns exec "$LAB_NS_B" "$EGRESS_SANDBOX" \
    --instance weather --net --inspect --control "$CTL" --user "$WU:$WU" \
    --registry "$LAB_DIR/run/sandbox-registry" -- sh -c \
    'echo ready; exec sleep 600' >"$LAB_DIR/killed.ready" 2>&1 &
killed=$!
lab_poll 15 grep -q ready "$LAB_DIR/killed.ready" ||
    lab_fail "the sandbox did not start: $(cat "$LAB_DIR/killed.ready")"
kill -KILL "$killed"
wait "$killed" 2>/dev/null || :
pkill -KILL -u "$WU" sleep 2>/dev/null || :
lab_expect_eq "files in /tmp after a killed launcher" "$tmp_before" \
    "$(find /tmp -maxdepth 1 -name 'egress-sandbox-*' | sort)"
lab_expect_eq "the host's root bundle after a killed launcher" \
    "$roots_sum" "$(sha256sum <"$ROOTS")"
lab_ok "a killed launcher leaves no bundle behind"

# ---- a reload that turns tls_inspect on ends open byte tunnels -------------
lab_spawn hold "$LAB_NS_B" "$LAB_PYTHON" "$LAB_DIR/tunnel.py" hold 3129 \
    p:plain-token-0123456789 "$CA" /small -
lab_poll 15 grep -q READY "$LAB_DIR/log/hold.out" ||
    lab_fail "the byte tunnel did not relay: $(cat "$LAB_DIR/log/hold."*)"
lab_mark
{
	lab_config_base
	lab_entry weather weather "$HOSTS"
	printf 'proxy_listen = 127.0.0.1:3128\nproxy_token_file = weather.token\n'
	printf 'tls_inspect = true\n'
	lab_entry plain weather "$HOSTS"
	printf 'proxy_listen = 127.0.0.1:3129\nproxy_token_file = plain.token\n'
	printf 'tls_inspect = true\n'
} | lab_config_install
kill -HUP "$(lab_egressd_pid)"
lab_poll 10 lab__gone "${LAB_PID[hold]}" ||
    lab_fail "the byte tunnel stayed open once its entry inspects"
lab_stop hold
lab_expect_eq "the client saw its byte tunnel closed" "SENT READY CLOSED" \
    "$(paste -sd ' ' "$LAB_DIR/log/hold.out")"
lab_expect_close error revoked
lab_expect_close reason inspection-required
# A new tunnel of that entry is inspected now.
pcurl "${P[@]}" --cacert "$ICA" https://api.weather.example/small
lab_expect_curl 200

# ---- an inspected tunnel keeps to its CONNECT's token and lifetime -------
# The token rotated: the next request inside the tunnel is 407, and the
# connection closes, as on the port.
lab_spawn again "$LAB_NS_B" "$LAB_PYTHON" "$LAB_DIR/tunnel.py" again 3128 \
    w:weather-token-0123456789 "$ICA" /small "$LAB_DIR/again"
lab_poll 15 grep -q READY "$LAB_DIR/log/again.out" ||
    lab_fail "the inspected tunnel did not answer: $(cat "$LAB_DIR/log/again."*)"
(umask 077; printf 'rotated-token-0123456789\n' >"$E/weather.token.new" &&
    mv "$E/weather.token.new" "$E/weather.token")
: >"$LAB_DIR/again.release"
lab_poll 15 lab__gone "${LAB_PID[again]}" ||
    lab_fail "the inspected tunnel's client hung"
lab_stop again
lab_expect_eq "a request inside the tunnel after the token rotated" \
    "SENT READY SENT 407 CLOSED" "$(paste -sd ' ' "$LAB_DIR/log/again.out")"
# The tunnel's lifetime is over: no request more, the connection closes.
lab_mark
{
	lab_config_base
	lab_entry weather weather "$HOSTS"
	printf 'proxy_listen = 127.0.0.1:3128\nproxy_token_file = weather.token\n'
	printf 'tls_inspect = true\nstream_max_lifetime_ms = 2000\n'
	lab_entry plain weather "$HOSTS"
	printf 'proxy_listen = 127.0.0.1:3129\nproxy_token_file = plain.token\n'
} | lab_config_install
kill -HUP "$(lab_egressd_pid)"
lab_wait_events egress.config 1
lab_spawn life "$LAB_NS_B" "$LAB_PYTHON" "$LAB_DIR/tunnel.py" life 3128 \
    w:rotated-token-0123456789 "$ICA" /small -
lab_poll 40 lab__gone "${LAB_PID[life]}" ||
    lab_fail "the inspected tunnel's client hung"
lab_stop life
lab_expect_eq "requests inside the tunnel until its lifetime is over" \
    "READY CLOSED" "$(grep -v SENT "$LAB_DIR/log/life.out" | paste -sd ' ')"

lab_finish
