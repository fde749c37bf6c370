/* SPDX-License-Identifier: ISC */
/*
 * wsproto: the client side of RFC 6455 for the broker, over what the
 * leaf layer wraps: a fresh Sec-WebSocket-Key from OpenSSL's RAND, the
 * handshake response head parsed by http-parser and checked (101, the
 * Upgrade and Connection tokens, Sec-WebSocket-Accept from OpenSSL's
 * SHA-1 and base64, no extension, at most one of the requested
 * subprotocols), and libwslay's event API for the frames (masking,
 * fragmentation, UTF-8 checks of text, the bound on one message, control
 * frames and the close handshake) behind a byte-callback interface. No
 * I/O of its own: the caller moves bytes.
 */
#ifndef EGRESS_NET_WSPROTO_H
#define EGRESS_NET_WSPROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "broker/net/http1_head.h"

#define WSPROTO_KEY_LEN	    24 /* base64 of 16 random bytes */
#define WSPROTO_HEADERS_MAX 100

/* Opcodes (RFC 6455). */
#define WSPROTO_TEXT	    1
#define WSPROTO_BINARY	    2
#define WSPROTO_CLOSE	    8
#define WSPROTO_PING	    9
#define WSPROTO_PONG	    10

/* A parsed response head; strings point into the caller's head bytes. */
struct wsproto_head {
	int status;
	struct http1_header headers[WSPROTO_HEADERS_MAX];
	size_t nheaders;
};

/* Write a fresh NUL-terminated key to key. Return 0, or
 * EGRESS_ERR_UNAVAILABLE when the random source fails. */
int wsproto_key_new(char key[WSPROTO_KEY_LEN + 1]);

/*
 * Parse and check the response head of len bytes at head (through its
 * empty line) for a handshake sent with key and the requested
 * subprotocols protos (comma-separated, NULL for none). Fill *ret.
 * Return 1 for an accepted 101, 0 for another final status (200..999:
 * the upgrade was refused), -1 when the head is refused (malformed,
 * over WSPROTO_HEADERS_MAX headers, a field name that is no token or a
 * value with a control byte, an informational status other than
 * 101, or a 101 whose Upgrade, Connection or Sec-WebSocket-Accept is
 * wrong, that selects an extension or a subprotocol not requested).
 */
int wsproto_response_check(const char *head, size_t len, const char *key,
    const char *protos, struct wsproto_head *ret);

struct wsproto;

/*
 * The caller's side of a codec. recv: copy up to len upstream bytes to
 * buf; return the count, 0 when none are there now (or the caller wants
 * no more now), -1 on failure. send: take up to len bytes for the
 * upstream; return the count, 0 when there is no room now, -1 on
 * failure. on_msg: a whole message (text or binary, reassembled), a
 * ping (already answered with a pong), a pong, or the peer's close
 * (code 0 when it carried none; the payload is then the reason);
 * return 0, or -1 to fail the codec.
 */
struct wsproto_ops {
	ssize_t (*recv)(void *arg, uint8_t *buf, size_t len);
	ssize_t (*send)(void *arg, const uint8_t *buf, size_t len);
	int (*on_msg)(void *arg, int opcode, unsigned code, const uint8_t *p,
	    size_t n);
};

/*
 * Make a client codec (masked frames) with ops and arg (borrowed),
 * receiving messages of at most max_message bytes (over it: close 1009
 * is queued and reading stops). Return 0 and write *ret, or
 * EGRESS_ERR_NOMEM.
 */
int wsproto_new(const struct wsproto_ops *ops, void *arg, size_t max_message,
    struct wsproto **ret);

/* Free w. NULL is a no-op. */
void wsproto_free(struct wsproto *w);

/*
 * Read and decode what recv gives, calling on_msg. A protocol error of
 * the peer (a bad frame, text that is not UTF-8, an over-size message)
 * queues a close of the codec's own and stops reading: see
 * wsproto_close_sent(). Return 0, -1 when a callback failed, or
 * EGRESS_ERR_NOMEM (see wsproto_park()).
 */
int wsproto_recv(struct wsproto *w);

/* Encode queued messages through send while it takes them. Return 0, -1
 * when a callback failed, or EGRESS_ERR_NOMEM (see wsproto_park()). */
int wsproto_send(struct wsproto *w);

/* Answer whether the codec reads more, or has something to send (both
 * true once it failed for want of memory: recv and send then say so). */
int wsproto_want_read(const struct wsproto *w);
int wsproto_want_write(const struct wsproto *w);

/*
 * Park w when it is idle: open both ways (no close queued, sent or
 * received, reading not shut), nothing queued or half sent, no frame or
 * fragmented message half received. Its frame state is then freed, and
 * made again, the same, by the next wsproto_recv(), wsproto_queue(),
 * wsproto_close() or wsproto_shutdown_read(); parked, w answers every
 * query as it would have. Otherwise (or from inside one of w's ops
 * callbacks) do nothing. When the state cannot be made again, that call
 * and every later one fails with EGRESS_ERR_NOMEM.
 */
void wsproto_park(struct wsproto *w);

/* Answer whether w is parked. */
int wsproto_is_parked(const struct wsproto *w);

/*
 * Retire w once its close was sent and wholly written (nothing queued or
 * half sent), for a stream whose guest is gone, which reads nothing more
 * through w: its frame state is freed for good, and w answers from then
 * on as a closed codec (close sent, its code; nothing to read or write;
 * wsproto_recv() and wsproto_send() do nothing, wsproto_queue() and
 * wsproto_close() return -1). Otherwise (or from inside a callback) do
 * nothing.
 */
void wsproto_retire(struct wsproto *w);

/* Answer whether p[0..n) is well-formed UTF-8 (RFC 3629: no overlong
 * form, no surrogate, nothing above U+10FFFF). */
int wsproto_utf8_ok(const uint8_t *p, size_t n);

/*
 * Queue one message (WSPROTO_TEXT or WSPROTO_BINARY, unfragmented; text
 * that is not UTF-8 is refused) or control (WSPROTO_PING, WSPROTO_PONG: at most 125
 * bytes) of n bytes at p (copied). Return 0, -1 (invalid, or a close
 * was already queued), or EGRESS_ERR_NOMEM.
 */
int wsproto_queue(struct wsproto *w, int opcode, const uint8_t *p, size_t n);

/* Queue a close with code (0: none, and no reason) and a reason of n
 * bytes (at most 123; not sent when it is not UTF-8), to be sent after
 * every message and control queued before it (nothing is ever sent
 * after a close, so it waits until they are written; no message can be
 * queued after it). Return 0, -1 (a close was already queued, or a
 * reason over 123 bytes), or EGRESS_ERR_NOMEM (see wsproto_park()). */
int wsproto_close(struct wsproto *w, unsigned code, const uint8_t *reason,
    size_t n);

/* Stop reading (after a failure of the caller's own). */
void wsproto_shutdown_read(struct wsproto *w);

/* Answer whether a close was sent / received, and the code sent. */
int wsproto_close_sent(const struct wsproto *w);
int wsproto_close_received(const struct wsproto *w);
unsigned wsproto_code_sent(const struct wsproto *w);

/*
 * Return the bytes queued, not yet sent (with a few bytes a message of
 * those waiting behind the codec's own queue), and the number of messages
 * and controls in the codec's own queue (at most 64 messages: more wait
 * behind it, as compact records, and are not counted), and the number of
 * empty messages waiting there (they take no flow-control window).
 */
size_t wsproto_queued_bytes(const struct wsproto *w);
size_t wsproto_queued_count(const struct wsproto *w);
size_t wsproto_queued_empty(const struct wsproto *w);

/*
 * Feed the n bytes at data as the upstream's answer to a handshake with
 * key and protos (the fuzz target): the head checked, then the frames
 * after it decoded. Return wsproto_response_check()'s result (-1 as well
 * when no head ended within HTTP1_HEAD_MAX bytes).
 */
int wsproto_fuzz_upstream(const char *key, const char *protos,
    const uint8_t *data, size_t n);

#endif /* EGRESS_NET_WSPROTO_H */
