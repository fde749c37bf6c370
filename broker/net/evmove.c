/* SPDX-License-Identifier: ISC */
/*
 * evmove: move bytes between evbuffers without copying them (evmove.h).
 */
#include <stdlib.h>

#include <event2/buffer.h>

#include "broker/net/evmove.h"

/* Extents looked at to find the split: more chains than this in n bytes
 * (4 KiB reads) are moved by evbuffer_remove_buffer(), copy and all. */
#define EVMOVE_EXTENTS 64

/* One split chain, kept whole while its parts are referenced. */
struct evmove_hold {
	struct evbuffer *keep;
	unsigned refs;
};

static void
evmove_unref(const void *data, size_t len, void *arg)
{
	struct evmove_hold *h = arg;

	(void)data;
	(void)len;
	if (--h->refs > 0)
		return;
	evbuffer_free(h->keep);
	free(h);
}

/*
 * src starts with the chain [p, p + len) and head < len: put
 * [p, p + head) at the end of dst and leave [p + head, p + len) at the
 * front of src, both by reference to that chain. Return 0, or -1 with
 * src and dst as before.
 */
static int
evmove_split(struct evbuffer *src, struct evbuffer *dst, char *p, size_t len,
    size_t head)
{
	struct evbuffer_iovec v;
	struct evmove_hold *h;
	struct evbuffer *rest;
	int rc = -1;

	if ((h = malloc(sizeof(*h))) == NULL)
		return -1;
	h->refs = 1; /* ours, until the end */
	h->keep = evbuffer_new();
	rest = evbuffer_new();
	if (h->keep == NULL || rest == NULL)
		goto out;
	/* The chain itself changes hands (whole: no copy), unless src is
	 * not as peeked. */
	if (evbuffer_peek(src, 1, NULL, &v, 1) < 1 || v.iov_base != p ||
	    v.iov_len != len ||
	    evbuffer_remove_buffer(src, h->keep, len) != (int)len)
		goto out;
	if (evbuffer_add_reference(rest, p + head, len - head, evmove_unref,
		h) != 0) {
		(void)evbuffer_prepend_buffer(src, h->keep);
		goto out;
	}
	h->refs++;
	if (evbuffer_add_reference(dst, p, head, evmove_unref, h) != 0) {
		/* Back as it was: the chain to src; rest's reference goes. */
		(void)evbuffer_prepend_buffer(src, h->keep);
		goto out;
	}
	h->refs++;
	/* Cannot fail: src's start is not frozen (the chain just left it
	 * from there), nor is rest's. */
	(void)evbuffer_prepend_buffer(src, rest);
	rc = 0;
out:
	if (rest != NULL)
		evbuffer_free(rest); /* empty, or its reference is dropped */
	if (h->keep == NULL) {
		free(h);
		return rc;
	}
	evmove_unref(NULL, 0, h);
	return rc;
}

int
evmove(struct evbuffer *src, struct evbuffer *dst, size_t n)
{
	struct evbuffer_iovec v[EVMOVE_EXTENTS];
	size_t len = evbuffer_get_length(src), whole = 0, head;
	int i, nv;

	if (n > len)
		return -1;
	if (n == len)
		return evbuffer_add_buffer(dst, src) == 0 ? 0 : -1;
	nv = evbuffer_peek(src, (ev_ssize_t)n, NULL, v, EVMOVE_EXTENTS);
	if (nv < 1 || nv > EVMOVE_EXTENTS)
		goto copy;
	for (i = 0; i < nv - 1; i++)
		whole += v[i].iov_len;
	head = n - whole;
	if (head == v[nv - 1].iov_len || head <= EVMOVE_COPY_MAX)
		goto copy; /* no split, or a short one */
	if (whole > 0 && evbuffer_remove_buffer(src, dst, whole) != (int)whole)
		return -1;
	if (evmove_split(src, dst, v[nv - 1].iov_base, v[nv - 1].iov_len,
		head) == 0)
		return 0;
	n = head;
copy:
	return evbuffer_remove_buffer(src, dst, n) == (int)n ? 0 : -1;
}
