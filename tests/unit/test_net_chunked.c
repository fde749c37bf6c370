/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/net/chunked.c, the strict check of chunked
 * framing: well-formed bodies (extensions, trailers, a last chunk of
 * many zeros) end where their last empty line ends, whole or a byte at
 * a time; each laxity of a non-strict http-parser (any two bytes after
 * data, bare LFs, CR CR, a bare LF ending the trailers) and every bound
 * (size digits, extension bytes, trailer bytes) is refused, and a
 * refusal stays.
 */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "broker/net/chunked.h"
#include "broker/net/http1_head.h"

struct ck_case {
	char name[32];
	char body[160];
	long want; /* the body's length, or -1: refused */
};

static struct ck_case ck_cases[] = {
	{ "one-chunk", "5\r\nhello\r\n0\r\n\r\n", 15 },
	{ "two-chunks", "5\r\nhello\r\n1\r\n!\r\n0\r\n\r\n", 21 },
	{ "hex-case", "a\r\n0123456789\r\nA\r\n0123456789\r\n0\r\n\r\n", 35 },
	{ "extension", "5;name=v\r\nhello\r\n0;last\r\n\r\n", 27 },
	{ "ext-bws", "5 ;x\r\nhello\r\n0\r\n\r\n", 18 },
	{ "trailer", "5\r\nhello\r\n0\r\nX-Sum: 9\r\n\r\n", 25 },
	{ "trailer-empty-value", "0\r\nX-A:\r\n\r\n", 11 },
	{ "empty-body", "0\r\n\r\n", 5 },
	{ "zeros", "0000\r\n\r\n", 8 },
	/* What the non-strict parser lets through. */
	{ "data-then-two-bytes", "5\r\nhelloXY0\r\n\r\n", -1 },
	{ "data-then-bare-lf", "5\r\nhello\n\n0\r\n\r\n", -1 },
	{ "size-cr-cr", "0\r\r\n\r\n", -1 },
	{ "trailers-end-bare-lf", "0\r\n\n", -1 },
	{ "size-bare-lf", "5\nhello\r\n0\r\n\r\n", -1 },
	{ "trailer-bare-lf", "0\r\nX-A: 1\n\r\n", -1 },
	/* Grammar and bounds. */
	{ "no-size", "\r\nhello\r\n0\r\n\r\n", -1 },
	{ "not-hex", "g\r\n", -1 },
	{ "sign", "+5\r\nhello\r\n0\r\n\r\n", -1 },
	{ "17-digits", "00000000000000005\r\nhello\r\n0\r\n\r\n", -1 },
	{ "ext-ctl", "5;\x01\r\nhello\r\n0\r\n\r\n", -1 },
	{ "trailer-no-colon", "0\r\nX-A 1\r\n\r\n", -1 },
	{ "trailer-spaced-name", "0\r\nX-A : 1\r\n\r\n", -1 },
	{ "trailer-no-name", "0\r\n: 1\r\n\r\n", -1 },
	{ "trailer-folded", "0\r\nX-A: 1\r\n 2\r\n\r\n", -1 },
	{ "trailer-ctl", "0\r\nX-A: \x01\r\n\r\n", -1 },
};

ParameterizedTestParameters(chunked, bodies)
{
	return cr_make_param_array(struct ck_case, ck_cases,
	    sizeof(ck_cases) / sizeof(ck_cases[0]));
}

/* Whole, with bytes after it, and a byte at a time: the same verdict. */
ParameterizedTest(struct ck_case *c, chunked, bodies)
{
	struct chunked_check ck;
	char buf[200];
	size_t n = strlen(c->body), i;
	long r, at = -1;

	(void)snprintf(buf, sizeof(buf), "%sGET", c->body);
	chunked_check_init(&ck);
	r = chunked_check(&ck, buf, n + 3);
	cr_assert_eq(r, c->want, "%s: %ld, want %ld", c->name, r, c->want);
	cr_assert_eq(chunked_check_done(&ck), c->want >= 0, "%s", c->name);
	chunked_check_init(&ck);
	for (i = 0; i < n + 3 && at < 0; i++) {
		r = chunked_check(&ck, buf + i, 1);
		if (r < 0)
			break;
		if (r == 0 || chunked_check_done(&ck))
			at = (long)(i + (size_t)r);
	}
	if (c->want < 0) {
		cr_assert_lt(r, 0, "%s: a byte at a time passed", c->name);
		cr_assert_lt(chunked_check(&ck, "0\r\n\r\n", 5), 0,
		    "%s: a refusal does not stay", c->name);
	} else
		cr_assert_eq(at, c->want, "%s: a byte at a time: %ld", c->name,
		    at);
}

/* A chunk's data is skipped whole, whatever it holds, across reads. */
Test(chunked, data_is_not_looked_at)
{
	static const char data[] = "\r\n\r\n0\r\n\r\n\n\x01";
	struct chunked_check ck;

	chunked_check_init(&ck);
	cr_assert_eq(chunked_check(&ck, "c\r\n", 3), 3);
	cr_assert_eq(chunked_check(&ck, data, 6), 6);
	cr_assert_eq(chunked_check(&ck, data + 6, 6), 6);
	cr_assert_eq(chunked_check_done(&ck), 0);
	cr_assert_eq(chunked_check(&ck, "\r\n0\r\n\r\n", 7), 7);
	cr_assert(chunked_check_done(&ck));
}

Test(chunked, bounds)
{
	static char line[CHUNKED_EXT_MAX + 16];
	static char trailers[HTTP1_HEAD_MAX + 64];
	struct chunked_check ck;
	size_t n;

	/* 16 digits is the most; a size past 2^64 cannot be written. */
	chunked_check_init(&ck);
	cr_assert_eq(chunked_check(&ck, "000000000000000a\r\n", 18), 18);
	chunked_check_init(&ck);
	cr_assert_eq(chunked_check(&ck, "ffffffffffffffff\r\n", 18), 18);
	/* An extension of CHUNKED_EXT_MAX bytes, and one more. */
	n = (size_t)snprintf(line, sizeof(line), "1;");
	memset(line + n, 'e', CHUNKED_EXT_MAX - 1);
	n += CHUNKED_EXT_MAX - 1;
	chunked_check_init(&ck);
	cr_assert_eq(chunked_check(&ck, line, n), (long)n);
	cr_assert_lt(chunked_check(&ck, "e", 1), 0);
	/* Trailers of more than HTTP1_HEAD_MAX bytes in all. */
	n = (size_t)snprintf(trailers, sizeof(trailers), "0\r\n");
	while (n + 8 < sizeof(trailers))
		n += (size_t)snprintf(trailers + n, sizeof(trailers) - n,
		    "X-A: 1\r\n");
	chunked_check_init(&ck);
	cr_assert_lt(chunked_check(&ck, trailers, n), 0);
}
