/* SPDX-License-Identifier: ISC */
/*
 * ctl_edit: the safe edit of the configuration that every egressctl
 * command changing it goes through: an exclusive lock beside the file, the
 * file read fresh under it, byte-preserving changes (iniedit.h), the whole
 * result validated with conf_load_buffer() and the file replaced
 * atomically; on any failure it is untouched. Also the staging of a
 * package folder under that lock, and the path helpers both need.
 */
#ifndef EGRESS_CTL_EDIT_H
#define EGRESS_CTL_EDIT_H

#include <stddef.h>
#include <stdio.h>

#include "broker/ctl/ctl.h"
#include "broker/ctl/iniedit.h"
#include "conf/conf.h"

#define SECTION_PREFIX "plugins.entries."

/* One locked edit of the configuration. */
struct edit {
	struct iniedit_file f;
	struct conf_snapshot *snap; /* of the bytes read under the lock */
	struct iniedit *doc;
	char *pkg_abs;		   /* package_dir on the filesystem */
	char *pkg_rel;		   /* as written in manifest keys */
	const struct ctl_ctx *ctx; /* borrowed */
};

/* A package staged under the lock and checked by conf/. */
struct staged {
	char *stage;	    /* hidden staging folder, or NULL */
	char *final;	    /* package_dir/<name>-<version> */
	char *manifest_rel; /* the manifest key to write */
	struct conf_manifest *m;
	int created; /* final was created by this run */
};

/* Print e's messages on stderr, each occurrence of from written as to
 * (from NULL: as they are). */
void ctl_print_errs(const struct conf_errors *e, const char *from,
    const char *to);

/* Format a permission mask as its names into buf (n bytes); return buf. */
const char *ctl_perm_list(unsigned mask, char *buf, size_t n);

/* Return b joined under a (b itself when absolute), or NULL on
 * out-of-memory; free() it. */
char *ctl_path_join(const char *a, const char *b);

/* Return path relative to dir when it lies under it, else a copy; NULL
 * on out-of-memory; free() it. */
char *ctl_path_rel(const char *dir, const char *path);

/* Answer whether path lies under dir. */
int ctl_is_under(const char *dir, const char *path);

/*
 * Take the lock beside ctx's configuration file, read the file and parse
 * it into e (snapshot, editable document, package_dir paths). Return 0,
 * or a CTL_EXIT_* status after printing why (nothing held).
 */
int ctl_edit_begin(const struct ctl_ctx *ctx, struct edit *e);

/*
 * Validate e's edited document as a whole and replace the file with it
 * atomically; on success write the new snapshot to *ret_snap (if not
 * NULL; the caller frees it). Return 0 or a CTL_EXIT_* status after
 * printing why (the file untouched).
 */
int ctl_edit_commit(struct edit *e, struct conf_snapshot **ret_snap);

/* Release the lock and everything e holds. */
void ctl_edit_end(struct edit *e);

/* Return "plugins.entries.INST" (free() it), or NULL on out-of-memory. */
char *ctl_section_of(const char *inst);

/* Remove st's staging folder (and, with rollback, the final folder this
 * run created) and free st's fields. */
void ctl_staged_done(struct staged *st, int rollback);

/* Print "package NAME VERSION: signature ..." for m under a mode: a valid
 * signature names the key that verified it. */
void ctl_sig_print(const struct conf_manifest *m, enum conf_sig_mode mode);

/*
 * Copy package folder pkg into a hidden staging folder under e's
 * package_dir and check its manifest and signature with conf/; fill st.
 * Return 0 or a CTL_EXIT_* status after printing why.
 */
int ctl_package_stage(struct edit *e, const char *pkg, struct staged *st);

/* Move st's staging folder into place. Return 0 or a CTL_EXIT_* status
 * after printing why. */
int ctl_package_commit(struct staged *st);

#endif /* EGRESS_CTL_EDIT_H */
