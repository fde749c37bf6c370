/* SPDX-License-Identifier: ISC */
/*
 * RFC 7050 NAT64 prefix discovery, reported and never applied: the pure
 * inference over ipv4only.arpa answers, and its asynchronous and blocking
 * drivers over broker/dns. See nat64disc.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <egress/error.h>

#include "broker/net/dns.h"
#include "broker/net/nat64disc.h"

static const unsigned nat64disc_lens[] = { 96, 64, 56, 48, 40, 32 };

struct nat64disc {
	struct dns_query *q;
	struct policy_nat64_list declared;
	nat64disc_cb cb;
	void *arg;
};

/* The byte positions of the IPv4 address under each RFC 6052 length. */
static void
positions(unsigned len, int pos[4])
{
	static const int p32[4] = { 4, 5, 6, 7 }, p40[4] = { 5, 6, 7, 9 },
			 p48[4] = { 6, 7, 9, 10 }, p56[4] = { 7, 9, 10, 11 },
			 p64[4] = { 9, 10, 11, 12 },
			 p96[4] = { 12, 13, 14, 15 };
	const int *p = len == 32 ? p32 :
	    len == 40		 ? p40 :
	    len == 48		 ? p48 :
	    len == 56		 ? p56 :
	    len == 64		 ? p64 :
				   p96;

	memcpy(pos, p, sizeof(int) * 4);
}

/*
 * If a embeds a well-known address at len, with a zero u-octet, write the
 * prefix and return 170 or 171; else return 0. The suffix is not
 * checked: RFC 6052 only says it SHOULD be zero, and a warning errs wide.
 */
static int
fit(const uint8_t a[16], unsigned len, struct policy_nat64_prefix *ret)
{
	int pos[4], i;
	uint8_t v4[4];

	positions(len, pos);
	for (i = 0; i < 4; i++)
		v4[i] = a[pos[i]];
	if (v4[0] != 192 || v4[1] != 0 || v4[2] != 0 ||
	    (v4[3] != 170 && v4[3] != 171))
		return 0;
	if (len < 96 && a[8] != 0)
		return 0;
	memset(ret, 0, sizeof(*ret));
	memcpy(ret->prefix, a, len / 8);
	ret->len = len;
	return v4[3];
}

static int
same_prefix(const struct policy_nat64_prefix *x,
    const struct policy_nat64_prefix *y)
{
	return x->len == y->len && memcmp(x->prefix, y->prefix, 16) == 0;
}

static void
add_unique(struct policy_nat64_prefix *v, size_t *n,
    const struct policy_nat64_prefix *p)
{
	size_t i;

	for (i = 0; i < *n; i++)
		if (same_prefix(&v[i], p))
			return;
	if (*n < NAT64DISC_MAX)
		v[(*n)++] = *p;
}

static int
format_prefix(const struct policy_nat64_prefix *p, char *buf, size_t n)
{
	struct policy_addr a;
	char s[64];

	memset(&a, 0, sizeof(a));
	a.family = 6;
	memcpy(a.bytes, p->prefix, 16);
	if (policy_addr_format(&a, s, sizeof(s)) != 0)
		return -1;
	return snprintf(buf, n, "%s/%u", s, p->len);
}

/* Append "P/L" items to buf, comma separated. */
static void
append_list(char *buf, size_t n, const struct policy_nat64_prefix *v,
    size_t nv, int *first)
{
	char item[80];
	size_t i, len;

	for (i = 0; i < nv; i++) {
		if (format_prefix(&v[i], item, sizeof(item)) < 0)
			continue;
		len = strlen(buf);
		(void)snprintf(buf + len, n - len, "%s%s", *first ? "" : ", ",
		    item);
		*first = 0;
	}
}

int
nat64disc_infer(const struct policy_addr *answers, size_t n,
    const struct policy_nat64_list *declared, struct nat64disc_result *ret)
{
	static const struct policy_nat64_prefix wkp = {
		{ 0, 0x64, 0xff, 0x9b }, 96
	};
	struct nat64disc_result r;
	struct policy_nat64_prefix p, q, cand[6];
	int wk[6], corroborated[6];
	size_t i, j, k, ncand, first_ok;
	int first = 1;

	if ((answers == NULL && n > 0) || ret == NULL)
		return EGRESS_ERR_INVALID;
	memset(&r, 0, sizeof(r));
	r.dns_ok = 1;
	for (i = 0; i < n; i++) {
		if (answers[i].family != 6)
			continue;
		ncand = 0;
		for (k = 0; k < 6; k++) {
			wk[ncand] = fit(answers[i].bytes, nat64disc_lens[k],
			    &cand[ncand]);
			if (wk[ncand] != 0)
				ncand++;
		}
		/* Prefer fits another answer corroborates (RFC 7050 3). */
		first_ok = 0;
		for (k = 0; k < ncand; k++) {
			corroborated[k] = 0;
			for (j = 0; j < n; j++)
				if (j != i && answers[j].family == 6 &&
				    fit(answers[j].bytes, cand[k].len, &q) ==
					(wk[k] == 170 ? 171 : 170) &&
				    same_prefix(&q, &cand[k]))
					corroborated[k] = 1;
			first_ok |= corroborated[k];
		}
		for (k = 0; k < ncand; k++)
			if (!first_ok || corroborated[k])
				add_unique(r.found, &r.nfound, &cand[k]);
	}
	for (i = 0; i < r.nfound; i++) {
		p = r.found[i];
		if (same_prefix(&p, &wkp))
			continue;
		for (j = 0; declared != NULL && j < declared->n; j++)
			if (declared->v[j].len == p.len &&
			    memcmp(declared->v[j].prefix, p.prefix, 16) == 0)
				break;
		if (declared == NULL || j == declared->n)
			add_unique(r.undeclared, &r.nundeclared, &p);
	}
	if (r.nundeclared > 0) {
		(void)snprintf(r.warning, sizeof(r.warning),
		    "%s resolves "
		    "into NAT64 prefix ",
		    NAT64DISC_NAME);
		append_list(r.warning, sizeof(r.warning), r.undeclared,
		    r.nundeclared, &first);
		i = strlen(r.warning);
		(void)snprintf(r.warning + i, sizeof(r.warning) - i,
		    " that [security] nat64_prefixes does not declare: "
		    "addresses there are classified without seeing the IPv4 "
		    "address they reach");
		(void)strcpy(r.suggestion, "nat64_prefixes = ");
		first = 1;
		if (declared != NULL)
			append_list(r.suggestion, sizeof(r.suggestion),
			    declared->v, declared->n, &first);
		append_list(r.suggestion, sizeof(r.suggestion), r.undeclared,
		    r.nundeclared, &first);
	}
	*ret = r;
	return 0;
}

static void
nat64disc_dns_cb(void *arg, enum dns_status status,
    const struct policy_addr *addrs, size_t n)
{
	/* Out of memory: nothing learnt, as after a failed lookup (the
	 * callback runs all the same: its caller waits for it). */
	static const struct nat64disc_result none;
	struct nat64disc *d = arg;
	struct nat64disc_result *r;

	if ((r = calloc(1, sizeof(*r))) != NULL) {
		(void)nat64disc_infer(addrs, n, &d->declared, r);
		r->dns_ok = status == DNS_OK || status == DNS_NXDOMAIN ||
		    status == DNS_NODATA;
		d->cb(d->arg, r);
		free(r);
	} else
		d->cb(d->arg, &none);
	free(d);
}

int
nat64disc_start(struct dns_resolver *res,
    const struct policy_nat64_list *declared, nat64disc_cb cb, void *arg,
    struct nat64disc **ret)
{
	struct nat64disc *d;
	int err;

	if ((d = calloc(1, sizeof(*d))) == NULL)
		return EGRESS_ERR_NOMEM;
	if (declared != NULL)
		d->declared = *declared;
	d->cb = cb;
	d->arg = arg;
	err = dns_resolve(res, NAT64DISC_NAME, nat64disc_dns_cb, d, &d->q);
	if (err != 0) {
		free(d);
		return err;
	}
	*ret = d;
	return 0;
}

void
nat64disc_cancel(struct nat64disc *d)
{
	if (d == NULL)
		return;
	dns_query_cancel(d->q);
	free(d);
}

int
nat64disc_check_sync(const char *const *servers, size_t nservers,
    int timeout_ms, const struct policy_nat64_list *declared,
    struct nat64disc_result *ret)
{
	struct policy_addr addrs[POLICY_ANSWERS_MAX];
	enum dns_status st = DNS_ERROR;
	size_t n = 0;
	int err;

	err = dns_resolve_sync(servers, nservers, timeout_ms, NAT64DISC_NAME,
	    addrs, POLICY_ANSWERS_MAX, &n, &st);
	if (err != 0 && err != EGRESS_ERR_TOO_BIG)
		return err;
	if (st != DNS_OK)
		n = 0;
	err = nat64disc_infer(addrs, n, declared, ret);
	if (err == 0)
		ret->dns_ok = st == DNS_OK || st == DNS_NXDOMAIN ||
		    st == DNS_NODATA;
	return err;
}
