/* SPDX-License-Identifier: ISC */
/*
 * The one destination decision (see decide.h): the destination check,
 * exactly one resolution, the answer check against the policy in force
 * when the answers are there.
 */
#include <string.h>

#include <event2/event.h>

#include <egress/error.h>

#include "broker/net/decide.h"
#include "broker/net/dns.h"
#include "policy/policy.h"

static void
decide_deny(struct decide *d, const char *reason, int error)
{
	d->verdict.naddrs = 0;
	d->res.allow = 0;
	d->res.reason = reason;
	d->res.error = error;
}

static void
decide_deny_reason(struct decide *d, enum policy_reason reason)
{
	decide_deny(d, policy_reason_str(reason),
	    reason == POLICY_REASON_UNRESOLVABLE ? EGRESS_ERR_DNS_FAILED :
						   EGRESS_ERR_DENIED);
}

/*
 * The destination step, against the policy in force now. Return 1 when
 * it allowed, 0 when the decision is over (a deny or invalid).
 */
static int
decide_destination(struct decide *d, int answers, struct decide_policy *pol)
{
	int err;

	memset(pol, 0, sizeof(*pol));
	if (d->policy(d->policy_arg, answers, pol) != 0) {
		decide_deny(d, "policy-unavailable", EGRESS_ERR_UNAVAILABLE);
		return 0;
	}
	err = policy_check_destination(pol->instance, d->transport, d->dest,
	    &d->verdict);
	if (err != 0) {
		d->res.invalid = 1;
		decide_deny(d,
		    policy_reason_str(POLICY_REASON_INVALID_DESTINATION),
		    EGRESS_ERR_INVALID);
		return 0;
	}
	if (d->verdict.reason != POLICY_REASON_ALLOW) {
		decide_deny_reason(d, d->verdict.reason);
		return 0;
	}
	return 1;
}

/* Classify the answer set held in d->answers and finish. */
static void
decide_answers(struct decide *d, const struct decide_policy *pol)
{
	struct policy_classify_ctx ctx;

	ctx.nat64 = pol->nat64;
	ctx.local = pol->local;
	ctx.nlocal = pol->nlocal;
	ctx.nets = pol->nets;
	ctx.nnets = pol->nnets;
	if (policy_check_answers(pol->instance, d->dest, d->answers,
		d->res.nanswers, &ctx, &d->verdict) != 0) {
		/* More answers than considered: no verdict, no reach. */
		d->verdict.naddrs = 0;
		decide_deny_reason(d, POLICY_REASON_UNRESOLVABLE);
		return;
	}
	if (d->verdict.reason != POLICY_REASON_ALLOW) {
		decide_deny_reason(d, d->verdict.reason);
		return;
	}
	d->res.allow = 1;
	d->res.reason = NULL;
	d->res.error = 0;
}

/* Take n answers into d; more than the policy considers is no answer. */
static int
decide_take(struct decide *d, const struct policy_addr *addrs, size_t n)
{
	if (n > POLICY_ANSWERS_MAX)
		return -1;
	if (n > 0)
		memcpy(d->answers, addrs, n * sizeof(*addrs));
	d->res.nanswers = n;
	return 0;
}

/*
 * The answers of the lookup are there: the configuration may have
 * changed while it was out, so decide again, both steps, against the
 * policy in force now.
 */
static void
decide_arrived(struct decide *d, enum dns_status status,
    const struct policy_addr *addrs, size_t n)
{
	struct decide_policy pol;

	d->res.dns = status;
	if (status != DNS_OK)
		n = 0; /* no answer: unresolvable */
	if (decide_destination(d, 1, &pol)) {
		if (decide_take(d, addrs, n) != 0)
			decide_deny_reason(d, POLICY_REASON_UNRESOLVABLE);
		else
			decide_answers(d, &pol);
	}
}

static void
decide_dns_cb(void *arg, enum dns_status status,
    const struct policy_addr *addrs, size_t n)
{
	struct decide *d = arg;

	d->q = NULL;
	decide_arrived(d, status, addrs, n);
	d->cb(d->cb_arg, &d->res);
}

/* Start d: reset its outcome and check the destination against the
 * policy now. Return 1 when that allowed, 0 when the decision is over. */
static int
decide_start(struct decide *d, enum policy_transport transport,
    const struct policy_dest *dest, decide_policy_fn policy_fn,
    void *policy_arg, struct decide_policy *pol)
{
	memset(&d->res, 0, sizeof(d->res));
	d->dest = dest;
	d->transport = transport;
	d->policy = policy_fn;
	d->policy_arg = policy_arg;
	d->cb = NULL;
	d->cb_arg = NULL;
	d->q = NULL;
	d->verdict.naddrs = 0;
	d->res.verdict = &d->verdict;
	d->res.answers = d->answers;
	d->res.dns = DNS_OK;
	return decide_destination(d, 0, pol);
}

/* An IP literal is its own answer: decide it against pol at once. */
static void
decide_literal(struct decide *d, const struct decide_policy *pol)
{
	const struct policy_host *h = &d->dest->host;

	memset(&d->answers[0], 0, sizeof(d->answers[0]));
	d->answers[0].family = h->kind == POLICY_HOST_IPV4 ? 4 : 6;
	memcpy(d->answers[0].bytes, h->addr,
	    d->answers[0].family == 4 ? 4 : 16);
	d->res.nanswers = 1;
	decide_answers(d, pol);
}

int
decide_run_answered(struct decide *d, enum policy_transport transport,
    const struct policy_dest *dest, decide_policy_fn policy_fn,
    void *policy_arg, enum dns_status status, const struct policy_addr *addrs,
    size_t n)
{
	struct decide_policy pol;

	if (!decide_start(d, transport, dest, policy_fn, policy_arg, &pol))
		return 1;
	if (!d->verdict.need_resolve) {
		decide_literal(d, &pol);
		return 1;
	}
	d->res.resolved = 1;
	decide_arrived(d, status, addrs, n);
	return 1;
}

int
decide_run(struct decide *d, enum policy_transport transport,
    const struct policy_dest *dest, decide_policy_fn policy_fn,
    void *policy_arg, const struct decide_lookup *lookup, decide_cb cb,
    void *cb_arg)
{
	const struct policy_host *h = &dest->host;
	struct decide_policy pol;
	int err;

	if (!decide_start(d, transport, dest, policy_fn, policy_arg, &pol))
		return 1;
	d->cb = cb;
	d->cb_arg = cb_arg;

	/* An IP literal is its own answer; given answers stand for the
	 * lookup. */
	if (!d->verdict.need_resolve) {
		decide_literal(d, &pol);
		return 1;
	}
	/*
	 * A localhost name is answered here, never asked (RFC 6761 6.3): no
	 * DNS server decides where "localhost" is. Given answers do not
	 * stand for it either.
	 */
	if (policy_host_is_loopback_name(h)) {
		memset(d->answers, 0, 2 * sizeof(d->answers[0]));
		d->answers[0].family = 4;
		d->answers[0].bytes[0] = 127;
		d->answers[0].bytes[3] = 1;
		d->answers[1].family = 6;
		d->answers[1].bytes[15] = 1;
		d->res.nanswers = 2;
		decide_answers(d, &pol);
		return 1;
	}
	if (lookup->answers != NULL) {
		if (decide_take(d, lookup->answers, lookup->nanswers) != 0)
			decide_deny_reason(d, POLICY_REASON_UNRESOLVABLE);
		else
			decide_answers(d, &pol);
		return 1;
	}
	if (lookup->resolver == NULL) {
		decide_deny_reason(d, POLICY_REASON_UNRESOLVABLE);
		return 1;
	}
	/*
	 * A fair share of the resolver: one tag may keep at most tag_max
	 * lookups outstanding (cancelled ones count until c-ares is done
	 * with them), so it cannot exhaust DNS_PENDING_MAX for the others.
	 */
	if (lookup->tag_max != 0 &&
	    dns_resolver_outstanding_tag(lookup->resolver, lookup->tag) >=
		lookup->tag_max) {
		decide_deny(d, "budget-exhausted",
		    EGRESS_ERR_BUDGET_EXHAUSTED);
		return 1;
	}
	d->res.resolved = 1;
	err = dns_resolve_tagged(lookup->resolver, lookup->tag, h->name,
	    decide_dns_cb, d, &d->q);
	if (err == EGRESS_ERR_BUDGET_EXHAUSTED) {
		/* The tag's fair share of the resolver is used up. */
		d->q = NULL;
		d->res.resolved = 0;
		decide_deny(d, "budget-exhausted",
		    EGRESS_ERR_BUDGET_EXHAUSTED);
		return 1;
	}
	if (err != 0) {
		/* Too many lookups pending, or no memory: no answer. */
		d->q = NULL;
		d->res.dns = DNS_ERROR;
		decide_deny_reason(d, POLICY_REASON_UNRESOLVABLE);
		return 1;
	}
	return 0;
}

static void
decide_sync_cb(void *arg, const struct decide_result *res)
{
	int *finished = arg;

	*finished = 1;
}

int
decide_run_sync(struct decide *d, enum policy_transport transport,
    const struct policy_dest *dest, decide_policy_fn policy_fn,
    void *policy_arg, const char *const *servers, size_t nservers,
    int timeout_ms, const struct policy_addr *answers, size_t nanswers)
{
	struct event_base *base = NULL;
	struct decide_lookup lk;
	int finished = 0, rc = 0;

	memset(&lk, 0, sizeof(lk));
	lk.answers = answers;
	lk.nanswers = nanswers;
	if (answers == NULL) {
		if ((base = event_base_new()) == NULL)
			return EGRESS_ERR_NOMEM;
		rc = dns_resolver_new(base, servers, nservers, timeout_ms,
		    &lk.resolver);
		if (rc != 0) {
			event_base_free(base);
			return rc;
		}
	}
	if (decide_run(d, transport, dest, policy_fn, policy_arg, &lk,
		decide_sync_cb, &finished) == 0)
		while (!finished)
			if (event_base_loop(base, EVLOOP_ONCE) == -1) {
				decide_cancel(d);
				rc = EGRESS_ERR_IO;
				break;
			}
	dns_resolver_free(lk.resolver);
	if (base != NULL)
		event_base_free(base);
	return rc;
}

const struct decide_result *
decide_result(const struct decide *d)
{
	return &d->res;
}

int
decide_is_pending(const struct decide *d)
{
	return d->q != NULL;
}

void
decide_cancel(struct decide *d)
{
	if (d->q == NULL)
		return;
	dns_query_cancel(d->q);
	d->q = NULL;
}
