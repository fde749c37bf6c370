/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for websocket streams in proto/ (version 2): WS_CONTROL's
 * encoding and field rules, the DATA flags MSG_END and BINARY, and the
 * state rules: refused on a version-1 connection (not-negotiated), only
 * on a websocket stream (messages), no END_STREAM on a websocket DATA,
 * no TRAILERS, and a close that ends its direction.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "proto/proto.h"

static uint8_t frame[PROTO_FRAME_MAX];

static void
msg(struct proto_msg *m, int type, uint32_t stream, int flags)
{
	memset(m, 0, offsetof(struct proto_msg, headers));
	m->nheaders = 0;
	m->type = (uint8_t)type;
	m->stream = stream;
	m->flags = (uint8_t)flags;
}

static void
control(struct proto_msg *m, uint32_t stream, int op, unsigned code,
    const char *b, int flags)
{
	msg(m, PROTO_MSG_WS_CONTROL, stream, flags);
	m->ws_control.opcode = (uint8_t)op;
	m->ws_control.code = (uint16_t)code;
	m->ws_control.ptr = (const uint8_t *)b;
	m->ws_control.len = b != NULL ? strlen(b) : 0;
}

Test(proto_ws, control_roundtrip)
{
	static struct proto_msg m, d;
	enum proto_fault f;
	int n;

	control(&m, 3, PROTO_WS_CLOSE, 4001, "bye", PROTO_FLAG_END_STREAM);
	n = proto_encode(&m, frame, sizeof(frame), &f);
	cr_assert_eq(n, PROTO_HDR_SIZE + 3 + 3);
	cr_assert_eq(frame[5], PROTO_MSG_WS_CONTROL);
	cr_assert_eq(frame[PROTO_HDR_SIZE], PROTO_WS_CLOSE);
	cr_assert_eq(proto_frame_decode(frame, (size_t)n, &d, &f), n);
	cr_assert(proto_msg_equal(&m, &d));
	cr_assert_eq(d.ws_control.code, 4001);
	cr_assert_eq(d.ws_control.len, 3);
}

struct bad_control {
	char name[24];
	int op;
	unsigned code;
	size_t len;
	int flags;
	enum proto_fault fault;
};

static struct bad_control bad_controls[] = {
	{ "close-no-end", PROTO_WS_CLOSE, 1000, 0, 0, PROTO_FAULT_FLAGS },
	{ "close-999", PROTO_WS_CLOSE, 999, 0, 1, PROTO_FAULT_VALUE },
	{ "close-5000", PROTO_WS_CLOSE, 5000, 0, 1, PROTO_FAULT_VALUE },
	{ "close-reason-no-code", PROTO_WS_CLOSE, 0, 1, 1, PROTO_FAULT_VALUE },
	{ "close-reason-124", PROTO_WS_CLOSE, 1000, 124, 1,
	    PROTO_FAULT_VALUE },
	{ "ping-end", PROTO_WS_PING, 0, 0, 1, PROTO_FAULT_FLAGS },
	{ "ping-code", PROTO_WS_PING, 1000, 0, 0, PROTO_FAULT_VALUE },
	{ "pong-126", PROTO_WS_PONG, 0, 126, 0, PROTO_FAULT_VALUE },
	{ "opcode-1", 1, 0, 0, 0, PROTO_FAULT_VALUE },
};

ParameterizedTestParameters(proto_ws, control_refused)
{
	return cr_make_param_array(struct bad_control, bad_controls,
	    sizeof(bad_controls) / sizeof(bad_controls[0]));
}

ParameterizedTest(struct bad_control *c, proto_ws, control_refused)
{
	static char bytes[200];
	static struct proto_msg m, d;
	enum proto_fault f = PROTO_FAULT_NONE;

	memset(bytes, 'r', sizeof(bytes));
	bytes[c->len] = '\0';
	control(&m, 1, c->op, c->code, bytes, c->flags);
	cr_assert_eq(proto_encode(&m, frame, sizeof(frame), &f),
	    EGRESS_ERR_INVALID, "%s", c->name);
	cr_assert_eq(f, c->fault, "%s: %s", c->name, proto_fault_str(f));
	/* The decoder refuses the same bytes. */
	frame[0] = 0;
	frame[1] = 0;
	frame[2] = 0;
	frame[3] = (uint8_t)(3 + c->len);
	frame[4] = 2; /* WS_CONTROL is a version-2 type */
	frame[5] = PROTO_MSG_WS_CONTROL;
	frame[6] = (uint8_t)c->flags;
	frame[7] = 0;
	memset(frame + 8, 0, 3);
	frame[11] = 1;
	frame[12] = (uint8_t)c->op;
	frame[13] = (uint8_t)(c->code >> 8);
	frame[14] = (uint8_t)c->code;
	memset(frame + 15, 'r', c->len);
	if (3 + c->len <= 3 + PROTO_WS_PAYLOAD_MAX)
		cr_assert_eq(proto_frame_decode(frame, 15 + c->len, &d, &f),
		    EGRESS_ERR_PROTOCOL, "%s", c->name);
}

Test(proto_ws, data_flags_with_end_stream_refused)
{
	static struct proto_msg m;
	enum proto_fault f;

	msg(&m, PROTO_MSG_DATA, 1, PROTO_FLAG_END_STREAM | PROTO_FLAG_MSG_END);
	m.data.ptr = (const uint8_t *)"x";
	m.data.len = 1;
	cr_assert_eq(proto_encode(&m, frame, sizeof(frame), &f),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(f, PROTO_FAULT_FLAGS);
	/* An empty message is one empty DATA with MSG_END. */
	msg(&m, PROTO_MSG_DATA, 1, PROTO_FLAG_MSG_END);
	cr_assert_eq(proto_encode(&m, frame, sizeof(frame), &f),
	    PROTO_HDR_SIZE);
}

/* Client and broker after HELLOs at version v, one stream of transport t
 * opened by the client. */
static struct proto_conn cl, br;
static struct proto_stream cs, bs;

static void
setup(uint16_t v, uint8_t t)
{
	static struct proto_msg m;

	proto_conn_init(&cl, PROTO_ROLE_CLIENT);
	proto_conn_init(&br, PROTO_ROLE_BROKER);
	msg(&m, PROTO_MSG_HELLO, 0, 0);
	m.hello.version = v;
	cr_assert_eq(proto_conn_send(&cl, NULL, &m, NULL), 0);
	cr_assert_eq(proto_conn_recv(&br, NULL, &m, NULL), PROTO_ACCEPT);
	cr_assert_eq(proto_conn_send(&br, NULL, &m, NULL), 0);
	cr_assert_eq(proto_conn_recv(&cl, NULL, &m, NULL), PROTO_ACCEPT);
	proto_stream_init(&cs, 1);
	proto_stream_init(&bs, 1);
	msg(&m, PROTO_MSG_REQUEST, 1, 0);
	m.request.transport = t;
	cr_assert_eq(proto_conn_send(&cl, &cs, &m, NULL), 0);
	cr_assert_eq(proto_conn_recv(&br, &bs, &m, NULL), PROTO_ACCEPT);
	cr_assert_eq(cs.messages, v >= 2 && t == PROTO_TRANSPORT_WEBSOCKET);
	cr_assert_eq(bs.messages, cs.messages);
}

/* Client -> broker: both sides' verdicts (0 or the fault). */
static void
expect_up(const struct proto_msg *m, enum proto_fault want)
{
	enum proto_fault f = PROTO_FAULT_NONE;
	int rs = proto_conn_send(&cl, &cs, m, &f);

	cr_assert_eq(rs == 0 ? PROTO_FAULT_NONE : f, want, "send: %s",
	    proto_fault_str(f));
	f = PROTO_FAULT_NONE;
	rs = proto_conn_recv(&br, &bs, m, &f);
	cr_assert_eq(rs >= 0 ? PROTO_FAULT_NONE : f, want, "recv: %s",
	    proto_fault_str(f));
}

Test(proto_ws, version_1_has_no_messages)
{
	static struct proto_msg m;

	setup(1, PROTO_TRANSPORT_WEBSOCKET);
	control(&m, 1, PROTO_WS_PING, 0, "p", 0);
	expect_up(&m, PROTO_FAULT_NOT_NEGOTIATED);
	msg(&m, PROTO_MSG_DATA, 1, PROTO_FLAG_MSG_END);
	expect_up(&m, PROTO_FAULT_NOT_NEGOTIATED);
}

Test(proto_ws, only_on_websocket_streams)
{
	static struct proto_msg m;

	setup(2, PROTO_TRANSPORT_HTTP);
	control(&m, 1, PROTO_WS_PING, 0, "p", 0);
	expect_up(&m, PROTO_FAULT_MESSAGES);
	msg(&m, PROTO_MSG_DATA, 1, PROTO_FLAG_BINARY);
	m.data.ptr = (const uint8_t *)"x";
	m.data.len = 1;
	expect_up(&m, PROTO_FAULT_MESSAGES);
}

Test(proto_ws, websocket_stream_rules)
{
	static struct proto_msg m;

	setup(2, PROTO_TRANSPORT_WEBSOCKET);
	msg(&m, PROTO_MSG_DATA, 1, PROTO_FLAG_MSG_END | PROTO_FLAG_BINARY);
	m.data.ptr = (const uint8_t *)"hi";
	m.data.len = 2;
	expect_up(&m, PROTO_FAULT_NONE);
	msg(&m, PROTO_MSG_DATA, 1, PROTO_FLAG_END_STREAM);
	expect_up(&m, PROTO_FAULT_MESSAGES);
	msg(&m, PROTO_MSG_TRAILERS, 1, PROTO_FLAG_END_STREAM);
	expect_up(&m, PROTO_FAULT_MESSAGES);
	control(&m, 1, PROTO_WS_PING, 0, "p", 0);
	expect_up(&m, PROTO_FAULT_NONE);
	/* The guest's close ends its direction. */
	control(&m, 1, PROTO_WS_CLOSE, 1000, "", PROTO_FLAG_END_STREAM);
	expect_up(&m, PROTO_FAULT_NONE);
	cr_assert_eq(cs.state, PROTO_STREAM_HALF_CLOSED_LOCAL);
	cr_assert_eq(bs.state, PROTO_STREAM_HALF_CLOSED_REMOTE);
	control(&m, 1, PROTO_WS_PING, 0, "p", 0);
	expect_up(&m, PROTO_FAULT_STREAM_STATE);
}
