/* SPDX-License-Identifier: ISC */
/*
 * log: egressd's structured host log. Every line is one compact JSON
 * object (built with jansson, which escapes every string) with "ts" (RFC
 * 3339 UTC, milliseconds) and "event" first, written with one write(2) to
 * stderr or to the [broker] log file, which is opened O_APPEND and can be
 * reopened (SIGUSR1, for log rotation). Guest-controlled strings are made
 * printable ASCII (every other byte becomes the four characters "\xNN")
 * and bounded to LOG_STR_MAX bytes with LOG_TRUNC_MARK appended, since
 * this is a log, not policy. The event builders for egress.decision and
 * egress.close live here so that their field set is defined in one place
 * (docs/egressd.md lists every field).
 */
#ifndef EGRESS_BROKER_LOG_H
#define EGRESS_BROKER_LOG_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "policy/policy.h"

#define LOG_STR_MAX    256 /* bytes of a bounded string */
#define LOG_TRUNC_MARK "...[truncated]"
#define LOG_LINE_MAX   (64 * 1024) /* longer lines are replaced */

/*
 * Send the log to path (opened O_WRONLY|O_APPEND|O_CREAT|O_CLOEXEC, mode
 * 0640), or to stderr when path is NULL. The previous destination is
 * closed (stderr never is). Return 0, or EGRESS_ERR_IO (errno set) with
 * the previous destination kept.
 */
int log_open(const char *path);

/*
 * Reopen the current log file under its name (after rotation). A no-op
 * for stderr. Return 0, or EGRESS_ERR_IO with the old file kept.
 */
int log_reopen(void);

/* Close the log file; later events go to stderr. */
void log_close(void);

/*
 * Send later events to fd instead (borrowed, never closed; for tests).
 * A negative fd restores stderr.
 */
void log_set_fd(int fd);

/*
 * Write the bounded, printable form of the n bytes at s (NULL: empty)
 * into buf of size bufsz (at least LOG_STR_MAX + sizeof(LOG_TRUNC_MARK))
 * and NUL-terminate it: bytes 0x20..0x7e are kept, every other byte
 * becomes "\xNN"; when the result would pass LOG_STR_MAX bytes it is cut
 * at a character boundary and LOG_TRUNC_MARK is appended. Return the
 * length written, or EGRESS_ERR_TOO_BIG when bufsz is too small.
 */
int log_bound(const char *s, size_t n, char *buf, size_t bufsz);

/*
 * Return a new JSON string of log_bound(s, n), or NULL on out-of-memory.
 */
json_t *log_bounded_string(const char *s, size_t n);

/*
 * Write one event: set "event" to name and "ts" to now, serialise obj as
 * one compact line and write it. Takes ownership of obj (decref'd). A
 * failed write is dropped silently (there is nowhere to report it).
 */
void log_event(const char *name, json_t *obj);

/* The fields of one egress.decision event; strings borrowed. */
struct log_decision {
	const char *request_id;
	const char *instance;
	const char *plugin; /* NULL: unknown (JSON null) */
	const char *transport;
	const char *host; /* guest-controlled: bounded */
	size_t host_len;
	unsigned port; /* 0: unknown (JSON null) */
	int allow;
	const char *reason;		 /* on a deny; ignored on allow */
	const char *detail;		 /* NULL, or what an invalid request
					   got wrong (omitted when NULL) */
	const struct policy_addr *addrs; /* the validated set */
	size_t naddrs;
};

/* Log one egress.decision event built from d. */
void log_decision(const struct log_decision *d);

/* The fields of one egress.close event; strings borrowed. */
struct log_close {
	const char *request_id;
	const char *instance;
	const char *transport;		     /* "http", "tcp", "tls" */
	const struct policy_addr *connected; /* NULL: none */
	int status;			     /* 0: no response (JSON null) */
	const char *error;		     /* guest-visible code, or NULL */
	const char *reason; /* why a reload revoked it (omitted when
			       NULL) */
	uint64_t bytes_in;  /* response body (stream: all) bytes from
			       the upstream */
	uint64_t bytes_out; /* request body (stream: all) bytes to the
			       upstream */
	uint64_t duration_ms;
};

/* Log one egress.close event built from c. */
void log_close_event(const struct log_close *c);

#endif /* EGRESS_BROKER_LOG_H */
