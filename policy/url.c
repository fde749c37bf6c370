/* SPDX-License-Identifier: ISC */
/*
 * Destination parsing: RFC 3986 absolute URIs (scheme://authority[/path]
 * [?query], no fragment) for http, https, ws and wss, a URL authority as a
 * guest sends it, and HOST:PORT for the tcp and tls transports. This is
 * deliberately not the WHATWG URL parser: no backslash as a slash, no
 * "http:/h", no userinfo, no whitespace trimming, no percent-decoding of
 * the host, so that what the policy checks is what gets connected to.
 */
#include <stdio.h>
#include <string.h>

#include "policy/chars.h"
#include "policy/policy.h"

static int
url_fail(struct policy_err *reterr, const char *msg)
{
	if (reterr != NULL)
		(void)snprintf(reterr->msg, sizeof(reterr->msg), "%s", msg);
	return EGRESS_ERR_INVALID;
}

/* RFC 3986 pchar minus pct-encoded, plus '/' and '?' (path and query). */
static int
is_path_char(int c)
{
	if (chars_is_alpha(c) || chars_is_digit(c))
		return 1;
	return strchr("-._~!$&'()*+,;=:@/?", c) != NULL && c != '\0';
}

/*
 * Parse the port s[start..end): 1 to 5 decimal digits, no sign, no leading
 * zero, 1..65535.
 */
static int
port_parse(const char *s, size_t start, size_t end, uint16_t *ret_port,
    struct policy_err *reterr)
{
	unsigned long v = 0;
	size_t i;

	if (start >= end)
		return url_fail(reterr, "empty port");
	if (s[start] == '+' || s[start] == '-')
		return url_fail(reterr, "a port has no sign");
	for (i = start; i < end; i++)
		if (!chars_is_digit((unsigned char)s[i]))
			return url_fail(reterr,
			    "a port is decimal digits only");
	if (end - start == 1 && s[start] == '0')
		return url_fail(reterr, "port 0 is not allowed");
	if (s[start] == '0')
		return url_fail(reterr, "a port has no leading zero");
	if (end - start > 5)
		return url_fail(reterr, "port over 65535");
	for (i = start; i < end; i++)
		v = v * 10 + (unsigned long)(s[i] - '0');
	if (v > 65535)
		return url_fail(reterr, "port over 65535");
	*ret_port = (uint16_t)v;
	return 0;
}

/*
 * Parse host[:port]. default_port 0 means the port is required.
 */
static int
authority_parse(const char *s, size_t len, uint16_t default_port,
    struct policy_dest *ret_dest, struct policy_err *reterr)
{
	struct policy_dest d;
	size_t hlen, i, colon = 0, ncolon = 0;

	if (s == NULL || ret_dest == NULL)
		return url_fail(reterr, "no destination");
	for (i = 0; i < len; i++) {
		int c = (unsigned char)s[i];

		if (c <= 0x20 || c == 0x7f)
			return url_fail(reterr,
			    "whitespace or control "
			    "character in destination host");
		if (c == '\\')
			return url_fail(reterr,
			    "'\\' is not allowed in a destination");
		if (c == '@')
			return url_fail(reterr,
			    "userinfo is not allowed in a destination");
		if (c == '/' || c == '?' || c == '#')
			return url_fail(reterr,
			    "unexpected '/', '?' or '#' in "
			    "destination host");
	}
	if (len == 0)
		return url_fail(reterr, "empty host");
	/* Indices rather than pointers into s: colon is the offset of the
	 * port's ':' when ncolon is 1. */
	if (s[0] == '[') {
		hlen = 0;
		for (i = 0; i < len; i++)
			if (s[i] == ']') {
				hlen = i + 1;
				break;
			}
		if (hlen == 0)
			return url_fail(reterr, "unterminated '[' in host");
		if (hlen < len) {
			if (s[hlen] != ':')
				return url_fail(reterr,
				    "unexpected text after ']' in host");
			colon = hlen;
			ncolon = 1;
		}
	} else {
		for (i = 0; i < len; i++)
			if (s[i] == ':' && ncolon++ == 0)
				colon = i;
		if (ncolon > 1)
			return url_fail(reterr,
			    "an IPv6 address must be in "
			    "brackets");
		hlen = ncolon == 0 ? len : colon;
	}

	memset(&d, 0, sizeof(d));
	if (hlen == 0)
		return url_fail(reterr, "empty host");
	if (policy_host_parse(s, hlen, &d.host, reterr) != 0)
		return EGRESS_ERR_INVALID;
	if (ncolon > 0) {
		if (port_parse(s, colon + 1, len, &d.port, reterr) != 0)
			return EGRESS_ERR_INVALID;
	} else if (default_port == 0)
		return url_fail(reterr, "no port: write HOST:PORT");
	else
		d.port = default_port;
	d.path_off = len;
	d.path_len = 0;
	*ret_dest = d;
	return 0;
}

int
policy_authority_parse(const char *s, size_t len, uint16_t default_port,
    struct policy_dest *ret_dest, struct policy_err *reterr)
{
	return authority_parse(s, len, default_port, ret_dest, reterr);
}

int
policy_hostport_parse(const char *s, size_t len, struct policy_dest *ret_dest,
    struct policy_err *reterr)
{
	return authority_parse(s, len, 0, ret_dest, reterr);
}

int
policy_url_parse(const char *s, size_t len, struct policy_dest *ret_dest,
    struct policy_err *reterr)
{
	static const struct {
		const char *name;
		uint16_t port;
	} schemes[] = {
		{ "http", 80 },
		{ "https", 443 },
		{ "ws", 80 },
		{ "wss", 443 },
	};
	struct policy_dest d;
	char scheme[8] = { 0 };
	size_t i, a, e, sl;
	uint16_t def = 0;

	if (s == NULL || ret_dest == NULL)
		return url_fail(reterr, "no destination");
	if (memchr(s, '#', len) != NULL)
		return url_fail(reterr, "a destination has no fragment ('#')");

	/* scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":" */
	for (i = 0; i < len && s[i] != ':'; i++) {
		int c = (unsigned char)s[i];

		if (!(chars_is_alpha(c) ||
			(i > 0 &&
			    (chars_is_digit(c) || c == '+' || c == '-' ||
				c == '.'))))
			return url_fail(reterr,
			    "not an absolute URL "
			    "(write scheme://host[:port][/path])");
	}
	if (i == len || i == 0)
		return url_fail(reterr,
		    "not an absolute URL "
		    "(write scheme://host[:port][/path])");
	sl = i;
	if (sl >= sizeof(scheme))
		return url_fail(reterr,
		    "unsupported scheme (http, https, ws or wss)");
	for (i = 0; i < sl; i++)
		scheme[i] = (char)(s[i] | 0x20);
	scheme[sl] = '\0';
	for (i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
		if (strcmp(scheme, schemes[i].name) == 0)
			def = schemes[i].port;
	if (def == 0)
		return url_fail(reterr,
		    "unsupported scheme (http, https, ws or wss)");
	/* One analysis per scheme length (1 to 7), so the authority's offset
	 * and length stay related to len (sl < len here). */
	/*@ split sl; */
	if (sl + 3 > len || s[sl + 1] != '/' || s[sl + 2] != '/')
		return url_fail(reterr, "expected '//' after the scheme");

	/* e is set where the loop has checked i < len, so it stays bounded
	 * by len. */
	a = sl + 3;
	e = len;
	for (i = a; i < len; i++)
		if (s[i] == '/' || s[i] == '?') {
			e = i;
			break;
		}
	if (authority_parse(s + a, e - a, def, &d, reterr) != 0)
		return EGRESS_ERR_INVALID;

	for (i = e; i < len; i++) {
		int c = (unsigned char)s[i];

		if (c == '%') {
			if (i + 2 >= len ||
			    !chars_is_hex((unsigned char)s[i + 1]) ||
			    !chars_is_hex((unsigned char)s[i + 2]))
				return url_fail(reterr,
				    "bad percent-escape in path or query");
			i += 2;
			continue;
		}
		if (!is_path_char(c))
			return url_fail(reterr,
			    "invalid character in path or query");
	}
	memcpy(d.scheme, scheme, sl + 1);
	d.path_off = e;
	d.path_len = len - e;
	*ret_dest = d;
	return 0;
}
