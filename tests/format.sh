#!/usr/bin/env bash
# SPDX-License-Identifier: ISC
# Check that the C sources of a tree match its .clang-format. Usage:
# format.sh [ROOT] (default: the checkout holding this script). Runs
# `clang-format --dry-run --Werror` on every tracked .c and .h file of ROOT
# (every .c and .h outside build*/ and hidden folders when ROOT is not a git
# checkout), except the fixture trees of tests/module_graph/fixtures/ and
# the fuzz corpora of tests/fuzz/corpus/. Prints "format: FILE" for each
# file that differs and exits 1 if any does, 0 otherwise; 2 when it cannot
# run (no clang-format, no ROOT/.clang-format).
set -euo pipefail
export LC_ALL=C

top=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cf=${CLANG_FORMAT:-clang-format}

if ! command -v "$cf" >/dev/null 2>&1; then
	echo "format: $cf not found" >&2
	exit 2
fi
cd "$top"
if [[ ! -f .clang-format ]]; then
	echo "format: $top/.clang-format not found" >&2
	exit 2
fi

list() {
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git ls-files -z -- '*.c' '*.h'
	else
		find . \( -name 'build*' -o -name '.?*' \) -prune -o \
		    -type f \( -name '*.c' -o -name '*.h' \) -printf '%P\0'
	fi
}

bad=0
while IFS= read -r -d '' f; do
	case $f in
	tests/module_graph/fixtures/* | tests/fuzz/corpus/*)
		continue
		;;
	esac
	[[ -f $f ]] || continue		# deleted but not yet staged
	if ! "$cf" --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then
		echo "format: $f"
		bad=1
	fi
done < <(list)
exit "$bad"
