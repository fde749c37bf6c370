/* SPDX-License-Identifier: ISC */
/*
 * proto: the wire protocol between the shim (client) and egressd (broker)
 * over one SOCK_STREAM Unix connection. Pure functions of their inputs
 * (libc only, no system calls, no allocation, no globals but constant
 * tables): frames are encoded into caller buffers and decoded from caller
 * buffers, decoding tells "need more bytes" apart from a violation, and a
 * per-connection state machine (a table, as OpenSSH's monitor has) plus
 * flow-control accounting let the broker and the shim enforce the same
 * rules. docs/protocol.md is the normative description of every message,
 * number, field, state and bound defined here. All functions are
 * reentrant; a struct proto_conn and its streams need external locking if
 * several threads touch them.
 */
#ifndef EGRESS_PROTO_H
#define EGRESS_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include <egress/error.h>

/* ---- Constants (wire ABI: see docs/protocol.md) ----------------------- */

#define PROTO_VERSION	       2 /* the version this build speaks */
#define PROTO_VERSION_MIN      1 /* the lowest version it accepts */
#define PROTO_VERSION_WS       2 /* the first with websocket streams */

#define PROTO_HDR_SIZE	       12    /* bytes of the fixed frame header */
#define PROTO_PAYLOAD_MAX      98304 /* hard cap on any frame's payload */
#define PROTO_FRAME_MAX	       (PROTO_HDR_SIZE + PROTO_PAYLOAD_MAX)
#define PROTO_DATA_MAX	       65536 /* payload cap of one DATA frame */

#define PROTO_STREAM_ID_MAX    0x7fffffffU
#define PROTO_WINDOW_MAX       0x7fffffffU /* 2^31-1 */
#define PROTO_STREAM_WINDOW    262144U	   /* initial, per stream */
#define PROTO_CONN_WINDOW      1048576U	   /* initial, per connection */
#define PROTO_STREAMS_MAX      256U	   /* concurrently open streams */

/* Field bounds, in bytes (strings) or entries (headers). */
#define PROTO_METHOD_MAX       32
#define PROTO_SCHEME_MAX       32
#define PROTO_AUTHORITY_MAX    512
#define PROTO_PATH_MAX	       16384
#define PROTO_NAME_MAX	       256   /* header name, at least 1 byte */
#define PROTO_VALUE_MAX	       65535 /* header value */
#define PROTO_HEADERS_MAX      256   /* headers in one block */
#define PROTO_HEADER_BYTES_MAX 65536 /* sum of name and value lengths */
#define PROTO_MESSAGE_MAX      256   /* ERROR message */
#define PROTO_PROFILE_MAX      64    /* REQUEST tls profile (version 2) */
#define PROTO_PING_SIZE	       8
#define PROTO_WS_PAYLOAD_MAX   125 /* WS_CONTROL ping or pong bytes */
#define PROTO_WS_REASON_MAX    123 /* WS_CONTROL close reason bytes */

/* The fixed masked message of a policy refusal (wire code "denied"). */
#define PROTO_DENIED_MESSAGE \
	"egress policy: destination not permitted for this instance"

/* Message types. Never renumber or reuse a value. */
enum proto_type {
	PROTO_MSG_HELLO = 1,
	PROTO_MSG_REQUEST = 2,
	PROTO_MSG_RESPONSE = 3,
	PROTO_MSG_DATA = 4,
	PROTO_MSG_TRAILERS = 5,
	PROTO_MSG_WINDOW_UPDATE = 6,
	PROTO_MSG_RESET = 7,
	PROTO_MSG_ERROR = 8,
	PROTO_MSG_GOAWAY = 9,
	PROTO_MSG_PING = 10,
	PROTO_MSG_PONG = 11,
	PROTO_MSG_WS_CONTROL = 12, /* version 2: websocket streams */
	PROTO_MSG_STARTTLS = 13,   /* version 2: a tcp stream's upgrade */
};

/* Frame flags. Every bit not defined for a type is reserved. */
#define PROTO_FLAG_END_STREAM 0x01
/* DATA on a websocket stream (version 2): the last frame of a message,
 * and a binary (not text) message. */
#define PROTO_FLAG_MSG_END    0x02
#define PROTO_FLAG_BINARY     0x04

/* WS_CONTROL opcodes: RFC 6455's numbers. Never renumber or reuse. */
enum proto_ws_opcode {
	PROTO_WS_CLOSE = 8,
	PROTO_WS_PING = 9,
	PROTO_WS_PONG = 10,
};

/* Transports of a REQUEST. Never renumber or reuse a value. */
enum proto_transport {
	PROTO_TRANSPORT_HTTP = 1,
	PROTO_TRANSPORT_WEBSOCKET = 2,
	PROTO_TRANSPORT_TCP = 3,
	PROTO_TRANSPORT_TLS = 4,
};

/* Wire error codes of RESET and ERROR. Never renumber or reuse a value. */
enum proto_code {
	PROTO_CODE_DENIED = 1,
	PROTO_CODE_BUDGET_EXHAUSTED = 2,
	PROTO_CODE_DNS_FAILED = 3,
	PROTO_CODE_CONNECT_FAILED = 4,
	PROTO_CODE_TLS_FAILED = 5,
	PROTO_CODE_TIMEOUT = 6,
	PROTO_CODE_UPSTREAM_PROTOCOL = 7,
	PROTO_CODE_INVALID_REQUEST = 8,
	PROTO_CODE_UNAVAILABLE = 9,
	PROTO_CODE_CANCELLED = 10,
	PROTO_CODE_PROTOCOL = 11,
};

/*
 * Why a frame was refused: the detail behind EGRESS_ERR_PROTOCOL (peer
 * input) or EGRESS_ERR_INVALID / EGRESS_ERR_AGAIN (local misuse). For logs
 * and tests; never sent on the wire.
 */
enum proto_fault {
	PROTO_FAULT_NONE = 0,
	PROTO_FAULT_TOO_BIG,	     /* length over the cap of its type */
	PROTO_FAULT_VERSION,	     /* unknown header version */
	PROTO_FAULT_TYPE,	     /* unknown message type */
	PROTO_FAULT_FLAGS,	     /* undefined or missing flag */
	PROTO_FAULT_RESERVED,	     /* reserved header byte not zero */
	PROTO_FAULT_STREAM_ID,	     /* stream id not valid for the type */
	PROTO_FAULT_LENGTH,	     /* payload length not valid for type */
	PROTO_FAULT_TRUNCATED,	     /* a field runs past the payload */
	PROTO_FAULT_TRAILING,	     /* bytes after the last field */
	PROTO_FAULT_STRING,	     /* string over (or under) its bound */
	PROTO_FAULT_COUNT,	     /* header count over its bound */
	PROTO_FAULT_HEADER_BYTES,    /* header block over its byte bound */
	PROTO_FAULT_VALUE,	     /* field value out of its range */
	PROTO_FAULT_DIRECTION,	     /* this side never receives the type */
	PROTO_FAULT_CONN_STATE,	     /* not valid in the connection state */
	PROTO_FAULT_STREAM_STATE,    /* not valid in the stream state */
	PROTO_FAULT_STREAM_IDLE,     /* frame on a stream never opened */
	PROTO_FAULT_STREAM_REUSED,   /* REQUEST id not above the last one */
	PROTO_FAULT_STREAMS,	     /* too many open streams */
	PROTO_FAULT_WINDOW_OVERFLOW, /* window would pass 2^31-1 */
	PROTO_FAULT_WINDOW_EXCEEDED, /* DATA beyond the granted window */
	PROTO_FAULT_NOT_NEGOTIATED,  /* not in the negotiated version */
	PROTO_FAULT_MESSAGES,	     /* message frame on the wrong stream */
	PROTO_FAULT_UPGRADE,	     /* not valid in the stream's upgrade */
};

/* ---- Messages --------------------------------------------------------- */

/*
 * A byte string. After decoding, ptr points into the caller's frame buffer
 * (borrowed for as long as that buffer is unchanged); it is not
 * NUL-terminated and may hold any byte: content rules (tokens, CR/LF/NUL)
 * are the broker's, not the framing's. ptr may be NULL when len is 0.
 */
struct proto_str {
	const char *ptr;
	size_t len;
};

struct proto_header {
	struct proto_str name;
	struct proto_str value;
};

/* Per-request timeouts in milliseconds; 0 means "the broker's default". */
struct proto_timeouts {
	uint32_t connect_ms;
	uint32_t first_byte_ms;
	uint32_t between_bytes_ms;
	uint32_t total_ms;
};

struct proto_request {
	uint8_t transport; /* enum proto_transport */
	struct proto_timeouts timeouts;
	struct proto_str method;
	struct proto_str scheme;
	struct proto_str authority;
	struct proto_str path; /* path and query */
	/* Version 2 and later: the TLS profile to use; empty: the broker's
	 * default trust. A version-1 frame has no such field (empty). */
	struct proto_str tls_profile;
};

/*
 * One decoded (or to-be-encoded) message. type, flags and stream come from
 * the frame header; the union member named after the type holds its
 * fields; headers[0..nheaders) hold the header list of REQUEST, RESPONSE
 * and TRAILERS (nheaders is 0 for other types). All pointers are borrowed.
 * The struct is about 8 KiB; it holds no pointer to itself and may be
 * copied.
 */
struct proto_msg {
	uint8_t type;	 /* enum proto_type */
	uint8_t flags;	 /* PROTO_FLAG_* */
	uint8_t version; /* the frame header's version, which sets the
			    payload's layout: decoding writes it (1 ..
			    PROTO_VERSION), encoding writes it (0 means the
			    first version that has the type;
			    HELLO is always 1); at most the negotiated one */
	uint32_t stream; /* 0 for connection-level frames */
	union {
		struct {
			uint16_t version;
		} hello;
		struct proto_request request;
		struct {
			uint16_t status;
		} response;
		struct {
			const uint8_t *ptr;
			size_t len;
		} data;
		struct {
			uint32_t increment;
		} window_update;
		struct {
			uint32_t code; /* enum proto_code */
		} reset;
		struct {
			uint32_t code; /* enum proto_code */
			struct proto_str message;
		} error;
		struct {
			uint32_t last_stream;
		} goaway;
		struct {
			uint8_t opaque[PROTO_PING_SIZE];
		} ping; /* PING and PONG */
		struct {
			uint8_t opcode; /* enum proto_ws_opcode */
			uint16_t code;	/* close: the code (0: none); else 0 */
			const uint8_t *ptr; /* ping/pong bytes, close reason */
			size_t len;
		} ws_control;
		struct {
			/* client: the TLS profile to upgrade with (empty:
			 * the broker's default trust); broker: the same,
			 * echoed */
			struct proto_str tls_profile;
		} starttls;
	};
	size_t nheaders;
	struct proto_header headers[PROTO_HEADERS_MAX];
};

/* A decoded frame header. */
struct proto_hdr {
	uint32_t length; /* payload bytes after the header */
	uint8_t version;
	uint8_t type;
	uint8_t flags;
	uint32_t stream;
};

/* ---- Decoding --------------------------------------------------------- */

/*
 * Decode the frame header at the start of buf (len bytes available). The
 * length is checked against PROTO_PAYLOAD_MAX as soon as its 4 bytes are
 * present, before anything else; then version, type, reserved byte, flags,
 * stream id and the length bound of the type. Return PROTO_HDR_SIZE and
 * write *ret_hdr on success, 0 when fewer than PROTO_HDR_SIZE bytes are
 * present and nothing seen so far is wrong ("need more bytes"), or
 * EGRESS_ERR_PROTOCOL with *reterr_fault set (reterr_fault may be NULL).
 * The whole frame is PROTO_HDR_SIZE + ret_hdr->length bytes.
 */
int proto_hdr_decode(const uint8_t *buf, size_t len, struct proto_hdr *ret_hdr,
    enum proto_fault *reterr_fault);

/*
 * Decode the payload of one frame whose header hdr came from
 * proto_hdr_decode(); payload holds exactly hdr->length bytes. Fields are
 * decoded one by one with their bounds; bytes after the last field are an
 * error. Return 0 and fill *ret_msg (whose pointers then borrow payload),
 * or EGRESS_ERR_PROTOCOL with *reterr_fault set. On failure *ret_msg is
 * left in an unspecified state (it is scratch space for the headers).
 */
int proto_payload_decode(const struct proto_hdr *hdr, const uint8_t *payload,
    struct proto_msg *ret_msg, enum proto_fault *reterr_fault);

/*
 * Decode one whole frame from the start of buf (len bytes available).
 * Return the frame's size (header plus payload: consume that many bytes)
 * and fill *ret_msg, whose pointers borrow buf; return 0 when the frame is
 * not complete yet (read more and call again with the same start); or
 * return EGRESS_ERR_PROTOCOL with *reterr_fault set: the peer broke the
 * protocol and the connection must be dropped. With libevent: pull up
 * PROTO_HDR_SIZE bytes, then the whole frame, decode, drain the size.
 */
int proto_frame_decode(const uint8_t *buf, size_t len,
    struct proto_msg *ret_msg, enum proto_fault *reterr_fault);

/* ---- Encoding --------------------------------------------------------- */

/*
 * Return the number of bytes proto_encode() would write for m (header
 * included, at most PROTO_FRAME_MAX), or EGRESS_ERR_INVALID with
 * *reterr_fault set when m breaks a rule the decoder enforces (so that
 * every frame this side encodes, the other side decodes).
 */
int proto_encode_size(const struct proto_msg *m,
    enum proto_fault *reterr_fault);

/*
 * Encode m as one frame (header version m->version, 0 meaning 1) into buf
 * of size bytes.
 * Return the number of bytes written, EGRESS_ERR_INVALID (with
 * *reterr_fault) when m is not valid, or EGRESS_ERR_TOO_BIG when size is
 * smaller than proto_encode_size(m). A buffer of PROTO_FRAME_MAX bytes is
 * always large enough. Borrowed pointers in m are only read.
 */
int proto_encode(const struct proto_msg *m, uint8_t *buf, size_t size,
    enum proto_fault *reterr_fault);

/*
 * Encode only a frame header into buf (PROTO_HDR_SIZE bytes, in the first
 * version that has the type), for frames whose payload the caller writes
 * itself (a DATA body straight
 * from an evbuffer or an iovec, without a copy). The same header rules as
 * proto_hdr_decode() apply, including "an empty DATA frame carries
 * END_STREAM". Return PROTO_HDR_SIZE, or EGRESS_ERR_INVALID with
 * *reterr_fault set.
 */
int proto_hdr_encode(uint8_t *buf, uint8_t type, uint8_t flags,
    uint32_t stream, uint32_t length, enum proto_fault *reterr_fault);

/*
 * Return the flags byte of the encoded frame header at the start of buf
 * (len bytes available), or EGRESS_ERR_INVALID when len is under
 * PROTO_HDR_SIZE.
 */
int proto_hdr_flags(const uint8_t *buf, size_t len);

/*
 * Return the version byte of the encoded frame header at the start of buf
 * (len bytes available), or EGRESS_ERR_INVALID when len is under
 * PROTO_HDR_SIZE.
 */
int proto_hdr_version(const uint8_t *buf, size_t len);

/*
 * Set the stream id of an encoded frame in place (a frame encoded ahead of
 * time with a placeholder id). buf holds the whole frame, len bytes. The
 * header must be one proto_encode() or proto_hdr_encode() wrote, and stay
 * valid with the new id (for example a REQUEST never gets stream 0).
 * Return 0, or EGRESS_ERR_INVALID with buf unchanged.
 */
int proto_hdr_set_stream(uint8_t *buf, size_t len, uint32_t stream);

/*
 * Add PROTO_FLAG_* bits to the flags of an encoded frame in place, under
 * the same rules as proto_hdr_set_stream() (a flag its type does not
 * define is refused). Return 0, or EGRESS_ERR_INVALID with buf unchanged.
 */
int proto_hdr_add_flags(uint8_t *buf, size_t len, uint8_t flags);

/*
 * Return 1 when a and b are the same message: type, flags, version (0 as
 * 1), stream and every field of the type compared by value (strings by
 * content), else 0.
 */
int proto_msg_equal(const struct proto_msg *a, const struct proto_msg *b);

/*
 * Check the WS_CONTROL fields of m (flags, opcode, code, length): a close
 * carries END_STREAM and a code of 0 (none: then no reason) or 1000..4999
 * with at most PROTO_WS_REASON_MAX reason bytes; a ping or pong carries
 * no END_STREAM, code 0 and at most PROTO_WS_PAYLOAD_MAX bytes. Return
 * PROTO_FAULT_NONE or the fault.
 */
enum proto_fault proto_ws_control_check(const struct proto_msg *m);

/* ---- Names, codes and messages ---------------------------------------- */

/* Return the upper-case name of a message type ("HELLO"), or "UNKNOWN". */
const char *proto_type_name(unsigned int type);

/* Return a short static description of a fault. Never NULL. */
const char *proto_fault_str(enum proto_fault fault);

/*
 * Map an EGRESS_ERR_* value to its wire code. Guest-visible codes,
 * EGRESS_ERR_CANCELLED and EGRESS_ERR_PROTOCOL map 1:1; every other value
 * (local failures such as EGRESS_ERR_NOMEM, or EGRESS_OK) maps to
 * PROTO_CODE_UNAVAILABLE, so that no internal failure reaches a guest.
 */
uint32_t proto_err_to_wire(int err);

/*
 * Map a wire code to its EGRESS_ERR_* value. Return EGRESS_ERR_PROTOCOL for
 * a value that is not a known code.
 */
int proto_wire_to_err(uint32_t code);

/*
 * Return the stable name of a wire code ("denied", "protocol-error"), or
 * NULL when code is not a known code.
 */
const char *proto_code_name(uint32_t code);

/*
 * Return the fixed, masked guest-visible message of a wire code (for
 * PROTO_CODE_DENIED, PROTO_DENIED_MESSAGE). It names no address, host or
 * path; ERROR frames sent by the broker carry exactly this text. Unknown
 * codes give the message of PROTO_CODE_UNAVAILABLE. Never NULL.
 */
const char *proto_code_message(uint32_t code);

/*
 * Fill m as an ERROR frame on stream (0 for the connection) with code and
 * its masked message from proto_code_message(). Return 0, or
 * EGRESS_ERR_INVALID when code is not a known code or stream is over
 * PROTO_STREAM_ID_MAX.
 */
int proto_error_init(struct proto_msg *m, uint32_t stream, uint32_t code);

/* ---- Version negotiation ---------------------------------------------- */

/*
 * Given the highest version a client offered in its HELLO, return the
 * version the broker answers with (the highest both speak), or 0 when
 * there is none (the broker then sends ERROR code unavailable on stream 0
 * and closes).
 */
uint16_t proto_version_choose(uint16_t offered);

/* ---- Connection and stream state -------------------------------------- */

enum proto_role {
	PROTO_ROLE_CLIENT = 1, /* the shim: opens streams */
	PROTO_ROLE_BROKER = 2, /* egressd: answers them */
};

enum proto_conn_state {
	PROTO_CONN_START = 0,	       /* no HELLO yet */
	PROTO_CONN_HELLO_SENT = 1,     /* client: HELLO sent, awaiting reply */
	PROTO_CONN_HELLO_RECEIVED = 2, /* broker: HELLO in, reply due */
	PROTO_CONN_OPEN = 3,
	PROTO_CONN_DRAINING = 4, /* GOAWAY sent (broker) or received */
	PROTO_CONN_CLOSED = 5,	 /* ERROR on stream 0 sent/received */
};

/* Stream states, from the local side's point of view (as in HTTP/2). */
enum proto_stream_state {
	PROTO_STREAM_IDLE = 0,
	PROTO_STREAM_OPEN = 1,
	PROTO_STREAM_HALF_CLOSED_LOCAL = 2,  /* we sent END_STREAM */
	PROTO_STREAM_HALF_CLOSED_REMOTE = 3, /* the peer sent END_STREAM */
	PROTO_STREAM_CLOSED = 4,
};

/*
 * A stream's STARTTLS (version 2): none yet; the client's STARTTLS went
 * out (no client DATA or TRAILERS until the answer); the broker answered
 * (the stream is TLS from here on; a second STARTTLS is a violation).
 */
enum proto_upgrade {
	PROTO_UPGRADE_NONE = 0,
	PROTO_UPGRADE_ASKED = 1,
	PROTO_UPGRADE_DONE = 2,
};

/*
 * Flow-control credit of one stream or of the connection. send: DATA bytes
 * this side may still send; recv: DATA bytes the peer may still send us;
 * unacked: bytes received and consumed but not yet granted back with a
 * WINDOW_UPDATE.
 */
struct proto_flow {
	uint32_t send;
	uint32_t recv;
	uint32_t unacked;
};

/*
 * One stream's protocol state. The caller owns the storage (usually inside
 * its own request object) and finds it by id; the helpers below only read
 * and update it.
 */
struct proto_stream {
	uint32_t id;
	uint8_t state;	     /* enum proto_stream_state */
	uint8_t local_head;  /* we sent REQUEST/RESPONSE */
	uint8_t remote_head; /* the peer sent REQUEST/RESPONSE */
	uint8_t messages;    /* a websocket stream (version 2): DATA carries
				messages, WS_CONTROL is valid */
	uint8_t upgrade;     /* enum proto_upgrade: STARTTLS's progress */
	struct proto_flow flow;
};

/* One connection's protocol state. */
struct proto_conn {
	uint8_t role;	      /* enum proto_role */
	uint8_t state;	      /* enum proto_conn_state */
	uint16_t offered;     /* client: the version it offered */
	uint16_t version;     /* negotiated, once OPEN */
	uint32_t last_stream; /* highest stream id opened so far */
	uint32_t goaway_last; /* last accepted id, once DRAINING */
	uint32_t nstreams;    /* streams neither idle nor closed */
	struct proto_flow flow;
};

/* Actions proto_conn_recv() returns on success. */
#define PROTO_ACCEPT 0 /* act on the frame */
#define PROTO_IGNORE 1 /* drop it: a closed or refused stream */

/*
 * Initialise c for one side of a new connection: state START, windows at
 * PROTO_CONN_WINDOW, no streams.
 */
void proto_conn_init(struct proto_conn *c, enum proto_role role);

/* Initialise s as an idle stream with id, windows at PROTO_STREAM_WINDOW. */
void proto_stream_init(struct proto_stream *s, uint32_t id);

/*
 * Check a decoded frame m received on c against the state table of
 * docs/protocol.md, and apply it: connection and stream state, stream
 * count, windows. s is the caller's stream for m->stream: for a REQUEST, a
 * fresh proto_stream_init(s, m->stream); for other stream frames, the
 * stream found by id, or NULL when there is none (closed and freed); NULL
 * for stream-0 frames. Return PROTO_ACCEPT (act on it), PROTO_IGNORE (a
 * frame for a closed stream, or a REQUEST above the GOAWAY id: drop it;
 * its DATA bytes are already counted against and credited back to the
 * connection window), EGRESS_ERR_PROTOCOL with *reterr_fault set (the peer
 * broke the protocol: drop the connection), EGRESS_ERR_CLOSED when c is
 * closed, or EGRESS_ERR_INVALID when s does not match m (a caller bug).
 * Nothing is changed on failure. When s reaches PROTO_STREAM_CLOSED the
 * caller may free it.
 */
int proto_conn_recv(struct proto_conn *c, struct proto_stream *s,
    const struct proto_msg *m, enum proto_fault *reterr_fault);

/*
 * Check a frame m this side is about to encode and send on c, with the same
 * table, and apply it (s as for proto_conn_recv(); a REQUEST needs a fresh
 * stream whose id is above c->last_stream). Return 0, EGRESS_ERR_AGAIN
 * with *reterr_fault set when it is not allowed yet (DATA beyond the send
 * windows, or PROTO_STREAMS_MAX streams open: wait for a WINDOW_UPDATE or
 * a stream to close), EGRESS_ERR_CLOSED when c is closed, or
 * EGRESS_ERR_INVALID with *reterr_fault set for any other rule. Nothing is
 * changed on failure. For a DATA frame encoded with proto_hdr_encode(),
 * set m->type, flags, stream and data.len; data.ptr is not read. Of a
 * REQUEST, only the transport is read (a websocket stream, in version 2,
 * carries messages).
 */
int proto_conn_send(struct proto_conn *c, struct proto_stream *s,
    const struct proto_msg *m, enum proto_fault *reterr_fault);

/*
 * Return how many DATA bytes may be sent on s now: the smaller of the
 * stream's and the connection's send windows and PROTO_DATA_MAX; 0 when s
 * may not send DATA in its state.
 */
uint32_t proto_conn_sendable(const struct proto_conn *c,
    const struct proto_stream *s);

/*
 * Record that n received DATA bytes were consumed (delivered upstream or to
 * the guest, or discarded), on s (may be NULL for a freed stream: then
 * only the connection is credited). Write the WINDOW_UPDATE increments now
 * due: *ret_conn_inc for stream 0 and *ret_stream_inc for s, each 0 when
 * none is due (an increment is due once half of the initial window is
 * unacknowledged; none for a stream whose peer has ended). Send each
 * non-zero one with proto_conn_send(), which grants it. Return 0, or
 * EGRESS_ERR_INVALID when the counts would pass PROTO_WINDOW_MAX.
 */
int proto_conn_consumed(struct proto_conn *c, struct proto_stream *s,
    uint32_t n, uint32_t *ret_conn_inc, uint32_t *ret_stream_inc);

/*
 * Return the next unused stream id a client may open (c->last_stream + 1)
 * in *ret_id and 0, or EGRESS_ERR_TOO_BIG when ids are exhausted (open a
 * new connection). Reserve it under the same lock as the proto_conn_send()
 * of its REQUEST.
 */
int proto_conn_next_id(const struct proto_conn *c, uint32_t *ret_id);

/*
 * Return 1 when stream id was refused by the peer's GOAWAY (c is DRAINING
 * and id is above the last accepted id: the request was not processed and
 * is safe to retry on a new connection), else 0.
 */
int proto_conn_is_refused(const struct proto_conn *c, uint32_t id);

/*
 * Take n bytes from a window: return 0 and subtract, or EGRESS_ERR_PROTOCOL
 * (window unchanged) when n is larger than *window.
 */
int proto_window_consume(uint32_t *window, uint32_t n);

/*
 * Add a WINDOW_UPDATE increment to a window: return 0 and add, or
 * EGRESS_ERR_PROTOCOL (window unchanged) when inc is 0 or the sum would
 * pass PROTO_WINDOW_MAX.
 */
int proto_window_grow(uint32_t *window, uint32_t inc);

#endif /* EGRESS_PROTO_H */
