/* SPDX-License-Identifier: ISC */
/*
 * Small printing helpers shared by the egressctl subcommands that print
 * commands for the operator to run.
 */
#include <stdio.h>
#include <string.h>

#include "broker/ctl/ctl.h"
#include "conf/conf.h"

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
