/* SPDX-License-Identifier: ISC */
/*
 * proxy: the HTTP/1.1 forward-proxy front of egressd, for clients that
 * do not link the shim (curl, package managers, language runtimes). One
 * client connection is bound to one instance for its whole life, chosen
 * where it was accepted, never from anything the client sends. Each
 * request is parsed with http1_req.h (bounded; CL+TE, duplicate
 * Content-Length, obs-fold, bad chunking refused with 400 and never
 * passed on) and becomes a request on the same pipeline as a shim
 * request (request.h): the front is one more implementation of the
 * guest seam (guest.h), so the decision, the one resolution, the pinned
 * connect, the Host check, the hop-by-hop filtering, the refusal of
 * redirects, the budget and the two log events are the shim path's own.
 * Absolute-form targets ("GET http://host/path HTTP/1.1") are served;
 * an origin-form target ("GET /path", with Host) only where the
 * connection was accepted with PROXY_ORIGIN_FORM (the instance socket,
 * where `curl --unix-socket` sends it), as http:// + Host + target.
 * Outcomes map to statuses: a denial or an unavailable policy 403 (the
 * shim's fixed masked message, header X-Egress-Error), budget 429 with
 * Retry-After, DNS, connect, TLS and upstream failures 502, timeouts
 * 504, malformed requests 400, methods not relayed 405. CONNECT makes
 * the connection a tunnel (tunnel.h); for an instance with tls_inspect,
 * a tunnel whose ClientHello passed its checks is terminated here
 * (inspect.h) and the decrypted connection is served as origin-form
 * requests for https:// + the CONNECT authority, each on the pipeline
 * (so Host must equal that name); absolute-form and CONNECT inside it
 * are refused. Requests on one connection are served one at a time in order: a
 * pipelined request waits, unread, until the previous response is
 * complete. Request bodies (Content-Length or chunked) flow under the
 * stream's window; response bodies are written as they arrive and stop
 * being produced above PROXY_OUT_HIGH bytes queued to the client.
 * Refusals the front makes itself (a malformed head, a method not
 * relayed) are logged as one egress.proxy event.
 */
#ifndef EGRESS_BROKER_PROXY_H
#define EGRESS_BROKER_PROXY_H

#include <stddef.h>

struct broker;
struct evbuffer;

#define PROXY_OUT_HIGH (256 * 1024) /* queued to the client */
#define PROXY_OUT_LOW  (64 * 1024)
#define PROXY_IDLE_MS  60000 /* no byte from, or taken by, the client */
#define PROXY_HEAD_MS \
	10000		    /* a request head, from its first byte
				   (the first one: from the accept) */
#define PROXY_PREAUTH_MAX 8 /* a port's connections not yet authenticated */

/* proxy_accept() flags. */
#define PROXY_ORIGIN_FORM 0x1 /* serve origin-form as http:// + Host */
#define PROXY_SHARED	  0x2 /* the caller hands over a session share */
#define PROXY_AUTH \
	0x4 /* each request must carry the instance's
				 proxy token (407 otherwise) */
#define PROXY_INSPECT \
	0x8 /* inside an inspected tunnel: origin-form
				 for its https:// authority only (not a
				 flag of proxy_accept()) */
#define PROXY_HANDSHAKE \
	0x10 /* with PROXY_INSPECT: the caller hands over a
				 unit of the TLS handshake share, held until
				 the handshake is done (not a flag of
				 proxy_accept()) */

/*
 * Serve an HTTP proxy client on fd for instance (copied). Takes ownership
 * of fd and of in (bytes already read from fd, or NULL). The connection
 * counts as a session (b->nsessions, SESSIONS_MAX); with PROXY_SHARED it
 * takes over one unit of b->session_share that the caller held for
 * instance. With PROXY_AUTH (and no PROXY_SHARED) it takes no unit until
 * its first request carried the token: until then it counts against
 * PROXY_PREAUTH_MAX connections of instance, over which it is refused
 * (closed; the ports stop accepting before that, proxy_port.h). Every request head must be complete within PROXY_HEAD_MS of
 * its first byte (the first request's: of the accept), whatever arrives
 * meanwhile, or the connection is answered 408 and closed. Return 0, or
 * a negative error with fd closed and in freed.
 */
int proxy_accept(struct broker *b, int fd, const char *instance,
    struct evbuffer *in, unsigned flags);

/* The number of instance's proxy connections not yet authenticated. */
size_t proxy_preauth_count(struct broker *b, const char *instance);

/*
 * Begin draining: close idle proxy connections now, and the others once
 * their current response is complete. Return the number still open.
 */
size_t proxy_drain_all(struct broker *b);

/* Drop every proxy connection at once (their requests are aborted). */
void proxy_free_all(struct broker *b);

/*
 * Close every proxy connection bound to instance, from the event loop
 * soon after this call (safe from any callback).
 */
void proxy_revoke_instance(struct broker *b, const char *instance);

/* Decide every CONNECT tunnel again on snapshot s (tunnel_recheck());
 * return how many were ended. */
size_t proxy_revoke_tunnels(struct broker *b, const struct conf_snapshot *s);

#endif /* EGRESS_BROKER_PROXY_H */
