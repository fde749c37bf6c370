/* SPDX-License-Identifier: ISC */
/*
 * EVA harness: policy_addr_parse() on every NUL-terminated text of up to
 * 63 bytes of any content (it reads at most 46), and policy_addr_format()
 * on any address of any family into a buffer of any size up to 64.
 * prove: sources policy/addr.c policy/inet.c
 */
#include "__fc_builtin.h"

#include "policy/policy.h"

static char text[64];
static char out[64];

int
main(void)
{
	struct policy_addr a;
	size_t n = Frama_C_size_t_interval(1, sizeof(out));

	Frama_C_make_unknown(text, sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	if (policy_addr_parse(text, &a) == 0)
		(void)policy_addr_format(&a, out, n);
	Frama_C_make_unknown((char *)&a, sizeof(a));
	(void)policy_addr_format(&a, out, n);
	return 0;
}
