/* SPDX-License-Identifier: ISC */
/*
 * Frames and messages: the fixed 12-byte header, the per-type rules of the
 * header (flags, stream id, length bound), field-by-field decoding of every
 * payload with its bounds, the matching encoder, and the tables of wire
 * codes, names and masked messages. Decoding never allocates and never
 * reads past the bytes it was given.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <egress/error.h>

#include "proto/proto.h"

#define PROTO_TYPE_LAST PROTO_MSG_STARTTLS
#define PROTO_CODE_LAST PROTO_CODE_PROTOCOL

/* Which stream ids a type may carry. */
enum sid_rule {
	SID_ZERO = 1,	 /* connection-level only */
	SID_NONZERO = 2, /* a stream only */
	SID_ANY = 3,	 /* either */
};

/* Per-type header rules, indexed by enum proto_type. */
static const struct type_rule {
	const char *name;
	uint8_t flags; /* flags the type may carry */
	uint8_t must;  /* flags the type must carry */
	uint8_t sid;   /* enum sid_rule */
	uint32_t min;  /* payload length bounds */
	uint32_t max;
	uint8_t since; /* the first version that has the type */
} type_rules[PROTO_TYPE_LAST + 1] = {
	[PROTO_MSG_HELLO] = { "HELLO", 0, 0, SID_ZERO, 2, 2, 1 },
	[PROTO_MSG_REQUEST] = { "REQUEST", PROTO_FLAG_END_STREAM, 0,
	    SID_NONZERO, 27, PROTO_PAYLOAD_MAX, 1 },
	[PROTO_MSG_RESPONSE] = { "RESPONSE", PROTO_FLAG_END_STREAM, 0,
	    SID_NONZERO, 4, PROTO_PAYLOAD_MAX, 1 },
	[PROTO_MSG_DATA] = { "DATA",
	    PROTO_FLAG_END_STREAM | PROTO_FLAG_MSG_END | PROTO_FLAG_BINARY, 0,
	    SID_NONZERO, 0, PROTO_DATA_MAX, 1 },
	[PROTO_MSG_TRAILERS] = { "TRAILERS", PROTO_FLAG_END_STREAM,
	    PROTO_FLAG_END_STREAM, SID_NONZERO, 2, PROTO_PAYLOAD_MAX, 1 },
	[PROTO_MSG_WINDOW_UPDATE] = { "WINDOW_UPDATE", 0, 0, SID_ANY, 4, 4,
	    1 },
	[PROTO_MSG_RESET] = { "RESET", 0, 0, SID_NONZERO, 4, 4, 1 },
	[PROTO_MSG_ERROR] = { "ERROR", 0, 0, SID_ANY, 6, 6 + PROTO_MESSAGE_MAX,
	    1 },
	[PROTO_MSG_GOAWAY] = { "GOAWAY", 0, 0, SID_ZERO, 4, 4, 1 },
	[PROTO_MSG_PING] = { "PING", 0, 0, SID_ZERO, PROTO_PING_SIZE,
	    PROTO_PING_SIZE, 1 },
	[PROTO_MSG_PONG] = { "PONG", 0, 0, SID_ZERO, PROTO_PING_SIZE,
	    PROTO_PING_SIZE, 1 },
	[PROTO_MSG_WS_CONTROL] = { "WS_CONTROL", PROTO_FLAG_END_STREAM, 0,
	    SID_NONZERO, 3, 3 + PROTO_WS_PAYLOAD_MAX, 2 },
	[PROTO_MSG_STARTTLS] = { "STARTTLS", 0, 0, SID_NONZERO, 2,
	    2 + PROTO_PROFILE_MAX, 2 },
};

static const char *const code_names[PROTO_CODE_LAST + 1] = {
	[PROTO_CODE_DENIED] = "denied",
	[PROTO_CODE_BUDGET_EXHAUSTED] = "budget-exhausted",
	[PROTO_CODE_DNS_FAILED] = "dns-failed",
	[PROTO_CODE_CONNECT_FAILED] = "connect-failed",
	[PROTO_CODE_TLS_FAILED] = "tls-failed",
	[PROTO_CODE_TIMEOUT] = "timeout",
	[PROTO_CODE_UPSTREAM_PROTOCOL] = "upstream-protocol-error",
	[PROTO_CODE_INVALID_REQUEST] = "invalid-request",
	[PROTO_CODE_UNAVAILABLE] = "unavailable",
	[PROTO_CODE_CANCELLED] = "cancelled",
	[PROTO_CODE_PROTOCOL] = "protocol-error",
};

/* Masked messages: no address, host name or path, ever. */
static const char *const code_messages[PROTO_CODE_LAST + 1] = {
	[PROTO_CODE_DENIED] = PROTO_DENIED_MESSAGE,
	[PROTO_CODE_BUDGET_EXHAUSTED] =
	    "egress budget: connection limit reached for this instance",
	[PROTO_CODE_DNS_FAILED] = "egress: destination name did not resolve",
	[PROTO_CODE_CONNECT_FAILED] =
	    "egress: could not connect to the destination",
	[PROTO_CODE_TLS_FAILED] =
	    "egress: TLS handshake or certificate verification failed",
	[PROTO_CODE_TIMEOUT] = "egress: request timed out",
	[PROTO_CODE_UPSTREAM_PROTOCOL] =
	    "egress: the destination sent an invalid response",
	[PROTO_CODE_INVALID_REQUEST] = "egress: invalid request",
	[PROTO_CODE_UNAVAILABLE] = "egress: service unavailable",
	[PROTO_CODE_CANCELLED] = "egress: request cancelled",
	[PROTO_CODE_PROTOCOL] = "egress: protocol violation",
};

static const struct {
	int err;
	uint32_t code;
} err_map[] = {
	{ EGRESS_ERR_DENIED, PROTO_CODE_DENIED },
	{ EGRESS_ERR_BUDGET_EXHAUSTED, PROTO_CODE_BUDGET_EXHAUSTED },
	{ EGRESS_ERR_DNS_FAILED, PROTO_CODE_DNS_FAILED },
	{ EGRESS_ERR_CONNECT_FAILED, PROTO_CODE_CONNECT_FAILED },
	{ EGRESS_ERR_TLS_FAILED, PROTO_CODE_TLS_FAILED },
	{ EGRESS_ERR_TIMEOUT, PROTO_CODE_TIMEOUT },
	{ EGRESS_ERR_UPSTREAM_PROTOCOL, PROTO_CODE_UPSTREAM_PROTOCOL },
	{ EGRESS_ERR_INVALID_REQUEST, PROTO_CODE_INVALID_REQUEST },
	{ EGRESS_ERR_UNAVAILABLE, PROTO_CODE_UNAVAILABLE },
	{ EGRESS_ERR_CANCELLED, PROTO_CODE_CANCELLED },
	{ EGRESS_ERR_PROTOCOL, PROTO_CODE_PROTOCOL },
};

static const char *const fault_strs[] = {
	[PROTO_FAULT_NONE] = "no fault",
	[PROTO_FAULT_TOO_BIG] = "frame length over the cap of its type",
	[PROTO_FAULT_VERSION] = "unknown protocol version",
	[PROTO_FAULT_TYPE] = "unknown message type",
	[PROTO_FAULT_FLAGS] = "flags not valid for the type",
	[PROTO_FAULT_RESERVED] = "reserved header byte not zero",
	[PROTO_FAULT_STREAM_ID] = "stream id not valid for the type",
	[PROTO_FAULT_LENGTH] = "payload length not valid for the type",
	[PROTO_FAULT_TRUNCATED] = "field runs past the end of the payload",
	[PROTO_FAULT_TRAILING] = "bytes after the last field",
	[PROTO_FAULT_STRING] = "string over its bound",
	[PROTO_FAULT_COUNT] = "header count over its bound",
	[PROTO_FAULT_HEADER_BYTES] = "header bytes over their bound",
	[PROTO_FAULT_VALUE] = "field value out of range",
	[PROTO_FAULT_DIRECTION] = "message type not valid in this direction",
	[PROTO_FAULT_CONN_STATE] = "message not valid in the connection state",
	[PROTO_FAULT_STREAM_STATE] = "message not valid in the stream state",
	[PROTO_FAULT_STREAM_IDLE] = "frame on a stream that was never opened",
	[PROTO_FAULT_STREAM_REUSED] = "stream id not above the last one",
	[PROTO_FAULT_STREAMS] = "too many open streams",
	[PROTO_FAULT_WINDOW_OVERFLOW] = "flow-control window over 2^31-1",
	[PROTO_FAULT_WINDOW_EXCEEDED] = "data beyond the flow-control window",
	[PROTO_FAULT_NOT_NEGOTIATED] =
	    "message not in the negotiated protocol version",
	[PROTO_FAULT_MESSAGES] =
	    "message frame not valid on this kind of stream",
	[PROTO_FAULT_UPGRADE] = "frame not valid in the stream's STARTTLS",
};

/*@ requires \valid_read(p + (0 .. 1));
    assigns \nothing; */
static inline uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)((unsigned int)p[0] << 8 | p[1]);
}

/*@ requires \valid_read(p + (0 .. 3));
    assigns \nothing; */
static inline uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

static inline void
put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* The version a message is written in: 0 stands for the first version
 * that has its type (1 for most). */
/*@ requires \valid_read(m);
    assigns \nothing;
    ensures 1 <= \result <= 255; */
static unsigned
msg_version(const struct proto_msg *m)
{
	if (m->version != 0)
		return m->version;
	if (m->type <= PROTO_TYPE_LAST && type_rules[m->type].since > 1)
		return type_rules[m->type].since;
	return 1u;
}

/*@ requires reterr == \null || \valid(reterr);
    assigns *reterr;
    ensures \result == err; */
static int
fail(enum proto_fault *reterr, enum proto_fault f, int err)
{
	if (reterr != NULL)
		*reterr = f;
	return err;
}

/*
 * Answer whether a frame of type (known) may be written in version: from
 * the first version that has the type on; HELLO only in version 1.
 */
/*@ assigns \nothing; */
static int
type_in_version(uint8_t type, unsigned version)
{
	unsigned since = type_rules[type].since;

	if (type == PROTO_MSG_HELLO)
		return version == 1;
	return version >= (since == 0 ? 1u : since);
}

/*
 * The header rules shared by decoding and encoding (minus the version and
 * the early length cap, which only the decoder sees first).
 */
/*@ assigns \nothing; */
static enum proto_fault
hdr_check(uint8_t type, uint8_t flags, uint32_t stream, uint32_t length)
{
	const struct type_rule *r;

	if (type == 0 || type > PROTO_TYPE_LAST)
		return PROTO_FAULT_TYPE;
	r = &type_rules[type];
	if ((flags & ~r->flags) != 0 || (flags & r->must) != r->must)
		return PROTO_FAULT_FLAGS;
	if (stream > PROTO_STREAM_ID_MAX ||
	    (r->sid == SID_ZERO && stream != 0) ||
	    (r->sid == SID_NONZERO && stream == 0))
		return PROTO_FAULT_STREAM_ID;
	if (length > r->max)
		return PROTO_FAULT_TOO_BIG;
	if (length < r->min)
		return PROTO_FAULT_LENGTH;
	/* An empty DATA frame is a no-op unless it ends the stream or a
	 * message. */
	if (type == PROTO_MSG_DATA && length == 0 &&
	    (flags & (PROTO_FLAG_END_STREAM | PROTO_FLAG_MSG_END)) == 0)
		return PROTO_FAULT_LENGTH;
	/* A message ends no stream; a close is the end of a direction. */
	if (type == PROTO_MSG_DATA && (flags & PROTO_FLAG_END_STREAM) &&
	    (flags & (PROTO_FLAG_MSG_END | PROTO_FLAG_BINARY)))
		return PROTO_FAULT_FLAGS;
	return PROTO_FAULT_NONE;
}

/*@ requires \valid_read(buf + (0 .. len - 1));
    requires \valid(ret_hdr);
    requires reterr_fault == \null || \valid(reterr_fault);
    requires \separated(ret_hdr, reterr_fault);
    assigns *ret_hdr, *reterr_fault;
    ensures \result == 0 || \result == PROTO_HDR_SIZE ||
        \result == EGRESS_ERR_PROTOCOL;
    ensures \result == PROTO_HDR_SIZE ==>
        ret_hdr->length <= PROTO_PAYLOAD_MAX; */
int
proto_hdr_decode(const uint8_t *buf, size_t len, struct proto_hdr *ret_hdr,
    enum proto_fault *reterr_fault)
{
	struct proto_hdr h;
	enum proto_fault f;

	/* The length goes first, checked before anything else. */
	if (len < 4)
		return 0;
	h.length = get32(buf);
	if (h.length > PROTO_PAYLOAD_MAX)
		return fail(reterr_fault, PROTO_FAULT_TOO_BIG,
		    EGRESS_ERR_PROTOCOL);
	if (len > 4 && (buf[4] < PROTO_VERSION_MIN || buf[4] > PROTO_VERSION))
		return fail(reterr_fault, PROTO_FAULT_VERSION,
		    EGRESS_ERR_PROTOCOL);
	if (len < PROTO_HDR_SIZE)
		return 0;
	h.version = buf[4];
	h.type = buf[5];
	h.flags = buf[6];
	h.stream = get32(buf + 8);
	if (h.type == 0 || h.type > PROTO_TYPE_LAST)
		return fail(reterr_fault, PROTO_FAULT_TYPE,
		    EGRESS_ERR_PROTOCOL);
	/* HELLO's layout is frozen (always version 1); a newer type only in
	 * a version that has it. */
	if (!type_in_version(h.type, h.version))
		return fail(reterr_fault, PROTO_FAULT_VERSION,
		    EGRESS_ERR_PROTOCOL);
	if (buf[7] != 0)
		return fail(reterr_fault, PROTO_FAULT_RESERVED,
		    EGRESS_ERR_PROTOCOL);
	f = hdr_check(h.type, h.flags, h.stream, h.length);
	if (f != PROTO_FAULT_NONE)
		return fail(reterr_fault, f, EGRESS_ERR_PROTOCOL);
	*ret_hdr = h;
	return PROTO_HDR_SIZE;
}

/*
 * A bounds-checked reader over one payload. off never passes len (at most
 * PROTO_PAYLOAD_MAX), so the checks are written as "off + n > len", which
 * cannot wrap and bounds off itself.
 */
struct rd {
	const uint8_t *p;
	size_t len;
	size_t off;
	enum proto_fault fault;
};

/*
 * The readers' contracts relate r->off to r->len, which EVA does not
 * track: WP proves them (scripts/prove, wp_proto_decode), and EVA checks
 * each read inside the bodies instead.
 */
#ifdef PROVE_WP
/*@ requires \valid(r) && \valid(v) && \separated(r, v);
    requires r->len <= PROTO_PAYLOAD_MAX && r->off <= r->len;
    requires \valid_read(r->p + (0 .. r->len - 1));
    requires \separated(v, r->p + (0 .. r->len - 1));
    assigns r->off, r->fault, *v;
    ensures r->off <= r->len && r->p == \old(r->p) &&
        r->len == \old(r->len); */
#endif
static int
rd_u8(struct rd *r, uint8_t *v)
{
	if (r->off + 1 > r->len) {
		r->fault = PROTO_FAULT_TRUNCATED;
		return -1;
	}
	*v = r->p[r->off];
	r->off += 1;
	return 0;
}

#ifdef PROVE_WP
/*@ requires \valid(r) && \valid(v) && \separated(r, v);
    requires r->len <= PROTO_PAYLOAD_MAX && r->off <= r->len;
    requires \valid_read(r->p + (0 .. r->len - 1));
    requires \separated(v, r->p + (0 .. r->len - 1));
    assigns r->off, r->fault, *v;
    ensures r->off <= r->len && r->p == \old(r->p) &&
        r->len == \old(r->len); */
#endif
static int
rd_u16(struct rd *r, uint16_t *v)
{
	if (r->off + 2 > r->len) {
		r->fault = PROTO_FAULT_TRUNCATED;
		return -1;
	}
	*v = get16(r->p + r->off);
	r->off += 2;
	return 0;
}

#ifdef PROVE_WP
/*@ requires \valid(r) && \valid(v) && \separated(r, v);
    requires r->len <= PROTO_PAYLOAD_MAX && r->off <= r->len;
    requires \valid_read(r->p + (0 .. r->len - 1));
    requires \separated(v, r->p + (0 .. r->len - 1));
    assigns r->off, r->fault, *v;
    ensures r->off <= r->len && r->p == \old(r->p) &&
        r->len == \old(r->len); */
#endif
static int
rd_u32(struct rd *r, uint32_t *v)
{
	if (r->off + 4 > r->len) {
		r->fault = PROTO_FAULT_TRUNCATED;
		return -1;
	}
	*v = get32(r->p + r->off);
	r->off += 4;
	return 0;
}

/* A string: u16 length, then bytes; length within [min, max]. */
#ifdef PROVE_WP
/*@ requires \valid(r) && \valid(s) && \separated(r, s);
    requires r->len <= PROTO_PAYLOAD_MAX && r->off <= r->len;
    requires \valid_read(r->p + (0 .. r->len - 1));
    assigns r->off, r->fault, *s;
    ensures r->off <= r->len && r->p == \old(r->p) &&
        r->len == \old(r->len);
    ensures \result == 0 ==> s->len <= max; */
#endif
static int
rd_str(struct rd *r, size_t min, size_t max, struct proto_str *s)
{
	uint16_t n;

	if (rd_u16(r, &n) != 0)
		return -1;
	if (n < min || n > max) {
		r->fault = PROTO_FAULT_STRING;
		return -1;
	}
	if (r->off + n > r->len) {
		r->fault = PROTO_FAULT_TRUNCATED;
		return -1;
	}
	s->ptr = (const char *)(r->p + r->off);
	s->len = n;
	r->off += n;
	return 0;
}

static int
rd_headers(struct rd *r, struct proto_msg *m)
{
	uint16_t count, i;
	size_t bytes = 0;

	if (rd_u16(r, &count) != 0)
		return -1;
	if (count > PROTO_HEADERS_MAX) {
		r->fault = PROTO_FAULT_COUNT;
		return -1;
	}
	for (i = 0; i < count; i++) {
		struct proto_header *h = &m->headers[i];

		if (rd_str(r, 1, PROTO_NAME_MAX, &h->name) != 0 ||
		    rd_str(r, 0, PROTO_VALUE_MAX, &h->value) != 0)
			return -1;
		bytes += h->name.len + h->value.len;
		if (bytes > PROTO_HEADER_BYTES_MAX) {
			r->fault = PROTO_FAULT_HEADER_BYTES;
			return -1;
		}
	}
	m->nheaders = count;
	return 0;
}

static int
code_is_known(uint32_t code)
{
	return code >= 1 && code <= PROTO_CODE_LAST;
}

/*
 * WS_CONTROL: u8 opcode, u16 code, then the rest of the payload as its
 * bytes. A close carries END_STREAM, a code of 0 (none, and then no
 * reason) or 1000..4999, and at most PROTO_WS_REASON_MAX reason bytes;
 * a ping or pong carries neither END_STREAM nor a code.
 */
static int
rd_ws_control(struct rd *r, struct proto_msg *m)
{
	uint8_t op;
	uint16_t code;

	if (rd_u8(r, &op) != 0 || rd_u16(r, &code) != 0)
		return -1;
	m->ws_control.opcode = op;
	m->ws_control.code = code;
	m->ws_control.ptr = r->p + r->off;
	m->ws_control.len = r->len - r->off;
	r->off = r->len;
	if (proto_ws_control_check(m) != PROTO_FAULT_NONE) {
		r->fault = proto_ws_control_check(m);
		return -1;
	}
	return 0;
}

static int
rd_payload(struct rd *r, struct proto_msg *m)
{
	struct proto_request *q = &m->request;
	uint32_t v;

	switch (m->type) {
	case PROTO_MSG_HELLO:
		if (rd_u16(r, &m->hello.version) != 0)
			return -1;
		if (m->hello.version == 0)
			goto value;
		return 0;
	case PROTO_MSG_REQUEST:
		if (rd_u8(r, &q->transport) != 0)
			return -1;
		if (q->transport < PROTO_TRANSPORT_HTTP ||
		    q->transport > PROTO_TRANSPORT_TLS)
			goto value;
		if (rd_u32(r, &q->timeouts.connect_ms) != 0 ||
		    rd_u32(r, &q->timeouts.first_byte_ms) != 0 ||
		    rd_u32(r, &q->timeouts.between_bytes_ms) != 0 ||
		    rd_u32(r, &q->timeouts.total_ms) != 0 ||
		    rd_str(r, 0, PROTO_METHOD_MAX, &q->method) != 0 ||
		    rd_str(r, 0, PROTO_SCHEME_MAX, &q->scheme) != 0 ||
		    rd_str(r, 0, PROTO_AUTHORITY_MAX, &q->authority) != 0 ||
		    rd_str(r, 0, PROTO_PATH_MAX, &q->path) != 0)
			return -1;
		q->tls_profile.ptr = NULL;
		q->tls_profile.len = 0;
		if (rd_headers(r, m) != 0)
			return -1;
		if (m->version < 2)
			return 0;
		return rd_str(r, 0, PROTO_PROFILE_MAX, &q->tls_profile);
	case PROTO_MSG_RESPONSE:
		if (rd_u16(r, &m->response.status) != 0)
			return -1;
		if (m->response.status < 100 || m->response.status > 999)
			goto value;
		return rd_headers(r, m);
	case PROTO_MSG_DATA:
		m->data.ptr = r->p;
		m->data.len = r->len;
		r->off = r->len;
		return 0;
	case PROTO_MSG_TRAILERS:
		return rd_headers(r, m);
	case PROTO_MSG_WINDOW_UPDATE:
		if (rd_u32(r, &v) != 0)
			return -1;
		if (v == 0 || v > PROTO_WINDOW_MAX)
			goto value;
		m->window_update.increment = v;
		return 0;
	case PROTO_MSG_RESET:
		if (rd_u32(r, &m->reset.code) != 0)
			return -1;
		if (!code_is_known(m->reset.code))
			goto value;
		return 0;
	case PROTO_MSG_ERROR:
		if (rd_u32(r, &m->error.code) != 0)
			return -1;
		if (!code_is_known(m->error.code))
			goto value;
		return rd_str(r, 0, PROTO_MESSAGE_MAX, &m->error.message);
	case PROTO_MSG_GOAWAY:
		if (rd_u32(r, &m->goaway.last_stream) != 0)
			return -1;
		if (m->goaway.last_stream > PROTO_STREAM_ID_MAX)
			goto value;
		return 0;
	case PROTO_MSG_PING:
	case PROTO_MSG_PONG:
		/* hdr_check() already made the length PROTO_PING_SIZE; the
		 * reader states it again where the bytes are read. */
		if (r->off + PROTO_PING_SIZE > r->len) {
			r->fault = PROTO_FAULT_TRUNCATED;
			return -1;
		}
		memcpy(m->ping.opaque, r->p, PROTO_PING_SIZE);
		r->off = PROTO_PING_SIZE;
		return 0;
	case PROTO_MSG_WS_CONTROL:
		return rd_ws_control(r, m);
	case PROTO_MSG_STARTTLS:
		return rd_str(r, 0, PROTO_PROFILE_MAX,
		    &m->starttls.tls_profile);
	default:
		r->fault = PROTO_FAULT_TYPE;
		return -1;
	}
value:
	r->fault = PROTO_FAULT_VALUE;
	return -1;
}

int
proto_payload_decode(const struct proto_hdr *hdr, const uint8_t *payload,
    struct proto_msg *ret_msg, enum proto_fault *reterr_fault)
{
	struct rd r = { payload, hdr->length, 0, PROTO_FAULT_NONE };
	enum proto_fault f;

	/* Re-check: hdr may not come from proto_hdr_decode(). */
	if (hdr->version < PROTO_VERSION_MIN || hdr->version > PROTO_VERSION)
		return fail(reterr_fault, PROTO_FAULT_VERSION,
		    EGRESS_ERR_PROTOCOL);
	f = hdr_check(hdr->type, hdr->flags, hdr->stream, hdr->length);
	if (f != PROTO_FAULT_NONE)
		return fail(reterr_fault, f, EGRESS_ERR_PROTOCOL);
	if (!type_in_version(hdr->type, hdr->version))
		return fail(reterr_fault, PROTO_FAULT_VERSION,
		    EGRESS_ERR_PROTOCOL);
	ret_msg->type = hdr->type;
	ret_msg->flags = hdr->flags;
	ret_msg->version = hdr->version;
	ret_msg->stream = hdr->stream;
	ret_msg->nheaders = 0;
	if (rd_payload(&r, ret_msg) != 0)
		return fail(reterr_fault, r.fault, EGRESS_ERR_PROTOCOL);
	if (r.off != r.len)
		return fail(reterr_fault, PROTO_FAULT_TRAILING,
		    EGRESS_ERR_PROTOCOL);
	return 0;
}

int
proto_frame_decode(const uint8_t *buf, size_t len, struct proto_msg *ret_msg,
    enum proto_fault *reterr_fault)
{
	struct proto_hdr h = { 0 };
	int rc;

	rc = proto_hdr_decode(buf, len, &h, reterr_fault);
	if (rc <= 0)
		return rc;
	if (len - PROTO_HDR_SIZE < h.length)
		return 0;
	rc = proto_payload_decode(&h, buf + PROTO_HDR_SIZE, ret_msg,
	    reterr_fault);
	if (rc != 0)
		return rc;
	return (int)(PROTO_HDR_SIZE + h.length);
}

/* ---- Encoding --------------------------------------------------------- */

/* Add a string's encoded size to *size; 0, or -1 when out of bounds. */
static int
sz_str(const struct proto_str *s, size_t min, size_t max, size_t *size)
{
	if (s->len < min || s->len > max || (s->len > 0 && s->ptr == NULL))
		return -1;
	*size += 2 + s->len;
	return 0;
}

static enum proto_fault
sz_headers(const struct proto_msg *m, size_t *size)
{
	size_t i, bytes = 0;

	if (m->nheaders > PROTO_HEADERS_MAX)
		return PROTO_FAULT_COUNT;
	*size += 2;
	for (i = 0; i < m->nheaders; i++) {
		const struct proto_header *h = &m->headers[i];

		if (sz_str(&h->name, 1, PROTO_NAME_MAX, size) != 0 ||
		    sz_str(&h->value, 0, PROTO_VALUE_MAX, size) != 0)
			return PROTO_FAULT_STRING;
		bytes += h->name.len + h->value.len;
		if (bytes > PROTO_HEADER_BYTES_MAX)
			return PROTO_FAULT_HEADER_BYTES;
	}
	return PROTO_FAULT_NONE;
}

/* Validate m's fields and compute its payload size. */
static enum proto_fault
payload_size(const struct proto_msg *m, size_t *ret_size)
{
	const struct proto_request *q = &m->request;
	size_t size = 0;

	switch (m->type) {
	case PROTO_MSG_HELLO:
		if (m->hello.version == 0)
			return PROTO_FAULT_VALUE;
		size = 2;
		break;
	case PROTO_MSG_REQUEST:
		if (q->transport < PROTO_TRANSPORT_HTTP ||
		    q->transport > PROTO_TRANSPORT_TLS)
			return PROTO_FAULT_VALUE;
		size = 1 + 16;
		if (sz_str(&q->method, 0, PROTO_METHOD_MAX, &size) != 0 ||
		    sz_str(&q->scheme, 0, PROTO_SCHEME_MAX, &size) != 0 ||
		    sz_str(&q->authority, 0, PROTO_AUTHORITY_MAX, &size) !=
			0 ||
		    sz_str(&q->path, 0, PROTO_PATH_MAX, &size) != 0)
			return PROTO_FAULT_STRING;
		/* A version-1 REQUEST cannot carry a profile. */
		if (msg_version(m) < 2 && q->tls_profile.len != 0)
			return PROTO_FAULT_VALUE;
		if (msg_version(m) >= 2 &&
		    sz_str(&q->tls_profile, 0, PROTO_PROFILE_MAX, &size) != 0)
			return PROTO_FAULT_STRING;
		*ret_size = size;
		return sz_headers(m, ret_size);
	case PROTO_MSG_RESPONSE:
		if (m->response.status < 100 || m->response.status > 999)
			return PROTO_FAULT_VALUE;
		*ret_size = 2;
		return sz_headers(m, ret_size);
	case PROTO_MSG_DATA:
		if (m->data.len > 0 && m->data.ptr == NULL)
			return PROTO_FAULT_VALUE;
		size = m->data.len;
		break;
	case PROTO_MSG_TRAILERS:
		*ret_size = 0;
		return sz_headers(m, ret_size);
	case PROTO_MSG_WINDOW_UPDATE:
		if (m->window_update.increment == 0 ||
		    m->window_update.increment > PROTO_WINDOW_MAX)
			return PROTO_FAULT_VALUE;
		size = 4;
		break;
	case PROTO_MSG_RESET:
		if (!code_is_known(m->reset.code))
			return PROTO_FAULT_VALUE;
		size = 4;
		break;
	case PROTO_MSG_ERROR:
		if (!code_is_known(m->error.code))
			return PROTO_FAULT_VALUE;
		size = 4;
		if (sz_str(&m->error.message, 0, PROTO_MESSAGE_MAX, &size) !=
		    0)
			return PROTO_FAULT_STRING;
		break;
	case PROTO_MSG_GOAWAY:
		if (m->goaway.last_stream > PROTO_STREAM_ID_MAX)
			return PROTO_FAULT_VALUE;
		size = 4;
		break;
	case PROTO_MSG_PING:
	case PROTO_MSG_PONG:
		size = PROTO_PING_SIZE;
		break;
	case PROTO_MSG_WS_CONTROL:
		if (m->ws_control.len > 0 && m->ws_control.ptr == NULL)
			return PROTO_FAULT_VALUE;
		if (proto_ws_control_check(m) != PROTO_FAULT_NONE)
			return proto_ws_control_check(m);
		size = 3 + m->ws_control.len;
		break;
	case PROTO_MSG_STARTTLS:
		if (sz_str(&m->starttls.tls_profile, 0, PROTO_PROFILE_MAX,
			&size) != 0)
			return PROTO_FAULT_STRING;
		break;
	default:
		return PROTO_FAULT_TYPE;
	}
	*ret_size = size;
	return PROTO_FAULT_NONE;
}

int
proto_encode_size(const struct proto_msg *m, enum proto_fault *reterr_fault)
{
	enum proto_fault f;
	size_t size = 0;

	if (m->type == 0 || m->type > PROTO_TYPE_LAST)
		return fail(reterr_fault, PROTO_FAULT_TYPE,
		    EGRESS_ERR_INVALID);
	if (msg_version(m) > PROTO_VERSION ||
	    !type_in_version(m->type, msg_version(m)))
		return fail(reterr_fault, PROTO_FAULT_VERSION,
		    EGRESS_ERR_INVALID);
	f = payload_size(m, &size);
	if (f != PROTO_FAULT_NONE)
		return fail(reterr_fault, f, EGRESS_ERR_INVALID);
	if (size > PROTO_PAYLOAD_MAX)
		return fail(reterr_fault, PROTO_FAULT_TOO_BIG,
		    EGRESS_ERR_INVALID);
	f = hdr_check(m->type, m->flags, m->stream, (uint32_t)size);
	if (f != PROTO_FAULT_NONE)
		return fail(reterr_fault, f, EGRESS_ERR_INVALID);
	return (int)(PROTO_HDR_SIZE + size);
}

/*
 * The payload writer: every byte is written at an index checked against
 * the frame's size. proto_encode_size() already bounded every field, so
 * the check never drops a byte; it keeps each write visibly inside buf.
 */
struct wr {
	uint8_t *buf;
	size_t size;
	size_t off;
};

static void
wr_u8(struct wr *w, uint8_t v)
{
	if (w->off < w->size)
		w->buf[w->off++] = v;
}

static void
wr_u16(struct wr *w, uint16_t v)
{
	wr_u8(w, (uint8_t)(v >> 8));
	wr_u8(w, (uint8_t)v);
}

static void
wr_u32(struct wr *w, uint32_t v)
{
	wr_u16(w, (uint16_t)(v >> 16));
	wr_u16(w, (uint16_t)v);
}

static void
wr_bytes(struct wr *w, const void *src, size_t n)
{
	const uint8_t *q = src;
	size_t i;

	for (i = 0; i < n && w->off < w->size; i++)
		w->buf[w->off++] = q[i];
}

static void
wr_str(struct wr *w, const struct proto_str *s)
{
	wr_u16(w, (uint16_t)s->len);
	if (s->len > 0)
		wr_bytes(w, s->ptr, s->len);
}

static void
wr_headers(struct wr *w, const struct proto_msg *m)
{
	size_t i;

	wr_u16(w, (uint16_t)m->nheaders);
	for (i = 0; i < m->nheaders && i < PROTO_HEADERS_MAX; i++) {
		wr_str(w, &m->headers[i].name);
		wr_str(w, &m->headers[i].value);
	}
}

static void
wr_hdr(uint8_t *buf, uint8_t version, uint8_t type, uint8_t flags,
    uint32_t stream, uint32_t length)
{
	put32(buf, length);
	buf[4] = version;
	buf[5] = type;
	buf[6] = flags;
	buf[7] = 0;
	put32(buf + 8, stream);
}

int
proto_encode(const struct proto_msg *m, uint8_t *buf, size_t size,
    enum proto_fault *reterr_fault)
{
	const struct proto_request *q = &m->request;
	struct wr w;
	int total;

	total = proto_encode_size(m, reterr_fault);
	if (total < 0)
		return total;
	if (size < (size_t)total)
		return EGRESS_ERR_TOO_BIG;
	wr_hdr(buf, msg_version(m), m->type, m->flags, m->stream,
	    (uint32_t)total - PROTO_HDR_SIZE);
	w.buf = buf;
	w.size = size;
	w.off = PROTO_HDR_SIZE;
	switch (m->type) {
	case PROTO_MSG_HELLO:
		wr_u16(&w, m->hello.version);
		break;
	case PROTO_MSG_REQUEST:
		wr_u8(&w, q->transport);
		wr_u32(&w, q->timeouts.connect_ms);
		wr_u32(&w, q->timeouts.first_byte_ms);
		wr_u32(&w, q->timeouts.between_bytes_ms);
		wr_u32(&w, q->timeouts.total_ms);
		wr_str(&w, &q->method);
		wr_str(&w, &q->scheme);
		wr_str(&w, &q->authority);
		wr_str(&w, &q->path);
		wr_headers(&w, m);
		if (msg_version(m) >= 2)
			wr_str(&w, &q->tls_profile);
		break;
	case PROTO_MSG_RESPONSE:
		wr_u16(&w, m->response.status);
		wr_headers(&w, m);
		break;
	case PROTO_MSG_DATA:
		if (m->data.len > 0)
			wr_bytes(&w, m->data.ptr, m->data.len);
		break;
	case PROTO_MSG_TRAILERS:
		wr_headers(&w, m);
		break;
	case PROTO_MSG_WINDOW_UPDATE:
		wr_u32(&w, m->window_update.increment);
		break;
	case PROTO_MSG_RESET:
		wr_u32(&w, m->reset.code);
		break;
	case PROTO_MSG_ERROR:
		wr_u32(&w, m->error.code);
		wr_str(&w, &m->error.message);
		break;
	case PROTO_MSG_GOAWAY:
		wr_u32(&w, m->goaway.last_stream);
		break;
	case PROTO_MSG_PING:
	case PROTO_MSG_PONG:
		wr_bytes(&w, m->ping.opaque, PROTO_PING_SIZE);
		break;
	case PROTO_MSG_WS_CONTROL:
		wr_u8(&w, m->ws_control.opcode);
		wr_u16(&w, m->ws_control.code);
		if (m->ws_control.len > 0)
			wr_bytes(&w, m->ws_control.ptr, m->ws_control.len);
		break;
	case PROTO_MSG_STARTTLS:
		wr_str(&w, &m->starttls.tls_profile);
		break;
	}
	return total;
}

int
proto_hdr_encode(uint8_t *buf, uint8_t type, uint8_t flags, uint32_t stream,
    uint32_t length, enum proto_fault *reterr_fault)
{
	enum proto_fault f;

	if (length > PROTO_PAYLOAD_MAX)
		return fail(reterr_fault, PROTO_FAULT_TOO_BIG,
		    EGRESS_ERR_INVALID);
	f = hdr_check(type, flags, stream, length);
	if (f != PROTO_FAULT_NONE)
		return fail(reterr_fault, f, EGRESS_ERR_INVALID);
	/* The lowest version that has the type. */
	wr_hdr(buf, type_rules[type].since > 1 ? type_rules[type].since : 1,
	    type, flags, stream, length);
	return PROTO_HDR_SIZE;
}

/*
 * Rewrite the flags and stream id of the encoded frame at buf (len bytes,
 * the whole frame), after checking that the header is one this side could
 * have encoded and stays valid with the new values. buf is unchanged on
 * failure.
 */
static int
hdr_patch(uint8_t *buf, size_t len, uint8_t flags, uint32_t stream)
{
	uint32_t length;

	if (buf == NULL || len < PROTO_HDR_SIZE ||
	    buf[4] < PROTO_VERSION_MIN || buf[4] > PROTO_VERSION ||
	    buf[7] != 0)
		return EGRESS_ERR_INVALID;
	length = get32(buf);
	if (length > PROTO_PAYLOAD_MAX || len - PROTO_HDR_SIZE < length)
		return EGRESS_ERR_INVALID;
	if (hdr_check(buf[5], flags, stream, length) != PROTO_FAULT_NONE ||
	    !type_in_version(buf[5], buf[4]))
		return EGRESS_ERR_INVALID;
	buf[6] = flags;
	put32(buf + 8, stream);
	return 0;
}

int
proto_hdr_flags(const uint8_t *buf, size_t len)
{
	if (buf == NULL || len < PROTO_HDR_SIZE)
		return EGRESS_ERR_INVALID;
	return buf[6];
}

int
proto_hdr_version(const uint8_t *buf, size_t len)
{
	if (buf == NULL || len < PROTO_HDR_SIZE)
		return EGRESS_ERR_INVALID;
	return buf[4];
}

int
proto_hdr_set_stream(uint8_t *buf, size_t len, uint32_t stream)
{
	if (buf == NULL || len < PROTO_HDR_SIZE)
		return EGRESS_ERR_INVALID;
	return hdr_patch(buf, len, buf[6], stream);
}

int
proto_hdr_add_flags(uint8_t *buf, size_t len, uint8_t flags)
{
	if (buf == NULL || len < PROTO_HDR_SIZE)
		return EGRESS_ERR_INVALID;
	return hdr_patch(buf, len, (uint8_t)(buf[6] | flags), get32(buf + 8));
}

/* ---- Equality --------------------------------------------------------- */

static int
str_eq(const struct proto_str *a, const struct proto_str *b)
{
	return a->len == b->len &&
	    (a->len == 0 || memcmp(a->ptr, b->ptr, a->len) == 0);
}

static int
headers_eq(const struct proto_msg *a, const struct proto_msg *b)
{
	size_t i;

	if (a->nheaders != b->nheaders || a->nheaders > PROTO_HEADERS_MAX)
		return 0;
	for (i = 0; i < a->nheaders; i++)
		if (!str_eq(&a->headers[i].name, &b->headers[i].name) ||
		    !str_eq(&a->headers[i].value, &b->headers[i].value))
			return 0;
	return 1;
}

int
proto_msg_equal(const struct proto_msg *a, const struct proto_msg *b)
{
	const struct proto_request *x = &a->request, *y = &b->request;

	if (a->type != b->type || a->flags != b->flags ||
	    msg_version(a) != msg_version(b) || a->stream != b->stream)
		return 0;
	switch (a->type) {
	case PROTO_MSG_HELLO:
		return a->hello.version == b->hello.version;
	case PROTO_MSG_REQUEST:
		return x->transport == y->transport &&
		    x->timeouts.connect_ms == y->timeouts.connect_ms &&
		    x->timeouts.first_byte_ms == y->timeouts.first_byte_ms &&
		    x->timeouts.between_bytes_ms ==
		    y->timeouts.between_bytes_ms &&
		    x->timeouts.total_ms == y->timeouts.total_ms &&
		    str_eq(&x->method, &y->method) &&
		    str_eq(&x->scheme, &y->scheme) &&
		    str_eq(&x->authority, &y->authority) &&
		    str_eq(&x->path, &y->path) &&
		    str_eq(&x->tls_profile, &y->tls_profile) &&
		    headers_eq(a, b);
	case PROTO_MSG_RESPONSE:
		return a->response.status == b->response.status &&
		    headers_eq(a, b);
	case PROTO_MSG_DATA:
		return a->data.len == b->data.len &&
		    (a->data.len == 0 ||
			memcmp(a->data.ptr, b->data.ptr, a->data.len) == 0);
	case PROTO_MSG_TRAILERS:
		return headers_eq(a, b);
	case PROTO_MSG_WINDOW_UPDATE:
		return a->window_update.increment ==
		    b->window_update.increment;
	case PROTO_MSG_RESET:
		return a->reset.code == b->reset.code;
	case PROTO_MSG_ERROR:
		return a->error.code == b->error.code &&
		    str_eq(&a->error.message, &b->error.message);
	case PROTO_MSG_GOAWAY:
		return a->goaway.last_stream == b->goaway.last_stream;
	case PROTO_MSG_PING:
	case PROTO_MSG_PONG:
		return memcmp(a->ping.opaque, b->ping.opaque,
			   PROTO_PING_SIZE) == 0;
	case PROTO_MSG_WS_CONTROL:
		return a->ws_control.opcode == b->ws_control.opcode &&
		    a->ws_control.code == b->ws_control.code &&
		    a->ws_control.len == b->ws_control.len &&
		    (a->ws_control.len == 0 ||
			memcmp(a->ws_control.ptr, b->ws_control.ptr,
			    a->ws_control.len) == 0);
	case PROTO_MSG_STARTTLS:
		return str_eq(&a->starttls.tls_profile,
		    &b->starttls.tls_profile);
	default:
		return 1;
	}
}

/* ---- Names, codes and messages ---------------------------------------- */

enum proto_fault
proto_ws_control_check(const struct proto_msg *m)
{
	uint16_t code = m->ws_control.code;

	switch (m->ws_control.opcode) {
	case PROTO_WS_CLOSE:
		if ((m->flags & PROTO_FLAG_END_STREAM) == 0)
			return PROTO_FAULT_FLAGS;
		if (code == 0 ? m->ws_control.len != 0 :
				(code < 1000 || code > 4999 ||
				    m->ws_control.len > PROTO_WS_REASON_MAX))
			return PROTO_FAULT_VALUE;
		return PROTO_FAULT_NONE;
	case PROTO_WS_PING:
	case PROTO_WS_PONG:
		if (m->flags & PROTO_FLAG_END_STREAM)
			return PROTO_FAULT_FLAGS;
		if (code != 0 || m->ws_control.len > PROTO_WS_PAYLOAD_MAX)
			return PROTO_FAULT_VALUE;
		return PROTO_FAULT_NONE;
	default:
		return PROTO_FAULT_VALUE;
	}
}

const char *
proto_type_name(unsigned int type)
{
	if (type == 0 || type > PROTO_TYPE_LAST)
		return "UNKNOWN";
	return type_rules[type].name;
}

const char *
proto_fault_str(enum proto_fault fault)
{
	if ((size_t)fault >= sizeof(fault_strs) / sizeof(fault_strs[0]) ||
	    fault_strs[fault] == NULL)
		return "unknown fault";
	return fault_strs[fault];
}

uint32_t
proto_err_to_wire(int err)
{
	size_t i;

	for (i = 0; i < sizeof(err_map) / sizeof(err_map[0]); i++)
		if (err_map[i].err == err)
			return err_map[i].code;
	return PROTO_CODE_UNAVAILABLE;
}

int
proto_wire_to_err(uint32_t code)
{
	size_t i;

	for (i = 0; i < sizeof(err_map) / sizeof(err_map[0]); i++)
		if (err_map[i].code == code)
			return err_map[i].err;
	return EGRESS_ERR_PROTOCOL;
}

const char *
proto_code_name(uint32_t code)
{
	if (!code_is_known(code))
		return NULL;
	return code_names[code];
}

const char *
proto_code_message(uint32_t code)
{
	if (!code_is_known(code))
		code = PROTO_CODE_UNAVAILABLE;
	return code_messages[code];
}

int
proto_error_init(struct proto_msg *m, uint32_t stream, uint32_t code)
{
	const char *msg;

	if (!code_is_known(code) || stream > PROTO_STREAM_ID_MAX)
		return EGRESS_ERR_INVALID;
	msg = code_messages[code];
	m->type = PROTO_MSG_ERROR;
	m->flags = 0;
	m->version = 0;
	m->stream = stream;
	m->nheaders = 0;
	m->error.code = code;
	m->error.message.ptr = msg;
	m->error.message.len = strlen(msg);
	return 0;
}

uint16_t
proto_version_choose(uint16_t offered)
{
	if (offered < PROTO_VERSION_MIN)
		return 0;
	return offered < PROTO_VERSION ? offered : PROTO_VERSION;
}
