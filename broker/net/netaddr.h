/* SPDX-License-Identifier: ISC */
/*
 * netaddr: this host's own interface addresses, kept current. At start
 * the broker reads every IPv4 and IPv6 interface address with libnl-route
 * (an rtnl_addr cache); it then listens for netlink address events
 * (NETLINK_ROUTE, RTNLGRP_IPV4_IFADDR and RTNLGRP_IPV6_IFADDR) on a
 * non-blocking nl_sock driven by a libevent event, and after every burst
 * of events (or a lost one: ENOBUFS) re-reads the cache, so the set is
 * current as soon as netlink has reported a change. The set is exposed as
 * a sorted, duplicate-free array of struct policy_addr for
 * policy_classify_ctx.local (the classifier treats these addresses as
 * private), with a generation counter that moves only when the set does.
 * Nothing here decides reachability.
 */
#ifndef EGRESS_BROKER_NETADDR_H
#define EGRESS_BROKER_NETADDR_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

struct event_base;
struct netaddr;

#define NETADDR_MAX 4096 /* addresses kept; more are dropped */

/*
 * Called from the event loop after the set changed (never from inside
 * netaddr_new()). na is borrowed for the call.
 */
typedef void (*netaddr_change_cb)(void *arg, const struct netaddr *na);

/*
 * Subscribe to address events, then read the current addresses, on base
 * (borrowed; it must outlive the watcher). cb may be NULL. Both netlink
 * sockets are CLOEXEC. Return 0 and write *ret (generation 1), or
 * EGRESS_ERR_NOMEM, or EGRESS_ERR_IO (netlink unavailable: no socket, no
 * subscription, or the first dump failed).
 */
int netaddr_new(struct event_base *base, netaddr_change_cb cb, void *arg,
    struct netaddr **ret);

/* Stop watching and free everything. NULL is a no-op. */
void netaddr_free(struct netaddr *na);

/*
 * Return the current set (sorted: IPv4 before IPv6, then by bytes; no
 * duplicates) and write its length to *ret_n. The array is borrowed until
 * control next returns to the event loop (a later change replaces it);
 * pass it to policy_classify_ctx.local within one call, never keep it.
 * NULL na gives NULL and 0.
 */
const struct policy_addr *netaddr_addrs(const struct netaddr *na,
    size_t *ret_n);

/* Return the generation: 1 after netaddr_new(), +1 at each change. */
uint64_t netaddr_generation(const struct netaddr *na);

/*
 * Return how many re-reads failed (the previous set was kept) and how
 * many times the kernel reported lost events (ENOBUFS), for metrics.
 */
uint64_t netaddr_errors(const struct netaddr *na);
uint64_t netaddr_overruns(const struct netaddr *na);

/*
 * Re-read the addresses now (normally driven by events). Return 1 when
 * the set changed, 0 when it did not, or EGRESS_ERR_IO / _NOMEM with the
 * previous set kept.
 */
int netaddr_refresh(struct netaddr *na);

#endif /* EGRESS_BROKER_NETADDR_H */
