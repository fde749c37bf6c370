/* SPDX-License-Identifier: ISC */
/*
 * Address parsing and formatting: canonical IPv4 and IPv6 literals in the
 * inet_ntop() spelling. Classification is in classify.c, NAT64 decoding in
 * nat64.c; both build on this file and it depends on neither.
 */
#include <string.h>

#include "policy/inet.h"
#include "policy/policy.h"

int
policy_addr_format(const struct policy_addr *addr, char *buf, size_t n)
{
	char tmp[POLICY_INET6_TEXT];
	int r;
	size_t len;

	if (addr == NULL || buf == NULL)
		return EGRESS_ERR_INVALID;
	if (addr->family == 4)
		r = policy_inet4_format(addr->bytes, tmp);
	else if (addr->family == 6)
		r = policy_inet6_format(addr->bytes, tmp, sizeof(tmp));
	else
		return EGRESS_ERR_INVALID;
	if (r < 0)
		return EGRESS_ERR_INVALID;
	len = (size_t)r;
	if (len >= n)
		return EGRESS_ERR_TOO_BIG;
	memcpy(buf, tmp, len + 1);
	return 0;
}

int
policy_addr_parse(const char *s, struct policy_addr *ret_addr)
{
	struct policy_addr a;
	char canon[POLICY_INET6_TEXT] = { 0 };
	size_t len;
	int r;

	if (s == NULL || ret_addr == NULL)
		return EGRESS_ERR_INVALID;
	len = strnlen(s, POLICY_INET6_TEXT);
	if (len == 0 || len >= POLICY_INET6_TEXT)
		return EGRESS_ERR_INVALID;
	memset(&a, 0, sizeof(a));
	if (policy_inet4_parse(s, len, a.bytes) == 1)
		a.family = 4;
	else if (policy_inet6_parse(s, len, a.bytes) == 1)
		a.family = 6;
	else
		return EGRESS_ERR_INVALID;
	/* Canonical means exactly what inet_ntop prints. */
	if (a.family == 4)
		r = policy_inet4_format(a.bytes, canon);
	else
		r = policy_inet6_format(a.bytes, canon, sizeof(canon));
	if (r < 0 || (size_t)r != len || memcmp(canon, s, len) != 0)
		return EGRESS_ERR_INVALID;
	*ret_addr = a;
	return 0;
}
