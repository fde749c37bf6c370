#!/bin/bash
# SPDX-License-Identifier: ISC
# deb.sh SRCDIR: build the Debian packages from a copy of the source tree
# (dpkg-buildpackage -us -uc -b; the checkout itself is not touched), run
# lintian (no errors allowed), then unpack egressd into a scratch root
# (dpkg -x) and install all three into another with dpkg --root, and check
# the layout: binaries, the enabled unit, the conffile, the packages
# folder, the library, headers and pkg-config file. Skips loudly (77)
# without dpkg-buildpackage or debhelper.
set -eu

src=$1
for t in dpkg-buildpackage dh lintian; do
	if ! command -v "$t" >/dev/null; then
		echo "SKIP: deb.sh needs $t (apt-get install debhelper devscripts lintian)" >&2
		exit 77
	fi
done
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && echo "kept $work" || rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir "$work/egressd"
tar -C "$src" --exclude=./.git --exclude='./build*' --exclude='./obj-*' \
	-cf - . | tar -C "$work/egressd" -xf -
(cd "$work/egressd" && dpkg-buildpackage -us -uc -b) > "$work/build.log" 2>&1 ||
	{ tail -40 "$work/build.log"; fail "dpkg-buildpackage"; }
ls "$work"/*.deb
changes=$(ls "$work"/egressd_*.changes)
lintian --fail-on error "$changes" > "$work/lintian.log" 2>&1 ||
	{ cat "$work/lintian.log"; fail "lintian reports errors"; }
cat "$work/lintian.log"

deb=$(ls "$work"/egressd_*.deb)
mkdir "$work/x"
dpkg -x "$deb" "$work/x"
for f in usr/sbin/egressd usr/bin/egressctl usr/bin/egress-sandbox \
	usr/bin/egress-fetch lib/systemd/system/egressd.service \
	etc/egressd/egressd.ini usr/share/egressd/seccomp-egress-worker.json \
	usr/share/doc/egressd/deployment.md.gz usr/share/man/man8/egressd.8.gz \
	usr/share/man/man1/egress-sandbox.1.gz; do
	[ -e "$work/x/$f" ] || fail "$f missing from the package"
done
[ -d "$work/x/var/lib/egressd/packages" ] || fail "/var/lib/egressd/packages"
dpkg-deb -e "$deb" "$work/ctl"
grep -qx /etc/egressd/egressd.ini "$work/ctl/conffiles" || fail "conffile"
grep -q 'deb-systemd-helper.*enable' "$work/ctl/postinst" ||
	grep -q 'deb-systemd-helper unmask' "$work/ctl/postinst" ||
	fail "the unit is not enabled by postinst"
grep -q '^Type=notify' "$work/x/lib/systemd/system/egressd.service" ||
	fail "unit type"
"$work/x/usr/sbin/egressd" --check-config \
	-c "$work/x/etc/egressd/egressd.ini" || fail "shipped configuration"

# Install everything into a scratch root: dpkg records the files there.
root="$work/root"
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status"
dpkg --root="$root" --force-depends \
	--no-triggers --force-not-root --force-unsafe-io \
	--instdir="$root" --admindir="$root/var/lib/dpkg" \
	--no-force-overwrite --unpack "$work"/*.deb > "$work/dpkg.log" 2>&1 ||
	{ cat "$work/dpkg.log"; fail "dpkg --root --unpack"; }
# Unpacked, not configured (maintainer scripts would run on this host):
# the conffile waits as .dpkg-new and dpkg records it as a conffile.
for f in usr/sbin/egressd etc/egressd/egressd.ini.dpkg-new \
	usr/include/egress/egress.h usr/lib/x86_64-linux-gnu/pkgconfig/egress.pc; do
	[ -e "$root/$f" ] || fail "$f not laid out by dpkg --root"
done
ls "$root"/usr/lib/*/libegress.so.0 >/dev/null || fail "libegress.so.0"
dpkg --root="$root" --admindir="$root/var/lib/dpkg" -L egressd |
	grep -qx /etc/egressd/egressd.ini || fail "dpkg -L egressd"
dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Conffiles}\n' egressd |
	grep -q '^ /etc/egressd/egressd.ini ' || fail "not a conffile in dpkg"
echo "ok: .deb builds, lintian has no errors, layout checked"
