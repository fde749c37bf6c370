/* SPDX-License-Identifier: ISC */
/*
 * EVA harness (long: about 13 minutes of CPU, so scripts/prove does not
 * run it): policy_check_destination() and policy_check_answers() with
 * grant sets of any size and content. The verdict reaches a grant set
 * only through policy_grant_matches(), so policy/grant.c is left out and
 * EVA uses that function's ACSL contract (policy/policy.h: it reads the
 * host, writes nothing, answers 0 or 1) instead of its body: every call
 * checks the contract's precondition, and every answer, 0 or 1, is
 * followed. The instance's four sets are each NULL or one of two opaque
 * sets (never dereferenced here); the rest of the domain is that of
 * eva_policy_verdict.c. Together with the grant harnesses (which analyse
 * policy_grant_matches() itself, and check its contract on sets they
 * build), this covers the verdict for sets of any size, up to what those
 * harnesses cover of grant.c.
 * prove: sources policy/verdict.c policy/entry.c policy/url.c policy/host.c policy/inet.c policy/classify.c policy/nat64.c policy/addr.c
 */
#include "__fc_builtin.h"

#include "policy/policy.h"

#define LOCAL_MAX 4

static struct policy_addr answers[POLICY_ANSWERS_MAX + 1];
static struct policy_nat64_list list;
static struct policy_addr local[LOCAL_MAX];
static struct policy_net nets[LOCAL_MAX];
static char set_a, set_b; /* stand-ins: the verdict never reads a set */

static const struct policy_grant *
any_set(void)
{
	switch (Frama_C_interval(0, 2)) {
	case 0:
		return NULL;
	case 1:
		return (const struct policy_grant *)(const void *)&set_a;
	default:
		return (const struct policy_grant *)(const void *)&set_b;
	}
}

int
main(void)
{
	struct policy_instance inst;
	struct policy_classify_ctx ctx;
	struct policy_dest d;
	struct policy_verdict v;
	const struct policy_classify_ctx *cp;
	enum policy_transport t;
	size_t n;

	Frama_C_make_unknown((char *)&inst, sizeof(inst));
	inst.name = "i";
	inst.hosts = any_set();
	inst.allow_private = any_set();
	inst.allow_loopback = any_set();
	inst.declared = any_set();

	Frama_C_make_unknown((char *)&d, sizeof(d));
	t = (enum policy_transport)Frama_C_interval(-1, 5);
	/* The instance and NULL are separate calls: EVA would otherwise
	 * merge the two and lose that a verdict past the instance check
	 * has one. */
	(void)policy_check_destination(&inst, t, &d, &v);
	(void)policy_check_destination(NULL, t, &d, &v);
	(void)policy_check_destination(&inst, t, NULL, &v);
	(void)policy_check_destination(&inst, t, &d, NULL);

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
	(void)policy_check_answers(&inst, &d, answers, n, cp, &v);
	(void)policy_check_answers(NULL, &d, answers, n, cp, &v);
	(void)policy_check_answers(&inst, &d, NULL, n, cp, &v);
	(void)policy_check_answers(&inst, NULL, answers, n, cp, &v);
	return 0;
}
