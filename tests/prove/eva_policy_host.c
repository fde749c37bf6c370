/* SPDX-License-Identifier: ISC */
/*
 * EVA harness: policy_host_parse() on every text of 0 to
 * PROTO_AUTHORITY_MAX bytes of any content (the longest authority a guest
 * can send), with and without an error buffer, then
 * policy_host_is_local_name() on what it produced.
 * prove: sources policy/host.c policy/inet.c
 */
#include "__fc_builtin.h"

#include "policy/policy.h"
#include "proto/proto.h"

static char text[PROTO_AUTHORITY_MAX];

int
main(void)
{
	struct policy_host h;
	struct policy_err err;
	size_t len = Frama_C_size_t_interval(0, sizeof(text));

	Frama_C_make_unknown(text, sizeof(text));
	Frama_C_make_unknown((char *)&h, sizeof(h));
	if (policy_host_parse(text, len, &h, &err) == 0)
		(void)policy_host_is_local_name(&h);
	(void)policy_host_parse(text, len, &h, NULL);
	return 0;
}
