/* SPDX-License-Identifier: ISC */
/*
 * control: the broker's control protocol, for people (`socat -
 * UNIX-CONNECT:/run/egressd/control.sock`) and tools (egressctl status,
 * ...). One text command per line (LF, an optional CR before it), words
 * separated by spaces or tabs; one reply per command: a JSON document on
 * one line, except `show metrics`, whose reply is the Prometheus text
 * exposition (version 0.0.4) followed by one empty line, which ends the
 * reply (the exposition holds none; raw text reads better through socat,
 * and HAProxy's stats socket ends its replies the same way). Commands:
 *
 *   show status | show instances | show instance NAME | show grants NAME
 *   show metrics | check INSTANCE DESTINATION | reload | attach INSTANCE
 *   attach-listener INSTANCE | help
 *
 * Every failure is {"error":"MESSAGE","code":"CODE"} (codes: usage,
 * unknown-command, not-found, unavailable, failed). The reply to `attach`
 * carries one file descriptor by SCM_RIGHTS. `attach-listener` is the one
 * command that takes descriptors: 1 to CONTROL_FDS_MAX listening TCP
 * sockets sent by SCM_RIGHTS with the bytes of its line (descriptors
 * that come with any other line are closed and that line refused). The
 * broker serves them for the instance for as long as that connection
 * stays open; from its reply on, the connection is a hold: it no longer
 * counts against CONTROL_CONNS_MAX, and anything more sent on it ends it
 * (and so the hold). Two layers: control_dispatch()
 * turns one line into one reply, reading the broker only through struct
 * control_ops (so it can be tested and fuzzed without a daemon), and
 * control_server serves connections on a libevent base: SO_PEERCRED
 * check against [broker] control_uids / control_gids (a refused peer gets
 * one error line and is closed), bounded lines, bounded output, one
 * command in flight per connection. The peer is checked again for every
 * command, against the configuration then in force: one no longer
 * allowed gets an error line and is closed.
 */
#ifndef EGRESS_BROKER_CONTROL_H
#define EGRESS_BROKER_CONTROL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "conf/conf.h"
#include "policy/policy.h"

struct event_base;
struct metrics;
struct control_server;

#define CONTROL_LINE_MAX      4096 /* bytes of one command */
#define CONTROL_CONNS_MAX     16   /* connections at once */
/* More, for root and the broker's own user only: other peers holding
 * every connection never lock out the operator or a unit's reload. */
#define CONTROL_CONNS_RESERVE 4
/* A connection with no command in flight that completes none in this
 * long is closed. */
#define CONTROL_IDLE_MS	      (60 * 1000)
#define CONTROL_OUT_MAX	      (4 * 1024 * 1024) /* queued replies */
#define CONTROL_FDS_MAX	      4			/* descriptors with one line */

/* Runtime facts for `show status`; every pointer borrowed for the call. */
struct control_status {
	const char *version;
	uint64_t uptime_s;
	const char *config_path;
	uint64_t generation;		  /* of the current snapshot */
	int64_t loaded_unix;		  /* when it was loaded (0: unknown) */
	const char *config_error;	  /* NULL: the configuration is fine */
	const char *const *config_errors; /* every error (bounded) */
	size_t nconfig_errors;
	int64_t config_error_since; /* when it broke (0: it is fine) */
	const char *config_watch;   /* how changes are found (confwatch.h) */
	int64_t pid;		    /* the broker's process id */
	uint64_t reloads;
	uint64_t reload_failures;
	size_t connections;		 /* plugin connections open */
	size_t requests;		 /* streams being served */
	size_t leases;			 /* upstream leases held, in total */
	uint64_t upstream_max;		 /* the upstream-connection share */
	uint64_t log_queued;		 /* log lines waiting */
	uint64_t log_backlogs;		 /* instances backlogged, in all */
	uint64_t poll_hits;		 /* wake-ups saved by polling */
	uint64_t poll_us;		 /* time of polls that found nothing */
	const struct policy_addr *local; /* host addresses (netaddr) */
	size_t nlocal;
	uint64_t local_generation;
	const char *nat64_warning;    /* NULL: none (nat64disc) */
	const char *nat64_suggestion; /* the nat64_prefixes line, or NULL */
};

/* The outcome of a dry run; pointers borrowed for the call. */
struct control_check_result {
	int error; /* 0, or the EGRESS_ERR_* that stopped it */
	int allow;
	const char *reason; /* policy_reason_str() or a broker one */
	const struct policy_addr *addrs; /* validated (allow) */
	size_t naddrs;
	const struct policy_addr *answers; /* what the resolver said */
	size_t nanswers;
};

/*
 * Completion of ops->check. Call exactly once per check that returned 0,
 * from inside ops->check or later from the event loop.
 */
typedef void (*control_check_done)(void *arg,
    const struct control_check_result *res);

/* What control asks the broker. Every callback is required. */
struct control_ops {
	/* The current snapshot (borrowed for the call), NULL when broken. */
	const struct conf_snapshot *(*snapshot)(void *broker);
	/* Fill *ret; strings borrowed until the call returns. */
	void (*status)(void *broker, struct control_status *ret);
	/* Upstream leases instance holds now. */
	unsigned (*leases)(void *broker, const char *instance);
	/* The broker's counters (borrowed), or NULL. */
	const struct metrics *(*metrics)(void *broker);
	/*
	 * Dry-run destination for instance through the live resolver and
	 * policy. Return 0 (done will be called) or a negative error (it
	 * will not).
	 */
	int (*check)(void *broker, const char *instance,
	    const char *destination, control_check_done done, void *arg);
	/* Re-read the configuration now. Return 0 or a negative error. */
	int (*reload)(void *broker);
	/*
	 * Create a connection bound to instance, served like one accepted
	 * on <instance>.sock, and write the peer's end (CLOEXEC, owned by
	 * the caller) to *ret_fd. Return 0, EGRESS_ERR_NOT_FOUND (no such
	 * instance), or another negative error.
	 */
	int (*attach)(void *broker, const char *instance, int *ret_fd);
	/*
	 * Optional (NULL: attach-listener is refused as unavailable). Serve
	 * the listening sockets fds[0..nfds) for instance; takes ownership
	 * of every fd whatever the outcome. Write a hold id (never 0) to
	 * *ret_hold and return 0, or return EGRESS_ERR_NOT_FOUND,
	 * EGRESS_ERR_INVALID or EGRESS_ERR_TOO_BIG with *reterr_msg (static)
	 * saying why, or another negative error.
	 */
	int (*attach_listener)(void *broker, const char *instance, int *fds,
	    size_t nfds, uint64_t *ret_hold, const char **reterr_msg);
	/*
	 * Optional with attach_listener. End hold (its connection closed):
	 * close those listeners. An unknown hold is a no-op.
	 */
	void (*detach_listener)(void *broker, uint64_t hold);
};

/*
 * One reply. text is malloc'd (ends with "\n"); fd is -1 or owned; hold
 * is 0 or the hold an attach-listener created, which the receiver ends
 * with ops->detach_listener when its connection closes.
 */
struct control_reply {
	char *text;
	size_t len;
	int fd;
	uint64_t hold;
};

/* Free text and close fd. NULL is a no-op. */
void control_reply_done(struct control_reply *r);

/*
 * Receive a reply; takes ownership of *reply's text and fd (the struct
 * itself is borrowed for the call).
 */
typedef void (*control_reply_fn)(void *arg, struct control_reply *reply);

/*
 * Render the metrics exposition as `show metrics` answers it (without
 * the empty line that ends the reply): the broker's counters with the
 * facts read through ops (version, configuration state, leases of each
 * instance) and this process's metrics. Write a malloc'd NUL-terminated
 * text to *ret_text (caller frees) and its length to *ret_len. Return 0
 * or EGRESS_ERR_NOMEM.
 */
int control_metrics_text(const struct control_ops *ops, void *broker,
    char **ret_text, size_t *ret_len);

/*
 * Run one command line (len bytes, without its LF; a trailing CR is
 * ignored; NUL bytes make it invalid) and hand exactly one reply to
 * reply(arg, ...). Return 0 when the reply was delivered before
 * returning, 1 when it will be delivered later (a check in flight), or
 * EGRESS_ERR_NOMEM when no reply could be built (none is delivered).
 */
int control_dispatch(const struct control_ops *ops, void *broker,
    const char *line, size_t len, control_reply_fn reply, void *arg);

/*
 * As control_dispatch(), with the descriptors fds[0..nfds) (at most
 * CONTROL_FDS_MAX) that came with the line; takes ownership of them:
 * attach-listener consumes them, any other line closes them and is
 * refused (code usage).
 */
int control_dispatch_fds(const struct control_ops *ops, void *broker,
    const char *line, size_t len, int *fds, size_t nfds,
    control_reply_fn reply, void *arg);

/*
 * Answer whether a peer with uid and primary gid may use the control
 * socket under snapshot s: its uid is in control_uids or its gid in
 * control_gids. s NULL (configuration broken) allows root only. Return 1
 * or 0.
 */
int control_peer_allowed(const struct conf_snapshot *s, uid_t uid, gid_t gid);

/*
 * Serve control connections on base (borrowed) with ops and broker
 * (borrowed; they must outlive the server). Return 0 and write *ret, or
 * EGRESS_ERR_NOMEM.
 */
int control_server_new(struct event_base *base, const struct control_ops *ops,
    void *broker, struct control_server **ret);

/*
 * Serve one accepted connection. Takes ownership of fd. When the
 * SO_PEERCRED peer is not allowed (control_peer_allowed with
 * ops->snapshot()) and is not the broker's own euid (a unit's ExecReload
 * runs as the broker's user), or over CONTROL_CONNS_MAX (over
 * CONTROL_CONNS_MAX + CONTROL_CONNS_RESERVE for root and the broker's
 * euid), write one error line and close it. Return 0 when served, or a
 * negative error (fd closed).
 */
int control_server_accept(struct control_server *cs, int fd);

/* Close idle connections after ms instead of CONTROL_IDLE_MS (tests). */
void control_server_idle_ms(struct control_server *cs, unsigned ms);

/* Return the number of connections being served. */
size_t control_server_count(const struct control_server *cs);

/*
 * Close every connection and free the server. A connection with a check
 * in flight is freed when its done callback arrives (or never, if the
 * broker drops it). NULL is a no-op.
 */
void control_server_free(struct control_server *cs);

#endif /* EGRESS_BROKER_CONTROL_H */
