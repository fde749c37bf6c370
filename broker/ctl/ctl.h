/* SPDX-License-Identifier: ISC */
/*
 * ctl: the subcommands of egressctl. Each takes the shared context and its
 * own argv (argv[0] is the subcommand name) and returns the process exit
 * status: 0 success (or allow), 1 a negative answer (deny, something to act
 * on), 2 a usage or configuration error.
 */
#ifndef EGRESS_CTL_H
#define EGRESS_CTL_H

#include <stddef.h>

#define CTL_EXIT_OK	0
#define CTL_EXIT_NO	1
#define CTL_EXIT_ERROR	2

struct ctl_ctx {
	const char *config_path;	/* resolved: -c, $EGRESSD_CONFIG, default */
	const char *progname;
};

/* `egressctl check`: a dry run of the verdict (docs/egressctl.md). */
int ctl_check_main(struct ctl_ctx *ctx, int argc, char **argv);

/* `egressctl manifest keygen|sign|verify`: package signatures. */
int ctl_manifest_main(struct ctl_ctx *ctx, int argc, char **argv);

/* `egressctl plugin install|bind|upgrade|grant|revoke|remove|list`: the
 * grant ceremony; every edit is locked, validated and atomic. */
int ctl_plugin_main(struct ctl_ctx *ctx, int argc, char **argv);

/* `egressctl diagnose`: what an operator has to act on; 1 if anything. */
int ctl_diagnose_main(struct ctl_ctx *ctx, int argc, char **argv);

/* `egressctl status|instances|instance|grants|metrics|attach`: front-ends
 * of the broker's control socket (broker/ctl_status.c). */
int ctl_status_main(struct ctl_ctx *ctx, int argc, char **argv);

/*
 * Return s as a POSIX shell word: unchanged when it holds only safe bytes,
 * else single-quoted ('(unprintable)' when it holds a quote). Written into
 * buf of size n; returns buf.
 */
const char *ctl_shq(const char *s, char *buf, size_t n);

/* Return "egressctl" or "egressctl -c FILE" for printed commands. The
 * string is static, valid until the next call. */
const char *ctl_cmd(const struct ctl_ctx *ctx);

#endif
