/* SPDX-License-Identifier: ISC */
/*
 * A CONNECT tunnel of the proxy front (see tunnel.h): decide, answer 200,
 * peek at the client's first bytes, take the lease, dial the validated
 * addresses, relay.
 */
#include <sys/socket.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <egress/error.h>

#include "broker/broker.h"
#include "broker/confstate.h"
#include "broker/inspect.h"
#include "broker/log.h"
#include "broker/metrics.h"
#include "broker/net/decide.h"
#include "broker/net/dial.h"
#include "broker/net/http1_req.h"
#include "broker/net/lease.h"
#include "broker/net/pool.h"
#include "broker/net/tls_hello.h"
#include "broker/revoke.h"
#include "broker/tunnel.h"
#include "conf/conf.h"
#include "proto/proto.h"

enum tunnel_state {
	T_DECIDING = 0,
	T_PEEKING,
	T_DIALING,
	T_RELAY,
	T_DONE,
};

struct tunnel {
	struct broker *b;
	char instance[CONF_NAME_MAX + 1];
	struct bufferevent *cl; /* the client's (borrowed) */
	struct bufferevent *up;
	struct policy_dest dest;
	char id[40];
	enum tunnel_state state;
	const char *kind; /* "tunnel", "tls-tunnel", "tcp" */
	unsigned perms;
	unsigned between_ms;
	uint64_t deadline_ms;
	uint64_t end_ms;  /* the lifetime's end */
	uint64_t last_ms; /* a byte last moved, either way (relay) */

	struct confref *conf;
	struct broker_dns *dns;
	struct decide decide;
	const struct policy_verdict *verdict;
	struct dial *dial;
	struct lease *lease;
	struct event *timer;
	struct event *start_ev;
	struct event *done_ev;

	struct policy_addr connected;
	int has_connected;
	int cl_eof;  /* the client is done sending */
	int up_shut; /* ... and the upstream was told so */
	int up_eof;  /* the upstream is done sending */
	int cl_shut; /* ... and the client was told so */
	int cl_gone; /* a write to the client failed: nothing more reaches
			it, what it sent still goes up */
	int decided, logged_close;
	int inspected;	     /* handed to inspection (tunnel_inspect_dest()) */
	int plain;	     /* both sides plain sockets (dial_is_plain()):
				written to directly while relaying */
	const char *revoked; /* the reason a reload closed it */
	char detail[2 * TLS_HELLO_SNI_MAX + 64];
	uint64_t start_ms, start_us, bytes_in, bytes_out;
	tunnel_done_fn done;
	void *arg;
};

static uint64_t
now_ms(void)
{
	return broker_now_ms();
}

static void
tunnel_log_decision(struct tunnel *t, int allow, const char *reason)
{
	struct log_decision d;

	if (t->decided)
		return;
	t->decided = 1;
	memset(&d, 0, sizeof(d));
	d.request_id = t->id;
	d.instance = t->instance;
	d.plugin = NULL;
	if (t->conf != NULL) {
		const struct conf_instance *ci =
		    conf_instance_find(t->conf->snap, t->instance);

		d.plugin = ci != NULL ? ci->plugin : NULL;
	}
	d.transport = t->kind;
	d.host = t->dest.host.name;
	d.host_len = strlen(t->dest.host.name);
	d.port = t->dest.port;
	d.allow = allow;
	d.reason = reason;
	d.detail = !allow && t->detail[0] != '\0' ? t->detail : NULL;
	d.addrs = t->verdict != NULL ? t->verdict->addrs : NULL;
	d.naddrs = t->verdict != NULL ? t->verdict->naddrs : 0;
	d.via = allow && t->conf != NULL ?
	    t->conf->snap->upstream_proxy_url :
	    NULL;
	log_decision(&d);
	metrics_decision(t->b->metrics, t->instance, allow, reason,
	    broker_now_us() - t->start_us);
}

static void
tunnel_log_close(struct tunnel *t, const char *error)
{
	struct log_close c;

	if (t->logged_close)
		return;
	t->logged_close = 1;
	if (!t->decided)
		tunnel_log_decision(t, 0, "cancelled");
	memset(&c, 0, sizeof(c));
	c.request_id = t->id;
	c.instance = t->instance;
	c.connected = t->has_connected ? &t->connected : NULL;
	c.error = t->revoked != NULL ? "revoked" : error;
	c.reason = t->revoked;
	c.bytes_in = t->bytes_in;
	c.bytes_out = t->bytes_out;
	c.duration_ms = now_ms() - t->start_ms;
	log_close_event(&c);
	metrics_bytes(t->b->metrics, t->instance, t->bytes_in, t->bytes_out);
}

/* Stop everything but the client; no callback runs after this. */
static void
tunnel_stop(struct tunnel *t)
{
	decide_cancel(&t->decide);
	broker_dns_release(t->dns);
	t->dns = NULL;
	if (t->dial != NULL) {
		dial_cancel(t->dial);
		t->dial = NULL;
	}
	if (t->up != NULL) {
		bufferevent_free(t->up);
		t->up = NULL;
	}
	lease_release(t->lease);
	t->lease = NULL;
	if (t->timer != NULL)
		(void)evtimer_del(t->timer);
}

static void
tunnel_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tunnel *t = arg;

	t->done(t->arg);
}

/* End the tunnel (logged with error, NULL when it ended well) and tell
 * the owner from the loop. */
static void
tunnel_finish(struct tunnel *t, const char *error)
{
	if (t->state == T_DONE)
		return;
	tunnel_log_close(t, error);
	/* Cut before the client's end reached the upstream: a reset, never
	 * an end of file that would pass a truncated stream for a whole
	 * one. */
	if (error != NULL && t->up != NULL && !t->up_shut)
		dial_abort_on_free(t->up);
	tunnel_stop(t);
	t->state = T_DONE;
	bufferevent_setcb(t->cl, NULL, NULL, NULL, NULL);
	(void)bufferevent_disable(t->cl, EV_READ);
	event_active(t->done_ev, EV_TIMEOUT, 1);
}

/* Refuse before the 200: an HTTP answer, as the front gives it. */
static void
tunnel_answer(struct tunnel *t, uint32_t code)
{
	unsigned status;
	const char *name = proto_code_name(code);
	const char *msg = proto_code_message(code);

	switch (code) {
	case PROTO_CODE_BUDGET_EXHAUSTED:
		status = 429;
		break;
	case PROTO_CODE_DNS_FAILED:
	case PROTO_CODE_CONNECT_FAILED:
		status = 502;
		break;
	case PROTO_CODE_TIMEOUT:
		status = 504;
		break;
	case PROTO_CODE_INVALID_REQUEST:
		status = 400;
		break;
	default:
		status = 403;
		break;
	}
	(void)evbuffer_add_printf(bufferevent_get_output(t->cl),
	    "HTTP/1.1 %u %s\r\nContent-Type: text/plain\r\n"
	    "Content-Length: %zu\r\nX-Egress-Error: %s\r\n%s"
	    "Connection: close\r\n\r\n%s\n",
	    status, http1_req_reason(status), strlen(msg) + 1,
	    name != NULL ? name : "error",
	    status == 429 ? "Retry-After: 1\r\n" : "", msg);
}

/* ---- Relay ------------------------------------------------------------- */

/* Both directions are over (the client's end reached the upstream; the
 * upstream's reached the client, or nothing more can): end. The client
 * that could no longer be written to lost bytes: "cancelled". */
static void
tunnel_check_done(struct tunnel *t)
{
	if (t->up_shut && (t->cl_shut || t->cl_gone))
		tunnel_finish(t, t->cl_gone ? "cancelled" : NULL);
}

/* The client finished sending: once its bytes are out, half-close the
 * upstream, whose answer keeps flowing back. */
static void
tunnel_up_shut(struct tunnel *t)
{
	if (!t->cl_eof || t->up == NULL || t->up_shut ||
	    evbuffer_get_length(bufferevent_get_output(t->up)) > 0)
		return;
	t->up_shut = 1;
	(void)shutdown(bufferevent_getfd(t->up), SHUT_WR);
	tunnel_check_done(t);
}

/* The upstream finished sending: once its bytes are out, half-close the
 * client, which may still send. */
static void
tunnel_cl_shut(struct tunnel *t)
{
	if (!t->up_eof || t->cl_shut || t->cl_gone ||
	    evbuffer_get_length(bufferevent_get_output(t->cl)) > 0)
		return;
	t->cl_shut = 1;
	(void)shutdown(bufferevent_getfd(t->cl), SHUT_WR);
	tunnel_check_done(t);
}

static void tunnel_side_event(struct tunnel *t, int client, short what);

/*
 * Move what from has read towards to, adding the bytes moved to *count;
 * stop reading from when to is full. When nothing waits in to's output
 * (and both sides are plain sockets, as those of a relaying tunnel are),
 * the bytes are written at once, sparing the wait for room (an epoll_ctl
 * on and off and a loop turn, each way of each round trip); what the
 * socket does not take waits in the output. A write that fails for good
 * ends the tunnel as the bufferevent's own failed write would
 * (tunnel_side_event(), with that write's errno: a reset is then used up
 * and must not be taken for an end of file): return -1, and the caller
 * touches neither side again. Else return 0.
 */
static int
tunnel_move(struct tunnel *t, struct bufferevent *from, struct bufferevent *to,
    uint64_t *count)
{
	struct evbuffer *in = bufferevent_get_input(from);
	struct evbuffer *out = bufferevent_get_output(to);
	size_t n = evbuffer_get_length(in), left;
	int e;

	if (n == 0)
		return 0;
	if (evbuffer_get_length(out) == 0 &&
	    (bufferevent_get_enabled(to) & EV_WRITE) != 0 && t->plain &&
	    evbuffer_write(in, bufferevent_getfd(to)) < 0 &&
	    (e = errno) != EAGAIN && e != EWOULDBLOCK && e != EINTR) {
		errno = e;
		tunnel_side_event(t, to == t->cl,
		    BEV_EVENT_ERROR | BEV_EVENT_WRITING);
		return -1;
	}
	left = evbuffer_get_length(in);
	if (left > 0 && evbuffer_add_buffer(out, in) != 0) {
		*count += n - left;
		return 0;
	}
	*count += n;
	if (evbuffer_get_length(out) >= TUNNEL_HIGH)
		(void)bufferevent_disable(from, EV_READ);
	return 0;
}

static void
tunnel_cl_read(struct bufferevent *bev, void *arg)
{
	struct tunnel *t = arg;

	t->b->activity++;
	t->last_ms = now_ms();
	if (t->up != NULL)
		(void)tunnel_move(t, t->cl, t->up, &t->bytes_out);
}

static void
tunnel_up_read(struct bufferevent *bev, void *arg)
{
	struct tunnel *t = arg;

	t->b->activity++;
	t->last_ms = now_ms();
	(void)tunnel_move(t, t->up, t->cl, &t->bytes_in);
}

static void
tunnel_cl_write(struct bufferevent *bev, void *arg)
{
	struct tunnel *t = arg;

	t->last_ms = now_ms(); /* the client took bytes */
	if (t->up != NULL && !t->up_eof)
		(void)bufferevent_enable(t->up, EV_READ);
	tunnel_cl_shut(t);
}

static void
tunnel_up_write(struct bufferevent *bev, void *arg)
{
	struct tunnel *t = arg;

	t->last_ms = now_ms(); /* the upstream took bytes */
	if (!t->cl_eof)
		(void)bufferevent_enable(t->cl, EV_READ);
	tunnel_up_shut(t);
}

/* A write to the client failed with EPIPE: it closed, or shut its
 * reading side, after its end of file. What it sent before is still
 * read, to its end, and goes upstream (then the upstream's end of
 * file); nothing more goes to it, and the upstream is read no more. */
static void
tunnel_cl_gone(struct tunnel *t)
{
	struct evbuffer *out = bufferevent_get_output(t->cl);
	size_t undelivered = evbuffer_get_length(out);

	t->cl_gone = 1;
	t->bytes_in -= undelivered < t->bytes_in ? undelivered : t->bytes_in;
	(void)evbuffer_drain(out, undelivered);
	(void)bufferevent_disable(t->cl, EV_WRITE);
	if (t->up != NULL)
		(void)bufferevent_disable(t->up, EV_READ);
	if (!t->cl_eof)
		(void)bufferevent_enable(t->cl, EV_READ);
	tunnel_check_done(t);
}

/* One side closed or failed. An end of file is a half-close, passed on
 * once what that side sent is out; an error is a cut, but for a write
 * to the client that failed with EPIPE (tunnel_cl_gone()). A reset the
 * write saw first (ECONNRESET) is a cut: the socket's error is then
 * used up, and the reads after it would end in a false end of file. */
static void
tunnel_side_event(struct tunnel *t, int client, short what)
{
	int err = EVUTIL_SOCKET_ERROR(); /* of the failed call: callbacks
					    on these are not deferred */

	if (what & BEV_EVENT_TIMEOUT) {
		tunnel_finish(t, "timeout");
		return;
	}
	if (t->state != T_RELAY) {
		/* The client left before the relay began. */
		tunnel_finish(t, client ? "cancelled" : "connect-failed");
		return;
	}
	if ((what & BEV_EVENT_ERROR) && client && (what & BEV_EVENT_WRITING) &&
	    err == EPIPE && !t->cl_gone) {
		tunnel_cl_gone(t);
		return;
	}
	if (what & BEV_EVENT_ERROR) {
		/* Connected and relaying: the upstream's failure is no
		 * failure to connect (a tcp stream's label too). */
		tunnel_finish(t,
		    client ? "cancelled" : "upstream-protocol-error");
		return;
	}
	if (client) {
		t->cl_eof = 1;
		(void)bufferevent_disable(t->cl, EV_READ);
		tunnel_up_shut(t);
		return;
	}
	t->up_eof = 1;
	(void)bufferevent_disable(t->up, EV_READ);
	if (!t->cl_gone && tunnel_move(t, t->up, t->cl, &t->bytes_in) != 0)
		return;
	tunnel_cl_shut(t);
}

static void
tunnel_cl_event(struct bufferevent *bev, short what, void *arg)
{
	tunnel_side_event(arg, 1, what);
}

static void
tunnel_up_event(struct bufferevent *bev, short what, void *arg)
{
	tunnel_side_event(arg, 0, what);
}

/* Arm the relay's timer for the earlier of the idle deadline and the end
 * of the lifetime. */
static void
tunnel_relay_arm(struct tunnel *t)
{
	uint64_t n = now_ms(), at = 0;
	struct timeval tv;

	if (t->between_ms != 0)
		at = t->last_ms + t->between_ms;
	if (t->end_ms != 0 && (at == 0 || t->end_ms < at))
		at = t->end_ms;
	if (at == 0)
		return;
	at = at > n ? at - n : 0;
	tv.tv_sec = (time_t)(at / 1000);
	tv.tv_usec = (suseconds_t)(at % 1000) * 1000;
	(void)evtimer_add(t->timer, &tv);
}

/* What a reload decides the tunnel under: a tcp tunnel needs
 * socket_client; a tls-tunnel either permission, http_client first, as
 * at its start (on s's entry). */
static enum policy_transport
tunnel_transport(const struct tunnel *t, const struct conf_snapshot *s)
{
	const struct conf_instance *ci = conf_instance_find(s, t->instance);

	if (strcmp(t->kind, "tcp") == 0)
		return POLICY_TRANSPORT_TCP;
	return ci != NULL &&
		(ci->policy.permissions & POLICY_PERM_HTTP_CLIENT) ?
	    POLICY_TRANSPORT_HTTP :
	    POLICY_TRANSPORT_TLS;
}

/* Does s still allow the connected tunnel? If not, t->revoked says why.
 * A TLS byte tunnel of an entry that now inspects is not: its requests
 * would pass undecided (inspection-required). */
static int
tunnel_allowed_by(struct tunnel *t, const struct conf_snapshot *s)
{
	const struct conf_instance *ci = conf_instance_find(s, t->instance);
	const char *reason = "policy-unavailable";

	if (ci != NULL && ci->tls_inspect &&
	    strcmp(t->kind, "tls-tunnel") == 0) {
		t->revoked = "inspection-required";
		return 0;
	}
	if (s != NULL &&
	    revoke_is_allowed(t->b, s, t->instance, tunnel_transport(t, s),
		&t->dest, &t->connected, NULL, &reason))
		return 1;
	t->revoked = reason;
	return 0;
}

int
tunnel_recheck(struct tunnel *t, const struct conf_snapshot *s)
{
	if (t->state != T_RELAY || tunnel_allowed_by(t, s))
		return 0;
	tunnel_finish(t, "revoked");
	return 1;
}

static void
tunnel_dial_cb(void *arg, int err, struct bufferevent *bev,
    const struct policy_addr *used)
{
	struct tunnel *t = arg;
	struct confref *now;
	int allowed;

	t->b->activity++;
	t->dial = NULL;
	if (err != 0) {
		if (t->b->metrics != NULL)
			metrics_upstream_error(t->b->metrics,
			    proto_code_name(proto_err_to_wire(err)));
		tunnel_finish(t, proto_code_name(proto_err_to_wire(err)));
		return;
	}
	t->up = bev;
	t->connected = *used;
	t->has_connected = 1;
	/* A reload while connecting passed it by (only relaying tunnels are
	 * decided again): decide again on the snapshot in force now. */
	now = confstate_get_for(&t->b->conf, t->instance);
	allowed = tunnel_allowed_by(t, now != NULL ? now->snap : NULL);
	confref_unref(now);
	if (!allowed) {
		tunnel_finish(t, "revoked");
		return;
	}
	t->state = T_RELAY;
	t->plain = dial_is_plain(t->up) && dial_is_plain(t->cl);
	if (t->timer != NULL)
		(void)evtimer_del(t->timer);
	bufferevent_setcb(t->up, tunnel_up_read, tunnel_up_write,
	    tunnel_up_event, t);
	bufferevent_setcb(t->cl, tunnel_cl_read, tunnel_cl_write,
	    tunnel_cl_event, t);
	bufferevent_setwatermark(t->up, EV_WRITE, TUNNEL_LOW, 0);
	bufferevent_setwatermark(t->cl, EV_WRITE, TUNNEL_LOW, 0);
	/* One idle timer for both ways: a quiet side is no reason to end
	 * while the other still sends. */
	(void)bufferevent_set_timeouts(t->up, NULL, NULL);
	(void)bufferevent_set_timeouts(t->cl, NULL, NULL);
	t->last_ms = now_ms();
	tunnel_relay_arm(t);
	/* The bytes peeked at go first, written at once: a destination that
	 * reset meanwhile ends the tunnel here (t->up is then gone). */
	if (tunnel_move(t, t->cl, t->up, &t->bytes_out) != 0)
		return;
	(void)bufferevent_enable(t->up, EV_READ | EV_WRITE);
	(void)bufferevent_enable(t->cl, EV_READ | EV_WRITE);
}

/* ---- Peek -------------------------------------------------------------- */

static int
tunnel_lease(struct tunnel *t)
{
	unsigned max = t->conf != NULL ?
	    t->conf->snap->max_connections_per_instance :
	    0;
	int err;

	for (;;) {
		err = lease_acquire(t->b->leases, t->instance, max, &t->lease);
		if (err != EGRESS_ERR_BUDGET_EXHAUSTED ||
		    pool_evict(t->b->pool, t->instance, 1) == 0)
			return err;
	}
}

/* Refuse after the 200: log and close, nothing was connected. */
static void
tunnel_refuse(struct tunnel *t, const char *reason)
{
	tunnel_log_decision(t, 0, reason);
	tunnel_finish(t, "denied");
}

static void
tunnel_connect(struct tunnel *t)
{
	struct dial_parent parent;
	struct dial_params p;
	uint64_t n = now_ms();

	tunnel_log_decision(t, 1, NULL);
	t->state = T_DIALING;
	if (broker_dial_params(t->b, t->conf->snap, t->instance, &p,
		&parent) != 0) {
		/* The parent changed since the decision: not through the
		 * old one. */
		tunnel_finish(t, "connect-failed");
		return;
	}
	p.host = &t->dest.host;
	p.port = t->dest.port;
	p.addrs = t->verdict->addrs;
	p.naddrs = t->verdict->naddrs;
	p.timeout_ms = t->deadline_ms > n ? (int)(t->deadline_ms - n) : 1;
	if (dial_start(t->b->base, NULL, &p, tunnel_dial_cb, t, &t->dial) !=
	    0) {
		t->dial = NULL;
		tunnel_finish(t, "connect-failed");
	}
}

/* An inspected instance: the broker terminates the TLS (inspect.h) once
 * the ClientHello was checked; the requests inside are decided one by
 * one, so the tunnel holds no lease. */
static int
tunnel_inspect(struct tunnel *t)
{
	const struct conf_instance *ci = conf_instance_find(t->conf->snap,
	    t->instance);

	if (ci == NULL || !ci->tls_inspect)
		return 0;
	t->kind = "tls-inspect";
	if (!inspect_is_ready(t->b)) {
		(void)snprintf(t->detail, sizeof(t->detail),
		    "the inspection CA is not loaded");
		tunnel_refuse(t, "policy-unavailable");
		return 1;
	}
	tunnel_log_decision(t, 1, NULL);
	t->inspected = 1;
	tunnel_finish(t, NULL);
	return 1;
}

/* The client's first bytes: which tunnel, and may it be? */
static void
tunnel_peek(struct bufferevent *bev, void *arg)
{
	struct tunnel *t = arg;
	struct evbuffer *in = bufferevent_get_input(t->cl);
	size_t n = evbuffer_get_length(in);
	struct tls_hello h;
	unsigned char *p;
	int rv;

	t->b->activity++;
	if (n > TLS_HELLO_MAX)
		n = TLS_HELLO_MAX;
	if ((p = evbuffer_pullup(in, (ssize_t)n)) == NULL) {
		tunnel_finish(t, "unavailable");
		return;
	}
	rv = tls_hello_peek(p, n, &h);
	if (rv == TLS_HELLO_MORE)
		return;
	(void)bufferevent_disable(t->cl, EV_READ);
	if (rv == TLS_HELLO_NOT_TLS) {
		t->kind = "tcp";
		if (!(t->perms & POLICY_PERM_SOCKET_CLIENT)) {
			tunnel_refuse(t, "no-permission");
			return;
		}
		tunnel_connect(t);
		return;
	}
	t->kind = "tls-tunnel";
	if (rv != TLS_HELLO_OK) {
		(void)snprintf(t->detail, sizeof(t->detail),
		    "not a ClientHello");
		tunnel_refuse(t, "invalid-request");
		return;
	}
	if (h.has_ech) {
		(void)snprintf(t->detail, sizeof(t->detail),
		    "Encrypted Client Hello: the name cannot be checked");
		tunnel_refuse(t, "ech");
		return;
	}
	if (!h.has_sni) {
		if (t->dest.host.kind == POLICY_HOST_NAME) {
			tunnel_refuse(t, "no-sni");
			return;
		}
	} else if (!tls_hello_sni_is(h.sni, t->dest.host.name)) {
		(void)snprintf(t->detail, sizeof(t->detail),
		    "SNI '%s' differs from the CONNECT host '%s'", h.sni,
		    t->dest.host.name);
		tunnel_refuse(t, "sni-mismatch");
		return;
	}
	if (tunnel_inspect(t))
		return;
	tunnel_connect(t);
}

/* ---- Decision ---------------------------------------------------------- */

static int
tunnel_policy(void *arg, int answers, struct decide_policy *ret)
{
	struct tunnel *t = arg;
	const struct conf_instance *ci;
	struct confref *now;

	if (answers) {
		if ((now = confstate_get_for(&t->b->conf, t->instance)) ==
		    NULL)
			return -1;
		confref_unref(t->conf);
		t->conf = now;
	}
	ci = conf_instance_find(t->conf->snap, t->instance);
	ret->instance = ci != NULL ? &ci->policy : NULL;
	ret->nat64 = &t->conf->snap->nat64;
	return broker_own_addrs(t->b, ret);
}

static void
tunnel_decided(struct tunnel *t, const struct decide_result *res)
{
	int err;

	t->verdict = res->verdict;
	if (res->invalid || !res->allow) {
		tunnel_log_decision(t, 0,
		    res->invalid ? "invalid-request" : res->reason);
		tunnel_answer(t,
		    res->invalid ? PROTO_CODE_INVALID_REQUEST :
				   proto_err_to_wire(res->error));
		tunnel_finish(t,
		    res->invalid ?
			"invalid-request" :
			proto_code_name(proto_err_to_wire(res->error)));
		return;
	}
	/* The lease is the tunnel's from its 200 to its end. */
	if ((err = tunnel_lease(t)) != 0) {
		int budget = err == EGRESS_ERR_BUDGET_EXHAUSTED;

		tunnel_log_decision(t, 0,
		    budget ? "budget-exhausted" : "policy-unavailable");
		tunnel_answer(t,
		    budget ? PROTO_CODE_BUDGET_EXHAUSTED :
			     PROTO_CODE_UNAVAILABLE);
		tunnel_finish(t, budget ? "budget-exhausted" : "unavailable");
		return;
	}
	(void)evbuffer_add_printf(bufferevent_get_output(t->cl),
	    "HTTP/1.1 200 Connection established\r\n\r\n");
	t->state = T_PEEKING;
	bufferevent_setcb(t->cl, tunnel_peek, NULL, tunnel_cl_event, t);
	(void)bufferevent_enable(t->cl, EV_READ | EV_WRITE);
	if (evbuffer_get_length(bufferevent_get_input(t->cl)) > 0)
		tunnel_peek(t->cl, t); /* sent along with its CONNECT */
}

static void
tunnel_decide_cb(void *arg, const struct decide_result *res)
{
	struct tunnel *t = arg;

	broker_dns_release(t->dns);
	t->dns = NULL;
	tunnel_decided(t, res);
}

static void
tunnel_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tunnel *t = arg;
	uint64_t n = now_ms();

	if (t->state == T_RELAY) {
		/* Idle (no byte either way for between_ms), or its lifetime
		 * is over. */
		if ((t->end_ms != 0 && n >= t->end_ms) ||
		    (t->between_ms != 0 && n - t->last_ms >= t->between_ms)) {
			tunnel_finish(t, "timeout");
			return;
		}
		tunnel_relay_arm(t);
		return;
	}
	if (t->state == T_DECIDING) {
		t->verdict = NULL;
		tunnel_log_decision(t, 0,
		    policy_reason_str(POLICY_REASON_UNRESOLVABLE));
		tunnel_answer(t, PROTO_CODE_TIMEOUT);
	} else if (t->state == T_PEEKING) {
		/* Allowed, but no first bytes came to say what it is. */
		(void)snprintf(t->detail, sizeof(t->detail),
		    "no first bytes in time");
		tunnel_log_decision(t, 0, "timeout");
	}
	tunnel_finish(t, "timeout"); /* no ClientHello in time */
}

static void
tunnel_start_decide(evutil_socket_t fd, short what, void *arg)
{
	struct tunnel *t = arg;
	const struct conf_instance *ci;
	enum policy_transport tr;
	struct decide_lookup lk;
	struct timeval tv;
	unsigned idle, life;
	uint64_t d;

	if ((t->conf = confstate_get_for(&t->b->conf, t->instance)) == NULL) {
		tunnel_log_decision(t, 0, "policy-unavailable");
		tunnel_answer(t, PROTO_CODE_UNAVAILABLE);
		tunnel_finish(t, "unavailable");
		return;
	}
	ci = conf_instance_find(t->conf->snap, t->instance);
	t->perms = ci != NULL ? ci->policy.permissions : 0;
	t->between_ms = t->conf->snap->between_bytes_timeout_ms;
	/* A long-lived stream: the entry's or [limits]' maximum lifetime
	 * (its idle timer stays between_bytes_timeout_ms). */
	conf_stream_limits(t->conf->snap, ci, &idle, &life);
	t->end_ms = t->start_ms + life;
	d = t->conf->snap->connect_timeout_ms;
	t->deadline_ms = t->start_ms + d;
	tv.tv_sec = (time_t)(d / 1000);
	tv.tv_usec = (suseconds_t)(d % 1000) * 1000;
	(void)evtimer_add(t->timer, &tv);
	/* A tls-tunnel may be either permission's; the host is decided
	 * under the one the instance has (http_client first). */
	tr = (t->perms & POLICY_PERM_HTTP_CLIENT) ?
	    POLICY_TRANSPORT_HTTP :
	    POLICY_TRANSPORT_TLS;
	memset(&lk, 0, sizeof(lk));
	t->dns = broker_dns_hold(t->b);
	lk.resolver = t->dns != NULL ? broker_dns_resolver(t->dns) : NULL;
	lk.tag = t->instance;
	if (decide_run(&t->decide, tr, &t->dest, tunnel_policy, t, &lk,
		tunnel_decide_cb, t)) {
		broker_dns_release(t->dns);
		t->dns = NULL;
		tunnel_decided(t, decide_result(&t->decide));
	}
}

int
tunnel_start(struct broker *b, const char *instance, struct bufferevent *bev,
    const struct policy_dest *dest, tunnel_done_fn done, void *arg,
    struct tunnel **ret)
{
	struct tunnel *t;

	if ((t = calloc(1, sizeof(*t))) == NULL)
		return EGRESS_ERR_NOMEM;
	t->b = b;
	(void)snprintf(t->instance, sizeof(t->instance), "%s", instance);
	t->cl = bev;
	t->dest = *dest;
	t->kind = "tunnel";
	t->done = done;
	t->arg = arg;
	t->start_ms = now_ms();
	t->start_us = broker_now_us();
	b->request_seq++;
	(void)snprintf(t->id, sizeof(t->id), "%s-%llu", b->id_prefix,
	    (unsigned long long)b->request_seq);
	t->timer = evtimer_new(b->base, tunnel_timer_cb, t);
	t->start_ev = event_new(b->base, -1, 0, tunnel_start_decide, t);
	t->done_ev = event_new(b->base, -1, 0, tunnel_done_cb, t);
	if (t->timer == NULL || t->start_ev == NULL || t->done_ev == NULL) {
		if (t->timer != NULL)
			event_free(t->timer);
		if (t->start_ev != NULL)
			event_free(t->start_ev);
		if (t->done_ev != NULL)
			event_free(t->done_ev);
		free(t);
		return EGRESS_ERR_NOMEM;
	}
	event_active(t->start_ev, EV_TIMEOUT, 1);
	bufferevent_setcb(bev, NULL, NULL, tunnel_cl_event, t);
	(void)bufferevent_disable(bev, EV_READ);
	*ret = t;
	return 0;
}

const struct policy_dest *
tunnel_inspect_dest(const struct tunnel *t)
{
	return t->inspected ? &t->dest : NULL;
}

uint64_t
tunnel_end_ms(const struct tunnel *t)
{
	return t->end_ms;
}

int
tunnel_is_done(const struct tunnel *t)
{
	return t->state == T_DONE;
}

void
tunnel_free(struct tunnel *t)
{
	if (t == NULL)
		return;
	/* Closed with its connection (the instance removed, the drain's
	 * end): a cut, as in tunnel_finish(). */
	if (t->state != T_DONE && t->up != NULL && !t->up_shut)
		dial_abort_on_free(t->up);
	tunnel_stop(t);
	tunnel_log_close(t, "cancelled");
	confref_unref(t->conf);
	event_free(t->timer);
	event_free(t->start_ev);
	event_free(t->done_ev);
	free(t);
}
