#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Workers with no sockets, end to end through the real broker, in the
# netns lab: egress-sandbox attaches through the control socket of a live
# egressd and starts the worker as an unprivileged uid. A sandboxed
# egress-fetch (EGRESS_FD) fetches a granted URL, and so does the fixture
# plugin (a libegress client that adds a seccomp filter of its own under
# egress-sandbox's allow-list); a request for another
# instance's host on that connection is denied for the attached instance;
# sandbox_probe shows socket(AF_INET), socket(AF_UNIX), connect, sendto
# with an address and sendmsg (SCM_RIGHTS) all fail with EPERM; a
# sandboxed egress-fetch pointed at another instance's socket cannot open
# it; and a client that does pass a descriptor over an attached connection
# is dropped by the broker, which closes the descriptor. Two instances'
# workers on one uid: the second launch warns; while radar's worker waits
# holding its connection, weather's worker tries every way at it (ptrace,
# process_vm_*, pidfd_getfd, kcmp, /proc/PID/fd and /proc/PID/mem, kill)
# and every one fails; radar's worker then fetches on its untouched
# connection, and the broker logs exactly that one request, as radar.
# Needs root (skips with 77 otherwise).
set -euo pipefail
. "$(dirname "$0")/lab/lab.sh"
lab_init
lab_need_bins
for v in EGRESS_SANDBOX SANDBOX_PROBE EGRESS_FIXTURE_PLUGIN; do
	[ -x "${!v:-}" ] || lab_fail "set $v to the built binary"
done
lab_up

# The workers' uid, and the binaries it runs, copied where it can run
# them (a checkout may sit in a folder only root can enter).
WU=64810
mkdir -m 0755 "$LAB_DIR/bin"
cp "$EGRESS_FETCH" "$SANDBOX_PROBE" "$EGRESS_FIXTURE_PLUGIN" "$LAB_DIR/bin/"
W_FETCH=$LAB_DIR/bin/$(basename "$EGRESS_FETCH")
W_PROBE=$LAB_DIR/bin/$(basename "$SANDBOX_PROBE")
W_PLUGIN=$LAB_DIR/bin/$(basename "$EGRESS_FIXTURE_PLUGIN")
SB_REG=$LAB_DIR/run/sandbox-registry
# A sanitizer build's leak check works by ptrace, which the sandbox
# refuses: off for the workers (egress-sandbox keeps it).
W_ENV=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")

CTL=$LAB_DIR/run/control.sock
lab_dns_set api.weather.example="$LAB_PUB4" api.radar.example="$LAB_PUB4"
{
	lab_config_base
	lab_entry weather weather "api.weather.example"
	lab_entry radar radar "api.radar.example, api.weather.example"
} | lab_config_install
lab_egressd_start weather radar

# sandboxed INSTANCE OUT COMMAND...: run COMMAND under egress-sandbox,
# attached to INSTANCE through the control socket; stdout to OUT. Never
# under EGRESS_WRAP (neither egress-sandbox nor COMMAND): the sandbox
# installs a seccomp filter before it executes COMMAND, and valgrind
# cannot run under one. The broker is wrapped.
sandboxed()
{
	local inst=$1 out=$2
	shift 2
	SB_RC=0
	lab_ns_b timeout -k 5 "$(egress_wait 30)" "$EGRESS_SANDBOX" --instance "$inst" \
	    --control "$CTL" --user "$WU:$WU" --registry "$SB_REG" -- "${W_ENV[@]}" "$@" \
	    >"$out" 2>"$LAB_DIR/sandbox.err" || SB_RC=$?
}

# ---- a granted fetch from a sandboxed worker ------------------------------
lab_mark
sandboxed weather "$LAB_DIR/sb.out" "$W_FETCH" \
    http://api.weather.example/small
lab_expect_eq "sandboxed egress-fetch exit status" 0 "$SB_RC"
cmp -s "$LAB_DIR/www/small" "$LAB_DIR/sb.out" ||
    lab_fail "sandboxed fetch: body differs"
lab_ok "sandboxed fetch: body intact"
lab_expect_decision weather allow - api.weather.example
lab_expect_hits "$LAB_PUB4" 1 /small

# ---- the fixture plugin (its own seccomp filter on top) -------------------
lab_mark
sandboxed weather "$LAB_DIR/plugin.out" "$W_PLUGIN" \
    http://api.weather.example/small
lab_expect_eq "sandboxed fixture plugin exit status" 0 "$SB_RC"
lab_expect_eq "its own AF_INET socket" "socket(AF_INET): EPERM" \
    "$(sed -n 1p "$LAB_DIR/plugin.out")"
lab_expect_eq "status through the broker" "status: 200" \
    "$(sed -n 3p "$LAB_DIR/plugin.out")"
lab_expect_eq "body through the broker" "$(cat "$LAB_DIR/www/small")" \
    "$(tail -n +5 "$LAB_DIR/plugin.out")"
lab_expect_decision weather allow - api.weather.example
lab_expect_hits "$LAB_PUB4" 1 /small

# ---- the attached connection is bound to its instance ---------------------
lab_mark
sandboxed weather "$LAB_DIR/sb.out" "$W_FETCH" \
    http://api.radar.example/small
lab_expect_eq "sandboxed fetch of radar's host: denied (exit 10)" 10 "$SB_RC"
lab_expect_decision weather deny not-granted api.radar.example
lab_expect_hits "$LAB_PUB4" 0

# ---- no socket syscalls in the worker -------------------------------------
sandboxed weather "$LAB_DIR/probe.out" "$W_PROBE" socket socketpair \
    connect bind listen accept accept4
[ "$SB_RC" = 0 ] || lab_fail "sandbox_probe: $(grep -v '^ok' \
    "$LAB_DIR/probe.out" | head -n 5)"
for want in 'ok socket(AF_INET): EPERM' 'ok socket(AF_UNIX): EPERM' \
    'ok connect(other instance socket): EPERM' 'ok sendto(addr): EPERM' \
    'ok sendmsg(SCM_RIGHTS): EPERM' 'ok EGRESS_FD is set' \
    'ok no other descriptor above 2'; do
	grep -qxF "$want" "$LAB_DIR/probe.out" ||
	    lab_fail "sandbox_probe did not report '$want'"
	lab_ok "sandboxed worker: ${want#ok }"
done

# ---- another instance's socket is out of reach ---------------------------
lab_mark
sandboxed weather "$LAB_DIR/sb.out" "$W_FETCH" \
    --socket "$LAB_SOCK_DIR/radar.sock" http://api.radar.example/small
[ "$SB_RC" != 0 ] || lab_fail "a sandboxed worker reached radar.sock"
# Its socket() failed (EPERM): the shim reports a failed system call.
grep -q 'system call failed' "$LAB_DIR/sandbox.err" ||
    lab_fail "unexpected failure: $(cat "$LAB_DIR/sandbox.err")"
lab_ok "sandboxed worker cannot open radar.sock (exit $SB_RC)"
[ "$(lab_count_events egress.decision)" = 0 ] ||
    lab_fail "a request arrived from the sandbox on radar.sock"
lab_ok "no request reached the broker through radar.sock"
lab_expect_hits "$LAB_PUB4" 0

# ---- a passed descriptor drops the connection and is closed ---------------
lab_mark
t=$(egress_wait 20)
timeout "$t" python3 - "$CTL" <<'EOF' || lab_fail "descriptor passing check"
import os, select, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"attach weather\n")
msg, fds, _, _ = socket.recv_fds(s, 4096, 4)
assert b'"attached"' in msg and len(fds) == 1, (msg, fds)
s.close()
c = socket.socket(fileno=fds[0])
r, w = os.pipe()
socket.send_fds(c, [b"x"], [w])
os.close(w)
# The broker must drop the connection...
c.settimeout(10)
assert c.recv(64) == b"", "the broker kept the connection"
# ...and close the descriptor it received: the pipe's last writer is gone.
ready, _, _ = select.select([r], [], [], 10)
assert ready and os.read(r, 1) == b"", "the broker kept the descriptor"
print("dropped and closed")
EOF
lab_ok "a descriptor passed on an attached connection: dropped and closed"
# The broker carries on.
lab_fetch weather http://api.weather.example/small
lab_expect_fetch_ok
lab_expect_decision weather allow - api.weather.example

# ---- another instance's worker is out of reach ---------------------------
# radar (granted api.weather.example too, which its manifest declares)
# has a worker that holds its attached connection at fd 3 and waits (a
# shell reading a fifo) before it fetches on it.
lab_mark
mkfifo -m 0666 "$LAB_DIR/go"
lab_spawn victim "$LAB_NS_B" timeout -k 5 "$(egress_wait 60)" \
    "$EGRESS_SANDBOX" --instance radar --control "$CTL" --user "$WU:$WU" \
    --registry "$SB_REG" -- "${W_ENV[@]}" sh -c \
    'read x < "$1"; exec "$2" http://api.weather.example/small' sh \
    "$LAB_DIR/go" "$W_FETCH"
victim_pid()
{
	VPID=$(pgrep -u "$WU" -x sh | head -n 1)
	[ -n "$VPID" ] && [ -S "/proc/$VPID/fd/3" ]
}
lab_poll 15 victim_pid || lab_fail "radar's worker did not start"
lab_ok "radar's worker waits with its connection (pid $VPID)"
sandboxed weather "$LAB_DIR/attack.out" "$W_PROBE" --attack "$VPID" \
    --victim-fd 3
[ "$SB_RC" = 0 ] || lab_fail "attack probe: $(grep -v '^ok' \
    "$LAB_DIR/attack.out" | head -n 5)"
for want in "ok ptrace(PTRACE_ATTACH, $VPID): EPERM" \
    'ok ptrace(PTRACE_SEIZE): EPERM' 'ok process_vm_readv: EPERM' \
    'ok process_vm_writev: EPERM' 'ok kcmp(KCMP_FILE): EPERM' \
    'ok pidfd_open: EPERM' 'ok pidfd_getfd: EPERM' \
    'errno open /proc/PID/mem O_RDWR: ENOENT' \
    'errno readlink /proc/PID/fd/N: ENOENT' \
    'errno open /proc/PID/fd/N: ENOENT' 'result kill(PID, 0): ESRCH'; do
	grep -qxF "$want" "$LAB_DIR/attack.out" ||
	    lab_fail "attack on radar's worker: no '$want'"
done
lab_ok "weather's worker cannot reach radar's worker (ptrace, process_vm, pidfd_getfd, /proc)"
grep -qF "warning: uid $WU also runs a worker of instance radar" \
    "$LAB_DIR/sandbox.err" ||
    lab_fail "no shared-uid warning: $(cat "$LAB_DIR/sandbox.err")"
lab_ok "weather's launch warned that radar's worker has the same uid"
[ "$(lab_count_events egress.decision)" = 0 ] ||
    lab_fail "a request reached the broker during the attack"
echo go > "$LAB_DIR/go"
lab_poll 30 lab__gone "${LAB_PID[victim]}" || lab_fail "radar's worker hangs"
lab_stop victim
lab_expect_eq "radar's worker, after the attack: exit status" 0 "$LAB_STOP_RC"
cmp -s "$LAB_DIR/www/small" "$LAB_DIR/log/victim.out" ||
    lab_fail "radar's fetch after the attack: body differs"
lab_ok "radar's connection still serves its worker"
lab_expect_decision radar allow - api.weather.example
lab_expect_hits "$LAB_PUB4" 1 /small

lab_finish
