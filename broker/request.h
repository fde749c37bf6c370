/* SPDX-License-Identifier: ISC */
/*
 * request: one plugin request (one protocol stream) through the pinned
 * send path. The pipeline: validate the head with http1_request_check()
 * -> decide_run() on the CURRENT snapshot (the destination, exactly one
 * resolution, the answers checked against the snapshot current when
 * they arrive) -> acquire the instance's
 * connection lease (refused at once when exhausted) -> dial only the
 * validated addresses under one deadline covering resolution, connect and
 * TLS -> one HTTP/1.1 exchange -> stream the response back under flow
 * control (RESPONSE, DATA, TRAILERS or an empty END_STREAM DATA) ->
 * release the lease -> log. Keep-alive: a request that passed the whole
 * policy first looks for an idle pooled connection (pool.h) under its
 * exact key (instance, host, port, TLS) connected to one of ITS validated
 * addresses, which brings its lease; else it takes a lease, evicting the
 * instance's own idle connections when the budget is full, and dials. A
 * reusable connection goes back to the pool with its lease. A reused
 * connection that fails before any response byte (the upstream closed it
 * meanwhile) is retried once on a fresh connection, for an idempotent
 * method without a body only. Nothing here decides reachability: every rule
 * is policy/'s, every setting conf/'s. Exactly one egress.decision and
 * one egress.close event is logged per request. Guest-visible failures
 * are ERROR frames with a wire code and its fixed masked message.
 */
#ifndef EGRESS_BROKER_REQUEST_H
#define EGRESS_BROKER_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "broker/broker.h"
#include "broker/guest.h"
#include "proto/proto.h"

struct evbuffer;
struct request;

/* Bytes of response body held per stream before upstream reads pause,
 * and the level at which they resume. */
#define REQUEST_RESP_HIGH     (256 * 1024)
#define REQUEST_RESP_LOW      (64 * 1024)
/* Bytes of request body queued towards the upstream before the broker
 * stops moving guest DATA (and so stops granting window). */
#define REQUEST_UP_HIGH	      (64 * 1024)
/* The RESPONSE status telling the guest a tcp or tls stream connected. */
#define REQUEST_STREAM_STATUS 200

/*
 * Called once when r is finished and its stream closed: the owner
 * unlinks r and frees it with request_free(), inside the call or later.
 */
typedef void (*request_done_fn)(void *arg, struct request *r);

/*
 * Allocate a request for stream id of the connection g (copied; its
 * context must outlive r). done is called when r is finished. The stream
 * is idle until the owner passes the REQUEST frame to proto_conn_recv().
 * Return NULL on out-of-memory.
 */
struct request *request_new(struct broker *b, const struct guest *g,
    uint32_t id, request_done_fn done, void *done_arg);

/* Return the protocol stream of r (owned by r). */
struct proto_stream *request_stream(struct request *r);

/* Return the stream id of r. */
uint32_t request_id(const struct request *r);

/*
 * Start serving r for the REQUEST frame m (already accepted by
 * proto_conn_recv(); m's strings borrowed for the call only). May finish
 * r before returning (a deny: done is called); the caller must not use r
 * after.
 */
void request_start(struct request *r, const struct proto_msg *m);

/*
 * request_start(), deciding with snapshot ref (r takes a reference of
 * its own) instead of a look at the files of its own: for a front that
 * looked at them for this same request a moment before, in the same
 * callback. ref NULL (no snapshot in force) is policy-unavailable.
 */
void request_start_with(struct request *r, const struct proto_msg *m,
    struct confref *ref);

/*
 * The guest sent len bytes of request body, already moved into the
 * buffer request_body_buffer(r) returned (flow control recv already
 * applied); end is set when the guest ended its body (DATA with
 * END_STREAM, or TRAILERS: request trailers are not forwarded). May free
 * r.
 */
void request_on_body(struct request *r, size_t len, int end);

/*
 * The guest sent a DATA frame of len bytes at data (borrowed for the
 * call) with flags on r's websocket stream (flow control recv already
 * applied): one piece of a message, the last with PROTO_FLAG_MSG_END.
 * A message before the handshake's RESPONSE fails r (invalid-request).
 * May free r.
 */
void request_on_message(struct request *r, const uint8_t *data, size_t len,
    uint8_t flags);

/*
 * The guest sent WS_CONTROL m (already applied to the stream state) on
 * r's websocket stream: a ping or pong goes upstream, a close starts or
 * ends the close handshake. May free r.
 */
void request_on_ws_control(struct request *r, const struct proto_msg *m);

/* Return the buffer guest DATA for r is moved into (owned by r). */
struct evbuffer *request_body_buffer(struct request *r);

/* The guest granted window on r's stream or the connection: send what
 * is now allowed. May finish r. */
void request_flush(struct request *r);

/* The guest reset r's stream (already applied to the stream state):
 * cancel everything, log, finish r. */
void request_on_reset(struct request *r);

/*
 * Free r because its connection is going away: cancel every pending
 * operation, release the lease, log egress.close (error "cancelled" if it
 * had not ended) and free, without calling done. Sends nothing. NULL is
 * a no-op.
 */
void request_abort(struct request *r);

/*
 * Free r, made by request_new() for a REQUEST frame that the connection's
 * state table then refused (a reused stream id, a stream after GOAWAY):
 * it never became a request, so nothing is logged. Only valid before
 * request_start(). NULL is a no-op.
 */
void request_discard(struct request *r);

/*
 * r's connection is going away: answer 1 when r carries on without it,
 * else 0 (the caller aborts r with request_abort()). An open websocket
 * stream carries on to send close 1001 upstream, then ends the same
 * way. A tcp or tls stream
 * whose guest ended its side carries on until every byte the guest sent
 * before it left was written upstream and the upstream's write side shut
 * (what the upstream still sends is discarded), so that nothing the guest
 * sent is lost: it takes no guest operation any more, stays under its
 * idle timeout and lifetime with its lease, logs its close (error
 * "cancelled" when the upstream had not ended its side) and frees itself;
 * the caller must drop r, not free it (r may already be gone).
 */
int request_linger(struct request *r);

/* End every stream request_linger() kept (at shutdown): as
 * request_abort(). */
void request_linger_abort_all(struct broker *b);

/*
 * A reload swapped snapshot s in (borrowed for the call): decide every
 * open tcp, tls or websocket stream, and every HTTP request whose
 * exchange runs, again against s, through the same
 * decide path with the address it is connected to standing for the
 * answers (no new lookup), and close each one s no longer allows (the
 * instance, its permission, the grant, the declaration, the address
 * class): ERROR denied to the guest (an open websocket's upstream gets
 * close 1008 before its connection closes), and egress.close with error
 * "revoked" and the policy reason. s NULL (the configuration broke)
 * closes every one, with reason "policy-unavailable". Return how many
 * were closed.
 */
size_t request_revoke_streams(struct broker *b, const struct conf_snapshot *s);

/*
 * The broker is draining: close every websocket (request_ws.c) with code
 * (1001, going away) both ways, the upstream's close bounded by
 * WSOCK_CLOSE_WAIT_MS (one still in its handshake once its 101 came;
 * one still connecting once connected, as b->draining is then set),
 * each logged with egress.close reason (static). Return how many were
 * closed.
 */
size_t request_ws_close_all(struct broker *b, uint16_t code,
    const char *reason);

/* Answer whether r still has work (1) or only waits for the guest (0). */
int request_is_active(const struct request *r);

/* Answer whether r's relay waits for room in its guest's socket
 * (relay_waits_for_room()). Return 1 or 0. */
int request_waits_for_room(const struct request *r);

/* Free r once done was called for it. NULL is a no-op. */
void request_free(struct request *r);

#endif /* EGRESS_BROKER_REQUEST_H */
