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
