/* SPDX-License-Identifier: ISC */
/*
 * `egressctl plugin install|bind|upgrade|grant|revoke|remove|list`: the
 * operator's grant ceremony (docs/operators.md). Every edit runs under the
 * exclusive lock beside the configuration file, reads the file fresh,
 * changes only the keys it must (broker/iniedit.c), validates the whole
 * result with conf_load_buffer() and replaces the file atomically; on any
 * failure the file is untouched. No command ever extends an existing
 * entry: install, bind and upgrade over one print the difference between
 * its grant and the package's declaration, with the exact commands that
 * would change it. Every grammar check and every "declared" / "granted"
 * computation is policy/'s (policy_entry_parse, policy_grant_covers).
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "broker/ctl/ctl.h"
#include "broker/ctl/ctl_edit.h"
#include "broker/ctl/iniedit.h"
#include "broker/ctl/pkg.h"
#include "broker/net/netaddr.h"
#include "conf/conf.h"
#include "policy/policy.h"

#define PERMS_MAX 8

enum egress_seed {
	SEED_UNSET = 0,
	SEED_DECLARED = 1,
	SEED_NONE = 2,
};

static void
plugin_usage(FILE *f)
{
	fprintf(f,
	    "usage: egressctl [-c FILE] plugin install PKG [--instance "
	    "NAME] [--egress declared|none]\n"
	    "       egressctl [-c FILE] plugin install PKG --channel-alias ALIAS"
	    " --egress declared|none\n"
	    "       egressctl [-c FILE] plugin bind PLUGIN ALIAS --egress "
	    "declared|none\n"
	    "       egressctl [-c FILE] plugin upgrade [--wake] PKG\n"
	    "       egressctl [-c FILE] plugin grant INSTANCE [--private | "
	    "--loopback] [--permission P]... [HOST...]\n"
	    "       egressctl [-c FILE] plugin revoke INSTANCE [--private | "
	    "--loopback] [--permission P]... [HOST...]\n"
	    "       egressctl [-c FILE] plugin remove PLUGIN\n"
	    "       egressctl [-c FILE] plugin list [--json]\n");
}

/*
 * A usage error of `plugin SUB`: name the argument at argv[first + max]
 * when there is one too many, else say one is missing; then the usage.
 * Return CTL_EXIT_USAGE.
 */
static int
plugin_args_bad(int argc, char **argv, int first, int max)
{
	if (argc - first > max)
		fprintf(stderr,
		    "egressctl: plugin %s: unexpected argument "
		    "'%s'\n",
		    argv[0], argv[first + max]);
	else
		fprintf(stderr, "egressctl: plugin %s: missing argument\n",
		    argv[0]);
	plugin_usage(stderr);
	return CTL_EXIT_USAGE;
}

/* ---- Entries ---------------------------------------------------------- */

static int
strv_from_grant(struct pkg_strv *sv, const struct policy_grant *g)
{
	size_t i, n = policy_grant_count(g);
	char buf[POLICY_NAME_MAX + 8];

	for (i = 0; i < n; i++) {
		if (policy_entry_format(policy_grant_entry(g, i), buf,
			sizeof(buf)) < 0 ||
		    pkg_strv_add(sv, buf) != 0)
			return -1;
	}
	return 0;
}

static int
perms_to_items(unsigned mask, const char **items)
{
	unsigned bit;
	int n = 0;

	for (bit = 1; bit <= POLICY_PERM_SOCKET_CLIENT; bit <<= 1)
		if ((mask & bit) && policy_permission_name(bit) != NULL)
			items[n++] = policy_permission_name(bit);
	return n;
}

/* Add a new [plugins.entries.INST] to the document. */
static int
entry_add(struct edit *e, const char *inst, const struct conf_manifest *m,
    const char *manifest_rel, enum egress_seed seed)
{
	struct pkg_strv hosts = { 0 };
	const char *perms[PERMS_MAX];
	char *sec = ctl_section_of(inst);
	int np, rc = -1;

	if (sec == NULL)
		return -1;
	if (seed == SEED_DECLARED && strv_from_grant(&hosts, m->hosts) != 0)
		goto out;
	np = perms_to_items(m->permissions, perms);
	if (iniedit_section_add(e->doc, sec) != 0 ||
	    iniedit_set(e->doc, sec, "plugin", m->name) != 0 ||
	    iniedit_set(e->doc, sec, "manifest", manifest_rel) != 0 ||
	    iniedit_set_list(e->doc, sec, "permissions", perms, (size_t)np) !=
		0 ||
	    iniedit_set_list(e->doc, sec, "egress_hosts",
		(const char *const *)hosts.v, hosts.n) != 0 ||
	    iniedit_set_list(e->doc, sec, "egress_allow_private", NULL, 0) !=
		0) {
		fprintf(stderr,
		    "egressctl: cannot write the entry for %s (a "
		    "line would exceed %d bytes?)\n",
		    inst, INIEDIT_LINE_MAX);
		goto out;
	}
	rc = 0;
out:
	pkg_strv_done(&hosts);
	free(sec);
	return rc;
}

static void
print_list_to(FILE *f, const char *indent, const struct pkg_strv *sv)
{
	size_t i;

	for (i = 0; i < sv->n; i++)
		fprintf(f, "%s%s\n", indent, sv->v[i]);
}

static void
print_list(const char *indent, const struct pkg_strv *sv)
{
	print_list_to(stdout, indent, sv);
}

/* The printout of a newly created entry. */
static void
print_created(const struct ctl_ctx *ctx, const char *inst,
    const struct conf_manifest *m, const char *manifest_rel,
    enum egress_seed seed)
{
	struct pkg_strv decl = { 0 };
	char p[128], q[600];
	const char *c = ctl_cmd(ctx);

	(void)strv_from_grant(&decl, m->hosts);
	printf("created instance %s (plugin %s %s, manifest %s)\n", inst,
	    m->name, m->version, manifest_rel);
	printf("  permissions granted: %s\n",
	    ctl_perm_list(m->permissions, p, sizeof(p)));
	if (m->operator_defined && seed == SEED_DECLARED && decl.n == 0) {
		printf(
		    "  egress granted: none. This package's destinations "
		    "come from instance\n  configuration (operator_defined = "
		    "true): grant each one deliberately:\n");
		printf("    %s plugin grant %s HOST\n", c,
		    ctl_shq(inst, q, sizeof(q)));
	} else if (seed == SEED_NONE) {
		printf("  egress granted: none (--egress none)\n");
		if (decl.n > 0) {
			printf("  the package declares:\n");
			print_list("    ", &decl);
		}
		printf("  grant a destination deliberately with:\n");
		printf("    %s plugin grant %s HOST\n", c,
		    ctl_shq(inst, q, sizeof(q)));
	} else if (decl.n == 0) {
		printf("  egress granted: none (the package declares no "
		       "destination)\n");
	} else {
		printf("  egress granted, seeded from the package's "
		       "declaration%s:\n",
		    m->operator_defined ?
			" (operator_defined: the grant alone governs)" :
			"");
		print_list("    ", &decl);
		printf("  change the grant with:\n");
		printf("    %s plugin revoke %s HOST...\n", c,
		    ctl_shq(inst, q, sizeof(q)));
		printf("    %s plugin grant %s HOST...\n", c,
		    ctl_shq(inst, q, sizeof(q)));
	}
	if (m->permissions != 0) {
		printf("  change permissions with:\n");
		printf("    %s plugin revoke %s --permission P\n", c,
		    ctl_shq(inst, q, sizeof(q)));
	}
	pkg_strv_done(&decl);
}

/* Print what differs between an existing entry and a declaration: the
 * entry itself stays untouched. */
static void
print_diff(const struct ctl_ctx *ctx, const struct conf_instance *ci,
    const struct conf_manifest *m, const struct conf_manifest *old_m,
    int upgrade)
{
	struct pkg_reach r;
	char q[600], h[600];
	const char *c = ctl_cmd(ctx);
	unsigned bit;
	size_t i;

	if (pkg_reach_compute(ci, m, old_m, &r) != 0) {
		fprintf(stderr, "egressctl: out of memory\n");
		return;
	}
	ctl_shq(ci->name, q, sizeof(q));
	for (i = 0; i < r.not_granted.n; i++)
		printf("  + %s: declared by %s %s, not granted; to grant it:\n"
		       "      %s plugin grant %s %s\n",
		    r.not_granted.v[i], m->name, m->version, c, q,
		    ctl_shq(r.not_granted.v[i], h, sizeof(h)));
	for (i = 0; i < r.ineffective.n; i++) {
		int stale = pkg_strv_has(&r.stale, r.ineffective.v[i]);

		printf("  - %s: granted, %s by %s %s: %s; to revoke it:\n"
		       "      %s plugin revoke %s %s\n",
		    r.ineffective.v[i],
		    upgrade && stale ? "no longer declared" : "not declared",
		    m->name, m->version,
		    upgrade && stale ? "now unreachable" : "ineffective", c, q,
		    ctl_shq(r.ineffective.v[i], h, sizeof(h)));
	}
	for (i = 0; i < r.reach.n; i++)
		if (!upgrade || !pkg_strv_has(&r.woken, r.reach.v[i]))
			printf("  = %s: %s\n", r.reach.v[i],
			    r.operator_defined ?
				"granted (operator_defined: the grant alone governs)" :
				"granted and declared");
	for (i = 0; upgrade && old_m != NULL && i < r.woken.n; i++)
		printf("  ! %s: granted, unreachable under %s %s, reachable "
		       "under %s %s; to revoke it:\n      %s plugin revoke %s "
		       "%s\n",
		    r.woken.v[i], old_m->name, old_m->version, m->name,
		    m->version, c, q, ctl_shq(r.woken.v[i], h, sizeof(h)));
	for (bit = 1; bit <= POLICY_PERM_SOCKET_CLIENT; bit <<= 1) {
		const char *pn = policy_permission_name(bit);

		if (pn == NULL || !(r.requested & bit) ||
		    (r.granted_perms & bit))
			continue;
		printf("  + permission %s: %s by %s %s, not granted; to grant "
		       "it:\n      %s plugin grant %s --permission %s\n",
		    pn,
		    old_m != NULL && !(old_m->permissions & bit) ?
			"newly requested" :
			"requested",
		    m->name, m->version, c, q, pn);
	}
	if (r.operator_defined)
		printf("  operator_defined: the grant alone governs\n");
	else if (r.not_granted.n == 0 && r.ineffective.n == 0 &&
	    (r.requested & ~r.granted_perms) == 0)
		printf("  the grant matches the declaration\n");
	pkg_reach_done(&r);
}

static int
inst_name_ok(const char *s)
{
	if (!pkg_name_is_valid(s) || strchr(s, '+') != NULL) {
		fprintf(stderr,
		    "egressctl: '%s': an instance name is 1 to %d "
		    "bytes of A-Z a-z 0-9 . _ -, not starting with . or -\n",
		    s, PKG_NAME_MAX);
		return 0;
	}
	return 1;
}

static int
parse_seed(const char *s, enum egress_seed *ret)
{
	if (strcmp(s, "declared") == 0)
		*ret = SEED_DECLARED;
	else if (strcmp(s, "none") == 0)
		*ret = SEED_NONE;
	else {
		fprintf(stderr,
		    "egressctl: --egress '%s': expected declared "
		    "or none\n",
		    s);
		return -1;
	}
	return 0;
}

/* Refuse a binding without --egress over a non-empty declaration. */
static int
binding_refused(const struct ctl_ctx *ctx, const char *how, const char *alias,
    const struct conf_manifest *m)
{
	struct pkg_strv decl = { 0 };

	(void)strv_from_grant(&decl, m->hosts);
	fprintf(stderr,
	    "egressctl: refusing to create the entry for %s "
	    "without a stated choice.\n",
	    alias);
	fprintf(stderr, "%s %s declares these destinations:\n", m->name,
	    m->version);
	print_list_to(stderr, "  ", &decl);
	fprintf(stderr, "Run again with one of:\n");
	fprintf(stderr, "  %s %s --egress declared   (grant exactly these)\n",
	    ctl_cmd(ctx), how);
	fprintf(stderr, "  %s %s --egress none       (grant nothing now)\n",
	    ctl_cmd(ctx), how);
	pkg_strv_done(&decl);
	return CTL_EXIT_NO;
}

/*
 * Create inst for manifest m, or, when it exists, leave it untouched and
 * print the difference. Commits the edit. Return an exit status.
 */
static int
entry_create_or_diff(const struct ctl_ctx *ctx, struct edit *e,
    const char *inst, const struct conf_manifest *m, const char *manifest_rel,
    enum egress_seed seed, int *ret_written)
{
	const struct conf_instance *ci = conf_instance_find(e->snap, inst);
	struct conf_snapshot *ns = NULL;
	const struct conf_instance *nci;
	char *sec = ctl_section_of(inst);
	char *cur = NULL;
	int rc = CTL_EXIT_ERROR;

	*ret_written = 0;
	if (sec == NULL)
		goto out;
	if (ci != NULL || iniedit_section_exists(e->doc, sec)) {
		if (ci == NULL) {
			fprintf(stderr,
			    "egressctl: [%s] exists; it is left "
			    "untouched\n",
			    sec);
			rc = CTL_EXIT_NO;
			goto out;
		}
		if (strcmp(ci->plugin, m->name) != 0) {
			fprintf(stderr,
			    "egressctl: instance %s exists for "
			    "plugin %s; choose another name (--instance or "
			    "the alias)\n",
			    inst, ci->plugin);
			rc = CTL_EXIT_NO;
			goto out;
		}
		cur = ctl_path_rel(e->snap->dir, ci->manifest_path);
		printf("instance %s exists: its entry is left untouched (no "
		       "command ever extends an entry)\n",
		    inst);
		printf("  it uses %s%s%s%s\n", cur ? cur : ci->manifest_path,
		    ci->manifest ? " (" : "",
		    ci->manifest ? ci->manifest->version : "",
		    ci->manifest ? ")" : "");
		printf("  its grant against %s %s:\n", m->name, m->version);
		print_diff(ctx, ci, m, NULL, 0);
		if (cur != NULL && strcmp(cur, manifest_rel) != 0)
			printf("  to point it at this version: %s plugin "
			       "upgrade PKG\n",
			    ctl_cmd(ctx));
		rc = CTL_EXIT_OK;
		goto out;
	}
	if (entry_add(e, inst, m, manifest_rel, seed) != 0)
		goto out;
	if (ctl_edit_commit(e, &ns) != 0)
		goto out;
	*ret_written = 1;
	nci = conf_instance_find(ns, inst);
	if (nci != NULL && nci->manifest == NULL)
		fprintf(stderr,
		    "egressctl: warning: instance %s: manifest "
		    "refused: %s\n",
		    inst, nci->manifest_error ? nci->manifest_error : "?");
	print_created(ctx, inst, m, manifest_rel, seed);
	rc = CTL_EXIT_OK;
out:
	conf_snapshot_free(ns);
	free(sec);
	free(cur);
	return rc;
}

/* ---- install ---------------------------------------------------------- */

static int
cmd_install(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "instance", required_argument, NULL, 'i' },
		{ "channel-alias", required_argument, NULL, 'a' },
		{ "egress", required_argument, NULL, 'e' },
		{ NULL, 0, NULL, 0 },
	};
	const char *instance = NULL, *alias = NULL, *pkg, *inst;
	enum egress_seed seed = SEED_UNSET;
	struct edit e;
	struct staged st;
	char how[4200], q[4100];
	int ch, rc, written = 0, have_edit = 0;

	memset(&st, 0, sizeof(st));
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'i':
			instance = optarg;
			break;
		case 'a':
			alias = optarg;
			break;
		case 'e':
			if (parse_seed(optarg, &seed) != 0)
				return CTL_EXIT_USAGE;
			break;
		default:
			plugin_usage(stderr);
			return CTL_EXIT_USAGE;
		}
	}
	if (instance != NULL && alias != NULL) {
		fprintf(stderr,
		    "egressctl: plugin install: --instance and "
		    "--channel-alias exclude each other\n");
		return CTL_EXIT_USAGE;
	}
	if (argc - optind != 1)
		return plugin_args_bad(argc, argv, optind, 1);
	pkg = argv[optind];
	if ((instance != NULL && !inst_name_ok(instance)) ||
	    (alias != NULL && !inst_name_ok(alias)))
		return CTL_EXIT_USAGE;
	if (ctl_edit_begin(ctx, &e) != 0)
		return CTL_EXIT_CONFIG;
	have_edit = 1;
	if ((rc = ctl_package_stage(&e, pkg, &st)) != 0)
		goto out;
	inst = alias ? alias : instance ? instance : st.m->name;
	if (!inst_name_ok(inst)) {
		fprintf(stderr,
		    "egressctl: name the instance with --instance\n");
		rc = CTL_EXIT_ERROR;
		goto out;
	}
	if (alias != NULL && seed == SEED_UNSET &&
	    policy_grant_count(st.m->hosts) > 0 &&
	    conf_instance_find(e.snap, inst) == NULL) {
		(void)snprintf(how, sizeof(how),
		    "plugin install %s "
		    "--channel-alias %s",
		    ctl_shq(pkg, q, sizeof(q)), alias);
		rc = binding_refused(ctx, how, alias, st.m);
		goto out;
	}
	if (seed == SEED_UNSET)
		seed = SEED_DECLARED;
	if ((rc = ctl_package_commit(&st)) != 0)
		goto out;
	ctl_sig_print(st.m, e.snap->sig_mode);
	printf("%s %.*s\n",
	    st.created ? "installed into" : "already installed in",
	    (int)(strlen(st.manifest_rel) - strlen("/manifest.ini")),
	    st.manifest_rel);
	rc = entry_create_or_diff(ctx, &e, inst, st.m, st.manifest_rel, seed,
	    &written);
out:
	/* A package this run copied is removed again unless an entry now
	 * uses it or the install reported an existing entry. */
	ctl_staged_done(&st, rc != CTL_EXIT_OK);
	if (have_edit)
		ctl_edit_end(&e);
	return rc;
}

/* ---- bind ------------------------------------------------------------- */

/* The installed packages of plugin in package_dir, each loaded under the
 * configured signature mode (a refused one is skipped). */
struct installed {
	char *dir; /* absolute folder */
	char *manifest_rel;
	struct conf_manifest *m;
};

static void
installed_free(struct installed *v, size_t n)
{
	size_t i;

	if (v == NULL)
		return;
	for (i = 0; i < n; i++) {
		free(v[i].dir);
		free(v[i].manifest_rel);
		conf_manifest_free(v[i].m);
	}
	free(v);
}

static int
installed_scan(const struct edit *e, const char *plugin,
    struct installed **ret, size_t *ret_n, int any_mode)
{
	struct installed *v = NULL, *nv;
	size_t n = 0, pl = strlen(plugin);
	DIR *d;
	struct dirent *de;

	*ret = NULL;
	*ret_n = 0;
	if ((d = opendir(e->pkg_abs)) == NULL)
		return errno == ENOENT ? 0 : -1;
	while ((de = readdir(d)) != NULL) {
		struct conf_errors errs = { 0 };
		struct conf_manifest *m = NULL;
		char *dir = NULL, *mp = NULL, *rel = NULL;
		struct stat sb;

		if (de->d_name[0] == '.' ||
		    strncmp(de->d_name, plugin, pl) != 0 ||
		    de->d_name[pl] != '-')
			continue;
		/* asprintf() leaves its pointer undefined when it fails. */
		if ((dir = ctl_path_join(e->pkg_abs, de->d_name)) == NULL ||
		    asprintf(&mp, "%s/manifest.ini", dir) < 0)
			mp = NULL;
		else if (asprintf(&rel, "%s/%s/manifest.ini", e->pkg_rel,
			     de->d_name) < 0)
			rel = NULL;
		if (dir == NULL || mp == NULL || rel == NULL) {
			free(dir);
			free(mp);
			free(rel);
			closedir(d);
			installed_free(v, n);
			return -1;
		}
		if (lstat(dir, &sb) == 0 && S_ISDIR(sb.st_mode) &&
		    conf_manifest_load(mp,
			any_mode ? CONF_SIG_DISABLED : e->snap->sig_mode,
			e->snap->keyring, &m, &errs) == 0 &&
		    strcmp(m->name, plugin) == 0 &&
		    (nv = reallocarray(v, n + 1, sizeof(*v))) != NULL) {
			v = nv;
			v[n].dir = dir;
			v[n].manifest_rel = rel;
			v[n].m = m;
			n++;
			dir = rel = NULL;
			m = NULL;
		}
		conf_manifest_free(m);
		conf_errors_done(&errs);
		free(dir);
		free(mp);
		free(rel);
	}
	closedir(d);
	*ret = v;
	*ret_n = n;
	return 0;
}

static int
cmd_bind(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "egress", required_argument, NULL, 'e' },
		{ NULL, 0, NULL, 0 },
	};
	enum egress_seed seed = SEED_UNSET;
	const char *plugin, *alias;
	const struct conf_manifest *m = NULL;
	struct installed *inst = NULL;
	size_t ninst = 0, i;
	char *rel = NULL, how[600], q[300];
	struct edit e;
	int ch, rc = CTL_EXIT_ERROR, written;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (ch != 'e') {
			plugin_usage(stderr);
			return CTL_EXIT_USAGE;
		}
		if (parse_seed(optarg, &seed) != 0)
			return CTL_EXIT_USAGE;
	}
	if (argc - optind != 2)
		return plugin_args_bad(argc, argv, optind, 2);
	plugin = argv[optind];
	alias = argv[optind + 1];
	if (!inst_name_ok(alias))
		return CTL_EXIT_USAGE;
	if (ctl_edit_begin(ctx, &e) != 0)
		return CTL_EXIT_CONFIG;
	/* The plugin's manifest: the one its instances use, else the one
	 * installed package of it. */
	for (i = 0; i < e.snap->ninstances; i++) {
		const struct conf_instance *ci = &e.snap->instances[i];

		if (strcmp(ci->plugin, plugin) == 0 && ci->manifest != NULL) {
			m = ci->manifest;
			rel = ctl_path_rel(e.snap->dir, ci->manifest_path);
			break;
		}
	}
	if (m == NULL) {
		if (installed_scan(&e, plugin, &inst, &ninst, 0) != 0) {
			fprintf(stderr, "egressctl: %s: %s\n", e.pkg_abs,
			    strerror(errno));
			goto out;
		}
		if (ninst == 0) {
			fprintf(stderr,
			    "egressctl: plugin %s is not installed; "
			    "install it with:\n  %s plugin install PKG "
			    "--channel-alias %s --egress declared|none\n",
			    plugin, ctl_cmd(ctx), alias);
			rc = CTL_EXIT_NO;
			goto out;
		}
		if (ninst > 1) {
			fprintf(stderr,
			    "egressctl: several versions of %s are "
			    "installed and no instance says which is "
			    "current; bind with:\n  %s plugin install PKG "
			    "--channel-alias %s --egress declared|none\n",
			    plugin, ctl_cmd(ctx), alias);
			rc = CTL_EXIT_NO;
			goto out;
		}
		m = inst[0].m;
		rel = strdup(inst[0].manifest_rel);
	}
	if (rel == NULL)
		goto out;
	if (seed == SEED_UNSET && policy_grant_count(m->hosts) > 0 &&
	    conf_instance_find(e.snap, alias) == NULL) {
		(void)snprintf(how, sizeof(how), "plugin bind %s %s",
		    ctl_shq(plugin, q, sizeof(q)), alias);
		rc = binding_refused(ctx, how, alias, m);
		goto out;
	}
	if (seed == SEED_UNSET)
		seed = SEED_DECLARED;
	ctl_sig_print(m, e.snap->sig_mode);
	rc = entry_create_or_diff(ctx, &e, alias, m, rel, seed, &written);
out:
	installed_free(inst, ninst);
	free(rel);
	ctl_edit_end(&e);
	return rc;
}

/* ---- upgrade ---------------------------------------------------------- */

static int
cmd_upgrade(struct ctl_ctx *ctx, int argc, char **argv)
{
	struct edit e;
	struct staged st;
	const char *pkg = NULL;
	size_t i, n = 0;
	char *sec = NULL, *cur = NULL;
	int rc, a, wake = 0, npkg = 0;

	memset(&st, 0, sizeof(st));
	for (a = 1; a < argc; a++) {
		if (strcmp(argv[a], "--wake") == 0)
			wake = 1;
		else if (argv[a][0] == '-') {
			fprintf(stderr,
			    "egressctl: plugin upgrade: unknown option "
			    "'%s'\n",
			    argv[a]);
			plugin_usage(stderr);
			return CTL_EXIT_USAGE;
		} else if (npkg++ == 0)
			pkg = argv[a];
		else {
			fprintf(stderr,
			    "egressctl: plugin upgrade: unexpected "
			    "argument '%s'\n",
			    argv[a]);
			plugin_usage(stderr);
			return CTL_EXIT_USAGE;
		}
	}
	if (pkg == NULL)
		return plugin_args_bad(argc, argv, 1, 1);
	if (ctl_edit_begin(ctx, &e) != 0)
		return CTL_EXIT_CONFIG;
	if ((rc = ctl_package_stage(&e, pkg, &st)) != 0)
		goto out;
	for (i = 0; i < e.snap->ninstances; i++)
		if (strcmp(e.snap->instances[i].plugin, st.m->name) == 0)
			n++;
	if (n == 0) {
		fprintf(stderr,
		    "egressctl: no instance of plugin %s; install "
		    "it with:\n  %s plugin install %s\n",
		    st.m->name, ctl_cmd(ctx), pkg);
		rc = CTL_EXIT_NO;
		goto out;
	}
	if (!wake && ctl_upgrade_wakes(ctx, e.snap, st.m, pkg) > 0) {
		rc = CTL_EXIT_NO;
		goto out;
	}
	if ((rc = ctl_package_commit(&st)) != 0)
		goto out;
	rc = CTL_EXIT_ERROR;
	for (i = 0; i < e.snap->ninstances; i++) {
		const struct conf_instance *ci = &e.snap->instances[i];

		if (strcmp(ci->plugin, st.m->name) != 0)
			continue;
		free(sec);
		free(cur);
		sec = ctl_section_of(ci->name);
		cur = ctl_path_rel(e.snap->dir, ci->manifest_path);
		if (sec == NULL || cur == NULL)
			goto out;
		if (strcmp(cur, st.manifest_rel) != 0 &&
		    iniedit_set(e.doc, sec, "manifest", st.manifest_rel) !=
			0) {
			fprintf(stderr,
			    "egressctl: cannot rewrite the manifest "
			    "key of %s\n",
			    ci->name);
			goto out;
		}
	}
	if (ctl_edit_commit(&e, NULL) != 0)
		goto out;
	ctl_sig_print(st.m, e.snap->sig_mode);
	printf("%s %.*s\n",
	    st.created ? "installed into" : "already installed in",
	    (int)(strlen(st.manifest_rel) - strlen("/manifest.ini")),
	    st.manifest_rel);
	for (i = 0; i < e.snap->ninstances; i++) {
		const struct conf_instance *ci = &e.snap->instances[i];

		if (strcmp(ci->plugin, st.m->name) != 0)
			continue;
		free(cur);
		cur = ctl_path_rel(e.snap->dir, ci->manifest_path);
		if (cur != NULL && strcmp(cur, st.manifest_rel) == 0)
			printf("instance %s: already uses %s; its grant is "
			       "unchanged\n",
			    ci->name, st.manifest_rel);
		else {
			printf("instance %s: now uses %s", ci->name,
			    st.manifest_rel);
			if (ci->manifest != NULL)
				printf(" (was %s)", ci->manifest->version);
			printf("; its grant is unchanged\n");
		}
		ctl_signer_warn(ci, st.m);
		print_diff(ctx, ci, st.m, ci->manifest, 1);
	}
	rc = CTL_EXIT_OK;
out:
	ctl_staged_done(&st, rc != CTL_EXIT_OK);
	free(sec);
	free(cur);
	ctl_edit_end(&e);
	return rc;
}

/* ---- grant / revoke --------------------------------------------------- */

static void
print_strv_line(const char *label, const struct pkg_strv *sv)
{
	size_t i;

	printf("  %s:", label);
	if (sv->n == 0)
		printf(" (none)");
	for (i = 0; i < sv->n; i++)
		printf("%s %s", i ? "," : "", sv->v[i]);
	printf("\n");
}

static void
strv_remove(struct pkg_strv *sv, const char *s)
{
	size_t i;

	for (i = 0; i < sv->n; i++)
		if (strcmp(sv->v[i], s) == 0) {
			free(sv->v[i]);
			memmove(&sv->v[i], &sv->v[i + 1],
			    (sv->n - i - 1) * sizeof(sv->v[0]));
			sv->n--;
			return;
		}
}

/* Build a grant set from canonical entry texts. */
static struct policy_grant *
grant_from_strv(const struct pkg_strv *sv)
{
	struct policy_grant *g = policy_grant_new();
	struct policy_entry en;
	struct policy_err pe;
	size_t i;

	if (g == NULL)
		return NULL;
	for (i = 0; i < sv->n; i++)
		if (policy_entry_parse(sv->v[i], strlen(sv->v[i]),
			conf_psl_is_public_suffix, NULL, &en, &pe) != 0 ||
		    policy_grant_add(g, &en) != 0) {
			policy_grant_free(g);
			return NULL;
		}
	return g;
}

/* The carve-out lists grant and revoke edit (CARVE_NONE: egress_hosts). */
enum carve { CARVE_NONE = -1, CARVE_PRIVATE = 0, CARVE_LOOPBACK = 1 };
static const char *const carve_keys[] = { "egress_allow_private",
	"egress_allow_loopback" };
static const char *const carve_opts[] = { "--private", "--loopback" };

/* Warn that the literal needs carve-out c besides what is being written
 * (carve), unless the entry already holds it. */
static void
literal_warn_carve(const struct ctl_ctx *ctx, const struct conf_instance *ci,
    const struct policy_entry *en, int carve, enum carve c)
{
	const struct policy_grant *g = c == CARVE_LOOPBACK ?
	    ci->allow_loopback :
	    ci->allow_private;
	char q[600], h[600];

	if ((int)c == carve || policy_grant_covers(g, en))
		return;
	fprintf(stderr,
	    "warning: %s is a %s %s: the address rules refuse it "
	    "unless it is also carved out in %s; if it is meant to be %s, "
	    "run:\n  %s plugin grant %s %s %s\n",
	    en->host.name, c == CARVE_LOOPBACK ? "loopback" : "private",
	    en->host.kind == POLICY_HOST_NAME ? "name" : "address",
	    carve_keys[c],
	    c == CARVE_LOOPBACK ? "a service on this very host" :
				  "on your network",
	    ctl_cmd(ctx), ctl_shq(ci->name, q, sizeof(q)), carve_opts[c],
	    ctl_shq(en->host.name, h, sizeof(h)));
}

/*
 * Warn when an IP-literal entry is one the address rules refuse whatever
 * the grant (metadata, reserved), or a private or loopback address that
 * needs its own carve-out besides the grant. The grant is still written:
 * the warning says why it alone cannot make the address reachable.
 */
static void
literal_warn(const struct ctl_ctx *ctx, const struct conf_snapshot *s,
    const struct netaddr *own, const struct conf_instance *ci,
    const struct policy_entry *en, int carve)
{
	const int private = carve != CARVE_NONE;
	struct policy_addr a;
	unsigned cls;

	if (policy_host_is_loopback_name(&en->host)) {
		/* localhost names: loopback by nature, before any lookup. */
		literal_warn_carve(ctx, ci, en, carve, CARVE_LOOPBACK);
		return;
	}
	if (en->kind != POLICY_ENTRY_EXACT ||
	    en->host.kind == POLICY_HOST_NAME ||
	    policy_addr_parse(en->host.name, &a) != 0)
		return;
	cls = ctl_classify(s, own, &a);
	if (cls & POLICY_CLASS_METADATA)
		fprintf(stderr,
		    "warning: %s is a cloud metadata address: the "
		    "address rules refuse it whatever the grant or carve-out, "
		    "so this %s cannot make it reachable\n",
		    en->host.name, private ? "carve-out" : "grant");
	else if (cls & POLICY_CLASS_RESERVED)
		fprintf(stderr,
		    "warning: %s is a reserved address "
		    "(unspecified, documentation, multicast, ...): the "
		    "address rules refuse it whatever the grant or carve-out, "
		    "so this %s cannot make it reachable\n",
		    en->host.name, private ? "carve-out" : "grant");
	else if (cls & POLICY_CLASS_LOOPBACK)
		literal_warn_carve(ctx, ci, en, carve, CARVE_LOOPBACK);
	else if (cls & POLICY_CLASS_PRIVATE)
		literal_warn_carve(ctx, ci, en, carve, CARVE_PRIVATE);
}

/* Answer whether entry en is in the loopback class whatever DNS says: a
 * localhost name, or a literal that classifies as loopback (with this
 * host's own addresses when own is known). */
static int
carve_is_loopback(const struct policy_entry *en, const struct netaddr *own)
{
	struct policy_addr a;

	if (policy_host_is_loopback_name(&en->host))
		return 1;
	if (en->kind != POLICY_ENTRY_EXACT ||
	    en->host.kind == POLICY_HOST_NAME ||
	    policy_addr_parse(en->host.name, &a) != 0)
		return 0;
	return (ctl_classify(NULL, own, &a) & POLICY_CLASS_LOOPBACK) != 0;
}

/*
 * egress_allow_private never opens the loopback class: an entry of that
 * class would be written and never work. Say so for each; return 1 when
 * any is.
 */
static int
private_refuse_loopback(const struct policy_entry *ents, size_t n,
    const struct netaddr *own)
{
	size_t i;
	int bad = 0;

	for (i = 0; i < n; i++)
		if (carve_is_loopback(&ents[i], own)) {
			fprintf(stderr,
			    "egressctl: %s is %s: egress_allow_private "
			    "never opens it; carve it out with --loopback "
			    "(egress_allow_loopback)\n",
			    ents[i].host.name,
			    ents[i].host.kind == POLICY_HOST_NAME ?
				"a loopback name (localhost)" :
				"a loopback address (or this host's own)");
			bad = 1;
		}
	return bad;
}

/* Drop from a carve-out list every item the grant ng no longer covers:
 * a carve-out never outlives the grant it relaxes. */
static int
carve_prune(const char *inst, const struct policy_grant *ng,
    struct pkg_strv *list, const char *key, int *changed)
{
	size_t i;

	for (i = list->n; i-- > 0;) {
		struct policy_entry pen;
		struct policy_err pe;

		if (policy_entry_parse(list->v[i], strlen(list->v[i]),
			conf_psl_is_public_suffix, NULL, &pen, &pe) != 0)
			return -1;
		if (!policy_grant_covers(ng, &pen)) {
			printf("instance %s: %s also leaves %s\n", inst,
			    list->v[i], key);
			strv_remove(list, list->v[i]);
			*changed = 1;
		}
	}
	return 0;
}

/* Add the permission named by --permission's arg to *perms; 0, or -1
 * (said on stderr) for an unknown name. */
static int
permission_opt(const char *arg, unsigned *perms)
{
	int bit = policy_permission_parse(arg, strlen(arg));

	if (bit < 0) {
		fprintf(stderr,
		    "egressctl: --permission '%s': expected http_client, "
		    "websocket_client or socket_client\n",
		    arg);
		return -1;
	}
	*perms |= (unsigned)bit;
	return 0;
}

static int
cmd_grant(struct ctl_ctx *ctx, int argc, char **argv, int revoke)
{
	static const struct option longopts[] = {
		{ "private", no_argument, NULL, 'p' },
		{ "loopback", no_argument, NULL, 'l' },
		{ "permission", required_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 },
	};
	const char *verb = revoke ? "revoke" : "grant", *inst;
	struct policy_entry *ents = NULL;
	struct pkg_strv hosts = { 0 }, carves[2] = { { 0 } }, done = { 0 };
	struct policy_grant *ng = NULL;
	const struct conf_instance *ci;
	const struct conf_manifest *m;
	unsigned perms = 0, newperms;
	size_t nents = 0, i;
	char *sec = NULL, q[600], h[600], pbuf[128];
	int ch, carve = CARVE_NONE, rc = CTL_EXIT_ERROR, hosts_changed = 0;
	int carve_changed[2] = { 0, 0 }, bad = 0, have_edit = 0, private;
	const char *key;
	struct netaddr *own = NULL;
	struct edit e;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'p':
		case 'l':
			if (carve != CARVE_NONE) {
				fprintf(stderr,
				    "egressctl: --private and "
				    "--loopback: one at a time\n");
				return CTL_EXIT_USAGE;
			}
			carve = ch == 'p' ? CARVE_PRIVATE : CARVE_LOOPBACK;
			break;
		case 'P':
			if (permission_opt(optarg, &perms) != 0)
				return CTL_EXIT_USAGE;
			break;
		default:
			plugin_usage(stderr);
			return CTL_EXIT_USAGE;
		}
	}
	private = carve != CARVE_NONE;
	key = private ? carve_keys[carve] : "egress_hosts";
	if (argc - optind < 1) {
		fprintf(stderr, "egressctl: plugin %s: missing INSTANCE\n",
		    verb);
		plugin_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	if ((argc - optind == 1 && perms == 0) ||
	    (private && argc - optind < 2)) {
		fprintf(stderr, "egressctl: plugin %s %s: missing HOST%s\n",
		    verb, argv[optind], private ? "" : " or --permission P");
		plugin_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	inst = argv[optind++];
	nents = (size_t)(argc - optind);
	if ((ents = calloc(nents ? nents : 1, sizeof(*ents))) == NULL)
		return CTL_EXIT_ERROR;
	/* Every entry is checked with the one grammar before any lock. */
	for (i = 0; i < nents; i++) {
		struct policy_err pe;
		const char *s = argv[optind + (int)i];

		if (policy_entry_parse(s, strlen(s), conf_psl_is_public_suffix,
			NULL, &ents[i], &pe) != 0) {
			fprintf(stderr, "egressctl: '%s': %s\n", s, pe.msg);
			bad = 1;
		}
	}
	if (!bad && !revoke && nents > 0) {
		(void)ctl_own_read("plugin grant's warnings", &own);
		bad = carve == CARVE_PRIVATE &&
		    private_refuse_loopback(ents, nents, own);
	}
	if (bad) {
		rc = CTL_EXIT_USAGE;
		goto out;
	}
	if (ctl_edit_begin(ctx, &e) != 0) {
		rc = CTL_EXIT_CONFIG;
		goto out;
	}
	have_edit = 1;
	if ((ci = conf_instance_find(e.snap, inst)) == NULL) {
		fprintf(stderr, "egressctl: no instance %s in %s\n", inst,
		    ctx->config_path);
		rc = CTL_EXIT_NO;
		goto out;
	}
	m = ci->manifest;
	ctl_shq(inst, q, sizeof(q));
	for (i = 0; !revoke && i < nents; i++)
		literal_warn(ctx, e.snap, own, ci, &ents[i], carve);
	if (strv_from_grant(&hosts, ci->hosts) != 0 ||
	    strv_from_grant(&carves[0], ci->allow_private) != 0 ||
	    strv_from_grant(&carves[1], ci->allow_loopback) != 0 ||
	    (sec = ctl_section_of(inst)) == NULL)
		goto out;
	newperms = ci->granted_permissions;
	for (i = 0; i < nents; i++) {
		char t[POLICY_NAME_MAX + 8];
		struct pkg_strv *list = private ? &carves[carve] : &hosts;

		if (policy_entry_format(&ents[i], t, sizeof(t)) < 0)
			goto out;
		ctl_shq(t, h, sizeof(h));
		if (!revoke) {
			if (private &&
			    !policy_grant_covers(ci->hosts, &ents[i])) {
				fprintf(stderr,
				    "egressctl: %s is not granted to "
				    "%s; a carve-out only relaxes the address "
				    "class of a granted host. Grant it first:\n"
				    "  %s plugin grant %s %s\n",
				    t, inst, ctl_cmd(ctx), q, h);
				bad = 1;
				continue;
			}
			if (pkg_strv_has(list, t)) {
				printf("instance %s: %s is already in %s\n",
				    inst, t, key);
				continue;
			}
			if (!private &&
			    policy_grant_covers(ci->hosts, &ents[i])) {
				printf("instance %s: %s is already covered by "
				       "its egress_hosts\n",
				    inst, t);
				continue;
			}
			if (pkg_strv_add(list, t) != 0 ||
			    pkg_strv_add(&done, t) != 0)
				goto out;
		} else {
			if (!pkg_strv_has(list, t)) {
				fprintf(stderr,
				    "egressctl: %s is not in the %s "
				    "of %s%s\n",
				    t, key, inst,
				    !private &&
					    policy_grant_covers(ci->hosts,
						&ents[i]) ?
					" (a wider entry "
					"covers it: revoke that one)" :
					"");
				bad = 1;
				continue;
			}
			strv_remove(list, t);
			if (pkg_strv_add(&done, t) != 0)
				goto out;
		}
		if (private)
			carve_changed[carve] = 1;
		else
			hosts_changed = 1;
	}
	if (revoke) {
		if ((ci->granted_permissions & perms) != perms) {
			fprintf(stderr, "egressctl: %s does not hold %s\n",
			    inst,
			    ctl_perm_list(perms & ~ci->granted_permissions,
				pbuf, sizeof(pbuf)));
			bad = 1;
		}
		newperms &= ~perms;
	} else
		newperms |= perms;
	if (bad) {
		fprintf(stderr, "egressctl: nothing was changed\n");
		rc = CTL_EXIT_NO;
		goto out;
	}
	/* A carve-out never outlives the grant it relaxes. */
	if (revoke && hosts_changed) {
		if ((ng = grant_from_strv(&hosts)) == NULL)
			goto out;
		for (i = 0; i < 2; i++)
			if (carve_prune(inst, ng, &carves[i], carve_keys[i],
				&carve_changed[i]) != 0)
				goto out;
	}
	if (!hosts_changed && !carve_changed[0] && !carve_changed[1] &&
	    newperms == ci->granted_permissions) {
		printf("instance %s: nothing to change\n", inst);
		rc = CTL_EXIT_OK;
		goto out;
	}
	if (hosts_changed &&
	    iniedit_set_list(e.doc, sec, "egress_hosts",
		(const char *const *)hosts.v, hosts.n) != 0)
		goto edit_failed;
	for (i = 0; i < 2; i++)
		if (carve_changed[i] &&
		    iniedit_set_list(e.doc, sec, carve_keys[i],
			(const char *const *)carves[i].v, carves[i].n) != 0)
			goto edit_failed;
	if (newperms != ci->granted_permissions) {
		const char *items[PERMS_MAX];
		int np = perms_to_items(newperms, items);

		if (iniedit_set_list(e.doc, sec, "permissions", items,
			(size_t)np) != 0)
			goto edit_failed;
	}
	if (ctl_edit_commit(&e, NULL) != 0)
		goto out;
	for (i = 0; i < done.n; i++)
		printf("instance %s: %s %s%s%s%s\n", inst,
		    revoke ? "revoked" : "granted", done.v[i],
		    private ? " (" : "", private ? key : "",
		    private ? ")" : "");
	if (perms != 0)
		printf("instance %s: %s permission %s\n", inst,
		    revoke ? "revoked" : "granted",
		    ctl_perm_list(perms, pbuf, sizeof(pbuf)));
	if (!revoke && m != NULL) {
		for (i = 0; i < nents && !private; i++)
			if (!m->operator_defined &&
			    !policy_grant_covers(m->hosts, &ents[i])) {
				char t[POLICY_NAME_MAX + 8];

				(void)policy_entry_format(&ents[i], t,
				    sizeof(t));
				printf(
				    "  note: %s is not declared by %s %s: "
				    "the grant is ineffective until a version "
				    "declares it\n",
				    t, m->name, m->version);
			}
		if ((perms & ~m->permissions) != 0)
			printf("  note: %s %s does not request %s: "
			       "ineffective\n",
			    m->name, m->version,
			    ctl_perm_list(perms & ~m->permissions, pbuf,
				sizeof(pbuf)));
	}
	printf("instance %s now has:\n", inst);
	print_strv_line("egress_hosts", &hosts);
	print_strv_line("egress_allow_private", &carves[0]);
	if (carves[1].n > 0 || carve == CARVE_LOOPBACK)
		print_strv_line("egress_allow_loopback", &carves[1]);
	printf("  permissions: %s\n",
	    ctl_perm_list(newperms, pbuf, sizeof(pbuf)));
	rc = CTL_EXIT_OK;
	goto out;
edit_failed:
	fprintf(stderr, "egressctl: cannot rewrite the entry of %s\n", inst);
out:
	(void)verb;
	policy_grant_free(ng);
	pkg_strv_done(&hosts);
	pkg_strv_done(&carves[0]);
	pkg_strv_done(&carves[1]);
	pkg_strv_done(&done);
	free(sec);
	free(ents);
	netaddr_free(own);
	if (have_edit)
		ctl_edit_end(&e);
	return rc;
}

/* ---- remove ----------------------------------------------------------- */

static int
cmd_remove(struct ctl_ctx *ctx, int argc, char **argv)
{
	struct installed *pk = NULL;
	size_t npk = 0, i, j, ninst = 0;
	struct conf_snapshot *ns = NULL;
	const char *plugin;
	char err[512], pbuf[128];
	struct edit e;
	int rc = CTL_EXIT_ERROR;

	if (argc > 1 && argv[1][0] == '-') {
		fprintf(stderr,
		    "egressctl: plugin remove: unknown option "
		    "'%s'\n",
		    argv[1]);
		plugin_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	if (argc != 2)
		return plugin_args_bad(argc, argv, 1, 1);
	plugin = argv[1];
	if (ctl_edit_begin(ctx, &e) != 0)
		return CTL_EXIT_CONFIG;
	if (installed_scan(&e, plugin, &pk, &npk, 1) != 0) {
		fprintf(stderr, "egressctl: %s: %s\n", e.pkg_abs,
		    strerror(errno));
		goto out;
	}
	for (i = 0; i < e.snap->ninstances; i++) {
		const struct conf_instance *ci = &e.snap->instances[i];
		struct pkg_reach r;
		char *sec;

		if (strcmp(ci->plugin, plugin) != 0)
			continue;
		ninst++;
		if (pkg_reach_compute(ci, ci->manifest, NULL, &r) != 0 ||
		    (sec = ctl_section_of(ci->name)) == NULL)
			goto out;
		if (r.effective == 0)
			pkg_strv_done(&r.reach);
		printf("instance %s: its entry is removed; it loses:\n",
		    ci->name);
		if (r.reach.n == 0)
			printf("    (no reach)\n");
		print_list("    ", &r.reach);
		printf("  permissions: %s\n",
		    ctl_perm_list(r.effective, pbuf, sizeof(pbuf)));
		pkg_reach_done(&r);
		if (iniedit_section_remove(e.doc, sec) != 0) {
			free(sec);
			fprintf(stderr, "egressctl: cannot remove [%s]\n",
			    ci->name);
			goto out;
		}
		free(sec);
	}
	if (ninst == 0 && npk == 0) {
		fprintf(stderr,
		    "egressctl: plugin %s is not installed and has "
		    "no instance\n",
		    plugin);
		rc = CTL_EXIT_NO;
		goto out;
	}
	if (ninst > 0 && ctl_edit_commit(&e, &ns) != 0)
		goto out;
	/* The entries are gone; now the packages no remaining entry uses. */
	for (i = 0; i < npk; i++) {
		const struct conf_snapshot *s = ns ? ns : e.snap;
		int used = 0;

		for (j = 0; j < s->ninstances; j++)
			if (ctl_is_under(pk[i].dir,
				s->instances[j].manifest_path))
				used = 1;
		if (used) {
			printf("kept %.*s: another entry uses it\n",
			    (int)(strlen(pk[i].manifest_rel) -
				strlen("/manifest.ini")),
			    pk[i].manifest_rel);
			continue;
		}
		if (pkg_remove_tree(pk[i].dir, err, sizeof(err)) != 0) {
			fprintf(stderr, "egressctl: %s\n", err);
			goto out;
		}
		printf("removed package %.*s\n",
		    (int)(strlen(pk[i].manifest_rel) -
			strlen("/manifest.ini")),
		    pk[i].manifest_rel);
	}
	rc = CTL_EXIT_OK;
out:
	installed_free(pk, npk);
	conf_snapshot_free(ns);
	ctl_edit_end(&e);
	return rc;
}

static int
cmd_list(struct ctl_ctx *ctx, int argc, char **argv)
{
	int json = 0;

	if (argc > 1 && strcmp(argv[1], "--json") == 0)
		json = 1;
	if (argc > 1 + json && argv[1 + json][0] == '-') {
		fprintf(stderr,
		    "egressctl: plugin list: unknown option "
		    "'%s'\n",
		    argv[1 + json]);
		plugin_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	if (argc > 1 + json)
		return plugin_args_bad(argc, argv, 1 + json, 0);
	return ctl_plugin_list(ctx, json);
}

int
ctl_plugin_main(struct ctl_ctx *ctx, int argc, char **argv)
{
	const char *sub;

	if (argc < 2 ||
	    (argv[1][0] != '-' && strcmp(argv[1], "install") != 0 &&
		strcmp(argv[1], "bind") != 0 &&
		strcmp(argv[1], "upgrade") != 0 &&
		strcmp(argv[1], "grant") != 0 &&
		strcmp(argv[1], "revoke") != 0 &&
		strcmp(argv[1], "remove") != 0 &&
		strcmp(argv[1], "list") != 0)) {
		ctl_bad_subcommand("plugin", argc, argv);
		plugin_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	sub = argv[1];
	argc--;
	argv++;
	if (strcmp(sub, "install") == 0)
		return cmd_install(ctx, argc, argv);
	if (strcmp(sub, "bind") == 0)
		return cmd_bind(ctx, argc, argv);
	if (strcmp(sub, "upgrade") == 0)
		return cmd_upgrade(ctx, argc, argv);
	if (strcmp(sub, "grant") == 0)
		return cmd_grant(ctx, argc, argv, 0);
	if (strcmp(sub, "revoke") == 0)
		return cmd_grant(ctx, argc, argv, 1);
	if (strcmp(sub, "remove") == 0)
		return cmd_remove(ctx, argc, argv);
	if (strcmp(sub, "list") == 0)
		return cmd_list(ctx, argc, argv);
	if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0) {
		plugin_usage(stdout);
		return CTL_EXIT_OK;
	}
	ctl_bad_subcommand("plugin", argc + 1, argv - 1);
	plugin_usage(stderr);
	return CTL_EXIT_USAGE;
}
