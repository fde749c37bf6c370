#!/bin/bash
# SPDX-License-Identifier: ISC
#
# One egress-fetch loader of the soak run (scripts/soak), started inside the
# lab's broker namespace. It walks a fixed plan of (instance, class, URL)
# lines round-robin, starting at an offset so that loaders do not move in
# step, and runs one egress-fetch per line (30 s hard limit each) until the
# stop file exists or MAX requests were sent. Every request writes exactly
# one result line "INSTANCE CLASS RC OUTCOME URL" to OUT, where CLASS is what
# the plan expects (allow-small, allow-large, deny, either) and OUTCOME is
# what happened: "ok" (a response whose body has the expected size),
# "short" (a response with a wrong body size), "denied" (exit 10 with the
# masked policy message), "denied-nomsg" (exit 10 without it), "error"
# (another documented guest error, exit 11..19), "hung" (killed by the
# time limit) or "other". Bounded: MAX requests at most.
#
# Usage: fetchloop.sh FETCH SOCKDIR PLAN OUT STOP OFFSET MAX
set -u
fetch=$1 sockdir=$2 plan=$3 out=$4 stop=$5 offset=$6 max=$7
denied_msg='egress policy: destination not permitted for this instance'
mapfile -t lines <"$plan"
n=${#lines[@]}
body=$out.body
err=$out.err
i=0
while [ ! -e "$stop" ] && [ "$i" -lt "$max" ]; do
	read -r inst class url <<<"${lines[$(((i + offset) % n))]}"
	rc=0
	timeout -k 5 30 "$fetch" --socket "$sockdir/$inst.sock" -o "$body" \
	    "$url" 2>"$err" || rc=$?
	case $rc in
	0)
		size=$(stat -c %s "$body" 2>/dev/null || echo -1)
		case $class in
		allow-large|either-large) want=1048576 ;;
		*) want=100 ;;
		esac
		if [ "$size" = "$want" ]; then
			outcome=ok
		else
			outcome=short
		fi
		;;
	10)
		if grep -qF "egress-fetch: denied: $denied_msg" "$err"; then
			outcome=denied
		else
			outcome=denied-nomsg
		fi
		;;
	1[1-9]) outcome=error ;;
	124|137) outcome=hung ;;
	*) outcome=other ;;
	esac
	printf '%s %s %s %s %s\n' "$inst" "$class" "$rc" "$outcome" "$url" \
	    >>"$out"
	if [ "$outcome" != ok ] && [ "$outcome" != denied ]; then
		# Keep the guest-visible message of anything unexpected.
		printf '%s %s: %s\n' "$inst" "$url" "$(head -c 300 "$err")" \
		    >>"$out.unexpected"
	fi
	i=$((i + 1))
done
rm -f "$body"
