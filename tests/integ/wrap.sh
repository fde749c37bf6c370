# SPDX-License-Identifier: ISC
#
# The optional command every integration script puts in front of our own
# binaries (egressd, egress-fetch, egressctl, the probes), a bash snippet
# sourced by the scripts and by lab/lab.sh. EGRESS_WRAP holds that command
# as one string split on blanks (the meson test setup "valgrind" sets it
# to valgrind and its options); unset or empty means none. It is never put
# in front of third-party programs (nginx, dnsmasq, socat, ip, python),
# nor of binaries that install a seccomp filter (egress-sandbox, the
# fixture plugin): valgrind cannot run under one. A wrapped binary is
# slower, so the bounded waits of the scripts are multiplied by
# EGRESS_WAIT_SCALE (default 1, or 5 when EGRESS_WRAP is set). Sets
# EGRESS_WRAP_CMD (an array, empty when there is no wrapper) and
# EGRESS_WAIT_SCALE; egress_wait SECONDS prints SECONDS scaled.

read -r -a EGRESS_WRAP_CMD <<<"${EGRESS_WRAP:-}"
if [ "${#EGRESS_WRAP_CMD[@]}" -gt 0 ]; then
	EGRESS_WAIT_SCALE=${EGRESS_WAIT_SCALE:-5}
else
	EGRESS_WAIT_SCALE=${EGRESS_WAIT_SCALE:-1}
fi

export EGRESS_WAIT_SCALE
egress_wait() { printf '%s\n' "$(($1 * EGRESS_WAIT_SCALE))"; }
