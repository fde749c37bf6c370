/* SPDX-License-Identifier: ISC */
/*
 * share: fair shares of one bounded pool (pending lookups, sessions,
 * upstream connections, TLS handshakes in progress, buffered bytes)
 * among the instances that use it, grouped by plugin. Every configured
 * instance is guaranteed a minimum that stays reserved for it whatever
 * the others do; what is left over is borrowed, fairly across plugins
 * (one plugin running many instances borrows no more than one running
 * a single instance), and never past a per-instance maximum. So an
 * instance that is not attacking always gets its guaranteed share, and
 * a handful of instances (or one plugin installed per tenant) cannot
 * take the whole pool.
 *
 * The rule for one acquire of n units by instance i of plugin p, holding
 * h_i with guarantee g (g = min(guarantee, capacity / configured
 * instances), 0 for an instance not configured):
 *   - never past the capacity, never past the per-instance maximum;
 *   - what stays within g is granted whenever the pool has room (the
 *     room is kept: the others' borrowing never eats into unmet
 *     guarantees);
 *   - what goes beyond g is borrowed only if the pool keeps room for
 *     every other instance's unmet guarantee, and only while p's
 *     borrowed total stays within the borrowable part of the pool
 *     divided by the number of plugins borrowing (p counted).
 * Accounting is O(1) per call (hash lookups by name). Pure bookkeeping:
 * no system call, no event loop.
 */
#ifndef EGRESS_NET_SHARE_H
#define EGRESS_NET_SHARE_H

#include <stddef.h>

struct share;

/* One configured instance and its plugin (both borrowed for the call). */
struct share_member {
	const char *instance;
	const char *plugin;
};

/*
 * Make a pool of capacity units; each configured instance is guaranteed
 * up to guarantee units (less when the pool cannot hold that many for
 * every instance), and no instance holds more than per_instance_max.
 * Return NULL on out-of-memory or when capacity is 0.
 */
struct share *share_new(size_t capacity, size_t guarantee,
    size_t per_instance_max);

/* Free s (NULL is a no-op). */
void share_free(struct share *s);

/*
 * Declare the configured instances (the snapshot's entries): their
 * guarantees are reserved from now on. An instance no longer listed
 * keeps what it holds (released as usual) but has no guarantee. Return 0
 * or EGRESS_ERR_NOMEM (nothing changed).
 */
int share_configure(struct share *s, const struct share_member *m, size_t n);

/*
 * Take n units for instance (of plugin; NULL: its configured plugin, or
 * a group of its own). Return 0, or EGRESS_ERR_BUDGET_EXHAUSTED when the
 * rule above refuses (nothing taken), or EGRESS_ERR_NOMEM.
 */
int share_acquire(struct share *s, const char *instance, const char *plugin,
    size_t n);

/* Give back n units that instance holds (at most what it holds). */
void share_release(struct share *s, const char *instance, size_t n);

/* Return the group (plugin) instance is counted in, borrowed until the
 * next call that changes s, or NULL when s does not know instance. */
const char *share_group(const struct share *s, const char *instance);

/* Return what instance holds, and what the pool holds in all. */
size_t share_held(const struct share *s, const char *instance);

/* Return what instance holds beyond its guarantee, and what of its
 * guarantee it does not hold yet (both 0 for an unknown instance). */
size_t share_borrowed(const struct share *s, const char *instance);
size_t share_unmet(const struct share *s, const char *instance);
size_t share_total(const struct share *s);

/* Return the guarantee each configured instance has now. */
size_t share_guarantee(const struct share *s);

/* Return the pool's capacity. */
size_t share_capacity(const struct share *s);

#endif /* EGRESS_NET_SHARE_H */
