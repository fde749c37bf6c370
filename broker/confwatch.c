/* SPDX-License-Identifier: ISC */
/*
 * The inotify watch over a snapshot's files (confwatch.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdalign.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/fs.h>
#include <linux/magic.h>

#include "broker/confwatch.h"
#include "conf/conf.h"

/* A file's folder: the entries that could replace or remove the file, and
 * the folder itself going away or changing mode or owner. Not the writes
 * to its files (the file's own watch has them): a log file written beside
 * the configuration would otherwise queue an event per line. */
#define DIR_MASK \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | \
	    IN_MOVE_SELF | IN_DELETE_SELF)
/* The file: its bytes and its attributes (mode, owner, links). */
#define FILE_MASK \
	(IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVE_SELF | \
	    IN_DELETE_SELF)
/* A folder above: its moving or going away changes the path, and its
 * mode, owner or ACL may make the file unreachable. (IN_ATTRIB on a
 * folder also reports its entries' attribute changes: in a busy folder
 * such as /etc each chmod or touch queues an event, which the name
 * filter drops at the cost of a read.) */
#define UP_MASK	    (IN_MOVE_SELF | IN_DELETE_SELF | IN_ATTRIB)
/* The most a look reads of the queue: a folder busy with other files
 * costs a bounded look, then a fresh watch without the backlog. */
#define QUIET_READS 4
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
	w->ep = -1;
	w->mounts = -1;
	w->state = CONFWATCH_OFF;
	w->names = NULL;
	w->nnames = 0;
	w->why[0] = '\0';
}

void
confwatch_off(struct confwatch *w, const char *why)
{
	size_t i;

	if (w->fd >= 0)
		(void)close(w->fd);
	if (w->ep >= 0)
		(void)close(w->ep);
	if (w->mounts >= 0)
		(void)close(w->mounts);
	for (i = 0; i < w->nnames; i++)
		free(w->names[i].name);
	free(w->names);
	confwatch_init(w);
	if (why != NULL)
		(void)snprintf(w->why, sizeof(w->why), "%s", why);
}

const char *
confwatch_describe(const struct confwatch *w)
{
	if (w->fd >= 0)
		return "inotify";
	return w->why[0] != '\0' ? w->why : "stat";
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

/* Why a path cannot be watched (confwatch_path_why()). */
#define PATH_OK		0
#define PATH_LINK	1 /* a symbolic link on the way, or the file one */
#define PATH_NO_FOLDER	2 /* a folder on the way does not exist */
#define PATH_UNREADABLE 3 /* lstat() failed otherwise */

/* Answer PATH_OK when every folder on the way to path is a real folder,
 * not a symbolic link, and path itself is no link (or absent); else why
 * not. path is given back unchanged. */
static int
confwatch_path_why(char *path)
{
	struct stat st;
	char *p;
	int why = PATH_OK;

	for (p = strchr(path + 1, '/'); p != NULL && why == PATH_OK;
	     p = strchr(p + 1, '/')) {
		*p = '\0';
		if (lstat(path, &st) != 0)
			why = errno == ENOENT ? PATH_NO_FOLDER :
						PATH_UNREADABLE;
		else if (!S_ISDIR(st.st_mode))
			why = S_ISLNK(st.st_mode) ? PATH_LINK : PATH_NO_FOLDER;
		*p = '/';
	}
	if (why != PATH_OK)
		return why;
	if (lstat(path, &st) != 0)
		return errno == ENOENT ? PATH_OK : PATH_UNREADABLE;
	return S_ISLNK(st.st_mode) ? PATH_LINK : PATH_OK;
}

/* Say why the watch is not used: "stat: FILE WHAT[: ERROR]". */
static void
confwatch_why(struct confwatch *w, const char *what, const char *file, int err)
{
	(void)snprintf(w->why, sizeof(w->why), "stat: %s%s%s%s%s",
	    file != NULL ? file : "", file != NULL ? " " : "", what,
	    err != 0 ? ": " : "", err != 0 ? strerror(err) : "");
}

/* Answer whether names in folder dir are told apart by case: a
 * case-folding folder could hold the file under a name the watch's
 * comparison would not match. */
static int
confwatch_case_exact(const char *dir)
{
	int fd, flags = 0, ok;

	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	ok = ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0 ?
	    errno == ENOTTY || errno == EOPNOTSUPP :
	    (flags & FS_CASEFOLD_FL) == 0;
	(void)close(fd);
	return ok;
}

/*
 * Watch one file: the folders above it from the top down (each watched
 * before the next is looked up, so a folder swapped meanwhile is either
 * the one watched or seen moving), its folder's entry, then the file.
 * None through a symbolic link.
 */
static int
confwatch_file(struct confwatch *w, const char *file)
{
	char path[PATH_MAX], *slash, *p;
	const char *dir, *base;
	int wd;

	if (file[0] == '\0' || strlen(file) >= sizeof(path)) {
		confwatch_why(w, "a path too long", NULL, 0);
		return -1;
	}
	strcpy(path, file);
	switch (confwatch_path_why(path)) {
	case PATH_OK:
		break;
	case PATH_LINK:
		confwatch_why(w, "goes through a symbolic link", file, 0);
		return -1;
	case PATH_NO_FOLDER:
		confwatch_why(w, "is in a folder that does not exist", file,
		    0);
		return -1;
	default:
		confwatch_why(w, "cannot be looked up", file, 0);
		return -1;
	}
	if ((slash = strrchr(path, '/')) == NULL) {
		dir = ".";
		base = file;
	} else {
		base = file + (slash - path) + 1;
		*slash = '\0';
		dir = slash == path ? "/" : path;
	}
	if (*base == '\0' || !confwatch_local(dir, 0) ||
	    !confwatch_local(file, 1)) {
		confwatch_why(w,
		    "is not on a local file system inotify fully sees", file,
		    0);
		return -1;
	}
	if (!confwatch_case_exact(dir)) {
		confwatch_why(w, "is in a folder whose names are case-folded",
		    file, 0);
		return -1;
	}
	/* The folders above dir (not "/", which cannot move), then dir. */
	for (p = strchr(path + 1, '/');
	     slash != NULL && slash != path && p != NULL && p < slash;
	     p = strchr(p + 1, '/')) {
		*p = '\0';
		wd = inotify_add_watch(w->fd, path,
		    UP_MASK | IN_ONLYDIR | IN_DONT_FOLLOW | IN_MASK_ADD);
		*p = '/';
		if (wd < 0) {
			confwatch_why(w, "cannot be watched", file, errno);
			return -1;
		}
	}
	wd = inotify_add_watch(w->fd, dir,
	    DIR_MASK | IN_ONLYDIR | IN_DONT_FOLLOW | IN_MASK_ADD);
	if (wd < 0 || confwatch_add_name(w, wd, base) != 0 ||
	    (inotify_add_watch(w->fd, file,
		 FILE_MASK | IN_DONT_FOLLOW | IN_MASK_ADD) < 0 &&
		errno != ENOENT)) {
		confwatch_why(w, "cannot be watched", file, errno);
		return -1;
	}
	return 0;
}

/* One epoll set for the queue and for the mount table's changes, which
 * inotify does not report (a file system mounted over a folder). */
static int
confwatch_epoll(struct confwatch *w)
{
	struct epoll_event ev = { 0 };

	w->ep = epoll_create1(EPOLL_CLOEXEC);
	w->mounts = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (w->ep < 0 || w->mounts < 0)
		return -1;
	ev.events = EPOLLIN;
	ev.data.fd = w->fd;
	if (epoll_ctl(w->ep, EPOLL_CTL_ADD, w->fd, &ev) != 0)
		return -1;
	ev.events = EPOLLPRI;
	ev.data.fd = w->mounts;
	return epoll_ctl(w->ep, EPOLL_CTL_ADD, w->mounts, &ev);
}

void
confwatch_arm(struct confwatch *w, const struct conf_snapshot *s)
{
	char why[sizeof(w->why)];
	size_t i;

	confwatch_off(w, NULL);
	if ((w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0 ||
	    confwatch_epoll(w) != 0) {
		(void)snprintf(why, sizeof(why), "stat: no inotify watch: %s",
		    strerror(errno));
		confwatch_off(w, why);
		return;
	}
	for (i = 0; i < s->nfiles; i++) {
		if (confwatch_file(w, s->files[i].path) != 0) {
			(void)snprintf(why, sizeof(why), "%s", w->why);
			confwatch_off(w, why);
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

/* Read the queue to its end, or QUIET_READS times; apply what it says. */
static void
confwatch_drain(struct confwatch *w)
{
	alignas(struct inotify_event) char buf[4096];
	const struct inotify_event *ev;
	ssize_t n, off;
	int reads = 0;

	while (w->fd >= 0) {
		if (reads++ == QUIET_READS) {
			w->state = CONFWATCH_REARM; /* drop the backlog */
			return;
		}
		n = read(w->fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			confwatch_off(w, "stat: the watch failed");
			return;
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
}

int
confwatch_quiet(struct confwatch *w)
{
	struct epoll_event evs[2];
	int i, n;

	if (w->fd < 0)
		return 0;
	do
		n = epoll_wait(w->ep, evs, 2, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		confwatch_off(w, "stat: the watch failed");
		return 0;
	}
	for (i = 0; i < n; i++) {
		if (evs[i].data.fd == w->mounts)
			w->state = CONFWATCH_REARM; /* a mount or unmount */
		else
			confwatch_drain(w);
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
