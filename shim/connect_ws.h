/* SPDX-License-Identifier: ISC */
/*
 * connect_ws: egress-connect's WebSocket mode. Not part of the library.
 */
#ifndef EGRESS_SHIM_CONNECT_WS_H
#define EGRESS_SHIM_CONNECT_WS_H

#include <stddef.h>

#include <egress/egress.h>

/*
 * Open a WebSocket to url on c with headers[0..nheaders) (borrowed),
 * send each stdin line as one message (binary: binary messages), print
 * each received message on one line, close once stdin ended; with ping,
 * send a ping first and print its pong to stderr. Errors are printed.
 * Return the tool's exit status.
 */
int connect_ws(struct egress_client *c, const char *url, const char *profile,
    const struct egress_header *headers, size_t nheaders, int binary,
    int ping);

#endif /* EGRESS_SHIM_CONNECT_WS_H */
