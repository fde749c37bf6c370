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

#include "broker/net/share.h"
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
 * and NUL-terminate it: bytes 0x20..0x7e but the backslash are kept,
 * every other byte becomes "\xNN" (so every backslash of the result
 * starts an escape); when the result would pass LOG_STR_MAX bytes it is cut
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

/*
 * Hold the lines written directly (a regular file, or any destination
 * before log_attach()) from now on, up to LOG_HOLD_MAX bytes, and write
 * them with one write(2) at the next log_flush(): the event loop flushes
 * at the end of every iteration, and a session, the proxy front and
 * the control socket flush before they write to a connection, so the
 * lines of one iteration's requests cost one write, and a client never
 * reads a response (or a control reply) whose events are still held. A line that does not fit flushes what is held
 * first; lines stay in order. log_hold(0) flushes and stops holding.
 * A change of destination (log_open(), log_reopen(), log_set_fd())
 * first writes what was held to the old one. A broker killed in the
 * middle of an iteration loses what it held then.
 */
#define LOG_HOLD_MAX (64 * 1024)
void log_hold(int on);
void log_flush(void);

/*
 * Fair log throughput. Without log_attach() every event is written with
 * blocking write(2) calls as it is made. After log_attach(base), when
 * the destination can block (a pipe, a socket such as journald's, a
 * terminal; not a regular file), events are written without blocking:
 * what the destination does not take at once waits in a queue per
 * instance (egress.decision and egress.close; the broker's own events in
 * a queue of their own), and the queues are drained as the destination
 * takes more, round-robin across plugins and, within a plugin, across
 * its instances, one line at a time. No event is ever dropped. The
 * queued lines are a fair share (share.h) of LOG_QUEUE_LINES lines:
 * LOG_QUEUE_GUARANTEE guaranteed per configured instance, at most
 * LOG_QUEUE_PER_INSTANCE each. An instance whose event does not fit its
 * share is backlogged: its event is queued all the same, and its
 * sessions stop reading (log_backlog_wait()) until its queue has drained
 * to half, so an instance flooding the log slows only itself. The
 * broker's own queue holds up to LOG_QUEUE_BROKER_BYTES; past that its
 * events are written blocking, in order.
 */
#define LOG_QUEUE_LINES	       16384
#define LOG_QUEUE_GUARANTEE    256
#define LOG_QUEUE_PER_INSTANCE 2048
#define LOG_QUEUE_BROKER_BYTES (1u << 20)

struct event_base;

/*
 * Write without blocking from now on, draining the queues from base
 * (borrowed until log_detach()); a destination that cannot block (a
 * regular file) stays written directly. Return 0, or EGRESS_ERR_NOMEM.
 */
int log_attach(struct event_base *base);

/* Write every queued line (blocking) and go back to direct writes. */
void log_detach(void);

/*
 * Declare the configured instances and their plugins (borrowed for the
 * call): their guarantees of the queue are reserved from now on. Return
 * 0 or EGRESS_ERR_NOMEM (nothing changed).
 */
int log_configure(const struct share_member *m, size_t n);

/* A session waiting for its instance's log queue to drain. */
struct log_waiter {
	struct log_waiter *prev, *next;
	void *q; /* the queue it waits on; NULL: not waiting */
	void (*wake)(void *arg);
	void *arg;
};

/*
 * Answer whether instance is backlogged (its queue passed its share).
 * When it is, w (set up with wake and arg) waits: wake(arg) is called
 * once from the event loop when the queue has drained to half.
 */
int log_backlog_wait(const char *instance, struct log_waiter *w);

/* Stop w waiting (a no-op when it does not). */
void log_waiter_cancel(struct log_waiter *w);

/* Return the number of lines queued (for instance, or all with NULL). */
size_t log_queued(const char *instance);

/* Return how many times an instance became backlogged. */
uint64_t log_backlogs(void);

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
	const char *via; /* on an allow: the [upstream_proxy] url it goes
			    through (omitted when NULL) */
};

/* Log one egress.decision event built from d. */
void log_decision(const struct log_decision *d);

/* The fields of one egress.close event; strings borrowed. */
struct log_close {
	const char *request_id;
	const char *instance;
	const char *transport; /* "http", "websocket", "tcp", "tls" */
	const struct policy_addr *connected; /* NULL: none */
	int status;			     /* 0: no response (JSON null) */
	const char *error;		     /* guest-visible code, or NULL */
	const char *reason;   /* why a reload revoked it (omitted when
			       NULL) */
	uint64_t bytes_in;    /* response body (stream: all) bytes from
			       the upstream */
	uint64_t bytes_out;   /* request body (stream: all) bytes to the
			       upstream */
	int websocket;	      /* the three fields below are logged */
	uint64_t msgs_in;     /* websocket messages from the upstream */
	uint64_t msgs_out;    /* websocket messages to the upstream */
	unsigned close_code;  /* websocket close code; 0: none (null) */
	const char *starttls; /* a tcp stream's STARTTLS: "upgraded" or why
				 it failed; NULL: none asked (omitted) */
	uint64_t duration_ms;
};

/* Log one egress.close event built from c. */
void log_close_event(const struct log_close *c);

#endif /* EGRESS_BROKER_LOG_H */
