/* SPDX-License-Identifier: ISC */
/*
 * The per-connection state machine and flow-control accounting shared by
 * the broker and the shim. Two tables decide what is valid: conn_rules
 * says, per role and message type, in which connection states a frame may
 * be sent and received (a zero mask: never in that direction); stream_rules
 * says, per stream-level type, in which stream states it may be sent and
 * received and how it relates to the stream's head (REQUEST or RESPONSE).
 * Every check runs before any state changes, so a refused frame leaves the
 * connection and the stream as they were. docs/protocol.md prints both
 * tables; keep them in step.
 */
#include <stddef.h>
#include <stdint.h>

#include <egress/error.h>

#include "proto/proto.h"

#define TYPE_LAST PROTO_MSG_STARTTLS

#define CS(x)	  (1U << (x))
#define C_START	  CS(PROTO_CONN_START)
#define C_HSENT	  CS(PROTO_CONN_HELLO_SENT)
#define C_HRECV	  CS(PROTO_CONN_HELLO_RECEIVED)
#define C_LIVE	  (CS(PROTO_CONN_OPEN) | CS(PROTO_CONN_DRAINING))

/* Connection states in which a type may be sent / received. */
struct conn_rule {
	uint8_t send;
	uint8_t recv;
};

static const struct conn_rule conn_rules[3][TYPE_LAST + 1] = {
	[PROTO_ROLE_CLIENT] = {
		[PROTO_MSG_HELLO] = { C_START, C_HSENT },
		[PROTO_MSG_REQUEST] = { CS(PROTO_CONN_OPEN), 0 },
		[PROTO_MSG_RESPONSE] = { 0, C_LIVE },
		[PROTO_MSG_DATA] = { C_LIVE, C_LIVE },
		[PROTO_MSG_TRAILERS] = { C_LIVE, C_LIVE },
		[PROTO_MSG_WINDOW_UPDATE] = { C_LIVE, C_LIVE },
		[PROTO_MSG_RESET] = { C_LIVE, C_LIVE },
		[PROTO_MSG_ERROR] = { 0, C_HSENT | C_LIVE },
		[PROTO_MSG_GOAWAY] = { 0, C_LIVE },
		[PROTO_MSG_PING] = { C_LIVE, C_LIVE },
		[PROTO_MSG_PONG] = { C_LIVE, C_LIVE },
		[PROTO_MSG_WS_CONTROL] = { C_LIVE, C_LIVE },
		[PROTO_MSG_STARTTLS] = { C_LIVE, C_LIVE },
	},
	[PROTO_ROLE_BROKER] = {
		[PROTO_MSG_HELLO] = { C_HRECV, C_START },
		[PROTO_MSG_REQUEST] = { 0, C_LIVE },
		[PROTO_MSG_RESPONSE] = { C_LIVE, 0 },
		[PROTO_MSG_DATA] = { C_LIVE, C_LIVE },
		[PROTO_MSG_TRAILERS] = { C_LIVE, C_LIVE },
		[PROTO_MSG_WINDOW_UPDATE] = { C_LIVE, C_LIVE },
		[PROTO_MSG_RESET] = { C_LIVE, C_LIVE },
		[PROTO_MSG_ERROR] = { C_HRECV | C_LIVE, 0 },
		[PROTO_MSG_GOAWAY] = { C_LIVE, 0 },
		[PROTO_MSG_PING] = { C_LIVE, C_LIVE },
		[PROTO_MSG_PONG] = { C_LIVE, C_LIVE },
		[PROTO_MSG_WS_CONTROL] = { C_LIVE, C_LIVE },
		[PROTO_MSG_STARTTLS] = { C_LIVE, C_LIVE },
	},
};

#define SS(x)  (1U << (x))
#define S_IDLE SS(PROTO_STREAM_IDLE)
#define S_OPEN SS(PROTO_STREAM_OPEN)
#define S_HCL  SS(PROTO_STREAM_HALF_CLOSED_LOCAL)
#define S_HCR  SS(PROTO_STREAM_HALF_CLOSED_REMOTE)

enum head_rule {
	HEAD_ANY = 0,	/* unrelated to the head */
	HEAD_IS = 1,	/* is the head: only once per direction */
	HEAD_NEEDS = 2, /* only after the head of its direction */
};

/* Stream states (local view) in which a type may be received / sent. */
struct stream_rule {
	uint8_t recv;
	uint8_t send;
	uint8_t head; /* enum head_rule */
};

static const struct stream_rule stream_rules[TYPE_LAST + 1] = {
	[PROTO_MSG_REQUEST] = { S_IDLE, S_IDLE, HEAD_IS },
	[PROTO_MSG_RESPONSE] = { S_OPEN | S_HCL, S_OPEN | S_HCR, HEAD_IS },
	[PROTO_MSG_DATA] = { S_OPEN | S_HCL, S_OPEN | S_HCR, HEAD_NEEDS },
	[PROTO_MSG_TRAILERS] = { S_OPEN | S_HCL, S_OPEN | S_HCR, HEAD_NEEDS },
	[PROTO_MSG_WINDOW_UPDATE] = { S_OPEN | S_HCL | S_HCR,
	    S_OPEN | S_HCL | S_HCR, HEAD_ANY },
	[PROTO_MSG_RESET] = { S_OPEN | S_HCL | S_HCR, S_OPEN | S_HCL | S_HCR,
	    HEAD_ANY },
	[PROTO_MSG_ERROR] = { S_OPEN | S_HCL | S_HCR, S_OPEN | S_HCL | S_HCR,
	    HEAD_ANY },
	[PROTO_MSG_WS_CONTROL] = { S_OPEN | S_HCL, S_OPEN | S_HCR,
	    HEAD_NEEDS },
	[PROTO_MSG_STARTTLS] = { S_OPEN | S_HCL, S_OPEN | S_HCR, HEAD_NEEDS },
};

/*
 * The rules of websocket streams (version 2): DATA carries messages and
 * never END_STREAM, TRAILERS never appear, WS_CONTROL only there; on any
 * other stream, DATA carries none of the message flags. Return the fault
 * or PROTO_FAULT_NONE.
 */
static enum proto_fault
messages_check(const struct proto_stream *s, const struct proto_msg *m)
{
	const uint8_t msg_flags = PROTO_FLAG_MSG_END | PROTO_FLAG_BINARY;

	if (s->messages)
		return (m->type == PROTO_MSG_DATA &&
			   (m->flags & PROTO_FLAG_END_STREAM)) ||
			m->type == PROTO_MSG_TRAILERS ||
			m->type == PROTO_MSG_STARTTLS ?
		    PROTO_FAULT_MESSAGES :
		    PROTO_FAULT_NONE;
	return m->type == PROTO_MSG_WS_CONTROL ||
		(m->type == PROTO_MSG_DATA && (m->flags & msg_flags)) ?
	    PROTO_FAULT_MESSAGES :
	    PROTO_FAULT_NONE;
}

/*
 * The rules of STARTTLS (version 2): only the client asks, once, after
 * both heads (the stream is connected); only the broker answers, once,
 * what was asked. While the answer is due the client sends no DATA or
 * TRAILERS and the broker sends no DATA; a client still receives the
 * broker's DATA sent before the request reached it (they crossed).
 * from_client: the frame's sender is the client; sending: this side
 * sends it. Return the fault or PROTO_FAULT_NONE.
 */
static enum proto_fault
upgrade_check(const struct proto_stream *s, const struct proto_msg *m,
    int from_client, int sending)
{
	if (m->type == PROTO_MSG_STARTTLS) {
		if (!s->local_head || !s->remote_head)
			return PROTO_FAULT_STREAM_STATE;
		return s->upgrade ==
			(from_client ? PROTO_UPGRADE_NONE :
				       PROTO_UPGRADE_ASKED) ?
		    PROTO_FAULT_NONE :
		    PROTO_FAULT_UPGRADE;
	}
	if (s->upgrade != PROTO_UPGRADE_ASKED)
		return PROTO_FAULT_NONE;
	if (from_client &&
	    (m->type == PROTO_MSG_DATA || m->type == PROTO_MSG_TRAILERS))
		return PROTO_FAULT_UPGRADE;
	if (!from_client && sending && m->type == PROTO_MSG_DATA)
		return PROTO_FAULT_UPGRADE;
	return PROTO_FAULT_NONE;
}

static void
upgrade_apply(struct proto_stream *s, const struct proto_msg *m)
{
	if (m->type == PROTO_MSG_STARTTLS)
		s->upgrade = s->upgrade == PROTO_UPGRADE_NONE ?
		    PROTO_UPGRADE_ASKED :
		    PROTO_UPGRADE_DONE;
}

static int
fail(enum proto_fault *reterr, enum proto_fault f, int err)
{
	if (reterr != NULL)
		*reterr = f;
	return err;
}

static int
is_pre_open(const struct proto_conn *c)
{
	return c->state == PROTO_CONN_START ||
	    c->state == PROTO_CONN_HELLO_SENT ||
	    c->state == PROTO_CONN_HELLO_RECEIVED;
}

static void
stream_close(struct proto_conn *c, struct proto_stream *s)
{
	if (s->state != PROTO_STREAM_IDLE && s->state != PROTO_STREAM_CLOSED)
		c->nstreams--;
	s->state = PROTO_STREAM_CLOSED;
}

/* The peer sent END_STREAM. */
static void
stream_remote_end(struct proto_conn *c, struct proto_stream *s)
{
	if (s->state == PROTO_STREAM_OPEN)
		s->state = PROTO_STREAM_HALF_CLOSED_REMOTE;
	else
		stream_close(c, s);
}

/* We sent END_STREAM. */
static void
stream_local_end(struct proto_conn *c, struct proto_stream *s)
{
	if (s->state == PROTO_STREAM_OPEN)
		s->state = PROTO_STREAM_HALF_CLOSED_LOCAL;
	else
		stream_close(c, s);
}

static int
fits(uint32_t window, uint32_t inc)
{
	return inc <= PROTO_WINDOW_MAX && window <= PROTO_WINDOW_MAX - inc;
}

void
proto_conn_init(struct proto_conn *c, enum proto_role role)
{
	c->role = (uint8_t)role;
	c->state = PROTO_CONN_START;
	c->offered = 0;
	c->version = 0;
	c->last_stream = 0;
	c->goaway_last = PROTO_STREAM_ID_MAX;
	c->nstreams = 0;
	c->flow.send = PROTO_CONN_WINDOW;
	c->flow.recv = PROTO_CONN_WINDOW;
	c->flow.unacked = 0;
}

void
proto_stream_init(struct proto_stream *s, uint32_t id)
{
	s->id = id;
	s->state = PROTO_STREAM_IDLE;
	s->local_head = 0;
	s->remote_head = 0;
	s->messages = 0;
	s->upgrade = PROTO_UPGRADE_NONE;
	s->flow.send = PROTO_STREAM_WINDOW;
	s->flow.recv = PROTO_STREAM_WINDOW;
	s->flow.unacked = 0;
}

/* Connection-level (stream 0) frames received. */
static int
recv_conn(struct proto_conn *c, const struct proto_msg *m,
    enum proto_fault *reterr)
{
	switch (m->type) {
	case PROTO_MSG_HELLO:
		if (c->role == PROTO_ROLE_BROKER) {
			c->offered = m->hello.version;
			c->state = PROTO_CONN_HELLO_RECEIVED;
			return PROTO_ACCEPT;
		}
		/* The broker must choose a version the client offered. */
		if (m->hello.version < PROTO_VERSION_MIN ||
		    m->hello.version > c->offered)
			return fail(reterr, PROTO_FAULT_VALUE,
			    EGRESS_ERR_PROTOCOL);
		c->version = m->hello.version;
		c->state = PROTO_CONN_OPEN;
		return PROTO_ACCEPT;
	case PROTO_MSG_ERROR:
		c->state = PROTO_CONN_CLOSED;
		return PROTO_ACCEPT;
	case PROTO_MSG_WINDOW_UPDATE:
		if (!fits(c->flow.send, m->window_update.increment))
			return fail(reterr, PROTO_FAULT_WINDOW_OVERFLOW,
			    EGRESS_ERR_PROTOCOL);
		c->flow.send += m->window_update.increment;
		return PROTO_ACCEPT;
	case PROTO_MSG_GOAWAY:
		if (m->goaway.last_stream > c->last_stream ||
		    m->goaway.last_stream > c->goaway_last)
			return fail(reterr, PROTO_FAULT_VALUE,
			    EGRESS_ERR_PROTOCOL);
		c->goaway_last = m->goaway.last_stream;
		c->state = PROTO_CONN_DRAINING;
		return PROTO_ACCEPT;
	case PROTO_MSG_PING:
	case PROTO_MSG_PONG:
		return PROTO_ACCEPT;
	default:
		return fail(reterr, PROTO_FAULT_STREAM_ID,
		    EGRESS_ERR_PROTOCOL);
	}
}

static int
recv_request(struct proto_conn *c, struct proto_stream *s,
    const struct proto_msg *m, enum proto_fault *reterr)
{
	if (m->stream <= c->last_stream)
		return fail(reterr, PROTO_FAULT_STREAM_REUSED,
		    EGRESS_ERR_PROTOCOL);
	if (s == NULL || s->id != m->stream || s->state != PROTO_STREAM_IDLE)
		return fail(reterr, PROTO_FAULT_NONE, EGRESS_ERR_INVALID);
	if (m->stream > c->goaway_last) {
		/* Refused by our GOAWAY: the client will retry elsewhere. */
		c->last_stream = m->stream;
		return PROTO_IGNORE;
	}
	if (c->nstreams >= PROTO_STREAMS_MAX)
		return fail(reterr, PROTO_FAULT_STREAMS, EGRESS_ERR_PROTOCOL);
	c->last_stream = m->stream;
	c->nstreams++;
	s->state = PROTO_STREAM_OPEN;
	s->remote_head = 1;
	s->messages = c->version >= PROTO_VERSION_WS &&
	    m->request.transport == PROTO_TRANSPORT_WEBSOCKET;
	if (m->flags & PROTO_FLAG_END_STREAM)
		stream_remote_end(c, s);
	return PROTO_ACCEPT;
}

/*
 * The connection-level checks both directions share: the connection is
 * open, the type exists, this role may receive (send = 0) or send it in
 * the connection's state, and a stream frame names a stream the type may
 * have. A peer's violation is EGRESS_ERR_PROTOCOL; our own caller's is
 * EGRESS_ERR_INVALID. Return 0 when the frame passes.
 */
static int
conn_check(const struct proto_conn *c, const struct proto_msg *m, int send,
    enum proto_fault *reterr_fault)
{
	int err = send ? EGRESS_ERR_INVALID : EGRESS_ERR_PROTOCOL;
	uint8_t mask;

	if (c->state == PROTO_CONN_CLOSED)
		return EGRESS_ERR_CLOSED;
	if (m->type == 0 || m->type > TYPE_LAST ||
	    (c->role != PROTO_ROLE_CLIENT && c->role != PROTO_ROLE_BROKER))
		return fail(reterr_fault, PROTO_FAULT_TYPE,
		    EGRESS_ERR_INVALID);
	if (c->version < PROTO_VERSION_WS && !is_pre_open(c) &&
	    (m->type == PROTO_MSG_WS_CONTROL ||
		m->type == PROTO_MSG_STARTTLS ||
		(m->type == PROTO_MSG_DATA &&
		    (m->flags & (PROTO_FLAG_MSG_END | PROTO_FLAG_BINARY)))))
		return fail(reterr_fault, PROTO_FAULT_NOT_NEGOTIATED, err);
	mask = send ? conn_rules[c->role][m->type].send :
		      conn_rules[c->role][m->type].recv;
	if (mask == 0)
		return fail(reterr_fault, PROTO_FAULT_DIRECTION, err);
	if ((mask & CS(c->state)) == 0 || (is_pre_open(c) && m->stream != 0))
		return fail(reterr_fault, PROTO_FAULT_CONN_STATE, err);
	/* A frame is written in version 1 .. the negotiated one (1 until
	 * the versions are agreed). */
	if ((m->version == 0 ? 1u : m->version) >
	    (is_pre_open(c) || c->version == 0 ? 1u : c->version))
		return fail(reterr_fault, PROTO_FAULT_VERSION, err);
	if (m->stream != 0 &&
	    (send ? stream_rules[m->type].send : stream_rules[m->type].recv) ==
		0)
		return fail(reterr_fault, PROTO_FAULT_STREAM_ID, err);
	return 0;
}

int
proto_conn_recv(struct proto_conn *c, struct proto_stream *s,
    const struct proto_msg *m, enum proto_fault *reterr_fault)
{
	const struct stream_rule *sr;
	int rv;

	if ((rv = conn_check(c, m, 0, reterr_fault)) != 0)
		return rv;
	if (m->stream == 0)
		return recv_conn(c, m, reterr_fault);
	if (m->type == PROTO_MSG_REQUEST)
		return recv_request(c, s, m, reterr_fault);

	if (s != NULL && s->id != m->stream)
		return fail(reterr_fault, PROTO_FAULT_NONE,
		    EGRESS_ERR_INVALID);
	if (m->stream > c->last_stream)
		return fail(reterr_fault, PROTO_FAULT_STREAM_IDLE,
		    EGRESS_ERR_PROTOCOL);
	if (s == NULL || s->state == PROTO_STREAM_CLOSED) {
		/*
		 * A closed (or never accepted) stream: frames may still be in
		 * flight after a RESET or ERROR crossed them. Drop them, but
		 * DATA still counts against the connection window, and is
		 * credited back as consumed at once.
		 */
		if (m->type == PROTO_MSG_DATA) {
			if (m->data.len > c->flow.recv)
				return fail(reterr_fault,
				    PROTO_FAULT_WINDOW_EXCEEDED,
				    EGRESS_ERR_PROTOCOL);
			if (!fits(c->flow.unacked, (uint32_t)m->data.len))
				return fail(reterr_fault,
				    PROTO_FAULT_WINDOW_OVERFLOW,
				    EGRESS_ERR_PROTOCOL);
			c->flow.recv -= (uint32_t)m->data.len;
			c->flow.unacked += (uint32_t)m->data.len;
		}
		return PROTO_IGNORE;
	}
	if (s->state == PROTO_STREAM_IDLE)
		return fail(reterr_fault, PROTO_FAULT_NONE,
		    EGRESS_ERR_INVALID);

	sr = &stream_rules[m->type];
	if ((sr->recv & SS(s->state)) == 0 ||
	    (sr->head == HEAD_IS && s->remote_head) ||
	    (sr->head == HEAD_NEEDS && !s->remote_head))
		return fail(reterr_fault, PROTO_FAULT_STREAM_STATE,
		    EGRESS_ERR_PROTOCOL);
	if (messages_check(s, m) != PROTO_FAULT_NONE)
		return fail(reterr_fault, messages_check(s, m),
		    EGRESS_ERR_PROTOCOL);
	if (upgrade_check(s, m, c->role == PROTO_ROLE_BROKER, 0) !=
	    PROTO_FAULT_NONE)
		return fail(reterr_fault,
		    upgrade_check(s, m, c->role == PROTO_ROLE_BROKER, 0),
		    EGRESS_ERR_PROTOCOL);

	switch (m->type) {
	case PROTO_MSG_RESPONSE:
		s->remote_head = 1;
		break;
	case PROTO_MSG_DATA:
		if (m->data.len > s->flow.recv || m->data.len > c->flow.recv)
			return fail(reterr_fault, PROTO_FAULT_WINDOW_EXCEEDED,
			    EGRESS_ERR_PROTOCOL);
		s->flow.recv -= (uint32_t)m->data.len;
		c->flow.recv -= (uint32_t)m->data.len;
		break;
	case PROTO_MSG_WINDOW_UPDATE:
		if (!fits(s->flow.send, m->window_update.increment))
			return fail(reterr_fault, PROTO_FAULT_WINDOW_OVERFLOW,
			    EGRESS_ERR_PROTOCOL);
		s->flow.send += m->window_update.increment;
		return PROTO_ACCEPT;
	case PROTO_MSG_RESET:
	case PROTO_MSG_ERROR:
		stream_close(c, s);
		return PROTO_ACCEPT;
	case PROTO_MSG_STARTTLS:
		upgrade_apply(s, m);
		return PROTO_ACCEPT;
	}
	if (m->flags & PROTO_FLAG_END_STREAM)
		stream_remote_end(c, s);
	return PROTO_ACCEPT;
}

/* Connection-level (stream 0) frames sent. */
static int
send_conn(struct proto_conn *c, const struct proto_msg *m,
    enum proto_fault *reterr)
{
	uint32_t inc;

	switch (m->type) {
	case PROTO_MSG_HELLO:
		if (c->role == PROTO_ROLE_CLIENT) {
			if (m->hello.version < PROTO_VERSION_MIN ||
			    m->hello.version > PROTO_VERSION)
				return fail(reterr, PROTO_FAULT_VALUE,
				    EGRESS_ERR_INVALID);
			c->offered = m->hello.version;
			c->state = PROTO_CONN_HELLO_SENT;
			return 0;
		}
		if (m->hello.version == 0 ||
		    m->hello.version != proto_version_choose(c->offered))
			return fail(reterr, PROTO_FAULT_VALUE,
			    EGRESS_ERR_INVALID);
		c->version = m->hello.version;
		c->state = PROTO_CONN_OPEN;
		return 0;
	case PROTO_MSG_ERROR:
		c->state = PROTO_CONN_CLOSED;
		return 0;
	case PROTO_MSG_WINDOW_UPDATE:
		inc = m->window_update.increment;
		if (inc == 0 || !fits(c->flow.recv, inc))
			return fail(reterr, PROTO_FAULT_WINDOW_OVERFLOW,
			    EGRESS_ERR_INVALID);
		c->flow.recv += inc;
		c->flow.unacked -= inc < c->flow.unacked ?
		    inc :
		    c->flow.unacked;
		return 0;
	case PROTO_MSG_GOAWAY:
		if (m->goaway.last_stream > c->last_stream ||
		    m->goaway.last_stream > c->goaway_last)
			return fail(reterr, PROTO_FAULT_VALUE,
			    EGRESS_ERR_INVALID);
		c->goaway_last = m->goaway.last_stream;
		c->state = PROTO_CONN_DRAINING;
		return 0;
	case PROTO_MSG_PING:
	case PROTO_MSG_PONG:
		return 0;
	default:
		return fail(reterr, PROTO_FAULT_STREAM_ID, EGRESS_ERR_INVALID);
	}
}

static int
send_request(struct proto_conn *c, struct proto_stream *s,
    const struct proto_msg *m, enum proto_fault *reterr)
{
	if (s == NULL || s->id != m->stream || s->state != PROTO_STREAM_IDLE)
		return fail(reterr, PROTO_FAULT_STREAM_STATE,
		    EGRESS_ERR_INVALID);
	if (m->stream <= c->last_stream)
		return fail(reterr, PROTO_FAULT_STREAM_REUSED,
		    EGRESS_ERR_INVALID);
	if (c->nstreams >= PROTO_STREAMS_MAX)
		return fail(reterr, PROTO_FAULT_STREAMS, EGRESS_ERR_AGAIN);
	c->last_stream = m->stream;
	c->nstreams++;
	s->state = PROTO_STREAM_OPEN;
	s->local_head = 1;
	s->messages = c->version >= PROTO_VERSION_WS &&
	    m->request.transport == PROTO_TRANSPORT_WEBSOCKET;
	if (m->flags & PROTO_FLAG_END_STREAM)
		stream_local_end(c, s);
	return 0;
}

int
proto_conn_send(struct proto_conn *c, struct proto_stream *s,
    const struct proto_msg *m, enum proto_fault *reterr_fault)
{
	const struct stream_rule *sr;
	uint32_t inc;
	int rv;

	if ((rv = conn_check(c, m, 1, reterr_fault)) != 0)
		return rv;
	if (m->stream == 0)
		return send_conn(c, m, reterr_fault);
	if (m->type == PROTO_MSG_REQUEST)
		return send_request(c, s, m, reterr_fault);

	if (s == NULL || s->id != m->stream)
		return fail(reterr_fault, PROTO_FAULT_STREAM_STATE,
		    EGRESS_ERR_INVALID);
	sr = &stream_rules[m->type];
	if ((sr->send & SS(s->state)) == 0 ||
	    (sr->head == HEAD_IS && s->local_head) ||
	    (sr->head == HEAD_NEEDS && !s->local_head))
		return fail(reterr_fault, PROTO_FAULT_STREAM_STATE,
		    EGRESS_ERR_INVALID);
	if (messages_check(s, m) != PROTO_FAULT_NONE)
		return fail(reterr_fault, messages_check(s, m),
		    EGRESS_ERR_INVALID);
	if (upgrade_check(s, m, c->role == PROTO_ROLE_CLIENT, 1) !=
	    PROTO_FAULT_NONE)
		return fail(reterr_fault,
		    upgrade_check(s, m, c->role == PROTO_ROLE_CLIENT, 1),
		    EGRESS_ERR_INVALID);

	switch (m->type) {
	case PROTO_MSG_RESPONSE:
		s->local_head = 1;
		break;
	case PROTO_MSG_DATA:
		if (m->data.len > s->flow.send || m->data.len > c->flow.send)
			return fail(reterr_fault, PROTO_FAULT_WINDOW_EXCEEDED,
			    EGRESS_ERR_AGAIN);
		s->flow.send -= (uint32_t)m->data.len;
		c->flow.send -= (uint32_t)m->data.len;
		break;
	case PROTO_MSG_WINDOW_UPDATE:
		inc = m->window_update.increment;
		if (inc == 0 || !fits(s->flow.recv, inc))
			return fail(reterr_fault, PROTO_FAULT_WINDOW_OVERFLOW,
			    EGRESS_ERR_INVALID);
		s->flow.recv += inc;
		s->flow.unacked -= inc < s->flow.unacked ?
		    inc :
		    s->flow.unacked;
		return 0;
	case PROTO_MSG_RESET:
	case PROTO_MSG_ERROR:
		stream_close(c, s);
		return 0;
	case PROTO_MSG_STARTTLS:
		upgrade_apply(s, m);
		return 0;
	}
	if (m->flags & PROTO_FLAG_END_STREAM)
		stream_local_end(c, s);
	return 0;
}

uint32_t
proto_conn_sendable(const struct proto_conn *c, const struct proto_stream *s)
{
	uint32_t n;

	if (s == NULL || !s->local_head ||
	    (c->state != PROTO_CONN_OPEN && c->state != PROTO_CONN_DRAINING) ||
	    (s->state != PROTO_STREAM_OPEN &&
		s->state != PROTO_STREAM_HALF_CLOSED_REMOTE))
		return 0;
	n = s->flow.send < c->flow.send ? s->flow.send : c->flow.send;
	return n < PROTO_DATA_MAX ? n : PROTO_DATA_MAX;
}

int
proto_conn_consumed(struct proto_conn *c, struct proto_stream *s, uint32_t n,
    uint32_t *ret_conn_inc, uint32_t *ret_stream_inc)
{
	uint32_t ci = 0, si = 0;
	int track;

	/* Only a stream whose peer still sends needs credit back. */
	track = s != NULL &&
	    (s->state == PROTO_STREAM_OPEN ||
		s->state == PROTO_STREAM_HALF_CLOSED_LOCAL);
	if (!fits(c->flow.unacked, n) || (track && !fits(s->flow.unacked, n)))
		return EGRESS_ERR_INVALID;
	c->flow.unacked += n;
	if (c->flow.unacked >= PROTO_CONN_WINDOW / 2)
		ci = c->flow.unacked;
	if (track) {
		s->flow.unacked += n;
		if (s->flow.unacked >= PROTO_STREAM_WINDOW / 2)
			si = s->flow.unacked;
	}
	if (ret_conn_inc != NULL)
		*ret_conn_inc = ci;
	if (ret_stream_inc != NULL)
		*ret_stream_inc = si;
	return 0;
}

int
proto_conn_next_id(const struct proto_conn *c, uint32_t *ret_id)
{
	if (c->last_stream >= PROTO_STREAM_ID_MAX)
		return EGRESS_ERR_TOO_BIG;
	*ret_id = c->last_stream + 1;
	return 0;
}

int
proto_conn_is_refused(const struct proto_conn *c, uint32_t id)
{
	return id > c->goaway_last;
}

int
proto_window_consume(uint32_t *window, uint32_t n)
{
	if (n > *window)
		return EGRESS_ERR_PROTOCOL;
	*window -= n;
	return 0;
}

int
proto_window_grow(uint32_t *window, uint32_t inc)
{
	if (inc == 0 || !fits(*window, inc))
		return EGRESS_ERR_PROTOCOL;
	*window += inc;
	return 0;
}
