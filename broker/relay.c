/* SPDX-License-Identifier: ISC */
/*
 * The byte relay of an established tcp or tls stream (see relay.h).
 * Upstream bytes move from the bufferevent's input straight into the
 * guest's output as DATA frames (whole chains change hands, no copy);
 * guest bytes move from the owner's buffer into the bufferevent's output
 * the same way. The bufferevent's input is the only buffering towards
 * the guest: when the guest's window is shut, the input fills to
 * RELAY_DOWN_HIGH and reading stops until the guest takes some, which is
 * the back-pressure the upstream sees.
 *
 * A plain upstream towards a guest that takes spliced frames is read by
 * the relay's own event instead (relay_read_own()): bulk reads go from
 * the socket to the guest's socket through pipes, never through this
 * process's memory; every other read lands in the bufferevent's input as
 * above.
 */
#include <sys/socket.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <egress/error.h>

#include "broker/broker.h"
#include "broker/guest.h"
#include "broker/net/dial.h"
#include "broker/net/pipemove.h"
#include "broker/net/readmore.h"
#include "broker/relay.h"
#include "proto/proto.h"

struct relay {
	struct event_base *base;
	const struct guest *g; /* borrowed */
	struct proto_stream *st;
	struct evbuffer *from_guest;
	struct bufferevent *up;
	struct event *timer;
	struct event *shut_ev; /* the close_notify waits for room */
	struct event *rd;      /* reads the upstream itself (a plain socket
				  and a guest that takes spliced frames);
				  NULL: the bufferevent reads */
	relay_end_fn end;
	void *arg;
	unsigned long *activity;

	int guest_ended;    /* the guest's END_STREAM arrived */
	int up_shut;	    /* ... and reached the upstream */
	int up_eof;	    /* the upstream's end of file arrived */
	int down_ended;	    /* ... and reached the guest */
	int over;	    /* end was called */
	int clean;	    /* ... with both directions ended */
	int read_paused;    /* the upstream's input is full */
	int detached;	    /* the guest is gone: flush, then end */
	int sock_err;	    /* readmore() found a socket error */
	int bulk;	    /* the last read was large: splice the next */
	int guest_full;	    /* reading stopped until the guest's socket has
			       room (relay_flush()) */
	relay_hold_fn hold; /* held (relay_hold()): called once, then NULL */
	void *hold_arg;

	uint64_t bytes_up, bytes_down;
	uint64_t last_ms;     /* the last byte either way */
	uint64_t idle_ms;     /* 0: none */
	uint64_t deadline_ms; /* the lifetime's end; 0: none */
};

static const struct timeval zero_tv = { 0, 0 };

/* Frames spliced per readable event, at most (then other connections
 * get their turn). */
#define RELAY_SPLICE_TURNS 4
/* A read of this many bytes or more says the upstream sends in bulk:
 * the next reads are spliced (pipemove.h: smaller moves are copies). */
#define RELAY_BULK_MIN	   PIPEMOVE_MIN

static void
relay_touch(struct relay *r)
{
	r->last_ms = broker_now_ms();
	if (r->activity != NULL)
		(*r->activity)++;
}

/* Watch the upstream for bytes (on), or stop (off). */
static void
relay_read_set(struct relay *r, int on)
{
	if (r->rd != NULL) {
		if (on)
			(void)event_add(r->rd, NULL);
		else
			(void)event_del(r->rd);
	} else if (on) {
		(void)bufferevent_enable(r->up, EV_READ);
	} else {
		(void)bufferevent_disable(r->up, EV_READ);
	}
}

/* Stop every callback and report the end, once. */
static void
relay_over(struct relay *r, int err)
{
	if (r->over)
		return;
	r->over = 1;
	r->clean = err == 0;
	r->hold = NULL;
	if (r->up != NULL) {
		bufferevent_setcb(r->up, NULL, NULL, NULL, NULL);
		(void)bufferevent_disable(r->up, EV_READ | EV_WRITE);
	}
	if (r->rd != NULL)
		(void)event_del(r->rd);
	(void)evtimer_del(r->timer);
	if (r->shut_ev != NULL)
		(void)event_del(r->shut_ev);
	r->end(r->arg, err);
}

static void
relay_check_done(struct relay *r)
{
	if (r->up_shut && (r->down_ended || r->detached))
		relay_over(r, 0);
}

static void relay_pump(struct relay *r);

/* End the hold with verdict: no more callbacks; the owner acts. */
static void
relay_hold_end(struct relay *r, enum relay_hold_verdict v)
{
	relay_hold_fn fn = r->hold;

	r->hold = NULL;
	bufferevent_setcb(r->up, NULL, NULL, NULL, NULL);
	(void)bufferevent_disable(r->up, EV_READ | EV_WRITE);
	if (r->rd != NULL)
		(void)event_del(r->rd);
	fn(r->hold_arg, v);
}

/*
 * While held: any upstream byte not delivered to the guest, in the
 * input or still in the socket, or the upstream's end, ends the hold;
 * once every guest byte reached the socket and nothing else is there,
 * the connection is quiet.
 */
static void
relay_hold_check(struct relay *r)
{
	struct evbuffer *out = bufferevent_get_output(r->up);
	unsigned char c;
	ssize_t n;

	if (evbuffer_get_length(bufferevent_get_input(r->up)) > 0) {
		relay_hold_end(r, RELAY_HOLD_INJECTED);
		return;
	}
	if (r->up_eof) {
		relay_hold_end(r, RELAY_HOLD_ENDED);
		return;
	}
	if (evbuffer_get_length(r->from_guest) > 0 ||
	    evbuffer_get_length(out) > 0)
		return; /* the write callback comes back */
	n = recv(bufferevent_getfd(r->up), &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n > 0)
		relay_hold_end(r, RELAY_HOLD_INJECTED);
	else if (n == 0)
		relay_hold_end(r, RELAY_HOLD_ENDED);
	else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		relay_hold_end(r, RELAY_HOLD_QUIET);
	else
		relay_hold_end(r, RELAY_HOLD_ENDED);
}

/* Upstream input to the guest within the windows; then its end. */
static void
relay_push(struct relay *r)
{
	struct evbuffer *in;
	struct proto_msg m;
	size_t len;
	uint32_t n;

	if (r->up == NULL)
		return; /* taken (relay_take_upstream()): nothing moves */
	in = bufferevent_get_input(r->up);
	if (r->detached) {
		/* Nobody reads it any more. */
		(void)evbuffer_drain(in, evbuffer_get_length(in));
		return;
	}
	if (r->hold != NULL) {
		relay_hold_check(r);
		return;
	}
	while (!r->over && (len = evbuffer_get_length(in)) > 0 &&
	    r->g->ops->can_write(r->g->ctx)) {
		n = proto_conn_sendable(r->g->ops->proto(r->g->ctx), r->st);
		if (n == 0)
			break;
		if (n > len)
			n = (uint32_t)len;
		if (r->g->ops->send_data(r->g->ctx, r->st, in, n, 0) != 0) {
			relay_over(r, EGRESS_ERR_UNAVAILABLE);
			return;
		}
		r->bytes_down += n;
		relay_touch(r);
	}
	if (r->over)
		return;
	if (r->sock_err) {
		if (evbuffer_get_length(in) == 0)
			relay_over(r, EGRESS_ERR_UPSTREAM_PROTOCOL);
		return;
	}
	/* Read only while the guest takes what was read. */
	len = evbuffer_get_length(in);
	if (!r->up_eof && len >= RELAY_DOWN_HIGH && !r->read_paused) {
		relay_read_set(r, 0);
		r->read_paused = 1;
	} else if (!r->up_eof && len < RELAY_DOWN_HIGH && r->read_paused) {
		relay_read_set(r, 1);
		r->read_paused = 0;
	}
	if (!r->up_eof || r->down_ended || evbuffer_get_length(in) > 0 ||
	    !r->g->ops->can_write(r->g->ctx))
		return;
	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_DATA;
	m.flags = PROTO_FLAG_END_STREAM;
	m.stream = r->st->id;
	if (r->g->ops->send(r->g->ctx, r->st, &m) != 0) {
		relay_over(r, EGRESS_ERR_UNAVAILABLE);
		return;
	}
	r->down_ended = 1;
	relay_check_done(r);
}

static void
relay_shut_cb(evutil_socket_t fd, short what, void *arg)
{
	relay_pump(arg);
}

/* Try the write side's end again once the socket has room. */
static int
relay_shut_wait(struct relay *r)
{
	if (r->shut_ev == NULL &&
	    (r->shut_ev = event_new(r->base, bufferevent_getfd(r->up),
		 EV_WRITE, relay_shut_cb, r)) == NULL)
		return EGRESS_ERR_NOMEM;
	return event_add(r->shut_ev, NULL) == 0 ? 0 : EGRESS_ERR_NOMEM;
}

/* Guest bytes to the upstream under RELAY_UP_HIGH; then its end. */
static void
relay_pump(struct relay *r)
{
	struct evbuffer *out;
	size_t n = evbuffer_get_length(r->from_guest);

	if (r->over || r->up == NULL)
		return; /* over, or taken: nothing moves */
	out = bufferevent_get_output(r->up);
	if (r->hold != NULL && n == 0) {
		relay_hold_check(r);
		return;
	}
	if (n > 0 && evbuffer_get_length(out) < RELAY_UP_HIGH) {
		if (evbuffer_add_buffer(out, r->from_guest) != 0) {
			relay_over(r, EGRESS_ERR_UNAVAILABLE);
			return;
		}
		r->bytes_up += n;
		relay_touch(r);
		r->g->ops->consumed(r->g->ctx, r->st, n);
	}
	if (r->hold != NULL)
		return; /* the write callback comes back once written */
	if (!r->guest_ended || r->up_shut ||
	    evbuffer_get_length(r->from_guest) > 0 ||
	    evbuffer_get_length(out) > 0)
		return;
	switch (dial_shutdown_write(r->up)) {
	case 0:
		break;
	case DIAL_SHUT_AGAIN:
		if (relay_shut_wait(r) != 0)
			relay_over(r, EGRESS_ERR_UNAVAILABLE);
		return;
	default:
		relay_over(r, EGRESS_ERR_UPSTREAM_PROTOCOL);
		return;
	}
	r->up_shut = 1;
	relay_check_done(r);
}

static void
relay_read_cb(struct bufferevent *bev, void *arg)
{
	struct relay *r = arg;

	relay_touch(r);
	/* libevent reads 4 KiB at a time: read on up to the input's bound,
	 * so the guest gets larger frames (readmore.h). A socket error
	 * found there ends the relay once what was read is delivered
	 * (relay_push), as the bufferevent's error event would have. */
	if (!r->read_paused && !r->up_eof && !r->sock_err &&
	    readmore(r->up, RELAY_DOWN_HIGH) != 0) {
		r->sock_err = 1;
		(void)bufferevent_disable(r->up, EV_READ);
	}
	relay_push(r);
}

/* The upstream ended its side, or failed (the socket's error was read:
 * it ends the relay once what was read is delivered, in relay_push). */
static void
relay_up_stop(struct relay *r, int failed)
{
	if (failed)
		r->sock_err = 1;
	else
		r->up_eof = 1;
	relay_read_set(r, 0);
}

/* Read the upstream again after the guest's socket was full. */
static void
relay_unfull(struct relay *r)
{
	if (!r->guest_full)
		return;
	r->guest_full = 0;
	if (r->up != NULL && !r->read_paused && !r->up_eof && !r->sock_err &&
	    !r->over)
		relay_read_set(r, 1);
}

/*
 * The upstream is readable and the relay reads it itself: while reads
 * come in bulk (the last one brought RELAY_BULK_MIN bytes or more) and
 * the guest takes frames as they come (nothing else waits for it, its
 * windows open), splice up to RELAY_SPLICE_TURNS frames straight from the
 * socket to the guest; else read into the input, as the bufferevent
 * would, and leave them to relay_push(). A splice that finds nothing in a
 * readable socket, or an end, is followed by a read too: a splice stops
 * at urgent data (and reads an end past it) where a read skips the
 * urgent byte. Return 1 when the relay is over (r may be gone), else
 * 0.
 */
static int
relay_read_own(struct relay *r)
{
	const struct guest *g = r->g;
	struct evbuffer *in = bufferevent_get_input(r->up);
	size_t len;
	uint32_t w;
	ssize_t n;
	int i;

	if (r->over)
		return 1;
	for (i = 0; i < RELAY_SPLICE_TURNS; i++) {
		if (r->up_eof || r->sock_err || r->read_paused)
			return 0;
		if (!r->bulk || r->hold != NULL || r->detached ||
		    evbuffer_get_length(in) > 0 ||
		    g->ops->splice_data == NULL ||
		    !g->ops->can_write(g->ctx) ||
		    (w = proto_conn_sendable(g->ops->proto(g->ctx), r->st)) ==
			0)
			break;
		n = g->ops->splice_data(g->ctx, r->st,
		    bufferevent_getfd(r->up), w);
		if (n > 0) {
			r->bytes_down += (uint64_t)n;
			relay_touch(r);
			if ((size_t)n < RELAY_BULK_MIN)
				r->bulk = 0;
			if ((size_t)n < w)
				return 0; /* the socket is likely empty */
			continue;
		}
		switch (n) {
		case GUEST_SPLICE_EOF:
			/* A splice stopped by urgent data reads 0 too once the
			 * upstream's end arrived: the read below tells. */
			break;
		case GUEST_SPLICE_UPSTREAM:
			relay_touch(r);
			relay_up_stop(r, 1);
			return 0;
		case GUEST_SPLICE_FULL:
			r->guest_full = 1;
			relay_read_set(r, 0);
			return 0;
		case GUEST_SPLICE_AGAIN:
			if (i > 0)
				return 0; /* it brought bytes before */
			break;
		case GUEST_SPLICE_BUSY:
			break;
		default:
			relay_over(r, EGRESS_ERR_UNAVAILABLE);
			return 1;
		}
		break;
	}
	if (i == RELAY_SPLICE_TURNS)
		return 0; /* the rest at the next turn of the loop */
	if ((len = evbuffer_get_length(in)) >= RELAY_DOWN_HIGH)
		return 0;
	n = readmore_read(r->up, RELAY_DOWN_HIGH - len);
	if (n > 0) {
		relay_touch(r);
		r->bulk = (size_t)n >= RELAY_BULK_MIN;
	} else if (n == 0) {
		relay_touch(r);
		relay_up_stop(r, 0);
	} else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
		relay_touch(r);
		relay_up_stop(r, 1);
	}
	return 0;
}

static void
relay_rd_cb(evutil_socket_t fd, short what, void *arg)
{
	struct relay *r = arg;

	if (relay_read_own(r) == 0)
		relay_push(r);
}

static void
relay_write_cb(struct bufferevent *bev, void *arg)
{
	relay_pump(arg);
}

static void
relay_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct relay *r = arg;

	relay_touch(r);
	if (what & BEV_EVENT_ERROR) {
		/* A reset, a write to a closed peer, or TLS that ended
		 * without close_notify (a truncation is never an end). */
		relay_over(r, EGRESS_ERR_UPSTREAM_PROTOCOL);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		r->up_eof = 1;
		(void)bufferevent_disable(bev, EV_READ);
		relay_push(r);
	}
}

static int
relay_arm(struct relay *r)
{
	uint64_t now = broker_now_ms(), at = 0, d;
	struct timeval tv;

	if (r->idle_ms != 0)
		at = r->last_ms + r->idle_ms;
	if (r->deadline_ms != 0 && (at == 0 || r->deadline_ms < at))
		at = r->deadline_ms;
	if (at == 0)
		return 0;
	d = at > now ? at - now : 0;
	tv.tv_sec = (time_t)(d / 1000);
	tv.tv_usec = (suseconds_t)(d % 1000) * 1000;
	return evtimer_add(r->timer, &tv) == 0 ? 0 : EGRESS_ERR_NOMEM;
}

/* The idle timeout or the lifetime may have passed; else wait again. */
static void
relay_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct relay *r = arg;
	uint64_t now = broker_now_ms();

	if ((r->deadline_ms != 0 && now >= r->deadline_ms) ||
	    (r->idle_ms != 0 && now - r->last_ms >= r->idle_ms)) {
		relay_over(r, EGRESS_ERR_TIMEOUT);
		return;
	}
	if (relay_arm(r) != 0)
		relay_over(r, EGRESS_ERR_UNAVAILABLE);
}

int
relay_start(const struct relay_params *p, struct bufferevent *bev,
    relay_end_fn end, void *arg, struct relay **ret)
{
	struct relay *r;

	if (p == NULL || p->base == NULL || p->g == NULL || p->st == NULL ||
	    p->from_guest == NULL || end == NULL || ret == NULL) {
		bufferevent_free(bev);
		return EGRESS_ERR_INVALID;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL) {
		bufferevent_free(bev);
		return EGRESS_ERR_NOMEM;
	}
	r->base = p->base;
	r->g = p->g;
	r->st = p->st;
	r->from_guest = p->from_guest;
	r->up = bev;
	r->end = end;
	r->arg = arg;
	r->activity = p->activity;
	r->idle_ms = p->idle_ms;
	r->last_ms = broker_now_ms();
	if (p->lifetime_ms != 0)
		r->deadline_ms = r->last_ms + p->lifetime_ms;
	if ((r->timer = evtimer_new(p->base, relay_timer_cb, r)) == NULL ||
	    relay_arm(r) != 0) {
		relay_free(r);
		return EGRESS_ERR_NOMEM;
	}
	bufferevent_setcb(bev, relay_read_cb, relay_write_cb, relay_event_cb,
	    r);
	bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
	/* A plain socket towards a guest that takes spliced frames: read
	 * it here, not through the bufferevent. */
	if (p->g->ops->splice_data != NULL && dial_is_plain(bev) &&
	    (r->rd = event_new(p->base, bufferevent_getfd(bev),
		 EV_READ | EV_PERSIST, relay_rd_cb, r)) == NULL) {
		relay_free(r);
		return EGRESS_ERR_NOMEM;
	}
	if (bufferevent_enable(bev,
		r->rd != NULL ? EV_WRITE : EV_READ | EV_WRITE) != 0 ||
	    (r->rd != NULL && event_add(r->rd, NULL) != 0)) {
		relay_free(r);
		return EGRESS_ERR_NOMEM;
	}
	*ret = r;
	return 0;
}

void
relay_guest_data(struct relay *r, int end)
{
	if (end)
		r->guest_ended = 1;
	relay_pump(r);
}

void
relay_detach(struct relay *r)
{
	r->detached = 1;
	relay_unfull(r); /* what the upstream sends is discarded */
	if (r->up_shut) {
		/* The guest's end already reached the upstream: over. */
		relay_check_done(r);
		return;
	}
	relay_push(r);
	relay_pump(r); /* may end it */
}

void
relay_flush(struct relay *r)
{
	relay_unfull(r);
	relay_push(r);
}

int
relay_waits_for_room(const struct relay *r)
{
	return r->guest_full;
}

uint64_t
relay_bytes_up(const struct relay *r)
{
	return r->bytes_up;
}

uint64_t
relay_bytes_down(const struct relay *r)
{
	return r->bytes_down;
}

void
relay_hold(struct relay *r, relay_hold_fn fn, void *arg)
{
	r->hold = fn;
	r->hold_arg = arg;
	relay_unfull(r);
	if (r->read_paused) {
		/* Whatever waits in the socket must be seen. */
		relay_read_set(r, 1);
		r->read_paused = 0;
	}
	relay_pump(r); /* may end the hold */
}

struct bufferevent *
relay_take_upstream(struct relay *r)
{
	struct bufferevent *bev = r->up;

	r->up = NULL;
	if (bev != NULL) {
		bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
		(void)bufferevent_disable(bev, EV_READ | EV_WRITE);
	}
	/* The next upstream (relay_resume()) is read by its bufferevent. */
	if (r->rd != NULL)
		event_free(r->rd);
	r->rd = NULL;
	return bev;
}

int
relay_resume(struct relay *r, struct bufferevent *bev)
{
	if (r->over || r->up != NULL) {
		dial_abort_on_free(bev);
		bufferevent_free(bev);
		return EGRESS_ERR_INVALID;
	}
	r->up = bev;
	r->up_eof = 0;
	relay_touch(r);
	bufferevent_setcb(bev, relay_read_cb, relay_write_cb, relay_event_cb,
	    r);
	bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
	if (bufferevent_enable(bev, EV_READ | EV_WRITE) != 0)
		return EGRESS_ERR_NOMEM;
	/* What the handshake already decrypted waits for no new byte: its
	 * read callback runs from the loop (deferred, so nothing here runs
	 * after an end that may have freed r). */
	if (evbuffer_get_length(bufferevent_get_input(bev)) > 0)
		bufferevent_trigger(bev, EV_READ, BEV_TRIG_DEFER_CALLBACKS);
	relay_pump(r);
	return 0;
}

static void
relay_up_free_cb(evutil_socket_t fd, short what, void *arg)
{
	bufferevent_free(arg);
}

void
relay_free(struct relay *r)
{
	if (r == NULL)
		return;
	/* Possibly inside one of its callbacks: free it from the loop. A
	 * relay cut before both directions ended resets the upstream. */
	if (r->up != NULL) {
		if (!r->clean)
			dial_abort_on_free(r->up);
		bufferevent_setcb(r->up, NULL, NULL, NULL, NULL);
		(void)bufferevent_disable(r->up, EV_READ | EV_WRITE);
		if (event_base_once(r->base, -1, EV_TIMEOUT, relay_up_free_cb,
			r->up, &zero_tv) != 0)
			bufferevent_free(r->up);
	}
	if (r->timer != NULL)
		event_free(r->timer);
	if (r->shut_ev != NULL)
		event_free(r->shut_ev);
	if (r->rd != NULL)
		event_free(r->rd);
	free(r);
}
