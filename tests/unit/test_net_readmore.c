/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/net/readmore's readmore_bulk(): a plain
 * bufferevent writes and reads up to READMORE_BULK per callback, and
 * one write callback really sends more than libevent's 16 KiB; a TLS
 * bufferevent, on a socket or as a filter, gets the write limit only
 * (it reserves its whole read limit for each record it reads).
 */
#include <sys/socket.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include "broker/net/readmore.h"

static struct event_base *base;
static SSL_CTX *ctx;
static int sv[2] = { -1, -1 };

static void
setup(void)
{
	cr_assert_not_null(base = event_base_new());
	cr_assert_not_null(ctx = SSL_CTX_new(TLS_client_method()));
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	cr_assert_eq(evutil_make_socket_nonblocking(sv[0]), 0);
	cr_assert_eq(evutil_make_socket_nonblocking(sv[1]), 0);
}

static void
teardown(void)
{
	if (sv[1] >= 0)
		(void)close(sv[1]);
	SSL_CTX_free(ctx);
	event_base_free(base);
}

TestSuite(readmore, .init = setup, .fini = teardown);

Test(readmore, a_plain_bufferevent_reads_and_writes_in_bulk)
{
	struct bufferevent *bev = bufferevent_socket_new(base, sv[0],
	    BEV_OPT_CLOSE_ON_FREE);

	cr_assert_not_null(bev);
	cr_assert_lt(bufferevent_get_max_single_write(bev), READMORE_BULK);
	cr_assert_eq(readmore_bulk(bev), 0);
	cr_assert_eq(bufferevent_get_max_single_write(bev), READMORE_BULK);
	cr_assert_eq(bufferevent_get_max_single_read(bev), READMORE_BULK);
	bufferevent_free(bev);
	cr_assert_eq(readmore_bulk(NULL), -1);
}

Test(readmore, a_tls_socket_bufferevent_writes_in_bulk_only)
{
	struct bufferevent *bev;
	ev_ssize_t read_before;

	bev = bufferevent_openssl_socket_new(base, sv[0], SSL_new(ctx),
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
	cr_assert_not_null(bev);
	read_before = bufferevent_get_max_single_read(bev);
	cr_assert_eq(readmore_bulk(bev), 0);
	cr_assert_eq(bufferevent_get_max_single_write(bev), READMORE_BULK);
	cr_assert_eq(bufferevent_get_max_single_read(bev), read_before,
	    "a TLS bufferevent would reserve %d bytes a record",
	    (int)bufferevent_get_max_single_read(bev));
	cr_assert_leq(read_before, 16384);
	bufferevent_free(bev);
}

Test(readmore, a_tls_filter_writes_in_bulk_only)
{
	struct bufferevent *under, *tls;
	ev_ssize_t read_before;

	under = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
	cr_assert_not_null(under);
	tls = bufferevent_openssl_filter_new(base, under, SSL_new(ctx),
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
	cr_assert_not_null(tls);
	read_before = bufferevent_get_max_single_read(tls);
	cr_assert_eq(readmore_bulk(under), 0);
	cr_assert_eq(readmore_bulk(tls), 0);
	cr_assert_eq(bufferevent_get_max_single_read(under), READMORE_BULK);
	cr_assert_eq(bufferevent_get_max_single_write(tls), READMORE_BULK);
	cr_assert_eq(bufferevent_get_max_single_read(tls), read_before);
	bufferevent_free(tls);
}

/* Bytes one write callback of a bufferevent on sv[0] sends of 512 KiB
 * queued, with or without readmore_bulk(). */
static size_t
one_write(int bulk)
{
	static char body[512 * 1024];
	struct bufferevent *bev = bufferevent_socket_new(base, sv[0],
	    BEV_OPT_CLOSE_ON_FREE);
	int big = 1 << 20;
	size_t left;

	cr_assert_not_null(bev);
	(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	if (bulk)
		cr_assert_eq(readmore_bulk(bev), 0);
	cr_assert_eq(bufferevent_write(bev, body, sizeof(body)), 0);
	cr_assert_eq(event_base_loop(base, EVLOOP_ONCE), 0);
	left = evbuffer_get_length(bufferevent_get_output(bev));
	bufferevent_free(bev);
	sv[0] = -1;
	return sizeof(body) - left;
}

Test(readmore, one_write_callback_sends_more_than_16_kib)
{
	size_t n = one_write(1);

	cr_assert_gt(n, 4 * 16384, "one write callback sent %zu bytes", n);
}

/* The same without readmore_bulk(): libevent's own limit, so the test
 * above measures the call and not the socket. */
Test(readmore, without_it_one_write_callback_sends_16_kib)
{
	size_t n = one_write(0);

	cr_assert_leq(n, 16384, "one write callback sent %zu bytes", n);
	cr_assert_gt(n, 0);
}

/* readmore_read() reads no more than asked, however much the input's
 * free space and the socket hold, keeps what it read in the input, and
 * reports an empty socket, the end and a TLS bufferevent apart. */
Test(readmore, readmore_read_reads_what_it_is_asked)
{
	static char junk[100000];
	struct bufferevent *bev = bufferevent_socket_new(base, sv[0],
	    BEV_OPT_CLOSE_ON_FREE);
	struct bufferevent *tls;
	SSL *ssl;

	cr_assert_not_null(bev);
	sv[0] = -1; /* the bufferevent closes it */
	memset(junk, 'r', sizeof(junk));
	errno = 0;
	cr_assert_eq(readmore_read(bev, 1000), -1);
	cr_assert(errno == EAGAIN || errno == EWOULDBLOCK);
	cr_assert_eq(write(sv[1], junk, sizeof(junk)), (ssize_t)sizeof(junk));
	cr_assert_eq(readmore_read(bev, 1000), 1000);
	cr_assert_eq(readmore_read(bev, 5000), 5000);
	cr_assert_eq(evbuffer_get_length(bufferevent_get_input(bev)), 6000);
	cr_assert_eq(readmore_read(bev, 0), -1);
	cr_assert_eq(shutdown(sv[1], SHUT_WR), 0);
	while (readmore_read(bev, 65536) > 0)
		;
	cr_assert_eq(readmore_read(bev, 65536), 0);
	cr_assert_eq(evbuffer_get_length(bufferevent_get_input(bev)),
	    sizeof(junk));
	bufferevent_free(bev);
	cr_assert_not_null(ssl = SSL_new(ctx));
	cr_assert_not_null(tls = bufferevent_openssl_socket_new(base, -1, ssl,
			       BUFFEREVENT_SSL_CONNECTING,
			       BEV_OPT_CLOSE_ON_FREE));
	errno = 0;
	cr_assert_eq(readmore_read(tls, 1000), -1);
	cr_assert_eq(errno, EINVAL);
	bufferevent_free(tls);
}
