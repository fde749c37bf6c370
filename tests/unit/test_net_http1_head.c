/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/net/http1_head: the request-head validator and
 * filter (tables of accepted and refused heads, hop-by-hop removal, Host
 * against the authority, the head cap), the Host value the broker sends,
 * and the hop-by-hop test of response headers.
 */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <egress/error.h>

#include "broker/net/http1_head.h"
#include "tests/unit/http1_test.h"

/* ---- validator tables ------------------------------------------------- */

struct check_case {
	char url[64];
	char method[40];
	char path[64];
	char headers[512];
	int rc;
	char kept[256]; /* "name=value;" for each kept header */
	long long body_length;
};

ParameterizedTestParameters(net_http1_head, request_check)
{
	static struct check_case cases[] = {
		{ "https://api.example.com/", "GET", "/v1?q=1",
		    "Accept: */*\nUser-Agent: t", 0,
		    "Accept=*/*;User-Agent=t;", -1 },
		/* Host: equal (default port implied), different, port. */
		{ "https://api.example.com/", "GET", "/",
		    "Host: API.example.com", 0, "", -1 },
		{ "https://api.example.com/", "GET", "/",
		    "Host: api.example.com:443", 0, "", -1 },
		{ "https://api.example.com/", "GET", "/",
		    "Host: evil.example.com", EGRESS_ERR_INVALID_REQUEST, "",
		    0 },
		{ "https://api.example.com/", "GET", "/",
		    "Host: api.example.com:8443", EGRESS_ERR_INVALID_REQUEST,
		    "", 0 },
		{ "https://api.example.com:8443/", "GET", "/",
		    "Host: api.example.com:8443", 0, "", -1 },
		{ "https://api.example.com:8443/", "GET", "/",
		    "Host: api.example.com", EGRESS_ERR_INVALID_REQUEST, "",
		    0 },
		{ "http://[2001:db8::1]/", "GET", "/", "Host: [2001:db8::1]",
		    0, "", -1 },
		{ "https://api.example.com/", "GET", "/",
		    "Host: api.example.com\nHost: api.example.com",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://api.example.com/", "GET", "/",
		    "Host: ", EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://api.example.com/", "GET", "/",
		    "Host: user@api.example.com", EGRESS_ERR_INVALID_REQUEST,
		    "", 0 },
		/* Hop-by-hop headers dropped, and names Connection lists. */
		{ "https://a.example.com/", "GET", "/",
		    "Connection: keep-alive, X-Secret\nX-Secret: 1\n"
		    "Keep-Alive: 5\nProxy-Authorization: b\nTE: trailers\n"
		    "Trailer: x\nUpgrade: h2c\nProxy-Connection: x\n"
		    "Expect: 100-continue\nX-Keep: 2",
		    0, "X-Keep=2;", -1 },
		/* Content-Length is absorbed into body_length. */
		{ "https://a.example.com/", "POST", "/",
		    "Content-Length: 12\nContent-Type: text/plain", 0,
		    "Content-Type=text/plain;", 12 },
		{ "https://a.example.com/", "POST", "/",
		    "Content-Length: 12\nContent-Length: 12", 0, "", 12 },
		{ "https://a.example.com/", "POST", "/",
		    "Content-Length: 12\nContent-Length: 13",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/", "POST", "/", "Content-Length: -1",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/", "POST", "/",
		    "Content-Length: 0x10", EGRESS_ERR_INVALID_REQUEST, "",
		    0 },
		{ "https://a.example.com/", "POST", "/",
		    "Content-Length: 1\nTransfer-Encoding: chunked",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/", "POST", "/",
		    "Transfer-Encoding: chunked", 0, "", -1 },
		/* Values trimmed; tabs allowed inside. */
		{ "https://a.example.com/", "GET", "/", "X-A:  a\tb  ", 0,
		    "X-A=a\tb;", -1 },
		/* Method grammar. */
		{ "https://a.example.com/", "G ET", "/", "",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/", "", "/", "",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/", "CONNECT", "/", "",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/", "PROPFIND", "/", "", 0, "", -1 },
		{ "https://a.example.com/", "GET\r\nX:", "/", "",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/",
		    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "/", "",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		/* Path grammar. */
		{ "https://a.example.com/", "GET", "/a b", "",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/", "GET", "/a\r\nX: y", "",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/", "GET", "/a#frag", "",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/", "GET", "http://b.example/", "",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/", "GET", "*", "",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/", "GET", "", "",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/", "GET", "/\xc3\xa9", "",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		/* Header grammar. */
		{ "https://a.example.com/", "GET", "/", "Bad Name: x",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/", "GET", "/", ": x",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/", "GET", "/", "X-A: a\rb",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/", "GET", "/",
		    "X-A: a\x01"
		    "b",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/", "GET", "/", "X-A: a\x7f",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/", "GET", "/", "X-(A): x",
		    EGRESS_ERR_INVALID_REQUEST, "", 0 },
		{ "https://a.example.com/", "GET", "/",
		    "Connection: bad token", EGRESS_ERR_INVALID_REQUEST, "",
		    0 },
	};

	return cr_make_param_array(struct check_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct check_case *c, net_http1_head, request_check)
{
	struct http1_header in[MAXH], kept[MAXH];
	struct http1_head head, out;
	struct policy_dest d;
	struct policy_err e;
	char text[512], got[512] = "";
	size_t i;
	int rc;

	dest_parse(c->url, &d);
	memcpy(text, c->headers, sizeof(text));
	memset(&head, 0, sizeof(head));
	head.method = c->method;
	head.method_len = strlen(c->method);
	head.path = c->path;
	head.path_len = strlen(c->path);
	head.headers = in;
	head.nheaders = split_headers(text, in);
	memset(&e, 0, sizeof(e));
	rc = http1_request_check(&d, &head, kept, MAXH, &out, &e);
	cr_assert_eq(rc, c->rc, "%s %s [%s]: rc %d (%s)", c->method, c->path,
	    c->headers, rc, e.msg);
	if (rc != 0) {
		cr_assert_neq(e.msg[0], '\0', "no message");
		return;
	}
	for (i = 0; i < out.nheaders; i++) {
		size_t l = strlen(got);

		(void)snprintf(got + l, sizeof(got) - l, "%.*s=%.*s;",
		    (int)out.headers[i].name_len, out.headers[i].name,
		    (int)out.headers[i].value_len, out.headers[i].value);
	}
	cr_assert_str_eq(got, c->kept);
	cr_assert_eq(out.body_length, c->body_length);
}

Test(net_http1_head, request_check_head_cap)
{
	static char big[HTTP1_HEAD_MAX];
	struct http1_header in[2], kept[2];
	struct http1_head head, out;
	struct policy_dest d;
	size_t vlen;

	dest_parse("https://a.example.com/", &d);
	memset(big, 'a', sizeof(big));
	memset(&head, 0, sizeof(head));
	head.method = "GET";
	head.method_len = 3;
	head.path = "/";
	head.path_len = 1;
	head.headers = in;
	head.nheaders = 1;
	in[0].name = "X-Big";
	in[0].name_len = 5;
	in[0].value = big;
	/* "GET / HTTP/1.1\r\n" + "X-Big: " + v + "\r\n" + "\r\n" */
	vlen = HTTP1_HEAD_MAX - (16 + 7 + 2 + 2);
	in[0].value_len = vlen;
	cr_assert_eq(http1_request_check(&d, &head, kept, 2, &out, NULL), 0);
	in[0].value_len = vlen + 1;
	cr_assert_eq(http1_request_check(&d, &head, kept, 2, &out, NULL),
	    EGRESS_ERR_INVALID_REQUEST);
}

struct host_case {
	char url[64];
	char host[80];
};

ParameterizedTestParameters(net_http1_head, format_host)
{
	static struct host_case cases[] = {
		{ "https://api.example.com/", "api.example.com" },
		{ "https://api.example.com:443/", "api.example.com" },
		{ "https://api.example.com:80/", "api.example.com:80" },
		{ "http://api.example.com/", "api.example.com" },
		{ "http://api.example.com:8080/x", "api.example.com:8080" },
		{ "http://[2001:db8::1]/", "[2001:db8::1]" },
		{ "https://[2001:db8::1]:8443/", "[2001:db8::1]:8443" },
		{ "http://192.0.2.1:81/", "192.0.2.1:81" },
	};

	return cr_make_param_array(struct host_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct host_case *c, net_http1_head, format_host)
{
	struct policy_dest d;
	char buf[300];

	dest_parse(c->url, &d);
	cr_assert_eq(http1_format_host(&d, buf, sizeof(buf)),
	    (int)strlen(c->host));
	cr_assert_str_eq(buf, c->host);
	cr_assert_eq(http1_format_host(&d, buf, strlen(c->host)),
	    EGRESS_ERR_TOO_BIG);
}

/* ---- response hop-by-hop ---------------------------------------------- */

struct hop_case {
	char headers[256]; /* the response's header lines */
	char kept[256];	   /* names that are not hop-by-hop, ';' ended */
};

ParameterizedTestParameters(net_http1_head, response_is_hop)
{
	static struct hop_case cases[] = {
		{ "Content-Type: text/plain\nX-A: 1", "Content-Type;X-A;" },
		{ "Connection: keep-alive\nKeep-Alive: timeout=5\nX-A: 1",
		    "X-A;" },
		{ "Transfer-Encoding: chunked\nTE: trailers\nTrailer: X-T\n"
		  "Upgrade: h2c\nProxy-Connection: close\nX-B: 2",
		    "X-B;" },
		{ "Connection: X-Secret, x-other\nX-Secret: s\nX-Other: o\n"
		  "X-Kept: k",
		    "X-Kept;" },
		{ "CONNECTION: close\nconnection: X-A\nX-A: 1\nX-B: 2",
		    "X-B;" },
		{ "Connection: ,, X-A ,\nX-A: 1\nX-AB: 2", "X-AB;" },
		{ "Proxy-Authenticate: Basic\nSet-Cookie: a=b",
		    "Proxy-Authenticate;Set-Cookie;" },
	};

	return cr_make_param_array(struct hop_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct hop_case *c, net_http1_head, response_is_hop)
{
	struct http1_header hs[MAXH];
	char text[256], got[256] = "";
	size_t i, n;

	memcpy(text, c->headers, sizeof(text));
	n = split_headers(text, hs);
	for (i = 0; i < n; i++) {
		size_t l = strlen(got);

		while (hs[i].value_len > 0 && hs[i].value[0] == ' ') {
			hs[i].value++;
			hs[i].value_len--;
		}
		if (!http1_response_is_hop(hs, n, &hs[i]))
			(void)snprintf(got + l, sizeof(got) - l, "%.*s;",
			    (int)hs[i].name_len, hs[i].name);
	}
	cr_assert_str_eq(got, c->kept, "[%s]", c->headers);
}

struct length_case {
	char s[24];
	int rc;
	long long v;
};

ParameterizedTestParameters(net_http1_head, parse_length)
{
	static struct length_case cases[] = {
		{ "0", 0, 0 },
		{ "42", 0, 42 },
		{ "999999999999999", 0, 999999999999999LL },
		{ "1000000000000000", -1, 0 },
		{ "", -1, 0 },
		{ "-1", -1, 0 },
		{ "+1", -1, 0 },
		{ "1 ", -1, 0 },
		{ "0x10", -1, 0 },
	};

	return cr_make_param_array(struct length_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct length_case *c, net_http1_head, parse_length)
{
	int64_t v = -7;

	cr_assert_eq(http1_parse_length(c->s, strlen(c->s), &v), c->rc, "'%s'",
	    c->s);
	if (c->rc == 0)
		cr_assert_eq(v, c->v);
	else
		cr_assert_eq(v, -7, "written on failure");
}
