/* SPDX-License-Identifier: ISC */
/*
 * evmove: move bytes from the front of one evbuffer to the end of
 * another without copying them. evbuffer_remove_buffer() hands whole
 * chains over but copies the part of a chain that the count splits: a
 * 64 KiB frame cut from a 124 KiB socket read copies half of every
 * body. evmove() keeps such a chain whole in a holder of its own, adds
 * its two parts to the two buffers by reference, and frees it once both
 * references are drained.
 *
 * A part held by reference keeps its whole chain allocated, so a part
 * that is short for its chain is copied instead: one of at most
 * EVMOVE_COPY_MAX bytes, or of at most 1/EVMOVE_SHARE_RATIO of the
 * chain, whichever is more. A part of a part is measured against the
 * first chain (split chains are found again by address), and refers to
 * that chain's holder: cutting again never nests holders. A part that
 * copies and drains have made short for its chain (the last bytes of a
 * shared rest) is replaced by a copy: by evmove() when it moves part
 * of its buffer, before anything moves, and after a head is copied from
 * it; by evmove_settle(), which a caller that drains a buffer by other
 * means (a frame header, framing) calls before it moves all of it. A
 * part that stays shared therefore keeps at most EVMOVE_SHARE_RATIO times its size of the bytes its chain held when
 * first cut, except the one at a buffer's front, between a drain that
 * is not evmove()'s (a frame header read, a socket write) and the next
 * evmove() or evmove_settle() of that buffer: at most one chain per
 * buffer.
 *
 * What that does not count is room the chain had besides those bytes:
 * libevent rounds an allocation up to a power of two, bytes consumed
 * from its front before the cut stay allocated, and a chain still being
 * read into when it is cut keeps its free end. Reads here reserve at
 * most 256 KiB (512 KiB allocated), so a shared part of more than
 * EVMOVE_COPY_MAX bytes keeps at most 128 times its size, and 8 times
 * when its chain had no such room.
 */
#ifndef EGRESS_BROKER_NET_EVMOVE_H
#define EGRESS_BROKER_NET_EVMOVE_H

#include <stddef.h>

struct evbuffer;

#define EVMOVE_COPY_MAX	   4096 /* a split part this short is copied */
#define EVMOVE_SHARE_RATIO 8	/* or an eighth of its chain */

/*
 * Move the first n bytes of src to the end of dst, as
 * evbuffer_remove_buffer() does, sharing rather than copying a chain
 * that n splits, under the rule above. Return 0, or -1 with nothing
 * moved when src holds fewer than n bytes, and -1 when memory ran out:
 * then no byte is lost or doubled (dst followed by src holds what they
 * held), but whole chains may already have moved, and the caller fails
 * the stream.
 *
 * src and dst must differ, and no callback of theirs that runs at once
 * (not deferred) may touch src while the move is under way: it takes
 * src's first chain out and puts its rest back.
 */
int evmove(struct evbuffer *src, struct evbuffer *dst, size_t n);

/*
 * Copy the part at b's front if it is short for its chain (above).
 * Return 0, or -1 with b as before when memory ran out.
 */
int evmove_settle(struct evbuffer *b);

/*
 * evbuffer_add() for a buffer that may end with a shared part: after a
 * chain it cannot write to, evbuffer_add() allocates one as large as
 * that chain (128 KiB for a 9-byte frame header after a 64 KiB part);
 * this adds a chain only as large as n needs (libevent's least, 1 KiB,
 * for a short one; n with its header rounded up to a power of two for a
 * long one). Return 0, or -1 with nothing added.
 */
int evmove_add(struct evbuffer *dst, const void *p, size_t n);

#endif /* EGRESS_BROKER_NET_EVMOVE_H */
