/* SPDX-License-Identifier: ISC */
/*
 * http1_req: the HTTP/1.1 request parser of the proxy front, over
 * Debian's http-parser (HTTP_REQUEST mode) under explicit bounds. A
 * request is read in two steps: the head, once all of it has arrived
 * (http1_req_head_len() finds its end within HTTP1_HEAD_MAX bytes), is
 * checked byte by byte (CRLF line ends only, no obs-fold, no control
 * byte but HTAB) and then parsed into a struct http1_req whose strings
 * point into the caller's head bytes; then the body, if any, is decoded
 * (Content-Length or chunked) piece by piece as it arrives, stopping at
 * the end of the message so that a pipelined request that follows stays
 * unread. Refused, never passed on: Content-Length with
 * Transfer-Encoding, more than one Content-Length, a Transfer-Encoding
 * other than "chunked", a version other than HTTP/1.0 or HTTP/1.1, more
 * than HTTP1_REQ_HEADERS_MAX headers, bad chunk framing (checked by
 * chunked.h before the parser decodes a byte: Debian's http-parser is
 * built non-strict and takes any two bytes for the CRLF after a chunk's
 * data). The request target is split by its form (origin, absolute,
 * authority); what the target names is not judged here.
 */
#ifndef EGRESS_NET_HTTP1_REQ_H
#define EGRESS_NET_HTTP1_REQ_H

#include <stddef.h>
#include <stdint.h>

#include "broker/net/http1_head.h"
#include "policy/policy.h"
#include "proto/proto.h"

#define HTTP1_REQ_HEADERS_MAX	100   /* header lines in one head */
#define HTTP1_REQ_PATH_MAX	16384 /* path and query */
#define HTTP1_REQ_AUTHORITY_MAX 512

/* How the request target was written (RFC 9112, 3.2). */
enum http1_req_form {
	HTTP1_REQ_ORIGIN = 1,	 /* "/path?query" */
	HTTP1_REQ_ABSOLUTE = 2,	 /* "http://authority/path?query" */
	HTTP1_REQ_AUTHORITY = 3, /* "host:port", CONNECT only */
};

/*
 * A parsed request head. Every string points into the head bytes given
 * to http1_req_parse_head() and is not NUL-terminated.
 */
struct http1_req {
	const char *method;
	size_t method_len;
	enum http1_req_form form;
	const char *scheme; /* absolute form: as written; else NULL */
	size_t scheme_len;
	const char *authority; /* absolute and authority forms; else NULL */
	size_t authority_len;
	const char *path; /* origin and absolute forms: "/..."; else NULL */
	size_t path_len;
	int minor;		/* HTTP/1.minor: 0 or 1 */
	int keep_alive;		/* the client allows another request */
	int64_t content_length; /* -1: none */
	int chunked;		/* Transfer-Encoding: chunked */
	int expect_continue;	/* Expect: 100-continue */
	size_t nheaders;
	struct http1_header headers[HTTP1_REQ_HEADERS_MAX];
};

struct http1_req_parser;

/* Called with n decoded body bytes (borrowed for the call). */
typedef void (*http1_req_body_fn)(void *arg, const char *p, size_t n);

/* Allocate a parser. Return NULL on out-of-memory. */
struct http1_req_parser *http1_req_parser_new(void);

/* Free p. NULL is a no-op. */
void http1_req_parser_free(struct http1_req_parser *p);

/*
 * Find the end of the request head in the n bytes at buf: return the
 * head's length (through the empty line), 0 when it has not ended yet,
 * or EGRESS_ERR_TOO_BIG when it has not ended within HTTP1_HEAD_MAX
 * bytes. from is how many of those bytes an earlier call on the same
 * head already looked at (0: none), so that a head read a byte at a
 * time costs its length, not its square: only the bytes from from - 2
 * on are looked at.
 */
long http1_req_head_len(const char *buf, size_t n, size_t from);

/*
 * Answer whether the n bytes at buf, the start of a head not yet ended,
 * can already be refused: a first byte that cannot start a method, or a
 * control byte other than HTAB, CR and LF. Lets a reader drop a client
 * that sends no HTTP without waiting for a head that never ends. Only
 * the bytes from from on are looked at (from: as for
 * http1_req_head_len()).
 */
int http1_req_head_bad(const char *buf, size_t n, size_t from);

/*
 * Parse the head of len bytes at buf (as http1_req_head_len() measured
 * it) with p, reset for a new message. On success write *ret (pointing
 * into buf) and return 0; p then expects the body. Return
 * EGRESS_ERR_INVALID_REQUEST with reterr (if not NULL) naming the first
 * problem, EGRESS_ERR_TOO_BIG when the target is over its bound, or
 * EGRESS_ERR_DENIED when the method is a well-formed token http-parser
 * does not know (it cannot be parsed, so cannot be relayed: 405).
 */
int http1_req_parse_head(struct http1_req_parser *p, const char *buf,
    size_t len, struct http1_req *ret, struct policy_err *reterr);

/* Answer whether the message whose head p parsed last is complete. */
int http1_req_is_complete(const struct http1_req_parser *p);

/*
 * Decode body bytes of the current message from the n bytes at buf,
 * passing each decoded piece to fn. Stop at the end of the message.
 * Write the bytes of buf used to *ret_used. Return 0, or
 * EGRESS_ERR_INVALID_REQUEST (bad chunk framing) with reterr set.
 */
int http1_req_parse_body(struct http1_req_parser *p, const char *buf, size_t n,
    http1_req_body_fn fn, void *arg, size_t *ret_used,
    struct policy_err *reterr);

/*
 * Decode the Proxy-Authorization value of n bytes at v, which must be
 * "Basic" (any case), spaces, and the base64 (RFC 4648, padded) of
 * "user:password" (RFC 7617), into buf of bufsz bytes. Return 0 and
 * point *ret_pw / *ret_len at the password inside buf, or
 * EGRESS_ERR_INVALID_REQUEST when the value is not of that form or does
 * not fit.
 */
int http1_req_basic_password(const char *v, size_t n, char *buf, size_t bufsz,
    const char **ret_pw, size_t *ret_len);

/* How the proxy front takes a head (http1_req_message()). */
#define HTTP1_REQ_ORIGIN_OK 0x1 /* origin form with a Host: http:// + Host */
#define HTTP1_REQ_INSPECTED \
	0x2 /* inside an inspected tunnel: origin form
				   only, as https:// + the tunnel's authority */

/* Why http1_req_message() refused a head: what the front answers. */
struct http1_req_refusal {
	unsigned status;    /* 400 or 431 */
	const char *error;  /* "malformed" */
	const char *detail; /* static text */
};

/*
 * The proxy front's translation of the head q into the REQUEST message of
 * the pipeline (transport http; the caller sets stream and flags): the
 * method, path and every header as they are; the scheme and authority of
 * an absolute-form target (http or https only); in origin form with a
 * Host, https:// and authority (the tunnel's HOST[:PORT]) with
 * HTTP1_REQ_INSPECTED (a Host naming anything else is the pipeline's to
 * refuse), else http:// and the trimmed Host with HTTP1_REQ_ORIGIN_OK.
 * Refused: a header line or a request line part (method, path,
 * authority) over the wire protocol's bounds (431), HTTP1_REQ_INSPECTED
 * without an authority (NULL) or with one over those bounds, an
 * absolute-form target inside an inspected tunnel, another scheme, an
 * origin form without a Host or not allowed by how, an empty or too long
 * Host, any other form (400). The message's strings point into q's head
 * and into authority. Return 0, or -1 with *ret_why set.
 */
int http1_req_message(const struct http1_req *q, unsigned how,
    const char *authority, struct proto_msg *m,
    struct http1_req_refusal *ret_why);

/*
 * The head of the REQUEST m as http1_request_check() takes it: m's
 * method, path and headers, the headers written to in[] (room for
 * m->nheaders, at most PROTO_HEADERS_MAX), every string pointing into
 * m's; body_length -1 (the check ignores it).
 */
void http1_req_head_of(const struct proto_msg *m, struct http1_header *in,
    struct http1_head *ret);

/*
 * Return the reason phrase of an HTTP status (RFC 9110's, as http-parser
 * knows them), or "" for a status it does not name. Never NULL.
 */
const char *http1_req_reason(unsigned status);

#endif /* EGRESS_NET_HTTP1_REQ_H */
