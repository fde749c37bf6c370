#!/usr/bin/env bash
# SPDX-License-Identifier: ISC
# Integration test: the built `egressctl check` against the files in
# examples/ and tests/data/check/. Every case asserts the exit status and
# the exact first line of stdout (and, where it matters, a stderr
# fragment). Answers come from --resolve or IP literals: nothing here
# sends a packet.
set -uo pipefail
. "$(dirname "$0")/wrap.sh"
ctl=${1:?usage: check.sh EGRESSCTL SRCDIR}
src=${2:?usage: check.sh EGRESSCTL SRCDIR}
fx=$src/tests/data/check/egressd.ini
ex=$src/examples/egressd.ini
fail=0 n=0

# expect EXIT STDOUT [--stderr FRAGMENT] -- ARGS...
expect() {
	local want_rc=$1 want_out=$2 want_err=""
	shift 2
	if [ "$1" = "--stderr" ]; then want_err=$2; shift 2; fi
	[ "$1" = "--" ] && shift
	local out err rc
	err=$(mktemp)
	out=$("${EGRESS_WRAP_CMD[@]}" "$ctl" "$@" 2>"$err")
	rc=$?
	out=${out%%$'\n'*}
	n=$((n + 1))
	if [ "$rc" != "$want_rc" ] || [ "$out" != "$want_out" ] ||
	    { [ -n "$want_err" ] && ! grep -qF -- "$want_err" "$err"; }; then
		echo "FAIL: egressctl $*"
		echo "  want exit $want_rc, stdout '$want_out'${want_err:+, stderr ~ '$want_err'}"
		echo "  got  exit $rc, stdout '$out', stderr: $(cat "$err")"
		fail=$((fail + 1))
	fi
	rm -f "$err"
}

R=--resolve
# --- allowed ---
expect 0 "allow api.weather.example 93.184.216.34" -- -c "$fx" check $R api.weather.example=93.184.216.34 weather https://api.weather.example/
expect 0 "allow api.weather.example 93.184.216.34,2606:2800:220:1::1" -- -c "$fx" check $R api.weather.example=93.184.216.34,2606:2800:220:1::1,93.184.216.34 weather https://api.weather.example/x?y=1
expect 0 "allow a.tiles.weather.example 93.184.216.35" -- -c "$fx" check $R a.tiles.weather.example=93.184.216.35 weather http://A.Tiles.Weather.Example./t
expect 0 "allow 93.184.216.34 93.184.216.34" -- -c "$fx" check weather http://93.184.216.34:8080/
expect 0 "allow 2606:2800:220:1::1 2606:2800:220:1::1" -- -c "$fx" check weather "https://[2606:2800:220:1::1]/"
expect 0 "allow api.weather.example 93.184.216.34" -- -c "$fx" check --transport tcp $R api.weather.example=93.184.216.34 weather api.weather.example:5222
expect 0 "allow api.weather.example 10.0.0.7" -- -c "$fx" check $R api.weather.example=10.0.0.7 lan https://api.weather.example/
# --- the verdict order ---
expect 1 "deny invalid-destination" -- -c "$fx" check weather "http://@api.weather.example/"
expect 1 "deny invalid-destination" -- -c "$fx" check weather "http://0177.0.0.1/"
expect 1 "deny invalid-destination" -- -c "$fx" check weather "http://127.1/"
expect 1 "deny invalid-destination" -- -c "$fx" check weather "http:\\\\api.weather.example/"
expect 1 "deny invalid-destination" -- -c "$fx" check weather "ftp://api.weather.example/"
expect 1 "deny invalid-destination" -- -c "$fx" check weather "http://api.weather.example:/"
expect 1 "deny invalid-destination" -- -c "$fx" check weather "http://api.weather.example:0443/"
expect 1 "deny invalid-destination" -- -c "$fx" check nobody "http://api_weather.example/"
expect 1 "deny unknown-instance" -- -c "$fx" check nobody https://api.weather.example/
expect 1 "deny manifest-refused" --stderr "packages/broken/manifest.ini:7" -- -c "$fx" check broken https://api.weather.example/
expect 1 "deny no-permission" -- -c "$fx" check weather wss://api.weather.example/
expect 1 "deny not-granted" -- -c "$fx" check empty https://api.weather.example/
expect 1 "deny not-granted" -- -c "$fx" check weather https://tiles.weather.example/
expect 1 "deny not-granted" -- -c "$fx" check weather "http://[::ffff:93.184.216.34]/"
expect 0 "allow localhost 127.0.0.1,::1" -- -c "$fx" check $R localhost=127.0.0.1,::1 loop https://localhost/
# A localhost name is 127.0.0.1 and ::1 without a query (RFC 6761): no
# resolver and no --resolve answer decides where it is.
expect 0 "allow localhost 127.0.0.1,::1" -- -c "$fx" check $R localhost=93.184.216.34 loop https://localhost/
expect 0 "allow localhost 127.0.0.1,::1" -- -c "$fx" check loop https://localhost/
expect 1 "deny loopback-address" -- -c "$fx" check $R api.weather.example=127.0.0.1 weather https://api.weather.example/
expect 1 "deny loopback-address" -- -c "$fx" check weather http://localhost/
# The private carve-out does not re-open loopback; the loopback one does,
# and only loopback.
expect 1 "deny loopback-address" -- -c "$fx" check lan http://localhost/
expect 1 "deny loopback-address" -- -c "$fx" check $R api.weather.example=127.0.0.1 lan https://api.weather.example/
expect 1 "deny loopback-address" -- -c "$fx" check $R api.weather.example=::1 lan https://api.weather.example/
expect 1 "deny loopback-address" -- -c "$fx" check $R api.weather.example=::ffff:127.0.0.1 lan https://api.weather.example/
expect 1 "deny loopback-address" -- -c "$fx" check $R api.weather.example=64:ff9b::7f00:1 lan https://api.weather.example/
expect 1 "deny loopback-address" -- -c "$fx" check $R api.weather.example=2001:db8:64::7f00:1 lan https://api.weather.example/
expect 1 "deny loopback-address" -- -c "$fx" check $R api.weather.example=10.0.0.7,127.0.0.1 lan https://api.weather.example/
expect 0 "allow api.weather.example 127.0.0.1" -- -c "$fx" check $R api.weather.example=127.0.0.1 loop https://api.weather.example/
expect 0 "allow api.weather.example 2001:db8:64::7f00:1" -- -c "$fx" check $R api.weather.example=2001:db8:64::7f00:1 loop https://api.weather.example/
expect 1 "deny private-address" -- -c "$fx" check $R api.weather.example=10.0.0.7 loop https://api.weather.example/
expect 1 "deny mixed-zones" -- -c "$fx" check $R api.weather.example=127.0.0.1,93.184.216.34 loop https://api.weather.example/
expect 1 "deny reserved-address" -- -c "$fx" check $R api.weather.example=::127.0.0.1 loop https://api.weather.example/
expect 1 "deny metadata" -- -c "$fx" check $R api.weather.example=127.0.0.1,169.254.169.254 loop https://api.weather.example/
expect 1 "deny unresolvable" -- -c "$fx" check $R api.weather.example= weather https://api.weather.example/
expect 1 "deny metadata" -- -c "$fx" check $R api.weather.example=169.254.169.254 weather https://api.weather.example/
expect 1 "deny metadata" -- -c "$fx" check $R api.weather.example=169.254.169.254 lan https://api.weather.example/
expect 1 "deny metadata" -- -c "$fx" check $R api.weather.example=fd00:ec2::254 lan https://api.weather.example/
expect 1 "deny metadata" -- -c "$fx" check $R api.weather.example=64:ff9b::a9fe:a9fe weather https://api.weather.example/
expect 1 "deny metadata" -- -c "$fx" check $R api.weather.example=2001:db8:64::a9fe:a9fe weather https://api.weather.example/
expect 1 "deny metadata" -- -c "$fx" check $R api.weather.example=::ffff:169.254.169.254 lan https://api.weather.example/
expect 1 "deny reserved-address" -- -c "$fx" check $R api.weather.example=0.0.0.0 weather https://api.weather.example/
expect 1 "deny reserved-address" -- -c "$fx" check $R api.weather.example=93.184.216.34,192.0.2.1 weather https://api.weather.example/
expect 1 "deny private-address" -- -c "$fx" check $R api.weather.example=93.184.216.34,10.0.0.7 weather https://api.weather.example/
expect 1 "deny private-address" -- -c "$fx" check $R api.weather.example=2001:db8:64::a00:7 weather https://api.weather.example/
expect 1 "deny mixed-zones" -- -c "$fx" check $R api.weather.example=93.184.216.34,10.0.0.7 lan https://api.weather.example/
# --- JSON ---
expect 0 '{"verdict":"allow","reason":null,"instance":"weather","transport":"http","host":"api.weather.example","port":443,"addresses":["93.184.216.34"]}' -- -c "$fx" check --json $R api.weather.example=93.184.216.34 weather https://api.weather.example/
expect 1 '{"verdict":"deny","reason":"not-granted","instance":"empty","transport":"http","host":"api.weather.example","port":80,"addresses":[]}' -- -c "$fx" check --json empty http://api.weather.example/
# --- usage errors exit 2, configuration errors 3 ---
expect 2 "" --stderr "takes HOST:PORT" -- -c "$fx" check --transport tcp weather https://api.weather.example/
expect 2 "" --stderr "contradicts" -- -c "$fx" check --transport websocket weather https://api.weather.example/
expect 2 "" -- -c "$fx" check weather
expect 3 "" --stderr "bad-entry.ini:4" -- -c "$src/tests/data/check/bad-entry.ini" check x https://example.com/
expect 3 "" --stderr "bad-nat64.ini:2" -- -c "$src/tests/data/check/bad-nat64.ini" check x https://example.com/
expect 3 "" --stderr "missing.ini" -- -c "$src/tests/data/check/missing.ini" check x https://example.com/
# --- the bundled example ---
expect 0 "allow api.weather.example 93.184.216.34" -- -c "$ex" check $R api.weather.example=93.184.216.34 weather https://api.weather.example/v1/forecast
expect 1 "deny not-declared" -- -c "$ex" check weather https://cdn.weather.example/
expect 0 "allow git.lan.example 10.0.0.20" -- -c "$ex" check $R git.lan.example=10.0.0.20 gitea https://git.lan.example/
expect 1 "deny no-permission" -- -c "$ex" check notifier https://hooks.chat.example/
# EGRESSD_CONFIG is used when -c is absent.
out=$(EGRESSD_CONFIG=$ex "${EGRESS_WRAP_CMD[@]}" "$ctl" check weather https://cdn.weather.example/ 2>/dev/null)
n=$((n + 1))
[ "$out" = "deny not-declared" ] || { echo "FAIL: EGRESSD_CONFIG not honoured: '$out'"; fail=$((fail + 1)); }

echo "check.sh: $((n - fail)) passed, $fail failed"
[ $fail -eq 0 ]
