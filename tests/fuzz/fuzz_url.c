/* SPDX-License-Identifier: ISC */
/*
 * Fuzz target for the destination parsers: policy_url_parse(),
 * policy_hostport_parse(), policy_authority_parse() and
 * policy_host_parse() over the same bytes. Checks the cheap invariants: a
 * parsed host re-parses to itself, holds only canonical characters and is
 * never a non-canonical number; a parsed URL's path lies inside the input
 * and the URL rebuilt from its parts parses to the same destination.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_host(const struct policy_host *h)
{
	struct policy_host again;
	char buf[POLICY_NAME_MAX + 3];
	size_t n, i;
	int r;

	n = strnlen(h->name, sizeof(h->name));
	if (n == 0 || n > POLICY_NAME_MAX)
		abort();
	for (i = 0; i < n; i++) {
		char c = h->name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			c == '-' || c == '.' ||
			(c == ':' && h->kind == POLICY_HOST_IPV6)))
			abort();
	}
	if (h->kind != POLICY_HOST_IPV6 &&
	    (h->name[0] == '.' || h->name[n - 1] == '.'))
		abort();
	r = snprintf(buf, sizeof(buf),
	    h->kind == POLICY_HOST_IPV6 ? "[%s]" : "%s", h->name);
	if (r < 0 || (size_t)r >= sizeof(buf))
		abort();
	if (policy_host_parse(buf, (size_t)r, &again, NULL) != 0)
		abort();
	if (again.kind != h->kind || strcmp(again.name, h->name) != 0 ||
	    memcmp(again.addr, h->addr, sizeof(h->addr)) != 0)
		abort();
	(void)policy_host_is_local_name(h);
}

static void
check_dest(const struct policy_dest *d, size_t size)
{
	if (d->port == 0)
		abort();
	if (d->path_off > size || d->path_len > size - d->path_off)
		abort();
	check_host(&d->host);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	struct policy_dest d, d2;
	struct policy_host h;
	struct policy_err err;
	char *buf;
	int r;

	if (policy_host_parse(s, size, &h, &err) == 0)
		check_host(&h);
	if (policy_hostport_parse(s, size, &d, &err) == 0) {
		check_dest(&d, size);
		if (d.path_len != 0 || d.scheme[0] != '\0')
			abort();
	}
	if (policy_authority_parse(s, size, 443, &d, &err) == 0)
		check_dest(&d, size);
	if (policy_url_parse(s, size, &d, &err) != 0)
		return 0;
	check_dest(&d, size);
	if (strcmp(d.scheme, "http") != 0 && strcmp(d.scheme, "https") != 0 &&
	    strcmp(d.scheme, "ws") != 0 && strcmp(d.scheme, "wss") != 0)
		abort();
	if (d.path_off + d.path_len != size)
		abort();
	if (d.path_len > 0 && s[d.path_off] != '/' && s[d.path_off] != '?')
		abort();
	/* No fragment anywhere; no userinfo or backslash in the authority. */
	if (memchr(s, '#', size) != NULL || memchr(s, '\\', size) != NULL)
		abort();
	if (memchr(s, '@', d.path_off) != NULL)
		abort();

	/* Rebuild scheme://host:port/path and parse it again. */
	if ((buf = malloc(size + 400)) == NULL)
		return 0;
	r = snprintf(buf, size + 400,
	    d.host.kind == POLICY_HOST_IPV6 ? "%s://[%s]:%u%.*s" :
					      "%s://%s:%u%.*s",
	    d.scheme, d.host.name, (unsigned)d.port, (int)d.path_len,
	    s + d.path_off);
	if (r < 0 || (size_t)r >= size + 400)
		abort();
	if (policy_url_parse(buf, (size_t)r, &d2, &err) != 0)
		abort();
	if (strcmp(d2.scheme, d.scheme) != 0 || d2.port != d.port ||
	    d2.host.kind != d.host.kind ||
	    strcmp(d2.host.name, d.host.name) != 0 ||
	    d2.path_len != d.path_len)
		abort();
	free(buf);
	return 0;
}
