/* SPDX-License-Identifier: ISC */
/*
 * The inside of a request, shared by the files that implement it
 * (request.c: the pipeline, http, tcp and tls; request_ws.c: websocket
 * streams; request_streams.c: which streams stay). Nothing else includes
 * this header.
 */
#ifndef EGRESS_BROKER_REQUEST_INT_H
#define EGRESS_BROKER_REQUEST_INT_H

#include <stddef.h>
#include <stdint.h>

#include "broker/broker.h"
#include "broker/guest.h"
#include "broker/net/decide.h"
#include "broker/net/http1.h"
#include "broker/request.h"
#include "conf/conf.h"
#include "policy/policy.h"
#include "proto/proto.h"

struct bufferevent;
struct evbuffer;
struct relay;
struct starttls;
struct wsock;

enum request_phase {
	PHASE_NEW = 0,
	PHASE_RESOLVING,
	PHASE_DIALING,
	PHASE_EXCHANGE,
	PHASE_FLUSHING, /* upstream done, tail waits for window */
	PHASE_RELAY,	/* a tcp or tls stream relays bytes */
	PHASE_DONE,	/* logged; waits for the guest to end */
};

struct request {
	struct broker *b;
	struct guest g;	      /* the connection served */
	request_done_fn done; /* r is finished: the owner frees */
	void *done_arg;
	struct proto_stream st;
	enum request_phase phase;
	char id[40];
	uint8_t transport; /* enum proto_transport */

	struct confref *conf; /* the snapshot decided with */
	const struct conf_instance *ci;
	struct policy_dest dest;
	int https;
	struct decide decide; /* the decision and its answers */
	const struct policy_verdict *verdict; /* decide's, once made */

	/* The filtered head, copied into one block (head_mem). */
	struct http1_head head;
	void *head_mem;

	struct broker_dns *dns; /* held while the lookup is out */
	struct dial *dial;
	struct bufferevent *up;
	struct http1_exchange *x;
	struct relay *relay;	    /* a tcp or tls stream, once connected */
	struct wsock *ws;	    /* a websocket stream, once connected */
	struct starttls *stls;	    /* a tcp stream's upgrade under way */
	const char *starttls;	    /* close event: the upgrade's outcome
				       (static; NULL: none asked) */
	uint64_t msgs_in, msgs_out; /* websocket messages each way */
	unsigned close_code;	    /* websocket: the close code */
	unsigned idle_ms;	    /* its idle timeout (0: none) */
	struct lease *lease;	    /* held while upstream lives */
	struct policy_addr connected;
	int has_connected;
	int reused;	  /* exchange on a pooled connection */
	uint64_t tls_gen; /* trust the connection was verified
					   under (tlsprof_select() at dial) */
	char tls_profile[PROTO_PROFILE_MAX + 1]; /* "": [tls] trust */
	uint64_t parent_gen;			 /* b->parent_gen at dial */
	int retried; /* the one fresh retry was used */

	uint64_t start_ms;
	uint64_t start_us, dial_us; /* for the latency metrics */
	int allowed;		    /* the decision was allow */
	uint64_t deadline_ms;	    /* resolution + connect + TLS */
	struct event *timer;	    /* the deadline, then the total */
	uint64_t total_ms;	    /* guest total timeout, 0: none */
	int first_byte_ms;
	int between_bytes_ms;

	struct evbuffer *body; /* guest DATA not yet upstream */
	int body_ended;	       /* the guest ended its body */
	int body_finished;     /* http1_finish_body() done */
	struct evbuffer *resp; /* response body for the guest */
	struct broker_mem mem; /* credit for resp */
	int paused;	       /* upstream reads paused */
	struct evbuffer *tail; /* encoded last frame, when ready */
	uint8_t tail_type;

	int status;
	uint64_t bytes_in, bytes_out;
	int logged_close;
	int decided;		       /* egress.decision logged */
	const char *detail;	       /* what an invalid request got wrong
					   (static) */
	struct request *lnext, *lprev; /* in b->lingering */
	struct request *rnext, *rprev; /* in b->relays */
	const char *revoked;	       /* the reason a reload closed it */
	const char *close_reason; /* else why the broker closed it (static) */
	int ws_left; /* websocket: the guest reset it, its close went up */
	char linger_instance[CONF_NAME_MAX + 1];
};

/* proto/ and policy/ number the transports alike (1 http .. 4 tls). */
_Static_assert(PROTO_TRANSPORT_TCP == (int)POLICY_TRANSPORT_TCP &&
	PROTO_TRANSPORT_TLS == (int)POLICY_TRANSPORT_TLS &&
	PROTO_TRANSPORT_WEBSOCKET == (int)POLICY_TRANSPORT_WEBSOCKET &&
	PROTO_TRANSPORT_HTTP == (int)POLICY_TRANSPORT_HTTP,
    "transport numbers differ");

static inline enum policy_transport
request_policy_transport(const struct request *r)
{
	return (enum policy_transport)r->transport; /* 1..4: proto checked */
}

/* Return the instance name of r's connection. */
const char *request_instance(const struct request *r);

/* Close the upstream side of r: no more callbacks from it; the lease is
 * released. */
void request_upstream_done(struct request *r);

/* Log r's egress.close once (error: a wire code name, or NULL). */
void request_log_close(struct request *r, const char *error);

/* Log r's egress.decision. */
void request_log_decision(struct request *r, const char *host, size_t host_len,
    unsigned port, int allow, const char *reason);

/* Free what only the exchange reads (the head, the snapshot). */
void request_release_exchange(struct request *r);

/* Finish r when its stream is closed; else wait for the guest. */
void request_settle(struct request *r);

/* Fail r with a guest-visible EGRESS_ERR_*: ERROR, close event, finish. */
void request_fail(struct request *r, int err);

/* Refuse r as an invalid request; detail (static) says why. */
void request_invalid(struct request *r, const char *detail);

/* Answer whether r's stream is still allowed by the snapshot in force
 * (1), or not (0, r->revoked set). */
int request_still_allowed(struct request *r);

/* What the guest hears of r, cut because the policy no longer allows it
 * (r->revoked set): EGRESS_ERR_UNAVAILABLE when the files broke, as a
 * new request would hear, else EGRESS_ERR_DENIED. */
int request_revoked_err(const struct request *r);

/*
 * r's connection is up on used: record it and decide again on the
 * snapshot in force now. Return 0, or -1 when r was failed (as
 * request_revoked_err() says; bev, whose ownership moves to r, closed
 * with it).
 */
int request_connected_check(struct request *r, struct bufferevent *bev,
    const struct policy_addr *used);

/*
 * The guest is done with r's open websocket (request_ws.c): it reset the
 * stream (code 1001), or a reload revoked it (code 1008, r->revoked set;
 * the guest gets the ERROR of request_revoked_err()). The stream is closed for the guest; the
 * upstream gets a close with code, and r ends (logged, finished) once it
 * is written or after the bounded wait. Return 1 when r was taken that
 * way (it may be finished already), 0 when r is no open websocket.
 */
int request_ws_leave(struct request *r, uint16_t code);

/* Link r into b->relays (open long-lived streams, for revocation). */
void request_relays_link(struct request *r);

/*
 * Check a websocket REQUEST (request_ws.c): the connection speaks
 * protocol version 2, scheme ws or wss, method GET, an authority, no
 * END_STREAM, none of the handshake's own headers, a Host only for the
 * authorized authority. Fill r->dest and r's head. Return 0, or -1 when
 * r was refused (finished).
 */
int request_check_ws(struct request *r, const struct proto_msg *m);

/* The websocket's connection is up: start the handshake (request_ws.c). */
void request_begin_ws(struct request *r, struct bufferevent *bev,
    const struct policy_addr *used);

#endif /* EGRESS_BROKER_REQUEST_INT_H */
