/* SPDX-License-Identifier: ISC */
/*
 * Fuzz target for egress-connect's SMTP reply scanner and its STARTTLS
 * switch (shim/connect_smtp.c): arbitrary bytes from the server around
 * the go-ahead. Invariants: a reply found is within the input, a prefix
 * of it is not yet a reply, scanning the reply alone finds the same
 * reply; the switch allows the upgrade only for exactly one 220 reply
 * with nothing after it, and any byte after a 220 is an injection.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shim/connect_smtp.h"

static void
check(int cond)
{
	if (!cond)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	int code = 0, code2 = 0, len;
	enum smtp_go go;

	len = smtp_reply_scan(p, size, &code);
	check(len >= -1 && (len < 0 || (size_t)len <= size));
	go = smtp_starttls_answer(p, size);
	if (len > 0) {
		check(code >= 200 && code <= 599);
		check(p[len - 1] == '\n');
		check(smtp_reply_scan(p, (size_t)len, &code2) == len);
		check(code2 == code);
		check(smtp_reply_scan(p, (size_t)len - 1, &code2) <= 0);
		if (code != 220)
			check(go == SMTP_GO_REFUSED);
		else if ((size_t)len == size)
			check(go == SMTP_GO_UPGRADE);
		else
			check(go == SMTP_GO_INJECTED);
	} else
		check(go == (len == 0 ? SMTP_GO_MORE : SMTP_GO_BAD));
	return 0;
}
