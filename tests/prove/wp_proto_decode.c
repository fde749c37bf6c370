/* SPDX-License-Identifier: ISC */
/*
 * WP: the frame header decoder and the payload readers, against the ACSL
 * contracts next to them in proto/proto.c. proto_hdr_decode() reads only
 * buf[0 .. len) and accepts no payload length over PROTO_PAYLOAD_MAX;
 * each reader (rd_u8, rd_u16, rd_u32, rd_str) reads only r->p[r->off ..
 * r->len) and leaves r->off <= r->len; get16/get32 read their 2 or 4
 * bytes; hdr_check and fail have the effects stated. Every memory access
 * and arithmetic operation in these functions is proven free of runtime
 * errors, for every length and every content.
 * prove: sources proto/proto.c
 * prove: functions get16,get32,fail,hdr_check,rd_u8,rd_u16,rd_u32,rd_str,proto_hdr_decode
 */
typedef int wp_proto_decode_unit;
