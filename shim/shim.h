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

/*
 * Make a client on fd (a connected stream Unix socket; owned by the
 * client on success) and queue its HELLO. Return 0 and write *ret, or
 * EGRESS_ERR_NOMEM / EGRESS_ERR_IO (fd is then still the caller's).
 */
struct egress_client;
int shim_client_new(int fd, struct egress_client **ret);

/* Return the monotonic clock in milliseconds. */
uint64_t shim_now_ms(void);

/*
 * Write into dst (EGRESS_MESSAGE_MAX + 1 bytes) the len bytes of msg
 * (cut at EGRESS_MESSAGE_MAX) and a NUL; msg NULL: the fixed text of
 * err (the wire code's masked message, else egress_strerror()).
 */
void shim_set_message(char *dst, int err, const char *msg, size_t len);

/* Map a wire code of a RESET or ERROR frame to an EGRESS_ERR_* value
 * (EGRESS_ERR_PROTOCOL for an unknown code). */
int shim_wire_err(uint32_t code);

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
 * The record a websocket stream's input keeps per received DATA or
 * WS_CONTROL frame: u8 type, u8 DATA flags or WS_CONTROL opcode, u16
 * close code, u32 length (big-endian), then that many bytes.
 */
#define SHIM_WS_REC 8

/*
 * Write len bytes of buf on r as egress_request_write() does, with the
 * DATA flags dflags on its frames (PROTO_FLAG_MSG_END only on the frame
 * that carries the last byte; with len 0 and PROTO_FLAG_MSG_END, one
 * empty frame). Return as egress_request_write().
 */
int shim_request_write(struct egress_request *r, const void *buf, size_t len,
    int flags, uint8_t dflags);

/*
 * Given the n buffered input bytes at p (writable, borrowed for the
 * call), consume some: return how many (> 0) and write in *ret_credit
 * how many of them are DATA payload to credit, or a negative error.
 */
typedef int shim_take_fn(void *arg, uint8_t *p, size_t n,
    uint32_t *ret_credit);

/*
 * Under r's lock, wait as egress_response_read() does (unless
 * EGRESS_NONBLOCK), then call fn on the buffered input. Return fn's
 * result, or when nothing is buffered: r's error, EGRESS_ERR_CLOSED once
 * the broker's direction ended, or EGRESS_ERR_AGAIN.
 */
int shim_response_take(struct egress_request *r, int flags, shim_take_fn *fn,
    void *arg);

/*
 * Queue the stream frame m (type and fields set; its stream id is set
 * here) on r. A frame with END_STREAM finishes r's side. Return 0,
 * EGRESS_ERR_AGAIN before the REQUEST went out, EGRESS_ERR_CLOSED when
 * r's side is finished, or r's error.
 */
int shim_request_control(struct egress_request *r, struct proto_msg *m);

/*
 * Upgrade r, a connected byte stream, with the STARTTLS m (its profile
 * set, borrowed; its stream id is set here), as egress_stream_starttls()
 * documents: the first call sends it (unread bytes fail r with
 * EGRESS_ERR_TLS_FAILED instead), every call waits for the answer
 * unless EGRESS_NONBLOCK. Return 0 once upgraded, EGRESS_ERR_AGAIN,
 * EGRESS_ERR_INVALID (not connected yet), EGRESS_ERR_CLOSED (r's side
 * is shut), or r's error.
 */
int shim_stream_upgrade(struct egress_request *r, struct proto_msg *m,
    int flags);

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
