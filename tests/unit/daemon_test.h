/* SPDX-License-Identifier: ISC */
/*
 * Helpers shared by the session and request unit tests (header-only,
 * static functions): a struct broker set up as egressd's main() sets it
 * up (confstate over a configuration file in a scratch folder, leases,
 * metrics, event base, broker_apply_conf) with the log sent to a file in
 * that folder, reading the log back as JSON events, a fake guest's end
 * of a socketpair (frames written with proto_encode(), frames read back
 * and decoded while the loop runs), and a loopback TCP listener that the
 * test answers by hand. The instance "app" may reach 127.0.0.1 (its
 * loopback carve-out) and 169.254.169.254 (a metadata literal, denied before any
 * connect); nothing else is granted, and no name is ever resolved.
 */
#ifndef EGRESS_TESTS_DAEMON_TEST_H
#define EGRESS_TESTS_DAEMON_TEST_H

#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <egress/error.h>
#include <event2/event.h>
#include <jansson.h>

#include "broker/broker.h"
#include "broker/confstate.h"
#include "broker/log.h"
#include "broker/metrics.h"
#include "broker/net/lease.h"
#include "broker/net/netaddr.h"
#include "broker/session.h"
#include "conf_test.h"
#include "proto/proto.h"

/* Loop iterations a wait may take; each polls for at most DT_POLL_MS. */
#define DT_ITERS   1000
#define DT_POLL_MS 5

static const char dt_manifest[] =
    "[plugin]\n"
    "name = unit\n"
    "version = 1.0.0\n"
    "permissions = http_client\n"
    "[egress]\n"
    "operator_defined = true\n";

static struct broker dt_b;

/* Lines added to the [broker] section (set before dt_setup). */
static const char *dt_broker_extra = "";

static inline void
dt_write_conf(void)
{
	char text[2048];

	(void)snprintf(text, sizeof(text),
	    "[plugins.security]\n"
	    "signature_mode = disabled\n"
	    "[plugins.limits]\n"
	    "max_connections_per_instance = 4\n"
	    "[plugins.entries.app]\n"
	    "plugin = unit\n"
	    "manifest = manifest.ini\n"
	    "permissions = http_client\n"
	    "egress_hosts = 127.0.0.1, 169.254.169.254\n"
	    "egress_allow_loopback = 127.0.0.1\n"
	    "[broker]\n"
	    "instance_socket_dir = %s/run\n"
	    "control_socket = %s/control.sock\n"
	    "%s"
	    "[resolver]\n"
	    "servers = 127.0.0.1:9\n"
	    "timeout_ms = 1000\n"
	    "[limits]\n"
	    "connect_timeout_ms = 5000\n"
	    "first_byte_timeout_ms = 5000\n"
	    "between_bytes_timeout_ms = 5000\n",
	    ct_dir, ct_dir, dt_broker_extra);
	ct_write_str("egressd.ini", text);
}

/* Replace the configuration with one that does not parse. */
static inline void
dt_break_conf(void)
{
	ct_write_str("egressd.ini", "[broker]\nno_such_key = 1\n");
}

/* Set up dt_b as egressd's main() does, over a fresh scratch folder. */
static inline void
dt_setup(void)
{
	struct conf_errors e = { 0, NULL };
	struct broker *b = &dt_b;

	(void)signal(SIGPIPE, SIG_IGN);
	ct_mkdir();
	ct_write_str("manifest.ini", dt_manifest);
	dt_write_conf();
	cr_assert_eq(log_open(ct_path("egressd.log")), 0);
	memset(b, 0, sizeof(*b));
	memcpy(b->id_prefix, "unit", sizeof("unit"));
	cr_assert_eq(confstate_init(&b->conf, ct_path("egressd.ini"), NULL,
			 NULL, &e),
	    0, "%s", ct_errors(&e));
	b->started = time(NULL);
	b->leases = lease_table_new();
	b->metrics = metrics_new();
	b->base = broker_base_new();
	cr_assert(b->leases != NULL && b->metrics != NULL && b->base != NULL);
	cr_assert_eq(netaddr_new(b->base, NULL, NULL, &b->netaddr), 0);
	cr_assert_eq(broker_apply_conf(b, b->conf.cur->snap), 0);
}

static inline void
dt_teardown(void)
{
	struct broker *b = &dt_b;

	session_free_all(b);
	netaddr_free(b->netaddr);
	b->netaddr = NULL;
	broker_release(b);
	if (b->base != NULL) {
		(void)event_base_loop(b->base, EVLOOP_NONBLOCK);
		event_base_free(b->base);
	}
	metrics_free(b->metrics);
	confstate_done(&b->conf);
	log_close();
	ct_rmdir();
	memset(b, 0, sizeof(*b));
}

/* Run the loop once without blocking, then wait briefly on fd (-1:
 * none) so that a peer in this process gets its turn. */
static inline void
dt_step(int fd)
{
	struct pollfd pfd = { fd, POLLIN, 0 };

	cr_assert_neq(event_base_loop(dt_b.base, EVLOOP_NONBLOCK), -1);
	if (fd >= 0)
		(void)poll(&pfd, 1, DT_POLL_MS);
	else
		(void)poll(NULL, 0, DT_POLL_MS);
}

/* ---- the log ----------------------------------------------------------- */

/* Return the events named name (NULL: all) of the log, as a JSON array
 * (caller decrefs). */
static inline json_t *
dt_log_events(const char *name)
{
	json_t *all = json_array(), *o;
	char line[LOG_LINE_MAX + 2];
	FILE *f;

	cr_assert_not_null(all);
	if ((f = fopen(ct_path("egressd.log"), "r")) == NULL)
		return all;
	while (fgets(line, sizeof(line), f) != NULL) {
		o = json_loads(line, 0, NULL);
		cr_assert_not_null(o, "log line is not JSON: %s", line);
		if (name == NULL ||
		    strcmp(json_string_value(json_object_get(o, "event")),
			name) == 0)
			cr_assert_eq(json_array_append_new(all, o), 0);
		else
			json_decref(o);
	}
	(void)fclose(f);
	return all;
}

static inline size_t
dt_log_count(const char *name)
{
	json_t *a = dt_log_events(name);
	size_t n = json_array_size(a);

	json_decref(a);
	return n;
}

/* Return field key of the last event named name as a string ("null"
 * for JSON null, "" when absent) in a static buffer. */
static inline const char *
dt_log_last(const char *name, const char *key)
{
	static char buf[256];
	json_t *a = dt_log_events(name), *v;
	size_t n = json_array_size(a);

	buf[0] = '\0';
	if (n > 0 &&
	    (v = json_object_get(json_array_get(a, n - 1), key)) != NULL) {
		if (json_is_string(v))
			(void)snprintf(buf, sizeof(buf), "%s",
			    json_string_value(v));
		else if (json_is_integer(v))
			(void)snprintf(buf, sizeof(buf), "%lld",
			    (long long)json_integer_value(v));
		else if (json_is_null(v))
			(void)snprintf(buf, sizeof(buf), "null");
	}
	json_decref(a);
	return buf;
}

/* ---- the fake guest of a socketpair ------------------------------------ */

struct dt_peer {
	int fd; /* our end */
	int eof;
	size_t len;
	uint8_t in[2 * PROTO_FRAME_MAX];
	uint8_t frame[PROTO_FRAME_MAX]; /* the last frame taken */
};

/* Connect a fake guest to a new session of instance. */
static inline void
dt_peer_open(struct dt_peer *p, const char *instance)
{
	int sv[2];

	memset(p, 0, sizeof(*p));
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
	    0);
	cr_assert_eq(evutil_make_socket_nonblocking(sv[0]), 0);
	cr_assert_eq(evutil_make_socket_nonblocking(sv[1]), 0);
	p->fd = sv[1];
	cr_assert_eq(session_accept(&dt_b, sv[0], instance), 0);
}

/* Has the broker closed its end of p? (Reads nothing.) */
static inline int
dt_peer_gone(int fd)
{
	struct pollfd pfd = { fd, 0, 0 };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLHUP | POLLERR));
}

/* The monotonic clock, in seconds (for tests that pace themselves). */
static inline double
dt_now(void)
{
	struct timespec ts;

	cr_assert_eq(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void
dt_peer_close(struct dt_peer *p)
{
	if (p->fd >= 0)
		(void)close(p->fd);
	p->fd = -1;
}

static inline void
dt_write_all(int fd, const void *buf, size_t n)
{
	const uint8_t *q = buf;
	ssize_t k;
	int i;

	for (i = 0; n > 0 && i < DT_ITERS; i++) {
		k = write(fd, q, n);
		if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
			dt_step(-1);
			continue;
		}
		cr_assert_gt(k, 0, "write to the broker: %s", strerror(errno));
		q += k;
		n -= (size_t)k;
	}
	cr_assert_eq(n, 0, "the broker does not read");
}

/* Encode m and write it to the broker. */
static inline void
dt_send(struct dt_peer *p, const struct proto_msg *m)
{
	static uint8_t buf[PROTO_FRAME_MAX];
	enum proto_fault f = PROTO_FAULT_NONE;
	int n;

	n = proto_encode(m, buf, sizeof(buf), &f);
	cr_assert_gt(n, 0, "test frame does not encode: %s",
	    proto_fault_str(f));
	dt_write_all(p->fd, buf, (size_t)n);
}

static inline void
dt_msg(struct proto_msg *m, uint8_t type, uint8_t flags, uint32_t stream)
{
	memset(m, 0, offsetof(struct proto_msg, headers));
	m->nheaders = 0;
	m->type = type;
	m->flags = flags;
	m->stream = stream;
}

static inline void
dt_send_hello(struct dt_peer *p, uint16_t version)
{
	struct proto_msg m;

	dt_msg(&m, PROTO_MSG_HELLO, 0, 0);
	m.hello.version = version;
	dt_send(p, &m);
}

static inline void
dt_send_ping(struct dt_peer *p, const char opaque[8])
{
	struct proto_msg m;

	dt_msg(&m, PROTO_MSG_PING, 0, 0);
	memcpy(m.ping.opaque, opaque, PROTO_PING_SIZE);
	dt_send(p, &m);
}

static inline void
dt_str(struct proto_str *s, const char *v)
{
	s->ptr = v;
	s->len = strlen(v);
}

/*
 * A REQUEST on stream for method scheme://authority path with the
 * headers of "Name: value\n" lines in hdrs (NULL: none; the text is
 * split in place, so it must be writable and outlive the call).
 */
static inline void
dt_request(struct proto_msg *m, uint32_t stream, uint8_t flags,
    const char *method, const char *scheme, const char *authority,
    const char *path, char *hdrs)
{
	char *line, *nl, *colon;

	dt_msg(m, PROTO_MSG_REQUEST, flags, stream);
	m->request.transport = PROTO_TRANSPORT_HTTP;
	dt_str(&m->request.method, method);
	dt_str(&m->request.scheme, scheme);
	dt_str(&m->request.authority, authority);
	dt_str(&m->request.path, path);
	for (line = hdrs; line != NULL && *line != '\0'; line = nl) {
		nl = strchr(line, '\n');
		if (nl != NULL)
			*nl++ = '\0';
		colon = strchr(line, ':');
		cr_assert_not_null(colon, "bad test header %s", line);
		*colon = '\0';
		dt_str(&m->headers[m->nheaders].name, line);
		dt_str(&m->headers[m->nheaders].value,
		    colon[1] == ' ' ? colon + 2 : colon + 1);
		m->nheaders++;
	}
}

/* Read what the broker sent, without blocking. */
static inline void
dt_peer_read(struct dt_peer *p)
{
	ssize_t n;

	while (!p->eof && p->len < sizeof(p->in)) {
		n = read(p->fd, p->in + p->len, sizeof(p->in) - p->len);
		if (n > 0)
			p->len += (size_t)n;
		else if (n == 0 || (errno != EAGAIN && errno != EINTR))
			p->eof = 1;
		else
			return;
	}
}

/* Take one complete frame out of p->in into m (its strings point into
 * p->frame until the next call). Return 1, or 0 when none is complete. */
static inline int
dt_take(struct dt_peer *p, struct proto_msg *m)
{
	struct proto_hdr h;
	enum proto_fault f = PROTO_FAULT_NONE;
	size_t total;
	int rv;

	if (p->len < PROTO_HDR_SIZE)
		return 0;
	rv = proto_hdr_decode(p->in, p->len, &h, &f);
	cr_assert_gt(rv, 0, "the broker sent a bad header: %s",
	    proto_fault_str(f));
	total = PROTO_HDR_SIZE + h.length;
	if (p->len < total)
		return 0;
	memcpy(p->frame, p->in, total);
	memmove(p->in, p->in + total, p->len - total);
	p->len -= total;
	rv = proto_frame_decode(p->frame, total, m, &f);
	cr_assert_eq(rv, (int)total, "the broker sent a bad frame: %s",
	    proto_fault_str(f));
	return 1;
}

/*
 * Run the loop until the broker sent one more frame (return 1, frame in
 * m) or closed the connection with nothing left to read (return 0).
 */
static inline int
dt_recv(struct dt_peer *p, struct proto_msg *m)
{
	int i;

	for (i = 0; i < DT_ITERS; i++) {
		dt_peer_read(p);
		if (dt_take(p, m))
			return 1;
		if (p->eof)
			return 0;
		dt_step(p->fd);
	}
	cr_assert_fail("the broker sent nothing and did not close");
	return -1;
}

/* Expect the broker to close the connection; frames before it are
 * counted into *ret_nframes (may be NULL). */
static inline void
dt_expect_eof(struct dt_peer *p, int *ret_nframes)
{
	struct proto_msg *m = malloc(sizeof(*m));
	int n = 0;

	cr_assert_not_null(m);
	while (dt_recv(p, m) == 1)
		n++;
	free(m);
	if (ret_nframes != NULL)
		*ret_nframes = n;
}

/* Open a session and complete the HELLO exchange. */
static inline void
dt_peer_hello(struct dt_peer *p, const char *instance)
{
	struct proto_msg *m = malloc(sizeof(*m));

	cr_assert_not_null(m);
	dt_peer_open(p, instance);
	dt_send_hello(p, PROTO_VERSION);
	cr_assert_eq(dt_recv(p, m), 1, "no HELLO from the broker");
	cr_assert_eq(m->type, PROTO_MSG_HELLO);
	cr_assert_eq(m->hello.version, PROTO_VERSION);
	free(m);
}

/* ---- a loopback upstream answered by hand ----------------------------- */

struct dt_upstream {
	int lfd; /* listening on 127.0.0.1 */
	uint16_t port;
	char authority[32]; /* "127.0.0.1:PORT" */
	int cfd;	    /* the accepted connection, or -1 */
	char req[8192];	    /* what the broker sent */
	size_t reqlen;
	int eof; /* the broker closed cfd */
};

static inline void
dt_upstream_open(struct dt_upstream *u)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);

	memset(u, 0, sizeof(*u));
	u->cfd = -1;
	u->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0);
	cr_assert(u->lfd >= 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(u->lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	cr_assert_eq(listen(u->lfd, 4), 0);
	cr_assert_eq(getsockname(u->lfd, (struct sockaddr *)&sin, &sl), 0);
	u->port = ntohs(sin.sin_port);
	(void)snprintf(u->authority, sizeof(u->authority), "127.0.0.1:%u",
	    (unsigned)u->port);
}

static inline void
dt_upstream_read(struct dt_upstream *u)
{
	ssize_t n;

	if (u->cfd < 0) {
		u->cfd = accept4(u->lfd, NULL, NULL,
		    SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (u->cfd < 0)
			return;
	}
	while (!u->eof && u->reqlen < sizeof(u->req) - 1) {
		n = read(u->cfd, u->req + u->reqlen,
		    sizeof(u->req) - 1 - u->reqlen);
		if (n > 0) {
			u->reqlen += (size_t)n;
			u->req[u->reqlen] = '\0';
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR))
			u->eof = 1;
		else
			return;
	}
}

/* Run the loop until the broker sent a whole request head upstream. */
static inline void
dt_upstream_wait_request(struct dt_upstream *u)
{
	int i;

	for (i = 0; i < DT_ITERS; i++) {
		dt_upstream_read(u);
		if (strstr(u->req, "\r\n\r\n") != NULL)
			return;
		dt_step(u->cfd >= 0 ? u->cfd : u->lfd);
	}
	cr_assert_fail("no request reached the upstream (got %zu bytes)",
	    u->reqlen);
}

/* Run the loop until the broker closed the upstream connection. */
static inline void
dt_upstream_wait_eof(struct dt_upstream *u)
{
	int i;

	for (i = 0; i < DT_ITERS && !u->eof; i++) {
		dt_upstream_read(u);
		if (!u->eof)
			dt_step(u->cfd);
	}
	cr_assert(u->eof, "the broker kept the upstream connection open");
}

/* The broker cut the upstream connection before its end: the upstream
 * must read a reset, never an end of file (a truncated stream would pass
 * for a complete one). Whatever arrives before the reset is skipped. */
static inline void
dt_upstream_expect_reset(struct dt_upstream *u)
{
	char buf[4096];
	ssize_t k = -1;
	int err = 0, i;

	for (i = 0; i < DT_ITERS; i++) {
		if (u->cfd < 0)
			u->cfd = accept4(u->lfd, NULL, NULL,
			    SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (u->cfd >= 0) {
			k = read(u->cfd, buf, sizeof(buf));
			err = errno;
			if (k == 0 || (k < 0 && err != EAGAIN && err != EINTR))
				break;
		}
		dt_step(u->cfd >= 0 ? u->cfd : u->lfd);
	}
	cr_assert_neq(k, 0, "the upstream read a clean end of file");
	cr_assert_lt(k, 0, "the upstream connection stayed open");
	cr_assert_eq(err, ECONNRESET, "upstream read: %s", strerror(err));
}

static inline void
dt_upstream_reply(struct dt_upstream *u, const char *text)
{
	cr_assert(u->cfd >= 0);
	dt_write_all(u->cfd, text, strlen(text));
}

static inline void
dt_upstream_close(struct dt_upstream *u)
{
	if (u->cfd >= 0)
		(void)close(u->cfd);
	if (u->lfd >= 0)
		(void)close(u->lfd);
	u->cfd = u->lfd = -1;
}

#endif /* EGRESS_TESTS_DAEMON_TEST_H */
