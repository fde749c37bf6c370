/* SPDX-License-Identifier: ISC */
/*
 * Building frames for libegress: the checks and copies from the public
 * types into a struct proto_msg, and encoding into a new buffer, shared
 * by the request and stream openers, and the small conversions of
 * client.c. See shim.h.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <egress/egress.h>

#include "proto/proto.h"
#include "shim/shim.h"

int
shim_fill_headers(struct proto_msg *m, const struct egress_header *h, size_t n)
{
	size_t i, bytes = 0;

	if (n > PROTO_HEADERS_MAX)
		return EGRESS_ERR_TOO_BIG;
	if (n > 0 && h == NULL)
		return EGRESS_ERR_INVALID;
	for (i = 0; i < n; i++) {
		if (h[i].name == NULL || h[i].name_len == 0 ||
		    (h[i].value == NULL && h[i].value_len > 0))
			return EGRESS_ERR_INVALID;
		if (h[i].name_len > PROTO_NAME_MAX ||
		    h[i].value_len > PROTO_VALUE_MAX)
			return EGRESS_ERR_TOO_BIG;
		bytes += h[i].name_len + h[i].value_len;
		m->headers[i].name.ptr = h[i].name;
		m->headers[i].name.len = h[i].name_len;
		m->headers[i].value.ptr = h[i].value;
		m->headers[i].value.len = h[i].value_len;
	}
	if (bytes > PROTO_HEADER_BYTES_MAX)
		return EGRESS_ERR_TOO_BIG;
	m->nheaders = n;
	return 0;
}

int
shim_set_str(struct proto_str *s, const char *v, size_t max)
{
	size_t n;

	if (v == NULL || v[0] == '\0')
		return EGRESS_ERR_INVALID;
	n = strlen(v);
	if (n > max)
		return EGRESS_ERR_TOO_BIG;
	s->ptr = v;
	s->len = n;
	return 0;
}

int
shim_set_profile(struct proto_msg *m, const char *tls_profile)
{
	int rv;

	if (tls_profile == NULL || tls_profile[0] == '\0')
		return 0;
	rv = shim_set_str(&m->request.tls_profile, tls_profile,
	    PROTO_PROFILE_MAX);
	if (rv == 0)
		m->version = 2; /* the field exists from version 2 on */
	return rv;
}

int
shim_encode_alloc(const struct proto_msg *m, uint8_t **ret, size_t *ret_len)
{
	uint8_t *p;
	int size;

	size = proto_encode_size(m, NULL);
	if (size < 0)
		return EGRESS_ERR_TOO_BIG;
	p = malloc((size_t)size);
	if (p == NULL)
		return EGRESS_ERR_NOMEM;
	if (proto_encode(m, p, (size_t)size, NULL) != size) {
		free(p);
		return EGRESS_ERR_INVALID;
	}
	*ret = p;
	*ret_len = (size_t)size;
	return 0;
}

uint64_t
shim_now_ms(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void
shim_set_message(char *dst, int err, const char *msg, size_t len)
{
	const char *text;

	if (msg == NULL) {
		text = egress_err_code(err) != NULL ||
			err == EGRESS_ERR_PROTOCOL ?
		    proto_code_message(proto_err_to_wire(err)) :
		    egress_strerror(err);
		len = strlen(text);
		msg = text;
	}
	if (len > EGRESS_MESSAGE_MAX)
		len = EGRESS_MESSAGE_MAX;
	memcpy(dst, msg, len);
	dst[len] = '\0';
}

int
shim_wire_err(uint32_t code)
{
	if (proto_code_name(code) == NULL)
		return EGRESS_ERR_PROTOCOL;
	return proto_wire_to_err(code);
}
