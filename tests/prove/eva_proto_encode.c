/* SPDX-License-Identifier: ISC */
/*
 * EVA harness: proto_encode_size() on any struct proto_msg of every type
 * with any flags, stream id, scalar field values, header count and every
 * string and DATA length of any size_t value, with every pointer to a
 * buffer of the field's maximum length or every pointer NULL (it reads no
 * string bytes);
 * proto_encode() on the same with each string and DATA length of any value
 * up to its field's bound (any combination, so header blocks over their
 * byte bound and frames over PROTO_PAYLOAD_MAX are in the domain), any
 * header count, each string pointing to a buffer of its field's maximum
 * length of any content, into a buffer of 0 to PROTO_FRAME_MAX bytes; proto_encode() and
 * proto_msg_equal() on types without strings (and type values 0 and 14
 * to 255) with any field bytes; proto_msg_equal() on two messages of the
 * same type whose strings have any length up to their bound. The version
 * byte of a message is any value too (the REQUEST's tls profile is read
 * from version 2 on).
 * prove: sources proto/proto.c
 */
#include "__fc_builtin.h"

#include "proto/proto.h"

static uint8_t out[PROTO_FRAME_MAX];
static char method[PROTO_METHOD_MAX], scheme[PROTO_SCHEME_MAX];
static char authority[PROTO_AUTHORITY_MAX], path[PROTO_PATH_MAX];
static char name[PROTO_NAME_MAX], value[PROTO_VALUE_MAX];
static char message[PROTO_MESSAGE_MAX], profile[PROTO_PROFILE_MAX];
static uint8_t data[PROTO_DATA_MAX], ctl[PROTO_WS_PAYLOAD_MAX];
static struct proto_msg a, b;

static const uint8_t types[] = {
	PROTO_MSG_HELLO,
	PROTO_MSG_REQUEST,
	PROTO_MSG_RESPONSE,
	PROTO_MSG_DATA,
	PROTO_MSG_TRAILERS,
	PROTO_MSG_WINDOW_UPDATE,
	PROTO_MSG_RESET,
	PROTO_MSG_ERROR,
	PROTO_MSG_GOAWAY,
	PROTO_MSG_PING,
	PROTO_MSG_PONG,
	PROTO_MSG_WS_CONTROL,
	PROTO_MSG_STARTTLS,
};

/* Types whose fields hold no pointer, and type 0. */
static const uint8_t plain[] = {
	0,
	PROTO_MSG_HELLO,
	PROTO_MSG_WINDOW_UPDATE,
	PROTO_MSG_RESET,
	PROTO_MSG_GOAWAY,
	PROTO_MSG_PING,
	PROTO_MSG_PONG,
};

/* s points to buf (or NULL when null), len any value or at most max. */
static void
str_set(struct proto_str *s, char *buf, size_t max, int null, int bounded)
{
	s->ptr = null ? NULL : buf;
	s->len = bounded ? Frama_C_size_t_interval(0, max) :
			   Frama_C_size_t_interval(0, SIZE_MAX);
}

/* Fill m as a message of type t with any field values. */
static void
msg_set(struct proto_msg *m, uint8_t t, int null, int bounded)
{
	size_t i;

	Frama_C_make_unknown((char *)m, sizeof(*m));
	m->type = t;
	switch (t) {
	case PROTO_MSG_REQUEST:
		str_set(&m->request.method, method, sizeof(method), null,
		    bounded);
		str_set(&m->request.scheme, scheme, sizeof(scheme), null,
		    bounded);
		str_set(&m->request.authority, authority, sizeof(authority),
		    null, bounded);
		str_set(&m->request.path, path, sizeof(path), null, bounded);
		str_set(&m->request.tls_profile, profile, sizeof(profile),
		    null, bounded);
		break;
	case PROTO_MSG_DATA:
		m->data.ptr = null ? NULL : data;
		m->data.len = bounded ?
		    Frama_C_size_t_interval(0, sizeof(data)) :
		    Frama_C_size_t_interval(0, SIZE_MAX);
		break;
	case PROTO_MSG_ERROR:
		str_set(&m->error.message, message, sizeof(message), null,
		    bounded);
		break;
	case PROTO_MSG_WS_CONTROL:
		m->ws_control.ptr = null ? NULL : ctl;
		m->ws_control.len = bounded ?
		    Frama_C_size_t_interval(0, sizeof(ctl)) :
		    Frama_C_size_t_interval(0, SIZE_MAX);
		break;
	case PROTO_MSG_STARTTLS:
		str_set(&m->starttls.tls_profile, profile, sizeof(profile),
		    null, bounded);
		break;
	}
	/* Only these types read the header list. */
	if (t != PROTO_MSG_REQUEST && t != PROTO_MSG_RESPONSE &&
	    t != PROTO_MSG_TRAILERS)
		return;
	m->nheaders = bounded ? Frama_C_size_t_interval(0, PROTO_HEADERS_MAX) :
				Frama_C_size_t_interval(0, SIZE_MAX);
	/*@ loop unroll PROTO_HEADERS_MAX; */
	for (i = 0; i < PROTO_HEADERS_MAX; i++) {
		str_set(&m->headers[i].name, name, sizeof(name), null,
		    bounded);
		str_set(&m->headers[i].value, value, sizeof(value), null,
		    bounded);
	}
}

int
main(void)
{
	enum proto_fault f;
	size_t i, size = Frama_C_size_t_interval(0, sizeof(out));

	Frama_C_make_unknown(method, sizeof(method));
	Frama_C_make_unknown(scheme, sizeof(scheme));
	Frama_C_make_unknown(authority, sizeof(authority));
	Frama_C_make_unknown(path, sizeof(path));
	Frama_C_make_unknown(name, sizeof(name));
	Frama_C_make_unknown(value, sizeof(value));
	Frama_C_make_unknown(message, sizeof(message));
	Frama_C_make_unknown(profile, sizeof(profile));
	Frama_C_make_unknown((char *)data, sizeof(data));
	Frama_C_make_unknown((char *)ctl, sizeof(ctl));

	for (i = 0; i < sizeof(types); i++) {
		msg_set(&a, types[i], 0, 0);
		(void)proto_encode_size(&a, &f);
		msg_set(&a, types[i], 1, 0);
		(void)proto_encode_size(&a, &f);

		msg_set(&a, types[i], 0, 1);
		(void)proto_encode(&a, out, size, &f);
		(void)proto_encode(&a, out, sizeof(out), NULL);
		msg_set(&b, types[i], 0, 1);
		(void)proto_msg_equal(&a, &b);
	}
	for (i = 0; i < sizeof(plain); i++) {
		Frama_C_make_unknown((char *)&a, sizeof(a));
		Frama_C_make_unknown((char *)&b, sizeof(b));
		a.type = plain[i];
		b.type = plain[i];
		(void)proto_encode(&a, out, size, &f);
		(void)proto_msg_equal(&a, &b);
	}
	Frama_C_make_unknown((char *)&a, sizeof(a));
	Frama_C_make_unknown((char *)&b, sizeof(b));
	a.type = (uint8_t)Frama_C_unsigned_char_interval(PROTO_MSG_STARTTLS +
		1,
	    255);
	(void)proto_encode(&a, out, size, &f);
	(void)proto_msg_equal(&a, &b);
	return 0;
}
