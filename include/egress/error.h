/* SPDX-License-Identifier: ISC */
/*
 * The one error enum of egressd. Every function in the project that can
 * fail returns 0 (or a count) on success and a negative EGRESS_ERR_* value
 * on failure. The first block is the set of guest-visible codes that the
 * broker may return to a plugin (they map 1:1 onto wire error codes); the
 * second block is for local failures inside a library or tool. Values are
 * part of the installed ABI: never renumber or reuse one.
 */
#ifndef EGRESS_ERROR_H
#define EGRESS_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

enum egress_err {
	EGRESS_OK = 0,

	/* Guest-visible codes (see docs/protocol.md). */
	EGRESS_ERR_DENIED = -1,
	EGRESS_ERR_BUDGET_EXHAUSTED = -2,
	EGRESS_ERR_DNS_FAILED = -3,
	EGRESS_ERR_CONNECT_FAILED = -4,
	EGRESS_ERR_TLS_FAILED = -5,
	EGRESS_ERR_TIMEOUT = -6,
	EGRESS_ERR_UPSTREAM_PROTOCOL = -7,
	EGRESS_ERR_INVALID_REQUEST = -8,
	EGRESS_ERR_UNAVAILABLE = -9,
	EGRESS_ERR_CANCELLED = -10,

	/* Local failures. */
	EGRESS_ERR_INVALID = -32, /* malformed input or argument */
	EGRESS_ERR_NOMEM = -33,
	EGRESS_ERR_IO = -34,	   /* a system call failed; see errno */
	EGRESS_ERR_TOO_BIG = -35,  /* input over a documented bound */
	EGRESS_ERR_PROTOCOL = -36, /* the peer broke the wire protocol */
	EGRESS_ERR_AGAIN = -37,	   /* would block; try again later */
	EGRESS_ERR_CLOSED = -38,   /* the connection is closed */
	EGRESS_ERR_NOT_FOUND = -39,
	EGRESS_ERR_EXISTS = -40,
};

/*
 * Return a short, static, lowercase description of err (for guest-visible
 * codes: the stable code name, such as "denied" or "dns-failed"). Unknown
 * values give "unknown-error". Never returns NULL.
 */
const char *egress_strerror(int err);

/*
 * Return the stable code name of a guest-visible error ("denied",
 * "budget-exhausted", ...), or NULL when err is not guest-visible.
 */
const char *egress_err_code(int err);

#ifdef __cplusplus
}
#endif

#endif /* EGRESS_ERROR_H */
