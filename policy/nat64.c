/* SPDX-License-Identifier: ISC */
/*
 * NAT64 prefixes: parsing of [security] nat64_prefixes and the RFC 6052
 * section 2.2 decoding that address classification relies on. A translator
 * delivers any IPv6 destination inside its prefix to the IPv4 address
 * embedded in it, so classification looks through every prefix that could
 * apply: the well-known 64:ff9b::/96 always, declared prefixes when the
 * operator lists them. The u-octet and the suffix are ignored on purpose
 * (the attacker writes the DNS answer, not the translator, so decoding
 * more is the safe side). A list with one bad item is refused whole.
 */
#include <stdio.h>
#include <string.h>

#include "policy/inet.h"
#include "policy/nat64.h"
#include "policy/policy.h"

#define NAT64_ITEM_SHOW 48 /* bytes of an item quoted in reterr */
#define NAT64_ITEM_MAX	64 /* longer items cannot be valid */

static const struct policy_nat64_prefix nat64_well_known = {
	.prefix = { 0x00, 0x64, 0xff, 0x9b },
	.len = 96,
};

int
policy_nat64_len_is_valid(unsigned len)
{
	switch (len) {
	case 32:
	case 40:
	case 48:
	case 56:
	case 64:
	case 96:
		return 1;
	default:
		return 0;
	}
}

int
policy_nat64_prefix_contains(const struct policy_nat64_prefix *p,
    const uint8_t addr[16])
{
	size_t i;

	/* Every valid length is a whole number of bytes. Compared a byte
	 * at a time (not memcmp) so that the EVA analysis, which cannot
	 * evaluate memcmp's specification, sees which addresses are
	 * outside the prefix. */
	if (!policy_nat64_len_is_valid(p->len))
		return 0;
	for (i = 0; i < p->len / 8; i++)
		if (p->prefix[i] != addr[i])
			return 0;
	return 1;
}

int
policy_nat64_decode(const struct policy_nat64_prefix *p,
    const uint8_t addr[16], uint8_t ret_v4[4])
{
	/* Byte offsets of the four IPv4 bytes per prefix length; byte 8 is
	 * the u-octet and never carries address bits. */
	static const struct {
		unsigned len;
		uint8_t off[4];
	} layout[] = {
		{ 32, { 4, 5, 6, 7 } },
		{ 40, { 5, 6, 7, 9 } },
		{ 48, { 6, 7, 9, 10 } },
		{ 56, { 7, 9, 10, 11 } },
		{ 64, { 9, 10, 11, 12 } },
		{ 96, { 12, 13, 14, 15 } },
	};
	size_t i, j;

	if (!policy_nat64_prefix_contains(p, addr))
		return 0;
	for (i = 0; i < sizeof(layout) / sizeof(layout[0]); i++) {
		if (layout[i].len != p->len)
			continue;
		for (j = 0; j < 4; j++)
			ret_v4[j] = addr[layout[i].off[j]];
		return 1;
	}
	return 0;
}

size_t
policy_nat64_decode_all(const struct policy_nat64_list *list,
    const uint8_t addr[16], uint8_t ret_v4[][4])
{
	size_t i, n = 0;

	if (policy_nat64_decode(&nat64_well_known, addr, ret_v4[n]))
		n++;
	if (list == NULL)
		return n;
	/* n < POLICY_NAT64_DECODE_MAX always holds (n <= i + 1); the test
	 * states the bound of ret_v4 where it is written. */
	for (i = 0; i < list->n && i < POLICY_NAT64_MAX; i++)
		if (n < POLICY_NAT64_DECODE_MAX &&
		    policy_nat64_decode(&list->v[i], addr, ret_v4[n]))
			n++;
	return n;
}

/* Quote at most NAT64_ITEM_SHOW bytes of s, control and non-ASCII bytes
 * shown as '?', so an error message never carries raw input bytes. */
static void
nat64_quote(const char *s, char *buf, size_t n)
{
	size_t i, len;

	len = strnlen(s, NAT64_ITEM_SHOW + 1);
	for (i = 0; i < len && i < NAT64_ITEM_SHOW && i + 1 < n; i++)
		buf[i] = (char)((s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?');
	buf[i] = '\0';
	if (len > NAT64_ITEM_SHOW && i + 4 <= n)
		(void)strcat(buf, "...");
}

/*
 * Append the string src (at most srcsize bytes) to msg at *used, cut at
 * the end of msg as snprintf() cuts, and advance *used. Each index is
 * checked against its own array.
 */
static void
msg_append(char *msg, size_t size, size_t *used, const char *src,
    size_t srcsize)
{
	size_t d = *used, k;

	for (k = 0; k < srcsize && src[k] != '\0' && d + 1 < size; k++, d++)
		msg[d] = src[k];
	if (d < size)
		msg[d] = '\0';
	*used = d;
}

/*
 * Parse one item into *ret. On failure write a reason (which may show the
 * spelling to write instead) into why and return EGRESS_ERR_INVALID.
 */
static int
nat64_parse_item(const char *s, struct policy_nat64_prefix *ret, char *why,
    size_t whylen)
{
	/* Zeroed before the copy, with room past the longest item, so the
	 * text is terminated and the up to four length digits after '/' are
	 * read inside it whatever the item's length. */
	char text[NAT64_ITEM_MAX + 5];
	/* One zero byte past what the formatter may write: always a string. */
	char canon[POLICY_INET6_TEXT + 1] = { 0 };
	struct policy_addr a;
	uint8_t in6[16];
	const char *slash, *p;
	size_t len, alen, i;
	unsigned plen;
	int masked;

	memset(ret, 0, sizeof(*ret));
	if (s == NULL || *s == '\0') {
		(void)snprintf(why, whylen, "empty prefix");
		return EGRESS_ERR_INVALID;
	}
	len = strnlen(s, NAT64_ITEM_MAX + 1);
	if (len > NAT64_ITEM_MAX) {
		(void)snprintf(why, whylen, "too long to be a prefix");
		return EGRESS_ERR_INVALID;
	}
	memset(text, 0, sizeof(text));
	memcpy(text, s, len);
	if ((slash = strchr(text, '/')) == NULL) {
		(void)snprintf(why, whylen, "missing /<length>");
		return EGRESS_ERR_INVALID;
	}
	alen = (size_t)(slash - text);
	text[alen] = '\0';
	p = slash + 1;

	if (policy_addr_parse(text, &a) != 0 || a.family != 6) {
		if (policy_inet6_parse(text, alen, in6) == 1 &&
		    policy_inet6_format(in6, canon, POLICY_INET6_TEXT) >= 0)
			(void)snprintf(why, whylen,
			    "not canonical, write '%s/%s'", canon,
			    strspn(p, "0123456789") == strlen(p) &&
				    strlen(p) <= 3 ?
				p :
				"<length>");
		else
			(void)snprintf(why, whylen, "not an IPv6 address");
		return EGRESS_ERR_INVALID;
	}

	/* Decimal, no sign, no leading zero, at most three digits. */
	plen = 0;
	for (i = 0; p[i] != '\0'; i++) {
		if (p[i] < '0' || p[i] > '9' || i >= 3) {
			plen = 0;
			break;
		}
		plen = plen * 10 + (unsigned)(p[i] - '0');
	}
	if (i == 0 || p[i] != '\0' || (p[0] == '0' && i > 1) ||
	    !policy_nat64_len_is_valid(plen)) {
		(void)snprintf(why, whylen,
		    "length must be 32, 40, 48, 56, 64 or 96");
		return EGRESS_ERR_INVALID;
	}

	masked = 1;
	for (i = plen / 8; i < 16; i++)
		if (a.bytes[i] != 0)
			masked = 0;
	if (!masked) {
		memset(in6, 0, sizeof(in6));
		memcpy(in6, a.bytes, plen / 8);
		if (policy_inet6_format(in6, canon, POLICY_INET6_TEXT) < 0)
			canon[0] = '\0';
		(void)snprintf(why, whylen,
		    "bits set beyond /%u, write '%s/%u'", plen, canon, plen);
		return EGRESS_ERR_INVALID;
	}

	memset(ret, 0, sizeof(*ret));
	memcpy(ret->prefix, a.bytes, 16);
	ret->len = plen;
	return 0;
}

int
policy_nat64_parse_list(const char *const *items, size_t n,
    struct policy_nat64_list *ret_list, struct policy_err *reterr)
{
	/* Room kept at the end of the message for the "and N more" tail. */
	static const size_t tail_room = 32;
	struct policy_nat64_list list;
	struct policy_err err;
	struct policy_nat64_prefix p;
	/* One zero byte past what is written into each: always strings. */
	char why[128 + 1] = { 0 }, quoted[NAT64_ITEM_SHOW + 4 + 1] = { 0 };
	char piece[POLICY_MSG_MAX] = { 0 }, tail[POLICY_MSG_MAX] = { 0 };
	size_t i, j, used = 0, bad = 0, omitted = 0;
	int dup;

	memset(&err, 0, sizeof(err));
	if (ret_list == NULL || (items == NULL && n > 0)) {
		(void)snprintf(err.msg, sizeof(err.msg), "bad arguments");
		goto fail_invalid;
	}
	if (n > POLICY_NAT64_MAX) {
		(void)snprintf(err.msg, sizeof(err.msg),
		    "%zu NAT64 prefixes, at most %d are allowed", n,
		    POLICY_NAT64_MAX);
		if (reterr != NULL)
			*reterr = err;
		return EGRESS_ERR_TOO_BIG;
	}

	memset(&list, 0, sizeof(list));
	for (i = 0; i < n; i++) {
		if (nat64_parse_item(items[i], &p, why, sizeof(why) - 1) !=
		    0) {
			int w;

			bad++;
			if (items[i] != NULL)
				nat64_quote(items[i], quoted,
				    sizeof(quoted) - 1);
			else
				quoted[0] = '\0';
			w = snprintf(piece, sizeof(piece),
			    "%sitem %zu '%s': %.128s", used > 0 ? "; " : "",
			    i + 1, quoted, why);
			/* Once one is left out, the rest are too, so the
			 * message lists a prefix of the bad items. */
			if (omitted == 0 && w > 0 &&
			    used + (size_t)w + tail_room < sizeof(err.msg)) {
				msg_append(err.msg, sizeof(err.msg), &used,
				    piece, sizeof(piece));
			} else
				omitted++;
			continue;
		}
		dup = 0;
		for (j = 0; j < list.n; j++)
			if (list.v[j].len == p.len &&
			    memcmp(list.v[j].prefix, p.prefix, 16) == 0)
				dup = 1;
		if (!dup)
			list.v[list.n++] = p;
	}
	if (bad > 0) {
		if (omitted > 0) {
			(void)snprintf(tail, sizeof(tail),
			    "%sand %zu more bad item%s", used > 0 ? "; " : "",
			    omitted, omitted == 1 ? "" : "s");
			msg_append(err.msg, sizeof(err.msg), &used, tail,
			    sizeof(tail));
		}
		goto fail_invalid;
	}
	*ret_list = list;
	return 0;

fail_invalid:
	if (reterr != NULL)
		*reterr = err;
	return EGRESS_ERR_INVALID;
}
