#!/bin/bash
# SPDX-License-Identifier: ISC
# sandbox.sh EGRESS_SANDBOX SANDBOX_PROBE SRCDIR WITHOUT: egress-sandbox
# without a broker. Needs root (exit 77 otherwise). (1)
# docs/seccomp-egress-worker.json is exactly what `egress-sandbox
# --print-seccomp-profile` prints; it is an allow-list (default EPERM,
# 64-bit native ABIs only) that names none of the syscalls that reach
# other processes or make sockets. (2) run by
# root without --user, or with --user of uid 0 or gid 0, it refuses and
# COMMAND never runs. (3) with --user the worker has that uid and gid, no
# capability at all (bounding set included), no_new_privs, the seccomp
# filter and a PID namespace of its own (sandbox_probe). (4) against a
# sibling `sleep` of the same uid: every way at it fails (ptrace family
# EPERM from the filter, /proc/PID/* ENOENT, kill ESRCH); the sibling's
# writable memory is byte for byte the same, it is not stopped or traced,
# and it still ends on SIGTERM. (5) the same started by an unprivileged
# caller (no PID namespace): it says so, and Landlock refuses
# /proc/PID/mem (EACCES) and, on ABI 6, the signal; without Landlock
# (tests/integ/without.c) it refuses to start. (6) two workers of one
# uid for different instances: the second warns; one instance's workers
# do not; a TERM to the launcher reaches the worker and the registry
# entry goes. (7) --socket places the connection at fd 3 (and --fd 7),
# an inherited fd 5 is closed. (8) attach: a stand-in control socket
# (python3) answers `attach NAME` with a descriptor by SCM_RIGHTS; the
# worker gets it as EGRESS_FD and what it sends arrives at the other end.
# (9) a refused attach exits 3.
set -eu

sandbox=$1
probe=$2
srcdir=$3
without=$4
[ "$(id -u)" = 0 ] || { echo "skip: needs root"; exit 77; }
command -v setpriv >/dev/null || { echo "FAIL: missing setpriv" >&2; exit 1; }
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
ok() { echo "ok: $*"; }

# The command line: --help on stdout, --version, usage errors that name
# what is wrong, exit 2.
"$sandbox" --help | grep -q '^usage: egress-sandbox --instance NAME' ||
    fail "--help does not print the usage on stdout"
[ "$("$sandbox" --version)" = "$("$sandbox" -V)" ] &&
    "$sandbox" --version | grep -Eq '^egress-sandbox [0-9]+\.[0-9]+\.[0-9]+$' ||
    fail "--version / -V"
for args in "--bogus x" "--instance" "--instance a" \
    "--instance a --socket b -- true"; do
	rc=0
	# shellcheck disable=SC2086
	err=$("$sandbox" $args 2>&1 >/dev/null) || rc=$?
	[ "$rc" = 2 ] || fail "egress-sandbox $args: exit $rc, want 2"
	grep -q "^egress-sandbox: .*'" <<<"$err" ||
	    fail "egress-sandbox $args: the error names nothing: $err"
done
ok "command line: --help, --version, usage errors name the argument"

# The worker uid (no password entry needed with UID:GID) and the
# binaries, copied where that uid can run them (a checkout may sit in a
# folder only root can enter).
U=64801
chmod 0755 "$tmp"
mkdir -m 0755 "$tmp/bin"
cp "$sandbox" "$probe" "$tmp/bin/"
sandbox=$tmp/bin/$(basename "$sandbox")
probe=$tmp/bin/$(basename "$probe")
reg=$tmp/registry
SB=("$sandbox" --registry "$reg")
# A sanitizer build's leak check works by ptrace, which the sandbox
# refuses: off for the probe inside it (egress-sandbox keeps it).
P=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$probe")

# ---- (1) the shipped profile is the C filter's, and an allow-list ------
"$sandbox" --print-seccomp-profile > "$tmp/profile.json"
diff -u "$srcdir/docs/seccomp-egress-worker.json" "$tmp/profile.json" ||
	fail "docs/seccomp-egress-worker.json differs from the C filter"
refused=(socket socketpair connect bind listen accept accept4 sendmsg
	sendmmsg socketcall ptrace process_vm_readv process_vm_writev
	process_madvise kcmp pidfd_open pidfd_getfd pidfd_send_signal
	perf_event_open bpf userfaultfd keyctl add_key request_key
	io_uring_setup io_uring_enter io_uring_register unshare setns mount
	umount2 pivot_root chroot move_mount open_tree fsopen fsmount
	get_robust_list move_pages migrate_pages vmsplice setuid setresuid
	setgid setgroups modify_ldt iopl ioperm name_to_handle_at
	open_by_handle_at mknod mknodat shmget shmat msgget semget mq_open
	init_module finit_module kexec_load reboot swapon acct syslog)
python3 - "$tmp/profile.json" "${refused[@]}" <<'EOF' || fail "profile"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["defaultAction"] == "SCMP_ACT_ERRNO" and p["defaultErrnoRet"] == 1, p
assert p["architectures"] == ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"], p
allowed = set()
for r in p["syscalls"]:
    if r["action"] == "SCMP_ACT_ALLOW":
        allowed.update(r["names"])
bad = allowed.intersection(sys.argv[2:])
assert not bad, "allowed: %s" % sorted(bad)
for must in ("read", "write", "recvfrom", "mmap", "futex", "execve"):
    assert must in allowed, must
cond = {r["names"][0]: r for r in p["syscalls"] if "args" in r}
assert cond["sendto"]["args"] == [{"index": 4, "value": 0,
    "op": "SCMP_CMP_EQ"}], cond["sendto"]
assert "sendto" not in [n for r in p["syscalls"] if "args" not in r
    and r["action"] == "SCMP_ACT_ALLOW" for n in r["names"]]
print("profile: %d syscalls allowed, none of %d refused ones"
    % (len(allowed), len(sys.argv) - 2))
EOF
ok "the profile is the C filter's allow-list"

# A listening socket that holds its connections (nothing reads them),
# reachable by the worker uid.
python3 -c '
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); s.listen(8)
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

# ---- (2) never as root --------------------------------------------------
for u in "" "--user 0:$U" "--user root" "--user $U:0"; do
	rc=0
	# shellcheck disable=SC2086
	"${SB[@]}" --socket "$tmp/inst.sock" $u -- touch "$tmp/ran" \
		2> "$tmp/err" || rc=$?
	[ "$rc" = 2 ] || fail "as root (${u:-no --user}): exit $rc"
	grep -q 'refusing to run the worker as root' "$tmp/err" ||
		fail "as root (${u:-no --user}): $(cat "$tmp/err")"
	[ ! -e "$tmp/ran" ] || fail "COMMAND ran as root (${u:-no --user})"
done
ok "root without --user, --user 0 and gid 0: refused, COMMAND not run"

# ---- (3) the worker: its uid, no capability, no_new_privs, its own PIDs -
"${SB[@]}" --socket "$tmp/inst.sock" --user "$U:$U" -- cat /proc/self/status \
	> "$tmp/status" 2> "$tmp/err" || fail "cat: $(cat "$tmp/err")"
for want in "Uid:	$U	$U	$U	$U" "Gid:	$U	$U	$U	$U" "Groups:	 " \
    "CapInh:	0000000000000000" "CapPrm:	0000000000000000" \
    "CapEff:	0000000000000000" "CapBnd:	0000000000000000" \
    "CapAmb:	0000000000000000" "NoNewPrivs:	1" "Seccomp:	2"; do
	grep -qxF "$want" "$tmp/status" || fail "worker status lacks '$want'"
done
[ ! -s "$tmp/err" ] || fail "a root launch with a PID namespace printed: \
$(cat "$tmp/err")"
ok "the worker: uid/gid $U, no group, no capability, no_new_privs, seccomp"

"${SB[@]}" --socket "$tmp/inst.sock" --user "$U:$U" -- "${P[@]}" \
	"${refused[@]}" 5>/dev/null > "$tmp/probe.out" ||
	{ grep -v '^ok' "$tmp/probe.out"; fail "probe"; }
for want in 'ok EGRESS_FD is not CLOEXEC' 'ok no other descriptor above 2' \
    'ok syscall accept4: EPERM' 'ok syscall ptrace: EPERM' \
    'info CapBnd 0000000000000000' 'info pid 2' 'info procs 2' \
    'ok clone3: ENOSYS' 'ok personality(READ_IMPLIES_EXEC): EPERM' \
    'ok ioctl(1<<32 | TIOCSTI): EPERM' 'ok a thread starts (clone after clone3'"'"'s ENOSYS)'; do
	grep -qxF "$want" "$tmp/probe.out" || fail "probe: no '$want'"
done
ok "in its PID namespace the worker sees only PID 1 (the init) and itself"

# ---- (4) a sibling of the same uid is out of reach ----------------------
# memsum PID: a digest of the process's writable memory (read as root).
memsum() {
	python3 - "$1" <<'EOF'
import hashlib, sys
pid = sys.argv[1]
h = hashlib.sha256()
with open("/proc/%s/maps" % pid) as maps, \
        open("/proc/%s/mem" % pid, "rb", 0) as mem:
    for line in maps:
        f = line.split()
        if not f[1].startswith("rw") or (len(f) > 5 and f[5] in
                ("[vvar]", "[vvar_vclock]", "[vsyscall]")):
            continue
        a, b = (int(x, 16) for x in f[0].split("-"))
        mem.seek(a)
        h.update(mem.read(b - a))
print(h.hexdigest())
EOF
}
setpriv --reuid=$U --regid=$U --clear-groups sleep 600 &
sib=$!
pids+=($sib)
for _ in $(seq 1 1000); do
	[ "$(stat -c %u "/proc/$sib" 2>/dev/null)" = "$U" ] &&
		[ "$(readlink "/proc/$sib/exe")" != "$(command -v setpriv)" ] &&
		break
	sleep 0.01
done
[ "$(stat -c %u "/proc/$sib")" = "$U" ] || fail "the sibling did not start"
# It is within reach of an unconfined process of its uid.
setpriv --reuid=$U --regid=$U --clear-groups head -c 1 "/proc/$sib/environ" \
	>/dev/null || fail "the sibling is not reachable unconfined"
before=$(memsum "$sib")
"${SB[@]}" --socket "$tmp/inst.sock" --user "$U:$U" -- "${P[@]}" \
	--attack "$sib" --victim-fd 0 > "$tmp/attack.out" ||
	{ grep -v '^ok' "$tmp/attack.out"; fail "attack probe"; }
for want in 'ok ptrace(PTRACE_ATTACH, '"$sib"'): EPERM' \
    'ok ptrace(PTRACE_SEIZE): EPERM' 'ok process_vm_readv: EPERM' \
    'ok process_vm_writev: EPERM' 'ok kcmp(KCMP_FILE): EPERM' \
    'ok pidfd_open: EPERM' 'ok pidfd_getfd: EPERM' \
    'ok perf_event_open(pid): EPERM' \
    'errno open /proc/PID/mem O_RDWR: ENOENT' \
    'errno open /proc/PID/mem O_RDONLY: ENOENT' \
    'errno open /proc/PID/fd/N: ENOENT' \
    'errno open /proc/PID/environ: ENOENT' \
    'result kill(PID, 0): ESRCH'; do
	grep -qxF "$want" "$tmp/attack.out" || fail "attack: no '$want'"
done
[ "$(memsum "$sib")" = "$before" ] || fail "the sibling's memory changed"
grep -qx 'TracerPid:	0' "/proc/$sib/status" || fail "the sibling is traced"
grep -q '^State:	S' "/proc/$sib/status" || fail "the sibling is not sleeping"
ok "a sibling sleep of uid $U: every attempt failed, its memory is unchanged"

# ---- (5) an unprivileged caller: no PID namespace, Landlock holds -------
abi=$(python3 -c 'import ctypes
print(max(ctypes.CDLL(None).syscall(444, None, 0, 1), 0))')
install -d -o $U -m 0700 "$tmp/reg-$U" "$tmp/u-$U"
if [ "$abi" -ge 1 ]; then
	rc=0
	setpriv --reuid=$U --regid=$U --clear-groups "$sandbox" --registry \
		"$tmp/reg-$U" --socket "$tmp/inst.sock" -- "${P[@]}" \
		--attack "$sib" --victim-fd 0 > "$tmp/ll.out" 2> "$tmp/ll.err" ||
		rc=$?
	[ "$rc" = 0 ] || { grep -v '^ok' "$tmp/ll.out"; fail "landlock probe"; }
	grep -q 'no private PID namespace' "$tmp/ll.err" ||
		fail "no word of the missing PID namespace: $(cat "$tmp/ll.err")"
	[ "$abi" -ge 6 ] && kill_want=EPERM || kill_want=allowed
	for want in 'ok ptrace(PTRACE_ATTACH, '"$sib"'): EPERM' \
	    'ok process_vm_writev: EPERM' \
	    'errno open /proc/PID/mem O_RDWR: EACCES' \
	    'errno open /proc/PID/mem O_RDONLY: EACCES' \
	    'errno open /proc/PID/environ: EACCES' \
	    "result kill(PID, 0): $kill_want"; do
		grep -qxF "$want" "$tmp/ll.out" || fail "landlock: no '$want'"
	done
	[ "$(memsum "$sib")" = "$before" ] ||
		fail "the sibling's memory changed"
	ok "unprivileged caller, Landlock ABI $abi: /proc/PID/mem EACCES, kill $kill_want"
else
	echo "skip: no Landlock in this kernel (the unprivileged case)"
fi
# Without Landlock and without a PID namespace nothing keeps the sibling
# out of reach (Yama guards attaching, not /proc/PID/environ or
# /proc/PID/fd): it refuses, whatever Yama says, and COMMAND never runs.
rc=0
setpriv --reuid=$U --regid=$U --clear-groups "$without" landlock "$sandbox" \
	--registry "$tmp/reg-$U" --socket "$tmp/inst.sock" -- \
	touch "$tmp/u-$U/ran" > /dev/null 2> "$tmp/nl.err" || rc=$?
[ "$rc" = 4 ] || fail "no Landlock, no PID namespace: exit $rc, not 4"
grep -qF 'refusing to start: no PID namespace and no Landlock' "$tmp/nl.err" ||
	fail "no refusal named: $(cat "$tmp/nl.err")"
[ ! -e "$tmp/u-$U/ran" ] || fail "the command ran without Landlock"
ok "unprivileged caller without Landlock: refused, the command never ran"
kill "$sib"
rc=0
wait "$sib" || rc=$?
[ "$rc" = 143 ] || fail "the sibling ended with $rc, not by SIGTERM"
ok "the sibling still ends on SIGTERM"

# ---- (6) two instances' workers on one uid: a warning -------------------
mkfifo "$tmp/hold"
"${SB[@]}" --socket "$tmp/inst.sock" --user "$U:$U" -- sh -c 'read x' \
	< "$tmp/hold" 2> "$tmp/first.err" &
first=$!
pids+=($first)
exec 7> "$tmp/hold"
for _ in $(seq 1 1000); do
	[ -e "$reg/$U.$first" ] && break
	sleep 0.01
done
[ -e "$reg/$U.$first" ] || fail "no registry entry for the first worker"
ln -s "$tmp/inst.sock" "$tmp/other.sock"
"${SB[@]}" --socket "$tmp/other.sock" --user "$U:$U" -- true 2> "$tmp/err" ||
	fail "second worker: $(cat "$tmp/err")"
grep -qF "warning: uid $U also runs a worker of socket $tmp/inst.sock (launcher pid $first)" \
	"$tmp/err" || fail "no shared-uid warning: $(cat "$tmp/err")"
"${SB[@]}" --socket "$tmp/inst.sock" --user "$U:$U" -- true 2> "$tmp/err" ||
	fail "same-instance worker"
[ ! -s "$tmp/err" ] || fail "same instance warned: $(cat "$tmp/err")"
"${SB[@]}" --socket "$tmp/other.sock" --user "$((U + 1)):$U" -- true \
	2> "$tmp/err" || fail "another uid"
[ ! -s "$tmp/err" ] || fail "another uid warned: $(cat "$tmp/err")"
ok "two instances on uid $U: warned; one instance, or two uids: silent"
kill -TERM "$first"
rc=0
wait "$first" || rc=$?
exec 7>&-
[ "$rc" = 143 ] || fail "TERM to the launcher: worker ended with $rc"
[ ! -e "$reg/$U.$first" ] || fail "the registry entry stayed"
ok "TERM to the launcher reaches the worker; its registry entry is gone"

# A TERM sent before the worker starts is passed on, not lost: here it is
# pending, and blocked, when the launcher starts (a signal from outside
# does not reach a PID namespace's init without a handler), with and
# without root. sleep ends on it only if it is passed on and unblocked.
pending_term() {
	python3 -c '
import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
os.kill(os.getpid(), signal.SIGTERM)
os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}
rc=0
pending_term "${SB[@]}" --socket "$tmp/inst.sock" --user "$U:$U" -- \
	sleep 30 || rc=$?
[ "$rc" = 143 ] || fail "a TERM pending at start: worker ended with $rc"
if [ "$abi" -ge 1 ]; then
	rc=0
	pending_term setpriv --reuid=$U --regid=$U --clear-groups "$sandbox" \
		--registry "$tmp/reg-$U" --socket "$tmp/inst.sock" -- \
		sleep 30 2> "$tmp/err" || rc=$?
	[ "$rc" = 143 ] ||
		fail "a TERM pending at start, unprivileged: $rc $(cat "$tmp/err")"
fi
ok "a TERM that comes before the worker starts reaches it"

# ---- (7) --socket, default fd and --fd 7 --------------------------------
EGRESS_FD=9 "${SB[@]}" --socket "$tmp/inst.sock" --user "$U:$U" --fd 7 -- \
	sh -c '[ "$EGRESS_FD" = 7 ] && [ -S /proc/self/fd/7 ] || exit 9' ||
	fail "--fd 7"
rc=0
"${SB[@]}" --socket "$tmp/inst.sock" --user "$U:$U" --fd 2 -- true \
	2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "--fd 2 exited $rc"

# ---- (8) attach through a stand-in control socket -----------------------
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
"${SB[@]}" --instance good --control "$tmp/control.sock" --user "$U:$U" -- \
	"${P[@]}" socket > "$tmp/probe2.out" ||
	{ grep -v '^ok' "$tmp/probe2.out"; fail "attach"; }
for _ in $(seq 1 1000); do [ -s "$tmp/received" ] && break; sleep 0.01; done
[ "$(cat "$tmp/received")" = x ] || fail "the attached peer got nothing"

# ---- (9) a refused attach: exit 3 with the broker's message -------------
rc=0
"${SB[@]}" --instance bad --control "$tmp/control.sock" --user "$U:$U" -- \
	touch "$tmp/ran" 2> "$tmp/err" || rc=$?
[ "$rc" = 3 ] || fail "refused attach exited $rc"
grep -q 'attach refused: no such instance' "$tmp/err" || fail "message"
[ ! -e "$tmp/ran" ] || fail "COMMAND ran after a refused attach"
echo "ok: egress-sandbox"
