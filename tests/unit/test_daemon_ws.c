/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for websocket streams (broker/request_ws.c, broker/wsock.c),
 * driven through a real session by a fake guest on a socketpair, against
 * a loopback upstream the test answers by hand: the opening handshake as
 * the broker writes it (its own key and version, the guest's headers,
 * the authorized Host), the 101 checked, a message each way (the
 * guest's masked upstream), the upstream's close passed to the guest and
 * answered; a version-1 connection refused (invalid-request), no
 * websocket_client permission (denied), a guest Host override and a
 * handshake header of the guest's own (invalid-request); the stream's
 * buffers charged to its instance's memory budget; an upstream ping
 * flood queues a bounded number of pongs; a guest RESET sends close
 * 1001 upstream before the connection closes; a guest that leaves
 * before the broker read its last messages still has them relayed,
 * then close 1001; the drain closes a
 * websocket still in its handshake once it is open; once the upstream
 * ended, a guest that closed and takes nothing ends with the close wait,
 * and a guest gone ends with the upstream; small messages within the
 * guest's window wait for a slow upstream (flow control, not a failed
 * stream) and all arrive in order.
 */
#include "daemon_test.h"

#include <criterion/parameterized.h>
#include <openssl/evp.h>

#include "broker/net/share.h"
#include "broker/request.h"
#include "broker/wsock.h"

static const char ws_manifest[] =
    "[plugin]\n"
    "name = unit\n"
    "version = 1.0.0\n"
    "permissions = http_client, websocket_client\n"
    "[egress]\n"
    "operator_defined = true\n";

static void
ws_setup(void)
{
	char text[2048];

	dt_setup();
	ct_write_str("manifest.ini", ws_manifest);
	(void)snprintf(text, sizeof(text),
	    "[plugins.security]\n"
	    "signature_mode = disabled\n"
	    "[plugins.entries.app]\n"
	    "plugin = unit\n"
	    "manifest = manifest.ini\n"
	    "permissions = http_client, websocket_client\n"
	    "egress_hosts = 127.0.0.1\n"
	    "egress_allow_loopback = 127.0.0.1\n"
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
	    "[limits]\n"
	    "connect_timeout_ms = 5000\n",
	    ct_dir, ct_dir);
	ct_write_str("egressd.ini", text);
	confstate_reload(&dt_b.conf);
	cr_assert(confstate_is_valid(&dt_b.conf));
}

TestSuite(ws, .init = ws_setup, .fini = dt_teardown);

static struct proto_msg M;

/* A websocket REQUEST for authority and path, with extra headers. */
static void
ws_request(struct proto_msg *m, uint32_t stream, const char *authority,
    char *hdrs)
{
	dt_request(m, stream, 0, "GET", "ws", authority, "/feed?x=1", hdrs);
	m->request.transport = PROTO_TRANSPORT_WEBSOCKET;
}

static int
ws_next(struct dt_peer *p, struct proto_msg *m)
{
	int rv;

	while ((rv = dt_recv(p, m)) == 1 && m->type == PROTO_MSG_WINDOW_UPDATE)
		;
	return rv;
}

static void
ws_expect_error(struct dt_peer *p, uint32_t stream, uint32_t code)
{
	cr_assert_eq(ws_next(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_ERROR, "got %s",
	    proto_type_name(M.type));
	cr_assert_eq(M.stream, stream);
	cr_assert_eq(M.error.code, code, "code %u, want %u", M.error.code,
	    code);
}

/* The Sec-WebSocket-Accept value of the key in the request u read. */
static void
ws_accept_of(const struct dt_upstream *u, char out[29])
{
	const char *k = strstr(u->req, "Sec-WebSocket-Key: ");
	char buf[24 + 36];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	cr_assert_not_null(k, "no key in %s", u->req);
	memcpy(buf, k + 19, 24);
	// NOLINTNEXTLINE(bugprone-not-null-terminated-result): hashed by length
	memcpy(buf + 24, "258EAFA5-E914-47DA-95CA-C5AB0DC85B11", 36);
	cr_assert_eq(EVP_Digest(buf, sizeof(buf), md, &mdlen, EVP_sha1(),
			 NULL),
	    1);
	cr_assert_eq(EVP_EncodeBlock((unsigned char *)out, md, 20), 28);
}

Test(ws, handshake_message_each_way_upstream_close)
{
	struct dt_peer *p = malloc(sizeof(*p));
	char hdrs[] = "Authorization: Bearer x\nOrigin: https://o.example";
	char accept[29], reply[256];
	static const uint8_t text[] = { 0x81, 3, 'a', 'b', 'c' };
	static const uint8_t close[] = { 0x88, 5, 0x0f, 0xa1, 'b', 'y', 'e' };
	struct dt_upstream u;
	const uint8_t *f;
	char *expo = NULL;
	size_t before, elen = 0;
	int i;

	cr_assert_not_null(p);
	dt_upstream_open(&u);
	dt_peer_hello(p, "app");
	ws_request(&M, 1, u.authority, hdrs);
	dt_send(p, &M);
	dt_upstream_wait_request(&u);
	cr_assert(strncmp(u.req, "GET /feed?x=1 HTTP/1.1\r\n", 24) == 0, "%s",
	    u.req);
	cr_assert_not_null(strstr(u.req, "\r\nUpgrade: websocket\r\n"));
	cr_assert_not_null(strstr(u.req, "\r\nConnection: Upgrade\r\n"));
	cr_assert_not_null(strstr(u.req, "\r\nSec-WebSocket-Version: 13\r\n"));
	cr_assert_not_null(strstr(u.req, "\r\nAuthorization: Bearer x\r\n"));
	cr_assert_not_null(strstr(u.req, "\r\nOrigin: https://o.example\r\n"));
	(void)snprintf(reply, sizeof(reply), "\r\nHost: %s\r\n", u.authority);
	cr_assert_not_null(strstr(u.req, reply), "%s", u.req);
	ws_accept_of(&u, accept);
	accept[28] = '\0';
	(void)snprintf(reply, sizeof(reply),
	    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
	    "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
	    accept);
	dt_upstream_reply(&u, reply);
	dt_write_all(u.cfd, text, sizeof(text));
	cr_assert_eq(ws_next(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_RESPONSE);
	cr_assert_eq(M.response.status, 101);
	cr_assert_eq(M.flags & PROTO_FLAG_END_STREAM, 0);
	cr_assert_eq(ws_next(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_DATA);
	cr_assert_eq(M.flags, PROTO_FLAG_MSG_END);
	cr_assert_eq(M.data.len, 3);
	cr_assert(memcmp(M.data.ptr, "abc", 3) == 0);
	cr_assert_eq(lease_count(dt_b.leases, "app"), 1);

	/* The guest's message goes up masked. */
	before = u.reqlen;
	dt_msg(&M, PROTO_MSG_DATA, PROTO_FLAG_MSG_END | PROTO_FLAG_BINARY, 1);
	M.data.ptr = (const uint8_t *)"hi";
	M.data.len = 2;
	dt_send(p, &M);
	for (i = 0; i < DT_ITERS && u.reqlen < before + 8; i++) {
		dt_upstream_read(&u);
		dt_step(u.cfd);
	}
	cr_assert_eq(u.reqlen, before + 8);
	f = (const uint8_t *)u.req + before;
	cr_assert_eq(f[0], 0x82);
	cr_assert_eq(f[1], 0x82);
	cr_assert_eq(f[6] ^ f[2], 'h');
	cr_assert_eq(f[7] ^ f[3], 'i');

	/* The upstream's close reaches the guest; the guest answers. */
	dt_write_all(u.cfd, close, sizeof(close));
	cr_assert_eq(ws_next(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_WS_CONTROL);
	cr_assert_eq(M.ws_control.opcode, PROTO_WS_CLOSE);
	cr_assert_eq(M.ws_control.code, 4001);
	cr_assert_eq(M.ws_control.len, 3);
	cr_assert_eq(M.flags, PROTO_FLAG_END_STREAM);
	dt_msg(&M, PROTO_MSG_WS_CONTROL, PROTO_FLAG_END_STREAM, 1);
	M.ws_control.opcode = PROTO_WS_CLOSE;
	dt_send(p, &M);
	for (i = 0; i < DT_ITERS && dt_log_count("egress.close") == 0; i++)
		dt_step(-1);
	cr_assert_eq(dt_log_count("egress.close"), 1);
	cr_assert_str_eq(dt_log_last("egress.close", "transport"),
	    "websocket");
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "null");
	cr_assert_str_eq(dt_log_last("egress.close", "close_code"), "4001");
	cr_assert_str_eq(dt_log_last("egress.close", "messages_in"), "1");
	cr_assert_str_eq(dt_log_last("egress.close", "messages_out"), "1");
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	/* Metrics by transport, and the messages. */
	cr_assert_eq(metrics_format(dt_b.metrics, NULL, &expo, &elen), 0);
	cr_assert_not_null(strstr(expo,
	    "egressd_connections_closed_total{transport=\"websocket\"} 1\n"));
	cr_assert_not_null(strstr(expo,
	    "egressd_websocket_messages_total{direction=\"in\"} 1\n"));
	cr_assert_not_null(strstr(expo,
	    "egressd_websocket_messages_total{direction=\"out\"} 1\n"));
	free(expo);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* An answer to the handshake sent a byte at a time (each read searched
 * only for what it added) opens the WebSocket once its end arrives,
 * its blank line split across reads. */
Test(ws, an_answer_sent_a_byte_at_a_time_opens)
{
	struct dt_peer *p = malloc(sizeof(*p));
	char hdrs[] = "";
	char accept[29], reply[256];
	struct dt_upstream u;
	size_t i, n;

	cr_assert_not_null(p);
	dt_upstream_open(&u);
	dt_peer_hello(p, "app");
	ws_request(&M, 1, u.authority, hdrs);
	dt_send(p, &M);
	dt_upstream_wait_request(&u);
	ws_accept_of(&u, accept);
	accept[28] = '\0';
	n = (size_t)snprintf(reply, sizeof(reply),
	    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
	    "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
	    accept);
	for (i = 0; i + 1 < n; i++) {
		dt_write_all(u.cfd, reply + i, 1);
		dt_step(u.cfd);
	}
	dt_peer_read(p);
	while (dt_take(p, &M))
		cr_assert_neq(M.type, PROTO_MSG_RESPONSE,
		    "answered before the end arrived");
	dt_write_all(u.cfd, reply + n - 1, 1);
	cr_assert_eq(ws_next(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_RESPONSE);
	cr_assert_eq(M.response.status, 101);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* A version-1 connection has no websocket streams. */
Test(ws, version_1_is_invalid_request)
{
	struct dt_peer *p = malloc(sizeof(*p));

	cr_assert_not_null(p);
	dt_peer_open(p, "app");
	dt_send_hello(p, 1);
	cr_assert_eq(dt_recv(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_HELLO);
	cr_assert_eq(M.hello.version, 1);
	ws_request(&M, 1, "127.0.0.1:9", NULL);
	dt_send(p, &M);
	ws_expect_error(p, 1, PROTO_CODE_INVALID_REQUEST);
	cr_assert_str_eq(dt_log_last("egress.decision", "reason"),
	    "invalid-request");
	cr_assert_str_eq(dt_log_last("egress.decision", "detail"),
	    "websocket needs protocol version 2");
	dt_peer_close(p);
	free(p);
}

struct refusal {
	char name[24];
	char instance[16];
	char hdrs[96];
	uint32_t code;
	char reason[24];
};

static struct refusal refusals[] = {
	{ "no-permission", "webonly", "", PROTO_CODE_DENIED, "no-permission" },
	{ "host-override", "app", "Host: 127.0.0.2:9",
	    PROTO_CODE_INVALID_REQUEST, "invalid-request" },
	{ "own-key", "app", "Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAA==",
	    PROTO_CODE_INVALID_REQUEST, "invalid-request" },
	{ "upgrade", "app", "Upgrade: h2c", PROTO_CODE_INVALID_REQUEST,
	    "invalid-request" },
	{ "extensions", "app", "Sec-WebSocket-Extensions: permessage-deflate",
	    PROTO_CODE_INVALID_REQUEST, "invalid-request" },
};

ParameterizedTestParameters(ws, refused)
{
	return cr_make_param_array(struct refusal, refusals,
	    sizeof(refusals) / sizeof(refusals[0]));
}

ParameterizedTest(struct refusal *c, ws, refused)
{
	struct dt_peer *p = malloc(sizeof(*p));

	cr_assert_not_null(p);
	dt_peer_hello(p, c->instance);
	ws_request(&M, 1, "127.0.0.1:9", c->hdrs[0] ? c->hdrs : NULL);
	dt_send(p, &M);
	ws_expect_error(p, 1, c->code);
	cr_assert_str_eq(dt_log_last("egress.decision", "reason"), c->reason,
	    "%s", c->name);
	cr_assert_str_eq(dt_log_last("egress.decision", "transport"),
	    "websocket");
	cr_assert_eq(lease_count(dt_b.leases, c->instance), 0);
	dt_peer_close(p);
	free(p);
}

/* The guest's close that the upstream never answers: after
 * WSOCK_CLOSE_WAIT_MS the guest gets close 1006 and the stream ends. */
Test(ws, unanswered_close_is_1006, .timeout = 30)
{
	struct dt_peer *p = malloc(sizeof(*p));
	char accept[29], reply[256];
	struct dt_upstream u;
	int i;

	cr_assert_not_null(p);
	dt_upstream_open(&u);
	dt_peer_hello(p, "app");
	ws_request(&M, 1, u.authority, NULL);
	dt_send(p, &M);
	dt_upstream_wait_request(&u);
	ws_accept_of(&u, accept);
	accept[28] = '\0';
	(void)snprintf(reply, sizeof(reply),
	    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
	    "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
	    accept);
	dt_upstream_reply(&u, reply);
	cr_assert_eq(ws_next(p, &M), 1);
	cr_assert_eq(M.response.status, 101);
	dt_msg(&M, PROTO_MSG_WS_CONTROL, PROTO_FLAG_END_STREAM, 1);
	M.ws_control.opcode = PROTO_WS_CLOSE;
	M.ws_control.code = 1000;
	dt_send(p, &M);
	/* Bounded wait: twice the close wait. */
	for (i = 0; i < 2 * WSOCK_CLOSE_WAIT_MS / DT_POLL_MS &&
	     dt_log_count("egress.close") == 0;
	     i++) {
		dt_upstream_read(&u);
		dt_step(-1);
	}
	cr_assert_eq(dt_log_count("egress.close"), 1);
	cr_assert_str_eq(dt_log_last("egress.close", "close_code"), "1006");
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "null");
	/* The upstream saw the guest's close frame: masked, code 1000. */
	cr_assert_geq(u.reqlen, 8);
	cr_assert_eq((uint8_t)u.req[u.reqlen - 8], 0x88);
	cr_assert_eq((uint8_t)u.req[u.reqlen - 7], 0x82);
	cr_assert_eq(ws_next(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_WS_CONTROL);
	cr_assert_eq(M.ws_control.code, 1006);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* ---- The memory budget -------------------------------------------------- */

/*
 * The broker's memory budget at its smallest (16 MiB: each instance is
 * guaranteed and capped at 4 MiB), messages of at most 2 MiB, and two
 * instances with websocket_client.
 */
static void
ws_budget_setup(void)
{
	char text[2048];
	const char *entry = "plugin = unit\n"
			    "manifest = manifest.ini\n"
			    "permissions = http_client, websocket_client\n"
			    "egress_hosts = 127.0.0.1\n"
			    "egress_allow_loopback = 127.0.0.1\n";

	dt_setup();
	ct_write_str("manifest.ini", ws_manifest);
	(void)snprintf(text, sizeof(text),
	    "[plugins.security]\n"
	    "signature_mode = disabled\n"
	    "[plugins.entries.app]\n%s"
	    "[plugins.entries.app2]\n%s"
	    "[broker]\n"
	    "instance_socket_dir = %s/run\n"
	    "control_socket = %s/control.sock\n"
	    "memory_max = 16M\n"
	    "[resolver]\n"
	    "servers = 127.0.0.1:9\n"
	    "[limits]\n"
	    "connect_timeout_ms = 5000\n"
	    "websocket_max_message_bytes = 2097152\n",
	    entry, entry, ct_dir, ct_dir);
	ct_write_str("egressd.ini", text);
	confstate_reload(&dt_b.conf);
	cr_assert(confstate_is_valid(&dt_b.conf));
	/* The budget is fixed at start: start it again at this size. */
	share_free(dt_b.mem_share);
	dt_b.mem_share = NULL;
	event_free(dt_b.mem_wake_ev);
	dt_b.mem_wake_ev = NULL;
	cr_assert_eq(broker_apply_conf(&dt_b, dt_b.conf.cur->snap), 0);
	cr_assert_eq(dt_b.memory_max, 16U << 20);
}

TestSuite(ws_budget, .init = ws_budget_setup, .fini = dt_teardown);

/* Open websocket stream sid of p to u (its 101 answered). */
static void
ws_open_on(struct dt_peer *p, uint32_t sid, struct dt_upstream *u)
{
	char accept[29], reply[256];

	ws_request(&M, sid, u->authority, NULL);
	dt_send(p, &M);
	dt_upstream_wait_request(u);
	ws_accept_of(u, accept);
	accept[28] = '\0';
	(void)snprintf(reply, sizeof(reply),
	    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
	    "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
	    accept);
	dt_upstream_reply(u, reply);
	cr_assert_eq(ws_next(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_RESPONSE);
	cr_assert_eq(M.stream, sid);
	cr_assert_eq(M.response.status, 101);
}

/* Open websocket stream 1 of p (instance app) to u, an upstream whose
 * accepted connection reads into a small buffer (SO_RCVBUF inherited). */
static void
ws_open_slow(struct dt_peer *p, struct dt_upstream *u)
{
	int small = 4096;

	dt_upstream_open(u);
	cr_assert_eq(setsockopt(u->lfd, SOL_SOCKET, SO_RCVBUF, &small,
			 sizeof(small)),
	    0);
	dt_peer_hello(p, "app");
	ws_open_on(p, 1, u);
}

#define WS_BIG (1536U * 1024) /* one message: 1.5 MiB */

static uint8_t ws_big[10 + WS_BIG];
static size_t ws_got[8]; /* DATA bytes the guest got, by stream */

/*
 * Run the loop, writing the frame ws_big to u as its socket takes it
 * (from *off) and taking what p receives (it grants no window), until
 * p got DATA on stream sid (return 1) or DT_ITERS turns passed (0).
 */
static int
ws_pump(struct dt_peer *p, struct dt_upstream *u, size_t *off, uint32_t sid)
{
	ssize_t k;
	int i;

	for (i = 0; i < DT_ITERS; i++) {
		if (*off < sizeof(ws_big) &&
		    (k = write(u->cfd, ws_big + *off, sizeof(ws_big) - *off)) >
			0)
			*off += (size_t)k;
		dt_peer_read(p);
		while (dt_take(p, &M))
			if (M.type == PROTO_MSG_DATA && M.stream < 8)
				ws_got[M.stream] += M.data.len;
		if (ws_got[sid] > 0)
			return 1;
		dt_step(-1);
	}
	return 0;
}

static size_t
ws_held(const char *instance)
{
	return share_held(dt_b.mem_share, instance) * 1024;
}

Test(ws_budget, an_instance_at_its_budget_buffers_no_more, .timeout = 60)
{
	struct dt_peer *p = malloc(sizeof(*p)), *q = malloc(sizeof(*q));
	struct dt_upstream u[4];
	size_t off[4] = { 0 };
	uint64_t len = WS_BIG;
	int i;

	cr_assert(p != NULL && q != NULL);
	/* One unfragmented binary frame of WS_BIG bytes (64-bit length). */
	ws_big[0] = 0x82;
	ws_big[1] = 127;
	for (i = 0; i < 8; i++)
		ws_big[2 + i] = (uint8_t)(len >> (56 - 8 * i));
	memset(ws_big + 10, 'm', WS_BIG);
	memset(ws_got, 0, sizeof(ws_got));
	for (i = 0; i < 4; i++)
		dt_upstream_open(&u[i]);
	dt_peer_hello(p, "app");
	dt_peer_hello(q, "app2");
	ws_open_on(p, 1, &u[0]);
	ws_open_on(p, 3, &u[1]);
	ws_open_on(p, 5, &u[2]);
	ws_open_on(q, 1, &u[3]);

	/* Two whole messages wait for a guest that does not read: they are
	 * charged to its instance. */
	cr_assert(ws_pump(p, &u[0], &off[0], 1), "stream 1 got nothing");
	cr_assert(ws_pump(p, &u[1], &off[1], 3), "stream 3 got nothing");
	cr_assert_geq(ws_held("app"), 2 * (WS_BIG - PROTO_STREAM_WINDOW),
	    "app holds %zu bytes", ws_held("app"));

	/* A third does not fit the 4 MiB the instance may hold: the broker
	 * stops reading it. */
	cr_assert_not(ws_pump(p, &u[2], &off[2], 5),
	    "a third message was buffered beyond the budget");
	cr_assert_leq(ws_held("app"), 4U << 20);

	/* Another instance is not held back. */
	cr_assert(ws_pump(q, &u[3], &off[3], 1), "app2 got nothing");

	/* When the streams end, their credit is given back. */
	dt_peer_close(p);
	for (i = 0; i < DT_ITERS && ws_held("app") > 0; i++) {
		dt_upstream_read(&u[0]);
		dt_upstream_read(&u[1]);
		dt_upstream_read(&u[2]);
		dt_step(-1);
	}
	cr_assert_eq(ws_held("app"), 0, "app still holds %zu bytes",
	    ws_held("app"));
	for (i = 0; i < 4; i++)
		dt_upstream_close(&u[i]);
	dt_peer_close(q);
	free(p);
	free(q);
}

/* ---- An upstream ping flood --------------------------------------------- */

/*
 * The upstream sends pings (125 bytes each) as fast as its socket takes
 * them and reads nothing back, its receive buffer shrunk so that the
 * broker's pongs back up at once; the guest takes every frame (the
 * pings it is told of), so only the bound on what waits for the
 * upstream can stop the broker reading. What the stream holds is
 * charged to the instance's memory budget: it stays under 2 MiB (4096
 * queued pongs and 64 KiB of output, with their overhead), where an
 * unbounded queue grows by a pong for every ping read.
 */
Test(ws, upstream_ping_flood_queues_bounded_pongs, .timeout = 60)
{
	struct dt_peer *p = malloc(sizeof(*p));
	static uint8_t pings[512 * 127];
	struct dt_upstream u;
	size_t i, off = sizeof(pings), held, most = 0;
	uint64_t sent = 0;
	int it;
	ssize_t k;

	cr_assert_not_null(p);
	for (i = 0; i < sizeof(pings); i += 127) {
		pings[i] = 0x89; /* FIN, ping */
		pings[i + 1] = 125;
		memset(pings + i + 2, 'p', 125);
	}
	ws_open_slow(p, &u);
	for (it = 0; it < 4 * DT_ITERS; it++) {
		if (off == sizeof(pings))
			off = 0;
		while (off < sizeof(pings) &&
		    (k = write(u.cfd, pings + off, sizeof(pings) - off)) > 0) {
			off += (size_t)k;
			sent += (uint64_t)k;
		}
		dt_peer_read(p);
		while (dt_take(p, &M))
			;
		held = share_held(dt_b.mem_share, "app") * 1024;
		if (held > most)
			most = held;
		cr_assert_leq(held, 2U << 20,
		    "the stream holds %zu bytes after %llu bytes of pings",
		    held, (unsigned long long)sent);
		if (off < sizeof(pings))
			dt_step(u.cfd); /* the broker stopped reading */
		else
			dt_step(-1);
	}
	/* The flood was real: far more pings than the bound holds pongs. */
	cr_assert_gt(sent, (uint64_t)4 * 4096 * 127, "only %llu bytes sent",
	    (unsigned long long)sent);
	cr_log_info("ping flood: %llu bytes sent, at most %zu held",
	    (unsigned long long)sent, most);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* ---- A guest RESET ------------------------------------------------------ */

Test(ws, guest_reset_sends_close_1001_upstream)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	const uint8_t *f;
	size_t before;
	unsigned code;
	int i;

	cr_assert_not_null(p);
	dt_upstream_open(&u);
	dt_peer_hello(p, "app");
	ws_open_on(p, 1, &u);
	before = u.reqlen;
	dt_msg(&M, PROTO_MSG_RESET, 0, 1);
	M.reset.code = PROTO_CODE_CANCELLED;
	dt_send(p, &M);
	/* The close frame comes before the end of the connection. */
	for (i = 0; i < DT_ITERS && !u.eof; i++) {
		dt_upstream_read(&u);
		dt_step(u.cfd);
	}
	cr_assert(u.eof, "the broker kept the upstream connection open");
	cr_assert_eq(u.reqlen, before + 8, "%zu bytes after the reset",
	    u.reqlen - before);
	f = (const uint8_t *)u.req + before;
	cr_assert_eq(f[0], 0x88); /* FIN, close */
	cr_assert_eq(f[1], 0x82); /* masked, 2 bytes */
	code = (unsigned)((f[6] ^ f[2]) << 8 | (f[7] ^ f[3]));
	cr_assert_eq(code, 1001);
	for (i = 0; i < DT_ITERS && dt_log_count("egress.close") == 0; i++)
		dt_step(-1);
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "cancelled");
	cr_assert_str_eq(dt_log_last("egress.close", "close_code"), "1001");
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* The guest sends messages and leaves before the broker read them: the
 * broker's first write to it (the PONG of a PING) fails, and what was
 * still unread in the socket is read and relayed all the same. Every
 * message reaches the upstream, then close 1001 (the guest went away). */
#define WS_LEAVE_N   4
#define WS_LEAVE_LEN 50000 /* a 126 length: 8 bytes of frame head */

Test(ws, guest_leaves_before_broker_reads)
{
	static uint8_t msg[WS_LEAVE_LEN],
	    got[WS_LEAVE_N * (WS_LEAVE_LEN + 8) + 64];
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	const uint8_t *f;
	size_t before, len = 0, want = WS_LEAVE_N * (WS_LEAVE_LEN + 8) + 8;
	int sndbuf = 1024 * 1024, i, k;
	socklen_t sl = sizeof(sndbuf);
	ssize_t n = -1;

	cr_assert_not_null(p);
	memset(msg, 'w', sizeof(msg));
	dt_upstream_open(&u);
	dt_peer_hello(p, "app");
	ws_open_on(p, 1, &u);
	before = u.reqlen;
	cr_assert_eq(setsockopt(p->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf,
			 sizeof(sndbuf)),
	    0);
	cr_assert_eq(getsockopt(p->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &sl),
	    0);
	cr_assert_geq(sndbuf, 2 * WS_LEAVE_N * WS_LEAVE_LEN, "SO_SNDBUF %d",
	    sndbuf);
	/* More than one read of the broker's (SESSION_READ_MAX), so that
	 * the PONG's failed write comes before the rest was read. */
	cr_assert_gt(WS_LEAVE_N * WS_LEAVE_LEN, 2 * SESSION_READ_MAX);
	cr_assert_leq(WS_LEAVE_N * WS_LEAVE_LEN, PROTO_STREAM_WINDOW);
	dt_send_ping(p, "leaving!");
	for (k = 0; k < WS_LEAVE_N; k++) {
		dt_msg(&M, PROTO_MSG_DATA,
		    PROTO_FLAG_MSG_END | PROTO_FLAG_BINARY, 1);
		M.data.ptr = msg;
		M.data.len = sizeof(msg);
		dt_send(p, &M);
	}
	dt_peer_close(p);
	for (i = 0; i < 4 * DT_ITERS; i++) {
		n = read(u.cfd, got + len, sizeof(got) - len);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			break;
		if (n > 0)
			len += (size_t)n;
		dt_step(u.cfd);
	}
	cr_assert_eq(n, 0, "no end of file upstream");
	cr_assert_eq(before, u.reqlen);
	cr_assert_eq(len, want, "the upstream got %zu of %zu bytes", len,
	    want);
	for (k = 0, f = got; k < WS_LEAVE_N; k++, f += WS_LEAVE_LEN + 8) {
		cr_assert_eq(f[0], 0x82, "message %d", k); /* FIN, binary */
		cr_assert_eq(f[1], 0x80 | 126); /* masked, 16 bits */
		cr_assert_eq((f[2] << 8 | f[3]), WS_LEAVE_LEN);
		cr_assert_eq(f[8] ^ f[4], 'w');
	}
	cr_assert_eq(f[0], 0x88); /* FIN, close */
	cr_assert_eq((unsigned)((f[6] ^ f[2]) << 8 | (f[7] ^ f[3])), 1001);
	for (i = 0; i < DT_ITERS && dt_log_count("egress.close") == 0; i++)
		dt_step(-1);
	cr_assert_eq(dt_log_count("egress.close"), 1);
	cr_assert_str_eq(dt_log_last("egress.close", "messages_out"), "4");
	cr_assert_str_eq(dt_log_last("egress.close", "close_code"), "1001");
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	cr_assert_null(dt_b.lingering);
	dt_upstream_close(&u);
	free(p);
}

/* ---- The drain ---------------------------------------------------------- */

/*
 * The broker drains (request_ws_close_all(), as SIGTERM calls it) while a
 * websocket waits for its 101: once the 101 came, the guest gets the
 * RESPONSE and then close 1001, the upstream close 1001, and the close
 * event has reason draining.
 */
Test(ws, drain_during_the_handshake_closes_once_open)
{
	struct dt_peer *p = malloc(sizeof(*p));
	char accept[29], reply[256];
	struct dt_upstream u;
	const uint8_t *f;
	size_t before;
	int i;

	cr_assert_not_null(p);
	dt_upstream_open(&u);
	dt_peer_hello(p, "app");
	ws_request(&M, 1, u.authority, NULL);
	dt_send(p, &M);
	dt_upstream_wait_request(&u);
	dt_b.draining = 1;
	cr_assert_eq(request_ws_close_all(&dt_b, 1001, "draining"), 1);
	before = u.reqlen;
	ws_accept_of(&u, accept);
	accept[28] = '\0';
	(void)snprintf(reply, sizeof(reply),
	    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
	    "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
	    accept);
	dt_upstream_reply(&u, reply);
	cr_assert_eq(ws_next(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_RESPONSE);
	cr_assert_eq(M.response.status, 101);
	cr_assert_eq(ws_next(p, &M), 1);
	cr_assert_eq(M.type, PROTO_MSG_WS_CONTROL);
	cr_assert_eq(M.ws_control.opcode, PROTO_WS_CLOSE);
	cr_assert_eq(M.ws_control.code, 1001);
	for (i = 0; i < DT_ITERS && u.reqlen < before + 8; i++) {
		dt_upstream_read(&u);
		dt_step(u.cfd);
	}
	cr_assert_geq(u.reqlen, before + 8);
	f = (const uint8_t *)u.req + before;
	cr_assert_eq(f[0], 0x88);
	cr_assert_eq((unsigned)((f[6] ^ f[2]) << 8 | (f[7] ^ f[3])), 1001);
	/* The guest answers; the stream is over. */
	dt_msg(&M, PROTO_MSG_WS_CONTROL, PROTO_FLAG_END_STREAM, 1);
	M.ws_control.opcode = PROTO_WS_CLOSE;
	M.ws_control.code = 1001;
	dt_send(p, &M);
	for (i = 0; i < DT_ITERS && dt_log_count("egress.close") == 0; i++) {
		dt_upstream_read(&u);
		dt_step(-1);
	}
	cr_assert_eq(dt_log_count("egress.close"), 1);
	cr_assert_str_eq(dt_log_last("egress.close", "reason"), "draining");
	cr_assert_str_eq(dt_log_last("egress.close", "close_code"), "1001");
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "null");
	dt_b.draining = 0;
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* ---- Ends after the upstream ended --------------------------------------- */

#define WS_LONG_LEN (300U * 1024) /* more than the guest's window */

static uint8_t ws_long[10 + WS_LONG_LEN];

/*
 * The guest closes with a message waiting for it that it never takes
 * (no window granted), and the upstream then ends: the close wait is
 * the guest's last chance, and the stream ends when it passes (ERROR
 * timeout, the close event, the lease back). Before, the passed
 * deadline was armed again at once, every loop turn, until the idle
 * timeout: a spin and a stream that outlived its wait.
 */
Test(ws, a_closed_guest_that_takes_nothing_ends_after_the_close_wait)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	uint64_t len = WS_LONG_LEN;
	size_t off = 0, got = 0;
	ssize_t k;
	int i;

	cr_assert_not_null(p);
	ws_long[0] = 0x82; /* FIN, binary, 64-bit length */
	ws_long[1] = 127;
	for (i = 0; i < 8; i++)
		ws_long[2 + i] = (uint8_t)(len >> (56 - 8 * i));
	memset(ws_long + 10, 'm', WS_LONG_LEN);
	dt_upstream_open(&u);
	dt_peer_hello(p, "app");
	ws_open_on(p, 1, &u);
	for (i = 0; i < DT_ITERS &&
	     (off < sizeof(ws_long) || got < PROTO_STREAM_WINDOW);
	     i++) {
		if (off < sizeof(ws_long) &&
		    (k = write(u.cfd, ws_long + off, sizeof(ws_long) - off)) >
			0)
			off += (size_t)k;
		dt_peer_read(p);
		while (dt_take(p, &M))
			if (M.type == PROTO_MSG_DATA)
				got += M.data.len;
		dt_step(-1);
	}
	cr_assert_eq(got, PROTO_STREAM_WINDOW, "the guest got %zu", got);
	dt_msg(&M, PROTO_MSG_WS_CONTROL, PROTO_FLAG_END_STREAM, 1);
	M.ws_control.opcode = PROTO_WS_CLOSE;
	M.ws_control.code = 1000;
	dt_send(p, &M);
	for (i = 0; i < 20; i++) {
		dt_upstream_read(&u);
		dt_step(-1);
	}
	cr_assert_eq(shutdown(u.cfd, SHUT_WR), 0);
	/* Bounded wait: twice the close wait. */
	for (i = 0; i < 2 * WSOCK_CLOSE_WAIT_MS / DT_POLL_MS &&
	     dt_log_count("egress.close") == 0;
	     i++) {
		dt_upstream_read(&u);
		dt_step(-1);
	}
	cr_assert_eq(dt_log_count("egress.close"), 1,
	    "the stream outlived its close wait");
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "timeout");
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	dt_peer_read(p);
	for (i = 0; dt_take(p, &M); i++)
		if (M.type == PROTO_MSG_ERROR)
			break;
	cr_assert_eq(M.type, PROTO_MSG_ERROR, "no ERROR for the guest");
	cr_assert_eq(M.error.code, PROTO_CODE_TIMEOUT);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/*
 * The guest resets while its message waits for an upstream that reads
 * slowly, and the upstream then ends: the stream ends with it (the close
 * event, the lease back), not at the idle timeout.
 */
Test(ws, a_gone_guest_ends_when_the_upstream_does)
{
	static uint8_t msg[60000];
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	uint64_t win = PROTO_STREAM_WINDOW;
	int i, idle = 0;

	cr_assert_not_null(p);
	memset(msg, 'g', sizeof(msg));
	ws_open_slow(p, &u);
	/* Within its window until the broker stops crediting it. */
	while (idle < 200) {
		if (win >= sizeof(msg)) {
			dt_msg(&M, PROTO_MSG_DATA,
			    PROTO_FLAG_MSG_END | PROTO_FLAG_BINARY, 1);
			M.data.ptr = msg;
			M.data.len = sizeof(msg);
			dt_send(p, &M);
			win -= sizeof(msg);
			idle = 0;
		} else
			idle++;
		dt_step(-1);
		dt_peer_read(p);
		while (dt_take(p, &M))
			if (M.type == PROTO_MSG_WINDOW_UPDATE && M.stream == 1)
				win += M.window_update.increment;
	}
	dt_msg(&M, PROTO_MSG_RESET, 0, 1);
	M.reset.code = PROTO_CODE_CANCELLED;
	dt_send(p, &M);
	for (i = 0; i < 50; i++)
		dt_step(-1);
	cr_assert_eq(dt_log_count("egress.close"), 0);
	cr_assert_eq(shutdown(u.cfd, SHUT_WR), 0);
	/* Well inside the close wait. */
	for (i = 0; i < WSOCK_CLOSE_WAIT_MS / DT_POLL_MS / 4 &&
	     dt_log_count("egress.close") == 0;
	     i++)
		dt_step(-1);
	cr_assert_eq(dt_log_count("egress.close"), 1,
	    "the stream did not end with its upstream");
	cr_assert_str_eq(dt_log_last("egress.close", "error"), "cancelled");
	cr_assert_eq(lease_count(dt_b.leases, "app"), 0);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/* ---- Many small messages -------------------------------------------------- */

#define WS_SMALL_LEN   16		  /* one message: 16 hex digits */
#define WS_SMALL_FRAME (6 + WS_SMALL_LEN) /* masked, 7-bit length */

/* Check the frames in buf[0..n) (from *off) as messages *next, *next + 1,
 * ...; return the bytes of whole frames taken. */
static size_t
ws_small_check(const uint8_t *buf, size_t n, unsigned *next)
{
	char want[WS_SMALL_LEN + 1];
	size_t at = 0, i;

	for (; n - at >= WS_SMALL_FRAME; at += WS_SMALL_FRAME, (*next)++) {
		const uint8_t *f = buf + at;

		cr_assert_eq(f[0], 0x82, "message %u: %02x", *next, f[0]);
		cr_assert_eq(f[1], 0x80 | WS_SMALL_LEN);
		(void)snprintf(want, sizeof(want), "%016x", *next);
		for (i = 0; i < WS_SMALL_LEN; i++)
			cr_assert_eq(f[6 + i] ^ f[2 + i % 4], (uint8_t)want[i],
			    "message %u, byte %zu", *next, i);
	}
	return at;
}

/*
 * Send 16-byte messages "%016x" of their number on stream 1 of p within
 * its window until no credit comes back for 200 loop turns (the broker
 * holds the guest back); no ERROR or close meanwhile. Return how many.
 */
static unsigned
ws_small_fill(struct dt_peer *p)
{
	uint64_t win = PROTO_STREAM_WINDOW;
	char body[WS_SMALL_LEN + 1];
	unsigned sent = 0;
	int k, idle = 0;

	while (idle < 200) {
		for (k = 0; k < 64 && win >= WS_SMALL_LEN; k++, sent++) {
			(void)snprintf(body, sizeof(body), "%016x", sent);
			dt_msg(&M, PROTO_MSG_DATA,
			    PROTO_FLAG_MSG_END | PROTO_FLAG_BINARY, 1);
			M.data.ptr = (const uint8_t *)body;
			M.data.len = WS_SMALL_LEN;
			dt_send(p, &M);
			win -= WS_SMALL_LEN;
		}
		idle = k > 0 ? 0 : idle + 1;
		dt_step(-1);
		dt_peer_read(p);
		while (dt_take(p, &M)) {
			cr_assert(M.type != PROTO_MSG_ERROR &&
				M.type != PROTO_MSG_WS_CONTROL,
			    "%s after %u messages", proto_type_name(M.type),
			    sent);
			if (M.type == PROTO_MSG_WINDOW_UPDATE && M.stream == 1)
				win += M.window_update.increment;
		}
	}
	cr_assert_lt(win, WS_SMALL_LEN, "never held back: %u sent", sent);
	return sent;
}

/*
 * A guest that keeps to its window, sending 16-byte messages to an
 * upstream that does not read: the broker stops crediting it (flow
 * control), never fails the stream, though far more messages wait than
 * the count at which empty ones fail it; once the upstream reads, every
 * message arrives, in order.
 */
Test(ws, small_messages_within_the_window_wait_and_all_arrive)
{
	static uint8_t got[1 << 16];
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	unsigned sent, next = 0;
	size_t have = 0, took;
	ssize_t n;
	int i;

	cr_assert_not_null(p);
	ws_open_slow(p, &u);
	sent = ws_small_fill(p);
	cr_assert_gt(sent, 2 * WSOCK_QUEUED_MAX, "only %u sent", sent);
	/* The upstream reads: everything arrives, in order. */
	for (i = 0; i < 100 * DT_ITERS && next < sent; i++) {
		n = read(u.cfd, got + have, sizeof(got) - have);
		if (n > 0) {
			have += (size_t)n;
			took = ws_small_check(got, have, &next);
			memmove(got, got + took, have - took);
			have -= took;
		} else
			dt_step(u.cfd);
		dt_peer_read(p);
		while (dt_take(p, &M))
			cr_assert(M.type != PROTO_MSG_ERROR &&
				M.type != PROTO_MSG_WS_CONTROL,
			    "%s", proto_type_name(M.type));
	}
	cr_assert_eq(next, sent, "the upstream got %u of %u messages", next,
	    sent);
	cr_assert_eq(dt_log_count("egress.close"), 0);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}
