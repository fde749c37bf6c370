/* SPDX-License-Identifier: ISC */
/*
 * guest: the seam between a request and the plugin connection it serves.
 * A request reaches its connection only through these operations; the
 * connection (session.c, or a test's fake) implements them. The request
 * never learns what the connection is, and the connection owns and frees
 * its requests.
 */
#ifndef EGRESS_BROKER_GUEST_H
#define EGRESS_BROKER_GUEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct evbuffer;
struct proto_conn;
struct proto_msg;
struct proto_stream;

struct guest_ops {
	/* Return the instance name the connection is bound to (borrowed
	 * for the connection's life). */
	const char *(*instance)(void *ctx);
	/* Return the connection's protocol state (borrowed). */
	struct proto_conn *(*proto)(void *ctx);
	/* Encode m (on stream s, or NULL for stream 0), apply it to the
	 * state table and queue it. Return 0 or an error (nothing
	 * queued). */
	int (*send)(void *ctx, struct proto_stream *s,
	    const struct proto_msg *m);
	/* Queue one DATA frame of n bytes moved from buf (no copy) on s
	 * with flags; n must not exceed proto_conn_sendable(). With s
	 * NULL, queue the n bytes of buf as they are (an already encoded
	 * frame whose header was applied with proto_conn_send()). Return
	 * 0 or an error. */
	int (*send_data)(void *ctx, struct proto_stream *s,
	    struct evbuffer *buf, size_t n, uint8_t flags);
	/* Send ERROR with the wire code on s, closing the stream. */
	int (*send_error)(void *ctx, struct proto_stream *s, uint32_t code);
	/* n guest DATA bytes on s were consumed (s NULL: the stream is
	 * gone): send the WINDOW_UPDATEs now due. */
	void (*consumed)(void *ctx, struct proto_stream *s, size_t n);
	/* Answer whether the output queue has room for more DATA (within
	 * the connection's bound and its instance's memory budget; when the
	 * budget says no, the connection retries once memory is freed). */
	int (*can_write)(void *ctx);
	/* Optional (NULL: copy with send_data instead). Move up to max
	 * bytes (at most proto_conn_sendable()) from the socket fd into
	 * one DATA frame on s without copying them through user space.
	 * Return the count, or a GUEST_SPLICE_* code; nothing was read
	 * unless the count is positive. */
	ssize_t (*splice_data)(void *ctx, struct proto_stream *s, int fd,
	    size_t max);
};

/*
 * What splice_data() reports besides a count: fd reached its end of file
 * (EOF); nothing to read from fd yet (AGAIN); not now, since output waits
 * or splicing is off: copy instead (BUSY); reading fd failed, errno says
 * why (UPSTREAM); the frame could not be queued and the bytes read are
 * lost (FAILED); the connection's socket is full and nothing was read:
 * its flush (request_flush()) follows once it has room (FULL).
 */
#define GUEST_SPLICE_EOF      0
#define GUEST_SPLICE_AGAIN    (-1)
#define GUEST_SPLICE_BUSY     (-2)
#define GUEST_SPLICE_UPSTREAM (-3)
#define GUEST_SPLICE_FAILED   (-4)
#define GUEST_SPLICE_FULL     (-5)

/* One connection as a request sees it: operations and their context. */
struct guest {
	const struct guest_ops *ops;
	void *ctx;
};

/*
 * The operations of a connection that is gone, for a request that
 * outlives it: ctx is the instance name (a NUL-terminated copy the request
 * keeps), which instance() returns; send, send_data and send_error fail
 * with EGRESS_ERR_CLOSED, can_write answers 0, consumed does nothing, and
 * proto returns a closed connection's state.
 */
extern const struct guest_ops guest_gone_ops;

#endif /* EGRESS_BROKER_GUEST_H */
