#!/bin/bash
# SPDX-License-Identifier: ISC
#
# vg-run.sh COMMAND...: the exe_wrapper of meson's "valgrind" test setup
# (`meson test --setup valgrind --suite integ`). With EGRESS_WRAP unset it
# only runs COMMAND. With EGRESS_WRAP set (the setup sets it to valgrind
# and its options, see wrap.sh), it gives every wrapped process a log file
# of its own (--log-file=DIR/PID.vg, appended to EGRESS_WRAP), runs
# COMMAND (an integration script), waits until every wrapped process has
# exited, and scans the logs. The test fails when any log shows a
# memcheck error or a leak ("ERROR SUMMARY: N" with N > 0, which
# --errors-for-leak-kinds makes count definite, indirect and possible
# leaks), an error report in a log cut short (a process killed by SIGKILL
# has no summary), a fatal signal, or when a wrapped process outlives the
# script by more than 60 s. The script's own status is kept: a failing
# script fails, 77 (skip) stays a skip when no error was found. The
# offending logs are printed whole; EGRESS_VG_KEEP=1 keeps the folder.
set -uo pipefail

[ -n "${EGRESS_WRAP:-}" ] || exec "$@"

dir=$(mktemp -d "${TMPDIR:-/tmp}/egress-vg.XXXXXX") || exit 1
# Wrapped processes may run as another uid (caps_broker.sh, setpriv).
chmod 1777 "$dir"
vg__cleanup()
{
	if [ "${EGRESS_VG_KEEP:-0}" = 1 ]; then
		echo "valgrind: logs kept in $dir"
	else
		rm -rf -- "$dir"
	fi
}
trap vg__cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
export EGRESS_WRAP="$EGRESS_WRAP --log-file=$dir/%p.vg"

rc=0
"$@" || rc=$?

# vg__alive PID: the process still runs (a zombie counts as gone).
vg__alive()
{
	local st
	st=$(sed -e 's/^.*) //' -e 's/ .*//' "/proc/$1/stat" 2>/dev/null) ||
	    return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# Every wrapped process writes its leak report when it exits: wait for
# each (up to 60 s in all) before reading its log.
deadline=$((SECONDS + 60))
bad=0 n=0 cut=0
shopt -s nullglob
logs=("$dir"/*.vg)
for f in "${logs[@]}"; do
	pid=${f##*/}
	pid=${pid%.vg}
	while vg__alive "$pid" && [ "$SECONDS" -lt "$deadline" ]; do
		sleep 0.1
	done
	if vg__alive "$pid"; then
		echo "valgrind: process $pid still runs after the test:" \
		    "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
		bad=$((bad + 1))
	fi
done

# The error kinds memcheck reports (valgrind manual, section 4.2), and
# death by a signal that means a crash.
errs='^==[0-9]+== (Invalid (read|write|free)|Mismatched free|Conditional jump'
errs+='|Use of uninitialised|Syscall param|Source and destination overlap'
errs+='|Argument .* of function .* has a fishy|[^ ].* uninitialised value'
errs+='|Process terminating with default action of signal (4|6|7|8|11) '
errs+='|.* (definitely|indirectly|possibly) lost in loss record)'
for f in "${logs[@]}"; do
	n=$((n + 1))
	if grep -Eq '^==[0-9]+== ERROR SUMMARY: [1-9]' "$f" ||
	    grep -Eq "$errs" "$f"; then
		bad=$((bad + 1))
		echo "======== valgrind found errors: ${f##*/}"
		cat "$f"
	elif ! grep -Eq '^==[0-9]+== ERROR SUMMARY: 0 errors' "$f"; then
		cut=$((cut + 1))	# killed (SIGKILL): no leak check ran
	fi
done
echo "valgrind: $n wrapped processes, $bad with errors or leaks," \
    "$cut killed before their leak check"
if [ "$bad" -gt 0 ]; then
	echo "FAIL: valgrind reported errors or leaks (see above)"
	[ "$rc" = 0 ] || [ "$rc" = 77 ] && rc=1
fi
exit "$rc"
