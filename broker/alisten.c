/* SPDX-License-Identifier: ISC */
/*
 * Attached listeners: loopback TCP listeners a launcher opened in a
 * network namespace of its own and handed over the control socket, each
 * accepting into the instance it was attached for, as long as the
 * launcher's control connection lasts. See alisten.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <netinet/in.h>

#include <event2/event.h>
#include <event2/listener.h>
#include <jansson.h>

#include <egress/error.h>

#include "broker/alisten.h"
#include "broker/log.h"

#define ALISTEN_RETRY_MS 100 /* after accept() fails (EMFILE) */

struct alisten_group;

struct alisten_one {
	struct alisten_group *g;
	struct evconnlistener *lev;
	struct event *retry;
	int fd; /* the listener's, closed by alisten_reap() (-1: none) */
};

struct alisten_group {
	struct alisten_group *next;
	uint64_t id;
	char instance[CONF_NAME_MAX + 1];
	struct alisten_one l[ALISTEN_PER_ATTACH];
	size_t n;
	struct alisten *a;
};

struct alisten {
	struct event_base *base;
	alisten_accept_cb cb;
	void *arg;
	struct alisten_group *groups;
	/* Groups whose listeners are freed and whose descriptors wait for
	 * the loop's next turn to be closed (broker_base_new()): the
	 * launcher may hold a copy of each, and a descriptor closed before
	 * its deletion reached epoll would leave the file watched. */
	struct alisten_group *dying;
	struct event *reap;
	size_t total;
	uint64_t next_id;
	uint64_t own_netns; /* the broker's network namespace (cookie) */
	int own_netns_ok;   /* 0: unknown, and every listener refused */
};

static void alisten_reap(evutil_socket_t fd, short what, void *arg);

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71 /* Linux 5.14 */
#endif

/* Write the cookie of the network namespace fd's socket lives in. */
static int
alisten_netns(int fd, uint64_t *ret)
{
	socklen_t sl = sizeof(*ret);

	return getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, ret, &sl) == 0 &&
		sl == sizeof(*ret) ?
	    0 :
	    -1;
}

int
alisten_new(struct event_base *base, alisten_accept_cb cb, void *arg,
    struct alisten **ret)
{
	struct alisten *a;
	int fd;

	if ((a = calloc(1, sizeof(*a))) == NULL)
		return EGRESS_ERR_NOMEM;
	a->base = base;
	a->cb = cb;
	a->arg = arg;
	a->next_id = 1;
	if ((a->reap = evtimer_new(base, alisten_reap, a)) == NULL) {
		free(a);
		return EGRESS_ERR_NOMEM;
	}
	/* A socket of its own tells which namespace the broker is in. */
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0) {
		a->own_netns_ok = alisten_netns(fd, &a->own_netns) == 0;
		(void)close(fd);
	}
	*ret = a;
	return 0;
}

static void
alisten_log(const char *status, const char *instance, size_t n,
    const char *what)
{
	json_t *o;

	o = json_pack("{s:s, s:o, s:I, s:s}", "status", status, "instance",
	    log_bounded_string(instance, strlen(instance)), "listeners",
	    (json_int_t)n, "what", what);
	if (o != NULL)
		log_event("egress.listen", o);
}

/* Is sa a loopback address (127.0.0.0/8, ::1)? */
static int
alisten_is_loopback(const struct sockaddr_storage *ss)
{
	const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;

	if (ss->ss_family == AF_INET)
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	if (ss->ss_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
	return 0;
}

/* Is fd a listening TCP socket bound to a loopback address? */
static int
alisten_fd_ok(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(int);
	struct stat st;
	int v;

	if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &sl) != 0 ||
	    v != SOCK_STREAM)
		return 0;
	sl = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &sl) != 0 ||
	    v != IPPROTO_TCP)
		return 0;
	sl = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &sl) != 0 || v != 1)
		return 0;
	sl = sizeof(ss);
	memset(&ss, 0, sizeof(ss));
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
		return 0;
	return alisten_is_loopback(&ss);
}

/* Close the descriptors of the dying groups and free them. */
static void
alisten_reap(evutil_socket_t fd, short what, void *arg)
{
	struct alisten *a = arg;
	struct alisten_group *g;
	size_t i;

	while ((g = a->dying) != NULL) {
		a->dying = g->next;
		for (i = 0; i < g->n; i++)
			if (g->l[i].fd >= 0)
				(void)close(g->l[i].fd);
		free(g);
	}
}

static void
alisten_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct alisten_one *one = arg;

	(void)evconnlistener_enable(one->lev);
}

static void
alisten_error_cb(struct evconnlistener *lev, void *arg)
{
	struct alisten_one *one = arg;
	struct timeval tv = { 0, ALISTEN_RETRY_MS * 1000 };

	/* Out of descriptors or memory: back off instead of spinning. */
	alisten_log("error", one->g->instance, one->g->n,
	    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	(void)evconnlistener_disable(lev);
	(void)event_add(one->retry, &tv);
}

static void
alisten_accept(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct alisten_one *one = arg;
	struct alisten *a = one->g->a;

	a->cb(a->arg, fd, one->g->instance);
}

/* Stop g's listeners (already unlinked) and queue it for alisten_reap(). */
static void
alisten_group_free(struct alisten_group *g)
{
	struct alisten *a = g->a;
	const struct timeval now = { 0, 0 };
	size_t i;

	for (i = 0; i < g->n; i++) {
		if (g->l[i].lev != NULL)
			evconnlistener_free(g->l[i].lev);
		g->l[i].lev = NULL;
		if (g->l[i].retry != NULL)
			event_free(g->l[i].retry);
		g->l[i].retry = NULL;
	}
	a->total -= g->n;
	g->next = a->dying;
	a->dying = g;
	/* A timer's callback runs after the next wait for events, and the
	 * deletions reach epoll before that wait. */
	(void)evtimer_add(a->reap, &now);
}

static void
close_fds(int *fds, size_t from, size_t nfds)
{
	size_t i;

	for (i = from; i < nfds; i++)
		if (fds[i] >= 0)
			(void)close(fds[i]);
}

int
alisten_attach(struct alisten *a, const char *instance, int *fds, size_t nfds,
    uint64_t *ret_id, const char **reterr_msg)
{
	struct alisten_group *g;
	struct alisten_one *one;
	uint64_t ns;
	size_t i;

	*reterr_msg = "bad listener count";
	if (nfds == 0 || nfds > ALISTEN_PER_ATTACH ||
	    strlen(instance) > CONF_NAME_MAX)
		goto invalid;
	for (i = 0; i < nfds; i++) {
		if (!alisten_fd_ok(fds[i])) {
			*reterr_msg = "not a listening TCP socket on loopback";
			goto invalid;
		}
		/* Loopback of the broker's own namespace is every local
		 * user's: served without a token, it would open the
		 * instance to them all. */
		if (!a->own_netns_ok || alisten_netns(fds[i], &ns) != 0 ||
		    ns == a->own_netns) {
			*reterr_msg = "a listener in the broker's own network "
				      "namespace";
			goto invalid;
		}
	}
	if (alisten_count(a, instance) + nfds > ALISTEN_PER_INSTANCE) {
		*reterr_msg = "too many listeners for this instance";
		close_fds(fds, 0, nfds);
		return EGRESS_ERR_TOO_BIG;
	}
	if (a->total + nfds > ALISTEN_MAX) {
		*reterr_msg = "too many listeners";
		close_fds(fds, 0, nfds);
		return EGRESS_ERR_TOO_BIG;
	}
	*reterr_msg = "out of memory";
	if ((g = calloc(1, sizeof(*g))) == NULL) {
		close_fds(fds, 0, nfds);
		return EGRESS_ERR_NOMEM;
	}
	g->a = a;
	memcpy(g->instance, instance, strlen(instance) + 1);
	for (i = 0; i < nfds; i++) {
		one = &g->l[i];
		one->g = g;
		one->fd = -1;
		if (evutil_make_socket_nonblocking(fds[i]) != 0 ||
		    (one->retry = evtimer_new(a->base, alisten_retry_cb,
			 one)) == NULL ||
		    (one->lev = evconnlistener_new(a->base, alisten_accept,
			 one, LEV_OPT_CLOSE_ON_EXEC, 0, fds[i])) == NULL) {
			g->n = i + (one->retry != NULL);
			a->total += g->n;
			close_fds(fds, i, nfds);
			alisten_group_free(g);
			return EGRESS_ERR_NOMEM;
		}
		evconnlistener_set_error_cb(one->lev, alisten_error_cb);
		one->fd = fds[i];
		g->n = i + 1;
	}
	a->total += g->n;
	g->id = a->next_id++;
	g->next = a->groups;
	a->groups = g;
	alisten_log("attached", instance, g->n,
	    "listeners attached by a control connection");
	*ret_id = g->id;
	return 0;
invalid:
	close_fds(fds, 0, nfds);
	return EGRESS_ERR_INVALID;
}

void
alisten_detach(struct alisten *a, uint64_t id, const char *why)
{
	struct alisten_group *g, **pp;

	if (a == NULL)
		return;
	for (pp = &a->groups; (g = *pp) != NULL; pp = &g->next) {
		if (g->id != id)
			continue;
		*pp = g->next;
		alisten_log("closed", g->instance, g->n, why);
		alisten_group_free(g);
		return;
	}
}

void
alisten_reconcile(struct alisten *a, const struct conf_snapshot *s)
{
	struct alisten_group *g, **pp;

	for (pp = &a->groups; (g = *pp) != NULL;) {
		if (conf_instance_find(s, g->instance) != NULL) {
			pp = &g->next;
			continue;
		}
		*pp = g->next;
		alisten_log("closed", g->instance, g->n,
		    "the instance left the configuration");
		alisten_group_free(g);
	}
}

size_t
alisten_count(const struct alisten *a, const char *instance)
{
	const struct alisten_group *g;
	size_t n = 0;

	if (instance == NULL)
		return a->total;
	for (g = a->groups; g != NULL; g = g->next)
		if (strcmp(g->instance, instance) == 0)
			n += g->n;
	return n;
}

void
alisten_free(struct alisten *a)
{
	struct alisten_group *g;

	if (a == NULL)
		return;
	while ((g = a->groups) != NULL) {
		a->groups = g->next;
		alisten_group_free(g);
	}
	/* The loop turns no more: close them now. */
	alisten_reap(-1, 0, a);
	event_free(a->reap);
	free(a);
}
