/* SPDX-License-Identifier: ISC */
/*
 * Fuzz target: the proxy front's request parser (broker/net/http1_req.c)
 * over a client's byte stream, as broker/proxy.c drives it: find the end
 * of a head, parse it, decode its body in pieces whose size the first
 * input byte picks, and go on with the next (pipelined) request until the
 * input is used up or refused. Invariants: nothing crashes, every string
 * of a parsed head lies inside the head, the body never uses more bytes
 * than it was given, decoded body bytes never outnumber the input, and
 * a Proxy-Authorization password decodes inside its buffer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "broker/net/http1_req.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t decoded;

static void
sink(void *arg, const char *p, size_t n)
{
	volatile char c = 0;

	(void)arg;
	if (n > 0)
		c = p[n - 1]; /* touch the last byte */
	(void)c;
	decoded += n;
}

static void
check_in(const char *s, size_t n, const char *head, size_t len)
{
	if (s == NULL || (s >= head && s + n <= head + len))
		return;
	/* Outside the head only the parser's own "/" (an empty path): its
	 * length says so before a byte of it is read. */
	if (n != 1 || s[0] != '/')
		abort();
}

/* The password, if any, lies inside the decoded buffer. */
static void
basic(const struct http1_header *h)
{
	char out[300];
	const char *pw;
	size_t n;

	if (http1_req_basic_password(h->value, h->value_len, out, sizeof(out),
		&pw, &n) == 0 &&
	    (pw < out || pw + n > out + sizeof(out)))
		abort();
}

/* The end of the head found a step at a time, each call looking only at
 * what the last one had not: the one a single look finds. */
static void
head_in_steps(const char *buf, size_t n, size_t step, long whole)
{
	size_t k = 0, seen = 0;
	long hl = 0;
	int bad = 0;

	while (hl == 0 && k < n) {
		k = k + step < n ? k + step : n;
		hl = http1_req_head_len(buf, k, seen);
		bad |= http1_req_head_bad(buf, k, seen);
		if (bad != http1_req_head_bad(buf, k, 0))
			abort();
		seen = k;
	}
	if (hl != whole)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct http1_req q;
	struct http1_req_parser *p;
	const char *buf;
	size_t step, off = 0, used, k, i;
	long hl;

	if (size < 1)
		return 0;
	step = (size_t)data[0] % 64 + 1;
	buf = (const char *)data + 1;
	size--;
	if ((p = http1_req_parser_new()) == NULL)
		return 0;
	decoded = 0;
	while (off < size) {
		hl = http1_req_head_len(buf + off, size - off, 0);
		head_in_steps(buf + off, size - off, step, hl);
		if (hl <= 0)
			break;
		if (http1_req_parse_head(p, buf + off, (size_t)hl, &q, NULL) !=
		    0)
			break;
		check_in(q.method, q.method_len, buf + off, (size_t)hl);
		check_in(q.authority, q.authority_len, buf + off, (size_t)hl);
		check_in(q.path, q.path_len, buf + off, (size_t)hl);
		for (i = 0; i < q.nheaders; i++) {
			check_in(q.headers[i].name, q.headers[i].name_len,
			    buf + off, (size_t)hl);
			check_in(q.headers[i].value, q.headers[i].value_len,
			    buf + off, (size_t)hl);
			if (http1_header_is(&q.headers[i],
				"Proxy-Authorization"))
				basic(&q.headers[i]);
		}
		off += (size_t)hl;
		while (!http1_req_is_complete(p) && off < size) {
			k = size - off < step ? size - off : step;
			if (http1_req_parse_body(p, buf + off, k, sink, NULL,
				&used, NULL) != 0)
				goto out;
			if (used > k)
				abort();
			off += used;
			if (used == 0)
				goto out;
		}
		if (!http1_req_is_complete(p))
			break;
	}
out:
	if (decoded > size)
		abort();
	http1_req_parser_free(p);
	return 0;
}
