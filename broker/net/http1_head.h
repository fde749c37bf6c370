/* SPDX-License-Identifier: ISC */
/*
 * http1_head: the pure HTTP/1.1 head grammar of the broker: the guest's
 * request head validated and filtered (method, origin-form path, header
 * grammar, the 64 KiB head cap, Host against the authorized authority,
 * hop-by-hop headers dropped), the Host value the broker sends, and the
 * hop-by-hop test of response headers. The hop-by-hop lists of both
 * directions live here and nowhere else.
 * egress: no-alloc (nothing here allocates or does I/O)
 */
#ifndef EGRESS_NET_HTTP1_HEAD_H
#define EGRESS_NET_HTTP1_HEAD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "policy/policy.h"

#define HTTP1_HEAD_MAX	      (64 * 1024) /* request or response head */
#define HTTP1_METHOD_MAX      32
#define HTTP1_CONN_TOKENS_MAX 32 /* names listed in Connection */

/* One header line; both strings borrowed, not NUL-terminated. */
struct http1_header {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
};

/*
 * A request head, all strings borrowed. body_length is the announced
 * body size, or -1 when unknown (the body is then sent chunked).
 */
struct http1_head {
	const char *method;
	size_t method_len;
	const char *path; /* origin form: "/path?query" */
	size_t path_len;
	const struct http1_header *headers;
	size_t nheaders;
	int64_t body_length;
};

/*
 * Validate a guest's request head for destination dest (the authorized
 * authority) and filter its headers. Checks: method is a token of at
 * most HTTP1_METHOD_MAX bytes and not CONNECT; path starts with '/' and
 * holds only visible ASCII other than '#' (no space, CR, LF, NUL, other
 * control or non-ASCII byte); header names are tokens; values hold no
 * control byte except HTAB; the head as sent (request line, header
 * lines, final CRLF) is at most HTTP1_HEAD_MAX bytes; at most one Host
 * header, which must name dest's host and port (the port defaulting to
 * the scheme's); Content-Length values are decimal, all equal, and not
 * combined with Transfer-Encoding; Connection lists at most
 * HTTP1_CONN_TOKENS_MAX names.
 * Dropped from the output: Host, Content-Length (the broker frames the
 * body), Connection and every header it names, Keep-Alive, Proxy-*, TE,
 * Trailer, Transfer-Encoding, Upgrade and Expect. Kept headers are
 * written to kept[] (capacity kept_max >= in->nheaders) in order, with
 * values trimmed of surrounding spaces and tabs, pointing into in's
 * strings. in->body_length is ignored.
 * On success write *ret_head: in's method and path, headers = kept,
 * nheaders = the kept count, body_length = the Content-Length value or
 * -1. Return 0, or EGRESS_ERR_INVALID_REQUEST with reterr (if not NULL)
 * naming the first problem, or EGRESS_ERR_INVALID for bad arguments.
 * Pure: no allocation, no I/O.
 */
int http1_request_check(const struct policy_dest *dest,
    const struct http1_head *in, struct http1_header *kept, size_t kept_max,
    struct http1_head *ret_head, struct policy_err *reterr);

/*
 * Format the Host value the broker sends for dest: the host (IPv6 in
 * brackets), with ":port" unless port is the scheme's default. Return
 * the length written to buf (NUL-terminated), or EGRESS_ERR_TOO_BIG.
 */
int http1_format_host(const struct policy_dest *dest, char *buf, size_t n);

/*
 * Answer whether response header h is hop-by-hop: one of the names of
 * both directions (Connection, Keep-Alive, Proxy-Connection, TE, Trailer,
 * Transfer-Encoding, Upgrade) or a name that a Connection header among
 * all[0..nall) lists. Such a header is never passed to the guest.
 */
int http1_response_is_hop(const struct http1_header *all, size_t nall,
    const struct http1_header *h);

/*
 * Answer whether response trailer h (of the trailer section all[0..nall))
 * is dropped: a hop-by-hop field as for http1_response_is_hop(), or a
 * field that must not be sent as a trailer (RFC 9110, 6.5.1: framing,
 * routing, authentication, response control and content processing,
 * e.g. Content-Length, Host, Set-Cookie, Location, Content-Type).
 */
int http1_trailer_is_dropped(const struct http1_header *all, size_t nall,
    const struct http1_header *h);

/*
 * Answer whether a guest may use the method m (n bytes): one of the
 * standard set (GET, HEAD, POST, PUT, DELETE, OPTIONS, TRACE, PATCH,
 * compared case-sensitively as RFC 9110 says) or one of extra[0..nextra)
 * (the operator's [limits] extra_methods). CONNECT, in any case, never.
 */
int http1_method_is_allowed(const char *m, size_t n, const char *const *extra,
    size_t nextra);

/* Answer whether c is a token character (RFC 9110, 5.6.2). */
int http1_is_tchar(unsigned char c);

/* Answer whether the n bytes at s are a token: at least one, each a
 * token character. */
int http1_is_token(const char *s, size_t n);

/*
 * Answer whether the names of the n fields at h are tokens, as a
 * response's head or trailers must be before anything of them is passed
 * on: http-parser built non-strict keeps a space before the colon in a
 * name, so "Content-Length : 5" would pass every check by name and reach
 * the client as framing. (Its values it checks itself: a control byte
 * but HTAB, or DEL, is refused even then.)
 */
int http1_fields_ok(const struct http1_header *h, size_t n);

/* Answer whether h's name is name (ASCII case-insensitive). Inline, so
 * that the length of a literal name is known where it is written. */
static inline int
http1_header_is(const struct http1_header *h, const char *name)
{
	size_t n = strlen(name);

	return h->name_len == n && strncasecmp(h->name, name, n) == 0;
}

/* Trim spaces and tabs around the n bytes at *s, in place. */
void http1_trim(const char **s, size_t *n);

/*
 * Parse a decimal length of n bytes at s: digits only, no sign, at most
 * 15 of them. Return 0 and write *ret, or -1.
 */
int http1_parse_length(const char *s, size_t n, int64_t *ret);

#endif /* EGRESS_NET_HTTP1_HEAD_H */
