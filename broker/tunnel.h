/* SPDX-License-Identifier: ISC */
/*
 * tunnel: a CONNECT tunnel of the proxy front. The host is decided first
 * (the one decision, one resolution, the answers checked) with the
 * instance's http_client permission, or else its socket_client one, and
 * the instance's lease is taken for the tunnel's life; a denial or an
 * exhausted budget is answered as the front answers any (403, 429, 502,
 * 504) and nothing is connected. Then the client gets "200 Connection
 * established" and its first bytes are looked at before anything is
 * relayed (tls_hello.h): a TLS ClientHello must name host in its SNI
 * (case-insensitive, one trailing dot ignored; none is refused unless
 * host is an IP literal) and carry no Encrypted Client Hello; the tunnel
 * is then transport "tls-tunnel" (http_client or socket_client). Any
 * other first bytes make a raw "tcp" tunnel, which needs socket_client.
 * A refusal at this point closes the client connection; it is logged
 * with the reason (sni-mismatch naming both names, ech, no-sni,
 * no-permission). Then a plain connect to the validated addresses
 * only, and a byte relay in both directions that
 * stops reading one side while the other has TUNNEL_HIGH bytes queued,
 * half-closes each way (a side's end of file is passed on once its
 * bytes are out) and ends once both ways ended; a client that can no
 * longer be written to is still read to its end. A tunnel cut before
 * the client's end reached the upstream resets the upstream.
 * One egress.decision (transport "tunnel" when refused before any byte
 * was read) and one egress.close event per tunnel. For an instance with
 * tls_inspect, a tunnel that passed these checks is not connected: it
 * ends at once as transport "tls-inspect" (no lease held) and the proxy
 * front terminates its TLS (inspect.h). A reload decides every
 * tunnel again (tunnel_recheck()). What a tunnel cannot
 * check: anything inside the TLS it carries, such as an HTTP Host that
 * differs from the SNI.
 */
#ifndef EGRESS_BROKER_TUNNEL_H
#define EGRESS_BROKER_TUNNEL_H

#include "policy/policy.h"

struct broker;
struct bufferevent;
struct conf_snapshot;
struct tunnel;

#define TUNNEL_HIGH (256 * 1024) /* queued towards one side */
#define TUNNEL_LOW  (64 * 1024)

/* The tunnel is over: every answer is queued on the client's output;
 * close the client once it is written. */
typedef void (*tunnel_done_fn)(void *arg);

/*
 * Start a tunnel for instance (copied) to dest (copied) on the client's
 * bufferevent bev, whose input holds whatever the client sent after its
 * CONNECT head. bev stays the caller's (free the tunnel before it); the
 * tunnel sets its callbacks until done(arg) is called, once, from the
 * event loop, never inside tunnel_start(). Return 0 and write *ret, or
 * EGRESS_ERR_NOMEM (nothing started).
 */
int tunnel_start(struct broker *b, const char *instance,
    struct bufferevent *bev, const struct policy_dest *dest,
    tunnel_done_fn done, void *arg, struct tunnel **ret);

/*
 * Decide a relaying tunnel again on snapshot s (a reload's; NULL: the
 * configuration is invalid), with the address it is connected to standing
 * for the answers (revoke.h). One no longer allowed ends at once: its
 * egress.close has error "revoked" and the policy reason, and done is
 * called from the loop. Return 1 when it was ended, else 0. A tunnel
 * still connecting is decided again, the same way, once connected.
 */
int tunnel_recheck(struct tunnel *t, const struct conf_snapshot *s);

/*
 * The destination of a tunnel that ended by being handed to TLS
 * inspection (its instance has tls_inspect, its ClientHello passed the
 * checks above, and the decision was logged with transport
 * "tls-inspect"): the client's bytes, from its ClientHello on, are still
 * unread in bev, for inspect_wrap(). NULL for any other tunnel.
 */
const struct policy_dest *tunnel_inspect_dest(const struct tunnel *t);

/* The end of t's lifetime (broker_now_ms()'s clock; 0: none), which the
 * connection inspection makes of it keeps. */
uint64_t tunnel_end_ms(const struct tunnel *t);

/* Answer whether t is over (done was called). */
int tunnel_is_done(const struct tunnel *t);

/*
 * Free t: cancel what is pending, close the upstream, release the lease,
 * log egress.close (error "cancelled") if it had not ended. NULL is a
 * no-op.
 */
void tunnel_free(struct tunnel *t);

#endif /* EGRESS_BROKER_TUNNEL_H */
