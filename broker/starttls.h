/* SPDX-License-Identifier: ISC */
/*
 * starttls: the in-band upgrade of an open tcp stream to TLS (the
 * guest's STARTTLS, docs/protocol.md). From the guest's request on, no
 * plaintext passes either way: guest bytes sent before it still reach
 * the upstream, then the relay holds; an upstream byte the guest never
 * received (buffered, in the socket, or arriving before the handshake)
 * fails the stream as an injection. The broker then runs the client
 * side of TLS on the same connection with SNI = the host (none for an
 * IP literal), the certificate verified against the host from the
 * trust of the named profile (or [tls]), within the stream's connect
 * timeout; on success it answers STARTTLS and relays the plaintext of
 * the TLS connection. Any failure ends the stream (ERROR, never a
 * plaintext fallback) and its close event says why.
 */
#ifndef EGRESS_BROKER_STARTTLS_H
#define EGRESS_BROKER_STARTTLS_H

#include "proto/proto.h"

struct request;
struct starttls;

/* The reasons a close event's starttls field carries. */
#define STARTTLS_UPGRADED "upgraded"
#define STARTTLS_INJECTION \
	"starttls-injection" /* undelivered upstream
						   bytes at the switch */
#define STARTTLS_ENDED "starttls-upstream-ended"
#define STARTTLS_TLS   "tls" /* handshake or verification */
#define STARTTLS_TIMEOUT \
	"starttls-timeout"		   /* the bound of the hold and
						 handshake */
#define STARTTLS_BUDGET "budget-exhausted" /* the handshake share */
#define STARTTLS_DENIED \
	"starttls-denied" /* the configuration in force
						denies the stream now */
#define STARTTLS_ABORTED \
	"starttls-aborted" /* the stream ended before
						 the outcome */
#define STARTTLS_REFUSED \
	"starttls-refused" /* not a connected tcp
						  stream */

/*
 * The guest sent STARTTLS m (already applied to the stream state) on r.
 * Refuse it (ERROR invalid-request) unless r is a tcp stream that
 * relays and m's profile is one r's entry lists in the configuration in
 * force now; deny it (ERROR denied) unless that configuration still
 * grants r with the profile; else take that configuration for r, hold
 * the relay and upgrade as the header says, the hold and the handshake
 * bounded by r's connect timeout. May finish r.
 */
void request_on_starttls(struct request *r, const struct proto_msg *m);

/*
 * Drop r's upgrade in progress, if any (its handshake connection is
 * closed; no callback follows). Called when r's upstream side ends.
 */
void starttls_cancel(struct request *r);

#endif /* EGRESS_BROKER_STARTTLS_H */
