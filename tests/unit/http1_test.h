/* SPDX-License-Identifier: ISC */
/* Helpers of the HTTP/1.1 unit tests (test_net_http1*.c). */
#ifndef EGRESS_TESTS_HTTP1_TEST_H
#define EGRESS_TESTS_HTTP1_TEST_H

#include <string.h>

#include <criterion/criterion.h>

#include "broker/net/http1_head.h"

#define MAXH 32

/* Parse "Name: value\n" lines (value may be empty) into hs. */
static size_t
split_headers(char *text, struct http1_header *hs)
{
	size_t n = 0;
	char *line = text, *nl, *colon;

	while (*line != '\0' && n < MAXH) {
		nl = strchr(line, '\n');
		if (nl != NULL)
			*nl = '\0';
		colon = strchr(line, ':');
		cr_assert(colon != NULL, "bad test header '%s'", line);
		hs[n].name = line;
		hs[n].name_len = (size_t)(colon - line);
		hs[n].value = colon + 1;
		hs[n].value_len = strlen(colon + 1);
		n++;
		if (nl == NULL)
			break;
		line = nl + 1;
	}
	return n;
}

static void
dest_parse(const char *url, struct policy_dest *d)
{
	struct policy_err e;

	cr_assert_eq(policy_url_parse(url, strlen(url), d, &e), 0,
	    "url %s: %s", url, e.msg);
}

#endif /* EGRESS_TESTS_HTTP1_TEST_H */
