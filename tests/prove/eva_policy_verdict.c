/* SPDX-License-Identifier: ISC */
/*
 * EVA harness: policy_check_destination() and policy_check_answers() on
 * an instance of any flags and permissions (or NULL) whose four grant
 * sets (hosts, allow_private, allow_loopback, declared) are each NULL, an
 * empty set or a
 * set built by policy_grant_add() from one entry of any bytes; a
 * destination of any bytes (any host kind value, name and address bytes,
 * port, path); any transport value; 0 to POLICY_ANSWERS_MAX + 1 answers
 * of any bytes (and NULL); a NULL classification context or one with a
 * NAT64 list of any content, 0 to 4 local addresses and 0 to 4 local
 * nets (routes) of any content.
 * Allocations succeed and are fresh objects, as in the grant harness.
 * prove: sources policy/verdict.c policy/grant.c policy/entry.c policy/url.c policy/host.c policy/inet.c policy/classify.c policy/nat64.c policy/addr.c
 * prove: options -eva-alloc-builtin fresh -eva-no-alloc-returns-null
 */
#include "__fc_builtin.h"

#include "policy/policy.h"

#define LOCAL_MAX 4

static struct policy_addr answers[POLICY_ANSWERS_MAX + 1];
static struct policy_nat64_list list;
static struct policy_addr local[LOCAL_MAX];
static struct policy_net nets[LOCAL_MAX];

static const struct policy_grant *
any_set(const struct policy_grant *empty, const struct policy_grant *one)
{
	switch (Frama_C_interval(0, 2)) {
	case 0:
		return NULL;
	case 1:
		return empty;
	default:
		return one;
	}
}

int
main(void)
{
	struct policy_grant *empty, *one;
	struct policy_instance inst;
	struct policy_classify_ctx ctx;
	struct policy_entry e;
	struct policy_dest d;
	struct policy_verdict v;
	const struct policy_instance *ip;
	const struct policy_classify_ctx *cp;
	enum policy_transport t;
	size_t n;

	if ((empty = policy_grant_new()) == NULL ||
	    (one = policy_grant_new()) == NULL)
		return 0;
	Frama_C_make_unknown((char *)&e, sizeof(e));
	(void)policy_grant_add(one, &e);

	Frama_C_make_unknown((char *)&inst, sizeof(inst));
	inst.name = "i";
	inst.hosts = any_set(empty, one);
	inst.allow_private = any_set(empty, one);
	inst.allow_loopback = any_set(empty, one);
	inst.declared = any_set(empty, one);
	ip = Frama_C_nondet(0, 1) ? &inst : NULL;

	Frama_C_make_unknown((char *)&d, sizeof(d));
	t = (enum policy_transport)Frama_C_interval(-1, 5);
	(void)policy_check_destination(ip, t, &d, &v);
	(void)policy_check_destination(ip, t, NULL, &v);
	(void)policy_check_destination(ip, t, &d, NULL);

	Frama_C_make_unknown((char *)answers, sizeof(answers));
	Frama_C_make_unknown((char *)&list, sizeof(list));
	list.n = Frama_C_size_t_interval(0, POLICY_NAT64_MAX);
	Frama_C_make_unknown((char *)local, sizeof(local));
	ctx.nat64 = &list;
	ctx.local = local;
	ctx.nlocal = Frama_C_size_t_interval(0, LOCAL_MAX);
	Frama_C_make_unknown((char *)nets, sizeof(nets));
	ctx.nets = nets;
	ctx.nnets = Frama_C_size_t_interval(0, LOCAL_MAX);
	cp = Frama_C_nondet(0, 1) ? &ctx : NULL;
	n = Frama_C_size_t_interval(0, POLICY_ANSWERS_MAX + 1);
	(void)policy_check_answers(ip, &d, answers, n, cp, &v);
	(void)policy_check_answers(ip, &d, NULL, n, cp, &v);
	(void)policy_check_answers(ip, NULL, answers, n, cp, &v);
	return 0;
}
