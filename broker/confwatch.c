/* SPDX-License-Identifier: ISC */
/*
 * The inotify watch over a snapshot's files (confwatch.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include "broker/confwatch.h"
#include "conf/conf.h"

/* A file's folder: the entries that could replace or remove the file, and
 * the folder itself going away. */
#define DIR_MASK \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | \
	    IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVE_SELF | IN_DELETE_SELF)
/* The file: its bytes and its attributes (mode, owner, links). */
#define FILE_MASK \
	(IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVE_SELF | \
	    IN_DELETE_SELF)
/* A folder above: only its moving or going away changes the path. */
#define UP_MASK (IN_MOVE_SELF | IN_DELETE_SELF)
/* Events after which the watches no longer stand for the paths. */
#define LOST_MASK \
	(IN_Q_OVERFLOW | IN_IGNORED | IN_MOVE_SELF | IN_DELETE_SELF | \
	    IN_UNMOUNT)

struct confwatch_name {
	int wd;	    /* the folder's watch */
	char *name; /* a watched file's name in it */
};

void
confwatch_init(struct confwatch *w)
{
	w->fd = -1;
	w->state = CONFWATCH_OFF;
	w->names = NULL;
	w->nnames = 0;
}

void
confwatch_off(struct confwatch *w)
{
	size_t i;

	if (w->fd >= 0)
		(void)close(w->fd);
	for (i = 0; i < w->nnames; i++)
		free(w->names[i].name);
	free(w->names);
	confwatch_init(w);
}

static int
confwatch_add_name(struct confwatch *w, int wd, const char *name)
{
	struct confwatch_name *v;

	v = realloc(w->names, (w->nnames + 1) * sizeof(*v));
	if (v == NULL)
		return -1;
	w->names = v;
	if ((v[w->nnames].name = strdup(name)) == NULL)
		return -1;
	v[w->nnames++].wd = wd;
	return 0;
}

/*
 * Answer whether path is on a local file system whose every change, by
 * any process of this host, inotify reports. Not on a network or FUSE
 * file system (changed elsewhere), nor on an overlay (its lower and
 * upper folders can be changed beside it), nor on one not listed.
 */
static int
confwatch_local(const char *path, int may_be_absent)
{
	struct statfs fs;

	if (statfs(path, &fs) != 0)
		return may_be_absent && errno == ENOENT;
	switch ((unsigned long)fs.f_type) {
	case EXT4_SUPER_MAGIC: /* also ext2 and ext3 */
	case XFS_SUPER_MAGIC:
	case BTRFS_SUPER_MAGIC:
	case TMPFS_MAGIC:
	case F2FS_SUPER_MAGIC:
		return 1;
	default:
		return 0;
	}
}

/* Answer whether every folder on the way to path is a real folder, not a
 * symbolic link, and path itself is no link (or absent). path is given
 * back unchanged. */
static int
confwatch_no_link(char *path)
{
	struct stat st;
	char *p;

	for (p = strchr(path + 1, '/'); p != NULL; p = strchr(p + 1, '/')) {
		*p = '\0';
		if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
			*p = '/';
			return 0;
		}
		*p = '/';
	}
	if (lstat(path, &st) != 0)
		return errno == ENOENT;
	return !S_ISLNK(st.st_mode);
}

/* Watch one file: itself, its folder's entry, the folders above. */
static int
confwatch_file(struct confwatch *w, const char *file)
{
	char path[PATH_MAX], *slash, *p;
	const char *dir, *base;
	int wd;

	if (file[0] == '\0' || strlen(file) >= sizeof(path))
		return -1;
	strcpy(path, file);
	if (!confwatch_no_link(path))
		return -1;
	if ((slash = strrchr(path, '/')) == NULL) {
		dir = ".";
		base = file;
	} else {
		base = file + (slash - path) + 1;
		*slash = '\0';
		dir = slash == path ? "/" : path;
	}
	if (*base == '\0' || !confwatch_local(dir, 0) ||
	    !confwatch_local(file, 1))
		return -1;
	wd = inotify_add_watch(w->fd, dir,
	    DIR_MASK | IN_ONLYDIR | IN_MASK_ADD);
	if (wd < 0 || confwatch_add_name(w, wd, base) != 0)
		return -1;
	if (inotify_add_watch(w->fd, file,
		FILE_MASK | IN_DONT_FOLLOW | IN_MASK_ADD) < 0 &&
	    errno != ENOENT)
		return -1;
	/* The folders above dir (not "/", which cannot move). */
	if (slash == NULL || slash == path)
		return 0;
	for (p = strchr(path + 1, '/'); p != NULL; p = strchr(p + 1, '/')) {
		*p = '\0';
		wd = inotify_add_watch(w->fd, path,
		    UP_MASK | IN_ONLYDIR | IN_MASK_ADD);
		*p = '/';
		if (wd < 0)
			return -1;
	}
	return 0;
}

void
confwatch_arm(struct confwatch *w, const struct conf_snapshot *s)
{
	size_t i;

	confwatch_off(w);
	if ((w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0) {
		w->fd = -1;
		return;
	}
	for (i = 0; i < s->nfiles; i++) {
		if (confwatch_file(w, s->files[i].path) != 0) {
			confwatch_off(w);
			return;
		}
	}
	w->state = CONFWATCH_UNVERIFIED;
}

/* Answer whether ev may be about a watched file, or about the watches. */
static int
confwatch_relevant(const struct confwatch *w, const struct inotify_event *ev)
{
	size_t i;

	if (ev->len == 0 || ev->name[0] == '\0')
		return 1; /* a watched file itself, or a folder itself */
	for (i = 0; i < w->nnames; i++)
		if (w->names[i].wd == ev->wd &&
		    strcmp(w->names[i].name, ev->name) == 0)
			return 1;
	return 0; /* another entry of a watched folder */
}

int
confwatch_quiet(struct confwatch *w)
{
	alignas(struct inotify_event) char buf[4096];
	const struct inotify_event *ev;
	ssize_t n, off;

	if (w->fd < 0)
		return 0;
	for (;;) {
		n = read(w->fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			confwatch_off(w);
			return 0;
		}
		for (off = 0; off < n;) {
			ev = (const struct inotify_event *)(buf + off);
			off += (ssize_t)(sizeof(*ev) + ev->len);
			if (ev->wd < 0 || (ev->mask & LOST_MASK) != 0)
				w->state = CONFWATCH_REARM;
			else if (w->state == CONFWATCH_TRUSTED &&
			    confwatch_relevant(w, ev))
				w->state = CONFWATCH_UNVERIFIED;
		}
	}
	return w->state == CONFWATCH_TRUSTED;
}

void
confwatch_settle(struct confwatch *w, const struct conf_snapshot *s)
{
	if (w->state == CONFWATCH_REARM)
		confwatch_arm(w, s);
	else if (w->state == CONFWATCH_UNVERIFIED)
		w->state = CONFWATCH_TRUSTED;
}
