/* SPDX-License-Identifier: ISC */
/*
 * egressctl: the operator's command-line tool. This file parses the global
 * options and dispatches to a subcommand (broker/ctl_*.c).
 */
#include <stdio.h>
#include <string.h>

#include "broker/ctl/ctl.h"
#include "conf/conf.h"

struct ctl_command {
	const char *name;
	int (*main)(struct ctl_ctx *, int, char **);
	const char *synopsis;
};

static const struct ctl_command commands[] = {
	{ "check", ctl_check_main,
	    "check [--transport T] [--resolve HOST=ADDR,...]... [--json] "
	    "INSTANCE DESTINATION" },
	{ "manifest", ctl_manifest_main,
	    "manifest keygen|sign|verify ..." },
	{ "plugin", ctl_plugin_main,
	    "plugin install|bind|upgrade|grant|revoke|remove|list ..." },
	{ "diagnose", ctl_diagnose_main, "diagnose [--log FILE] [--json]" },
	{ "status", ctl_status_main, "status [--socket PATH] [--json]" },
	{ "instances", ctl_status_main, "instances [--socket PATH] [--json]" },
	{ "instance", ctl_status_main, "instance [--json] NAME" },
	{ "grants", ctl_status_main, "grants [--json] NAME" },
	{ "metrics", ctl_status_main, "metrics [--socket PATH]" },
	{ "attach", ctl_status_main, "attach NAME [-- COMMAND [ARG...]]" },
};

static void
usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: egressctl [-c FILE] COMMAND [ARGS...]\n");
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "       egressctl [-c FILE] %s\n",
		    commands[i].synopsis);
	fprintf(f, "       egressctl --version\n");
}

int
main(int argc, char **argv)
{
	struct ctl_ctx ctx = { .config_path = NULL, .progname = "egressctl" };
	const char *config = NULL;
	size_t i;
	int ai = 1;

	while (ai < argc && argv[ai][0] == '-') {
		if (strcmp(argv[ai], "-c") == 0 ||
		    strcmp(argv[ai], "--config") == 0) {
			if (ai + 1 >= argc) {
				fprintf(stderr, "egressctl: %s needs a file\n",
				    argv[ai]);
				return CTL_EXIT_ERROR;
			}
			config = argv[ai + 1];
			ai += 2;
		} else if (strncmp(argv[ai], "--config=", 9) == 0) {
			config = argv[ai] + 9;
			ai++;
		} else if (strcmp(argv[ai], "--version") == 0) {
			printf("egressctl %s\n", EGRESSD_VERSION);
			return CTL_EXIT_OK;
		} else if (strcmp(argv[ai], "-h") == 0 ||
		    strcmp(argv[ai], "--help") == 0) {
			usage(stdout);
			return CTL_EXIT_OK;
		} else {
			fprintf(stderr, "egressctl: unknown option %s\n",
			    argv[ai]);
			usage(stderr);
			return CTL_EXIT_ERROR;
		}
	}
	if (ai >= argc) {
		usage(stderr);
		return CTL_EXIT_ERROR;
	}
	ctx.config_path = conf_default_path(config);
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[ai], commands[i].name) == 0)
			return commands[i].main(&ctx, argc - ai, argv + ai);
	fprintf(stderr, "egressctl: unknown command '%s'\n", argv[ai]);
	usage(stderr);
	return CTL_EXIT_ERROR;
}
