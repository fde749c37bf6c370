/* SPDX-License-Identifier: ISC */
/*
 * IPv4 and IPv6 text forms, written here rather than taken from the C
 * library so that policy/ is self-contained and analysable: the parser
 * follows the rules of glibc's inet_pton(AF_INET6) (at most four hex digits
 * per group, one "::", an optional trailing dotted quad of four decimal
 * parts without leading zeros) and the formatter those of its inet_ntop()
 * (lowercase hex, the first longest run of two or more zero groups as
 * "::", a dotted quad for ::a.b.c.d and ::ffff:a.b.c.d).
 */
#include <stddef.h>
#include <stdint.h>

#include "policy/inet.h"

static int
hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Parse s[start..len) as a dotted quad; policy_inet4_parse() is start 0. */
static int
inet4_parse_at(const char *s, size_t start, size_t len, uint8_t ret[4])
{
	uint8_t tmp[4] = { 0 };
	size_t i, octets = 0;
	unsigned v = 0;
	int digit = 0;

	for (i = start; i < len; i++) {
		int c = (unsigned char)s[i];

		if (c >= '0' && c <= '9') {
			if (digit && v == 0)
				return 0; /* leading zero */
			v = v * 10 + (unsigned)(c - '0');
			if (v > 255)
				return 0;
			if (!digit) {
				if (octets == 4)
					return 0;
				octets++;
				digit = 1;
			}
			tmp[octets - 1] = (uint8_t)v;
		} else if (c == '.' && digit) {
			if (octets == 4)
				return 0;
			v = 0;
			digit = 0;
		} else
			return 0;
	}
	if (octets < 4 || !digit)
		return 0;
	ret[0] = tmp[0];
	ret[1] = tmp[1];
	ret[2] = tmp[2];
	ret[3] = tmp[3];
	return 1;
}

int
policy_inet4_parse(const char *s, size_t len, uint8_t ret[4])
{
	return inet4_parse_at(s, 0, len, ret);
}

int
policy_inet6_parse(const char *s, size_t len, uint8_t ret[16])
{
	uint8_t tmp[16] = { 0 };
	size_t i = 0, tp = 0, tok = 0, ndig = 0, colonp = 0, k;
	int has_colonp = 0;
	unsigned v = 0;

	if (len == 0)
		return 0;
	/* A leading ':' must be the first half of "::". */
	if (s[0] == ':') {
		if (len < 2 || s[1] != ':')
			return 0;
		i = 1;
	}
	tok = i;
	while (i < len) {
		int c = (unsigned char)s[i++];
		int d = hex_digit(c);

		if (d >= 0) {
			if (ndig == 4)
				return 0;
			v = v << 4 | (unsigned)d;
			ndig++;
			continue;
		}
		if (c == ':') {
			tok = i;
			if (ndig == 0) {
				if (has_colonp)
					return 0;
				has_colonp = 1;
				colonp = tp;
				continue;
			}
			if (i == len)
				return 0; /* trailing single ':' */
			if (tp + 2 > 16)
				return 0;
			tmp[tp++] = (uint8_t)(v >> 8);
			tmp[tp++] = (uint8_t)v;
			ndig = 0;
			v = 0;
			continue;
		}
		if (c == '.' && tp + 4 <= 16 &&
		    inet4_parse_at(s, tok, len, tmp + tp)) {
			tp += 4;
			ndig = 0;
			break;
		}
		return 0;
	}
	if (ndig > 0) {
		if (tp + 2 > 16)
			return 0;
		tmp[tp++] = (uint8_t)(v >> 8);
		tmp[tp++] = (uint8_t)v;
	}
	if (has_colonp) {
		/* "::" must stand for at least one zero group. */
		if (tp == 16)
			return 0;
		/* Open one zero group at colonp at a time; the two bytes
		 * shifted out at the end are still zero. */
		for (; tp < 16; tp += 2)
			for (k = 16; k-- > colonp;)
				tmp[k] = k >= colonp + 2 ? tmp[k - 2] : 0;
	}
	if (tp != 16)
		return 0;
	for (k = 0; k < 16; k++)
		ret[k] = tmp[k];
	return 1;
}

/* Write v (0..255) in decimal at buf; return the number of digits. */
/*@ requires v <= 255;
    requires \valid(buf + (0 .. 2));
    assigns buf[0 .. 2];
    ensures 1 <= \result <= 3;
 */
static int
put_dec8(unsigned v, char *buf)
{
	int n = 0;

	if (v >= 100)
		buf[n++] = (char)('0' + v / 100);
	if (v >= 10)
		buf[n++] = (char)('0' + v / 10 % 10);
	buf[n++] = (char)('0' + v % 10);
	return n;
}

int
policy_inet4_format(const uint8_t a[4], char *buf)
{
	int i, n = 0;

	for (i = 0; i < 4; i++) {
		if (i > 0)
			buf[n++] = '.';
		n += put_dec8(a[i], buf + n);
	}
	buf[n] = '\0';
	return n;
}

/* Write v (0..0xffff) in lowercase hex without leading zeros. */
/*@ requires v <= 0xffff;
    requires \valid(buf + (0 .. 3));
    assigns buf[0 .. 3];
    ensures 1 <= \result <= 4;
 */
static int
put_hex16(unsigned v, char *buf)
{
	static const char digits[] = "0123456789abcdef";
	int n = 0, shift, started = 0;

	for (shift = 12; shift >= 0; shift -= 4) {
		unsigned d = (v >> shift) & 0xf;

		if (d != 0 || started || shift == 0) {
			buf[n++] = digits[d];
			started = 1;
		}
	}
	return n;
}

int
policy_inet6_format(const uint8_t a[16], char *buf, size_t n)
{
	/* Room for more than the longest text: o is checked once at the
	 * end rather than before every write. */
	char tmp[64] = { 0 };
	unsigned w[8];
	int i, best = -1, bestlen = 0, cur = -1, curlen = 0, o = 0;

	if (n < POLICY_INET6_TEXT)
		return -1;
	for (i = 0; i < 8; i++)
		w[i] = (unsigned)a[2 * i] << 8 | a[2 * i + 1];
	/* The first longest run of zero groups. */
	for (i = 0; i < 8; i++) {
		if (w[i] == 0) {
			if (cur < 0) {
				cur = i;
				curlen = 1;
			} else
				curlen++;
		} else if (cur >= 0) {
			if (best < 0 || curlen > bestlen) {
				best = cur;
				bestlen = curlen;
			}
			cur = -1;
		}
	}
	if (cur >= 0 && (best < 0 || curlen > bestlen)) {
		best = cur;
		bestlen = curlen;
	}
	if (best >= 0 && bestlen < 2)
		best = -1;

	for (i = 0; i < 8; i++) {
		if (best >= 0 && i >= best && i < best + bestlen) {
			if (i == best)
				tmp[o++] = ':';
			continue;
		}
		if (i != 0)
			tmp[o++] = ':';
		/* ::a.b.c.d and ::ffff:a.b.c.d end in a dotted quad. */
		if (i == 6 && best == 0 &&
		    (bestlen == 6 || (bestlen == 5 && w[5] == 0xffff))) {
			o += policy_inet4_format(a + 12, tmp + o);
			break;
		}
		o += put_hex16(w[i], tmp + o);
	}
	if (best >= 0 && best + bestlen == 8)
		tmp[o++] = ':';
	if (o >= POLICY_INET6_TEXT)
		return -1; /* cannot happen: at most 45 bytes */
	tmp[o] = '\0';
	for (i = 0; i <= o; i++)
		buf[i] = tmp[i];
	return o;
}
