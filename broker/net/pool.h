/* SPDX-License-Identifier: ISC */
/*
 * pool: idle keep-alive upstream connections, reusable only under the
 * exact key (instance, host, port, validated address, TLS and the trust
 * generation its certificate was verified under) and only by a
 * request that has already passed the whole policy: pool_take() is given
 * the new verdict's validated address set and returns a connection only
 * to one of those addresses. A pooled connection keeps its instance's
 * lease. Idle connections are closed when the upstream closes or sends
 * anything, after idle_timeout_ms, or when the pool is over its cap.
 */
#ifndef EGRESS_BROKER_POOL_H
#define EGRESS_BROKER_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

struct event_base;
struct bufferevent;
struct lease;
struct pool;

#define POOL_IDLE_MAX_DEFAULT	     256
#define POOL_IDLE_TIMEOUT_DEFAULT_MS 30000

/* A pool key; all borrowed for the call. */
struct pool_key {
	const char *instance;
	const struct policy_host *host; /* the authorized host */
	uint16_t port;
	int tls;
	uint64_t trust; /* TLS trust generation the
					   connection was verified under
					   (0 for plain TCP) */
};

/*
 * Create a pool on base (borrowed). max_idle caps idle connections in
 * total (0: POOL_IDLE_MAX_DEFAULT); idle_timeout_ms closes an idle
 * connection after that long (0: POOL_IDLE_TIMEOUT_DEFAULT_MS). Return
 * the pool, or NULL on out-of-memory.
 */
struct pool *pool_new(struct event_base *base, size_t max_idle,
    int idle_timeout_ms);

/* Close every idle connection, release its lease, free the pool. NULL is
 * a no-op. */
void pool_free(struct pool *p);

/*
 * Park a connection after an exchange that http1_is_reusable() approved.
 * addr is the address it is connected to. Takes ownership of bev (its
 * callbacks are replaced) and of lease in every case: on failure both
 * are freed at once. When the pool is full the oldest idle connection is
 * closed first. Return 0, EGRESS_ERR_INVALID or EGRESS_ERR_NOMEM.
 */
int pool_put(struct pool *p, const struct pool_key *k,
    const struct policy_addr *addr, struct bufferevent *bev,
    struct lease *lease);

/*
 * Take the most recently parked connection under k whose address is one
 * of addrs[0..naddrs) (the new request's validated set) and that is
 * still quiet: one with bytes or EOF waiting that the read callback has
 * not seen yet (in the input buffer, TLS's buffer, or the kernel's:
 * MSG_PEEK) is closed instead, with its lease, and the search goes on. On a hit,
 * ownership of the bufferevent and its lease moves to the caller, and
 * *ret_used is the connected address. Return the bufferevent, or NULL
 * (no match; nothing written).
 */
struct bufferevent *pool_take(struct pool *p, const struct pool_key *k,
    const struct policy_addr *addrs, size_t naddrs, struct lease **ret_lease,
    struct policy_addr *ret_used);

/*
 * Close up to n idle connections of instance, oldest first, releasing
 * their leases (a new request of that instance needs a lease and the
 * budget is full). Return the number closed.
 */
size_t pool_evict(struct pool *p, const char *instance, size_t n);

/*
 * Take a lease for instance from t (lease_acquire() with max), making
 * room rather than refusing while idle pooled connections hold leases
 * nobody uses: first the instance's own idle connections, oldest first;
 * then, when the broker-wide share of t refused, the oldest idle
 * connection of another instance that holds beyond its guaranteed share
 * (of any other instance when instance is still within its own
 * guarantee). One connection is closed per try. p may be NULL (no
 * pool). Return lease_acquire()'s result; *ret as there.
 */
int pool_lease(struct pool *p, struct lease_table *t, const char *instance,
    unsigned max, struct lease **ret);

/* Decide about one idle connection; k and its strings borrowed for the
 * call. Return nonzero to close it. */
typedef int (*pool_match_fn)(void *arg, const struct pool_key *k);

/*
 * Ask match about every idle connection, oldest first, and close each it
 * picks (releasing its lease) before asking about the next, so match may
 * look at lease counts. Return the number closed.
 */
size_t pool_drop_if(struct pool *p, pool_match_fn match, void *arg);

/* Return the number of idle connections (all, or for instance if not
 * NULL). */
size_t pool_idle(const struct pool *p, const char *instance);

#endif /* EGRESS_BROKER_POOL_H */
