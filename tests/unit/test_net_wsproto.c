/* SPDX-License-Identifier: ISC */
/*
 * broker/net/wsproto: the handshake response check (table-driven) and
 * the codec's own closes (an over-size message, text that is not UTF-8,
 * a masked frame from a server), with RFC 6455's sample key.
 */
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "broker/net/wsproto.h"

#define KEY    "dGhlIHNhbXBsZSBub25jZQ=="
#define ACCEPT "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
#define UPG    "Upgrade: websocket\r\nConnection: Upgrade\r\n"
#define S101   "HTTP/1.1 101 Switching Protocols\r\n"

struct hs_case {
	char name[32];
	char head[400];
	char protos[16];
	int want;
	int status;
};

static struct hs_case hs_cases[] = {
	{ "accepted", S101 UPG ACCEPT "\r\n", "", 1, 101 },
	{ "accepted-protocol",
	    S101 UPG ACCEPT "Sec-WebSocket-Protocol: chat\r\n\r\n", "x,chat",
	    1, 101 },
	{ "connection-list",
	    S101 "Upgrade: WebSocket\r\n"
		 "Connection: keep-alive, upgrade\r\n" ACCEPT "\r\n",
	    "", 1, 101 },
	{ "redirect", "HTTP/1.1 302 Found\r\nLocation: ws://x/\r\n\r\n", "", 0,
	    302 },
	{ "forbidden", "HTTP/1.1 403 Forbidden\r\n\r\n", "", 0, 403 },
	{ "wrong-accept",
	    S101 UPG "Sec-WebSocket-Accept: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
	    "", -1, 101 },
	{ "no-accept", S101 UPG "\r\n", "", -1, 101 },
	{ "two-accepts", S101 UPG ACCEPT ACCEPT "\r\n", "", -1, 101 },
	{ "no-upgrade", S101 "Connection: Upgrade\r\n" ACCEPT "\r\n", "", -1,
	    101 },
	{ "other-upgrade",
	    S101 "Upgrade: h2c\r\nConnection: Upgrade\r\n" ACCEPT "\r\n", "",
	    -1, 101 },
	{ "no-connection", S101 "Upgrade: websocket\r\n" ACCEPT "\r\n", "", -1,
	    101 },
	{ "extension",
	    S101 UPG ACCEPT
	    "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n",
	    "", -1, 101 },
	{ "unrequested-protocol",
	    S101 UPG ACCEPT "Sec-WebSocket-Protocol: chat\r\n\r\n", "", -1,
	    101 },
	{ "other-protocol",
	    S101 UPG ACCEPT "Sec-WebSocket-Protocol: mqtt\r\n\r\n", "chat", -1,
	    101 },
	{ "http10", "HTTP/1.0 101 Switching Protocols\r\n" UPG ACCEPT "\r\n",
	    "", -1, 101 },
	{ "interim", "HTTP/1.1 100 Continue\r\n\r\n", "", -1, 100 },
	{ "garbage", "hello\r\n\r\n", "", -1, 0 },
	/* A space before the colon: a name no check by name would see. */
	{ "spaced-extension",
	    S101 UPG ACCEPT
	    "Sec-WebSocket-Extensions : permessage-deflate\r\n\r\n",
	    "", -1, 101 },
	{ "spaced-protocol",
	    S101 UPG ACCEPT "Sec-WebSocket-Protocol : mqtt\r\n\r\n", "chat",
	    -1, 101 },
	{ "spaced-on-a-refusal",
	    "HTTP/1.1 403 Forbidden\r\nContent-Length : 5\r\n\r\n", "", -1,
	    403 },
};

ParameterizedTestParameters(wsproto, handshake_answers)
{
	return cr_make_param_array(struct hs_case, hs_cases,
	    sizeof(hs_cases) / sizeof(hs_cases[0]));
}

ParameterizedTest(struct hs_case *c, wsproto, handshake_answers)
{
	static struct wsproto_head h;
	int rc = wsproto_response_check(c->head, strlen(c->head), KEY,
	    c->protos[0] ? c->protos : NULL, &h);

	cr_assert_eq(rc, c->want, "%s: %d, want %d", c->name, rc, c->want);
	if (rc >= 0)
		cr_assert_eq(h.status, c->status, "%s: status %d", c->name,
		    h.status);
}

Test(wsproto, key_is_fresh)
{
	char a[WSPROTO_KEY_LEN + 1], b[WSPROTO_KEY_LEN + 1];

	cr_assert_eq(wsproto_key_new(a), 0);
	cr_assert_eq(wsproto_key_new(b), 0);
	cr_assert_eq(strlen(a), WSPROTO_KEY_LEN);
	cr_assert_str_neq(a, b);
}

/* A codec fed from a fixed buffer; what it sends is kept. */
struct io {
	const uint8_t *in;
	size_t n;
	uint8_t out[256];
	size_t nout;
	int msgs;
	unsigned code;
	int op;		 /* the last message's opcode */
	uint8_t msg[64]; /* and its first bytes */
	size_t nmsg;
	struct wsproto *park; /* parked from on_msg when set */
	int parked_in_msg;
};

static ssize_t
io_recv(void *arg, uint8_t *buf, size_t len)
{
	struct io *io = arg;
	size_t n = len < io->n ? len : io->n;

	memcpy(buf, io->in, n);
	io->in += n;
	io->n -= n;
	return (ssize_t)n;
}

static ssize_t
io_send(void *arg, const uint8_t *buf, size_t len)
{
	struct io *io = arg;
	size_t n = len < sizeof(io->out) - io->nout ?
	    len :
	    sizeof(io->out) - io->nout;

	memcpy(io->out + io->nout, buf, n);
	io->nout += n;
	return (ssize_t)n;
}

static int
io_msg(void *arg, int opcode, unsigned code, const uint8_t *p, size_t n)
{
	struct io *io = arg;

	io->msgs++;
	if (opcode == WSPROTO_CLOSE)
		io->code = code;
	io->op = opcode;
	io->nmsg = n < sizeof(io->msg) ? n : sizeof(io->msg);
	if (io->nmsg > 0)
		memcpy(io->msg, p, io->nmsg);
	if (io->park != NULL) {
		wsproto_park(io->park);
		io->parked_in_msg |= wsproto_is_parked(io->park);
	}
	return 0;
}

static const struct wsproto_ops io_ops = { io_recv, io_send, io_msg };

/* Feed frames; return the close code the codec sent itself (0: none). */
static unsigned
feed(const uint8_t *frames, size_t n, size_t max, struct io *io)
{
	struct wsproto *w = NULL;
	unsigned code = 0;

	memset(io, 0, sizeof(*io));
	io->in = frames;
	io->n = n;
	cr_assert_eq(wsproto_new(&io_ops, io, max, &w), 0);
	cr_assert_eq(wsproto_recv(w), 0);
	(void)wsproto_send(w);
	if (wsproto_close_sent(w))
		code = wsproto_code_sent(w);
	wsproto_free(w);
	return code;
}

Test(wsproto, text_then_close_is_answered)
{
	static const uint8_t f[] = { 0x81, 2, 'h', 'i', 0x88, 2, 0x03, 0xe8 };
	struct io io;

	cr_assert_eq(feed(f, sizeof(f), 1024, &io), 1000);
	cr_assert_eq(io.msgs, 2);
	cr_assert_eq(io.code, 1000);
	/* The answer is masked, as a client's frames are. */
	cr_assert(io.nout >= 2 && io.out[0] == 0x88 && (io.out[1] & 0x80));
}

Test(wsproto, over_size_is_1009)
{
	static uint8_t f[4 + 2000] = { 0x82, 126, 0x07, 0xd0 };
	struct io io;

	cr_assert_eq(feed(f, sizeof(f), 1024, &io), 1009);
	cr_assert_eq(io.msgs, 0);
}

Test(wsproto, bad_utf8_is_1007)
{
	static const uint8_t f[] = { 0x81, 2, 0xff, 0xfe };
	struct io io;

	cr_assert_eq(feed(f, sizeof(f), 1024, &io), 1007);
	cr_assert_eq(io.msgs, 0);
}

Test(wsproto, masked_server_frame_is_1002)
{
	static const uint8_t f[] = { 0x81, 0x82, 1, 2, 3, 4, 'h' ^ 1,
		'i' ^ 2 };
	struct io io;

	cr_assert_eq(feed(f, sizeof(f), 1024, &io), 1002);
	cr_assert_eq(io.msgs, 0);
}

/* ---- Parking an idle codec ---------------------------------------------- */

/* Hand w the n bytes at f, read them, send what that queued, and try to
 * park it; answer whether it parked. */
static int
step(struct wsproto *w, struct io *io, const uint8_t *f, size_t n)
{
	io->in = f;
	io->n = n;
	cr_assert_eq(wsproto_recv(w), 0);
	cr_assert_eq(io->n, 0);
	if (wsproto_want_write(w))
		cr_assert_eq(wsproto_send(w), 0);
	wsproto_park(w);
	return wsproto_is_parked(w);
}

static void
expect_msg(const struct io *io, int op, const char *s)
{
	cr_assert_eq(io->op, op);
	cr_assert_eq(io->nmsg, strlen(s));
	cr_assert_arr_eq(io->msg, s, strlen(s));
}

Test(wsproto, parks_between_messages_and_unparks_the_same)
{
	static const uint8_t text[] = { 0x81, 2, 'h', 'i' };
	static const uint8_t frag1[] = { 0x01, 2, 'h', 'e' };
	static const uint8_t ping[] = { 0x89, 1, 'x' };
	static const uint8_t frag2[] = { 0x80, 3, 'l', 'l', 'o' };
	static const uint8_t pong[] = { 0x8a, 0 };
	static const uint8_t close[] = { 0x88, 2, 0x03, 0xe8 };
	static const uint8_t up[] = { 'u', 'p' };
	struct io io;
	struct wsproto *w = NULL;

	memset(&io, 0, sizeof(io));
	cr_assert_eq(wsproto_new(&io_ops, &io, 1024, &w), 0);
	cr_assert_not(wsproto_is_parked(w));
	cr_assert(step(w, &io, text, sizeof(text)));
	expect_msg(&io, WSPROTO_TEXT, "hi");
	/* Parked, it answers as an open, idle codec. */
	cr_assert(wsproto_want_read(w));
	cr_assert_not(wsproto_want_write(w));
	cr_assert_not(wsproto_close_sent(w));
	cr_assert_not(wsproto_close_received(w));
	cr_assert_eq(wsproto_queued_count(w), 0);
	cr_assert_eq(wsproto_queued_bytes(w), 0);
	cr_assert_eq(wsproto_code_sent(w), 1006);
	cr_assert_eq(wsproto_send(w), 0);
	cr_assert(wsproto_is_parked(w));

	/* Mid-message, with a ping amid the fragments: never parked. */
	cr_assert_not(step(w, &io, frag1, sizeof(frag1)));
	cr_assert_eq(io.msgs, 1);
	io.nout = 0;
	cr_assert_not(step(w, &io, ping, sizeof(ping)));
	expect_msg(&io, WSPROTO_PING, "x");
	cr_assert(io.nout == 7 && io.out[0] == 0x8a && io.out[1] == 0x81);
	cr_assert(step(w, &io, frag2, sizeof(frag2)));
	cr_assert_eq(io.msgs, 3);
	expect_msg(&io, WSPROTO_TEXT, "hello");
	cr_assert(wsproto_is_parked(w));

	/* Output unparks it too; a queued message is not parked. */
	io.nout = 0;
	cr_assert_eq(wsproto_queue(w, WSPROTO_BINARY, up, sizeof(up)), 0);
	cr_assert_not(wsproto_is_parked(w));
	wsproto_park(w);
	cr_assert_not(wsproto_is_parked(w));
	cr_assert(wsproto_want_write(w));
	cr_assert_eq(wsproto_send(w), 0);
	cr_assert(io.nout == 8 && io.out[0] == 0x82 && io.out[1] == 0x82);
	cr_assert_eq(io.out[6], 'u' ^ io.out[2]);
	wsproto_park(w);
	cr_assert(wsproto_is_parked(w));

	/* A pong, then the close handshake, after parking. */
	cr_assert(step(w, &io, pong, sizeof(pong)));
	expect_msg(&io, WSPROTO_PONG, "");
	io.nout = 0;
	cr_assert_not(step(w, &io, close, sizeof(close)));
	cr_assert_eq(io.code, 1000);
	cr_assert(wsproto_close_received(w) && wsproto_close_sent(w));
	cr_assert_eq(wsproto_code_sent(w), 1000);
	cr_assert(io.nout == 8 && io.out[0] == 0x88);
	wsproto_free(w);
}

Test(wsproto, half_a_frame_is_not_parked)
{
	static const uint8_t head[] = { 0x81 };
	static const uint8_t part[] = { 5, 'h', 'e' };
	static const uint8_t rest[] = { 'l', 'l', 'o' };
	static uint8_t mid[4 + 300] = { 0x82, 126, 0x01, 0x2c };
	struct io io;
	struct wsproto *w = NULL;

	memset(&io, 0, sizeof(io));
	cr_assert_eq(wsproto_new(&io_ops, &io, 100000, &w), 0);
	cr_assert_not(step(w, &io, head, sizeof(head)));
	cr_assert_not(step(w, &io, part, sizeof(part)));
	cr_assert_eq(io.msgs, 0);
	cr_assert(step(w, &io, rest, sizeof(rest)));
	expect_msg(&io, WSPROTO_TEXT, "hello");

	/* A 4-byte head: in parts, then whole. */
	cr_assert_not(step(w, &io, mid, 3));
	cr_assert_not(step(w, &io, mid + 3, 100));
	cr_assert(step(w, &io, mid + 103, sizeof(mid) - 103));
	cr_assert_eq(io.msgs, 2);
	cr_assert_eq(io.op, WSPROTO_BINARY);
	wsproto_free(w);
}

Test(wsproto, a_long_frame_parks_once_whole)
{
	static uint8_t big[10 + 70000] = { 0x82, 127, 0, 0, 0, 0, 0, 0x01,
		0x11, 0x70 };
	struct io io;
	struct wsproto *w = NULL;

	big[10] = 'z';
	memset(&io, 0, sizeof(io));
	cr_assert_eq(wsproto_new(&io_ops, &io, 100000, &w), 0);
	cr_assert_not(step(w, &io, big, sizeof(big) - 1));
	cr_assert(step(w, &io, big + sizeof(big) - 1, 1));
	cr_assert_eq(io.msgs, 1);
	cr_assert_eq(io.msg[0], 'z');
	cr_assert_eq(wsproto_queued_count(w), 0);
	wsproto_free(w);
}

/* A caller that tries to park from inside a callback is refused: the
 * context is in use. */
Test(wsproto, not_parked_from_its_own_callback)
{
	static const uint8_t f[] = { 0x81, 2, 'h', 'i', 0x82, 1, 'z' };
	struct io io;
	struct wsproto *w = NULL;

	memset(&io, 0, sizeof(io));
	cr_assert_eq(wsproto_new(&io_ops, &io, 1024, &w), 0);
	io.park = w;
	cr_assert(step(w, &io, f, 4));
	cr_assert(step(w, &io, f + 4, sizeof(f) - 4));
	cr_assert_eq(io.parked_in_msg, 0);
	cr_assert_eq(io.msgs, 2);
	expect_msg(&io, WSPROTO_BINARY, "z");
	wsproto_free(w);
}

/* What the broker sends upstream is UTF-8 where text must be: the
 * guest's text messages are refused otherwise (the stream fails with
 * 1007); RFC 3629's boundaries. */
Test(wsproto, utf8_of_what_is_sent)
{
	static const struct {
		const char *s;
		size_t n;
		int ok;
	} cases[] = {
		{ "", 0, 1 },
		{ "plain ascii", 11, 1 },
		{ "\xc3\xa9t\xc3\xa9", 6, 1 }, /* U+00E9 */
		{ "\xe2\x82\xac", 3, 1 },      /* U+20AC */
		{ "\xf0\x9f\x98\x80", 4, 1 },  /* U+1F600 */
		{ "\xf4\x8f\xbf\xbf", 4, 1 },  /* U+10FFFF */
		{ "\xed\x9f\xbf", 3, 1 },      /* U+D7FF */
		{ "\x80", 1, 0 },	       /* a lone continuation */
		{ "\xc0\xaf", 2, 0 },	       /* overlong '/' */
		{ "\xc1\xbf", 2, 0 },	       /* overlong */
		{ "\xe0\x80\xaf", 3, 0 },      /* overlong */
		{ "\xf0\x80\x80\xaf", 4, 0 },  /* overlong */
		{ "\xed\xa0\x80", 3, 0 },      /* U+D800, a surrogate */
		{ "\xed\xbf\xbf", 3, 0 },      /* U+DFFF */
		{ "\xf4\x90\x80\x80", 4, 0 },  /* beyond U+10FFFF */
		{ "\xf5\x80\x80\x80", 4, 0 },
		{ "\xe2\x82", 2, 0 }, /* truncated */
		{ "a\xe2\x82", 3, 0 },
		{ "\xc3\x28", 2, 0 }, /* not a continuation */
		{ "\xff", 1, 0 },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		cr_expect_eq(wsproto_utf8_ok((const uint8_t *)cases[i].s,
				 cases[i].n),
		    cases[i].ok, "case %zu", i);
}

/* ---- Retiring a closed codec -------------------------------------------- */

/* A send op that takes nothing: the close stays queued. */
static ssize_t
io_send_blocked(void *arg, const uint8_t *buf, size_t len)
{
	(void)arg;
	(void)buf;
	(void)len;
	return 0;
}

static const struct wsproto_ops io_blocked_ops = { io_recv, io_send_blocked,
	io_msg };

Test(wsproto, retired_once_its_close_is_written)
{
	struct wsproto *w = NULL;
	struct io io;

	memset(&io, 0, sizeof(io));
	cr_assert_eq(wsproto_new(&io_ops, &io, 1024, &w), 0);
	wsproto_retire(w); /* open: nothing happens */
	cr_assert_eq(wsproto_close_sent(w), 0);
	cr_assert_eq(wsproto_close(w, 1001, NULL, 0), 0);
	wsproto_retire(w); /* queued, not written: nothing happens */
	cr_assert_eq(wsproto_want_write(w), 1);
	cr_assert_eq(wsproto_send(w), 0);
	cr_assert(io.nout >= 4 && io.out[0] == 0x88);
	wsproto_retire(w);
	/* Closed for good: it answers as a closed codec. */
	cr_assert_eq(wsproto_is_parked(w), 0);
	cr_assert_eq(wsproto_close_sent(w), 1);
	cr_assert_eq(wsproto_close_received(w), 0);
	cr_assert_eq(wsproto_code_sent(w), 1001);
	cr_assert_eq(wsproto_want_read(w), 0);
	cr_assert_eq(wsproto_want_write(w), 0);
	cr_assert_eq(wsproto_queued_bytes(w), 0);
	cr_assert_eq(wsproto_recv(w), 0);
	cr_assert_eq(wsproto_send(w), 0);
	cr_assert_eq(wsproto_queue(w, WSPROTO_TEXT, (const uint8_t *)"x", 1),
	    -1);
	cr_assert_eq(wsproto_close(w, 1000, NULL, 0), -1);
	wsproto_free(w);
}

Test(wsproto, not_retired_while_its_close_waits)
{
	struct wsproto *w = NULL;
	struct io io;

	memset(&io, 0, sizeof(io));
	cr_assert_eq(wsproto_new(&io_blocked_ops, &io, 1024, &w), 0);
	cr_assert_eq(wsproto_close(w, 1001, NULL, 0), 0);
	(void)wsproto_send(w);
	wsproto_retire(w);
	cr_assert_eq(wsproto_want_write(w), 1);
	cr_assert_eq(wsproto_queued_count(w), 1);
	wsproto_free(w);
}

/* ---- A close after queued messages ---------------------------------------- */

static int gate_open;

/* A send op that takes nothing until gate_open is set. */
static ssize_t
io_send_gated(void *arg, const uint8_t *buf, size_t len)
{
	return gate_open ? io_send(arg, buf, len) : 0;
}

static const struct wsproto_ops io_gated_ops = { io_recv, io_send_gated,
	io_msg };

/* Messages queued while the upstream takes nothing, then a close: the
 * close goes out after them (libwslay alone would send it first and then
 * nothing more), and nothing can be queued after it. */
Test(wsproto, close_is_sent_after_the_messages_queued_before_it)
{
	struct wsproto *w = NULL;
	const uint8_t *f;
	struct io io;

	memset(&io, 0, sizeof(io));
	gate_open = 0;
	cr_assert_eq(wsproto_new(&io_gated_ops, &io, 1024, &w), 0);
	cr_assert_eq(wsproto_queue(w, WSPROTO_BINARY, (const uint8_t *)"one",
			 3),
	    0);
	cr_assert_eq(wsproto_queue(w, WSPROTO_TEXT, (const uint8_t *)"two", 3),
	    0);
	cr_assert_eq(wsproto_send(w), 0);
	cr_assert_eq(io.nout, 0);
	cr_assert_eq(wsproto_close(w, 1000, (const uint8_t *)"bye", 3), 0);
	cr_assert_eq(wsproto_close(w, 1001, NULL, 0), -1, "a second close");
	cr_assert_eq(wsproto_queue(w, WSPROTO_TEXT, (const uint8_t *)"x", 1),
	    -1, "a message after the close");
	cr_assert_eq(wsproto_want_write(w), 1);
	cr_assert_eq(wsproto_close_sent(w), 0);
	gate_open = 1;
	cr_assert_eq(wsproto_send(w), 0);
	/* Two masked frames of 3 bytes (2 + 4 + 3), then the close with
	 * its code and reason (2 + 4 + 5). */
	cr_assert_eq(io.nout, 9 + 9 + 11, "%zu bytes sent", io.nout);
	f = io.out;
	cr_assert_eq(f[0], 0x82);
	cr_assert_eq(f[6] ^ f[2], 'o');
	f += 9;
	cr_assert_eq(f[0], 0x81);
	cr_assert_eq(f[6] ^ f[2], 't');
	f += 9;
	cr_assert_eq(f[0], 0x88);
	cr_assert_eq(f[1], 0x85);
	cr_assert_eq((unsigned)((f[6] ^ f[2]) << 8 | (f[7] ^ f[3])), 1000);
	cr_assert_eq(f[8] ^ f[4], 'b');
	cr_assert_eq(wsproto_close_sent(w), 1);
	cr_assert_eq(wsproto_code_sent(w), 1000);
	cr_assert_eq(wsproto_want_write(w), 0);
	wsproto_free(w);
}

/* ---- Messages waiting behind the codec's queue ---------------------------- */

static size_t send_budget; /* bytes io_send_budget still takes */

static ssize_t
io_send_budget(void *arg, const uint8_t *buf, size_t len)
{
	ssize_t n;

	if (send_budget == 0)
		return 0;
	n = io_send(arg, buf, len < send_budget ? len : send_budget);
	send_budget -= (size_t)n;
	return n;
}

static const struct wsproto_ops io_budget_ops = { io_recv, io_send_budget,
	io_msg };

/*
 * More messages than the codec's queue holds wait behind it; a close
 * from the peer arrives while a frame is half written. The codec answers
 * the close once that frame is whole and sends nothing after it: what
 * waited is dropped, sending goes on without an error, and nothing is
 * left to write.
 */
Test(wsproto, a_close_received_while_messages_wait_ends_them)
{
	static const uint8_t close[] = { 0x88, 2, 0x03, 0xe8 };
	struct wsproto *w = NULL;
	struct io io;
	int i;

	memset(&io, 0, sizeof(io));
	send_budget = 0;
	cr_assert_eq(wsproto_new(&io_budget_ops, &io, 1024, &w), 0);
	for (i = 0; i < 100; i++)
		cr_assert_eq(wsproto_queue(w, WSPROTO_BINARY,
				 (const uint8_t *)"m", 1),
		    0, "message %d", i);
	cr_assert_eq(wsproto_queued_count(w), 64);
	cr_assert_eq(wsproto_queued_bytes(w), 64 + 36 * (5 + 1));
	send_budget = 5; /* the first frame is 7 bytes */
	cr_assert_eq(wsproto_send(w), 0);
	cr_assert_eq(io.nout, 5);
	io.in = close;
	io.n = sizeof(close);
	cr_assert_eq(wsproto_recv(w), 0);
	cr_assert_eq(wsproto_close_received(w), 1);
	send_budget = sizeof(io.out);
	cr_assert_eq(wsproto_send(w), 0);
	cr_assert_eq(wsproto_close_sent(w), 1);
	cr_assert_eq(wsproto_want_write(w), 0);
	/* The rest of the first frame, then the close (2 + 4 + 2). */
	cr_assert_eq(io.nout, 7 + 8, "%zu bytes sent", io.nout);
	cr_assert_eq(io.out[7], 0x88);
	cr_assert_eq(wsproto_queue(w, WSPROTO_BINARY, (const uint8_t *)"m", 1),
	    -1, "a message after the close");
	wsproto_free(w);
}
