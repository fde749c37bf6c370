/* SPDX-License-Identifier: ISC */
/*
 * EVA harness: policy_nat64_parse_list() on 0 to POLICY_NAT64_MAX + 1
 * items, each NULL or a NUL-terminated text of up to ITEM_LEN bytes of any
 * content (twice the longest item that can be valid), with and without
 * reterr.
 * prove: sources policy/nat64.c policy/addr.c policy/inet.c
 */
#include "__fc_builtin.h"

#include "policy/policy.h"

#define ITEM_LEN 128
#define ITEMS	 (POLICY_NAT64_MAX + 1)

static char text[ITEMS][ITEM_LEN + 1];
static const char *items[ITEMS];
static struct policy_nat64_list list;

int
main(void)
{
	struct policy_err err;
	size_t i, n = Frama_C_size_t_interval(0, ITEMS);

	for (i = 0; i < ITEMS; i++) {
		Frama_C_make_unknown(text[i], ITEM_LEN);
		text[i][ITEM_LEN] = '\0';
		items[i] = Frama_C_nondet_ptr(text[i], NULL);
	}
	(void)policy_nat64_parse_list(items, n, &list, &err);
	(void)policy_nat64_parse_list(items, n, &list, NULL);
	(void)policy_nat64_parse_list(NULL, n, &list, &err);
	return 0;
}
