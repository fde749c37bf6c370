/* SPDX-License-Identifier: ISC */
/*
 * Fuzz target for the broker's WebSocket client side (broker/net/
 * wsproto.h): arbitrary bytes as the upstream's answer to an opening
 * handshake sent with RFC 6455's sample key and the subprotocol "chat"
 * requested: the response head is parsed and checked, and after an
 * accepted 101 the rest is decoded as frames by the codec (libwslay),
 * with pings answered and closes handled as the broker does.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "broker/net/wsproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int rc = wsproto_fuzz_upstream("dGhlIHNhbXBsZSBub25jZQ==", "chat",
	    data, size);

	if (rc < -1 || rc > 1)
		abort();
	return 0;
}
