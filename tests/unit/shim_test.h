/* SPDX-License-Identifier: ISC */
/*
 * The fake broker of the libegress unit tests: proto/ over a socketpair,
 * a scripted exchange in its own thread with the broker's half of the
 * proto state machine (every frame the shim sends is checked against the
 * protocol's tables). Failures inside a script are recorded (FB_CHECK)
 * and asserted by the test thread after fb_finish() joins it.
 */
#ifndef EGRESS_TESTS_SHIM_TEST_H
#define EGRESS_TESTS_SHIM_TEST_H

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <egress/egress.h>

#include "proto/proto.h"

/* ---- The fake broker -------------------------------------------------- */

#define FB_STREAMS 512

struct fb {
	int fd;
	struct proto_conn pc;
	struct proto_stream st[FB_STREAMS]; /* by stream id */
	uint8_t *in;
	size_t inlen;
	struct proto_msg m;		/* last frame received */
	uint8_t frame[PROTO_FRAME_MAX]; /* its bytes (m borrows) */
	int fail;			/* line of the first failure */
	char why[128];
	void (*script)(struct fb *);
	void *arg;
	pthread_t thr;
};

#define FB_CHECK(fb, cond) \
	do { \
		if (!(cond)) { \
			if ((fb)->fail == 0) { \
				(fb)->fail = __LINE__; \
				(void)snprintf((fb)->why, sizeof((fb)->why), \
				    "%s", #cond); \
			} \
			return; \
		} \
	} while (0)

static inline struct proto_stream *
fb_stream(struct fb *fb, uint32_t id)
{
	return id > 0 && id < FB_STREAMS ? &fb->st[id] : NULL;
}

/* Receive one frame into fb->m and apply it; 0, or -1 on EOF or error. */
static inline int
fb_recv(struct fb *fb)
{
	struct proto_stream *s;
	ssize_t n;
	int rv;

	for (;;) {
		rv = proto_frame_decode(fb->in, fb->inlen, &fb->m, NULL);
		if (rv < 0)
			return -1;
		if (rv > 0) {
			memcpy(fb->frame, fb->in, (size_t)rv);
			memmove(fb->in, fb->in + rv, fb->inlen - (size_t)rv);
			fb->inlen -= (size_t)rv;
			(void)proto_frame_decode(fb->frame, (size_t)rv, &fb->m,
			    NULL);
			break;
		}
		n = read(fb->fd, fb->in + fb->inlen,
		    2 * PROTO_FRAME_MAX - fb->inlen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		fb->inlen += (size_t)n;
	}
	s = fb_stream(fb, fb->m.stream);
	if (fb->m.type == PROTO_MSG_REQUEST && s != NULL)
		proto_stream_init(s, fb->m.stream);
	rv = proto_conn_recv(&fb->pc, fb->m.stream ? s : NULL, &fb->m, NULL);
	return rv < 0 ? -1 : 0;
}

/* Receive frames until one of type arrives (others are applied). */
static inline int
fb_expect(struct fb *fb, int type)
{
	while (fb_recv(fb) == 0)
		if (fb->m.type == type)
			return 0;
	return -1;
}

static inline int
fb_write(struct fb *fb, const uint8_t *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		w = send(fb->fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static inline int
fb_send(struct fb *fb, struct proto_msg *m)
{
	static __thread uint8_t buf[PROTO_FRAME_MAX];
	int n;

	if (proto_conn_send(&fb->pc,
		m->stream ? fb_stream(fb, m->stream) : NULL, m, NULL) != 0)
		return -1;
	n = proto_encode(m, buf, sizeof(buf), NULL);
	if (n < 0)
		return -1;
	return fb_write(fb, buf, (size_t)n);
}

static inline void
msg_init(struct proto_msg *m, int type, uint32_t stream, int flags)
{
	memset(m, 0, sizeof(*m));
	m->type = (uint8_t)type;
	m->stream = stream;
	m->flags = (uint8_t)flags;
}

static inline int
fb_hello(struct fb *fb)
{
	struct proto_msg m;

	if (fb_expect(fb, PROTO_MSG_HELLO) != 0)
		return -1;
	msg_init(&m, PROTO_MSG_HELLO, 0, 0);
	m.hello.version = proto_version_choose(fb->m.hello.version);
	return fb_send(fb, &m);
}

static inline int
fb_response(struct fb *fb, uint32_t id, int status, const char *name,
    const char *value, int end)
{
	struct proto_msg m;

	msg_init(&m, PROTO_MSG_RESPONSE, id, end ? PROTO_FLAG_END_STREAM : 0);
	m.response.status = (uint16_t)status;
	if (name != NULL) {
		m.nheaders = 1;
		m.headers[0].name.ptr = name;
		m.headers[0].name.len = strlen(name);
		m.headers[0].value.ptr = value;
		m.headers[0].value.len = strlen(value);
	}
	return fb_send(fb, &m);
}

static inline int
fb_data(struct fb *fb, uint32_t id, const void *p, size_t n, int end)
{
	struct proto_msg m;

	msg_init(&m, PROTO_MSG_DATA, id, end ? PROTO_FLAG_END_STREAM : 0);
	m.data.ptr = p;
	m.data.len = n;
	return fb_send(fb, &m);
}

static inline int
fb_error(struct fb *fb, uint32_t id, uint32_t code)
{
	struct proto_msg m;

	msg_init(&m, PROTO_MSG_ERROR, id, 0);
	if (proto_error_init(&m, id, code) != 0)
		return -1;
	return fb_send(fb, &m);
}

static inline int
fb_reset(struct fb *fb, uint32_t id, uint32_t code)
{
	struct proto_msg m;

	msg_init(&m, PROTO_MSG_RESET, id, 0);
	m.reset.code = code;
	return fb_send(fb, &m);
}

/* Credit n consumed bytes on stream id, sending what is due. */
static inline int
fb_consumed(struct fb *fb, uint32_t id, uint32_t n)
{
	struct proto_msg m;
	uint32_t ci = 0, si = 0;

	if (proto_conn_consumed(&fb->pc, fb_stream(fb, id), n, &ci, &si) != 0)
		return -1;
	if (ci > 0) {
		msg_init(&m, PROTO_MSG_WINDOW_UPDATE, 0, 0);
		m.window_update.increment = ci;
		if (fb_send(fb, &m) != 0)
			return -1;
	}
	if (si > 0) {
		msg_init(&m, PROTO_MSG_WINDOW_UPDATE, id, 0);
		m.window_update.increment = si;
		if (fb_send(fb, &m) != 0)
			return -1;
	}
	return 0;
}

static inline int
str_is(const struct proto_str *s, const char *v)
{
	return s->len == strlen(v) && memcmp(s->ptr, v, s->len) == 0;
}

static inline void *
fb_main(void *arg)
{
	struct fb *fb = arg;

	fb->script(fb);
	(void)shutdown(fb->fd, SHUT_RDWR);
	return NULL;
}

/* Start a fake broker running script; write the client's end. */
static inline struct fb *
fb_start(void (*script)(struct fb *), void *sarg, int *ret_fd)
{
	struct fb *fb;
	int sv[2];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
	    0);
	fb = calloc(1, sizeof(*fb));
	cr_assert_not_null(fb);
	fb->in = malloc(2 * PROTO_FRAME_MAX);
	cr_assert_not_null(fb->in);
	fb->fd = sv[1];
	fb->script = script;
	fb->arg = sarg;
	proto_conn_init(&fb->pc, PROTO_ROLE_BROKER);
	cr_assert_eq(pthread_create(&fb->thr, NULL, fb_main, fb), 0);
	*ret_fd = sv[0];
	return fb;
}

/* Join the fake broker and assert that its script saw no failure. */
static inline void
fb_finish(struct fb *fb)
{
	cr_assert_eq(pthread_join(fb->thr, NULL), 0);
	cr_expect_eq(fb->fail, 0, "fake broker failed at line %d: %s",
	    fb->fail, fb->why);
	(void)close(fb->fd);
	free(fb->in);
	free(fb);
}

static inline struct egress_client *
client_for(int fd)
{
	struct egress_client *c = NULL;

	cr_assert_eq(egress_client_from_fd(fd, &c), 0);
	return c;
}

#endif /* EGRESS_TESTS_SHIM_TEST_H */
