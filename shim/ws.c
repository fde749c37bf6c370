/* SPDX-License-Identifier: ISC */
/*
 * libegress WebSockets: a websocket stream is a request whose REQUEST
 * names transport 2, GET, ws or wss, the authority and the path; the
 * broker answers RESPONSE 101 once its own handshake with the
 * destination succeeded (any other status ends its side), then DATA
 * frames carry message pieces (MSG_END on the last, BINARY for binary)
 * and WS_CONTROL frames carry pings, pongs and the close
 * (docs/protocol.md). Windows, blocking, the step function and
 * callbacks are the request machinery of client.c.
 */
#include <stdlib.h>
#include <string.h>

#include <egress/egress.h>

#include "proto/proto.h"
#include "shim/shim.h"

/* Split url into scheme, authority and path; 0 or EGRESS_ERR_INVALID. */
static int
ws_split(const char *url, struct proto_request *q, const char **ret_rest)
{
	const char *a, *p;
	size_t i;

	for (i = 0; url[i] != '\0'; i++)
		if ((unsigned char)url[i] <= ' ' || url[i] == 0x7f ||
		    url[i] == '#')
			return EGRESS_ERR_INVALID;
	if (strncmp(url, "ws://", 5) == 0) {
		q->scheme.ptr = "ws";
		q->scheme.len = 2;
		a = url + 5;
	} else if (strncmp(url, "wss://", 6) == 0) {
		q->scheme.ptr = "wss";
		q->scheme.len = 3;
		a = url + 6;
	} else
		return EGRESS_ERR_INVALID;
	p = a + strcspn(a, "/?");
	if (p == a || (size_t)(p - a) > PROTO_AUTHORITY_MAX)
		return EGRESS_ERR_INVALID;
	q->authority.ptr = a;
	q->authority.len = (size_t)(p - a);
	*ret_rest = p;
	return 0;
}

int
egress_ws_open(struct egress_client *c, const char *url,
    const struct egress_header *headers, size_t nheaders,
    const struct egress_timeouts *timeouts, egress_request_cb *cb, void *arg,
    struct egress_request **ret_ws)
{
	return egress_ws_open_profile(c, url, NULL, headers, nheaders,
	    timeouts, cb, arg, ret_ws);
}

int
egress_ws_open_profile(struct egress_client *c, const char *url,
    const char *tls_profile, const struct egress_header *headers,
    size_t nheaders, const struct egress_timeouts *timeouts,
    egress_request_cb *cb, void *arg, struct egress_request **ret_ws)
{
	struct proto_msg *m;
	struct proto_request *q;
	const char *rest = NULL;
	char *path = NULL;
	size_t n;
	int rv;

	if (c == NULL || url == NULL || ret_ws == NULL)
		return EGRESS_ERR_INVALID;
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return EGRESS_ERR_NOMEM;
	q = &m->request;
	q->transport = PROTO_TRANSPORT_WEBSOCKET;
	if (timeouts != NULL) {
		q->timeouts.connect_ms = timeouts->connect_ms;
		q->timeouts.first_byte_ms = timeouts->first_byte_ms;
		q->timeouts.between_bytes_ms = timeouts->between_bytes_ms;
		q->timeouts.total_ms = timeouts->total_ms;
	}
	q->method.ptr = "GET";
	q->method.len = 3;
	if ((rv = ws_split(url, q, &rest)) != 0)
		goto out;
	/* The path in origin form: "/" when the URL has none. */
	n = strlen(rest);
	if ((path = malloc(n + 2)) == NULL) {
		rv = EGRESS_ERR_NOMEM;
		goto out;
	}
	path[0] = '/';
	memcpy(path + (rest[0] == '/' ? 0 : 1), rest, n + 1);
	rv = shim_set_str(&q->path, path, PROTO_PATH_MAX);
	if (rv == 0)
		rv = shim_fill_headers(m, headers, nheaders);
	if (rv == 0)
		rv = shim_set_profile(m, tls_profile);
	if (rv == 0)
		rv = shim_request_open(c, m, cb, arg, ret_ws);
out:
	free(path);
	free(m);
	return rv;
}

int
egress_ws_wait(struct egress_request *ws, int flags)
{
	int rv = egress_response_wait(ws, flags);

	if (rv < 0)
		return rv;
	return rv == 101 ? 0 : rv;
}

int
egress_ws_write(struct egress_request *ws, const void *buf, size_t len,
    int flags)
{
	uint8_t df = 0;

	if (flags & EGRESS_WS_MSG_BINARY)
		df |= PROTO_FLAG_BINARY;
	if (flags & EGRESS_WS_MSG_END)
		df |= PROTO_FLAG_MSG_END;
	return shim_request_write(ws, buf, len, flags & EGRESS_NONBLOCK, df);
}

struct ws_take {
	uint8_t *buf;
	size_t len;
	struct egress_ws_frame *f;
};

static int
ws_take(void *arg, uint8_t *p, size_t n, uint32_t *ret_credit)
{
	struct ws_take *t = arg;
	uint32_t rl;
	size_t k;

	if (n < SHIM_WS_REC)
		return EGRESS_ERR_PROTOCOL; /* records arrive whole */
	rl = (uint32_t)p[4] << 24 | (uint32_t)p[5] << 16 |
	    (uint32_t)p[6] << 8 | p[7];
	if (p[0] == PROTO_MSG_WS_CONTROL) {
		if (rl > t->len)
			return EGRESS_ERR_TOO_BIG;
		t->f->kind = p[1];
		t->f->last = 1;
		t->f->code = (unsigned)p[2] << 8 | p[3];
		t->f->len = rl;
		if (rl > 0)
			memcpy(t->buf, p + SHIM_WS_REC, rl);
		*ret_credit = 0;
		return (int)(SHIM_WS_REC + rl);
	}
	t->f->kind = (p[1] & PROTO_FLAG_BINARY) ?
	    EGRESS_WS_BINARY :
	    EGRESS_WS_TEXT;
	t->f->code = 0;
	k = rl < t->len ? rl : t->len;
	if (k > 0)
		memcpy(t->buf, p + SHIM_WS_REC, k);
	t->f->len = k;
	*ret_credit = (uint32_t)k;
	if (k == rl) {
		t->f->last = (p[1] & PROTO_FLAG_MSG_END) != 0;
		return (int)(SHIM_WS_REC + rl);
	}
	/* Part of the record: the rest keeps its header, moved up. */
	t->f->last = 0;
	rl -= (uint32_t)k;
	memmove(p + k, p, 4);
	p[k + 4] = (uint8_t)(rl >> 24);
	p[k + 5] = (uint8_t)(rl >> 16);
	p[k + 6] = (uint8_t)(rl >> 8);
	p[k + 7] = (uint8_t)rl;
	return (int)k;
}

int
egress_ws_recv(struct egress_request *ws, void *buf, size_t len,
    struct egress_ws_frame *ret, int flags)
{
	struct ws_take t;
	int rv;

	if (ws == NULL || buf == NULL || ret == NULL ||
	    len < PROTO_WS_PAYLOAD_MAX)
		return EGRESS_ERR_INVALID;
	if (len > 0x7fffffff - SHIM_WS_REC)
		len = 0x7fffffff - SHIM_WS_REC;
	t.buf = buf;
	t.len = len;
	t.f = ret;
	rv = shim_response_take(ws, flags, ws_take, &t);
	return rv > 0 ? 0 : rv;
}

int
egress_ws_control(struct egress_request *ws, int kind, unsigned code,
    const void *buf, size_t len)
{
	struct proto_msg m;

	if (ws == NULL || (buf == NULL && len > 0) || code > 0xffff)
		return EGRESS_ERR_INVALID;
	memset(&m, 0, offsetof(struct proto_msg, headers));
	m.type = PROTO_MSG_WS_CONTROL;
	m.ws_control.opcode = (uint8_t)kind;
	m.ws_control.code = (uint16_t)code;
	m.ws_control.ptr = buf;
	m.ws_control.len = len;
	if (kind == EGRESS_WS_CLOSE)
		m.flags = PROTO_FLAG_END_STREAM;
	else if (kind != EGRESS_WS_PING && kind != EGRESS_WS_PONG)
		return EGRESS_ERR_INVALID;
	if (proto_ws_control_check(&m) != PROTO_FAULT_NONE)
		return EGRESS_ERR_INVALID;
	return shim_request_control(ws, &m);
}
