/* SPDX-License-Identifier: ISC */
/*
 * One plugin connection of egressd: recvmsg() input with descriptor
 * detection, frame decoding with proto/, the per-connection state table,
 * stream dispatch to request.c, flow-control credit, PING/PONG, GOAWAY
 * draining, and the output bufferevent. See session.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <jansson.h>

#include <egress/error.h>

#include "broker/broker.h"
#include "broker/guest.h"
#include "broker/log.h"
#include "broker/net/evmove.h"
#include "broker/net/pipemove.h"
#include "broker/net/readmore.h"
#include "broker/net/share.h"
#include "broker/proxy.h"
#include "broker/request.h"
#include "broker/session.h"
#include "broker/starttls.h"
#include "conf/conf.h"
#include "proto/proto.h"

#define SESSION_FDS_MAX		  16 /* descriptors one cmsg can carry */
/* What the kernel counts for a socket buffer beyond its bytes, at most,
 * for one spliced frame. */
#define SESSION_SKB_SLACK	  2048
/* The smallest send buffer a spliced stream waits on: the kernel reports
 * a Unix socket writable once a quarter of it is used, which must leave
 * room for a frame. */
#define SESSION_SPLICE_SNDBUF_MIN (8 * PIPEMOVE_MIN)

/* One stream of a session: the session's link to the request serving
 * it. The session owns both; the request reports its end through
 * session_stream_done(). */
struct stream {
	struct stream *next, *prev;
	struct session *s;
	struct request *r;
};

struct session {
	struct session *next, *prev;
	struct broker *b;
	enum proto_fault fault; /* the guest's protocol violation, if any:
				   logged when the session is freed */
	int fd;
	struct bufferevent *bev; /* output only */
	/* Frames queued in this loop iteration: session_flush_cb writes
	 * them straight to the socket when the bufferevent's output is
	 * empty (no epoll_ctl pair, no extra iteration), else appends them
	 * to that output. */
	struct evbuffer *stage;
	struct event *flush_ev;
	int flush_pending;
	struct event *rev; /* input: recvmsg() */
	struct event *hello_timer;
	struct event *defer; /* re-check closing from the loop */
	struct evbuffer *in;
	struct proto_conn pc;
	char instance[CONF_NAME_MAX + 1];
	int shared;		/* holds a unit of b->session_share */
	struct broker_mem mem;	/* credit for queued output */
	struct log_waiter logw; /* reading paused: its log backlog */
	/* Output waited for the guest at its bound (SESSION_OUT_HIGH, or
	 * no credit) and the guest has read nothing since: drop at expiry.
	 * Only the guest reading restarts it (and ends it once nothing
	 * waits); memory freed elsewhere never does. */
	struct event *stall_timer;
	struct evbuffer_cb_entry *took_cb; /* on the output: bytes taken */
	int stall_armed;
	int stall_outq;	 /* unread in the socket when the clock (re)started */
	int splice_wait; /* ... for room under a splice: a frame the kernel
			    takes into the socket is no read by the guest */
	struct guest guest; /* what its requests see of it */
	struct stream *streams;
	struct stream *rr; /* next stream session_flush_all serves */
	size_t nstreams;
	int read_paused; /* output over SESSION_OUT_HIGH */
	int closing;	 /* free once output is flushed */
	int goaway_sent;
	int departed; /* a write to it failed: reading what it sent last */
	int broken;   /* a frame was cut short: free from the loop */
	int sndbuf;   /* the socket's send buffer (0: not read yet) */
};

static struct proto_msg session_msg; /* decode scratch (one thread) */

static void session_free(struct session *s);
static void session_log_dropped(struct broker *b, const char *instance,
    enum proto_fault fault);
static void session_maybe_close(struct session *s);

static const char *
session_instance(const struct session *s)
{
	return s->instance;
}

static struct proto_conn *
session_proto(struct session *s)
{
	return &s->pc;
}

/* Where frames go: the stage, flushed once the current callbacks ran. */
static struct evbuffer *
session_out(struct session *s)
{
	if (!s->flush_pending) {
		s->flush_pending = 1;
		event_active(s->flush_ev, EV_WRITE, 0);
	}
	return s->stage;
}

/* Bytes queued for the guest and not yet taken by the kernel. */
static size_t
session_out_len(const struct session *s)
{
	return evbuffer_get_length(bufferevent_get_output(s->bev)) +
	    evbuffer_get_length(s->stage);
}

/* Bytes sent and not yet read by the guest, still in the socket (-1:
 * unknown). The kernel takes more from us only once the guest has read
 * a good part of its buffer; this sees every read. (TIOCOUTQ is
 * SIOCOUTQ, without the kernel's own header.) */
static int
session_outq(const struct session *s)
{
	int n;

	return ioctl(s->fd, TIOCOUTQ, &n) == 0 ? n : -1;
}

/* Return the bytes of one frame the guest's socket has room for now (its
 * send buffer, less what waits in it and the kernel's count of a frame
 * beyond its bytes; 0 when full), or -1 when the kernel does not say or
 * the buffer is too small to wait on (SESSION_SPLICE_SNDBUF_MIN). */
static ssize_t
session_sock_room(struct session *s)
{
	socklen_t len = sizeof(s->sndbuf);
	int q;

	if (s->sndbuf <= 0 &&
	    getsockopt(s->fd, SOL_SOCKET, SO_SNDBUF, &s->sndbuf, &len) != 0)
		s->sndbuf = 0;
	if ((size_t)s->sndbuf < SESSION_SPLICE_SNDBUF_MIN ||
	    (q = session_outq(s)) < 0)
		return -1;
	if ((size_t)q + PROTO_HDR_SIZE + SESSION_SKB_SLACK >=
	    (size_t)s->sndbuf)
		return 0;
	return (ssize_t)((size_t)s->sndbuf - (size_t)q - PROTO_HDR_SIZE -
	    SESSION_SKB_SLACK);
}

/* (Re)start the stall clock. */
static void
session_stall_start(struct session *s)
{
	struct timeval stall = { SESSION_STALL_MS / 1000, 0 };

	if (evtimer_add(s->stall_timer, &stall) == 0) {
		s->stall_armed = 1;
		s->stall_outq = session_outq(s);
	}
}

/* Output waits for the guest and no more may be queued: start the stall
 * clock, unless it runs already. */
static void
session_stall_arm(struct session *s)
{
	if (!s->stall_armed)
		session_stall_start(s);
}

/* The guest took bytes: restart the stall clock, or stop it once nothing
 * waits for the guest. */
static void
session_took(struct session *s)
{
	if (!s->stall_armed)
		return;
	if (session_out_len(s) > 0) {
		session_stall_start(s);
		return;
	}
	(void)evtimer_del(s->stall_timer);
	s->stall_armed = 0;
}

/* A frame went straight into the socket. While the broker waits for room
 * under a splice, that is no read by the guest (a PONG fits in a full
 * socket): the clock restarts only if the guest read since it started
 * (q0, what was unread before this write, under the baseline); else the
 * baseline takes in the frame's bytes, so that at the deadline only the
 * guest's reads count. */
static void
session_took_direct(struct session *s, int q0)
{
	if (!s->splice_wait) {
		session_took(s);
		return;
	}
	if (!s->stall_armed)
		return;
	if (q0 >= 0 && s->stall_outq >= 0 && q0 < s->stall_outq)
		session_stall_start(s);
	else
		s->stall_outq = session_outq(s);
}

/* Does a stream of s wait for room in its socket under a splice? */
static int
session_splice_waiting(const struct session *s)
{
	const struct stream *t;

	for (t = s->streams; t != NULL; t = t->next)
		if (request_waits_for_room(t->r))
			return 1;
	return 0;
}

/* The socket has room again: the bufferevent wrote (it writes only once
 * the socket is writable: for a Unix socket, a quarter full or less), or
 * its write callback ran. The guest read: a wait for room under a splice
 * is over too. */
static void
session_room_back(struct session *s)
{
	s->splice_wait = 0;
	session_took(s);
}

static void
session_took_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	if (info->n_deleted > 0)
		session_room_back(arg);
}

/* Is there room to queue more output, within SESSION_OUT_HIGH and the
 * instance's memory budget (credit taken as needed)? When not, and
 * output waits for the guest, the stall clock runs: not when none does
 * (the rest of the instance holds the credit; nothing is the guest's to
 * take). */
static int
session_has_room(struct session *s)
{
	size_t n = session_out_len(s);

	if (n < SESSION_OUT_HIGH &&
	    broker_mem_room(s->b, s->instance, &s->mem, n, SESSION_OUT_HIGH))
		return 1;
	if (n > 0)
		session_stall_arm(s);
	return 0;
}

static int
session_can_write(struct session *s)
{
	return !s->closing && session_has_room(s);
}

static void session_break(struct session *s);

/* A frame could not be queued whole (no memory): the guest's view of its
 * streams and windows can no longer be kept, so the connection ends
 * (a stream it was not told of would also keep its place for good). */
static int
session_lost(struct session *s)
{
	session_break(s);
	return EGRESS_ERR_NOMEM;
}

static int
session_send(struct session *s, struct proto_stream *st,
    const struct proto_msg *m)
{
	struct evbuffer_iovec v;
	enum proto_fault f;
	int n, err;

	n = proto_encode_size(m, &f);
	if (n < 0)
		return n;
	if (evbuffer_reserve_space(session_out(s), n, &v, 1) < 1 ||
	    v.iov_len < (size_t)n)
		return session_lost(s);
	err = proto_conn_send(&s->pc, st, m, &f);
	if (err != 0)
		return err;
	n = proto_encode(m, v.iov_base, (size_t)n, &f);
	if (n < 0)
		return n; /* cannot happen after encode_size */
	v.iov_len = (size_t)n;
	return evbuffer_commit_space(s->stage, &v, 1) == 0 ?
	    0 :
	    session_lost(s);
}

static int
session_send_data(struct session *s, struct proto_stream *st,
    struct evbuffer *buf, size_t n, uint8_t flags)
{
	struct proto_msg m;
	uint8_t hdr[PROTO_HDR_SIZE];
	int err;

	if (st == NULL) {
		/* An already applied, already encoded frame (the tail). */
		return evmove(buf, session_out(s), n) == 0 ?
		    0 :
		    session_lost(s);
	}
	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_DATA;
	m.flags = flags;
	m.stream = st->id;
	m.data.len = n;
	if (proto_hdr_encode(hdr, PROTO_MSG_DATA, flags, st->id, (uint32_t)n,
		NULL) < 0)
		return EGRESS_ERR_INVALID;
	err = proto_conn_send(&s->pc, st, &m, NULL);
	if (err != 0)
		return err;
	if (evmove_add(session_out(s), hdr, sizeof(hdr)) != 0 ||
	    evmove(buf, session_out(s), n) != 0)
		return session_lost(s); /* a header without its body */
	return 0;
}

/* The guest's frames can no longer be whole: drop the connection from the
 * loop (this may run inside one of its requests). */
static void
session_break(struct session *s)
{
	s->broken = 1;
	s->closing = 1;
	(void)evbuffer_drain(s->stage, evbuffer_get_length(s->stage));
	(void)shutdown(s->fd, SHUT_RDWR);
	event_active(s->defer, EV_TIMEOUT, 1);
}

/* Upstream bytes from fd to one DATA frame on st without a copy, when
 * nothing else waits for the guest (guest.h: splice_data). */
static ssize_t
session_splice_data(struct session *s, struct proto_stream *st, int fd,
    size_t max)
{
	struct pipemove *pm;
	struct proto_msg m;
	uint8_t hdr[PROTO_HDR_SIZE];
	ssize_t room, n;

	if (s->closing || session_out_len(s) > 0 ||
	    (pm = broker_pipes(s->b)) == NULL)
		return GUEST_SPLICE_BUSY; /* the frame would jump the queue */
	if ((room = session_sock_room(s)) < 0)
		return GUEST_SPLICE_BUSY; /* a buffer too small to wait on */
	if (room >= PIPEMOVE_MIN && s->splice_wait)
		session_room_back(s); /* it read: the wait is over */
	if (room < PIPEMOVE_MIN) {
		/* Wait for the guest to read (the bufferevent's write callback
		 * with nothing queued), rather than read from the upstream what
		 * would only wait here. Bytes wait for the guest as surely as
		 * queued output does: the stall clock runs. */
		if (bufferevent_enable(s->bev, EV_WRITE) != 0)
			return GUEST_SPLICE_BUSY;
		session_stall_arm(s);
		s->splice_wait = 1;
		return GUEST_SPLICE_FULL;
	}
	if (max > (size_t)room)
		max = (size_t)room;
	n = pipemove_fill(pm, fd, max);
	if (n == 0)
		return GUEST_SPLICE_EOF;
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return GUEST_SPLICE_AGAIN;
		/* Anything else is the socket's error, whatever its errno (an
		 * ICMP error may be EOPNOTSUPP): the pipes were checked when
		 * they were opened. A read now would find the error gone and
		 * an end of file in its place: the stream is cut. */
		return GUEST_SPLICE_UPSTREAM;
	}
	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_DATA;
	m.stream = st->id;
	m.data.len = (uint32_t)n;
	if (proto_hdr_encode(hdr, PROTO_MSG_DATA, 0, st->id, (uint32_t)n,
		NULL) < 0 ||
	    proto_conn_send(&s->pc, st, &m, NULL) != 0) {
		pipemove_drop(pm);
		return GUEST_SPLICE_FAILED;
	}
	if (n < PIPEMOVE_MIN) {
		/* A sparse read: copied, as any frame (pipemove.h). */
		if (evbuffer_add(session_out(s), hdr, sizeof(hdr)) != 0) {
			pipemove_drop(pm);
			session_break(s); /* the window is spent */
			return GUEST_SPLICE_FAILED;
		}
		if (pipemove_take(pm, (size_t)n, s->stage) != 0) {
			session_break(s); /* the frame's header is queued */
			return GUEST_SPLICE_FAILED;
		}
		return n;
	}
	log_flush(); /* the guest reads no bytes before their events */
	if (pipemove_send(pm, hdr, sizeof(hdr), (size_t)n, s->fd, s->stage) <
	    0) {
		session_break(s); /* the frame is cut short */
		return GUEST_SPLICE_FAILED;
	}
	if (evbuffer_get_length(s->stage) > 0)
		(void)session_out(s); /* the rest, once the socket has room */
	return n;
}

static int
session_send_error(struct session *s, struct proto_stream *st, uint32_t code)
{
	struct proto_msg m;

	memset(&m, 0, offsetof(struct proto_msg, headers));
	if (proto_error_init(&m, st != NULL ? st->id : 0, code) != 0)
		return EGRESS_ERR_INVALID;
	return session_send(s, st, &m);
}

static void
session_window_update(struct session *s, struct proto_stream *st, uint32_t inc)
{
	struct proto_msg m;

	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_WINDOW_UPDATE;
	m.stream = st != NULL ? st->id : 0;
	m.window_update.increment = inc;
	(void)session_send(s, st, &m);
}

static void
session_consumed(struct session *s, struct proto_stream *st, size_t n)
{
	uint32_t ci = 0, si = 0;

	if (proto_conn_consumed(&s->pc, st, (uint32_t)n, &ci, &si) != 0)
		return;
	if (ci != 0)
		session_window_update(s, NULL, ci);
	if (si != 0)
		session_window_update(s, st, si);
}

/* ---- The guest seam: what a request sees of its session -------------- */

static const char *
guest_instance(void *ctx)
{
	return session_instance(ctx);
}

static struct proto_conn *
guest_proto(void *ctx)
{
	return session_proto(ctx);
}

static int
guest_send(void *ctx, struct proto_stream *st, const struct proto_msg *m)
{
	return session_send(ctx, st, m);
}

static int
guest_send_data(void *ctx, struct proto_stream *st, struct evbuffer *buf,
    size_t n, uint8_t flags)
{
	return session_send_data(ctx, st, buf, n, flags);
}

static int
guest_send_error(void *ctx, struct proto_stream *st, uint32_t code)
{
	return session_send_error(ctx, st, code);
}

static void
guest_consumed(void *ctx, struct proto_stream *st, size_t n)
{
	session_consumed(ctx, st, n);
}

static int
guest_can_write(void *ctx)
{
	return session_can_write(ctx);
}

static ssize_t
guest_splice_data(void *ctx, struct proto_stream *st, int fd, size_t max)
{
	return session_splice_data(ctx, st, fd, max);
}

static const struct guest_ops session_guest_ops = {
	.instance = guest_instance,
	.proto = guest_proto,
	.send = guest_send,
	.send_data = guest_send_data,
	.send_error = guest_send_error,
	.consumed = guest_consumed,
	.can_write = guest_can_write,
	.splice_data = guest_splice_data,
};

/* ---- Streams ----------------------------------------------------------- */

static struct stream *
session_find(struct session *s, uint32_t id)
{
	struct stream *t;

	for (t = s->streams; t != NULL; t = t->next)
		if (request_id(t->r) == id)
			return t;
	return NULL;
}

static void
session_link(struct session *s, struct stream *t)
{
	t->prev = NULL;
	t->next = s->streams;
	if (s->streams != NULL)
		s->streams->prev = t;
	s->streams = t;
	s->nstreams++;
}

static void
session_unlink(struct session *s, struct stream *t)
{
	if (s->rr == t)
		s->rr = t->next;
	if (t->prev != NULL)
		t->prev->next = t->next;
	else
		s->streams = t->next;
	if (t->next != NULL)
		t->next->prev = t->prev;
	t->next = t->prev = NULL;
	s->nstreams--;
}

/* A request finished and its stream is closed: unlink and free both. */
static void
session_stream_done(void *arg, struct request *r)
{
	struct stream *t = arg;
	struct session *s = t->s;

	session_unlink(s, t);
	free(t);
	request_free(r);
	/* Never free the session under a caller: check from the loop. */
	if (s->b->draining && s->defer != NULL)
		event_active(s->defer, EV_TIMEOUT, 1);
}

/*
 * Give every stream a chance to send (window or output room grew), round
 * robin: the walk starts after the last stream that sent DATA, so when
 * the connection window reopens a little at a time the grants go round
 * the streams with data instead of to the same first one each time.
 */
static void
session_flush_all(struct session *s)
{
	struct stream *t, *next;
	size_t i, n = s->nstreams;
	uint32_t window;

	t = s->rr != NULL ? s->rr : s->streams;
	for (i = 0; i < n && t != NULL && session_can_write(s); i++,
	    t = next) {
		next = t->next != NULL ? t->next : s->streams;
		if (next == t)
			next = NULL; /* the only stream */
		window = s->pc.flow.send;
		request_flush(t->r); /* may free t, never next */
		/* t sent: the next walk starts after it. */
		if (s->pc.flow.send != window)
			s->rr = next;
	}
}

static void
session_send_goaway(struct session *s)
{
	struct proto_msg m;

	if (s->goaway_sent || s->pc.state != PROTO_CONN_OPEN)
		return;
	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_GOAWAY;
	m.goaway.last_stream = s->pc.last_stream;
	if (session_send(s, NULL, &m) == 0)
		s->goaway_sent = 1;
}

static void
session_maybe_close(struct session *s)
{
	struct stream *t;

	for (t = s->streams; t != NULL; t = t->next)
		if (request_is_active(t->r))
			return;
	s->closing = 1;
	(void)event_del(s->rev);
	if (session_out_len(s) == 0)
		session_free(s);
	/* else the flush or the write callback frees it once flushed */
}

/* ---- Input ------------------------------------------------------------- */

/* Handle one decoded non-DATA frame. Return -1 to drop the connection. */
static int
session_frame(struct session *s, struct proto_msg *m)
{
	struct request *r = NULL;
	struct stream *t;
	struct proto_msg reply;
	enum proto_fault f = PROTO_FAULT_NONE;
	uint32_t conn_send;
	uint16_t v;
	int rv;

	if (m->type == PROTO_MSG_REQUEST) {
		/* A guest that left starts nothing more: stop here. */
		if (s->departed)
			return -1;
		if ((t = calloc(1, sizeof(*t))) == NULL)
			return -1;
		t->s = s;
		if ((t->r = request_new(s->b, &s->guest, m->stream,
			 session_stream_done, t)) == NULL) {
			free(t);
			return -1;
		}
		rv = proto_conn_recv(&s->pc, request_stream(t->r), m, &f);
		if (rv != PROTO_ACCEPT) {
			request_discard(t->r);
			free(t);
			if (rv == PROTO_IGNORE)
				return 0;
			s->fault = f;
			return -1;
		}
		session_link(s, t);
		request_start(t->r, m); /* may free t */
		return 0;
	}
	if (m->stream != 0 && (t = session_find(s, m->stream)) != NULL)
		r = t->r;
	conn_send = s->pc.flow.send;
	rv = proto_conn_recv(&s->pc, r != NULL ? request_stream(r) : NULL, m,
	    &f);
	if (rv < 0) {
		s->fault = f;
		return -1;
	}
	if (rv == PROTO_IGNORE)
		return 0;
	switch (m->type) {
	case PROTO_MSG_HELLO:
		if (s->hello_timer != NULL) {
			event_free(s->hello_timer);
			s->hello_timer = NULL;
		}
		v = proto_version_choose(m->hello.version);
		memset(&reply, 0, offsetof(struct proto_msg, headers));
		if (v == 0) {
			(void)session_send_error(s, NULL,
			    PROTO_CODE_UNAVAILABLE);
			s->closing = 1;
			return 0;
		}
		reply.type = PROTO_MSG_HELLO;
		reply.hello.version = v;
		if (session_send(s, NULL, &reply) != 0)
			return -1;
		if (s->b->draining)
			session_send_goaway(s);
		return 0;
	case PROTO_MSG_PING:
		memset(&reply, 0, offsetof(struct proto_msg, headers));
		reply.type = PROTO_MSG_PONG;
		memcpy(reply.ping.opaque, m->ping.opaque, PROTO_PING_SIZE);
		return session_send(s, NULL, &reply) == 0 ? 0 : -1;
	case PROTO_MSG_PONG:
		return 0;
	case PROTO_MSG_WINDOW_UPDATE:
		/* A stream waits for the connection window only once it is
		 * 0 (any window lets a stream send): a guest's stream of tiny
		 * increments walks the streams once, not once each. */
		if (r != NULL)
			request_flush(r);
		else if (conn_send == 0)
			session_flush_all(s);
		return 0;
	case PROTO_MSG_RESET:
		if (r != NULL)
			request_on_reset(r);
		return 0;
	case PROTO_MSG_TRAILERS:
		/* Request trailers end the body; they are not forwarded. */
		if (r != NULL)
			request_on_body(r, 0, 1);
		return 0;
	case PROTO_MSG_WS_CONTROL:
		if (r != NULL)
			request_on_ws_control(r, m); /* may free t */
		return 0;
	case PROTO_MSG_STARTTLS:
		if (r != NULL)
			request_on_starttls(r, m); /* may free t */
		return 0;
	default:
		return -1; /* the table refuses every other type */
	}
}

/* Handle one DATA frame whose payload is still in s->in. */
static int
session_data(struct session *s, const struct proto_hdr *h)
{
	struct proto_msg m;
	struct request *r = NULL;
	struct stream *t;
	enum proto_fault f = PROTO_FAULT_NONE;
	int rv;

	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_DATA;
	m.flags = h->flags;
	m.version = h->version; /* checked against the negotiated one */
	m.stream = h->stream;
	m.data.len = h->length;
	if ((t = session_find(s, h->stream)) != NULL)
		r = t->r;
	rv = proto_conn_recv(&s->pc, r != NULL ? request_stream(r) : NULL, &m,
	    &f);
	if (rv < 0) {
		s->fault = f;
		return -1;
	}
	(void)evbuffer_drain(s->in, PROTO_HDR_SIZE);
	if (rv == PROTO_IGNORE) {
		(void)evbuffer_drain(s->in, h->length);
		/* Counted and credited by proto: send the update due. */
		session_consumed(s, NULL, 0);
		return 0;
	}
	if (request_stream(r)->messages) {
		/* A websocket message piece keeps its flags. */
		const uint8_t *p = evbuffer_pullup(s->in, h->length);

		if (h->length > 0 && p == NULL)
			return -1;
		request_on_message(r, p, h->length, h->flags); /* may free t */
		(void)evbuffer_drain(s->in, h->length);
		return 0;
	}
	/* Headers and frames drained from s->in may have left a short
	 * part at its front, which a move of all of it would carry. */
	if (evmove_settle(s->in) != 0 ||
	    evmove(s->in, request_body_buffer(r), h->length) != 0)
		return -1;
	request_on_body(r, h->length, (h->flags & PROTO_FLAG_END_STREAM) != 0);
	return 0;
}

/* Decode and handle every complete frame in s->in. */
static int
session_process(struct session *s)
{
	uint8_t hb[PROTO_HDR_SIZE];
	struct proto_hdr h;
	enum proto_fault f = PROTO_FAULT_NONE;
	size_t avail, total;
	unsigned char *p;
	int rv;

	while (!s->closing) {
		avail = evbuffer_get_length(s->in);
		if (avail < PROTO_HDR_SIZE)
			return 0;
		if (evbuffer_copyout(s->in, hb, sizeof(hb)) != sizeof(hb))
			return -1;
		rv = proto_hdr_decode(hb, sizeof(hb), &h, &f);
		if (rv <= 0) {
			s->fault = f;
			return -1;
		}
		total = PROTO_HDR_SIZE + (size_t)h.length;
		if (avail < total)
			return 0;
		if (h.type == PROTO_MSG_DATA) {
			if (session_data(s, &h) != 0)
				return -1;
			continue;
		}
		if ((p = evbuffer_pullup(s->in, (ssize_t)total)) == NULL)
			return -1;
		rv = proto_frame_decode(p, total, &session_msg, &f);
		if (rv != (int)total) {
			s->fault = f;
			return -1;
		}
		rv = session_frame(s, &session_msg);
		(void)evbuffer_drain(s->in, total);
		if (rv != 0)
			return -1;
	}
	return 0;
}

/* Close every descriptor in the control messages of msg. */
static int
session_close_fds(struct msghdr *msg)
{
	struct cmsghdr *c;
	int found = 0;
	size_t i, n;
	int fd;

	for (c = CMSG_FIRSTHDR(msg); c != NULL; c = CMSG_NXTHDR(msg, c)) {
		found = 1;
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int),
			    sizeof(int));
			(void)close(fd);
		}
	}
	return found;
}

/*
 * The first bytes of a connection are an HTTP request line, not a frame
 * (whose first byte, the top of its length, is always 0): hand the
 * connection, what was read and the session's share to the proxy front,
 * and free the session. Return 1 when handed off (s is gone).
 */
static int
session_handoff_http(struct session *s)
{
	struct broker *b = s->b;
	struct evbuffer *in = s->in;
	char instance[CONF_NAME_MAX + 1];
	unsigned flags = PROXY_ORIGIN_FORM;
	unsigned char c;
	int fd;

	if (s->pc.state != PROTO_CONN_START ||
	    evbuffer_copyout(in, &c, 1) != 1 || c < 'A' || c > 'Z')
		return 0;
	/* The descriptor itself goes over, not a dup() of it: a copy would
	 * keep the file open while its first number's watch was still to
	 * be deleted (broker_base_new()). */
	fd = s->fd;
	if (bufferevent_setfd(s->bev, -1) != 0)
		return 0; /* served as a session: it fails at HELLO */
	s->fd = -1;
	memcpy(instance, s->instance, sizeof(instance));
	if (s->shared)
		flags |= PROXY_SHARED;
	s->shared = 0;
	s->in = NULL;
	session_free(s);
	(void)proxy_accept(b, fd, instance, in, flags);
	return 1;
}

/*
 * Read once from the guest into s->in (at most SESSION_READ_MAX). Return
 * the count read (> 0), 0 when nothing waits (EAGAIN), or -1 when the
 * session must end: end of file, an error, descriptors or credentials
 * passed, or no memory.
 */
static ssize_t
session_recv(struct session *s)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(SESSION_FDS_MAX * sizeof(int))];
	} cbuf;
	struct evbuffer_iovec v[2];
	struct msghdr msg;
	struct iovec iov[2];
	ssize_t n, got;
	int nv, i;

	nv = evbuffer_reserve_space(s->in, SESSION_READ_MAX, v, 2);
	if (nv < 1)
		return -1;
	for (i = 0; i < nv; i++) {
		iov[i].iov_base = v[i].iov_base;
		iov[i].iov_len = v[i].iov_len;
	}
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = iov;
	msg.msg_iovlen = (size_t)nv;
	msg.msg_control = cbuf.buf;
	msg.msg_controllen = sizeof(cbuf.buf);
	n = recvmsg(s->fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	/* Failed (ECONNRESET, ...): the kernel wrote no control data, so
	 * msg must not be walked (its buffer is whatever the stack held:
	 * closing "passed" descriptors from it would close random ones of
	 * the broker's). */
	if (n < 0)
		return -1;
	/* The broker accepts no descriptors and no credentials. */
	if (session_close_fds(&msg) || (msg.msg_flags & MSG_CTRUNC) || n <= 0)
		return -1;
	got = n;
	for (i = 0; i < nv && n > 0; i++) {
		size_t k = (size_t)n < v[i].iov_len ? (size_t)n : v[i].iov_len;

		v[i].iov_len = k;
		n -= (ssize_t)k;
	}
	return evbuffer_commit_space(s->in, v, i) == 0 ? got : -1;
}

static void
session_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	ssize_t n;

	s->b->activity++;
	if (log_backlog_wait(s->instance, &s->logw)) {
		/* The instance's log queue is over its share: read nothing
		 * more of it until the queue drained (session_log_wake). */
		(void)event_del(s->rev);
		return;
	}
	if ((n = session_recv(s)) == 0)
		return;
	if (n < 0) {
		session_free(s);
		return;
	}
	if (session_handoff_http(s))
		return;
	if (session_process(s) != 0) {
		session_free(s);
		return;
	}
	if (s->closing) {
		session_maybe_close(s);
		return;
	}
	if (!session_has_room(s)) {
		/* A guest that sends without reading what it is sent: stop
		 * reading it (the stall clock runs: dropped if it takes
		 * nothing). */
		s->read_paused = 1;
		(void)event_del(s->rev);
	}
}

/*
 * Writing to the guest failed: it closed its end (or its read side).
 * Frames it sent before that may still wait unread in the socket, and
 * among them the end of a stream whose bytes must still reach the
 * upstream (request_linger()). Read and handle them now, up to what the
 * connection window lets a guest have in flight plus one read of
 * control frames, and stop at end of file, at an empty socket, at a
 * REQUEST (nothing new starts for a guest that left), while its
 * instance's log queue is over its share (as session_read_cb() would
 * wait), or at anything that would end the session; output they cause
 * is dropped with the session.
 */
static void
session_drain_input(struct session *s)
{
	size_t total = 0;
	ssize_t n;

	if (s->closing || s->pc.state == PROTO_CONN_START)
		return;
	s->departed = 1;
	while (total < (size_t)PROTO_CONN_WINDOW + SESSION_READ_MAX &&
	    !s->closing && !log_backlog_wait(s->instance, NULL)) {
		if ((n = session_recv(s)) <= 0 || session_process(s) != 0)
			return;
		total += (size_t)n;
	}
}

/* Room may have come back: the output drained to its low watermark, or
 * memory was given back elsewhere. */
static void
session_drained(struct session *s)
{
	if (s->closing) {
		if (session_out_len(s) == 0)
			session_free(s);
		return;
	}
	session_flush_all(s);
	if (s->read_paused && session_has_room(s)) {
		s->read_paused = 0;
		(void)event_add(s->rev, NULL);
	}
	broker_mem_trim(s->b, s->instance, &s->mem, session_out_len(s), 0);
}

/* Memory was given back somewhere: try again what the budget stopped. */
static void
session_mem_wake(void *arg)
{
	struct session *s = arg;

	if (!s->closing)
		session_drained(s);
}

/* The instance's log queue drained: read again (unless paused for
 * output). */
static void
session_log_wake(void *arg)
{
	struct session *s = arg;

	if (!s->closing && !s->read_paused)
		(void)event_add(s->rev, NULL);
}

static void
session_stall_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	int q = session_outq(s);

	/* The guest read from its socket, though not yet enough for the
	 * kernel to take more from us: it is reading; start again. */
	s->stall_armed = 0;
	if (q >= 0 && s->stall_outq >= 0 && q < s->stall_outq) {
		session_stall_start(s);
		if (s->stall_armed)
			return;
	}
	if (s->splice_wait && session_out_len(s) == 0 &&
	    !session_splice_waiting(s)) {
		/* The stream that waited for room is gone or has nothing
		 * more to send: nothing waits for the guest. */
		s->splice_wait = 0;
		return;
	}
	session_free(s); /* output waited SESSION_STALL_MS, none read */
}

static void
session_write_cb(struct bufferevent *bev, void *arg)
{
	/* The guest took bytes: the output drained, or its socket, full
	 * under a splice, has room again. */
	session_room_back(arg);
	session_drained(arg);
}

static void
session_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	struct evbuffer *out = bufferevent_get_output(s->bev);
	size_t before = session_out_len(s), staged;
	int q0;

	s->flush_pending = 0;
	if ((staged = evbuffer_get_length(s->stage)) == 0)
		return;
	log_flush(); /* the guest reads no response before its events */
	if (evbuffer_get_length(out) == 0) {
		q0 = s->splice_wait ? session_outq(s) : -1;
		(void)evbuffer_write(s->stage, s->fd); /* errors: below */
		if (evbuffer_get_length(s->stage) < staged)
			session_took_direct(s, q0);
	}
	if (evbuffer_get_length(s->stage) > 0) {
		/* The socket is full, or failed: the bufferevent writes the
		 * rest (or reports the error) and calls session_write_cb. */
		if (evbuffer_add_buffer(out, s->stage) != 0) {
			session_free(s);
			return;
		}
		/* Now at its bound? Then the stall clock runs. */
		(void)session_has_room(s);
		return;
	}
	/* All of it taken: do what the write callback would have. */
	if (s->closing || s->read_paused || before >= SESSION_OUT_HIGH)
		session_drained(s);
	else
		broker_mem_trim(s->b, s->instance, &s->mem, 0, 0);
}

static void
session_event_cb(struct bufferevent *bev, short what, void *arg)
{
	if (what & (BEV_EVENT_ERROR | BEV_EVENT_EOF)) {
		session_drain_input(arg);
		session_free(arg);
	}
}

static void
session_defer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;

	if (s->broken) {
		session_free(s);
		return;
	}
	session_maybe_close(s);
}

static void
session_hello_cb(evutil_socket_t fd, short what, void *arg)
{
	session_free(arg); /* no HELLO in time */
}

static void
session_free(struct session *s)
{
	struct broker *b = s->b;
	struct stream *t;

	if (s->fault != PROTO_FAULT_NONE)
		session_log_dropped(b, s->instance, s->fault);
	if (s->took_cb != NULL)
		(void)evbuffer_remove_cb_entry(bufferevent_get_output(s->bev),
		    s->took_cb);
	s->took_cb = NULL;
	while ((t = s->streams) != NULL) {
		s->streams = t->next;
		if (!request_linger(t->r))
			request_abort(t->r);
		free(t);
	}
	if (s->prev != NULL)
		s->prev->next = s->next;
	else
		b->sessions = s->next;
	if (s->next != NULL)
		s->next->prev = s->prev;
	b->nsessions--;
	if (s->shared)
		share_release(b->session_share, s->instance, 1);
	broker_mem_trim(b, s->instance, &s->mem, 0, 1);
	log_waiter_cancel(&s->logw);
	if (s->stall_timer != NULL)
		event_free(s->stall_timer);
	if (s->hello_timer != NULL)
		event_free(s->hello_timer);
	if (s->defer != NULL)
		event_free(s->defer);
	if (s->rev != NULL)
		event_free(s->rev);
	if (s->bev != NULL)
		bufferevent_free(s->bev); /* closes fd, if it has one */
	else if (s->fd >= 0)
		(void)close(s->fd);
	if (s->flush_ev != NULL)
		event_free(s->flush_ev);
	if (s->stage != NULL)
		evbuffer_free(s->stage);
	if (s->in != NULL)
		evbuffer_free(s->in);
	free(s);
	if (b->draining && b->nsessions == 0)
		(void)event_base_loopexit(b->base, NULL);
}

/*
 * Session events a flood could repeat, batched: the first of a burst is
 * logged at once (egress.session: status, instance, the batch's key, and
 * the count 1 under the status's name); the ones that follow within a
 * second are counted and logged together by a timer one second later
 * (instance and key null when they were not all the same), so a flood
 * costs one event per second and none goes unreported. Connections
 * refused at a session cap (status refused, key cap), and sessions
 * dropped for a protocol violation (status dropped, key detail: what
 * the guest broke).
 */
struct session_batch {
	const char *status, *key;
	struct event *timer;
	unsigned long long pending;
	char instance[CONF_NAME_MAX + 1];
	const char *what; /* static */
	int mixed;
};

static struct session_batch refused = { "refused", "cap", NULL, 0, "", NULL,
	0 };
static struct session_batch dropped = { "dropped", "detail", NULL, 0, "", NULL,
	0 };

static void
session_batch_event(const struct session_batch *sb, const char *instance,
    const char *what, unsigned long long n)
{
	json_t *o;

	o = json_pack("{s:s, s:s?, s:s?, s:I}", "status", sb->status,
	    "instance", instance, sb->key, what, sb->status, (json_int_t)n);
	if (o != NULL)
		log_event("egress.session", o);
}

static void
session_batch_flush(evutil_socket_t fd, short what, void *arg)
{
	struct session_batch *sb = arg;

	(void)fd;
	(void)what;
	if (sb->pending == 0)
		return;
	session_batch_event(sb, sb->mixed ? NULL : sb->instance,
	    sb->mixed ? NULL : sb->what, sb->pending);
	sb->pending = 0;
	sb->mixed = 0;
}

static void
session_batch_log(struct session_batch *sb, struct broker *b,
    const char *instance, const char *what)
{
	const struct timeval one = { 1, 0 };

	if (sb->timer == NULL &&
	    (sb->timer = evtimer_new(b->base, session_batch_flush, sb)) ==
		NULL) {
		session_batch_event(sb, instance, what, 1); /* unbatched */
		return;
	}
	if (evtimer_pending(sb->timer, NULL)) {
		/* Within a second of the last event: count it. */
		if (sb->pending == 0) {
			(void)snprintf(sb->instance, sizeof(sb->instance),
			    "%s", instance);
			sb->what = what;
		} else if (strcmp(sb->instance, instance) != 0 ||
		    sb->what != what)
			sb->mixed = 1;
		sb->pending++;
		return;
	}
	session_batch_event(sb, instance, what, 1);
	(void)evtimer_add(sb->timer, &one);
}

/* Log what is counted and free the timer. */
static void
session_batch_done(struct session_batch *sb)
{
	if (sb->timer == NULL)
		return;
	session_batch_flush(-1, 0, sb);
	event_free(sb->timer);
	sb->timer = NULL;
}

void
session_log_refused(struct broker *b, const char *instance, const char *cap)
{
	session_batch_log(&refused, b, instance, cap);
}

/* A session dropped for the guest's protocol violation fault. */
static void
session_log_dropped(struct broker *b, const char *instance,
    enum proto_fault fault)
{
	session_batch_log(&dropped, b, instance, proto_fault_str(fault));
}

int
session_accept(struct broker *b, int fd, const char *instance)
{
	struct timeval hello = { SESSION_HELLO_MS / 1000, 0 };
	struct session *s;
	const char *cap = NULL;
	int err = 0;

	/*
	 * The caps, and the instance's fair share of the sessions: each
	 * configured instance is guaranteed some, the rest is borrowed
	 * fairly across plugins (share.h), constant time per accept.
	 */
	if (b->draining || strlen(instance) > CONF_NAME_MAX) {
		(void)close(fd);
		return EGRESS_ERR_AGAIN;
	}
	if (b->nsessions >= SESSIONS_MAX)
		cap = "sessions_max";
	else if (b->session_share != NULL &&
	    share_held(b->session_share, instance) >= SESSIONS_PER_INSTANCE)
		cap = "sessions_per_instance";
	else if (b->session_share != NULL &&
	    (err = share_acquire(b->session_share, instance, NULL, 1)) != 0)
		cap = err == EGRESS_ERR_NOMEM ? NULL : "sessions_share";
	if (cap != NULL || err != 0) {
		if (cap != NULL)
			session_log_refused(b, instance, cap);
		(void)close(fd);
		return EGRESS_ERR_AGAIN;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		if (b->session_share != NULL)
			share_release(b->session_share, instance, 1);
		(void)close(fd);
		return EGRESS_ERR_AGAIN;
	}
	s->shared = b->session_share != NULL;
	s->b = b;
	s->fd = fd;
	s->guest.ops = &session_guest_ops;
	s->guest.ctx = s;
	s->mem.wake = session_mem_wake;
	s->mem.arg = s;
	s->logw.wake = session_log_wake;
	s->logw.arg = s;
	memcpy(s->instance, instance, strlen(instance) + 1);
	proto_conn_init(&s->pc, PROTO_ROLE_BROKER);
	s->in = evbuffer_new();
	s->bev = bufferevent_socket_new(b->base, fd, BEV_OPT_CLOSE_ON_FREE);
	s->rev = event_new(b->base, fd, EV_READ | EV_PERSIST, session_read_cb,
	    s);
	s->hello_timer = evtimer_new(b->base, session_hello_cb, s);
	s->stall_timer = evtimer_new(b->base, session_stall_cb, s);
	s->defer = event_new(b->base, -1, 0, session_defer_cb, s);
	s->stage = evbuffer_new();
	s->flush_ev = event_new(b->base, -1, 0, session_flush_cb, s);
	s->next = b->sessions;
	if (b->sessions != NULL)
		b->sessions->prev = s;
	b->sessions = s;
	b->nsessions++;
	if (s->in == NULL || s->bev == NULL || s->rev == NULL ||
	    s->hello_timer == NULL || s->stall_timer == NULL ||
	    s->defer == NULL || s->stage == NULL || s->flush_ev == NULL) {
		session_free(s);
		return EGRESS_ERR_NOMEM;
	}
	bufferevent_setcb(s->bev, NULL, session_write_cb, session_event_cb, s);
	s->took_cb = evbuffer_add_cb(bufferevent_get_output(s->bev),
	    session_took_cb, s);
	bufferevent_setwatermark(s->bev, EV_WRITE, SESSION_OUT_LOW, 0);
	if (s->took_cb == NULL || readmore_bulk(s->bev) != 0 ||
	    bufferevent_enable(s->bev, EV_WRITE) != 0 ||
	    event_add(s->rev, NULL) != 0 ||
	    evtimer_add(s->hello_timer, &hello) != 0) {
		session_free(s);
		return EGRESS_ERR_NOMEM;
	}
	return 0;
}

size_t
session_drain_all(struct broker *b)
{
	struct session *s, *next;

	for (s = b->sessions; s != NULL; s = next) {
		next = s->next;
		if (s->pc.state != PROTO_CONN_OPEN) {
			session_free(s);
			continue;
		}
		session_send_goaway(s);
		session_maybe_close(s); /* may free s */
	}
	return b->nsessions;
}

void
session_free_all(struct broker *b)
{
	while (b->sessions != NULL)
		session_free(b->sessions);
	request_linger_abort_all(b);
	session_batch_done(&refused);
	session_batch_done(&dropped);
}

struct session_revoke {
	struct broker *b;
	char instance[CONF_NAME_MAX + 1];
};

static void
session_revoke_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session_revoke *rv = arg;
	struct session *s, *next;

	for (s = rv->b->sessions; s != NULL; s = next) {
		next = s->next;
		if (strcmp(s->instance, rv->instance) == 0)
			session_free(s);
	}
	free(rv);
}

void
session_revoke_instance(struct broker *b, const char *instance)
{
	struct session_revoke *rv;
	struct timeval zero = { 0, 0 };

	/* Out of memory: they stay open rather than free one in use. */
	if ((rv = calloc(1, sizeof(*rv))) == NULL)
		return;
	rv->b = b;
	(void)snprintf(rv->instance, sizeof(rv->instance), "%s", instance);
	if (event_base_once(b->base, -1, EV_TIMEOUT, session_revoke_cb, rv,
		&zero) != 0)
		free(rv);
}
