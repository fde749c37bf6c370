#!/bin/bash
# SPDX-License-Identifier: ISC
#
# TLS profiles against upstreams that require a client certificate from a
# test client CA: a tls stream (a TLS 1.2 echo peer that fails the
# handshake without one, tests/integ/lab/stream_peer.py) and an https
# fetch (nginx with ssl_verify_client on). With the instance's profile
# that holds the client certificate both succeed; without a profile the
# echo peer refuses the handshake (tls-failed) and nginx answers 400; a
# profile the entry does not list is refused before anything is looked up
# or connected (invalid-request, reason tls-profile-not-allowed), as is a
# profile on a tcp stream; a profile whose CA does not sign the
# upstream's certificate fails verification (tls-failed), as does a
# certificate for another name under the profile. A wss WebSocket under
# the profile reaches a python3-websockets upstream that requires the
# client certificate (tests/integ/lab/ws_peer.py); without a profile the
# upstream fails the handshake, under the foreign profile the broker
# does, and an unlisted profile is refused before anything is looked up.
# The profile's files are watched; a reload after which the entry no
# longer lists the profile closes a stream opened under it.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
lab_up

[ -x "${EGRESS_CONNECT:-}" ] ||
    lab_fail "set EGRESS_CONNECT to the built egress-connect"
WS_PYTHON=${WS_PYTHON:-/usr/bin/python3}
"$WS_PYTHON" -c 'import websockets' 2>/dev/null ||
    lab_fail "python3-websockets missing: apt-get install python3-websockets"
P=$LAB_SRC_DIR/stream_peer.py
MTLS_PORT=7445
WSS_PORT=7447
OTHER_PORT=7446
HTTPS_PORT=8443
T=$LAB_DIR/tp
d=$LAB_DIR/pki
mkdir -p "$T"

# The client CA and its client certificate; a foreign CA that signs
# nothing the upstreams present.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    -nodes -keyout "$d/cca.key" -out "$d/cca.crt" -days 2 -sha256 \
    -subj "/CN=egressd lab client CA $$" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$d/client.key" -out "$d/client.csr" -subj "/CN=lab plugin" \
    2>/dev/null
printf '%s\n' "basicConstraints = critical, CA:FALSE" \
    "keyUsage = critical, digitalSignature" \
    "extendedKeyUsage = clientAuth" >"$d/client.ext"
openssl x509 -req -in "$d/client.csr" -CA "$d/cca.crt" -CAkey "$d/cca.key" \
    -CAcreateserial -days 2 -sha256 -extfile "$d/client.ext" \
    -out "$d/client.crt" 2>/dev/null
chmod 600 "$d/client.key"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    -nodes -keyout "$d/xca.key" -out "$d/xca.crt" -days 2 -sha256 \
    -subj "/CN=egressd lab foreign CA $$" \
    -addext "basicConstraints=critical,CA:TRUE" 2>/dev/null

# nginx requiring a client certificate, on its own port.
mkdir -p "$T/nginx"
cat >"$T/nginx/nginx.conf" <<EOF
user root;
worker_processes 1;
daemon off;
pid $T/nginx/nginx.pid;
error_log $T/nginx/error.log info;
events { worker_connections 64; }
http {
    access_log $T/nginx/access.log;
    client_body_temp_path $T/nginx;
    proxy_temp_path $T/nginx;
    fastcgi_temp_path $T/nginx;
    uwsgi_temp_path $T/nginx;
    scgi_temp_path $T/nginx;
    server {
        listen $LAB_PUB4:$HTTPS_PORT ssl;
        ssl_certificate $d/good.crt;
        ssl_certificate_key $d/good.key;
        ssl_client_certificate $d/cca.crt;
        ssl_verify_client on;
        location / { default_type text/plain;
            return 200 "client=\$ssl_client_s_dn\n"; }
    }
}
EOF
lab_spawn mtls-nginx "$LAB_NS_O" nginx -e "$T/nginx/error.log" \
    -p "$T/nginx" -c "$T/nginx/nginx.conf"
mtls_listening() { lab_ns_o ss -Htln | grep -qF "$LAB_PUB4:$HTTPS_PORT "; }
lab_poll 10 mtls_listening || lab_fail "the mTLS nginx did not start"

lab_peer()
{
	local name=$1
	shift
	lab_spawn "$name" "$LAB_NS_O" "$LAB_PYTHON" "$P" "$@"
	lab_poll 10 grep -q ready "$LAB_DIR/log/$name.out" ||
	    lab_fail "stream peer $name did not start"
}
lab_peer mtls echo "$LAB_PUB4" "$MTLS_PORT" "$d/good.crt" "$d/good.key" \
    "$T/sni" "$d/cca.crt" "$T/alpn"
lab_peer other echo "$LAB_PUB4" "$OTHER_PORT" "$d/other.crt" \
    "$d/other.key" "$T/sni-other" "$d/cca.crt"

# lab_connect INSTANCE URL IN [egress-connect options]: egress-connect in
# the broker namespace, stdin from IN; sets CONNECT_RC, CONNECT_OUT,
# CONNECT_ERR.
lab_connect()
{
	local inst=$1 url=$2 in=$3
	shift 3
	lab_mark
	CONNECT_OUT=$T/connect.out
	CONNECT_RC=0
	lab_ns_b timeout -k 5 "$(egress_wait 60)" "${EGRESS_WRAP_CMD[@]}" \
	    "$EGRESS_CONNECT" --socket "$LAB_SOCK_DIR/$inst.sock" "$@" "$url" \
	    <"$in" >"$CONNECT_OUT" 2>"$T/connect.err" || CONNECT_RC=$?
	CONNECT_ERR=$(cat "$T/connect.err")
}

lab_expect_connect_error()
{
	local code=$1 want=${LAB_EXIT_CODE[$1]}
	[ "$CONNECT_RC" = "$want" ] ||
	    lab_fail "egress-connect: want exit $want ($code)," \
	    "got $CONNECT_RC: $CONNECT_ERR"
	grep -q "^egress-connect: $code: " <<<"$CONNECT_ERR" ||
	    lab_fail "stderr lacks 'egress-connect: $code: ': $CONNECT_ERR"
	[ ! -s "$CONNECT_OUT" ] || lab_fail "bytes reached the guest anyway"
	lab_ok "egress-connect failed with $code (exit $want)"
}

lab_dns_set api.weather.example="$LAB_PUB4" \
    other.weather.example="$LAB_PUB4"
HOSTS="api.weather.example, other.weather.example"
# config PROFILES: the configuration, the entry listing PROFILES.
config()
{
	lab_config_base
	printf '\n[tls.profiles.mtls]\nca_file = %s\n' "$d/ca.crt"
	printf 'cert_file = %s\nkey_file = %s\nalpn = lab/1\n' \
	    "$d/client.crt" "$d/client.key"
	printf '\n[tls.profiles.foreign]\nca_file = %s\n' "$d/xca.crt"
	printf 'cert_file = %s\nkey_file = %s\n' "$d/client.crt" \
	    "$d/client.key"
	printf '\n[tls.profiles.unlisted]\ncert_file = %s\nkey_file = %s\n' \
	    "$d/client.crt" "$d/client.key"
	lab_entry sock sockets "$HOSTS" "" "http_client, socket_client"
	printf 'tls_profiles = %s\n' "$1"
	lab_entry wsock feeds "$HOSTS" "" "http_client, websocket_client"
	printf 'tls_profiles = %s\n' "$1"
}
config "mtls, foreign" | lab_config_install
lab_egressd_start sock wsock

# The profiles an instance may select, where instances are listed.
[ -x "${EGRESSCTL:-}" ] || lab_fail "EGRESSCTL is not set"
lab_ns_b "$EGRESSCTL" -c "$LAB_CONF" plugin list |
    grep -qE '^  tls profiles: +mtls, foreign$' ||
    lab_fail "plugin list lacks the profiles: $(lab_ns_b "$EGRESSCTL" \
    -c "$LAB_CONF" plugin list)"
lab_expect_eq "plugin list --json tls_profiles" '["mtls","foreign"]' \
    "$(lab_ns_b "$EGRESSCTL" -c "$LAB_CONF" plugin list --json |
    jq -c '.[0].tls_profiles')"
lab_expect_eq "instance --json tls_profiles" '["mtls","foreign"]' \
    "$(lab_ns_b "$EGRESSCTL" -c "$LAB_CONF" instance --json sock |
    jq -c '.tls_profiles')"

printf 'hello over mutual TLS\n' >"$T/lines"

# ---- the profile with the client certificate: the stream and the fetch
lab_connect sock "tls://api.weather.example:$MTLS_PORT" "$T/lines" \
    --profile mtls
[ "$CONNECT_RC" = 0 ] ||
    lab_fail "egress-connect --profile mtls exited $CONNECT_RC: $CONNECT_ERR"
cmp -s "$T/lines" "$CONNECT_OUT" ||
    lab_fail "the echo differs: $(head -c 200 "$CONNECT_OUT")"
lab_ok "the tls stream with the client certificate echoed"
lab_expect_eq "ALPN of the tls stream (the profile's)" lab/1 \
    "$(tail -n 1 "$T/alpn")"
lab_expect_eq "SNI of the tls stream" api.weather.example \
    "$(tail -n 1 "$T/sni")"
lab_expect_decision sock allow - api.weather.example
lab_expect_close error ""

lab_fetch sock --profile mtls -i \
    "https://api.weather.example:$HTTPS_PORT/"
lab_expect_fetch_ok 200
grep -q "^client=CN=lab plugin" "$LAB_FETCH_OUT" ||
    lab_fail "nginx did not see the client certificate: $(cat "$LAB_FETCH_OUT")"
lab_ok "nginx saw the client certificate"

# ---- no profile: the [tls] trust, no client certificate
lab_connect sock "tls://api.weather.example:$MTLS_PORT" "$T/lines"
lab_expect_connect_error tls-failed
lab_expect_close error tls-failed
lab_fetch sock -i "https://api.weather.example:$HTTPS_PORT/"
lab_expect_fetch_ok 400
lab_ok "nginx refused the request without a client certificate"

# ---- a profile the entry does not list: refused before any lookup
lab_connect sock "tls://api.weather.example:$MTLS_PORT" "$T/lines" \
    --profile unlisted
lab_expect_connect_error invalid-request
lab_expect_decision sock deny tls-profile-not-allowed
lab_expect_eq "no lookup for the refused profile" 0 \
    "$(($(lab_dns_count api.weather.example A) + \
    $(lab_dns_count api.weather.example AAAA)))"
lab_expect_eq "nothing connected" "" \
    "$(lab_events egress.close | tail -n 1 | jq -r '.connected // ""')"
lab_fetch sock --profile nosuch "https://api.weather.example:$HTTPS_PORT/"
lab_expect_fetch_error invalid-request
lab_expect_decision sock deny tls-profile-not-allowed
lab_connect sock "tcp://api.weather.example:$MTLS_PORT" "$T/lines" \
    --profile mtls
lab_expect_connect_error invalid-request
lab_expect_decision sock deny invalid-request

# ---- a profile whose CA does not sign the upstream's certificate
lab_connect sock "tls://api.weather.example:$MTLS_PORT" "$T/lines" \
    --profile foreign
lab_expect_connect_error tls-failed
lab_fetch sock --profile foreign "https://api.weather.example:$HTTPS_PORT/"
lab_expect_fetch_error tls-failed

# ---- a certificate for another name, under the profile
lab_connect sock "tls://other.weather.example:$OTHER_PORT" "$T/lines" \
    --profile mtls
lab_expect_connect_error tls-failed
lab_expect_close error tls-failed

# ---- wss under the profile, to an upstream that requires the client
# certificate
mkdir -p "$T/ws"
lab_spawn wsmtls "$LAB_NS_O" "$WS_PYTHON" "$LAB_SRC_DIR/ws_peer.py" echo \
    "$LAB_PUB4" "$WSS_PORT" "$T/ws" "$d/good.crt" "$d/good.key" "$d/cca.crt"
lab_poll 10 grep -q ready "$LAB_DIR/log/wsmtls.out" ||
    lab_fail "the wss peer did not start: $(cat "$LAB_DIR/log/wsmtls.err")"
WSS_URL="wss://api.weather.example:$WSS_PORT/"
# stdin stays open until the echo came back (its end sends the close).
lab_mark
mkfifo "$T/wsin"
lab_spawn wsconn "$LAB_NS_B" sh -c 'exec "$@" <"$0"' "$T/wsin" \
    "${EGRESS_WRAP_CMD[@]}" "$EGRESS_CONNECT" \
    --socket "$LAB_SOCK_DIR/wsock.sock" --profile mtls "$WSS_URL"
exec {wsin}>"$T/wsin"
cat "$T/lines" >&"$wsin"
lab_poll 10 cmp -s "$T/lines" "$LAB_DIR/log/wsconn.out" ||
    lab_fail "no wss echo: $(cat "$LAB_DIR/log/wsconn.err")"
exec {wsin}>&-
lab_poll 10 lab__gone "${LAB_PID[wsconn]}" ||
    lab_fail "egress-connect did not end with its stdin"
lab_stop wsconn
lab_expect_eq "wss egress-connect's exit status" 0 "$LAB_STOP_RC"
lab_ok "the wss echo with the client certificate"
lab_expect_eq "client certificate the wss upstream saw" "lab plugin" \
    "$(jq -r .client_cn "$T/ws/conn.1.json")"
lab_expect_decision wsock allow - api.weather.example
lab_expect_eq "close transport" websocket \
    "$(lab_events egress.close | tail -n 1 | jq -r .transport)"
lab_connect wsock "$WSS_URL" "$T/lines"
lab_expect_connect_error tls-failed
lab_expect_close error tls-failed
lab_connect wsock "$WSS_URL" "$T/lines" --profile foreign
lab_expect_connect_error tls-failed
lab_expect_close error tls-failed
lab_connect wsock "$WSS_URL" "$T/lines" --profile unlisted
lab_expect_connect_error invalid-request
lab_expect_decision wsock deny tls-profile-not-allowed
lab_expect_eq "no lookup for the refused profile" 0 \
    "$(($(lab_dns_count api.weather.example A) + \
    $(lab_dns_count api.weather.example AAAA)))"
lab_expect_eq "wss connections the upstream served" 1 \
    "$(ls "$T/ws" | grep -c '^conn\.[0-9]*\.json$')"
lab_stop wsmtls

# ---- the profile's files are watched as the configuration is: a
# rewritten client certificate (here one the upstream does not trust)
# applies at the next request, and a key file opened to the group breaks
# the configuration (fail closed: policy-unavailable) until it is
# owner-only again and the configuration is re-read (SIGHUP).
cp -p "$d/client.crt" "$T/client.crt.good"
cp -p "$d/client.key" "$T/client.key.good"
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$T/x.key" -out "$T/x.csr" -subj "/CN=foreign plugin" 2>/dev/null
openssl x509 -req -in "$T/x.csr" -CA "$d/xca.crt" -CAkey "$d/xca.key" \
    -CAcreateserial -days 2 -sha256 -extfile "$d/client.ext" \
    -out "$T/x.crt" 2>/dev/null
chmod 600 "$T/x.key"
cp "$T/x.crt" "$d/client.crt.new" && mv -f "$d/client.crt.new" "$d/client.crt"
cp -p "$T/x.key" "$d/client.key.new" && mv -f "$d/client.key.new" "$d/client.key"
lab_connect sock "tls://api.weather.example:$MTLS_PORT" "$T/lines" \
    --profile mtls
lab_expect_connect_error tls-failed
cp -p "$T/client.crt.good" "$d/client.crt.new"
mv -f "$d/client.crt.new" "$d/client.crt"
cp -p "$T/client.key.good" "$d/client.key.new"
mv -f "$d/client.key.new" "$d/client.key"
lab_connect sock "tls://api.weather.example:$MTLS_PORT" "$T/lines" \
    --profile mtls
[ "$CONNECT_RC" = 0 ] ||
    lab_fail "the restored certificate was not picked up: $CONNECT_ERR"
lab_ok "the rewritten client certificate applied at the next request"
chmod 640 "$d/client.key"
lab_connect sock "tls://api.weather.example:$MTLS_PORT" "$T/lines" \
    --profile mtls
lab_expect_connect_error unavailable
lab_expect_decision sock deny policy-unavailable
lab_wait_events egress.config 1
lab_events egress.config | tail -n 1 | jq -e '.status == "invalid" and
    (.errors | tostring | test("key_file: .* is group- or world-accessible"))
    and (.errors | tostring | test("PRIVATE") | not)' >/dev/null ||
    lab_fail "no egress.config naming the key file: $(lab_events egress.config)"
lab_ok "the broken key file is logged by name, never by content"
# While broken only the configuration file is watched: SIGHUP re-reads.
chmod 600 "$d/client.key"
lab_mark
kill -HUP "$(lab_egressd_pid)"
lab_wait_events egress.config 1
lab_connect sock "tls://api.weather.example:$MTLS_PORT" "$T/lines" \
    --profile mtls
[ "$CONNECT_RC" = 0 ] ||
    lab_fail "the owner-only key was not accepted again: $CONNECT_ERR"
lab_ok "the key file owner-only again: served again"

# ---- a reload after which the entry no longer lists the profile closes
# the stream opened under it (egress.close error revoked)
mkfifo "$T/in"
lab_spawn held "$LAB_NS_B" sh -c 'exec "$@" <"$0"' "$T/in" \
    "${EGRESS_WRAP_CMD[@]}" "$EGRESS_CONNECT" \
    --socket "$LAB_SOCK_DIR/sock.sock" --profile mtls \
    "tls://api.weather.example:$MTLS_PORT"
exec {in}>"$T/in"
printf 'held\n' >&"$in"
lab_poll 10 grep -qx held "$LAB_DIR/log/held.out" ||
    lab_fail "the stream under the profile did not connect"
lab_mark
config foreign | lab_config_install
kill -HUP "$(lab_egressd_pid)"
lab_poll 10 lab__gone "${LAB_PID[held]}" ||
    lab_fail "the stream stayed open after its profile was unlisted"
lab_stop held
lab_expect_eq "revoked stream's exit status (denied)" 10 "$LAB_STOP_RC"
lab_expect_close error revoked
lab_expect_close reason tls-profile-not-allowed
exec {in}>&-

lab_stop mtls-nginx
lab_finish
