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
 * unlisted profile is refused, also one a reload unlisted after the
 * stream opened; the hold and the handshake are bounded by the connect
 * timeout; the handshake takes a unit of the instance's fair share; a
 * stream reset before the outcome says so. Each case checks the close
 * event's starttls field; a failed upgrade resets the upstream.
 */
#include <sys/socket.h>

#include <openssl/pem.h>
#include <openssl/x509.h>

#include "broker/net/share.h"
#include "broker/request.h"
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
	dt_upstream_expect_reset(&u);
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

/* A self-signed certificate as ca.crt: a profile's trust file. */
static void
sl_write_ca(void)
{
	EVP_PKEY *k = ct_keygen("EC");
	X509 *x = X509_new();
	BIO *b = BIO_new(BIO_s_mem());
	X509_NAME *n;
	char *data;
	long len;

	cr_assert(k != NULL && x != NULL && b != NULL);
	cr_assert(X509_set_version(x, 2));
	cr_assert(ASN1_INTEGER_set(X509_get_serialNumber(x), 1));
	cr_assert_not_null(X509_gmtime_adj(X509_getm_notBefore(x), 0));
	cr_assert_not_null(X509_gmtime_adj(X509_getm_notAfter(x), 3600));
	cr_assert(X509_set_pubkey(x, k));
	n = X509_get_subject_name(x);
	cr_assert(X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
	    (const unsigned char *)"ca", -1, -1, 0));
	cr_assert(X509_set_issuer_name(x, n));
	cr_assert(X509_sign(x, k, EVP_sha256()) > 0);
	cr_assert(PEM_write_bio_X509(b, x));
	len = BIO_get_mem_data(b, &data);
	ct_write("ca.crt", data, (size_t)len);
	BIO_free(b);
	X509_free(x);
	EVP_PKEY_free(k);
}

/* Load a configuration with profile p (listed by the entry or not) and
 * connect timeout ms, as a reload does. */
static void
sl_conf(int listed, int ms)
{
	char text[2048];

	(void)snprintf(text, sizeof(text),
	    "[plugins.security]\n"
	    "signature_mode = disabled\n"
	    "[tls.profiles.p]\n"
	    "ca_file = ca.crt\n"
	    "[plugins.entries.app]\n"
	    "plugin = unit\n"
	    "manifest = manifest.ini\n"
	    "permissions = socket_client\n"
	    "egress_hosts = 127.0.0.1\n"
	    "egress_allow_loopback = 127.0.0.1\n"
	    "%s"
	    "[broker]\n"
	    "instance_socket_dir = %s/run\n"
	    "control_socket = %s/control.sock\n"
	    "[resolver]\n"
	    "servers = 127.0.0.1:9\n"
	    "timeout_ms = 1000\n"
	    "[limits]\n"
	    "connect_timeout_ms = %d\n",
	    listed ? "tls_profiles = p\n" : "", ct_dir, ct_dir, ms);
	ct_write_str("egressd.ini", text);
	confstate_reload(&dt_b.conf);
	cr_assert(confstate_is_valid(&dt_b.conf));
	cr_assert_eq(broker_apply_conf(&dt_b, dt_b.conf.cur->snap), 0);
}

/* The entry listed p when the tcp stream opened; a reload unlisted it
 * (the stream survives: it has no profile yet). STARTTLS p is decided on
 * the configuration in force then: refused, nothing goes upstream, p's
 * credentials are never presented. */
Test(starttls, profile_unlisted_by_reload_is_refused)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	int i;

	cr_assert_not_null(p);
	sl_write_ca();
	sl_conf(1, 5000);
	sl_open(p, &u);
	sl_conf(0, 5000);
	cr_assert_eq(request_revoke_streams(&dt_b, dt_b.conf.cur->snap), 0);
	sl_send_starttls(p, "p");
	sl_expect_error(p, PROTO_CODE_INVALID_REQUEST);
	sl_wait_close();
	cr_assert_str_eq(dt_log_last("egress.close", "starttls"),
	    "tls-profile-not-allowed");
	for (i = 0; i < 20; i++) {
		dt_upstream_read(&u);
		dt_step(u.cfd);
	}
	cr_assert_eq(u.reqlen, 0,
	    "%zu bytes (first 0x%02x) went upstream after the refusal",
	    u.reqlen, (unsigned char)u.req[0]);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* An upstream that stops reading: the guest's bytes never all reach the
 * socket, so the hold never ends by itself. The connect timeout bounds
 * it. */
Test(starttls, stalled_hold_times_out)
{
	static char chunk[PROTO_DATA_MAX];
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	uint64_t sw = PROTO_STREAM_WINDOW, cw = 1048576, total = 0;
	int idle = 0, i, small = 4096;

	cr_assert_not_null(p);
	memset(chunk, 'x', sizeof(chunk));
	sl_write_ca();
	sl_conf(0, 300);
	sl_open(p, &u);
	(void)setsockopt(u.cfd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	/* Send while the broker grants credit, until it stops granting. */
	for (i = 0; i < 20 * DT_ITERS && idle < 100; i++) {
		uint64_t n = sw < cw ? sw : cw;

		if (n > sizeof(chunk))
			n = sizeof(chunk);
		if (n > 0) {
			dt_msg(&M, PROTO_MSG_DATA, 0, 1);
			M.data.ptr = (const uint8_t *)chunk;
			M.data.len = (uint32_t)n;
			dt_send(p, &M);
			sw -= n;
			cw -= n;
			total += n;
			idle = 0;
		} else
			idle++;
		dt_step(p->fd);
		dt_peer_read(p);
		while (dt_take(p, &M)) {
			cr_assert_eq(M.type, PROTO_MSG_WINDOW_UPDATE, "got %s",
			    proto_type_name(M.type));
			if (M.stream == 0)
				cw += M.window_update.increment;
			else
				sw += M.window_update.increment;
		}
	}
	cr_assert_eq(idle, 100, "the upstream took everything (%llu bytes)",
	    (unsigned long long)total);
	sl_send_starttls(p, "");
	sl_expect_error(p, PROTO_CODE_TIMEOUT);
	sl_wait_close();
	cr_assert_str_eq(dt_log_last("egress.close", "starttls"),
	    "starttls-timeout");
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* The instance's fair share of TLS handshakes is used up: the upgrade's
 * handshake is refused as a dialed one is, and nothing goes upstream. */
Test(starttls, handshake_share_exhausted)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	size_t held = 0;
	int i;

	cr_assert_not_null(p);
	cr_assert_not_null(dt_b.tls_share);
	while (held < 100000 &&
	    share_acquire(dt_b.tls_share, "app", NULL, 1) == 0)
		held++;
	cr_assert_gt(held, 0);
	sl_open(p, &u);
	sl_send_starttls(p, "");
	sl_expect_error(p, PROTO_CODE_BUDGET_EXHAUSTED);
	sl_wait_close();
	cr_assert_str_eq(dt_log_last("egress.close", "starttls"),
	    "budget-exhausted");
	for (i = 0; i < 20; i++) {
		dt_upstream_read(&u);
		dt_step(u.cfd);
	}
	cr_assert_eq(u.reqlen, 0, "%zu bytes went upstream", u.reqlen);
	share_release(dt_b.tls_share, "app", held);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* A handshake the upgrade took returns its unit of the share at its end:
 * after a failed one, the instance can take its whole share again. */
Test(starttls, handshake_share_returned)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	size_t held = 0, again = 0;
	int i;

	cr_assert_not_null(p);
	while (held < 100000 &&
	    share_acquire(dt_b.tls_share, "app", NULL, 1) == 0)
		held++;
	share_release(dt_b.tls_share, "app", held);
	sl_open(p, &u);
	sl_send_starttls(p, "");
	for (i = 0; i < DT_ITERS && u.reqlen == 0; i++) {
		dt_upstream_read(&u);
		dt_step(u.cfd);
	}
	cr_assert_eq((unsigned char)u.req[0], 0x16, "no handshake started");
	dt_upstream_reply(&u, "500 not tls\r\n");
	sl_expect_error(p, PROTO_CODE_TLS_FAILED);
	sl_wait_close();
	while (again < 100000 &&
	    share_acquire(dt_b.tls_share, "app", NULL, 1) == 0)
		again++;
	share_release(dt_b.tls_share, "app", again);
	cr_assert_eq(again, held, "the handshake kept %zu units",
	    held - again);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* The guest resets the stream while its handshake runs: the close event
 * says the upgrade was aborted. */
Test(starttls, reset_during_handshake_logs_aborted)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	const char *v;
	int i;

	cr_assert_not_null(p);
	sl_open(p, &u);
	sl_send_starttls(p, "");
	for (i = 0; i < DT_ITERS && u.reqlen == 0; i++) {
		dt_upstream_read(&u);
		dt_step(u.cfd);
	}
	cr_assert_eq((unsigned char)u.req[0], 0x16, "no handshake started");
	dt_msg(&M, PROTO_MSG_RESET, 0, 1);
	M.reset.code = PROTO_CODE_CANCELLED;
	dt_send(p, &M);
	sl_wait_close();
	v = dt_log_last("egress.close", "starttls");
	cr_assert_not_null(v, "the close event has no starttls outcome");
	cr_assert_str_eq(v, "starttls-aborted");
	/* Cut in the handshake: a reset, never an end of file. */
	dt_upstream_expect_reset(&u);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}
