/* SPDX-License-Identifier: ISC */
/*
 * Fuzz target for broker/control's dispatcher: the input is split at LF
 * into command lines, each run through control_dispatch() against a fake
 * broker built from a small fixed configuration. Invariants: every line
 * gets exactly one reply (a check on a line of odd length completes
 * later, and is then completed by the driver), every reply ends with exactly
 * one LF and, except for metrics, is one JSON document; an attach reply
 * carries an fd only when the JSON says "attached".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "broker/control.h"
#include "broker/metrics.h"
#include "conf/conf.h"

static struct conf_snapshot *snap;
static struct metrics *mets;
static control_check_done pend_done;
static void *pend_arg;
static int async_mode;
static int nreplies;

static const char config[] =
    "[broker]\n"
    "control_uids = 0, 1000\n"
    "[plugins.entries.a]\n"
    "plugin = a\n"
    "manifest = /nonexistent/manifest.ini\n"
    "permissions = http_client\n"
    "egress_hosts = api.example.com\n"
    "               *.cdn.example.com\n"
    "egress_allow_private = api.example.com\n";

static const struct conf_snapshot *
f_snapshot(void *b)
{
	return snap;
}

static void
f_status(void *b, struct control_status *st)
{
	st->version = "fuzz";
	st->config_path = "/x.ini";
	st->generation = 1;
}

static unsigned
f_leases(void *b, const char *i)
{
	return 1;
}

static const struct metrics *
f_metrics(void *b)
{
	return mets;
}

static int
f_check(void *b, const char *inst, const char *dest, control_check_done d,
    void *arg)
{
	struct control_check_result r;

	memset(&r, 0, sizeof(r));
	r.reason = "not-granted";
	if (async_mode) {
		pend_done = d;
		pend_arg = arg;
		return 0;
	}
	d(arg, &r);
	return 0;
}

static int
f_reload(void *b)
{
	return 0;
}

static int
f_attach(void *b, const char *inst, int *ret_fd)
{
	int fd = dup(0);

	if (fd < 0)
		return -34;
	*ret_fd = fd;
	return 0;
}

static const struct control_ops ops = {
	f_snapshot,
	f_status,
	f_leases,
	f_metrics,
	f_check,
	f_reload,
	f_attach,
	NULL, /* attach-listener: refused as unavailable */
	NULL,
};

static void
on_reply(void *arg, struct control_reply *r)
{
	json_error_t e;
	json_t *doc;
	/* The exposition ends with an empty line; a JSON reply never does. */
	int is_metrics = r->len >= 2 &&
	    memcmp(r->text + r->len - 2, "\n\n", 2) == 0;

	nreplies++;
	if (r->len == 0 || r->text[r->len - 1] != '\n' ||
	    strlen(r->text) != r->len)
		abort();
	/* Pure text exposition: no other empty line, no OpenMetrics end. */
	if (is_metrics &&
	    (memmem(r->text, r->len - 1, "\n\n", 2) != NULL ||
		memmem(r->text, r->len, "# EOF", 5) != NULL))
		abort();
	if (is_metrics)
		return;
	if (memchr(r->text, '\n', r->len) != r->text + r->len - 1)
		abort();
	if ((doc = json_loadb(r->text, r->len, 0, &e)) == NULL)
		abort();
	if ((r->fd >= 0) != (json_object_get(doc, "attached") != NULL))
		abort();
	json_decref(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct conf_errors errs = { 0, NULL };
	const char *p = (const char *)data, *end = p + size, *nl;
	int rc;

	if (snap == NULL) {
		if (conf_load_buffer("/fuzz/egressd.ini", config,
			sizeof(config) - 1, &snap, &errs) != 0)
			abort();
		if ((mets = metrics_new()) == NULL)
			abort();
	}
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			nl = end;
		nreplies = 0;
		pend_done = NULL;
		async_mode = ((nl - p) & 1) != 0;
		rc = control_dispatch(&ops, NULL, p, (size_t)(nl - p),
		    on_reply, NULL);
		if (rc == 1) {
			struct control_check_result r;

			if (pend_done == NULL || nreplies != 0)
				abort();
			memset(&r, 0, sizeof(r));
			r.allow = 1;
			pend_done(pend_arg, &r);
		}
		if (rc < 0 || nreplies != 1)
			abort();
		/* Let decisions of the input show up in metrics. */
		metrics_decision(mets, "a", size > 1 && (data[1] & 1),
		    "not-granted", (uint64_t)size);
		p = nl + 1;
	}
	return 0;
}
