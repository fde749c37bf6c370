#!/usr/bin/env bash
# SPDX-License-Identifier: ISC
# Enforce the module graph of docs/design.md on a source tree (after tor's
# .may_include and check-best-practices). Usage: module_graph.sh [ROOT]
# (default: the checkout holding this script). Prints one line
# "module_graph: FILE:LINE: what is wrong" per violation and exits 1 on any.
# "module_graph.sh ROOT --oversized" checks nothing and prints, in the
# ratchet file's format, every file and function of ROOT over the limits.
#
# Source folders are all folders holding .c or .h files, except build*/,
# hidden folders, subprojects/ and tests/: the tests use everything, and
# the fixture trees under tests/module_graph/ are checked only when the
# fixture driver names one as ROOT.
#
# 1. Every source folder has a .may_include: one bash extglob pattern a
#    line, matched against the include with its quotes or brackets
#    ("broker/net/+([a-z0-9_]).h", <event2/+([a-z0-9_]).h>); a leading '!'
#    forbids; the first matching line decides; no match forbids. In [[ == ]]
#    a '*' also matches '/': single-level rules use +([a-z0-9_]).
#    Whatever the rules say, nothing outside broker/ includes broker/.
# 2. No include cycle, neither between files nor between folders. A quoted
#    include resolves against ROOT, then the including file's folder; an
#    angle include against ROOT/include/. coreutils tsort finds the loops.
# 3. The files of tests/module_graph/pure.txt (folders stand for their .c
#    and .h files) call nothing of the operating system and include only
#    C library headers, <egress/error.h> and other pure files. The headers
#    of tests/module_graph/no_alloc.txt promise no allocation: neither they
#    nor the files listed after them (default: the .c of the same name)
#    call malloc, calloc, realloc, strdup, free and the like.
# 4. Size ratchet: a file over FILE_MAX lines, or a function over FUNC_MAX
#    lines (from its column-0 '{' to its column-0 '}', OpenBSD style),
#    fails unless tests/module_graph/ratchet.txt lists it ("path N" or
#    "path:function N") with a number it does not exceed. The numbers only
#    go down: growth past a listed number fails; an item that shrank, no
#    longer exceeds the limit or no longer exists only prints a note to
#    lower or drop its line, so shortening code never breaks the build.
set -euo pipefail
shopt -s extglob
export LC_ALL=C

FILE_MAX=1500
FUNC_MAX=120

top=${1:-$(cd "$(dirname "$0")/.." && pwd)}
mode=${2:-check}
cd "$top"
cfg=tests/module_graph
bad=0

fail() {
	echo "module_graph: $*"
	bad=1
}

note() {
	echo "module_graph: note: $*"
}

# Read a list file: drop comments and blank lines, keep "LINENO:text".
list_lines() {
	[ -f "$1" ] || return 0
	grep -n -v '^[[:space:]]*\(#\|$\)' "$1" || true
}

# Print C code with comments, string and character literals blanked,
# line for line, each line prefixed "FILE:LINE:".
strip_c() {
	awk '
	FNR == 1 { incom = 0 }
	{
		out = ""; n = length($0); i = 1
		while (i <= n) {
			c = substr($0, i, 1); d = substr($0, i, 2)
			if (incom) {
				if (d == "*/") { incom = 0; i += 2 } else i++
				continue
			}
			if (d == "/*") { incom = 1; i += 2; out = out " "; continue }
			if (d == "//") break
			if (c == "\"" || c == "\047") {
				q = c; i++
				while (i <= n && substr($0, i, 1) != q) {
					if (substr($0, i, 1) == "\\") i++
					i++
				}
				i++; out = out q q; continue
			}
			out = out c; i++
		}
		print FILENAME ":" FNR ":" out
	}' "$@"
}

# One line per measured item: "KEY LINES FILE:LINE", KEY being the path
# or path:function.
measure_sizes() {
	awk '
	function flush() {
		if (FILENAME_PREV != "" && nlines > 0)
			print FILENAME_PREV, nlines, FILENAME_PREV ":1"
	}
	FNR == 1 { flush(); FILENAME_PREV = FILENAME; cand = ""; start = 0 }
	{ nlines = FNR }
	/^[A-Za-z_].*\(/ {
		c = $0; sub(/\(.*/, "", c)
		k = split(c, w, /[^A-Za-z0-9_]+/)
		cand = w[k]
		if (cand == "" && k > 1)
			cand = w[k - 1]
	}
	/^\{/ { start = FNR; fname = cand }
	/^\}/ && start {
		print FILENAME ":" fname, FNR - start + 1, FILENAME ":" start
		start = 0
	}
	END { flush() }' "$@"
}

# ---- Source folders ------------------------------------------------------

mapfile -t srcs < <(find . \( -name '.?*' -o -path './build*' \
    -o -path ./tests -o -path ./subprojects \) -prune -o \
    -type f -name '*.[ch]' -print | sed 's|^\./||' | sort)
if [ ${#srcs[@]} -eq 0 ]; then
	fail "$top:0: no C sources found"
	exit 1
fi

if [ "$mode" = --oversized ]; then
	while read -r key len where; do
		max=$FILE_MAX
		[[ $key != *:* ]] || max=$FUNC_MAX
		[ "$len" -le "$max" ] || printf '%s\t%s\n' "$key" "$len"
	done < <(measure_sizes "${srcs[@]}")
	exit 0
fi

declare -A isfile=() rules=() ruleslin=() hasrules=()
for f in "${srcs[@]}"; do
	isfile[$f]=1
done
mapfile -t dirs < <(for f in "${srcs[@]}"; do dirname "$f"; done | sort -u)
for d in "${dirs[@]}"; do
	r=$d/.may_include
	if [ ! -f "$r" ]; then
		fail "$r:0: missing: $d/ holds C sources, so it needs rules"
		continue
	fi
	hasrules[$d]=1
	# Patterns and their line numbers, one per line.
	rules[$d]=$(list_lines "$r" | sed 's/^[0-9]*://; s/[[:space:]]*$//')
	ruleslin[$d]=$(list_lines "$r" | cut -d: -f1)
done

# ---- Includes: rules, broker/ from outside, graph edges -------------------

fedges=()
gedges=()
declare -A fwhere=() gwhere=()
while IFS= read -r line; do
	file=${line%%:*}
	rest=${line#*:}
	lineno=${rest%%:*}
	rest=${rest#*:}
	rest=${rest#*include}
	rest=${rest##+([[:space:]])}
	case $rest in
	\"*) inc=${rest:1}; inc=\"${inc%%\"*}\" ;;
	\<*) inc=${rest%%>*}\> ;;
	*) inc=${rest%%+([[:space:]])} ;;
	esac
	dir=.
	[[ $file != */* ]] || dir=${file%/*}

	if [ -n "${hasrules[$dir]:-}" ]; then
		verdict=none
		mapfile -t pats <<<"${rules[$dir]}"
		mapfile -t lins <<<"${ruleslin[$dir]}"
		for i in "${!pats[@]}"; do
			p=${pats[$i]}
			[ -n "$p" ] || continue
			# shellcheck disable=SC2053
			if [[ $p == !* ]]; then
				if [[ $inc == ${p#!} ]]; then
					verdict=${lins[$i]}
					break
				fi
			elif [[ $inc == $p ]]; then
				verdict=ok
				break
			fi
		done
		case $verdict in
		ok) ;;
		none) fail "$file:$lineno: $inc is not allowed in $dir/" \
		    "(no rule in $dir/.may_include matches)" ;;
		*) fail "$file:$lineno: $inc is forbidden in $dir/" \
		    "($dir/.may_include:$verdict)" ;;
		esac
	fi

	# Resolve to a file of the tree.
	target=
	name=${inc:1:${#inc}-2}
	case $inc in
	\"*)
		if [ -f "$name" ]; then
			target=$name
		elif [ -f "$dir/$name" ]; then
			target=$(realpath -m --relative-to=. "$dir/$name")
		fi ;;
	\<*)
		if [ -f "include/$name" ]; then
			target=include/$name
		fi ;;
	esac

	if [[ $file != broker/* ]] &&
	    [[ $inc == \"broker/* || $target == broker/* ]]; then
		fail "$file:$lineno: $inc: only broker/ may include broker/"
	fi

	[ -n "$target" ] || continue
	fedges+=("$file $target")
	[ -n "${fwhere[$file $target]:-}" ] ||
	    fwhere[$file $target]="$file:$lineno $target"
	tdir=.
	[[ $target != */* ]] || tdir=${target%/*}
	if [ "$tdir" != "$dir" ]; then
		gedges+=("$dir/ $tdir/")
		[ -n "${gwhere[$dir/ $tdir/]:-}" ] ||
		    gwhere[$dir/ $tdir/]="$file:$lineno $target"
	fi
done < <(grep -Hn '^[[:space:]]*#[[:space:]]*include' "${srcs[@]}" || true)

# ---- Cycles ----------------------------------------------------------------

# check_cycles KIND WHEREVAR EDGE...: feed the edges to tsort and report
# every include that is part of a loop it prints.
check_cycles() {
	local kind=$1
	local -n where=$2
	shift 2
	local loop=() l m i a b w path
	report() {
		[ ${#loop[@]} -gt 0 ] || return 0
		path=$(printf '%s -> ' "${loop[@]}")${loop[0]}
		for i in "${!loop[@]}"; do
			a=${loop[$i]}
			b=${loop[$(((i + 1) % ${#loop[@]}))]}
			w=${where[$a $b]:-$a:0 $b}
			fail "${w%% *}: includes ${w#* }, part of the $kind" \
			    "cycle $path"
		done
		loop=()
	}
	while IFS= read -r l; do
		m=${l#tsort: }
		if [[ $m == *': input contains a loop:' ]]; then
			report
		elif [ "$m" != "$l" ]; then
			loop+=("$m")
		fi
	done < <(printf '%s\n' "$@" | tsort 2>&1 >/dev/null || true)
	report
}
[ ${#fedges[@]} -eq 0 ] || check_cycles file fwhere "${fedges[@]}"
[ ${#gedges[@]} -eq 0 ] || check_cycles folder gwhere "${gedges[@]}"

# ---- Pure files and no-alloc headers ---------------------------------------

pure=()
declare -A ispure=()
while IFS= read -r entry; do
	n=${entry%%:*}
	p=${entry#*:}
	p=${p%%+([[:space:]])}
	if [ -d "$p" ]; then
		for f in "${p%/}"/*.[ch]; do
			[ -f "$f" ] && pure+=("$f")
		done
	elif [ -n "${isfile[$p]:-}" ]; then
		pure+=("$p")
	else
		fail "$cfg/pure.txt:$n: $p: no such source file or folder"
	fi
done < <(list_lines "$cfg/pure.txt")
for f in "${pure[@]}"; do
	ispure[$f]=1
done

if [ ${#pure[@]} -gt 0 ]; then
	# Anything that asks the kernel, the environment, the clock, the
	# terminal or the file system, or ends the process.
	calls='socket|socketpair|connect|bind|listen|accept4?|shutdown|open|openat'
	calls+='|creat|read|readv|pread|write|writev|pwrite|close|send|sendto'
	calls+='|sendmsg|recv|recvfrom|recvmsg|poll|ppoll|select|epoll_[a-z]+'
	calls+='|ioctl|fcntl|mmap|munmap|getaddrinfo|getnameinfo|gethostbyname'
	calls+='|getifaddrs|fopen|fdopen|fread|fwrite|fgets|fputs|fclose|fflush'
	calls+='|opendir|readdir|stat|fstat|lstat|access|unlink|rename|mkdir'
	calls+='|fork|exec[lv]p?e?|system|popen|pipe2?|dup[23]?|kill|signal'
	calls+='|sigaction|raise|getpid|getuid|syscall|time|clock_gettime'
	calls+='|gettimeofday|localtime|sleep|usleep|nanosleep|getrandom|getenv'
	calls+='|setenv|printf|fprintf|vprintf|vfprintf|puts|putchar|perror'
	calls+='|exit|_exit|abort|malloc_trim'
	while IFS= read -r hit; do
		f=${hit%%:*}
		r=${hit#*:}
		c=$(grep -oE "(^|[^[:alnum:]_.>])($calls)[[:space:]]*\(" \
		    <<<"${r#*:}" | head -1 | sed -E 's/^[^[:alpha:]_]//; s/[[:space:](]+$//')
		fail "$f:${r%%:*}: pure file calls $c()"
	done < <(strip_c "${pure[@]}" |
	    grep -E "^[^:]*:[0-9]+:(.*[^[:alnum:]_.>])?($calls)[[:space:]]*\(" || true)

	libc='<@(assert|ctype|errno|inttypes|limits|stdarg|stdbool|stddef'
	libc+='|stdint|stdio|stdlib|string|strings).h>'
	netc='<@(arpa/inet|netinet/in|sys/socket|sys/types).h>'
	while IFS= read -r line; do
		file=${line%%:*}
		rest=${line#*:}
		lineno=${rest%%:*}
		inc=$(sed -E 's/^[^#]*#[[:space:]]*include[[:space:]]*//; s/[[:space:]]+$//' <<<"${rest#*:}")
		# shellcheck disable=SC2053
		[[ $inc == $libc || $inc == $netc || $inc == '<egress/error.h>' ]] &&
		    continue
		name=${inc:1:${#inc}-2}
		[[ $inc == \"* && -n ${ispure[$name]:-} ]] && continue
		fail "$file:$lineno: pure file includes $inc (neither the C" \
		    "library nor a pure file)"
	done < <(grep -Hn '^[[:space:]]*#[[:space:]]*include' "${pure[@]}" || true)
fi

alloc='malloc|calloc|realloc|reallocarray|aligned_alloc|posix_memalign'
alloc+='|strdup|strndup|asprintf|vasprintf|free'
while IFS= read -r entry; do
	n=${entry%%:*}
	read -r -a words <<<"${entry#*:}"
	h=${words[0]}
	if [ -z "${isfile[$h]:-}" ]; then
		fail "$cfg/no_alloc.txt:$n: $h: no such header"
		continue
	fi
	files=("$h")
	if [ ${#words[@]} -gt 1 ]; then
		for g in "${words[@]:1}"; do
			for f in $g; do
				[ -f "$f" ] && files+=("$f")
			done
		done
	elif [ -f "${h%.h}.c" ]; then
		files+=("${h%.h}.c")
	fi
	while IFS= read -r hit; do
		f=${hit%%:*}
		r=${hit#*:}
		c=$(grep -oE "(^|[^[:alnum:]_.>])($alloc)[[:space:]]*\(" \
		    <<<"${r#*:}" | head -1 | sed -E 's/^[^[:alpha:]_]//; s/[[:space:](]+$//')
		fail "$f:${r%%:*}: calls $c() but $h promises no allocation" \
		    "($cfg/no_alloc.txt:$n)"
	done < <(strip_c "${files[@]}" |
	    grep -E "^[^:]*:[0-9]+:(.*[^[:alnum:]_.>])?($alloc)[[:space:]]*\(" || true)
done < <(list_lines "$cfg/no_alloc.txt")

# ---- Size ratchet ------------------------------------------------------------

sizes=$(measure_sizes "${srcs[@]}")
declare -A rnum=() rlin=() seen=()
while IFS= read -r entry; do
	n=${entry%%:*}
	read -r key num extra <<<"${entry#*:}"
	if [[ -z $key || ! $num =~ ^[0-9]+$ || -n ${extra:-} ]]; then
		fail "$cfg/ratchet.txt:$n: expected \"path[:function] lines\""
		continue
	fi
	rnum[$key]=$num
	rlin[$key]=$n
done < <(list_lines "$cfg/ratchet.txt")

while read -r key len where; do
	if [[ $key == *:* ]]; then
		what="function ${key#*:}()"
		max=$FUNC_MAX
	else
		what="file"
		max=$FILE_MAX
	fi
	num=${rnum[$key]:-}
	[ -n "$num" ] && seen[$key]=1
	if [ "$len" -le "$max" ]; then
		[ -z "$num" ] || note "$cfg/ratchet.txt:${rlin[$key]}: $key is" \
		    "down to $len lines, within the limit of $max: drop its line"
	elif [ -z "$num" ]; then
		fail "$where: $what has $len lines, over the limit of $max:" \
		    "split it (or, for old code, list it in $cfg/ratchet.txt)"
	elif [ "$len" -gt "$num" ]; then
		fail "$where: $what grew to $len lines, over its ratchet of" \
		    "$num ($cfg/ratchet.txt:${rlin[$key]}); the numbers only go down"
	elif [ "$len" -lt "$num" ]; then
		note "$cfg/ratchet.txt:${rlin[$key]}: $key is down to $len" \
		    "lines: lower its number from $num to $len"
	fi
done <<<"$sizes"
for key in "${!rnum[@]}"; do
	[ -n "${seen[$key]:-}" ] ||
	    note "$cfg/ratchet.txt:${rlin[$key]}: $key no longer exists: drop its line"
done

if [ $bad -ne 0 ]; then
	exit 1
fi
echo "module_graph: ${#srcs[@]} files in ${#dirs[@]} folders respect" \
    "the module graph: rules, no cycle, pure files, sizes"
