/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for STARTTLS on tcp streams (broker/starttls.c and the
 * relay's hold), driven through a real session by a fake guest on a
 * socketpair against a loopback upstream answered by hand: upstream
 * bytes the guest never received when it asks fail the stream as an
 * injection, and nothing reaches the upstream after; after the go-ahead
 * only a TLS record goes upstream, and an upstream that answers
 * plaintext fails the stream (tls-failed); guest DATA after its
 * STARTTLS drops the connection and never reaches the upstream; an
 * unlisted profile is refused. Each case checks the close event's
 * starttls field.
 */
#include "daemon_test.h"

static const char sl_manifest[] =
    "[plugin]\n"
    "name = unit\n"
    "version = 1.0.0\n"
    "permissions = http_client, socket_client\n"
    "[egress]\n"
    "operator_defined = true\n";

static void
sl_setup(void)
{
	char text[2048];

	dt_setup();
	ct_write_str("manifest.ini", sl_manifest);
	(void)snprintf(text, sizeof(text),
	    "[plugins.security]\n"
	    "signature_mode = disabled\n"
	    "[plugins.entries.app]\n"
	    "plugin = unit\n"
	    "manifest = manifest.ini\n"
	    "permissions = socket_client\n"
	    "egress_hosts = 127.0.0.1\n"
	    "egress_allow_loopback = 127.0.0.1\n"
	    "[broker]\n"
	    "instance_socket_dir = %s/run\n"
	    "control_socket = %s/control.sock\n"
	    "[resolver]\n"
	    "servers = 127.0.0.1:9\n"
	    "timeout_ms = 1000\n"
	    "[limits]\n"
	    "connect_timeout_ms = 5000\n",
	    ct_dir, ct_dir);
	ct_write_str("egressd.ini", text);
	confstate_reload(&dt_b.conf);
	cr_assert(confstate_is_valid(&dt_b.conf));
}

TestSuite(starttls, .init = sl_setup, .fini = dt_teardown);

static struct proto_msg M;

/* The next frame that is not a WINDOW_UPDATE (1), or none (0). */
static int
sl_next(struct dt_peer *p, struct proto_msg *m)
{
	int rv;

	while ((rv = dt_recv(p, m)) == 1 && m->type == PROTO_MSG_WINDOW_UPDATE)
		;
	return rv;
}

/* A connected tcp stream 1 to u; u accepted it. */
static void
sl_open(struct dt_peer *p, struct dt_upstream *u)
{
	int i;

	dt_upstream_open(u);
	dt_peer_hello(p, "app");
	dt_msg(&M, PROTO_MSG_REQUEST, 0, 1);
	M.request.transport = PROTO_TRANSPORT_TCP;
	dt_str(&M.request.authority, u->authority);
	dt_send(p, &M);
	cr_assert_eq(sl_next(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_RESPONSE, "got %s",
	    proto_type_name(M.type));
	for (i = 0; i < DT_ITERS && u->cfd < 0; i++) {
		dt_upstream_read(u);
		dt_step(u->lfd);
	}
	cr_assert_geq(u->cfd, 0);
}

static void
sl_send_starttls(struct dt_peer *p, const char *profile)
{
	dt_msg(&M, PROTO_MSG_STARTTLS, 0, 1);
	dt_str(&M.starttls.tls_profile, profile);
	dt_send(p, &M);
}

static void
sl_expect_error(struct dt_peer *p, uint32_t code)
{
	cr_assert_eq(sl_next(p, &M), 1);
	while (M.type == PROTO_MSG_DATA)
		cr_assert_eq(sl_next(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_ERROR, "got %s",
	    proto_type_name(M.type));
	cr_assert_eq(M.error.code, code, "code %u, want %u", M.error.code,
	    code);
}

static void
sl_wait_close(void)
{
	int i;

	for (i = 0; i < DT_ITERS && dt_log_count("egress.close") == 0; i++)
		dt_step(-1);
	cr_assert_eq(dt_log_count("egress.close"), 1);
}

/* Upstream bytes wait in the broker (the guest's window is shut) when
 * the guest asks: an injection; nothing goes upstream after. */
Test(starttls, undelivered_upstream_bytes_fail)
{
	static char chunk[16384];
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	size_t got = 0, sent = 0;
	ssize_t k;
	int i;

	cr_assert_not_null(p);
	memset(chunk, 'i', sizeof(chunk));
	sl_open(p, &u);
	for (i = 0; i < DT_ITERS && got < PROTO_STREAM_WINDOW; i++) {
		while (sent < 512 * 1024 &&
		    (k = write(u.cfd, chunk, sizeof(chunk))) > 0)
			sent += (size_t)k;
		dt_step(p->fd);
		dt_peer_read(p);
		while (dt_take(p, &M))
			if (M.type == PROTO_MSG_DATA)
				got += M.data.len;
	}
	cr_assert_eq(got, PROTO_STREAM_WINDOW);
	cr_assert_gt(sent, got);
	sl_send_starttls(p, "");
	sl_expect_error(p, PROTO_CODE_TLS_FAILED);
	sl_wait_close();
	cr_assert_str_eq(dt_log_last("egress.close", "starttls"),
	    "starttls-injection");
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "tls-failed");
	dt_upstream_wait_eof(&u);
	cr_assert_eq(u.reqlen, 0, "bytes went upstream: %zu", u.reqlen);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* After the go-ahead only a TLS record goes upstream; plaintext back
 * fails the stream. */
Test(starttls, handshake_fails)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	int i;

	cr_assert_not_null(p);
	sl_open(p, &u);
	dt_msg(&M, PROTO_MSG_DATA, 0, 1);
	M.data.ptr = (const uint8_t *)"STARTTLS\r\n";
	M.data.len = 10;
	dt_send(p, &M);
	for (i = 0; i < DT_ITERS && u.reqlen < 10; i++) {
		dt_upstream_read(&u);
		dt_step(u.cfd);
	}
	cr_assert_str_eq(u.req, "STARTTLS\r\n");
	dt_upstream_reply(&u, "220 go ahead\r\n");
	cr_assert_eq(sl_next(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_DATA);
	sl_send_starttls(p, "");
	for (i = 0; i < DT_ITERS && u.reqlen < 16; i++) {
		dt_upstream_read(&u);
		dt_step(u.cfd);
	}
	cr_assert_eq((unsigned char)u.req[10], 0x16,
	    "not a TLS handshake record after the go-ahead");
	/* Credit from the guest during the handshake moves nothing. */
	dt_msg(&M, PROTO_MSG_WINDOW_UPDATE, 0, 1);
	M.window_update.increment = 1000;
	dt_send(p, &M);
	for (i = 0; i < 20; i++)
		dt_step(-1);
	dt_upstream_reply(&u, "500 not tls\r\n");
	sl_expect_error(p, PROTO_CODE_TLS_FAILED);
	sl_wait_close();
	cr_assert_str_eq(dt_log_last("egress.close", "starttls"), "tls");
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* Guest DATA right after its STARTTLS: a violation, never relayed. */
Test(starttls, data_after_request_drops_connection)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	int i;

	cr_assert_not_null(p);
	sl_open(p, &u);
	sl_send_starttls(p, "");
	dt_msg(&M, PROTO_MSG_DATA, 0, 1);
	M.data.ptr = (const uint8_t *)"PLAINTEXT";
	M.data.len = 9;
	dt_send(p, &M);
	dt_expect_eof(p, NULL);
	for (i = 0; i < 50; i++) {
		dt_upstream_read(&u);
		dt_step(-1);
	}
	cr_assert_null(strstr(u.req, "PLAINTEXT"), "plaintext went upstream");
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* A profile the entry does not list: refused, nothing upgraded. */
Test(starttls, unlisted_profile)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;

	cr_assert_not_null(p);
	sl_open(p, &u);
	sl_send_starttls(p, "nope");
	sl_expect_error(p, PROTO_CODE_INVALID_REQUEST);
	sl_wait_close();
	cr_assert_str_eq(dt_log_last("egress.close", "starttls"),
	    "tls-profile-not-allowed");
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}
