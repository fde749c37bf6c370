/* SPDX-License-Identifier: ISC */
/*
 * wsock: the broker's WebSocket client (RFC 6455) for one websocket
 * stream, over an upstream connection dial.h made (plain for ws, TLS
 * verified against the host for wss). It writes the opening handshake
 * itself (GET, Upgrade: websocket, Connection: Upgrade, a fresh
 * Sec-WebSocket-Key, Sec-WebSocket-Version: 13, the guest's own headers
 * and subprotocols) and accepts only a 101 that wsproto.h checks. Any
 * other status is reported to the guest as a RESPONSE with its status
 * and headers that ends the broker's direction (a redirect is never
 * followed). After the 101, wsproto.h's codec (libwslay) does the
 * framing, masking, fragmentation and UTF-8 checks; the stream carries
 * whole messages both ways as proto DATA frames (MSG_END on the last
 * frame of each, BINARY for binary) and WS_CONTROL frames (ping, pong,
 * close). A received message is bounded by max_message (close 1009 both
 * ways). Both directions run under flow control: the guest's bytes are
 * credited back only while the upstream's output and the codec's queue
 * stay under RELAY_UP_HIGH, and upstream bytes are read only while fewer
 * than RELAY_DOWN_HIGH bytes wait for the guest's windows. What the
 * stream buffers (items for the guest, the message the codec assembles,
 * the guest's message, the codec's queue) takes credit from the
 * instance's memory budget: without credit, the upstream is not read and
 * the guest not credited until memory is given back. Close
 * handshake both ways; an upstream that ends without a close frame, or
 * does not answer a close within WSOCK_CLOSE_WAIT_MS, is reported as
 * close 1006; a guest that is gone (or reset the stream) gets close
 * 1001 sent upstream, a revoked stream 1008 (wsock_detach()), and the
 * broker's drain closes both ways with 1001 (wsock_close()), each before
 * the connection closes. The module decides nothing: the owner
 * (request.c, request_ws.c) made the decision, holds the lease and
 * logs.
 */
#ifndef EGRESS_BROKER_WSOCK_H
#define EGRESS_BROKER_WSOCK_H

#include <stddef.h>
#include <stdint.h>

#include "broker/guest.h"
#include "broker/net/http1_head.h"

struct broker;
struct bufferevent;
struct event_base;
struct proto_msg;
struct proto_stream;
struct wsock;

/* The default bound of one received message (16 MiB). */
#define WSOCK_MAX_MESSAGE_DEFAULT (16U * 1024 * 1024)
/* How long the upstream has to answer a close the broker sent on the
 * guest's behalf before the stream ends as if it had closed (1006). */
#define WSOCK_CLOSE_WAIT_MS	  5000
/* Messages towards the upstream are bounded by the guest's window, but
 * for empty ones: this many queued, the stream fails (a guest sending
 * empty messages faster than the upstream reads); and the upstream is
 * not read while this many pongs or controls wait in the codec. */
#define WSOCK_QUEUED_MAX	  4096
#define WSOCK_CONTROL_MAX \
	16 /* queued upstream: a guest ping or pong
				     beyond is not sent */

/*
 * Called once when the stream is over. err 0: the close handshake ended
 * (or the broker's direction ended after a non-101 RESPONSE, or the
 * guest is gone and its close went upstream); else the EGRESS_ERR_* the
 * owner sends as ERROR (EGRESS_ERR_UPSTREAM_PROTOCOL for a bad handshake
 * response, EGRESS_ERR_TIMEOUT, EGRESS_ERR_UNAVAILABLE). The owner frees
 * with wsock_free(), inside the call or later.
 */
typedef void (*wsock_end_fn)(void *arg, int err);

struct wsock_params {
	struct event_base *base;
	struct broker *b; /* charged the stream's buffers in its instance's
			     memory budget (broker_mem_room()); NULL: none */
	const struct guest *g;	 /* borrowed for the wsock's life */
	struct proto_stream *st; /* borrowed for the wsock's life */
	const char *host;	 /* the Host value (http1_format_host()) */
	const char *path;	 /* origin form, path_len bytes */
	size_t path_len;
	const struct http1_header *headers; /* the guest's, checked by
					       wsock_headers_check() */
	size_t nheaders;
	unsigned handshake_ms;	 /* the response head's deadline; 0: none */
	unsigned idle_ms;	 /* 0: no idle timeout */
	unsigned lifetime_ms;	 /* 0: no maximum lifetime */
	size_t max_message;	 /* bound of one message, each way */
	unsigned long *activity; /* bumped on every event; NULL: none */
};

/*
 * Answer whether the guest's header h may go into an opening handshake:
 * 0 when it may, or -1 when it is one the handshake sets itself
 * (Upgrade, Connection, Sec-WebSocket-Key, Sec-WebSocket-Version,
 * Sec-WebSocket-Accept, Sec-WebSocket-Extensions) or one that frames a
 * body (Content-Length, Transfer-Encoding, Expect).
 */
int wsock_header_is_refused(const struct http1_header *h);

/*
 * Start the handshake on bev (connected; ownership moves to the wsock,
 * also on failure). Everything in p is copied (strings too). Return 0
 * and write *ret, or EGRESS_ERR_NOMEM / EGRESS_ERR_INVALID (nothing
 * started, end never called).
 */
int wsock_start(const struct wsock_params *p, struct bufferevent *bev,
    wsock_end_fn end, void *arg, struct wsock **ret);

/*
 * The guest sent a DATA frame of n bytes (its payload at data) with
 * flags on the stream (flow control recv already applied). The bytes
 * are copied. May call end.
 */
void wsock_guest_data(struct wsock *w, const uint8_t *data, size_t n,
    uint8_t flags);

/* The guest sent WS_CONTROL m (ping, pong or close). May call end. */
void wsock_guest_control(struct wsock *w, const struct proto_msg *m);

/* The guest's send window or output room grew. May call end. */
void wsock_flush(struct wsock *w);

/*
 * The guest is gone (1001: it vanished or reset the stream; 1008: the
 * stream was revoked and the guest told so): send close code upstream
 * (unless a close was sent already) and end with err 0 once it is
 * written, or after WSOCK_CLOSE_WAIT_MS. The guest's operations are no
 * longer called but consumed(). May call end.
 */
void wsock_detach(struct wsock *w, uint16_t code);

/*
 * The broker closes the stream (1001: it is draining): send close code
 * upstream and to the guest, take nothing more from the guest, and end
 * with err 0 once both closes are through (the upstream's bounded by
 * WSOCK_CLOSE_WAIT_MS). During the handshake, that happens once a 101
 * was accepted (the guest gets the RESPONSE, then the close). Return 0,
 * or -1 when w is ending already. May call end.
 */
int wsock_close(struct wsock *w, uint16_t code);

/* Answer whether the opening handshake completed (a 101 was accepted). */
int wsock_is_open(const struct wsock *w);

/* Return the status of the handshake response (0: none yet). */
int wsock_status(const struct wsock *w);

/* Return the close code that ended the stream (received from or sent to
 * the upstream, 1006 for an end without one), 0 while none. */
unsigned wsock_close_code(const struct wsock *w);

/* Counters: bytes on the upstream connection each way, and messages
 * (text and binary) each way. */
uint64_t wsock_bytes_up(const struct wsock *w);
uint64_t wsock_bytes_down(const struct wsock *w);
uint64_t wsock_msgs_up(const struct wsock *w);
uint64_t wsock_msgs_down(const struct wsock *w);

/*
 * Close the upstream connection at once and free w. Safe inside end and
 * inside any upstream callback. NULL is a no-op.
 */
void wsock_free(struct wsock *w);

#endif /* EGRESS_BROKER_WSOCK_H */
