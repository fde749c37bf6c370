/* SPDX-License-Identifier: ISC */
/*
 * EVA harness: the state table and flow control. From proto_conn_init()
 * of either role, a bounded loop of STEPS frames of any content (any
 * type, flags, stream id and field values), each received or sent on one
 * stream slot that is fresh, the previous one or NULL, through
 * proto_conn_recv() and proto_conn_send(), with proto_conn_sendable(),
 * proto_conn_consumed(), proto_conn_next_id() and proto_conn_is_refused()
 * between frames. Then every function once on a connection and a stream
 * of any bytes but for their state bytes, which hold any value of their
 * enum (the caller's storage only ever holds those), and
 * proto_window_consume()
 * and proto_window_grow() on any window and amount.
 * prove: sources proto/conn.c
 */
#include "__fc_builtin.h"

#include "proto/proto.h"

#define STEPS 64

static struct proto_msg m;

static void
step(struct proto_conn *c, struct proto_stream *s)
{
	enum proto_fault f;
	uint32_t ci, si, id;

	m.type = (uint8_t)Frama_C_unsigned_char_interval(0, 255);
	m.flags = (uint8_t)Frama_C_unsigned_char_interval(0, 255);
	m.stream = Frama_C_unsigned_int_interval(0, 0xffffffffU);
	Frama_C_make_unknown((char *)&m.hello, sizeof(m.request));
	m.data.len = Frama_C_size_t_interval(0, PROTO_PAYLOAD_MAX + 1);
	if (Frama_C_nondet(0, 1))
		(void)proto_conn_recv(c, s, &m, &f);
	else
		(void)proto_conn_send(c, s, &m, &f);
	(void)proto_conn_sendable(c, s);
	(void)proto_conn_consumed(c, s,
	    Frama_C_unsigned_int_interval(0, 0xffffffffU), &ci, &si);
	(void)proto_conn_next_id(c, &id);
	(void)proto_conn_is_refused(c,
	    Frama_C_unsigned_int_interval(0, 0xffffffffU));
}

int
main(void)
{
	struct proto_conn c;
	struct proto_stream st, *s;
	uint32_t w;
	int i;

	proto_conn_init(&c,
	    Frama_C_nondet(PROTO_ROLE_CLIENT, PROTO_ROLE_BROKER));
	proto_stream_init(&st, 1);
	for (i = 0; i < STEPS; i++) {
		if (Frama_C_nondet(0, 1))
			proto_stream_init(&st,
			    Frama_C_unsigned_int_interval(0, 0xffffffffU));
		s = Frama_C_nondet_ptr(&st, NULL);
		step(&c, s);
	}

	Frama_C_make_unknown((char *)&c, sizeof(c));
	Frama_C_make_unknown((char *)&st, sizeof(st));
	c.state = (uint8_t)Frama_C_unsigned_char_interval(PROTO_CONN_START,
	    PROTO_CONN_CLOSED);
	st.state = (uint8_t)Frama_C_unsigned_char_interval(PROTO_STREAM_IDLE,
	    PROTO_STREAM_CLOSED);
	s = Frama_C_nondet_ptr(&st, NULL);
	step(&c, s);
	(void)proto_conn_recv(&c, s, &m, NULL);
	(void)proto_conn_send(&c, s, &m, NULL);

	w = Frama_C_unsigned_int_interval(0, 0xffffffffU);
	(void)proto_window_consume(&w,
	    Frama_C_unsigned_int_interval(0, 0xffffffffU));
	(void)proto_window_grow(&w,
	    Frama_C_unsigned_int_interval(0, 0xffffffffU));
	return 0;
}
