/* SPDX-License-Identifier: ISC */
/*
 * The client side of RFC 6455 over OpenSSL, http-parser and libwslay
 * (see wsproto.h).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <wslay/wslay.h>

#include <egress/error.h>

#include "broker/net/http1_head.h"
#include "broker/net/wsproto.h"

#define WS_GUID	      "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define WS_KEY_LEN    WSPROTO_KEY_LEN
#define WS_ACCEPT_LEN 28 /* base64 of 20 bytes */

/* ---- The handshake response -------------------------------------------- */

struct hs_parse {
	struct wsproto_head *h;
	int overflow;
	int done;
};

static int
hs_on_field(http_parser *p, const char *at, size_t n)
{
	struct hs_parse *hp = p->data;

	struct wsproto_head *h = hp->h;

	if (h->nheaders == WSPROTO_HEADERS_MAX) {
		hp->overflow = 1;
		return 1;
	}
	h->headers[h->nheaders].name = at;
	h->headers[h->nheaders].name_len = n;
	h->headers[h->nheaders].value = "";
	h->headers[h->nheaders].value_len = 0;
	h->nheaders++;
	return 0;
}

static int
hs_on_value(http_parser *p, const char *at, size_t n)
{
	struct hs_parse *hp = p->data;

	struct wsproto_head *h = hp->h;

	if (h->nheaders == 0)
		return 1;
	h->headers[h->nheaders - 1].value = at;
	h->headers[h->nheaders - 1].value_len = n;
	return 0;
}

static int
hs_on_complete(http_parser *p)
{
	struct hs_parse *hp = p->data;

	hp->done = 1;
	return 1; /* no body is read here */
}

static const http_parser_settings hs_settings = {
	.on_header_field = hs_on_field,
	.on_header_value = hs_on_value,
	.on_headers_complete = hs_on_complete,
};

/* Answer whether the n bytes at s equal lit, ASCII case-insensitively. */
static int
ci_is(const char *s, size_t n, const char *lit)
{
	return n == strlen(lit) && strncasecmp(s, lit, n) == 0;
}

/* Answer whether the comma-separated list at s (n bytes) holds token. */
static int
list_has(const char *s, size_t n, const char *tok, size_t tn)
{
	size_t i = 0, j;
	const char *t;
	size_t tl;

	while (i <= n) {
		for (j = i; j < n && s[j] != ','; j++)
			;
		t = s + i;
		tl = j - i;
		http1_trim(&t, &tl);
		if (tl == tn && strncasecmp(t, tok, tn) == 0)
			return 1;
		i = j + 1;
	}
	return 0;
}

/* The Sec-WebSocket-Accept value for key (RFC 6455, 4.2.2). */
static int
hs_accept(const char *key, char out[WS_ACCEPT_LEN + 1])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char buf[WS_KEY_LEN + sizeof(WS_GUID)];
	size_t n = strlen(key);

	if (n != WS_KEY_LEN)
		return -1;
	// NOLINTNEXTLINE(bugprone-not-null-terminated-result): hashed by length
	memcpy(buf, key, n);
	memcpy(buf + n, WS_GUID, sizeof(WS_GUID) - 1);
	if (EVP_Digest(buf, n + sizeof(WS_GUID) - 1, md, &mdlen, EVP_sha1(),
		NULL) != 1 ||
	    mdlen != 20)
		return -1;
	return EVP_EncodeBlock((unsigned char *)out, md, 20) == WS_ACCEPT_LEN ?
	    0 :
	    -1;
}

int
wsproto_response_check(const char *head, size_t len, const char *key,
    const char *protos, struct wsproto_head *ret)
{
	char accept[WS_ACCEPT_LEN + 1];
	struct hs_parse parse, *hp = &parse;
	http_parser p;
	size_t i;
	int up = 0, conn = 0, acc = 0, proto = 0;

	memset(hp, 0, sizeof(*hp));
	ret->nheaders = 0;
	ret->status = 0;
	hp->h = ret;
	http_parser_init(&p, HTTP_RESPONSE);
	p.data = hp;
	(void)http_parser_execute(&p, &hs_settings, head, len);
	if (!hp->done || hp->overflow ||
	    (HTTP_PARSER_ERRNO(&p) != HPE_OK &&
		HTTP_PARSER_ERRNO(&p) != HPE_CB_headers_complete))
		return -1;
	ret->status = (int)p.status_code;
	if (!http1_fields_ok(ret->headers, ret->nheaders))
		return -1; /* "Sec-WebSocket-Extensions : x" is no name */
	if (p.status_code != 101)
		return p.status_code >= 200 && p.status_code <= 999 ? 0 : -1;
	if (p.http_major != 1 || p.http_minor != 1 || hs_accept(key, accept))
		return -1;
	for (i = 0; i < ret->nheaders; i++) {
		const struct http1_header *h = &ret->headers[i];
		const char *v = h->value;
		size_t vl = h->value_len;

		http1_trim(&v, &vl);
		if (http1_header_is(h, "Upgrade")) {
			if (up++ || !ci_is(v, vl, "websocket"))
				return -1;
		} else if (http1_header_is(h, "Connection")) {
			if (list_has(v, vl, "upgrade", 7))
				conn = 1;
		} else if (http1_header_is(h, "Sec-WebSocket-Accept")) {
			if (acc++ || vl != WS_ACCEPT_LEN ||
			    memcmp(v, accept, WS_ACCEPT_LEN) != 0)
				return -1;
		} else if (http1_header_is(h, "Sec-WebSocket-Extensions")) {
			return -1; /* none was offered */
		} else if (http1_header_is(h, "Sec-WebSocket-Protocol")) {
			if (proto++ || protos == NULL ||
			    !list_has(protos, strlen(protos), v, vl) ||
			    vl == 0 || memchr(v, ',', vl) != NULL)
				return -1;
		}
	}
	return up == 1 && conn && acc == 1 ? 1 : -1;
}

/* ---- The frame codec: libwslay ----------------------------------------- */

/*
 * An idle codec is parked: its libwslay context (some 9 KiB of frame
 * buffers) is freed and a fresh one made at the next byte either way.
 * That is exact only while the context holds nothing of the stream: it
 * is open both ways, has nothing queued or half sent, and holds no byte
 * of a frame or message it has not wholly parsed. libwslay does not
 * expose its input buffer, so the bytes handed to it (fed) are matched
 * against the bytes of the frames it finished (parsed): the frame
 * callbacks give each frame's payload length, and a server's frame is
 * unmasked with its length minimally encoded (libwslay refuses any
 * other), so its head is 2, 4 or 10 bytes. Were the count ever off, fed
 * and parsed would just never meet again and the codec would never be
 * parked: safe.
 */
struct wsproto {
	wslay_event_context_ptr ctx; /* NULL: parked */
	const struct wsproto_ops *ops;
	void *arg;
	size_t max_message;
	uint64_t fed;	 /* bytes handed to ctx */
	uint64_t parsed; /* bytes of the frames ctx wholly parsed */
	uint64_t frame;	 /* head and payload of the frame being parsed */
	int frame_ctrl;
	int frame_fin;
	int in_msg;	    /* a fragmented message is being received */
	int failed;	    /* a context could not be made again */
	int busy;	    /* inside libwslay: not parked from a callback */
	int retired;	    /* closed and freed for good (wsproto_retire) */
	int retired_recv;   /* then: a close had been received */
	unsigned code_sent; /* then: the code of the close sent */
	/* A close asked for while messages were queued: libwslay sends a
	 * queued control frame before queued messages, and nothing after
	 * a close, so it is queued only once they are all written. */
	int close_pending;
	uint16_t pend_code;
	size_t pend_len;
	uint8_t pend_reason[123];
	/* Messages beyond WSPROTO_CODEC_MAX in ctx's queue wait here, in
	 * order, as records of an opcode byte, a 4-byte length and the bytes:
	 * a few bytes of overhead a message instead of libwslay's own, so
	 * that what a guest may send within its window fits whatever the
	 * size of its messages. */
	uint8_t *pq;
	size_t pq_head, pq_len, pq_cap; /* records in pq[pq_head..pq_len) */
	size_t pq_count, pq_empty;	/* of them: all, of no bytes */
};

#define WSPROTO_CODEC_MAX 64 /* messages in ctx's queue at most */
#define PQ_HEAD		  5  /* opcode and length before a record's bytes */

static ssize_t
wp_recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
    void *user)
{
	struct wsproto *w = user;
	ssize_t n = w->ops->recv(w->arg, buf, len);

	if (n <= 0) {
		wslay_event_set_error(ctx,
		    n == 0 ? WSLAY_ERR_WOULDBLOCK :
			     WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	w->fed += (uint64_t)n;
	return n;
}

static ssize_t
wp_send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len,
    int flags, void *user)
{
	struct wsproto *w = user;
	ssize_t n = w->ops->send(w->arg, data, len);

	if (n <= 0) {
		wslay_event_set_error(ctx,
		    n == 0 ? WSLAY_ERR_WOULDBLOCK :
			     WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	return n;
}

static void
wp_frame_start_cb(wslay_event_context_ptr ctx,
    const struct wslay_event_on_frame_recv_start_arg *a, void *user)
{
	struct wsproto *w = user;
	uint64_t head = a->payload_length < 126 ? 2 :
	    a->payload_length < 65536		? 4 :
						  10;

	w->frame = head + a->payload_length;
	w->frame_ctrl = (a->opcode & 8) != 0;
	w->frame_fin = a->fin != 0;
}

static void
wp_frame_end_cb(wslay_event_context_ptr ctx, void *user)
{
	struct wsproto *w = user;

	w->parsed += w->frame;
	w->frame = 0;
	if (!w->frame_ctrl)
		w->in_msg = !w->frame_fin;
}

static int
wp_genmask_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
    void *user)
{
	return RAND_bytes(buf, (int)len) == 1 ? 0 : -1;
}

static void
wp_msg_cb(wslay_event_context_ptr ctx,
    const struct wslay_event_on_msg_recv_arg *a, void *user)
{
	struct wsproto *w = user;
	const uint8_t *p = a->msg;
	size_t n = a->msg_length;

	if (a->opcode == WSLAY_CONNECTION_CLOSE) {
		/* The reason follows the 2-byte code. */
		p = n > 2 ? a->msg + 2 : NULL;
		n = n > 2 ? n - 2 : 0;
	}
	if (w->ops->on_msg(w->arg, a->opcode, a->status_code, p, n) != 0)
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
}

static const struct wslay_event_callbacks wp_callbacks = {
	.recv_callback = wp_recv_cb,
	.send_callback = wp_send_cb,
	.genmask_callback = wp_genmask_cb,
	.on_msg_recv_callback = wp_msg_cb,
	.on_frame_recv_start_callback = wp_frame_start_cb,
	.on_frame_recv_end_callback = wp_frame_end_cb,
};

/* Make w's context, fresh. Return 0 or EGRESS_ERR_NOMEM. */
static int
wp_ctx_new(struct wsproto *w)
{
	if (wslay_event_context_client_init(&w->ctx, &wp_callbacks, w) != 0) {
		w->ctx = NULL;
		return EGRESS_ERR_NOMEM;
	}
	wslay_event_config_set_max_recv_msg_length(w->ctx, w->max_message);
	w->fed = w->parsed = w->frame = 0;
	w->in_msg = 0;
	return 0;
}

/* Give a parked w its context back. Return 0 or EGRESS_ERR_NOMEM (w
 * has then failed for good). */
static int
wp_unpark(struct wsproto *w)
{
	if (w->retired)
		return -1; /* closed: nothing more goes through it */
	if (w->failed)
		return EGRESS_ERR_NOMEM;
	if (w->ctx != NULL)
		return 0;
	if (wp_ctx_new(w) != 0) {
		w->failed = 1;
		return EGRESS_ERR_NOMEM;
	}
	return 0;
}

int
wsproto_new(const struct wsproto_ops *ops, void *arg, size_t max_message,
    struct wsproto **ret)
{
	struct wsproto *w = calloc(1, sizeof(*w));

	if (w == NULL)
		return EGRESS_ERR_NOMEM;
	w->ops = ops;
	w->arg = arg;
	w->max_message = max_message;
	if (wp_ctx_new(w) != 0) {
		free(w);
		return EGRESS_ERR_NOMEM;
	}
	*ret = w;
	return 0;
}

void
wsproto_free(struct wsproto *w)
{
	if (w == NULL)
		return;
	wslay_event_context_free(w->ctx);
	free(w->pq);
	free(w);
}

/* Append a message to pq. Return 0 or EGRESS_ERR_NOMEM. */
static int
pq_add(struct wsproto *w, int opcode, const uint8_t *p, size_t n)
{
	uint8_t *v;
	size_t need, cap;

	if (n > UINT32_MAX)
		return EGRESS_ERR_NOMEM;
	if (w->pq_head > 0 && w->pq_head >= w->pq_len / 2) {
		memmove(w->pq, w->pq + w->pq_head, w->pq_len - w->pq_head);
		w->pq_len -= w->pq_head;
		w->pq_head = 0;
	}
	need = w->pq_len + PQ_HEAD + n;
	if (need > w->pq_cap) {
		cap = w->pq_cap != 0 ? w->pq_cap : 4096;
		while (cap < need)
			cap *= 2;
		if ((v = realloc(w->pq, cap)) == NULL)
			return EGRESS_ERR_NOMEM;
		w->pq = v;
		w->pq_cap = cap;
	}
	v = w->pq + w->pq_len;
	v[0] = (uint8_t)opcode;
	v[1] = (uint8_t)(n >> 24);
	v[2] = (uint8_t)(n >> 16);
	v[3] = (uint8_t)(n >> 8);
	v[4] = (uint8_t)n;
	if (n > 0)
		memcpy(v + PQ_HEAD, p, n);
	w->pq_len = need;
	w->pq_count++;
	if (n == 0)
		w->pq_empty++;
	return 0;
}

/* Drop what waits in pq. */
static void
pq_drop(struct wsproto *w)
{
	free(w->pq);
	w->pq = NULL;
	w->pq_head = w->pq_len = w->pq_cap = 0;
	w->pq_count = w->pq_empty = 0;
}

/* Move messages from pq into ctx's queue while it has room. Once ctx
 * takes no more (a close of its own, or the peer's answered, was queued
 * or sent), they are dropped: nothing is sent after a close. Return 0
 * or EGRESS_ERR_NOMEM. */
static int
pq_feed(struct wsproto *w)
{
	struct wslay_event_msg m;
	const uint8_t *v;
	size_t n;
	int rc;

	if (w->pq_count > 0 && wslay_event_get_close_sent(w->ctx))
		pq_drop(w);
	while (w->pq_count > 0 &&
	    wslay_event_get_queued_msg_count(w->ctx) < WSPROTO_CODEC_MAX) {
		v = w->pq + w->pq_head;
		n = (size_t)v[1] << 24 | (size_t)v[2] << 16 |
		    (size_t)v[3] << 8 | v[4];
		m.opcode = v[0];
		m.msg = v + PQ_HEAD;
		m.msg_length = n;
		if ((rc = wslay_event_queue_msg(w->ctx, &m)) != 0) {
			if (rc == WSLAY_ERR_NOMEM)
				return EGRESS_ERR_NOMEM;
			pq_drop(w); /* WSLAY_ERR_NO_MORE_MSG: a close */
			return 0;
		}
		w->pq_head += PQ_HEAD + n;
		w->pq_count--;
		if (n == 0)
			w->pq_empty--;
	}
	if (w->pq_count == 0)
		pq_drop(w);
	return 0;
}

/* Messages queued in ctx or in pq. */
static size_t
wp_queued(const struct wsproto *w)
{
	return (w->ctx != NULL ? wslay_event_get_queued_msg_count(w->ctx) :
				 0) +
	    w->pq_count;
}

int
wsproto_recv(struct wsproto *w)
{
	int rc;

	if (w->retired)
		return 0; /* nothing is read through it any more */
	if ((rc = wp_unpark(w)) != 0)
		return rc;
	w->busy = 1;
	rc = wslay_event_recv(w->ctx);
	w->busy = 0;
	return rc == 0 ? 0 : -1;
}

int
wsproto_send(struct wsproto *w)
{
	int rc;

	if (w->failed)
		return EGRESS_ERR_NOMEM;
	if (w->ctx == NULL)
		return 0; /* parked: nothing queued */
	w->busy = 1;
	/* While the socket takes it, refill ctx's queue from pq. */
	do {
		if (pq_feed(w) != 0) {
			w->busy = 0;
			return EGRESS_ERR_NOMEM;
		}
		rc = wslay_event_send(w->ctx);
	} while (rc == 0 && w->pq_count > 0 &&
	    wslay_event_get_queued_msg_count(w->ctx) < WSPROTO_CODEC_MAX);
	if (rc == 0 && w->close_pending && wp_queued(w) == 0) {
		/* Everything queued before the close is written: now it.
		 * A close of the codec's own may have gone first. */
		w->close_pending = 0;
		if (!wslay_event_get_close_sent(w->ctx) &&
		    wslay_event_queue_close(w->ctx, w->pend_code,
			w->pend_len != 0 ? w->pend_reason : NULL,
			w->pend_len) == 0)
			rc = wslay_event_send(w->ctx);
	}
	w->busy = 0;
	return rc == 0 ? 0 : -1;
}

int
wsproto_want_read(const struct wsproto *w)
{
	if (w->retired)
		return 0;
	if (w->failed || w->ctx == NULL)
		return 1; /* parked: open; failed: recv says so */
	return wslay_event_want_read(w->ctx);
}

int
wsproto_want_write(const struct wsproto *w)
{
	if (w->failed)
		return 1; /* send says so */
	return w->ctx != NULL &&
	    (w->close_pending ||
		(w->pq_count > 0 && !wslay_event_get_close_sent(w->ctx)) ||
		wslay_event_want_write(w->ctx));
}

void
wsproto_park(struct wsproto *w)
{
	if (w->ctx == NULL || w->failed || w->busy || w->close_pending ||
	    w->pq_count != 0 || !wslay_event_get_read_enabled(w->ctx) ||
	    !wslay_event_get_write_enabled(w->ctx) ||
	    wslay_event_get_close_sent(w->ctx) ||
	    wslay_event_get_close_received(w->ctx) ||
	    wslay_event_get_queued_msg_count(w->ctx) != 0 ||
	    wslay_event_want_write(w->ctx) || w->fed != w->parsed || w->in_msg)
		return;
	wslay_event_context_free(w->ctx);
	w->ctx = NULL;
}

int
wsproto_is_parked(const struct wsproto *w)
{
	return w->ctx == NULL && !w->failed && !w->retired;
}

void
wsproto_retire(struct wsproto *w)
{
	if (w->ctx == NULL || w->failed || w->busy ||
	    !wslay_event_get_close_sent(w->ctx) ||
	    wslay_event_get_queued_msg_count(w->ctx) != 0 ||
	    wslay_event_want_write(w->ctx))
		return;
	pq_drop(w); /* after the close: never sent */
	w->retired_recv = wslay_event_get_close_received(w->ctx);
	w->code_sent = wslay_event_get_status_code_sent(w->ctx);
	w->retired = 1;
	wslay_event_context_free(w->ctx);
	w->ctx = NULL;
}

int
wsproto_utf8_ok(const uint8_t *p, size_t n)
{
	size_t i = 0, k, need;
	uint32_t c;

	while (i < n) {
		c = p[i];
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			need = 1, c &= 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			need = 2, c &= 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			need = 3, c &= 0x07;
		else
			return 0; /* a continuation byte, 0xc0, 0xc1, > 0xf4 */
		if (n - i - 1 < need)
			return 0;
		for (k = 1; k <= need; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return 0;
			c = (c << 6) | (p[i + k] & 0x3f);
		}
		/* Overlong forms, surrogates, beyond U+10FFFF. */
		if ((need == 2 && c < 0x800) || (need == 3 && c < 0x10000) ||
		    (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
			return 0;
		i += need + 1;
	}
	return 1;
}

int
wsproto_queue(struct wsproto *w, int opcode, const uint8_t *p, size_t n)
{
	struct wslay_event_msg m;
	int rc;

	if ((opcode == WSPROTO_TEXT && !wsproto_utf8_ok(p, n)) ||
	    w->close_pending)
		return -1;
	if ((rc = wp_unpark(w)) != 0)
		return rc;
	/* A message waits in pq behind others there, or when ctx's queue
	 * is full (a ping or pong goes to ctx: the caller bounds those). */
	if ((opcode == WSPROTO_TEXT || opcode == WSPROTO_BINARY) &&
	    (w->pq_count > 0 ||
		wslay_event_get_queued_msg_count(w->ctx) >= WSPROTO_CODEC_MAX))
		return wslay_event_get_close_sent(w->ctx) ?
		    -1 :
		    pq_add(w, opcode, p, n);
	m.opcode = (uint8_t)opcode;
	m.msg = p;
	m.msg_length = n;
	rc = wslay_event_queue_msg(w->ctx, &m);
	if (rc == WSLAY_ERR_NOMEM)
		return EGRESS_ERR_NOMEM;
	return rc == 0 ? 0 : -1;
}

int
wsproto_close(struct wsproto *w, unsigned code, const uint8_t *reason,
    size_t n)
{
	int rc;

	if (w->close_pending || n > sizeof(w->pend_reason))
		return -1;
	if ((rc = wp_unpark(w)) != 0)
		return rc;
	/* A reason that is not UTF-8 is not sent (the code still is). */
	if (code == 0 || !wsproto_utf8_ok(reason, n))
		n = 0;
	if (wp_queued(w) != 0 && !wslay_event_get_close_sent(w->ctx)) {
		/* After what is queued: see close_pending. */
		w->close_pending = 1;
		w->pend_code = (uint16_t)code;
		w->pend_len = n;
		if (n != 0)
			memcpy(w->pend_reason, reason, n);
		return 0;
	}
	return wslay_event_queue_close(w->ctx, (uint16_t)code,
		   n != 0 ? reason : NULL, n) == 0 ?
	    0 :
	    -1;
}

void
wsproto_shutdown_read(struct wsproto *w)
{
	if (wp_unpark(w) == 0)
		wslay_event_shutdown_read(w->ctx);
}

/* A parked codec is open with nothing queued: it answers what a fresh
 * context would (no close either way, nothing queued). */

int
wsproto_close_sent(const struct wsproto *w)
{
	if (w->retired)
		return 1;
	return w->ctx != NULL && wslay_event_get_close_sent(w->ctx);
}

int
wsproto_close_received(const struct wsproto *w)
{
	if (w->retired)
		return w->retired_recv;
	return w->ctx != NULL && wslay_event_get_close_received(w->ctx);
}

unsigned
wsproto_code_sent(const struct wsproto *w)
{
	if (w->retired)
		return w->code_sent;
	return w->ctx != NULL ? wslay_event_get_status_code_sent(w->ctx) :
				WSLAY_CODE_ABNORMAL_CLOSURE;
}

size_t
wsproto_queued_bytes(const struct wsproto *w)
{
	return (w->ctx != NULL ? wslay_event_get_queued_msg_length(w->ctx) :
				 0) +
	    (w->pq_len - w->pq_head);
}

size_t
wsproto_queued_empty(const struct wsproto *w)
{
	return w->pq_empty;
}

size_t
wsproto_queued_count(const struct wsproto *w)
{
	return w->ctx != NULL ? wslay_event_get_queued_msg_count(w->ctx) : 0;
}

int
wsproto_key_new(char key[WSPROTO_KEY_LEN + 1])
{
	unsigned char raw[16];

	if (RAND_bytes(raw, sizeof(raw)) != 1 ||
	    EVP_EncodeBlock((unsigned char *)key, raw, sizeof(raw)) !=
		WSPROTO_KEY_LEN)
		return EGRESS_ERR_UNAVAILABLE;
	return 0;
}

/* ---- Fuzzing ----------------------------------------------------------- */

struct fuzz_in {
	const uint8_t *p;
	size_t n;
};

static ssize_t
fuzz_recv(void *arg, uint8_t *buf, size_t len)
{
	struct fuzz_in *in = arg;
	size_t n = len < in->n ? len : in->n;

	memcpy(buf, in->p, n);
	in->p += n;
	in->n -= n;
	return (ssize_t)n;
}

static ssize_t
fuzz_send(void *arg, const uint8_t *buf, size_t len)
{
	return (ssize_t)len;
}

static int
fuzz_msg(void *arg, int opcode, unsigned code, const uint8_t *p, size_t n)
{
	return 0;
}

static const struct wsproto_ops fuzz_ops = { fuzz_recv, fuzz_send, fuzz_msg };

int
wsproto_fuzz_upstream(const char *key, const char *protos, const uint8_t *data,
    size_t n)
{
	static struct wsproto_head head;
	struct wsproto *w = NULL;
	struct fuzz_in in;
	const uint8_t *e = NULL;
	size_t i, len;
	int rc;

	for (i = 0; i + 4 <= n && i + 4 <= HTTP1_HEAD_MAX; i++)
		if (memcmp(data + i, "\r\n\r\n", 4) == 0) {
			e = data + i + 4;
			break;
		}
	if (e == NULL)
		return -1;
	len = (size_t)(e - data);
	rc = wsproto_response_check((const char *)data, len, key, protos,
	    &head);
	if (rc != 1)
		return rc;
	in.p = e;
	in.n = n - len;
	if (wsproto_new(&fuzz_ops, &in, 65536, &w) != 0)
		return -1;
	while (in.n > 0 && wsproto_want_read(w) && wsproto_recv(w) == 0) {
		if (wsproto_want_write(w))
			(void)wsproto_send(w);
		wsproto_park(w);
	}
	wsproto_free(w);
	return 1;
}
