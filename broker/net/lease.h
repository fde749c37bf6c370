/* SPDX-License-Identifier: ISC */
/*
 * lease: per-instance connection budgets ([plugins.limits]
 * max_connections_per_instance). One table per broker, keyed by instance
 * name, so counts survive configuration reloads: the limit is passed on
 * each acquire from the snapshot in force, and lowering it refuses new
 * leases until enough old ones are released (existing connections are
 * never cut). A lease is held for the whole life of one upstream
 * connection (dialing, active, and idle in the pool), so the leases are
 * also the units of the broker-wide fair share of upstream connections
 * (share.h) when one is attached. Not thread-safe: one event loop owns
 * the table.
 */
#ifndef EGRESS_BROKER_LEASE_H
#define EGRESS_BROKER_LEASE_H

#include <stddef.h>

#define LEASE_NAME_MAX 64 /* bytes of an instance name (CONF_NAME_MAX) */

struct lease_table;
struct lease;
struct share;

/* Return a new empty table, or NULL on out-of-memory. */
struct lease_table *lease_table_new(void);

/*
 * Free the table. Every lease must have been released first (a leftover
 * lease is our bug: assert). NULL is a no-op.
 */
void lease_table_free(struct lease_table *t);

/*
 * Count every lease from now on in share s as well (borrowed; it must
 * outlive the table or be detached with NULL; attach it while no lease
 * is held): a lease is then also one unit of instance's fair share of
 * the broker's upstream connections.
 */
void lease_table_set_share(struct lease_table *t, struct share *s);

/*
 * Take one connection lease for instance if it holds fewer than max
 * (max 0 refuses everything) and, with a share attached, the share
 * grants instance one more unit (share_acquire()'s rule). Immediate:
 * never waits. Return 0 and write
 * *ret (owned by the caller until lease_release()), or
 * EGRESS_ERR_BUDGET_EXHAUSTED, EGRESS_ERR_INVALID (empty name or longer
 * than LEASE_NAME_MAX) or EGRESS_ERR_NOMEM.
 */
int lease_acquire(struct lease_table *t, const char *instance, unsigned max,
    struct lease **ret);

/* Give a lease back. NULL is a no-op; releasing twice is a bug. */
void lease_release(struct lease *l);

/* Return the number of leases instance holds now (0 if unknown). */
unsigned lease_count(const struct lease_table *t, const char *instance);

/* Return the instance name a lease belongs to (borrowed for its life). */
const char *lease_instance(const struct lease *l);

/*
 * Answer whether instance holds more leases than its guaranteed share
 * of the attached share, and whether it holds fewer (both 0 without a
 * share, or for an unknown instance).
 */
int lease_is_borrowing(const struct lease_table *t, const char *instance);
int lease_is_within_guarantee(const struct lease_table *t,
    const char *instance);

/* Return the number of leases held across all instances. */
size_t lease_total(const struct lease_table *t);

#endif /* EGRESS_BROKER_LEASE_H */
