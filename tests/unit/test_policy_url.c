/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for destination parsing: RFC 3986 URLs (schemes, default
 * ports, authority rules, path and query location, fragments), URL
 * authorities with a default port, and HOST:PORT destinations, each
 * accepted and rejected form with the message it must carry.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#include "policy/policy.h"

struct url_case {
	char in[96];
	int ok;
	char scheme[8];
	char host[48];
	unsigned port;
	char path[32]; /* path and query; "" when absent */
	char msg[64];  /* substring of the message on failure */
};

static struct url_case url_cases[] = {
	{ "http://example.com", 1, "http", "example.com", 80, "", "" },
	{ "http://example.com/", 1, "http", "example.com", 80, "/", "" },
	{ "https://example.com", 1, "https", "example.com", 443, "", "" },
	{ "ws://example.com/chat", 1, "ws", "example.com", 80, "/chat", "" },
	{ "wss://example.com", 1, "wss", "example.com", 443, "", "" },
	{ "HTTPS://Example.COM:8443/a?b=c", 1, "https", "example.com", 8443,
	    "/a?b=c", "" },
	{ "http://example.com?q=1", 1, "http", "example.com", 80, "?q=1", "" },
	{ "http://example.com.:1/", 1, "http", "example.com", 1, "/", "" },
	{ "http://h:65535", 1, "http", "h", 65535, "", "" },
	{ "http://127.0.0.1/", 1, "http", "127.0.0.1", 80, "/", "" },
	{ "http://127.0.0.1./", 1, "http", "127.0.0.1", 80, "/", "" },
	{ "http://[::1]:8080/p", 1, "http", "::1", 8080, "/p", "" },
	{ "http://[2001:DB8::1]/", 1, "http", "2001:db8::1", 80, "/", "" },
	{ "http://h/a%20b/%7e", 1, "http", "h", 80, "/a%20b/%7e", "" },
	{ "http://h/a:b@c!$&'()*+,;=-._~", 1, "http", "h", 80,
	    "/a:b@c!$&'()*+,;=-._~", "" },
	{ "http://h//x", 1, "http", "h", 80, "//x", "" },

	/* Scheme and shape. */
	{ "ftp://example.com/", 0, "", "", 0, "", "unsupported scheme" },
	{ "httpx://example.com/", 0, "", "", 0, "", "unsupported scheme" },
	{ "file:///etc/passwd", 0, "", "", 0, "", "unsupported scheme" },
	{ "example.com", 0, "", "", 0, "", "absolute URL" },
	{ "//example.com/", 0, "", "", 0, "", "absolute URL" },
	{ "example.com:80", 0, "", "", 0, "", "unsupported scheme" },
	{ "1http://h/", 0, "", "", 0, "", "absolute URL" },
	{ "", 0, "", "", 0, "", "absolute URL" },
	{ "http:", 0, "", "", 0, "", "'//'" },
	{ "http:/h", 0, "", "", 0, "", "'//'" },
	{ "http:h", 0, "", "", 0, "", "'//'" },
	{ "http:\\\\h", 0, "", "", 0, "", "'//'" },
	{ "http:/\\h", 0, "", "", 0, "", "'//'" },
	{ " http://h/", 0, "", "", 0, "", "absolute URL" },
	/* Authority. */
	{ "http://", 0, "", "", 0, "", "empty host" },
	{ "http:///p", 0, "", "", 0, "", "empty host" },
	{ "http://:80/", 0, "", "", 0, "", "empty host" },
	{ "http://@h/", 0, "", "", 0, "", "userinfo" },
	{ "http://u@h/", 0, "", "", 0, "", "userinfo" },
	{ "http://u:p@h/", 0, "", "", 0, "", "userinfo" },
	{ "http://h\\@evil/", 0, "", "", 0, "", "'\\'" },
	{ "http://h\\x/", 0, "", "", 0, "", "'\\'" },
	{ "http://h x/", 0, "", "", 0, "", "whitespace or control" },
	{ "http://h\t/", 0, "", "", 0, "", "whitespace or control" },
	{ "http://h\r\n/", 0, "", "", 0, "", "whitespace or control" },
	{ "http://h\x7f/", 0, "", "", 0, "", "whitespace or control" },
	{ "http://h%2e/", 0, "", "", 0, "", "percent-escape" },
	{ "http://b\xc3\xbc"
	  "cher.de/",
	    0, "", "", 0, "", "non-ASCII" },
	{ "http://a_b.example/", 0, "", "", 0, "", "'_'" },
	{ "http://h..", 0, "", "", 0, "", "trailing dot" },
	/* Ports. */
	{ "http://h:/", 0, "", "", 0, "", "empty port" },
	{ "http://h:", 0, "", "", 0, "", "empty port" },
	{ "http://h:080/", 0, "", "", 0, "", "leading zero" },
	{ "http://h:00/", 0, "", "", 0, "", "leading zero" },
	{ "http://h:+80/", 0, "", "", 0, "", "sign" },
	{ "http://h:-80/", 0, "", "", 0, "", "sign" },
	{ "http://h:0/", 0, "", "", 0, "", "port 0" },
	{ "http://h:65536/", 0, "", "", 0, "", "over 65535" },
	{ "http://h:100000/", 0, "", "", 0, "", "over 65535" },
	{ "http://h:99999999999999999999/", 0, "", "", 0, "", "over 65535" },
	{ "http://h:8o/", 0, "", "", 0, "", "decimal digits" },
	{ "http://h:80:81/", 0, "", "", 0, "", "brackets" },
	/* IP literals. */
	{ "http://::1/", 0, "", "", 0, "", "brackets" },
	{ "http://[::1/", 0, "", "", 0, "", "unterminated" },
	{ "http://[::1]x/", 0, "", "", 0, "", "after ']'" },
	{ "http://[fe80::1%25eth0]/", 0, "", "", 0, "", "zone id" },
	{ "http://[example.com]/", 0, "", "", 0, "", "only an IPv6" },
	{ "http://0177.0.0.1/", 0, "", "", 0, "", "write '127.0.0.1'" },
	{ "http://127.1/", 0, "", "", 0, "", "write '127.0.0.1'" },
	{ "http://2130706433/", 0, "", "", 0, "", "write '127.0.0.1'" },
	{ "http://0x7f.1/", 0, "", "", 0, "", "write '127.0.0.1'" },
	{ "http://127.0.0.1../", 0, "", "", 0, "", "trailing dot" },
	/* Path, query, fragment. */
	{ "http://h/#", 0, "", "", 0, "", "fragment" },
	{ "http://h#f", 0, "", "", 0, "", "fragment" },
	{ "http://h/a#b", 0, "", "", 0, "", "fragment" },
	{ "http://h/a b", 0, "", "", 0, "", "path or query" },
	{ "http://h/a\\b", 0, "", "", 0, "", "path or query" },
	{ "http://h/a\r\nHost: x", 0, "", "", 0, "", "path or query" },
	{ "http://h/\xc3\xa9", 0, "", "", 0, "", "path or query" },
	{ "http://h/%", 0, "", "", 0, "", "percent-escape" },
	{ "http://h/%4", 0, "", "", 0, "", "percent-escape" },
	{ "http://h/%zz", 0, "", "", 0, "", "percent-escape" },
	{ "http://h/[x]", 0, "", "", 0, "", "path or query" },
	{ "http://h/x\"", 0, "", "", 0, "", "path or query" },
};

ParameterizedTestParameters(url, table)
{
	return cr_make_param_array(struct url_case, url_cases,
	    sizeof(url_cases) / sizeof(url_cases[0]));
}

ParameterizedTest(struct url_case *c, url, table)
{
	struct policy_dest d, before;
	struct policy_err err;
	size_t len = strlen(c->in);
	int r;

	memset(&err, 0, sizeof(err));
	memset(&d, 0x5a, sizeof(d));
	before = d;
	r = policy_url_parse(c->in, len, &d, &err);
	if (!c->ok) {
		cr_assert_eq(r, EGRESS_ERR_INVALID, "'%s' accepted", c->in);
		cr_assert(strstr(err.msg, c->msg) != NULL,
		    "'%s': message '%s' lacks '%s'", c->in, err.msg, c->msg);
		// NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): unchanged means byte for byte
		cr_assert_eq(memcmp(&d, &before, sizeof(d)), 0);
		return;
	}
	cr_assert_eq(r, 0, "'%s': %s", c->in, err.msg);
	cr_assert_str_eq(d.scheme, c->scheme, "'%s'", c->in);
	cr_assert_str_eq(d.host.name, c->host, "'%s'", c->in);
	cr_assert_eq(d.port, c->port, "'%s'", c->in);
	cr_assert_eq(d.path_len, strlen(c->path), "'%s'", c->in);
	cr_assert_leq(d.path_off + d.path_len, len);
	cr_assert_eq(memcmp(c->in + d.path_off, c->path, d.path_len), 0,
	    "'%s'", c->in);
}

Test(url, embedded_nul)
{
	struct policy_dest d;

	cr_assert_eq(policy_url_parse("http://h\0.evil/", 15, &d, NULL),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(policy_url_parse("http://h/\0", 10, &d, NULL),
	    EGRESS_ERR_INVALID);
	/* len bounds the input: the bytes after it are never read. */
	cr_assert_eq(policy_url_parse("http://h/a#frag", 10, &d, NULL), 0);
	cr_assert_eq(d.path_len, 2);
	cr_assert_eq(policy_url_parse(NULL, 0, &d, NULL), EGRESS_ERR_INVALID);
}

struct hp_case {
	char in[64];
	int ok;
	enum policy_host_kind kind;
	char host[48];
	unsigned port;
	char msg[48];
};

static struct hp_case hp_cases[] = {
	{ "example.com:443", 1, POLICY_HOST_NAME, "example.com", 443, "" },
	{ "Example.com.:25", 1, POLICY_HOST_NAME, "example.com", 25, "" },
	{ "10.0.0.1:22", 1, POLICY_HOST_IPV4, "10.0.0.1", 22, "" },
	{ "[::1]:6379", 1, POLICY_HOST_IPV6, "::1", 6379, "" },
	{ "[::ffff:1.1.1.1]:53", 1, POLICY_HOST_IPV6, "::ffff:1.1.1.1", 53,
	    "" },
	{ "example.com", 0, 0, "", 0, "no port" },
	{ "[::1]", 0, 0, "", 0, "no port" },
	{ "example.com:", 0, 0, "", 0, "empty port" },
	{ ":443", 0, 0, "", 0, "empty host" },
	{ "::1:443", 0, 0, "", 0, "brackets" },
	{ "example.com:0", 0, 0, "", 0, "port 0" },
	{ "example.com:065", 0, 0, "", 0, "leading zero" },
	{ "example.com:65536", 0, 0, "", 0, "over 65535" },
	{ "u@example.com:443", 0, 0, "", 0, "userinfo" },
	{ "example.com:443/", 0, 0, "", 0, "unexpected" },
	{ "example.com :443", 0, 0, "", 0, "whitespace" },
	{ "127.1:80", 0, 0, "", 0, "write '127.0.0.1'" },
	{ "[fe80::1%eth0]:80", 0, 0, "", 0, "zone id" },
	{ "", 0, 0, "", 0, "empty host" },
};

ParameterizedTestParameters(url, hostport)
{
	return cr_make_param_array(struct hp_case, hp_cases,
	    sizeof(hp_cases) / sizeof(hp_cases[0]));
}

ParameterizedTest(struct hp_case *c, url, hostport)
{
	struct policy_dest d;
	struct policy_err err;
	int r;

	memset(&err, 0, sizeof(err));
	r = policy_hostport_parse(c->in, strlen(c->in), &d, &err);
	if (!c->ok) {
		cr_assert_eq(r, EGRESS_ERR_INVALID, "'%s' accepted", c->in);
		cr_assert(strstr(err.msg, c->msg) != NULL,
		    "'%s': message '%s' lacks '%s'", c->in, err.msg, c->msg);
		return;
	}
	cr_assert_eq(r, 0, "'%s': %s", c->in, err.msg);
	cr_assert_str_eq(d.scheme, "");
	cr_assert_eq(d.host.kind, c->kind);
	cr_assert_str_eq(d.host.name, c->host);
	cr_assert_eq(d.port, c->port);
	cr_assert_eq(d.path_len, 0);
}

Test(url, authority_default_port)
{
	struct policy_dest d;
	struct policy_err err;

	cr_assert_eq(policy_authority_parse("example.com", 11, 443, &d, &err),
	    0);
	cr_assert_eq(d.port, 443);
	cr_assert_str_eq(d.host.name, "example.com");
	cr_assert_eq(policy_authority_parse("example.com:8080", 16, 443, &d,
			 &err),
	    0);
	cr_assert_eq(d.port, 8080);
	cr_assert_eq(policy_authority_parse("[::1]", 5, 80, &d, &err), 0);
	cr_assert_eq(d.port, 80);
	cr_assert_eq(d.host.kind, POLICY_HOST_IPV6);
	cr_assert_eq(policy_authority_parse("example.com", 11, 0, &d, &err),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(policy_authority_parse("@example.com", 12, 80, &d, &err),
	    EGRESS_ERR_INVALID);
	cr_assert(strstr(err.msg, "userinfo") != NULL, "%s", err.msg);
	cr_assert_eq(policy_authority_parse("example.com:", 12, 80, &d, &err),
	    EGRESS_ERR_INVALID);
	cr_assert(strstr(err.msg, "empty port") != NULL, "%s", err.msg);
	cr_assert_eq(policy_authority_parse("", 0, 80, &d, &err),
	    EGRESS_ERR_INVALID);
}

/* A parsed URL's host re-parses to itself (the canonical text is stable). */
Test(url, host_reparses)
{
	static const char *const urls[] = {
		"http://Example.COM./",
		"http://[2001:0DB8::0:1]/",
		"https://10.0.0.1:1/",
		"ws://[::ffff:10.0.0.1]",
	};
	size_t i;

	for (i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
		struct policy_dest d;
		struct policy_host h;
		char buf[300];
		int n;

		cr_assert_eq(policy_url_parse(urls[i], strlen(urls[i]), &d,
				 NULL),
		    0, "%s", urls[i]);
		n = snprintf(buf, sizeof(buf),
		    d.host.kind == POLICY_HOST_IPV6 ? "[%s]" : "%s",
		    d.host.name);
		cr_assert_eq(policy_host_parse(buf, (size_t)n, &h, NULL), 0);
		// NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): both parses start from a zeroed struct
		cr_assert_eq(memcmp(&h, &d.host, sizeof(h)), 0, "%s", urls[i]);
	}
}
