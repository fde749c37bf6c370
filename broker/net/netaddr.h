/* SPDX-License-Identifier: ISC */
/*
 * netaddr: every address this host delivers locally, kept current. The
 * set is the interface addresses (an rtnl_addr cache) and the prefixes of
 * every local and anycast route (RTN_LOCAL, RTN_ANYCAST) in every routing
 * table, IPv4 and IPv6: a prefix on lo or an AnyIP route (`ip route add
 * local 9.9.9.0/24 dev lo`) delivers to this host as surely as an
 * interface address. The broker reads the set with libnl-route at start,
 * then listens for netlink address and route events on a non-blocking
 * nl_sock driven by a libevent event, and after every burst of events (or
 * a lost one: ENOBUFS) re-reads it, so the set is current as soon as
 * netlink has reported a change. A re-read that fails makes the set
 * unknown until one succeeds (retried every second): it is never partial
 * and never capped. netaddr_own() hands the set to
 * policy_classify_ctx (the loopback class), or refuses while it is
 * unknown. Nothing here decides reachability.
 */
#ifndef EGRESS_BROKER_NETADDR_H
#define EGRESS_BROKER_NETADDR_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

struct event_base;
struct netaddr;

/*
 * Called from the event loop after the set changed, or became unknown or
 * known again (netaddr_is_stale()); never from inside netaddr_new(). na
 * is borrowed for the call.
 */
typedef void (*netaddr_change_cb)(void *arg, const struct netaddr *na);

/*
 * Subscribe to address and route events, then read the current set, on
 * base (borrowed; it must outlive the watcher). cb may be NULL. Every
 * netlink socket is CLOEXEC. Return 0 and write *ret (generation 1), or
 * EGRESS_ERR_NOMEM, or EGRESS_ERR_IO (netlink unavailable: no socket, no
 * subscription, or a first dump failed).
 */
int netaddr_new(struct event_base *base, netaddr_change_cb cb, void *arg,
    struct netaddr **ret);

/*
 * Read the set once, without watching (for a program without an event
 * loop). Return 0 and write *ret (free it with netaddr_free()), or
 * EGRESS_ERR_NOMEM or EGRESS_ERR_IO (netlink unavailable or a dump
 * failed): no set, never a partial one.
 */
int netaddr_read(struct netaddr **ret);

/* Stop watching and free everything. NULL is a no-op. */
void netaddr_free(struct netaddr *na);

/*
 * Return the current interface addresses (sorted: IPv4 before IPv6, then by bytes; no
 * duplicates) and write its length to *ret_n. The array is borrowed until
 * control next returns to the event loop (a later change replaces it);
 * pass it to policy_classify_ctx.local within one call, never keep it.
 * NULL na gives NULL and 0.
 */
const struct policy_addr *netaddr_addrs(const struct netaddr *na,
    size_t *ret_n);

/*
 * Fill the own-address fields of ctx (local, nlocal, nets, nnets) with
 * the current set, borrowed as netaddr_addrs() says. Return 0, or
 * EGRESS_ERR_UNAVAILABLE with ctx untouched when the set is unknown (na
 * NULL, or the last re-read failed): classify nothing then.
 */
int netaddr_own(const struct netaddr *na, struct policy_classify_ctx *ctx);

/* Answer whether the set is unknown (NULL na, or a failed re-read). */
int netaddr_is_stale(const struct netaddr *na);

/* Return the error of the last failed re-read (0: none failed). */
int netaddr_last_error(const struct netaddr *na);

/* Return how many local-route prefixes the set holds. */
size_t netaddr_nets_count(const struct netaddr *na);

/* Return the generation: 1 after netaddr_new(), +1 at each change. */
uint64_t netaddr_generation(const struct netaddr *na);

/*
 * Return how many re-reads failed (the previous set was kept) and how
 * many times the kernel reported lost events (ENOBUFS), for metrics.
 */
uint64_t netaddr_errors(const struct netaddr *na);
uint64_t netaddr_overruns(const struct netaddr *na);

/*
 * Re-read the set now (normally driven by events). Return 1 when the set
 * changed (or was unknown and is known again), 0 when it did not, or
 * EGRESS_ERR_IO / _NOMEM: the set is then unknown (netaddr_own()
 * refuses) until a re-read succeeds, which a watcher retries every
 * second.
 */
int netaddr_refresh(struct netaddr *na);

#endif /* EGRESS_BROKER_NETADDR_H */
