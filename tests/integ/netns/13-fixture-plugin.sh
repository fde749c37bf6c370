#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Scenario 13: a fixture plugin process built on the
# shim runs under a seccomp filter (libseccomp) that refuses every socket
# family but AF_UNIX. Its own socket(AF_INET) and socket(AF_INET6) fail
# with EPERM, while its request through the broker works; a destination
# the policy refuses is still refused, with the masked message, and the
# upstream sees nothing.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
[ -x "${EGRESS_FIXTURE_PLUGIN:-}" ] ||
    lab_fail "set EGRESS_FIXTURE_PLUGIN to the built egress-fixture-plugin"
lab_up

lab_dns_set api.weather.example="$LAB_PUB4" meta.weather.example="$LAB_META4"
{
	lab_config_base
	lab_entry weather weather "api.weather.example, meta.weather.example"
} | lab_config_install
lab_egressd_start weather
W=$LAB_DIR/www

# Never under EGRESS_WRAP: the plugin installs a seccomp filter, under
# which valgrind cannot run. The broker it talks to is wrapped.
plugin() {
	LAB_FETCH_RC=0
	lab_ns_b timeout -k 5 "$(egress_wait 30)" "$EGRESS_FIXTURE_PLUGIN" \
	    --socket "$LAB_SOCK_DIR/weather.sock" "$1" \
	    >"$LAB_DIR/plugin.out" 2>"$LAB_DIR/plugin.err" || LAB_FETCH_RC=$?
}

lab_mark
plugin https://api.weather.example/small
lab_expect_eq "fixture plugin exit status" 0 "$LAB_FETCH_RC"
lab_expect_eq "its own AF_INET socket" "socket(AF_INET): EPERM" \
    "$(sed -n 1p "$LAB_DIR/plugin.out")"
lab_expect_eq "its own AF_INET6 socket" "socket(AF_INET6): EPERM" \
    "$(sed -n 2p "$LAB_DIR/plugin.out")"
lab_expect_eq "status through the broker" "status: 200" \
    "$(sed -n 3p "$LAB_DIR/plugin.out")"
lab_expect_eq "body through the broker" "$(cat "$W/small")" \
    "$(tail -n +5 "$LAB_DIR/plugin.out")"
lab_expect_decision weather allow - api.weather.example
lab_expect_hits "$LAB_PUB4" 1 /small

lab_mark
plugin http://meta.weather.example/latest/meta-data/
lab_expect_eq "fixture plugin exit status when denied" 10 "$LAB_FETCH_RC"
lab_expect_eq "masked denial" \
    "egress-fixture-plugin: denied: $LAB_DENIED_MSG" \
    "$(cat "$LAB_DIR/plugin.err")"
lab_expect_decision weather deny metadata meta.weather.example
lab_expect_no_metadata_hits

lab_finish
