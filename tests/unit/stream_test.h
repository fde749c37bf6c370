/* SPDX-License-Identifier: ISC */
/*
 * Helpers shared by the tcp stream unit tests (header-only, static
 * functions, on daemon_test.h): the configuration ("app" may open tcp
 * and tls streams to 127.0.0.1, "webonly" has http_client only), frames
 * a fake guest sends and expects on a stream, and a tcp stream opened to
 * a loopback upstream the test answers by hand.
 */
#ifndef EGRESS_TESTS_STREAM_TEST_H
#define EGRESS_TESTS_STREAM_TEST_H

#include "daemon_test.h"

#include "broker/request.h"

static const char st_manifest[] =
    "[plugin]\n"
    "name = unit\n"
    "version = 1.0.0\n"
    "permissions = http_client, socket_client\n"
    "[egress]\n"
    "operator_defined = true\n";

/* Write the configuration of these tests: "app" gets perms (and
 * 127.0.0.1 when grant_local), "webonly" http_client only; a budget of
 * 2, a one-minute idle timeout. */
static inline void
st_write_conf(const char *perms, int grant_local)
{
	char text[2048];

	(void)snprintf(text, sizeof(text),
	    "[plugins.security]\n"
	    "signature_mode = disabled\n"
	    "[plugins.limits]\n"
	    "max_connections_per_instance = 2\n"
	    "[plugins.entries.app]\n"
	    "plugin = unit\n"
	    "manifest = manifest.ini\n"
	    "permissions = %s\n"
	    "egress_hosts = %s169.254.169.254\n"
	    "egress_allow_loopback = %s\n"
	    "[plugins.entries.webonly]\n"
	    "plugin = unit\n"
	    "manifest = manifest.ini\n"
	    "permissions = http_client\n"
	    "egress_hosts = 127.0.0.1\n"
	    "egress_allow_loopback = 127.0.0.1\n"
	    "[broker]\n"
	    "instance_socket_dir = %s/run\n"
	    "control_socket = %s/control.sock\n"
	    "[resolver]\n"
	    "servers = 127.0.0.1:9\n"
	    "timeout_ms = 1000\n"
	    "[limits]\n"
	    "connect_timeout_ms = 5000\n"
	    "stream_idle_timeout_ms = 60000\n",
	    perms, grant_local ? "127.0.0.1, " : "",
	    grant_local ? "127.0.0.1" : "", ct_dir, ct_dir);
	ct_write_str("egressd.ini", text);
	confstate_reload(&dt_b.conf);
	cr_assert(confstate_is_valid(&dt_b.conf));
}

/* As dt_setup(), with socket_client granted to "app" (not "webonly"). */
static inline void
st_setup(void)
{
	dt_setup();
	ct_write_str("manifest.ini", st_manifest);
	st_write_conf("http_client, socket_client", 1);
}

static struct proto_msg M;

/* A tcp (or tls) REQUEST on stream for authority, with timeouts. */
static inline void
st_request(struct proto_msg *m, uint32_t stream, uint8_t transport,
    uint8_t flags, const char *authority)
{
	dt_msg(m, PROTO_MSG_REQUEST, flags, stream);
	m->request.transport = transport;
	dt_str(&m->request.authority, authority);
}

static inline void
st_send_data(struct dt_peer *p, uint32_t stream, const char *s, uint8_t flags)
{
	struct proto_msg m;

	dt_msg(&m, PROTO_MSG_DATA, flags, stream);
	m.data.ptr = (const uint8_t *)s;
	m.data.len = strlen(s);
	dt_send(p, &m);
}

static inline void
st_send_window(struct dt_peer *p, uint32_t stream, uint32_t inc)
{
	struct proto_msg m;

	dt_msg(&m, PROTO_MSG_WINDOW_UPDATE, 0, stream);
	m.window_update.increment = inc;
	dt_send(p, &m);
}

/* The next frame that is not a WINDOW_UPDATE (1), or none (0). */
static inline int
st_next(struct dt_peer *p, struct proto_msg *m)
{
	int rv;

	while ((rv = dt_recv(p, m)) == 1 && m->type == PROTO_MSG_WINDOW_UPDATE)
		;
	return rv;
}

/* Expect DATA frames on stream carrying exactly want, the last one
 * with END_STREAM when end is set. */
static inline void
st_expect_data(struct dt_peer *p, uint32_t stream, const char *want, int end)
{
	char got[4096];
	size_t n = 0;

	for (;;) {
		cr_assert_eq(st_next(p, &M), 1, "no DATA (got '%.*s')", (int)n,
		    got);
		cr_assert_eq(M.type, PROTO_MSG_DATA, "got %s (code %u)",
		    proto_type_name(M.type), M.error.code);
		cr_assert_eq(M.stream, stream);
		cr_assert_leq(n + M.data.len, sizeof(got));
		memcpy(got + n, M.data.ptr, M.data.len);
		n += M.data.len;
		if (n >= strlen(want) &&
		    (!end || M.flags & PROTO_FLAG_END_STREAM))
			break;
		cr_assert_eq(M.flags & PROTO_FLAG_END_STREAM, 0,
		    "END_STREAM after '%.*s'", (int)n, got);
	}
	cr_assert_eq(n, strlen(want));
	cr_assert_eq(memcmp(got, want, n), 0, "got '%.*s'", (int)n, got);
}

static inline void
st_expect_response(struct dt_peer *p, uint32_t stream)
{
	cr_assert_eq(st_next(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_RESPONSE, "got %s (code %u)",
	    proto_type_name(M.type), M.error.code);
	cr_assert_eq(M.stream, stream);
	cr_assert_eq(M.response.status, 200);
	cr_assert_eq(M.flags & PROTO_FLAG_END_STREAM, 0);
}

static inline void
st_expect_error(struct dt_peer *p, uint32_t stream, uint32_t code)
{
	cr_assert_eq(st_next(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_ERROR, "got %s",
	    proto_type_name(M.type));
	cr_assert_eq(M.stream, stream);
	cr_assert_eq(M.error.code, code, "code %u, want %u", M.error.code,
	    code);
}

/* Run the loop until the upstream accepted and read at least n bytes. */
static inline void
st_up_read(struct dt_upstream *u, size_t n)
{
	int i;

	for (i = 0; i < DT_ITERS && u->reqlen < n && !u->eof; i++) {
		dt_upstream_read(u);
		if (u->reqlen < n)
			dt_step(u->cfd >= 0 ? u->cfd : u->lfd);
	}
	cr_assert_geq(u->reqlen, n, "the upstream read %zu bytes", u->reqlen);
}

/* Run the loop until the close event was logged. */
static inline void
st_wait_close(void)
{
	int i;

	for (i = 0; i < DT_ITERS && dt_log_count("egress.close") == 0; i++)
		dt_step(-1);
	cr_assert_eq(dt_log_count("egress.close"), 1);
}

/* Open a tcp stream 1 for "app" to a fresh upstream u, and run the loop
 * until the upstream accepted it. */
static inline void
st_open_tcp(struct dt_peer *p, struct dt_upstream *u)
{
	int i;

	dt_upstream_open(u);
	dt_peer_hello(p, "app");
	st_request(&M, 1, PROTO_TRANSPORT_TCP, 0, u->authority);
	dt_send(p, &M);
	st_expect_response(p, 1);
	for (i = 0; i < DT_ITERS && u->cfd < 0; i++) {
		dt_upstream_read(u);
		dt_step(u->lfd);
	}
	cr_assert_geq(u->cfd, 0);
}

/* The guest ends stream 1, sends after (NULL: nothing) and closes its
 * connection at once: the upstream must then read exactly sent bytes and
 * end of file, and the close event be logged. */
static inline void
st_end_and_leave(struct dt_peer *p, struct dt_upstream *u, size_t sent,
    const struct proto_msg *after)
{
	struct proto_msg m;
	char buf[65536];
	size_t got = 0;
	ssize_t k = -1;
	int i;

	dt_msg(&m, PROTO_MSG_DATA, PROTO_FLAG_END_STREAM, 1);
	dt_send(p, &m);
	if (after != NULL)
		dt_send(p, after);
	dt_peer_close(p);
	for (i = 0; i < 4 * DT_ITERS; i++) {
		k = read(u->cfd, buf, sizeof(buf));
		if (k == 0)
			break;
		if (k > 0)
			got += (size_t)k;
		dt_step(u->cfd);
	}
	cr_assert_eq(got, sent, "the upstream got %zu of %zu bytes", got,
	    sent);
	cr_assert_eq(k, 0, "no end of file upstream");
	st_wait_close();
}

/* Run the loop until the guest got want bytes of DATA in all (counted on
 * from *got), granting nothing. */
static inline void
st_count_data(struct dt_peer *p, size_t *got, size_t want)
{
	int i;

	for (i = 0; i < DT_ITERS && *got < want; i++) {
		dt_step(p->fd);
		dt_peer_read(p);
		while (dt_take(p, &M))
			if (M.type == PROTO_MSG_DATA)
				*got += M.data.len;
	}
	cr_assert_eq(*got, want, "got %zu", *got);
}

#endif
