#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Scenario 9: the configuration is read per request.
# On one open connection (egress-fetch -L held at the gate while the test
# edits the file, then following the redirect), an edit that adds a grant
# applies to the next request and an edit that removes it denies the next
# request. An edit that breaks the file makes every new request fail with
# unavailable (log reason policy-unavailable), on an open connection (or
# cuts its running request, when the broker notices the break first) and
# on new ones, with the file:line errors logged once, until the file is
# fixed. SIGHUP re-reads at once: an added instance gets its socket, a
# removed one loses it.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
lab_up

lab_dns_set gate.weather.example="$LAB_PUB4" new.weather.example="$LAB_PUB4"
GATE="http://gate.weather.example:$LAB_GATE_PORT"
NEW=http://new.weather.example/small
lab_gate_start
config()
{
	lab_config_base
	lab_entry weather weather "gate.weather.example${1:+, $1}"
}
config | lab_config_install
lab_egressd_start weather

# Held on the open connection, add the grant, then let the redirect go.
lab_fetch weather "$NEW"
lab_expect_fetch_error denied
lab_expect_decision weather deny not-granted new.weather.example
lab_mark
lab_fetch_bg add weather -L "$GATE/hold/add?to=$NEW"
lab_gate_wait add
config new.weather.example | lab_config_install
lab_gate_release add
lab_fetch_bg_wait add
lab_expect_fetch_ok
lab_expect_fetch_body_file "$LAB_DIR/www/small"
lab_expect_decision weather allow - gate.weather.example 1
lab_expect_decision weather allow - new.weather.example 2
lab_expect_hits "$LAB_PUB4" 1 /small

# And the reverse: remove it while held.
lab_mark
lab_fetch_bg del weather -L "$GATE/hold/del?to=$NEW"
lab_gate_wait del
config | lab_config_install
lab_gate_release del
lab_fetch_bg_wait del
lab_expect_fetch_error denied
lab_expect_decision weather deny not-granted new.weather.example 2
lab_expect_hits "$LAB_PUB4" 0 /small

# A broken file: held connection first, then new connections.
config new.weather.example | lab_config_install
lab_mark
lab_fetch_bg broken weather -L "$GATE/hold/broken?to=$NEW"
lab_gate_wait broken
{ config new.weather.example; printf '[plugins.entries.broken\n'; } |
    lab_config_install
lab_gate_release broken
lab_fetch_bg_wait broken
lab_expect_fetch_error unavailable
# The broker may notice the broken file (its once-a-second check) while
# the held request still waits for its response: that re-parse cuts the
# running request (revoked, policy-unavailable). Otherwise the 302
# arrives and the next request on the same connection is unavailable.
held=$(lab_decision 1 | jq -r .request_id)
held_close() { lab_events egress.close | jq -c --arg r "$held" \
    'select(.request_id == $r)'; }
held_closed() { [ -n "$(held_close)" ]; }
lab_poll 10 held_closed || lab_fail "no close of the held request"
if [ "$(held_close | jq -r .error)" = revoked ]; then
	lab_expect_eq "the held request's close" policy-unavailable \
	    "$(held_close | jq -r .reason)"
	lab_ok "the held request was cut when the broken file was noticed"
else
	lab_expect_decision weather deny policy-unavailable new.weather.example 2
fi
lab_expect_hits "$LAB_PUB4" 0 /small
nerr=$(grep -c 'egressd\.ini:[0-9]' "$LAB_BROKER_LOG" || true)
[ "$nerr" -ge 1 ] || lab_fail "the broker did not log the file:line error"
lab_ok "the configuration error was logged with file:line"
for i in 1 2; do
	lab_fetch weather "$NEW"
	lab_expect_fetch_error unavailable
	lab_expect_decision weather deny policy-unavailable new.weather.example
	lab_expect_hits "$LAB_PUB4" 0
done
lab_expect_eq "file:line errors logged once" "$nerr" \
    "$(grep -c 'egressd\.ini:[0-9]' "$LAB_BROKER_LOG" || true)"
lab_is_running egressd || lab_fail "egressd exited on a broken file"

# Fixed: serving again, with the fixed file's policy.
config new.weather.example | lab_config_install
lab_fetch weather "$NEW"
lab_expect_fetch_ok
lab_expect_decision weather allow - new.weather.example
lab_expect_hits "$LAB_PUB4" 1 /small

# SIGHUP: re-read now; sockets follow the instances.
{ config new.weather.example; lab_entry radar radar new.weather.example; } |
    lab_config_install
kill -HUP "$(lab_egressd_pid)"
lab_poll 10 test -S "$LAB_SOCK_DIR/radar.sock" ||
    lab_fail "no socket for an instance added by an edit"
lab_ok "an added instance got its socket"
lab_fetch radar "$NEW"
lab_expect_fetch_ok
lab_expect_decision radar allow - new.weather.example
config new.weather.example | lab_config_install
kill -HUP "$(lab_egressd_pid)"
lab_poll 10 lab__gone_sock "$LAB_SOCK_DIR/radar.sock" ||
    lab_fail "the socket of a removed instance is still there"
lab_ok "a removed instance lost its socket"
lab_fetch weather "$NEW"
lab_expect_fetch_ok

lab_finish
