/* SPDX-License-Identifier: ISC */
/*
 * egressctl: the operator's command-line tool. This file parses the global
 * options (-c FILE, --help, --version) and dispatches to a subcommand
 * (broker/ctl/ctl_*.c). --help prints every usage line of every command,
 * the same lines docs/egressctl.md shows, and the exit status table.
 */
#include <stdio.h>
#include <string.h>

#include "broker/ctl/ctl.h"
#include "conf/conf.h"

struct ctl_command {
	const char *name;
	int (*main)(struct ctl_ctx *, int, char **);
};

static const struct ctl_command commands[] = {
	{ "check", ctl_check_main },
	{ "manifest", ctl_manifest_main },
	{ "plugin", ctl_plugin_main },
	{ "trust", ctl_trust_main },
	{ "ca", ctl_ca_main },
	{ "diagnose", ctl_diagnose_main },
	{ "status", ctl_status_main },
	{ "instances", ctl_status_main },
	{ "instance", ctl_status_main },
	{ "grants", ctl_status_main },
	{ "metrics", ctl_status_main },
	{ "attach", ctl_status_main },
	{ "reload", ctl_reload_main },
};

/* Every usage line, in the order of docs/egressctl.md (long ones are
 * two literals joined, not two lines). */
/* NOLINTBEGIN(bugprone-suspicious-missing-comma) */
static const char *const synopses[] = {
	"[-c FILE] check [--transport http|websocket|tcp|tls] "
	"[--resolve HOST=ADDR[,ADDR...]]... [--json] INSTANCE DESTINATION",
	"manifest keygen --out KEY",
	"manifest sign --key KEY PKG",
	"[-c FILE] manifest verify [--key PUB] [--json] PKG",
	"[-c FILE] plugin install PKG [--instance NAME] "
	"[--egress declared|none]",
	"[-c FILE] plugin install PKG --channel-alias ALIAS "
	"--egress declared|none",
	"[-c FILE] plugin bind PLUGIN ALIAS --egress declared|none",
	"[-c FILE] plugin upgrade [--wake] PKG",
	"[-c FILE] plugin grant INSTANCE [--private | --loopback] "
	"[--permission P]... [HOST...]",
	"[-c FILE] plugin revoke INSTANCE [--private | --loopback] "
	"[--permission P]... [HOST...]",
	"[-c FILE] plugin remove PLUGIN",
	"[-c FILE] plugin list [--json]",
	"[-c FILE] trust add KEY.pub",
	"[-c FILE] trust list [--json]",
	"[-c FILE] trust remove FINGERPRINT",
	"[-c FILE] ca init [--force] [--owner USER]",
	"[-c FILE] ca show",
	"[-c FILE] diagnose [--log FILE] [--json] [--nat64 | --no-nat64]",
	"[-c FILE] status [--socket PATH] [--json]",
	"[-c FILE] instances [--socket PATH] [--json]",
	"[-c FILE] instance [--socket PATH] [--json] NAME",
	"[-c FILE] grants [--socket PATH] [--json] NAME",
	"[-c FILE] metrics [--socket PATH]",
	"[-c FILE] attach [--socket PATH] NAME [-- COMMAND [ARG...]]",
	"[-c FILE] reload [--socket PATH] [--json]",
	"--help",
	"--version",
};
/* NOLINTEND(bugprone-suspicious-missing-comma) */

static void
usage(FILE *f, int full)
{
	size_t i;

	for (i = 0; i < sizeof(synopses) / sizeof(synopses[0]); i++)
		fprintf(f, "%s egressctl %s\n", i == 0 ? "usage:" : "      ",
		    synopses[i]);
	if (!full)
		return;
	fprintf(f,
	    "\nThe configuration is -c FILE, else $EGRESSD_CONFIG, "
	    "else %s.\n"
	    "Exit status: 0 success or allow; 1 a negative answer (deny, a "
	    "finding,\na refusal, no such instance or entry); 2 a usage "
	    "error; 3 a configuration\nthat cannot be read or is refused; "
	    "4 any other failure (I/O, the broker\ncannot be reached). "
	    "See egressctl(8).\n",
	    CONF_DEFAULT_PATH);
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
				return CTL_EXIT_USAGE;
			}
			config = argv[ai + 1];
			ai += 2;
		} else if (strncmp(argv[ai], "--config=", 9) == 0) {
			config = argv[ai] + 9;
			ai++;
		} else if (strcmp(argv[ai], "--version") == 0 ||
		    strcmp(argv[ai], "-V") == 0) {
			printf("egressctl %s\n", EGRESSD_VERSION);
			return CTL_EXIT_OK;
		} else if (strcmp(argv[ai], "-h") == 0 ||
		    strcmp(argv[ai], "--help") == 0) {
			usage(stdout, 1);
			return CTL_EXIT_OK;
		} else {
			fprintf(stderr,
			    "egressctl: unknown option '%s' (see "
			    "egressctl --help)\n",
			    argv[ai]);
			return CTL_EXIT_USAGE;
		}
	}
	if (ai >= argc) {
		fprintf(stderr, "egressctl: missing command\n");
		usage(stderr, 0);
		return CTL_EXIT_USAGE;
	}
	ctx.config_path = conf_default_path(config);
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[ai], commands[i].name) == 0)
			return commands[i].main(&ctx, argc - ai, argv + ai);
	fprintf(stderr,
	    "egressctl: unknown command '%s' (see egressctl "
	    "--help)\n",
	    argv[ai]);
	return CTL_EXIT_USAGE;
}
