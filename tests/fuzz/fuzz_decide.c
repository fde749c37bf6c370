/* SPDX-License-Identifier: ISC */
/*
 * Fuzz target for the decision that is made twice: a destination checked
 * against the policy in force when its lookup started, and its answers
 * checked when they arrive, after the configuration may have changed
 * (decide_run_answered(), the path of a pending lookup's callback). The
 * input builds two policies for one instance, the old (at the start) and
 * the new (at arrival; or none, or a broken configuration), a
 * destination and an answer set. The invariant: the decision allows only
 * what the new policy allows on its own (destination and every answer,
 * the same validated set), and only when the old one let the lookup
 * start; a broken configuration at arrival is policy-unavailable. An IP
 * literal has no lookup and is decided once, against the old policy.
 *
 * Input: byte 0 flags (bit 0 old instance exists, 1 new exists, 2 the
 * configuration is broken at arrival, 3 old manifest ok, 4 new manifest
 * ok, 5 the lookup failed, 6-7 transport), byte 1 permissions (bits 0-2
 * old, 3-5 new), byte 2 the answer count (mod 20), then each answer as a
 * family byte (even: IPv4, 4 bytes; odd: IPv6, 16 bytes), then text
 * lines: the destination first, then grant entries prefixed "h:" (old
 * egress_hosts), "p:" (old egress_allow_private), "d:" (old declared),
 * and "H:", "P:", "D:" for the new policy.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <egress/error.h>

#include "broker/net/decide.h"
#include "broker/net/dns.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_ANSWERS_MAX 20

static int
fake_psl(void *ctx, const char *domain)
{
	static const char *const list[] = { "com", "net", "org", "test",
		"co.uk", "arpa" };
	size_t i;

	(void)ctx;
	for (i = 0; i < sizeof(list) / sizeof(list[0]); i++)
		if (strcmp(list[i], domain) == 0)
			return 1;
	return 0;
}

/* One policy: its instance and its three grant sets. */
struct fz_pol {
	struct policy_instance inst;
	struct policy_grant *g[3]; /* hosts, allow_private, declared */
};

/* What the decision is shown at each step. */
struct fz_ctx {
	const struct fz_pol *old, *new; /* NULL: no instance */
	int broken;			/* at arrival */
	struct policy_nat64_list nat64;
	int calls, calls_answers;
};

static int
fz_policy(void *arg, int answers, struct decide_policy *ret)
{
	struct fz_ctx *c = arg;
	const struct fz_pol *p;

	c->calls++;
	if (answers) {
		c->calls_answers++;
		if (c->broken)
			return EGRESS_ERR_INVALID;
	}
	p = answers ? c->new : c->old;
	ret->instance = p != NULL ? &p->inst : NULL;
	ret->nat64 = &c->nat64;
	ret->local = NULL;
	ret->nlocal = 0;
	ret->nets = NULL;
	ret->nnets = 0;
	return 0;
}

static int
fz_pol_init(struct fz_pol *p, int manifest_ok, unsigned perms)
{
	size_t i;

	memset(p, 0, sizeof(*p));
	for (i = 0; i < 3; i++)
		if ((p->g[i] = policy_grant_new()) == NULL)
			return -1;
	p->inst.name = "fuzz";
	p->inst.manifest_ok = manifest_ok;
	p->inst.permissions = perms & 7u;
	p->inst.hosts = p->g[0];
	p->inst.allow_private = p->g[1];
	p->inst.declared = p->g[2];
	p->inst.operator_defined = 1;
	return 0;
}

static void
fz_pol_done(struct fz_pol *p)
{
	size_t i;

	for (i = 0; i < 3; i++)
		policy_grant_free(p->g[i]);
}

/* Add the entry of one "X:entry" line to the set it names. */
static void
fz_line(struct fz_pol *old, struct fz_pol *new, const char *s, size_t n)
{
	static const char tags[] = "hpdHPD";
	const char *t;
	struct policy_entry e;
	struct fz_pol *p;
	size_t k;

	if (n < 2 || s[1] != ':' || s[0] == '\0' ||
	    (t = strchr(tags, s[0])) == NULL)
		return;
	k = (size_t)(t - tags);
	p = k < 3 ? old : new;
	if (policy_entry_parse(s + 2, n - 2, fake_psl, NULL, &e, NULL) == 0)
		(void)policy_grant_add(p->g[k % 3], &e);
}

/* Parse the destination for transport t; return 0 when it is one. */
static int
fz_dest(enum policy_transport t, const char *s, size_t n,
    struct policy_dest *ret)
{
	if (t == POLICY_TRANSPORT_HTTP || t == POLICY_TRANSPORT_WEBSOCKET)
		return policy_url_parse(s, n, ret, NULL);
	return policy_hostport_parse(s, n, ret, NULL);
}

static int
fz_addr_in(const struct policy_addr *a, const struct policy_addr *set,
    size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (set[i].family == a->family &&
		    memcmp(set[i].bytes, a->bytes, a->family == 4 ? 4 : 16) ==
			0)
			return 1;
	return 0;
}

/*
 * What p alone decides for dest and the answers (the reference): 1 and
 * the verdict in *v on allow. A name's answers come from the lookup; an
 * IP literal is its own.
 */
static int
fz_reference(const struct fz_pol *p, enum policy_transport t,
    const struct policy_dest *dest, const struct policy_addr *answers,
    size_t n, const struct fz_ctx *c, struct policy_verdict *v)
{
	struct policy_classify_ctx cx = { &c->nat64, NULL, 0, NULL, 0 };
	struct policy_addr lit;

	if (p == NULL || policy_check_destination(&p->inst, t, dest, v) != 0 ||
	    v->reason != POLICY_REASON_ALLOW)
		return 0;
	if (!v->need_resolve) {
		memset(&lit, 0, sizeof(lit));
		lit.family = dest->host.kind == POLICY_HOST_IPV4 ? 4 : 6;
		memcpy(lit.bytes, dest->host.addr, lit.family == 4 ? 4 : 16);
		answers = &lit;
		n = 1;
	}
	if (policy_check_answers(&p->inst, dest, answers, n, &cx, v) != 0)
		return 0;
	return v->reason == POLICY_REASON_ALLOW;
}

/* Check the outcome r against the invariant; abort() on a breach. */
static void
fz_check(const struct decide_result *r, const struct fz_ctx *c,
    enum policy_transport t, const struct policy_dest *dest,
    enum dns_status status, const struct policy_addr *answers, size_t n)
{
	static struct policy_verdict ref, old; /* large */
	int old_start, literal, want;
	size_t i;

	old_start = c->old != NULL &&
	    policy_check_destination(&c->old->inst, t, dest, &old) == 0 &&
	    old.reason == POLICY_REASON_ALLOW;
	literal = old_start && !old.need_resolve;
	if (!old_start) {
		/* Denied before any lookup: the new policy never asked. */
		if (r->allow || c->calls_answers != 0)
			abort();
		return;
	}
	if (literal) {
		/* No lookup, so nothing changed: the old policy decides. */
		want = fz_reference(c->old, t, dest, NULL, 0, c, &ref);
		if (c->calls_answers != 0 || r->allow != want)
			abort();
	} else {
		if (c->calls_answers != 1)
			abort(); /* the answers were not checked again */
		if (c->broken) {
			if (r->allow || r->reason == NULL ||
			    strcmp(r->reason, "policy-unavailable") != 0 ||
			    r->error != EGRESS_ERR_UNAVAILABLE)
				abort();
			return;
		}
		want = status == DNS_OK &&
		    fz_reference(c->new, t, dest, answers, n, c, &ref);
		if (r->allow != want)
			abort(); /* allowed what the policy now refuses */
	}
	if (!r->allow) {
		if (r->reason == NULL || r->error == 0 ||
		    r->verdict->naddrs != 0)
			abort();
		return;
	}
	/* The validated set is the current policy's, and only answers. */
	if (r->reason != NULL || r->verdict->naddrs == 0 ||
	    r->verdict->naddrs != ref.naddrs)
		abort();
	for (i = 0; i < ref.naddrs; i++) {
		if (!fz_addr_in(&r->verdict->addrs[i], ref.addrs, ref.naddrs))
			abort();
		if (!literal && !fz_addr_in(&r->verdict->addrs[i], answers, n))
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct decide d; /* large */
	static const enum policy_transport tr[4] = { POLICY_TRANSPORT_HTTP,
		POLICY_TRANSPORT_WEBSOCKET, POLICY_TRANSPORT_TCP,
		POLICY_TRANSPORT_TLS };
	struct policy_addr answers[FZ_ANSWERS_MAX];
	struct fz_pol old, new;
	struct fz_ctx c;
	struct policy_dest dest;
	enum policy_transport t;
	enum dns_status status;
	const char *s, *nl, *end;
	size_t n = 0, i, k;
	uint8_t f, perms;

	if (size < 3)
		return 0;
	f = data[0];
	perms = data[1];
	k = data[2] % FZ_ANSWERS_MAX;
	data += 3;
	size -= 3;
	memset(answers, 0, sizeof(answers));
	for (i = 0; i < k && size > 0; i++) {
		size_t len = data[0] % 2 == 0 ? 4 : 16;

		if (size < 1 + len)
			return 0;
		answers[n].family = len == 4 ? 4 : 6;
		memcpy(answers[n].bytes, data + 1, len);
		n++;
		data += 1 + len;
		size -= 1 + len;
	}
	t = tr[(f >> 6) & 3];
	status = (f & 32) ? DNS_SERVFAIL : DNS_OK;
	s = (const char *)data;
	end = s + size;
	if ((nl = memchr(s, '\n', size)) == NULL)
		nl = end;
	memset(&dest, 0, sizeof(dest));
	if (fz_dest(t, s, (size_t)(nl - s), &dest) != 0)
		return 0;
	if (fz_pol_init(&old, (f & 8) != 0, perms) != 0 ||
	    fz_pol_init(&new, (f & 16) != 0, perms >> 3) != 0)
		abort();
	for (s = nl; s < end; s = nl) {
		s++;
		if ((nl = memchr(s, '\n', (size_t)(end - s))) == NULL)
			nl = end;
		if (s < nl)
			fz_line(&old, &new, s, (size_t)(nl - s));
	}
	memset(&c, 0, sizeof(c));
	c.old = (f & 1) ? &old : NULL;
	c.new = (f & 2) ? &new : NULL;
	c.broken = (f & 4) != 0;
	if (decide_run_answered(&d, t, &dest, fz_policy, &c, status, answers,
		n) != 1)
		abort();
	fz_check(decide_result(&d), &c, t, &dest, status, answers, n);
	fz_pol_done(&old);
	fz_pol_done(&new);
	return 0;
}
