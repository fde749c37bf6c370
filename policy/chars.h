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
 * Answer whether the label s[start..end) is numeric in the sense of
 * inet_aton(): digits, or "0x" and hex digits (a lone "0x" counts). Such a
 * last label makes a host an address to resolvers, never a name.
 */
static inline int
chars_label_is_numeric_at(const char *s, size_t start, size_t end)
{
	size_t i;

	if (start >= end)
		return 0;
	if (end - start >= 2 && s[start] == '0' &&
	    (s[start + 1] == 'x' || s[start + 1] == 'X')) {
		for (i = start + 2; i < end; i++)
			if (!chars_is_hex((unsigned char)s[i]))
				return 0;
		return 1;
	}
	for (i = start; i < end; i++)
		if (!chars_is_digit((unsigned char)s[i]))
			return 0;
	return 1;
}

/* chars_label_is_numeric_at() over the whole of s[0..len). */
static inline int
chars_label_is_numeric(const char *s, size_t len)
{
	return chars_label_is_numeric_at(s, 0, len);
}

#endif
