/* SPDX-License-Identifier: ISC */
/*
 * confwatch: an inotify watch over the files a snapshot was built from,
 * so that a look at the configuration costs one epoll_wait(2) on the
 * watch instead of a stat(2) per file while nothing changed. The watch only
 * ever says "nothing changed"; anything it cannot vouch for sends the
 * caller back to the stat-based check (conf_snapshot_is_stale()).
 *
 * What is watched, for each file: the file itself when it exists (its
 * writes and attribute changes, by whatever path they are made), its
 * folder's entries of that name (created, deleted, renamed onto or
 * away), and each folder above it being moved, deleted, or changing mode
 * or owner; and the mount table. An inotify
 * event is queued by the system call that makes the change, before that
 * call returns, so a look that reads the watch after a request arrived
 * sees every such change made before the request was sent.
 *
 * Not used (the stat check runs at every look, as without the watch)
 * when a path goes through a symbolic link (the link could be re-pointed
 * in a folder that is not watched), when a file or its folder is not on
 * a local file system inotify fully sees (ext2/3/4, XFS, Btrfs, F2FS,
 * tmpfs: not NFS, FUSE or an overlay, which can change beneath it), when
 * a folder does not exist or cannot be watched (limits, permissions); and
 * when a folder's names are case-folded; and from a lost event (the
 * queue overflowed, a watched folder moved, anything mounted or
 * unmounted: inotify does not report a file system mounted over a
 * folder) until the watch is set up again after the next stat check.
 * What inotify does not report at all (a write through a shared mapping
 * or native AIO by a writer that keeps the file open) is left to the
 * stat check, which the caller runs at least once a second whatever the
 * watch says.
 */
#ifndef EGRESS_BROKER_CONFWATCH_H
#define EGRESS_BROKER_CONFWATCH_H

#include <stddef.h>

struct conf_snapshot;

struct confwatch_name; /* (watch, file name in that folder) pairs */

struct confwatch {
	int fd;	    /* the inotify descriptor; -1: no watch */
	int ep;	    /* an epoll set of fd and mounts */
	int mounts; /* /proc/self/mountinfo, which polls as changed at a
		       mount or unmount */
	/* CONFWATCH_*: what the watch can vouch for now. */
	int state;
	struct confwatch_name *names;
	size_t nnames;
	char why[320]; /* while off: why ("" before any setting up) */
};

/* No watch: every look runs the stat check. */
#define CONFWATCH_OFF	     0
/* Set up, not yet confirmed by a stat check after it: changes made
 * between the files' reading and the watch's setting up are not in it. */
#define CONFWATCH_UNVERIFIED 1
/* Every change since the last stat check is in the watch's queue. */
#define CONFWATCH_TRUSTED    2
/* A watched folder moved or went away, or events were lost: set the
 * watch up again after the next stat check. */
#define CONFWATCH_REARM	     3

/* Start with no watch (CONFWATCH_OFF). */
void confwatch_init(struct confwatch *w);

/*
 * Watch the files of s from now on, replacing any earlier watch. Ends
 * CONFWATCH_UNVERIFIED, or CONFWATCH_OFF when the files cannot all be
 * watched (see above).
 */
void confwatch_arm(struct confwatch *w, const struct conf_snapshot *s);

/* Drop the watch (CONFWATCH_OFF), saying why (copied; NULL: none). */
void confwatch_off(struct confwatch *w, const char *why);

/*
 * Describe how changes are found now, for `show status`: "inotify" while
 * the watch is set up, else "stat" and why it is not (borrowed until the
 * next call on w).
 */
const char *confwatch_describe(const struct confwatch *w);

/*
 * Answer 1 when the watch vouches that no file of its snapshot changed
 * since the last stat check (it is trusted, its queue holds no event
 * about them and nothing was mounted or unmounted), else 0: the caller
 * must run the stat check over every file, and call confwatch_settle()
 * if the snapshot is still current. One epoll_wait() when nothing
 * happened; reads the queue when it holds events (a bounded number of
 * reads: a longer queue is dropped, the watch set up again).
 */
int confwatch_quiet(struct confwatch *w);

/*
 * A stat check over every file of s found the snapshot current: trust
 * the watch from here on, or set it up again first when it must be (it
 * is then trusted after the next such check).
 */
void confwatch_settle(struct confwatch *w, const struct conf_snapshot *s);

#endif /* EGRESS_BROKER_CONFWATCH_H */
