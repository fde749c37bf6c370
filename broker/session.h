/* SPDX-License-Identifier: ISC */
/*
 * session: one plugin connection on an instance socket. Input is read
 * with recvmsg() and a control buffer, so that any file descriptor a
 * client passes (SCM_RIGHTS) is seen, closed and the connection dropped:
 * the broker accepts no descriptors. Output goes through a bufferevent on
 * the same fd. The connection opens with HELLO, then carries many
 * concurrent request streams, each checked against proto's state table
 * (proto_conn_recv / proto_conn_send) and flow control; a protocol
 * violation drops this connection only. The session is bound to the
 * instance of the socket it was accepted on for its whole life. The
 * session owns its requests: each sees the connection only through the
 * guest seam (guest.h), reports its end through a callback, and the
 * session unlinks and frees it. A connection whose first byte is an
 * uppercase ASCII letter (an HTTP request line; a frame starts with 0)
 * is handed, with what was read and its share, to the proxy front
 * (proxy.h), which serves it for the same instance.
 * Memory per connection is bounded: unread input at most one frame, and
 * output to the guest stops being produced above SESSION_OUT_HIGH or
 * when the instance's memory budget (broker.h) gives no more credit (the
 * guest not reading pauses response DATA, and then no more input is
 * read either, so PINGs cannot queue PONGs without bound). Once output
 * waits for the guest at that bound, a guest that reads nothing for
 * SESSION_STALL_MS is dropped, whether or not it sends: each read
 * restarts the clock (bytes the kernel takes from the broker, or, at
 * expiry, fewer bytes unread in the socket), memory freed elsewhere
 * never does, and it stops once nothing waits for the guest. Bytes
 * spliced into a guest's socket that has no room for the next frame wait
 * for it as queued output does: the clock runs then too, until the
 * socket has room for a frame again (the guest read) or no stream waits
 * any more; a small frame the kernel still takes into that socket (a
 * PONG) is no read by the guest.
 * A guest that closes its end is still read to the end of what it sent
 * before (up to a connection window and one read, the first REQUEST, or
 * its instance's log queue over its share) when a write to it fails
 * first: a stream it ended there still reaches its upstream whole.
 */
#ifndef EGRESS_BROKER_SESSION_H
#define EGRESS_BROKER_SESSION_H

#include <stddef.h>
#include <stdint.h>

struct broker;

/*
 * An idle session costs about 2 KiB of broker memory and one descriptor
 * (docs/benchmarks.md, "10,000 idle connections"). A busy one can queue
 * up to SESSION_OUT_HIGH (plus one read) for a guest that does not read,
 * so the per-instance cap also bounds what one instance can pin:
 * 128 x 2 MiB. One instance can take at most 1/128 of the total.
 */
#define SESSIONS_MAX	      16384 /* plugin connections, all told */
#define SESSIONS_PER_INSTANCE 128   /* plugin connections each */
#define SESSION_OUT_HIGH      (2 * 1024 * 1024) /* queued to guest */
#define SESSION_OUT_LOW	      (512 * 1024)
#define SESSION_READ_MAX      (64 * 1024) /* bytes per recvmsg() */
#define SESSION_HELLO_MS      10000	  /* HELLO must arrive by then */
/* Output waited at its bound, and the guest took nothing since: drop. */
#define SESSION_STALL_MS      10000

/*
 * Serve a connection accepted on instance's socket. Takes ownership of fd.
 * Refuses (closes fd) over SESSIONS_MAX, SESSIONS_PER_INSTANCE or while
 * draining. Return 0 or a negative error (fd closed either way on error).
 */
int session_accept(struct broker *b, int fd, const char *instance);

/*
 * Log a connection of instance closed at cap (a string literal) as an
 * egress.session refused event: the first of a burst at once, the rest
 * of that second counted in one event a second later.
 */
void session_log_refused(struct broker *b, const char *instance,
    const char *cap);

/*
 * Begin draining every session: send GOAWAY, close sessions without
 * active requests once their output is flushed. Return the number of
 * sessions still open.
 */
size_t session_drain_all(struct broker *b);

/* Drop every session at once (drain timeout or exit). */
void session_free_all(struct broker *b);

/*
 * Close every session bound to instance (its socket's owner or group
 * changed: they were accepted under the old permissions), from the event
 * loop soon after this call, never inside it, so it is safe from any
 * callback. Their requests are aborted and logged as cancelled.
 */
void session_revoke_instance(struct broker *b, const char *instance);

#endif /* EGRESS_BROKER_SESSION_H */
