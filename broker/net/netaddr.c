/* SPDX-License-Identifier: ISC */
/*
 * The host's interface addresses from libnl-route, kept current from
 * netlink address events. Two sockets: "ev" joins the IPv4 and IPv6
 * address multicast groups and only tells us that something changed;
 * "sync" re-reads the rtnl_addr cache. Subscribing before the first dump
 * means no change can fall between the dump and the subscription, and
 * re-reading the whole cache after each burst (instead of applying each
 * message) makes a lost event (ENOBUFS) harmless. See netaddr.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/rtnetlink.h>
#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <netlink/route/addr.h>

#include <event2/event.h>

#include <egress/error.h>

#include "broker/net/netaddr.h"

#define NETADDR_ROUNDS	   64 /* recv rounds per wakeup */
#define NETADDR_DUMP_TRIES 4  /* re-dumps after NLE_DUMP_INTR */
#define NETADDR_RCVBUF	   (256 * 1024)

struct netaddr {
	struct event_base *base;
	netaddr_change_cb cb;
	void *cb_arg;
	struct nl_sock *ev;	/* multicast subscriber */
	struct nl_sock *sync;	/* dumps */
	struct nl_cache *cache; /* route/addr */
	struct event *rd;
	struct policy_addr *v; /* sorted, unique */
	size_t n;
	uint64_t generation;
	uint64_t errors;
	uint64_t overruns;
	int dirty;
};

/* Collected while walking the cache. */
struct netaddr_walk {
	struct policy_addr *v;
	size_t n, cap;
	int nomem;
};

static int
netaddr_cmp(const void *a, const void *b)
{
	const struct policy_addr *x = a, *y = b;

	if (x->family != y->family)
		return x->family < y->family ? -1 : 1;
	return memcmp(x->bytes, y->bytes, sizeof(x->bytes));
}

static void
netaddr_walk_cb(struct nl_object *obj, void *arg)
{
	struct netaddr_walk *w = arg;
	struct rtnl_addr *ra = (struct rtnl_addr *)obj;
	struct nl_addr *local;
	struct policy_addr a;
	int fam;

	local = rtnl_addr_get_local(ra);
	if (local == NULL || w->nomem || w->n >= NETADDR_MAX)
		return;
	fam = nl_addr_get_family(local);
	memset(&a, 0, sizeof(a));
	if (fam == AF_INET && nl_addr_get_len(local) == 4) {
		a.family = 4;
		memcpy(a.bytes, nl_addr_get_binary_addr(local), 4);
	} else if (fam == AF_INET6 && nl_addr_get_len(local) == 16) {
		a.family = 6;
		memcpy(a.bytes, nl_addr_get_binary_addr(local), 16);
	} else
		return;
	if (w->n == w->cap) {
		size_t ncap = w->cap != 0 ? w->cap * 2 : 16;
		struct policy_addr *nv;

		nv = reallocarray(w->v, ncap, sizeof(*nv));
		if (nv == NULL) {
			w->nomem = 1;
			return;
		}
		w->v = nv;
		w->cap = ncap;
	}
	w->v[w->n++] = a;
}

/* Build the sorted, unique set from the cache; install it if different. */
static int
netaddr_rebuild(struct netaddr *na)
{
	struct netaddr_walk w = { NULL, 0, 0, 0 };
	size_t i, j;

	nl_cache_foreach(na->cache, netaddr_walk_cb, &w)
		;
	if (w.nomem) {
		free(w.v);
		return EGRESS_ERR_NOMEM;
	}
	if (w.n > 1) {
		qsort(w.v, w.n, sizeof(w.v[0]), netaddr_cmp);
		for (i = 1, j = 1; i < w.n; i++)
			if (netaddr_cmp(&w.v[i], &w.v[j - 1]) != 0)
				w.v[j++] = w.v[i];
		w.n = j;
	}
	if (w.n == na->n &&
	    (w.n == 0 || memcmp(w.v, na->v, w.n * sizeof(w.v[0])) == 0)) {
		free(w.v);
		return 0;
	}
	free(na->v);
	na->v = w.v;
	na->n = w.n;
	na->generation++;
	return 1;
}

int
netaddr_refresh(struct netaddr *na)
{
	int i, err = -NLE_DUMP_INTR;

	for (i = 0; i < NETADDR_DUMP_TRIES && err == -NLE_DUMP_INTR; i++)
		err = nl_cache_refill(na->sync, na->cache);
	if (err < 0) {
		na->errors++;
		return err == -NLE_NOMEM ? EGRESS_ERR_NOMEM : EGRESS_ERR_IO;
	}
	err = netaddr_rebuild(na);
	if (err < 0)
		na->errors++;
	return err;
}

static int
netaddr_msg_cb(struct nl_msg *msg, void *arg)
{
	struct netaddr *na = arg;

	na->dirty = 1;
	return NL_OK;
}

static void
netaddr_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct netaddr *na = arg;
	int i, rc;

	for (i = 0; i < NETADDR_ROUNDS; i++) {
		rc = nl_recvmsgs_default(na->ev);
		if (rc == -NLE_NOMEM) {
			/* ENOBUFS: events were lost; the re-read covers. */
			na->overruns++;
			na->dirty = 1;
			continue;
		}
		if (rc <= 0)
			break;
	}
	if (i == NETADDR_ROUNDS)
		na->dirty = 1; /* still busy: read the truth anyway */
	if (!na->dirty)
		return;
	na->dirty = 0;
	if (netaddr_refresh(na) == 1 && na->cb != NULL)
		na->cb(na->cb_arg, na);
}

static int
netaddr_cloexec(struct nl_sock *sk)
{
	int fd = nl_socket_get_fd(sk), fl;

	if (fd < 0 || (fl = fcntl(fd, F_GETFD)) < 0 ||
	    fcntl(fd, F_SETFD, fl | FD_CLOEXEC) != 0)
		return -1;
	return 0;
}

int
netaddr_new(struct event_base *base, netaddr_change_cb cb, void *arg,
    struct netaddr **ret)
{
	struct netaddr *na;
	int err = EGRESS_ERR_NOMEM;

	if ((na = calloc(1, sizeof(*na))) == NULL)
		return EGRESS_ERR_NOMEM;
	na->base = base;
	na->cb = cb;
	na->cb_arg = arg;
	if ((na->ev = nl_socket_alloc()) == NULL ||
	    (na->sync = nl_socket_alloc()) == NULL)
		goto out;
	err = EGRESS_ERR_IO;
	nl_socket_disable_seq_check(na->ev);
	if (nl_socket_modify_cb(na->ev, NL_CB_VALID, NL_CB_CUSTOM,
		netaddr_msg_cb, na) < 0 ||
	    nl_connect(na->ev, NETLINK_ROUTE) < 0 ||
	    netaddr_cloexec(na->ev) != 0 ||
	    nl_socket_set_nonblocking(na->ev) < 0 ||
	    nl_socket_set_buffer_size(na->ev, NETADDR_RCVBUF, 0) < 0 ||
	    nl_socket_add_memberships(na->ev, RTNLGRP_IPV4_IFADDR,
		RTNLGRP_IPV6_IFADDR, 0) < 0)
		goto out;
	if (nl_connect(na->sync, NETLINK_ROUTE) < 0 ||
	    netaddr_cloexec(na->sync) != 0)
		goto out;
	if (rtnl_addr_alloc_cache(na->sync, &na->cache) < 0) {
		na->cache = NULL;
		goto out;
	}
	if ((err = netaddr_rebuild(na)) < 0)
		goto out;
	na->generation = 1;
	err = EGRESS_ERR_NOMEM;
	na->rd = event_new(base, nl_socket_get_fd(na->ev),
	    EV_READ | EV_PERSIST, netaddr_read_cb, na);
	if (na->rd == NULL || event_add(na->rd, NULL) != 0)
		goto out;
	*ret = na;
	na = NULL;
	err = 0;
out:
	netaddr_free(na);
	return err;
}

void
netaddr_free(struct netaddr *na)
{
	if (na == NULL)
		return;
	if (na->rd != NULL)
		event_free(na->rd);
	if (na->cache != NULL)
		nl_cache_free(na->cache);
	if (na->ev != NULL)
		nl_socket_free(na->ev);
	if (na->sync != NULL)
		nl_socket_free(na->sync);
	free(na->v);
	free(na);
}

const struct policy_addr *
netaddr_addrs(const struct netaddr *na, size_t *ret_n)
{
	if (na == NULL) {
		*ret_n = 0;
		return NULL;
	}
	*ret_n = na->n;
	return na->v;
}

uint64_t
netaddr_generation(const struct netaddr *na)
{
	return na != NULL ? na->generation : 0;
}

uint64_t
netaddr_errors(const struct netaddr *na)
{
	return na != NULL ? na->errors : 0;
}

uint64_t
netaddr_overruns(const struct netaddr *na)
{
	return na != NULL ? na->overruns : 0;
}
