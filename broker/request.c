/* SPDX-License-Identifier: ISC */
/*
 * The per-stream pipeline of egressd (see request.h): head validation,
 * the two policy calls around exactly one resolution, the connection
 * lease, the pinned dial under one deadline, the HTTP/1.1 exchange and
 * the response streamed back under flow control, with one decision and
 * one close event per request. Also the broker-wide resolver and TLS
 * holders (kept alive while requests use them), the per-instance
 * connection leases and the keep-alive pool. Response body moves from the
 * upstream's input into the per-stream buffer and on to the guest's
 * output as evbuffer chains, without a copy where whole chains allow.
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <jansson.h>

#include <egress/error.h>

#include "broker/net/dial.h"
#include "broker/net/dns.h"
#include "broker/net/http1.h"
#include "broker/net/lease.h"
#include "broker/net/localaddr.h"
#include "broker/log.h"
#include "broker/metrics.h"
#include "broker/net/netaddr.h"
#include "broker/net/pool.h"
#include "broker/request.h"
#include "broker/session.h"
#include "conf/conf.h"
#include "policy/policy.h"
#include "proto/proto.h"

#define LOCAL_REFRESH_MS	1000	/* re-read interface addresses */

/* A resolver shared by the requests that use it. */
struct broker_dns {
	struct broker *b;
	struct dns_resolver *r;
	unsigned refs;			/* the broker's, plus one per query */
	char *key;			/* servers and timeout, for comparing */
};

enum request_phase {
	PHASE_NEW = 0,
	PHASE_RESOLVING,
	PHASE_DIALING,
	PHASE_EXCHANGE,
	PHASE_FLUSHING,		/* upstream done, tail waits for window */
	PHASE_DONE,		/* logged; waits for the guest to end */
};

struct request {
	struct request *next, *prev;	/* session's list (session.c) */
	struct broker *b;
	struct session *sess;
	struct proto_stream st;
	enum request_phase phase;
	char id[40];

	struct confref *conf;		/* the snapshot decided with */
	const struct conf_instance *ci;
	struct policy_dest dest;
	int https;
	struct policy_verdict verdict;

	/* The filtered head, copied into one block (head_mem). */
	struct http1_head head;
	void *head_mem;

	struct broker_dns *dns;
	struct dns_query *q;
	struct dial *dial;
	struct bufferevent *up;
	struct http1_exchange *x;
	struct lease *lease;		/* held while upstream lives */
	struct policy_addr connected;
	int has_connected;
	int reused;			/* exchange on a pooled connection */
	uint64_t tls_gen;		/* trust the connection was verified
					   under (b->tls_gen at dial) */
	int retried;			/* the one fresh retry was used */

	uint64_t start_ms;
	uint64_t start_us, dial_us;	/* for the latency metrics */
	int allowed;			/* the decision was allow */
	uint64_t deadline_ms;		/* resolution + connect + TLS */
	struct event *timer;		/* the deadline, then the total */
	uint64_t total_ms;		/* guest total timeout, 0: none */
	int first_byte_ms;
	int between_bytes_ms;

	struct evbuffer *body;		/* guest DATA not yet upstream */
	int body_ended;			/* the guest ended its body */
	int body_finished;		/* http1_finish_body() done */
	struct evbuffer *resp;		/* response body for the guest */
	int paused;			/* upstream reads paused */
	struct evbuffer *tail;		/* encoded last frame, when ready */
	uint8_t tail_type;

	int status;
	uint64_t bytes_in, bytes_out;
	int logged_close;
	int decided;			/* egress.decision logged */
};

static uint64_t
now_ms(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t
now_us(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* ---- Resolver and TLS holders ------------------------------------------ */

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
	int tls_changed;
};

/* Should an idle pooled connection go at this reload? */
static int
pool_prune_cb(void *arg, const struct pool_key *k)
{
	static struct policy_verdict v;	/* large; single-threaded */
	struct pool_prune *pr = arg;
	const struct conf_instance *ci;
	struct policy_dest d;

	if (k->tls && pr->tls_changed)
		return 1;	/* verified under the old trust */
	if ((ci = conf_instance_find(pr->s, k->instance)) == NULL)
		return 1;	/* the instance is gone */
	if (lease_count(pr->b->leases, k->instance) >
	    pr->s->max_connections_per_instance)
		return 1;	/* over a lowered budget */
	/* The host is no longer granted (the next request would be denied
	 * anyway: free the connection and its lease now). */
	memset(&d, 0, sizeof(d));
	(void)snprintf(d.scheme, sizeof(d.scheme), "%s",
	    k->tls ? "https" : "http");
	d.host = *k->host;
	d.port = k->port;
	return policy_check_destination(&ci->policy, POLICY_TRANSPORT_HTTP,
	    &d, &v) != 0 || v.reason != POLICY_REASON_ALLOW;
}

static void
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

static int
broker_file_id_eq(const struct broker_file_id *a,
    const struct broker_file_id *b)
{
	return a->ok && b->ok && a->dev == b->dev && a->ino == b->ino &&
	    a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
	    a->mtime.tv_nsec == b->mtime.tv_nsec &&
	    a->ctime.tv_sec == b->ctime.tv_sec &&
	    a->ctime.tv_nsec == b->ctime.tv_nsec;
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
	if (b->pool == NULL)
		b->pool = pool_new(b->base, 0, 0);	/* NULL: no reuse */

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
			broker_dns_unref(b->dns);
			b->dns = d;
		}
	}

	/* Taken before loading: a rewrite during the load shows next time. */
	broker_file_id(s->ca_file, &caid);
	if (b->tls == NULL || !b->tls_ok || (s->ca_file == NULL) !=
	    (b->tls_ca == NULL) || (s->ca_file != NULL &&
	    (strcmp(s->ca_file, b->tls_ca) != 0 ||
	    !broker_file_id_eq(&caid, &b->tls_ca_id)))) {
		if (s->ca_file != NULL && (ca = strdup(s->ca_file)) == NULL)
			return EGRESS_ERR_NOMEM;
		err = dial_tls_new(s->ca_file, &t);
		pr.tls_changed = 1;
		b->tls_gen++;	/* connections verified before: never reused */
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
	(void)pool_drop_if(b->pool, pool_prune_cb, &pr);
	return ret;
}

void
broker_release(struct broker *b)
{
	pool_free(b->pool);		/* gives its leases back */
	b->pool = NULL;
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
	b->tls_ca = NULL;
	lease_table_free(b->leases);
	b->leases = NULL;
	free(b->local);
	b->local = NULL;
	b->nlocal = 0;
}

static void
broker_local_refresh(struct broker *b)
{
	struct policy_addr *a = NULL;
	size_t n = 0;
	uint64_t t = now_ms();

	if (b->local_read_ms != 0 && t - b->local_read_ms < LOCAL_REFRESH_MS)
		return;
	if (localaddr_read(&a, &n) != 0)
		return;		/* keep the previous list */
	free(b->local);
	b->local = a;
	b->nlocal = n;
	b->local_read_ms = t;
}

/* ---- Request life ------------------------------------------------------ */

/* "PREFIX-SEQ" into buf (truncated to fit, as snprintf would). */
static void
request_format_id(char *buf, size_t n, const char *prefix, uint64_t seq)
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

struct request *
request_new(struct broker *b, struct session *sess, uint32_t id)
{
	struct request *r;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	r->b = b;
	r->sess = sess;
	proto_stream_init(&r->st, id);
	if ((r->body = evbuffer_new()) == NULL ||
	    (r->resp = evbuffer_new()) == NULL) {
		evbuffer_free(r->body);
		free(r);
		return NULL;
	}
	r->start_ms = now_ms();
	r->start_us = now_us();
	b->request_seq++;
	request_format_id(r->id, sizeof(r->id), b->id_prefix,
	    b->request_seq);
	b->nrequests++;
	return r;
}

struct proto_stream *
request_stream(struct request *r)
{
	return &r->st;
}

uint32_t
request_id(const struct request *r)
{
	return r->st.id;
}

struct evbuffer *
request_body_buffer(struct request *r)
{
	return r->body;
}

int
request_is_active(const struct request *r)
{
	return r->phase != PHASE_DONE;
}

static const struct timeval zero_tv = { 0, 0 };

static void
up_free_cb(evutil_socket_t fd, short what, void *arg)
{
	bufferevent_free(arg);
}

/* Close the upstream connection (the lease stays). */
static void
request_close_up(struct request *r)
{
	if (r->up == NULL)
		return;
	/* Possibly inside one of its callbacks: free it later. */
	bufferevent_setcb(r->up, NULL, NULL, NULL, NULL);
	(void)bufferevent_disable(r->up, EV_READ | EV_WRITE);
	if (event_base_once(r->b->base, -1, EV_TIMEOUT, up_free_cb, r->up,
	    &zero_tv) != 0)
		bufferevent_free(r->up);
	r->up = NULL;
}

/* Close the upstream side: no more callbacks from it; lease released. */
static void
request_upstream_done(struct request *r)
{
	if (r->q != NULL) {
		dns_query_cancel(r->q);
		r->q = NULL;
	}
	broker_dns_unref(r->dns);
	r->dns = NULL;
	if (r->dial != NULL) {
		dial_cancel(r->dial);
		r->dial = NULL;
	}
	if (r->x != NULL) {
		http1_exchange_free(r->x);
		r->x = NULL;
	}
	request_close_up(r);
	lease_release(r->lease);
	r->lease = NULL;
	if (r->timer != NULL) {
		event_free(r->timer);
		r->timer = NULL;
	}
}

static void request_log_decision(struct request *r, const char *host,
    size_t host_len, unsigned port, int allow, const char *reason);

static void
request_log_close(struct request *r, const char *error)
{
	struct log_close c;

	if (r->logged_close)
		return;
	r->logged_close = 1;
	/* Every request has exactly one decision event: one the guest
	 * cancelled (reset, disconnect, deadline) while its decision was
	 * still pending, during resolution, is recorded as a deny: nothing
	 * was connected. */
	if (!r->decided) {
		r->verdict.naddrs = 0;
		request_log_decision(r, r->dest.host.name,
		    strlen(r->dest.host.name), r->dest.port, 0, "cancelled");
	}
	memset(&c, 0, sizeof(c));
	c.request_id = r->id;
	c.instance = session_instance(r->sess);
	c.connected = r->has_connected ? &r->connected : NULL;
	c.status = r->status;
	c.error = error;
	c.bytes_in = r->bytes_in;
	c.bytes_out = r->bytes_out;
	c.duration_ms = now_ms() - r->start_ms;
	log_close_event(&c);
	metrics_bytes(r->b->metrics, c.instance, r->bytes_in, r->bytes_out);
}

static void
request_free(struct request *r)
{
	request_upstream_done(r);
	confref_unref(r->conf);
	evbuffer_free(r->body);
	evbuffer_free(r->resp);
	if (r->tail != NULL)
		evbuffer_free(r->tail);
	free(r->head_mem);
	r->b->nrequests--;
	free(r);
}

/*
 * The exchange is over (logged, upstream done): free what only the
 * exchange reads, the request head (up to 64 KiB of headers and the
 * path) and the snapshot reference, so a stream the guest never ends
 * holds only the request itself.
 */
static void
request_release_exchange(struct request *r)
{
	free(r->head_mem);
	r->head_mem = NULL;
	memset(&r->head, 0, sizeof(r->head));
	r->ci = NULL;			/* points into the snapshot */
	confref_unref(r->conf);
	r->conf = NULL;
}

/* Finish r when its stream is closed; else wait for the guest. */
static void
request_settle(struct request *r)
{
	if (r->st.state == PROTO_STREAM_CLOSED) {
		session_request_done(r->sess, r);
		request_free(r);
		return;
	}
	r->phase = PHASE_DONE;
	/* Body the guest still sends is discarded and credited. */
	if (evbuffer_get_length(r->body) > 0) {
		size_t n = evbuffer_get_length(r->body);

		(void)evbuffer_drain(r->body, n);
		session_consumed(r->sess, &r->st, n);
	}
}

/*
 * Fail r with a guest-visible error (EGRESS_ERR_*): ERROR frame on the
 * stream, close event, free.
 */
static void
request_fail(struct request *r, int err)
{
	uint32_t code = proto_err_to_wire(err);

	request_upstream_done(r);
	if (r->allowed)
		metrics_upstream_error(r->b->metrics, proto_code_name(code));
	request_log_close(r, proto_code_name(code));
	request_release_exchange(r);
	if (r->st.state != PROTO_STREAM_CLOSED)
		(void)session_send_error(r->sess, &r->st, code);
	/* ERROR closes the stream for both sides. */
	r->st.state = PROTO_STREAM_CLOSED;
	request_settle(r);
}

void
request_abort(struct request *r)
{
	if (r == NULL)
		return;
	request_upstream_done(r);
	request_log_close(r, "cancelled");
	request_free(r);
}

void
request_discard(struct request *r)
{
	if (r == NULL)
		return;
	r->logged_close = 1;	/* no decision was logged: no close either */
	request_free(r);
}

void
request_on_reset(struct request *r)
{
	request_upstream_done(r);
	request_log_close(r, "cancelled");
	r->st.state = PROTO_STREAM_CLOSED;
	request_settle(r);
}

/* ---- Decision ---------------------------------------------------------- */

static const char *
request_plugin(const struct request *r)
{
	return r->ci != NULL ? r->ci->plugin : NULL;
}

static void
request_log_decision(struct request *r, const char *host, size_t host_len,
    unsigned port, int allow, const char *reason)
{
	struct log_decision d;

	memset(&d, 0, sizeof(d));
	d.request_id = r->id;
	d.instance = session_instance(r->sess);
	d.plugin = request_plugin(r);
	d.transport = "http";
	d.host = host;
	d.host_len = host_len;
	d.port = port;
	d.allow = allow;
	d.reason = reason;
	d.addrs = r->verdict.addrs;
	d.naddrs = r->verdict.naddrs;
	log_decision(&d);
	r->decided = 1;
	r->allowed = allow;
	metrics_decision(r->b->metrics, d.instance, allow ? "allow" : reason,
	    now_us() - r->start_us);
}

/* A deny before any address was validated. */
static void
request_deny(struct request *r, const char *reason, int err)
{
	const char *host = r->dest.host.name;

	r->verdict.naddrs = 0;
	request_log_decision(r, host, strlen(host), r->dest.port, 0, reason);
	request_fail(r, err);
}

/* The guest-visible error of a policy deny. */
static int
request_deny_error(enum policy_reason reason)
{
	return reason == POLICY_REASON_UNRESOLVABLE ? EGRESS_ERR_DNS_FAILED :
	    EGRESS_ERR_DENIED;
}

static void request_connect(struct request *r);
static void request_begin_exchange(struct request *r,
    struct bufferevent *bev, const struct policy_addr *used);

static void
request_pool_key(const struct request *r, struct pool_key *k)
{
	k->instance = session_instance(r->sess);
	k->host = &r->dest.host;
	k->port = r->dest.port;
	k->tls = r->https;
	k->trust = r->https ? r->b->tls_gen : 0;
}

/*
 * Take a lease for r's instance; when the budget is full, close the
 * instance's own idle pooled connections (oldest first) rather than
 * refuse: they hold leases nobody is using.
 */
static int
request_lease(struct request *r, unsigned max)
{
	const char *inst = session_instance(r->sess);
	int err;

	for (;;) {
		err = lease_acquire(r->b->leases, inst, max, &r->lease);
		if (err != EGRESS_ERR_BUDGET_EXHAUSTED ||
		    pool_evict(r->b->pool, inst, 1) == 0)
			return err;
	}
}

static void
request_answers(struct request *r, const struct policy_addr *addrs,
    size_t n)
{
	const struct conf_snapshot *s = r->conf->snap;
	struct policy_classify_ctx ctx;
	const struct policy_instance *pi = r->ci != NULL ? &r->ci->policy :
	    NULL;
	struct bufferevent *bev = NULL;
	struct policy_addr used;
	struct pool_key k;
	int err;

	ctx.nat64 = &s->nat64;
	if (r->b->netaddr != NULL)
		ctx.local = netaddr_addrs(r->b->netaddr, &ctx.nlocal);
	else {
		broker_local_refresh(r->b);
		ctx.local = r->b->local;
		ctx.nlocal = r->b->nlocal;
	}
	err = policy_check_answers(pi, &r->dest, addrs, n, &ctx, &r->verdict);
	if (err != 0) {
		/* More answers than considered: no verdict, no reach. */
		request_deny(r, policy_reason_str(POLICY_REASON_UNRESOLVABLE),
		    EGRESS_ERR_DNS_FAILED);
		return;
	}
	if (r->verdict.reason != POLICY_REASON_ALLOW) {
		request_log_decision(r, r->dest.host.name,
		    strlen(r->dest.host.name), r->dest.port, 0,
		    policy_reason_str(r->verdict.reason));
		request_fail(r, request_deny_error(r->verdict.reason));
		return;
	}
	/*
	 * The whole policy passed. Reuse only a connection under the exact
	 * key whose address is in THIS verdict's validated set; it brings
	 * the lease it holds.
	 */
	if (!r->https || r->b->tls_ok) {
		request_pool_key(r, &k);
		bev = pool_take(r->b->pool, &k, r->verdict.addrs,
		    r->verdict.naddrs, &r->lease, &used);
		r->tls_gen = k.trust;	/* only current trust matches */
	}
	if (bev != NULL) {
		request_log_decision(r, r->dest.host.name,
		    strlen(r->dest.host.name), r->dest.port, 1, NULL);
		r->reused = 1;
		request_begin_exchange(r, bev, &used);
		return;
	}
	err = request_lease(r, s->max_connections_per_instance);
	if (err != 0) {
		request_log_decision(r, r->dest.host.name,
		    strlen(r->dest.host.name), r->dest.port, 0,
		    err == EGRESS_ERR_BUDGET_EXHAUSTED ? "budget-exhausted" :
		    "policy-unavailable");
		request_fail(r, err == EGRESS_ERR_BUDGET_EXHAUSTED ? err :
		    EGRESS_ERR_UNAVAILABLE);
		return;
	}
	request_log_decision(r, r->dest.host.name, strlen(r->dest.host.name),
	    r->dest.port, 1, NULL);
	request_connect(r);
}

static void
request_dns_cb(void *arg, enum dns_status status,
    const struct policy_addr *addrs, size_t n)
{
	struct request *r = arg;

	r->q = NULL;
	broker_dns_unref(r->dns);
	r->dns = NULL;
	metrics_dns(r->b->metrics, dns_status_str(status),
	    now_us() - r->start_us);
	if (status != DNS_OK) {
		/* No answer: unresolvable, shown as dns-failed. */
		n = 0;
		addrs = NULL;
	}
	request_answers(r, addrs, n);
}

static void
request_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct request *r = arg;

	if (r->phase == PHASE_RESOLVING) {
		/* The deadline passed before an answer: no verdict. */
		r->verdict.naddrs = 0;
		request_log_decision(r, r->dest.host.name,
		    strlen(r->dest.host.name), r->dest.port, 0,
		    policy_reason_str(POLICY_REASON_UNRESOLVABLE));
	}
	request_fail(r, EGRESS_ERR_TIMEOUT);
}

static int
request_arm(struct request *r, uint64_t at_ms)
{
	struct timeval tv;
	uint64_t t = now_ms(), d = at_ms > t ? at_ms - t : 0;

	if (r->timer == NULL &&
	    (r->timer = evtimer_new(r->b->base, request_timer_cb, r)) == NULL)
		return EGRESS_ERR_NOMEM;
	tv.tv_sec = (time_t)(d / 1000);
	tv.tv_usec = (suseconds_t)(d % 1000) * 1000;
	return evtimer_add(r->timer, &tv) == 0 ? 0 : EGRESS_ERR_NOMEM;
}

/* The guest's timeout may lower a limit, never raise it (0: default). */
static unsigned
lower(unsigned conf, uint32_t guest)
{
	if (guest != 0 && (conf == 0 || guest < conf))
		return guest;
	return conf;
}

/* Copy the filtered head out of the frame buffer into one block. */
static int
request_copy_head(struct request *r, const struct http1_head *h)
{
	size_t i, n = h->method_len + h->path_len;
	struct http1_header *hv;
	char *p;

	for (i = 0; i < h->nheaders; i++)
		n += h->headers[i].name_len + h->headers[i].value_len;
	r->head_mem = malloc(h->nheaders * sizeof(*hv) + n + 1);
	if (r->head_mem == NULL)
		return EGRESS_ERR_NOMEM;
	hv = r->head_mem;
	p = (char *)(hv + h->nheaders);
#define COPY(dst, src, len) do {		\
	memcpy(p, (src), (len));		\
	(dst) = p;				\
	p += (len);				\
} while (0)
	r->head = *h;
	COPY(r->head.method, h->method, h->method_len);
	COPY(r->head.path, h->path, h->path_len);
	for (i = 0; i < h->nheaders; i++) {
		hv[i].name_len = h->headers[i].name_len;
		hv[i].value_len = h->headers[i].value_len;
		COPY(hv[i].name, h->headers[i].name, hv[i].name_len);
		COPY(hv[i].value, h->headers[i].value, hv[i].value_len);
	}
#undef COPY
	r->head.headers = hv;
	return 0;
}

static int
str_is(const struct proto_str *s, const char *lit)
{
	return s->len == strlen(lit) && memcmp(s->ptr, lit, s->len) == 0;
}

void
request_start(struct request *r, const struct proto_msg *m)
{
	static struct http1_header in[PROTO_HEADERS_MAX];
	static struct http1_header kept[PROTO_HEADERS_MAX];
	const struct proto_request *rq = &m->request;
	const struct conf_snapshot *s;
	const struct policy_instance *pi;
	struct http1_head head, out;
	struct policy_err perr;
	size_t i;
	int err;

	/* The host as the guest wrote it, until it parses. */
	i = rq->authority.ptr == NULL ? 0 : rq->authority.len <
	    sizeof(r->dest.host.name) ? rq->authority.len :
	    sizeof(r->dest.host.name) - 1;
	if (i > 0)
		memcpy(r->dest.host.name, rq->authority.ptr, i);
	r->dest.host.name[i] = '\0';

	/* 1. The head. Only the http transport exists in this release. */
	if (rq->transport != PROTO_TRANSPORT_HTTP ||
	    !(str_is(&rq->scheme, "http") || str_is(&rq->scheme, "https"))) {
		r->dest.host.name[0] = '\0';
		request_log_decision(r, rq->authority.ptr, rq->authority.len,
		    0, 0, "invalid-request");
		request_fail(r, EGRESS_ERR_INVALID_REQUEST);
		return;
	}
	r->https = str_is(&rq->scheme, "https");
	if (rq->authority.len == 0 || policy_authority_parse(rq->authority.ptr,
	    rq->authority.len, r->https ? 443 : 80, &r->dest, &perr) != 0) {
		request_log_decision(r, rq->authority.ptr, rq->authority.len,
		    0, 0, "invalid-request");
		request_fail(r, EGRESS_ERR_INVALID_REQUEST);
		return;
	}
	if (r->https)
		memcpy(r->dest.scheme, "https", sizeof("https"));
	else
		memcpy(r->dest.scheme, "http", sizeof("http"));
	for (i = 0; i < m->nheaders; i++) {
		in[i].name = m->headers[i].name.ptr;
		in[i].name_len = m->headers[i].name.len;
		in[i].value = m->headers[i].value.ptr;
		in[i].value_len = m->headers[i].value.len;
	}
	memset(&head, 0, sizeof(head));
	head.method = rq->method.ptr;
	head.method_len = rq->method.len;
	head.path = rq->path.ptr;
	head.path_len = rq->path.len;
	head.headers = in;
	head.nheaders = m->nheaders;
	if (head.method == NULL || head.path == NULL ||
	    http1_request_check(&r->dest, &head, kept, PROTO_HEADERS_MAX,
	    &out, &perr) != 0) {
		request_deny(r, "invalid-request", EGRESS_ERR_INVALID_REQUEST);
		return;
	}
	if (m->flags & PROTO_FLAG_END_STREAM) {
		r->body_ended = 1;
		if (out.body_length > 0) {
			/* A Content-Length the body cannot match. */
			request_deny(r, "invalid-request",
			    EGRESS_ERR_INVALID_REQUEST);
			return;
		}
		out.body_length = 0;
	}
	if (request_copy_head(r, &out) != 0) {
		request_deny(r, "policy-unavailable", EGRESS_ERR_UNAVAILABLE);
		return;
	}

	/* 2. The current snapshot, re-read if a file changed. */
	if ((r->conf = confstate_get_for(&r->b->conf,
	    session_instance(r->sess))) == NULL) {
		request_deny(r, "policy-unavailable", EGRESS_ERR_UNAVAILABLE);
		return;
	}
	s = r->conf->snap;
	r->ci = conf_instance_find(s, session_instance(r->sess));
	pi = r->ci != NULL ? &r->ci->policy : NULL;
	err = policy_check_destination(pi, POLICY_TRANSPORT_HTTP, &r->dest,
	    &r->verdict);
	if (err != 0) {
		request_deny(r, "invalid-request", EGRESS_ERR_INVALID_REQUEST);
		return;
	}
	if (r->verdict.reason != POLICY_REASON_ALLOW) {
		request_deny(r, policy_reason_str(r->verdict.reason),
		    request_deny_error(r->verdict.reason));
		return;
	}

	/* Limits: the guest may lower each, never raise it. */
	r->deadline_ms = r->start_ms + lower(s->connect_timeout_ms,
	    rq->timeouts.connect_ms);
	r->first_byte_ms = (int)lower(s->first_byte_timeout_ms,
	    rq->timeouts.first_byte_ms);
	r->between_bytes_ms = (int)lower(s->between_bytes_timeout_ms,
	    rq->timeouts.between_bytes_ms);
	if (rq->timeouts.total_ms != 0)
		r->total_ms = r->start_ms + rq->timeouts.total_ms;

	/* 3. Resolution, exactly once; an IP literal is its own answer. */
	if (!r->verdict.need_resolve) {
		struct policy_addr a;

		memset(&a, 0, sizeof(a));
		a.family = r->dest.host.kind == POLICY_HOST_IPV4 ? 4 : 6;
		memcpy(a.bytes, r->dest.host.addr, a.family == 4 ? 4 : 16);
		request_answers(r, &a, 1);
		return;
	}
	if (r->b->dns == NULL) {
		request_deny(r, policy_reason_str(POLICY_REASON_UNRESOLVABLE),
		    EGRESS_ERR_DNS_FAILED);
		return;
	}
	r->phase = PHASE_RESOLVING;
	if (request_arm(r, r->deadline_ms) != 0) {
		request_deny(r, "policy-unavailable", EGRESS_ERR_UNAVAILABLE);
		return;
	}
	/*
	 * A fair share of the resolver: one instance may keep at most
	 * REQUEST_DNS_PER_INSTANCE lookups outstanding (cancelled ones
	 * count until c-ares is done with them), so it cannot exhaust
	 * DNS_PENDING_MAX for the others.
	 */
	if (dns_resolver_outstanding_tag(r->b->dns->r,
	    session_instance(r->sess)) >= REQUEST_DNS_PER_INSTANCE) {
		request_deny(r, "budget-exhausted",
		    EGRESS_ERR_BUDGET_EXHAUSTED);
		return;
	}
	r->dns = r->b->dns;
	r->dns->refs++;
	err = dns_resolve_tagged(r->dns->r, session_instance(r->sess),
	    r->dest.host.name, request_dns_cb, r, &r->q);
	if (err != 0) {
		r->q = NULL;
		/* Too many lookups pending, or no memory: no answer. */
		request_deny(r, policy_reason_str(POLICY_REASON_UNRESOLVABLE),
		    EGRESS_ERR_DNS_FAILED);
		return;
	}
}

/* ---- Upstream ---------------------------------------------------------- */

static void request_pump_body(struct request *r);
static void request_push(struct request *r);

static int
hdr_is(const struct http1_header *h, const char *name)
{
	return h->name_len == strlen(name) &&
	    strncasecmp(h->name, name, h->name_len) == 0;
}

/* Does the comma-separated list v name token? */
static int
list_has(const char *v, size_t n, const char *tok, size_t tl)
{
	size_t i = 0, a, e;

	while (i < n) {
		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		a = i;
		while (i < n && v[i] != ',')
			i++;
		e = i;
		while (e > a && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e - a == tl && strncasecmp(v + a, tok, tl) == 0)
			return 1;
	}
	return 0;
}

/* Hop-by-hop response headers belong to the broker's connection. */
static int
resp_is_hop(const struct http1_response *resp, const struct http1_header *h)
{
	static const char *const hop[] = {
		"connection", "keep-alive", "proxy-connection",
		"transfer-encoding", "te", "trailer", "upgrade",
	};
	size_t i;

	for (i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (hdr_is(h, hop[i]))
			return 1;
	for (i = 0; i < resp->nheaders; i++)
		if (hdr_is(&resp->headers[i], "connection") &&
		    list_has(resp->headers[i].value,
		    resp->headers[i].value_len, h->name, h->name_len))
			return 1;
	return 0;
}

/* Fill m's header list from hs; 0, or -1 over the protocol's bounds. */
static int
fill_headers(struct proto_msg *m, const struct http1_header *hs, size_t n,
    const struct http1_response *resp)
{
	size_t i, bytes = 0;

	m->nheaders = 0;
	for (i = 0; i < n; i++) {
		if (resp != NULL && resp_is_hop(resp, &hs[i]))
			continue;
		if (m->nheaders == PROTO_HEADERS_MAX ||
		    hs[i].name_len == 0 || hs[i].name_len > PROTO_NAME_MAX ||
		    hs[i].value_len > PROTO_VALUE_MAX)
			return -1;
		bytes += hs[i].name_len + hs[i].value_len;
		if (bytes > PROTO_HEADER_BYTES_MAX)
			return -1;
		m->headers[m->nheaders].name.ptr = hs[i].name;
		m->headers[m->nheaders].name.len = hs[i].name_len;
		m->headers[m->nheaders].value.ptr = hs[i].value;
		m->headers[m->nheaders].value.len = hs[i].value_len;
		m->nheaders++;
	}
	return 0;
}

static struct proto_msg request_msg;	/* scratch: single-threaded */

static void
up_on_head(void *arg, const struct http1_response *resp)
{
	struct request *r = arg;
	struct proto_msg *m = &request_msg;

	r->b->activity++;
	memset(m, 0, offsetof(struct proto_msg, headers));
	m->type = PROTO_MSG_RESPONSE;
	m->stream = r->st.id;
	m->response.status = (uint16_t)resp->status;
	if (fill_headers(m, resp->headers, resp->nheaders, resp) != 0) {
		request_fail(r, EGRESS_ERR_UPSTREAM_PROTOCOL);
		return;
	}
	if (session_send(r->sess, &r->st, m) != 0) {
		request_fail(r, EGRESS_ERR_UNAVAILABLE);
		return;
	}
	r->status = resp->status;
}

static void
up_on_data(void *arg, struct evbuffer *in, size_t n)
{
	struct request *r = arg;
	r->b->activity++;

	/* Moved, not copied: whole chains change hands. */
	if (evbuffer_remove_buffer(in, r->resp, n) != (int)n) {
		request_fail(r, EGRESS_ERR_NOMEM);
		return;
	}
	r->bytes_in += n;
	if (!r->paused && evbuffer_get_length(r->resp) >= REQUEST_RESP_HIGH) {
		http1_pause_read(r->x);
		r->paused = 1;
	}
	request_push(r);
}

/* Park r's upstream connection with its lease if it can carry more. */
static void
request_park(struct request *r)
{
	const struct conf_snapshot *s = r->conf->snap;
	struct pool_key k;

	if (r->b->pool == NULL || r->b->draining || r->x == NULL ||
	    r->up == NULL || r->lease == NULL || !r->has_connected ||
	    !http1_is_reusable(r->x))
		return;
	request_pool_key(r, &k);
	if (r->https && r->tls_gen != r->b->tls_gen)
		return;		/* verified under the old trust: close it */
	if (lease_count(r->b->leases, k.instance) >
	    s->max_connections_per_instance)
		return;		/* over a lowered budget: close it */
	http1_exchange_free(r->x);
	r->x = NULL;
	/* Takes the connection and the lease, even on failure. */
	(void)pool_put(r->b->pool, &k, &r->connected, r->up, r->lease);
	r->up = NULL;
	r->lease = NULL;
}

static int
method_is(const struct http1_head *h, const char *m)
{
	return h->method_len == strlen(m) &&
	    memcmp(h->method, m, h->method_len) == 0;
}

/*
 * A reused connection failed: may r go again on a fresh one? Only once,
 * only when no response byte arrived (the upstream had closed the idle
 * connection, or closed it as the request went out), and only for an
 * idempotent method (RFC 9110, 9.2.2) with no body, so that repeating
 * it is safe whatever the upstream did with the first copy.
 */
static int
request_may_retry(const struct request *r, int err)
{
	const struct http1_head *h = &r->head;

	if (!r->reused || r->retried || r->x == NULL ||
	    http1_response_started(r->x) || h->body_length != 0 ||
	    r->bytes_out != 0)
		return 0;
	if (err != EGRESS_ERR_UPSTREAM_PROTOCOL &&
	    err != EGRESS_ERR_TLS_FAILED)
		return 0;	/* a timeout may mean it is being served */
	return method_is(h, "GET") || method_is(h, "HEAD") ||
	    method_is(h, "OPTIONS") || method_is(h, "TRACE") ||
	    method_is(h, "PUT") || method_is(h, "DELETE");
}

/* Drop the stale connection, keep the lease, dial afresh (once). */
static void
request_retry(struct request *r)
{
	http1_exchange_free(r->x);
	r->x = NULL;
	request_close_up(r);
	r->reused = 0;
	r->retried = 1;
	r->has_connected = 0;
	r->status = 0;
	request_connect(r);
}

static void
up_on_end(void *arg, int err, const struct http1_header *trailers,
    size_t ntrailers)
{
	struct request *r = arg;
	struct proto_msg *m = &request_msg;
	uint8_t buf[PROTO_FRAME_MAX];
	int n;

	r->b->activity++;
	if (err != 0) {
		if (request_may_retry(r, err)) {
			request_retry(r);
			return;
		}
		request_fail(r, err);
		return;
	}
	memset(m, 0, offsetof(struct proto_msg, headers));
	m->flags = PROTO_FLAG_END_STREAM;
	m->stream = r->st.id;
	if (ntrailers > 0) {
		m->type = PROTO_MSG_TRAILERS;
		if (fill_headers(m, trailers, ntrailers, NULL) != 0) {
			request_fail(r, EGRESS_ERR_UPSTREAM_PROTOCOL);
			return;
		}
	} else
		m->type = PROTO_MSG_DATA;
	n = proto_encode(m, buf, sizeof(buf), NULL);
	if (n < 0 || (r->tail = evbuffer_new()) == NULL ||
	    evbuffer_add(r->tail, buf, (size_t)n) != 0) {
		request_fail(r, EGRESS_ERR_UPSTREAM_PROTOCOL);
		return;
	}
	r->tail_type = m->type;
	/* The upstream is finished: pool it or close it, and release the
	 * lease now (a pooled connection keeps it). */
	request_park(r);
	request_upstream_done(r);
	request_release_exchange(r);
	r->phase = PHASE_FLUSHING;
	request_push(r);
}

static void
up_on_writable(void *arg)
{
	request_pump_body(arg);
}

static const struct http1_callbacks up_callbacks = {
	.on_head = up_on_head,
	.on_end = up_on_end,
	.on_writable = up_on_writable,
};

/* Move guest body towards the upstream, and grant the guest window. */
static void
request_pump_body(struct request *r)
{
	size_t n;
	int err;

	if (r->x == NULL)
		return;
	n = evbuffer_get_length(r->body);
	if (n > 0 && http1_output_pending(r->x) < REQUEST_UP_HIGH) {
		err = http1_write_body_buffer(r->x, r->body);
		if (err != 0) {
			request_fail(r, err == EGRESS_ERR_CLOSED ?
			    EGRESS_ERR_INVALID_REQUEST : err);
			return;
		}
		r->bytes_out += n;
		session_consumed(r->sess, &r->st, n);
	}
	if (r->body_ended && !r->body_finished &&
	    evbuffer_get_length(r->body) == 0) {
		r->body_finished = 1;
		if (r->head.body_length != 0) {
			err = http1_finish_body(r->x);
			if (err != 0) {
				request_fail(r, err == EGRESS_ERR_CLOSED ?
				    EGRESS_ERR_INVALID_REQUEST : err);
				return;
			}
		}
	}
}

static void
request_dial_cb(void *arg, int err, struct bufferevent *bev,
    const struct policy_addr *used)
{
	struct request *r = arg;

	r->b->activity++;
	r->dial = NULL;		/* freed by dial after we return */
	if (err != 0) {
		request_fail(r, err);
		return;
	}
	metrics_connect(r->b->metrics, now_us() - r->dial_us);
	request_begin_exchange(r, bev, used);
}

/* Start the exchange on bev (dialed or pooled; now r's), connected to
 * used. */
static void
request_begin_exchange(struct request *r, struct bufferevent *bev,
    const struct policy_addr *used)
{
	struct http1_timeouts t;
	int err;

	r->up = bev;
	r->connected = *used;
	r->has_connected = 1;
	r->phase = PHASE_EXCHANGE;
	if (r->timer != NULL)
		(void)evtimer_del(r->timer);
	if (r->total_ms != 0 && request_arm(r, r->total_ms) != 0) {
		request_fail(r, EGRESS_ERR_NOMEM);
		return;
	}
	t.first_byte_ms = r->first_byte_ms;
	t.between_bytes_ms = r->between_bytes_ms;
	/* Keep-alive only when the pool can take the connection back. */
	err = http1_exchange_new(bev, &r->dest, &r->head,
	    r->b->pool != NULL && !r->b->draining, &t, &up_callbacks, r,
	    &r->x);
	if (err != 0) {
		r->x = NULL;
		request_fail(r, err == EGRESS_ERR_NOMEM ? err :
		    EGRESS_ERR_INVALID_REQUEST);
		return;
	}
	http1_set_body_buffer(r->x, up_on_data);
	request_pump_body(r);
}

static void
request_connect(struct request *r)
{
	struct dial_params p;
	uint64_t t = now_ms();
	uint64_t until = r->deadline_ms;
	int err;

	if (r->total_ms != 0 && r->total_ms < until)
		until = r->total_ms;
	if (t >= until) {
		request_fail(r, EGRESS_ERR_TIMEOUT);
		return;
	}
	if (r->https && !r->b->tls_ok) {
		request_fail(r, EGRESS_ERR_TLS_FAILED);
		return;
	}
	if (r->timer != NULL)
		(void)evtimer_del(r->timer);
	r->phase = PHASE_DIALING;
	memset(&p, 0, sizeof(p));
	p.host = &r->dest.host;
	p.port = r->dest.port;
	p.addrs = r->verdict.addrs;
	p.naddrs = r->verdict.naddrs;
	p.timeout_ms = (int)(until - t);
	r->dial_us = now_us();
	r->tls_gen = r->b->tls_gen;
	err = dial_start(r->b->base, r->https ? r->b->tls : NULL, &p,
	    request_dial_cb, r, &r->dial);
	if (err != 0) {
		r->dial = NULL;
		request_fail(r, err == EGRESS_ERR_NOMEM ?
		    EGRESS_ERR_UNAVAILABLE : EGRESS_ERR_CONNECT_FAILED);
	}
}

/* ---- Towards the guest ------------------------------------------------- */

/* Send buffered response DATA within the windows, then the last frame. */
static void
request_push(struct request *r)
{
	struct proto_msg m;
	size_t len;
	uint32_t n;

	while ((len = evbuffer_get_length(r->resp)) > 0 &&
	    session_can_write(r->sess)) {
		n = proto_conn_sendable(session_proto(r->sess), &r->st);
		if (n == 0)
			break;
		if (n > len)
			n = (uint32_t)len;
		if (session_send_data(r->sess, &r->st, r->resp, n, 0) != 0) {
			request_fail(r, EGRESS_ERR_UNAVAILABLE);
			return;
		}
	}
	if (r->paused && r->x != NULL &&
	    evbuffer_get_length(r->resp) <= REQUEST_RESP_LOW) {
		r->paused = 0;
		http1_resume_read(r->x);
	}
	if (r->phase != PHASE_FLUSHING || r->tail == NULL ||
	    evbuffer_get_length(r->resp) > 0)
		return;
	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = r->tail_type;
	m.flags = PROTO_FLAG_END_STREAM;
	m.stream = r->st.id;
	if (proto_conn_send(session_proto(r->sess), &r->st, &m, NULL) != 0) {
		request_fail(r, EGRESS_ERR_UNAVAILABLE);
		return;
	}
	(void)session_send_data(r->sess, NULL, r->tail,
	    evbuffer_get_length(r->tail), 0);
	evbuffer_free(r->tail);
	r->tail = NULL;
	request_log_close(r, NULL);
	request_settle(r);
}

void
request_flush(struct request *r)
{
	if (r->phase == PHASE_EXCHANGE || r->phase == PHASE_FLUSHING)
		request_push(r);
}

void
request_on_body(struct request *r, size_t len, int end)
{
	if (end)
		r->body_ended = 1;
	if (r->phase == PHASE_DONE || r->phase == PHASE_FLUSHING) {
		/* The response is over: discard, and credit it back. */
		size_t n = evbuffer_get_length(r->body);

		(void)evbuffer_drain(r->body, n);
		session_consumed(r->sess, &r->st, n);
		if (r->phase == PHASE_DONE &&
		    r->st.state == PROTO_STREAM_CLOSED) {
			session_request_done(r->sess, r);
			request_free(r);
		}
		return;
	}
	if (r->phase == PHASE_EXCHANGE)
		request_pump_body(r);
	/* Before the exchange, body waits (uncredited) in r->body. */
}
