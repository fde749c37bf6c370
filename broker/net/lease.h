/* SPDX-License-Identifier: ISC */
/*
 * lease: per-instance connection budgets ([plugins.limits]
 * max_connections_per_instance). One table per broker, keyed by instance
 * name, so counts survive configuration reloads: the limit is passed on
 * each acquire from the snapshot in force, and lowering it refuses new
 * leases until enough old ones are released (existing connections are
 * never cut). A lease is held for the whole life of one upstream
 * connection, pooled connections included. Not thread-safe: one event
 * loop owns the table.
 */
#ifndef EGRESS_BROKER_LEASE_H
#define EGRESS_BROKER_LEASE_H

#include <stddef.h>

#define LEASE_NAME_MAX 64 /* bytes of an instance name (CONF_NAME_MAX) */

struct lease_table;
struct lease;

/* Return a new empty table, or NULL on out-of-memory. */
struct lease_table *lease_table_new(void);

/*
 * Free the table. Every lease must have been released first (a leftover
 * lease is our bug: assert). NULL is a no-op.
 */
void lease_table_free(struct lease_table *t);

/*
 * Take one connection lease for instance if it holds fewer than max
 * (max 0 refuses everything). Immediate: never waits. Return 0 and write
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

/* Return the number of leases held across all instances. */
size_t lease_total(const struct lease_table *t);

#endif /* EGRESS_BROKER_LEASE_H */
