/* SPDX-License-Identifier: ISC */
/*
 * request: one plugin request (one protocol stream) through the pinned
 * send path, and the broker-wide state it needs (struct broker). The
 * pipeline: validate the head with http1_request_check() -> decide with
 * policy_check_destination() on the CURRENT snapshot -> dns_resolve()
 * exactly once -> policy_check_answers() -> acquire the instance's
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
#include <time.h>

#include "broker/confstate.h"
#include "broker/net/nat64disc.h"
#include "policy/policy.h"
#include "proto/proto.h"

struct event_base;
struct listen_ctx;
struct dial_tls;
struct session;
struct request;
struct broker_dns;
struct lease_table;
struct pool;
struct dns_resolver;
struct netaddr;
struct metrics;
struct control_server;
struct nat64disc;

/* Bytes of response body held per stream before upstream reads pause,
 * and the level at which they resume. */
#define REQUEST_RESP_HIGH	(256 * 1024)
#define REQUEST_RESP_LOW	(64 * 1024)
/* Bytes of request body queued towards the upstream before the broker
 * stops moving guest DATA (and so stops granting window). */
#define REQUEST_UP_HIGH		(64 * 1024)
/* DNS lookups one instance may keep outstanding (of DNS_PENDING_MAX):
 * a lookup counts until c-ares has finished it, cancelled or not. */
#define REQUEST_DNS_PER_INSTANCE	128

/* A file's identity, to notice a file replaced or rewritten in place. */
struct broker_file_id {
	int ok;				/* 0: could not stat it */
	uint64_t dev, ino, size;
	struct timespec mtime, ctime;
};

/* The whole daemon's state; one instance, owned by egressd.c. */
struct broker {
	struct event_base *base;
	struct confstate conf;
	struct listen_ctx *listen;

	struct broker_dns *dns;		/* current resolver */
	struct dial_tls *tls;		/* current TLS client context */
	char *tls_ca;			/* its ca_file (NULL: system) */
	int tls_ok;			/* 0: TLS trust failed to load */
	uint64_t tls_gen;		/* bumped whenever tls is rebuilt */
	struct broker_file_id tls_ca_id; /* tls_ca's identity when loaded */

	struct lease_table *leases;	/* per-instance upstream counts */
	struct pool *pool;		/* idle keep-alive upstreams; NULL:
					   no reuse (Connection: close) */

	struct policy_addr *local;	/* own interface addresses, when */
	size_t nlocal;			/* netaddr is NULL (no netlink) */
	uint64_t local_read_ms;		/* monotonic time of last read */
	struct netaddr *netaddr;	/* host addresses from netlink */
	struct metrics *metrics;	/* counters for `show metrics` */
	struct control_server *control;
	struct nat64disc *nat64q;	/* discovery in flight, or NULL */
	struct nat64disc_result nat64;	/* the last discovery's outcome */
	time_t started;

	/* Bumped by every guest read and upstream event: the busy-poll
	 * loop ([broker] busy_poll_us, egressd.c) spins while it moves. */
	unsigned long activity;

	struct session *sessions;
	size_t nsessions;
	size_t nrequests;		/* streams being served */
	uint64_t request_seq;
	char id_prefix[12];
	int draining;
	struct event *drain_timer;
};

/*
 * Allocate a request for stream id on sess (the stream is idle until
 * session passes the REQUEST frame to proto_conn_recv()). Return NULL on
 * out-of-memory.
 */
struct request *request_new(struct broker *b, struct session *sess,
    uint32_t id);

/* Return the protocol stream of r (owned by r). */
struct proto_stream *request_stream(struct request *r);

/* Return the stream id of r. */
uint32_t request_id(const struct request *r);

/*
 * Start serving r for the REQUEST frame m (already accepted by
 * proto_conn_recv(); m's strings borrowed for the call only). May finish
 * and free r before returning (a deny); the caller must not use r after.
 */
void request_start(struct request *r, const struct proto_msg *m);

/*
 * The guest sent len bytes of request body, already moved into the
 * buffer request_body_buffer(r) returned (flow control recv already
 * applied); end is set when the guest ended its body (DATA with
 * END_STREAM, or TRAILERS: request trailers are not forwarded). May free
 * r.
 */
void request_on_body(struct request *r, size_t len, int end);

/* Return the buffer guest DATA for r is moved into (owned by r). */
struct evbuffer *request_body_buffer(struct request *r);

/* The guest granted window on r's stream or the connection: send what
 * is now allowed. May free r. */
void request_flush(struct request *r);

/* The guest reset r's stream (already applied to the stream state):
 * cancel everything, log, free r. */
void request_on_reset(struct request *r);

/*
 * Free r because its connection is going away: cancel every pending
 * operation, release the lease, log egress.close (error "cancelled" if it
 * had not ended) and free. Sends nothing. NULL is a no-op.
 */
void request_abort(struct request *r);

/*
 * Free r, made by request_new() for a REQUEST frame that the connection's
 * state table then refused (a reused stream id, a stream after GOAWAY):
 * it never became a request, so nothing is logged. Only valid before
 * request_start(). NULL is a no-op.
 */
void request_discard(struct request *r);

/* Answer whether r still has work (1) or only waits for the guest (0). */
int request_is_active(const struct request *r);

/*
 * Broker-wide helpers used by egressd.c at start and after each reload:
 * make the resolver and TLS context follow snapshot s (a resolver or TLS
 * context in use by requests in flight stays alive until they finish).
 * Also create the connection pool on the first call (none: no reuse) and
 * close the idle pooled connections s no longer allows: those of removed
 * instances, those whose host s no longer grants, those over the
 * instance's new budget, and every TLS one when the trust changed. The
 * trust changes when [tls] ca_file names another path, or the same path
 * now holds another file or the file was rewritten (device, inode, size,
 * mtime or ctime differ): a CA bundle replaced in place is reloaded at
 * the next reload.
 * Return 0, or a negative error when the resolver could not be created
 * (the old one is kept) or the TLS trust failed to load (HTTPS requests
 * then fail with tls-failed until fixed); both are logged.
 */
int broker_apply_conf(struct broker *b, const struct conf_snapshot *s);

/* Release the pool, resolver, TLS context, leases and local-address
 * cache. */
void broker_release(struct broker *b);

/*
 * Take a reference on the current resolver (NULL when there is none), so
 * that a lookup outside a request (control `check`, NAT64 discovery)
 * keeps it alive across reloads. Give it back with broker_dns_release()
 * (NULL is a no-op; safe inside the resolver's own callback) before
 * broker_release().
 */
struct broker_dns *broker_dns_hold(struct broker *b);
struct dns_resolver *broker_dns_resolver(const struct broker_dns *d);
void broker_dns_release(struct broker_dns *d);

#endif /* EGRESS_BROKER_REQUEST_H */
