/* SPDX-License-Identifier: ISC */
/*
 * evmove: move bytes from the front of one evbuffer to the end of
 * another without copying them. evbuffer_remove_buffer() hands whole
 * chains over but copies the part of a chain that the count splits: a
 * 64 KiB frame cut from a 124 KiB socket read copies half of every
 * body. evmove() keeps such a chain whole in a holder of its own, adds
 * its two parts to the two buffers by reference, and frees it once both
 * references are drained. A short part is copied instead
 * (EVMOVE_COPY_MAX): that costs less than the references.
 */
#ifndef EGRESS_BROKER_NET_EVMOVE_H
#define EGRESS_BROKER_NET_EVMOVE_H

#include <stddef.h>

struct evbuffer;

#define EVMOVE_COPY_MAX 4096 /* a split part this short is copied */

/*
 * Move the first n bytes of src to the end of dst, as
 * evbuffer_remove_buffer() does, sharing rather than copying a chain
 * that n splits (its memory stays allocated until both parts are
 * drained). Return 0, or -1 with nothing moved when src holds fewer than
 * n bytes, and -1 when memory ran out (then src and dst are as before,
 * save that whole chains may already have moved: the caller fails the
 * stream either way).
 */
int evmove(struct evbuffer *src, struct evbuffer *dst, size_t n);

#endif /* EGRESS_BROKER_NET_EVMOVE_H */
