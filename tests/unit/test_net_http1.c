/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/net/http1: the HTTP/1.1 exchange over a
 * socketpair whose other
 * end plays a scripted upstream: content-length and chunked bodies,
 * trailers, CL+TE and bad lengths refused, oversized heads refused, cut
 * bodies reported as errors, 3xx returned untouched, interim responses,
 * keep-alive reporting, request framing, flow control and timeouts. The
 * response table runs twice: with borrowed body pieces (on_data) and with
 * moved ones (http1_set_body_buffer), which must agree byte for byte.
 */
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "broker/net/http1.h"

#include "tests/unit/http1_test.h"

/* ---- exchange harness ------------------------------------------------- */

struct ex {
	struct event_base *base;
	struct bufferevent *bev;
	struct http1_exchange *x;
	int fd; /* the upstream's end */
	int heads, ends, datas;
	int status;
	char location[128];
	int64_t content_length;
	char body[1 << 16];
	size_t body_len;
	size_t total_body;
	char trailers[256];
	int err;
	int pause_on_data;
	int leave_in_place; /* buffer callback removes nothing */
	int free_on_head;
	int writable;
};

static void
ex_on_head(void *arg, const struct http1_response *r)
{
	struct ex *e = arg;
	size_t i;

	e->heads++;
	e->status = r->status;
	e->content_length = r->content_length;
	for (i = 0; i < r->nheaders; i++)
		if (r->headers[i].name_len == 8 &&
		    strncasecmp(r->headers[i].name, "location", 8) == 0)
			(void)snprintf(e->location, sizeof(e->location),
			    "%.*s", (int)r->headers[i].value_len,
			    r->headers[i].value);
	if (e->free_on_head) {
		http1_exchange_free(e->x);
		e->x = NULL;
	}
}

static void
ex_on_data(void *arg, const char *p, size_t n)
{
	struct ex *e = arg;

	e->datas++;
	if (e->body_len + n <= sizeof(e->body)) {
		memcpy(e->body + e->body_len, p, n);
		e->body_len += n;
	}
	e->total_body += n;
	if (e->pause_on_data)
		http1_pause_read(e->x);
}

/* The moving variant: take n bytes out of in as the broker does. */
static void
ex_on_data_buffer(void *arg, struct evbuffer *in, size_t n)
{
	struct ex *e = arg;
	struct evbuffer *dst;
	size_t room;

	e->datas++;
	cr_assert_geq(evbuffer_get_length(in), n);
	e->total_body += n;
	if (!e->leave_in_place) {
		dst = evbuffer_new();
		cr_assert(dst != NULL);
		cr_assert_eq(evbuffer_remove_buffer(in, dst, n), (int)n);
		room = sizeof(e->body) - e->body_len;
		e->body_len += (size_t)evbuffer_remove(dst,
		    e->body + e->body_len, n < room ? n : room);
		evbuffer_free(dst);
	}
	if (e->pause_on_data)
		http1_pause_read(e->x);
}

static void
ex_on_end(void *arg, int err, const struct http1_header *t, size_t n)
{
	struct ex *e = arg;
	size_t i;

	e->ends++;
	e->err = err;
	for (i = 0; i < n; i++) {
		size_t l = strlen(e->trailers);

		(void)snprintf(e->trailers + l, sizeof(e->trailers) - l,
		    "%.*s=%.*s;", (int)t[i].name_len, t[i].name,
		    (int)t[i].value_len, t[i].value);
	}
}

static void
ex_on_writable(void *arg)
{
	struct ex *e = arg;

	e->writable++;
}

static const struct http1_callbacks ex_cbs = {
	ex_on_head,
	ex_on_data,
	ex_on_end,
	ex_on_writable,
};

static void
ex_start(struct ex *e, const char *method, int64_t body_length,
    const char *headers, int keep_alive, const struct http1_timeouts *t)
{
	struct http1_header in[MAXH], kept[MAXH];
	struct http1_head head, out;
	struct policy_dest d;
	char text[512];
	int sv[2];

	memset(e, 0, sizeof(*e));
	e->base = event_base_new();
	cr_assert(e->base != NULL);
	cr_assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	cr_assert(evutil_make_socket_nonblocking(sv[0]) == 0);
	e->fd = sv[1];
	e->bev = bufferevent_socket_new(e->base, sv[0], BEV_OPT_CLOSE_ON_FREE);
	cr_assert(e->bev != NULL);
	dest_parse("http://api.example.com/", &d);
	(void)snprintf(text, sizeof(text), "%s", headers);
	memset(&head, 0, sizeof(head));
	head.method = method;
	head.method_len = strlen(method);
	head.path = "/p?q=1";
	head.path_len = 6;
	head.headers = in;
	head.nheaders = headers[0] != '\0' ? split_headers(text, in) : 0;
	cr_assert_eq(http1_request_check(&d, &head, kept, MAXH, &out, NULL),
	    0);
	out.body_length = body_length;
	cr_assert_eq(http1_exchange_new(e->bev, &d, &out, keep_alive, t,
			 &ex_cbs, e, &e->x),
	    0);
}

static void
ex_send(struct ex *e, const void *p, size_t n)
{
	cr_assert_eq(write(e->fd, p, n), (ssize_t)n);
}

static void
ex_run(struct ex *e)
{
	while (e->ends == 0 && !(e->free_on_head && e->heads > 0))
		cr_assert(event_base_loop(e->base, EVLOOP_ONCE) == 0);
}

static void
ex_done(struct ex *e)
{
	http1_exchange_free(e->x);
	bufferevent_free(e->bev);
	close(e->fd);
	event_base_free(e->base);
}

/* Read what the broker sent, spinning the loop until want bytes or EOF. */
static size_t
ex_read_request(struct ex *e, char *buf, size_t max, const char *until)
{
	size_t n = 0;
	ssize_t r;
	int fl = fcntl(e->fd, F_GETFL);

	(void)fcntl(e->fd, F_SETFL, fl | O_NONBLOCK);
	for (;;) {
		(void)event_base_loop(e->base, EVLOOP_NONBLOCK);
		r = read(e->fd, buf + n, max - 1 - n);
		if (r > 0) {
			n += (size_t)r;
			buf[n] = '\0';
			if (strstr(buf, until) != NULL)
				break;
		} else if (r == 0)
			break;
		else
			cr_assert(errno == EAGAIN, "read: %s",
			    strerror(errno));
	}
	(void)fcntl(e->fd, F_SETFL, fl);
	buf[n] = '\0';
	return n;
}

/* ---- response tables -------------------------------------------------- */

struct resp_case {
	char name[32];
	char method[8];
	char response[400];
	int close_after; /* shut down the upstream's write side */
	int err;
	int status;
	char body[64];
	int reusable;
	char trailers[64];
};

static struct resp_case resp_cases[] = {
	{ "content-length", "GET",
	    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 0, 0, 200,
	    "hello", 1, "" },
	{ "chunked+trailer", "GET",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "5\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 9\r\n\r\n",
	    0, 0, 200, "hello world", 1, "X-Sum=9;" },
	{ "cl+te", "GET",
	    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	    0, EGRESS_ERR_UPSTREAM_PROTOCOL, 0, "", 0, "" },
	{ "te+cl", "GET",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
	    "Content-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	    0, EGRESS_ERR_UPSTREAM_PROTOCOL, 0, "", 0, "" },
	{ "te-gzip", "GET",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxx", 1,
	    EGRESS_ERR_UPSTREAM_PROTOCOL, 0, "", 0, "" },
	{ "bad-length", "GET",
	    "HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\nhello", 0,
	    EGRESS_ERR_UPSTREAM_PROTOCOL, 0, "", 0, "" },
	{ "negative-length", "GET",
	    "HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\nhello", 0,
	    EGRESS_ERR_UPSTREAM_PROTOCOL, 0, "", 0, "" },
	{ "two-lengths", "GET",
	    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
	    "Content-Length: 6\r\n\r\nhello!",
	    0, EGRESS_ERR_UPSTREAM_PROTOCOL, 0, "", 0, "" },
	{ "cut-length", "GET",
	    "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", 1,
	    EGRESS_ERR_UPSTREAM_PROTOCOL, 200, "hello", 0, "" },
	{ "cut-chunked", "GET",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "5\r\nhello\r\n",
	    1, EGRESS_ERR_UPSTREAM_PROTOCOL, 200, "hello", 0, "" },
	{ "cut-head", "GET", "HTTP/1.1 200 OK\r\nContent-Le", 1,
	    EGRESS_ERR_UPSTREAM_PROTOCOL, 0, "", 0, "" },
	{ "nothing", "GET", "", 1, EGRESS_ERR_UPSTREAM_PROTOCOL, 0, "", 0,
	    "" },
	{ "until-eof", "GET", "HTTP/1.1 200 OK\r\n\r\nall of it", 1, 0, 200,
	    "all of it", 0, "" },
	{ "redirect", "GET",
	    "HTTP/1.1 302 Found\r\n"
	    "Location: http://169.254.169.254/\r\n"
	    "Content-Length: 0\r\n\r\n",
	    0, 0, 302, "", 1, "" },
	{ "interim", "GET",
	    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early\r\n"
	    "Link: x\r\n\r\nHTTP/1.1 201 Created\r\n"
	    "Content-Length: 2\r\n\r\nok",
	    0, 0, 201, "ok", 1, "" },
	{ "interim-16", "GET",
	    "HTTP/1.1 100 X\r\n\r\nHTTP/1.1 100 X\r\n\r\n"
	    "HTTP/1.1 100 X\r\n\r\nHTTP/1.1 100 X\r\n\r\n"
	    "HTTP/1.1 100 X\r\n\r\nHTTP/1.1 100 X\r\n\r\n"
	    "HTTP/1.1 100 X\r\n\r\nHTTP/1.1 100 X\r\n\r\n"
	    "HTTP/1.1 100 X\r\n\r\nHTTP/1.1 100 X\r\n\r\n"
	    "HTTP/1.1 100 X\r\n\r\nHTTP/1.1 100 X\r\n\r\n"
	    "HTTP/1.1 100 X\r\n\r\nHTTP/1.1 100 X\r\n\r\n"
	    "HTTP/1.1 100 X\r\n\r\nHTTP/1.1 100 X\r\n\r\n"
	    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	    0, 0, 200, "ok", 1, "" },
	{ "interim-17", "GET",
	    "HTTP/1.1 100 X\r\n\r\nHTTP/1.1 100 X\r\n\r\n"
	    "HTTP/1.1 100 X\r\n\r\nHTTP/1.1 100 X\r\n\r\n"
	    "HTTP/1.1 100 X\r\n\r\nHTTP/1.1 100 X\r\n\r\n"
	    "HTTP/1.1 100 X\r\n\r\nHTTP/1.1 100 X\r\n\r\n"
	    "HTTP/1.1 100 X\r\n\r\nHTTP/1.1 100 X\r\n\r\n"
	    "HTTP/1.1 100 X\r\n\r\nHTTP/1.1 100 X\r\n\r\n"
	    "HTTP/1.1 100 X\r\n\r\nHTTP/1.1 100 X\r\n\r\n"
	    "HTTP/1.1 100 X\r\n\r\nHTTP/1.1 100 X\r\n\r\n"
	    "HTTP/1.1 100 X\r\n\r\n"
	    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	    0, EGRESS_ERR_UPSTREAM_PROTOCOL, 0, "", 0, "" },
	{ "switching", "GET",
	    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n"
	    "Connection: upgrade\r\n\r\n",
	    0, EGRESS_ERR_UPSTREAM_PROTOCOL, 0, "", 0, "" },
	{ "no-content", "GET", "HTTP/1.1 204 No Content\r\n\r\n", 0, 0, 204,
	    "", 1, "" },
	{ "head", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", 0,
	    0, 200, "", 1, "" },
	{ "close", "GET",
	    "HTTP/1.1 200 OK\r\nConnection: close\r\n"
	    "Content-Length: 2\r\n\r\nok",
	    0, 0, 200, "ok", 0, "" },
	{ "http10", "GET", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 0,
	    0, 200, "ok", 0, "" },
	{ "stray-bytes", "GET",
	    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"
	    "okHTTP/1.1 200",
	    0, 0, 200, "ok", 0, "" },
	{ "garbage", "GET", "SSH-2.0-OpenSSH\r\n\r\n", 0,
	    EGRESS_ERR_UPSTREAM_PROTOCOL, 0, "", 0, "" },
	{ "bad-status", "GET", "HTTP/1.1 999 Nine\r\n\r\n", 0,
	    EGRESS_ERR_UPSTREAM_PROTOCOL, 0, "", 0, "" },
	{ "bad-chunk", "GET",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "zz\r\nhello\r\n0\r\n\r\n",
	    0, EGRESS_ERR_UPSTREAM_PROTOCOL, 200, "", 0, "" },
	/* A space before the colon makes no name: refused, never passed
	 * on as framing no check by name would see. */
	{ "spaced-length", "GET",
	    "HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello", 0,
	    EGRESS_ERR_UPSTREAM_PROTOCOL, 0, "", 0, "" },
	{ "spaced-te", "GET",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding : chunked\r\n\r\n"
	    "5\r\nhello\r\n0\r\n\r\n",
	    0, EGRESS_ERR_UPSTREAM_PROTOCOL, 0, "", 0, "" },
	{ "spaced-trailer", "GET",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "5\r\nhello\r\n0\r\nX-Sum : 9\r\n\r\n",
	    0, EGRESS_ERR_UPSTREAM_PROTOCOL, 200, "hello", 0, "" },
	{ "bare-lf-in-header", "GET",
	    "HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 0\r\n\r\n", 0,
	    EGRESS_ERR_UPSTREAM_PROTOCOL, 0, "", 0, "" },
	/* 204 and 304 never carry a body, whatever they announce. */
	{ "304-with-length", "GET",
	    "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", 0, 0,
	    304, "", 1, "" },
	{ "204-with-length-and-bytes", "GET",
	    "HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\nabc", 0, 0,
	    204, "", 0, "" },
	/* Nor does a 1xx: its Content-Length must not eat the
		 * final response (found by fuzzing the moved path). */
	{ "interim-with-length", "GET",
	    "HTTP/1.1 104 Upload\r\nContent-Length: 4\r\n\r\n"
	    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	    0, 0, 200, "ok", 1, "" },
	{ "chunked-many", "GET",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "1\r\na\r\n2\r\nbc\r\n3;ext=1\r\ndef\r\n0\r\n\r\n",
	    0, 0, 200, "abcdef", 1, "" },
	{ "chunked-stray", "GET",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "2\r\nok\r\n0\r\n\r\nX",
	    0, 0, 200, "ok", 0, "" },
	{ "until-eof-moved", "GET",
	    "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n0123456789", 1, 0,
	    200, "0123456789", 0, "" },
};

ParameterizedTestParameters(broker_http1, response)
{
	return cr_make_param_array(struct resp_case, resp_cases,
	    sizeof(resp_cases) / sizeof(resp_cases[0]));
}

ParameterizedTestParameters(broker_http1, response_moved)
{
	return cr_make_param_array(struct resp_case, resp_cases,
	    sizeof(resp_cases) / sizeof(resp_cases[0]));
}

static void
run_resp_case(const struct resp_case *c, int moved)
{
	static struct ex e;
	char req[1024];

	ex_start(&e, c->method, 0, "", 1, NULL);
	if (moved)
		http1_set_body_buffer(e.x, ex_on_data_buffer);
	(void)ex_read_request(&e, req, sizeof(req), "\r\n\r\n");
	ex_send(&e, c->response, strlen(c->response));
	if (c->close_after)
		cr_assert(shutdown(e.fd, SHUT_WR) == 0);
	ex_run(&e);
	cr_assert_eq(e.ends, 1);
	cr_assert_eq(e.err, c->err, "%s: err %d", c->name, e.err);
	cr_assert_eq(e.heads, c->status != 0 ? 1 : 0, "%s: heads %d", c->name,
	    e.heads);
	if (c->status != 0)
		cr_assert_eq(e.status, c->status);
	cr_assert_eq(e.body_len, strlen(c->body), "%s: body '%.*s'", c->name,
	    (int)e.body_len, e.body);
	cr_assert(memcmp(e.body, c->body, e.body_len) == 0);
	cr_assert_eq(http1_is_reusable(e.x), c->reusable, "%s: reusable",
	    c->name);
	cr_assert_str_eq(e.trailers, c->trailers);
	if (strcmp(c->name, "redirect") == 0)
		cr_assert_str_eq(e.location, "http://169.254.169.254/");
	ex_done(&e);
}

ParameterizedTest(struct resp_case *c, broker_http1, response)
{
	run_resp_case(c, 0);
}

ParameterizedTest(struct resp_case *c, broker_http1, response_moved)
{
	run_resp_case(c, 1);
}

/* Bytes a buffer callback leaves in place are discarded, and framing
 * after them still parses. */
Test(broker_http1, moved_left_in_place_is_discarded)
{
	static struct ex e;
	char req[1024];
	const char *r = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			"5\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n";
	const char *r2 = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody";

	ex_start(&e, "GET", 0, "", 1, NULL);
	http1_set_body_buffer(e.x, ex_on_data_buffer);
	e.leave_in_place = 1;
	(void)ex_read_request(&e, req, sizeof(req), "\r\n\r\n");
	ex_send(&e, r, strlen(r));
	ex_run(&e);
	cr_assert_eq(e.err, 0);
	cr_assert_eq(e.total_body, 11);
	cr_assert_eq(e.body_len, 0);
	cr_assert_str_eq(e.trailers, "X-T=1;");
	cr_assert(http1_is_reusable(e.x));
	ex_done(&e);

	ex_start(&e, "GET", 0, "", 1, NULL);
	http1_set_body_buffer(e.x, ex_on_data_buffer);
	e.leave_in_place = 1;
	(void)ex_read_request(&e, req, sizeof(req), "\r\n\r\n");
	ex_send(&e, r2, strlen(r2));
	ex_run(&e);
	cr_assert_eq(e.err, 0);
	cr_assert_eq(e.total_body, 4);
	cr_assert(http1_is_reusable(e.x));
	ex_done(&e);
}

/* A connection a reusable exchange leaves behind carries the next one
 * (what the pool relies on); the second request goes out keep-alive. */
Test(broker_http1, second_exchange_on_same_connection)
{
	static struct ex e;
	struct http1_header kept[1];
	struct http1_head head = { "GET", 3, "/two", 4, kept, 0, 0 };
	struct policy_dest d;
	char req[1024];
	const char *r1 = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none";
	const char *r2 = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo";

	ex_start(&e, "GET", 0, "", 1, NULL);
	http1_set_body_buffer(e.x, ex_on_data_buffer);
	(void)ex_read_request(&e, req, sizeof(req), "\r\n\r\n");
	cr_assert_null(strstr(req, "Connection"));
	ex_send(&e, r1, strlen(r1));
	ex_run(&e);
	cr_assert_eq(e.err, 0);
	cr_assert(http1_is_reusable(e.x));
	http1_exchange_free(e.x);
	e.x = NULL;
	e.ends = 0;
	e.body_len = 0;
	dest_parse("http://api.example.com/", &d);
	cr_assert_eq(http1_exchange_new(e.bev, &d, &head, 1, NULL, &ex_cbs, &e,
			 &e.x),
	    0);
	http1_set_body_buffer(e.x, ex_on_data_buffer);
	cr_assert_not(http1_response_started(e.x));
	(void)ex_read_request(&e, req, sizeof(req), "\r\n\r\n");
	cr_assert_str_eq(req,
	    "GET /two HTTP/1.1\r\nHost: api.example.com\r\n"
	    "\r\n");
	ex_send(&e, r2, strlen(r2));
	ex_run(&e);
	cr_assert_eq(e.err, 0);
	cr_assert_eq(e.body_len, 3);
	cr_assert(memcmp(e.body, "two", 3) == 0);
	cr_assert(http1_is_reusable(e.x));
	ex_done(&e);
}

/* A pooled connection the upstream closed: the next exchange fails
 * before any response byte, which is what lets the caller retry. */
Test(broker_http1, closed_connection_fails_before_any_byte)
{
	static struct ex e;
	char req[1024];

	ex_start(&e, "GET", 0, "", 1, NULL);
	(void)ex_read_request(&e, req, sizeof(req), "\r\n\r\n");
	cr_assert(shutdown(e.fd, SHUT_WR) == 0);
	ex_run(&e);
	cr_assert_eq(e.err, EGRESS_ERR_UPSTREAM_PROTOCOL);
	cr_assert_not(http1_response_started(e.x));
	cr_assert_not(http1_is_reusable(e.x));
	ex_done(&e);
}

Test(broker_http1, oversized_head)
{
	static struct ex e;
	static char big[HTTP1_HEAD_MAX + 100];
	const char *pre = "HTTP/1.1 200 OK\r\nX-Big: ";
	char req[1024];
	size_t n;

	ex_start(&e, "GET", 0, "", 1, NULL);
	(void)ex_read_request(&e, req, sizeof(req), "\r\n\r\n");
	n = strlen(pre);
	memcpy(big, pre, n);
	memset(big + n, 'a', sizeof(big) - n);
	ex_send(&e, big, sizeof(big));
	ex_run(&e);
	cr_assert_eq(e.err, EGRESS_ERR_UPSTREAM_PROTOCOL);
	cr_assert_eq(e.heads, 0);
	ex_done(&e);
}

Test(broker_http1, many_small_headers_under_cap)
{
	static struct ex e;
	static char resp[HTTP1_HEAD_MAX];
	char req[1024];
	size_t n = 0;
	int i;

	ex_start(&e, "GET", 0, "", 1, NULL);
	(void)ex_read_request(&e, req, sizeof(req), "\r\n\r\n");
	n += (size_t)snprintf(resp + n, sizeof(resp) - n,
	    "HTTP/1.1 200 OK\r\n");
	for (i = 0; i < 100; i++)
		n += (size_t)snprintf(resp + n, sizeof(resp) - n,
		    "X-H%d: %d\r\n", i, i);
	n += (size_t)snprintf(resp + n, sizeof(resp) - n,
	    "Content-Length: 1\r\n\r\nz");
	ex_send(&e, resp, n);
	ex_run(&e);
	cr_assert_eq(e.err, 0);
	cr_assert_eq(e.status, 200);
	cr_assert_eq(e.body_len, 1);
	ex_done(&e);
}

Test(broker_http1, request_wire_form)
{
	static struct ex e;
	char req[4096];

	ex_start(&e, "GET", 0,
	    "Host: api.example.com\nAccept: */*\nConnection: close", 1, NULL);
	(void)ex_read_request(&e, req, sizeof(req), "\r\n\r\n");
	cr_assert_str_eq(req,
	    "GET /p?q=1 HTTP/1.1\r\nHost: api.example.com\r\n"
	    "Accept: */*\r\n\r\n");
	ex_send(&e, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 38);
	ex_run(&e);
	cr_assert_eq(e.err, 0);
	cr_assert(http1_is_reusable(e.x));
	ex_done(&e);
}

Test(broker_http1, request_no_keepalive)
{
	static struct ex e;
	char req[4096];

	ex_start(&e, "GET", 0, "", 0, NULL);
	(void)ex_read_request(&e, req, sizeof(req), "\r\n\r\n");
	cr_assert_str_eq(req,
	    "GET /p?q=1 HTTP/1.1\r\nHost: api.example.com\r\n"
	    "Connection: close\r\n\r\n");
	ex_send(&e, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 38);
	ex_run(&e);
	cr_assert_eq(e.err, 0);
	cr_assert_not(http1_is_reusable(e.x));
	ex_done(&e);
}

Test(broker_http1, request_refuses_unfiltered_head)
{
	struct event_base *base = event_base_new();
	struct bufferevent *bev = bufferevent_socket_new(base, -1, 0);
	struct http1_header h[1] = { { "Connection", 10, "close", 5 } };
	struct http1_head head = { "GET", 3, "/", 1, h, 1, 0 };
	struct http1_exchange *x = NULL;
	struct policy_dest d;

	dest_parse("http://api.example.com/", &d);
	cr_assert_eq(http1_exchange_new(bev, &d, &head, 1, NULL, &ex_cbs, NULL,
			 &x),
	    EGRESS_ERR_INVALID_REQUEST);
	h[0].name = "X-A";
	h[0].name_len = 3;
	h[0].value = "a\r\nHost: evil";
	h[0].value_len = 13;
	cr_assert_eq(http1_exchange_new(bev, &d, &head, 1, NULL, &ex_cbs, NULL,
			 &x),
	    EGRESS_ERR_INVALID_REQUEST);
	cr_assert_null(x);
	bufferevent_free(bev);
	event_base_free(base);
}

Test(broker_http1, body_content_length)
{
	static struct ex e;
	char req[4096];

	ex_start(&e, "POST", 11, "Content-Type: text/plain", 1, NULL);
	cr_assert_eq(http1_write_body(e.x, "hello ", 6), 0);
	cr_assert_eq(http1_write_body(e.x, "world!", 6),
	    EGRESS_ERR_INVALID_REQUEST);
	cr_assert_eq(http1_write_body(e.x, "world", 5), 0);
	cr_assert_eq(http1_finish_body(e.x), 0);
	cr_assert_eq(http1_write_body(e.x, "x", 1), EGRESS_ERR_CLOSED);
	(void)ex_read_request(&e, req, sizeof(req), "hello world");
	cr_assert_str_eq(req,
	    "POST /p?q=1 HTTP/1.1\r\nHost: api.example.com"
	    "\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\n"
	    "hello world");
	ex_send(&e, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 38);
	ex_run(&e);
	cr_assert_eq(e.err, 0);
	cr_assert(http1_is_reusable(e.x));
	cr_assert(e.writable > 0);
	ex_done(&e);
}

Test(broker_http1, body_chunked)
{
	static struct ex e;
	struct evbuffer *b = evbuffer_new();
	char req[4096];

	ex_start(&e, "PUT", -1, "", 1, NULL);
	cr_assert_eq(http1_write_body(e.x, "hello", 5), 0);
	cr_assert_eq(http1_write_body(e.x, "", 0), 0);
	evbuffer_add(b, " chunked world", 14);
	cr_assert_eq(http1_write_body_buffer(e.x, b), 0);
	cr_assert_eq(evbuffer_get_length(b), 0);
	cr_assert_eq(http1_finish_body(e.x), 0);
	cr_assert_eq(http1_finish_body(e.x), EGRESS_ERR_CLOSED);
	(void)ex_read_request(&e, req, sizeof(req), "0\r\n\r\n");
	cr_assert_str_eq(req,
	    "PUT /p?q=1 HTTP/1.1\r\nHost: api.example.com"
	    "\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
	    "e\r\n chunked world\r\n0\r\n\r\n");
	ex_send(&e, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 38);
	ex_run(&e);
	cr_assert_eq(e.err, 0);
	evbuffer_free(b);
	ex_done(&e);
}

Test(broker_http1, body_short_is_refused)
{
	static struct ex e;

	ex_start(&e, "POST", 10, "", 1, NULL);
	cr_assert_eq(http1_write_body(e.x, "abc", 3), 0);
	cr_assert_eq(http1_finish_body(e.x), EGRESS_ERR_INVALID_REQUEST);
	cr_assert_not(http1_is_reusable(e.x));
	cr_assert_eq(e.ends, 0);
	ex_done(&e);
}

Test(broker_http1, early_response_not_reusable)
{
	static struct ex e;
	char req[4096];

	ex_start(&e, "POST", 100, "", 1, NULL);
	(void)ex_read_request(&e, req, sizeof(req), "\r\n\r\n");
	ex_send(&e, "HTTP/1.1 413 Too Large\r\nContent-Length: 0\r\n\r\n", 46);
	ex_run(&e);
	cr_assert_eq(e.err, 0);
	cr_assert_eq(e.status, 413);
	cr_assert_not(http1_is_reusable(e.x));
	cr_assert_eq(http1_write_body(e.x, "x", 1), EGRESS_ERR_CLOSED);
	ex_done(&e);
}

struct flow_case {
	char name[16];
	int moved;
	int chunked;
};

ParameterizedTestParameters(broker_http1, flow_control_bounds_buffer)
{
	static struct flow_case cases[] = {
		{ "borrowed-cl", 0, 0 },
		{ "moved-cl", 1, 0 },
		{ "borrowed-chunked", 0, 1 },
		{ "moved-chunked", 1, 1 },
	};

	return cr_make_param_array(struct flow_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct flow_case *c, broker_http1,
    flow_control_bounds_buffer)
{
	static struct ex e;
	static char chunk[16384 + 16];
	char req[1024];
	size_t sent = 0, body = 4 << 20, want = body, clen = 16384, off;
	const char *hd = c->chunked ?
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" :
	    "HTTP/1.1 200 OK\r\nContent-Length: 4194304\r\n\r\n";
	int fl, i, before, ended = !c->chunked;

	ex_start(&e, "GET", 0, "", 1, NULL);
	if (c->moved)
		http1_set_body_buffer(e.x, ex_on_data_buffer);
	(void)ex_read_request(&e, req, sizeof(req), "\r\n\r\n");
	e.pause_on_data = 1;
	ex_send(&e, hd, strlen(hd));
	memset(chunk, 'b', sizeof(chunk));
	if (c->chunked) {
		/* The wire repeats one 16 KiB chunk, then the last chunk. */
		i = snprintf(chunk, sizeof(chunk), "%zx\r\n", clen);
		memset(chunk + i, 'b', clen);
		// NOLINTNEXTLINE(bugprone-not-null-terminated-result): bytes
		memcpy(chunk + i + clen, "\r\n", 2);
		clen += (size_t)i + 2;
		want = (body / 16384) * clen;
	}
	fl = fcntl(e.fd, F_GETFL);
	(void)fcntl(e.fd, F_SETFL, fl | O_NONBLOCK);
	while (e.ends == 0) {
		/* Push as much as the socket takes, spin the loop. */
		while (sent < want) {
			off = sent % clen;
			ssize_t r = write(e.fd, chunk + off, clen - off);

			if (r <= 0)
				break;
			sent += (size_t)r;
		}
		if (sent == want && !ended)
			ended = write(e.fd, "0\r\n\r\n", 5) == 5;
		before = e.datas;
		for (i = 0; i < 8; i++)
			(void)event_base_loop(e.base, EVLOOP_NONBLOCK);
		/* Paused: no delivery, bounded buffering. */
		cr_assert_leq(e.datas, before + 1);
		cr_assert_leq(
		    evbuffer_get_length(bufferevent_get_input(e.bev)),
		    (size_t)HTTP1_READ_HIGH + 65536);
		http1_resume_read(e.x);
	}
	cr_assert_eq(e.err, 0, "%s", c->name);
	cr_assert_eq(e.total_body, body, "%s", c->name);
	cr_assert(http1_is_reusable(e.x), "%s", c->name);
	ex_done(&e);
}

Test(broker_http1, free_inside_callback)
{
	static struct ex e;
	char req[1024];

	ex_start(&e, "GET", 0, "", 1, NULL);
	e.free_on_head = 1;
	(void)ex_read_request(&e, req, sizeof(req), "\r\n\r\n");
	ex_send(&e, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody", 43);
	ex_run(&e);
	cr_assert_null(e.x);
	/* No callback after the free. */
	(void)event_base_loop(e.base, EVLOOP_NONBLOCK);
	cr_assert_eq(e.datas, 0);
	cr_assert_eq(e.ends, 0);
	ex_done(&e);
}

Test(broker_http1, first_byte_timeout)
{
	static struct ex e;
	struct http1_timeouts t = { 100, 0 };

	ex_start(&e, "GET", 0, "", 1, &t);
	ex_run(&e);
	cr_assert_eq(e.err, EGRESS_ERR_TIMEOUT);
	cr_assert_not(http1_response_started(e.x));
	ex_done(&e);
}

Test(broker_http1, between_bytes_timeout)
{
	static struct ex e;
	struct http1_timeouts t = { 5000, 100 };
	char req[1024];

	ex_start(&e, "GET", 0, "", 1, &t);
	(void)ex_read_request(&e, req, sizeof(req), "\r\n\r\n");
	ex_send(&e, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 41);
	ex_run(&e);
	cr_assert_eq(e.err, EGRESS_ERR_TIMEOUT);
	cr_assert_eq(e.heads, 1);
	cr_assert(http1_response_started(e.x));
	cr_assert_not(http1_is_reusable(e.x));
	ex_done(&e);
}
