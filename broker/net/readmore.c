/* SPDX-License-Identifier: ISC */
/*
 * readmore: larger reads and writes on a bufferevent (readmore.h).
 */
#include <sys/uio.h>

#include <errno.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>

#include "broker/net/readmore.h"

/* One readv() of up to want bytes from fd into bev's input, whose end
 * the bufferevent keeps frozen between its own reads: added as it does,
 * then frozen again. Return the count, 0 at end of file, -1 (errno). */
static ssize_t
readmore_readv(struct bufferevent *bev, evutil_socket_t fd, size_t want)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_iovec v[2];
	struct iovec iov[2];
	size_t left;
	ssize_t n;
	int nv, i;

	(void)evbuffer_unfreeze(in, 0);
	nv = evbuffer_reserve_space(in, (ev_ssize_t)want, v, 2);
	if (nv < 1) {
		(void)evbuffer_freeze(in, 0);
		errno = ENOMEM;
		return -1;
	}
	left = want; /* the space reserved may be larger */
	for (i = 0; i < nv; i++) {
		iov[i].iov_base = v[i].iov_base;
		iov[i].iov_len = v[i].iov_len < left ? v[i].iov_len : left;
		left -= iov[i].iov_len;
	}
	n = readv(fd, iov, nv);
	if (n <= 0) {
		int e = errno;

		(void)evbuffer_commit_space(in, v, 0);
		(void)evbuffer_freeze(in, 0);
		errno = e;
		return n;
	}
	left = (size_t)n;
	for (i = 0; i < nv && left > 0; i++) {
		if (v[i].iov_len > left)
			v[i].iov_len = left;
		left -= v[i].iov_len;
	}
	(void)evbuffer_commit_space(in, v, i);
	(void)evbuffer_freeze(in, 0);
	return n;
}

int
readmore(struct bufferevent *bev, size_t high)
{
	size_t have = evbuffer_get_length(bufferevent_get_input(bev));
	evutil_socket_t fd;
	ssize_t n;

	if (have < READMORE_CHUNK || have >= high ||
	    bufferevent_openssl_get_ssl(bev) != NULL ||
	    (fd = bufferevent_getfd(bev)) < 0)
		return 0;
	n = readmore_readv(bev, fd, high - have);
	/* EOF (0) is seen again by the bufferevent; an error is not */
	return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
		errno != EINTR && errno != ENOMEM ?
	    -1 :
	    0;
}

ssize_t
readmore_read(struct bufferevent *bev, size_t want)
{
	evutil_socket_t fd;

	if (want == 0 || bufferevent_openssl_get_ssl(bev) != NULL ||
	    (fd = bufferevent_getfd(bev)) < 0) {
		errno = EINVAL;
		return -1;
	}
	return readmore_readv(bev, fd, want);
}

int
readmore_bulk(struct bufferevent *bev)
{
	if (bev == NULL ||
	    bufferevent_set_max_single_write(bev, READMORE_BULK) != 0)
		return -1;
	/* A TLS bufferevent reserves its whole read limit for each record
	 * (of at most 16 KiB) that it reads. */
	if (bufferevent_openssl_get_ssl(bev) == NULL &&
	    bufferevent_set_max_single_read(bev, READMORE_BULK) != 0)
		return -1;
	return 0;
}
