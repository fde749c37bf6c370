/* SPDX-License-Identifier: ISC */
/*
 * EVA harness: policy_url_parse() on every text of 0 to POLICY_URL_MAX
 * bytes of any content, with and without reterr.
 * prove: sources policy/url.c policy/host.c policy/inet.c
 */
#include "__fc_builtin.h"

#include "policy/policy.h"

static char text[POLICY_URL_MAX];

int
main(void)
{
	struct policy_dest d;
	struct policy_err err;
	size_t len = Frama_C_size_t_interval(0, sizeof(text));

	Frama_C_make_unknown(text, sizeof(text));
	(void)policy_url_parse(text, len, &d, &err);
	(void)policy_url_parse(text, len, &d, NULL);
	return 0;
}
