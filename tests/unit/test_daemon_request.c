/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/request.c, driven directly through a fake guest
 * (a struct guest whose operations record every frame the request sends
 * and keep the protocol state as a session would), with no session at
 * all: invalid heads and denies answered with one ERROR, a broken
 * configuration (policy-unavailable), an allowed request to a loopback
 * upstream the test answers by hand (RESPONSE without hop-by-hop
 * headers, DATA, END_STREAM), a redirect passed back and not followed,
 * request_start_with() deciding with the snapshot it is given, and
 * request_abort() in the middle of the exchange. Each case checks
 * that done is called exactly once (never after an abort) and that the
 * log holds exactly one egress.decision and one egress.close event.
 */
#include <ctype.h>

#include "daemon_test.h"

#include <criterion/parameterized.h>
#include <event2/buffer.h>

#include "broker/guest.h"
#include "broker/request.h"

TestSuite(request, .init = dt_setup, .fini = dt_teardown);

/* ---- the fake guest ---------------------------------------------------- */

struct fg_frame {
	uint8_t type, flags;
	uint32_t stream;
	uint32_t code; /* ERROR */
	int status;    /* RESPONSE */
	size_t len;    /* DATA */
};

struct fg {
	char instance[CONF_NAME_MAX + 1];
	struct proto_conn pc;
	struct guest g;
	struct request *r;
	int done_calls;
	struct fg_frame frames[64];
	size_t nframes;
	char headers[8192]; /* of the RESPONSE: "name: value\n" lines */
	char body[65536];   /* DATA bytes */
	size_t bodylen;
	size_t consumed;
};

static struct fg F;

static struct fg_frame *
fg_record(struct fg *f, uint8_t type, uint8_t flags, uint32_t stream)
{
	struct fg_frame *fr;

	cr_assert_lt(f->nframes, sizeof(f->frames) / sizeof(f->frames[0]));
	fr = &f->frames[f->nframes++];
	memset(fr, 0, sizeof(*fr));
	fr->type = type;
	fr->flags = flags;
	fr->stream = stream;
	return fr;
}

static const char *
fg_instance(void *ctx)
{
	return ((struct fg *)ctx)->instance;
}

static struct proto_conn *
fg_proto(void *ctx)
{
	return &((struct fg *)ctx)->pc;
}

static int
fg_send(void *ctx, struct proto_stream *s, const struct proto_msg *m)
{
	struct fg *f = ctx;
	struct fg_frame *fr;
	size_t i, off;
	int err;

	err = proto_conn_send(&f->pc, s, m, NULL);
	if (err != 0)
		return err;
	fr = fg_record(f, m->type, m->flags, m->stream);
	if (m->type == PROTO_MSG_RESPONSE) {
		fr->status = m->response.status;
		for (i = 0; i < m->nheaders; i++) {
			off = strlen(f->headers);
			(void)snprintf(f->headers + off,
			    sizeof(f->headers) - off, "%.*s: %.*s\n",
			    (int)m->headers[i].name.len,
			    m->headers[i].name.ptr,
			    (int)m->headers[i].value.len,
			    m->headers[i].value.ptr);
		}
	}
	return 0;
}

static void
fg_take_body(struct fg *f, struct evbuffer *buf, size_t n)
{
	cr_assert_leq(f->bodylen + n, sizeof(f->body));
	cr_assert_eq(evbuffer_remove(buf, f->body + f->bodylen, n), (int)n);
	f->bodylen += n;
}

static int
fg_send_data(void *ctx, struct proto_stream *s, struct evbuffer *buf, size_t n,
    uint8_t flags)
{
	static uint8_t frame[PROTO_FRAME_MAX];
	static struct proto_msg m;
	struct fg *f = ctx;
	struct fg_frame *fr;
	int err;

	if (s == NULL) {
		/* An encoded frame already applied to the state. */
		cr_assert_leq(n, sizeof(frame));
		cr_assert_eq(evbuffer_remove(buf, frame, n), (int)n);
		cr_assert_eq(proto_frame_decode(frame, n, &m, NULL), (int)n,
		    "the request queued a bad frame");
		fr = fg_record(f, m.type, m.flags, m.stream);
		if (m.type == PROTO_MSG_DATA) {
			fr->len = m.data.len;
			cr_assert_leq(f->bodylen + m.data.len,
			    sizeof(f->body));
			memcpy(f->body + f->bodylen, m.data.ptr, m.data.len);
			f->bodylen += m.data.len;
		}
		return 0;
	}
	cr_assert_leq(n, proto_conn_sendable(&f->pc, s),
	    "DATA beyond the window");
	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_DATA;
	m.flags = flags;
	m.stream = s->id;
	m.data.len = n;
	err = proto_conn_send(&f->pc, s, &m, NULL);
	if (err != 0)
		return err;
	fr = fg_record(f, PROTO_MSG_DATA, flags, s->id);
	fr->len = n;
	fg_take_body(f, buf, n);
	return 0;
}

static int
fg_send_error(void *ctx, struct proto_stream *s, uint32_t code)
{
	static struct proto_msg m;
	struct fg *f = ctx;
	struct fg_frame *fr;
	int err;

	memset(&m, 0, offsetof(struct proto_msg, headers));
	cr_assert_eq(proto_error_init(&m, s != NULL ? s->id : 0, code), 0);
	err = proto_conn_send(&f->pc, s, &m, NULL);
	if (err != 0)
		return err;
	fr = fg_record(f, PROTO_MSG_ERROR, 0, m.stream);
	fr->code = code;
	return 0;
}

static void
fg_consumed(void *ctx, struct proto_stream *s, size_t n)
{
	((struct fg *)ctx)->consumed += n;
}

static int
fg_can_write(void *ctx)
{
	return 1;
}

static const struct guest_ops fg_ops = {
	.instance = fg_instance,
	.proto = fg_proto,
	.send = fg_send,
	.send_data = fg_send_data,
	.send_error = fg_send_error,
	.consumed = fg_consumed,
	.can_write = fg_can_write,
};

static void
fg_done(void *arg, struct request *r)
{
	struct fg *f = arg;

	cr_assert_eq(r, f->r, "done for another request");
	f->done_calls++;
	request_free(r);
	f->r = NULL;
}

/* A guest of instance whose connection has said HELLO. */
static void
fg_init(struct fg *f, const char *instance)
{
	static struct proto_msg m;

	memset(f, 0, sizeof(*f));
	(void)snprintf(f->instance, sizeof(f->instance), "%s", instance);
	f->g.ops = &fg_ops;
	f->g.ctx = f;
	proto_conn_init(&f->pc, PROTO_ROLE_BROKER);
	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_HELLO;
	m.hello.version = PROTO_VERSION;
	cr_assert_eq(proto_conn_recv(&f->pc, NULL, &m, NULL), PROTO_ACCEPT);
	cr_assert_eq(proto_conn_send(&f->pc, NULL, &m, NULL), 0);
	cr_assert_eq(f->pc.state, PROTO_CONN_OPEN);
}

/* Make a request for m (a REQUEST) and accept it as the session
 * would. */
static void
fg_accept(struct fg *f, struct proto_msg *m)
{
	f->r = request_new(&dt_b, &f->g, m->stream, fg_done, f);
	cr_assert_not_null(f->r);
	cr_assert_eq(proto_conn_recv(&f->pc, request_stream(f->r), m, NULL),
	    PROTO_ACCEPT, "the test REQUEST is not acceptable");
}

/* fg_accept(), then start it. */
static void
fg_start(struct fg *f, struct proto_msg *m)
{
	fg_accept(f, m);
	request_start(f->r, m);
}

/* Run the loop until done was called. */
static void
fg_wait_done(struct fg *f)
{
	int i;

	for (i = 0; i < DT_ITERS && f->done_calls == 0; i++)
		dt_step(-1);
	cr_assert_eq(f->done_calls, 1, "done never called");
}

/* Assert the log holds exactly one decision and one close event. */
static void
expect_one_decision_and_close(const char *name)
{
	cr_assert_eq(dt_log_count("egress.decision"), 1,
	    "%s: %zu decision events", name, dt_log_count("egress.decision"));
	cr_assert_eq(dt_log_count("egress.close"), 1, "%s: %zu close events",
	    name, dt_log_count("egress.close"));
}

static struct proto_msg M;

/* The request was answered at once with one ERROR unavailable, and
 * logged as policy-unavailable. */
static void
expect_unavailable(const char *name)
{
	cr_assert_eq(F.done_calls, 1, "%s", name);
	cr_assert_eq(F.nframes, 1, "%s", name);
	cr_assert_eq(F.frames[0].type, PROTO_MSG_ERROR, "%s", name);
	cr_assert_eq(F.frames[0].code, PROTO_CODE_UNAVAILABLE, "%s: code %s",
	    name, proto_code_name(F.frames[0].code));
	expect_one_decision_and_close(name);
	cr_assert_str_eq(dt_log_last("egress.decision", "reason"),
	    "policy-unavailable", "%s", name);
}

/* ---- answered at once -------------------------------------------------- */

struct at_once_case {
	char name[32];
	char instance[16];
	uint8_t transport;
	char method[16];
	char scheme[8];
	char authority[48]; /* "UP": the loopback upstream */
	char path[32];
	char headers[128]; /* "Name: value\n" lines */
	int end_stream;
	uint32_t code;	 /* the ERROR code */
	char reason[24]; /* the decision's reason */
};

ParameterizedTestParameters(request, at_once)
{
	static struct at_once_case cases[] = {
		{ "bad-method", "app", PROTO_TRANSPORT_HTTP, "G(T", "http",
		    "UP", "/", "", 1, PROTO_CODE_INVALID_REQUEST,
		    "invalid-request" },
		{ "connect", "app", PROTO_TRANSPORT_HTTP, "CONNECT", "http",
		    "UP", "/", "", 1, PROTO_CODE_INVALID_REQUEST,
		    "invalid-request" },
		{ "host-differs", "app", PROTO_TRANSPORT_HTTP, "GET", "http",
		    "UP", "/", "Host: other.example\n", 1,
		    PROTO_CODE_INVALID_REQUEST, "invalid-request" },
		{ "length-with-end-stream", "app", PROTO_TRANSPORT_HTTP,
		    "POST", "http", "UP", "/", "Content-Length: 5\n", 1,
		    PROTO_CODE_INVALID_REQUEST, "invalid-request" },
		{ "websocket-transport", "app", PROTO_TRANSPORT_WEBSOCKET,
		    "GET", "http", "UP", "/", "", 1,
		    PROTO_CODE_INVALID_REQUEST, "invalid-request" },
		{ "ftp-scheme", "app", PROTO_TRANSPORT_HTTP, "GET", "ftp",
		    "UP", "/", "", 1, PROTO_CODE_INVALID_REQUEST,
		    "invalid-request" },
		{ "bad-authority", "app", PROTO_TRANSPORT_HTTP, "GET", "http",
		    "127.0.0.1:0", "/", "", 1, PROTO_CODE_INVALID_REQUEST,
		    "invalid-request" },
		{ "unknown-instance", "nobody", PROTO_TRANSPORT_HTTP, "GET",
		    "http", "UP", "/", "", 1, PROTO_CODE_DENIED,
		    "unknown-instance" },
		{ "not-granted", "app", PROTO_TRANSPORT_HTTP, "GET", "http",
		    "10.0.0.9", "/", "", 1, PROTO_CODE_DENIED, "not-granted" },
		{ "metadata-literal", "app", PROTO_TRANSPORT_HTTP, "GET",
		    "http", "169.254.169.254", "/latest/meta-data/", "", 1,
		    PROTO_CODE_DENIED, "metadata" },
		/* Without END_STREAM the deny still closes the stream. */
		{ "denied-with-body", "app", PROTO_TRANSPORT_HTTP, "POST",
		    "http", "169.254.169.254", "/", "Content-Length: 5\n", 0,
		    PROTO_CODE_DENIED, "metadata" },
	};

	return cr_make_param_array(struct at_once_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct at_once_case *c, request, at_once)
{
	char hdrs[sizeof(c->headers)];
	struct dt_upstream u;
	const char *auth;
	int fd;

	dt_upstream_open(&u);
	auth = strcmp(c->authority, "UP") == 0 ? u.authority : c->authority;
	fg_init(&F, c->instance);
	memcpy(hdrs, c->headers, sizeof(hdrs));
	dt_request(&M, 1, c->end_stream ? PROTO_FLAG_END_STREAM : 0, c->method,
	    c->scheme, auth, c->path, hdrs);
	M.request.transport = c->transport;
	fg_start(&F, &M);
	cr_assert_eq(F.done_calls, 1, "%s: done called %d times", c->name,
	    F.done_calls);
	cr_assert_eq(F.nframes, 1, "%s: %zu frames", c->name, F.nframes);
	cr_assert_eq(F.frames[0].type, PROTO_MSG_ERROR, "%s", c->name);
	cr_assert_eq(F.frames[0].stream, 1);
	cr_assert_eq(F.frames[0].code, c->code, "%s: code %s", c->name,
	    proto_code_name(F.frames[0].code));
	expect_one_decision_and_close(c->name);
	cr_assert_str_eq(dt_log_last("egress.decision", "verdict"), "deny");
	cr_assert_str_eq(dt_log_last("egress.decision", "reason"), c->reason,
	    "%s", c->name);
	cr_assert_str_eq(dt_log_last("egress.close", "error"),
	    proto_code_name(c->code), "%s", c->name);
	cr_assert_str_eq(dt_log_last("egress.close", "connected"), "null");
	cr_assert_str_eq(dt_log_last("egress.decision", "instance"),
	    c->instance);
	/* Nothing was connected, nothing is held. */
	fd = accept4(u.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	cr_assert_lt(fd, 0, "%s: the upstream was dialled", c->name);
	cr_assert_eq(lease_count(dt_b.leases, c->instance), 0);
	cr_assert_eq(dt_b.nrequests, 0);
	dt_upstream_close(&u);
}

Test(request, policy_unavailable)
{
	struct dt_upstream u;

	dt_upstream_open(&u);
	dt_break_conf();
	fg_init(&F, "app");
	dt_request(&M, 1, PROTO_FLAG_END_STREAM, "GET", "http", u.authority,
	    "/", NULL);
	fg_start(&F, &M);
	expect_unavailable("policy-unavailable");
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "unavailable");
	cr_assert_eq(dt_log_count("egress.config"), 1,
	    "the broken file was not reported once");
	dt_upstream_close(&u);
}

/* Make a request for m and start it with snapshot ref, as the proxy
 * front does after its own look at the files. */
static void
fg_start_with(struct fg *f, struct proto_msg *m, struct confref *ref)
{
	fg_accept(f, m);
	request_start_with(f->r, m, ref);
}

/* request_start_with() decides with the snapshot it is given, not with
 * a look of its own: one taken before the files broke still allows. Once
 * its new connection is up, the request is decided again on the files in
 * force (as after a reload while connecting): broken, it is not sent,
 * and the guest gets unavailable. */
Test(request, start_with_decides_with_the_given_snapshot)
{
	struct dt_upstream u;
	struct confref *ref;
	int i;

	dt_upstream_open(&u);
	ref = confstate_get_for(&dt_b.conf, "app");
	cr_assert_not_null(ref);
	dt_break_conf();
	fg_init(&F, "app");
	dt_request(&M, 1, PROTO_FLAG_END_STREAM, "GET", "http", u.authority,
	    "/", NULL);
	fg_start_with(&F, &M, ref);
	confref_unref(ref);
	cr_assert_eq(F.done_calls, 0, "refused: the files were read again");
	cr_assert_eq(dt_log_count("egress.config"), 0,
	    "the broken files were read");
	for (i = 0; i < DT_ITERS && F.done_calls == 0; i++) {
		dt_upstream_read(&u);
		dt_step(-1);
	}
	cr_assert_eq(F.done_calls, 1);
	F.r = NULL;
	/* The guest hears what a new request would: unavailable. */
	cr_assert_eq(F.frames[F.nframes - 1].type, PROTO_MSG_ERROR);
	cr_assert_eq(F.frames[F.nframes - 1].code, PROTO_CODE_UNAVAILABLE,
	    "code %s", proto_code_name(F.frames[F.nframes - 1].code));
	cr_assert_str_eq(dt_log_last("egress.decision", "verdict"), "allow");
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "revoked");
	cr_assert_str_eq(dt_log_last("egress.close", "reason"),
	    "policy-unavailable");
	dt_upstream_read(&u);
	cr_assert_eq(u.reqlen, 0, "the request went out: %s", u.req);
	dt_upstream_close(&u);
}

/* With no snapshot given, the request is policy-unavailable even though
 * the files are intact. */
Test(request, start_with_no_snapshot_is_unavailable)
{
	struct dt_upstream u;

	dt_upstream_open(&u);
	fg_init(&F, "app");
	dt_request(&M, 1, PROTO_FLAG_END_STREAM, "GET", "http", u.authority,
	    "/", NULL);
	fg_start_with(&F, &M, NULL);
	expect_unavailable("no snapshot");
	dt_upstream_close(&u);
}

/* ---- through the loopback upstream ------------------------------------ */

/* Answer whether the recorded RESPONSE headers hold the line. */
static int
has_header(const char *line)
{
	char want[256];

	(void)snprintf(want, sizeof(want), "%s\n", line);
	return strstr(F.headers, want) != NULL;
}

static int
has_header_name(const char *name)
{
	char want[64], low[sizeof(F.headers)];
	size_t i;

	for (i = 0; F.headers[i] != '\0'; i++)
		low[i] = (char)tolower((unsigned char)F.headers[i]);
	low[i] = '\0';
	(void)snprintf(want, sizeof(want), "%s:", name);
	return strncmp(low, want, strlen(want)) == 0 ||
	    (snprintf(want, sizeof(want), "\n%s:", name) > 0 &&
		strstr(low, want) != NULL);
}

/* Start GET path on the upstream u and wait until its head arrived. */
static void
start_get(struct dt_upstream *u, const char *path, char *hdrs)
{
	fg_init(&F, "app");
	dt_request(&M, 1, PROTO_FLAG_END_STREAM, "GET", "http", u->authority,
	    path, hdrs);
	fg_start(&F, &M);
	cr_assert_eq(F.done_calls, 0, "finished before the upstream answered");
	cr_assert_eq(F.nframes, 0);
	dt_upstream_wait_request(u);
}

Test(request, allowed_response_streamed_back)
{
	char hdrs[] = "Accept: text/plain\nConnection: close\nX-Test: 1\n";
	char want_host[64];
	struct dt_upstream u;
	size_t i;

	dt_upstream_open(&u);
	start_get(&u, "/path?q=1", hdrs);
	cr_assert(strncmp(u.req, "GET /path?q=1 HTTP/1.1\r\n", 24) == 0,
	    "upstream got: %s", u.req);
	(void)snprintf(want_host, sizeof(want_host), "\r\nHost: %s\r\n",
	    u.authority);
	cr_assert_not_null(strstr(u.req, want_host), "no Host: %s", u.req);
	cr_assert_not_null(strstr(u.req, "\r\nX-Test: 1\r\n"));
	cr_assert_eq(lease_count(dt_b.leases, "app"), 1);
	dt_upstream_reply(&u,
	    "HTTP/1.1 200 OK\r\n"
	    "Content-Type: text/plain\r\n"
	    "Connection: keep-alive, X-Hop\r\n"
	    "Keep-Alive: timeout=5\r\n"
	    "X-Hop: named-by-connection\r\n"
	    "Transfer-Encoding: chunked\r\n"
	    "X-Up: yes\r\n"
	    "\r\n"
	    "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
	fg_wait_done(&F);
	cr_assert_geq(F.nframes, 2);
	cr_assert_eq(F.frames[0].type, PROTO_MSG_RESPONSE);
	cr_assert_eq(F.frames[0].status, 200);
	cr_assert_eq(F.frames[0].flags & PROTO_FLAG_END_STREAM, 0);
	cr_assert(has_header("Content-Type: text/plain"), "%s", F.headers);
	cr_assert(has_header("X-Up: yes"), "%s", F.headers);
	cr_assert_not(has_header_name("connection"), "%s", F.headers);
	cr_assert_not(has_header_name("keep-alive"), "%s", F.headers);
	cr_assert_not(has_header_name("transfer-encoding"), "%s", F.headers);
	cr_assert_not(has_header_name("x-hop"), "%s", F.headers);
	for (i = 1; i < F.nframes; i++) {
		cr_assert_eq(F.frames[i].type, PROTO_MSG_DATA, "frame %zu: %s",
		    i, proto_type_name(F.frames[i].type));
		cr_assert_eq((F.frames[i].flags & PROTO_FLAG_END_STREAM) != 0,
		    i == F.nframes - 1, "END_STREAM on frame %zu of %zu", i,
		    F.nframes);
	}
	cr_assert_eq(F.bodylen, 11);
	cr_assert_arr_eq(F.body, "hello world", 11);
	expect_one_decision_and_close("allowed");
	cr_assert_str_eq(dt_log_last("egress.decision", "verdict"), "allow");
	cr_assert_str_eq(dt_log_last("egress.close", "status"), "200");
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "null");
	cr_assert_str_eq(dt_log_last("egress.close", "connected"),
	    "127.0.0.1");
	cr_assert_str_eq(dt_log_last("egress.close", "bytes_in"), "11");
	cr_assert_eq(dt_b.nrequests, 0);
	dt_upstream_close(&u);
}

/*
 * The upstream answered in full while the guest had not ended its side
 * (here: its whole body sent, as its length said, but no END_STREAM).
 * The guest's end is due within its between-bytes gap; a guest that
 * never sends it gets ERROR timeout then, and the stream is freed
 * (before, it stayed for good, a few KiB each, on every stream slot of
 * every session). The answer stays whole.
 */
Test(request, a_guest_that_never_ends_after_the_answer_is_closed)
{
	char hdrs[] = "Content-Length: 4\n";
	static struct proto_msg d;
	struct dt_upstream u;
	size_t i;

	dt_upstream_open(&u);
	fg_init(&F, "app");
	dt_request(&M, 1, 0, "POST", "http", u.authority, "/upload", hdrs);
	M.request.timeouts.between_bytes_ms = 200;
	fg_start(&F, &M);
	/* The whole body, as its length says, but no end of the stream. */
	dt_msg(&d, PROTO_MSG_DATA, 0, 1);
	d.data.ptr = (const uint8_t *)"body";
	d.data.len = 4;
	cr_assert_eq(proto_conn_recv(&F.pc, request_stream(F.r), &d, NULL),
	    PROTO_ACCEPT);
	cr_assert_eq(evbuffer_add(request_body_buffer(F.r), "body", 4), 0);
	request_on_body(F.r, 4, 0);
	for (i = 0; i < DT_ITERS && strstr(u.req, "\r\n\r\nbody") == NULL;
	     i++) {
		dt_upstream_read(&u);
		dt_step(u.cfd >= 0 ? u.cfd : u.lfd);
	}
	cr_assert_not_null(strstr(u.req, "\r\n\r\nbody"), "%s", u.req);
	dt_upstream_reply(&u,
	    "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok");
	for (i = 0; i < DT_ITERS && F.done_calls == 0; i++)
		dt_step(-1);
	cr_assert_eq(F.done_calls, 1, "the stream was never closed");
	cr_assert_eq(F.frames[0].type, PROTO_MSG_RESPONSE);
	cr_assert_eq(F.frames[0].status, 201);
	cr_assert_eq(F.bodylen, 2);
	cr_assert_geq(F.nframes, 3);
	cr_assert_neq(F.frames[F.nframes - 2].flags & PROTO_FLAG_END_STREAM, 0,
	    "the answer was not ended before the ERROR");
	cr_assert_eq(F.frames[F.nframes - 1].type, PROTO_MSG_ERROR);
	cr_assert_str_eq(proto_code_name(F.frames[F.nframes - 1].code),
	    "timeout");
	expect_one_decision_and_close("early answer");
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "null");
	dt_upstream_close(&u);
}

Test(request, redirect_passed_back_not_followed)
{
	struct dt_upstream u;
	int fd;

	dt_upstream_open(&u);
	start_get(&u, "/moved", NULL);
	dt_upstream_reply(&u,
	    "HTTP/1.1 302 Found\r\n"
	    "Location: http://169.254.169.254/latest/\r\n"
	    "Content-Length: 0\r\n"
	    "\r\n");
	fg_wait_done(&F);
	cr_assert_eq(F.frames[0].type, PROTO_MSG_RESPONSE);
	cr_assert_eq(F.frames[0].status, 302);
	cr_assert(has_header("Location: http://169.254.169.254/latest/"), "%s",
	    F.headers);
	cr_assert_eq(F.frames[F.nframes - 1].flags & PROTO_FLAG_END_STREAM,
	    PROTO_FLAG_END_STREAM);
	cr_assert_eq(F.bodylen, 0);
	/* One decision: the Location was never decided on or dialled. */
	expect_one_decision_and_close("redirect");
	cr_assert_str_eq(dt_log_last("egress.close", "status"), "302");
	fd = accept4(u.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	cr_assert_lt(fd, 0, "a second connection was made");
	dt_upstream_close(&u);
}

/* The upstream's body cut short is an ERROR, never a clean END_STREAM. */
Test(request, upstream_cut_short)
{
	struct dt_upstream u;
	size_t i;

	dt_upstream_open(&u);
	start_get(&u, "/short", NULL);
	dt_upstream_reply(&u,
	    "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"
	    "abc");
	(void)close(u.cfd);
	u.cfd = -1;
	fg_wait_done(&F);
	cr_assert_eq(F.frames[0].type, PROTO_MSG_RESPONSE);
	cr_assert_eq(F.frames[F.nframes - 1].type, PROTO_MSG_ERROR);
	cr_assert_eq(F.frames[F.nframes - 1].code,
	    PROTO_CODE_UPSTREAM_PROTOCOL, "code %s",
	    proto_code_name(F.frames[F.nframes - 1].code));
	for (i = 0; i < F.nframes; i++)
		cr_assert_eq(F.frames[i].flags & PROTO_FLAG_END_STREAM, 0,
		    "END_STREAM on frame %zu", i);
	expect_one_decision_and_close("cut-short");
	cr_assert_str_eq(dt_log_last("egress.close", "error"),
	    "upstream-protocol-error");
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	dt_upstream_close(&u);
}

Test(request, abort_mid_exchange)
{
	struct dt_upstream u;
	int i;

	dt_upstream_open(&u);
	start_get(&u, "/slow", NULL);
	/* The head and part of the body are through. */
	dt_upstream_reply(&u,
	    "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
	    "partial");
	for (i = 0; i < DT_ITERS && F.bodylen < 7; i++)
		dt_step(-1);
	cr_assert_eq(F.bodylen, 7);
	cr_assert_eq(F.frames[0].type, PROTO_MSG_RESPONSE);
	cr_assert_eq(lease_count(dt_b.leases, "app"), 1);
	request_abort(F.r);
	F.r = NULL;
	cr_assert_eq(F.done_calls, 0, "done called for an aborted request");
	cr_assert_eq(dt_b.nrequests, 0);
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0, "lease kept");
	dt_upstream_wait_eof(&u);
	/* Sends nothing. */
	cr_assert_eq(F.frames[F.nframes - 1].type, PROTO_MSG_DATA);
	cr_assert_eq(F.frames[F.nframes - 1].flags & PROTO_FLAG_END_STREAM, 0);
	expect_one_decision_and_close("abort");
	cr_assert_str_eq(dt_log_last("egress.decision", "verdict"), "allow");
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "cancelled");
	cr_assert_str_eq(dt_log_last("egress.close", "status"), "200");
	for (i = 0; i < 10; i++)
		dt_step(-1);
	cr_assert_eq(F.done_calls, 0);
	dt_upstream_close(&u);
}

/* Aborted before the upstream answered anything. */
Test(request, abort_before_response)
{
	struct dt_upstream u;

	dt_upstream_open(&u);
	start_get(&u, "/quiet", NULL);
	request_abort(F.r);
	F.r = NULL;
	dt_upstream_wait_eof(&u);
	cr_assert_eq(F.done_calls, 0);
	cr_assert_eq(F.nframes, 0, "the abort sent %zu frames", F.nframes);
	expect_one_decision_and_close("abort-before-response");
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "cancelled");
	cr_assert_str_eq(dt_log_last("egress.close", "status"), "null");
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	dt_upstream_close(&u);
}
