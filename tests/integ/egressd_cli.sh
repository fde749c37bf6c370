#!/usr/bin/env bash
# SPDX-License-Identifier: ISC
# egressd_cli.sh EGRESSD SRCDIR: egressd's command line against its
# documentation and its messages. --help prints on stdout and exits 0,
# its usage lines are exactly the synopsis of docs/egressd.md and
# docs/egressd.8; --version and -V print the version; a bad option or
# --strict without --check-config is exit 2 with the usage on stderr.
# --check-config follows the daemon's rule: a refused manifest is a
# warning naming the entry's FILE:LINE and the manifest's error (exit 0),
# --strict makes it fail, a configuration error fails. A folder given as
# the configuration is said to be one; a control socket that cannot be
# created names the path, the system call and its errno. Unix sockets in a
# scratch folder only. EGRESS_WRAP: see wrap.sh.
set -uo pipefail
. "$(dirname "$0")/wrap.sh"
egressd=${1:?usage: egressd_cli.sh EGRESSD SRCDIR}
src=${2:?usage: egressd_cli.sh EGRESSD SRCDIR}
work=$(mktemp -d /tmp/egressd-cli.XXXXXX)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
run() { "${EGRESS_WRAP_CMD[@]}" "$egressd" "$@"; }

# ---- --help, --version, usage errors ---------------------------------------
run --help >"$work/help" 2>"$work/help.err"
rc=$?
[ "$rc" = 0 ] && [ -s "$work/help" ] && [ ! -s "$work/help.err" ] && ok ||
	bad "--help: exit $rc, stdout $(wc -c <"$work/help") bytes, stderr $(cat "$work/help.err")"
grep -q -- '--strict' "$work/help" && ok || bad "--help does not list --strict"
sed -n '1,/^$/p' "$work/help" | sed -e '/^$/d' -e 's/^usage: //' \
	-e 's/^       //' | tr -s ' ' >"$work/usage"
grep -q '^egressd ' "$work/usage" && ok || bad "--help printed no usage line"
awk '/^## Synopsis$/ { s = 1; next } s && /^## / { exit }
    s && /^    egressd/ { sub(/^    /, ""); print }' "$src/docs/egressd.md" |
	tr -s ' ' >"$work/md"
diff -u "$work/md" "$work/usage" >"$work/d1" && ok ||
	{ bad "docs/egressd.md synopsis differs from egressd --help"; sed 's/^/  | /' "$work/d1"; }
sed -n '/^\.SH SYNOPSIS/,/^\.SH DESCRIPTION/p' "$src/docs/egressd.8" |
	grep '^\\fBegressd' | sed -e 's/\\fB//g' -e 's/\\fR//g' -e 's/\\-/-/g' |
	tr -s ' ' >"$work/man"
diff -u "$work/man" "$work/usage" >"$work/d2" && ok ||
	{ bad "docs/egressd.8 SYNOPSIS differs from egressd --help"; sed 's/^/  | /' "$work/d2"; }
for v in --version -V; do
	out=$(run "$v" 2>"$work/v.err")
	rc=$?
	[ "$rc" = 0 ] && [[ "$out" =~ ^egressd\ [0-9]+\.[0-9]+\.[0-9]+$ ]] &&
		[ ! -s "$work/v.err" ] && ok || bad "$v: exit $rc, '$out'"
done
for args in "--bogus" "--strict" "-c x.ini extra"; do
	# shellcheck disable=SC2086
	run $args >"$work/u.out" 2>"$work/u.err"
	rc=$?
	[ "$rc" = 2 ] && [ ! -s "$work/u.out" ] && grep -q '^usage: egressd' "$work/u.err" &&
		ok || bad "egressd $args: exit $rc (want 2, usage on stderr only)"
done

# ---- --check-config: warnings and errors -----------------------------------
mkdir -p "$work/cfg/packages"
cp -r "$src/examples/packages/." "$work/cfg/packages/"
cat >"$work/cfg/egressd.ini" <<INI
[plugins.security]
signature_mode = permissive
[broker]
instance_socket_dir = $work/inst
control_socket = $work/control.sock
[plugins.entries.weather]
plugin = weather
manifest = packages/weather/manifest.ini
permissions = http_client
egress_hosts = api.weather.example
[plugins.entries.ghost]
plugin = ghost
manifest = packages/ghost/manifest.ini
permissions = http_client
INI
C=$work/cfg/egressd.ini
run --check-config -c "$C" 2>"$work/c.err"
rc=$?
[ "$rc" = 0 ] && ok || bad "--check-config with one refused manifest: exit $rc (want 0): $(cat "$work/c.err")"
grep -qF "$C:11: warning: [plugins.entries.ghost]: manifest refused" "$work/c.err" &&
	grep -q 'packages/ghost/manifest.ini: no such manifest' "$work/c.err" && ok ||
	bad "the warning does not name the entry's file:line and the manifest's error: $(cat "$work/c.err")"
grep -q 'test is successful (1 warning)' "$work/c.err" && ok ||
	bad "no success line counting the warning: $(cat "$work/c.err")"
run --check-config --strict -c "$C" 2>"$work/s.err"
rc=$?
[ "$rc" = 1 ] && grep -q 'failed (--strict' "$work/s.err" && ok ||
	bad "--check-config --strict with a warning: exit $rc (want 1): $(cat "$work/s.err")"
sed '/^\[plugins.entries.ghost\]/,$d' "$C" >"$work/cfg/clean.ini"
run --check-config --strict -c "$work/cfg/clean.ini" 2>"$work/s2.err"
rc=$?
[ "$rc" = 0 ] && ok || bad "--strict on a clean file: exit $rc: $(cat "$work/s2.err")"
sed 's/^permissions = http_client$/permisions = http_client/' "$C" >"$work/cfg/typo.ini"
run --check-config -c "$work/cfg/typo.ini" 2>"$work/t.err"
rc=$?
[ "$rc" = 1 ] && grep -q "typo.ini:[0-9]*:.*permisions" "$work/t.err" && ok ||
	bad "--check-config with a typo: exit $rc (want 1 with file:line): $(cat "$work/t.err")"

# ---- messages that say what failed -----------------------------------------
run --check-config -c "$work/cfg" 2>"$work/f.err"
rc=$?
[ "$rc" = 1 ] && grep -qF "$work/cfg: cannot read the configuration: it is a folder, not a file" \
	"$work/f.err" && ok || bad "a folder as the configuration: exit $rc: $(cat "$work/f.err")"
sed "s|^control_socket = .*|control_socket = $work/missing/control.sock|" \
	"$work/cfg/clean.ini" >"$work/cfg/nodir.ini"
run --foreground -c "$work/cfg/nodir.ini" 2>"$work/n.err" </dev/null
rc=$?
[ "$rc" = 1 ] && grep -qF "cannot create the control socket $work/missing/control.sock ([broker] control_socket in $work/cfg/nodir.ini): bind: No such file or directory" \
	"$work/n.err" && ok || bad "control socket in a missing folder: exit $rc: $(cat "$work/n.err")"

echo "egressd_cli: $pass passed, $fail failed"
[ "$fail" = 0 ]
