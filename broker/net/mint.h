/* SPDX-License-Identifier: ISC */
/*
 * mint: the leaf certificates of TLS inspection. An inspection CA (its
 * certificate and key) signs, per server name, a short-lived leaf for
 * one P-256 key the minter made: subjectAltName the name (dNSName, or
 * iPAddress for an IP literal), valid from MINT_BACKDATE_S before it was
 * made for MINT_LIFETIME_S, serverAuth only, not a CA. Leaves are cached
 * per name, at most max of them (the least recently used one goes), and
 * made again once less than MINT_RENEW_S of one is left. mint_wrap()
 * terminates a client connection with one.
 */
#ifndef EGRESS_NET_MINT_H
#define EGRESS_NET_MINT_H

#include <stddef.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#define MINT_LIFETIME_S	   (24 * 3600)
#define MINT_BACKDATE_S	   3600
#define MINT_RENEW_S	   3600
#define MINT_NAME_MAX	   255
#define MINT_CACHE_DEFAULT 256
#define MINT_UNDER_HIGH	   (64 * 1024) /* records queued to the socket */

struct mint;

struct bufferevent;
struct event_base;

/*
 * Make a minter signing with ca and ca_key (takes ownership of both,
 * also on failure), caching at most max leaves (at least 1), with a TLS
 * server context (TLS 1.2 or later, no session resumption, ALPN
 * http/1.1 or none). Return 0 and write *ret; EGRESS_ERR_INVALID when
 * ca_key does not match ca; EGRESS_ERR_NOMEM.
 */
int mint_new(X509 *ca, EVP_PKEY *ca_key, size_t max, struct mint **ret);

/*
 * Put a TLS server with the leaf for name (mint_leaf() at now) on bev,
 * whose input may already hold the client's first bytes (its
 * ClientHello; read from there first): write *ret, a filter bufferevent
 * on base that reads and writes the decrypted stream and emits
 * BEV_EVENT_CONNECTED once the handshake is done. bev's timeouts are
 * cleared (set the filter's), and its output is bounded: the filter
 * puts no more than MINT_UNDER_HIGH bytes of records in it, so plaintext
 * not yet encrypted stays in *ret's output (back-pressure for whoever
 * writes it). Takes ownership of bev: on success it is freed with *ret,
 * on failure here. Return 0, or mint_leaf()'s error, or EGRESS_ERR_NOMEM.
 */
int mint_wrap(struct mint *m, struct event_base *base, struct bufferevent *bev,
    const char *name, time_t now, struct bufferevent **ret);

/*
 * Find or make the leaf for name (a host name or an IP literal, without
 * brackets, at most MINT_NAME_MAX bytes; compared ASCII
 * case-insensitively) at time now. Write *ret (borrowed: valid until the
 * next mint_leaf() or mint_free(); take a reference to keep it). Return
 * 0; EGRESS_ERR_INVALID for an empty or too long name;
 * EGRESS_ERR_NOMEM when OpenSSL failed.
 */
int mint_leaf(struct mint *m, const char *name, time_t now, X509 **ret);

/* The leaves' private key (borrowed, as long as m). */
EVP_PKEY *mint_key(const struct mint *m);

/* The CA certificate (borrowed, as long as m). */
X509 *mint_ca(const struct mint *m);

/* The number of leaves cached. */
size_t mint_cached(const struct mint *m);

/* Free m and its cache. NULL is a no-op. */
void mint_free(struct mint *m);

#endif /* EGRESS_NET_MINT_H */
