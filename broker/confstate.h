/* SPDX-License-Identifier: ISC */
/*
 * confstate: the broker's current configuration. It holds the one
 * snapshot new requests decide with, checks before each decision whether
 * any file the snapshot was built from changed and re-parses only then.
 * The check is one epoll_wait() on an inotify watch over those files
 * (confwatch.h) while it vouches that nothing changed, and otherwise a
 * few stat() calls (conf_snapshot_is_stale()); the idle timer's check
 * (confstate_poll()) always runs the stat() calls. A re-parse that fails
 * leaves NO current snapshot: every new request then fails with
 * policy-unavailable until the file is fixed (the old, possibly wider
 * policy is never served again); its file:line errors are logged once, as
 * one egress.config event. While broken, only the configuration file's
 * own identity is watched (and SIGHUP forces a re-read). Snapshots are
 * reference-counted so that a request in flight keeps the one it decided
 * with, however many reloads happen meanwhile.
 */
#ifndef EGRESS_BROKER_CONFSTATE_H
#define EGRESS_BROKER_CONFSTATE_H

#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "broker/confwatch.h"
#include "conf/conf.h"

/* A counted reference to one immutable snapshot. */
struct confref {
	struct conf_snapshot *snap;
	unsigned refs;
};

/*
 * Called after a new snapshot was swapped in (at a reload, not at
 * confstate_init), with that snapshot (borrowed for the call). The
 * callback reconciles what follows the configuration (instance sockets,
 * resolver, TLS trust) against its own state. Also called with NULL
 * once each time the configuration breaks (a reload that failed), so
 * that what is open under the old snapshot is not served on.
 */
typedef void (*confstate_reload_cb)(void *arg,
    const struct conf_snapshot *next);

struct confstate {
	char *path;
	struct confref *cur; /* NULL: the configuration is broken */
	uint64_t generation; /* of the last snapshot swapped in */
	confstate_reload_cb cb;
	void *cb_arg;
	/* Nonzero while confstate_get_for() reloads: the callback runs in
	 * the middle of a caller's work (a request deciding, a frame being
	 * handled), whose objects it must not free. */
	int in_use;
	/* The watch over the current snapshot's files (off while broken,
	 * and for good once unwatched is set). */
	struct confwatch watch;
	int unwatched;
	/* The configuration file's identity at the failed parse. */
	int broken_unread; /* the file could not be read at all
					   (EMFILE, ENOMEM, ...): try again at
					   the next use, changed or not */
	int broken_exists;
	dev_t broken_dev;
	ino_t broken_ino;
	off_t broken_size;
	int64_t broken_mtime_ns;
	int64_t broken_ctime_ns;
	/*
	 * What `show status` and the metrics report. The configuration is
	 * valid when cur != NULL (confstate_is_valid()); broken_since_unix
	 * is the wall time it broke (0 while valid), loaded_unix the last
	 * successful load, failures the failed re-parses so far.
	 */
	uint64_t reloads;	   /* successful re-parses */
	uint64_t failures;	   /* failed re-parses */
	int64_t loaded_unix;	   /* wall time of the last swap-in */
	int64_t broken_since_unix; /* wall time of the break, 0: valid */
	char *error;		   /* first error of the failed parse
					   (bounded), NULL when not broken */
	char **errors;		   /* every error of the failed parse,
					   bounded, at most CONFSTATE_ERRORS_MAX */
	size_t nerrors;
};

#define CONFSTATE_ERRORS_MAX 32

/*
 * Load the configuration at path as the first snapshot (generation 1).
 * cb (may be NULL) is called after each later successful reload. Return 0,
 * or the conf_load() error with every message in reterr (nothing is
 * logged: the caller prints them and exits).
 */
int confstate_init(struct confstate *cs, const char *path,
    confstate_reload_cb cb, void *arg, struct conf_errors *reterr);

/* Drop the current snapshot reference and free everything. */
void confstate_done(struct confstate *cs);

/*
 * Return a new reference to the snapshot to decide with now, or NULL when
 * the configuration is broken (policy-unavailable). First re-parse when a
 * file changed (current snapshot stale, or, while broken, the
 * configuration file's identity changed), with in_use set around the
 * callback. Release the reference with confref_unref().
 */
struct confref *confstate_get(struct confstate *cs);

/*
 * The same for a decision of one instance: only the files such a decision
 * reads are checked (conf_snapshot_is_stale_for()), a few stat(2) calls
 * however many instances are configured. NULL checks every file.
 */
struct confref *confstate_get_for(struct confstate *cs, const char *instance);

/*
 * Return the current configuration error (the first message of the
 * failed parse, bounded; borrowed until the next reload), or NULL when
 * the configuration is fine.
 */
const char *confstate_error(const struct confstate *cs);

/* Re-read the configuration now (SIGHUP), whether or not it changed. */
void confstate_reload(struct confstate *cs);

/*
 * Re-read the configuration if any file changed, as the next request
 * would (confstate_get() with the reference dropped), by the stat() calls
 * whatever the watch says. Called from a timer once a second, so that a
 * file that broke (or was fixed) is reported at once instead of at the
 * next request, and a change the watch cannot see (a file system mounted
 * over a folder, say) is noticed within that second.
 */
void confstate_poll(struct confstate *cs);

/*
 * Stop using the watch for good: every later look runs the stat() calls
 * (for a broker whose once-a-second check no longer runs).
 */
void confstate_unwatch(struct confstate *cs);

/* Answer whether a snapshot is in force (1) or the file is broken (0). */
int confstate_is_valid(const struct confstate *cs);

/*
 * Return a new JSON array with one object per instance of s whose
 * manifest is refused: "instance", "plugin", "entry" (FILE:LINE of its
 * [plugins.entries.NAME] header) and "error" (the manifest's error).
 * Empty when none is; NULL on out-of-memory.
 */
json_t *confstate_refused_json(const struct conf_snapshot *s);

/*
 * Call fn once per egress_allow_private entry of s that only
 * egress_allow_loopback can open (a loopback literal, a localhost name or
 * *.localhost), with the warning "FILE:LINE: warning: ..." naming the key
 * to use (borrowed for the call). Return how many.
 */
size_t confstate_carve_warnings(const struct conf_snapshot *s,
    void (*fn)(void *arg, const char *msg), void *arg);

/*
 * Return a new JSON array of those warnings, or NULL when there is none
 * (or on out-of-memory).
 */
json_t *confstate_warnings_json(const struct conf_snapshot *s);

/* Take another reference; NULL is passed through. */
struct confref *confref_ref(struct confref *r);

/* Release a reference; the last one frees the snapshot. NULL is a no-op. */
void confref_unref(struct confref *r);

#endif /* EGRESS_BROKER_CONFSTATE_H */
