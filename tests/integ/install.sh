#!/bin/bash
# SPDX-License-Identifier: ISC
# install.sh BUILDDIR: `meson install` into a scratch DESTDIR lays out the
# binaries, the shim library with headers and pkg-config file, the unit,
# the configuration, docs, examples and man pages; the installed unit
# carries every hardening line of the sidecar issue, and passes
# `systemd-analyze verify` (where available) with its ExecStart pointed
# at the built egressd; the installed configuration passes
# `egressd --check-config`.
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
for f in sbin/egressd bin/egressctl bin/egress-sandbox bin/egress-fetch \
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
for line in Type=notify RuntimeDirectory=egressd NoNewPrivileges=yes \
	ProtectSystem=strict ProtectHome=yes PrivateTmp=yes \
	'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK' \
	SystemCallFilter=@system-service CapabilityBoundingSet= \
	'ExecReload=/bin/kill -HUP $MAINPID'; do
	grep -qxF "$line" "$unit" || fail "unit lacks '$line'"
done
grep -q '^ExecStart=.*egressd --foreground' "$unit" || fail "ExecStart"
"${EGRESS_WRAP_CMD[@]}" "$root/sbin/egressd" --check-config -c "$ini" \
	2>/dev/null ||
	fail "the installed configuration does not pass --check-config"
if command -v systemd-analyze >/dev/null; then
	sed "s|^\(Exec[A-Za-z]*=\)[^ ]*/egressd|\1$root/sbin/egressd|" "$unit" \
		> "$dest/egressd.service"
	systemd-analyze verify --man=no "$dest/egressd.service" ||
		fail "systemd-analyze verify"
else
	echo "note: systemd-analyze not available; unit not verified"
fi
echo "ok: meson install layout and unit"
