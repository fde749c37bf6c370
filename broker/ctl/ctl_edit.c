/* SPDX-License-Identifier: ISC */
/*
 * The safe edit of the configuration and the staging of package folders
 * (see ctl_edit.h).
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/ctl/ctl.h"
#include "broker/ctl/ctl_edit.h"
#include "broker/ctl/iniedit.h"
#include "broker/ctl/pkg.h"
#include "conf/conf.h"

/* ---- Printing helpers ------------------------------------------------- */

void
ctl_print_errs(const struct conf_errors *e, const char *from, const char *to)
{
	/* Messages quote paths made printable (conf_printable()). */
	char *pf = from != NULL ? conf_printable(from) : NULL;
	char *pt = to != NULL ? conf_printable(to) : NULL;
	size_t i, fl;

	if (pf == NULL || pt == NULL) {
		free(pf);
		free(pt);
		pf = pt = NULL;
	}
	from = pf;
	to = pt;
	fl = from != NULL ? strlen(from) : 0;
	for (i = 0; i < e->n; i++) {
		const char *m = e->msgs[i], *p;

		// cppcheck-suppress nullPointer ; fl > 0 only when from is set
		while (fl > 0 && (p = strstr(m, from)) != NULL) {
			// cppcheck-suppress nullPointer ; callers give from and to
			fprintf(stderr, "%.*s%s", (int)(p - m), m, to);
			m = p + fl;
		}
		fprintf(stderr, "%s\n", m);
	}
	free(pf);
	free(pt);
}

const char *
ctl_perm_list(unsigned mask, char *buf, size_t n)
{
	return pkg_perms_str(mask, buf, n);
}

/* ---- Paths ------------------------------------------------------------ */

char *
ctl_path_join(const char *a, const char *b)
{
	char *s;

	if (b[0] == '/')
		return strdup(b);
	if (asprintf(&s, "%s/%s", a, b) < 0)
		return NULL;
	return s;
}

/* path relative to dir when it lies under it; else a copy of path. */
char *
ctl_path_rel(const char *dir, const char *path)
{
	size_t n = strlen(dir);

	if (strncmp(path, dir, n) == 0 && path[n] == '/')
		return strdup(path + n + 1);
	if (strcmp(dir, ".") == 0 && path[0] != '/')
		return strdup(path);
	return strdup(path);
}

int
ctl_is_under(const char *dir, const char *path)
{
	size_t n = strlen(dir);

	return strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* ---- The locked edit -------------------------------------------------- */

void
ctl_edit_end(struct edit *e)
{
	iniedit_file_close(&e->f);
	conf_snapshot_free(e->snap);
	iniedit_free(e->doc);
	free(e->pkg_abs);
	free(e->pkg_rel);
	memset(e, 0, sizeof(*e));
	e->f.lockfd = -1;
}

static int
package_dir_paths(const struct conf_snapshot *s, char **ret_abs,
    char **ret_rel)
{
	const char *pd = s->package_dir ? s->package_dir : "packages";
	char *abs;

	if (pd[0] == '/' || ctl_is_under(s->dir, pd))
		abs = strdup(pd);
	else
		abs = ctl_path_join(s->dir, pd);
	if (abs == NULL)
		return -1;
	if ((*ret_rel = ctl_path_rel(s->dir, abs)) == NULL) {
		free(abs);
		return -1;
	}
	*ret_abs = abs;
	return 0;
}

/* Lock, read and validate the file as it is now. Print why on failure. */
int
ctl_edit_begin(const struct ctl_ctx *ctx, struct edit *e)
{
	struct conf_errors errs = { 0 };
	char err[512];

	memset(e, 0, sizeof(*e));
	e->f.lockfd = -1;
	e->ctx = ctx;
	if (stat(ctx->config_path, &e->f.st) == 0 &&
	    S_ISDIR(e->f.st.st_mode)) {
		fprintf(stderr,
		    "egressctl: %s: cannot read the configuration: "
		    "it is a folder, not a file (give the file with -c FILE)\n",
		    ctx->config_path);
		return -1;
	}
	if (iniedit_file_open(ctx->config_path, &e->f, err, sizeof(err)) !=
	    0) {
		fprintf(stderr, "egressctl: %s\n", err);
		return -1;
	}
	if (conf_load_buffer(e->f.path, e->f.buf, e->f.len, &e->snap, &errs) !=
	    0) {
		ctl_print_errs(&errs, NULL, NULL);
		fprintf(stderr,
		    "egressctl: %s: configuration refused; fix it "
		    "before editing it with egressctl\n",
		    ctx->config_path);
		conf_errors_done(&errs);
		ctl_edit_end(e);
		return -1;
	}
	if (iniedit_parse(e->f.buf, e->f.len, &e->doc) != 0 ||
	    package_dir_paths(e->snap, &e->pkg_abs, &e->pkg_rel) != 0) {
		fprintf(stderr, "egressctl: out of memory\n");
		ctl_edit_end(e);
		return -1;
	}
	return 0;
}

/*
 * Validate the edited document as a whole snapshot and write it. When
 * ret_snap is not NULL the validated snapshot is handed over. Print why on
 * failure; the file is then untouched.
 */
int
ctl_edit_commit(struct edit *e, struct conf_snapshot **ret_snap)
{
	struct conf_errors errs = { 0 };
	struct conf_snapshot *s = NULL;
	char *buf = NULL, err[512];
	size_t len;
	int rc = -1, r;

	if (iniedit_render(e->doc, &buf, &len) != 0) {
		fprintf(stderr, "egressctl: out of memory\n");
		return -1;
	}
	if (conf_load_buffer(e->f.path, buf, len, &s, &errs) != 0) {
		ctl_print_errs(&errs, NULL, NULL);
		fprintf(stderr,
		    "egressctl: the edit would make %s invalid; "
		    "nothing was written\n",
		    e->f.path);
		goto out;
	}
	if ((r = iniedit_file_replace(&e->f, buf, len, err, sizeof(err))) !=
	    0) {
		fprintf(stderr, "egressctl: %s%s\n", err,
		    r == EGRESS_ERR_AGAIN ? "" : "; the file is unchanged");
		goto out;
	}
	if (ret_snap != NULL) {
		*ret_snap = s;
		s = NULL;
	}
	rc = 0;
out:
	conf_errors_done(&errs);
	conf_snapshot_free(s);
	free(buf);
	return rc;
}

char *
ctl_section_of(const char *inst)
{
	char *s;

	if (asprintf(&s, SECTION_PREFIX "%s", inst) < 0)
		return NULL;
	return s;
}

/* ---- Packages --------------------------------------------------------- */

void
ctl_staged_done(struct staged *st, int rollback)
{
	if (st->stage != NULL)
		(void)pkg_remove_tree(st->stage, NULL, 0);
	if (rollback && st->created && st->final != NULL)
		(void)pkg_remove_tree(st->final, NULL, 0);
	free(st->stage);
	free(st->final);
	free(st->manifest_rel);
	conf_manifest_free(st->m);
	memset(st, 0, sizeof(*st));
}

static const char *sig_words(enum conf_sig_status s, enum conf_sig_mode mode);

void
ctl_sig_print(const struct conf_manifest *m, enum conf_sig_mode mode)
{
	if (m->sig == CONF_SIG_VALID)
		printf("package %s %s: signature valid (key %s)\n", m->name,
		    m->version, m->signer);
	else
		printf("package %s %s: signature %s\n", m->name, m->version,
		    sig_words(m->sig, mode));
}

/* The words for a signature status other than valid under a mode. */
static const char *
sig_words(enum conf_sig_status s, enum conf_sig_mode mode)
{
	switch (s) {
	case CONF_SIG_VALID:
		return "valid";
	case CONF_SIG_UNSIGNED:
		return mode == CONF_SIG_STRICT ?
		    "unsigned" :
		    "unsigned (accepted: signature_mode = permissive)";
	case CONF_SIG_NOT_CHECKED:
		return "not checked (signature_mode = disabled)";
	case CONF_SIG_UNTRUSTED:
		return "untrusted";
	case CONF_SIG_INVALID:
		return "invalid";
	}
	return "unknown";
}

/* Copy PKG into a staging folder, check its manifest there (so what is
 * checked is what is installed), and name its final folder. Returns 0,
 * CTL_EXIT_NO for a package that is refused or cannot be read, or
 * CTL_EXIT_ERROR otherwise. */
int
ctl_package_stage(struct edit *e, const char *pkg, struct staged *st)
{
	struct conf_errors errs = { 0 };
	char err[768], *mpath = NULL, *dirname = NULL, *pkgm = NULL;
	int rc = CTL_EXIT_ERROR;

	memset(st, 0, sizeof(*st));
	if (pkg_stage(pkg, e->pkg_abs, &st->stage, err, sizeof(err)) != 0) {
		/* A package that cannot be read or copied is refused. */
		fprintf(stderr, "egressctl: %s; nothing was installed\n", err);
		return CTL_EXIT_NO;
	}
	if (asprintf(&mpath, "%s/manifest.ini", st->stage) < 0 ||
	    asprintf(&pkgm, "%s/manifest.ini", pkg) < 0) {
		mpath = pkgm = NULL;
		goto out;
	}
	if (conf_manifest_load(mpath, e->snap->sig_mode, e->snap->keyring,
		&st->m, &errs) != 0) {
		ctl_print_errs(&errs, mpath, pkgm);
		fprintf(stderr,
		    "egressctl: %s: package refused (signature_mode "
		    "= %s); nothing was installed\n",
		    pkg,
		    e->snap->sig_mode == CONF_SIG_STRICT ?
			"strict" :
			e->snap->sig_mode == CONF_SIG_PERMISSIVE ?
			"permissive" :
			"disabled");
		if (e->snap->sig_mode == CONF_SIG_STRICT &&
		    e->snap->ntrusted_keys == 0) {
			fprintf(stderr,
			    "no key is trusted yet; trust the key "
			    "the package is signed with: %s trust add "
			    "KEY.pub\n",
			    ctl_cmd(e->ctx));
			fprintf(stderr,
			    "or accept unsigned packages: set "
			    "[plugins.security] signature_mode = permissive "
			    "in %s\n",
			    e->f.path);
		}
		rc = CTL_EXIT_NO;
		goto out;
	}
	if (!pkg_name_is_valid(st->m->name) ||
	    !pkg_name_is_valid(st->m->version)) {
		fprintf(stderr,
		    "egressctl: %s: the name and version must be "
		    "1 to %d bytes of A-Z a-z 0-9 . _ + - to name a package "
		    "folder\n",
		    pkgm, PKG_NAME_MAX);
		rc = CTL_EXIT_NO;
		goto out;
	}
	if (asprintf(&dirname, "%s-%s", st->m->name, st->m->version) < 0) {
		dirname = NULL;
		goto out;
	}
	if ((st->final = ctl_path_join(e->pkg_abs, dirname)) == NULL ||
	    asprintf(&st->manifest_rel, "%s/%s/manifest.ini", e->pkg_rel,
		dirname) < 0) {
		st->manifest_rel = NULL;
		goto out;
	}
	rc = 0;
out:
	conf_errors_done(&errs);
	free(mpath);
	free(pkgm);
	free(dirname);
	return rc;
}

/* Move the staged copy into place, or reuse an identical installed one. */
int
ctl_package_commit(struct staged *st)
{
	char err[512];
	int r;

	r = pkg_commit(st->stage, st->final, err, sizeof(err));
	if (r == 0) {
		free(st->stage);
		st->stage = NULL;
		st->created = 1;
		return 0;
	}
	if (r != EGRESS_ERR_EXISTS) {
		fprintf(stderr, "egressctl: %s\n", err);
		return CTL_EXIT_ERROR;
	}
	if (pkg_same_manifest(st->stage, st->final) == 1)
		return 0;
	fprintf(stderr,
	    "egressctl: %s exists and holds a different manifest; "
	    "a changed package needs a new version\n",
	    st->final);
	return CTL_EXIT_NO;
}
