/* SPDX-License-Identifier: ISC */
/*
 * Private to policy/: IPv4 and IPv6 text forms without the C library, so
 * that every byte policy/ reads is its own code (and can be analysed with
 * the rest). policy_inet6_parse() accepts exactly what glibc's
 * inet_pton(AF_INET6) accepts and policy_inet6_format() writes exactly what
 * glibc's inet_ntop(AF_INET6) writes (RFC 5952 zero compression, embedded
 * dotted quad for IPv4-compatible and IPv4-mapped addresses);
 * tests/prove/inet_diff.c compares them with glibc.
 */
#ifndef EGRESS_POLICY_INET_H
#define EGRESS_POLICY_INET_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of the longest IPv6 text, with its NUL (INET6_ADDRSTRLEN). */
#define POLICY_INET6_TEXT 46

/*
 * Parse the IPv6 text s of len bytes (no NUL needed, no brackets). Return
 * 1 and write the 16 network-order bytes to ret, or 0 (ret unchanged).
 */
/*@ requires \valid_read(s + (0 .. len - 1));
    requires \valid(ret + (0 .. 15));
    assigns ret[0 .. 15] \from s[0 .. len - 1], len;
    ensures \result == 0 || \result == 1;
 */
int policy_inet6_parse(const char *s, size_t len, uint8_t ret[16]);

/*
 * Parse s of len bytes as glibc's inet_pton(AF_INET) does: four decimal
 * parts 0..255 without leading zeros. Return 1 and write ret, or 0 (ret
 * unchanged).
 */
/*@ requires \valid_read(s + (0 .. len - 1));
    requires \valid(ret + (0 .. 3));
    assigns ret[0 .. 3] \from s[0 .. len - 1], len;
    ensures \result == 0 || \result == 1;
 */
int policy_inet4_parse(const char *s, size_t len, uint8_t ret[4]);

/*
 * Write the canonical text of the IPv6 address a (16 bytes) into buf, with
 * a NUL. Return its length (at most POLICY_INET6_TEXT - 1), or -1 when n is
 * under POLICY_INET6_TEXT (buf unchanged).
 */
/*@ requires \valid_read(a + (0 .. 15));
    requires n >= POLICY_INET6_TEXT ==> \valid(buf + (0 .. n - 1));
    assigns buf[0 .. POLICY_INET6_TEXT - 1] \from a[0 .. 15], n;
    ensures -1 <= \result < POLICY_INET6_TEXT;
 */
int policy_inet6_format(const uint8_t a[16], char *buf, size_t n);

/*
 * Write the dotted quad of the 4 bytes a into buf (at least 16 bytes), with
 * a NUL. Return its length (7 to 15).
 */
/*@ requires \valid_read(a + (0 .. 3));
    requires \valid(buf + (0 .. 15));
    assigns buf[0 .. 15] \from a[0 .. 3];
    ensures 7 <= \result <= 15;
 */
int policy_inet4_format(const uint8_t a[4], char *buf);

#endif /* EGRESS_POLICY_INET_H */
