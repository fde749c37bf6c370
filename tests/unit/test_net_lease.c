/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/net/lease: the per-instance budget is immediate,
 * per instance, survives a change of limit (a reload), is freed when the
 * last lease goes, and scales past the initial hash size. With a fair
 * share attached, leases are also its units: a model test drives random
 * interleavings of acquire and release across instances and checks that
 * no instance passes its budget or the pool, and that a configured
 * instance below its guarantee is never refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <egress/error.h>

#include "broker/net/lease.h"
#include "broker/net/share.h"

Test(broker_lease, budget_per_instance)
{
	struct lease_table *t = lease_table_new();
	struct lease *a1 = NULL, *a2 = NULL, *a3 = NULL, *b1 = NULL;

	cr_assert(t != NULL);
	cr_assert_eq(lease_acquire(t, "a", 2, &a1), 0);
	cr_assert_eq(lease_acquire(t, "a", 2, &a2), 0);
	cr_assert_eq(lease_acquire(t, "a", 2, &a3),
	    EGRESS_ERR_BUDGET_EXHAUSTED);
	cr_assert_null(a3);
	/* Another instance is unaffected. */
	cr_assert_eq(lease_acquire(t, "b", 2, &b1), 0);
	cr_assert_eq(lease_count(t, "a"), 2);
	cr_assert_eq(lease_count(t, "b"), 1);
	cr_assert_eq(lease_total(t), 3);
	cr_assert_str_eq(lease_instance(a1), "a");
	/* Released: the next acquire succeeds. */
	lease_release(a1);
	cr_assert_eq(lease_count(t, "a"), 1);
	cr_assert_eq(lease_acquire(t, "a", 2, &a3), 0);
	lease_release(a2);
	lease_release(a3);
	lease_release(b1);
	lease_release(NULL);
	cr_assert_eq(lease_count(t, "a"), 0);
	cr_assert_eq(lease_total(t), 0);
	lease_table_free(t);
}

Test(broker_lease, limit_change_survives_reload)
{
	struct lease_table *t = lease_table_new();
	struct lease *l[4], *x = NULL;
	int i;

	for (i = 0; i < 4; i++)
		cr_assert_eq(lease_acquire(t, "inst", 4, &l[i]), 0);
	/* The reload lowers the limit to 2: held leases stay, new ones
	 * wait until the count is under the new limit. */
	cr_assert_eq(lease_acquire(t, "inst", 2, &x),
	    EGRESS_ERR_BUDGET_EXHAUSTED);
	lease_release(l[0]);
	lease_release(l[1]);
	cr_assert_eq(lease_acquire(t, "inst", 2, &x),
	    EGRESS_ERR_BUDGET_EXHAUSTED);
	lease_release(l[2]);
	cr_assert_eq(lease_acquire(t, "inst", 2, &x), 0);
	lease_release(x);
	lease_release(l[3]);
	lease_table_free(t);
}

struct name_case {
	char name[16];
	size_t pad; /* 'a' bytes appended to name */
	unsigned max;
	int rc;
};

ParameterizedTestParameters(broker_lease, names)
{
	static struct name_case cases[] = {
		{ "ok", 0, 1, 0 },
		{ "", 0, 1, EGRESS_ERR_INVALID },
		{ "zero", 0, 0, EGRESS_ERR_BUDGET_EXHAUSTED },
		{ "", LEASE_NAME_MAX, 1, 0 },
		{ "", LEASE_NAME_MAX + 1, 1, EGRESS_ERR_INVALID },
	};

	return cr_make_param_array(struct name_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct name_case *c, broker_lease, names)
{
	struct lease_table *t = lease_table_new();
	struct lease *l = NULL;
	char name[128];
	size_t n = strlen(c->name);

	memcpy(name, c->name, n);
	memset(name + n, 'a', c->pad);
	name[n + c->pad] = '\0';
	cr_assert_eq(lease_acquire(t, name, c->max, &l), c->rc);
	cr_assert_eq(lease_count(t, name), c->rc == 0 ? 1 : 0);
	lease_release(l);
	lease_table_free(t);
}

Test(broker_lease, many_instances)
{
	static struct lease *l[1000][2];
	struct lease_table *t = lease_table_new();
	struct lease *x = NULL;
	char name[32];
	int i;

	for (i = 0; i < 1000; i++) {
		(void)snprintf(name, sizeof(name), "instance-%d", i);
		cr_assert_eq(lease_acquire(t, name, 2, &l[i][0]), 0);
		cr_assert_eq(lease_acquire(t, name, 2, &l[i][1]), 0);
		cr_assert_eq(lease_acquire(t, name, 2, &x),
		    EGRESS_ERR_BUDGET_EXHAUSTED);
	}
	cr_assert_eq(lease_total(t), 2000);
	for (i = 0; i < 1000; i++) {
		(void)snprintf(name, sizeof(name), "instance-%d", i);
		cr_assert_eq(lease_count(t, name), 2);
		lease_release(l[i][0]);
		cr_assert_eq(lease_count(t, name), 1);
		lease_release(l[i][1]);
		cr_assert_eq(lease_count(t, name), 0);
	}
	cr_assert_eq(lease_total(t), 0);
	lease_table_free(t);
}

Test(broker_lease, share_reserves_the_guarantee)
{
	/* Many attacking instances of one plugin hold what they can of a
	 * pool of 32 upstream connections; the victim still gets 4. */
	static const struct share_member m[] = { { "a1", "evil" },
		{ "a2", "evil" }, { "a3", "evil" }, { "a4", "evil" },
		{ "victim", "good" } };
	struct lease_table *t = lease_table_new();
	struct share *s = share_new(32, 4, 0);
	struct lease *l[96], *x = NULL;
	size_t n = 0, i, held = 0;
	char name[8];

	cr_assert(t != NULL && s != NULL);
	cr_assert_eq(share_configure(s, m, 5), 0);
	lease_table_set_share(t, s);
	for (i = 1; i <= 4; i++) {
		(void)snprintf(name, sizeof(name), "a%zu", i);
		while (lease_acquire(t, name, 16, &l[n]) == 0)
			n++;
	}
	cr_assert_eq(lease_total(t), n);
	cr_assert_eq(share_total(s), n, "a lease not counted in the share");
	cr_assert_lt(n, 32, "the attackers took the whole pool");
	cr_assert(lease_is_borrowing(t, "a1"));
	cr_assert(lease_is_within_guarantee(t, "victim"));
	while (held < 8 && lease_acquire(t, "victim", 16, &l[n]) == 0) {
		n++;
		held++;
	}
	cr_assert_geq(held, 4, "the victim got %zu of its 4", held);
	cr_assert(!lease_is_within_guarantee(t, "victim"));
	/* Refused by the share, not by the instance budget. */
	cr_assert_eq(lease_acquire(t, "a1", 16, &x),
	    EGRESS_ERR_BUDGET_EXHAUSTED);
	for (i = 0; i < n; i++)
		lease_release(l[i]);
	cr_assert_eq(share_total(s), 0, "a release not given back");
	lease_table_free(t);
	share_free(s);
}

/*
 * The model: 100,000 random acquires and releases across 10 instances of
 * 3 plugins (and one not configured) on a share of 40 with a guarantee of
 * 3 and an instance budget of 12. After every step the table and the
 * share agree with the model's count, no instance passes its budget, the
 * total never passes the pool, and a configured instance holding fewer
 * than its guarantee is never refused.
 */
Test(broker_lease, model_random_interleavings)
{
	static const char *const inst[] = { "i0", "i1", "i2", "i3", "i4", "i5",
		"i6", "i7", "i8", "i9", "stray" };
	static const char *const plug[] = { "p0", "p0", "p0", "p0", "p0", "p0",
		"p1", "p1", "p2", "p2" };
	enum { NI = 11, NCONF = 10, CAP = 40, G = 3, MAX = 12 };
	static struct lease *held[NI][MAX];
	struct share_member m[NCONF];
	struct lease_table *t = lease_table_new();
	struct share *s = share_new(CAP, G, 0);
	size_t cnt[NI] = { 0 }, total = 0, i, step, k;
	unsigned seed = 4242;
	struct lease *l;
	int rc;

	cr_assert(t != NULL && s != NULL);
	for (i = 0; i < NCONF; i++) {
		m[i].instance = inst[i];
		m[i].plugin = plug[i];
	}
	cr_assert_eq(share_configure(s, m, NCONF), 0);
	lease_table_set_share(t, s);
	for (step = 0; step < 100000; step++) {
		i = (size_t)rand_r(&seed) % NI;
		if (rand_r(&seed) % 5 < 3) {
			l = NULL;
			rc = lease_acquire(t, inst[i], MAX, &l);
			cr_assert(rc == 0 ||
			    rc == EGRESS_ERR_BUDGET_EXHAUSTED);
			if (rc == 0) {
				cr_assert_lt(cnt[i], MAX, "step %zu", step);
				held[i][cnt[i]++] = l;
				total++;
			} else
				cr_assert(i == NCONF || cnt[i] >= G,
				    "step %zu: %s refused with %zu of its "
				    "guarantee",
				    step, inst[i], cnt[i]);
		} else if (cnt[i] > 0) {
			k = (size_t)rand_r(&seed) % cnt[i];
			lease_release(held[i][k]);
			held[i][k] = held[i][--cnt[i]];
			total--;
		}
		cr_assert_eq(lease_count(t, inst[i]), cnt[i], "step %zu",
		    step);
		cr_assert_eq(share_held(s, inst[i]), cnt[i], "step %zu", step);
		cr_assert_eq(lease_total(t), total);
		cr_assert_eq(share_total(s), total);
		cr_assert_leq(total, CAP);
	}
	for (i = 0; i < NI; i++)
		while (cnt[i] > 0)
			lease_release(held[i][--cnt[i]]);
	cr_assert_eq(share_total(s), 0);
	lease_table_free(t);
	share_free(s);
}
