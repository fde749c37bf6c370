#!/bin/bash
# SPDX-License-Identifier: ISC
# socket_dir.sh EGRESSD SRCDIR: egressd serves its instance sockets only
# from a folder that nobody but root and the broker can change, checked
# component by component without following links. An instance_socket_dir
# that is a link in a folder another user (uid 65534) owns is refused at
# start (egressd exits non-zero, the log names the component, no socket
# appears behind the link). A folder that was served and is then swapped
# for a link (its parent handed to that user) is refused by the next
# reload, and its socket stops accepting; once the folder is safe again,
# a reload serves it again. Needs root for chown (skips with 77).
# EGRESS_WRAP: see wrap.sh.
set -eu
. "$(dirname "$0")/wrap.sh"

egressd=$1
src=$2
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: needs root (chown to uid 65534)" >&2
	exit 77
fi
tmp=$(mktemp -d)
chmod 0755 "$tmp"
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; cat "$tmp/egressd.err" >&2 2>/dev/null; exit 1; }

# accepts PATH: whether a listener accepts at PATH.
accepts() {
	python3 - "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError:
    sys.exit(1)
PY
}

# config DIR: an egressd.ini with instance_socket_dir DIR.
config() {
	cat > "$tmp/egressd.ini" <<INI
[plugins]
package_dir = packages
[plugins.security]
signature_mode = permissive
[broker]
instance_socket_dir = $1
control_socket = $tmp/control.sock
[plugins.entries.weather]
plugin = weather
manifest = packages/weather/manifest.ini
permissions = http_client
egress_hosts = api.weather.example
INI
}

# wait_log TEXT: wait until the broker's log holds TEXT.
wait_log() {
	for _ in $(seq 1 $((1000 * EGRESS_WAIT_SCALE))); do
		grep -qF -- "$1" "$tmp/egressd.err" && return 0
		kill -0 "$pid" 2>/dev/null || fail "egressd exited"
		sleep 0.01
	done
	fail "no log line with $1"
}

reload() {
	printf '# reload %s\n' "$1" >> "$tmp/egressd.ini"
	kill -HUP "$pid"
}

mkdir -p "$tmp/packages"
cp -r "$src/examples/packages/." "$tmp/packages/"

# ---- a link in another user's folder: refused at start -------------------
mkdir -m 0755 "$tmp/good" "$tmp/att"
ln -s "$tmp/good" "$tmp/att/run"
chown -h 65534:65534 "$tmp/att/run" "$tmp/att"
config "$tmp/att/run"
rc=0
timeout "$(egress_wait 30)" "${EGRESS_WRAP_CMD[@]}" "$egressd" \
	--foreground -c "$tmp/egressd.ini" 2> "$tmp/egressd.err" || rc=$?
[ "$rc" != 0 ] || fail "egressd started with a symlinked socket folder"
[ "$rc" != 124 ] || fail "egressd did not exit"
grep -F 'instance_socket_dir refused' "$tmp/egressd.err" |
	grep -qF "\"component\":\"$tmp/att\"" ||
	fail "the log does not name $tmp/att"
[ ! -e "$tmp/good/weather.sock" ] || fail "a socket behind the link"
echo "ok: a link in another user's folder is refused at start"

# ---- served, then swapped for a link: refused by the reload --------------
mkdir -m 0755 "$tmp/p" "$tmp/evil"
chown 65534:65534 "$tmp/evil"
config "$tmp/p/inst"
"${EGRESS_WRAP_CMD[@]}" "$egressd" --foreground -c "$tmp/egressd.ini" \
	2> "$tmp/egressd.err" &
pid=$!
for _ in $(seq 1 $((1000 * EGRESS_WAIT_SCALE))); do
	accepts "$tmp/p/inst/weather.sock" && break
	kill -0 "$pid" 2>/dev/null || fail "egressd exited"
	sleep 0.01
done
accepts "$tmp/p/inst/weather.sock" || fail "weather.sock does not accept"

chown 65534 "$tmp/p"
mv "$tmp/p/inst" "$tmp/p/inst.old"
ln -s "$tmp/evil" "$tmp/p/inst"
reload unsafe
wait_log "\"component\":\"$tmp/p\""
for _ in $(seq 1 $((500 * EGRESS_WAIT_SCALE))); do
	accepts "$tmp/p/inst.old/weather.sock" || break
	sleep 0.01
done
! accepts "$tmp/p/inst.old/weather.sock" ||
	fail "the socket of the refused folder still accepts"
[ -S "$tmp/p/inst.old/weather.sock" ] ||
	fail "the socket file was unlinked through the unsafe path"
[ ! -e "$tmp/evil/weather.sock" ] || fail "a socket in the other user's folder"
echo "ok: a folder swapped for a link is refused by the reload"

rm "$tmp/p/inst"
mv "$tmp/p/inst.old" "$tmp/p/inst"
chown 0 "$tmp/p"
reload safe
for _ in $(seq 1 $((1000 * EGRESS_WAIT_SCALE))); do
	accepts "$tmp/p/inst/weather.sock" && break
	kill -0 "$pid" 2>/dev/null || fail "egressd exited"
	sleep 0.01
done
accepts "$tmp/p/inst/weather.sock" || fail "not served again once safe"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
[ "$rc" = 0 ] || fail "egressd exited $rc after SIGTERM"
echo "ok: served again once the folder is safe"
