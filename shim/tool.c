/* SPDX-License-Identifier: ISC */
/*
 * tool: the exit statuses and error texts of the command-line clients of
 * libegress (tool.h).
 */
#include <stddef.h>
#include <stdio.h>

#include <egress/egress.h>

#include "proto/proto.h"
#include "shim/tool.h"

int
tool_exit_code(int err)
{
	switch (err) {
	case EGRESS_ERR_DENIED:
		return 10;
	case EGRESS_ERR_BUDGET_EXHAUSTED:
		return 11;
	case EGRESS_ERR_DNS_FAILED:
		return 12;
	case EGRESS_ERR_CONNECT_FAILED:
		return 13;
	case EGRESS_ERR_TLS_FAILED:
		return 14;
	case EGRESS_ERR_TIMEOUT:
		return 15;
	case EGRESS_ERR_UPSTREAM_PROTOCOL:
		return 16;
	case EGRESS_ERR_INVALID_REQUEST:
		return 17;
	case EGRESS_ERR_UNAVAILABLE:
		return 18;
	case EGRESS_ERR_CANCELLED:
		return 19;
	default:
		return TOOL_EXIT_LOCAL;
	}
}

const char *
tool_err_text(int err, const char *msg, const char **ret_msg)
{
	const char *code = egress_err_code(err);
	int wire = code != NULL || err == EGRESS_ERR_PROTOCOL;

	if (code == NULL)
		code = err == EGRESS_ERR_PROTOCOL ? "protocol-error" : "error";
	if (msg == NULL || msg[0] == '\0')
		msg = wire ? proto_code_message(proto_err_to_wire(err)) :
			     egress_strerror(err);
	*ret_msg = msg;
	return code;
}

void
tool_put_escaped(FILE *f, const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++) {
		if (b[i] == '\\')
			(void)fputs("\\\\", f);
		else if (b[i] >= 0x20 && b[i] < 0x7f)
			(void)fputc(b[i], f);
		else
			(void)fprintf(f, "\\x%02x", b[i]);
	}
}
