#!/bin/bash
# SPDX-License-Identifier: ISC
# install.sh BUILDDIR: `meson install` into a scratch DESTDIR lays out the
# binaries, the shim library with headers and pkg-config file, the unit,
# the sysusers.d file, the configuration, docs, examples and man pages.
# The installed unit carries every hardening line docs/deployment.md
# explains (its own user, no capability, the syscall filter, MemoryMax=
# 512 MiB above the default [broker] memory_max), passes `systemd-analyze
# verify` with its ExecStart pointed at the built egressd, and
# `systemd-analyze security --offline=true` rates it below 1.5, the
# figure the installed deployment.md gives. systemd-sysusers
# creates the unit's user from the installed file in a scratch root (a
# system account, home the state folder, no login shell). The installed
# configuration passes `egressd --check-config`; as root, the installed
# broker then runs as an unprivileged uid with no capability (what the
# unit grants) and serves: the instance socket is its own, 0660, and
# egressctl status answers over the control socket. The systemd-analyze
# and sysusers checks are notes when those tools are missing; the run is
# a note when not root.
set -eu
. "$(dirname "$0")/wrap.sh"

build=$1
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

DESTDIR="$dest" meson install -C "$build" --no-rebuild --quiet >/dev/null
prefix=$(meson introspect "$build" --buildoptions |
	python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"][0])')
root="$dest$prefix"
for f in sbin/egressd bin/egressctl bin/egress-sandbox bin/egress-fetch bin/egress-connect \
	include/egress/egress.h include/egress/error.h \
	share/egressd/seccomp-egress-worker.json \
	share/doc/egressd/examples/egressd.ini; do
	[ -e "$root/$f" ] || fail "$prefix/$f not installed"
done
ls "$root"/lib/*/libegress.so.0 "$root"/lib/*/pkgconfig/egress.pc \
	>/dev/null 2>&1 || ls "$root"/lib/libegress.so.0 >/dev/null ||
	fail "libegress.so.0 / egress.pc"
unit=$(find "$dest" -name egressd.service | head -1)
[ -n "$unit" ] || fail "egressd.service not installed"
ini=$(find "$dest" -path '*/egressd/egressd.ini' -not -path '*/doc/*' | head -1)
[ -n "$ini" ] || fail "egressd.ini not installed in sysconfdir"
find "$dest" -type d -path '*/lib/egressd/packages' | grep -q . ||
	fail "lib/egressd/packages"
for line in Type=notify User=egressd Group=egressd RuntimeDirectory=egressd \
	NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes \
	PrivateMounts=yes ProtectProc=invisible ProcSubset=pid UMask=0077 \
	RemoveIPC=yes MemoryMax=2G \
	'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK' \
	SystemCallFilter=@system-service \
	'SystemCallFilter=~@privileged @resources' SystemCallFilter=@chown \
	CapabilityBoundingSet=; do
	grep -qxF "$line" "$unit" || fail "unit lacks '$line'"
done
grep -q '^ExecStart=.*egressd --foreground' "$unit" || fail "ExecStart"
# systemctl reload fails when the new file is invalid: egressctl reload.
grep -qx "ExecReload=$prefix/bin/egressctl -c ${ini#"$dest"} reload" "$unit" ||
	fail "ExecReload is not egressctl reload of the installed file"
# The file the unit names, the file installed and the programs' default
# agree (under the default prefix /usr/local too).
for exe in ExecStartPre ExecStart; do
	grep -q "^$exe=.* -c ${ini#"$dest"}\$" "$unit" ||
		fail "$exe does not name the installed ${ini#"$dest"}"
done
"$root/sbin/egressd" --help | tr -s ' \n' ' ' |
	grep -qF "else ${ini#"$dest"})" ||
	fail "egressd's default is not the installed ${ini#"$dest"}"
"$root/bin/egressctl" --help | grep -qF "else ${ini#"$dest"}." ||
	fail "egressctl's default is not the installed ${ini#"$dest"}"
grep -q '^AmbientCapabilities=' "$unit" && fail "the unit grants capabilities"
# MemoryMax= fences the whole process: it stays 512 MiB above the buffer
# budget [broker] memory_max (at most 1 GiB by default), so the broker's
# own accounting throttles long before the kernel kills it.
bytes() {
	awk -v v="$1" 'BEGIN { n = v + 0; u = substr(v, length(v));
		if (u == "K") n *= 1024; if (u == "M") n *= 1048576;
		if (u == "G") n *= 1073741824; printf "%.0f\n", n }'
}
fence=$(bytes "$(sed -n 's/^MemoryMax=//p' "$unit")")
budget=$(sed -n 's/^memory_max *= *//p' "$ini")
budget=$(bytes "${budget:-1G}")
[ "$fence" -ge $((budget + 536870912)) ] ||
	fail "MemoryMax= ($fence) leaves less than 512 MiB above memory_max ($budget)"
sysusers=$(find "$dest" -path '*/sysusers.d/egressd.conf' | head -1)
[ -n "$sysusers" ] || fail "sysusers.d/egressd.conf not installed"
"${EGRESS_WRAP_CMD[@]}" "$root/sbin/egressd" --check-config -c "$ini" \
	2>/dev/null ||
	fail "the installed configuration does not pass --check-config"
if command -v systemd-analyze >/dev/null; then
	sed -e "s|^\(Exec[A-Za-z]*=\)[^ ]*/egressd |\1$root/sbin/egressd |" \
		-e "s|^\(Exec[A-Za-z]*=\)[^ ]*/egressctl |\1$root/bin/egressctl |" \
		"$unit" > "$dest/egressd.service"
	systemd-analyze verify --man=no "$dest/egressd.service" ||
		fail "systemd-analyze verify"
	security=$(systemd-analyze security --offline=true --no-pager \
		"$dest/egressd.service" 2>&1) || {
		echo "$security"
		fail "systemd-analyze security --offline=true"
	}
	score=$(sed -n 's/.*Overall exposure level for egressd.service: \([0-9.]*\).*/\1/p' \
		<<<"$security")
	[ -n "$score" ] || { echo "$security"; fail "no exposure level"; }
	awk -v s="$score" 'BEGIN { exit !(s < 1.5) }' ||
		{ echo "$security"; fail "exposure $score, not below 1.5"; }
	echo "systemd-analyze security: $score"
	grep -q "^Overall exposure level for egressd.service: $score " \
		"$root/share/doc/egressd/deployment.md" ||
		fail "deployment.md does not give the exposure level $score"
else
	echo "note: systemd-analyze not available; unit not verified"
fi

if command -v systemd-sysusers >/dev/null; then
	sysroot="$dest/sysroot"
	mkdir -p "$sysroot/etc"
	systemd-sysusers --root="$sysroot" "$sysusers" ||
		fail "systemd-sysusers"
	user=$(sed -n 's/^User=//p' "$unit")
	pw=$(grep "^$user:" "$sysroot/etc/passwd") ||
		fail "sysusers did not create the unit's user $user"
	IFS=: read -r _ _ uid gid _ home shell <<<"$pw"
	[ "$uid" -gt 0 ] && [ "$uid" -lt 1000 ] || fail "$user uid $uid"
	grep -q "^$(sed -n 's/^Group=//p' "$unit"):x:$gid:" "$sysroot/etc/group" ||
		fail "the unit's group is not $user's group"
	pkgdir=$(sed -n 's/^package_dir = //p' "$ini")
	[ "$home" = "${pkgdir%/packages}" ] ||
		fail "$user home $home, not the state folder of $pkgdir"
	case $shell in */nologin | */false) ;; *) fail "$user shell $shell" ;; esac
	echo "systemd-sysusers: $pw"
else
	echo "note: systemd-sysusers not available; the user is not checked"
fi

# The installed broker as the unit runs it: another uid, no capability.
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	echo "note: not root (or no setpriv); the broker is not run"
	echo "ok: meson install layout and unit"
	exit 0
fi
run=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null || true; rm -rf "$dest" "$run"' EXIT
chmod 0755 "$dest" "$run"
mkdir "$run/state"
chown 65534:65534 "$run/state"
manifest=$(find "$root/share/doc/egressd/examples/packages" \
	-path '*/weather/manifest.ini' | head -1)
cat > "$run/egressd.ini" <<INI
[plugins.security]
signature_mode = permissive

[broker]
instance_socket_dir = $run/state/instances
control_socket = $run/state/control.sock
log = $run/state/egressd.log

[resolver]
servers = 127.0.0.1:9

[plugins.entries.weather]
plugin = weather
manifest = $manifest
permissions = http_client
egress_hosts = api.weather.example
INI
# The wrapper's suppressions file, where uid 65534 can read it (the
# checkout may be in a folder only its owner can enter).
uwrap=()
for a in ${EGRESS_WRAP_CMD[@]+"${EGRESS_WRAP_CMD[@]}"}; do
	case $a in
	--suppressions=*)
		cp "${a#--suppressions=}" "$run/wrap.supp"
		chmod 0644 "$run/wrap.supp"
		a=--suppressions=$run/wrap.supp
		;;
	esac
	uwrap+=("$a")
done
setpriv --reuid=65534 --regid=65534 --clear-groups --bounding-set=-all \
	--inh-caps=-all --no-new-privs \
	${uwrap[@]+"${uwrap[@]}"} "$root/sbin/egressd" --foreground \
	-c "$run/egressd.ini" 2> "$run/egressd.err" &
pid=$!
for _ in $(seq 1 "$((100 * EGRESS_WAIT_SCALE))"); do
	[ -S "$run/state/instances/weather.sock" ] &&
		[ -S "$run/state/control.sock" ] && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
[ -S "$run/state/control.sock" ] ||
	{ cat "$run/egressd.err"; fail "the broker did not start as uid 65534"; }
[ "$(stat -c '%a %u %g' "$run/state/instances/weather.sock")" = \
	"660 65534 65534" ] ||
	fail "instance socket: $(stat -c '%a %u %g' "$run/state/instances/weather.sock")"
grep -q '^CapEff:	0000000000000000$' "/proc/$pid/status" ||
	fail "the broker has capabilities"
"${EGRESS_WRAP_CMD[@]}" "$root/bin/egressctl" -c "$run/egressd.ini" status \
	> "$run/status" || { cat "$run/status"; fail "egressctl status"; }
grep -q '^version:' "$run/status" || fail "status: $(cat "$run/status")"
echo "ok: the broker serves as uid 65534 with no capability"
echo "ok: meson install layout and unit"
