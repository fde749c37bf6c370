/* SPDX-License-Identifier: ISC */
/*
 * pipemove: socket to socket through two pipes, behind a header
 * (pipemove.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "broker/net/pipemove.h"

#define PM_FILL_BUFS 16 /* the first pipe's buffers */
#define PM_SEND_BUFS 32 /* the second's: a header and 16 buffers */
#define PM_FLAGS     (SPLICE_F_MOVE | SPLICE_F_NONBLOCK)

static void
pm_close_pair(int p[2])
{
	if (p[0] >= 0)
		(void)close(p[0]);
	if (p[1] >= 0)
		(void)close(p[1]);
	p[0] = p[1] = -1;
}

/* Splice one byte from a socket into the first pipe and read it back:
 * does this system let a socket's bytes be spliced at all? Return 0; -2
 * with errno when the splice itself failed (EPERM from a system call
 * filter, say); -1 with errno when something else did. */
static int
pm_probe(struct pipemove *pm)
{
	int sv[2], e = 0, rc = -1;
	ssize_t n;
	char c;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
		sv) != 0)
		return -1;
	if (write(sv[0], "p", 1) != 1) {
		e = errno != 0 ? errno : EIO;
	} else if ((n = pipemove_fill(pm, sv[1], 1)) != 1) {
		e = n < 0 ? errno : EIO;
		rc = -2;
	} else if (read(pm->fill[0], &c, 1) != 1) {
		e = EIO;
	}
	(void)close(sv[0]);
	(void)close(sv[1]);
	if (e == 0)
		return 0;
	errno = e;
	return rc;
}

int
pipemove_open(struct pipemove *pm)
{
	long page = sysconf(_SC_PAGESIZE);
	int fill, send, e, rc = -1;

	pm->fill[0] = pm->fill[1] = pm->send[0] = pm->send[1] = -1;
	if (page <= 0 || page > 1024 * 1024) {
		errno = EINVAL;
		return -1;
	}
	/* A pipe holds as many buffers as its size has pages. */
	fill = (int)page * PM_FILL_BUFS;
	send = (int)page * PM_SEND_BUFS;
	if (pipe2(pm->fill, O_NONBLOCK | O_CLOEXEC) == 0 &&
	    pipe2(pm->send, O_NONBLOCK | O_CLOEXEC) == 0 &&
	    fcntl(pm->fill[1], F_SETPIPE_SZ, fill) == fill &&
	    fcntl(pm->send[1], F_SETPIPE_SZ, send) >= send &&
	    (rc = pm_probe(pm)) == 0)
		return 0;
	e = errno;
	pipemove_close(pm);
	errno = e;
	return rc;
}

void
pipemove_close(struct pipemove *pm)
{
	pm_close_pair(pm->fill);
	pm_close_pair(pm->send);
}

ssize_t
pipemove_fill(struct pipemove *pm, int in, size_t max)
{
	ssize_t n;

	if (max > PIPEMOVE_MAX)
		max = PIPEMOVE_MAX;
	do
		n = splice(in, NULL, pm->fill[1], NULL, max, PM_FLAGS);
	while (n < 0 && errno == EINTR);
	return n;
}

/* Read whatever is left in the pipe fd (no more than it holds) and drop
 * it, so the pair is empty for the next move. */
static void
pm_discard(int fd)
{
	char junk[4096];

	while (read(fd, junk, sizeof(junk)) > 0)
		;
}

/* Move len bytes left in the pipe fd to the end of spill (a copy), in
 * reads of up to 64 KiB. Return 0, or -1 (ENOMEM, or the pipe failed):
 * the rest is dropped. */
static int
pm_spill(int fd, size_t len, struct evbuffer *spill)
{
	struct evbuffer_iovec v[2];
	struct iovec iov[2];
	size_t left, want;
	ssize_t n;
	int nv, i;

	while (len > 0) {
		want = len < PIPEMOVE_MAX ? len : PIPEMOVE_MAX;
		nv = evbuffer_reserve_space(spill, (ev_ssize_t)want, v, 2);
		if (nv < 1)
			break;
		/* The space may be larger: read no more than is ours. */
		for (i = 0; i < nv; i++) {
			iov[i].iov_base = v[i].iov_base;
			iov[i].iov_len = v[i].iov_len < want ?
			    v[i].iov_len :
			    want;
			want -= iov[i].iov_len;
		}
		do
			n = readv(fd, iov, nv);
		while (n < 0 && errno == EINTR);
		if (n <= 0) {
			(void)evbuffer_commit_space(spill, v, 0);
			break;
		}
		left = (size_t)n;
		for (i = 0; i < nv && left > 0; i++) {
			if (v[i].iov_len > left)
				v[i].iov_len = left;
			left -= v[i].iov_len;
		}
		if (evbuffer_commit_space(spill, v, i) != 0)
			break;
		len -= (size_t)n;
	}
	if (len == 0)
		return 0;
	pm_discard(fd);
	return -1;
}

ssize_t
pipemove_send(struct pipemove *pm, const void *hdr, size_t hlen, size_t n,
    int out, struct evbuffer *spill)
{
	size_t moved = 0, took = 0, total;
	int bad;
	ssize_t k;

	/* A pipe write of at most PIPE_BUF bytes is whole or nothing. */
	if (hlen > 0 && write(pm->send[1], hdr, hlen) != (ssize_t)hlen) {
		bad = evbuffer_add(spill, hdr, hlen) != 0 ||
		    pm_spill(pm->fill[0], n, spill) != 0;
		if (bad)
			pm_discard(pm->fill[0]);
		return bad ? -1 : 0;
	}
	while (moved < n) {
		k = splice(pm->fill[0], NULL, pm->send[1], NULL, n - moved,
		    PM_FLAGS);
		if (k > 0)
			moved += (size_t)k;
		else if (k == 0 || errno != EINTR)
			break;
	}
	total = hlen + moved;
	while (took < total) {
		k = splice(pm->send[0], NULL, out, NULL, total - took,
		    PM_FLAGS);
		if (k > 0)
			took += (size_t)k;
		else if (k == 0 || errno != EINTR)
			break; /* full, or failed: its owner sees which */
	}
	/* What out did not take, in order: the rest of the second pipe,
	 * then what never left the first. */
	bad = pm_spill(pm->send[0], total - took, spill) != 0 ||
	    pm_spill(pm->fill[0], n - moved, spill) != 0;
	if (bad) {
		pm_discard(pm->send[0]);
		pm_discard(pm->fill[0]);
		return -1;
	}
	return (ssize_t)took;
}

void
pipemove_drop(struct pipemove *pm)
{
	pm_discard(pm->fill[0]);
}

int
pipemove_take(struct pipemove *pm, size_t n, struct evbuffer *dst)
{
	return pm_spill(pm->fill[0], n, dst);
}
