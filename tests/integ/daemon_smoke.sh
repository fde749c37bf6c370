#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Loopback-only smoke test of egressd: the real
# daemon with a real DNS server (dnsmasq on 127.0.0.1, answering 127.0.0.1
# for api.smoke.test), a real HTTP upstream on 127.0.0.1 (a small Python
# server written below), and a throwaway Python client of the wire
# protocol (written below; the shim's egress-fetch replaces it in the netns
# suite). The instance "smoke" carves api.smoke.test out in
# egress_allow_loopback, since 127.0.0.1 is a loopback address. No packet
# leaves loopback. Checks: --check-config, allow and deny with their log
# events, request body upload, a multi-MiB body under flow control, the
# budget, live reload (grant removed, file broken, fixed), SIGHUP socket
# reconciliation, the control socket, protocol violations and passed file
# descriptors dropping one connection only, and SIGTERM exiting 0.
# Keep-alive (the upstream logs each TCP connection, each request with
# its connection's port, and each close): sequential requests reuse one
# upstream connection; a revoked grant denies the next request although a
# pooled connection exists (and the reload closes it); with a budget of 1
# an idle pooled connection is evicted for a new destination of the same
# instance rather than refusing; a pooled connection the upstream closed
# is retried transparently for a GET, never for a POST.
#
# Usage: daemon_smoke.sh EGRESSD (EGRESS_WRAP: see wrap.sh)
set -euo pipefail
. "$(dirname "$0")/wrap.sh"

EGRESSD=${1:?usage: daemon_smoke.sh EGRESSD}
for p in dnsmasq python3 jq; do
	command -v "$p" >/dev/null 2>&1 ||
	    { echo "SKIP: $p not installed"; exit 77; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/egressd-smoke.XXXXXX")
PIDS=()
cleanup()
{
	local p
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	if [ "${KEEP:-0}" = 1 ]; then echo "# kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
N=0
ok() { N=$((N + 1)); echo "ok $N - $*"; }
fail()
{
	echo "not ok - $*"
	echo "# --- egressd.log (tail)"; tail -n 20 "$T/egressd.log" 2>/dev/null
	echo "# --- egressd.err"; cat "$T/egressd.err" 2>/dev/null
	exit 1
}
eq() { [ "$2" = "$3" ] || fail "$1: want '$2', got '$3'"; ok "$1"; }

# Free loopback ports from the kernel.
read -r DNS_PORT HTTP_PORT TLS_PORT < <(python3 -c '
import socket
a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); a.bind(("127.0.0.1", 0))
b = socket.socket(); b.bind(("127.0.0.1", 0))
c = socket.socket(); c.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1], c.getsockname()[1])')

# ---- the upstream ---------------------------------------------------------
cat >"$T/upstream.py" <<'EOF'
import http.server, sys, threading, time
hits = {}
lock = threading.Lock()
def conn_log(what):
    with lock:
        with open(sys.argv[2] + ".conn", "a") as f:
            f.write(what + "\n")
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def setup(self):
        super().setup()
        self.kill_next = False
        conn_log("CONN %d" % self.client_address[1])
    def finish(self):
        conn_log("CLOSE %d" % self.client_address[1])
        super().finish()
    def killed(self):
        # /close-next armed it: close this connection without answering,
        # as an upstream whose idle timeout fired just then would.
        if not self.kill_next:
            conn_log("REQ %d %s" % (self.client_address[1], self.path))
            return False
        conn_log("KILL %d %s" % (self.client_address[1], self.path))
        self.close_connection = True
        return True
    def count(self):
        with lock:
            hits[self.path] = hits.get(self.path, 0) + 1
            with open(sys.argv[2], "a") as f:
                f.write("%s %s %s\n" % (self.command, self.path,
                    self.headers.get("Host", "")))
    def send(self, code, body, extra=()):
        self.send_response(code)
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if self.killed():
            return
        self.count()
        if self.path == "/small":
            self.send(200, b"egressd-smoke-small\n")
        elif self.path.startswith("/ka/"):
            self.send(200, b"keep-alive\n")
        elif self.path == "/close-next":
            self.send(200, b"armed\n")
            self.kill_next = True
        elif self.path.startswith("/large"):
            n = int(self.path.split("=")[1])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = bytes(range(256)) * 256
            left = n
            while left > 0:
                k = min(left, len(chunk))
                self.wfile.write(chunk[:k])
                left -= k
        elif self.path == "/slow":
            time.sleep(1.5)
            self.send(200, b"slow\n")
        elif self.path == "/redirect":
            self.send(302, b"", [("Location", "http://169.254.169.254/")])
        else:
            self.send(404, b"no\n")
    def do_POST(self):
        if self.killed():
            return
        self.count()
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        self.send(200, body)
s = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
if len(sys.argv) > 3:
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[3], sys.argv[4])
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
EOF
python3 "$T/upstream.py" "$HTTP_PORT" "$T/hits.log" 2>/dev/null &
PIDS+=($!)

# A test CA and a certificate naming api.smoke.test only.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=smoke-ca \
    -keyout "$T/ca.key" -out "$T/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=api.smoke.test \
    -keyout "$T/srv.key" -out "$T/srv.csr" 2>/dev/null
printf 'subjectAltName=DNS:api.smoke.test\n' >"$T/ext"
openssl x509 -req -in "$T/srv.csr" -CA "$T/ca.crt" -CAkey "$T/ca.key" \
    -CAcreateserial -days 2 -extfile "$T/ext" -out "$T/srv.crt" 2>/dev/null
python3 "$T/upstream.py" "$TLS_PORT" "$T/hits.log" "$T/srv.crt" \
    "$T/srv.key" 2>/dev/null &
PIDS+=($!)

# ---- the client -----------------------------------------------------------
cat >"$T/client.py" <<'EOF'
"""Throwaway client of the egressd wire protocol (proto/proto.h).
client.py SOCKET MODE [args]; prints one JSON line."""
import array, hashlib, json, os, socket, struct, sys, time
HELLO, REQUEST, RESPONSE, DATA, TRAILERS, WINDOW_UPDATE, RESET, ERROR, \
    GOAWAY, PING, PONG = range(1, 12)
END = 1
CODES = {1: "denied", 2: "budget-exhausted", 3: "dns-failed",
    4: "connect-failed", 5: "tls-failed", 6: "timeout",
    7: "upstream-protocol-error", 8: "invalid-request", 9: "unavailable",
    10: "cancelled", 11: "protocol-error"}

def frame(t, payload=b"", stream=0, flags=0):
    return struct.pack("!IBBBBI", len(payload), 1, t, flags, 0, stream) + \
        payload

def s16(b):
    return struct.pack("!H", len(b)) + b

def request(stream, method, url, headers=(), end=True, host=None):
    scheme, rest = url.split("://", 1)
    auth, _, path = rest.partition("/")
    p = struct.pack("!BIIII", 1, 0, 0, 0, 0)
    p += s16(method.encode()) + s16(scheme.encode()) + s16(auth.encode())
    p += s16(("/" + path).encode())
    p += struct.pack("!H", len(headers))
    for k, v in headers:
        p += s16(k.encode()) + s16(v.encode())
    return frame(REQUEST, p, stream, END if end else 0)

class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.buf = b""
    def send(self, b):
        self.s.sendall(b)
    def frames(self, timeout=15):
        end = time.monotonic() + timeout
        while True:
            while len(self.buf) >= 12:
                n, v, t, fl, r, st = struct.unpack("!IBBBBI", self.buf[:12])
                if len(self.buf) < 12 + n:
                    break
                p = self.buf[12:12 + n]
                self.buf = self.buf[12 + n:]
                yield t, fl, st, p
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError()
            self.s.settimeout(left)
            c = self.s.recv(1 << 20)
            if not c:
                return
            self.buf += c
    def hello(self):
        self.send(frame(HELLO, struct.pack("!H", 1)))
        for t, fl, st, p in self.frames():
            assert t == HELLO, t
            return

def fetch(c, stream, method, url, body=None, headers=(), delay=0):
    hs = list(headers)
    if body is not None:
        hs.append(("Content-Length", str(len(body))))
    c.send(request(stream, method, url, hs, end=body is None))
    if body is not None:
        # Respect the broker's windows: 256 KiB per stream, 1 MiB per
        # connection, grown by its WINDOW_UPDATEs.
        sw, cw, i = 262144, 1048576, 0
        while i < len(body):
            n = min(65536, sw, cw, len(body) - i)
            if n == 0:
                for t, fl, st, p in c.frames():
                    if t == WINDOW_UPDATE:
                        inc = struct.unpack("!I", p)[0]
                        if st == 0:
                            cw += inc
                        else:
                            sw += inc
                        break
                    c.buf = frame(t, p, st, fl) + c.buf
                    raise RuntimeError("unexpected frame %d" % t)
                continue
            last = i + n >= len(body)
            c.send(frame(DATA, body[i:i + n], stream, END if last else 0))
            i += n
            sw -= n
            cw -= n
    h = hashlib.sha256()
    out = {"status": None, "len": 0}
    got = 0
    for t, fl, st, p in c.frames():
        if st != stream and t not in (WINDOW_UPDATE,):
            continue
        if t == RESPONSE:
            out["status"] = struct.unpack("!H", p[:2])[0]
        elif t == DATA:
            h.update(p)
            out["len"] += len(p)
            got += len(p)
            if delay:
                time.sleep(delay)
            if got >= 65536:
                c.send(frame(WINDOW_UPDATE, struct.pack("!I", got), 0))
                c.send(frame(WINDOW_UPDATE, struct.pack("!I", got), stream))
                got = 0
            if fl & END:
                break
        elif t == TRAILERS:
            break
        elif t == ERROR:
            code = struct.unpack("!I", p[:4])[0]
            out["error"] = CODES.get(code, str(code))
            out["message"] = p[6:].decode()
            break
    out["sha256"] = h.hexdigest()
    return out

def main():
    path, mode = sys.argv[1], sys.argv[2]
    if mode == "get":
        c = Conn(path); c.hello()
        print(json.dumps(fetch(c, 1, "GET", sys.argv[3])))
    elif mode == "head":
        c = Conn(path); c.hello()
        print(json.dumps(fetch(c, 1, "GET", sys.argv[3],
            headers=[("Host", sys.argv[4])])))
    elif mode == "post":
        body = os.urandom(int(sys.argv[4]))
        c = Conn(path); c.hello()
        r = fetch(c, 1, "POST", sys.argv[3], body=body)
        r["sent_sha256"] = hashlib.sha256(body).hexdigest()
        print(json.dumps(r))
    elif mode == "two":
        # Two requests on one connection, the second sent after the first
        # completed; argv[3] waits for a file to exist in between.
        c = Conn(path); c.hello()
        a = fetch(c, 1, "GET", sys.argv[4])
        open(sys.argv[3] + ".first", "w").close()
        while not os.path.exists(sys.argv[3]):
            time.sleep(0.05)
        b = fetch(c, 3, "GET", sys.argv[4])
        print(json.dumps([a, b]))
    elif mode == "seq":
        # Sequential GETs on one connection, one stream each.
        c = Conn(path); c.hello()
        print(json.dumps([fetch(c, 2 * i + 1, "GET", u)
            for i, u in enumerate(sys.argv[3:])]))
    elif mode == "parallel":
        # Open N streams at once on one connection; report each outcome.
        n, url = int(sys.argv[3]), sys.argv[4]
        c = Conn(path); c.hello()
        for i in range(n):
            c.send(request(2 * i + 1, "GET", url))
        res = {}
        for t, fl, st, p in c.frames():
            if t == RESPONSE:
                res.setdefault(st, {})["status"] = \
                    struct.unpack("!H", p[:2])[0]
            elif t == DATA and fl & END:
                res.setdefault(st, {})["done"] = True
            elif t == ERROR:
                res.setdefault(st, {})["error"] = CODES.get(
                    struct.unpack("!I", p[:4])[0])
            if sum(1 for v in res.values() if "done" in v or
                   "error" in v) == n:
                break
        print(json.dumps(sorted(
            (v.get("error") or "ok") for v in res.values())))
    elif mode in ("garbage", "before-hello", "fd"):
        c = Conn(path)
        if mode == "garbage":
            c.send(b"GET / HTTP/1.1\r\n\r\n" + os.urandom(256))
        elif mode == "before-hello":
            c.send(frame(PING, b"12345678"))
        else:
            r, w = os.pipe()
            fds = array.array("i", [r])
            c.s.sendmsg([frame(HELLO, struct.pack("!H", 1))],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        closed = False
        try:
            for _ in c.frames(5):
                pass
            closed = True
        except (TimeoutError, ConnectionResetError):
            closed = False
        print(json.dumps({"closed": closed}))
    elif mode == "stall":
        # Ask for a large body and never grant window: the broker must
        # stop reading the upstream.
        c = Conn(path); c.hello()
        c.send(request(1, "GET", sys.argv[3]))
        time.sleep(float(sys.argv[4]))
        print(json.dumps({"stalled": True}))
    elif mode == "ping":
        c = Conn(path); c.hello()
        c.send(frame(PING, b"abcdefgh"))
        for t, fl, st, p in c.frames():
            print(json.dumps({"pong": t == PONG and p == b"abcdefgh"}))
            return
main()
EOF
client() { timeout "$(egress_wait 60)" python3 "$T/client.py" "$@"; }

# ---- DNS ------------------------------------------------------------------
DNSUSER=()
[ "$(id -u)" = 0 ] && DNSUSER=(--user=root --group=root)
dnsmasq --conf-file=/dev/null --no-daemon --no-resolv --no-hosts \
    --no-poll --bind-interfaces --listen-address=127.0.0.1 \
    --port="$DNS_PORT" --local-ttl=0 --cache-size=0 --local=/smoke.test/ \
    --host-record=api.smoke.test,127.0.0.1 \
    --host-record=other.smoke.test,127.0.0.1 \
    --log-queries --log-facility="$T/dns.log" --pid-file= "${DNSUSER[@]}" \
    2>"$T/dnsmasq.err" &
PIDS+=($!)

# ---- configuration --------------------------------------------------------
mkdir -p "$T/etc/packages/smoke" "$T/run"
cat >"$T/etc/packages/smoke/manifest.ini" <<'EOF'
[plugin]
name = smoke
version = 1.0.0
permissions = http_client

[egress]
hosts = api.smoke.test, other.smoke.test
operator_defined = false
EOF
MAX_CONN=2
config()
{
	# $1: egress_hosts of "smoke"; $2: extra text.
	cat <<EOF
[broker]
instance_socket_dir = $T/run/instances
control_socket = $T/run/control.sock
log = $T/egressd.log
drain_timeout_ms = 3000

[tls]
ca_file = $T/ca.crt

[resolver]
servers = 127.0.0.1:$DNS_PORT
timeout_ms = 2000

[limits]
connect_timeout_ms = 5000
first_byte_timeout_ms = 10000
between_bytes_timeout_ms = 10000

[plugins.security]
signature_mode = disabled

[plugins.limits]
max_connections_per_instance = $MAX_CONN

[plugins.entries.smoke]
plugin = smoke
manifest = packages/smoke/manifest.ini
permissions = http_client
egress_hosts = $1
egress_allow_loopback = $1

[plugins.entries.other]
plugin = smoke
manifest = packages/smoke/manifest.ini
permissions = http_client
egress_hosts =
egress_allow_private =
${2:-}
EOF
}
install_config() { cat >"$T/etc/egressd.ini.new"; mv -f "$T/etc/egressd.ini.new" "$T/etc/egressd.ini"; }
GRANT="api.smoke.test, other.smoke.test"
config "$GRANT" | install_config
C=$T/etc/egressd.ini
S=$T/run/instances
U=http://api.smoke.test:$HTTP_PORT

# ---- --check-config ---------------------------------------------------------
"${EGRESS_WRAP_CMD[@]}" "$EGRESSD" -c "$C" --check-config 2>"$T/check.err" ||
    fail "--check-config refused a valid file: $(cat "$T/check.err")"
ok "--check-config accepts a valid configuration"
{ config "api.smoke.test"; echo "[bogus"; } >"$T/bad.ini"
cp -R "$T/etc/packages" "$T/packages" 2>/dev/null || true
rc=0; "${EGRESS_WRAP_CMD[@]}" "$EGRESSD" -c "$T/bad.ini" --check-config 2>"$T/check.err" || rc=$?
eq "--check-config exit status on a broken file" 1 "$rc"
grep -q 'bad\.ini:[0-9]' "$T/check.err" ||
    fail "--check-config did not print file:line: $(cat "$T/check.err")"
ok "--check-config prints file:line"
# A private carve-out of a loopback literal or a localhost name opens
# nothing since loopback is its own class: one warning per entry, naming
# the key to use; still valid.
config "$GRANT" | sed -e 's/^egress_hosts =$/egress_hosts = 127.0.0.1, localhost/' \
    -e 's/^egress_allow_private =$/egress_allow_private = 127.0.0.1, localhost/' \
    >"$T/etc/lo.ini"
rc=0; "${EGRESS_WRAP_CMD[@]}" "$EGRESSD" -c "$T/etc/lo.ini" --check-config 2>"$T/check.err" || rc=$?
eq "--check-config exit status with loopback in egress_allow_private" 0 "$rc"
eq "--check-config warnings naming egress_allow_loopback" 2 \
    "$(grep -c 'lo\.ini:[0-9]*: warning: \[plugins.entries.other\] egress_allow_private: .* is loopback, which egress_allow_private does not open: list it in egress_allow_loopback' "$T/check.err")"
grep -q '(2 warnings)' "$T/check.err" || fail "--check-config count: $(cat "$T/check.err")"
ok "--check-config counts them"

# ---- start ------------------------------------------------------------------
"${EGRESS_WRAP_CMD[@]}" "$EGRESSD" -c "$C" --foreground 2>"$T/egressd.err" &
EPID=$!
PIDS+=("$EPID")
for _ in $(seq $((100 * EGRESS_WAIT_SCALE))); do
	[ -S "$S/smoke.sock" ] && [ -S "$S/other.sock" ] && break
	sleep 0.1
done
[ -S "$S/smoke.sock" ] || fail "no instance socket"
eq "instance socket mode" 660 "$(stat -c %a "$S/smoke.sock")"
eq "control socket mode" 600 "$(stat -c %a "$T/run/control.sock")"
for _ in $(seq $((50 * EGRESS_WAIT_SCALE))); do
	python3 -c 'import socket,sys; s=socket.socket(); s.connect(("127.0.0.1", int(sys.argv[1])))' "$HTTP_PORT" 2>/dev/null && break
	sleep 0.1
done

LOGMARK=0
mark() { LOGMARK=$(wc -l <"$T/egressd.log"); }
events() { tail -n "+$((LOGMARK + 1))" "$T/egressd.log" | jq -c --arg e "$1" 'select(.event == $e)'; }
last() { events "$1" | tail -n 1; }
waitev() { for _ in $(seq $((50 * EGRESS_WAIT_SCALE))); do [ "$(events "$1" | wc -l)" -ge "$2" ] && return 0; sleep 0.1; done; fail "want $2 $1 events"; }

eq "egress.start carries no warnings field when there is none" false \
    "$(jq -c 'select(.event == "egress.start")' "$T/egressd.log" | head -n 1 | jq 'has("warnings")')"

# ---- allow --------------------------------------------------------------------
mark
r=$(client "$S/smoke.sock" get "$U/small")
eq "allowed GET status" 200 "$(jq -r .status <<<"$r")"
eq "allowed GET body length" 20 "$(jq -r .len <<<"$r")"
waitev egress.close 1
d=$(last egress.decision)
eq "decision" "smoke smoke http api.smoke.test $HTTP_PORT allow 127.0.0.1" \
    "$(jq -r '[.instance,.plugin,.transport,.host,.port,.verdict,(.addresses|join(","))]|map(tostring)|join(" ")' <<<"$d")"
jq -e 'has("ts") and has("request_id") and (has("reason")|not)' <<<"$d" >/dev/null ||
    fail "decision fields: $d"
c=$(last egress.close)
eq "close" "$(jq -r .request_id <<<"$d") smoke 127.0.0.1 200 null 20" \
    "$(jq -r '[.request_id,.instance,.connected,.status,.error,.bytes_in]|map(tostring)|join(" ")' <<<"$c")"
grep -q "GET /small api.smoke.test:$HTTP_PORT" "$T/hits.log" ||
    fail "upstream did not see Host api.smoke.test:$HTTP_PORT"
ok "upstream saw the authorized Host"

# ---- deny ---------------------------------------------------------------------
mark
r=$(client "$S/other.sock" get "$U/small")
eq "denied error" "denied" "$(jq -r .error <<<"$r")"
eq "denied message" "egress policy: destination not permitted for this instance" \
    "$(jq -r .message <<<"$r")"
waitev egress.decision 1
eq "deny log" "other deny not-granted" \
    "$(last egress.decision | jq -r '[.instance,.verdict,.reason]|join(" ")')"

mark
r=$(client "$S/smoke.sock" head "$U/small" "evil.example")
eq "Host mismatch" "invalid-request" "$(jq -r .error <<<"$r")"
waitev egress.decision 1
eq "Host mismatch log reason" "invalid-request" "$(last egress.decision | jq -r .reason)"

r=$(client "$S/smoke.sock" get "$U/redirect")
eq "a 302 is returned as it is" 302 "$(jq -r .status <<<"$r")"

# ---- bodies -------------------------------------------------------------------
r=$(client "$S/smoke.sock" post "$U/echo" 700000)
eq "POST body echoed intact" "$(jq -r .sent_sha256 <<<"$r")" "$(jq -r .sha256 <<<"$r")"
SZ=$((8 * 1024 * 1024))
want=$(python3 -c "import hashlib,sys; c=bytes(range(256))*256; n=$SZ; h=hashlib.sha256(); 
while n>0:
    k=min(n,len(c)); h.update(c[:k]); n-=k
print(h.hexdigest())")
r=$(client "$S/smoke.sock" get "$U/large?n=$SZ")
eq "8 MiB body intact under flow control" "$want" "$(jq -r .sha256 <<<"$r")"

# ---- TLS ----------------------------------------------------------------------
UT=https://api.smoke.test:$TLS_PORT
r=$(client "$S/smoke.sock" get "$UT/small")
eq "HTTPS with the right certificate" 200 "$(jq -r .status <<<"$r")"
mark
r=$(client "$S/smoke.sock" get "https://other.smoke.test:$TLS_PORT/small")
eq "HTTPS to a name the certificate does not cover" tls-failed \
    "$(jq -r .error <<<"$r")"
waitev egress.close 1
eq "close error tls-failed" tls-failed "$(last egress.close | jq -r .error)"

# ---- slow guest -----------------------------------------------------------------
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$EPID/status"; }
r=$(client "$S/smoke.sock" get "$U/large?n=$SZ")
base=$(rss)
client "$S/smoke.sock" stall "$U/large?n=$((64 * 1024 * 1024))" 4 >/dev/null &
STALL=$!
sleep 2
grow=$(( $(rss) - base ))
r=$(client "$S/other.sock" get "$U/small")
eq "other instances are answered while a guest stalls" denied "$(jq -r .error <<<"$r")"
r=$(client "$S/smoke.sock" get "$U/small")
eq "the same instance is served while a guest stalls" 200 "$(jq -r .status <<<"$r")"
wait "$STALL" || true
[ "$grow" -lt 16384 ] || fail "broker RSS grew by $grow KiB for a stalled guest"
ok "a stalled 64 MiB download grew the broker by $grow KiB only"

# ---- budget -------------------------------------------------------------------
r=$(client "$S/smoke.sock" parallel 3 "$U/slow")
eq "budget: 2 served, the third refused at once" \
    '["budget-exhausted","ok","ok"]' "$(jq -c . <<<"$r")"
r=$(client "$S/smoke.sock" get "$U/small")
eq "budget released after the requests" 200 "$(jq -r .status <<<"$r")"

# ---- keep-alive -------------------------------------------------------------------
CL=$T/hits.log.conn
reqport() { awk -v p="$1" '$1 == "REQ" && $3 == p { print $2 }' "$CL" | tail -n 1; }
nconns() { grep -c '^CONN ' "$CL" || true; }
waitclose() { for _ in $(seq $((50 * EGRESS_WAIT_SCALE))); do grep -qx "CLOSE $1" "$CL" && return 0; sleep 0.1; done; return 1; }
c0=$(nconns)
r=$(client "$S/smoke.sock" seq "$U/ka/1" "$U/ka/2")
eq "keep-alive: two sequential requests answered" "200 200" \
    "$(jq -r 'map(.status)|map(tostring)|join(" ")' <<<"$r")"
p1=$(reqport /ka/1); p2=$(reqport /ka/2)
[ -n "$p1" ] && [ "$p1" = "$p2" ] ||
    fail "keep-alive: the requests came on upstream ports '$p1' and '$p2'"
ok "keep-alive: both requests on one upstream connection (port $p1)"
[ $(( $(nconns) - c0 )) -le 1 ] ||
    fail "keep-alive: $(( $(nconns) - c0 )) upstream connections for 2 requests"
ok "keep-alive: at most one new upstream connection"
r=$(client "$S/smoke.sock" get "$U/ka/3")
eq "keep-alive: a new guest connection reuses it too" "$p1" "$(reqport /ka/3)"

# A revoked grant denies the next request although a connection to that
# very destination is pooled; the reload closes that connection.
mark
config "" | install_config
r=$(client "$S/smoke.sock" get "$U/ka/4")
eq "pooled connection present, grant revoked: denied" denied "$(jq -r .error <<<"$r")"
eq "the upstream never saw the denied request" "" "$(reqport /ka/4)"
waitev egress.decision 1
eq "deny logged as not-granted" "smoke deny not-granted" \
    "$(last egress.decision | jq -r '[.instance,.verdict,.reason]|join(" ")')"
waitclose "$p1" || fail "the reload kept the pooled connection of a revoked host"
ok "the reload closed the pooled connection of the revoked host"
config "$GRANT" | install_config
r=$(client "$S/smoke.sock" get "$U/ka/5")
eq "grant restored: served" 200 "$(jq -r .status <<<"$r")"
[ "$(reqport /ka/5)" != "$p1" ] || fail "a closed connection was reused"
ok "grant restored: on a fresh connection"

# Budget 1: the instance's idle pooled connection holds its one lease; a
# request to another destination evicts it instead of being refused.
MAX_CONN=1
config "$GRANT" | install_config
r=$(client "$S/smoke.sock" get "$U/ka/6")
eq "budget 1: served" 200 "$(jq -r .status <<<"$r")"
p6=$(reqport /ka/6)
r=$(client "$S/smoke.sock" get "http://other.smoke.test:$HTTP_PORT/ka/7")
eq "budget 1, idle pooled connection: another host is served" 200 \
    "$(jq -r .status <<<"$r")"
waitclose "$p6" || fail "budget 1: the idle connection was not evicted"
ok "budget 1: the idle pooled connection (holding the lease) was evicted"
r=$(client "$S/smoke.sock" seq "http://other.smoke.test:$HTTP_PORT/ka/8" \
    "http://other.smoke.test:$HTTP_PORT/ka/9")
eq "budget 1: reuse within the budget" "200 200 $(reqport /ka/7) $(reqport /ka/7)" \
    "$(jq -r 'map(.status)|map(tostring)|join(" ")' <<<"$r") $(reqport /ka/8) $(reqport /ka/9)"

# Stale: the upstream closes a pooled connection as the next request
# arrives. A GET is retried once on a fresh connection; a POST is not.
r=$(client "$S/smoke.sock" get "$U/close-next")
eq "stale: arming request served" 200 "$(jq -r .status <<<"$r")"
pk=$(reqport /close-next)
mark
r=$(client "$S/smoke.sock" get "$U/ka/10")
eq "stale pooled connection: the GET is answered transparently" 200 \
    "$(jq -r .status <<<"$r")"
grep -qx "KILL $pk /ka/10" "$CL" || fail "stale: the upstream did not close port $pk"
ok "stale: the first attempt went to the closed connection"
[ -n "$(reqport /ka/10)" ] && [ "$(reqport /ka/10)" != "$pk" ] ||
    fail "stale: the retry did not use a fresh connection"
ok "stale: retried on a fresh connection"
waitev egress.close 1
eq "stale: one decision and a clean close" "1 200 null" \
    "$(events egress.decision | wc -l) $(last egress.close | jq -r '[.status,.error]|map(tostring)|join(" ")')"
r=$(client "$S/smoke.sock" get "$U/close-next")
r=$(client "$S/smoke.sock" post "$U/echo" 1000)
eq "stale pooled connection: a POST is not retried" upstream-protocol-error \
    "$(jq -r .error <<<"$r")"
MAX_CONN=2
config "$GRANT" | install_config

# ---- live configuration -------------------------------------------------------
rm -f "$T/go"
client "$S/smoke.sock" two "$T/go" "$U/small" >"$T/two.out" &
TWO=$!
for _ in $(seq $((100 * EGRESS_WAIT_SCALE))); do [ -e "$T/go.first" ] && break; sleep 0.05; done
config "" | install_config
touch "$T/go"
wait "$TWO" || fail "two-request client failed"
eq "an edit applies to the next request on the same connection" \
    "200 denied" "$(jq -r '[.[0].status, .[1].error]|map(tostring)|join(" ")' <"$T/two.out")"

mark
{ config "api.smoke.test"; echo "[plugins.entries.broken"; } | install_config
r=$(client "$S/smoke.sock" get "$U/small")
eq "broken file: unavailable" "unavailable" "$(jq -r .error <<<"$r")"
r=$(client "$S/smoke.sock" get "$U/small")
eq "broken file: still unavailable" "unavailable" "$(jq -r .error <<<"$r")"
eq "policy-unavailable logged" "policy-unavailable" "$(last egress.decision | jq -r .reason)"
eq "file:line errors logged once" 1 \
    "$(events egress.config | jq -r '.errors[]' | grep -c 'egressd\.ini:[0-9]')"
config "api.smoke.test" | install_config
r=$(client "$S/smoke.sock" get "$U/small")
eq "fixed file: served again" 200 "$(jq -r .status <<<"$r")"

# SIGHUP: sockets follow the instances.
config "api.smoke.test" "$(printf '\n[plugins.entries.third]\nplugin = smoke\nmanifest = packages/smoke/manifest.ini\npermissions = http_client\negress_hosts = api.smoke.test\negress_allow_loopback = api.smoke.test\n')" |
    install_config
kill -HUP "$EPID"
for _ in $(seq $((50 * EGRESS_WAIT_SCALE))); do [ -S "$S/third.sock" ] && break; sleep 0.1; done
[ -S "$S/third.sock" ] || fail "no socket for an added instance"
ok "SIGHUP: an added instance got its socket"
r=$(client "$S/third.sock" get "$U/ka/third")
eq "the new instance is served" 200 "$(jq -r .status <<<"$r")"
p3=$(reqport /ka/third)
config "api.smoke.test" | install_config
kill -HUP "$EPID"
for _ in $(seq $((50 * EGRESS_WAIT_SCALE))); do [ ! -e "$S/third.sock" ] && break; sleep 0.1; done
[ ! -e "$S/third.sock" ] || fail "socket of a removed instance remains"
ok "SIGHUP: a removed instance lost its socket"
waitclose "$p3" || fail "a removed instance's pooled connection remains"
ok "SIGHUP: a removed instance's pooled connection was closed"

# ---- control socket -------------------------------------------------------------
r=$(python3 -c '
import socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b"status\nshow status\n"); f=s.makefile("rb")
print(f.readline().decode().strip()); print(f.readline().decode().strip())
' "$T/run/control.sock")
eq "control socket: unknown command" unknown-command \
    "$(head -n 1 <<<"$r" | jq -r .code)"
eq "control socket: show status" "$T/etc/egressd.ini" \
    "$(tail -n 1 <<<"$r" | jq -r .config.path)"

# ---- violations -----------------------------------------------------------------
npipes() { ls -l /proc/"$EPID"/fd 2>/dev/null | grep -c pipe || true; }
PIPES0=$(npipes)
for m in garbage before-hello fd; do
	r=$(client "$S/smoke.sock" "$m")
	eq "$m: connection dropped" true "$(jq -r .closed <<<"$r")"
	r=$(client "$S/smoke.sock" ping)
	eq "after $m, a new client works" true "$(jq -r .pong <<<"$r")"
done
eq "no passed descriptor kept by the broker" "$PIPES0" "$(npipes)"

# ---- log and exit ---------------------------------------------------------------
bad=$(jq -cR 'fromjson? // "BAD" | if type == "object" and has("event") then empty else . end' "$T/egressd.log" | head -n 3)
[ -z "$bad" ] || fail "non-JSON log line: $bad"
ok "the log is JSON lines"
[ ! -s "$T/egressd.err" ] || fail "egressd wrote to stderr: $(cat "$T/egressd.err")"
ok "no warnings on stderr"
client "$S/smoke.sock" get "$U/slow" >"$T/drain.out" &
DR=$!
for _ in $(seq $((50 * EGRESS_WAIT_SCALE))); do tail -n 1 "$T/hits.log" | grep -q 'GET /slow' && break; sleep 0.05; done
kill -TERM "$EPID"
for _ in $(seq $((50 * EGRESS_WAIT_SCALE))); do
	[ ! -e "$S/smoke.sock" ] && break
	sleep 0.02
done
[ ! -e "$S/smoke.sock" ] || fail "still accepting while draining"
ok "SIGTERM: stopped accepting"
rc=0; wait "$EPID" || rc=$?
eq "SIGTERM exit status" 0 "$rc"
wait "$DR" || true
eq "the in-flight request finished during the drain" 200 "$(jq -r .status <"$T/drain.out")"
[ ! -e "$S/smoke.sock" ] || fail "instance socket left behind"
ok "sockets removed at exit"
echo "1..$N"
