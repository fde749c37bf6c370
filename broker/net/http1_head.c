/* SPDX-License-Identifier: ISC */
/*
 * http1_head: the pure HTTP/1.1 head grammar of the broker (see
 * http1_head.h): the request-head validator and filter, the Host value
 * the broker sends, and the hop-by-hop header lists of both directions.
 * No allocation, no I/O.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <egress/error.h>

#include "broker/net/http1_head.h"

/* The token characters (RFC 9110, 5.6.2), one bit each: DIGIT, ALPHA
 * and !#$%&'*+-.^_`|~. */
static const uint32_t http1_tchars[8] = { 0x00000000, 0x03ff6cfa, 0xc7fffffe,
	0x57ffffff, 0, 0, 0, 0 };

static inline int
tchar(unsigned char c)
{
	return (int)((http1_tchars[c >> 5] >> (c & 31)) & 1u);
}

int
http1_is_tchar(unsigned char c)
{
	return tchar(c);
}

int
http1_is_token(const char *s, size_t n)
{
	size_t i;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++)
		if (!tchar((unsigned char)s[i]))
			return 0;
	return 1;
}

static int
http1_value_ok(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return 0;
	}
	return 1;
}

int
http1_fields_ok(const struct http1_header *h, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!http1_is_token(h[i].name, h[i].name_len))
			return 0;
	return 1;
}

void
http1_trim(const char **s, size_t *n)
{
	while (*n > 0 && (**s == ' ' || **s == '\t')) {
		(*s)++;
		(*n)--;
	}
	while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
		(*n)--;
}

static uint16_t
http1_default_port(const char *scheme)
{
	if (strcmp(scheme, "https") == 0 || strcmp(scheme, "wss") == 0)
		return 443;
	if (strcmp(scheme, "http") == 0 || strcmp(scheme, "ws") == 0)
		return 80;
	return 0;
}

static int
http1_fail(struct policy_err *reterr, const char *msg)
{
	if (reterr != NULL)
		(void)snprintf(reterr->msg, sizeof(reterr->msg), "%s", msg);
	return EGRESS_ERR_INVALID_REQUEST;
}

int
http1_parse_length(const char *s, size_t n, int64_t *ret)
{
	int64_t v = 0;
	size_t i;

	if (n == 0 || n > 15)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*ret = v;
	return 0;
}

struct http1_tok {
	const char *p;
	size_t n;
};

/* A header name and its length, for lists looked up per header. */
struct http1_name {
	const char *s;
	size_t n;
};
#define HTTP1_NAME(lit) \
	{ \
		lit, sizeof(lit) - 1 \
	}

/*
 * The hop-by-hop header names of both directions (RFC 9110, 7.6.1, and
 * the unregistered Proxy-Connection): they belong to one connection, the
 * guest's or the upstream's, and never cross the broker.
 */
static const struct http1_name http1_hop[] = {
	HTTP1_NAME("connection"),
	HTTP1_NAME("keep-alive"),
	HTTP1_NAME("proxy-connection"),
	HTTP1_NAME("te"),
	HTTP1_NAME("trailer"),
	HTTP1_NAME("transfer-encoding"),
	HTTP1_NAME("upgrade"),
};

/* Is h's name one of the n names of list? */
static int
http1_name_in(const struct http1_header *h, const struct http1_name *list,
    size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (list[i].n == h->name_len &&
		    strncasecmp(h->name, list[i].s, list[i].n) == 0)
			return 1;
	return 0;
}

/* Does the comma-separated list v (n bytes) name the token tok? */
static int
http1_list_has(const char *v, size_t n, const char *tok, size_t tn)
{
	size_t i = 0, a, e;

	while (i < n) {
		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		a = i;
		while (i < n && v[i] != ',')
			i++;
		e = i;
		while (e > a && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e - a == tn && strncasecmp(v + a, tok, tn) == 0)
			return 1;
	}
	return 0;
}

static int
http1_is_hop_name(const struct http1_header *h)
{
	return http1_name_in(h, http1_hop,
	    sizeof(http1_hop) / sizeof(http1_hop[0]));
}

int
http1_response_is_hop(const struct http1_header *all, size_t nall,
    const struct http1_header *h)
{
	size_t i;

	if (http1_is_hop_name(h))
		return 1;
	for (i = 0; i < nall; i++)
		if (http1_header_is(&all[i], "connection") &&
		    http1_list_has(all[i].value, all[i].value_len, h->name,
			h->name_len))
			return 1;
	return 0;
}

int
http1_trailer_is_dropped(const struct http1_header *all, size_t nall,
    const struct http1_header *h)
{
	/* Fields a sender must not put in trailers (RFC 9110, 6.5.1):
	 * framing, routing, authentication, response control and content
	 * processing. */
	static const struct http1_name never[] = {
		HTTP1_NAME("content-length"),
		HTTP1_NAME("host"),
		HTTP1_NAME("authorization"),
		HTTP1_NAME("set-cookie"),
		HTTP1_NAME("cookie"),
		HTTP1_NAME("location"),
		HTTP1_NAME("content-type"),
		HTTP1_NAME("content-encoding"),
		HTTP1_NAME("content-range"),
		HTTP1_NAME("cache-control"),
		HTTP1_NAME("expires"),
		HTTP1_NAME("date"),
		HTTP1_NAME("age"),
		HTTP1_NAME("vary"),
		HTTP1_NAME("retry-after"),
		HTTP1_NAME("max-forwards"),
		HTTP1_NAME("www-authenticate"),
		HTTP1_NAME("proxy-authenticate"),
		HTTP1_NAME("proxy-authorization"),
	};

	return http1_response_is_hop(all, nall, h) ||
	    http1_name_in(h, never, sizeof(never) / sizeof(never[0]));
}

/* Is h a header the broker drops from a guest's request? */
static int
http1_request_is_hop(const struct http1_header *h,
    const struct http1_tok *toks, size_t ntoks)
{
	static const struct http1_name own[] = {
		HTTP1_NAME("host"),
		HTTP1_NAME("content-length"),
		HTTP1_NAME("expect"),
	};
	size_t i;

	if (http1_is_hop_name(h) ||
	    http1_name_in(h, own, sizeof(own) / sizeof(own[0])))
		return 1;
	if (h->name_len >= 6 && strncasecmp(h->name, "proxy-", 6) == 0)
		return 1;
	for (i = 0; i < ntoks; i++)
		if (toks[i].n == h->name_len &&
		    strncasecmp(toks[i].p, h->name, h->name_len) == 0)
			return 1;
	return 0;
}

int
http1_request_check(const struct policy_dest *dest,
    const struct http1_head *in, struct http1_header *kept, size_t kept_max,
    struct http1_head *ret_head, struct policy_err *reterr)
{
	struct http1_tok toks[HTTP1_CONN_TOKENS_MAX];
	size_t i, ntoks = 0, nkept = 0, total;
	int64_t clen = -1;
	int nhost = 0, has_te = 0;

	if (dest == NULL || in == NULL || ret_head == NULL ||
	    (in->nheaders > 0 && (in->headers == NULL || kept == NULL)) ||
	    kept_max < in->nheaders || in->method == NULL || in->path == NULL)
		return EGRESS_ERR_INVALID;

	if (in->method_len > HTTP1_METHOD_MAX ||
	    !http1_is_token(in->method, in->method_len))
		return http1_fail(reterr, "method is not a token");
	if (in->method_len == 7 && strncasecmp(in->method, "CONNECT", 7) == 0)
		return http1_fail(reterr, "CONNECT is not an origin request");
	if (in->path_len == 0 || in->path[0] != '/')
		return http1_fail(reterr, "path is not in origin form");
	for (i = 0; i < in->path_len; i++) {
		unsigned char c = (unsigned char)in->path[i];

		if (c <= 0x20 || c >= 0x7f || c == '#')
			return http1_fail(reterr, "bad byte in path");
	}
	/* "METHOD SP path SP HTTP/1.1 CRLF" ... "CRLF" */
	total = in->method_len + 1 + in->path_len + 11 + 2;
	if (total > HTTP1_HEAD_MAX)
		return http1_fail(reterr, "request head too large");

	/* Pass 1: grammar, size, Connection tokens, Host, length. */
	for (i = 0; i < in->nheaders; i++) {
		const struct http1_header *h = &in->headers[i];
		const char *v = h->value;
		size_t vn = h->value_len;

		if (h->name == NULL || (v == NULL && vn > 0))
			return EGRESS_ERR_INVALID;
		if (!http1_is_token(h->name, h->name_len))
			return http1_fail(reterr,
			    "header name is not a token");
		if (!http1_value_ok(v, vn))
			return http1_fail(reterr,
			    "control byte in header value");
		total += h->name_len + 2 + vn + 2;
		if (total > HTTP1_HEAD_MAX)
			return http1_fail(reterr, "request head too large");
		http1_trim(&v, &vn);
		if (http1_header_is(h, "connection")) {
			size_t a = 0, b;

			while (a < vn) {
				const char *tp;
				size_t tn;

				for (b = a; b < vn && v[b] != ','; b++)
					;
				tp = v + a;
				tn = b - a;
				http1_trim(&tp, &tn);
				if (tn > 0) {
					if (!http1_is_token(tp, tn))
						return http1_fail(reterr,
						    "bad Connection token");
					if (ntoks == HTTP1_CONN_TOKENS_MAX)
						return http1_fail(reterr,
						    "too many Connection "
						    "tokens");
					toks[ntoks].p = tp;
					toks[ntoks++].n = tn;
				}
				a = b + 1;
			}
		} else if (http1_header_is(h, "host")) {
			struct policy_dest hd;
			struct policy_err e;

			if (++nhost > 1)
				return http1_fail(reterr,
				    "more than one Host header");
			if (policy_authority_parse(v, vn,
				http1_default_port(dest->scheme), &hd,
				&e) != 0 ||
			    hd.port != dest->port ||
			    hd.host.kind != dest->host.kind ||
			    strcmp(hd.host.name, dest->host.name) != 0)
				return http1_fail(reterr,
				    "Host header differs from the authority");
		} else if (http1_header_is(h, "content-length")) {
			int64_t l;

			if (http1_parse_length(v, vn, &l) != 0)
				return http1_fail(reterr,
				    "bad Content-Length");
			if (clen >= 0 && l != clen)
				return http1_fail(reterr,
				    "conflicting Content-Length");
			clen = l;
		} else if (http1_header_is(h, "transfer-encoding"))
			has_te = 1;
	}
	if (has_te && clen >= 0)
		return http1_fail(reterr,
		    "Content-Length with Transfer-Encoding");

	/* Pass 2: filter. */
	for (i = 0; i < in->nheaders; i++) {
		const struct http1_header *h = &in->headers[i];

		if (http1_request_is_hop(h, toks, ntoks))
			continue;
		kept[nkept] = *h;
		http1_trim(&kept[nkept].value, &kept[nkept].value_len);
		nkept++;
	}
	*ret_head = *in;
	ret_head->headers = kept;
	ret_head->nheaders = nkept;
	ret_head->body_length = clen;
	return 0;
}

int
http1_format_host(const struct policy_dest *dest, char *buf, size_t n)
{
	int len;

	if (dest == NULL || buf == NULL)
		return EGRESS_ERR_INVALID;
	{
		/* By hand: this runs once per request. */
		int v6 = dest->host.kind == POLICY_HOST_IPV6;
		size_t hl = strnlen(dest->host.name, sizeof(dest->host.name));
		size_t o = 0;
		char port[8];
		size_t np = 0;
		unsigned p = dest->port;

		if (dest->port != http1_default_port(dest->scheme)) {
			do {
				port[sizeof(port) - 1 - np++] = (char)('0' +
				    p % 10);
				p /= 10;
			} while (p != 0 && np < sizeof(port) - 1);
			port[sizeof(port) - 1 - np++] = ':';
		}
		if (hl + (v6 ? 2 : 0) + np >= n)
			return EGRESS_ERR_TOO_BIG;
		if (v6)
			buf[o++] = '[';
		memcpy(buf + o, dest->host.name, hl);
		o += hl;
		if (v6)
			buf[o++] = ']';
		memcpy(buf + o, port + sizeof(port) - np, np);
		o += np;
		buf[o] = '\0';
		len = (int)o;
	}
	return len;
}

int
http1_method_is_allowed(const char *m, size_t n, const char *const *extra,
    size_t nextra)
{
	/* RFC 9110, 9.3, without CONNECT, and PATCH (RFC 5789). */
	static const char *const std[] = {
		"GET",
		"HEAD",
		"POST",
		"PUT",
		"DELETE",
		"OPTIONS",
		"TRACE",
		"PATCH",
	};
	size_t i;

	if (n == 7 && strncasecmp(m, "CONNECT", 7) == 0)
		return 0;
	for (i = 0; i < sizeof(std) / sizeof(std[0]); i++)
		if (n == strlen(std[i]) && memcmp(m, std[i], n) == 0)
			return 1;
	for (i = 0; i < nextra; i++)
		if (n == strlen(extra[i]) && memcmp(m, extra[i], n) == 0)
			return 1;
	return 0;
}
