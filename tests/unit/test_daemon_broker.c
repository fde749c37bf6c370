/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/broker: the fair shares follow the snapshot, the
 * memory credit of a holder grows in chunks up to its limit and the
 * instance's share, a holder refused credit waits and is woken from the
 * loop once another gives memory back (once per release, and never one
 * that is gone), giving everything back leaves the share empty, the resolver holder is reference-counted, and this host's
 * addresses are read without netlink.
 */
#include "tests/unit/daemon_test.h"

#include "broker/net/decide.h"
#include "broker/net/share.h"

TestSuite(daemon_broker, .init = dt_setup, .fini = dt_teardown);

static int woken;

static void
wake(void *arg)
{
	(void)arg;
	woken++;
}

Test(daemon_broker, shares_follow_the_snapshot)
{
	struct broker *b = &dt_b;

	cr_assert_not_null(b->dns_share);
	cr_assert_not_null(b->session_share);
	cr_assert_not_null(b->mem_share);
	cr_assert_not_null(b->tls_share);
	cr_assert_eq(share_guarantee(b->dns_share), BROKER_DNS_GUARANTEE);
	cr_assert_eq(share_guarantee(b->session_share),
	    BROKER_SESSION_GUARANTEE);
	cr_assert_eq(share_guarantee(b->tls_share), BROKER_TLS_GUARANTEE);
	cr_assert_eq(share_guarantee(b->mem_share),
	    BROKER_MEM_GUARANTEE / 1024);
	cr_assert_eq(share_capacity(b->mem_share), b->memory_max / 1024);
	cr_assert_leq(b->memory_max, BROKER_MEM_DEFAULT_MAX);
	cr_assert_gt(b->memory_max, 0);
}

Test(daemon_broker, credit_grows_in_chunks_to_the_limit)
{
	struct broker *b = &dt_b;
	struct broker_mem m = { 0 };

	m.wake = wake;
	cr_assert(broker_mem_room(b, "app", &m, 0, 4 * BROKER_MEM_CHUNK));
	cr_assert_eq(m.credit, BROKER_MEM_CHUNK);
	cr_assert(broker_mem_room(b, "app", &m, BROKER_MEM_CHUNK + 1,
	    4 * BROKER_MEM_CHUNK));
	cr_assert_eq(m.credit, 2 * BROKER_MEM_CHUNK);
	cr_assert_eq(share_held(b->mem_share, "app"),
	    2 * BROKER_MEM_CHUNK / 1024);
	/* At the limit: no more, and the holder waits. */
	cr_assert_not(broker_mem_room(b, "app", &m, 4 * BROKER_MEM_CHUNK,
	    4 * BROKER_MEM_CHUNK));
	cr_assert_eq(m.credit, 4 * BROKER_MEM_CHUNK);
	cr_assert(m.waiting);
	/* Trimming keeps a spare chunk above what is used, in chunks. */
	broker_mem_trim(b, "app", &m, 10, 0);
	cr_assert_eq(m.credit, 2 * BROKER_MEM_CHUNK);
	broker_mem_trim(b, "app", &m, 0, 0);
	cr_assert_eq(m.credit, BROKER_MEM_CHUNK);
	broker_mem_trim(b, "app", &m, 0, 1);
	cr_assert_eq(m.credit, 0);
	cr_assert_not(m.waiting);
	cr_assert_eq(share_held(b->mem_share, "app"), 0);
	cr_assert_eq(share_total(b->mem_share), 0);
}

Test(daemon_broker, refused_holder_is_woken_when_memory_is_freed)
{
	struct broker *b = &dt_b;
	struct broker_mem x = { 0 }, y = { 0 };
	size_t used = 0, limit = (size_t)b->memory_max;
	int i;

	x.wake = wake;
	y.wake = wake;
	woken = 0;
	/* x takes what the instance may hold (a quarter of the budget). */
	while (broker_mem_room(b, "app", &x, used, limit))
		used = x.credit;
	cr_assert_eq(share_held(b->mem_share, "app"),
	    share_capacity(b->mem_share) / 4 / (BROKER_MEM_CHUNK / 1024) *
		(BROKER_MEM_CHUNK / 1024));
	cr_assert(x.waiting);
	/* y, of the same instance, gets nothing and waits too. */
	cr_assert_not(broker_mem_room(b, "app", &y, 0, limit));
	cr_assert(y.waiting);
	cr_assert_eq(woken, 0);
	/* x gives back all but one spare chunk: both are woken from the
	 * loop, not inside the trim. */
	broker_mem_trim(b, "app", &x, 0, 0);
	cr_assert_eq(woken, 0);
	for (i = 0; i < 10 && woken < 2; i++)
		(void)event_base_loop(b->base, EVLOOP_NONBLOCK);
	cr_assert_eq(woken, 2);
	cr_assert_not(y.waiting);
	cr_assert(broker_mem_room(b, "app", &y, 0, limit));
	broker_mem_trim(b, "app", &x, 0, 1);
	broker_mem_trim(b, "app", &y, 0, 1);
	cr_assert_eq(share_total(b->mem_share), 0);
}

/* A holder that needs two chunks and asks again each time it is woken. */
struct greedy {
	struct broker_mem m;
	size_t used;
	int woken, room;
};

static void
greedy_wake(void *arg)
{
	struct greedy *g = arg;

	g->woken++;
	g->room = broker_mem_room(&dt_b, "app", &g->m, g->used, SIZE_MAX);
}

/*
 * One chunk given back while a holder needs two: it is woken once, finds
 * no room, and waits again; the loop returns instead of waking it over
 * and over (which hung the broker at full CPU). The next chunk given
 * back wakes it again and it has room.
 */
Test(daemon_broker, holder_still_without_room_is_woken_once_per_release,
    .timeout = 30)
{
	struct broker *b = &dt_b;
	struct broker_mem x = { 0 };
	struct greedy g = { { 0 }, 0, 0, 0 };
	size_t cap = share_capacity(b->mem_share) / 4 * 1024, used = 0;
	int i;

	g.m.wake = greedy_wake;
	g.m.arg = &g;
	/* x takes what the instance may hold. */
	while (broker_mem_room(b, "app", &x, used, cap))
		used = x.credit;
	cr_assert_eq(x.credit, cap);
	/* One chunk back, which g takes; then it needs two more. */
	broker_mem_trim(b, "app", &x, x.credit - 2 * BROKER_MEM_CHUNK, 0);
	cr_assert_eq(x.credit, cap - BROKER_MEM_CHUNK);
	cr_assert(broker_mem_room(b, "app", &g.m, 0, SIZE_MAX));
	g.used = 2 * BROKER_MEM_CHUNK;
	cr_assert_not(broker_mem_room(b, "app", &g.m, g.used, SIZE_MAX));
	cr_assert(g.m.waiting);
	/* One chunk back: woken once, takes it, still short, waits. */
	broker_mem_trim(b, "app", &x, x.credit - 2 * BROKER_MEM_CHUNK, 0);
	cr_assert_neq(event_base_loop(b->base, EVLOOP_NONBLOCK), -1);
	cr_assert_eq(g.woken, 1, "woken %d times by one release", g.woken);
	cr_assert_not(g.room);
	cr_assert(g.m.waiting);
	cr_assert_eq(g.m.credit, 2 * BROKER_MEM_CHUNK);
	for (i = 0; i < 10; i++)
		cr_assert_neq(event_base_loop(b->base, EVLOOP_NONBLOCK), -1);
	cr_assert_eq(g.woken, 1, "woken again with nothing released");
	/* Another: woken, and now it has room. */
	broker_mem_trim(b, "app", &x, x.credit - 2 * BROKER_MEM_CHUNK, 0);
	for (i = 0; i < 10 && g.woken < 2; i++)
		cr_assert_neq(event_base_loop(b->base, EVLOOP_NONBLOCK), -1);
	cr_assert_eq(g.woken, 2);
	cr_assert(g.room);
	cr_assert_not(g.m.waiting);
	broker_mem_trim(b, "app", &x, 0, 1);
	broker_mem_trim(b, "app", &g.m, 0, 1);
	cr_assert_eq(share_total(b->mem_share), 0);
}

/*
 * A holder freed while the holders are being woken (here: the first one
 * woken gives up the second's credit and stops it waiting, as a session
 * freeing one of its requests does) is not woken, and the rest are.
 */
static struct broker_mem *unwait_victim;

static void
unwait_wake(void *arg)
{
	(void)arg;
	woken++;
	if (unwait_victim != NULL)
		broker_mem_trim(&dt_b, "app", unwait_victim, 0, 1);
	unwait_victim = NULL;
}

Test(daemon_broker, holder_gone_while_waking_is_not_woken)
{
	struct broker *b = &dt_b;
	struct broker_mem x = { 0 }, h[3];
	size_t cap = share_capacity(b->mem_share) / 4 * 1024, used = 0;
	int i;

	memset(h, 0, sizeof(h));
	while (broker_mem_room(b, "app", &x, used, cap))
		used = x.credit;
	for (i = 0; i < 3; i++) {
		h[i].wake = i == 0 ? wake : unwait_wake;
		cr_assert_not(broker_mem_room(b, "app", &h[i], 0, cap));
		cr_assert(h[i].waiting);
	}
	/* Waiters are woken newest first: h[2] runs first and stops h[1]
	 * waiting; h[0] is still woken. */
	unwait_victim = &h[1];
	woken = 0;
	broker_mem_trim(b, "app", &x, 0, 1);
	for (i = 0; i < 10; i++)
		cr_assert_neq(event_base_loop(b->base, EVLOOP_NONBLOCK), -1);
	cr_assert_eq(woken, 2, "woken %d", woken);
	cr_assert_null(unwait_victim);
	for (i = 0; i < 3; i++)
		cr_assert_not(h[i].waiting);
	cr_assert_null(b->mem_waiters);
	cr_assert_null(b->mem_waking);
	cr_assert_eq(share_total(b->mem_share), 0);
}

Test(daemon_broker, resolver_holder_is_counted)
{
	struct broker *b = &dt_b;
	struct broker_dns *d1, *d2;

	d1 = broker_dns_hold(b);
	d2 = broker_dns_hold(b);
	cr_assert_not_null(d1);
	cr_assert_eq(d1, d2);
	cr_assert_not_null(broker_dns_resolver(d1));
	broker_dns_release(d1);
	broker_dns_release(d2);
	broker_dns_release(NULL);
	/* Still the broker's own reference: usable. */
	cr_assert_not_null(broker_dns_resolver(b->dns));
	(void)event_base_loop(b->base, EVLOOP_NONBLOCK);
}

/* Without netlink the own-address set is unknown: no decision classifies
 * without it (it used to classify with none, allowing them). */
Test(daemon_broker, own_addresses_unknown_without_netlink_refuse)
{
	struct broker *b = &dt_b;
	struct decide_policy pol;

	memset(&pol, 0, sizeof(pol));
	cr_assert_eq(broker_own_addrs(b, &pol), 0);
	cr_assert_gt(pol.nlocal, 0, "not even loopback was read");
	netaddr_free(b->netaddr); /* as when netlink is unavailable */
	b->netaddr = NULL;
	memset(&pol, 0, sizeof(pol));
	cr_assert_eq(broker_own_addrs(b, &pol), EGRESS_ERR_UNAVAILABLE);
	cr_assert_null(pol.local);
	cr_assert_null(pol.nets);
}
