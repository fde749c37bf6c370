/* SPDX-License-Identifier: ISC */
/*
 * Fuzz target for the NAT64 prefix list parser and the classification that
 * uses it. The input is a newline-separated list of items. Checked: the
 * parser never overruns; a refusal carries a bounded, printable message;
 * every accepted prefix formats back to an item that parses to the same
 * prefix; classification of addresses derived from the input is the same
 * for the list and for the list in reverse order; and without declared
 * prefixes every address has exactly one class.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

#define FUZZ_ITEMS (POLICY_NAT64_MAX + 2)
#define FUZZ_TEXT  4096
#define FUZZ_CLASSES \
	(POLICY_CLASS_PUBLIC | POLICY_CLASS_PRIVATE | POLICY_CLASS_RESERVED | \
	    POLICY_CLASS_METADATA | POLICY_CLASS_LOOPBACK)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(int ok)
{
	if (!ok)
		abort();
}

/* The number of class bits set in m. */
static unsigned
nclasses(unsigned m)
{
	unsigned n = 0;

	for (m &= FUZZ_CLASSES; m != 0; m &= m - 1)
		n++;
	return n;
}

static void
check_classes(const struct policy_nat64_list *list, const uint8_t b[16])
{
	struct policy_nat64_list rev;
	struct policy_classify_ctx ctx;
	struct policy_addr a;
	unsigned m1, m2, m0;
	size_t i;

	memset(&a, 0, sizeof(a));
	a.family = 6;
	memcpy(a.bytes, b, 16);
	rev = *list;
	for (i = 0; i < list->n; i++)
		rev.v[i] = list->v[list->n - 1 - i];
	memset(&ctx, 0, sizeof(ctx));
	ctx.nat64 = list;
	m1 = policy_addr_classify(&ctx, &a);
	ctx.nat64 = &rev;
	m2 = policy_addr_classify(&ctx, &a);
	check(m1 == m2);
	check(m1 != 0 && (m1 & ~FUZZ_CLASSES) == 0);
	m0 = policy_addr_classify(NULL, &a);
	check(nclasses(m0) == 1 && (m0 & ~FUZZ_CLASSES) == 0);
	a.family = 4;
	m0 = policy_addr_classify(NULL, &a);
	check(nclasses(m0) == 1 && (m0 & ~FUZZ_CLASSES) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char text[FUZZ_TEXT + 1], canon[64], item[80];
	const char *items[FUZZ_ITEMS];
	struct policy_nat64_list list, again;
	struct policy_err err;
	uint8_t b[16];
	size_t n = 0, i, j, len;
	char *p;
	int rc;

	if (size > FUZZ_TEXT)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	p = text;
	while (n < FUZZ_ITEMS) {
		items[n++] = p;
		if ((p = strchr(p, '\n')) == NULL)
			break;
		*p++ = '\0';
	}

	memset(&err, 0, sizeof(err));
	rc = policy_nat64_parse_list(items, n, &list, &err);
	if (rc != 0) {
		check(rc == EGRESS_ERR_INVALID || rc == EGRESS_ERR_TOO_BIG);
		len = strnlen(err.msg, sizeof(err.msg));
		check(len > 0 && len < sizeof(err.msg));
		for (i = 0; i < len; i++)
			check(err.msg[i] >= 0x20 && err.msg[i] < 0x7f);
		memset(&list, 0, sizeof(list));
	} else {
		check(list.n <= n && list.n <= POLICY_NAT64_MAX);
		for (i = 0; i < list.n; i++) {
			struct policy_addr a;
			const char *one[1] = { item };

			memset(&a, 0, sizeof(a));
			a.family = 6;
			memcpy(a.bytes, list.v[i].prefix, 16);
			check(policy_addr_format(&a, canon, sizeof(canon)) ==
			    0);
			(void)snprintf(item, sizeof(item), "%s/%u", canon,
			    list.v[i].len);
			check(policy_nat64_parse_list(one, 1, &again, &err) ==
			    0);
			check(again.n == 1 &&
			    again.v[0].len == list.v[i].len &&
			    memcmp(again.v[0].prefix, list.v[i].prefix, 16) ==
				0);
		}
	}

	/* Addresses from the input: its first bytes, and each prefix with
	 * input bytes after it. */
	memset(b, 0, sizeof(b));
	memcpy(b, data, size < 16 ? size : 16);
	check_classes(&list, b);
	for (i = 0; i < list.n; i++) {
		memcpy(b, list.v[i].prefix, 16);
		for (j = list.v[i].len / 8; j < 16; j++)
			b[j] = size > 0 ? data[(j * 7 + i) % size] : 0;
		check_classes(&list, b);
	}
	return 0;
}
