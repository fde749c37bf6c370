/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for the entry grammar (policy_entry_parse/format): every
 * accepted and rejected form of the grammar with the message it
 * must carry (the canonical spelling to write where one exists), the
 * public-suffix callback and its failure modes, and the permission and
 * transport name tables.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#include "policy/policy.h"

/* A fake ICANN public-suffix list: no private section, no "*" rule. */
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
		"jp",
		"tokyo.jp",
	};
	size_t i;

	if (ctx != NULL)
		(*(int *)ctx)++;
	for (i = 0; i < sizeof(list) / sizeof(list[0]); i++)
		if (strcmp(list[i], domain) == 0)
			return 1;
	return 0;
}

static int
broken_psl(void *ctx, const char *domain)
{
	(void)ctx;
	(void)domain;
	return -1;
}

struct entry_case {
	char in[80];
	int ok;
	enum policy_entry_kind kind;
	enum policy_host_kind hkind;
	char want[96]; /* formatted entry on success, msg substring */
};

static struct entry_case entry_cases[] = {
	/* Accepted. */
	{ "example.com", 1, POLICY_ENTRY_EXACT, POLICY_HOST_NAME,
	    "example.com" },
	{ "api.weather.example", 1, POLICY_ENTRY_EXACT, POLICY_HOST_NAME,
	    "api.weather.example" },
	{ "localhost", 1, POLICY_ENTRY_EXACT, POLICY_HOST_NAME, "localhost" },
	{ "com", 1, POLICY_ENTRY_EXACT, POLICY_HOST_NAME, "com" },
	{ "xn--bcher-kva.de", 1, POLICY_ENTRY_EXACT, POLICY_HOST_NAME,
	    "xn--bcher-kva.de" },
	{ "*.example.com", 1, POLICY_ENTRY_SUFFIX, POLICY_HOST_NAME,
	    "*.example.com" },
	{ "*.tiles.weather.example", 1, POLICY_ENTRY_SUFFIX, POLICY_HOST_NAME,
	    "*.tiles.weather.example" },
	{ "*.s3.amazonaws.com", 1, POLICY_ENTRY_SUFFIX, POLICY_HOST_NAME,
	    "*.s3.amazonaws.com" },
	{ "*.example.co.uk", 1, POLICY_ENTRY_SUFFIX, POLICY_HOST_NAME,
	    "*.example.co.uk" },
	{ "*.home.arpa", 1, POLICY_ENTRY_SUFFIX, POLICY_HOST_NAME,
	    "*.home.arpa" },
	{ "*.1.example", 1, POLICY_ENTRY_SUFFIX, POLICY_HOST_NAME,
	    "*.1.example" },
	{ "10.0.0.1", 1, POLICY_ENTRY_EXACT, POLICY_HOST_IPV4, "10.0.0.1" },
	{ "0.0.0.0", 1, POLICY_ENTRY_EXACT, POLICY_HOST_IPV4, "0.0.0.0" },
	{ "::1", 1, POLICY_ENTRY_EXACT, POLICY_HOST_IPV6, "::1" },
	{ "[::1]", 1, POLICY_ENTRY_EXACT, POLICY_HOST_IPV6, "::1" },
	{ "2001:db8::1", 1, POLICY_ENTRY_EXACT, POLICY_HOST_IPV6,
	    "2001:db8::1" },
	{ "[2001:db8::1]", 1, POLICY_ENTRY_EXACT, POLICY_HOST_IPV6,
	    "2001:db8::1" },
	{ "::ffff:10.0.0.1", 1, POLICY_ENTRY_EXACT, POLICY_HOST_IPV6,
	    "::ffff:10.0.0.1" },
	{ "64:ff9b::a00:1", 1, POLICY_ENTRY_EXACT, POLICY_HOST_IPV6,
	    "64:ff9b::a00:1" },

	/* Not canonical: the spelling to write is shown. */
	{ "Example.com", 0, 0, 0, "write 'example.com'" },
	{ "EXAMPLE.COM", 0, 0, 0, "write 'example.com'" },
	{ "example.com.", 0, 0, 0, "write 'example.com'" },
	{ ".example.com", 0, 0, 0, "write 'example.com'" },
	{ " example.com", 0, 0, 0, "write 'example.com'" },
	{ "example.com ", 0, 0, 0, "write 'example.com'" },
	{ "\texample.com\n", 0, 0, 0, "write 'example.com'" },
	{ "*.Example.com", 0, 0, 0, "write '*.example.com'" },
	{ "*.example.com.", 0, 0, 0, "write '*.example.com'" },
	{ "127.1", 0, 0, 0, "write '127.0.0.1'" },
	{ "0x7f.0.0.1", 0, 0, 0, "write '127.0.0.1'" },
	{ "2130706433", 0, 0, 0, "write '127.0.0.1'" },
	{ "010.0.0.1", 0, 0, 0, "write '8.0.0.1'" },
	{ "1.2.3", 0, 0, 0, "write '1.2.0.3'" },
	{ "10.0.0.1.", 0, 0, 0, "write '10.0.0.1'" },
	{ "2001:0db8::1", 0, 0, 0, "write '2001:db8::1'" },
	{ "2001:DB8::1", 0, 0, 0, "write '2001:db8::1'" },
	{ "[2001:0db8::1]", 0, 0, 0, "write '2001:db8::1'" },
	{ "2001:db8:0:0:0:0:0:1", 0, 0, 0, "write '2001:db8::1'" },
	{ "::ffff:a00:1", 0, 0, 0, "write '::ffff:10.0.0.1'" },
	{ "https://example.com/", 0, 0, 0, "write 'example.com'" },
	{ "example.com:8443", 0, 0, 0, "write 'example.com'" },
	{ "example.com:", 0, 0, 0, "write 'example.com'" },
	{ "[::1]:443", 0, 0, 0, "write '::1'" },
	{ "[example.com]", 0, 0, 0, "write 'example.com'" },

	/* Rejected outright. */
	{ "", 0, 0, 0, "empty entry" },
	{ "   ", 0, 0, 0, "empty entry" },
	{ ".", 0, 0, 0, "empty entry" },
	{ "*", 0, 0, 0, "no allow-all" },
	{ "*.", 0, 0, 0, "needs a suffix" },
	{ "**.x", 0, 0, 0, "one leading '*.'" },
	{ "**.example.com", 0, 0, 0, "one leading '*.'" },
	{ "*x", 0, 0, 0, "one leading '*.'" },
	{ "*example.com", 0, 0, 0, "one leading '*.'" },
	{ "*.*.example.com", 0, 0, 0, "one leading '*.'" },
	{ "a.*.b", 0, 0, 0, "only as one leading '*.'" },
	{ "example.*", 0, 0, 0, "only as one leading '*.'" },
	{ "ex*ample.com", 0, 0, 0, "only as one leading '*.'" },
	{ "example.com/", 0, 0, 0, "not a URL" },
	{ "example.com/path", 0, 0, 0, "not a URL" },
	{ "user@example.com", 0, 0, 0, "userinfo" },
	{ "example.com?q", 0, 0, 0, "query" },
	{ "example.com#f", 0, 0, 0, "fragment" },
	{ "example\\.com", 0, 0, 0, "not a URL" },
	{ "[::1]:", 0, 0, 0, "write '::1'" },
	{ ":443", 0, 0, 0, "port is not part" },
	{ "fe80::1%eth0", 0, 0, 0, "zone id" },
	{ "[fe80::1%eth0]", 0, 0, 0, "zone id" },
	{ "exa%6dple.com", 0, 0, 0, "percent-escape" },
	{ "[example.com", 0, 0, 0, "unbalanced" },
	{ "[]", 0, 0, 0, "only for IPv6" },
	{ "[10.0.0.1]", 0, 0, 0, "only for IPv6" },
	{ "[::1]x", 0, 0, 0, "after ']'" },
	{ "1::2::3", 0, 0, 0, "invalid IPv6" },
	{ "*.10.0.0.1", 0, 0, 0, "cannot cover an IP literal" },
	{ "*.::1", 0, 0, 0, "cannot cover an IP literal" },
	{ "*.[::1]", 0, 0, 0, "cannot cover an IP literal" },
	{ "*.0.0.1", 0, 0, 0, "last label is numeric" },
	{ "*.169.254", 0, 0, 0, "last label is numeric" },
	{ "*.example.0x1f", 0, 0, 0, "last label is numeric" },
	{ "*.com", 0, 0, 0, "single label" },
	{ "*.internal", 0, 0, 0, "single label" },
	{ "*.localhost", 0, 0, 0, "single label" },
	{ "*.co.uk", 0, 0, 0, "'co.uk' is a public suffix" },
	{ "*.com.au", 0, 0, 0, "'com.au' is a public suffix" },
	{ "*.tokyo.jp", 0, 0, 0, "public suffix" },
	{ "a_b.example", 0, 0, 0, "'_'" },
	{ "*.a_b.example", 0, 0, 0, "'_'" },
	{ "-a.example", 0, 0, 0, "'-'" },
	{ "a-.example", 0, 0, 0, "'-'" },
	{ "a..example", 0, 0, 0, "empty label" },
	{ "*..example", 0, 0, 0, "empty label" },
	{ "exa mple.com", 0, 0, 0, "whitespace inside" },
	{ "example.com\x01", 0, 0, 0, "control character" },
	{ "b\xc3\xbc"
	  "cher.de",
	    0, 0, 0, "A-label" },
	{ "256.0.0.1", 0, 0, 0, "canonical dotted quad" },
	{ "foo.123", 0, 0, 0, "canonical dotted quad" },
	{ "a=b.example", 0, 0, 0, "invalid character" },
};

ParameterizedTestParameters(entry, table)
{
	return cr_make_param_array(struct entry_case, entry_cases,
	    sizeof(entry_cases) / sizeof(entry_cases[0]));
}

ParameterizedTest(struct entry_case *c, entry, table)
{
	struct policy_entry e, before;
	struct policy_err err;
	char buf[300];
	int r;

	memset(&err, 0, sizeof(err));
	memset(&e, 0x5a, sizeof(e));
	before = e;
	r = policy_entry_parse(c->in, strlen(c->in), fake_psl, NULL, &e, &err);
	if (!c->ok) {
		cr_assert_eq(r, EGRESS_ERR_INVALID, "'%s' accepted", c->in);
		cr_assert(strstr(err.msg, c->want) != NULL,
		    "'%s': message '%s' lacks '%s'", c->in, err.msg, c->want);
		// NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): unchanged means byte for byte
		cr_assert_eq(memcmp(&e, &before, sizeof(e)), 0,
		    "'%s': output written on failure", c->in);
		return;
	}
	cr_assert_eq(r, 0, "'%s': %s", c->in, err.msg);
	cr_assert_eq(e.kind, c->kind, "'%s'", c->in);
	cr_assert_eq(e.host.kind, c->hkind, "'%s'", c->in);
	r = policy_entry_format(&e, buf, sizeof(buf));
	cr_assert_eq(r, (int)strlen(c->want), "'%s'", c->in);
	cr_assert_str_eq(buf, c->want);
	/* What format prints parses back to the same entry. */
	{
		struct policy_entry e2;

		cr_assert_eq(policy_entry_parse(buf, strlen(buf), fake_psl,
				 NULL, &e2, &err),
		    0, "'%s': %s", buf, err.msg);
		cr_assert_eq(e2.kind, e.kind);
		cr_assert_eq(e2.host.kind, e.host.kind);
		cr_assert_str_eq(e2.host.name, e.host.name);
		cr_assert_eq(memcmp(e2.host.addr, e.host.addr, 16), 0);
	}
}

Test(entry, ip_bytes)
{
	static const uint8_t v4[4] = { 10, 0, 0, 1 };
	static const uint8_t
	    v6[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 1 };
	struct policy_entry e;

	cr_assert_eq(policy_entry_parse("10.0.0.1", 8, fake_psl, NULL, &e,
			 NULL),
	    0);
	cr_assert_eq(memcmp(e.host.addr, v4, 4), 0);
	cr_assert_eq(policy_entry_parse("::ffff:10.0.0.1", 15, fake_psl, NULL,
			 &e, NULL),
	    0);
	cr_assert_eq(memcmp(e.host.addr, v6, 16), 0);
}

Test(entry, psl_null_fails_closed)
{
	struct policy_entry e;
	struct policy_err err;

	cr_assert_eq(policy_entry_parse("*.example.com", 13, NULL, NULL, &e,
			 &err),
	    EGRESS_ERR_INVALID);
	cr_assert(strstr(err.msg, "public-suffix") != NULL, "%s", err.msg);
	cr_assert_eq(policy_entry_parse("example.com", 11, NULL, NULL, &e,
			 &err),
	    EGRESS_ERR_INVALID);
}

Test(entry, psl_error_fails_closed)
{
	struct policy_entry e;
	struct policy_err err;

	cr_assert_eq(policy_entry_parse("*.example.com", 13, broken_psl, NULL,
			 &e, &err),
	    EGRESS_ERR_INVALID);
	cr_assert(strstr(err.msg, "public suffix") != NULL, "%s", err.msg);
	/* Exact entries do not consult the list. */
	cr_assert_eq(policy_entry_parse("example.com", 11, broken_psl, NULL,
			 &e, &err),
	    0);
}

Test(entry, psl_gets_the_suffix)
{
	struct policy_entry e;
	int calls = 0;

	cr_assert_eq(policy_entry_parse("*.example.co.uk", 15, fake_psl,
			 &calls, &e, NULL),
	    0);
	cr_assert_eq(calls, 1);
	cr_assert_str_eq(e.host.name, "example.co.uk");
	cr_assert_eq(policy_entry_parse("example.co.uk", 13, fake_psl, &calls,
			 &e, NULL),
	    0);
	cr_assert_eq(calls, 1, "exact entries must not need the list");
}

Test(entry, length_limits)
{
	char buf[300];
	struct policy_entry e;
	struct policy_err err;

	for (size_t i = 0; i < 253; i++)
		buf[i] = (i % 2) ? '.' : 'a';
	buf[253] = '\0';
	cr_assert_eq(policy_entry_parse(buf, 253, fake_psl, NULL, &e, &err), 0,
	    "%s", err.msg);
	buf[252] = 'a';
	buf[253] = 'a';
	buf[254] = '\0';
	cr_assert_eq(policy_entry_parse(buf, 254, fake_psl, NULL, &e, &err),
	    EGRESS_ERR_INVALID);
	cr_assert(strstr(err.msg, "253") != NULL, "%s", err.msg);

	/* "*." and a 251-byte suffix: "a." and it make a 253-byte name. */
	buf[0] = '*';
	buf[1] = '.';
	for (size_t i = 0; i < 251; i++)
		buf[i + 2] = (i % 2) ? '.' : 'b';
	buf[253] = '\0';
	cr_assert_eq(policy_entry_parse(buf, 253, fake_psl, NULL, &e, &err), 0,
	    "%s", err.msg);
	cr_assert_eq(policy_entry_format(&e, buf, sizeof(buf)), 253);
	/* A 253-byte suffix has no subdomain that fits in a name. */
	for (size_t i = 0; i < 253; i++)
		buf[i + 2] = (i % 2) ? '.' : 'b';
	buf[255] = '\0';
	cr_assert_eq(policy_entry_parse(buf, 255, fake_psl, NULL, &e, &err),
	    EGRESS_ERR_INVALID);
	cr_assert(strstr(err.msg, "251") != NULL, "%s", err.msg);

	/* A long non-canonical name still gets a useful message. */
	for (size_t i = 0; i < 253; i++)
		buf[i] = (i % 2) ? '.' : 'A';
	buf[253] = '\0';
	cr_assert_eq(policy_entry_parse(buf, 253, fake_psl, NULL, &e, &err),
	    EGRESS_ERR_INVALID);
	cr_assert(strstr(err.msg, "lowercase") != NULL, "%s", err.msg);
	cr_assert(strstr(err.msg, "write '") == NULL,
	    "a cut spelling must not be shown: %s", err.msg);

	memset(buf, 'a', 64);
	memcpy(buf + 64, ".example", 9);
	cr_assert_eq(policy_entry_parse(buf, strlen(buf), fake_psl, NULL, &e,
			 &err),
	    EGRESS_ERR_INVALID);
	cr_assert(strstr(err.msg, "63") != NULL, "%s", err.msg);
}

Test(entry, embedded_nul)
{
	struct policy_entry e;
	struct policy_err err;

	cr_assert_eq(policy_entry_parse("example.com\0.evil", 17, fake_psl,
			 NULL, &e, &err),
	    EGRESS_ERR_INVALID);
	cr_assert(strstr(err.msg, "control") != NULL, "%s", err.msg);
}

/* An IPv6 entry holds exactly the host policy_host_parse() makes of the
 * bracketed literal (kind, spelling, bytes, and zeros after the name). */
Test(entry, ipv6_host_as_parsed)
{
	static const char *const v6[] = {
		"::1",
		"2001:db8::1",
		"::ffff:10.0.0.1",
		"fe80::1:2:3:4",
		"1:2:3:4:5:6:7:8",
		"64:ff9b::a9fe:a9fe",
	};
	struct policy_entry e;
	struct policy_host h;
	char br[64];
	size_t i;

	for (i = 0; i < sizeof(v6) / sizeof(v6[0]); i++) {
		int r = snprintf(br, sizeof(br), "[%s]", v6[i]);

		memset(&e, 0xa5, sizeof(e));
		memset(&h, 0, sizeof(h));
		cr_assert_eq(policy_entry_parse(v6[i], strlen(v6[i]), fake_psl,
				 NULL, &e, NULL),
		    0, "%s", v6[i]);
		cr_assert_eq(policy_host_parse(br, (size_t)r, &h, NULL), 0);
		cr_assert_eq(e.kind, POLICY_ENTRY_EXACT);
		cr_assert_eq(e.host.kind, h.kind);
		cr_assert_eq(memcmp(e.host.name, h.name, sizeof(h.name)), 0,
		    "%s", v6[i]);
		cr_assert_eq(memcmp(e.host.addr, h.addr, sizeof(h.addr)), 0,
		    "%s", v6[i]);
	}
}

/* Like snprintf(): a cut result is NUL-terminated and the length that
 * would have been written is refused. */
Test(entry, format_cuts_like_snprintf)
{
	struct policy_entry e;
	char buf[16];

	cr_assert_eq(policy_entry_parse("*.example.com", 13, fake_psl, NULL,
			 &e, NULL),
	    0);
	memset(buf, 'x', sizeof(buf));
	cr_assert_eq(policy_entry_format(&e, buf, 5), EGRESS_ERR_TOO_BIG);
	cr_assert_str_eq(buf, "*.ex");
	cr_assert_eq(buf[5], 'x');
	memset(buf, 'x', sizeof(buf));
	cr_assert_eq(policy_entry_format(&e, buf, 1), EGRESS_ERR_TOO_BIG);
	cr_assert_eq(buf[0], '\0');
	cr_assert_eq(buf[1], 'x');
	cr_assert_eq(policy_entry_format(&e, buf, 0), EGRESS_ERR_TOO_BIG);
	cr_assert_eq(buf[0], '\0');
	cr_assert_eq(policy_entry_parse("a.example", 9, fake_psl, NULL, &e,
			 NULL),
	    0);
	cr_assert_eq(policy_entry_format(&e, buf, 10), 9);
	cr_assert_str_eq(buf, "a.example");
	cr_assert_eq(policy_entry_format(&e, buf, 9), EGRESS_ERR_TOO_BIG);
	cr_assert_str_eq(buf, "a.exampl");
}

Test(entry, format_errors)
{
	struct policy_entry e;
	char small[5];

	cr_assert_eq(policy_entry_parse("*.example.com", 13, fake_psl, NULL,
			 &e, NULL),
	    0);
	cr_assert_eq(policy_entry_format(&e, small, sizeof(small)),
	    EGRESS_ERR_TOO_BIG);
	cr_assert_eq(policy_entry_format(&e, small, 0), EGRESS_ERR_TOO_BIG);
	cr_assert_eq(policy_entry_format(NULL, small, sizeof(small)),
	    EGRESS_ERR_INVALID);
	e.kind = 7;
	cr_assert_eq(policy_entry_format(&e, small, sizeof(small)),
	    EGRESS_ERR_INVALID);
}

Test(entry, permissions)
{
	cr_assert_eq(policy_permission_parse("http_client", 11),
	    (int)POLICY_PERM_HTTP_CLIENT);
	cr_assert_eq(policy_permission_parse("websocket_client", 16),
	    (int)POLICY_PERM_WEBSOCKET_CLIENT);
	cr_assert_eq(policy_permission_parse("socket_client", 13),
	    (int)POLICY_PERM_SOCKET_CLIENT);
	cr_assert_eq(policy_permission_parse("http_client", 4),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(policy_permission_parse("HTTP_CLIENT", 11),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(policy_permission_parse("http_clientx", 12),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(policy_permission_parse("", 0), EGRESS_ERR_INVALID);
	cr_assert_eq(policy_permission_parse(NULL, 0), EGRESS_ERR_INVALID);
	cr_assert_str_eq(policy_permission_name(POLICY_PERM_HTTP_CLIENT),
	    "http_client");
	cr_assert_str_eq(policy_permission_name(POLICY_PERM_WEBSOCKET_CLIENT),
	    "websocket_client");
	cr_assert_str_eq(policy_permission_name(POLICY_PERM_SOCKET_CLIENT),
	    "socket_client");
	cr_assert_null(policy_permission_name(0));
	cr_assert_null(policy_permission_name(POLICY_PERM_HTTP_CLIENT |
	    POLICY_PERM_SOCKET_CLIENT));
	cr_assert_null(policy_permission_name(1u << 9));
}

Test(entry, transports)
{
	cr_assert_eq(policy_transport_parse("http"), POLICY_TRANSPORT_HTTP);
	cr_assert_eq(policy_transport_parse("websocket"),
	    POLICY_TRANSPORT_WEBSOCKET);
	cr_assert_eq(policy_transport_parse("tcp"), POLICY_TRANSPORT_TCP);
	cr_assert_eq(policy_transport_parse("tls"), POLICY_TRANSPORT_TLS);
	cr_assert_eq(policy_transport_parse("HTTP"), EGRESS_ERR_INVALID);
	cr_assert_eq(policy_transport_parse("https"), EGRESS_ERR_INVALID);
	cr_assert_eq(policy_transport_parse("ws"), EGRESS_ERR_INVALID);
	cr_assert_eq(policy_transport_parse(""), EGRESS_ERR_INVALID);
	cr_assert_eq(policy_transport_parse(NULL), EGRESS_ERR_INVALID);
	cr_assert_str_eq(policy_transport_name(POLICY_TRANSPORT_HTTP), "http");
	cr_assert_str_eq(policy_transport_name(POLICY_TRANSPORT_WEBSOCKET),
	    "websocket");
	cr_assert_str_eq(policy_transport_name(POLICY_TRANSPORT_TCP), "tcp");
	cr_assert_str_eq(policy_transport_name(POLICY_TRANSPORT_TLS), "tls");
	cr_assert_str_eq(policy_transport_name(0), "unknown");
	cr_assert_str_eq(policy_transport_name(99), "unknown");
	cr_assert_eq(policy_transport_permission(POLICY_TRANSPORT_HTTP),
	    POLICY_PERM_HTTP_CLIENT);
	cr_assert_eq(policy_transport_permission(POLICY_TRANSPORT_WEBSOCKET),
	    POLICY_PERM_WEBSOCKET_CLIENT);
	cr_assert_eq(policy_transport_permission(POLICY_TRANSPORT_TCP),
	    POLICY_PERM_SOCKET_CLIENT);
	cr_assert_eq(policy_transport_permission(POLICY_TRANSPORT_TLS),
	    POLICY_PERM_SOCKET_CLIENT);
	cr_assert_eq(policy_transport_permission(0), 0u);
	cr_assert_eq(policy_transport_permission(99), 0u);
}
