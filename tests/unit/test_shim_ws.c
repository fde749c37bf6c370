/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for libegress WebSockets against the fake broker
 * (shim_test.h): the REQUEST egress_ws_open() sends (transport,
 * GET, scheme, authority, path, headers), a message in pieces (a frame
 * larger than the reader's buffer), binary and empty messages, a ping
 * and a message written in pieces, the broker's close answered at once
 * with the shim's own, EGRESS_ERR_CLOSED after it; a refused upgrade
 * (302) reported with its status; bad URLs and controls refused locally.
 */
#include <criterion/criterion.h>
#include <string.h>

#include <egress/egress.h>

#include "proto/proto.h"
#include "shim_test.h"

static int
fb_ws_data(struct fb *fb, uint32_t id, const char *p, size_t n, int flags)
{
	struct proto_msg m;

	msg_init(&m, PROTO_MSG_DATA, id, flags);
	m.data.ptr = (const uint8_t *)p;
	m.data.len = n;
	return fb_send(fb, &m);
}

static int
fb_ws_close(struct fb *fb, uint32_t id, unsigned code, const char *reason)
{
	struct proto_msg m;

	msg_init(&m, PROTO_MSG_WS_CONTROL, id, PROTO_FLAG_END_STREAM);
	m.ws_control.opcode = PROTO_WS_CLOSE;
	m.ws_control.code = (uint16_t)code;
	m.ws_control.ptr = (const uint8_t *)reason;
	m.ws_control.len = strlen(reason);
	return fb_send(fb, &m);
}

static void
script_ws(struct fb *fb)
{
	const struct proto_request *q;
	static char big[300];

	memset(big, 'b', sizeof(big));
	FB_CHECK(fb, fb_hello(fb) == 0);
	FB_CHECK(fb, fb->pc.version == 2);
	FB_CHECK(fb, fb_expect(fb, PROTO_MSG_REQUEST) == 0);
	q = &fb->m.request;
	FB_CHECK(fb, q->transport == PROTO_TRANSPORT_WEBSOCKET);
	FB_CHECK(fb, (fb->m.flags & PROTO_FLAG_END_STREAM) == 0);
	FB_CHECK(fb, str_is(&q->method, "GET"));
	FB_CHECK(fb, str_is(&q->scheme, "wss"));
	FB_CHECK(fb, str_is(&q->authority, "feed.example:8443"));
	FB_CHECK(fb, str_is(&q->path, "/live?x=1"));
	FB_CHECK(fb, fb->m.nheaders == 1);
	FB_CHECK(fb, str_is(&fb->m.headers[0].name, "Sec-WebSocket-Protocol"));
	FB_CHECK(fb, fb->st[1].messages);
	FB_CHECK(fb,
	    fb_response(fb, 1, 101, "Sec-WebSocket-Protocol", "chat", 0) == 0);
	/* One text message in two frames, the first larger than the
	 * reader's buffer; a binary one; an empty one. */
	FB_CHECK(fb, fb_ws_data(fb, 1, big, sizeof(big), 0) == 0);
	FB_CHECK(fb, fb_ws_data(fb, 1, "end", 3, PROTO_FLAG_MSG_END) == 0);
	FB_CHECK(fb,
	    fb_ws_data(fb, 1, "\1\2", 2,
		PROTO_FLAG_MSG_END | PROTO_FLAG_BINARY) == 0);
	FB_CHECK(fb, fb_ws_data(fb, 1, "", 0, PROTO_FLAG_MSG_END) == 0);
	/* The guest's ping, then its message written in two pieces. */
	FB_CHECK(fb, fb_expect(fb, PROTO_MSG_WS_CONTROL) == 0);
	FB_CHECK(fb, fb->m.ws_control.opcode == PROTO_WS_PING);
	FB_CHECK(fb, fb->m.ws_control.len == 2);
	FB_CHECK(fb, fb_expect(fb, PROTO_MSG_DATA) == 0);
	FB_CHECK(fb, fb->m.flags == 0 && fb->m.data.len == 3);
	FB_CHECK(fb, fb_expect(fb, PROTO_MSG_DATA) == 0);
	FB_CHECK(fb, fb->m.flags == PROTO_FLAG_MSG_END);
	FB_CHECK(fb, fb->m.data.len == 2);
	/* The broker's close is answered by the library. */
	FB_CHECK(fb, fb_ws_close(fb, 1, 4001, "bye") == 0);
	FB_CHECK(fb, fb_expect(fb, PROTO_MSG_WS_CONTROL) == 0);
	FB_CHECK(fb, fb->m.ws_control.opcode == PROTO_WS_CLOSE);
	FB_CHECK(fb, fb->st[1].state == PROTO_STREAM_CLOSED);
}

Test(shim_ws, messages_and_close)
{
	struct egress_header h = { "Sec-WebSocket-Protocol", 22, "chat", 4 };
	struct egress_request *ws = NULL;
	struct egress_ws_frame f;
	struct egress_client *c;
	char buf[200];
	size_t got = 0;
	struct fb *fb;
	int fd;

	fb = fb_start(script_ws, NULL, &fd);
	cr_assert_eq(egress_client_from_fd(fd, &c), 0);
	cr_assert_eq(egress_ws_open(c, "https://x/", NULL, 0, NULL, NULL, NULL,
			 &ws),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(egress_ws_open(c, "ws://", NULL, 0, NULL, NULL, NULL,
			 &ws),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(egress_ws_open(c, "wss://feed.example:8443/live?x=1", &h,
			 1, NULL, NULL, NULL, &ws),
	    0);
	cr_assert_eq(egress_ws_wait(ws, 0), 0);
	cr_assert_eq(egress_ws_recv(ws, buf, 100, &f, 0), EGRESS_ERR_INVALID);
	/* 300 bytes come as 200 + 100 (not last), then "end" (last). */
	while (got < 300) {
		cr_assert_eq(egress_ws_recv(ws, buf, sizeof(buf), &f, 0), 0);
		cr_assert_eq(f.kind, EGRESS_WS_TEXT);
		cr_assert_eq(f.last, 0);
		got += f.len;
	}
	cr_assert_eq(got, 300);
	cr_assert_eq(egress_ws_recv(ws, buf, sizeof(buf), &f, 0), 0);
	cr_assert_eq(f.len, 3);
	cr_assert(f.last && memcmp(buf, "end", 3) == 0);
	cr_assert_eq(egress_ws_recv(ws, buf, sizeof(buf), &f, 0), 0);
	cr_assert(f.kind == EGRESS_WS_BINARY && f.last && f.len == 2);
	cr_assert_eq(egress_ws_recv(ws, buf, sizeof(buf), &f, 0), 0);
	cr_assert(f.kind == EGRESS_WS_TEXT && f.last && f.len == 0);

	cr_assert_eq(egress_ws_control(ws, EGRESS_WS_PING, 1000, "p", 1),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(egress_ws_control(ws, 3, 0, NULL, 0), EGRESS_ERR_INVALID);
	cr_assert_eq(egress_ws_control(ws, EGRESS_WS_PING, 0, "pp", 2), 0);
	cr_assert_eq(egress_ws_write(ws, "abc", 3, 0), 3);
	cr_assert_eq(egress_ws_write(ws, "de", 2, EGRESS_WS_MSG_END), 2);

	cr_assert_eq(egress_ws_recv(ws, buf, sizeof(buf), &f, 0), 0);
	cr_assert_eq(f.kind, EGRESS_WS_CLOSE);
	cr_assert_eq(f.code, 4001);
	cr_assert(f.len == 3 && memcmp(buf, "bye", 3) == 0);
	cr_assert_eq(egress_ws_recv(ws, buf, sizeof(buf), &f, 0),
	    EGRESS_ERR_CLOSED);
	cr_assert_eq(egress_ws_control(ws, EGRESS_WS_CLOSE, 1000, NULL, 0),
	    EGRESS_ERR_CLOSED);
	fb_finish(fb);
	egress_request_free(ws);
	egress_client_free(c);
}

static void
script_refused(struct fb *fb)
{
	FB_CHECK(fb, fb_hello(fb) == 0);
	FB_CHECK(fb, fb_expect(fb, PROTO_MSG_REQUEST) == 0);
	FB_CHECK(fb,
	    fb_response(fb, 1, 302, "Location", "ws://elsewhere/", 1) == 0);
	FB_CHECK(fb, fb_expect(fb, PROTO_MSG_RESET) == 0);
}

Test(shim_ws, refused_upgrade)
{
	struct egress_request *ws = NULL;
	const struct egress_header *h;
	struct egress_client *c;
	struct fb *fb;
	size_t n = 0;
	int fd;

	fb = fb_start(script_refused, NULL, &fd);
	cr_assert_eq(egress_client_from_fd(fd, &c), 0);
	cr_assert_eq(egress_ws_open(c, "ws://feed.example", NULL, 0, NULL,
			 NULL, NULL, &ws),
	    0);
	cr_assert_eq(egress_ws_wait(ws, 0), 302);
	h = egress_response_headers(ws, &n);
	cr_assert(n == 1 && strcmp(h[0].value, "ws://elsewhere/") == 0);
	egress_request_free(ws); /* resets the stream */
	fb_finish(fb);
	egress_client_free(c);
}
