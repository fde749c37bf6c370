/* SPDX-License-Identifier: ISC */
/*
 * pkg: copying, comparing and removing plugin package folders with
 * openat()/fdopendir() and O_NOFOLLOW throughout, so a package can never
 * make egressctl read or write outside the folders it was pointed at.
 * See pkg.h for the rules.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <egress/error.h>

#include "broker/ctl/pkg.h"
#include "conf/conf.h"
#include "policy/policy.h"

struct copy_state {
	size_t files;
	unsigned long long bytes;
	char *err;
	size_t errlen;
	const char *src;
};

static int
fail(struct copy_state *cs, int rc, const char *what, const char *why)
{
	if (cs->err != NULL && cs->errlen > 0)
		(void)snprintf(cs->err, cs->errlen, "%s: %s: %s", cs->src,
		    what, why);
	return rc;
}

int
pkg_name_is_valid(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > PKG_NAME_MAX || s[0] == '.' || s[0] == '-')
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			(c >= '0' && c <= '9') || c == '.' || c == '_' ||
			c == '+' || c == '-'))
			return 0;
	}
	return 1;
}

static int
copy_file(struct copy_state *cs, int sfd, int dfd, const char *name,
    const struct stat *st)
{
	char buf[65536];
	int in = -1, out = -1, rc = EGRESS_ERR_IO;
	struct stat st2;
	ssize_t r;

	in = openat(sfd, name,
	    O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (in == -1)
		return fail(cs, EGRESS_ERR_IO, name, strerror(errno));
	/* The file we opened must be the one we examined. */
	if (fstat(in, &st2) == -1 || !S_ISREG(st2.st_mode) ||
	    st2.st_ino != st->st_ino || st2.st_dev != st->st_dev) {
		rc = fail(cs, EGRESS_ERR_INVALID, name,
		    "changed while copied");
		goto out;
	}
	out = openat(dfd, name,
	    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    (st->st_mode & 0111) ? 0755 : 0644);
	if (out == -1) {
		rc = fail(cs, EGRESS_ERR_IO, name, strerror(errno));
		goto out;
	}
	for (;;) {
		r = read(in, buf, sizeof(buf));
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			rc = fail(cs, EGRESS_ERR_IO, name, strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		cs->bytes += (unsigned long long)r;
		if (cs->bytes > PKG_BYTES_MAX) {
			rc = fail(cs, EGRESS_ERR_TOO_BIG, name,
			    "package larger than 256 MiB");
			goto out;
		}
		if (write(out, buf, (size_t)r) != r) {
			rc = fail(cs, EGRESS_ERR_IO, name, strerror(errno));
			goto out;
		}
	}
	if (fsync(out) == -1) {
		rc = fail(cs, EGRESS_ERR_IO, name, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (in != -1)
		(void)close(in);
	if (out != -1 && close(out) == -1 && rc == 0)
		rc = fail(cs, EGRESS_ERR_IO, name, strerror(errno));
	return rc;
}

/* Copy every entry of the open folder sfd into the open folder dfd. Both
 * fds are consumed. */
static int
copy_dir(struct copy_state *cs, int sfd, int dfd, int depth)
{
	DIR *dir = NULL;
	struct dirent *de;
	int rc = 0;

	if (depth > PKG_DEPTH_MAX) {
		(void)close(sfd);
		(void)close(dfd);
		return fail(cs, EGRESS_ERR_TOO_BIG, "folders",
		    "nested too deeply");
	}
	if ((dir = fdopendir(sfd)) == NULL) {
		(void)close(sfd);
		(void)close(dfd);
		return fail(cs, EGRESS_ERR_IO, ".", strerror(errno));
	}
	while (rc == 0) {
		struct stat st;

		errno = 0;
		if ((de = readdir(dir)) == NULL) {
			if (errno != 0)
				rc = fail(cs, EGRESS_ERR_IO, ".",
				    strerror(errno));
			break;
		}
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (++cs->files > PKG_FILES_MAX) {
			rc = fail(cs, EGRESS_ERR_TOO_BIG, de->d_name,
			    "more than 4096 files");
			break;
		}
		if (fstatat(dirfd(dir), de->d_name, &st,
			AT_SYMLINK_NOFOLLOW) == -1) {
			rc = fail(cs, EGRESS_ERR_IO, de->d_name,
			    strerror(errno));
			break;
		}
		if (S_ISREG(st.st_mode))
			rc = copy_file(cs, dirfd(dir), dfd, de->d_name, &st);
		else if (S_ISDIR(st.st_mode)) {
			int s2, d2;

			s2 = openat(dirfd(dir), de->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (s2 == -1) {
				rc = fail(cs, EGRESS_ERR_IO, de->d_name,
				    strerror(errno));
				break;
			}
			if (mkdirat(dfd, de->d_name, 0755) == -1 ||
			    (d2 = openat(dfd, de->d_name,
				 O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
				     O_CLOEXEC)) == -1) {
				(void)close(s2);
				rc = fail(cs, EGRESS_ERR_IO, de->d_name,
				    strerror(errno));
				break;
			}
			rc = copy_dir(cs, s2, d2, depth + 1);
		} else if (S_ISLNK(st.st_mode))
			rc = fail(cs, EGRESS_ERR_INVALID, de->d_name,
			    "a symlink: packages hold regular files only");
		else
			rc = fail(cs, EGRESS_ERR_INVALID, de->d_name,
			    "a special file: packages hold regular files only");
	}
	if (rc == 0 && fsync(dfd) == -1)
		rc = fail(cs, EGRESS_ERR_IO, ".", strerror(errno));
	(void)closedir(dir);
	(void)close(dfd);
	return rc;
}

int
pkg_stage(const char *src, const char *parent, char **ret_stage, char *err,
    size_t errlen)
{
	struct copy_state cs = { 0, 0, err, errlen, src };
	char *stage = NULL;
	int sfd = -1, dfd = -1, rc;

	sfd = open(src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd == -1)
		return fail(&cs,
		    errno == ENOENT ? EGRESS_ERR_NOT_FOUND : EGRESS_ERR_IO,
		    "package folder",
		    errno == ELOOP || errno == ENOTDIR ?
			"not a folder (or a symlink)" :
			strerror(errno));
	if (mkdir(parent, 0755) == -1 && errno != EEXIST) {
		(void)close(sfd);
		cs.src = parent;
		return fail(&cs, EGRESS_ERR_IO, "package_dir",
		    strerror(errno));
	}
	if (asprintf(&stage, "%s/.stage.XXXXXX", parent) < 0) {
		(void)close(sfd);
		return EGRESS_ERR_NOMEM;
	}
	if (mkdtemp(stage) == NULL) {
		(void)close(sfd);
		cs.src = parent;
		rc = fail(&cs, EGRESS_ERR_IO, "staging folder",
		    strerror(errno));
		free(stage);
		return rc;
	}
	(void)chmod(stage, 0755);
	dfd = open(stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd == -1) {
		(void)close(sfd);
		rc = fail(&cs, EGRESS_ERR_IO, stage, strerror(errno));
		(void)rmdir(stage);
		free(stage);
		return rc;
	}
	rc = copy_dir(&cs, sfd, dfd, 0);
	if (rc != 0) {
		(void)pkg_remove_tree(stage, NULL, 0);
		free(stage);
		return rc;
	}
	*ret_stage = stage;
	return 0;
}

int
pkg_commit(const char *stage, const char *dst, char *err, size_t errlen)
{
	if (renameat2(AT_FDCWD, stage, AT_FDCWD, dst, RENAME_NOREPLACE) ==
	    -1) {
		int e = errno;

		if (e == EEXIST)
			return EGRESS_ERR_EXISTS;
		if (err != NULL)
			(void)snprintf(err, errlen, "%s: %s", dst,
			    strerror(e));
		return EGRESS_ERR_IO;
	}
	return 0;
}

static int
remove_at(int pfd, const char *name, int depth)
{
	struct stat st;
	DIR *dir;
	struct dirent *de;
	int fd, rc = 0;

	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1)
		return errno == ENOENT ? 0 : EGRESS_ERR_IO;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(pfd, name, 0) == -1 ? EGRESS_ERR_IO : 0;
	if (depth > PKG_DEPTH_MAX + 1)
		return EGRESS_ERR_TOO_BIG;
	fd = openat(pfd, name,
	    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1 || (dir = fdopendir(fd)) == NULL) {
		if (fd != -1)
			(void)close(fd);
		return EGRESS_ERR_IO;
	}
	while (rc == 0 && (de = readdir(dir)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		rc = remove_at(dirfd(dir), de->d_name, depth + 1);
	}
	(void)closedir(dir);
	if (rc == 0 && unlinkat(pfd, name, AT_REMOVEDIR) == -1)
		rc = EGRESS_ERR_IO;
	return rc;
}

int
pkg_remove_tree(const char *path, char *err, size_t errlen)
{
	int rc = remove_at(AT_FDCWD, path, 0);

	if (rc != 0 && err != NULL)
		(void)snprintf(err, errlen, "%s: cannot remove: %s", path,
		    strerror(errno));
	return rc;
}

int
pkg_read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	ssize_t r;
	int fd;

	fd = open(path,
	    O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd == -1)
		return errno == ENOENT ? EGRESS_ERR_NOT_FOUND : EGRESS_ERR_IO;
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		(void)close(fd);
		errno = EINVAL;
		return EGRESS_ERR_IO;
	}
	if ((buf = malloc(max + 2)) == NULL) {
		(void)close(fd);
		return EGRESS_ERR_NOMEM;
	}
	for (;;) {
		r = read(fd, buf + len, max + 1 - len);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			(void)close(fd);
			free(buf);
			return EGRESS_ERR_IO;
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len > max) {
			(void)close(fd);
			free(buf);
			return EGRESS_ERR_TOO_BIG;
		}
	}
	(void)close(fd);
	buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
}

static int
same_file(const char *a, const char *b)
{
	char *x = NULL, *y = NULL;
	size_t xl = 0, yl = 0;
	int ra, rb, same;

	ra = pkg_read_file(a, 1024 * 1024, &x, &xl);
	rb = pkg_read_file(b, 1024 * 1024, &y, &yl);
	if (ra == EGRESS_ERR_NOT_FOUND && rb == EGRESS_ERR_NOT_FOUND)
		return 1;
	if ((ra != 0 && ra != EGRESS_ERR_NOT_FOUND) ||
	    (rb != 0 && rb != EGRESS_ERR_NOT_FOUND)) {
		free(x);
		free(y);
		return ra != 0 && ra != EGRESS_ERR_NOT_FOUND ? ra : rb;
	}
	same = ra == 0 && rb == 0 && xl == yl && memcmp(x, y, xl) == 0;
	free(x);
	free(y);
	return same;
}

int
pkg_same_manifest(const char *a, const char *b)
{
	char pa[4096], pb[4096];
	int r;

	(void)snprintf(pa, sizeof(pa), "%s/manifest.ini", a);
	(void)snprintf(pb, sizeof(pb), "%s/manifest.ini", b);
	if ((r = same_file(pa, pb)) != 1)
		return r;
	(void)snprintf(pa, sizeof(pa), "%s/manifest.ini.sig", a);
	(void)snprintf(pb, sizeof(pb), "%s/manifest.ini.sig", b);
	return same_file(pa, pb);
}

/* ---- Reach ------------------------------------------------------------ */

int
pkg_strv_has(const struct pkg_strv *sv, const char *s)
{
	size_t i;

	for (i = 0; i < sv->n; i++)
		if (strcmp(sv->v[i], s) == 0)
			return 1;
	return 0;
}

int
pkg_strv_add(struct pkg_strv *sv, const char *s)
{
	char **v, *c;

	if (pkg_strv_has(sv, s))
		return 0;
	if ((c = strdup(s)) == NULL)
		return EGRESS_ERR_NOMEM;
	if ((v = reallocarray(sv->v, sv->n + 1, sizeof(*v))) == NULL) {
		free(c);
		return EGRESS_ERR_NOMEM;
	}
	v[sv->n++] = c;
	sv->v = v;
	return 0;
}

void
pkg_strv_done(struct pkg_strv *sv)
{
	size_t i;

	for (i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->n = 0;
}

static int
add_entry(struct pkg_strv *sv, const struct policy_entry *e)
{
	char buf[POLICY_NAME_MAX + 8];

	if (policy_entry_format(e, buf, sizeof(buf)) < 0)
		return EGRESS_ERR_TOO_BIG;
	return pkg_strv_add(sv, buf);
}

static int
add_all(struct pkg_strv *sv, const struct policy_grant *g)
{
	size_t i, n = policy_grant_count(g);
	int rc;

	for (i = 0; i < n; i++)
		if ((rc = add_entry(sv, policy_grant_entry(g, i))) != 0)
			return rc;
	return 0;
}

/* Add e to r's reach, and to its woken entries when old_m (not NULL)
 * did not reach it. */
static int
add_reached(struct pkg_reach *r, const struct policy_entry *e,
    const struct conf_manifest *old_m)
{
	int rc = add_entry(&r->reach, e);

	if (rc == 0 && old_m != NULL && !old_m->operator_defined &&
	    !policy_grant_covers(old_m->hosts, e))
		rc = add_entry(&r->woken, e);
	return rc;
}

int
pkg_reach_compute(const struct conf_instance *ci,
    const struct conf_manifest *m, const struct conf_manifest *old_m,
    struct pkg_reach *ret)
{
	struct pkg_reach r;
	size_t i, n;
	int rc = 0;

	memset(&r, 0, sizeof(r));
	r.granted_perms = ci->granted_permissions;
	r.refused = m == NULL;
	if ((rc = add_all(&r.granted, ci->hosts)) != 0 ||
	    (rc = add_all(&r.private_hosts, ci->allow_private)) != 0 ||
	    (rc = add_all(&r.loopback_hosts, ci->allow_loopback)) != 0)
		goto out;
	if (m == NULL) {
		rc = add_all(&r.ineffective, ci->hosts);
		goto out;
	}
	r.requested = m->permissions;
	r.effective = m->permissions & ci->granted_permissions;
	r.operator_defined = m->operator_defined;
	if ((rc = add_all(&r.declared, m->hosts)) != 0)
		goto out;
	if (m->operator_defined) {
		n = policy_grant_count(ci->hosts);
		for (i = 0; i < n && rc == 0; i++)
			rc = add_reached(&r, policy_grant_entry(ci->hosts, i),
			    old_m);
		goto out;
	}
	/* Granted entries the declaration covers, then declared entries the
	 * grant covers: together, the grant within the declaration. */
	n = policy_grant_count(ci->hosts);
	for (i = 0; i < n && rc == 0; i++) {
		const struct policy_entry *e = policy_grant_entry(ci->hosts,
		    i);

		if (policy_grant_covers(m->hosts, e))
			rc = add_reached(&r, e, old_m);
		else {
			rc = add_entry(&r.ineffective, e);
			if (rc == 0 && old_m != NULL &&
			    !old_m->operator_defined &&
			    policy_grant_covers(old_m->hosts, e))
				rc = add_entry(&r.stale, e);
		}
	}
	n = policy_grant_count(m->hosts);
	for (i = 0; i < n && rc == 0; i++) {
		const struct policy_entry *e = policy_grant_entry(m->hosts, i);

		if (policy_grant_covers(ci->hosts, e))
			rc = add_reached(&r, e, old_m);
		else
			rc = add_entry(&r.not_granted, e);
	}
out:
	if (rc != 0) {
		pkg_reach_done(&r);
		return rc;
	}
	*ret = r;
	return 0;
}

void
pkg_reach_done(struct pkg_reach *r)
{
	pkg_strv_done(&r->granted);
	pkg_strv_done(&r->private_hosts);
	pkg_strv_done(&r->loopback_hosts);
	pkg_strv_done(&r->declared);
	pkg_strv_done(&r->reach);
	pkg_strv_done(&r->not_granted);
	pkg_strv_done(&r->ineffective);
	pkg_strv_done(&r->stale);
	pkg_strv_done(&r->woken);
}

const char *
pkg_perms_str(unsigned mask, char *buf, size_t n)
{
	unsigned bit;
	size_t off = 0;

	buf[0] = '\0';
	for (bit = 1; bit != 0 && bit <= POLICY_PERM_SOCKET_CLIENT;
	     bit <<= 1) {
		const char *name;

		if (!(mask & bit) ||
		    (name = policy_permission_name(bit)) == NULL)
			continue;
		off += (size_t)snprintf(buf + off, off < n ? n - off : 0,
		    "%s%s", off ? ", " : "", name);
	}
	if (off == 0)
		(void)snprintf(buf, n, "(none)");
	return buf;
}
