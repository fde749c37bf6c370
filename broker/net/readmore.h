/* SPDX-License-Identifier: ISC */
/*
 * readmore: larger reads and writes on a bufferevent. libevent 2.1
 * reads a socket 4 KiB at a time (EVBUFFER_MAX_READ, not settable before
 * 2.2), so a bulk transfer costs a read, a callback and a guest frame
 * per 4 KiB. From a read callback, readmore() reads on, in one readv(),
 * up to a bound, when the bufferevent's own read came back full. And a
 * bufferevent writes at most 16 KiB per callback (and a TLS one reads at
 * most that) unless told otherwise: readmore_bulk() tells it.
 */
#ifndef EGRESS_BROKER_NET_READMORE_H
#define EGRESS_BROKER_NET_READMORE_H

#include <stddef.h>
#include <sys/types.h>

struct bufferevent;

#define READMORE_CHUNK 4096 /* what libevent 2.1 reads at once */

/*
 * When bev is a plain socket bufferevent whose input holds at least
 * READMORE_CHUNK and less than high bytes (its last read was likely
 * full), read on into its input up to high bytes in one readv(). A short
 * read or end of file is left for the bufferevent's next read to see
 * (the socket stays readable). Return 0, or -1 when the socket reported
 * an error: reading it cleared it from the socket, so the caller must
 * treat the connection as failed (the bufferevent would see a clean end
 * of file next). Nothing happens on a TLS bufferevent or without a
 * descriptor.
 */
int readmore(struct bufferevent *bev, size_t high);

/*
 * Read up to want bytes from bev's socket into its input in one readv(),
 * for an owner that watches the socket itself (the bufferevent's reading
 * disabled). Return the count, 0 at end of file, or -1 with errno
 * (EAGAIN: nothing yet; EINVAL: a TLS bufferevent, no descriptor or
 * want 0).
 */
ssize_t readmore_read(struct bufferevent *bev, size_t want);

#define READMORE_BULK (256 * 1024) /* per read or write callback */

/*
 * Let bev write up to READMORE_BULK per write callback, and read up to
 * that per read callback, instead of libevent's 16 KiB: a peer that
 * drains its socket buffer at once is then refilled with one write, not
 * one per 16 KiB, each a wake-up of that peer. The read watermarks still
 * bound what is read ahead. A TLS bufferevent (socket or filter) gets
 * the write limit only: it reads a record (at most 16 KiB) at a time
 * into space reserved for its whole read limit, so a larger limit would
 * only leave most of each allocation empty. Return 0, or -1 (bev NULL).
 */
int readmore_bulk(struct bufferevent *bev);

#endif /* EGRESS_BROKER_NET_READMORE_H */
