#!/bin/bash
# SPDX-License-Identifier: ISC
# sandbox.sh EGRESS_SANDBOX SANDBOX_PROBE SRCDIR: egress-sandbox without a
# broker. (1) docs/seccomp-egress-worker.json is exactly what
# `egress-sandbox --print-seccomp-profile` prints, and every syscall it
# names fails with EPERM inside the sandbox (sandbox_probe). (2) --socket
# places a connection to a listening socket at fd 3 (and at --fd 7).
# (3) attach: a stand-in control socket (python3) answers `attach NAME`
# with a descriptor by SCM_RIGHTS; the worker gets it as EGRESS_FD and
# what it sends arrives at the other end. (4) a refused attach exits 3.
set -eu

sandbox=$1
probe=$2
srcdir=$3
tmp=$(mktemp -d)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# (1) The shipped profile is the C filter's.
"$sandbox" --print-seccomp-profile > "$tmp/profile.json"
diff -u "$srcdir/docs/seccomp-egress-worker.json" "$tmp/profile.json" ||
	fail "docs/seccomp-egress-worker.json differs from the C filter"
mapfile -t names < <(python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
for r in p["syscalls"]:
    if "args" not in r:
        print("\n".join(r["names"]))
' "$srcdir/docs/seccomp-egress-worker.json")
[ "${#names[@]}" -ge 9 ] || fail "profile lists ${#names[@]} syscalls"
for s in socket socketpair connect bind listen accept accept4; do
	printf '%s\n' "${names[@]}" | grep -qx "$s" || fail "profile lacks $s"
done

# A listening socket that holds its connections (nothing reads them).
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(8)
print("ready", flush=True)
conns = []
while True:
    c, _ = s.accept(); conns.append(c)
' "$tmp/inst.sock" > "$tmp/listen.out" &
pids+=($!)
for _ in $(seq 1 1000); do
	grep -q ready "$tmp/listen.out" 2>/dev/null && break
	sleep 0.01
done
grep -q ready "$tmp/listen.out" || fail "listener did not start"

# (2) --socket, default fd and --fd 7; an inherited fd 5 is closed.
"$sandbox" --socket "$tmp/inst.sock" -- "$probe" "${names[@]}" \
	5>/dev/null > "$tmp/probe.out" || { cat "$tmp/probe.out"; fail "probe"; }
grep -q '^ok EGRESS_FD is not CLOEXEC' "$tmp/probe.out" || fail "fd 3"
grep -q '^ok syscall accept4: EPERM' "$tmp/probe.out" || fail "accept4"
EGRESS_FD=9 "$sandbox" --socket "$tmp/inst.sock" --fd 7 -- \
	sh -c '[ "$EGRESS_FD" = 7 ] && [ -S /proc/self/fd/7 ] || exit 9' ||
	fail "--fd 7"

# (3) attach through a stand-in control socket.
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(8)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    line = c.makefile("rb").readline().decode()
    if line == "attach good\n":
        a, b = socket.socketpair()
        socket.send_fds(c, [b"{\"attached\":\"good\"}\n"], [b.fileno()])
        b.close()
        data = a.recv(16)
        open(sys.argv[2], "wb").write(data)
        a.close()
    else:
        c.sendall(b"{\"error\":\"no such instance\",\"code\":\"not-found\"}\n")
    c.close()
' "$tmp/control.sock" "$tmp/received" > "$tmp/ctl.out" &
pids+=($!)
for _ in $(seq 1 1000); do
	grep -q ready "$tmp/ctl.out" 2>/dev/null && break
	sleep 0.01
done
"$sandbox" --instance good --control "$tmp/control.sock" -- "$probe" \
	socket > "$tmp/probe2.out" || { cat "$tmp/probe2.out"; fail "attach"; }
for _ in $(seq 1 1000); do [ -s "$tmp/received" ] && break; sleep 0.01; done
[ "$(cat "$tmp/received")" = x ] || fail "the attached peer got nothing"

# (4) a refused attach: exit 3 with the broker's message; COMMAND never runs.
rc=0
"$sandbox" --instance bad --control "$tmp/control.sock" -- touch \
	"$tmp/ran" 2> "$tmp/err" || rc=$?
[ "$rc" = 3 ] || fail "refused attach exited $rc"
grep -q 'attach refused: no such instance' "$tmp/err" || fail "message"
[ ! -e "$tmp/ran" ] || fail "COMMAND ran after a refused attach"
rc=0
"$sandbox" --socket "$tmp/inst.sock" --fd 2 -- true 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "--fd 2 exited $rc"
echo "ok: egress-sandbox"
