/* SPDX-License-Identifier: ISC */
/*
 * EVA harness: proto_frame_decode() on buffers of exactly len bytes of any
 * content, for every len from 1 to 48 and for 64, 100, 300, 1000, 4096,
 * PROTO_HDR_SIZE + PROTO_DATA_MAX and PROTO_FRAME_MAX (and len 0): each
 * buffer is its own object, so any read past the len given is an alarm.
 * prove: sources proto/proto.c
 */
#include "__fc_builtin.h"

#include "proto/proto.h"

static struct proto_msg msg;

#define EXACT(n) \
	do { \
		static uint8_t b[n]; \
		Frama_C_make_unknown((char *)b, sizeof(b)); \
		(void)proto_frame_decode(b, sizeof(b), &msg, &f); \
	} while (0)

int
main(void)
{
	static uint8_t one[1];
	enum proto_fault f;

	(void)proto_frame_decode(one, 0, &msg, &f);
	EXACT(1);
	EXACT(2);
	EXACT(3);
	EXACT(4);
	EXACT(5);
	EXACT(6);
	EXACT(7);
	EXACT(8);
	EXACT(9);
	EXACT(10);
	EXACT(11);
	EXACT(12);
	EXACT(13);
	EXACT(14);
	EXACT(15);
	EXACT(16);
	EXACT(17);
	EXACT(18);
	EXACT(19);
	EXACT(20);
	EXACT(21);
	EXACT(22);
	EXACT(23);
	EXACT(24);
	EXACT(25);
	EXACT(26);
	EXACT(27);
	EXACT(28);
	EXACT(29);
	EXACT(30);
	EXACT(31);
	EXACT(32);
	EXACT(33);
	EXACT(34);
	EXACT(35);
	EXACT(36);
	EXACT(37);
	EXACT(38);
	EXACT(39);
	EXACT(40);
	EXACT(41);
	EXACT(42);
	EXACT(43);
	EXACT(44);
	EXACT(45);
	EXACT(46);
	EXACT(47);
	EXACT(48);
	EXACT(64);
	EXACT(100);
	EXACT(300);
	EXACT(1000);
	EXACT(4096);
	EXACT(65548);
	EXACT(98316);
	return 0;
}
