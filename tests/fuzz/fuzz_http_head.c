/* SPDX-License-Identifier: ISC */
/*
 * Fuzz target: an upstream's HTTP/1.1 response (head, body framing,
 * trailers) as broker/http1.c parses it, byte-trickled through a real
 * bufferevent over a socketpair. The first input byte picks the mode: bit 0
 * moves bodies as evbuffer chains instead of borrowed bytes, bit 1 pauses
 * reading after every body piece (flow control), bit 2 sends HEAD, bits 3-7
 * set the write size. Invariants: nothing crashes, and every exchange ends
 * (on_end runs) once the upstream has closed its side.
 */
#include <sys/socket.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>

#include "broker/net/http1.h"

#define FUZZ_INPUT_MAX 8000
#define FUZZ_TURNS_MAX 100000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_state {
	struct http1_exchange *x;
	struct evbuffer *sink;
	int ends;
	int pause;
	size_t total;
};

static void
on_head(void *arg, const struct http1_response *r)
{
	(void)arg;
	(void)r;
}

static void
on_data(void *arg, const char *p, size_t n)
{
	struct fuzz_state *s = arg;
	volatile char c = (char)(n ? p[n - 1] : 0); /* touch the last byte */

	(void)c;
	s->total += n;
	if (s->pause)
		http1_pause_read(s->x);
}

static void
on_buffer(void *arg, struct evbuffer *in, size_t n)
{
	struct fuzz_state *s = arg;

	/* Take all, half, or none of the piece, as a consumer might. */
	if (n & 1)
		(void)evbuffer_remove_buffer(in, s->sink, n);
	else if (n > 2)
		(void)evbuffer_remove_buffer(in, s->sink, n / 2);
	s->total += n;
	if (s->pause)
		http1_pause_read(s->x);
}

static void
on_end(void *arg, int err, const struct http1_header *t, size_t n)
{
	struct fuzz_state *s = arg;

	(void)err;
	(void)t;
	(void)n;
	s->ends++;
}

static const struct http1_callbacks callbacks = {
	on_head,
	on_data,
	on_end,
	NULL,
};

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http1_head head = { "GET", 3, "/", 1, NULL, 0, 0 };
	struct event_base *base;
	struct bufferevent *bev;
	struct fuzz_state s;
	struct policy_dest dest;
	struct policy_err perr;
	size_t off = 0, step;
	int sv[2], i, mode;
	char junk[4096];

	if (size < 1 || size > FUZZ_INPUT_MAX)
		return 0;
	mode = data[0];
	data++;
	size--;
	if (mode & 4) {
		head.method = "HEAD";
		head.method_len = 4;
	}
	step = (size_t)(mode >> 3) + 1;
	memset(&s, 0, sizeof(s));
	if ((base = event_base_new()) == NULL)
		abort();
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		abort();
	(void)evutil_make_socket_nonblocking(sv[0]);
	(void)evutil_make_socket_nonblocking(sv[1]);
	bev = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL ||
	    policy_url_parse("http://api.example.com/", 23, &dest, &perr) != 0)
		abort();
	if (http1_exchange_new(bev, &dest, &head, 1, NULL, &callbacks, &s,
		&s.x) != 0)
		abort();
	if ((s.sink = evbuffer_new()) == NULL)
		abort();
	if (mode & 1)
		http1_set_body_buffer(s.x, on_buffer);
	s.pause = (mode & 2) != 0;
	for (i = 0; i < FUZZ_TURNS_MAX && s.ends == 0; i++) {
		if (off < size) {
			size_t k = step < size - off ? step : size - off;
			ssize_t w = write(sv[1], data + off, k);

			if (w > 0)
				off += (size_t)w;
		} else if (off == size) {
			(void)shutdown(sv[1], SHUT_WR);
			off++;
		}
		(void)event_base_loop(base, EVLOOP_NONBLOCK);
		if (s.pause)
			http1_resume_read(s.x);
		while (read(sv[1], junk, sizeof(junk)) > 0)
			; /* drain the request the broker wrote */
	}
	if (s.ends == 0 && off > size)
		abort(); /* an exchange must end after EOF */
	(void)http1_is_reusable(s.x);
	http1_exchange_free(s.x);
	bufferevent_free(bev);
	close(sv[1]);
	evbuffer_free(s.sink);
	event_base_free(base);
	return 0;
}
