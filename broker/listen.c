/* SPDX-License-Identifier: ISC */
/*
 * Instance sockets and the control socket of egressd: creation with a
 * safe mode from the first moment (set on the socket before bind(), under
 * a matching umask), then chown and chmod without following links, in a
 * folder that only root and the broker can change, checked component by
 * component from "/" without following any symlink; reconciliation
 * against each new snapshot, and the control socket's permissions, which
 * follow [broker] control_uids/control_gids. See listen.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>
#include <jansson.h>

#include <egress/error.h>

#include "broker/listen.h"
#include "broker/log.h"

#define LISTEN_RETRY_MS	   100 /* after accept() fails (EMFILE) */
#define LISTEN_DIR_REFUSED "instance_socket_dir refused: "
#define LISTEN_CHOWN_HINT \
	"chown: a group needs the broker in it " \
	"(SupplementaryGroups=), an owner needs CAP_CHOWN; see " \
	"docs/deployment.md"

struct lsock {
	struct lsock *next;
	struct listen_ctx *ctx;
	char *instance; /* NULL for the control socket */
	char *path;
	struct evconnlistener *lev;
	struct event *retry;
	int seen;      /* reconcile mark */
	int keep_file; /* close, leave the file */
	int applied;   /* uid/gid below are in force */
	uid_t uid;
	gid_t gid;
};

struct listen_ctx {
	struct event_base *base;
	listen_accept_cb cb;
	listen_control_cb ccb;
	listen_revoke_cb rcb;
	void *cb_arg;
	struct lsock *socks; /* instance sockets */
	struct lsock *control;
	size_t nsocks;
	const char *err_call; /* of the last failed socket */
	int err_errno;
};

static void
listen_log(const char *what, const char *instance, const char *path,
    int errnum)
{
	json_t *o;

	o = json_object();
	if (o == NULL)
		return;
	(void)json_object_set_new(o, "status", json_string("error"));
	(void)json_object_set_new(o, "what", json_string(what));
	if (instance != NULL)
		(void)json_object_set_new(o, "instance",
		    log_bounded_string(instance, strlen(instance)));
	if (path != NULL)
		(void)json_object_set_new(o, "path",
		    log_bounded_string(path, strlen(path)));
	if (errnum != 0)
		(void)json_object_set_new(o, "errno",
		    json_string(strerror(errnum)));
	log_event("egress.listen", o);
}

/* Parse a user (or group) as a decimal id or a name. */
static int
listen_resolve_uid(const char *s, uid_t *ret)
{
	struct passwd pw, *res = NULL;
	char buf[4096], *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (*s >= '0' && *s <= '9' && *end == '\0' && errno == 0 &&
	    v < (unsigned long)(uid_t)-1) {
		*ret = (uid_t)v;
		return 0;
	}
	if (getpwnam_r(s, &pw, buf, sizeof(buf), &res) != 0 || res == NULL)
		return EGRESS_ERR_NOT_FOUND;
	*ret = pw.pw_uid;
	return 0;
}

static int
listen_resolve_gid(const char *s, gid_t *ret)
{
	struct group gr, *res = NULL;
	char buf[4096], *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (*s >= '0' && *s <= '9' && *end == '\0' && errno == 0 &&
	    v < (unsigned long)(gid_t)-1) {
		*ret = (gid_t)v;
		return 0;
	}
	if (getgrnam_r(s, &gr, buf, sizeof(buf), &res) != 0 || res == NULL)
		return EGRESS_ERR_NOT_FOUND;
	*ret = gr.gr_gid;
	return 0;
}

/*
 * chmod by path without following a symlink (someone may have swapped
 * the socket for one): a link fails (EOPNOTSUPP) and nothing changes.
 */
static int
listen_chmod(int dirfd, const char *name, mode_t mode)
{
	return fchmodat(dirfd, name, mode, AT_SYMLINK_NOFOLLOW);
}

/*
 * Create a listening Unix socket at path, which is name in the folder
 * dirfd (AT_FDCWD with name == path for the control socket), with mode.
 * A stale socket file is replaced; anything else in the way is
 * EGRESS_ERR_EXISTS. The mode is set on the socket before bind() (Linux
 * creates the file with the socket inode's mode less the umask), so the
 * file is never wider than mode. bind() takes a path: for an instance
 * socket, every component of that path was checked to be a folder that
 * only root and the broker can change (listen_dir_open()), so nobody
 * else can re-point it between the check and the bind.
 */
static int
listen_unix(int dirfd, const char *name, const char *path, mode_t mode,
    int *ret_fd, const char **reterr_call)
{
	struct sockaddr_un sun;
	struct stat st;
	mode_t old;
	int fd = -1, err = EGRESS_ERR_IO, saved;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	*reterr_call = "bind";
	if (strlen(path) >= sizeof(sun.sun_path)) {
		errno = ENAMETOOLONG;
		return EGRESS_ERR_TOO_BIG;
	}
	memcpy(sun.sun_path, path, strlen(path));
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			*reterr_call = "bind (not a socket in the way)";
			errno = EEXIST;
			return EGRESS_ERR_EXISTS;
		}
		if (unlinkat(dirfd, name, 0) != 0) {
			*reterr_call = "unlink (a stale socket)";
			return EGRESS_ERR_IO;
		}
	}
	*reterr_call = "socket";
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return EGRESS_ERR_IO;
	*reterr_call = "fchmod";
	if (fchmod(fd, mode) != 0)
		goto out;
	*reterr_call = "bind";
	old = umask((mode_t)(~mode & 0777));
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		(void)umask(old);
		goto out;
	}
	(void)umask(old);
	*reterr_call = "listen";
	if (listen(fd, LISTEN_BACKLOG) != 0) {
		saved = errno;
		(void)unlinkat(dirfd, name, 0);
		errno = saved;
		goto out;
	}
	*ret_fd = fd;
	fd = -1;
	err = 0;
out:
	saved = errno;
	if (fd >= 0)
		(void)close(fd);
	errno = saved;
	return err;
}

static void
listen_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct lsock *ls = arg;

	if (ls->lev != NULL)
		(void)evconnlistener_enable(ls->lev);
}

static void
listen_error_cb(struct evconnlistener *lev, void *arg)
{
	struct lsock *ls = arg;
	struct timeval tv = { 0, LISTEN_RETRY_MS * 1000 };

	/* Out of descriptors or memory: back off instead of spinning. */
	listen_log("accept", ls->instance, ls->path, EVUTIL_SOCKET_ERROR());
	(void)evconnlistener_disable(lev);
	if (ls->retry != NULL)
		(void)event_add(ls->retry, &tv);
}

static void
listen_instance_cb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct lsock *ls = arg;

	ls->ctx->cb(ls->ctx->cb_arg, fd, ls->instance);
}

static void
listen_control_accept_cb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct lsock *ls = arg;
	struct listen_ctx *l = ls->ctx;

	if (l->ccb == NULL) {
		(void)close(fd);
		return;
	}
	l->ccb(l->cb_arg, fd);
}

static void
lsock_free(struct lsock *ls)
{
	if (ls == NULL)
		return;
	if (ls->lev != NULL) {
		evconnlistener_free(ls->lev);
		if (!ls->keep_file)
			(void)unlink(ls->path);
	}
	if (ls->retry != NULL)
		event_free(ls->retry);
	free(ls->instance);
	free(ls->path);
	free(ls);
}

/* Open a listener at path, which is name in the folder dirfd. */
static int
lsock_open(struct listen_ctx *l, const char *instance, int dirfd,
    const char *name, const char *path, mode_t mode, evconnlistener_cb cb,
    struct lsock **ret)
{
	struct lsock *ls;
	int fd = -1, err;

	if ((ls = calloc(1, sizeof(*ls))) == NULL)
		return EGRESS_ERR_NOMEM;
	ls->ctx = l;
	if ((ls->path = strdup(path)) == NULL ||
	    (instance != NULL && (ls->instance = strdup(instance)) == NULL) ||
	    (ls->retry = evtimer_new(l->base, listen_retry_cb, ls)) == NULL) {
		lsock_free(ls);
		return EGRESS_ERR_NOMEM;
	}
	err = listen_unix(dirfd, name, path, mode, &fd, &l->err_call);
	if (err != 0) {
		l->err_errno = errno;
		lsock_free(ls);
		return err;
	}
	ls->lev = evconnlistener_new(l->base, cb, ls,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
	if (ls->lev == NULL) {
		(void)close(fd);
		(void)unlinkat(dirfd, name, 0);
		lsock_free(ls);
		return EGRESS_ERR_NOMEM;
	}
	evconnlistener_set_error_cb(ls->lev, listen_error_cb);
	*ret = ls;
	return 0;
}

int
listen_new(struct event_base *base, listen_accept_cb cb, listen_control_cb ccb,
    void *arg, struct listen_ctx **ret)
{
	struct listen_ctx *l;

	if ((l = calloc(1, sizeof(*l))) == NULL)
		return EGRESS_ERR_NOMEM;
	l->base = base;
	l->cb = cb;
	l->ccb = ccb;
	l->cb_arg = arg;
	*ret = l;
	return 0;
}

/*
 * Apply owner, group and mode to an instance socket. An unset
 * socket_owner / socket_group is the broker's own euid / egid, so that
 * removing the line takes the old owner's or group's access away (the
 * broker may always chown a file it owns to itself and its own group).
 * When the owner or group of a socket that was already set up changes
 * (or can no longer be applied), the connections accepted under the old
 * one are revoked through the revoke callback. Return 0; -1 when they
 * cannot be applied (the socket is left 0600, owned by the broker); -2
 * when it could not even be given back to the broker, 0600 (to be
 * closed).
 */
static int
listen_apply_owner(struct lsock *ls, const struct conf_instance *ci, int dirfd,
    const char *name, const char *path)
{
	struct listen_ctx *l = ls->ctx;
	uid_t uid = geteuid();
	gid_t gid = getegid();
	int was = ls->applied, rv = -1;

	ls->applied = 0;
	if (ci->socket_owner != NULL &&
	    listen_resolve_uid(ci->socket_owner, &uid) != 0) {
		listen_log("unknown socket_owner", ci->name, path, 0);
		goto closed;
	}
	if (ci->socket_group != NULL &&
	    listen_resolve_gid(ci->socket_group, &gid) != 0) {
		listen_log("unknown socket_group", ci->name, path, 0);
		goto closed;
	}
	if (fchownat(dirfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
		listen_log(errno == EPERM ? LISTEN_CHOWN_HINT : "chown",
		    ci->name, path, errno);
		goto closed;
	}
	if (listen_chmod(dirfd, name, 0660) != 0) {
		listen_log("chmod", ci->name, path, errno);
		goto closed;
	}
	if (was && (uid != ls->uid || gid != ls->gid) && l->rcb != NULL)
		l->rcb(l->cb_arg, ci->name);
	ls->applied = 1;
	ls->uid = uid;
	ls->gid = gid;
	return 0;
closed:
	/* Closed, never the old owner or group: no access but the owner's,
	 * then the file back to the broker (an old owner that kept it could
	 * still connect, and give it to anyone with chmod), then no access
	 * but the owner's once more: until the chown the old owner could
	 * still widen the mode, and a chown keeps it. A socket that cannot
	 * be made the broker's alone is closed by the caller. */
	(void)listen_chmod(dirfd, name, 0600);
	if (fchownat(dirfd, name, geteuid(), getegid(), AT_SYMLINK_NOFOLLOW) !=
	    0) {
		listen_log("chown to the broker", ci->name, path, errno);
		rv = -2;
	} else if (listen_chmod(dirfd, name, 0600) != 0) {
		listen_log("chmod", ci->name, path, errno);
		rv = -2;
	}
	if (was && l->rcb != NULL)
		l->rcb(l->cb_arg, ci->name);
	return rv;
}

void
listen_set_revoke_cb(struct listen_ctx *l, listen_revoke_cb rcb)
{
	l->rcb = rcb;
}

static int
listen_name_ok(const char *name)
{
	return name[0] != '\0' && name[0] != '.' && strchr(name, '/') == NULL;
}

/* Log why instance_socket_dir is refused, naming the component at fault. */
static void
listen_dir_log(const char *dir, const char *component, size_t clen,
    const char *why, int errnum)
{
	json_t *o;

	o = json_object();
	if (o == NULL)
		return;
	(void)json_object_set_new(o, "status", json_string("error"));
	(void)json_object_set_new(o, "what", json_string(why));
	(void)json_object_set_new(o, "path",
	    log_bounded_string(dir, strlen(dir)));
	(void)json_object_set_new(o, "component",
	    log_bounded_string(component, clen));
	if (errnum != 0)
		(void)json_object_set_new(o, "errno",
		    json_string(strerror(errnum)));
	log_event("egress.listen", o);
}

/*
 * The next component of a path from p, skipping runs of '/' and "."
 * components; NULL at the end. *ret_len is its length.
 */
static const char *
listen_next_component(const char *p, size_t *ret_len)
{
	size_t n;

	for (;;) {
		while (*p == '/')
			p++;
		if (*p == '\0')
			return NULL;
		n = strcspn(p, "/");
		if (n != 1 || p[0] != '.') {
			*ret_len = n;
			return p;
		}
		p++;
	}
}

/*
 * Why the folder st (the socket folder itself when final) cannot hold
 * the instance sockets, or NULL when it can. Only root and the broker's
 * euid may own it, and no one else may write to it: whoever can write to
 * a folder can rename or replace what is in it (a socket, or the next
 * folder of the path, for a link to a folder holding a socket of their
 * own). A parent with the sticky bit (/tmp, 1777) is the exception: there
 * others can only add names, never rename or remove the entries of root
 * or the broker, and the next component is itself checked to belong to
 * one of them, so the path still leads where it was checked to. The
 * socket folder itself is never allowed to be writable by others.
 */
static const char *
listen_dir_fault(const struct stat *st, int final)
{
	if (S_ISLNK(st->st_mode))
		return LISTEN_DIR_REFUSED "a component is a symlink";
	if (!S_ISDIR(st->st_mode))
		return LISTEN_DIR_REFUSED "a component is not a folder";
	if (st->st_uid != 0 && st->st_uid != geteuid())
		return LISTEN_DIR_REFUSED "a component is owned by a user "
					  "other than root and the broker";
	if ((st->st_mode & 022) == 0)
		return NULL;
	if (final)
		return LISTEN_DIR_REFUSED "the folder is group- or "
					  "world-writable";
	if ((st->st_mode & S_ISVTX) == 0)
		return LISTEN_DIR_REFUSED
		    "a parent folder is group- or "
		    "world-writable without the sticky bit";
	return NULL;
}

/*
 * Open the instance socket folder dir (relative: to the working folder)
 * one component at a time from "/", each with O_PATH | O_NOFOLLOW |
 * O_DIRECTORY relative to the one before, so no symlink is ever
 * followed, and check each with listen_dir_fault(). A missing last
 * component is created (0755, one level) in its checked parent. Return 0
 * and write *ret_fd (O_PATH, CLOEXEC; the caller closes it), or -1 after
 * logging the path and the component at fault. Nobody but root and the
 * broker can change any component that passed, so paths through the
 * folder (bind() takes one) lead to the folder that was checked.
 */
static int
listen_dir_open(const char *dir, int *ret_fd)
{
	char path[PATH_MAX], name[NAME_MAX + 1];
	const char *p, *next, *why;
	struct stat st;
	size_t n, nextn = 0, cwdlen;
	int fd = -1, nfd, err;

	if (dir[0] == '/') {
		if (strlen(dir) >= sizeof(path)) {
			listen_dir_log(dir, dir, strlen(dir),
			    LISTEN_DIR_REFUSED "path too long", ENAMETOOLONG);
			return -1;
		}
		memcpy(path, dir, strlen(dir) + 1);
	} else {
		if (getcwd(path, sizeof(path)) == NULL) {
			listen_dir_log(dir, ".", 1,
			    LISTEN_DIR_REFUSED
			    "relative path and no working folder",
			    errno);
			return -1;
		}
		cwdlen = strlen(path);
		if ((size_t)snprintf(path + cwdlen, sizeof(path) - cwdlen,
			"/%s", dir) >= sizeof(path) - cwdlen) {
			listen_dir_log(dir, dir, strlen(dir),
			    LISTEN_DIR_REFUSED "path too long", ENAMETOOLONG);
			return -1;
		}
	}
	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		listen_dir_log(dir, "/", 1, LISTEN_DIR_REFUSED "cannot open",
		    errno);
		goto fail;
	}
	p = listen_next_component(path, &n);
	if ((why = listen_dir_fault(&st, p == NULL)) != NULL) {
		listen_dir_log(dir, "/", 1, why, 0);
		goto fail;
	}
	for (; p != NULL; p = next, n = nextn) {
		next = listen_next_component(p + n, &nextn);
		if (n > NAME_MAX) {
			listen_dir_log(dir, path, (size_t)(p - path) + n,
			    LISTEN_DIR_REFUSED "name too long", ENAMETOOLONG);
			goto fail;
		}
		memcpy(name, p, n);
		name[n] = '\0';
		nfd = openat(fd, name,
		    O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
		if (nfd < 0 && errno == ENOENT && next == NULL) {
			if (mkdirat(fd, name, 0755) != 0 && errno != EEXIST) {
				listen_dir_log(dir, path,
				    (size_t)(p - path) + n,
				    LISTEN_DIR_REFUSED "cannot create the "
						       "folder",
				    errno);
				goto fail;
			}
			nfd = openat(fd, name,
			    O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
		}
		if (nfd < 0) {
			err = errno;
			if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    (why = listen_dir_fault(&st, next == NULL)) !=
				NULL)
				err = 0;
			else
				why = LISTEN_DIR_REFUSED "cannot open";
			listen_dir_log(dir, path, (size_t)(p - path) + n, why,
			    err);
			goto fail;
		}
		(void)close(fd);
		fd = nfd;
		if (fstat(fd, &st) != 0) {
			listen_dir_log(dir, path, (size_t)(p - path) + n,
			    LISTEN_DIR_REFUSED "cannot open", errno);
			goto fail;
		}
		if ((why = listen_dir_fault(&st, next == NULL)) != NULL) {
			listen_dir_log(dir, path, (size_t)(p - path) + n, why,
			    0);
			goto fail;
		}
	}
	*ret_fd = fd;
	return 0;
fail:
	if (fd >= 0)
		(void)close(fd);
	return -1;
}

/*
 * A reload found dir unsafe: stop serving the sockets there. Their files
 * are left (unlinking through a folder that may now lead elsewhere could
 * remove someone else's file); the next reconcile with a safe folder
 * replaces them. Open connections are not touched.
 */
static void
listen_drop_dir(struct listen_ctx *l, const char *dir)
{
	struct lsock *ls, **pp;
	size_t n = strlen(dir);

	for (pp = &l->socks; *pp != NULL;) {
		ls = *pp;
		if (strncmp(ls->path, dir, n) != 0 || ls->path[n] != '/' ||
		    strchr(ls->path + n + 1, '/') != NULL) {
			pp = &ls->next;
			continue;
		}
		*pp = ls->next;
		l->nsocks--;
		ls->keep_file = 1;
		lsock_free(ls);
	}
}

int
listen_reconcile(struct listen_ctx *l, const struct conf_snapshot *s)
{
	struct lsock *ls, **pp;
	char path[PATH_MAX], file[NAME_MAX + 1];
	size_t i;
	int bad = 0, err, dirfd = -1;

	if (listen_dir_open(s->instance_socket_dir, &dirfd) != 0) {
		listen_drop_dir(l, s->instance_socket_dir);
		return (int)s->ninstances;
	}
	for (ls = l->socks; ls != NULL; ls = ls->next)
		ls->seen = 0;
	for (i = 0; i < s->ninstances; i++) {
		const struct conf_instance *ci = &s->instances[i];

		if (!listen_name_ok(ci->name) ||
		    (size_t)snprintf(file, sizeof(file), "%s.sock",
			ci->name) >= sizeof(file) ||
		    (size_t)snprintf(path, sizeof(path), "%s/%s",
			s->instance_socket_dir, file) >= sizeof(path)) {
			listen_log("bad socket path", ci->name, NULL, 0);
			bad++;
			continue;
		}
		for (ls = l->socks; ls != NULL; ls = ls->next)
			if (strcmp(ls->instance, ci->name) == 0 &&
			    strcmp(ls->path, path) == 0)
				break;
		if (ls == NULL) {
			err = lsock_open(l, ci->name, dirfd, file, path, 0600,
			    listen_instance_cb, &ls);
			if (err != 0) {
				listen_log("socket", ci->name, path,
				    err == EGRESS_ERR_TOO_BIG ? ENAMETOOLONG :
								errno);
				bad++;
				continue;
			}
			ls->next = l->socks;
			l->socks = ls;
			l->nsocks++;
		}
		ls->seen = 1;
		if ((err = listen_apply_owner(ls, ci, dirfd, file, path)) !=
		    0) {
			bad++;
			if (err == -2)
				ls->seen = 0; /* not even ours: closed below */
		}
	}
	(void)close(dirfd);
	for (pp = &l->socks; *pp != NULL;) {
		ls = *pp;
		if (ls->seen) {
			pp = &ls->next;
			continue;
		}
		*pp = ls->next;
		l->nsocks--;
		lsock_free(ls);
	}
	return bad;
}

void
listen_control_mode(const struct conf_snapshot *s, mode_t *ret_mode,
    gid_t *ret_gid)
{
	size_t i;

	*ret_gid = (gid_t)-1;
	for (i = 0; i < s->ncontrol_uids; i++)
		if (s->control_uids[i] != 0) {
			*ret_mode = 0666;
			return;
		}
	if (s->ncontrol_gids > 0) {
		*ret_mode = 0660;
		*ret_gid = s->control_gids[0];
		return;
	}
	*ret_mode = 0600;
}

/*
 * Apply the control socket's group, then its mode. A group that cannot
 * be set leaves the socket at 0600 (closed, never wider than meant).
 */
static int
listen_control_perm(const struct conf_snapshot *s, const char *path)
{
	mode_t mode;
	gid_t gid;

	listen_control_mode(s, &mode, &gid);
	if (gid != (gid_t)-1 &&
	    fchownat(AT_FDCWD, path, (uid_t)-1, gid, AT_SYMLINK_NOFOLLOW) !=
		0) {
		listen_log(errno == EPERM ?
			"control socket group: " LISTEN_CHOWN_HINT :
			"control socket group",
		    NULL, path, errno);
		(void)listen_chmod(AT_FDCWD, path, 0600);
		return EGRESS_ERR_IO;
	}
	if (listen_chmod(AT_FDCWD, path, mode) != 0) {
		listen_log("control socket mode", NULL, path, errno);
		return EGRESS_ERR_IO;
	}
	return 0;
}

int
listen_control_open(struct listen_ctx *l, const struct conf_snapshot *s)
{
	struct lsock *ls;
	int err;

	if (l->control == NULL ||
	    strcmp(l->control->path, s->control_socket) != 0) {
		err = lsock_open(l, NULL, AT_FDCWD, s->control_socket,
		    s->control_socket, 0600, listen_control_accept_cb, &ls);
		if (err != 0)
			return err;
		lsock_free(l->control);
		l->control = ls;
	}
	(void)listen_control_perm(s, l->control->path);
	return 0;
}

void
listen_stop(struct listen_ctx *l)
{
	struct lsock *ls;

	while ((ls = l->socks) != NULL) {
		l->socks = ls->next;
		lsock_free(ls);
	}
	l->nsocks = 0;
	lsock_free(l->control);
	l->control = NULL;
}

void
listen_free(struct listen_ctx *l)
{
	if (l == NULL)
		return;
	listen_stop(l);
	free(l);
}

void
listen_last_error(const struct listen_ctx *l, const char **ret_call,
    int *ret_errno)
{
	*ret_call = l->err_call != NULL ? l->err_call : "socket";
	*ret_errno = l->err_errno;
}

size_t
listen_count(const struct listen_ctx *l)
{
	return l->nsocks;
}
