#!/bin/bash
# SPDX-License-Identifier: ISC
# scripts/prove must fail a harness whose only flaws are postconditions
# (which EVA's summary does not count), and say how many it flagged.
set -u
prove=$1 harness=$2
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT
if out=$("$prove" --one "$harness" "$logdir" 2>&1); then
	echo "not ok: scripts/prove passed a false postcondition: $out"
	exit 1
fi
case $out in
*"0 alarms"*"2 flagged"*) ;;
*)
	echo "not ok: scripts/prove failed for another reason: $out"
	exit 1
	;;
esac
echo "ok: $out" | head -n 1
