/* SPDX-License-Identifier: ISC */
/*
 * Private interfaces of libegress shared between its source files and its
 * unit tests: the bounds the client applies to its own buffers, and a
 * monotonic clock. Nothing here is installed.
 */
#ifndef EGRESS_SHIM_H
#define EGRESS_SHIM_H

#include <stdint.h>

#include "proto/proto.h"

/*
 * Queued outbound bytes above which body writes wait (control frames are
 * always queued), and the hard cap past which a broker that stopped
 * reading while making us queue control frames (PONG, WINDOW_UPDATE) is
 * dropped.
 */
#define SHIM_OUT_HIGH	 (256 * 1024)
#define SHIM_OUT_HARD	 (4 * 1024 * 1024)

/* Bytes read from the socket per step at most (then yield). */
#define SHIM_READ_BUDGET (1024 * 1024)

/* Return the monotonic clock in milliseconds. */
uint64_t shim_now_ms(void);

/*
 * gcc 12's -fanalyzer loses a block stored through a pointer it loaded
 * from memory (c = req->c; c->out.p = realloc(...)) and reports it leaked
 * where the storing call returns. These bracket such calls only.
 */
#if defined(__GNUC__) && !defined(__clang__)
#define ANALYZER_STORED_BEGIN \
	_Pragma("GCC diagnostic push") \
	    _Pragma("GCC diagnostic ignored \"-Wanalyzer-malloc-leak\"")
#define ANALYZER_STORED_END _Pragma("GCC diagnostic pop")
#else
#define ANALYZER_STORED_BEGIN
#define ANALYZER_STORED_END
#endif

#endif /* EGRESS_SHIM_H */
