/* SPDX-License-Identifier: ISC */
/*
 * The broker's WebSocket client of one websocket stream (see wsock.h):
 * the opening handshake (written here, the response head checked by
 * wsproto.h), then wsproto's codec (libwslay) over the upstream
 * bufferevent. Messages for the guest wait in one FIFO of items (their
 * bytes in one evbuffer) until the guest's windows take them; reading
 * from the upstream stops while that FIFO holds RELAY_DOWN_HIGH bytes or
 * more. A guest message is assembled in one evbuffer (bounded by
 * max_message) and queued to the codec whole once its last frame came.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <egress/error.h>

#include "broker/broker.h"
#include "broker/guest.h"
#include "broker/net/http1_head.h"
#include "broker/net/wsproto.h"
#include "broker/relay.h"
#include "broker/wsock.h"
#include "proto/proto.h"

enum ws_state {
	WS_HANDSHAKE = 0,
	WS_OPEN = 1,
	WS_OVER = 2,
};

/* One item for the guest: a message (text or binary) or a control. */
struct ws_item {
	uint8_t kind; /* 1 text, 2 binary (RFC opcodes), or PROTO_WS_* */
	uint16_t code;
	size_t len;  /* its bytes, at the front of w->down */
	size_t sent; /* of a message: bytes already sent */
	struct ws_item *next;
};

struct wsock {
	struct event_base *base;
	struct broker *b; /* its memory budget, or NULL: none */
	const struct guest *g;
	struct proto_stream *st;
	struct bufferevent *up;
	struct event *timer;
	wsock_end_fn end;
	void *arg;
	unsigned long *activity;
	struct wsproto *ctx;

	char key[WSPROTO_KEY_LEN + 1];
	char *protos; /* requested subprotocols, comma-separated, or NULL */
	int state;
	int status;
	size_t head_seen; /* bytes of the handshake's answer searched */
	int over;
	int detached;
	int read_paused;
	int up_eof;	  /* the upstream's end of file arrived */
	int guest_closed; /* the guest's close arrived */
	int down_closed;  /* a close item was queued for the guest */
	unsigned close_code;
	uint16_t close_on_open; /* wsock_close() during the handshake */

	struct evbuffer *down; /* the bytes of the items */
	struct ws_item *qhead, *qtail;
	size_t qbytes;

	struct evbuffer *msg; /* the guest's message being assembled */
	int msg_binary;
	int msg_started;
	size_t owed; /* guest bytes not yet credited */

	/* Charged to the instance's memory budget: the items for the guest,
	 * the upstream bytes the codec took since its last message (the
	 * message it assembles), the guest's message being assembled and
	 * the codec's queue towards the upstream. */
	struct broker_mem mem;
	size_t asm_bytes;

	uint64_t bytes_up, bytes_down, msgs_up, msgs_down;
	uint64_t last_ms, idle_ms, deadline_ms, hs_deadline_ms;
	uint64_t close_deadline_ms; /* our close sent: the answer's deadline */
	size_t max_message;
};

static const struct timeval zero_tv = { 0, 0 };

static const char *const refused_headers[] = {
	"Upgrade",
	"Connection",
	"Sec-WebSocket-Key",
	"Sec-WebSocket-Version",
	"Sec-WebSocket-Accept",
	"Sec-WebSocket-Extensions",
	"Content-Length",
	"Transfer-Encoding",
	"Expect",
};

int
wsock_header_is_refused(const struct http1_header *h)
{
	size_t i;

	for (i = 0; i < sizeof(refused_headers) / sizeof(refused_headers[0]);
	     i++)
		if (http1_header_is(h, refused_headers[i]))
			return -1;
	return 0;
}

/* ---- Life -------------------------------------------------------------- */

static void
ws_touch(struct wsock *w)
{
	w->last_ms = broker_now_ms();
	if (w->activity != NULL)
		(*w->activity)++;
}

/* The bytes w holds that its instance's memory budget is charged. */
static size_t
ws_mem_used(const struct wsock *w)
{
	return w->qbytes + w->asm_bytes +
	    (w->msg != NULL ? evbuffer_get_length(w->msg) : 0) +
	    (w->ctx != NULL ? wsproto_queued_bytes(w->ctx) : 0);
}

/* Answer whether what w holds fits its credit (taking more from the
 * budget as needed; when it cannot, ws_mem_wake() runs once memory was
 * given back). Without a broker, everything fits. */
static int
ws_mem_room(struct wsock *w)
{
	if (w->b == NULL)
		return 1;
	return broker_mem_room(w->b, w->g->ops->instance(w->g->ctx), &w->mem,
	    ws_mem_used(w), 2 * w->max_message + 4 * RELAY_DOWN_HIGH);
}

/* Give back the credit beyond what w holds now. */
static void
ws_mem_trim(struct wsock *w)
{
	if (w->b != NULL)
		broker_mem_trim(w->b, w->g->ops->instance(w->g->ctx), &w->mem,
		    ws_mem_used(w), 0);
}

static void
ws_over(struct wsock *w, int err)
{
	if (w->over)
		return;
	w->over = 1;
	w->state = WS_OVER;
	bufferevent_setcb(w->up, NULL, NULL, NULL, NULL);
	(void)bufferevent_disable(w->up, EV_READ | EV_WRITE);
	(void)evtimer_del(w->timer);
	w->end(w->arg, err);
}

static int
ws_arm(struct wsock *w)
{
	uint64_t now = broker_now_ms(), at = 0, d;
	struct timeval tv;

	if (w->state == WS_HANDSHAKE)
		at = w->hs_deadline_ms;
	if (w->idle_ms != 0 && (at == 0 || w->last_ms + w->idle_ms < at))
		at = w->last_ms + w->idle_ms;
	if (w->deadline_ms != 0 && (at == 0 || w->deadline_ms < at))
		at = w->deadline_ms;
	if (w->close_deadline_ms != 0 &&
	    (at == 0 || w->close_deadline_ms < at))
		at = w->close_deadline_ms;
	if (at == 0)
		return 0;
	d = at > now ? at - now : 0;
	tv.tv_sec = (time_t)(d / 1000);
	tv.tv_usec = (suseconds_t)(d % 1000) * 1000;
	return evtimer_add(w->timer, &tv) == 0 ? 0 : EGRESS_ERR_NOMEM;
}

static int ws_enqueue(struct wsock *w, uint8_t kind, uint16_t code,
    const void *p, size_t n);
static void ws_push(struct wsock *w);

/* Our close went upstream: wait WSOCK_CLOSE_WAIT_MS for its answer. */
static void
ws_close_wait(struct wsock *w)
{
	if (w->close_deadline_ms != 0)
		return;
	w->close_deadline_ms = broker_now_ms() + WSOCK_CLOSE_WAIT_MS;
	if (ws_arm(w) != 0)
		ws_over(w, EGRESS_ERR_UNAVAILABLE);
}

static void
ws_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct wsock *w = arg;
	uint64_t now = broker_now_ms();

	if (w->close_deadline_ms != 0 && now >= w->close_deadline_ms) {
		w->close_deadline_ms = 0; /* once: never again due at once */
		if (w->up_eof) {
			/* The upstream ended; the guest, whose close began the
			 * wait, did not take what was left for it in time. */
			ws_over(w, EGRESS_ERR_TIMEOUT);
			return;
		}
		/* The upstream never answered our close: as if it ended. */
		w->up_eof = 1;
		(void)bufferevent_disable(w->up, EV_READ | EV_WRITE);
		if (!w->down_closed &&
		    ws_enqueue(w, PROTO_WS_CLOSE, 1006, NULL, 0) != 0) {
			ws_over(w, EGRESS_ERR_UNAVAILABLE);
			return;
		}
		/* Armed first: ws_push() may end the stream. */
		if (ws_arm(w) != 0) {
			ws_over(w, EGRESS_ERR_UNAVAILABLE);
			return;
		}
		ws_push(w);
		return;
	}

	if ((w->deadline_ms != 0 && now >= w->deadline_ms) ||
	    (w->idle_ms != 0 && now - w->last_ms >= w->idle_ms) ||
	    (w->state == WS_HANDSHAKE && w->hs_deadline_ms != 0 &&
		now >= w->hs_deadline_ms)) {
		ws_over(w, EGRESS_ERR_TIMEOUT);
		return;
	}
	if (ws_arm(w) != 0)
		ws_over(w, EGRESS_ERR_UNAVAILABLE);
}

/* ---- Towards the guest ------------------------------------------------- */

/* Queue an item of n bytes at p for the guest. */
static int
ws_enqueue(struct wsock *w, uint8_t kind, uint16_t code, const void *p,
    size_t n)
{
	struct ws_item *it = calloc(1, sizeof(*it));

	if (it == NULL || (n > 0 && evbuffer_add(w->down, p, n) != 0)) {
		free(it);
		return EGRESS_ERR_NOMEM;
	}
	it->kind = kind;
	it->code = code;
	it->len = n;
	if (w->qtail != NULL)
		w->qtail->next = it;
	else
		w->qhead = it;
	w->qtail = it;
	/* An empty message or ping still costs its item. */
	w->qbytes += n + sizeof(*it);
	if (kind == PROTO_WS_CLOSE) {
		w->down_closed = 1;
		if (w->close_code == 0)
			w->close_code = code != 0 ? code : 1005;
	}
	return 0;
}

static void
ws_item_pop(struct wsock *w)
{
	struct ws_item *it = w->qhead;

	w->qhead = it->next;
	if (w->qhead == NULL)
		w->qtail = NULL;
	w->qbytes -= sizeof(*it);
	free(it);
}

/* Send one control item; 0, or -1 when the output has no room now. */
static int
ws_send_control(struct wsock *w, struct ws_item *it)
{
	uint8_t buf[PROTO_WS_PAYLOAD_MAX];
	struct proto_msg m;
	size_t n = it->len;

	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_WS_CONTROL;
	m.stream = w->st->id;
	m.ws_control.opcode = it->kind;
	if (it->kind == PROTO_WS_CLOSE) {
		m.flags = PROTO_FLAG_END_STREAM;
		m.ws_control.code = it->code;
		if (n > PROTO_WS_REASON_MAX || it->code == 0)
			n = 0; /* a reason only with a code */
	} else if (n > PROTO_WS_PAYLOAD_MAX)
		n = PROTO_WS_PAYLOAD_MAX;
	(void)evbuffer_copyout(w->down, buf, n);
	m.ws_control.ptr = buf;
	m.ws_control.len = n;
	return w->g->ops->send(w->g->ctx, w->st, &m);
}

static void ws_check_done(struct wsock *w);
static void ws_read(struct wsock *w);

/*
 * Should reading from the upstream wait? While the guest has not taken
 * RELAY_DOWN_HIGH bytes, and while what goes upstream (frames written,
 * and the codec's queue, where libwslay puts a pong for every ping it
 * reads) is full: an upstream that pings and never reads is back-pressured
 * like one that sends data.
 */
static int
ws_read_must_wait(struct wsock *w)
{
	return w->qbytes >= RELAY_DOWN_HIGH || !ws_mem_room(w) ||
	    evbuffer_get_length(bufferevent_get_output(w->up)) >=
	    RELAY_UP_HIGH ||
	    wsproto_queued_count(w->ctx) >= WSOCK_QUEUED_MAX;
}

/* Read again once neither side is full; frames already in the input
 * first. */
static void
ws_read_resume(struct wsock *w)
{
	if (!w->read_paused || w->up_eof || ws_read_must_wait(w))
		return;
	w->read_paused = 0;
	(void)bufferevent_enable(w->up, EV_READ);
	if (evbuffer_get_length(bufferevent_get_input(w->up)) > 0)
		ws_read(w);
}

/* Send queued items within the windows. */
static void
ws_push(struct wsock *w)
{
	struct ws_item *it;
	uint32_t room;
	size_t n;
	uint8_t flags;

	if (w->detached) {
		while ((it = w->qhead) != NULL) {
			(void)evbuffer_drain(w->down, it->len - it->sent);
			w->qbytes -= it->len - it->sent;
			ws_item_pop(w);
		}
		ws_mem_trim(w);
		ws_check_done(w); /* the upstream may have ended already */
		return;
	}
	while (!w->over && (it = w->qhead) != NULL &&
	    w->g->ops->can_write(w->g->ctx)) {
		if (it->kind != WSPROTO_TEXT && it->kind != WSPROTO_BINARY) {
			if (ws_send_control(w, it) != 0) {
				ws_over(w, EGRESS_ERR_UNAVAILABLE);
				return;
			}
			(void)evbuffer_drain(w->down, it->len);
			w->qbytes -= it->len;
			ws_item_pop(w);
			continue;
		}
		room = proto_conn_sendable(w->g->ops->proto(w->g->ctx), w->st);
		n = it->len - it->sent;
		if (n > room)
			n = room;
		if (n == 0 && it->len - it->sent > 0)
			break; /* wait for window */
		flags = it->kind == WSPROTO_BINARY ? PROTO_FLAG_BINARY : 0;
		if (it->sent + n == it->len)
			flags |= PROTO_FLAG_MSG_END;
		if (w->g->ops->send_data(w->g->ctx, w->st, w->down, n,
			flags) != 0) {
			ws_over(w, EGRESS_ERR_UNAVAILABLE);
			return;
		}
		it->sent += n;
		w->qbytes -= n;
		if (it->sent == it->len)
			ws_item_pop(w);
	}
	if (w->over)
		return;
	ws_mem_trim(w);
	ws_read_resume(w);
	ws_check_done(w);
}

/* ---- The codec ---------------------------------------------------------- */

/* Upstream bytes for the codec, while the guest keeps up. */
static ssize_t
ws_codec_recv(void *arg, uint8_t *buf, size_t len)
{
	struct wsock *w = arg;
	int n;

	if (ws_read_must_wait(w))
		return 0;
	n = evbuffer_remove(bufferevent_get_input(w->up), buf, len);
	if (n <= 0)
		return 0;
	w->bytes_down += (uint64_t)n;
	w->asm_bytes += (size_t)n;
	return n;
}

/* Encoded frames into the upstream's output, under RELAY_UP_HIGH. */
static ssize_t
ws_codec_send(void *arg, const uint8_t *data, size_t len)
{
	struct wsock *w = arg;
	struct evbuffer *out = bufferevent_get_output(w->up);

	if (evbuffer_get_length(out) >= RELAY_UP_HIGH)
		return 0;
	if (evbuffer_add(out, data, len) != 0)
		return -1;
	w->bytes_up += len;
	return (ssize_t)len;
}

static int
ws_codec_msg(void *arg, int opcode, unsigned code, const uint8_t *p, size_t n)
{
	struct wsock *w = arg;

	/* What the codec assembled is now an item: a control frame (its
	 * 2-byte head and payload) may come amid a message's fragments. */
	if (opcode == WSPROTO_PING || opcode == WSPROTO_PONG)
		w->asm_bytes -= w->asm_bytes < n + 2 ? w->asm_bytes : n + 2;
	else
		w->asm_bytes = 0;
	switch (opcode) {
	case WSPROTO_TEXT:
	case WSPROTO_BINARY:
		w->msgs_down++;
		return ws_enqueue(w, (uint8_t)opcode, 0, p, n);
	case WSPROTO_PING:
	case WSPROTO_PONG:
		return ws_enqueue(w, (uint8_t)opcode, 0, p, n);
	case WSPROTO_CLOSE:
		if (w->down_closed)
			return 0;
		return ws_enqueue(w, PROTO_WS_CLOSE, (uint16_t)code, p, n);
	default:
		return 0;
	}
}

static const struct wsproto_ops ws_codec = {
	ws_codec_recv,
	ws_codec_send,
	ws_codec_msg,
};

/* Let the codec write what it queued, within RELAY_UP_HIGH; park it
 * when that leaves it idle (every read pass ends here too). */
static void
ws_send(struct wsock *w)
{
	int rc;

	if (w->ctx == NULL || w->over)
		return;
	if (wsproto_want_write(w->ctx) && (rc = wsproto_send(w->ctx)) != 0) {
		ws_over(w,
		    rc == EGRESS_ERR_NOMEM ? EGRESS_ERR_UNAVAILABLE :
					     EGRESS_ERR_UPSTREAM_PROTOCOL);
		return;
	}
	/* A stream whose guest is gone reads nothing more through the
	 * codec once its close is written: its frame state can go. */
	if (w->detached)
		wsproto_retire(w->ctx);
	else
		wsproto_park(w->ctx);
}

/*
 * The upstream failed the connection from our side (the codec sent a
 * close of its own: a protocol error, bad UTF-8, an over-size message):
 * tell the guest with that code.
 */
static void
ws_check_failed(struct wsock *w)
{
	if (w->down_closed || !wsproto_close_sent(w->ctx) ||
	    wsproto_close_received(w->ctx) || w->guest_closed)
		return;
	if (ws_enqueue(w, PROTO_WS_CLOSE, wsproto_code_sent(w->ctx), NULL,
		0) != 0)
		ws_over(w, EGRESS_ERR_UNAVAILABLE);
}

/* Read frames from the upstream's input, while the guest keeps up. */
static void
ws_read(struct wsock *w)
{
	struct evbuffer *in = bufferevent_get_input(w->up);

	if (w->over)
		return;
	if (w->detached) {
		(void)evbuffer_drain(in, evbuffer_get_length(in));
		ws_check_done(w);
		return;
	}
	if (wsproto_want_read(w->ctx) && wsproto_recv(w->ctx) != 0) {
		ws_over(w, EGRESS_ERR_UNAVAILABLE);
		return;
	}
	if (!wsproto_want_read(w->ctx))
		(void)evbuffer_drain(in, evbuffer_get_length(in));
	ws_check_failed(w);
	if (w->over)
		return;
	ws_send(w);
	if (w->over)
		return;
	if (ws_read_must_wait(w) && !w->read_paused) {
		(void)bufferevent_disable(w->up, EV_READ);
		w->read_paused = 1;
	}
	ws_push(w);
}

/*
 * Over once both closes are through: the guest's close came (or the
 * guest is gone) and a close went to it, and the codec wrote its close
 * (or the upstream ended); or the upstream ended and the guest is gone.
 */
static void
ws_check_done(struct wsock *w)
{
	int up_done;

	if (w->over || w->state != WS_OPEN)
		return;
	up_done = w->up_eof ||
	    (wsproto_close_sent(w->ctx) && !wsproto_want_write(w->ctx) &&
		evbuffer_get_length(bufferevent_get_output(w->up)) == 0);
	if (w->detached && up_done)
		ws_over(w, 0);
	else if (w->guest_closed && w->down_closed && w->qhead == NULL &&
	    up_done)
		ws_over(w, 0);
}

/* ---- The upstream's events ---------------------------------------------- */

static void ws_handshake_read(struct wsock *w);
static void ws_fail_both(struct wsock *w, uint16_t code);

static void
ws_read_cb(struct bufferevent *bev, void *arg)
{
	struct wsock *w = arg;

	ws_touch(w);
	if (w->state == WS_HANDSHAKE)
		ws_handshake_read(w);
	else
		ws_read(w);
}

static void ws_credit(struct wsock *w);

static void
ws_write_cb(struct bufferevent *bev, void *arg)
{
	struct wsock *w = arg;

	if (w->state != WS_OPEN)
		return;
	ws_send(w);
	if (w->over)
		return;
	ws_mem_trim(w);
	ws_credit(w); /* the guest may send again */
	ws_read_resume(w);
	if (w->over)
		return;
	ws_check_done(w);
}

static void
ws_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct wsock *w = arg;

	ws_touch(w);
	if (w->state == WS_HANDSHAKE) {
		ws_over(w, EGRESS_ERR_UPSTREAM_PROTOCOL);
		return;
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		/* Frames read before the end still count. */
		if (!w->detached && wsproto_want_read(w->ctx))
			ws_read(w);
		if (w->over)
			return;
		w->up_eof = 1;
		(void)bufferevent_disable(bev, EV_READ | EV_WRITE);
		if (!w->down_closed &&
		    ws_enqueue(w, PROTO_WS_CLOSE, 1006, NULL, 0) != 0) {
			ws_over(w, EGRESS_ERR_UNAVAILABLE);
			return;
		}
		ws_push(w);
	}
}

/* The 101 (or another status) arrived: tell the guest. */
static void
ws_handshake_read(struct wsock *w)
{
	static struct wsproto_head hp; /* large: single-threaded scratch */
	static struct proto_msg m;
	struct evbuffer *in = bufferevent_get_input(w->up);
	struct evbuffer_ptr end, from;
	size_t i, len, bytes = 0, n = evbuffer_get_length(in);
	const char *head;
	int rc, status = 0;

	/* Search only what the last read added (and the 3 bytes before
	 * it, which may start the end): an answer sent a byte at a time
	 * costs its length, not its square. */
	if (evbuffer_ptr_set(in, &from,
		w->head_seen > 3 && w->head_seen <= n ? w->head_seen - 3 : 0,
		EVBUFFER_PTR_SET) != 0) {
		ws_over(w, EGRESS_ERR_UPSTREAM_PROTOCOL);
		return;
	}
	end = evbuffer_search(in, "\r\n\r\n", 4, &from);
	if (end.pos < 0) {
		w->head_seen = n;
		if (n > HTTP1_HEAD_MAX)
			ws_over(w, EGRESS_ERR_UPSTREAM_PROTOCOL);
		return;
	}
	len = (size_t)end.pos + 4;
	if (len > HTTP1_HEAD_MAX ||
	    (head = (const char *)evbuffer_pullup(in, (ssize_t)len)) == NULL) {
		ws_over(w, EGRESS_ERR_UPSTREAM_PROTOCOL);
		return;
	}
	rc = wsproto_response_check(head, len, w->key, w->protos, &hp);
	if (rc < 0) {
		ws_over(w, EGRESS_ERR_UPSTREAM_PROTOCOL);
		return;
	}
	status = hp.status;
	w->status = status;
	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_RESPONSE;
	m.stream = w->st->id;
	m.response.status = (uint16_t)status;
	if (rc == 0)
		m.flags = PROTO_FLAG_END_STREAM; /* never followed */
	for (i = 0; i < hp.nheaders && m.nheaders < PROTO_HEADERS_MAX; i++) {
		const struct http1_header *h = &hp.headers[i];

		if (http1_response_is_hop(hp.headers, hp.nheaders, h) ||
		    http1_header_is(h, "Sec-WebSocket-Accept") ||
		    h->name_len == 0 || h->name_len > PROTO_NAME_MAX ||
		    h->value_len > PROTO_VALUE_MAX ||
		    bytes + h->name_len + h->value_len >
			PROTO_HEADER_BYTES_MAX)
			continue;
		bytes += h->name_len + h->value_len;
		m.headers[m.nheaders].name.ptr = h->name;
		m.headers[m.nheaders].name.len = h->name_len;
		m.headers[m.nheaders].value.ptr = h->value;
		m.headers[m.nheaders].value.len = h->value_len;
		m.nheaders++;
	}
	if (w->g->ops->send(w->g->ctx, w->st, &m) != 0) {
		ws_over(w, EGRESS_ERR_UNAVAILABLE);
		return;
	}
	(void)evbuffer_drain(in, len);
	if (rc == 0) {
		ws_over(w, 0);
		return;
	}
	w->state = WS_OPEN;
	if (wsproto_new(&ws_codec, w, w->max_message, &w->ctx) != 0) {
		w->ctx = NULL;
		ws_over(w, EGRESS_ERR_UNAVAILABLE);
		return;
	}
	(void)evtimer_del(w->timer);
	if (ws_arm(w) != 0) {
		ws_over(w, EGRESS_ERR_UNAVAILABLE);
		return;
	}
	if (w->close_on_open != 0) {
		(void)evbuffer_drain(in, evbuffer_get_length(in));
		ws_fail_both(w, w->close_on_open);
		return;
	}
	ws_read(w); /* frames that came with the head */
}

/* ---- From the guest ---------------------------------------------------- */

/* Credit the guest for what it sent, while the upstream keeps up. */
static void
ws_credit(struct wsock *w)
{
	size_t n = w->owed;

	if (n == 0 || w->over ||
	    evbuffer_get_length(bufferevent_get_output(w->up)) >=
		RELAY_UP_HIGH ||
	    (w->ctx != NULL &&
		wsproto_queued_bytes(w->ctx) >= RELAY_UP_HIGH) ||
	    !ws_mem_room(w))
		return;
	w->owed = 0;
	w->g->ops->consumed(w->g->ctx, w->st, n);
}

/* Send close code with no reason both ways: the broker fails the
 * stream (the guest's message was over the bound). */
static void
ws_fail_both(struct wsock *w, uint16_t code)
{
	(void)wsproto_close(w->ctx, code, NULL, 0);
	wsproto_shutdown_read(w->ctx);
	ws_close_wait(w);
	if (w->over)
		return;	     /* the timer could not be armed: ended */
	w->guest_closed = 1; /* nothing more is taken from it */
	if (!w->down_closed &&
	    ws_enqueue(w, PROTO_WS_CLOSE, code, NULL, 0) != 0) {
		ws_over(w, EGRESS_ERR_UNAVAILABLE);
		return;
	}
	ws_send(w);
	ws_push(w);
}

int
wsock_close(struct wsock *w, uint16_t code)
{
	if (w->over || w->detached)
		return -1;
	if (w->state == WS_HANDSHAKE) {
		w->close_on_open = code;
		return 0;
	}
	if (w->close_code == 0 && !w->down_closed && !w->up_eof &&
	    !wsproto_close_sent(w->ctx))
		w->close_code = code;
	ws_fail_both(w, code);
	return 0;
}

void
wsock_guest_data(struct wsock *w, const uint8_t *data, size_t n, uint8_t flags)
{
	int binary = (flags & PROTO_FLAG_BINARY) != 0;
	const uint8_t *p;
	size_t len;
	int rc;

	w->owed += n;
	if (w->over || w->guest_closed || w->state != WS_OPEN) {
		/* Discarded: nothing more goes upstream. */
		ws_credit(w);
		return;
	}
	if (w->msg_started && binary != w->msg_binary) {
		ws_fail_both(w, 1002);
		return;
	}
	w->msg_started = 1;
	w->msg_binary = binary;
	if (evbuffer_get_length(w->msg) + n > w->max_message) {
		ws_fail_both(w, 1009);
		return;
	}
	if (n > 0 && evbuffer_add(w->msg, data, n) != 0) {
		ws_over(w, EGRESS_ERR_UNAVAILABLE);
		return;
	}
	if (flags & PROTO_FLAG_MSG_END) {
		len = evbuffer_get_length(w->msg);
		/* The window bounds every message but an empty one. */
		if (len == 0 &&
		    wsproto_queued_empty(w->ctx) >= WSOCK_QUEUED_MAX) {
			ws_over(w, EGRESS_ERR_UNAVAILABLE);
			return;
		}
		p = len > 0 ? evbuffer_pullup(w->msg, -1) : NULL;
		if (len > 0 && p == NULL) {
			ws_over(w, EGRESS_ERR_UNAVAILABLE);
			return;
		}
		rc = wsproto_queue(w->ctx,
		    binary ? WSPROTO_BINARY : WSPROTO_TEXT, p, len);
		if (rc == EGRESS_ERR_NOMEM) {
			ws_over(w, EGRESS_ERR_UNAVAILABLE);
			return;
		}
		if (rc != 0) {
			/* Text that is not UTF-8, or a close already sent. */
			ws_fail_both(w, 1007);
			return;
		}
		(void)evbuffer_drain(w->msg, len);
		w->msg_started = 0;
		w->msgs_up++;
		ws_send(w);
	}
	ws_credit(w);
}

void
wsock_guest_control(struct wsock *w, const struct proto_msg *m)
{
	uint16_t code = m->ws_control.code;

	if (w->over)
		return;
	if (m->ws_control.opcode == PROTO_WS_CLOSE) {
		w->guest_closed = 1;
		if (w->state != WS_OPEN) {
			ws_check_done(w);
			return;
		}
		/* Codes a close frame may not carry (RFC 6455, 7.4). */
		if (code == 1005 || code == 1006 || code == 1015 ||
		    code == 1004 || (code > 1011 && code < 3000))
			code = 1000;
		if (!wsproto_close_sent(w->ctx))
			(void)wsproto_close(w->ctx, code, m->ws_control.ptr,
			    m->ws_control.len);
		if (!w->down_closed)
			ws_close_wait(w);
		if (w->over)
			return;
		ws_send(w);
		ws_check_done(w);
		return;
	}
	if (w->state != WS_OPEN || w->guest_closed ||
	    wsproto_close_sent(w->ctx))
		return;
	/* Outside flow control: while the upstream is backed up, a ping or
	 * pong is not queued (RFC 6455 lets a pong answer only the latest
	 * ping), so a guest cannot grow the queue without bound. */
	if (evbuffer_get_length(bufferevent_get_output(w->up)) >=
		RELAY_UP_HIGH ||
	    wsproto_queued_count(w->ctx) >= WSOCK_CONTROL_MAX) {
		return;
	}
	(void)wsproto_queue(w->ctx,
	    m->ws_control.opcode == PROTO_WS_PING ? WSPROTO_PING :
						    WSPROTO_PONG,
	    m->ws_control.ptr, m->ws_control.len);
	ws_send(w);
}

/* Memory was given back somewhere: take what waited for it. */
static void
ws_mem_wake(void *arg)
{
	struct wsock *w = arg;

	if (w->over)
		return;
	ws_credit(w);
	if (!w->over && w->state == WS_OPEN)
		ws_read_resume(w);
}

void
wsock_flush(struct wsock *w)
{
	if (w->over)
		return;
	ws_push(w);
	if (!w->over && w->state == WS_OPEN && !w->read_paused &&
	    evbuffer_get_length(bufferevent_get_input(w->up)) > 0)
		ws_read(w);
}

void
wsock_detach(struct wsock *w, uint16_t code)
{
	if (w->over)
		return;
	w->detached = 1;
	w->guest_closed = 1; /* nothing more is taken from it */
	if (w->state != WS_OPEN) {
		ws_over(w, 0);
		return;
	}
	ws_push(w); /* drops what waits for the guest; may end w */
	if (w->over)
		return;
	if (!wsproto_close_sent(w->ctx) && !w->up_eof)
		(void)wsproto_close(w->ctx, code, NULL, 0);
	if (w->close_code == 0)
		w->close_code = code;
	ws_close_wait(w); /* a peer that never drains its input ends too */
	if (w->over)
		return;
	if (w->read_paused) {
		w->read_paused = 0;
		(void)bufferevent_enable(w->up, EV_READ);
	}
	ws_send(w);
	ws_check_done(w);
}

/* ---- Start, counters, free --------------------------------------------- */

static int
ws_write_head(struct wsock *w, const struct wsock_params *p)
{
	struct evbuffer *out = bufferevent_get_output(w->up);
	size_t i, plen = 0;
	int rc;

	if (wsproto_key_new(w->key) != 0)
		return EGRESS_ERR_UNAVAILABLE;
	rc = evbuffer_add(out, "GET ", 4) |
	    evbuffer_add(out, p->path, p->path_len);
	if (evbuffer_add_printf(out,
		" HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
		"Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
		"Sec-WebSocket-Version: 13\r\n",
		p->host, w->key) < 0)
		rc = -1;
	for (i = 0; i < p->nheaders; i++) {
		const struct http1_header *h = &p->headers[i];

		rc |= evbuffer_add(out, h->name, h->name_len) |
		    evbuffer_add(out, ": ", 2) |
		    evbuffer_add(out, h->value, h->value_len) |
		    evbuffer_add(out, "\r\n", 2);
		if (http1_header_is(h, "Sec-WebSocket-Protocol"))
			plen += h->value_len + 1;
	}
	rc |= evbuffer_add(out, "\r\n", 2);
	if (rc != 0)
		return EGRESS_ERR_NOMEM;
	if (plen == 0)
		return 0;
	if ((w->protos = calloc(1, plen)) == NULL)
		return EGRESS_ERR_NOMEM;
	for (i = 0; i < p->nheaders; i++) {
		const struct http1_header *h = &p->headers[i];

		if (!http1_header_is(h, "Sec-WebSocket-Protocol"))
			continue;
		if (w->protos[0] != '\0')
			strcat(w->protos, ",");
		strncat(w->protos, h->value, h->value_len);
	}
	return 0;
}

int
wsock_start(const struct wsock_params *p, struct bufferevent *bev,
    wsock_end_fn end, void *arg, struct wsock **ret)
{
	struct wsock *w;
	int err;

	if (p == NULL || p->base == NULL || p->g == NULL || p->st == NULL ||
	    p->host == NULL || p->path == NULL || end == NULL || ret == NULL) {
		bufferevent_free(bev);
		return EGRESS_ERR_INVALID;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		bufferevent_free(bev);
		return EGRESS_ERR_NOMEM;
	}
	w->base = p->base;
	w->b = p->b;
	w->mem.wake = ws_mem_wake;
	w->mem.arg = w;
	w->g = p->g;
	w->st = p->st;
	w->up = bev;
	w->end = end;
	w->arg = arg;
	w->activity = p->activity;
	w->idle_ms = p->idle_ms;
	w->max_message = p->max_message != 0 ?
	    p->max_message :
	    WSOCK_MAX_MESSAGE_DEFAULT;
	w->last_ms = broker_now_ms();
	if (p->lifetime_ms != 0)
		w->deadline_ms = w->last_ms + p->lifetime_ms;
	if (p->handshake_ms != 0)
		w->hs_deadline_ms = w->last_ms + p->handshake_ms;
	if ((w->down = evbuffer_new()) == NULL ||
	    (w->msg = evbuffer_new()) == NULL ||
	    (w->timer = evtimer_new(p->base, ws_timer_cb, w)) == NULL ||
	    ws_arm(w) != 0) {
		wsock_free(w);
		return EGRESS_ERR_NOMEM;
	}
	if ((err = ws_write_head(w, p)) != 0) {
		wsock_free(w);
		return err;
	}
	bufferevent_setcb(bev, ws_read_cb, ws_write_cb, ws_event_cb, w);
	bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
	if (bufferevent_enable(bev, EV_READ | EV_WRITE) != 0) {
		wsock_free(w);
		return EGRESS_ERR_NOMEM;
	}
	*ret = w;
	return 0;
}

int
wsock_is_open(const struct wsock *w)
{
	return w->ctx != NULL;
}

int
wsock_status(const struct wsock *w)
{
	return w->status;
}

unsigned
wsock_close_code(const struct wsock *w)
{
	if (w->close_code != 0)
		return w->close_code;
	if (w->ctx != NULL && wsproto_close_sent(w->ctx))
		return wsproto_code_sent(w->ctx);
	return 0;
}

uint64_t
wsock_bytes_up(const struct wsock *w)
{
	return w->bytes_up;
}

uint64_t
wsock_bytes_down(const struct wsock *w)
{
	return w->bytes_down;
}

uint64_t
wsock_msgs_up(const struct wsock *w)
{
	return w->msgs_up;
}

uint64_t
wsock_msgs_down(const struct wsock *w)
{
	return w->msgs_down;
}

static void
ws_up_free_cb(evutil_socket_t fd, short what, void *arg)
{
	bufferevent_free(arg);
}

static void
ws_struct_free_cb(evutil_socket_t fd, short what, void *arg)
{
	free(arg);
}

void
wsock_free(struct wsock *w)
{
	if (w == NULL)
		return;
	if (w->b != NULL)
		broker_mem_trim(w->b, w->g->ops->instance(w->g->ctx), &w->mem,
		    0, 1);
	bufferevent_setcb(w->up, NULL, NULL, NULL, NULL);
	(void)bufferevent_disable(w->up, EV_READ | EV_WRITE);
	if (event_base_once(w->base, -1, EV_TIMEOUT, ws_up_free_cb, w->up,
		&zero_tv) != 0)
		bufferevent_free(w->up);
	if (w->timer != NULL)
		event_free(w->timer);
	if (w->ctx != NULL)
		wsproto_free(w->ctx);
	while (w->qhead != NULL)
		ws_item_pop(w);
	if (w->down != NULL)
		evbuffer_free(w->down);
	if (w->msg != NULL)
		evbuffer_free(w->msg);
	free(w->protos);
	w->timer = NULL;
	w->ctx = NULL;
	w->down = w->msg = NULL;
	w->protos = NULL;
	w->over = 1;
	/* The struct itself outlives the call by one loop turn: a caller up
	 * the stack that ended the stream (end frees it) still reads
	 * w->over, and returns. */
	if (event_base_once(w->base, -1, EV_TIMEOUT, ws_struct_free_cb, w,
		&zero_tv) != 0)
		free(w);
}
