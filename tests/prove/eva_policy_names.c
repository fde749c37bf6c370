/* SPDX-License-Identifier: ISC */
/*
 * EVA harness: the name tables of policy/: policy_permission_parse() on
 * any text of 0 to 64 bytes, policy_transport_parse() on any
 * NUL-terminated text of up to 63 bytes (and NULL), and
 * policy_permission_name(), policy_transport_name(),
 * policy_transport_permission() and policy_reason_str() on any value.
 * prove: sources policy/entry.c policy/verdict.c policy/url.c policy/host.c policy/inet.c policy/grant.c policy/classify.c policy/nat64.c policy/addr.c
 */
#include "__fc_builtin.h"

#include "policy/policy.h"

static char text[64];

int
main(void)
{
	size_t len = Frama_C_size_t_interval(0, sizeof(text));
	int any = Frama_C_interval(-2147483647 - 1, 2147483647);

	Frama_C_make_unknown(text, sizeof(text));
	(void)policy_permission_parse(text, len);
	(void)policy_permission_parse(NULL, len);
	text[sizeof(text) - 1] = '\0';
	(void)policy_transport_parse(text);
	(void)policy_transport_parse(NULL);
	(void)policy_permission_name((unsigned)any);
	(void)policy_transport_name((enum policy_transport)any);
	(void)policy_transport_permission((enum policy_transport)any);
	(void)policy_reason_str((enum policy_reason)any);
	return 0;
}
