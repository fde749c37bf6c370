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

#endif
