/* SPDX-License-Identifier: ISC */
/*
 * chunked: a strict check of the framing of a chunked body (RFC 9112,
 * 7.1), byte by byte across reads, beside the parser that decodes it.
 * Debian builds http-parser without its strict checks, so on its own it
 * takes any two bytes for the CRLF after a chunk's data, a bare LF for
 * a line end, and CR CR after a size: a body it decodes one way may be
 * read another way by whoever else sees the same bytes. Here every line
 * must end in CRLF, a size is 1 to 16 hex digits, an extension is
 * printable (or HTAB) and at most CHUNKED_EXT_MAX bytes, every chunk's
 * data is followed by CRLF, and the trailer section is lines of a
 * field-name (a token) and a colon, printable or HTAB, at most
 * HTTP1_HEAD_MAX bytes in all, ended by an empty line.
 * egress: no-alloc (nothing here allocates or does I/O)
 */
#ifndef EGRESS_NET_CHUNKED_H
#define EGRESS_NET_CHUNKED_H

#include <stddef.h>
#include <stdint.h>

#define CHUNKED_EXT_MAX 1024 /* bytes of one chunk's extensions */

struct chunked_check {
	int state;
	uint64_t left;	 /* data bytes of the current chunk still due */
	unsigned digits; /* of the current size */
	size_t ext;	 /* bytes of the current extensions */
	size_t trailers; /* bytes of the trailer section so far */
	size_t name;	 /* bytes of the current trailer's name */
	int colon;	 /* the current trailer's colon was seen */
};

/* Start checking a new body. */
void chunked_check_init(struct chunked_check *c);

/*
 * Check the n bytes at buf, which follow what earlier calls checked.
 * Return how many of them belong to the body: n while it has not ended,
 * fewer when it ended inside them (the rest follows it), or -1 when its
 * framing is bad (and from then on).
 */
long chunked_check(struct chunked_check *c, const char *buf, size_t n);

/* Answer whether the body ended (its empty last line was checked). */
int chunked_check_done(const struct chunked_check *c);

#endif /* EGRESS_NET_CHUNKED_H */
