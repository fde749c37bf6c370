/* SPDX-License-Identifier: ISC */
/*
 * Request host parsing: the one host syntax that request hosts and entries
 * share. A host is a lowercase LDH name (a-z 0-9 '-', labels of 1 to 63
 * bytes that neither start nor end with '-', at most 253 bytes), a
 * canonical dotted quad, or a bracketed IPv6 address. Anything whose last
 * label is numeric or 0x-hex but that is not a canonical dotted quad is
 * refused, because resolvers would read "0177.0.0.1" or "127.1" as an
 * address the policy never saw. Also answers whether a name is local by
 * nature (localhost, local, internal, home.arpa and names under them).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "policy/chars.h"
#include "policy/inet.h"
#include "policy/policy.h"

/* Longest text inside brackets worth parsing as IPv6. */
#define HOST_V6_TEXT_MAX 45

static int
host_fail(struct policy_err *reterr, const char *msg)
{
	if (reterr != NULL)
		(void)snprintf(reterr->msg, sizeof(reterr->msg), "%s", msg);
	return EGRESS_ERR_INVALID;
}

static int
hex_val(int c)
{
	if (chars_is_digit(c))
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return c - 'A' + 10;
}

/*
 * Read s as inet_aton() does: one to four parts, each decimal, octal
 * (leading 0) or hex (0x), the last filling the remaining bytes. Used only
 * to show which address a non-canonical spelling means. Return 0 and write
 * ret (host order), or -1.
 */
static int
aton_like(const char *s, size_t len, uint32_t *ret)
{
	uint32_t parts[4] = { 0 };
	size_t i = 0, np = 0;
	uint32_t v;

	while (i <= len) {
		uint64_t val = 0;
		unsigned base = 10;
		size_t ndig = 0;

		if (np == 4)
			return -1;
		if (i < len && s[i] == '0') {
			base = 8;
			i++;
			ndig++;
			if (i < len && (s[i] == 'x' || s[i] == 'X')) {
				base = 16;
				i++;
				ndig = 0;
			}
		}
		for (; i < len && s[i] != '.'; i++) {
			int c = (unsigned char)s[i];
			unsigned d;

			if (base == 16 && chars_is_hex(c))
				d = (unsigned)hex_val(c);
			else if (base == 10 && chars_is_digit(c))
				d = (unsigned)(c - '0');
			else if (base == 8 && c >= '0' && c <= '7')
				d = (unsigned)(c - '0');
			else
				return -1;
			val = val * base + d;
			if (val > 0xffffffffu)
				return -1;
			ndig++;
		}
		if (ndig == 0)
			return -1;
		parts[np++] = (uint32_t)val;
		if (i == len)
			break;
		i++; /* the dot */
		if (i == len)
			return -1;
	}
	for (i = 0; i + 1 < np; i++)
		if (parts[i] > 0xff)
			return -1;
	switch (np) {
	case 1:
		v = parts[0];
		break;
	case 2:
		if (parts[1] > 0xffffff)
			return -1;
		v = parts[0] << 24 | parts[1];
		break;
	case 3:
		if (parts[2] > 0xffff)
			return -1;
		v = parts[0] << 24 | parts[1] << 16 | parts[2];
		break;
	default:
		if (parts[3] > 0xff)
			return -1;
		v = parts[0] << 24 | parts[1] << 16 | parts[2] << 8 | parts[3];
		break;
	}
	*ret = v;
	return 0;
}

/*
 * Parse a canonical dotted quad: four decimal parts 0..255, no leading
 * zeros. Return 0 and write the four bytes, or -1.
 */
static int
quad_parse(const char *s, size_t len, uint8_t ret[4])
{
	uint8_t b[4];
	size_t i = 0;
	int np;

	for (np = 0; np < 4; np++) {
		unsigned v = 0;
		size_t start = i;

		while (i < len && chars_is_digit((unsigned char)s[i]) &&
		    i - start < 3)
			v = v * 10 + (unsigned)(s[i++] - '0');
		if (i == start || v > 255 ||
		    (s[start] == '0' && i - start > 1))
			return -1;
		b[np] = (uint8_t)v;
		if (np < 3) {
			if (i >= len || s[i] != '.')
				return -1;
			i++;
		}
	}
	if (i != len)
		return -1;
	memcpy(ret, b, 4);
	return 0;
}

static int
host_parse_v6(const char *s, size_t len, struct policy_host *ret_host,
    struct policy_err *reterr)
{
	char text[HOST_V6_TEXT_MAX + 1] = { 0 };
	struct policy_host h;
	size_t i;

	/* s[0] is '['. */
	if (len < 2 || s[len - 1] != ']')
		return host_fail(reterr, "unterminated '[' in host");
	s++;
	len -= 2;
	if (len == 0)
		return host_fail(reterr, "empty brackets in host");
	if (memchr(s, '%', len) != NULL)
		return host_fail(reterr, "an IPv6 zone id is not allowed");
	for (i = 0; i < len; i++) {
		int c = (unsigned char)s[i];

		if (!chars_is_hex(c) && c != ':' && c != '.')
			return host_fail(reterr,
			    "brackets may hold only an IPv6 address");
	}
	if (len > HOST_V6_TEXT_MAX)
		return host_fail(reterr, "invalid IPv6 address");
	for (i = 0; i < len; i++) {
		int c = (unsigned char)s[i];

		text[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
	}
	text[len] = '\0';
	memset(&h, 0, sizeof(h));
	if (policy_inet6_parse(text, len, h.addr) != 1)
		return host_fail(reterr, "invalid IPv6 address");
	if (policy_inet6_format(h.addr, h.name, sizeof(h.name)) < 0)
		return host_fail(reterr, "invalid IPv6 address");
	h.kind = POLICY_HOST_IPV6;
	*ret_host = h;
	return 0;
}

static int
host_numeric_fail(const char *s, size_t len, struct policy_err *reterr)
{
	uint32_t v;

	if (reterr == NULL)
		return EGRESS_ERR_INVALID;
	if (aton_like(s, len, &v) == 0)
		(void)snprintf(reterr->msg, sizeof(reterr->msg),
		    "'%.*s' is not a canonical dotted quad (resolvers read "
		    "it as %u.%u.%u.%u); write '%u.%u.%u.%u'",
		    (int)(len > 64 ? 64 : len), s, v >> 24, (v >> 16) & 0xff,
		    (v >> 8) & 0xff, v & 0xff, v >> 24, (v >> 16) & 0xff,
		    (v >> 8) & 0xff, v & 0xff);
	else
		(void)snprintf(reterr->msg, sizeof(reterr->msg),
		    "a host whose last label is numeric must be a canonical "
		    "dotted quad");
	return EGRESS_ERR_INVALID;
}

int
policy_host_parse(const char *s, size_t len, struct policy_host *ret_host,
    struct policy_err *reterr)
{
	struct policy_host h;
	size_t i, lab, last;

	if (s == NULL || ret_host == NULL)
		return host_fail(reterr, "no host");
	if (len == 0)
		return host_fail(reterr, "empty host");
	if (s[0] == '[')
		return host_parse_v6(s, len, ret_host, reterr);

	for (i = 0; i < len; i++) {
		int c = (unsigned char)s[i];

		if (c >= 0x80)
			return host_fail(reterr,
			    "non-ASCII host: write its "
			    "A-label (punycode)");
		if (c == '%')
			return host_fail(reterr,
			    "percent-escapes are not allowed in a host");
		if (c == ':')
			return host_fail(reterr,
			    "an IPv6 address must be in "
			    "brackets, and a host holds no port");
		if (c == '_')
			return host_fail(reterr,
			    "'_' is not allowed in a host name");
		if (c <= 0x20 || c == 0x7f)
			return host_fail(reterr,
			    "whitespace or control "
			    "character in host");
		if (!(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') &&
		    !chars_is_digit(c) && c != '-' && c != '.')
			return host_fail(reterr,
			    "invalid character in host "
			    "(a name holds only a-z, 0-9, '-' and '.')");
	}
	if (s[len - 1] == '.') {
		len--;
		if (len == 0)
			return host_fail(reterr, "empty host");
		if (s[len - 1] == '.')
			return host_fail(reterr,
			    "more than one trailing dot in host");
	}
	if (len > POLICY_NAME_MAX)
		return host_fail(reterr, "host name longer than 253 bytes");

	memset(&h, 0, sizeof(h));
	for (i = 0; i < len; i++) {
		int c = (unsigned char)s[i];

		h.name[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
	}
	h.name[len] = '\0';

	last = 0;
	for (lab = 0; lab <= len; lab = i + 1) {
		int prev = 0;

		for (i = lab; i < len && h.name[i] != '.'; i++)
			prev = (unsigned char)h.name[i];
		if (i == lab)
			return host_fail(reterr, "empty label in host");
		if (i - lab > POLICY_LABEL_MAX)
			return host_fail(reterr,
			    "label longer than 63 bytes in host");
		if (h.name[lab] == '-' || prev == '-')
			return host_fail(reterr,
			    "a label may not start or end with '-'");
		last = lab;
	}
	if (chars_label_is_numeric_at(h.name, last, len)) {
		if (quad_parse(h.name, len, h.addr) != 0)
			return host_numeric_fail(h.name, len, reterr);
		h.kind = POLICY_HOST_IPV4;
	} else
		h.kind = POLICY_HOST_NAME;
	*ret_host = h;
	return 0;
}

int
policy_host_is_local_name(const struct policy_host *host)
{
	static const char *const local[] = {
		"localhost",
		"local",
		"internal",
		"home.arpa",
	};
	size_t i, n, m;

	if (host == NULL || host->kind != POLICY_HOST_NAME)
		return 0;
	n = strnlen(host->name, sizeof(host->name));
	for (i = 0; i < sizeof(local) / sizeof(local[0]); i++) {
		m = strlen(local[i]);
		if (n == m && memcmp(host->name, local[i], m) == 0)
			return 1;
		if (n > m && host->name[n - m - 1] == '.' &&
		    memcmp(host->name + n - m, local[i], m) == 0)
			return 1;
	}
	return 0;
}
