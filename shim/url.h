/* SPDX-License-Identifier: ISC */
/*
 * url: the small URL toolkit of egress-fetch and the fixture plugin:
 * split an absolute http(s)-style URL into the request fields the broker
 * wants (scheme, authority, path and query), and resolve a Location
 * reference against the current URL per RFC 3986 section 5.2 (with
 * remove_dot_segments). Syntax only: the broker validates and decides.
 * Not part of the installed library.
 */
#ifndef EGRESS_SHIM_URL_H
#define EGRESS_SHIM_URL_H

#include <stddef.h>

/* Bound on any URL handled here, in bytes. */
#define URL_MAX (16384 + 1024)

/* An absolute URL split for a request; strings owned, NUL-terminated. */
struct url {
	char *scheme;	 /* lower-cased, e.g. "https" */
	char *authority; /* as written, e.g. "api.example:8443" */
	char *target;	 /* path and query, at least "/" */
};

/*
 * Split s, an absolute URL with an authority ("scheme://authority..."),
 * into *ret (free with url_done()); the fragment is dropped. Return 0, or
 * EGRESS_ERR_INVALID (not absolute, no authority, empty authority, a
 * control byte or space anywhere), EGRESS_ERR_TOO_BIG (over URL_MAX) or
 * EGRESS_ERR_NOMEM.
 */
int url_parse(const char *s, struct url *ret);

/* Free the strings of u (not u itself); safe on a zeroed struct. */
void url_done(struct url *u);

/*
 * Resolve reference ref against the absolute URL base (RFC 3986 5.2.2,
 * strict: a ref with a scheme is taken as is) and write the result, a
 * new NUL-terminated string without fragment, to *ret (free() it).
 * Return 0, EGRESS_ERR_INVALID (base not absolute, a control byte or
 * space in ref), EGRESS_ERR_TOO_BIG (over URL_MAX) or EGRESS_ERR_NOMEM.
 */
int url_resolve(const char *base, const char *ref, char **ret);

#endif /* EGRESS_SHIM_URL_H */
