/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for egress_stream_starttls() against the in-test fake
 * broker (shim_test.h): the STARTTLS frame with its profile after the
 * go-ahead, EGRESS_ERR_AGAIN until the broker's answer and 0 after, bytes
 * over the upgraded stream; bytes that arrive while the answer is due
 * fail the stream with EGRESS_ERR_TLS_FAILED and are never returned;
 * unread bytes when the upgrade is asked for fail it the same way, and
 * no STARTTLS goes out; an upgrade before the stream is connected is
 * refused locally.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <egress/egress.h>

#include "proto/proto.h"
#include "shim/shim.h"

#include "shim_test.h"

/* A tcp stream 1, connected, with bytes from the destination. */
static void
fb_open(struct fb *fb, const char *banner)
{
	FB_CHECK(fb, fb_hello(fb) == 0);
	FB_CHECK(fb, fb_expect(fb, PROTO_MSG_REQUEST) == 0);
	FB_CHECK(fb, fb->m.request.transport == PROTO_TRANSPORT_TCP);
	FB_CHECK(fb, fb_response(fb, 1, 200, NULL, NULL, 0) == 0);
	FB_CHECK(fb, fb_data(fb, 1, banner, strlen(banner), 0) == 0);
}

static void
fb_answer(struct fb *fb, const char *profile)
{
	struct proto_msg m;

	msg_init(&m, PROTO_MSG_STARTTLS, 1, 0);
	m.starttls.tls_profile.ptr = profile;
	m.starttls.tls_profile.len = strlen(profile);
	FB_CHECK(fb, fb_send(fb, &m) == 0);
}

static void
script_upgrade(struct fb *fb)
{
	fb_open(fb, "220 go\r\n");
	FB_CHECK(fb, fb->fail == 0);
	FB_CHECK(fb, fb_expect(fb, PROTO_MSG_STARTTLS) == 0);
	FB_CHECK(fb, str_is(&fb->m.starttls.tls_profile, "mail"));
	FB_CHECK(fb, fb->st[1].upgrade == PROTO_UPGRADE_ASKED);
	fb_answer(fb, "mail");
	FB_CHECK(fb, fb->fail == 0);
	FB_CHECK(fb, fb_expect(fb, PROTO_MSG_DATA) == 0);
	FB_CHECK(fb, fb->m.data.len == 8);
	FB_CHECK(fb, memcmp(fb->m.data.ptr, "over tls", 8) == 0);
	FB_CHECK(fb, fb_data(fb, 1, "back", 4, 1) == 0);
}

Test(shim_starttls, upgrade)
{
	struct egress_request *s = NULL;
	struct egress_client *c;
	char buf[16];
	struct fb *fb;
	int fd;

	fb = fb_start(script_upgrade, NULL, &fd);
	c = client_for(fd);
	cr_assert_eq(egress_stream_open(c, EGRESS_STREAM_TCP, "mx.example:25",
			 NULL, NULL, NULL, &s),
	    0);
	/* Not connected yet. */
	cr_assert_eq(egress_stream_starttls(s, "mail", EGRESS_NONBLOCK),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(egress_stream_wait(s, 0), 0);
	cr_assert_eq(egress_stream_read(s, buf, sizeof(buf), 0), 8);
	cr_assert_eq(memcmp(buf, "220 go\r\n", 8), 0);
	cr_assert_eq(egress_stream_starttls(s, "mail", EGRESS_NONBLOCK),
	    EGRESS_ERR_AGAIN);
	cr_assert_eq(egress_stream_starttls(s, "mail", 0), 0);
	cr_assert_eq(egress_stream_starttls(s, "mail", EGRESS_NONBLOCK), 0);
	cr_assert_eq(egress_stream_write(s, "over tls", 8, 0), 8);
	cr_assert_eq(egress_stream_read(s, buf, sizeof(buf), 0), 4);
	cr_assert_eq(memcmp(buf, "back", 4), 0);
	fb_finish(fb);
	egress_request_free(s);
	egress_client_free(c);
}

/* Bytes while the answer is due: never returned; the stream fails. */
static void
script_injected_after(struct fb *fb)
{
	static uint8_t frame[64];
	struct proto_msg m;
	int n;

	fb_open(fb, "220 go\r\n");
	FB_CHECK(fb, fb->fail == 0);
	FB_CHECK(fb, fb_expect(fb, PROTO_MSG_STARTTLS) == 0);
	/* DATA the broker sent before it read the request (they crossed):
	 * written as it was, past the broker's state that now refuses it. */
	msg_init(&m, PROTO_MSG_DATA, 1, 0);
	m.data.ptr = (const uint8_t *)"250 INJECTED\r\n";
	m.data.len = 14;
	n = proto_encode(&m, frame, sizeof(frame), NULL);
	FB_CHECK(fb, n > 0 && fb_write(fb, frame, (size_t)n) == 0);
	FB_CHECK(fb, fb_expect(fb, PROTO_MSG_RESET) == 0);
}

Test(shim_starttls, bytes_while_asked_fail)
{
	struct egress_request *s = NULL;
	struct egress_client *c;
	char buf[32];
	struct fb *fb;
	int fd, rv;

	fb = fb_start(script_injected_after, NULL, &fd);
	c = client_for(fd);
	cr_assert_eq(egress_stream_open(c, EGRESS_STREAM_TCP, "mx.example:25",
			 NULL, NULL, NULL, &s),
	    0);
	cr_assert_eq(egress_stream_wait(s, 0), 0);
	cr_assert_eq(egress_stream_read(s, buf, sizeof(buf), 0), 8);
	rv = egress_stream_starttls(s, NULL, 0);
	cr_assert_eq(rv, EGRESS_ERR_TLS_FAILED, "got %d", rv);
	cr_assert_eq(egress_stream_read(s, buf, sizeof(buf), 0),
	    EGRESS_ERR_TLS_FAILED);
	fb_finish(fb);
	egress_request_free(s);
	egress_client_free(c);
}

/* Unread bytes when the upgrade is asked for: no STARTTLS goes out. */
static void
script_unread(struct fb *fb)
{
	fb_open(fb, "220 go\r\n250 INJECTED\r\n");
	FB_CHECK(fb, fb->fail == 0);
	while (fb_recv(fb) == 0 && fb->m.type != PROTO_MSG_RESET)
		FB_CHECK(fb, fb->m.type != PROTO_MSG_STARTTLS);
	FB_CHECK(fb, fb->m.type == PROTO_MSG_RESET);
}

Test(shim_starttls, unread_bytes_fail)
{
	struct egress_request *s = NULL;
	struct egress_client *c;
	char buf[8];
	struct fb *fb;
	int fd, rv;

	fb = fb_start(script_unread, NULL, &fd);
	c = client_for(fd);
	cr_assert_eq(egress_stream_open(c, EGRESS_STREAM_TCP, "mx.example:25",
			 NULL, NULL, NULL, &s),
	    0);
	cr_assert_eq(egress_stream_wait(s, 0), 0);
	cr_assert_eq(egress_stream_read(s, buf, sizeof(buf), 0), 8);
	rv = egress_stream_starttls(s, NULL, 0);
	cr_assert_eq(rv, EGRESS_ERR_TLS_FAILED, "got %d", rv);
	cr_assert_eq(egress_stream_read(s, buf, sizeof(buf), 0),
	    EGRESS_ERR_TLS_FAILED);
	fb_finish(fb);
	egress_request_free(s);
	egress_client_free(c);
}
