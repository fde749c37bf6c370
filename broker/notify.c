/* SPDX-License-Identifier: ISC */
/*
 * sd_notify(3) for egressd: READY=1, STOPPING=1 and STATUS= lines. See
 * notify.h.
 */
#include <stdio.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include <egress/error.h>

#include "broker/notify.h"

static int
notify_send(const char *msg)
{
	int rc = sd_notify(0, msg);

	if (rc < 0)
		return EGRESS_ERR_IO;
	return rc > 0 ? 1 : 0;
}

int
notify_ready(void)
{
	char msg[96];

	(void)snprintf(msg, sizeof(msg),
	    "READY=1\nMAINPID=%ld\n"
	    "STATUS=serving",
	    (long)getpid());
	return notify_send(msg);
}

int
notify_stopping(void)
{
	return notify_send("STOPPING=1\nSTATUS=draining");
}

int
notify_status(const char *text)
{
	char msg[220];
	size_t i;

	(void)snprintf(msg, sizeof(msg), "STATUS=%.200s", text);
	/* One line: a newline would start another assignment. */
	for (i = 0; msg[i] != '\0'; i++)
		if ((unsigned char)msg[i] < 0x20)
			msg[i] = ' ';
	return notify_send(msg);
}
