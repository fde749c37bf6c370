/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for the proto/ connection state machine and flow control:
 * table-driven cases for every row of the receive and send tables (frames
 * before HELLO, HELLO twice, wrong direction, idle, reused and closed
 * stream ids, frames in the wrong stream state, stream caps, GOAWAY
 * rules, window overflow and data beyond the window), each checked for
 * its result, its fault and for leaving the state untouched on failure;
 * then whole exchanges between a client and a broker through the codec.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "proto/proto.h"

#define B    PROTO_ROLE_BROKER
#define C    PROTO_ROLE_CLIENT
#define MAXW PROTO_WINDOW_MAX

enum { NO_STREAM = 0, STREAM = 1 };

struct st_case {
	char name[48];
	int role;      /* the side under test */
	int cstate;    /* its connection state */
	uint32_t last; /* last_stream */
	uint32_t nstreams;
	uint32_t goaway;    /* goaway_last; 0 = none */
	uint32_t conn_send; /* 0 = initial window */
	uint32_t conn_recv;
	int has_stream;
	int sstate;
	int local_head;
	int remote_head;
	uint32_t s_send; /* 0 = initial window */
	uint32_t s_recv;
	/* The frame. */
	int type;
	uint32_t stream;
	int flags;
	uint32_t len; /* DATA length */
	uint32_t val; /* version, increment, last id or code */
	/* Expected. */
	int rc;
	int fault;
	int want_sstate; /* -1: do not check */
	int want_cstate;
};

static void
setup(const struct st_case *c, struct proto_conn *conn, struct proto_stream *s,
    struct proto_msg *m)
{
	memset(conn, 0, sizeof(*conn));
	memset(s, 0, sizeof(*s));
	proto_conn_init(conn, (enum proto_role)c->role);
	conn->state = (uint8_t)c->cstate;
	conn->offered = 1;
	if (c->cstate >= PROTO_CONN_OPEN)
		conn->version = 1;
	conn->last_stream = c->last;
	conn->nstreams = c->nstreams;
	if (c->goaway != 0)
		conn->goaway_last = c->goaway;
	if (c->conn_send != 0)
		conn->flow.send = c->conn_send;
	if (c->conn_recv != 0)
		conn->flow.recv = c->conn_recv;
	proto_stream_init(s, c->stream);
	s->state = (uint8_t)c->sstate;
	s->local_head = (uint8_t)c->local_head;
	s->remote_head = (uint8_t)c->remote_head;
	if (c->s_send != 0)
		s->flow.send = c->s_send;
	if (c->s_recv != 0)
		s->flow.recv = c->s_recv;

	memset(m, 0, sizeof(*m));
	m->type = (uint8_t)c->type;
	m->stream = c->stream;
	m->flags = (uint8_t)c->flags;
	switch (c->type) {
	case PROTO_MSG_HELLO:
		m->hello.version = (uint16_t)c->val;
		break;
	case PROTO_MSG_REQUEST:
		m->request.transport = 1;
		break;
	case PROTO_MSG_RESPONSE:
		m->response.status = 200;
		break;
	case PROTO_MSG_DATA:
		m->data.len = c->len;
		break;
	case PROTO_MSG_WINDOW_UPDATE:
		m->window_update.increment = c->val;
		break;
	case PROTO_MSG_RESET:
		m->reset.code = c->val;
		break;
	case PROTO_MSG_ERROR:
		m->error.code = c->val;
		break;
	case PROTO_MSG_GOAWAY:
		m->goaway.last_stream = c->val;
		break;
	}
}

static void
check(const struct st_case *c, int rc, enum proto_fault f,
    const struct proto_conn *before_c, const struct proto_stream *before_s,
    const struct proto_conn *conn, const struct proto_stream *s)
{
	cr_assert_eq(rc, c->rc, "%s: rc %d, want %d (fault %s)", c->name, rc,
	    c->rc, proto_fault_str(f));
	if (c->rc < 0 && c->fault != 0)
		cr_assert_eq(f, (enum proto_fault)c->fault,
		    "%s: fault %s, want %s", c->name, proto_fault_str(f),
		    proto_fault_str((enum proto_fault)c->fault));
	if (c->rc < 0) {
		// NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): unchanged means byte for byte
		cr_assert_eq(memcmp(before_c, conn, sizeof(*conn)), 0,
		    "%s: connection changed on failure", c->name);
		// NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): unchanged means byte for byte
		cr_assert_eq(memcmp(before_s, s, sizeof(*s)), 0,
		    "%s: stream changed on failure", c->name);
	}
	if (c->want_sstate >= 0)
		cr_assert_eq(s->state, c->want_sstate, "%s: stream state %d",
		    c->name, s->state);
	if (c->want_cstate >= 0)
		cr_assert_eq(conn->state, c->want_cstate, "%s: conn state %d",
		    c->name, conn->state);
}

#define START	 PROTO_CONN_START
#define HSENT	 PROTO_CONN_HELLO_SENT
#define HRECV	 PROTO_CONN_HELLO_RECEIVED
#define OPEN	 PROTO_CONN_OPEN
#define DRAIN	 PROTO_CONN_DRAINING
#define CLOSED	 PROTO_CONN_CLOSED
#define S_IDLE	 PROTO_STREAM_IDLE
#define S_OPEN	 PROTO_STREAM_OPEN
#define S_HCL	 PROTO_STREAM_HALF_CLOSED_LOCAL
#define S_HCR	 PROTO_STREAM_HALF_CLOSED_REMOTE
#define S_CLOSED PROTO_STREAM_CLOSED
#define END	 PROTO_FLAG_END_STREAM
#define EPROTO_	 EGRESS_ERR_PROTOCOL
#define EINVAL_	 EGRESS_ERR_INVALID
#define EAGAIN_	 EGRESS_ERR_AGAIN
#define ACC	 PROTO_ACCEPT
#define IGN	 PROTO_IGNORE

#define T_HELLO	 PROTO_MSG_HELLO
#define T_REQ	 PROTO_MSG_REQUEST
#define T_RESP	 PROTO_MSG_RESPONSE
#define T_DATA	 PROTO_MSG_DATA
#define T_TRAIL	 PROTO_MSG_TRAILERS
#define T_WIN	 PROTO_MSG_WINDOW_UPDATE
#define T_RST	 PROTO_MSG_RESET
#define T_ERR	 PROTO_MSG_ERROR
#define T_GOAWAY PROTO_MSG_GOAWAY
#define T_PING	 PROTO_MSG_PING

/*
 * name, role, cstate, last, nstreams, goaway, conn_send, conn_recv,
 * has_stream, sstate, local_head, remote_head, s_send, s_recv,
 * type, stream, flags, len, val, rc, fault, want_sstate, want_cstate
 */
static struct st_case recv_cases[] = {
	/* Connection states: HELLO first, once. */
	{ "before-hello-data", B, START, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0,
	    0, T_DATA, 1, 0, 1, 0, EPROTO_, PROTO_FAULT_CONN_STATE, -1, -1 },
	{ "before-hello-request", B, START, 0, 0, 0, 0, 0, STREAM, S_IDLE, 0,
	    0, 0, 0, T_REQ, 1, 0, 0, 0, EPROTO_, PROTO_FAULT_CONN_STATE, -1,
	    -1 },
	{ "before-hello-ping", B, START, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0,
	    0, T_PING, 0, 0, 0, 0, EPROTO_, PROTO_FAULT_CONN_STATE, -1, -1 },
	{ "before-hello-window", B, START, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0,
	    0, 0, T_WIN, 0, 0, 0, 1, EPROTO_, PROTO_FAULT_CONN_STATE, -1, -1 },
	{ "hello", B, START, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0, 0, T_HELLO,
	    0, 0, 0, 9, ACC, 0, -1, HRECV },
	{ "hello-twice", B, OPEN, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0, 0,
	    T_HELLO, 0, 0, 0, 1, EPROTO_, PROTO_FAULT_CONN_STATE, -1, -1 },
	{ "request-before-reply", B, HRECV, 0, 0, 0, 0, 0, STREAM, S_IDLE, 0,
	    0, 0, 0, T_REQ, 1, 0, 0, 0, EPROTO_, PROTO_FAULT_CONN_STATE, -1,
	    -1 },
	{ "client-unsolicited-hello", C, START, 0, 0, 0, 0, 0, NO_STREAM, 0, 0,
	    0, 0, 0, T_HELLO, 0, 0, 0, 1, EPROTO_, PROTO_FAULT_CONN_STATE, -1,
	    -1 },
	{ "client-data-before-hello", C, HSENT, 0, 0, 0, 0, 0, NO_STREAM, 0, 0,
	    0, 0, 0, T_DATA, 1, 0, 1, 0, EPROTO_, PROTO_FAULT_CONN_STATE, -1,
	    -1 },
	{ "client-stream-error-before-hello", C, HSENT, 0, 0, 0, 0, 0,
	    NO_STREAM, 0, 0, 0, 0, 0, T_ERR, 1, 0, 0, 9, EPROTO_,
	    PROTO_FAULT_CONN_STATE, -1, -1 },
	{ "client-conn-error-before-hello", C, HSENT, 0, 0, 0, 0, 0, NO_STREAM,
	    0, 0, 0, 0, 0, T_ERR, 0, 0, 0, 9, ACC, 0, -1, CLOSED },
	{ "client-hello-reply", C, HSENT, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0,
	    0, T_HELLO, 0, 0, 0, 1, ACC, 0, -1, OPEN },
	{ "client-hello-above-offer", C, HSENT, 0, 0, 0, 0, 0, NO_STREAM, 0, 0,
	    0, 0, 0, T_HELLO, 0, 0, 0, 2, EPROTO_, PROTO_FAULT_VALUE, -1, -1 },
	{ "client-hello-twice", C, OPEN, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0,
	    0, T_HELLO, 0, 0, 0, 1, EPROTO_, PROTO_FAULT_CONN_STATE, -1, -1 },
	{ "closed-connection", B, CLOSED, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0,
	    0, T_PING, 0, 0, 0, 0, EGRESS_ERR_CLOSED, 0, -1, -1 },
	/* Direction. */
	{ "broker-gets-response", B, OPEN, 1, 1, 0, 0, 0, STREAM, S_OPEN, 0, 1,
	    0, 0, T_RESP, 1, 0, 0, 0, EPROTO_, PROTO_FAULT_DIRECTION, -1, -1 },
	{ "broker-gets-error", B, OPEN, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0,
	    0, T_ERR, 0, 0, 0, 9, EPROTO_, PROTO_FAULT_DIRECTION, -1, -1 },
	{ "broker-gets-goaway", B, OPEN, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0,
	    0, T_GOAWAY, 0, 0, 0, 0, EPROTO_, PROTO_FAULT_DIRECTION, -1, -1 },
	{ "client-gets-request", C, OPEN, 0, 0, 0, 0, 0, STREAM, S_IDLE, 0, 0,
	    0, 0, T_REQ, 1, 0, 0, 0, EPROTO_, PROTO_FAULT_DIRECTION, -1, -1 },
	/* Opening streams. */
	{ "request-opens", B, OPEN, 0, 0, 0, 0, 0, STREAM, S_IDLE, 0, 0, 0, 0,
	    T_REQ, 1, 0, 0, 0, ACC, 0, S_OPEN, OPEN },
	{ "request-end-stream", B, OPEN, 1, 0, 0, 0, 0, STREAM, S_IDLE, 0, 0,
	    0, 0, T_REQ, 3, END, 0, 0, ACC, 0, S_HCR, OPEN },
	{ "request-id-reused", B, OPEN, 7, 0, 0, 0, 0, STREAM, S_IDLE, 0, 0, 0,
	    0, T_REQ, 5, 0, 0, 0, EPROTO_, PROTO_FAULT_STREAM_REUSED, -1, -1 },
	{ "request-id-equal", B, OPEN, 7, 0, 0, 0, 0, STREAM, S_IDLE, 0, 0, 0,
	    0, T_REQ, 7, 0, 0, 0, EPROTO_, PROTO_FAULT_STREAM_REUSED, -1, -1 },
	{ "request-stream-cap", B, OPEN, 7, PROTO_STREAMS_MAX, 0, 0, 0, STREAM,
	    S_IDLE, 0, 0, 0, 0, T_REQ, 9, 0, 0, 0, EPROTO_,
	    PROTO_FAULT_STREAMS, -1, -1 },
	{ "request-after-goaway", B, DRAIN, 7, 1, 7, 0, 0, STREAM, S_IDLE, 0,
	    0, 0, 0, T_REQ, 9, 0, 0, 0, IGN, 0, S_IDLE, DRAIN },
	{ "request-no-stream-object", B, OPEN, 0, 0, 0, 0, 0, NO_STREAM, 0, 0,
	    0, 0, 0, T_REQ, 1, 0, 0, 0, EINVAL_, 0, -1, -1 },
	/* Idle and closed stream ids. */
	{ "data-idle-stream", B, OPEN, 7, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0, 0,
	    T_DATA, 9, 0, 1, 0, EPROTO_, PROTO_FAULT_STREAM_IDLE, -1, -1 },
	{ "window-idle-stream", B, OPEN, 7, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0,
	    0, T_WIN, 9, 0, 0, 1, EPROTO_, PROTO_FAULT_STREAM_IDLE, -1, -1 },
	{ "reset-idle-stream", C, OPEN, 1, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0,
	    0, T_RST, 3, 0, 0, 10, EPROTO_, PROTO_FAULT_STREAM_IDLE, -1, -1 },
	{ "data-closed-ignored", B, OPEN, 7, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0,
	    0, T_DATA, 5, 0, 100, 0, IGN, 0, -1, OPEN },
	{ "data-closed-object-ignored", B, OPEN, 7, 0, 0, 0, 0, STREAM,
	    S_CLOSED, 1, 1, 0, 0, T_DATA, 5, 0, 100, 0, IGN, 0, S_CLOSED,
	    OPEN },
	{ "data-closed-beyond-conn", B, OPEN, 7, 0, 0, 0, 10, NO_STREAM, 0, 0,
	    0, 0, 0, T_DATA, 5, 0, 11, 0, EPROTO_, PROTO_FAULT_WINDOW_EXCEEDED,
	    -1, -1 },
	{ "reset-closed-ignored", C, OPEN, 5, 0, 0, 0, 0, NO_STREAM, 0, 0, 0,
	    0, 0, T_RST, 3, 0, 0, 10, IGN, 0, -1, OPEN },
	{ "error-closed-ignored", C, OPEN, 5, 0, 0, 0, 0, NO_STREAM, 0, 0, 0,
	    0, 0, T_ERR, 3, 0, 0, 1, IGN, 0, -1, OPEN },
	{ "response-closed-ignored", C, OPEN, 5, 0, 0, 0, 0, NO_STREAM, 0, 0,
	    0, 0, 0, T_RESP, 3, 0, 0, 0, IGN, 0, -1, OPEN },
	/* Stream states. */
	{ "data-after-end-stream", B, OPEN, 1, 1, 0, 0, 0, STREAM, S_HCR, 0, 1,
	    0, 0, T_DATA, 1, 0, 1, 0, EPROTO_, PROTO_FAULT_STREAM_STATE, -1,
	    -1 },
	{ "trailers-after-end", B, OPEN, 1, 1, 0, 0, 0, STREAM, S_HCR, 0, 1, 0,
	    0, T_TRAIL, 1, END, 0, 0, EPROTO_, PROTO_FAULT_STREAM_STATE, -1,
	    -1 },
	{ "data-before-response", C, OPEN, 1, 1, 0, 0, 0, STREAM, S_OPEN, 1, 0,
	    0, 0, T_DATA, 1, 0, 1, 0, EPROTO_, PROTO_FAULT_STREAM_STATE, -1,
	    -1 },
	{ "trailers-before-response", C, OPEN, 1, 1, 0, 0, 0, STREAM, S_HCL, 1,
	    0, 0, 0, T_TRAIL, 1, END, 0, 0, EPROTO_, PROTO_FAULT_STREAM_STATE,
	    -1, -1 },
	{ "response-twice", C, OPEN, 1, 1, 0, 0, 0, STREAM, S_OPEN, 1, 1, 0, 0,
	    T_RESP, 1, 0, 0, 0, EPROTO_, PROTO_FAULT_STREAM_STATE, -1, -1 },
	{ "response", C, OPEN, 1, 1, 0, 0, 0, STREAM, S_HCL, 1, 0, 0, 0,
	    T_RESP, 1, 0, 0, 0, ACC, 0, S_HCL, OPEN },
	{ "response-end-closes", C, OPEN, 1, 1, 0, 0, 0, STREAM, S_HCL, 1, 0,
	    0, 0, T_RESP, 1, END, 0, 0, ACC, 0, S_CLOSED, OPEN },
	{ "data-end-half-closes", B, OPEN, 1, 1, 0, 0, 0, STREAM, S_OPEN, 0, 1,
	    0, 0, T_DATA, 1, END, 5, 0, ACC, 0, S_HCR, OPEN },
	{ "trailers-close", C, OPEN, 1, 1, 0, 0, 0, STREAM, S_HCL, 1, 1, 0, 0,
	    T_TRAIL, 1, END, 0, 0, ACC, 0, S_CLOSED, OPEN },
	{ "reset-closes", B, OPEN, 1, 1, 0, 0, 0, STREAM, S_OPEN, 0, 1, 0, 0,
	    T_RST, 1, 0, 0, 10, ACC, 0, S_CLOSED, OPEN },
	{ "error-closes", C, OPEN, 1, 1, 0, 0, 0, STREAM, S_HCL, 1, 1, 0, 0,
	    T_ERR, 1, 0, 0, 1, ACC, 0, S_CLOSED, OPEN },
	{ "window-half-closed-remote", B, OPEN, 1, 1, 0, 0, 0, STREAM, S_HCR,
	    0, 1, 0, 0, T_WIN, 1, 0, 0, 100, ACC, 0, S_HCR, OPEN },
	{ "stream-object-mismatch", B, OPEN, 3, 1, 0, 0, 0, STREAM, S_OPEN, 0,
	    1, 0, 0, T_DATA, 1, 0, 1, 0, EINVAL_, 0, -1, -1 },
	/* Flow control. */
	{ "data-beyond-stream-window", B, OPEN, 1, 1, 0, 0, 0, STREAM, S_OPEN,
	    0, 1, 0, 10, T_DATA, 1, 0, 11, 0, EPROTO_,
	    PROTO_FAULT_WINDOW_EXCEEDED, -1, -1 },
	{ "data-beyond-conn-window", B, OPEN, 1, 1, 0, 0, 10, STREAM, S_OPEN,
	    0, 1, 0, 0, T_DATA, 1, 0, 11, 0, EPROTO_,
	    PROTO_FAULT_WINDOW_EXCEEDED, -1, -1 },
	{ "data-fills-window", B, OPEN, 1, 1, 0, 0, 0, STREAM, S_OPEN, 0, 1, 0,
	    10, T_DATA, 1, 0, 10, 0, ACC, 0, S_OPEN, OPEN },
	{ "window-overflow-conn", C, OPEN, 0, 0, 0, MAXW, 0, NO_STREAM, 0, 0,
	    0, 0, 0, T_WIN, 0, 0, 0, 1, EPROTO_, PROTO_FAULT_WINDOW_OVERFLOW,
	    -1, -1 },
	{ "window-overflow-stream", C, OPEN, 1, 1, 0, 0, 0, STREAM, S_OPEN, 1,
	    1, MAXW - 5, 0, T_WIN, 1, 0, 0, 6, EPROTO_,
	    PROTO_FAULT_WINDOW_OVERFLOW, -1, -1 },
	{ "window-to-max", C, OPEN, 1, 1, 0, 0, 0, STREAM, S_OPEN, 1, 1,
	    MAXW - 5, 0, T_WIN, 1, 0, 0, 5, ACC, 0, S_OPEN, OPEN },
	/* GOAWAY. */
	{ "goaway-above-last", C, OPEN, 3, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0,
	    0, T_GOAWAY, 0, 0, 0, 5, EPROTO_, PROTO_FAULT_VALUE, -1, -1 },
	{ "goaway", C, OPEN, 5, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0, 0, T_GOAWAY,
	    0, 0, 0, 3, ACC, 0, -1, DRAIN },
	{ "goaway-rising", C, DRAIN, 5, 0, 3, 0, 0, NO_STREAM, 0, 0, 0, 0, 0,
	    T_GOAWAY, 0, 0, 0, 5, EPROTO_, PROTO_FAULT_VALUE, -1, -1 },
	{ "ping", C, OPEN, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0, 0, T_PING, 0,
	    0, 0, 0, ACC, 0, -1, OPEN },
	{ "data-while-draining", B, DRAIN, 1, 1, 1, 0, 0, STREAM, S_OPEN, 0, 1,
	    0, 0, T_DATA, 1, 0, 1, 0, ACC, 0, S_OPEN, DRAIN },
};

ParameterizedTestParameters(proto_stream, recv_table)
{
	return cr_make_param_array(struct st_case, recv_cases,
	    sizeof(recv_cases) / sizeof(recv_cases[0]));
}

ParameterizedTest(struct st_case *c, proto_stream, recv_table)
{
	static struct proto_msg m;
	struct proto_conn conn, bc;
	struct proto_stream s, bs;
	enum proto_fault f = PROTO_FAULT_NONE;
	int rc;

	setup(c, &conn, &s, &m);
	if (strcmp(c->name, "stream-object-mismatch") == 0)
		s.id = 3;
	memcpy(&bc, &conn, sizeof(bc));
	memcpy(&bs, &s, sizeof(bs));
	rc = proto_conn_recv(&conn, c->has_stream ? &s : NULL, &m, &f);
	check(c, rc, f, &bc, &bs, &conn, &s);
}

static struct st_case send_cases[] = {
	{ "request-before-hello", C, START, 0, 0, 0, 0, 0, STREAM, S_IDLE, 0,
	    0, 0, 0, T_REQ, 1, 0, 0, 0, EINVAL_, PROTO_FAULT_CONN_STATE, -1,
	    -1 },
	{ "request-awaiting-hello", C, HSENT, 0, 0, 0, 0, 0, STREAM, S_IDLE, 0,
	    0, 0, 0, T_REQ, 1, 0, 0, 0, EINVAL_, PROTO_FAULT_CONN_STATE, -1,
	    -1 },
	{ "hello", C, START, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0, 0, T_HELLO,
	    0, 0, 0, 1, 0, 0, -1, HSENT },
	{ "hello-unknown-version", C, START, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0,
	    0, 0, T_HELLO, 0, 0, 0, 3, EINVAL_, PROTO_FAULT_VALUE, -1, -1 },
	{ "hello-twice", C, OPEN, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0, 0,
	    T_HELLO, 0, 0, 0, 1, EINVAL_, PROTO_FAULT_CONN_STATE, -1, -1 },
	{ "client-sends-response", C, OPEN, 1, 1, 0, 0, 0, STREAM, S_OPEN, 1,
	    0, 0, 0, T_RESP, 1, 0, 0, 0, EINVAL_, PROTO_FAULT_DIRECTION, -1,
	    -1 },
	{ "client-sends-goaway", C, OPEN, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0,
	    0, T_GOAWAY, 0, 0, 0, 0, EINVAL_, PROTO_FAULT_DIRECTION, -1, -1 },
	{ "client-sends-error", C, OPEN, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0,
	    0, T_ERR, 0, 0, 0, 9, EINVAL_, PROTO_FAULT_DIRECTION, -1, -1 },
	{ "request-while-draining", C, DRAIN, 0, 0, 0, 0, 0, STREAM, S_IDLE, 0,
	    0, 0, 0, T_REQ, 1, 0, 0, 0, EINVAL_, PROTO_FAULT_CONN_STATE, -1,
	    -1 },
	{ "request-reused", C, OPEN, 5, 0, 0, 0, 0, STREAM, S_IDLE, 0, 0, 0, 0,
	    T_REQ, 5, 0, 0, 0, EINVAL_, PROTO_FAULT_STREAM_REUSED, -1, -1 },
	{ "request-cap", C, OPEN, 5, PROTO_STREAMS_MAX, 0, 0, 0, STREAM,
	    S_IDLE, 0, 0, 0, 0, T_REQ, 7, 0, 0, 0, EAGAIN_,
	    PROTO_FAULT_STREAMS, -1, -1 },
	{ "request", C, OPEN, 5, 0, 0, 0, 0, STREAM, S_IDLE, 0, 0, 0, 0, T_REQ,
	    7, 0, 0, 0, 0, 0, S_OPEN, OPEN },
	{ "request-end-stream", C, OPEN, 5, 0, 0, 0, 0, STREAM, S_IDLE, 0, 0,
	    0, 0, T_REQ, 7, END, 0, 0, 0, 0, S_HCL, OPEN },
	{ "data-beyond-stream", C, OPEN, 1, 1, 0, 0, 0, STREAM, S_OPEN, 1, 0,
	    10, 0, T_DATA, 1, 0, 11, 0, EAGAIN_, PROTO_FAULT_WINDOW_EXCEEDED,
	    -1, -1 },
	{ "data-beyond-conn", C, OPEN, 1, 1, 0, 10, 0, STREAM, S_OPEN, 1, 0, 0,
	    0, T_DATA, 1, 0, 11, 0, EAGAIN_, PROTO_FAULT_WINDOW_EXCEEDED, -1,
	    -1 },
	{ "data-fills-window", C, OPEN, 1, 1, 0, 10, 0, STREAM, S_OPEN, 1, 0,
	    0, 0, T_DATA, 1, END, 10, 0, 0, 0, S_HCL, OPEN },
	{ "data-after-end", C, OPEN, 1, 1, 0, 0, 0, STREAM, S_HCL, 1, 0, 0, 0,
	    T_DATA, 1, 0, 1, 0, EINVAL_, PROTO_FAULT_STREAM_STATE, -1, -1 },
	{ "data-no-stream", C, OPEN, 1, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0, 0,
	    T_DATA, 1, 0, 1, 0, EINVAL_, PROTO_FAULT_STREAM_STATE, -1, -1 },
	{ "broker-hello-first", B, START, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0,
	    0, T_HELLO, 0, 0, 0, 1, EINVAL_, PROTO_FAULT_CONN_STATE, -1, -1 },
	{ "broker-hello-wrong-version", B, HRECV, 0, 0, 0, 0, 0, NO_STREAM, 0,
	    0, 0, 0, 0, T_HELLO, 0, 0, 0, 2, EINVAL_, PROTO_FAULT_VALUE, -1,
	    -1 },
	{ "broker-hello", B, HRECV, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0, 0,
	    T_HELLO, 0, 0, 0, 1, 0, 0, -1, OPEN },
	{ "broker-error-instead-of-hello", B, HRECV, 0, 0, 0, 0, 0, NO_STREAM,
	    0, 0, 0, 0, 0, T_ERR, 0, 0, 0, 9, 0, 0, -1, CLOSED },
	{ "broker-data-before-response", B, OPEN, 1, 1, 0, 0, 0, STREAM,
	    S_OPEN, 0, 1, 0, 0, T_DATA, 1, 0, 1, 0, EINVAL_,
	    PROTO_FAULT_STREAM_STATE, -1, -1 },
	{ "broker-response-twice", B, OPEN, 1, 1, 0, 0, 0, STREAM, S_HCR, 1, 1,
	    0, 0, T_RESP, 1, 0, 0, 0, EINVAL_, PROTO_FAULT_STREAM_STATE, -1,
	    -1 },
	{ "broker-response-end-closes", B, OPEN, 1, 1, 0, 0, 0, STREAM, S_HCR,
	    0, 1, 0, 0, T_RESP, 1, END, 0, 0, 0, 0, S_CLOSED, OPEN },
	{ "broker-error-after-response", B, OPEN, 1, 1, 0, 0, 0, STREAM, S_HCR,
	    1, 1, 0, 0, T_ERR, 1, 0, 0, 7, 0, 0, S_CLOSED, OPEN },
	{ "broker-goaway-above-last", B, OPEN, 3, 0, 0, 0, 0, NO_STREAM, 0, 0,
	    0, 0, 0, T_GOAWAY, 0, 0, 0, 5, EINVAL_, PROTO_FAULT_VALUE, -1,
	    -1 },
	{ "broker-goaway", B, OPEN, 5, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0, 0,
	    T_GOAWAY, 0, 0, 0, 5, 0, 0, -1, DRAIN },
	{ "broker-sends-request", B, OPEN, 0, 0, 0, 0, 0, STREAM, S_IDLE, 0, 0,
	    0, 0, T_REQ, 1, 0, 0, 0, EINVAL_, PROTO_FAULT_DIRECTION, -1, -1 },
	{ "window-update-overflow", B, OPEN, 1, 1, 0, 0, 0, STREAM, S_OPEN, 0,
	    1, 0, MAXW, T_WIN, 1, 0, 0, 1, EINVAL_,
	    PROTO_FAULT_WINDOW_OVERFLOW, -1, -1 },
	{ "conn-window-update-overflow", B, OPEN, 0, 0, 0, 0, MAXW, NO_STREAM,
	    0, 0, 0, 0, 0, T_WIN, 0, 0, 0, 1, EINVAL_,
	    PROTO_FAULT_WINDOW_OVERFLOW, -1, -1 },
	{ "closed", C, CLOSED, 0, 0, 0, 0, 0, NO_STREAM, 0, 0, 0, 0, 0, T_PING,
	    0, 0, 0, 0, EGRESS_ERR_CLOSED, 0, -1, -1 },
	{ "reset-closed-stream", C, OPEN, 1, 0, 0, 0, 0, STREAM, S_CLOSED, 1,
	    1, 0, 0, T_RST, 1, 0, 0, 10, EINVAL_, PROTO_FAULT_STREAM_STATE, -1,
	    -1 },
};

ParameterizedTestParameters(proto_stream, send_table)
{
	return cr_make_param_array(struct st_case, send_cases,
	    sizeof(send_cases) / sizeof(send_cases[0]));
}

ParameterizedTest(struct st_case *c, proto_stream, send_table)
{
	static struct proto_msg m;
	struct proto_conn conn, bc;
	struct proto_stream s, bs;
	enum proto_fault f = PROTO_FAULT_NONE;
	int rc;

	setup(c, &conn, &s, &m);
	memcpy(&bc, &conn, sizeof(bc));
	memcpy(&bs, &s, sizeof(bs));
	rc = proto_conn_send(&conn, c->has_stream ? &s : NULL, &m, &f);
	check(c, rc, f, &bc, &bs, &conn, &s);
}

/* ---- Whole exchanges through the codec -------------------------------- */

static uint8_t wire[PROTO_FRAME_MAX];
static uint8_t zeros[PROTO_DATA_MAX];

/*
 * Send m from one side and receive it on the other, through the encoder
 * and the decoder. Return the receiver's result.
 */
static int
pass(struct proto_conn *from, struct proto_stream *fs, struct proto_conn *to,
    struct proto_stream *ts, struct proto_msg *m)
{
	static struct proto_msg got;
	enum proto_fault f = PROTO_FAULT_NONE;
	int n, rc;

	if (m->type == PROTO_MSG_DATA && m->data.ptr == NULL)
		m->data.ptr = zeros;
	rc = proto_conn_send(from, fs, m, &f);
	cr_assert_eq(rc, 0, "send %s: %d (%s)", proto_type_name(m->type), rc,
	    proto_fault_str(f));
	n = proto_encode(m, wire, sizeof(wire), &f);
	cr_assert_gt(n, 0, "encode %s: %s", proto_type_name(m->type),
	    proto_fault_str(f));
	cr_assert_eq(proto_frame_decode(wire, (size_t)n, &got, &f), n);
	return proto_conn_recv(to, ts, &got, &f);
}

static void
msg(struct proto_msg *m, int type, uint32_t stream, int flags)
{
	memset(m, 0, sizeof(*m));
	m->type = (uint8_t)type;
	m->stream = stream;
	m->flags = (uint8_t)flags;
}

static void
handshake(struct proto_conn *cl, struct proto_conn *br)
{
	static struct proto_msg m;

	proto_conn_init(cl, PROTO_ROLE_CLIENT);
	proto_conn_init(br, PROTO_ROLE_BROKER);
	msg(&m, PROTO_MSG_HELLO, 0, 0);
	m.hello.version = PROTO_VERSION;
	cr_assert_eq(pass(cl, NULL, br, NULL, &m), PROTO_ACCEPT);
	cr_assert_eq(br->state, PROTO_CONN_HELLO_RECEIVED);
	m.hello.version = proto_version_choose(br->offered);
	cr_assert_eq(pass(br, NULL, cl, NULL, &m), PROTO_ACCEPT);
	cr_assert_eq(cl->state, PROTO_CONN_OPEN);
	cr_assert_eq(cl->version, PROTO_VERSION);
	cr_assert_eq(br->version, PROTO_VERSION);
}

static void
open_stream(struct proto_conn *cl, struct proto_stream *cs,
    struct proto_conn *br, struct proto_stream *bs, int flags)
{
	static struct proto_msg m;
	uint32_t id;

	cr_assert_eq(proto_conn_next_id(cl, &id), 0);
	proto_stream_init(cs, id);
	proto_stream_init(bs, id);
	msg(&m, PROTO_MSG_REQUEST, id, flags);
	m.request.transport = PROTO_TRANSPORT_HTTP;
	m.request.method.ptr = "PUT";
	m.request.method.len = 3;
	cr_assert_eq(pass(cl, cs, br, bs, &m), PROTO_ACCEPT);
}

/*
 * Move len body bytes from one side to the other under flow control: the
 * sender sends what sendable() allows, the receiver consumes each frame at
 * once and returns the due WINDOW_UPDATEs. Returns the number of
 * WINDOW_UPDATE frames that flowed back.
 */
static int
stream_body(struct proto_conn *tx, struct proto_stream *txs,
    struct proto_conn *rx, struct proto_stream *rxs, size_t len)
{
	static struct proto_msg m;
	int updates = 0;

	while (len > 0) {
		uint32_t n = proto_conn_sendable(tx, txs), ci, si;

		cr_assert_gt(n, 0, "sender stalled with %zu to go", len);
		if (n > len)
			n = (uint32_t)len;
		msg(&m, PROTO_MSG_DATA, txs->id, n == len ? END : 0);
		m.data.len = n;
		cr_assert_eq(pass(tx, txs, rx, rxs, &m), PROTO_ACCEPT);
		len -= n;
		cr_assert_eq(proto_conn_consumed(rx, rxs, n, &ci, &si), 0);
		if (ci != 0) {
			msg(&m, PROTO_MSG_WINDOW_UPDATE, 0, 0);
			m.window_update.increment = ci;
			cr_assert_eq(pass(rx, NULL, tx, NULL, &m),
			    PROTO_ACCEPT);
			updates++;
		}
		if (si != 0) {
			msg(&m, PROTO_MSG_WINDOW_UPDATE, rxs->id, 0);
			m.window_update.increment = si;
			cr_assert_eq(pass(rx, rxs, tx, txs, &m), PROTO_ACCEPT);
			updates++;
		}
	}
	return updates;
}

Test(proto_stream, full_exchange)
{
	static struct proto_msg m;
	struct proto_conn cl, br;
	struct proto_stream cs, bs;
	int updates;

	handshake(&cl, &br);
	open_stream(&cl, &cs, &br, &bs, 0);
	cr_assert_eq(cs.state, PROTO_STREAM_OPEN);
	cr_assert_eq(bs.state, PROTO_STREAM_OPEN);
	cr_assert_eq(cl.nstreams, 1);
	cr_assert_eq(br.nstreams, 1);

	/* 5 MiB up: far beyond every initial window. */
	updates = stream_body(&cl, &cs, &br, &bs, 5u << 20);
	cr_assert_gt(updates, 10);
	cr_assert_eq(cs.state, PROTO_STREAM_HALF_CLOSED_LOCAL);
	cr_assert_eq(bs.state, PROTO_STREAM_HALF_CLOSED_REMOTE);

	msg(&m, PROTO_MSG_RESPONSE, cs.id, 0);
	m.response.status = 200;
	cr_assert_eq(pass(&br, &bs, &cl, &cs, &m), PROTO_ACCEPT);
	/* 3 MiB down, then trailers end the stream. */
	(void)stream_body(&br, &bs, &cl, &cs, 3u << 20);
	cr_assert_eq(cs.state, PROTO_STREAM_CLOSED);
	cr_assert_eq(bs.state, PROTO_STREAM_CLOSED);
	cr_assert_eq(cl.nstreams, 0);
	cr_assert_eq(br.nstreams, 0);
	/* Nothing the receivers granted was lost on the way. */
	cr_assert_leq(br.flow.recv + br.flow.unacked, PROTO_CONN_WINDOW);
	cr_assert_eq(cl.flow.send, br.flow.recv);
	cr_assert_eq(br.flow.send, cl.flow.recv);
}

Test(proto_stream, trailers_end_stream)
{
	static struct proto_msg m;
	struct proto_conn cl, br;
	struct proto_stream cs, bs;

	handshake(&cl, &br);
	open_stream(&cl, &cs, &br, &bs, END);
	msg(&m, PROTO_MSG_RESPONSE, cs.id, 0);
	m.response.status = 200;
	cr_assert_eq(pass(&br, &bs, &cl, &cs, &m), PROTO_ACCEPT);
	msg(&m, PROTO_MSG_DATA, cs.id, 0);
	m.data.len = 10;
	cr_assert_eq(pass(&br, &bs, &cl, &cs, &m), PROTO_ACCEPT);
	msg(&m, PROTO_MSG_TRAILERS, cs.id, END);
	cr_assert_eq(pass(&br, &bs, &cl, &cs, &m), PROTO_ACCEPT);
	cr_assert_eq(cs.state, PROTO_STREAM_CLOSED);
	cr_assert_eq(bs.state, PROTO_STREAM_CLOSED);
	cr_assert_eq(proto_conn_sendable(&br, &bs), 0);
}

Test(proto_stream, connection_window_shared)
{
	static struct proto_msg m;
	struct proto_conn cl, br;
	struct proto_stream cs[5], bs[5];
	int i;

	handshake(&cl, &br);
	/* Four full stream windows exhaust the connection window. */
	for (i = 0; i < 5; i++)
		open_stream(&cl, &cs[i], &br, &bs[i], 0);
	for (i = 0; i < 4; i++) {
		uint32_t left = PROTO_STREAM_WINDOW;

		while (left > 0) {
			uint32_t n = proto_conn_sendable(&cl, &cs[i]);

			cr_assert_gt(n, 0);
			msg(&m, PROTO_MSG_DATA, cs[i].id, 0);
			m.data.len = n;
			cr_assert_eq(pass(&cl, &cs[i], &br, &bs[i], &m),
			    PROTO_ACCEPT);
			left -= n;
		}
		cr_assert_eq(proto_conn_sendable(&cl, &cs[i]), 0);
	}
	cr_assert_eq(cl.flow.send, 0);
	cr_assert_eq(cs[4].flow.send, PROTO_STREAM_WINDOW);
	cr_assert_eq(proto_conn_sendable(&cl, &cs[4]), 0);
	msg(&m, PROTO_MSG_DATA, cs[4].id, 0);
	m.data.len = 1;
	cr_assert_eq(proto_conn_send(&cl, &cs[4], &m, NULL), EGRESS_ERR_AGAIN);
	/* A peer that ignores the window is caught on the other side. */
	cr_assert_eq(proto_conn_recv(&br, &bs[4], &m, NULL),
	    EGRESS_ERR_PROTOCOL);
	/* A connection-level WINDOW_UPDATE frees it. */
	msg(&m, PROTO_MSG_WINDOW_UPDATE, 0, 0);
	m.window_update.increment = 1000;
	cr_assert_eq(pass(&br, NULL, &cl, NULL, &m), PROTO_ACCEPT);
	cr_assert_eq(proto_conn_sendable(&cl, &cs[4]), 1000);
}

Test(proto_stream, reset_crossing_data)
{
	static struct proto_msg m;
	struct proto_conn cl, br;
	struct proto_stream cs, bs;
	uint32_t ci = 99, si = 99;

	handshake(&cl, &br);
	open_stream(&cl, &cs, &br, &bs, END);
	msg(&m, PROTO_MSG_RESPONSE, cs.id, 0);
	m.response.status = 200;
	cr_assert_eq(pass(&br, &bs, &cl, &cs, &m), PROTO_ACCEPT);
	/* The client cancels; its RESET crosses the broker's DATA. */
	msg(&m, PROTO_MSG_RESET, cs.id, 0);
	m.reset.code = PROTO_CODE_CANCELLED;
	cr_assert_eq(proto_conn_send(&cl, &cs, &m, NULL), 0);
	cr_assert_eq(cs.state, PROTO_STREAM_CLOSED);
	cr_assert_eq(cl.nstreams, 0);
	msg(&m, PROTO_MSG_DATA, cs.id, 0);
	m.data.len = 1000;
	m.data.ptr = zeros;
	cr_assert_eq(proto_conn_send(&br, &bs, &m, NULL), 0);
	/* The client freed its stream: the DATA is ignored but counted. */
	cr_assert_eq(proto_conn_recv(&cl, NULL, &m, NULL), PROTO_IGNORE);
	cr_assert_eq(cl.flow.recv, PROTO_CONN_WINDOW - 1000);
	cr_assert_eq(cl.flow.unacked, 1000);
	cr_assert_eq(proto_conn_consumed(&cl, NULL, 0, &ci, &si), 0);
	cr_assert_eq(ci, 0);
	cr_assert_eq(si, 0);
	/* Then the RESET reaches the broker. */
	msg(&m, PROTO_MSG_RESET, cs.id, 0);
	m.reset.code = PROTO_CODE_CANCELLED;
	cr_assert_eq(proto_conn_recv(&br, &bs, &m, NULL), PROTO_ACCEPT);
	cr_assert_eq(bs.state, PROTO_STREAM_CLOSED);
	cr_assert_eq(br.nstreams, 0);
}

Test(proto_stream, goaway_refuses_later_streams)
{
	static struct proto_msg m;
	struct proto_conn cl, br;
	struct proto_stream cs1, bs1, cs2, bs2, cs3;
	uint32_t id;

	handshake(&cl, &br);
	open_stream(&cl, &cs1, &br, &bs1, END);
	/* The client's second REQUEST crosses the broker's GOAWAY. */
	cr_assert_eq(proto_conn_next_id(&cl, &id), 0);
	proto_stream_init(&cs2, id);
	proto_stream_init(&bs2, id);
	msg(&m, PROTO_MSG_REQUEST, id, END);
	m.request.transport = PROTO_TRANSPORT_HTTP;
	cr_assert_eq(proto_conn_send(&cl, &cs2, &m, NULL), 0);
	msg(&m, PROTO_MSG_GOAWAY, 0, 0);
	m.goaway.last_stream = br.last_stream;
	cr_assert_eq(pass(&br, NULL, &cl, NULL, &m), PROTO_ACCEPT);
	cr_assert_eq(cl.state, PROTO_CONN_DRAINING);
	cr_assert_eq(br.state, PROTO_CONN_DRAINING);
	msg(&m, PROTO_MSG_REQUEST, id, END);
	m.request.transport = PROTO_TRANSPORT_HTTP;
	cr_assert_eq(proto_conn_recv(&br, &bs2, &m, NULL), PROTO_IGNORE);
	cr_assert_eq(br.nstreams, 1);
	cr_assert(proto_conn_is_refused(&cl, id));
	cr_assert_not(proto_conn_is_refused(&cl, cs1.id));
	/* Its later frames are dropped as for a closed stream. */
	msg(&m, PROTO_MSG_RESET, id, 0);
	m.reset.code = PROTO_CODE_CANCELLED;
	cr_assert_eq(pass(&cl, &cs2, &br, NULL, &m), PROTO_IGNORE);
	/* No new stream on a draining connection; the old one finishes. */
	proto_stream_init(&cs3, id + 1);
	msg(&m, PROTO_MSG_REQUEST, id + 1, END);
	m.request.transport = PROTO_TRANSPORT_HTTP;
	cr_assert_eq(proto_conn_send(&cl, &cs3, &m, NULL), EGRESS_ERR_INVALID);
	msg(&m, PROTO_MSG_RESPONSE, cs1.id, END);
	m.response.status = 204;
	cr_assert_eq(pass(&br, &bs1, &cl, &cs1, &m), PROTO_ACCEPT);
	cr_assert_eq(br.nstreams, 0);
	cr_assert_eq(cl.nstreams, 0);
}

Test(proto_stream, connection_error_closes)
{
	static struct proto_msg m;
	struct proto_conn cl, br;

	handshake(&cl, &br);
	cr_assert_eq(proto_error_init(&m, 0, PROTO_CODE_UNAVAILABLE), 0);
	cr_assert_eq(pass(&br, NULL, &cl, NULL, &m), PROTO_ACCEPT);
	cr_assert_eq(cl.state, PROTO_CONN_CLOSED);
	cr_assert_eq(br.state, PROTO_CONN_CLOSED);
	msg(&m, PROTO_MSG_PING, 0, 0);
	cr_assert_eq(proto_conn_send(&cl, NULL, &m, NULL), EGRESS_ERR_CLOSED);
	cr_assert_eq(proto_conn_recv(&br, NULL, &m, NULL), EGRESS_ERR_CLOSED);
}

Test(proto_stream, stream_cap)
{
	static struct proto_msg m;
	static struct proto_stream cs[PROTO_STREAMS_MAX + 1];
	static struct proto_stream bs[PROTO_STREAMS_MAX + 1];
	struct proto_conn cl, br;
	size_t i;

	handshake(&cl, &br);
	for (i = 0; i < PROTO_STREAMS_MAX; i++)
		open_stream(&cl, &cs[i], &br, &bs[i], END);
	proto_stream_init(&cs[i], cl.last_stream + 1);
	msg(&m, PROTO_MSG_REQUEST, cs[i].id, END);
	m.request.transport = PROTO_TRANSPORT_HTTP;
	cr_assert_eq(proto_conn_send(&cl, &cs[i], &m, NULL), EGRESS_ERR_AGAIN);
	/* Closing one frees a slot on both sides. */
	msg(&m, PROTO_MSG_RESET, cs[0].id, 0);
	m.reset.code = PROTO_CODE_CANCELLED;
	cr_assert_eq(pass(&cl, &cs[0], &br, &bs[0], &m), PROTO_ACCEPT);
	open_stream(&cl, &cs[i], &br, &bs[i], END);
	cr_assert_eq(cl.nstreams, PROTO_STREAMS_MAX);
	cr_assert_eq(br.nstreams, PROTO_STREAMS_MAX);
}

/* ---- Accounting helpers ------------------------------------------------ */

struct win_case {
	char name[32];
	int grow; /* 1: proto_window_grow, 0: consume */
	uint32_t window;
	uint32_t n;
	int rc;
	uint32_t want;
};

static struct win_case win_cases[] = {
	{ "consume-some", 0, 100, 40, 0, 60 },
	{ "consume-all", 0, 100, 100, 0, 0 },
	{ "consume-zero", 0, 0, 0, 0, 0 },
	{ "consume-beyond", 0, 100, 101, EGRESS_ERR_PROTOCOL, 100 },
	{ "consume-from-empty", 0, 0, 1, EGRESS_ERR_PROTOCOL, 0 },
	{ "grow-some", 1, 100, 40, 0, 140 },
	{ "grow-to-max", 1, 1, PROTO_WINDOW_MAX - 1, 0, PROTO_WINDOW_MAX },
	{ "grow-past-max", 1, 1, PROTO_WINDOW_MAX, EGRESS_ERR_PROTOCOL, 1 },
	{ "grow-at-max", 1, PROTO_WINDOW_MAX, 1, EGRESS_ERR_PROTOCOL,
	    PROTO_WINDOW_MAX },
	{ "grow-huge", 1, 0, 0xffffffffU, EGRESS_ERR_PROTOCOL, 0 },
	{ "grow-zero", 1, 100, 0, EGRESS_ERR_PROTOCOL, 100 },
};

ParameterizedTestParameters(proto_stream, windows)
{
	return cr_make_param_array(struct win_case, win_cases,
	    sizeof(win_cases) / sizeof(win_cases[0]));
}

ParameterizedTest(struct win_case *c, proto_stream, windows)
{
	uint32_t w = c->window;
	int rc;

	rc = c->grow ? proto_window_grow(&w, c->n) :
		       proto_window_consume(&w, c->n);
	cr_assert_eq(rc, c->rc, "%s: rc %d", c->name, rc);
	cr_assert_eq(w, c->want, "%s: window %u", c->name, w);
}

Test(proto_stream, consumed_thresholds)
{
	struct proto_conn c;
	struct proto_stream s;
	uint32_t ci, si;

	proto_conn_init(&c, PROTO_ROLE_BROKER);
	proto_stream_init(&s, 1);
	s.state = PROTO_STREAM_OPEN;
	cr_assert_eq(proto_conn_consumed(&c, &s, PROTO_STREAM_WINDOW / 2 - 1,
			 &ci, &si),
	    0);
	cr_assert_eq(ci, 0);
	cr_assert_eq(si, 0);
	cr_assert_eq(proto_conn_consumed(&c, &s, 1, &ci, &si), 0);
	cr_assert_eq(si, PROTO_STREAM_WINDOW / 2);
	cr_assert_eq(ci, 0);
	/* Not sent yet: still due next time. */
	cr_assert_eq(proto_conn_consumed(&c, &s, 0, &ci, &si), 0);
	cr_assert_eq(si, PROTO_STREAM_WINDOW / 2);
	/* A stream whose peer has ended needs no more credit. */
	s.state = PROTO_STREAM_HALF_CLOSED_REMOTE;
	cr_assert_eq(proto_conn_consumed(&c, &s, PROTO_CONN_WINDOW / 2, &ci,
			 &si),
	    0);
	cr_assert_eq(si, 0);
	cr_assert_eq(ci, PROTO_CONN_WINDOW / 2 + PROTO_STREAM_WINDOW / 2);
	cr_assert_eq(proto_conn_consumed(&c, NULL, PROTO_WINDOW_MAX, &ci, &si),
	    EGRESS_ERR_INVALID);
}

Test(proto_stream, sendable_and_ids)
{
	struct proto_conn c;
	struct proto_stream s;
	uint32_t id = 0;

	proto_conn_init(&c, PROTO_ROLE_CLIENT);
	proto_stream_init(&s, 1);
	cr_assert_eq(proto_conn_sendable(&c, &s), 0);
	cr_assert_eq(proto_conn_sendable(&c, NULL), 0);
	c.state = PROTO_CONN_OPEN;
	s.state = PROTO_STREAM_OPEN;
	cr_assert_eq(proto_conn_sendable(&c, &s), 0); /* no head yet */
	s.local_head = 1;
	cr_assert_eq(proto_conn_sendable(&c, &s), PROTO_DATA_MAX);
	s.flow.send = 7;
	cr_assert_eq(proto_conn_sendable(&c, &s), 7);
	c.flow.send = 3;
	cr_assert_eq(proto_conn_sendable(&c, &s), 3);
	s.state = PROTO_STREAM_HALF_CLOSED_LOCAL;
	cr_assert_eq(proto_conn_sendable(&c, &s), 0);

	cr_assert_eq(proto_conn_next_id(&c, &id), 0);
	cr_assert_eq(id, 1);
	c.last_stream = PROTO_STREAM_ID_MAX - 1;
	cr_assert_eq(proto_conn_next_id(&c, &id), 0);
	cr_assert_eq(id, PROTO_STREAM_ID_MAX);
	c.last_stream = PROTO_STREAM_ID_MAX;
	id = 5;
	cr_assert_eq(proto_conn_next_id(&c, &id), EGRESS_ERR_TOO_BIG);
	cr_assert_eq(id, 5);
	cr_assert_not(proto_conn_is_refused(&c, PROTO_STREAM_ID_MAX));
}
