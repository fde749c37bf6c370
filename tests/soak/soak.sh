# SPDX-License-Identifier: ISC
#
# Helpers of the soak run (scripts/soak), a bash library sourced after
# tests/integ/lab/lab.sh: the 16-instance configuration, the request plan
# of the egress-fetch loaders, the configuration editor (one edit a
# second: a grant toggled on one instance by an atomic rename, and now and
# then `egressctl plugin grant/revoke` on another), the 10-second sampler
# of the broker's descriptors, RSS, leases and decisions so far, and the
# pass/fail bookkeeping behind the final "soak: N passed, M failed" line.
# Everything it starts is a lab_spawn'ed process, stopped by pid.

SOAK_SRC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SOAK_NINST=16
SOAK_PASSED=0
SOAK_FAILED=0
SOAK_FAILURES=()

# The names the DNS server answers (dnsmasq in the broker namespace).
SOAK_API=api.weather.example		# granted to all: allowed
SOAK_TOGGLE=toggle.weather.example	# granted to s01 every other second
SOAK_CTL=ctl.weather.example		# egressctl grant/revoke on s02
SOAK_META=meta.weather.example		# granted, resolves to metadata
SOAK_PRIV=priv.weather.example		# granted, resolves to 10.0.0.7
SOAK_OTHER=other.weather.example	# declared, never granted

soak_pass()
{
	SOAK_PASSED=$((SOAK_PASSED + 1))
	printf 'ok - %s\n' "$*"
}

soak_failed()
{
	SOAK_FAILED=$((SOAK_FAILED + 1))
	SOAK_FAILURES+=("$*")
	printf 'not ok - %s\n' "$*"
}

# soak_check WORD... [ TEST ]: the words before the first "[" describe
# the check; run the test from there on and count a pass or a failure.
# Never exits: every check of the run is reported.
soak_check()
{
	local what=
	while [ "$#" -gt 0 ] && [ "$1" != "[" ]; do
		what="${what:+$what }$1"
		shift
	done
	if [ "$#" -gt 0 ] && "$@"; then
		soak_pass "$what"
	else
		soak_failed "$what"
	fi
}

soak_inst() { printf 's%02d' "$1"; }

# soak_dns: the lab's DNS records for the soak names.
soak_dns()
{
	lab_dns_set "$SOAK_API=$LAB_PUB4" "$SOAK_TOGGLE=$LAB_PUB4" \
	    "$SOAK_CTL=$LAB_PUB4" "$SOAK_META=$LAB_META4" \
	    "$SOAK_PRIV=$LAB_PRIV4" "$SOAK_OTHER=$LAB_PUB4"
}

# soak_config: the initial configuration, 16 instances s01..s16 (odd ones
# of the weather plugin, even ones of radar; both declare *.weather.example).
# Every instance is granted the allowed, metadata and private names; s01
# and s02 start without their toggled grants.
soak_config()
{
	local i plugin
	MAX_CONN=16 lab_config_base
	for i in $(seq 1 "$SOAK_NINST"); do
		if [ $((i % 2)) = 1 ]; then plugin=weather; else plugin=radar; fi
		lab_entry "$(soak_inst "$i")" "$plugin" \
		    "$SOAK_API, $SOAK_META, $SOAK_PRIV"
	done
}

# soak_plan FILE: the egress-fetch loaders' plan, one "INSTANCE CLASS URL"
# per line over the instances s01, s02 and s07..s16 (s03..s06 belong to
# the egress-bench loaders): allowed HTTP and HTTPS, small and large, the
# three denials (not-granted, metadata, private-address), and the
# toggled names, whose outcome depends on the second ("either").
soak_plan()
{
	local i inst a=$SOAK_API
	for i in 1 2 $(seq 7 "$SOAK_NINST"); do
		inst=$(soak_inst "$i")
		cat <<-EOF
		$inst allow-small http://$a/small
		$inst allow-small https://$a/small
		$inst deny http://$SOAK_OTHER/small
		$inst allow-large http://$a/large
		$inst deny https://$SOAK_META/small
		$inst allow-small http://$a/small
		$inst deny http://$SOAK_PRIV/small
		$inst allow-large https://$a/large
		EOF
		case $inst in
		s01) printf '%s either http://%s/small\n' "$inst" "$SOAK_TOGGLE"
		     printf '%s either https://%s/small\n' "$inst" "$SOAK_TOGGLE"
		     printf '%s deny http://%s/small\n' "$inst" "$SOAK_CTL" ;;
		s02) printf '%s either http://%s/small\n' "$inst" "$SOAK_CTL"
		     printf '%s either https://%s/small\n' "$inst" "$SOAK_CTL"
		     printf '%s deny http://%s/small\n' "$inst" "$SOAK_TOGGLE" ;;
		esac
	done >"$1"
}

# ---------------------------------------------------------------- editor

# soak_editor_start: the configuration editor (tests/soak/editor.sh) in
# the background as process "editor"; edit/log records every edit.
soak_editor_start()
{
	mkdir -p "$LAB_DIR/edit"
	: >"$LAB_DIR/edit/log"
	lab_spawn editor - bash "$SOAK_SRC_DIR/editor.sh" "$SOAK_CTL_BIN" \
	    "$LAB_CONF" "$LAB_DIR/edit/stop" "$LAB_DIR/edit/log" \
	    "$SOAK_TOGGLE" "$SOAK_CTL"
}

# ---------------------------------------------------------------- sampler

# soak_fds PID, soak_rss PID: descriptors and VmRSS (KiB) of PID.
soak_fds() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
soak_rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# soak_counts: "LEASES DECIDED" over all instances from the control
# socket's `show instances` (leases held now; allowed + denied decisions
# so far); "? ?" when the broker did not answer.
soak_counts()
{
	timeout 10 "$SOAK_CTL_BIN" -c "$LAB_CONF" instances --json \
	    2>/dev/null | jq -r '[([.instances[].leases] | add // 0),
	    ([.instances[] | .allowed + .denied] | add // 0)] | @tsv' \
	    2>/dev/null | grep . || echo '? ?'
}

soak_leases() { soak_counts | awk '{ print $1 }'; }

# soak_sample T0: print one curve line "SECONDS FDS RSS_KIB LEASES
# DECIDED" for the broker, SECONDS counted from T0 (epoch seconds).
soak_sample()
{
	local pid=${LAB_PID[egressd]}
	printf '%d %s %s %s\n' "$(($(date +%s) - $1))" "$(soak_fds "$pid")" \
	    "$(soak_rss "$pid")" "$(soak_counts | tr '\t' ' ')"
}

# soak_curve_table FILE: the curve as an aligned table (Markdown).
soak_curve_table()
{
	printf '| t (s) | fds | RSS (KiB) | leases | requests decided |\n'
	printf '|---:|---:|---:|---:|---:|\n'
	awk '{ printf "| %d | %d | %d | %s | %s |\n", $1, $2, $3, $4, $5 }' "$1"
}

# soak_thirds FILE COLUMN WARMUP: of the samples at t >= WARMUP, print
# the median of COLUMN over the first third and over the last third, and
# the number of samples used ("FIRST LAST N").
soak_thirds()
{
	awk -v c="$2" -v w="$3" '$1 >= w { v[n++] = $c }
	    function med(a, lo, hi,    i, j, t, k, m) {
		k = 0
		for (i = lo; i < hi; i++) b[k++] = a[i]
		for (i = 1; i < k; i++) {
			t = b[i]
			for (j = i - 1; j >= 0 && b[j] > t; j--) b[j + 1] = b[j]
			b[j + 1] = t
		}
		return k % 2 ? b[(k - 1) / 2] : (b[k / 2 - 1] + b[k / 2]) / 2
	    }
	    END {
		t = int(n / 3)
		if (t < 1) { print "0 0 " n; exit }
		printf "%d %d %d\n", med(v, 0, t), med(v, n - t, n), n
	    }' "$1"
}
