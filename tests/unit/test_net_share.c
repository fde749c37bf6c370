/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/net/share: the guarantee is reserved whatever the
 * others do, borrowing is fair across plugins, the capacity and the
 * per-instance maximum hold, and a model test drives random interleavings
 * of acquire and release across instances and checks the invariants
 * after every step against its own count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include <egress/error.h>

#include "broker/net/share.h"

static struct share *
pool(size_t cap, size_t g, size_t max, const char *spec)
{
	/* spec: "inst:plugin inst:plugin ..." */
	static char buf[1024];
	struct share_member m[64];
	struct share *s;
	size_t n = 0;
	char *tok, *save = NULL, *colon;

	s = share_new(cap, g, max);
	cr_assert_not_null(s);
	(void)snprintf(buf, sizeof(buf), "%s", spec);
	for (tok = strtok_r(buf, " ", &save); tok != NULL;
	     tok = strtok_r(NULL, " ", &save)) {
		colon = strchr(tok, ':');
		cr_assert_not_null(colon);
		*colon = '\0';
		m[n].instance = tok;
		m[n].plugin = colon + 1;
		n++;
	}
	cr_assert_eq(share_configure(s, m, n), 0);
	return s;
}

/* Acquire one unit for inst until refused; return how many it got. */
static size_t
greedy(struct share *s, const char *inst, const char *plugin)
{
	size_t n = 0;

	while (share_acquire(s, inst, plugin, 1) == 0)
		n++;
	return n;
}

Test(net_share, guarantee_survives_a_flood)
{
	/* The shape of the reported attack: eight instances of one plugin
	 * take what they can of 1024 lookup slots (128 each at most). */
	struct share *s = pool(1024, 16, 128,
	    "a1:evil a2:evil a3:evil "
	    "a4:evil a5:evil a6:evil a7:evil a8:evil victim:good");
	char name[8];
	size_t i, got = 0;

	for (i = 1; i <= 8; i++) {
		(void)snprintf(name, sizeof(name), "a%zu", i);
		got += greedy(s, name, "evil");
	}
	cr_assert_lt(got, 1024, "the flood took the whole pool");
	cr_assert_geq(greedy(s, "victim", "good"), 16,
	    "the victim did not get its guarantee");
	cr_assert_leq(share_total(s), 1024);
	share_free(s);
}

Test(net_share, borrowing_is_fair_across_plugins)
{
	/* One plugin with 8 instances, one with 1: the remainder beyond the
	 * guarantees is split by plugin, not by instance. */
	struct share *s = pool(200, 10, 200,
	    "a1:many a2:many a3:many "
	    "a4:many a5:many a6:many a7:many a8:many b:one");
	char name[8];
	size_t i, a = 0, b;

	/* b borrows first a little, so both plugins are borrowing. */
	cr_assert_eq(share_acquire(s, "b", "one", 11), 0);
	for (i = 1; i <= 8; i++) {
		(void)snprintf(name, sizeof(name), "a%zu", i);
		a += greedy(s, name, "many");
	}
	b = 11 + greedy(s, "b", "one");
	/* 200 - 9 * 10 = 110 borrowable, 55 per plugin. */
	cr_assert_eq(a, 8 * 10 + 55, "plugin many got %zu", a);
	cr_assert_eq(b, 10 + 55, "plugin one got %zu", b);
	share_free(s);
}

Test(net_share, capacity_and_maximum)
{
	struct share *s = pool(10, 2, 6, "x:p y:q");

	cr_assert_eq(share_acquire(s, "x", NULL, 7),
	    EGRESS_ERR_BUDGET_EXHAUSTED, "past the per-instance maximum");
	cr_assert_eq(share_acquire(s, "x", NULL, 6), 0);
	cr_assert_eq(share_held(s, "x"), 6);
	/* y's guarantee of 2 is kept: x may not borrow it. */
	cr_assert_eq(share_acquire(s, "y", NULL, 4), 0);
	cr_assert_eq(share_total(s), 10);
	cr_assert_eq(share_acquire(s, "y", NULL, 1),
	    EGRESS_ERR_BUDGET_EXHAUSTED, "past the capacity");
	share_release(s, "x", 100); /* more than held: all of it */
	cr_assert_eq(share_held(s, "x"), 0);
	cr_assert_eq(share_total(s), 4);
	share_free(s);
}

Test(net_share, unconfigured_instance_has_no_guarantee)
{
	struct share *s = pool(10, 5, 10, "x:p");

	/* z is not configured: it may borrow only what x's reserve leaves. */
	cr_assert_eq(greedy(s, "z", "p2"), 5);
	cr_assert_eq(greedy(s, "x", "p"), 5);
	share_release(s, "z", 5);
	cr_assert_eq(share_held(s, "z"), 0);
	share_free(s);
}

Test(net_share, guarantee_shrinks_when_it_cannot_fit)
{
	struct share *s = pool(10, 8, 10, "a:p b:q c:r");

	cr_assert_eq(share_guarantee(s), 3, "10 / 3 instances");
	share_free(s);
}

Test(net_share, reconfigure_moves_groups_and_guarantees)
{
	struct share_member m[2] = { { "a", "p" }, { "b", "p" } };
	struct share *s = pool(100, 10, 100, "a:p");

	cr_assert_eq(greedy(s, "a", "p"), 100);
	/* b arrives while the pool is full: no room until a releases. */
	cr_assert_eq(share_configure(s, m, 2), 0);
	cr_assert_eq(share_acquire(s, "b", NULL, 1),
	    EGRESS_ERR_BUDGET_EXHAUSTED);
	share_release(s, "a", 50);
	/* b's guarantee is now reserved: a cannot take it back. */
	cr_assert_eq(greedy(s, "a", "p"), 40);
	cr_assert_eq(greedy(s, "b", "p"), 10);
	share_free(s);
}

/*
 * The model: random acquire/release of random sizes across 12 instances
 * of 4 plugins (and 2 unconfigured ones), 200,000 steps. After every step:
 * the pool's total and each holding match the model's own count, the
 * total never passes the capacity, no holding passes the maximum, and a
 * configured instance below its guarantee is never refused a unit while
 * the pool kept the room the rule reserves.
 */
Test(net_share, model_random_interleavings)
{
	static const char *const inst[] = { "i0", "i1", "i2", "i3", "i4", "i5",
		"i6", "i7", "i8", "i9", "i10", "i11", "u0", "u1" };
	static const char *const plug[] = { "p0", "p0", "p0", "p0", "p0", "p0",
		"p1", "p1", "p2", "p3", "p3", "p3", "u0", "u1" };
	const size_t ni = sizeof(inst) / sizeof(inst[0]), nconf = 12;
	const size_t cap = 300, gmax = 12, max = 100;
	struct share_member m[12];
	size_t held[14] = { 0 }, total = 0, i, step, g, k, n;
	struct share *s;
	unsigned seed = 12345;
	int rc;

	for (i = 0; i < nconf; i++) {
		m[i].instance = inst[i];
		m[i].plugin = plug[i];
	}
	s = share_new(cap, gmax, max);
	cr_assert_not_null(s);
	cr_assert_eq(share_configure(s, m, nconf), 0);
	g = share_guarantee(s);
	cr_assert_eq(g, 12);
	for (step = 0; step < 200000; step++) {
		i = (size_t)rand_r(&seed) % ni;
		n = 1 + (size_t)rand_r(&seed) % 8;
		if (rand_r(&seed) % 2 == 0) {
			rc = share_acquire(s, inst[i], plug[i], n);
			cr_assert(rc == 0 ||
			    rc == EGRESS_ERR_BUDGET_EXHAUSTED);
			if (rc == 0) {
				held[i] += n;
				total += n;
			} else if (i < nconf && held[i] + n <= g) {
				/* Within the guarantee: refused only when
				 * the pool is full. */
				cr_assert_gt(total + n, cap,
				    "step %zu: %s refused within its guarantee",
				    step, inst[i]);
			}
		} else {
			k = n < held[i] ? n : held[i];
			share_release(s, inst[i], n);
			held[i] -= k;
			total -= k;
		}
		cr_assert_eq(share_total(s), total, "step %zu", step);
		cr_assert_leq(total, cap);
		cr_assert_eq(share_held(s, inst[i]), held[i]);
		cr_assert_leq(held[i], max);
	}
	/* The reserve: whatever happened, every configured instance's unmet
	 * guarantee fits in what is free. */
	for (i = 0, k = 0; i < nconf; i++)
		k += held[i] < g ? g - held[i] : 0;
	cr_assert_geq(cap - total, k);
	share_free(s);
}
