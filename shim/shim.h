/* SPDX-License-Identifier: ISC */
/*
 * Private interfaces of libegress shared between its source files and its
 * unit tests: the bounds the client applies to its own buffers, and a
 * monotonic clock. Nothing here is installed.
 */
#ifndef EGRESS_SHIM_H
#define EGRESS_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include <egress/egress.h>

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

struct egress_client;
struct egress_header;
struct egress_request;

/*
 * Open a stream on c for the REQUEST m (transport, timeouts and fields
 * filled, borrowed for the call; its type and stream id are set here):
 * encode it, link a new request and queue the frame, as
 * egress_request_start() documents (m's total timeout is also the local
 * deadline). Return 0 and write *ret_req, or as egress_request_start().
 */
int shim_request_open(struct egress_client *c, struct proto_msg *m,
    egress_request_cb *cb, void *arg, struct egress_request **ret_req);

/*
 * Point s at the NUL-terminated v (borrowed). Return 0, EGRESS_ERR_INVALID
 * when v is NULL or empty, or EGRESS_ERR_TOO_BIG over max bytes.
 */
int shim_set_str(struct proto_str *s, const char *v, size_t max);

/*
 * Set m's tls profile to the NUL-terminated tls_profile (borrowed; NULL
 * or empty: none) and so its version to 2, the first with the field.
 * Return 0, or EGRESS_ERR_TOO_BIG over PROTO_PROFILE_MAX bytes.
 */
int shim_set_profile(struct proto_msg *m, const char *tls_profile);

/*
 * Fill m's header list from the n headers h (borrowed). Return 0,
 * EGRESS_ERR_INVALID (a NULL or empty name, a NULL value with a length)
 * or EGRESS_ERR_TOO_BIG (over the protocol's bounds).
 */
int shim_fill_headers(struct proto_msg *m, const struct egress_header *h,
    size_t n);

/*
 * Encode m (stream id 1 as a placeholder) into a new buffer: *ret (the
 * caller frees it) of *ret_len bytes. Return 0, EGRESS_ERR_TOO_BIG (m does
 * not encode), EGRESS_ERR_NOMEM or EGRESS_ERR_INVALID.
 */
int shim_encode_alloc(const struct proto_msg *m, uint8_t **ret,
    size_t *ret_len);

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
