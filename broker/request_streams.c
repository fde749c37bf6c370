/* SPDX-License-Identifier: ISC */
/*
 * Which of egressd's long-lived requests stay (see request.h): the
 * decision made again for a connection that came up or a stream that a
 * reload finds, the list of relaying streams that a reload walks, and
 * the streams kept lingering after their guest left.
 */
#include <stdio.h>
#include <string.h>

#include <egress/error.h>

#include "broker/broker.h"
#include "broker/guest.h"
#include "broker/relay.h"
#include "broker/request.h"
#include "broker/request_int.h"
#include "broker/revoke.h"
#include "broker/wsock.h"
#include "conf/conf.h"
#include "policy/policy.h"

/* ---- The decision made again ------------------------------------------- */

int
request_still_allowed(struct request *r)
{
	const char *reason = "policy-unavailable";
	struct confref *now;
	int ok = 0;

	if ((now = confstate_get_for(&r->b->conf, request_instance(r))) !=
	    NULL) {
		ok = revoke_is_allowed(r->b, now->snap, request_instance(r),
		    request_policy_transport(r), &r->dest, &r->connected,
		    r->tls_profile, &reason);
		confref_unref(now);
	}
	if (!ok)
		r->revoked = reason;
	return ok;
}

int
request_revoked_err(const struct request *r)
{
	return r->revoked != NULL &&
		strcmp(r->revoked, "policy-unavailable") == 0 ?
	    EGRESS_ERR_UNAVAILABLE :
	    EGRESS_ERR_DENIED;
}

int
request_connected_check(struct request *r, struct bufferevent *bev,
    const struct policy_addr *used)
{
	r->connected = *used;
	r->has_connected = 1;
	/* A reload while connecting passed this stream by (only relaying
	 * ones are revoked): decide again on the snapshot in force now. */
	if (request_still_allowed(r))
		return 0;
	r->up = bev; /* closed with the upstream side */
	request_fail(r, request_revoked_err(r));
	return -1;
}

void
request_relays_link(struct request *r)
{
	r->rnext = r->b->relays;
	if (r->rnext != NULL)
		r->rnext->rprev = r;
	r->b->relays = r;
}

/* ---- Lingering streams ------------------------------------------------- */

static void
request_linger_unlink(struct request *r)
{
	if (r->lprev != NULL)
		r->lprev->lnext = r->lnext;
	else
		r->b->lingering = r->lnext;
	if (r->lnext != NULL)
		r->lnext->lprev = r->lprev;
	r->lnext = r->lprev = NULL;
}

/* A lingering stream is over (logged): it frees itself. */
static void
request_linger_done(void *arg, struct request *r)
{
	request_linger_unlink(r);
	request_free(r);
}

int
request_linger(struct request *r)
{
	if (r->phase != PHASE_RELAY ||
	    (r->ws == NULL && (r->relay == NULL || !r->body_ended)))
		return 0;
	(void)snprintf(r->linger_instance, sizeof(r->linger_instance), "%s",
	    request_instance(r));
	r->g.ops = &guest_gone_ops;
	r->g.ctx = r->linger_instance;
	r->done = request_linger_done;
	r->done_arg = NULL;
	r->lprev = NULL;
	r->lnext = r->b->lingering;
	if (r->lnext != NULL)
		r->lnext->lprev = r;
	r->b->lingering = r;
	if (r->ws != NULL)
		wsock_detach(r->ws, 1001); /* may finish and free r */
	else
		relay_detach(r->relay); /* may finish and free r */
	return 1;
}

void
request_linger_abort_all(struct broker *b)
{
	struct request *r, *next;

	r = b->lingering;
	b->lingering = NULL;
	for (; r != NULL; r = next) {
		next = r->lnext;
		r->lnext = r->lprev = NULL;
		request_abort(r); /* never calls done: the list stays */
	}
}

/* ---- Revocation at a reload -------------------------------------------- */

size_t
request_revoke_streams(struct broker *b, const struct conf_snapshot *s)
{
	struct request *r, *next;
	const char *reason;
	size_t n = 0;

	for (r = b->relays; r != NULL; r = next) {
		next = r->rnext;
		if (r->revoked != NULL || r->ws_left)
			continue; /* a websocket closing already */
		if (revoke_is_allowed(b, s, request_instance(r),
			request_policy_transport(r), &r->dest, &r->connected,
			r->tls_profile, &reason))
			continue;
		r->revoked = reason;
		if (!request_ws_leave(r, 1008)) /* may free r */
			request_fail(r,
			    request_revoked_err(r)); /* may free r */
		n++;
	}
	return n;
}
