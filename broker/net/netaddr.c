/* SPDX-License-Identifier: ISC */
/*
 * The host's own-address set from libnl-route, kept current from netlink
 * events: the interface addresses (an rtnl_addr cache) and the prefixes
 * of every local and anycast route in every table (dumped with the
 * kernel filtering by route type). Three sockets: "ev" joins the address
 * and route multicast groups and only tells us that something changed;
 * "sync" re-reads the address cache; "rt" dumps routes with strict
 * checking on (the address dump libnl sends would fail under it).
 * Subscribing before the first dump means no change can fall between the
 * dump and the subscription, and re-reading everything after each burst
 * (instead of applying each message) makes a lost event (ENOBUFS)
 * harmless. A re-read that fails leaves the set unknown (stale), never
 * partial, and is retried on a timer. See netaddr.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <linux/rtnetlink.h>
#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/attr.h>
#include <netlink/handlers.h>
#include <netlink/socket.h>
#include <netlink/route/addr.h>

#include <event2/event.h>

#include <egress/error.h>

#include "broker/net/netaddr.h"

#define NETADDR_ROUNDS	   64 /* recv rounds per wakeup */
#define NETADDR_DUMP_TRIES 4  /* re-dumps after NLE_DUMP_INTR */
#define NETADDR_RCVBUF	   (256 * 1024)
#define NETADDR_RETRY_MS   1000 /* re-read after a failed one */

struct netaddr {
	struct event_base *base;
	netaddr_change_cb cb;
	void *cb_arg;
	struct nl_sock *ev;	/* multicast subscriber */
	struct nl_sock *sync;	/* address dumps */
	struct nl_sock *rt;	/* route dumps (strict checking) */
	struct nl_cache *cache; /* route/addr */
	struct event *rd;
	struct event *retry;
	struct policy_addr *v; /* sorted, unique */
	size_t n;
	struct policy_net *nets; /* sorted by policy_net_cmp, unique */
	size_t nnets;
	int stale;    /* the last re-read failed: the set is unknown */
	int last_err; /* its error */
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

/* Collected while reading a route dump. */
struct netaddr_rwalk {
	struct policy_net *v;
	size_t n, cap;
	int nomem;
	int bad; /* a route message that could not be read */
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
	if (local == NULL || w->nomem)
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

/* Sort and deduplicate v (n elements of size sz); return the new n. */
static size_t
netaddr_unique(void *v, size_t n, size_t sz,
    int (*cmp)(const void *, const void *))
{
	char *p = v;
	size_t i, j;

	if (n < 2)
		return n;
	qsort(p, n, sz, cmp);
	for (i = 1, j = 1; i < n; i++)
		if (cmp(p + i * sz, p + (j - 1) * sz) != 0)
			memmove(p + j++ * sz, p + i * sz, sz);
	return j;
}

static int
netaddr_route_cb(struct nl_msg *msg, void *arg)
{
	struct netaddr_rwalk *w = arg;
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	struct nlattr *tb[RTA_MAX + 1];
	struct rtmsg *rtm;
	struct policy_net net;
	size_t alen, i;

	if (nlh->nlmsg_type != RTM_NEWROUTE || w->nomem || w->bad)
		return NL_SKIP;
	/* A route we cannot read could be a local one: the whole read
	 * fails (the set is then unknown), nothing is skipped. */
	w->bad = 1;
	if (nlmsg_parse(nlh, sizeof(*rtm), tb, RTA_MAX, NULL) < 0)
		return NL_SKIP;
	rtm = nlmsg_data(nlh);
	/* The kernel may not filter (no strict checking): filter here. */
	if (rtm->rtm_type != RTN_LOCAL && rtm->rtm_type != RTN_ANYCAST) {
		w->bad = 0;
		return NL_SKIP;
	}
	memset(&net, 0, sizeof(net));
	if (rtm->rtm_family == AF_INET && rtm->rtm_dst_len <= 32) {
		net.addr.family = 4;
		alen = 4;
	} else if (rtm->rtm_family == AF_INET6 && rtm->rtm_dst_len <= 128) {
		net.addr.family = 6;
		alen = 16;
	} else
		return NL_SKIP;
	net.len = rtm->rtm_dst_len;
	if (tb[RTA_DST] != NULL) {
		if ((size_t)nla_len(tb[RTA_DST]) != alen)
			return NL_SKIP;
		memcpy(net.addr.bytes, nla_data(tb[RTA_DST]), alen);
	} else if (net.len != 0)
		return NL_SKIP;
	w->bad = 0;
	/* Clear the host bits: the key policy_classify_ctx searches for. */
	for (i = net.len; i < 8 * sizeof(net.addr.bytes); i++)
		net.addr.bytes[i / 8] &= (uint8_t) ~(0x80u >> (i % 8));
	if (w->n == w->cap) {
		size_t ncap = w->cap != 0 ? w->cap * 2 : 16;
		struct policy_net *nv;

		nv = reallocarray(w->v, ncap, sizeof(*nv));
		if (nv == NULL) {
			w->nomem = 1;
			return NL_SKIP;
		}
		w->v = nv;
		w->cap = ncap;
	}
	w->v[w->n++] = net;
	return NL_OK;
}

/* Dump the routes of one family and type into w; 0 or a libnl error. */
static int
netaddr_dump_routes(struct nl_sock *sk, int family, int type,
    struct netaddr_rwalk *w)
{
	struct rtmsg rtm;
	struct nl_cb *cb;
	int err;

	memset(&rtm, 0, sizeof(rtm));
	rtm.rtm_family = (unsigned char)family;
	rtm.rtm_type = (unsigned char)type;
	if ((cb = nl_cb_alloc(NL_CB_DEFAULT)) == NULL)
		return -NLE_NOMEM;
	err = nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, netaddr_route_cb, w);
	if (err == 0)
		err = nl_send_simple(sk, RTM_GETROUTE, NLM_F_DUMP, &rtm,
		    sizeof(rtm));
	if (err >= 0)
		err = nl_recvmsgs(sk, cb);
	nl_cb_put(cb);
	if (err >= 0 && w->nomem)
		err = -NLE_NOMEM;
	if (err >= 0 && w->bad)
		err = -NLE_PARSE_ERR;
	return err < 0 ? err : 0;
}

/* Read every local and anycast route, all tables, both families. */
static int
netaddr_read_routes(struct nl_sock *sk, struct netaddr_rwalk *w)
{
	static const int fams[] = { AF_INET, AF_INET6 };
	static const int types[] = { RTN_LOCAL, RTN_ANYCAST };
	size_t f, t;
	int err = 0, tries;

	for (f = 0; f < 2; f++)
		for (t = 0; t < 2; t++) {
			size_t keep = w->n;

			err = -NLE_DUMP_INTR;
			for (tries = 0; tries < NETADDR_DUMP_TRIES &&
			     err == -NLE_DUMP_INTR;
			     tries++) {
				w->n = keep; /* an interrupted dump restarts */
				err = netaddr_dump_routes(sk, fams[f],
				    types[t], w);
			}
			if (err < 0)
				return err;
		}
	return 0;
}

/*
 * Build the sorted, unique sets from the address cache and a fresh route
 * dump; install them if different. Return 1 (changed), 0, or an error
 * with nothing installed.
 */
static int
netaddr_rebuild(struct netaddr *na)
{
	struct netaddr_walk w = { NULL, 0, 0, 0 };
	struct netaddr_rwalk rw = { NULL, 0, 0, 0, 0 };
	int err;

	nl_cache_foreach(na->cache, netaddr_walk_cb, &w)
		;
	if (w.nomem) {
		free(w.v);
		return EGRESS_ERR_NOMEM;
	}
	if ((err = netaddr_read_routes(na->rt, &rw)) < 0) {
		free(w.v);
		free(rw.v);
		return err == -NLE_NOMEM ? EGRESS_ERR_NOMEM : EGRESS_ERR_IO;
	}
	w.n = netaddr_unique(w.v, w.n, sizeof(w.v[0]), netaddr_cmp);
	rw.n = netaddr_unique(rw.v, rw.n, sizeof(rw.v[0]), policy_net_cmp);
	if (!na->stale && w.n == na->n && rw.n == na->nnets &&
	    (w.n == 0 || memcmp(w.v, na->v, w.n * sizeof(w.v[0])) == 0) &&
	    (rw.n == 0 ||
		memcmp(rw.v, na->nets, rw.n * sizeof(rw.v[0])) == 0)) {
		free(w.v);
		free(rw.v);
		return 0;
	}
	free(na->v);
	na->v = w.v;
	na->n = w.n;
	free(na->nets);
	na->nets = rw.v;
	na->nnets = rw.n;
	na->stale = 0;
	na->generation++;
	return 1;
}

int
netaddr_refresh(struct netaddr *na)
{
	int i, err = -NLE_DUMP_INTR;

	for (i = 0; i < NETADDR_DUMP_TRIES && err == -NLE_DUMP_INTR; i++)
		err = nl_cache_refill(na->sync, na->cache);
	if (err < 0)
		err = err == -NLE_NOMEM ? EGRESS_ERR_NOMEM : EGRESS_ERR_IO;
	else
		err = netaddr_rebuild(na);
	if (err < 0) {
		/* Unknown, never partial or old: decisions fail closed until
		 * a re-read succeeds. */
		na->errors++;
		na->stale = 1;
		na->last_err = err;
		if (na->retry != NULL) {
			struct timeval tv = { NETADDR_RETRY_MS / 1000,
				(NETADDR_RETRY_MS % 1000) * 1000 };

			(void)event_add(na->retry, &tv);
		}
	}
	return err;
}

/* Re-read, and tell the owner when the set or its state changed. */
static void
netaddr_update(struct netaddr *na)
{
	int was = na->stale, rc;

	rc = netaddr_refresh(na);
	if ((rc == 1 || na->stale != was) && na->cb != NULL)
		na->cb(na->cb_arg, na);
}

static void
netaddr_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct netaddr *na = arg;

	if (na->stale)
		netaddr_update(na);
}

/* Any address event counts; a route event only for a local or anycast
 * route (a busy routing table must not cause re-reads). */
static int
netaddr_msg_cb(struct nl_msg *msg, void *arg)
{
	struct netaddr *na = arg;
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	const struct rtmsg *rtm;

	if (nlh->nlmsg_type == RTM_NEWROUTE ||
	    nlh->nlmsg_type == RTM_DELROUTE) {
		if (!nlmsg_valid_hdr(nlh, sizeof(*rtm)))
			return NL_OK;
		rtm = nlmsg_data(nlh);
		if (rtm->rtm_type != RTN_LOCAL && rtm->rtm_type != RTN_ANYCAST)
			return NL_OK;
	}
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
	netaddr_update(na);
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

/* Connect the two dump sockets (and turn strict checking on for routes:
 * the kernel then filters the dump by route type). */
static int
netaddr_connect_sync(struct netaddr *na)
{
	int one = 1;

	if ((na->sync = nl_socket_alloc()) == NULL ||
	    (na->rt = nl_socket_alloc()) == NULL)
		return EGRESS_ERR_NOMEM;
	if (nl_connect(na->sync, NETLINK_ROUTE) < 0 ||
	    netaddr_cloexec(na->sync) != 0 ||
	    nl_connect(na->rt, NETLINK_ROUTE) < 0 ||
	    netaddr_cloexec(na->rt) != 0)
		return EGRESS_ERR_IO;
	/* Older kernels lack it: they dump every route, filtered here. */
	(void)setsockopt(nl_socket_get_fd(na->rt), SOL_NETLINK,
	    NETLINK_GET_STRICT_CHK, &one, sizeof(one));
	return 0;
}

/* The first read: the address cache and the routes. */
static int
netaddr_first_read(struct netaddr *na)
{
	int err;

	if (rtnl_addr_alloc_cache(na->sync, &na->cache) < 0) {
		na->cache = NULL;
		return EGRESS_ERR_IO;
	}
	if ((err = netaddr_rebuild(na)) < 0)
		return err;
	na->generation = 1;
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
	if ((na->ev = nl_socket_alloc()) == NULL)
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
		RTNLGRP_IPV6_IFADDR, RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_ROUTE,
		0) < 0)
		goto out;
	if ((err = netaddr_connect_sync(na)) != 0 ||
	    (err = netaddr_first_read(na)) != 0)
		goto out;
	err = EGRESS_ERR_NOMEM;
	na->rd = event_new(base, nl_socket_get_fd(na->ev),
	    EV_READ | EV_PERSIST, netaddr_read_cb, na);
	na->retry = evtimer_new(base, netaddr_retry_cb, na);
	if (na->rd == NULL || na->retry == NULL ||
	    event_add(na->rd, NULL) != 0)
		goto out;
	*ret = na;
	na = NULL;
	err = 0;
out:
	netaddr_free(na);
	return err;
}

int
netaddr_read(struct netaddr **ret)
{
	struct netaddr *na;
	int err;

	if ((na = calloc(1, sizeof(*na))) == NULL)
		return EGRESS_ERR_NOMEM;
	if ((err = netaddr_connect_sync(na)) != 0 ||
	    (err = netaddr_first_read(na)) != 0)
		goto out;
	/* Nothing to watch: the sockets go now. */
	nl_socket_free(na->rt);
	na->rt = NULL;
	nl_socket_free(na->sync);
	na->sync = NULL;
	*ret = na;
	na = NULL;
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
	if (na->retry != NULL)
		event_free(na->retry);
	if (na->cache != NULL)
		nl_cache_free(na->cache);
	if (na->ev != NULL)
		nl_socket_free(na->ev);
	if (na->sync != NULL)
		nl_socket_free(na->sync);
	if (na->rt != NULL)
		nl_socket_free(na->rt);
	free(na->v);
	free(na->nets);
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

int
netaddr_own(const struct netaddr *na, struct policy_classify_ctx *ctx)
{
	if (na == NULL || na->stale)
		return EGRESS_ERR_UNAVAILABLE;
	ctx->local = na->v;
	ctx->nlocal = na->n;
	ctx->nets = na->nets;
	ctx->nnets = na->nnets;
	return 0;
}

int
netaddr_is_stale(const struct netaddr *na)
{
	return na == NULL || na->stale;
}

int
netaddr_last_error(const struct netaddr *na)
{
	return na != NULL ? na->last_err : 0;
}

size_t
netaddr_nets_count(const struct netaddr *na)
{
	return na != NULL ? na->nnets : 0;
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
