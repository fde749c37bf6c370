#!/usr/bin/env bash
# SPDX-License-Identifier: ISC
# The documentation matches the programs: the usage lines of
# docs/egressctl.md and the SYNOPSIS of docs/egressctl.8 are exactly the
# lines `egressctl --help` prints, in order; every `egressctl COMMAND
# --help` line is among them; the egress-fetch synopsis in docs/shim.md
# and docs/egress-fetch.1 is what `egress-fetch --help` prints, and the
# same for egress-connect (built beside egress-fetch); and every
# sample output in docs/operators.md is what scripts/gen-operators-doc
# produces with this egressctl.
set -uo pipefail
. "$(dirname "$0")/wrap.sh"
ctl=${1:?usage: ctl_docs.sh EGRESSCTL EGRESS-FETCH SRCDIR}
fetch=${2:?usage: ctl_docs.sh EGRESSCTL EGRESS-FETCH SRCDIR}
src=${3:?usage: ctl_docs.sh EGRESSCTL EGRESS-FETCH SRCDIR}
work=$(mktemp -d /tmp/ctl-docs.XXXXXX)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# Usage lines: "usage: egressctl ..." and "       egressctl ...", with
# wrapped continuation lines joined and blanks collapsed.
usage_lines() {
	awk '
	    /^(usage:)? +egressctl / { if (l != "") print l; sub(/^(usage:)? +/, ""); l = $0; next }
	    /^ +[^ ]/ && l != "" { sub(/^ +/, " "); l = l $0; next }
	    { if (l != "") print l; l = "" }
	    END { if (l != "") print l }' | tr -s ' '
}

"${EGRESS_WRAP_CMD[@]}" "$ctl" --help | usage_lines >"$work/help"
[ -s "$work/help" ] && ok || bad "egressctl --help printed no usage line"
grep '^    egressctl ' "$src/docs/egressctl.md" | sed 's/^    //' | tr -s ' ' >"$work/md"
diff -u "$work/md" "$work/help" >"$work/d1" && ok ||
    { bad "docs/egressctl.md usage lines differ from egressctl --help"; sed 's/^/  | /' "$work/d1"; }
sed -n '/^\.SH SYNOPSIS/,/^\.SH /p' "$src/docs/egressctl.8" | grep '^\\fBegressctl' |
    sed -e 's/\\fB//g' -e 's/\\fR//g' -e 's/\\-/-/g' -e 's/\\\\/\\/g' | tr -s ' ' >"$work/man"
diff -u "$work/man" "$work/help" >"$work/d2" && ok ||
    { bad "docs/egressctl.8 SYNOPSIS differs from egressctl --help"; sed 's/^/  | /' "$work/d2"; }
for c in check manifest plugin trust diagnose status instances instance grants metrics attach reload; do
	"${EGRESS_WRAP_CMD[@]}" "$ctl" "$c" --help >"$work/c.out" 2>"$work/c.err"
	rc=$?
	[ "$rc" = 0 ] && [ ! -s "$work/c.err" ] && ok || bad "egressctl $c --help: exit $rc, stderr $(cat "$work/c.err")"
	while IFS= read -r l; do
		grep -qxF -- "$l" "$work/help" && ok || bad "egressctl $c --help line not in egressctl --help: $l"
	done < <(usage_lines <"$work/c.out")
done

# egress-fetch: --help's first lines, docs/shim.md's block, the man page.
"${EGRESS_WRAP_CMD[@]}" "$fetch" --help | sed -n '1,/--version$/p' |
    sed -e 's/^usage: //' -e 's/^       //' | tr -s ' ' >"$work/fhelp"
[ -s "$work/fhelp" ] && ok || bad "egress-fetch --help printed nothing on stdout"
awk '/^## egress-fetch$/ { s = 1; next } s == 1 && /^```$/ { s = 2; next }
    s == 2 && /^```$/ { exit } s == 2 { print }' "$src/docs/shim.md" | tr -s ' ' >"$work/fmd"
diff -u "$work/fmd" "$work/fhelp" >"$work/d3" && ok ||
    { bad "docs/shim.md egress-fetch synopsis differs from egress-fetch --help"; sed 's/^/  | /' "$work/d3"; }
sed -n '/^\.SH SYNOPSIS/,/^\.SH /p' "$src/docs/egress-fetch.1" | sed -n '/^\.nf/,/^\.fi/p' | sed '1d;$d' |
    sed -e 's/\\fB//g' -e 's/\\fR//g' -e 's/\\-/-/g' | tr -s ' ' >"$work/fman"
diff -u "$work/fman" "$work/fhelp" >"$work/d4" && ok ||
    { bad "docs/egress-fetch.1 SYNOPSIS differs from egress-fetch --help"; sed 's/^/  | /' "$work/d4"; }

# egress-connect, built beside egress-fetch: the same three agree.
connect=$(dirname "$fetch")/egress-connect
"${EGRESS_WRAP_CMD[@]}" "$connect" --help | sed -n '1,/--version$/p' |
    sed -e 's/^usage: //' -e 's/^       //' | tr -s ' ' >"$work/chelp"
[ -s "$work/chelp" ] && ok || bad "egress-connect --help printed nothing on stdout"
awk '/^## egress-connect$/ { s = 1; next } s == 1 && /^```$/ { s = 2; next }
    s == 2 && /^```$/ { exit } s == 2 { print }' "$src/docs/shim.md" | tr -s ' ' >"$work/cmd"
diff -u "$work/cmd" "$work/chelp" >"$work/d6" && ok ||
    { bad "docs/shim.md egress-connect synopsis differs from egress-connect --help"; sed 's/^/  | /' "$work/d6"; }
sed -n '/^\.SH SYNOPSIS/,/^\.SH /p' "$src/docs/egress-connect.1" | sed -n '/^\.nf/,/^\.fi/p' | sed '1d;$d' |
    sed -e 's/\\fB//g' -e 's/\\fR//g' -e 's/\\-/-/g' | tr -s ' ' >"$work/cman"
diff -u "$work/cman" "$work/chelp" >"$work/d7" && ok ||
    { bad "docs/egress-connect.1 SYNOPSIS differs from egress-connect --help"; sed 's/^/  | /' "$work/d7"; }

# Man pages the package installs (broker/meson.build), for lintian's
# no-manual-page.
for m in egressctl.8 egress-fetch.1 egress-connect.1; do
	[ -s "$src/docs/$m" ] && ok || bad "docs/$m is missing"
	if command -v man >/dev/null; then
		w=$(MANWIDTH=80 man --warnings -l "$src/docs/$m" 2>&1 >/dev/null)
		[ -z "$w" ] && ok || bad "docs/$m: $w"
	fi
done

# docs/operators.md: every sample is the program's output.
if "$src/scripts/gen-operators-doc" "$ctl" --check >"$work/d5" 2>&1; then
	ok
else
	bad "docs/operators.md differs from scripts/gen-operators-doc's output"
	sed 's/^/  | /' "$work/d5"
fi

echo "ctl_docs.sh: $pass passed, $fail failed"
[ "$fail" = 0 ]
