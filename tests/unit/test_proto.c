/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for the proto/ frame codec: every message type round-trips
 * through proto_encode() and proto_frame_decode(); every prefix of a frame
 * is "need more bytes"; every malformed form (short or oversized length,
 * bad version, unknown type, reserved bits, flags, stream ids, payload
 * lengths, truncated fields, trailing bytes, strings and header lists over
 * their bounds, values out of range) is refused with its fault; the
 * encoder refuses what the decoder would; and the wire-code tables map
 * onto the EGRESS_ERR_* enum with masked messages.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"

static uint8_t frame[PROTO_FRAME_MAX + 64];

static size_t
unhex(const char *hex, uint8_t *out, size_t max)
{
	size_t n = 0;
	unsigned int v;

	while (*hex != '\0') {
		if (*hex == ' ' || *hex == '|') {
			hex++;
			continue;
		}
		// NOLINTNEXTLINE(cert-err34-c): the table holds hex pairs
		cr_assert(sscanf(hex, "%2x", &v) == 1, "bad hex in test");
		cr_assert(n < max);
		out[n++] = (uint8_t)v;
		hex += 2;
	}
	return n;
}

static void
set_str(struct proto_str *s, const char *text)
{
	s->ptr = text;
	s->len = strlen(text);
}

/* ---- Round trips ------------------------------------------------------- */

struct rt_case {
	char name[24];
	int kind;
};

enum {
	RT_HELLO,
	RT_REQUEST,
	RT_REQUEST_EMPTY,
	RT_REQUEST_MAX,
	RT_REQUEST_V2,
	RT_REQUEST_V2_MAX,
	RT_RESPONSE,
	RT_DATA,
	RT_DATA_END,
	RT_DATA_MAX,
	RT_TRAILERS,
	RT_WINDOW_UPDATE,
	RT_WINDOW_CONN,
	RT_RESET,
	RT_ERROR,
	RT_ERROR_CONN,
	RT_GOAWAY,
	RT_PING,
	RT_PONG,
};

static char big_path[PROTO_PATH_MAX + 1];
static char big_value[PROTO_VALUE_MAX + 1];
static char names[PROTO_HEADERS_MAX][8];
static uint8_t body[PROTO_DATA_MAX];

static void
build(int kind, struct proto_msg *m)
{
	struct proto_request *q = &m->request;
	size_t i;

	memset(m, 0, sizeof(*m));
	switch (kind) {
	case RT_HELLO:
		m->type = PROTO_MSG_HELLO;
		m->hello.version = 7;
		break;
	case RT_REQUEST:
		m->type = PROTO_MSG_REQUEST;
		m->stream = 1;
		q->transport = PROTO_TRANSPORT_HTTP;
		q->timeouts.connect_ms = 1000;
		q->timeouts.first_byte_ms = 2000;
		q->timeouts.between_bytes_ms = 3000;
		q->timeouts.total_ms = 0xffffffffU;
		set_str(&q->method, "POST");
		set_str(&q->scheme, "https");
		set_str(&q->authority, "api.example.com:8443");
		set_str(&q->path, "/v1/items?q=1&r=%20");
		m->nheaders = 3;
		set_str(&m->headers[0].name, "content-type");
		set_str(&m->headers[0].value, "application/json");
		set_str(&m->headers[1].name, "x-empty");
		set_str(&m->headers[1].value, "");
		set_str(&m->headers[2].name, "x-bin");
		m->headers[2].value.ptr = "a\0b";
		m->headers[2].value.len = 3;
		break;
	case RT_REQUEST_EMPTY:
		m->type = PROTO_MSG_REQUEST;
		m->flags = PROTO_FLAG_END_STREAM;
		m->stream = PROTO_STREAM_ID_MAX;
		q->transport = PROTO_TRANSPORT_TLS;
		break;
	case RT_REQUEST_MAX:
		/* Every bound at its maximum still fits one frame. */
		m->type = PROTO_MSG_REQUEST;
		m->stream = 3;
		q->transport = PROTO_TRANSPORT_WEBSOCKET;
		memset(big_path, 'p', PROTO_PATH_MAX);
		q->method.ptr = big_path;
		q->method.len = PROTO_METHOD_MAX;
		q->scheme.ptr = big_path;
		q->scheme.len = PROTO_SCHEME_MAX;
		q->authority.ptr = big_path;
		q->authority.len = PROTO_AUTHORITY_MAX;
		q->path.ptr = big_path;
		q->path.len = PROTO_PATH_MAX;
		memset(big_value, 'v', PROTO_VALUE_MAX);
		m->nheaders = PROTO_HEADERS_MAX;
		for (i = 0; i < PROTO_HEADERS_MAX; i++) {
			(void)snprintf(names[i], sizeof(names[i]), "h%zu", i);
			set_str(&m->headers[i].name, names[i]);
			m->headers[i].value.ptr = big_value;
			m->headers[i].value.len = 0;
		}
		/* Fill the header byte budget exactly. */
		m->headers[0].value.len = PROTO_HEADER_BYTES_MAX;
		for (i = 0; i < PROTO_HEADERS_MAX; i++)
			m->headers[0].value.len -= strlen(names[i]);
		break;
	case RT_REQUEST_V2:
		/* Version 2: the trailing tls profile. */
		build(RT_REQUEST, m);
		m->version = 2;
		set_str(&m->request.tls_profile, "mtls");
		break;
	case RT_REQUEST_V2_MAX:
		build(RT_REQUEST_MAX, m);
		m->version = 2;
		q->tls_profile.ptr = big_path;
		q->tls_profile.len = PROTO_PROFILE_MAX;
		break;
	case RT_RESPONSE:
		m->type = PROTO_MSG_RESPONSE;
		m->stream = 5;
		m->response.status = 302;
		m->nheaders = 1;
		set_str(&m->headers[0].name, "location");
		set_str(&m->headers[0].value, "http://169.254.169.254/");
		break;
	case RT_DATA:
		m->type = PROTO_MSG_DATA;
		m->stream = 9;
		m->data.ptr = (const uint8_t *)"hello\0world";
		m->data.len = 11;
		break;
	case RT_DATA_END:
		m->type = PROTO_MSG_DATA;
		m->flags = PROTO_FLAG_END_STREAM;
		m->stream = 9;
		break;
	case RT_DATA_MAX:
		m->type = PROTO_MSG_DATA;
		m->stream = 11;
		for (i = 0; i < sizeof(body); i++)
			body[i] = (uint8_t)(i * 7);
		m->data.ptr = body;
		m->data.len = PROTO_DATA_MAX;
		break;
	case RT_TRAILERS:
		m->type = PROTO_MSG_TRAILERS;
		m->flags = PROTO_FLAG_END_STREAM;
		m->stream = 13;
		m->nheaders = 2;
		set_str(&m->headers[0].name, "grpc-status");
		set_str(&m->headers[0].value, "0");
		set_str(&m->headers[1].name, "grpc-message");
		set_str(&m->headers[1].value, "ok");
		break;
	case RT_WINDOW_UPDATE:
		m->type = PROTO_MSG_WINDOW_UPDATE;
		m->stream = 15;
		m->window_update.increment = PROTO_WINDOW_MAX;
		break;
	case RT_WINDOW_CONN:
		m->type = PROTO_MSG_WINDOW_UPDATE;
		m->window_update.increment = 1;
		break;
	case RT_RESET:
		m->type = PROTO_MSG_RESET;
		m->stream = 17;
		m->reset.code = PROTO_CODE_CANCELLED;
		break;
	case RT_ERROR:
		cr_assert(proto_error_init(m, 19, PROTO_CODE_DENIED) == 0);
		break;
	case RT_ERROR_CONN:
		cr_assert(proto_error_init(m, 0, PROTO_CODE_PROTOCOL) == 0);
		break;
	case RT_GOAWAY:
		m->type = PROTO_MSG_GOAWAY;
		m->goaway.last_stream = 21;
		break;
	case RT_PING:
	case RT_PONG:
		m->type = kind == RT_PING ? PROTO_MSG_PING : PROTO_MSG_PONG;
		memcpy(m->ping.opaque, "\x01\x02\x03\x04\x05\x06\x07\xff", 8);
		break;
	}
}

static struct rt_case rt_cases[] = {
	{ "hello", RT_HELLO },
	{ "request", RT_REQUEST },
	{ "request-empty", RT_REQUEST_EMPTY },
	{ "request-max", RT_REQUEST_MAX },
	{ "request-v2", RT_REQUEST_V2 },
	{ "request-v2-max", RT_REQUEST_V2_MAX },
	{ "response", RT_RESPONSE },
	{ "data", RT_DATA },
	{ "data-end", RT_DATA_END },
	{ "data-max", RT_DATA_MAX },
	{ "trailers", RT_TRAILERS },
	{ "window-update", RT_WINDOW_UPDATE },
	{ "window-conn", RT_WINDOW_CONN },
	{ "reset", RT_RESET },
	{ "error", RT_ERROR },
	{ "error-conn", RT_ERROR_CONN },
	{ "goaway", RT_GOAWAY },
	{ "ping", RT_PING },
	{ "pong", RT_PONG },
};

ParameterizedTestParameters(proto, roundtrip)
{
	return cr_make_param_array(struct rt_case, rt_cases,
	    sizeof(rt_cases) / sizeof(rt_cases[0]));
}

ParameterizedTest(struct rt_case *c, proto, roundtrip)
{
	static struct proto_msg in, out;
	enum proto_fault f = PROTO_FAULT_NONE;
	int size, n, rc;
	size_t cut;

	build(c->kind, &in);
	size = proto_encode_size(&in, &f);
	cr_assert_gt(size, 0, "%s: size %d fault %s", c->name, size,
	    proto_fault_str(f));
	cr_assert_leq(size, PROTO_FRAME_MAX);
	n = proto_encode(&in, frame, sizeof(frame), &f);
	cr_assert_eq(n, size, "%s: encode %d", c->name, n);
	/* A buffer one byte short is refused, not overrun. */
	cr_assert_eq(proto_encode(&in, frame, (size_t)size - 1, &f),
	    EGRESS_ERR_TOO_BIG);
	n = proto_encode(&in, frame, sizeof(frame), &f);
	cr_assert_eq(n, size);
	rc = proto_frame_decode(frame, (size_t)n, &out, &f);
	cr_assert_eq(rc, n, "%s: decode %d fault %s", c->name, rc,
	    proto_fault_str(f));
	cr_assert(proto_msg_equal(&in, &out), "%s: not equal", c->name);
	/* Extra bytes after the frame belong to the next one. */
	rc = proto_frame_decode(frame, sizeof(frame), &out, &f);
	cr_assert_eq(rc, n);
	/* Every strict prefix is "need more bytes". */
	for (cut = 0; cut < (size_t)n; cut += (cut < 64 ? 1 : 997)) {
		rc = proto_frame_decode(frame, cut, &out, &f);
		cr_assert_eq(rc, 0, "%s: prefix %zu gave %d", c->name, cut,
		    rc);
	}
}

Test(proto, equal_detects_difference)
{
	static struct proto_msg a, b;

	build(RT_REQUEST, &a);
	build(RT_REQUEST, &b);
	cr_assert(proto_msg_equal(&a, &b));
	set_str(&b.headers[1].value, "x");
	cr_assert_not(proto_msg_equal(&a, &b));
	build(RT_REQUEST, &b);
	b.request.timeouts.total_ms = 1;
	cr_assert_not(proto_msg_equal(&a, &b));
	build(RT_DATA, &b);
	cr_assert_not(proto_msg_equal(&a, &b));
}

Test(proto, header_fields_layout)
{
	static struct proto_msg m;
	struct proto_hdr h;
	enum proto_fault f;

	build(RT_WINDOW_UPDATE, &m);
	cr_assert_eq(proto_encode(&m, frame, sizeof(frame), &f), 16);
	/* length 4, version 1, type 6, flags 0, reserved 0, stream 15. */
	cr_assert_eq(memcmp(frame,
			 "\0\0\0\x04\x01\x06\0\0\0\0\0\x0f"
			 "\x7f\xff\xff\xff",
			 16),
	    0);
	cr_assert_eq(proto_hdr_decode(frame, 16, &h, &f), PROTO_HDR_SIZE);
	cr_assert_eq(h.length, 4);
	cr_assert_eq(h.type, PROTO_MSG_WINDOW_UPDATE);
	cr_assert_eq(h.stream, 15);
}

/* ---- Malformed frames -------------------------------------------------- */

struct bad_case {
	char name[40];
	char hex[200]; /* length|ver type flags rsv|stream|payload */
	int rc;	       /* 0 (need more) or EGRESS_ERR_PROTOCOL */
	enum proto_fault fault;
};

static struct bad_case bad_cases[] = {
	/* Incomplete: not an error yet. */
	{ "empty", "", 0, 0 },
	{ "three-bytes", "000000", 0, 0 },
	{ "short-header", "00000002|01010000|0000", 0, 0 },
	{ "short-payload", "00000002|01010000|00000000|00", 0, 0 },
	/* The length is judged from its 4 bytes alone. */
	{ "oversized-4-bytes", "00018001", EGRESS_ERR_PROTOCOL,
	    PROTO_FAULT_TOO_BIG },
	{ "oversized-ffffffff", "ffffffff|02", EGRESS_ERR_PROTOCOL,
	    PROTO_FAULT_TOO_BIG },
	{ "oversized-before-version", "ffffffff|ff", EGRESS_ERR_PROTOCOL,
	    PROTO_FAULT_TOO_BIG },
	{ "bad-version-5-bytes", "00000002|03", EGRESS_ERR_PROTOCOL,
	    PROTO_FAULT_VERSION },
	{ "bad-version-0", "00000002|00010000|00000000|0001",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_VERSION },
	{ "unknown-type-0", "00000002|01000000|00000000|0001",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_TYPE },
	{ "unknown-type-14", "00000000|010e0000|00000000", EGRESS_ERR_PROTOCOL,
	    PROTO_FAULT_TYPE },
	{ "unknown-type-255", "00000000|01ff0000|00000001",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_TYPE },
	{ "reserved-byte", "00000002|01010001|00000000|0001",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_RESERVED },
	{ "hello-flag", "00000002|01010100|00000000|0001", EGRESS_ERR_PROTOCOL,
	    PROTO_FAULT_FLAGS },
	{ "data-unknown-flag", "00000001|01040800|00000001|00",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_FLAGS },
	{ "trailers-without-end", "00000002|01050000|00000001|0000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_FLAGS },
	{ "hello-on-stream", "00000002|01010000|00000001|0001",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_STREAM_ID },
	{ "data-stream-zero", "00000001|01040000|00000000|00",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_STREAM_ID },
	{ "request-stream-zero", "00000000|01020000|00000000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_STREAM_ID },
	{ "reset-stream-zero", "00000004|01070000|00000000|0000000a",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_STREAM_ID },
	{ "stream-high-bit", "00000001|01040000|80000001|00",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_STREAM_ID },
	{ "ping-on-stream", "00000008|010a0000|00000003|0000000000000000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_STREAM_ID },
	{ "goaway-on-stream", "00000004|01090000|00000003|00000000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_STREAM_ID },
	{ "hello-too-long", "00000003|01010000|00000000|000100",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_TOO_BIG },
	{ "ping-too-long", "00000009|010a0000|00000000|000000000000000000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_TOO_BIG },
	{ "data-over-64k", "00010001|01040000|00000001", EGRESS_ERR_PROTOCOL,
	    PROTO_FAULT_TOO_BIG },
	{ "error-over-message-cap", "00000107|01080000|00000001",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_TOO_BIG },
	{ "hello-too-short", "00000001|01010000|00000000|00",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_LENGTH },
	{ "window-too-short", "00000003|01060000|00000000|000001",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_LENGTH },
	{ "request-too-short", "00000002|01020000|00000001|0100",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_LENGTH },
	{ "empty-data-not-end", "00000000|01040000|00000001",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_LENGTH },
	/* Payload fields. */
	{ "hello-version-0", "00000002|01010000|00000000|0000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_VALUE },
	{ "request-transport-0",
	    "0000001b|01020000|00000001|00|00000000000000000000000000000000"
	    "|0000|0000|0000|0000|0000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_VALUE },
	{ "request-transport-5",
	    "0000001b|01020000|00000001|05|00000000000000000000000000000000"
	    "|0000|0000|0000|0000|0000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_VALUE },
	{ "request-minimal-ok-but-trailing",
	    "0000001c|01020000|00000001|01|00000000000000000000000000000000"
	    "|0000|0000|0000|0000|0000|00",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_TRAILING },
	{ "request-method-over-32",
	    "00000034|01020000|00000001|01|00000000000000000000000000000000"
	    "|0021|474554474554474554474554474554474554474554474554474554474554"
	    "474554",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_STRING },
	{ "request-fields-truncated",
	    "0000001d|01020000|00000001|01|00000000000000000000000000000000"
	    "|0003|4745|0000|0000|0000|0000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_TRUNCATED },
	{ "request-path-past-end",
	    "0000001b|01020000|00000001|01|00000000000000000000000000000000"
	    "|0000|0000|0000|0009|0000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_TRUNCATED },
	{ "request-authority-over-512",
	    "0000001b|01020000|00000001|01|00000000000000000000000000000000"
	    "|0000|0000|0201|0000|0000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_STRING },
	{ "response-status-99", "00000004|01030000|00000001|0063|0000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_VALUE },
	{ "response-status-1000", "00000004|01030000|00000001|03e8|0000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_VALUE },
	{ "response-trailing", "00000005|01030000|00000001|00c8|0000|00",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_TRAILING },
	{ "trailers-trailing", "00000003|01050100|00000001|0000|ff",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_TRAILING },
	{ "header-count-257", "00000002|01050100|00000001|0101",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_COUNT },
	{ "header-count-65535", "00000002|01050100|00000001|ffff",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_COUNT },
	{ "header-count-past-end", "00000002|01050100|00000001|0001",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_TRUNCATED },
	{ "header-name-empty", "00000006|01050100|00000001|0001|0000|0000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_STRING },
	{ "header-name-257", "00000004|01050100|00000001|0001|0101",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_STRING },
	{ "header-value-missing", "00000005|01050100|00000001|0001|0001|61",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_TRUNCATED },
	{ "header-value-past-end",
	    "00000009|01050100|00000001|0001|0001|61|0005|6263",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_TRUNCATED },
	{ "window-increment-0", "00000004|01060000|00000000|00000000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_VALUE },
	{ "window-increment-2^31", "00000004|01060000|00000001|80000000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_VALUE },
	{ "reset-code-0", "00000004|01070000|00000001|00000000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_VALUE },
	{ "reset-code-12", "00000004|01070000|00000001|0000000c",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_VALUE },
	{ "error-code-99", "00000006|01080000|00000001|00000063|0000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_VALUE },
	{ "error-message-past-end",
	    "00000007|01080000|00000001|00000001|0002"
	    "|61",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_TRUNCATED },
	{ "error-trailing", "00000008|01080000|00000001|00000001|0001|61|62",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_TRAILING },
	{ "goaway-high-bit", "00000004|01090000|00000000|80000000",
	    EGRESS_ERR_PROTOCOL, PROTO_FAULT_VALUE },
};

ParameterizedTestParameters(proto, malformed)
{
	return cr_make_param_array(struct bad_case, bad_cases,
	    sizeof(bad_cases) / sizeof(bad_cases[0]));
}

ParameterizedTest(struct bad_case *c, proto, malformed)
{
	static struct proto_msg m;
	enum proto_fault f = PROTO_FAULT_NONE;
	size_t n;
	int rc;

	n = unhex(c->hex, frame, sizeof(frame));
	rc = proto_frame_decode(frame, n, &m, &f);
	cr_assert_eq(rc, c->rc, "%s: rc %d, want %d (fault %s)", c->name, rc,
	    c->rc, proto_fault_str(f));
	if (c->rc < 0)
		cr_assert_eq(f, c->fault, "%s: fault %s, want %s", c->name,
		    proto_fault_str(f), proto_fault_str(c->fault));
}

/* Bounds too large for hex: built in code. */
Test(proto, header_bytes_over_bound)
{
	static struct proto_msg m;
	enum proto_fault f;
	uint8_t *p;
	size_t len;
	int rc;

	/* Two headers of 1 + 32767 and 1 + 32768 bytes: 65537 in total. */
	memset(frame, 'x', sizeof(frame));
	p = frame + PROTO_HDR_SIZE;
	p[0] = 0, p[1] = 2;
	p += 2;
	p[0] = 0, p[1] = 1, p[2] = 'a', p[3] = 0x7f, p[4] = 0xff;
	p += 5 + 32767;
	p[0] = 0, p[1] = 1, p[2] = 'b', p[3] = 0x80, p[4] = 0x00;
	p += 5 + 32768;
	len = (size_t)(p - frame);
	cr_assert_eq(proto_hdr_encode(frame, PROTO_MSG_TRAILERS,
			 PROTO_FLAG_END_STREAM, 1,
			 (uint32_t)(len - PROTO_HDR_SIZE), &f),
	    PROTO_HDR_SIZE);
	rc = proto_frame_decode(frame, len, &m, &f);
	cr_assert_eq(rc, EGRESS_ERR_PROTOCOL);
	cr_assert_eq(f, PROTO_FAULT_HEADER_BYTES);
	/* One byte less in the second value is accepted. */
	frame[PROTO_HDR_SIZE + 2 + 5 + 32767 + 4] = 0x00;
	frame[PROTO_HDR_SIZE + 2 + 5 + 32767 + 3] = 0x7f;
	frame[PROTO_HDR_SIZE + 2 + 5 + 32767 + 4] = 0xff;
	len--;
	cr_assert_eq(proto_hdr_encode(frame, PROTO_MSG_TRAILERS,
			 PROTO_FLAG_END_STREAM, 1,
			 (uint32_t)(len - PROTO_HDR_SIZE), &f),
	    PROTO_HDR_SIZE);
	rc = proto_frame_decode(frame, len, &m, &f);
	cr_assert_eq(rc, (int)len, "fault %s", proto_fault_str(f));
	cr_assert_eq(m.nheaders, 2);
	cr_assert_eq(m.headers[1].value.len, 32767);
}

Test(proto, payload_decode_rechecks_header)
{
	static struct proto_msg m;
	struct proto_hdr h = { 2, PROTO_VERSION + 1, PROTO_MSG_HELLO, 0, 0 };
	enum proto_fault f;

	cr_assert_eq(proto_payload_decode(&h, (const uint8_t *)"\0\1", &m, &f),
	    EGRESS_ERR_PROTOCOL);
	cr_assert_eq(f, PROTO_FAULT_VERSION);
	h.version = 2; /* HELLO's layout is frozen at version 1 */
	cr_assert_eq(proto_payload_decode(&h, (const uint8_t *)"\0\1", &m, &f),
	    EGRESS_ERR_PROTOCOL);
	cr_assert_eq(f, PROTO_FAULT_VERSION);
	h.version = 1;
	h.stream = 3;
	cr_assert_eq(proto_payload_decode(&h, (const uint8_t *)"\0\1", &m, &f),
	    EGRESS_ERR_PROTOCOL);
	cr_assert_eq(f, PROTO_FAULT_STREAM_ID);
	h.stream = 0;
	cr_assert_eq(proto_payload_decode(&h, (const uint8_t *)"\0\1", &m, &f),
	    0);
	cr_assert_eq(m.hello.version, 1);
}

/* ---- Encoder refusals -------------------------------------------------- */

struct enc_case {
	char name[32];
	int kind; /* base message */
	int mutate;
	enum proto_fault fault;
};

enum {
	MUT_TYPE0,
	MUT_TYPE14,
	MUT_FLAG,
	MUT_STREAM0,
	MUT_STREAM_HIGH,
	MUT_METHOD33,
	MUT_NAME_EMPTY,
	MUT_NAME257,
	MUT_COUNT257,
	MUT_HEADER_BYTES,
	MUT_STATUS,
	MUT_TRANSPORT,
	MUT_INC0,
	MUT_CODE0,
	MUT_MESSAGE257,
	MUT_DATA_EMPTY,
	MUT_DATA_65537,
	MUT_HELLO0,
	MUT_TRAILERS_NO_END,
	MUT_NULL_PTR,
};

static struct enc_case enc_cases[] = {
	{ "type-0", RT_PING, MUT_TYPE0, PROTO_FAULT_TYPE },
	{ "type-14", RT_PING, MUT_TYPE14, PROTO_FAULT_TYPE },
	{ "reset-flag", RT_RESET, MUT_FLAG, PROTO_FAULT_FLAGS },
	{ "data-stream-0", RT_DATA, MUT_STREAM0, PROTO_FAULT_STREAM_ID },
	{ "data-stream-high", RT_DATA, MUT_STREAM_HIGH,
	    PROTO_FAULT_STREAM_ID },
	{ "method-33", RT_REQUEST, MUT_METHOD33, PROTO_FAULT_STRING },
	{ "name-empty", RT_REQUEST, MUT_NAME_EMPTY, PROTO_FAULT_STRING },
	{ "name-257", RT_RESPONSE, MUT_NAME257, PROTO_FAULT_STRING },
	{ "count-257", RT_TRAILERS, MUT_COUNT257, PROTO_FAULT_COUNT },
	{ "header-bytes", RT_REQUEST_MAX, MUT_HEADER_BYTES,
	    PROTO_FAULT_HEADER_BYTES },
	{ "status-1000", RT_RESPONSE, MUT_STATUS, PROTO_FAULT_VALUE },
	{ "transport-9", RT_REQUEST, MUT_TRANSPORT, PROTO_FAULT_VALUE },
	{ "increment-0", RT_WINDOW_UPDATE, MUT_INC0, PROTO_FAULT_VALUE },
	{ "code-0", RT_ERROR, MUT_CODE0, PROTO_FAULT_VALUE },
	{ "message-257", RT_ERROR, MUT_MESSAGE257, PROTO_FAULT_STRING },
	{ "data-empty-not-end", RT_DATA, MUT_DATA_EMPTY, PROTO_FAULT_LENGTH },
	{ "data-65537", RT_DATA_MAX, MUT_DATA_65537, PROTO_FAULT_TOO_BIG },
	{ "hello-0", RT_HELLO, MUT_HELLO0, PROTO_FAULT_VALUE },
	{ "trailers-no-end", RT_TRAILERS, MUT_TRAILERS_NO_END,
	    PROTO_FAULT_FLAGS },
	{ "null-pointer", RT_REQUEST, MUT_NULL_PTR, PROTO_FAULT_STRING },
};

ParameterizedTestParameters(proto, encode_refuses)
{
	return cr_make_param_array(struct enc_case, enc_cases,
	    sizeof(enc_cases) / sizeof(enc_cases[0]));
}

ParameterizedTest(struct enc_case *c, proto, encode_refuses)
{
	static struct proto_msg m;
	static uint8_t big[PROTO_DATA_MAX + 1];
	enum proto_fault f = PROTO_FAULT_NONE;

	build(c->kind, &m);
	cr_assert_gt(proto_encode_size(&m, &f), 0, "%s: base invalid",
	    c->name);
	switch (c->mutate) {
	case MUT_TYPE0:
		m.type = 0;
		break;
	case MUT_TYPE14:
		m.type = 14;
		break;
	case MUT_FLAG:
		m.flags = PROTO_FLAG_END_STREAM;
		break;
	case MUT_STREAM0:
		m.stream = 0;
		break;
	case MUT_STREAM_HIGH:
		m.stream = 0x80000001U;
		break;
	case MUT_METHOD33:
		m.request.method.ptr = big_path;
		m.request.method.len = 33;
		break;
	case MUT_NAME_EMPTY:
		m.headers[0].name.len = 0;
		break;
	case MUT_NAME257:
		m.headers[0].name.ptr = big_value;
		m.headers[0].name.len = 257;
		break;
	case MUT_COUNT257:
		/* Only the count is over: headers[] holds 256. */
		m.nheaders = PROTO_HEADERS_MAX + 1;
		break;
	case MUT_HEADER_BYTES:
		m.headers[1].value.len = 1;
		break;
	case MUT_STATUS:
		m.response.status = 1000;
		break;
	case MUT_TRANSPORT:
		m.request.transport = 9;
		break;
	case MUT_INC0:
		m.window_update.increment = 0;
		break;
	case MUT_CODE0:
		m.error.code = 0;
		break;
	case MUT_MESSAGE257:
		m.error.message.ptr = big_value;
		m.error.message.len = 257;
		break;
	case MUT_DATA_EMPTY:
		m.data.len = 0;
		break;
	case MUT_DATA_65537:
		m.data.ptr = big;
		m.data.len = sizeof(big);
		break;
	case MUT_HELLO0:
		m.hello.version = 0;
		break;
	case MUT_TRAILERS_NO_END:
		m.flags = 0;
		break;
	case MUT_NULL_PTR:
		m.request.path.ptr = NULL;
		break;
	}
	cr_assert_eq(proto_encode_size(&m, &f), EGRESS_ERR_INVALID,
	    "%s: accepted", c->name);
	cr_assert_eq(f, c->fault, "%s: fault %s", c->name, proto_fault_str(f));
	cr_assert_eq(proto_encode(&m, frame, sizeof(frame), &f),
	    EGRESS_ERR_INVALID);
}

Test(proto, hdr_encode)
{
	static struct proto_msg m;
	uint8_t hdr[PROTO_HDR_SIZE];
	enum proto_fault f;

	/* Header plus caller-written payload decodes as DATA. */
	cr_assert_eq(proto_hdr_encode(frame, PROTO_MSG_DATA, 0, 7, 3, &f),
	    PROTO_HDR_SIZE);
	// NOLINTNEXTLINE(bugprone-not-null-terminated-result): bytes
	memcpy(frame + PROTO_HDR_SIZE, "abc", 3);
	cr_assert_eq(proto_frame_decode(frame, 15, &m, &f), 15);
	cr_assert_eq(m.data.len, 3);
	cr_assert_eq(memcmp(m.data.ptr, "abc", 3), 0);
	cr_assert_eq(proto_hdr_encode(hdr, PROTO_MSG_DATA, 0, 7, 0, &f),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(f, PROTO_FAULT_LENGTH);
	cr_assert_eq(proto_hdr_encode(hdr, PROTO_MSG_DATA, 0, 7,
			 PROTO_DATA_MAX + 1, &f),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(f, PROTO_FAULT_TOO_BIG);
	cr_assert_eq(proto_hdr_encode(hdr, PROTO_MSG_DATA, 0, 0, 1, &f),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(f, PROTO_FAULT_STREAM_ID);
	cr_assert_eq(proto_hdr_encode(hdr, 0, 0, 1, 1, &f),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(f, PROTO_FAULT_TYPE);
	cr_assert_eq(proto_hdr_encode(hdr, PROTO_MSG_REQUEST, 0, 1,
			 0xffffffffU, &f),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(f, PROTO_FAULT_TOO_BIG);
}

/* Patching an encoded frame: stream id and flags, checked, in place. */
Test(proto, hdr_patch)
{
	static struct proto_msg m, d;
	uint8_t hdr[PROTO_HDR_SIZE];
	enum proto_fault f;
	int n;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_REQUEST;
	m.stream = 1;
	m.request.transport = PROTO_TRANSPORT_HTTP;
	m.request.method = (struct proto_str){ "GET", 3 };
	m.request.scheme = (struct proto_str){ "https", 5 };
	m.request.authority = (struct proto_str){ "example.com", 11 };
	m.request.path = (struct proto_str){ "/", 1 };
	n = proto_encode(&m, frame, sizeof(frame), &f);
	cr_assert_gt(n, PROTO_HDR_SIZE);

	cr_assert_eq(proto_hdr_flags(frame, (size_t)n), 0);
	cr_assert_eq(proto_hdr_flags(frame, PROTO_HDR_SIZE - 1),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(proto_hdr_flags(NULL, 64), EGRESS_ERR_INVALID);

	cr_assert_eq(proto_hdr_set_stream(frame, (size_t)n, 41), 0);
	cr_assert_eq(proto_hdr_add_flags(frame, (size_t)n,
			 PROTO_FLAG_END_STREAM),
	    0);
	cr_assert_eq(proto_hdr_flags(frame, (size_t)n), PROTO_FLAG_END_STREAM);
	cr_assert_eq(proto_frame_decode(frame, (size_t)n, &d, &f), n);
	cr_assert_eq(d.stream, 41);
	cr_assert_eq(d.flags, PROTO_FLAG_END_STREAM);
	m.stream = 41;
	m.flags = PROTO_FLAG_END_STREAM;
	cr_assert(proto_msg_equal(&m, &d));

	/* Refused, buffer unchanged: stream 0 or over the maximum for a
	 * REQUEST, a reserved flag, a short buffer, a frame cut short. */
	cr_assert_eq(proto_hdr_set_stream(frame, (size_t)n, 0),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(proto_hdr_set_stream(frame, (size_t)n,
			 PROTO_STREAM_ID_MAX + 1),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(proto_hdr_add_flags(frame, (size_t)n, 0x80),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(proto_hdr_set_stream(frame, PROTO_HDR_SIZE - 1, 3),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(proto_hdr_set_stream(frame, (size_t)n - 1, 3),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(proto_hdr_add_flags(NULL, 64, PROTO_FLAG_END_STREAM),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(proto_frame_decode(frame, (size_t)n, &d, &f), n);
	cr_assert_eq(d.stream, 41);
	cr_assert_eq(d.flags, PROTO_FLAG_END_STREAM);

	/* A stream-0 type keeps stream 0; a header that is not ours (bad
	 * version) is refused. */
	cr_assert_eq(proto_hdr_encode(hdr, PROTO_MSG_PING, 0, 0,
			 PROTO_PING_SIZE, &f),
	    PROTO_HDR_SIZE);
	memcpy(frame, hdr, sizeof(hdr));
	memset(frame + PROTO_HDR_SIZE, 0, PROTO_PING_SIZE);
	cr_assert_eq(proto_hdr_set_stream(frame,
			 PROTO_HDR_SIZE + PROTO_PING_SIZE, 5),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(proto_hdr_set_stream(frame,
			 PROTO_HDR_SIZE + PROTO_PING_SIZE, 0),
	    0);
	frame[4] = PROTO_VERSION + 1;
	cr_assert_eq(proto_hdr_set_stream(frame,
			 PROTO_HDR_SIZE + PROTO_PING_SIZE, 0),
	    EGRESS_ERR_INVALID);
}

/* ---- Codes ------------------------------------------------------------- */

struct code_case {
	int err;
	uint32_t code;
	char name[32];
};

static struct code_case code_cases[] = {
	{ EGRESS_ERR_DENIED, 1, "denied" },
	{ EGRESS_ERR_BUDGET_EXHAUSTED, 2, "budget-exhausted" },
	{ EGRESS_ERR_DNS_FAILED, 3, "dns-failed" },
	{ EGRESS_ERR_CONNECT_FAILED, 4, "connect-failed" },
	{ EGRESS_ERR_TLS_FAILED, 5, "tls-failed" },
	{ EGRESS_ERR_TIMEOUT, 6, "timeout" },
	{ EGRESS_ERR_UPSTREAM_PROTOCOL, 7, "upstream-protocol-error" },
	{ EGRESS_ERR_INVALID_REQUEST, 8, "invalid-request" },
	{ EGRESS_ERR_UNAVAILABLE, 9, "unavailable" },
	{ EGRESS_ERR_CANCELLED, 10, "cancelled" },
	{ EGRESS_ERR_PROTOCOL, 11, "protocol-error" },
};

ParameterizedTestParameters(proto, codes)
{
	return cr_make_param_array(struct code_case, code_cases,
	    sizeof(code_cases) / sizeof(code_cases[0]));
}

ParameterizedTest(struct code_case *c, proto, codes)
{
	static struct proto_msg m, out;
	const char *msg;
	enum proto_fault f;
	int n;

	cr_assert_eq(proto_err_to_wire(c->err), c->code);
	cr_assert_eq(proto_wire_to_err(c->code), c->err);
	cr_assert_str_eq(proto_code_name(c->code), c->name);
	if (egress_err_code(c->err) != NULL)
		cr_assert_str_eq(egress_err_code(c->err), c->name);
	msg = proto_code_message(c->code);
	cr_assert_not_null(msg);
	cr_assert_gt(strlen(msg), 0);
	cr_assert_leq(strlen(msg), PROTO_MESSAGE_MAX);
	/* Masked: no digits (addresses, ports) and no path separators. */
	cr_assert_null(strpbrk(msg, "0123456789/"), "%s leaks", msg);
	cr_assert_eq(proto_error_init(&m, 3, c->code), 0);
	n = proto_encode(&m, frame, sizeof(frame), &f);
	cr_assert_gt(n, 0);
	cr_assert_eq(proto_frame_decode(frame, (size_t)n, &out, &f), n);
	cr_assert_eq(out.error.code, c->code);
	cr_assert_eq(out.error.message.len, strlen(msg));
	cr_assert_eq(memcmp(out.error.message.ptr, msg, strlen(msg)), 0);
}

Test(proto, codes_unknown_and_local)
{
	static struct proto_msg m;

	cr_assert_str_eq(proto_code_message(PROTO_CODE_DENIED),
	    "egress policy: destination not permitted for this instance");
	cr_assert_eq(proto_err_to_wire(EGRESS_ERR_NOMEM),
	    PROTO_CODE_UNAVAILABLE);
	cr_assert_eq(proto_err_to_wire(EGRESS_ERR_IO), PROTO_CODE_UNAVAILABLE);
	cr_assert_eq(proto_err_to_wire(EGRESS_OK), PROTO_CODE_UNAVAILABLE);
	cr_assert_eq(proto_err_to_wire(-1000), PROTO_CODE_UNAVAILABLE);
	cr_assert_eq(proto_wire_to_err(0), EGRESS_ERR_PROTOCOL);
	cr_assert_eq(proto_wire_to_err(12), EGRESS_ERR_PROTOCOL);
	cr_assert_null(proto_code_name(0));
	cr_assert_null(proto_code_name(12));
	cr_assert_str_eq(proto_code_message(99),
	    proto_code_message(PROTO_CODE_UNAVAILABLE));
	cr_assert_eq(proto_error_init(&m, 1, 0), EGRESS_ERR_INVALID);
	cr_assert_eq(proto_error_init(&m, 0x80000000U, 1), EGRESS_ERR_INVALID);
}

Test(proto, names)
{
	cr_assert_str_eq(proto_type_name(PROTO_MSG_HELLO), "HELLO");
	cr_assert_str_eq(proto_type_name(PROTO_MSG_WINDOW_UPDATE),
	    "WINDOW_UPDATE");
	cr_assert_str_eq(proto_type_name(PROTO_MSG_PONG), "PONG");
	cr_assert_str_eq(proto_type_name(0), "UNKNOWN");
	cr_assert_str_eq(proto_type_name(14), "UNKNOWN");
	cr_assert_str_eq(proto_fault_str(PROTO_FAULT_TOO_BIG),
	    "frame length over the cap of its type");
	cr_assert_str_eq(proto_fault_str((enum proto_fault)999),
	    "unknown fault");
}

Test(proto, version_choose)
{
	cr_assert_eq(proto_version_choose(0), 0);
	cr_assert_eq(proto_version_choose(1), 1);
	cr_assert_eq(proto_version_choose(2), PROTO_VERSION);
	cr_assert_eq(proto_version_choose(0xffff), PROTO_VERSION);
}

/* ---- Version 2 --------------------------------------------------------- */

Test(proto, request_profile_needs_version_2)
{
	static struct proto_msg in, out;
	enum proto_fault f = PROTO_FAULT_NONE;
	int n;

	/* Version 1 has no field for it: refused, never dropped. */
	build(RT_REQUEST_V2, &in);
	in.version = 1;
	cr_assert_eq(proto_encode(&in, frame, sizeof(frame), &f),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(f, PROTO_FAULT_VALUE);
	in.version = PROTO_VERSION + 1;
	cr_assert_eq(proto_encode(&in, frame, sizeof(frame), &f),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(f, PROTO_FAULT_VERSION);

	/* The header's version sets the layout: a version-2 REQUEST read as
	 * version 1 has trailing bytes, a version-1 one read as version 2
	 * lacks its last field. */
	in.version = 2;
	n = proto_encode(&in, frame, sizeof(frame), &f);
	cr_assert_gt(n, 0);
	frame[4] = 1;
	cr_assert_eq(proto_frame_decode(frame, (size_t)n, &out, &f),
	    EGRESS_ERR_PROTOCOL);
	cr_assert_eq(f, PROTO_FAULT_TRAILING);
	build(RT_REQUEST, &in);
	n = proto_encode(&in, frame, sizeof(frame), &f);
	cr_assert_gt(n, 0);
	cr_assert_eq(frame[4], 1);
	frame[4] = 2;
	cr_assert_eq(proto_frame_decode(frame, (size_t)n, &out, &f),
	    EGRESS_ERR_PROTOCOL);
	cr_assert_eq(f, PROTO_FAULT_TRUNCATED);
	frame[4] = 1;
	cr_assert_eq(proto_frame_decode(frame, (size_t)n, &out, &f), n);
	cr_assert_eq(out.version, 1);
	cr_assert_eq(out.request.tls_profile.len, 0);

	/* An over-long profile is refused both ways. */
	build(RT_REQUEST_V2_MAX, &in);
	in.request.tls_profile.len = PROTO_PROFILE_MAX + 1;
	cr_assert_eq(proto_encode(&in, frame, sizeof(frame), &f),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(f, PROTO_FAULT_STRING);

	/* A HELLO is always written in version 1. */
	build(RT_HELLO, &in);
	in.version = 2;
	cr_assert_eq(proto_encode(&in, frame, sizeof(frame), &f),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(f, PROTO_FAULT_VERSION);
}

/* A frame may be written in any version up to the negotiated one. */
Test(proto, frame_version_at_most_negotiated)
{
	static struct proto_msg m;
	struct proto_conn br;
	struct proto_stream st;
	enum proto_fault f = PROTO_FAULT_NONE;
	uint16_t v;

	for (v = 1; v <= PROTO_VERSION; v++) {
		proto_conn_init(&br, PROTO_ROLE_BROKER);
		memset(&m, 0, offsetof(struct proto_msg, headers));
		m.type = PROTO_MSG_HELLO;
		m.hello.version = v;
		cr_assert_eq(proto_conn_recv(&br, NULL, &m, &f), PROTO_ACCEPT);
		m.hello.version = proto_version_choose(v);
		cr_assert_eq(proto_conn_send(&br, NULL, &m, &f), 0);
		cr_assert_eq(br.version, v);

		build(RT_REQUEST_V2, &m);
		proto_stream_init(&st, m.stream);
		if (v < 2) {
			cr_assert_eq(proto_conn_recv(&br, &st, &m, &f),
			    EGRESS_ERR_PROTOCOL, "version %u", v);
			cr_assert_eq(f, PROTO_FAULT_VERSION);
		} else
			cr_assert_eq(proto_conn_recv(&br, &st, &m, &f),
			    PROTO_ACCEPT, "version %u", v);
		/* Version 1 frames stay valid on a version-2 connection. */
		build(RT_REQUEST, &m);
		m.stream = 7;
		proto_stream_init(&st, m.stream);
		cr_assert_eq(proto_conn_recv(&br, &st, &m, &f), PROTO_ACCEPT);
	}
}
