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
