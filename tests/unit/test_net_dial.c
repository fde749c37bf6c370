/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/dial, on loopback only: a test CA and server
 * certificates are made with the openssl CLI at test time, and a TLS
 * server runs in this process on the same event loop, recording the SNI
 * it was sent. Covers dialing the pinned address whatever the host name
 * (the name is never resolved), SNI, certificate name and IP checks,
 * untrusted CAs, refused addresses with fallback to the next one, the
 * deadline, cancellation and argument checks.
 */
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "broker/net/dial.h"
#include "broker/net/http1.h"

static char dir[64];

static void
make_certs(void)
{
	char cmd[4096];

	/* A peer closing mid-handshake must not kill us (egressd ignores
	 * SIGPIPE too). */
	(void)signal(SIGPIPE, SIG_IGN);
	(void)snprintf(dir, sizeof(dir), "/tmp/egress-dial-XXXXXX");
	cr_assert(mkdtemp(dir) != NULL);
	(void)snprintf(cmd, sizeof(cmd),
	    "(set -e; cd %s; "
	    "gen() { openssl req -x509 -newkey ec "
	    "-pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $1.key "
	    "-out $1.pem -days 2 -subj /CN=$1 "
	    "-addext basicConstraints=critical,CA:TRUE "
	    "-addext keyUsage=critical,keyCertSign; }; "
	    "leaf() { openssl req -newkey ec "
	    "-pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $1.key "
	    "-out $1.csr -subj /CN=$1; "
	    "printf 'subjectAltName=%%s\\n' \"$2\" > $1.ext; "
	    "openssl x509 -req -in $1.csr -CA ca.pem -CAkey ca.key "
	    "-CAcreateserial -out $1.pem -days 2 -extfile $1.ext; }; "
	    "gen ca; gen otherca; "
	    "leaf name DNS:pinned.test; leaf ip IP:127.0.0.1; "
	    "leaf cn.test email:a@example.test) "
	    ">/dev/null 2>&1",
	    dir);
	// NOLINTNEXTLINE(cert-env33-c): the test runs its own shell command
	cr_assert_eq(system(cmd), 0, "openssl failed");
}

static void
rm_certs(void)
{
	char cmd[128];

	(void)snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	// NOLINTNEXTLINE(cert-env33-c): the test runs its own shell command
	(void)system(cmd);
}

TestSuite(broker_dial, .init = make_certs, .fini = rm_certs);

/* ---- in-process servers ----------------------------------------------- */

struct server {
	struct event_base *base;
	SSL_CTX *ctx; /* NULL: plain TCP, or silent if mute */
	int mute;     /* accept nothing, speak nothing */
	int lfd;
	uint16_t port;
	struct event *ev;
	struct bufferevent *conn;
	char sni[256];
	int accepted;
	const char *reply; /* sent once a request head arrived */
};

static int
sni_cb(SSL *ssl, int *al, void *arg)
{
	struct server *s = arg;
	const char *n = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);

	(void)snprintf(s->sni, sizeof(s->sni), "%s", n != NULL ? n : "");
	return SSL_TLSEXT_ERR_OK;
}

static void
server_read_cb(struct bufferevent *bev, void *arg)
{
	struct server *s = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_ptr p = evbuffer_search(in, "\r\n\r\n", 4, NULL);

	if (p.pos < 0)
		return;
	(void)evbuffer_drain(in, evbuffer_get_length(in));
	(void)bufferevent_write(bev, s->reply, strlen(s->reply));
}

static void
server_accept_cb(evutil_socket_t fd, short what, void *arg)
{
	struct server *s = arg;
	int c = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (c == -1)
		return;
	s->accepted++;
	if (s->conn != NULL)
		bufferevent_free(s->conn);
	if (s->ctx != NULL)
		s->conn = bufferevent_openssl_socket_new(s->base, c,
		    SSL_new(s->ctx), BUFFEREVENT_SSL_ACCEPTING,
		    BEV_OPT_CLOSE_ON_FREE);
	else
		s->conn = bufferevent_socket_new(s->base, c,
		    BEV_OPT_CLOSE_ON_FREE);
	cr_assert(s->conn != NULL);
	if (s->reply != NULL)
		bufferevent_setcb(s->conn, server_read_cb, NULL, NULL, s);
	(void)bufferevent_enable(s->conn, EV_READ | EV_WRITE);
}

static void
server_start(struct server *s, struct event_base *base, const char *cert,
    int mute)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	char crt[128], key[128];

	memset(s, 0, sizeof(*s));
	s->base = base;
	s->mute = mute;
	if (cert != NULL) {
		(void)snprintf(crt, sizeof(crt), "%s/%s.pem", dir, cert);
		(void)snprintf(key, sizeof(key), "%s/%s.key", dir, cert);
		s->ctx = SSL_CTX_new(TLS_server_method());
		cr_assert(s->ctx != NULL);
		cr_assert_eq(SSL_CTX_use_certificate_file(s->ctx, crt,
				 SSL_FILETYPE_PEM),
		    1);
		cr_assert_eq(SSL_CTX_use_PrivateKey_file(s->ctx, key,
				 SSL_FILETYPE_PEM),
		    1);
		SSL_CTX_set_tlsext_servername_callback(s->ctx, sni_cb);
		SSL_CTX_set_tlsext_servername_arg(s->ctx, s);
	}
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0);
	cr_assert(s->lfd >= 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(bind(s->lfd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	cr_assert(listen(s->lfd, 16) == 0);
	cr_assert(getsockname(s->lfd, (struct sockaddr *)&sin, &sl) == 0);
	s->port = ntohs(sin.sin_port);
	if (!mute) {
		s->ev = event_new(base, s->lfd, EV_READ | EV_PERSIST,
		    server_accept_cb, s);
		cr_assert(event_add(s->ev, NULL) == 0);
	}
}

static void
server_stop(struct server *s)
{
	if (s->conn != NULL)
		bufferevent_free(s->conn);
	if (s->ev != NULL)
		event_free(s->ev);
	close(s->lfd);
	SSL_CTX_free(s->ctx);
}

/* A loopback port with nothing listening (bound, then closed). */
static uint16_t
closed_port(void)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	cr_assert(getsockname(fd, (struct sockaddr *)&sin, &sl) == 0);
	close(fd);
	return ntohs(sin.sin_port);
}

/* ---- dial harness ----------------------------------------------------- */

struct outcome {
	int calls;
	int err;
	struct bufferevent *bev;
	char used[64];
};

static void
outcome_cb(void *arg, int err, struct bufferevent *bev,
    const struct policy_addr *used)
{
	struct outcome *o = arg;

	o->calls++;
	o->err = err;
	o->bev = bev;
	if (used != NULL)
		cr_assert_eq(policy_addr_format(used, o->used,
				 sizeof(o->used)),
		    0);
	cr_assert((err == 0) == (bev != NULL));
}

static struct dial_tls *
tls_with(const char *ca)
{
	struct dial_tls *t = NULL;
	char path[128];

	(void)snprintf(path, sizeof(path), "%s/%s.pem", dir, ca);
	cr_assert_eq(dial_tls_new(path, &t), 0);
	return t;
}

static void
host_of(const char *name, struct policy_host *h)
{
	struct policy_err e;

	cr_assert_eq(policy_host_parse(name, strlen(name), h, &e), 0);
}

static struct outcome
dial_run(struct event_base *base, struct dial_tls *t, const char *host,
    uint16_t port, const char *const *addrs, size_t n, int timeout_ms)
{
	struct policy_addr a[8];
	struct policy_host h;
	struct dial_params p;
	struct outcome o;
	size_t i;

	memset(&o, 0, sizeof(o));
	host_of(host, &h);
	for (i = 0; i < n; i++)
		cr_assert_eq(policy_addr_parse(addrs[i], &a[i]), 0);
	memset(&p, 0, sizeof(p));
	p.host = &h;
	p.port = port;
	p.addrs = a;
	p.naddrs = n;
	p.timeout_ms = timeout_ms;
	cr_assert_eq(dial_start(base, t, &p, outcome_cb, &o, NULL), 0);
	cr_assert_eq(o.calls, 0, "callback inside dial_start");
	while (o.calls == 0)
		cr_assert(event_base_loop(base, EVLOOP_ONCE) == 0);
	return o;
}

/* ---- tests ------------------------------------------------------------ */

Test(broker_dial, plain_tcp)
{
	struct event_base *base = event_base_new();
	struct server s;
	const char *addrs[] = { "127.0.0.1" };
	struct outcome o;
	int fl;

	server_start(&s, base, NULL, 0);
	o = dial_run(base, NULL, "pinned.test", s.port, addrs, 1, 2000);
	cr_assert_eq(o.err, 0);
	cr_assert_str_eq(o.used, "127.0.0.1");
	fl = fcntl(bufferevent_getfd(o.bev), F_GETFD);
	cr_assert(fl & FD_CLOEXEC);
	cr_assert(fcntl(bufferevent_getfd(o.bev), F_GETFL) & O_NONBLOCK);
	bufferevent_free(o.bev);
	server_stop(&s);
	event_base_free(base);
}

Test(broker_dial, tls_pinned_address_and_sni)
{
	struct event_base *base = event_base_new();
	struct dial_tls *t = tls_with("ca");
	struct server s;
	const char *addrs[] = { "127.0.0.1" };
	struct outcome o;
	SSL *ssl;

	/* pinned.test resolves nowhere; dial connects where it is told. */
	server_start(&s, base, "name", 0);
	o = dial_run(base, t, "pinned.test", s.port, addrs, 1, 2000);
	cr_assert_eq(o.err, 0);
	cr_assert_str_eq(o.used, "127.0.0.1");
	cr_assert_str_eq(s.sni, "pinned.test");
	ssl = bufferevent_openssl_get_ssl(o.bev);
	cr_assert(ssl != NULL);
	cr_assert_eq(SSL_get_verify_result(ssl), X509_V_OK);
	cr_assert(SSL_version(ssl) >= TLS1_2_VERSION);
	bufferevent_free(o.bev);
	dial_tls_free(t);
	server_stop(&s);
	event_base_free(base);
}

Test(broker_dial, tls_wrong_name)
{
	struct event_base *base = event_base_new();
	struct dial_tls *t = tls_with("ca");
	struct server s;
	const char *addrs[] = { "127.0.0.1" };
	struct outcome o;

	server_start(&s, base, "name", 0);
	o = dial_run(base, t, "other.test", s.port, addrs, 1, 2000);
	cr_assert_eq(o.err, EGRESS_ERR_TLS_FAILED);
	cr_assert_str_eq(s.sni, "other.test");
	/* A sub-name does not match either. */
	o = dial_run(base, t, "a.pinned.test", s.port, addrs, 1, 2000);
	cr_assert_eq(o.err, EGRESS_ERR_TLS_FAILED);
	dial_tls_free(t);
	server_stop(&s);
	event_base_free(base);
}

/* A certificate without a DNS SAN is not matched on its subject CN. */
Test(broker_dial, tls_cn_only_refused)
{
	struct event_base *base = event_base_new();
	struct dial_tls *t = tls_with("ca");
	struct server s;
	const char *addrs[] = { "127.0.0.1" };
	struct outcome o;

	server_start(&s, base, "cn.test", 0);
	o = dial_run(base, t, "cn.test", s.port, addrs, 1, 2000);
	cr_assert_eq(o.err, EGRESS_ERR_TLS_FAILED, "matched on the CN");
	cr_assert_str_eq(s.sni, "cn.test");
	dial_tls_free(t);
	server_stop(&s);
	event_base_free(base);
}

Test(broker_dial, tls_untrusted_ca)
{
	struct event_base *base = event_base_new();
	struct dial_tls *t = tls_with("otherca");
	struct server s;
	const char *addrs[] = { "127.0.0.1" };
	struct outcome o;

	server_start(&s, base, "name", 0);
	o = dial_run(base, t, "pinned.test", s.port, addrs, 1, 2000);
	cr_assert_eq(o.err, EGRESS_ERR_TLS_FAILED);
	dial_tls_free(t);
	server_stop(&s);
	event_base_free(base);
}

Test(broker_dial, tls_ip_literal)
{
	struct event_base *base = event_base_new();
	struct dial_tls *t = tls_with("ca");
	struct server s, s2;
	const char *addrs[] = { "127.0.0.1" };
	struct outcome o;

	server_start(&s, base, "ip", 0);
	strcpy(s.sni, "unset");
	o = dial_run(base, t, "127.0.0.1", s.port, addrs, 1, 2000);
	cr_assert_eq(o.err, 0);
	cr_assert_str_eq(s.sni, "", "SNI sent for an IP literal");
	bufferevent_free(o.bev);
	/* A name certificate does not cover the IP. */
	server_start(&s2, base, "name", 0);
	o = dial_run(base, t, "127.0.0.1", s2.port, addrs, 1, 2000);
	cr_assert_eq(o.err, EGRESS_ERR_TLS_FAILED);
	/* Nor does an IP certificate cover a name. */
	o = dial_run(base, t, "pinned.test", s.port, addrs, 1, 2000);
	cr_assert_eq(o.err, EGRESS_ERR_TLS_FAILED);
	dial_tls_free(t);
	server_stop(&s);
	server_stop(&s2);
	event_base_free(base);
}

Test(broker_dial, refused_then_next_address)
{
	struct event_base *base = event_base_new();
	struct server s;
	/* The server listens on 127.0.0.1 only: 127.0.0.2 refuses. */
	const char *addrs[] = { "127.0.0.2", "127.0.0.1" };
	struct outcome o;

	server_start(&s, base, NULL, 0);
	o = dial_run(base, NULL, "pinned.test", s.port, addrs, 2, 2000);
	cr_assert_eq(o.err, 0);
	cr_assert_str_eq(o.used, "127.0.0.1");
	bufferevent_free(o.bev);
	server_stop(&s);
	event_base_free(base);
}

/* The destination accepts, sends and resets before the dial's callback
 * ran: reading SO_ERROR there uses the reset up, and the socket would
 * then read the bytes and a false end of file. Never handed over:
 * upstream-protocol-error, and no other address is tried (127.0.0.2
 * would be refused: connect-failed). */
Test(broker_dial, reset_before_the_callback_is_not_a_connection)
{
	struct event_base *base = event_base_new();
	struct server s;
	struct policy_addr a[2];
	struct policy_host h;
	struct dial_params p;
	struct outcome o;
	struct linger lg = { 1, 0 };
	struct pollfd pfd;
	int c;

	server_start(&s, base, NULL, 1); /* accepts only when told */
	memset(&o, 0, sizeof(o));
	host_of("pinned.test", &h);
	cr_assert_eq(policy_addr_parse("127.0.0.1", &a[0]), 0);
	cr_assert_eq(policy_addr_parse("127.0.0.2", &a[1]), 0);
	memset(&p, 0, sizeof(p));
	p.host = &h;
	p.port = s.port;
	p.addrs = a;
	p.naddrs = 2;
	p.timeout_ms = 2000;
	cr_assert_eq(dial_start(base, NULL, &p, outcome_cb, &o, NULL), 0);
	/* One turn starts the first attempt; its callback needs another. */
	cr_assert(event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK) != -1);
	cr_assert_eq(o.calls, 0);
	pfd.fd = s.lfd;
	pfd.events = POLLIN;
	cr_assert_eq(poll(&pfd, 1, 2000), 1, "the connection never came");
	c = accept4(s.lfd, NULL, NULL, SOCK_CLOEXEC);
	cr_assert_geq(c, 0);
	cr_assert_eq(write(c, "xyz", 3), 3);
	cr_assert_eq(setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	(void)close(c);
	while (o.calls == 0)
		cr_assert(event_base_loop(base, EVLOOP_ONCE) == 0);
	cr_assert_eq(o.err, EGRESS_ERR_UPSTREAM_PROTOCOL, "err %d", o.err);
	cr_assert_null(o.bev);
	server_stop(&s);
	event_base_free(base);
}

Test(broker_dial, all_refused)
{
	struct event_base *base = event_base_new();
	const char *addrs[] = { "127.0.0.1", "127.0.0.2" };
	struct outcome o;

	o = dial_run(base, NULL, "pinned.test", closed_port(), addrs, 2, 2000);
	cr_assert_eq(o.err, EGRESS_ERR_CONNECT_FAILED);
	cr_assert_null(o.bev);
	event_base_free(base);
}

Test(broker_dial, deadline_covers_handshake)
{
	struct event_base *base = event_base_new();
	struct dial_tls *t = tls_with("ca");
	struct server s;
	const char *addrs[] = { "127.0.0.1" };
	struct outcome o;

	/* The kernel accepts the TCP connection; nobody answers TLS. */
	server_start(&s, base, NULL, 1);
	o = dial_run(base, t, "pinned.test", s.port, addrs, 1, 200);
	cr_assert_eq(o.err, EGRESS_ERR_TIMEOUT);
	dial_tls_free(t);
	server_stop(&s);
	event_base_free(base);
}

static void
never_cb(void *arg, int err, struct bufferevent *bev,
    const struct policy_addr *used)
{
	cr_assert_fail("callback after cancel");
}

Test(broker_dial, cancel)
{
	struct event_base *base = event_base_new();
	struct dial_tls *t = tls_with("ca");
	struct server s;
	struct policy_addr a;
	struct policy_host h;
	struct dial_params p;
	struct dial *d = NULL;
	int i;

	server_start(&s, base, NULL, 1);
	host_of("pinned.test", &h);
	cr_assert_eq(policy_addr_parse("127.0.0.1", &a), 0);
	memset(&p, 0, sizeof(p));
	p.host = &h;
	p.port = s.port;
	p.addrs = &a;
	p.naddrs = 1;
	p.timeout_ms = 100;
	/* Before the first attempt. */
	cr_assert_eq(dial_start(base, t, &p, never_cb, NULL, &d), 0);
	dial_cancel(d);
	/* During the handshake (the mute server never answers). */
	cr_assert_eq(dial_start(base, t, &p, never_cb, NULL, &d), 0);
	for (i = 0; i < 5; i++)
		(void)event_base_loop(base, EVLOOP_NONBLOCK);
	dial_cancel(d);
	/* Past the deadline: nothing fires. */
	cr_assert_eq(event_base_loop(base, 0), 1, "events left behind");
	dial_tls_free(t);
	server_stop(&s);
	event_base_free(base);
}

Test(broker_dial, bad_params)
{
	struct event_base *base = event_base_new();
	struct policy_addr a;
	struct policy_host h;
	struct dial_params p;

	host_of("pinned.test", &h);
	cr_assert_eq(policy_addr_parse("127.0.0.1", &a), 0);
	memset(&p, 0, sizeof(p));
	p.host = &h;
	p.port = 443;
	p.addrs = &a;
	p.naddrs = 0;
	cr_assert_eq(dial_start(base, NULL, &p, never_cb, NULL, NULL),
	    EGRESS_ERR_INVALID);
	p.naddrs = 1;
	p.port = 0;
	cr_assert_eq(dial_start(base, NULL, &p, never_cb, NULL, NULL),
	    EGRESS_ERR_INVALID);
	p.port = 443;
	a.family = 5;
	cr_assert_eq(dial_start(base, NULL, &p, never_cb, NULL, NULL),
	    EGRESS_ERR_INVALID);
	event_base_free(base);
}

/* dial_tls_client() owns the socket it is given, even when refused for
 * a NULL argument: the socket is closed, not leaked. */
Test(broker_dial, tls_client_bad_params_close_the_socket)
{
	struct event_base *base = event_base_new();
	struct bufferevent *bev = NULL;
	struct policy_host h;
	int fd;

	host_of("pinned.test", &h);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(fd >= 0);
	cr_assert_eq(dial_tls_client(base, NULL, &h, fd, &bev),
	    EGRESS_ERR_INVALID);
	cr_expect_null(bev);
	errno = 0;
	cr_expect_eq(fcntl(fd, F_GETFD), -1, "the socket is still open");
	cr_expect_eq(errno, EBADF);
	cr_assert_eq(dial_tls_client(base, NULL, &h, -1, &bev),
	    EGRESS_ERR_INVALID);
	event_base_free(base);
}

Test(broker_dial, tls_new_bad_ca)
{
	struct dial_tls *t = NULL;
	char path[128];

	cr_assert_eq(dial_tls_new("/nonexistent/ca.pem", &t),
	    EGRESS_ERR_INVALID);
	(void)snprintf(path, sizeof(path), "%s/ca.key", dir);
	cr_assert_eq(dial_tls_new(path, &t), EGRESS_ERR_INVALID);
	cr_assert_null(t);
	cr_assert_eq(dial_tls_new(NULL, &t), 0);
	dial_tls_free(t);
}

/* ---- dial + http1 over TLS -------------------------------------------- */

struct fetch {
	int done, err, status;
	char body[64];
	size_t n;
};

static void
fetch_head(void *arg, const struct http1_response *r)
{
	((struct fetch *)arg)->status = r->status;
}

static void
fetch_data(void *arg, const char *p, size_t n)
{
	struct fetch *f = arg;

	if (f->n + n < sizeof(f->body)) {
		memcpy(f->body + f->n, p, n);
		f->n += n;
	}
}

static void
fetch_end(void *arg, int err, const struct http1_header *t, size_t n)
{
	struct fetch *f = arg;

	f->done = 1;
	f->err = err;
}

Test(broker_dial, https_exchange)
{
	static const struct http1_callbacks cbs = {
		fetch_head,
		fetch_data,
		fetch_end,
		NULL,
	};
	struct event_base *base = event_base_new();
	struct dial_tls *t = tls_with("ca");
	struct http1_exchange *x = NULL;
	struct http1_head head;
	struct policy_dest d;
	struct policy_err e;
	struct server s;
	const char *addrs[] = { "127.0.0.1" };
	char url[64];
	struct outcome o;
	struct fetch f;

	server_start(&s, base, "name", 0);
	s.reply = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		  "4\r\npong\r\n0\r\n\r\n";
	o = dial_run(base, t, "pinned.test", s.port, addrs, 1, 2000);
	cr_assert_eq(o.err, 0);
	(void)snprintf(url, sizeof(url), "https://pinned.test:%u/ping",
	    (unsigned)s.port);
	cr_assert_eq(policy_url_parse(url, strlen(url), &d, &e), 0);
	memset(&head, 0, sizeof(head));
	head.method = "GET";
	head.method_len = 3;
	head.path = "/ping";
	head.path_len = 5;
	memset(&f, 0, sizeof(f));
	cr_assert_eq(http1_exchange_new(o.bev, &d, &head, 1, NULL, &cbs, &f,
			 &x),
	    0);
	while (!f.done)
		cr_assert(event_base_loop(base, EVLOOP_ONCE) == 0);
	cr_assert_eq(f.err, 0);
	cr_assert_eq(f.status, 200);
	cr_assert_eq(f.n, 4);
	cr_assert(memcmp(f.body, "pong", 4) == 0);
	cr_assert(http1_is_reusable(x));
	http1_exchange_free(x);
	bufferevent_free(o.bev);
	dial_tls_free(t);
	server_stop(&s);
	event_base_free(base);
}

/* ---- the write side's end over a full socket buffer ------------------- */

static void
connected_cb(struct bufferevent *bev, short what, void *arg)
{
	short *ev = arg;

	*ev = (short)(*ev | what);
}

/* A close_notify that finds the socket's buffer full is written once
 * there is room, then the write side is shut; it is never an error. An
 * AF_UNIX pair frees buffer space only when the peer reads, so "full"
 * stays full until the test drains it. */
Test(broker_dial, shutdown_write_waits_for_room)
{
	struct event_base *base = event_base_new();
	struct server s;
	struct bufferevent *cli, *srv;
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	short cev = 0, sev = 0;
	SSL *sssl;
	static char junk[65536], sink[65536];
	ssize_t n;
	size_t alert = 0;
	int sv[2], eof = 0;

	server_start(&s, base, "name", 1);
	cr_assert(cctx != NULL);
	cr_assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) ==
	    0);
	cli = bufferevent_openssl_socket_new(base, sv[0], SSL_new(cctx),
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
	srv = bufferevent_openssl_socket_new(base, sv[1], SSL_new(s.ctx),
	    BUFFEREVENT_SSL_ACCEPTING, 0);
	cr_assert(cli != NULL && srv != NULL);
	bufferevent_setcb(cli, NULL, NULL, connected_cb, &cev);
	bufferevent_setcb(srv, NULL, NULL, connected_cb, &sev);
	cr_assert(bufferevent_enable(cli, EV_READ | EV_WRITE) == 0);
	cr_assert(bufferevent_enable(srv, EV_READ | EV_WRITE) == 0);
	while (!(cev & BEV_EVENT_CONNECTED) || !(sev & BEV_EVENT_CONNECTED)) {
		cr_assert(((cev | sev) & ~BEV_EVENT_CONNECTED) == 0,
		    "handshake failed: %#x %#x", cev, sev);
		cr_assert(event_base_loop(base, EVLOOP_ONCE) == 0);
	}
	/* The peer stops reading; the client's buffer fills with bytes
	 * that reach the socket outside the TLS layer. */
	sssl = bufferevent_openssl_get_ssl(srv);
	bufferevent_free(srv);
	SSL_free(sssl);
	while ((n = write(sv[0], junk, sizeof(junk))) > 0)
		;
	cr_assert(n == -1 && errno == EAGAIN);
	cr_assert_eq(evbuffer_get_length(bufferevent_get_output(cli)), 0);
	cr_assert_eq(dial_shutdown_write(cli), DIAL_SHUT_AGAIN,
	    "a full buffer is not a broken connection");
	cr_assert_eq(dial_shutdown_write(cli), DIAL_SHUT_AGAIN,
	    "called again, still no room");
	while ((n = read(sv[1], sink, sizeof(sink))) > 0)
		;
	cr_assert(n == -1 && errno == EAGAIN);
	cr_assert_eq(dial_shutdown_write(cli), 0);
	/* The alert record, then end of file: the write side is shut. */
	while (!eof) {
		n = read(sv[1], sink, sizeof(sink));
		cr_assert(n >= 0, "read: %s", strerror(errno));
		if (n == 0)
			eof = 1;
		alert += (size_t)n;
	}
	cr_assert(alert >= 5 + 2, "no close_notify record before the end");
	cr_assert_eq(sink[0], 23,
	    "TLS 1.3 sends the alert as a record of "
	    "type application_data");
	bufferevent_free(cli);
	close(sv[1]);
	SSL_CTX_free(cctx);
	server_stop(&s);
	event_base_free(base);
}

/* ---- through a parent proxy ------------------------------------------- */

/* A parent proxy on loopback: reads one CONNECT head, records it,
 * answers reply; with tls set and a 2xx reply, it then is the TLS server
 * itself on the tunnel (a filter over the same connection). */
struct parent {
	struct server s; /* listener, TLS context, SNI */
	const char *reply;
	int tls;
	char head[1024];
	struct bufferevent *plain, *tunnel;
};

static void
parent_read_cb(struct bufferevent *bev, void *arg)
{
	struct parent *pp = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_ptr e = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	size_t n;

	if (e.pos < 0)
		return;
	n = (size_t)e.pos + 4 < sizeof(pp->head) ?
	    (size_t)e.pos + 4 :
	    sizeof(pp->head) - 1;
	cr_assert_eq(evbuffer_remove(in, pp->head, n), (int)n);
	pp->head[n] = '\0';
	cr_assert_eq(evbuffer_get_length(in), 0, "bytes after the head");
	(void)bufferevent_write(bev, pp->reply, strlen(pp->reply));
	if (pp->tls && strncmp(pp->reply, "HTTP/1.1 2", 10) == 0) {
		pp->tunnel = bufferevent_openssl_filter_new(pp->s.base, bev,
		    SSL_new(pp->s.ctx), BUFFEREVENT_SSL_ACCEPTING,
		    BEV_OPT_CLOSE_ON_FREE);
		cr_assert(pp->tunnel != NULL);
		pp->plain = NULL; /* the filter owns it now */
		(void)bufferevent_enable(pp->tunnel, EV_READ | EV_WRITE);
	}
}

static void
parent_accept_cb(evutil_socket_t fd, short what, void *arg)
{
	struct parent *pp = arg;
	int c = accept4(pp->s.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (c == -1)
		return;
	pp->s.accepted++;
	cr_assert(pp->plain == NULL && pp->tunnel == NULL, "one at a time");
	pp->plain = bufferevent_socket_new(pp->s.base, c,
	    BEV_OPT_CLOSE_ON_FREE);
	cr_assert(pp->plain != NULL);
	bufferevent_setcb(pp->plain, parent_read_cb, NULL, NULL, pp);
	(void)bufferevent_enable(pp->plain, EV_READ | EV_WRITE);
}

static void
parent_start(struct parent *pp, struct event_base *base, const char *reply,
    int tls)
{
	memset(pp, 0, sizeof(*pp));
	server_start(&pp->s, base, "name", 1); /* accept here, not there */
	pp->reply = reply;
	pp->tls = tls;
	pp->s.ev = event_new(base, pp->s.lfd, EV_READ | EV_PERSIST,
	    parent_accept_cb, pp);
	cr_assert(event_add(pp->s.ev, NULL) == 0);
}

static void
parent_stop(struct parent *pp)
{
	if (pp->tunnel != NULL)
		bufferevent_free(pp->tunnel);
	if (pp->plain != NULL)
		bufferevent_free(pp->plain);
	server_stop(&pp->s);
}

static struct outcome
parent_dial(struct event_base *base, struct dial_tls *t, struct parent *pp,
    uint16_t port, const char *auth)
{
	struct dial_parent par;
	struct policy_addr a;
	struct policy_host h;
	struct dial_params p;
	struct outcome o;

	memset(&o, 0, sizeof(o));
	memset(&par, 0, sizeof(par));
	host_of("pinned.test", &h);
	cr_assert_eq(policy_addr_parse("127.0.0.1", &a), 0);
	cr_assert_eq(policy_addr_parse("127.0.0.1", &par.addr), 0);
	par.port = pp->s.port;
	par.auth = auth;
	memset(&p, 0, sizeof(p));
	p.host = &h;
	p.port = port;
	p.addrs = &a;
	p.naddrs = 1;
	p.timeout_ms = 5000;
	p.parent = &par;
	cr_assert_eq(dial_start(base, t, &p, outcome_cb, &o, NULL), 0);
	while (o.calls == 0)
		cr_assert(event_base_loop(base, EVLOOP_ONCE) == 0);
	return o;
}

/* TLS through the parent: CONNECT names the validated address literal
 * (never the host name), carries the credentials, and the handshake
 * inside the tunnel has SNI and verification on the name. */
Test(broker_dial, parent_connect_to_the_literal_then_tls)
{
	struct event_base *base = event_base_new();
	struct dial_tls *t = tls_with("ca");
	struct parent pp;
	struct outcome o;
	char want[256];

	parent_start(&pp, base, "HTTP/1.1 200 Connection established\r\n\r\n",
	    1);
	o = parent_dial(base, t, &pp, 8443, "Basic dTpw");
	cr_assert_eq(o.err, 0);
	cr_assert_str_eq(o.used, "127.0.0.1");
	(void)snprintf(want, sizeof(want),
	    "CONNECT 127.0.0.1:8443 HTTP/1.1\r\nHost: 127.0.0.1:8443\r\n"
	    "Proxy-Authorization: Basic dTpw\r\n\r\n");
	cr_assert_str_eq(pp.head, want);
	cr_assert_str_eq(pp.s.sni, "pinned.test");
	cr_assert_eq(SSL_get_verify_result(bufferevent_openssl_get_ssl(o.bev)),
	    X509_V_OK);
	bufferevent_free(o.bev);
	dial_tls_free(t);
	parent_stop(&pp);
	event_base_free(base);
}

/* Plain TCP: bytes the parent sends right after its head belong to the
 * tunnel; dial never reads them. */
Test(broker_dial, parent_leaves_tunnel_bytes_unread)
{
	struct event_base *base = event_base_new();
	struct parent pp;
	struct outcome o;
	char got[16];

	parent_start(&pp, base, "HTTP/1.1 200 OK\r\nVia: 1.1 p\r\n\r\nbanner",
	    0);
	o = parent_dial(base, NULL, &pp, 25, NULL);
	cr_assert_eq(o.err, 0);
	cr_assert(strstr(pp.head, "Proxy-Authorization") == NULL);
	cr_assert(bufferevent_enable(o.bev, EV_READ) == 0);
	while (evbuffer_get_length(bufferevent_get_input(o.bev)) < 6)
		cr_assert(event_base_loop(base, EVLOOP_ONCE) == 0);
	cr_assert_eq(bufferevent_read(o.bev, got, sizeof(got)), 6);
	cr_assert(memcmp(got, "banner", 6) == 0);
	bufferevent_free(o.bev);
	parent_stop(&pp);
	event_base_free(base);
}

/* A parent that refuses, answers garbage, or never ends its head:
 * connect-failed, nothing handed over. */
/* Inline text: a test runs in a fresh process, where pointers into the
 * runner's memory would mean nothing. */
struct reply_case {
	char reply[64];
};

ParameterizedTestParameters(broker_dial, parent_refuses)
{
	static struct reply_case cases[] = {
		{ "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n" },
		{ "HTTP/1.1 502 Bad Gateway\r\n\r\n" },
		{ "HTTP/1.1 101 Switching Protocols\r\n\r\n" },
		{ "HTTP/1.1 300 Multiple Choices\r\n\r\n" },
		{ "SSH-2.0-x\r\n\r\n" },
		{ "HTTP/1.1 200 OK\r\nBad Header\r\n\r\n" },
		{ "HTTP/1.1 200 OK\r\n" },
	};

	return cr_make_param_array(struct reply_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct reply_case *c, broker_dial, parent_refuses)
{
	struct event_base *base = event_base_new();
	struct parent pp;
	struct outcome o;

	parent_start(&pp, base, c->reply, 0);
	o = parent_dial(base, NULL, &pp, 80, NULL);
	if (strchr(c->reply, '\n') == strrchr(c->reply, '\n')) {
		/* No end of head: the parent keeps the connection open; the
		 * deadline ends the dial. */
		cr_assert_eq(o.err, EGRESS_ERR_TIMEOUT, "%s", c->reply);
	} else
		cr_assert_eq(o.err, EGRESS_ERR_CONNECT_FAILED, "%s", c->reply);
	cr_assert_null(o.bev);
	parent_stop(&pp);
	event_base_free(base);
}

/* A head longer than DIAL_PARENT_HEAD_MAX with no end is refused once
 * the limit is reached, not buffered on. */
Test(broker_dial, parent_head_too_long)
{
	struct event_base *base = event_base_new();
	static char reply[DIAL_PARENT_HEAD_MAX + 64];
	struct parent pp;
	struct outcome o;

	memset(reply, 'a', sizeof(reply) - 1);
	// NOLINTNEXTLINE(bugprone-not-null-terminated-result): reply's last byte stays 0
	memcpy(reply, "HTTP/1.1 200 OK\r\nX: ", 20);
	parent_start(&pp, base, reply, 0);
	o = parent_dial(base, NULL, &pp, 80, NULL);
	cr_assert_eq(o.err, EGRESS_ERR_CONNECT_FAILED);
	parent_stop(&pp);
	event_base_free(base);
}
