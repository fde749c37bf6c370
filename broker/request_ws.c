/* SPDX-License-Identifier: ISC */
/*
 * Websocket streams of the request pipeline (see request.h and
 * wsock.h): the REQUEST's checks (protocol version 2, ws or wss, GET,
 * the guest's headers), then, once the pinned connection is up, the
 * broker's WebSocket client, with the guest's messages and controls
 * passed to it. The decision, the lease, the dial and the revocation at
 * a reload are the pipeline's, as for tcp and tls streams.
 */
#include <stdio.h>
#include <string.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include <egress/error.h>

#include "broker/broker.h"
#include "broker/guest.h"
#include "broker/metrics.h"
#include "broker/net/http1_head.h"
#include "broker/net/http1_req.h"
#include "broker/request.h"
#include "broker/request_int.h"
#include "broker/wsock.h"
#include "conf/conf.h"
#include "policy/policy.h"
#include "proto/proto.h"

static int
str_is(const struct proto_str *s, const char *lit)
{
	return s->len == strlen(lit) && memcmp(s->ptr, lit, s->len) == 0;
}

/* Refuse r before its destination parsed (decision on the authority as
 * written). */
static int
ws_refuse(struct request *r, const struct proto_msg *m, const char *detail)
{
	const struct proto_request *rq = &m->request;

	r->detail = detail;
	request_log_decision(r, rq->authority.ptr, rq->authority.len, 0, 0,
	    "invalid-request");
	request_fail(r, EGRESS_ERR_INVALID_REQUEST);
	return -1;
}

int
request_check_ws(struct request *r, const struct proto_msg *m)
{
	static struct http1_header in[PROTO_HEADERS_MAX];
	static struct http1_header kept[PROTO_HEADERS_MAX];
	static char detail[sizeof(((struct policy_err *)0)->msg) + 32];
	const struct proto_request *rq = &m->request;
	const struct proto_conn *pc = r->g.ops->proto(r->g.ctx);
	struct http1_head head, out;
	struct policy_err perr;
	size_t i;

	if (pc->version < PROTO_VERSION_WS)
		return ws_refuse(r, m, "websocket needs protocol version 2");
	if (!(str_is(&rq->scheme, "ws") || str_is(&rq->scheme, "wss")))
		return ws_refuse(r, m, "scheme not supported");
	if (m->flags & PROTO_FLAG_END_STREAM)
		return ws_refuse(r, m,
		    "a websocket request does not end its stream");
	r->https = str_is(&rq->scheme, "wss");
	if (rq->authority.len == 0 ||
	    policy_authority_parse(rq->authority.ptr, rq->authority.len,
		r->https ? 443 : 80, &r->dest, &perr) != 0)
		return ws_refuse(r, m, "authority does not parse");
	memcpy(r->dest.scheme, r->https ? "wss" : "ws",
	    r->https ? sizeof("wss") : sizeof("ws"));
	if (!str_is(&rq->method, "GET")) {
		request_invalid(r, "a websocket request's method is GET");
		return -1;
	}
	http1_req_head_of(m, in, &head);
	for (i = 0; i < head.nheaders; i++)
		if (wsock_header_is_refused(&in[i]) != 0) {
			request_invalid(r,
			    "a header the websocket handshake sets itself");
			return -1;
		}
	if (head.path == NULL) {
		request_invalid(r, "no path");
		return -1;
	}
	perr.msg[0] = '\0';
	if (http1_request_check(&r->dest, &head, kept, PROTO_HEADERS_MAX, &out,
		&perr) != 0) {
		(void)snprintf(detail, sizeof(detail), "%s",
		    perr.msg[0] ? perr.msg : "invalid head");
		request_invalid(r, detail);
		return -1;
	}
	if (http1_head_copy(&out, &r->head, &r->head_mem) != 0) {
		request_invalid(r, "out of memory");
		return -1;
	}
	return 0;
}

/* The websocket is over: closed both ways (err 0), or it failed. */
static void
request_ws_end(void *arg, int err)
{
	struct request *r = arg;

	r->b->activity++;
	if (r->ws != NULL && r->status == 0)
		r->status = wsock_status(r->ws);
	if (err != 0) {
		request_fail(r, err);
		return;
	}
	request_upstream_done(r);
	request_log_close(r,
	    r->g.ops == &guest_gone_ops || r->ws_left ? "cancelled" : NULL);
	request_release_exchange(r);
	if (r->g.ops == &guest_gone_ops)
		r->st.state = PROTO_STREAM_CLOSED; /* nobody to wait for */
	request_settle(r);
}

void
request_begin_ws(struct request *r, struct bufferevent *bev,
    const struct policy_addr *used)
{
	struct wsock_params p;
	char host[PROTO_AUTHORITY_MAX + 16];
	uint64_t t = broker_now_ms();

	if (request_connected_check(r, bev, used) != 0)
		return;
	if (http1_format_host(&r->dest, host, sizeof(host)) < 0) {
		r->up = bev;
		request_fail(r, EGRESS_ERR_INVALID_REQUEST);
		return;
	}
	r->phase = PHASE_RELAY;
	if (r->timer != NULL)
		(void)evtimer_del(r->timer);
	memset(&p, 0, sizeof(p));
	p.base = r->b->base;
	p.b = r->b;
	p.g = &r->g;
	p.st = &r->st;
	p.host = host;
	p.path = r->head.path;
	p.path_len = r->head.path_len;
	p.headers = r->head.headers;
	p.nheaders = r->head.nheaders;
	p.handshake_ms = (unsigned)r->first_byte_ms;
	p.idle_ms = r->idle_ms;
	p.lifetime_ms = r->total_ms > t ? (unsigned)(r->total_ms - t) : 1;
	p.max_message = r->conf != NULL ?
	    r->conf->snap->websocket_max_message_bytes :
	    WSOCK_MAX_MESSAGE_DEFAULT;
	p.activity = &r->b->activity;
	/* Takes bev, also on failure. */
	if (wsock_start(&p, bev, request_ws_end, r, &r->ws) != 0) {
		r->ws = NULL;
		request_fail(r, EGRESS_ERR_UNAVAILABLE);
		return;
	}
	request_relays_link(r);
	/* Connected while the broker drains: closed once open. */
	if (r->b->draining) {
		r->close_reason = "draining";
		(void)wsock_close(r->ws, 1001);
	}
}

int
request_ws_leave(struct request *r, uint16_t code)
{
	if (r->phase != PHASE_RELAY || r->ws == NULL || !wsock_is_open(r->ws))
		return 0;
	/* Revoked: the guest learns it now, as for every stream; the
	 * upstream gets close 1008 and a bounded wait. */
	if (r->revoked != NULL) {
		uint32_t wire = proto_err_to_wire(request_revoked_err(r));

		metrics_upstream_error(r->b->metrics, proto_code_name(wire));
		if (r->st.state != PROTO_STREAM_CLOSED)
			(void)r->g.ops->send_error(r->g.ctx, &r->st, wire);
	}
	r->ws_left = r->revoked == NULL;
	r->st.state = PROTO_STREAM_CLOSED; /* nothing more for the guest */
	wsock_detach(r->ws, code);	   /* may finish r */
	return 1;
}

size_t
request_ws_close_all(struct broker *b, uint16_t code, const char *reason)
{
	struct request *r, *next;
	size_t n = 0;

	for (r = b->relays; r != NULL; r = next) {
		next = r->rnext;
		if (r->ws == NULL || r->phase != PHASE_RELAY ||
		    r->close_reason != NULL)
			continue;
		r->close_reason = reason;
		if (wsock_close(r->ws, code) == 0) /* may free r */
			n++;
		else
			r->close_reason = NULL;
	}
	return n;
}

void
request_on_message(struct request *r, const uint8_t *data, size_t len,
    uint8_t flags)
{
	if (r->phase == PHASE_RELAY && r->ws != NULL && wsock_is_open(r->ws)) {
		wsock_guest_data(r->ws, data, len, flags); /* may finish r */
		return;
	}
	if (r->phase == PHASE_DONE || r->phase == PHASE_FLUSHING ||
	    r->st.state == PROTO_STREAM_CLOSED) {
		/* The broker's side is over: discard and credit. */
		r->g.ops->consumed(r->g.ctx, &r->st, len);
		return;
	}
	/* A message before the handshake completed. */
	r->g.ops->consumed(r->g.ctx, &r->st, len);
	r->detail = "a websocket message before the RESPONSE";
	request_fail(r, EGRESS_ERR_INVALID_REQUEST);
}

void
request_on_ws_control(struct request *r, const struct proto_msg *m)
{
	if (r->phase == PHASE_RELAY && r->ws != NULL && wsock_is_open(r->ws)) {
		wsock_guest_control(r->ws, m); /* may finish r */
		return;
	}
	if (m->ws_control.opcode == PROTO_WS_CLOSE &&
	    r->st.state == PROTO_STREAM_CLOSED && r->phase == PHASE_DONE) {
		r->done(r->done_arg, r);
		return;
	}
	if (r->phase == PHASE_DONE || r->st.state == PROTO_STREAM_CLOSED)
		return;
	r->detail = "a websocket control before the RESPONSE";
	request_fail(r, EGRESS_ERR_INVALID_REQUEST);
}
