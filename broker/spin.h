/* SPDX-License-Identifier: ISC */
/*
 * spin: when the event loop polls (epoll_wait without sleeping) instead
 * of blocking. A sleeping broker is woken, and on a virtual machine its
 * vCPU scheduled, twice per request; polling for a short while after
 * work picks the next packet up without that wake-up, for CPU time.
 *
 * Two settings ([broker] in docs/configuration.md):
 *  - busy_poll_us, fixed: after any work, poll that long since the last
 *    work seen, always;
 *  - adaptive_poll_us, the default: poll that long only while it pays,
 *    as the kernel's NAPI busy polling does. The loop turns hot when a
 *    blocking wait was woken by work within twice the bound (so work
 *    follows work closely; the wait's measure includes the handling of
 *    what woke it), and cold again the first time a poll runs out with
 *    no work. A cold loop never polls, so an idle broker, or one whose
 *    requests are further apart than that, costs nothing; a hot one
 *    wastes at most one bound each time the work pauses.
 * Pure: the caller reads the clock and counts the work.
 */
#ifndef EGRESS_BROKER_SPIN_H
#define EGRESS_BROKER_SPIN_H

#include <stdint.h>

struct spin {
	unsigned hot; /* the adaptive poll pays: use it */
};

/* How long to keep polling after the last work, in microseconds: the
 * fixed bound when set, else the adaptive bound while hot, else 0. */
unsigned spin_budget(const struct spin *sp, unsigned fixed_us,
    unsigned adaptive_us);

/* A blocking wait returned after waited_us (its callbacks included),
 * and found work or not. */
void spin_woke(struct spin *sp, int64_t waited_us, int worked,
    unsigned adaptive_us);

/* A poll ran out with no work: cold until a wait says otherwise. */
void spin_missed(struct spin *sp);

#endif /* EGRESS_BROKER_SPIN_H */
