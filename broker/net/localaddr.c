/* SPDX-License-Identifier: ISC */
/*
 * localaddr: the host's interface addresses read once with getifaddrs().
 */
#include <sys/types.h>
#include <sys/socket.h>

#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "broker/net/localaddr.h"

int
localaddr_read(struct policy_addr **ret_addrs, size_t *ret_n)
{
	struct ifaddrs *ifa = NULL, *p;
	struct policy_addr *v = NULL;
	size_t n = 0, cap = 0;
	int rc = EGRESS_ERR_IO;

	if (getifaddrs(&ifa) != 0)
		goto out;
	for (p = ifa; p != NULL; p = p->ifa_next) {
		struct policy_addr a;

		if (p->ifa_addr == NULL)
			continue;
		memset(&a, 0, sizeof(a));
		if (p->ifa_addr->sa_family == AF_INET) {
			const struct sockaddr_in *sin =
			    (const struct sockaddr_in *)(const void *)
				p->ifa_addr;
			a.family = 4;
			memcpy(a.bytes, &sin->sin_addr, 4);
		} else if (p->ifa_addr->sa_family == AF_INET6) {
			const struct sockaddr_in6 *sin6 =
			    (const struct sockaddr_in6 *)(const void *)
				p->ifa_addr;
			a.family = 6;
			memcpy(a.bytes, &sin6->sin6_addr, 16);
		} else
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			struct policy_addr *nv;

			nv = reallocarray(v, ncap, sizeof(*nv));
			if (nv == NULL) {
				rc = EGRESS_ERR_NOMEM;
				goto out;
			}
			v = nv;
			cap = ncap;
		}
		v[n++] = a;
	}
	*ret_addrs = v;
	*ret_n = n;
	v = NULL;
	rc = 0;
out:
	free(v);
	if (ifa != NULL)
		freeifaddrs(ifa);
	return rc;
}
