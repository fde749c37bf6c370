/* SPDX-License-Identifier: ISC */
/*
 * EVA harness: policy_hostport_parse() and policy_authority_parse() on
 * every text of 0 to PROTO_AUTHORITY_MAX bytes
 * of any content (the longest authority a REQUEST carries), with any
 * default port.
 * prove: sources policy/url.c policy/host.c policy/inet.c
 */
#include "__fc_builtin.h"

#include "policy/policy.h"
#include "proto/proto.h"

static char text[PROTO_AUTHORITY_MAX];

int
main(void)
{
	struct policy_dest d;
	struct policy_err err;
	size_t len = Frama_C_size_t_interval(0, sizeof(text));
	uint16_t port = Frama_C_unsigned_short_interval(0, 65535);

	Frama_C_make_unknown(text, sizeof(text));
	(void)policy_hostport_parse(text, len, &d, &err);
	(void)policy_authority_parse(text, len, port, &d, &err);
	(void)policy_authority_parse(text, len, port, &d, NULL);
	return 0;
}
