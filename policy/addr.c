/* SPDX-License-Identifier: ISC */
/*
 * Address parsing and formatting: canonical IPv4 and IPv6 literals in the
 * inet_ntop() spelling. Classification is in classify.c, NAT64 decoding in
 * nat64.c; both build on this file and it depends on neither.
 */
#include <arpa/inet.h>
#include <string.h>

#include "policy/policy.h"

int
policy_addr_format(const struct policy_addr *addr, char *buf, size_t n)
{
	char tmp[INET6_ADDRSTRLEN];
	size_t len;

	if (addr == NULL || buf == NULL)
		return EGRESS_ERR_INVALID;
	if (addr->family == 4) {
		/* Dotted quad by hand: inet_ntop() goes through sprintf(),
		 * and this runs twice per request (the log events). */
		char *o = tmp;
		unsigned v;
		int i;

		for (i = 0; i < 4; i++) {
			v = addr->bytes[i];
			if (i > 0)
				*o++ = '.';
			if (v >= 100)
				*o++ = (char)('0' + v / 100);
			if (v >= 10)
				*o++ = (char)('0' + v / 10 % 10);
			*o++ = (char)('0' + v % 10);
		}
		*o = '\0';
	} else if (addr->family == 6) {
		if (inet_ntop(AF_INET6, addr->bytes, tmp, sizeof(tmp)) == NULL)
			return EGRESS_ERR_INVALID;
	} else
		return EGRESS_ERR_INVALID;
	len = strlen(tmp);
	if (len >= n)
		return EGRESS_ERR_TOO_BIG;
	memcpy(buf, tmp, len + 1);
	return 0;
}

int
policy_addr_parse(const char *s, struct policy_addr *ret_addr)
{
	struct policy_addr a;
	char canon[INET6_ADDRSTRLEN];
	size_t len;

	if (s == NULL || ret_addr == NULL)
		return EGRESS_ERR_INVALID;
	len = strnlen(s, INET6_ADDRSTRLEN);
	if (len == 0 || len >= INET6_ADDRSTRLEN)
		return EGRESS_ERR_INVALID;
	memset(&a, 0, sizeof(a));
	if (inet_pton(AF_INET, s, a.bytes) == 1)
		a.family = 4;
	else if (inet_pton(AF_INET6, s, a.bytes) == 1)
		a.family = 6;
	else
		return EGRESS_ERR_INVALID;
	/* Canonical means exactly what inet_ntop prints. */
	if (policy_addr_format(&a, canon, sizeof(canon)) != 0 ||
	    strcmp(canon, s) != 0)
		return EGRESS_ERR_INVALID;
	*ret_addr = a;
	return 0;
}
