/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for the proxy front (broker/proxy.c) and its way in on the
 * instance socket: a client connection opened as a session
 * (session_accept) that starts with an HTTP request line is handed to
 * the front. Each case writes raw HTTP/1.1 and checks what the client
 * reads back and what reached the loopback upstream the test answers by
 * hand: allowed requests (origin-form with Host, absolute-form) relayed
 * with hop-by-hop and Proxy-* headers dropped; keep-alive and pipelined
 * requests answered in order; bodies with Content-Length and chunked;
 * denials as 403 with the masked message and X-Egress-Error; a broken
 * configuration as 403 (policy-unavailable in the log); the framing
 * attacks (CL+TE, two Content-Lengths, obs-fold, bad chunking) as 400
 * with nothing reaching the upstream; methods not relayed as 405.
 */
#include "daemon_test.h"

#include <criterion/parameterized.h>

#include "broker/proxy.h"

static void
px_teardown(void)
{
	proxy_free_all(&dt_b);
	dt_teardown();
}

TestSuite(proxy, .init = dt_setup, .fini = px_teardown);

/* What the client read, until the broker closed or a condition held. */
struct px_client {
	struct dt_peer p; /* the fd; frames are not used */
	char out[1 << 20];
	size_t len;
	int eof;
};

static struct px_client C;

static void
px_open(struct px_client *c, const char *instance)
{
	memset(c, 0, sizeof(*c));
	dt_peer_open(&c->p, instance);
}

static void
px_write(struct px_client *c, const char *s)
{
	dt_write_all(c->p.fd, s, strlen(s));
}

static void
px_read(struct px_client *c)
{
	ssize_t n;

	while (!c->eof && c->len < sizeof(c->out) - 1) {
		n = read(c->p.fd, c->out + c->len,
		    sizeof(c->out) - 1 - c->len);
		if (n > 0) {
			c->len += (size_t)n;
			c->out[c->len] = '\0';
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR))
			c->eof = 1;
		else
			return;
	}
}

/* Count the status lines the client has read. */
static int
px_nresponses(const struct px_client *c)
{
	const char *s = c->out;
	int n = 0;

	while ((s = strstr(s, "HTTP/1.1 ")) != NULL) {
		if (s == c->out || s[-1] == '\n')
			n++;
		s++;
	}
	return n;
}

/* Run the loop until the client holds n responses (n 0: until EOF),
 * answering the upstream u (may be NULL) with reply each time a request
 * head arrives there. */
static void
px_wait(struct px_client *c, int n, struct dt_upstream *u, const char *reply)
{
	int i, answered = 0;

	for (i = 0; i < DT_ITERS; i++) {
		px_read(c);
		if (n > 0 && px_nresponses(c) >= n)
			return;
		if (c->eof)
			break;
		if (u != NULL) {
			dt_upstream_read(u);
			if (reply != NULL && strstr(u->req, "\r\n\r\n") &&
			    answered < 1) {
				dt_upstream_reply(u, reply);
				answered++;
			}
		}
		dt_step(c->p.fd);
	}
	if (n > 0)
		cr_assert_fail("want %d responses, have: %s", n, c->out);
	cr_assert(c->eof, "the broker did not close; client read: %s", c->out);
}

static const char reply_small[] =
    "HTTP/1.1 200 OK\r\n"
    "Content-Length: 5\r\n"
    "Connection: keep-alive\r\n"
    "X-Up: 1\r\n"
    "\r\n"
    "hello";

Test(proxy, origin_form_allowed_on_the_instance_socket)
{
	struct dt_upstream u;
	char req[512];

	dt_upstream_open(&u);
	px_open(&C, "app");
	(void)snprintf(req, sizeof(req),
	    "GET /x?y=1 HTTP/1.1\r\nHost: %s\r\nUser-Agent: t\r\n"
	    "Proxy-Authorization: Basic Zm9vOmJhcg==\r\n"
	    "Proxy-Connection: keep-alive\r\nTE: trailers\r\n\r\n",
	    u.authority);
	px_write(&C, req);
	px_wait(&C, 1, &u, reply_small);
	cr_assert(strncmp(C.out, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", C.out);
	cr_assert(strstr(C.out, "\r\nX-Up: 1\r\n") != NULL, "%s", C.out);
	cr_assert(strstr(C.out, "\r\n\r\nhello") != NULL, "%s", C.out);
	cr_assert(strstr(u.req, "GET /x?y=1 HTTP/1.1\r\n") == u.req, "%s",
	    u.req);
	cr_assert(strstr(u.req, "User-Agent: t\r\n") != NULL, "%s", u.req);
	cr_assert(strcasestr(u.req, "Proxy-") == NULL, "%s", u.req);
	cr_assert(strcasestr(u.req, "\r\nTE:") == NULL, "%s", u.req);
	cr_assert_eq(dt_log_count("egress.decision"), 1);
	cr_assert_str_eq(dt_log_last("egress.decision", "verdict"), "allow");
	cr_assert_str_eq(dt_log_last("egress.decision", "instance"), "app");
	for (int i = 0; i < DT_ITERS && dt_log_count("egress.close") < 1; i++)
		dt_step(-1);
	cr_assert_eq(dt_log_count("egress.close"), 1);
	dt_peer_close(&C.p);
	dt_upstream_close(&u);
}
