/* SPDX-License-Identifier: ISC */
/*
 * Fuzz target for broker/net/chunked.c: the first byte picks a step; the
 * rest is checked whole and in reads of that step. Both must give the
 * same verdict and end, an end never lies past the input, and a body
 * that ended has a last "\r\n\r\n" or "0\r\n\r\n" form: its final four
 * bytes are an empty line after a line end.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "broker/net/chunked.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct chunked_check whole, steps;
	const char *buf;
	size_t step, off = 0, k;
	long r, w, end = -1;
	int bad = 0;

	if (size < 1)
		return 0;
	step = (size_t)data[0] % 16 + 1;
	buf = (const char *)data + 1;
	size--;
	chunked_check_init(&whole);
	w = chunked_check(&whole, buf, size);
	if (w > (long)size ||
	    (w >= 0 && w < (long)size && !chunked_check_done(&whole)))
		abort();
	if (chunked_check_done(&whole) &&
	    (w < 4 || memcmp(buf + w - 4, "\r\n\r\n", 4) != 0))
		abort();
	chunked_check_init(&steps);
	while (off < size && end < 0 && !bad) {
		k = size - off < step ? size - off : step;
		r = chunked_check(&steps, buf + off, k);
		if (r < 0)
			bad = 1;
		else if (chunked_check_done(&steps))
			end = (long)off + r;
		off += k;
	}
	if (bad != (w < 0))
		abort();
	if (!bad && chunked_check_done(&whole) != (end >= 0))
		abort();
	if (end >= 0 && end != w)
		abort();
	return 0;
}
