/* SPDX-License-Identifier: ISC */
/*
 * dial: non-blocking connects to pinned addresses, Happy Eyeballs style,
 * then an optional TLS handshake through bufferevent_openssl. The dial
 * copies its parameters, so the caller's answer set can go away; it
 * holds its own SSL_CTX reference. Every completion path (success,
 * failure, deadline) goes through dial_finish(), which runs the callback
 * once and frees the dial.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <http_parser.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "broker/net/dial.h"
#include "broker/net/readmore.h"
#include "broker/net/share.h"

struct dial_tls {
	SSL_CTX *ctx;
	unsigned char alpn[DIAL_ALPN_MAX]; /* offered on byte streams */
	size_t alpn_len;
};

struct dial_attempt {
	int fd;
	struct event *ev;
	struct dial *d;
	size_t idx;
	char *head; /* the parent's answer so far (DIAL_PARENT_HEAD_MAX) */
	size_t headlen;
};

struct dial {
	struct event_base *base;
	SSL_CTX *ctx; /* own reference, or NULL */
	struct policy_host host;
	uint16_t port;
	struct policy_addr addrs[POLICY_ANSWERS_MAX];
	size_t naddrs;
	size_t next; /* next address to try */
	struct dial_attempt att[POLICY_ANSWERS_MAX];
	size_t nactive;
	struct event *deadline;
	struct event *stagger;
	struct bufferevent *bev; /* TLS handshake in progress */
	size_t used;
	dial_cb cb;
	void *arg;
	int in_cb;
	struct share *handshakes; /* fair share of TLS handshakes */
	int handshaking;	  /* holds a unit of it */
	int no_alpn;
	unsigned char alpn[DIAL_ALPN_MAX]; /* with no_alpn: offered instead */
	size_t alpn_len;
	char tag[DIAL_TAG_MAX + 1];
	int has_parent;
	struct dial_parent parent; /* .auth owned */
};

int
dial_tls_new(const char *ca_file, struct dial_tls **ret)
{
	struct dial_tls_conf c;

	memset(&c, 0, sizeof(c));
	c.ca_file = ca_file;
	return dial_tls_new_conf(&c, ret);
}

int
dial_tls_new_conf(const struct dial_tls_conf *c, struct dial_tls **ret)
{
	static const unsigned char alpn[] = "\x08http/1.1";
	struct dial_tls *t;
	SSL_CTX *ctx;

	if (ret == NULL || c == NULL || c->alpn_len > DIAL_ALPN_MAX ||
	    (c->cert_file == NULL) != (c->key == NULL))
		return EGRESS_ERR_INVALID;
	if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL)
		return EGRESS_ERR_NOMEM;
	if (SSL_CTX_set_min_proto_version(ctx,
		c->min_version == 13 ? TLS1_3_VERSION : TLS1_2_VERSION) != 1 ||
	    SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1) != 0)
		goto bad;
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	(void)SSL_CTX_set_options(ctx,
	    SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	if (c->ca_file != NULL) {
		if (SSL_CTX_load_verify_locations(ctx, c->ca_file, NULL) != 1)
			goto bad;
	} else if (SSL_CTX_set_default_verify_paths(ctx) != 1)
		goto bad;
	if (c->cert_file != NULL &&
	    (SSL_CTX_use_certificate_chain_file(ctx, c->cert_file) != 1 ||
		SSL_CTX_use_PrivateKey(ctx, c->key) != 1 ||
		SSL_CTX_check_private_key(ctx) != 1))
		goto bad;
	if ((t = calloc(1, sizeof(*t))) == NULL) {
		SSL_CTX_free(ctx);
		return EGRESS_ERR_NOMEM;
	}
	t->ctx = ctx;
	if (c->alpn_len > 0)
		memcpy(t->alpn, c->alpn, c->alpn_len);
	t->alpn_len = c->alpn_len;
	*ret = t;
	return 0;
bad:
	ERR_clear_error();
	SSL_CTX_free(ctx);
	return EGRESS_ERR_INVALID;
}

void
dial_tls_free(struct dial_tls *t)
{
	if (t == NULL)
		return;
	SSL_CTX_free(t->ctx);
	free(t);
}

static void
dial_attempt_close(struct dial_attempt *a)
{
	free(a->head);
	a->head = NULL;
	a->headlen = 0;
	if (a->ev != NULL) {
		event_free(a->ev);
		a->ev = NULL;
	}
	if (a->fd != -1) {
		(void)close(a->fd);
		a->fd = -1;
		a->d->nactive--;
	}
}

/* The dial's copy of the parent's credentials, wiped. */
static void
dial_free_auth(struct dial *d)
{
	char *a = (char *)d->parent.auth;

	if (a != NULL) {
		explicit_bzero(a, strlen(a));
		free(a);
	}
	d->parent.auth = NULL;
}

static void
dial_free(struct dial *d)
{
	size_t i;

	for (i = 0; i < d->naddrs; i++)
		dial_attempt_close(&d->att[i]);
	if (d->bev != NULL)
		bufferevent_free(d->bev);
	if (d->handshaking)
		share_release(d->handshakes, d->tag, 1);
	if (d->deadline != NULL)
		event_free(d->deadline);
	if (d->stagger != NULL)
		event_free(d->stagger);
	SSL_CTX_free(d->ctx);
	ERR_clear_error();
	dial_free_auth(d);
	free(d);
}

/* Run the callback once, hand over bev (may be NULL), free the dial. */
static void
dial_finish(struct dial *d, int err, struct bufferevent *bev)
{
	struct policy_addr used;

	if (bev != NULL)
		used = d->addrs[d->used];
	d->in_cb = 1;
	d->cb(d->arg, err, bev, bev != NULL ? &used : NULL);
	dial_free(d);
}

static int
dial_sockaddr(const struct policy_addr *a, uint16_t port,
    struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == 4) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		memcpy(&sin->sin_addr, a->bytes, 4);
		*len = sizeof(*sin);
		return 0;
	}
	if (a->family == 6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		memcpy(&sin6->sin6_addr, a->bytes, 16);
		*len = sizeof(*sin6);
		return 0;
	}
	return -1;
}

static void dial_attempt_cb(evutil_socket_t, short, void *);

/*
 * Start the next address that does not fail at once. Return 1 when an
 * attempt is in flight, 0 when none could start.
 */
static int
dial_start_next(struct dial *d)
{
	struct sockaddr_storage ss;
	socklen_t sl;

	while (d->next < d->naddrs) {
		struct dial_attempt *a = &d->att[d->next];
		int fd, one = 1;

		a->idx = d->next++;
		if (d->has_parent ? dial_sockaddr(&d->parent.addr,
					d->parent.port, &ss, &sl) != 0 :
				    dial_sockaddr(&d->addrs[a->idx], d->port,
					&ss, &sl) != 0)
			continue;
		fd = socket(ss.ss_family,
		    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd == -1)
			continue;
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
		    sizeof(one));
		if (connect(fd, (struct sockaddr *)&ss, sl) == -1 &&
		    errno != EINPROGRESS) {
			(void)close(fd);
			continue;
		}
		a->fd = fd;
		d->nactive++;
		a->ev = event_new(d->base, fd, EV_WRITE, dial_attempt_cb, a);
		if (a->ev == NULL || event_add(a->ev, NULL) != 0) {
			dial_attempt_close(a);
			continue;
		}
		return 1;
	}
	return 0;
}

static void
dial_arm_stagger(struct dial *d)
{
	struct timeval tv = { 0, DIAL_STAGGER_MS * 1000 };

	if (d->next < d->naddrs)
		(void)evtimer_add(d->stagger, &tv);
	else
		(void)event_del(d->stagger);
}

static void
dial_stagger_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dial *d = arg;

	if (!dial_start_next(d) && d->nactive == 0) {
		dial_finish(d, EGRESS_ERR_CONNECT_FAILED, NULL);
		return;
	}
	dial_arm_stagger(d);
}

static void
dial_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	dial_finish(arg, EGRESS_ERR_TIMEOUT, NULL);
}

static void
dial_tls_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct dial *d = arg;

	if (what & BEV_EVENT_CONNECTED) {
		if (d->handshaking)
			share_release(d->handshakes, d->tag, 1);
		d->handshaking = 0;
		d->bev = NULL;
		bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
		(void)bufferevent_disable(bev, EV_READ | EV_WRITE);
		dial_finish(d, 0, bev);
		return;
	}
	if (what & (BEV_EVENT_ERROR | BEV_EVENT_EOF))
		dial_finish(d, EGRESS_ERR_TLS_FAILED, NULL);
}

/*
 * A client SSL on ctx for host: SNI = the name (none for an IP literal),
 * the certificate verified against the name (DNS SANs only) or the IP;
 * with no_alpn, alpn (wire form, may be empty) offered instead of the
 * context's "http/1.1". NULL when out of memory.
 */
static SSL *
dial_ssl_new(SSL_CTX *ctx, const struct policy_host *host, int no_alpn,
    const unsigned char *alpn, size_t alpn_len)
{
	SSL *ssl;

	if ((ssl = SSL_new(ctx)) == NULL)
		return NULL;
	/* A byte stream offers no application protocol (NULL clears the
	 * context's "http/1.1"). */
	if (no_alpn &&
	    SSL_set_alpn_protos(ssl, alpn_len > 0 ? alpn : NULL,
		(unsigned)alpn_len) != 0)
		goto nomem;
	/* Names only from DNS SANs: a certificate without one is never
	 * matched on its subject CN. */
	SSL_set_hostflags(ssl,
	    X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS |
		X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
	if (host->kind == POLICY_HOST_NAME) {
		if (SSL_set_tlsext_host_name(ssl, host->name) != 1 ||
		    SSL_set1_host(ssl, host->name) != 1)
			goto nomem;
	} else if (X509_VERIFY_PARAM_set1_ip(SSL_get0_param(ssl), host->addr,
		       host->kind == POLICY_HOST_IPV4 ? 4 : 16) != 1)
		goto nomem;
	return ssl;
nomem:
	SSL_free(ssl);
	return NULL;
}

/* The TCP connection to a->idx is up: TLS or done. */
static void
dial_won(struct dial *d, struct dial_attempt *a)
{
	struct bufferevent *bev;
	SSL *ssl = NULL;
	size_t i;
	int fd = a->fd;

	event_free(a->ev);
	a->ev = NULL;
	a->fd = -1;
	d->nactive--;
	d->used = a->idx;
	for (i = 0; i < d->naddrs; i++)
		dial_attempt_close(&d->att[i]);
	(void)event_del(d->stagger);

	if (d->ctx == NULL) {
		bev = bufferevent_socket_new(d->base, fd,
		    BEV_OPT_CLOSE_ON_FREE);
		if (bev == NULL) {
			(void)close(fd);
			dial_finish(d, EGRESS_ERR_NOMEM, NULL);
			return;
		}
		(void)readmore_bulk(bev);
		dial_finish(d, 0, bev);
		return;
	}
	/* A handshake costs the broker CPU: each tag takes its fair share
	 * of those in progress (dial_params.handshakes). */
	if (d->handshakes != NULL) {
		int err = share_acquire(d->handshakes, d->tag, NULL, 1);

		if (err != 0) {
			(void)close(fd);
			dial_finish(d, err, NULL);
			return;
		}
		d->handshaking = 1;
	}
	if ((ssl = dial_ssl_new(d->ctx, &d->host, d->no_alpn, d->alpn,
		 d->alpn_len)) == NULL)
		goto nomem;
	bev = bufferevent_openssl_socket_new(d->base, fd, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL) {
		/* libevent 2.1 may already have freed ssl: do not touch it. */
		(void)close(fd);
		dial_finish(d, EGRESS_ERR_NOMEM, NULL);
		return;
	}
	d->bev = bev;
	(void)readmore_bulk(bev);
	bufferevent_setcb(bev, NULL, NULL, dial_tls_event_cb, d);
	(void)bufferevent_enable(bev, EV_READ | EV_WRITE);
	return;
nomem:
	SSL_free(ssl);
	(void)close(fd);
	dial_finish(d, EGRESS_ERR_NOMEM, NULL);
}

/* This attempt failed: the next address starts at once. */
static void
dial_attempt_failed(struct dial *d, struct dial_attempt *a)
{
	dial_attempt_close(a);
	/* A failure starts the next address at once. */
	if (!dial_start_next(d) && d->nactive == 0) {
		dial_finish(d, EGRESS_ERR_CONNECT_FAILED, NULL);
		return;
	}
	dial_arm_stagger(d);
}

static int
dial_parent_head_done(http_parser *hp)
{
	*(int *)hp->data = 1;
	return 1; /* what follows is the tunnel, not a body */
}

/* The parent's whole answer: 2xx with a head http-parser accepts. */
static int
dial_parent_said_yes(const char *head, size_t len)
{
	http_parser_settings cbs;
	http_parser hp;
	int done = 0;
	size_t n;

	memset(&cbs, 0, sizeof(cbs));
	cbs.on_headers_complete = dial_parent_head_done;
	http_parser_init(&hp, HTTP_RESPONSE);
	hp.data = &done;
	n = http_parser_execute(&hp, &cbs, head, len);
	return done && n == len && HTTP_PARSER_ERRNO(&hp) == HPE_OK &&
	    hp.status_code >= 200 && hp.status_code <= 299;
}

/*
 * Read the parent's answer to CONNECT up to the end of its head and not
 * one byte further (what follows belongs to the tunnel): peek, then take
 * exactly what completes the head.
 */
static void
dial_parent_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dial_attempt *a = arg;
	struct dial *d = a->d;
	size_t room = DIAL_PARENT_HEAD_MAX - a->headlen, from, i, take;
	ssize_t n;

	n = recv(a->fd, a->head + a->headlen, room, MSG_PEEK);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		dial_attempt_failed(d, a);
		return;
	}
	take = (size_t)n;
	from = a->headlen > 3 ? a->headlen - 3 : 0;
	for (i = from; i + 4 <= a->headlen + (size_t)n; i++)
		if (memcmp(a->head + i, "\r\n\r\n", 4) == 0) {
			take = i + 4 - a->headlen;
			break;
		}
	if (recv(a->fd, a->head + a->headlen, take, 0) != (ssize_t)take) {
		dial_attempt_failed(d, a);
		return;
	}
	a->headlen += take;
	if (a->headlen < 4 ||
	    memcmp(a->head + a->headlen - 4, "\r\n\r\n", 4) != 0) {
		if (a->headlen == DIAL_PARENT_HEAD_MAX)
			dial_attempt_failed(d, a);
		return;
	}
	if (dial_parent_said_yes(a->head, a->headlen))
		dial_won(d, a);
	else
		dial_attempt_failed(d, a);
}

/* Connected to the parent: ask it for a tunnel to the address literal. */
static void
dial_parent_ask(struct dial *d, struct dial_attempt *a)
{
	char lit[INET6_ADDRSTRLEN], req[512 + DIAL_PARENT_HEAD_MAX];
	const struct policy_addr *to = &d->addrs[a->idx];
	int n;

	if (policy_addr_format(to, lit, sizeof(lit)) != 0)
		goto fail;
	n = snprintf(req, sizeof(req),
	    "CONNECT %s%s%s:%u HTTP/1.1\r\nHost: %s%s%s:%u\r\n%s%s%s\r\n",
	    to->family == 6 ? "[" : "", lit, to->family == 6 ? "]" : "",
	    (unsigned)d->port, to->family == 6 ? "[" : "", lit,
	    to->family == 6 ? "]" : "", (unsigned)d->port,
	    d->parent.auth != NULL ? "Proxy-Authorization: " : "",
	    d->parent.auth != NULL ? d->parent.auth : "",
	    d->parent.auth != NULL ? "\r\n" : "");
	/* A fresh connection's buffer takes the whole request. */
	if (n < 0 || (size_t)n >= sizeof(req) ||
	    send(a->fd, req, (size_t)n, MSG_NOSIGNAL) != n ||
	    (a->head = malloc(DIAL_PARENT_HEAD_MAX)) == NULL)
		goto fail;
	explicit_bzero(req, sizeof(req));
	event_free(a->ev);
	a->ev = event_new(d->base, a->fd, EV_READ | EV_PERSIST,
	    dial_parent_read_cb, a);
	if (a->ev == NULL || event_add(a->ev, NULL) != 0)
		goto fail;
	return;
fail:
	explicit_bzero(req, sizeof(req));
	dial_attempt_failed(d, a);
}

static void
dial_attempt_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dial_attempt *a = arg;
	struct dial *d = a->d;
	socklen_t len = sizeof(int);
	int soerr = 0;
	size_t i;

	if (getsockopt(a->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 &&
	    soerr == 0) {
		if (d->has_parent)
			dial_parent_ask(d, a);
		else
			dial_won(d, a);
		return;
	}
	if (soerr == ECONNRESET || soerr == EPIPE) {
		/* Connected, then reset before this ran. Reading SO_ERROR
		 * used the error up: the socket would now read what came
		 * before the reset and then a false end of file, so it is
		 * never handed over. Not a failed connect either: the
		 * destination failed, no other address is tried. */
		for (i = 0; i < d->naddrs; i++)
			dial_attempt_close(&d->att[i]);
		(void)event_del(d->stagger);
		dial_finish(d, EGRESS_ERR_UPSTREAM_PROTOCOL, NULL);
		return;
	}
	dial_attempt_failed(d, a);
}

int
dial_start(struct event_base *base, struct dial_tls *tls,
    const struct dial_params *p, dial_cb cb, void *arg, struct dial **ret)
{
	struct dial *d;
	struct timeval tv;
	size_t i;
	int ms;

	if (base == NULL || p == NULL || cb == NULL || p->host == NULL ||
	    (p->tag != NULL && strlen(p->tag) > DIAL_TAG_MAX) ||
	    p->addrs == NULL || p->naddrs == 0 ||
	    p->naddrs > POLICY_ANSWERS_MAX || p->port == 0 ||
	    p->timeout_ms < 0 ||
	    strnlen(p->host->name, sizeof(p->host->name)) >=
		sizeof(p->host->name))
		return EGRESS_ERR_INVALID;
	for (i = 0; i < p->naddrs; i++)
		if (p->addrs[i].family != 4 && p->addrs[i].family != 6)
			return EGRESS_ERR_INVALID;
	if ((d = calloc(1, sizeof(*d))) == NULL)
		return EGRESS_ERR_NOMEM;
	d->base = base;
	d->host = *p->host;
	d->port = p->port;
	d->naddrs = p->naddrs;
	memcpy(d->addrs, p->addrs, p->naddrs * sizeof(p->addrs[0]));
	for (i = 0; i < d->naddrs; i++) {
		d->att[i].fd = -1;
		d->att[i].d = d;
	}
	d->cb = cb;
	d->arg = arg;
	d->no_alpn = p->no_alpn;
	if (p->parent != NULL) {
		d->has_parent = 1;
		d->parent = *p->parent;
		d->parent.auth = NULL;
		if (p->parent->auth != NULL &&
		    (d->parent.auth = strdup(p->parent->auth)) == NULL) {
			free(d);
			return EGRESS_ERR_NOMEM;
		}
	}
	if (p->tag != NULL) {
		d->handshakes = p->handshakes;
		memcpy(d->tag, p->tag, strlen(p->tag) + 1);
	}
	if (tls != NULL) {
		if (SSL_CTX_up_ref(tls->ctx) != 1) {
			dial_free_auth(d);
			free(d);
			return EGRESS_ERR_NOMEM;
		}
		d->ctx = tls->ctx;
		memcpy(d->alpn, tls->alpn, tls->alpn_len);
		d->alpn_len = tls->alpn_len;
	}
	ms = p->timeout_ms > 0 ? p->timeout_ms : DIAL_TIMEOUT_DEFAULT_MS;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	if ((d->deadline = evtimer_new(base, dial_deadline_cb, d)) == NULL ||
	    (d->stagger = evtimer_new(base, dial_stagger_cb, d)) == NULL ||
	    evtimer_add(d->deadline, &tv) != 0) {
		dial_free(d);
		return EGRESS_ERR_NOMEM;
	}
	/* The first attempt starts from the loop: no callback in here. */
	event_active(d->stagger, EV_TIMEOUT, 0);
	if (ret != NULL)
		*ret = d;
	return 0;
}

void
dial_cancel(struct dial *d)
{
	if (d == NULL || d->in_cb)
		return;
	dial_free(d);
}

int
dial_shutdown_write(struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	evutil_socket_t fd = bufferevent_getfd(bev);
	int rc;

	if (ssl != NULL) {
		/* 0: close_notify sent, the peer's not yet received. A
		 * full socket buffer leaves the alert pending in the SSL;
		 * calling again writes the rest. */
		ERR_clear_error();
		if ((rc = SSL_shutdown(ssl)) < 0) {
			rc = SSL_get_error(ssl, rc);
			ERR_clear_error();
			return rc == SSL_ERROR_WANT_WRITE ?
			    DIAL_SHUT_AGAIN :
			    EGRESS_ERR_IO;
		}
	}
	if (fd < 0 || shutdown(fd, SHUT_WR) != 0)
		return EGRESS_ERR_IO;
	return 0;
}

/* Make the close of fd abortive (see dial_abort_on_free()). */
static void
dial_linger0(evutil_socket_t fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (fd >= 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

void
dial_abort_on_free(struct bufferevent *bev)
{
	if (bev != NULL)
		dial_linger0(bufferevent_getfd(bev));
}

int
dial_is_plain(struct bufferevent *bev)
{
	return bev != NULL && bufferevent_openssl_get_ssl(bev) == NULL &&
	    bufferevent_get_underlying(bev) == NULL &&
	    bufferevent_getfd(bev) >= 0;
}

int
dial_tls_client(struct event_base *base, struct dial_tls *tls,
    const struct policy_host *host, int fd, struct bufferevent **ret_bev)
{
	struct bufferevent *bev;
	SSL *ssl;

	if (base == NULL || tls == NULL || host == NULL || fd < 0 ||
	    ret_bev == NULL) {
		if (fd >= 0) {
			dial_linger0(fd);
			(void)close(fd);
		}
		return EGRESS_ERR_INVALID;
	}
	/* On failure the stream fails: the upstream gets a reset. */
	if ((ssl = dial_ssl_new(tls->ctx, host, 1, tls->alpn,
		 tls->alpn_len)) == NULL) {
		dial_linger0(fd);
		(void)close(fd);
		return EGRESS_ERR_NOMEM;
	}
	bev = bufferevent_openssl_socket_new(base, fd, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL) {
		/* libevent 2.1 may already have freed ssl: do not touch
		 * it. */
		dial_linger0(fd);
		(void)close(fd);
		return EGRESS_ERR_NOMEM;
	}
	(void)readmore_bulk(bev);
	*ret_bev = bev;
	return 0;
}
