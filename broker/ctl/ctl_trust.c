/* SPDX-License-Identifier: ISC */
/*
 * `egressctl trust add|list|remove`: the keys trusted to sign packages
 * ([plugins.security] trusted_keys), edited with the same locked, atomic
 * edit as the plugin commands (ctl_edit.h).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "broker/ctl/ctl.h"
#include "broker/ctl/ctl_edit.h"
#include "broker/ctl/iniedit.h"
#include "broker/ctl/pkg.h"
#include "conf/conf.h"

/* ---- trust add | list | remove ---------------------------------------- */

static void
trust_usage(FILE *f)
{
	fprintf(f,
	    "usage: egressctl [-c FILE] trust add KEY.pub\n"
	    "       egressctl [-c FILE] trust list [--json]\n"
	    "       egressctl [-c FILE] trust remove FINGERPRINT\n");
}

/* Accept "sha256:" + 32 hex digits, or the 32 digits alone; write the
 * canonical lowercase "sha256:..." form into buf (at least 40 bytes). */
static int
fingerprint_parse(const char *s, char *buf, size_t n)
{
	size_t i;

	if (strncmp(s, "sha256:", 7) == 0)
		s += 7;
	if (strlen(s) != 32 || n < 40)
		return -1;
	memcpy(buf, "sha256:", 7);
	for (i = 0; i < 32; i++) {
		char c = s[i];

		if (c >= 'A' && c <= 'F')
			c = (char)(c - 'A' + 'a');
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return -1;
		buf[7 + i] = c;
	}
	buf[39] = '\0';
	return 0;
}

/* The trusted_keys items as written (relative to the configuration's
 * folder when they lie under it), minus index skip (or none: -1). */
static int
trust_items(const struct conf_snapshot *s, long skip, struct pkg_strv *sv)
{
	size_t i;
	char *rel;

	for (i = 0; i < s->ntrusted_keys; i++) {
		if ((long)i == skip)
			continue;
		if ((rel = ctl_path_rel(s->dir, s->trusted_keys[i])) == NULL ||
		    pkg_strv_add(sv, rel) != 0) {
			free(rel);
			return -1;
		}
		free(rel);
	}
	return 0;
}

/* Write the list sv as [plugins.security] trusted_keys and commit. */
static int
trust_write(struct edit *e, const struct pkg_strv *sv)
{
	int r;

	if (!iniedit_section_exists(e->doc, "plugins.security") &&
	    iniedit_section_add(e->doc, "plugins.security") != 0) {
		fprintf(stderr, "egressctl: cannot add [plugins.security]\n");
		return CTL_EXIT_ERROR;
	}
	r = iniedit_set_list(e->doc, "plugins.security", "trusted_keys",
	    (const char *const *)sv->v, sv->n);
	if (r != 0) {
		fprintf(stderr,
		    "egressctl: cannot write trusted_keys: %s (a "
		    "key path must hold no blank or comma)\n",
		    egress_strerror(r));
		return CTL_EXIT_NO;
	}
	if (ctl_edit_commit(e, NULL) != 0)
		return CTL_EXIT_ERROR;
	return CTL_EXIT_OK;
}

static void
print_trusted(const struct pkg_strv *sv)
{
	size_t i;

	printf("[plugins.security] trusted_keys =");
	if (sv->n == 0)
		printf(" (none)");
	for (i = 0; i < sv->n; i++)
		printf("%s %s", i ? "," : "", sv->v[i]);
	printf("\n");
}

static int
cmd_trust_add(struct ctl_ctx *ctx, int argc, char **argv)
{
	struct pkg_strv sv = { 0 };
	struct edit e;
	char fp[80], ofp[80], err[600], *abs = NULL, *dir = NULL, *item = NULL;
	size_t i;
	int rc;

	if (argc > 1 && argv[1][0] == '-') {
		fprintf(stderr, "egressctl: trust add: unknown option '%s'\n",
		    argv[1]);
		trust_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	if (argc != 2) {
		if (argc > 2)
			fprintf(stderr,
			    "egressctl: trust add: unexpected "
			    "argument '%s'\n",
			    argv[2]);
		else
			fprintf(stderr,
			    "egressctl: trust add: missing "
			    "KEY.pub\n");
		trust_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	if (ctl_key_fingerprint(argv[1], fp, sizeof(fp), err, sizeof(err)) ==
	    NULL) {
		fprintf(stderr, "egressctl: %s; nothing was changed\n", err);
		return CTL_EXIT_NO;
	}
	if (ctl_edit_begin(ctx, &e) != 0)
		return CTL_EXIT_CONFIG;
	for (i = 0; i < e.snap->ntrusted_keys; i++)
		if (ctl_key_fingerprint(e.snap->trusted_keys[i], ofp,
			sizeof(ofp), err, sizeof(err)) != NULL &&
		    strcmp(ofp, fp) == 0) {
			printf("key %s is already trusted (%s); nothing was "
			       "changed\n",
			    fp, e.snap->trusted_keys[i]);
			rc = CTL_EXIT_OK;
			goto out;
		}
	rc = CTL_EXIT_ERROR;
	/* The path as written: relative to the configuration's folder when
	 * the key lies under it, else absolute. */
	if ((abs = realpath(argv[1], NULL)) == NULL ||
	    (dir = realpath(e.snap->dir, NULL)) == NULL ||
	    (item = ctl_path_rel(dir, abs)) == NULL) {
		fprintf(stderr, "egressctl: %s: %s\n", argv[1],
		    strerror(errno));
		goto out;
	}
	if (trust_items(e.snap, -1, &sv) != 0 || pkg_strv_add(&sv, item) != 0)
		goto out;
	if ((rc = trust_write(&e, &sv)) != CTL_EXIT_OK)
		goto out;
	printf("trusted key %s (%s)\n", fp, item);
	print_trusted(&sv);
out:
	pkg_strv_done(&sv);
	free(abs);
	free(dir);
	free(item);
	ctl_edit_end(&e);
	return rc;
}

static int
cmd_trust_remove(struct ctl_ctx *ctx, int argc, char **argv)
{
	struct pkg_strv sv = { 0 };
	struct edit e;
	char want[80], fp[80], err[600];
	size_t i;
	int rc = CTL_EXIT_NO;

	if (argc != 2 || argv[1][0] == '-') {
		if (argc > 1 && argv[1][0] == '-')
			fprintf(stderr,
			    "egressctl: trust remove: unknown "
			    "option '%s'\n",
			    argv[1]);
		else if (argc > 2)
			fprintf(stderr,
			    "egressctl: trust remove: unexpected "
			    "argument '%s'\n",
			    argv[2]);
		else
			fprintf(stderr,
			    "egressctl: trust remove: missing "
			    "FINGERPRINT\n");
		trust_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	if (fingerprint_parse(argv[1], want, sizeof(want)) != 0) {
		fprintf(stderr,
		    "egressctl: trust remove: '%s': a fingerprint "
		    "is sha256: and 32 hex digits (see egressctl trust "
		    "list)\n",
		    argv[1]);
		return CTL_EXIT_USAGE;
	}
	if (ctl_edit_begin(ctx, &e) != 0)
		return CTL_EXIT_CONFIG;
	for (i = 0; i < e.snap->ntrusted_keys; i++)
		if (ctl_key_fingerprint(e.snap->trusted_keys[i], fp,
			sizeof(fp), err, sizeof(err)) != NULL &&
		    strcmp(fp, want) == 0)
			break;
	if (i == e.snap->ntrusted_keys) {
		fprintf(stderr,
		    "egressctl: no trusted key has fingerprint %s "
		    "in %s; nothing was changed\n",
		    want, ctx->config_path);
		goto out;
	}
	rc = CTL_EXIT_ERROR;
	if (trust_items(e.snap, (long)i, &sv) != 0)
		goto out;
	if ((rc = trust_write(&e, &sv)) != CTL_EXIT_OK)
		goto out;
	printf("no longer trusted: key %s (%s)\n", want,
	    e.snap->trusted_keys[i]);
	print_trusted(&sv);
	if (sv.n == 0 && e.snap->sig_mode == CONF_SIG_STRICT)
		printf("warning: signature_mode = strict and no key is "
		       "trusted: every package is refused\n");
out:
	pkg_strv_done(&sv);
	ctl_edit_end(&e);
	return rc;
}

static int
cmd_trust_list(struct ctl_ctx *ctx, int argc, char **argv)
{
	struct conf_snapshot *s = NULL;
	json_t *arr = NULL;
	char fp[80], err[600];
	size_t i;
	int json = argc == 2 && strcmp(argv[1], "--json") == 0;
	int rc = CTL_EXIT_ERROR;

	if (argc > 1 + json) {
		if (argv[1 + json][0] == '-')
			fprintf(stderr,
			    "egressctl: trust list: unknown option "
			    "'%s'\n",
			    argv[1 + json]);
		else
			fprintf(stderr,
			    "egressctl: trust list: unexpected "
			    "argument '%s'\n",
			    argv[1 + json]);
		trust_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	if (ctl_conf_load(ctx->config_path, &s) != 0)
		return CTL_EXIT_CONFIG;
	if (json && (arr = json_array()) == NULL)
		goto out;
	if (!json)
		printf("signature_mode: %s\n",
		    s->sig_mode == CONF_SIG_STRICT	   ? "strict" :
			s->sig_mode == CONF_SIG_PERMISSIVE ? "permissive" :
							     "disabled");
	if (!json && s->ntrusted_keys == 0)
		printf("no trusted key\n");
	for (i = 0; i < s->ntrusted_keys; i++) {
		const char *f = ctl_key_fingerprint(s->trusted_keys[i], fp,
		    sizeof(fp), err, sizeof(err));
		char *rel = ctl_path_rel(s->dir, s->trusted_keys[i]);

		if (json)
			json_array_append_new(arr,
			    json_pack("{s:o, s:s, s:o}", "fingerprint",
				f ? json_string(f) : json_null(), "path",
				rel ? rel : s->trusted_keys[i], "error",
				f ? json_null() : json_string(err)));
		else if (f != NULL)
			printf("%s %s\n", f, rel ? rel : s->trusted_keys[i]);
		else
			printf("unreadable %s (%s)\n",
			    rel ? rel : s->trusted_keys[i], err);
		free(rel);
	}
	if (json && ctl_print_json(arr) != 0)
		goto out;
	rc = CTL_EXIT_OK;
out:
	json_decref(arr);
	conf_snapshot_free(s);
	return rc;
}

int
ctl_trust_main(struct ctl_ctx *ctx, int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "add") == 0)
		return cmd_trust_add(ctx, argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "list") == 0)
		return cmd_trust_list(ctx, argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "remove") == 0)
		return cmd_trust_remove(ctx, argc - 1, argv + 1);
	if (argc >= 2 &&
	    (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		trust_usage(stdout);
		return CTL_EXIT_OK;
	}
	ctl_bad_subcommand("trust", argc, argv);
	trust_usage(stderr);
	return CTL_EXIT_USAGE;
}
