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
 * Every case checks the decision and close events and their transport.
 */
#include "stream_test.h"

#include <criterion/parameterized.h>

TestSuite(stream, .init = st_setup, .fini = dt_teardown);

/* ---- relaying ---------------------------------------------------------- */

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
