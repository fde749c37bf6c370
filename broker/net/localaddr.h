/* SPDX-License-Identifier: ISC */
/*
 * localaddr: this host's own interface addresses as a policy_addr list, for
 * the classifier (an address assigned to one of our interfaces is private).
 * This one-shot reader uses getifaddrs(); it serves `egressctl check`.
 */
#ifndef EGRESS_LOCALADDR_H
#define EGRESS_LOCALADDR_H

#include <stddef.h>

#include "policy/policy.h"

/*
 * Read every IPv4 and IPv6 address assigned to an interface of this host.
 * On success write a malloc'd array to *ret_addrs (owned by the caller,
 * free() it) and its length to *ret_n, and return 0; return EGRESS_ERR_IO
 * or EGRESS_ERR_NOMEM otherwise.
 */
int localaddr_read(struct policy_addr **ret_addrs, size_t *ret_n);

#endif
