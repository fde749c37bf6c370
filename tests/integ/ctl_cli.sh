#!/usr/bin/env bash
# SPDX-License-Identifier: ISC
# egressctl's command-line conventions and advice, against copies of
# tests/data/cli/ in a temporary folder: --help and --version, usage
# errors that name the argument, one exit status per meaning (0 ok, 1 no,
# 2 usage, 3 configuration, 4 other), errors that say what failed (a
# folder given as the configuration, a missing key folder), the trust
# commands, the strict-without-key refusal, grant warnings for literals
# the address rules refuse (a loopback literal needs --loopback, never
# --private), and diagnose: --egress none is a note, every
# logged reason is classified against the current file (golden output in
# tests/data/cli/golden/; UPDATE_GOLDEN=1 rewrites it), and ca init
# (never replaces a CA without --force, even racing another init), and a
# manifest's bytes outside printable ASCII quoted as \xNN in plugin list
# and its JSON (and a package refused from a package folder whose name is
# not ASCII named by its own path). No network.
set -uo pipefail
. "$(dirname "$0")/wrap.sh"
ctl=${1:?usage: ctl_cli.sh EGRESSCTL SRCDIR}
src=${2:?usage: ctl_cli.sh EGRESSCTL SRCDIR}
case $ctl in /*) ;; *) ctl=$PWD/$ctl ;; esac
case $src in /*) ;; *) src=$PWD/$src ;; esac
data=$src/tests/data/cli
work=$(mktemp -d /tmp/ctl-cli.XXXXXX)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

cp -r "$data/egressd.ini" "$data/strict.ini" "$data/pkgs" "$data/decisions.log" "$work/"
cp -r "$src/tests/data/ceremony/pkgs/weather-1.4.0" "$work/pkgs/"
cd "$work"

# run ARGS...: egressctl in $work; sets rc, out (stdout), err (stderr).
run() {
	"${EGRESS_WRAP_CMD[@]}" "$ctl" "$@" >"$work/.out" 2>"$work/.err"
	rc=$?
	out=$(cat "$work/.out")
	err=$(cat "$work/.err")
}

# expect NAME RC [--out FRAGMENT] [--err FRAGMENT] [--no-err] -- ARGS...
expect() {
	local name=$1 want=$2 o="" e="" noerr=0
	shift 2
	while [ "$1" != "--" ]; do
		case $1 in
		--out) o=$2; shift 2 ;;
		--err) e=$2; shift 2 ;;
		--no-err) noerr=1; shift ;;
		esac
	done
	shift
	run "$@"
	if [ "$rc" != "$want" ] || { [ -n "$o" ] && [[ $out != *"$o"* ]]; } ||
	    { [ -n "$e" ] && [[ $err != *"$e"* ]]; } ||
	    { [ $noerr = 1 ] && [ -n "$err" ]; }; then
		bad "$name: egressctl $*: exit $rc (want $want)"
		printf '  stdout: %s\n  stderr: %s\n' "$out" "$err"
		[ -n "$o" ] && printf '  want stdout ~ %s\n' "$o"
		[ -n "$e" ] && printf '  want stderr ~ %s\n' "$e"
		return
	fi
	ok
}

# ---- --help, --version ------------------------------------------------
expect help 0 --out "usage: egressctl [-c FILE] check" --no-err -- --help
expect help-h 0 --out "Exit status: 0 success" --no-err -- -h
expect version 0 --out "egressctl " --no-err -- --version
expect version-V 0 --out "egressctl " --no-err -- -V
expect plugin-help 0 --out "plugin grant INSTANCE" --no-err -- plugin --help
expect trust-help 0 --out "trust remove FINGERPRINT" --no-err -- trust --help
expect status-help 0 --out "status [--socket PATH] [--json]" --no-err -- status --help
expect diagnose-help 0 --out "diagnose [--log FILE]" --no-err -- diagnose --help

# ---- usage errors name the argument (exit 2) ---------------------------
expect no-command 2 --err "missing command" --
expect bad-command 2 --err "unknown command 'frob'" -- frob
expect bad-option 2 --err "unknown option '--frob'" -- --frob
expect plugin-frob 2 --err "plugin: unknown subcommand 'frob'" -- -c egressd.ini plugin frob
expect plugin-none 2 --err "plugin: missing subcommand" -- -c egressd.ini plugin
expect manifest-frob 2 --err "manifest: unknown subcommand 'frob'" -- manifest frob
expect trust-frob 2 --err "trust: unknown subcommand 'frob'" -- -c egressd.ini trust frob
expect plugin-list-extra 2 --err "plugin list: unexpected argument 'extra'" -- -c egressd.ini plugin list extra
expect plugin-remove-extra 2 --err "plugin remove: unexpected argument 'b'" -- -c egressd.ini plugin remove a b
expect plugin-grant-nohost 2 --err "plugin grant localdev: missing HOST" -- -c egressd.ini plugin grant localdev
expect diagnose-extra 2 --err "diagnose: unexpected argument 'x'" -- -c egressd.ini diagnose x
expect status-extra 2 --err "status: unexpected argument 'x'" -- -c egressd.ini status x
expect grants-noname 2 --err "grants: missing NAME" -- -c egressd.ini grants
expect metrics-json 2 --err "metrics: --json is not supported" -- -c egressd.ini metrics --json
expect trust-remove-bad 2 --err "'xyz': a fingerprint is sha256:" -- -c egressd.ini trust remove xyz

# ---- one exit status per meaning ---------------------------------------
expect grant-unknown 1 --err "no instance nosuch in egressd.ini" -- -c egressd.ini plugin grant nosuch a.example
expect check-unknown 1 --out "deny unknown-instance" -- -c egressd.ini check nosuch https://a.example/
expect folder-config 3 --err "it is a folder, not a file" -- -c pkgs diagnose
expect folder-config-edit 3 --err "it is a folder, not a file" -- -c pkgs plugin grant localdev a.example
expect folder-config-check 3 --err "it is a folder, not a file" -- -c pkgs check localdev https://a.example/
expect missing-config 3 --err "missing.ini" -- -c missing.ini plugin list
expect no-broker 4 --err "the socket does not exist" -- -c egressd.ini grants nosuch --socket "$work/none.sock"

# ---- errors that say what failed ---------------------------------------
expect keygen-nofolder 4 --err "the folder keys does not exist; create it first (mkdir -m 0700 keys)" -- manifest keygen --out keys/x.pem

# ---- trust add | list | remove -----------------------------------------
mkdir -m 0700 keys
expect keygen 0 --out "wrote keys/release.pem" -- manifest keygen --out keys/release.pem
fp=$(printf '%s\n' "$out" | sed -n 's/^key fingerprint: //p')
[[ $fp =~ ^sha256:[0-9a-f]{32}$ ]] && ok || bad "keygen fingerprint '$fp'"
cp strict.ini strict-orig.ini
expect strict-no-key 1 --err "no key is trusted yet; trust the key the package is signed with: egressctl -c strict.ini trust add KEY.pub" -- -c strict.ini plugin install pkgs/weather-1.4.0
[[ $err == *"or accept unsigned packages: set [plugins.security] signature_mode = permissive in strict.ini"* ]] && ok ||
    bad "strict refusal: no permissive hint: $err"
expect diagnose-strict 1 --out "  egressctl -c strict.ini trust add KEY.pub" -- -c strict.ini diagnose
expect trust-list-empty 0 --out "no trusted key" -- -c strict.ini trust list
expect trust-add 0 --out "trusted key $fp (keys/release.pem.pub)" -- -c strict.ini trust add keys/release.pem.pub
grep -qx 'trusted_keys = keys/release.pem.pub' strict.ini && ok || bad "trust add did not write trusted_keys: $(cat strict.ini)"
head -c "$(stat -c %s strict-orig.ini)" strict.ini | cmp -s - strict-orig.ini && ok ||
    bad "trust add changed bytes it did not have to"
expect trust-add-again 0 --out "already trusted" -- -c strict.ini trust add keys/release.pem.pub
expect trust-list 0 --out "$fp keys/release.pem.pub" -- -c strict.ini trust list
expect trust-add-notkey 1 --err "strict.ini: no PEM public key found; nothing was changed" -- -c strict.ini trust add strict.ini
# A key file holds one key, which only root or its reader may change: a
# second key would be trusted without a fingerprint of its own.
expect keygen-second 0 -- manifest keygen --out keys/second.pem
cat keys/release.pem.pub keys/second.pem.pub > keys/both.pub
expect trust-add-two-keys 1 --err "keys/both.pub: holds more than one PEM block; a trusted key file holds one key" -- -c strict.ini trust add keys/both.pub
install -m 0664 keys/second.pem.pub keys/open.pub
expect trust-add-group-writable 1 --err "keys/open.pub: is group- or world-writable (chmod go-w)" -- -c strict.ini trust add keys/open.pub
grep -q 'both.pub\|open.pub' strict.ini && bad "a refused key was written" || ok
expect trust-remove-none 1 --err "no trusted key has fingerprint sha256:00000000000000000000000000000000" -- -c strict.ini trust remove sha256:00000000000000000000000000000000
expect sign 0 -- manifest sign --key keys/release.pem pkgs/weather-1.4.0
expect install-strict 0 --out "signature valid" -- -c strict.ini plugin install pkgs/weather-1.4.0
expect trust-remove 0 --out "no longer trusted: key $fp" -- -c strict.ini trust remove "${fp#sha256:}"
[[ $out == *"every package is refused"* ]] && ok || bad "trust remove of the last key under strict: no warning"
grep -q 'release.pem.pub' strict.ini && bad "trust remove left the key" || ok

# ---- grant of a literal the address rules refuse -----------------------
expect grant-metadata 0 --err "169.254.169.254 is a cloud metadata address: the address rules refuse it whatever the grant" -- -c egressd.ini plugin grant localdev 169.254.169.254
expect grant-reserved 0 --err "192.0.2.1 is a reserved address" -- -c egressd.ini plugin grant localdev 192.0.2.1
expect grant-private 0 --err "egressctl -c egressd.ini plugin grant localdev --private 10.0.0.5" -- -c egressd.ini plugin grant localdev 10.0.0.5
expect grant-public 0 --no-err -- -c egressd.ini plugin grant localdev 93.184.216.34
expect revoke-back 0 -- -c egressd.ini plugin revoke localdev 169.254.169.254 192.0.2.1 10.0.0.5 93.184.216.34
# Loopback is its own class: the literal needs --loopback, and the private
# carve-out does not stand for it.
expect grant-loopback 0 --err "egressctl -c egressd.ini plugin grant localdev --loopback 127.0.0.1" -- -c egressd.ini plugin grant localdev 127.0.0.1
# --private for a loopback literal or a localhost name would write a
# carve-out that never works: a usage error naming --loopback, nothing
# written.
expect grant-private-loopback 2 --err "egress_allow_private never opens it; carve it out with --loopback" -- -c egressd.ini plugin grant localdev --private 127.0.0.2
expect grant-private-localhost 2 --err "is a loopback name (localhost): egress_allow_private never opens it" -- -c egressd.ini plugin grant localdev --private localhost
grep -q '^egress_allow_private = .*127' egressd.ini && bad "grant --private 127.0.0.2 wrote a dead carve-out: $(cat egressd.ini)" || ok
# A localhost name granted without --loopback: written, with the warning
# that it needs the loopback carve-out.
expect grant-localhost-warns 0 --err "warning: localhost is a loopback name: the address rules refuse it unless it is also carved out in egress_allow_loopback" -- -c egressd.ini plugin grant localdev localhost
expect revoke-localhost 0 -- -c egressd.ini plugin revoke localdev localhost
expect grant-both-carves 2 --err "--private and --loopback: one at a time" -- -c egressd.ini plugin grant localdev --private --loopback 127.0.0.1
expect grant-loopback-carve 0 --no-err --out "instance localdev: granted 127.0.0.1 (egress_allow_loopback)" -- -c egressd.ini plugin grant localdev --loopback 127.0.0.1
grep -qx 'egress_allow_loopback = 127.0.0.1' egressd.ini && ok || bad "grant --loopback did not write egress_allow_loopback: $(cat egressd.ini)"
expect list-loopback 0 --out "loopback carve-outs:    127.0.0.1" -- -c egressd.ini plugin list
expect revoke-loopback-host 0 --out "instance localdev: 127.0.0.1 also leaves egress_allow_loopback" -- -c egressd.ini plugin revoke localdev 127.0.0.1
grep -q 'egress_allow_loopback = *$' egressd.ini && ok || bad "revoke left the loopback carve-out: $(cat egressd.ini)"
grep -q '^egress_allow_private = .*127' egressd.ini && bad "a private carve-out of 127.0.0.x: $(cat egressd.ini)" || ok

# ---- diagnose -----------------------------------------------------------
# quiet was installed with --egress none: a note, and nothing to act on.
expect diagnose-none 0 --out "quiet: no destination granted (--egress none)" -- -c egressd.ini diagnose
[[ $out == *"nothing to act on"* ]] && ok || bad "diagnose with only notes: $out"
run -c egressd.ini diagnose --log decisions.log
got=$(printf 'exit %s\n%s\n%s\n' "$rc" "$out" "$err")
if [ -n "${UPDATE_GOLDEN:-}" ]; then
	printf '%s\n' "$got" >"$data/golden/diagnose-log.out"
fi
diff -u "$data/golden/diagnose-log.out" <(printf '%s\n' "$got") >"$work/diff" && ok ||
    { bad "diagnose --log differs from golden/diagnose-log.out"; sed 's/^/  | /' "$work/diff"; }
# A name local by nature was refused before any lookup: no carve-out is
# named for it, the advice is to check an address it has.
grep -q "printer.internal: 1 denial in the log (private-address): refused before any lookup" <<<"$out" && ok ||
    bad "diagnose printer.internal: $out"
# Never a grant the address rules would refuse, never one already there.
if grep -E 'plugin grant localdev (169\.254\.169\.254|192\.0\.2\.1|api\.example\.com)$|--private (127\.0\.0\.1|localhost|dev\.localhost|printer\.internal)$' <<<"$out"; then
	bad "diagnose proposed a useless grant"
else
	ok
fi
grep -q 'refused by the address rules' <<<"$out" &&
    bad "diagnose labels a denial 'refused by the address rules' wholesale" || ok

# ---- ca init --------------------------------------------------------------
# fp FILE: the SHA-256 fingerprint of a PEM certificate, as ca show spells it.
fp() {
	echo "sha256:$(openssl x509 -in "$1" -noout -fingerprint -sha256 |
	    sed 's/.*=//; s/://g' | tr A-F a-f)"
}
# keyok: the installed key belongs to the installed certificate.
keyok() {
	[ "$(openssl x509 -in inspect-ca.pem -noout -pubkey)" = \
	    "$(openssl pkey -in inspect-ca.key -pubout)" ]
}
expect ca-init 0 --out "fingerprint sha256:" -- -c egressd.ini ca init
first=$(fp inspect-ca.pem)
[[ $out == *"$first"* ]] && keyok && ok || bad "ca init: key and certificate differ, or another fingerprint: $out"
expect ca-init-again 1 --err "already exists; --force replaces" -- -c egressd.ini ca init
[ "$(fp inspect-ca.pem)" = "$first" ] && keyok && ok || bad "a refused ca init changed the CA"
# A certificate without its key: refused, and no key is written.
mv inspect-ca.key key.saved
expect ca-init-cert-only 1 --err "inspect-ca.pem already exists" -- -c egressd.ini ca init
[ ! -e inspect-ca.key ] && [ "$(fp inspect-ca.pem)" = "$first" ] && ok || bad "ca init with a certificate but no key wrote something"
mv key.saved inspect-ca.key
expect ca-init-force 0 --out "fingerprint sha256:" -- -c egressd.ini ca init --force
[ "$(fp inspect-ca.pem)" != "$first" ] && keyok && ok || bad "ca init --force did not replace the CA with a matching pair"
# Two inits racing for a folder without a CA: both look, find nothing and
# make a key; exactly one installs its pair, the other refuses with exit
# 1, and no temporary file is left (a shared temporary name or a rename
# after the look fails this: one run removes the other's file, or
# silently replaces the CA the other just printed). Ten rounds.
ca_race_ok=1
for round in 1 2 3 4 5 6 7 8 9 10; do
	rm -f inspect-ca.pem inspect-ca.key
	"${EGRESS_WRAP_CMD[@]}" "$ctl" -c egressd.ini ca init >race1.out 2>race1.err &
	p1=$!
	"${EGRESS_WRAP_CMD[@]}" "$ctl" -c egressd.ini ca init >race2.out 2>race2.err &
	p2=$!
	wait $p1; r1=$?
	wait $p2; r2=$?
	won=$( { [ $r1 = 0 ] && cat race1.out; [ $r2 = 0 ] && cat race2.out; } | sed -n 's/^fingerprint //p')
	if [ "$((r1 + r2))" != 1 ] || [ "$won" != "$(fp inspect-ca.pem)" ] || ! keyok ||
	    ls inspect-ca.pem.?????? inspect-ca.key.?????? >/dev/null 2>&1; then
		bad "ca init race, round $round: exits $r1 and $r2, winner ${won:-none}, installed $(fp inspect-ca.pem)"
		ca_race_ok=0
		break
	fi
done
[ $ca_race_ok = 1 ] && ok

# ---- a manifest's bytes are quoted printable, in text and in JSON ------
mkdir -p pkgs/evil
printf '[plugin]\nname = w\302\2332J\342\200\256\377\nversion = 1.0.0\n' \
    >pkgs/evil/manifest.ini
{ cat egressd.ini; printf '\n[plugins.entries.evil]\nplugin = evil\nmanifest = pkgs/evil/manifest.ini\npermissions = http_client\negress_hosts = api.example.com\n'; } >evil.ini
run -c evil.ini plugin list --json
if LC_ALL=C grep -q '[^ -~]' .out .err ||
    ! python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
e = [i for i in (d if isinstance(d, list) else d["instances"]) if i["instance"] == "evil"][0]
assert "w\\xc2\\x9b2J\\xe2\\x80\\xae\\xff" in e["manifest_error"], e' .out; then
	bad "manifest bytes: plugin list --json: exit $rc"
	printf '  stdout: %s\n  stderr: %s\n' "$out" "$err"
else
	ok
fi
run -c evil.ini plugin list
if LC_ALL=C grep -q '[^ -~]' .out .err ||
    [[ $out$err != *'w\xc2\x9b2J\xe2\x80\xae\xff'* ]]; then
	bad "manifest bytes: plugin list: exit $rc"
	printf '  stdout: %s\n  stderr: %s\n' "$out" "$err"
else
	ok
fi

# A package refused in a package folder whose name is not ASCII: its
# errors still name the package's own manifest, not the staging copy.
cp -r pkgs/weather-1.4.0 badpkg
sed -i 's/^hosts = .*/hosts = bad_host.example/' badpkg/manifest.ini
sed 's/^package_dir = .*/package_dir = pk-\xc3\xa9/' egressd.ini >eacute.ini
run -c eacute.ini plugin install badpkg
if [ "$rc" != 1 ] || [[ $err != *"badpkg/manifest.ini:"* ]] ||
    [[ $err == *"pk-"* ]]; then
	bad "install from an escaped package folder: exit $rc"
	printf '  stdout: %s\n  stderr: %s\n' "$out" "$err"
else
	ok
fi

echo "ctl_cli.sh: $pass passed, $fail failed"
[ "$fail" = 0 ]
