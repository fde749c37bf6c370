/* SPDX-License-Identifier: ISC */
/*
 * Private to policy/: NAT64 decoding (RFC 6052 section 2.2) used by address
 * classification. The well-known prefix 64:ff9b::/96 is always decoded;
 * declared prefixes come from a struct policy_nat64_list that
 * policy_nat64_parse_list() produced. Not part of the public contract.
 */
#ifndef EGRESS_POLICY_NAT64_H
#define EGRESS_POLICY_NAT64_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

/* At most this many translations of one address: well-known + declared. */
#define POLICY_NAT64_DECODE_MAX (1 + POLICY_NAT64_MAX)

/*
 * Answer whether len is one of the RFC 6052 prefix lengths
 * (32, 40, 48, 56, 64, 96). Return 1 or 0.
 */
int policy_nat64_len_is_valid(unsigned len);

/*
 * Answer whether the first p->len bits of addr (16 network-order bytes)
 * equal p->prefix. A p->len outside the RFC 6052 set never matches.
 * Return 1 or 0.
 */
int policy_nat64_prefix_contains(const struct policy_nat64_prefix *p,
    const uint8_t addr[16]);

/*
 * Extract the IPv4 address embedded in addr under the RFC 6052 layout of
 * p->len, skipping the u-octet (bits 64-71) and ignoring the suffix. Write
 * the 4 bytes to ret_v4. Return 1 when addr lies inside p (then ret_v4 is
 * written), 0 otherwise.
 */
int policy_nat64_decode(const struct policy_nat64_prefix *p,
    const uint8_t addr[16], uint8_t ret_v4[4]);

/*
 * Decode addr under the well-known prefix 64:ff9b::/96 and under every
 * prefix of list (NULL: none) that contains it, in that order. Write each
 * translation to ret_v4[i] (the array holds POLICY_NAT64_DECODE_MAX
 * entries). Return the number of translations written; 0 means addr is
 * not a NAT64 address. Duplicate translations are not removed.
 */
size_t policy_nat64_decode_all(const struct policy_nat64_list *list,
    const uint8_t addr[16], uint8_t ret_v4[][4]);

#endif /* EGRESS_POLICY_NAT64_H */
