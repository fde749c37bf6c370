/* SPDX-License-Identifier: ISC */
/*
 * dial: connect to a validated, pinned address list and nothing else.
 * The caller passes the addresses policy_check_answers() allowed; dial
 * never resolves. Attempts follow the list order with a Happy Eyeballs
 * stagger (the next address starts DIAL_STAGGER_MS after the previous
 * one, or at once when it fails); the first TCP connection wins and the
 * others are closed. For TLS, OpenSSL 3 runs on the winner through
 * bufferevent_openssl with TLS 1.2 or later, SNI set to the host name
 * (none for an IP literal), ALPN "http/1.1", and the certificate verified
 * against the host name (or IP) from the system trust store or a CA
 * file. One deadline covers every connect and the handshake.
 */
#ifndef EGRESS_BROKER_DIAL_H
#define EGRESS_BROKER_DIAL_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

struct event_base;
struct bufferevent;
struct dial_tls;
struct dial;
struct share;
struct evp_pkey_st;

#define DIAL_STAGGER_MS		250
#define DIAL_TIMEOUT_DEFAULT_MS 10000
#define DIAL_TAG_MAX		64  /* bytes of dial_params.tag */
#define DIAL_ALPN_MAX		255 /* bytes of a stream ALPN list */

/*
 * Create the client TLS context: TLS 1.2 minimum, peer verification
 * required, no renegotiation, trust from ca_file (PEM) when not NULL or
 * else the system default paths. Return 0 and write *ret, or
 * EGRESS_ERR_INVALID (ca_file unreadable or not PEM certificates) or
 * EGRESS_ERR_NOMEM.
 */
int dial_tls_new(const char *ca_file, struct dial_tls **ret);

/* The trust material of a client TLS context. Everything is borrowed. */
struct dial_tls_conf {
	const char *ca_file;	 /* PEM; NULL: the system default paths */
	const char *cert_file;	 /* client certificate chain (PEM), or NULL */
	struct evp_pkey_st *key; /* its key (the context takes a reference);
				    set exactly when cert_file is */
	int min_version;	 /* 13: TLS 1.3; anything else: TLS 1.2 */
	const unsigned char *alpn; /* offered on byte streams (no_alpn),
				      wire form; HTTP always offers
				      "http/1.1" */
	size_t alpn_len;	   /* 0: none; at most DIAL_ALPN_MAX */
};

/*
 * Create a client TLS context as dial_tls_new() does, from c: its trust,
 * minimum version, client certificate (presented when a server asks) and
 * stream ALPN. The key is the one given, already read and checked (no
 * file is read for it). Return 0 and write
 * *ret, or EGRESS_ERR_INVALID (a file unreadable or not what it should
 * be, a key that does not match its certificate) or EGRESS_ERR_NOMEM.
 */
int dial_tls_new_conf(const struct dial_tls_conf *c, struct dial_tls **ret);

/* Free the context; dials already started keep their own reference.
 * NULL is a no-op. */
void dial_tls_free(struct dial_tls *t);

/*
 * A parent HTTP proxy ([upstream_proxy]) that every connection goes
 * through: each attempt connects to the parent and asks it to CONNECT to
 * the validated address as an IP literal (the parent never chooses the
 * address: it cannot resolve the name again), then speaks TLS or plain
 * TCP through that tunnel exactly as it would directly (the name still
 * travels inside: SNI, Host). A parent that answers anything but 2xx, or
 * whose head does not end within DIAL_PARENT_HEAD_MAX bytes, fails that
 * attempt; bytes after its head are the tunnel's and are left unread.
 */
struct dial_parent {
	struct policy_addr addr;
	uint16_t port;
	const char *auth; /* Proxy-Authorization value, or NULL */
};

#define DIAL_PARENT_HEAD_MAX 4096 /* the parent's answer to CONNECT */

/* What to connect to. Everything is borrowed until dial_start returns. */
struct dial_params {
	const struct policy_host *host; /* SNI and verification name */
	uint16_t port;
	const struct policy_addr *addrs; /* validated, in order */
	size_t naddrs;			 /* 1..POLICY_ANSWERS_MAX */
	int timeout_ms;			 /* 0: DIAL_TIMEOUT_DEFAULT_MS */
	struct share *handshakes;	 /* with tag: the TLS handshake takes a
					   unit of this fair share under tag
					   while in progress (refused:
					   EGRESS_ERR_BUDGET_EXHAUSTED) */
	const char *tag;		 /* the instance; NULL: no share */
	int no_alpn;			 /* TLS: a byte stream, not HTTP:
					   offer the context's stream ALPN
					   (none unless its conf set one)
					   instead of "http/1.1" */
	const struct dial_parent *parent; /* NULL: connect directly */
};

/*
 * Completion. On err 0, bev is a connected bufferevent (TLS when a
 * context was given; BEV_OPT_CLOSE_ON_FREE, the fd CLOEXEC and
 * non-blocking, no callbacks set, reading disabled; writing disabled on
 * a TLS one, enabled on a plain one, as libevent makes it) whose
 * ownership moves to the callee, and used is the address connected to
 * (borrowed for the call). Otherwise bev and used are NULL and err is
 * EGRESS_ERR_CONNECT_FAILED (every address refused or unreachable, or
 * through a parent: the parent unreachable or refusing each CONNECT),
 * EGRESS_ERR_UPSTREAM_PROTOCOL (a connection was made and reset before
 * it was handed over: the destination's failure, no other address is
 * tried, and the reset is never passed on as a usable connection),
 * EGRESS_ERR_TLS_FAILED (handshake or certificate verification failed),
 * EGRESS_ERR_TIMEOUT (the deadline passed), EGRESS_ERR_BUDGET_EXHAUSTED
 * (the tag's share of handshakes in progress is used up) or
 * EGRESS_ERR_NOMEM. The dial
 * handle is freed after the callback returns.
 */
typedef void (*dial_cb)(void *arg, int err, struct bufferevent *bev,
    const struct policy_addr *used);

/*
 * Start dialing on base. tls NULL means plain TCP. The callback runs
 * exactly once, from the event loop (never inside dial_start), unless
 * dial_cancel() runs first. If ret is not NULL write the handle (valid
 * until the callback runs or dial_cancel()). Return 0, or
 * EGRESS_ERR_INVALID (no address, a bad family, port 0, a host too long)
 * or EGRESS_ERR_NOMEM.
 */
int dial_start(struct event_base *base, struct dial_tls *tls,
    const struct dial_params *p, dial_cb cb, void *arg, struct dial **ret);

/* Abort a dial whose callback has not run: close every socket, no
 * callback. NULL is a no-op. */
void dial_cancel(struct dial *d);

/*
 * End the write direction of bev, a connection dial_start() made, once
 * its output buffer is empty (the caller waits for that): for TLS, send
 * the close_notify alert (reading goes on: the peer may keep sending
 * until its own close_notify); then shutdown(SHUT_WR), so the peer reads
 * end of file. Return 0; DIAL_SHUT_AGAIN when the socket's buffer had no
 * room for the close_notify (nothing is shut yet: call again once the
 * socket is writable); or EGRESS_ERR_IO when the socket refused (the
 * connection is then broken: close it).
 */
#define DIAL_SHUT_AGAIN 1
int dial_shutdown_write(struct bufferevent *bev);

/*
 * Make the close of bev's socket (a connection dial_start() or
 * dial_tls_client() made, freed by the caller after this) abortive: the
 * peer gets a reset, never an end of file, and whatever the kernel still
 * held unsent is dropped. For a byte stream cut before its end (the
 * guest reset it or went away, a timeout, a revocation): the upstream
 * must never take a truncated stream for a complete one.
 */
void dial_abort_on_free(struct bufferevent *bev);

/*
 * Answer whether bytes may be written to bev's socket directly: a plain
 * socket bufferevent (no TLS, no filter below or above it) with a
 * descriptor.
 */
int dial_is_plain(struct bufferevent *bev);

/*
 * Start the client side of TLS on fd, a connected socket that carried
 * plain bytes so far (a STARTTLS upgrade), exactly as dial_start() does
 * it for a byte stream: SNI = host's name (none for an IP literal), the
 * certificate verified against the name (DNS SANs only) or the IP from
 * tls's trust, tls's stream ALPN. On success the fd belongs to
 * *ret_bev: a bufferevent in the handshake (BEV_OPT_CLOSE_ON_FREE, no
 * callbacks) that reports BEV_EVENT_CONNECTED once the certificate was
 * verified, BEV_EVENT_ERROR or BEV_EVENT_EOF when the handshake failed;
 * the caller sets its callbacks and enables it. Takes ownership of fd:
 * on any failure it is closed (with a reset), a NULL argument included.
 * Return 0, or EGRESS_ERR_INVALID (a NULL argument or fd < 0) or
 * EGRESS_ERR_NOMEM.
 */
int dial_tls_client(struct event_base *base, struct dial_tls *tls,
    const struct policy_host *host, int fd, struct bufferevent **ret_bev);

#endif /* EGRESS_BROKER_DIAL_H */
