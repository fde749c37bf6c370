/* SPDX-License-Identifier: ISC */
/*
 * The HTTP/1.1 forward-proxy front of egressd (see proxy.h): a client
 * connection read and written through one bufferevent, its requests
 * parsed with http1_req and handed, one at a time, to request.c through
 * the guest seam. The front keeps a protocol state (struct proto_conn)
 * exactly as a session does, so that the request's frames pass the same
 * state table and flow control: the REQUEST and body DATA it receives
 * are synthesised from the HTTP request, the RESPONSE, DATA and ERROR it
 * sends are written to the client as HTTP/1.1, and the window it grants
 * back follows what the client socket took.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <egress/error.h>

#include "broker/broker.h"
#include "broker/confstate.h"
#include "broker/guest.h"
#include "broker/inspect.h"
#include "broker/log.h"
#include "broker/net/http1_head.h"
#include "broker/net/evmove.h"
#include "broker/net/http1_req.h"
#include "broker/net/readmore.h"
#include "broker/net/share.h"
#include "broker/proxy.h"
#include "broker/proxy_port.h"
#include "broker/proxy_auth.h"
#include "broker/proxy_refusal.h"
#include "broker/request.h"
#include "broker/session.h"
#include "broker/tunnel.h"
#include "conf/conf.h"
#include "proto/proto.h"

/* Input kept unread: a whole head, and a little of what follows. */
#define PROXY_IN_HIGH (HTTP1_HEAD_MAX + 4096)

enum proxy_state {
	PX_HEAD = 0, /* waiting for a request head */
	PX_BODY,     /* the request's body is being read */
	PX_WAIT,     /* the response is being written */
	PX_TUNNEL,   /* a CONNECT tunnel owns the connection */
};

enum proxy_framing {
	PX_NOBODY = 0, /* HEAD, 204, 304 */
	PX_LENGTH,     /* the upstream's Content-Length */
	PX_CHUNKED,
	PX_UNTIL_CLOSE, /* an HTTP/1.0 client, no length */
};

struct proxy_conn {
	struct proxy_conn *next, *prev;
	struct broker *b;
	struct bufferevent *bev;
	/* A plain socket's output: written straight to the socket once the
	 * loop iteration's callbacks ran (proxy_flush_cb), through the
	 * bufferevent only what the socket refused. NULL under TLS. */
	struct evbuffer *stage;
	struct event *flush_ev;
	int flush_pending;
	char instance[CONF_NAME_MAX + 1];
	unsigned flags;
	int shared;
	int preauth; /* a port's, no request authorized yet: no share */
	struct broker_mem mem; /* credit for queued output */
	struct proto_conn pc;
	uint32_t last_id;
	struct guest guest;
	struct http1_req_parser *parser;
	struct evbuffer *body;	  /* decoded body of one parse step */
	struct event *defer;	  /* go on from the loop */
	struct event *head_timer; /* the head being read is due */
	enum proxy_state state;
	struct request *r;  /* the request being served */
	struct tunnel *tun; /* after CONNECT */

	/* The current exchange. */
	int head_method;
	int minor;
	int client_keep; /* the client allows another request */
	int body_done;
	int resp_started, resp_done;
	enum proxy_framing framing;
	int close_after; /* close once the output is flushed */
	int closing;	 /* no more requests, no more input */
	int eof;	 /* the client half-closed: what it sent is served */
	int held;	 /* the next head waits for the client to read
			    answers (proxy_out_held) */
	int read_off;	 /* input full, nothing to take: not read
			    (proxy_read_gate) */

	struct http1_req q; /* the head parsed last */
	size_t head_seen;   /* bytes of the head being read looked at */

	/* PROXY_INSPECT: the authority of every request, HOST[:PORT] of
	 * the tunnel's https:// origin. */
	char authority[POLICY_NAME_MAX + 16];
	int inspecting;	 /* the tunnel ended for inspection: hand over */
	int handshaking; /* PROXY_INSPECT: holds a unit of the handshake
			    share until the client's handshake is done */
	/* PROXY_INSPECT: watches the TLS records queued to the socket,
	 * which must be written before a close. */
	struct evbuffer_cb_entry *under_cb;
	/* PROXY_INSPECT of a port's tunnel: its CONNECT's credentials,
	 * checked at every request, and the end of the tunnel's lifetime. */
	struct proxy_auth_held *held_auth;
	struct event *end_ev;
};

static void proxy_free(struct proxy_conn *c);
static void proxy_inspect(struct proxy_conn *c);
static void proxy_schedule(struct proxy_conn *c);
static void proxy_head_arm(struct proxy_conn *c);
static int proxy_take_share(struct broker *b, const char *instance);
static void proxy_read_cb(struct bufferevent *bev, void *arg);
static void proxy_write_cb(struct bufferevent *bev, void *arg);
static void proxy_event_cb(struct bufferevent *bev, short what, void *arg);

/* ---- Output ------------------------------------------------------------ */

/* Where the front's own output goes: the stage, written once the
 * current callbacks ran; under TLS, and while a tunnel owns the
 * connection (it writes the bufferevent itself), the bufferevent. */
static struct evbuffer *
proxy_out(struct proxy_conn *c)
{
	if (c->stage == NULL || c->tun != NULL)
		return bufferevent_get_output(c->bev);
	if (!c->flush_pending) {
		c->flush_pending = 1;
		event_active(c->flush_ev, EV_WRITE, 0);
	}
	return c->stage;
}

/* Bytes not yet written to the socket: the stage, the output, and
 * under TLS the records made of it. */
static size_t
proxy_out_len(struct proxy_conn *c)
{
	struct bufferevent *u = bufferevent_get_underlying(c->bev);

	return evbuffer_get_length(bufferevent_get_output(c->bev)) +
	    (c->stage != NULL ? evbuffer_get_length(c->stage) : 0) +
	    (u != NULL ? evbuffer_get_length(bufferevent_get_output(u)) : 0);
}

/* Hand what is staged to the bufferevent, behind what it holds: before
 * anything else writes it (a tunnel). */
static int
proxy_unstage(struct proxy_conn *c)
{
	if (c->stage == NULL || evbuffer_get_length(c->stage) == 0)
		return 0;
	return evbuffer_add_buffer(bufferevent_get_output(c->bev), c->stage);
}

/*
 * Answers of earlier requests wait for the client beyond PROXY_OUT_LOW:
 * the next head is not read until it has read them (the write callback,
 * or the TLS records' buffer draining, looks again). Else a client that
 * sends requests the front answers itself (refusals) and reads nothing
 * would have the answers pile up without bound.
 */
static int
proxy_out_held(struct proxy_conn *c)
{
	c->held = proxy_out_len(c) >= PROXY_OUT_LOW;
	return c->held;
}

/* Under TLS the records count too (the filter keeps them below
 * MINT_UNDER_HIGH, so the plaintext waiting is what pushes back). */
static int
proxy_has_room(struct proxy_conn *c)
{
	size_t n = proxy_out_len(c);

	return n < PROXY_OUT_HIGH &&
	    broker_mem_room(c->b, c->instance, &c->mem, n, PROXY_OUT_HIGH);
}

/* An answer could not be written whole (no memory): it ends cut short
 * with the connection, so that nothing after it is read as a part of it
 * and no answer of the front's own follows a part of one. */
static int
px_lost(struct proxy_conn *c)
{
	c->resp_started = 1;
	c->close_after = 1;
	c->closing = 1;
	c->resp_done = 1;
	return EGRESS_ERR_NOMEM;
}

/*
 * Write a complete response of the front's own: status, a short text
 * body, the X-Egress-Error name, and Connection: close when the
 * connection ends after it.
 */
static void
proxy_reply(struct proxy_conn *c, unsigned status, const char *error,
    const char *text)
{
	struct evbuffer *out = proxy_out(c);
	size_t n = strlen(text) + 1;

	if (!c->client_keep || !c->body_done)
		c->close_after = 1;
	if (evbuffer_add_printf(out,
		"HTTP/1.1 %u %s\r\n"
		"Content-Type: text/plain\r\n"
		"Content-Length: %zu\r\n"
		"X-Egress-Error: %s\r\n"
		"%s%s%s%s"
		"\r\n",
		status, http1_req_reason(status), n, error,
		status == 429 ? "Retry-After: 1\r\n" : "",
		status == 407 ?
		    "Proxy-Authenticate: Basic realm=\"egressd\"\r\n" :
		    "",
		status == 405 ? "Allow: GET, HEAD, POST, PUT, DELETE, "
				"OPTIONS, TRACE, PATCH, CONNECT\r\n" :
				"",
		c->close_after	  ? "Connection: close\r\n" :
		    c->minor == 0 ? "Connection: keep-alive\r\n" :
				    "") < 0 ||
	    (!c->head_method && evbuffer_add_printf(out, "%s\n", text) < 0))
		(void)px_lost(c);
	c->resp_started = 1;
	c->resp_done = 1;
}

/* Log a refusal the front made itself (no request reached the pipeline). */
static void
proxy_log_refusal(struct proxy_conn *c, unsigned status, const char *error,
    const char *detail)
{
	if (c->preauth)
		proxy_refusal_log_unauth(c->b->base, c->instance, status,
		    error, detail);
	else
		proxy_refusal_log(c->instance, status, error, detail);
}

/* Refuse the request being read: reply, log, and close after. */
static void
proxy_refuse(struct proxy_conn *c, unsigned status, const char *error,
    const char *detail)
{
	proxy_log_refusal(c, status, error, detail);
	c->body_done = 0; /* its body, if any, is never read */
	proxy_reply(c, status, error,
	    proto_code_message(PROTO_CODE_INVALID_REQUEST));
	c->closing = 1;
	proxy_schedule(c);
}

/* ---- The guest seam: what a request sees of the client ---------------- */

static const char *
px_instance(void *ctx)
{
	return ((struct proxy_conn *)ctx)->instance;
}

static struct proto_conn *
px_proto(void *ctx)
{
	return &((struct proxy_conn *)ctx)->pc;
}

static int
headers_have(const struct proto_msg *m, const char *name)
{
	struct http1_header h;
	size_t i;

	for (i = 0; i < m->nheaders; i++) {
		h.name = m->headers[i].name.ptr;
		h.name_len = m->headers[i].name.len;
		if (http1_header_is(&h, name))
			return 1;
	}
	return 0;
}

/* The response head: status line, the upstream's end-to-end headers, and
 * this connection's framing. */
static int
px_write_head(struct proxy_conn *c, const struct proto_msg *m)
{
	struct evbuffer *out = proxy_out(c);
	unsigned status = m->response.status;
	size_t i;

	if (c->head_method || status == 204 || status == 304)
		c->framing = PX_NOBODY;
	else if (headers_have(m, "Content-Length"))
		c->framing = PX_LENGTH;
	else if (c->minor >= 1)
		c->framing = PX_CHUNKED;
	else
		c->framing = PX_UNTIL_CLOSE;
	/* A body still arriving when the answer starts is not read on. */
	if (!c->client_keep || !c->body_done || c->framing == PX_UNTIL_CLOSE ||
	    c->closing)
		c->close_after = 1;
	if (evbuffer_add_printf(out, "HTTP/1.1 %u %s\r\n", status,
		http1_req_reason(status)) < 0)
		return px_lost(c);
	for (i = 0; i < m->nheaders; i++)
		if (evbuffer_add(out, m->headers[i].name.ptr,
			m->headers[i].name.len) != 0 ||
		    evbuffer_add(out, ": ", 2) != 0 ||
		    evbuffer_add(out, m->headers[i].value.ptr,
			m->headers[i].value.len) != 0 ||
		    evbuffer_add(out, "\r\n", 2) != 0)
			return px_lost(c);
	if (evbuffer_add_printf(out, "%s%s\r\n",
		c->framing == PX_CHUNKED ? "Transfer-Encoding: chunked\r\n" :
					   "",
		c->close_after	  ? "Connection: close\r\n" :
		    c->minor == 0 ? "Connection: keep-alive\r\n" :
				    "") < 0)
		return px_lost(c);
	c->resp_started = 1;
	return 0;
}

static int
px_send(void *ctx, struct proto_stream *st, const struct proto_msg *m)
{
	struct proxy_conn *c = ctx;
	int err;

	if ((err = proto_conn_send(&c->pc, st, m, NULL)) != 0)
		return err;
	if (m->type == PROTO_MSG_RESPONSE)
		return px_write_head(c, m);
	return 0;
}

/* Give back the window of n DATA bytes the client socket has taken. */
static void
px_credit(struct proxy_conn *c, struct proto_stream *st, size_t n)
{
	struct proto_msg m;

	if (n == 0)
		return;
	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_WINDOW_UPDATE;
	m.window_update.increment = (uint32_t)n;
	(void)proto_conn_recv(&c->pc, NULL, &m, NULL);
	m.stream = st->id;
	(void)proto_conn_recv(&c->pc, st, &m, NULL);
}

/* The end of the response: the terminating chunk, with trailers. */
static int
px_write_tail(struct proxy_conn *c, struct evbuffer *buf, size_t n)
{
	static struct proto_msg m;
	struct evbuffer *out = proxy_out(c);
	unsigned char *p;
	size_t i;

	if ((p = evbuffer_pullup(buf, (ssize_t)n)) == NULL ||
	    proto_frame_decode(p, n, &m, NULL) != (int)n)
		return EGRESS_ERR_INVALID;
	(void)evbuffer_drain(buf, n);
	c->resp_done = 1;
	if (c->framing != PX_CHUNKED)
		return 0;
	if (evmove_add(out, "0\r\n", 3) != 0)
		return px_lost(c);
	for (i = 0; m.type == PROTO_MSG_TRAILERS && i < m.nheaders; i++)
		if (evbuffer_add_printf(out, "%.*s: %.*s\r\n",
			(int)m.headers[i].name.len,
			(const char *)m.headers[i].name.ptr,
			(int)m.headers[i].value.len,
			(const char *)m.headers[i].value.ptr) < 0)
			return px_lost(c);
	return evmove_add(out, "\r\n", 2) == 0 ? 0 : px_lost(c);
}

static int
px_send_data(void *ctx, struct proto_stream *st, struct evbuffer *buf,
    size_t n, uint8_t flags)
{
	struct proxy_conn *c = ctx;
	struct evbuffer *out = proxy_out(c);
	struct proto_msg m;
	int err;

	if (st == NULL)
		return px_write_tail(c, buf, n);
	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_DATA;
	m.flags = flags;
	m.stream = st->id;
	m.data.len = n;
	if ((err = proto_conn_send(&c->pc, st, &m, NULL)) != 0)
		return err;
	if (c->framing == PX_NOBODY) {
		(void)evbuffer_drain(buf, n);
	} else {
		if (c->framing == PX_CHUNKED && n > 0 &&
		    evbuffer_add_printf(out, "%zx\r\n", n) < 0)
			return px_lost(c);
		if (evmove(buf, out, n) != 0)
			return px_lost(c);
		if (c->framing == PX_CHUNKED && n > 0 &&
		    evmove_add(out, "\r\n", 2) != 0)
			return px_lost(c);
	}
	/* Back-pressure is the client socket's (can_write), not a window. */
	px_credit(c, st, n);
	return 0;
}

static int
px_send_error(void *ctx, struct proto_stream *st, uint32_t code)
{
	struct proxy_conn *c = ctx;
	struct proto_msg m;
	const char *name;
	int err;

	memset(&m, 0, offsetof(struct proto_msg, headers));
	if (proto_error_init(&m, st != NULL ? st->id : 0, code) != 0)
		return EGRESS_ERR_INVALID;
	if ((err = proto_conn_send(&c->pc, st, &m, NULL)) != 0)
		return err;
	if (c->resp_started) {
		/* Cut short: the client sees an incomplete message. */
		c->close_after = 1;
		c->closing = 1;
		c->resp_done = 1;
		return 0;
	}
	name = proto_code_name(code);
	proxy_reply(c, proxy_refusal_status(code),
	    name != NULL ? name : "error", proto_code_message(code));
	return 0;
}

static void
px_consumed(void *ctx, struct proto_stream *st, size_t n)
{
	struct proxy_conn *c = ctx;
	struct proto_msg m;
	uint32_t ci = 0, si = 0;

	if (proto_conn_consumed(&c->pc, st, (uint32_t)n, &ci, &si) != 0)
		return;
	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_WINDOW_UPDATE;
	if (ci != 0) {
		m.window_update.increment = ci;
		(void)proto_conn_send(&c->pc, NULL, &m, NULL);
	}
	if (si != 0 && st != NULL) {
		m.stream = st->id;
		m.window_update.increment = si;
		(void)proto_conn_send(&c->pc, st, &m, NULL);
	}
	if (ci != 0 || si != 0)
		proxy_schedule(c); /* more body may go now */
}

static int
px_can_write(void *ctx)
{
	struct proxy_conn *c = ctx;

	return !(c->closing && c->resp_done) && proxy_has_room(c);
}

static const struct guest_ops proxy_guest_ops = {
	.instance = px_instance,
	.proto = px_proto,
	.send = px_send,
	.send_data = px_send_data,
	.send_error = px_send_error,
	.consumed = px_consumed,
	.can_write = px_can_write,
};

/* ---- Requests ---------------------------------------------------------- */

/* The request finished and its stream is closed. */
static void
proxy_request_done(void *arg, struct request *r)
{
	struct proxy_conn *c = arg;

	request_free(r);
	c->r = NULL;
	if (!c->body_done || !c->client_keep)
		c->close_after = 1;
	if (c->close_after)
		c->closing = 1;
	proxy_schedule(c);
}

/* Answer whether snapshot ref relays method m (ref NULL: no snapshot
 * in force, and the pipeline, given none, answers policy-unavailable). */
static int
proxy_method_ok(const struct confref *ref, const char *m, size_t n)
{
	if (ref == NULL)
		return 1;
	return http1_method_is_allowed(m, n,
	    (const char *const *)ref->snap->extra_methods,
	    ref->snap->nextra_methods);
}

/*
 * Turn the parsed head q into a REQUEST on the pipeline, decided with
 * snapshot ref (NULL: none in force). Return 0, or -1 when the front
 * refused it (answered, the connection closing).
 */
static int
proxy_begin(struct proxy_conn *c, const struct http1_req *q,
    struct confref *ref)
{
	static struct proto_msg m;
	struct http1_req_refusal why;
	struct request *r;
	unsigned how = 0;

	c->head_method = q->method_len == 4 &&
	    memcmp(q->method, "HEAD", 4) == 0;
	c->minor = q->minor;
	c->client_keep = q->keep_alive;
	c->body_done = !q->chunked && q->content_length <= 0;
	c->resp_started = c->resp_done = 0;
	c->framing = PX_NOBODY;
	if (!proxy_method_ok(ref, q->method, q->method_len)) {
		proxy_refuse(c, 405, "method", "method not relayed");
		return -1;
	}
	if (c->flags & PROXY_INSPECT)
		how |= HTTP1_REQ_INSPECTED;
	if (c->flags & PROXY_ORIGIN_FORM)
		how |= HTTP1_REQ_ORIGIN_OK;
	if (http1_req_message(q, how, c->authority, &m, &why) != 0) {
		proxy_refuse(c, why.status, why.error, why.detail);
		return -1;
	}
	m.stream = ++c->last_id;
	m.flags = c->body_done ? PROTO_FLAG_END_STREAM : 0;
	if ((r = request_new(c->b, &c->guest, m.stream, proxy_request_done,
		 c)) == NULL)
		return -1;
	if (proto_conn_recv(&c->pc, request_stream(r), &m, NULL) !=
	    PROTO_ACCEPT) {
		request_discard(r);
		return -1;
	}
	c->r = r;
	c->state = c->body_done ? PX_WAIT : PX_BODY;
	/* Decided with the snapshot the front's checks of this head used:
	 * one look at the files per request. May finish r:
	 * proxy_request_done. */
	request_start_with(r, &m, ref);
	if (c->r != NULL && !c->resp_started && !c->body_done &&
	    q->expect_continue && c->minor >= 1)
		(void)evmove_add(proxy_out(c), "HTTP/1.1 100 Continue\r\n\r\n",
		    25);
	return 0;
}

/* Decoded body bytes of the current request, gathered per parse step. */
static void
proxy_body_piece(void *arg, const char *p, size_t n)
{
	struct proxy_conn *c = arg;

	if (evbuffer_add(c->body, p, n) != 0)
		c->closing = 1;
}

/* Hand the gathered body to the request (end: the body is complete). */
static int
proxy_deliver(struct proxy_conn *c, int end)
{
	struct proto_msg m;
	size_t n = evbuffer_get_length(c->body);

	if (n == 0 && !end)
		return 0;
	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_DATA;
	m.flags = end ? PROTO_FLAG_END_STREAM : 0;
	m.stream = request_id(c->r);
	m.data.len = n;
	if (proto_conn_recv(&c->pc, request_stream(c->r), &m, NULL) !=
	    PROTO_ACCEPT)
		return -1;
	if (evbuffer_add_buffer(request_body_buffer(c->r), c->body) != 0)
		return -1;
	request_on_body(c->r, n, end); /* may finish the request */
	return 0;
}

/* Cancel the request as a guest's RESET would (it logs and finishes). */
static void
proxy_reset(struct proxy_conn *c)
{
	struct proto_msg m;

	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_RESET;
	m.stream = request_id(c->r);
	m.reset.code = PROTO_CODE_CANCELLED;
	if (proto_conn_recv(&c->pc, request_stream(c->r), &m, NULL) ==
	    PROTO_ACCEPT)
		request_on_reset(c->r); /* done: c->r is NULL after */
}

/* Read body from the input, within the stream's window. */
static int
proxy_read_body(struct proxy_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	struct proto_stream *st = request_stream(c->r);
	struct policy_err perr;
	size_t n, used;
	char *p;
	int end;

	n = evbuffer_get_length(in);
	if (n > st->flow.recv)
		n = st->flow.recv;
	if (n > c->pc.flow.recv)
		n = c->pc.flow.recv;
	if (n == 0)
		return 0;
	if ((p = (char *)evbuffer_pullup(in, (ssize_t)n)) == NULL)
		return -1;
	perr.msg[0] = '\0';
	if (http1_req_parse_body(c->parser, p, n, proxy_body_piece, c, &used,
		&perr) != 0) {
		/* Bad chunk framing: the upstream never sees an end. */
		proxy_log_refusal(c, 400, "malformed", perr.msg);
		(void)evbuffer_drain(c->body, evbuffer_get_length(c->body));
		c->closing = c->close_after = 1;
		c->body_done = 0;
		if (!c->resp_started)
			proxy_reply(c, 400, "malformed",
			    proto_code_message(PROTO_CODE_INVALID_REQUEST));
		proxy_reset(c);
		return 0;
	}
	(void)evbuffer_drain(in, used);
	end = http1_req_is_complete(c->parser);
	if (end) {
		c->body_done = 1;
		c->state = PX_WAIT;
	}
	if (proxy_deliver(c, end) != 0)
		return -1;
	return used > 0 || end ? 1 : 0;
}

/* The tunnel is over: close once its last answer is written. */
static void
proxy_tunnel_done(void *arg)
{
	struct proxy_conn *c = arg;

	if (tunnel_inspect_dest(c->tun) != NULL) {
		c->inspecting = 1; /* proxy_step() hands over */
		proxy_schedule(c);
		return;
	}
	c->closing = 1;
	c->resp_done = 1;
	bufferevent_setcb(c->bev, proxy_read_cb, proxy_write_cb,
	    proxy_event_cb, c);
	(void)bufferevent_enable(c->bev, EV_WRITE);
	proxy_schedule(c);
}

/* CONNECT host:port: the connection becomes a tunnel (tunnel.h). */
static int
proxy_connect(struct proxy_conn *c, const struct http1_req *q, size_t hl)
{
	struct policy_dest dest;
	struct policy_err perr;

	if (c->flags & PROXY_INSPECT) {
		proxy_refuse(c, 405, "method",
		    "CONNECT inside an inspected tunnel");
		return 0;
	}
	/* Kept for an inspected tunnel's requests, which carry none. */
	if ((c->flags & PROXY_AUTH) &&
	    (c->held_auth = proxy_auth_hold(q)) == NULL)
		return -1;
	memset(&dest, 0, sizeof(dest));
	perr.msg[0] = '\0';
	if (q->content_length > 0 || q->chunked ||
	    policy_hostport_parse(q->authority, q->authority_len, &dest,
		&perr) != 0) {
		proxy_refuse(c, 400, "malformed",
		    perr.msg[0] ? perr.msg : "CONNECT with a body");
		return 0;
	}
	(void)evbuffer_drain(bufferevent_get_input(c->bev), hl);
	if (proxy_unstage(c) != 0)
		return -1;
	c->state = PX_TUNNEL;
	if (tunnel_start(c->b, c->instance, c->bev, &dest, proxy_tunnel_done,
		c, &c->tun) != 0)
		return -1;
	return 0;
}

static int proxy_take_head(struct proxy_conn *c, const struct http1_req *q,
    size_t hl, struct confref *ref);

/* Read a head from the input and start its request. */
static int
proxy_read_head(struct proxy_conn *c)
{
	struct http1_req *q = &c->q;
	struct evbuffer *in = bufferevent_get_input(c->bev);
	struct policy_err perr;
	size_t n = evbuffer_get_length(in);
	struct confref *ref;
	long hl;
	char *p;
	int err, rv;

	if (n == 0)
		return 0;
	if (!evtimer_pending(c->head_timer, NULL))
		proxy_head_arm(c); /* from its first byte, once */
	if (n > HTTP1_HEAD_MAX)
		n = HTTP1_HEAD_MAX;
	if ((p = (char *)evbuffer_pullup(in, (ssize_t)n)) == NULL)
		return -1;
	c->minor = 1;
	c->head_method = 0;
	c->client_keep = 0;
	c->body_done = 0;
	if (c->head_seen > n)
		c->head_seen = 0; /* not the head looked at before */
	hl = http1_req_head_len(p, n, c->head_seen);
	if (hl == 0 && http1_req_head_bad(p, n, c->head_seen)) {
		proxy_refuse(c, 400, "malformed", "not an HTTP request head");
		return 0;
	}
	if (hl == 0) {
		c->head_seen = n; /* look only at what comes next */
		return 0;
	}
	c->head_seen = 0; /* the next head starts where this one ends */
	(void)evtimer_del(c->head_timer);
	if (hl < 0) {
		proxy_refuse(c, 431, "malformed", "request head too large");
		return 0;
	}
	perr.msg[0] = '\0';
	err = http1_req_parse_head(c->parser, p, (size_t)hl, q, &perr);
	if (err == EGRESS_ERR_DENIED) {
		proxy_refuse(c, 405, "method", perr.msg);
		return 0;
	}
	if (err != 0) {
		proxy_refuse(c, err == EGRESS_ERR_TOO_BIG ? 431 : 400,
		    "malformed", perr.msg[0] ? perr.msg : "bad head");
		return 0;
	}
	c->minor = q->minor;
	/* One snapshot for the front's checks of this head (its token, its
	 * method): one look at the files behind it. */
	ref = confstate_get_for(&c->b->conf, c->instance);
	rv = proxy_take_head(c, q, (size_t)hl, ref);
	if (ref != NULL)
		confref_unref(ref);
	return rv;
}

/* The parsed head q of hl bytes, checked against snapshot ref (NULL:
 * none in force): authorize, then tunnel or start its request. */
static int
proxy_take_head(struct proxy_conn *c, const struct http1_req *q, size_t hl,
    struct confref *ref)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	const char *detail = NULL;
	unsigned status = 0;

	if (c->held_auth != NULL)
		status = proxy_auth_check_held(c->instance, c->held_auth, ref,
		    &detail);
	else if (c->flags & PROXY_AUTH)
		status = proxy_auth_check(c->instance, q, ref, &detail);
	if (status != 0) {
		/* The same answer whichever instance, token or none. */
		proxy_log_refusal(c, status, "auth", detail);
		c->body_done = 0;
		proxy_reply(c, status, "auth",
		    "proxy authentication required");
		c->closing = 1;
		proxy_schedule(c);
		return 0;
	}
	if (c->preauth) {
		/* Authorized: from now on one of the instance's sessions. */
		if (proxy_take_share(c->b, c->instance) != 0) {
			proxy_log_refusal(c, 503, "sessions",
			    "the instance's sessions are all in use");
			c->body_done = 0;
			proxy_reply(c, 503, "sessions",
			    "too many sessions of this instance");
			c->closing = 1;
			proxy_schedule(c);
			return 0;
		}
		c->preauth = 0;
		c->shared = c->b->session_share != NULL;
		proxy_ports_resume(c->b, c->instance);
	}
	if (q->form == HTTP1_REQ_AUTHORITY)
		return proxy_connect(c, q, hl);
	if (proxy_begin(c, q, ref) != 0)
		return c->closing ? 0 : -1;
	(void)evbuffer_drain(in, hl); /* q is no longer read */
	return 1;
}

/* No complete head in time: answer 408 and close, if nothing else is
 * going on (a response being written is the idle timeout's). An
 * inspected tunnel still in its handshake cannot be answered: it is
 * closed at once, giving its unit of the handshake share back. */
static void
proxy_head_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_conn *c = arg;

	if (c->handshaking) {
		proxy_log_refusal(c, 408, "timeout",
		    "TLS handshake not complete in time");
		proxy_free(c);
		return;
	}
	if (c->closing || c->r != NULL || c->tun != NULL ||
	    c->state != PX_HEAD || c->held)
		return; /* held: the client's reads are late, not its head;
			   the write timeout is for them */
	proxy_log_refusal(c, 408, "timeout",
	    "no complete request head in time");
	c->body_done = 0;
	proxy_reply(c, 408, "timeout", "request head not complete in time");
	c->closing = 1;
	(void)bufferevent_disable(c->bev, EV_READ);
	proxy_schedule(c);
}

/* Move on with what the input holds. Return -1 to drop the client. */
static int
proxy_process(struct proxy_conn *c)
{
	int rv = 1;

	while (rv > 0 && !c->closing) {
		switch (c->state) {
		case PX_HEAD:
			rv = c->r == NULL && !proxy_out_held(c) ?
			    proxy_read_head(c) :
			    0;
			break;
		case PX_BODY:
			rv = c->r != NULL ? proxy_read_body(c) : 0;
			break;
		case PX_WAIT:
		case PX_TUNNEL:
			rv = 0;
			break;
		}
	}
	return rv < 0 ? -1 : 0;
}

/*
 * With its input at the high watermark and reading on, libevent runs
 * the read callback again and again, each loop turn, until the input
 * is taken. When a step took none of it (a request in flight, a body
 * without window, answers held), stop reading; the step that takes
 * some (each is scheduled by what allows it) reads on. A tunnel owns
 * the connection's reading.
 */
static void
proxy_read_gate(struct proxy_conn *c)
{
	int full = evbuffer_get_length(bufferevent_get_input(c->bev)) >=
	    PROXY_IN_HIGH;

	if (c->closing || c->tun != NULL || c->state == PX_TUNNEL ||
	    full == c->read_off)
		return;
	c->read_off = full;
	if (full)
		(void)bufferevent_disable(c->bev, EV_READ);
	else
		(void)bufferevent_enable(c->bev, EV_READ);
}

/* Close when asked to and all is written; else go on. */
static void
proxy_step(struct proxy_conn *c)
{
	if (c->inspecting) {
		proxy_inspect(c);
		return;
	}
	if (c->closing) {
		if ((c->r == NULL || c->resp_done) &&
		    (c->tun == NULL || tunnel_is_done(c->tun))) {
			(void)bufferevent_disable(c->bev, EV_READ);
			if (proxy_out_len(c) == 0)
				proxy_free(c);
		}
		return;
	}
	if (c->r == NULL && c->state != PX_HEAD) {
		/* The exchange is over and the connection stays. */
		c->state = PX_HEAD;
	}
	if (proxy_process(c) != 0) {
		proxy_free(c);
		return;
	}
	proxy_read_gate(c);
	if (c->eof && c->r == NULL && c->tun == NULL && c->state == PX_HEAD &&
	    !c->held)
		c->closing = 1; /* every complete request was served */
	if (c->closing)
		proxy_step(c);
}

static void
proxy_defer_cb(evutil_socket_t fd, short what, void *arg)
{
	proxy_step(arg);
}

static void
proxy_schedule(struct proxy_conn *c)
{
	event_active(c->defer, EV_TIMEOUT, 1);
}

static void
proxy_read_cb(struct bufferevent *bev, void *arg)
{
	struct proxy_conn *c = arg;

	/* Bytes of a caller that has not shown the token are not work a
	 * busy poll should wait for more of. */
	if (!c->preauth)
		c->b->activity++;
	proxy_step(c);
}

static void
proxy_write_cb(struct bufferevent *bev, void *arg)
{
	struct proxy_conn *c = arg;

	if (c->closing && proxy_out_len(c) == 0 &&
	    (c->r == NULL || c->resp_done) &&
	    (c->tun == NULL || tunnel_is_done(c->tun))) {
		proxy_free(c);
		return;
	}
	if (c->r != NULL)
		request_flush(c->r);
	broker_mem_trim(c->b, c->instance, &c->mem, proxy_out_len(c), 0);
	if (c->held && !c->closing)
		proxy_schedule(c); /* the next head, if there is room now */
}

/* The staged output to the socket at once when nothing is queued
 * before it; what the socket refuses (or an error) is the
 * bufferevent's, which calls proxy_write_cb once it is written. */
static void
proxy_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_conn *c = arg;

	(void)fd;
	(void)what;
	c->flush_pending = 0;
	if (evbuffer_get_length(c->stage) == 0)
		return;
	log_flush(); /* the client reads no response before its events */
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		(void)evbuffer_write(c->stage, bufferevent_getfd(c->bev));
	if (evbuffer_get_length(c->stage) > 0) {
		if (proxy_unstage(c) != 0)
			proxy_free(c);
		return;
	}
	/* All of it taken: what the write callback would have done. */
	proxy_write_cb(c->bev, c);
}

static void
proxy_mem_wake(void *arg)
{
	struct proxy_conn *c = arg;

	if (c->r != NULL)
		request_flush(c->r);
}

static void
proxy_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct proxy_conn *c = arg;

	if (what == BEV_EVENT_CONNECTED) {
		/* An inspected tunnel's TLS handshake is done. */
		if (c->handshaking)
			share_release(c->b->tls_share, c->instance, 1);
		c->handshaking = 0;
		return;
	}
	if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING) &&
	    c->r != NULL && c->body_done) {
		/* Quiet while its answer is made: as expected. */
		(void)bufferevent_enable(bev, EV_READ);
		return;
	}
	if ((what & BEV_EVENT_EOF) && (what & BEV_EVENT_READING) &&
	    c->tun == NULL && (c->r == NULL || c->body_done)) {
		/* Half-closed with no request body due: answer the request
		 * in flight and the complete ones sent after it, in order,
		 * write every response queued, then close. A response still
		 * queued is never cut by the client's end. */
		c->eof = 1;
		if (c->r == NULL)
			proxy_schedule(c);
		return;
	}
	proxy_free(c);
}

/* ---- Life -------------------------------------------------------------- */

static void
proxy_free(struct proxy_conn *c)
{
	struct broker *b = c->b;
	char instance[CONF_NAME_MAX + 1];
	int preauth = c->preauth;

	memcpy(instance, c->instance, sizeof(instance));
	if (c->r != NULL) {
		request_abort(c->r);
		c->r = NULL;
	}
	tunnel_free(c->tun);
	c->tun = NULL;
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		b->proxies = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	b->nsessions--;
	if (c->shared)
		share_release(b->session_share, c->instance, 1);
	if (c->handshaking)
		share_release(b->tls_share, c->instance, 1);
	broker_mem_trim(b, c->instance, &c->mem, 0, 1);
	if (c->defer != NULL)
		event_free(c->defer);
	if (c->flush_ev != NULL)
		event_free(c->flush_ev);
	if (c->stage != NULL)
		evbuffer_free(c->stage);
	if (c->head_timer != NULL)
		event_free(c->head_timer);
	proxy_auth_held_free(c->held_auth);
	if (c->end_ev != NULL)
		event_free(c->end_ev);
	if (c->under_cb != NULL)
		(void)evbuffer_remove_cb_entry(
		    bufferevent_get_output(bufferevent_get_underlying(c->bev)),
		    c->under_cb);
	if (c->bev != NULL)
		bufferevent_free(c->bev); /* closes the socket */
	if (c->body != NULL)
		evbuffer_free(c->body);
	http1_req_parser_free(c->parser);
	free(c);
	if (preauth)
		proxy_ports_resume(b, instance);
	if (b->draining && b->nsessions == 0)
		(void)event_base_loopexit(b->base, NULL);
}

size_t
proxy_preauth_count(struct broker *b, const char *instance)
{
	struct proxy_conn *c;
	size_t n = 0;

	for (c = b->proxies; c != NULL; c = c->next)
		if (c->preauth && strcmp(c->instance, instance) == 0)
			n++;
	return n;
}

static void
proxy_head_arm(struct proxy_conn *c)
{
	unsigned ms = c->b->proxy_head_ms != 0 ?
	    c->b->proxy_head_ms :
	    PROXY_HEAD_MS;
	struct timeval tv = { ms / 1000, (suseconds_t)(ms % 1000) * 1000 };

	(void)evtimer_add(c->head_timer, &tv);
}

/* Take a unit of the instance's session share, as session_accept does. */
static int
proxy_take_share(struct broker *b, const char *instance)
{
	if (b->session_share == NULL)
		return 0;
	if (share_held(b->session_share, instance) >= SESSIONS_PER_INSTANCE)
		return EGRESS_ERR_AGAIN;
	return share_acquire(b->session_share, instance, NULL, 1);
}

/* Put the bytes already read in front of the bufferevent's input (whose
 * end libevent keeps frozen outside its own reads). */
static int
proxy_take_input(struct proxy_conn *c, struct evbuffer *in)
{
	struct evbuffer *to = bufferevent_get_input(c->bev);
	int rv;

	if (in == NULL || evbuffer_get_length(in) == 0)
		return 0;
	(void)evbuffer_unfreeze(to, 0);
	rv = evbuffer_add_buffer(to, in);
	(void)evbuffer_freeze(to, 0);
	return rv;
}

/* Records went out to the socket: a closing connection may be done. */
static void
proxy_under_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct proxy_conn *c = arg;

	(void)buf;
	if (info->n_deleted > 0 && (c->closing || c->held))
		proxy_schedule(c);
}

/* Set pc to the protocol state of a session past its HELLO. */
static void
proxy_pc_init(struct proto_conn *pc)
{
	struct proto_msg m;

	proto_conn_init(pc, PROTO_ROLE_BROKER);
	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_HELLO;
	m.hello.version = PROTO_VERSION;
	(void)proto_conn_recv(pc, NULL, &m, NULL);
	(void)proto_conn_send(pc, NULL, &m, NULL);
}

/* proxy_accept() on fd, or else on bev (owned: freed on failure), with
 * authority the implied one of PROXY_INSPECT; *ret (ret may be NULL) the
 * connection, when accepted. */
static int
proxy_accept_on(struct broker *b, int fd, struct bufferevent *bev,
    const char *instance, struct evbuffer *in, unsigned flags,
    const char *authority, struct proxy_conn **ret)
{
	struct timeval idle = { PROXY_IDLE_MS / 1000, 0 };
	struct proxy_conn *c = NULL;
	int shared = (flags & PROXY_SHARED) != 0;
	int hs = (flags & PROXY_HANDSHAKE) != 0;
	int err = EGRESS_ERR_AGAIN, one = 1, plain = 0;

	if (b->draining || strlen(instance) > CONF_NAME_MAX ||
	    b->nsessions >= SESSIONS_MAX)
		goto out;
	if (!shared && (flags & PROXY_AUTH)) {
		/* No share before the token: a few such per port. */
		if (proxy_preauth_count(b, instance) >= PROXY_PREAUTH_MAX) {
			session_log_refused(b, instance, "proxy_preauth_max");
			goto out;
		}
	} else if (!shared && b->session_share != NULL) {
		if (proxy_take_share(b, instance) != 0)
			goto out;
		shared = 1;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		err = EGRESS_ERR_NOMEM;
		goto out;
	}
	c->b = b;
	c->flags = flags;
	c->shared = shared && b->session_share != NULL;
	c->preauth = !shared && (flags & PROXY_AUTH);
	c->handshaking = hs;
	shared = hs = 0; /* c holds them now */
	memcpy(c->instance, instance, strlen(instance) + 1);
	c->guest.ops = &proxy_guest_ops;
	c->guest.ctx = c;
	c->mem.wake = proxy_mem_wake;
	c->mem.arg = c;
	proxy_pc_init(&c->pc);
	c->next = b->proxies;
	if (b->proxies != NULL)
		b->proxies->prev = c;
	b->proxies = c;
	b->nsessions++;
	c->parser = http1_req_parser_new();
	c->body = evbuffer_new();
	c->defer = event_new(b->base, -1, 0, proxy_defer_cb, c);
	c->head_timer = evtimer_new(b->base, proxy_head_timeout, c);
	if (authority != NULL)
		(void)snprintf(c->authority, sizeof(c->authority), "%s",
		    authority);
	if (bev != NULL) {
		c->bev = bev;
		bev = NULL;
	} else {
		/* A response goes out in pieces: without this, Nagle's
		 * algorithm holds the last one for the client's delayed
		 * ACK (TCP only; a Unix socket refuses it, harmlessly). */
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
		    sizeof(one));
		c->bev = bufferevent_socket_new(b->base, fd,
		    BEV_OPT_CLOSE_ON_FREE);
		c->stage = evbuffer_new();
		c->flush_ev = event_new(b->base, -1, 0, proxy_flush_cb, c);
		plain = 1;
	}
	if (c->bev != NULL)
		fd = -1;
	if (c->pc.state != PROTO_CONN_OPEN || c->parser == NULL ||
	    c->body == NULL || c->defer == NULL || c->head_timer == NULL ||
	    c->bev == NULL || readmore_bulk(c->bev) != 0 ||
	    (plain && (c->stage == NULL || c->flush_ev == NULL)) ||
	    proxy_take_input(c, in) != 0) {
		proxy_free(c);
		err = EGRESS_ERR_NOMEM;
		c = NULL;
		goto out;
	}
	bufferevent_setcb(c->bev, proxy_read_cb, proxy_write_cb,
	    proxy_event_cb, c);
	if (bufferevent_get_underlying(c->bev) != NULL &&
	    (c->under_cb = evbuffer_add_cb(
		 bufferevent_get_output(bufferevent_get_underlying(c->bev)),
		 proxy_under_cb, c)) == NULL) {
		proxy_free(c);
		err = EGRESS_ERR_NOMEM;
		c = NULL;
		goto out;
	}
	bufferevent_setwatermark(c->bev, EV_READ, 0, PROXY_IN_HIGH);
	bufferevent_setwatermark(c->bev, EV_WRITE, PROXY_OUT_LOW, 0);
	(void)bufferevent_set_timeouts(c->bev, &idle, &idle);
	if (bufferevent_enable(c->bev, EV_READ | EV_WRITE) != 0) {
		proxy_free(c);
		err = EGRESS_ERR_NOMEM;
		c = NULL;
		goto out;
	}
	proxy_head_arm(c); /* the first head is due from the accept */
	if (in != NULL && evbuffer_get_length(bufferevent_get_input(c->bev)))
		proxy_schedule(c);
	err = 0;
	if (ret != NULL)
		*ret = c;
out:
	if (shared && b->session_share != NULL)
		share_release(b->session_share, instance, 1);
	if (hs)
		share_release(b->tls_share, instance, 1);
	if (fd >= 0 && c == NULL)
		(void)close(fd);
	if (bev != NULL)
		bufferevent_free(bev);
	if (in != NULL)
		evbuffer_free(in);
	return err;
}

int
proxy_accept(struct broker *b, int fd, const char *instance,
    struct evbuffer *in, unsigned flags)
{
	return proxy_accept_on(b, fd, NULL, instance, in,
	    flags & ~(unsigned)(PROXY_INSPECT | PROXY_HANDSHAKE), NULL, NULL);
}

/* An inspected tunnel's lifetime is over: no request more is read, and
 * the connection closes once the one in flight is answered. */
static void
proxy_end_cb(evutil_socket_t fd, short what, void *arg)
{
	((struct proxy_conn *)arg)->closing = 1;
	proxy_schedule(arg);
}

/* Close c at end_ms (broker_now_ms()), as proxy_end_cb() does. */
static int
proxy_end_at(struct proxy_conn *c, uint64_t end_ms)
{
	uint64_t t = broker_now_ms(), d = end_ms > t ? end_ms - t : 0;
	struct timeval tv = { (time_t)(d / 1000),
		(suseconds_t)(d % 1000) * 1000 };

	if ((c->end_ev = evtimer_new(c->b->base, proxy_end_cb, c)) == NULL)
		return -1;
	return evtimer_add(c->end_ev, &tv);
}

/*
 * The tunnel of c ended for inspection: put the TLS server on c's
 * connection and serve what it decrypts as a new connection of the
 * front (its session share handed over), each request for
 * https://HOST[:PORT]; c goes. The handshake costs the broker CPU: it
 * takes a unit of the instance's fair share of handshakes in progress,
 * as a dialed one does, held until it is done (refused: the tunnel is
 * closed, budget-exhausted).
 */
static void
proxy_inspect(struct proxy_conn *c)
{
	char instance[CONF_NAME_MAX + 1], auth[POLICY_NAME_MAX + 16];
	const struct policy_dest *d = tunnel_inspect_dest(c->tun);
	struct proxy_auth_held *held;
	struct bufferevent *tls = NULL;
	uint64_t end_ms;
	struct policy_dest hd;
	struct broker *b = c->b;
	unsigned flags = PROXY_INSPECT;
	int err = EGRESS_ERR_INVALID;

	if (b->tls_share != NULL) {
		if (share_acquire(b->tls_share, c->instance, NULL, 1) != 0) {
			proxy_log_refusal(c, 503, "budget-exhausted",
			    "the instance's share of TLS handshakes in "
			    "progress is used up");
			proxy_free(c);
			return;
		}
		flags |= PROXY_HANDSHAKE;
	}
	hd = *d;
	(void)snprintf(hd.scheme, sizeof(hd.scheme), "https");
	if (http1_format_host(&hd, auth, sizeof(auth)) >= 0) {
		err = inspect_wrap(b, c->bev, d->host.name, &tls);
		c->bev = NULL; /* tls's now, or freed */
	}
	if (err != 0) {
		proxy_log_refusal(c, 502, "inspect",
		    "the TLS of the tunnel could not be terminated");
		if (flags & PROXY_HANDSHAKE)
			share_release(b->tls_share, c->instance, 1);
		proxy_free(c);
		return;
	}
	if (c->shared) {
		flags |= PROXY_SHARED;
		c->shared = 0;
	}
	memcpy(instance, c->instance, sizeof(instance));
	held = c->held_auth;
	c->held_auth = NULL;
	end_ms = tunnel_end_ms(c->tun);
	proxy_free(c);
	if (proxy_accept_on(b, -1, tls, instance, NULL, flags, auth, &c) !=
	    0) {
		proxy_auth_held_free(held);
		return;
	}
	c->held_auth = held;
	if (end_ms != 0 && proxy_end_at(c, end_ms) != 0)
		proxy_free(c);
}

size_t
proxy_drain_all(struct broker *b)
{
	struct proxy_conn *c, *next;
	size_t n = 0;

	for (c = b->proxies; c != NULL; c = next) {
		next = c->next;
		c->closing = 1;
		if (c->r == NULL &&
		    (c->tun == NULL || tunnel_is_done(c->tun)) &&
		    proxy_out_len(c) == 0) {
			proxy_free(c);
			continue;
		}
		n++;
	}
	return n;
}

void
proxy_free_all(struct broker *b)
{
	struct proxy_conn *c, *next;

	for (c = b->proxies; c != NULL; c = next) {
		next = c->next;
		proxy_free(c);
	}
}

struct proxy_revoke {
	struct broker *b;
	char instance[CONF_NAME_MAX + 1];
};

static void
proxy_revoke_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_revoke *rv = arg;
	struct proxy_conn *c, *next;

	for (c = rv->b->proxies; c != NULL; c = next) {
		next = c->next;
		if (strcmp(c->instance, rv->instance) == 0)
			proxy_free(c);
	}
	free(rv);
}

void
proxy_revoke_instance(struct broker *b, const char *instance)
{
	struct proxy_revoke *rv;
	struct timeval zero = { 0, 0 };

	if ((rv = calloc(1, sizeof(*rv))) == NULL)
		return;
	rv->b = b;
	(void)snprintf(rv->instance, sizeof(rv->instance), "%s", instance);
	if (event_base_once(b->base, -1, EV_TIMEOUT, proxy_revoke_cb, rv,
		&zero) != 0)
		free(rv);
}

size_t
proxy_revoke_tunnels(struct broker *b, const struct conf_snapshot *s)
{
	struct proxy_conn *c;
	size_t n = 0;

	/* tunnel_recheck() frees nothing now: done runs from the loop. */
	for (c = b->proxies; c != NULL; c = c->next)
		if (c->tun != NULL && !tunnel_is_done(c->tun))
			n += (size_t)tunnel_recheck(c->tun, s);
	return n;
}
