#!/bin/bash
# SPDX-License-Identifier: ISC
#
# A proxy-front client that stops reading a 50 MiB body does not make the
# broker buffer it: back-pressure reaches the upstream (nginx's send queue
# fills and it never finishes the response), the broker's RSS stays
# within LAB_RSS_GROWTH_KB (default 24 MiB) of its warmed-up size, and
# another client of the same instance keeps being served. Once the client
# reads again, the body arrives intact.
set -euo pipefail
. "$(dirname "$0")/../lab/lab.sh"
. "$(dirname "$0")/../lab/curl.sh"
lab_init
lab_need_bins
lab_up
BOUND_KB=${LAB_RSS_GROWTH_KB:-24576}

lab_dns_set api.weather.example="$LAB_PUB4"
{
	lab_config_base
	lab_entry weather weather api.weather.example
} | lab_config_install
lab_egressd_start weather

# Warm up with one full download.
lab_curl weather -o /dev/null http://api.weather.example/large
lab_expect_curl 200
base=$(lab_egressd_rss_kb)
lab_log "broker RSS after warm-up: $base KiB"

# The slow client: sends its request, reads nothing until released, then
# reads the whole answer and prints the body's length and SHA-256.
lab_mark
cat >"$LAB_DIR/slow.py" <<'PY'
import hashlib, os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
s.connect(sys.argv[1])
s.sendall(b'GET /large HTTP/1.1\r\nHost: api.weather.example\r\n'
          b'Connection: close\r\n\r\n')
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
data = bytearray()
while True:
    b = s.recv(1 << 20)
    if not b:
        break
    data += b
data = bytes(data)
head, _, body = data.partition(b'\r\n\r\n')
open(sys.argv[3], 'w').write('%d %s\n' % (len(body),
                             hashlib.sha256(body).hexdigest()))
PY
lab_spawn slow "$LAB_NS_B" "$LAB_PYTHON" "$LAB_DIR/slow.py" \
    "$LAB_SOCK_DIR/weather.sock" "$LAB_DIR/slow.release" \
    "$LAB_DIR/slow.result"
stalled()
{
	local q
	q=$(lab_ns_o ss -Htn state established "( sport = :80 )" |
	    awk '{ if ($2 > m) m = $2 } END { print m + 0 }')
	[ "$q" -gt 0 ] && [ "$(lab_hits "$LAB_PUB4" /large)" = 0 ]
}
lab_wait_upstream_conns 80 1
lab_poll 30 stalled || lab_fail "the upstream never saw back-pressure"
lab_ok "back-pressure reached the upstream"
max=0
i=0
while [ "$i" -lt 20 ]; do
	rss=$(lab_egressd_rss_kb)
	[ "$rss" -le "$max" ] || max=$rss
	stalled || lab_fail "the stall ended while the client read nothing"
	i=$((i + 1))
	sleep 0.1	# sampling interval, not a wait for a condition
done
lab_log "broker RSS while stalled: max $max KiB"
[ $((max - base)) -le "$BOUND_KB" ] ||
    lab_fail "RSS grew by $((max - base)) KiB (bound $BOUND_KB KiB)"
lab_ok "RSS growth $((max - base)) KiB within $BOUND_KB KiB"

# Another client of the same instance is served meanwhile.
lab_curl weather http://api.weather.example/small
lab_expect_curl 200

: >"$LAB_DIR/slow.release"
lab_poll 60 test -s "$LAB_DIR/slow.result" ||
    lab_fail "the slow client never got the whole body"
lab_expect_eq "body the slow client read" \
    "$(stat -c %s "$LAB_DIR/www/large") $(sha256sum <"$LAB_DIR/www/large" | cut -d' ' -f1)" \
    "$(cat "$LAB_DIR/slow.result")"

lab_finish
