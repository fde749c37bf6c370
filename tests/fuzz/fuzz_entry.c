/* SPDX-License-Identifier: ISC */
/*
 * Fuzz target for the entry grammar: policy_entry_parse() with a small
 * fake ICANN public-suffix list. Checks that an accepted entry formats back
 * to its input (minus the brackets of an IPv6 literal), re-parses to the
 * same entry, never holds a '*' beyond one leading "*.", never wildcards an
 * IP literal, a single label or a public suffix, and that a grant set
 * holding it matches what it should and no more.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
fake_psl(void *ctx, const char *domain)
{
	static const char *const list[] = {
		"com",
		"net",
		"org",
		"uk",
		"co.uk",
		"au",
		"com.au",
		"arpa",
	};
	size_t i;

	(void)ctx;
	for (i = 0; i < sizeof(list) / sizeof(list[0]); i++)
		if (strcmp(list[i], domain) == 0)
			return 1;
	return 0;
}

static void
check_match(const struct policy_entry *e)
{
	struct policy_grant *g;
	struct policy_host h;
	char buf[POLICY_NAME_MAX + 8];
	int r;

	if ((g = policy_grant_new()) == NULL)
		return;
	if (policy_grant_add(g, e) != 0 || policy_grant_count(g) != 1 ||
	    policy_grant_covers(g, e) != 1)
		abort();
	r = snprintf(buf, sizeof(buf),
	    e->host.kind == POLICY_HOST_IPV6 ? "[%s]" : "%s", e->host.name);
	if (policy_host_parse(buf, (size_t)r, &h, NULL) != 0)
		abort();
	/* Exact: matches its host. Suffix: never its apex. */
	if (policy_grant_matches(g, &h) != (e->kind == POLICY_ENTRY_EXACT))
		abort();
	if (e->host.kind == POLICY_HOST_NAME) {
		r = snprintf(buf, sizeof(buf), "x.%s", e->host.name);
		/* Every suffix pattern has a subdomain a request can name. */
		if (e->kind == POLICY_ENTRY_SUFFIX && r > POLICY_NAME_MAX)
			abort();
		if (r <= POLICY_NAME_MAX) {
			if (policy_host_parse(buf, (size_t)r, &h, NULL) != 0)
				abort();
			if (policy_grant_matches(g, &h) !=
			    (e->kind == POLICY_ENTRY_SUFFIX))
				abort();
		}
	}
	policy_grant_free(g);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	struct policy_entry e, e2;
	struct policy_err err;
	char buf[POLICY_NAME_MAX + 8];
	int n;

	memset(&err, 0, sizeof(err));
	if (policy_entry_parse(s, size, fake_psl, NULL, &e, &err) != 0) {
		if (memchr(err.msg, '\0', sizeof(err.msg)) == NULL ||
		    err.msg[0] == '\0')
			abort();
		return 0;
	}
	if ((n = policy_entry_format(&e, buf, sizeof(buf))) < 0)
		abort();
	if (size >= 2 && s[0] == '[') {
		if ((size_t)n != size - 2 ||
		    memcmp(buf, s + 1, size - 2) != 0 ||
		    e.host.kind != POLICY_HOST_IPV6)
			abort();
	} else if ((size_t)n != size || memcmp(buf, s, size) != 0)
		abort();
	if (policy_entry_parse(buf, (size_t)n, fake_psl, NULL, &e2, NULL) != 0)
		abort();
	if (e2.kind != e.kind || e2.host.kind != e.host.kind ||
	    strcmp(e2.host.name, e.host.name) != 0 ||
	    memcmp(e2.host.addr, e.host.addr, sizeof(e.host.addr)) != 0)
		abort();
	if (strchr(e.host.name, '*') != NULL)
		abort();
	if (e.kind == POLICY_ENTRY_SUFFIX &&
	    (e.host.kind != POLICY_HOST_NAME ||
		strchr(e.host.name, '.') == NULL ||
		fake_psl(NULL, e.host.name)))
		abort();
	check_match(&e);
	return 0;
}
