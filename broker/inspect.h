/* SPDX-License-Identifier: ISC */
/*
 * inspect: the server side of TLS inspection. For an entry with
 * tls_inspect = true, a CONNECT tunnel whose ClientHello names the
 * CONNECT host (tunnel.h) is not relayed: the broker answers the
 * handshake itself with a leaf for that name signed by the inspection CA
 * (mint.h: cached per name, short-lived), offering only http/1.1 in
 * ALPN, and the decrypted connection is served by the proxy front as
 * origin-form requests for https://HOST[:PORT] (proxy.h), each of which
 * takes the whole request pipeline: its own decision, one resolution,
 * the Host check against the name, a pinned upstream connection with the
 * broker's ordinary TLS verification, no redirect followed. The CA and
 * its key are read when a snapshot with an inspecting entry is applied;
 * the key never leaves the broker.
 */
#ifndef EGRESS_BROKER_INSPECT_H
#define EGRESS_BROKER_INSPECT_H

struct broker;
struct bufferevent;
struct conf_snapshot;

/* Leaves cached (names). */
#define INSPECT_CACHE_MAX 256

/*
 * Make b's inspection follow snapshot s: load its CA (a new leaf cache)
 * when s has an inspecting entry, free it when not. A CA that fails to
 * load is logged (never a byte of the key) and inspected tunnels are
 * refused until it loads. Return 0, or the error.
 */
int inspect_apply(struct broker *b, const struct conf_snapshot *s);

/* Answer whether b can terminate tunnels now. */
int inspect_is_ready(const struct broker *b);

/*
 * Put a TLS server for name (a host name or an IP literal) on bev, whose
 * input may already hold the client's first bytes (its ClientHello):
 * write *ret, a bufferevent that reads and writes the decrypted stream.
 * Takes ownership of bev: freed with *ret, or here on failure. Return 0;
 * EGRESS_ERR_UNAVAILABLE when no CA is loaded; EGRESS_ERR_INVALID for a
 * name no leaf can be made for; EGRESS_ERR_NOMEM.
 */
int inspect_wrap(struct broker *b, struct bufferevent *bev, const char *name,
    struct bufferevent **ret);

/* Free the inspection state (broker_release()). */
void inspect_release(struct broker *b);

#endif /* EGRESS_BROKER_INSPECT_H */
