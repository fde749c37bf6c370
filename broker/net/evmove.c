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
static _Thread_local size_t evmove_holders; /* live in the table */
/* Empty buffers kept for the next holder or rest (taken while in use:
 * a callback that runs during a move may move too): a new one for each
 * split cost about 3,000 instructions per 1 MiB body. */
#define EVMOVE_SPARES 16
static _Thread_local struct evbuffer *evmove_spares[EVMOVE_SPARES];
static _Thread_local size_t evmove_nspares;

/* An empty buffer, kept or new. */
static struct evbuffer *
evmove_spare_take(void)
{
	return evmove_nspares > 0 ? evmove_spares[--evmove_nspares] :
				    evbuffer_new();
}

/* Give a buffer taken with evmove_spare_take() back, emptied. */
static void
evmove_spare_give(struct evbuffer *b)
{
	if (b == NULL)
		return;
	(void)evbuffer_drain(b, evbuffer_get_length(b));
	if (evmove_nspares < EVMOVE_SPARES)
		evmove_spares[evmove_nspares++] = b;
	else
		evbuffer_free(b);
}

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

	if (evmove_holders == 0)
		return NULL;
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
	if ((h->keep = evmove_spare_take()) == NULL) {
		free(h);
		return NULL;
	}
	h->start = start;
	h->end = end;
	h->refs = 1; /* the caller's, until it is done */
	h->nlinks = n;
	evmove_holders++;
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
	evmove_holders--;
	evmove_spare_give(h->keep);
	free(h);
}

/* The longest part of the chain [start, end) that is copied, not
 * shared. */
static size_t
evmove_lim(const char *start, const char *end)
{
	size_t lim = (size_t)(end - start) / EVMOVE_SHARE_RATIO;

	return lim < EVMOVE_COPY_MAX ? EVMOVE_COPY_MAX : lim;
}

/* The holder of the part [p, p + len), or NULL when it is no part. */
static struct evmove_hold *
evmove_part_of(const char *p, size_t len)
{
	struct evmove_hold *h = evmove_find(p);

	return h != NULL && (uintptr_t)(p + len) <= (uintptr_t)h->end ?
	    h :
	    NULL;
}

/*
 * A part at the front of b (first, its first extent) that drains,
 * copies or removes have made short for its chain (what is left of a
 * shared rest) is replaced by a copy, so that it does not keep the
 * chain, nor, moved on whole, carry the chain along. Return 1 when it
 * was, 0 when there was nothing to do, -1 with b as before.
 */
static int
evmove_tidy(struct evbuffer *b, const struct evbuffer_iovec *first)
{
	struct evmove_hold *h;
	struct evbuffer *copy;
	int rc = -1;

	if (first->iov_len == 0 ||
	    (h = evmove_part_of(first->iov_base, first->iov_len)) == NULL ||
	    first->iov_len > evmove_lim(h->start, h->end))
		return 0;
	if ((copy = evmove_spare_take()) == NULL)
		return -1;
	/* Draining nothing tells whether b's start is frozen. */
	if (evbuffer_drain(b, 0) == 0 &&
	    evbuffer_add(copy, first->iov_base, first->iov_len) == 0) {
		(void)evbuffer_drain(b, first->iov_len);
		(void)evbuffer_prepend_buffer(b, copy);
		rc = 1;
	}
	evmove_spare_give(copy);
	return rc;
}

int
evmove_settle(struct evbuffer *b)
{
	struct evbuffer_iovec v;

	if (evmove_holders == 0 || evbuffer_peek(b, 1, NULL, &v, 1) < 1)
		return 0;
	return evmove_tidy(b, &v) < 0 ? -1 : 0;
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
	if ((rest = evmove_spare_take()) == NULL)
		goto out;
	/* Each reference is counted before it is added: adding runs the
	 * buffer's callbacks, which may drain it at once. */
	if (copy_rest) {
		if (evbuffer_add(rest, p + head, len - head) != 0)
			goto out;
	} else {
		h->refs++;
		if (evbuffer_add_reference(rest, p + head, len - head,
			evmove_unref, h) != 0) {
			h->refs--; /* never added: no cleanup will run */
			goto out;
		}
	}
	h->refs++;
	if (evbuffer_add_reference(dst, p, head, evmove_unref, h) != 0) {
		h->refs--;
		goto out; /* rest's part goes with rest */
	}
	/* The chain leaves src: whole into its new holder, or, a part,
	 * dropped. A chain that ends src takes src's empty chains after
	 * it along (evbuffer_remove_buffer() moves them all then), which
	 * the holder must not keep. */
	if (from == NULL) {
		int ends = len == evbuffer_get_length(src);

		(void)evbuffer_remove_buffer(src, h->keep, len);
		if (ends)
			(void)evbuffer_add_reference(h->keep, "", 0, NULL,
			    NULL);
	} else {
		(void)evbuffer_drain(src, len);
	}
	(void)evbuffer_prepend_buffer(src, rest);
	rc = 0;
out:
	evmove_spare_give(rest); /* empty, or its part is dropped */
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
	struct evmove_hold *from = evmove_part_of(p, len);
	size_t lim = from != NULL ? evmove_lim(from->start, from->end) :
				    evmove_lim(p, p + len);

	if (head > lim &&
	    evmove_split(src, dst, p, len, head, len - head <= lim, from) == 0)
		return 0;
	if (evmove_copy(src, dst, p, head) != 0)
		return -1;
	/* What is left of a part may now be short for its chain. */
	return from != NULL ? evmove_settle(src) : 0;
}

int
evmove(struct evbuffer *src, struct evbuffer *dst, size_t n)
{
	struct evbuffer_iovec v[EVMOVE_EXTENTS];
	size_t whole, head, len;
	int i, nv, rc, tidied = 0;

	if (n > (len = evbuffer_get_length(src)))
		return -1;
	while (n > 0) {
		/* All of src: its front was settled by the caller. */
		if (n == len)
			return evbuffer_add_buffer(dst, src) == 0 ? 0 : -1;
		nv = evbuffer_peek(src, (ev_ssize_t)n, NULL, v,
		    EVMOVE_EXTENTS);
		if (nv < 1)
			return -1;
		/* First, the part at src's front, if any, long enough to
		 * move whole; if it was not, look again. */
		if (!tidied && evmove_holders > 0) {
			tidied = 1;
			if ((rc = evmove_tidy(src, &v[0])) != 0) {
				if (rc < 0)
					return -1;
				continue;
			}
		}
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
			len -= whole;
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
