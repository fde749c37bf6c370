/* SPDX-License-Identifier: ISC */
/*
 * proxy_refusal: the egress.proxy events of the proxy front's own
 * refusals (proxy_refusal.h).
 */
#include <stdio.h>
#include <string.h>

#include <event2/event.h>
#include <jansson.h>

#include "broker/log.h"
#include "broker/proxy_refusal.h"
#include "conf/conf.h"
#include "proto/proto.h"

unsigned
proxy_refusal_status(uint32_t code)
{
	switch (code) {
	case PROTO_CODE_DENIED:
	case PROTO_CODE_UNAVAILABLE:
		return 403; /* fail closed: the policy could not allow */
	case PROTO_CODE_BUDGET_EXHAUSTED:
		return 429;
	case PROTO_CODE_TIMEOUT:
		return 504;
	case PROTO_CODE_INVALID_REQUEST:
		return 400;
	default:
		return 502;
	}
}

static void
proxy_refusal_event(const char *instance, unsigned status, const char *error,
    const char *detail, unsigned long long n)
{
	json_t *o;

	o = json_pack("{s:s?, s:i, s:s?, s:o, s:I}", "instance", instance,
	    "status", (int)status, "error", error, "detail",
	    detail != NULL ? log_bounded_string(detail, strlen(detail)) :
			     json_null(),
	    "refused", (json_int_t)n);
	if (o != NULL)
		log_event("egress.proxy", o);
}

/*
 * Refusals of callers not (yet) authenticated on a port: the first of a
 * burst is logged at once; the ones that follow within a second are
 * counted and logged together a second later (instance, error and detail
 * null where they were not all the same), so that a flood without the
 * token costs one event per second and none goes unreported.
 */
static struct {
	struct event *timer;
	unsigned long long pending;
	char instance[CONF_NAME_MAX + 1];
	unsigned status;
	const char *error;
	char detail[128];
	int mixed;
} unauth;

static void
proxy_unauth_flush(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	if (unauth.pending == 0)
		return;
	proxy_refusal_event(unauth.mixed ? NULL : unauth.instance,
	    unauth.status, unauth.mixed ? NULL : unauth.error,
	    unauth.mixed ? NULL : unauth.detail, unauth.pending);
	unauth.pending = 0;
	unauth.mixed = 0;
}

void
proxy_refusal_log_unauth(struct event_base *base, const char *instance,
    unsigned status, const char *error, const char *detail)
{
	const struct timeval one = { 1, 0 };

	if (unauth.timer == NULL &&
	    (unauth.timer = evtimer_new(base, proxy_unauth_flush, NULL)) ==
		NULL) {
		proxy_refusal_event(instance, status, error, detail, 1);
		return;
	}
	if (evtimer_pending(unauth.timer, NULL)) {
		if (unauth.pending == 0) {
			(void)snprintf(unauth.instance,
			    sizeof(unauth.instance), "%s", instance);
			unauth.status = status;
			unauth.error = error;
			(void)snprintf(unauth.detail, sizeof(unauth.detail),
			    "%s", detail);
		} else if (strcmp(unauth.instance, instance) != 0 ||
		    unauth.status != status || unauth.error != error ||
		    strncmp(unauth.detail, detail,
			sizeof(unauth.detail) - 1) != 0)
			unauth.mixed = 1;
		unauth.pending++;
		return;
	}
	proxy_refusal_event(instance, status, error, detail, 1);
	(void)evtimer_add(unauth.timer, &one);
}

void
proxy_refusal_log(const char *instance, unsigned status, const char *error,
    const char *detail)
{
	proxy_refusal_event(instance, status, error, detail, 1);
}
