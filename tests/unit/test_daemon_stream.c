/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for the tcp and tls transports (broker/request.c's stream
 * path and broker/relay.c), driven through a real session by a fake guest
 * on a socketpair, against loopback upstreams the test answers by hand:
 * RESPONSE 200 once connected, bytes both ways, half-close both ways (the
 * guest's END_STREAM reaches the upstream as end of file while the
 * upstream still sends, and the reverse), an END_STREAM on the REQUEST
 * itself, flow control (no more than the stream window reaches a guest
 * that grants nothing, and streams take turns at the connection's
 * window), the idle timeout and the lifetime, the lease held
 * for the stream's life and freed at once by a reset, refusals answered
 * at once (no port, port 0, HTTP fields, no socket_client permission,
 * metadata, not granted), tls against a peer that speaks no TLS, a
 * guest that leaves after ending its side, one that leaves before the
 * broker read its last frames (a failed write to it comes first), and
 * the revocation of an open stream by a reload; every cut before the
 * end (a reset, a guest gone mid-stream, a timeout, a revocation) resets
 * the upstream rather than ending it.
 * Upstream bytes reach the guest spliced (no copy through the broker),
 * and stay whole and in order when the guest's socket takes only part of
 * a frame, when the pipes cannot be had (copied instead), and past urgent
 * data (also right before the end); a socket error met by a splice is a
 * cut, never an end; a guest whose socket is full stops the reads from
 * the upstream, and its reads alone start them again.
 * Every case checks the decision and close events and their transport.
 */
#include "daemon_test.h"

#include <criterion/parameterized.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <sys/uio.h>

#include "broker/net/pipemove.h"
#include "broker/request.h"

static const char st_manifest[] =
    "[plugin]\n"
    "name = unit\n"
    "version = 1.0.0\n"
    "permissions = http_client, socket_client\n"
    "[egress]\n"
    "operator_defined = true\n";

/* Write the configuration of these tests: "app" gets perms (and
 * 127.0.0.1 when grant_local), "webonly" http_client only; a budget of
 * 2, a one-minute idle timeout. */
static void
st_write_conf(const char *perms, int grant_local)
{
	char text[2048];

	(void)snprintf(text, sizeof(text),
	    "[plugins.security]\n"
	    "signature_mode = disabled\n"
	    "[plugins.limits]\n"
	    "max_connections_per_instance = 2\n"
	    "[plugins.entries.app]\n"
	    "plugin = unit\n"
	    "manifest = manifest.ini\n"
	    "permissions = %s\n"
	    "egress_hosts = %s169.254.169.254\n"
	    "egress_allow_loopback = %s\n"
	    "[plugins.entries.webonly]\n"
	    "plugin = unit\n"
	    "manifest = manifest.ini\n"
	    "permissions = http_client\n"
	    "egress_hosts = 127.0.0.1\n"
	    "egress_allow_loopback = 127.0.0.1\n"
	    "[broker]\n"
	    "instance_socket_dir = %s/run\n"
	    "control_socket = %s/control.sock\n"
	    "[resolver]\n"
	    "servers = 127.0.0.1:9\n"
	    "timeout_ms = 1000\n"
	    "[limits]\n"
	    "connect_timeout_ms = 5000\n"
	    "stream_idle_timeout_ms = 60000\n",
	    perms, grant_local ? "127.0.0.1, " : "",
	    grant_local ? "127.0.0.1" : "", ct_dir, ct_dir);
	ct_write_str("egressd.ini", text);
	confstate_reload(&dt_b.conf);
	cr_assert(confstate_is_valid(&dt_b.conf));
}

/* As dt_setup(), with socket_client granted to "app" (not "webonly"). */
static void
st_setup(void)
{
	dt_setup();
	ct_write_str("manifest.ini", st_manifest);
	st_write_conf("http_client, socket_client", 1);
}

TestSuite(stream, .init = st_setup, .fini = dt_teardown);

static struct proto_msg M;

/* A tcp (or tls) REQUEST on stream for authority, with timeouts. */
static void
st_request(struct proto_msg *m, uint32_t stream, uint8_t transport,
    uint8_t flags, const char *authority)
{
	dt_msg(m, PROTO_MSG_REQUEST, flags, stream);
	m->request.transport = transport;
	dt_str(&m->request.authority, authority);
}

static void
st_send_data(struct dt_peer *p, uint32_t stream, const char *s, uint8_t flags)
{
	struct proto_msg m;

	dt_msg(&m, PROTO_MSG_DATA, flags, stream);
	m.data.ptr = (const uint8_t *)s;
	m.data.len = strlen(s);
	dt_send(p, &m);
}

static void
st_send_window(struct dt_peer *p, uint32_t stream, uint32_t inc)
{
	struct proto_msg m;

	dt_msg(&m, PROTO_MSG_WINDOW_UPDATE, 0, stream);
	m.window_update.increment = inc;
	dt_send(p, &m);
}

/* The next frame that is not a WINDOW_UPDATE (1), or none (0). */
static int
st_next(struct dt_peer *p, struct proto_msg *m)
{
	int rv;

	while ((rv = dt_recv(p, m)) == 1 && m->type == PROTO_MSG_WINDOW_UPDATE)
		;
	return rv;
}

/* Expect DATA frames on stream carrying exactly want, the last one
 * with END_STREAM when end is set. */
static void
st_expect_data(struct dt_peer *p, uint32_t stream, const char *want, int end)
{
	char got[4096];
	size_t n = 0;

	for (;;) {
		cr_assert_eq(st_next(p, &M), 1, "no DATA (got '%.*s')", (int)n,
		    got);
		cr_assert_eq(M.type, PROTO_MSG_DATA, "got %s (code %u)",
		    proto_type_name(M.type), M.error.code);
		cr_assert_eq(M.stream, stream);
		cr_assert_leq(n + M.data.len, sizeof(got));
		memcpy(got + n, M.data.ptr, M.data.len);
		n += M.data.len;
		if (n >= strlen(want) &&
		    (!end || M.flags & PROTO_FLAG_END_STREAM))
			break;
		cr_assert_eq(M.flags & PROTO_FLAG_END_STREAM, 0,
		    "END_STREAM after '%.*s'", (int)n, got);
	}
	cr_assert_eq(n, strlen(want));
	cr_assert_eq(memcmp(got, want, n), 0, "got '%.*s'", (int)n, got);
}

static void
st_expect_response(struct dt_peer *p, uint32_t stream)
{
	cr_assert_eq(st_next(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_RESPONSE, "got %s (code %u)",
	    proto_type_name(M.type), M.error.code);
	cr_assert_eq(M.stream, stream);
	cr_assert_eq(M.response.status, 200);
	cr_assert_eq(M.flags & PROTO_FLAG_END_STREAM, 0);
}

static void
st_expect_error(struct dt_peer *p, uint32_t stream, uint32_t code)
{
	cr_assert_eq(st_next(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_ERROR, "got %s",
	    proto_type_name(M.type));
	cr_assert_eq(M.stream, stream);
	cr_assert_eq(M.error.code, code, "code %u, want %u", M.error.code,
	    code);
}

/* Run the loop until the upstream accepted and read at least n bytes. */
static void
st_up_read(struct dt_upstream *u, size_t n)
{
	int i;

	for (i = 0; i < DT_ITERS && u->reqlen < n && !u->eof; i++) {
		dt_upstream_read(u);
		if (u->reqlen < n)
			dt_step(u->cfd >= 0 ? u->cfd : u->lfd);
	}
	cr_assert_geq(u->reqlen, n, "the upstream read %zu bytes", u->reqlen);
}

/* Run the loop until the close event was logged. */
static void
st_wait_close(void)
{
	int i;

	for (i = 0; i < DT_ITERS && dt_log_count("egress.close") == 0; i++)
		dt_step(-1);
	cr_assert_eq(dt_log_count("egress.close"), 1);
}

/* Open a tcp stream 1 for "app" to a fresh upstream u, and run the loop
 * until the upstream accepted it. */
static void
st_open_tcp(struct dt_peer *p, struct dt_upstream *u)
{
	int i;

	dt_upstream_open(u);
	dt_peer_hello(p, "app");
	st_request(&M, 1, PROTO_TRANSPORT_TCP, 0, u->authority);
	dt_send(p, &M);
	st_expect_response(p, 1);
	for (i = 0; i < DT_ITERS && u->cfd < 0; i++) {
		dt_upstream_read(u);
		dt_step(u->lfd);
	}
	cr_assert_geq(u->cfd, 0);
}

/* The guest ends stream 1, sends after (NULL: nothing) and closes its
 * connection at once: the upstream must then read exactly sent bytes and
 * end of file, and the close event be logged. */
static void
st_end_and_leave(struct dt_peer *p, struct dt_upstream *u, size_t sent,
    const struct proto_msg *after)
{
	struct proto_msg m;
	char buf[65536];
	size_t got = 0;
	ssize_t k = -1;
	int i;

	dt_msg(&m, PROTO_MSG_DATA, PROTO_FLAG_END_STREAM, 1);
	dt_send(p, &m);
	if (after != NULL)
		dt_send(p, after);
	dt_peer_close(p);
	for (i = 0; i < 4 * DT_ITERS; i++) {
		k = read(u->cfd, buf, sizeof(buf));
		if (k == 0)
			break;
		if (k > 0)
			got += (size_t)k;
		dt_step(u->cfd);
	}
	cr_assert_eq(got, sent, "the upstream got %zu of %zu bytes", got,
	    sent);
	cr_assert_eq(k, 0, "no end of file upstream");
	st_wait_close();
}

/* ---- relaying ---------------------------------------------------------- */

/* The broker's splices, counted and faulted as tests ask: st_fills
 * counts those that read bytes from a socket; st_fill_errno fails the
 * next one that would with that errno (0: none), reading nothing. With
 * st_send_part set, each splice into a socket moves at most that many
 * bytes and the next one finds the socket full (st_partials counts
 * them); with st_send_full, every one finds it full. st_pipe_read_fails
 * fails every readv() of a pipe with EIO. */
static unsigned st_fills, st_partials;
static size_t st_up_bytes; /* read from a TCP socket, spliced or copied */
static int st_fill_errno, st_send_full, st_pipe_read_fails;
static size_t st_send_part;

static int
st_is(int fd, mode_t type)
{
	struct stat sb;

	return fstat(fd, &sb) == 0 && (sb.st_mode & S_IFMT) == type;
}

ssize_t
splice(int in, loff_t *in_off, int out, loff_t *out_off, size_t len,
    unsigned int flags)
{
	static int full_once;
	ssize_t n;

	if (st_is(in, S_IFSOCK)) {
		if (st_fill_errno != 0) {
			errno = st_fill_errno;
			st_fill_errno = 0;
			return -1;
		}
		n = (ssize_t)syscall(SYS_splice, in, in_off, out, out_off, len,
		    flags);
		if (n > 0) {
			st_fills++;
			st_up_bytes += (size_t)n;
		}
		return n;
	}
	if (st_is(out, S_IFSOCK)) {
		if (st_send_full || full_once) {
			full_once = 0;
			errno = EAGAIN;
			return -1;
		}
		if (st_send_part != 0 && len > st_send_part) {
			len = st_send_part;
			full_once = 1;
			st_partials++;
		}
	}
	return (ssize_t)syscall(SYS_splice, in, in_off, out, out_off, len,
	    flags);
}

/* Copied reads of a TCP socket (an upstream) that brought bytes. */
static unsigned st_up_copies;

ssize_t
readv(int fd, const struct iovec *iov, int iovcnt)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	ssize_t n;

	if (st_pipe_read_fails && st_is(fd, S_IFIFO)) {
		errno = EIO;
		return -1;
	}
	n = (ssize_t)syscall(SYS_readv, fd, iov, iovcnt);
	memset(&ss, 0, sizeof(ss));
	if (n > 0 && getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
	    ss.ss_family == AF_INET) {
		st_up_copies++;
		st_up_bytes += (size_t)n;
	}
	return n;
}

/* The byte at offset i of the test's bulk streams. */
static unsigned char
st_pattern(size_t i)
{
	return (unsigned char)(i % 251);
}

/* Run the loop until the guest got n bytes of DATA on stream 1, granting
 * them back. */
static void
st_expect_bytes(struct dt_peer *p, size_t n)
{
	size_t got = 0;
	int i;

	for (i = 0; i < DT_ITERS && got < n; i++) {
		dt_step(p->fd);
		dt_peer_read(p);
		while (dt_take(p, &M))
			if (M.type == PROTO_MSG_DATA && M.data.len > 0) {
				got += M.data.len;
				st_send_window(p, 1, (uint32_t)M.data.len);
			}
	}
	cr_assert_eq(got, n, "got %zu of %zu bytes", got, n);
}

/* The upstream sends 64 KiB of 'b' at once, which the guest gets: a
 * bulk read, after which the relay splices. */
static void
st_bulk_first(struct dt_peer *p, struct dt_upstream *u)
{
	static char chunk[65536];

	memset(chunk, 'b', sizeof(chunk));
	cr_assert_eq(write(u->cfd, chunk, sizeof(chunk)),
	    (ssize_t)sizeof(chunk));
	st_expect_bytes(p, sizeof(chunk));
}

/* The upstream sends n pattern bytes and ends its side; the guest must
 * get exactly them, in order, in whole frames, then END_STREAM. */
static void
st_bulk_down(struct dt_peer *p, struct dt_upstream *u, size_t n)
{
	static unsigned char chunk[16384];
	size_t sent = 0, got = 0, j;
	int i, ended = 0;
	ssize_t k;

	for (i = 0; i < 4 * DT_ITERS && !ended; i++) {
		while (sent < n) {
			size_t c = n - sent < sizeof(chunk) ?
			    n - sent :
			    sizeof(chunk);

			for (j = 0; j < c; j++)
				chunk[j] = st_pattern(sent + j);
			if ((k = write(u->cfd, chunk, c)) <= 0)
				break;
			sent += (size_t)k;
			if (sent == n)
				(void)shutdown(u->cfd, SHUT_WR);
		}
		dt_step(p->fd);
		dt_peer_read(p);
		while (!ended && dt_take(p, &M)) {
			if (M.type == PROTO_MSG_WINDOW_UPDATE)
				continue;
			cr_assert_eq(M.type, PROTO_MSG_DATA, "got %s",
			    proto_type_name(M.type));
			for (j = 0; j < M.data.len; j++)
				cr_assert_eq(M.data.ptr[j],
				    st_pattern(got + j), "byte %zu", got + j);
			got += M.data.len;
			if (M.data.len > 0)
				st_send_window(p, 1, (uint32_t)M.data.len);
			ended = (M.flags & PROTO_FLAG_END_STREAM) != 0;
		}
	}
	cr_assert(ended, "no END_STREAM after %zu of %zu bytes", got, n);
	cr_assert_eq(got, n);
}

/* The guest ends its side: the upstream reads the end, and the stream
 * closes cleanly. */
static void
st_end_clean(struct dt_peer *p, struct dt_upstream *u)
{
	st_send_data(p, 1, "", PROTO_FLAG_END_STREAM);
	dt_upstream_wait_eof(u);
	st_wait_close();
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "null");
}

/* Bulk bytes from the upstream are spliced to the guest, frame by frame,
 * with the stream's window: all of them, in order, and the end. */
Test(stream, spliced_to_the_guest)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	cr_assert_not_null(p);
	st_open_tcp(p, &u);
	st_bulk_down(p, &u, 3 * PROTO_STREAM_WINDOW + 12345);
	cr_assert_gt(st_fills, 2, "%u splices read the upstream", st_fills);
	st_end_clean(p, &u);
	cr_assert_str_eq(dt_log_last("egress.close", "bytes_in"),
	    "798777"); /* 3 * 262144 + 12345 */
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* The guest's socket takes only a few bytes of a spliced frame (less
 * than its header) and is then full: the rest follows from the broker's
 * buffer, before anything else, so every frame arrives whole and in
 * order. */
Test(stream, spliced_frame_the_socket_takes_in_part)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	cr_assert_not_null(p);
	st_open_tcp(p, &u);
	st_send_part = 5;
	st_bulk_down(p, &u, 2 * PROTO_STREAM_WINDOW + 777);
	cr_assert_gt(st_partials, 1, "%u partial sends", st_partials);
	st_send_part = 0;
	st_end_clean(p, &u);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* A frame that could be neither sent nor kept (the socket full, the
 * pipes unreadable) is cut short: the guest's connection is dropped,
 * the stream logged as failed and its upstream reset. */
Test(stream, spliced_frame_that_cannot_be_kept)
{
	static unsigned char chunk[65536];
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	int i;

	cr_assert_not_null(p);
	memset(chunk, 'k', sizeof(chunk));
	st_open_tcp(p, &u);
	st_bulk_first(p, &u);
	st_send_full = st_pipe_read_fails = 1;
	cr_assert_eq(write(u.cfd, chunk, sizeof(chunk)),
	    (ssize_t)sizeof(chunk));
	for (i = 0; i < DT_ITERS && dt_log_count("egress.close") == 0; i++)
		dt_step(-1);
	cr_assert_gt(st_fills, 0, "no splice");
	st_wait_close();
	cr_assert_str_neq(dt_log_last("egress.close", "error"), "null");
	st_send_full = st_pipe_read_fails = 0;
	dt_upstream_expect_reset(&u);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* The upstream sends 64 KiB, an urgent byte, then "def". */
static void
st_send_urgent(struct dt_upstream *u)
{
	static char chunk[65536];

	memset(chunk, 'u', sizeof(chunk));
	cr_assert_eq(write(u->cfd, chunk, sizeof(chunk)),
	    (ssize_t)sizeof(chunk));
	cr_assert_eq(send(u->cfd, "X", 1, MSG_OOB), 1);
	cr_assert_eq(write(u->cfd, "def", 3), 3);
}

/* Urgent data stops a splice at its mark with nothing read while the
 * socket stays readable: the relay reads past it (as a read does, which
 * skips the urgent byte) and goes on, rather than trying again forever. */
Test(stream, urgent_data_while_splicing, .timeout = 30)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	cr_assert_not_null(p);
	st_open_tcp(p, &u);
	st_bulk_first(p, &u);
	st_send_urgent(&u);
	st_expect_bytes(p, 65536 + 3);
	cr_assert_gt(st_fills, 0, "no splice");
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* Run the loop until the guest got n bytes of the pattern on stream 1,
 * granting them back. */
static void
st_expect_pattern(struct dt_peer *p, size_t n)
{
	size_t got = 0, j;
	int i;

	for (i = 0; i < DT_ITERS && got < n; i++) {
		dt_step(p->fd);
		dt_peer_read(p);
		while (dt_take(p, &M)) {
			if (M.type != PROTO_MSG_DATA)
				continue;
			for (j = 0; j < M.data.len; j++)
				cr_assert_eq(M.data.ptr[j],
				    st_pattern(got + j), "byte %zu", got + j);
			got += M.data.len;
			st_send_window(p, 1, (uint32_t)M.data.len);
		}
	}
	cr_assert_eq(got, n, "got %zu of %zu bytes", got, n);
}

/* A guest that stops reading while the relay splices: once its socket
 * is full, the broker reads nothing more from the upstream (its bytes
 * wait in the upstream's socket, not in the broker), and once the guest
 * reads again every byte follows, in order. */
Test(stream, a_full_guest_stops_the_upstream_reads)
{
	static unsigned char chunk[16384];
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	unsigned fills;
	size_t sent = 0, j;
	int i, blocked = 0, unread = -1;
	ssize_t k;

	cr_assert_not_null(p);
	st_open_tcp(p, &u);
	st_bulk_first(p, &u);
	st_up_bytes = 0;
	/* The guest reads nothing: the upstream writes until it cannot (a
	 * small send buffer, so that is soon). */
	cr_assert_eq(setsockopt(u.cfd, SOL_SOCKET, SO_SNDBUF, &(int){ 65536 },
			 sizeof(int)),
	    0);
	for (i = 0; i < DT_ITERS && blocked < 5; i++) {
		for (j = 0; j < sizeof(chunk); j++)
			chunk[j] = st_pattern(sent + j);
		if ((k = write(u.cfd, chunk, sizeof(chunk))) > 0) {
			sent += (size_t)k;
			blocked = 0;
		} else {
			blocked++;
		}
		dt_step(-1);
	}
	cr_assert_eq(blocked, 5, "the upstream never blocked");
	cr_assert_gt(st_fills, 0, "nothing spliced");
	/* What the broker read is in the guest's socket (with the frames'
	 * headers), not in the broker. */
	cr_assert_eq(ioctl(p->fd, FIONREAD, &unread), 0);
	cr_assert_lt(st_up_bytes, (size_t)unread + PIPEMOVE_MIN,
	    "read %zu, %d in the guest's socket", st_up_bytes, unread);
	st_up_copies = 0;
	fills = st_fills;
	for (i = 0; i < 20; i++)
		dt_step(-1);
	cr_assert_eq(st_fills, fills, "the upstream was read");
	cr_assert_eq(st_up_copies, 0, "the upstream was read");
	st_expect_pattern(p, sent);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* Run the loop until the guest got want bytes of DATA in all (counted on
 * from *got), granting nothing. */
static void
st_count_data(struct dt_peer *p, size_t *got, size_t want)
{
	int i;

	for (i = 0; i < DT_ITERS && *got < want; i++) {
		dt_step(p->fd);
		dt_peer_read(p);
		while (dt_take(p, &M))
			if (M.type == PROTO_MSG_DATA)
				*got += M.data.len;
	}
	cr_assert_eq(*got, want, "got %zu", *got);
}

/* The upstream sends until it cannot while the guest reads nothing,
 * then (having written sent bytes, returned in *sent) stops. */
static void
st_upstream_until_blocked(struct dt_upstream *u, size_t *sent)
{
	static char chunk[16384];
	int i, blocked = 0;
	ssize_t k;

	memset(chunk, 'w', sizeof(chunk));
	*sent = 0;
	for (i = 0; i < DT_ITERS && blocked < 5; i++) {
		if ((k = write(u->cfd, chunk, sizeof(chunk))) > 0) {
			*sent += (size_t)k;
			blocked = 0;
		} else {
			blocked++;
		}
		dt_step(-1);
	}
	cr_assert_eq(blocked, 5, "the upstream never blocked");
}

/* A guest whose socket was full and that then reads, granting nothing
 * back, still gets its whole window: its reads alone wake the relay. */
Test(stream, a_full_guest_is_woken_by_its_reads)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	size_t sent, got = 0;

	cr_assert_not_null(p);
	st_open_tcp(p, &u);
	st_bulk_first(p, &u);
	cr_assert_eq(setsockopt(u.cfd, SOL_SOCKET, SO_SNDBUF, &(int){ 65536 },
			 sizeof(int)),
	    0);
	st_upstream_until_blocked(&u, &sent);
	cr_assert_gt(sent, PROTO_STREAM_WINDOW);
	st_count_data(p, &got, PROTO_STREAM_WINDOW);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* Urgent data, then the upstream's end: a splice stops at the urgent
 * byte and reads the end there, but the bytes after it still reach the
 * guest before its END_STREAM. */
Test(stream, urgent_data_then_the_end)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	size_t got = 0;
	int i, ended = 0;

	cr_assert_not_null(p);
	st_open_tcp(p, &u);
	st_bulk_first(p, &u);
	st_send_urgent(&u);
	cr_assert_eq(shutdown(u.cfd, SHUT_WR), 0);
	for (i = 0; i < DT_ITERS && !ended; i++) {
		dt_step(p->fd);
		dt_peer_read(p);
		while (!ended && dt_take(p, &M)) {
			if (M.type != PROTO_MSG_DATA)
				continue;
			got += M.data.len;
			if (M.data.len > 0)
				st_send_window(p, 1, (uint32_t)M.data.len);
			ended = (M.flags & PROTO_FLAG_END_STREAM) != 0;
		}
	}
	cr_assert(ended, "no END_STREAM");
	cr_assert_eq(got, 65536 + 3, "got %zu", got);
	cr_assert_gt(st_fills, 0, "no splice");
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* Without the pipes every frame is copied, and the stream is the same. */
Test(stream, copied_without_pipes)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	cr_assert_not_null(p);
	cr_assert_null(dt_b.pipes);
	dt_b.pipes_failed = 1;
	st_open_tcp(p, &u);
	st_bulk_down(p, &u, PROTO_STREAM_WINDOW + 4321);
	cr_assert_eq(st_fills, 0);
	st_end_clean(p, &u);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* Splicing refused by the system (a system call filter answering EPERM)
 * is no error of the stream: nothing was read, the bytes are copied, and
 * no splice is tried again. */
Test(stream, splice_refused_copies)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	cr_assert_not_null(p);
	st_open_tcp(p, &u);
	st_bulk_first(p, &u);
	st_fill_errno = EPERM;
	st_bulk_down(p, &u, PROTO_STREAM_WINDOW + 99);
	cr_assert_eq(st_fill_errno, 0, "no splice was tried");
	cr_assert_eq(st_fills, 0);
	cr_assert(dt_b.pipes_failed);
	cr_assert_null(dt_b.pipes);
	st_end_clean(p, &u);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* A socket error met by a splice (a reset) cuts the stream: the guest
 * gets an error, never an end, and the upstream a reset. */
Test(stream, spliced_read_reset_is_a_cut)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	cr_assert_not_null(p);
	st_open_tcp(p, &u);
	st_bulk_first(p, &u);
	st_fill_errno = ECONNRESET;
	dt_upstream_reply(&u, "lost");
	st_expect_error(p, 1, PROTO_CODE_UPSTREAM_PROTOCOL);
	cr_assert_eq(st_fill_errno, 0, "no splice read the upstream");
	st_wait_close();
	cr_assert_str_neq(dt_log_last("egress.close", "error"), "null");
	dt_upstream_expect_reset(&u);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* Bytes both ways; the guest ends first and the upstream still sends. */
Test(stream, echo_guest_ends_first)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	cr_assert_not_null(p);
	dt_upstream_open(&u);
	dt_peer_hello(p, "app");
	st_request(&M, 1, PROTO_TRANSPORT_TCP, 0, u.authority);
	dt_send(p, &M);
	st_expect_response(p, 1);
	cr_assert_str_eq(dt_log_last("egress.decision", "verdict"), "allow");
	cr_assert_str_eq(dt_log_last("egress.decision", "transport"), "tcp");
	cr_assert_eq(lease_count(dt_b.leases, "app"), 1);

	st_send_data(p, 1, "hello\n", 0);
	st_up_read(&u, 6);
	cr_assert_str_eq(u.req, "hello\n");
	dt_upstream_reply(&u, "world\n");
	st_expect_data(p, 1, "world\n", 0);

	/* The guest's end reaches the upstream as end of file... */
	st_send_data(p, 1, "bye", PROTO_FLAG_END_STREAM);
	dt_upstream_wait_eof(&u);
	cr_assert_str_eq(u.req, "hello\nbye");
	/* ... and the upstream may still answer, then end its side. */
	dt_upstream_reply(&u, "late");
	(void)shutdown(u.cfd, SHUT_WR);
	st_expect_data(p, 1, "late", 1);
	st_wait_close();
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	cr_assert_str_eq(dt_log_last("egress.close", "transport"), "tcp");
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "null");
	cr_assert_str_eq(dt_log_last("egress.close", "status"), "200");
	cr_assert_str_eq(dt_log_last("egress.close", "bytes_out"), "9");
	cr_assert_str_eq(dt_log_last("egress.close", "bytes_in"), "10");
	cr_assert_eq(dt_log_count("egress.decision"), 1);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* The upstream ends first; the guest still sends, then ends. */
Test(stream, upstream_ends_first)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	cr_assert_not_null(p);
	st_open_tcp(p, &u);
	dt_upstream_reply(&u, "banner");
	(void)shutdown(u.cfd, SHUT_WR);
	st_expect_data(p, 1, "banner", 1);
	cr_assert_eq(dt_log_count("egress.close"), 0, "closed half-way");
	st_send_data(p, 1, "after", 0);
	st_up_read(&u, 5);
	cr_assert_str_eq(u.req, "after");
	st_send_data(p, 1, "", PROTO_FLAG_END_STREAM);
	dt_upstream_wait_eof(&u);
	st_wait_close();
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "null");
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* The guest sends until the broker holds bytes the upstream has not
 * taken (its kernel buffers full), ends its side and leaves at once:
 * what it sent still reaches the upstream, which then reads end of
 * file. The close is clean when the upstream had ended its side first,
 * else "cancelled" (the guest gave up the upstream's direction). */
struct leave_case {
	char name[16];
	int upstream_ended;
	char error[16];
};

ParameterizedTestParameters(stream, guest_leaves_after_end)
{
	static struct leave_case cases[] = {
		{ "upstream-ended", 1, "null" },
		{ "upstream-open", 0, "cancelled" },
	};

	return cr_make_param_array(struct leave_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct leave_case *c, stream, guest_leaves_after_end)
{
	static char big[PROTO_DATA_MAX];
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	struct proto_msg m;
	uint64_t win = PROTO_STREAM_WINDOW, conn = PROTO_CONN_WINDOW;
	size_t n, sent = 0;
	int rcvbuf = 4096, quiet = 0, i;

	cr_assert_not_null(p);
	memset(big, 'q', sizeof(big));
	dt_upstream_open(&u);
	/* A small receive buffer, so that the bytes wait in the broker. */
	cr_assert_eq(setsockopt(u.lfd, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
			 sizeof(rcvbuf)),
	    0);
	dt_peer_hello(p, "app");
	st_request(&M, 1, PROTO_TRANSPORT_TCP, 0, u.authority);
	dt_send(p, &M);
	st_expect_response(p, 1);
	for (i = 0; i < DT_ITERS && u.cfd < 0; i++) {
		dt_upstream_read(&u);
		dt_step(u.lfd);
	}
	cr_assert_geq(u.cfd, 0);
	if (c->upstream_ended) {
		(void)shutdown(u.cfd, SHUT_WR);
		st_expect_data(p, 1, "", 1);
	}
	/* Send within the windows until the broker stops granting more. */
	for (i = 0; i < DT_ITERS && quiet < 40; i++) {
		n = win < conn ? (size_t)win : (size_t)conn;
		if (n > sizeof(big))
			n = sizeof(big);
		if (n > 0) {
			dt_msg(&m, PROTO_MSG_DATA, 0, 1);
			m.data.ptr = (const uint8_t *)big;
			m.data.len = n;
			dt_send(p, &m);
			sent += n;
			win -= n;
			conn -= n;
			quiet = 0;
		} else
			quiet++;
		dt_step(p->fd);
		dt_peer_read(p);
		while (dt_take(p, &m))
			if (m.type == PROTO_MSG_WINDOW_UPDATE) {
				if (m.stream == 0)
					conn += m.window_update.increment;
				else
					win += m.window_update.increment;
			}
	}
	cr_assert_eq(quiet, 40, "the broker kept granting window");
	st_end_and_leave(p, &u, sent, NULL);
	cr_assert_str_eq(dt_log_last("egress.close", "error"), c->error, "%s",
	    c->name);
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	cr_assert_null(dt_b.lingering);
	dt_upstream_close(&u);
	free(p);
}

/* The guest ended its side, the upstream read that end, and then the
 * guest leaves while the upstream has not ended: the stream is over at
 * once ("cancelled": the upstream's direction was given up), not held
 * until its idle timeout (a minute here). */
Test(stream, guest_leaves_after_its_end_reached_the_upstream)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	cr_assert_not_null(p);
	st_open_tcp(p, &u);
	st_send_data(p, 1, "all", PROTO_FLAG_END_STREAM);
	dt_upstream_wait_eof(&u);
	cr_assert_str_eq(u.req, "all");
	dt_peer_close(p);
	st_wait_close();
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "cancelled");
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	cr_assert_null(dt_b.lingering);
	dt_upstream_close(&u);
	free(p);
}

/* The guest sends a whole stream window, ends its side and leaves before
 * the broker read any of it: the broker's next write to the guest (the
 * PONG of a PING) fails, and what was still unread in the socket is read
 * and relayed all the same. Every byte reaches the upstream, then end of
 * file, never a truncated clean end. A REQUEST it sent after is not
 * started: nothing is decided or connected for a guest that left. */
struct gone_case {
	char name[16];
	int then_request;
};

ParameterizedTestParameters(stream, guest_leaves_before_broker_reads)
{
	static struct gone_case cases[] = {
		{ "end", 0 },
		{ "end-request", 1 },
	};

	return cr_make_param_array(struct gone_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct gone_case *c, stream,
    guest_leaves_before_broker_reads)
{
	static char big[PROTO_DATA_MAX];
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	struct proto_msg m;
	size_t sent = 0;
	int sndbuf = 1024 * 1024;
	socklen_t sl = sizeof(sndbuf);

	cr_assert_not_null(p);
	memset(big, 'z', sizeof(big));
	st_open_tcp(p, &u);
	(void)shutdown(u.cfd, SHUT_WR);
	st_expect_data(p, 1, "", 1);
	/* Room in the guest's socket for the whole window, so that it is
	 * written without running the broker. */
	cr_assert_eq(setsockopt(p->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf,
			 sizeof(sndbuf)),
	    0);
	cr_assert_eq(getsockopt(p->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &sl),
	    0);
	cr_assert_geq((unsigned)sndbuf, 2 * PROTO_STREAM_WINDOW,
	    "SO_SNDBUF %d", sndbuf);
	/* A PING first: its PONG is the broker's first write. */
	dt_send_ping(p, "leaving!");
	while (sent < PROTO_STREAM_WINDOW) {
		dt_msg(&m, PROTO_MSG_DATA, 0, 1);
		m.data.ptr = (const uint8_t *)big;
		m.data.len = sizeof(big);
		dt_send(p, &m);
		sent += sizeof(big);
	}
	st_request(&M, 3, PROTO_TRANSPORT_TCP, 0, u.authority);
	st_end_and_leave(p, &u, sent, c->then_request ? &M : NULL);
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "null");
	cr_assert_eq(strtoull(dt_log_last("egress.close", "bytes_out"), NULL,
			 10),
	    sent);
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	cr_assert_null(dt_b.lingering);
	cr_assert_eq(dt_log_count("egress.decision"), 1, "%s", c->name);
	cr_assert_lt(accept4(u.lfd, NULL, NULL, SOCK_NONBLOCK), 0,
	    "%s: a second connection upstream", c->name);
	dt_upstream_close(&u);
	free(p);
}

/* The guest cuts a stream before its end, by a reset or by leaving
 * without ending its side: the bytes it sent reached the upstream, which
 * then reads a reset, never an end of file. */
struct cut_case {
	char name[16];
	int reset; /* a RESET frame; else the connection closed */
};

ParameterizedTestParameters(stream, guest_cut_resets_upstream)
{
	static struct cut_case cases[] = {
		{ "reset", 1 },
		{ "gone", 0 },
	};

	return cr_make_param_array(struct cut_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct cut_case *c, stream, guest_cut_resets_upstream)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	cr_assert_not_null(p);
	st_open_tcp(p, &u);
	st_send_data(p, 1, "half a record", 0);
	st_up_read(&u, 13);
	cr_assert_str_eq(u.req, "half a record");
	if (c->reset) {
		dt_msg(&M, PROTO_MSG_RESET, 0, 1);
		M.reset.code = PROTO_CODE_CANCELLED;
		dt_send(p, &M);
	} else
		dt_peer_close(p);
	dt_upstream_expect_reset(&u);
	st_wait_close();
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "cancelled",
	    "%s", c->name);
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	dt_upstream_close(&u);
	if (c->reset)
		dt_peer_close(p);
	free(p);
}

/* END_STREAM on the REQUEST: the upstream reads end of file at once. */
Test(stream, request_with_end_stream)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	cr_assert_not_null(p);
	dt_upstream_open(&u);
	dt_peer_hello(p, "app");
	st_request(&M, 1, PROTO_TRANSPORT_TCP, PROTO_FLAG_END_STREAM,
	    u.authority);
	dt_send(p, &M);
	st_expect_response(p, 1);
	dt_upstream_wait_eof(&u);
	cr_assert_eq(u.reqlen, 0);
	dt_upstream_reply(&u, "x");
	(void)close(u.cfd);
	u.cfd = -1;
	st_expect_data(p, 1, "x", 1);
	st_wait_close();
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "null");
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* A guest that grants nothing gets the stream window and no more; a
 * WINDOW_UPDATE lets exactly that much more through. */
Test(stream, flow_control)
{
	static char chunk[16384];
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	size_t got = 0, sent = 0, want = PROTO_STREAM_WINDOW;
	ssize_t k;
	int i;

	cr_assert_not_null(p);
	memset(chunk, 'z', sizeof(chunk));
	st_open_tcp(p, &u);
	/* The upstream offers 1 MiB; the guest reads what arrives. */
	for (i = 0; i < DT_ITERS && got < want; i++) {
		while (sent < 1024 * 1024 &&
		    (k = write(u.cfd, chunk, sizeof(chunk))) > 0)
			sent += (size_t)k;
		dt_step(p->fd);
		dt_peer_read(p);
		while (dt_take(p, &M))
			if (M.type == PROTO_MSG_DATA)
				got += M.data.len;
	}
	cr_assert_eq(got, want, "got %zu", got);
	/* Nothing more without credit, however long the loop runs. */
	for (i = 0; i < 50; i++) {
		dt_step(p->fd);
		dt_peer_read(p);
		while (dt_take(p, &M))
			cr_assert_neq(M.type, PROTO_MSG_DATA,
			    "DATA beyond the window");
	}
	st_send_window(p, 1, 65536);
	want += 65536;
	st_count_data(p, &got, want);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* Write what fits of the upstreams' endless bodies, run the loop once
 * and count the DATA the guest got, per stream (1 and 3). */
static void
st_pump2(struct dt_peer *p, struct dt_upstream *u, size_t got[2])
{
	static char chunk[16384];
	int j;

	memset(chunk, 'r', sizeof(chunk));
	for (j = 0; j < 2; j++)
		while (write(u[j].cfd, chunk, sizeof(chunk)) > 0)
			;
	dt_step(p->fd);
	dt_peer_read(p);
	while (dt_take(p, &M))
		if (M.type == PROTO_MSG_DATA) {
			cr_assert(M.stream == 1 || M.stream == 3);
			got[M.stream == 3] += M.data.len;
		}
}

/* Streams take turns at the connection's window: when it reopens a
 * frame at a time, the grants go round the streams that have data, and
 * no stream takes every one of them (the walk used to restart where it
 * had started, at the same stream each time). */
Test(stream, connection_window_round_robin)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u[2];
	size_t got[2] = { 0, 0 }, before;
	int i, j, k;

	cr_assert_not_null(p);
	dt_peer_hello(p, "app");
	for (j = 0; j < 2; j++) {
		dt_upstream_open(&u[j]);
		st_request(&M, 1 + 2 * (uint32_t)j, PROTO_TRANSPORT_TCP, 0,
		    u[j].authority);
		dt_send(p, &M);
		st_expect_response(p, 1 + 2 * (uint32_t)j);
		for (i = 0; i < DT_ITERS && u[j].cfd < 0; i++) {
			dt_upstream_read(&u[j]);
			dt_step(u[j].lfd);
		}
		cr_assert_geq(u[j].cfd, 0);
		/* The streams' own windows are never the limit here. */
		st_send_window(p, 1 + 2 * (uint32_t)j, 64u << 20);
	}
	for (i = 0; i < DT_ITERS && got[0] + got[1] < PROTO_CONN_WINDOW; i++)
		st_pump2(p, u, got);
	cr_assert_eq(got[0] + got[1], PROTO_CONN_WINDOW);
	for (i = 0; i < 20; i++)
		st_pump2(p, u, got);
	cr_assert_eq(got[0] + got[1], PROTO_CONN_WINDOW, "beyond the window");
	got[0] = got[1] = 0;
	for (k = 1; k <= 8; k++) {
		st_send_window(p, 0, PROTO_DATA_MAX);
		before = got[0] + got[1];
		for (i = 0;
		     i < DT_ITERS && got[0] + got[1] < before + PROTO_DATA_MAX;
		     i++)
			st_pump2(p, u, got);
		cr_assert_eq(got[0] + got[1], (size_t)k * PROTO_DATA_MAX);
	}
	cr_assert_geq(got[0], 2 * PROTO_DATA_MAX, "stream 1 got %zu of %u",
	    got[0], 8 * PROTO_DATA_MAX);
	cr_assert_geq(got[1], 2 * PROTO_DATA_MAX, "stream 3 got %zu of %u",
	    got[1], 8 * PROTO_DATA_MAX);
	for (j = 0; j < 2; j++)
		dt_upstream_close(&u[j]);
	dt_peer_close(p);
	free(p);
}

/* ---- limits ------------------------------------------------------------ */

struct timeout_case {
	char name[16];
	uint32_t between_bytes_ms; /* the guest's idle timeout */
	uint32_t total_ms;	   /* the guest's lifetime */
};

ParameterizedTestParameters(stream, timeouts)
{
	static struct timeout_case cases[] = {
		{ "idle", 200, 0 },
		{ "lifetime", 0, 300 },
	};

	return cr_make_param_array(struct timeout_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct timeout_case *c, stream, timeouts)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	uint64_t t0;

	cr_assert_not_null(p);
	dt_upstream_open(&u);
	dt_peer_hello(p, "app");
	st_request(&M, 1, PROTO_TRANSPORT_TCP, 0, u.authority);
	M.request.timeouts.between_bytes_ms = c->between_bytes_ms;
	M.request.timeouts.total_ms = c->total_ms;
	t0 = broker_now_ms();
	dt_send(p, &M);
	st_expect_response(p, 1);
	st_expect_error(p, 1, PROTO_CODE_TIMEOUT);
	cr_assert_geq(broker_now_ms() - t0, 200, "%s: too early", c->name);
	st_wait_close();
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "timeout");
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	dt_upstream_expect_reset(&u);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* The instance's entry lowers its streams' idle timeout below [limits]'
 * minute; the guest asks for nothing. */
Test(stream, entry_idle_timeout)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	char text[1024];
	uint64_t t0;

	cr_assert_not_null(p);
	(void)snprintf(text, sizeof(text),
	    "[plugins.security]\n"
	    "signature_mode = disabled\n"
	    "[plugins.entries.app]\n"
	    "plugin = unit\n"
	    "manifest = manifest.ini\n"
	    "permissions = socket_client\n"
	    "egress_hosts = 127.0.0.1\n"
	    "egress_allow_loopback = 127.0.0.1\n"
	    "stream_idle_timeout_ms = 200\n"
	    "[broker]\n"
	    "instance_socket_dir = %s/run\n"
	    "control_socket = %s/control.sock\n"
	    "[resolver]\n"
	    "servers = 127.0.0.1:9\n"
	    "[limits]\n"
	    "stream_idle_timeout_ms = 60000\n",
	    ct_dir, ct_dir);
	ct_write_str("egressd.ini", text);
	confstate_reload(&dt_b.conf);
	cr_assert(confstate_is_valid(&dt_b.conf));
	dt_upstream_open(&u);
	dt_peer_hello(p, "app");
	st_request(&M, 1, PROTO_TRANSPORT_TCP, 0, u.authority);
	t0 = broker_now_ms();
	dt_send(p, &M);
	st_expect_response(p, 1);
	st_expect_error(p, 1, PROTO_CODE_TIMEOUT);
	cr_assert_geq(broker_now_ms() - t0, 200, "too early");
	st_wait_close();
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "timeout");
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* Two streams hold the budget of 2: a third request (any transport) is
 * refused; a reset frees its lease at once. */
Test(stream, budget_shared)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	cr_assert_not_null(p);
	dt_upstream_open(&u);
	dt_peer_hello(p, "app");
	st_request(&M, 1, PROTO_TRANSPORT_TCP, 0, u.authority);
	dt_send(p, &M);
	st_expect_response(p, 1);
	st_request(&M, 3, PROTO_TRANSPORT_TCP, 0, u.authority);
	dt_send(p, &M);
	st_expect_response(p, 3);
	cr_assert_eq(lease_count(dt_b.leases, "app"), 2);
	dt_request(&M, 5, PROTO_FLAG_END_STREAM, "GET", "http", u.authority,
	    "/", NULL);
	dt_send(p, &M);
	st_expect_error(p, 5, PROTO_CODE_BUDGET_EXHAUSTED);
	cr_assert_str_eq(dt_log_last("egress.decision", "reason"),
	    "budget-exhausted");
	cr_assert_str_eq(dt_log_last("egress.decision", "transport"), "http");

	dt_msg(&M, PROTO_MSG_RESET, 0, 1);
	M.reset.code = PROTO_CODE_CANCELLED;
	dt_send(p, &M);
	for (int i = 0; i < DT_ITERS && lease_count(dt_b.leases, "app") != 1;
	     i++)
		dt_step(-1);
	cr_assert_eq(lease_count(dt_b.leases, "app"), 1);
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "cancelled");
	st_request(&M, 7, PROTO_TRANSPORT_TCP, 0, u.authority);
	dt_send(p, &M);
	st_expect_response(p, 7);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* ---- refused at once --------------------------------------------------- */

struct refuse_case {
	char name[24];
	char instance[16];
	uint8_t transport;
	char authority[48]; /* "UP": the loopback upstream */
	char method[8];	    /* a field of HTTP a stream must not carry */
	uint32_t code;
	char reason[24];
};

ParameterizedTestParameters(stream, refused)
{
	static struct refuse_case cases[] = {
		{ "no-port", "app", PROTO_TRANSPORT_TCP, "127.0.0.1", "",
		    PROTO_CODE_INVALID_REQUEST, "invalid-destination" },
		{ "port-0", "app", PROTO_TRANSPORT_TCP, "127.0.0.1:0", "",
		    PROTO_CODE_INVALID_REQUEST, "invalid-destination" },
		{ "port-65536", "app", PROTO_TRANSPORT_TLS, "127.0.0.1:65536",
		    "", PROTO_CODE_INVALID_REQUEST, "invalid-destination" },
		{ "empty", "app", PROTO_TRANSPORT_TCP, "", "",
		    PROTO_CODE_INVALID_REQUEST, "invalid-destination" },
		{ "tls-no-port", "app", PROTO_TRANSPORT_TLS, "127.0.0.1", "",
		    PROTO_CODE_INVALID_REQUEST, "invalid-destination" },
		{ "http-method", "app", PROTO_TRANSPORT_TCP, "UP", "GET",
		    PROTO_CODE_INVALID_REQUEST, "invalid-request" },
		{ "no-permission", "webonly", PROTO_TRANSPORT_TCP, "UP", "",
		    PROTO_CODE_DENIED, "no-permission" },
		{ "tls-no-permission", "webonly", PROTO_TRANSPORT_TLS, "UP",
		    "", PROTO_CODE_DENIED, "no-permission" },
		{ "metadata", "app", PROTO_TRANSPORT_TCP, "169.254.169.254:80",
		    "", PROTO_CODE_DENIED, "metadata" },
		{ "not-granted", "app", PROTO_TRANSPORT_TCP, "10.0.0.9:5432",
		    "", PROTO_CODE_DENIED, "not-granted" },
		{ "unknown-instance", "nobody", PROTO_TRANSPORT_TCP, "UP", "",
		    PROTO_CODE_DENIED, "unknown-instance" },
	};

	return cr_make_param_array(struct refuse_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct refuse_case *c, stream, refused)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	cr_assert_not_null(p);
	dt_upstream_open(&u);
	dt_peer_hello(p, c->instance);
	st_request(&M, 1, c->transport, PROTO_FLAG_END_STREAM,
	    strcmp(c->authority, "UP") == 0 ? u.authority : c->authority);
	if (c->method[0] != '\0')
		dt_str(&M.request.method, c->method);
	dt_send(p, &M);
	st_expect_error(p, 1, c->code);
	st_wait_close();
	cr_assert_str_eq(dt_log_last("egress.decision", "verdict"), "deny",
	    "%s", c->name);
	cr_assert_str_eq(dt_log_last("egress.decision", "reason"), c->reason,
	    "%s: reason %s", c->name,
	    dt_log_last("egress.decision", "reason"));
	cr_assert_str_eq(dt_log_last("egress.decision", "transport"),
	    c->transport == PROTO_TRANSPORT_TLS ? "tls" : "tcp");
	cr_assert_eq(lease_count(dt_b.leases, c->instance), 0);
	/* Nothing reached the upstream. */
	dt_upstream_read(&u);
	cr_assert_lt(u.cfd, 0, "%s: the upstream was connected", c->name);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* ---- revocation at a reload --------------------------------------------- */

struct revoke_case {
	char name[16];
	char perms[40];
	int grant_local;
	char reason[24];
};

ParameterizedTestParameters(stream, revoked_at_reload)
{
	static struct revoke_case cases[] = {
		{ "permission", "http_client", 1, "no-permission" },
		{ "grant", "http_client, socket_client", 0, "not-granted" },
	};

	return cr_make_param_array(struct revoke_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

/* A reload that still allows the stream leaves it alone; one that no
 * longer does closes it: ERROR denied, close error "revoked" with the
 * reason, the lease back at once. */
ParameterizedTest(struct revoke_case *c, stream, revoked_at_reload)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	cr_assert_not_null(p);
	dt_upstream_open(&u);
	dt_peer_hello(p, "app");
	st_request(&M, 1, PROTO_TRANSPORT_TCP, 0, u.authority);
	dt_send(p, &M);
	st_expect_response(p, 1);

	st_write_conf("http_client, socket_client", 1);
	cr_assert_eq(request_revoke_streams(&dt_b, dt_b.conf.cur->snap), 0);
	st_send_data(p, 1, "still\n", 0);
	st_up_read(&u, 6);
	cr_assert_str_eq(u.req, "still\n");

	st_write_conf(c->perms, c->grant_local);
	cr_assert_eq(request_revoke_streams(&dt_b, dt_b.conf.cur->snap), 1,
	    "%s", c->name);
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	st_expect_error(p, 1, PROTO_CODE_DENIED);
	st_wait_close();
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "revoked");
	cr_assert_str_eq(dt_log_last("egress.close", "reason"), c->reason);
	cr_assert_eq(dt_log_count("egress.decision"), 1);
	dt_upstream_expect_reset(&u);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* Open u, and send it a GET of path on stream 1 of a new session of
 * "app" on p; return once u has the request. */
static void
st_http_get(struct dt_peer *p, struct dt_upstream *u, const char *path)
{
	cr_assert_not_null(p);
	dt_upstream_open(u);
	dt_peer_hello(p, "app");
	dt_request(&M, 1, PROTO_FLAG_END_STREAM, "GET", "http", u->authority,
	    path, NULL);
	dt_send(p, &M);
	dt_upstream_wait_request(u);
}

/* An HTTP response still arriving is decided again at a reload, as a
 * stream is: one the reload still allows goes on; one it no longer
 * allows ends with ERROR denied, close error "revoked" with the reason,
 * and its lease back at once (its connection is not pooled). */
Test(stream, http_response_revoked_at_reload)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	st_http_get(p, &u, "/feed");
	dt_upstream_reply(&u,
	    "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nfirst,");
	st_expect_response(p, 1);
	st_expect_data(p, 1, "first,", 0);
	cr_assert_eq(lease_count(dt_b.leases, "app"), 1);

	st_write_conf("http_client, socket_client", 1);
	cr_assert_eq(request_revoke_streams(&dt_b, dt_b.conf.cur->snap), 0);
	dt_upstream_reply(&u, "second,");
	st_expect_data(p, 1, "second,", 0);

	st_write_conf("http_client, socket_client", 0);
	cr_assert_eq(request_revoke_streams(&dt_b, dt_b.conf.cur->snap), 1);
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	st_expect_error(p, 1, PROTO_CODE_DENIED);
	st_wait_close();
	cr_assert_str_eq(dt_log_last("egress.close", "transport"), "http");
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "revoked");
	cr_assert_str_eq(dt_log_last("egress.close", "reason"), "not-granted");
	cr_assert_eq(dt_log_count("egress.decision"), 1);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* A response that ended is not decided again: its request is over. */
Test(stream, http_response_done_is_not_revoked)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	st_http_get(p, &u, "/");
	dt_upstream_reply(&u,
	    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
	st_expect_response(p, 1);
	st_expect_data(p, 1, "ok", 1);
	st_wait_close();
	st_write_conf("http_client, socket_client", 0);
	cr_assert_eq(request_revoke_streams(&dt_b, dt_b.conf.cur->snap), 0);
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "null");
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* tls to a peer that closes without a handshake: tls-failed, and the
 * guest never saw a RESPONSE. */
Test(stream, tls_handshake_fails)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	int i;

	cr_assert_not_null(p);
	dt_upstream_open(&u);
	dt_peer_hello(p, "app");
	st_request(&M, 1, PROTO_TRANSPORT_TLS, 0, u.authority);
	dt_send(p, &M);
	for (i = 0; i < DT_ITERS && u.cfd < 0; i++) {
		dt_upstream_read(&u);
		dt_step(u.lfd);
	}
	cr_assert_geq(u.cfd, 0);
	dt_upstream_reply(&u, "220 not tls\r\n");
	(void)close(u.cfd);
	u.cfd = -1;
	st_expect_error(p, 1, PROTO_CODE_TLS_FAILED);
	st_wait_close();
	cr_assert_str_eq(dt_log_last("egress.close", "transport"), "tls");
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}
