#!/bin/bash
# SPDX-License-Identifier: ISC
#
# The proxy front on the instance socket, with real curl: an origin-form
# request (what `curl --unix-socket` sends) and an absolute-form one (curl
# told to use a proxy) are allowed through the same pipeline as a shim
# request (one decision naming the instance and the validated address,
# one close naming the address used), bodies byte for byte, keep-alive
# across requests on one connection, request bodies with Content-Length
# and chunked relayed, an HTTPS upstream through an absolute-form https://
# target, and the same destination denied to an instance without the
# grant (403, the masked message, nothing reaching the upstream).
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
. "$(dirname "$0")/../lab/curl.sh"
lab_init
lab_need_bins
lab_up

lab_dns_set api.weather.example="$LAB_PUB4"
{
	lab_config_base
	lab_entry weather weather "api.weather.example, $LAB_PUB4"
	lab_entry radar radar ""
} | lab_config_install
lab_egressd_start weather radar
W=$LAB_DIR/www

# Origin-form: curl --unix-socket PATH http://host/path.
lab_curl weather http://api.weather.example/small
lab_expect_curl 200
LAB_FETCH_OUT=$LAB_CURL_OUT lab_expect_fetch_body_file "$W/small"
lab_expect_decision weather allow - api.weather.example
lab_expect_decision_addresses "$LAB_PUB4"
lab_expect_hits "$LAB_PUB4" 1 /small
lab_expect_close connected "$LAB_PUB4"
lab_expect_close status 200

# Absolute-form: curl speaking to a proxy (the socket).
lab_curl weather -x http://proxy.invalid:3128 \
    http://api.weather.example/large
lab_expect_curl 200
LAB_FETCH_OUT=$LAB_CURL_OUT lab_expect_fetch_body_file "$W/large"
lab_expect_decision weather allow - api.weather.example
lab_expect_hits "$LAB_PUB4" 1 /large

# The upstream saw the authorized Host and no proxy header.
lab_curl weather -x http://proxy.invalid:3128 -U user:secret \
    -H 'Proxy-Connection: keep-alive' http://api.weather.example/headers
lab_expect_curl 200
grep -q '^host=api.weather.example te=\[\] upgrade=\[\] pa=\[\] ka=\[\]' \
    "$LAB_CURL_OUT" || lab_fail "upstream saw: $(cat "$LAB_CURL_OUT")"
lab_ok "Proxy-Authorization and hop-by-hop headers dropped"

# https:// in absolute form: the broker does TLS to the upstream.
lab_curl weather -x http://proxy.invalid:3128 \
    --proxy-header 'X-Unused: 1' http://api.weather.example/host
lab_expect_curl 200
lab_curl weather -x http://p.invalid:1 -H 'X-Foo: 1' \
    --request-target https://api.weather.example/host \
    http://api.weather.example/
lab_expect_curl 200
grep -q '^host=api.weather.example sni=api.weather.example$' \
    "$LAB_CURL_OUT" || lab_fail "upstream saw: $(cat "$LAB_CURL_OUT")"
lab_ok "https:// target verified with SNI"

# Keep-alive: three requests on one connection, answered in order
# (curl reports 0 new connections for a reused one).
lab_mark
got=$(lab_ns_b timeout -k 5 "$(egress_wait 30)" curl -sS \
    --unix-socket "$LAB_SOCK_DIR/weather.sock" \
    -o /dev/null -o /dev/null -o /dev/null \
    -w '%{http_code}:%{num_connects} ' http://api.weather.example/small \
    http://api.weather.example/missing http://api.weather.example/small)
lab_expect_eq "statuses and new connections" "200:1 404:0 200:0 " "$got"
lab_expect_eq "decisions" 3 "$(lab_count_events egress.decision)"

# Request bodies, Content-Length and chunked, read in full by the echo.
lab_echo_start
head -c 300000 /dev/urandom >"$LAB_DIR/body.bin"
sum=$(sha256sum <"$LAB_DIR/body.bin" | cut -d' ' -f1)
E=http://api.weather.example:$LAB_ECHO_PORT/post
lab_curl weather --data-binary "@$LAB_DIR/body.bin" "$E"
lab_expect_curl 200
lab_expect_eq "body at the upstream" \
    "length 300000 $sum host=api.weather.example:$LAB_ECHO_PORT" \
    "$(cat "$LAB_CURL_OUT")"
lab_expect_close bytes_out 300000
lab_curl weather -H 'Transfer-Encoding: chunked' \
    --data-binary "@$LAB_DIR/body.bin" "$E"
lab_expect_curl 200
lab_expect_eq "chunked body at the upstream" \
    "chunked 300000 $sum host=api.weather.example:$LAB_ECHO_PORT" \
    "$(cat "$LAB_CURL_OUT")"
lab_expect_close bytes_out 300000
lab_curl weather -x http://p.invalid:1 -H 'Expect: 100-continue' \
    --data-binary "@$LAB_DIR/body.bin" "$E"
lab_expect_curl 200
lab_expect_eq "body after 100-continue" \
    "length 300000 $sum host=api.weather.example:$LAB_ECHO_PORT" \
    "$(cat "$LAB_CURL_OUT")"

# The same destination from an instance without the grant.
lab_curl radar http://api.weather.example/small
lab_expect_curl_denied
lab_expect_decision radar deny not-granted api.weather.example
lab_expect_hits "$LAB_PUB4" 0

lab_finish
