/* SPDX-License-Identifier: ISC */
/*
 * proxy_auth: the proxy front's check of a port caller's token
 * (proxy_auth.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "broker/confstate.h"
#include "broker/net/http1_req.h"
#include "broker/proxy_auth.h"
#include "conf/conf.h"

/*
 * Compare the presented secret a (na bytes) with the stored token b
 * (CONF_TOKEN_MAX + 1 bytes, zero past the token: conf_token_read()) in
 * a time that depends on neither's content nor on the token's length:
 * all CONF_TOKEN_MAX bytes of both, a zero-padded, are compared. A
 * token holds no zero byte, so a presented secret with one (or longer
 * than any token, or empty) is refused at once: that depends only on
 * what the caller sent.
 */
_Static_assert(CONF_TOKEN_MAX % sizeof(uint64_t) == 0,
    "same_secret() compares whole words");

static int
same_secret(const char *a, size_t na, const char *b)
{
	unsigned char pa[CONF_TOKEN_MAX];
	uint64_t x, y, d = 0;
	size_t i;

	if (na == 0 || na > CONF_TOKEN_MAX || memchr(a, 0, na) != NULL)
		return 0;
	memset(pa, 0, sizeof(pa));
	memcpy(pa, a, na);
	for (i = 0; i < CONF_TOKEN_MAX; i += sizeof(x)) {
		memcpy(&x, pa + i, sizeof(x));
		memcpy(&y, b + i, sizeof(y));
		d |= x ^ y;
	}
	explicit_bzero(pa, sizeof(pa));
	return d == 0;
}

/* Check the Proxy-Authorization value v (n bytes) against instance's
 * token in ref, as proxy_auth_check() does. */
static unsigned
check_value(const char *instance, const char *v, size_t vn,
    const struct confref *ref, const char **ret_detail)
{
	char buf[CONF_TOKEN_MAX + 128];
	const struct conf_instance *ci;
	const char *pw;
	size_t n;
	unsigned rv = 407;

	if (ref == NULL) {
		*ret_detail = "policy-unavailable";
		return 407;
	}
	ci = conf_instance_find(ref->snap, instance);
	*ret_detail = "wrong credentials";
	if (ci != NULL && ci->proxy_token != NULL &&
	    http1_req_basic_password(v, vn, buf, sizeof(buf), &pw, &n) == 0 &&
	    same_secret(pw, n, ci->proxy_token))
		rv = 0;
	explicit_bzero(buf, sizeof(buf));
	return rv;
}

/* q's one Proxy-Authorization header: NULL, with *ret_detail, when it has
 * none or more than one. */
static const struct http1_header *
find_header(const struct http1_req *q, const char **ret_detail)
{
	const struct http1_header *h = NULL;
	size_t i;

	for (i = 0; i < q->nheaders; i++)
		if (http1_header_is(&q->headers[i], "Proxy-Authorization")) {
			if (h != NULL) {
				*ret_detail =
				    "more than one Proxy-Authorization";
				return NULL;
			}
			h = &q->headers[i];
		}
	if (h == NULL)
		*ret_detail = "no Proxy-Authorization";
	return h;
}

unsigned
proxy_auth_check(const char *instance, const struct http1_req *q,
    const struct confref *ref, const char **ret_detail)
{
	const struct http1_header *h = find_header(q, ret_detail);

	if (h == NULL)
		return 407;
	return check_value(instance, h->value, h->value_len, ref, ret_detail);
}

struct proxy_auth_held {
	size_t len;
	char value[]; /* not NUL-terminated */
};

struct proxy_auth_held *
proxy_auth_hold(const struct http1_req *q)
{
	const char *detail;
	const struct http1_header *h = find_header(q, &detail);
	struct proxy_auth_held *held;

	if (h == NULL || (held = malloc(sizeof(*held) + h->value_len)) == NULL)
		return NULL;
	held->len = h->value_len;
	memcpy(held->value, h->value, h->value_len);
	return held;
}

unsigned
proxy_auth_check_held(const char *instance, const struct proxy_auth_held *h,
    const struct confref *ref, const char **ret_detail)
{
	return check_value(instance, h->value, h->len, ref, ret_detail);
}

void
proxy_auth_held_free(struct proxy_auth_held *h)
{
	if (h == NULL)
		return;
	explicit_bzero(h->value, h->len);
	free(h);
}
