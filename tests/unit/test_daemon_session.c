/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/session.c, driven through a socketpair by a fake
 * guest that writes frames made with proto_encode() and decodes what the
 * broker sends: the HELLO exchange and version choice, PING/PONG, the
 * violations that drop the connection (a frame before HELLO, a second
 * HELLO, a bad header, a passed descriptor, a reused stream id), a denied
 * REQUEST answered with ERROR on its stream while the session stays
 * usable, RESET of a pending stream, and GOAWAY when draining with the
 * session closing once idle. Upstreams are loopback listeners answered
 * by hand; every destination is an IP literal.
 */
#include "daemon_test.h"

#include <criterion/parameterized.h>

TestSuite(session, .init = dt_setup, .fini = dt_teardown);

static struct proto_msg M; /* large: one for the whole test */

/* ---- HELLO ------------------------------------------------------------ */

struct hello_case {
	char name[16];
	uint16_t offered;
	uint16_t chosen; /* 0: the connection is dropped */
};

ParameterizedTestParameters(session, hello)
{
	static struct hello_case cases[] = {
		{ "same", PROTO_VERSION, PROTO_VERSION },
		/* An older client gets its own version. */
		{ "older-client", 1, 1 },
		/* A newer client gets the highest version both speak. */
		{ "newer-client", PROTO_VERSION + 5, PROTO_VERSION },
		{ "max-u16", 65535, PROTO_VERSION },
	};

	return cr_make_param_array(struct hello_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct hello_case *c, session, hello)
{
	struct dt_peer *p = malloc(sizeof(*p));

	cr_assert_not_null(p);
	dt_peer_open(p, "app");
	cr_assert_eq(dt_b.nsessions, 1);
	dt_send_hello(p, c->offered);
	cr_assert_eq(dt_recv(p, &M), 1, "%s: no answer", c->name);
	cr_assert_eq(M.type, PROTO_MSG_HELLO, "%s: got %s", c->name,
	    proto_type_name(M.type));
	cr_assert_eq(M.stream, 0);
	cr_assert_eq(M.hello.version, c->chosen, "%s: version %u", c->name,
	    M.hello.version);
	cr_assert_leq(M.hello.version, c->offered);
	cr_assert_eq(dt_b.nsessions, 1);
	dt_peer_close(p);
	free(p);
}

Test(session, ping_pong)
{
	struct dt_peer *p = malloc(sizeof(*p));
	static const char a[8] = "abcdefgh",
			  z[8] = { 0, 1, 2, 3, 4, 5, 6, (char)0xff };

	cr_assert_not_null(p);
	dt_peer_hello(p, "app");
	dt_send_ping(p, a);
	dt_send_ping(p, z);
	cr_assert_eq(dt_recv(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_PONG);
	cr_assert_arr_eq(M.ping.opaque, a, 8);
	cr_assert_eq(dt_recv(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_PONG);
	cr_assert_arr_eq(M.ping.opaque, z, 8);
	/* An unsolicited PONG is ignored: the next PING still answered. */
	dt_msg(&M, PROTO_MSG_PONG, 0, 0);
	dt_send(p, &M);
	dt_send_ping(p, a);
	cr_assert_eq(dt_recv(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_PONG);
	dt_peer_close(p);
	free(p);
}

/* ---- violations that drop the connection ------------------------------ */

enum drop_kind {
	DROP_PING_FIRST = 1, /* a frame before HELLO */
	DROP_REQUEST_FIRST,
	DROP_SECOND_HELLO,
	DROP_BAD_VERSION_BYTE, /* header version PROTO_VERSION + 1 */
	DROP_HELLO_ZERO,       /* HELLO offering version 0 */
	DROP_FD_BEFORE_HELLO,  /* SCM_RIGHTS with the HELLO */
	DROP_FD_AFTER_HELLO,   /* SCM_RIGHTS with a PING */
	DROP_V2_ON_V1,	       /* a version-2 REQUEST after agreeing on 1 */
};

struct drop_case {
	char name[24];
	int kind;
	int hello_first; /* complete HELLO before the violation */
};

ParameterizedTestParameters(session, drop)
{
	static struct drop_case cases[] = {
		{ "ping-before-hello", DROP_PING_FIRST, 0 },
		{ "request-before-hello", DROP_REQUEST_FIRST, 0 },
		{ "second-hello", DROP_SECOND_HELLO, 1 },
		{ "bad-version-byte", DROP_BAD_VERSION_BYTE, 1 },
		{ "hello-version-zero", DROP_HELLO_ZERO, 0 },
		{ "fd-with-hello", DROP_FD_BEFORE_HELLO, 0 },
		{ "fd-with-ping", DROP_FD_AFTER_HELLO, 1 },
		{ "v2-request-on-v1", DROP_V2_ON_V1, 0 },
	};

	return cr_make_param_array(struct drop_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

/* Send the frame m with the descriptor fd attached (SCM_RIGHTS). */
static void
send_with_fd(struct dt_peer *p, const struct proto_msg *m, int fd)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} cbuf;
	uint8_t frame[64];
	struct msghdr msg;
	struct iovec iov;
	struct cmsghdr *c;
	int n;

	n = proto_encode(m, frame, sizeof(frame), NULL);
	cr_assert_gt(n, 0);
	iov.iov_base = frame;
	iov.iov_len = (size_t)n;
	memset(&msg, 0, sizeof(msg));
	memset(&cbuf, 0, sizeof(cbuf));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf.buf;
	msg.msg_controllen = sizeof(cbuf.buf);
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	cr_assert_eq(sendmsg(p->fd, &msg, 0), n);
}

ParameterizedTest(struct drop_case *c, session, drop)
{
	struct dt_peer *p = malloc(sizeof(*p));
	uint8_t frame[64];
	int pipefd[2] = { -1, -1 }, n, nframes, i;
	char ch;

	cr_assert_not_null(p);
	if (c->hello_first)
		dt_peer_hello(p, "app");
	else
		dt_peer_open(p, "app");
	switch (c->kind) {
	case DROP_PING_FIRST:
		dt_send_ping(p, "12345678");
		break;
	case DROP_REQUEST_FIRST:
		dt_request(&M, 1, PROTO_FLAG_END_STREAM, "GET", "http",
		    "127.0.0.1", "/", NULL);
		dt_send(p, &M);
		break;
	case DROP_SECOND_HELLO:
		dt_send_hello(p, PROTO_VERSION);
		break;
	case DROP_BAD_VERSION_BYTE:
		dt_msg(&M, PROTO_MSG_PING, 0, 0);
		n = proto_encode(&M, frame, sizeof(frame), NULL);
		cr_assert_gt(n, 0);
		frame[4] = PROTO_VERSION + 1;
		dt_write_all(p->fd, frame, (size_t)n);
		break;
	case DROP_HELLO_ZERO:
		dt_msg(&M, PROTO_MSG_HELLO, 0, 0);
		M.hello.version = 1;
		n = proto_encode(&M, frame, sizeof(frame), NULL);
		cr_assert_eq(n, PROTO_HDR_SIZE + 2);
		frame[PROTO_HDR_SIZE] = 0;
		frame[PROTO_HDR_SIZE + 1] = 0;
		dt_write_all(p->fd, frame, (size_t)n);
		break;
	case DROP_FD_BEFORE_HELLO:
	case DROP_FD_AFTER_HELLO:
		cr_assert_eq(pipe2(pipefd, O_CLOEXEC | O_NONBLOCK), 0);
		if (c->kind == DROP_FD_BEFORE_HELLO) {
			dt_msg(&M, PROTO_MSG_HELLO, 0, 0);
			M.hello.version = PROTO_VERSION;
		} else {
			dt_msg(&M, PROTO_MSG_PING, 0, 0);
			memcpy(M.ping.opaque, "fdfdfdfd", 8);
		}
		send_with_fd(p, &M, pipefd[1]);
		(void)close(pipefd[1]); /* the broker holds the only copy */
		break;
	case DROP_V2_ON_V1:
		dt_send_hello(p, 1);
		cr_assert_eq(dt_recv(p, &M), 1, "no HELLO from the broker");
		cr_assert_eq(M.hello.version, 1);
		dt_request(&M, 1, PROTO_FLAG_END_STREAM, "GET", "https",
		    "127.0.0.1", "/", NULL);
		M.version = 2;
		M.request.tls_profile.ptr = "p";
		M.request.tls_profile.len = 1;
		dt_send(p, &M);
		break;
	default:
		cr_assert_fail("bad case");
	}
	dt_expect_eof(p, &nframes);
	/* Nothing is answered to a violating frame. */
	cr_assert_eq(nframes, 0, "%s: %d frames before the close", c->name,
	    nframes);
	cr_assert_eq(dt_b.nsessions, 0, "%s: session kept", c->name);
	cr_assert_eq(dt_b.nrequests, 0, "%s", c->name);
	if (pipefd[0] >= 0) {
		/* The passed descriptor was closed: the pipe has no writer
		 * left, so its read end sees EOF. */
		for (i = 0; i < DT_ITERS; i++) {
			n = (int)read(pipefd[0], &ch, 1);
			if (n == 0)
				break;
			dt_step(pipefd[0]);
		}
		cr_assert_eq(n, 0, "%s: the passed descriptor is still open",
		    c->name);
		(void)close(pipefd[0]);
	}
	dt_peer_close(p);
	free(p);
}

/* ---- streams ---------------------------------------------------------- */

/* Expect ERROR with code on stream. */
static void
expect_error(struct dt_peer *p, uint32_t stream, uint32_t code)
{
	cr_assert_eq(dt_recv(p, &M), 1, "no ERROR");
	cr_assert_eq(M.type, PROTO_MSG_ERROR, "got %s",
	    proto_type_name(M.type));
	cr_assert_eq(M.stream, stream);
	cr_assert_eq(M.error.code, code, "code %s, want %s",
	    proto_code_name(M.error.code), proto_code_name(code));
	cr_assert_eq(M.error.message.len, strlen(proto_code_message(code)));
	cr_assert_arr_eq(M.error.message.ptr, proto_code_message(code),
	    M.error.message.len, "the message is not the fixed text");
}

static void
expect_pong(struct dt_peer *p)
{
	dt_send_ping(p, "still-up");
	cr_assert_eq(dt_recv(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_PONG, "got %s",
	    proto_type_name(M.type));
	cr_assert_arr_eq(M.ping.opaque, "still-up", 8);
}

struct deny_case {
	char name[24];
	char authority[32];
	char reason[24];
};

ParameterizedTestParameters(session, denied_then_usable)
{
	static struct deny_case cases[] = {
		{ "metadata-literal", "169.254.169.254", "metadata" },
		{ "not-granted", "10.0.0.9", "not-granted" },
		{ "loopback-other-addr", "127.0.0.2:80", "not-granted" },
	};

	return cr_make_param_array(struct deny_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct deny_case *c, session, denied_then_usable)
{
	struct dt_peer *p = malloc(sizeof(*p));

	cr_assert_not_null(p);
	dt_peer_hello(p, "app");
	dt_request(&M, 1, PROTO_FLAG_END_STREAM, "GET", "http", c->authority,
	    "/", NULL);
	dt_send(p, &M);
	expect_error(p, 1, PROTO_CODE_DENIED);
	cr_assert_eq(dt_b.nrequests, 0, "%s: the request was kept", c->name);
	cr_assert_eq(dt_log_count("egress.decision"), 1);
	cr_assert_str_eq(dt_log_last("egress.decision", "reason"), c->reason);
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "denied");
	/* Frames on the closed stream are ignored, not violations. */
	dt_msg(&M, PROTO_MSG_WINDOW_UPDATE, 0, 1);
	M.window_update.increment = 100;
	dt_send(p, &M);
	/* The session carries on: another stream, and PING. */
	dt_request(&M, 3, PROTO_FLAG_END_STREAM, "GET", "http", "10.0.0.9",
	    "/", NULL);
	dt_send(p, &M);
	expect_error(p, 3, PROTO_CODE_DENIED);
	expect_pong(p);
	cr_assert_eq(dt_log_count("egress.decision"), 2);
	cr_assert_eq(dt_log_count("egress.close"), 2);
	cr_assert_eq(dt_b.nsessions, 1);
	dt_peer_close(p);
	free(p);
}

/* A REQUEST whose id is not above the last one is a violation. */
Test(session, reused_stream_id)
{
	struct dt_peer *p = malloc(sizeof(*p));
	int nframes;

	cr_assert_not_null(p);
	dt_peer_hello(p, "app");
	dt_request(&M, 5, PROTO_FLAG_END_STREAM, "GET", "http", "10.0.0.9",
	    "/", NULL);
	dt_send(p, &M);
	expect_error(p, 5, PROTO_CODE_DENIED);
	dt_request(&M, 5, PROTO_FLAG_END_STREAM, "GET", "http",
	    "169.254.169.254", "/", NULL);
	dt_send(p, &M);
	dt_expect_eof(p, &nframes);
	cr_assert_eq(nframes, 0, "the reused stream was answered");
	cr_assert_eq(dt_b.nsessions, 0);
	cr_assert_eq(dt_b.nrequests, 0);
	/* The refused REQUEST never became a request: nothing logged. */
	cr_assert_eq(dt_log_count("egress.decision"), 1);
	cr_assert_eq(dt_log_count("egress.close"), 1);
	/* The drop is logged, with what the guest broke. */
	cr_assert_eq(dt_log_count("egress.session"), 1);
	cr_assert_str_eq(dt_log_last("egress.session", "status"), "dropped");
	cr_assert_str_eq(dt_log_last("egress.session", "instance"), "app");
	cr_assert_str_eq(dt_log_last("egress.session", "detail"),
	    proto_fault_str(PROTO_FAULT_STREAM_REUSED));
	dt_peer_close(p);
	free(p);
}

/* A lower id than the last one is refused the same way. */
Test(session, lower_stream_id)
{
	struct dt_peer *p = malloc(sizeof(*p));

	cr_assert_not_null(p);
	dt_peer_hello(p, "app");
	dt_request(&M, 7, PROTO_FLAG_END_STREAM, "GET", "http", "10.0.0.9",
	    "/", NULL);
	dt_send(p, &M);
	expect_error(p, 7, PROTO_CODE_DENIED);
	dt_request(&M, 3, PROTO_FLAG_END_STREAM, "GET", "http", "10.0.0.9",
	    "/", NULL);
	dt_send(p, &M);
	dt_expect_eof(p, NULL);
	cr_assert_eq(dt_b.nsessions, 0);
	cr_assert_eq(dt_log_count("egress.decision"), 1);
	dt_peer_close(p);
	free(p);
}

/* Start a request to the loopback upstream u on stream and wait until
 * its head reached u. */
static void
start_pending(struct dt_peer *p, struct dt_upstream *u, uint32_t stream)
{
	dt_request(&M, stream, PROTO_FLAG_END_STREAM, "GET", "http",
	    u->authority, "/pending", NULL);
	dt_send(p, &M);
	dt_upstream_wait_request(u);
	cr_assert(strncmp(u->req, "GET /pending HTTP/1.1\r\n", 23) == 0,
	    "upstream got: %s", u->req);
	cr_assert_eq(dt_b.nrequests, 1);
	cr_assert_eq(lease_count(dt_b.leases, "app"), 1);
}

Test(session, reset_pending_stream)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	int i;

	cr_assert_not_null(p);
	dt_upstream_open(&u);
	dt_peer_hello(p, "app");
	start_pending(p, &u, 1);
	dt_msg(&M, PROTO_MSG_RESET, 0, 1);
	M.reset.code = PROTO_CODE_CANCELLED;
	dt_send(p, &M);
	dt_upstream_wait_eof(&u);
	for (i = 0; i < DT_ITERS && dt_b.nrequests > 0; i++)
		dt_step(-1);
	cr_assert_eq(dt_b.nrequests, 0, "the reset request was kept");
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0, "lease kept");
	cr_assert_eq(dt_log_count("egress.decision"), 1);
	cr_assert_str_eq(dt_log_last("egress.decision", "verdict"), "allow");
	cr_assert_eq(dt_log_count("egress.close"), 1);
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "cancelled");
	/* Nothing is sent on a reset stream; the session is usable. */
	expect_pong(p);
	/* A late frame on the reset stream is ignored. */
	dt_msg(&M, PROTO_MSG_RESET, 0, 1);
	M.reset.code = PROTO_CODE_CANCELLED;
	dt_send(p, &M);
	expect_pong(p);
	cr_assert_eq(dt_log_count("egress.close"), 1);
	dt_peer_close(p);
	dt_upstream_close(&u);
	free(p);
}

/* Draining with nothing in flight: GOAWAY, then the session closes. */
Test(session, goaway_idle)
{
	struct dt_peer *p = malloc(sizeof(*p));
	int nframes;

	cr_assert_not_null(p);
	dt_peer_hello(p, "app");
	dt_request(&M, 9, PROTO_FLAG_END_STREAM, "GET", "http", "10.0.0.9",
	    "/", NULL);
	dt_send(p, &M);
	expect_error(p, 9, PROTO_CODE_DENIED);
	dt_b.draining = 1;
	(void)session_drain_all(&dt_b);
	cr_assert_eq(dt_recv(p, &M), 1, "no GOAWAY");
	cr_assert_eq(M.type, PROTO_MSG_GOAWAY, "got %s",
	    proto_type_name(M.type));
	cr_assert_eq(M.stream, 0);
	cr_assert_eq(M.goaway.last_stream, 9);
	dt_expect_eof(p, &nframes);
	cr_assert_eq(nframes, 0);
	cr_assert_eq(dt_b.nsessions, 0);
	/* No new session while draining. */
	cr_assert_neq(session_accept(&dt_b, dup(p->fd), "app"), 0);
	cr_assert_eq(dt_b.nsessions, 0);
	dt_peer_close(p);
	free(p);
}

/* Draining with a request in flight: GOAWAY at once, the request is
 * finished, then the session closes. A session that never said HELLO is
 * closed at once. */
Test(session, goaway_finishes_active_stream)
{
	struct dt_peer *p = malloc(sizeof(*p)), *q = malloc(sizeof(*q));
	struct dt_upstream u;
	int nframes;

	cr_assert(p != NULL && q != NULL);
	dt_upstream_open(&u);
	dt_peer_hello(p, "app");
	dt_peer_open(q, "app"); /* no HELLO yet */
	start_pending(p, &u, 1);
	dt_b.draining = 1;
	cr_assert_eq(session_drain_all(&dt_b), 1,
	    "the active session "
	    "should stay, the silent one go");
	dt_expect_eof(q, &nframes);
	cr_assert_eq(nframes, 0);
	cr_assert_eq(dt_recv(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_GOAWAY, "got %s",
	    proto_type_name(M.type));
	cr_assert_eq(M.goaway.last_stream, 1);
	/* A REQUEST above the GOAWAY id is ignored. */
	dt_request(&M, 3, PROTO_FLAG_END_STREAM, "GET", "http", "10.0.0.9",
	    "/", NULL);
	dt_send(p, &M);
	dt_upstream_reply(&u,
	    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"
	    "ok");
	cr_assert_eq(dt_recv(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_RESPONSE, "got %s",
	    proto_type_name(M.type));
	cr_assert_eq(M.stream, 1);
	cr_assert_eq(M.response.status, 200);
	cr_assert_eq(dt_recv(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_DATA);
	if (M.data.len > 0) {
		cr_assert_eq(M.data.len, 2);
		cr_assert_arr_eq(M.data.ptr, "ok", 2);
		if (!(M.flags & PROTO_FLAG_END_STREAM)) {
			cr_assert_eq(dt_recv(p, &M), 1);
			cr_assert_eq(M.type, PROTO_MSG_DATA);
			cr_assert_eq(M.data.len, 0);
		}
	}
	cr_assert(M.flags & PROTO_FLAG_END_STREAM);
	/* Idle now: the broker closes the connection. */
	dt_expect_eof(p, &nframes);
	cr_assert_eq(nframes, 0, "%d frames after the stream ended", nframes);
	cr_assert_eq(dt_b.nsessions, 0);
	cr_assert_eq(dt_b.nrequests, 0);
	/* Stream 3 crossed the GOAWAY: never decided. */
	cr_assert_eq(dt_log_count("egress.decision"), 1);
	cr_assert_str_eq(dt_log_last("egress.close", "status"), "200");
	dt_peer_close(p);
	dt_peer_close(q);
	dt_upstream_close(&u);
	free(p);
	free(q);
}
