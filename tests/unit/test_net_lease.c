/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/net/lease: the per-instance budget is immediate,
 * per instance, survives a change of limit (a reload), is freed when the
 * last lease goes, and scales past the initial hash size.
 */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <egress/error.h>

#include "broker/net/lease.h"

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
