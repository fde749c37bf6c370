/* SPDX-License-Identifier: ISC */
/*
 * The proxy front's HTTP/1.1 request parser (see http1_req.h): the head
 * checked byte by byte, parsed with http-parser, its framing headers
 * judged strictly and its target split by form; the body decoded with
 * the same parser, pausing at the end of each message.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <egress/error.h>
#include <http_parser.h>

#include "broker/net/chunked.h"
#include "broker/net/http1_head.h"
#include "broker/net/http1_req.h"

struct http1_req_parser {
	http_parser p;
	struct http1_req *req; /* being filled by the head callbacks,
				* NULL in the body (its trailers are
				* skipped, never stored) */
	int in_value;	       /* the last callback was a header value */
	int overflow;	       /* more than HTTP1_REQ_HEADERS_MAX */
	int complete;	       /* the message ended */
	const char *url;
	size_t url_len;
	http1_req_body_fn fn; /* body sink, during parse_body only */
	void *arg;
	int ck_on;		 /* the body is chunked: ck checks it */
	struct chunked_check ck; /* stricter than the parser */
};

static int
fail(struct policy_err *reterr, int err, const char *msg)
{
	if (reterr != NULL) {
		size_t n = strlen(msg);

		if (n >= sizeof(reterr->msg))
			n = sizeof(reterr->msg) - 1;
		memcpy(reterr->msg, msg, n);
		reterr->msg[n] = '\0';
	}
	return err;
}

struct http1_req_parser *
http1_req_parser_new(void)
{
	return calloc(1, sizeof(struct http1_req_parser));
}

void
http1_req_parser_free(struct http1_req_parser *p)
{
	free(p);
}

long
http1_req_head_len(const char *buf, size_t n, size_t from)
{
	const char *nl;
	/* A line end whose next two bytes were not all there yet. */
	size_t i = from > 2 ? from - 2 : 0;

	while (i < n && i < HTTP1_HEAD_MAX) {
		nl = memchr(buf + i, '\n', n - i);
		if (nl == NULL)
			break;
		i = (size_t)(nl - buf) + 1;
		/* An empty line: "\n\n" or "\n\r\n" (a bare LF is refused
		 * later, but it must not hide the end of the head). */
		if (i < n && buf[i] == '\n')
			return i + 1 > HTTP1_HEAD_MAX ?
			    EGRESS_ERR_TOO_BIG :
			    (long)(i + 1);
		if (i + 1 < n && buf[i] == '\r' && buf[i + 1] == '\n')
			return i + 2 > HTTP1_HEAD_MAX ?
			    EGRESS_ERR_TOO_BIG :
			    (long)(i + 2);
	}
	return n >= HTTP1_HEAD_MAX ? EGRESS_ERR_TOO_BIG : 0;
}

int
http1_req_head_bad(const char *buf, size_t n, size_t from)
{
	size_t i;
	unsigned char c;

	if (from == 0 && n > 0 && !(buf[0] >= 'A' && buf[0] <= 'Z'))
		return 1;
	for (i = from; i < n; i++) {
		c = (unsigned char)buf[i];
		if ((c < 0x20 && c != '\t' && c != '\r' && c != '\n') ||
		    c == 0x7f)
			return 1;
	}
	return 0;
}

/*
 * Check the head's bytes before any parsing: it starts with a token
 * character, every line ends in CRLF, no line folds (a line starting
 * with SP or HTAB), and no control byte other than HTAB appears.
 */
static int
head_scan(const char *buf, size_t len, struct policy_err *reterr)
{
	size_t i;
	unsigned char c;

	if (len == 0 || !(buf[0] >= 'A' && buf[0] <= 'Z'))
		return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
		    "the request line does not start with a method");
	for (i = 0; i < len; i++) {
		c = (unsigned char)buf[i];
		if (c == '\r') {
			if (i + 1 >= len || buf[i + 1] != '\n')
				return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
				    "CR not followed by LF");
			continue;
		}
		if (c == '\n') {
			if (i == 0 || buf[i - 1] != '\r')
				return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
				    "line ends in a bare LF");
			if (i + 1 < len &&
			    (buf[i + 1] == ' ' || buf[i + 1] == '\t'))
				return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
				    "obsolete line folding");
			continue;
		}
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
			    "control byte in the head");
	}
	return 0;
}

static int
on_url(http_parser *hp, const char *at, size_t n)
{
	struct http1_req_parser *p = hp->data;

	if (p->url == NULL)
		p->url = at;
	else if (p->url + p->url_len != at)
		return -1; /* one contiguous head: cannot happen */
	p->url_len += n;
	return 0;
}

static int
on_header_field(http_parser *hp, const char *at, size_t n)
{
	struct http1_req_parser *p = hp->data;
	struct http1_req *r = p->req;
	struct http1_header *h;

	if (r == NULL)
		return 0; /* a trailer: not relayed */
	if (r->nheaders > 0 && !p->in_value) {
		h = &r->headers[r->nheaders - 1];
		if (h->name + h->name_len != at)
			return -1;
		h->name_len += n;
		return 0;
	}
	if (r->nheaders == HTTP1_REQ_HEADERS_MAX) {
		p->overflow = 1;
		return -1;
	}
	h = &r->headers[r->nheaders++];
	h->name = at;
	h->name_len = n;
	h->value = at + n; /* an empty value, until one arrives */
	h->value_len = 0;
	p->in_value = 0;
	return 0;
}

static int
on_header_value(http_parser *hp, const char *at, size_t n)
{
	struct http1_req_parser *p = hp->data;
	struct http1_header *h;

	if (p->req == NULL)
		return 0; /* a trailer: not relayed */
	if (p->req->nheaders == 0)
		return -1;
	h = &p->req->headers[p->req->nheaders - 1];
	if (p->in_value) {
		if (h->value + h->value_len != at)
			return -1;
		h->value_len += n;
	} else {
		h->value = at;
		h->value_len = n;
	}
	p->in_value = 1;
	return 0;
}

static int
on_headers_complete(http_parser *hp)
{
	return 0;
}

static int
on_body(http_parser *hp, const char *at, size_t n)
{
	struct http1_req_parser *p = hp->data;

	if (p->fn == NULL)
		return -1; /* body bytes inside the head: cannot happen */
	p->fn(p->arg, at, n);
	return 0;
}

static int
on_message_complete(http_parser *hp)
{
	struct http1_req_parser *p = hp->data;

	p->complete = 1;
	http_parser_pause(hp, 1); /* what follows is the next request */
	return 0;
}

static const http_parser_settings req_settings = {
	.on_url = on_url,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

static int
value_is(const struct http1_header *h, const char *lit)
{
	const char *v = h->value;
	size_t n = h->value_len;

	http1_trim(&v, &n);
	return n == strlen(lit) && strncasecmp(v, lit, n) == 0;
}

/* Judge the header names and framing headers, and note Expect. */
static int
head_framing(struct http1_req *r, struct policy_err *reterr)
{
	size_t i, ncl = 0, nte = 0;
	const struct http1_header *h;
	const char *v;
	size_t n;

	r->content_length = -1;
	for (i = 0; i < r->nheaders; i++) {
		h = &r->headers[i];
		if (!http1_is_token(h->name, h->name_len))
			return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
			    "a header name is not a token");
		if (http1_header_is(h, "Content-Length")) {
			if (ncl++ > 0)
				return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
				    "more than one Content-Length");
			v = h->value;
			n = h->value_len;
			http1_trim(&v, &n);
			if (http1_parse_length(v, n, &r->content_length) != 0)
				return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
				    "Content-Length is not a length");
		} else if (http1_header_is(h, "Transfer-Encoding")) {
			if (nte++ > 0 || !value_is(h, "chunked"))
				return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
				    "Transfer-Encoding other than chunked");
			r->chunked = 1;
		} else if (http1_header_is(h, "Expect") &&
		    value_is(h, "100-continue"))
			r->expect_continue = 1;
	}
	if (ncl > 0 && nte > 0)
		return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
		    "Content-Length with Transfer-Encoding");
	return 0;
}

/* Split the target by its form. */
static int
head_target(struct http1_req *r, int connect, const char *t, size_t n,
    struct policy_err *reterr)
{
	const char *a, *end = t + n;
	size_t i;

	if (n == 0)
		return fail(reterr, EGRESS_ERR_INVALID_REQUEST, "no target");
	if (connect) {
		r->form = HTTP1_REQ_AUTHORITY;
		r->authority = t;
		r->authority_len = n;
	} else if (t[0] == '/') {
		r->form = HTTP1_REQ_ORIGIN;
		r->path = t;
		r->path_len = n;
	} else {
		for (i = 0; i < n &&
		     ((t[i] >= 'a' && t[i] <= 'z') ||
			 (t[i] >= 'A' && t[i] <= 'Z'));
		     i++)
			;
		if (i == 0 || n - i < 3 || memcmp(t + i, "://", 3) != 0)
			return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
			    "the target is neither a path nor a URL");
		r->form = HTTP1_REQ_ABSOLUTE;
		r->scheme = t;
		r->scheme_len = i;
		a = t + i + 3;
		r->authority = a;
		while (a < end && *a != '/' && *a != '?' && *a != '#')
			a++;
		r->authority_len = (size_t)(a - r->authority);
		if (r->authority_len == 0 ||
		    memchr(r->authority, '@', r->authority_len) != NULL)
			return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
			    "the URL has no authority, or has user info");
		if (a == end) {
			r->path = "/";
			r->path_len = 1;
		} else if (*a != '/')
			return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
			    "the URL has no path before its query");
		else {
			r->path = a;
			r->path_len = (size_t)(end - a);
		}
	}
	if (r->authority_len > HTTP1_REQ_AUTHORITY_MAX ||
	    r->path_len > HTTP1_REQ_PATH_MAX)
		return fail(reterr, EGRESS_ERR_TOO_BIG,
		    "the target is too long");
	return 0;
}

int
http1_req_parse_head(struct http1_req_parser *p, const char *buf, size_t len,
    struct http1_req *ret, struct policy_err *reterr)
{
	const char *sp;
	size_t used;
	int err;

	if ((err = head_scan(buf, len, reterr)) != 0)
		return err;
	memset(ret, 0, offsetof(struct http1_req, headers));
	http_parser_init(&p->p, HTTP_REQUEST);
	p->p.data = p;
	p->req = ret;
	p->in_value = 0;
	p->overflow = 0;
	p->complete = 0;
	p->url = NULL;
	p->url_len = 0;
	p->fn = NULL;
	p->arg = NULL;
	p->ck_on = 0;
	used = http_parser_execute(&p->p, &req_settings, buf, len);
	p->req = NULL; /* ret is the caller's from here on */
	if (p->overflow)
		return fail(reterr, EGRESS_ERR_TOO_BIG, "too many headers");
	if (HTTP_PARSER_ERRNO(&p->p) == HPE_INVALID_METHOD &&
	    (sp = memchr(buf, ' ', len)) != NULL && sp > buf &&
	    (size_t)(sp - buf) <= HTTP1_METHOD_MAX &&
	    http1_is_token(buf, (size_t)(sp - buf)))
		return fail(reterr, EGRESS_ERR_DENIED,
		    "a method http-parser does not know");
	if (HTTP_PARSER_ERRNO(&p->p) != HPE_OK &&
	    HTTP_PARSER_ERRNO(&p->p) != HPE_PAUSED)
		return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
		    http_errno_description(HTTP_PARSER_ERRNO(&p->p)));
	if (used != len)
		return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
		    "the head does not parse");
	if (p->p.http_major != 1 || p->p.http_minor > 1)
		return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
		    "not HTTP/1.0 or HTTP/1.1");
	sp = memchr(buf, ' ', len);
	if (sp == NULL || (size_t)(sp - buf) > HTTP1_METHOD_MAX)
		return fail(reterr, EGRESS_ERR_INVALID_REQUEST, "bad method");
	ret->method = buf;
	ret->method_len = (size_t)(sp - buf);
	ret->minor = (int)p->p.http_minor;
	ret->keep_alive = http_should_keep_alive(&p->p) != 0;
	if ((err = head_framing(ret, reterr)) != 0)
		return err;
	err = head_target(ret, p->p.method == HTTP_CONNECT, p->url, p->url_len,
	    reterr);
	if (err == 0 && ret->chunked) {
		p->ck_on = 1;
		chunked_check_init(&p->ck);
	}
	return err;
}

int
http1_req_is_complete(const struct http1_req_parser *p)
{
	return p->complete;
}

int
http1_req_parse_body(struct http1_req_parser *p, const char *buf, size_t n,
    http1_req_body_fn fn, void *arg, size_t *ret_used,
    struct policy_err *reterr)
{
	size_t used;
	long k;

	*ret_used = 0;
	if (p->complete || n == 0)
		return 0;
	/* The framing is checked before the parser decodes a byte of it:
	 * a bad piece is never passed on. */
	if (p->ck_on) {
		if ((k = chunked_check(&p->ck, buf, n)) < 0)
			return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
			    "bad chunk framing");
		n = (size_t)k; /* the rest follows the body */
	}
	p->fn = fn;
	p->arg = arg;
	used = http_parser_execute(&p->p, &req_settings, buf, n);
	p->fn = NULL;
	p->arg = NULL;
	if (HTTP_PARSER_ERRNO(&p->p) != HPE_OK &&
	    HTTP_PARSER_ERRNO(&p->p) != HPE_PAUSED)
		return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
		    http_errno_description(HTTP_PARSER_ERRNO(&p->p)));
	/* Both must agree on where the body ends. */
	if (p->ck_on &&
	    (used != n || p->complete != chunked_check_done(&p->ck)))
		return fail(reterr, EGRESS_ERR_INVALID_REQUEST,
		    "bad chunk framing");
	*ret_used = used;
	return 0;
}

const char *
http1_req_reason(unsigned status)
{
	const char *s;

	if (status < 100 || status > 599)
		return "";
	s = http_status_str((enum http_status)status);
	return s == NULL || strcmp(s, "<unknown>") == 0 ? "" : s;
}

static int
b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int
http1_req_basic_password(const char *v, size_t n, char *buf, size_t bufsz,
    const char **ret_pw, size_t *ret_len)
{
	size_t i, o = 0, pad = 0;
	const char *colon;
	unsigned acc = 0;
	int d, bits = 0;

	http1_trim(&v, &n);
	if (n < 6 || strncasecmp(v, "Basic", 5) != 0 || v[5] != ' ')
		return EGRESS_ERR_INVALID_REQUEST;
	v += 6;
	n -= 6;
	http1_trim(&v, &n);
	if (n == 0 || n % 4 != 0)
		return EGRESS_ERR_INVALID_REQUEST;
	for (i = 0; i < n; i++) {
		if (v[i] == '=') {
			if (i + 2 < n || ++pad > 2)
				return EGRESS_ERR_INVALID_REQUEST;
			continue;
		}
		if (pad > 0 || (d = b64_value((unsigned char)v[i])) < 0)
			return EGRESS_ERR_INVALID_REQUEST;
		acc = (acc << 6) | (unsigned)d;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o == bufsz)
				return EGRESS_ERR_INVALID_REQUEST;
			buf[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	if ((colon = memchr(buf, ':', o)) == NULL)
		return EGRESS_ERR_INVALID_REQUEST;
	*ret_pw = colon + 1;
	*ret_len = o - (size_t)(colon + 1 - buf);
	return 0;
}

static void
set_str(struct proto_str *s, const char *p, size_t n)
{
	s->ptr = p;
	s->len = n;
}

static int
refuse(struct http1_req_refusal *why, unsigned status, const char *detail)
{
	why->status = status;
	why->error = "malformed";
	why->detail = detail;
	return -1;
}

int
http1_req_message(const struct http1_req *q, unsigned how,
    const char *authority, struct proto_msg *m,
    struct http1_req_refusal *ret_why)
{
	const struct http1_header *host = NULL;
	const char *v;
	size_t i, n;
	int https = 0;

	memset(m, 0, offsetof(struct proto_msg, headers));
	if (q->nheaders > PROTO_HEADERS_MAX)
		return refuse(ret_why, 431, "too many header lines");
	/* The parser's own bounds are these; checked again here so that
	 * the message never exceeds the wire protocol's, whoever parsed. */
	if (q->method_len > PROTO_METHOD_MAX || q->path_len > PROTO_PATH_MAX ||
	    q->authority_len > PROTO_AUTHORITY_MAX)
		return refuse(ret_why, 431, "request line too long");
	if ((how & HTTP1_REQ_INSPECTED) &&
	    (authority == NULL || strlen(authority) > PROTO_AUTHORITY_MAX))
		return refuse(ret_why, 400, "no tunnel authority");
	for (i = 0; i < q->nheaders; i++) {
		if (q->headers[i].name_len > PROTO_NAME_MAX ||
		    q->headers[i].value_len > PROTO_VALUE_MAX)
			return refuse(ret_why, 431,
			    "a header line is too long");
		if (http1_header_is(&q->headers[i], "Host"))
			host = &q->headers[i];
		set_str(&m->headers[i].name, q->headers[i].name,
		    q->headers[i].name_len);
		set_str(&m->headers[i].value, q->headers[i].value,
		    q->headers[i].value_len);
	}
	m->nheaders = q->nheaders;
	if (q->form == HTTP1_REQ_ABSOLUTE && (how & HTTP1_REQ_INSPECTED))
		return refuse(ret_why, 400,
		    "absolute-form inside an inspected tunnel");
	if (q->form == HTTP1_REQ_ABSOLUTE) {
		if (q->scheme_len == 5 &&
		    strncasecmp(q->scheme, "https", 5) == 0)
			https = 1;
		else if (!(q->scheme_len == 4 &&
			     strncasecmp(q->scheme, "http", 4) == 0))
			return refuse(ret_why, 400, "scheme not supported");
		set_str(&m->request.authority, q->authority, q->authority_len);
	} else if (q->form == HTTP1_REQ_ORIGIN &&
	    (how & HTTP1_REQ_INSPECTED) && host != NULL) {
		https = 1;
		set_str(&m->request.authority, authority, strlen(authority));
	} else if (q->form == HTTP1_REQ_ORIGIN &&
	    (how & HTTP1_REQ_ORIGIN_OK) && host != NULL) {
		v = host->value;
		n = host->value_len;
		http1_trim(&v, &n);
		if (n == 0 || n > PROTO_AUTHORITY_MAX)
			return refuse(ret_why, 400, "bad Host");
		set_str(&m->request.authority, v, n);
	} else
		return refuse(ret_why, 400,
		    q->form == HTTP1_REQ_ORIGIN ?
			"origin-form request with no Host, or not allowed "
			"on this way in" :
			"target form not relayed");
	m->type = PROTO_MSG_REQUEST;
	m->request.transport = PROTO_TRANSPORT_HTTP;
	set_str(&m->request.method, q->method, q->method_len);
	set_str(&m->request.scheme, https ? "https" : "http", https ? 5 : 4);
	set_str(&m->request.path, q->path, q->path_len);
	return 0;
}

void
http1_req_head_of(const struct proto_msg *m, struct http1_header *in,
    struct http1_head *ret)
{
	size_t i;

	for (i = 0; i < m->nheaders; i++) {
		in[i].name = m->headers[i].name.ptr;
		in[i].name_len = m->headers[i].name.len;
		in[i].value = m->headers[i].value.ptr;
		in[i].value_len = m->headers[i].value.len;
	}
	memset(ret, 0, sizeof(*ret));
	ret->method = m->request.method.ptr;
	ret->method_len = m->request.method.len;
	ret->path = m->request.path.ptr;
	ret->path_len = m->request.path.len;
	ret->headers = in;
	ret->nheaders = m->nheaders;
	ret->body_length = -1;
}
