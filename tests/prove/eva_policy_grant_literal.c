/* SPDX-License-Identifier: ISC */
/*
 * EVA harness, a property: an IP literal never matches a suffix pattern.
 * A grant set built by policy_grant_add() from ENTRIES suffix entries
 * ("*.s": kind POLICY_ENTRY_SUFFIX, every other byte any value, so the
 * set re-validates each and may keep it dead), then policy_grant_matches()
 * on a host of kind IPv4 or IPv6 with any name and address bytes: the
 * assertion that it answers 0 must be proven valid.
 * Allocations succeed and are fresh objects, as in the grant harness.
 * prove: sources policy/grant.c policy/host.c policy/inet.c
 * prove: options -eva-alloc-builtin fresh -eva-no-alloc-returns-null
 */
#include "__fc_builtin.h"

#include "policy/policy.h"

#define ENTRIES 2

int
main(void)
{
	struct policy_grant *g;
	struct policy_entry e;
	struct policy_host h;
	size_t i;
	int r;

	if ((g = policy_grant_new()) == NULL)
		return 0;
	/*@ loop unroll ENTRIES; */
	for (i = 0; i < ENTRIES; i++) {
		Frama_C_make_unknown((char *)&e, sizeof(e));
		e.kind = POLICY_ENTRY_SUFFIX;
		(void)policy_grant_add(g, &e);
	}
	Frama_C_make_unknown((char *)&h, sizeof(h));
	h.kind = Frama_C_nondet(0, 1) ? POLICY_HOST_IPV4 : POLICY_HOST_IPV6;
	r = policy_grant_matches(g, &h);
	/*@ assert literal_never_matches_suffix: r == 0; */
	policy_grant_free(g);
	return r;
}
