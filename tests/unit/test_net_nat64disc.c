/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/nat64disc's inference: every RFC 6052 length,
 * the well-known prefix, declared and undeclared prefixes, ambiguous fits
 * settled by the other well-known address (RFC 7050 section 3), answers
 * that only look close (non-zero u-octet, other IPv4), and the
 * exact warning and nat64_prefixes line.
 */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <egress/error.h>

#include "broker/net/nat64disc.h"

struct infer_case {
	char answers[256];  /* comma-separated addresses */
	char declared[128]; /* comma-separated prefixes */
	char found[160];    /* "P/L,P/L" as inferred, in order */
	char undeclared[160];
	char suggestion[200]; /* "" when none */
};

static struct infer_case cases[] = {
	/* No DNS64: only the A records. */
	{ "192.0.0.170,192.0.0.171", "", "", "", "" },
	{ "", "", "", "", "" },
	/* The well-known prefix is always decoded: no warning. */
	{ "64:ff9b::c000:aa,64:ff9b::c000:ab", "", "64:ff9b::/96", "", "" },
	/* A network-specific /96, undeclared, then declared. */
	{ "2001:db8:64::c000:aa,2001:db8:64::c000:ab", "", "2001:db8:64::/96",
	    "2001:db8:64::/96", "nat64_prefixes = 2001:db8:64::/96" },
	{ "2001:db8:64::c000:aa", "2001:db8:64::/96", "2001:db8:64::/96", "",
	    "" },
	/* Other declared prefixes are kept in the line to write. */
	{ "2001:db8:64::c000:aa", "2001:db8:1::/96, 2001:db8:2::/64",
	    "2001:db8:64::/96", "2001:db8:64::/96",
	    "nat64_prefixes = 2001:db8:1::/96, 2001:db8:2::/64, "
	    "2001:db8:64::/96" },
	/* The same bits under another length are a different prefix. */
	{ "2001:db8:64:0:c0:0:aa00:0", "2001:db8:64::/96", "2001:db8:64::/64",
	    "2001:db8:64::/64",
	    "nat64_prefixes = 2001:db8:64::/96, 2001:db8:64::/64" },
	/* Every RFC 6052 length. */
	{ "2001:db8:c000:aa::", "", "2001:db8::/32", "2001:db8::/32",
	    "nat64_prefixes = 2001:db8::/32" },
	{ "2001:db8:1c0:0:aa::", "", "2001:db8:100::/40", "2001:db8:100::/40",
	    "nat64_prefixes = 2001:db8:100::/40" },
	{ "2001:db8:122:c000:0:aa00::", "", "2001:db8:122::/48",
	    "2001:db8:122::/48", "nat64_prefixes = 2001:db8:122::/48" },
	{ "2001:db8:122:3c0:0:aa::", "", "2001:db8:122:300::/56",
	    "2001:db8:122:300::/56",
	    "nat64_prefixes = 2001:db8:122:300::/56" },
	{ "2001:db8:122:344:c0:0:aa00:0", "", "2001:db8:122:344::/64",
	    "2001:db8:122:344::/64",
	    "nat64_prefixes = 2001:db8:122:344::/64" },
	/* Non-zero u-octet or another IPv4: no prefix. */
	{ "2001:db8:122:344:ffc0:0:aa00:0", "", "", "", "" },
	/* A non-zero suffix (RFC 6052: SHOULD be zero) still counts. */
	{ "2001:db8:122:344:c0:0:aa00:1", "", "2001:db8:122:344::/64",
	    "2001:db8:122:344::/64",
	    "nat64_prefixes = 2001:db8:122:344::/64" },
	{ "2001:db8:64::c000:ac,2001:db8:64::a00:1", "", "", "", "" },
	/* Ambiguous: 2001:db8:c000:aa::c000:aa fits /32 and /96; the
	 * other answer carries .171 only under /96, so /96 is kept. */
	{ "2001:db8:c000:aa::c000:aa,2001:db8:c000:aa::c000:ab", "",
	    "2001:db8:c000:aa::/96", "2001:db8:c000:aa::/96",
	    "nat64_prefixes = 2001:db8:c000:aa::/96" },
	/* Ambiguous and uncorroborated: both kept (a warning errs wide). */
	{ "2001:db8:c000:aa::c000:aa", "",
	    "2001:db8:c000:aa::/96,"
	    "2001:db8::/32",
	    "2001:db8:c000:aa::/96,2001:db8::/32",
	    "nat64_prefixes = 2001:db8:c000:aa::/96, 2001:db8::/32" },
	/* Two translators at once: both reported, each once. */
	{ "2001:db8:a::c000:aa,2001:db8:b::c000:aa,2001:db8:a::c000:ab", "",
	    "2001:db8:a::/96,2001:db8:b::/96",
	    "2001:db8:a::/96,2001:db8:b::/96",
	    "nat64_prefixes = 2001:db8:a::/96, 2001:db8:b::/96" },
};

static size_t
parse_addrs(const char *s, struct policy_addr *v, size_t max)
{
	char buf[256], *tok, *save = NULL;
	size_t n = 0;

	(void)snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, ",", &save); tok != NULL && n < max;
	     tok = strtok_r(NULL, ",", &save)) {
		cr_assert_eq(policy_addr_parse(tok, &v[n]), 0, "%s", tok);
		n++;
	}
	return n;
}

static void
list_text(const struct policy_nat64_prefix *v, size_t n, char *buf, size_t len)
{
	struct policy_addr a;
	char s[64];
	size_t i;

	buf[0] = '\0';
	for (i = 0; i < n; i++) {
		memset(&a, 0, sizeof(a));
		a.family = 6;
		memcpy(a.bytes, v[i].prefix, 16);
		cr_assert_eq(policy_addr_format(&a, s, sizeof(s)), 0);
		(void)snprintf(buf + strlen(buf), len - strlen(buf), "%s%s/%u",
		    i ? "," : "", s, v[i].len);
	}
}

ParameterizedTestParameters(broker_nat64disc, infer)
{
	return cr_make_param_array(struct infer_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct infer_case *c, broker_nat64disc, infer)
{
	struct policy_addr answers[8];
	struct policy_nat64_list decl;
	struct nat64disc_result r;
	struct policy_err perr;
	char buf[128], *items[8], *tok, *save = NULL;
	char got[256];
	size_t n, ni = 0;

	n = parse_addrs(c->answers, answers, 8);
	(void)snprintf(buf, sizeof(buf), "%s", c->declared);
	for (tok = strtok_r(buf, ", ", &save); tok != NULL;
	     tok = strtok_r(NULL, ", ", &save))
		items[ni++] = tok;
	memset(&decl, 0, sizeof(decl));
	if (ni > 0)
		cr_assert_eq(policy_nat64_parse_list((const char *const *)
							 items,
				 ni, &decl, &perr),
		    0, "%s", perr.msg);
	cr_assert_eq(nat64disc_infer(answers, n, &decl, &r), 0);
	list_text(r.found, r.nfound, got, sizeof(got));
	cr_assert_str_eq(got, c->found, "answers %s", c->answers);
	list_text(r.undeclared, r.nundeclared, got, sizeof(got));
	cr_assert_str_eq(got, c->undeclared, "answers %s", c->answers);
	cr_assert_str_eq(r.suggestion, c->suggestion);
	if (c->suggestion[0] != '\0')
		cr_assert(strstr(r.warning, "does not declare") != NULL);
	else
		cr_assert_str_eq(r.warning, "");
}

Test(broker_nat64disc, bad_arguments)
{
	struct nat64disc_result r;

	cr_assert_eq(nat64disc_infer(NULL, 1, NULL, &r), EGRESS_ERR_INVALID);
	cr_assert_eq(nat64disc_infer(NULL, 0, NULL, NULL), EGRESS_ERR_INVALID);
	cr_assert_eq(nat64disc_infer(NULL, 0, NULL, &r), 0);
	cr_assert_eq(r.nfound, 0);
}
