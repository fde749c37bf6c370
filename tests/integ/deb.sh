#!/bin/bash
# SPDX-License-Identifier: ISC
# deb.sh SRCDIR: build the Debian packages from a copy of the source tree
# (dpkg-buildpackage -us -uc -b, as docs/deployment.md says; the checkout
# itself is not touched). The copy is a git repository of its own: after
# the build `git status` shows nothing (what the build leaves is ignored)
# and after `debian/rules clean` nothing even among the ignored files.
# lintian reports no error and no missing manual page. Then unpack egressd
# into a scratch root (dpkg -x) and install all three into another with
# dpkg --root, and check the layout: binaries, the enabled unit and the
# user it runs as, the sysusers.d file, the conffile, the packages folder,
# the library with its symbols file (exactly the library's egress_*
# exports), headers, pkg-config file and docs/shim.md. The maintainer
# scripts run against a scratch root (DPKG_ROOT, systemd helpers replaced
# by stubs that record their calls): configure creates the egressd system
# user there before the unit would start, remove keeps /var/lib/egressd
# and /var/log/egressd, purge removes them. Skips loudly (77) without
# dpkg-buildpackage or debhelper.
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

grep -qF 'dpkg-buildpackage -us -uc -b' "$src/docs/deployment.md" &&
	grep -qF 'debian/rules clean' "$src/docs/deployment.md" ||
	fail "docs/deployment.md does not say how to build the .deb"

tree=$work/egressd
mkdir "$tree"
tar -C "$src" --exclude=./.git --exclude='./build*' --exclude='./obj-*' \
	-cf - . | tar -C "$tree" -xf -
g() { git -C "$tree" -c user.name=deb.sh -c user.email=deb.sh@invalid "$@"; }
g init -q
g add -A
g commit -qm "the tree before the build"
(cd "$tree" && dpkg-buildpackage -us -uc -b) > "$work/build.log" 2>&1 ||
	{ tail -40 "$work/build.log"; fail "dpkg-buildpackage"; }
left=$(g status --porcelain)
[ -z "$left" ] || { echo "$left"; fail "the build leaves files in the tree"; }
(cd "$tree" && debian/rules clean) > "$work/clean.log" 2>&1 ||
	{ tail -20 "$work/clean.log"; fail "debian/rules clean"; }
left=$(g status --porcelain --ignored)
[ -z "$left" ] || { echo "$left"; fail "debian/rules clean leaves files"; }
ls "$work"/*.deb
changes=$(ls "$work"/egressd_*.changes)
lintian --fail-on error "$changes" > "$work/lintian.log" 2>&1 ||
	{ cat "$work/lintian.log"; fail "lintian reports errors"; }
cat "$work/lintian.log"
! grep -q 'no-manual-page' "$work/lintian.log" ||
	fail "lintian: a program without a manual page"

deb=$(ls "$work"/egressd_*.deb)
mkdir "$work/x"
dpkg -x "$deb" "$work/x"
for f in usr/sbin/egressd usr/bin/egressctl usr/bin/egress-sandbox \
	usr/bin/egress-fetch usr/bin/egress-connect \
	usr/share/man/man1/egress-connect.1.gz lib/systemd/system/egressd.service \
	etc/egressd/egressd.ini usr/share/egressd/seccomp-egress-worker.json \
	usr/share/doc/egressd/deployment.md.gz usr/share/man/man8/egressd.8.gz \
	usr/share/man/man1/egress-sandbox.1.gz; do
	[ -e "$work/x/$f" ] || fail "$f missing from the package"
done
[ -d "$work/x/var/lib/egressd/packages" ] || fail "/var/lib/egressd/packages"
[ "$(stat -c '%a %U' "$work/x/var/lib/egressd" "$work/x/var/lib/egressd/packages")" = \
	"$(printf '755 root\n755 root')" ] ||
	fail "/var/lib/egressd is not root's and readable by the broker"
unit=$work/x/lib/systemd/system/egressd.service
sysusers=$work/x/usr/lib/sysusers.d/egressd.conf
[ -f "$sysusers" ] || fail "usr/lib/sysusers.d/egressd.conf missing"
user=$(sed -n 's/^User=//p' "$unit")
[ -n "$user" ] && [ "$user" != root ] || fail "the unit runs as '$user'"
grep -q "^u $user " "$sysusers" || fail "sysusers.d does not declare $user"
dpkg-deb -e "$deb" "$work/ctl"
dpkg-deb -f "$deb" Depends | grep -q 'systemd-standalone-sysusers' ||
	fail "egressd does not depend on a systemd-sysusers"
grep -qx /etc/egressd/egressd.ini "$work/ctl/conffiles" || fail "conffile"
grep -q 'deb-systemd-helper.*enable' "$work/ctl/postinst" ||
	grep -q 'deb-systemd-helper unmask' "$work/ctl/postinst" ||
	fail "the unit is not enabled by postinst"
grep -q '^Type=notify' "$unit" || fail "unit type"
awk '/systemd-sysusers/ { u = NR } /deb-systemd-invoke/ && !s { s = NR }
	END { exit !(u && (!s || u < s)) }' "$work/ctl/postinst" ||
	fail "postinst does not create the user before it starts the unit"

# libegress0: the symbols file lists exactly the library's exports.
lib=$(ls "$work"/libegress0_*.deb)
dpkg-deb -e "$lib" "$work/libctl"
mkdir "$work/lib"
dpkg-deb -x "$lib" "$work/lib"
[ -f "$work/libctl/symbols" ] || fail "libegress0 has no symbols file"
grep -q '^libegress.so.0 libegress0 ' "$work/libctl/symbols" ||
	fail "symbols: no libegress.so.0 line"
sed -n 's/^ \(egress_[a-z_]*\)@EGRESS_0 0\.1\.0$/\1/p' \
	"$work/libctl/symbols" | sort > "$work/symbols.listed"
nm -D --defined-only "$work"/lib/usr/lib/*/libegress.so.0 |
	awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' | sort > "$work/symbols.exported"
[ -s "$work/symbols.exported" ] || fail "no exports read from libegress.so.0"
diff "$work/symbols.listed" "$work/symbols.exported" ||
	fail "the symbols file and the library's exports differ"
! grep -v '^egress_' "$work/symbols.exported" ||
	fail "libegress.so.0 exports symbols outside egress_*"
dev=$(ls "$work"/libegress-dev_*.deb)
dpkg-deb -c "$dev" > "$work/dev.list"
grep -Eq '\./usr/share/doc/libegress-dev/shim\.md(\.gz)?$' "$work/dev.list" ||
	fail "docs/shim.md is not in libegress-dev"

# The maintainer scripts, against a scratch root: the systemd helpers are
# stubs that record their calls; systemd-sysusers is the real one,
# recorded too.
stubs=$work/stubs
mkdir "$stubs"
for t in deb-systemd-helper deb-systemd-invoke systemctl; do
	printf '#!/bin/sh\necho "%s $*" >> "%s/calls"\nexit 0\n' "$t" "$work" \
		> "$stubs/$t"
done
printf '#!/bin/sh\necho "systemd-sysusers $*" >> "%s/calls"\nexec %s "$@"\n' \
	"$work" "$(command -v systemd-sysusers)" > "$stubs/systemd-sysusers"
chmod 0755 "$stubs"/*
sysroot=$work/sysroot
mkdir -p "$sysroot/etc" "$sysroot/usr/lib/sysusers.d"
cp "$sysusers" "$sysroot/usr/lib/sysusers.d/"
maint() { DPKG_ROOT=$sysroot PATH=$stubs:$PATH sh -e "$work/ctl/$1" "$2"; }
maint postinst configure > "$work/postinst.log" 2>&1 ||
	{ cat "$work/postinst.log" "$work/calls"; fail "postinst configure"; }
grep -q "^systemd-sysusers --root=$sysroot egressd.conf" "$work/calls" ||
	{ cat "$work/calls"; fail "postinst did not run systemd-sysusers"; }
pw=$(grep "^$user:" "$sysroot/etc/passwd") ||
	fail "postinst did not create the user $user"
IFS=: read -r _ _ uid _ _ home _ <<<"$pw"
[ "$uid" -lt 1000 ] && [ "$home" = /var/lib/egressd ] ||
	fail "the user: $pw"
grep -q "^$user:" "$sysroot/etc/group" || fail "no group $user"
mkdir -p "$sysroot/var/lib/egressd/packages/weather" "$sysroot/var/log/egressd" \
	"$sysroot/etc/egressd"
echo '[plugin]' > "$sysroot/var/lib/egressd/packages/weather/manifest.ini"
echo '{}' > "$sysroot/var/log/egressd/egressd.log"
touch "$sysroot/etc/egressd/.egressd.ini.lock"
maint postrm remove > "$work/postrm.log" 2>&1 ||
	{ cat "$work/postrm.log"; fail "postrm remove"; }
[ -f "$sysroot/var/lib/egressd/packages/weather/manifest.ini" ] &&
	[ -f "$sysroot/var/log/egressd/egressd.log" ] ||
	fail "postrm remove removed the state or the logs"
maint postrm purge >> "$work/postrm.log" 2>&1 ||
	{ cat "$work/postrm.log"; fail "postrm purge"; }
for d in var/lib/egressd var/log/egressd etc/egressd; do
	[ ! -e "$sysroot/$d" ] || fail "purge leaves /$d"
done
grep -q "^$user:" "$sysroot/etc/passwd" || fail "purge removed the user"
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
	usr/lib/sysusers.d/egressd.conf usr/include/egress/egress.h \
	usr/lib/x86_64-linux-gnu/pkgconfig/egress.pc; do
	[ -e "$root/$f" ] || fail "$f not laid out by dpkg --root"
done
ls "$root"/usr/lib/*/libegress.so.0 >/dev/null || fail "libegress.so.0"
dpkg --root="$root" --admindir="$root/var/lib/dpkg" -L egressd |
	grep -qx /etc/egressd/egressd.ini || fail "dpkg -L egressd"
dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Conffiles}\n' egressd |
	grep -q '^ /etc/egressd/egressd.ini ' || fail "not a conffile in dpkg"
echo "ok: .deb builds, lintian has no errors, layout checked"
