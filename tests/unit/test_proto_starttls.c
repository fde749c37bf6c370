/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for STARTTLS in proto/ (version 2): the message's encoding
 * and bounds, its absence from version 1, and the stream rules: only
 * the client asks, once, on a connected byte stream; only the broker
 * answers; no client DATA or TRAILERS while the answer is due; never on
 * a websocket stream.
 */
#include <criterion/criterion.h>
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
starttls(struct proto_msg *m, const char *profile)
{
	msg(m, PROTO_MSG_STARTTLS, 1, 0);
	m->starttls.tls_profile.ptr = profile;
	m->starttls.tls_profile.len = profile != NULL ? strlen(profile) : 0;
}

Test(proto_starttls, roundtrip)
{
	static struct proto_msg m, d;
	enum proto_fault f;
	int n;

	starttls(&m, "mtls");
	n = proto_encode(&m, frame, sizeof(frame), &f);
	cr_assert_eq(n, PROTO_HDR_SIZE + 2 + 4);
	cr_assert_eq(frame[4], 2, "STARTTLS exists from version 2");
	cr_assert_eq(frame[5], PROTO_MSG_STARTTLS);
	cr_assert_eq(proto_frame_decode(frame, (size_t)n, &d, &f), n);
	cr_assert(proto_msg_equal(&m, &d));
	cr_assert_eq(d.starttls.tls_profile.len, 4);
	cr_assert_str_eq(proto_type_name(PROTO_MSG_STARTTLS), "STARTTLS");
	/* No profile: an empty string. */
	starttls(&m, NULL);
	cr_assert_eq(proto_encode(&m, frame, sizeof(frame), &f),
	    PROTO_HDR_SIZE + 2);
}

Test(proto_starttls, decode_refusals)
{
	static struct proto_msg m, d;
	enum proto_fault f;
	int n;

	starttls(&m, "p");
	n = proto_encode(&m, frame, sizeof(frame), &f);
	cr_assert_gt(n, 0);
	/* Written in version 1: the type does not exist there. */
	frame[4] = 1;
	cr_assert_eq(proto_frame_decode(frame, (size_t)n, &d, &f),
	    EGRESS_ERR_PROTOCOL);
	cr_assert_eq(f, PROTO_FAULT_VERSION);
	frame[4] = 2;
	/* A flag. */
	frame[6] = PROTO_FLAG_END_STREAM;
	cr_assert_eq(proto_frame_decode(frame, (size_t)n, &d, &f),
	    EGRESS_ERR_PROTOCOL);
	cr_assert_eq(f, PROTO_FAULT_FLAGS);
	frame[6] = 0;
	/* Stream 0. */
	frame[11] = 0;
	cr_assert_eq(proto_frame_decode(frame, (size_t)n, &d, &f),
	    EGRESS_ERR_PROTOCOL);
	cr_assert_eq(f, PROTO_FAULT_STREAM_ID);
	frame[11] = 1;
	/* The string runs past the payload. */
	frame[PROTO_HDR_SIZE + 1] = 2;
	cr_assert_eq(proto_frame_decode(frame, (size_t)n, &d, &f),
	    EGRESS_ERR_PROTOCOL);
	cr_assert_eq(f, PROTO_FAULT_TRUNCATED);
	/* Trailing bytes after the string. */
	frame[PROTO_HDR_SIZE + 1] = 0;
	cr_assert_eq(proto_frame_decode(frame, (size_t)n, &d, &f),
	    EGRESS_ERR_PROTOCOL);
	cr_assert_eq(f, PROTO_FAULT_TRAILING);
}

Test(proto_starttls, profile_bound)
{
	static struct proto_msg m;
	static char name[PROTO_PROFILE_MAX + 2];
	enum proto_fault f;

	memset(name, 'a', PROTO_PROFILE_MAX);
	starttls(&m, name);
	cr_assert_eq(proto_encode(&m, frame, sizeof(frame), &f),
	    PROTO_HDR_SIZE + 2 + PROTO_PROFILE_MAX);
	name[PROTO_PROFILE_MAX] = 'a';
	starttls(&m, name);
	cr_assert_eq(proto_encode(&m, frame, sizeof(frame), &f),
	    EGRESS_ERR_INVALID);
}

/* Client and broker after HELLOs at version v, one stream of transport t
 * opened by the client and, when answered, the broker's RESPONSE. */
static struct proto_conn cl, br;
static struct proto_stream cs, bs;

static void
setup(uint16_t v, uint8_t t, int answered)
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
	if (!answered)
		return;
	msg(&m, PROTO_MSG_RESPONSE, 1, 0);
	m.response.status = 200;
	cr_assert_eq(proto_conn_send(&br, &bs, &m, NULL), 0);
	cr_assert_eq(proto_conn_recv(&cl, &cs, &m, NULL), PROTO_ACCEPT);
}

/* A frame from one side to the other: both sides' verdicts (the fault or
 * none). */
static void
expect(int up, const struct proto_msg *m, enum proto_fault want)
{
	struct proto_conn *sc = up ? &cl : &br, *rc = up ? &br : &cl;
	struct proto_stream *ss = up ? &cs : &bs, *rs = up ? &bs : &cs;
	enum proto_fault f = PROTO_FAULT_NONE;
	int rv = proto_conn_send(sc, ss, m, &f);

	cr_assert_eq(rv == 0 ? PROTO_FAULT_NONE : f, want, "send: %s",
	    proto_fault_str(f));
	f = PROTO_FAULT_NONE;
	rv = proto_conn_recv(rc, rs, m, &f);
	cr_assert_eq(rv >= 0 ? PROTO_FAULT_NONE : f, want, "recv: %s",
	    proto_fault_str(f));
}

static void
data(struct proto_msg *m, int flags)
{
	msg(m, PROTO_MSG_DATA, 1, flags);
	m->data.ptr = (const uint8_t *)"x";
	m->data.len = 1;
}

Test(proto_starttls, upgrade_sequence)
{
	static struct proto_msg m;

	setup(2, PROTO_TRANSPORT_TCP, 1);
	data(&m, 0);
	expect(1, &m, PROTO_FAULT_NONE);
	starttls(&m, "");
	expect(1, &m, PROTO_FAULT_NONE);
	cr_assert_eq(cs.upgrade, PROTO_UPGRADE_ASKED);
	cr_assert_eq(bs.upgrade, PROTO_UPGRADE_ASKED);
	/* No client plaintext while the answer is due. */
	data(&m, 0);
	expect(1, &m, PROTO_FAULT_UPGRADE);
	msg(&m, PROTO_MSG_DATA, 1, PROTO_FLAG_END_STREAM);
	expect(1, &m, PROTO_FAULT_UPGRADE);
	msg(&m, PROTO_MSG_TRAILERS, 1, PROTO_FLAG_END_STREAM);
	expect(1, &m, PROTO_FAULT_UPGRADE);
	/* The broker sends no DATA then either ... */
	data(&m, 0);
	cr_assert_eq(proto_conn_send(&br, &bs, &m, NULL), EGRESS_ERR_INVALID);
	/* ... but its DATA sent before it read the request may cross it. */
	cr_assert_eq(proto_conn_recv(&cl, &cs, &m, NULL), PROTO_ACCEPT);
	/* A second request before the answer. */
	starttls(&m, "");
	cr_assert_eq(proto_conn_send(&cl, &cs, &m, NULL), EGRESS_ERR_INVALID);
	cr_assert_eq(proto_conn_recv(&br, &bs, &m, NULL), EGRESS_ERR_PROTOCOL);
	/* The answer, then bytes both ways again. */
	expect(0, &m, PROTO_FAULT_NONE);
	cr_assert_eq(cs.upgrade, PROTO_UPGRADE_DONE);
	cr_assert_eq(bs.upgrade, PROTO_UPGRADE_DONE);
	data(&m, 0);
	expect(1, &m, PROTO_FAULT_NONE);
	expect(0, &m, PROTO_FAULT_NONE);
	/* Once upgraded, never again, and no second answer. */
	starttls(&m, "");
	expect(1, &m, PROTO_FAULT_UPGRADE);
	expect(0, &m, PROTO_FAULT_UPGRADE);
}

Test(proto_starttls, only_the_broker_answers_what_was_asked)
{
	static struct proto_msg m;

	setup(2, PROTO_TRANSPORT_TCP, 1);
	starttls(&m, "");
	expect(0, &m, PROTO_FAULT_UPGRADE);
}

Test(proto_starttls, not_before_connected)
{
	static struct proto_msg m;

	setup(2, PROTO_TRANSPORT_TCP, 0);
	starttls(&m, "");
	expect(1, &m, PROTO_FAULT_STREAM_STATE);
}

Test(proto_starttls, not_after_the_client_ended)
{
	static struct proto_msg m;

	setup(2, PROTO_TRANSPORT_TCP, 1);
	msg(&m, PROTO_MSG_DATA, 1, PROTO_FLAG_END_STREAM);
	expect(1, &m, PROTO_FAULT_NONE);
	starttls(&m, "");
	expect(1, &m, PROTO_FAULT_STREAM_STATE);
}

Test(proto_starttls, never_on_a_websocket_stream)
{
	static struct proto_msg m;

	setup(2, PROTO_TRANSPORT_WEBSOCKET, 1);
	starttls(&m, "");
	expect(1, &m, PROTO_FAULT_MESSAGES);
}

Test(proto_starttls, not_in_version_1)
{
	static struct proto_msg m;

	setup(1, PROTO_TRANSPORT_TCP, 1);
	starttls(&m, "");
	expect(1, &m, PROTO_FAULT_NOT_NEGOTIATED);
	m.version = 2;
	expect(1, &m, PROTO_FAULT_NOT_NEGOTIATED);
}
