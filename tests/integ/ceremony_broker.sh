#!/usr/bin/env bash
# SPDX-License-Identifier: ISC
# The ceremony with a running broker: install a package, carve out its
# loopback upstream, and a request through egressd is allowed at once;
# revoke the host and the next request is denied (egress-fetch exits 10),
# without restarting the broker, and the broker exits 0 on SIGTERM. In
# between, egress-fetch's curl options (-i, -v, -f, -s, -w, -m, --help,
# --version) and egressctl status, grants and metrics against the running
# broker. Loopback only. EGRESS_WRAP: see wrap.sh.
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
"${EGRESS_WRAP_CMD[@]}" "$ctl" -c egressd.ini plugin grant local --loopback 127.0.0.1 >/dev/null && ok || bad "carve-out"
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
# egress-fetch's curl options against the same upstream.
F=("${EGRESS_WRAP_CMD[@]}" "$fetch" --socket "$work/run/local.sock")
U="http://127.0.0.1:$port"
out=$("${F[@]}" -i "$U/" 2>/dev/null | head -n 1 | tr -d '\r')
[ "$out" = "HTTP/1.1 200 OK" ] && ok || bad "-i: status line '$out', want 'HTTP/1.1 200 OK'"
out=$("${F[@]}" -s -w '%{http_code}\n' -o /dev/null "$U/" 2>/dev/null)
[ "$out" = 200 ] && ok || bad "-w %{http_code}: '$out'"
"${F[@]}" -v -o /dev/null "$U/index.html" 2>"$work/v.err"
grep -qx '> GET /index.html HTTP/1.1' "$work/v.err" && grep -qx '< HTTP/1.1 200 OK' "$work/v.err" &&
    ok || bad "-v: no request and response heads on stderr: $(cat "$work/v.err")"
out=$("${F[@]}" -f "$U/nothere" 2>"$work/f.err")
rc=$?
[ "$rc" = 22 ] && [ -z "$out" ] && grep -q 'HTTP 404 Not Found' "$work/f.err" &&
    ok || bad "-f on 404: exit $rc, stdout '$out', stderr $(cat "$work/f.err")"
out=$("${F[@]}" "$U/nothere" 2>/dev/null)
rc=$?
[ "$rc" = 0 ] && ok || bad "404 without -f: exit $rc, want 0"
"${F[@]}" -s -f "$U/nothere" >/dev/null 2>"$work/s.err"
rc=$?
[ "$rc" = 22 ] && [ ! -s "$work/s.err" ] && ok || bad "-s -f: exit $rc, stderr $(cat "$work/s.err")"
out=$("${F[@]}" -m 5 "$U/" 2>&1)
[ "$out" = hello ] && ok || bad "-m 5: '$out'"
"${EGRESS_WRAP_CMD[@]}" "$fetch" --socket "$work/run/nosuch.sock" "$U/" 2>"$work/n.err"
rc=$?
[ "$rc" = 18 ] && grep -q 'nosuch.sock: the socket does not exist' "$work/n.err" &&
    ok || bad "missing socket: exit $rc, $(cat "$work/n.err")"
"${EGRESS_WRAP_CMD[@]}" "$fetch" --help >"$work/h.out" 2>"$work/h.err"
rc=$?
[ "$rc" = 0 ] && grep -q '^usage: egress-fetch' "$work/h.out" && [ ! -s "$work/h.err" ] &&
    ok || bad "--help: exit $rc, not on stdout"
for v in --version -V; do
	out=$("${EGRESS_WRAP_CMD[@]}" "$fetch" "$v" 2>&1)
	rc=$?
	[ "$rc" = 0 ] && [[ $out == "egress-fetch "[0-9]* ]] && ok || bad "$v: exit $rc, '$out'"
done
out=$("${EGRESS_WRAP_CMD[@]}" "$fetch" --socket x a b 2>&1)
rc=$?
[ "$rc" = 2 ] && [[ $out == *"unexpected argument: b"* ]] && ok || bad "extra argument: exit $rc, '$out'"
# egressctl status against the running broker: the requests above are
# counted as decided, and the columns line up.
"${EGRESS_WRAP_CMD[@]}" "$ctl" -c egressd.ini status >"$work/status.out" 2>&1 && ok || bad "status: $(cat "$work/status.out")"
grep -Eq '^requests: +[1-9][0-9]* decided since start \([1-9][0-9]* allowed, 0 denied\), 0 in flight$' "$work/status.out" &&
    ok || bad "status: requests line: $(grep '^requests' "$work/status.out")"
awk '/^[a-zA-Z]/ { i = index($0, ":"); rest = substr($0, i + 1); m = match(rest, /[^ ]/); col[i + m]++ } END { n = 0; for (c in col) n++; exit n != 1 }' "$work/status.out" &&
    ok || bad "status: values do not start in one column:"$'\n'"$(cat "$work/status.out")"
"${EGRESS_WRAP_CMD[@]}" "$ctl" -c egressd.ini grants nosuch >/dev/null 2>"$work/g.err"
rc=$?
[ "$rc" = 1 ] && grep -q 'no instance nosuch' "$work/g.err" && ok || bad "grants nosuch: exit $rc, $(cat "$work/g.err")"
"${EGRESS_WRAP_CMD[@]}" "$ctl" -c egressd.ini metrics --json >/dev/null 2>&1
rc=$?
[ "$rc" = 2 ] && ok || bad "metrics --json: exit $rc, want 2 (refused)"
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
