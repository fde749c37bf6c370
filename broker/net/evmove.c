/* SPDX-License-Identifier: ISC */
/*
 * evmove: move bytes between evbuffers without copying them (evmove.h).
 */
#include <stdlib.h>

#include <event2/buffer.h>

#include "broker/net/evmove.h"

/* Extents looked at at once: more chains than this in n bytes (4 KiB
 * reads) move in turns. */
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
 * [p, p + head) at the end of dst by reference to that chain, and leave
 * [p + head, p + len) at the front of src, by reference too or, with
 * copy_rest, as a copy (then only dst's part keeps the chain). Return
 * 0, or -1 with src and dst as before.
 */
static int
evmove_split(struct evbuffer *src, struct evbuffer *dst, char *p, size_t len,
    size_t head, int copy_rest)
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
	if (copy_rest ? evbuffer_add(rest, p + head, len - head) != 0 :
			evbuffer_add_reference(rest, p + head, len - head,
			    evmove_unref, h) != 0) {
		(void)evbuffer_prepend_buffer(src, h->keep);
		goto out;
	}
	if (!copy_rest)
		h->refs++;
	if (evbuffer_add_reference(dst, p, head, evmove_unref, h) != 0) {
		/* Back as it was: the chain to src; rest's part goes. */
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
		evbuffer_free(rest); /* empty, or its part is dropped */
	if (h->keep == NULL) {
		free(h);
		return rc;
	}
	evmove_unref(NULL, 0, h);
	return rc;
}

/* Copy the first n bytes of src, which start at p, to dst, and drain
 * them from src only once they are there (evbuffer_remove_buffer()
 * drains them even when its copy failed). */
static int
evmove_copy(struct evbuffer *src, struct evbuffer *dst, const char *p,
    size_t n)
{
	if (evbuffer_add(dst, p, n) != 0)
		return -1;
	return evbuffer_drain(src, n) == 0 ? 0 : -1;
}

/* src starts with the chain [p, p + len), and head < len of it go to
 * dst: share what is long enough to share, copy what is not. */
static int
evmove_part(struct evbuffer *src, struct evbuffer *dst, char *p, size_t len,
    size_t head)
{
	size_t lim = len / EVMOVE_SHARE_RATIO;

	if (lim < EVMOVE_COPY_MAX)
		lim = EVMOVE_COPY_MAX;
	if (head > lim &&
	    evmove_split(src, dst, p, len, head, len - head <= lim) == 0)
		return 0;
	return evmove_copy(src, dst, p, head);
}

int
evmove(struct evbuffer *src, struct evbuffer *dst, size_t n)
{
	struct evbuffer_iovec v[EVMOVE_EXTENTS];
	size_t whole, head;
	int i, nv;

	if (n > evbuffer_get_length(src))
		return -1;
	while (n > 0) {
		if (n == evbuffer_get_length(src))
			return evbuffer_add_buffer(dst, src) == 0 ? 0 : -1;
		nv = evbuffer_peek(src, (ev_ssize_t)n, NULL, v,
		    EVMOVE_EXTENTS);
		if (nv < 1)
			return -1;
		whole = 0;
		for (i = 0; i < nv && i < EVMOVE_EXTENTS; i++)
			whole += v[i].iov_len;
		head = 0;
		if (nv <= EVMOVE_EXTENTS && whole > n) {
			/* The last extent is split. */
			nv--;
			whole -= v[nv].iov_len;
			head = n - whole;
		}
		/* Whole chains change hands without a copy (or a loss). */
		if (whole > 0 &&
		    evbuffer_remove_buffer(src, dst, whole) != (int)whole)
			return -1;
		n -= whole;
		if (head > 0)
			return evmove_part(src, dst, v[nv].iov_base,
			    v[nv].iov_len, head);
	}
	return 0;
}
