/* SPDX-License-Identifier: ISC */
/*
 * The daemon-wide state of egressd (see broker.h): the resolver and TLS
 * holders that follow each snapshot and stay alive while lookups and
 * requests in flight use them, the pruning of the keep-alive pool at a
 * reload, and this host's addresses.
 */
#include <sys/resource.h>
#include <sys/stat.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include <egress/error.h>

#include "broker/broker.h"
#include "broker/log.h"
#include "broker/net/decide.h"
#include "broker/net/dial.h"
#include "broker/net/dns.h"
#include "broker/net/lease.h"
#include "broker/net/netaddr.h"
#include "broker/net/pipemove.h"
#include "broker/net/pool.h"
#include "broker/net/share.h"
#include "broker/session.h"
#include "broker/inspect.h"
#include "broker/tlsprof.h"
#include "conf/conf.h"
#include "policy/policy.h"

void
broker_format_id(char *buf, size_t n, const char *prefix, uint64_t seq)
{
	char digits[20];
	size_t len = strlen(prefix), nd = 0, take;

	do {
		digits[sizeof(digits) - 1 - nd++] = (char)('0' + seq % 10);
		seq /= 10;
	} while (seq != 0 && nd < sizeof(digits));
	if (n == 0)
		return;
	if (len > n - 1)
		len = n - 1;
	memcpy(buf, prefix, len);
	if (len < n - 1)
		buf[len++] = '-';
	take = nd < n - 1 - len ? nd : n - 1 - len;
	memcpy(buf + len, digits + sizeof(digits) - nd, take);
	buf[len + take] = '\0';
}

uint64_t
broker_now_ms(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t
broker_now_us(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* A resolver shared by the lookups that use it. */
struct broker_dns {
	struct broker *b;
	struct dns_resolver *r;
	unsigned refs; /* the broker's, plus one per query */
	char *key;     /* servers and timeout, for comparing */
};

static void
broker_dns_free_cb(evutil_socket_t fd, short what, void *arg)
{
	struct broker_dns *d = arg;

	dns_resolver_free(d->r);
	free(d->key);
	free(d);
}

static void
broker_dns_unref(struct broker_dns *d)
{
	struct timeval zero = { 0, 0 };

	if (d == NULL || --d->refs > 0)
		return;
	/* Never free a resolver from inside its own callback. */
	if (event_base_once(d->b->base, -1, EV_TIMEOUT, broker_dns_free_cb, d,
		&zero) != 0)
		broker_dns_free_cb(-1, 0, d);
}

struct broker_dns *
broker_dns_hold(struct broker *b)
{
	if (b->dns != NULL)
		b->dns->refs++;
	return b->dns;
}

struct dns_resolver *
broker_dns_resolver(const struct broker_dns *d)
{
	return d->r;
}

void
broker_dns_release(struct broker_dns *d)
{
	broker_dns_unref(d);
}

static char *
dns_key(const struct conf_snapshot *s)
{
	size_t i, n = 32;
	char *k;

	for (i = 0; i < s->nresolver_servers; i++)
		n += strlen(s->resolver_servers[i]) + 1;
	if ((k = malloc(n)) == NULL)
		return NULL;
	(void)snprintf(k, n, "%u;", s->resolver_timeout_ms);
	for (i = 0; i < s->nresolver_servers; i++) {
		strcat(k, s->resolver_servers[i]);
		strcat(k, ",");
	}
	return k;
}

static void
broker_log_problem(const char *what, const char *detail)
{
	json_t *o;

	o = json_pack("{s:s, s:s, s:s}", "status", "error", "what", what,
	    "detail", detail);
	if (o != NULL)
		log_event("egress.broker", o);
}

struct pool_prune {
	struct broker *b;
	const struct conf_snapshot *s;
	int parent_changed;
};

/* Should an idle pooled connection go at this reload? */
static int
pool_prune_cb(void *arg, const struct pool_key *k)
{
	static struct policy_verdict v; /* large; single-threaded */
	struct pool_prune *pr = arg;
	const struct conf_instance *ci;
	struct policy_dest d;

	if (k->tls && !tlsprof_trust_is_current(pr->b, k->trust))
		return 1; /* verified under an old trust */
	if (pr->parent_changed)
		return 1; /* made through another [upstream_proxy], or none */
	if ((ci = conf_instance_find(pr->s, k->instance)) == NULL)
		return 1; /* the instance is gone */
	if (lease_count(pr->b->leases, k->instance) >
	    pr->s->max_connections_per_instance)
		return 1; /* over a lowered budget */
	/* The host is no longer granted (the next request would be denied
	 * anyway: free the connection and its lease now). */
	memset(&d, 0, sizeof(d));
	(void)snprintf(d.scheme, sizeof(d.scheme), "%s",
	    k->tls ? "https" : "http");
	d.host = *k->host;
	d.port = k->port;
	return policy_check_destination(&ci->policy, POLICY_TRANSPORT_HTTP, &d,
		   &v) != 0 ||
	    v.reason != POLICY_REASON_ALLOW;
}

struct event_base *
broker_base_new(void)
{
	struct event_config *cfg = event_config_new();
	struct event_base *base;

	if (cfg == NULL)
		return NULL;
	if (event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST) !=
	    0) {
		event_config_free(cfg);
		return NULL;
	}
	base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	return base;
}

void
broker_file_id(const char *path, struct broker_file_id *ret)
{
	struct stat st;

	memset(ret, 0, sizeof(*ret));
	if (path == NULL || stat(path, &st) != 0)
		return;
	ret->ok = 1;
	ret->dev = (uint64_t)st.st_dev;
	ret->ino = (uint64_t)st.st_ino;
	ret->size = (uint64_t)st.st_size;
	ret->mtime = st.st_mtim;
	ret->ctime = st.st_ctim;
}

int
broker_file_id_eq(const struct broker_file_id *a,
    const struct broker_file_id *b)
{
	return a->ok && b->ok && a->dev == b->dev && a->ino == b->ino &&
	    a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
	    a->mtime.tv_nsec == b->mtime.tv_nsec &&
	    a->ctime.tv_sec == b->ctime.tv_sec &&
	    a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/* Are a and b (either NULL) different strings? */
static int
str_differ(const char *a, const char *b)
{
	return (a == NULL) != (b == NULL) || (a != NULL && strcmp(a, b) != 0);
}

/* Replace *slot with a copy of v (NULL: none), wiping the old one. */
static int
str_replace(char **slot, const char *v)
{
	char *u = NULL;

	if (v != NULL && (u = strdup(v)) == NULL)
		return EGRESS_ERR_NOMEM;
	if (*slot != NULL)
		explicit_bzero(*slot, strlen(*slot));
	free(*slot);
	*slot = u;
	return 0;
}

int
broker_apply_conf(struct broker *b, const struct conf_snapshot *s)
{
	struct broker_file_id caid;
	struct broker_dns *d = NULL;
	struct dial_tls *t = NULL;
	struct pool_prune pr;
	char *key, *ca = NULL;
	int err, ret = 0;

	memset(&pr, 0, sizeof(pr));
	pr.b = b;
	pr.s = s;
	if ((err = broker_apply_shares(b, s)) != 0)
		return err;
	if (b->pool == NULL)
		b->pool = pool_new(b->base, 0, 0); /* NULL: no reuse */

	if ((key = dns_key(s)) == NULL)
		return EGRESS_ERR_NOMEM;
	if (b->dns != NULL && strcmp(b->dns->key, key) == 0) {
		free(key);
	} else if ((d = calloc(1, sizeof(*d))) == NULL) {
		free(key);
		ret = EGRESS_ERR_NOMEM;
	} else {
		d->b = b;
		d->key = key;
		d->refs = 1;
		err = dns_resolver_new(b->base,
		    (const char *const *)s->resolver_servers,
		    s->nresolver_servers, (int)s->resolver_timeout_ms, &d->r);
		if (err != 0) {
			broker_log_problem("resolver", egress_strerror(err));
			free(d->key);
			free(d);
			ret = err;
		} else {
			dns_resolver_set_share(d->r, b->dns_share);
			broker_dns_unref(b->dns);
			b->dns = d;
		}
	}

	/* Taken before loading: a rewrite during the load shows next time. */
	broker_file_id(s->ca_file, &caid);
	if (b->tls == NULL || !b->tls_ok ||
	    (s->ca_file == NULL) != (b->tls_ca == NULL) ||
	    (s->ca_file != NULL &&
		(strcmp(s->ca_file, b->tls_ca) != 0 ||
		    !broker_file_id_eq(&caid, &b->tls_ca_id)))) {
		if (s->ca_file != NULL && (ca = strdup(s->ca_file)) == NULL)
			return EGRESS_ERR_NOMEM;
		err = dial_tls_new(s->ca_file, &t);
		b->tls_gen++; /* connections verified before: never reused */
		dial_tls_free(b->tls);
		free(b->tls_ca);
		b->tls = t;
		b->tls_ca = ca;
		b->tls_ca_id = caid;
		b->tls_ok = err == 0;
		if (err != 0) {
			broker_log_problem("tls trust", egress_strerror(err));
			if (ret == 0)
				ret = err;
		}
	}
	/* After [tls]: a profile without ca_file uses its CA file. */
	if ((err = tlsprof_apply(b, s)) != 0 && ret == 0)
		ret = err;
	if ((err = inspect_apply(b, s)) != 0 && ret == 0)
		ret = err;
	/* New credentials too: a tunnel the old ones opened is not reused
	 * (the parent may have revoked them). */
	if (str_differ(s->upstream_proxy_url, b->parent_url) ||
	    str_differ(s->upstream_proxy_auth, b->parent_auth)) {
		if (str_replace(&b->parent_url, s->upstream_proxy_url) != 0 ||
		    str_replace(&b->parent_auth, s->upstream_proxy_auth) != 0)
			return EGRESS_ERR_NOMEM;
		pr.parent_changed = 1;
		b->parent_gen++; /* in flight now: never parked */
	}
	(void)pool_drop_if(b->pool, pool_prune_cb, &pr);
	return ret;
}

/* The default memory budget: 1 GiB, or a quarter of the RAM if less. */
static uint64_t
broker_mem_default(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t ram;

	if (pages <= 0 || psz <= 0)
		return BROKER_MEM_DEFAULT_MAX;
	ram = (uint64_t)pages * (uint64_t)psz / 4;
	return ram < BROKER_MEM_DEFAULT_MAX ? ram : BROKER_MEM_DEFAULT_MAX;
}

static void
broker_mem_wake_cb(evutil_socket_t fd, short what, void *arg)
{
	struct broker *b = arg;
	struct broker_mem *m;

	/* Wake each holder waiting now once. It is taken off the list
	 * before it runs; one that still finds no room puts itself back on
	 * b->mem_waiters, to be woken by the next release, not by this one
	 * again (which would spin the loop for as long as it found none). A
	 * holder freed meanwhile leaves whichever list holds it. */
	b->mem_waking = b->mem_waiters;
	b->mem_waiters = NULL;
	while ((m = b->mem_waking) != NULL) {
		b->mem_waking = m->wnext;
		if (m->wnext != NULL)
			m->wnext->wprev = NULL;
		m->wnext = m->wprev = NULL;
		m->waiting = 0;
		m->wake(m->arg);
	}
}

static void
broker_mem_unwait(struct broker *b, struct broker_mem *m)
{
	if (!m->waiting)
		return;
	if (m->wprev != NULL)
		m->wprev->wnext = m->wnext;
	else if (b->mem_waking == m)
		b->mem_waking = m->wnext;
	else
		b->mem_waiters = m->wnext;
	if (m->wnext != NULL)
		m->wnext->wprev = m->wprev;
	m->wnext = m->wprev = NULL;
	m->waiting = 0;
}

int
broker_mem_room(struct broker *b, const char *instance, struct broker_mem *m,
    size_t used, size_t limit)
{
	if (used < m->credit)
		return 1;
	if (b->mem_share == NULL)
		return used < limit;
	while (used >= m->credit && m->credit + BROKER_MEM_CHUNK <= limit &&
	    share_acquire(b->mem_share, instance, NULL,
		BROKER_MEM_CHUNK / 1024) == 0)
		m->credit += BROKER_MEM_CHUNK;
	if (used < m->credit)
		return 1;
	if (!m->waiting && m->wake != NULL) {
		m->waiting = 1;
		m->wprev = NULL;
		m->wnext = b->mem_waiters;
		if (b->mem_waiters != NULL)
			b->mem_waiters->wprev = m;
		b->mem_waiters = m;
	}
	return 0;
}

void
broker_mem_trim(struct broker *b, const char *instance, struct broker_mem *m,
    size_t used, int all)
{
	size_t keep = all ? 0 : used + BROKER_MEM_CHUNK, give = 0;

	if (all)
		broker_mem_unwait(b, m);
	while (m->credit >= keep + BROKER_MEM_CHUNK && m->credit > 0) {
		m->credit -= BROKER_MEM_CHUNK;
		give += BROKER_MEM_CHUNK;
	}
	if (give == 0 || b->mem_share == NULL)
		return;
	share_release(b->mem_share, instance, give / 1024);
	if (b->mem_waiters != NULL && b->mem_wake_ev != NULL)
		event_active(b->mem_wake_ev, EV_TIMEOUT, 0);
}

#define BROKER_SHARES 5

/* The broker's fair shares by index, for what is done to each alike. */
static struct share **
broker_share_at(struct broker *b, size_t i)
{
	struct share **all[BROKER_SHARES] = { &b->dns_share, &b->session_share,
		&b->mem_share, &b->tls_share, &b->up_share };

	return all[i];
}

size_t
broker_upstream_max(uint64_t nofile)
{
	uint64_t n = nofile > BROKER_FD_RESERVE ?
	    (nofile - BROKER_FD_RESERVE) / 2 :
	    0;

	if (n > SIZE_MAX / 2)
		n = SIZE_MAX / 2;
	return n > BROKER_UP_MIN ? (size_t)n : BROKER_UP_MIN;
}

/* The upstream share's capacity from the soft RLIMIT_NOFILE now. */
static size_t
broker_upstream_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return BROKER_UP_MIN;
	return broker_upstream_max(rl.rlim_cur == RLIM_INFINITY ?
		UINT64_MAX :
		(uint64_t)rl.rlim_cur);
}

int
broker_apply_shares(struct broker *b, const struct conf_snapshot *s)
{
	struct share_member *m;
	size_t i;
	int err = 0;

	/* The memory budget is fixed at start: holders keep their credit
	 * across reloads. */
	if (b->mem_share == NULL) {
		b->memory_max = s->memory_max != 0 ?
		    s->memory_max :
		    broker_mem_default();
		b->mem_share = share_new(b->memory_max / 1024,
		    BROKER_MEM_GUARANTEE / 1024, b->memory_max / 1024 / 4);
		b->mem_wake_ev = event_new(b->base, -1, 0, broker_mem_wake_cb,
		    b);
		if (b->mem_share == NULL || b->mem_wake_ev == NULL)
			return EGRESS_ERR_NOMEM;
	}
	if (b->dns_share == NULL &&
	    (b->dns_share = share_new(BROKER_DNS_SHARE, BROKER_DNS_GUARANTEE,
		 BROKER_DNS_PER_INSTANCE)) == NULL)
		return EGRESS_ERR_NOMEM;
	if (b->session_share == NULL &&
	    (b->session_share = share_new(SESSIONS_MAX,
		 BROKER_SESSION_GUARANTEE, SESSIONS_PER_INSTANCE)) == NULL)
		return EGRESS_ERR_NOMEM;
	if (b->tls_share == NULL &&
	    (b->tls_share = share_new(BROKER_TLS_SHARE, BROKER_TLS_GUARANTEE,
		 BROKER_TLS_PER_INSTANCE)) == NULL)
		return EGRESS_ERR_NOMEM;
	if (b->up_share == NULL) {
		if ((b->up_share = share_new(broker_upstream_nofile(),
			 BROKER_UP_GUARANTEE, 0)) == NULL)
			return EGRESS_ERR_NOMEM;
		/* Before the first lease: every lease is counted. */
		lease_table_set_share(b->leases, b->up_share);
	}
	if ((m = calloc(s->ninstances + 1, sizeof(*m))) == NULL)
		return EGRESS_ERR_NOMEM;
	for (i = 0; i < s->ninstances; i++) {
		m[i].instance = s->instances[i].name;
		m[i].plugin = s->instances[i].plugin;
	}
	for (i = 0; i < BROKER_SHARES && err == 0; i++)
		if (share_configure(*broker_share_at(b, i), m,
			s->ninstances) != 0)
			err = EGRESS_ERR_NOMEM;
	if (err == 0 && log_configure(m, s->ninstances) != 0)
		err = EGRESS_ERR_NOMEM; /* the log's queue shares */
	free(m);
	return err;
}

struct pipemove *
broker_pipes(struct broker *b)
{
	int e, rc = -1;

	if (b->pipes != NULL || b->pipes_failed)
		return b->pipes;
	if (b->pipes_retry_ms != 0 && broker_now_ms() < b->pipes_retry_ms)
		return NULL;
	if ((b->pipes = malloc(sizeof(*b->pipes))) != NULL &&
	    (rc = pipemove_open(b->pipes)) == 0) {
		b->pipes_retry_ms = 0;
		return b->pipes;
	}
	e = b->pipes == NULL ? ENOMEM : errno;
	free(b->pipes);
	b->pipes = NULL;
	if (rc == -2) {
		/* Splice refused by the system: every move copies. */
		broker_log_problem("stream relay pipes (every move copies)",
		    strerror(e));
		b->pipes_failed = 1;
		return NULL;
	}
	/* Out of descriptors or memory, say, for now: copy, and try again
	 * later (one attempt, and one line, per BROKER_PIPES_RETRY_MS). */
	broker_log_problem("stream relay pipes (moves copy for now)",
	    strerror(e));
	b->pipes_retry_ms = broker_now_ms() + BROKER_PIPES_RETRY_MS;
	return NULL;
}

void
broker_release(struct broker *b)
{
	size_t i;

	pool_free(b->pool); /* gives its leases back */
	b->pool = NULL;
	if (b->pipes != NULL)
		pipemove_close(b->pipes);
	free(b->pipes);
	b->pipes = NULL;
	if (b->dns != NULL) {
		/* At exit: free now, callbacks are gone with the sessions. */
		dns_resolver_free(b->dns->r);
		free(b->dns->key);
		free(b->dns);
		b->dns = NULL;
	}
	dial_tls_free(b->tls);
	b->tls = NULL;
	free(b->tls_ca);
	(void)str_replace(&b->parent_url, NULL);
	(void)str_replace(&b->parent_auth, NULL);
	b->tls_ca = NULL;
	tlsprof_release(b);
	inspect_release(b);
	lease_table_set_share(b->leases, NULL);
	lease_table_free(b->leases);
	b->leases = NULL;
	for (i = 0; i < BROKER_SHARES; i++) {
		share_free(*broker_share_at(b, i));
		*broker_share_at(b, i) = NULL;
	}
	if (b->mem_wake_ev != NULL)
		event_free(b->mem_wake_ev);
	b->mem_wake_ev = NULL;
}

int
broker_own_addrs(struct broker *b, struct decide_policy *ret)
{
	struct policy_classify_ctx ctx;
	int err;

	memset(&ctx, 0, sizeof(ctx));
	if ((err = netaddr_own(b->netaddr, &ctx)) != 0)
		return err;
	ret->local = ctx.local;
	ret->nlocal = ctx.nlocal;
	ret->nets = ctx.nets;
	ret->nnets = ctx.nnets;
	return 0;
}

int
broker_dial_params(struct broker *b, const struct conf_snapshot *s,
    const char *instance, struct dial_params *p, struct dial_parent *parent)
{
	const struct conf_snapshot *now = NULL;

	memset(p, 0, sizeof(*p));
	p->handshakes = b->tls_share; /* a fair share of handshakes */
	p->tag = instance;
	/* The parent of the configuration in force (as last applied when it
	 * is broken): a drain does not apply snapshots to the broker. */
	if (b->conf.cur != NULL)
		now = b->conf.cur->snap;
	if (str_differ(s->upstream_proxy_url,
		now != NULL ? now->upstream_proxy_url : b->parent_url) ||
	    str_differ(s->upstream_proxy_auth,
		now != NULL ? now->upstream_proxy_auth : b->parent_auth))
		return EGRESS_ERR_AGAIN;
	if (s->upstream_proxy_url == NULL)
		return 0;
	memset(parent, 0, sizeof(*parent));
	parent->addr = s->upstream_proxy_addr;
	parent->port = s->upstream_proxy_port;
	parent->auth = s->upstream_proxy_auth;
	p->parent = parent;
	return 0;
}
