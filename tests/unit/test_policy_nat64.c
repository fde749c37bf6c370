/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for policy/nat64.c: the [security] nat64_prefixes list parser
 * (good and bad items, every bad item named, the whole list refused) and
 * RFC 6052 decoding for all six prefix lengths as classification sees it,
 * including overlapping prefixes evaluated in both orders.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#include "policy/nat64.h"
#include "policy/policy.h"

#define PUB	  POLICY_CLASS_PUBLIC
#define PRV	  POLICY_CLASS_PRIVATE
#define LPB	  POLICY_CLASS_LOOPBACK
#define RSV	  POLICY_CLASS_RESERVED
#define MET	  POLICY_CLASS_METADATA

#define NELEM(a)  (sizeof(a) / sizeof((a)[0]))
#define ITEMS_MAX 80

/* Split a space-separated list in place into items. */
static size_t
split(char *s, const char *items[ITEMS_MAX])
{
	size_t n = 0;
	char *p;

	for (p = strtok(s, " "); p != NULL && n < ITEMS_MAX;
	     p = strtok(NULL, " "))
		items[n++] = p;
	return n;
}

static struct policy_addr
must_parse(const char *s)
{
	struct policy_addr a;

	memset(&a, 0, sizeof(a));
	cr_assert_eq(policy_addr_parse(s, &a), 0, "'%s' does not parse", s);
	return a;
}

static void
must_list(const char *text, struct policy_nat64_list *ret)
{
	char buf[1024];
	const char *items[ITEMS_MAX];
	struct policy_err err;
	size_t n;

	(void)snprintf(buf, sizeof(buf), "%s", text);
	n = split(buf, items);
	cr_assert_eq(policy_nat64_parse_list(items, n, ret, &err), 0,
	    "'%s': %s", text, err.msg);
}

struct good_case {
	char items[256];
	size_t n;
};

static struct good_case good_cases[] = {
	{ "", 0 }, { "64:ff9b::/96", 1 }, { "2001:db8::/32", 1 },
	{ "2001:db8:100::/40", 1 }, { "2001:db8:122::/48", 1 },
	{ "2001:db8:122:300::/56", 1 }, { "2001:db8:122:344::/64", 1 },
	{ "2001:db8:122:344::/96", 1 }, { "64:ff9b:1::/48", 1 },
	{ "::/32", 1 }, { "2001:db8:64::/96 2001:db8::/32 64:ff9b::/96", 3 },
	{ "2001:db8::/32 2001:db8::/32", 1 }, /* duplicate */
	{ "2001:db8::/32 2001:db8::/40", 2 }, /* same bits */
};

ParameterizedTestParameters(nat64, parse_good)
{
	return cr_make_param_array(struct good_case, good_cases,
	    NELEM(good_cases));
}

ParameterizedTest(struct good_case *c, nat64, parse_good)
{
	struct policy_nat64_list list;
	size_t i;

	must_list(c->items, &list);
	cr_expect_eq(list.n, c->n, "'%s': %zu prefixes", c->items, list.n);
	for (i = 0; i < list.n; i++)
		cr_expect(policy_nat64_len_is_valid(list.v[i].len));
}

struct bad_case {
	char items[256];
	char msg[POLICY_MSG_MAX]; /* exact message */
};

static struct bad_case bad_cases[] = {
	{ "2001:db8::", "item 1 '2001:db8::': missing /<length>" },
	{ "2001:db8::/33",
	    "item 1 '2001:db8::/33': length must be 32, 40, 48, 56, 64 or 96" },
	{ "2001:db8::/0",
	    "item 1 '2001:db8::/0': length must be 32, 40, 48, 56, 64 or 96" },
	{ "2001:db8::/128",
	    "item 1 '2001:db8::/128': length must be 32, "
	    "40, 48, 56, 64 or 96" },
	{ "2001:db8::/096",
	    "item 1 '2001:db8::/096': length must be 32, "
	    "40, 48, 56, 64 or 96" },
	{ "2001:db8::/+96",
	    "item 1 '2001:db8::/+96': length must be 32, "
	    "40, 48, 56, 64 or 96" },
	{ "2001:db8::/96x",
	    "item 1 '2001:db8::/96x': length must be 32, "
	    "40, 48, 56, 64 or 96" },
	{ "2001:db8::/",
	    "item 1 '2001:db8::/': length must be 32, 40, 48, 56, 64 or 96" },
	{ "2001:db8::/32/32",
	    "item 1 '2001:db8::/32/32': length must be "
	    "32, 40, 48, 56, 64 or 96" },
	{ "2001:DB8::/32",
	    "item 1 '2001:DB8::/32': not canonical, write '2001:db8::/32'" },
	{ "2001:0db8::/32",
	    "item 1 '2001:0db8::/32': not canonical, write '2001:db8::/32'" },
	{ "64:ff9b:0:0:0:0::/96",
	    "item 1 '64:ff9b:0:0:0:0::/96': not canonical, write "
	    "'64:ff9b::/96'" },
	{ "10.0.0.0/8", "item 1 '10.0.0.0/8': not an IPv6 address" },
	{ "[2001:db8::]/32", "item 1 '[2001:db8::]/32': not an IPv6 address" },
	{ "/96", "item 1 '/96': not an IPv6 address" },
	{ "2001:db8::1/96",
	    "item 1 '2001:db8::1/96': bits set beyond /96, "
	    "write '2001:db8::/96'" },
	{ "2001:db8:1::/32",
	    "item 1 '2001:db8:1::/32': bits set beyond "
	    "/32, write '2001:db8::/32'" },
	{ "2001:db8:122:344:100::/64",
	    "item 1 '2001:db8:122:344:100::/64': "
	    "bits set beyond /64, write '2001:db8:122:344::/64'" },
	{ "2001:db8:1ff::/40",
	    "item 1 '2001:db8:1ff::/40': bits set beyond "
	    "/40, write '2001:db8:100::/40'" },
	/* One good item does not save the list; every bad one is named. */
	{ "64:ff9b::/96 2001:db8::/33 2001:db8::1/32",
	    "item 2 '2001:db8::/33': length must be 32, 40, 48, 56, 64 or 96; "
	    "item 3 '2001:db8::1/32': bits set beyond /32, write "
	    "'2001:db8::/32'" },
	{ "a 64:ff9b::/96 b",
	    "item 1 'a': missing /<length>; "
	    "item 3 'b': missing /<length>" },
	/* Control bytes are never copied into the message. */
	{ "2001:db8::\x01/32",
	    "item 1 '2001:db8::?/32': not an IPv6 "
	    "address" },
};

ParameterizedTestParameters(nat64, parse_bad)
{
	return cr_make_param_array(struct bad_case, bad_cases,
	    NELEM(bad_cases));
}

ParameterizedTest(struct bad_case *c, nat64, parse_bad)
{
	char buf[256];
	const char *items[ITEMS_MAX];
	struct policy_nat64_list list, sentinel;
	struct policy_err err;
	size_t n;

	(void)snprintf(buf, sizeof(buf), "%s", c->items);
	n = split(buf, items);
	memset(&list, 0x5a, sizeof(list));
	sentinel = list;
	memset(&err, 0, sizeof(err));
	cr_assert_eq(policy_nat64_parse_list(items, n, &list, &err),
	    EGRESS_ERR_INVALID, "'%s' accepted", c->items);
	cr_expect_str_eq(err.msg, c->msg);
	cr_expect_eq(memcmp(&list, &sentinel, sizeof(list)), 0,
	    "list written on failure");
	/* reterr is optional. */
	cr_expect_eq(policy_nat64_parse_list(items, n, &list, NULL),
	    EGRESS_ERR_INVALID);
}

Test(nat64, empty_item)
{
	const char *items[] = { "64:ff9b::/96", "" };
	struct policy_nat64_list list;
	struct policy_err err;

	cr_assert_eq(policy_nat64_parse_list(items, 2, &list, &err),
	    EGRESS_ERR_INVALID);
	cr_expect_str_eq(err.msg, "item 2 '': empty prefix");
	items[1] = NULL;
	cr_assert_eq(policy_nat64_parse_list(items, 2, &list, &err),
	    EGRESS_ERR_INVALID);
	cr_expect_str_eq(err.msg, "item 2 '': empty prefix");
}

Test(nat64, long_item)
{
	char longitem[200];
	const char *items[] = { longitem };
	struct policy_nat64_list list;
	struct policy_err err;

	memset(longitem, 'a', sizeof(longitem) - 1);
	longitem[sizeof(longitem) - 1] = '\0';
	cr_assert_eq(policy_nat64_parse_list(items, 1, &list, &err),
	    EGRESS_ERR_INVALID);
	cr_expect(strstr(err.msg, "too long to be a prefix") != NULL, "%s",
	    err.msg);
	cr_expect(strlen(err.msg) < 120, "item quoted in full: %s", err.msg);
}

/* A quoted item cut to its first bytes says so (review finding: the
 * marker was dropped exactly at the buffer's edge). */
Test(nat64, cut_item_is_marked)
{
	const char *items[] = {
		"2001:db8:1234:5678:9abc:def0:1234:5678:ffff:ffff/96x"
	};
	struct policy_nat64_list list;
	struct policy_err err;

	cr_assert_eq(policy_nat64_parse_list(items, 1, &list, &err),
	    EGRESS_ERR_INVALID);
	cr_expect(strstr(err.msg, "...'") != NULL, "%s", err.msg);
}

Test(nat64, bounds)
{
	const char *items[POLICY_NAT64_MAX + 1];
	char text[POLICY_NAT64_MAX + 1][48];
	struct policy_nat64_list list;
	struct policy_err err;
	size_t i;

	for (i = 0; i <= POLICY_NAT64_MAX; i++) {
		(void)snprintf(text[i], sizeof(text[i]), "2001:db8:%zx::/48",
		    i + 1);
		items[i] = text[i];
	}
	cr_expect_eq(policy_nat64_parse_list(items, POLICY_NAT64_MAX, &list,
			 &err),
	    0, "%s", err.msg);
	cr_expect_eq(list.n, POLICY_NAT64_MAX);
	cr_expect_eq(policy_nat64_parse_list(items, POLICY_NAT64_MAX + 1,
			 &list, &err),
	    EGRESS_ERR_TOO_BIG);
	cr_expect(strstr(err.msg, "65 NAT64 prefixes") != NULL, "%s", err.msg);
	cr_expect_eq(policy_nat64_parse_list(NULL, 1, &list, &err),
	    EGRESS_ERR_INVALID);
	cr_expect_eq(policy_nat64_parse_list(items, 1, NULL, &err),
	    EGRESS_ERR_INVALID);
	cr_expect_eq(policy_nat64_parse_list(NULL, 0, &list, &err), 0);
	cr_expect_eq(list.n, 0);
}

/* Many bad items: the message stays within bounds, lists the first ones
 * in order and counts the rest. */
Test(nat64, many_bad_items)
{
	const char *items[POLICY_NAT64_MAX];
	struct policy_nat64_list list;
	struct policy_err err;
	size_t i;

	for (i = 0; i < POLICY_NAT64_MAX; i++)
		items[i] = "bad";
	cr_assert_eq(policy_nat64_parse_list(items, POLICY_NAT64_MAX, &list,
			 &err),
	    EGRESS_ERR_INVALID);
	cr_expect(strlen(err.msg) < POLICY_MSG_MAX);
	cr_expect(strncmp(err.msg, "item 1 'bad': missing /<length>; item 2 ",
		      40) == 0,
	    "%s", err.msg);
	cr_expect(strstr(err.msg, "more bad items") != NULL, "%s", err.msg);
}

/* RFC 6052 section 2.4 examples: 192.0.2.33 under each prefix length. */
struct rfc_case {
	char prefix[48];
	unsigned len;
	char addr[48];
};

static struct rfc_case rfc_cases[] = {
	{ "2001:db8::", 32, "2001:db8:c000:221::" },
	{ "2001:db8:100::", 40, "2001:db8:1c0:2:21::" },
	{ "2001:db8:122::", 48, "2001:db8:122:c000:2:2100::" },
	{ "2001:db8:122:300::", 56, "2001:db8:122:3c0:0:221::" },
	{ "2001:db8:122:344::", 64, "2001:db8:122:344:c0:2:2100:0" },
	{ "2001:db8:122:344::", 96, "2001:db8:122:344::c000:221" },
};

ParameterizedTestParameters(nat64, rfc6052_examples)
{
	return cr_make_param_array(struct rfc_case, rfc_cases,
	    NELEM(rfc_cases));
}

ParameterizedTest(struct rfc_case *c, nat64, rfc6052_examples)
{
	static const uint8_t want[4] = { 192, 0, 2, 33 };
	struct policy_nat64_prefix p;
	struct policy_addr pa = must_parse(c->prefix), a = must_parse(c->addr);
	uint8_t v4[4] = { 0 };

	memset(&p, 0, sizeof(p));
	memcpy(p.prefix, pa.bytes, 16);
	p.len = c->len;
	cr_assert_eq(policy_nat64_decode(&p, a.bytes, v4), 1, "%s", c->addr);
	cr_expect_eq(memcmp(v4, want, 4), 0, "%s -> %u.%u.%u.%u", c->addr,
	    v4[0], v4[1], v4[2], v4[3]);
	/* Outside the prefix: no translation. */
	a.bytes[c->len / 8 - 1] ^= 0x01;
	cr_expect_eq(policy_nat64_decode(&p, a.bytes, v4), 0);
}

/*
 * Place v4 right after the prefix bit by bit, skipping the u-octet (bits
 * 64-71), with the u-octet and the suffix filled with junk that decoding
 * must ignore. Independent of the byte tables in nat64.c.
 */
static void
embed(uint8_t out[16], const uint8_t prefix[16], unsigned len,
    const uint8_t v4[4])
{
	unsigned bit = len, k, i;

	memcpy(out, prefix, 16);
	for (i = len / 8; i < 16; i++)
		out[i] = 0xa5;
	for (k = 0; k < 32; k++, bit++) {
		int v = (v4[k / 8] >> (7 - k % 8)) & 1;

		if (bit >= 64 && bit < 72)
			bit = 72;
		out[bit / 8] =
		    (uint8_t)((out[bit / 8] & ~(0x80u >> (bit % 8))) |
			((unsigned)v << (7 - bit % 8)));
	}
}

struct decode_case {
	char prefix[48]; /* "<ipv6>/<len>" */
	unsigned raw;	 /* class of the prefix itself, undeclared */
};

static struct decode_case decode_cases[] = {
	{ "2001:db8::/32", RSV },
	{ "2001:db8:100::/40", RSV },
	{ "2001:db8:122::/48", RSV },
	{ "2001:db8:122:300::/56", RSV },
	{ "2001:db8:122:344::/64", RSV },
	{ "2001:db8:122:344::/96", RSV },
	{ "fd00:64::/32", PRV },
	{ "fd00:64:6400::/40", PRV },
	{ "fd00:64:64::/48", PRV },
	{ "fd00:64:64:6400::/56", PRV },
	{ "fd00:64:64:64::/64", PRV },
	{ "fd00:64:64:64::/96", PRV },
	{ "2600:64::/32", PUB },
	{ "2600:64::/96", PUB },
	{ "64:ff9b:1::/48", RSV },
	{ "64:ff9b:1::/96", RSV },
};

ParameterizedTestParameters(nat64, decode_all_lengths)
{
	return cr_make_param_array(struct decode_case, decode_cases,
	    NELEM(decode_cases));
}

ParameterizedTest(struct decode_case *c, nat64, decode_all_lengths)
{
	static const struct {
		uint8_t v4[4];
		unsigned cls;
	} v4s[] = {
		{ { 8, 8, 8, 8 }, PUB },
		{ { 1, 1, 1, 1 }, PUB },
		{ { 10, 0, 0, 1 }, PRV },
		{ { 127, 0, 0, 1 }, LPB },
		{ { 127, 255, 0, 9 }, LPB },
		{ { 192, 168, 255, 255 }, PRV },
		{ { 169, 254, 169, 254 }, MET },
		{ { 100, 100, 100, 200 }, MET },
		{ { 168, 63, 129, 16 }, MET },
		{ { 0, 0, 0, 0 }, RSV },
		{ { 192, 0, 2, 1 }, RSV },
		{ { 255, 255, 255, 255 }, RSV },
	};
	struct policy_nat64_list list;
	struct policy_classify_ctx ctx;
	struct policy_addr a;
	uint8_t got[4];
	size_t i;

	must_list(c->prefix, &list);
	cr_assert_eq(list.n, 1);
	memset(&ctx, 0, sizeof(ctx));
	ctx.nat64 = &list;
	for (i = 0; i < NELEM(v4s); i++) {
		memset(&a, 0, sizeof(a));
		a.family = 6;
		embed(a.bytes, list.v[0].prefix, list.v[0].len, v4s[i].v4);
		cr_assert_eq(policy_nat64_decode(&list.v[0], a.bytes, got), 1);
		cr_expect_eq(memcmp(got, v4s[i].v4, 4), 0, "%s: decode",
		    c->prefix);
		/* Declared: only the translation counts. */
		cr_expect_eq(policy_addr_classify(&ctx, &a), v4s[i].cls,
		    "%s, v4 #%zu: %#x", c->prefix, i,
		    policy_addr_classify(&ctx, &a));
		/* Not declared: the raw class. */
		cr_expect_eq(policy_addr_classify(NULL, &a), c->raw,
		    "%s undeclared", c->prefix);
	}
}

struct overlap_case {
	char items[256];
	char addr[48];
	unsigned mask;
};

static struct overlap_case overlap_cases[] = {
	/* /32 reads 10.8.8.8, /40 reads 8.8.8.8. */
	{ "2001:db8::/32 2001:db8:a00::/40",
	    "2001:db8:a08:808:8::", PRV | PUB },
	/* Only the /32 applies. */
	{ "2001:db8::/32 2001:db8:a00::/40", "2001:db8:808:808:8::", PUB },
	/* /32 reads 169.254.8.8, /48 reads 8.8.8.8: metadata joins. */
	{ "2001:db8::/32 2001:db8:a9fe::/48",
	    "2001:db8:a9fe:808:8:800::", MET | PUB },
	/* A declared /32 over the well-known /96: 0.0.0.0 and 8.8.8.8. */
	{ "64:ff9b::/32", "64:ff9b::808:808", RSV | PUB },
	/* The well-known /96 declared again changes nothing. */
	{ "64:ff9b::/96 2001:db8::/32", "64:ff9b::808:808", PUB },
	/* Local-use NAT64, declared. */
	{ "64:ff9b:1::/48", "64:ff9b:1:808:8:800::", PUB },
	/* Three overlapping lengths, all public. */
	{ "2600::/32 2600:0:100::/40 2600:0:101::/48",
	    "2600:0:101:101:1:100::", PUB },
	/* Metadata IPv6 stays metadata under a declared prefix. */
	{ "fd00:ec2::/64", "fd00:ec2::254", MET | RSV },
	{ "fd20:ce::/96", "fd20:ce::254", MET | RSV },
	/* Loopback and IPv4-mapped are delivered by the kernel. */
	{ "::/32", "::1", RSV | LPB },
	{ "::/64", "::ffff:8.8.8.8", RSV | PUB },
	{ "::/64", "::ffff:127.0.0.1", RSV | LPB },
	/* Loopback behind a declared prefix, beside a private reading. */
	{ "2001:db8::/32 2001:db8:7f00::/40",
	    "2001:db8:7f0a:1:5::", LPB | PRV },
};

ParameterizedTestParameters(nat64, overlap_both_orders)
{
	return cr_make_param_array(struct overlap_case, overlap_cases,
	    NELEM(overlap_cases));
}

ParameterizedTest(struct overlap_case *c, nat64, overlap_both_orders)
{
	struct policy_nat64_list list, rev;
	struct policy_classify_ctx ctx;
	struct policy_addr a = must_parse(c->addr);
	size_t i;

	must_list(c->items, &list);
	rev = list;
	for (i = 0; i < list.n; i++)
		rev.v[i] = list.v[list.n - 1 - i];
	memset(&ctx, 0, sizeof(ctx));
	ctx.nat64 = &list;
	cr_expect_eq(policy_addr_classify(&ctx, &a), c->mask,
	    "%s under '%s': %#x", c->addr, c->items,
	    policy_addr_classify(&ctx, &a));
	ctx.nat64 = &rev;
	cr_expect_eq(policy_addr_classify(&ctx, &a), c->mask,
	    "%s under reversed '%s': %#x", c->addr, c->items,
	    policy_addr_classify(&ctx, &a));
}

Test(nat64, lengths)
{
	unsigned len;

	for (len = 0; len <= 128; len++)
		cr_expect_eq(policy_nat64_len_is_valid(len),
		    len == 32 || len == 40 || len == 48 || len == 56 ||
			len == 64 || len == 96,
		    "len %u", len);
}
