#!/bin/bash
# SPDX-License-Identifier: ISC
#
# Scenario 14: loopback and the broker host's own addresses are a class of
# their own. Three listeners run in the broker's namespace: on its
# loopback (127.0.0.1:80 and [::1]:80) and on an address of its own
# (10.0.0.99:80, a private-range address added to lo, so the old rules
# would have let the private carve-out reach it). Names granted and carved
# out only in egress_allow_private that resolve to any of them are denied
# loopback-address and no listener sees a connection; a name answering
# loopback and a private upstream together is denied loopback-address too,
# and a plain private name still works under the private carve-out.
# Carved out in egress_allow_loopback, they are allowed and reach their
# listener; the loopback carve-out alone does not open a private answer.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
lab_init
lab_need_bins
lab_up

OWN4=10.0.0.99

# lo_hits NAME: requests the listener NAME has served.
lo_hits()
{
	local f=$LAB_DIR/$1/access.log
	if [ -f "$f" ]; then
		grep -c ' /small ' "$f" || true
	else
		echo 0
	fi
}

lo_listening()
{
	lab_ns_b ss -Htln | grep -qF "$1:80 "
}

LO6=::1

# lo_listen NAME ADDR: a gate_httpd.py on ADDR:80 in the broker namespace,
# logging to LAB_DIR/NAME/access.log.
lo_listen()
{
	mkdir -p "$LAB_DIR/$1"
	lab_spawn "$1" "$LAB_NS_B" "$LAB_PYTHON" "$LAB_SRC_DIR/gate_httpd.py" \
	    "$2" 80 "$LAB_DIR/$1"
	local a=$2
	case $a in *:*) a="[$a]" ;; esac
	lab_poll 10 lo_listening "$a" || lab_fail "nothing listens on $a:80"
}

lab_ns_b ip -4 addr add "$OWN4/32" dev lo
lo_listen lo127 127.0.0.1
lo_listen lo6 "$LO6"
lo_listen loown "$OWN4"

lab_dns_set lo.weather.example=127.0.0.1 self.weather.example="$OWN4" \
    lo6.weather.example="$LO6" \
    lomix.weather.example="127.0.0.1,$LAB_PRIV4" \
    lan.weather.example="$LAB_PRIV4"
HOSTS="lo.weather.example, self.weather.example, lomix.weather.example"
HOSTS="$HOSTS, lan.weather.example, lo6.weather.example"

# The private carve-out over every name: loopback and own addresses stay
# refused.
{
	lab_config_base
	lab_entry weather weather "$HOSTS" "$HOSTS"
} | lab_config_install
lab_egressd_start weather
for name in lo.weather.example self.weather.example \
    lomix.weather.example lo6.weather.example; do
	lab_fetch weather "http://$name/small"
	lab_expect_fetch_error denied
	lab_expect_decision weather deny loopback-address "$name"
	lab_expect_hits "$LAB_PRIV4" 0
done
lab_expect_eq "requests on 127.0.0.1:80" 0 "$(lo_hits lo127)"
lab_expect_eq "requests on $OWN4:80" 0 "$(lo_hits loown)"
lab_expect_eq "requests on [$LO6]:80" 0 "$(lo_hits lo6)"
lab_fetch weather http://lan.weather.example/small
lab_expect_fetch_ok
lab_expect_decision weather allow - lan.weather.example
lab_expect_hits "$LAB_PRIV4" 1 /small
lab_egressd_stop

# The loopback carve-out: the names reach their listener; it does not
# stand for the private one.
LOOP="lo.weather.example, self.weather.example, lomix.weather.example"
LOOP="$LOOP, lo6.weather.example"
{
	lab_config_base
	lab_entry weather weather "$HOSTS" "lan.weather.example" http_client \
	    "$LOOP"
} | lab_config_install
lab_egressd_start weather
lab_fetch weather http://lo.weather.example/small
lab_expect_fetch_ok
lab_expect_eq "body from 127.0.0.1:80" gate "$(cat "$LAB_FETCH_OUT")"
lab_expect_decision weather allow - lo.weather.example
lab_expect_decision_addresses 127.0.0.1
lab_expect_eq "requests on 127.0.0.1:80" 1 "$(lo_hits lo127)"
lab_fetch weather http://self.weather.example/small
lab_expect_fetch_ok
lab_expect_decision weather allow - self.weather.example
lab_expect_decision_addresses "$OWN4"
lab_expect_eq "requests on $OWN4:80" 1 "$(lo_hits loown)"
lab_fetch weather http://lo6.weather.example/small
lab_expect_fetch_ok
lab_expect_decision weather allow - lo6.weather.example
lab_expect_decision_addresses "$LO6"
lab_expect_eq "requests on [$LO6]:80" 1 "$(lo_hits lo6)"
lab_fetch weather http://lomix.weather.example/small
lab_expect_fetch_error denied
lab_expect_decision weather deny private-address lomix.weather.example
lab_expect_hits "$LAB_PRIV4" 0
lab_expect_eq "requests on 127.0.0.1:80" 1 "$(lo_hits lo127)"

lab_finish
