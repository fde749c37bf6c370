/* SPDX-License-Identifier: ISC */
/*
 * libegress HTTP requests: the REQUEST of an http or https request, from
 * the caller's head (method, scheme, authority, path, headers, timeouts,
 * an optional TLS profile). Everything after it (windows, blocking, the
 * step function, callbacks) is the request machinery of client.c.
 */
#include <stdlib.h>
#include <string.h>

#include <egress/egress.h>

#include "proto/proto.h"
#include "shim/shim.h"

int
egress_request_start(struct egress_client *c,
    const struct egress_request_head *head, egress_request_cb *cb, void *arg,
    struct egress_request **ret_req)
{
	return egress_request_start_profile(c, head, NULL, cb, arg, ret_req);
}

int
egress_request_start_profile(struct egress_client *c,
    const struct egress_request_head *head, const char *tls_profile,
    egress_request_cb *cb, void *arg, struct egress_request **ret_req)
{
	struct proto_msg *m;
	struct proto_request *q;
	int rv;

	if (c == NULL || head == NULL || ret_req == NULL)
		return EGRESS_ERR_INVALID;
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return EGRESS_ERR_NOMEM;
	q = &m->request;
	q->transport = PROTO_TRANSPORT_HTTP;
	q->timeouts.connect_ms = head->timeouts.connect_ms;
	q->timeouts.first_byte_ms = head->timeouts.first_byte_ms;
	q->timeouts.between_bytes_ms = head->timeouts.between_bytes_ms;
	q->timeouts.total_ms = head->timeouts.total_ms;
	if ((rv = shim_set_str(&q->method, head->method, PROTO_METHOD_MAX)) ==
		0 &&
	    (rv = shim_set_str(&q->scheme, head->scheme, PROTO_SCHEME_MAX)) ==
		0 &&
	    (rv = shim_set_str(&q->authority, head->authority,
		 PROTO_AUTHORITY_MAX)) == 0 &&
	    (rv = shim_set_str(&q->path, head->path, PROTO_PATH_MAX)) == 0 &&
	    (rv = shim_fill_headers(m, head->headers, head->nheaders)) == 0 &&
	    (rv = shim_set_profile(m, tls_profile)) == 0)
		rv = shim_request_open(c, m, cb, arg, ret_req);
	free(m);
	return rv;
}
