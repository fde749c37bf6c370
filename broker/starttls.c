/* SPDX-License-Identifier: ISC */
/*
 * The STARTTLS upgrade of a tcp stream (see starttls.h): the guest's
 * request holds the relay until every guest byte before it was written
 * and nothing undelivered came from the upstream; then the plain
 * bufferevent gives up its socket (without closing it) to a TLS
 * bufferevent made by dial_tls_client(), whose verified handshake hands
 * it back to the relay. The relay's idle timeout and lifetime run all
 * along; the hold and the handshake together have their own bound, the
 * stream's connect timeout, and the handshake takes a unit of the
 * instance's fair share of TLS handshakes.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include <egress/error.h>

#include "broker/broker.h"
#include "broker/confstate.h"
#include "broker/net/dial.h"
#include "broker/net/share.h"
#include "broker/relay.h"
#include "broker/request_int.h"
#include "broker/starttls.h"
#include "broker/tlsprof.h"
#include "proto/proto.h"

struct starttls {
	struct bufferevent *bev; /* the handshake, once started */
	struct event *timer;	 /* the bound of the hold and handshake */
	int handshaking;	 /* holds a unit of the handshake share */
};

static const struct timeval zero_tv = { 0, 0 };

static void
starttls_bev_free_cb(evutil_socket_t fd, short what, void *arg)
{
	bufferevent_free(arg);
}

/* Free bev from the loop: possibly inside one of its callbacks. The
 * upgrade did not complete, so the stream fails: reset the upstream. */
static void
starttls_bev_free(struct request *r, struct bufferevent *bev)
{
	dial_abort_on_free(bev);
	bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
	(void)bufferevent_disable(bev, EV_READ | EV_WRITE);
	if (event_base_once(r->b->base, -1, EV_TIMEOUT, starttls_bev_free_cb,
		bev, &zero_tv) != 0)
		bufferevent_free(bev);
}

void
starttls_cancel(struct request *r)
{
	struct starttls *t = r->stls;

	if (t == NULL)
		return;
	r->stls = NULL;
	if (t->handshaking)
		share_release(r->b->tls_share, request_instance(r), 1);
	if (t->bev != NULL)
		starttls_bev_free(r, t->bev);
	if (t->timer != NULL)
		event_free(t->timer);
	free(t);
}

/* The upgrade failed (reason for the close event): the stream ends. */
static void
starttls_fail(struct request *r, const char *reason, int err)
{
	r->starttls = reason;
	request_fail(r, err); /* cancels the upgrade */
}

static void
starttls_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	starttls_fail(arg, STARTTLS_TIMEOUT, EGRESS_ERR_TIMEOUT);
}

/* The handshake ended: answer the guest and relay over TLS, or fail. */
static void
starttls_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct request *r = arg;
	struct starttls *t = r->stls;
	struct proto_msg m;

	if (!(what & BEV_EVENT_CONNECTED)) {
		/* An alert, a certificate that does not verify for the
		 * host, plaintext where a record was due, or the end. */
		starttls_fail(r, STARTTLS_TLS, EGRESS_ERR_TLS_FAILED);
		return;
	}
	bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
	(void)bufferevent_disable(bev, EV_READ | EV_WRITE);
	t->bev = NULL;
	starttls_cancel(r); /* the timer */
	r->starttls = STARTTLS_UPGRADED;
	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_STARTTLS;
	m.stream = r->st.id;
	m.starttls.tls_profile.ptr = r->tls_profile;
	m.starttls.tls_profile.len = strlen(r->tls_profile);
	if (r->g.ops->send(r->g.ctx, &r->st, &m) != 0) {
		dial_abort_on_free(bev);
		bufferevent_free(bev);
		request_fail(r, EGRESS_ERR_UNAVAILABLE);
		return;
	}
	/* Takes bev, also on failure. */
	if (relay_resume(r->relay, bev) != 0)
		request_fail(r, EGRESS_ERR_UNAVAILABLE);
}

/* Take the quiet connection's socket and start the handshake on it. */
static void
starttls_switch(struct request *r)
{
	struct starttls *t = r->stls;
	struct bufferevent *plain;
	struct dial_tls *tls = NULL;
	int err, fd;

	if (r->conf == NULL ||
	    tlsprof_select(r->b, r->conf->snap, r->ci, r->tls_profile,
		strlen(r->tls_profile), &tls, &r->tls_gen) != 0) {
		starttls_fail(r, STARTTLS_TLS, EGRESS_ERR_TLS_FAILED);
		return;
	}
	/* A handshake costs the broker CPU: it takes a unit of the
	 * instance's fair share, as a dialed one does. */
	if (r->b->tls_share != NULL) {
		if ((err = share_acquire(r->b->tls_share, request_instance(r),
			 NULL, 1)) != 0) {
			starttls_fail(r, STARTTLS_BUDGET, err);
			return;
		}
		t->handshaking = 1;
	}
	plain = relay_take_upstream(r->relay);
	fd = plain != NULL ? bufferevent_getfd(plain) : -1;
	if (fd < 0) {
		if (plain != NULL)
			starttls_bev_free(r, plain);
		starttls_fail(r, STARTTLS_ENDED, EGRESS_ERR_TLS_FAILED);
		return;
	}
	/* The socket changes hands: the plain bufferevent must not close
	 * it when it is freed. */
	(void)bufferevent_setfd(plain, -1);
	starttls_bev_free(r, plain);
	if (dial_tls_client(r->b->base, tls, &r->dest.host, fd, &t->bev) !=
	    0) {
		t->bev = NULL; /* fd closed */
		starttls_fail(r, STARTTLS_TLS, EGRESS_ERR_UNAVAILABLE);
		return;
	}
	bufferevent_setcb(t->bev, NULL, NULL, starttls_event_cb, r);
	if (bufferevent_enable(t->bev, EV_READ | EV_WRITE) != 0)
		starttls_fail(r, STARTTLS_TLS, EGRESS_ERR_UNAVAILABLE);
}

/* The relay's hold ended. */
static void
starttls_held(void *arg, enum relay_hold_verdict v)
{
	struct request *r = arg;

	switch (v) {
	case RELAY_HOLD_QUIET:
		starttls_switch(r);
		return;
	case RELAY_HOLD_INJECTED:
		/* Never delivered: not as plaintext, not as if it had come
		 * over TLS. */
		starttls_fail(r, STARTTLS_INJECTION, EGRESS_ERR_TLS_FAILED);
		return;
	default:
		starttls_fail(r, STARTTLS_ENDED, EGRESS_ERR_TLS_FAILED);
		return;
	}
}

/* Arm the bound of the hold and the handshake: the connect timeout. */
static int
starttls_arm(struct request *r)
{
	struct timeval tv;
	uint64_t ms;

	ms = r->deadline_ms > r->start_ms ?
	    r->deadline_ms - r->start_ms :
	    DIAL_TIMEOUT_DEFAULT_MS;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	if ((r->stls->timer = evtimer_new(r->b->base, starttls_timer_cb, r)) ==
	    NULL)
		return -1;
	return evtimer_add(r->stls->timer, &tv);
}

void
request_on_starttls(struct request *r, const struct proto_msg *m)
{
	const struct proto_str *p = &m->starttls.tls_profile;
	const struct conf_instance *ci = NULL;
	struct confref *now;

	if (r->phase == PHASE_DONE || r->st.state == PROTO_STREAM_CLOSED)
		return; /* it failed already: crossed */
	if (r->transport != PROTO_TRANSPORT_TCP || r->phase != PHASE_RELAY ||
	    r->relay == NULL || r->conf == NULL || r->stls != NULL) {
		r->detail = "STARTTLS on a stream that is not a relaying tcp "
			    "stream";
		starttls_fail(r, STARTTLS_REFUSED, EGRESS_ERR_INVALID_REQUEST);
		return;
	}
	/* The profile: one the entry lists in the configuration in force
	 * now, as for a tls stream opened now (a reload since the stream
	 * opened may have unlisted it). */
	now = confstate_get_for(&r->b->conf, request_instance(r));
	if (now != NULL)
		ci = conf_instance_find(now->snap, request_instance(r));
	if (now != NULL && tlsprof_check(now->snap, ci, p->ptr, p->len) != 0) {
		confref_unref(now);
		r->detail = "the entry does not list this tls profile";
		starttls_fail(r, TLSPROF_REASON_NOT_ALLOWED,
		    EGRESS_ERR_INVALID_REQUEST);
		return;
	}
	if (p->len > 0)
		memcpy(r->tls_profile, p->ptr, p->len);
	r->tls_profile[p->len] = '\0';
	/* The grant with the profile, decided again on that configuration
	 * (broken files fail it as unavailable, as they fail a new stream);
	 * the handshake's context comes from it. */
	if (now == NULL || !request_still_allowed(r)) {
		confref_unref(now);
		starttls_fail(r, STARTTLS_DENIED,
		    now == NULL ? EGRESS_ERR_UNAVAILABLE :
				  request_revoked_err(r));
		return;
	}
	confref_unref(r->conf);
	r->conf = now;
	r->ci = ci;
	/* Until the upgrade's outcome: a stream that ends meanwhile. */
	r->starttls = STARTTLS_ABORTED;
	if ((r->stls = calloc(1, sizeof(*r->stls))) == NULL ||
	    starttls_arm(r) != 0) {
		request_fail(r, EGRESS_ERR_UNAVAILABLE);
		return;
	}
	relay_hold(r->relay, starttls_held, r); /* may finish r */
}
