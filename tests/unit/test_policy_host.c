/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for policy_host_parse() and policy_host_is_local_name(): the
 * request host syntax (folding, trailing dots, labels, numeric hosts that
 * are not canonical dotted quads, bracketed IPv6) and local-by-nature
 * names, table-driven over accepted and rejected forms with messages.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#include "policy/policy.h"

struct host_case {
	char in[80];
	int ok;
	enum policy_host_kind kind;
	char want[64]; /* canonical name on success, msg substring */
};

static struct host_case host_cases[] = {
	/* Names: folded, one trailing dot removed. */
	{ "example.com", 1, POLICY_HOST_NAME, "example.com" },
	{ "Example.COM", 1, POLICY_HOST_NAME, "example.com" },
	{ "example.com.", 1, POLICY_HOST_NAME, "example.com" },
	{ "a-b.x1.example", 1, POLICY_HOST_NAME, "a-b.x1.example" },
	{ "xn--bcher-kva.de", 1, POLICY_HOST_NAME, "xn--bcher-kva.de" },
	{ "localhost", 1, POLICY_HOST_NAME, "localhost" },
	{ "1e100.net", 1, POLICY_HOST_NAME, "1e100.net" },
	{ "123.example", 1, POLICY_HOST_NAME, "123.example" },
	{ "0x1.example", 1, POLICY_HOST_NAME, "0x1.example" },
	{ "example.0xg", 1, POLICY_HOST_NAME, "example.0xg" },
	{ "example.com..", 0, 0, "more than one trailing dot" },
	{ "example.com...", 0, 0, "more than one trailing dot" },
	{ ".", 0, 0, "empty host" },
	{ "..", 0, 0, "more than one trailing dot" },
	{ "", 0, 0, "empty host" },
	{ ".example.com", 0, 0, "empty label" },
	{ "a..b", 0, 0, "empty label" },
	{ "a_b.example", 0, 0, "'_'" },
	{ "-a.example", 0, 0, "start or end with '-'" },
	{ "a-.example", 0, 0, "start or end with '-'" },
	{ "a%2eb.example", 0, 0, "percent-escape" },
	{ "b\xc3\xbc"
	  "cher.de",
	    0, 0, "non-ASCII" },
	{ "a b.example", 0, 0, "whitespace or control" },
	{ "a\tb.example", 0, 0, "whitespace or control" },
	{ "example.com\r", 0, 0, "whitespace or control" },
	{ "a*.example", 0, 0, "invalid character" },
	{ "*.example.com", 0, 0, "invalid character" },
	{ "a\\b.example", 0, 0, "invalid character" },
	{ "a/b", 0, 0, "invalid character" },
	{ "example.com:80", 0, 0, "no port" },
	{ "::1", 0, 0, "brackets" },
	{ "[example.com]", 0, 0, "only an IPv6" },
	{ "[127.0.0.1]", 0, 0, "invalid IPv6" },
	/* IPv4: canonical dotted quads only. */
	{ "127.0.0.1", 1, POLICY_HOST_IPV4, "127.0.0.1" },
	{ "127.0.0.1.", 1, POLICY_HOST_IPV4, "127.0.0.1" },
	{ "0.0.0.0", 1, POLICY_HOST_IPV4, "0.0.0.0" },
	{ "255.255.255.255", 1, POLICY_HOST_IPV4, "255.255.255.255" },
	{ "127.0.0.1..", 0, 0, "more than one trailing dot" },
	{ "127.1", 0, 0, "write '127.0.0.1'" },
	{ "0x7f.0.0.1", 0, 0, "write '127.0.0.1'" },
	{ "0X7F.0.0.1", 0, 0, "write '127.0.0.1'" },
	{ "2130706433", 0, 0, "write '127.0.0.1'" },
	{ "0177.0.0.1", 0, 0, "write '127.0.0.1'" },
	{ "010.0.0.1", 0, 0, "write '8.0.0.1'" },
	{ "1.2.3", 0, 0, "write '1.2.0.3'" },
	{ "0x7f000001", 0, 0, "write '127.0.0.1'" },
	{ "256.0.0.1", 0, 0, "canonical dotted quad" },
	{ "1.2.3.4.5", 0, 0, "canonical dotted quad" },
	{ "1.2.3.256", 0, 0, "canonical dotted quad" },
	{ "foo.123", 0, 0, "canonical dotted quad" },
	{ "foo.0x1f", 0, 0, "canonical dotted quad" },
	{ "foo.0x", 0, 0, "canonical dotted quad" },
	{ "08.0.0.1", 0, 0, "canonical dotted quad" },
	{ "1.2.3.04", 0, 0, "write '1.2.3.4'" },
	/* IPv6: brackets only, folded to the inet_ntop spelling. */
	{ "[::1]", 1, POLICY_HOST_IPV6, "::1" },
	{ "[2001:DB8::1]", 1, POLICY_HOST_IPV6, "2001:db8::1" },
	{ "[2001:0db8:0:0::1]", 1, POLICY_HOST_IPV6, "2001:db8::1" },
	{ "[::ffff:10.0.0.1]", 1, POLICY_HOST_IPV6, "::ffff:10.0.0.1" },
	{ "[64:ff9b::10.0.0.1]", 1, POLICY_HOST_IPV6, "64:ff9b::a00:1" },
	{ "[fe80::1%eth0]", 0, 0, "zone id" },
	{ "[fe80::1%25eth0]", 0, 0, "zone id" },
	{ "[::1", 0, 0, "unterminated" },
	{ "[]", 0, 0, "empty brackets" },
	{ "[::1]]", 0, 0, "only an IPv6" },
	{ "[1::2::3]", 0, 0, "invalid IPv6" },
	{ "[v1.fe]", 0, 0, "only an IPv6" },
	{ "[::1]:443", 0, 0, "unterminated" },
};

ParameterizedTestParameters(host, table)
{
	return cr_make_param_array(struct host_case, host_cases,
	    sizeof(host_cases) / sizeof(host_cases[0]));
}

ParameterizedTest(struct host_case *c, host, table)
{
	struct policy_host h;
	struct policy_err err;
	int r;

	memset(&err, 0, sizeof(err));
	memset(&h, 0xa5, sizeof(h));
	r = policy_host_parse(c->in, strlen(c->in), &h, &err);
	if (c->ok) {
		cr_assert_eq(r, 0, "'%s': %s", c->in, err.msg);
		cr_assert_eq(h.kind, c->kind, "'%s'", c->in);
		cr_assert_str_eq(h.name, c->want, "'%s'", c->in);
	} else {
		cr_assert_eq(r, EGRESS_ERR_INVALID, "'%s' accepted", c->in);
		cr_assert(strstr(err.msg, c->want) != NULL,
		    "'%s': message '%s' lacks '%s'", c->in, err.msg, c->want);
	}
}

Test(host, ip_bytes)
{
	static const uint8_t v4[4] = { 192, 0, 2, 10 };
	static const uint8_t v6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 };
	struct policy_host h;

	cr_assert_eq(policy_host_parse("192.0.2.10", 10, &h, NULL), 0);
	cr_assert_eq(memcmp(h.addr, v4, 4), 0);
	cr_assert_eq(policy_host_parse("[2001:db8::1]", 13, &h, NULL), 0);
	cr_assert_eq(memcmp(h.addr, v6, 16), 0);
}

Test(host, length_limits)
{
	char buf[400];
	struct policy_host h;
	struct policy_err err;

	/* A 63-byte label is fine, 64 is not. */
	memset(buf, 'a', 63);
	memcpy(buf + 63, ".example", 9);
	cr_assert_eq(policy_host_parse(buf, strlen(buf), &h, &err), 0);
	memset(buf, 'a', 64);
	memcpy(buf + 64, ".example", 9);
	cr_assert_eq(policy_host_parse(buf, strlen(buf), &h, &err),
	    EGRESS_ERR_INVALID);
	cr_assert(strstr(err.msg, "63") != NULL, "%s", err.msg);

	/* 253 bytes (plus an optional trailing dot) is fine, 254 is not. */
	memset(buf, 0, sizeof(buf));
	for (size_t i = 0; i < 253; i++)
		buf[i] = (i % 2) ? '.' : 'a';
	cr_assert_eq(policy_host_parse(buf, 253, &h, &err), 0, "%s", err.msg);
	cr_assert_eq(strlen(h.name), 253);
	buf[253] = '.';
	cr_assert_eq(policy_host_parse(buf, 254, &h, &err), 0, "%s", err.msg);
	cr_assert_eq(strlen(h.name), 253);
	buf[253] = 'a';
	buf[252] = 'a';
	cr_assert_eq(policy_host_parse(buf, 254, &h, &err),
	    EGRESS_ERR_INVALID);
	cr_assert(strstr(err.msg, "253") != NULL, "%s", err.msg);
}

Test(host, embedded_nul_and_len)
{
	struct policy_host h;

	/* len, not the NUL, bounds the input. */
	cr_assert_eq(policy_host_parse("a\0b", 3, &h, NULL),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(policy_host_parse("example.comXX", 11, &h, NULL), 0);
	cr_assert_str_eq(h.name, "example.com");
	cr_assert_eq(policy_host_parse(NULL, 0, &h, NULL), EGRESS_ERR_INVALID);
}

Test(host, no_write_on_failure)
{
	struct policy_host h, before;

	memset(&h, 0x5a, sizeof(h));
	before = h;
	cr_assert_eq(policy_host_parse("127.1", 5, &h, NULL),
	    EGRESS_ERR_INVALID);
	// NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): unchanged means byte for byte
	cr_assert_eq(memcmp(&h, &before, sizeof(h)), 0);
}

struct local_case {
	char in[64];
	int local;
};

static struct local_case local_cases[] = {
	{ "localhost", 1 },
	{ "LOCALHOST.", 1 },
	{ "a.localhost", 1 },
	{ "local", 1 },
	{ "printer.local", 1 },
	{ "internal", 1 },
	{ "db.internal", 1 },
	{ "home.arpa", 1 },
	{ "nas.home.arpa", 1 },
	{ "arpa", 0 },
	{ "xhome.arpa", 0 },
	{ "notlocalhost", 0 },
	{ "localhost.example.com", 0 },
	{ "mylocal", 0 },
	{ "internal.example", 0 },
	{ "example.com", 0 },
	{ "127.0.0.1", 0 },
	{ "[::1]", 0 },
};

ParameterizedTestParameters(host, local)
{
	return cr_make_param_array(struct local_case, local_cases,
	    sizeof(local_cases) / sizeof(local_cases[0]));
}

ParameterizedTest(struct local_case *c, host, local)
{
	struct policy_host h;

	cr_assert_eq(policy_host_parse(c->in, strlen(c->in), &h, NULL), 0,
	    "%s", c->in);
	cr_assert_eq(policy_host_is_local_name(&h), c->local, "%s", c->in);
}

Test(host, local_null)
{
	cr_assert_eq(policy_host_is_local_name(NULL), 0);
}
