/* SPDX-License-Identifier: ISC */
/*
 * libegress byte streams (tcp and tls): a stream is a request whose
 * REQUEST names the transport and a HOST:PORT authority and carries no
 * HTTP fields; the broker answers RESPONSE 200 once connected, then DATA
 * carries the bytes both ways and END_STREAM half-closes each way
 * (docs/protocol.md); STARTTLS upgrades a tcp stream in band. Everything
 * else (windows, blocking, the step function, callbacks) is the request
 * machinery of client.c.
 */
#include <stdlib.h>
#include <string.h>

#include <egress/egress.h>

#include "proto/proto.h"
#include "shim/shim.h"

int
egress_stream_open(struct egress_client *c, int transport,
    const char *authority, const struct egress_timeouts *timeouts,
    egress_request_cb *cb, void *arg, struct egress_request **ret_stream)
{
	return egress_stream_open_profile(c, transport, authority, NULL,
	    timeouts, cb, arg, ret_stream);
}

int
egress_stream_open_profile(struct egress_client *c, int transport,
    const char *authority, const char *tls_profile,
    const struct egress_timeouts *timeouts, egress_request_cb *cb, void *arg,
    struct egress_request **ret_stream)
{
	struct proto_msg *m;
	struct proto_request *q;
	int rv;

	if (c == NULL || ret_stream == NULL ||
	    (transport != EGRESS_STREAM_TCP && transport != EGRESS_STREAM_TLS))
		return EGRESS_ERR_INVALID;
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return EGRESS_ERR_NOMEM;
	q = &m->request;
	q->transport = (uint8_t)transport;
	if (timeouts != NULL) {
		q->timeouts.connect_ms = timeouts->connect_ms;
		q->timeouts.between_bytes_ms = timeouts->between_bytes_ms;
		q->timeouts.total_ms = timeouts->total_ms;
	}
	rv = shim_set_str(&q->authority, authority, PROTO_AUTHORITY_MAX);
	if (rv == 0)
		rv = shim_set_profile(m, tls_profile);
	if (rv == 0)
		rv = shim_request_open(c, m, cb, arg, ret_stream);
	free(m);
	return rv;
}

int
egress_stream_wait(struct egress_request *s, int flags)
{
	int rv = egress_response_wait(s, flags);

	if (rv < 0)
		return rv;
	/* Any other status is not what the protocol says a broker sends. */
	return rv == 200 ? 0 : EGRESS_ERR_PROTOCOL;
}

int
egress_stream_write(struct egress_request *s, const void *buf, size_t len,
    int flags)
{
	return egress_request_write(s, buf, len, flags);
}

int
egress_stream_read(struct egress_request *s, void *buf, size_t len, int flags)
{
	return egress_response_read(s, buf, len, flags);
}

int
egress_stream_shutdown(struct egress_request *s)
{
	return egress_request_finish(s, NULL, 0);
}

int
egress_stream_starttls(struct egress_request *s, const char *tls_profile,
    int flags)
{
	struct proto_msg *m;
	size_t n = tls_profile != NULL ? strlen(tls_profile) : 0;
	int rv;

	if (s == NULL)
		return EGRESS_ERR_INVALID;
	if (n > PROTO_PROFILE_MAX)
		return EGRESS_ERR_TOO_BIG;
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return EGRESS_ERR_NOMEM;
	m->type = PROTO_MSG_STARTTLS;
	m->starttls.tls_profile.ptr = tls_profile;
	m->starttls.tls_profile.len = n;
	rv = shim_stream_upgrade(s, m, flags);
	free(m);
	return rv;
}
