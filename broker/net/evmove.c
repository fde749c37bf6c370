/* SPDX-License-Identifier: ISC */
/*
 * evmove: move bytes between evbuffers without copying them (evmove.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "broker/net/evmove.h"

/* Extents looked at at once: more chains than this in n bytes (4 KiB
 * reads) move in turns. */
#define EVMOVE_EXTENTS	   64

/*
 * Split chains are found again by address, so that a part cut again is
 * measured against the chain it came from, not against itself. A
 * holder is linked into the bucket of every block its bytes touch.
 */
#define EVMOVE_BLOCK_SHIFT 16
#define EVMOVE_BUCKETS	   512

struct evmove_hold;

struct evmove_link {
	struct evmove_hold *h;
	struct evmove_link *next, **pprev;
};

/* One split chain, kept whole while its parts are referenced. */
struct evmove_hold {
	struct evbuffer *keep;
	const char *start, *end; /* the first chain's bytes when first cut */
	unsigned refs;
	size_t nlinks;
	struct evmove_link links[];
};

/* One table per thread: a buffer and its chains belong to one loop. */
static _Thread_local struct evmove_link *evmove_table[EVMOVE_BUCKETS];
/* Where a rest is put together, kept empty for the next move (taken
 * while in use: a callback that runs during a move may move too). */
static _Thread_local struct evbuffer *evmove_rest;

static size_t
evmove_bucket(uintptr_t block)
{
	return (size_t)(block ^ block >> 9) % EVMOVE_BUCKETS;
}

static uintptr_t
evmove_block(const char *p)
{
	return (uintptr_t)p >> EVMOVE_BLOCK_SHIFT;
}

/* The live holder whose bytes hold p, or NULL. */
static struct evmove_hold *
evmove_find(const char *p)
{
	const struct evmove_link *l;
	uintptr_t a = (uintptr_t)p;

	for (l = evmove_table[evmove_bucket(evmove_block(p))]; l != NULL;
	     l = l->next)
		if ((uintptr_t)l->h->start <= a && a < (uintptr_t)l->h->end)
			return l->h;
	return NULL;
}

static struct evmove_hold *
evmove_hold_new(const char *start, const char *end)
{
	uintptr_t b, first = evmove_block(start), last = evmove_block(end - 1);
	size_t n = (size_t)(last - first) + 1, i = 0;
	struct evmove_hold *h;
	struct evmove_link **head;

	h = malloc(sizeof(*h) + n * sizeof(h->links[0]));
	if (h == NULL)
		return NULL;
	if ((h->keep = evbuffer_new()) == NULL) {
		free(h);
		return NULL;
	}
	h->start = start;
	h->end = end;
	h->refs = 1; /* the caller's, until it is done */
	h->nlinks = n;
	for (b = first; i < n; b++, i++) {
		head = &evmove_table[evmove_bucket(b)];
		h->links[i].h = h;
		h->links[i].next = *head;
		h->links[i].pprev = head;
		if (*head != NULL)
			(*head)->pprev = &h->links[i].next;
		*head = &h->links[i];
	}
	return h;
}

static void
evmove_unref(const void *data, size_t len, void *arg)
{
	struct evmove_hold *h = arg;
	size_t i;

	(void)data;
	(void)len;
	if (--h->refs > 0)
		return;
	for (i = 0; i < h->nlinks; i++) {
		*h->links[i].pprev = h->links[i].next;
		if (h->links[i].next != NULL)
			h->links[i].next->pprev = h->links[i].pprev;
	}
	evbuffer_free(h->keep);
	free(h);
}

/*
 * evbuffer_remove_buffer() ends at a chain boundary with an add of no
 * bytes, which, when the last chain it moved is a reference (only the
 * parts of split chains are, here), appends an empty chain as large as
 * that part. Adding an empty reference frees it.
 */
static void
evmove_trim(struct evbuffer *b, const char *last)
{
	if (evmove_find(last) != NULL)
		(void)evbuffer_add_reference(b, "", 0, NULL, NULL);
}

/*
 * src starts with the chain [p, p + len) and head < len: put
 * [p, p + head) at the end of dst by reference to that chain, and leave
 * [p + head, p + len) at the front of src, by reference too or, with
 * copy_rest, as a copy (then only dst's part keeps the chain). A chain
 * that is a part of an earlier split (from) is not held again: its two
 * parts refer to that split's holder, and it is dropped. Return 0, or
 * -1 with src and dst as before.
 */
static int
evmove_split(struct evbuffer *src, struct evbuffer *dst, char *p, size_t len,
    size_t head, int copy_rest, struct evmove_hold *from)
{
	struct evbuffer_iovec v;
	struct evmove_hold *h = from;
	struct evbuffer *rest = NULL;
	int rc = -1;

	/* src as peeked, and its start not frozen (draining nothing
	 * tells): then what follows the last allocation cannot fail. */
	if (evbuffer_peek(src, 1, NULL, &v, 1) < 1 || v.iov_base != p ||
	    v.iov_len != len || evbuffer_drain(src, 0) != 0)
		return -1;
	if (h == NULL) {
		if ((h = evmove_hold_new(p, p + len)) == NULL)
			return -1;
	} else {
		h->refs++; /* ours, until the end */
	}
	rest = evmove_rest;
	evmove_rest = NULL;
	if (rest == NULL && (rest = evbuffer_new()) == NULL)
		goto out;
	if (copy_rest ? evbuffer_add(rest, p + head, len - head) != 0 :
			evbuffer_add_reference(rest, p + head, len - head,
			    evmove_unref, h) != 0)
		goto out;
	if (!copy_rest)
		h->refs++;
	if (evbuffer_add_reference(dst, p, head, evmove_unref, h) != 0)
		goto out; /* rest's part goes with rest */
	h->refs++;
	/* The chain leaves src: whole into its new holder (a chain of
	 * bytes read, so evbuffer_remove_buffer() leaves nothing behind
	 * it), or, a part, dropped. */
	if (from == NULL)
		(void)evbuffer_remove_buffer(src, h->keep, len);
	else
		(void)evbuffer_drain(src, len);
	(void)evbuffer_prepend_buffer(src, rest);
	rc = 0;
out:
	if (rest != NULL) { /* empty, or its part is dropped */
		(void)evbuffer_drain(rest, evbuffer_get_length(rest));
		if (evmove_rest == NULL)
			evmove_rest = rest;
		else
			evbuffer_free(rest);
	}
	evmove_unref(NULL, 0, h);
	return rc;
}

int
evmove_add(struct evbuffer *dst, const void *p, size_t n)
{
	struct evbuffer_iovec v;

	if (n == 0)
		return 0;
	if (evbuffer_reserve_space(dst, (ev_ssize_t)n, &v, 1) != 1 ||
	    v.iov_len < n)
		return -1;
	memcpy(v.iov_base, p, n);
	v.iov_len = n;
	return evbuffer_commit_space(dst, &v, 1);
}

/* Copy the first n bytes of src, which start at p, to dst, and drain
 * them from src only once they are there (evbuffer_remove_buffer()
 * drains them even when its copy failed). A src whose start is frozen
 * fails first (draining nothing tells), so no byte is doubled. */
static int
evmove_copy(struct evbuffer *src, struct evbuffer *dst, const char *p,
    size_t n)
{
	if (evbuffer_drain(src, 0) != 0 || evmove_add(dst, p, n) != 0)
		return -1;
	return evbuffer_drain(src, n) == 0 ? 0 : -1;
}

/*
 * src starts with the chain [p, p + len), and head < len of it go to
 * dst: share what is long enough to share, copy what is not. A chain
 * that is a part of an earlier split counts as that split's chain.
 */
static int
evmove_part(struct evbuffer *src, struct evbuffer *dst, char *p, size_t len,
    size_t head)
{
	struct evmove_hold *from = evmove_find(p);
	const char *start = p, *end = p + len;
	size_t lim;

	if (from != NULL && (uintptr_t)(p + len) <= (uintptr_t)from->end) {
		start = from->start;
		end = from->end;
	} else {
		from = NULL;
	}
	lim = (size_t)(end - start) / EVMOVE_SHARE_RATIO;
	if (lim < EVMOVE_COPY_MAX)
		lim = EVMOVE_COPY_MAX;
	if (head > lim &&
	    evmove_split(src, dst, p, len, head, len - head <= lim, from) == 0)
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
		if (whole > 0) {
			if (evbuffer_remove_buffer(src, dst, whole) !=
			    (int)whole)
				return -1;
			/* The last whole extent: nv - 1, or the last one
			 * looked at when there were more. */
			evmove_trim(dst,
			    v[(nv < EVMOVE_EXTENTS ? nv : EVMOVE_EXTENTS) - 1]
				.iov_base);
		} else if (head == 0) {
			return -1; /* a look of empty chains: no progress */
		}
		n -= whole;
		if (head > 0)
			return evmove_part(src, dst, v[nv].iov_base,
			    v[nv].iov_len, head);
	}
	return 0;
}
