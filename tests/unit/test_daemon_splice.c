/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for the spliced tcp relay (broker/relay.c's own reads of a
 * plain upstream, session.c's splice_data, broker/net/pipemove.c),
 * driven through a real session by a fake guest on a socketpair, with
 * splice() and readv() interposed to count and fault them: upstream
 * bytes reach the guest spliced (no copy through the broker), and stay
 * whole and in order when the guest's socket takes only part of a frame,
 * when the pipes cannot be had or splice is refused (copied instead;
 * pipes that could not be opened for want of descriptors are tried
 * again later, once per period),
 * and past urgent data (also right before the end); a socket error met
 * by a splice, whatever its errno, is a cut, never an end, and leaves the
 * pipes in use; a guest whose socket is full stops
 * the reads from the upstream, and its reads alone start them again; a
 * guest that reads nothing while its socket is full is dropped by the
 * stall clock (also when it sends PINGs), one that reads in time or
 * slowly is not, nor one whose waiting stream is gone.
 */
#include "stream_test.h"

#include <criterion/parameterized.h>

#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "broker/net/pipemove.h"
#include "broker/session.h"

TestSuite(splice, .init = st_setup, .fini = dt_teardown);

/* The broker's splices, counted and faulted as tests ask: st_fills
 * counts those that read bytes from a TCP socket (an upstream, not the
 * socket pair of the pipes' check); st_fill_errno fails the next one
 * from any socket with that errno (0: none), reading nothing. With
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

/* Is fd an IPv4 socket (the tests' upstreams)? */
static int
st_is_inet(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	memset(&ss, 0, sizeof(ss));
	return getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
	    ss.ss_family == AF_INET;
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
		if (n > 0 && st_is_inet(in)) {
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

/* pipe2() fails with st_pipe2_errno while it is set; st_pipe2_calls
 * counts the calls. */
static int st_pipe2_errno;
static unsigned st_pipe2_calls;

int
pipe2(int fds[2], int flags)
{
	st_pipe2_calls++;
	if (st_pipe2_errno != 0) {
		errno = st_pipe2_errno;
		return -1;
	}
	return (int)syscall(SYS_pipe2, fds, flags);
}

/* Copied reads of a TCP socket (an upstream) that brought bytes. */
static unsigned st_up_copies;

ssize_t
readv(int fd, const struct iovec *iov, int iovcnt)
{
	ssize_t n;

	if (st_pipe_read_fails && st_is(fd, S_IFIFO)) {
		errno = EIO;
		return -1;
	}
	n = (ssize_t)syscall(SYS_readv, fd, iov, iovcnt);
	if (n > 0 && st_is_inet(fd)) {
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
Test(splice, spliced_to_the_guest)
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
Test(splice, spliced_frame_the_socket_takes_in_part)
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
Test(splice, spliced_frame_that_cannot_be_kept)
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
Test(splice, urgent_data_while_splicing, .timeout = 30)
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
Test(splice, a_full_guest_stops_the_upstream_reads)
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

/* Open a stream whose relay splices, and fill the guest's socket: the
 * upstream (a small send buffer) sends until it cannot while the guest
 * reads nothing; sent bytes in all. */
static void
st_fill_guest(struct dt_peer *p, struct dt_upstream *u, size_t *sent)
{
	st_open_tcp(p, u);
	st_bulk_first(p, u);
	cr_assert_eq(setsockopt(u->cfd, SOL_SOCKET, SO_SNDBUF, &(int){ 65536 },
			 sizeof(int)),
	    0);
	st_upstream_until_blocked(u, sent);
	cr_assert_gt(st_fills, 0, "nothing spliced");
}

/* A guest whose socket was full and that then reads, granting nothing
 * back, still gets its whole window: its reads alone wake the relay. */
Test(splice, a_full_guest_is_woken_by_its_reads)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	size_t sent, got = 0;

	cr_assert_not_null(p);
	st_fill_guest(p, &u, &sent);
	cr_assert_gt(sent, PROTO_STREAM_WINDOW);
	st_count_data(p, &got, PROTO_STREAM_WINDOW);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* Urgent data, then the upstream's end: a splice stops at the urgent
 * byte and reads the end there, but the bytes after it still reach the
 * guest before its END_STREAM. */
Test(splice, urgent_data_then_the_end)
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
Test(splice, copied_without_pipes)
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

/* Pipes that cannot be opened for want of descriptors: the stream is
 * copied, one attempt is made (and logged) per retry period rather than
 * one per move, and once the period is over and descriptors are back,
 * the next stream is spliced. */
Test(splice, pipes_out_of_descriptors_are_tried_again)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	cr_assert_not_null(p);
	st_pipe2_calls = 0; /* the set-up's own pipes */
	st_pipe2_errno = EMFILE;
	st_open_tcp(p, &u);
	st_bulk_first(p, &u);
	st_bulk_down(p, &u, PROTO_STREAM_WINDOW + 777);
	cr_assert_eq(st_fills, 0);
	cr_assert_eq(st_pipe2_calls, 1, "%u attempts", st_pipe2_calls);
	cr_assert_eq(dt_log_count("egress.broker"), 1);
	cr_assert_str_eq(dt_log_last("egress.broker", "what"),
	    "stream relay pipes (moves copy for now)");
	cr_assert_not(dt_b.pipes_failed, "the pipes were turned off");
	st_end_clean(p, &u);
	dt_upstream_close(&u);
	dt_peer_close(p);

	st_pipe2_errno = 0;
	dt_b.pipes_retry_ms = 1; /* the period is over */
	st_open_tcp(p, &u);
	st_bulk_first(p, &u);
	st_bulk_down(p, &u, PROTO_STREAM_WINDOW + 777);
	cr_assert_gt(st_fills, 0, "nothing spliced");
	cr_assert_not_null(dt_b.pipes);
	cr_assert_eq(dt_log_count("egress.broker"), 1);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* Splicing refused by the system (a system call filter answering EPERM)
 * shows when the pipes are opened and checked (the first splice, from a
 * socket pair of the broker's own): no error of the stream, the bytes are
 * copied, one line is logged, and no splice is tried again. */
Test(splice, splice_refused_copies)
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
	cr_assert_str_eq(dt_log_last("egress.broker", "what"),
	    "stream relay pipes (every move copies)");
	st_end_clean(p, &u);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* A socket error met by a splice cuts the stream, whatever its errno
 * (an ICMP error may be EOPNOTSUPP or EPERM; the pipes were checked when
 * they were opened): the guest gets an error, never an end (a read
 * after it would find an end of file), the upstream a reset, and the
 * pipes stay in use. */
static int splice_errnos[] = { ECONNRESET, EOPNOTSUPP, EPERM, EINVAL, ENOMEM };

ParameterizedTestParameters(splice, a_socket_error_met_by_a_splice_is_a_cut)
{
	return cr_make_param_array(int, splice_errnos,
	    sizeof(splice_errnos) / sizeof(splice_errnos[0]));
}

ParameterizedTest(int *err, splice, a_socket_error_met_by_a_splice_is_a_cut)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	cr_assert_not_null(p);
	st_open_tcp(p, &u);
	st_bulk_first(p, &u);
	cr_assert_not_null(broker_pipes(&dt_b)); /* opened and checked */
	st_fill_errno = *err;
	dt_upstream_reply(&u, "lost");
	st_expect_error(p, 1, PROTO_CODE_UPSTREAM_PROTOCOL);
	cr_assert_eq(st_fill_errno, 0, "no splice read the upstream");
	st_wait_close();
	cr_assert_str_neq(dt_log_last("egress.close", "error"), "null");
	cr_assert_not(dt_b.pipes_failed, "%s turned the pipes off",
	    strerror(*err));
	dt_upstream_expect_reset(&u);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* Run the loop until the guest's connection is dropped or the clock
 * reaches until; return whether it was. */
static int
st_run_until_dropped(const struct dt_peer *p, double until)
{
	while (!dt_peer_gone(p->fd) && dt_now() < until)
		dt_step(-1);
	return dt_peer_gone(p->fd);
}

/* A guest that reads nothing while its socket is full under a splice:
 * bytes wait for it as queued output would, so the stall clock drops it
 * (not the stream's one-minute idle timeout), and the stream is a cut. */
Test(splice, a_full_guest_that_reads_nothing_is_dropped, .timeout = 60)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	size_t sent;

	cr_assert_not_null(p);
	st_fill_guest(p, &u, &sent);
	cr_assert(st_run_until_dropped(p,
		      dt_now() + 3 * SESSION_STALL_MS / 1000.0),
	    "a guest that read nothing was not dropped");
	st_wait_close();
	cr_assert_str_neq(dt_log_last("egress.close", "error"), "null");
	dt_upstream_expect_reset(&u);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* Send a PING every half second, reading nothing, until the guest's
 * connection is dropped or secs have passed; return whether it was. */
static int
st_ping_until_dropped(struct dt_peer *p, double secs)
{
	double until = dt_now() + secs, next = 0;

	while (!dt_peer_gone(p->fd) && dt_now() < until) {
		if (dt_now() >= next) {
			dt_send_ping(p, "stallpng");
			next = dt_now() + 0.5;
		}
		dt_step(-1);
	}
	return dt_peer_gone(p->fd);
}

/* The same guest sends PINGs while it reads nothing: each PONG still
 * fits in its full socket, but the kernel taking it is no read by the
 * guest: the stall clock runs on and drops it. */
Test(splice, a_full_guest_that_pings_and_reads_nothing_is_dropped,
    .timeout = 60)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	size_t sent;

	cr_assert_not_null(p);
	st_fill_guest(p, &u, &sent);
	cr_assert(st_ping_until_dropped(p, 3 * SESSION_STALL_MS / 1000.0),
	    "a guest that only sent PINGs was kept");
	st_wait_close();
	cr_assert_str_neq(dt_log_last("egress.close", "error"), "null");
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* A guest whose socket is full reads a little (a frame or so: too
 * little for the socket to be writable again), then only sends PINGs:
 * its read restarts the clock at the deadline, the PONGs never do, and
 * it is dropped at the next one. */
Test(splice, a_full_guest_that_reads_once_then_pings_is_dropped, .timeout = 60)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	static char buf[80 * 1024];
	double t0;
	size_t sent, got = 0;
	ssize_t k;

	cr_assert_not_null(p);
	st_fill_guest(p, &u, &sent);
	while (got < sizeof(buf) &&
	    (k = read(p->fd, buf + got, sizeof(buf) - got)) > 0)
		got += (size_t)k;
	cr_assert_eq(got, sizeof(buf));
	t0 = dt_now();
	cr_assert(st_ping_until_dropped(p, 4 * SESSION_STALL_MS / 1000.0),
	    "a guest that read once, then only sent PINGs, was kept");
	cr_assert_geq(dt_now(), t0 + SESSION_STALL_MS / 1000.0 - 0.1,
	    "dropped before the deadline its read restarted");
	st_wait_close();
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/*
 * A guest whose socket is full under a splice then reads slowly, 16 KiB
 * every half second, granting each read back, while the upstream sends
 * without end: each grant lets the relay splice the socket full again,
 * so it never empties to the point where the kernel calls it writable,
 * and the broker's refills hide the guest's reads from the deadline's
 * check. Room it finds for a frame ends the wait instead: the guest is
 * kept, and its bytes keep coming.
 */
Test(splice, a_full_guest_that_reads_slowly_is_kept, .timeout = 60)
{
	static unsigned char up[16384];
	static char buf[16384];
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	double until, next = 0;
	size_t sent, got = 0;
	ssize_t k;

	cr_assert_not_null(p);
	memset(up, 'w', sizeof(up));
	st_fill_guest(p, &u, &sent);
	until = dt_now() + 3 * SESSION_STALL_MS / 1000.0;
	while (!dt_peer_gone(p->fd) && dt_now() < until) {
		(void)write(u.cfd, up, sizeof(up));
		if (dt_now() >= next) {
			k = read(p->fd, buf, sizeof(buf));
			if (k > 0) {
				got += (size_t)k;
				st_send_window(p, 0, (uint32_t)k);
				st_send_window(p, 1, (uint32_t)k);
			}
			next = dt_now() + 0.5;
		}
		dt_step(-1);
	}
	cr_assert_not(dt_peer_gone(p->fd),
	    "a guest reading %zu bytes was "
	    "dropped",
	    got);
	cr_assert_gt(got, 512 * 1024, "read only %zu bytes", got);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* A guest whose socket is full under a splice resets the stream that
 * waited for room and then reads nothing for longer than the stall
 * deadline: nothing waits for it any more (what its socket holds is
 * its own), so it is kept, as it would be had the bytes been copied. */
Test(splice, a_full_guest_that_resets_the_waiting_stream_is_kept,
    .timeout = 60)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	size_t sent;

	cr_assert_not_null(p);
	st_fill_guest(p, &u, &sent);
	dt_msg(&M, PROTO_MSG_RESET, 0, 1);
	M.reset.code = PROTO_CODE_CANCELLED;
	dt_send(p, &M);
	cr_assert_not(st_run_until_dropped(p,
			  dt_now() + 1.5 * SESSION_STALL_MS / 1000.0),
	    "dropped with nothing waiting for it");
	st_wait_close();
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* A guest whose socket is full, which reads before the stall deadline
 * and then nothing while the upstream fills its socket again: its read
 * started the clock again, so it is still there past the first
 * deadline, and dropped at the next. */
Test(splice, a_full_guest_that_reads_in_time_is_kept, .timeout = 60)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	double t0, stall = SESSION_STALL_MS / 1000.0;
	size_t sent;

	cr_assert_not_null(p);
	st_fill_guest(p, &u, &sent);
	t0 = dt_now();
	cr_assert_not(st_run_until_dropped(p, t0 + stall / 2),
	    "dropped before its deadline");
	/* Read what the socket holds, granting it back; the upstream sends
	 * on until the guest's socket is full again. */
	dt_peer_read(p);
	while (dt_take(p, &M))
		if (M.type == PROTO_MSG_DATA && M.data.len > 0)
			st_send_window(p, 1, (uint32_t)M.data.len);
	st_upstream_until_blocked(&u, &sent);
	cr_assert_not(st_run_until_dropped(p, t0 + stall * 1.3),
	    "dropped at the deadline of a clock its read restarted");
	cr_assert(st_run_until_dropped(p, t0 + stall * 4),
	    "not dropped after it stopped reading");
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}
