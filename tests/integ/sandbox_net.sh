#!/bin/bash
# SPDX-License-Identifier: ISC
#
# egress-sandbox --net against the real broker in the netns lab. Inside
# the sandbox (its own network namespace, run as an unprivileged uid):
# only lo exists (ip -o link, entered from outside; /proc/net/dev,
# /proc/1/net/dev and /sys/class/net from inside, also when built in a
# user namespace); a name does not resolve and the lab's DNS server and public
# address are unreachable at once (ENETUNREACH), and so is a direct
# curl --noproxy '*', while a plain curl goes to the proxy port; the proxy variables are set and no_proxy is empty;
# socket(AF_UNIX), raw, packet and netlink sockets, unshare and setns
# fail with EPERM. The broker holds the sandbox's listeners: the wire
# protocol's HELLO over TCP to 127.0.0.1:3128 and [::1]:3128 gets the
# broker's HELLO, and a request sent that way is decided for the
# sandbox's instance (granted host fetched; another instance's host
# denied). When the launcher exits the broker logs the listeners closed
# and nothing accepts on 127.0.0.1:3128 in that namespace any more. Run
# by a uid in control_uids without root it works in a user namespace,
# with a PID namespace and /proc of its own (or, where the kernel allows
# none, refuses with exit 4; so it does where /proc is partly covered);
# with unshare refused (inside another egress-sandbox) it refuses,
# saying why. The
# broker refuses attach-listener from a peer SO_PEERCRED does not allow,
# descriptors that are not loopback TCP listeners, more than the
# per-instance cap, and more descriptors than a line may carry.
# Needs root (skips with 77 otherwise).
set -euo pipefail
. "$(dirname "$0")/lab/lab.sh"
lab_init
lab_need_bins
[ -x "${EGRESS_SANDBOX:-}" ] || lab_fail "set EGRESS_SANDBOX to the built binary"
PY=/usr/bin/python3
[ -x "$PY" ] || lab_skip "needs $PY (the workers cannot run a python in /root)"
lab_up

WU=64810
mkdir -m 0755 "$LAB_DIR/bin"
cp "$(dirname "$0")/sandbox_net_probe.py" "$LAB_DIR/bin/"
chmod 0644 "$LAB_DIR/bin/sandbox_net_probe.py"
PROBE=$LAB_DIR/bin/sandbox_net_probe.py
# A copy another uid can run, wherever the build tree is (a checkout in
# a 0700 folder is not).
cp "$EGRESS_SANDBOX" "$LAB_DIR/bin/"
chmod 0755 "$LAB_DIR/bin/$(basename "$EGRESS_SANDBOX")"
SB_COPY=$LAB_DIR/bin/$(basename "$EGRESS_SANDBOX")
SB_REG=$LAB_DIR/run/sandbox-registry
CTL=$LAB_DIR/run/control.sock
W_ENV=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")

lab_dns_set api.weather.example="$LAB_PUB4" api.radar.example="$LAB_PUB4"
# control_uids names 64811, not the workers' uid: the control socket is
# 0666 and SO_PEERCRED alone refuses WU.
{
	lab_config_base | sed 's/^\[broker\]$/[broker]\ncontrol_uids = 0, 64811/'
	lab_entry weather weather "api.weather.example"
	lab_entry radar radar "api.radar.example, api.weather.example"
} | lab_config_install
lab_egressd_start weather radar

# netsandboxed OUT COMMAND...: run COMMAND under egress-sandbox --net for
# weather as WU; stdout to OUT, status in SB_RC.
netsandboxed()
{
	local out=$1
	shift
	SB_RC=0
	lab_ns_b timeout -k 5 "$(egress_wait 30)" "$EGRESS_SANDBOX" \
	    --instance weather --net --control "$CTL" --user "$WU:$WU" \
	    --registry "$SB_REG" -- "${W_ENV[@]}" "$@" >"$out" \
	    2>"$LAB_DIR/sandbox.err" || SB_RC=$?
}

# ---- nothing but lo, no DNS, no route, no other socket kinds -------------
lab_mark
# (The lab's DNS server listens on the broker namespace's loopback, which
# is not the sandbox's: the resolver the sandbox is given, 192.0.2.1,
# and the public address on port 53 stand for "a DNS server".)
netsandboxed "$LAB_DIR/probe.out" "$PY" "$PROBE" probe "$LAB_PUB4:80" \
    "$LAB_PUB4:53" "192.0.2.1:53"
[ "$SB_RC" = 0 ] || lab_fail "probe (status $SB_RC): $(grep -v '^ok' \
    "$LAB_DIR/probe.out" | head -n 8) $(cat "$LAB_DIR/sandbox.err")"
while read -r line; do
	lab_ok "inside --net: ${line#ok }"
done <"$LAB_DIR/probe.out"
[ "$(lab_dns_count api.weather.example A)" = 0 ] ||
    lab_fail "a DNS query from the sandbox reached the lab's server"
lab_ok "no DNS query reached the lab's server"
lab_expect_hits "$LAB_PUB4" 0

# /sys is the namespace's own sysfs (checked by the probe). A cgroup2
# tree the launcher sees is carried over into it, read-only (the worker's
# uid may own cgroups outside); cgroup v1 is not (its net_prio lists the
# host's interfaces). Launched from this namespace, whose /sys has the
# host's cgroup mounts, and from a mount namespace with a cgroup2 tree
# there; the sandbox makes its own network namespace all the same.
cgroup_view()
{
	SB_RC=0
	timeout -k 5 "$(egress_wait 30)" "$@" "$EGRESS_SANDBOX" \
	    --instance weather --net --control "$CTL" --user "$WU:$WU" \
	    --registry "$SB_REG" -- sh -c 'stat -f -c %T /sys/fs/cgroup;
	    ls /sys/fs/cgroup | wc -l; "$1" -c "import os; print(\"ro\"
	    if os.statvfs(\"/sys/fs/cgroup\").f_flag & os.ST_RDONLY
	    else \"rw\")"' sh "$PY" >"$LAB_DIR/cg.out" \
	    2>"$LAB_DIR/sandbox.err" || SB_RC=$?
}
if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then
	want="0 cgroup2fs $(ls /sys/fs/cgroup | wc -l) ro"
else
	want="0 sysfs 0 ro"
fi
cgroup_view
lab_expect_eq "the launcher's cgroup tree in the sandbox's /sys" \
    "$want" "$SB_RC $(tr '\n' ' ' <"$LAB_DIR/cg.out" | sed 's/ $//')"
cgroup_view unshare -m sh -c 'mount -t cgroup2 none /sys/fs/cgroup &&
    exec "$@"' sh
lab_expect_eq "a cgroup2 tree carried over read-only" \
    "0 cgroup2fs $(unshare -m sh -c 'mount -t cgroup2 none /sys/fs/cgroup &&
    ls /sys/fs/cgroup | wc -l') ro" \
    "$SB_RC $(tr '\n' ' ' <"$LAB_DIR/cg.out" | sed 's/ $//')"

netsandboxed "$LAB_DIR/curl.out" curl -sS --max-time 20 --noproxy '*' \
    "http://$LAB_PUB4/small"
[ "$SB_RC" = 7 ] || lab_fail "curl --noproxy '*': status $SB_RC, want 7" \
    "(could not connect): $(cat "$LAB_DIR/sandbox.err")"
lab_ok "curl --noproxy '*' http://$LAB_PUB4/: could not connect (exit 7)"
lab_expect_hits "$LAB_PUB4" 0

# curl, unmodified, follows http_proxy to the broker: it neither
# resolves the name (exit 6) nor fails to connect (7) or times out (28).
# (A broker without the HTTP proxy front drops the connection: 52.)
netsandboxed "$LAB_DIR/curl.out" curl -sS --max-time 20 \
    http://api.weather.example/small
case $SB_RC in
6 | 7 | 28) lab_fail "curl through http_proxy: status $SB_RC:" \
    "$(cat "$LAB_DIR/sandbox.err")" ;;
esac
lab_ok "curl http://api.weather.example/ reaches the proxy port (status $SB_RC)"

# ---- the broker serves the sandbox's listeners for weather ----------------
lab_mark
# shellcheck disable=SC2016 # expanded by the inner shell
netsandboxed "$LAB_DIR/hello.out" sh -c \
    '"$1" "$2" hello 127.0.0.1 && "$1" "$2" hello ::1' sh "$PY" "$PROBE"
lab_expect_eq "HELLO over TCP (status)" 0 "$SB_RC"
lab_expect_eq "HELLO on 127.0.0.1:3128 and [::1]:3128" \
    "hello 1 hello 1" "$(tr '\n' ' ' <"$LAB_DIR/hello.out" | sed 's/ $//')"
lab_wait_events egress.listen 2
lab_expect_eq "attach logged for weather" "weather 2" \
    "$(lab_events egress.listen | jq -r 'select(.status == "attached") |
    "\(.instance) \(.listeners)"')"
lab_expect_eq "closed logged for weather once the launcher exited" \
    "weather" "$(lab_events egress.listen | jq -r 'select(.status ==
    "closed") | .instance')"

lab_mark
netsandboxed "$LAB_DIR/fetch.out" "$PY" "$PROBE" fetch 127.0.0.1 \
    api.weather.example /small
lab_expect_eq "request over the proxy port (status)" 0 "$SB_RC"
lab_expect_eq "granted fetch over 127.0.0.1:3128" "status 200" \
    "$(head -n 1 "$LAB_DIR/fetch.out")"
lab_expect_eq "its body" "$(cat "$LAB_DIR/www/small")" \
    "$(tail -n +2 "$LAB_DIR/fetch.out")"
lab_expect_decision weather allow - api.weather.example
lab_expect_hits "$LAB_PUB4" 1 /small

lab_mark
netsandboxed "$LAB_DIR/fetch.out" "$PY" "$PROBE" fetch 127.0.0.1 \
    api.radar.example /small
lab_expect_decision weather deny not-granted api.radar.example
lab_expect_hits "$LAB_PUB4" 0

# ---- the launcher exits: the listeners close ------------------------------
# The sandboxed command waits; its namespace is kept (bind mount) so that
# it can be entered after everything in it has exited.
lab_mark
lab_spawn held "$LAB_NS_B" timeout -k 5 "$(egress_wait 60)" \
    "$EGRESS_SANDBOX" --instance weather --net --control "$CTL" \
    --user "$WU:$WU" --registry "$SB_REG" -- "$PY" "$PROBE" wait \
    "$LAB_DIR/release"
held_ready() { grep -qx ready "$LAB_DIR/log/held.out" 2>/dev/null; }
lab_poll 15 held_ready || lab_fail "the held sandbox did not start:" \
    "$(cat "$LAB_DIR/log/held.err")"
HPID=$(pgrep -u "$WU" -f "sandbox_net_probe.py wait" | head -n 1)
[ -n "$HPID" ] || lab_fail "no sandboxed process"
: >"$LAB_DIR/netns"
mount --bind "/proc/$HPID/ns/net" "$LAB_DIR/netns"
keep_ns_down() { umount "$LAB_DIR/netns" 2>/dev/null || true; }
# lab__on_exit reads the exit status from $?: keep it.
keep_ns_exit() {
	local rc=$?
	keep_ns_down
	(exit "$rc")
	lab__on_exit
}
trap keep_ns_exit EXIT
lab_expect_eq "only lo in the sandbox (ip -o link)" "lo" \
    "$(nsenter --net="$LAB_DIR/netns" ip -o link | awk -F': ' '{ print $2 }' |
    tr '\n' ' ' | sed 's/ $//')"
lab_expect_eq "the broker accepts there while the launcher runs" "hello 1" \
    "$(nsenter --net="$LAB_DIR/netns" "$PY" "$PROBE" hello 127.0.0.1)"
: >"$LAB_DIR/release"
lab_poll 15 lab__gone "${LAB_PID[held]}" || lab_fail "the held sandbox hangs"
lab_stop held
lab_expect_eq "held sandbox exit status" 0 "$LAB_STOP_RC"
closed_logged() {
	[ "$(lab_events egress.listen | jq -r 'select(.status == "closed") |
	    .instance')" = weather ]
}
lab_poll 10 closed_logged || lab_fail "no listener close logged"
lab_ok "the broker logged weather's listeners closed"
refused() {
	nsenter --net="$LAB_DIR/netns" "$PY" -c '
import socket, sys
try:
    socket.create_connection(("127.0.0.1", 3128), timeout=5)
except ConnectionRefusedError:
    sys.exit(0)
sys.exit(1)'
}
refused || lab_fail "something still accepts on 127.0.0.1:3128"
lab_ok "after the launcher exited nothing accepts on 127.0.0.1:3128"
keep_ns_down

# ---- unprivileged: a user namespace, where the kernel allows one ----------
# uid 64811 is in control_uids. Where unprivileged user namespaces are
# allowed it builds the same sandbox inside one (and the worker runs as
# itself); where they are not it refuses, saying why (exit 4).
lab_mark
UU=64811
SB_RC=0
lab_ns_b setpriv --reuid "$UU" --regid "$UU" --clear-groups \
    timeout -k 5 "$(egress_wait 30)" "$SB_COPY" --instance weather \
    --net --control "$CTL" --registry "$LAB_DIR/run/reg-$UU" -- \
    "${W_ENV[@]}" sh -c '"$1" "$2" sysnet && "$1" "$2" hello 127.0.0.1' \
    sh "$PY" "$PROBE" >"$LAB_DIR/unpriv.out" 2>"$LAB_DIR/unpriv.err" ||
    SB_RC=$?
if [ "$SB_RC" = 4 ]; then
	grep -q "not root, and no user namespace" "$LAB_DIR/unpriv.err" ||
	    lab_fail "unprivileged refusal: $(cat "$LAB_DIR/unpriv.err")"
	lab_ok "unprivileged, no user namespace allowed: refused (exit 4)"
else
	# Its own PID namespace and /proc, and a sysfs of its network
	# namespace: no interface of the host's shows through either.
	[ "$(grep -c '^ok ' "$LAB_DIR/unpriv.out")" = 3 ] ||
	    lab_fail "unprivileged --net: $(grep -v '^ok ' \
	    "$LAB_DIR/unpriv.out") $(cat "$LAB_DIR/unpriv.err")"
	while read -r line; do
		lab_ok "unprivileged --net: ${line#ok }"
	done < <(grep '^ok ' "$LAB_DIR/unpriv.out")
	lab_expect_eq "unprivileged --net in a user namespace: HELLO" \
	    "0 hello 1" "$SB_RC $(tail -n 1 "$LAB_DIR/unpriv.out")"
	# Where the user namespace may not mount a /proc of its own (the
	# host's partly covered, as in some containers), it refuses rather
	# than show the host's processes and network (exit 4).
	SB_RC=0
	unshare -m sh -c 'mount --bind /dev/null /proc/timer_list &&
	    exec "$@"' sh setpriv --reuid "$UU" --regid "$UU" --clear-groups \
	    timeout -k 5 "$(egress_wait 30)" "$SB_COPY" --instance weather \
	    --net --control "$CTL" --registry "$LAB_DIR/run/reg-$UU" -- \
	    cat /proc/1/net/dev >"$LAB_DIR/unpriv.out" \
	    2>"$LAB_DIR/unpriv.err" || SB_RC=$?
	lab_expect_eq "unprivileged --net with /proc partly covered: exit" \
	    "4 0" "$SB_RC $(wc -c <"$LAB_DIR/unpriv.out")"
	grep -q "mount /proc" "$LAB_DIR/unpriv.err" ||
	    lab_fail "unprivileged refusal: $(cat "$LAB_DIR/unpriv.err")"
	lab_ok "unprivileged --net with /proc partly covered: says why"
fi

# No privilege to create the namespaces at all: inside the worker filter
# of a plain egress-sandbox, unshare fails; --net refuses, saying why.
SB_RC=0
lab_ns_b timeout -k 5 "$(egress_wait 30)" "$EGRESS_SANDBOX" \
    --instance weather --control "$CTL" --user "$UU:$UU" \
    --registry "$SB_REG" -- "${W_ENV[@]}" \
    "$SB_COPY" \
    --instance weather --net --control "$CTL" -- /bin/true \
    2>"$LAB_DIR/nopriv.err" || SB_RC=$?
lab_expect_eq "--net without the privilege: exit status" 4 "$SB_RC"
grep -q "not root, and no user namespace to create the network namespace" \
    "$LAB_DIR/nopriv.err" ||
    lab_fail "--net without the privilege: $(cat "$LAB_DIR/nopriv.err")"
lab_ok "--net without the privilege says so"

# ---- the broker's checks on attach-listener ------------------------------
lab_mark
# attach-listener from a peer that SO_PEERCRED refuses (uid WU).
out=$(lab_ns_b setpriv --reuid "$WU" --regid "$WU" --clear-groups "$PY" - \
    "$CTL" <<'EOF'
import socket, sys
l = socket.create_server(("127.0.0.1", 0))
c = socket.socket(socket.AF_UNIX)
c.connect(sys.argv[1])
try:
    socket.send_fds(c, [b"attach-listener weather\n"], [l.fileno()])
except OSError:
    pass
print(c.recv(4096).decode().strip())
EOF
)
lab_expect_eq "attach-listener from a uid not in control_uids" \
    '{"error":"permission denied","code":"denied"}' "$out"
[ "$(lab_events egress.listen | jq -r 'select(.status == "attached") |
    .instance' | wc -l)" = 0 ] || lab_fail "a refused peer attached"

# Caps and checks, as root, with listeners of a namespace of their own
# (as egress-sandbox --net's): 8 attaches of 4 listeners fill weather's
# 32; the next is refused; a socket that does not listen, one on a
# non-loopback address and 5 descriptors on one line are refused; and a
# loopback listener of the broker's own namespace, which every local
# user could reach without a token.
lab_mark
lab_ns_b timeout "$(egress_wait 30)" unshare -n sh -c \
    'ip link set lo up && ip addr add 10.9.9.9/32 dev lo && exec "$@"' sh \
    "$PY" - "$CTL" "$LAB_DIR/caps.out" \
    <<'EOF' || lab_fail "caps: $(cat "$LAB_DIR/caps.out")"
import json, socket, sys

ctl, out = sys.argv[1], open(sys.argv[2], "w")
held = []

def attach(fds, inst="weather"):
    c = socket.socket(socket.AF_UNIX)
    c.connect(ctl)
    socket.send_fds(c, [("attach-listener %s\n" % inst).encode()],
                    [f.fileno() for f in fds])
    c.settimeout(10)
    r = c.recv(4096).decode().strip()
    held.append(c)
    print(r, file=out, flush=True)
    return json.loads(r) if r else {}

for i in range(8):
    r = attach([socket.create_server(("127.0.0.1", 0)) for _ in range(4)])
    assert r.get("listeners") == 4, r
r = attach([socket.create_server(("127.0.0.1", 0))])
assert r.get("error") == "too many listeners for this instance", r
assert attach([socket.create_server(("127.0.0.1", 0))],
              "radar").get("listeners") == 1
r = attach([socket.socket()], "radar")
assert r.get("error") == "not a listening TCP socket on loopback", r
pub = socket.create_server(("10.9.9.9", 0))
r = attach([pub], "radar")
assert r.get("error") == "not a listening TCP socket on loopback", r
r = attach([socket.create_server(("127.0.0.1", 0)) for _ in range(5)],
           "radar")
assert r == {}, r
print("done", file=out, flush=True)
EOF
lab_ok "caps: 32 listeners per instance, then refused"
lab_ok "refused: a socket that does not listen, a non-loopback listener," \
    "5 descriptors on a line"
closed8() {
	[ "$(lab_events egress.listen | jq -r 'select(.status == "closed" and
	    .instance == "weather") | .instance' | wc -l)" = 8 ]
}
lab_poll 10 closed8 || lab_fail "want 8 closed events for weather"
lab_ok "their 8 holds closed with the connections"

# A loopback listener of the broker's own namespace, from an allowed peer.
out=$(lab_ns_b "$PY" - "$CTL" <<'EOF'
import socket, sys
l = socket.create_server(("127.0.0.1", 0))
c = socket.socket(socket.AF_UNIX)
c.connect(sys.argv[1])
socket.send_fds(c, [b"attach-listener weather\n"], [l.fileno()])
c.settimeout(10)
print(c.recv(4096).decode().strip())
EOF
)
grep -q "a listener in the broker's own network namespace" <<<"$out" ||
    lab_fail "a listener of the broker's own namespace: $out"
lab_ok "refused: a loopback listener of the broker's own namespace"

# The broker carries on.
lab_fetch weather http://api.weather.example/small
lab_expect_fetch_ok
lab_finish
