/* SPDX-License-Identifier: ISC */
/*
 * The libegress client: one connection to egressd carrying many request
 * streams, driven either by blocking calls or by egress_client_step().
 * All state of a client and its requests sits under one mutex. Progress
 * (read, dispatch, send queued frames, expire deadlines) is one function,
 * progress_locked(), that any caller runs with the lock held and that
 * never blocks: the socket is only used with MSG_DONTWAIT. A blocking call
 * that must wait becomes the one "poller" of the client (it polls the
 * socket and an eventfd with the lock released) or, when another thread
 * already polls, waits on the condition variable; whoever changes state
 * wakes the poller through the eventfd and the waiters through the
 * condition variable. Flow control follows proto/: the connection window
 * is credited when DATA reaches a request's buffer (each buffer is bounded
 * by its stream window), the stream window when the application reads.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <egress/egress.h>

#include "proto/proto.h"
#include "shim/shim.h"

/* A byte buffer: the live bytes are p[off..len). */
struct buf {
	uint8_t *p;
	size_t off;
	size_t len;
	size_t cap;
};

struct egress_request {
	struct egress_client *c;
	struct egress_request *prev, *next;
	struct proto_stream ps;
	int held;	     /* head not released for sending */
	int started;	     /* REQUEST sent: ps is live */
	uint8_t *head_frame; /* encoded REQUEST, until sent */
	size_t head_len;
	uint8_t *fin_frame; /* encoded TRAILERS, until head sent */
	size_t fin_len;
	int finished; /* egress_request_finish() called */
	int resp;     /* the response head arrived */
	int status;
	struct egress_header *hdrs;
	size_t nhdrs;
	struct egress_header *trls;
	size_t ntrls;
	int body_end; /* the response ended complete */
	int err;
	char msg[EGRESS_MESSAGE_MAX + 1];
	struct buf in;	   /* response body not yet read */
	uint64_t deadline; /* monotonic ms; 0: none */
	egress_request_cb *cb;
	void *arg;
	unsigned int events; /* due to the callback */
	int want_writable;
};

struct egress_client {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int fd;
	int wakefd;
	int err;      /* why the connection closed, or 0 */
	int dirty;    /* state changed in this progress */
	int polling;  /* a thread is inside poll() */
	int poll_out; /* ... and it polls for POLLOUT */
	struct proto_conn pc;
	struct buf out;
	struct buf in;
	struct egress_request *head, *tail;
	struct proto_msg msg;  /* encode scratch */
	struct proto_msg rmsg; /* decode scratch */
};

/* ---- Buffers ---------------------------------------------------------- */

static int
buf_reserve(struct buf *b, size_t n)
{
	size_t live, cap;
	uint8_t *p;

	if (b->off > 0 && (b->off == b->len || b->cap - b->len < n)) {
		live = b->len - b->off;
		memmove(b->p, b->p + b->off, live);
		b->off = 0;
		b->len = live;
	}
	if (b->cap - b->len >= n)
		return 0;
	cap = b->cap ? b->cap : 4096;
	while (cap - b->len < n)
		cap *= 2;
	p = realloc(b->p, cap);
	if (p == NULL)
		return EGRESS_ERR_NOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

static size_t
buf_size(const struct buf *b)
{
	return b->len - b->off;
}

static void
buf_consume(struct buf *b, size_t n)
{
	b->off += n;
	if (b->off == b->len)
		b->off = b->len = 0;
}

static void
buf_free(struct buf *b)
{
	free(b->p);
	b->p = NULL;
	b->off = b->len = b->cap = 0;
}

/* ---- Small helpers ---------------------------------------------------- */

static void
kick(struct egress_client *c)
{
	uint64_t one = 1;

	(void)!write(c->wakefd, &one, sizeof(one));
}

/* State changed outside the poller: wake everyone who waits. */
static void
notify_locked(struct egress_client *c)
{
	(void)pthread_cond_broadcast(&c->cv);
	if (c->polling)
		kick(c);
}

static void
req_event(struct egress_request *req, unsigned int ev)
{
	if (req->cb != NULL)
		req->events |= ev;
	req->c->dirty = 1;
}

/* Fail req with err (and the broker's message, if any). */
static void
req_fail(struct egress_request *req, int err, const char *msg, size_t len)
{
	if (req->err != 0 || req->body_end)
		return;
	req->err = err;
	shim_set_message(req->msg, err, msg, len);
	free(req->head_frame);
	req->head_frame = NULL;
	free(req->fin_frame);
	req->fin_frame = NULL;
	req_event(req,
	    EGRESS_EV_READABLE | EGRESS_EV_DONE |
		(req->resp ? 0 : EGRESS_EV_RESPONSE));
}

static struct egress_request *
find_stream(struct egress_client *c, uint32_t id)
{
	struct egress_request *r;

	for (r = c->head; r != NULL; r = r->next)
		if (r->started && r->ps.id == id)
			return r;
	return NULL;
}

static void conn_fail(struct egress_client *, int, const char *, size_t);

/*
 * Check m against the state table, then encode it at the end of the
 * output buffer. s is the stream for stream frames.
 */
static int
out_frame(struct egress_client *c, struct proto_stream *s,
    const struct proto_msg *m)
{
	int size, rv;

	if (c->err != 0)
		return c->err;
	size = proto_encode_size(m, NULL);
	if (size < 0)
		return size;
	if (buf_size(&c->out) + (size_t)size > SHIM_OUT_HARD) {
		conn_fail(c, EGRESS_ERR_PROTOCOL, NULL, 0);
		return EGRESS_ERR_PROTOCOL;
	}
	ANALYZER_STORED_BEGIN
	if (buf_reserve(&c->out, (size_t)size) != 0)
		ANALYZER_STORED_END
	return EGRESS_ERR_NOMEM;
	rv = proto_conn_send(&c->pc, s, m, NULL);
	if (rv < 0)
		return rv;
	rv = proto_encode(m, c->out.p + c->out.len, (size_t)size, NULL);
	if (rv < 0)
		return rv; /* not reached: the size check passed */
	c->out.len += (size_t)rv;
	return 0;
}

static int
out_window_update(struct egress_client *c, struct proto_stream *s, uint32_t id,
    uint32_t inc)
{
	struct proto_msg *m = &c->msg;

	memset(m, 0, offsetof(struct proto_msg, headers));
	m->type = PROTO_MSG_WINDOW_UPDATE;
	m->stream = id;
	m->window_update.increment = inc;
	return out_frame(c, s, m);
}

/* Queue a connection WINDOW_UPDATE when one is due. */
static void
credit_conn(struct egress_client *c, uint32_t n)
{
	uint32_t inc = 0;

	if (proto_conn_consumed(&c->pc, NULL, n, &inc, NULL) != 0) {
		conn_fail(c, EGRESS_ERR_PROTOCOL, NULL, 0);
		return;
	}
	if (inc > 0)
		(void)out_window_update(c, NULL, 0, inc);
}

/* The application consumed n bytes of req's body: credit the stream. */
static void
credit_stream(struct egress_request *req, uint32_t n)
{
	struct proto_stream *s = &req->ps;
	uint32_t due;

	if (s->state != PROTO_STREAM_OPEN &&
	    s->state != PROTO_STREAM_HALF_CLOSED_LOCAL)
		return;
	s->flow.unacked += n;
	if (s->flow.unacked < PROTO_STREAM_WINDOW / 2)
		return;
	due = s->flow.unacked;
	(void)out_window_update(req->c, s, s->id, due);
}

/* Reset req's stream with code, or drop its unsent head. */
static void
req_reset(struct egress_request *req, uint32_t code)
{
	struct egress_client *c = req->c;
	struct proto_msg *m = &c->msg;

	free(req->head_frame);
	req->head_frame = NULL;
	free(req->fin_frame);
	req->fin_frame = NULL;
	if (!req->started || req->ps.state == PROTO_STREAM_CLOSED ||
	    req->ps.state == PROTO_STREAM_IDLE || c->err != 0)
		return;
	memset(m, 0, offsetof(struct proto_msg, headers));
	m->type = PROTO_MSG_RESET;
	m->stream = req->ps.id;
	m->reset.code = code;
	(void)out_frame(c, &req->ps, m);
}

/* The connection is unusable: fail every request that is not done. */
static void
conn_fail(struct egress_client *c, int err, const char *msg, size_t len)
{
	struct egress_request *r;

	if (c->err != 0)
		return;
	c->err = err;
	(void)shutdown(c->fd, SHUT_RDWR);
	c->out.off = c->out.len = 0;
	for (r = c->head; r != NULL; r = r->next)
		req_fail(r, err, msg, len);
	c->dirty = 1;
}

/* ---- Output ----------------------------------------------------------- */

static void
flush_locked(struct egress_client *c)
{
	ssize_t n;

	while (c->err == 0 && buf_size(&c->out) > 0) {
		n = send(c->fd, c->out.p + c->out.off, buf_size(&c->out),
		    MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			conn_fail(c, EGRESS_ERR_UNAVAILABLE, NULL, 0);
			return;
		}
		buf_consume(&c->out, (size_t)n);
	}
}

/* Append a pre-encoded frame for stream id (its header patched). */
static int
out_raw(struct egress_client *c, struct proto_stream *s, uint8_t *frame,
    size_t len, uint8_t type, uint32_t id)
{
	struct proto_msg *m = &c->msg;
	int flags, version, rv;

	if ((flags = proto_hdr_flags(frame, len)) < 0 ||
	    (version = proto_hdr_version(frame, len)) < 0)
		return EGRESS_ERR_INVALID;
	memset(m, 0, offsetof(struct proto_msg, headers));
	m->type = type;
	m->flags = (uint8_t)flags;
	m->version = (uint8_t)version;
	m->stream = id;
	/* The state table reads a REQUEST's transport (websocket streams). */
	if (type == PROTO_MSG_REQUEST && len > PROTO_HDR_SIZE)
		m->request.transport = frame[PROTO_HDR_SIZE];
	ANALYZER_STORED_BEGIN
	if (buf_reserve(&c->out, len) != 0)
		ANALYZER_STORED_END
	return EGRESS_ERR_NOMEM;
	/* Patched before the state changes: nothing to undo on failure. */
	if ((rv = proto_hdr_set_stream(frame, len, id)) < 0)
		return rv;
	rv = proto_conn_send(&c->pc, s, m, NULL);
	if (rv < 0)
		return rv;
	memcpy(c->out.p + c->out.len, frame, len);
	c->out.len += len;
	return 0;
}

/* Send queued request heads, in the order they were started. */
static void
send_heads(struct egress_client *c)
{
	struct egress_request *r;
	uint32_t id;
	int rv;

	if (c->err != 0 || c->pc.state != PROTO_CONN_OPEN)
		return;
	for (r = c->head; r != NULL; r = r->next) {
		if (r->started || r->head_frame == NULL || r->held)
			continue;
		if (buf_size(&c->out) >= SHIM_OUT_HIGH)
			return;
		if (proto_conn_next_id(&c->pc, &id) != 0) {
			req_fail(r, EGRESS_ERR_UNAVAILABLE, NULL, 0);
			continue;
		}
		proto_stream_init(&r->ps, id);
		rv = out_raw(c, &r->ps, r->head_frame, r->head_len,
		    PROTO_MSG_REQUEST, id);
		if (rv == EGRESS_ERR_AGAIN)
			return; /* 256 streams open: wait */
		if (rv < 0) {
			/* A head of a newer version than the broker speaks
			 * (a tls profile): never sent without its field. */
			if (proto_hdr_version(r->head_frame, r->head_len) >
			    c->pc.version)
				rv = EGRESS_ERR_UNAVAILABLE;
			req_fail(r,
			    rv == EGRESS_ERR_NOMEM ||
				    rv == EGRESS_ERR_UNAVAILABLE ?
				rv :
				EGRESS_ERR_PROTOCOL,
			    NULL, 0);
			continue;
		}
		r->started = 1;
		free(r->head_frame);
		r->head_frame = NULL;
		if (r->fin_frame != NULL) {
			rv = out_raw(c, &r->ps, r->fin_frame, r->fin_len,
			    PROTO_MSG_TRAILERS, id);
			free(r->fin_frame);
			r->fin_frame = NULL;
			if (rv < 0)
				req_fail(r, EGRESS_ERR_NOMEM, NULL, 0);
		}
		c->dirty = 1;
	}
}

/* ---- Input ------------------------------------------------------------ */

/* Copy a header list into one block: array, then NUL-terminated bytes. */
static int
copy_headers(const struct proto_header *h, size_t n,
    struct egress_header **ret, size_t *ret_n)
{
	struct egress_header *a;
	size_t i, bytes = 0;
	char *p;

	for (i = 0; i < n; i++)
		bytes += h[i].name.len + h[i].value.len + 2;
	a = malloc(n * sizeof(*a) + bytes + 1);
	if (a == NULL)
		return EGRESS_ERR_NOMEM;
	p = (char *)(a + n);
	for (i = 0; i < n; i++) {
		a[i].name = p;
		a[i].name_len = h[i].name.len;
		if (h[i].name.len > 0)
			memcpy(p, h[i].name.ptr, h[i].name.len);
		p += h[i].name.len;
		*p++ = '\0';
		a[i].value = p;
		a[i].value_len = h[i].value.len;
		if (h[i].value.len > 0)
			memcpy(p, h[i].value.ptr, h[i].value.len);
		p += h[i].value.len;
		*p++ = '\0';
	}
	*ret = a;
	*ret_n = n;
	return 0;
}

static void
body_ended(struct egress_request *req)
{
	req->body_end = 1;
	req->deadline = 0;
	req_event(req, EGRESS_EV_READABLE | EGRESS_EV_DONE);
}

/* A websocket stream's input keeps each frame as a record (SHIM_WS_REC);
 * the broker's close is answered at once when we sent none. */
static void
ws_record(struct egress_client *c, struct egress_request *r,
    const struct proto_msg *m)
{
	int d = m->type == PROTO_MSG_DATA;
	const uint8_t *p = d ? m->data.ptr : m->ws_control.ptr;
	size_t n = d ? m->data.len : m->ws_control.len;
	uint8_t *h;

	if (d)
		credit_conn(c, (uint32_t)n);
	ANALYZER_STORED_BEGIN
	if (buf_reserve(&r->in, SHIM_WS_REC + n) != 0) {
		ANALYZER_STORED_END
		req_reset(r, PROTO_CODE_CANCELLED);
		req_fail(r, EGRESS_ERR_NOMEM, NULL, 0);
		return;
	}
	h = r->in.p + r->in.len;
	h[0] = m->type;
	h[1] = d ? m->flags : m->ws_control.opcode;
	h[2] = d ? 0 : (uint8_t)(m->ws_control.code >> 8);
	h[3] = d ? 0 : (uint8_t)m->ws_control.code;
	h[4] = (uint8_t)(n >> 24);
	h[5] = (uint8_t)(n >> 16);
	h[6] = (uint8_t)(n >> 8);
	h[7] = (uint8_t)n;
	if (n > 0)
		memcpy(h + SHIM_WS_REC, p, n);
	r->in.len += SHIM_WS_REC + n;
	req_event(r, EGRESS_EV_READABLE);
	if (m->type == PROTO_MSG_WS_CONTROL &&
	    m->ws_control.opcode == PROTO_WS_CLOSE && !r->finished) {
		struct proto_msg *o = &c->msg;

		memset(o, 0, offsetof(struct proto_msg, headers));
		o->type = PROTO_MSG_WS_CONTROL;
		o->flags = PROTO_FLAG_END_STREAM;
		o->stream = r->ps.id;
		o->ws_control.opcode = PROTO_WS_CLOSE;
		if (out_frame(c, &r->ps, o) == 0)
			r->finished = 1;
	}
}

static void
dispatch_stream(struct egress_client *c, struct egress_request *r,
    const struct proto_msg *m)
{
	switch (m->type) {
	case PROTO_MSG_RESPONSE:
		ANALYZER_STORED_BEGIN
		if (copy_headers(m->headers, m->nheaders, &r->hdrs,
			&r->nhdrs) != 0) {
			ANALYZER_STORED_END
			req_reset(r, PROTO_CODE_CANCELLED);
			req_fail(r, EGRESS_ERR_NOMEM, NULL, 0);
			return;
		}
		r->resp = 1;
		r->status = m->response.status;
		req_event(r, EGRESS_EV_RESPONSE);
		break;
	case PROTO_MSG_DATA:
	case PROTO_MSG_WS_CONTROL:
		if (r->ps.messages) {
			ws_record(c, r, m);
			break;
		}
		if (r->ps.upgrade == PROTO_UPGRADE_ASKED) {
			/* Plaintext after the go-ahead: never delivered. */
			credit_conn(c, (uint32_t)m->data.len);
			req_reset(r, PROTO_CODE_CANCELLED);
			req_fail(r, EGRESS_ERR_TLS_FAILED, NULL, 0);
			return;
		}
		if (m->data.len > 0) {
			ANALYZER_STORED_BEGIN
			if (buf_reserve(&r->in, m->data.len) != 0) {
				ANALYZER_STORED_END
				req_reset(r, PROTO_CODE_CANCELLED);
				req_fail(r, EGRESS_ERR_NOMEM, NULL, 0);
				credit_conn(c, (uint32_t)m->data.len);
				return;
			}
			memcpy(r->in.p + r->in.len, m->data.ptr, m->data.len);
			r->in.len += m->data.len;
			credit_conn(c, (uint32_t)m->data.len);
			req_event(r, EGRESS_EV_READABLE);
		}
		break;
	case PROTO_MSG_TRAILERS:
		ANALYZER_STORED_BEGIN
		if (copy_headers(m->headers, m->nheaders, &r->trls,
			&r->ntrls) != 0) {
			ANALYZER_STORED_END
			req_fail(r, EGRESS_ERR_NOMEM, NULL, 0);
			return;
		}
		break;
	case PROTO_MSG_WINDOW_UPDATE:
		c->dirty = 1;
		return;
	case PROTO_MSG_STARTTLS:
		req_event(r, EGRESS_EV_WRITABLE);
		return;
	case PROTO_MSG_RESET:
		req_fail(r, shim_wire_err(m->reset.code), NULL, 0);
		return;
	case PROTO_MSG_ERROR:
		req_fail(r, shim_wire_err(m->error.code), m->error.message.ptr,
		    m->error.message.len);
		return;
	default:
		return;
	}
	if (m->flags & PROTO_FLAG_END_STREAM)
		body_ended(r);
}

static void
dispatch(struct egress_client *c, const struct proto_msg *m)
{
	struct egress_request *r = NULL;
	struct proto_msg *o;
	int rv;

	if (m->stream != 0)
		r = find_stream(c, m->stream);
	rv = proto_conn_recv(&c->pc, r != NULL ? &r->ps : NULL, m, NULL);
	if (rv < 0) {
		conn_fail(c, EGRESS_ERR_PROTOCOL, NULL, 0);
		return;
	}
	if (rv == PROTO_IGNORE || (m->stream != 0 && r == NULL)) {
		if (m->type == PROTO_MSG_DATA)
			credit_conn(c, 0);
		return;
	}
	c->dirty = 1;
	if (r != NULL) { /* m->stream != 0: found, or returned above */
		dispatch_stream(c, r, m);
		return;
	}
	switch (m->type) {
	case PROTO_MSG_ERROR:
		c->pc.state = PROTO_CONN_CLOSED;
		conn_fail(c, shim_wire_err(m->error.code),
		    m->error.message.ptr, m->error.message.len);
		break;
	case PROTO_MSG_GOAWAY:
		for (r = c->head; r != NULL; r = r->next)
			if (!r->started ||
			    proto_conn_is_refused(&c->pc, r->ps.id))
				req_fail(r, EGRESS_ERR_UNAVAILABLE, NULL, 0);
		break;
	case PROTO_MSG_PING:
		o = &c->msg;
		memset(o, 0, offsetof(struct proto_msg, headers));
		o->type = PROTO_MSG_PONG;
		memcpy(o->ping.opaque, m->ping.opaque, PROTO_PING_SIZE);
		(void)out_frame(c, NULL, o);
		break;
	default:
		break; /* HELLO, PONG, WINDOW_UPDATE: applied */
	}
}

/* Read what the socket has and dispatch every complete frame. */
static void
fill_locked(struct egress_client *c)
{
	size_t budget = SHIM_READ_BUDGET;
	struct proto_msg *m;
	ssize_t n;
	int rv, eof = 0;

	while (c->err == 0 && budget > 0 && !eof) {
		ANALYZER_STORED_BEGIN
		if (buf_reserve(&c->in, PROTO_FRAME_MAX) != 0) {
			ANALYZER_STORED_END
			conn_fail(c, EGRESS_ERR_NOMEM, NULL, 0);
			return;
		}
		n = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len,
		    MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			conn_fail(c, EGRESS_ERR_UNAVAILABLE, NULL, 0);
			return;
		}
		if (n == 0)
			eof = 1;
		c->in.len += (size_t)n;
		budget -= (size_t)n < budget ? (size_t)n : budget;
		/* Decode into rmsg: dispatch encodes replies into msg. */
		m = &c->rmsg;
		while (c->err == 0) {
			rv = proto_frame_decode(c->in.p + c->in.off,
			    buf_size(&c->in), m, NULL);
			if (rv == 0)
				break;
			if (rv < 0) {
				conn_fail(c, EGRESS_ERR_PROTOCOL, NULL, 0);
				break;
			}
			dispatch(c, m);
			buf_consume(&c->in, (size_t)rv);
		}
	}
	if (eof)
		conn_fail(c, EGRESS_ERR_UNAVAILABLE, NULL, 0);
}

static void
expire_locked(struct egress_client *c)
{
	struct egress_request *r;
	uint64_t now = 0;

	for (r = c->head; r != NULL; r = r->next) {
		if (r->deadline == 0 || r->err != 0 || r->body_end)
			continue;
		if (now == 0)
			now = shim_now_ms();
		if (now < r->deadline)
			continue;
		req_reset(r, PROTO_CODE_TIMEOUT);
		req_fail(r, EGRESS_ERR_TIMEOUT, NULL, 0);
	}
}

static size_t
out_room(const struct egress_client *c)
{
	size_t n = buf_size(&c->out);

	return n < SHIM_OUT_HIGH ? SHIM_OUT_HIGH - n : 0;
}

static int
can_write(const struct egress_request *r)
{
	return r->started && !r->finished && r->err == 0 &&
	    r->ps.upgrade != PROTO_UPGRADE_ASKED && out_room(r->c) > 0 &&
	    proto_conn_sendable(&r->c->pc, &r->ps) > 0;
}

/*
 * Make every bit of progress possible without blocking; wake the others
 * when something changed.
 */
static void
progress_locked(struct egress_client *c)
{
	struct egress_request *r;

	c->dirty = 0;
	flush_locked(c);
	fill_locked(c);
	send_heads(c);
	expire_locked(c);
	flush_locked(c);
	for (r = c->head; r != NULL; r = r->next) {
		if (r->cb != NULL && r->want_writable && !r->finished &&
		    r->err == 0 && (r->held || can_write(r))) {
			r->want_writable = 0;
			r->events |= EGRESS_EV_WRITABLE;
		}
	}
	if (c->dirty)
		notify_locked(c);
}

/* ---- Waiting ---------------------------------------------------------- */

enum wait_for {
	WAIT_HEAD,
	WAIT_READ,
	WAIT_WRITE,
	WAIT_UPGRADE,
};

static int
is_ready(const struct egress_request *r, enum wait_for w)
{
	if (r->err != 0 || r->c->err != 0)
		return 1;
	switch (w) {
	case WAIT_HEAD:
		return r->resp;
	case WAIT_READ:
		return buf_size(&r->in) > 0 || r->body_end;
	case WAIT_WRITE:
		return r->finished || can_write(r);
	case WAIT_UPGRADE:
		return r->ps.upgrade == PROTO_UPGRADE_DONE;
	}
	return 1;
}

static void
drain_wakefd(struct egress_client *c)
{
	uint64_t v;

	(void)!read(c->wakefd, &v, sizeof(v));
}

/*
 * Block until req is ready for w (or failed), with the lock held on entry
 * and on return.
 */
static void
wait_locked(struct egress_request *r, enum wait_for w)
{
	struct egress_client *c = r->c;
	struct pollfd pfd[2];
	struct timespec ts;
	uint64_t now;
	int timeout;

	for (;;) {
		progress_locked(c);
		if (is_ready(r, w))
			return;
		timeout = -1;
		if (r->deadline != 0) {
			now = shim_now_ms();
			if (now >= r->deadline)
				continue; /* expire_locked() fails it */
			timeout = r->deadline - now > INT_MAX ?
			    INT_MAX :
			    (int)(r->deadline - now);
		}
		if (!c->polling) {
			c->polling = 1;
			c->poll_out = buf_size(&c->out) > 0;
			pfd[0].fd = c->fd;
			pfd[0].events = POLLIN | (c->poll_out ? POLLOUT : 0);
			pfd[1].fd = c->wakefd;
			pfd[1].events = POLLIN;
			pfd[0].revents = pfd[1].revents = 0;
			(void)pthread_mutex_unlock(&c->mu);
			(void)poll(pfd, 2, timeout);
			(void)pthread_mutex_lock(&c->mu);
			if (pfd[1].revents & POLLIN)
				drain_wakefd(c);
			c->polling = 0;
			(void)pthread_cond_broadcast(&c->cv);
			continue;
		}
		if (buf_size(&c->out) > 0 && !c->poll_out)
			kick(c);
		if (timeout < 0) {
			(void)pthread_cond_wait(&c->cv, &c->mu);
			continue;
		}
		(void)clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += timeout / 1000;
		ts.tv_nsec += (long)(timeout % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		(void)pthread_cond_timedwait(&c->cv, &c->mu, &ts);
	}
}

/* ---- Clients ---------------------------------------------------------- */

int
shim_client_new(int fd, struct egress_client **ret)
{
	struct egress_client *c;
	pthread_condattr_t ca;
	struct proto_msg *m;
	int rv = EGRESS_ERR_NOMEM;

	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return EGRESS_ERR_NOMEM;
	c->fd = fd;
	c->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->wakefd < 0) {
		free(c);
		return EGRESS_ERR_IO;
	}
	if (pthread_mutex_init(&c->mu, NULL) != 0)
		goto out_fd;
	if (pthread_condattr_init(&ca) != 0)
		goto out_mu;
	(void)pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&c->cv, &ca) != 0) {
		(void)pthread_condattr_destroy(&ca);
		goto out_mu;
	}
	(void)pthread_condattr_destroy(&ca);
	proto_conn_init(&c->pc, PROTO_ROLE_CLIENT);
	m = &c->msg;
	memset(m, 0, offsetof(struct proto_msg, headers));
	m->type = PROTO_MSG_HELLO;
	m->hello.version = PROTO_VERSION;
	rv = out_frame(c, NULL, m);
	if (rv < 0)
		goto out_cv;
	flush_locked(c);
	*ret = c;
	return 0;
out_cv:
	(void)pthread_cond_destroy(&c->cv);
out_mu:
	(void)pthread_mutex_destroy(&c->mu);
out_fd:
	(void)close(c->wakefd);
	buf_free(&c->out);
	free(c);
	return rv;
}

static void
req_destroy(struct egress_request *r)
{
	free(r->head_frame);
	free(r->fin_frame);
	free(r->hdrs);
	free(r->trls);
	buf_free(&r->in);
	free(r);
}

void
egress_client_free(struct egress_client *c)
{
	struct egress_request *r, *next;

	if (c == NULL)
		return;
	for (r = c->head; r != NULL; r = next) {
		next = r->next;
		req_destroy(r);
	}
	(void)close(c->fd);
	(void)close(c->wakefd);
	buf_free(&c->out);
	buf_free(&c->in);
	(void)pthread_cond_destroy(&c->cv);
	(void)pthread_mutex_destroy(&c->mu);
	free(c);
}

int
egress_client_fd(const struct egress_client *c)
{
	return c->fd;
}

int
egress_client_want_write(struct egress_client *c)
{
	int rv;

	(void)pthread_mutex_lock(&c->mu);
	rv = c->err == 0 && buf_size(&c->out) > 0;
	(void)pthread_mutex_unlock(&c->mu);
	return rv;
}

int
egress_client_timeout_ms(struct egress_client *c)
{
	struct egress_request *r;
	uint64_t min = 0, now;
	int rv = -1;

	(void)pthread_mutex_lock(&c->mu);
	for (r = c->head; r != NULL; r = r->next)
		if (r->deadline != 0 && r->err == 0 && !r->body_end &&
		    (min == 0 || r->deadline < min))
			min = r->deadline;
	if (min != 0) {
		now = shim_now_ms();
		rv = now >= min		? 0 :
		    min - now > INT_MAX ? INT_MAX :
					  (int)(min - now);
	}
	(void)pthread_mutex_unlock(&c->mu);
	return rv;
}

int
egress_client_step(struct egress_client *c)
{
	struct egress_request *r;
	egress_request_cb *cb;
	unsigned int ev;
	void *arg;
	int rv;

	(void)pthread_mutex_lock(&c->mu);
	progress_locked(c);
	for (;;) {
		for (r = c->head; r != NULL; r = r->next)
			if (r->events != 0 && r->cb != NULL)
				break;
		if (r == NULL)
			break;
		ev = r->events;
		r->events = 0;
		cb = r->cb;
		arg = r->arg;
		(void)pthread_mutex_unlock(&c->mu);
		cb(r, ev, arg);
		(void)pthread_mutex_lock(&c->mu);
	}
	rv = c->err;
	(void)pthread_mutex_unlock(&c->mu);
	return rv;
}

int
egress_client_error(struct egress_client *c)
{
	int rv;

	(void)pthread_mutex_lock(&c->mu);
	rv = c->err;
	(void)pthread_mutex_unlock(&c->mu);
	return rv;
}

/* ---- Requests --------------------------------------------------------- */

int
shim_request_open(struct egress_client *c, struct proto_msg *m,
    egress_request_cb *cb, void *arg, struct egress_request **ret_req)
{
	struct egress_request *r;
	int rv;

	m->type = PROTO_MSG_REQUEST;
	m->stream = 1;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return EGRESS_ERR_NOMEM;
	rv = shim_encode_alloc(m, &r->head_frame, &r->head_len);
	if (rv < 0)
		goto out;
	r->c = c;
	r->cb = cb;
	r->arg = arg;
	r->want_writable = 1;
	r->held = 1;
	if (m->request.timeouts.total_ms > 0)
		r->deadline = shim_now_ms() + m->request.timeouts.total_ms;

	(void)pthread_mutex_lock(&c->mu);
	if (c->err != 0 || c->pc.state == PROTO_CONN_DRAINING ||
	    c->pc.state == PROTO_CONN_CLOSED ||
	    c->pc.last_stream >= PROTO_STREAM_ID_MAX) {
		(void)pthread_mutex_unlock(&c->mu);
		rv = EGRESS_ERR_UNAVAILABLE;
		goto out;
	}
	r->prev = c->tail;
	if (c->tail != NULL)
		c->tail->next = r;
	else
		c->head = r;
	c->tail = r;
	send_heads(c);
	flush_locked(c);
	notify_locked(c);
	(void)pthread_mutex_unlock(&c->mu);
	*ret_req = r;
	r = NULL;
	rv = 0;
out:
	if (r != NULL)
		req_destroy(r);
	return rv;
}

/*
 * Let a request's head go out: it is held from egress_request_start() to
 * the first write, finish, wait or read, so that a request finished
 * before any body carries END_STREAM on its REQUEST frame (the broker then
 * knows the body is empty). A held request with a callback gets its first
 * EGRESS_EV_WRITABLE at once, so that its first write releases it.
 */
static void
release_head(struct egress_request *r)
{
	if (!r->held)
		return;
	r->held = 0;
	send_heads(r->c);
}

/* Queue as much of buf as fits now; return the count. */
static size_t
write_some(struct egress_request *r, const uint8_t *buf, size_t len,
    uint8_t dflags, int *ret_sent)
{
	struct egress_client *c = r->c;
	struct proto_msg *m = &c->msg;
	size_t n, room;
	uint32_t win;

	if (!r->started || c->err != 0)
		return 0;
	win = proto_conn_sendable(&c->pc, &r->ps);
	room = out_room(c);
	n = len < win ? len : win;
	if (room <= PROTO_HDR_SIZE)
		return 0;
	if (n > room - PROTO_HDR_SIZE)
		n = room - PROTO_HDR_SIZE;
	if (n == 0 && !(len == 0 && (dflags & PROTO_FLAG_MSG_END)))
		return 0;
	if (n < len)
		dflags &=
		    (uint8_t)~PROTO_FLAG_MSG_END; /* not the last piece */
	if (buf_reserve(&c->out, PROTO_HDR_SIZE + n) != 0)
		return 0;
	memset(m, 0, offsetof(struct proto_msg, headers));
	m->type = PROTO_MSG_DATA;
	m->flags = dflags;
	m->stream = r->ps.id;
	m->data.len = n;
	if (proto_conn_send(&c->pc, &r->ps, m, NULL) != 0)
		return 0;
	(void)proto_hdr_encode(c->out.p + c->out.len, PROTO_MSG_DATA, dflags,
	    r->ps.id, (uint32_t)n, NULL);
	memcpy(c->out.p + c->out.len + PROTO_HDR_SIZE, buf, n);
	c->out.len += PROTO_HDR_SIZE + n;
	*ret_sent = 1;
	return n;
}

int
egress_request_write(struct egress_request *r, const void *buf, size_t len,
    int flags)
{
	return shim_request_write(r, buf, len, flags, 0);
}

int
shim_request_write(struct egress_request *r, const void *buf, size_t len,
    int flags, uint8_t dflags)
{
	struct egress_client *c;
	size_t done = 0, n;
	int rv, sent = 0;

	if (r == NULL || (buf == NULL && len > 0))
		return EGRESS_ERR_INVALID;
	if (len > INT_MAX)
		return EGRESS_ERR_TOO_BIG;
	c = r->c;
	(void)pthread_mutex_lock(&c->mu);
	release_head(r);
	for (;;) {
		if (r->err != 0 || c->err != 0) {
			rv = r->err != 0 ? r->err : c->err;
			break;
		}
		if (r->finished) {
			rv = EGRESS_ERR_CLOSED;
			break;
		}
		n = write_some(r, (const uint8_t *)buf + done, len - done,
		    dflags, &sent);
		done += n;
		if (sent)
			flush_locked(c);
		/* An empty message still needs its one frame. */
		if (done == len && (sent || !(dflags & PROTO_FLAG_MSG_END))) {
			rv = (int)len;
			break;
		}
		if (flags & EGRESS_NONBLOCK) {
			r->want_writable = 1;
			rv = done > 0 ? (int)done : EGRESS_ERR_AGAIN;
			break;
		}
		wait_locked(r, WAIT_WRITE);
	}
	if (done > 0)
		notify_locked(c);
	(void)pthread_mutex_unlock(&c->mu);
	return rv;
}

int
egress_request_finish(struct egress_request *r,
    const struct egress_header *trailers, size_t ntrailers)
{
	struct egress_client *c;
	struct proto_msg *m = NULL;
	uint8_t *frame = NULL;
	size_t flen = 0;
	int rv;

	if (r == NULL)
		return EGRESS_ERR_INVALID;
	c = r->c;
	if (ntrailers > 0) {
		m = calloc(1, sizeof(*m));
		if (m == NULL)
			return EGRESS_ERR_NOMEM;
		m->type = PROTO_MSG_TRAILERS;
		m->flags = PROTO_FLAG_END_STREAM;
		m->stream = 1;
		rv = shim_fill_headers(m, trailers, ntrailers);
		if (rv == 0)
			rv = shim_encode_alloc(m, &frame, &flen);
		free(m);
		if (rv < 0)
			return rv;
	}
	(void)pthread_mutex_lock(&c->mu);
	if (r->err != 0) {
		rv = r->err;
		goto out;
	}
	if (r->finished) {
		rv = EGRESS_ERR_CLOSED;
		goto out;
	}
	if (!r->started) {
		/* The head is still queued: end the stream with it. */
		if (frame == NULL &&
		    (rv = proto_hdr_add_flags(r->head_frame, r->head_len,
			 PROTO_FLAG_END_STREAM)) < 0)
			goto out;
		r->fin_frame = frame;
		r->fin_len = flen;
		frame = NULL;
	} else if (frame != NULL) {
		rv = out_raw(c, &r->ps, frame, flen, PROTO_MSG_TRAILERS,
		    r->ps.id);
		if (rv < 0)
			goto out;
	} else {
		if (buf_reserve(&c->out, PROTO_HDR_SIZE) != 0) {
			rv = EGRESS_ERR_NOMEM;
			goto out;
		}
		m = &c->msg;
		memset(m, 0, offsetof(struct proto_msg, headers));
		m->type = PROTO_MSG_DATA;
		m->flags = PROTO_FLAG_END_STREAM;
		m->stream = r->ps.id;
		rv = out_frame(c, &r->ps, m);
		m = NULL;
		if (rv < 0)
			goto out;
	}
	r->finished = 1;
	release_head(r);
	flush_locked(c);
	notify_locked(c);
	rv = 0;
out:
	(void)pthread_mutex_unlock(&c->mu);
	free(frame);
	return rv;
}

int
egress_response_wait(struct egress_request *r, int flags)
{
	struct egress_client *c;
	int rv;

	if (r == NULL)
		return EGRESS_ERR_INVALID;
	c = r->c;
	(void)pthread_mutex_lock(&c->mu);
	release_head(r);
	if (!(flags & EGRESS_NONBLOCK))
		wait_locked(r, WAIT_HEAD);
	if (r->resp)
		rv = r->status;
	else if (r->err != 0)
		rv = r->err;
	else
		rv = EGRESS_ERR_AGAIN;
	(void)pthread_mutex_unlock(&c->mu);
	return rv;
}

const struct egress_header *
egress_response_headers(struct egress_request *r, size_t *ret_n)
{
	const struct egress_header *h;
	size_t n;

	(void)pthread_mutex_lock(&r->c->mu);
	h = r->resp ? r->hdrs : NULL;
	n = r->resp ? r->nhdrs : 0;
	(void)pthread_mutex_unlock(&r->c->mu);
	if (ret_n != NULL)
		*ret_n = n;
	return h;
}

int
egress_response_read(struct egress_request *r, void *buf, size_t len,
    int flags)
{
	struct egress_client *c;
	size_t n;
	int rv;

	if (r == NULL || (buf == NULL && len > 0))
		return EGRESS_ERR_INVALID;
	if (len > INT_MAX)
		len = INT_MAX;
	c = r->c;
	(void)pthread_mutex_lock(&c->mu);
	release_head(r);
	if (!(flags & EGRESS_NONBLOCK))
		wait_locked(r, WAIT_READ);
	n = buf_size(&r->in);
	if (n > 0 && len > 0) {
		if (n > len)
			n = len;
		memcpy(buf, r->in.p + r->in.off, n);
		buf_consume(&r->in, n);
		if (r->started && c->err == 0)
			credit_stream(r, (uint32_t)n);
		flush_locked(c);
		rv = (int)n;
	} else if (n > 0)
		rv = 0; /* len 0 */
	else if (r->err != 0)
		rv = r->err;
	else if (r->body_end)
		rv = 0;
	else
		rv = EGRESS_ERR_AGAIN;
	(void)pthread_mutex_unlock(&c->mu);
	return rv;
}

const struct egress_header *
egress_response_trailers(struct egress_request *r, size_t *ret_n)
{
	const struct egress_header *h = NULL;
	size_t n = 0;

	(void)pthread_mutex_lock(&r->c->mu);
	if (r->body_end && r->trls != NULL) {
		h = r->trls;
		n = r->ntrls;
	}
	(void)pthread_mutex_unlock(&r->c->mu);
	if (ret_n != NULL)
		*ret_n = n;
	return h;
}

int
egress_request_cancel(struct egress_request *r)
{
	struct egress_client *c;

	if (r == NULL)
		return EGRESS_ERR_INVALID;
	c = r->c;
	(void)pthread_mutex_lock(&c->mu);
	if (r->err == 0 && !r->body_end) {
		req_reset(r, PROTO_CODE_CANCELLED);
		req_fail(r, EGRESS_ERR_CANCELLED, NULL, 0);
		flush_locked(c);
		notify_locked(c);
	}
	(void)pthread_mutex_unlock(&c->mu);
	return 0;
}

int
egress_request_error(struct egress_request *r)
{
	int rv;

	(void)pthread_mutex_lock(&r->c->mu);
	rv = r->err;
	(void)pthread_mutex_unlock(&r->c->mu);
	return rv;
}

const char *
egress_request_message(struct egress_request *r)
{
	const char *s;

	(void)pthread_mutex_lock(&r->c->mu);
	s = r->msg;
	(void)pthread_mutex_unlock(&r->c->mu);
	return s;
}

void
egress_request_free(struct egress_request *r)
{
	struct egress_client *c;

	if (r == NULL)
		return;
	c = r->c;
	(void)pthread_mutex_lock(&c->mu);
	req_reset(r, PROTO_CODE_CANCELLED);
	if (r->prev != NULL)
		r->prev->next = r->next;
	else
		c->head = r->next;
	if (r->next != NULL)
		r->next->prev = r->prev;
	else
		c->tail = r->prev;
	flush_locked(c);
	notify_locked(c);
	(void)pthread_mutex_unlock(&c->mu);
	req_destroy(r);
}

int
shim_response_take(struct egress_request *r, int flags, shim_take_fn *fn,
    void *arg)
{
	struct egress_client *c;
	uint32_t credit = 0;
	size_t n;
	int rv;

	if (r == NULL || fn == NULL)
		return EGRESS_ERR_INVALID;
	c = r->c;
	(void)pthread_mutex_lock(&c->mu);
	release_head(r);
	if (!(flags & EGRESS_NONBLOCK))
		wait_locked(r, WAIT_READ);
	n = buf_size(&r->in);
	if (n > 0) {
		rv = fn(arg, r->in.p + r->in.off, n, &credit);
		if (rv > 0) {
			buf_consume(&r->in, (size_t)rv);
			if (r->started && c->err == 0 && credit > 0)
				credit_stream(r, credit);
			flush_locked(c);
		}
	} else if (r->err != 0)
		rv = r->err;
	else if (r->body_end)
		rv = EGRESS_ERR_CLOSED;
	else
		rv = EGRESS_ERR_AGAIN;
	(void)pthread_mutex_unlock(&c->mu);
	return rv;
}

int
shim_request_control(struct egress_request *r, struct proto_msg *m)
{
	struct egress_client *c;
	int rv;

	if (r == NULL)
		return EGRESS_ERR_INVALID;
	c = r->c;
	(void)pthread_mutex_lock(&c->mu);
	release_head(r);
	if (r->finished)
		rv = EGRESS_ERR_CLOSED; /* our side is over, whatever came */
	else if (r->err != 0 || c->err != 0)
		rv = r->err != 0 ? r->err : c->err;
	else if (!r->started)
		rv = EGRESS_ERR_AGAIN;
	else { /* the frame goes out; a close finishes our side */
		m->stream = r->ps.id;
		if ((rv = out_frame(c, &r->ps, m)) == 0)
			r->finished |= (m->flags & PROTO_FLAG_END_STREAM) != 0;
		flush_locked(c);
		notify_locked(c);
	}
	(void)pthread_mutex_unlock(&c->mu);
	return rv;
}

int
shim_stream_upgrade(struct egress_request *r, struct proto_msg *m, int flags)
{
	struct egress_client *c = r->c;
	int rv = 0;

	(void)pthread_mutex_lock(&c->mu);
	if (r->err == 0 && c->err == 0 &&
	    r->ps.upgrade == PROTO_UPGRADE_NONE) {
		if (!r->resp || r->finished)
			rv = r->finished ? EGRESS_ERR_CLOSED :
					   EGRESS_ERR_INVALID;
		else if (c->pc.version < PROTO_VERSION_WS)
			rv = EGRESS_ERR_UNAVAILABLE; /* a version-1 broker */
		else if (buf_size(&r->in) > 0) {
			/* Unread bytes after the go-ahead: an injection,
			 * never returned. */
			buf_consume(&r->in, buf_size(&r->in));
			req_reset(r, PROTO_CODE_CANCELLED);
			req_fail(r, EGRESS_ERR_TLS_FAILED, NULL, 0);
		} else {
			m->stream = r->ps.id;
			rv = out_frame(c, &r->ps, m);
		}
		flush_locked(c);
		notify_locked(c);
	}
	if (rv == 0 && !(flags & EGRESS_NONBLOCK))
		wait_locked(r, WAIT_UPGRADE);
	if (rv == 0)
		rv = r->err != 0			? r->err :
		    c->err != 0				? c->err :
		    r->ps.upgrade == PROTO_UPGRADE_DONE ? 0 :
							  EGRESS_ERR_AGAIN;
	(void)pthread_mutex_unlock(&c->mu);
	return rv;
}
