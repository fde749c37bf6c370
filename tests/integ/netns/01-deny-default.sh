#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Scenario 1: no entry means no network. An instance
# without an entry has no socket; an entry with an empty grant is denied
# before any DNS query; an entry without the http_client permission is
# denied; and a connection whose instance entry is removed by an edit gets
# its next request denied (unknown-instance). No upstream is ever hit.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
lab_up

lab_dns_set api.weather.example="$LAB_PUB4" gate.weather.example="$LAB_PUB4"
lab_gate_start
config()
{
	lab_config_base
	lab_entry weather weather ""
	lab_entry noperm weather api.weather.example "" ""
	[ "${1:-}" = without-radar ] ||
	    lab_entry radar radar "gate.weather.example, api.weather.example"
}
config | lab_config_install
lab_egressd_start weather noperm radar

# An instance without an entry has no socket at all.
[ ! -e "$LAB_SOCK_DIR/nobody.sock" ] ||
    lab_fail "a socket exists for an unconfigured instance"
lab_ok "no socket for an instance without an entry"
lab_fetch nobody http://api.weather.example/small
[ "$LAB_FETCH_RC" != 0 ] || lab_fail "a fetch without a socket succeeded"
lab_ok "fetch on a missing socket fails (exit $LAB_FETCH_RC)"
lab_expect_hits "$LAB_PUB4" 0

# An entry with an empty grant: denied, before resolution.
lab_fetch weather http://api.weather.example/small
lab_expect_fetch_error denied
lab_expect_decision weather deny not-granted api.weather.example
lab_expect_hits "$LAB_PUB4" 0
lab_expect_eq "DNS queries for a request denied by its grant" 0 \
    "$(( $(lab_dns_count api.weather.example A) + \
    $(lab_dns_count api.weather.example AAAA) ))"
lab_fetch weather https://api.weather.example/small
lab_expect_fetch_error denied
lab_expect_decision weather deny not-granted api.weather.example
lab_expect_hits "$LAB_PUB4" 0

# Granted, but the entry does not grant the http_client permission.
lab_fetch noperm http://api.weather.example/small
lab_expect_fetch_error denied
lab_expect_decision noperm deny no-permission api.weather.example
lab_expect_hits "$LAB_PUB4" 0

# Remove radar's entry while one of its connections is open (held by the
# gate); the next request on that connection has no entry: denied.
lab_mark
lab_fetch_bg gone radar -L --max-redirs 2 \
    "http://gate.weather.example:$LAB_GATE_PORT/hold/gone?to=http://api.weather.example/small"
lab_gate_wait gone
config without-radar | lab_config_install
lab_gate_release gone
lab_fetch_bg_wait gone
lab_expect_fetch_error denied
lab_expect_decision radar allow - gate.weather.example 1
lab_expect_decision radar deny unknown-instance api.weather.example 2
lab_expect_hits "$LAB_PUB4" 0 /small

lab_finish
