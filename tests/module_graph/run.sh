#!/usr/bin/env bash
# SPDX-License-Identifier: ISC
# Run tests/module_graph.sh against fixture trees and check that each rule
# catches a tree that breaks it. Usage: run.sh [CHECKER].
#
# Every case starts from a copy of fixtures/good/ (a miniature of the real
# layout), lays fixtures/CASE/ over it when that folder exists, and may
# generate files (big ones are written here rather than committed). A
# fixture folder without its own .may_include gets the real tree's one for
# the same path, so the cases test the real rules, not copies of them.
# Each case names the exit status it expects and a pattern (grep -E) that
# must appear in the checker's output.
# The gen_ functions are called by name (gen_CASE).
# shellcheck disable=SC2317
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
checker=${1:-$root/tests/module_graph.sh}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# gen_func FILE NAME LINES: a function whose body, from '{' to '}', is
# LINES lines long.
gen_func() {
	mkdir -p "$(dirname "$1")"
	{
		printf '/* SPDX-License-Identifier: ISC */\nint\n%s(void)\n{\n' "$2"
		printf '\tint x = 0;\n'
		for ((i = 0; i < $3 - 4; i++)); do
			printf '\tx++;\n'
		done
		printf '\treturn x;\n}\n'
	} >"$1"
}

# gen_file FILE LINES: a file of LINES lines, no function over the limit.
gen_file() {
	mkdir -p "$(dirname "$1")"
	{
		printf '/* SPDX-License-Identifier: ISC */\n'
		for ((i = 1; i < $2; i++)); do
			printf 'int v%d;\n' "$i"
		done
	} >"$1"
}

gen_oversized_function() { gen_func "$1/broker/big.c" big 130; }
gen_oversized_file() { gen_file "$1/broker/net/big.c" 1600; }
gen_ratchet_growth() { gen_func "$1/broker/big.c" big 130; }
gen_ratchet_shrink() { gen_func "$1/broker/big.c" big 130; }
gen_limits_exact() {
	gen_func "$1/broker/big.c" big 120
	gen_file "$1/broker/net/big.c" 1500
}

# case  expected-status  pattern
cases=(
	'good 0 respect the module graph'
	'limits_exact 0 respect the module graph'
	'missing_rules 1 extra/\.may_include:0: missing'
	'daemon_includes_ctl 1 broker/bad\.c:3: "broker/ctl/ctl\.h" is forbidden in broker/'
	'daemon_includes_sandbox 1 broker/bad\.c:3: "broker/sandbox/sandbox\.h" is forbidden in broker/'
	'net_includes_daemon 1 broker/net/bad\.c:3: "broker/log\.h" is forbidden in broker/net/'
	'net_includes_conf 1 broker/net/bad\.c:3: "conf/conf\.h" is forbidden in broker/net/'
	'ctl_includes_daemon 1 broker/ctl/bad\.c:3: "broker/log\.h" is forbidden in broker/ctl/'
	'sandbox_includes_policy 1 broker/sandbox/bad\.c:3: "policy/policy\.h" is not allowed in broker/sandbox/'
	'nested_include 1 broker/bad\.c:3: "broker/deep/log\.h" is not allowed in broker/'
	'outside_includes_broker 1 conf/bad\.c:3: "broker/net/dns\.h": only broker/ may include broker/'
	'outside_rules_allow_broker 1 tools/tool\.c:2: "broker/log\.h": only broker/ may include broker/'
	'file_cycle 1 policy/[ab]\.h:4: includes policy/[ab]\.h, part of the file cycle'
	'folder_cycle 1 (alpha/a\.c:3: includes beta/b|beta/b\.c:2: includes alpha/a)\.h, part of the folder cycle'
	'syscall_in_pure 1 policy/bad\.c:8: pure file calls open\(\)'
	'pure_includes_event 1 broker/net/head\.c:5: pure file includes <event2/buffer\.h>'
	'pure_missing_entry 1 tests/module_graph/pure\.txt:3: broker/net/gone\.c: no such'
	'malloc_no_alloc 1 proto/bad\.c:9: calls calloc\(\) but proto/proto\.h promises no allocation'
	'oversized_function 1 broker/big\.c:4: function big\(\) has 130 lines, over the limit of 120'
	'oversized_file 1 broker/net/big\.c:1: file has 1600 lines, over the limit of 1500'
	'ratchet_growth 1 broker/big\.c:4: function big\(\) grew to 130 lines, over its ratchet of 125'
	'ratchet_shrink 0 note: .*broker/big\.c:big is down to 130 lines: lower its number from 140'
)

failed=0
for c in "${cases[@]}"; do
	read -r name want pattern <<<"$c"
	tree=$tmp/$name
	cp -R "$here/fixtures/good" "$tree"
	if [ -d "$here/fixtures/$name" ]; then
		cp -R "$here/fixtures/$name/." "$tree"
	fi
	if declare -F "gen_$name" >/dev/null; then
		"gen_$name" "$tree"
	fi
	while IFS= read -r d; do
		d=${d#"$tree"/}
		if [ ! -f "$tree/$d/.may_include" ] &&
		    [ -f "$root/$d/.may_include" ]; then
			cp "$root/$d/.may_include" "$tree/$d/.may_include"
		fi
	done < <(find "$tree" -mindepth 1 -type d)

	status=0
	out=$(bash "$checker" "$tree" 2>&1) || status=$?
	if [ "$status" -ne "$want" ]; then
		echo "FAIL $name: exit status $status, expected $want"
		failed=1
	elif ! grep -qE -- "$pattern" <<<"$out"; then
		echo "FAIL $name: no line matches: $pattern"
		failed=1
	else
		echo "ok   $name"
		continue
	fi
	sed 's/^/	/' <<<"$out"
done
exit $failed
