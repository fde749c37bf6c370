#!/bin/bash
# SPDX-License-Identifier: ISC
#
# STARTTLS on a tcp stream against an SMTP-like upstream
# (tests/integ/lab/smtp_peer.py): egress-connect --starttls smtp speaks
# SMTP up to the go-ahead, the broker upgrades the stream (SNI and
# verification for the host) and lines echo over TLS; the close event
# says "upgraded". An upstream that answers plaintext instead of a
# ServerHello fails the stream (tls-failed) and never receives the
# guest's bytes in plaintext after the go-ahead; an upstream that
# injects plaintext after its go-ahead fails the stream and the injected
# bytes never reach the guest's output; a certificate for another name
# is refused; an unlisted profile is refused (invalid-request); a
# guest that sends DATA right after its STARTTLS frame breaks the
# protocol: its connection is dropped and the upstream never sees that
# plaintext; a reload after which the entry no longer lists the
# upgrade's profile closes the upgraded stream (revoked); and files that
# broke before the STARTTLS fail the upgrade as unavailable.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
lab_up

[ -x "${EGRESS_CONNECT:-}" ] ||
    lab_fail "set EGRESS_CONNECT to the built egress-connect"
P=$LAB_SRC_DIR/smtp_peer.py
T=$LAB_DIR/st
d=$LAB_DIR/pki
mkdir -p "$T"

lab_peer()
{
	local name=$1
	shift
	lab_spawn "$name" "$LAB_NS_O" "$LAB_PYTHON" "$P" "$@"
	lab_poll 10 grep -q ready "$LAB_DIR/log/$name.out" ||
	    lab_fail "smtp peer $name did not start"
}
lab_peer ok ok "$LAB_PUB4" 2525 "$d/good.crt" "$d/good.key" "$T/rec-ok"
lab_peer badhs badhs "$LAB_PUB4" 2526 "$d/good.crt" "$d/good.key" \
    "$T/rec-badhs"
lab_peer inject inject "$LAB_PUB4" 2527 "$d/good.crt" "$d/good.key" \
    "$T/rec-inject"
lab_peer other ok "$LAB_PUB4" 2528 "$d/other.crt" "$d/other.key" \
    "$T/rec-other"
lab_peer late inject-late "$LAB_PUB4" 2530 "$d/good.crt" "$d/good.key" \
    "$T/rec-late"
lab_peer record record "$LAB_PUB4" 2529 "$d/good.crt" "$d/good.key" \
    "$T/rec-record"
lab_peer hold hold "$LAB_PUB4" 2531 "$d/good.crt" "$d/good.key" \
    "$T/rec-hold"

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
	[ ! -s "$CONNECT_OUT" ] || lab_fail "bytes reached the guest anyway:" \
	    "$(head -c 200 "$CONNECT_OUT")"
	lab_ok "egress-connect failed with $code (exit $want)"
}

lab_dns_set mail.weather.example="$LAB_PUB4"
# config PROFILES: the configuration, the entry listing PROFILES.
config()
{
	lab_config_base
	printf '\n[tls.profiles.labca]\nca_file = %s\n' "$d/ca.crt"
	printf '\n[tls.profiles.unlisted]\nca_file = %s\n' "$d/ca.crt"
	lab_entry mail sockets mail.weather.example "" socket_client
	printf 'tls_profiles = %s\n' "$1"
}
config labca | lab_config_install
lab_egressd_start mail

printf 'SECRET-AFTER-UPGRADE line one\nline two\n' >"$T/lines"

# ---- success: SMTP dialog, upgrade, echo over TLS
lab_connect mail "tcp://mail.weather.example:2525" "$T/lines" \
    --starttls smtp
[ "$CONNECT_RC" = 0 ] ||
    lab_fail "egress-connect --starttls smtp exited $CONNECT_RC: $CONNECT_ERR"
cmp -s "$T/lines" "$CONNECT_OUT" ||
    lab_fail "the echo over TLS differs: $(head -c 200 "$CONNECT_OUT")"
lab_ok "lines echoed over the upgraded stream"
lab_expect_decision mail allow - mail.weather.example
lab_expect_close starttls upgraded
lab_expect_close error ""
[ ! -s "$T/rec-ok" ] || lab_fail "the ok peer recorded plaintext"

# ---- with the listed profile
lab_connect mail "tcp://mail.weather.example:2525" "$T/lines" \
    --starttls smtp --profile labca
[ "$CONNECT_RC" = 0 ] ||
    lab_fail "--profile labca exited $CONNECT_RC: $CONNECT_ERR"
cmp -s "$T/lines" "$CONNECT_OUT" || lab_fail "the echo differs (labca)"
lab_expect_close starttls upgraded

# ---- an unlisted profile: refused, nothing upgraded
lab_connect mail "tcp://mail.weather.example:2525" "$T/lines" \
    --starttls smtp --profile unlisted
lab_expect_connect_error invalid-request
lab_expect_close starttls tls-profile-not-allowed

# ---- the upstream fails the handshake: no plaintext after the go-ahead
lab_connect mail "tcp://mail.weather.example:2526" "$T/lines" \
    --starttls smtp
lab_expect_connect_error tls-failed
lab_expect_close error tls-failed
lab_expect_close starttls tls
[ -s "$T/rec-badhs" ] || lab_fail "the peer received no ClientHello"
if grep -q SECRET "$T/rec-badhs"; then
	lab_fail "plaintext reached the upstream after the go-ahead"
fi
[ "$(head -c 1 "$T/rec-badhs" | od -An -tx1 | tr -d ' ')" = 16 ] ||
    lab_fail "what followed the go-ahead is not a TLS handshake record"
lab_ok "only a TLS record followed the go-ahead"

# ---- the upstream injects plaintext after its go-ahead: with it (the
# guest holds unread bytes when it would upgrade: it cancels), and once
# the upgrade began (the broker fails it)
lab_connect mail "tcp://mail.weather.example:2527" "$T/lines" \
    --starttls smtp
lab_expect_connect_error tls-failed
if grep -q INJECTED "$CONNECT_OUT" "$T/connect.err"; then
	lab_fail "the injected bytes reached the guest"
fi
lab_ok "the injected bytes never reached the guest"
lab_expect_close error cancelled
lab_connect mail "tcp://mail.weather.example:2530" "$T/lines" \
    --starttls smtp
lab_expect_connect_error tls-failed
if grep -q INJECTED "$CONNECT_OUT" "$T/connect.err"; then
	lab_fail "the late injected bytes reached the guest"
fi
lab_ok "the late injected bytes never reached the guest"
lab_expect_close error tls-failed
case $(lab_events egress.close | tail -n 1 | jq -r .starttls) in
starttls-injection | tls) lab_ok "the broker failed the upgrade" ;;
*) lab_fail "close starttls: $(lab_events egress.close | tail -n 1)" ;;
esac

# ---- a certificate for another name
lab_connect mail "tcp://mail.weather.example:2528" "$T/lines" \
    --starttls smtp
lab_expect_connect_error tls-failed
lab_expect_close starttls tls

# ---- guest DATA after its STARTTLS: a violation, never relayed; the
# close event says the upgrade was aborted
lab_mark
rc=0
out=$(lab_ns_b timeout "$(egress_wait 30)" "$LAB_PYTHON" \
    "$LAB_SRC_DIR/starttls_guest.py" "$LAB_SOCK_DIR/mail.sock" \
    "mail.weather.example:2529" 2>&1) || rc=$?
[ "$rc" = 0 ] || lab_fail "the broker did not drop the connection: $out"
lab_ok "guest DATA after STARTTLS dropped the connection"
lab_expect_close starttls starttls-aborted
if grep -q PLAINTEXT-AFTER "$T/rec-record" 2>/dev/null; then
	lab_fail "guest plaintext after STARTTLS reached the upstream"
fi
lab_ok "the upstream never saw the guest's plaintext after STARTTLS"
lab_is_running egressd || lab_fail "egressd died"

# ---- a reload decides the upgraded stream again with its profile: once
# the entry no longer lists it, the stream is closed (revoked)
mkfifo "$T/in"
lab_spawn held "$LAB_NS_B" sh -c 'exec "$@" <"$0"' "$T/in" \
    "${EGRESS_WRAP_CMD[@]}" "$EGRESS_CONNECT" \
    --socket "$LAB_SOCK_DIR/mail.sock" --profile labca --starttls smtp \
    "tcp://mail.weather.example:2525"
exec {in}>"$T/in"
printf 'held over tls\n' >&"$in"
lab_poll 10 grep -qx 'held over tls' "$LAB_DIR/log/held.out" ||
    lab_fail "the upgraded stream did not echo"
lab_mark
config unlisted | lab_config_install
kill -HUP "$(lab_egressd_pid)"
lab_poll 10 lab__gone "${LAB_PID[held]}" ||
    lab_fail "the upgraded stream stayed open after its profile was unlisted"
lab_stop held
lab_expect_eq "revoked stream's exit status (denied)" 10 "$LAB_STOP_RC"
lab_expect_close error revoked
lab_expect_close reason tls-profile-not-allowed
lab_expect_close starttls upgraded
exec {in}>&-

# ---- files that broke between the stream's opening and its STARTTLS:
# the upgrade fails as a new stream would, unavailable
config labca | lab_config_install
lab_spawn brk "$LAB_NS_B" "${EGRESS_WRAP_CMD[@]}" "$EGRESS_CONNECT" \
    --socket "$LAB_SOCK_DIR/mail.sock" --starttls smtp \
    "tcp://mail.weather.example:2531" <"$T/lines"
lab_poll 10 test -e "$T/rec-hold.asked" ||
    lab_fail "the stream never asked the held peer for STARTTLS"
lab_mark
printf '[broker\n' >>"$LAB_CONF"
touch "$T/rec-hold.go"
lab_poll 10 lab__gone "${LAB_PID[brk]}" ||
    lab_fail "the upgrade went on under broken files"
lab_stop brk
lab_expect_eq "upgrade under broken files: exit status (unavailable)" 18 \
    "$LAB_STOP_RC"
lab_expect_close starttls starttls-denied
lab_expect_close error unavailable
[ ! -s "$LAB_DIR/log/brk.out" ] ||
    lab_fail "bytes reached the guest: $(head -c 200 "$LAB_DIR/log/brk.out")"
config labca | lab_config_install

lab_finish
