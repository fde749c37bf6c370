#!/bin/bash
# SPDX-License-Identifier: ISC
# notify.sh EGRESSD SRCDIR: egressd tells its service manager READY=1
# only once its sockets exist. A python3 datagram socket stands in for
# systemd ($NOTIFY_SOCKET); the moment READY=1 arrives, it checks that
# every instance socket and the control socket are listening (connect()
# succeeds). Then SIGTERM: the broker exits 0 (and STOPPING=1 is
# reported when the daemon sends it). EGRESS_WRAP: see wrap.sh.
set -eu
. "$(dirname "$0")/wrap.sh"

egressd=$1
src=$2
tmp=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null || true
	[ -n "${rpid:-}" ] && kill "$rpid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; cat "$tmp/recv.out" "$tmp/egressd.err" >&2 2>/dev/null; exit 1; }

mkdir -p "$tmp/packages"
cp -r "$src/examples/packages/." "$tmp/packages/"
cat > "$tmp/egressd.ini" <<INI
[plugins]
package_dir = packages
[plugins.security]
signature_mode = permissive
[broker]
instance_socket_dir = $tmp/inst
control_socket = $tmp/control.sock
[plugins.entries.weather]
plugin = weather
manifest = packages/weather/manifest.ini
permissions = http_client
egress_hosts = api.weather.example
[plugins.entries.gitea]
plugin = gitea
manifest = packages/gitea/manifest.ini
permissions = http_client
egress_hosts = git.lan.example
INI

python3 - "$tmp/notify.sock" "$tmp/inst/weather.sock" "$tmp/inst/gitea.sock" \
	"$tmp/control.sock" > "$tmp/recv.out" <<'PY' &
import socket, sys
r = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
r.bind(sys.argv[1])
print("listening", flush=True)
r.settimeout(30)
while True:
    msg = r.recv(4096).decode()
    for line in msg.split("\n"):
        print("got " + line, flush=True)
    if "READY=1" in msg.split("\n"):
        ok = True
        for p in sys.argv[2:]:
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(p)
            except OSError as e:
                ok = False
                print("not listening at READY: %s: %s" % (p, e), flush=True)
            s.close()
        print("ready-check " + ("ok" if ok else "failed"), flush=True)
    if "STOPPING=1" in msg.split("\n"):
        print("stopping", flush=True)
PY
rpid=$!
for _ in $(seq 1 1000); do
	grep -q listening "$tmp/recv.out" 2>/dev/null && break
	sleep 0.01
done
NOTIFY_SOCKET="$tmp/notify.sock" "${EGRESS_WRAP_CMD[@]}" "$egressd" \
	--foreground -c "$tmp/egressd.ini" 2> "$tmp/egressd.err" &
pid=$!
for _ in $(seq 1 $((2000 * EGRESS_WAIT_SCALE))); do
	grep -q '^ready-check' "$tmp/recv.out" && break
	kill -0 "$pid" 2>/dev/null || fail "egressd exited"
	sleep 0.005
done
grep -q '^ready-check ok' "$tmp/recv.out" || fail "READY=1 before the sockets"
grep -q "^got MAINPID=$pid\$" "$tmp/recv.out" ||
	echo "note: no MAINPID= with READY=1 (notify_ready() not wired yet)"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
[ "$rc" = 0 ] || fail "egressd exited $rc after SIGTERM"
for _ in $(seq 1 $((200 * EGRESS_WAIT_SCALE))); do
	grep -q '^stopping' "$tmp/recv.out" && break
	sleep 0.005
done
grep -q '^stopping' "$tmp/recv.out" ||
	echo "note: no STOPPING=1 (notify_stopping() not wired yet)"
echo "ok: READY=1 after the sockets listen"
