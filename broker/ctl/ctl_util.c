/* SPDX-License-Identifier: ISC */
/*
 * Small helpers shared by the egressctl subcommands: shell quoting and the
 * command prefix of printed commands, loading the configuration with
 * errors that say what is wrong with the path, the message of a bad
 * subcommand, and classifying an address with this host's own addresses.
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "broker/ctl/ctl.h"
#include "broker/ctl/pkg.h"
#include "broker/net/netaddr.h"
#include "conf/conf.h"
#include "policy/policy.h"

const char *
ctl_shq(const char *s, char *buf, size_t n)
{
	const char *p;

	for (p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			(*p >= '0' && *p <= '9') || strchr("._-/:+=@%", *p)))
			break;
	if (*p == '\0' && *s != '\0')
		(void)snprintf(buf, n, "%s", s);
	else if (strchr(s, '\'') != NULL)
		(void)snprintf(buf, n, "'(unprintable)'");
	else
		(void)snprintf(buf, n, "'%s'", s);
	return buf;
}

const char *
ctl_cmd(const struct ctl_ctx *ctx)
{
	static char buf[4200];
	char q[4100];

	if (strcmp(ctx->config_path, CONF_DEFAULT_PATH) == 0)
		return "egressctl";
	(void)snprintf(buf, sizeof(buf), "egressctl -c %s",
	    ctl_shq(ctx->config_path, q, sizeof(q)));
	return buf;
}

int
ctl_conf_load(const char *path, struct conf_snapshot **ret_snap)
{
	struct conf_errors errs = { 0 };
	struct stat st;
	size_t i;

	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		fprintf(stderr,
		    "egressctl: %s: cannot read the configuration: "
		    "it is a folder, not a file (give the file with -c FILE)\n",
		    path);
		return -1;
	}
	if (conf_load(path, ret_snap, &errs) != 0) {
		for (i = 0; i < errs.n; i++)
			fprintf(stderr, "%s\n", errs.msgs[i]);
		fprintf(stderr, "egressctl: %s: configuration refused\n",
		    path);
		conf_errors_done(&errs);
		return -1;
	}
	conf_errors_done(&errs);
	return 0;
}

void
ctl_bad_subcommand(const char *cmd, int argc, char **argv)
{
	if (argc < 2)
		fprintf(stderr, "egressctl: %s: missing subcommand\n", cmd);
	else if (argv[1][0] == '-')
		fprintf(stderr, "egressctl: %s: unknown option '%s'\n", cmd,
		    argv[1]);
	else
		fprintf(stderr, "egressctl: %s: unknown subcommand '%s'\n",
		    cmd, argv[1]);
}

int
ctl_print_json(const struct json_t *v)
{
	char *out = json_dumps(v, JSON_INDENT(2));

	if (out == NULL)
		return -1;
	printf("%s\n", out);
	free(out);
	return 0;
}

int
ctl_own_read(const char *what, struct netaddr **ret)
{
	int err;

	*ret = NULL;
	if ((err = netaddr_read(ret)) != 0) {
		*ret = NULL;
		fprintf(stderr,
		    "egressctl: cannot read this host's addresses and local "
		    "routes (netlink: %s); %s do not know them: an address "
		    "of this host is taken for what its range says\n",
		    egress_strerror(err), what);
	}
	return err;
}

unsigned
ctl_classify(const struct conf_snapshot *s, const struct netaddr *own,
    const struct policy_addr *a)
{
	struct policy_classify_ctx cc;

	memset(&cc, 0, sizeof(cc));
	cc.nat64 = s != NULL ? &s->nat64 : NULL;
	(void)netaddr_own(own, &cc); /* unknown: classified without */
	return policy_addr_classify(&cc, a);
}

/* Any trusted key verifies any package: say when the key that signed the
 * version ci used is not the one that signed m, or m is not signed. */
void
ctl_signer_warn(const struct conf_instance *ci, const struct conf_manifest *m)
{
	const struct conf_manifest *old = ci->manifest;

	if (old == NULL || old->sig != CONF_SIG_VALID ||
	    (m->sig == CONF_SIG_VALID && strcmp(old->signer, m->signer) == 0))
		return;
	if (m->sig == CONF_SIG_VALID)
		printf("  warning: %s %s is signed by key %s, not by key %s "
		       "that signed %s %s\n",
		    m->name, m->version, m->signer, old->signer, old->name,
		    old->version);
	else
		printf(
		    "  warning: %s %s is not signed by a trusted key, while "
		    "%s %s was (key %s)\n",
		    m->name, m->version, old->name, old->version, old->signer);
}

/*
 * Would m make any instance of its plugin reach a granted entry its
 * current manifest did not (a grant left behind by an older version,
 * woken by a declaration or by operator_defined)? Say which, and how to
 * choose, on stderr. Return how many instances would.
 */
size_t
ctl_upgrade_wakes(const struct ctl_ctx *ctx, const struct conf_snapshot *snap,
    const struct conf_manifest *m, const char *pkg)
{
	const struct pkg_strv *woken;
	struct pkg_reach r;
	char q[600], h[600];
	size_t i, k, n = 0;

	for (i = 0; i < snap->ninstances; i++) {
		const struct conf_instance *ci = &snap->instances[i];

		if (strcmp(ci->plugin, m->name) != 0 ||
		    pkg_reach_compute(ci, m, ci->manifest, &r) != 0)
			continue;
		/* A refused manifest reaches nothing: all of it is new. */
		woken = ci->manifest != NULL ? &r.woken : &r.reach;
		if (woken->n > 0) {
			n++;
			if (ci->manifest != NULL)
				fprintf(stderr,
				    "egressctl: %s %s would make instance %s "
				    "reach granted destinations that %s %s did "
				    "not:\n",
				    m->name, m->version, ci->name,
				    ci->manifest->name, ci->manifest->version);
			else
				fprintf(stderr,
				    "egressctl: %s %s would make instance %s, "
				    "whose manifest is refused now (it reaches "
				    "nothing), reach granted destinations:\n",
				    m->name, m->version, ci->name);
			for (k = 0; k < woken->n; k++)
				fprintf(stderr, "  %s\n", woken->v[k]);
			fprintf(stderr,
			    "  keep them unreachable first:\n"
			    "    %s plugin revoke %s",
			    ctl_cmd(ctx), ctl_shq(ci->name, q, sizeof(q)));
			for (k = 0; k < woken->n; k++)
				fprintf(stderr, " %s",
				    ctl_shq(woken->v[k], h, sizeof(h)));
			fprintf(stderr, "\n");
		}
		pkg_reach_done(&r);
	}
	if (n > 0)
		fprintf(stderr,
		    "egressctl: nothing was changed; or let it reach them: "
		    "%s plugin upgrade --wake %s\n",
		    ctl_cmd(ctx), ctl_shq(pkg, q, sizeof(q)));
	return n;
}
