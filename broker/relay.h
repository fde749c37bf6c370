/* SPDX-License-Identifier: ISC */
/*
 * relay: the byte relay of one established tcp or tls stream between the
 * guest (DATA frames on one protocol stream, through guest.h) and its
 * upstream connection (a bufferevent dial.h made, plain or TLS). Both
 * directions run under flow control and never buffer without bound: guest
 * DATA waits in the owner's buffer (bounded by the stream's receive
 * window) and is credited back only once it moved to the upstream's
 * output, which is kept under RELAY_UP_HIGH; upstream bytes are read only
 * while the upstream's input holds less than RELAY_DOWN_HIGH and leave it
 * only as the guest's send windows allow (a plain upstream's bulk reads
 * go to the guest spliced, not copied: guest.h, splice_data). Half-close
 * both ways: the guest's END_STREAM becomes dial_shutdown_write() once
 * every byte before it reached the upstream, the upstream's end of file
 * becomes an empty DATA with END_STREAM once every byte before it reached
 * the guest; the relay is over when both directions are. An idle timeout
 * (no byte either way) and a maximum lifetime bound it. The relay decides
 * nothing: the owner (request.c) made the decision, holds the lease and
 * logs.
 */
#ifndef EGRESS_BROKER_RELAY_H
#define EGRESS_BROKER_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "broker/guest.h"

struct bufferevent;
struct event_base;
struct evbuffer;
struct proto_stream;
struct relay;

/* Upstream output above which guest DATA waits (uncredited). */
#define RELAY_UP_HIGH	(64 * 1024)
/* Upstream input at which reading from the upstream pauses. */
#define RELAY_DOWN_HIGH (64 * 1024)

/*
 * Called once when the relay is over: err 0 when both directions ended
 * (the guest's stream is then closed), else the EGRESS_ERR_* that ended
 * it (EGRESS_ERR_TIMEOUT for the idle timeout or the lifetime,
 * EGRESS_ERR_UPSTREAM_PROTOCOL for an upstream that failed or closed TLS
 * without close_notify, EGRESS_ERR_UNAVAILABLE when the guest's output
 * refused a frame): the owner sends the ERROR. The relay calls nothing
 * after it; the owner frees it with relay_free(), inside the call or
 * later.
 */
typedef void (*relay_end_fn)(void *arg, int err);

struct relay_params {
	struct event_base *base;
	const struct guest *g;	     /* borrowed for r's life (the owner may
					change its operations) */
	struct proto_stream *st;     /* the stream (borrowed for r's life) */
	struct evbuffer *from_guest; /* guest DATA not yet upstream
					(borrowed for r's life) */
	unsigned idle_ms;	     /* 0: no idle timeout */
	unsigned lifetime_ms;	     /* 0: no maximum lifetime */
	unsigned long *activity;     /* bumped on every event; NULL: none */
};

/*
 * Start relaying between the guest stream of p and bev (connected; no
 * callbacks set; ownership moves to the relay, also on failure, when it
 * is closed). Nothing moves before the next relay_guest_data() (for
 * bytes, or an end, the guest sent before the connect) or the next
 * event. Return 0 and write *ret, or EGRESS_ERR_NOMEM /
 * EGRESS_ERR_INVALID (nothing started, end never called).
 */
int relay_start(const struct relay_params *p, struct bufferevent *bev,
    relay_end_fn end, void *arg, struct relay **ret);

/*
 * The guest moved more DATA into p->from_guest (flow control already
 * applied); end is set when it ended its side (DATA with END_STREAM or
 * TRAILERS). May call end.
 */
void relay_guest_data(struct relay *r, int end);

/*
 * The guest is gone after it ended its side: its bytes still go upstream,
 * and once they did (the upstream's write side shut) the relay ends with
 * err 0, whether or not the upstream ended its side; upstream bytes are
 * discarded meanwhile. The guest's operations must no longer be called
 * for anything but consumed(). May call end.
 */
void relay_detach(struct relay *r);

/* The guest's send window or output room grew: send what is now allowed.
 * May call end. */
void relay_flush(struct relay *r);

/* Answer whether r stopped reading its upstream until the guest's socket
 * has room (a splice found it full). Return 1 or 0. */
int relay_waits_for_room(const struct relay *r);

/* How a hold (relay_hold()) ended. */
enum relay_hold_verdict {
	RELAY_HOLD_QUIET = 0,	 /* every guest byte written, nothing from
				    the upstream pending: the connection
				    may change hands */
	RELAY_HOLD_INJECTED = 1, /* upstream bytes arrived that the guest
				    never got (in the input or the socket) */
	RELAY_HOLD_ENDED = 2,	 /* the upstream ended or failed its side */
};

/* Called once when a hold ends; the relay's upstream then has no
 * callbacks and is disabled. */
typedef void (*relay_hold_fn)(void *arg, enum relay_hold_verdict v);

/*
 * Hold r for a change of its connection (STARTTLS): from now on no
 * upstream byte goes to the guest. The guest bytes already given still
 * go upstream; once all of them reached the socket, fn(arg, ...) tells
 * whether the connection is quiet (nothing undelivered from the
 * upstream, in the input or in the socket, and no end) or not. The guest
 * must give no more bytes meanwhile. The idle timeout and the lifetime
 * keep running (end may still be called instead; then fn never is).
 * May call fn (or end) before it returns.
 */
void relay_hold(struct relay *r, relay_hold_fn fn, void *arg);

/*
 * Take r's upstream bufferevent (callbacks unset, disabled; the caller
 * owns it now) after a quiet hold. r waits, timers running, until
 * relay_resume() or relay_free().
 */
struct bufferevent *relay_take_upstream(struct relay *r);

/*
 * Go on relaying over bev (connected: for STARTTLS the TLS bufferevent
 * on the connection taken; no callbacks set; ownership moves to r, also
 * on failure). Return 0, EGRESS_ERR_INVALID (r is over or has an
 * upstream: bev is freed) or EGRESS_ERR_NOMEM. May call end.
 */
int relay_resume(struct relay *r, struct bufferevent *bev);

/* Return the bytes relayed to the upstream (up) and to the guest. */
uint64_t relay_bytes_up(const struct relay *r);
uint64_t relay_bytes_down(const struct relay *r);

/*
 * Close the upstream connection at once and free r: normally once end
 * reported err 0 (both directions ended); else (a reset, an abandoned
 * stream, an error, a timeout, before the relay was over) with a TCP
 * reset (dial_abort_on_free()), so the upstream never reads a truncated
 * stream as ended. Safe inside end and inside any callback of the
 * upstream. NULL is a no-op.
 */
void relay_free(struct relay *r);

#endif /* EGRESS_BROKER_RELAY_H */
