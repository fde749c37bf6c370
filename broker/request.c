/* SPDX-License-Identifier: ISC */
/*
 * The per-stream pipeline of egressd (see request.h): head validation,
 * the one decision around exactly one resolution (decide.h), the connection
 * lease, the pinned dial under one deadline, the HTTP/1.1 exchange and
 * the response streamed back under flow control, with one decision and
 * one close event per request. Response body moves from the
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

#include "broker/broker.h"
#include "broker/guest.h"
#include "broker/log.h"
#include "broker/metrics.h"
#include "broker/net/decide.h"
#include "broker/net/dial.h"
#include "broker/net/evmove.h"
#include "broker/net/http1.h"
#include "broker/net/http1_req.h"
#include "broker/net/lease.h"
#include "broker/net/pool.h"
#include "broker/relay.h"
#include "broker/request.h"
#include "broker/request_int.h"
#include "broker/starttls.h"
#include "broker/tlsprof.h"
#include "broker/wsock.h"
#include "conf/conf.h"
#include "policy/policy.h"
#include "proto/proto.h"

/* ---- Request life ------------------------------------------------------ */

static void request_mem_wake(void *arg);

static const char *
g_instance(const struct request *r)
{
	return r->g.ops->instance(r->g.ctx);
}

const char *
request_instance(const struct request *r)
{
	return g_instance(r);
}

static void
g_consumed(struct request *r, struct proto_stream *st, size_t n)
{
	r->g.ops->consumed(r->g.ctx, st, n);
}

struct request *
request_new(struct broker *b, const struct guest *g, uint32_t id,
    request_done_fn done, void *done_arg)
{
	struct request *r;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	r->b = b;
	r->g = *g;
	r->done = done;
	r->done_arg = done_arg;
	r->mem.wake = request_mem_wake;
	r->mem.arg = r;
	proto_stream_init(&r->st, id);
	r->transport = PROTO_TRANSPORT_HTTP;
	if ((r->body = evbuffer_new()) == NULL ||
	    (r->resp = evbuffer_new()) == NULL) {
		evbuffer_free(r->body);
		free(r);
		return NULL;
	}
	r->start_ms = broker_now_ms();
	r->start_us = broker_now_us();
	b->request_seq++;
	broker_format_id(r->id, sizeof(r->id), b->id_prefix, b->request_seq);
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

int
request_waits_for_room(const struct request *r)
{
	return r->phase == PHASE_RELAY && r->relay != NULL &&
	    relay_waits_for_room(r->relay);
}

static const struct timeval zero_tv = { 0, 0 };

static void
request_relays_unlink(struct request *r)
{
	if (r->rprev == NULL && r->b->relays != r)
		return; /* not linked */
	if (r->rprev != NULL)
		r->rprev->rnext = r->rnext;
	else
		r->b->relays = r->rnext;
	if (r->rnext != NULL)
		r->rnext->rprev = r->rprev;
	r->rnext = r->rprev = NULL;
}

/* End r's HTTP exchange (the exchange is linked with the relays while
 * it runs, so that a reload decides it again too). */
static void
request_exchange_free(struct request *r)
{
	if (r->x == NULL)
		return;
	http1_exchange_free(r->x);
	r->x = NULL;
	request_relays_unlink(r);
}

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

void
request_upstream_done(struct request *r)
{
	decide_cancel(&r->decide);
	broker_dns_release(r->dns);
	r->dns = NULL;
	if (r->dial != NULL) {
		dial_cancel(r->dial);
		r->dial = NULL;
	}
	request_exchange_free(r);
	starttls_cancel(r);
	if (r->relay != NULL) {
		r->bytes_in = relay_bytes_down(r->relay);
		r->bytes_out = relay_bytes_up(r->relay);
		relay_free(r->relay);
		r->relay = NULL;
		request_relays_unlink(r);
	}
	if (r->ws != NULL) {
		r->bytes_in = wsock_bytes_down(r->ws);
		r->bytes_out = wsock_bytes_up(r->ws);
		r->msgs_in = wsock_msgs_down(r->ws);
		r->msgs_out = wsock_msgs_up(r->ws);
		r->close_code = wsock_close_code(r->ws);
		wsock_free(r->ws);
		r->ws = NULL;
		request_relays_unlink(r);
	}
	request_close_up(r);
	lease_release(r->lease);
	r->lease = NULL;
	if (r->timer != NULL) {
		event_free(r->timer);
		r->timer = NULL;
	}
}

void
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
		r->verdict = NULL;
		request_log_decision(r, r->dest.host.name,
		    strlen(r->dest.host.name), r->dest.port, 0, "cancelled");
	}
	memset(&c, 0, sizeof(c));
	c.request_id = r->id;
	c.instance = g_instance(r);
	c.transport = policy_transport_name(r->transport);
	c.connected = r->has_connected ? &r->connected : NULL;
	c.status = r->status;
	c.error = r->revoked != NULL ? "revoked" : error;
	c.reason = r->revoked != NULL ? r->revoked : r->close_reason;
	c.bytes_in = r->bytes_in;
	c.bytes_out = r->bytes_out;
	c.websocket = r->transport == PROTO_TRANSPORT_WEBSOCKET;
	c.msgs_in = r->msgs_in;
	c.msgs_out = r->msgs_out;
	c.close_code = r->close_code;
	c.starttls = r->starttls;
	c.duration_ms = broker_now_ms() - r->start_ms;
	log_close_event(&c);
	metrics_bytes(r->b->metrics, c.instance, r->bytes_in, r->bytes_out);
	metrics_close(r->b->metrics, c.transport, c.websocket, c.msgs_in,
	    c.msgs_out);
}

void
request_free(struct request *r)
{
	if (r == NULL)
		return;
	request_upstream_done(r);
	broker_mem_trim(r->b, g_instance(r), &r->mem, 0, 1);
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
void
request_release_exchange(struct request *r)
{
	free(r->head_mem);
	r->head_mem = NULL;
	memset(&r->head, 0, sizeof(r->head));
	r->ci = NULL; /* points into the snapshot */
	confref_unref(r->conf);
	r->conf = NULL;
}

static int request_arm(struct request *r, uint64_t at_ms);

void
request_settle(struct request *r)
{
	if (r->st.state == PROTO_STREAM_CLOSED) {
		r->done(r->done_arg, r);
		return;
	}
	r->phase = PHASE_DONE;
	/* Body the guest still sends is discarded and credited. */
	if (evbuffer_get_length(r->body) > 0) {
		size_t n = evbuffer_get_length(r->body);

		(void)evbuffer_drain(r->body, n);
		g_consumed(r, &r->st, n);
	}
	/* The guest's end is due within a between-bytes gap (a stream's
	 * idle timeout), or the stream closes (request_timer_cb()): a stream
	 * the guest never ends holds no memory for good. */
	if (request_arm(r,
		broker_now_ms() +
		    (r->transport == PROTO_TRANSPORT_HTTP ?
			    (uint64_t)r->between_bytes_ms :
			    (uint64_t)r->idle_ms)) != 0) {
		(void)r->g.ops->send_error(r->g.ctx, &r->st,
		    proto_err_to_wire(EGRESS_ERR_NOMEM));
		r->st.state = PROTO_STREAM_CLOSED;
		r->done(r->done_arg, r);
	}
}

/*
 * Fail r with a guest-visible error (EGRESS_ERR_*): ERROR frame on the
 * stream, close event, free.
 */
void
request_fail(struct request *r, int err)
{
	uint32_t code = proto_err_to_wire(err);

	request_upstream_done(r);
	if (r->allowed)
		metrics_upstream_error(r->b->metrics, proto_code_name(code));
	request_log_close(r, proto_code_name(code));
	request_release_exchange(r);
	if (r->st.state != PROTO_STREAM_CLOSED)
		(void)r->g.ops->send_error(r->g.ctx, &r->st, code);
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
	r->logged_close = 1; /* no decision was logged: no close either */
	request_free(r);
}

void
request_on_reset(struct request *r)
{
	if (request_ws_leave(r, 1001))
		return; /* the upstream gets its close first */
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

void
request_log_decision(struct request *r, const char *host, size_t host_len,
    unsigned port, int allow, const char *reason)
{
	struct log_decision d;

	memset(&d, 0, sizeof(d));
	d.request_id = r->id;
	d.instance = g_instance(r);
	d.plugin = request_plugin(r);
	d.transport = policy_transport_name(r->transport);
	d.host = host;
	d.host_len = host_len;
	d.port = port;
	d.allow = allow;
	d.reason = reason;
	d.detail = allow ? NULL : r->detail;
	d.addrs = r->verdict != NULL ? r->verdict->addrs : NULL;
	d.naddrs = r->verdict != NULL ? r->verdict->naddrs : 0;
	d.via = allow ? r->conf->snap->upstream_proxy_url : NULL;
	log_decision(&d);
	r->decided = 1;
	r->allowed = allow;
	metrics_decision(r->b->metrics, d.instance, allow, reason,
	    broker_now_us() - r->start_us);
}

/* A deny before any address was validated. */
static void
request_deny(struct request *r, const char *reason, int err)
{
	const char *host = r->dest.host.name;

	r->verdict = NULL;
	request_log_decision(r, host, strlen(host), r->dest.port, 0, reason);
	request_fail(r, err);
}

void
request_invalid(struct request *r, const char *detail)
{
	r->detail = detail;
	request_deny(r, "invalid-request", EGRESS_ERR_INVALID_REQUEST);
}

static void request_connect(struct request *r);
static void request_begin_relay(struct request *r, struct bufferevent *bev,
    const struct policy_addr *used);

static void request_begin_exchange(struct request *r, struct bufferevent *bev,
    const struct policy_addr *used);

/*
 * The TLS context of r's profile now, and its trust generation; NULL
 * when it is not loaded (tls-failed).
 */
static struct dial_tls *
request_tls(const struct request *r, uint64_t *ret_trust)
{
	struct dial_tls *t = NULL;

	*ret_trust = 0;
	if (tlsprof_select(r->b, r->conf->snap, r->ci, r->tls_profile,
		strlen(r->tls_profile), &t, ret_trust) != 0)
		return NULL;
	return t;
}

static void
request_pool_key(const struct request *r, struct pool_key *k)
{
	k->instance = g_instance(r);
	k->host = &r->dest.host;
	k->port = r->dest.port;
	k->tls = r->https;
	k->trust = 0;
	if (r->https)
		(void)request_tls(r, &k->trust);
}

/*
 * Take a lease for r's instance; idle pooled connections (its own, then
 * those of instances borrowing beyond their share) are closed rather
 * than refuse: they hold leases nobody is using (pool_lease()).
 */
static int
request_lease(struct request *r, unsigned max)
{
	return pool_lease(r->b->pool, r->b->leases, g_instance(r), max,
	    &r->lease);
}

/*
 * The decision is made (res). On allow, reuse only a pooled connection
 * under the exact key whose address is in THIS verdict's validated set
 * (it brings the lease it holds), else take a lease and dial.
 */
static void
request_decided(struct request *r, const struct decide_result *res)
{
	const struct conf_snapshot *s;
	struct bufferevent *bev = NULL;
	struct policy_addr used;
	struct pool_key k;
	int err;

	r->verdict = res->verdict;
	if (res->invalid) {
		request_invalid(r, "destination refused by the policy");
		return;
	}
	if (!res->allow) {
		request_log_decision(r, r->dest.host.name,
		    strlen(r->dest.host.name), r->dest.port, 0, res->reason);
		request_fail(r, res->error);
		return;
	}
	s = r->conf->snap;
	if (r->transport == PROTO_TRANSPORT_HTTP) {
		request_pool_key(r, &k);
		bev = pool_take(r->b->pool, &k, r->verdict->addrs,
		    r->verdict->naddrs, &r->lease, &used);
		r->tls_gen = k.trust; /* only current trust matches */
		r->parent_gen = r->b->parent_gen; /* pruned at a change */
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
		request_fail(r,
		    err == EGRESS_ERR_BUDGET_EXHAUSTED ?
			err :
			EGRESS_ERR_UNAVAILABLE);
		return;
	}
	request_log_decision(r, r->dest.host.name, strlen(r->dest.host.name),
	    r->dest.port, 1, NULL);
	request_connect(r);
}

/*
 * The policy the decision reads: the snapshot in force, and this host's
 * addresses now (none while they are unknown: policy-unavailable). At the start that is the snapshot the request just
 * took; when the answers arrive it is taken again, so that a
 * configuration that broke, or an instance removed or a grant revoked
 * while the lookup was out, decides (a broken file: policy-unavailable).
 */
static int
request_policy(void *arg, int answers, struct decide_policy *ret)
{
	struct request *r = arg;
	struct confref *now;

	if (answers) {
		if ((now = confstate_get_for(&r->b->conf, g_instance(r))) ==
		    NULL)
			return -1;
		confref_unref(r->conf);
		r->conf = now;
		r->ci = conf_instance_find(now->snap, g_instance(r));
	}
	ret->instance = r->ci != NULL ? &r->ci->policy : NULL;
	ret->nat64 = &r->conf->snap->nat64;
	return broker_own_addrs(r->b, ret);
}

static void
request_decide_cb(void *arg, const struct decide_result *res)
{
	struct request *r = arg;

	broker_dns_release(r->dns);
	r->dns = NULL;
	metrics_dns(r->b->metrics, dns_status_str(res->dns),
	    broker_now_us() - r->start_us);
	request_decided(r, res);
}

static void
request_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct request *r = arg;

	if (r->phase == PHASE_DONE) {
		/* Answered and logged; the guest never ended its side. */
		(void)r->g.ops->send_error(r->g.ctx, &r->st,
		    proto_err_to_wire(EGRESS_ERR_TIMEOUT));
		r->st.state = PROTO_STREAM_CLOSED;
		r->done(r->done_arg, r);
		return;
	}
	if (r->phase == PHASE_RESOLVING) {
		/* The deadline passed before an answer: no verdict. */
		r->verdict = NULL;
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
	uint64_t t = broker_now_ms(), d = at_ms > t ? at_ms - t : 0;

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

static int
str_is(const struct proto_str *s, const char *lit)
{
	return s->len == strlen(lit) && memcmp(s->ptr, lit, s->len) == 0;
}

/*
 * Check the REQUEST frame m's transport, scheme, authority and head
 * (http1_request_check()) and its method against the standard set and
 * [limits] extra_methods; fill r->dest and *ret_head (pointing into m and
 * static storage, valid until the next call). Return 0, or -1 when r was
 * refused (finished).
 */
static int
request_check_head(struct request *r, const struct proto_msg *m,
    struct http1_head *ret_head)
{
	static struct http1_header in[PROTO_HEADERS_MAX];
	static struct http1_header kept[PROTO_HEADERS_MAX];
	static char detail[sizeof(((struct policy_err *)0)->msg) + 32];
	const struct proto_request *rq = &m->request;
	const struct conf_snapshot *s = r->conf->snap;
	struct http1_head head;
	struct policy_err perr;

	/* http here; tcp and tls in request_check_stream(), websocket in
	 * request_check_ws(). */
	if (rq->transport != PROTO_TRANSPORT_HTTP ||
	    !(str_is(&rq->scheme, "http") || str_is(&rq->scheme, "https"))) {
		r->dest.host.name[0] = '\0';
		r->detail = rq->transport != PROTO_TRANSPORT_HTTP ?
		    "transport not supported" :
		    "scheme not supported";
		request_log_decision(r, rq->authority.ptr, rq->authority.len,
		    0, 0, "invalid-request");
		request_fail(r, EGRESS_ERR_INVALID_REQUEST);
		return -1;
	}
	r->https = str_is(&rq->scheme, "https");
	if (rq->authority.len == 0 ||
	    policy_authority_parse(rq->authority.ptr, rq->authority.len,
		r->https ? 443 : 80, &r->dest, &perr) != 0) {
		r->detail = "authority does not parse";
		request_log_decision(r, rq->authority.ptr, rq->authority.len,
		    0, 0, "invalid-request");
		request_fail(r, EGRESS_ERR_INVALID_REQUEST);
		return -1;
	}
	if (r->https)
		memcpy(r->dest.scheme, "https", sizeof("https"));
	else
		memcpy(r->dest.scheme, "http", sizeof("http"));
	http1_req_head_of(m, in, &head);
	if (head.method == NULL || head.path == NULL) {
		request_invalid(r, "no method or path");
		return -1;
	}
	perr.msg[0] = '\0';
	if (http1_request_check(&r->dest, &head, kept, PROTO_HEADERS_MAX,
		ret_head, &perr) != 0) {
		(void)snprintf(detail, sizeof(detail), "%s",
		    perr.msg[0] ? perr.msg : "invalid head");
		request_invalid(r, detail);
		return -1;
	}
	if (!http1_method_is_allowed(head.method, head.method_len,
		(const char *const *)s->extra_methods, s->nextra_methods)) {
		request_invalid(r, "method not relayed");
		return -1;
	}
	if (m->flags & PROTO_FLAG_END_STREAM) {
		r->body_ended = 1;
		if (ret_head->body_length > 0) {
			/* A Content-Length the body cannot match. */
			request_invalid(r, "Content-Length with no body");
			return -1;
		}
		ret_head->body_length = 0;
	}
	return 0;
}

/*
 * Check a tcp or tls REQUEST: an authority HOST:PORT (port required,
 * 1..65535; else the decision is invalid-destination) and none of HTTP's
 * fields. Fill r->dest. Return 0, or -1 when r was refused (finished).
 */
static int
request_check_stream(struct request *r, const struct proto_msg *m)
{
	static char detail[sizeof(((struct policy_err *)0)->msg) + 32];
	const struct proto_request *rq = &m->request;
	struct policy_err perr;

	if (rq->method.len != 0 || rq->scheme.len != 0 || rq->path.len != 0 ||
	    m->nheaders != 0) {
		r->detail = "a tcp or tls request carries no method, scheme, "
			    "path or headers";
		request_log_decision(r, rq->authority.ptr, rq->authority.len,
		    0, 0, "invalid-request");
		request_fail(r, EGRESS_ERR_INVALID_REQUEST);
		return -1;
	}
	perr.msg[0] = '\0';
	if (rq->authority.len == 0 ||
	    policy_hostport_parse(rq->authority.ptr, rq->authority.len,
		&r->dest, &perr) != 0) {
		(void)snprintf(detail, sizeof(detail), "%s",
		    perr.msg[0] ? perr.msg :
				  "no destination: write HOST:PORT");
		r->detail = detail;
		request_log_decision(r, rq->authority.ptr, rq->authority.len,
		    0, 0,
		    policy_reason_str(POLICY_REASON_INVALID_DESTINATION));
		request_fail(r, EGRESS_ERR_INVALID_REQUEST);
		return -1;
	}
	r->https = rq->transport == PROTO_TRANSPORT_TLS; /* dial TLS */
	if (m->flags & PROTO_FLAG_END_STREAM)
		r->body_ended = 1;
	return 0;
}

void
request_start(struct request *r, const struct proto_msg *m)
{
	/* The current snapshot, re-read if a file changed. */
	struct confref *ref = confstate_get_for(&r->b->conf, g_instance(r));

	request_start_with(r, m, ref); /* may free r, not ref */
	if (ref != NULL)
		confref_unref(ref);
}

void
request_start_with(struct request *r, const struct proto_msg *m,
    struct confref *ref)
{
	const struct proto_request *rq = &m->request;
	const struct conf_snapshot *s;
	struct decide_lookup lk;
	struct http1_head out;
	unsigned idle, life;
	size_t i;

	r->transport = rq->transport; /* 1..4: proto checked it */
	/* The host as the guest wrote it, until it parses. */
	i = rq->authority.ptr == NULL ?
	    0 :
	    rq->authority.len < sizeof(r->dest.host.name) ?
	    rq->authority.len :
	    sizeof(r->dest.host.name) - 1;
	if (i > 0)
		memcpy(r->dest.host.name, rq->authority.ptr, i);
	r->dest.host.name[i] = '\0';

	/* 1. The snapshot the caller just looked at (NULL: none). */
	r->conf = ref != NULL ? confref_ref(ref) : NULL;
	if (r->conf == NULL) {
		request_deny(r, "policy-unavailable", EGRESS_ERR_UNAVAILABLE);
		return;
	}
	s = r->conf->snap;
	r->ci = conf_instance_find(s, g_instance(r));

	/* 2. The head. */
	if (rq->transport == PROTO_TRANSPORT_WEBSOCKET) {
		if (request_check_ws(r, m) != 0)
			return;
	} else if (rq->transport == PROTO_TRANSPORT_TCP ||
	    rq->transport == PROTO_TRANSPORT_TLS) {
		if (request_check_stream(r, m) != 0)
			return;
	} else if (request_check_head(r, m, &out) != 0)
		return;
	else if (http1_head_copy(&out, &r->head, &r->head_mem) != 0) {
		request_deny(r, "policy-unavailable", EGRESS_ERR_UNAVAILABLE);
		return;
	}

	/* The TLS profile: one the entry lists, on a TLS request only. */
	if (rq->tls_profile.len > 0 && !r->https) {
		request_invalid(r, "a tls profile on a request without TLS");
		return;
	}
	if (tlsprof_check(s, r->ci, rq->tls_profile.ptr,
		rq->tls_profile.len) != 0) {
		r->detail = "the entry does not list this tls profile";
		request_deny(r, TLSPROF_REASON_NOT_ALLOWED,
		    EGRESS_ERR_INVALID_REQUEST);
		return;
	}
	if (rq->tls_profile.len > 0)
		memcpy(r->tls_profile, rq->tls_profile.ptr,
		    rq->tls_profile.len);

	/* Limits: the guest may lower each, never raise it. */
	r->deadline_ms = r->start_ms +
	    lower(s->connect_timeout_ms, rq->timeouts.connect_ms);
	if (r->transport != PROTO_TRANSPORT_HTTP) {
		/* A stream: between-bytes is its idle timeout, total its
		 * lifetime, the entry's or [limits]' at most. */
		conf_stream_limits(s, r->ci, &idle, &life);
		r->idle_ms = lower(idle, rq->timeouts.between_bytes_ms);
		r->total_ms = r->start_ms + lower(life, rq->timeouts.total_ms);
	}
	r->first_byte_ms = (int)lower(s->first_byte_timeout_ms,
	    rq->timeouts.first_byte_ms);
	r->between_bytes_ms = (int)lower(s->between_bytes_timeout_ms,
	    rq->timeouts.between_bytes_ms);
	if (rq->timeouts.total_ms != 0 && r->transport == PROTO_TRANSPORT_HTTP)
		r->total_ms = r->start_ms + rq->timeouts.total_ms;

	/* 3. The decision, around exactly one resolution. */
	memset(&lk, 0, sizeof(lk));
	r->dns = broker_dns_hold(r->b);
	lk.resolver = r->dns != NULL ? broker_dns_resolver(r->dns) : NULL;
	lk.tag = g_instance(r); /* the resolver's fair share (broker.h) */
	if (decide_run(&r->decide, request_policy_transport(r), &r->dest,
		request_policy, r, &lk, request_decide_cb, r)) {
		broker_dns_release(r->dns);
		r->dns = NULL;
		request_decided(r, decide_result(&r->decide));
		return;
	}
	r->phase = PHASE_RESOLVING;
	if (request_arm(r, r->deadline_ms) != 0)
		request_deny(r, "policy-unavailable", EGRESS_ERR_UNAVAILABLE);
}

/* ---- Upstream ---------------------------------------------------------- */

static void request_pump_body(struct request *r);
static void request_push(struct request *r);

/*
 * Fill m's header list from the n response headers (trailers: 1, the
 * trailer section) hs, without the fields that must not reach the guest.
 * Return 0, or -1 over the protocol's bounds.
 */
static int
fill_headers(struct proto_msg *m, const struct http1_header *hs, size_t n,
    int trailers)
{
	size_t i, bytes = 0;

	m->nheaders = 0;
	for (i = 0; i < n; i++) {
		if (trailers ? http1_trailer_is_dropped(hs, n, &hs[i]) :
			       http1_response_is_hop(hs, n, &hs[i]))
			continue;
		if (m->nheaders == PROTO_HEADERS_MAX || hs[i].name_len == 0 ||
		    hs[i].name_len > PROTO_NAME_MAX ||
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

static struct proto_msg request_msg; /* scratch: single-threaded */

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
	if (fill_headers(m, resp->headers, resp->nheaders, 0) != 0) {
		request_fail(r, EGRESS_ERR_UPSTREAM_PROTOCOL);
		return;
	}
	if (r->g.ops->send(r->g.ctx, &r->st, m) != 0) {
		request_fail(r, EGRESS_ERR_UNAVAILABLE);
		return;
	}
	r->status = resp->status;
}

/*
 * May more response body be read for r: under REQUEST_RESP_HIGH and
 * within the instance's memory budget (credit taken as needed; when the
 * budget says no, request_mem_wake() retries once memory is freed)?
 */
static int
request_resp_room(struct request *r)
{
	size_t n = evbuffer_get_length(r->resp);

	return n < REQUEST_RESP_HIGH &&
	    broker_mem_room(r->b, g_instance(r), &r->mem, n,
		REQUEST_RESP_HIGH + HTTP1_READ_HIGH);
}

static void
request_mem_wake(void *arg)
{
	struct request *r = arg;

	if (r->paused && r->x != NULL && request_resp_room(r)) {
		r->paused = 0;
		http1_resume_read(r->x);
	}
}

static void
up_on_data(void *arg, struct evbuffer *in, size_t n)
{
	struct request *r = arg;
	r->b->activity++;

	/* Moved, not copied. */
	if (evmove(in, r->resp, n) != 0) {
		request_fail(r, EGRESS_ERR_NOMEM);
		return;
	}
	r->bytes_in += n;
	if (!r->paused && !request_resp_room(r)) {
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
	if (r->https && r->tls_gen != k.trust)
		return; /* verified under an old trust: close it */
	if (r->parent_gen != r->b->parent_gen)
		return; /* made through an old [upstream_proxy]: close it */
	if (lease_count(r->b->leases, k.instance) >
	    s->max_connections_per_instance)
		return; /* over a lowered budget: close it */
	request_exchange_free(r);
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
		return 0; /* a timeout may mean it is being served */
	return method_is(h, "GET") || method_is(h, "HEAD") ||
	    method_is(h, "OPTIONS") || method_is(h, "TRACE") ||
	    method_is(h, "PUT") || method_is(h, "DELETE");
}

/* Drop the stale connection, keep the lease, dial afresh (once). */
static void
request_retry(struct request *r)
{
	request_exchange_free(r);
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
		if (fill_headers(m, trailers, ntrailers, 1) != 0) {
			request_fail(r, EGRESS_ERR_UPSTREAM_PROTOCOL);
			return;
		}
		if (m->nheaders == 0)
			m->type = PROTO_MSG_DATA; /* none left */
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
			request_fail(r,
			    err == EGRESS_ERR_CLOSED ?
				EGRESS_ERR_INVALID_REQUEST :
				err);
			return;
		}
		r->bytes_out += n;
		g_consumed(r, &r->st, n);
	}
	if (r->body_ended && !r->body_finished &&
	    evbuffer_get_length(r->body) == 0) {
		r->body_finished = 1;
		if (r->head.body_length != 0) {
			err = http1_finish_body(r->x);
			if (err != 0) {
				request_fail(r,
				    err == EGRESS_ERR_CLOSED ?
					EGRESS_ERR_INVALID_REQUEST :
					err);
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
	r->dial = NULL; /* freed by dial after we return */
	if (err != 0) {
		request_fail(r, err);
		return;
	}
	metrics_connect(r->b->metrics, broker_now_us() - r->dial_us);
	if (r->transport != PROTO_TRANSPORT_HTTP) {
		request_begin_relay(r, bev, used);
		return;
	}
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

	/* A reload while connecting passed this request by: decide again
	 * on the snapshot in force now (a pooled connection was taken
	 * with the decision, in the same turn). */
	if (!r->reused && request_connected_check(r, bev, used) != 0)
		return;
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
		request_fail(r,
		    err == EGRESS_ERR_NOMEM ? err :
					      EGRESS_ERR_INVALID_REQUEST);
		return;
	}
	/* Decided again at every reload while it runs, as streams are. */
	request_relays_link(r);
	http1_set_body_buffer(r->x, up_on_data);
	request_pump_body(r);
}

static void
request_connect(struct request *r)
{
	struct dial_parent parent;
	struct dial_tls *tls = NULL;
	struct dial_params p;
	uint64_t t = broker_now_ms();
	uint64_t until = r->deadline_ms;
	int err;

	if (r->total_ms != 0 && r->total_ms < until)
		until = r->total_ms;
	if (t >= until) {
		request_fail(r, EGRESS_ERR_TIMEOUT);
		return;
	}
	if (r->https && (tls = request_tls(r, &r->tls_gen)) == NULL) {
		request_fail(r, EGRESS_ERR_TLS_FAILED);
		return;
	}
	if (r->timer != NULL)
		(void)evtimer_del(r->timer);
	r->phase = PHASE_DIALING;
	if (broker_dial_params(r->b, r->conf->snap, g_instance(r), &p,
		&parent) != 0) {
		/* The parent changed since the decision: not through the
		 * old one (a retry's dial, or one after a slow lookup). */
		request_fail(r, EGRESS_ERR_UNAVAILABLE);
		return;
	}
	p.host = &r->dest.host;
	p.port = r->dest.port;
	p.addrs = r->verdict->addrs;
	p.naddrs = r->verdict->naddrs;
	p.timeout_ms = (int)(until - t);
	p.no_alpn = r->transport != PROTO_TRANSPORT_HTTP;
	r->dial_us = broker_now_us();
	r->parent_gen = r->b->parent_gen;
	err = dial_start(r->b->base, tls, &p, request_dial_cb, r, &r->dial);
	if (err != 0) {
		r->dial = NULL;
		request_fail(r,
		    err == EGRESS_ERR_NOMEM ? EGRESS_ERR_UNAVAILABLE :
					      EGRESS_ERR_CONNECT_FAILED);
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
	    r->g.ops->can_write(r->g.ctx)) {
		n = proto_conn_sendable(r->g.ops->proto(r->g.ctx), &r->st);
		if (n == 0)
			break;
		if (n > len)
			n = (uint32_t)len;
		if (r->g.ops->send_data(r->g.ctx, &r->st, r->resp, n, 0) !=
		    0) {
			request_fail(r, EGRESS_ERR_UNAVAILABLE);
			return;
		}
	}
	if (r->paused && r->x != NULL &&
	    evbuffer_get_length(r->resp) <= REQUEST_RESP_LOW &&
	    request_resp_room(r)) {
		r->paused = 0;
		http1_resume_read(r->x);
	}
	broker_mem_trim(r->b, g_instance(r), &r->mem,
	    evbuffer_get_length(r->resp), 0);
	if (r->phase != PHASE_FLUSHING || r->tail == NULL ||
	    evbuffer_get_length(r->resp) > 0)
		return;
	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = r->tail_type;
	m.flags = PROTO_FLAG_END_STREAM;
	m.stream = r->st.id;
	if (proto_conn_send(r->g.ops->proto(r->g.ctx), &r->st, &m, NULL) !=
	    0) {
		request_fail(r, EGRESS_ERR_UNAVAILABLE);
		return;
	}
	(void)r->g.ops->send_data(r->g.ctx, NULL, r->tail,
	    evbuffer_get_length(r->tail), 0);
	evbuffer_free(r->tail);
	r->tail = NULL;
	request_log_close(r, NULL);
	request_settle(r);
}

void
request_flush(struct request *r)
{
	if (r->phase == PHASE_RELAY && r->relay != NULL)
		relay_flush(r->relay);
	else if (r->phase == PHASE_RELAY && r->ws != NULL)
		wsock_flush(r->ws);
	else if (r->phase == PHASE_EXCHANGE || r->phase == PHASE_FLUSHING)
		request_push(r);
}

void
request_on_body(struct request *r, size_t len, int end)
{
	if (end)
		r->body_ended = 1;
	if (r->phase == PHASE_RELAY && r->relay != NULL) {
		relay_guest_data(r->relay, end); /* may finish r */
		return;
	}
	if (r->phase == PHASE_DONE || r->phase == PHASE_FLUSHING) {
		/* The response is over: discard, and credit it back. */
		size_t n = evbuffer_get_length(r->body);

		(void)evbuffer_drain(r->body, n);
		g_consumed(r, &r->st, n);
		if (r->phase == PHASE_DONE &&
		    r->st.state == PROTO_STREAM_CLOSED) {
			r->done(r->done_arg, r);
		}
		return;
	}
	if (r->phase == PHASE_EXCHANGE)
		request_pump_body(r);
	/* Before the exchange, body waits (uncredited) in r->body. */
}

/* ---- Streams (tcp, tls) ------------------------------------------------ */

/* The relay is over: both directions ended (err 0), or it failed. */
static void
request_relay_end(void *arg, int err)
{
	struct request *r = arg;

	r->b->activity++;
	if (err != 0) {
		request_fail(r, err);
		return;
	}
	request_upstream_done(r);
	/* A guest that left before the upstream's end cancelled that
	 * direction (its own bytes were delivered). */
	request_log_close(r,
	    r->st.state == PROTO_STREAM_CLOSED ? NULL : "cancelled");
	request_release_exchange(r);
	if (r->g.ops == &guest_gone_ops)
		r->st.state = PROTO_STREAM_CLOSED; /* nobody to wait for */
	request_settle(r);
}

/*
 * The stream's connection is up (TLS verified for tls): tell the guest
 * with RESPONSE 200 and relay bytes until both sides ended, the idle
 * timeout or the lifetime. The lease stays held all along.
 */
static void
request_begin_relay(struct request *r, struct bufferevent *bev,
    const struct policy_addr *used)
{
	struct relay_params p;
	struct proto_msg m;
	uint64_t t = broker_now_ms();

	if (r->transport == PROTO_TRANSPORT_WEBSOCKET) {
		request_begin_ws(r, bev, used);
		return;
	}
	if (request_connected_check(r, bev, used) != 0)
		return;
	r->phase = PHASE_RELAY;
	if (r->timer != NULL)
		(void)evtimer_del(r->timer);
	memset(&p, 0, sizeof(p));
	p.base = r->b->base;
	p.g = &r->g;
	p.st = &r->st;
	p.from_guest = r->body;
	p.idle_ms = r->idle_ms;
	p.lifetime_ms = r->total_ms > t ? (unsigned)(r->total_ms - t) : 1;
	p.activity = &r->b->activity;
	/* Takes bev, also on failure. */
	if (relay_start(&p, bev, request_relay_end, r, &r->relay) != 0) {
		r->relay = NULL;
		request_fail(r, EGRESS_ERR_UNAVAILABLE);
		return;
	}
	/* Linked as soon as it relays, so that every way out unlinks it. */
	request_relays_link(r);
	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_RESPONSE;
	m.stream = r->st.id;
	m.response.status = REQUEST_STREAM_STATUS;
	if (r->g.ops->send(r->g.ctx, &r->st, &m) != 0) {
		request_fail(r, EGRESS_ERR_UNAVAILABLE);
		return;
	}
	r->status = REQUEST_STREAM_STATUS;
	/* What the guest sent (and ended) before the connect: may finish
	 * r, so it comes last. */
	relay_guest_data(r->relay, r->body_ended);
}
