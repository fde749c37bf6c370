/* SPDX-License-Identifier: ISC */
/*
 * Fuzz target for proto/: decodes arbitrary bytes as a stream of frames.
 * Every decoded message is re-encoded (the bytes must be identical: each
 * message has one encoding) and re-decoded (the message must be equal),
 * then fed to the state machine of a broker and of a client that sent its
 * HELLO, with a small stream table, as egressd and the shim would (the
 * client sends each REQUEST it sees instead of receiving it). The
 * broker answers each accepted REQUEST with a RESPONSE (101 for a
 * websocket stream), each WS_CONTROL with a pong or a close, each
 * STARTTLS with its answer (after which the stream must be upgraded), and
 * returns flow control credit, so the send side runs too. Invariants (stream counts,
 * window bounds, no change on a refused frame) abort on violation.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"

#define NSLOTS 8

struct side {
	struct proto_conn conn;
	struct proto_stream slot[NSLOTS];
	int used[NSLOTS];
	int dead;
};

static void
check(int cond)
{
	if (!cond)
		abort();
}

static struct proto_stream *
lookup(struct side *sd, uint32_t id)
{
	int i;

	for (i = 0; i < NSLOTS; i++)
		if (sd->used[i] && sd->slot[i].id == id)
			return &sd->slot[i];
	return NULL;
}

static int
free_slot(struct side *sd)
{
	int i;

	for (i = 0; i < NSLOTS; i++)
		if (!sd->used[i] || sd->slot[i].state == PROTO_STREAM_CLOSED)
			return i;
	return -1;
}

static void
invariants(const struct side *sd)
{
	int i, open = 0;

	check(sd->conn.nstreams <= PROTO_STREAMS_MAX);
	check(sd->conn.flow.send <= PROTO_WINDOW_MAX);
	check(sd->conn.flow.recv <= PROTO_WINDOW_MAX);
	for (i = 0; i < NSLOTS; i++) {
		if (!sd->used[i])
			continue;
		check(sd->slot[i].flow.send <= PROTO_WINDOW_MAX);
		check(sd->slot[i].flow.recv <= PROTO_WINDOW_MAX);
		if (sd->slot[i].state != PROTO_STREAM_IDLE &&
		    sd->slot[i].state != PROTO_STREAM_CLOSED)
			open++;
	}
	/* Streams that found no slot are counted but not tracked here. */
	check((uint32_t)open <= sd->conn.nstreams);
}

/* Send m from sd (result ignored: the state machine may refuse it). */
static void
try_send(struct side *sd, struct proto_stream *s, struct proto_msg *m)
{
	static uint8_t buf[PROTO_FRAME_MAX];
	struct proto_conn before = sd->conn;
	enum proto_fault f;
	int rc;

	rc = proto_conn_send(&sd->conn, s, m, &f);
	if (rc < 0) {
		// NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): unchanged means byte for byte
		check(memcmp(&before, &sd->conn, sizeof(before)) == 0);
		return;
	}
	/* What the state machine lets us send, the codec can encode. */
	check(proto_encode(m, buf, sizeof(buf), &f) > 0);
}

static void
answer(struct side *sd, struct proto_stream *s, const struct proto_msg *in)
{
	static struct proto_msg m;
	uint32_t ci = 0, si = 0;

	memset(&m, 0, sizeof(m));
	if (in->type == PROTO_MSG_REQUEST) {
		m.type = PROTO_MSG_RESPONSE;
		m.stream = in->stream;
		m.flags = in->stream & 1 ? PROTO_FLAG_END_STREAM : 0;
		m.response.status = 200;
		if (in->request.transport == PROTO_TRANSPORT_WEBSOCKET) {
			m.flags = 0;
			m.response.status = 101;
		}
		try_send(sd, s, &m);
	} else if (in->type == PROTO_MSG_WS_CONTROL && s != NULL) {
		/* Echo a ping as a pong, a close as a close. */
		m.type = PROTO_MSG_WS_CONTROL;
		m.stream = in->stream;
		m.ws_control.opcode = in->ws_control.opcode == PROTO_WS_CLOSE ?
		    PROTO_WS_CLOSE :
		    PROTO_WS_PONG;
		m.flags = m.ws_control.opcode == PROTO_WS_CLOSE ?
		    PROTO_FLAG_END_STREAM :
		    0;
		m.ws_control.code = m.ws_control.opcode == PROTO_WS_CLOSE ?
		    in->ws_control.code :
		    0;
		try_send(sd, s, &m);
	} else if (in->type == PROTO_MSG_STARTTLS && s != NULL &&
	    sd->conn.role == PROTO_ROLE_BROKER) {
		/* Asked: no client DATA until the answer, then upgraded. */
		check(s->upgrade == PROTO_UPGRADE_ASKED);
		m.type = PROTO_MSG_STARTTLS;
		m.stream = in->stream;
		m.starttls.tls_profile = in->starttls.tls_profile;
		try_send(sd, s, &m);
		check(s->upgrade == PROTO_UPGRADE_DONE);
	} else if (in->type == PROTO_MSG_DATA) {
		if (proto_conn_consumed(&sd->conn, s, (uint32_t)in->data.len,
			&ci, &si) != 0)
			return;
		m.type = PROTO_MSG_WINDOW_UPDATE;
		if (ci != 0) {
			m.window_update.increment = ci;
			try_send(sd, NULL, &m);
		}
		if (si != 0 && s != NULL) {
			m.stream = s->id;
			m.window_update.increment = si;
			try_send(sd, s, &m);
		}
	} else if (in->type == PROTO_MSG_HELLO &&
	    sd->conn.role == PROTO_ROLE_BROKER) {
		m.type = PROTO_MSG_HELLO;
		m.hello.version = proto_version_choose(sd->conn.offered);
		try_send(sd, NULL, &m);
	}
}

static void
feed(struct side *sd, const struct proto_msg *m)
{
	struct proto_stream tmp, *s = NULL, before_s;
	struct proto_conn before_c;
	enum proto_fault f;
	int rc, slot = -1;

	if (sd->dead)
		return;
	if (sd->conn.role == PROTO_ROLE_CLIENT &&
	    m->type == PROTO_MSG_REQUEST) {
		/* The client never receives REQUEST: it sends it instead. */
		slot = free_slot(sd);
		if (slot < 0)
			return;
		s = &sd->slot[slot];
		proto_stream_init(s, m->stream);
		before_c = sd->conn;
		rc = proto_conn_send(&sd->conn, s, m, &f);
		if (rc < 0)
			// NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): unchanged means byte for byte
			check(memcmp(&before_c, &sd->conn, sizeof(before_c)) ==
			    0);
		sd->used[slot] = rc == 0;
		invariants(sd);
		return;
	}
	if (m->stream != 0) {
		if (m->type == PROTO_MSG_REQUEST) {
			slot = free_slot(sd);
			s = slot >= 0 ? &sd->slot[slot] : &tmp;
			proto_stream_init(s, m->stream);
		} else
			s = lookup(sd, m->stream);
	}
	before_c = sd->conn;
	if (s != NULL)
		before_s = *s;
	rc = proto_conn_recv(&sd->conn, s, m, &f);
	/* The harness passes matching streams: never a caller bug. */
	check(rc != EGRESS_ERR_INVALID);
	if (rc < 0) {
		// NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): unchanged means byte for byte
		check(memcmp(&before_c, &sd->conn, sizeof(before_c)) == 0);
		// NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): unchanged means byte for byte
		check(s == NULL || memcmp(&before_s, s, sizeof(*s)) == 0);
		sd->dead = 1;
		return;
	}
	check(rc == PROTO_ACCEPT || rc == PROTO_IGNORE);
	if (slot >= 0)
		sd->used[slot] = rc == PROTO_ACCEPT;
	if (rc == PROTO_ACCEPT)
		answer(sd, s == &tmp ? NULL : s, m);
	if (sd->conn.state == PROTO_CONN_CLOSED)
		sd->dead = 1;
	invariants(sd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[PROTO_FRAME_MAX];
	static struct proto_msg m, m2;
	static struct side broker, client;
	enum proto_fault f;
	size_t off = 0;
	int n, n2;

	memset(&broker, 0, sizeof(broker));
	memset(&client, 0, sizeof(client));
	proto_conn_init(&broker.conn, PROTO_ROLE_BROKER);
	proto_conn_init(&client.conn, PROTO_ROLE_CLIENT);
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_HELLO;
	m.hello.version = PROTO_VERSION;
	check(proto_conn_send(&client.conn, NULL, &m, &f) == 0);

	while (off < size) {
		n = proto_frame_decode(data + off, size - off, &m, &f);
		if (n <= 0)
			break;
		check((size_t)n <= size - off && n <= PROTO_FRAME_MAX);
		n2 = proto_encode(&m, buf, sizeof(buf), &f);
		check(n2 == n);
		check(memcmp(buf, data + off, (size_t)n) == 0);
		check(proto_frame_decode(buf, (size_t)n2, &m2, &f) == n2);
		check(proto_msg_equal(&m, &m2));
		feed(&broker, &m);
		feed(&client, &m);
		off += (size_t)n;
	}
	return 0;
}
