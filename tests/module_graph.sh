#!/usr/bin/env bash
# SPDX-License-Identifier: ISC
# Enforce the module graph of docs/design.md (after tor's .may_include):
# every #include in a folder must match a pattern in that folder's
# .may_include (bash extglob patterns; a leading '!' forbids, first match
# wins), and the pure folders (policy/, proto/) must not call into
# the operating system. Prints every violation and fails on any.
set -euo pipefail
shopt -s extglob
top=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top"
bad=0

for dir in policy proto conf shim broker broker/net broker/ctl broker/sandbox include/egress; do
	rules=$dir/.may_include
	if [ ! -f "$rules" ]; then
		echo "module_graph: $rules is missing"
		bad=1
		continue
	fi
	mapfile -t pats < <(grep -v '^[[:space:]]*\(#\|$\)' "$rules")
	while IFS= read -r line; do
		file=${line%%:*}
		rest=${line#*:}
		lineno=${rest%%:*}
		inc=$(sed -E 's/^[^#]*#[[:space:]]*include[[:space:]]*([<"][^>"]+[>"]).*/\1/' <<<"${rest#*:}")
		ok=0
		for p in "${pats[@]}"; do
			# A leading '!' forbids; the first matching line decides.
			# shellcheck disable=SC2053
			if [[ $p == !* ]]; then
				if [[ $inc == ${p#!} ]]; then break; fi
			elif [[ $inc == $p ]]; then
				ok=1
				break
			fi
		done
		if [ $ok -eq 0 ]; then
			echo "module_graph: $file:$lineno: $inc is not allowed in $dir/ (see $rules)"
			bad=1
		fi
	done < <(grep -Hn '^[[:space:]]*#[[:space:]]*include' "$dir"/*.[ch] 2>/dev/null || true)
done

# Pure folders: no system calls, no process or file I/O.
calls='\b(socket|connect|bind|listen|accept4?|open|openat|read|write|close|send|recv|sendmsg|recvmsg|getaddrinfo|gethostbyname|fopen|stat|fstat|getifaddrs|ioctl|fork|exec[lv]p?e?|syscall|time|clock_gettime|getenv|malloc_trim|printf|fprintf|puts|exit|abort)[[:space:]]*\('
for dir in policy proto; do
	while IFS= read -r hit; do
		echo "module_graph: $hit: pure module $dir/ calls the system"
		bad=1
	done < <(grep -HnE "$calls" "$dir"/*.c 2>/dev/null |
	    grep -vE ':[0-9]+:[[:space:]]*(\*|/\*|//)' || true)
done

# Nothing outside broker/ (and tests/) includes broker/.
while IFS= read -r hit; do
	echo "module_graph: $hit: only broker/ may include broker/"
	bad=1
done < <(grep -HnE '#[[:space:]]*include[[:space:]]*"broker/' policy/*.[ch] proto/*.[ch] conf/*.[ch] shim/*.[ch] include/egress/*.h 2>/dev/null || true)

if [ $bad -ne 0 ]; then
	exit 1
fi
echo "module_graph: every include and call respects the module graph"
