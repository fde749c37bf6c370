/* SPDX-License-Identifier: ISC */
/*
 * spin: when the event loop polls (epoll_wait without sleeping) instead
 * of blocking. A sleeping broker is woken, and on a virtual machine its
 * vCPU scheduled, twice per request; polling for a short while after
 * work picks the next packet up without that wake-up, for CPU time.
 *
 * Two settings ([broker] in docs/configuration.md):
 *  - busy_poll_us, fixed: after a wait that found work, poll that long
 *    since the last work seen, always (not after a timer's wake-up);
 *  - adaptive_poll_us, the default: poll that long only while it pays,
 *    as the kernel's NAPI busy polling does. The loop turns hot when a
 *    blocking wait was woken by work (any event: a guest's bytes, an
 *    upstream's, a new connection) within twice the bound (the wait's
 *    measure includes the handling of what woke it), and cold again the
 *    first time a poll runs out with no work. A cold loop never polls,
 *    so an idle broker costs nothing; a hot one polls up to the bound
 *    after each event that follows the previous one that closely: up to
 *    one core while events keep coming that fast, and at most one bound
 *    each time they pause.
 * Pure: the caller reads the clock and counts the work.
 */
#ifndef EGRESS_BROKER_SPIN_H
#define EGRESS_BROKER_SPIN_H

#include <stdint.h>

struct spin {
	unsigned hot;	 /* the adaptive poll pays: use it */
	unsigned worked; /* the last blocking wait found work */
};

/* How long to keep polling after the last work, in microseconds: the
 * fixed bound when set (0 after a wait that found no work), else the
 * adaptive bound while hot, else 0. */
unsigned spin_budget(const struct spin *sp, unsigned fixed_us,
    unsigned adaptive_us);

/* A blocking wait returned after waited_us (its callbacks included),
 * and found work or not. */
void spin_woke(struct spin *sp, int64_t waited_us, int worked,
    unsigned adaptive_us);

/* A poll ran out with no work: cold until a wait says otherwise. */
void spin_missed(struct spin *sp);

#endif /* EGRESS_BROKER_SPIN_H */
