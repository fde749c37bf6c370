#!/usr/bin/env bash
# SPDX-License-Identifier: ISC
# Integration test of the grant ceremony: the built egressctl's manifest,
# plugin and diagnose commands against copies of tests/data/ceremony/ in a
# temporary folder. Golden outputs (stdout and stderr, exit status) live in
# tests/data/ceremony/golden/; UPDATE_GOLDEN=1 rewrites them. Also checks
# never-extend (grants byte-for-byte unchanged), an upgrade that would wake
# a granted but unreachable host (refused; --wake), byte-for-byte preservation
# of a commented file, 20 parallel grants, a process killed mid-edit
# (through the EGRESSCTL_TEST_PAUSE=after-temp hook), an edit by hand
# while one waits there (not undone: that edit fails), and signatures in
# strict mode. Nothing here uses the network.
set -uo pipefail
. "$(dirname "$0")/wrap.sh"
ctl=${1:?usage: ceremony.sh EGRESSCTL SRCDIR}
src=${2:?usage: ceremony.sh EGRESSCTL SRCDIR}
case $ctl in /*) ;; *) ctl=$PWD/$ctl ;; esac
data=$src/tests/data/ceremony
gold=$data/golden
work=$(mktemp -d /tmp/ceremony.XXXXXX)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

normalize() {
	sed -e "s|$work|WORK|g" -e 's|\.stage\.[A-Za-z0-9]\{6\}|.stage.XXXXXX|g' \
	    -e 's|sha256:[0-9a-f]\{32\}|sha256:FINGERPRINT|g'
}

# golden NAME WANT_RC DIR -- ARGS...: run egressctl in DIR, compare
# "exit N" plus stdout and stderr with golden/NAME.out.
golden() {
	local name=$1 want=$2 dir=$3 out rc
	shift 3
	[ "$1" = "--" ] && shift
	out=$(cd "$dir" && "${EGRESS_WRAP_CMD[@]}" "$ctl" "$@" 2>&1)
	rc=$?
	out=$(printf 'exit %s\n%s\n' "$rc" "$out" | normalize)
	if [ -n "${UPDATE_GOLDEN:-}" ]; then
		mkdir -p "$gold"
		printf '%s\n' "$out" >"$gold/$name.out"
	fi
	if [ "$rc" != "$want" ]; then
		bad "$name: exit $rc, want $want"
		printf '%s\n' "$out" | sed 's/^/  | /'
		return
	fi
	if ! diff -u "$gold/$name.out" <(printf '%s\n' "$out") >"$work/diff"; then
		bad "$name: output differs from golden/$name.out"
		sed 's/^/  | /' "$work/diff"
		return
	fi
	ok
}

# The lines of one entry's grant keys (egress_hosts with its continuation
# lines, egress_allow_private, egress_allow_loopback, permissions), for
# never-extend checks.
grant_lines() {
	awk -v sec="[plugins.entries.$2]" '
	    /^\[/ { in_s = ($0 == sec); key = ""; next }
	    !in_s { next }
	    /^[ \t]/ && key != "" { print key ": " $0; next }
	    /^(egress_hosts|egress_allow_private|egress_allow_loopback|permissions)[ \t]*=/ {
		key = $1; print; next }
	    { key = "" }' "$1"
}

expect_same() {	# NAME FILE-A FILE-B
	if cmp -s "$2" "$3"; then ok; else bad "$1: files differ"; diff "$2" "$3" | head -20; fi
}

# ---- the ceremony, step by step ---------------------------------------
W=$work/main
mkdir -p "$W"
cp -r "$data/egressd.ini" "$data/legacy" "$data/pkgs" "$W/"
cp "$W/egressd.ini" "$work/orig.ini"
C=(-c egressd.ini)

golden install 0 "$W" -- "${C[@]}" plugin install pkgs/weather-1.4.0
golden list-1 0 "$W" -- "${C[@]}" plugin list
golden grant 0 "$W" -- "${C[@]}" plugin grant weather cdn.weather.example
golden grant-refused 2 "$W" -- "${C[@]}" plugin grant weather Bad.Example '*.com'
golden grant-private-refused 1 "$W" -- "${C[@]}" plugin grant weather --private radar.weather.example
golden grant-none 1 "$W" -- "${C[@]}" plugin grant nosuch a.example

# Byte-for-byte preservation: the original file is a prefix of the edited
# one (edits so far only touched the appended entry).
head -c "$(stat -c %s "$work/orig.ini")" "$W/egressd.ini" >"$work/prefix"
expect_same preserve-after-install "$work/orig.ini" "$work/prefix"

# Upgrade: api unchanged (=), radar added (+), *.tiles removed (-), cdn was
# never declared (-), websocket_client newly requested.
grant_lines "$W/egressd.ini" weather >"$work/g-before"
golden upgrade 0 "$W" -- "${C[@]}" plugin upgrade pkgs/weather-2.0.0
grant_lines "$W/egressd.ini" weather >"$work/g-after"
expect_same never-extend-upgrade "$work/g-before" "$work/g-after"
grep -q '^manifest = packages/weather-2.0.0/manifest.ini$' "$W/egressd.ini" &&
    ok || bad "upgrade did not move the manifest key"

golden revoke 0 "$W" -- "${C[@]}" plugin revoke weather '*.tiles.weather.example'
golden revoke-missing 1 "$W" -- "${C[@]}" plugin revoke weather nothere.example

# An upgrade never widens in silence: cdn is granted but was never
# declared (ineffective); weather 3.0.0 sets operator_defined = true,
# under which the grant alone governs, so it would reach cdn with no
# grant step. Refused, nothing changed; --wake goes ahead and says so.
V=$work/wake
cp -r "$W" "$V"
VR=$work/wake-refused
mkdir "$V/pkgs/weather-3.0.0"
cp "$V/pkgs/weather-2.0.0/plugin.wasm" "$V/pkgs/weather-3.0.0/"
printf '[plugin]\nname = weather\nversion = 3.0.0\npermissions = http_client\n\n[egress]\noperator_defined = true\n' \
    >"$V/pkgs/weather-3.0.0/manifest.ini"
cp "$V/egressd.ini" "$work/before"
golden upgrade-wake-refused 1 "$V" -- "${C[@]}" plugin upgrade pkgs/weather-3.0.0
expect_same upgrade-wake-refused-unchanged "$work/before" "$V/egressd.ini"
[ ! -e "$V/packages/weather-3.0.0" ] && ok || bad "a refused upgrade left its package"
# An instance whose manifest is refused reaches nothing: all that the
# new version would reach is new, and needs --wake as well.
cp -r "$V" "$VR"
rm "$VR/packages/weather-2.0.0/manifest.ini"
golden upgrade-wake-refused-manifest 1 "$VR" -- "${C[@]}" plugin upgrade pkgs/weather-3.0.0
golden upgrade-wake 0 "$V" -- "${C[@]}" plugin upgrade --wake pkgs/weather-3.0.0

# Bindings.
golden bind-not-installed 1 "$W" -- "${C[@]}" plugin bind chat alerts --egress declared
golden install-alias-refused 1 "$W" -- "${C[@]}" plugin install pkgs/chat --channel-alias alerts
[ ! -e "$W/packages/chat-1.0.0" ] && ok || bad "a refused install left its package"
golden install-alias-none 0 "$W" -- "${C[@]}" plugin install pkgs/chat --channel-alias alerts --egress none
golden bind-declared 0 "$W" -- "${C[@]}" plugin bind chat alerts2 --egress declared
golden bind-none 0 "$W" -- "${C[@]}" plugin bind chat alerts3 --egress none
golden bind-refused 1 "$W" -- "${C[@]}" plugin bind chat alerts4

# Never-extend: install and bind over existing entries change no byte.
cp "$W/egressd.ini" "$work/before"
golden install-existing 0 "$W" -- "${C[@]}" plugin install pkgs/chat --channel-alias alerts --egress declared
expect_same never-extend-install "$work/before" "$W/egressd.ini"
golden bind-existing 0 "$W" -- "${C[@]}" plugin bind chat alerts3 --egress declared
expect_same never-extend-bind "$work/before" "$W/egressd.ini"
golden install-existing-weather 0 "$W" -- "${C[@]}" plugin install pkgs/weather-1.4.0
expect_same never-extend-install-old "$work/before" "$W/egressd.ini"

golden install-operator 0 "$W" -- "${C[@]}" plugin install pkgs/gitea
golden diagnose 1 "$W" -- "${C[@]}" diagnose
cp "$data/decisions.log" "$W/"
golden diagnose-log 1 "$W" -- "${C[@]}" diagnose --log decisions.log
golden list-json 0 "$W" -- "${C[@]}" plugin list --json
golden diagnose-json 1 "$W" -- "${C[@]}" diagnose --json

# An edit of the hand-written entry changes only its egress_hosts lines.
cp "$W/egressd.ini" "$work/before"
golden grant-legacy 0 "$W" -- "${C[@]}" plugin grant legacy legacy2.example.net
diff "$work/before" "$W/egressd.ini" >"$work/legacy.diff"
if [ -n "${UPDATE_GOLDEN:-}" ]; then cp "$work/legacy.diff" "$gold/grant-legacy.diff"; fi
expect_same preserve-legacy-edit "$gold/grant-legacy.diff" "$work/legacy.diff"

golden remove 0 "$W" -- "${C[@]}" plugin remove chat
[ ! -e "$W/packages/chat-1.0.0" ] && ok || bad "remove left the package"
golden remove-missing 1 "$W" -- "${C[@]}" plugin remove chat
head -c "$(stat -c %s "$work/orig.ini")" "$W/egressd.ini" >"$work/prefix"
# The legacy entry was edited on purpose; everything before it is intact.
n=$(grep -n '^\[plugins.entries.legacy\]' "$work/orig.ini" | cut -d: -f1)
expect_same preserve-head <(head -n "$n" "$work/orig.ini") <(head -n "$n" "$W/egressd.ini")
tail -n 2 "$work/orig.ini" >"$work/t1"
grep -c '^; trailing comment at the end of the file$' "$W/egressd.ini" | grep -qx 1 &&
    ok || bad "the trailing comment did not survive"

# A package holding a symlink is refused and leaves nothing behind.
mkdir -p "$W/pkgs/linky"
cp "$data/pkgs/chat/manifest.ini" "$W/pkgs/linky/"
ln -s /etc/passwd "$W/pkgs/linky/passwd"
cp "$W/egressd.ini" "$work/before"
golden install-symlink 1 "$W" -- "${C[@]}" plugin install pkgs/linky --instance linky
expect_same symlink-untouched "$work/before" "$W/egressd.ini"
ls -A "$W/packages" | grep -q '^\.stage' && bad "a staging folder was left" || ok

# ---- concurrency: 20 parallel grants all land -------------------------
pids=()
for i in $(seq 1 20); do
	(cd "$W" && "${EGRESS_WRAP_CMD[@]}" "$ctl" "${C[@]}" plugin grant gitea "h$i.git.example" >/dev/null 2>&1) &
	pids+=($!)
done
cfail=0
for p in "${pids[@]}"; do wait "$p" || cfail=$((cfail + 1)); done
[ "$cfail" = 0 ] && ok || bad "concurrency: $cfail grants failed"
landed=$(cd "$W" && "${EGRESS_WRAP_CMD[@]}" "$ctl" "${C[@]}" plugin list --json |
    grep -c '"h[0-9]*\.git\.example"')
# Each host appears in egress_hosts and in reach (operator_defined).
[ "$landed" = 40 ] && ok || bad "concurrency: $landed of 40 host mentions"

# ---- crash safety: killed after the temporary file is written ----------
wait_stopped() {	# PID: poll until the process is stopped (bounded)
	local i st
	for i in $(seq 1 $((500 * EGRESS_WAIT_SCALE))); do
		st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
		[ "$st" = T ] && return 0
		sleep 0.01
	done
	return 1
}
cp "$W/egressd.ini" "$work/before"
(cd "$W" && EGRESSCTL_TEST_PAUSE=after-temp exec "${EGRESS_WRAP_CMD[@]}" "$ctl" "${C[@]}" plugin grant gitea crash.git.example >/dev/null 2>&1) &
victim=$!
if wait_stopped "$victim"; then
	ok
	# A second edit must wait for the lock the stopped one holds.
	(cd "$W" && exec "${EGRESS_WRAP_CMD[@]}" "$ctl" "${C[@]}" plugin grant gitea after.git.example >/dev/null 2>&1) &
	second=$!
	sleep 0.2
	kill -0 "$second" 2>/dev/null && ok || bad "the second edit did not wait for the lock"
	kill -9 "$victim"
	wait "$victim" 2>/dev/null
	wait "$second" && ok || bad "the edit after the crash failed"
	grep -q 'after.git.example' "$W/egressd.ini" && ok || bad "the second edit did not land"
	grep -q 'crash.git.example' "$W/egressd.ini" && bad "the killed edit landed" || ok
	(cd "$W" && "${EGRESS_WRAP_CMD[@]}" "$ctl" "${C[@]}" plugin list >/dev/null) && ok || bad "the file is not valid after the crash"
else
	bad "the test hook did not stop the process"
	kill -9 "$victim" 2>/dev/null
fi
# Killed before the rename, the file is byte-for-byte the old one.
cp "$W/egressd.ini" "$work/before"
(cd "$W" && EGRESSCTL_TEST_PAUSE=after-temp exec "${EGRESS_WRAP_CMD[@]}" "$ctl" "${C[@]}" plugin grant gitea crash2.git.example >/dev/null 2>&1) &
victim=$!
if wait_stopped "$victim"; then
	kill -9 "$victim"
	wait "$victim" 2>/dev/null
	expect_same crash-exact-old "$work/before" "$W/egressd.ini"
else
	bad "the test hook did not stop the process (2)"
	kill -9 "$victim" 2>/dev/null
fi
# Edited by hand while an edit waits to be written: that edit is not
# written (it would undo the hand edit), and says so.
tmps() { ls -a "$W" | grep -c '^\.egressd\.ini\.tmp\.'; }
tmps_before=$(tmps)
(cd "$W" && EGRESSCTL_TEST_PAUSE=after-temp exec "${EGRESS_WRAP_CMD[@]}" "$ctl" "${C[@]}" plugin grant gitea crash3.git.example >/dev/null 2>"$work/crash3.err") &
victim=$!
if wait_stopped "$victim"; then
	printf '; edited by hand\n' >>"$W/egressd.ini"
	cp "$W/egressd.ini" "$work/before"
	kill -CONT "$victim"
	rc=0
	wait "$victim" || rc=$?
	[ "$rc" != 0 ] && ok || bad "an edit over a hand edit succeeded"
	expect_same hand-edit-kept "$work/before" "$W/egressd.ini"
	grep -q 'changed while this edit was made (an edit by hand?), which writing it would undo; this edit was not written: run the command again' \
	    "$work/crash3.err" && ok || bad "hand edit: $(cat "$work/crash3.err")"
	[ "$(tmps)" = "$tmps_before" ] && ok || bad "a temporary file stayed"
else
	bad "the test hook did not stop the process (3)"
	kill -9 "$victim" 2>/dev/null
fi

# ---- signatures -------------------------------------------------------
S=$work/strict
mkdir -p "$S"
cp -r "$data/pkgs" "$S/"
sed -e 's/^signature_mode = permissive /signature_mode = strict     /' \
    -e 's|^\[plugins.limits\]|trusted_keys = keys/release.pem.pub\n\n[plugins.limits]|' \
    -e '/^; A hand-written entry/,$d' "$data/egressd.ini" >"$S/egressd.ini"
mkdir -p "$S/keys"
(cd "$S" && "${EGRESS_WRAP_CMD[@]}" "$ctl" manifest keygen --out keys/release.pem >/dev/null) && ok || bad "keygen"
[ "$(stat -c %a "$S/keys/release.pem")" = 600 ] && ok || bad "private key mode"
(cd "$S" && "${EGRESS_WRAP_CMD[@]}" "$ctl" manifest keygen --out keys/release.pem >/dev/null 2>&1) && bad "keygen overwrote a key" || ok
(cd "$S" && "${EGRESS_WRAP_CMD[@]}" "$ctl" manifest keygen --out keys/other.pem >/dev/null) || bad "keygen other"
(cd "$S" && "${EGRESS_WRAP_CMD[@]}" "$ctl" manifest sign --key keys/release.pem pkgs/chat >/dev/null) && ok || bad "sign"
(cd "$S" && "${EGRESS_WRAP_CMD[@]}" "$ctl" manifest sign --key keys/other.pem pkgs/weather-1.4.0 >/dev/null) || bad "sign other"
cp -r "$S/pkgs/chat" "$S/pkgs/tampered"
sed -i 's/^hosts = hooks.chat.example$/hosts = hooks.chat.example, exfil.example/' "$S/pkgs/tampered/manifest.ini"
golden verify-valid 0 "$S" -- -c egressd.ini manifest verify pkgs/chat
golden verify-key 0 "$S" -- manifest verify --key keys/release.pem.pub pkgs/chat
golden verify-unsigned 1 "$S" -- -c egressd.ini manifest verify pkgs/gitea
golden verify-untrusted 1 "$S" -- -c egressd.ini manifest verify pkgs/weather-1.4.0
golden verify-tampered 1 "$S" -- -c egressd.ini manifest verify pkgs/tampered
golden verify-json 0 "$S" -- -c egressd.ini manifest verify --json pkgs/chat
golden strict-unsigned 1 "$S" -- -c egressd.ini plugin install pkgs/gitea
golden strict-untrusted 1 "$S" -- -c egressd.ini plugin install pkgs/weather-1.4.0
golden strict-tampered 1 "$S" -- -c egressd.ini plugin install pkgs/tampered --instance tampered
[ -z "$(ls -A "$S/packages" 2>/dev/null)" ] && ok || bad "a refused package was installed"
golden strict-valid 0 "$S" -- -c egressd.ini plugin install pkgs/chat
# Any trusted key verifies any package: an upgrade signed by another key
# than the installed version's says so.
SO=$work/strict-other
cp -r "$S" "$SO"
(cd "$SO" && "${EGRESS_WRAP_CMD[@]}" "$ctl" -c egressd.ini trust add keys/other.pem.pub >/dev/null) || bad "trust other"
cp -r "$SO/pkgs/chat" "$SO/pkgs/chat-1.1.0"
sed -i 's/^version = 1.0.0$/version = 1.1.0/' "$SO/pkgs/chat-1.1.0/manifest.ini"
(cd "$SO" && "${EGRESS_WRAP_CMD[@]}" "$ctl" manifest sign --key keys/other.pem pkgs/chat-1.1.0 >/dev/null) || bad "sign 1.1.0"
cp -r "$SO" "$SO.raw"
golden strict-upgrade-other-key 0 "$SO" -- -c egressd.ini plugin upgrade pkgs/chat-1.1.0
# The same upgrade unnormalized: the warning names both keys.
fp_of() { (cd "$SO.raw" && "$ctl" -c egressd.ini trust list) | awk -v k="$1" '$2 == k { print $1 }'; }
fp_rel=$(fp_of keys/release.pem.pub)
fp_oth=$(fp_of keys/other.pem.pub)
raw=$(cd "$SO.raw" && "${EGRESS_WRAP_CMD[@]}" "$ctl" -c egressd.ini plugin upgrade pkgs/chat-1.1.0 2>&1)
[ -n "$fp_rel" ] && [ "$fp_rel" != "$fp_oth" ] &&
    [[ $raw == *"chat 1.1.0 is signed by key $fp_oth, not by key $fp_rel that signed chat 1.0.0"* ]] &&
    ok || bad "signer warning: $raw"
# A signed, installed manifest tampered in place refuses its instance.
sed -i 's/^hosts = hooks.chat.example$/hosts = hooks.chat.example, exfil.example/' "$S/packages/chat-1.0.0/manifest.ini"
golden strict-tampered-installed 0 "$S" -- -c egressd.ini plugin list

echo "ceremony.sh: $pass passed, $fail failed"
[ "$fail" = 0 ]
