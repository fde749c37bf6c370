#!/bin/bash
# SPDX-License-Identifier: ISC
#
# The configuration editor of the soak run (scripts/soak): one edit a
# second until the stop file exists (at most 3600 edits). Every 10th
# second (5, 15, ...) it runs `egressctl plugin grant s02 HOST` or its
# revoke, alternately; every other second it adds TOGGLE to instance
# s01's egress_hosts line or removes it again, writing the edited file
# beside the configuration and renaming it over the original (atomic),
# under egressctl's own lock (flock on .BASENAME.lock), so the two kinds
# of edit never interleave. Appends "N KIND RC" per edit to LOG and
# egressctl's output to LOG.out.
#
# Usage: editor.sh EGRESSCTL CONF STOP LOG TOGGLE HOST
set -u
ctl=$1 conf=$2 stop=$3 log=$4 toggle=$5 host=$6
lock=$(dirname "$conf")/.$(basename "$conf").lock
tmp=$(dirname "$conf")/.$(basename "$conf").soak
i=0 granted=0

# toggle_s01: the edited file on stdout.
toggle_s01()
{
	awk -v t=", $toggle" '
	    /^\[/ { s = ($0 == "[plugins.entries.s01]") }
	    s && /^egress_hosts = / {
		k = index($0, t)
		if (k > 0)
			$0 = substr($0, 1, k - 1) substr($0, k + length(t))
		else
			$0 = $0 t
	    }
	    { print }' "$conf"
}

while [ ! -e "$stop" ] && [ "$i" -lt 3600 ]; do
	sleep 1
	i=$((i + 1))
	rc=0
	if [ $((i % 10)) = 5 ]; then
		if [ "$granted" = 0 ]; then
			kind=grant granted=1
		else
			kind=revoke granted=0
		fi
		"$ctl" -c "$conf" plugin "$kind" s02 "$host" >>"$log.out" 2>&1 ||
		    rc=$?
	else
		kind=toggle
		exec {fd}>>"$lock"
		if flock -w 10 "$fd"; then
			{ toggle_s01 >"$tmp" && mv -f "$tmp" "$conf"; } || rc=$?
		else
			rc=75
		fi
		exec {fd}>&-
	fi
	echo "$i $kind $rc" >>"$log"
done
