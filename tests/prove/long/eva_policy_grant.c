/* SPDX-License-Identifier: ISC */
/*
 * EVA harness: a grant set built by policy_grant_add() from ENTRIES
 * entries of any bytes (any kind, any host kind, any name and address
 * bytes; the set re-validates each), then policy_grant_matches() on any
 * host bytes, policy_grant_covers() on any entry bytes,
 * policy_grant_count() and policy_grant_entry() with any index, and
 * policy_grant_free(); the same on NULL and on an empty set. ENTRIES
 * stays within the set's first table (16 slots), so the table is not
 * grown during the analysis.
 * Each allocation is its own object (-eva-alloc-builtin fresh), so a
 * freed table is never confused with its successor, and every allocation
 * succeeds (-eva-no-alloc-returns-null): the out-of-memory paths are not
 * analysed.
 * prove: sources policy/grant.c policy/host.c policy/inet.c
 * prove: options -eva-alloc-builtin fresh -eva-no-alloc-returns-null
 */
#include "__fc_builtin.h"

#include "policy/policy.h"

#define ENTRIES 8

int
main(void)
{
	struct policy_grant *g;
	struct policy_entry e;
	struct policy_host h;
	size_t i;

	Frama_C_make_unknown((char *)&h, sizeof(h));
	Frama_C_make_unknown((char *)&e, sizeof(e));
	(void)policy_grant_matches(NULL, &h);
	(void)policy_grant_covers(NULL, &e);
	(void)policy_grant_count(NULL);
	(void)policy_grant_entry(NULL, 0);
	(void)policy_grant_add(NULL, &e);
	policy_grant_free(NULL);

	if ((g = policy_grant_new()) == NULL)
		return 0;
	(void)policy_grant_matches(g, &h);
	(void)policy_grant_covers(g, &e);
	(void)policy_grant_add(g, NULL);
	/*@ loop unroll ENTRIES; */
	for (i = 0; i < ENTRIES; i++) {
		Frama_C_make_unknown((char *)&e, sizeof(e));
		(void)policy_grant_add(g, &e);
	}
	Frama_C_make_unknown((char *)&h, sizeof(h));
	(void)policy_grant_matches(g, &h);
	(void)policy_grant_matches(g, NULL);
	Frama_C_make_unknown((char *)&e, sizeof(e));
	(void)policy_grant_covers(g, &e);
	(void)policy_grant_covers(g, NULL);
	(void)policy_grant_count(g);
	(void)policy_grant_entry(g, Frama_C_size_t_interval(0, SIZE_MAX));
	policy_grant_free(g);
	return 0;
}
