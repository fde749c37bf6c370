/* SPDX-License-Identifier: ISC */
/*
 * http1: request-head validation and one HTTP/1.1 exchange. The response
 * is parsed by http-parser straight out of the bufferevent's input chain
 * (evbuffer_peek, no pull-up); head and trailer bytes are collected into
 * one bounded buffer; body pieces are handed to the caller as they are
 * parsed. A Content-Length body is not parsed at all: once the head is
 * complete the parser is told the message has no body, and the announced
 * number of bytes is handed over straight from the input chain ("raw"
 * mode), moved without a copy when the caller takes an evbuffer. Flow
 * control pauses the parser and disables reading, so the input buffer
 * never grows past the read-high watermark. All callback entry points
 * hold a busy count, so the caller may free the exchange from inside any
 * callback.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <http_parser.h>

#include "broker/net/evmove.h"
#include "broker/net/http1.h"
#include "broker/net/readmore.h"

/* ---- the exchange ----------------------------------------------------- */

struct http1_hoff {
	size_t name_off, name_len, value_off, value_len;
};

struct http1_exchange {
	struct bufferevent *bev;
	struct event_base *base;
	struct http1_callbacks cb;
	void *arg;
	struct http1_timeouts t;
	struct event *tmo;
	struct event *resume_ev;
	http_parser parser;

	int head_method;     /* HEAD request: no response body */
	int64_t body_length; /* announced request body, -1 chunked */
	int64_t body_sent;
	int body_done;
	int keep_alive;

	/* Head and trailer collection. */
	char *hbuf;
	size_t hlen, hcap;
	struct http1_hoff *hoff; /* grown on demand, at most
					   HTTP1_HEADERS_MAX */
	size_t nh, hoff_cap;
	int in_value; /* last callback was a header value */
	size_t reason_off, reason_len;
	int headers_done;		     /* final head delivered */
	unsigned ninterim;		     /* 1xx responses seen */
	http1_body_buffer_cb on_data_buffer; /* replaces cb.on_data */
	int64_t raw_left;     /* Content-Length body bytes still to come */
	int raw;	      /* raw mode: the body bypasses the parser */
	const char *iov_base; /* the input segment being parsed */
	size_t iov_taken;     /* its bytes already removed from the input */

	int got_byte;
	int paused;
	int eof;
	int msg_complete;
	int ended;
	int reusable;
	int err; /* set by parser callbacks */
	int busy;
	int zombie;
	int sock_err; /* readmore() found a socket error */
};

static void http1_process(struct http1_exchange *);

/* Output is pending: make sure the bufferevent writes it. */
static int
http1_want_write(struct http1_exchange *x)
{
	if (bufferevent_get_enabled(x->bev) & EV_WRITE)
		return 0;
	return bufferevent_enable(x->bev, EV_WRITE) == 0 ?
	    0 :
	    EGRESS_ERR_NOMEM;
}

static void
http1_arm(struct http1_exchange *x)
{
	struct timeval tv;
	int ms;

	if (x->ended || x->zombie)
		return;
	ms = x->got_byte ? x->t.between_bytes_ms : x->t.first_byte_ms;
	if (ms <= 0 || (x->paused && x->got_byte)) {
		(void)event_del(x->tmo);
		return;
	}
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	(void)evtimer_add(x->tmo, &tv);
}

static void
http1_final_free(struct http1_exchange *x)
{
	free(x->hbuf);
	free(x->hoff);
	free(x);
}

static void
http1_enter(struct http1_exchange *x)
{
	x->busy++;
}

/* Return 1 when x is gone (freed) and the caller must not touch it. */
static int
http1_leave(struct http1_exchange *x)
{
	if (--x->busy == 0 && x->zombie) {
		http1_final_free(x);
		return 1;
	}
	return 0;
}

static void
http1_end(struct http1_exchange *x, int err)
{
	struct http1_header th[HTTP1_HEADERS_MAX];
	size_t i, n = 0;

	if (x->ended || x->zombie)
		return;
	x->ended = 1;
	(void)event_del(x->tmo);
	/* A clean end leaves the read watch on (the keep-alive pool keeps
	 * it, without an epoll_ctl per request); later bytes stay in the
	 * input, unparsed, and make the connection unfit for reuse. */
	if (err != 0)
		(void)bufferevent_disable(x->bev, EV_READ);
	if (err == 0 && x->headers_done) {
		for (i = 0; i < x->nh; i++) {
			th[i].name = x->hbuf + x->hoff[i].name_off;
			th[i].name_len = x->hoff[i].name_len;
			th[i].value = x->hbuf + x->hoff[i].value_off;
			th[i].value_len = x->hoff[i].value_len;
		}
		n = x->nh;
		if (!http1_fields_ok(th, n)) {
			/* Malformed trailers: the response fails. */
			err = EGRESS_ERR_UPSTREAM_PROTOCOL;
			n = 0;
			x->reusable = 0;
			(void)bufferevent_disable(x->bev, EV_READ);
		}
	} else
		x->reusable = 0;
	if (x->cb.on_end != NULL)
		x->cb.on_end(x->arg, err, n > 0 ? th : NULL, n);
}

/*
 * Append to the head buffer; refuse past HTTP1_HEAD_MAX. The buffer
 * starts small and doubles (a typical head is a few hundred bytes, so
 * no exchange pays for 64 KiB); headers are kept as offsets, so moving
 * it is safe.
 */
static int
http1_hadd(struct http1_exchange *x, const char *p, size_t n)
{
	size_t cap;
	char *nb;

	if (n > HTTP1_HEAD_MAX - x->hlen) {
		x->err = EGRESS_ERR_UPSTREAM_PROTOCOL;
		return -1;
	}
	if (n == 0)
		return 0;
	if (x->hlen + n > x->hcap) {
		for (cap = x->hcap > 0 ? x->hcap : 1024; cap < x->hlen + n;)
			cap *= 2;
		if (cap > HTTP1_HEAD_MAX)
			cap = HTTP1_HEAD_MAX;
		if ((nb = realloc(x->hbuf, cap)) == NULL) {
			x->err = EGRESS_ERR_NOMEM;
			return -1;
		}
		x->hbuf = nb;
		x->hcap = cap;
	}
	memcpy(x->hbuf + x->hlen, p, n);
	x->hlen += n;
	return 0;
}

static void
http1_hreset(struct http1_exchange *x)
{
	x->hlen = 0;
	x->nh = 0;
	x->in_value = 0;
	x->reason_len = 0;
	x->reason_off = 0;
}

static int
http1_on_message_begin(http_parser *p)
{
	struct http1_exchange *x = p->data;

	http1_hreset(x);
	return 0;
}

static int
http1_on_status(http_parser *p, const char *at, size_t n)
{
	struct http1_exchange *x = p->data;

	if (x->reason_len == 0)
		x->reason_off = x->hlen;
	if (http1_hadd(x, at, n) != 0)
		return -1;
	x->reason_len += n;
	return 0;
}

static int
http1_on_header_field(http_parser *p, const char *at, size_t n)
{
	struct http1_exchange *x = p->data;

	if (x->nh == 0 || x->in_value) {
		if (x->nh == HTTP1_HEADERS_MAX) {
			x->err = EGRESS_ERR_UPSTREAM_PROTOCOL;
			return -1;
		}
		if (x->nh == x->hoff_cap) {
			size_t cap = x->hoff_cap != 0 ? x->hoff_cap * 2 : 16;
			struct http1_hoff *nh;

			if (cap > HTTP1_HEADERS_MAX)
				cap = HTTP1_HEADERS_MAX;
			if ((nh = reallocarray(x->hoff, cap, sizeof(*nh))) ==
			    NULL) {
				x->err = EGRESS_ERR_NOMEM;
				return -1;
			}
			x->hoff = nh;
			x->hoff_cap = cap;
		}
		x->hoff[x->nh].name_off = x->hlen;
		x->hoff[x->nh].name_len = 0;
		x->hoff[x->nh].value_off = x->hlen;
		x->hoff[x->nh].value_len = 0;
		x->nh++;
		x->in_value = 0;
	}
	if (http1_hadd(x, at, n) != 0)
		return -1;
	x->hoff[x->nh - 1].name_len += n;
	x->hoff[x->nh - 1].value_off = x->hlen;
	return 0;
}

static int
http1_on_header_value(http_parser *p, const char *at, size_t n)
{
	struct http1_exchange *x = p->data;

	if (x->nh == 0)
		return -1;
	if (!x->in_value) {
		x->in_value = 1;
		x->hoff[x->nh - 1].value_off = x->hlen;
	}
	if (http1_hadd(x, at, n) != 0)
		return -1;
	x->hoff[x->nh - 1].value_len += n;
	return 0;
}

/* Check framing headers ourselves, stricter than the parser. */
static int
http1_check_framing(struct http1_exchange *x, struct http1_header *h, size_t n,
    int64_t *ret_clen, int *ret_chunked)
{
	int64_t clen = -1, l;
	int te = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		const char *v = h[i].value;
		size_t vn = h[i].value_len;

		http1_trim(&v, &vn);
		if (http1_header_is(&h[i], "content-length")) {
			if (http1_parse_length(v, vn, &l) != 0 ||
			    (clen >= 0 && l != clen))
				return -1;
			clen = l;
		} else if (http1_header_is(&h[i], "transfer-encoding")) {
			if (te++ > 0 || vn != 7 ||
			    strncasecmp(v, "chunked", 7) != 0)
				return -1;
		}
	}
	if (te && clen >= 0)
		return -1;
	*ret_clen = clen;
	*ret_chunked = te;
	return 0;
}

static int
http1_on_headers_complete(http_parser *p)
{
	struct http1_exchange *x = p->data;
	struct http1_header h[HTTP1_HEADERS_MAX];
	struct http1_response resp;
	size_t i;
	int nobody;

	if (p->status_code == 101) {
		x->err = EGRESS_ERR_UPSTREAM_PROTOCOL;
		return -1;
	}
	if (p->status_code >= 100 && p->status_code < 200) {
		/* Interim: never a body, whatever it says. Capped, so an
		 * upstream cannot keep the exchange alive with them. */
		if (++x->ninterim > HTTP1_INTERIM_MAX) {
			x->err = EGRESS_ERR_UPSTREAM_PROTOCOL;
			return -1;
		}
		return 1;
	}
	if (p->status_code < 200 || p->status_code > 599) {
		x->err = EGRESS_ERR_UPSTREAM_PROTOCOL;
		return -1;
	}
	for (i = 0; i < x->nh; i++) {
		h[i].name = x->hbuf + x->hoff[i].name_off;
		h[i].name_len = x->hoff[i].name_len;
		h[i].value = x->hbuf + x->hoff[i].value_off;
		h[i].value_len = x->hoff[i].value_len;
	}
	memset(&resp, 0, sizeof(resp));
	if (!http1_fields_ok(h, x->nh) ||
	    http1_check_framing(x, h, x->nh, &resp.content_length,
		&resp.chunked) != 0) {
		x->err = EGRESS_ERR_UPSTREAM_PROTOCOL;
		return -1;
	}
	resp.status = (int)p->status_code;
	resp.reason = x->hbuf != NULL ? x->hbuf + x->reason_off : "";
	resp.reason_len = x->reason_len;
	resp.headers = h;
	resp.nheaders = x->nh;
	x->headers_done = 1;
	x->reusable = http_should_keep_alive(p) &&
	    (resp.content_length >= 0 || resp.chunked || x->head_method ||
		resp.status == 204 || resp.status == 304);
	/* A length-delimited body is taken raw, past the parser; 204 and
	 * 304 never have a body, whatever their headers say. */
	nobody = x->head_method || resp.status == 204 || resp.status == 304;
	if (!nobody && resp.content_length > 0)
		x->raw_left = resp.content_length;
	if (x->cb.on_head != NULL)
		x->cb.on_head(x->arg, &resp);
	http1_hreset(x); /* the buffer now collects trailers */
	if (x->zombie)
		return -1;
	if (x->paused)
		http_parser_pause(p, 1);
	return nobody || x->raw_left > 0 ? 1 : 0;
}

/*
 * Hand up to n body bytes at the front of the input to the caller: all n
 * moved at once (on_data_buffer; bytes it left in place are discarded),
 * or borrowed segment by segment (on_data), stopping when the caller
 * pauses. Return the count handed over (meaningless once x is a zombie).
 */
static size_t
http1_deliver(struct http1_exchange *x, struct evbuffer *in, size_t n)
{
	struct evbuffer_iovec v;
	size_t before, gone, m, done = 0;

	if (x->on_data_buffer != NULL) {
		before = evbuffer_get_length(in);
		x->on_data_buffer(x->arg, in, n);
		if (x->zombie)
			return n;
		gone = before - evbuffer_get_length(in);
		assert(gone <= n);
		if (gone < n)
			(void)evbuffer_drain(in, n - gone);
		return n;
	}
	while (done < n && !x->paused) {
		if (evbuffer_peek(in, (ev_ssize_t)(n - done), NULL, &v, 1) < 1)
			break;
		m = v.iov_len < n - done ? v.iov_len : n - done;
		if (x->cb.on_data != NULL)
			x->cb.on_data(x->arg, v.iov_base, m);
		if (x->zombie)
			return done + m;
		(void)evbuffer_drain(in, m);
		done += m;
	}
	return done;
}

static int
http1_on_body(http_parser *p, const char *at, size_t n)
{
	struct http1_exchange *x = p->data;
	struct evbuffer *in;
	size_t skip;

	if (x->on_data_buffer != NULL) {
		/*
		 * Chunked or read-until-close: the piece sits in the segment
		 * being parsed. Drop what precedes it (framing already
		 * parsed), then move it; http1_process() drains the rest.
		 * Every body callback of http-parser returns a count that
		 * covers the piece, so the accounting stays exact.
		 */
		in = bufferevent_get_input(x->bev);
		skip = (size_t)(at - x->iov_base) - x->iov_taken;
		/* Framing drained may leave a short part at in's front,
		 * which a move of all of in would carry. */
		if (skip > 0 &&
		    (evbuffer_drain(in, skip) != 0 ||
			evmove_settle(in) != 0)) {
			http1_end(x, EGRESS_ERR_NOMEM);
			return -1;
		}
		x->iov_taken += skip + n;
		(void)http1_deliver(x, in, n);
	} else if (x->cb.on_data != NULL)
		x->cb.on_data(x->arg, at, n);
	if (x->zombie)
		return -1;
	if (x->paused)
		http_parser_pause(p, 1);
	return 0;
}

static int
http1_on_message_complete(http_parser *p)
{
	struct http1_exchange *x = p->data;

	x->msg_complete = 1;
	http_parser_pause(p, 1); /* stop before any following byte */
	return 0;
}

static const http_parser_settings http1_settings = {
	.on_message_begin = http1_on_message_begin,
	.on_status = http1_on_status,
	.on_header_field = http1_on_header_field,
	.on_header_value = http1_on_header_value,
	.on_headers_complete = http1_on_headers_complete,
	.on_body = http1_on_body,
	.on_message_complete = http1_on_message_complete,
};

static int
http1_parse_error(struct http1_exchange *x)
{
	if (x->err != 0)
		return x->err;
	return EGRESS_ERR_UPSTREAM_PROTOCOL;
}

/* A message completed: interim (keep going) or final (end). */
static int
http1_message_done(struct http1_exchange *x)
{
	struct evbuffer *in = bufferevent_get_input(x->bev);

	x->msg_complete = 0;
	if (!x->headers_done) {
		/* A 1xx interim response; parse the next message. */
		http_parser_pause(&x->parser, 0);
		return 0;
	}
	if (evbuffer_get_length(in) > 0 || !x->body_done ||
	    evbuffer_get_length(bufferevent_get_output(x->bev)) > 0)
		x->reusable = 0;
	if (!x->keep_alive)
		x->reusable = 0;
	http1_end(x, 0);
	return 1;
}

static void
http1_process(struct http1_exchange *x)
{
	struct evbuffer *in = bufferevent_get_input(x->bev);
	struct evbuffer_iovec v;
	size_t n;
	enum http_errno e;

	while (!x->ended && !x->zombie && !x->paused) {
		if (x->raw) {
			n = evbuffer_get_length(in);
			if (n > (uint64_t)x->raw_left)
				n = (size_t)x->raw_left;
			if (n == 0 && x->raw_left > 0)
				break; /* wait for more */
			n = http1_deliver(x, in, n);
			if (x->zombie)
				return;
			x->raw_left -= (int64_t)n;
			if (x->raw_left > 0)
				continue; /* paused, or more to come */
			x->raw = 0;
			if (http1_message_done(x))
				return;
			continue;
		}
		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1 || v.iov_len == 0)
			break;
		if (!x->got_byte) {
			x->got_byte = 1;
			http1_arm(x);
		}
		x->iov_base = v.iov_base;
		x->iov_taken = 0;
		n = http_parser_execute(&x->parser, &http1_settings,
		    v.iov_base, v.iov_len);
		if (x->zombie)
			return;
		if (n < x->iov_taken) {
			/* Moved bytes the parser did not count: cannot
			 * happen with the states we let it reach; never
			 * trust the stream again if it does. */
			http1_end(x, EGRESS_ERR_UPSTREAM_PROTOCOL);
			return;
		}
		/* The head and framing parsed; as above. */
		if (n > x->iov_taken &&
		    (evbuffer_drain(in, n - x->iov_taken) != 0 ||
			evmove_settle(in) != 0)) {
			http1_end(x, EGRESS_ERR_NOMEM);
			return;
		}
		e = HTTP_PARSER_ERRNO(&x->parser);
		if (x->msg_complete) {
			if (x->raw_left > 0) {
				/* The head is done; the body comes raw.
				 * The parser stays paused: nothing
				 * follows this message on this exchange. */
				x->msg_complete = 0;
				x->raw = 1;
				continue;
			}
			if (http1_message_done(x))
				return;
			continue;
		}
		if (e == HPE_PAUSED) {
			if (x->paused)
				return; /* resumed later */
			http_parser_pause(&x->parser, 0);
			continue;
		}
		if (e != HPE_OK) {
			http1_end(x, http1_parse_error(x));
			return;
		}
		if (n < v.iov_len) {
			http1_end(x, EGRESS_ERR_UPSTREAM_PROTOCOL);
			return;
		}
	}
	if (x->ended || x->zombie || x->paused)
		return;
	if (x->eof && evbuffer_get_length(in) == 0) {
		if (x->raw) {
			http1_end(x, EGRESS_ERR_UPSTREAM_PROTOCOL);
			return; /* cut short */
		}
		/* Signal EOF: completes a read-until-close body only. */
		(void)http_parser_execute(&x->parser, &http1_settings, NULL,
		    0);
		if (x->zombie)
			return;
		if (x->msg_complete && x->headers_done) {
			x->reusable = 0;
			(void)http1_message_done(x);
			return;
		}
		http1_end(x, EGRESS_ERR_UPSTREAM_PROTOCOL);
		return;
	}
	http1_arm(x);
}

/* Read on past libevent's 4 KiB, up to the read-ahead (readmore.h). */
static void
http1_read_more(struct http1_exchange *x)
{
	if (!x->paused && readmore(x->bev, HTTP1_READ_HIGH) != 0)
		x->sock_err = 1;
}

static void
http1_read_cb(struct bufferevent *bev, void *arg)
{
	struct http1_exchange *x = arg;

	http1_enter(x);
	http1_read_more(x);
	http1_process(x);
	/* What was read is delivered; then the error ends it, as the
	 * bufferevent's error event would have. */
	if (x->sock_err && !x->ended && !x->zombie)
		http1_end(x, EGRESS_ERR_UPSTREAM_PROTOCOL);
	(void)http1_leave(x);
}

static void
http1_write_cb(struct bufferevent *bev, void *arg)
{
	struct http1_exchange *x = arg;

	http1_enter(x);
	if (!x->got_byte)
		http1_arm(x); /* the upstream is taking our bytes */
	if (!x->ended && x->cb.on_writable != NULL)
		x->cb.on_writable(x->arg);
	(void)http1_leave(x);
}

static void
http1_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct http1_exchange *x = arg;
	int err;

	http1_enter(x);
	if (what & BEV_EVENT_EOF) {
		x->eof = 1;
		http1_process(x);
	} else if (what & BEV_EVENT_ERROR) {
		err = EGRESS_ERR_UPSTREAM_PROTOCOL;
		if (!x->got_byte && bufferevent_get_openssl_error(bev) != 0)
			err = EGRESS_ERR_TLS_FAILED;
		/* Bytes already read still count for a complete response. */
		if (!x->paused)
			http1_process(x);
		if (!x->ended && !x->zombie)
			http1_end(x, err);
	} else if (what & BEV_EVENT_TIMEOUT)
		http1_end(x, EGRESS_ERR_TIMEOUT);
	(void)http1_leave(x);
}

static void
http1_tmo_cb(evutil_socket_t fd, short what, void *arg)
{
	struct http1_exchange *x = arg;

	http1_enter(x);
	http1_end(x, EGRESS_ERR_TIMEOUT);
	(void)http1_leave(x);
}

/* EV_READ: bytes wait in the input; EV_WRITE: http1_send() wrote
 * everything itself, so tell on_writable as the write callback would. */
static void
http1_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct http1_exchange *x = arg;

	http1_enter(x);
	if ((what & EV_WRITE) && !x->ended && x->cb.on_writable != NULL)
		x->cb.on_writable(x->arg);
	if ((what & EV_READ) && !x->paused && !x->zombie)
		http1_process(x);
	(void)http1_leave(x);
}

/*
 * Queue buf (emptied) for the upstream. On a plain TCP connection whose
 * output is empty the bytes go to the socket at once, saving the
 * epoll_ctl pair and the loop iteration of a bufferevent write; what the
 * socket does not take (or a write error, which the bufferevent then
 * reports) goes through the bufferevent, whose write is enabled only
 * then. TLS always goes through the bufferevent.
 */
static int
http1_send(struct http1_exchange *x, struct evbuffer *buf)
{
	struct evbuffer *out = bufferevent_get_output(x->bev);
	evutil_socket_t fd;

	if (bufferevent_openssl_get_ssl(x->bev) == NULL &&
	    evbuffer_get_length(out) == 0 &&
	    (fd = bufferevent_getfd(x->bev)) >= 0)
		(void)evbuffer_write(buf, fd);
	if (evbuffer_get_length(buf) == 0) {
		event_active(x->resume_ev, EV_WRITE, 0);
		return 0;
	}
	if (bufferevent_write_buffer(x->bev, buf) != 0)
		return EGRESS_ERR_NOMEM;
	return http1_want_write(x);
}

/* Re-check a head that should already be filtered. */
static int
http1_head_is_filtered(const struct policy_dest *dest,
    const struct http1_head *head)
{
	struct http1_header kept[64];
	struct http1_head out;
	struct http1_header *k = kept;
	size_t i;
	int rc = -1;

	if (head->nheaders > 64 &&
	    (k = calloc(head->nheaders, sizeof(*k))) == NULL)
		return EGRESS_ERR_NOMEM;
	if (http1_request_check(dest, head, k,
		head->nheaders > 64 ? head->nheaders : 64, &out, NULL) != 0 ||
	    out.nheaders != head->nheaders)
		goto out;
	for (i = 0; i < out.nheaders; i++)
		if (k[i].value_len != head->headers[i].value_len)
			goto out;
	rc = 0;
out:
	if (k != kept)
		free(k);
	return rc == 0 ? 0 : EGRESS_ERR_INVALID_REQUEST;
}

static int
http1_method_has_no_body(const struct http1_head *h)
{
	static const char *const m[] = {
		"GET",
		"HEAD",
		"OPTIONS",
		"TRACE",
		"DELETE",
	};
	size_t i;

	for (i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		if (h->method_len == strlen(m[i]) &&
		    memcmp(h->method, m[i], h->method_len) == 0)
			return 1;
	return 0;
}

int
http1_exchange_new(struct bufferevent *bev, const struct policy_dest *dest,
    const struct http1_head *head, int keep_alive,
    const struct http1_timeouts *t, const struct http1_callbacks *cb,
    void *arg, struct http1_exchange **ret)
{
	struct http1_exchange *x = NULL;
	struct evbuffer *req = NULL;
	char host[POLICY_NAME_MAX + 16];
	size_t i;
	int rc, hostlen;

	if (bev == NULL || dest == NULL || head == NULL || cb == NULL ||
	    ret == NULL || head->body_length < -1)
		return EGRESS_ERR_INVALID;
	if ((rc = http1_head_is_filtered(dest, head)) != 0)
		return rc;
	if ((hostlen = http1_format_host(dest, host, sizeof(host))) < 0)
		return EGRESS_ERR_INVALID;
	if ((x = calloc(1, sizeof(*x))) == NULL)
		return EGRESS_ERR_NOMEM;
	rc = EGRESS_ERR_NOMEM;
	x->bev = bev;
	x->base = bufferevent_get_base(bev);
	x->cb = *cb;
	x->arg = arg;
	if (t != NULL)
		x->t = *t;
	x->keep_alive = keep_alive;
	x->body_length = head->body_length;
	x->body_done = head->body_length == 0;
	x->head_method = head->method_len == 4 &&
	    memcmp(head->method, "HEAD", 4) == 0;
	http_parser_init(&x->parser, HTTP_RESPONSE);
	x->parser.data = x;
	if ((x->tmo = evtimer_new(x->base, http1_tmo_cb, x)) == NULL ||
	    (x->resume_ev = event_new(x->base, -1, 0, http1_resume_cb, x)) ==
		NULL ||
	    (req = evbuffer_new()) == NULL)
		goto out;

	if (evbuffer_add(req, head->method, head->method_len) != 0 ||
	    evbuffer_add(req, " ", 1) != 0 ||
	    evbuffer_add(req, head->path, head->path_len) != 0 ||
	    evbuffer_add(req, " HTTP/1.1\r\nHost: ", 17) != 0 ||
	    evbuffer_add(req, host, (size_t)hostlen) != 0 ||
	    evbuffer_add(req, "\r\n", 2) != 0)
		goto out;
	for (i = 0; i < head->nheaders; i++) {
		const struct http1_header *h = &head->headers[i];

		if (evbuffer_add(req, h->name, h->name_len) != 0 ||
		    evbuffer_add(req, ": ", 2) != 0 ||
		    evbuffer_add(req, h->value, h->value_len) != 0 ||
		    evbuffer_add(req, "\r\n", 2) != 0)
			goto out;
	}
	if (head->body_length < 0) {
		if (evbuffer_add_printf(req,
			"Transfer-Encoding: chunked\r\n") < 0)
			goto out;
	} else if (head->body_length > 0 || !http1_method_has_no_body(head)) {
		if (evbuffer_add_printf(req, "Content-Length: %" PRId64 "\r\n",
			head->body_length) < 0)
			goto out;
	}
	if (!keep_alive &&
	    evbuffer_add_printf(req, "Connection: close\r\n") < 0)
		goto out;
	if (evbuffer_add(req, "\r\n", 2) != 0)
		goto out;

	bufferevent_setcb(bev, http1_read_cb, http1_write_cb, http1_event_cb,
	    x);
	bufferevent_setwatermark(bev, EV_READ, 0, HTTP1_READ_HIGH);
	bufferevent_setwatermark(bev, EV_WRITE, HTTP1_WRITE_LOW, 0);
	/* Reading may already be on (a pooled connection keeps it). */
	if (((bufferevent_get_enabled(bev) & EV_READ) == 0 &&
		bufferevent_enable(bev, EV_READ) != 0) ||
	    http1_send(x, req) != 0) {
		bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
		goto out;
	}
	http1_arm(x);
	/* Bytes may already wait in the input (a pooled connection). */
	if (evbuffer_get_length(bufferevent_get_input(bev)) > 0)
		event_active(x->resume_ev, EV_READ, 0);
	*ret = x;
	x = NULL;
	rc = 0;
out:
	evbuffer_free(req);
	if (x != NULL) {
		if (x->tmo != NULL)
			event_free(x->tmo);
		if (x->resume_ev != NULL)
			event_free(x->resume_ev);
		http1_final_free(x);
	}
	return rc;
}

void
http1_set_body_buffer(struct http1_exchange *x, http1_body_buffer_cb cb)
{
	x->on_data_buffer = cb;
}

void
http1_exchange_free(struct http1_exchange *x)
{
	if (x == NULL || x->zombie)
		return;
	/* Reading stays as it is: the caller frees the connection or pools
	 * it (which keeps the read watch). */
	bufferevent_setcb(x->bev, NULL, NULL, NULL, NULL);
	event_free(x->tmo);
	event_free(x->resume_ev);
	x->tmo = x->resume_ev = NULL;
	x->zombie = 1;
	if (x->busy == 0)
		http1_final_free(x);
}

static int
http1_body_check(struct http1_exchange *x, size_t n)
{
	if (x->zombie || x->ended || x->body_done)
		return EGRESS_ERR_CLOSED;
	if (x->body_length >= 0 &&
	    (uint64_t)n > (uint64_t)(x->body_length - x->body_sent))
		return EGRESS_ERR_INVALID_REQUEST;
	return 0;
}

int
http1_write_body(struct http1_exchange *x, const void *p, size_t n)
{
	struct evbuffer *out;
	int rc;

	if ((rc = http1_body_check(x, n)) != 0 || n == 0)
		return rc;
	out = bufferevent_get_output(x->bev);
	if (x->body_length < 0 && evbuffer_add_printf(out, "%zx\r\n", n) < 0)
		return EGRESS_ERR_NOMEM;
	if (evbuffer_add(out, p, n) != 0 ||
	    (x->body_length < 0 && evbuffer_add(out, "\r\n", 2) != 0))
		return EGRESS_ERR_NOMEM;
	x->body_sent += (int64_t)n;
	return http1_want_write(x);
}

int
http1_write_body_buffer(struct http1_exchange *x, struct evbuffer *buf)
{
	struct evbuffer *out;
	size_t n = evbuffer_get_length(buf);
	int rc;

	if ((rc = http1_body_check(x, n)) != 0 || n == 0)
		return rc;
	out = bufferevent_get_output(x->bev);
	if (x->body_length < 0 && evbuffer_add_printf(out, "%zx\r\n", n) < 0)
		return EGRESS_ERR_NOMEM;
	if (evbuffer_add_buffer(out, buf) != 0 ||
	    (x->body_length < 0 && evmove_add(out, "\r\n", 2) != 0))
		return EGRESS_ERR_NOMEM;
	x->body_sent += (int64_t)n;
	return http1_want_write(x);
}

int
http1_finish_body(struct http1_exchange *x)
{
	if (x->zombie || x->ended || x->body_done)
		return EGRESS_ERR_CLOSED;
	if (x->body_length >= 0 && x->body_sent != x->body_length) {
		/* Ended without on_end: the caller learns it here. */
		x->reusable = 0;
		x->ended = 1;
		(void)event_del(x->tmo);
		(void)bufferevent_disable(x->bev, EV_READ);
		return EGRESS_ERR_INVALID_REQUEST;
	}
	if (x->body_length < 0 &&
	    evmove_add(bufferevent_get_output(x->bev), "0\r\n\r\n", 5) != 0)
		return EGRESS_ERR_NOMEM;
	x->body_done = 1;
	return x->body_length < 0 ? http1_want_write(x) : 0;
}

size_t
http1_output_pending(const struct http1_exchange *x)
{
	return evbuffer_get_length(bufferevent_get_output(x->bev));
}

void
http1_pause_read(struct http1_exchange *x)
{
	if (x->paused || x->zombie || x->ended)
		return;
	x->paused = 1;
	(void)bufferevent_disable(x->bev, EV_READ);
	http1_arm(x);
}

void
http1_resume_read(struct http1_exchange *x)
{
	if (!x->paused || x->zombie || x->ended)
		return;
	x->paused = 0;
	http_parser_pause(&x->parser, 0);
	(void)bufferevent_enable(x->bev, EV_READ);
	http1_arm(x);
	event_active(x->resume_ev, EV_READ, 0);
}

int
http1_is_reusable(const struct http1_exchange *x)
{
	return x->ended && x->reusable;
}

int
http1_response_started(const struct http1_exchange *x)
{
	return x->got_byte;
}

int
http1_head_copy(const struct http1_head *h, struct http1_head *ret,
    void **ret_mem)
{
	size_t i, n = h->method_len + h->path_len;
	struct http1_header *hv;
	void *mem;
	char *p;

	for (i = 0; i < h->nheaders; i++)
		n += h->headers[i].name_len + h->headers[i].value_len;
	if ((mem = malloc(h->nheaders * sizeof(*hv) + n + 1)) == NULL)
		return EGRESS_ERR_NOMEM;
	hv = mem;
	p = (char *)(hv + h->nheaders);
#define COPY(dst, src, len) \
	do { \
		memcpy(p, (src), (len)); \
		(dst) = p; \
		p += (len); \
	} while (0)
	*ret = *h;
	COPY(ret->method, h->method, h->method_len);
	COPY(ret->path, h->path, h->path_len);
	for (i = 0; i < h->nheaders; i++) {
		hv[i].name_len = h->headers[i].name_len;
		hv[i].value_len = h->headers[i].value_len;
		COPY(hv[i].name, h->headers[i].name, hv[i].name_len);
		COPY(hv[i].value, h->headers[i].value, hv[i].value_len);
	}
#undef COPY
	ret->headers = hv;
	*ret_mem = mem;
	return 0;
}
