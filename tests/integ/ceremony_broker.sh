#!/usr/bin/env bash
# SPDX-License-Identifier: ISC
# The ceremony with a running broker: install a package, carve out its
# loopback upstream, and a request through egressd is allowed at once;
# revoke the host and the next request is denied (egress-fetch exits 10),
# without restarting the broker, and the broker exits 0 on SIGTERM.
# Loopback only. EGRESS_WRAP: see wrap.sh.
set -uo pipefail
. "$(dirname "$0")/wrap.sh"
ctl=${1:?usage: ceremony_broker.sh EGRESSCTL EGRESSD EGRESS-FETCH SRCDIR}
egressd=${2:?}
fetch=${3:?}
src=${4:?}
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
ctl=$(abs "$ctl"); egressd=$(abs "$egressd"); fetch=$(abs "$fetch"); src=$(abs "$src")
work=$(mktemp -d /tmp/ceremony-broker.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"; }
trap cleanup EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

mkdir -p "$work/www" "$work/run"
echo hello >"$work/www/index.html"
cp -r "$src/tests/data/ceremony/pkgs" "$work/"
cat >"$work/egressd.ini" <<INI
[plugins]
package_dir = packages

[broker]
instance_socket_dir = $work/run
control_socket = $work/control.sock
INI
# A loopback upstream on a free port.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
(cd "$work/www" && exec python3 -m http.server --bind 127.0.0.1 "$port" >/dev/null 2>&1) &
pids+=($!)

cd "$work"
"${EGRESS_WRAP_CMD[@]}" "$ctl" -c egressd.ini plugin install pkgs/local >/dev/null && ok || bad "install"
"${EGRESS_WRAP_CMD[@]}" "$ctl" -c egressd.ini plugin grant local --private 127.0.0.1 >/dev/null && ok || bad "carve-out"
"${EGRESS_WRAP_CMD[@]}" "$egressd" -c egressd.ini --foreground \
    2>"$work/egressd.log" &
epid=$!
pids+=("$epid")
for i in $(seq 1 $((300 * EGRESS_WAIT_SCALE))); do
	[ -S "$work/run/local.sock" ] && break
	sleep 0.02
done
[ -S "$work/run/local.sock" ] && ok || bad "no instance socket"
for i in $(seq 1 100); do
	python3 -c "import socket; socket.create_connection(('127.0.0.1',$port)).close()" 2>/dev/null && break
	sleep 0.02
done
out=$("${EGRESS_WRAP_CMD[@]}" "$fetch" --socket "$work/run/local.sock" "http://127.0.0.1:$port/" 2>&1)
rc=$?
[ "$rc" = 0 ] && [ "$out" = hello ] && ok || bad "allowed request: exit $rc, '$out'"
"${EGRESS_WRAP_CMD[@]}" "$ctl" -c egressd.ini plugin revoke local 127.0.0.1 >/dev/null && ok || bad "revoke"
"${EGRESS_WRAP_CMD[@]}" "$fetch" --socket "$work/run/local.sock" \
    "http://127.0.0.1:$port/" >/dev/null 2>&1
rc=$?
[ "$rc" = 10 ] && ok || bad "after revoke: exit $rc, want 10 (denied)"
grep -q '"reason":"not-granted"' "$work/egressd.log" && ok ||
    bad "no not-granted decision in the broker log"
kill -TERM "$epid"
rc=0
wait "$epid" || rc=$?
[ "$rc" = 0 ] && ok || bad "egressd exited $rc after SIGTERM"
echo "ceremony_broker.sh: $pass passed, $fail failed"
[ "$fail" = 0 ]
