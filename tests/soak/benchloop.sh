#!/bin/bash
# SPDX-License-Identifier: ISC
#
# One egress-bench loader of the soak run (scripts/soak), started inside
# the lab's broker namespace: rounds of `egress-bench -m shim -w 0 -n COUNT`
# against one instance socket (each round a fresh set of shim connections),
# until the stop file exists or MAX rounds ran. Each round is bounded by
# egress-bench's own -t 120 and a 180 s hard limit. Each round appends
# egress-bench's JSON line (requests, errors, ...) to OUT with the round's
# exit status added as "rc"; a round that printed nothing appends
# {"rc":RC,"requests":null}. PAUSE seconds between rounds keep the log
# volume bounded. Extra arguments go to egress-bench (e.g. --cacert).
#
# Usage: benchloop.sh BENCH SOCK URL CONC COUNT PAUSE MAX OUT STOP [ARGS...]
set -u
bench=$1 sock=$2 url=$3 conc=$4 count=$5 pause=$6 max=$7 out=$8 stop=$9
shift 9
r=0
while [ ! -e "$stop" ] && [ "$r" -lt "$max" ]; do
	rc=0
	line=$(timeout -k 5 180 "$bench" -m shim -s "$sock" -c "$conc" \
	    -n "$count" -w 0 -t 120 -l soak "$@" "$url" 2>>"$out.err") ||
	    rc=$?
	if [ -n "$line" ]; then
		printf '%s\n' "${line%\}},\"rc\":$rc}" >>"$out"
	else
		printf '{"rc":%d,"requests":null}\n' "$rc" >>"$out"
	fi
	r=$((r + 1))
	[ -e "$stop" ] || sleep "$pause"
done
