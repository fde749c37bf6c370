/* SPDX-License-Identifier: ISC */
/*
 * Private to policy/: the ASCII character classes the grammar, host and URL
 * parsers share (locale-free, unlike <ctype.h>), and the one definition of
 * a "numeric" label, so that entries and request hosts cannot disagree.
 */
#ifndef EGRESS_POLICY_CHARS_H
#define EGRESS_POLICY_CHARS_H

#include <stddef.h>

static inline int
chars_is_alpha(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static inline int
chars_is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static inline int
chars_is_hex(int c)
{
	return chars_is_digit(c) || (c >= 'a' && c <= 'f') ||
	    (c >= 'A' && c <= 'F');
}

/*
 * Answer whether a label is numeric in the sense of inet_aton(): digits,
 * or "0x" and hex digits (a lone "0x" counts). Such a last label makes a
 * host an address to resolvers, never a name.
 */
static inline int
chars_label_is_numeric(const char *s, size_t len)
{
	size_t i;

	if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		for (i = 2; i < len; i++)
			if (!chars_is_hex((unsigned char)s[i]))
				return 0;
		return 1;
	}
	for (i = 0; i < len; i++)
		if (!chars_is_digit((unsigned char)s[i]))
			return 0;
	return len > 0;
}

#endif
