/* SPDX-License-Identifier: ISC */
/*
 * libegress: the client library ("shim") that a plugin runtime links to
 * reach the network through egressd. A client is one connection to the
 * broker's per-instance Unix socket (or an inherited connected fd); it
 * carries many concurrent requests, each a stream of the wire protocol
 * (docs/protocol.md): a request head and a streamed body out, a response
 * head, a streamed body and trailers back. The library is a guest in its
 * host process: it owns no event loop and starts no thread, installs no
 * signal handler, never logs, never exits, never raises SIGPIPE, and makes
 * every fd it creates close-on-exec. It opens no socket but the one to the
 * broker. Nothing happens in the background: bytes move only inside calls
 * into the library, either the blocking calls (which poll the fd
 * themselves) or egress_client_step() driven by the host's event loop.
 *
 * Threading: every function may be called from any thread. Each client has
 * one mutex that guards the client and all its requests; at most one
 * thread at a time polls the fd inside a blocking call, the others wait on
 * the client's condition variable. Callbacks run only inside
 * egress_client_step(), in its caller's thread, with no lock held.
 * docs/shim.md has the whole story. Errors are the negative EGRESS_ERR_*
 * values of <egress/error.h>; guest-visible codes arrive as the broker
 * sent them, and a broker that is gone gives EGRESS_ERR_UNAVAILABLE.
 * C99; no internal type of the project appears here.
 */
#ifndef EGRESS_EGRESS_H
#define EGRESS_EGRESS_H

#include <stddef.h>
#include <stdint.h>

#include <egress/error.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EGRESS_SHIM_VERSION	"0.1.0"

/* The environment variable egress_client_from_env() reads. */
#define EGRESS_FD_ENV		"EGRESS_FD"

/* Bounds the broker enforces (docs/protocol.md); checked early here. */
#define EGRESS_METHOD_MAX	32
#define EGRESS_SCHEME_MAX	32
#define EGRESS_AUTHORITY_MAX	512
#define EGRESS_PATH_MAX		16384
#define EGRESS_NAME_MAX		256
#define EGRESS_VALUE_MAX	65535
#define EGRESS_HEADERS_MAX	256
#define EGRESS_HEADER_BYTES_MAX 65536
#define EGRESS_MESSAGE_MAX	256 /* bytes of a broker error message */

struct egress_client;
struct egress_request;

/*
 * One header field. Strings are not required to be NUL-terminated: the
 * lengths count. Headers the library hands out (response headers and
 * trailers) are also followed by a NUL byte that the length excludes.
 */
struct egress_header {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
};

/*
 * Per-request timeouts in milliseconds; 0 means the broker's default. The
 * broker caps each at its own limit (a guest may ask for less, never
 * more). total_ms is also enforced locally: a blocking call or
 * egress_client_step() that finds it passed resets the stream and fails
 * the request with EGRESS_ERR_TIMEOUT.
 */
struct egress_timeouts {
	uint32_t connect_ms;	   /* resolution, connect and TLS */
	uint32_t first_byte_ms;	   /* request sent to first byte */
	uint32_t between_bytes_ms; /* between response body reads */
	uint32_t total_ms;	   /* the whole exchange */
};

/*
 * A request head. Strings are NUL-terminated and copied by
 * egress_request_start(); the caller keeps ownership. Method, scheme,
 * authority and path are required (path is the path and query, starting
 * with '/'); the broker validates their content and the headers.
 */
struct egress_request_head {
	const char *method;    /* "GET" */
	const char *scheme;    /* "http" or "https" */
	const char *authority; /* "host", "host:port", "[v6]:port" */
	const char *path;      /* "/path?query" */
	const struct egress_header *headers;
	size_t nheaders;
	struct egress_timeouts timeouts;
};

/* ---- Clients ---------------------------------------------------------- */

/*
 * Connect to the broker's instance socket at path (a filesystem path of at
 * most 107 bytes) and queue the HELLO. Does not wait for the broker's
 * answer: requests started before it arrives wait for it. Return 0 and
 * write *ret_client (free it with egress_client_free()), or
 * EGRESS_ERR_INVALID (NULL or empty path), EGRESS_ERR_TOO_BIG (path too
 * long), EGRESS_ERR_UNAVAILABLE (no broker listening there, or not
 * permitted to connect), EGRESS_ERR_IO (socket() failed) or
 * EGRESS_ERR_NOMEM.
 */
int egress_client_connect(const char *path, struct egress_client **ret_client);

/*
 * Adopt fd, a connected SOCK_STREAM AF_UNIX socket to the broker (for
 * example inherited from the runtime's supervisor). On success the client
 * owns fd (egress_client_free() closes it) and sets FD_CLOEXEC on it; the
 * file status flags (O_NONBLOCK) are left alone. On failure fd is not
 * closed. Return 0 and write *ret_client, or EGRESS_ERR_INVALID (not a
 * connected stream Unix socket), EGRESS_ERR_IO or EGRESS_ERR_NOMEM.
 */
int egress_client_from_fd(int fd, struct egress_client **ret_client);

/*
 * As egress_client_from_fd() on the decimal fd number in the environment
 * variable EGRESS_FD (which is read, not changed). Return
 * EGRESS_ERR_NOT_FOUND when it is unset or empty, EGRESS_ERR_INVALID when
 * it is not a decimal fd number or not a connected Unix stream socket, or
 * as egress_client_from_fd().
 */
int egress_client_from_env(struct egress_client **ret_client);

/*
 * Close the connection and free the client and every request still
 * attached to it (their pointers become invalid). No other thread may be
 * inside a call on this client or its requests. NULL is a no-op.
 */
void egress_client_free(struct egress_client *c);

/*
 * Return the client's socket fd, for the host's event loop: poll it for
 * reading always, and for writing while egress_client_want_write() is 1;
 * call egress_client_step() when it is ready. The fd stays the client's.
 */
int egress_client_fd(const struct egress_client *c);

/*
 * Return 1 when the client has bytes queued for the broker (so the host
 * should poll its fd for writing), else 0.
 */
int egress_client_want_write(struct egress_client *c);

/*
 * Return the milliseconds until the earliest local request deadline
 * (total_ms) of the client, 0 when one has passed, or -1 when none is set;
 * an event loop uses it as its timer and calls egress_client_step().
 */
int egress_client_timeout_ms(struct egress_client *c);

/*
 * Make all the progress possible without blocking: read what the fd has,
 * dispatch frames, send what the windows and the socket allow, expire
 * deadlines, then call the callbacks of the requests whose state changed
 * (in this thread, with no lock held). Return 0 while the connection is
 * usable, or the error that closed it (EGRESS_ERR_UNAVAILABLE when the
 * broker went away, EGRESS_ERR_PROTOCOL when it broke the protocol, or
 * the code of its connection-level ERROR); requests then fail with it.
 */
int egress_client_step(struct egress_client *c);

/*
 * Return 0 while the connection is usable, or the error that closed it
 * (as egress_client_step() returns).
 */
int egress_client_error(struct egress_client *c);

/* ---- Requests --------------------------------------------------------- */

/* Events passed to a request callback (a bit set). */
#define EGRESS_EV_RESPONSE 0x01 /* the response head arrived */
#define EGRESS_EV_READABLE 0x02 /* body bytes, or its end, to read */
#define EGRESS_EV_WRITABLE 0x04 /* request body bytes may be written */
#define EGRESS_EV_DONE	   0x08 /* finished: body ended, or failed */

/*
 * A request callback: events happened on req. Called only from
 * egress_client_step(), with no lock held; it may call any function of
 * the library, including egress_request_free() on req. A request that has
 * a callback must be freed from the thread that calls
 * egress_client_step() (or from its callback).
 */
typedef void egress_request_cb(struct egress_request *req, unsigned int events,
    void *arg);

/* Flags of egress_request_write() and egress_response_read(). */
#define EGRESS_NONBLOCK 0x01 /* fail with EGRESS_ERR_AGAIN */

/*
 * Start a request on c: copy head, reserve a stream and queue the REQUEST
 * frame (sent as soon as the connection is open and fewer than 256
 * streams are in use). Then write the body with egress_request_write()
 * and end it with egress_request_finish() (for a request without a body,
 * call it at once: the head then carries the end of the stream). cb (may
 * be NULL) and arg receive the request's events from
 * egress_client_step(). Return 0 and write *ret_req (free it with
 * egress_request_free()), or EGRESS_ERR_INVALID (a missing or empty
 * field), EGRESS_ERR_TOO_BIG (a field or the header block over its
 * bound), EGRESS_ERR_UNAVAILABLE (the connection is closed or draining,
 * or stream ids are exhausted: connect again), or EGRESS_ERR_NOMEM.
 */
int egress_request_start(struct egress_client *c,
    const struct egress_request_head *head, egress_request_cb *cb, void *arg,
    struct egress_request **ret_req);

/*
 * egress_request_start() with a TLS profile for an https request:
 * tls_profile names one of the broker's [tls.profiles.NAME] that the
 * instance's entry lists, as for egress_stream_open_profile() (NULL or
 * "": none; the same refusals). A profile on an http request is refused
 * (EGRESS_ERR_INVALID_REQUEST).
 */
int egress_request_start_profile(struct egress_client *c,
    const struct egress_request_head *head, const char *tls_profile,
    egress_request_cb *cb, void *arg, struct egress_request **ret_req);

/*
 * Write up to len bytes of request body from buf (copied), in DATA frames
 * as the flow-control windows allow. Blocking (flags 0): wait until every
 * byte is queued, or the request fails or times out; return len.
 * EGRESS_NONBLOCK: queue what fits now and return that count (at least 1),
 * or EGRESS_ERR_AGAIN when nothing fits (an EGRESS_EV_WRITABLE event
 * follows). Return EGRESS_ERR_CLOSED after egress_request_finish(), the
 * request's error when it failed, or EGRESS_ERR_TOO_BIG for len over
 * INT_MAX.
 */
int egress_request_write(struct egress_request *req, const void *buf,
    size_t len, int flags);

/*
 * End the request body, with trailers when ntrailers is not 0 (copied).
 * Never blocks: the frame is queued. Return 0, EGRESS_ERR_CLOSED when
 * already finished, EGRESS_ERR_TOO_BIG for trailers over the bounds, or
 * the request's error.
 */
int egress_request_finish(struct egress_request *req,
    const struct egress_header *trailers, size_t ntrailers);

/*
 * Wait for the response head. Blocking (flags 0) until it arrives, the
 * request fails or its deadline passes; EGRESS_NONBLOCK: return
 * EGRESS_ERR_AGAIN when it has not arrived yet. Return the status code
 * (100..999) or the request's error: a guest-visible code from the broker
 * (EGRESS_ERR_DENIED, ...), EGRESS_ERR_TIMEOUT, EGRESS_ERR_CANCELLED,
 * EGRESS_ERR_UNAVAILABLE or EGRESS_ERR_PROTOCOL.
 */
int egress_response_wait(struct egress_request *req, int flags);

/*
 * Return the response headers and write their count to *ret_n; NULL (and
 * 0) before the head arrived. Borrowed until egress_request_free().
 */
const struct egress_header *egress_response_headers(struct egress_request *req,
    size_t *ret_n);

/*
 * Read up to len bytes of response body into buf; each byte read gives
 * its flow-control credit back to the broker. Return the count (> 0), 0
 * at the end of a complete body (trailers are then available), or an
 * error: EGRESS_ERR_AGAIN under EGRESS_NONBLOCK when no byte is there
 * yet, or the request's error (a body cut short is an error, never an
 * end). Bytes that arrived before a failure are read first. Blocking
 * reads wait for the response head first.
 */
int egress_response_read(struct egress_request *req, void *buf, size_t len,
    int flags);

/*
 * Return the response trailers and write their count to *ret_n; NULL (and
 * 0) when there are none or the body has not ended. Borrowed until
 * egress_request_free().
 */
const struct egress_header *
egress_response_trailers(struct egress_request *req, size_t *ret_n);

/*
 * Cancel req: reset its stream (the broker drops the upstream exchange)
 * and fail it with EGRESS_ERR_CANCELLED, waking any thread blocked on it.
 * A request already finished or failed is left as it is. Return 0.
 */
int egress_request_cancel(struct egress_request *req);

/*
 * Return 0 while req has not failed, else its error (see
 * egress_response_wait()).
 */
int egress_request_error(struct egress_request *req);

/*
 * Return the message that goes with the request's error: the broker's
 * masked message from its ERROR frame (NUL-terminated, at most
 * EGRESS_MESSAGE_MAX bytes, naming no address or path), or a fixed text
 * for errors that did not come with one; "" while it has not failed.
 * Borrowed until egress_request_free().
 */
const char *egress_request_message(struct egress_request *req);

/*
 * Free req: reset its stream first when it is still open (as
 * egress_request_cancel()). NULL is a no-op.
 */
void egress_request_free(struct egress_request *req);

/* ---- Byte streams (tcp, tls) ------------------------------------------ */

/* Transports of egress_stream_open() (the wire protocol's numbers). */
#define EGRESS_STREAM_TCP 3 /* needs the socket_client permission */
#define EGRESS_STREAM_TLS 4 /* the same; TLS by the broker */

/*
 * Open a byte stream on c to authority ("host:port", "[v6]:port": the
 * port is required) over transport (EGRESS_STREAM_TCP, or
 * EGRESS_STREAM_TLS: the broker does TLS with SNI and certificate
 * verification for the host, and the stream carries the plaintext). The
 * broker decides it as it decides an HTTP request (permission, grant,
 * address classes, one budget) and holds a connection lease for the
 * stream's whole life. timeouts (NULL: all defaults): connect_ms bounds
 * resolution, connect and TLS; between_bytes_ms is the idle timeout (no
 * byte either way); total_ms the stream's lifetime (also enforced
 * locally, as for a request); first_byte_ms is not used. Each is capped
 * by the broker's limits. The stream is an egress_request: cb and arg
 * receive its events (EGRESS_EV_RESPONSE once connected, READABLE,
 * WRITABLE, and DONE when the destination ended its side or the stream
 * failed; writing stays possible after the destination's end until
 * egress_stream_shutdown()); free it with egress_request_free() (which
 * resets it when still open), cancel it with egress_request_cancel().
 * Nothing blocks here. Return 0 and write *ret_stream, or
 * EGRESS_ERR_INVALID (a bad transport, a missing authority),
 * EGRESS_ERR_TOO_BIG, EGRESS_ERR_UNAVAILABLE or EGRESS_ERR_NOMEM as
 * egress_request_start().
 */
int egress_stream_open(struct egress_client *c, int transport,
    const char *authority, const struct egress_timeouts *timeouts,
    egress_request_cb *cb, void *arg, struct egress_request **ret_stream);

/*
 * egress_stream_open() with a TLS profile for a EGRESS_STREAM_TLS stream:
 * tls_profile (NUL-terminated, at most 64 bytes; NULL or "": none, the
 * broker's default trust) names one of the broker's [tls.profiles.NAME]
 * that the instance's entry lists. It chooses the trust material (CA
 * file, client certificate, minimum version, ALPN), never the
 * destination. The broker refuses a profile the entry does not list, or
 * one on a tcp stream, with EGRESS_ERR_INVALID_REQUEST; a broker too old
 * to know profiles (protocol version 1) fails the stream with
 * EGRESS_ERR_UNAVAILABLE: it is never opened without its profile.
 * Return as egress_stream_open(), or EGRESS_ERR_TOO_BIG for a longer
 * name.
 */
int egress_stream_open_profile(struct egress_client *c, int transport,
    const char *authority, const char *tls_profile,
    const struct egress_timeouts *timeouts, egress_request_cb *cb, void *arg,
    struct egress_request **ret_stream);

/*
 * Wait until s is connected. Blocking (flags 0) until then or until it
 * fails; EGRESS_NONBLOCK: EGRESS_ERR_AGAIN while it is connecting. Return
 * 0 once connected, or the stream's error (EGRESS_ERR_DENIED,
 * _CONNECT_FAILED, _TLS_FAILED, ... as egress_response_wait()).
 */
int egress_stream_wait(struct egress_request *s, int flags);

/*
 * Write len bytes of buf to the destination, as egress_request_write()
 * (blocking: every byte queued; EGRESS_NONBLOCK: what fits now, or
 * EGRESS_ERR_AGAIN). Bytes written before the stream connected are sent
 * once it did. Return the count, EGRESS_ERR_CLOSED after
 * egress_stream_shutdown(), or the stream's error.
 */
int egress_stream_write(struct egress_request *s, const void *buf, size_t len,
    int flags);

/*
 * Read up to len bytes from the destination into buf, as
 * egress_response_read() (blocking reads wait for the connection first).
 * Return the count (> 0), 0 once the destination ended its side (its end
 * of file, or for tls its close_notify), or an error (EGRESS_ERR_AGAIN
 * under EGRESS_NONBLOCK; EGRESS_ERR_TIMEOUT at the idle timeout or the
 * lifetime; EGRESS_ERR_UPSTREAM_PROTOCOL when the connection failed).
 */
int egress_stream_read(struct egress_request *s, void *buf, size_t len,
    int flags);

/*
 * End the write side of s (the destination reads end of file, after the
 * close_notify for tls); reading goes on until the destination ends its
 * side. Never blocks. Return 0, EGRESS_ERR_CLOSED when already shut, or
 * the stream's error.
 */
int egress_stream_shutdown(struct egress_request *s);

/*
 * STARTTLS: upgrade s, a connected EGRESS_STREAM_TCP stream, to TLS in
 * band, after the application protocol's own STARTTLS command got its
 * go-ahead (for SMTP: "STARTTLS", then the "220" line read, and nothing
 * after it). The broker runs the TLS client on the same connection as
 * for EGRESS_STREAM_TLS: SNI = the host (none for an IP literal), the
 * certificate verified against the host from the trust of tls_profile
 * (NUL-terminated, at most 64 bytes, one the instance's entry lists;
 * NULL or "": the broker's default trust). From the first call on the
 * stream carries no plaintext: writes wait (EGRESS_NONBLOCK:
 * EGRESS_ERR_AGAIN) until the upgrade is done, and any byte that comes
 * from the destination before it, unread when this is called or arriving
 * after, fails the stream with EGRESS_ERR_TLS_FAILED: it is never
 * returned (an injection). Any failure ends the stream; there is no
 * plaintext fallback. The first call sends the request; blocking (flags
 * 0) waits for the answer, EGRESS_NONBLOCK returns EGRESS_ERR_AGAIN
 * until then (call again, for example on EGRESS_EV_WRITABLE, which the
 * answer raises). Return 0 once upgraded (then read and write carry the
 * plaintext of the TLS connection), EGRESS_ERR_AGAIN,
 * EGRESS_ERR_INVALID (not connected yet, or a websocket), EGRESS_ERR_TOO_BIG (a
 * longer profile name), EGRESS_ERR_CLOSED after egress_stream_shutdown(),
 * EGRESS_ERR_UNAVAILABLE (a broker of protocol version 1), or the
 * stream's error: EGRESS_ERR_TLS_FAILED (the handshake or verification
 * failed, or plaintext was injected), EGRESS_ERR_INVALID_REQUEST (an
 * unlisted profile, or a tls stream), EGRESS_ERR_TIMEOUT, ...
 */
int egress_stream_starttls(struct egress_request *s, const char *tls_profile,
    int flags);

/* ---- WebSocket --------------------------------------------------------- */

/* Kinds of egress_ws_frame and egress_ws_control() (RFC 6455 opcodes). */
#define EGRESS_WS_TEXT	     1
#define EGRESS_WS_BINARY     2
#define EGRESS_WS_CLOSE	     8
#define EGRESS_WS_PING	     9
#define EGRESS_WS_PONG	     10

/* Flags of egress_ws_write(), besides EGRESS_NONBLOCK. */
#define EGRESS_WS_MSG_BINARY 0x100 /* the message is binary, not text */
#define EGRESS_WS_MSG_END    0x200 /* this write ends the message */

/* One piece of what egress_ws_recv() received. */
struct egress_ws_frame {
	int kind;      /* EGRESS_WS_TEXT, _BINARY, _PING, _PONG or _CLOSE */
	int last;      /* the last piece of its message (1 for controls) */
	unsigned code; /* EGRESS_WS_CLOSE: the close code, 0 for none; 1006
			  when the destination ended without a close */
	size_t len;    /* bytes written to the caller's buffer */
};

/*
 * Open a WebSocket on c to url ("ws://host[:port]/path?query" or
 * "wss://..."; the broker is the WebSocket client: it does the opening
 * handshake, TLS with SNI and verification for wss, the framing,
 * masking and UTF-8 checks). headers[0..nheaders) are added to the
 * handshake (Authorization, Origin, Cookie; one Sec-WebSocket-Protocol
 * per requested subprotocol); Host may only name url's authority, and
 * the handshake's own headers (Upgrade, Connection, Sec-WebSocket-Key,
 * -Version, -Accept, -Extensions) are refused by the broker
 * (EGRESS_ERR_INVALID_REQUEST). It needs the websocket_client permission
 * and is decided, budgeted and logged as every connection is, holding
 * its lease for its whole life. timeouts as for egress_stream_open()
 * (first_byte_ms bounds the handshake's response). Events as for a
 * request (RESPONSE once the handshake answered, READABLE, WRITABLE,
 * DONE once the broker's side closed or the stream failed). Nothing
 * blocks. Return 0 and write *ret_ws (free with egress_request_free()),
 * EGRESS_ERR_INVALID (not a ws or wss URL), or as egress_request_start().
 */
int egress_ws_open(struct egress_client *c, const char *url,
    const struct egress_header *headers, size_t nheaders,
    const struct egress_timeouts *timeouts, egress_request_cb *cb, void *arg,
    struct egress_request **ret_ws);

/*
 * egress_ws_open() with a TLS profile for a wss:// URL, as for
 * egress_stream_open_profile(): tls_profile (NULL or "": none) names one
 * of the broker's [tls.profiles.NAME] that the instance's entry lists;
 * on a ws:// URL, or unlisted, the broker refuses it with
 * EGRESS_ERR_INVALID_REQUEST.
 */
int egress_ws_open_profile(struct egress_client *c, const char *url,
    const char *tls_profile, const struct egress_header *headers,
    size_t nheaders, const struct egress_timeouts *timeouts,
    egress_request_cb *cb, void *arg, struct egress_request **ret_ws);

/*
 * Wait for the handshake's answer (blocking, or EGRESS_ERR_AGAIN under
 * EGRESS_NONBLOCK). Return 0 when the WebSocket is open (101: the
 * chosen subprotocol is egress_response_headers()'
 * Sec-WebSocket-Protocol), the HTTP status (> 0, e.g. 302; never
 * followed: its headers are egress_response_headers()) when the
 * destination refused the upgrade, or the stream's error
 * (EGRESS_ERR_DENIED, _UPSTREAM_PROTOCOL for a wrong handshake, ...).
 */
int egress_ws_wait(struct egress_request *ws, int flags);

/*
 * Write len bytes of a message, once egress_ws_wait() returned 0 (a
 * message sent before the handshake's answer fails the WebSocket with
 * EGRESS_ERR_INVALID_REQUEST): text unless flags has
 * EGRESS_WS_MSG_BINARY (the same for every write of one message), ended
 * by the write whose flags have EGRESS_WS_MSG_END (len may be 0). Blocking
 * writes queue every byte; EGRESS_NONBLOCK queues what fits now (the
 * message ends only once its last byte is queued) or returns
 * EGRESS_ERR_AGAIN. Text must be UTF-8 (the broker closes with 1007
 * otherwise); a message over the broker's bound closes with 1009. Return
 * the count, EGRESS_ERR_CLOSED after egress_ws_control() sent a close,
 * or the stream's error.
 */
int egress_ws_write(struct egress_request *ws, const void *buf, size_t len,
    int flags);

/*
 * Receive the next piece of what the destination sent into buf (len
 * bytes; at least 125 so that any control fits): a message's bytes (a
 * message larger than len, or one the broker passed in several frames,
 * comes in pieces; last marks its end), a ping (the broker has already
 * answered it), a pong, or the destination's close (then nothing more
 * comes; this side's close is sent automatically if it was not). Fill
 * *ret. Blocking, or EGRESS_ERR_AGAIN under EGRESS_NONBLOCK. Return 0,
 * EGRESS_ERR_CLOSED after the close was received, or the stream's error.
 */
int egress_ws_recv(struct egress_request *ws, void *buf, size_t len,
    struct egress_ws_frame *ret, int flags);

/*
 * Send a control: EGRESS_WS_PING or EGRESS_WS_PONG with len (at most
 * 125) bytes of buf and code 0, or EGRESS_WS_CLOSE with code (0 for none,
 * else 1000..4999) and a reason of len (at most 123) bytes. A close ends
 * this side: the destination's close then arrives through
 * egress_ws_recv(). Never blocks. Return 0, EGRESS_ERR_INVALID,
 * EGRESS_ERR_AGAIN before the stream's REQUEST went out,
 * EGRESS_ERR_CLOSED once closed, or the stream's error.
 */
int egress_ws_control(struct egress_request *ws, int kind, unsigned code,
    const void *buf, size_t len);

/* ---- One-call convenience --------------------------------------------- */

/* A whole response, owned by the caller: free with egress_response_free(). */
struct egress_response {
	int status;
	struct egress_header *headers;
	size_t nheaders;
	uint8_t *body; /* NUL-terminated, not counted */
	size_t body_len;
	struct egress_header *trailers;
	size_t ntrailers;
};

/*
 * Send one request with body[0..body_len) (body may be NULL when body_len
 * is 0) and collect the whole response, blocking. A body longer than
 * max_body bytes cancels the request and fails with EGRESS_ERR_TOO_BIG.
 * Return 0 and write *ret_resp, or the request's error; when reterr_msg is
 * not NULL, the error's message (as egress_request_message()) is written
 * to it, truncated to reterr_msg_size bytes with a NUL.
 */
int egress_fetch(struct egress_client *c,
    const struct egress_request_head *head, const void *body, size_t body_len,
    size_t max_body, struct egress_response **ret_resp, char *reterr_msg,
    size_t reterr_msg_size);

/* Free a response from egress_fetch(). NULL is a no-op. */
void egress_response_free(struct egress_response *resp);

#ifdef __cplusplus
}
#endif

#endif /* EGRESS_EGRESS_H */
