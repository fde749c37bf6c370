/* SPDX-License-Identifier: ISC */
/*
 * ctl: the subcommands of egressctl. Each takes the shared context and its
 * own argv (argv[0] is the subcommand name) and returns the process exit
 * status, one meaning per code for every command (docs/egressctl.md):
 * 0 success (or allow), 1 a negative answer (deny, a finding to act on, a
 * refusal, an instance or entry that does not exist), 2 a usage error,
 * 3 a configuration that cannot be read or is refused, 4 any other
 * failure (I/O, the broker cannot be reached, out of memory).
 */
#ifndef EGRESS_CTL_H
#define EGRESS_CTL_H

#include <stddef.h>

#define CTL_EXIT_OK	0
#define CTL_EXIT_NO	1
#define CTL_EXIT_USAGE	2
#define CTL_EXIT_CONFIG 3
#define CTL_EXIT_SYSTEM 4
struct json_t;

/* The status of a failure that is neither usage nor configuration. */
#define CTL_EXIT_ERROR CTL_EXIT_SYSTEM

struct conf_instance;
struct conf_manifest;
struct conf_snapshot;
struct netaddr;
struct policy_addr;

struct ctl_ctx {
	const char *config_path; /* resolved: -c, $EGRESSD_CONFIG, default */
	const char *progname;
};

/* `egressctl check`: a dry run of the verdict (docs/egressctl.md). */
int ctl_check_main(struct ctl_ctx *ctx, int argc, char **argv);

/* `egressctl manifest keygen|sign|verify`: package signatures. */
int ctl_manifest_main(struct ctl_ctx *ctx, int argc, char **argv);

/* `egressctl plugin install|bind|upgrade|grant|revoke|remove|list`: the
 * grant ceremony; every edit is locked, validated and atomic. */
int ctl_plugin_main(struct ctl_ctx *ctx, int argc, char **argv);

/* `egressctl plugin list [--json]` once its arguments are checked: print
 * every instance of the configuration. Return a CTL_EXIT_* code. */
int ctl_plugin_list(struct ctl_ctx *ctx, int json);

/* `egressctl diagnose`: what an operator has to act on; 1 if anything. */
int ctl_diagnose_main(struct ctl_ctx *ctx, int argc, char **argv);

/* `egressctl status|instances|instance|grants|metrics|attach`: front-ends
 * of the broker's control socket (broker/ctl_status.c). */
int ctl_status_main(struct ctl_ctx *ctx, int argc, char **argv);

/* `egressctl reload`: the broker re-reads its configuration; print the
 * new generation and the refused instances, or every error (exit 3). */
int ctl_reload_main(struct ctl_ctx *ctx, int argc, char **argv);

/*
 * Return s as a POSIX shell word: unchanged when it holds only safe bytes,
 * else single-quoted ('(unprintable)' when it holds a quote). Written into
 * buf of size n; returns buf.
 */
const char *ctl_shq(const char *s, char *buf, size_t n);

/* Return "egressctl" or "egressctl -c FILE" for printed commands. The
 * string is static, valid until the next call. */
const char *ctl_cmd(const struct ctl_ctx *ctx);

/* Upgrade: warn (stdout) when m is not signed by the key that signed the
 * version ci uses. */
void ctl_signer_warn(const struct conf_instance *ci,
    const struct conf_manifest *m);

/*
 * Upgrade: would m make any instance of its plugin reach a granted entry
 * its current manifest did not (a grant left behind by an older version,
 * woken by a declaration or by operator_defined)? Say which, and how to
 * choose (pkg: the package as given), on stderr. Return how many
 * instances would.
 */
size_t ctl_upgrade_wakes(const struct ctl_ctx *ctx,
    const struct conf_snapshot *snap, const struct conf_manifest *m,
    const char *pkg);

/*
 * Load the configuration at path into *ret_snap. On failure print why on
 * stderr (a folder or a missing file said so in words, else every parse
 * error as FILE:LINE: message) and return -1; *ret_snap is untouched.
 */
int ctl_conf_load(const char *path, struct conf_snapshot **ret_snap);

/* `egressctl ca init|show`: the inspection CA of tls_inspect entries. */
int ctl_ca_main(struct ctl_ctx *ctx, int argc, char **argv);

/* `egressctl trust add|list|remove`: the trusted_keys list. */
int ctl_trust_main(struct ctl_ctx *ctx, int argc, char **argv);

/* Print "egressctl: CMD: unknown subcommand 'X'" or "egressctl: CMD:
 * missing subcommand" on stderr. */
void ctl_bad_subcommand(const char *cmd, int argc, char **argv);

/* Return the fingerprint "sha256:" + 32 hex digits of the public key in
 * the PEM file at path, written into buf of size n (at least 72); NULL
 * when the file cannot be read or holds no Ed25519 public key, with the
 * reason in reterr_msg (of size errn). */
const char *ctl_key_fingerprint(const char *path, char *buf, size_t n,
    char *reterr_msg, size_t errn);

/*
 * Read this host's own-address set (its addresses and local routes, as
 * `check` reads them) into *ret, for classifying addresses. On failure
 * write NULL, say on stderr that what (e.g. "plugin grant's warnings")
 * classifies without them, and return the error.
 */
int ctl_own_read(const char *what, struct netaddr **ret);

/* Return the class mask of a with the snapshot's NAT64 prefixes (s NULL:
 * none) and the own-address set own (NULL: none known). */
unsigned ctl_classify(const struct conf_snapshot *s, const struct netaddr *own,
    const struct policy_addr *a);

/* Print v as indented JSON and a newline on stdout. Return 0, or -1 when
 * it could not be formatted (out of memory; nothing printed). */
int ctl_print_json(const struct json_t *v);

#endif
