/* SPDX-License-Identifier: ISC */
/*
 * pipemove: move bytes from one socket to another, behind a header of
 * the caller's, without copying them through user space. A socket read
 * is spliced into one pipe; the header is written into a second, the
 * read is spliced behind it (buffers change hands, no copy), and that
 * pipe is spliced into the destination socket in one send, so its
 * reader is woken once for header and bytes together. What the
 * destination does not take at once is read back out of the pipes, in
 * order, into a buffer of the caller's (the only copy, and only of the
 * part that did not fit). Both pipes are empty between two moves, so
 * one pair serves every connection of a thread.
 */
#ifndef EGRESS_BROKER_NET_PIPEMOVE_H
#define EGRESS_BROKER_NET_PIPEMOVE_H

#include <stddef.h>
#include <sys/types.h>

struct evbuffer;

/*
 * The most one move carries. The first pipe holds 16 buffers (16 pages
 * in size), each a reference to the memory of the socket's received data
 * for as long as the destination has not read it, while the
 * destination's socket counts only the bytes. A move of fewer than
 * PIPEMOVE_MIN bytes (a sparse read: small buffers, each holding a whole
 * page or more) is to be copied instead (pipemove_take()), so what a
 * reader that stops reading keeps pinned is at most 16 buffers per
 * PIPEMOVE_MIN bytes it is charged for: 16 pages, or more where the
 * network stack received into larger pages (loopback's 32 KiB
 * fragments, some drivers).
 */
#define PIPEMOVE_MAX (64 * 1024)
#define PIPEMOVE_MIN (16 * 1024)

struct pipemove {
	int fill[2]; /* the socket read */
	int send[2]; /* header, then the read */
};

/*
 * Open both pipes (non-blocking, close-on-exec), sized for PIPEMOVE_MAX
 * and a header, and check that a socket's bytes can be spliced into
 * them (one byte, from a socket pair): a system call filter or a kernel
 * that refuses splice says so here, so that a failed fill later is
 * always the socket's. Return 0; -2 with errno when that splice failed
 * (EPERM, ENOSYS, EINVAL: splicing is refused); or -1 with errno when
 * anything else did (descriptors, memory, the pipes' size limit: it may
 * work later). Nothing is left open on failure.
 */
int pipemove_open(struct pipemove *pm);

/* Close both pipes. Safe again on a closed pipemove, and after a failed
 * pipemove_open(). */
void pipemove_close(struct pipemove *pm);

/*
 * Splice up to max (at most PIPEMOVE_MAX) bytes from the socket in into
 * the first pipe. Return the count, 0 at end of file, or -1 with errno
 * (EAGAIN: nothing to read yet; nothing was read). The bytes must be
 * sent (pipemove_send()) before the next fill.
 */
ssize_t pipemove_fill(struct pipemove *pm, int in, size_t max);

/*
 * Send hlen bytes of hdr and then the n bytes the last fill read to the
 * socket out (non-blocking). What out does not take (it is full, or
 * failed: its owner sees that on its next write) is appended to spill,
 * which must hold nothing that should follow it. Return the bytes out
 * took, or -1 when bytes could not be moved into spill (ENOMEM, or the
 * pipes failed): the stream out carries is then broken and must be
 * closed. The pipes are empty again on return, in every case.
 */
ssize_t pipemove_send(struct pipemove *pm, const void *hdr, size_t hlen,
    size_t n, int out, struct evbuffer *spill);

/* Drop the bytes the last fill read (the pipes are empty again). */
void pipemove_drop(struct pipemove *pm);

/*
 * Move the n bytes the last fill read to the end of dst instead (a
 * copy). Return 0, or -1 (ENOMEM, or the pipe failed: they are dropped).
 * The pipes are empty again on return.
 */
int pipemove_take(struct pipemove *pm, size_t n, struct evbuffer *dst);

#endif /* EGRESS_BROKER_NET_PIPEMOVE_H */
