/* SPDX-License-Identifier: ISC */
/*
 * proxy_auth: the proxy front's check of the Proxy-Authorization a
 * caller on an instance's port (proxy_listen) sends against the
 * instance's token (proxy_token_file), in a time that tells neither the
 * token nor its length.
 */
#ifndef EGRESS_BROKER_PROXY_AUTH_H
#define EGRESS_BROKER_PROXY_AUTH_H

struct confref;
struct http1_req;

/*
 * Check q's Proxy-Authorization against instance's token in the
 * snapshot ref (NULL: none can be read). Return 0 (authorized) or 407,
 * also without a snapshot (nothing can be authorized then, and a caller
 * without the token learns nothing of the configuration's state), with
 * *ret_detail (static) saying why, for the log.
 */
unsigned proxy_auth_check(const char *instance, const struct http1_req *q,
    const struct confref *ref, const char **ret_detail);

/*
 * The credentials a CONNECT was authorized with, kept for the requests
 * that inspection (tls_inspect) reads from inside its tunnel: those carry
 * none, and each is checked against the token in force with these, so
 * that a rotated token ends the tunnel as it ends a port connection.
 */
struct proxy_auth_held;

/* Keep q's Proxy-Authorization (q passed proxy_auth_check()). Return
 * NULL when q has none or out of memory. */
struct proxy_auth_held *proxy_auth_hold(const struct http1_req *q);

/* proxy_auth_check() for the credentials h holds. */
unsigned proxy_auth_check_held(const char *instance,
    const struct proxy_auth_held *h, const struct confref *ref,
    const char **ret_detail);

/* Wipe and free h (NULL: nothing). */
void proxy_auth_held_free(struct proxy_auth_held *h);

#endif
