/* SPDX-License-Identifier: ISC */
/*
 * EVA harness: proto_frame_decode() (so proto_hdr_decode() and
 * proto_payload_decode()) on every buffer of 0 to PROTO_FRAME_MAX bytes of
 * any content, then proto_payload_decode() on any header (not only one
 * proto_hdr_decode() accepted) whose payload buffer holds hdr.length
 * bytes, up to PROTO_PAYLOAD_MAX.
 * prove: sources proto/proto.c
 */
#include "__fc_builtin.h"

#include "proto/proto.h"

static uint8_t buf[PROTO_FRAME_MAX];
static struct proto_msg msg;

int
main(void)
{
	struct proto_hdr h;
	enum proto_fault f;
	size_t len = Frama_C_size_t_interval(0, sizeof(buf));

	Frama_C_make_unknown((char *)buf, sizeof(buf));
	(void)proto_frame_decode(buf, len, &msg, &f);
	(void)proto_frame_decode(buf, len, &msg, NULL);

	Frama_C_make_unknown((char *)&h, sizeof(h));
	h.length = Frama_C_unsigned_int_interval(0, PROTO_PAYLOAD_MAX);
	(void)proto_payload_decode(&h, buf, &msg, &f);
	return 0;
}
