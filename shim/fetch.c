/* SPDX-License-Identifier: ISC */
/*
 * egress_fetch(): one whole request and response over the streaming API,
 * for callers that want neither streaming nor events. The response is
 * copied into one caller-owned object; the body is bounded by the
 * caller's limit, so a large or endless body cannot exhaust memory.
 */
#include <stdlib.h>
#include <string.h>

#include <egress/egress.h>

/* Copy a borrowed header list into one new block. */
static int
dup_headers(const struct egress_header *h, size_t n,
    struct egress_header **ret)
{
	struct egress_header *a;
	size_t i, bytes = 0;
	char *p;

	for (i = 0; i < n; i++)
		bytes += h[i].name_len + h[i].value_len + 2;
	a = malloc(n * sizeof(*a) + bytes + 1);
	if (a == NULL)
		return EGRESS_ERR_NOMEM;
	p = (char *)(a + n);
	for (i = 0; i < n; i++) {
		a[i].name = p;
		a[i].name_len = h[i].name_len;
		memcpy(p, h[i].name, h[i].name_len + 1);
		p += h[i].name_len + 1;
		a[i].value = p;
		a[i].value_len = h[i].value_len;
		memcpy(p, h[i].value, h[i].value_len + 1);
		p += h[i].value_len + 1;
	}
	*ret = a;
	return 0;
}

static void
set_msg(char *dst, size_t size, const char *src)
{
	size_t n;

	if (dst == NULL || size == 0)
		return;
	n = strlen(src);
	if (n >= size)
		n = size - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

int
egress_fetch(struct egress_client *c, const struct egress_request_head *head,
    const void *body, size_t body_len, size_t max_body,
    struct egress_response **ret_resp, char *reterr_msg,
    size_t reterr_msg_size)
{
	struct egress_request *req = NULL;
	struct egress_response *resp = NULL;
	const struct egress_header *h;
	uint8_t *p;
	size_t n, cap = 0, chunk;
	int rv;

	if (c == NULL || head == NULL || ret_resp == NULL ||
	    (body == NULL && body_len > 0))
		return EGRESS_ERR_INVALID;
	set_msg(reterr_msg, reterr_msg_size, "");
	resp = calloc(1, sizeof(*resp));
	if (resp == NULL)
		return EGRESS_ERR_NOMEM;
	rv = egress_request_start(c, head, NULL, NULL, &req);
	if (rv < 0) {
		set_msg(reterr_msg, reterr_msg_size, egress_strerror(rv));
		goto out;
	}
	for (n = 0; n < body_len; n += chunk) {
		chunk = body_len - n < (1U << 30) ? body_len - n : (1U << 30);
		rv = egress_request_write(req, (const uint8_t *)body + n,
		    chunk, 0);
		if (rv < 0)
			goto fail;
	}
	rv = egress_request_finish(req, NULL, 0);
	if (rv < 0)
		goto fail;
	rv = egress_response_wait(req, 0);
	if (rv < 0)
		goto fail;
	resp->status = rv;
	h = egress_response_headers(req, &n);
	rv = dup_headers(h, n, &resp->headers);
	if (rv < 0)
		goto fail;
	resp->nheaders = n;
	for (;;) {
		if (cap - resp->body_len < 16384) {
			cap = cap ? cap * 2 : 16384;
			if (cap > max_body + 16384)
				cap = max_body + 16384;
			p = realloc(resp->body, cap + 1);
			if (p == NULL) {
				rv = EGRESS_ERR_NOMEM;
				goto fail;
			}
			resp->body = p;
		}
		rv = egress_response_read(req, resp->body + resp->body_len,
		    cap - resp->body_len, 0);
		if (rv < 0)
			goto fail;
		if (rv == 0)
			break;
		resp->body_len += (size_t)rv;
		if (resp->body_len > max_body) {
			rv = EGRESS_ERR_TOO_BIG;
			(void)egress_request_cancel(req);
			set_msg(reterr_msg, reterr_msg_size,
			    egress_strerror(rv));
			goto out;
		}
	}
	if (resp->body == NULL && (resp->body = malloc(1)) == NULL) {
		rv = EGRESS_ERR_NOMEM;
		goto fail;
	}
	resp->body[resp->body_len] = '\0';
	h = egress_response_trailers(req, &n);
	if (h != NULL) {
		rv = dup_headers(h, n, &resp->trailers);
		if (rv < 0)
			goto fail;
		resp->ntrailers = n;
	}
	*ret_resp = resp;
	resp = NULL;
	rv = 0;
	goto out;
fail:
	set_msg(reterr_msg, reterr_msg_size,
	    egress_request_error(req) != 0 ? egress_request_message(req) :
					     egress_strerror(rv));
out:
	egress_request_free(req);
	egress_response_free(resp);
	return rv;
}

void
egress_response_free(struct egress_response *resp)
{
	if (resp == NULL)
		return;
	free(resp->headers);
	free(resp->body);
	free(resp->trailers);
	free(resp);
}
