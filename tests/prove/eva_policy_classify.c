/* SPDX-License-Identifier: ISC */
/*
 * EVA harness: policy_addr_classify() on any address (any family value,
 * any bytes) with a NULL context, and with a context holding a declared
 * NAT64 list of any content (n up to POLICY_NAT64_MAX, prefix lengths of
 * any value), up to 16 local addresses and up to 16 local nets of any
 * content (any length, sorted or not).
 * prove: sources policy/classify.c policy/nat64.c policy/addr.c policy/inet.c
 */
#include "__fc_builtin.h"

#include "policy/policy.h"

#define LOCAL_MAX 16

static struct policy_nat64_list list;
static struct policy_addr local[LOCAL_MAX];
static struct policy_net nets[LOCAL_MAX];

int
main(void)
{
	struct policy_classify_ctx ctx;
	struct policy_addr a;

	Frama_C_make_unknown((char *)&a, sizeof(a));
	(void)policy_addr_classify(NULL, &a);
	(void)policy_addr_classify(NULL, NULL);

	Frama_C_make_unknown((char *)&list, sizeof(list));
	list.n = Frama_C_size_t_interval(0, POLICY_NAT64_MAX);
	Frama_C_make_unknown((char *)local, sizeof(local));
	ctx.nat64 = &list;
	ctx.local = local;
	ctx.nlocal = Frama_C_size_t_interval(0, LOCAL_MAX);
	Frama_C_make_unknown((char *)nets, sizeof(nets));
	ctx.nets = nets;
	ctx.nnets = Frama_C_size_t_interval(0, LOCAL_MAX);
	(void)policy_addr_classify(&ctx, &a);
	return 0;
}
