/* SPDX-License-Identifier: ISC */
/*
 * pool: a most-recently-used list of idle connections. Lookups are a
 * linear scan bounded by max_idle (a few hundred entries at most), which
 * keeps the key comparison exact and simple. While idle, a connection
 * reads: any byte or EOF from the upstream means it cannot be reused and
 * closes it, as does its idle timer.
 */
#include <sys/socket.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include <egress/error.h>

#include "broker/net/lease.h"
#include "broker/net/pool.h"

struct pool_conn {
	struct pool_conn *prev, *next; /* next: older */
	struct pool *p;
	char instance[LEASE_NAME_MAX + 1];
	struct policy_host host;
	uint16_t port;
	int tls;
	uint64_t trust;
	struct policy_addr addr;
	struct bufferevent *bev;
	struct lease *lease;
	struct event *timer;
};

struct pool {
	struct event_base *base;
	struct pool_conn *head, *tail;
	size_t n;
	size_t max_idle;
	int idle_timeout_ms;
};

struct pool *
pool_new(struct event_base *base, size_t max_idle, int idle_timeout_ms)
{
	struct pool *p;

	if (base == NULL || (p = calloc(1, sizeof(*p))) == NULL)
		return NULL;
	p->base = base;
	p->max_idle = max_idle > 0 ? max_idle : POOL_IDLE_MAX_DEFAULT;
	p->idle_timeout_ms = idle_timeout_ms > 0 ?
	    idle_timeout_ms :
	    POOL_IDLE_TIMEOUT_DEFAULT_MS;
	return p;
}

static void
pool_unlink(struct pool_conn *c)
{
	struct pool *p = c->p;

	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		p->head = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	else
		p->tail = c->prev;
	p->n--;
}

/* Free the entry; with close, also the connection and its lease. */
static void
pool_conn_free(struct pool_conn *c, int close)
{
	if (c->timer != NULL)
		event_free(c->timer);
	if (close) {
		bufferevent_free(c->bev);
		lease_release(c->lease);
	}
	free(c);
}

void
pool_free(struct pool *p)
{
	struct pool_conn *c;

	if (p == NULL)
		return;
	while ((c = p->head) != NULL) {
		// NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the head has no prev
		pool_unlink(c);
		pool_conn_free(c, 1);
	}
	free(p);
}

static void
pool_drop(struct pool_conn *c)
{
	pool_unlink(c);
	pool_conn_free(c, 1);
}

static void
pool_read_cb(struct bufferevent *bev, void *arg)
{
	pool_drop(arg); /* unsolicited bytes: not reusable */
}

static void
pool_event_cb(struct bufferevent *bev, short what, void *arg)
{
	pool_drop(arg);
}

static void
pool_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	pool_drop(arg);
}

static int
pool_addr_eq(const struct policy_addr *a, const struct policy_addr *b)
{
	return a->family == b->family &&
	    memcmp(a->bytes, b->bytes, a->family == 4 ? 4 : 16) == 0;
}

static int
pool_key_eq(const struct pool_conn *c, const struct pool_key *k)
{
	return c->port == k->port && c->tls == (k->tls != 0) &&
	    c->trust == k->trust && c->host.kind == k->host->kind &&
	    strcmp(c->host.name, k->host->name) == 0 &&
	    strcmp(c->instance, k->instance) == 0;
}

int
pool_put(struct pool *p, const struct pool_key *k,
    const struct policy_addr *addr, struct bufferevent *bev,
    struct lease *lease)
{
	struct pool_conn *c = NULL;
	struct timeval tv;
	size_t n;

	if (p == NULL || k == NULL || k->instance == NULL || k->host == NULL ||
	    addr == NULL || bev == NULL)
		goto fail;
	n = strlen(k->instance);
	if (n == 0 || n > LEASE_NAME_MAX ||
	    (addr->family != 4 && addr->family != 6))
		goto fail;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		goto nomem;
	c->p = p;
	memcpy(c->instance, k->instance, n);
	c->host = *k->host;
	c->port = k->port;
	c->tls = k->tls != 0;
	c->trust = k->trust;
	c->addr = *addr;
	if ((c->timer = evtimer_new(p->base, pool_timer_cb, c)) == NULL)
		goto nomem;
	tv.tv_sec = p->idle_timeout_ms / 1000;
	tv.tv_usec = (p->idle_timeout_ms % 1000) * 1000;
	if (evtimer_add(c->timer, &tv) != 0)
		goto nomem;
	while (p->n >= p->max_idle) /* max_idle > 0: a tail exists */
		// NOLINTNEXTLINE(clang-analyzer-unix.Malloc): n counts the list
		pool_drop(p->tail);
	c->bev = bev;
	c->lease = lease;
	bufferevent_setcb(bev, pool_read_cb, NULL, pool_event_cb, c);
	(void)bufferevent_disable(bev, EV_WRITE);
	if ((bufferevent_get_enabled(bev) & EV_READ) == 0)
		(void)bufferevent_enable(bev, EV_READ);
	c->next = p->head;
	if (p->head != NULL)
		p->head->prev = c;
	p->head = c;
	if (p->tail == NULL)
		p->tail = c;
	p->n++;
	return 0;
nomem:
	if (c != NULL)
		pool_conn_free(c, 0);
	bufferevent_free(bev);
	lease_release(lease);
	return EGRESS_ERR_NOMEM;
fail:
	if (bev != NULL)
		bufferevent_free(bev);
	lease_release(lease);
	return EGRESS_ERR_INVALID;
}

/*
 * Is the idle connection still quiet? Bytes (or EOF) that reached the
 * kernel or TLS buffers but not yet the read callback would otherwise be
 * parsed as the next request's response.
 */
static int
pool_conn_is_quiet(struct pool_conn *c)
{
	struct bufferevent *bev = c->bev;
	SSL *ssl;
	evutil_socket_t fd;
	ssize_t n;
	char b;

	if (evbuffer_get_length(bufferevent_get_input(bev)) > 0)
		return 0;
	/* Also part of a record not yet decrypted (SSL_pending() counts
	 * only what is). */
	if ((ssl = bufferevent_openssl_get_ssl(bev)) != NULL &&
	    SSL_has_pending(ssl))
		return 0;
	if ((fd = bufferevent_getfd(bev)) < 0)
		return 0;
	n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	/* Anything there, EOF, or an error: not reusable. A TLS record
	 * (even a late session ticket) counts: we drop rather than guess. */
	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

struct bufferevent *
pool_take(struct pool *p, const struct pool_key *k,
    const struct policy_addr *addrs, size_t naddrs, struct lease **ret_lease,
    struct policy_addr *ret_used)
{
	struct pool_conn *c, *next;
	struct bufferevent *bev;
	size_t i;

	if (p == NULL || k == NULL || k->instance == NULL || k->host == NULL ||
	    ret_lease == NULL || ret_used == NULL)
		return NULL;
	for (c = p->head; c != NULL; c = next) {
		next = c->next;
		if (!pool_key_eq(c, k))
			continue;
		for (i = 0; i < naddrs; i++)
			if (pool_addr_eq(&c->addr, &addrs[i]))
				break;
		if (i == naddrs)
			continue;
		if (!pool_conn_is_quiet(c)) {
			pool_drop(c); /* closes it, releases its lease */
			continue;
		}
		pool_unlink(c);
		bev = c->bev;
		/* The read watch stays registered (the next exchange wants
		 * it): no epoll_ctl pair per request. */
		bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
		*ret_lease = c->lease;
		*ret_used = c->addr;
		pool_conn_free(c, 0);
		return bev;
	}
	return NULL;
}

size_t
pool_evict(struct pool *p, const char *instance, size_t n)
{
	struct pool_conn *c, *prev;
	size_t done = 0;

	if (p == NULL || instance == NULL)
		return 0;
	for (c = p->tail; c != NULL && done < n; c = prev) {
		/* NOLINTBEGIN(clang-analyzer-unix.Malloc): a dropped entry
		 * is unlinked before it is freed (tail moves to its prev) */
		prev = c->prev;
		/* NOLINTEND(clang-analyzer-unix.Malloc) */
		if (strcmp(c->instance, instance) != 0)
			continue;
		pool_drop(c);
		done++;
	}
	return done;
}

/* Close the oldest idle connection of another instance than instance
 * that borrows from t's share (or of anyone else, with any set). */
static int
pool_evict_other(struct pool *p, struct lease_table *t, const char *instance,
    int any)
{
	struct pool_conn *c;

	for (c = p->tail; c != NULL; c = c->prev)
		if (strcmp(c->instance, instance) != 0 &&
		    (any || lease_is_borrowing(t, c->instance))) {
			pool_drop(c);
			return 1;
		}
	return 0;
}

int
pool_lease(struct pool *p, struct lease_table *t, const char *instance,
    unsigned max, struct lease **ret)
{
	int err;

	for (;;) {
		err = lease_acquire(t, instance, max, ret);
		if (err != EGRESS_ERR_BUDGET_EXHAUSTED || p == NULL)
			return err;
		if (pool_evict(p, instance, 1) > 0)
			continue; /* its own idle connection */
		if (lease_count(t, instance) >= max ||
		    !pool_evict_other(p, t, instance,
			lease_is_within_guarantee(t, instance)))
			return err;
	}
}

size_t
pool_drop_if(struct pool *p, pool_match_fn match, void *arg)
{
	struct pool_conn *c, *prev;
	struct pool_key k;
	size_t done = 0;

	if (p == NULL || match == NULL)
		return 0;
	for (c = p->tail; c != NULL; c = prev) {
		prev = c->prev;
		k.instance = c->instance;
		k.host = &c->host;
		k.port = c->port;
		k.tls = c->tls;
		k.trust = c->trust;
		if (match(arg, &k)) {
			pool_drop(c);
			done++;
		}
	}
	return done;
}

size_t
pool_idle(const struct pool *p, const char *instance)
{
	const struct pool_conn *c;
	size_t n = 0;

	if (p == NULL)
		return 0;
	if (instance == NULL)
		return p->n;
	for (c = p->head; c != NULL; c = c->next)
		if (strcmp(c->instance, instance) == 0)
			n++;
	return n;
}
