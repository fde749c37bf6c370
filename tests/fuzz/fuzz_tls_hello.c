/* SPDX-License-Identifier: ISC */
/*
 * Fuzz target: the tunnel's ClientHello peek (broker/net/tls_hello.c) on
 * the first bytes a client sends, whole and cut at a length the input's
 * first two bytes pick. Invariants: nothing crashes, an OK result names a
 * NUL-terminated server name of printable ASCII when it has one, and a
 * prefix of an input that is not TLS is never said to be a whole
 * ClientHello.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "broker/net/tls_hello.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(const uint8_t *buf, size_t n)
{
	struct tls_hello h;
	size_t i, len;
	int rv;

	memset(&h, 0, sizeof(h));
	rv = tls_hello_peek(buf, n, &h);
	if (rv < 0 || rv > TLS_HELLO_BAD)
		abort();
	if (rv == TLS_HELLO_OK && h.has_sni) {
		len = strnlen(h.sni, sizeof(h.sni));
		if (len == 0 || len > TLS_HELLO_SNI_MAX)
			abort();
		for (i = 0; i < len; i++)
			if (h.sni[i] < 0x21 || h.sni[i] > 0x7e)
				abort();
	}
	if (rv == TLS_HELLO_OK && (n == 0 || buf[0] != 0x16))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t cut;

	if (size < 2)
		return 0;
	cut = ((size_t)data[0] << 8 | data[1]) % (size - 1);
	check(data + 2, size - 2);
	check(data + 2, cut);
	return 0;
}
