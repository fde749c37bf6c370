/* SPDX-License-Identifier: ISC */
/*
 * tool: what the command-line clients of libegress (egress-fetch,
 * egress-connect) share: their exit statuses and the text of an error.
 * Not part of the library.
 */
#ifndef EGRESS_SHIM_TOOL_H
#define EGRESS_SHIM_TOOL_H

#define TOOL_EXIT_LOCAL 1 /* any local failure */
#define TOOL_EXIT_USAGE 2

/*
 * Return the exit status of an error value: 10..19 for the guest-visible
 * codes (docs/shim.md), TOOL_EXIT_LOCAL for anything else.
 */
int tool_exit_code(int err);

/*
 * Return the code name of err ("denied", ..., "protocol-error", or
 * "error" for a local failure), and point *ret_msg at msg, or when msg is
 * NULL or empty at the fixed masked message of the code (the library's
 * own text for a local failure). Both are static or borrowed from msg.
 */
const char *tool_err_text(int err, const char *msg, const char **ret_msg);

#endif /* EGRESS_SHIM_TOOL_H */
