#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Head rules, through the real broker and a scripted upstream:
# - response trailers reach the guest without the fields that must not
#   (hop-by-hop ones, those a Connection trailer names, framing, routing,
#   cookies);
# - methods: CONNECT is refused in any case, a method outside the
#   standard set (or in the wrong case) is refused until [limits]
#   extra_methods lists it, and nothing refused reaches the upstream;
# - an invalid-request decision names the plugin and says what was
#   invalid (detail).
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
. "$(dirname "$0")/faults.sh"
lab_init
lab_need_bins
lab_up

conf()
{
	{
		DNS_PORT=$FAULT_DNS_PORT fault_config_base |
		    if [ -n "${1:-}" ]; then
			sed "/^\[limits\]/a extra_methods = $1"
		    else
			cat
		    fi
		lab_entry weather weather "*.weather.example"
	} | lab_config_install
}
conf
fault_badup_start
fault_dns_start
lab_egressd_start weather
url() { printf 'http://api.weather.example:%s%s' "$FAULT_UP_PORT" "$1"; }

# Trailers.
lab_fetch weather -v "$(url /trailers)"
lab_expect_fetch_ok
lab_expect_eq "body" ok "$(cat "$LAB_FETCH_OUT")"
lab_expect_eq "trailers the guest got" "< X-Sum: 1" \
    "$(grep -E '^< [A-Za-z-]+: ' <<<"$LAB_FETCH_ERR" |
    sed -n '/^< X-Sum/,$p')"
for f in X-Named Transfer-Encoding Set-Cookie Host; do
	! grep -qi "^< $f:" <<<"$(sed -n '/^< X-Sum/,$p' <<<"$LAB_FETCH_ERR")" ||
	    lab_fail "trailer $f reached the guest"
done
lab_ok "only the end-to-end trailer reached the guest"

# refused METHOD DETAIL: the request is invalid-request with DETAIL, names
# the plugin, and nothing reaches the upstream.
refused()
{
	local m=$1 detail=$2 ups d
	ups=$(fault_ev '^req ' | wc -l)
	lab_mark
	lab_fetch weather -X "$m" "$(url /ok)"
	lab_expect_fetch_error invalid-request
	lab_expect_decision weather deny invalid-request
	d=$(lab_decision)
	lab_expect_eq "$m: detail" "$detail" "$(jq -r '.detail' <<<"$d")"
	lab_expect_eq "$m: plugin" weather "$(jq -r '.plugin' <<<"$d")"
	lab_expect_eq "$m: upstream requests" "$ups" \
	    "$(fault_ev '^req ' | wc -l)"
}
refused CONNECT "CONNECT is not an origin request"
refused connect "CONNECT is not an origin request"
refused Connect "CONNECT is not an origin request"
refused get "method not relayed"
refused PROPFIND "method not relayed"

# Host naming another host: the detail says so.
lab_mark
lab_fetch weather -H "Host: other.weather.example" "$(url /ok)"
lab_expect_fetch_error invalid-request
lab_expect_eq "Host detail" "Host header differs from the authority" \
    "$(lab_decision | jq -r '.detail')"

# The operator lists PROPFIND: it is relayed; lower case still is not.
conf "PROPFIND, REPORT"
ups=$(fault_ev '^req ' | wc -l)
lab_mark
lab_fetch weather -X PROPFIND "$(url /ok)"
lab_expect_fetch_ok
lab_expect_decision weather allow -
lab_expect_eq "PROPFIND reached the upstream" "$((ups + 1))" \
    "$(fault_ev '^req ' | wc -l)"
refused propfind "method not relayed"

# A configuration that lists CONNECT is refused as a whole.
printf '[limits]\nextra_methods = CONNECT\n' >"$LAB_DIR/bad.ini"
if "$EGRESSD" -c "$LAB_DIR/bad.ini" --check-config 2>"$LAB_DIR/bad.err"; then
	lab_fail "--check-config accepted extra_methods = CONNECT"
fi
grep -q "bad.ini:2: \[limits\] extra_methods: 'CONNECT' is never relayed" \
    "$LAB_DIR/bad.err" || lab_fail "no file:line error: $(cat "$LAB_DIR/bad.err")"
lab_ok "extra_methods = CONNECT is refused with file:line"
lab_finish
