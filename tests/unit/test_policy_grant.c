/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for grant sets: exact and suffix matching (strict subdomains,
 * never the apex), IP-literal entries (same family and bytes only, never a
 * suffix), fail-closed handling of entries that escaped validation,
 * duplicates and insertion order, policy_grant_covers(), and a 100,000
 * entry set that still matches exactly.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#include "policy/policy.h"

static int
fake_psl(void *ctx, const char *domain)
{
	(void)ctx;
	return strcmp(domain, "com") == 0 || strcmp(domain, "co.uk") == 0 ||
	    strcmp(domain, "uk") == 0;
}

static struct policy_entry
entry(const char *s)
{
	struct policy_entry e;
	struct policy_err err;

	cr_assert_eq(policy_entry_parse(s, strlen(s), fake_psl, NULL, &e,
			 &err),
	    0, "entry '%s': %s", s, err.msg);
	return e;
}

static struct policy_host
host(const char *s)
{
	struct policy_host h;
	struct policy_err err;

	cr_assert_eq(policy_host_parse(s, strlen(s), &h, &err), 0,
	    "host '%s': %s", s, err.msg);
	return h;
}

static struct policy_grant *
grant_of(const char *const *list)
{
	struct policy_grant *g;

	cr_assert_not_null(g = policy_grant_new());
	for (; *list != NULL; list++) {
		struct policy_entry e = entry(*list);

		cr_assert_eq(policy_grant_add(g, &e), 0);
	}
	return g;
}

struct match_case {
	char host[64];
	int match;
};

static const char *const match_list[] = {
	"api.example.com",
	"*.tiles.example.com",
	"*.example.org",
	"10.0.0.1",
	"1.1.1.1",
	"::1",
	"2001:db8::1",
	"::ffff:9.9.9.9",
	"localhost",
	NULL,
};

static struct match_case match_cases[] = {
	{ "api.example.com", 1 },
	{ "API.Example.COM.", 1 },
	{ "example.com", 0 },
	{ "x.api.example.com", 0 }, /* exact is exact */
	{ "www.example.com", 0 },
	{ "a.tiles.example.com", 1 },
	{ "a.b.c.tiles.example.com", 1 },
	{ "tiles.example.com", 0 },  /* never the apex */
	{ "xtiles.example.com", 0 }, /* label boundary */
	{ "tiles.example.com.evil", 0 },
	{ "www.example.org", 1 },
	{ "example.org", 0 },
	{ "example.org.evil", 0 },
	{ "localhost", 1 },
	{ "a.localhost", 0 },
	{ "10.0.0.1", 1 },
	{ "10.0.0.1.", 1 },
	{ "10.0.0.2", 0 },
	{ "1.1.1.1", 1 },
	{ "[::ffff:1.1.1.1]", 0 }, /* other family */
	{ "[::1.1.1.1]", 0 },
	{ "[::ffff:9.9.9.9]", 1 },
	{ "9.9.9.9", 0 }, /* other family */
	{ "[::1]", 1 },
	{ "[0:0::1]", 1 },
	{ "[::2]", 0 },
	{ "[2001:DB8::1]", 1 },
	{ "[2001:db8::2]", 0 },
	{ "[::a00:1]", 0 },
};

ParameterizedTestParameters(grant, matches)
{
	return cr_make_param_array(struct match_case, match_cases,
	    sizeof(match_cases) / sizeof(match_cases[0]));
}

ParameterizedTest(struct match_case *c, grant, matches)
{
	struct policy_grant *g = grant_of(match_list);
	struct policy_host h = host(c->host);

	cr_assert_eq(policy_grant_matches(g, &h), c->match, "%s", c->host);
	policy_grant_free(g);
}

Test(grant, empty_and_null)
{
	struct policy_grant *g;
	struct policy_host h = host("example.com");

	cr_assert_eq(policy_grant_matches(NULL, &h), 0);
	cr_assert_eq(policy_grant_count(NULL), 0);
	cr_assert_null(policy_grant_entry(NULL, 0));
	cr_assert_not_null(g = policy_grant_new());
	cr_assert_eq(policy_grant_matches(g, &h), 0);
	cr_assert_eq(policy_grant_matches(g, NULL), 0);
	cr_assert_eq(policy_grant_count(g), 0);
	cr_assert_null(policy_grant_entry(g, 0));
	cr_assert_eq(policy_grant_add(g, NULL), EGRESS_ERR_INVALID);
	policy_grant_free(g);
	policy_grant_free(NULL);
}

Test(grant, suffix_never_matches_ip)
{
	struct policy_grant *g;
	struct policy_entry e;
	struct policy_host h = host("127.0.0.1");

	/* Entries that escaped validation, written by hand. */
	cr_assert_not_null(g = policy_grant_new());
	memset(&e, 0, sizeof(e));
	e.kind = POLICY_ENTRY_SUFFIX;
	e.host.kind = POLICY_HOST_NAME;
	strcpy(e.host.name, "0.0.1");
	cr_assert_eq(policy_grant_add(g, &e), 0);
	e.host.kind = POLICY_HOST_IPV4;
	strcpy(e.host.name, "0.0.1");
	cr_assert_eq(policy_grant_add(g, &e), 0);
	strcpy(e.host.name, "0.0.0.1");
	e.host.addr[3] = 1;
	cr_assert_eq(policy_grant_add(g, &e), 0);
	e.host.kind = POLICY_HOST_NAME;
	strcpy(e.host.name, "1");
	cr_assert_eq(policy_grant_add(g, &e), 0);
	cr_assert_eq(policy_grant_matches(g, &h), 0);
	h = host("[::127.0.0.1]");
	cr_assert_eq(policy_grant_matches(g, &h), 0);
	policy_grant_free(g);
}

Test(grant, escaped_entries_fail_closed)
{
	static const struct {
		enum policy_entry_kind kind;
		enum policy_host_kind hkind;
		const char *name;
	} bad[] = {
		{ POLICY_ENTRY_EXACT, POLICY_HOST_NAME, "*" },
		{ POLICY_ENTRY_SUFFIX, POLICY_HOST_NAME, "" },
		{ POLICY_ENTRY_SUFFIX, POLICY_HOST_NAME, "*" },
		{ POLICY_ENTRY_SUFFIX, POLICY_HOST_NAME, "com" },
		{ POLICY_ENTRY_SUFFIX, POLICY_HOST_NAME, ".com" },
		{ POLICY_ENTRY_EXACT, POLICY_HOST_NAME, "Example.com" },
		{ POLICY_ENTRY_EXACT, POLICY_HOST_NAME, "example.com." },
		{ POLICY_ENTRY_EXACT, POLICY_HOST_NAME, "127.0.0.1" },
		{ POLICY_ENTRY_EXACT, POLICY_HOST_IPV4, "127.0.0.2" },
		{ POLICY_ENTRY_EXACT, POLICY_HOST_IPV6, "::2" },
		{ POLICY_ENTRY_SUFFIX, POLICY_HOST_IPV6, "::1" },
		{ 9, POLICY_HOST_NAME, "example.com" },
		{ POLICY_ENTRY_EXACT, 9, "example.com" },
	};
	static const char *const hosts[] = {
		"example.com",
		"www.example.com",
		"127.0.0.1",
		"127.0.0.2",
		"[::1]",
		"[::2]",
		"a.b",
	};
	struct policy_grant *g;
	struct policy_entry e;
	size_t i;

	cr_assert_not_null(g = policy_grant_new());
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&e, 0, sizeof(e));
		e.kind = bad[i].kind;
		e.host.kind = bad[i].hkind;
		strcpy(e.host.name, bad[i].name);
		if (bad[i].hkind == POLICY_HOST_IPV4) {
			e.host.addr[0] = 127;
			e.host.addr[3] = 1; /* disagrees with the text */
		}
		if (bad[i].hkind == POLICY_HOST_IPV6)
			e.host.addr[15] = 1;
		cr_assert_eq(policy_grant_add(g, &e), 0);
		cr_assert_eq(policy_grant_covers(g, &e), 0, "%s", bad[i].name);
	}
	cr_assert_eq(policy_grant_count(g), sizeof(bad) / sizeof(bad[0]));
	for (i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
		struct policy_host h = host(hosts[i]);

		cr_assert_eq(policy_grant_matches(g, &h), 0, "%s", hosts[i]);
	}
	/* A forged host "*" is not matched by a forged entry "*" either. */
	{
		struct policy_host h;

		memset(&h, 0, sizeof(h));
		h.kind = POLICY_HOST_NAME;
		strcpy(h.name, "*");
		cr_assert_eq(policy_grant_matches(g, &h), 0);
	}
	policy_grant_free(g);
}

Test(grant, unterminated_entry_name)
{
	struct policy_grant *g;
	struct policy_entry e;
	struct policy_host h;

	cr_assert_not_null(g = policy_grant_new());
	memset(&e, 'a', sizeof(e));
	e.kind = POLICY_ENTRY_EXACT;
	e.host.kind = POLICY_HOST_NAME;
	cr_assert_eq(policy_grant_add(g, &e), 0);
	memset(&h, 'a', sizeof(h));
	h.kind = POLICY_HOST_NAME;
	cr_assert_eq(policy_grant_matches(g, &h), 0);
	policy_grant_free(g);
}

Test(grant, duplicates_and_order)
{
	static const char *const list[] = {
		"b.example",
		"*.a.example",
		"b.example",
		"10.0.0.1",
		"*.a.example",
		"::1",
		"[::1]",
		"a.example",
		NULL,
	};
	static const char *const want[] = {
		"b.example",
		"*.a.example",
		"10.0.0.1",
		"::1",
		"a.example",
	};
	struct policy_grant *g = grant_of(list);
	size_t i;

	cr_assert_eq(policy_grant_count(g), 5);
	for (i = 0; i < 5; i++) {
		char buf[300];

		cr_assert_geq(policy_entry_format(policy_grant_entry(g, i),
				  buf, sizeof(buf)),
		    0);
		cr_assert_str_eq(buf, want[i]);
	}
	cr_assert_null(policy_grant_entry(g, 5));
	policy_grant_free(g);
}

Test(grant, exact_and_suffix_are_distinct)
{
	static const char *const list[] = { "a.example", NULL };
	struct policy_grant *g = grant_of(list);
	struct policy_entry e = entry("*.a.example");
	struct policy_host h = host("x.a.example");

	cr_assert_eq(policy_grant_matches(g, &h), 0);
	cr_assert_eq(policy_grant_add(g, &e), 0);
	cr_assert_eq(policy_grant_count(g), 2);
	cr_assert_eq(policy_grant_matches(g, &h), 1);
	h = host("a.example");
	cr_assert_eq(policy_grant_matches(g, &h), 1);
	policy_grant_free(g);
}

struct cover_case {
	char entry[64];
	int covered;
};

static const char *const cover_list[] = {
	"*.example.com",
	"api.example.org",
	"10.0.0.1",
	"::1",
	"*.b.example.net",
	NULL,
};

static struct cover_case cover_cases[] = {
	{ "*.example.com", 1 },
	{ "*.x.example.com", 1 },
	{ "*.y.x.example.com", 1 },
	{ "www.example.com", 1 },
	{ "a.b.example.com", 1 },
	{ "example.com", 0 },
	{ "*.xexample.com", 0 },
	{ "api.example.org", 1 },
	{ "*.api.example.org", 0 },
	{ "www.api.example.org", 0 },
	{ "example.org", 0 },
	{ "10.0.0.1", 1 },
	{ "10.0.0.2", 0 },
	{ "::1", 1 },
	{ "::ffff:10.0.0.1", 0 },
	{ "*.b.example.net", 1 },
	{ "*.example.net", 0 },
	{ "b.example.net", 0 },
	{ "c.b.example.net", 1 },
};

ParameterizedTestParameters(grant, covers)
{
	return cr_make_param_array(struct cover_case, cover_cases,
	    sizeof(cover_cases) / sizeof(cover_cases[0]));
}

ParameterizedTest(struct cover_case *c, grant, covers)
{
	struct policy_grant *g = grant_of(cover_list);
	struct policy_entry e = entry(c->entry);

	cr_assert_eq(policy_grant_covers(g, &e), c->covered, "%s", c->entry);
	policy_grant_free(g);
}

Test(grant, covers_null)
{
	struct policy_entry e = entry("example.com");

	cr_assert_eq(policy_grant_covers(NULL, &e), 0);
}

/* 100,000 entries: every member matches, near misses do not. */
Test(grant, large, .timeout = 60)
{
	enum { N = 50000 };
	struct policy_grant *g;
	const struct policy_entry *first = NULL;
	char buf[64];
	size_t i;

	cr_assert_not_null(g = policy_grant_new());
	for (i = 0; i < N; i++) {
		struct policy_entry e;

		(void)snprintf(buf, sizeof(buf), "h%zu.example", i);
		e = entry(buf);
		cr_assert_eq(policy_grant_add(g, &e), 0);
		(void)snprintf(buf, sizeof(buf), "*.s%zu.example", i);
		e = entry(buf);
		cr_assert_eq(policy_grant_add(g, &e), 0);
		if (i == 0)
			first = policy_grant_entry(g, 0);
	}
	cr_assert_eq(policy_grant_count(g), 2 * N);
	/* Borrowed entries stay put while the set grows. */
	cr_assert_eq(policy_grant_entry(g, 0), first);
	cr_assert_str_eq(first->host.name, "h0.example");
	for (i = 0; i < N; i++) {
		struct policy_host h;

		(void)snprintf(buf, sizeof(buf), "h%zu.example", i);
		h = host(buf);
		cr_assert_eq(policy_grant_matches(g, &h), 1, "%s", buf);
		(void)snprintf(buf, sizeof(buf), "x.h%zu.example", i);
		h = host(buf);
		cr_assert_eq(policy_grant_matches(g, &h), 0, "%s", buf);
		(void)snprintf(buf, sizeof(buf), "a.b.s%zu.example", i);
		h = host(buf);
		cr_assert_eq(policy_grant_matches(g, &h), 1, "%s", buf);
		(void)snprintf(buf, sizeof(buf), "s%zu.example", i);
		h = host(buf);
		cr_assert_eq(policy_grant_matches(g, &h), 0, "%s", buf);
		(void)snprintf(buf, sizeof(buf), "h%zu.example", i + N);
		h = host(buf);
		cr_assert_eq(policy_grant_matches(g, &h), 0, "%s", buf);
	}
	for (i = 0; i < 2 * N; i++)
		cr_assert_eq(policy_grant_covers(g, policy_grant_entry(g, i)),
		    1);
	policy_grant_free(g);
}
