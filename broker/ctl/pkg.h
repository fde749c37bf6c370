/* SPDX-License-Identifier: ISC */
/*
 * pkg: plugin package folders. A package is a folder holding manifest.ini,
 * an optional manifest.ini.sig and the plugin's files; installed packages
 * live in [plugins] package_dir as <name>-<version>/. Copies take regular
 * files and folders only (a symlink, device, FIFO or socket anywhere in the
 * package refuses it), never follow a link, drop set-id and sticky bits,
 * and are bounded in files, depth and bytes. A copy is staged in a hidden
 * folder beside its destination and renamed into place, so package_dir
 * never holds a half-copied package.
 */
#ifndef EGRESS_PKG_H
#define EGRESS_PKG_H

#include <stddef.h>

#define PKG_FILES_MAX 4096 /* files and folders in a package */
#define PKG_DEPTH_MAX 16   /* folder nesting */
#define PKG_BYTES_MAX (256ull * 1024 * 1024)
#define PKG_NAME_MAX  64 /* bytes of a name or a version */

/*
 * Answer whether s may be a package name or version in a folder name:
 * 1 to PKG_NAME_MAX bytes of [A-Za-z0-9._+-], not starting with '.' or
 * '-'. Return 1 or 0.
 */
int pkg_name_is_valid(const char *s);

/*
 * Copy the package folder src into a new hidden staging folder inside
 * parent (created mode 0755 if missing). Write the staging path (malloc'd,
 * owned by the caller) to *ret_stage and return 0; return a negative error
 * with a message in err otherwise (nothing is left behind).
 */
int pkg_stage(const char *src, const char *parent, char **ret_stage, char *err,
    size_t errlen);

/*
 * Move a staged package to dst. Return 0, EGRESS_ERR_EXISTS when dst
 * exists (the stage is kept), or another negative error with err set.
 */
int pkg_commit(const char *stage, const char *dst, char *err, size_t errlen);

/*
 * Remove the folder at path and everything under it, never following a
 * symlink (a link is removed, not its target). A missing path is success.
 * Return 0 or a negative error with err set.
 */
int pkg_remove_tree(const char *path, char *err, size_t errlen);

/*
 * Answer whether the installed packages a and b hold the same
 * manifest.ini and manifest.ini.sig bytes (a missing .sig equals a missing
 * .sig). Return 1, 0, or a negative error.
 */
int pkg_same_manifest(const char *a, const char *b);

/*
 * Read a small regular file (at most max bytes, never through a symlink
 * at the last component). Write a malloc'd NUL-terminated buffer to *ret
 * and its length to *ret_len. Return 0, EGRESS_ERR_NOT_FOUND, _TOO_BIG or
 * _IO (errno set).
 */
int pkg_read_file(const char *path, size_t max, char **ret, size_t *ret_len);

/* ---- An entry's reach against a package's declaration ------------------ */

struct conf_instance;
struct conf_manifest;

/* A list of strings, each malloc'd. */
struct pkg_strv {
	char **v;
	size_t n;
};

/* Append a copy of s unless an equal string is there. Return 0 or NOMEM. */
int pkg_strv_add(struct pkg_strv *sv, const char *s);

/* Answer whether sv holds s. Return 1 or 0. */
int pkg_strv_has(const struct pkg_strv *sv, const char *s);

/* Free every string; sv ends empty. */
void pkg_strv_done(struct pkg_strv *sv);

/*
 * What one entry reaches under one manifest, every set computed with
 * policy_grant_covers() (nothing here decides reachability on its own).
 * Entries are spelled as in the file (policy_entry_format).
 */
struct pkg_reach {
	struct pkg_strv granted;	/* egress_hosts, in order */
	struct pkg_strv private_hosts;	/* egress_allow_private */
	struct pkg_strv loopback_hosts; /* egress_allow_loopback */
	struct pkg_strv declared;	/* the manifest's [egress] hosts */
	struct pkg_strv reach;		/* the grant within the declaration */
	struct pkg_strv not_granted; /* declared, not covered by the grant */
	struct pkg_strv ineffective; /* granted, not covered by the decl. */
	struct pkg_strv stale;	     /* of ineffective: covered by old_m */
	struct pkg_strv woken;	     /* of reach: not reachable under old_m */
	unsigned requested;	     /* the manifest's permissions */
	unsigned granted_perms;	     /* the entry's permissions */
	unsigned effective;	     /* both */
	int operator_defined;
	int refused; /* m was NULL: no reach at all */
};

/*
 * Compute ci's reach under manifest m (NULL: refused, nothing is
 * reachable). old_m, if not NULL, is the manifest ci used before an
 * upgrade: ineffective entries it covered are also listed in stale, and
 * entries of the reach it did not give (granted, but not declared by it
 * and it not operator_defined) in woken. Under operator_defined the grant
 * alone governs: reach is the grant and nothing is ineffective or
 * missing. Return 0 or EGRESS_ERR_NOMEM.
 */
int pkg_reach_compute(const struct conf_instance *ci,
    const struct conf_manifest *m, const struct conf_manifest *old_m,
    struct pkg_reach *ret);

/* Free the lists of r. */
void pkg_reach_done(struct pkg_reach *r);

/* Write the names of the permission bits in mask, comma-separated, into
 * buf ("(none)" for an empty mask). Return buf. */
const char *pkg_perms_str(unsigned mask, char *buf, size_t n);

#endif /* EGRESS_PKG_H */
