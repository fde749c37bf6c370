/* SPDX-License-Identifier: ISC */
/*
 * The verdict: may this instance reach that destination. Checks run in the
 * documented order and the first failure wins (docs/policy.md): instance,
 * manifest, permission, grant, declaration, local-by-nature names, then
 * over the resolved answers metadata, reserved, loopback, private and
 * mixed zones. Loopback (with this host's own addresses) and private are
 * separate classes, each re-opened only by its own carve-out.
 * A deny is not an error: both entry points return 0 with the reason in
 * the verdict, and fail only on arguments that break the contract.
 */
#include <string.h>

#include "policy/policy.h"

static const char *const reason_names[] = {
	[POLICY_REASON_ALLOW] = "allow",
	[POLICY_REASON_INVALID_DESTINATION] = "invalid-destination",
	[POLICY_REASON_UNKNOWN_INSTANCE] = "unknown-instance",
	[POLICY_REASON_MANIFEST_REFUSED] = "manifest-refused",
	[POLICY_REASON_NO_PERMISSION] = "no-permission",
	[POLICY_REASON_NOT_GRANTED] = "not-granted",
	[POLICY_REASON_NOT_DECLARED] = "not-declared",
	[POLICY_REASON_PRIVATE_ADDRESS] = "private-address",
	[POLICY_REASON_UNRESOLVABLE] = "unresolvable",
	[POLICY_REASON_METADATA] = "metadata",
	[POLICY_REASON_RESERVED_ADDRESS] = "reserved-address",
	[POLICY_REASON_MIXED_ZONES] = "mixed-zones",
	[POLICY_REASON_LOOPBACK_ADDRESS] = "loopback-address",
};

const char *
policy_reason_str(enum policy_reason r)
{
	if ((unsigned)r >= sizeof(reason_names) / sizeof(reason_names[0]) ||
	    reason_names[r] == NULL)
		return "unknown";
	return reason_names[r];
}

static int
host_is_valid(const struct policy_host *h)
{
	return h->kind == POLICY_HOST_NAME || h->kind == POLICY_HOST_IPV4 ||
	    h->kind == POLICY_HOST_IPV6;
}

static void
verdict_set(struct policy_verdict *ret, enum policy_reason reason)
{
	ret->reason = reason;
	ret->need_resolve = 0;
	ret->naddrs = 0;
}

int
policy_host_is_loopback_name(const struct policy_host *h)
{
	static const char lh[] = "localhost";
	size_t n, m = sizeof(lh) - 1;

	if (h == NULL || h->kind != POLICY_HOST_NAME)
		return 0;
	n = strnlen(h->name, sizeof(h->name));
	return (n == m && memcmp(h->name, lh, m) == 0) ||
	    (n > m && h->name[n - m - 1] == '.' &&
		memcmp(h->name + n - m, lh, m) == 0);
}

/*
 * Step 6: a name local by nature needs a carve-out before any lookup:
 * localhost names the loopback one, the others either (their answers
 * are then checked class by class).
 */
static enum policy_reason
check_local_name(const struct policy_instance *inst,
    const struct policy_host *h)
{
	int lo;

	if (!policy_host_is_local_name(h))
		return POLICY_REASON_ALLOW;
	lo = policy_grant_matches(inst->allow_loopback, h);
	if (policy_host_is_loopback_name(h))
		return lo ? POLICY_REASON_ALLOW :
			    POLICY_REASON_LOOPBACK_ADDRESS;
	if (!lo && !policy_grant_matches(inst->allow_private, h))
		return POLICY_REASON_PRIVATE_ADDRESS;
	return POLICY_REASON_ALLOW;
}

/*
 * The transport-independent steps 2, 2b, 4, 5 and 6. Return the first
 * failing reason, or POLICY_REASON_ALLOW.
 */
static enum policy_reason
check_host(const struct policy_instance *inst, const struct policy_host *h)
{
	if (inst == NULL)
		return POLICY_REASON_UNKNOWN_INSTANCE;
	if (!inst->manifest_ok)
		return POLICY_REASON_MANIFEST_REFUSED;
	if (!policy_grant_matches(inst->hosts, h))
		return POLICY_REASON_NOT_GRANTED;
	/* Intersection: a manifest with neither hosts nor operator_defined
	 * has an empty declared set, which matches nothing. */
	if (!inst->operator_defined &&
	    !policy_grant_matches(inst->declared, h))
		return POLICY_REASON_NOT_DECLARED;
	return check_local_name(inst, h);
}

int
policy_check_destination(const struct policy_instance *inst,
    enum policy_transport transport, const struct policy_dest *dest,
    struct policy_verdict *ret)
{
	enum policy_reason reason;
	unsigned need;

	if (dest == NULL || ret == NULL || !host_is_valid(&dest->host))
		return EGRESS_ERR_INVALID;
	if ((need = policy_transport_permission(transport)) == 0)
		return EGRESS_ERR_INVALID;

	if (inst == NULL) {
		verdict_set(ret, POLICY_REASON_UNKNOWN_INSTANCE);
		return 0;
	}
	if (!inst->manifest_ok) {
		verdict_set(ret, POLICY_REASON_MANIFEST_REFUSED);
		return 0;
	}
	if ((inst->permissions & need) != need) {
		verdict_set(ret, POLICY_REASON_NO_PERMISSION);
		return 0;
	}
	reason = check_host(inst, &dest->host);
	verdict_set(ret, reason);
	if (reason == POLICY_REASON_ALLOW)
		ret->need_resolve = dest->host.kind == POLICY_HOST_NAME;
	return 0;
}

static int
addr_equal(const struct policy_addr *a, const struct policy_addr *b)
{
	if (a->family != b->family)
		return 0;
	return memcmp(a->bytes, b->bytes, a->family == 4 ? 4 : 16) == 0;
}

/* Answer whether answer is exactly the IP-literal host h. */
static int
answer_is_literal(const struct policy_host *h, const struct policy_addr *a)
{
	if (h->kind == POLICY_HOST_IPV4)
		return a->family == 4 && memcmp(a->bytes, h->addr, 4) == 0;
	return a->family == 6 && memcmp(a->bytes, h->addr, 16) == 0;
}

int
policy_check_answers(const struct policy_instance *inst,
    const struct policy_dest *dest, const struct policy_addr *answers,
    size_t n, const struct policy_classify_ctx *ctx,
    struct policy_verdict *ret)
{
	const struct policy_host *h;
	enum policy_reason reason;
	unsigned mask = 0;
	size_t i, j, k;
	int carved, carved_lo, local_name;

	if (dest == NULL || ret == NULL || !host_is_valid(&dest->host) ||
	    (answers == NULL && n > 0))
		return EGRESS_ERR_INVALID;
	if (n > POLICY_ANSWERS_MAX)
		return EGRESS_ERR_TOO_BIG;
	for (i = 0; i < n; i++)
		if (answers[i].family != 4 && answers[i].family != 6)
			return EGRESS_ERR_INVALID;
	h = &dest->host;
	/* An IP literal is its own answer; anything else is a caller bug. */
	if (h->kind != POLICY_HOST_NAME &&
	    (n != 1 || !answer_is_literal(h, &answers[0])))
		return EGRESS_ERR_INVALID;

	/* Defence in depth: the transport-independent steps again, so that
	 * a caller that skipped policy_check_destination still fails closed.
	 * They are constant-time and agree with the first call. */
	if ((reason = check_host(inst, h)) != POLICY_REASON_ALLOW) {
		verdict_set(ret, reason);
		return 0;
	}

	if (n == 0) {
		verdict_set(ret, POLICY_REASON_UNRESOLVABLE);
		return 0;
	}
	for (i = 0; i < n; i++)
		mask |= policy_addr_classify(ctx, &answers[i]);

	carved = policy_grant_matches(inst->allow_private, h);
	carved_lo = policy_grant_matches(inst->allow_loopback, h);
	local_name = policy_host_is_local_name(h);
	/* Each non-public class needs its own carve-out; public answers
	 * beside any non-public one (or for a local name) are mixed. */
	if (mask & POLICY_CLASS_METADATA)
		reason = POLICY_REASON_METADATA;
	else if (mask & POLICY_CLASS_RESERVED)
		reason = POLICY_REASON_RESERVED_ADDRESS;
	else if (!carved_lo && (mask & POLICY_CLASS_LOOPBACK))
		reason = POLICY_REASON_LOOPBACK_ADDRESS;
	else if (!carved && (mask & POLICY_CLASS_PRIVATE))
		reason = POLICY_REASON_PRIVATE_ADDRESS;
	else if ((carved || carved_lo) && (mask & POLICY_CLASS_PUBLIC) &&
	    ((mask & (POLICY_CLASS_PRIVATE | POLICY_CLASS_LOOPBACK)) ||
		local_name))
		reason = POLICY_REASON_MIXED_ZONES;
	else if ((mask &
		     ~(POLICY_CLASS_PUBLIC | POLICY_CLASS_PRIVATE |
			 POLICY_CLASS_LOOPBACK)) != 0 ||
	    mask == 0)
		reason = POLICY_REASON_RESERVED_ADDRESS; /* unknown bit */
	else
		reason = POLICY_REASON_ALLOW;
	verdict_set(ret, reason);
	if (reason != POLICY_REASON_ALLOW)
		return 0;

	/* Each answer at its first occurrence, in resolver order: a repeat
	 * is found among the answers before it, which are the caller's input
	 * and all read, rather than among the ones written so far. */
	for (i = 0; i < n; i++) {
		for (j = 0; j < i; j++)
			if (addr_equal(&answers[j], &answers[i]))
				break;
		if (j < i)
			continue;
		k = ret->naddrs;
		if (k >= POLICY_ANSWERS_MAX) /* never: n is at most that */
			break;
		memset(&ret->addrs[k], 0, sizeof(ret->addrs[k]));
		ret->addrs[k].family = answers[i].family;
		memcpy(ret->addrs[k].bytes, answers[i].bytes,
		    answers[i].family == 4 ? 4 : 16);
		ret->naddrs = k + 1;
	}
	return 0;
}
