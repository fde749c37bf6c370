/* SPDX-License-Identifier: ISC */
/*
 * egress-bench: a bounded HTTP load generator for scripts/bench. It keeps
 * a fixed number of requests in flight (one per "slot") on one libevent
 * loop in one thread, in one of three modes: "direct" (HTTP/1.1 keep-alive
 * to the upstream, over TLS for https URLs), "proxy" (forward-proxy
 * requests in absolute form to a proxy such as squid or tinyproxy; https
 * URLs go through a CONNECT tunnel) and "shim" (every slot is a stream of
 * one libegress client connected to an egressd instance socket; upstream
 * keep-alive is then the broker's pool). With -k every request uses a new
 * connection (and, for https, a new full handshake). The run stops by
 * itself after a request count or a duration, whichever comes first, and
 * prints one JSON line: requests, errors, requests/s, p50/p99 latency in
 * microseconds, body bytes/s. Responses are parsed with Debian's
 * http-parser. Meant for loopback targets only; it never follows
 * redirects, and a response whose status is not 2xx counts as an error.
 */
#include <sys/socket.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <http_parser.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <egress/egress.h>

#define BENCH_CONC_MAX	       1024
#define BENCH_COUNT_MAX	       100000000UL
#define BENCH_DURATION_MAX     600.0
#define BENCH_GRACE_S	       30 /* to finish in-flight requests */
#define BENCH_HOST_MAX	       256
#define BENCH_PATH_MAX	       2048
#define BENCH_AUTH_MAX	       320 /* the -a header line */
#define BENCH_SHIM_CLIENTS_MAX 64
#define BENCH_ERRMSG_MAX       5 /* error messages printed to stderr */
/* Bytes one read may take: libevent's default (16 KiB) made the direct
 * client the slowest party at 1 MiB bodies, so that it could not serve
 * as the baseline. */
#define BENCH_READ_MAX	       (256 * 1024)

enum bench_mode {
	MODE_DIRECT,
	MODE_PROXY,
	MODE_SHIM,
};

enum slot_state {
	ST_IDLE,
	ST_CONNECTING, /* TCP (and TLS, direct https) */
	ST_TUNNEL,     /* CONNECT sent to the proxy */
	ST_TLS,	       /* handshake through the tunnel */
	ST_EXCHANGE,   /* request sent, reading the response */
};

struct target {
	int tls;
	char host[BENCH_HOST_MAX]; /* without brackets */
	char authority[BENCH_HOST_MAX + 8];
	char path[BENCH_PATH_MAX];
	uint16_t port;
	struct sockaddr_storage ss;
	socklen_t sslen;
};

struct bench;

struct slot {
	struct bench *b;
	enum slot_state st;
	struct bufferevent *bev;
	int tls;    /* bev is a TLS bufferevent */
	int reused; /* the connection served a request before */
	http_parser hp;
	int complete;
	uint64_t t0;
	uint64_t body;
	int status;
	struct egress_client *ec; /* shim: borrowed */
	struct egress_request *req;
	struct event *kick; /* reissue from the loop, after a failure */
};

struct shim_conn {
	struct bench *b;
	struct egress_client *ec;
	struct event *rd, *wr;
};

struct bench {
	enum bench_mode mode;
	struct target t;
	struct target proxy;
	const char *socket_path;
	const char *label;
	const char *cafile;
	/* -a: "Proxy-Authorization: Basic ...\r\n", or "" */
	char proxy_auth[BENCH_AUTH_MAX];
	int newconn;
	int insecure;
	size_t conc;
	unsigned long count; /* measured requests to issue */
	unsigned long warmup;
	double duration;

	struct event_base *base;
	SSL_CTX *ssl_ctx;
	http_parser_settings hps;
	struct slot *slots;
	struct shim_conn shims[BENCH_SHIM_CLIENTS_MAX];
	size_t nshims;
	struct event *stop_timer, *grace_timer;

	int stopping;
	unsigned long issued;	/* including warmup */
	unsigned long finished; /* including warmup */
	size_t active;
	uint64_t t_start, t_end;
	unsigned long requests, errors, non2xx;
	uint64_t bytes;
	uint32_t *lat; /* microseconds, one per measured request */
	size_t nlat, caplat;
	unsigned long reconnects; /* silent closes of reused ones */
	int peer_closes;	  /* the peer closes after each response */
	int nerrmsg;
	int fatal;
};

static uint8_t scratch[65536];

static uint64_t
now_ns(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void errmsg(struct bench *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
errmsg(struct bench *b, const char *fmt, ...)
{
	va_list ap;

	if (b->nerrmsg >= BENCH_ERRMSG_MAX)
		return;
	b->nerrmsg++;
	va_start(ap, fmt);
	(void)fputs("egress-bench: ", stderr);
	(void)vfprintf(stderr, fmt, ap);
	(void)fputc('\n', stderr);
	va_end(ap);
}

static void
usage(void)
{
	(void)fprintf(stderr,
	    "usage: egress-bench -m direct|proxy|shim [-c CONC] [-n COUNT]\n"
	    "           [-t SECONDS] [-w WARMUP] [-k] [-x PROXY_HOST:PORT]\n"
	    "           [-s SOCKET] [-C SHIM_CLIENTS] [--cacert FILE]\n"
	    "           [--insecure] [-a USER:PASSWORD] [-l LABEL] URL\n");
	exit(2);
}

/* -a USER:PASSWORD: the Proxy-Authorization line of proxy mode. */
static int
set_proxy_auth(struct bench *b, const char *cred)
{
	static const char pre[] = "Proxy-Authorization: Basic ";
	size_t n = strlen(cred), k = sizeof(pre) - 1;
	int e;

	/* 192 bytes are 256 in base64: the line fits BENCH_AUTH_MAX */
	if (n == 0 || n > 192 || strchr(cred, ':') == NULL)
		return -1;
	memcpy(b->proxy_auth, pre, k);
	e = EVP_EncodeBlock((unsigned char *)b->proxy_auth + k,
	    (const unsigned char *)cred, (int)n);
	memcpy(b->proxy_auth + k + (size_t)e, "\r\n", 3);
	return 0;
}

/* ---- Targets ---------------------------------------------------------- */

static int
resolve_literal(struct target *t)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)&t->ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&t->ss;

	memset(&t->ss, 0, sizeof(t->ss));
	if (strcmp(t->host, "localhost") == 0) {
		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	} else if (inet_pton(AF_INET, t->host, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
	} else if (inet_pton(AF_INET6, t->host, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
	} else
		return -1;
	if (t->ss.ss_family == AF_INET) {
		sin->sin_port = htons(t->port);
		t->sslen = sizeof(*sin);
		/* Loopback only: this tool is for benchmarks on this host. */
		if ((ntohl(sin->sin_addr.s_addr) >> 24) != 127)
			return -1;
	} else {
		sin6->sin6_port = htons(t->port);
		t->sslen = sizeof(*sin6);
		if (!IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr))
			return -1;
	}
	return 0;
}

static int
parse_port(const char *s, size_t n, uint16_t *ret)
{
	unsigned long v = 0;
	size_t i;

	if (n == 0 || n > 5)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -1;
	*ret = (uint16_t)v;
	return 0;
}

/* Parse "host:port" or "[v6]:port" (hostport, as in -x). */
static int
parse_hostport(const char *s, size_t n, struct target *t, uint16_t defport)
{
	const char *colon;
	size_t hl;

	t->port = defport;
	if (n > 0 && s[0] == '[') {
		const char *rb = memchr(s, ']', n);

		if (rb == NULL)
			return -1;
		hl = (size_t)(rb - s - 1);
		if (hl == 0 || hl >= sizeof(t->host))
			return -1;
		memcpy(t->host, s + 1, hl);
		t->host[hl] = '\0';
		if ((size_t)(rb - s) + 1 < n) {
			if (rb[1] != ':')
				return -1;
			if (parse_port(rb + 2, n - (size_t)(rb - s) - 2,
				&t->port) != 0)
				return -1;
		}
	} else {
		colon = memchr(s, ':', n);
		hl = colon != NULL ? (size_t)(colon - s) : n;
		if (hl == 0 || hl >= sizeof(t->host))
			return -1;
		memcpy(t->host, s, hl);
		t->host[hl] = '\0';
		if (colon != NULL &&
		    parse_port(colon + 1, n - hl - 1, &t->port) != 0)
			return -1;
	}
	if (strchr(t->host, '[') != NULL)
		return -1;
	if (strchr(t->host, ':') != NULL)
		(void)snprintf(t->authority, sizeof(t->authority), "[%s]:%u",
		    t->host, t->port);
	else
		(void)snprintf(t->authority, sizeof(t->authority), "%s:%u",
		    t->host, t->port);
	return 0;
}

/* Parse an http or https URL; reject what could not go in a JSON string. */
static int
parse_url(const char *url, struct target *t)
{
	const char *p, *slash;
	size_t i;

	for (i = 0; url[i] != '\0'; i++)
		if ((unsigned char)url[i] <= 0x20 || url[i] == '"' ||
		    url[i] == '\\' || (unsigned char)url[i] >= 0x7f)
			return -1;
	if (strncmp(url, "http://", 7) == 0) {
		t->tls = 0;
		p = url + 7;
	} else if (strncmp(url, "https://", 8) == 0) {
		t->tls = 1;
		p = url + 8;
	} else
		return -1;
	slash = strchr(p, '/');
	if (slash == NULL)
		slash = p + strlen(p);
	if (parse_hostport(p, (size_t)(slash - p), t, t->tls ? 443 : 80) != 0)
		return -1;
	if (*slash == '\0')
		(void)strcpy(t->path, "/");
	else if (strlen(slash) >= sizeof(t->path))
		return -1;
	else
		(void)strcpy(t->path, slash);
	return 0;
}

/* ---- Accounting ------------------------------------------------------- */

static void slot_issue(struct slot *);
static void maybe_done(struct bench *);

static int
can_issue(const struct bench *b)
{
	return !b->stopping && !b->fatal && b->issued < b->warmup + b->count;
}

/* Start the measured part: the duration counts from here. */
static void
arm_stop(struct bench *b)
{
	struct timeval tv;

	tv.tv_sec = (time_t)b->duration;
	tv.tv_usec = (suseconds_t)((b->duration - (double)tv.tv_sec) * 1e6);
	(void)evtimer_add(b->stop_timer, &tv);
	tv.tv_sec += BENCH_GRACE_S;
	(void)evtimer_add(b->grace_timer, &tv);
}

/* One request ended: ok says whether a response arrived whole. */
static void
record(struct slot *s, int ok)
{
	struct bench *b = s->b;
	uint64_t us;

	b->finished++;
	if (b->finished <= b->warmup) {
		if (b->finished == b->warmup) {
			arm_stop(b);
			b->t_start = now_ns();
			b->requests = b->errors = b->non2xx = 0;
			b->bytes = 0;
			b->nlat = 0;
		}
		return;
	}
	b->requests++;
	b->bytes += s->body;
	if (!ok) {
		b->errors++;
		return;
	}
	if (s->status < 200 || s->status > 299) {
		b->errors++;
		b->non2xx++;
		errmsg(b, "status %d", s->status);
		return;
	}
	us = (now_ns() - s->t0) / 1000;
	if (b->nlat == b->caplat) {
		size_t ncap = b->caplat ? b->caplat * 2 : 65536;
		uint32_t *n = realloc(b->lat, ncap * sizeof(*n));

		if (n == NULL) {
			b->fatal = 1;
			return;
		}
		b->lat = n;
		b->caplat = ncap;
	}
	b->lat[b->nlat++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static void
slot_close(struct slot *s)
{
	if (s->bev != NULL) {
		bufferevent_free(s->bev);
		s->bev = NULL;
	}
	s->reused = 0;
	s->st = ST_IDLE;
}

/* The request on s ended; start the next or go idle. */
static void
slot_next(struct slot *s, int ok, int inline_ok)
{
	struct bench *b = s->b;

	record(s, ok);
	b->active--;
	s->st = ST_IDLE;
	if (!can_issue(b)) {
		maybe_done(b);
		return;
	}
	if (ok && inline_ok)
		slot_issue(s);
	else
		event_active(s->kick, 0, 0); /* no recursion on failures */
}

static void
slot_fail(struct slot *s, const char *what)
{
	errmsg(s->b, "%s", what);
	slot_close(s);
	slot_next(s, 0, 0);
}

static void
maybe_done(struct bench *b)
{
	if (b->active == 0 && !can_issue(b)) {
		if (b->t_end == 0)
			b->t_end = now_ns();
		(void)event_base_loopbreak(b->base);
	}
}

/* ---- HTTP/1.1 over bufferevents (direct and proxy) -------------------- */

static int
hp_on_headers_complete(http_parser *hp)
{
	struct slot *s = hp->data;

	s->status = (int)hp->status_code;
	return 0;
}

static int
hp_on_body(http_parser *hp, const char *at, size_t len)
{
	struct slot *s = hp->data;

	(void)at;
	s->body += len;
	return 0;
}

static int
hp_on_message_complete(http_parser *hp)
{
	struct slot *s = hp->data;

	s->complete = 1;
	http_parser_pause(hp, 1);
	return 0;
}

static void
send_request(struct slot *s)
{
	struct bench *b = s->b;
	struct evbuffer *out = bufferevent_get_output(s->bev);
	const char *close_hdr = b->newconn ? "Connection: close\r\n" : "";
	char req[BENCH_PATH_MAX + 2 * BENCH_HOST_MAX + BENCH_AUTH_MAX + 128];
	size_t len, done = 0;
	ssize_t n;
	int w;

	if (b->mode == MODE_PROXY && !b->t.tls)
		w = snprintf(req, sizeof(req),
		    "GET http://%s%s HTTP/1.1\r\nHost: %s\r\n"
		    "User-Agent: egress-bench\r\n%s%s\r\n",
		    b->t.authority, b->t.path, b->t.authority, b->proxy_auth,
		    close_hdr);
	else
		w = snprintf(req, sizeof(req),
		    "GET %s HTTP/1.1\r\nHost: %s\r\n"
		    "User-Agent: egress-bench\r\n%s\r\n",
		    b->t.path, b->t.authority, close_hdr);
	if (w < 0 || (size_t)w >= sizeof(req)) {
		slot_fail(s, "request head too long");
		return;
	}
	len = (size_t)w;
	/*
	 * On a plain socket with nothing queued, write the head at once, as
	 * wrk does: through the bufferevent it would cost a loop iteration
	 * and two epoll_ctl calls per request, and the baseline would be
	 * slower than the clients it measures against.
	 */
	if (!s->tls && evbuffer_get_length(out) == 0) {
		n = write(bufferevent_getfd(s->bev), req, len);
		if (n > 0)
			done = (size_t)n;
	}
	if (done < len)
		(void)evbuffer_add(out, req + done, len - done);
	http_parser_init(&s->hp, HTTP_RESPONSE);
	s->hp.data = s;
	s->complete = 0;
	s->st = ST_EXCHANGE;
}

static void exchange_read(struct slot *);
static void exchange_drain(struct slot *);
static void bev_read_cb(struct bufferevent *, void *);
static void bev_event_cb(struct bufferevent *, short, void *);

static SSL *
new_ssl(struct bench *b)
{
	SSL *ssl = SSL_new(b->ssl_ctx);
	struct in6_addr a6;
	struct in_addr a4;

	if (ssl == NULL)
		return NULL;
	if (inet_pton(AF_INET, b->t.host, &a4) == 1 ||
	    inet_pton(AF_INET6, b->t.host, &a6) == 1) {
		if (!b->insecure &&
		    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl),
			b->t.host) != 1)
			goto bad;
	} else {
		if (SSL_set_tlsext_host_name(ssl, b->t.host) != 1)
			goto bad;
		if (!b->insecure && SSL_set1_host(ssl, b->t.host) != 1)
			goto bad;
	}
	return ssl;
bad:
	SSL_free(ssl);
	return NULL;
}

static void
slot_connect(struct slot *s)
{
	struct bench *b = s->b;
	struct target *dst = b->mode == MODE_PROXY ? &b->proxy : &b->t;
	SSL *ssl = NULL;

	if (b->mode == MODE_DIRECT && b->t.tls) {
		if ((ssl = new_ssl(b)) == NULL) {
			slot_fail(s, "SSL_new failed");
			return;
		}
		s->bev = bufferevent_openssl_socket_new(b->base, -1, ssl,
		    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
	} else
		s->bev = bufferevent_socket_new(b->base, -1,
		    BEV_OPT_CLOSE_ON_FREE);
	if (s->bev == NULL) {
		SSL_free(ssl);
		slot_fail(s, "bufferevent_socket_new failed");
		return;
	}
	(void)bufferevent_set_max_single_read(s->bev, BENCH_READ_MAX);
	s->tls = ssl != NULL;
	bufferevent_setcb(s->bev, bev_read_cb, NULL, bev_event_cb, s);
	s->st = ST_CONNECTING;
	if (bufferevent_socket_connect(s->bev, (struct sockaddr *)&dst->ss,
		(int)dst->sslen) != 0) {
		slot_fail(s, "connect failed");
		return;
	}
	(void)bufferevent_enable(s->bev, EV_READ | EV_WRITE);
}

/* The proxy answered the CONNECT: start TLS on the same fd. */
static void
tunnel_read(struct slot *s)
{
	struct bench *b = s->b;
	struct evbuffer *in = bufferevent_get_input(s->bev);
	struct evbuffer_ptr end;
	char line[16];
	SSL *ssl;
	evutil_socket_t fd;
	size_t n;

	end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	if (end.pos < 0) {
		if (evbuffer_get_length(in) > 16384)
			slot_fail(s, "CONNECT answer too long");
		return;
	}
	n = evbuffer_copyout(in, line, sizeof(line) - 1);
	line[n] = '\0';
	if (n < 12 || strncmp(line, "HTTP/1.", 7) != 0 ||
	    strncmp(line + 9, "200", 3) != 0) {
		slot_fail(s, "CONNECT refused by the proxy");
		return;
	}
	(void)evbuffer_drain(in, (size_t)end.pos + 4);
	if (evbuffer_get_length(in) != 0) {
		slot_fail(s, "bytes after the CONNECT answer");
		return;
	}
	fd = bufferevent_getfd(s->bev);
	(void)bufferevent_setfd(s->bev, -1); /* keep fd open */
	bufferevent_free(s->bev);
	s->bev = NULL;
	if ((ssl = new_ssl(b)) == NULL) {
		(void)close(fd);
		slot_fail(s, "SSL_new failed");
		return;
	}
	s->bev = bufferevent_openssl_socket_new(b->base, fd, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
	if (s->bev == NULL) {
		SSL_free(ssl);
		(void)close(fd);
		slot_fail(s, "bufferevent_openssl_socket_new failed");
		return;
	}
	(void)bufferevent_set_max_single_read(s->bev, BENCH_READ_MAX);
	bufferevent_setcb(s->bev, bev_read_cb, NULL, bev_event_cb, s);
	(void)bufferevent_enable(s->bev, EV_READ | EV_WRITE);
	s->tls = 1;
	s->st = ST_TLS;
}

static void
exchange_done(struct slot *s)
{
	struct bench *b = s->b;
	int keep = http_should_keep_alive(&s->hp) && !b->newconn &&
	    !b->peer_closes;

	if (!keep)
		slot_close(s);
	else
		s->reused = 1;
	slot_next(s, 1, 1);
}

static void
exchange_read(struct slot *s)
{
	struct evbuffer *in = bufferevent_get_input(s->bev);
	struct evbuffer_iovec v[16];
	size_t used = 0, m;
	int i, nv;

	nv = evbuffer_peek(in, -1, NULL, v, 16);
	if (nv > 16)
		nv = 16;
	for (i = 0; i < nv && !s->complete; i++) {
		m = http_parser_execute(&s->hp, &s->b->hps, v[i].iov_base,
		    v[i].iov_len);
		used += m;
		if (s->complete)
			break;
		if (HTTP_PARSER_ERRNO(&s->hp) != HPE_OK) {
			slot_fail(s,
			    http_errno_name(HTTP_PARSER_ERRNO(&s->hp)));
			return;
		}
	}
	(void)evbuffer_drain(in, used);
	if (s->complete) {
		if (evbuffer_get_length(in) != 0) {
			slot_fail(s, "bytes after the response");
			return;
		}
		exchange_done(s);
	} else if (evbuffer_get_length(in) > 0)
		bev_read_cb(s->bev, s); /* more than 16 chunks */
	else if (!s->tls)
		exchange_drain(s);
}

/*
 * Read what else a plain socket holds until it would block, as wrk does:
 * the bufferevent reads once per wake-up, and on a 1 MiB body it was the
 * wake-ups, not the bytes, that made the direct client slower than wrk.
 */
static void
exchange_drain(struct slot *s)
{
	static char buf[BENCH_READ_MAX];
	evutil_socket_t fd = bufferevent_getfd(s->bev);
	ssize_t n;
	size_t m;

	for (;;) {
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			bev_event_cb(s->bev,
			    BEV_EVENT_READING |
				(n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR),
			    s);
			return;
		}
		m = http_parser_execute(&s->hp, &s->b->hps, buf, (size_t)n);
		if (s->complete) {
			if (m != (size_t)n)
				slot_fail(s, "bytes after the response");
			else
				exchange_done(s);
			return;
		}
		if (HTTP_PARSER_ERRNO(&s->hp) != HPE_OK) {
			slot_fail(s,
			    http_errno_name(HTTP_PARSER_ERRNO(&s->hp)));
			return;
		}
	}
}

static void
bev_read_cb(struct bufferevent *bev, void *arg)
{
	struct slot *s = arg;

	(void)bev;
	switch (s->st) {
	case ST_TUNNEL:
		tunnel_read(s);
		break;
	case ST_EXCHANGE:
		exchange_read(s);
		break;
	default:
		slot_fail(s, "unexpected bytes");
		break;
	}
}

static void
bev_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct slot *s = arg;
	struct bench *b = s->b;
	unsigned long e;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		if (s->st == ST_CONNECTING && b->mode == MODE_PROXY &&
		    b->t.tls) {
			(void)
			    evbuffer_add_printf(bufferevent_get_output(s->bev),
				"CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n",
				b->t.authority, b->t.authority, b->proxy_auth);
			s->st = ST_TUNNEL;
		} else
			send_request(s);
		return;
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		if (s->st == ST_EXCHANGE && (what & BEV_EVENT_EOF)) {
			/* A body delimited by the close. */
			(void)http_parser_execute(&s->hp, &b->hps, NULL, 0);
			if (s->complete) {
				slot_close(s);
				slot_next(s, 1, 1);
				return;
			}
		}
		if (s->st == ST_EXCHANGE && s->reused && s->body == 0 &&
		    s->status == 0) {
			/*
			 * The peer closed a kept-alive connection without a
			 * word (tinyproxy does after every response): retry
			 * once on a new one, and from now on stop reusing.
			 */
			b->peer_closes = 1;
			b->reconnects++;
			slot_close(s);
			slot_connect(s);
			return;
		}
		if (what & BEV_EVENT_ERROR) {
			e = bufferevent_get_openssl_error(bev);
			if (e != 0)
				errmsg(b, "TLS: %s",
				    ERR_reason_error_string(e));
			else if (EVUTIL_SOCKET_ERROR() != 0)
				errmsg(b, "socket: %s",
				    strerror(EVUTIL_SOCKET_ERROR()));
		}
		slot_fail(s,
		    what & BEV_EVENT_EOF ? "connection closed early" :
					   "connection error");
	}
}

/* ---- Shim ------------------------------------------------------------- */

static void shim_arm(struct shim_conn *);

static void
shim_finish(struct slot *s, int ok)
{
	egress_request_free(s->req);
	s->req = NULL;
	slot_next(s, ok, 1);
}

static void
shim_cb(struct egress_request *req, unsigned int events, void *arg)
{
	struct slot *s = arg;
	int n;

	if (events & EGRESS_EV_RESPONSE) {
		n = egress_response_wait(req, EGRESS_NONBLOCK);
		if (n > 0)
			s->status = n;
	}
	if (!(events &
		(EGRESS_EV_READABLE | EGRESS_EV_DONE | EGRESS_EV_RESPONSE)))
		return;
	for (;;) {
		n = egress_response_read(req, scratch, sizeof(scratch),
		    EGRESS_NONBLOCK);
		if (n > 0) {
			s->body += (uint64_t)n;
			continue;
		}
		if (n == EGRESS_ERR_AGAIN)
			return;
		if (n == 0) {
			if (s->status == 0)
				s->status = egress_response_wait(req,
				    EGRESS_NONBLOCK);
			shim_finish(s, 1);
			return;
		}
		errmsg(s->b, "shim: %s: %s", egress_strerror(n),
		    egress_request_message(req));
		shim_finish(s, 0);
		return;
	}
}

static void
shim_issue(struct slot *s)
{
	struct bench *b = s->b;
	struct egress_header h[1] = { {
	    "User-Agent",
	    10,
	    "egress-bench",
	    12,
	} };
	struct egress_request_head head;
	int rv;

	memset(&head, 0, sizeof(head));
	head.method = "GET";
	head.scheme = b->t.tls ? "https" : "http";
	head.authority = b->t.authority;
	head.path = b->t.path;
	head.headers = h;
	head.nheaders = 1;
	s->st = ST_EXCHANGE;
	rv = egress_request_start(s->ec, &head, shim_cb, s, &s->req);
	if (rv == 0)
		rv = egress_request_finish(s->req, NULL, 0);
	if (rv != 0) {
		errmsg(b, "shim: start: %s", egress_strerror(rv));
		egress_request_free(s->req);
		s->req = NULL;
		slot_next(s, 0, 0);
		return;
	}
}

static void
shim_arm(struct shim_conn *sc)
{
	if (egress_client_want_write(sc->ec))
		(void)event_add(sc->wr, NULL);
}

static void
shim_event_cb(evutil_socket_t fd, short what, void *arg)
{
	struct shim_conn *sc = arg;
	int rv;

	(void)fd;
	(void)what;
	rv = egress_client_step(sc->ec);
	if (rv != 0) {
		errmsg(sc->b, "shim connection: %s", egress_strerror(rv));
		sc->b->fatal = 1;
		(void)event_del(sc->rd);
		(void)event_del(sc->wr);
		/* Requests failed with rv: their callbacks already ran. */
		maybe_done(sc->b);
		return;
	}
	shim_arm(sc);
}

/* ---- Driving ---------------------------------------------------------- */

static void
slot_issue(struct slot *s)
{
	struct bench *b = s->b;

	b->issued++;
	b->active++;
	s->t0 = now_ns();
	s->body = 0;
	s->status = 0;
	if (b->mode == MODE_SHIM) {
		shim_issue(s);
		return;
	}
	if (s->bev == NULL)
		slot_connect(s);
	else
		send_request(s);
}

static void
kick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct slot *s = arg;
	size_t i;

	(void)fd;
	(void)what;
	if (s->st != ST_IDLE || !can_issue(s->b)) {
		maybe_done(s->b);
		return;
	}
	slot_issue(s);
	for (i = 0; i < s->b->nshims; i++)
		shim_arm(&s->b->shims[i]);
}

static void
stop_cb(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;

	(void)fd;
	(void)what;
	b->stopping = 1;
	maybe_done(b);
}

static void
grace_cb(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;

	(void)fd;
	(void)what;
	errmsg(b, "%zu requests still in flight after the grace period",
	    b->active);
	b->errors += b->active;
	b->requests += b->active;
	b->t_end = now_ns();
	(void)event_base_loopbreak(b->base);
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static uint32_t
percentile(const uint32_t *v, size_t n, double q)
{
	size_t i;

	if (n == 0)
		return 0;
	i = (size_t)(q * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

static const char *
mode_name(enum bench_mode m)
{
	switch (m) {
	case MODE_DIRECT:
		return "direct";
	case MODE_PROXY:
		return "proxy";
	case MODE_SHIM:
		return "shim";
	}
	return "?";
}

static int
setup_tls(struct bench *b)
{
	b->ssl_ctx = SSL_CTX_new(TLS_client_method());
	if (b->ssl_ctx == NULL)
		return -1;
	if (SSL_CTX_set_min_proto_version(b->ssl_ctx, TLS1_2_VERSION) != 1)
		return -1;
	/* Every new connection is a full handshake, as the broker's are. */
	SSL_CTX_set_session_cache_mode(b->ssl_ctx, SSL_SESS_CACHE_OFF);
	if (b->insecure)
		SSL_CTX_set_verify(b->ssl_ctx, SSL_VERIFY_NONE, NULL);
	else {
		SSL_CTX_set_verify(b->ssl_ctx, SSL_VERIFY_PEER, NULL);
		if (b->cafile != NULL) {
			if (SSL_CTX_load_verify_locations(b->ssl_ctx,
				b->cafile, NULL) != 1)
				return -1;
		} else if (SSL_CTX_set_default_verify_paths(b->ssl_ctx) != 1)
			return -1;
	}
	return 0;
}

static unsigned long
parse_ulong(const char *s, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *s == '\0' || *end != '\0' || v > max || s[0] == '-')
		usage();
	return v;
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "cacert", required_argument, NULL, 'A' },
		{ "insecure", no_argument, NULL, 'I' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench b;
	struct timeval tv;
	const char *proxy = NULL;
	char *end;
	size_t i;
	double elapsed, rps;
	unsigned long nclients = 1;
	int ch, have_n = 0, have_t = 0, rc = 0;

	memset(&b, 0, sizeof(b));
	b.mode = MODE_DIRECT;
	b.conc = 1;
	b.label = "";
	while ((ch = getopt_long(argc, argv, "m:c:n:t:w:kx:s:C:l:a:", longopts,
		    NULL)) != -1) {
		switch (ch) {
		case 'm':
			if (strcmp(optarg, "direct") == 0)
				b.mode = MODE_DIRECT;
			else if (strcmp(optarg, "proxy") == 0)
				b.mode = MODE_PROXY;
			else if (strcmp(optarg, "shim") == 0)
				b.mode = MODE_SHIM;
			else
				usage();
			break;
		case 'c':
			b.conc = parse_ulong(optarg, BENCH_CONC_MAX);
			if (b.conc == 0)
				usage();
			break;
		case 'n':
			b.count = parse_ulong(optarg, BENCH_COUNT_MAX);
			have_n = 1;
			break;
		case 't':
			errno = 0;
			b.duration = strtod(optarg, &end);
			if (errno != 0 || *end != '\0' || !(b.duration > 0) ||
			    b.duration > BENCH_DURATION_MAX)
				usage();
			have_t = 1;
			break;
		case 'w':
			b.warmup = parse_ulong(optarg, BENCH_COUNT_MAX);
			break;
		case 'k':
			b.newconn = 1;
			break;
		case 'x':
			proxy = optarg;
			break;
		case 's':
			b.socket_path = optarg;
			break;
		case 'C':
			nclients = parse_ulong(optarg, BENCH_SHIM_CLIENTS_MAX);
			if (nclients == 0)
				usage();
			break;
		case 'l':
			b.label = optarg;
			break;
		case 'A':
			b.cafile = optarg;
			break;
		case 'I':
			b.insecure = 1;
			break;
		case 'a':
			if (set_proxy_auth(&b, optarg) != 0)
				usage();
			break;
		default:
			usage();
		}
	}
	if (optind + 1 != argc)
		usage();
	if (parse_url(argv[optind], &b.t) != 0) {
		(void)fprintf(stderr, "egress-bench: bad URL\n");
		return 2;
	}
	for (i = 0; b.label[i] != '\0'; i++)
		if ((unsigned char)b.label[i] < 0x20 || b.label[i] == '"' ||
		    b.label[i] == '\\')
			usage();
	/* Bounded: a count, a duration, or by default 1,000 requests. */
	if (!have_n)
		b.count = have_t ? BENCH_COUNT_MAX : 1000;
	if (!have_t)
		b.duration = BENCH_DURATION_MAX;
	if (b.mode == MODE_PROXY) {
		if (proxy == NULL ||
		    parse_hostport(proxy, strlen(proxy), &b.proxy, 3128) !=
			0 ||
		    resolve_literal(&b.proxy) != 0) {
			(void)fprintf(stderr,
			    "egress-bench: -x needs a "
			    "loopback proxy HOST:PORT\n");
			return 2;
		}
	} else if (b.mode == MODE_SHIM) {
		if (b.socket_path == NULL) {
			(void)fprintf(stderr,
			    "egress-bench: shim mode needs "
			    "-s SOCKET\n");
			return 2;
		}
		if (b.newconn)
			(void)fprintf(stderr,
			    "egress-bench: -k has no effect "
			    "in shim mode (the broker owns upstream "
			    "connections)\n");
	} else if (resolve_literal(&b.t) != 0) {
		(void)fprintf(stderr,
		    "egress-bench: direct mode needs a "
		    "loopback IP literal or localhost\n");
		return 2;
	}

	(void)signal(SIGPIPE, SIG_IGN);
	if ((b.base = event_base_new()) == NULL)
		return 2;
	if (b.t.tls && b.mode != MODE_SHIM && setup_tls(&b) != 0) {
		(void)fprintf(stderr, "egress-bench: TLS setup failed\n");
		return 2;
	}
	b.hps.on_headers_complete = hp_on_headers_complete;
	b.hps.on_body = hp_on_body;
	b.hps.on_message_complete = hp_on_message_complete;
	if ((b.slots = calloc(b.conc, sizeof(*b.slots))) == NULL)
		return 2;
	if (b.mode == MODE_SHIM) {
		if (nclients > b.conc)
			nclients = b.conc;
		for (i = 0; i < nclients; i++) {
			struct shim_conn *sc = &b.shims[i];
			int rv;

			sc->b = &b;
			rv = egress_client_connect(b.socket_path, &sc->ec);
			if (rv != 0) {
				(void)fprintf(stderr, "egress-bench: %s: %s\n",
				    b.socket_path, egress_strerror(rv));
				return 2;
			}
			sc->rd = event_new(b.base, egress_client_fd(sc->ec),
			    EV_READ | EV_PERSIST, shim_event_cb, sc);
			sc->wr = event_new(b.base, egress_client_fd(sc->ec),
			    EV_WRITE, shim_event_cb, sc);
			if (sc->rd == NULL || sc->wr == NULL ||
			    event_add(sc->rd, NULL) != 0)
				return 2;
			b.nshims++;
		}
	}
	for (i = 0; i < b.conc; i++) {
		b.slots[i].b = &b;
		b.slots[i].st = ST_IDLE;
		if (b.mode == MODE_SHIM)
			b.slots[i].ec = b.shims[i % b.nshims].ec;
		b.slots[i].kick = event_new(b.base, -1, 0, kick_cb,
		    &b.slots[i]);
		if (b.slots[i].kick == NULL)
			return 2;
	}

	b.stop_timer = evtimer_new(b.base, stop_cb, &b);
	b.grace_timer = evtimer_new(b.base, grace_cb, &b);
	if (b.stop_timer == NULL || b.grace_timer == NULL)
		return 2;
	/* The warm-up is bounded too: by the duration plus the grace. */
	arm_stop(&b);
	if (b.warmup > 0) {
		tv.tv_sec = (time_t)b.duration + BENCH_GRACE_S;
		tv.tv_usec = 0;
		(void)evtimer_add(b.grace_timer, &tv);
		(void)evtimer_del(b.stop_timer);
	}

	b.t_start = now_ns();
	for (i = 0; i < b.conc && can_issue(&b); i++)
		slot_issue(&b.slots[i]);
	for (i = 0; i < b.nshims; i++)
		shim_arm(&b.shims[i]);
	if (b.active > 0 || can_issue(&b))
		(void)event_base_dispatch(b.base);
	if (b.t_end == 0)
		b.t_end = now_ns();

	qsort(b.lat, b.nlat, sizeof(*b.lat), cmp_u32);
	elapsed = (double)(b.t_end - b.t_start) / 1e9;
	if (elapsed <= 0)
		elapsed = 1e-9;
	rps = (double)(b.requests - b.errors) / elapsed;
	(void)printf("{\"label\":\"%s\",\"mode\":\"%s\",\"url\":\"%s\","
		     "\"concurrency\":%zu,\"newconn\":%s,\"requests\":%lu,"
		     "\"errors\":%lu,\"non2xx\":%lu,\"elapsed_s\":%.3f,"
		     "\"rps\":%.1f,\"p50_us\":%" PRIu32 ",\"p99_us\":%" PRIu32
		     ","
		     "\"bytes\":%" PRIu64 ",\"bytes_per_s\":%.0f,"
		     "\"reconnects\":%lu}\n",
	    b.label, mode_name(b.mode), argv[optind], b.conc,
	    b.newconn ? "true" : "false", b.requests, b.errors, b.non2xx,
	    elapsed, rps, percentile(b.lat, b.nlat, 0.50),
	    percentile(b.lat, b.nlat, 0.99), b.bytes,
	    (double)b.bytes / elapsed, b.reconnects);
	(void)fflush(stdout);
	if (b.errors > 0 || b.requests == 0 || b.fatal)
		rc = 1;

	for (i = 0; i < b.conc; i++) {
		slot_close(&b.slots[i]);
		egress_request_free(b.slots[i].req);
		event_free(b.slots[i].kick);
	}
	for (i = 0; i < b.nshims; i++) {
		event_free(b.shims[i].rd);
		event_free(b.shims[i].wr);
		egress_client_free(b.shims[i].ec);
	}
	event_free(b.stop_timer);
	event_free(b.grace_timer);
	free(b.slots);
	free(b.lat);
	SSL_CTX_free(b.ssl_ctx);
	event_base_free(b.base);
	return rc;
}
