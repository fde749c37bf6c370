/* SPDX-License-Identifier: ISC */
/*
 * EVA harness: proto_hdr_encode() with any type, flags, stream id and
 * length into a PROTO_HDR_SIZE buffer; proto_hdr_flags(),
 * proto_hdr_set_stream() and proto_hdr_add_flags() on a buffer of any
 * content of 0 to PROTO_FRAME_MAX bytes (and NULL) with any stream id and
 * flags; the name, code and message tables (proto_type_name,
 * proto_fault_str, proto_err_to_wire, proto_wire_to_err, proto_code_name,
 * proto_code_message, proto_error_init, proto_version_choose,
 * egress_strerror) on any value.
 * prove: sources proto/proto.c proto/error.c
 */
#include "__fc_builtin.h"

#include "proto/proto.h"

static uint8_t frame[PROTO_FRAME_MAX];
static struct proto_msg m;

int
main(void)
{
	uint8_t hdr[PROTO_HDR_SIZE];
	enum proto_fault f;
	size_t len = Frama_C_size_t_interval(0, sizeof(frame));
	uint32_t any = Frama_C_unsigned_int_interval(0, 0xffffffffU);
	int err = Frama_C_interval(-2147483647 - 1, 2147483647);

	(void)proto_hdr_encode(hdr,
	    (uint8_t)Frama_C_unsigned_char_interval(0, 255),
	    (uint8_t)Frama_C_unsigned_char_interval(0, 255),
	    Frama_C_unsigned_int_interval(0, 0xffffffffU),
	    Frama_C_unsigned_int_interval(0, 0xffffffffU), &f);
	(void)proto_hdr_encode(hdr, PROTO_MSG_DATA, 0, 1, 0, NULL);

	Frama_C_make_unknown((char *)frame, sizeof(frame));
	(void)proto_hdr_flags(frame, len);
	(void)proto_hdr_flags(NULL, len);
	(void)proto_hdr_set_stream(frame, len, any);
	(void)proto_hdr_set_stream(NULL, len, any);
	(void)proto_hdr_add_flags(frame, len,
	    (uint8_t)Frama_C_unsigned_char_interval(0, 255));
	(void)proto_hdr_add_flags(NULL, len, 0);

	(void)proto_type_name(any);
	(void)proto_fault_str((enum proto_fault)
		Frama_C_interval(-2147483647 - 1, 2147483647));
	(void)proto_err_to_wire(err);
	(void)proto_wire_to_err(any);
	(void)proto_code_name(any);
	(void)proto_code_message(any);
	(void)proto_error_init(&m,
	    Frama_C_unsigned_int_interval(0, 0xffffffffU), any);
	(void)proto_version_choose((uint16_t)Frama_C_unsigned_short_interval(0,
	    65535));
	(void)egress_strerror(err);
	return 0;
}
