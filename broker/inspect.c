/* SPDX-License-Identifier: ISC */
/*
 * The server side of TLS inspection (see inspect.h): the inspection CA
 * loaded from the snapshot, one server context offering http/1.1 only,
 * and the TLS filter put on a tunnel's client connection.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/bufferevent.h>
#include <jansson.h>

#include <egress/error.h>

#include "broker/broker.h"
#include "broker/inspect.h"
#include "broker/log.h"
#include "broker/net/mint.h"
#include "conf/conf.h"

static void
inspect_log_problem(const char *file, const char *why)
{
	json_t *o;

	o = json_pack("{s:s, s:s, s:s, s:s}", "status", "error", "what",
	    "inspection ca", "file", file, "detail", why);
	if (o != NULL)
		log_event("egress.broker", o);
}

int
inspect_apply(struct broker *b, const struct conf_snapshot *s)
{
	const char *file = NULL, *why = NULL;
	struct evp_pkey_st *key = NULL;
	struct x509_st *ca = NULL;

	mint_free(b->inspect);
	b->inspect = NULL;
	if (!conf_has_inspect(s))
		return 0;
	if (conf_inspect_ca_read(s->inspect_ca_cert, s->inspect_ca_key, &ca,
		&key, &file, &why) != 0) {
		inspect_log_problem(file, why);
		return EGRESS_ERR_INVALID;
	}
	return mint_new(ca, key, INSPECT_CACHE_MAX, &b->inspect);
}

int
inspect_is_ready(const struct broker *b)
{
	return b->inspect != NULL;
}

int
inspect_wrap(struct broker *b, struct bufferevent *bev, const char *name,
    struct bufferevent **ret)
{
	if (b->inspect == NULL) {
		bufferevent_free(bev);
		return EGRESS_ERR_UNAVAILABLE;
	}
	return mint_wrap(b->inspect, b->base, bev, name, time(NULL), ret);
}

void
inspect_release(struct broker *b)
{
	mint_free(b->inspect);
	b->inspect = NULL;
}
