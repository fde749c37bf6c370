/* SPDX-License-Identifier: ISC */
/*
 * dns: the broker's one resolver. A c-ares channel driven by a libevent
 * event_base that resolves a name exactly once per call, asking for A and
 * AAAA together with two explicit queries (ares_query, never
 * ares_getaddrinfo or ares_search), so no search domain is ever appended,
 * /etc/hosts and HOSTALIASES are never consulted, and every answer comes
 * from the configured DNS servers. Answers are delivered as a list of
 * struct policy_addr in resolver order: every A record first (in answer
 * order), then every AAAA record. The caller hands that list to
 * policy_check_answers(); this module decides nothing.
 */
#ifndef EGRESS_BROKER_DNS_H
#define EGRESS_BROKER_DNS_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

struct event_base;
struct dns_resolver;
struct dns_query;
struct share;

#define DNS_SERVERS_MAX	       16   /* entries of [resolver] servers */
#define DNS_PENDING_MAX	       1024 /* lookups c-ares still works on */
#define DNS_TIMEOUT_DEFAULT_MS 5000
#define DNS_TAG_MAX	       64 /* bytes of a dns_resolve_tagged() tag */

/*
 * Outcome of one resolution (both families). Only DNS_OK carries
 * addresses. DNS_NXDOMAIN and DNS_NODATA mean the name has no address
 * (policy reason "unresolvable"); every other failure is "dns-failed".
 */
enum dns_status {
	DNS_OK = 0,
	DNS_NXDOMAIN = 1, /* the name does not exist */
	DNS_NODATA = 2,	  /* the name exists, no A and no AAAA */
	DNS_SERVFAIL = 3, /* SERVFAIL from every server tried */
	DNS_REFUSED = 4,  /* REFUSED from every server tried */
	DNS_TIMEOUT = 5,  /* no answer within timeout_ms */
	DNS_BADRESP = 6,  /* malformed answer, FORMERR, NOTIMP, ... */
	DNS_TOO_MANY = 7, /* more than POLICY_ANSWERS_MAX addresses */
	DNS_ERROR = 8,	  /* local failure (no server, memory) */
};

/*
 * Called once per dns_resolve() that was not cancelled, always from the
 * event loop (never from inside dns_resolve()). addrs is borrowed for
 * the duration of the call; n is 0 unless status is DNS_OK. The query
 * handle is invalid once the callback runs.
 */
typedef void (*dns_cb)(void *arg, enum dns_status status,
    const struct policy_addr *addrs, size_t n);

/*
 * Parse one [resolver] servers item: "ADDR", "ADDR:PORT" (IPv4) or
 * "[ADDR]" / "[ADDR]:PORT" (IPv6; a bare IPv6 address without brackets is
 * accepted without a port). Port defaults to 53 and must be 1..65535
 * without sign or leading zero. Write *ret_addr and *ret_port on success.
 * Return 0 or EGRESS_ERR_INVALID.
 */
int dns_server_parse(const char *s, struct policy_addr *ret_addr,
    uint16_t *ret_port);

/*
 * Create a resolver on base (borrowed; it must outlive the resolver).
 * servers lists nservers items in dns_server_parse() form; NULL or 0 uses
 * the nameservers of /etc/resolv.conf (its search, domain and ndots lines
 * are ignored). timeout_ms bounds each dns_resolve() as a whole (0 means
 * DNS_TIMEOUT_DEFAULT_MS). Every socket c-ares opens is made CLOEXEC.
 * Return 0 and write *ret, or EGRESS_ERR_INVALID (bad server item, more
 * than DNS_SERVERS_MAX, negative timeout), EGRESS_ERR_NOMEM, or
 * EGRESS_ERR_UNAVAILABLE (c-ares initialisation failed, e.g. no server).
 */
int dns_resolver_new(struct event_base *base, const char *const *servers,
    size_t nservers, int timeout_ms, struct dns_resolver **ret);

/*
 * Destroy the resolver. Outstanding queries are dropped without their
 * callbacks; their handles become invalid. NULL is a no-op. Do not call
 * from inside a dns_cb.
 */
void dns_resolver_free(struct dns_resolver *r);

/*
 * From now on, every lookup made with a tag (dns_resolve_tagged()) takes
 * one unit of sh under its tag (the instance) for as long as c-ares works
 * on it, and is refused with EGRESS_ERR_BUDGET_EXHAUSTED when sh's fair
 * share says no. sh is borrowed and must outlive r's lookups. NULL: none.
 */
void dns_resolver_set_share(struct dns_resolver *r, struct share *sh);

/*
 * Start resolving name (a host name, as policy_host.name: at most
 * POLICY_NAME_MAX bytes, one trailing dot allowed) for A and AAAA. The
 * name is always treated as absolute. cb is called exactly once later,
 * unless dns_query_cancel() is called first. If ret_query is not NULL,
 * write the handle (borrowed; valid until cb runs or the query is
 * cancelled). Return 0, EGRESS_ERR_INVALID (empty or over-long name),
 * EGRESS_ERR_AGAIN (DNS_PENDING_MAX lookups outstanding, as counted by
 * dns_resolver_outstanding(): a cancelled or timed-out lookup keeps its
 * slot until c-ares has finished its queries) or EGRESS_ERR_NOMEM.
 */
int dns_resolve(struct dns_resolver *r, const char *name, dns_cb cb, void *arg,
    struct dns_query **ret_query);

/*
 * As dns_resolve(), and record tag (at most DNS_TAG_MAX bytes, copied;
 * NULL or "" for none) with the lookup for as long as c-ares works on it,
 * cancelled or not, so that dns_resolver_outstanding_tag() can count it.
 * The broker tags each lookup with its instance name. Return as
 * dns_resolve(), or EGRESS_ERR_INVALID for an over-long tag, or
 * EGRESS_ERR_BUDGET_EXHAUSTED when the resolver's fair share
 * (dns_resolver_set_share()) refuses the tag another lookup.
 */
int dns_resolve_tagged(struct dns_resolver *r, const char *tag,
    const char *name, dns_cb cb, void *arg, struct dns_query **ret_query);

/*
 * Cancel a query whose callback has not run: the callback will not be
 * called and the handle is invalid on return. Any in-flight DNS packets
 * are still accounted until c-ares finishes them. NULL is a no-op.
 */
void dns_query_cancel(struct dns_query *q);

/* Return the number of DNS queries issued so far (two per resolution). */
uint64_t dns_resolver_queries(const struct dns_resolver *r);

/* Return the number of resolutions whose callback has not run yet. */
size_t dns_resolver_pending(const struct dns_resolver *r);

/*
 * Return the number of lookups c-ares still works on: pending ones plus
 * cancelled or timed-out ones whose queries have not finished. This is
 * what DNS_PENDING_MAX caps.
 */
size_t dns_resolver_outstanding(const struct dns_resolver *r);

/*
 * Return the number of outstanding lookups (as dns_resolver_outstanding()
 * counts them) made with dns_resolve_tagged() under tag. NULL or "" gives
 * 0. Linear in the number of outstanding lookups (at most
 * DNS_PENDING_MAX).
 */
size_t dns_resolver_outstanding_tag(const struct dns_resolver *r,
    const char *tag);

/* Return a stable lowercase name for status ("ok", "nxdomain", ...). */
const char *dns_status_str(enum dns_status status);

/*
 * Map a failure status to the guest-visible error: DNS_NXDOMAIN and
 * DNS_NODATA give EGRESS_ERR_NOT_FOUND (the caller's policy reason
 * "unresolvable", shown as dns-failed), every other failure gives
 * EGRESS_ERR_DNS_FAILED, DNS_OK gives 0.
 */
int dns_status_error(enum dns_status status);

/*
 * Blocking convenience for the CLI: resolve name on a private event_base
 * and resolver, as dns_resolve() does. Write at most max addresses into
 * addrs and the count into *ret_n, and the outcome into *ret_status (both
 * written on every return 0). Return 0 when the resolution ran (whatever
 * its status), or an error from dns_resolver_new()/dns_resolve(), or
 * EGRESS_ERR_TOO_BIG when the answer had more than max addresses (then
 * the first max are written).
 */
int dns_resolve_sync(const char *const *servers, size_t nservers,
    int timeout_ms, const char *name, struct policy_addr *addrs, size_t max,
    size_t *ret_n, enum dns_status *ret_status);

#endif /* EGRESS_BROKER_DNS_H */
