/* SPDX-License-Identifier: ISC */
/*
 * tool: what the command-line clients of libegress (egress-fetch,
 * egress-connect) share: their exit statuses and the text of an error.
 * Not part of the library.
 */
#ifndef EGRESS_SHIM_TOOL_H
#define EGRESS_SHIM_TOOL_H

#include <stddef.h>
#include <stdio.h>

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

/*
 * Write the n bytes at p to f so that no byte reaches a terminal as a
 * control: printable ASCII but the backslash as it is, a backslash as
 * "\\", every other byte (controls, DEL, anything over 0x7f) as "\xNN".
 * For text an upstream chose (a close reason, a pong, a header) that a
 * tool prints among its own diagnostics. p may be NULL when n is 0.
 */
void tool_put_escaped(FILE *f, const void *p, size_t n);

#endif /* EGRESS_SHIM_TOOL_H */
