/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/net/http1_req.c, the proxy front's request
 * parser: the end of the head found (CRLF and bare LF, the cap), heads
 * parsed or refused (framing attacks, obs-fold, bare LF, control bytes,
 * versions, target forms, bounds), and bodies decoded by Content-Length
 * and chunked, stopping at the end of the message so a pipelined request
 * stays unread; and the front's translation of a head into the
 * pipeline's REQUEST for each way in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <egress/error.h>

#include "broker/net/http1_req.h"

static struct http1_req R;

struct head_case {
	char name[32];
	char head[320];
	int err;		  /* 0, or the error expected */
	enum http1_req_form form; /* on success */
	char authority[48];
	char path[48];
	long long length; /* content_length */
	int chunked;
	int keep_alive;
};

ParameterizedTestParameters(http1_req, heads)
{
	static struct head_case cases[] = {
		{ "absolute",
		    "GET http://a.example/x?y HTTP/1.1\r\n"
		    "Host: a.example\r\n\r\n",
		    0, HTTP1_REQ_ABSOLUTE, "a.example", "/x?y", -1, 0, 1 },
		{ "absolute-no-path",
		    "GET http://a.example:8080 HTTP/1.1\r\n"
		    "\r\n",
		    0, HTTP1_REQ_ABSOLUTE, "a.example:8080", "/", -1, 0, 1 },
		{ "origin",
		    "POST /p HTTP/1.1\r\nHost: a\r\n"
		    "Content-Length: 3\r\n\r\n",
		    0, HTTP1_REQ_ORIGIN, "", "/p", 3, 0, 1 },
		{ "chunked",
		    "POST /p HTTP/1.1\r\nHost: a\r\n"
		    "Transfer-Encoding: Chunked \r\n\r\n",
		    0, HTTP1_REQ_ORIGIN, "", "/p", -1, 1, 1 },
		{ "connect", "CONNECT a.example:443 HTTP/1.1\r\n\r\n", 0,
		    HTTP1_REQ_AUTHORITY, "a.example:443", "", -1, 0, 1 },
		{ "http10", "GET http://a/ HTTP/1.0\r\n\r\n", 0,
		    HTTP1_REQ_ABSOLUTE, "a", "/", -1, 0, 0 },
		{ "close", "GET /x HTTP/1.1\r\nConnection: close\r\n\r\n", 0,
		    HTTP1_REQ_ORIGIN, "", "/x", -1, 0, 0 },
		{ "cl-te",
		    "POST /p HTTP/1.1\r\nContent-Length: 3\r\n"
		    "Transfer-Encoding: chunked\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "te-cl",
		    "POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
		    "Content-Length: 3\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "two-cl",
		    "POST /p HTTP/1.1\r\nContent-Length: 3\r\n"
		    "Content-Length: 3\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "cl-list",
		    "POST /p HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "cl-sign", "POST /p HTTP/1.1\r\nContent-Length: +3\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "te-gzip",
		    "POST /p HTTP/1.1\r\n"
		    "Transfer-Encoding: gzip, chunked\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "two-te",
		    "POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
		    "Transfer-Encoding: chunked\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "obs-fold", "GET /x HTTP/1.1\r\nX-A: 1\r\n 2\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "obs-fold-tab", "GET /x HTTP/1.1\r\nX-A: 1\r\n\t2\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "bare-lf", "GET /x HTTP/1.1\nHost: a\n\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "bare-cr", "GET /x HTTP/1.1\r\nX-A: 1\r2\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "nul", "GET /x HTTP/1.1\r\nX-A: 1\0002\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "leading-crlf", "\r\nGET /x HTTP/1.1\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "lowercase-method", "get /x HTTP/1.1\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "http2", "GET /x HTTP/2.0\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "http09", "GET /x\r\n\r\n", EGRESS_ERR_INVALID_REQUEST, 0,
		    "", "", 0, 0, 0 },
		{ "asterisk", "OPTIONS * HTTP/1.1\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "userinfo", "GET http://u:p@a.example/ HTTP/1.1\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "no-authority", "GET http:///x HTTP/1.1\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "query-no-path", "GET http://a?x HTTP/1.1\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "relative", "GET x/y HTTP/1.1\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
		{ "space-in-name", "GET /x HTTP/1.1\r\nX A: 1\r\n\r\n",
		    EGRESS_ERR_INVALID_REQUEST, 0, "", "", 0, 0, 0 },
	};

	return cr_make_param_array(struct head_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

static size_t
case_len(const char *name, const char *head)
{
	/* The NUL case carries a NUL: measure to the final CRLF CRLF. */
	if (strcmp(name, "nul") == 0)
		return strlen(head) + 1 + strlen(head + strlen(head) + 1);
	return strlen(head);
}

ParameterizedTest(struct head_case *c, http1_req, heads)
{
	struct http1_req_parser *p = http1_req_parser_new();
	struct policy_err e = { { 0 } };
	size_t n = case_len(c->name, c->head);
	long hl;
	int rv;

	cr_assert_not_null(p);
	hl = http1_req_head_len(c->head, n, 0);
	cr_assert_eq(hl, (long)n, "%s: head length %ld of %zu", c->name, hl,
	    n);
	rv = http1_req_parse_head(p, c->head, n, &R, &e);
	cr_assert_eq(rv, c->err, "%s: got %d (%s)", c->name, rv, e.msg);
	if (rv != 0) {
		cr_assert_neq(e.msg[0], '\0', "%s: no detail", c->name);
		http1_req_parser_free(p);
		return;
	}
	cr_assert_eq(R.form, c->form, "%s", c->name);
	cr_assert_eq(R.authority_len, strlen(c->authority), "%s", c->name);
	cr_assert(R.authority_len == 0 ||
	    memcmp(R.authority, c->authority, R.authority_len) == 0);
	cr_assert_eq(R.path_len, strlen(c->path), "%s", c->name);
	cr_assert(R.path_len == 0 || memcmp(R.path, c->path, R.path_len) == 0);
	cr_assert_eq(R.content_length, c->length, "%s", c->name);
	cr_assert_eq(R.chunked, c->chunked, "%s", c->name);
	cr_assert_eq(R.keep_alive, c->keep_alive, "%s", c->name);
	http1_req_parser_free(p);
}

Test(http1_req, head_len)
{
	static char big[HTTP1_HEAD_MAX + 8];

	cr_assert_eq(http1_req_head_len("GET / HTTP/1.1\r\n", 16, 0), 0);
	cr_assert_eq(http1_req_head_len("GET / HTTP/1.1\r\n\r\nX", 19, 0), 18);
	cr_assert_eq(http1_req_head_len("GET / HTTP/1.1\n\nX", 17, 0), 16);
	memset(big, 'A', sizeof(big));
	cr_assert_eq(http1_req_head_len(big, sizeof(big), 0),
	    EGRESS_ERR_TOO_BIG);
	cr_assert_eq(http1_req_head_len(big, HTTP1_HEAD_MAX - 1, 0), 0);
}

/* A head read a byte at a time: each look starts where the last one
 * stopped (less the two bytes a line end may still need), and finds
 * the end a single look finds, whichever read completes it. */
Test(http1_req, head_len_a_byte_at_a_time)
{
	static const char *const heads[] = {
		"GET / HTTP/1.1\r\nHost: a\r\n\r\nNEXT",
		"GET / HTTP/1.1\nHost: a\n\nNEXT",
		"GET / HTTP/1.1\r\nHost: a\n\r\nNEXT",
		"GET / HTTP/1.1\r\n\r\n",
	};
	size_t i, k, n;
	long whole, hl;

	for (i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		n = strlen(heads[i]);
		whole = http1_req_head_len(heads[i], n, 0);
		cr_assert_gt(whole, 0);
		for (k = 1, hl = 0; k <= n && hl == 0; k++)
			hl = http1_req_head_len(heads[i], k, k - 1);
		cr_assert_eq(hl, whole, "head %zu", i);
		cr_assert_eq(k - 1, (size_t)whole, "head %zu: found late", i);
	}
	/* What an earlier look covered is not looked at again. */
	cr_assert_eq(http1_req_head_len("\r\n\r\nGET", 7, 0), 4);
	cr_assert_eq(http1_req_head_len("\r\n\r\nGET", 7, 7), 0);
	cr_assert_eq(http1_req_head_bad("\x01GET", 4, 1), 0);
	cr_assert_eq(http1_req_head_bad("G\x01ET", 4, 1), 1);
}

Test(http1_req, too_many_headers_and_long_target)
{
	struct http1_req_parser *p = http1_req_parser_new();
	static char head[HTTP1_HEAD_MAX];
	size_t n = 0;
	int i;

	n += (size_t)sprintf(head, "GET /x HTTP/1.1\r\n");
	for (i = 0; i <= HTTP1_REQ_HEADERS_MAX; i++)
		n += (size_t)sprintf(head + n, "X-%d: v\r\n", i);
	n += (size_t)sprintf(head + n, "\r\n");
	cr_assert_eq(http1_req_parse_head(p, head, n, &R, NULL),
	    EGRESS_ERR_TOO_BIG);
	n = (size_t)sprintf(head, "GET /");
	memset(head + n, 'a', HTTP1_REQ_PATH_MAX);
	n += HTTP1_REQ_PATH_MAX;
	n += (size_t)sprintf(head + n, " HTTP/1.1\r\n\r\n");
	cr_assert_eq(http1_req_parse_head(p, head, n, &R, NULL),
	    EGRESS_ERR_TOO_BIG);
	http1_req_parser_free(p);
}

static char got[256];
static size_t ngot;

static void
sink(void *arg, const char *p, size_t n)
{
	cr_assert_leq(ngot + n, sizeof(got));
	memcpy(got + ngot, p, n);
	ngot += n;
}

/* Parse msg (a head and a body, then what follows), the body fed in
 * pieces of step bytes; return how many bytes of msg were used. */
static size_t
parse_all(const char *msg, size_t step, int *ret_err)
{
	struct http1_req_parser *p = http1_req_parser_new();
	size_t n = strlen(msg), off, used, k;
	long hl;

	ngot = 0;
	*ret_err = 0;
	hl = http1_req_head_len(msg, n, 0);
	cr_assert_gt(hl, 0);
	cr_assert_eq(http1_req_parse_head(p, msg, (size_t)hl, &R, NULL), 0);
	off = (size_t)hl;
	while (!http1_req_is_complete(p) && off < n) {
		k = n - off < step ? n - off : step;
		*ret_err = http1_req_parse_body(p, msg + off, k, sink, NULL,
		    &used, NULL);
		if (*ret_err != 0)
			break;
		off += used;
		if (used == 0)
			break;
	}
	cr_assert(*ret_err != 0 || http1_req_is_complete(p) || off == n);
	http1_req_parser_free(p);
	return off;
}

Test(http1_req, bodies_stop_at_the_message_end)
{
	static const char *cl = "POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\n"
				"helloGET /next HTTP/1.1\r\n\r\n";
	static const char *ch =
	    "POST /p HTTP/1.1\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"
	    "3\r\nhel\r\n2;ext=1\r\nlo\r\n0\r\nT: 1\r\n\r\n"
	    "GET /next HTTP/1.1\r\n\r\n";
	size_t step, used;
	int err;

	for (step = 1; step <= 64; step *= 2) {
		used = parse_all(cl, step, &err);
		cr_assert_eq(err, 0);
		cr_assert_eq(ngot, 5);
		cr_assert(memcmp(got, "hello", 5) == 0);
		cr_assert_str_eq(cl + used, "GET /next HTTP/1.1\r\n\r\n");
		used = parse_all(ch, step, &err);
		cr_assert_eq(err, 0);
		cr_assert_eq(ngot, 5, "step %zu: %zu bytes", step, ngot);
		cr_assert(memcmp(got, "hello", 5) == 0);
		cr_assert_str_eq(ch + used, "GET /next HTTP/1.1\r\n\r\n");
	}
}

/* Request trailers are skipped: the head's struct, which the caller may
 * reuse for another request meanwhile, is never written in the body. */
Test(http1_req, trailers_never_touch_the_head)
{
	static const char head[] = "POST /p HTTP/1.1\r\n"
				   "Transfer-Encoding: chunked\r\n\r\n";
	static const char body[] = "3\r\nabc\r\n0\r\nX-Trailer: 1\r\n"
				   "Y-Trailer: 2\r\n\r\n";
	static struct http1_req q;
	struct http1_req_parser *p = http1_req_parser_new();
	struct policy_err perr;
	size_t used;

	cr_assert(p != NULL);
	cr_assert_eq(http1_req_parse_head(p, head, strlen(head), &q, &perr),
	    0);
	/* The struct now holds someone else's full head. */
	q.nheaders = HTTP1_REQ_HEADERS_MAX;
	ngot = 0;
	cr_assert_eq(http1_req_parse_body(p, body, strlen(body), sink, NULL,
			 &used, &perr),
	    0, "%s", perr.msg);
	cr_assert_eq(used, strlen(body));
	cr_assert(http1_req_is_complete(p));
	cr_assert_eq(q.nheaders, HTTP1_REQ_HEADERS_MAX);
	http1_req_parser_free(p);
}

/* A method token http-parser does not know is told apart from a head
 * that is not HTTP: the front answers it 405, not 400. */
Test(http1_req, unknown_method_token_is_denied_not_malformed)
{
	static const char brew[] = "BREW /pot HTTP/1.1\r\nHost: a\r\n\r\n";
	static const char bad[] = "BR(W /pot HTTP/1.1\r\nHost: a\r\n\r\n";
	static struct http1_req q;
	struct http1_req_parser *p = http1_req_parser_new();

	cr_assert(p != NULL);
	cr_assert_eq(http1_req_parse_head(p, brew, strlen(brew), &q, NULL),
	    EGRESS_ERR_DENIED);
	cr_assert_eq(http1_req_parse_head(p, bad, strlen(bad), &q, NULL),
	    EGRESS_ERR_INVALID_REQUEST);
	http1_req_parser_free(p);
}

Test(http1_req, bad_chunking_is_refused)
{
	static const char *bad[] = {
		"POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
		"zz\r\nhello\r\n0\r\n\r\n",
		"POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
		"5\r\nhelloX\r\n0\r\n\r\n",
		"POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
		"-1\r\nhello\r\n0\r\n\r\n",
		"POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
		"fffffffffffffffff\r\n",
	};
	size_t i;
	int err;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		(void)parse_all(bad[i], 4096, &err);
		cr_assert_eq(err, EGRESS_ERR_INVALID_REQUEST, "case %zu", i);
	}
}

Test(http1_req, reason)
{
	cr_assert_str_eq(http1_req_reason(403), "Forbidden");
	cr_assert_str_eq(http1_req_reason(429), "Too Many Requests");
	cr_assert_str_eq(http1_req_reason(599), "");
	cr_assert_str_eq(http1_req_reason(42), "");
}

Test(http1_req, basic_password)
{
	static const struct {
		const char *v;
		int ok;
		const char *pw;
	} cases[] = {
		{ "Basic dXNlcjpzZWNyZXQ=", 1, "secret" }, /* user:secret */
		{ "basic   dXNlcjpzZWNyZXQ= ", 1,
		    "secret" },			       /* case, spaces */
		{ "Basic OnNlY3JldA==", 1, "secret" }, /* :secret */
		{ "Basic dXNlcjo=", 1, "" },	       /* user: */
		{ "Basic dXNlcjphOmI=", 1,
		    "a:b" },		       /* the first colon splits */
		{ "Basic dXNlcg==", 0, NULL }, /* no colon */
		{ "Bearer dXNlcjpzZWNyZXQ=", 0, NULL },
		{ "Basic dXNlcjpzZWNyZXQ", 0, NULL },  /* unpadded */
		{ "Basic dXNlcjpzZW=yZXQ=", 0, NULL }, /* '=' inside */
		{ "Basic dXNlcjpz*WNyZXQ=", 0, NULL },
		{ "Basic", 0, NULL },
		{ "Basic ", 0, NULL },
		{ "", 0, NULL },
	};
	char buf[64];
	const char *pw;
	size_t i, n;
	int rv;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		rv = http1_req_basic_password(cases[i].v, strlen(cases[i].v),
		    buf, sizeof(buf), &pw, &n);
		cr_assert_eq(rv == 0, cases[i].ok, "%s", cases[i].v);
		if (rv == 0) {
			cr_assert_eq(n, strlen(cases[i].pw), "%s", cases[i].v);
			cr_assert(memcmp(pw, cases[i].pw, n) == 0, "%s",
			    cases[i].v);
		}
	}
	/* Does not fit: refused, never truncated. */
	cr_assert_eq(http1_req_basic_password("Basic dXNlcjpzZWNyZXQ=", 22,
			 buf, 4, &pw, &n),
	    EGRESS_ERR_INVALID_REQUEST);
}

Test(http1_req, head_bad_before_its_end)
{
	cr_assert_eq(http1_req_head_bad("GET / HTTP/1.1\r\nHo", 18, 0), 0);
	cr_assert_eq(http1_req_head_bad("", 0, 0), 0);
	cr_assert_eq(http1_req_head_bad("get /", 5, 0), 1);
	cr_assert_eq(http1_req_head_bad("\x16\x03\x01", 3, 0), 1); /* TLS */
	cr_assert_eq(http1_req_head_bad("GET /\x01", 6, 0), 1);
	cr_assert_eq(http1_req_head_bad("GET /\x7f", 6, 0), 1);
}

/* Parse the head text into R, or fail the test. */
static void
parse_ok(const char *text)
{
	struct http1_req_parser *p = http1_req_parser_new();

	cr_assert_not_null(p);
	cr_assert_eq(http1_req_parse_head(p, text, strlen(text), &R, NULL), 0,
	    "%s", text);
	http1_req_parser_free(p);
}

static int
str_eq(const struct proto_str *s, const char *want)
{
	return s->len == strlen(want) && memcmp(s->ptr, want, s->len) == 0;
}

/* The front's translation of a head into the pipeline's REQUEST. */
Test(http1_req, message_by_way_in)
{
	static struct proto_msg m;
	static char head[PROTO_NAME_MAX + 64];
	struct http1_req_refusal why;
	const char *tun = "api.example.com:8443";

	parse_ok("GET /a?b HTTP/1.1\r\nHost: other.example\r\nX: 1\r\n\r\n");
	/* Inside an inspected tunnel: https:// + the tunnel's authority,
	 * whatever Host says (the pipeline refuses a different Host). */
	cr_assert_eq(http1_req_message(&R, HTTP1_REQ_INSPECTED, tun, &m, &why),
	    0);
	cr_expect_eq(m.type, PROTO_MSG_REQUEST);
	cr_expect_eq(m.request.transport, PROTO_TRANSPORT_HTTP);
	cr_expect(str_eq(&m.request.scheme, "https"));
	cr_expect(str_eq(&m.request.authority, tun));
	cr_expect(str_eq(&m.request.method, "GET"));
	cr_expect(str_eq(&m.request.path, "/a?b"));
	cr_expect_eq(m.nheaders, 2);
	cr_expect(str_eq(&m.headers[1].name, "X"));
	/* On a port that takes origin form: http:// + the Host. */
	cr_assert_eq(http1_req_message(&R, HTTP1_REQ_ORIGIN_OK, tun, &m, &why),
	    0);
	cr_expect(str_eq(&m.request.scheme, "http"));
	cr_expect(str_eq(&m.request.authority, "other.example"));
	/* Elsewhere origin form is refused. */
	cr_assert_eq(http1_req_message(&R, 0, tun, &m, &why), -1);
	cr_expect_eq(why.status, 400);
	cr_expect_str_eq(why.error, "malformed");

	/* Absolute form: its own scheme and authority, never inside an
	 * inspected tunnel; http and https only. */
	parse_ok(
	    "GET https://b.example/x HTTP/1.1\r\nHost: b.example\r\n\r\n");
	cr_assert_eq(http1_req_message(&R, 0, tun, &m, &why), 0);
	cr_expect(str_eq(&m.request.scheme, "https"));
	cr_expect(str_eq(&m.request.authority, "b.example"));
	cr_assert_eq(http1_req_message(&R, HTTP1_REQ_INSPECTED, tun, &m, &why),
	    -1);
	cr_expect_eq(why.status, 400);
	cr_expect_str_eq(why.detail,
	    "absolute-form inside an inspected tunnel");
	parse_ok("GET ftp://b.example/x HTTP/1.1\r\nHost: b.example\r\n\r\n");
	cr_assert_eq(http1_req_message(&R, 0, tun, &m, &why), -1);
	cr_expect_str_eq(why.detail, "scheme not supported");

	/* Origin form without a Host, and an empty Host. */
	parse_ok("GET / HTTP/1.0\r\n\r\n");
	cr_expect_eq(http1_req_message(&R, HTTP1_REQ_INSPECTED, tun, &m, &why),
	    -1);
	parse_ok("GET / HTTP/1.1\r\nHost:  \r\n\r\n");
	cr_assert_eq(http1_req_message(&R, HTTP1_REQ_ORIGIN_OK, tun, &m, &why),
	    -1);
	cr_expect_str_eq(why.detail, "bad Host");

	/* A header name over the wire protocol's bound: 431. */
	(void)snprintf(head, sizeof(head),
	    "GET / HTTP/1.1\r\nHost: a\r\n%0*d: 1\r\n\r\n", PROTO_NAME_MAX + 1,
	    0);
	parse_ok(head);
	cr_assert_eq(http1_req_message(&R, HTTP1_REQ_INSPECTED, tun, &m, &why),
	    -1);
	cr_expect_eq(why.status, 431);

	/* Request line parts over the wire protocol's bounds, whoever
	 * parsed them (the parser here refuses them first), and an
	 * inspected tunnel with no authority: refused before any is read. */
	parse_ok("GET /p HTTP/1.1\r\nHost: a\r\n\r\n");
	R.method_len = PROTO_METHOD_MAX + 1;
	cr_assert_eq(http1_req_message(&R, HTTP1_REQ_ORIGIN_OK, tun, &m, &why),
	    -1);
	cr_expect_eq(why.status, 431);
	parse_ok("GET /p HTTP/1.1\r\nHost: a\r\n\r\n");
	R.path_len = PROTO_PATH_MAX + 1;
	cr_assert_eq(http1_req_message(&R, HTTP1_REQ_ORIGIN_OK, tun, &m, &why),
	    -1);
	cr_expect_eq(why.status, 431);
	parse_ok("GET /p HTTP/1.1\r\nHost: a\r\n\r\n");
	cr_assert_eq(http1_req_message(&R, HTTP1_REQ_INSPECTED, NULL, &m,
			 &why),
	    -1);
	cr_expect_str_eq(why.detail, "no tunnel authority");
}
