/* SPDX-License-Identifier: ISC */
/*
 * http1: the broker's HTTP/1.1 client side of the pinned send path: one
 * request/response exchange over an already dialed bufferevent (plain or
 * TLS), on a head that http1_head.h validated and filtered, with the
 * response parsed by Debian's http-parser and streamed back through
 * callbacks under caller-driven flow control. The exchange never follows
 * a redirect, never retries and never resolves anything.
 */
#ifndef EGRESS_BROKER_HTTP1_H
#define EGRESS_BROKER_HTTP1_H

#include <stddef.h>
#include <stdint.h>

#include "broker/net/http1_head.h"
#include "policy/policy.h"

struct bufferevent;
struct evbuffer;
struct http1_exchange;

#define HTTP1_HEADERS_MAX 512 /* response header lines */
#define HTTP1_INTERIM_MAX \
	16			     /* 1xx responses before the final one;
					   more: upstream-protocol-error */
#define HTTP1_READ_HIGH (128 * 1024) /* bytes read ahead, at most */
#define HTTP1_WRITE_LOW (32 * 1024)  /* on_writable threshold */

/* Per-exchange timeouts in milliseconds; 0 disables one. */
struct http1_timeouts {
	int first_byte_ms;    /* request start (or last write progress)
				   to the first response byte */
	int between_bytes_ms; /* between response reads, while not paused */
};

/* The final response head; everything borrowed for the on_head call. */
struct http1_response {
	int status; /* 200..599 (1xx are swallowed) */
	const char *reason;
	size_t reason_len;
	const struct http1_header *headers;
	size_t nheaders;
	int64_t content_length; /* -1 unless Content-Length */
	int chunked;
};

/*
 * Exchange callbacks, all called from the event loop. A callback may call
 * http1_pause_read(), http1_resume_read(), the body writers or
 * http1_exchange_free() on its own exchange. After on_end nothing else is
 * called.
 * on_head: the final response head (1xx interim responses are consumed;
 *   101 is an error). A response to HEAD, a 204 and a 304 have no body,
 *   whatever their headers announce.
 * on_data: a piece of the decoded body (chunk framing removed), borrowed
 *   for the call.
 *   (http1_set_body_buffer() replaces it with a moving variant.)
 * on_end: err 0 means the response completed; trailers (borrowed for the
 *   call) are those of a chunked body. Otherwise err is
 *   EGRESS_ERR_UPSTREAM_PROTOCOL (malformed response, CL with TE, bad
 *   length, head over HTTP1_HEAD_MAX, body cut short, connection reset),
 *   EGRESS_ERR_TIMEOUT, EGRESS_ERR_TLS_FAILED (TLS error before any
 *   response byte) or
 *   EGRESS_ERR_NOMEM.
 * on_writable: optional; the request output buffer drained to
 *   HTTP1_WRITE_LOW bytes or less, so more body may be written.
 */
struct http1_callbacks {
	void (*on_head)(void *arg, const struct http1_response *resp);
	void (*on_data)(void *arg, const char *p, size_t n);
	void (*on_end)(void *arg, int err, const struct http1_header *trailers,
	    size_t ntrailers);
	void (*on_writable)(void *arg);
};

/*
 * A body callback that moves bytes instead of borrowing them: the next
 * piece of decoded body is the first n bytes of in (the connection's
 * input, borrowed for the call). Move them out with
 * evbuffer_remove_buffer() (whole chunks of a Content-Length body then
 * move without a copy); bytes left in place are discarded, and removing
 * more than n is a bug. A piece is at most what was read ahead
 * (HTTP1_READ_HIGH plus one socket read). Same rules as on_data
 * otherwise (pausing, freeing the exchange).
 */
typedef void (*http1_body_buffer_cb)(void *arg, struct evbuffer *in, size_t n);

/*
 * Copy head h (whose strings may borrow a frame buffer) into one
 * malloc'd block: write the copy to *ret (its strings point into the
 * block) and the block to *ret_mem (the caller frees it). Return 0, or
 * EGRESS_ERR_NOMEM with nothing written.
 */
int http1_head_copy(const struct http1_head *h, struct http1_head *ret,
    void **ret_mem);

/*
 * Start one exchange on bev (borrowed: it stays the caller's, and must
 * outlive the exchange; its callbacks, watermarks and read state are
 * taken over until http1_exchange_free()). head must be the output of
 * http1_request_check() for the same dest (it is re-checked: any header
 * the filter would drop or change is refused). Write the request head
 * (origin form, Host from dest, Content-Length or chunked framing by
 * head->body_length; no framing header for a zero-length GET, HEAD,
 * OPTIONS, TRACE or DELETE; "Connection: close" unless keep_alive) and
 * start reading the response. On plain TCP with nothing queued the head
 * is written to the socket within this call (the rest, and TLS, through
 * the bufferevent). A body of length 0 is already finished.
 * t and cb are copied. Callbacks never run inside this call.
 * Return 0 and write *ret, or EGRESS_ERR_INVALID_REQUEST,
 * EGRESS_ERR_INVALID, or EGRESS_ERR_NOMEM.
 */
int http1_exchange_new(struct bufferevent *bev, const struct policy_dest *dest,
    const struct http1_head *head, int keep_alive,
    const struct http1_timeouts *t, const struct http1_callbacks *cb,
    void *arg, struct http1_exchange **ret);

/*
 * Deliver the response body of x through cb (with the exchange's arg)
 * instead of on_data. Call it right after http1_exchange_new(), before
 * the event loop runs again; cb NULL restores on_data.
 */
void http1_set_body_buffer(struct http1_exchange *x, http1_body_buffer_cb cb);

/*
 * Detach from the bufferevent (callbacks cleared; reading left as it is,
 * so that a pooled connection keeps its read watch: bytes that arrive are
 * left in the input, which makes pool_take() refuse the connection) and
 * free the exchange; no callback runs afterwards. NULL is a no-op. Safe
 * inside the exchange's own callbacks.
 */
void http1_exchange_free(struct http1_exchange *x);

/*
 * Append n bytes of request body (copied; chunk-framed when the length
 * is unknown; n 0 is a no-op). Return 0, EGRESS_ERR_INVALID_REQUEST when
 * the body would exceed the announced length, EGRESS_ERR_CLOSED after
 * http1_finish_body() or after on_end, or EGRESS_ERR_NOMEM.
 */
int http1_write_body(struct http1_exchange *x, const void *p, size_t n);

/* As http1_write_body(), moving every byte out of buf (no copy). */
int http1_write_body_buffer(struct http1_exchange *x, struct evbuffer *buf);

/*
 * End the request body (the last chunk for a chunked body). Return 0,
 * EGRESS_ERR_INVALID_REQUEST when fewer bytes than announced were
 * written (the exchange is then over without an on_end call and the
 * connection is not reusable: free both), EGRESS_ERR_CLOSED if already
 * finished or ended, or EGRESS_ERR_NOMEM. Never calls a callback.
 */
int http1_finish_body(struct http1_exchange *x);

/* Return the bytes of request still queued towards the upstream. */
size_t http1_output_pending(const struct http1_exchange *x);

/*
 * Stop reading the response: no on_data, on_data_buffer or on_end runs
 * and nothing more is read from the socket until http1_resume_read();
 * the between-bytes timer is suspended. At most HTTP1_READ_HIGH bytes
 * (plus one socket read) stay buffered. Idempotent.
 */
void http1_pause_read(struct http1_exchange *x);

/* Resume after http1_pause_read(); buffered input is processed from the
 * event loop, never inside this call. Idempotent. */
void http1_resume_read(struct http1_exchange *x);

/*
 * Answer whether the connection can carry another exchange: only after
 * on_end with err 0, when the response was length-delimited, neither
 * side asked to close, the whole request was sent and no stray bytes
 * followed the response. Return 1 or 0.
 */
int http1_is_reusable(const struct http1_exchange *x);

/* Answer whether any response byte arrived (a reused connection that
 * fails before this may be retried by the caller). Return 1 or 0. */
int http1_response_started(const struct http1_exchange *x);

#endif /* EGRESS_BROKER_HTTP1_H */
