/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for the proxy front (broker/proxy.c) and its way in on the
 * instance socket: a client connection opened as a session
 * (session_accept) that starts with an HTTP request line is handed to
 * the front. Each case writes raw HTTP/1.1 and checks what the client
 * reads back and what reached the loopback upstream the test answers by
 * hand: allowed requests (origin-form with Host, absolute-form) relayed
 * with hop-by-hop and Proxy-* headers dropped; keep-alive and pipelined
 * requests answered in order, a half-close never cutting an answer
 * already queued; bodies with Content-Length and chunked;
 * denials as 403 with the masked message and X-Egress-Error; a broken
 * configuration as 403 (policy-unavailable in the log); the framing
 * attacks (CL+TE, two Content-Lengths, obs-fold, bad chunking) as 400
 * with nothing reaching the upstream; methods not relayed as 405;
 * CONNECT tunnels: one idle timer for both ways, half-close both ways
 * passed on as an end of file, a client that left still has what it
 * sent delivered, and every cut (the client's reset, also one a write
 * sees first, a timeout, the instance removed, a grant revoked) passed
 * on as a reset; a destination that resets before the relay's first
 * write ends the tunnel as an upstream failure.
 */
#include "daemon_test.h"

#include <criterion/parameterized.h>

#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include <openssl/ssl.h>

#include "broker/net/http1_req.h"
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

	/* No test body holds a status line. */
	while ((s = strstr(s, "HTTP/1.1 ")) != NULL) {
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

/* ---- answered by the front or the pipeline, nothing upstream ---------- */

struct once_case {
	char name[32];
	char req[256]; /* "UP": the loopback upstream's authority */
	int status;
	char error[24];	   /* X-Egress-Error */
	char reason[24];   /* the decision's reason; "" for none */
	int broken;	   /* break the configuration first */
	char proxy_ev[24]; /* an egress.proxy event's error, or "" */
};

ParameterizedTestParameters(proxy, once)
{
	static struct once_case cases[] = {
		{ "metadata",
		    "GET http://169.254.169.254/latest/ HTTP/1.1\r\n"
		    "Host: 169.254.169.254\r\n\r\n",
		    403, "denied", "metadata", 0, "" },
		{ "not-granted", "GET http://10.0.0.9/ HTTP/1.1\r\n\r\n", 403,
		    "denied", "not-granted", 0, "" },
		{ "broken-configuration", "GET http://UP/ HTTP/1.1\r\n\r\n",
		    403, "unavailable", "policy-unavailable", 1, "" },
		{ "host-differs",
		    "GET http://UP/ HTTP/1.1\r\n"
		    "Host: 169.254.169.254\r\n\r\n",
		    400, "invalid-request", "invalid-request", 0, "" },
		{ "https-ftp-scheme", "GET ftp://UP/ HTTP/1.1\r\n\r\n", 400,
		    "malformed", "", 0, "malformed" },
		{ "cl-te",
		    "POST http://UP/ HTTP/1.1\r\nContent-Length: 5\r\n"
		    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		    400, "malformed", "", 0, "malformed" },
		{ "two-cl",
		    "POST http://UP/ HTTP/1.1\r\nContent-Length: 1\r\n"
		    "Content-Length: 1\r\n\r\nab",
		    400, "malformed", "", 0, "malformed" },
		{ "obs-fold",
		    "GET http://UP/ HTTP/1.1\r\nX-A: 1\r\n 2\r\n\r\n", 400,
		    "malformed", "", 0, "malformed" },
		{ "connect-denied",
		    "CONNECT 169.254.169.254:443 HTTP/1.1\r\n"
		    "\r\n",
		    403, "denied", "metadata", 0, "" },
		{ "connect-not-granted",
		    "CONNECT 10.0.0.9:443 HTTP/1.1\r\n\r\n", 403, "denied",
		    "not-granted", 0, "" },
		{ "connect-without-port", "CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n",
		    400, "malformed", "", 0, "malformed" },
		{ "propfind", "PROPFIND http://UP/ HTTP/1.1\r\n\r\n", 405,
		    "method", "", 0, "method" },
		{ "origin-without-host", "GET /x HTTP/1.1\r\n\r\n", 400,
		    "malformed", "", 0, "malformed" },
	};

	return cr_make_param_array(struct once_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

/* Replace every "UP" in src with the upstream's authority. */
static void
subst_up(char *dst, size_t n, const char *src, const char *up)
{
	size_t o = 0;

	while (*src != '\0' && o + 32 < n) {
		if (strncmp(src, "UP", 2) == 0) {
			o += (size_t)snprintf(dst + o, n - o, "%s", up);
			src += 2;
		} else
			dst[o++] = *src++;
	}
	dst[o] = '\0';
}

ParameterizedTest(struct once_case *c, proxy, once)
{
	struct dt_upstream u;
	char req[512], want[64];
	int i;

	dt_upstream_open(&u);
	if (c->broken)
		dt_break_conf();
	subst_up(req, sizeof(req), c->req, u.authority);
	px_open(&C, "app");
	px_write(&C, req);
	px_wait(&C, 1, NULL, NULL);
	(void)snprintf(want, sizeof(want), "HTTP/1.1 %d ", c->status);
	cr_assert(strncmp(C.out, want, strlen(want)) == 0, "%s: %s", c->name,
	    C.out);
	(void)snprintf(want, sizeof(want), "\r\nX-Egress-Error: %s\r\n",
	    c->error);
	cr_assert(strstr(C.out, want) != NULL, "%s: %s", c->name, C.out);
	if (c->status == 403)
		cr_assert(strstr(C.out,
			      c->broken ?
				  proto_code_message(PROTO_CODE_UNAVAILABLE) :
				  PROTO_DENIED_MESSAGE) != NULL,
		    "%s: %s", c->name, C.out);
	cr_assert(strstr(C.out, "127.0.0.1") == NULL &&
		strstr(C.out, "169.254") == NULL,
	    "%s: the answer names an address: %s", c->name, C.out);
	if (c->reason[0] != '\0') {
		cr_assert_eq(dt_log_count("egress.decision"), 1, "%s",
		    c->name);
		cr_assert_str_eq(dt_log_last("egress.decision", "reason"),
		    c->reason, "%s", c->name);
	} else
		cr_assert_eq(dt_log_count("egress.decision"), 0, "%s",
		    c->name);
	if (c->proxy_ev[0] != '\0') {
		cr_assert_eq(dt_log_count("egress.proxy"), 1, "%s", c->name);
		cr_assert_str_eq(dt_log_last("egress.proxy", "error"),
		    c->proxy_ev);
		cr_assert_str_eq(dt_log_last("egress.proxy", "instance"),
		    "app");
	}
	/* Nothing reached the upstream. */
	for (i = 0; i < 10; i++) {
		dt_upstream_read(&u);
		dt_step(-1);
	}
	cr_assert_lt(u.cfd, 0, "%s: the upstream was connected", c->name);
	dt_peer_close(&C.p);
	dt_upstream_close(&u);
}

/* ---- exchanges --------------------------------------------------------- */

Test(proxy, pipelined_requests_answered_in_order)
{
	struct dt_upstream u;
	char req[1024];
	const char *a, *b;

	dt_upstream_open(&u);
	px_open(&C, "app");
	/* The first answer needs the upstream, the second none: the second
	 * must still come second. */
	(void)snprintf(req, sizeof(req),
	    "GET http://%s/one HTTP/1.1\r\n\r\n"
	    "GET http://169.254.169.254/two HTTP/1.1\r\n\r\n",
	    u.authority);
	px_write(&C, req);
	px_wait(&C, 2, &u, reply_small);
	a = strstr(C.out, "HTTP/1.1 200 OK\r\n");
	b = strstr(C.out, "HTTP/1.1 403 Forbidden\r\n");
	cr_assert(a != NULL && b != NULL && a < b, "%s", C.out);
	cr_assert(strstr(a, "hello") < b, "%s", C.out);
	cr_assert_eq(dt_log_count("egress.decision"), 2);
	dt_peer_close(&C.p);
	dt_upstream_close(&u);
}

/* A head sent a byte at a time (each read looks only at the bytes the
 * last one had not) is found whole, its end split across reads. */
Test(proxy, a_head_sent_a_byte_at_a_time_is_served)
{
	struct dt_upstream u;
	char req[1024];
	size_t i, n;

	dt_upstream_open(&u);
	px_open(&C, "app");
	n = (size_t)snprintf(req, sizeof(req),
	    "GET http://%s/one HTTP/1.1\r\nX-A: 1\r\nX-B: 2\r\n\r\n",
	    u.authority);
	for (i = 0; i < n; i++) {
		dt_write_all(C.p.fd, req + i, 1);
		dt_step(C.p.fd);
		px_read(&C);
		cr_assert_eq(C.len, 0, "answered after %zu bytes: %s", i + 1,
		    C.out);
	}
	px_wait(&C, 1, &u, reply_small);
	cr_assert(strncmp(C.out, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", C.out);
	cr_assert_not_null(strstr(u.req, "X-B: 2\r\n\r\n"), "%s", u.req);
	dt_peer_close(&C.p);
	dt_upstream_close(&u);
}

Test(proxy, chunked_response_and_keep_alive)
{
	struct dt_upstream u;
	char req[512];

	dt_upstream_open(&u);
	px_open(&C, "app");
	(void)snprintf(req, sizeof(req),
	    "POST http://%s/up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
	    "\r\n3\r\nabc\r\n0\r\n\r\n",
	    u.authority);
	px_write(&C, req);
	px_wait(&C, 1, &u,
	    "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "4\r\nwxyz\r\n0\r\n\r\n");
	for (int i = 0; i < DT_ITERS && strstr(C.out, "0\r\n\r\n") == NULL;
	     i++) {
		px_read(&C);
		dt_step(C.p.fd);
	}
	cr_assert(strncmp(C.out, "HTTP/1.1 201 Created\r\n", 22) == 0, "%s",
	    C.out);
	cr_assert(strstr(C.out, "Transfer-Encoding: chunked\r\n") != NULL);
	cr_assert(strstr(C.out, "\r\n\r\n4\r\nwxyz\r\n0\r\n\r\n") != NULL,
	    "%s", C.out);
	cr_assert(strstr(C.out, "Connection: close") == NULL, "%s", C.out);
	cr_assert(!C.eof, "the connection was closed");
	/* The body went upstream, chunked again by the broker. */
	cr_assert(strstr(u.req, "POST /up HTTP/1.1\r\n") == u.req, "%s",
	    u.req);
	cr_assert(strstr(u.req, "3\r\nabc\r\n") != NULL, "%s", u.req);
	dt_peer_close(&C.p);
	dt_upstream_close(&u);
}

Test(proxy, connect_failure_is_502)
{
	struct dt_upstream u;
	char req[512];

	dt_upstream_open(&u);
	(void)close(u.lfd); /* nothing listens on the port any more */
	u.lfd = -1;
	px_open(&C, "app");
	(void)snprintf(req, sizeof(req),
	    "HEAD http://%s/ HTTP/1.1\r\nConnection: close\r\n\r\n",
	    u.authority);
	px_write(&C, req);
	px_wait(&C, 0, NULL, NULL);
	cr_assert(strncmp(C.out, "HTTP/1.1 502 ", 13) == 0, "%s", C.out);
	cr_assert(strstr(C.out, "X-Egress-Error: connect-failed\r\n") != NULL,
	    "%s", C.out);
	/* HEAD: no body, whatever Content-Length says. */
	cr_assert(strstr(C.out, "\r\n\r\n")[4] == '\0', "%s", C.out);
}

/* Bad chunk framing, including what a non-strict http-parser lets
 * through: 400, and the upstream never sees the body end (nor the bytes
 * of the piece the framing broke in). */
struct chunking {
	char body[32];
};

static struct chunking bad_chunkings[] = {
	{ "3\r\nabc\r\nzz\r\n" },      /* not a size */
	{ "5\r\nhelloXY0\r\n\r\n" },   /* two bytes for the CRLF */
	{ "5\r\nhello\n\n0\r\n\r\n" }, /* bare LFs after data */
	{ "0\r\r\n\r\n" },	       /* CR CR after the size */
	{ "0\r\n\n" },		       /* a bare LF ends the trailers */
	{ "0\r\nX-A : 1\r\n\r\n" },    /* a spaced trailer name */
};

ParameterizedTestParameters(proxy,
    bad_chunking_mid_body_is_400_and_never_completed_upstream)
{
	return cr_make_param_array(struct chunking, bad_chunkings,
	    sizeof(bad_chunkings) / sizeof(bad_chunkings[0]));
}

ParameterizedTest(struct chunking *c, proxy,
    bad_chunking_mid_body_is_400_and_never_completed_upstream)
{
	struct dt_upstream u;
	char req[512];

	dt_upstream_open(&u);
	px_open(&C, "app");
	(void)snprintf(req, sizeof(req),
	    "POST http://%s/up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
	    "\r\n%s",
	    u.authority, c->body);
	px_write(&C, req);
	px_wait(&C, 0, &u, NULL);
	cr_assert(strncmp(C.out, "HTTP/1.1 400 ", 13) == 0, "%s", C.out);
	cr_assert(strstr(u.req, "0\r\n\r\n") == NULL,
	    "the upstream saw a complete body: %s", u.req);
	cr_assert(strstr(u.req, "hello") == NULL,
	    "the upstream saw the broken piece: %s", u.req);
	cr_assert_eq(dt_log_count("egress.proxy"), 1);
}

/* ---- a TCP port's connection: every request needs the token ------------ */

Test(proxy, port_requires_the_token)
{
	int sv[2];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
	    0);
	cr_assert_eq(evutil_make_socket_nonblocking(sv[0]), 0);
	cr_assert_eq(evutil_make_socket_nonblocking(sv[1]), 0);
	memset(&C, 0, sizeof(C));
	C.p.fd = sv[1];
	/* "app" has no proxy token configured: nothing authorizes. */
	cr_assert_eq(proxy_accept(&dt_b, sv[0], "app", NULL, PROXY_AUTH), 0);
	px_write(&C,
	    "GET http://169.254.169.254/ HTTP/1.1\r\n"
	    "Proxy-Authorization: Basic dXNlcjpzZWNyZXQ=\r\n\r\n");
	px_wait(&C, 0, NULL, NULL);
	cr_assert(strncmp(C.out, "HTTP/1.1 407 ", 13) == 0, "%s", C.out);
	cr_assert(strstr(C.out,
		      "\r\nProxy-Authenticate: Basic "
		      "realm=\"egressd\"\r\n") != NULL,
	    "%s", C.out);
	cr_assert(strstr(C.out, "app") == NULL, "%s", C.out);
	cr_assert_eq(dt_log_count("egress.decision"), 0);
	cr_assert_str_eq(dt_log_last("egress.proxy", "error"), "auth");
	dt_peer_close(&C.p);
}

Test(proxy, upstream_timeout_is_504)
{
	struct dt_upstream u;
	char req[512], text[1024];

	/* The same configuration with a short first-byte timeout. */
	(void)snprintf(text, sizeof(text),
	    "[plugins.security]\nsignature_mode = disabled\n"
	    "[plugins.entries.app]\nplugin = unit\nmanifest = manifest.ini\n"
	    "permissions = http_client\negress_hosts = 127.0.0.1\n"
	    "egress_allow_loopback = 127.0.0.1\n"
	    "[broker]\ninstance_socket_dir = %s/run\n"
	    "control_socket = %s/control.sock\n"
	    "[resolver]\nservers = 127.0.0.1:9\n"
	    "[limits]\nfirst_byte_timeout_ms = 200\n",
	    ct_dir, ct_dir);
	ct_write_str("egressd.ini", text);
	dt_upstream_open(&u);
	px_open(&C, "app");
	(void)snprintf(req, sizeof(req),
	    "GET http://%s/slow HTTP/1.1\r\nConnection: close\r\n\r\n",
	    u.authority);
	px_write(&C, req);
	px_wait(&C, 0, &u, NULL); /* the upstream never answers */
	cr_assert(strncmp(C.out, "HTTP/1.1 504 ", 13) == 0, "%s", C.out);
	cr_assert(strstr(C.out, "X-Egress-Error: timeout\r\n") != NULL, "%s",
	    C.out);
	cr_assert_str_eq(dt_log_last("egress.decision", "verdict"), "allow");
	dt_upstream_close(&u);
}

/* ---- CONNECT ------------------------------------------------------------ */

/* A ClientHello without SNI, as an OpenSSL client sends it. */
static size_t
client_hello(unsigned char *buf, size_t n)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *s = SSL_new(ctx);
	BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
	int len;

	cr_assert(ctx != NULL && s != NULL && rb != NULL && wb != NULL);
	SSL_set_bio(s, rb, wb);
	SSL_set_connect_state(s);
	(void)SSL_do_handshake(s);
	len = BIO_read(wb, buf, (int)n);
	cr_assert_gt(len, 5);
	SSL_free(s);
	SSL_CTX_free(ctx);
	return (size_t)len;
}

/* CONNECT to u on the open client C and wait for the 200. */
static void
px_connect_on(const struct dt_upstream *u)
{
	char req[256];
	int i;

	(void)snprintf(req, sizeof(req), "CONNECT %s HTTP/1.1\r\n\r\n",
	    u->authority);
	px_write(&C, req);
	for (i = 0; i < DT_ITERS && strstr(C.out, "\r\n\r\n") == NULL; i++) {
		px_read(&C);
		dt_step(C.p.fd);
	}
	cr_assert_str_eq(C.out, "HTTP/1.1 200 Connection established\r\n\r\n");
}

/* CONNECT to u on a new client C of "app" and wait for the 200. */
static void
px_tunnel_open(struct dt_upstream *u)
{
	px_open(&C, "app");
	px_connect_on(u);
}

/* Send the n bytes of hello in the tunnel and run the loop until the
 * upstream read all of them. */
static void
px_hello_on(struct dt_upstream *u, const unsigned char *hello, size_t n)
{
	int i;

	dt_write_all(C.p.fd, hello, n);
	for (i = 0; i < DT_ITERS && u->reqlen < n; i++) {
		dt_upstream_read(u);
		dt_step(u->cfd >= 0 ? u->cfd : u->lfd);
	}
	cr_assert_eq(u->reqlen, n, "the upstream got %zu of %zu bytes",
	    u->reqlen, n);
	cr_assert(memcmp(u->req, hello, n) == 0);
}

/* Open a tls-tunnel to a fresh u: CONNECT, the 200, a ClientHello for
 * its name, and the loop run until the upstream read all of it. */
static void
px_tunnel_hello(struct dt_upstream *u)
{
	static unsigned char hello[4096];
	size_t n = client_hello(hello, sizeof(hello));

	dt_upstream_open(u);
	px_tunnel_open(u);
	px_hello_on(u, hello, n);
}

Test(proxy, connect_to_an_ip_literal_relays_a_hello_without_sni)
{
	struct dt_upstream u;
	int i;

	px_tunnel_hello(&u);
	cr_assert_str_eq(dt_log_last("egress.decision", "transport"),
	    "tls-tunnel");
	cr_assert_str_eq(dt_log_last("egress.decision", "verdict"), "allow");
	/* And back. */
	dt_upstream_reply(&u, "pong");
	for (i = 0; i < DT_ITERS && strstr(C.out, "pong") == NULL; i++) {
		px_read(&C);
		dt_step(C.p.fd);
	}
	cr_assert(strstr(C.out, "\r\n\r\npong") != NULL, "%s", C.out);
	/* The client half-closes: the upstream sees the end, and its
	 * answer still comes back. */
	cr_assert_eq(shutdown(C.p.fd, SHUT_WR), 0);
	for (i = 0; i < DT_ITERS && !u.eof; i++) {
		dt_upstream_read(&u);
		dt_step(u.cfd);
	}
	cr_assert(u.eof, "the upstream was not half-closed");
	dt_upstream_reply(&u, "late");
	for (i = 0; i < DT_ITERS && strstr(C.out, "late") == NULL; i++) {
		px_read(&C);
		dt_step(C.p.fd);
	}
	cr_assert(strstr(C.out, "pponglate") == NULL &&
		strstr(C.out, "ponglate") != NULL,
	    "%s", C.out);
	/* The upstream closes: the tunnel ends, logged once. */
	dt_upstream_close(&u);
	px_wait(&C, 0, NULL, NULL);
	cr_assert_eq(dt_log_count("egress.close"), 1);
	cr_assert_str_eq(dt_log_last("egress.close", "connected"),
	    "127.0.0.1");
}

Test(proxy, http10_client_gets_a_body_delimited_by_close)
{
	struct dt_upstream u;
	char req[256];
	const char *body;

	dt_upstream_open(&u);
	px_open(&C, "app");
	(void)snprintf(req, sizeof(req), "GET http://%s/ HTTP/1.0\r\n\r\n",
	    u.authority);
	px_write(&C, req);
	px_wait(&C, 0, &u,
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "4\r\nwxyz\r\n0\r\n\r\n");
	cr_assert(strncmp(C.out, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", C.out);
	cr_assert(strstr(C.out, "Transfer-Encoding") == NULL, "%s", C.out);
	cr_assert(strstr(C.out, "Connection: close\r\n") != NULL, "%s", C.out);
	body = strstr(C.out, "\r\n\r\n");
	cr_assert(body != NULL);
	cr_assert_str_eq(body + 4, "wxyz");
	dt_upstream_close(&u);
}

Test(proxy, connect_over_the_budget_is_429)
{
	static struct px_client held[4];
	struct dt_upstream u;
	char req[256];
	size_t k;
	int i;

	/* The unit configuration allows 4 connections per instance; each
	 * tunnel holds one from its 200 on. */
	dt_upstream_open(&u);
	(void)snprintf(req, sizeof(req), "CONNECT %s HTTP/1.1\r\n\r\n",
	    u.authority);
	for (k = 0; k < 4; k++) {
		px_open(&held[k], "app");
		px_write(&held[k], req);
		for (i = 0;
		     i < DT_ITERS && strstr(held[k].out, "\r\n\r\n") == NULL;
		     i++) {
			px_read(&held[k]);
			dt_step(held[k].p.fd);
		}
		cr_assert(strncmp(held[k].out, "HTTP/1.1 200 ", 13) == 0,
		    "tunnel %zu: %s", k, held[k].out);
	}
	px_open(&C, "app");
	px_write(&C, req);
	px_wait(&C, 0, NULL, NULL);
	cr_assert(strncmp(C.out, "HTTP/1.1 429 ", 13) == 0, "%s", C.out);
	cr_assert(strstr(C.out, "\r\nRetry-After: 1\r\n") != NULL, "%s",
	    C.out);
	cr_assert_str_eq(dt_log_last("egress.decision", "reason"),
	    "budget-exhausted");
	for (k = 0; k < 4; k++)
		dt_peer_close(&held[k].p);
	dt_upstream_close(&u);
}

/* ---- isolation: what a caller without the token can hold ---------------- */

/* Open a port connection of instance (PROXY_AUTH), as proxy_port.c does.
 * Return proxy_accept()'s answer; c->p.fd is the client's end. */
static int
px_port_open(struct px_client *c, const char *instance)
{
	int sv[2];

	memset(c, 0, sizeof(*c));
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
	    0);
	cr_assert_eq(evutil_make_socket_nonblocking(sv[0]), 0);
	cr_assert_eq(evutil_make_socket_nonblocking(sv[1]), 0);
	c->p.fd = sv[1];
	return proxy_accept(&dt_b, sv[0], instance, NULL, PROXY_AUTH);
}

/* Bytes from a port caller without the token are not activity: they
 * never keep the adaptive poll spinning. */
Test(proxy, unauthenticated_bytes_are_not_activity)
{
	unsigned long before;

	cr_assert_eq(px_port_open(&C, "app"), 0);
	before = dt_b.activity;
	px_write(&C, "GET http://127.0.0.1/ HTTP/1.1\r\n\r\n");
	px_wait(&C, 0, NULL, NULL);
	cr_assert(strncmp(C.out, "HTTP/1.1 407 ", 13) == 0, "%s", C.out);
	cr_assert_eq(dt_b.activity, before, "%lu activities counted",
	    dt_b.activity - before);
	dt_peer_close(&C.p);
}

/* Idle port connections without the token take none of the instance's
 * sessions: past a few they are refused, and the instance's own socket
 * keeps serving. */
Test(proxy, idle_port_connections_do_not_lock_out_the_instance)
{
	static struct px_client idle[SESSIONS_PER_INSTANCE + 2];
	struct dt_upstream u;
	char req[256];
	size_t k, open = 0;

	for (k = 0; k < sizeof(idle) / sizeof(idle[0]); k++)
		if (px_port_open(&idle[k], "app") == 0)
			open++;
	cr_assert_eq(open, PROXY_PREAUTH_MAX);
	cr_assert_str_eq(dt_log_last("egress.session", "cap"),
	    "proxy_preauth_max");
	dt_upstream_open(&u);
	px_open(&C, "app");
	(void)snprintf(req, sizeof(req),
	    "GET http://%s/ HTTP/1.1\r\nConnection: close\r\n\r\n",
	    u.authority);
	px_write(&C, req);
	px_wait(&C, 0, &u, reply_small);
	cr_assert(strncmp(C.out, "HTTP/1.1 200 ", 13) == 0, "%s", C.out);
	for (k = 0; k < sizeof(idle) / sizeof(idle[0]); k++)
		dt_peer_close(&idle[k].p);
	dt_upstream_close(&u);
}

/* A head sent a byte at a time never completes: the connection is
 * answered 408 and closed at the head deadline, however often a byte
 * arrives (on a port and on the instance socket alike). */
Test(proxy, slow_head_is_cut_at_its_deadline)
{
	static const char slow[] = "GET http://127.0.0.1/ HTTP/1.1\r\nX-A: ";
	size_t way, k;
	int i;

	dt_b.proxy_head_ms = 200;
	for (way = 0; way < 2; way++) {
		if (way == 0)
			cr_assert_eq(px_port_open(&C, "app"), 0);
		else
			px_open(&C, "app");
		px_write(&C, slow);
		for (i = 0, k = 0; i < DT_ITERS && !C.eof; i++, k++) {
			if (k % 4 == 0)
				(void)write(C.p.fd, "a", 1); /* a byte */
			px_read(&C);
			dt_step(C.p.fd);
		}
		cr_assert(C.eof, "way %zu: still open: %s", way, C.out);
		cr_assert(strncmp(C.out, "HTTP/1.1 408 ", 13) == 0,
		    "way %zu: %s", way, C.out);
		cr_assert_str_eq(dt_log_last("egress.proxy", "error"),
		    "timeout");
		dt_peer_close(&C.p);
	}
}

/* A request's trailers are its own: another connection's head, parsed
 * while its body is open, does not change how its trailers parse. */
Test(proxy, trailers_do_not_share_state_across_connections)
{
	static struct px_client a;
	struct dt_upstream u;
	char req[512], big[4096];
	size_t off;
	int i;

	dt_upstream_open(&u);
	px_open(&C, "app");
	(void)snprintf(req, sizeof(req),
	    "POST http://%s/b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
	    "Connection: close\r\n\r\n3\r\nabc\r\n",
	    u.authority);
	px_write(&C, req);
	for (i = 0; i < DT_ITERS && strstr(u.req, "abc") == NULL; i++) {
		dt_upstream_read(&u);
		dt_step(u.cfd >= 0 ? u.cfd : u.lfd);
	}
	cr_assert(strstr(u.req, "abc") != NULL, "%s", u.req);
	/* Another connection's head with the most headers allowed. */
	off = (size_t)snprintf(big, sizeof(big),
	    "GET http://127.0.0.1:9/ HTTP/1.1\r\n");
	for (i = 0; i < HTTP1_REQ_HEADERS_MAX; i++)
		off += (size_t)snprintf(big + off, sizeof(big) - off,
		    "X-%d: 1\r\n", i);
	(void)snprintf(big + off, sizeof(big) - off, "\r\n");
	px_open(&a, "app");
	px_write(&a, big);
	px_wait(&a, 1, NULL, NULL);
	/* The first request's trailers now. */
	px_write(&C, "0\r\nX-Trailer: 1\r\n\r\n");
	for (i = 0;
	     i < DT_ITERS && strstr(u.req, "0\r\n\r\n") == NULL && !C.eof;
	     i++) {
		dt_upstream_read(&u);
		px_read(&C);
		dt_step(u.cfd);
	}
	cr_assert(strstr(u.req, "0\r\n\r\n") != NULL,
	    "the body did not end upstream: %s; client: %s", u.req, C.out);
	dt_upstream_reply(&u, reply_small);
	px_wait(&C, 0, NULL, NULL);
	cr_assert(strncmp(C.out, "HTTP/1.1 200 ", 13) == 0, "%s", C.out);
	dt_peer_close(&a.p);
	dt_upstream_close(&u);
}

/* With the configuration broken, a port answers a caller with any
 * Proxy-Authorization exactly as one without: 407, nothing revealed. */
Test(proxy, broken_configuration_is_not_revealed_before_auth)
{
	static const char *reqs[] = {
		"GET http://127.0.0.1/ HTTP/1.1\r\n\r\n",
		"GET http://127.0.0.1/ HTTP/1.1\r\n"
		"Proxy-Authorization: Basic dXNlcjpzZWNyZXQ=\r\n\r\n",
	};
	static char first[sizeof(C.out)];
	size_t k;

	dt_break_conf();
	for (k = 0; k < 2; k++) {
		cr_assert_eq(px_port_open(&C, "app"), 0);
		px_write(&C, reqs[k]);
		px_wait(&C, 0, NULL, NULL);
		cr_assert(strncmp(C.out, "HTTP/1.1 407 ", 13) == 0, "%s",
		    C.out);
		if (k == 0)
			memcpy(first, C.out, C.len + 1);
		else
			cr_assert_str_eq(C.out, first);
		dt_peer_close(&C.p);
	}
}

/* A flood of callers without the token is logged at once for the first,
 * then as one event counting the rest. */
Test(proxy, unauthenticated_refusals_are_aggregated)
{
	json_t *ev;
	size_t k;
	int i;

	for (k = 0; k < 5; k++) {
		cr_assert_eq(px_port_open(&C, "app"), 0);
		px_write(&C, "GET http://127.0.0.1/ HTTP/1.1\r\n\r\n");
		px_wait(&C, 0, NULL, NULL);
		dt_peer_close(&C.p);
	}
	cr_assert_eq(dt_log_count("egress.proxy"), 1);
	for (i = 0; i < 2 * DT_ITERS && dt_log_count("egress.proxy") < 2; i++)
		dt_step(-1);
	cr_assert_eq(dt_log_count("egress.proxy"), 2);
	ev = dt_log_events("egress.proxy");
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(ev, 1),
			 "refused")),
	    4);
	json_decref(ev);
}

/* ---- CONNECT: one idle timer for both ways ------------------------------ */

/* The unit configuration with a [limits] section of text. */
static void
px_conf_limits(const char *limits)
{
	char text[1024];

	(void)snprintf(text, sizeof(text),
	    "[plugins.security]\nsignature_mode = disabled\n"
	    "[plugins.entries.app]\nplugin = unit\nmanifest = manifest.ini\n"
	    "permissions = http_client\negress_hosts = 127.0.0.1\n"
	    "egress_allow_loopback = 127.0.0.1\n"
	    "[broker]\ninstance_socket_dir = %s/run\n"
	    "control_socket = %s/control.sock\n"
	    "[resolver]\nservers = 127.0.0.1:9\n"
	    "[limits]\n%s",
	    ct_dir, ct_dir, limits);
	ct_write_str("egressd.ini", text);
}

static uint64_t
px_now_ms(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The upstream streams to a client that sends nothing: the tunnel stays
 * up for many idle periods, and ends only once neither way moved a byte
 * for one. */
Test(proxy, tunnel_stays_while_only_the_upstream_sends)
{
	struct dt_upstream u;
	size_t got;
	uint64_t t0, next;

	px_conf_limits("between_bytes_timeout_ms = 300\n");
	px_tunnel_hello(&u);
	got = C.len;
	/* Five idle periods of upstream bytes, one every 50 ms. */
	t0 = px_now_ms();
	for (next = t0; px_now_ms() - t0 < 1500 && !C.eof;) {
		if (px_now_ms() >= next) {
			dt_upstream_reply(&u, "x");
			next += 50;
		}
		px_read(&C);
		dt_step(C.p.fd);
	}
	cr_assert(!C.eof, "the tunnel ended while the upstream sent: %s",
	    C.out + got);
	cr_assert_gt(C.len - got, 0);
	/* Now quiet both ways: it ends, logged as a timeout, and the
	 * upstream is reset (never a clean end of file). */
	px_wait(&C, 0, NULL, NULL);
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "timeout");
	cr_assert_eq(dt_log_count("egress.decision"), 1);
	dt_upstream_expect_reset(&u);
	dt_upstream_close(&u);
}

/* A client that resets its tunnel (it closes with bytes it never read:
 * a reset on a Unix socket too) cancels it, and the upstream gets a
 * reset, never an end of file that would pass what it received so far
 * for the whole of it. A client's clean end is a half-close instead
 * (tunnel_half_close below). */
Test(proxy, tunnel_client_reset_resets_upstream)
{
	struct dt_upstream u;
	int i;

	px_tunnel_hello(&u);
	/* Bytes for the client, which leaves without reading them. */
	dt_upstream_reply(&u, "unread");
	for (i = 0; i < DT_ITERS; i++) {
		int avail = 0;

		cr_assert_eq(ioctl(C.p.fd, FIONREAD, &avail), 0);
		if (avail > 0)
			break;
		dt_step(u.cfd);
	}
	dt_peer_close(&C.p);
	dt_upstream_expect_reset(&u);
	for (i = 0; i < DT_ITERS && dt_log_count("egress.close") == 0; i++)
		dt_step(-1);
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "cancelled");
	cr_assert_str_eq(dt_log_last("egress.decision", "transport"),
	    "tls-tunnel");
	dt_upstream_close(&u);
}

/* An upstream that resets a relaying tunnel, before or after its own end
 * of file: the client's connection ends and the close says the
 * upstream failed (upstream-protocol-error, as for a tcp stream), not
 * that it could not be reached. */
struct up_reset_case {
	char name[32];
	int fin_first; /* the upstream half-closes, then resets */
};

static struct up_reset_case up_reset_cases[] = {
	{ "reset while relaying", 0 },
	{ "reset after its end of file", 1 },
};

ParameterizedTestParameters(proxy, tunnel_upstream_reset_is_an_upstream_error)
{
	return cr_make_param_array(struct up_reset_case, up_reset_cases,
	    sizeof(up_reset_cases) / sizeof(up_reset_cases[0]));
}

ParameterizedTest(struct up_reset_case *c, proxy,
    tunnel_upstream_reset_is_an_upstream_error)
{
	struct dt_upstream u;
	struct linger lg = { 1, 0 };
	int i;

	px_tunnel_hello(&u);
	if (c->fin_first) {
		(void)shutdown(u.cfd, SHUT_WR);
		for (i = 0; i < DT_ITERS && !C.eof; i++) {
			px_read(&C);
			dt_step(C.p.fd);
		}
		cr_assert(C.eof, "the upstream's end was not passed on");
		cr_assert_eq(dt_log_count("egress.close"), 0, "%s", c->name);
		C.eof = 0;
		u.reqlen = 0;
		px_write(&C, "still sending");
		for (i = 0; i < DT_ITERS && u.reqlen < 13; i++) {
			dt_upstream_read(&u);
			dt_step(u.cfd);
		}
		cr_assert_eq(u.reqlen, 13, "the tunnel stopped relaying");
	}
	cr_assert_eq(setsockopt(u.cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)),
	    0);
	(void)close(u.cfd);
	u.cfd = -1;
	if (c->fin_first)
		px_write(&C, "into a reset upstream");
	px_wait(&C, 0, NULL, NULL);
	for (i = 0; i < DT_ITERS && dt_log_count("egress.close") == 0; i++)
		dt_step(-1);
	cr_assert_str_eq(dt_log_last("egress.close", "error"),
	    "upstream-protocol-error", "%s", c->name);
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	dt_upstream_close(&u);
}

/* The client ends its side of a tunnel cleanly (shutdown): the upstream
 * reads what it sent, then end of file, and still answers; the tunnel
 * ends cleanly once the upstream ends too. */
Test(proxy, tunnel_half_close)
{
	static unsigned char hello[4096];
	struct dt_upstream u;
	size_t n = client_hello(hello, sizeof(hello));

	dt_upstream_open(&u);
	px_tunnel_open(&u);
	dt_write_all(C.p.fd, hello, n);
	cr_assert_eq(shutdown(C.p.fd, SHUT_WR), 0);
	dt_upstream_wait_eof(&u);
	cr_assert_eq(u.reqlen, n);
	dt_upstream_reply(&u, "answer");
	(void)shutdown(u.cfd, SHUT_WR);
	px_wait(&C, 0, NULL, NULL);
	cr_assert(strstr(C.out, "\r\n\r\nanswer") != NULL, "client read: %s",
	    C.out);
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "null");
	dt_upstream_close(&u);
}

/* The upstream ends its side first (a banner, then its end of file): the
 * client reads the banner, then end of file, and may still send; what it
 * sends reaches the upstream, then its own end. Both ended: clean. */
Test(proxy, tunnel_upstream_half_close)
{
	struct dt_upstream u;
	int i;

	px_tunnel_hello(&u);
	dt_upstream_reply(&u, "banner");
	(void)shutdown(u.cfd, SHUT_WR);
	px_wait(&C, 0, NULL, NULL);
	cr_assert(strstr(C.out, "\r\n\r\nbanner") != NULL, "client read: %s",
	    C.out);
	cr_assert_eq(dt_log_count("egress.close"), 0, "closed half-way");
	u.reqlen = 0;
	px_write(&C, "more");
	cr_assert_eq(shutdown(C.p.fd, SHUT_WR), 0);
	dt_upstream_wait_eof(&u);
	cr_assert_str_eq(u.req, "more");
	for (i = 0; i < DT_ITERS && dt_log_count("egress.close") == 0; i++)
		dt_step(-1);
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "null");
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	dt_upstream_close(&u);
}

/* The client sends its last bytes and closes while the upstream still
 * sends: the broker's write to it fails before it read those bytes. They
 * still reach the upstream, then end of file (the client's whole stream
 * went through); the close is "cancelled" (the upstream's bytes after
 * the client left were lost). */
Test(proxy, tunnel_client_gone_still_delivers_what_it_sent)
{
	static char big[64 * 1024], buf[64 * 1024];
	struct dt_upstream u;
	size_t got = 0;
	ssize_t k = -1;
	int i;

	memset(big, 'g', sizeof(big));
	px_tunnel_hello(&u);
	dt_upstream_reply(&u, "x");
	dt_write_all(C.p.fd, big, sizeof(big));
	dt_peer_close(&C.p);
	for (i = 0; i < 4 * DT_ITERS; i++) {
		k = read(u.cfd, buf, sizeof(buf));
		if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
			break;
		if (k > 0)
			got += (size_t)k;
		dt_step(u.cfd);
	}
	cr_assert_eq(k, 0, "no end of file upstream (%s)",
	    k < 0 ? strerror(errno) : "open");
	cr_assert_eq(got, sizeof(big), "the upstream got %zu of %zu bytes",
	    got, sizeof(big));
	for (i = 0; i < DT_ITERS && dt_log_count("egress.close") == 0; i++)
		dt_step(-1);
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "cancelled");
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	dt_upstream_close(&u);
}

/* A client on TCP (as on a proxy port), its tunnel relaying to u. */
static void
px_tcp_tunnel(struct dt_upstream *u)
{
	static unsigned char hello[4096];
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	size_t n = client_hello(hello, sizeof(hello));
	int lfd, sfd;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(lfd, 0);
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	cr_assert_eq(listen(lfd, 1), 0);
	cr_assert_eq(getsockname(lfd, (struct sockaddr *)&sin, &sl), 0);
	memset(&C, 0, sizeof(C));
	C.p.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(connect(C.p.fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	sfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	cr_assert_geq(sfd, 0);
	(void)close(lfd);
	cr_assert_eq(evutil_make_socket_nonblocking(C.p.fd), 0);
	cr_assert_eq(session_accept(&dt_b, sfd, "app"), 0);
	dt_upstream_open(u);
	px_connect_on(u);
	px_hello_on(u, hello, n);
}

/* The TCP client aborts (a reset): the tunnel is cancelled, its lease
 * freed, and the upstream gets a reset, never a clean end. */
static void
px_tcp_client_resets(struct dt_upstream *u)
{
	struct linger lg = { 1, 0 };
	int i;

	cr_assert_eq(setsockopt(C.p.fd, SOL_SOCKET, SO_LINGER, &lg,
			 sizeof(lg)),
	    0);
	dt_peer_close(&C.p);
	dt_upstream_expect_reset(u);
	for (i = 0; i < DT_ITERS && dt_log_count("egress.close") == 0; i++)
		dt_step(-1);
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "cancelled");
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	dt_upstream_close(u);
}

/* A TCP client (as on a proxy port) aborts with a reset in the middle of
 * its upload while the broker still has bytes queued for it: the
 * broker's write sees the reset first, which uses up the socket's error,
 * and its reads then end in what looks like an end of file. That is
 * still a cut: the upstream gets a reset, never a clean end. */
Test(proxy, tunnel_tcp_client_reset_while_written_resets_upstream)
{
	static char chunk[65536];
	struct dt_upstream u;
	int i, stuck;

	memset(chunk, 'd', sizeof(chunk));
	px_tcp_tunnel(&u);
	/* The upstream streams to a client that reads nothing, until it can
	 * write no more for 20 turns: the broker then holds bytes for the
	 * client it cannot write (it stops reading the upstream only with
	 * TUNNEL_HIGH queued). */
	for (i = 0, stuck = 0; i < DT_ITERS && stuck < 20; i++) {
		ssize_t k;
		size_t moved = 0;

		while ((k = write(u.cfd, chunk, sizeof(chunk))) > 0)
			moved += (size_t)k;
		stuck = moved == 0 ? stuck + 1 : 0;
		dt_step(-1);
	}
	cr_assert_eq(stuck, 20);
	dt_write_all(C.p.fd, "half an upl", 11);
	px_tcp_client_resets(&u);
}

/* The same reset met by the broker's write of upstream bytes that nothing
 * was queued before (written at once, not through the bufferevent): that
 * write uses up the socket's error, so it must end the tunnel as a cut
 * itself; taken for a client that merely left, the client's next read
 * would end in a false end of file, passed upstream as a clean end. */
Test(proxy, tunnel_tcp_client_reset_met_by_a_direct_write_resets_upstream)
{
	struct dt_upstream u;

	/* epoll reports the upstream (readable first) before the client in
	 * one batch: the relay's write to the client then meets the reset. */
	cr_assert_eq(strncmp(event_base_get_method(dt_b.base), "epoll", 5), 0);

	px_tcp_tunnel(&u);
	dt_upstream_reply(&u, "late"); /* readable before the reset */
	px_tcp_client_resets(&u);
}

/* The port whose connections' writes fail with ECONNRESET (0: none),
 * every write or (px_reset_once) only the next. */
static uint16_t px_reset_port;
static int px_reset_once;

/* The broker's writev(), failing as a reset for connections to
 * px_reset_port. */
ssize_t
writev(int fd, const struct iovec *iov, int iovcnt)
{
	struct sockaddr_in sin = { 0 };
	socklen_t sl = sizeof(sin);

	if (px_reset_port != 0 &&
	    getpeername(fd, (struct sockaddr *)&sin, &sl) == 0 &&
	    sin.sin_family == AF_INET &&
	    ntohs(sin.sin_port) == px_reset_port) {
		if (px_reset_once)
			px_reset_port = 0;
		errno = ECONNRESET;
		return -1;
	}
	return (ssize_t)syscall(SYS_writev, fd, iov, iovcnt);
}

/*
 * The relay's write to the client, made at once, fails with a reset
 * (only that write: the socket itself stays fine, so the bufferevent's
 * own later write would succeed): the failed write alone must end the
 * tunnel as a cut, the upstream reset, never left for the bufferevent.
 */
Test(proxy, tunnel_direct_write_reset_to_the_client_is_a_cut)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	struct dt_upstream u;
	int i;

	px_tcp_tunnel(&u);
	cr_assert_eq(getsockname(C.p.fd, (struct sockaddr *)&sin, &sl), 0);
	px_reset_once = 1;
	px_reset_port = ntohs(sin.sin_port);
	dt_upstream_reply(&u, "late");
	dt_upstream_expect_reset(&u);
	for (i = 0; i < DT_ITERS && dt_log_count("egress.close") == 0; i++)
		dt_step(-1);
	cr_assert_eq(px_reset_port, 0, "the relay never wrote to the client");
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "cancelled");
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	dt_upstream_close(&u);
}

/* The destination resets between the connect and the relay's first
 * write (the bytes peeked at, written at once): the tunnel ends as an
 * upstream failure, the client's connection closes, the lease is freed,
 * and nothing touches the upstream connection after it was closed. */
Test(proxy, tunnel_upstream_reset_before_the_first_write)
{
	static unsigned char hello[4096];
	size_t n = client_hello(hello, sizeof(hello));
	struct dt_upstream u;
	int i;

	dt_upstream_open(&u);
	px_tunnel_open(&u);
	px_reset_port = u.port;
	dt_write_all(C.p.fd, hello, n);
	for (i = 0; i < DT_ITERS && dt_log_count("egress.close") == 0; i++) {
		dt_upstream_read(&u);
		dt_step(-1);
	}
	px_reset_port = 0;
	cr_assert_eq(u.reqlen, 0, "bytes reached the upstream");
	cr_assert_str_eq(dt_log_last("egress.close", "error"),
	    "upstream-protocol-error");
	px_wait(&C, 0, NULL, NULL);
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	dt_upstream_close(&u);
}

/* A tunnel closed by the broker before its end, because its instance
 * was removed or its grant revoked: the upstream gets a reset. */
struct tunnel_cut {
	char name[16];
	int removed; /* proxy_revoke_instance(); else a reload */
	char error[16];
};

ParameterizedTestParameters(proxy, tunnel_revoked_resets_upstream)
{
	static struct tunnel_cut cases[] = {
		{ "removed", 1, "cancelled" },
		{ "not-granted", 0, "revoked" },
	};

	return cr_make_param_array(struct tunnel_cut, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct tunnel_cut *c, proxy, tunnel_revoked_resets_upstream)
{
	struct dt_upstream u;
	char text[1024];
	int i;

	px_tunnel_hello(&u);
	if (c->removed)
		proxy_revoke_instance(&dt_b, "app");
	else {
		(void)snprintf(text, sizeof(text),
		    "[plugins.security]\nsignature_mode = disabled\n"
		    "[plugins.entries.app]\nplugin = unit\n"
		    "manifest = manifest.ini\npermissions = http_client\n"
		    "egress_hosts = example.org\n"
		    "[broker]\ninstance_socket_dir = %s/run\n"
		    "control_socket = %s/control.sock\n"
		    "[resolver]\nservers = 127.0.0.1:9\n",
		    ct_dir, ct_dir);
		ct_write_str("egressd.ini", text);
		confstate_reload(&dt_b.conf);
		cr_assert(confstate_is_valid(&dt_b.conf));
		cr_assert_eq(proxy_revoke_tunnels(&dt_b, dt_b.conf.cur->snap),
		    1);
	}
	dt_upstream_expect_reset(&u);
	for (i = 0; i < DT_ITERS && dt_log_count("egress.close") == 0; i++)
		dt_step(-1);
	cr_assert_str_eq(dt_log_last("egress.close", "error"), c->error, "%s",
	    c->name);
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	dt_upstream_close(&u);
}

/* A tunnel allowed at its 200 whose client never sends a first byte ends
 * at the connect deadline: one decision (deny, timeout), one close. */
Test(proxy, tunnel_without_first_bytes_is_a_timeout)
{
	struct dt_upstream u;

	px_conf_limits("connect_timeout_ms = 200\n");
	dt_upstream_open(&u);
	px_tunnel_open(&u);
	px_wait(&C, 0, NULL, NULL);
	cr_assert_eq(dt_log_count("egress.decision"), 1);
	cr_assert_str_eq(dt_log_last("egress.decision", "reason"), "timeout");
	cr_assert_eq(dt_log_count("egress.close"), 1);
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "timeout");
	dt_upstream_close(&u);
}

/* A method http-parser does not know is 405 (with Allow), as every other
 * method not relayed, not 400. */
Test(proxy, unknown_method_is_405)
{
	px_open(&C, "app");
	px_write(&C, "BREW http://127.0.0.1/pot HTTP/1.1\r\n\r\n");
	px_wait(&C, 0, NULL, NULL);
	cr_assert(strncmp(C.out, "HTTP/1.1 405 ", 13) == 0, "%s", C.out);
	cr_assert(strstr(C.out, "\r\nAllow: ") != NULL, "%s", C.out);
	cr_assert_str_eq(dt_log_last("egress.proxy", "error"), "method");
}

/* The bytes of one complete answer at the start of c->out. */
static size_t
px_answer_len(const struct px_client *c)
{
	const char *end = strstr(c->out, "\r\n\r\n");
	const char *cl = strstr(c->out, "\r\nContent-Length: ");

	cr_assert(end != NULL && cl != NULL && cl < end, "%s", c->out);
	return (size_t)(end - c->out) + 4 + strtoul(cl + 18, NULL, 10);
}

/* Write what the broker takes of buf[*off..n) now; return whether it
 * took any. */
static int
px_write_some(int fd, const char *buf, size_t n, size_t *off)
{
	ssize_t k = *off < n ? write(fd, buf + *off, n - *off) : -1;

	if (k <= 0)
		return 0;
	*off += (size_t)k;
	return 1;
}

/* One request the front refuses itself (a metadata address). */
static const char px_refused[] =
    "GET http://169.254.169.254/x HTTP/1.1\r\n\r\n";

/* n copies of px_refused in one buffer (caller frees); its size in
 * *ret_total. */
static char *
px_refused_pipeline(size_t n, size_t *ret_total)
{
	const size_t rl = sizeof(px_refused) - 1;
	char *reqs = malloc(n * rl);
	size_t i;

	cr_assert(reqs != NULL);
	for (i = 0; i < n; i++)
		memcpy(reqs + i * rl, px_refused, rl);
	*ret_total = n * rl;
	return reqs;
}

/* A client that pipelines requests the front answers itself (refusals)
 * and reads none of the answers does not make them pile up in the
 * broker: once what waits for it passes PROXY_OUT_LOW no further head
 * is read (so the client's writes stop), and what it sent is all
 * answered, in order, once it reads, also after a half-close. */
Test(proxy, unread_answers_hold_the_next_request, .timeout = 60)
{
	enum { N = 20000 };
	size_t total, off = 0, ans, got = 0, made;
	char *reqs = px_refused_pipeline(N, &total), *buf = malloc(1 << 16);
	int i, idle, avail = 0, shut = 0;
	ssize_t k;

	cr_assert(buf != NULL);
	px_open(&C, "app");
	px_write(&C, px_refused);
	px_wait(&C, 1, NULL, NULL);
	cr_assert(strncmp(C.out, "HTTP/1.1 403 ", 13) == 0, "%s", C.out);
	ans = px_answer_len(&C);
	cr_assert_eq(C.len, ans, "%s", C.out);

	/* Send, read nothing, until the broker takes no more. */
	for (i = idle = 0; i < 20 * DT_ITERS && idle < 40; i++) {
		idle = px_write_some(C.p.fd, reqs, total, &off) ? 0 : idle + 1;
		dt_step(-1);
	}
	cr_assert_lt(off, total, "the broker read every request unanswered");
	cr_assert_eq(ioctl(C.p.fd, FIONREAD, &avail), 0);
	made = (size_t)(dt_log_count("egress.decision") - 1) * ans;
	cr_assert_leq(made - (size_t)avail, PROXY_OUT_LOW + ans,
	    "%zu bytes of answers wait in the broker", made - (size_t)avail);

	/* Read; the rest is sent, then the end: every request answered. */
	for (i = idle = 0; i < 20 * DT_ITERS && idle < 400; i++) {
		int moved = px_write_some(C.p.fd, reqs, total, &off);

		if (off == total && !shut)
			shut = shutdown(C.p.fd, SHUT_WR) == 0;
		while ((k = read(C.p.fd, buf, 1 << 16)) > 0) {
			got += (size_t)k;
			moved = 1;
		}
		if (k == 0)
			break; /* the end */
		idle = moved ? 0 : idle + 1;
		dt_step(C.p.fd);
	}
	cr_assert_eq(k, 0, "no end after %zu of %zu answer bytes", got,
	    (size_t)N * ans);
	cr_assert_eq(got, (size_t)N * ans);
	cr_assert_eq(dt_log_count("egress.decision"), N + 1);
	free(reqs);
	free(buf);
}

/* Requests pipelined behind one that waits for its upstream, more than
 * the front reads ahead, do not keep the loop busy: with its input full
 * and nothing it may read, the front's read callback is not run again
 * and again (each run counts as the broker's activity; a spin ran it
 * millions of times until the upstream's first-byte timeout). */
Test(proxy, a_full_read_ahead_behind_a_waiting_request_is_idle, .timeout = 60)
{
	size_t total, off = 0;
	char *reqs = px_refused_pipeline(4000, &total), first[512];
	struct dt_upstream u;
	unsigned long a0;
	int i;

	dt_upstream_open(&u);
	px_open(&C, "app");
	(void)snprintf(first, sizeof(first),
	    "GET http://%s/slow HTTP/1.1\r\n\r\n", u.authority);
	px_write(&C, first);
	dt_upstream_wait_request(&u);
	a0 = dt_b.activity;
	for (i = 0; i < 200 && off < total; i++) {
		(void)px_write_some(C.p.fd, reqs, total, &off);
		dt_step(-1);
	}
	cr_assert_gt(off, 2 * HTTP1_HEAD_MAX, "only %zu bytes sent", off);
	for (i = 0; i < 100; i++)
		dt_step(-1);
	/* One run per read of the client's bytes, at most one a turn. */
	cr_assert_leq(dt_b.activity - a0, 300, "%lu runs in 300 loop turns",
	    dt_b.activity - a0);
	free(reqs);
	dt_upstream_close(&u);
}

/* Bytes that cannot start a request head are 400 at once, before any
 * more arrive, and the connection closes. */
Test(proxy, bytes_that_start_no_head_are_400_at_once)
{
	px_open(&C, "app");
	px_write(&C, "GET http://169.254.169.254/ HTTP/1.1\r\n\r\n\001");
	px_wait(&C, 0, NULL, NULL);
	cr_assert(strncmp(C.out, "HTTP/1.1 403 ", 13) == 0, "%s", C.out);
	cr_assert(strstr(C.out, "HTTP/1.1 400 ") != NULL, "%s", C.out);
	cr_assert_str_eq(dt_log_last("egress.proxy", "error"), "malformed");
}

/* Requests pipelined before the client half-closed are all answered, in
 * order, then the connection closes. */
Test(proxy, pipelined_requests_after_a_half_close_are_answered)
{
	struct dt_upstream u;
	char req[1024];
	const char *a, *b, *c;

	dt_upstream_open(&u);
	px_open(&C, "app");
	(void)snprintf(req, sizeof(req),
	    "GET http://%s/one HTTP/1.1\r\n\r\n"
	    "GET http://169.254.169.254/two HTTP/1.1\r\n\r\n"
	    "GET http://169.254.169.254/three HTTP/1.1\r\n\r\n",
	    u.authority);
	px_write(&C, req);
	cr_assert_eq(shutdown(C.p.fd, SHUT_WR), 0);
	px_wait(&C, 0, &u, reply_small); /* to the end */
	a = strstr(C.out, "HTTP/1.1 200 OK\r\n");
	b = strstr(C.out, "HTTP/1.1 403 Forbidden\r\n");
	c = b != NULL ? strstr(b + 1, "HTTP/1.1 403 Forbidden\r\n") : NULL;
	cr_assert(a != NULL && b != NULL && c != NULL && a < b, "%s", C.out);
	cr_assert_eq(dt_log_count("egress.decision"), 3);
	dt_upstream_close(&u);
}

/* A client that half-closes once its response is on the way (the request
 * over, part of the answer still queued in the broker because the client
 * has not read yet) still reads all of that answer, then the end. */
Test(proxy, a_half_close_never_cuts_a_queued_response)
{
	enum { BODY = 300 * 1024 };
	struct dt_upstream u;
	char req[512], head[128];
	char *reply;
	int avail = 0, i;
	size_t hl;

	dt_upstream_open(&u);
	px_open(&C, "app");
	(void)snprintf(req, sizeof(req), "GET http://%s/big HTTP/1.1\r\n\r\n",
	    u.authority);
	px_write(&C, req);
	dt_upstream_wait_request(&u);
	hl = (size_t)snprintf(head, sizeof(head),
	    "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", BODY);
	reply = malloc(hl + BODY + 1);
	cr_assert(reply != NULL);
	memcpy(reply, head, hl);
	memset(reply + hl, 'b', BODY);
	reply[hl + BODY] = '\0';
	dt_upstream_reply(&u, reply);
	free(reply);
	/* The exchange is over at the broker before the client reads. */
	for (i = 0; i < DT_ITERS && dt_log_count("egress.close") < 1; i++)
		dt_step(u.cfd);
	cr_assert_eq(dt_log_count("egress.close"), 1);
	cr_assert_eq(ioctl(C.p.fd, FIONREAD, &avail), 0);
	cr_assert_lt((size_t)avail, BODY, "the whole answer fit the socket");

	cr_assert_eq(shutdown(C.p.fd, SHUT_WR), 0);
	px_wait(&C, 0, NULL, NULL); /* to the end */
	cr_assert(strncmp(C.out, "HTTP/1.1 200 OK\r\n", 17) == 0, "%.64s",
	    C.out);
	hl = (size_t)(strstr(C.out, "\r\n\r\n") - C.out) + 4;
	cr_assert_eq(C.len - hl, BODY, "read %zu of %d body bytes", C.len - hl,
	    BODY);
	dt_upstream_close(&u);
}
