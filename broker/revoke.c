/* SPDX-License-Identifier: ISC */
/*
 * A connection decided again against a new snapshot (see revoke.h).
 */
#include <stddef.h>
#include <string.h>

#include "broker/broker.h"
#include "broker/net/decide.h"
#include "broker/revoke.h"
#include "broker/tlsprof.h"
#include "conf/conf.h"
#include "policy/policy.h"

struct revoke_policy {
	struct broker *b;
	const struct conf_snapshot *s;
	const char *instance;
};

static int
revoke_policy(void *arg, int answers, struct decide_policy *ret)
{
	const struct revoke_policy *p = arg;
	const struct conf_instance *ci = conf_instance_find(p->s, p->instance);

	ret->instance = ci != NULL ? &ci->policy : NULL;
	ret->nat64 = &p->s->nat64;
	return broker_own_addrs(p->b, ret);
}

int
revoke_is_allowed(struct broker *b, const struct conf_snapshot *s,
    const char *instance, enum policy_transport transport,
    const struct policy_dest *dest, const struct policy_addr *connected,
    const char *tls_profile, const char **ret_reason)
{
	static struct decide d; /* large: single-threaded scratch */
	const struct decide_result *res;
	struct revoke_policy pol;
	struct decide_lookup lk;

	if (s == NULL) {
		/* The configuration broke: nothing is allowed. */
		*ret_reason = "policy-unavailable";
		return 0;
	}
	pol.b = b;
	pol.s = s;
	pol.instance = instance;
	memset(&lk, 0, sizeof(lk));
	lk.answers = connected;
	lk.nanswers = 1;
	/* Given answers: decided at once, never a lookup. */
	if (!decide_run(&d, transport, dest, revoke_policy, &pol, &lk, NULL,
		NULL)) {
		decide_cancel(&d);
		*ret_reason = "policy-unavailable";
		return 0;
	}
	res = decide_result(&d);
	if (res->allow && tls_profile != NULL &&
	    tlsprof_check(s, conf_instance_find(s, instance), tls_profile,
		strlen(tls_profile)) != 0) {
		*ret_reason = TLSPROF_REASON_NOT_ALLOWED;
		return 0;
	}
	if (res->allow)
		return 1;
	*ret_reason = res->reason != NULL ?
	    res->reason :
	    "invalid-destination";
	return 0;
}
