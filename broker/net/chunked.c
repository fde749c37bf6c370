/* SPDX-License-Identifier: ISC */
/*
 * The strict check of chunked framing (see chunked.h): one state per
 * place in the grammar, a byte at a time, but a chunk's data skipped
 * whole.
 */
#include <string.h>

#include "broker/net/chunked.h"
#include "broker/net/http1_head.h"

enum {
	CK_SIZE0,    /* the first digit of a size */
	CK_SIZE,     /* more digits, an extension, or CR */
	CK_EXT,	     /* an extension, up to CR */
	CK_SIZE_LF,  /* the LF of a size line */
	CK_DATA,     /* data bytes */
	CK_DATA_CR,  /* the CR after the data */
	CK_DATA_LF,  /* its LF */
	CK_TRAILER0, /* a trailer's first byte, or the CR of the end */
	CK_TRAILER,  /* the rest of a trailer line, up to CR */
	CK_TRAILER_LF,
	CK_END_LF, /* the LF of the empty last line */
	CK_DONE,
	CK_BAD,
};

static int
ck_hex(unsigned char b)
{
	if (b >= '0' && b <= '9')
		return b - '0';
	if (b >= 'a' && b <= 'f')
		return b - 'a' + 10;
	if (b >= 'A' && b <= 'F')
		return b - 'A' + 10;
	return -1;
}

/* A byte of an extension or a trailer line: printable, or HTAB. */
static int
ck_text(unsigned char b)
{
	return b == '\t' || (b >= 0x20 && b != 0x7f);
}

void
chunked_check_init(struct chunked_check *c)
{
	memset(c, 0, sizeof(*c));
	c->state = CK_SIZE0;
}

int
chunked_check_done(const struct chunked_check *c)
{
	return c->state == CK_DONE;
}

/* A byte of a trailer line (after its first): name, colon, value. */
static int
ck_trailer_byte(struct chunked_check *c, unsigned char b)
{
	if (++c->trailers > HTTP1_HEAD_MAX)
		return CK_BAD;
	if (b == '\r')
		return c->colon ? CK_TRAILER_LF : CK_BAD;
	if (!c->colon) {
		if (b == ':' && c->name > 0) {
			c->colon = 1;
			return CK_TRAILER;
		}
		c->name++;
		return http1_is_tchar(b) ? CK_TRAILER : CK_BAD;
	}
	return ck_text(b) ? CK_TRAILER : CK_BAD;
}

/* The state after byte b in state s (not CK_DATA). */
static int
ck_step(struct chunked_check *c, unsigned char b)
{
	int d;

	switch (c->state) {
	case CK_SIZE0:
	case CK_SIZE:
		if ((d = ck_hex(b)) >= 0) {
			if (++c->digits > 16 ||
			    (c->left >> 60) != 0) /* would pass 2^64 */
				return CK_BAD;
			c->left = c->left << 4 | (uint64_t)d;
			return CK_SIZE;
		}
		if (c->state == CK_SIZE0)
			return CK_BAD;
		if (b == '\r')
			return CK_SIZE_LF;
		if (b == ';' || b == ' ' || b == '\t') {
			c->ext = 1;
			return CK_EXT;
		}
		return CK_BAD;
	case CK_EXT:
		if (b == '\r')
			return CK_SIZE_LF;
		return ++c->ext <= CHUNKED_EXT_MAX && ck_text(b) ?
		    CK_EXT :
		    CK_BAD;
	case CK_SIZE_LF:
		if (b != '\n')
			return CK_BAD;
		c->digits = 0;
		c->ext = 0;
		return c->left > 0 ? CK_DATA : CK_TRAILER0;
	case CK_DATA_CR:
		return b == '\r' ? CK_DATA_LF : CK_BAD;
	case CK_DATA_LF:
		return b == '\n' ? CK_SIZE0 : CK_BAD;
	case CK_TRAILER0:
		if (b == '\r')
			return CK_END_LF;
		c->name = 0;
		c->colon = 0;
		return ck_trailer_byte(c, b);
	case CK_TRAILER:
		return ck_trailer_byte(c, b);
	case CK_TRAILER_LF:
		return b == '\n' && ++c->trailers <= HTTP1_HEAD_MAX ?
		    CK_TRAILER0 :
		    CK_BAD;
	case CK_END_LF:
		return b == '\n' ? CK_DONE : CK_BAD;
	default:
		return CK_BAD;
	}
}

long
chunked_check(struct chunked_check *c, const char *buf, size_t n)
{
	size_t i = 0, k;

	while (i < n) {
		if (c->state == CK_BAD)
			return -1;
		if (c->state == CK_DONE)
			return (long)i;
		if (c->state == CK_DATA) {
			k = n - i;
			if (k > c->left)
				k = (size_t)c->left;
			c->left -= k;
			i += k;
			if (c->left == 0)
				c->state = CK_DATA_CR;
			continue;
		}
		c->state = ck_step(c, (unsigned char)buf[i++]);
	}
	if (c->state == CK_BAD)
		return -1;
	return (long)n;
}
